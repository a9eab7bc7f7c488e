"""The calls around a conversation that Flowise's clients make: stored messages in
Flowise's field names and filters, ratings of answers (`/feedback`), visitors'
contacts (`/leads`), and who may do each on a public chatflow."""

import json
import threading
import time
import uuid

import pytest
import requests

import flows
from fakes import FakeProviders
from prediction_client import create_flow, nonce, predict, sse_events
from weir_harness import PG_URL, Api, assert_error, start_replicas, wait_for


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def ask(api, flow, question, chat):
    r = predict(api, flow, question, chatId=chat)
    assert r.status_code == 200, r.text
    return r.json()


def test_messages_carry_flowises_fields_and_filters(api, fake):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.buffer_memory()))
    first = ask(api, flow, "one", "chat-a")
    ask(api, flow, "two", "chat-b")
    ask(api, flow, "three", "chat-a")

    stored = api.get(f"/chatmessage/{flow}").json()
    assert [m["content"] for m in stored] == ["one", "Echo: one", "two", "Echo: two", "three", "Echo: three"]
    answer = stored[1]
    assert first["memoryType"] == "Buffer Memory"
    assert answer["id"] == first["chatMessageId"]
    assert answer["chatflowid"] == flow and answer["chatflowId"] == flow  # the old name, deprecated
    assert answer["role"] == "apiMessage" and answer["chatType"] == "EXTERNAL"
    assert answer["chatId"] == answer["sessionId"] == "chat-a"
    assert answer["memoryType"] == "Buffer Memory"
    for field in ("executionId", "sourceDocuments", "usedTools", "agentReasoning", "artifacts", "action",
                  "fileUploads", "followUpPrompts", "fileAnnotations", "createdDate"):
        assert field in answer, field
    assert "feedback" not in answer

    texts = lambda **q: [m["content"] for m in api.get(f"/chatmessage/{flow}", params=q).json()]
    assert texts(chatId="chat-b") == ["two", "Echo: two"]
    assert texts(sessionId="chat-b") == ["two", "Echo: two"]
    assert texts(chatId="chat-a", order="DESC") == ["Echo: three", "three", "Echo: one", "one"]
    assert texts(messageId=first["chatMessageId"]) == ["Echo: one"]
    assert texts(chatType="EXTERNAL") == texts()
    assert texts(chatType=json.dumps(["WEBHOOK", "SCHEDULED"])) == []
    assert texts(memoryType="Buffer Memory")[0] == "one"
    assert texts(startDate="2999-01-01") == []
    assert texts(endDate="2000-01-01T00:00:00Z") == []
    assert len(texts(startDate="2000-01-01", endDate="2999-12-31")) == 6
    assert_error(api.get(f"/chatmessage/{flow}", params={"chatType": "CHAT"}), 400, "chat type")
    assert_error(api.get(f"/chatmessage/{flow}", params={"order": "sideways"}), 400, "order")
    assert_error(api.get(f"/chatmessage/{flow}", params={"startDate": "yesterday"}), 400, "startDate")

    # With feedback, page and limit page whole chats (as Flowise's message view does).
    assert texts(feedback="true", page=1, limit=1) == ["one", "Echo: one", "three", "Echo: three"]
    assert texts(feedback="true", page=2, limit=1) == ["two", "Echo: two"]
    assert texts(feedback="true", page=3, limit=1) == []
    assert len(texts(page=2, limit=1)) == 6  # without feedback, Flowise pages nothing

    # DELETE takes the same filters and answers as Flowise does.
    r = api.delete(f"/chatmessage/{flow}", params={"chatId": "chat-b"})
    assert r.status_code == 200 and r.json() == {"raw": [], "affected": 2}, r.text
    assert texts(chatId="chat-b") == []
    assert api.delete(f"/chatmessage/{flow}", params={"chatType": "WEBHOOK"}).json()["affected"] == 0
    assert len(texts()) == 4


def test_a_trigger_runs_messages_are_typed_by_their_door(api, fake):
    # Webhook addresses are global per node: a fresh node id.
    node_id = f"hook_{uuid.uuid4().hex[:10]}"
    model = flows.openai_model(fake.url)
    chain = flows.node(node_id, "conversationChain", {"model": flows.ref(model["id"])})
    flow = create_flow(api, flows.graph([model, chain], [flows.edge(model["id"], node_id)]))
    created = api.post("/triggers", json={"name": "hook", "chatflowId": flow, "nodeId": node_id, "type": "webhook"})
    assert created.status_code == 201, created.text
    r = requests.post(created.json()["webhookUrl"], json={"text": "from outside"}, timeout=30)
    assert r.status_code == 200, r.text
    stored = api.get(f"/chatmessage/{flow}", params={"chatType": "WEBHOOK"}).json()
    assert [m["role"] for m in stored] == ["userMessage", "apiMessage"]
    assert all(m["chatType"] == "WEBHOOK" for m in stored)
    assert api.get(f"/chatmessage/{flow}", params={"chatType": "EXTERNAL"}).json() == []


