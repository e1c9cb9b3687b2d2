"""A stdio MCP server for the end-to-end tests: one tool, ``report``, whose output is ``REPORT_WORDS`` pairs of words
(three o200k tokens each). LiteLLM starts it for an ``mcp_servers`` entry of ``transport: stdio``."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer  # mcp 2.x, which litellm's proxy extras install

server = MCPServer("report")


@server.tool()
def report() -> str:
    """Return the full report."""
    return " ".join(f"mcpout{index % 89} lorem" for index in range(int(os.environ.get("REPORT_WORDS", "100"))))


if __name__ == "__main__":
    server.run("stdio")
