"""`moss agent init|chat|run|sessions|logs|mcp list|mcp call`: the local agent runtime, and
agents launched by board role (`run --role`).

Entry layer: reads the options and the environment (the API key, NEEDLECAST_SLEEVE), finds the
workspace, calls moss_files.agent.service and renders its dict. The MCP and Anthropic SDKs are
loaded by the use cases that need them, never when another `moss` command starts.
Exit codes: 0 done; 2 bad arguments or API_KEY_MISSING; 3 no such session or run; 4 bad
.moss/agent.toml; 5 CAPABILITY_DENIED or SESSION_BUSY; 6 no workspace; 9 the run, the model, a
server or a tool failed (RUN_FAILED, MODEL_ERROR, STEP_LIMIT, RUN_CANCELLED, TOOL_TIMEOUT,
TOOL_FAILED, SERVER_UNAVAILABLE), or a role's task stayed unfinished (TASK_UNFINISHED); 130
interrupted.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from moss_files.cli.support import JsonOpt, RootOpt, emit, new_app, note, reporting

if TYPE_CHECKING:
    from moss_files.foundation.context import Context

SLEEVE_ENV = "NEEDLECAST_SLEEVE"
SessionOpt = Annotated[
    str | None, typer.Option("--session", metavar="ID", help="A session id, an unambiguous prefix of one, or last (the newest).", show_default=False)
]
WaitOpt = Annotated[
    float, typer.Option("--wait", metavar="SECONDS", help="Wait this long for a run of the same session to end (default: refuse at once with SESSION_BUSY).")
]


def _context(root: Path | None) -> Context:
    from moss_files.foundation import workspace
    from moss_files.foundation.context import HUMAN, Context

    return Context(workspace.find_workspace(explicit=root), actor=HUMAN, sleeve=os.environ.get(SLEEVE_ENV) or None)


class Console:
    """A run's progress for people: the model's text on stdout as it streams, notes on stderr."""

    def __init__(self) -> None:
        self.mid_line = False

    def text(self, delta: str) -> None:
        sys.stdout.write(delta)
        sys.stdout.flush()
        self.mid_line = not delta.endswith("\n")

    def note(self, message: str) -> None:
        if self.mid_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.mid_line = False
        note(message)


def register(app: typer.Typer) -> None:
    """Add the `agent` group to the `moss` app."""
    agent_app = new_app(
        "The local agent runtime: sessions and runs as files under .moss/agent/, a default-deny capability gate in front of "
        "MCP tools, and a model loop with token and cost accounting. Settings: .moss/agent.toml (moss agent init)."
    )
    mcp_app = new_app("The agent's MCP servers: list them with their tools, or call one tool through the gate.")
    app.add_typer(agent_app, name="agent")
    agent_app.add_typer(mcp_app, name="mcp")

    @agent_app.command("init")
    def init_cmd(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Write .moss/agent.toml with every setting and its restrictive default (an existing file is kept).
        JSON: {path, created}."""
        from moss_files.agent import service

        with reporting(as_json):
            result = service.init(_context(root))
        emit(result, as_json, text=f"{'created' if result['created'] else 'kept   '} {result['path']}")

    @agent_app.command("run")
    def run_cmd(
        prompt: Annotated[
            str | None, typer.Argument(metavar="[PROMPT]", help="What to do (with --role: added to each task's instruction).", show_default=False)
        ] = None,
        session: SessionOpt = None,
        wait: WaitOpt = 0.0,
        handoff: Annotated[bool, typer.Option("--handoff", help="After the run, let the model write the handoff capsule and the cstack memory.")] = False,
        role: Annotated[
            str | None,
            typer.Option("--role", metavar="architect|worker|qa", help="Launch the agent of a board role: one run per task of its column.", show_default=False),
        ] = None,
        auto_claim: Annotated[
            bool, typer.Option("--auto-claim/--no-auto-claim", help="With --role: claim each task for the agent (off: one run of PROMPT).")
        ] = True,
        worker: Annotated[
            str | None,
            typer.Option("--worker", metavar="ID", envvar="MOE_WORKER_ID", help="With --role: the worker id (default: ROLE-<8 hex>).", show_default=False),
        ] = None,
        wait_for_task: Annotated[
            float,
            typer.Option(
                "--wait-for-task", metavar="SECONDS", min=0, help="With --role: when nothing is claimable, wait this long for a task (moe.wait_for_task)."
            ),
        ] = 0.0,
        max_tasks: Annotated[int | None, typer.Option("--max-tasks", metavar="N", min=1, help="With --role: stop after N tasks.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Run one prompt, non-interactively (for scripts and other agents): in a new session, or with --session in
        an existing one. The answer streams to stdout. JSON: {session, run, handoff_run}. Exit 9 when the run fails
        (the error's details name the session and run). With --role architect|worker|qa: the agent of that role
        takes the tasks of its column one run each, until none is left. JSON: {session, role, worker, auto_claim,
        runs, tasks, stopped}."""
        from moss_files.agent import runtime, service

        output = runtime.Silent() if as_json else Console()
        if role is not None:
            with reporting(as_json):
                result = _run_role(role, prompt, auto_claim, worker, wait_for_task, max_tasks, session, wait, root, output)
            emit(result, as_json, text="")
            return
        with reporting(as_json):
            result = service.run(
                _context(root), prompt or "", session=session, wait=wait, handoff=handoff, environ=dict(os.environ), output=output, catch_sigint=True
            )
        if not as_json:
            output.note(_run_line(result["run"]) + f" · session {result['session']['id']}")
        emit(result, as_json, text="")

    @agent_app.command("chat")
    def chat_cmd(
        session: SessionOpt = None,
        handoff: Annotated[
            bool | None,
            typer.Option(
                "--handoff/--no-handoff",
                help="At the end, write the handoff capsule and cstack memory (default: ask on a terminal, skip otherwise).",
                show_default=False,
            ),
        ] = None,
        wait: WaitOpt = 0.0,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Chat with the agent: each line is a run; quit or exit (or end of input) leaves, Ctrl-C cancels the run in
        progress but not the session. JSON (printed at the end): {session, runs}."""
        from moss_files.agent import runtime

        output = runtime.Silent() if as_json else Console()
        with reporting(as_json):
            result = _chat(_context(root), session, handoff, wait, output)
        emit(result, as_json, text="")

    @agent_app.command("sessions")
    def sessions_cmd(
        limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many, newest first.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """List the agent's sessions, newest first, with runs, tokens and cost. JSON: {sessions, count, total}."""
        from moss_files.agent import service

        with reporting(as_json):
            result = service.sessions(_context(root), limit=limit)
        lines = [
            f"{s['id']}  {s['status']:<11} {s['runs']:>3} run(s)  {s['input_tokens']:>8} in {s['output_tokens']:>7} out  "
            f"{_cost(s['cost_usd']):>9}  {s['updated']}  {s['title']}"
            for s in result["sessions"]
        ]
        emit(result, as_json, text="\n".join(lines) or 'no sessions yet (moss agent run "..." starts one)')

    @agent_app.command("logs")
    def logs_cmd(
        session: SessionOpt = None,
        run: Annotated[str | None, typer.Option("--run", metavar="ID", help="A run id, or an unambiguous prefix of one.", show_default=False)] = None,
        kinds: Annotated[
            list[str] | None,
            typer.Option(
                "--kind", metavar="KIND", help="Only events of this kind (tool.failed) or family (tool, capability.*); repeatable.", show_default=False
            ),
        ] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Show the events of a session (--session) or of one run (--run), in order. A line of the log that is not
        an event (a torn write after a crash) is reported on stderr and skipped. JSON: {session, run, events, count, problems}."""
        from moss_files.agent import model, service

        with reporting(as_json):
            result = service.logs(_context(root), session=session, run=run, kinds=kinds or ())
        for problem in result["problems"]:
            note(f"warning[{problem['code']}] {problem['path']}:{problem['line']}: {problem['message']}")
        events = [model.parse_event(json.dumps(event)) for event in result["events"]]
        emit(result, as_json, text="\n".join(model.describe_event(event) for event in events) or "no events")

    @mcp_app.command("list")
    def mcp_list_cmd(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Connect to every configured MCP server and list its tools with the capabilities each needs.
        JSON: {servers: [{name, transport, ok, server, tools, error}]}."""
        from moss_files.agent import service

        with reporting(as_json):
            result = service.mcp_list(_context(root), environ=dict(os.environ))
        lines: list[str] = []
        for server in result["servers"]:
            state = f"{len(server['tools'])} tools" if server["ok"] else f"{server['error']['code']}: {server['error']['message']}"
            lines.append(f"{server['name']} ({server['transport']}): {state}")
            for tool in server["tools"]:
                needs = ", ".join(tool["needs"]) if tool["needs"] is not None else "unmapped (denied unless policy.allow_tools names it)"
                lines.append(f"  {server['name']}.{tool['name']:<28} {needs}")
        emit(result, as_json, text="\n".join(lines) or "no MCP servers configured")

    @mcp_app.command("call")
    def mcp_call_cmd(
        target: Annotated[str, typer.Argument(metavar="SERVER.TOOL", help="The tool, for example moss.cstack.status.", show_default=False)],
        assignments: Annotated[
            list[str] | None,
            typer.Option("--arg", metavar="KEY=VALUE", help="An argument, read by its declared type (text stays text); repeatable.", show_default=False),
        ] = None,
        args_json: Annotated[
            str | None, typer.Option("--args", metavar="JSON", help="All arguments as one JSON object (--arg values go over it).", show_default=False)
        ] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Call one MCP tool exactly as the agent would: schema check, capability gate, timeout and output cap.
        JSON: {server, tool, decisions, is_error, text, structured, bytes, truncated, duration_ms}. Exit 5 when the
        policy denies it, 9 when the tool fails, times out or its server is unavailable."""
        from moss_files.agent import service
        from moss_files.foundation import structured
        from moss_files.foundation.errors import InvalidRequest, MossError

        with reporting(as_json):
            parsed: dict[str, Any] | None = None
            if args_json is not None:
                try:
                    parsed = structured.loads_json(args_json)
                except (ValueError, MossError) as exc:  # MossError: JSON_TOO_DEEP
                    raise InvalidRequest(f"--args is not JSON: {exc}") from None
                if not isinstance(parsed, dict):
                    raise InvalidRequest("--args must be a JSON object")
            result = service.mcp_call(_context(root), target, assignments=assignments or (), json_arguments=parsed, environ=dict(os.environ))
        emit(result, as_json, text=result["text"])


def _run_role(
    role: str,
    prompt: str | None,
    auto_claim: bool,
    worker: str | None,
    wait_for_task: float,
    max_tasks: int | None,
    session: str | None,
    wait: float,
    root: Path | None,
    output: Any,
) -> dict[str, Any]:
    from moss_files.agent import launcher, roles

    chosen = roles.role_named(role)
    result = launcher.run_role(
        _context(root),
        chosen.name,
        worker=worker or roles.worker_id(chosen, os.urandom(4).hex()),
        prompt=prompt,
        auto_claim=auto_claim,
        wait_for_task=wait_for_task,
        max_tasks=max_tasks,
        session=session,
        wait=wait,
        environ=dict(os.environ),
        output=output,
        catch_sigint=True,
    )
    output.note(launcher.runs_line(result) + f" · session {result['session']['id']}")
    return result


def _chat(ctx: Context, session: str | None, handoff: bool | None, wait: float, output: Any) -> dict[str, Any]:
    import anyio

    from moss_files.agent import service

    interrupt = service.Interrupt()

    def read() -> str | None:
        if sys.stdin is None:
            return None
        if sys.stdin.isatty():
            sys.stderr.write("you> ")
            sys.stderr.flush()
        line = sys.stdin.readline()
        return None if line == "" else line.rstrip("\n")

    async def read_line() -> str | None:
        return await anyio.to_thread.run_sync(read, abandon_on_cancel=True)

    async def offer_handoff() -> bool:
        if handoff is not None:
            return handoff
        if sys.stdin is None or not sys.stdin.isatty():
            return False
        note("Write the handoff capsule and the cstack memory before leaving? [y/N]")
        answer = await read_line()
        return (answer or "").strip().lower() in ("y", "yes")

    async def main() -> dict[str, Any]:
        with interrupt.on_sigint(idle=lambda: note("(no run in progress; quit or exit ends the chat)")):
            return await service.chat(
                ctx, environ=dict(os.environ), session=session, read_line=read_line, output=output, interrupt=interrupt, offer_handoff=offer_handoff, wait=wait
            )

    with service.redacting(ctx, dict(os.environ)):
        return anyio.run(main)


def _cost(value: float | None) -> str:
    return "?" if value is None else f"${value:.4f}"


def _run_line(run: dict[str, Any]) -> str:
    return f"[run {run['id']} {run['status']} · {run['input_tokens']} in · {run['output_tokens']} out · {_cost(run['cost_usd'])} · {run['steps']} step(s)]"
