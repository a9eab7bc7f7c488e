"""JavaScript in the sandbox: Flowise's `customFunctionAgentflow` and JavaScript
`customTool` bodies run by the real Python runtime's JavaScript executor (QuickJS
in the tool sandbox), never in weir: Flowise's globals ($input, $vars, $flow,
$<variable>, $<argument>), state updates from the returned value, `console`,
a thrown error, an endless loop stopped at SANDBOX_TIMEOUT, memory over the
limit, `fetch` to the host refused by the network policy, and a body that does
not compile."""

import json

import pytest

import flows
from fakes import FakeProviders
from flows import af_node, af_reply, af_start, mention, rich
from prediction_client import ask, create_flow, nonce, predict, stream, tools_used
from tool_runtime import use_runtime
from weir_harness import Api, Weir, assert_error


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def agentflow(*nodes):
    return flows.agentflow(list(nodes), [(a["id"], b["id"]) for a, b in zip(nodes, nodes[1:])])


def custom_function(code, variables=(), update_state=(), node_id="customFunctionAgentflow_0"):
    return af_node(node_id, "customFunctionAgentflow", {
        "customFunctionInputVariables": [{"variableName": n, "variableValue": v} for n, v in variables],
        "customFunctionJavascriptFunction": code,
        "customFunctionUpdateState": [{"key": k, "value": v} for k, v in update_state],
    }, "Custom Function")


def run_function(api, code, question="hello there", **kw):
    flow = create_flow(api, agentflow(af_start(), custom_function(code, **kw)), type="AGENTFLOW")
    return predict(api, flow, question)


def test_a_custom_function_runs_with_flowises_globals_and_sets_state(py_api):
    r = py_api.post("/variables", json={"name": "greeting", "value": "Hi"})
    assert r.status_code == 201, r.text
    code = """
const words = $input.split(' ');
console.log('counting', words.length);
return { greeting: $vars.greeting + ', ' + $name, words: words.length, topic: $flow.state.topic,
         chatflow: $flow.chatflowId.length, session: typeof $flow.sessionId };
"""
    start = af_start(state=[{"key": "topic", "value": "billing"}, {"key": "count", "value": ""}])
    function = custom_function(code, variables=[("name", rich(mention("question")))],
                               update_state=[("count", "{{ output.words }}")])
    reply = af_reply("directReplyAgentflow_0", "Words: {{ $flow.state.count }} / {{ customFunctionAgentflow_0 }}")
    flow = create_flow(py_api, agentflow(start, function, reply), type="AGENTFLOW")
    body = ask(py_api, flow, "three little words")
    item = [i for i in body["agentFlowExecutedData"] if i["nodeId"] == "customFunctionAgentflow_0"][0]
    returned = json.loads(item["data"]["output"]["content"])
    assert returned == {"greeting": "Hi, three little words", "words": 3, "topic": "billing",
                        "chatflow": 36, "session": "string"}
    assert item["data"]["input"]["inputVariables"] == {"name": "three little words"}
    assert body["text"].startswith("Words: 3 / {")


def test_a_string_is_the_nodes_text_and_async_work_is_awaited(py_api):
    code = ("const later = await new Promise(r => setTimeout(() => r('late'), 20));\n"
            "return $input.toUpperCase() + ' ' + later;")
    reply = af_reply("directReplyAgentflow_0", rich(mention("customFunctionAgentflow_0")))
    flow = create_flow(py_api, agentflow(af_start(), custom_function(code), reply), type="AGENTFLOW")
    assert ask(py_api, flow, "quiet please")["text"] == "QUIET PLEASE late"


@pytest.mark.parametrize("code, words", [
    ("throw new Error('the ledger is locked');", "Error: the ledger is locked"),
    ("return undefinedThing.value;", "ReferenceError"),
    ("return (", "SyntaxError"),
    ("const blocks = []; while (true) blocks.push(new Array(1000000).fill(7));", "out of memory"),
])
def test_javascript_failures_fail_the_node_with_their_error(py_api, code, words):
    message = assert_error(run_function(py_api, code), 500)["message"]
    assert "customFunctionAgentflow_0" in message and "JavaScriptError" in message and words in message, message


