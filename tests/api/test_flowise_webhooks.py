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

import requests

from flows import af_human_input, af_reply, af_start, agentflow
from prediction_client import sse_events, stream
from weir_harness import assert_error

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


def test_async_mode_is_refused_at_save_until_weir_answers_it(api):
    nodes = [webhook_start(webhookResponseMode="async", callbackUrl="https://example.com/cb")]
    r = api.post("/chatflows", json={"name": "x", "flowData": agentflow(nodes)})
    assert "not answered by weir yet" in assert_error(r, 400)["message"]


def test_a_stopped_run_is_resumed_through_the_webhook(api):
    nodes = [webhook_start(webhookDefaultInput="deploy {{ $webhook.body.version }}"),
             af_human_input(HUMAN, "Ship {{ question }}?", feedback=False),
             af_reply(REPLY, "Shipped"), af_reply("directReplyAgentflow_1", "Held back")]
    flow_data = agentflow(nodes, [(nodes[0]["id"], HUMAN), (HUMAN, REPLY, 0),
                                  (HUMAN, "directReplyAgentflow_1", 1)])
    r = api.post("/chatflows", json={"name": "gate", "type": "AGENTFLOW", "flowData": flow_data})
    assert r.status_code == 201, r.text
    flow = r.json()["id"]
    paused = call(api, flow, json={"version": "1.2"}).json()
    assert paused["action"] and paused["text"] == "Ship deploy 1.2?"
    # Resumed with the run's chatId: the method and validation checks do not apply.
    r = call(api, flow, json={"chatId": paused["chatId"],
                              "humanInput": {"type": "proceed", "startNodeId": HUMAN}})
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Shipped" and r.json()["executionId"] == paused["executionId"]
