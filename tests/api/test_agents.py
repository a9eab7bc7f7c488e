"""Agents (toolAgent, conversationalAgent, reactAgentChat) over the fake providers:
native tool calls in each provider's wire format, usedTools in JSON and SSE, the
iteration limit, memory, parallel and unknown tool calls, Azure and Mistral
endpoints, and concurrent runs that never mix their tools' results."""

import threading

import pytest

import flows
from fakes import GOOD_KEY, FakeProviders
from prediction_client import assert_stream, ask, create_flow, nonce, predict, stream, tools_used
from weir_harness import Api, assert_error


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def six_times_seven(marker=""):
    return f'What is six times seven? {marker} CALL calculator {{"input": "6 * 7"}}'


# Per provider: the model node, the path its requests go to, and a check of the
# tool offered on the first request and of the tool turns on the follow-up.

def openai_turns(first, follow):
    [tool] = first["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "calculator"
    assert "input" in tool["function"]["parameters"]["properties"]
    [assistant] = [m for m in follow["messages"] if m.get("tool_calls")]
    [call] = assistant["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "calculator"
    assert isinstance(call["function"]["arguments"], str) and '"6 * 7"' in call["function"]["arguments"]
    [result] = [m for m in follow["messages"] if m["role"] == "tool"]
    assert (result["tool_call_id"], result["content"]) == (call["id"], "42")
    assert follow["messages"].index(assistant) + 1 == follow["messages"].index(result)


def anthropic_turns(first, follow):
    [tool] = first["tools"]
    assert tool["name"] == "calculator" and "input" in tool["input_schema"]["properties"]
    [use] = [b for m in follow["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)
             for b in m["content"] if b["type"] == "tool_use"]
    assert (use["name"], use["input"]) == ("calculator", {"input": "6 * 7"})
    [result] = [b for m in follow["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                for b in m["content"] if b["type"] == "tool_result"]
    assert result["tool_use_id"] == use["id"] and result["content"] in ("42", [{"type": "text", "text": "42"}])


def ollama_turns(first, follow):
    [tool] = first["tools"]
    assert tool["function"]["name"] == "calculator"
    [assistant] = [m for m in follow["messages"] if m.get("tool_calls")]
    assert assistant["tool_calls"][0]["function"] == {"name": "calculator", "arguments": {"input": "6 * 7"}}
    [result] = [m for m in follow["messages"] if m["role"] == "tool"]
    assert result["content"] == "42"


PROVIDERS = {
    "openai": (flows.openai_model, "/chat/completions", openai_turns),
    "anthropic": (flows.anthropic_model, "/v1/messages", anthropic_turns),
    "ollama": (flows.ollama_model, "/api/chat", ollama_turns),
}


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_tool_agent_calls_the_calculator(api, fake, provider):
    model, suffix, check_turns = PROVIDERS[provider]
    flow = create_flow(api, flows.tool_agent(model(fake.url), [flows.calculator()], systemMessage="You compute."))
    marker = nonce()
    body = ask(api, flow, six_times_seven(marker))
    assert body["text"] == "Done: 42"
    assert tools_used(body["usedTools"]) == [("calculator", {"input": "6 * 7"}, "42")]
    first, follow = fake.bodies(suffix, marker)
    check_turns(first, follow)


def test_streamed_agent_answer(api, fake):
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.calculator()]))
    body = ask(api, flow, six_times_seven())
    after = assert_stream(stream(api, flow, six_times_seven()), body["text"], ["usedTools"])
    assert tools_used(after["usedTools"]) == tools_used(body["usedTools"])


def test_max_iterations_ends_the_run_with_an_answer(api, fake):
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.calculator()], maxIterations=3))
    body = ask(api, flow, f'Keep adding. LOOP calculator {{"input": "1 + 1"}} {nonce()}')
    assert tools_used(body["usedTools"]) == [("calculator", {"input": "1 + 1"}, "2")] * 3
    text = body["text"].lower()
    assert "stop" in text and "3" in text and "iteration" in text, body["text"]


@pytest.mark.parametrize("kind", ["conversationalAgent", "reactAgentChat"])
def test_other_agents_use_tools_too(api, fake, kind):
    flow = create_flow(api, flows.agent(flows.openai_model(fake.url), [flows.calculator()],
                                        memory=flows.buffer_memory(), kind=kind))
    body = ask(api, flow, six_times_seven())
    assert body["text"] == "Done: 42"
    assert tools_used(body["usedTools"]) == [("calculator", {"input": "6 * 7"}, "42")]


