"""`openAPIToolkit`: an OpenAPI 3 description (YAML or JSON, uploaded as the node's
file) whose operations become an agent's tools — in a chatflow's tool agent and in
an agentflow agent's `agentTools` (Flowise's "Interacting With API" template shape,
its default `customCode` included). Calls go to a fake API on 127.0.0.2 through the
request tools' address guard; JavaScript of the node's own runs in the runtime's
sandbox."""

import json

import pytest

import flows
from fakes import FakeProviders, FakeSite
from flows import af_agent, af_openai, af_start, af_tool_row
from prediction_client import ask, create_flow, nonce, predict, tools_used
from tool_runtime import use_runtime
from weir_harness import Api, Weir, assert_error, backends

FLOWISE_DEFAULT_CODE = """const fetch = require('node-fetch');
const url = $url;
const options = $options;

try {
\tconst response = await fetch(url, options);
\tconst resp = await response.json();
\treturn JSON.stringify(resp);
} catch (error) {
\tconsole.error(error);
\treturn '';
}"""


def description(base, fmt="yaml"):
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "Pets", "version": "1"},
        "servers": [{"url": f"{base}/api"}],
        "paths": {
            "/pets/{petId}": {
                "parameters": [{"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}],
                "get": {"operationId": "showPetById", "summary": "Info for a pet",
                        "parameters": [{"name": "fields", "in": "query", "schema": {"type": "string"}}]},
            },
            "/pets": {
                "post": {"operationId": "createPet", "description": "Adds a pet",
                         "requestBody": {"required": True, "content": {"application/json": {
                             "schema": {"$ref": "#/components/schemas/Pet"}}}}},
            },
        },
        "components": {"schemas": {"Pet": {"type": "object", "required": ["name"],
                                           "properties": {"name": {"type": "string"}, "tag": {"type": "string"}}}}},
    }
    if fmt == "json":
        return json.dumps(spec)
    # YAML written by hand, as people write it (flow style is YAML too).
    return "\n".join(f"{key}: {json.dumps(value)}" for key, value in spec.items())


def toolkit(text, node_id="openAPIToolkit_0", **inputs):
    return flows.node(node_id, "openAPIToolkit", {
        "openApiFile": flows.data_url("pets.yaml", text, "application/x-yaml"), "returnDirect": "",
        "headers": json.dumps({"x-api-key": "k-123"}), "removeNulls": "", "customCode": "", **inputs})


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module")
def site():
    s = FakeSite("127.0.0.2", body='{"id": "7", "name": "Rex"}', content_type="application/json")
    yield s
    s.close()


@pytest.fixture(scope="module", params=backends())
def openapi_weir(request, py_runtime, tmp_path_factory):
    w = use_runtime(Weir(tmp_path_factory.mktemp(f"weir-openapi-{request.param}"), request.param), py_runtime)
    w.env.update(ALLOW_PRIVATE_REQUESTS="127.0.0.2")
    w.start()
    yield w
    w.cleanup()


@pytest.fixture
def oa_api(openapi_weir) -> Api:
    return Api(openapi_weir.url, openapi_weir.create_key(workspace=f"ws-{nonce()}"))


def test_operations_become_an_agents_tools(oa_api, fake, site):
    flow = create_flow(oa_api, flows.tool_agent(flows.openai_model(fake.url), [toolkit(description(site.url))]))
    marker = nonce()
    site.hits.clear()
    body = ask(oa_api, flow, f'{marker} CALL showPetById {{"PathParameters": {{"petId": "7 b"}}, '
                             f'"QueryParameters": {{"fields": "name"}}}} ;; '
                             f'CALL createPet {{"RequestBody": {{"name": "Rex", "tag": null}}}}')
    [(get_name, _, got), (post_name, _, posted)] = tools_used(body["usedTools"])
    assert (get_name, post_name) == ("showPetById", "createPet")
    assert json.loads(got) == {"id": "7", "name": "Rex"}
    assert posted == 'posted: {"name":"Rex","tag":null}'
    [(method, path, headers, _), (method2, path2, headers2, sent)] = site.hits
    assert (method, path) == ("GET", "/api/pets/7%20b?fields=name") and headers["x-api-key"] == "k-123"
    assert (method2, path2) == ("POST", "/api/pets") and headers2["content-type"] == "application/json"
    assert json.loads(sent) == {"name": "Rex", "tag": None}
    # What the model was offered: Flowise's argument names, the body schema inlined.
    offered = {t["function"]["name"]: t["function"] for t in fake.bodies("/chat/completions", marker)[0]["tools"]}
    assert set(offered) == {"showPetById", "createPet"}
    assert offered["showPetById"]["description"] == "Info for a pet"
    assert offered["showPetById"]["parameters"]["required"] == ["PathParameters"]
    assert offered["createPet"]["parameters"]["properties"]["RequestBody"]["required"] == ["name"]


def test_the_canvas_lists_the_descriptions_servers_and_endpoints(oa_api, site):
    """The node's pickers (`listServers`, `listEndpoints`) read the uploaded file; an
    endpoint's name is what `selectedEndpoints` keeps."""
    def load(method, **inputs):
        node = toolkit(description(site.url), **inputs)["data"]
        r = oa_api.post("/node-load-method/openAPIToolkit", json={**node, "loadMethod": method})
        assert r.status_code == 200, r.text
        return r.json()

    assert load("listServers") == [{"label": f"{site.url}/api", "name": f"{site.url}/api", "description": ""}]
    assert sorted(load("listEndpoints"), key=lambda e: e["name"]) == [
        {"label": "POST /pets", "name": "createPet", "description": "Adds a pet"},
        {"label": "GET /pets/{petId}", "name": "showPetById", "description": "Info for a pet"}]
    [missing] = load("listEndpoints", openApiFile="")
    assert missing["name"] == "error" and "openApiFile" in missing["description"], missing
    [swagger] = load("listServers", openApiFile=flows.data_url("old.json", '{"swagger": "2.0"}', "application/json"))
    assert swagger["label"] == "No Available Servers" and "OpenAPI 3" in swagger["description"], swagger


def test_selected_endpoints_and_remove_nulls(oa_api, fake, site):
    kit = toolkit(description(site.url, "json"), selectedEndpoints=json.dumps(["createPet"]), removeNulls=True)
    flow = create_flow(oa_api, flows.tool_agent(flows.openai_model(fake.url), [kit]))
    marker = nonce()
    body = ask(oa_api, flow, f'{marker} CALL createPet {{"RequestBody": {{"name": "Bo", "tag": null}}}}')
    assert tools_used(body["usedTools"])[0][2] == 'posted: {"name":"Bo"}'
    assert [t["function"]["name"] for t in fake.bodies("/chat/completions", marker)[0]["tools"]] == ["createPet"]


def test_an_agentflow_agent_uses_the_toolkit_with_flowises_default_code(oa_api, site):
    """"Interacting With API": the toolkit chosen in `agentTools`, its customCode
    Flowise's default (fetch and return the JSON), which weir runs itself."""
    fake = FakeProviders()
    try:
        config = {"yamlFile": flows.data_url("pets.yaml", description(site.url), "application/x-yaml"),
                  "returnDirect": "", "headers": "", "removeNulls": "", "customCode": FLOWISE_DEFAULT_CODE}
        agent = af_agent("agentAgentflow_0", af_openai(fake.url, field="agentModel"),
                         tools=[af_tool_row("openAPIToolkit", config)])
        flow = create_flow(oa_api, flows.agentflow([af_start(), agent], [("startAgentflow_0", "agentAgentflow_0")]),
                           type="AGENTFLOW")
        body = ask(oa_api, flow, 'CALL showPetById {"PathParameters": {"petId": "9"}}')
        assert body["text"] == 'Done: {"id": "7", "name": "Rex"}'
    finally:
        fake.close()


def test_code_of_the_nodes_own_runs_in_the_sandbox(oa_api, fake, site):
    code = ("const fetch = require('node-fetch');\n"
            "return `${$options.method} ${$url} ${$PathParameters.petId} ${typeof fetch}`;")
    flow = create_flow(oa_api, flows.tool_agent(flows.openai_model(fake.url),
                                                [toolkit(description(site.url), customCode=code)]))
    body = ask(oa_api, flow, 'CALL showPetById {"PathParameters": {"petId": "3"}}')
    assert tools_used(body["usedTools"])[0][2] == f"GET {site.url}/api/pets/3 3 function"


def test_an_api_on_a_private_address_is_refused(oa_api, fake):
    closed = FakeSite("127.0.0.3")
    try:
        flow = create_flow(oa_api, flows.tool_agent(flows.openai_model(fake.url), [toolkit(description(closed.url))]))
        body = ask(oa_api, flow, 'CALL showPetById {"PathParameters": {"petId": "1"}}')
        output = tools_used(body["usedTools"])[0][2]
        assert output.startswith("Error:") and "127.0.0.3" in output, output
        assert closed.hits == []
    finally:
        closed.close()


@pytest.mark.parametrize("inputs, words", [
    ({"inputType": "link", "openApiLink": "https://example.com/openapi.yaml", "openApiFile": ""}, "openApiLink"),
    ({"openApiFile": flows.data_url("x.yaml", "swagger: '2.0'", "application/x-yaml")}, "OpenAPI 3"),
    ({"openApiFile": ""}, "openApiFile"),
    ({"selectedEndpoints": json.dumps(["nothing"])}, "selectedEndpoints"),
])
def test_a_description_weir_cannot_use_is_a_400(oa_api, fake, site, inputs, words):
    kit = toolkit(description(site.url), **inputs)
    r = oa_api.post("/chatflows", json={"name": "oa", "flowData": json.dumps(
        flows.tool_agent(flows.openai_model(fake.url), [kit]))})
    if r.status_code == 201:
        r = predict(oa_api, r.json()["id"], "hi")
    assert_error(r, 400, words)
