"""Workspace Python tools: CRUD, unique names, schema and requirement rules, scoping."""

import json

from weir_harness import assert_error

WEATHER_SCHEMA = [
    {"property": "city", "type": "string", "description": "City name", "required": True},
    {"property": "unit", "type": "enum", "enum": ["C", "F"]},
    {"property": "days", "type": "array", "items": "number"},
]


def weather(**fields):
    return {"name": "get_weather", "code": "return $city", **fields}


def test_crud(api):
    r = api.post(
        "/tools",
        json=weather(description="Weather of a city", schema=WEATHER_SCHEMA, requirements=["requests>=2.31"]),
    )
    assert r.status_code == 201, r.text
    tool = r.json()
    assert set(tool) == {
        "id", "name", "description", "schema", "code", "requirements", "createdDate", "updatedDate",
    }
    assert (tool["name"], tool["description"], tool["code"]) == ("get_weather", "Weather of a city", "return $city")
    assert tool["schema"] == [
        {"property": "city", "type": "string", "description": "City name", "required": True},
        {"property": "unit", "type": "enum", "description": "", "required": False, "enum": ["C", "F"]},
        {"property": "days", "type": "array", "description": "", "required": False, "items": "number"},
    ]
    assert tool["requirements"] == ["requests>=2.31"]
    assert tool["createdDate"].endswith("Z")
    assert api.get(f"/tools/{tool['id']}").json() == tool

    updated = api.put(f"/tools/{tool['id']}", json={"code": "return 'sunny'", "requirements": []}).json()
    assert (updated["code"], updated["requirements"]) == ("return 'sunny'", [])
    assert (updated["name"], updated["schema"], updated["description"]) == (
        tool["name"], tool["schema"], tool["description"],
    )
    assert updated["createdDate"] == tool["createdDate"]
    assert api.get("/tools").json() == [updated]

    assert api.delete(f"/tools/{tool['id']}").status_code == 204
    assert_error(api.get(f"/tools/{tool['id']}"), 404)
    assert_error(api.put(f"/tools/{tool['id']}", json={"code": "x"}), 404)
    assert_error(api.delete(f"/tools/{tool['id']}"), 404)


def test_defaults(api):
    tool = api.post("/tools", json={"name": "bare", "code": "return 1"}).json()
    assert (tool["description"], tool["schema"], tool["requirements"]) == ("", [], [])


def test_required_fields_are_412(api):
    assert_error(api.post("/tools", json={"code": "return 1"}), 412, "name")
    assert_error(api.post("/tools", json={"name": "t"}), 412, "code")
    assert_error(api.post("/tools", json={"name": None, "code": "return 1"}), 412, "name")


def test_names_are_unique_per_workspace(server, api):
    first = api.post("/tools", json=weather()).json()
    assert_error(api.post("/tools", json=weather(code="other")), 409, "get_weather")
    second = api.post("/tools", json={"name": "clock", "code": "return 1"}).json()
    assert_error(api.put(f"/tools/{second['id']}", json={"name": "get_weather"}), 409)
    assert api.get(f"/tools/{first['id']}").json()["code"] == "return $city"
    elsewhere = api.with_key(server.create_key(workspace="tools-elsewhere"))
    assert elsewhere.post("/tools", json=weather()).status_code == 201


def test_listing_is_paginated_by_name(api):
    for name in ("c", "a", "b"):
        assert api.post("/tools", json={"name": name, "code": "return 1"}).status_code == 201
    r = api.get("/tools", params={"limit": 2})
    assert [t["name"] for t in r.json()] == ["a", "b"] and r.headers["x-total-count"] == "3"
    r = api.get("/tools", params={"limit": 2, "page": 2})
    assert [t["name"] for t in r.json()] == ["c"] and r.headers["x-total-count"] == "3"
    assert_error(api.get("/tools", params={"limit": 101}), 400)