def test_visitors_rate_answers_of_their_own_chat_on_a_public_flow(api, fake, server):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)), isPublic=True)
    visitor = Api(server.url, None)
    answer = ask(visitor, flow, "rate me", "visitor-chat")
    message = answer["chatMessageId"]

    # The widget's call: POST /feedback/:chatflowid with Flowise's body.
    body = {"chatflowid": flow, "chatId": "visitor-chat", "messageId": message, "rating": "THUMBS_UP", "content": ""}
    r = visitor.post(f"/feedback/{flow}", json=body)
    assert r.status_code == 200, r.text
    rated = r.json()
    assert rated["rating"] == "THUMBS_UP" and rated["messageId"] == message
    assert rated["chatflowid"] == flow and rated["chatId"] == "visitor-chat" and rated["content"] is None
    # …then its comment, by the rating's id.
    r = visitor.put(f"/feedback/{rated['id']}", json={"content": "Spot on"})
    assert r.status_code == 200 and r.json() == {"status": "OK"}, r.text
    # Rating again replaces the rating.
    again = visitor.post("/feedback", json={**body, "rating": "THUMBS_DOWN"}).json()
    assert again["id"] == rated["id"] and again["rating"] == "THUMBS_DOWN"

    listed = api.get(f"/feedback/{flow}").json()
    assert [(f["id"], f["rating"], f["content"]) for f in listed] == [(rated["id"], "THUMBS_DOWN", None)]
    assert api.get(f"/feedback/{flow}", params={"chatId": "other"}).json() == []
    assert api.get(f"/feedback/{flow}", params={"sortOrder": "DESC"}).status_code == 200
    assert visitor.get(f"/feedback/{flow}").status_code == 401  # reading them takes a key

    # A visitor must name the chat, and only its own chat's answers.
    assert_error(visitor.post("/feedback", json={**body, "chatId": None}), 400, "chatId")
    assert_error(visitor.post("/feedback", json={**body, "chatId": "someone-else"}), 400, "Inconsistent chat ID")
    assert_error(visitor.post("/feedback", json={**body, "messageId": None}), 400, "Message ID is required")
    assert_error(visitor.post("/feedback", json={**body, "rating": "MEH"}), 400)
    assert_error(visitor.post("/feedback", json={**body, "messageId": str(uuid.uuid4())}), 404, "not found")
    question = api.get(f"/chatmessage/{flow}").json()[0]
    assert_error(visitor.post("/feedback", json={**body, "messageId": question["id"]}), 400, "apiMessage")
    assert_error(visitor.put(f"/feedback/{uuid.uuid4()}", json={"content": "x"}), 404, "not found")
    assert_error(visitor.put(f"/feedback/{rated['id']}", json={"messageId": question["id"]}), 400, "stays")

    # The rating shows on the messages, and filters them.
    with_feedback = api.get(f"/chatmessage/{flow}", params={"feedback": "true"}).json()
    assert with_feedback[0]["feedback"] is None
    assert with_feedback[1]["feedback"]["rating"] == "THUMBS_DOWN"
    down = api.get(f"/chatmessage/{flow}", params={"feedbackType": "THUMBS_DOWN"}).json()
    assert [m["content"] for m in down] == ["rate me", "Echo: rate me"]
    assert api.get(f"/chatmessage/{flow}", params={"feedbackType": "THUMBS_UP"}).json() == []


def test_ratings_are_counted_in_the_metrics(make_weir, fake):
    w = make_weir()
    w.env["METRICS_TOKEN"] = "scrape-chat"
    w.start()
    api = Api(w.url, w.create_key())
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    for question, rating in (("a", "THUMBS_UP"), ("b", "THUMBS_UP"), ("c", "THUMBS_DOWN")):
        answer = ask(api, flow, question, f"chat-{question}")
        r = api.post("/feedback", json={"messageId": answer["chatMessageId"], "rating": rating})
        assert r.status_code == 200, r.text
    text = requests.get(f"{w.url}/metrics", headers={"Authorization": "Bearer scrape-chat"}, timeout=10).text
    assert f'weir_chat_feedback_total{{chatflow="{flow}",rating="THUMBS_UP"}} 2' in text
    assert f'weir_chat_feedback_total{{chatflow="{flow}",rating="THUMBS_DOWN"}} 1' in text


def test_a_private_flows_answers_are_rated_only_with_its_access(api, fake, server):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    answer = ask(api, flow, "private", "p-chat")
    body = {"messageId": answer["chatMessageId"], "rating": "THUMBS_UP"}
    anonymous = Api(server.url, None)
    assert_error(anonymous.post("/feedback", json=body), 401)
    stranger = Api(server.url, server.create_key(workspace="stranger"))
    assert_error(stranger.post("/feedback", json={**body, "chatId": "p-chat"}), 404, "not found")
    # A member of the workspace needs no chatId.
    r = api.post("/feedback", json=body)
    assert r.status_code == 200, r.text
    assert_error(anonymous.put(f"/feedback/{r.json()['id']}", json={"content": "x"}), 401)
    assert_error(api.post("/feedback", json={**body, "chatflowid": str(uuid.uuid4())}), 400, "Inconsistent chatflow")


