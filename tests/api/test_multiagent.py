"""Multi-agent flows (a supervisor routing workers with its `route` tool) and
sequential agents (start, agents, LLM and tool nodes, conditions, ends), both
chatflows of type MULTIAGENT: agentReasoning in JSON and SSE, the recursion limit,
condition branches, and the nodes weir does not run."""

import json
import re

import pytest

import flows
from fakes import FakeProviders
from prediction_client import (AFTER_TOKENS, assert_stream, ask, create_flow, nonce, predict, stream,
                               tools_used)
from weir_harness import assert_error

CALC_42 = ("calculator", {"input": "6 * 7"}, "42")


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def team(fake, **supervisor_inputs):
    """A supervisor with a researcher (no tools) and a writer whose prompt makes it
    call the calculator (doubled braces: prompts are templates)."""
    model = flows.openai_model(fake.url)
    boss = flows.supervisor(model, **supervisor_inputs)
    calc = flows.calculator()
    researcher = flows.worker("worker_0", "researcher", "You research the question.", boss)
    writer = flows.worker("worker_1", "writer", 'You write the answer. CALL calculator {{"input": "6 * 7"}}', boss,
                          tools=[calc])
    return flows.wired([model, boss, calc, researcher, writer])


def test_the_supervisor_routes_workers_in_turn(api, fake):
    flow = create_flow(api, team(fake), type="MULTIAGENT")
    marker = nonce()
    body = ask(api, flow, f"ROUTE researcher,writer {marker}")
    steps = body["agentReasoning"]
    assert [s["agentName"] for s in steps] == ["researcher", "writer"]
    assert [s["next"] for s in steps] == ["writer", "FINISH"]
    assert [s["instructions"] for s in steps] == ["do part 1", "do part 2"]
    assert all(s["sourceDocuments"] == [] for s in steps)
    assert steps[0]["messages"] and steps[0]["messages"][-1].startswith("Echo: ")
    assert steps[0]["usedTools"] == []
    assert tools_used(steps[1]["usedTools"]) == [CALC_42]
    assert steps[1]["messages"][-1] == "Done: 42"
    assert body["text"] == "Done: 42"
    assert fake.supervisor_calls(marker) == 3

    # The supervisor offers one tool, route, with Flowise's arguments.
    supervisor_calls = [b for b in fake.bodies("/chat/completions", marker)
                        if [t["function"]["name"] for t in b.get("tools", [])] == ["route"]]
    assert len(supervisor_calls) == 3
    parameters = supervisor_calls[0]["tools"][0]["function"]["parameters"]
    assert set(parameters["properties"]) == {"reasoning", "next", "instructions"}
    assert set(parameters["properties"]["next"]["enum"]) == {"FINISH", "researcher", "writer"}


def test_a_streamed_team_answer(api, fake):
    flow = create_flow(api, team(fake), type="MULTIAGENT")
    body = ask(api, flow, f"ROUTE researcher,writer {nonce()}")
    extras = [e for e in AFTER_TOKENS if body.get(e)]
    assert "agentReasoning" in extras
    events = stream(api, flow, f"ROUTE researcher,writer {nonce()}")
    after = assert_stream(events, body["text"], extras)
    assert [s["agentName"] for s in after["agentReasoning"]] == ["researcher", "writer"]
    # Live, the team's steps come as they happen: who acts next, then the steps so far.
    live = [(e, d) for e, d in events[1:[e for e, _ in events].index("token")]]
    assert [(e, d if e == "nextAgent" else [s["agentName"] for s in d]) for e, d in live] == [
        ("nextAgent", "researcher"), ("agentReasoning", ["researcher"]),
        ("nextAgent", "writer"), ("agentReasoning", ["researcher", "writer"])]


def test_the_recursion_limit_ends_the_run_clearly(api, fake):
    flow = create_flow(api, team(fake, recursionLimit=3), type="MULTIAGENT")
    marker = nonce()
    r = predict(api, flow, f"ROUTE {','.join(['researcher'] * 30)} {marker}")
    message = r.json()["text"] if r.status_code == 200 else assert_error(r, r.status_code)["message"]
    assert re.search(r"recursion ?limit", message, re.I), message
    assert 1 <= fake.supervisor_calls(marker) <= 3


# --- Sequential agents -------------------------------------------------------------------

