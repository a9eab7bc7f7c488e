"""Predictions over fake providers: every node type, memory, overrides, SSE,
status codes, multipart, leads, rate limits, and the flowise client library."""

import json
import threading
import time
import uuid

import pytest
import requests

import flows
from fakes import FakeProviders
from prediction_client import predict, sse_events
from weir_harness import Api, assert_error, backends, start_replicas


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def create_flow(api, flow_data, **fields):
    r = api.post("/chatflows", json={"name": "flow", "flowData": flow_data, **fields})
    assert r.status_code == 201, r.text
    return r.json()["id"]




def test_openai_conversation_with_memory(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.buffer_memory(), system="Be kind."))
    r = predict(api, flow, "hello there")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["text"] == "Echo: hello there"
    assert body["question"] == "hello there"
    uuid.UUID(body["chatId"]) and uuid.UUID(body["chatMessageId"])
    assert body["sessionId"] == body["chatId"]
    sent = fake.last("/chat/completions")
    assert sent["model"] == "gpt-test" and sent["stream"] is True and sent["temperature"] == 0.9
    assert sent["messages"] == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hello there"}]

    r = predict(api, flow, "second", chatId=body["chatId"])
    assert r.json()["chatId"] == body["chatId"]
    assert [m["content"] for m in fake.last("/chat/completions")["messages"]] == [
        "Be kind.", "hello there", "Echo: hello there", "second"]

    # Another session does not see it; sessionId is an alias of chatId.
    predict(api, flow, "fresh", sessionId="other-session")
    assert [m["content"] for m in fake.last("/chat/completions")["messages"]] == ["Be kind.", "fresh"]
    predict(api, flow, "again", overrideConfig={"sessionId": "other-session"})
    assert len(fake.last("/chat/completions")["messages"]) == 4

    stored = api.get(f"/chatmessage/{flow}", params={"chatId": body["chatId"]}).json()
    assert [(m["role"], m["content"]) for m in stored] == [
        ("userMessage", "hello there"), ("apiMessage", "Echo: hello there"),
        ("userMessage", "second"), ("apiMessage", "Echo: second")]
    assert stored[1]["id"] == body["chatMessageId"]
    assert api.delete(f"/chatmessage/{flow}", params={"chatId": body["chatId"]}).status_code == 200
    predict(api, flow, "after clearing", chatId=body["chatId"])
    assert len(fake.last("/chat/completions")["messages"]) == 2


def test_history_and_window_memory(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.window_memory(1)))
    history = [{"message": "earlier q", "type": "userMessage"}, {"message": "earlier a", "type": "apiMessage"}]
    predict(api, flow, "now", history=history, chatId="w1")
    msgs = fake.last("/chat/completions")["messages"]
    assert [(m["role"], m["content"]) for m in msgs[1:]] == [
        ("user", "earlier q"), ("assistant", "earlier a"), ("user", "now")]
    assert "friendly conversation" in msgs[0]["content"], "Flowise's default system message"
    for q in ("one", "two", "three"):
        predict(api, flow, q, chatId="w2")
    # k=1 keeps only the last exchange.
    assert [m["content"] for m in fake.last("/chat/completions")["messages"][1:]] == ["two", "Echo: two", "three"]


def test_llm_chain_with_prompt_templates(api, fake):
    prompt = flows.prompt_template("Tell me about {topic} in {style}.", {"topic": "{{question}}", "style": "haiku"})
    flow = create_flow(api, flows.llm_chain(flows.openai_model(fake.url), prompt))
    r = predict(api, flow, "owls")
    assert r.json()["text"] == "Echo: Tell me about owls in haiku."
    assert fake.last("/chat/completions")["messages"] == [{"role": "user", "content": "Tell me about owls in haiku."}]

    chat = flows.chat_prompt_template("You answer in {lang}.", "Q: {input}", {"lang": "French"})
    flow = create_flow(api, flows.llm_chain(flows.openai_model(fake.url), chat))
    predict(api, flow, "why?")
    assert fake.last("/chat/completions")["messages"] == [
        {"role": "system", "content": "You answer in French."}, {"role": "user", "content": "Q: why?"}]