def test_visitors_leave_leads_as_the_widget_sends_them(api, fake, server):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)), isPublic=True)
    visitor = Api(server.url, None)
    # The widget posts to /leads/ and sends the fields it does not show as "".
    r = visitor.post("/leads/", json={"chatflowid": flow, "chatId": "lead-chat", "name": "Ada Lovelace",
                                      "email": "ada@example.com", "phone": ""})
    assert r.status_code == 200, r.text
    lead = r.json()
    assert (lead["name"], lead["email"], lead["phone"], lead["chatId"]) == (
        "Ada Lovelace", "ada@example.com", None, "lead-chat")
    assert lead["chatflowid"] == flow
    r = visitor.post("/leads", json={"chatflowid": flow, "phone": "+44 20 7946 0958"})
    assert r.status_code == 200, r.text
    uuid.UUID(r.json()["chatId"])  # a new chat when none is named
    # A prediction's leadEmail is a lead too — once per address and chat (the
    # widget sends it with every question after its form), kept on the question.
    for _ in range(2):
        predict(visitor, flow, "hello", chatId="lead-chat", leadEmail="grace@example.com")
    predict(visitor, flow, "hello", chatId="lead-chat", leadEmail="ada@example.com")
    asked = api.get(f"/chatmessage/{flow}", params={"chatId": "lead-chat"}).json()
    assert [m["leadEmail"] for m in asked] == ["grace@example.com", None] * 2 + ["ada@example.com", None]
    leads = api.get(f"/leads/{flow}").json()
    assert [(l["name"], l["email"], l["phone"]) for l in leads] == [
        ("Ada Lovelace", "ada@example.com", None), (None, None, "+44 20 7946 0958"),
        (None, "grace@example.com", None)]

    assert_error(visitor.post("/leads", json={"chatflowid": flow, "name": "", "email": ""}), 400, "name")
    assert_error(visitor.post("/leads", json={"chatflowid": flow, "email": "not-an-address"}), 400, "email")
    assert_error(visitor.post("/leads", json={"chatflowid": flow, "phone": "call me maybe"}), 400, "phone")
    assert_error(visitor.post("/leads", json={"email": "a@example.com"}), 412, "chatflowid")
    assert_error(visitor.post("/leads", json={"chatflowid": str(uuid.uuid4()), "email": "a@example.com"}), 404)
    private = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    assert_error(visitor.post("/leads", json={"chatflowid": private, "email": "a@example.com"}), 401)


def test_visitors_ratings_and_leads_are_rate_limited(api, fake, server):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)), isPublic=True)
    visitor = Api(server.url, None)
    statuses = [visitor.post("/leads", json={"chatflowid": flow, "email": f"v{i}@example.com"}).status_code
                for i in range(31)]
    assert statuses[:30] == [200] * 30 and statuses[30] == 429, statuses
    # A key of the workspace is not a visitor.
    assert api.post("/leads", json={"chatflowid": flow, "email": "owner@example.com"}).status_code == 200


def stream_until_tokens(api, flow, chat, question="SLOW", tokens=2):
    """A streamed prediction read until its first `tokens` tokens: (lines left, events so far)."""
    r = api.post(f"/prediction/{flow}", json={"question": question, "streaming": True, "chatId": chat}, stream=True)
    assert r.status_code == 200, r.text
    lines = r.iter_lines(decode_unicode=True)
    events = []
    for raw in lines:
        if raw.startswith("data:"):
            payload = json.loads(raw[len("data:"):])
            events.append((payload["event"], payload["data"]))
            if sum(name == "token" for name, _ in events) >= tokens:
                break
    return lines, events


def read_rest(lines, events):
    for raw in lines:
        if raw.startswith("data:"):
            payload = json.loads(raw[len("data:"):])
            events.append((payload["event"], payload["data"]))
    return events


def test_a_streaming_answer_stops_when_its_chat_is_aborted(api, fake, server):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.buffer_memory()), isPublic=True)
    visitor = Api(server.url, None)
    lines, events = stream_until_tokens(visitor, flow, "stop-me")
    began = time.monotonic()
    # The widget's stop button: PUT, no body.
    r = visitor.put(f"/chatmessage/abort/{flow}/stop-me")
    assert r.status_code == 200 and r.json() == {"status": 200, "message": "Chat message aborted"}, r.text
    events = read_rest(lines, events)
    assert time.monotonic() - began < 5, "the stream did not stop"
    assert [name for name, _ in events][-3:] == ["metadata", "abort", "end"], events
    partial = "".join(data for name, data in events if name == "token")
    assert partial.startswith("tick ") and partial.count("tick") < 100
    meta = dict(events)["metadata"]

    stored = api.get(f"/chatmessage/{flow}", params={"chatId": "stop-me"}).json()
    assert [(m["role"], m["content"]) for m in stored] == [("userMessage", "SLOW"), ("apiMessage", partial)]
    assert stored[1]["aborted"] is True and stored[1]["id"] == meta["chatMessageId"]
    assert "aborted" not in stored[0]
    # The chat goes on; a stop asked before a question does not stop it.
    assert ask(visitor, flow, "after", "stop-me")["text"] == "Echo: after"
    # Stopping a chat that runs nothing is answered the same; a private flow's
    # chats are stopped only with its access.
    assert visitor.put(f"/chatmessage/abort/{flow}/idle-chat").status_code == 200
    private = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    assert_error(visitor.put(f"/chatmessage/abort/{private}/x"), 401)
    assert_error(visitor.put(f"/chatmessage/abort/{uuid.uuid4()}/x"), 404)


