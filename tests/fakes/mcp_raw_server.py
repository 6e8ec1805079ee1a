"""An MCP server over stdio that answers `tools/call` with a malformed result (content is not a list).

FastMCP cannot produce a malformed result, so this speaks the JSON-RPC protocol by hand: a real
process, a real handshake, one deliberately broken answer. `python -m tests.fakes.mcp_raw_server`.
"""

from __future__ import annotations

import json
import sys

TOOL = {"name": "broken", "description": "Answers with a malformed result.",
        "inputSchema": {"type": "object", "properties": {}}}


def answer(request: dict[str, object]) -> dict[str, object] | None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None  # a notification
    if method == "initialize":
        result: object = {"protocolVersion": params.get("protocolVersion"),  # type: ignore[union-attr]
                          "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
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