def test_anthropic_and_ollama(api, fake):
    flow = create_flow(api, flows.conversation(flows.anthropic_model(fake.url), flows.buffer_memory(), system="Sys"))
    r = predict(api, flow, "hi claude", chatId="a1")
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Echo: hi claude"
    sent = fake.last("/v1/messages")
    assert sent["system"] == "Sys" and sent["messages"] == [{"role": "user", "content": "hi claude"}]
    assert sent["max_tokens"] > 0 and sent["model"] == "claude-test"
    predict(api, flow, "more", chatId="a1")
    assert [m["role"] for m in fake.last("/v1/messages")["messages"]] == ["user", "assistant", "user"]

    flow = create_flow(api, flows.conversation(flows.ollama_model(fake.url)))
    r = predict(api, flow, "hi llama")
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Echo: hi llama"
    assert fake.last("/api/chat")["options"]["temperature"] == 0.3


def test_provider_failures_name_the_node(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url, key="sk-wrong")))
    body = assert_error(predict(api, flow, "hi"), 500)
    assert "chatOpenAI_0" in body["message"] and "rejected the API key" in body["message"]
    assert "Incorrect API key" in body["message"]
    flow = create_flow(api, flows.conversation(flows.anthropic_model(fake.url, key="bad")))
    assert "chatAnthropic_0" in assert_error(predict(api, flow, "hi"), 500)["message"]
    flow = create_flow(api, flows.conversation(flows.ollama_model(fake.url, model="missing-model")))
    assert "not found" in assert_error(predict(api, flow, "hi"), 500)["message"]
    dead = flows.openai_model("http://127.0.0.1:9")
    flow = create_flow(api, flows.conversation(dead))
    assert "cannot reach" in assert_error(predict(api, flow, "hi"), 500)["message"]
    # A failed run stores nothing.
    assert api.get(f"/chatmessage/{flow}").json() == []


def test_streaming_matches_json(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.buffer_memory()))
    json_text = predict(api, flow, "stream me please").json()["text"]
    r = api.post(f"/prediction/{flow}", json={"question": "stream me please", "streaming": True},
                 headers={"Accept": "text/event-stream"}, stream=True)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["cache-control"] == "no-cache" and r.headers["x-accel-buffering"] == "no"
    events = sse_events(r)
    names = [e for e, _ in events]
    assert names[0] == "start" and names[-3:] == ["usageMetadata", "metadata", "end"]
    assert set(names[1:-3]) == {"token"}
    tokens = [d for e, d in events if e == "token"]
    assert len(tokens) > 1 and "".join(tokens) == json_text
    assert events[0][1] == tokens[0]
    meta = dict(events)["metadata"]
    assert meta["question"] == "stream me please" and meta["sessionId"] == meta["chatId"]
    assert meta["sourceDocuments"] == [] and meta["usedTools"] == []
    uuid.UUID(meta["chatMessageId"])
    assert events[-1] == ("end", "[DONE]")
    stored = api.get(f"/chatmessage/{flow}", params={"chatId": meta["chatId"]}).json()
    assert stored[-1]["content"] == json_text


def test_streaming_errors(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    r = api.post(f"/prediction/{flow}", json={"question": "FAIL_MIDWAY", "streaming": True}, stream=True)
    events = sse_events(r)
    assert [e for e, _ in events] == ["start", "token", "token", "error", "end"]
    assert "upstream exploded" in events[3][1] and "chatOpenAI_0" in events[3][1]
    # Before the first token, the failure is a plain JSON error.
    bad = create_flow(api, flows.conversation(flows.openai_model(fake.url, key="nope")))
    assert_error(api.post(f"/prediction/{bad}", json={"question": "x", "streaming": True}), 500)


def test_client_disconnect_cancels_the_provider_call(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.buffer_memory()))
    fake.disconnected.clear()
    r = api.post(f"/prediction/{flow}", json={"question": "SLOW", "streaming": True, "chatId": "gone"}, stream=True)
    lines = r.iter_lines(decode_unicode=True)
    while not next(lines).startswith("data:"):
        pass
    r.close()
    assert fake.disconnected.wait(10), "the provider call was not cancelled"
    time.sleep(0.3)
    assert api.get(f"/chatmessage/{flow}", params={"chatId": "gone"}).json() == []


