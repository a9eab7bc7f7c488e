"""API keys: how they are presented, checked, scoped and managed."""

import re
import time

from weir_harness import FLOW, Api, assert_error


def test_ping_needs_no_key(api):
    r = api.get("/ping", key=None)
    assert r.status_code == 200 and r.text == "pong"


def test_missing_and_unknown_keys_are_401(api):
    assert_error(api.get("/chatflows", key=None), 401, "API key")
    assert_error(api.get("/chatflows", key="weir_notarealkey"), 401)
    assert_error(api.get("/chatflows", key=None, headers={"Authorization": "Basic dXNlcjpwdw=="}), 401)
    assert_error(api.get("/chatflows", key=None, params={"apiKey": "weir_wrong"}), 401)


def test_key_as_bearer_bare_header_or_query(api):
    assert api.get("/chatflows").status_code == 200
    assert api.get("/chatflows", key=None, headers={"Authorization": api.key}).status_code == 200
    assert api.get("/chatflows", key=None, params={"apiKey": api.key}).status_code == 200


def test_missing_permission_is_403(server, api):
    reader = api.with_key(server.create_key("chatflows:read", workspace="perm-ws"))
    assert reader.get("/chatflows").status_code == 200
    body = assert_error(reader.post("/chatflows", json={"name": "x", "flowData": FLOW}), 403)
    assert "chatflows:write" in body["message"]
    assert_error(reader.get("/variables"), 403, "variables:read")
    assert_error(reader.get("/apikey"), 403, "apikeys:manage")


def test_other_workspace_resources_are_404(server, api):
    flow = api.post("/chatflows", json={"name": "mine", "flowData": FLOW}).json()
    var = api.post("/variables", json={"name": "secret", "value": "s"}).json()
    stranger = api.with_key(server.create_key(workspace="stranger-ws"))
    for path in (f"/chatflows/{flow['id']}", f"/variables/{var['id']}"):
        assert_error(stranger.get(path), 404)
        assert_error(stranger.put(path, json={"name": "stolen"}), 404)
        assert_error(stranger.delete(path), 404)
    assert all(f["id"] != flow["id"] for f in stranger.get("/chatflows").json())
    assert api.get(f"/chatflows/{flow['id']}").json()["name"] == "mine"


def test_cli_revoked_key_stops_working(server, api):
    created = server.cli("keys", "create", "--workspace", "rev-ws", "--name", "temp").stdout
    key = created.strip().splitlines()[-1]
    key_id = re.search(r"Created API key ([0-9a-f-]{36})", created).group(1)
    client = api.with_key(key)
    assert client.get("/chatflows").status_code == 200
    server.cli("keys", "revoke", key_id)
    # Revoked from another process: the running server stops accepting it within
    # STORE_CACHE_TTL_MS (1 s by default; docs/api.md "Caching and durability").
    deadline = time.monotonic() + 2.5
    while client.get("/chatflows").status_code != 401:
        assert time.monotonic() < deadline, "the revoked key still works after the cache bound"
        time.sleep(0.05)
    assert_error(client.get("/chatflows"), 401)
    assert server.cli("keys", "revoke", key_id, check=False).returncode != 0


def test_cli_lists_keys_without_secrets(server):
    key = server.create_key(workspace="list-ws", name="listed")
    out = server.cli("keys", "list").stdout
    assert "listed" in out and "list-ws" in out
    assert key not in out and key[5:] not in out
    created = server.cli("keys", "create", "--workspace", "list-ws").stdout.strip().splitlines()
    assert created[-1].startswith("weir_") and all("weir_" not in line for line in created[:-1])


def test_cli_rejects_unknown_permission(server):
    r = server.cli("keys", "create", "--permission", "chatflows:delete", check=False)
    assert r.returncode != 0
    assert "chatflows:delete" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_rest_key_management(api):
    created = api.post("/apikey", json={"keyName": "bot", "permissions": ["chatflows:read"]})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["apiKey"].startswith("weir_") and body["permissions"] == ["chatflows:read"]
    listed = api.get("/apikey").json()
    assert {k["keyName"] for k in listed} >= {"bot"}
    assert all("apiKey" not in k and body["apiKey"] not in str(k) for k in listed)
    bot = api.with_key(body["apiKey"])
    assert bot.get("/chatflows").status_code == 200
    assert_error(bot.get("/apikey"), 403)
    assert api.delete(f"/apikey/{body['id']}").status_code == 204
    assert_error(bot.get("/chatflows"), 401)
    assert_error(api.delete(f"/apikey/{body['id']}"), 404)


def test_rest_key_creation_validates(server, api):
    assert_error(api.post("/apikey", json={}), 412, "keyName")
    assert_error(api.post("/apikey", json={"keyName": "x", "permissions": ["nope"]}), 400)
    # A key cannot grant what it does not hold.
    manager = api.with_key(server.create_key("apikeys:manage", "chatflows:read", workspace="mgr-ws"))
    assert manager.post("/apikey", json={"keyName": "ok", "permissions": ["chatflows:read"]}).status_code == 201
    assert_error(manager.post("/apikey", json={"keyName": "up", "permissions": ["chatflows:write"]}), 403)
    default = manager.post("/apikey", json={"keyName": "default-perms"}).json()
    assert default["permissions"] == ["chatflows:read"]


def test_a_key_manages_only_keys_it_could_have_minted(server, api):
    """A key holding apikeys:manage alone cannot revoke the workspace's full key (or
    any key holding a permission it lacks); it may revoke keys within its own."""
    workspace = next(k["workspace"] for k in api.get("/apikey").json())
    full_id = next(k["id"] for k in api.get("/apikey").json())
    manager = api.with_key(server.create_key("apikeys:manage", workspace=workspace))
    reader = api.post("/apikey", json={"keyName": "reader", "permissions": ["chatflows:read"]}).json()
    for wider in (full_id, reader["id"]):
        assert_error(manager.delete(f"/apikey/{wider}"), 403, "cannot revoke")
    assert api.get("/chatflows").status_code == 200
    assert api.with_key(reader["apiKey"]).get("/chatflows").status_code == 200
    peer = manager.post("/apikey", json={"keyName": "peer", "permissions": ["apikeys:manage"]}).json()
    assert manager.delete(f"/apikey/{peer['id']}").status_code == 204
    assert_error(api.with_key(peer["apiKey"]).get("/apikey"), 401)
    # The full key may revoke any key of its workspace.
    assert api.delete(f"/apikey/{reader['id']}").status_code == 204


def test_key_use_is_recorded(server, api):
    import time
    api.get("/chatflows")
    # The use is recorded off the request path: allow it a moment.
    deadline = time.monotonic() + 5
    while not any(k["lastUsedDate"] for k in api.get("/apikey").json()):
        assert time.monotonic() < deadline, "last use was never recorded"
        time.sleep(0.05)
