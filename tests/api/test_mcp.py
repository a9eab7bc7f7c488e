"""MCP server: chatflows published as tools (issue 33), driven by the official MCP
Python SDK (`mcp` on PyPI) as the client, over Streamable HTTP.

- Flowise's routes publish a flow (`/mcp-server/<id>`: token, tool name,
  description, refresh, soft delete) and its endpoint `POST /mcp/<chatflowId>`
  answers with the flow's own bearer token, stateless.
- weir's workspace server `POST /mcp` lists every published, enabled flow a weir
  API key may run, with sessions (one conversation per session).
Raw HTTP checks the refusals: wrong or missing token, a disabled flow, the
stateless endpoint's DELETE, a page's Origin, an unknown protocol version."""

import asyncio
import http.client
import json
import re
import urllib.parse
import uuid

import pytest
import requests

import flows
from fakes import FakeProviders
from mcp.client.client import Client
from mcp.types import ElicitResult
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from flows import af_reply, af_start, mention, rich
from prediction_client import create_flow, nonce
from weir_harness import Api, assert_error


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture
def workspace(server):
    """A fresh workspace: its name and an all-permission key's client."""
    name = f"ws-{uuid.uuid4().hex[:8]}"
    return name, Api(server.url, server.create_key(workspace=name))


def echo_flow(api, fake, name="Support Bot"):
    return create_flow(api, flows.conversation(flows.openai_model(fake.url)), name=name)


