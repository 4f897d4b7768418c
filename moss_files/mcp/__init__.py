"""The MCP server behind `moss serve`: the tool registry and server (server.py), the shared HTTP
daemon (daemon.py) and one module per tool set (tools/). The only package that imports the
MCP SDK.
"""
