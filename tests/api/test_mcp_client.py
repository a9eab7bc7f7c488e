"""MCP servers as tools inside flows (issue 33, the client side): Flowise's
`customMCP` node over Streamable HTTP. The server is the official MCP Python SDK's
(`mcp_server.py`, not weir's code) on loopback, and weir's own MCP endpoint; the
agent is driven by the fake model (`CALL <tool> <json>`). Remote servers go
through the address guard, so the weir here may reach 127.0.0.1."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

import flows
from fakes import FakeProviders
from npm_packages import npm_installed
from prediction_client import ask, create_flow, nonce, predict
from weir_harness import Api, Weir, assert_error, backends, free_port, wait_listening

SERVER = Path(__file__).resolve().parent / "mcp_server.py"


class McpServer:
    """mcp_server.py in a process of its own, restartable on its port."""

    def __init__(self, *flags):
        self.flags = flags
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/{'sse' if '--sse' in flags else 'mcp'}"
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([sys.executable, str(SERVER), str(self.port), *self.flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(self.port, "the MCP test server")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module")
def mcp_server():
    server = McpServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def guarded_server():
    server = McpServer("--auth")
    yield server
    server.stop()


# The reference server of the MCP TypeScript SDK's authors, pinned.
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"


@pytest.fixture(scope="module")
def everything_server():
    """`@modelcontextprotocol/server-everything` over Streamable HTTP (installed
    from npm by the test itself, on first use)."""
    package = npm_installed(EVERYTHING)
    port = free_port()
    proc = subprocess.Popen(["node", str(package / "dist" / "index.js"), "streamableHttp"],
                            env={"PATH": "/usr/bin:/bin", "PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, "server-everything", timeout=30)
    except AssertionError:
        proc.terminate()
        raise
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def legacy_server():
    server = McpServer("--sse")
    yield server
    server.stop()


@pytest.fixture(scope="module", params=backends())
def loopback_weir(request, tmp_path_factory):
    """A weir whose tools may reach 127.0.0.1 (where the MCP servers listen)."""
    w = Weir(tmp_path_factory.mktemp(f"weir-mcp-{request.param}"), request.param)
    w.env["ALLOW_PRIVATE_REQUESTS"] = "127.0.0.1"
    w.start()
    yield w
    w.cleanup()


@pytest.fixture
def api(loopback_weir) -> Api:
    return Api(loopback_weir.url, loopback_weir.create_key(workspace=f"ws-{nonce()}"))


def custom_mcp(config, actions=None, node_id="customMCP_0"):
    inputs = {"mcpServerConfig": json.dumps(config) if isinstance(config, dict) else config}
    if actions is not None:
        inputs["mcpActions"] = json.dumps(actions)
    return flows.node(node_id, "customMCP", inputs)


def agent_flow(fake, *tools):
    return flows.tool_agent(flows.openai_model(fake.url), tools)


def used(body):
    return [(u["tool"], u["toolInput"], json.loads(u["toolOutput"]) if u["toolOutput"].startswith("[") else
             u["toolOutput"]) for u in body["usedTools"]]


def offered_tools(fake, marker):
    [first, *_] = fake.bodies("/chat/completions", marker)
    return sorted(t["function"]["name"] for t in first.get("tools", []))


def test_an_agent_calls_a_servers_tool(api, fake, mcp_server):
    flow = create_flow(api, agent_flow(fake, custom_mcp({"url": mcp_server.url}, ["echo", "add"])))
    marker = nonce()
    body = ask(api, flow, f'{marker} CALL echo {{"message": "hi there"}}')
    assert body["text"].startswith("Done: "), body
    assert json.loads(body["text"][len("Done: "):]) == [{"type": "text", "text": "echo: hi there"}]
    assert used(body) == [("echo", {"message": "hi there"}, [{"type": "text", "text": "echo: hi there"}])]
    # Only the picked tools are offered, with the server's own schemas.
    assert offered_tools(fake, marker) == ["add", "echo"]
    [request] = fake.bodies("/chat/completions", marker)[:1]
    add = next(t["function"] for t in request["tools"] if t["function"]["name"] == "add")
    assert add["parameters"]["properties"]["a"]["type"] == "integer"
    assert add["description"] == "Adds two whole numbers."
    # Without a pick, every tool is offered.
    everything = create_flow(api, agent_flow(fake, custom_mcp({"url": mcp_server.url})))
    marker = nonce()
    body = ask(api, everything, f'{marker} CALL add {{"a": 2, "b": 40}}')
    assert used(body)[0][2] == [{"type": "text", "text": "42"}]
    assert offered_tools(fake, marker) == ["add", "echo", "fail"]


def test_the_reference_everything_server(api, fake, everything_server):
    flow = create_flow(api, agent_flow(fake, custom_mcp({"url": everything_server}, ["echo", "get-sum"])))
    marker = nonce()
    body = ask(api, flow, f'{marker} CALL echo {{"message": "from weir"}} ;; CALL get-sum {{"a": 2, "b": 3}}')
    [(echo, _, echoed), (add, _, summed)] = used(body)
    assert (echo, add) == ("echo", "get-sum")
    assert "from weir" in echoed[0]["text"] and "5" in summed[0]["text"], body
    assert offered_tools(fake, marker) == ["echo", "get-sum"]


def test_a_tools_error_is_what_the_model_reads(api, fake, mcp_server):
    flow = create_flow(api, agent_flow(fake, custom_mcp({"url": mcp_server.url}, ["fail"])))
    body = ask(api, flow, 'CALL fail {"reason": "testing"}')
    [(tool, _, output)] = used(body)
    assert tool == "fail" and output.startswith("Error: ") and "failed on purpose: testing" in output, output


def test_headers_take_workspace_variables(api, fake, guarded_server):
    config = {"url": guarded_server.url, "headers": {"Authorization": "Bearer {{$vars.mcp_token}}"}}
    flow = create_flow(api, agent_flow(fake, custom_mcp(config, ["echo"])))
    # No such variable: the header goes as written and the server refuses the listing.
    r = predict(api, flow, 'CALL echo {"message": "x"}')
    assert r.status_code >= 400, r.text
    assert "customMCP" in r.json()["message"] and "401" in r.json()["message"], r.text
    assert api.post("/variables", json={"name": "mcp_token", "value": "good-token"}).status_code == 201
    body = ask(api, flow, 'CALL echo {"message": "with a key"}')
    assert used(body)[0][2] == [{"type": "text", "text": "echo: with a key"}]
    # The credential is not in the flow's answer or its record of the call.
    assert "good-token" not in json.dumps(body)


def test_a_restarted_server_is_reached_again(api, fake, mcp_server):
    flow = create_flow(api, agent_flow(fake, custom_mcp({"url": mcp_server.url}, ["echo"])))
    assert used(ask(api, flow, 'CALL echo {"message": "before"}'))[0][2][0]["text"] == "echo: before"
    # The server forgets its sessions; weir opens a new one and the call goes through.
    mcp_server.stop()
    mcp_server.start()
    assert used(ask(api, flow, 'CALL echo {"message": "after"}'))[0][2][0]["text"] == "echo: after"


def test_calls_to_servers_are_counted(make_weir, fake, mcp_server):
    w = make_weir()
    w.env.update(ALLOW_PRIVATE_REQUESTS="127.0.0.1", METRICS_TOKEN="scrape-mcp-client")
    w.start()
    api = Api(w.url, w.create_key())
    flow = create_flow(api, agent_flow(fake, custom_mcp({"url": mcp_server.url}, ["echo"])))
    ask(api, flow, 'CALL echo {"message": "counted"}')
    metrics = requests.get(f"{w.url}/metrics", timeout=10, headers={"Authorization": "Bearer scrape-mcp-client"}).text
    server = f'server="127.0.0.1:{mcp_server.port}"'
    # The listing and the call, at least (the session's opening is not a request of the flow's).
    counted = [line for line in metrics.splitlines()
               if line.startswith("weir_mcp_server_requests_total{") and server in line and 'outcome="ok"' in line]
    assert counted and float(counted[0].rsplit(" ", 1)[1]) >= 2, metrics
    assert f"weir_mcp_server_request_duration_seconds_count{{{server}}}" in metrics


def test_a_legacy_sse_server_is_reached(api, fake, legacy_server):
    """A server of the 2024-11-05 HTTP+SSE transport refuses the Streamable HTTP
    POST; weir falls back to its event stream, as Flowise does."""
    flow = create_flow(api, agent_flow(fake, custom_mcp({"url": legacy_server.url}, ["echo", "add"])))
    body = ask(api, flow, 'CALL echo {"message": "over sse"}')
    assert used(body) == [("echo", {"message": "over sse"}, [{"type": "text", "text": "echo: over sse"}])]
    body = ask(api, flow, 'CALL add {"a": 1, "b": 2}')
    assert used(body)[0][2] == [{"type": "text", "text": "3"}]
    # The server restarts: its stream ends, weir opens a new one and goes on.
    legacy_server.stop()
    legacy_server.start()
    body = ask(api, flow, 'CALL echo {"message": "again"}')
    assert used(body)[0][2] == [{"type": "text", "text": "echo: again"}]


def test_a_flowise_export_with_custom_and_teradata_mcp_nodes(api, fake, mcp_server, guarded_server):
    """Nodes as Flowise's editor writes them: a tool agent with `customMCP` and
    Flowise's built-in `teradataMCP` (a server at `mcpUrl`, Bearer or Basic)."""
    def export(teradata_inputs):
        model = flows.flowise_node("chatOpenAI_0", "chatOpenAI", "ChatOpenAI", "Chat Models", {
            "modelName": "gpt-test", "temperature": 0.9, "basePath": f"{fake.url}/v1", "openAIApiKey": "sk-good"})
        custom = flows.flowise_node("customMCP_0", "customMCP", "Custom MCP Tool", "Tools (MCP)", {
            "mcpServerConfig": '{\n  "url": "%s"\n}' % mcp_server.url, "mcpActions": '["add"]'})
        teradata = flows.flowise_node("teradataMCP_0", "teradataMCP", "Teradata MCP Tool", "Tools (MCP)", {
            "mcpUrl": guarded_server.url, "username": "", "password": "", "mcpActions": '["echo"]', **teradata_inputs})
        agent = flows.flowise_node("toolAgent_0", "toolAgent", "AgentExecutor", "Agents", {
            "tools": ["{{customMCP_0.data.instance}}", "{{teradataMCP_0.data.instance}}"],
            "model": "{{chatOpenAI_0.data.instance}}", "systemMessage": "You are helpful.", "inputModeration": "",
            "maxIterations": ""})
        edges = [flows.flowise_edge("chatOpenAI_0", "chatOpenAI-ChatOpenAI", "toolAgent_0", "model"),
                 flows.flowise_edge("customMCP_0", "customMCP-Tool", "toolAgent_0", "tools"),
                 flows.flowise_edge("teradataMCP_0", "teradataMCP-Tool", "toolAgent_0", "tools")]
        return flows.graph([model, custom, teradata, agent], edges)

    flow = create_flow(api, export({"bearerToken": "good-token"}))
    marker = nonce()
    body = ask(api, flow, f'{marker} CALL echo {{"message": "teradata"}} ;; CALL add {{"a": 20, "b": 22}}')
    assert [(tool, output) for tool, _, output in used(body)] == [
        ("echo", [{"type": "text", "text": "echo: teradata"}]), ("add", [{"type": "text", "text": "42"}])]
    assert offered_tools(fake, marker) == ["add", "echo"]
    # Basic authentication is sent when no token is given (this server takes only its token).
    basic = create_flow(api, export({"username": "td", "password": "pw"}))
    r = predict(api, basic, 'CALL echo {"message": "x"}')
    assert r.status_code >= 400 and "401" in r.json()["message"], r.text
    assert_error(predict(api, create_flow(api, export({})), "hi"), 400, "credentials")


