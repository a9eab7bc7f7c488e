"""Agentflow executions over HTTP: the permissions, and the answers a server gives
before any agentflow has run (executions are made by the engine; the Rust tests
in api/tests/executions_api.rs cover listing, sharing and deleting stored ones)."""

import uuid

from weir_harness import assert_error


def test_permission_names_are_accepted(server, api):
    created = api.post("/apikey", json={"keyName": "exec", "permissions": ["executions:read", "executions:write"]})
    assert created.status_code == 201, created.text
    assert sorted(created.json()["permissions"]) == ["executions:read", "executions:write"]
    reader = api.with_key(created.json()["apiKey"])
    assert reader.get("/executions").status_code == 200
    # The command line knows them too.
    ws = f"ws-{uuid.uuid4().hex[:8]}"
    only_read = api.with_key(server.create_key("executions:read", workspace=ws))
    assert only_read.get("/executions").status_code == 200
    assert_error(only_read.delete("/executions", json={"executionIds": [str(uuid.uuid4())]}), 403, "executions:write")
    assert_error(api.with_key(server.create_key("chatflows:read", workspace=ws)).get("/executions"), 403,
                 "executions:read")


def test_a_fresh_workspace_has_no_executions(api):
    r = api.get("/executions")
    assert r.status_code == 200, r.text
    assert r.json() == {"data": [], "total": 0}
    assert api.get("/executions", params={"state": "FINISHED", "agentflowName": "x", "page": 2}).json() == {
        "data": [], "total": 0}


def test_errors(api):
    unknown = str(uuid.uuid4())
    assert_error(api.get(f"/executions/{unknown}"), 404)
    assert_error(api.put(f"/executions/{unknown}", json={"isPublic": True}), 404)
    assert_error(api.delete(f"/executions/{unknown}"), 404)
    assert_error(api.get(f"/public-executions/{unknown}", key=None), 404)
    assert_error(api.delete("/executions"), 400, "No execution IDs provided")
    assert_error(api.delete("/executions", json={"executionIds": []}), 400, "No execution IDs provided")
    assert_error(api.get("/executions", params={"state": "DONE"}), 400, "STOPPED")
    assert_error(api.get("/executions", params={"startDate": "not a date"}), 400, "startDate")
    assert_error(api.get("/executions", key=None), 401)
    assert_error(api.get(f"/executions/{unknown}", key=None), 401)
