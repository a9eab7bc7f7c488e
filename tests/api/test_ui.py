"""Flowise's own UI served by weir: the `flowise-ui` build (scripts/fetch-ui) at `/`
with the single-page fallback, its caching headers and Content-Security-Policy;
signing in with a weir API key as the password, and the session cookie that then
stands for that key — only from weir's own pages (`x-request-from: internal`, this
origin), only while the key exists, and gone after logout."""

import json
import re
import time

import pytest
import requests

import flows
from weir_harness import UI_DIR, Api, assert_error

pytestmark = pytest.mark.skipif(not (UI_DIR / "build" / "index.html").exists(),
                                reason="Flowise's UI is not fetched (scripts/fetch-ui)")

INTERNAL = {"x-request-from": "internal"}


def bundle_script() -> str:
    """The path of the bundle's entry script, as index.html names it."""
    found = re.search(r'src="(/assets/index-[^"]+\.js)"', (UI_DIR / "build" / "index.html").read_text())
    assert found, "index.html names no entry script"
    return found.group(1)


def sign_in(url: str, key: str, email: str = "ada@example.com") -> requests.Session:
    """A browser-like session signed in with `key`."""
    session = requests.Session()
    answer = session.post(f"{url}/api/v1/auth/login", json={"email": email, "password": key},
                          headers=INTERNAL, timeout=30)
    assert answer.status_code == 200, answer.text
    return session


def test_the_ui_is_served_at_the_root_with_its_single_page_fallback(server):
    home = requests.get(f"{server.url}/", timeout=30)
    assert home.status_code == 200, home.text[:200]
    assert home.headers["content-type"].startswith("text/html")
    assert '<div id="root">' in home.text
    assert home.headers["cache-control"] == "no-cache"
    policy = home.headers["content-security-policy"]
    # The bundle and the page's two inline scripts (by hash), nothing from elsewhere.
    assert "script-src 'self' 'sha256-" in policy and policy.count("'sha256-") == 2, policy
    assert "connect-src 'self'" in policy and "frame-ancestors 'self'" in policy, policy
    assert "https:" not in policy and "*" not in policy, policy

    # A page of the app, opened directly, is the same document: the app routes it.
    for page in ("/chatflows", "/canvas/8f6f5d8e-0000-4000-8000-000000000000", "/signin"):
        deep = requests.get(f"{server.url}{page}", timeout=30)
        assert deep.status_code == 200 and deep.text == home.text, page

    script = requests.get(f"{server.url}{bundle_script()}", timeout=30)
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    # The entry script's tools page is weir's words (test_the_tools_page_says_python):
    # revalidated, since its hashed name is of Flowise's bytes. The other files are
    # Flowise's own, cached for a year.
    assert script.headers["cache-control"] == "no-cache"
    assert script.headers["x-content-type-options"] == "nosniff"
    style = re.search(r'href="(/assets/index-[^"]+\.css)"', (UI_DIR / "build" / "index.html").read_text())
    assert style, "index.html names no stylesheet"
    css = requests.get(f"{server.url}{style.group(1)}", timeout=30)
    assert css.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert css.content == (UI_DIR / "build" / style.group(1).lstrip("/")).read_bytes()
    again = requests.get(f"{server.url}{bundle_script()}", headers={"If-None-Match": script.headers["etag"]},
                         timeout=30)
    assert again.status_code == 304 and again.content == b""
    icon = requests.get(f"{server.url}/favicon.ico", timeout=30)
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
    assert icon.content == (UI_DIR / "build" / "favicon.ico").read_bytes()

    # A missing bundle file is a 404, not the page; the API's unknown paths stay JSON.
    assert_error(requests.get(f"{server.url}/assets/index-gone.js", timeout=30), 404)
    assert_error(requests.get(f"{server.url}/api/v1/no-such-route", timeout=30), 404, "no such route")
    assert_error(requests.get(f"{server.url}/api/nothing", timeout=30), 404)
    # /metrics stays the metrics route (off here: its own JSON answer, not the page).
    assert_error(requests.get(f"{server.url}/metrics", timeout=30), 404, "METRICS_TOKEN")
    assert_error(requests.post(f"{server.url}/chatflows", json={}, timeout=30), 405)
    # The fetch script's bookkeeping is not served.
    assert requests.get(f"{server.url}/.weir-ui", timeout=30).text == home.text


