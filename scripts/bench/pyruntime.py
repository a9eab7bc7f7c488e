"""Benchmark of the Python tool runtime (see scripts/bench/pyruntime).

Starts weir-pyruntime on a free port with fresh data directories, then measures end to
end over HTTP (loopback, JSON, the full pipeline: templates, import detection, the
workspace's zygote, the fork and every isolation layer, artifacts) and, in the same run,
the baseline of spawning a fresh interpreter of the same venv for the same code.
Prints one markdown table.
"""

import argparse
import json
import os
import platform
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

PANDAS_CODE = "import pandas as pd\nresult = int(pd.DataFrame({'a': [1, 2]})['a'].sum())\n"
TRIVIAL_CODE = "result = 1"
JS_CODE = "const n = $x + 1;\nreturn { n, words: $input.split(' ').length };"
JS_GLOBALS = {"$x": 41, "$input": "a b c"}
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"
NODE_PACKAGES = Path(__file__).resolve().parents[2] / "tests" / ".cache" / "npm-prefix-bench-mcp"
ECHO = {"name": "echo", "arguments": {"message": "bench"}}


API_KEY = secrets.token_urlsafe(24)
# The pause before each "after idle" run: the runtime has finished tearing down the last
# run and made its next one's processes.
IDLE_BETWEEN = 0.03


def post(url, path, body, timeout=600):
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return (time.perf_counter() - started) * 1000, value


def after_idle(fn, n):
    """`n` timings of `fn`, each after `IDLE_BETWEEN` with nothing running."""
    samples = []
    for _ in range(n):
        time.sleep(IDLE_BETWEEN)
        samples.append(timed(fn)[0])
    return samples


def p50(samples):
    return statistics.median(samples)


def p90(samples):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]


def node_packages():
    """server-everything installed (once) into a prefix, as PY_TOOL_NODE_PACKAGES takes it."""
    done = NODE_PACKAGES / ".installed"
    if not done.exists():
        NODE_PACKAGES.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(NODE_PACKAGES),
                        EVERYTHING], check=True, capture_output=True, timeout=600)
        done.write_text(EVERYTHING)
    return NODE_PACKAGES


def mcp_call(url, workspace, method="tools/call", params=ECHO):
    body = post(url, "/tools/mcp-stdio", {"workspaceId": workspace, "method": method, "params": params,
                                          "server": {"command": "npx", "args": ["-y", EVERYTHING, "stdio"]}})
    if "result" not in body:
        raise SystemExit(f"MCP call failed: {body.get('error')}")
    return body


