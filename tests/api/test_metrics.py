"""`GET /metrics`: Prometheus (OpenMetrics) text behind METRICS_TOKEN, counting what
the server did — requests by route and status, predictions and tokens by chatflow,
provider calls and errors, trigger firings, webhook verification failures,
predictions in flight."""

import hashlib
import hmac
import re

import pytest
import requests

import flows
from fakes import FakeProviders
from prediction_client import create_flow, nonce, predict
from weir_harness import Api, assert_error

TOKEN = "scrape-" + nonce()


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def scrape(w, token=TOKEN):
    return requests.get(f"{w.url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)


def samples(text):
    """{'name{labels}': value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def test_metrics_count_what_happened(make_weir, fake):
    w = make_weir()
    w.env["METRICS_TOKEN"] = TOKEN
    w.start()
    api = Api(w.url, w.create_key())
    flow_id = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    broken = create_flow(api, flows.conversation(flows.openai_model(fake.url, key="sk-wrong")))
    assert predict(api, flow_id, "one two three").status_code == 200
    assert predict(api, broken, "fails").status_code == 500
    assert api.get("/chatflows/not-a-uuid").status_code == 400
    assert requests.get(f"{w.url}/api/v1/no-such-route", timeout=10).status_code == 404
    hook = api.post("/triggers", json={"name": "h", "chatflowId": flow_id, "nodeId": "conversationChain_0",
                                       "type": "webhook", "webhookSecret": "s3cret"}).json()
    assert requests.post(hook["webhookUrl"], json={}, headers={"X-Hub-Signature-256": "sha256=00"},
                         timeout=10).status_code == 401

    r = scrape(w)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    assert r.text.endswith("# EOF\n")
    got = samples(r.text)
    route = 'weir_http_requests_total{method="POST",route="/api/v1/prediction/{id}",status="%s"}'
    assert got[route % 200] == 1 and got[route % 500] == 1
    assert got['weir_http_requests_total{method="GET",route="/api/v1/chatflows/{id}",status="400"}'] == 1
    assert got['weir_http_requests_total{method="GET",route="unmatched",status="404"}'] == 1
    assert got['weir_http_request_duration_seconds_count{method="POST",route="/api/v1/prediction/{id}"}'] == 2
    assert got[f'weir_predictions_total{{chatflow="{flow_id}",outcome="success"}}'] == 1
    assert got[f'weir_predictions_total{{chatflow="{broken}",outcome="error"}}'] == 1
    # "Echo: one two three" streamed word by word.
    assert got[f'weir_prediction_tokens_total{{chatflow="{flow_id}"}}'] >= 4
    assert got['weir_provider_requests_total{provider="OpenAI-compatible provider",outcome="ok"}'] == 1
    assert got['weir_provider_requests_total{provider="OpenAI-compatible provider",outcome="error"}'] == 1
    assert got['weir_webhook_verification_failures_total'] == 1
    assert got['weir_predictions_in_flight'] == 0
    # No raw path (ids) ever becomes a label.
    assert flow_id not in "".join(k for k in got if k.startswith("weir_http_"))

    # A signed webhook call runs the flow: a webhook firing.
    body = b'{"n": 1}'
    sig = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert requests.post(hook["webhookUrl"], data=body, timeout=30, headers={
        "Content-Type": "application/json", "X-Hub-Signature-256": f"sha256={sig}"}).status_code == 200
    got = samples(scrape(w).text)
    assert got['weir_trigger_firings_total{kind="webhook",outcome="success"}'] == 1

    # Only the token opens it.
    assert_error(requests.get(f"{w.url}/metrics", timeout=10), 401, "METRICS_TOKEN")
    assert_error(scrape(w, token="wrong"), 401)


def test_metrics_are_off_without_a_token(make_weir):
    w = make_weir()
    w.start()
    assert_error(scrape(w), 404, "METRICS_TOKEN")
    assert re.match(r"^[0-9a-f-]{36}$", requests.get(f"{w.url}/api/v1/ping", timeout=5)
                    .headers["x-request-id"])