def test_an_agentflow_run_stopped_ends_its_execution_stopped(api, fake):
    start = flows.af_start()
    llm = flows.af_llm("llmAgentflow_0", flows.af_openai(fake.url))
    flow = create_flow(api, flows.agentflow([start, llm], [(start["id"], llm["id"])]), type="AGENTFLOW")
    answered = {}
    calls = fake.count("/chat/completions")
    asking = threading.Thread(target=lambda: answered.update(
        r=predict(api, flow, "SLOW", chatId="af-stop")))
    asking.start()
    wait_for(lambda: fake.count("/chat/completions") > calls, 10, "the model call")
    time.sleep(0.5)
    assert api.put(f"/chatmessage/abort/{flow}/af-stop").status_code == 200
    asking.join(10)
    assert not asking.is_alive(), "the JSON answer did not come"
    body = answered["r"].json()
    assert answered["r"].status_code == 200 and body["aborted"] is True, body
    assert body["text"].startswith("tick ") or body["text"] == ""
    execution = api.get(f"/executions/{body['executionId']}").json()
    assert execution["state"] == "STOPPED", execution
    stored = api.get(f"/chatmessage/{flow}", params={"chatId": "af-stop"}).json()
    assert stored[-1]["executionId"] == body["executionId"] and stored[-1]["aborted"] is True


@pytest.mark.skipif(not PG_URL, reason="WEIR_TEST_DATABASE_URL is not set: PostgreSQL not tested")
def test_a_stop_asked_of_one_replica_stops_the_run_on_another(make_weir, fake):
    first, second = start_replicas(make_weir, 2)
    owner = Api(first.url, first.create_key(workspace="replicas"))
    flow = create_flow(owner, flows.conversation(flows.openai_model(fake.url)), isPublic=True)
    lines, events = stream_until_tokens(Api(first.url, None), flow, "far-away")
    began = time.monotonic()
    r = Api(second.url, None).put(f"/chatmessage/abort/{flow}/far-away")
    assert r.status_code == 200, r.text
    events = read_rest(lines, events)
    assert time.monotonic() - began < 5, "the other replica's run did not stop"
    assert [name for name, _ in events][-2:] == ["abort", "end"], events


def scrape(w, token):
    return requests.get(f"{w.url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10).text


def test_answers_carry_the_tokens_their_models_used(make_weir, fake):
    w = make_weir()
    w.env["METRICS_TOKEN"] = "scrape-usage"
    w.start()
    api = Api(w.url, w.create_key())
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    body = ask(api, flow, "count my tokens please", "usage-chat")
    sent = fake.last("/chat/completions")
    assert sent["stream_options"] == {"include_usage": True}
    # The fake counts a prompt token per word of the messages and one per chunk.
    words = sum(len(str(m["content"]).split()) for m in sent["messages"])
    usage = body["usageMetadata"]
    assert (usage["input_tokens"], usage["total_tokens"]) == (words, words + usage["output_tokens"])
    assert usage["output_tokens"] > 0
    assert usage["nodes"] == [{"nodeId": "chatOpenAI_0", "model": "gpt-test", "input_tokens": words,
                               "output_tokens": usage["output_tokens"], "total_tokens": usage["total_tokens"]}]
    # The stream says the same before its metadata; the stored answer keeps it.
    r = api.post(f"/prediction/{flow}", json={"question": "count my tokens please", "streaming": True,
                                              "chatId": "usage-chat-2"}, stream=True)
    events = sse_events(r)
    names = [name for name, _ in events]
    assert names.index("usageMetadata") == names.index("metadata") - 1, names
    assert dict(events)["usageMetadata"] == usage
    stored = api.get(f"/chatmessage/{flow}", params={"chatId": "usage-chat"}).json()
    assert stored[1]["usageMetadata"] == usage and stored[0]["usageMetadata"] is None
    text = scrape(w, "scrape-usage")
    assert f'weir_model_tokens_total{{chatflow="{flow}",model="gpt-test",kind="input"}} {2 * words}' in text
    assert f'weir_model_tokens_total{{chatflow="{flow}",model="gpt-test",kind="output"}} {2 * usage["output_tokens"]}' in text


def test_an_agentflows_usage_is_summed_over_its_nodes(api, fake):
    start = flows.af_start()
    first = flows.af_llm("llmAgentflow_0", flows.af_openai(fake.url), label="Draft")
    second = flows.af_llm("llmAgentflow_1", flows.af_model("llmModel", flows.anthropic_model(fake.url)),
                          label="Polish")
    flow = create_flow(api, flows.agentflow([start, first, second],
                                            [(start["id"], first["id"]), (first["id"], second["id"])]),
                       type="AGENTFLOW")
    usage = ask(api, flow, "two models", "af-usage")["usageMetadata"]
    by_node = {n["nodeId"]: n for n in usage["nodes"]}
    assert set(by_node) == {"llmAgentflow_0", "llmAgentflow_1"}, usage
    # The Anthropic fake reports 10 input tokens and one output token per chunk.
    assert by_node["llmAgentflow_1"]["input_tokens"] == 10
    assert by_node["llmAgentflow_1"]["model"] == "claude-test"
    assert usage["input_tokens"] == sum(n["input_tokens"] for n in usage["nodes"])
    assert usage["output_tokens"] == sum(n["output_tokens"] for n in usage["nodes"])
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 10
    # Each node's executed item says what its own calls used, as Flowise's model nodes do.
    executed = {i["nodeId"]: i for i in ask(api, flow, "two models again", "af-usage-2")["agentFlowExecutedData"]}
    polished = executed["llmAgentflow_1"]["data"]["output"]["usageMetadata"]
    assert polished["input_tokens"] == 10 and polished["total_tokens"] == 10 + polished["output_tokens"]
    assert "usageMetadata" in executed["llmAgentflow_0"]["data"]["output"]
    assert "usageMetadata" not in executed["startAgentflow_0"]["data"]["output"]


def test_a_workspace_over_its_daily_token_budget_is_refused(make_weir, fake):
    w = make_weir()
    w.env["WORKSPACE_TOKEN_BUDGET_DAILY"] = "40"
    w.start()
    api = Api(w.url, w.create_key(workspace="thrifty"))
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    long_question = " ".join(["word"] * 30)
    # Under the budget a run starts, and finishes whatever it costs (more than the budget here).
    assert ask(api, flow, long_question, "b1")["usageMetadata"]["total_tokens"] > 40
    r = predict(api, flow, "and another", chatId="b3")
    assert_error(r, 429, "WORKSPACE_TOKEN_BUDGET_DAILY")
    assert 1 <= int(r.headers["retry-after"]) <= 86_400
    # Streams are refused the same way; other workspaces are not touched.
    r = api.post(f"/prediction/{flow}", json={"question": "stream", "streaming": True})
    assert_error(r, 429, "daily budget")
    other = Api(w.url, w.create_key(workspace="other"))
    their = create_flow(other, flows.conversation(flows.openai_model(fake.url)))
    assert ask(other, their, "hello", "o1")["text"] == "Echo: hello"


def test_an_agents_calls_are_announced_before_they_run(api, fake):
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.calculator()]))
    question = 'What is six times seven? CALL calculator {"input": "6 * 7"}'
    r = api.post(f"/prediction/{flow}", json={"question": question, "streaming": True}, stream=True)
    events = sse_events(r)
    names = [name for name, _ in events]
    called = names.index("calledTools")
    # An empty start opens the answer (the widget shows the calls in it).
    assert names[0] == "start" and events[0][1] == "" and called < names.index("token"), names
    assert names.index("token") < names.index("usedTools"), names
    assert events[called][1] == [{"tool": "calculator", "toolInput": {"input": "6 * 7"}, "toolOutput": ""}]
    used = dict(events)["usedTools"]
    assert [(u["tool"], u["toolInput"], u["toolOutput"]) for u in used] == [("calculator", {"input": "6 * 7"}, "42")]
    # A flow without memory names none; JSON answers have no calledTools.
    meta = dict(events)["metadata"]
    assert "memoryType" not in meta
    body = ask(api, flow, question, "calls-json")
    assert "calledTools" not in body and "memoryType" not in body