def test_fetch_cannot_reach_the_host(py_api, py_server):
    """The runtime's network policy holds for JavaScript: weir itself, on the host's
    loopback, is out of reach."""
    code = f"const r = await fetch('{py_server.url}/api/v1/ping'); return r.status;"
    message = assert_error(run_function(py_api, code), 500)["message"]
    assert "fetch failed" in message, message


def test_an_endless_loop_is_stopped_at_the_sandbox_timeout(py_runtime, tmp_path_factory):
    w = use_runtime(Weir(tmp_path_factory.mktemp("weir-js-timeout"), "sqlite"), py_runtime)
    w.env.update(SANDBOX_TIMEOUT="1500")
    w.start()
    try:
        api = Api(w.url, w.create_key())
        message = assert_error(run_function(api, "while (true) {}"), 500)["message"]
        assert "limit" in message and "customFunctionAgentflow_0" in message, message
        # The workspace's next run is not held up.
        flow = create_flow(api, agentflow(af_start(), custom_function("return 'fine';"),
                                          af_reply("directReplyAgentflow_0", rich(mention("customFunctionAgentflow_0")))),
                           type="AGENTFLOW")
        assert ask(api, flow, "x")["text"] == "fine"
    finally:
        w.cleanup()


def test_a_javascript_custom_tool_body_runs_for_an_agent(py_api, fake):
    r = py_api.post("/variables", json={"name": "unit", "value": "celsius"})
    assert r.status_code == 201, r.text
    schema = [{"property": "city", "type": "string", "description": "City", "required": True},
              {"property": "days", "type": "number", "description": "Days", "required": False}]
    body_js = ("const days = $days || 1;\n"
               "return `${$city}: ${days} day(s) of sun in ${$vars.unit} (${typeof $flow.chatflowId})`;")
    tool = flows.node("customTool_0", "customTool", {
        "customToolName": "forecast", "customToolDesc": "The weather", "customToolSchema": json.dumps(schema),
        "customToolFunc": body_js})
    flow = create_flow(py_api, flows.tool_agent(flows.openai_model(fake.url), [tool]))
    body = ask(py_api, flow, 'Weather? CALL forecast {"city": "Oslo", "days": 2}')
    [(name, args, output)] = tools_used(body["usedTools"])
    assert name == "forecast" and args == {"city": "Oslo", "days": 2}
    assert output == "Oslo: 2 day(s) of sun in celsius (string)"
    # An object returned is the tool's JSON output; a throw is an error the agent sees.
    tool["data"]["inputs"]["customToolFunc"] = "return { city: $city, ok: true };"
    flow = create_flow(py_api, flows.tool_agent(flows.openai_model(fake.url), [tool]))
    [(_, _, output)] = tools_used(ask(py_api, flow, 'CALL forecast {"city": "Rome"}')["usedTools"])
    assert json.loads(output) == {"city": "Rome", "ok": True}
    tool["data"]["inputs"]["customToolFunc"] = "throw new TypeError('no such city');"
    flow = create_flow(py_api, flows.tool_agent(flows.openai_model(fake.url), [tool]))
    [(_, _, output)] = tools_used(ask(py_api, flow, 'CALL forecast {"city": "Atlantis"}')["usedTools"])
    assert output.startswith("Error: JavaScriptError: TypeError: no such city"), output


def test_a_custom_function_without_code_or_with_a_bad_name_is_a_400(py_api):
    for node, words in [(custom_function("  "), "no JavaScript"),
                        (custom_function("return 1", variables=[("not-a-name", "x")]), "not-a-name")]:
        r = py_api.post("/chatflows", json={"name": "bad", "type": "AGENTFLOW",
                                            "flowData": json.dumps(agentflow(af_start(), node))})
        if r.status_code == 201:
            r = predict(py_api, r.json()["id"], "hi")
        assert_error(r, 400, words)