def test_weir_ui_off_and_a_missing_build_answer_json(make_weir, tmp_path):
    off = make_weir()
    off.env["WEIR_UI"] = "off"
    off.start()
    assert_error(requests.get(f"{off.url}/", timeout=30), 404, "no such route")
    assert_error(requests.get(f"{off.url}/chatflows", timeout=30), 404, "no such route")

    missing = make_weir()
    missing.env["WEIR_UI_DIR"] = str(tmp_path / "nowhere")
    missing.start()
    assert_error(requests.get(f"{missing.url}/", timeout=30), 404, "scripts/fetch-ui")
    assert "scripts/fetch-ui" in missing.logs()
    assert requests.get(f"{missing.url}/api/v1/ping", timeout=30).status_code == 200


def test_what_the_ui_asks_before_signing_in(server):
    settings = requests.get(f"{server.url}/api/v1/settings", headers=INTERNAL, timeout=30)
    assert settings.status_code == 200 and settings.json() == {"PLATFORM_TYPE": "open source"}
    resolve = requests.post(f"{server.url}/api/v1/auth/resolve", json={}, headers=INTERNAL, timeout=30)
    assert resolve.status_code == 200 and resolve.json() == {"redirectUrl": "/signin"}
    assert_error(requests.post(f"{server.url}/api/v1/auth/refreshToken", json={}, headers=INTERNAL, timeout=30),
                 401, "sign in again")


def test_signing_in_with_an_api_key_sets_a_session_cookie_for_that_key(server):
    key = server.create_key("chatflows:read", workspace="ui-readers", name="reader")
    answer = requests.post(f"{server.url}/api/v1/auth/login", json={"email": "ada@example.com", "password": key},
                           headers=INTERNAL, timeout=30)
    assert answer.status_code == 200, answer.text
    user = answer.json()
    assert user["email"] == "ada@example.com" and user["name"] == "reader"
    assert user["activeWorkspace"] == "ui-readers" and user["permissions"] == ["chatflows:read"]
    assert user["assignedWorkspaces"] == [{"id": user["activeWorkspaceId"], "name": "ui-readers"}]
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("weir_session=") and key not in cookie
    for attribute in ("HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"):
        assert attribute in cookie, cookie
    # Plain HTTP here; a page served over HTTPS gets a Secure cookie.
    assert "Secure" not in cookie, cookie
    over_https = requests.post(f"{server.url}/api/v1/auth/login", json={"email": "a@b.c", "password": key},
                               headers={**INTERNAL, "Origin": "https://weir.example"}, timeout=30)
    assert over_https.headers["set-cookie"].endswith("; Secure"), over_https.headers["set-cookie"]

    # The session can do what its key can, and no more.
    session = requests.Session()
    session.cookies.set("weir_session", answer.cookies["weir_session"])
    listed = session.get(f"{server.url}/api/v1/chatflows", headers=INTERNAL, timeout=30)
    assert listed.status_code == 200, listed.text
    assert_error(session.post(f"{server.url}/api/v1/chatflows", json={"name": "x", "flowData": "{}"},
                              headers=INTERNAL, timeout=30), 403, "chatflows:write")


def test_a_wrong_key_signs_no_one_in(server):
    for body in ({"email": "a@b.c", "password": "weir_not-a-key"}, {"email": "a@b.c"}, {"password": ""}):
        answer = requests.post(f"{server.url}/api/v1/auth/login", json=body, headers=INTERNAL, timeout=30)
        assert_error(answer, 401)
        assert "set-cookie" not in answer.headers


