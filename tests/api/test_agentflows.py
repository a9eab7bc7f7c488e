"""Agentflow V2 (chatflows of type AGENTFLOW whose flowData has a startAgentflow
node) over HTTP: the JSON answer and its agentFlowExecutedData, Flowise's variables
in rich-text inputs, each node type (LLM with messages, memory and structured
output; Agent and Tool with weir's tools and a stored Python tool; Condition;
Condition Agent; Loop; Iteration over a block of nodes; Direct Reply; HTTP through
the address guard; Human Input pausing a run and resuming it, across a restart too;
Retriever and agent knowledge over document stores; Execute Flow; Custom Function
refused; Sticky Note ignored), flow state (updated,
read, persisted across turns), form starts, the SSE event sequence, node errors,
executions, cron and webhook triggers, and two hand-written Flowise exports loaded as
they are.

Models are the fake providers (fakes.py): they answer `Echo: <last user message>`;
a forced `structured_output` call answers a `STRUCT {json}` directive (or
`STRUCT_BAD_ONCE`), a forced `choose_scenario` call picks the first scenario the
last user message names."""

import datetime
import json
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

import flows
from fakes import GOOD_KEY, FakeProviders, FakeSite
from flows import (af_agent, af_condition, af_condition_agent, af_custom_function, af_execute_flow, af_http,
                   af_human_input,
                   af_inside, af_iteration, af_llm, af_loop, af_model, af_openai, af_reply, af_retriever, af_start,
                   af_sticky_note, af_tool, af_tool_row, agentflow, mention, rich)
from prediction_client import ask, create_flow, nonce, predict, stream, tools_used
from test_triggers import post_hook, wait_for
from weir_harness import Api, Weir, assert_error, backends

START, LLM, REPLY = "startAgentflow_0", "llmAgentflow_0", "directReplyAgentflow_0"
CHAT = "/chat/completions"
EXPORTS = Path(__file__).parent / "flowise_exports"


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module")
def site():
    """A site on 127.0.0.2 answering GET with JSON (POST: `posted: <body>`)."""
    s = FakeSite("127.0.0.2", body='{"n": 3}', content_type="application/json")
    yield s
    s.close()


@pytest.fixture(scope="module")
def inner():
    """A site on 127.0.0.1, which no server of these tests lets a node reach."""
    s = FakeSite("127.0.0.1", body="inner secret")
    yield s
    s.close()


@pytest.fixture(scope="module")
def allowing(tmp_path_factory, fake):
    """A server letting requests reach 127.0.0.2 (ALLOW_PRIVATE_REQUESTS, as in
    test_request_tools) and holding an OpenAI key in its environment (exports carry
    no credentials, as in test_flowise_exports) that it trusts the fake with
    (PROVIDER_KEY_HOSTS)."""
    w = Weir(tmp_path_factory.mktemp("weir-agentflow"), "sqlite")
    w.env.update(ALLOW_PRIVATE_REQUESTS="127.0.0.2", OPENAI_API_KEY=GOOD_KEY,
                 PROVIDER_KEY_HOSTS=fake.url.split("//")[1])
    w.start()
    yield w
    w.cleanup()


@pytest.fixture
def client(allowing) -> Api:
    return Api(allowing.url, allowing.create_key(workspace=f"ws-{nonce()}"))


# ------------------------------------------------------------------ helpers

def create(api, flow_data) -> str:
    return create_flow(api, flow_data, type="AGENTFLOW")


def chain(*nodes):
    """flowData of these nodes wired one after the other."""
    return agentflow(list(nodes), [(a["id"], b["id"]) for a, b in zip(nodes, nodes[1:])])


def executed(body):
    return [i["nodeId"] for i in body["agentFlowExecutedData"]]


def item(body, node_id):
    """The last executed item of `node_id`."""
    return [i for i in body["agentFlowExecutedData"] if i["nodeId"] == node_id][-1]


def output(body, node_id):
    return item(body, node_id)["data"]["output"]


def said(sent):
    return [(m["role"], m["content"]) for m in sent["messages"]]


def system(text):
    return [{"role": "system", "content": rich(text)}]


def llm(fake, node_id=LLM, text="You are helpful.", **inputs):
    """An LLM node on the fake OpenAI model with one system message."""
    return af_llm(node_id, af_openai(fake.url), system(text), **inputs)


def post(api, flow_id, body, **kw):
    return api.post(f"/prediction/{flow_id}", json=body, **kw)


def lines(text):
    return [line.strip() for line in text.splitlines() if line.strip()]


def fulfilled(conditions):
    return [c.get("isFulfilled") is True for c in conditions]


def iso_now(value):
    moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    assert abs((datetime.datetime.now(datetime.timezone.utc) - moment).total_seconds()) < 60, value
    return moment


# ------------------------------------------------------------------ the fake's forced tools (no weir)

def forced_call(fake, messages, tool, parameters, tool_choice):
    """(name, arguments) of the one tool call the fake answers a streamed chat
    completions request offering only `tool` with `tool_choice`."""
    body = {"model": "m", "stream": True, "messages": messages, "tool_choice": tool_choice,
            "tools": [{"type": "function", "function": {"name": tool, "description": "", "parameters": parameters}}]}
    r = requests.post(f"{fake.url}/v1/chat/completions", json=body, timeout=10,
                      headers={"Authorization": f"Bearer {GOOD_KEY}"})
    name, arguments = None, ""
    for line in r.text.splitlines():
        if line.startswith("data: {"):
            for part in json.loads(line[6:])["choices"][0]["delta"].get("tool_calls", []):
                name = part.get("function", {}).get("name") or name
                arguments += part.get("function", {}).get("arguments", "")
    return name, json.loads(arguments)


def test_the_fake_answers_forced_tools(fake):
    schema = {"type": "object", "required": ["city", "temp"], "properties": {
        "city": {"type": "string"}, "temp": {"type": "number"}, "hot": {"type": "boolean"},
        "kind": {"type": "string", "enum": ["sunny", "rainy"]}, "tags": {"type": "array", "items": {"type": "string"}}}}
    force = {"type": "function", "function": {"name": "structured_output"}}
    user = [{"role": "user", "content": f'{nonce()} STRUCT {{"city": "Oslo", "temp": 3}}'}]
    assert forced_call(fake, user, "structured_output", schema, force) == (
        "structured_output", {"city": "Oslo", "temp": 3})
    assert forced_call(fake, [{"role": "user", "content": "hi"}], "structured_output", schema, "required") == (
        "structured_output", {"city": "x", "temp": 1, "hot": True, "kind": "sunny", "tags": []})
    marker = nonce()
    once = [{"role": "user", "content": f'{marker} STRUCT_BAD_ONCE {{"city": "Rome", "temp": 30}}'}]
    assert forced_call(fake, once, "structured_output", schema, force)[1] == {}
    retry = once + [{"role": "user", "content": "city and temp are missing"}]
    assert forced_call(fake, retry, "structured_output", schema, force)[1] == {"city": "Rome", "temp": 30}
    assert fake.struct_requests(marker) == 2

    scenarios = {"type": "object", "properties": {"output": {"type": "string", "enum": SCENARIOS}}}
    choose = {"type": "function", "function": {"name": "choose_scenario"}}

    def pick(text):
        return forced_call(fake, [{"role": "user", "content": text}], "choose_scenario", scenarios, choose)[1]

    assert pick("A WEATHER QUESTION") == {"output": "weather question"}
    assert pick(f'{{"input": "billing question please", "scenarios": {json.dumps(SCENARIOS)}}}') == {
        "output": "billing question"}
    assert pick(f'{{"input": "hello", "scenarios": {json.dumps(SCENARIOS)}}}') == {"output": "none of these"}


# ------------------------------------------------------------------ the answer

def test_an_llm_node_answers_with_the_executed_nodes(api, fake):
    flow = create(api, chain(af_start(), llm(fake)))
    marker = nonce()
    question, chat = f"Hello there {marker}", f"chat-{marker}"
    body = ask(api, flow, question, chatId=chat)
    assert {"text", "question", "chatId", "chatMessageId", "sessionId", "executionId",
            "agentFlowExecutedData"} <= set(body)
    assert body["text"] == f"Echo: {question}" and body["question"] == question
    assert body["chatId"] == body["sessionId"] == chat
    uuid.UUID(body["executionId"])
    uuid.UUID(body["chatMessageId"])

    start, answer = body["agentFlowExecutedData"]
    assert (start["nodeId"], start["nodeLabel"], start["status"], start["previousNodeIds"]) == (
        START, "Start", "FINISHED", [])
    assert (answer["nodeId"], answer["nodeLabel"], answer["status"], answer["previousNodeIds"]) == (
        LLM, "LLM", "FINISHED", [START])
    for done, name in ((start, "startAgentflow"), (answer, "llmAgentflow")):
        assert {"id", "name", "input", "output", "state"} <= set(done["data"]), done
        assert (done["data"]["id"], done["data"]["name"]) == (done["nodeId"], name)
    assert answer["data"]["output"]["content"] == body["text"]

    [sent] = fake.bodies(CHAT, marker)
    assert sent["model"] == "gpt-test"
    assert said(sent) == [("system", "You are helpful."), ("user", question)]


CHAT_MODELS = {
    "chatOpenAI": (lambda base: flows.openai_model(base), CHAT),
    "chatAnthropic": (lambda base: flows.anthropic_model(base), "/v1/messages"),
    "chatOllama": (lambda base: flows.ollama_model(base), "/api/chat"),
    "azureChatOpenAI": (lambda base: flows.azure_model(base, deployment="af-dep"), CHAT),
    "chatMistralAI": (lambda base: flows.mistral_model(base), CHAT),
}


@pytest.mark.parametrize("kind", list(CHAT_MODELS))
def test_any_chat_model_drives_an_llm_node(api, fake, kind):
    model, suffix = CHAT_MODELS[kind]
    node = af_llm(LLM, af_model("llmModel", model(fake.url)), system("Be kind."))
    flow = create(api, chain(af_start(), node))
    question = f"Which model? {nonce()}"
    assert ask(api, flow, question)["text"] == f"Echo: {question}"
    [sent] = fake.bodies(suffix, question)
    assert "Be kind." in json.dumps(sent)


def test_direct_reply_quotes_an_earlier_node(api, fake):
    reply = af_reply(REPLY, rich("Answer: " + mention(LLM)))
    flow = create(api, chain(af_start(), llm(fake), reply))
    question = f"Quote me {nonce()}"
    body = ask(api, flow, question)
    assert body["text"] == f"Answer: Echo: {question}"
    assert executed(body) == [START, LLM, REPLY]
    assert item(body, REPLY)["previousNodeIds"] == [LLM]
    assert output(body, REPLY)["content"] == body["text"]
    assert output(body, LLM)["content"] == f"Echo: {question}"


def test_a_direct_reply_alone_calls_no_model(api, fake):
    flow = create(api, chain(af_start(), af_reply(REPLY, rich("Hello " + mention("question") + "!"))))
    calls = fake.count(CHAT)
    assert ask(api, flow, "Ada")["text"] == "Hello Ada!"
    assert fake.count(CHAT) == calls


def test_a_sticky_note_is_ignored(api):
    flow = agentflow([af_start(), af_reply(REPLY, "Noted."), af_sticky_note("stickyNoteAgentflow_0", "A note")],
                     [(START, REPLY)])
    body = ask(api, create(api, flow), "hi")
    assert body["text"] == "Noted." and executed(body) == [START, REPLY]


# ------------------------------------------------------------------ variables

def test_rich_text_becomes_plain_text(api, fake):
    text = rich("Fish &amp; chips for " + mention("question") + ".", "Second paragraph.")
    flow = create(api, chain(af_start(), af_llm(LLM, af_openai(fake.url), [{"role": "system", "content": text}])))
    question = f"Ada {nonce()}"
    ask(api, flow, question)
    [sent] = fake.bodies(CHAT, question)
    content = sent["messages"][0]["content"]
    assert "<" not in content and "&amp;" not in content and "{{" not in content
    assert lines(content) == [f"Fish & chips for {question}.", "Second paragraph."]