def test_a_body_that_loads_a_nodejs_module_is_a_400_before_it_runs(py_api, fake):
    """Flowise's NodeVM lends `require`; weir's QuickJS has no modules, so a body
    that loads one is a 400 naming node and module, before any of the flow runs."""
    sql_agent = ("const { DataSource } = require('typeorm');\n"
                 "const AppDataSource = new DataSource({type: 'postgres'});\nreturn 1;")
    tool = flows.node("customTool_0", "customTool", {
        "customToolName": "orders", "customToolDesc": "Orders", "customToolSchema": "[]",
        "customToolFunc": "import axios from 'axios';\nconst r = await axios.get('x');\nreturn r.data;"})
    for flow, kind, words in [
        (agentflow(af_start(), custom_function(sql_agent)), "AGENTFLOW",
         ["customFunctionAgentflow_0", "'typeorm'", "require('typeorm')", "require is not defined"]),
        (flows.graph([chat_function("const { Pool } = require(\"pg\");\nreturn 1;")]), "CHATFLOW",
         ["customFunction_0", "'pg'"]),
        (flows.tool_agent(flows.openai_model(fake.url), [tool]), "CHATFLOW", ["customTool_0", "'axios'"]),
    ]:
        r = py_api.post("/chatflows", json={"name": "node modules", "type": kind, "flowData": json.dumps(flow)})
        assert r.status_code == 201, r.text
        message = assert_error(predict(py_api, r.json()["id"], "x"), 400)["message"]
        assert all(w in message for w in words), message
    # The words in a string or a comment load nothing: such a body is saved and runs.
    code = "// no require('pg') here\nreturn \"require('pg')\" + ' import x from \"y\"';"
    flow = create_flow(py_api, flows.graph([chat_function(code)]))
    assert ask(py_api, flow, "x")["text"] == "require('pg') import x from \"y\""


def test_a_sequential_agents_state_is_updated_by_its_javascript(py_api, fake):
    """`updateStateMemoryCode` (the code tab chosen): the object returned is written
    to the state, which the next step's prompt reads."""
    model = flows.openai_model(fake.url)
    state = flows.node("seqState_0", "seqState", {"stateMemoryUI": json.dumps([
        {"key": "shout", "type": "Replace", "defaultValue": ""},
        {"key": "words", "type": "Replace", "defaultValue": ""}])})
    code = ("const said = $flow.output.content;\n"
            "return { shout: said.toUpperCase(), words: said.split(' ').length + $flow.state.messages.length * 0 };")
    first = flows.seq_llm("seqLLMNode_0", "first", ["seqStart_0"], human="{question}",
                          updateStateMemoryCode=code,
                          selectedUpdateStateMemoryTab_seqLLMNode_0="updateStateMemoryCode")
    second = flows.seq_llm("seqLLMNode_1", "second", ["seqLLMNode_0"], human="Shouted: {shout} ({words})",
                           promptValues=json.dumps({"shout": "$flow.state.shout", "words": "$flow.state.words"}))
    nodes = [model, state, flows.seq_start(model, state=flows.ref("seqState_0")), first, second,
             flows.seq_end("seqEnd_0", "seqLLMNode_1")]
    flow = create_flow(py_api, flows.wired(nodes), type="MULTIAGENT")
    body = ask(py_api, flow, "quiet words")
    assert body["text"] == "Echo: Shouted: ECHO: QUIET WORDS (3)", body["text"]
    # A value that is not an object is Flowise's error.
    first["data"]["inputs"]["updateStateMemoryCode"] = "return 'nope';"
    flow = create_flow(py_api, flows.wired(nodes), type="MULTIAGENT")
    message = assert_error(predict(py_api, flow, "hi"), 500)["message"]
    assert "Return output must be an object" in message and "seqLLMNode_0" in message, message


# --- Chatflows: the customFunction node ----------------------------------------------------

def chat_function(code, node_id="customFunction_0", **variables):
    return flows.node(node_id, "customFunction", {
        "functionInputVariables": json.dumps(variables) if variables else "",
        "functionName": "", "javascriptFunction": code})


