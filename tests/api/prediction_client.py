"""Client helpers of the engine tests: create a chatflow, ask it in JSON or SSE,
and check an SSE answer against the contract (docs/api.md "Predictions")."""

import json
import uuid

# Events that may follow the tokens, in this order, each only when non-empty.
AFTER_TOKENS = ["sourceDocuments", "usedTools", "agentReasoning", "artifacts"]


def nonce() -> str:
    """A unique marker to put in a question (the fake's ROUTE state is per question,
    and `fake.bodies(suffix, marker)` finds one run's provider calls)."""
    return f"n-{uuid.uuid4().hex[:10]}"


def create_flow(api, flow_data, **fields) -> str:
    r = api.post("/chatflows", json={"name": "flow", "flowData": flow_data, **fields})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def predict(api, flow_id, question, key="default", **body):
    return api.post(f"/prediction/{flow_id}", json={"question": question, **body}, key=key)


def ask(api, flow_id, question, **body) -> dict:
    """The JSON answer of a prediction that must succeed."""
    r = predict(api, flow_id, question, **body)
    assert r.status_code == 200, r.text
    return r.json()


def sse_frames(response):
    """The JSON frames of an SSE answer, checking Flowise's framing: each is
    `{"event", "data"}`, and the end of a model's thinking also has its `duration`."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream"), response.headers
    frames = []
    name = None
    for raw in response.iter_lines(decode_unicode=True):
        if raw.startswith("event:"):
            name = raw[len("event:"):].strip()
        elif raw.startswith("data:"):
            payload = json.loads(raw[len("data:"):].strip())
            keys = {"event", "data", "duration"} if payload.get("event") == "thinking" else {"event", "data"}
            assert {"event", "data"} <= set(payload) <= keys, payload
            assert payload["event"] == name, (payload, name)
            frames.append(payload)
    return frames


def sse_events(response):
    """(event, data) pairs of an SSE answer, checking Flowise's framing."""
    return [(f["event"], f["data"]) for f in sse_frames(response)]


def stream(api, flow_id, question, **body):
    """The SSE events of a streamed prediction."""
    r = api.post(f"/prediction/{flow_id}", json={"question": question, "streaming": True, **body},
                 headers={"Accept": "text/event-stream"}, stream=True)
    return sse_events(r)


def assert_stream(events, text, extras):
    """`start`, `token`*, then exactly the `extras` (names from AFTER_TOKENS, in
    the contract's order), `usageMetadata` when the models reported tokens, `metadata`, `end`; the tokens make `text`, and metadata
    repeats each extra. Returns {event name: data} of the events after the tokens."""
    # An agent's calls are announced as they are made (`calledTools`), a team's
    # steps as they end (`nextAgent`, `agentReasoning` before the answer) and a
    # model's reasoning as it thinks (`thinking`), after an empty `start` (the
    # widget opens the answer at `start`); they are checked where a test is
    # about them, the rest is the contract's sequence.
    assert events[0][0] == "start", events
    answer = next((i for i, (e, _) in enumerate(events) if e == "token"), len(events))
    live = [e for e, _ in events[1:answer] if e != "agentReasoning"]
    assert set(live) <= {"calledTools", "nextAgent", "thinking"}, live
    if answer > 1:
        assert events[0][1] == "", events[0]
        events = [events[0]] + [(e, d) for e, d in events[answer:]]
    names = [e for e, _ in events]
    tokens = [d for e, d in events if e == "token"]
    assert names[0] == "start" and events[0][1] in ("", tokens[0]), names
    count = len(tokens)
    assert names[1:1 + count] == ["token"] * count, names
    # A run whose models reported their tokens says so just before its metadata.
    usage = ["usageMetadata"] if "usageMetadata" in names else []
    expected = [e for e in AFTER_TOKENS if e in extras] + usage + ["metadata", "end"]
    assert names[1 + count:] == expected, names
    assert "".join(tokens) == text
    after = dict(events[1 + count:])
    meta = after["metadata"]
    for key in ("chatId", "chatMessageId", "question", "sessionId"):
        assert meta.get(key), (key, meta)
    for extra in extras:
        assert after[extra] and meta[extra] == after[extra], (extra, after[extra], meta.get(extra))
    assert after["end"] == "[DONE]"
    return after


def tools_used(items):
    """(tool, toolInput, toolOutput) of each usedTools item."""
    return [(t["tool"], t["toolInput"], t["toolOutput"]) for t in items]