def test_the_session_counts_only_from_weirs_own_pages(server):
    session = sign_in(server.url, server.create_key(workspace="ui-origin"))
    url = f"{server.url}/api/v1/chatflows"
    assert session.get(url, headers=INTERNAL, timeout=30).status_code == 200
    # Without the UI's header the cookie is not a credential at all.
    assert_error(session.get(url, timeout=30), 401, "API key is required")
    # From another origin (another port is another origin), it is refused too.
    assert_error(session.get(url, headers={**INTERNAL, "Origin": "http://127.0.0.1:1"}, timeout=30), 401)
    assert_error(session.get(url, headers={**INTERNAL, "Sec-Fetch-Site": "same-site"}, timeout=30), 401)
    same = {**INTERNAL, "Origin": server.url, "Sec-Fetch-Site": "same-origin"}
    assert session.get(url, headers=same, timeout=30).status_code == 200
    # A forged or altered cookie is no session.
    forged = requests.Session()
    forged.cookies.set("weir_session", session.cookies["weir_session"][:-4] + "AAAA")
    assert_error(forged.get(url, headers=INTERNAL, timeout=30), 401, "sign in again")

    # No browser page of another origin can send the UI's header: the preflight
    # does not admit it, and weir never admits credentials across origins.
    preflight = requests.options(url, headers={"Origin": "http://127.0.0.1:1", "Access-Control-Request-Method": "GET",
                                               "Access-Control-Request-Headers": "x-request-from"}, timeout=30)
    allowed = preflight.headers.get("access-control-allow-headers", "").lower()
    assert "x-request-from" not in allowed
    assert "access-control-allow-credentials" not in preflight.headers


def test_logout_and_revoking_the_key_end_the_session(server):
    admin = Api(server.url, server.create_key(workspace="ui-revoke"))
    created = admin.post("/apikey", json={"keyName": "laptop", "permissions": ["chatflows:read"]})
    assert created.status_code in (200, 201), created.text
    laptop = created.json()
    url = f"{server.url}/api/v1/chatflows"

    session = sign_in(server.url, laptop["apiKey"])
    assert session.get(url, headers=INTERNAL, timeout=30).status_code == 200
    out = session.post(f"{server.url}/api/v1/account/logout", json={}, headers=INTERNAL, timeout=30)
    assert out.status_code == 200
    assert "Max-Age=0" in out.headers["set-cookie"]
    assert "weir_session" not in session.cookies
    assert_error(session.get(url, headers=INTERNAL, timeout=30), 401)

    session = sign_in(server.url, laptop["apiKey"])
    assert session.get(url, headers=INTERNAL, timeout=30).status_code == 200
    assert admin.delete(f"/apikey/{laptop['id']}").status_code in (200, 204)
    assert_error(session.get(url, headers=INTERNAL, timeout=30), 401, "revoked")


def ui_session(server, workspace: str) -> tuple[requests.Session, Api]:
    """A signed-in UI session and an API client of the same fresh workspace."""
    key = server.create_key(workspace=workspace)
    return sign_in(server.url, key), Api(server.url, key)


def test_the_palette_lists_the_nodes_weir_runs(server):
    session, api = ui_session(server, "ui-palette")
    nodes = session.get(f"{server.url}/api/v1/nodes", headers=INTERNAL, timeout=30)
    assert nodes.status_code == 200, nodes.text
    by_name = {n["name"]: n for n in nodes.json()}
    assert {"chatOpenAI", "conversationChain", "bufferMemory", "pythonTool", "agentAgentflow"} <= set(by_name)
    assert all(n["category"] != "Unsupported" for n in by_name.values())
    openai = by_name["chatOpenAI"]
    assert openai["label"] == "OpenAI" and openai["category"] == "Chat Models"  # Flowise 3.1's label
    assert openai["credential"]["credentialNames"] == ["openAIApi"]
    assert "BaseChatModel" in openai["baseClasses"]
    temperature = next(i for i in openai["inputs"] if i["name"] == "temperature")
    assert temperature["type"] == "number" and temperature["default"] == 0.9
    # Inputs weir takes without effect are not offered.
    assert not any(i["name"] == "proxyUrl" for i in openai["inputs"])
    chain = by_name["conversationChain"]
    model = next(i for i in chain["inputs"] if i["name"] == "model")
    assert model["type"] in openai["baseClasses"] and model["optional"] is False
    assert by_name["pythonTool"]["category"] == "Tools" and by_name["pythonTool"]["description"]

    one = session.get(f"{server.url}/api/v1/nodes/chatOpenAI", headers=INTERNAL, timeout=30)
    assert one.status_code == 200 and one.json() == openai
    assert_error(session.get(f"{server.url}/api/v1/nodes/chatNope", headers=INTERNAL, timeout=30), 404, "chatNope")
    models = session.get(f"{server.url}/api/v1/nodes/category/Chat Models", headers=INTERNAL, timeout=30).json()
    assert "chatOpenAI" in {n["name"] for n in models} and all(n["category"] == "Chat Models" for n in models)
    # The same with a key; and nothing without one.
    assert api.get("/nodes").json() == nodes.json()
    assert_error(requests.get(f"{server.url}/api/v1/nodes", timeout=30), 401)


