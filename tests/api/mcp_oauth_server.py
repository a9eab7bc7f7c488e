"""An OAuth-protected MCP server made with the official MCP Python SDK (not weir's
code): `python mcp_oauth_server.py <port> [--token-seconds N] [--no-registration]`.

The SDK is both the resource server (Streamable HTTP at
http://127.0.0.1:<port>/mcp, a 401 with `WWW-Authenticate: Bearer
resource_metadata=…` without a valid token, RFC 9728 metadata) and the
authorization server (RFC 8414 metadata, RFC 7591 dynamic registration, the
authorization endpoint with PKCE, the token endpoint, refresh). It checks that a
token was issued for this server (the RFC 8707 `resource`). The provider below
only keeps codes and tokens in memory and approves every authorization at once,
as a user clicking "Allow" would; with `--no-registration` the one client is
`weir-preregistered` / `s3cret` (a client_secret_post client).

Tools: `whoami` (the token's client and scopes), `echo`. `GET /test/stats` answers
what the provider saw (registrations, codes, refreshes, the resources asked for)."""

import secrets
import sys
import time

from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

PORT = int(sys.argv[1])
BASE = f"http://127.0.0.1:{PORT}"
TOKEN_SECONDS = int(sys.argv[sys.argv.index("--token-seconds") + 1]) if "--token-seconds" in sys.argv else 3600
REGISTRATION = "--no-registration" not in sys.argv
STATS = {"registrations": 0, "codes": 0, "exchanges": 0, "refreshes": 0,
         "resources": [], "refused": 0}


class HandRegistered(OAuthClientInformationFull):
    """The client registered by hand, for weir's callback on any loopback port
    (the test's weir port is not known when this server starts)."""

    def validate_redirect_uri(self, redirect_uri):
        text = str(redirect_uri or "")
        if text.startswith("http://127.0.0.1:") and text.endswith("/api/v1/oauth2-credential/callback"):
            return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


class Provider:
    def __init__(self):
        self.clients = {}
        self.codes = {}
        self.access = {}
        self.refresh = {}
        if not REGISTRATION:
            self.clients["weir-preregistered"] = HandRegistered(
                client_id="weir-preregistered", client_secret="s3cret",
                token_endpoint_auth_method="client_secret_post", scope="mcp",
                redirect_uris=None, grant_types=["authorization_code", "refresh_token"])

    async def get_client(self, client_id):
        return self.clients.get(client_id)

    async def register_client(self, client_info):
        STATS["registrations"] += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client, params: AuthorizationParams):
        code = secrets.token_urlsafe(24)
        STATS["codes"] += 1
        STATS["resources"].append(params.resource)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or ["mcp"], expires_at=time.time() + 300,
            client_id=client.client_id, code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource)
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code):
        code = self.codes.get(authorization_code)
        return code if code and code.client_id == client.client_id else None

    def _issue(self, client_id, scopes, resource):
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + TOKEN_SECONDS,
                                          resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes,
                                             resource=resource)
        return OAuthToken(access_token=access, expires_in=TOKEN_SECONDS, scope=" ".join(scopes),
                          refresh_token=refresh)

    async def exchange_authorization_code(self, client, authorization_code):
        STATS["exchanges"] += 1
        self.codes.pop(authorization_code.code, None)
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token):
        token = self.refresh.get(refresh_token)
        return token if token and token.client_id == client.client_id else None

    async def exchange_refresh_token(self, client, refresh_token, scopes):
        STATS["refreshes"] += 1
        # Rotated: the old refresh token is spent.
        self.refresh.pop(refresh_token.token, None)
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token):
        found = self.access.get(token)
        if found is None or (found.expires_at and found.expires_at < time.time()):
            STATS["refused"] += 1
            return None
        return found

    async def revoke_token(self, token):
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


server = MCPServer(
    "weir-oauth-test-server",
    auth_server_provider=Provider(),
    auth=AuthSettings(
        issuer_url=AnyHttpUrl(BASE),
        resource_server_url=AnyHttpUrl(f"{BASE}/mcp"),
        validate_token_resource=True,
        client_registration_options=ClientRegistrationOptions(enabled=REGISTRATION,
                                                              valid_scopes=["mcp"],
                                                              default_scopes=["mcp"]),
        required_scopes=["mcp"],
    ),
)


@server.tool()
def whoami() -> str:
    """Says which client's token this call bears."""
    token = get_access_token()
    return f"client {token.client_id} scopes {' '.join(token.scopes)}"


@server.tool()
def echo(message: str) -> str:
    """Echoes the message back."""
    return f"echo: {message}"


@server.custom_route("/test/stats", methods=["GET"])
async def stats(_request: Request):
    return JSONResponse(STATS)


def main():
    import uvicorn
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=PORT, log_level="warning")


if __name__ == "__main__":
    main()
