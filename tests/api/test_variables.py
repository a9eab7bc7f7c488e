"""Workspace variables: CRUD, unique names, types."""

from weir_harness import assert_error


def test_crud(api):
    r = api.post("/variables", json={"name": "region", "value": "eu", "type": "static"})
    assert r.status_code == 201, r.text
    var = r.json()
    assert {k: var[k] for k in ("name", "value", "type")} == {"name": "region", "value": "eu", "type": "static"}
    assert var["createdDate"].endswith("Z")
    assert api.get(f"/variables/{var['id']}").json() == var
    updated = api.put(f"/variables/{var['id']}", json={"value": "HOME", "type": "runtime"}).json()
    assert (updated["name"], updated["value"], updated["type"]) == ("region", "HOME", "runtime")
    assert api.get("/variables").json() == [updated]
    assert api.delete(f"/variables/{var['id']}").status_code == 204
    assert_error(api.get(f"/variables/{var['id']}"), 404)


def test_defaults_and_validation(api):
    var = api.post("/variables", json={"name": "empty"}).json()
    assert (var["value"], var["type"]) == ("", "static")
    assert_error(api.post("/variables", json={"value": "x"}), 412, "name")
    assert_error(api.post("/variables", json={"name": "x", "type": "dynamic"}), 400)
    assert_error(api.post("/variables", json={"name": ""}), 400)
    assert_error(api.post("/variables", json={"name": "{{x}}"}), 400)
    assert_error(api.post("/variables", json={"name": "n", "value": 5}), 400)


def test_names_are_unique_per_workspace(server, api):
    a = api.post("/variables", json={"name": "token", "value": "1"}).json()
    assert_error(api.post("/variables", json={"name": "token", "value": "2"}), 409, "token")
    b = api.post("/variables", json={"name": "other"}).json()
    assert_error(api.put(f"/variables/{b['id']}", json={"name": "token"}), 409)
    assert api.get(f"/variables/{a['id']}").json()["value"] == "1"
    elsewhere = api.with_key(server.create_key(workspace="vars-elsewhere"))
    assert elsewhere.post("/variables", json={"name": "token"}).status_code == 201


def test_listing_is_paginated_by_name(api):
    for name in ("c", "a", "b"):
        api.post("/variables", json={"name": name})
    r = api.get("/variables", params={"limit": 2})
    assert [v["name"] for v in r.json()] == ["a", "b"] and r.headers["x-total-count"] == "3"