def test_override_config(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), system="Original"))
    predict(api, flow, "x", overrideConfig={"temperature": 0.1, "maxTokens": "7",
                                            "systemMessagePrompt": {"conversationChain_0": "Overridden"}})
    sent = fake.last("/chat/completions")
    assert sent["temperature"] == 0.1 and sent["max_tokens"] == 7
    assert sent["messages"][0]["content"] == "Overridden"
    for secret in ({"basePath": "http://169.254.169.254/v1"}, {"openAIApiKey": "sk-mine"}):
        body = assert_error(predict(api, flow, "x", overrideConfig=secret), 403)
        assert list(secret)[0] in body["message"]
    before = fake.count("/chat/completions")
    assert_error(predict(api, flow, "x", overrideConfig={"temperature": "hot"}), 400)
    assert fake.count("/chat/completions") == before
    allowed = create_flow(api, flows.conversation(flows.openai_model("http://127.0.0.1:9")),
                          apiConfig={"overrideConfig": {"allow": ["basePath"]}})
    r = predict(api, allowed, "routed", overrideConfig={"basePath": f"{fake.url}/v1"})
    assert r.status_code == 200 and r.json()["text"] == "Echo: routed"


def test_status_codes_and_access(server, api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    assert_error(api.post(f"/prediction/{flow}", json={}), 412, "question")
    assert_error(api.post(f"/prediction/{flow}", json={"question": ""}), 400)
    assert_error(api.post(f"/prediction/{flow}", json={"question": "x", "history": "no"}), 400)
    assert_error(api.post(f"/prediction/{flow}", json={"question": "x", "leadEmail": "nope"}), 400)
    assert_error(api.post(f"/prediction/{uuid.uuid4()}", json={"question": "x"}), 404)
    assert_error(api.post("/prediction/not-a-uuid", json={"question": "x"}), 400)
    assert_error(api.post(f"/prediction/{flow}", json={"question": "x"}, key=None), 401)
    assert_error(api.post(f"/prediction/{flow}", json={"question": "x"}, key="weir_bad"), 401)
    reader = server.create_key("chatflows:read", workspace=api_workspace(api))
    assert_error(api.post(f"/prediction/{flow}", json={"question": "x"}, key=reader), 403, "predictions:create")
    stranger = server.create_key(workspace="predict-stranger")
    assert_error(api.post(f"/prediction/{flow}", json={"question": "x"}, key=stranger), 404)
    unknown = create_flow(api, flows.graph([flows.node("toolAgent_0", "toolAgent", {})]))
    assert_error(predict(api, unknown, "x"), 400, "toolAgent")
    bad_input = create_flow(api, flows.conversation(flows.openai_model(fake.url, wat="1")))
    body = assert_error(predict(api, bad_input, "x"), 400)
    assert "chatOpenAI_0" in body["message"] and "wat" in body["message"]

    public = create_flow(api, flows.conversation(flows.openai_model(fake.url)), isPublic=True)
    assert predict(api, public, "anyone", key=None).json()["text"] == "Echo: anyone"
    assert predict(api, public, "stranger", key=stranger).status_code == 200

    only = api.post("/apikey", json={"keyName": "only", "permissions": ["predictions:create"]}).json()
    pinned = create_flow(api, flows.conversation(flows.openai_model(fake.url)), apikeyid=only["id"], isPublic=True)
    assert predict(api, pinned, "x", key=only["apiKey"]).status_code == 200
    assert_error(predict(api, pinned, "x"), 403)
    assert_error(predict(api, pinned, "x", key=None), 401)


def api_workspace(api):
    return next(k["workspace"] for k in api.get("/apikey").json())


def test_streaming_support_tells_nothing_about_other_callers_flows(server, api, fake):
    """Flowise's clients ask without their key. A caller who may run the chatflow
    (anyone for a public one) gets the flow's answer; everyone else gets the answer
    an unknown id gets, so the route is no existence oracle across workspaces."""
    def streaming(flow, key=None):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        r = requests.get(f"{api.url}/api/v1/chatflows-streaming/{flow}", headers=headers, timeout=5)
        assert r.status_code == 200, r.text
        return r.json()

    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    public = create_flow(api, flows.conversation(flows.openai_model(fake.url)), isPublic=True)
    assert streaming(public) == {"isStreaming": True}
    assert streaming(flow, api.key) == {"isStreaming": True}
    broken = create_flow(api, flows.graph([flows.node("toolAgent_0", "toolAgent", {})]))
    assert streaming(broken, api.key) == {"isStreaming": False}
    public_broken = create_flow(api, flows.graph([flows.node("toolAgent_0", "toolAgent", {})]), isPublic=True)
    assert streaming(public_broken) == {"isStreaming": False}
    # A private flow that cannot stream, asked by anyone who may not run it, reads like
    # an id that does not exist.
    unknown = streaming(uuid.uuid4())
    stranger = server.create_key(workspace="streaming-stranger")
    reader = server.create_key("chatflows:read", workspace=api_workspace(api))
    for key in (None, stranger, reader):
        assert streaming(broken, key) == unknown
    only = api.post("/apikey", json={"keyName": "only", "permissions": ["predictions:create"]}).json()
    pinned = create_flow(api, flows.graph([flows.node("toolAgent_0", "toolAgent", {})]), apikeyid=only["id"])
    assert streaming(pinned, only["apiKey"]) == {"isStreaming": False}
    assert streaming(pinned, api.key) == unknown
    assert_error(requests.get(f"{api.url}/api/v1/chatflows-streaming/{flow}",
                              headers={"Authorization": "Bearer weir_bad"}, timeout=5), 401)


def test_a_bound_key_still_needs_predictions_create(api, fake):
    """apikeyid narrows who may run a chatflow; it grants nothing the key lacks."""
    reader = api.post("/apikey", json={"keyName": "reader", "permissions": ["chatflows:read"]}).json()
    pinned = create_flow(api, flows.conversation(flows.openai_model(fake.url)), apikeyid=reader["id"])
    before = fake.count("/chat/completions")
    assert_error(predict(api, pinned, "x", key=reader["apiKey"]), 403, "predictions:create")
    assert fake.count("/chat/completions") == before


def test_multipart_with_files(server, api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    files = [("files", ("notes.txt", b"hello file", "text/plain")), ("files", ("../evil.csv", b"a,b", "text/csv"))]
    data = {"question": "with files", "chatId": "mp-1", "streaming": "false",
            "overrideConfig": json.dumps({"temperature": 0.2})}
    r = api.post(f"/prediction/{flow}", data=data, files=files)
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Echo: with files" and r.json()["chatId"] == "mp-1"
    assert fake.last("/chat/completions")["temperature"] == 0.2
    # The flow takes no files: they are read for the question and never kept.
    assert not [p for p in (server.data_dir / "uploads").rglob("*") if flow in str(p)]
    r = api.post(f"/prediction/{flow}", data={"question": "streamed", "streaming": "true"},
                 files=[("files", ("a.txt", b"x", "text/plain"))], stream=True)
    assert [e for e, _ in sse_events(r)][-2:] == ["metadata", "end"]
    assert_error(api.post(f"/prediction/{flow}", data={"chatId": "x"}, files=files), 412, "question")


def test_too_large_uploads_are_413_and_too_many_files_400(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    big = b"x" * (50 * 1024 * 1024 + 1)
    assert_error(api.post(f"/prediction/{flow}", data={"question": "big"}, files=[("files", ("big.bin", big))]), 413)
    many = [("files", (f"f{i}.txt", b"x")) for i in range(21)]
    assert_error(api.post(f"/prediction/{flow}", data={"question": "many"}, files=many), 400, "20 files")


def test_json_uploads_as_data_urls(server, api, fake):
    import base64
    flow = create_flow(api, flows.chat_files_qa(fake.url))
    data = "data:text/plain;base64," + base64.b64encode(b"inline file").decode()
    uploads = [{"data": data, "type": "file", "name": "inline.txt", "mime": "text/plain"},
               {"data": "http://169.254.169.254/latest", "type": "url", "name": "remote", "mime": "text/html"}]
    r = predict(api, flow, "json files", chatId="ju-1", uploads=uploads)
    assert r.status_code == 200, r.text
    workspace = api.get(f"/chatflows/{flow}").json()["workspaceId"]
    kept = list((server.data_dir / "uploads" / workspace / flow / "ju-1").iterdir())
    assert [p.read_bytes() for p in kept] == [b"inline file"], "url uploads are never fetched"
    assert_error(predict(api, flow, "x", uploads=[{"data": "data:text/plain;base64,@@@", "type": "file", "name": "bad"}]), 400, "bad")
    assert_error(predict(api, flow, "x", uploads=[{"data": "plain text", "type": "file", "name": "raw"}]), 400, "data URL")


def test_leads(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    r = predict(api, flow, "hi", leadEmail="visitor@example.com", chatId="lead-chat")
    assert r.status_code == 200
    leads = api.get(f"/leads/{flow}").json()
    assert [(l["email"], l["chatId"], l["chatflowid"]) for l in leads] == [("visitor@example.com", "lead-chat", flow)]


def rate_limited(api, fake, limit_max, duration=3600):
    # Fixed windows: a long one keeps a test from straddling a window boundary.
    return create_flow(api, flows.conversation(flows.openai_model(fake.url)), apiConfig={"rateLimit": {
        "status": True, "limitMax": str(limit_max), "limitDuration": str(duration), "limitMsg": "Slow down!"}})


def test_rate_limit(api, fake):
    flow = rate_limited(api, fake, 2)
    assert predict(api, flow, "1").status_code == 200
    assert predict(api, flow, "2").status_code == 200
    r = predict(api, flow, "3")
    assert assert_error(r, 429)["message"] == "Slow down!"
    assert 1 <= int(r.headers["retry-after"]) <= 3600
    # The limit is per caller: another key has its own budget.
    other = api.post("/apikey", json={"keyName": "other"}).json()["apiKey"]
    assert predict(api, flow, "4", key=other).status_code == 200


@pytest.mark.skipif("not __import__('weir_harness').PG_URL", reason="WEIR_TEST_DATABASE_URL is not set: PostgreSQL not tested")
def test_rate_limit_is_shared_by_replicas_on_postgres(make_weir, fake):
    first, second = start_replicas(make_weir, 2)
    key = first.create_key()
    a, b = Api(first.url, key), Api(second.url, key)
    flow = rate_limited(a, fake, 3)
    codes = [predict(client, flow, str(i)).status_code for i, client in enumerate([a, b, a, b, a])]
    assert codes == [200, 200, 200, 429, 429]


def test_flowise_client_library(api, fake):
    from flowise import Flowise, PredictionData
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.buffer_memory()))
    client = Flowise(base_url=api.url.removesuffix("/api/v1"), api_key=api.key)
    [answer] = list(client.create_prediction(PredictionData(chatflowId=flow, question="from the sdk", chatId="sdk")))
    assert answer["text"] == "Echo: from the sdk"
    chunks = [json.loads(c) for c in client.create_prediction(
        PredictionData(chatflowId=flow, question="streamed sdk", chatId="sdk", streaming=True))]
    tokens = "".join(c["data"] for c in chunks if c["event"] == "token")
    assert tokens == "Echo: streamed sdk"
    assert chunks[-1] == {"event": "end", "data": "[DONE]"}
    # Memory carried across both calls of the session.
    assert len(fake.last("/chat/completions")["messages"]) == 4


def test_concurrent_predictions(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.buffer_memory()))
    results = {}

    def ask(i):
        results[i] = predict(api, flow, f"q{i}", chatId=f"c{i}").json()["text"]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"Echo: q{i}" for i in range(8)}