def test_memory_carries_the_conversation(api, fake):
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.calculator()],
                                             memory=flows.buffer_memory()))
    first = 'Add these. CALL calculator {"input": "2 + 3"}'
    assert ask(api, flow, first, chatId="agent-memory")["text"] == "Done: 5"
    second = ask(api, flow, "What did I ask?", chatId="agent-memory")
    assert second["text"] == "Echo: What did I ask?" and "usedTools" not in second
    said = [m["content"] for m in fake.last("/chat/completions")["messages"]
            if m["role"] in ("user", "assistant") and m.get("content")]
    assert said[-3:] == [first, "Done: 5", "What did I ask?"]
    # Another session starts empty.
    ask(api, flow, "Fresh start", chatId="agent-memory-2")
    assert [m["content"] for m in fake.last("/chat/completions")["messages"] if m["role"] == "user"] == ["Fresh start"]


def test_the_local_model_cannot_drive_an_agent(api):
    flow = create_flow(api, flows.tool_agent(flows.local_model(), [flows.calculator()]))
    assert "chatLocal" in assert_error(predict(api, flow, "hi"), 400)["message"]


def test_parallel_tool_calls_in_one_turn(api, fake):
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.calculator()]))
    marker = nonce()
    body = ask(api, flow, f'PARALLEL calculator {{"input": "1 + 1"}} && calculator {{"input": "2 + 2"}} {marker}')
    assert tools_used(body["usedTools"]) == [("calculator", {"input": "1 + 1"}, "2"),
                                             ("calculator", {"input": "2 + 2"}, "4")]
    assert body["text"] == "Done: 4"
    _, follow = fake.bodies("/chat/completions", marker)
    [assistant] = [m for m in follow["messages"] if m.get("tool_calls")]
    results = [m for m in follow["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == [c["id"] for c in assistant["tool_calls"]]
    assert [m["content"] for m in results] == ["2", "4"]


def test_a_tool_the_model_invents_is_a_tool_error(api, fake):
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.calculator()]))
    body = ask(api, flow, f'CALL no_such_tool {{"x": 1}} {nonce()}')
    [(tool, arguments, output)] = tools_used(body["usedTools"])
    assert (tool, arguments) == ("no_such_tool", {"x": 1}) and output.startswith("Error:")
    assert body["text"] == f"Done: {output}"


def test_calculator_errors_are_tool_errors(api, fake):
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.calculator()]))
    body = ask(api, flow, 'CALL calculator {"input": "6 * "}')
    [(_, _, output)] = tools_used(body["usedTools"])
    assert output.startswith("Error:")


def test_a_retriever_tool_without_a_retriever_is_a_400(api, fake):
    tool = flows.retriever_tool(name="docs", description="Searches the handbook")
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [tool]))
    message = assert_error(predict(api, flow, f'CALL docs {{"input": "holidays"}} {nonce()}'), 400)["message"]
    assert "retrieverTool_0" in message and "retriever" in message


def test_a_vector_store_without_embeddings_is_a_400(api, fake):
    store = flows.node("memoryVectorStore_0", "memoryVectorStore", {})
    tool = flows.retriever_tool(name="docs", retriever=flows.ref("memoryVectorStore_0"))
    flow = flows.tool_agent(flows.openai_model(fake.url), [tool])
    flow["nodes"].append(store)
    message = assert_error(predict(api, create_flow(api, flow), "hi"), 400)["message"]
    assert "memoryVectorStore" in message


def test_current_date_time_tool(api, fake):
    import datetime
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.current_date_time()]))
    body = ask(api, flow, "What time is it? CALL current_date_time {}")
    [(tool, arguments, output)] = tools_used(body["usedTools"])
    assert (tool, arguments) == ("current_date_time", {})
    now = datetime.datetime.fromisoformat(output.replace("Z", "+00:00"))
    assert now.utcoffset() == datetime.timedelta(0)
    assert abs((datetime.datetime.now(datetime.timezone.utc) - now).total_seconds()) < 60


def test_azure_openai_agent(api, fake):
    flow = create_flow(api, flows.tool_agent(flows.azure_model(fake.url, deployment="dep-7"), [flows.calculator()]))
    assert ask(api, flow, six_times_seven())["text"] == "Done: 42"
    path, headers, _ = fake.last_request("/chat/completions")
    assert path == "/openai/deployments/dep-7/chat/completions?api-version=2024-06-01"
    assert headers["api-key"] == GOOD_KEY and "authorization" not in headers


