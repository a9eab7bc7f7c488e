"""Python tools through weir and the real Python runtime: stored tools (`pythonTool`
with toolId, Flowise's `customTool` with selectedTool) and inline ones, workspace
variables ($vars, runtime variables, overrideConfig.vars), $flow, artifacts served
by weir with the workspace's key, the runtime going away (JavaScript tools:
test_javascript.py)."""

import json
import re
import time
import uuid

import pytest
import requests

import flows
from fakes import FakeProviders
from prediction_client import assert_stream, ask, create_flow, predict, stream, tools_used
from tool_runtime import start_runtime, use_runtime
from weir_harness import Api, Weir, assert_error


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


FORECAST_CODE = '''import csv


def main(city, days=1):
    unit = "{{$vars.unit}}"
    region = "{{$vars.WEIR_TEST_REGION}}"
    session = "{{$flow.sessionId}}"
    secret = "{{$vars.secret}}"
    with open("forecast.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["city", "days", "unit", "session"])
        writer.writerow([city, days, unit, session])
    return {"city": city, "days": days, "unit": unit, "region": region, "session": session, "secret": secret}
'''

FORECAST = {
    "name": "forecast",
    "description": "Writes a forecast table for a city",
    "schema": [
        {"property": "city", "type": "string", "description": "City name", "required": True},
        {"property": "days", "type": "number", "description": "How many days", "required": False},
    ],
    "code": FORECAST_CODE,
    "requirements": [],
}

ASK_FORECAST = 'Forecast please. CALL forecast {"city": "Paris", "days": 2}'


def create_tool(api, tool=FORECAST) -> str:
    r = api.post("/tools", json=tool)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def create_variables(api):
    """`unit` (static), WEIR_TEST_REGION (runtime: py_server's environment holds it
    and RUNTIME_VARIABLES lets tools read it) and `secret` (runtime, naming an
    environment variable RUNTIME_VARIABLES does not list: reads empty)."""
    for var in ({"name": "unit", "value": "celsius"}, {"name": "WEIR_TEST_REGION", "type": "runtime"},
                {"name": "secret", "value": "WEIR_TEST_SECRET", "type": "runtime"}):
        r = api.post("/variables", json=var)
        assert r.status_code == 201, r.text


def workspace_of(api, flow):
    """The workspace's id (artifact URLs and the runtime's workspace use the id,
    which never changes, rather than the name)."""
    return api.get(f"/chatflows/{flow}").json()["workspaceId"]


def forecast_flow(api, fake, node="pythonTool", **fields):
    tool_id = create_tool(api)
    tool = flows.python_tool(toolId=tool_id) if node == "pythonTool" else flows.custom_tool(tool_id)
    return create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [tool]), **fields)


def forecast_output(body):
    [(tool, arguments, output)] = tools_used(body["usedTools"])
    assert (tool, arguments) == ("forecast", {"city": "Paris", "days": 2})
    assert body["text"] == f"Done: {output}"
    return json.loads(output)


@pytest.mark.parametrize("node", ["pythonTool", "customTool"])
def test_a_stored_python_tool_runs_with_variables_and_writes_an_artifact(py_server, py_api, fake, node):
    create_variables(py_api)
    flow = forecast_flow(py_api, fake, node)
    body = ask(py_api, flow, ASK_FORECAST, chatId="sess-42")
    assert forecast_output(body) == {"city": "Paris", "days": 2, "unit": "celsius", "region": "eu-test",
                                     "session": "sess-42", "secret": ""}

    # The model was offered the tool's schema as JSON Schema.
    [offered] = fake.last("/chat/completions")["tools"]
    assert offered["function"]["name"] == "forecast"
    parameters = offered["function"]["parameters"]
    assert parameters["properties"]["city"]["type"] == "string"
    assert parameters["properties"]["days"]["type"] == "number"
    assert parameters.get("required") == ["city"]

    [artifact] = body["artifacts"]
    workspace = workspace_of(py_api, flow)
    assert re.fullmatch(r"forecast(-\d+)?\.csv", artifact["filename"]), artifact
    assert artifact["type"] == "csv" and artifact["mimeType"].startswith("text/csv")
    assert artifact["url"] == artifact["data"] == f"/api/v1/artifacts/{workspace}/{artifact['filename']}"

    r = requests.get(py_api.url + artifact["url"], headers={"Authorization": f"Bearer {py_api.key}"}, timeout=10)
    assert r.status_code == 200, r.text
    assert "Paris,2,celsius,sess-42" in r.text and len(r.content) == artifact["size"]
    assert requests.get(py_api.url + artifact["url"], params={"apiKey": py_api.key}, timeout=10).text == r.text
    assert_error(requests.get(py_api.url + artifact["url"], timeout=10), 401)
    stranger = py_server.create_key(workspace="artifact-stranger")
    assert_error(requests.get(py_api.url + artifact["url"], headers={"Authorization": f"Bearer {stranger}"},
                              timeout=10), 404)


