"""Chatflows exported from Flowise (tests/api/flowise_exports/*.json, every field
Flowise writes, sticky notes included) uploaded as they are and run: agents with
tools and memory on three providers, a supervisor with workers, sequential agents
with a condition, a custom tool, and Flowise's marketplace templates "Local QnA"
and "Conversational Retrieval QA Chain" (a text file upserted, then questions
answered from it). Only what depends on the test is set after loading (base URLs,
the stored tool's id, LocalAI's key); provider keys come from the server's
environment, as exports carry no credentials."""

import json
from pathlib import Path

import pytest

from fakes import GOOD_KEY, FakeProviders, FakeSite
from prediction_client import ask, nonce, tools_used
from tool_runtime import use_runtime
from weir_harness import Api, Weir

EXPORTS = Path(__file__).parent / "flowise_exports"
NODE_FIELDS = {"id", "position", "type", "data", "width", "height", "selected", "positionAbsolute", "dragging"}
DATA_FIELDS = {"id", "label", "version", "name", "type", "baseClasses", "category", "inputParams", "inputAnchors",
               "inputs", "outputAnchors", "outputs", "selected"}
EDGE_FIELDS = {"source", "sourceHandle", "target", "targetHandle", "type", "id", "data"}


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module")
def site():
    s = FakeSite("127.0.0.2", body="public page")
    yield s
    s.close()


@pytest.fixture(scope="module")
def exports_server(py_runtime, fake, tmp_path_factory):
    """A weir with provider keys in its environment that it trusts the fake with
    (PROVIDER_KEY_HOSTS), the Python runtime, and 127.0.0.2 (the test site) allowed
    for request tools."""
    w = use_runtime(Weir(tmp_path_factory.mktemp("weir-exports"), "sqlite"), py_runtime)
    w.env.update(OPENAI_API_KEY=GOOD_KEY, ANTHROPIC_API_KEY=GOOD_KEY, ANTHROPIC_BASE_URL=fake.url,
                 MISTRAL_API_KEY=GOOD_KEY, ALLOW_PRIVATE_REQUESTS="127.0.0.2",
                 PROVIDER_KEY_HOSTS=fake.url.split("//")[1])
    w.start()
    yield w
    w.cleanup()


@pytest.fixture
def client(exports_server) -> Api:
    return Api(exports_server.url, exports_server.create_key(workspace=f"ws-{nonce()}"))


def load(name):
    return json.loads((EXPORTS / name).read_text())


def inputs_of(flow, node_id):
    return next(n for n in flow["nodes"] if n["id"] == node_id)["data"]["inputs"]


def upload(api, flow, kind="CHATFLOW"):
    text = json.dumps(flow)
    r = api.post("/chatflows", json={"name": "exported", "flowData": text, "type": kind})
    assert r.status_code == 201, r.text
    assert r.json()["flowData"] == text and r.json()["type"] == kind
    return r.json()["id"]


# Agentflow exports (agentflow_*.json) have their own shape; test_agentflows.py checks them.
@pytest.mark.parametrize("name", sorted(p.name for p in EXPORTS.glob("*.json")
                                        if not p.name.startswith("agentflow_")))
def test_exports_have_every_field_flowise_writes(name):
    flow = load(name)
    assert set(flow) == {"nodes", "edges", "viewport"}
    ids = {n["id"] for n in flow["nodes"]}
    for n in flow["nodes"]:
        assert NODE_FIELDS <= set(n) and DATA_FIELDS <= set(n["data"]), n["id"]
        assert n["type"] == ("stickyNote" if n["data"]["name"] == "stickyNote" else "customNode")
    assert any(n["data"]["name"] == "stickyNote" for n in flow["nodes"])
    for e in flow["edges"]:
        assert set(e) == EDGE_FIELDS and e["type"] == "buttonedge" and e["data"] == {"label": ""}
        assert {e["source"], e["target"]} <= ids