def test_question_and_current_date_time(api):
    flow = create(api, chain(af_start(), af_reply(REPLY, "Asked {{ question }} at {{ current_date_time }}")))
    text = ask(api, flow, "the time")["text"]
    assert text.startswith("Asked the time at ")
    iso_now(text.removeprefix("Asked the time at "))


def test_chat_history_is_the_sessions_earlier_turns(api):
    flow = create(api, chain(af_start(), af_reply(REPLY, "Seen: {{ chat_history }} Now: {{ question }}")))
    chat = f"history-{nonce()}"
    first = ask(api, flow, "alpha", chatId=chat)["text"]
    assert first.startswith("Seen: ") and first.endswith("Now: alpha") and "{{" not in first
    second = ask(api, flow, "beta", chatId=chat)["text"]
    assert f"Human: alpha\nAssistant: {first}" in second and second.endswith("Now: beta")
    other = ask(api, flow, "gamma", chatId=f"{chat}-other")["text"]
    assert "alpha" not in other and "Human:" not in other


def test_flow_variables(api):
    flow = create(api, chain(af_start(), af_reply(REPLY, "{{ $flow.sessionId }}|{{ $flow.chatId }}|"
                                                         "{{ $flow.chatflowId }}")))
    chat = f"flowvars-{nonce()}"
    assert ask(api, flow, "who", chatId=chat)["text"] == f"{chat}|{chat}|{flow}"


def test_workspace_variables(api):
    r = api.post("/variables", json={"name": "greeting", "value": "bonjour"})
    assert r.status_code == 201, r.text
    flow = create(api, chain(af_start(), af_reply(REPLY, rich(mention("$vars.greeting") + ", "
                                                              + mention("question")))))
    assert ask(api, flow, "Ada")["text"] == "bonjour, Ada"


def test_unknown_variables_stay_as_written(api):
    message = "{{ nothing_here }} / {{ $flow.state.missing }} / {{ $vars.missing }} / {{ noSuchNode_0 }}"
    flow = create(api, chain(af_start(), af_reply(REPLY, message)))
    assert ask(api, flow, "hi")["text"] == message


# ------------------------------------------------------------------ LLM node

def test_llm_messages_put_system_rows_first(api, fake):
    rows = [{"role": "assistant", "content": rich("Earlier I said hello.")},
            {"role": "system", "content": rich("Be brief.")}]
    flow = create(api, chain(af_start(), af_llm(LLM, af_openai(fake.url), rows)))
    question = f"Order {nonce()}"
    ask(api, flow, question)
    [sent] = fake.bodies(CHAT, question)
    assert said(sent) == [("system", "Be brief."), ("assistant", "Earlier I said hello."), ("user", question)]


def test_llm_memory_is_the_sessions_earlier_turns(api, fake):
    marker = nonce()
    remembering = create(api, chain(af_start(), llm(fake, text="Remember.", llmEnableMemory=True)))
    forgetting = create(api, chain(af_start(), llm(fake, text="Forget.")))
    for flow, chat in ((remembering, f"mem-{marker}"), (forgetting, f"nomem-{marker}")):
        ask(api, flow, f"alpha {marker}", chatId=chat)
        ask(api, flow, f"beta {marker}", chatId=chat)
    with_memory = [b for b in fake.bodies(CHAT, f"beta {marker}") if b["messages"][0]["content"] == "Remember."]
    without = [b for b in fake.bodies(CHAT, f"beta {marker}") if b["messages"][0]["content"] == "Forget."]
    assert said(with_memory[0]) == [("system", "Remember."), ("user", f"alpha {marker}"),
                                    ("assistant", f"Echo: alpha {marker}"), ("user", f"beta {marker}")]
    assert said(without[0]) == [("system", "Forget."), ("user", f"beta {marker}")]


SUMMARIZER_HEAD = "Progressively summarize the conversation provided and return a new summary."


def test_llm_summary_memory_asks_the_model_for_a_summary(api, fake):
    """conversationSummary: every turn with earlier turns, they are summarised by the
    node's model, and the node is asked with that summary and the question."""
    marker = nonce()
    flow = create(api, chain(af_start(), llm(fake, text="Summarised.", llmEnableMemory=True,
                                             llmMemoryType="conversationSummary")))
    chat = f"sum-{marker}"
    ask(api, flow, f"alpha {marker}", chatId=chat)
    before = len(fake.bodies(CHAT, marker))
    body = ask(api, flow, f"beta {marker}", chatId=chat)
    assert len(fake.bodies(CHAT, marker)) == before + 2, "a summary, then the answer"
    summary_request, answer_request = fake.bodies(CHAT, marker)[-2:]
    [(role, prompt)] = said(summary_request)
    assert role == "user" and prompt.startswith(SUMMARIZER_HEAD)
    # The earlier turns are summarised; this turn's question is asked as it is.
    assert prompt.endswith(f"Conversation:\nuser: alpha {marker}\nassistant: Echo: alpha {marker}\n\n"
                           "New summary:")
    assert said(answer_request) == [("system", "Summarised."), ("assistant", f"Echo: {prompt}"),
                                    ("user", f"beta {marker}")]
    assert body["text"] == f"Echo: beta {marker}"


def test_llm_summary_buffer_memory_summarises_only_what_is_over_the_limit(api, fake):
    """conversationSummaryBuffer: under llmMemoryMaxTokenLimit the history goes as
    it is; over it, the oldest messages become one summary said first.

    The limit leaves room for the first exchange whatever the nonce: its random hex
    takes 4 to 10 cl100k tokens, twice (the question and its echo), so a limit of 30
    was crossed by some nonces (two CI runs failed so)."""
    marker = nonce()
    long_turn = f"alpha {marker} " + "word " * 80
    node = af_llm(LLM, af_openai(fake.url), (), llmEnableMemory=True, llmMemoryType="conversationSummaryBuffer",
                  llmMemoryMaxTokenLimit=60)
    flow = create(api, chain(af_start(), node))
    chat = f"buf-{marker}"
    ask(api, flow, f"short {marker}", chatId=chat)
    ask(api, flow, long_turn, chatId=chat)
    assert len(fake.bodies(CHAT, marker)) == 2, "under the limit (the question aside): no summary"
    ask(api, flow, f"gamma {marker}", chatId=chat)
    assert len(fake.bodies(CHAT, marker)) == 4, "a summary, then the answer"
    summary_request, answer_request = fake.bodies(CHAT, marker)[-2:]
    [(_, prompt)] = said(summary_request)
    assert prompt.startswith(SUMMARIZER_HEAD) and f"user: short {marker}" in prompt
    sent = said(answer_request)
    assert sent[0] == ("system", f"Previous conversation summary: Echo: {prompt}")
    assert sent[-1] == ("user", f"gamma {marker}")
    assert f"short {marker}" not in json.dumps(sent[1:]), "summarised messages are not sent again"


def test_llm_input_message_ends_the_conversation(api, fake):
    node = llm(fake, llmEnableMemory=True, llmUserMessage=rich("Answer briefly: " + mention("question")))
    flow = create(api, chain(af_start(), node))
    question = f"Why? {nonce()}"
    body = ask(api, flow, question)
    [sent] = fake.bodies(CHAT, question)
    assert said(sent)[0] == ("system", "You are helpful.")
    assert said(sent)[-1] == ("user", f"Answer briefly: {question}")
    assert body["text"] == f"Echo: Answer briefly: {question}"


WEATHER_ROWS = [
    {"key": "city", "type": "string", "description": "The city"},
    {"key": "hot", "type": "boolean", "description": "Is it hot"},
    {"key": "items", "type": "jsonArray", "description": "What to bring",
     "jsonSchema": json.dumps({"name": {"type": "string", "description": "Item name"}, "qty": {"type": "number"}})},
    {"key": "kind", "type": "enum", "enumValues": "sunny, rainy, cloudy", "description": "The weather"},
    {"key": "tags", "type": "stringArray", "description": "Tags"},
    {"key": "temp", "type": "number", "description": "Temperature"},
]
# Keys in the rows' order, which is also alphabetical (however the JSON is re-ordered).
WEATHER = {"city": "Paris", "hot": False, "items": [{"name": "umbrella", "qty": 2}], "kind": "rainy",
           "tags": ["wet", "grey"], "temp": 21}


def check_structured_request(sent):
    """The request forces one tool, structured_output, whose parameters are the
    schema of WEATHER_ROWS."""
    assert [t["function"]["name"] for t in sent["tools"]] == ["structured_output"]
    assert sent["tool_choice"] in ("required", {"type": "function", "function": {"name": "structured_output"}})
    params = sent["tools"][0]["function"]["parameters"]
    props = params["properties"]
    assert params["type"] == "object" and set(params["required"]) == set(WEATHER) == set(props)
    assert props["city"]["type"] == "string" and props["city"]["description"] == "The city"
    assert props["hot"]["type"] == "boolean" and props["temp"]["type"] == "number"
    assert props["kind"]["enum"] == ["sunny", "rainy", "cloudy"]
    assert props["tags"]["type"] == "array" and props["tags"]["items"]["type"] == "string"
    assert props["items"]["type"] == "array" and props["items"]["items"]["type"] == "object"
    item_props = props["items"]["items"]["properties"]
    assert item_props["name"]["type"] == "string" and item_props["qty"]["type"] == "number"


def test_structured_output(api, fake):
    reply = af_reply(REPLY, "{{ llmAgentflow_0.output.city }} is {{ llmAgentflow_0.output.temp }} degrees, "
                            "{{ llmAgentflow_0.output.kind }}")
    flow = create(api, chain(af_start(), llm(fake, llmStructuredOutput=WEATHER_ROWS), reply))
    marker = nonce()
    body = ask(api, flow, f"Weather please {marker} STRUCT {json.dumps(WEATHER)}")
    assert body["text"] == "Paris is 21 degrees, rainy"
    out = output(body, LLM)
    assert {k: out[k] for k in WEATHER} == WEATHER
    assert out["content"] == json.dumps(WEATHER, indent=2)
    [sent] = fake.bodies(CHAT, marker)
    check_structured_request(sent)

    # Without a directive the fake fills the schema: strings "x", numbers 1, the first enum value.
    assert ask(api, flow, f"Anything {nonce()}")["text"] == "x is 1 degrees, sunny"


def test_structured_output_as_the_last_node_is_the_answer(api, fake):
    rows = [{"key": "city", "type": "string", "description": "City"}]
    flow = create(api, chain(af_start(), llm(fake, llmStructuredOutput=rows)))
    body = ask(api, flow, f'{nonce()} STRUCT {{"city": "Oslo"}}')
    assert body["text"] == json.dumps({"city": "Oslo"}, indent=2) == output(body, LLM)["content"]


CITY_ROWS = [{"key": "city", "type": "string", "description": "City"},
             {"key": "temp", "type": "number", "description": "Temperature"}]


def test_an_invalid_structured_answer_is_retried_once(api, fake):
    flow = create(api, chain(af_start(), llm(fake, llmStructuredOutput=CITY_ROWS)))
    marker = nonce()
    question = f'{marker} STRUCT_BAD_ONCE {{"city": "Rome", "temp": 30}}'
    body = ask(api, flow, question)
    assert json.loads(body["text"]) == {"city": "Rome", "temp": 30}
    assert (output(body, LLM)["city"], output(body, LLM)["temp"]) == ("Rome", 30)
    first, retry = fake.bodies(CHAT, marker)
    assert retry["messages"][:len(first["messages"])] == first["messages"]
    role, content = said(retry)[-1]
    assert role == "user" and content != question and content
    assert fake.struct_requests(marker) == 2


