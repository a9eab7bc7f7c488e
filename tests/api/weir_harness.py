"""Harness of the API black-box suite: the real `weir` binary, started on a free
port with a temporary data dir, on SQLite and (when WEIR_TEST_DATABASE_URL is set)
on PostgreSQL in a schema of its own. Tests talk HTTP as a client would."""

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
PG_URL = os.environ.get("WEIR_TEST_DATABASE_URL")
# The embedded models (scripts/fetch-models); every server the tests start reads them
# from here unless a test says otherwise.
MODELS_DIR = Path(os.environ.get("WEIR_MODELS_DIR", ROOT / "data" / "models"))
# Flowise's UI (scripts/fetch-ui), served by every server the tests start.
UI_DIR = Path(os.environ.get("WEIR_UI_DIR", ROOT / "data" / "ui"))


def weir_bin() -> Path:
    bin_dir = os.environ.get("WEIR_BIN_DIR")
    if not bin_dir:
        subprocess.run(["cargo", "build", "-p", "weir-api"], cwd=ROOT, check=True)
        bin_dir = ROOT / "target" / "debug"
    path = Path(bin_dir) / "weir"
    assert path.exists(), f"{path} is missing: build with cargo build --workspace --bins"
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drop_schema(schema: str) -> None:
    if PG_URL and shutil.which("psql"):
        subprocess.run(["psql", PG_URL, "-qAtc", f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
                       check=False, capture_output=True)


class Weir:
    """One `weir` installation: a data dir, a store, and (once started) a server."""

    def __init__(self, tmp: Path, backend: str):
        self.backend = backend
        self.data_dir = tmp
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "PORT", "HOST"))}
        self.env.update(WEIR_DATA_DIR=str(tmp), HOST="127.0.0.1", LOG_LEVEL="info")
        self.env.setdefault("WEIR_MODELS_DIR", str(MODELS_DIR))
        self.env.setdefault("WEIR_UI_DIR", str(UI_DIR))
        # What a test leaves running when its server stops (a stream, a cancelled
        # provider call) gets 5 s, so a clean stop fits the 15 s `stop` allows; a
        # hang past the grace still fails there.
        self.env.setdefault("SHUTDOWN_GRACE_SECS", "5")
        self.schema = None
        if backend == "postgres":
            self.schema = f"weir_py_{uuid.uuid4().hex[:16]}"
            self.env.update(DATABASE_URL=PG_URL, DATABASE_SCHEMA=self.schema)
        self.proc = None
        self.url = None
        self.stdout_path = tmp / "serve.stdout"
        self.stderr_path = tmp / "serve.stderr"

    def cli(self, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run([str(weir_bin()), *args], env={**self.env, **(env or {})},
                                capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"weir {' '.join(args)} failed: {result.stderr}")
        return result

    def create_key(self, *permissions: str, workspace: str = "default", name: str = "test") -> str:
        args = ["keys", "create", "--workspace", workspace, "--name", name]
        for p in permissions:
            args += ["--permission", p]
        return self.cli(*args).stdout.strip().splitlines()[-1]

    def start(self) -> "Weir":
        port = free_port()
        self.env["PORT"] = str(port)
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([str(weir_bin()), "serve"], env=self.env,
                                     stdout=open(self.stdout_path, "ab"), stderr=open(self.stderr_path, "ab"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"weir serve exited: {self.stderr_path.read_text()}")
            try:
                if requests.get(f"{self.url}/api/v1/ping", timeout=1).status_code == 200:
                    return self
            except requests.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("weir serve did not become ready in 30 s")

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                tail = "\n".join(self.logs().splitlines()[-15:])
                raise AssertionError(f"weir serve did not stop within 15 s of SIGTERM; its log ends:\n{tail}")
        return self.proc.returncode if self.proc else 0

    def cleanup(self) -> None:
        self.stop()
        if self.schema:
            drop_schema(self.schema)

    def logs(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def start_replicas(make_weir, count: int, **env: str) -> list[Weir]:
    """`count` running servers sharing one PostgreSQL schema (dropped with the first)."""
    replicas = []
    for _ in range(count):
        w = make_weir("postgres")
        w.env.update(env)
        if replicas:
            w.env.update(DATABASE_SCHEMA=replicas[0].schema)
            w.schema = None  # dropped by the first
        replicas.append(w.start())
    return replicas


def backends():
    return [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.skipif(
            not PG_URL, reason="WEIR_TEST_DATABASE_URL is not set: PostgreSQL not tested")),
    ]


class Api:
    """A tiny client bound to a server and a key."""

    def __init__(self, url: str, key: str | None):
        self.url = url
        self.key = key

    def request(self, method: str, path: str, key: str | None = "default", **kw) -> requests.Response:
        headers = kw.pop("headers", {})
        key = self.key if key == "default" else key
        if key is not None:
            headers.setdefault("Authorization", f"Bearer {key}")
        return requests.request(method, f"{self.url}/api/v1{path}", headers=headers, timeout=30, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def with_key(self, key: str | None) -> "Api":
        return Api(self.url, key)


def assert_error(response: requests.Response, status: int, contains: str | None = None) -> dict:
    assert response.status_code == status, f"{response.status_code} {response.text}"
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"message"} and isinstance(body["message"], str) and body["message"], body
    if contains:
        assert contains in body["message"], body
    return body


FLOW = {"nodes": [], "edges": [], "viewport": {"x": 0, "y": 0, "zoom": 1}}


def wait_listening(port: int, what: str, timeout: float = 20) -> None:
    """Returns once something accepts connections on 127.0.0.1:`port`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{what} did not start")


def wait_for(check, timeout, what):
    """The first truthy value of `check()`, polled until `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")