def test_tool_agent_with_memory(client, fake):
    flow = load("tool_agent.json")
    inputs_of(flow, "chatOpenAI_0")["basepath"] = f"{fake.url}/v1"
    flow_id = upload(client, flow)
    first = 'CALL calculator {"input": "6 * 7"} ;; CALL current_date_time {}'
    body = ask(client, flow_id, first, chatId="export-1")
    [calc, clock] = tools_used(body["usedTools"])
    assert calc == ("calculator", {"input": "6 * 7"}, "42")
    assert clock[:2] == ("current_date_time", {}) and clock[2].startswith("20")
    assert body["text"] == f"Done: {clock[2]}"
    sent = fake.last("/chat/completions")
    assert sent["model"] == "gpt-4o-mini" and sent["temperature"] == 0.9
    assert sent["messages"][0] == {"role": "system", "content": "You are a helpful AI assistant."}

    ask(client, flow_id, "What did I ask?", chatId="export-1")
    said = [m["content"] for m in fake.last("/chat/completions")["messages"]
            if m["role"] in ("user", "assistant") and m.get("content")]
    assert said[-3:] == [first, body["text"], "What did I ask?"]


def test_conversational_agent_fetches_a_page(client, fake, site):
    flow = load("conversational_agent.json")
    url = f"{site.url}/page"
    inputs_of(flow, "requestsGet_0")["requestsGetUrl"] = url
    flow_id = upload(client, flow)
    body = ask(client, flow_id, f'What does the page say? CALL requests_get {{"url": "{url}"}}')
    [(tool, _, output)] = tools_used(body["usedTools"])
    assert tool == "requests_get" and "public page" in output
    assert body["text"] == f"Done: {output}"
    assert site.hits[-1][:2] == ("GET", "/page")
    sent = fake.last("/v1/messages")
    assert sent["model"] == "claude-3-haiku" and [t["name"] for t in sent["tools"]] == ["requests_get"]


def test_react_agent_on_ollama(client, fake):
    flow = load("react_agent.json")
    inputs_of(flow, "chatOllama_0")["baseUrl"] = fake.url
    body = ask(client, upload(client, flow), 'CALL calculator {"input": "6 * 7"}')
    assert body["text"] == "Done: 42"
    assert tools_used(body["usedTools"]) == [("calculator", {"input": "6 * 7"}, "42")]
    assert fake.last("/api/chat")["model"] == "llama3.2"


def test_supervisor_and_workers(client, fake):
    flow = load("multi_agents.json")
    inputs_of(flow, "chatOpenAI_0")["basepath"] = f"{fake.url}/v1"
    body = ask(client, upload(client, flow, "MULTIAGENT"), f"ROUTE researcher,writer {nonce()}")
    steps = body["agentReasoning"]
    assert [(s["agentName"], s["next"]) for s in steps] == [("researcher", "writer"), ("writer", "FINISH")]
    assert tools_used(steps[1]["usedTools"]) == [("calculator", {"input": "6 * 7"}, "42")]
    assert body["text"] == "Done: 42"


def test_sequential_agents_with_a_condition(client, fake):
    flow = load("sequential_agents.json")
    inputs_of(flow, "chatOpenAI_0")["basepath"] = f"{fake.url}/v1"
    flow_id = upload(client, flow, "MULTIAGENT")
    yes = ask(client, flow_id, "yes, book it")
    assert [s["agentName"] for s in yes["agentReasoning"]] == ["classifier", "affirmer"]
    assert yes["text"] == "Echo: Say it is settled."
    no = ask(client, flow_id, "no, cancel")
    assert [s["agentName"] for s in no["agentReasoning"]] == ["classifier"]
    assert no["text"] == "Echo: no, cancel"


def test_custom_tool_selects_a_stored_python_tool(client, fake):
    tool = {"name": "greet", "description": "Greets someone by name",
            "schema": [{"property": "name", "type": "string", "description": "Who", "required": True}],
            "code": "def main(name):\n    return f'hello {name}'\n", "requirements": []}
    r = client.post("/tools", json=tool)
    assert r.status_code == 201, r.text
    flow = load("custom_tool_agent.json")
    inputs_of(flow, "chatOpenAI_0")["basepath"] = f"{fake.url}/v1"
    inputs_of(flow, "customTool_0")["selectedTool"] = r.json()["id"]
    body = ask(client, upload(client, flow), 'Greet Ada. CALL greet {"name": "Ada"}')
    assert tools_used(body["usedTools"]) == [("greet", {"name": "Ada"}, "hello Ada")]
    assert body["text"] == "Done: hello Ada"