def test_two_invalid_structured_answers_fail_the_node(api, fake):
    flow = create(api, chain(af_start(), llm(fake, llmStructuredOutput=CITY_ROWS)))
    marker = nonce()
    r = predict(api, flow, f'{marker} STRUCT {{"city": 5, "temp": "warm"}}')
    assert LLM in assert_error(r, 500)["message"]
    assert len(fake.bodies(CHAT, marker)) == 2


# ------------------------------------------------------------------ state

def test_state_is_updated_and_read_by_a_later_node(api, fake):
    start = af_start(state=[{"key": "answer", "value": ""}, {"key": "asked", "value": "nobody"},
                            {"key": "topic", "value": "weather"}])
    updates = [{"key": "answer", "value": "{{ output }}"}, {"key": "asked", "value": rich(mention("question"))}]
    reply = af_reply(REPLY, "State: {{ $flow.state.answer }} / {{ $flow.state.asked }} / {{ $flow.state.topic }}")
    flow = create(api, chain(start, llm(fake, llmUpdateState=updates), reply))
    question = f"Remember this {nonce()}"
    body = ask(api, flow, question)
    assert body["text"] == f"State: Echo: {question} / {question} / weather"
    assert item(body, START)["data"]["state"] == {"answer": "", "asked": "nobody", "topic": "weather"}
    assert item(body, LLM)["data"]["state"] == {"answer": f"Echo: {question}", "asked": question, "topic": "weather"}


def test_structured_keys_update_state(api, fake):
    start = af_start(state=[{"key": "city", "value": ""}])
    node = llm(fake, llmStructuredOutput=CITY_ROWS, llmUpdateState=[{"key": "city", "value": "{{ output.city }}"}])
    flow = create(api, chain(start, node, af_reply(REPLY, "City: {{ $flow.state.city }}")))
    body = ask(api, flow, f'{nonce()} STRUCT {{"city": "Lima", "temp": 18}}')
    assert body["text"] == "City: Lima"


def test_persisted_state_carries_over_to_the_next_turn(api, fake):
    def flow(persist):
        start = af_start(state=[{"key": "last", "value": "none"}], persist=persist)
        node = llm(fake, text="Previous: {{ $flow.state.last }}",
                   llmUpdateState=[{"key": "last", "value": "{{ question }}"}])
        return create(api, chain(start, node))

    marker = nonce()

    def previous(flow_id, question, chat):
        ask(api, flow_id, f"{question} {marker}", chatId=chat)
        [sent] = fake.bodies(CHAT, f"{question} {marker}")
        return sent["messages"][0]["content"]

    persisting = flow(True)
    assert previous(persisting, "alpha", f"p-{marker}") == "Previous: none"
    assert previous(persisting, "beta", f"p-{marker}") == f"Previous: alpha {marker}"
    assert previous(persisting, "gamma", f"p2-{marker}") == "Previous: none"
    forgetting = flow(None)
    assert previous(forgetting, "delta", f"f-{marker}") == "Previous: none"
    assert previous(forgetting, "epsilon", f"f-{marker}") == "Previous: none"


# ------------------------------------------------------------------ form start

def form_flow(api):
    start = af_start(form=[{"type": "string", "label": "Name", "name": "name"},
                           {"type": "number", "label": "Age", "name": "age"}], formTitle="Sign up")
    return create(api, chain(start, af_reply(REPLY, rich("Hello " + mention("$form.name") + ", age "
                                                         + mention("$form.age")))))


def test_a_form_start(api):
    flow = form_flow(api)
    r = post(api, flow, {"form": {"name": "Ada", "age": 36}})
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Hello Ada, age 36"


def test_a_question_and_a_form_together_are_refused(api):
    flow = form_flow(api)
    assert_error(post(api, flow, {"question": "hi", "form": {"name": "Ada", "age": 36}}), 400)


# ------------------------------------------------------------------ condition

CONDITIONS = [
    {"type": "string", "value1": rich(mention("question")), "operation": "equal", "value2": rich("yes")},
    {"type": "string", "value1": rich(mention("question")), "operation": "contains", "value2": rich("9")},
    {"type": "number", "value1": "{{ question }}", "operation": "larger", "value2": 10},
]


@pytest.mark.parametrize("question, branch", [
    ("yes", 0),     # string equal
    ("99", 1),      # rows 1 and 2 both hold: the first wins
    ("42", 2),      # number larger
    ("hello", 3),   # nothing holds: Else
])
def test_condition_branches(api, fake, question, branch):
    replies = [af_reply(f"directReplyAgentflow_{i}", f"Branch {i}") for i in range(4)]
    links = [(START, "conditionAgentflow_0")] + [("conditionAgentflow_0", r["id"], i) for i, r in enumerate(replies)]
    flow = create(api, agentflow([af_start(), af_condition("conditionAgentflow_0", CONDITIONS), *replies], links))
    calls = fake.count(CHAT)
    body = ask(api, flow, question)
    assert body["text"] == f"Branch {branch}"
    assert executed(body) == [START, "conditionAgentflow_0", f"directReplyAgentflow_{branch}"]
    assert fulfilled(output(body, "conditionAgentflow_0")["conditions"]) == [i == branch for i in range(4)]
    assert fake.count(CHAT) == calls


# ------------------------------------------------------------------ condition agent

SCENARIOS = ["billing question", "weather question", "something else"]


@pytest.mark.parametrize("question, branch", [
    ("I have a billing question", 0),
    ("Any weather question today?", 1),
    ("Something else entirely", 2),
    ("Just saying hello", 2),  # the model names no scenario: the last one
])
def test_condition_agent_picks_a_scenario(api, fake, question, branch):
    model = af_openai(fake.url, field="conditionAgentModel")
    router = af_condition_agent("conditionAgentAgentflow_0", model, SCENARIOS,
                                instructions=rich("Pick the topic of the message."))
    replies = [af_reply(f"directReplyAgentflow_{i}", f"Scenario {i}") for i in range(3)]
    links = [(START, router["id"])] + [(router["id"], r["id"], i) for i, r in enumerate(replies)]
    flow = create(api, agentflow([af_start(), router, *replies], links))
    marker = nonce()
    body = ask(api, flow, f"{question} {marker}")
    assert body["text"] == f"Scenario {branch}"
    assert executed(body) == [START, router["id"], f"directReplyAgentflow_{branch}"]
    assert fulfilled(output(body, router["id"])["conditions"]) == [i == branch for i in range(3)]
    [sent] = fake.bodies(CHAT, marker)
    assert [t["function"]["name"] for t in sent["tools"]] == ["choose_scenario"]
    assert sent["tool_choice"] in ("required", {"type": "function", "function": {"name": "choose_scenario"}})
    out = sent["tools"][0]["function"]["parameters"]["properties"]["output"]
    assert out["type"] == "string" and out["enum"] == SCENARIOS
    assert "Pick the topic of the message." in json.dumps(sent)


# ------------------------------------------------------------------ loop

@pytest.mark.parametrize("max_count, fallback, runs, answer", [
    (3, None, 3, "Loop completed after reaching maximum iteration count of 3."),
    (None, "Enough looping.", 5, "Enough looping."),
])
def test_a_loop_runs_its_target_max_loop_count_times(api, fake, max_count, fallback, runs, answer):
    marker = nonce()  # in the system message: each pass sends it, whatever else it sends
    writer = llm(fake, text=f"Pass {{{{ loop_count }}}} {marker}", label="Writer")
    loop = af_loop("loopAgentflow_0", LLM, "Writer", max_count=max_count, fallback=fallback)
    flow = create(api, chain(af_start(), writer, loop))
    body = ask(api, flow, "Write")
    assert body["text"] == answer
    assert executed(body) == [START] + [LLM, "loopAgentflow_0"] * runs
    assert output(body, "loopAgentflow_0")["content"] == answer
    sent = fake.bodies(CHAT, marker)
    assert [b["messages"][0]["content"] for b in sent] == [f"Pass {i} {marker}" for i in range(runs)]


# ------------------------------------------------------------------ iteration

IT = "iterationAgentflow_0"
FRUITS = ["apple", "banana", "cherry"]


def test_an_iteration_runs_its_block_once_per_item(api, fake):
    """Start → iteration over three strings; the block: an LLM whose message holds
    {{ $iteration }}, then a direct reply quoting it."""
    marker = nonce()
    iteration = af_iteration(IT, json.dumps(FRUITS))
    writer = af_llm(LLM, af_openai(fake.url), [{"role": "user", "content": rich(
        "Describe " + mention("$iteration") + f" {marker}")}])
    block = af_inside(iteration, writer, af_reply(REPLY, rich("Got: " + mention(LLM))))
    flow = create(api, agentflow([af_start(), iteration, *block], [(START, IT), (LLM, REPLY)]))
    calls = fake.count(CHAT)
    body = ask(api, flow, "Go")
    assert fake.count(CHAT) == calls + 3
    prompts = [f"Describe {fruit} {marker}" for fruit in FRUITS]
    assert [said(b) for b in fake.bodies(CHAT, marker)] == [[("user", p)] for p in prompts]

    assert executed(body) == [START] + [LLM, REPLY] * 3 + [IT]
    children = body["agentFlowExecutedData"][1:-1]
    assert [(c["data"]["iterationIndex"], c["data"]["parentNodeId"]) for c in children] == [
        (i, IT) for i in range(3) for _ in (LLM, REPLY)]
    assert [c["status"] for c in body["agentFlowExecutedData"]] == ["FINISHED"] * 8
    assert [c["data"]["output"]["content"] for c in children if c["nodeId"] == LLM] == [f"Echo: {p}" for p in prompts]
    results = [f"Got: Echo: {p}" for p in prompts]
    assert output(body, IT)["iterationResults"] == results
    assert output(body, IT)["content"] == "\n".join(results) == body["text"]
    assert item(body, IT)["previousNodeIds"] == [START]

    data = json.loads(api.get(f"/executions/{body['executionId']}").json()["executionData"])
    assert [i["nodeId"] for i in data] == executed(body)


def test_an_iteration_over_objects_binds_their_keys(api, fake):
    """The items come from the flow state; a node after the iteration runs once,
    after it, and quotes its joined results."""
    people = [{"age": 36, "name": "Ada"}, {"age": 41, "name": "Alan"}]
    start = af_start(state=[{"key": "people", "value": json.dumps(people)}])
    iteration = af_iteration(IT, rich(mention("$flow.state.people")))
    hello = af_reply("directReplyAgentflow_1", "Hello {{ $iteration.name }} ({{ $iteration.age }}) "
                                              "| {{ $iteration }}", label="Hello")
    block = af_inside(iteration, hello)
    after = af_reply(REPLY, rich("Results:", mention(IT)))
    flow = create(api, agentflow([start, iteration, *block, after], [(START, IT), (IT, REPLY)]))
    calls = fake.count(CHAT)
    body = ask(api, flow, "Greet them")
    assert fake.count(CHAT) == calls
    assert executed(body) == [START, hello["id"], hello["id"], IT, REPLY]
    assert item(body, REPLY)["previousNodeIds"] == [IT]
    said_ = output(body, IT)["iterationResults"]
    assert [s.split(" | ")[0] for s in said_] == ["Hello Ada (36)", "Hello Alan (41)"]
    assert [json.loads(s.split(" | ")[1]) for s in said_] == people
    assert lines(body["text"]) == ["Results:", *said_]


def test_an_iteration_over_a_previous_llm_answer(api, fake):
    """`{{ llmAgentflow_0.output.tags }}` of a structured answer is a JSON array."""
    rows = [{"key": "tags", "type": "stringArray", "description": "Tags"}]
    iteration = af_iteration(IT, "{{ llmAgentflow_0.output.tags }}")
    block = af_inside(iteration, af_reply("directReplyAgentflow_1", "Tag {{ $iteration }}"))
    flow = create(api, agentflow([af_start(), llm(fake, llmStructuredOutput=rows), iteration, *block],
                                 [(START, LLM), (LLM, IT)]))
    body = ask(api, flow, f'{nonce()} STRUCT {{"tags": ["red", "green"]}}')
    assert output(body, IT)["iterationResults"] == ["Tag red", "Tag green"]
    assert body["text"] == "Tag red\nTag green"