def list_actions(api, node, inputs, **data):
    """The canvas's `listActions` for an MCP node with these inputs."""
    return api.post(f"/node-load-method/{node}", json={
        "id": f"{node}_0", "name": node, "loadMethod": "listActions", "inputs": inputs, **data})


def test_the_canvas_lists_a_servers_actions_as_a_run_would_reach_it(api, mcp_server, guarded_server,
                                                                     loopback_weir):
    """The MCP nodes' action picker (`listActions`): the server's tools, reached
    with the node's config, the workspace's variables and its stored credential."""
    listed = list_actions(api, "customMCP", {"mcpServerConfig": json.dumps({"url": mcp_server.url})})
    assert listed.status_code == 200, listed.text
    by_name = {o["name"]: o for o in listed.json()}
    assert set(by_name) == {"echo", "add", "fail"}
    assert by_name["add"] == {"label": "add", "name": "add", "description": "Adds two whole numbers."}

    # Headers take the workspace's variables, as at run time.
    guarded = {"mcpServerConfig": json.dumps(
        {"url": guarded_server.url, "headers": {"Authorization": "Bearer {{$vars.canvas_token}}"}})}
    [refused] = list_actions(api, "customMCP", guarded).json()
    assert (refused["name"], refused["label"]) == ("error", "No Available Actions")
    assert "401" in refused["description"], refused
    assert api.post("/variables", json={"name": "canvas_token", "value": "good-token"}).status_code == 201
    assert {o["name"] for o in list_actions(api, "customMCP", guarded).json()} == {"echo", "add", "fail"}

    # A built-in node with its stored credential (Flowise's editor puts its id in `credential`).
    cred = api.post("/credentials", json={"name": "td", "credentialName": "teradataBearerToken",
                                          "plainDataObj": {"token": "good-token"},
                                          "allowedHosts": ["127.0.0.1"]})
    assert cred.status_code == 201, cred.text
    teradata = {"mcpUrl": guarded_server.url, "username": "", "password": ""}
    found = list_actions(api, "teradataMCP", teradata, credential=cred.json()["id"])
    assert {o["name"] for o in found.json()} == {"echo", "add", "fail"}, found.text
    # Opening the credential takes a key that may see credentials, as saving such a flow does.
    workspace = api.get("/apikey").json()[0]["workspace"]
    author = api.with_key(loopback_weir.create_key("chatflows:read", "chatflows:write", workspace=workspace))
    assert_error(list_actions(author, "teradataMCP", teradata, credential=cred.json()["id"]), 403,
                 "credentials:read")
    # Without a token or a user, the node cannot be built: said in the one option.
    [no_key] = list_actions(api, "teradataMCP", teradata).json()
    assert no_key["name"] == "error" and "credentials" in no_key["description"], no_key

    # What a run would refuse is said the same way; the address guard holds.
    [broken] = list_actions(api, "customMCP", {"mcpServerConfig": "{not json"}).json()
    assert broken["name"] == "error" and "mcpServerConfig" in broken["description"], broken
    [local] = list_actions(api, "customMCP", {"mcpServerConfig": json.dumps({"url": "file:///etc/passwd"})}).json()
    assert local["name"] == "error" and "http" in local["description"], local