def test_the_flowise_python_client_reads_the_new_events(api, fake):
    from flowise import Flowise, PredictionData
    client = Flowise(base_url=api.url.removesuffix("/api/v1"), api_key=api.key)
    agent = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.calculator()]))
    question = 'What is six times seven? CALL calculator {"input": "6 * 7"}'
    chunks = [json.loads(c) for c in client.create_prediction(
        PredictionData(chatflowId=agent, question=question, chatId="sdk-agent", streaming=True))]
    names = [c["event"] for c in chunks]
    assert names.index("calledTools") < names.index("usedTools") < names.index("usageMetadata"), names
    assert names[-2:] == ["metadata", "end"]
    # The stop button's call ends a stream the client is reading.
    slow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    seen = []
    for chunk in client.create_prediction(
            PredictionData(chatflowId=slow, question="SLOW", chatId="sdk-stop", streaming=True)):
        seen.append(json.loads(chunk))
        if [c["event"] for c in seen].count("token") == 2:
            assert api.put(f"/chatmessage/abort/{slow}/sdk-stop").status_code == 200
    assert [c["event"] for c in seen][-3:] == ["metadata", "abort", "end"], seen


def test_attached_files_are_read_kept_and_served_back(api, fake, server):
    chatbot = {"fullFileUpload": {"status": True, "allowedUploadFileTypes": "text/plain,text/csv,application/pdf"}}
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.buffer_memory()), isPublic=True,
                       chatbotConfig=json.dumps(chatbot))
    visitor = Api(server.url, None)
    files = [("files", ("notes.txt", b"The parcel left Leeds on Monday.", "text/plain")),
             ("files", ("stock.csv", b"item,count\nmugs,4\n", "text/csv"))]
    r = visitor.post(f"/attachments/{flow}/att-chat", files=files, data={"chatId": "att-chat"})
    assert r.status_code == 200, r.text
    read = r.json()
    assert [(a["name"], a["mimeType"], a["size"]) for a in read] == [
        ("notes.txt", "text/plain", 32), ("stock.csv", "text/csv", 18)]
    assert read[0]["content"] == "The parcel left Leeds on Monday."
    assert "mugs" in read[1]["content"]
    r = visitor.post(f"/attachments/{flow}/att-chat", files=files[:1], data={"base64": "true"})
    assert r.json()[0]["content"].startswith("data:text/plain;base64,")

    # The widget sends the text with the next question (type file:full).
    upload = {"data": read[0]["content"], "type": "file:full", "name": "notes.txt", "mime": "text/plain"}
    answer = predict(visitor, flow, "When did it leave?", chatId="att-chat", uploads=[upload]).json()
    assert "The parcel left Leeds on Monday." in answer["text"]

    # Kept with the chat, served back as a download, never as a page.
    got = visitor.get("/get-upload-file", params={"chatflowId": flow, "chatId": "att-chat", "fileName": "notes.txt"})
    assert got.status_code == 200 and got.content == b"The parcel left Leeds on Monday."
    assert got.headers["content-type"] == "application/octet-stream"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["content-disposition"].startswith("attachment")
    assert_error(visitor.get("/get-upload-file", params={"chatflowId": flow, "chatId": "other", "fileName": "notes.txt"}), 404)
    assert_error(visitor.get("/get-upload-file", params={"chatflowId": flow, "chatId": "att-chat",
                                                         "fileName": "../x"}), 400, "Invalid path")
    assert_error(visitor.get("/get-upload-file", params={"chatflowId": flow}), 400, "chatId")
    assert api.delete(f"/chatmessage/{flow}", params={"chatId": "att-chat"}).status_code == 200
    assert visitor.get("/get-upload-file", params={"chatflowId": flow, "chatId": "att-chat",
                                                  "fileName": "notes.txt"}).status_code == 404

    # Types the chatflow does not list, types weir cannot read, and chats that take no files.
    html = [("files", ("page.html", b"<p>x</p>", "text/html"))]
    assert_error(visitor.post(f"/attachments/{flow}/att-chat", files=html), 400, "not allowed")
    anything = create_flow(api, flows.conversation(flows.openai_model(fake.url)), isPublic=True,
                           chatbotConfig=json.dumps({"fullFileUpload": {"status": True}}))
    image = [("files", ("photo.png", b"\x89PNG\r\n", "image/png"))]
    assert_error(visitor.post(f"/attachments/{anything}/c", files=image), 400, "cannot read")
    lying = [("files", ("notes.txt", b"x", "application/pdf"))]
    assert_error(visitor.post(f"/attachments/{anything}/c", files=lying), 400, "extension")
    closed = create_flow(api, flows.conversation(flows.openai_model(fake.url)), isPublic=True)
    assert_error(visitor.post(f"/attachments/{closed}/c", files=files[:1]), 400, "not enabled")
    private = create_flow(api, flows.conversation(flows.openai_model(fake.url)),
                          chatbotConfig=json.dumps({"fullFileUpload": {"status": True}}))
    assert_error(visitor.post(f"/attachments/{private}/c", files=files[:1]), 401)