def test_a_chatflow_custom_function_answers_as_the_ending_node(py_api):
    r = py_api.post("/variables", json={"name": "team", "value": "ops"})
    assert r.status_code == 201, r.text
    code = ("return `${$vars.team} heard '${$input}' (${$asked.length} chars, "
            "${$limits.max} max) in ${typeof $flow.chatflowId}`;")
    function = chat_function(code, asked="{{question}}", limits='{"max": 3}')
    flow = create_flow(py_api, flows.graph([function]))
    assert ask(py_api, flow, "all good?")["text"] == "ops heard 'all good?' (9 chars, 3 max) in string"
    # An object returned is the answer as JSON; a throw fails the run with its error.
    flow = create_flow(py_api, flows.graph([chat_function("return {rows: [1, 2], ok: true};")]))
    assert json.loads(ask(py_api, flow, "x")["text"]) == {"rows": [1, 2], "ok": True}
    flow = create_flow(py_api, flows.graph([chat_function("throw new Error('no ledger');")]))
    message = assert_error(predict(py_api, flow, "x"), 500)["message"]
    assert "customFunction_0" in message and "no ledger" in message, message


def test_a_custom_functions_result_fills_the_prompt_values_that_read_it(py_api, fake):
    """Flowise's Text to SQL shape: a function returns a schema that a prompt's
    `promptValues` name as `{{customFunction_0.data.instance}}`; a second function
    reads the first one's result through its input variables."""
    schema = chat_function("return 'CREATE TABLE customers (name varchar(50))';")
    tables = chat_function("return $schema.split(' ')[2] + ' for ' + $input;", node_id="customFunction_1",
                           schema=flows.ref("customFunction_0"))
    model = flows.openai_model(fake.url)
    prompt = flows.prompt_template("Schema: {schema}\nTables: {tables}\nQ: {question}",
                                   {"schema": flows.ref("customFunction_0"),
                                    "tables": "[" + flows.ref("customFunction_1") + "]",
                                    "question": "{{question}}"})
    graph = flows.llm_chain(model, prompt)
    # The second function comes first in the flow: it still runs after the one it reads.
    graph["nodes"] = [tables, *graph["nodes"], schema]
    graph["edges"] += [flows.edge("customFunction_0", "promptTemplate_0"),
                       flows.edge("customFunction_0", "customFunction_1"),
                       flows.edge("customFunction_1", "promptTemplate_0")]
    flow = create_flow(py_api, graph)
    assert ask(py_api, flow, "who buys?")["text"] == (
        "Echo: Schema: CREATE TABLE customers (name varchar(50))\nTables: [customers for who buys?]\nQ: who buys?")


def test_a_custom_function_reading_a_node_weir_does_not_pass_is_a_400(py_api, fake):
    model = flows.openai_model(fake.url)
    prompt = flows.prompt_template("Q: {question}")
    graph = flows.llm_chain(model, prompt)
    graph["nodes"].append(chat_function("return $answer;", answer=flows.ref("promptTemplate_0")))
    graph["edges"] += [flows.edge("llmChain_0", "customFunction_0"), flows.edge("promptTemplate_0", "customFunction_0")]
    r = py_api.post("/chatflows", json={"name": "bad", "flowData": json.dumps(graph)})
    if r.status_code == 201:
        r = predict(py_api, r.json()["id"], "hi")
    assert_error(r, 400, "promptTemplate_0")


def test_a_custom_function_reads_the_answer_of_the_chain_before_it(py_api, fake):
    """An llmChain wired into a function runs first, streaming nothing; the
    function (the ending node) gets its answer."""
    model = flows.openai_model(fake.url)
    prompt = flows.prompt_template("Q: {question}")
    graph = flows.llm_chain(model, prompt)
    graph["nodes"].append(chat_function("return 'chain said: ' + $answer;", answer=flows.ref("llmChain_0")))
    graph["edges"].append(flows.edge("llmChain_0", "customFunction_0"))
    flow = create_flow(py_api, graph)
    question = f"hi {nonce()}"
    assert ask(py_api, flow, question)["text"] == f"chain said: Echo: Q: {question}"
    events = stream(py_api, flow, question)
    tokens = "".join(data for event, data in events if event == "token")
    assert tokens == f"chain said: Echo: Q: {question}"