def test_node_icons_are_public_images_that_run_nothing(server):
    icon = requests.get(f"{server.url}/api/v1/node-icon/chatOpenAI", timeout=30)
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert icon.content == (UI_DIR / "components" / "dist/nodes/chatmodels/ChatOpenAI/openai.svg").read_bytes()
    assert "sandbox" in icon.headers["content-security-policy"]
    assert icon.headers["x-content-type-options"] == "nosniff"
    # weir's own nodes carry weir's mark.
    own = requests.get(f"{server.url}/api/v1/node-icon/pythonTool", timeout=30)
    assert own.status_code == 200 and own.content.startswith(b"<svg")
    assert_error(requests.get(f"{server.url}/api/v1/node-icon/nothing", timeout=30), 404)
    assert_error(requests.get(f"{server.url}/api/v1/node-icon/..%2F..%2Fsecret.key", timeout=30), 404)


def test_the_chatflow_list_answers_the_uis_envelope_and_filters_by_type(server):
    session, api = ui_session(server, "ui-lists")
    for name, kind in (("one", "CHATFLOW"), ("two", "CHATFLOW"), ("agent", "AGENTFLOW")):
        created = api.post("/chatflows", json={"name": name, "type": kind, "flowData": flows.agentflow([flows.af_start()])
                                               if kind == "AGENTFLOW" else flows.conversation(
                                                   flows.openai_model("http://127.0.0.1:9"), flows.buffer_memory())})
        assert created.status_code == 201, created.text
    url = f"{server.url}/api/v1/chatflows"
    page = session.get(url, params={"type": "CHATFLOW", "page": 1, "limit": 1}, headers=INTERNAL, timeout=30)
    assert page.status_code == 200, page.text
    assert page.json()["total"] == 2 and len(page.json()["data"]) == 1
    assert page.json()["data"][0]["type"] == "CHATFLOW"
    agents = session.get(url, params={"type": "AGENTFLOW", "page": 1, "limit": 12}, headers=INTERNAL, timeout=30)
    assert [f["name"] for f in agents.json()["data"]] == ["agent"]
    # weir's documented list is unchanged: a bare array, the total in a header.
    bare = api.get("/chatflows", params={"type": "CHATFLOW", "page": 1, "limit": 1})
    assert isinstance(bare.json(), list) and bare.headers["x-total-count"] == "2"
    assert len(api.get("/chatflows").json()) == 3
    assert_error(api.get("/chatflows", params={"type": "FLOWCHART"}), 400)


def test_a_flow_written_through_the_api_opens_on_the_canvas_unchanged_in_store(server):
    session, api = ui_session(server, "ui-canvas")
    flow_data = flows.conversation(flows.openai_model("http://127.0.0.1:9"), flows.buffer_memory())
    created = api.post("/chatflows", json={"name": "drawn later", "flowData": flow_data}).json()
    as_ui = session.get(f"{server.url}/api/v1/chatflows/{created['id']}", headers=INTERNAL, timeout=30).json()
    drawn = json.loads(as_ui["flowData"])
    for node in drawn["nodes"]:
        data = node["data"]
        assert node["type"] == "customNode" and "position" in node
        assert isinstance(data["inputParams"], list) and isinstance(data["inputAnchors"], list)
        assert data["outputAnchors"][0]["id"].startswith(f"{node['id']}-output-{data['name']}-")
    positions = {(n["position"]["x"], n["position"]["y"]) for n in drawn["nodes"]}
    assert len(positions) == len(drawn["nodes"])
    targets = {(e["source"], e["target"]) for e in drawn["edges"]}
    assert all(e["sourceHandle"] and e["targetHandle"] for e in drawn["edges"])
    assert len(targets) >= 2
    # What is stored (and what API clients read) is what was written.
    assert api.get(f"/chatflows/{created['id']}").json()["flowData"] == created["flowData"]