def test_the_nodes_of_an_iteration_never_stream(api, fake):
    marker = nonce()
    iteration = af_iteration(IT, json.dumps(FRUITS[:2]))
    writer = af_llm(LLM, af_openai(fake.url), [{"role": "user", "content": rich(
        mention("$iteration") + f" {marker}")}])
    block = af_inside(iteration, writer)
    flow = create(api, agentflow([af_start(), iteration, *block, af_reply(REPLY, rich(mention(IT)))],
                                 [(START, IT), (IT, REPLY)]))
    events = stream(api, flow, "Stream", chatId=f"sse-it-{marker}")
    names = [e for e, _ in events]
    assert events[0] == ("agentFlowEvent", "INPROGRESS")
    assert names[-4:] == ["agentFlowEvent", "usageMetadata", "metadata", "end"] and events[-4][1] == "FINISHED"
    reply_starts = next(k for k, (e, d) in enumerate(events)
                        if e == "nextAgentFlow" and d == {"nodeId": REPLY, "nodeLabel": "Direct Reply",
                                                          "status": "INPROGRESS"})
    assert "token" not in names[:reply_starts], names
    tokens = "".join(d for e, d in events if e == "token")
    assert tokens == f"Echo: apple {marker}\nEcho: banana {marker}"
    executed_data = [d for e, d in events if e == "agentFlowExecutedData"][-1]
    assert [i["nodeId"] for i in executed_data] == [START, LLM, LLM, IT, REPLY]


@pytest.mark.parametrize("items", ['{"a": 1}', "apple, banana", '"apple"'])
def test_an_iteration_input_that_is_not_a_json_array_fails(api, fake, items):
    iteration = af_iteration(IT, items)
    block = af_inside(iteration, af_reply("directReplyAgentflow_1", "Item {{ $iteration }}"))
    flow = create(api, agentflow([af_start(), iteration, *block, af_reply(REPLY, "never")],
                                 [(START, IT), (IT, REPLY)]))
    assert IT in assert_error(predict(api, flow, "hi"), 500)["message"]


def test_an_iteration_of_more_than_1000_items_fails(api):
    iteration = af_iteration(IT, json.dumps(list(range(1001))))
    block = af_inside(iteration, af_reply("directReplyAgentflow_1", "Item {{ $iteration }}"))
    flow = create(api, agentflow([af_start(), iteration, *block], [(START, IT)]))
    message = assert_error(predict(api, flow, "hi"), 500)["message"]
    assert IT in message and "1000" in message


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """A server with small agentflow limits: 6 node runs, 2 iteration items, flows
    one deep, 2 s a run."""
    w = Weir(tmp_path_factory.mktemp("weir-limits"), "sqlite")
    w.env.update(AGENTFLOW_MAX_NODE_RUNS="6", AGENTFLOW_MAX_ITERATION_ITEMS="2", AGENTFLOW_MAX_FLOW_DEPTH="1",
                 AGENTFLOW_TIMEOUT_SECS="2")
    w.start()
    yield Api(w.url, w.create_key())
    w.cleanup()


def test_the_limits_are_settings(limited, fake):
    api = limited
    # Node runs: a loop of 5 passes needs 11.
    loop = af_loop("loopAgentflow_0", LLM, "Writer", max_count=5)
    body = ask(api, create(api, chain(af_start(), llm(fake, label="Writer"), loop)), "Write")
    assert body["text"] == ("The agentflow stopped after 6 node runs, the most one run may take; "
                            "check its loops.")
    assert api.get(f"/executions/{body['executionId']}").json()["state"] == "TERMINATED"
    # Iteration items.
    iteration = af_iteration(IT, json.dumps([1, 2, 3]))
    block = af_inside(iteration, af_reply("directReplyAgentflow_1", "Item {{ $iteration }}"))
    flow = create(api, agentflow([af_start(), iteration, *block], [(START, IT)]))
    assert "more than the 2 one iteration may run" in assert_error(predict(api, flow, "hi"), 500)["message"]
    # Depth: a flow may run a flow, which may not run another.
    leaf = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    middle = create(api, chain(af_start(), af_execute_flow("executeFlowAgentflow_0", leaf, rich(mention("question")))))
    assert ask(api, middle, "hi")["text"] == "Echo: hi"
    top = create(api, chain(af_start(), af_execute_flow("executeFlowAgentflow_0", middle, rich(mention("question")))))
    assert "at most 1 deep" in assert_error(predict(api, top, "hi"), 500)["message"]
    # Time: a model that takes 20 s is dropped after 2 s; the run says so.
    started = time.monotonic()
    body = ask(api, create(api, chain(af_start(), llm(fake))), "take your time SLOW")
    assert time.monotonic() - started < 10
    assert body["text"] == "The agentflow stopped after running for 2 s, the longest one run may take."
    assert api.get(f"/executions/{body['executionId']}").json()["state"] == "TIMEOUT"


# ------------------------------------------------------------------ tool node

def test_a_tool_node_runs_the_calculator(api, fake):
    tool = af_tool("toolAgentflow_0", "calculator", {"input": rich(mention("question"))})
    flow = create(api, chain(af_start(), tool))
    calls = fake.count(CHAT)
    body = ask(api, flow, "6 * 7")
    assert body["text"] == "42" and output(body, "toolAgentflow_0")["content"] == "42"
    assert fake.count(CHAT) == calls


def test_a_tool_node_tells_the_time(api):
    body = ask(api, create(api, chain(af_start(), af_tool("toolAgentflow_0", "currentDateTime"))), "now?")
    iso_now(body["text"])


def test_a_tool_node_runs_a_stored_python_tool(py_api):
    tool = {"name": "greet", "description": "Greets someone by name",
            "schema": [{"property": "name", "type": "string", "description": "Who", "required": True}],
            "code": "def main(name):\n    return f'hello {name}'\n", "requirements": []}
    r = py_api.post("/tools", json=tool)
    assert r.status_code == 201, r.text
    node = af_tool("toolAgentflow_0", "customTool", {"name": "{{ question }}"}, config={"selectedTool": r.json()["id"]})
    body = ask(py_api, create(py_api, chain(af_start(), node)), "Ada")
    assert body["text"] == "hello Ada" and output(body, "toolAgentflow_0")["content"] == "hello Ada"


def test_tool_nodes_run_the_request_tools(client, site):
    get = af_tool("toolAgentflow_0", "requestsGet", {"url": f"{site.url}/fetched"})
    send = af_tool("toolAgentflow_1", "requestsPost", {"url": f"{site.url}/sent", "body": "{{ question }}"})
    body = ask(client, create(client, chain(af_start(), get, send)), "a=1")
    assert '{"n": 3}' in output(body, "toolAgentflow_0")["content"]
    assert "posted: a=1" in body["text"]
    assert [h[:2] for h in site.hits[-2:]] == [("GET", "/fetched"), ("POST", "/sent")]


# ------------------------------------------------------------------ agent node

def agent_flow(fake):
    agent = af_agent("agentAgentflow_0", af_openai(fake.url, field="agentModel"),
                     tools=[af_tool_row("calculator"), af_tool_row("currentDateTime")], messages=system("You compute."))
    return chain(af_start(), agent)


def test_an_agent_node_uses_tools(api, fake):
    flow = create(api, agent_flow(fake))
    marker = nonce()
    body = ask(api, flow, f'Multiply {marker} CALL calculator {{"input": "6 * 7"}}')
    assert body["text"] == "Done: 42"
    used = [("calculator", {"input": "6 * 7"}, "42")]
    assert tools_used(body["usedTools"]) == used
    assert tools_used(output(body, "agentAgentflow_0")["usedTools"]) == used
    first, follow = fake.bodies(CHAT, marker)
    assert sorted(t["function"]["name"] for t in first["tools"]) == ["calculator", "current_date_time"]
    assert said(first)[0] == ("system", "You compute.")
    assert [m["content"] for m in follow["messages"] if m["role"] == "tool"] == ["42"]


def test_an_agent_node_converts_its_answer_to_structured_output(api, fake):
    """agentStructuredOutput: after its tool loop the answer is converted (one more
    call, forced to the schema); the keys join the output, the content is the JSON
    in a fenced block, state reads `{{ output.<key> }}`, and only that JSON streams."""
    rows = [{"key": "city", "type": "string", "description": "The city"},
            {"key": "temp", "type": "number", "description": "Temperature"}]
    agent = af_agent("agentAgentflow_0", af_openai(fake.url, field="agentModel"), tools=[af_tool_row("calculator")],
                     agentStructuredOutput=rows,
                     agentUpdateState=[{"key": "where", "value": rich(mention("output.city"))}])
    reply = af_reply(REPLY, rich(f"{mention('agentAgentflow_0')} in {mention('$flow.state.where')}"))
    flow = create(api, agentflow([af_start(state=[{"key": "where", "value": ""}]), agent, reply],
                                 [(START, "agentAgentflow_0"), ("agentAgentflow_0", REPLY)]))
    marker = nonce()
    weather = {"city": "Oslo", "temp": 3}
    body = ask(api, flow, f"Weather {marker} STRUCT {json.dumps(weather)}")
    fenced = "```json\n" + json.dumps(weather, indent=2) + "\n```"
    done = output(body, "agentAgentflow_0")
    assert (done["city"], done["temp"], done["content"]) == ("Oslo", 3, fenced)
    assert body["text"] == f"{fenced} in Oslo"
    convert = fake.bodies(CHAT, f"Convert the following response to the structured output format: Echo: Weather {marker}")
    assert len(convert) == 1 and convert[0]["tool_choice"]["function"]["name"] == "structured_output"

    last = create(api, chain(af_start(), agent))
    events = stream(api, last, f"Weather {nonce()} STRUCT {json.dumps(weather)}")
    assert "".join(d for e, d in events if e == "token") == fenced


# ------------------------------------------------------------------ HTTP node

def test_an_http_node_gets_json(client, site):
    http = af_http("httpAgentflow_0", rich(f"{site.url}/data"), headers=[{"key": "X-Test", "value": "yes"}],
                   queryParams=[{"key": "q", "value": rich(mention("question"))}], responseType="json")
    reply = af_reply(REPLY, "Got {{ httpAgentflow_0 }} n={{ httpAgentflow_0.output.http.data.n }}")
    body = ask(client, create(client, chain(af_start(), http, reply)), "hello")
    assert body["text"] == 'Got {"n":3} n=3'
    got = output(body, "httpAgentflow_0")["http"]
    assert (got["data"], got["status"], got["statusText"]) == ({"n": 3}, 200, "OK")
    assert {k.lower(): v for k, v in got["headers"].items()}["content-type"].startswith("application/json")
    method, path, headers, _ = site.hits[-1]
    assert (method, path, headers.get("x-test")) == ("GET", "/data?q=hello", "yes")


def test_an_http_node_answering_last_answers_a_space(client, site):
    body = ask(client, create(client, chain(af_start(), af_http("httpAgentflow_0", f"{site.url}/last"))), "hi")
    assert body["text"] == " "
    assert output(body, "httpAgentflow_0")["http"]["data"] == {"n": 3}


@pytest.mark.parametrize("body_type, body, sent, content_type", [
    ("json", '{"name": "{{ question }}"}', None, "application/json"),
    ("raw", "plain {{ question }}", "plain Ada", None),
    ("xWwwFormUrlencoded", [{"key": "a", "value": "1"}, {"key": "b", "value": "{{ question }}"}], "a=1&b=Ada",
     "application/x-www-form-urlencoded"),
])
def test_an_http_node_posts_a_body(client, site, body_type, body, sent, content_type):
    http = af_http("httpAgentflow_0", f"{site.url}/submit", method="POST", bodyType=body_type, body=body,
                   responseType="text")
    result = ask(client, create(client, chain(af_start(), http)), "Ada")
    method, path, headers, data = site.hits[-1]
    assert (method, path) == ("POST", "/submit")
    if sent is None:
        assert json.loads(data) == {"name": "Ada"}
    else:
        assert data == sent
    if content_type:
        assert headers["content-type"].startswith(content_type)
    assert output(result, "httpAgentflow_0")["http"]["data"] == f"posted: {data}"