def test_a_sequential_condition_routes_by_its_javascript_function(py_api, fake):
    """`conditionFunction` (the code tab chosen) returns the name of the branch."""
    model = flows.openai_model(fake.url)
    condition = flows.seq_condition("seqCondition_0", "is it yes", ["seqAgent_0"], [])
    condition["data"]["inputs"].update({
        "conditionFunction": ("const said = $flow.state.messages[$flow.state.messages.length - 1].content;\n"
                              "return said.includes('yes') && $flow.input.length > 3 ? 'Affirm' : 'End';"),
        "selectedConditionFunctionTab_seqCondition_0": "conditionFunction"})
    nodes = [model, flows.seq_start(model),
             flows.seq_agent("seqAgent_0", "classifier", ["seqStart_0"], system="Classify the request."),
             condition,
             flows.seq_llm("seqLLMNode_0", "affirmer", ["seqCondition_0"], system="Affirm.", human="Say it is settled."),
             flows.seq_end("seqEnd_0", "seqLLMNode_0"), flows.seq_end("seqEnd_1", "seqCondition_0")]
    graph = flows.wired(nodes, branches={("seqCondition_0", "seqLLMNode_0"): "Affirm",
                                         ("seqCondition_0", "seqEnd_1"): "End"})
    flow = create_flow(py_api, graph, type="MULTIAGENT")
    assert ask(py_api, flow, "yes please")["text"] == "Echo: Say it is settled."
    assert ask(py_api, flow, "no thanks")["text"] == "Echo: no thanks"
    # Anything but a string is Flowise's error.
    condition["data"]["inputs"]["conditionFunction"] = "return 3;"
    flow = create_flow(py_api, flows.wired(nodes, branches={("seqCondition_0", "seqLLMNode_0"): "Affirm",
                                                            ("seqCondition_0", "seqEnd_1"): "End"}),
                       type="MULTIAGENT")
    message = assert_error(predict(py_api, flow, "yes please"), 500)["message"]
    assert "Condition function must return a string" in message and "seqCondition_0" in message, message


def test_a_sequential_state_defined_in_javascript_starts_and_updates_as_its_reducers_say(py_api, fake):
    """`stateMemoryCode` (the code tab chosen): LangGraph channels whose `default()`
    is each key's start and whose reducer replaces or appends."""
    model = flows.openai_model(fake.url)
    code = ("{\n  seen: { value: (x, y) => x.concat(y), default: () => [$flow.input.length] },\n"
            "  last: { value: (x, y) => y ?? x, default: () => 'nothing yet' },\n};")
    state = flows.node("seqState_0", "seqState", {"stateMemory": "stateMemoryCode", "stateMemoryCode": code,
                                                  "selectedStateTab_seqState_0": "stateMemoryCode"})
    worker = flows.seq_llm("seqLLMNode_0", "first", ["seqStart_0"], human="Seen: {seen}; last: {last}",
                           promptValues=json.dumps({"seen": "$flow.state.seen", "last": "$flow.state.last"}),
                           updateStateMemoryUI=json.dumps([{"key": "seen", "value": "$flow.input"},
                                                           {"key": "last", "value": "$flow.output.content"}]))
    second = flows.seq_llm("seqLLMNode_1", "second", ["seqLLMNode_0"], human="Now: {seen} / {last}",
                           promptValues=json.dumps({"seen": "$flow.state.seen", "last": "$flow.state.last"}))
    nodes = [model, state, flows.seq_start(model, state=flows.ref("seqState_0")), worker, second,
             flows.seq_end("seqEnd_0", "seqLLMNode_1")]
    flow = create_flow(py_api, flows.wired(nodes), type="MULTIAGENT")
    body = ask(py_api, flow, "hey")
    assert body["text"] == 'Echo: Now: [3,"hey"] / Echo: Seen: [3]; last: nothing yet', body["text"]
    # A reducer that neither replaces nor appends, or code that is not an object, fails the run.
    for bad, words in [("{ n: { value: (x, y) => x + y, default: () => 0 } }", "neither replaces nor appends"),
                       ("'just text'", "State must be an object")]:
        state["data"]["inputs"]["stateMemoryCode"] = bad
        flow = create_flow(py_api, flows.wired(nodes), type="MULTIAGENT")
        message = assert_error(predict(py_api, flow, "hey"), 500)["message"]
        assert words in message and "seqState_0" in message, message


