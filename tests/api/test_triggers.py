"""Triggers over HTTP: definitions and their validation, the schedule preview,
webhook calls (signatures, replays, limits, timeouts), Telegram bots against a fake
Bot API, and cron firings with failure e-mail against an SMTP server on loopback."""

import base64
import calendar
import hashlib
import hmac
import json
import re
import socket
import sqlite3
import time
import uuid

import pytest
import requests

from fakes import FakeProviders, FakeSite, FakeTelegram, GOOD_KEY
from flows import buffer_memory, edge, graph, node, openai_model, ref
from weir_harness import Api, assert_error, backends, wait_for

ISO_MS_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def conversation_flow(base, key=GOOD_KEY, with_prompt=False):
    model = openai_model(base, key=key)
    if with_prompt:
        prompt = node("promptTemplate_0", "promptTemplate",
                      {"template": "Event: {event}", "promptValues": {"event": "{{$flow.body}} via {{$flow.headers}}"}})
        chain = node("llmChain_0", "llmChain", {"model": ref(model["id"]), "prompt": ref(prompt["id"])})
        return graph([model, prompt, chain], [edge(model["id"], chain["id"]), edge(prompt["id"], chain["id"])])
    chain = node("conversationChain_0", "conversationChain", {"model": ref(model["id"])})
    return graph([model, chain], [edge(model["id"], chain["id"])])


def create_flow(api, flow_data, name="triggered"):
    r = api.post("/chatflows", json={"name": name, "flowData": flow_data})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def cron_body(flow_id, **extra):
    return {"name": "every minute", "chatflowId": flow_id, "nodeId": "conversationChain_0",
            "type": "cron", "cronExpression": "* * * * *", "triggerMessage": "Good morning", **extra}


def webhook_body(flow_id, node_id=None, **extra):
    return {"name": "hook", "chatflowId": flow_id, "nodeId": node_id or "conversationChain_0",
            "type": "webhook", **extra}


def unique_node(api, fake, memory=False):
    """A chatflow whose chain node has a fresh id (webhook addresses are global)."""
    node_id = f"hook_{uuid.uuid4().hex[:10]}"
    model = openai_model(fake.url)
    inputs = {"model": ref(model["id"])}
    nodes, edges = [model], [edge(model["id"], node_id)]
    if memory:
        mem = buffer_memory()
        inputs["memory"] = ref(mem["id"])
        nodes.append(mem)
        edges.append(edge(mem["id"], node_id))
    nodes.append(node(node_id, "conversationChain", inputs))
    flow_id = create_flow(api, graph(nodes, edges))
    return flow_id, node_id


# ---------------------------------------------------------------- definitions

def test_create_read_list_update_delete(api, fake):
    flow_id = create_flow(api, conversation_flow(fake.url))
    r = api.post("/triggers", json=cron_body(flow_id, timezone="Europe/Berlin"))
    assert r.status_code == 201, r.text
    t = r.json()
    assert t["type"] == "cron" and t["enabled"] is True and t["executionCount"] == 0
    assert t["timeout"] == 300 and t["timezone"] == "Europe/Berlin"
    assert t["lastExecuted"] is None and ISO_MS_Z.match(t["nextExecution"])
    assert ISO_MS_Z.match(t["createdDate"]) and ISO_MS_Z.match(t["updatedDate"])
    assert t["webhookSecretConfigured"] is False and "webhookSecret" not in t
    assert "webhookUrl" not in t
    uuid.UUID(t["id"])

    assert api.get(f"/triggers/{t['id']}").json() == t
    listing = api.get("/triggers")
    assert listing.status_code == 200 and listing.headers["x-total-count"] == "1"
    assert [x["id"] for x in listing.json()] == [t["id"]]
    assert "recentResults" not in listing.json()[0]
    with_results = api.get("/triggers", params={"includeResults": "true"}).json()
    assert with_results[0]["recentResults"] == []

    # Only the fields sent change; omitting `enabled` keeps the state.
    r = api.put(f"/triggers/{t['id']}", json={"name": "renamed"})
    assert r.status_code == 200, r.text
    u = r.json()
    assert u["name"] == "renamed" and u["enabled"] is True and u["nextExecution"] == t["nextExecution"]
    r = api.put(f"/triggers/{t['id']}", json={"enabled": False})
    assert r.json()["enabled"] is False and r.json()["nextExecution"] is None
    r = api.put(f"/triggers/{t['id']}", json={"cronExpression": "0 9 * * MON", "enabled": True,
                                               "maxExecutions": 3, "timeout": 60})
    u = r.json()
    assert u["enabled"] is True and u["cronExpression"] == "0 9 * * MON" and u["maxExecutions"] == 3
    assert u["timeout"] == 60 and u["nextExecution"].endswith(":00:00.000Z")
    r = api.put(f"/triggers/{t['id']}", json={"maxExecutions": None})
    assert r.json()["maxExecutions"] is None

    assert api.get(f"/triggers/{t['id']}/results").json() == []
    r = api.delete(f"/triggers/{t['id']}")
    assert r.status_code == 204 and r.content == b""
    assert_error(api.get(f"/triggers/{t['id']}"), 404)
    assert_error(api.delete(f"/triggers/{t['id']}"), 404)
    assert_error(api.put(f"/triggers/{t['id']}", json={"name": "x"}), 404)


