"""A second, separate MCP server for the agent tests: tools that read files, fetch URLs, run
commands, hang, answer 1 MB, fail, or exit the process. Run as a script: stdio by default,
`--http PORT` for streamable HTTP on loopback. Nothing here performs a side effect: each tool
only reports what it was asked, so a test can see which calls got through the gate."""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("demo", version="1.0", log_level="WARNING")


@server.tool(name="echo", description="Echo the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(name="read_file", description="Pretend to read a file; returns the path it would read.")
def read_file(path: str) -> str:
    return f"would read {path}"


@server.tool(name="write_file", description="Pretend to write a file.")
def write_file(path: str, text: str = "") -> str:
    return f"would write {len(text)} characters to {path}"


@server.tool(name="fetch", description="Pretend to fetch a URL.")
def fetch(url: str) -> str:
    return f"would fetch {url}"


@server.tool(name="run", description="Pretend to run a command.")
def run(command: str) -> str:
    return f"would run {command}"


@server.tool(name="count", description="Add two numbers.")
def count(a: int, b: int = 1) -> dict[str, Any]:
    return {"sum": a + b}


@server.tool(name="hang", description="Never answer.")
async def hang() -> str:
    await anyio.sleep(3600)
    return "woke up"


@server.tool(name="big", description="Answer with `size` bytes of text.")
def big(size: int = 1024 * 1024) -> str:
    return "x" * size


@server.tool(name="fail", description="Always fail.")
def fail() -> str:
    raise ToolError("this tool always fails")


@server.tool(name="die", description="Exit the server process at once.")
def die() -> str:
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
