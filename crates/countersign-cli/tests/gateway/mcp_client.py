"""Drive `countersign gateway` with the official Python `mcp` client package.

Usage:
    mcp_client.py stdio COUNTERSIGN POLICY NODE_SERVER DATA_DIR
    mcp_client.py http URL DATA_DIR
    mcp_client.py modern-http URL DATA_DIR

`modern-http` speaks MCP 2026-07-28 (no initialize, no session) with `mcp.Client` and an
elicitation callback that approves: the gateway's input-required result is answered and the
write retried by the client itself, with the gateway's `requestState`.

Lists the tools, reads `DATA_DIR/a.txt`, and tries a write (which the example policy pauses
for approval). Prints one JSON object on stdout for the Rust test to check; exits non-zero on
anything unexpected.
"""

import asyncio
import json
import os
import sys

import mcp
from mcp import ClientSession, types, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def exercise(read, write, data_dir):
    async with ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        names = sorted(tool.name for tool in tools.tools)
        path = os.path.join(data_dir, "a.txt")
        read_result = await session.call_tool("read_text_file", {"path": path})
        texts = [block.text for block in read_result.content if block.type == "text"]
        meta = (read_result.meta or {}).get("countersign", {})
        write_error = None
        try:
            await session.call_tool(
                "write_file", {"path": os.path.join(data_dir, "py.txt"), "content": "x"}
            )
        except mcp.MCPError as error:
            write_error = {
                "code": error.code,
                "message": error.error.message,
                "reason": (error.error.data or {}).get("reason"),
            }
        return {
            "sdk": "mcp",
            "tools": names,
            "read_text": texts,
            "read_is_error": bool(read_result.is_error),
            "receipt_outcome": meta.get("receipt", {}).get("outcome"),
            "write_error": write_error,
        }


async def exercise_modern(url, data_dir):
    asked = []

    async def approve(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    async with mcp.Client(url, mode="2026-07-28", elicitation_callback=approve) as client:
        tools = await client.list_tools()
        names = sorted(tool.name for tool in tools.tools)
        path = os.path.join(data_dir, "a.txt")
        read_result = await client.call_tool("read_text_file", {"path": path})
        texts = [block.text for block in read_result.content if block.type == "text"]
        read_meta = (read_result.meta or {}).get("countersign", {})
        write_result = await client.call_tool(
            "write_file", {"path": os.path.join(data_dir, "py.txt"), "content": "x"}
        )
        write_meta = (write_result.meta or {}).get("countersign", {})
        return {
            "sdk": "mcp",
            "tools": names,
            "read_text": texts,
            "read_is_error": bool(read_result.is_error),
            "receipt_outcome": read_meta.get("receipt", {}).get("outcome"),
            "write_outcome": write_meta.get("receipt", {}).get("outcome"),
            "asked": asked,
        }


async def main(argv):
    mode = argv[1]
    if mode == "stdio":
        countersign, policy, server, data_dir = argv[2:6]
        parameters = StdioServerParameters(
            command=countersign,
            args=[
                "--policy", policy, "gateway", "--alias", "files",
                "--principal", "agent:python-mcp", "--", "node", server, data_dir,
            ],
        )
        async with stdio_client(parameters) as (read, write):
            summary = await exercise(read, write, data_dir)
    elif mode == "http":
        url, data_dir = argv[2:4]
        async with streamable_http_client(url) as streams:
            read, write = streams[0], streams[1]
            summary = await exercise(read, write, data_dir)
    elif mode == "modern-http":
        url, data_dir = argv[2:4]
        summary = await exercise_modern(url, data_dir)
    else:
        raise SystemExit(f"unknown mode {mode!r}: use stdio, http or modern-http")
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
