"""Several Python runtimes (`PYTHON_RUNTIME=a,b`): each workspace's runs stay on one
of them (rendezvous placement over the addresses), a workspace whose runtime dies
moves to the other and its artifacts stay reachable, it moves back once its runtime
answers again (to the environment it already had there), and /metrics shows which
runtimes are up and where runs went."""

import json

import pytest
import requests

import flows
from fakes import FakeProviders
from prediction_client import ask, create_flow, tools_used
from test_metrics import samples, scrape
from tool_runtime import PY_TOOL_API_KEY, start_runtime
from weir_harness import Api, Weir, wait_for

HEALTH_MS = 200


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


def marker_tool():
    """Writes `mark-<n>.txt` (an artifact: which runtime ran it shows in its directory)."""
    schema = [{"property": "n", "type": "number", "description": "Which run", "required": True}]
    code = ("def main(n):\n    with open(f'mark-{int(n)}.txt', 'w') as f:\n        f.write(str(int(n)))\n"
            "    return f'marked {int(n)}'\n")
    return flows.python_tool(toolName="mark", toolDescription="Marks a run", schema=json.dumps(schema), code=code)


def mark(api, flow, n):
    body = ask(api, flow, f'Mark it. CALL mark {{"n": {n}}}')
    [(_, _, output)] = tools_used(body["usedTools"])
    assert output == f"marked {n}", output
    return body


def ran_on(runtimes, workspace, n):
    """The runtimes whose artifact directory holds run n's marker."""
    return [r for r in runtimes if (r.artifacts / workspace / f"mark-{n}.txt").exists()]


def metric(weir, name, runtime):
    return samples(scrape(weir, "metrics-secret").text).get(f'{name}{{runtime="{runtime.url}"}}')


def test_workspaces_stay_put_move_when_their_runtime_dies_and_come_back(fake, tmp_path_factory):
    a = start_runtime(tmp_path_factory.mktemp("runtime-a"))
    b = start_runtime(tmp_path_factory.mktemp("runtime-b"))
    w = Weir(tmp_path_factory.mktemp("weir-two-runtimes"), "sqlite")
    w.env.update(PYTHON_RUNTIME=f"{a.url},{b.url}", PY_TOOL_API_KEY=PY_TOOL_API_KEY,
                 PYTHON_RUNTIME_HEALTH_MS=str(HEALTH_MS), METRICS_TOKEN="metrics-secret")
    w.start()
    try:
        # Workspaces until each runtime holds two (placement is by hash).
        placed = {}  # workspace -> (api, flow, runtime)
        n = 0
        while min(sum(r is rt for (_, _, r) in placed.values()) for rt in (a, b)) < 2:
            assert len(placed) < 40, "forty workspaces all placed on one runtime"
            api = Api(w.url, w.create_key(workspace=f"ws-{len(placed)}"))
            flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [marker_tool()]))
            workspace = api.get(f"/chatflows/{flow}").json()["workspaceId"]
            n += 1
            mark(api, flow, n)
            [runtime] = ran_on([a, b], workspace, n)
            placed[workspace] = (api, flow, runtime)

        # Every later run of a workspace goes where its first one went.
        for workspace, (api, flow, runtime) in placed.items():
            for _ in range(2):
                n += 1
                mark(api, flow, n)
                assert ran_on([a, b], workspace, n) == [runtime]
        on_b = [ws for ws, (_, _, r) in placed.items() if r is b]
        assert not any((a.venvs / ws).exists() for ws in on_b), "a workspace on b got an environment on a"
        assert metric(w, "weir_python_runtime_up", a) == 1 and metric(w, "weir_python_runtime_up", b) == 1
        assert metric(w, "weir_python_runtime_runs_total", b) >= 3 * len(on_b)

        # b dies: its workspaces run on a at once (a refused connection is tried on the
        # next runtime); a's never move; the health check marks b down.
        b_port = b.url.rsplit(":", 1)[1]
        b.stop()
        moved = {}
        for workspace, (api, flow, runtime) in placed.items():
            n += 1
            body = mark(api, flow, n)
            assert ran_on([a, b], workspace, n) == [a]
            if runtime is b:
                moved[workspace] = (api, n, body)
        wait_for(lambda: metric(w, "weir_python_runtime_up", b) == 0, 10, "b reported down")
        # An artifact written while moved is served by weir from where it is.
        for workspace, (api, n_moved, body) in moved.items():
            [artifact] = body["artifacts"]
            r = requests.get(api.url + artifact["url"], headers={"Authorization": f"Bearer {api.key}"}, timeout=10)
            assert r.status_code == 200 and r.text == str(n_moved), r.text

        # b answers again at its address: its workspaces go back to it, where their
        # environments are, and the artifacts they wrote on a stay reachable.
        b = start_runtime_at(b, b_port)
        wait_for(lambda: metric(w, "weir_python_runtime_up", b) == 1, 10, "b reported up again")
        for workspace in on_b:
            api, flow, _ = placed[workspace]
            n += 1
            mark(api, flow, n)
            assert ran_on([a, b], workspace, n) == [b]
            _, n_moved, body = moved[workspace]
            [artifact] = body["artifacts"]
            r = requests.get(api.url + artifact["url"], headers={"Authorization": f"Bearer {api.key}"}, timeout=10)
            assert r.status_code == 200 and r.text == str(n_moved), r.text
    finally:
        w.cleanup()
        a.stop()
        b.stop()


def start_runtime_at(old, port):
    """The runtime `old` again, on its data directory and port."""
    from runtime_harness import Runtime
    env = {k: v for k, v in old.env.items() if k.startswith("PY_TOOL_")}
    env["PY_TOOL_PORT"] = port
    return Runtime(list(old.process.args), old.data, env)


def test_a_runtime_list_with_a_bad_address_is_refused_at_start(tmp_path_factory):
    w = Weir(tmp_path_factory.mktemp("weir-bad-runtimes"), "sqlite")
    w.env["PYTHON_RUNTIME"] = "http://127.0.0.1:8000,ftp://elsewhere"
    proc = w.cli("serve", check=False)
    assert proc.returncode != 0
    assert "python-runtime" in proc.stderr and "ftp://elsewhere" in proc.stderr, proc.stderr