def branching(fake):
    """start → classifier (agent) → condition: its output contains "yes" → affirmer
    (LLM node) → end; otherwise → end."""
    model = flows.openai_model(fake.url)
    rows = [{"variable": "$flow.output.content", "operation": "Contains", "value": "yes", "output": "Affirm"}]
    nodes = [
        model,
        flows.seq_start(model),
        flows.seq_agent("seqAgent_0", "classifier", ["seqStart_0"], system="Classify the request."),
        flows.seq_condition("seqCondition_0", "is it yes", ["seqAgent_0"], rows),
        flows.seq_llm("seqLLMNode_0", "affirmer", ["seqCondition_0"], system="Affirm.", human="Say it is settled."),
        flows.seq_end("seqEnd_0", "seqLLMNode_0"),
        flows.seq_end("seqEnd_1", "seqCondition_0"),
    ]
    return flows.wired(nodes, branches={("seqCondition_0", "seqLLMNode_0"): "Affirm",
                                        ("seqCondition_0", "seqEnd_1"): "End"})


def test_a_condition_takes_each_branch(api, fake):
    flow = create_flow(api, branching(fake), type="MULTIAGENT")
    yes = ask(api, flow, "yes please, go ahead")
    assert [s["agentName"] for s in yes["agentReasoning"]] == ["classifier", "affirmer"]
    assert yes["agentReasoning"][0]["messages"][-1] == "Echo: yes please, go ahead"
    assert yes["text"] == "Echo: Say it is settled."
    no = ask(api, flow, "no thanks")
    assert [s["agentName"] for s in no["agentReasoning"]] == ["classifier"]
    assert no["text"] == "Echo: no thanks"


def test_a_sequential_flows_steps_stream_live(api, fake):
    flow = create_flow(api, branching(fake), type="MULTIAGENT")
    events = stream(api, flow, "yes please, go ahead")
    after = assert_stream(events, "Echo: Say it is settled.", ["agentReasoning"])
    assert [s["agentName"] for s in after["agentReasoning"]] == ["classifier", "affirmer"]
    # Before the answer: who takes the conversation, then the steps so far, per step.
    live = events[1:[e for e, _ in events].index("token")]
    assert [(e, d if e == "nextAgent" else [s["agentName"] for s in d]) for e, d in live] == [
        ("nextAgent", "classifier"), ("agentReasoning", ["classifier"]),
        ("nextAgent", "affirmer"), ("agentReasoning", ["classifier", "affirmer"])]


def test_a_sequential_agent_with_a_tool(api, fake):
    model = flows.openai_model(fake.url)
    calc = flows.calculator()
    nodes = [model, calc, flows.seq_start(model),
             flows.seq_agent("seqAgent_0", "solver", ["seqStart_0"], system="Solve it.", tools=[calc]),
             flows.seq_end("seqEnd_0", "seqAgent_0")]
    flow = create_flow(api, flows.wired(nodes), type="MULTIAGENT")
    body = ask(api, flow, 'Six times seven? CALL calculator {"input": "6 * 7"}')
    [step] = body["agentReasoning"]
    assert step["agentName"] == "solver" and tools_used(step["usedTools"]) == [CALC_42]
    assert body["text"] == "Done: 42"


def test_an_llm_node_and_its_tool_node_loop(api, fake):
    model = flows.openai_model(fake.url)
    calc = flows.calculator()
    nodes = [model, calc, flows.seq_start(model),
             flows.seq_llm("seqLLMNode_0", "calc_llm", ["seqStart_0", "seqToolNode_0"], system="Use your tools."),
             flows.seq_tool_node("seqToolNode_0", "calc_tools", [calc], "seqLLMNode_0"),
             flows.seq_end("seqEnd_0", "seqLLMNode_0")]
    flow = create_flow(api, flows.wired(nodes), type="MULTIAGENT")
    marker = nonce()
    body = ask(api, flow, f'Six times seven? {marker} CALL calculator {{"input": "6 * 7"}}')
    assert body["text"] == "Done: 42"
    steps = body["agentReasoning"]
    assert steps[-1]["agentName"] == "calc_llm" and {s["agentName"] for s in steps} <= {"calc_llm", "calc_tools"}
    used = tools_used(body.get("usedTools", [])) + [t for s in steps for t in tools_used(s["usedTools"])]
    assert CALC_42 in used
    first, follow = fake.bodies("/chat/completions", marker)
    assert [t["function"]["name"] for t in first["tools"]] == ["calculator"]
    assert [m["content"] for m in follow["messages"] if m["role"] == "tool"] == ["42"]


def remembering(fake, memory="agentMemory"):
    """A worker whose prompt shows the state's `seen` (Append) list, to which it adds
    each question; the start has an agent memory."""
    model = flows.openai_model(fake.url)
    state = flows.node("seqState_0", "seqState", {"stateMemoryUI": json.dumps([
        {"key": "seen", "type": "Append", "defaultValue": ""}])})
    worker = flows.seq_agent("seqAgent_0", "Worker", ["seqStart_0"], human="Seen: {seen}",
                             promptValues=json.dumps({"seen": "$flow.state.seen"}),
                             updateStateMemoryUI=json.dumps([{"key": "seen", "value": "$flow.input"}]))
    keeper = flows.node("memory_0", memory, {"databaseType": "sqlite", "databaseFilePath": "/nowhere/x.db"})
    nodes = [model, state, keeper,
             flows.seq_start(model, state=flows.ref("seqState_0"), agentMemory=flows.ref("memory_0")), worker,
             flows.seq_end("seqEnd_0", "seqAgent_0")]
    return flows.wired(nodes)


