"""Flowise 3.1's webhook Start node (`startInputType: webhookTrigger`) on weir's
trigger engine: its address `/api/v1/webhook/:chatflowId` (no API key) checks
each call as the node says — method, content type, signature (HMAC-SHA256 or a
plain token), the validation rows — before anything runs, hands the flow
`$webhook.body/headers/query`, and answers with the flow's JSON. The chatflow
owns a webhook trigger (listed in /triggers), whose secret is made with
`POST /chatflows/:id/webhook-secret`. The Start nodes are written as Flowise
3.1 exports them."""
import hashlib
import hmac
import json
import time
import uuid

import pytest
import requests

from flows import af_human_input, af_llm, af_openai, af_reply, af_start, agentflow
from prediction_client import sse_events, stream
from fakes import GOOD_KEY, FakeProviders, FakeSite
from weir_harness import Api, Weir, assert_error, backends, wait_for

REPLY, HUMAN = "directReplyAgentflow_0", "humanInputAgentflow_0"


def webhook_start(**inputs):
    """A Start node as Flowise 3.1 writes a webhook trigger."""
    values = {"startInputType": "webhookTrigger", "webhookMethod": "POST",
              "webhookContentType": "application/json", "webhookURL": "", "webhookInputMode": "text",
              "webhookDefaultInput": "", "webhookEnableAuth": False, "webhookSecret": "",
              "webhookSignatureHeader": "", "webhookSignatureType": "hmac-sha256",
              "webhookResponseMode": "sync", "callbackUrl": "", "callbackSecret": "",
              "webhookEnableValidation": False, "webhookQueryParams": "", "webhookBodyParams": "",
              "webhookHeaderParams": ""}
    return af_start(**{**values, **inputs})


def save(api, start, reply="Got: {{ question }}"):
    nodes = [start, af_reply(REPLY, reply)]
    r = api.post("/chatflows", json={"name": "hook", "type": "AGENTFLOW",
                                     "flowData": agentflow(nodes, [(nodes[0]["id"], REPLY)])})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def call(api, flow, method="POST", **kw):
    """A call from the outside: no API key."""
    return requests.request(method, f"{api.url}/api/v1/webhook/{flow}", timeout=30, **kw)