# --- Flowise marketplace templates, written by hand from their node tables ---------------

def template_model(fake):
    return flows.flowise_node("chatOpenAI_0", "chatOpenAI", "ChatOpenAI", "Chat Models", {
        "cache": "", "modelName": "gpt-4o", "temperature": "0", "maxTokens": "", "topP": "",
        "frequencyPenalty": "", "presencePenalty": "", "timeout": "", "baseOptions": "",
        "allowImageUploads": "", "imageResolution": "low", "basepath": f"{fake.url}/v1", "openAIApiKey": "sk-good"})


MODEL_OUT = "chatOpenAI-ChatOpenAI|BaseChatModel|BaseLanguageModel|Runnable"
SCHEMA_JS = ("// Fetch schema info\nconst sqlSchema = `CREATE TABLE customers (\n  customerNumber int NOT NULL,\n"
             "  customerName varchar(50) NOT NULL,\n  country varchar(50) NOT NULL,\n)`\n\nreturn sqlSchema;")


def test_flowises_text_to_sql_template_runs(py_api, fake):
    """"Text to SQL" (supervisor, three workers): the SQL Expert's prompt takes the
    schema a customFunction returns, through `promptValues`."""
    tool = py_api.post("/tools", json={"name": "execute_sql", "description": "Runs SQL", "code": "result = 'ok'"})
    assert tool.status_code == 201, tool.text
    supervisor = flows.flowise_node("supervisor_0", "supervisor", "Supervisor", "Multi Agents", {
        "supervisorName": "Supervisor",
        "supervisorPrompt": ("You are a supervisor tasked with managing a conversation between the following "
                             "workers: {team_members}.\nGiven the following user request, respond with the worker "
                             "to act next.\nWhen finished, respond with FINISH."),
        "model": "{{chatOpenAI_0.data.instance}}", "recursionLimit": 100, "inputModeration": ""})

    def worker(node_id, name, prompt, values, tools=()):
        return flows.flowise_node(node_id, "worker", "Worker", "Multi Agents", {
            "workerName": name, "workerPrompt": prompt, "tools": list(tools),
            "supervisor": "{{supervisor_0.data.instance}}", "model": "", "promptValues": json.dumps(values),
            "maxIterations": ""})

    expert = worker("worker_0", "SQL Expert",
                    "As an SQL Expert at {company}, you are given the following schema:\n{schema}\n\n"
                    "Only output SQL query.",
                    {"company": "Flowise Inc", "schema": "{{customFunction_0.data.instance}}"})
    executor = worker("worker_1", "SQL Executor", "As an SQL Executor at {company}, use the execute_sql tool.",
                      {"company": "Flowise Inc"}, tools=["{{customTool_0.data.instance}}"])
    reviewer = worker("worker_2", "SQL Reviewer", "As an SQL Code Reviewer at {company}, review the query.",
                      {"company": "Flowise Inc"})
    function = flows.flowise_node("customFunction_0", "customFunction", "CustomFunction", "Utilities", {
        "functionInputVariables": "", "functionName": "", "javascriptFunction": SCHEMA_JS}, {"output": "output"})
    custom_tool = flows.flowise_node("customTool_0", "customTool", "CustomTool", "Tools",
                               {"selectedTool": tool.json()["id"]})
    edges = [flows.flowise_edge("chatOpenAI_0", MODEL_OUT, "supervisor_0", "model-BaseChatModel"),
             flows.flowise_edge("customFunction_0", "output-string|number|boolean|json|array", "worker_0",
                          "promptValues-json"),
             flows.flowise_edge("customTool_0", "customTool-CustomTool|Tool|StructuredTool|Runnable", "worker_1",
                          "tools-Tool")]
    edges += [flows.flowise_edge("supervisor_0", "supervisor-Supervisor", w, "supervisor-Supervisor")
              for w in ("worker_0", "worker_1", "worker_2")]
    flow = create_flow(py_api, {"nodes": [template_model(fake), supervisor, expert, executor, reviewer, function,
                                          custom_tool], "edges": edges}, type="MULTIAGENT")
    marker = nonce()
    body = ask(py_api, flow, f'Customers per country? ROUTE "SQL Expert" {marker}')
    assert [s["agentName"] for s in body["agentReasoning"]] == ["SQL Expert"]
    prompts = [m["content"] for b in fake.bodies("/chat/completions", marker) for m in b["messages"]
               if m["role"] == "system" and m["content"].startswith("As an SQL Expert")]
    assert prompts and "at Flowise Inc, you are given" in prompts[0], prompts
    assert "CREATE TABLE customers (\n  customerNumber int NOT NULL," in prompts[0], prompts[0]


