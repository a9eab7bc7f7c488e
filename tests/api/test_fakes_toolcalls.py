"""The fake providers' tool calling, driven directly (no weir): each provider's wire
format read back the way a client reads it, and the directives of fakes.py."""

import json

import pytest
import requests

from fakes import GOOD_KEY, FakeProviders

CALC = {"name": "calculator", "description": "Math", "parameters": {
    "type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}}


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def openai(fake, messages, tools=(CALC,), path="/v1/chat/completions", headers=None):
    body = {"model": "m", "stream": True, "messages": messages}
    if tools:
        body["tools"] = [{"type": "function", "function": t} for t in tools]
    r = requests.post(fake.url + path, json=body, timeout=10,
                      headers=headers or {"Authorization": f"Bearer {GOOD_KEY}"})
    assert r.status_code == 200, r.text
    text, calls, finish, pieces = "", {}, None, {}
    for line in r.text.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        choice = json.loads(line[6:])["choices"][0]
        finish = choice.get("finish_reason") or finish
        text += choice["delta"].get("content") or ""
        for part in choice["delta"].get("tool_calls", []):
            call = calls.setdefault(part["index"], {"id": None, "name": None, "arguments": ""})
            call["id"] = part.get("id") or call["id"]
            call["name"] = part.get("function", {}).get("name") or call["name"]
            call["arguments"] += part.get("function", {}).get("arguments", "")
            if part.get("function", {}).get("arguments"):
                pieces[part["index"]] = pieces.get(part["index"], 0) + 1
    return text, [calls[i] for i in sorted(calls)], finish, pieces


def anthropic(fake, messages, tools=(CALC,), system=None):
    body = {"model": "c", "max_tokens": 100, "stream": True, "messages": messages}
    if tools:
        body["tools"] = [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
                         for t in tools]
    if system:
        body["system"] = system
    r = requests.post(fake.url + "/v1/messages", json=body, headers={"x-api-key": GOOD_KEY}, timeout=10)
    text, blocks, stop, pieces = "", {}, None, 0
    for line in r.text.splitlines():
        if not line.startswith("data: "):
            continue
        event = json.loads(line[6:])
        if event["type"] == "content_block_start" and event["content_block"]["type"] == "tool_use":
            blocks[event["index"]] = {**event["content_block"], "json": ""}
        elif event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta":
            blocks[event["index"]]["json"] += event["delta"]["partial_json"]
            pieces += 1
        elif event["type"] == "content_block_delta":
            text += event["delta"]["text"]
        elif event["type"] == "message_delta":
            stop = event["delta"]["stop_reason"]
    return text, [blocks[i] for i in sorted(blocks)], stop, pieces


def ollama(fake, messages, tools=(CALC,)):
    body = {"model": "l", "stream": True, "messages": messages}
    if tools:
        body["tools"] = [{"type": "function", "function": t} for t in tools]
    r = requests.post(fake.url + "/api/chat", json=body, timeout=10)
    chunks = [json.loads(line) for line in r.text.splitlines() if line.strip()]
    assert chunks[-1]["done"] is True
    calls = [c for chunk in chunks for c in chunk["message"].get("tool_calls", [])]
    return "".join(chunk["message"]["content"] for chunk in chunks), calls


def test_openai_calls_one_tool_per_turn_then_answers(fake):
    question = {"role": "user", "content": 'CALL calculator {"input": "6*7"} ;; CALL calculator {"input": "1+1"}'}
    text, calls, finish, pieces = openai(fake, [question])
    assert (text, finish) == ("", "tool_calls")
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("calculator", {"input": "6*7"})]
    assert calls[0]["id"].startswith("call_") and pieces[0] >= 2
    first = {"role": "assistant", "content": None, "tool_calls": [
        {"id": calls[0]["id"], "type": "function", "function": {"name": "calculator", "arguments": calls[0]["arguments"]}}]}
    _, calls, _, _ = openai(fake, [question, first, {"role": "tool", "tool_call_id": calls[0]["id"], "content": "42"}])
    assert json.loads(calls[0]["arguments"]) == {"input": "1+1"}
    history = [question, first, {"role": "tool", "tool_call_id": "x", "content": "42"},
               {"role": "assistant", "content": None, "tool_calls": []}, {"role": "tool", "tool_call_id": "y", "content": "2"}]
    assert openai(fake, history)[:3] == ("Done: 2", [], "stop")


def test_without_tools_or_directive_it_echoes(fake):
    assert openai(fake, [{"role": "user", "content": 'CALL calculator {"input": "1"}'}], tools=())[0] == \
        'Echo: CALL calculator {"input": "1"}'
    assert openai(fake, [{"role": "user", "content": "plain"}])[0] == "Echo: plain"
    # An earlier turn's directive does not count: only the last user text message.
    earlier = [{"role": "user", "content": 'CALL calculator {"input": "1"}'},
               {"role": "assistant", "content": "Done: 1"}, {"role": "user", "content": "and now?"}]
    assert openai(fake, earlier)[0] == "Echo: and now?"


def test_loop_parallel_and_system_prompt_directives(fake):
    loop = [{"role": "user", "content": 'LOOP calculator {"input": "1+1"}'},
            {"role": "assistant", "content": None, "tool_calls": []}, {"role": "tool", "tool_call_id": "a", "content": "2"}]
    assert openai(fake, loop)[2] == "tool_calls"
    parallel = {"role": "user", "content": 'PARALLEL calculator {"input": "1+1"} && calculator {"input": "2+2"}'}
    _, calls, _, _ = openai(fake, [parallel])
    assert [json.loads(c["arguments"]) for c in calls] == [{"input": "1+1"}, {"input": "2+2"}]
    assert len({c["id"] for c in calls}) == 2
    results = [{"role": "tool", "tool_call_id": c["id"], "content": r} for c, r in zip(calls, ["2", "4"])]
    assert openai(fake, [parallel, {"role": "assistant", "content": None}, *results])[0] == "Done: 4"
    system = [{"role": "system", "content": 'You add. CALL calculator {{"input": "2+3"}}'},
              {"role": "user", "content": "ROUTE a,b go"}]
    assert json.loads(openai(fake, system)[1][0]["arguments"]) == {"input": "2+3"}


def test_route_is_stateful_per_question(fake):
    route = {"name": "route", "description": "pick", "parameters": {"type": "object"}}
    messages = [{"role": "system", "content": "You supervise"}, {"role": "user", "content": "ROUTE alpha,beta nonce-1"},
                {"role": "user", "content": "Who should act next?"}]
    picks = [json.loads(openai(fake, messages, tools=(route,))[1][0]["arguments"]) for _ in range(3)]
    assert [p["next"] for p in picks] == ["alpha", "beta", "FINISH"]
    assert [p["instructions"] for p in picks] == ["do part 1", "do part 2", "do part 3"]
    assert fake.supervisor_calls("nonce-1") == 3
    # A worker of the same conversation (no route tool) is not a supervisor call.
    assert openai(fake, messages)[0] == "Echo: Who should act next?"


def test_anthropic_tool_use_blocks(fake):
    question = {"role": "user", "content": 'CALL calculator {"input": "6*7"}'}
    text, blocks, stop, pieces = anthropic(fake, [question], system="Be exact.")
    assert (text, stop) == ("", "tool_use") and pieces >= 2
    assert blocks[0]["name"] == "calculator" and blocks[0]["id"].startswith("toolu_")
    assert json.loads(blocks[0]["json"]) == {"input": "6*7"}
    follow = [question, {"role": "assistant", "content": [
                  {"type": "tool_use", "id": blocks[0]["id"], "name": "calculator", "input": {"input": "6*7"}}]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": blocks[0]["id"], "content": "42"}]}]
    assert anthropic(fake, follow)[0::2] == ("Done: 42", "end_turn")
    assert anthropic(fake, [{"role": "user", "content": "hi"}], tools=())[0] == "Echo: hi"


def test_ollama_tool_calls(fake):
    question = {"role": "user", "content": 'CALL calculator {"input": "6*7"}'}
    text, calls = ollama(fake, [question])
    assert text == "" and calls == [{"function": {"name": "calculator", "arguments": {"input": "6*7"}}}]
    follow = [question, {"role": "assistant", "content": "", "tool_calls": calls},
              {"role": "tool", "content": "42", "tool_name": "calculator"}]
    assert ollama(fake, follow) == ("Done: 42", [])


def test_azure_path_and_key_are_recorded(fake):
    path = "/openai/deployments/dep-1/chat/completions?api-version=2024-06-01"
    text = openai(fake, [{"role": "user", "content": "hi azure"}], path=path, headers={"api-key": GOOD_KEY})[0]
    assert text == "Echo: hi azure"
    recorded, headers, _ = fake.last_request("/chat/completions")
    assert recorded == path and headers["api-key"] == GOOD_KEY and "authorization" not in headers
    bad = requests.post(fake.url + path, json={"messages": []}, headers={"api-key": "nope"}, timeout=5)
    assert bad.status_code == 401