def test_the_canvas_learns_whether_the_flow_changed_since_it_opened_it(server):
    _, api = ui_session(server, "ui-changed")
    created = api.post("/chatflows", json={"name": "v1", "flowData": flows.conversation(
        flows.openai_model("http://127.0.0.1:9"), flows.buffer_memory())}).json()
    opened = created["updatedDate"]
    path = f"/chatflows/has-changed/{created['id']}/{opened}"
    assert api.get(path).json() == {"hasChanged": False}
    time.sleep(0.01)
    assert api.put(f"/chatflows/{created['id']}", json={"name": "v2"}).status_code == 200
    assert api.get(path).json() == {"hasChanged": True}
    assert_error(api.get(f"/chatflows/has-changed/{created['id']}/yesterday"), 400, "updatedDate")
    assert_error(api.get(f"/chatflows/has-changed/00000000-0000-4000-8000-000000000000/{opened}"), 404)


def test_the_canvas_chat_panel_runs_the_workspaces_flows_as_internal_chats(server):
    from fakes import FakeProviders
    fake = FakeProviders()
    session, api = ui_session(server, "ui-panel")
    flow = api.post("/chatflows", json={"name": "panel", "isPublic": True, "flowData": flows.conversation(
        flows.openai_model(fake.url), flows.buffer_memory())}).json()["id"]
    uploads = session.get(f"{server.url}/api/v1/chatflows-uploads/{flow}", headers=INTERNAL, timeout=30)
    assert uploads.status_code == 200, uploads.text
    assert uploads.json()["isImageUploadAllowed"] is True and uploads.json()["isRAGFileUploadAllowed"] is False

    asked = session.post(f"{server.url}/api/v1/internal-prediction/{flow}", headers=INTERNAL, timeout=30,
                         json={"question": "From the canvas", "chatId": "panel-1"})
    assert asked.status_code == 200 and asked.json()["text"] == "Echo: From the canvas", asked.text
    # With a key and without the UI's header it is still the canvas's chat.
    assert api.post(f"/internal-prediction/{flow}", json={"question": "Keyed", "chatId": "panel-2"}).status_code == 200
    assert api.post(f"/prediction/{flow}", json={"question": "From outside", "chatId": "api-1"}).status_code == 200
    internal = session.get(f"{server.url}/api/v1/internal-chatmessage/{flow}", headers=INTERNAL, timeout=30).json()
    assert {m["content"] for m in internal if m["role"] == "userMessage"} == {"From the canvas", "Keyed"}
    assert all(m["chatType"] == "INTERNAL" for m in internal)

    # Public or not, another workspace's chatflow is not the panel's to run.
    other, _ = ui_session(server, "ui-panel-other")
    assert_error(other.post(f"{server.url}/api/v1/internal-prediction/{flow}", headers=INTERNAL, timeout=30,
                            json={"question": "hi"}), 404)
    assert_error(other.get(f"{server.url}/api/v1/chatflows-uploads/{flow}", headers=INTERNAL, timeout=30), 404)
    assert_error(requests.post(f"{server.url}/api/v1/internal-prediction/{flow}", json={"question": "hi"},
                               timeout=30), 401)


def load(session, server, node, method, **body):
    return session.post(f"{server.url}/api/v1/node-load-method/{node}", headers=INTERNAL, timeout=30,
                        json={"name": node, "loadMethod": method, **body})