def signed(secret, body: bytes, prefix="sha256="):
    return prefix + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_a_webhook_start_node_answers_at_its_address(api):
    flow = save(api, webhook_start(webhookDefaultInput="Order from {{ $webhook.body.customer.name }}"),
                reply="Got: {{ question }} / {{ $webhook.query.ref }} / {{ $webhook.headers.x-source }}"
                      " / {{ $webhook.headers.authorization }} / {{ $webhook.body.customer }}")
    [trigger] = [t for t in api.get("/triggers").json() if t["chatflowId"] == flow]
    assert trigger["type"] == "webhook" and trigger["ownedByChatflow"] is True and trigger["enabled"] is True

    r = call(api, flow, params={"ref": "r1"}, headers={"X-Source": "shop", "Authorization": "Bearer theirs"},
             json={"customer": {"name": "Ada"}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["text"] == 'Got: Order from Ada / r1 / shop / [REDACTED] / {"name":"Ada"}'
    assert body["question"] == "Order from Ada" and body["chatId"]
    # The call is a firing of the trigger: it leaves a result.
    [result] = api.get(f"/triggers/{trigger['id']}/results").json()
    assert result["status"] == "success" and result["input"] == "Order from Ada"
    assert result["chatId"] == body["chatId"]
    # A chatId given continues that conversation.
    again = call(api, flow, json={"customer": {"name": "Bo"}, "chatId": "conv-1"}).json()
    assert again["chatId"] == "conv-1"

    # What the node does not take is refused before anything runs.
    assert assert_error(call(api, flow, "GET"), 405)["message"] == "Method GET not allowed. Expected POST"
    r = call(api, flow, data=b"hi", headers={"Content-Type": "text/plain"})
    assert "Content-Type text/plain not allowed" in assert_error(r, 415)["message"]
    assert "must be JSON" in assert_error(call(api, flow, data=b"{oops",
                                               headers={"Content-Type": "application/json"}), 400)["message"]
    assert len(api.get(f"/triggers/{trigger['id']}/results").json()) == 2
    missing = "00000000-0000-4000-8000-000000000000"
    assert assert_error(call(api, missing, json={}), 404)["message"] == f"Chatflow {missing} not found"
    chat = save(api, af_start())
    assert "not configured as a webhook trigger" in assert_error(call(api, chat, json={}), 404)["message"]
    assert "not configured as a webhook trigger" in assert_error(
        api.post(f"/chatflows/{chat}/webhook-secret"), 409)["message"]

    # Changing the Start node away from a webhook removes the address.
    r = api.put(f"/chatflows/{flow}", json={"flowData": json.dumps(agentflow([af_start()]))})
    assert r.status_code == 200, r.text
    assert_error(call(api, flow, json={}), 404)
    assert [t for t in api.get("/triggers").json() if t["chatflowId"] == flow] == []


def test_signatures_are_checked_with_the_chatflows_secret(api):
    flow = save(api, webhook_start(webhookEnableAuth=True, webhookDefaultInput="{{ $webhook.body.n }}"))
    body = b'{"n": 7}'
    json_type = {"Content-Type": "application/json"}
    assert "no secret has been generated" in assert_error(call(api, flow, data=body, headers=json_type),
                                                          409)["message"]
    r = api.post(f"/chatflows/{flow}/webhook-secret")
    assert r.status_code == 200, r.text
    secret = r.json()["webhookSecret"]
    assert len(secret) == 64 and int(secret, 16) >= 0
    # Never shown again.
    assert secret not in json.dumps(api.get("/triggers").json())

    r = call(api, flow, data=body, headers=json_type)
    assert assert_error(r, 401)["message"] == "Missing signature header: x-webhook-signature"
    r = call(api, flow, data=body, headers={**json_type, "X-Webhook-Signature": signed("wrong", body)})
    assert assert_error(r, 401)["message"] == "Invalid webhook signature"
    # Signed over other bytes than those sent.
    r = call(api, flow, data=b'{"n": 8}', headers={**json_type, "X-Webhook-Signature": signed(secret, body)})
    assert_error(r, 401)
    for signature in (signed(secret, body), signed(secret, body, prefix="")):
        r = call(api, flow, data=body, headers={**json_type, "X-Webhook-Signature": signature})
        assert r.status_code == 200, r.text
        assert r.json()["text"] == "Got: 7"

    # Replayed: a delivery id seen before gets the stored answer, and nothing runs again.
    [trigger] = [t for t in api.get("/triggers").json() if t["chatflowId"] == flow]
    runs = len(api.get(f"/triggers/{trigger['id']}/results").json())
    delivery = {**json_type, "X-Webhook-Signature": signed(secret, body), "Idempotency-Key": str(uuid.uuid4())}
    first = call(api, flow, data=body, headers=delivery)
    again = call(api, flow, data=body, headers=delivery)
    assert first.status_code == again.status_code == 200 and again.json() == first.json()
    assert len(api.get(f"/triggers/{trigger['id']}/results").json()) == runs + 1
    # A replay must still be signed.
    assert_error(call(api, flow, data=body, headers={**delivery, "X-Webhook-Signature": signed("x", body)}), 401)

    # A new secret replaces the old; deleting it closes the address to signed calls.
    new = api.post(f"/chatflows/{flow}/webhook-secret").json()["webhookSecret"]
    assert new != secret
    assert_error(call(api, flow, data=body, headers={**json_type, "X-Webhook-Signature": signed(secret, body)}), 401)
    assert api.delete(f"/chatflows/{flow}/webhook-secret").status_code == 204
    assert_error(call(api, flow, data=body, headers={**json_type, "X-Webhook-Signature": signed(new, body)}), 409)

    # A plain token in a header of the node's choosing (saving keeps the secret).
    token_flow = save(api, webhook_start(webhookEnableAuth=True, webhookSignatureType="plain-token",
                                         webhookSignatureHeader="X-Token", webhookDefaultInput="ok"))
    token = api.post(f"/chatflows/{token_flow}/webhook-secret").json()["webhookSecret"]
    assert_error(call(api, token_flow, json={}, headers={"X-Token": token[:-1]}), 401)
    assert call(api, token_flow, json={}, headers={"X-Token": token}).json()["text"] == "Got: ok"


def test_validation_rows_answer_400_naming_the_field(api):
    flow = save(api, webhook_start(
        webhookEnableValidation=True, webhookDefaultInput="{{ $webhook.body.amount }}",
        webhookHeaderParams=[{"name": "X-Tenant", "required": True}],
        webhookQueryParams=[{"name": "page", "required": True}, {"name": "opt", "required": False}],
        webhookBodyParams=[{"name": "amount", "type": "number", "required": True},
                           {"name": "tags", "type": "array[string]", "required": False},
                           {"name": "paid", "type": "boolean", "required": False}]))
    good = {"params": {"page": "1"}, "headers": {"X-Tenant": "acme"}}
    cases = [
        ({**good, "headers": {}, "json": {"amount": 1}}, "Missing required headers: x-tenant"),
        ({**good, "json": {"tags": ["a"]}}, "Missing required webhook body parameters: amount"),
        ({**good, "json": {"amount": "ten"}}, "Invalid type for parameter(s): amount"),
        ({**good, "json": {"amount": 1, "tags": ["a", 2]}}, "Invalid type for parameter(s): tags"),
        ({**good, "json": {"amount": 1, "paid": "yes"}}, "Invalid type for parameter(s): paid"),
        ({**good, "params": {}, "json": {"amount": 1}}, "Missing required query parameters: page"),
    ]
    for kw, message in cases:
        assert message in assert_error(call(api, flow, **kw), 400)["message"], kw
    [trigger] = [t for t in api.get("/triggers").json() if t["chatflowId"] == flow]
    assert api.get(f"/triggers/{trigger['id']}/results").json() == []
    r = call(api, flow, **good, json={"amount": "12.5", "tags": ["a"], "paid": "true"})
    assert r.status_code == 200 and r.json()["text"] == "Got: 12.5", r.text


def test_forms_text_and_the_input_modes(api):
    form = save(api, webhook_start(webhookContentType="application/x-www-form-urlencoded",
                                   webhookDefaultInput="{{ $webhook.body.event }} by {{ $webhook.body.user }}"))
    # Flowise's `payload` field holding JSON is the body.
    r = call(api, form, data={"payload": json.dumps({"event": "push", "user": "ada"})})
    assert r.status_code == 200 and r.json()["text"] == "Got: push by ada", r.text
    r = call(api, form, data={"event": "tag", "user": "bo"})
    assert r.json()["text"] == "Got: tag by bo"

    payload = save(api, webhook_start(webhookInputMode="payload"))
    r = call(api, payload, params={"q": "1"}, json={"a": 1})
    asked = json.loads(r.json()["question"])
    assert asked["body"] == {"a": 1} and asked["query"] == {"q": "1"} and "host" in asked["headers"]

    nothing = save(api, webhook_start(webhookInputMode="none"), reply="Pinged{{ question }}")
    assert call(api, nothing, json={"x": 1}).json()["text"] == "Pinged "

    text = save(api, webhook_start(webhookContentType="text/plain", webhookDefaultInput="{{ $webhook.body }}"))
    r = call(api, text, data=b"plain words", headers={"Content-Type": "text/plain"})
    assert r.json()["text"] == "Got: plain words"


def test_stream_mode_answers_with_the_predictions_events(api):
    flow = save(api, webhook_start(webhookResponseMode="stream", webhookDefaultInput="{{ $webhook.body.x }}"))
    r = call(api, flow, json={"x": "streamed", "chatId": "live-1"}, stream=True)
    assert r.headers["cache-control"] == "no-cache" and r.headers["x-accel-buffering"] == "no"
    events = sse_events(r)
    names = [e for e, _ in events]
    assert events[0] == ("agentFlowEvent", "INPROGRESS"), names
    assert names[-3:] == ["agentFlowEvent", "metadata", "end"] and events[-3][1] == "FINISHED", names
    assert "".join(d for e, d in events if e == "token") == "Got: streamed"
    assert events[-2][1]["chatId"] == "live-1"
    # The same events as a streamed prediction of the flow.
    assert names == [e for e, _ in stream(api, flow, "streamed")]
    # The run was a firing of the trigger (its result is stored just after the stream ends).
    [trigger] = [t for t in api.get("/triggers").json() if t["chatflowId"] == flow]
    deadline = time.monotonic() + 10
    while not (results := api.get(f"/triggers/{trigger['id']}/results").json()) and time.monotonic() < deadline:
        time.sleep(0.05)
    [result] = results
    assert result["output"] == "Got: streamed" and result["chatId"] == "live-1"


def test_async_callback_urls_are_checked(api):
    nodes = [webhook_start(webhookResponseMode="async", callbackUrl="ftp://example.com/cb")]
    r = api.post("/chatflows", json={"name": "x", "flowData": agentflow(nodes)})
    assert "Invalid callbackUrl: must be a valid http or https URL" in assert_error(r, 400)["message"]
    # The address guard of the request tools: this server lets no request reach
    # loopback, so the call is refused before anything runs.
    flow = save(api, webhook_start(webhookResponseMode="async", callbackUrl="http://127.0.0.1:9/cb"))
    assert "Invalid callbackUrl: refused" in assert_error(call(api, flow, json={}), 400)["message"]
    [trigger] = [t for t in api.get("/triggers").json() if t["chatflowId"] == flow]
    assert api.get(f"/triggers/{trigger['id']}/results").json() == []
    # Without a callback URL the call is fire-and-forget: 202, and the run leaves its result.
    flow = save(api, webhook_start(webhookResponseMode="async", webhookDefaultInput="quiet"))
    r = call(api, flow, json={"chatId": "ff-1"})
    assert r.status_code == 202 and r.json() == {"chatId": "ff-1", "status": "PROCESSING"}
    [trigger] = [t for t in api.get("/triggers").json() if t["chatflowId"] == flow]
    [result] = wait_for(lambda: api.get(f"/triggers/{trigger['id']}/results").json(), 10, "the run's result")
    assert result["output"] == "Got: quiet" and "callback" not in result


def save_gate(api, start):
    """`start` -> a human input ("Ship <question>?") -> "Shipped" or "Held back"."""
    nodes = [start, af_human_input(HUMAN, "Ship {{ question }}?", feedback=False),
             af_reply(REPLY, "Shipped"), af_reply("directReplyAgentflow_1", "Held back")]
    flow_data = agentflow(nodes, [(nodes[0]["id"], HUMAN), (HUMAN, REPLY, 0),
                                  (HUMAN, "directReplyAgentflow_1", 1)])
    r = api.post("/chatflows", json={"name": "gate", "type": "AGENTFLOW", "flowData": flow_data})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def save_slow(api, start, providers):
    """`start` -> an LLM node on `providers` (the start's input says what it answers)."""
    nodes = [start, af_llm("llmAgentflow_0", af_openai(providers.url))]
    r = api.post("/chatflows", json={"name": "slow", "type": "AGENTFLOW", "flowData": agentflow(
        nodes, [(nodes[0]["id"], "llmAgentflow_0")])})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_a_stopped_run_is_resumed_through_the_webhook(api):
    flow = save_gate(api, webhook_start(webhookDefaultInput="deploy {{ $webhook.body.version }}"))
    paused = call(api, flow, json={"version": "1.2"}).json()
    assert paused["action"] and paused["text"] == "Ship deploy 1.2?"
    # Resumed with the run's chatId: the method and validation checks do not apply.
    r = call(api, flow, json={"chatId": paused["chatId"],
                              "humanInput": {"type": "proceed", "startNodeId": HUMAN}})
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Shipped" and r.json()["executionId"] == paused["executionId"]


# ------------------------------------------------------------------ async mode

CALLBACK_SECRET = "cb-s3cret"


@pytest.fixture(scope="module")
def receiver():
    """The test's callback receiver, on 127.0.0.2."""
    site = FakeSite("127.0.0.2")
    yield site
    site.close()


@pytest.fixture(scope="module")
def allowing(tmp_path_factory):
    """A server that lets requests (callbacks included) reach 127.0.0.2."""
    w = Weir(tmp_path_factory.mktemp("weir-callbacks"), "sqlite")
    w.env.update(ALLOW_PRIVATE_REQUESTS="127.0.0.2", METRICS_TOKEN="metrics-token")
    w.start()
    yield w
    w.cleanup()


def async_start(receiver, path, **inputs):
    return webhook_start(webhookResponseMode="async", callbackUrl=f"{receiver.url}{path}",
                         callbackSecret=CALLBACK_SECRET, **inputs)


def callbacks_to(receiver, path):
    """(headers, raw body, parsed body) of each callback POSTed to `path`."""
    return [(headers, body, json.loads(body)) for method, p, headers, body in list(receiver.hits)
            if method == "POST" and p == path]


def check_signature(headers, raw):
    """As Flowise documents it: sha256=<hex HMAC-SHA256 of the exact body> under callbackSecret."""
    expected = "sha256=" + hmac.new(CALLBACK_SECRET.encode(), raw.encode(), hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["x-flowise-signature"], expected), headers


def delivered_results(api, flow):
    [trigger] = [t for t in api.get("/triggers").json() if t["chatflowId"] == flow]
    return [x for x in api.get(f"/triggers/{trigger['id']}/results").json()
            if x.get("callback", {}).get("status") == "delivered"]


def test_async_mode_answers_at_once_and_posts_a_signed_callback(allowing, receiver):
    api = Api(allowing.url, allowing.create_key(workspace=f"ws-{uuid.uuid4().hex[:8]}"))
    path = f"/cb-{uuid.uuid4().hex[:8]}"
    flow = save(api, async_start(receiver, path, webhookDefaultInput="{{ $webhook.body.order }}"))
    started = time.monotonic()
    r = call(api, flow, json={"order": "A-1", "chatId": "async-1"})
    assert r.status_code == 202, r.text
    assert r.json() == {"chatId": "async-1", "status": "PROCESSING"}
    assert time.monotonic() - started < 5

    [(headers, raw, body)] = wait_for(lambda: callbacks_to(receiver, path), 15, "the callback")
    assert headers["content-type"] == "application/json"
    check_signature(headers, raw)
    key = headers["idempotency-key"]
    assert uuid.UUID(key)
    assert body["status"] == "SUCCESS" and body["chatId"] == "async-1"
    assert body["data"]["text"] == "Got: A-1" and body["data"]["chatId"] == "async-1"
    # The trigger's result says where its callback stands.
    [result] = wait_for(lambda: delivered_results(api, flow), 10, "a delivered callback")
    assert result["callback"]["id"] == key and result["callback"]["attempts"] == 1
    assert result["callback"]["url"] == f"{receiver.url}{path}" and result["output"] == "Got: A-1"

    # A receiver that fails is tried again (3 s later), with the same key and body.
    receiver.status = 503
    try:
        retry_path = f"/cb-{uuid.uuid4().hex[:8]}"
        retrying = save(api, async_start(receiver, retry_path, webhookDefaultInput="again"))
        assert call(api, retrying, json={}).status_code == 202
        wait_for(lambda: callbacks_to(receiver, retry_path), 15, "the first attempt")
    finally:
        receiver.status = 200
    attempts = wait_for(lambda: (lambda h: h if len(h) >= 2 else None)(callbacks_to(receiver, retry_path)),
                        20, "the second attempt")
    assert len({h["idempotency-key"] for h, _, _ in attempts}) == 1
    assert attempts[0][1] == attempts[1][1]
    [result] = wait_for(lambda: delivered_results(api, retrying), 10, "a delivered callback")
    assert result["callback"]["attempts"] == 2 and result["callback"]["lastError"] is None

    metrics = requests.get(f"{allowing.url}/metrics", headers={"Authorization": "Bearer metrics-token"},
                           timeout=10).text
    assert 'weir_trigger_callback_attempts_total{outcome="delivered"}' in metrics
    assert 'weir_trigger_callback_attempts_total{outcome="retry"}' in metrics


def test_a_stopped_async_run_calls_back_stopped_and_resumes(allowing, receiver):
    api = Api(allowing.url, allowing.create_key(workspace=f"ws-{uuid.uuid4().hex[:8]}"))
    path = f"/cb-{uuid.uuid4().hex[:8]}"
    flow = save_gate(api, async_start(receiver, path, webhookDefaultInput="deploy {{ $webhook.body.version }}"))
    accepted = call(api, flow, json={"version": "2.0"})
    assert accepted.status_code == 202, accepted.text
    chat = accepted.json()["chatId"]
    [(headers, raw, stopped)] = wait_for(lambda: callbacks_to(receiver, path), 15, "the STOPPED callback")
    check_signature(headers, raw)
    assert stopped["status"] == "STOPPED" and stopped["chatId"] == chat
    assert stopped["data"]["text"] == "Ship deploy 2.0?" and stopped["data"]["action"]
    assert stopped["data"]["executionId"]
    # Resumed through the same address with the run's chatId: answered at once too.
    r = call(api, flow, json={"chatId": chat, "humanInput": {"type": "reject", "startNodeId": HUMAN}})
    assert r.status_code == 202, r.text
    done = wait_for(lambda: [b for _, _, b in callbacks_to(receiver, path) if b["status"] == "SUCCESS"],
                    15, "the SUCCESS callback")
    assert done[0]["data"]["text"] == "Held back" and done[0]["chatId"] == chat
    assert done[0]["data"]["executionId"] == stopped["data"]["executionId"]


@pytest.mark.parametrize("backend", backends())
def test_callbacks_survive_a_kill_9(make_weir, backend, receiver):
    """Callbacks owed when weir is killed are delivered after it restarts: those
    whose run had ended (to be retried: the receiver was down), and one whose run
    was cut off (reported as an ERROR once its lease runs out). None twice."""
    providers = FakeProviders()
    try:
        w = make_weir(backend)
        w.env.update(ALLOW_PRIVATE_REQUESTS="127.0.0.2", TRIGGER_LEASE_SECS="3", OPENAI_API_KEY=GOOD_KEY,
                     PROVIDER_KEY_HOSTS=providers.url.split("//")[1])
        w.start()
        api = Api(w.url, w.create_key(workspace="ws-kill"))
        path = f"/cb-{uuid.uuid4().hex[:8]}"
        quick = save(api, async_start(receiver, path, webhookDefaultInput="n={{ $webhook.body.n }}"))
        slow = save_slow(api, async_start(receiver, path, webhookDefaultInput="SLOW"), providers)

        receiver.status = 503
        for n in range(10):
            assert call(api, quick, json={"n": n, "chatId": f"quick-{n}"}).status_code == 202
        [trigger] = [t for t in api.get("/triggers").json() if t["chatflowId"] == quick]
        wait_for(lambda: len(api.get(f"/triggers/{trigger['id']}/results").json()) == 10, 20, "10 results")
        assert call(api, slow, json={"chatId": "cut-off"}).status_code == 202
        time.sleep(1.5)  # the slow run is under way (the fake answers SLOW for 20 s)
        w.proc.kill()
        w.proc.wait()
        refused = len(callbacks_to(receiver, path))
        receiver.status = 200
        w.start()

        def delivered():
            answered = callbacks_to(receiver, path)[refused:]
            return answered if len(answered) >= 11 else None
        wait_for(delivered, 60, "11 callbacks after the restart")
        time.sleep(4)  # a repeat would have come by now
        answered = callbacks_to(receiver, path)[refused:]
        keys = [h["idempotency-key"] for h, _, _ in answered]
        assert len(keys) == len(set(keys)) == 11, keys
        by_chat = {b["chatId"]: b for _, _, b in answered}
        assert all(by_chat[f"quick-{n}"]["data"]["text"] == f"Got: n={n}" for n in range(10))
        cut = by_chat["cut-off"]
        assert cut["status"] == "ERROR" and "stopped before it finished" in cut["error"], cut
        for headers, raw, _ in answered:
            check_signature(headers, raw)
    finally:
        receiver.status = 200
        providers.close()


def test_a_full_workspace_refuses_async_calls_before_accepting_them(make_weir, receiver):
    """An async call takes its run's slot (WORKSPACE_MAX_PREDICTIONS) before its 202:
    with every slot in use it is a 429 the sender retries, and nothing is owed."""
    providers = FakeProviders()
    try:
        w = make_weir()
        w.env.update(ALLOW_PRIVATE_REQUESTS="127.0.0.2", WORKSPACE_MAX_PREDICTIONS="1", OPENAI_API_KEY=GOOD_KEY,
                     PROVIDER_KEY_HOSTS=providers.url.split("//")[1])
        w.start()
        api = Api(w.url, w.create_key(workspace="ws-full"))
        path = f"/cb-{uuid.uuid4().hex[:8]}"
        flow = save_slow(api, async_start(receiver, path, webhookDefaultInput="SLOW"), providers)
        assert call(api, flow, json={}).status_code == 202
        r = call(api, flow, json={}, headers={"Idempotency-Key": "d-1"})
        assert "WORKSPACE_MAX_PREDICTIONS" in assert_error(r, 429)["message"]
        [trigger] = [t for t in api.get("/triggers").json() if t["chatflowId"] == flow]
        assert api.get(f"/triggers/{trigger['id']}").json()["executionCount"] == 1
    finally:
        providers.close()