def test_a_streamed_python_tool_answer_carries_its_artifacts(py_api, fake):
    create_variables(py_api)
    flow = forecast_flow(py_api, fake)
    text = ask(py_api, flow, ASK_FORECAST, chatId="sse-1")["text"]
    after = assert_stream(stream(py_api, flow, ASK_FORECAST, chatId="sse-1"), text, ["usedTools", "artifacts"])
    [artifact] = after["artifacts"]
    assert artifact["filename"].endswith(".csv") and artifact["url"].startswith("/api/v1/artifacts/")


def test_override_config_vars_need_the_chatflows_allowance(py_api, fake):
    """Tool code trusts its variables: a caller may replace them only where the
    chatflow's apiConfig allows `vars` (and code, URLs, tool ids never without it)."""
    create_variables(py_api)
    flow = forecast_flow(py_api, fake)
    assert_error(predict(py_api, flow, ASK_FORECAST, overrideConfig={"vars": {"unit": "kelvin"}}), 403, "vars")
    assert_error(predict(py_api, flow, ASK_FORECAST, overrideConfig={"code": "result = 1"}), 403, "code")
    assert_error(predict(py_api, flow, ASK_FORECAST, overrideConfig={"toolId": str(uuid.uuid4())}), 403)


def test_override_config_vars_replace_workspace_variables(py_api, fake):
    create_variables(py_api)
    flow = forecast_flow(py_api, fake, apiConfig=json.dumps({"overrideConfig": {"allow": ["vars"]}}))
    assert_error(predict(py_api, flow, ASK_FORECAST, overrideConfig={"vars": "kelvin"}), 400, "vars")
    assert forecast_output(ask(py_api, flow, ASK_FORECAST))["unit"] == "celsius"
    overridden = ask(py_api, flow, ASK_FORECAST, overrideConfig={"vars": {"unit": "kelvin"}})
    assert forecast_output(overridden)["unit"] == "kelvin"
    assert forecast_output(ask(py_api, flow, ASK_FORECAST))["unit"] == "celsius", "an override lasts one request"


def inline_adder(**inputs):
    schema = [{"property": "a", "type": "number", "description": "First", "required": True},
              {"property": "b", "type": "number", "description": "Second", "required": True}]
    return flows.python_tool(toolName="add_numbers", toolDescription="Adds two numbers", schema=json.dumps(schema),
                             code="def main(a, b):\n    return f'sum={a + b}'\n", **inputs)


def test_an_inline_python_tool(py_api, fake):
    flow = create_flow(py_api, flows.tool_agent(flows.openai_model(fake.url), [inline_adder(timeout=20)]))
    body = ask(py_api, flow, 'Add them. CALL add_numbers {"a": 2, "b": 3}')
    assert tools_used(body["usedTools"]) == [("add_numbers", {"a": 2, "b": 3}, "sum=5")]
    assert body["text"] == "Done: sum=5" and not body.get("artifacts")


REPORT_CODE = """def main(title):
    with open("report.html", "w") as f:
        f.write("<script>fetch('/api/v1/chatflows' + location.search)</script>" + title)
    with open("chart.svg", "w") as f:
        f.write('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    with open("notes.txt", "w") as f:
        f.write(title)
    return "written"
"""


def report_flow(api, fake):
    schema = [{"property": "title", "type": "string", "description": "Title", "required": True}]
    tool = flows.python_tool(toolName="write_report", toolDescription="Writes a report", schema=json.dumps(schema),
                             code=REPORT_CODE)
    return create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [tool]))