def test_sigterm_lets_in_flight_requests_finish(make_weir, fake):
    w = make_weir()
    w.env["SHUTDOWN_GRACE_SECS"] = "3"
    w.start()
    api = Api(w.url, w.create_key())
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    results = {}
    finishing = threading.Thread(target=lambda: results.update(r=predict(api, flow, "SLOWISH")))
    finishing.start()
    endless = api.post(f"/prediction/{flow}", json={"question": "SLOW", "streaming": True}, stream=True)
    time.sleep(0.3)
    started = time.monotonic()
    assert w.stop() == 0
    finishing.join()
    assert results["r"].status_code == 200 and results["r"].json()["text"].startswith("tick")
    # The endless stream is cut after the grace period, not waited for.
    assert time.monotonic() - started < 8
    endless.close()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{w.url}/api/v1/ping", timeout=2)


def test_llama_indexs_simple_chat_engine_converses_with_memory(api, fake):
    model = flows.openai_model(fake.url)
    model["data"]["name"] = "chatOpenAI_LlamaIndex"
    memory = flows.buffer_memory()
    engine = flows.node("simpleChatEngine_0", "simpleChatEngine",
                        {"model": flows.ref(model["id"]), "memory": flows.ref(memory["id"])})
    flow = create_flow(api, flows.wired([model, memory, engine]))
    marker = uuid.uuid4().hex[:8]
    assert predict(api, flow, f"hello {marker}", chatId=marker).json()["text"] == f"Echo: hello {marker}"
    predict(api, flow, f"again {marker}", chatId=marker)
    sent = fake.last("/chat/completions")["messages"]
    assert sent[0] == {"role": "system", "content": "You are a helpful assistant"}
    assert [m["content"] for m in sent[1:]] == [f"hello {marker}", f"Echo: hello {marker}", f"again {marker}"]