def test_a_models_thinking_streams_before_its_answer_and_is_kept(api, fake):
    from prediction_client import sse_frames
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    r = api.post(f"/prediction/{flow}", json={"question": "THINK about owls", "streaming": True,
                                              "chatId": "thinker"}, stream=True)
    frames = sse_frames(r)
    names = [f["event"] for f in frames]
    thinking = [f for f in frames if f["event"] == "thinking"]
    # The reasoning comes in pieces, then once more with no text and its duration
    # in whole seconds (the fake reasons for about 1.2 s), all before the answer.
    assert [f["data"] for f in thinking] == ["Let me think.", " Still thinking.", ""], thinking
    assert "duration" not in thinking[0] and thinking[-1]["duration"] in (1, 2), thinking
    assert names[0] == "start" and max(i for i, n in enumerate(names) if n == "thinking") < names.index("token"), names
    assert "".join(f["data"] for f in frames if f["event"] == "token") == "Echo: THINK about owls"
    body = ask(api, flow, "THINK again", "thinker-json")
    reason = body["reasonContent"]
    assert reason["thinking"] == "Let me think. Still thinking." and reason["thinkingDuration"] in (1, 2), body
    assert body["text"] == "Echo: THINK again"
    stored = api.get(f"/chatmessage/{flow}", params={"chatId": "thinker-json"}).json()
    assert stored[1]["reasonContent"] == reason and stored[0]["reasonContent"] is None
    # A model that does not think sends no thinking at all.
    assert "reasonContent" not in ask(api, flow, "just answer", "plain")


def test_anthropic_extended_thinking_goes_back_signed_with_the_tool_calls(api, fake):
    model = flows.anthropic_model(fake.url)
    model["data"]["inputs"].update({"extendedThinking": True, "budgetTokens": 2048})
    flow = create_flow(api, flows.tool_agent(model, [flows.calculator()]))
    marker = nonce()
    question = f'What is six times seven ({marker})? CALL calculator {{"input": "6 * 7"}}'
    body = ask(api, flow, question, "claude-thinks")
    assert body["text"] == "Done: 42", body
    first, second = fake.bodies("/v1/messages", marker)
    # Thinking asked as Anthropic takes it: the budget within max_tokens, no temperature.
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] > 2048 and "temperature" not in first
    # The turn that called the calculator goes back starting with its signed thinking
    # (the fake refuses it otherwise, as Anthropic does).
    calling = next(m for m in second["messages"] if m["role"] == "assistant")
    assert calling["content"][0]["type"] == "thinking"
    assert calling["content"][0]["thinking"] == "Let me think. Still thinking."
    assert calling["content"][1]["type"] == "tool_use"
    # Both calls thought; the answer keeps all of it.
    reason = body["reasonContent"]
    assert reason["thinking"] == "Let me think. Still thinking.\n\nLet me think. Still thinking."
    assert reason["thinkingDuration"] >= 2


def follow_up_config(fake, credential, **more):
    prompt = ('STRUCT {"questions": ["Where do owls live?", "What do owls eat?", "Do owls sleep?", "Extra?"]}\n'
              "The conversation: {history}")
    return {"followUpPrompts": {"status": True, "selectedProvider": "openAI", "openAI": {
        "credentialId": credential, "modelName": "gpt-follow", "baseUrl": f"{fake.url}/v1",
        "prompt": prompt, "temperature": 0.2, **more}}}


