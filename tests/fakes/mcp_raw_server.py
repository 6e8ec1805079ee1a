"""An MCP server over stdio that speaks only the 2025-era protocol (the `initialize` handshake), with three
tools: `broken` answers with a malformed result (content is not a list), `rpc_error` with a JSON-RPC error
(invalid params), `echo` with its arguments as text.

The SDK's MCPServer cannot produce these answers, so this speaks the JSON-RPC protocol by hand: a real
process, a real handshake, deliberately odd answers. `python -m tests.fakes.mcp_raw_server`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [{"name": name, "description": description, "inputSchema": {"type": "object", "properties": {}}}
         for name, description in (("broken", "Answers with a malformed result."),
                                   ("rpc_error", "Answers with a JSON-RPC error."),
                                   ("echo", "Answers with its arguments."))]


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None  # a notification
    result: object
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                  "serverInfo": {"name": "raw", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and params.get("name") == "rpc_error":
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32602, "message": "no such argument"}}
    elif method == "tools/call" and params.get("name") == "echo":
        result = {"content": [{"type": "text", "text": json.dumps(params.get("arguments"))}]}
    elif method == "tools/call":
        result = {"content": "this should have been a list of content blocks"}
    else:
        result = {}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            reply = answer(json.loads(line))
            if reply is not None:
                sys.stdout.write(json.dumps(reply) + "\n")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
