"""`/tools/mcp-stdio`: stdio MCP servers run in the sandbox tool code runs in — one
long-lived server per workspace and configuration, started and initialised on first
use, shared, restarted when found dead, stopped when idle."""

import json
import time
import uuid
from pathlib import Path

import pytest
import requests

TINY = (Path(__file__).resolve().parent.parent / "fixtures" / "tiny_mcp_server.js").read_text()
SECRET = "sk-runtime-secret-never-in-a-server"
METRICS = "rt-mcp-metrics"


def tiny(**env):
    """The test server's configuration (its code given inline: the sandbox shows no
    test files)."""
    return {"command": "node", "args": ["-e", TINY], "env": env}


def ask(runtime, server, method, params=None, workspace="shared-mcp", **fields):
    body = {"workspaceId": workspace, "server": server, "method": method, **fields}
    if params is not None:
        body["params"] = params
    r = runtime.post("/tools/mcp-stdio", body, timeout=180)
    assert r.status_code == 200, r.text
    return r.json()


def call(runtime, server, tool, arguments=None, **fields):
    return ask(runtime, server, "tools/call", {"name": tool, "arguments": arguments or {}}, **fields)


def text_of(answer):
    assert "result" in answer, answer
    return answer["result"]["content"][0]["text"]


def servers(runtime, workspace="shared-mcp"):
    r = runtime.get(f"/tools/mcp-stdio?workspaceId={workspace}")
    assert r.status_code == 200, r.text
    return r.json()["servers"]


@pytest.fixture(scope="module")
def mcp_runtime(start_runtime):
    """A runtime whose own environment holds a secret; idle servers stop after 3 s."""
    return start_runtime({"WEIR_TEST_SECRET": SECRET, "PY_TOOL_MCP_IDLE": "3",
                          "PY_TOOL_MCP_SERVERS_PER_WORKSPACE": "2", "PY_TOOL_METRICS_TOKEN": METRICS})


def workspace():
    return f"mcp-{uuid.uuid4().hex[:8]}"


def test_a_server_is_started_once_and_shared(mcp_runtime):
    ws = workspace()
    server = tiny(MARK=ws)
    listed = ask(mcp_runtime, server, "tools/list", workspace=ws)
    assert listed["started"] and not listed["restarted"]
    assert listed["serverInfo"] == {"name": "tiny", "version": "1.0.0"}
    assert [t["name"] for t in listed["result"]["tools"]] == ["echo", "inspect", "connect", "crash", "hog", "slow"]
    echoed = call(mcp_runtime, server, "echo", {"message": "hi"}, workspace=ws)
    assert text_of(echoed) == "Echo: hi" and not echoed["started"]
    [running] = servers(mcp_runtime, ws)
    assert running["command"] == "node" and running["requests"] == 2 and running["restarts"] == 0
    assert "env" not in running, "a listing never shows the environment (credentials)"
    # Another configuration is another server; another workspace does not see them.
    other = call(mcp_runtime, tiny(MARK="other"), "echo", {"message": "x"}, workspace=ws)
    assert other["started"]
    assert len(servers(mcp_runtime, ws)) == 2
    assert servers(mcp_runtime, workspace()) == []


def test_the_server_runs_in_the_sandbox(mcp_runtime):
    ws = workspace()
    private = mcp_runtime.data / "private"
    private.mkdir(exist_ok=True)
    seen = json.loads(text_of(call(mcp_runtime, tiny(GIVEN="yes"), "inspect",
                                   {"path": str(private)}, workspace=ws)))
    # Its own pid namespace: a handful of processes, itself among the first.
    assert seen["pid"] < 10 and seen["pids"] < 10, seen
    # Not root, none of the runtime's environment but what the config gave.
    assert seen["uid"] != 0
    assert seen["env"]["GIVEN"] == "yes"
    assert SECRET not in json.dumps(seen["env"]) and "PY_TOOL_MCP_IDLE" not in seen["env"]
    assert seen["env"]["HOME"] != "/root"
    # The runtime's data directory (every workspace's venvs and artifacts) is not there.
    assert seen["read"] == "ENOENT", seen
    # Its network is the policy's: the runtime's own port on the host's loopback is
    # out of reach (a network namespace of its own).
    port = int(mcp_runtime.url.rsplit(":", 1)[1])
    reached = text_of(call(mcp_runtime, tiny(GIVEN="yes"), "connect", {"host": "127.0.0.1", "port": port},
                           workspace=ws))
    assert reached.startswith("refused") or reached == "timed out", reached


def test_a_crashed_server_is_an_error_then_starts_again(mcp_runtime):
    ws = workspace()
    server = tiny()
    call(mcp_runtime, server, "echo", {"message": "warm"}, workspace=ws)
    crashed = call(mcp_runtime, server, "crash", workspace=ws)
    assert crashed["error"]["code"] == -32002, crashed
    assert "code 3" in crashed["error"]["message"] and "crashing on purpose" in crashed["error"]["message"]
    again = call(mcp_runtime, server, "echo", {"message": "back"}, workspace=ws)
    assert text_of(again) == "Echo: back"
    assert again["started"] and again["restarted"]
    assert servers(mcp_runtime, ws)[0]["restarts"] == 1


def test_a_slow_answer_times_out_and_the_server_stays(mcp_runtime):
    ws = workspace()
    server = tiny()
    late = call(mcp_runtime, server, "slow", {"ms": 5000}, workspace=ws, timeout=0.5)
    assert late["error"]["code"] == -32001 and "did not answer" in late["error"]["message"]
    soon = call(mcp_runtime, server, "echo", {"message": "still here"}, workspace=ws)
    assert text_of(soon) == "Echo: still here" and not soon["started"]


