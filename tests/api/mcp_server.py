"""A Streamable HTTP MCP server made with the official MCP Python SDK (not weir's
code), for the `customMCP` tests: `python mcp_server.py <port> [--stateless] [--sse]`
serves tools `echo`, `add` and `fail` at http://127.0.0.1:<port>/mcp (with `--sse`:
the legacy HTTP+SSE transport at http://127.0.0.1:<port>/sse). It answers
only requests bearing `Authorization: Bearer good-token` when started with
`--auth`."""

import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("weir-test-server")


@server.tool()
def echo(message: str) -> str:
    """Echoes the message back."""
    return f"echo: {message}"


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two whole numbers."""
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Always fails, saying why."""
    raise ToolError(f"failed on purpose: {reason}")


def main():
    port = int(sys.argv[1])
    if "--sse" in sys.argv:
        app = server.sse_app()
    else:
        app = server.streamable_http_app(stateless_http="--stateless" in sys.argv)
    if "--auth" in sys.argv:
        inner = app

        async def app(scope, receive, send):
            if scope["type"] == "http":
                headers = dict(scope["headers"])
                if headers.get(b"authorization") != b"Bearer good-token":
                    await send({"type": "http.response.start", "status": 401,
                                "headers": [(b"content-type", b"application/json")]})
                    await send({"type": "http.response.body", "body": b'{"error":"unauthorized"}'})
                    return
            await inner(scope, receive, send)

    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