def test_validation_stores_nothing(api, fake):
    flow_id = create_flow(api, conversation_flow(fake.url))
    good = cron_body(flow_id)
    for field in ["name", "chatflowId", "nodeId", "type", "cronExpression"]:
        body = {k: v for k, v in good.items() if k != field}
        assert_error(api.post("/triggers", json=body), 412, field)
    cases = [
        ({"type": "sometimes"}, 400, "type"),
        ({"cronExpression": "61 * * * *"}, 400, "cron"),
        ({"cronExpression": "* * * *"}, 400, "5"),
        ({"cronExpression": "0 0 30 2 *"}, 400, "never fire"),
        ({"cronExpression": "0 0 L * *"}, 400, "standard"),
        ({"chatflowId": "not-a-uuid"}, 400, "UUID"),
        ({"chatflowId": str(uuid.uuid4())}, 404, "chatflow"),
        ({"nodeId": "nope_0"}, 400, "nope_0"),
        ({"maxExecutions": 0}, 400, "maxExecutions"),
        ({"timeout": 0}, 400, "timeout"),
        ({"timeout": 3601}, 400, "timeout"),
        ({"notificationEmail": "not an address"}, 400, "notificationEmail"),
        ({"timezone": "Mars/Olympus"}, 400, "IANA"),
        ({"enabled": "yes"}, 400, None),
        ({"webhookSecret": "s"}, 400, "webhook"),
    ]
    for change, status, text in cases:
        assert_error(api.post("/triggers", json={**good, **change}), status, text)
    assert api.get("/triggers").json() == []
    # Another workspace's chatflow is not found either.
    other = Api(api.url, None)
    assert api.post("/triggers", json=good).status_code == 201
    assert api.get("/triggers").headers["x-total-count"] == "1"
    assert other.get("/triggers").status_code == 401


def test_webhook_addresses_are_unique(api, fake):
    flow_id, node_id = unique_node(api, fake)
    first = api.post("/triggers", json=webhook_body(flow_id, node_id))
    assert first.status_code == 201, first.text
    # The address a trigger is given is its own id, which nothing else can take.
    assert first.json()["webhookUrl"].endswith(f"/api/v1/triggers/webhook/{first.json()['id']}")
    # One webhook per node within a workspace (another workspace may use the node id too).
    assert_error(api.post("/triggers", json=webhook_body(flow_id, node_id)), 409, node_id)
    # A cron trigger may share the node: it has no address.
    assert api.post("/triggers", json={**cron_body(flow_id), "nodeId": node_id}).status_code == 201


def test_permissions(server, api, fake):
    flow_id = create_flow(api, conversation_flow(fake.url))
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    reader = Api(server.url, server.create_key("triggers:read", "chatflows:write", workspace=ws))
    flow2 = create_flow(reader, conversation_flow(fake.url))
    assert_error(reader.post("/triggers", json=cron_body(flow2)), 403, "triggers:write")
    assert reader.get("/triggers").status_code == 200
    # The first workspace's chatflow is invisible to this key.
    writer = Api(server.url, server.create_key("triggers:write", "triggers:read", workspace=ws))
    assert_error(writer.post("/triggers", json=cron_body(flow_id)), 404, "chatflow")