def test_idle_servers_stop(mcp_runtime):
    ws = workspace()
    call(mcp_runtime, tiny(), "echo", {"message": "x"}, workspace=ws)
    assert len(servers(mcp_runtime, ws)) == 1
    deadline = time.monotonic() + 20
    while servers(mcp_runtime, ws) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert servers(mcp_runtime, ws) == []
    after = call(mcp_runtime, tiny(), "echo", {"message": "y"}, workspace=ws)
    assert after["started"] and not after["restarted"], "an idle stop is no crash"


def test_a_command_that_cannot_start_is_an_error(mcp_runtime):
    answer = ask(mcp_runtime, {"command": "no-such-mcp-server"}, "tools/list", workspace=workspace())
    assert answer["error"]["code"] == -32002
    assert "cannot start the MCP server `no-such-mcp-server`" in answer["error"]["message"]


def test_bad_requests_and_the_workspace_limit(mcp_runtime):
    def post(body):
        return mcp_runtime.post("/tools/mcp-stdio", body, timeout=60)

    ws = workspace()
    assert post({"method": "tools/list"}).status_code == 412
    assert post({"server": tiny()}).status_code == 412
    for body, words in [
        ({"server": tiny(), "method": "initialize"}, "runtime's to send"),
        ({"server": tiny(), "method": "notifications/initialized"}, "runtime's to send"),
        ({"server": {"command": " "}, "method": "tools/list"}, "must not be empty"),
        ({"server": {"command": "node", "env": {"1X": "y"}}, "method": "tools/list"}, "environment variable"),
        ({"server": tiny(), "method": "tools/list", "params": "x"}, "params"),
        ({"server": tiny(), "method": "tools/list", "workspaceId": "../x"}, "workspace"),
    ]:
        r = post({"workspaceId": ws, **body})
        assert r.status_code == 400 and words in r.json()["message"], (body, r.text)
    # Two servers per workspace here: a third configuration waits for one to stop.
    call(mcp_runtime, tiny(N="1"), "echo", {"message": "1"}, workspace=ws)
    call(mcp_runtime, tiny(N="2"), "echo", {"message": "2"}, workspace=ws)
    r = post({"workspaceId": ws, "server": tiny(N="3"), "method": "tools/list"})
    assert r.status_code == 429 and "PY_TOOL_MCP_SERVERS_PER_WORKSPACE" in r.json()["message"]
    assert r.headers["retry-after"] == "1"


def test_requests_and_servers_are_counted(mcp_runtime):
    ws = workspace()
    call(mcp_runtime, tiny(), "echo", {"message": "x"}, workspace=ws)
    assert "error" in ask(mcp_runtime, tiny(), "prompts/list", workspace=ws)
    assert mcp_runtime.post("/tools/mcp-stdio", {"server": tiny()}, timeout=60).status_code == 412
    r = requests.get(mcp_runtime.url + "/metrics", headers={"Authorization": f"Bearer {METRICS}"}, timeout=30)
    assert r.status_code == 200, r.text
    got = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            got[key] = float(value)
    for outcome in ("result", "error", "refused"):
        assert got[f'weir_pyruntime_mcp_requests_total{{outcome="{outcome}"}}'] >= 1, outcome
    assert got["weir_pyruntime_mcp_servers"] >= 1


def test_a_server_has_the_memory_limit_of_a_run(start_runtime):
    """PY_TOOL_MAX_MEM bounds a server as it bounds a run (its cgroup): a server
    that fills more is killed, and says so; under the limit it works (Node.js is
    not starved of address space)."""
    runtime = start_runtime({"PY_TOOL_MAX_MEM": "256M"})
    cgroups = runtime.get("/tools/health").json()["isolation"]["layers"]["cgroups"]["state"]
    if cgroups != "enforced":
        pytest.skip("no cgroups here: a server's memory is bounded only by its address space")
    ws = workspace()
    assert text_of(call(runtime, tiny(), "hog", {"mb": 64}, workspace=ws)) == "held 64 MiB"
    killed = call(runtime, tiny(), "hog", {"mb": 1024}, workspace=ws)
    assert killed["error"]["code"] == -32002, killed
    assert "memory" in killed["error"]["message"], killed


PYTHON_SERVER = r'''
import json, sys
import six  # installed into the workspace's venv, not the runtime's
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "py", "version": six.__version__}}
    elif message["method"] == "tools/call":
        result = {"content": [{"type": "text", "text": sys.executable}]}
    else:
        result = {"tools": []}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
'''


def test_a_python_server_runs_with_the_workspaces_packages(mcp_runtime):
    """`python` is the workspace's venv (first on PATH): a Python MCP server uses
    what the workspace installed through the runtime's package policy."""
    ws = workspace()
    r = mcp_runtime.post("/tools/install-packages", {"packages": ["six"], "workspace_id": ws}, timeout=300)
    assert r.status_code == 200, r.text
    server = {"command": "python", "args": ["-c", PYTHON_SERVER]}
    answer = call(mcp_runtime, server, "where", workspace=ws)
    assert answer["serverInfo"]["name"] == "py" and answer["serverInfo"]["version"], answer
    assert text_of(answer).startswith(str(mcp_runtime.venvs / ws)), answer
