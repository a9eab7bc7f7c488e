"""Stdio MCP servers as tools in flows (issue 33): `customMCP` with
`{command, args, env}` and Flowise's npm-package MCP nodes, run by the Python
runtime in its sandbox (never by weir). The servers are npm's
`@modelcontextprotocol/server-everything` and `server-slack` (installed by the test
into the runtime's PY_TOOL_NODE_PACKAGES, as an image would have them), and a small
dependency-free test server (tests/fixtures/tiny_mcp_server.js, given inline); the
agent is driven by the fake model (`CALL <tool> <json>`)."""

import json
import sys
from pathlib import Path

import pytest
import requests

import flows
from fakes import FakeProviders
from npm_packages import npm_prefix
from prediction_client import ask, create_flow, nonce, predict
from tool_runtime import PY_TOOL_API_KEY, use_runtime
from weir_harness import Api, Weir, assert_error

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

from runtime_harness import Runtime, runtime_binary, uv_binary  # noqa: E402

EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"
SLACK = "@modelcontextprotocol/server-slack@2025.4.25"
TINY = (Path(__file__).resolve().parents[1] / "fixtures" / "tiny_mcp_server.js").read_text()


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module")
def node_runtime(tmp_path_factory):
    """A runtime with the npm packages of the MCP servers installed ahead."""
    env = {"PY_TOOL_API_KEY": PY_TOOL_API_KEY,
           "PY_TOOL_NODE_PACKAGES": str(npm_prefix("mcp-servers", EVERYTHING, SLACK))}
    uv = uv_binary()
    if uv:
        env["PY_TOOL_UV"] = uv
    runtime = Runtime([str(runtime_binary())], tmp_path_factory.mktemp("pyruntime-mcp"), env)
    yield runtime
    runtime.stop()


@pytest.fixture(scope="module")
def weir(node_runtime, tmp_path_factory):
    w = use_runtime(Weir(tmp_path_factory.mktemp("weir-mcp-stdio"), "sqlite"), node_runtime).start()
    yield w
    w.cleanup()


@pytest.fixture
def api(weir) -> Api:
    return Api(weir.url, weir.create_key(workspace=f"ws-{nonce()}"))


def custom_mcp(config, actions=None):
    inputs = {"mcpServerConfig": json.dumps(config)}
    if actions is not None:
        inputs["mcpActions"] = json.dumps(actions)
    return flows.node("customMCP_0", "customMCP", inputs)


def agent_flow(fake, *tools):
    return flows.tool_agent(flows.openai_model(fake.url), tools)


def used(body):
    return [(u["tool"], u["toolOutput"]) for u in body["usedTools"]]


def offered_tools(fake, marker):
    [first, *_] = fake.bodies("/chat/completions", marker)
    return sorted(t["function"]["name"] for t in first.get("tools", []))