def test_flowises_patient_concierge_template_runs(py_api, fake):
    """"Patient Concierge" (sequential agents): the identity agent's JavaScript
    (`updateStateMemoryCode`) keeps the identity tool's answer as `userInfo`; the
    condition then sends the session's next question to the concierge."""
    identity_tool = py_api.post("/tools", json={
        "name": "patient_identity_database", "description": "Checks a patient's identity",
        "code": "result = '{\"name\": \"Ada\", \"userId\": 7}'"})
    records_tool = py_api.post("/tools", json={
        "name": "patient_information_database", "description": "A patient's procedures",
        "code": "result = 'MRI on 03-04-2025'"})
    assert identity_tool.status_code == 201 and records_tool.status_code == 201
    seq_ref = "{{seqCondition_0.data.instance}}"
    nodes = [
        template_model(fake),
        flows.flowise_node("seqStart_0", "seqStart", "Start", "Sequential Agents", {
            "model": "{{chatOpenAI_0.data.instance}}", "agentMemory": "{{agentMemory_0.data.instance}}",
            "state": "{{seqState_0.data.instance}}", "inputModeration": ""}),
        flows.flowise_node("agentMemory_0", "agentMemory", "AgentMemory", "Memory", {
            "databaseType": "sqlite", "databaseFilePath": "", "additionalConfig": ""}),
        flows.flowise_node("seqState_0", "seqState", "State", "Sequential Agents", {
            "stateMemory": "stateMemoryUI", "selectedStateTab_seqState_0": "stateMemoryUI",
            "stateMemoryUI": json.dumps([{"key": "userInfo", "type": "Replace", "defaultValue": "",
                                          "actions": "", "id": 1}])}),
        flows.flowise_node("seqCondition_0", "seqCondition", "Condition", "Sequential Agents", {
            "conditionName": "If user has been verified", "sequentialNode": ["{{seqStart_0.data.instance}}"],
            "condition": "", "selectedConditionFunctionTab_seqCondition_0": "conditionUI",
            "conditionUI": json.dumps([{"variable": "$flow.state.userInfo", "operation": "Is Not Empty",
                                        "value": "", "output": "Concierge", "actions": "", "id": 0}])},
                     {"output": "next"}),
        flows.flowise_node("seqAgent_0", "seqAgent", "Agent", "Sequential Agents", {
            "agentName": "Concierge", "systemMessagePrompt": "You are the Assistant in our Patient Concierge system.",
            "humanMessagePrompt": "", "tools": ["{{customTool_1.data.instance}}"],
            "sequentialNode": [seq_ref, seq_ref], "model": "", "interrupt": "", "promptValues": "",
            "updateStateMemory": "updateStateMemoryUI", "selectedUpdateStateMemoryTab_seqAgent_0": "updateStateMemoryUI",
            "maxIterations": ""}),
        flows.flowise_node("seqAgent_1", "seqAgent", "Agent", "Sequential Agents", {
            "agentName": "Identity Verification",
            "systemMessagePrompt": "You are an Identity Verfication Specialist in the Patient Concierge system.",
            "humanMessagePrompt": "", "tools": ["{{customTool_0.data.instance}}"],
            "sequentialNode": [seq_ref, seq_ref], "model": "", "interrupt": "", "promptValues": "",
            "updateStateMemory": "updateStateMemoryUI",
            "selectedUpdateStateMemoryTab_seqAgent_1": "updateStateMemoryCode",
            "updateStateMemoryCode": (
                "const result = $flow.output;\nconst usedTools = result.usedTools ?? [];\n\n"
                "// Check if correct tool is being used\n"
                "const calledTool =  usedTools.find((usedTool) => usedTool.tool === \"patient_identity_database\");\n"
                "if (!calledTool) return {};\n\n\ntry {\n  const parsedToolOutput = JSON.parse(calledTool.toolOutput);\n"
                "  return {\n    userInfo: parsedToolOutput // parsing tool output since its always string\n  };\n"
                "} catch (e) {\n  return {};\n}"),
            "maxIterations": ""}),
        flows.flowise_node("seqEnd_0", "seqEnd", "End", "Sequential Agents", {"sequentialNode": "{{seqAgent_0.data.instance}}"}),
        flows.flowise_node("seqEnd_1", "seqEnd", "End", "Sequential Agents", {"sequentialNode": "{{seqAgent_1.data.instance}}"}),
        flows.flowise_node("customTool_0", "customTool", "CustomTool", "Tools", {"selectedTool": identity_tool.json()["id"]}),
        flows.flowise_node("customTool_1", "customTool", "CustomTool", "Tools", {"selectedTool": records_tool.json()["id"]}),
    ]
    start_types = "sequentialNode-Start | Agent | LLMNode | ToolNode"
    agent_in = "sequentialNode-Start | Agent | Condition | LLMNode | ToolNode"
    tool_out = "customTool-CustomTool|Tool|StructuredTool|Runnable"
    edges = [
        flows.flowise_edge("seqState_0", "seqState-State", "seqStart_0", "state-State"),
        flows.flowise_edge("agentMemory_0", "agentMemory-AgentMemory|BaseCheckpointSaver", "seqStart_0",
                     "agentMemory-BaseCheckpointSaver"),
        flows.flowise_edge("chatOpenAI_0", MODEL_OUT, "seqStart_0", "model-BaseChatModel"),
        flows.flowise_edge("seqStart_0", "seqStart-Start", "seqCondition_0", start_types),
        flows.flowise_edge("customTool_0", tool_out, "seqAgent_1", "tools-Tool"),
        flows.flowise_edge("customTool_1", tool_out, "seqAgent_0", "tools-Tool"),
        flows.flowise_edge("seqCondition_0", "concierge-Condition", "seqAgent_0", agent_in),
        flows.flowise_edge("seqCondition_0", "end-Condition", "seqAgent_1", agent_in),
        flows.flowise_edge("seqAgent_0", "seqAgent-Agent", "seqEnd_0", "sequentialNode-Agent | Condition | LLMNode | ToolNode"),
        flows.flowise_edge("seqAgent_1", "seqAgent-Agent", "seqEnd_1", "sequentialNode-Agent | Condition | LLMNode | ToolNode"),
    ]
    flow = create_flow(py_api, {"nodes": nodes, "edges": edges}, type="MULTIAGENT")
    chat = f"chat-{nonce()}"
    first = ask(py_api, flow, 'I am Ada, born 01-02-1990. CALL patient_identity_database {"name": "Ada"}', chatId=chat)
    assert [s["agentName"] for s in first["agentReasoning"]] == ["Identity Verification"]
    assert first["agentReasoning"][0]["state"] == {"userInfo": {"name": "Ada", "userId": 7}}, first
    second = ask(py_api, flow, 'My procedures? CALL patient_information_database {"name": "Ada"}', chatId=chat)
    assert [s["agentName"] for s in second["agentReasoning"]] == ["Concierge"]
    assert second["text"] == "Done: MRI on 03-04-2025"
    # Another session is not verified.
    other = ask(py_api, flow, "Hello", chatId=f"other-{nonce()}")
    assert [s["agentName"] for s in other["agentReasoning"]] == ["Identity Verification"]