def test_schedule_preview(api):
    r = api.post("/triggers/schedule-preview", json={
        "cronExpression": "30 2 * * *", "timezone": "America/New_York",
        "from": "2026-03-07T12:00:00Z", "count": 3})
    assert r.status_code == 200, r.text
    assert r.json()["nextExecutions"] == [
        "2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z", "2026-03-10T06:30:00.000Z"]
    r = api.post("/triggers/schedule-preview", json={"cronExpression": "*/15 * * * *"})
    times = r.json()["nextExecutions"]
    assert len(times) == 5 and all(ISO_MS_Z.match(t) for t in times)
    assert_error(api.post("/triggers/schedule-preview", json={}), 412, "cronExpression")
    assert_error(api.post("/triggers/schedule-preview", json={"cronExpression": "0 0 31 2 *"}), 400, "never")
    assert_error(api.post("/triggers/schedule-preview", json={"cronExpression": "* * * * *", "count": 51}), 400)


# ---------------------------------------------------------------- webhooks

def post_hook(api, node_id, payload=None, headers=None, data=None):
    body = data if data is not None else json.dumps(payload if payload is not None else {}).encode()
    return requests.post(f"{api.url}/api/v1/triggers/webhook/{node_id}", data=body,
                         headers={"Content-Type": "application/json", **(headers or {})}, timeout=30)