def fetched_artifacts(api, fake):
    body = ask(api, report_flow(api, fake), 'Report. CALL write_report {"title": "hi"}')
    by_name = {re.sub(r"-\d+(?=\.)", "", a["filename"]): a for a in body["artifacts"]}
    assert set(by_name) == {"report.html", "chart.svg", "notes.txt"}, body["artifacts"]
    return {name: requests.get(api.url + a["url"], params={"apiKey": api.key}, timeout=10)
            for name, a in by_name.items()}


def test_active_artifacts_never_run_on_weirs_origin(py_api, fake):
    """An HTML or SVG file a tool wrote, opened through weir with ?apiKey=, cannot
    script weir's origin (and read the key from its location): the policy reaches
    the client with frame-ancestors added, not replaced, and the page is a download."""
    fetched = fetched_artifacts(py_api, fake)
    for name, r in fetched.items():
        assert r.status_code == 200, r.text
        policy = [d.strip() for d in r.headers["Content-Security-Policy"].split(";")]
        assert "sandbox" in policy and any(d.startswith("frame-ancestors") for d in policy), policy
        assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert fetched["report.html"].headers["Content-Type"].startswith("text/html")
    for name in ("report.html", "chart.svg"):
        disposition = fetched[name].headers.get("Content-Disposition", "")
        assert disposition.startswith("attachment") and name.split(".")[1] in disposition, disposition
    assert "Content-Disposition" not in fetched["notes.txt"].headers
    assert fetched["notes.txt"].text == "hi"


def test_active_artifacts_inline_when_allowed(py_runtime, fake, tmp_path_factory):
    w = use_runtime(Weir(tmp_path_factory.mktemp("weir-inline"), "sqlite"), py_runtime)
    w.env["ARTIFACTS_INLINE_HTML"] = "true"
    w.start()
    try:
        fetched = fetched_artifacts(Api(w.url, w.create_key()), fake)
        html = fetched["report.html"]
        assert "Content-Disposition" not in html.headers and "<script>" in html.text
        assert html.headers["Content-Security-Policy"].startswith("sandbox;")
    finally:
        w.cleanup()


def test_the_runtime_going_away_is_a_tool_error(fake, tmp_path_factory):
    """A runtime and weir of its own: the shared runtime keeps running."""
    runtime = start_runtime(tmp_path_factory.mktemp("pyruntime-down"))
    w = use_runtime(Weir(tmp_path_factory.mktemp("weir-runtime-down"), "sqlite"), runtime).start()
    try:
        api = Api(w.url, w.create_key())
        flow = create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [inline_adder()]))
        question = 'CALL add_numbers {"a": 2, "b": 3}'
        assert ask(api, flow, question)["text"] == "Done: sum=5"
        runtime.stop()
        started = time.monotonic()
        body = ask(api, flow, question)
        assert time.monotonic() - started < 10
        [(_, _, output)] = tools_used(body["usedTools"])
        assert output.startswith("Error:") and "python runtime" in output.lower(), output
    finally:
        w.cleanup()
        runtime.stop()


def test_a_flow_selecting_a_tool_the_workspace_lacks_is_refused_when_saved(api, fake):
    missing = str(uuid.uuid4())
    flow_data = flows.tool_agent(flows.openai_model(fake.url), [flows.custom_tool(missing)])
    r = api.post("/chatflows", json={"name": "f", "flowData": flow_data})
    assert missing in assert_error(r, 400)["message"]
    # The same in an agentflow's tool node, and when an existing flow is changed.
    node = flows.af_tool("toolAgentflow_0", "customTool", {}, config={"selectedTool": missing})
    start = flows.af_start()
    r = api.post("/chatflows", json={"name": "f", "type": "AGENTFLOW",
                                     "flowData": flows.agentflow([start, node], [(start["id"], node["id"])])})
    assert missing in assert_error(r, 400)["message"]
    flow = create_flow(api, flows.conversation(flows.openai_model(fake.url)))
    assert missing in assert_error(api.put(f"/chatflows/{flow}", json={"flowData": flow_data}), 400)["message"]
    # A tool of the workspace is fine.
    tool = api.post("/tools", json=FORECAST)
    assert tool.status_code == 201, tool.text
    create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [flows.custom_tool(tool.json()["id"])]))