@pytest.mark.parametrize("url", ["{inner}/secret", "http://169.254.169.254/latest/meta-data/"])
def test_an_http_node_is_refused_private_addresses(api, inner, url):
    hits = len(inner.hits)
    flow = create(api, chain(af_start(), af_http("httpAgentflow_0", url.format(inner=inner.url))))
    message = assert_error(predict(api, flow, "hi"), 500)["message"]
    assert "httpAgentflow_0" in message and "refused" in message
    assert len(inner.hits) == hits


# ------------------------------------------------------------------ execute flow

def test_an_execute_flow_node_runs_another_chatflow_of_the_workspace(api, fake):
    """The called chatflow answers the resolved input on the caller's chat (its
    memory follows that conversation), with the override config it allows; its
    answer is the node's content, a message of the run and a state write."""
    called = create_flow(api, flows.conversation(flows.openai_model(fake.url), memory=flows.buffer_memory()))
    node = af_execute_flow("executeFlowAgentflow_0", called, rich(f"Translate: {mention('question')}"),
                           executeFlowOverrideConfig='{"temperature": 0.2}',
                           executeFlowUpdateState=[{"key": "said", "value": rich(mention("output"))}])
    after = af_reply(REPLY, rich(f"{mention('executeFlowAgentflow_0')} / {mention('$flow.state.said')}"))
    flow = create(api, chain(af_start(state=[{"key": "said", "value": ""}]), node, after))
    chat = f"chat-{nonce()}"
    body = ask(api, flow, "bonjour", chatId=chat)
    assert body["text"] == "Echo: Translate: bonjour / Echo: Translate: bonjour"
    assert executed(body) == [START, "executeFlowAgentflow_0", REPLY]
    done = item(body, "executeFlowAgentflow_0")
    assert done["data"]["input"]["messages"] == [{"role": "user", "content": "Translate: bonjour"}]
    assert done["data"]["output"]["content"] == "Echo: Translate: bonjour"
    assert fake.last(CHAT)["temperature"] == 0.2
    # The called flow kept the exchange on the caller's chat.
    stored = api.get(f"/chatmessage/{called}", params={"chatId": chat}).json()
    assert [m["content"] for m in stored] == ["Translate: bonjour", "Echo: Translate: bonjour"]


def test_an_execute_flow_node_fails_clearly(api, fake, server):
    plain = create_flow(api, flows.conversation(flows.openai_model(fake.url)))

    def failure(flow_id, **inputs):
        node = af_execute_flow("executeFlowAgentflow_0", flow_id, rich(mention("question")), **inputs)
        flow = create(api, chain(af_start(), node))
        return assert_error(predict(api, flow, "hi"), 500)["message"]

    # A chatflow of another workspace is as good as none.
    other = Api(server.url, server.create_key(workspace=f"ws-{nonce()}"))
    theirs = create_flow(other, flows.conversation(flows.openai_model(fake.url)))
    assert f"no chatflow {theirs} in this workspace" in failure(theirs)
    # Overrides the called flow does not allow are refused as a client's would be.
    assert "basePath" in failure(plain, executeFlowOverrideConfig='{"basePath": "http://127.0.0.1:9/v1"}')
    assert "not a JSON object" in failure(plain, executeFlowOverrideConfig="[1]")
    # Not a chatflow id at all: the flow is invalid.
    node = af_execute_flow("executeFlowAgentflow_0", "not-an-id", rich(mention("question")))
    flow = create(api, chain(af_start(), node))
    assert "executeFlowSelectedFlow" in assert_error(predict(api, flow, "hi"), 400)["message"]


def test_flows_calling_each_other_stop_at_the_depth_limit(api, fake):
    """A calls B, B calls A: the run ends with a 500 naming the limit, not a hang."""
    a = create(api, chain(af_start(), af_reply(REPLY, "placeholder")))
    b = create(api, chain(af_start(), af_execute_flow("executeFlowAgentflow_0", a, rich(mention("question")))))
    flow_a = chain(af_start(), af_execute_flow("executeFlowAgentflow_0", b, rich(mention("question"))))
    r = api.put(f"/chatflows/{a}", json={"flowData": flow_a})
    assert r.status_code == 200, r.text
    message = assert_error(predict(api, a, "ping"), 500)["message"]
    assert "at most 5 deep" in message, message
    # A flow naming itself fails at once.
    itself = create(api, chain(af_start(), af_reply(REPLY, "x")))
    r = api.put(f"/chatflows/{itself}", json={"flowData": chain(
        af_start(), af_execute_flow("executeFlowAgentflow_0", itself, rich(mention("question"))))})
    assert r.status_code == 200, r.text
    assert "flow it is part of" in assert_error(predict(api, itself, "ping"), 500)["message"]


# ------------------------------------------------------------------ nodes weir does not run

def renamed(node, name):
    """`node` as a node of type `name` (with no inputs)."""
    node["data"].update(name=name, inputs={})
    return node


def test_node_types_are_checked_against_the_one_registry(api):
    # A type weir does not have, in an agentflow.
    unknown = renamed(af_reply("mysteryAgentflow_0", "x"), "mysteryAgentflow")
    flow = create(api, chain(af_start(), unknown))
    message = assert_error(predict(api, flow, "hi"), 400)["message"]
    assert "'mysteryAgentflow'" in message and "does not implement" in message
    # A chatflow node in an agentflow.
    flow = create(api, chain(af_start(), renamed(af_reply("calculator_0", "x"), "calculator")))
    message = assert_error(predict(api, flow, "hi"), 400)["message"]
    assert "calculator_0" in message and "not an agentflow node" in message
    # Agentflow nodes with no start node are not taken for a chatflow.
    flow = create(api, chain(af_reply(REPLY, "x")))
    message = assert_error(predict(api, flow, "hi"), 400)["message"]
    assert REPLY in message and "startAgentflow" in message


# ------------------------------------------------------------------ document stores

HANDBOOK = "The canteen serves soup on Mondays.\n\nThe gym opens at six in the morning."


def document_store(api, fake):
    """A document store as weir has them: a chatflow holding one vector store (fake
    bag-of-words embeddings), filled with the upsert API."""
    splitter = flows.character_splitter(40, 0, "\n\n")
    docs = flows.plain_text(HANDBOOK, splitter)
    embeddings = flows.openai_embeddings(fake.url)
    store = flows.memory_vector_store([docs], embeddings, topK=1)
    model = flows.openai_model(fake.url)
    chain = flows.conversational_retrieval_qa_chain(model, store)
    store_id = create_flow(api, flows.rag(splitter, docs, embeddings, store, model, chain))
    r = api.post(f"/vector/upsert/{store_id}", json={})
    assert r.status_code == 200 and r.json()["numAdded"] == 2, r.text
    return store_id


def test_an_agent_searches_its_document_stores(api, fake):
    store = document_store(api, fake)
    agent = af_agent("agentAgentflow_0", af_openai(fake.url, field="agentModel"), agentKnowledgeDocumentStores=[
        {"documentStore": f"{store}:Staff handbook", "docStoreDescription": "What staff need to know",
         "returnSourceDocuments": True}])
    flow = create(api, chain(af_start(), agent))
    body = ask(api, flow, f'{nonce()} CALL Staff_handbook {{"input": "When does the gym open?"}}')
    assert body["text"] == "Done: The gym opens at six in the morning."
    assert [d["pageContent"] for d in body["sourceDocuments"]] == ["The gym opens at six in the morning."]
    [(tool, _, _)] = tools_used(body["usedTools"])
    assert tool == "Staff_handbook"
    offered = [b for b in fake.bodies(CHAT, "CALL Staff_handbook") if b.get("tools")][0]["tools"]
    assert offered[0]["function"]["description"] == "What staff need to know"


def test_a_retriever_node_searches_document_stores(api, fake):
    store = document_store(api, fake)
    node = af_retriever("retrieverAgentflow_0", [f"{store}:handbook"], rich(mention("question")))
    reply = af_reply(REPLY, rich("Found: " + mention("retrieverAgentflow_0")))
    flow = create(api, chain(af_start(), node, reply))
    body = ask(api, flow, "Which day has soup in the canteen?")
    assert body["text"] == "Found: The canteen serves soup on Mondays."
    assert output(body, "retrieverAgentflow_0")["content"] == "The canteen serves soup on Mondays."
    with_metadata = af_retriever("retrieverAgentflow_0", [f"{store}:handbook"], "gym")
    with_metadata["data"]["inputs"]["outputFormat"] = "textWithMetadata"
    flow = create(api, chain(af_start(), with_metadata))
    [doc] = json.loads(ask(api, flow, "x")["text"])
    assert doc["pageContent"] == "The gym opens at six in the morning." and "loc" in doc["metadata"]


def test_document_stores_are_the_workspaces_own(api, fake, server):
    other = Api(server.url, server.create_key(workspace=f"ws-{nonce()}"))
    theirs = document_store(other, fake)
    node = af_retriever("retrieverAgentflow_0", [f"{theirs}:theirs"], rich(mention("question")))
    message = assert_error(predict(api, create(api, chain(af_start(), node)), "gym"), 500)["message"]
    assert f"no document store {theirs} in this workspace" in message
    node = af_retriever("retrieverAgentflow_0", ["not-a-store:x"], rich(mention("question")))
    message = assert_error(predict(api, create(api, chain(af_start(), node)), "gym"), 400)["message"]
    assert "retrieverAgentflow_0" in message and "chatflow holding a vector store" in message
    agent = af_agent("agentAgentflow_0", af_openai(fake.url, field="agentModel"), agentKnowledgeVSEmbeddings=[
        {"vectorStore": "pinecone", "embeddingModel": "openAIEmbeddings", "knowledgeName": "k"}])
    message = assert_error(predict(api, create(api, chain(af_start(), agent)), "hi"), 400)["message"]
    assert "agentKnowledgeVSEmbeddings" in message


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("key, model, question", [
    ("sk-wrong", "gpt-test", "hello"),         # the provider answers 401
    (GOOD_KEY, "missing-model", "hello"),      # the provider answers 404
    (GOOD_KEY, "server-error", "hello"),       # the provider answers 500
    (GOOD_KEY, "gpt-test", "FAIL_MIDWAY"),     # the provider fails in the middle of its answer
])
def test_a_failing_node_is_a_500_naming_it(api, fake, key, model, question):
    node = af_llm(LLM, af_openai(fake.url, key=key, model=model), system("Hi."))
    flow = create(api, chain(af_start(), node, af_reply(REPLY, "never")))
    assert LLM in assert_error(predict(api, flow, question), 500)["message"]


def test_a_failing_node_in_a_stream(api, fake):
    node = af_llm(LLM, af_openai(fake.url, key="sk-wrong"), system("Hi."))
    events = stream(api, create(api, chain(af_start(), node)), "hello")
    names = [e for e, _ in events]
    assert names[0] == "agentFlowEvent" and events[0][1] == "INPROGRESS"
    assert names[-5:] == ["nextAgentFlow", "agentFlowExecutedData", "agentFlowEvent", "error", "end"], names
    failed, done, status, error, end = [d for _, d in events[-5:]]
    assert (failed["nodeId"], failed["nodeLabel"], failed["status"]) == (LLM, "LLM", "ERROR")
    assert isinstance(failed["error"], str) and failed["error"]
    assert (done[-1]["nodeId"], done[-1]["status"]) == (LLM, "ERROR")
    assert status == "ERROR" and LLM in error and end == "[DONE]"
    assert "token" not in names and "metadata" not in names and "start" not in names


