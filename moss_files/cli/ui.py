"""`moss ui`: open the web view of the workspace in the default browser, starting the project's
daemon (`moss serve --http 127.0.0.1`, on the default port or the next free one, in the
background) when none runs; `--stop` stops it. A registered project is marked opened.

Entry layer: finds the workspace, reads the daemon's record (`moss_files.mcp.daemon`), starts
the daemon as a process of its own when needed and waits for its record, then hands the URL to
Python's `webbrowser` (which honours the BROWSER environment variable). The daemon keeps
running after `moss ui` returns, for the agents' MCP calls and for the next `moss ui`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.cli.support import JsonOpt, RootOpt, emit, note, reporting

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
LOG_NAME = "ui-serve.log"  # in .moss/run/: what the daemon `moss ui` started says


def register(app: typer.Typer) -> None:
    """Add `ui` to the `moss` app."""

    @app.command("ui")
    def ui_cmd(
        no_browser: Annotated[bool, typer.Option("--no-browser", help="Start or find the daemon and print the page's URL; open no browser.")] = False,
        stop: Annotated[bool, typer.Option("--stop", help="Stop the project's daemon (SIGTERM) and wait until it has stopped.")] = False,
        port: Annotated[
            int | None,
            typer.Option(
                "--port",
                min=0,
                max=65535,
                help="Port to start the daemon on, on 127.0.0.1 (default: 8765, or MOSS_DEFAULT_PORT, or the next free one; 0 picks any free one).",
                show_default=False,
            ),
        ] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Open the web view (board, capsules, messages, memory, search, agent sessions) in the
        default browser, starting `moss serve --http 127.0.0.1:PORT` in the background when no
        daemon serves this project. Prints the URL; --json prints {url, mcp, pid, started,
        opened, log} ({stopped, pid} with --stop). Exit codes: 0 ok, 5 CONFLICT (the port is in use),
        6 no workspace; when the daemon cannot start, its own exit status (2 bad option) with its message."""
        with reporting(as_json):
            from moss_files.foundation import workspace

            top = workspace.find_workspace(explicit=root)
            result = _stop(top) if stop else _open(top, port=port, browser=not no_browser)
            if not stop:
                _mark_opened(top)
        if stop:
            text = f"stopped the daemon (pid {result['pid']})" if result["stopped"] else "no daemon runs for this project"
        else:
            text = result["url"]
        emit(result, as_json, text=text)


def _urls(record: dict[str, Any]) -> tuple[str, str]:
    mcp_url = str(record.get("url") or "")
    web_url = str(record.get("web") or mcp_url.removesuffix("/mcp") + "/")
    return web_url, mcp_url


def _mark_opened(root: Path) -> None:
    """A registered project's `lastOpenedAt` is now: opening its pages is opening it, as Moe's
    plugin marks a project it opens. A registry that cannot be written is said, not fatal."""
    from moss_files.foundation import projects
    from moss_files.foundation.errors import MossError
    from moss_files.foundation.ids import format_time, system_clock

    try:
        projects.touch(Path.home(), str(root), format_time(system_clock()))
    except MossError as err:
        note(f"moss ui: the project registry was not updated: {err}")


def _open(root: Path, *, port: int | None, browser: bool) -> dict[str, Any]:
    # Imported here: the daemon module loads the MCP SDK, which only this command and serve need.
    from moss_files.mcp import daemon

    record = daemon.running_record(root)
    started = False
    log_path: Path | None = None
    if record is None:
        record, log_path = _start(root, port)
        started = True
    web_url, mcp_url = _urls(record)
    opened = False
    if browser:
        opened = _open_browser(web_url)
        if not opened:
            note(f"moss ui: no browser could be started here; open {web_url}")
    elif started:
        note(f"moss ui: started the daemon (pid {record.get('pid')}); stop it with `moss ui --stop`")
    return {"url": web_url, "mcp": mcp_url, "pid": record.get("pid"), "started": started, "opened": opened, "log": str(log_path) if log_path else None}


def _open_browser(url: str) -> bool:
    """Hand `url` to the default browser; what the browser prints goes to stderr, so stdout
    keeps only our answer (the JSON document with --json)."""
    import webbrowser

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        return bool(webbrowser.open(url))
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _start(root: Path, port: int | None) -> tuple[dict[str, Any], Path]:
    """Start `moss serve --http` for `root` in its own session; wait for its record.

    Raises Conflict CONFLICT, with a hint naming --port, when the port is taken.
    """
    from moss_files.foundation.httpserver import listen
    from moss_files.mcp import daemon

    if port:
        # Tried here first, so a port in use is told in this command's terms (--port) and
        # shape (--json); the daemon's own check still covers a port taken meanwhile.
        listen("127.0.0.1", port, port_hint="pick another with --port, or --port 0 for a free one").close()
    run_dir = root / daemon.RUN_DIR
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / LOG_NAME
    address = "127.0.0.1" if port is None else f"127.0.0.1:{port}"  # alone: the default port, or the next free one
    # -P: the daemon runs in the project folder, which must never shadow this toolkit's modules.
    command = [sys.executable, "-P", "-c", "from moss_files.cli.main import main; main()", "serve", "--http", address, "--root", str(root)]
    with log_path.open("ab") as log:
        child = subprocess.Popen(command, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        record = daemon.read_record(root)
        if record is not None and record.get("pid") == child.pid:
            return record, log_path
        code = child.poll()
        if code is not None:
            said = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            note("\n".join(said[-5:]) if said else f"moss serve exited with status {code}")
            raise typer.Exit(code or 1)
        time.sleep(0.05)
    child.terminate()
    note(f"moss ui: the daemon did not start within {START_TIMEOUT:g} s; see {log_path}")
    raise typer.Exit(1)


def _stop(root: Path) -> dict[str, Any]:
    """SIGTERM to the project's daemon, then wait (with a deadline) for its record to go."""
    from moss_files.mcp import daemon

    record = daemon.running_record(root)
    if record is None or not isinstance(record.get("pid"), int):
        return {"stopped": False, "pid": None}
    pid = int(record["pid"])
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return {"stopped": False, "pid": pid}
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        if daemon.running_record(root) is None:
            return {"stopped": True, "pid": pid}
        time.sleep(0.05)
    note(f"moss ui: the daemon (pid {pid}) has not stopped within {STOP_TIMEOUT:g} s")
    raise typer.Exit(1)
