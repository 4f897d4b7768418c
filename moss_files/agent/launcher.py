"""`moss agent run --role architect|worker|qa`: an agent launched by role, as Moe's `moe-agent`
launcher starts one. Shell layer: it drives the runtime (`runtime.Runtime.run`) with the
role's prompts (`roles`), one run per task.

With auto-claim (the default) each run begins with a prelude the runtime performs itself,
through the capability gate and into the run's events (tool calls with `origin: role`):
claim the next task of the role's column (`moe.claim_next_task`), read its context
(`moe.get_context`, which the board requires before steps and verdicts), then hand the model
the task. When nothing is claimable the run ends without a model call, after waiting for a
task with `moe.wait_for_task` when asked to; the worker then leaves the board
(`moe.deregister_worker`, as Moe's launcher does on exit) and the launch ends. A task the
worker still holds outside its column (an architect's plan waiting for approval) is let go
(`moe.release_task`) so the next can be claimed; one still in its column is resumed once, then
let go (TASK_UNFINISHED). With `--no-auto-claim` the launch is one run of the person's prompt,
with the role's prompt and the board's tools.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from moss_files.agent import model, roles
from moss_files.agent.roles import Claim, Role
from moss_files.agent.runtime import Opening, Output, Route, Run, Runtime, Silent
from moss_files.agent.settings import AgentSettings, ServerSettings
from moss_files.foundation.context import Context
from moss_files.foundation.errors import AgentFailure, InvalidRequest, MossError, NotFound

BOARD_TOOLS_ENV = "MOSS_MCP_TOOLS"  # moss serve's --tools variable: a role run's moss server serves the board's set
WORKER_ENV = "MOE_WORKER_ID"  # the worker the moss server acts for when a call names none, as with Moe's proxy
WAIT_MARGIN_SECONDS = 2.0  # a moe.wait_for_task call asks for this much less than the tool's timeout
NEEDED = ("moe.claim_next_task", "moe.get_context", "moe.release_task", "moe.deregister_worker")


@dataclass
class Launch:
    """One launch's state across its runs."""

    role: Role
    worker: str
    wait_for_task: float
    runs_per_task: dict[str, int] = field(default_factory=dict)
    outcome: str = ""  # of the latest prelude: claimed | idle | unfinished | left
    claim: Claim | None = None
    resumed: bool = False


def board_settings(settings: AgentSettings, role: Role, worker: str, *, auto_claim: bool) -> AgentSettings:
    """`settings` for a role run: the moss servers serve the board's tools (the `moe` set,
    unless their arguments choose the sets) and act for `worker`; the role's prompt comes
    before the workspace's own system prompt."""
    servers = []
    for server in settings.servers:
        if server.tool_map == "moss" and server.url is None:
            env = dict(server.env)
            if "--tools" not in server.args and not any(arg.startswith("--tools=") for arg in server.args):
                env.setdefault(BOARD_TOOLS_ENV, "moe")
            env.setdefault(WORKER_ENV, worker)
            server = replace(server, env=env)
        servers.append(server)
    prompt = roles.system_prompt(role, worker, auto_claim=auto_claim)
    if settings.llm.system_prompt.strip():
        prompt = f"{prompt}\n\n{settings.llm.system_prompt.strip()}"
    return replace(settings, servers=tuple(servers), llm=replace(settings.llm, system_prompt=prompt))


def board_routes(runtime: Runtime) -> dict[str, Route]:
    """The board tools the launch calls itself, by Moe's names, from the first server that
    serves them (a moss server first). Raises NotFound naming what is missing."""
    host = runtime.host
    candidates: list[ServerSettings] = sorted(host.by_name.values(), key=lambda server: server.tool_map != "moss")
    for server in candidates:
        found = {}
        for tool in NEEDED:
            route = host.find(f"{server.name}.{tool}") or host.find(f"{server.name}.{tool.replace('.', '_')}")
            if route is not None:
                found[tool] = route
        if len(found) == len(NEEDED):
            return found
    statuses = [f"{s['name']}: {s['error']['code']}" for s in host.statuses() if not s["ok"]]
    raise NotFound(
        "no MCP server serves the board's tools (" + ", ".join(NEEDED) + ")" + (f"; not connected: {'; '.join(statuses)}" if statuses else ""),
        details={"needed": list(NEEDED), "servers": host.statuses()},
        hint='a role run needs `moss serve` with the moe tool set: a [[mcp_servers]] entry with tool_map = "moss" (its --tools, when given, must include moe)',
    )