def publish(api, flow, **body):
    r = api.post(f"/mcp-server/{flow}", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def chain(*nodes):
    """An agentflow of these nodes wired one after the other."""
    return flows.agentflow(list(nodes), [(a["id"], b["id"]) for a, b in zip(nodes, nodes[1:])])


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


async def session_calls(url, token, *calls, mode="auto", progress=None, elicitation=None):
    """Opens an SDK client on `url` with `token` (answering elicitations with
    `elicitation`, when given), then runs each call: ("list",) or ("call", name,
    arguments); answers their results in order."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    results = []
    client = Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=elicitation)
    async with http, client:
        for call in calls:
            if call[0] == "list":
                results.append((await client.list_tools()).tools)
            else:
                results.append(await client.call_tool(call[1], call[2], progress_callback=progress))
    return results


def text_of(result):
    assert not result.is_error, result
    return result.content[0].text


def rpc(url, token, body, **headers):
    """A raw JSON-RPC POST."""
    return requests.post(url, json=body, timeout=30, headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream", **headers})


def assert_rpc_error(response, status, contains):
    assert response.status_code == status, response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None, body
    assert contains in body["error"]["message"], body
    return body


CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
MODERN = "2026-07-28"


def envelope(version=MODERN, capabilities=None):
    """The per-request protocol's `params._meta`."""
    return {"io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities or {}}


def modern(url, token, method, params=None, name=None, **headers):
    """A raw 2026-07-28 request: its envelope in `_meta`, the routing headers set."""
    routing = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        routing["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"_meta": envelope(), **(params or {})}}
    return rpc(url, token, body, **{**routing, **headers})


# ------------------------------------------------------------ Flowise's endpoint

def test_a_published_flow_is_a_tool_on_its_own_endpoint(workspace, fake, server):
    _, api = workspace
    flow = echo_flow(api, fake)
    assert api.get(f"/mcp-server/{flow}").json() == {
        "enabled": False, "token": "", "description": "", "toolName": ""}
    config = publish(api, flow, toolName="support_bot", description="Answers support questions")
    assert config["enabled"] is True and re.fullmatch(r"[0-9a-f]{32}", config["token"]), config
    assert api.get(f"/mcp-server/{flow}").json() == config
    # Publishing again while on changes nothing.
    assert publish(api, flow, toolName="other") == config
    # The token is not part of the chatflow's record.
    assert config["token"] not in api.get(f"/chatflows/{flow}").text

    url = f"{server.url}/api/v1/mcp/{flow}"
    marker = nonce()
    tools, answer = run(session_calls(url, config["token"], ("list",),
                                      ("call", "support_bot", {"question": f"hello {marker}"})))
    [tool] = tools
    assert tool.name == "support_bot" and tool.description == "Answers support questions"
    assert tool.input_schema["properties"]["question"]["type"] == "string"
    assert tool.input_schema["required"] == ["question"]
    assert text_of(answer) == f"Echo: hello {marker}"
    # The call is in the chat history as an MCP conversation.
    messages = api.get(f"/chatmessage/{flow}", params={"chatType": "MCP"}).json()
    assert [m["content"] for m in messages if m["role"] == "userMessage"] == [f"hello {marker}"]


def test_the_handshake_versions_and_a_call_without_a_session(workspace, fake, server):
    _, api = workspace
    flow = echo_flow(api, fake)
    token = publish(api, flow)["token"]
    url = f"{server.url}/api/v1/mcp/{flow}"
    for version in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]:
        r = rpc(url, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert r.status_code == 200, r.text
        result = r.json()["result"]
        assert result["protocolVersion"] == version
        assert result["capabilities"]["tools"] == {"listChanged": False}
        assert result["serverInfo"]["name"] == "flowise-support_bot"
        assert "mcp-session-id" not in r.headers
    # An unknown version is answered with the newest weir speaks.
    r = rpc(url, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "1999-01-01", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert r.json()["result"]["protocolVersion"] == "2025-11-25"
    # A call straight away, no initialize, no session, JSON back.
    marker = nonce()
    r = rpc(url, token, {**CALL, "params": {"name": "support_bot", "arguments": {"question": marker}}})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json"), r.text
    assert r.json() == {"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": f"Echo: {marker}"}], "isError": False}}
    # A batch: notifications need no answer, requests get one each.
    r = rpc(url, token, [{"jsonrpc": "2.0", "method": "notifications/initialized"},
                         {"jsonrpc": "2.0", "id": "a", "method": "ping"},
                         {"jsonrpc": "2.0", "id": "b", "method": "resources/list"}])
    answers = {a["id"]: a for a in r.json()}
    assert answers["a"]["result"] == {} and answers["b"]["error"]["code"] == -32601, answers
    # Only notifications: 202 and nothing.
    r = rpc(url, token, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert r.status_code == 202 and r.text == ""
    # An unknown tool is a protocol error; bad arguments a tool error the model reads.
    r = rpc(url, token, {**CALL, "params": {"name": "nope", "arguments": {}}})
    assert r.json()["error"]["code"] == -32602
    r = rpc(url, token, {**CALL, "params": {"name": "support_bot", "arguments": {"question": 3}}})
    assert r.json()["result"]["isError"] is True
    assert "question" in r.json()["result"]["content"][0]["text"]
    # Not JSON; a protocol version weir does not speak.
    r = rpc(url, token, None, **{"Content-Type": "application/json"})
    assert r.status_code == 400
    r = requests.post(url, data="{", timeout=10, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700
    # A version no handshake speaks is the per-request protocol's: its checks answer.
    r = rpc(url, token, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": envelope("2000-01-01")}},
            **{"MCP-Protocol-Version": "2000-01-01", "Mcp-Method": "ping"})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == {"code": -32022, "message": "Unsupported protocol version",
                                 "data": {"supported": ["2026-07-28"], "requested": "2000-01-01"}}


def test_tokens_are_checked_refreshed_and_a_disabled_flow_is_gone(workspace, fake, server):
    _, api = workspace
    flow = echo_flow(api, fake)
    url = f"{server.url}/api/v1/mcp/{flow}"
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    # Not published yet.
    assert_rpc_error(rpc(url, "0" * 32, ping), 404, "MCP server not found")
    token = publish(api, flow)["token"]
    assert rpc(url, token, ping).json()["result"] == {}
    assert_rpc_error(requests.post(url, json=ping, timeout=10), 401, "Use Bearer <token>")
    assert_rpc_error(rpc(url, "0" * 32, ping), 401, "Unauthorized")
    # An API key of the workspace is not the flow's token.
    assert_rpc_error(rpc(url, api.key, ping), 401, "Unauthorized")
    # A new token: the old one stops working.
    fresh = api.post(f"/mcp-server/{flow}/refresh").json()["token"]
    assert fresh != token
    assert_rpc_error(rpc(url, token, ping), 401, "Unauthorized")
    assert rpc(url, fresh, ping).json()["result"] == {}
    # Renamed, then switched off (kept), then on again with a new token.
    changed = api.put(f"/mcp-server/{flow}", json={"toolName": "renamed", "description": "New words"}).json()
    assert (changed["toolName"], changed["description"], changed["token"]) == ("renamed", "New words", fresh)
    assert_error(api.put(f"/mcp-server/{flow}", json={"toolName": "bad name"}), 400, "toolName")
    assert api.delete(f"/mcp-server/{flow}").json() == {"message": "MCP server config disabled"}
    assert api.get(f"/mcp-server/{flow}").json()["enabled"] is False
    assert_rpc_error(rpc(url, fresh, ping), 404, "MCP server not found")
    again = publish(api, flow)
    assert again["token"] != fresh and again["toolName"] == "renamed"
    # The stateless endpoint has no session to end and no stream to open.
    r = requests.delete(url, timeout=10)
    assert_rpc_error(r, 405, "Session termination is not supported in stateless mode.")
    assert requests.get(url, timeout=10).status_code == 405
    # Publishing is for keys that may change chatflows, in their own workspace.
    reader = api.with_key(server.create_key("chatflows:read", workspace=workspace[0]))
    assert_error(reader.get(f"/mcp-server/{flow}"), 403, "chatflows:write")
    stranger = Api(server.url, server.create_key(workspace=f"ws-{nonce()}"))
    assert_error(stranger.post(f"/mcp-server/{flow}", json={}), 404)
    # Never published: the routes that change a publication say so.
    other = echo_flow(api, fake)
    assert_error(api.put(f"/mcp-server/{other}", json={"enabled": True}), 404, "MCP server config")
    assert_error(api.post(f"/mcp-server/{other}/refresh"), 404, "MCP server config")


def test_a_page_of_another_origin_is_refused(workspace, fake, server):
    _, api = workspace
    flow = echo_flow(api, fake)
    token = publish(api, flow)["token"]
    r = rpc(f"{server.url}/api/v1/mcp/{flow}", token, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            Origin="https://evil.example")
    assert_rpc_error(r, 403, "MCP_CORS_ORIGINS")
    assert "access-control-allow-origin" not in r.headers
    r = rpc(f"{server.url}/api/v1/mcp", api.key, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            Origin="https://evil.example")
    assert_rpc_error(r, 403, "MCP_CORS_ORIGINS")


# --------------------------------------------------------- the workspace server

def form_flow(api, name):
    start = af_start(form=[{"type": "string", "label": "Name", "name": "name"},
                           {"type": "number", "label": "Age", "name": "age"},
                           {"type": "options", "label": "Plan", "name": "plan",
                            "addOptions": [{"option": "free"}, {"option": "pro"}]}])
    reply = af_reply("directReplyAgentflow_0", rich(
        "Hello " + mention("$form.name") + ", age " + mention("$form.age") + " on " + mention("$form.plan")))
    return create_flow(api, chain(start, reply), type="AGENTFLOW", name=name)


def test_the_workspace_server_lists_what_the_key_may_run(workspace, fake, server):
    ws, api = workspace
    support = echo_flow(api, fake, name="Support Bot")
    publish(api, support, description="Support")
    form = form_flow(api, "Sign up")
    publish(api, form, toolName="sign_up")
    echo_flow(api, fake, name="Quiet")  # never published
    switched_off = echo_flow(api, fake, name="Off")
    publish(api, switched_off)
    api.delete(f"/mcp-server/{switched_off}")
    # A flow bound to another key of the workspace is that key's alone.
    created = api.post("/apikey", json={"keyName": "the other"}).json()
    other_key = created["apiKey"]
    bound = echo_flow(api, fake, name="Bound")
    assert api.put(f"/chatflows/{bound}", json={"apikeyid": created["id"]}).status_code == 200
    publish(api, bound, toolName="bound")
    # A flow of the same name as another gets its id's start after it.
    twin = echo_flow(api, fake, name="Support Bot")
    publish(api, twin)

    url = f"{server.url}/api/v1/mcp"
    [tools] = run(session_calls(url, api.key, ("list",)))
    by_name = {t.name: t for t in tools}
    twin_name = f"support_bot_{twin.replace('-', '')[:8]}"
    assert set(by_name) == {"support_bot", "sign_up", twin_name}, by_name
    assert by_name["support_bot"].description == "Support"
    assert by_name[twin_name].description == 'Execute the "Support Bot" flow'
    # A form agentflow's fields are the tool's own arguments.
    schema = by_name["sign_up"].input_schema
    assert schema["properties"] == {
        "name": {"type": "string", "description": "Name"},
        "age": {"type": "number", "description": "Age"},
        "plan": {"type": "string", "enum": ["free", "pro"], "description": "Plan"}}
    assert sorted(schema["required"]) == ["age", "name", "plan"]
    [answer, wrong] = run(session_calls(url, api.key, ("call", "sign_up", {"name": "Ada", "age": 36, "plan": "pro"}),
                                        ("call", "sign_up", {"name": "Ada", "age": "old", "plan": "pro"})))
    assert text_of(answer) == "Hello Ada, age 36 on pro"
    assert wrong.is_error and "age" in wrong.content[0].text
    # The other key sees its bound flow too.
    [tools] = run(session_calls(url, other_key, ("list",)))
    assert "bound" in {t.name for t in tools}
    # Flowise's endpoint of the form flow nests the form.
    token = api.get(f"/mcp-server/{form}").json()["token"]
    [tools, answer] = run(session_calls(f"{server.url}/api/v1/mcp/{form}", token, ("list",),
                                        ("call", "sign_up", {"form": {"name": "Lin", "age": 7, "plan": "free"}})))
    assert tools[0].input_schema["properties"]["form"]["properties"]["age"] == {"type": "number", "description": "Age"}
    assert text_of(answer) == "Hello Lin, age 7 on free"


def test_workspace_keys_are_checked(workspace, server):
    ws, api = workspace
    url = f"{server.url}/api/v1/mcp"
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert_rpc_error(requests.post(url, json=ping, timeout=10), 401, "API key")
    assert_rpc_error(rpc(url, "wk_not-a-key", ping), 401, "")
    reader = server.create_key("chatflows:read", workspace=ws)
    assert_rpc_error(rpc(url, reader, ping), 403, "predictions:create")
    assert rpc(url, api.key, ping).json()["result"] == {}
    assert requests.get(url, timeout=10, headers={"Authorization": f"Bearer {api.key}"}).status_code == 405


def test_a_session_is_one_conversation(workspace, fake, server):
    _, api = workspace
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.buffer_memory()), name="Memo")
    publish(api, flow)
    url = f"{server.url}/api/v1/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    r = rpc(url, api.key, init)
    session = r.headers["mcp-session-id"]
    assert re.fullmatch(r"[0-9a-f-]{36}", session), r.headers
    first, second = nonce(), nonce()
    for question in (first, second):
        r = rpc(url, api.key, {**CALL, "params": {"name": "memo", "arguments": {"question": question}}},
                **{"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
        assert r.json()["result"]["isError"] is False, r.text
    # Both calls are one chat, its id the session's; the memory saw the first.
    messages = api.get(f"/chatmessage/{flow}", params={"chatId": session}).json()
    assert [m["content"] for m in messages if m["role"] == "userMessage"] == [first, second]
    assert first in json.dumps(fake.bodies("/chat/completions", second))
    # A call without a session is a chat of its own.
    alone = nonce()
    rpc(url, api.key, {**CALL, "params": {"name": "memo", "arguments": {"question": alone}}})
    chats = {m["chatId"] for m in api.get(f"/chatmessage/{flow}", params={"chatType": "MCP"}).json()}
    assert len(chats) == 2 and session in chats
    assert requests.delete(url, timeout=10, headers={
        "Authorization": f"Bearer {api.key}", "Mcp-Session-Id": session}).status_code == 204
    assert_rpc_error(rpc(url, api.key, init, **{"Mcp-Session-Id": "has space"}), 400, "Mcp-Session-Id")


def test_progress_notifications_arrive_before_the_result(workspace, fake, server):
    _, api = workspace
    flow = echo_flow(api, fake, name="Streamer")
    token = publish(api, flow)["token"]
    seen = []

    async def progress(value, total, message):
        seen.append((value, message))

    marker = nonce()
    [answer] = run(session_calls(f"{server.url}/api/v1/mcp/{flow}", token,
                                 ("call", "streamer", {"question": f"stream {marker}"}), progress=progress))
    assert text_of(answer) == f"Echo: stream {marker}"
    assert seen, "no progress notification"
    assert [v for v, _ in seen] == sorted(v for v, _ in seen)
    assert "".join(m for _, m in seen) == f"Echo: stream {marker}"
    # Raw: a call with a progress token from a client that takes a stream is one.
    r = requests.post(f"{server.url}/api/v1/mcp/{flow}", timeout=30, stream=True, json={
        **CALL, "params": {"name": "streamer", "arguments": {"question": "raw"}, "_meta": {"progressToken": "p"}}},
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"})
    assert r.headers["content-type"].startswith("text/event-stream")
    messages = [json.loads(line[5:]) for line in r.iter_lines(decode_unicode=True) if line.startswith("data:")]
    assert all(m["method"] == "notifications/progress" and m["params"]["progressToken"] == "p"
               for m in messages[:-1]), messages
    assert messages[-1]["result"]["content"][0]["text"] == "Echo: raw"


def test_agentflow_steps_are_progress(workspace, server):
    _, api = workspace
    flow = create_flow(api, chain(af_start(), af_reply("directReplyAgentflow_0", "Done")), type="AGENTFLOW",
                       name="Steps")
    token = publish(api, flow)["token"]
    seen = []

    async def progress(value, total, message):
        seen.append(message)

    [answer] = run(session_calls(f"{server.url}/api/v1/mcp/{flow}", token, ("call", "steps", {"question": "go"}),
                                 progress=progress))
    assert text_of(answer) == "Done"
    assert any(m and m.startswith("Direct Reply") for m in seen), seen


def test_allowed_pages_and_the_calls_counted(make_weir, fake):
    w = make_weir()
    w.env.update(METRICS_TOKEN="scrape-mcp", MCP_CORS_ORIGINS="https://ok.example")
    w.start()
    api = Api(w.url, w.create_key())
    flow = echo_flow(api, fake)
    token = publish(api, flow)["token"]
    url = f"{w.url}/api/v1/mcp/{flow}"
    r = rpc(url, token, {**CALL, "params": {"name": "support_bot", "arguments": {"question": "hi"}}},
            Origin="https://ok.example")
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://ok.example"
    assert_rpc_error(rpc(url, token, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, Origin="https://no.example"),
                     403, "MCP_CORS_ORIGINS")
    preflight = requests.options(url, timeout=10, headers={
        "Origin": "https://ok.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version"})
    assert preflight.headers["access-control-allow-origin"] == "https://ok.example"
    # The API's own CORS list (`*` by default) does not open the MCP endpoints to other pages.
    preflight = requests.options(url, timeout=10, headers={
        "Origin": "https://no.example", "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers
    rpc(url, token, {**CALL, "params": {"name": "nope", "arguments": {}}})
    metrics = requests.get(f"{w.url}/metrics", timeout=10, headers={"Authorization": "Bearer scrape-mcp"}).text
    assert 'weir_mcp_calls_total{server="flow",method="tools/call",outcome="ok"} 1' in metrics
    assert 'weir_mcp_calls_total{server="flow",method="tools/call",outcome="error"} 1' in metrics


def test_source_documents_come_as_embedded_resources(workspace, fake, server):
    _, api = workspace
    doc = flows.plain_text("The canteen serves soup on Mondays.")
    embeddings = flows.openai_embeddings(fake.url)
    store = flows.memory_vector_store([doc], embeddings)
    model = flows.openai_model(fake.url)
    chain = flows.conversational_retrieval_qa_chain(model, store, returnSourceDocuments=True)
    flow = create_flow(api, flows.rag(doc, embeddings, store, model, chain), name="Canteen")
    assert api.post(f"/vector/upsert/{flow}", json={}).status_code == 200
    token = publish(api, flow)["token"]
    r = rpc(f"{server.url}/api/v1/mcp/{flow}", token,
            {**CALL, "params": {"name": "canteen", "arguments": {"question": "When is soup served?"}}})
    result = r.json()["result"]
    assert result["isError"] is False, result
    text, source = result["content"]
    assert text["type"] == "text" and text["text"]
    assert source["type"] == "resource", source
    resource = source["resource"]
    assert re.fullmatch(rf"weir://chatflows/{flow}/messages/[0-9a-f-]+/sources/0", resource["uri"]), resource
    assert resource["mimeType"] == "application/json"
    assert json.loads(resource["text"])["pageContent"] == "The canteen serves soup on Mondays."


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_question_for_a_person_is_asked_of_the_client(workspace, server, mode):
    """Elicitation: a client of the workspace server that answers elicitations is
    asked a human input node's question, and the flow goes on with the answer:
    accept (proceed or reject, with feedback), decline (a rejection), cancel (the
    flow waits; the error says how to answer it). In the handshake era (`legacy`)
    it is asked during the call, over the call's stream; per request (the SDK's
    `auto` negotiates 2026-07-28 with weir) the call answers an
    `InputRequiredResult` and the SDK calls again with the answer."""
    _, api = workspace
    human = flows.af_human_input("humanInputAgentflow_0", "Shall I go on?")
    nodes = [af_start(), human, af_reply("directReplyAgentflow_0", "Went on"),
             af_reply("directReplyAgentflow_1", "Stopped: {{ humanInputAgentflow_0 }}", label="Stopped")]
    links = [("startAgentflow_0", "humanInputAgentflow_0"), ("humanInputAgentflow_0", "directReplyAgentflow_0", 0),
             ("humanInputAgentflow_0", "directReplyAgentflow_1", 1)]
    flow = create_flow(api, flows.agentflow(nodes, links), type="AGENTFLOW", name="Approval")
    publish(api, flow)
    asked = []
    answers = iter([
        ElicitResult(action="accept", content={"decision": "proceed"}),
        ElicitResult(action="accept", content={"decision": "reject", "feedback": "too pricey"}),
        ElicitResult(action="decline"),
        ElicitResult(action="cancel"),
    ])

    async def answer(context, params):
        schema = params.requested_schema
        asked.append((params.message, schema.model_dump(by_alias=True, exclude_none=True)
                      if hasattr(schema, "model_dump") else schema))
        return next(answers)

    call = ("call", "approval", {"question": "go"})
    results = run(session_calls(f"{server.url}/api/v1/mcp", api.key, call, call, call, call, elicitation=answer,
                                mode=mode))
    assert [text_of(r) for r in results[:3]] == ["Went on", "Stopped: too pricey", "Stopped: reject"]
    assert results[3].is_error
    assert "dismissed" in results[3].content[0].text and "humanInput" in results[3].content[0].text
    assert len(asked) == 4
    message, schema = asked[0]
    assert "Shall I go on?" in message, message
    assert schema["properties"]["decision"]["enum"] == ["proceed", "reject"]


def test_a_run_that_waits_for_a_person_says_how_to_go_on(workspace, server):
    """A client that does not answer elicitations (Flowise's endpoint never asks):
    the result is an error naming the prediction that resumes the run, and the
    run waits there."""
    _, api = workspace
    human = flows.af_human_input("humanInputAgentflow_0", "Shall I go on?")
    flow = create_flow(api, chain(af_start(), human, af_reply("directReplyAgentflow_0", "Went on")),
                       type="AGENTFLOW", name="Approval")
    token = publish(api, flow)["token"]
    r = rpc(f"{server.url}/api/v1/mcp/{flow}", token,
            {**CALL, "params": {"name": "approval", "arguments": {"question": "go"}}})
    result = r.json()["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert f"POST /api/v1/prediction/{flow}" in text and "humanInput" in text, text
    chat_id = re.search(r'"chatId":"([^"]+)"', text).group(1)
    # The run waits under that chat: answering it there goes on.
    action = api.get(f"/chatmessage/{flow}", params={"chatId": chat_id}).json()[-1]
    assert action["role"] == "apiMessage"
    r = api.post(f"/prediction/{flow}", json={"chatId": chat_id, "humanInput": {
        "type": "proceed", "startNodeId": "humanInputAgentflow_0", "feedback": ""}})
    assert r.status_code == 200 and r.json()["text"] == "Went on", r.text


def test_a_form_no_tool_can_take_is_left_out(workspace, fake, server):
    _, api = workspace
    odd = create_flow(api, chain(af_start(form=[{"type": "date", "label": "When", "name": "when"}]),
                                 af_reply("directReplyAgentflow_0", "ok")), type="AGENTFLOW", name="Odd form")
    token = publish(api, odd)["token"]
    publish(api, echo_flow(api, fake, name="Fine"))
    [tools] = run(session_calls(f"{server.url}/api/v1/mcp", api.key, ("list",)))
    assert [t.name for t in tools] == ["fine"]
    r = rpc(f"{server.url}/api/v1/mcp/{odd}", token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    error = r.json()["error"]
    assert error["code"] == -32603 and "'when'" in error["message"] and "date" in error["message"], error


# ------------------------------------------------- the per-request protocol (2026-07-28)

def test_the_sdk_negotiates_the_per_request_protocol(workspace, fake, server):
    _, api = workspace
    flow = echo_flow(api, fake, name="Modern Bot")
    token = publish(api, flow)["token"]
    seen = []

    async def calls():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        client = Client(streamable_http_client(f"{server.url}/api/v1/mcp/{flow}", http_client=http))
        async with http, client:
            seen.append(client.session.discover_result)
            seen.append((await client.list_tools()).tools)
            seen.append(await client.call_tool("modern_bot", {"question": "hi"}))

    run(calls())
    discovered, tools, answer = seen
    assert discovered is not None and discovered.supported_versions == [MODERN]
    assert [t.name for t in tools] == ["modern_bot"]
    assert text_of(answer) == "Echo: hi"


def test_per_request_envelopes_are_checked(workspace, fake, server):
    _, api = workspace
    flow = echo_flow(api, fake, name="Modern Bot")
    publish(api, flow)
    url = f"{server.url}/api/v1/mcp"
    r = modern(url, api.key, "server/discover")
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert result["supportedVersions"] == [MODERN] and result["resultType"] == "complete"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "weir"
    assert "mcp-session-id" not in r.headers
    listing = modern(url, api.key, "tools/list").json()["result"]
    assert [t["name"] for t in listing["tools"]] == ["modern_bot"]
    assert listing["cacheScope"] == "private" and listing["ttlMs"] == 60000 and listing["resultType"] == "complete"
    call = modern(url, api.key, "tools/call", {"name": "modern_bot", "arguments": {"question": "x"}}, name="modern_bot")
    result = call.json()["result"]
    assert result["content"] == [{"type": "text", "text": "Echo: x"}] and result["resultType"] == "complete"
    # Each call is its own chat: nothing keeps a session.
    chats = {m["chatId"] for m in api.get(f"/chatmessage/{flow}", params={"chatType": "MCP"}).json()}
    assert len(chats) == 1

    def refused(response, status, code, words):
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert error["code"] == code and words in error["message"], error
        return error

    bare = rpc(url, api.key, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
               **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    refused(bare, 400, -32602, "params._meta")
    refused(modern(url, api.key, "tools/list", **{"Mcp-Method": "tools/call"}), 400, -32020, "mcp-method")
    refused(modern(url, api.key, "tools/call", {"name": "modern_bot", "arguments": {}}, name="other"),
            400, -32020, "mcp-name")
    # A name carried base64-encoded in the header is read as the specification says.
    encoded = modern(url, api.key, "tools/call", {"name": "modern_bot", "arguments": {"question": "y"}},
                     name="=?base64?bW9kZXJuX2JvdA==?=")
    assert encoded.json()["result"]["content"][0]["text"] == "Echo: y", encoded.text
    refused(modern(url, api.key, "initialize", {"protocolVersion": "2025-11-25"}), 404, -32601, "initialize")
    refused(modern(url, api.key, "resources/list"), 404, -32601, "resources/list")
    batch = rpc(url, api.key, [{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": envelope()}}],
                **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "ping"})
    refused(batch, 400, -32600, "batch")
    # A routing header sent twice (readers of the first and the last would disagree).
    parsed = urllib.parse.urlparse(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    connection.putrequest("POST", parsed.path)
    for name, value in [("Authorization", f"Bearer {api.key}"), ("Content-Type", "application/json"),
                        ("MCP-Protocol-Version", MODERN), ("MCP-Protocol-Version", MODERN)]:
        connection.putheader(name, value)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body)
    twice = connection.getresponse()
    assert twice.status == 400 and json.loads(twice.read())["error"]["code"] == -32020
    connection.close()
    note = rpc(url, api.key, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": envelope()}},
               **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "notifications/cancelled"})
    assert note.status_code == 202


def test_a_question_is_input_required_and_its_state_is_sealed(workspace, server):
    """Per request, a flow that stops for a person answers an
    `InputRequiredResult`; the client calls again with the answer and the
    `requestState`. A client without elicitation gets the resume path; a state
    weir did not make is refused."""
    _, api = workspace
    human = flows.af_human_input("humanInputAgentflow_0", "Shall I go on?")
    flow = create_flow(api, chain(af_start(), human, af_reply("directReplyAgentflow_0", "Went on")),
                       type="AGENTFLOW", name="Gate")
    publish(api, flow)
    url = f"{server.url}/api/v1/mcp"
    arguments = {"name": "gate", "arguments": {"question": "go"}}

    def call(capabilities, **extra):
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"_meta": envelope(capabilities=capabilities), **arguments, **extra}}
        return rpc(url, api.key, body, **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
                                          "Mcp-Name": "gate"}).json()["result"]

    asked = call({"elicitation": {"form": {}}})
    assert asked["resultType"] == "input_required", asked
    question = asked["inputRequests"]["decision"]
    assert question["method"] == "elicitation/create" and "Shall I go on?" in question["params"]["message"]
    assert question["params"]["requestedSchema"]["properties"]["decision"]["enum"] == ["proceed", "reject"]
    state = asked["requestState"]
    assert state.startswith("sealed:") and "chatId" not in state
    went_on = call({"elicitation": {}}, requestState=state,
                   inputResponses={"decision": {"action": "accept", "content": {"decision": "proceed"}}})
    assert went_on["resultType"] == "complete" and went_on["content"][0]["text"] == "Went on", went_on
    # A state changed on the way, or one for another tool, is refused; so is a missing answer.
    forged = call({"elicitation": {}}, requestState=state[:-6] + "AAAAAA",
                  inputResponses={"decision": {"action": "accept", "content": {"decision": "proceed"}}})
    assert forged["isError"] is True and "requestState" in forged["content"][0]["text"]
    unanswered = call({"elicitation": {}}, requestState=call({"elicitation": {}})["requestState"])
    assert unanswered["isError"] is True and "inputResponses" in unanswered["content"][0]["text"]
    # Without the capability: the resume path, as in the handshake era.
    hint = call({})
    assert hint["isError"] is True and "humanInput" in hint["content"][0]["text"]
