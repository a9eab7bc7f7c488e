"""Per-workspace limits and webhook addresses no workspace can take from another.

- WORKSPACE_MAX_TRIGGERS: triggers one workspace may have (409 beyond, counted and
  written atomically, also when many are created at once).
- TRIGGER_MIN_INTERVAL_SECS: the shortest time between two firings of a cron
  schedule (400 for a schedule that fires sooner, on create and on update).
- WORKSPACE_MAX_PREDICTIONS: predictions one workspace has running at once on a
  server (429 with Retry-After beyond; freed when a run ends or its client leaves).
- Webhook addresses: `webhookUrl` is the trigger's own id; two workspaces may put
  webhooks on the same node id; a call to an unknown address is answered before
  its body is read."""

import json
import socket
import threading
import time

import pytest
import requests

import flows
from fakes import FakeProviders
from prediction_client import create_flow, nonce, predict
from weir_harness import Api, assert_error, backends


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def cron(flow_id, expression="*/5 * * * *", **extra):
    return {"name": "cron", "chatflowId": flow_id, "nodeId": "conversationChain_0", "type": "cron",
            "cronExpression": expression, "triggerMessage": "hello", **extra}


def hook(flow_id, node_id="conversationChain_0"):
    return {"name": "hook", "chatflowId": flow_id, "nodeId": node_id, "type": "webhook"}