def test_load_methods_offer_what_only_the_server_knows(server):
    session, api = ui_session(server, "ui-load")
    # A provider node's models, and the input that asks for them.
    openai = session.get(f"{server.url}/api/v1/nodes/chatOpenAI", headers=INTERNAL, timeout=30).json()
    model_input = next(i for i in openai["inputs"] if i["name"] == "modelName")
    assert (model_input["type"], model_input["loadMethod"]) == ("asyncOptions", "listModels")
    models = load(session, server, "chatOpenAI", "listModels")
    assert models.status_code == 200, models.text
    assert {"label": "gpt-4o-mini (latest)", "name": "gpt-4o-mini"} in models.json()
    # An agentflow node picks among the node types weir runs.
    agent_models = load(session, server, "agentAgentflow", "listModels").json()
    openai_option = next(m for m in agent_models if m["name"] == "chatOpenAI")
    assert openai_option["imageSrc"] == "/api/v1/node-icon/chatOpenAI"
    assert not any(m["name"].endswith("_LlamaIndex") for m in agent_models)
    agent_tools = {t["name"] for t in load(session, server, "agentAgentflow", "listTools").json()}
    assert {"calculator", "pythonTool"} <= agent_tools and "retrieverTool" not in agent_tools

    # The workspace's own records.
    tool = api.post("/tools", json={"name": "weigh_parcel", "description": "Weighs it", "code": "return 1"}).json()
    stored = load(session, server, "customTool", "listTools").json()
    assert stored == [{"label": "weigh_parcel", "name": tool["id"], "description": "Weighs it"}]
    for name in ("zeta", "Alpha"):
        assert api.post("/chatflows", json={"name": name, "flowData": flows.conversation(
            flows.openai_model("http://127.0.0.1:9"), flows.buffer_memory())}).status_code == 201
    listed = load(session, server, "executeFlowAgentflow", "listFlows").json()
    assert [(f["label"], f["description"]) for f in listed] == [("Alpha", "Chatflow"), ("zeta", "Chatflow")]
    store = api.post("/document-store/store", json={"name": "manuals"})
    assert store.status_code in (200, 201), store.text
    # A store with nothing upserted is not offered to what searches one.
    assert load(session, server, "documentStoreVS", "listStores").json() == []

    # The flow being edited: its state keys, the nodes before this one.
    previous = [{"id": "startAgentflow_0", "name": "startAgentflow", "label": "Start",
                 "inputs": {"startState": [{"key": "topic", "value": ""}]}},
                {"id": "llmAgentflow_0", "name": "llmAgentflow", "label": "Draft", "inputs": {}}]
    keys = load(session, server, "llmAgentflow", "listRuntimeStateKeys", previousNodes=previous).json()
    assert keys == [{"label": "topic", "name": "topic"}]
    back = load(session, server, "loopAgentflow", "listPreviousNodes", previousNodes=previous).json()
    assert back[1] == {"label": "Draft", "name": "llmAgentflow_0-Draft", "description": "llmAgentflow_0"}

    # The agentflow Tool node's arguments: those of the tool it calls.
    weigh = api.post("/tools", json={"name": "weigh", "code": "def main(weight):\n    return weight * 2",
                                     "schema": [{"property": "weight", "type": "number",
                                                 "description": "In kilograms", "required": True}]}).json()
    tool_node = {"id": "toolAgentflow_0", "name": "toolAgentflow",
                 "inputs": {"toolAgentflowSelectedTool": "customTool",
                            "toolAgentflowSelectedToolConfig": {"selectedTool": weigh["id"]}}}
    arguments = load(session, server, "toolAgentflow", "listToolInputArgs", currentNode=tool_node).json()
    assert arguments == [{"label": "weight", "name": "weight", "description": "In kilograms"}], arguments
    tool_node["inputs"] = {"toolAgentflowSelectedTool": "calculator"}
    assert [a["name"] for a in load(session, server, "toolAgentflow", "listToolInputArgs",
                                    currentNode=tool_node).json()] == ["input"]
    [unchosen] = load(session, server, "toolAgentflow", "listToolInputArgs",
                      currentNode={"inputs": {}}).json()
    assert unchosen["name"] == "error" and "choose a tool" in unchosen["description"], unchosen
    assert_error(load(session, server, "openAPIToolkit", "listNothing"), 400, "listNothing")
    # An MCP node's actions are its server's tools (tests/api/test_mcp_client.py); a
    # node without a server says so in the one option Flowise's picker shows.
    [no_server] = load(session, server, "customMCP", "listActions", inputs={}).json()
    assert no_server["name"] == "error" and "mcpServerConfig" in no_server["description"], no_server
    assert_error(load(session, server, "chatNope", "listModels"), 404)
    assert_error(session.post(f"{server.url}/api/v1/node-load-method/chatOpenAI", json={}, headers=INTERNAL,
                              timeout=30), 412, "loadMethod")
    assert_error(requests.post(f"{server.url}/api/v1/node-load-method/chatOpenAI", json={"loadMethod": "listModels"},
                               timeout=30), 401)