@pytest.mark.parametrize("memory", ["agentMemory", "sqliteAgentMemory", "postgresAgentMemory", "mySQLAgentMemory"])
def test_agent_memory_resumes_a_sessions_state_and_conversation(api, fake, memory):
    flow = create_flow(api, remembering(fake, memory), type="MULTIAGENT")
    chat = f"chat-{nonce()}"
    assert ask(api, flow, "first", chatId=chat)["text"] == "Echo: Seen: []"
    marker = nonce()
    assert ask(api, flow, f"second {marker}", chatId=chat)["text"] == 'Echo: Seen: ["first"]'
    [sent] = fake.bodies("/chat/completions", marker)
    assert [(m["role"], m["content"]) for m in sent["messages"]] == [
        ("user", "first"), ("assistant", "Echo: Seen: []"), ("user", f"second {marker}"),
        ("user", 'Seen: ["first"]')]
    # Another session starts afresh; clearing the chat clears its memory.
    assert ask(api, flow, "elsewhere", chatId=f"other-{nonce()}")["text"] == "Echo: Seen: []"
    assert api.delete(f"/chatmessage/{flow}", params={"chatId": chat}).status_code == 200
    assert ask(api, flow, "again", chatId=chat)["text"] == "Echo: Seen: []"


def looping(fake):
    """A worker that runs until the state holds three of its answers: the State's
    `steps` (Append) and `last` (Replace) keys, written by the worker's Update
    State rows and read by its prompt; a condition on `steps.length` loops back."""
    model = flows.openai_model(fake.url)
    state = flows.node("seqState_0", "seqState", {"stateMemory": "stateMemoryUI", "stateMemoryUI": json.dumps([
        {"key": "steps", "type": "Append", "defaultValue": ""},
        {"key": "last", "type": "Replace", "defaultValue": "nothing yet"}])})
    worker = flows.seq_agent("seqAgent_0", "Worker", ["seqStart_0"], human="Go on from: {previous}",
                             promptValues=json.dumps({"previous": "$flow.state.last"}),
                             updateStateMemoryUI=json.dumps([{"key": "steps", "value": "$flow.output.content"},
                                                             {"key": "last", "value": "$flow.output.content"}]))
    rows = [{"variable": "$flow.state.steps.length", "operation": "Less Than", "value": "3", "output": "Again"}]
    nodes = [model, state, flows.seq_start(model, state=flows.ref("seqState_0")), worker,
             flows.seq_condition("seqCondition_0", "enough", ["seqAgent_0"], rows),
             flows.node("seqLoop_0", "seqLoop", {"sequentialNode": [flows.ref("seqCondition_0")],
                                                 "loopToName": "worker"}),
             flows.seq_end("seqEnd_0", "seqCondition_0")]
    return flows.wired(nodes, branches={("seqCondition_0", "seqLoop_0"): "Again",
                                        ("seqCondition_0", "seqEnd_0"): "End"})


def test_state_updates_feed_prompts_and_a_loop_until_a_condition_holds(api, fake):
    body = ask(api, create_flow(api, looping(fake), type="MULTIAGENT"), "start")
    first = "Echo: Go on from: nothing yet"
    second = f"Echo: Go on from: {first}"
    third = f"Echo: Go on from: {second}"
    assert [s["agentName"] for s in body["agentReasoning"]] == ["Worker"] * 3
    assert [s["state"] for s in body["agentReasoning"]] == [
        {"steps": answer, "last": answer} for answer in (first, second, third)]
    assert body["text"] == third