@pytest.mark.parametrize("backend", backends())
def test_triggers_per_workspace(make_weir, fake, backend):
    w = make_weir(backend)
    w.env["WORKSPACE_MAX_TRIGGERS"] = "3"
    w.start()
    api = Api(w.url, w.create_key(workspace="busy"))
    flow_id = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    # Ten at once: exactly three are made, the others are told why.
    answers = [None] * 10

    def make(i):
        answers[i] = api.post("/triggers", json=cron(flow_id, name=f"t{i}"))

    threads = [threading.Thread(target=make, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [201] * 3 + [409] * 7, [r.text for r in answers]
    refused = next(r for r in answers if r.status_code == 409)
    assert "WORKSPACE_MAX_TRIGGERS" in refused.json()["message"]
    assert api.get("/triggers").headers["x-total-count"] == "3"
    # Another workspace has its own allowance; deleting one frees a place.
    other = Api(w.url, w.create_key(workspace="other"))
    other_flow = create_flow(other, flows.conversation(flows.openai_model(fake.url)))
    assert other.post("/triggers", json=cron(other_flow)).status_code == 201
    made = next(r.json() for r in answers if r.status_code == 201)
    assert api.delete(f"/triggers/{made['id']}").status_code == 204
    assert api.post("/triggers", json=hook(flow_id)).status_code == 201


def test_shortest_cron_interval(make_weir, fake):
    w = make_weir()
    w.env["TRIGGER_MIN_INTERVAL_SECS"] = "300"
    w.start()
    api = Api(w.url, w.create_key())
    flow_id = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    for expression in ("* * * * *", "0,1 * * * *", "*/2 * * * *"):
        assert_error(api.post("/triggers", json=cron(flow_id, expression)), 400, "TRIGGER_MIN_INTERVAL_SECS")
    made = api.post("/triggers", json=cron(flow_id, "*/5 * * * *"))
    assert made.status_code == 201, made.text
    hourly = api.post("/triggers", json=cron(flow_id, "0 9,17 * * 1-5", timezone="Europe/Berlin"))
    assert hourly.status_code == 201, hourly.text
    trigger = made.json()
    assert_error(api.put(f"/triggers/{trigger['id']}", json={"cronExpression": "* * * * *"}), 400, "300")
    assert api.get(f"/triggers/{trigger['id']}").json()["cronExpression"] == "*/5 * * * *"
    # The setting is checked at start.
    bad = make_weir()
    bad.env["TRIGGER_MIN_INTERVAL_SECS"] = "10"
    with pytest.raises(AssertionError, match="TRIGGER_MIN_INTERVAL_SECS"):
        bad.start()


def test_predictions_in_flight_per_workspace(make_weir, fake):
    w = make_weir()
    w.env["WORKSPACE_MAX_PREDICTIONS"] = "2"
    w.start()
    api = Api(w.url, w.create_key(workspace="crowded"))
    flow_id = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    # Two slow streamed answers hold the workspace's two places...
    streams = []
    for _ in range(2):
        r = api.post(f"/prediction/{flow_id}", json={"question": "SLOW", "streaming": True},
                     headers={"Accept": "text/event-stream"}, stream=True)
        assert r.status_code == 200
        next(r.iter_lines())  # the run has started
        streams.append(r)
    # ...so a third is refused at once, with when to retry.
    started = time.monotonic()
    busy = predict(api, flow_id, "one more")
    assert_error(busy, 429, "WORKSPACE_MAX_PREDICTIONS")
    assert busy.headers["retry-after"] == "1" and time.monotonic() - started < 2
    # Another workspace is not held back.
    other = Api(w.url, w.create_key(workspace="calm"))
    other_flow = create_flow(other, flows.conversation(flows.openai_model(fake.url)))
    assert predict(other, other_flow, "meanwhile").status_code == 200
    # A client that leaves frees its place.
    streams[0].close()
    deadline = time.monotonic() + 10
    while (r := predict(api, flow_id, "after one left")).status_code == 429:
        assert time.monotonic() < deadline, "the place of a client that left was never freed"
        time.sleep(0.2)
    assert r.status_code == 200 and r.json()["text"] == "Echo: after one left"
    streams[1].close()


def two_workspaces_one_node(make_weir, fake):
    w = make_weir()
    w.start()
    apis = [Api(w.url, w.create_key(workspace=f"hooks-{i}")) for i in range(2)]
    made = []
    for i, api in enumerate(apis):
        system = f"You are workspace {i}."
        flow_id = create_flow(api, flows.conversation(flows.openai_model(fake.url), system=system))
        r = api.post("/triggers", json=hook(flow_id))
        assert r.status_code == 201, r.text
        made.append(r.json())
    return w, apis, made


def test_webhook_addresses_are_per_trigger(make_weir, fake):
    w, apis, made = two_workspaces_one_node(make_weir, fake)
    for (api, trigger) in zip(apis, made):
        assert trigger["webhookUrl"] == f"{w.url}/api/v1/triggers/webhook/{trigger['id']}"
        question = {"n": nonce()}
        r = requests.post(trigger["webhookUrl"], json=question, timeout=30)
        assert r.status_code == 200, r.text
        [result] = api.get(f"/triggers/{trigger['id']}/results").json()
        assert result["status"] == "success" and result["input"] == json.dumps(question, separators=(",", ":"))
    # A node id two triggers share reaches neither (a 409 naming the id form).
    r = requests.post(f"{w.url}/api/v1/triggers/webhook/conversationChain_0", json={"n": 1}, timeout=30)
    assert_error(r, 409, "/api/v1/triggers/webhook/<triggerId>")
    assert all(len(api.get(f"/triggers/{t['id']}/results").json()) == 1 for api, t in zip(apis, made))
    # Deleting a trigger frees its id address; the node id then names one trigger again.
    assert apis[0].delete(f"/triggers/{made[0]['id']}").status_code == 204
    assert_error(requests.post(made[0]["webhookUrl"], json={}, timeout=30), 404)
    assert requests.post(made[1]["webhookUrl"], json={}, timeout=30).status_code == 200
    r = requests.post(f"{w.url}/api/v1/triggers/webhook/conversationChain_0", json={"n": 2}, timeout=30)
    assert r.status_code == 200, r.text
    assert len(apis[1].get(f"/triggers/{made[1]['id']}/results").json()) == 3


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("attacker_first", [True, False])
def test_a_shared_node_id_never_reaches_another_workspaces_trigger(make_weir, fake, backend, attacker_first):
    """Workspace B puts a webhook on the node id every Flowise export has, before or
    after workspace A, with a secret or a disabled one: A's node-id calls never run
    B's flow, and B never reads A's body or headers."""
    w = make_weir(backend)
    w.start()
    victim, attacker = (Api(w.url, w.create_key(workspace=name)) for name in ("victim", "attacker"))
    alias = f"{w.url}/api/v1/triggers/webhook/conversationChain_0"

    def make(api, system, **extra):
        flow_id = create_flow(api, flows.conversation(flows.openai_model(fake.url), system=system))
        r = api.post("/triggers", json={**hook(flow_id), **extra})
        assert r.status_code == 201, r.text
        return r.json()

    def results(api, trigger):
        return api.get(f"/triggers/{trigger['id']}/results").json()

    if attacker_first:
        # A disabled trigger alone is never reached through the alias.
        theirs = make(attacker, "attacker", enabled=False)
        assert_error(requests.post(alias, json={"secret": "x"}, timeout=30), 404)
        assert attacker.put(f"/triggers/{theirs['id']}", json={"enabled": True}).status_code == 200
        mine = make(victim, "victim")
    else:
        mine = make(victim, "victim")
        # Alone on the node id, the alias reaches the victim's own trigger.
        assert requests.post(alias, json={"n": 0}, timeout=30).status_code == 200
        theirs = make(attacker, "attacker", webhookSecret="attacker-secret")
    secret = nonce()
    r = requests.post(alias, json={"secret": secret}, headers={"X-Custom": secret}, timeout=30)
    assert_error(r, 409, "/api/v1/triggers/webhook/<triggerId>")
    assert results(attacker, theirs) == []
    assert fake.bodies("/chat/completions", secret) == []
    # Disabling one does not make the alias unambiguous again.
    assert attacker.put(f"/triggers/{theirs['id']}", json={"enabled": False}).status_code == 200
    assert_error(requests.post(alias, json={"secret": secret}, timeout=30), 409)
    # The victim's own address always works, and only the victim sees the call.
    r = requests.post(mine["webhookUrl"], json={"secret": secret}, timeout=30)
    assert r.status_code == 200, r.text
    assert [x["input"] for x in results(victim, mine)][0] == json.dumps({"secret": secret}, separators=(",", ":"))
    assert results(attacker, theirs) == []


def test_an_unknown_address_is_refused_before_its_body(make_weir, fake):
    w, _, made = two_workspaces_one_node(make_weir, fake)
    port = int(w.url.rsplit(":", 1)[1])

    def first_line(path):
        """Headers announcing 10 MB and no body at all: the answer must not wait for it."""
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: 10000000\r\n\r\n".encode())
            s.settimeout(5)
            return s.recv(4096).split(b"\r\n", 1)[0]

    assert first_line(f"/api/v1/triggers/webhook/{nonce()}") == b"HTTP/1.1 404 Not Found"
    # A known address over the body limit is refused from its header alone, too.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"POST /api/v1/triggers/webhook/{made[0]['id']} HTTP/1.1\r\nHost: x\r\n"
                  f"Content-Type: application/json\r\nContent-Length: 99999999\r\n\r\n".encode())
        s.settimeout(5)
        assert s.recv(4096).split(b"\r\n", 1)[0] == b"HTTP/1.1 413 Payload Too Large"