def test_follow_up_prompts_are_suggested_by_the_chosen_model(api, fake):
    credential = api.post("/credentials", json={
        "name": "follow-ups", "credentialName": "openAIApi", "plainDataObj": {"openAIApiKey": "sk-good"},
        "allowedHosts": ["127.0.0.1"]})
    assert credential.status_code == 201, credential.text
    config = follow_up_config(fake, credential.json()["id"])
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url), flows.buffer_memory()),
                       chatbotConfig=json.dumps(config))
    expected = json.dumps(["Where do owls live?", "What do owls eat?", "Do owls sleep?"])
    body = ask(api, flow, "tell me of owls", "follow")
    # A JSON string of at most three questions, as Flowise sends it.
    assert json.loads(body["followUpPrompts"]) == json.loads(expected), body
    asked = fake.last("/chat/completions")
    assert asked["model"] == "gpt-follow" and asked["temperature"] == 0.2
    assert "Human: tell me of owls\nAI: Echo: tell me of owls" in asked["messages"][-1]["content"]
    nodes = {n["nodeId"]: n for n in body["usageMetadata"]["nodes"]}
    assert nodes["followUpPrompts"]["model"] == "gpt-follow" and nodes["chatOpenAI_0"]["model"] == "gpt-test"
    # The stream's metadata carries them; the stored answer keeps them.
    events = dict(sse_events(api.post(f"/prediction/{flow}", json={
        "question": "and their eyes?", "streaming": True, "chatId": "follow"}, stream=True)))
    assert json.loads(events["metadata"]["followUpPrompts"]) == json.loads(expected)
    # The second question's suggestions saw the chat's earlier turns (memory).
    assert "Human: tell me of owls" in fake.last("/chat/completions")["messages"][-1]["content"]
    stored = api.get(f"/chatmessage/{flow}", params={"chatId": "follow"}).json()
    assert json.loads(stored[1]["followUpPrompts"]) == json.loads(expected) and stored[0]["followUpPrompts"] is None
    # A follow-up model that fails leaves the answer without suggestions.
    broken = follow_up_config(fake, credential.json()["id"], modelName="server-error")
    assert api.put(f"/chatflows/{flow}", json={"chatbotConfig": json.dumps(broken)}).status_code == 200
    assert "followUpPrompts" not in ask(api, flow, "still there?", "follow-broken")


def test_a_follow_up_setting_weir_cannot_run_is_refused_when_saved(api, fake):
    flow_data = flows.conversation(flows.openai_model(fake.url))
    for setting, says in [({"status": True, "selectedProvider": "groqChat", "groqChat": {"modelName": "x"}}, "groqChat"),
                          ({"status": True, "selectedProvider": "openAI"}, "openAI")]:
        r = api.post("/chatflows", json={"name": "f", "flowData": flow_data,
                                         "chatbotConfig": json.dumps({"followUpPrompts": setting})})
        assert_error(r, 400)
        assert says in r.json()["message"]
    # Off, it is not read.
    create_flow(api, flow_data, chatbotConfig=json.dumps({"followUpPrompts": {"status": False}}))


def test_an_agentflows_state_is_sent_as_flow_variables(api, fake):
    start = flows.af_start(state=[{"key": "topic", "value": "owls"}])
    llm = flows.af_llm("llmAgentflow_0", flows.af_openai(fake.url),
                       llmUpdateState=[{"key": "topic", "value": "{{ output }}"}])
    flow = create_flow(api, flows.agentflow([start, llm], [(start["id"], llm["id"])]), type="AGENTFLOW")
    body = ask(api, flow, "birds", "af-vars")
    assert body["flowVariables"] == {"topic": "Echo: birds"}, body
    events = dict(sse_events(api.post(f"/prediction/{flow}", json={
        "question": "fish", "streaming": True, "chatId": "af-vars-2"}, stream=True)))
    assert events["metadata"]["flowVariables"] == {"topic": "Echo: fish"}
    # A chatflow without state sends none.
    plain = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    assert "flowVariables" not in ask(api, plain, "hi", "no-vars")


FLOWISE_SDK = "flowise-sdk@1.0.9"
FLOWISE_SDK_SHA256 = "4f14ec24f120317ea02e5595d2e2a17c4839022bed6ccc38480130498ad4dbb0"


@pytest.fixture(scope="module")
def flowise_sdk():
    """Flowise's npm client (its published dist/flowise-sdk.js), fetched once and
    checked against its pinned digest. It needs nothing but Node's own fetch."""
    from npm_packages import npm_file
    return npm_file(FLOWISE_SDK, FLOWISE_SDK_SHA256, "dist/flowise-sdk.js")


def sdk_events(sdk, api, flow, question, chat, **more):
    import subprocess
    from pathlib import Path
    script = Path(__file__).resolve().parent / "flowise_sdk_stream.cjs"
    ask_it = {"baseUrl": api.url.removesuffix("/api/v1"), "apiKey": api.key, "chatflowId": flow,
              "question": question, "chatId": chat, **more}
    done = subprocess.run(["node", str(script), str(sdk), json.dumps(ask_it)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_flowise_npm_client_reads_every_new_event(api, fake, flowise_sdk):
    credential = api.post("/credentials", json={
        "name": "follow-ups", "credentialName": "openAIApi", "plainDataObj": {"openAIApiKey": "sk-good"},
        "allowedHosts": ["127.0.0.1"]}).json()["id"]
    agent = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.calculator()]),
                        chatbotConfig=json.dumps(follow_up_config(fake, credential)))
    question = 'THINK: what is six times seven? CALL calculator {"input": "6 * 7"}'
    events = sdk_events(flowise_sdk, api, agent, question, "npm-agent")
    names = [e["event"] for e in events]
    # The reasoning and the calls come before the answer; usage and metadata after it.
    assert names[0] == "start" and names.index("thinking") < names.index("calledTools") < names.index("token"), names
    assert names.index("usedTools") < names.index("usageMetadata") < names.index("metadata"), names
    assert names[-1] == "end"
    ended = next(e for e in events if e["event"] == "thinking" and e["data"] == "")
    assert ended["duration"] >= 1
    meta = next(e["data"] for e in events if e["event"] == "metadata")
    assert json.loads(meta["followUpPrompts"])[0] == "Where do owls live?"
    assert meta["chatId"] == "npm-agent" and meta["chatMessageId"]
    # The stop button's call ends the stream the client reads.
    slow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    stopped = sdk_events(flowise_sdk, api, slow, "SLOW", "npm-stop", stopAfterTokens=2)
    assert [e["event"] for e in stopped][-3:] == ["metadata", "abort", "end"], stopped


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


