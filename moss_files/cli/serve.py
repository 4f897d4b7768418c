"""`moss serve`: the MCP server, over stdio or as a shared HTTP daemon on loopback.

Entry layer: reads the options and the environment, finds the workspace, builds the server
(`mcp_server`) and runs it (stdio here, HTTP in `mcp_http`). The SDK is imported only inside
the command, so every other `moss` command starts without it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.cli.support import RootOpt, default_port, reporting

TOOLS_ENV = "MOSS_MCP_TOOLS"
NAMES_ENV = "MOSS_MCP_NAMES"
TOKEN_ENV = "MOSS_MCP_TOKEN"
INDEX_WATCH_ENV = "MOSS_INDEX_WATCH"
SLEEVE_ENV = "NEEDLECAST_SLEEVE"  # needlecast.cli.SLEEVE_ENV: this sleeve's name for messages


def register(app: typer.Typer) -> None:
    """Add `serve` to the `moss` app."""

    @app.command("serve")
    def serve_cmd(
        http: Annotated[
            str | None,
            typer.Option(
                "--http",
                metavar="HOST:PORT",
                help="Serve streamable HTTP at http://HOST:PORT/mcp (loopback; port 0 picks one) instead of stdio; HOST alone takes port 8765 "
                "(env MOSS_DEFAULT_PORT), or the next free one.",
                show_default=False,
            ),
        ] = None,
        tools: Annotated[
            str | None,
            typer.Option(
                "--tools",
                envvar=TOOLS_ENV,
                metavar="SET,...",
                help="Tool sets to serve, comma-separated, or all: core, moss, loop, cstack, needlecast, moe, capsule, share (default: core, whose moss.tools enables the others at run time).",
                show_default=False,
            ),
        ] = None,
        names: Annotated[
            str | None,
            typer.Option(
                "--names",
                envvar=NAMES_ENV,
                metavar="dotted|underscore",
                help="Tool names as in the specs (moss.store), or with underscores (moss_store) for hosts that refuse dots, such as Codex.",
                show_default=False,
            ),
        ] = None,
        token: Annotated[
            str | None,
            typer.Option(
                "--token",
                envvar=TOKEN_ENV,
                metavar="TOKEN",
                help="With --http: require this bearer token (needed to bind a non-loopback address).",
                show_default=False,
            ),
        ] = None,
        index_watch: Annotated[
            bool,
            typer.Option(
                "--index-watch/--no-index-watch",
                envvar=INDEX_WATCH_ENV,
                help="With --http: keep the search index warm with `moss index watch` while the daemon runs (Linux), so searches skip the walk.",
            ),
        ] = True,
        root: RootOpt = None,
    ) -> None:
        """Serve the MCP tools: over stdio for one agent (the default), or with --http as one shared
        daemon per project that records itself in .moss/run/mcp.json and stops cleanly on SIGTERM.
        Exit codes: 0 stopped, 2 bad option or TOKEN_REQUIRED, 4 bad config, 5 ALREADY_RUNNING or port in use, 6 no workspace."""
        with reporting(False):
            # Imported here: the SDK costs about half a second, which no other command should pay.
            from moss_files.cli.support import note
            from moss_files.foundation import config, workspace
            from moss_files.foundation.context import AGENT, Context
            from moss_files.foundation.errors import RepoError
            from moss_files.foundation.httpserver import PORT_SCAN
            from moss_files.foundation.loglevels import LevelLog, level_from_env
            from moss_files.mcp import server as mcp_server

            level = level_from_env(os.environ) if http is not None else "info"  # refused before anything starts

            sleeve = os.environ.get(SLEEVE_ENV) or None
            try:
                # A folder named by --root (or MOSS_ROOT) is taken as given by other commands; a
                # server there would write its own files (the audit log, the search cache) into a
                # folder that is no workspace, so it is served as outside one.
                top = workspace.require_workspace(workspace.find_workspace(explicit=root))
            except RepoError as missing:
                if http is not None:
                    raise  # the daemon records itself inside the workspace: it needs one
                # Over stdio an agent's host starts the server wherever it runs; exiting would
                # show the agent only a closed connection, so every call answers with the reason.
                note(f"warning: {missing}; every tool call will answer {missing.code}")
                context = Context(Path.cwd(), actor=AGENT, sleeve=sleeve)
                server = mcp_server.build_server(context, mcp_server.parse_sets(tools), names=mcp_server.check_name_style(names), unavailable=missing)
                _serve_stdio(server)
                return
            settings = config.load_config(top)
            context = Context(top, config=settings, actor=AGENT, sleeve=sleeve)
            from moss_files.agent import serve_gate

            # The [serve] policy and audit log of .moss/config.toml (docs/agent.md).
            gate = serve_gate.gate_for(settings.data, top, base=Path.cwd(), now=context.now, new_id=context.new_ulid)
            server = mcp_server.build_server(
                context, mcp_server.parse_sets(tools), names=mcp_server.check_name_style(names), disabled=settings.disabled_tools, gate=gate
            )
            if http is None:
                _serve_stdio(server)
                return
            from moss_files.mcp import daemon as mcp_http

            host, port = mcp_http.parse_address(http)
            scan = 1
            if port is None:  # the default port, or the next free one (the record says which)
                port, scan = default_port(os.environ.get(mcp_http.DEFAULT_PORT_ENV), mcp_http.DEFAULT_PORT, variable=mcp_http.DEFAULT_PORT_ENV), PORT_SCAN
            code = mcp_http.Daemon(server, top, host, port, token=token, log=LevelLog(note, level), index_watch=index_watch, scan=scan).run()
        raise typer.Exit(code)


def _serve_stdio(server: Any) -> None:
    try:
        server.run("stdio")
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