def test_bad_names_are_400(api):
    assert_error(api.post("/tools", json=weather(name="my tool")), 400, "my tool")
    assert_error(api.post("/tools", json=weather(name="")), 400)
    assert_error(api.post("/tools", json=weather(name="x" * 65)), 400)
    assert_error(api.post("/tools", json=weather(code="   ")), 400, "code")
    tool = api.post("/tools", json=weather()).json()
    assert_error(api.put(f"/tools/{tool['id']}", json={"name": "a.b"}), 400, "a.b")
    assert api.get(f"/tools/{tool['id']}").json()["name"] == "get_weather"


def test_schema_rules(api):
    unknown = [{"property": "when", "type": "date"}]
    assert_error(api.post("/tools", json=weather(schema=unknown)), 400, "unknown type 'date'")
    no_values = [{"property": "unit", "type": "enum"}]
    assert_error(api.post("/tools", json=weather(schema=no_values)), 400, "unit")
    bad_property = [{"property": "my city", "type": "string"}]
    assert_error(api.post("/tools", json=weather(schema=bad_property)), 400, "my city")
    twice = [{"property": "a", "type": "string"}, {"property": "a", "type": "number"}]
    assert_error(api.post("/tools", json=weather(schema=twice)), 400, "duplicate property 'a'")
    assert_error(api.post("/tools", json=weather(schema={"city": "string"})), 400, "schema")
    assert_error(api.post("/tools", json=weather(schema="[not json")), 400, "schema")


def test_schema_as_flowise_json_text(api):
    flowise = [
        {"id": 0, "property": "city", "description": "City", "type": "string", "required": True},
        {"id": 1, "property": "days", "description": "", "type": "number", "required": False},
    ]
    tool = api.post("/tools", json=weather(schema=json.dumps(flowise))).json()
    assert tool["schema"] == [
        {"property": "city", "type": "string", "description": "City", "required": True},
        {"property": "days", "type": "number", "description": "", "required": False},
    ]
    cleared = api.put(f"/tools/{tool['id']}", json={"schema": ""}).json()
    assert cleared["schema"] == []
    assert_error(api.put(f"/tools/{tool['id']}", json={"schema": [{"property": "x"}]}), 400, "type")
    assert api.get(f"/tools/{tool['id']}").json()["schema"] == []


def test_requirement_rules(api):
    for bad in ("-e git+https://x", "pkg @ http://x", "pkg; python_version<'3'", "my pkg", "pkg\n--index-url x"):
        assert_error(api.post("/tools", json=weather(requirements=[bad])), 400, "requirement")
    assert_error(api.post("/tools", json=weather(requirements="requests")), 400)
    good = ["requests", "numpy>=1.26,<3", "httpx[http2]==0.27.*"]
    assert api.post("/tools", json=weather(requirements=good)).json()["requirements"] == good


def test_other_workspace_gets_404(server, api):
    tool = api.post("/tools", json=weather()).json()
    stranger = api.with_key(server.create_key(workspace="tools-stranger"))
    path = f"/tools/{tool['id']}"
    assert_error(stranger.get(path), 404)
    assert_error(stranger.put(path, json={"code": "stolen"}), 404)
    assert_error(stranger.delete(path), 404)
    assert stranger.get("/tools").json() == []
    assert api.get(path).json()["code"] == "return $city"


def test_permissions(server, api):
    ws = "tools-perm"
    reader = api.with_key(server.create_key("tools:read", workspace=ws))
    writer = api.with_key(server.create_key("tools:read", "tools:write", workspace=ws))
    assert_error(reader.post("/tools", json=weather()), 403, "tools:write")
    tool = writer.post("/tools", json=weather()).json()
    assert reader.get(f"/tools/{tool['id']}").json() == tool
    assert_error(reader.put(f"/tools/{tool['id']}", json={"code": "x"}), 403, "tools:write")
    assert_error(reader.delete(f"/tools/{tool['id']}"), 403, "tools:write")
    others = api.with_key(server.create_key("variables:read", workspace=ws))
    assert_error(others.get("/tools"), 403, "tools:read")