# ------------------------------------------------------------------ SSE

def check_stream(events, question, chat, nodes):
    """The agentflow event sequence for `nodes` ((id, label) in execution order):
    tokens only inside the last node's INPROGRESS/FINISHED pair. Returns the text of
    the tokens and the events after agentFlowEvent FINISHED. An agent's calls
    (`calledTools`, announced as made) are left out."""
    events = [(e, d) for e, d in events if e != "calledTools"]
    names = [e for e, _ in events]
    assert "start" not in names
    assert events[0] == ("agentFlowEvent", "INPROGRESS"), events[0]
    position, tokens = 1, []
    for k, (node_id, label) in enumerate(nodes):
        assert events[position] == ("nextAgentFlow", {"nodeId": node_id, "nodeLabel": label, "status": "INPROGRESS"})
        position += 1
        while events[position][0] == "token":
            assert k == len(nodes) - 1, f"{node_id} is not the answering node but streamed a token"
            tokens.append(events[position][1])
            position += 1
        assert events[position] == ("nextAgentFlow", {"nodeId": node_id, "nodeLabel": label, "status": "FINISHED"})
        name, data = events[position + 1]
        assert name == "agentFlowExecutedData"
        assert [(i["nodeId"], i["status"]) for i in data] == [(n, "FINISHED") for n, _ in nodes[:k + 1]]
        position += 2
    assert tokens, "the answering node streamed no token"
    assert events[position] == ("agentFlowEvent", "FINISHED")
    after = events[position + 1:]
    assert [e for e, _ in after][-2:] == ["metadata", "end"] and after[-1][1] == "[DONE]"
    meta = after[-2][1]
    assert (meta["chatId"], meta["sessionId"], meta["question"]) == (chat, chat, question)
    assert meta["chatMessageId"] and meta["executionId"]
    # The models' tokens come just before the metadata.
    extras = after[:-2]
    if extras and extras[-1][0] == "usageMetadata":
        assert extras[-1][1]["total_tokens"] > 0, extras[-1]
        extras = extras[:-1]
    return "".join(tokens), extras


def test_a_streamed_llm_answer(api, fake):
    flow = create(api, chain(af_start(), llm(fake)))
    question = f"Stream it please {nonce()}"
    text = ask(api, flow, question)["text"]
    tokens, extras = check_stream(stream(api, flow, question, chatId="sse-llm"), question, "sse-llm",
                                  [(START, "Start"), (LLM, "LLM")])
    assert tokens == text == f"Echo: {question}" and extras == []


def test_only_the_answering_node_streams(api, fake):
    flow = create(api, chain(af_start(), llm(fake), af_reply(REPLY, rich("Answer: " + mention(LLM)))))
    question = f"Stream the reply {nonce()}"
    text = ask(api, flow, question)["text"]
    tokens, extras = check_stream(stream(api, flow, question, chatId="sse-reply"), question, "sse-reply",
                                  [(START, "Start"), (LLM, "LLM"), (REPLY, "Direct Reply")])
    assert tokens == text == f"Answer: Echo: {question}" and extras == []


def test_a_streamed_agent_sends_its_used_tools(api, fake):
    flow = create(api, agent_flow(fake))
    question = f'{nonce()} CALL calculator {{"input": "6 * 7"}}'
    text = ask(api, flow, question)["text"]
    tokens, extras = check_stream(stream(api, flow, question, chatId="sse-agent"), question, "sse-agent",
                                  [(START, "Start"), ("agentAgentflow_0", "Agent")])
    assert tokens == text == "Done: 42"
    assert [e for e, _ in extras] == ["usedTools"]
    assert tools_used(extras[0][1]) == [("calculator", {"input": "6 * 7"}, "42")]


# ------------------------------------------------------------------ executions

def test_executions_list_read_and_delete(server):
    workspace = f"ws-{nonce()}"
    api = Api(server.url, server.create_key(workspace=workspace))
    reader = api.with_key(server.create_key("executions:read", workspace=workspace))
    flow = create(api, chain(af_start(), af_reply(REPLY, "Hi {{ question }}")))
    other = create(api, chain(af_start(), af_reply(REPLY, "Other")))
    first = ask(api, flow, "one", chatId="exec-1")
    time.sleep(0.05)
    second = ask(api, flow, "two", chatId="exec-2")
    ask(api, other, "three")

    r = reader.get("/executions", params={"agentflowId": flow})
    assert r.status_code == 200, r.text
    listing = r.json()
    assert listing["total"] == 2
    assert [e["id"] for e in listing["data"]] == [second["executionId"], first["executionId"]]
    assert [(e["agentflowId"], e["sessionId"], e["state"]) for e in listing["data"]] == [
        (flow, "exec-2", "FINISHED"), (flow, "exec-1", "FINISHED")]
    assert_error(api.with_key(server.create_key("chatflows:read", workspace=workspace)).get(
        "/executions", params={"agentflowId": flow}), 403)

    one = reader.get(f"/executions/{first['executionId']}")
    assert one.status_code == 200, one.text
    one = one.json()
    assert (one["id"], one["agentflowId"], one["sessionId"], one["state"]) == (
        first["executionId"], flow, "exec-1", "FINISHED")
    data = json.loads(one["executionData"])
    assert [(i["nodeId"], i["status"]) for i in data] == [(START, "FINISHED"), (REPLY, "FINISHED")]
    assert data[-1]["data"]["output"]["content"] == "Hi one" == first["text"]
    stranger = api.with_key(server.create_key(workspace=f"{workspace}-stranger"))
    assert_error(stranger.get(f"/executions/{first['executionId']}"), 404)

    r = api.delete(f"/executions/{first['executionId']}")
    assert r.status_code == 200, r.text
    assert r.json() == {"success": True, "deletedCount": 1}
    assert_error(reader.get(f"/executions/{first['executionId']}"), 404)
    listing = reader.get("/executions", params={"agentflowId": flow}).json()
    assert listing["total"] == 1 and [e["id"] for e in listing["data"]] == [second["executionId"]]


def test_a_run_whose_messages_cannot_be_stored_still_records_its_execution(server, fake):
    """PostgreSQL refuses a NUL character in text: the turn cannot be stored, the
    answer says so (500), and the run's execution is recorded all the same (its
    items hold the character escaped). SQLite stores the turn."""
    workspace = f"ws-{nonce()}"
    api = Api(server.url, server.create_key(workspace=workspace))
    flow = create(api, chain(af_start(), llm(fake), af_reply(REPLY, "{{ llmAgentflow_0 }}")))
    r = post(api, flow, {"question": "nul \u0000 here", "chatId": "nul"})
    records = api.get("/executions", params={"sessionId": "nul"}).json()["data"]
    assert [e["state"] for e in records] == ["FINISHED"]
    items = json.loads(api.get(f"/executions/{records[0]['id']}").json()["executionData"])
    assert items[-1]["data"]["output"]["content"] == "Echo: nul \u0000 here"
    stored = api.get(f"/chatmessage/{flow}", params={"chatId": "nul"}).json()
    if server.backend == "postgres":
        assert_error(r, 500, "could not be stored")
        assert stored == []
    else:
        assert r.status_code == 200, r.text
        assert r.json()["executionId"] == records[0]["id"]
        assert [m["content"] for m in stored] == ["nul \u0000 here", "Echo: nul \u0000 here"]


def test_a_long_run_is_listed_in_progress_until_it_ends(server, fake):
    """A run still going after a moment is listed INPROGRESS (no items yet); its
    end writes the same record. A short run's record is written once, at its end,
    with the time the run started."""
    workspace = f"ws-{nonce()}"
    api = Api(server.url, server.create_key(workspace=workspace))
    flow = create(api, chain(af_start(), llm(fake), af_reply(REPLY, "{{ llmAgentflow_0 }}")))
    before = datetime.datetime.now(datetime.timezone.utc)
    quick = ask(api, flow, "quick", chatId="quick")
    answers = {}
    worker = threading.Thread(target=lambda: answers.update(
        slow=ask(api, flow, "take your time SLOWISH", chatId="slow")))
    worker.start()
    try:
        running = wait_for(lambda: api.get("/executions", params={"sessionId": "slow"}).json()["data"],
                           timeout=5, what="the slow run listed")
        assert [(e["state"], e["executionData"]) for e in running] == [("INPROGRESS", "[]")]
    finally:
        worker.join(timeout=30)
    slow = answers["slow"]
    assert slow["text"].split() == ["tick"] * 10 and slow["executionId"] == running[0]["id"]
    ended = api.get(f"/executions/{slow['executionId']}").json()
    assert ended["state"] == "FINISHED" and ended["createdDate"] == running[0]["createdDate"]
    assert ended["updatedDate"] > ended["createdDate"]
    assert [i["nodeId"] for i in json.loads(ended["executionData"])] == [START, LLM, REPLY]

    record = api.get(f"/executions/{quick['executionId']}").json()
    assert record["state"] == "FINISHED" and record["sessionId"] == "quick"
    started = datetime.datetime.fromisoformat(record["createdDate"].replace("Z", "+00:00"))
    assert before - datetime.timedelta(seconds=1) <= started
    assert record["createdDate"] <= record["updatedDate"]


# ------------------------------------------------------------------ human input

HUMAN, PUBLISHER = "humanInputAgentflow_0", "llmAgentflow_1"
PUBLISHED, REJECTED = "directReplyAgentflow_0", "directReplyAgentflow_1"
ASKED = "Publish the draft?"
ACTION_MAPPING = {"approve": "Proceed", "reject": "Reject"}
ACTION_ELEMENTS = [{"type": "agentflowv2-approve-button", "label": "Proceed"},
                   {"type": "agentflowv2-reject-button", "label": "Reject"}]


def review_flow(api, fake, marker, description=ASKED, **human):
    """Start → drafter LLM → human input: proceed → publisher LLM (with memory) →
    direct reply quoting both LLMs; reject → direct reply quoting the human node."""
    drafter = llm(fake, text=f"DRAFTER {marker}")
    publisher = llm(fake, PUBLISHER, text=f"PUBLISHER {marker}", label="Publisher", llmEnableMemory=True)
    nodes = [af_start(), drafter, af_human_input(HUMAN, description, **human), publisher,
             af_reply(PUBLISHED, "Published: {{ llmAgentflow_0 }} | {{ llmAgentflow_1 }}"),
             af_reply(REJECTED, "Rejected: {{ humanInputAgentflow_0 }}", label="Rejected")]
    links = [(START, LLM), (LLM, HUMAN), (HUMAN, PUBLISHER, 0), (PUBLISHER, PUBLISHED), (HUMAN, REJECTED, 1)]
    return create(api, agentflow(nodes, links))


def model_calls(fake, marker):
    """(drafter calls, publisher calls) of a review_flow made with `marker`."""
    return len(fake.bodies(CHAT, f"DRAFTER {marker}")), len(fake.bodies(CHAT, f"PUBLISHER {marker}"))


def resume(api, flow, chat, kind="proceed", **fields):
    return post(api, flow, {"chatId": chat, "humanInput": {"type": kind, **fields}})


def execution(api, execution_id):
    r = api.get(f"/executions/{execution_id}")
    assert r.status_code == 200, r.text
    one = r.json()
    return one["state"], [(i["nodeId"], i["status"]) for i in json.loads(one["executionData"])]


def check_action(action, node_id=HUMAN, label="Human Input"):
    uuid.UUID(action["id"])
    assert action["mapping"] == ACTION_MAPPING and action["elements"] == ACTION_ELEMENTS
    assert (action["data"]["nodeId"], action["data"]["nodeLabel"]) == (node_id, label)
    assert isinstance(action["data"]["input"], dict)