def image_upload(name="cat.png", mime="image/png", content=PNG):
    import base64
    return {"data": f"data:{mime};base64,{base64.b64encode(content).decode()}", "type": "file",
            "name": name, "mime": mime}


def test_pictures_go_to_a_model_that_sees_them(api, fake, server):
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)), isPublic=True)
    # The widget learns it may attach pictures (the model's Allow Image Uploads).
    uploads = api.get(f"/public-chatbotConfig/{flow}").json()["uploads"]
    assert uploads["isImageUploadAllowed"] is True
    assert uploads["imgUploadSizeAndTypes"] == [{"fileTypes": ["image/gif", "image/jpeg", "image/png", "image/webp"],
                                                 "maxUploadSize": 5}]
    visitor = Api(server.url, None)
    body = predict(visitor, flow, "what is this?", chatId="pics", uploads=[image_upload()]).json()
    assert body["text"] == "Echo: what is this?", body
    asked = fake.last("/chat/completions")["messages"][-1]
    png_url = image_upload()["data"]
    assert asked["content"] == [{"type": "text", "text": "what is this?"},
                                {"type": "image_url", "image_url": {"url": png_url}}]
    # The question keeps the picture's name, the chat keeps the picture.
    stored = api.get(f"/chatmessage/{flow}", params={"chatId": "pics"}).json()
    assert stored[0]["fileUploads"] == [{"type": "stored-file", "name": "cat.png", "mime": "image/png"}]
    got = visitor.get("/get-upload-file", params={"chatflowId": flow, "chatId": "pics", "fileName": "cat.png"})
    assert got.status_code == 200 and got.content == PNG
    # The next question of the chat is text again: the picture went with its own turn.
    predict(visitor, flow, "and now?", chatId="pics")
    assert isinstance(fake.last("/chat/completions")["messages"][-1]["content"], str)
    # A picture must be what it says it is, and of a type a model takes.
    assert_error(predict(visitor, flow, "x", uploads=[image_upload(content=b"<svg/>")]), 400, "not a image/png")
    assert_error(predict(visitor, flow, "x", uploads=[image_upload("a.svg", "image/svg+xml", b"<svg/>")]), 400)
    assert_error(predict(visitor, flow, "x", uploads=[image_upload(content=PNG + bytes(5 * 1024 * 1024))]), 413)


def test_anthropic_ollama_and_agentflow_models_see_pictures_in_their_own_format(api, fake):
    claude = flows.anthropic_model(fake.url)
    claude["data"]["inputs"]["allowImageUploads"] = True
    flow = create_flow(api, flows.conversation(claude))
    predict(api, flow, "describe it", chatId="pics-claude-2", uploads=[image_upload()])
    import base64
    content = fake.last("/v1/messages")["messages"][-1]["content"]
    assert content == [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                    "data": base64.b64encode(PNG).decode()}},
                       {"type": "text", "text": "describe it"}]
    llama = flows.ollama_model(fake.url)
    llama["data"]["inputs"]["allowImageUploads"] = "true"
    flow = create_flow(api, flows.conversation(llama))
    predict(api, flow, "and this?", uploads=[image_upload()])
    asked = fake.last("/api/chat")["messages"][-1]
    assert asked["images"] == [base64.b64encode(PNG).decode()] and asked["content"] == "and this?"
    # An agentflow's LLM node whose model allows pictures sees them with the question.
    start = flows.af_start()
    seeing = flows.af_openai(fake.url)
    seeing["llmModelConfig"]["allowImageUploads"] = True
    llm = flows.af_llm("llmAgentflow_0", seeing)
    flow = create_flow(api, flows.agentflow([start, llm], [(start["id"], llm["id"])]), type="AGENTFLOW")
    body = predict(api, flow, "look", uploads=[image_upload()])
    assert body.status_code == 200, body.text
    asked = fake.last("/chat/completions")["messages"][-1]
    assert asked["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_a_flow_whose_model_does_not_see_refuses_pictures(api, fake):
    blind = flows.openai_model(fake.url, allowImageUploads=False)
    flow = create_flow(api, flows.conversation(blind), isPublic=True)
    assert api.get(f"/public-chatbotConfig/{flow}").json()["uploads"]["isImageUploadAllowed"] is False
    assert_error(predict(api, flow, "x", uploads=[image_upload()]), 400, "does not take pictures")
    # Nothing of the refused question was kept.
    assert api.get(f"/chatmessage/{flow}").json() == []