def test_weirs_own_mcp_endpoint_as_a_tool(api, fake, loopback_weir):
    """A flow published over MCP is a tool of another flow through customMCP."""
    inner = create_flow(api, flows.conversation(flows.openai_model(fake.url)), name="Inner")
    token = api.post(f"/mcp-server/{inner}", json={"toolName": "inner_flow"}).json()["token"]
    config = {"url": f"{loopback_weir.url}/api/v1/mcp/{inner}", "headers": {"Authorization": f"Bearer {token}"}}
    outer = create_flow(api, agent_flow(fake, custom_mcp(config)))
    body = ask(api, outer, 'CALL inner_flow {"question": "ping"}')
    assert used(body) == [("inner_flow", {"question": "ping"}, [{"type": "text", "text": "Echo: ping"}])]


def test_an_agentflow_agent_takes_a_servers_tools(api, fake, mcp_server):
    row = flows.af_tool_row("customMCP", {"mcpServerConfig": json.dumps({"url": mcp_server.url}),
                                          "mcpActions": json.dumps(["echo"])})
    agent = flows.af_agent("agentAgentflow_0", flows.af_openai(fake.url, field="agentModel"), tools=[row],
                           messages=[{"role": "system", "content": "You help."}])
    flow = create_flow(api, flows.agentflow([flows.af_start(), agent], [("startAgentflow_0", "agentAgentflow_0")]),
                       type="AGENTFLOW")
    body = ask(api, flow, 'CALL echo {"message": "from an agentflow"}')
    assert "echo: from an agentflow" in body["text"], body


