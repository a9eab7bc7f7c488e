"""`GET /metrics` of the runtime: OpenMetrics text to PY_TOOL_METRICS_TOKEN (not the
API key), runs by outcome with their durations, and load, zygotes and isolation
layers as they are when scraped."""

import requests

TOKEN = "rt-metrics-token"


def samples(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def scrape(runtime, token=TOKEN):
    return requests.get(runtime.url + "/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_runs_are_counted_by_outcome(start_runtime, workspace):
    runtime = start_runtime({"PY_TOOL_METRICS_TOKEN": TOKEN})
    assert runtime.execute("result = 1 + 1", workspace_id=workspace)["success"] is True
    assert runtime.execute("raise ValueError('no')", workspace_id=workspace)["success"] is False
    assert runtime.execute("import time\ntime.sleep(5)", workspace_id=workspace, timeout=1)["timedOut"] is True
    assert runtime.post("/tools/execute-python", {"workspace_id": workspace}).status_code == 412

    r = scrape(runtime)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    got = samples(r.text)
    for outcome in ("success", "error", "timeout", "refused"):
        assert got[f'weir_pyruntime_runs_total{{outcome="{outcome}"}}'] == 1, outcome
    assert got["weir_pyruntime_run_duration_seconds_count"] == 4
    assert got["weir_pyruntime_running"] == 0 and got["weir_pyruntime_queue_depth"] == 0
    assert got["weir_pyruntime_zygotes"] == runtime.get("/tools/health").json()["zygotes"]
    # Each isolation layer /tools/health reports, as 1 (enforced) or 0.
    layers = runtime.get("/tools/health").json()["isolation"]["layers"]
    for name, layer in layers.items():
        want = 1 if layer["state"] == "enforced" else 0
        assert got[f'weir_pyruntime_isolation_layer_enforced{{layer="{name}"}}'] == want, name


def test_only_the_metrics_token_opens_it(start_runtime):
    runtime = start_runtime({"PY_TOOL_METRICS_TOKEN": TOKEN})
    assert scrape(runtime, token="wrong").status_code == 401
    # The API key runs code; it does not read metrics, nor the token run code.
    assert scrape(runtime, token=runtime.env["PY_TOOL_API_KEY"]).status_code == 401
    r = requests.post(runtime.url + "/tools/execute-python", json={"code": "result = 1"},
                      headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert r.status_code == 401
    # The token shows /tools/health's details, as the API key does.
    health = requests.get(runtime.url + "/tools/health", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert "isolation" in health.json()
    # Without the setting there are no metrics.
    plain = start_runtime()
    r = scrape(plain)
    assert r.status_code == 404 and "PY_TOOL_METRICS_TOKEN" in r.json()["message"]