def test_credential_types_are_the_ones_weirs_nodes_take(server):
    session, _ = ui_session(server, "ui-credential-types")
    url = f"{server.url}/api/v1/components-credentials"
    types = session.get(url, headers=INTERNAL, timeout=30).json()
    by_name = {t["name"]: t for t in types}
    assert {"openAIApi", "anthropicApi", "googleGenerativeAI"} <= set(by_name)
    assert by_name["openAIApi"]["inputs"] == [{"label": "OpenAI Api Key", "name": "openAIApiKey", "type": "password"}]
    one = session.get(f"{url}/openAIApi", headers=INTERNAL, timeout=30)
    assert one.status_code == 200 and one.json() == by_name["openAIApi"]
    both = session.get(f"{url}/openAIApi&anthropicApi", headers=INTERNAL, timeout=30).json()
    assert [t["name"] for t in both] == ["openAIApi", "anthropicApi"]
    assert_error(session.get(f"{url}/nopeApi", headers=INTERNAL, timeout=30), 404, "nopeApi")
    icon = requests.get(f"{server.url}/api/v1/components-credentials-icon/openAIApi", timeout=30)
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert_error(requests.get(f"{server.url}/api/v1/components-credentials-icon/nopeApi", timeout=30), 404)


def test_the_keys_page_sees_each_keys_chatflows_and_never_a_key(server):
    session, api = ui_session(server, "ui-keys")
    laptop = api.post("/apikey", json={"keyName": "laptop", "permissions": ["predictions:create"]}).json()
    bound = api.post("/chatflows", json={"name": "kiosk", "category": "shop;front", "apikeyid": laptop["id"],
                                         "flowData": flows.conversation(flows.openai_model("http://127.0.0.1:9"),
                                                                        flows.buffer_memory())})
    assert bound.status_code == 201, bound.text
    rows = session.get(f"{server.url}/api/v1/apikey", headers=INTERNAL, timeout=30)
    assert rows.status_code == 200, rows.text
    row = next(r for r in rows.json() if r["keyName"] == "laptop")
    assert row["chatFlows"] == [{"flowName": "kiosk", "category": "shop;front",
                                 "updatedDate": bound.json()["updatedDate"]}]
    assert row["createdAt"] == row["createdDate"]
    assert row["apiKey"].startswith("weir_") and laptop["apiKey"] not in rows.text
    # weir's documented listing is unchanged.
    assert all("chatFlows" not in r and "apiKey" not in r for r in api.get("/apikey").json())


def test_every_paged_list_answers_the_uis_envelope_and_others_the_bare_list(server):
    session, api = ui_session(server, "ui-envelopes")
    assert api.post("/tools", json={"name": "weigh", "code": "return 1"}).status_code == 201
    assert api.post("/variables", json={"name": "region", "value": "eu", "type": "static"}).status_code == 201
    for path, count in (("/tools", 1), ("/variables", 1), ("/apikey", 1)):
        paged = session.get(f"{server.url}/api/v1{path}", params={"page": 1, "limit": 12}, headers=INTERNAL,
                            timeout=30)
        assert paged.status_code == 200, (path, paged.text)
        assert paged.json()["total"] == count and len(paged.json()["data"]) == count, (path, paged.json())
        # Without a page, or without the UI's header, the documented bare list.
        assert isinstance(session.get(f"{server.url}/api/v1{path}", headers=INTERNAL, timeout=30).json(), list)
        bare = api.get(path, params={"page": 1, "limit": 12})
        assert isinstance(bare.json(), list) and bare.headers["x-total-count"] == str(count), path
    assert_error(api.get("/apikey", params={"limit": 0}), 400)