def pause(api, fake, marker, chat, **flow):
    """A review_flow asked a question: paused at the human node."""
    flow_id = review_flow(api, fake, marker, **flow)
    question = f"Write about cats {marker}"
    body = ask(api, flow_id, question, chatId=chat)
    assert body["text"] == f"Echo: {question}\n\n{ASKED}", body
    return flow_id, question, body


def test_a_human_input_node_pauses_the_run(api, fake):
    marker = nonce()
    flow, question, body = pause(api, fake, marker, f"pause-{marker}")
    check_action(body["action"])
    uuid.UUID(body["executionId"])
    assert [(i["nodeId"], i["status"]) for i in body["agentFlowExecutedData"]] == [
        (START, "FINISHED"), (LLM, "FINISHED"), (HUMAN, "STOPPED")]
    assert output(body, HUMAN)["content"] == body["text"]
    assert model_calls(fake, marker) == (1, 0)
    state, items = execution(api, body["executionId"])
    assert state == "STOPPED" and items[-1] == (HUMAN, "STOPPED")


@pytest.mark.parametrize("description, shown", [
    ("", "Do you want to proceed?"),
    (rich("Shall I answer " + mention("question") + "?"), "Shall I answer Ada?"),
])
def test_a_fixed_description(api, fake, description, shown):
    """Nothing was said before the node (a new session): no message is prefixed."""
    flow = create(api, chain(af_start(), af_human_input(HUMAN, description), af_reply(REPLY, "never")))
    calls = fake.count(CHAT)
    body = ask(api, flow, "Ada", chatId=f"fixed-{nonce()}")
    assert body["text"] == shown
    check_action(body["action"])
    assert executed(body) == [START, HUMAN] and item(body, HUMAN)["status"] == "STOPPED"
    assert fake.count(CHAT) == calls


def test_a_dynamic_description_is_written_by_the_model(api, fake):
    marker = nonce()
    prompt = f"Summarise the conversation for approval {marker}"
    human = af_human_input(HUMAN, model=af_openai(fake.url, field="humanInputModel"), prompt=rich(prompt))
    flow = create(api, chain(af_start(), llm(fake), human, af_reply(REPLY, "never")))
    question = f"Plan a trip {marker}"
    body = ask(api, flow, question, chatId=f"dynamic-{marker}")
    assert body["text"] == f"Echo: {prompt}"
    assert item(body, HUMAN)["status"] == "STOPPED"
    written = [b for b in fake.bodies(CHAT, marker) if prompt in json.dumps(b)]
    assert len(written) == 1
    assert said(written[0])[-1] == ("user", prompt)
    assert question in [content for _, content in said(written[0])]


def test_a_paused_stream(api, fake):
    marker = nonce()
    chat = f"sse-pause-{marker}"
    flow = review_flow(api, fake, marker)
    question = f"Write about dogs {marker}"
    events = stream(api, flow, question, chatId=chat)
    names = [e for e, _ in events]
    assert events[0] == ("agentFlowEvent", "INPROGRESS")
    stopped = events.index(("nextAgentFlow", {"nodeId": HUMAN, "nodeLabel": "Human Input", "status": "STOPPED"}))
    assert names[stopped:] == ["nextAgentFlow", "agentFlowExecutedData", "agentFlowEvent", "action",
                               "usageMetadata", "metadata", "end"], names
    _, done, status, action, _usage, meta, end = [d for _, d in events[stopped:]]
    assert [(i["nodeId"], i["status"]) for i in done] == [(START, "FINISHED"), (LLM, "FINISHED"), (HUMAN, "STOPPED")]
    assert status == "STOPPED" and end == "[DONE]"
    check_action(action)
    assert meta["action"] == action and meta["chatId"] == chat
    uuid.UUID(meta["executionId"])
    # The description, if streamed, is the only text: the drafter is not a last node.
    assert "".join(d for e, d in events if e == "token") in ("", f"Echo: {question}\n\n{ASKED}")
    assert model_calls(fake, marker) == (1, 0)
    assert execution(api, meta["executionId"])[0] == "STOPPED"


def test_proceeding_resumes_after_the_human_node(api, fake):
    marker = nonce()
    chat = f"proceed-{marker}"
    flow, question, paused = pause(api, fake, marker, chat)
    feedback = f"Looks good {marker}"
    r = resume(api, flow, chat, startNodeId=HUMAN, feedback=feedback)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["executionId"] == paused["executionId"]
    assert body["text"] == f"Published: Echo: {question} | Echo: {feedback}"
    assert model_calls(fake, marker) == (1, 1)
    # The earlier items, the human node's (its STOPPED item replaced, as Flowise does) and the new ones.
    resumed = [(START, "FINISHED"), (LLM, "FINISHED"), (HUMAN, "FINISHED"), (PUBLISHER, "FINISHED"),
               (PUBLISHED, "FINISHED")]
    assert [(i["nodeId"], i["status"]) for i in body["agentFlowExecutedData"]] == resumed
    assert output(body, HUMAN)["content"] == feedback
    # The feedback joined the conversation: the publisher (memory on) was told it last.
    [published] = fake.bodies(CHAT, f"PUBLISHER {marker}")
    assert said(published)[-1] == ("user", feedback)

    assert execution(api, paused["executionId"]) == ("FINISHED", resumed)


@pytest.mark.parametrize("feedback", [None, "Too long"])
def test_rejecting_follows_the_reject_output(api, fake, feedback):
    marker = nonce()
    chat = f"reject-{marker}"
    flow, _, paused = pause(api, fake, marker, chat)
    r = resume(api, flow, chat, "reject", **({"feedback": feedback} if feedback else {}))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["executionId"] == paused["executionId"]
    assert body["text"] == f"Rejected: {feedback or 'reject'}"
    assert executed(body)[-2:] == [HUMAN, REJECTED] and PUBLISHER not in executed(body)
    assert model_calls(fake, marker) == (1, 0)
    assert execution(api, paused["executionId"])[0] == "FINISHED"


@pytest.mark.parametrize("backend", backends())
def test_a_paused_run_survives_a_restart(make_weir, fake, backend):
    w = make_weir(backend)
    w.start()
    api = Api(w.url, w.create_key())
    marker = nonce()
    chat = f"restart-{marker}"
    flow, question, paused = pause(api, fake, marker, chat)
    w.stop()
    w.start()
    api = Api(w.url, api.key)
    assert execution(api, paused["executionId"])[0] == "STOPPED"
    r = resume(api, flow, chat, feedback="Ship it")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["executionId"] == paused["executionId"]
    assert body["text"] == f"Published: Echo: {question} | Echo: Ship it"
    assert model_calls(fake, marker) == (1, 1)
    assert execution(api, paused["executionId"])[0] == "FINISHED"


def test_human_input_with_nothing_waiting_is_refused(api, fake):
    marker = nonce()
    flow = review_flow(api, fake, marker)
    assert "wait" in assert_error(resume(api, flow, f"nothing-{marker}"), 400)["message"]
    # A session whose last run finished has nothing waiting either.
    finished = create(api, chain(af_start(), af_reply(REPLY, "Done")))
    chat = f"finished-{marker}"
    ask(api, finished, "hi", chatId=chat)
    assert "FINISHED" in assert_error(resume(api, finished, chat), 400)["message"]
    assert model_calls(fake, marker) == (0, 0)


def test_a_wrong_human_input_is_refused_and_the_run_still_waits(api, fake):
    marker = nonce()
    chat = f"wrong-{marker}"
    flow, question, paused = pause(api, fake, marker, chat)
    assert "noSuchNode_0" in assert_error(resume(api, flow, chat, startNodeId="noSuchNode_0"), 400)["message"]
    assert "proceed" in assert_error(resume(api, flow, chat, "maybe"), 400)["message"]
    assert model_calls(fake, marker) == (1, 0)
    assert execution(api, paused["executionId"])[0] == "STOPPED"
    r = resume(api, flow, chat, feedback="fine")
    assert r.status_code == 200, r.text
    assert r.json()["text"] == f"Published: Echo: {question} | Echo: fine"


def test_a_run_is_resumed_once(api, fake):
    marker = nonce()
    chat = f"twice-{marker}"
    flow, _, paused = pause(api, fake, marker, chat)
    r = resume(api, flow, chat, "reject")
    assert r.status_code == 200, r.text
    assert "FINISHED" in assert_error(resume(api, flow, chat, "proceed"), 400)["message"]
    assert model_calls(fake, marker) == (1, 0)
    assert execution(api, paused["executionId"])[0] == "FINISHED"


# ------------------------------------------------------------------ cron trigger

def test_a_cron_trigger_runs_an_agentflow(make_weir, fake):
    """As test_missed_runs_are_recorded_not_replayed does: the server is stopped, the
    trigger's next time set to a few seconds ago, and on restart it fires at once."""
    w = make_weir("sqlite")
    w.start()
    key = w.create_key()
    api = Api(w.url, key)
    flow = create(api, chain(af_start(), llm(fake)))
    message = f"Good morning agentflow {nonce()}"
    r = api.post("/triggers", json={"name": "agentflow cron", "chatflowId": flow, "nodeId": START, "type": "cron",
                                    "cronExpression": "* * * * *", "triggerMessage": message})
    assert r.status_code == 201, r.text
    t = r.json()
    w.stop()
    with sqlite3.connect(w.data_dir / "weir.db") as db:
        db.execute("UPDATE triggers SET next_execution = ? WHERE id = ?", (int(time.time() * 1000) - 2000, t["id"]))
    w.start()
    api = Api(w.url, key)
    results = wait_for(lambda: [x for x in api.get(f"/triggers/{t['id']}/results").json() if x["status"] != "missed"],
                       30, "the agentflow firing")
    assert results[0]["status"] == "success", results[0]
    assert results[0]["input"] == message and results[0]["output"] == f"Echo: {message}"
    assert said(fake.bodies(CHAT, message)[0]) == [("system", "You are helpful."), ("user", message)]


# ------------------------------------------------------------------ webhook trigger

def webhook_start(api, flow_data, start_id):
    """A webhook trigger on the start node `start_id` of this agentflow (a unique
    id, so its node-id address is this trigger's too). Returns (flow id, trigger)."""
    flow = create(api, flow_data)
    r = api.post("/triggers", json={"name": "agentflow hook", "chatflowId": flow, "nodeId": start_id,
                                    "type": "webhook"})
    assert r.status_code == 201, r.text
    assert r.json()["webhookUrl"].endswith(f"/api/v1/triggers/webhook/{r.json()['id']}")
    return flow, r.json()


def test_a_webhook_body_reaches_an_agentflows_variables(api, fake):
    """`{{ $flow.body.<path> }}` reads the webhook's JSON body; the question is that
    body as compact JSON text."""
    start_id = f"startAgentflow_{uuid.uuid4().hex[:10]}"
    marker = nonce()
    node = llm(fake, text=f"Serve {{{{ $flow.body.customer }}}} about order {{{{ $flow.body.order.id }}}} {marker}")
    _, trigger = webhook_start(api, chain(af_start(start_id), node), start_id)
    r = post_hook(api, start_id, {"customer": "Ada", "order": {"id": 42}})
    assert r.status_code == 200, r.text
    question = '{"customer":"Ada","order":{"id":42}}'
    assert r.json()["text"] == f"Echo: {question}"
    [sent] = fake.bodies(CHAT, marker)
    assert said(sent) == [("system", f"Serve Ada about order 42 {marker}"), ("user", question)]
    [result] = api.get(f"/triggers/{trigger['id']}/results").json()
    assert result["status"] == "success", result
    assert result["input"] == question and result["output"] == r.json()["text"]


FORM_FIELDS = [{"type": "string", "label": "Name", "name": "name"},
               {"type": "string", "label": "Topic", "name": "topic"}]


def topic_form_flow(start_id=START):
    """A form start (name, topic) answered by a direct reply quoting both."""
    return chain(af_start(start_id, form=FORM_FIELDS, formTitle="Topic"),
                 af_reply(REPLY, "Hello {{ $form.name }} about {{ $form.topic }}"))


