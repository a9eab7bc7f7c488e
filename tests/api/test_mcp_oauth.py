"""OAuth-protected MCP servers (issue 33), and Pipedream's (`pipedreamMCP`, a
client-credentials grant against a fake of Pipedream Connect): a workspace's server with `authType:
OAUTH2` is authorized once through the API and the user's browser, its tokens
sealed with it and refreshed for runs. The server is the official MCP Python SDK
as both resource server and authorization server (`mcp_oauth_server.py`: RFC 9728
and RFC 8414 metadata, RFC 7591 registration, PKCE, refresh with rotation,
tokens bound to the resource) — weir's side is the client. The test plays the
user's browser: it opens the `authorizationUrl` (the SDK's provider approves at
once) and follows the redirect to weir's callback."""

import json
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import requests

import flows
from fakes import FakeProviders
from prediction_client import ask, create_flow, nonce, predict
from weir_harness import Api, Weir, assert_error, backends, free_port, wait_listening

HERE = Path(__file__).resolve().parent


class Served:
    """A test server script in a process of its own."""

    def __init__(self, script, *flags):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self.proc = subprocess.Popen([sys.executable, str(HERE / script), str(self.port), *flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(self.port, script)

    def stats(self):
        return requests.get(f"{self.base}/test/stats", timeout=5).json()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def oauth_server():
    server = Served("mcp_oauth_server.py")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def short_token_server():
    """Its access tokens last 2 s: every run finds its token about to end."""
    server = Served("mcp_oauth_server.py", "--token-seconds", "2")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def unregistering_server():
    """It registers no clients: one was registered by hand (weir-preregistered)."""
    server = Served("mcp_oauth_server.py", "--no-registration")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def open_server():
    server = Served("mcp_server.py")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fake():
    f = FakeProviders()
    yield f
    f.close()


@pytest.fixture(scope="module")
def pipedream():
    server = Served("pipedream_fake.py")
    yield server
    server.stop()


@pytest.fixture(scope="module", params=backends())
def weir(request, tmp_path_factory, pipedream):
    w = Weir(tmp_path_factory.mktemp(f"weir-mcp-oauth-{request.param}"), request.param)
    w.env["ALLOW_PRIVATE_REQUESTS"] = "127.0.0.1"
    w.env["PIPEDREAM_API_URL"] = pipedream.base
    w.env["PIPEDREAM_MCP_URL"] = pipedream.url
    w.env["METRICS_TOKEN"] = "scrape-oauth"
    w.start()
    yield w
    w.cleanup()


@pytest.fixture
def api(weir) -> Api:
    return Api(weir.url, weir.create_key(workspace=f"ws-{nonce()}"))


def oauth_server_record(api, server, **auth_config):
    body = {"name": f"OAuth {nonce()}", "serverUrl": server.url, "authType": "OAUTH2"}
    if auth_config:
        body["authConfig"] = auth_config
    r = api.post("/custom-mcp-servers", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def begin(api, server_id):
    r = api.post(f"/custom-mcp-servers/{server_id}/authorize")
    assert r.status_code == 200, r.text
    record = r.json()
    assert record["status"] == "PENDING" and record["authorizationUrl"], record
    return record["authorizationUrl"]


def grant(authorization_url):
    """The user's browser: opens the page (approved at once), and is sent back to weir."""
    at_server = requests.get(authorization_url, allow_redirects=False, timeout=10)
    assert at_server.status_code in (302, 303, 307), at_server.text
    return at_server.headers["Location"]


def authorized(api, server, **auth_config):
    record = oauth_server_record(api, server, **auth_config)
    back = requests.get(grant(begin(api, record["id"])), timeout=30)
    assert back.status_code == 200, back.text
    return record["id"]


def whoami_flow(api, fake, server_id):
    tool = flows.node("customMcpServerTool_0", "customMcpServerTool", {"mcpServerId": server_id})
    return create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [tool]))


def tool_output(body):
    return json.loads(body["usedTools"][0]["toolOutput"])[0]["text"]


def test_a_server_is_authorized_through_the_browser_and_used_by_runs(api, weir, fake, oauth_server):
    record = oauth_server_record(api, oauth_server)
    assert record["status"] == "PENDING" and "authConfig" not in record
    server_id = record["id"]
    before = oauth_server.stats()
    url = begin(api, server_id)
    # weir found the authorization server through the server's 401 and its
    # metadata, registered itself, and asks with PKCE for this resource.
    parsed = urlparse(url)
    query = {k: v[0] for k, v in parse_qs(parsed.query).items()}
    assert f"{parsed.scheme}://{parsed.netloc}{parsed.path}" == f"{oauth_server.base}/authorize"
    assert query["response_type"] == "code" and query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43
    assert query["resource"] == oauth_server.url and query["scope"] == "mcp"
    assert query["redirect_uri"] == f"{weir.url}/api/v1/oauth2-credential/callback"
    assert query["state"].startswith("mcp.") and server_id in query["state"]
    assert oauth_server.stats()["registrations"] == before["registrations"] + 1
    shown = api.get(f"/custom-mcp-servers/{server_id}").json()
    assert shown["status"] == "PENDING"
    assert shown["authConfig"]["registered"] is True and shown["authConfig"]["authorized"] is False
    # A flow may not use it yet.
    flow = whoami_flow(api, fake, server_id)
    assert_error(predict(api, flow, "CALL whoami {}"), 400, "authorize")

    # A state weir did not make leaves the waiting authorization alone.
    back = grant(url)
    forged = back.replace(query["state"], query["state"][:-4] + "AAAA")
    assert_error(requests.get(forged, timeout=10), 400, "not one weir is waiting for")

    page = requests.get(back, timeout=30)
    assert page.status_code == 200, page.text
    assert "Authorized" in page.text and "2 tools" in page.text
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    # The code and the state are spent.
    assert_error(requests.get(back, timeout=10), 400, "not one weir is waiting for")

    shown = api.get(f"/custom-mcp-servers/{server_id}").json()
    assert shown["status"] == "AUTHORIZED" and shown["toolCount"] == 2
    auth = shown["authConfig"]
    assert auth["authorized"] is True and auth["clientId"] and auth["issuer"].startswith(oauth_server.base)
    assert "expiresAt" in auth
    text = json.dumps(shown)
    for secret in ("accessToken", "refreshToken", "verifier", "clientSecret\": \"", "access_token"):
        assert secret not in text, text
    assert sorted(t["name"] for t in api.get(f"/custom-mcp-servers/{server_id}/tools").json()) == ["echo", "whoami"]

    # Runs call the server with the granted token (bound to this resource).
    body = ask(api, flow, "CALL whoami {}")
    assert tool_output(body) == f"client {auth['clientId']} scopes mcp"
    assert oauth_server.stats()["refreshes"] == before["refreshes"]

    # Authorizing again with a working token just lists the tools again.
    again = api.post(f"/custom-mcp-servers/{server_id}/authorize")
    assert again.status_code == 200 and again.json()["status"] == "AUTHORIZED"
    assert "authorizationUrl" not in again.json()


def test_a_token_about_to_end_is_refreshed_and_its_rotated_refresh_token_kept(api, fake, short_token_server):
    server_id = authorized(api, short_token_server)
    flow = whoami_flow(api, fake, server_id)
    before = short_token_server.stats()["refreshes"]
    for turn in range(3):
        time.sleep(2.1)
        body = ask(api, flow, "CALL whoami {}")
        assert tool_output(body).startswith("client "), body
    # Each run found its token ended and refreshed it; the server rotates refresh
    # tokens, so each refresh used the one the last stored.
    assert short_token_server.stats()["refreshes"] - before >= 3
    assert api.get(f"/custom-mcp-servers/{server_id}").json()["status"] == "AUTHORIZED"
    # Authorizing again refreshes too, and keeps what the refresh stored: the
    # next run's refresh uses the newest refresh token.
    time.sleep(2.1)
    again = api.post(f"/custom-mcp-servers/{server_id}/authorize")
    assert again.status_code == 200 and again.json()["status"] == "AUTHORIZED", again.text
    time.sleep(2.1)
    assert tool_output(ask(api, flow, "CALL whoami {}")).startswith("client ")


def test_a_client_registered_by_hand(api, fake, unregistering_server):
    # Without a client, a server that registers none is a 400 saying what to give.
    record = oauth_server_record(api, unregistering_server)
    assert_error(api.post(f"/custom-mcp-servers/{record['id']}/authorize"), 400, "authConfig.clientId")
    assert api.get(f"/custom-mcp-servers/{record['id']}").json()["status"] == "ERROR"
    server_id = authorized(api, unregistering_server, clientId="weir-preregistered", clientSecret="s3cret")
    shown = api.get(f"/custom-mcp-servers/{server_id}").json()
    assert shown["authConfig"]["clientSecret"] == "************"
    assert shown["authConfig"]["registered"] is False and "s3cret" not in json.dumps(shown)
    assert unregistering_server.stats()["registrations"] == 0
    body = ask(api, whoami_flow(api, fake, server_id), "CALL whoami {}")
    assert tool_output(body) == "client weir-preregistered scopes mcp"
    # The masked secret sent back keeps the stored one and the grant; a new client starts anew.
    kept = api.put(f"/custom-mcp-servers/{server_id}", json={
        "authConfig": {"clientId": "weir-preregistered", "clientSecret": "************"}}).json()
    assert kept["status"] == "AUTHORIZED"
    changed = api.put(f"/custom-mcp-servers/{server_id}", json={
        "authConfig": {"clientId": "weir-preregistered", "clientSecret": "wrong"}}).json()
    assert changed["status"] == "PENDING" and changed["authConfig"]["authorized"] is False
    # A wrong secret: the code cannot be exchanged, and the page says why.
    assert_error(requests.get(grant(begin(api, server_id)), timeout=30), 400, "could not be exchanged")
    assert api.get(f"/custom-mcp-servers/{server_id}").json()["status"] == "ERROR"


def test_a_refused_grant_and_a_server_that_asks_for_no_token(api, oauth_server, open_server):
    record = oauth_server_record(api, oauth_server)
    url = begin(api, record["id"])
    state = parse_qs(urlparse(url).query)["state"][0]
    callback = f"{api.url}/api/v1/oauth2-credential/callback"
    assert_error(requests.get(callback, params={"state": state, "error": "access_denied",
                                                "error_description": "the user said no"}, timeout=10),
                 400, "did not grant access: access_denied (the user said no)")
    assert api.get(f"/custom-mcp-servers/{record['id']}").json()["status"] == "ERROR"
    for params, words in [({}, "not one weir is waiting for"),
                          ({"state": "nonsense", "code": "x"}, "not one weir is waiting for"),
                          ({"state": state, "code": "x"}, "not one weir is waiting for"),
                          ({"state": f"mcp.{record['workspaceId']}.{record['id']}.x"}, "neither a code nor")]:
        assert_error(requests.get(callback, params=params, timeout=10), 400, words)
    # A server with no OAuth at all.
    plain = oauth_server_record(api, open_server)
    assert_error(api.post(f"/custom-mcp-servers/{plain['id']}/authorize"), 400, "use authType NONE")
    # Input rules.
    assert_error(api.post("/custom-mcp-servers", json={
        "name": "x", "serverUrl": oauth_server.url, "authType": "OAUTH2",
        "authConfig": {"clientSecret": "s"}}), 400, "clientId")
    assert_error(api.post("/custom-mcp-servers", json={
        "name": "x", "serverUrl": oauth_server.url, "authType": "OAUTH2", "authConfig": []}), 400, "authConfig")


# ------------------------------------------------ Pipedream: a client-credentials grant

def pipedream_flow(api, fake, credential, **inputs):
    node = flows.node("pipedreamMCP_0", "pipedreamMCP", {
        "environment": "production", "appSlug": "slack", "externalUserId": "user@example.com", **inputs})
    node["data"]["credential"] = credential
    return create_flow(api, flows.tool_agent(flows.openai_model(fake.url), [node]))


def test_pipedream_tools_are_reached_with_a_token_of_the_credentials_client(api, fake, pipedream):
    r = api.post("/credentials", json={
        "name": "Pipedream", "credentialName": "pipedreamOAuthApi",
        "plainDataObj": {"clientId": "oa_test", "clientSecret": "pd-secret", "projectId": "proj_1",
                         "oauthScopes": "connect:*"}})
    assert r.status_code in (200, 201), r.text
    flow = pipedream_flow(api, fake, r.json()["id"])
    before = len(pipedream.stats()["tokenRequests"])
    body = ask(api, flow, 'CALL slack_send_message {"channel": "#general", "text": "hi"}')
    assert tool_output(body) == "sent to #general: hi"
    stats = pipedream.stats()
    assert stats["pdHeaders"] == {"x-pd-project-id": "proj_1", "x-pd-environment": "production",
                                  "x-pd-external-user-id": "user@example.com", "x-pd-app-slug": "slack",
                                  "x-pd-tool-mode": "tools-only"}
    grant = stats["tokenRequests"][before]
    assert grant["contentType"] == "application/json"
    assert grant["body"] == {"grant_type": "client_credentials", "client_id": "oa_test",
                             "client_secret": "pd-secret", "scope": "connect:*"}
    # The token is kept for the next runs.
    ask(api, flow, 'CALL slack_send_message {"channel": "#b", "text": "again"}')
    assert len(pipedream.stats()["tokenRequests"]) == before + 1
    # The canvas's action picker reaches the server as a run does.
    picked = api.post("/node-load-method/pipedreamMCP", json={
        "id": "pipedreamMCP_0", "name": "pipedreamMCP", "loadMethod": "listActions",
        "inputs": {"appSlug": "slack", "externalUserId": "user@example.com"}, "credential": r.json()["id"]})
    assert picked.status_code == 200, picked.text
    assert [o["name"] for o in picked.json()] == ["slack_send_message"], picked.text

    # A client the token endpoint refuses: the run fails saying so, as when a server cannot be listed.
    bad = api.post("/credentials", json={
        "name": "Wrong", "credentialName": "pipedreamOAuthApi",
        "plainDataObj": {"clientId": "oa_test", "clientSecret": "nope", "projectId": "proj_1"}}).json()
    r = predict(api, pipedream_flow(api, fake, bad["id"]), 'CALL slack_send_message {"channel": "c", "text": "t"}')
    body = assert_error(r, 500, "cannot list the MCP server's tools: no token for the MCP server: "
                                "the authorization server refused: invalid_client")
    assert "nope" not in body["message"]

    # Token requests are counted by grant and outcome.
    metrics = requests.get(f"{api.url}/metrics", timeout=10, headers={"Authorization": "Bearer scrape-oauth"}).text
    counted = {line.split(" ")[0] for line in metrics.splitlines() if line.startswith("weir_oauth_token_requests_total")}
    assert 'weir_oauth_token_requests_total{grant="client_credentials",outcome="ok"}' in counted, counted
    assert 'weir_oauth_token_requests_total{grant="client_credentials",outcome="refused"}' in counted, counted

    # Flowise's input rules.
    for inputs, words in [({"appSlug": "Slack!"}, "appSlug"), ({"externalUserId": "a b"}, "externalUserId"),
                          ({"environment": "staging"}, "environment")]:
        assert_error(predict(api, pipedream_flow(api, fake, bad["id"], **inputs), "hi"), 400, words)