def running_servers(runtime, api, flow):
    """The runtime's stdio servers of the flow's workspace."""
    workspace = api.get(f"/chatflows/{flow}").json()["workspaceId"]
    r = requests.get(f"{runtime.url}/tools/mcp-stdio", params={"workspaceId": workspace},
                     headers={"Authorization": f"Bearer {PY_TOOL_API_KEY}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["servers"]


def tiny(**env):
    return {"command": "node", "args": ["-e", TINY], "env": env}


def test_the_reference_everything_server_over_stdio(api, fake, node_runtime):
    """Flowise's own form of a stdio config: `npx -y <package>`; the runtime runs the
    package installed ahead, in its sandbox, and the tools reach the model."""
    config = {"command": "npx", "args": ["-y", EVERYTHING, "stdio"]}
    flow = create_flow(api, agent_flow(fake, custom_mcp(config, ["echo", "get-sum"])))
    marker = nonce()
    body = ask(api, flow, f'{marker} CALL echo {{"message": "from a sandbox"}} ;; CALL get-sum {{"a": 2, "b": 3}}')
    [(echo, echoed), (add, summed)] = used(body)
    assert (echo, add) == ("echo", "get-sum")
    assert "from a sandbox" in echoed and "5" in summed, body
    assert body["text"].startswith("Done: ") and "5" in body["text"]
    # Only the picked tools are offered.
    assert offered_tools(fake, marker) == ["echo", "get-sum"]
    # One server for the workspace, kept for the next run (not started again).
    [server] = running_servers(node_runtime, api, flow)
    assert server["command"] == "npx" and server["serverInfo"]["name"]
    again = ask(api, flow, 'CALL echo {"message": "twice"}')
    assert "twice" in used(again)[0][1]
    [same] = running_servers(node_runtime, api, flow)
    assert same["startedAt"] == server["startedAt"] and same["requests"] > server["requests"]


def test_the_server_sees_the_sandbox_and_the_configs_variables(api, fake, node_runtime):
    r = api.post("/variables", json={"name": "mcpToken", "value": "tok-123"})
    assert r.status_code in (200, 201), r.text
    flow = create_flow(api, agent_flow(fake, custom_mcp(tiny(TOKEN="{{$vars.mcpToken}}"), ["inspect"])))
    body = ask(api, flow, f'CALL inspect {{"path": "{node_runtime.data}"}}')
    [(_, output)] = used(body)
    seen = json.loads(json.loads(output)[0]["text"])
    assert seen["env"]["TOKEN"] == "tok-123"
    assert seen["pid"] < 10 and seen["uid"] != 0
    assert PY_TOOL_API_KEY not in json.dumps(seen["env"])


def test_a_crash_is_what_the_model_reads_then_the_server_is_back(api, fake, node_runtime):
    flow = create_flow(api, agent_flow(fake, custom_mcp(tiny(), ["echo", "crash"])))
    crashed = ask(api, flow, "CALL crash {}")
    [(_, output)] = used(crashed)
    assert output.startswith("Error: ") and "exited" in output and "crashing on purpose" in output, output
    back = ask(api, flow, 'CALL echo {"message": "again"}')
    assert "Echo: again" in used(back)[0][1]
    [server] = running_servers(node_runtime, api, flow)
    assert server["restarts"] == 1


def test_flowise_slack_mcp_node_loads_its_server(api, fake):
    """Workplace Chat's tool: the `slackMCP` node runs npm's server-slack with the
    credential's token and team in its environment; its tools reach the model."""
    slack = flows.node("slackMCP_0", "slackMCP", {
        "botToken": "xoxb-test", "teamId": "T0001",
        "mcpActions": json.dumps(["slack_list_channels", "slack_post_message"]),
    })
    flow = create_flow(api, agent_flow(fake, slack))
    marker = nonce()
    body = ask(api, flow, f"{marker} hello")
    assert body["text"] == f"Echo: {marker} hello"
    assert offered_tools(fake, marker) == ["slack_list_channels", "slack_post_message"]
    missing = create_flow(api, agent_flow(fake, flows.node("slackMCP_0", "slackMCP", {"botToken": "x"})))
    assert_error(predict(api, missing, "hi"), 400, "teamId")


def test_a_weir_without_a_runtime_says_so(tmp_path, fake):
    w = Weir(tmp_path, "sqlite")
    w.env.update(PYTHON_RUNTIME="http://127.0.0.1:9", PY_TOOL_API_KEY="x")
    w.start()
    try:
        api = Api(w.url, w.create_key(workspace=f"ws-{nonce()}"))
        flow = create_flow(api, agent_flow(fake, custom_mcp(tiny())))
        r = predict(api, flow, "hi")
        assert r.status_code >= 400 and "Python runtime cannot be reached" in r.json()["message"], r.text
    finally:
        w.cleanup()


def test_an_agentflow_agent_and_tool_node_take_stdio_servers(api, fake, node_runtime):
    """Workplace Chat's shape: an agentflow agent whose tools row is Flowise's
    `slackMCP` (npm's server-slack in the sandbox), beside a Tool node calling a
    stdio `customMCP` server's tool directly."""
    slack = flows.af_tool_row("slackMCP", {"botToken": "xoxb-test", "teamId": "T0001",
                                           "mcpActions": json.dumps(["slack_list_channels"])})
    agent = flows.af_agent("agentAgentflow_0", flows.af_openai(fake.url, field="agentModel"), tools=[slack],
                           messages=[{"role": "system", "content": "You post to Slack."}])
    flow = create_flow(api, flows.agentflow([flows.af_start(), agent], [("startAgentflow_0", "agentAgentflow_0")]),
                       type="AGENTFLOW")
    marker = nonce()
    assert ask(api, flow, f"{marker} hi")["text"] == f"Echo: {marker} hi"
    assert offered_tools(fake, marker) == ["slack_list_channels"]

    config = {"mcpServerConfig": json.dumps(tiny()), "mcpActions": json.dumps(["echo"])}
    tool = flows.af_tool("toolAgentflow_0", "customMCP", args={"message": "from a tool node"}, config=config)
    reply = flows.af_reply("directReplyAgentflow_0", "Tool said: {{ toolAgentflow_0 }}")
    flow = create_flow(api, flows.agentflow([flows.af_start(), tool, reply], [
        ("startAgentflow_0", "toolAgentflow_0"), ("toolAgentflow_0", "directReplyAgentflow_0")]), type="AGENTFLOW")
    body = ask(api, flow, "go")
    assert "Echo: from a tool node" in body["text"], body