def test_a_webhook_body_fills_a_form_start(api, fake):
    start_id = f"startAgentflow_{uuid.uuid4().hex[:10]}"
    _, trigger = webhook_start(api, topic_form_flow(start_id), start_id)
    calls = fake.count(CHAT)
    r = post_hook(api, start_id, {"name": "Ada", "topic": "tea"})
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Hello Ada about tea"
    assert fake.count(CHAT) == calls
    [result] = api.get(f"/triggers/{trigger['id']}/results").json()
    assert result["status"] == "success" and result["output"] == "Hello Ada about tea", result


def test_a_form_turn_is_stored_as_its_fields(api):
    """The user message of a form turn is the form's fields, one `key: value` line each."""
    flow = create(api, topic_form_flow())
    chat = f"form-{nonce()}"
    r = post(api, flow, {"form": {"name": "Ada", "topic": "tea"}, "chatId": chat})
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Hello Ada about tea"
    stored = api.get(f"/chatmessage/{flow}", params={"chatId": chat})
    assert stored.status_code == 200, stored.text
    assert [(m["role"], m["content"]) for m in stored.json()] == [
        ("userMessage", "name: Ada\ntopic: tea"), ("apiMessage", "Hello Ada about tea")]


def test_later_turns_of_a_session_keep_its_form(api):
    flow = create(api, topic_form_flow())
    chat = f"form-{nonce()}"
    assert post(api, flow, {"form": {"name": "Ada", "topic": "tea"}, "chatId": chat}).status_code == 200
    later = post(api, flow, {"question": "and again?", "chatId": chat})
    assert later.status_code == 200, later.text
    assert later.json()["text"] == "Hello Ada about tea"
    # Another session has no form.
    other = post(api, flow, {"question": "hi", "chatId": f"other-{nonce()}"})
    assert other.json()["text"] == "Hello {{ $form.name }} about {{ $form.topic }}"


def test_nodes_side_by_side_keep_each_others_state(api):
    """Two nodes running in the same wave each write a key; both are kept."""
    start = af_start(state=[{"key": "topic", "value": ""}, {"key": "mood", "value": ""}])
    a = af_reply("directReplyAgentflow_a", "A")
    b = af_reply("directReplyAgentflow_b", "B")
    # Loops that end at once (maxLoopCount 1) write state without a model.
    la = af_loop("loopAgentflow_a", START, "Start", max_count=1)
    lb = af_loop("loopAgentflow_b", START, "Start", max_count=1)
    la["data"]["inputs"]["loopUpdateState"] = [{"key": "topic", "value": "tea"}]
    lb["data"]["inputs"]["loopUpdateState"] = [{"key": "mood", "value": "calm"}]
    flow = create(api, agentflow([start, a, b, la, lb],
                                 [(START, a["id"]), (START, b["id"]), (a["id"], la["id"]), (b["id"], lb["id"])]))
    body = ask(api, flow, "go")
    assert body["agentFlowExecutedData"][-1]["data"]["state"] == {"topic": "tea", "mood": "calm"}


# ------------------------------------------------------------------ Flowise exports

def load(name):
    return json.loads((EXPORTS / name).read_text())


def node_inputs(flow, node_id):
    return next(n for n in flow["nodes"] if n["id"] == node_id)["data"]["inputs"]


def upload(api, flow):
    text = json.dumps(flow)
    r = api.post("/chatflows", json={"name": "exported agentflow", "flowData": text, "type": "AGENTFLOW"})
    assert r.status_code == 201, r.text
    assert r.json()["flowData"] == text and r.json()["type"] == "AGENTFLOW"
    return r.json()["id"]


def point_models_at(flow, base):
    """What depends on the test: the models' base URL (the key is the server's)."""
    for n in flow["nodes"]:
        if n["data"]["name"] == "llmAgentflow":
            n["data"]["inputs"]["llmModelConfig"]["basepath"] = f"{base}/v1"


def test_exported_translator(client, fake):
    flow = load("agentflow_translator.json")
    point_models_at(flow, fake.url)
    flow_id = upload(client, flow)
    question = f"Good morning {nonce()}"
    body = ask(client, flow_id, question)
    assert executed(body) == [START, LLM, REPLY]
    [sent] = fake.bodies(CHAT, question)
    assert sent["model"] == "gpt-4o-mini" and sent["temperature"] == 0.9
    (role, instructions), (user, prompt) = said(sent)
    assert (role, user) == ("system", "user")
    assert instructions == "You are a helpful assistant that translates English to French. Return only the French text."
    assert "<" not in prompt and lines(prompt) == ["English:", question, "French:"]
    assert output(body, LLM)["content"] == f"Echo: {prompt}"
    assert body["text"] == f"Translation: Echo: {prompt}"


@pytest.mark.parametrize("sentiment, branch, instructions", [
    ("positive", "llmAgentflow_1", "Thank the customer warmly."),
    ("negative", "llmAgentflow_2", "Apologise to the customer."),
])
def test_exported_structured_output_and_condition(client, fake, sentiment, branch, instructions):
    flow = load("agentflow_structured_condition.json")
    point_models_at(flow, fake.url)
    flow_id = upload(client, flow)
    marker = nonce()
    question = f'Your shop! {marker} STRUCT {{"sentiment": "{sentiment}", "reason": "because"}}'
    body = ask(client, flow_id, question)
    assert executed(body) == [START, LLM, "conditionAgentflow_0", branch]
    assert (output(body, LLM)["sentiment"], output(body, LLM)["reason"]) == (sentiment, "because")
    assert item(body, LLM)["data"]["state"]["sentiment"] == sentiment
    classify, answer = fake.bodies(CHAT, marker)
    props = classify["tools"][0]["function"]["parameters"]["properties"]
    assert props["sentiment"]["enum"] == ["positive", "negative"] and props["reason"]["type"] == "string"
    assert said(answer)[0] == ("system", instructions) and said(answer)[-1] == ("user", question)
    assert body["text"] == f"Echo: {question}"


@pytest.mark.parametrize("name", ["agentflow_translator.json", "agentflow_structured_condition.json"])
def test_agentflow_exports_have_every_field_flowise_writes(name):
    """The hand-written exports are shaped as the agentflow editor exports them."""
    flow = load(name)
    assert set(flow) == {"nodes", "edges", "viewport"}
    nodes = {n["id"]: n for n in flow["nodes"]}
    for n in flow["nodes"]:
        data = n["data"]
        assert {"id", "position", "type", "data", "width", "height", "selected", "positionAbsolute",
                "dragging"} <= set(n), n["id"]
        assert {"id", "label", "version", "name", "type", "color", "baseClasses", "category", "description",
                "inputParams", "inputAnchors", "inputs", "outputAnchors", "outputs", "selected"} <= set(data), n["id"]
        assert data["id"] == n["id"] and data["category"] == "Agent Flows" and data["inputAnchors"] == []
        assert n["type"] == ("stickyNote" if data["name"] == "stickyNoteAgentflow" else "agentFlow")
        for param in data["inputParams"]:
            assert param["id"] == f"{n['id']}-input-{param['name']}-{param['type']}" and "display" in param
        assert "FLOWISE_CREDENTIAL_ID" not in json.dumps(data)
    assert any(n["data"]["name"] == "stickyNoteAgentflow" for n in flow["nodes"])
    for e in flow["edges"]:
        assert set(e) == {"source", "sourceHandle", "target", "targetHandle", "data", "type", "id"}
        assert e["type"] == "agentFlow" and e["targetHandle"] == e["target"]
        assert e["id"] == f"{e['source']}-{e['sourceHandle']}-{e['target']}-{e['targetHandle']}"
        anchors = [a["id"] for a in nodes[e["source"]]["data"]["outputAnchors"]]
        assert e["sourceHandle"] in anchors and e["data"]["isHumanInput"] is False


# ------------------------------------------------------------------ tool approval

def approval_flow(api, fake, marker):
    """An agent whose calculator needs a person's approval (currentDateTime does not)."""
    guarded = {**af_tool_row("calculator"), "agentSelectedToolRequiresHumanInput": True}
    agent = af_agent("agentAgentflow_0", af_openai(fake.url, field="agentModel"),
                     tools=[guarded, af_tool_row("currentDateTime")], messages=system(f"GUARDED {marker}"))
    return create(api, chain(af_start(), agent))


def test_a_tool_needing_approval_stops_the_agent_before_it_runs(api, fake):
    marker = nonce()
    flow, chat = approval_flow(api, fake, marker), f"chat-{marker}"
    body = ask(api, flow, f'Multiply {marker} CALL calculator {{"input": "6 * 7"}}', chatId=chat)
    assert "Attempting to use tool:" in body["text"] and '"calculator"' in body["text"]
    assert body["action"]["mapping"] == ACTION_MAPPING
    assert body["action"]["data"]["nodeId"] == "agentAgentflow_0"
    assert body["agentFlowExecutedData"][-1]["status"] == "STOPPED"
    assert "usedTools" not in body
    assert execution(api, body["executionId"])[0] == "STOPPED"
    # Approved: the call runs and the agent goes on, in the same execution.
    going = resume(api, flow, chat)
    assert going.status_code == 200, going.text
    done = going.json()
    assert done["text"] == "Done: 42"
    assert done["executionId"] == body["executionId"]
    assert tools_used(done["usedTools"]) == [("calculator", {"input": "6 * 7"}, "42")]
    assert execution(api, body["executionId"])[0] == "FINISHED"
    # The model was asked twice in all: the call, then the answer after its result.
    assert len(fake.bodies(CHAT, f"GUARDED {marker}")) == 2


def test_a_rejected_tool_is_taken_away(api, fake):
    marker = nonce()
    flow, chat = approval_flow(api, fake, marker), f"chat-{marker}"
    ask(api, flow, f'Multiply {marker} CALL calculator {{"input": "6 * 7"}}', chatId=chat)
    going = resume(api, flow, chat, "reject", feedback=f"Do it by hand {marker}")
    assert going.status_code == 200, going.text
    assert going.json()["text"] == f"Echo: Do it by hand {marker}"
    assert "usedTools" not in going.json()
    after = fake.bodies(CHAT, f"GUARDED {marker}")[-1]
    assert [t["function"]["name"] for t in after["tools"]] == ["current_date_time"]
    assert not any(m.get("tool_calls") for m in after["messages"])


# ------------------------------------------------------------------ what callers may not change or see

def test_a_caller_cannot_redirect_an_agentflows_model_or_key(api, fake):
    flow = create(api, chain(af_start(), llm(fake)))
    for key, value in [("basePath", "http://127.0.0.1:9/v1"), ("openAIApiKey", "sk-theirs")]:
        r = post(api, flow, {"question": "hi", "overrideConfig": {key: value}})
        assert r.status_code == 403, r.text
        assert key in r.json()["message"]
    # Harmless inputs stay overridable.
    marker = nonce()
    r = post(api, flow, {"question": f"hi {marker}", "overrideConfig": {"temperature": 0.1}})
    assert r.status_code == 200, r.text
    [sent] = fake.bodies(CHAT, marker)
    assert sent["temperature"] == 0.1


def test_an_http_nodes_record_keeps_variables_unresolved(client, site):
    secret = f"s3cret-{nonce()}"
    r = client.post("/variables", json={"name": "apiKey", "value": secret})
    assert r.status_code == 201, r.text
    http = af_http("httpAgentflow_0", f"{site.url}/data?key={{{{ $vars.apiKey }}}}",
                   queryParams=[{"key": "also", "value": "{{ $vars.apiKey }}"}], responseType="json")
    body = ask(client, create(client, chain(af_start(), http)), "hi")
    # The request carried the secret; nothing shown to the caller does.
    _, path, _, _ = site.hits[-1]
    assert secret in path
    assert secret not in json.dumps(body)
    assert body["agentFlowExecutedData"][-1]["data"]["input"]["http"]["url"].endswith("{{ $vars.apiKey }}")