def test_refusals(server, fake, mcp_server):
    """On a weir with the default guard, loopback is refused; a stdio server
    needs the Python runtime (none runs beside this weir); a config that is not
    one is a 400 when the flow runs."""
    api = Api(server.url, server.create_key(workspace=f"ws-{nonce()}"))
    flow = create_flow(api, agent_flow(fake, custom_mcp({"url": mcp_server.url})))
    r = predict(api, flow, 'CALL echo {"message": "x"}')
    assert r.status_code >= 400 and "refused" in r.json()["message"], r.text
    stdio = create_flow(api, agent_flow(fake, custom_mcp({"command": "npx", "args": ["-y", "some-server"]})))
    r = predict(api, stdio, "hi")
    assert r.status_code >= 400 and "Python runtime cannot be reached" in r.json()["message"], r.text
    broken = create_flow(api, agent_flow(fake, custom_mcp("{not json")))
    assert_error(predict(api, broken, "hi"), 400, "mcpServerConfig")
    no_url = create_flow(api, agent_flow(fake, custom_mcp({"url": "file:///etc/passwd"})))
    assert_error(predict(api, no_url, "hi"), 400, "http")
    # Flowise's hosted built-ins need their credential's token; GitHub Enterprise
    # addresses are of ghe.com.
    for name, inputs in [("githubMCP", {}), ("browserlessMCP", {}),
                         ("githubMCP", {"accessToken": "t", "githubEnterpriseUrl": "https://evil.example"})]:
        hosted = create_flow(api, agent_flow(fake, flows.node(f"{name}_0", name, inputs)))
        assert_error(predict(api, hosted, "hi"), 400, name)