LIBRARY = ("The library opens at nine and closes at six, Monday to Saturday.\n"
           "Members may borrow up to twelve books for three weeks.\n")


def upsert_text_file(api, flow_id, name, text):
    r = api.post(f"/vector/upsert/{flow_id}", files=[("files", (name, text.encode(), "text/plain"))])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["numAdded"] == 1 and [d["pageContent"] for d in body["addedDocs"]] == [text.strip()]
    assert body["addedDocs"][0]["metadata"]["source"] == name
    return body


def check_follow_up(fake, suffix, first, second):
    """The two calls a follow-up question makes: the template's rephrasing of it with
    the history, then the answer with the history."""
    rephrase, answer = fake.bodies(suffix)[-2:]
    asked = rephrase["messages"][-1]["content"]
    assert asked.startswith("Given the following conversation and a follow up question, rephrase")
    assert first in asked and f"Echo: {first}" in asked
    assert asked.endswith(f"Follow Up Input: {second}\nStandalone Question:")
    assert answer["messages"][0]["role"] == "system"
    assert [(m["role"], m["content"]) for m in answer["messages"][1:]] == [
        ("user", first), ("assistant", f"Echo: {first}"), ("user", second)]


def test_local_qna_template(client, fake):
    flow = load("local_qna.json")
    inputs_of(flow, "chatOllama_0")["baseUrl"] = fake.url
    embeddings = inputs_of(flow, "localAIEmbeddings_0")
    embeddings["basePath"] = f"{fake.url}/v1"
    embeddings["localAIApiKey"] = GOOD_KEY
    response_prompt = inputs_of(flow, "conversationalRetrievalQAChain_0")["responsePrompt"]
    flow_id = upload(client, flow)
    upsert_text_file(client, flow_id, "library.txt", LIBRARY)
    path, _, sent = fake.last_request("/embeddings")
    assert path == "/v1/embeddings" and sent["model"] == "text-embedding-ada-002"

    chat = f"qna-{nonce()}"
    first, second = "When does the library open?", "And how many books can I take?"
    assert ask(client, flow_id, first, chatId=chat)["text"] == f"Echo: {first}"
    sent = fake.last("/api/chat")
    assert sent["model"] == "llama2" and sent["options"]["temperature"] == 0.9
    assert sent["messages"] == [
        {"role": "system", "content": response_prompt.replace("{context}", LIBRARY.strip())},
        {"role": "user", "content": first}]
    calls = fake.count("/api/chat")
    assert ask(client, flow_id, second, chatId=chat)["text"] == f"Echo: {second}"
    assert fake.count("/api/chat") == calls + 2
    check_follow_up(fake, "/api/chat", first, second)


def test_conversational_retrieval_qa_chain_template(client, fake):
    flow = load("conversational_retrieval_qa_chain.json")
    inputs_of(flow, "chatMistralAI_0")["overrideEndpoint"] = f"{fake.url}/v1"
    inputs_of(flow, "openAIEmbeddings_0")["basepath"] = f"{fake.url}/v1"
    response_prompt = inputs_of(flow, "conversationalRetrievalQAChain_0")["responsePrompt"]
    flow_id = upload(client, flow)
    upsert_text_file(client, flow_id, "library.txt", LIBRARY)
    path, headers, sent = fake.last_request("/embeddings")
    assert path == "/v1/embeddings" and headers["authorization"] == f"Bearer {GOOD_KEY}"
    assert sent["model"] == "text-embedding-ada-002"

    chat = f"crqa-{nonce()}"
    first, second = "When does the library open?", "What about borrowing books?"
    body = ask(client, flow_id, first, chatId=chat)
    assert body["text"] == f"Echo: {first}" and not body.get("sourceDocuments")
    path, headers, sent = fake.last_request("/chat/completions")
    assert path == "/v1/chat/completions" and headers["authorization"] == f"Bearer {GOOD_KEY}"
    assert sent["model"] == "mistral-tiny"
    assert sent["messages"] == [
        {"role": "system", "content": response_prompt.replace("{context}", LIBRARY.strip())},
        {"role": "user", "content": first}]
    calls = fake.count("/chat/completions")
    assert ask(client, flow_id, second, chatId=chat)["text"] == f"Echo: {second}"
    assert fake.count("/chat/completions") == calls + 2
    check_follow_up(fake, "/chat/completions", first, second)