class DirectServer:
    """The same server driven over its own stdio pipes (no runtime, no sandbox)."""

    def __init__(self):
        script = node_packages() / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
        self.proc = subprocess.Popen(["node", str(script), "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.id += 1
        self.send({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        while True:
            answer = json.loads(self.proc.stdout.readline())
            if answer.get("id") == self.id:
                return answer

    def close(self):
        self.proc.kill()
        self.proc.wait()


def start(binary, data, uv):
    port_socket = socket.socket()
    port_socket.bind(("127.0.0.1", 0))
    port = port_socket.getsockname()[1]
    port_socket.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PY_TOOL_")}
    env.update(
        PY_TOOL_VENVS=str(data / "venvs"),
        PY_TOOL_ARTIFACTS=str(data / "artifacts"),
        PY_TOOL_PORT=str(port),
        PY_TOOL_UV=uv,
        PY_TOOL_API_KEY=API_KEY,
        PY_TOOL_NODE_PACKAGES=str(node_packages()),
        RUST_LOG="warn",
    )
    process = subprocess.Popen([binary], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    for line in process.stdout:
        if b"listening on" in line:
            return process, line.decode().split("listening on ", 1)[1].strip()
    raise SystemExit("the runtime did not start")


def run_ok(url, code, workspace):
    body = post(url, "/tools/execute-python", {"code": code, "workspaceId": workspace})
    if not body["success"]:
        raise SystemExit(f"run failed: {body['error']}")
    return body


def run_js(url, workspace):
    body = post(url, "/tools/execute-javascript", {"code": JS_CODE, "variables": JS_GLOBALS, "workspaceId": workspace})
    if not body["success"] or body["result"] != {"n": 42, "words": 3}:
        raise SystemExit(f"JavaScript run failed: {body['error'] or body['result']}")
    return body


def spawn_node_baseline(n):
    """The same function in a fresh Node.js process each time (a spawn-per-call executor)."""
    node = shutil.which("node")
    if not node:
        return [float("nan")]
    script = ("(async () => { const $x = 41, $input = 'a b c'; " + JS_CODE.replace("\n", " ")
              + " })().then(v => console.log(JSON.stringify(v)));")
    samples = []
    for _ in range(n):
        ms, result = timed(lambda: subprocess.run([node, "-e", script], capture_output=True))
        if result.returncode != 0:
            raise SystemExit(f"node baseline failed: {result.stderr.decode()}")
        samples.append(ms)
    return samples


def spawn_baseline(python, code, n):
    samples = []
    for _ in range(n):
        ms, result = timed(lambda: subprocess.run([python, "-c", code], capture_output=True))
        if result.returncode != 0:
            raise SystemExit(f"baseline failed: {result.stderr.decode()}")
        samples.append(ms)
    return samples


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("uv")
    parser.add_argument("--quick", action="store_true", help="fewer samples (under a minute)")
    args = parser.parse_args()
    n_trivial, n_pandas, n_first, n_venv = (30, 15, 3, 3) if args.quick else (300, 100, 10, 10)

    data = Path(tempfile.mkdtemp(prefix="weir-bench-"))
    process, url = start(args.binary, data, args.uv)
    rows = []
    try:
        # Warm trivial code.
        ws = "bench-trivial"
        for _ in range(5):
            run_ok(url, TRIVIAL_CODE, ws)
        trivial = [timed(lambda: run_ok(url, TRIVIAL_CODE, ws))[0] for _ in range(n_trivial)]
        python = str(data / "venvs" / ws / "bin" / "python")
        trivial_base = spawn_baseline(python, TRIVIAL_CODE.replace("result = ", "x = "), n_trivial)
        rows.append(("trivial code (`result = 1`), warm, back to back", trivial, trivial_base))
        # The same, one call at a time with the runtime idle in between (an agent's tool
        # call between two model turns): the latency of one run, not the throughput.
        spaced = after_idle(lambda: run_ok(url, TRIVIAL_CODE, ws), n_trivial)
        rows.append((f"trivial code, warm, each after {IDLE_BETWEEN * 1000:.0f} ms idle", spaced, trivial_base))

        # JavaScript, warm: the first run installs the engine; the zygote then learns its import.
        ws = "bench-javascript"
        run_js(url, ws)
        time.sleep(3)
        for _ in range(5):
            run_js(url, ws)
        javascript = [timed(lambda: run_js(url, ws))[0] for _ in range(n_trivial)]
        javascript_spaced = after_idle(lambda: run_js(url, ws), n_trivial)
        rows.append(("JavaScript function (`execute-javascript`, QuickJS), warm; baseline: a fresh `node -e`",
                     javascript, spawn_node_baseline(max(10, n_trivial // 10))))
        added_by_javascript = p50(javascript) - p50(trivial)
        rows.append((f"JavaScript function, warm, each after {IDLE_BETWEEN * 1000:.0f} ms idle",
                     javascript_spaced, rows[-1][2]))
        added_by_javascript_spaced = p50(javascript_spaced) - p50(spaced)

        # A stdio MCP server (server-everything's echo) in the sandbox: the first call
        # starts it (venv, zygote, the run, node, initialize); then warm calls. The
        # baseline drives the same server over its own pipes.
        ws = "bench-mcp-stdio"
        mcp_first = [timed(lambda: mcp_call(url, ws, "tools/list", {}))[0]]
        for _ in range(5):
            mcp_call(url, ws)
        mcp_warm = [timed(lambda: mcp_call(url, ws))[0] for _ in range(n_trivial)]
        direct_first = []
        direct = DirectServer()
        try:
            for _ in range(5):
                direct.request("tools/call", ECHO)
            direct_warm = [timed(lambda: direct.request("tools/call", ECHO))[0] for _ in range(n_trivial)]
        finally:
            direct.close()
        for _ in range(max(1, n_first)):
            ms, server = timed(DirectServer)
            server.close()
            direct_first.append(ms)
        rows.append(("stdio MCP `tools/call` (server-everything `echo`), warm; baseline: the same server "
                     "over its own pipes", mcp_warm, direct_warm))
        rows.append(("stdio MCP server's first call in a new workspace (venv, zygote, sandboxed `node`, "
                     "`initialize`, `tools/list`); baseline: spawn + `initialize`", mcp_first, direct_first))
        added_by_mcp = p50(mcp_warm) - p50(direct_warm)

        # pandas, warm: install once, let the zygote learn the import.
        ws = "bench-pandas"
        post(url, "/tools/install-packages", {"packages": ["pandas"], "workspace_id": ws})
        run_ok(url, PANDAS_CODE, ws)
        time.sleep(3)  # the replacement zygote that pre-imports pandas becomes ready
        for _ in range(5):
            run_ok(url, PANDAS_CODE, ws)
        pandas = [timed(lambda: run_ok(url, PANDAS_CODE, ws))[0] for _ in range(n_pandas)]
        python = str(data / "venvs" / ws / "bin" / "python")
        pandas_base = spawn_baseline(python, PANDAS_CODE, n_pandas)
        rows.append(("pandas import + two-row DataFrame sum, warm, back to back", pandas, pandas_base))
        pandas_spaced = after_idle(lambda: run_ok(url, PANDAS_CODE, ws), n_pandas)
        rows.append((f"pandas, warm, each after {IDLE_BETWEEN * 1000:.0f} ms idle", pandas_spaced, pandas_base))

        # First run in a brand-new workspace (venv creation, zygote start, the run).
        first = []
        for _ in range(n_first):
            ws = f"bench-new-{uuid.uuid4().hex[:8]}"
            first.append(timed(lambda: run_ok(url, TRIVIAL_CODE, ws))[0])
        first_base = []
        for _ in range(n_first):
            venv = data / f"baseline-{uuid.uuid4().hex[:8]}"
            first_base.append(
                timed(
                    lambda: (
                        subprocess.run([args.uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True),
                        subprocess.run([str(venv / "bin" / "python"), "-c", "x = 1"], check=True),
                    )
                )[0]
            )
        rows.append(("first run in a brand-new workspace", first, first_base))

        # A new venv via uv (install-packages with nothing to install creates it).
        venvs = []
        for _ in range(n_venv):
            ws = f"bench-venv-{uuid.uuid4().hex[:8]}"
            venvs.append(
                timed(lambda: post(url, "/tools/install-packages", {"packages": [], "workspace_id": ws}))[0]
            )
        venv_base = []
        for _ in range(n_venv):
            venv = data / f"baseline-{uuid.uuid4().hex[:8]}"
            venv_base.append(
                timed(lambda: subprocess.run([args.uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True))[0]
            )
        rows.append(("new venv via uv (install-packages, no packages)", venvs, venv_base))
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(data, ignore_errors=True)

    cpu = "unknown CPU"
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"weir-pyruntime benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"{os.cpu_count()} CPUs ({cpu}), Linux {platform.release()}, Python {platform.python_version()}; "
          f"{'quick' if args.quick else 'full'} run")
    print()
    print("| case | weir p50 (ms) | weir p90 (ms) | fresh interpreter p50 (ms) | samples |")
    print("|---|---:|---:|---:|---:|")
    for name, ours, base in rows:
        print(f"| {name} | {p50(ours):.1f} | {p90(ours):.1f} | {p50(base):.1f} | {len(ours)} |")
    print()
    print(f"JavaScript over the warm trivial Python run (same runtime, same run): "
          f"{added_by_javascript:+.1f} ms at p50 back to back, {added_by_javascript_spaced:+.1f} ms after idle")
    print(f"A warm stdio MCP call over the same server driven directly: {added_by_mcp:+.1f} ms at p50")


if __name__ == "__main__":
    main()
