"""The binary as an operator meets it: first start, configuration errors,
migrations, graceful shutdown, OpenAPI and docs."""

import os
import stat
import time

import pytest
import requests

from weir_harness import backends


@pytest.mark.parametrize("backend", backends())
def test_first_start_creates_one_key(make_weir, backend):
    w = make_weir(backend).start()
    key_file = w.data_dir / "initial-api-key"
    key = key_file.read_text().strip()
    assert key.startswith("weir_")
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert key in w.stdout_path.read_text()
    assert key not in w.logs()
    r = requests.get(f"{w.url}/api/v1/apikey", headers={"Authorization": f"Bearer {key}"}, timeout=5)
    assert r.status_code == 200 and [k["workspace"] for k in r.json()] == ["default"]
    assert w.stop() == 0
    # A second start keeps the store and makes no new key.
    w.start()
    assert key_file.read_text().strip() == key
    assert w.stdout_path.read_text().count("weir_") == 1
    r = requests.get(f"{w.url}/api/v1/apikey", headers={"Authorization": f"Bearer {key}"}, timeout=5)
    assert len(r.json()) == 1


@pytest.mark.parametrize("env,word", [
    ({"PORT": "abc"}, "port"),
    ({"DATABASE_URL": "mysql://x"}, "postgres"),
    ({"LOG_FORMAT": "xml"}, "xml"),
    ({"PYTHON_RUNTIME": "localhost:8000"}, "http"),
    ({"DATABASE_SCHEMA": "Bad-Name"}, "Bad-Name"),
    ({"ALLOW_PRIVATE_REQUESTS": "intranet"}, "intranet"),
])
def test_bad_configuration_fails_with_one_line(make_weir, env, word):
    w = make_weir()
    r = w.cli("serve", check=False, env=env)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert word.lower() in lines[0].lower() and "panicked" not in r.stderr


def test_unreachable_database_fails_cleanly(make_weir):
    w = make_weir()
    r = w.cli("migrate", check=False, env={"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"})
    assert r.returncode != 0 and "panicked" not in r.stderr
    assert "store" in r.stderr.lower()


@pytest.mark.parametrize("backend", backends())
def test_migrate_then_serve(make_weir, backend):
    w = make_weir(backend)
    w.cli("migrate")
    w.cli("migrate")
    w.start()
    assert requests.get(f"{w.url}/api/v1/ping", timeout=5).text == "pong"


def test_an_unreachable_python_runtime_is_a_warning_not_a_failure(make_weir):
    from weir_harness import free_port
    w = make_weir()
    w.env.update(PYTHON_RUNTIME=f"http://127.0.0.1:{free_port()}", PY_TOOL_API_KEY="sekrit-runtime-key")
    w.start()
    assert requests.get(f"{w.url}/api/v1/ping", timeout=5).text == "pong"
    deadline = time.monotonic() + 10
    while "Python tool runtime is not reachable" not in w.logs() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "Python tool runtime is not reachable" in w.logs()
    assert "sekrit-runtime-key" not in w.logs()


def test_sigterm_stops_cleanly(make_weir):
    w = make_weir().start()
    assert w.stop() == 0
    assert "shut down cleanly" in w.logs()


def test_json_logs(make_weir):
    w = make_weir()
    w.env["LOG_FORMAT"] = "json"
    w.env["LOG_LEVEL"] = "debug"  # one line per request is a debug line
    w.start()
    requests.get(f"{w.url}/api/v1/ping", timeout=5)
    w.stop()
    import json
    lines = [json.loads(line) for line in w.logs().splitlines() if line.strip()]
    assert any("request_id" in str(line) for line in lines)


def test_openapi_and_docs(server):
    doc = requests.get(f"{server.url}/api/v1/openapi.json", timeout=5).json()
    assert doc["openapi"].startswith("3.1")
    for path in ("/api/v1/chatflows", "/api/v1/chatflows/{id}", "/api/v1/variables", "/api/v1/apikey"):
        assert path in doc["paths"], path
    ui = requests.get(f"{server.url}/api/v1/docs", timeout=5)
    assert ui.status_code == 200 and "swagger" in ui.text.lower()
    assert "unpkg.com" not in ui.text and "cdn" not in ui.text.lower()
