"""Multi-agent flows (a supervisor routing workers with its `route` tool) and
sequential agents (start, agents, LLM and tool nodes, conditions, ends), both
chatflows of type MULTIAGENT: agentReasoning in JSON and SSE, the recursion limit,
condition branches, and the nodes weir does not run."""

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
    after = assert_stream(stream(api, flow, f"ROUTE researcher,writer {nonce()}"), body["text"], extras)
    assert [s["agentName"] for s in after["agentReasoning"]] == ["researcher", "writer"]


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


UNSUPPORTED = {
    "seqConditionAgent": {"conditionAgentName": "router", "sequentialNode": [flows.ref("seqAgent_0")]},
    "seqLoop": {"loopToName": "helper", "sequentialNode": [flows.ref("seqAgent_0")]},
    "seqState": {"stateMemory": "stateMemoryUI"},
    "agentMemory": {"databaseFilePath": ""},
}


@pytest.mark.parametrize("kind", list(UNSUPPORTED))
def test_unsupported_sequential_nodes_are_named(api, fake, kind):
    node_id = f"{kind}_0"
    model = flows.openai_model(fake.url)
    start_inputs = {"seqState": {"state": flows.ref(node_id)}, "agentMemory": {"agentMemory": flows.ref(node_id)}}
    nodes = [model, flows.seq_start(model, **start_inputs.get(kind, {})),
             flows.seq_agent("seqAgent_0", "helper", ["seqStart_0"]),
             flows.node(node_id, kind, UNSUPPORTED[kind]),
             flows.seq_end("seqEnd_0", "seqAgent_0")]
    flow = create_flow(api, flows.wired(nodes), type="MULTIAGENT")
    message = assert_error(predict(api, flow, "hi"), 400)["message"]
    assert node_id in message and kind in message, message


def test_two_workers_of_one_name_are_refused(api, fake):
    model = flows.openai_model(fake.url)
    boss = flows.supervisor(model)
    twins = [flows.worker("worker_0", "writer", "a", boss), flows.worker("worker_1", "Writer", "b", boss)]
    flow = create_flow(api, flows.wired([model, boss, *twins]), type="MULTIAGENT")
    assert "named" in assert_error(predict(api, flow, "hi"), 400)["message"]


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