# ------------------------------------------------ a workspace's MCP servers

def test_stored_servers_are_masked_authorized_and_used(api, fake, guarded_server, mcp_server, loopback_weir):
    r = api.post("/custom-mcp-servers", json={
        "name": "Guarded", "serverUrl": guarded_server.url + "?k=secret-in-url", "color": "#fff",
        "authType": "CUSTOM_HEADERS", "authConfig": {"headers": {"Authorization": "Bearer good-token"}}})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["serverUrl"] == f"http://127.0.0.1:{guarded_server.port}/************"
    assert created["status"] == "PENDING" and created["toolCount"] == 0 and "authConfig" not in created
    server_id = created["id"]
    shown = api.get(f"/custom-mcp-servers/{server_id}").json()
    assert shown["authConfig"] == {"headers": {"Authorization": "************"}}
    assert "good-token" not in json.dumps(shown) and "secret-in-url" not in json.dumps(shown)
    assert api.get(f"/custom-mcp-servers/{server_id}/tools").json() == []
    # A flow may not use it before it is authorized.
    flow = create_flow(api, agent_flow(fake, flows.node("customMcpServerTool_0", "customMcpServerTool", {
        "mcpServerId": server_id, "mcpActions": json.dumps(["echo"])})))
    assert_error(predict(api, flow, 'CALL echo {"message": "x"}'), 400, "authorize")
    authorized = api.post(f"/custom-mcp-servers/{server_id}/authorize")
    assert authorized.status_code == 200, authorized.text
    assert authorized.json()["status"] == "AUTHORIZED" and authorized.json()["toolCount"] == 3
    names = sorted(t["name"] for t in api.get(f"/custom-mcp-servers/{server_id}/tools").json())
    assert names == ["add", "echo", "fail"]
    body = ask(api, flow, 'CALL echo {"message": "stored"}')
    assert used(body)[0][2] == [{"type": "text", "text": "echo: stored"}]
    # The masked values sent back keep the stored ones; the server stays authorized.
    kept = api.put(f"/custom-mcp-servers/{server_id}", json={
        "name": "Renamed", "serverUrl": shown["serverUrl"], "authType": "CUSTOM_HEADERS",
        "authConfig": {"headers": {"Authorization": "************"}}}).json()
    assert kept["name"] == "Renamed" and kept["status"] == "AUTHORIZED"
    assert used(ask(api, flow, 'CALL echo {"message": "kept"}'))[0][2][0]["text"] == "echo: kept"
    # A wrong header: pending until authorized, and authorizing fails.
    changed = api.put(f"/custom-mcp-servers/{server_id}", json={
        "authConfig": {"headers": {"Authorization": "Bearer wrong"}}}).json()
    assert changed["status"] == "PENDING"
    assert_error(api.post(f"/custom-mcp-servers/{server_id}/authorize"), 400,
                 "Failed to connect to Custom MCP server")
    assert api.get(f"/custom-mcp-servers/{server_id}").json()["status"] == "ERROR"
    # Listing, paged as Flowise pages it; another workspace sees none of it.
    api.post("/custom-mcp-servers", json={"name": "Open", "serverUrl": mcp_server.url})
    listing = api.get("/custom-mcp-servers", params={"limit": 1}).json()
    assert listing["total"] == 2 and [s["name"] for s in listing["data"]] == ["Renamed"]
    assert "tools" not in listing["data"][0]
    other = Api(api.url, loopback_weir.create_key(workspace=f"ws-{nonce()}"))
    assert other.get("/custom-mcp-servers").json() == {"data": [], "total": 0}
    assert_error(other.get(f"/custom-mcp-servers/{server_id}"), 404)
    assert api.delete(f"/custom-mcp-servers/{server_id}").json() == {"raw": [], "affected": 1}
    assert api.delete(f"/custom-mcp-servers/{server_id}").json() == {"raw": [], "affected": 0}
    assert_error(api.get(f"/custom-mcp-servers/{server_id}"), 404)


def test_stored_server_rules(api, server):
    for body, status, words in [
        ({"serverUrl": "http://127.0.0.1:1/mcp"}, 412, "name"),
        ({"name": "x"}, 412, "serverUrl"),
        ({"name": "x", "serverUrl": "ftp://mcp.example/"}, 400, "serverUrl"),
        ({"name": "x", "serverUrl": "http://mcp.example/", "authType": "CUSTOM_HEADERS",
          "authConfig": {"headers": {"Host": "evil"}}}, 400, "Host"),
        ({"name": "x", "serverUrl": "http://mcp.example/", "authType": "CUSTOM_HEADERS",
          "authConfig": {"headers": {f"X-{i}": "v" for i in range(26)}}}, 400, "25"),
    ]:
        assert_error(api.post("/custom-mcp-servers", json=body), status, words)
    # The default guard refuses a private address (this weir allows 127.0.0.1 only).
    assert_error(api.post("/custom-mcp-servers", json={"name": "x", "serverUrl": "http://10.0.0.1/mcp"}),
                 400, "serverUrl")
    reader = Api(api.url, None)
    assert reader.get("/custom-mcp-servers").status_code == 401
