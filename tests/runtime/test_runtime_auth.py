"""PY_TOOL_API_KEY: every endpoint but /tools/health needs `Authorization: Bearer <key>`."""

import os
import subprocess

import pytest
import requests

KEY = "rt-test-key-0123456789"


@pytest.fixture(scope="module")
def secured(start_runtime):
    return start_runtime({"PY_TOOL_API_KEY": KEY})


def call(runtime, method, path, headers=None, **kwargs):
    return requests.request(method, runtime.url + path, headers=headers or {}, timeout=60, **kwargs)


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/tools/execute-python", {"code": "result = 1"}),
        ("POST", "/tools/execute-javascript", {"code": "return 1;"}),
        ("POST", "/tools/install-packages", {"packages": ["six"]}),
        ("POST", "/tools/mcp-stdio", {"server": {"command": "node"}, "method": "tools/list"}),
        ("GET", "/tools/mcp-stdio", None),
        ("GET", "/tools/artifacts/default/anything.txt", None),
    ],
)
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-key"},
        {"Authorization": f"Bearer {KEY}x"},
        {"Authorization": f"Basic {KEY}"},
        {"Authorization": KEY},
    ],
    ids=["none", "wrong", "longer", "basic", "no-scheme"],
)
def test_requests_without_the_key_are_401(secured, method, path, body, headers):
    response = call(secured, method, path, headers=headers, json=body)
    assert response.status_code == 401
    assert response.json() == {"message": "missing or invalid API key"}


def test_the_key_is_checked_before_the_body_is_read(secured):
    # Neither the size limit (413) nor JSON parsing (400) gets to see this body.
    response = call(
        secured, "POST", "/tools/execute-python",
        headers={"Content-Type": "application/json"},
        data=b"{" + b"x" * (12 << 20),
    )
    assert response.status_code == 401


def test_the_right_key_is_accepted(secured):
    response = call(
        secured, "POST", "/tools/execute-python",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"code": "result = 6 * 7"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["result"] == 42


def test_health_stays_open_and_shows_details_only_with_the_key(secured):
    """Liveness for anyone; paths, interpreter, load and isolation only with the key."""
    anonymous = call(secured, "GET", "/tools/health")
    assert anonymous.status_code == 200 and anonymous.json() == {"status": "ok"}
    wrong = call(secured, "GET", "/tools/health", headers={"Authorization": "Bearer nope"})
    assert wrong.json() == {"status": "ok"}
    keyed = call(secured, "GET", "/tools/health", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert keyed["status"] == "ok" and {"python", "uv", "load", "isolation"} <= set(keyed)


def test_without_a_key_the_runtime_refuses_to_start(binary, tmp_path):
    # Tool code reaches loopback: a runtime without a key would run code as any workspace.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PY_TOOL_")}
    env.update(PY_TOOL_VENVS=str(tmp_path / "v"), PY_TOOL_ARTIFACTS=str(tmp_path / "a"), PY_TOOL_PORT="0")
    for key in (None, "", "   "):
        if key is not None:
            env["PY_TOOL_API_KEY"] = key
        done = subprocess.run([str(binary)], env=env, capture_output=True, timeout=60)
        assert done.returncode != 0
        lines = done.stderr.decode().strip().splitlines()
        assert "PY_TOOL_API_KEY is required" in lines[-1], lines
        assert "PY_TOOL_INSECURE_NO_KEY=1" in lines[-1]
        assert b"listening" not in done.stdout


def test_insecure_no_key_serves_without_one(start_runtime):
    open_runtime = start_runtime({"PY_TOOL_INSECURE_NO_KEY": "1"})
    assert open_runtime.headers == {}
    response = call(open_runtime, "POST", "/tools/execute-python", json={"code": "result = 1"})
    assert response.status_code == 200, response.text


def test_the_openapi_document_is_open_and_complete(secured):
    """`/tools/openapi.json` needs no key (like /tools/health); scripts/fuzz checks the
    server against it."""
    r = call(secured, "GET", "/tools/openapi.json")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {"/tools/health", "/tools/openapi.json", "/tools/execute-python",
                                 "/tools/execute-javascript", "/tools/install-packages", "/tools/mcp-stdio",
                                 "/tools/artifacts/{workspace_id}/{filename}", "/metrics"}
    for run in ("/tools/execute-python", "/tools/execute-javascript"):
        statuses = set(doc["paths"][run]["post"]["responses"])
        assert {"200", "400", "401", "412", "413", "415", "429", "500"} <= statuses, run