def test_webhook_runs_the_flow_and_records_results(api, fake):
    flow_id, node_id = unique_node(api, fake)
    t = api.post("/triggers", json=webhook_body(flow_id, node_id, maxExecutions=2)).json()
    r = post_hook(api, node_id, {"event": "push", "n": 1}, headers={"Authorization": "Bearer hidden"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"text", "chatId", "sourceDocuments", "usedTools"}
    assert body["text"] == 'Echo: {"event":"push","n":1}'
    assert body["sourceDocuments"] is None and body["usedTools"] is None
    assert re.match(rf"^trigger-{t['id'].replace('-', '')[:8]}-\d{{13}}$", body["chatId"])
    results = api.get(f"/triggers/{t['id']}/results").json()
    assert len(results) == 1
    res = results[0]
    assert res["status"] == "success" and res["input"] == '{"event":"push","n":1}'
    assert res["output"] == body["text"] and res["chatId"] == body["chatId"]
    assert res["sourceDocuments"] is None and res["usedTools"] is None and res["error"] is None
    assert ISO_MS_Z.match(res["executedAt"])
    current = api.get(f"/triggers/{t['id']}").json()
    assert current["executionCount"] == 1 and ISO_MS_Z.match(current["lastExecuted"])

    # The second call reaches maxExecutions: the trigger disables itself.
    assert post_hook(api, node_id, {"n": 2}).status_code == 200
    assert api.get(f"/triggers/{t['id']}").json()["enabled"] is False
    assert_error(post_hook(api, t["id"], {"n": 3}), 409, "maxExecutions")
    # The node-id alias never reaches a disabled trigger.
    assert_error(post_hook(api, node_id, {"n": 3}), 404)
    assert_error(api.put(f"/triggers/{t['id']}", json={"enabled": True}), 409, "maxExecutions")
    r = api.put(f"/triggers/{t['id']}", json={"enabled": True, "maxExecutions": 10})
    assert r.status_code == 200 and r.json()["enabled"] is True
    assert api.put(f"/triggers/{t['id']}", json={"enabled": False}).status_code == 200
    assert_error(post_hook(api, t["id"], {"n": 4}), 409, "disabled")

    listed = api.get("/triggers", params={"includeResults": "true"}).json()
    mine = next(x for x in listed if x["id"] == t["id"])
    assert [x["input"] for x in mine["recentResults"]] == ['{"n":2}', '{"event":"push","n":1}']
    assert len(api.get(f"/triggers/{t['id']}/results", params={"limit": 1}).json()) == 1
    assert_error(api.get(f"/triggers/{t['id']}/results", params={"limit": 101}), 400)


def test_webhook_errors(api, fake):
    assert_error(post_hook(api, "no_such_node_x"), 404)
    flow_id, node_id = unique_node(api, fake)
    api.post("/triggers", json=webhook_body(flow_id, node_id))
    assert_error(post_hook(api, node_id, data=b"not json"), 400, "JSON")
    big = b'{"x":"' + b"a" * (16 * 1024 * 1024) + b'"}'
    assert_error(post_hook(api, node_id, data=big), 413)


def test_webhook_timeout_is_504_and_a_failed_result(api, fake):
    flow_id, node_id = unique_node(api, fake)
    t = api.post("/triggers", json=webhook_body(flow_id, node_id, timeout=1)).json()
    started = time.monotonic()
    assert_error(post_hook(api, node_id, {"q": "SLOW"}), 504, "timeout")
    assert time.monotonic() - started < 5
    res = api.get(f"/triggers/{t['id']}/results").json()[0]
    assert res["status"] == "failed" and "timeout" in res["error"] and res["output"] is None
    # The run given up on never ends the firing a second time (with an answer of its own).
    time.sleep(1.5)
    assert len(api.get(f"/triggers/{t['id']}/results").json()) == 1
    assert api.get(f"/triggers/{t['id']}").json()["executionCount"] == 1


def test_failed_flow_is_500_with_the_reason(api, fake):
    node_id = f"bad_{uuid.uuid4().hex[:8]}"
    model = openai_model(fake.url, key="sk-wrong")
    chain = node(node_id, "conversationChain", {"model": ref(model["id"])})
    flow_id = create_flow(api, graph([model, chain], [edge(model["id"], node_id)]))
    t = api.post("/triggers", json=webhook_body(flow_id, node_id)).json()
    assert_error(post_hook(api, node_id, {"a": 1}), 500, "API key")
    res = api.get(f"/triggers/{t['id']}/results").json()[0]
    assert res["status"] == "failed" and "API key" in res["error"]


def test_body_and_headers_reach_prompts(api, fake):
    node_id = f"llm_{uuid.uuid4().hex[:8]}"
    flow = conversation_flow(fake.url, with_prompt=True)
    for n in flow["nodes"]:
        if n["id"] == "llmChain_0":
            n["id"] = n["data"]["id"] = node_id
    for e in flow["edges"]:
        e["target"] = node_id
    flow_id = create_flow(api, flow)
    api.post("/triggers", json=webhook_body(flow_id, node_id))
    r = post_hook(api, node_id, {"order": 42}, headers={"X-Source": "shop", "Cookie": "session=secret"})
    assert r.status_code == 200, r.text
    sent = fake.last("/chat/completions")["messages"][-1]["content"]
    assert sent.startswith('Event: {"order":42} via {')
    headers = json.loads(sent.split(" via ", 1)[1])
    assert headers["x-source"] == "shop" and "cookie" not in headers


def github_signature(secret, body):
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def standard_headers(secret, msg_id, body, stamp=None):
    stamp = str(int(stamp if stamp is not None else time.time()))
    key = base64.b64decode(secret.removeprefix("whsec_"))
    sig = base64.b64encode(hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()).decode()
    return {"webhook-id": msg_id, "webhook-timestamp": stamp, "webhook-signature": f"v1,{sig}"}


def test_github_signatures_and_replays(api, fake):
    flow_id, node_id = unique_node(api, fake)
    secret = "It's a Secret to Everybody"
    t = api.post("/triggers", json=webhook_body(flow_id, node_id, webhookSecret=secret)).json()
    assert t["webhookSecretConfigured"] is True and "webhookSecret" not in t
    body = b'{"action":"opened"}'
    assert_error(post_hook(api, node_id, data=body), 401, "signature")
    assert_error(post_hook(api, node_id, data=body, headers={"X-Hub-Signature-256": github_signature("wrong", body)}), 401)
    assert_error(post_hook(api, node_id, data=body + b" ", headers={"X-Hub-Signature-256": github_signature(secret, body)}), 401)
    calls = fake.count("/chat/completions")
    good = {"X-Hub-Signature-256": github_signature(secret, body), "X-GitHub-Delivery": str(uuid.uuid4())}
    first = post_hook(api, node_id, data=body, headers=good)
    assert first.status_code == 200, first.text
    again = post_hook(api, node_id, data=body, headers=good)
    assert again.status_code == 200 and again.json() == first.json()
    assert fake.count("/chat/completions") == calls + 1
    assert len(api.get(f"/triggers/{t['id']}/results").json()) == 1
    assert api.get(f"/triggers/{t['id']}").json()["executionCount"] == 1


def test_async_mode_settings_are_checked(api, fake):
    flow_id, node_id = unique_node(api, fake)
    t = api.post("/triggers", json=webhook_body(flow_id, node_id)).json()
    assert t["responseMode"] == "sync" and t["callbackUrl"] is None and t["callbackSecretConfigured"] is False
    for fields, message in [
        ({"responseMode": "later"}, "'responseMode' must be 'sync' or 'async'"),
        ({"callbackUrl": "https://example.com/cb"}, "'callbackUrl' needs responseMode 'async'"),
        ({"responseMode": "async", "callbackSecret": "s"}, "'callbackSecret' needs a callbackUrl"),
        ({"responseMode": "async", "callbackUrl": "ftp://example.com/cb"}, "must be a valid http or https URL"),
        # The request tools' address guard: this server lets nothing reach loopback.
        ({"responseMode": "async", "callbackUrl": "http://127.0.0.1:9/cb"}, "'callbackUrl' refused"),
    ]:
        assert_error(api.put(f"/triggers/{t['id']}", json=fields), 400, message)
    assert_error(api.post("/triggers", json=cron_body(flow_id, responseMode="async")), 400,
                 "are for webhook triggers")
    ok = api.put(f"/triggers/{t['id']}", json={"responseMode": "async", "callbackUrl": "https://example.com/cb",
                                               "callbackSecret": "cb-secret"})
    assert ok.status_code == 200, ok.text
    shown = api.get(f"/triggers/{t['id']}").json()
    assert shown["responseMode"] == "async" and shown["callbackUrl"] == "https://example.com/cb"
    assert shown["callbackSecretConfigured"] is True and "cb-secret" not in json.dumps(shown)


@pytest.mark.parametrize("backend", backends())
def test_async_webhooks_answer_at_once_and_call_back(make_weir, fake, backend):
    """`responseMode: async`: 202 `{chatId, status}` once the call is verified and
    claimed; the answer the sync mode gives is POSTed to callbackUrl, signed, and a
    repeated delivery gets the 202 again without a second run or callback."""
    receiver = FakeSite("127.0.0.2")
    try:
        w = make_weir(backend)
        w.env.update(ALLOW_PRIVATE_REQUESTS="127.0.0.2")
        w.start()
        api = Api(w.url, w.create_key())
        flow_id, node_id = unique_node(api, fake)
        secret, callback_secret = "It's a Secret to Everybody", f"cb-{uuid.uuid4().hex}"
        t = api.post("/triggers", json=webhook_body(
            flow_id, node_id, webhookSecret=secret, responseMode="async",
            callbackUrl=f"{receiver.url}/hook", callbackSecret=callback_secret)).json()
        body = b'{"action":"opened"}'
        assert_error(post_hook(api, t["id"], data=body), 401)  # verified before anything is accepted
        calls = fake.count("/chat/completions")
        good = {"X-Hub-Signature-256": github_signature(secret, body), "X-GitHub-Delivery": str(uuid.uuid4())}
        first = post_hook(api, t["id"], data=body, headers=good)
        assert first.status_code == 202, first.text
        assert set(first.json()) == {"chatId", "status"} and first.json()["status"] == "PROCESSING"
        [(_, path, headers, raw)] = wait_for(lambda: [h for h in receiver.hits if h[0] == "POST"], 15,
                                             "the callback")
        assert path == "/hook"
        expected = "sha256=" + hmac.new(callback_secret.encode(), raw.encode(), hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["x-flowise-signature"], expected)
        sent = json.loads(raw)
        assert sent["status"] == "SUCCESS" and sent["chatId"] == first.json()["chatId"]
        assert sent["data"] == {"text": 'Echo: {"action":"opened"}', "chatId": sent["chatId"],
                                "sourceDocuments": None, "usedTools": None}
        again = post_hook(api, t["id"], data=body, headers=good)
        assert again.status_code == 202 and again.json() == first.json()
        time.sleep(1)
        assert fake.count("/chat/completions") == calls + 1
        assert len([h for h in receiver.hits if h[0] == "POST"]) == 1
        [result] = api.get(f"/triggers/{t['id']}/results").json()
        assert result["callback"]["status"] == "delivered" and result["callback"]["attempts"] == 1
        assert result["callback"]["id"] == headers["idempotency-key"]
        if backend == "sqlite":  # sealed at rest, on the trigger and in the outbox
            stored = b"".join(p.read_bytes() for p in w.data_dir.glob("weir.db*"))
            assert b"sealed:" in stored and callback_secret.encode() not in stored
        # Switched back to sync, the same trigger answers with the run again.
        assert api.put(f"/triggers/{t['id']}", json={"responseMode": "sync", "callbackUrl": None,
                                                     "callbackSecret": None}).status_code == 200
        fresh = {**good, "X-GitHub-Delivery": str(uuid.uuid4())}
        r = post_hook(api, t["id"], data=body, headers=fresh)
        assert r.status_code == 200 and r.json()["text"] == 'Echo: {"action":"opened"}'
    finally:
        receiver.close()


def test_webhook_secrets_are_sealed_at_rest_migrated_and_rotated(make_weir, fake):
    """A webhook secret is stored sealed (like credentials); one an earlier version
    stored in plain text is sealed in place at start; WEIR_SECRET_KEY_PREVIOUS
    rotates it with the credentials."""
    old_key, new_key = "cd" * 32, "ef" * 32
    w = make_weir()
    w.env["WEIR_SECRET_KEY"] = old_key
    w.start()
    api = Api(w.url, w.create_key())
    flow_id, node_id = unique_node(api, fake)
    secret = f"hook-secret-{uuid.uuid4().hex}"
    t = api.post("/triggers", json=webhook_body(flow_id, node_id, webhookSecret=secret)).json()
    body = b'{"sealed":true}'

    def call(api, key):
        return post_hook(api, t["id"], data=body, headers={"X-Hub-Signature-256": github_signature(key, body)})

    assert call(api, secret).status_code == 200
    w.stop()

    def stored():
        return b"".join(p.read_bytes() for p in w.data_dir.glob("weir.db*"))

    assert secret.encode() not in stored()
    # As an earlier version left it: in plain text.
    legacy = f"legacy-secret-{uuid.uuid4().hex}"
    db = sqlite3.connect(w.data_dir / "weir.db")
    with db:
        db.execute("UPDATE triggers SET webhook_secret = ? WHERE id = ?", (legacy, t["id"]))
    db.close()
    api = Api(w.start().url, api.key)
    assert "sealed trigger secrets" in w.logs()
    assert call(api, legacy).status_code == 200
    w.stop()
    assert legacy.encode() not in stored()
    # Rotated: the new key with the old one as previous reseals it; then the old can go.
    w.env.update(WEIR_SECRET_KEY=new_key, WEIR_SECRET_KEY_PREVIOUS=old_key)
    api = Api(w.start().url, api.key)
    assert call(api, legacy).status_code == 200
    w.stop()
    del w.env["WEIR_SECRET_KEY_PREVIOUS"]
    api = Api(w.start().url, api.key)
    assert call(api, legacy).status_code == 200
    w.stop()
    # A key change without the previous one: the trigger can still be read and
    # deleted; updating it says why it cannot; its calls fail without running.
    w.env["WEIR_SECRET_KEY"] = "01" * 32
    api = Api(w.start().url, api.key)
    assert api.get(f"/triggers/{t['id']}").json()["webhookSecretConfigured"] is True
    assert_error(api.put(f"/triggers/{t['id']}", json={"name": "renamed"}), 409, "WEIR_SECRET_KEY_PREVIOUS")
    assert_error(call(api, legacy), 500)
    assert api.delete(f"/triggers/{t['id']}").status_code == 204
    assert secret not in w.logs() and legacy not in w.logs()


def test_standard_webhooks_signatures(api, fake):
    flow_id, node_id = unique_node(api, fake)
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    api.post("/triggers", json=webhook_body(flow_id, node_id, webhookSecret=secret))
    body = b'{"type":"invoice.paid"}'
    headers = standard_headers(secret, "msg_1", body)
    r = post_hook(api, node_id, data=body, headers=headers)
    assert r.status_code == 200, r.text
    replay = post_hook(api, node_id, data=body, headers=headers)
    assert replay.json() == r.json()
    stale = standard_headers(secret, "msg_2", body, stamp=time.time() - 600)
    assert_error(post_hook(api, node_id, data=body, headers=stale), 401, "5 minutes")
    wrong = standard_headers("whsec_" + base64.b64encode(b"other").decode(), "msg_3", body)
    assert_error(post_hook(api, node_id, data=body, headers=wrong), 401)


# ---------------------------------------------------------------- Telegram

@pytest.fixture
def telegram():
    t = FakeTelegram()
    yield t
    t.close()


@pytest.mark.parametrize("backend", backends())
def test_telegram_bot(make_weir, fake, telegram, backend):
    w = make_weir(backend)
    w.env.update(TELEGRAM_API_URL=telegram.url, PUBLIC_URL="https://bots.example.com")
    w.start()
    api = Api(w.url, w.create_key())
    flow_id, node_id = unique_node(api, fake, memory=True)
    body = webhook_body(flow_id, node_id, webhookPlatform="telegram", webhookBotToken="123:ABC")

    telegram.fail_with = "Bad Request: bad webhook: HTTPS url must be provided for webhook"
    assert_error(api.post("/triggers", json=body), 502, "HTTPS url must be provided")
    assert api.get("/triggers").json() == []
    telegram.fail_with = None

    t = api.post("/triggers", json=body).json()
    assert t["webhookBotTokenConfigured"] is True and t["webhookSecretConfigured"] is True
    token, registered = telegram.methods("setWebhook")[-1]
    assert token == "123:ABC"
    assert registered["url"] == f"https://bots.example.com/api/v1/triggers/webhook/{t['id']}"
    assert registered["allowed_updates"] == ["message"]
    secret = registered["secret_token"]
    assert re.match(r"^[A-Za-z0-9_-]{1,256}$", secret)
    if backend == "sqlite":
        # Sealed at rest: neither the bot token nor the generated secret is stored as it is.
        stored = b"".join(p.read_bytes() for p in w.data_dir.glob("weir.db*"))
        assert b"123:ABC" not in stored and secret.encode() not in stored

    update = {"update_id": 1001, "message": {"message_id": 5, "text": "hello bot", "chat": {"id": 777}}}
    assert_error(post_hook(api, node_id, update), 401)
    assert_error(post_hook(api, node_id, update, headers={"X-Telegram-Bot-Api-Secret-Token": "nope"}), 401)
    good = {"X-Telegram-Bot-Api-Secret-Token": secret}
    r = post_hook(api, node_id, update, headers=good)
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Echo: hello bot" and r.json()["chatId"] == "telegram-777"
    sent = telegram.methods("sendMessage")
    assert sent[-1] == ("123:ABC", {"chat_id": 777, "text": "Echo: hello bot"})
    # Telegram retries: the same update_id does not run again.
    assert post_hook(api, node_id, update, headers=good).json() == r.json()
    assert len(telegram.methods("sendMessage")) == len(sent)
    # Memory continues per chat.
    update2 = {"update_id": 1002, "message": {"message_id": 6, "text": "again", "chat": {"id": 777}}}
    assert post_hook(api, node_id, update2, headers=good).status_code == 200
    history = fake.last("/chat/completions")["messages"]
    assert [m["content"] for m in history if m["role"] == "user"] == ["hello bot", "again"]
    # Updates without text are acknowledged and ignored.
    sticker = {"update_id": 1003, "message": {"message_id": 7, "chat": {"id": 777}, "sticker": {}}}
    r = post_hook(api, node_id, sticker, headers=good)
    assert r.status_code == 200 and r.json()["ok"] is True
    assert len(api.get(f"/triggers/{t['id']}/results").json()) == 2

    registrations = len(telegram.methods("setWebhook"))
    assert api.put(f"/triggers/{t['id']}", json={"enabled": False}).status_code == 200
    assert len(telegram.methods("deleteWebhook")) == 1
    assert api.put(f"/triggers/{t['id']}", json={"enabled": True}).status_code == 200
    assert len(telegram.methods("setWebhook")) == registrations + 1
    # An unrelated edit does not register again.
    assert api.put(f"/triggers/{t['id']}", json={"name": "renamed bot"}).status_code == 200
    assert len(telegram.methods("setWebhook")) == registrations + 1
    assert api.delete(f"/triggers/{t['id']}").status_code == 204
    assert len(telegram.methods("deleteWebhook")) == 2
    assert "123:ABC" not in w.logs() and secret not in w.logs()


# ---------------------------------------------------------------- cron firing, e-mail, missed runs

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Inbox:
    """An SMTP server on loopback (aiosmtpd), started on demand."""

    def __init__(self, port):
        self.port = port
        self.messages = []
        self.controller = None

    def start(self):
        from aiosmtpd.controller import Controller

        inbox = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                inbox.messages.append((envelope.rcpt_tos, envelope.content.decode(errors="replace")))
                return "250 OK"

        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self):
        if self.controller:
            self.controller.stop()


