"""Pipedream Connect faked on loopback, for `pipedreamMCP`: `python
pipedream_fake.py <port>` serves the token endpoint `POST /v1/oauth/token` (the
client-credentials grant in a JSON body, as Pipedream documents it; client
`oa_test` / `pd-secret`; tokens last an hour) and, at `/mcp`, a remote MCP server
made with the official MCP Python SDK that answers only a token it issued.
`GET /test/stats` says what it saw: the token requests (their bodies) and the
`x-pd-*` headers of the last MCP request."""

import json
import secrets
import sys

from mcp.server.mcpserver import MCPServer

PORT = int(sys.argv[1])
ISSUED = set()
STATS = {"tokenRequests": [], "pdHeaders": {}, "refused": 0}

server = MCPServer("pipedream-fake")


@server.tool()
def slack_send_message(channel: str, text: str) -> str:
    """Sends a message to a Slack channel (faked)."""
    return f"sent to {channel}: {text}"


async def reply(send, status, body):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def main():
    inner = server.streamable_http_app()

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return await inner(scope, receive, send)
        path = scope["path"]
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if path == "/test/stats":
            return await reply(send, 200, STATS)
        if path == "/v1/oauth/token":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            try:
                grant = json.loads(body)
            except ValueError:
                grant = {}
            STATS["tokenRequests"].append({"contentType": headers.get("content-type"), "body": grant})
            if grant.get("grant_type") != "client_credentials" or grant.get("client_id") != "oa_test" \
                    or grant.get("client_secret") != "pd-secret":
                return await reply(send, 401, {"error": "invalid_client"})
            token = secrets.token_urlsafe(16)
            ISSUED.add(token)
            return await reply(send, 200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600})
        auth = headers.get("authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in ISSUED:
            STATS["refused"] += 1
            return await reply(send, 401, {"error": "unauthorized"})
        STATS["pdHeaders"] = {k: v for k, v in headers.items() if k.startswith("x-pd-")}
        return await inner(scope, receive, send)

    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")


if __name__ == "__main__":
    main()
