"""The error model: every non-2xx answer is JSON {"message"} with the right status,
framework answers included, and every answer carries a request id."""

import subprocess

import pytest
import requests

from weir_harness import FLOW, PG_URL, assert_error


def test_status_classes(api):
    assert_error(api.post("/chatflows", data="{not json", headers={"Content-Type": "application/json"}), 400, "JSON")
    assert_error(api.post("/chatflows", json={"name": 5, "flowData": FLOW}), 400)
    assert_error(api.post("/chatflows", json={"flowData": FLOW}), 412, "name")
    assert_error(api.post("/chatflows", json={"name": "x"}), 412, "flowData")
    assert_error(api.post("/chatflows", json={"name": None, "flowData": FLOW}), 412, "name")
    assert_error(api.post("/chatflows", data="name=x", headers={"Content-Type": "text/plain"}), 415)
    assert_error(api.get("/chatflows/12345"), 400)
    assert_error(api.get("/chatflows/00000000-0000-4000-8000-000000000000"), 404)
    assert_error(api.get("/nothing-here"), 404)
    assert_error(api.request("PATCH", "/chatflows"), 405)
    assert_error(api.get("/chatflows", params={"limit": "many"}), 400)
    api.post("/variables", json={"name": "dup"})
    assert_error(api.post("/variables", json={"name": "dup"}), 409, "dup")
    big = {"name": "big", "flowData": {"nodes": [{"pad": "x" * (6 * 1024 * 1024)}], "edges": []}}
    assert_error(api.post("/chatflows", json=big), 413)


def test_unknown_route_outside_api_is_json_too(server):
    # Pages outside /api are the UI's (test_ui.py; with WEIR_UI=off, JSON 404s);
    # anything but reading them is a JSON error.
    assert_error(requests.post(f"{server.url}/favicon.ico", timeout=5), 405)
    assert_error(requests.delete(f"{server.url}/chatflows", timeout=5), 405)


def test_request_id_is_returned_and_kept(api):
    r = api.get("/chatflows")
    assert len(r.headers["x-request-id"]) >= 32
    r = api.get("/chatflows", headers={"X-Request-Id": "trace-me-123"})
    assert r.headers["x-request-id"] == "trace-me-123"
    assert api.get("/nothing", key=None).headers.get("x-request-id")


@pytest.mark.skipif(not PG_URL, reason="WEIR_TEST_DATABASE_URL is not set: PostgreSQL not tested")
def test_server_errors_hide_internals_and_are_logged_with_request_id(make_weir):
    w = make_weir("postgres").start()
    key = w.create_key()
    # Pull the tables out from under the running server.
    subprocess.run(["psql", PG_URL, "-qAtc", f"DROP SCHEMA {w.schema} CASCADE"], check=True)
    r = requests.get(f"{w.url}/api/v1/chatflows", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    body = assert_error(r, 500)
    assert "relation" not in body["message"] and "api_keys" not in body["message"]
    request_id = r.headers["x-request-id"]
    w.stop()
    logs = w.logs()
    assert request_id in logs and "relation" in logs, logs[-2000:]
    assert key not in logs