def good_mornings(fake, message="Good morning"):
    """Calls with the good key asking `message` (a cron trigger's); other tests'
    triggers on the session servers ask "Good morning" every minute too."""
    with fake.lock:
        return sum(1 for p, h, b in fake.requests
                   if p.endswith("/chat/completions")
                   and {k.lower(): v for k, v in h.items()}.get("authorization") == f"Bearer {GOOD_KEY}"
                   and b["messages"][-1]["content"] == message)


@pytest.mark.parametrize("backend", backends())
def test_cron_firings_limits_deletion_and_failure_mail(make_weir, fake, backend):
    smtp = Inbox(free_port())
    w = make_weir(backend)
    w.env.update(SMTP_URL=f"smtp://127.0.0.1:{smtp.port}", SMTP_FROM="weir <weir@test.local>")
    w.start()
    api = Api(w.url, w.create_key())
    ok_flow = create_flow(api, conversation_flow(fake.url), name="greeter")
    bad_flow = create_flow(api, conversation_flow(fake.url, key="sk-wrong"), name="broken")
    # Avoid creating right before a minute boundary, so that all three are in place.
    if time.time() % 60 > 55:
        time.sleep(6)
    morning = f"Good morning {uuid.uuid4().hex[:8]}"
    asked_before = good_mornings(fake, morning)
    once = api.post("/triggers", json=cron_body(ok_flow, maxExecutions=1, triggerMessage=morning)).json()
    failing = api.post("/triggers", json=cron_body(bad_flow, name="nightly report", triggerMessage=morning,
                                                   notificationEmail="ops@example.com")).json()
    deleted = api.post("/triggers", json=cron_body(ok_flow, name="to delete", triggerMessage=morning)).json()
    due = once["nextExecution"]
    # Firings are claimed up to a second before their time (nextExecution moves on
    # then); one whose trigger is deleted before its time never runs.
    due_epoch = calendar.timegm(time.strptime(due, "%Y-%m-%dT%H:%M:%S.000Z"))
    time.sleep(max(0.0, due_epoch - 1 - time.time()))
    while api.get(f"/triggers/{deleted['id']}").json()["nextExecution"] == due:
        assert time.time() < due_epoch - 0.2, "not claimed ahead of its time"
        time.sleep(0.05)
    assert api.delete(f"/triggers/{deleted['id']}").status_code == 204

    def fired():
        results = api.get(f"/triggers/{once['id']}/results").json()
        return results if results else None

    results = wait_for(fired, 75, "the cron firing")
    lag_ok = results[0]["executedAt"]
    assert results[0]["status"] == "success" and results[0]["input"] == morning
    assert results[0]["output"] == f"Echo: {morning}"
    epoch_ms = calendar.timegm(time.strptime(due, "%Y-%m-%dT%H:%M:%S.000Z")) * 1000
    assert results[0]["chatId"] == f"trigger-{once['id'].replace('-', '')[:8]}-{epoch_ms}"
    assert results[0]["scheduledAt"] == due
    assert lag_ok >= due
    after = api.get(f"/triggers/{once['id']}").json()
    assert after["executionCount"] == 1 and after["enabled"] is False and after["nextExecution"] is None

    bad = wait_for(lambda: api.get(f"/triggers/{failing['id']}/results").json(), 30, "the failed firing")
    assert bad[0]["status"] == "failed" and "API key" in bad[0]["error"]
    # The SMTP server was down at first: the mail goes out on a retry once it is up.
    time.sleep(2)
    smtp.start()
    try:
        rcpt, content = wait_for(lambda: smtp.messages and smtp.messages[0], 40, "the failure mail")
        assert rcpt == ["ops@example.com"]
        assert "nightly report" in content and "broken" in content and morning in content
        assert "API key" in content
    finally:
        smtp.stop()
    # The deleted trigger never ran: the greeter chatflow was asked once.
    assert good_mornings(fake, morning) == asked_before + 1


