"""Browsers on other origins: preflights answered, allowed origins reflected (never `*`,
never with credentials), other origins left without CORS headers (CORS_ORIGINS), a
chatflow's own `chatbotConfig.allowedOrigins` refusing predictions from other sites with
Flowise's 403, and IFRAME_ORIGINS as the `frame-ancestors` of every response.
"""

import json

import pytest
import requests

import flows
from fakes import FakeProviders
from weir_harness import Api, assert_error


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def create_flow(api, fake, **fields):
    flow_data = flows.conversation(flows.openai_model(fake.url))
    r = api.post("/chatflows", json={"name": "embedded", "flowData": flow_data, **fields})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def preflight(url: str, path: str, origin: str) -> requests.Response:
    return requests.options(
        f"{url}/api/v1{path}",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,authorization",
        },
        timeout=10,
    )


def test_any_origin_by_default_reflected_without_credentials(server, api, fake):
    flow = create_flow(api, fake)
    r = preflight(server.url, f"/prediction/{flow}", "https://widget.example")
    assert r.status_code in (200, 204), r.text
    assert r.headers["Access-Control-Allow-Origin"] == "https://widget.example"
    assert "POST" in r.headers["Access-Control-Allow-Methods"]
    allowed = r.headers["Access-Control-Allow-Headers"].lower()
    assert "content-type" in allowed and "authorization" in allowed
    assert "Access-Control-Allow-Credentials" not in r.headers

    answer = api.post(f"/prediction/{flow}", json={"question": "hi"}, headers={"Origin": "https://widget.example"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["Access-Control-Allow-Origin"] == "https://widget.example"
    assert "origin" in answer.headers.get("Vary", "").lower()
    assert answer.headers["Content-Security-Policy"] == "frame-ancestors *"


def test_only_listed_origins_get_cors_headers(make_weir, fake):
    w = make_weir()
    w.env.update(CORS_ORIGINS="https://a.example, https://b.example/", IFRAME_ORIGINS="https://host.example")
    w.start()
    api = Api(w.url, w.create_key())
    flow = create_flow(api, fake)
    allowed = preflight(w.url, f"/prediction/{flow}", "https://b.example")
    assert allowed.headers.get("Access-Control-Allow-Origin") == "https://b.example"
    refused = preflight(w.url, f"/prediction/{flow}", "https://evil.example")
    assert "Access-Control-Allow-Origin" not in refused.headers
    answer = api.post(f"/prediction/{flow}", json={"question": "hi"}, headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in answer.headers
    assert answer.headers["Content-Security-Policy"] == "frame-ancestors https://host.example"


def test_a_chatflows_allowed_origins_refuse_other_sites(api, fake):
    config = json.dumps({"allowedOrigins": ["https://shop.example"]})
    flow = create_flow(api, fake, chatbotConfig=config)
    refused = api.post(f"/prediction/{flow}", json={"question": "hi"}, headers={"Origin": "https://evil.example"})
    assert_error(refused, 403, "This site is not allowed to access this chatbot")
    listed = api.post(f"/prediction/{flow}", json={"question": "hi"}, headers={"Origin": "https://shop.example"})
    assert listed.status_code == 200, listed.text
    # Not a browser (no Origin): a server calling the API is not a site.
    direct = api.post(f"/prediction/{flow}", json={"question": "hi"})
    assert direct.status_code == 200, direct.text