def test_azure_openai_the_flowise_way(api, fake, make_weir):
    """Flowise's `basepath` (the deployments root, the deployment after it), and a
    node that names nothing but its model, everything else from the server's
    AZURE_OPENAI_* variables (base path or endpoint), as LangChain reads them."""
    def azure(**inputs):
        return flows.node("azureChatOpenAI_0", "azureChatOpenAI", {"modelName": "gpt-4o", **inputs})

    def asked(api, model):
        assert ask(api, create_flow(api, flows.conversation(model)), "hi azure")["text"] == "Echo: hi azure"
        path, headers, sent = fake.last_request("/chat/completions")
        assert headers["api-key"] == GOOD_KEY and "authorization" not in headers and sent["model"] == "gpt-4o"
        return path

    assert asked(api, azure(azureOpenAIApiKey=GOOD_KEY, azureOpenAIApiInstanceName="not-used",
                            azureOpenAIApiDeploymentName="dep-9", azureOpenAIApiVersion="2024-10-21",
                            basepath=f"{fake.url}/openai/deployments/")) == \
        "/openai/deployments/dep-9/chat/completions?api-version=2024-10-21"

    on_base_path = make_weir()
    on_base_path.env.update(AZURE_OPENAI_API_KEY=GOOD_KEY, AZURE_OPENAI_BASE_PATH=f"{fake.url}/openai/deployments",
                            AZURE_OPENAI_API_DEPLOYMENT_NAME="env-dep", AZURE_OPENAI_API_VERSION="2025-01-01")
    on_base_path.start()
    assert asked(Api(on_base_path.url, on_base_path.create_key()), azure()) == \
        "/openai/deployments/env-dep/chat/completions?api-version=2025-01-01"

    on_endpoint = make_weir()
    on_endpoint.env.update(AZURE_OPENAI_API_KEY=GOOD_KEY, AZURE_OPENAI_ENDPOINT=fake.url)
    on_endpoint.start()
    endpoint_api = Api(on_endpoint.url, on_endpoint.create_key())
    assert asked(endpoint_api, azure(azureOpenAIApiDeploymentName="dep-e")) == \
        "/openai/deployments/dep-e/chat/completions?api-version=2024-10-21"
    # Without a deployment there is nothing to call: a 400 that says what is missing.
    flow = create_flow(endpoint_api, flows.conversation(azure()))
    assert_error(predict(endpoint_api, flow, "hi"), 400, "deployment")
    # The server's key never goes where a node points: such a node brings its own.
    before = fake.count("/chat/completions")
    for own in ({"basepath": f"{fake.url}/openai/deployments"}, {"basePath": f"{fake.url}/openai/deployments/d"}):
        flow = create_flow(endpoint_api, flows.conversation(azure(azureOpenAIApiDeploymentName="d", **own)))
        assert_error(predict(endpoint_api, flow, "hi"), 400, "AZURE_OPENAI_API_KEY")
    flow = create_flow(endpoint_api, flows.conversation(azure(azureOpenAIApiInstanceName="evil.example/#",
                                                              azureOpenAIApiDeploymentName="d")))
    assert_error(predict(endpoint_api, flow, "hi"), 400, "instance name")
    assert fake.count("/chat/completions") == before


def test_mistral_agent(api, fake):
    flow = create_flow(api, flows.tool_agent(flows.mistral_model(fake.url), [flows.calculator()]))
    assert ask(api, flow, six_times_seven())["text"] == "Done: 42"
    path, headers, sent = fake.last_request("/chat/completions")
    assert path == "/v1/chat/completions" and headers["authorization"] == f"Bearer {GOOD_KEY}"
    assert sent["model"] == "mistral-test" and sent["tools"][0]["function"]["name"] == "calculator"


def test_concurrent_agents_keep_their_own_tool_results(api, fake):
    flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.calculator()]))
    results = {}

    def run(i):
        r = predict(api, flow, f'CALL calculator {{"input": "{i} * 1000 + 7"}}', chatId=f"par-{i}")
        results[i] = (r.status_code, r.json())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(20):
        status, body = results[i]
        assert status == 200, body
        assert body["text"] == f"Done: {i * 1000 + 7}", (i, body)
        assert tools_used(body["usedTools"]) == [("calculator", {"input": f"{i} * 1000 + 7"}, str(i * 1000 + 7))]