# --------------------------------------------------------------------------- the prelude


class Prelude:
    """The prelude of one auto-claim run: claim (or resume), read the context, hand the task over."""

    def __init__(self, launch: Launch, tools: Mapping[str, Route]) -> None:
        self.launch = launch
        self.tools = tools

    async def __call__(self, run: Run) -> Opening:
        launch = self.launch
        launch.claim, launch.resumed, launch.outcome = None, False, ""
        role, worker = launch.role, launch.worker
        answer = await self._call(run, "moe.claim_next_task", roles.claim_arguments(role, worker))
        waited = 0.0
        while True:
            claim = roles.read_claim(answer)
            if claim.kind == "claimed":
                break
            if claim.kind == "held" and claim.task is not None:
                if claim.status != role.column:
                    # Its part is done (an architect's plan waits for a person's approval): let go, take the next.
                    reason = f"the {role.name}'s part is done: the task is {claim.status}"
                    await self._release(run, claim, reason)
                    answer = await self._call(run, "moe.claim_next_task", roles.claim_arguments(role, worker))
                    continue
                if launch.runs_per_task.get(claim.task, 0) >= roles.RUNS_PER_TASK:
                    reason = f"{launch.runs_per_task[claim.task]} runs ended with the task still in {role.column}"
                    await self._release(run, claim, reason)
                    await self._leave(run, reason)
                    launch.claim, launch.outcome = claim, "unfinished"
                    return Opening(answer=f"Let go of {claim.task}: {reason}.")
                launch.resumed = True
                break
            remaining = launch.wait_for_task - waited
            if remaining > 0:
                started = time.monotonic()
                woke = await self._wait(run, remaining)
                waited += time.monotonic() - started
                if woke:
                    answer = await self._call(run, "moe.claim_next_task", roles.claim_arguments(role, worker))
                continue
            message = roles.idle_message(role, worker, waited)
            await self._leave(run, "no task to claim")
            run.emit("role.idle", {"role": role.name, "worker": worker, "statuses": [role.column], "waited_ms": int(waited * 1000), "message": message})
            run.output.note(message)
            launch.outcome = "idle"
            return Opening(answer=message)
        assert claim.task is not None
        launch.runs_per_task[claim.task] = launch.runs_per_task.get(claim.task, 0) + 1
        context = await self._call(run, "moe.get_context", {"taskId": claim.task, "workerId": worker}, raw=True)
        text = roles.task_text(role, worker, claim, answer, context, resumed=launch.resumed)
        run.emit(
            "role.claimed",
            {"role": role.name, "worker": worker, "task": claim.task, "title": claim.title, "status": claim.status, "resumed": launch.resumed, "text": text},
        )
        run.output.note(f"{worker}: {'resumed' if launch.resumed else 'claimed'} {claim.task} ({claim.title}, {claim.status})")
        launch.claim, launch.outcome = claim, "claimed"
        return Opening(text=text)

    async def _call(self, run: Run, tool: str, arguments: Mapping[str, Any], *, raw: bool = False) -> Any:
        """Call a board tool; its JSON answer (its text with `raw`). Raises AgentFailure when
        the call fails: a launch cannot go on without the board."""
        answer = await run.call_tool(self.tools[tool], arguments, origin="role")
        if raw and answer.ok:
            return answer.text  # shown to the model as it is (cut, with a note, past max_output_bytes)
        data = roles.parse_answer(answer.text) if answer.ok else None
        if data is None:
            first = (answer.text.strip().splitlines() or ["(no answer)"])[0][:300]
            raise AgentFailure(f"{tool} failed for {self.launch.worker}: {first}", code="TOOL_FAILED", details={"tool": tool, "text": answer.text[:2000]})
        return data

    async def _wait(self, run: Run, seconds: float) -> bool:
        """Wait up to `seconds` for a claimable task, in calls each within the tool's timeout.
        True when one appeared."""
        route = self.tools["moe.claim_next_task"]
        wait_route = run.rt.host.find(f"{route.server.name}.moe.wait_for_task") or run.rt.host.find(f"{route.server.name}.moe_wait_for_task")
        if wait_route is None:
            raise NotFound("the board's server does not serve moe.wait_for_task, which --wait-for-task needs", details={"server": route.server.name})
        longest = max(1.0, run.rt.host.timeout_of(wait_route) - WAIT_MARGIN_SECONDS)
        milliseconds = int(max(1.0, min(seconds, longest)) * 1000)
        arguments = {"statuses": [self.launch.role.column], "workerId": self.launch.worker, "timeoutMs": milliseconds}
        answer = await run.call_tool(wait_route, arguments, origin="role")
        data = roles.parse_answer(answer.text) if answer.ok else None
        if data is None:
            raise AgentFailure(
                f"moe.wait_for_task failed for {self.launch.worker}: {answer.text[:300]}", code="TOOL_FAILED", details={"tool": "moe.wait_for_task"}
            )
        return bool(data.get("hasNext"))

    async def _release(self, run: Run, claim: Claim, reason: str) -> None:
        await self._call(run, "moe.release_task", {"taskId": claim.task, "workerId": self.launch.worker, "reason": reason})
        run.emit("role.released", {"role": self.launch.role.name, "worker": self.launch.worker, "task": claim.task, "status": claim.status, "reason": reason})
        run.output.note(f"{self.launch.worker}: let go of {claim.task} ({reason})")

    async def _leave(self, run: Run, reason: str) -> None:
        """Deregister the worker: it is gone, and any task it still holds is claimable again.
        A failure is noted, not raised: leaving is the end either way."""
        answer = await run.call_tool(self.tools["moe.deregister_worker"], {"workerId": self.launch.worker, "reason": reason}, origin="role")
        if not answer.ok:
            run.output.note(f"{self.launch.worker}: could not leave the board: {answer.text[:200]}")