def test_the_permission_map_names_weirs_permissions(server):
    session, _ = ui_session(server, "ui-permissions")
    answer = session.get(f"{server.url}/api/v1/auth/permissions/API_KEY", headers=INTERNAL, timeout=30)
    assert answer.status_code == 200, answer.text
    areas = answer.json()
    assert areas["chatflows"] == [{"key": "chatflows:read", "value": "Read"},
                                  {"key": "chatflows:write", "value": "Write"}]
    keys = {p["key"] for group in areas.values() for p in group}
    # Every permission a key can hold, so a key made in the UI is one weir checks.
    assert len(keys) == 16 and "apikeys:manage" in keys


def test_screens_weir_does_not_serve_yet_show_their_empty_state(server):
    session, _ = ui_session(server, "ui-unserved")
    for path in ("/marketplaces/templates", "/assistants", "/datasets", "/evaluations", "/evaluators"):
        answer = session.get(f"{server.url}/api/v1{path}", headers=INTERNAL, timeout=30)
        assert answer.status_code == 200 and answer.json() == [], path
        paged = session.get(f"{server.url}/api/v1{path}", params={"page": 1, "limit": 10}, headers=INTERNAL,
                            timeout=30)
        assert paged.json() == {"data": [], "total": 0}, path
        assert_error(requests.get(f"{server.url}/api/v1{path}", timeout=30), 401)


def test_the_tools_page_reads_and_writes_weirs_python_tools(server):
    session, api = ui_session(server, "ui-tools")
    made = api.post("/tools", json={"name": "weigh", "description": "Weighs", "code": "return 2",
                                    "schema": [{"property": "grams", "type": "number", "description": "g"}]}).json()
    seen = session.get(f"{server.url}/api/v1/tools/{made['id']}", headers=INTERNAL, timeout=30).json()
    assert seen["func"] == "return 2" and seen["code"] == "return 2"
    assert json.loads(seen["schema"]) == made["schema"]
    listed = session.get(f"{server.url}/api/v1/tools", params={"page": 1, "limit": 12}, headers=INTERNAL,
                         timeout=30).json()
    assert listed["data"][0]["func"] == "return 2" and isinstance(listed["data"][0]["schema"], str)
    # What the page's dialog sends: func, and the schema as JSON text with its row ids.
    created = session.post(f"{server.url}/api/v1/tools", headers=INTERNAL, timeout=30, json={
        "name": "ship", "description": "Ships", "color": "linear-gradient(#fff, #000)", "iconSrc": "",
        "schema": json.dumps([{"id": 0, "property": "to", "type": "string", "description": "city",
                               "required": True}]),
        "func": "return $to"})
    assert created.status_code == 201, created.text
    stored = api.get(f"/tools/{created.json()['id']}").json()
    assert stored["code"] == "return $to" and "func" not in stored
    assert stored["schema"] == [{"property": "to", "type": "string", "description": "city", "required": True}]


def test_the_tools_page_says_python(server):
    """A weir tool's code is Python: the tools page's editor is labelled so, and its
    help, its "How to use" dialog and the example it pastes say how weir runs it."""
    served = requests.get(f"{server.url}{bundle_script()}", timeout=30).text
    fetched = (UI_DIR / "build" / bundle_script().lstrip("/")).read_text(encoding="utf-8")
    assert "Javascript Function" in fetched, "the pinned build changed: see api/src/http/ui_tools_page.rs"
    assert 'children:"Python Function"' in served and "Javascript Function" not in served
    assert "require('node-fetch')" not in served and "def main():" in served and "import requests" in served
    assert "The code is Python, run in the workspace's sandbox" in served
    assert 'children:"{{$userid}}"' in served and '"{{$flow.chatHistory}}"' in served
    assert "Must return a string value at the end of function" not in served
    # Only those literals differ: the rest of the script is Flowise's, byte for byte.
    assert abs(len(served) - len(fetched)) < 2_000
    assert served[:100_000] == fetched[:100_000]