def test_a_condition_agent_routes_on_its_structured_answer(api, fake):
    model = flows.openai_model(fake.url)
    judge = flows.node("seqConditionAgent_0", "seqConditionAgent", {
        "conditionAgentName": "Judge", "sequentialNode": [flows.ref("seqAgent_0")],
        "systemMessagePrompt": "Decide.", "humanMessagePrompt": "Verdict? {ask}",
        "promptValues": json.dumps({"ask": "{{question}}"}),
        "conditionAgentStructuredOutput": json.dumps([
            {"key": "verdict", "type": "Enum", "enumValues": "approve, reject", "description": "the verdict"}]),
        "conditionUI": json.dumps([{"variable": "$flow.output.verdict", "operation": "Is", "value": "approve",
                                    "output": "Publish"}])})
    nodes = [model, flows.seq_start(model), flows.seq_agent("seqAgent_0", "drafter", ["seqStart_0"]), judge,
             flows.seq_llm("seqLLMNode_0", "publisher", ["seqConditionAgent_0"], human="Publish it."),
             flows.seq_end("seqEnd_0", "seqLLMNode_0"), flows.seq_end("seqEnd_1", "seqConditionAgent_0")]
    flow = create_flow(api, flows.wired(nodes, branches={("seqConditionAgent_0", "seqLLMNode_0"): "Publish",
                                                         ("seqConditionAgent_0", "seqEnd_1"): "End"}),
                       type="MULTIAGENT")
    yes = ask(api, flow, f'{nonce()} STRUCT {{"verdict": "approve"}}')
    assert [s["agentName"] for s in yes["agentReasoning"]] == ["drafter", "Judge", "publisher"]
    assert yes["agentReasoning"][1]["next"] == "Publish" and yes["text"] == "Echo: Publish it."
    marker = nonce()
    question = f'{marker} STRUCT {{"verdict": "reject"}}'
    no = ask(api, flow, question)
    assert [s["agentName"] for s in no["agentReasoning"]] == ["drafter", "Judge"]
    assert no["agentReasoning"][1]["next"] == "End" and no["text"] == f"Echo: {question}"
    [asked] = [b for b in fake.bodies("/chat/completions", marker) if b.get("tool_choice")]
    assert asked["messages"][0] == {"role": "system", "content": "Decide."}
    assert asked["messages"][-1] == {"role": "user", "content": f"Verdict? {question}"}


def test_branches_run_side_by_side_and_merge_once(api, fake):
    """start → A; A → B and A → C (one step); D after both B and C runs once,
    seeing what both said."""
    model = flows.openai_model(fake.url)
    marker = nonce()
    nodes = [model, flows.seq_start(model),
             flows.seq_agent("seqAgent_0", "A", ["seqStart_0"], human=f"A {marker}"),
             flows.seq_agent("seqAgent_1", "B", ["seqAgent_0"], human=f"B {marker}"),
             flows.seq_agent("seqAgent_2", "C", ["seqAgent_0"], human=f"C {marker}"),
             flows.seq_agent("seqAgent_3", "D", ["seqAgent_1", "seqAgent_2"], human=f"D {marker}"),
             flows.seq_end("seqEnd_0", "seqAgent_3")]
    body = ask(api, create_flow(api, flows.wired(nodes), type="MULTIAGENT"), "go")
    assert [s["agentName"] for s in body["agentReasoning"]] == ["A", "B", "C", "D"]
    assert body["text"] == f"Echo: D {marker}"
    [d] = fake.bodies("/chat/completions", f"D {marker}")
    said = [m["content"] for m in d["messages"]]
    assert f"Echo: B {marker}" in said and f"Echo: C {marker}" in said


@pytest.mark.parametrize("node, inputs, words", [
    ("seqLoop", {"loopToName": "nobody", "sequentialNode": [flows.ref("seqAgent_0")]}, "nobody"),
])
def test_what_sequential_nodes_cannot_do_is_a_400(api, fake, node, inputs, words):
    model = flows.openai_model(fake.url)
    extra = flows.node(f"{node}_0", node, inputs)
    start = flows.seq_start(model, state=flows.ref("seqState_0")) if node == "seqState" else flows.seq_start(model)
    nodes = [model, start, flows.seq_agent("seqAgent_0", "helper", ["seqStart_0"]), extra,
             flows.seq_end("seqEnd_0", "seqAgent_0")]
    flow = create_flow(api, flows.wired(nodes), type="MULTIAGENT")
    message = assert_error(predict(api, flow, "hi"), 400)["message"]
    assert f"{node}_0" in message and words in message, message


def test_a_condition_on_a_variable_weir_does_not_know_is_refused(api, fake):
    model = flows.openai_model(fake.url)
    nodes = [
        model,
        flows.seq_start(model),
        flows.seq_agent("seqAgent_0", "classifier", ["seqStart_0"]),
        flows.seq_condition("seqCondition_0", "check", ["seqAgent_0"],
                            [{"variable": "$vars.mood", "operation": "Is", "value": "x", "output": "Yes"}]),
        flows.seq_end("seqEnd_0", "seqCondition_0"),
    ]
    flow = create_flow(api, flows.wired(nodes, branches={("seqCondition_0", "seqEnd_0"): "End"}), type="MULTIAGENT")
    assert "$vars.mood" in assert_error(predict(api, flow, "hi"), 400)["message"]