async def leave(run: Run, launch: Launch, tools: Mapping[str, Route], reason: str) -> Opening:
    """The prelude of a launch's closing run (after a failure, or after --max-tasks): the
    worker leaves the board, and the run ends without a model call."""
    await Prelude(launch, tools)._leave(run, reason)
    message = f"{launch.worker} left the board: {reason}."
    run.emit("role.idle", {"role": launch.role.name, "worker": launch.worker, "statuses": [launch.role.column], "waited_ms": 0, "message": message})
    launch.outcome = "left"
    return Opening(answer=message)


# --------------------------------------------------------------------------- the launch


def run_role(
    ctx: Context,
    role_name: str,
    *,
    worker: str,
    prompt: str | None = None,
    auto_claim: bool = True,
    wait_for_task: float = 0.0,
    max_tasks: int | None = None,
    session: str | None = None,
    wait: float = 0.0,
    environ: Mapping[str, str],
    output: Output | None = None,
    catch_sigint: bool = False,
) -> dict[str, Any]:
    """Launch the agent of a role as `worker`: with auto-claim, one run per task until nothing
    is claimable (or `max_tasks` were taken); without, one run of `prompt`.

    Returns {session, role, worker, auto_claim, runs, tasks: [{task, title, status, run,
    resumed}], stopped}; `stopped` is idle, max_tasks or prompt. Raises AgentFailure when a run
    fails (the worker leaves the board first; details name the session and run), AgentFailure
    TASK_UNFINISHED when a task stayed in the role's column, NotFound when no server serves the
    board's tools, InvalidRequest for bad options.
    """
    from moss_files.agent import service

    role = roles.role_named(role_name)
    if wait_for_task < 0:
        raise InvalidRequest("--wait-for-task must be 0 or more seconds", details={"field": "wait_for_task", "value": wait_for_task})
    if max_tasks is not None and max_tasks < 1:
        raise InvalidRequest("--max-tasks must be 1 or more", details={"field": "max_tasks", "value": max_tasks})
    if not auto_claim and not (prompt and prompt.strip()):
        raise InvalidRequest("with --no-auto-claim, say what the agent should do (PROMPT)", details={"field": "prompt"})
    if not worker.strip():
        raise InvalidRequest("the worker id is empty", details={"field": "worker"})
    shown = output or Silent()
    stop = service.Interrupt()
    launch = Launch(role, worker.strip(), wait_for_task)
    text = roles.run_prompt(role, launch.worker, prompt) if auto_claim else f"[{role.name} {launch.worker}] {prompt.strip() if prompt else ''}"
    runs: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []

    def adjust(settings: AgentSettings) -> AgentSettings:
        return board_settings(settings, role, launch.worker, auto_claim=auto_claim)

    async def work() -> dict[str, Any] | None:
        with ExitStack() as signals:
            if catch_sigint:
                signals.enter_context(stop.on_sigint())
            return await attempt()

    async def attempt() -> dict[str, Any] | None:
        async with service.open_runtime(ctx, environ=environ, adjust=adjust) as runtime:
            if stop.fired:
                return None
            tools = board_routes(runtime) if auto_claim else {}
            session_id = runtime.store.resolve_session(session) if session else service.create_session(ctx, runtime, text)  # titled "[ROLE WORKER] …"
            shown.note(f"{role.name} {launch.worker} · session {session_id} · model {runtime.settings.llm.model}")
            with anyio.CancelScope() as scope:
                stop.scope = scope
                stopped = await drive(runtime, session_id, tools)
                return {
                    "session": service._session_dict(runtime.store, session_id),
                    "role": role.name,
                    "worker": launch.worker,
                    "auto_claim": auto_claim,
                    "runs": runs,
                    "tasks": tasks,
                    "stopped": stopped,
                }
            stop.scope = None
            return None

    async def drive(runtime: Runtime, session_id: str, tools: Mapping[str, Route]) -> str:
        if not auto_claim:
            summary = await runtime.run(session_id, text, wait=wait, output=shown, origin="role")
            runs.append(model.run_to_dict(summary))
            return "prompt"
        prelude = Prelude(launch, tools)
        while True:
            try:
                summary = await runtime.run(session_id, text, wait=wait, output=shown, origin="role", prelude=prelude)
            except AgentFailure as failure:
                await close(runtime, session_id, tools, f"its run failed ({failure.code})")
                raise
            runs.append(model.run_to_dict(summary))
            claim = launch.claim
            if launch.outcome == "claimed" and claim is not None:
                tasks.append({"task": claim.task, "title": claim.title, "status": claim.status, "run": summary.id, "resumed": launch.resumed})
                if max_tasks is not None and len({t["task"] for t in tasks}) >= max_tasks:
                    await close(runtime, session_id, tools, f"it took {max_tasks} task(s), as --max-tasks asked")
                    return "max_tasks"
                continue
            if launch.outcome == "unfinished" and claim is not None:
                raise AgentFailure(
                    f"{claim.task} was still {role.column} after {roles.RUNS_PER_TASK} runs of {launch.worker}; it was let go for another agent",
                    code="TASK_UNFINISHED",
                    details={"session": session_id, "run": summary.id, "task": claim.task, "worker": launch.worker},
                    hint="`moss agent logs --run " + summary.id + "` shows what the model did; the task keeps its plan and progress",
                )
            return "idle"

    async def close(runtime: Runtime, session_id: str, tools: Mapping[str, Route], reason: str) -> None:
        async def closing(run: Run) -> Opening:
            return await leave(run, launch, tools, reason)

        try:
            summary = await runtime.run(
                session_id, f"[{role.name} {launch.worker}] Leave the board: {reason}.", wait=wait, output=shown, origin="role", prelude=closing
            )
            runs.append(model.run_to_dict(summary))
        except MossError as err:  # the launch ends anyway; the first failure is the one to report
            shown.note(f"{launch.worker}: could not leave the board: {err.code}: {err.message}")

    with service.redacting(ctx, environ):
        result = anyio.run(work)
    if result is None:
        raise KeyboardInterrupt
    return result


def runs_line(result: Mapping[str, Any]) -> str:
    """One line on a launch for people: role, worker, tasks, runs, cost."""
    costs = [run.get("cost_usd") for run in result["runs"]]
    cost = "cost unknown" if any(c is None for c in costs) else f"${sum(c for c in costs if c is not None):.4f}"
    tasks = ", ".join(f"{t['task']} ({t['status']})" for t in result["tasks"]) or "no task"
    return f"{result['role']} {result['worker']}: {tasks} · {len(result['runs'])} run(s) · {cost} · stopped: {result['stopped']}"