def test_missed_runs_are_recorded_not_replayed(make_weir, fake):
    w = make_weir("sqlite")
    w.start()
    key = w.create_key()
    api = Api(w.url, key)
    flow_id = create_flow(api, conversation_flow(fake.url))
    t = api.post("/triggers", json=cron_body(flow_id, cronExpression="*/5 * * * *")).json()
    w.stop()
    # The server was down for an hour: twelve five-minute times passed.
    now_ms = int(time.time() * 1000)
    last_slot = now_ms - now_ms % 300_000
    with sqlite3.connect(w.data_dir / "weir.db") as db:
        db.execute("UPDATE triggers SET next_execution = ? WHERE id = ?", (last_slot - 3_600_000, t["id"]))
    calls = fake.count("/chat/completions")
    w.start()
    api = Api(w.url, key)
    results = wait_for(lambda: api.get(f"/triggers/{t['id']}/results").json(), 15, "the missed record")
    missed = [r for r in results if r["status"] == "missed"]
    assert len(missed) == 1
    ran = [r for r in results if r["status"] == "success"]
    # The last slot ran if it was under a minute old; the others were skipped.
    assert missed[0]["missedCount"] + len(ran) == 13
    assert missed[0]["missedCount"] >= 12
    current = api.get(f"/triggers/{t['id']}").json()
    assert current["nextExecution"] > time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    assert fake.count("/chat/completions") == calls + len(ran)
