"""Pieces of the Python tool runtime's black-box suite: finding the binary and uv,
starting a server on port 0 and talking to it (fixtures are in conftest.py).

The binary is `$WEIR_BIN_DIR/weir-pyruntime` when set (scripts/test sets it), else the
debug build that `cargo build` makes here. Servers announce their address on stdout.
"""

import os
import secrets
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30


def runtime_binary() -> Path:
    bin_dir = os.environ.get("WEIR_BIN_DIR")
    if bin_dir:
        return Path(bin_dir).resolve() / "weir-pyruntime"
    subprocess.run(
        ["cargo", "build", "-p", "weir-pyruntime", "--bin", "weir-pyruntime"],
        cwd=REPO,
        check=True,
    )
    return REPO / "target" / "debug" / "weir-pyruntime"


def uv_binary() -> str | None:
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.exists() else shutil.which("uv")


class Runtime:
    """One running server with its own data directories."""

    def __init__(self, command: list[str], data: Path, env: dict[str, str] | None = None):
        self.data = data
        self.venvs = data / "venvs"
        self.artifacts = data / "artifacts"
        # PY_TOOL_* settings of the caller do not leak into the servers under test, except
        # PY_TOOL_REQUIRE_ISOLATION (CI sets it: every server must then have every layer).
        inherited = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("PY_TOOL_") or k == "PY_TOOL_REQUIRE_ISOLATION"
        }
        env = dict(env or {})
        if "PY_TOOL_API_KEY" not in env and "PY_TOOL_INSECURE_NO_KEY" not in env:
            # The runtime refuses to start without a key (tool code could call it).
            env["PY_TOOL_API_KEY"] = f"rt-{secrets.token_hex(16)}"
        self.env = {
            **inherited,
            "PY_TOOL_VENVS": str(self.venvs),
            "PY_TOOL_ARTIFACTS": str(self.artifacts),
            "PY_TOOL_HOST": "127.0.0.1",
            "PY_TOOL_PORT": "0",
            "RUST_LOG": "warn",
            **env,
        }
        self.log = open(data / "server.log", "wb")
        self.process = subprocess.Popen(
            command, env=self.env, stdout=subprocess.PIPE, stderr=self.log, cwd=data
        )
        self.url = self._wait_for_address()
        self.headers = {}
        if self.env.get("PY_TOOL_API_KEY"):
            self.headers["Authorization"] = f"Bearer {self.env['PY_TOOL_API_KEY']}"

    def _wait_for_address(self) -> str:
        found: list[str] = []

        def read():
            for line in self.process.stdout:
                text = line.decode(errors="replace").strip()
                if "listening on " in text:
                    found.append(text.split("listening on ", 1)[1])
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(START_TIMEOUT)
        if not found:
            self.stop()
            raise RuntimeError(f"runtime did not start: {(self.data / 'server.log').read_text()}")
        return found[0]

    def alive(self) -> bool:
        return self.process.poll() is None

    def post(self, path: str, body, timeout: float = 300, **kwargs) -> requests.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return requests.post(self.url + path, json=body, headers=headers, timeout=timeout, **kwargs)

    def get(self, path: str, **kwargs) -> requests.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return requests.get(self.url + path, headers=headers, timeout=60, **kwargs)

    def execute(self, code: str, expect_status: int = 200, **fields) -> dict:
        body = {"code": code, **fields}
        response = self.post("/tools/execute-python", body)
        assert response.status_code == expect_status, response.text
        return response.json()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def processes_with(marker: str) -> list[str]:
    """Command lines of the processes on this machine whose arguments contain `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found
