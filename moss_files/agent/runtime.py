"""The run loop (Bosun M0/M1 §3.2) and the tool host in front of the MCP servers. Shell layer:
it drives the edges (the session store, the MCP connections, the model) with the pure core
(policy, context window, schema checks, costs).

A run: accept the prompt; record `run.started`; orient the model at a session's first run;
assemble the context under the budget (`prompt.built`); call the model, streaming
(`assistant.delta` coalesced, `assistant.message`); for each tool call: check the name and
the arguments, ask the policy (`capability.granted` / `capability.denied` per decision), call
the tool with a timeout and an output cap (`tool.invoked`, `tool.succeeded` / `tool.failed`),
and hand every result (denials included) back to the model; repeat, at most `max_steps` tool
steps; record `run.succeeded` or `run.failed` with tokens and cost. Every event is on disk
before the run goes on, so a crash leaves a log that ends where the run stopped.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from moss_files.agent import costs, model, policy, schema, window
from moss_files.agent.model import Event, RunSummary, Usage
from moss_files.agent.policy import Decision, Policy
from moss_files.agent.settings import OWN_COMMAND, AgentSettings, ServerSettings
from moss_files.agent.store import SessionStore
from moss_files.agent.stream import ModelRequest
from moss_files.foundation.context import Context
from moss_files.foundation.errors import AgentFailure, Conflict, InvalidRequest, MossError, NotFound

if TYPE_CHECKING:
    from moss_files.agent.stream import Reply, Retry
    from moss_files.mcp.client import Connection, Pool, ToolAnswer

DELTA_FLUSH_CHARS = 2048
DELTA_FLUSH_SECONDS = 1.0
ORIENT_PART_CHARS = 6000
MOSS_TOOLS_ENV = "MOSS_MCP_TOOLS"  # == cli.serve.TOOLS_ENV
MOSS_AGENT_TOOL_SETS = "moss,loop,cstack,needlecast"  # what a moss server lists for the runtime
META_KEY = "moss-files/agent"  # tool calls carry the session and run in _meta, for the server's audit log
BASE_SYSTEM = """\
You are an agent working in the project at {root}: a moss-files workspace (handoff capsules, \
cstack memory files, needlecast messages, a task board, all markdown files in git). You act only \
through the tools listed; their names are SERVER__TOOL. Every tool call passes a capability \
policy; a denied call comes back as an error result that says why: do not repeat it unchanged. \
Be brief, and say what you changed."""
HANDOFF_PROMPT = """\
This session is ending. Leave the trail the next agent needs, through the moss server's tools:
1. Store a handoff capsule with moss.store (sections: Objective, Current status, Decisions, \
Next actions, Key locations, Open questions) saying where this session's work stands.
2. Update the cstack memory: cstack.remember for decisions and lessons worth keeping, \
cstack.add / cstack.done for tasks in PLAN.md.
Then answer in one line with what you wrote."""


class Model(Protocol):
    """What the loop needs of a model adapter (llm.AnthropicModel)."""

    async def complete(self, request: ModelRequest, *, on_text: Callable[[str, int], None], on_retry: Callable[[Retry], None]) -> tuple[Reply, int]: ...


@dataclass(frozen=True, slots=True)
class Opening:
    """What a run's prelude hands the run: `text` added to the prompt the model gets, or an
    `answer` that ends the run there, without a model call."""

    text: str = ""
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class RuntimeCall:
    """The answer to a tool call the runtime made itself: whether it succeeded, and its text
    (the tool's output, or `CODE: message`)."""

    ok: bool
    text: str


Prelude = Callable[["Run"], Awaitable[Opening]]


class Output(Protocol):
    """Where a run shows its progress to a person (nothing, for --json)."""

    def text(self, delta: str) -> None: ...

    def note(self, message: str) -> None: ...


class Silent:
    """An Output that shows nothing."""

    def text(self, delta: str) -> None:
        return None

    def note(self, message: str) -> None:
        return None


# --------------------------------------------------------------------------- the tool host


@dataclass(frozen=True, slots=True)
class Route:
    """A model-facing tool name and where it leads."""

    name: str  # as the model sees it: SERVER__TOOL
    server: ServerSettings
    tool: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool | None

    @property
    def qualified(self) -> str:
        return f"{self.server.name}.{self.tool}"


def model_tool_name(server: str, tool: str, taken: set[str]) -> str:
    """`server__tool` as the Messages API accepts tool names (letters, digits, `_`, `-`; at
    most 64 characters), made unique among `taken`."""
    base = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{tool}")[:64]
    name, number = base, 2
    while name in taken:
        suffix = f"_{number}"
        name, number = base[: 64 - len(suffix)] + suffix, number + 1
    taken.add(name)
    return name


def launch_command(server: ServerSettings) -> tuple[str | None, tuple[str, ...]]:
    """The command and arguments that start a stdio server. `moss`, this toolkit's own command
    (the default server's), is run by the interpreter running this process (`python -m
    moss_files`): the server is then this very toolkit, started whether or not `moss` is on PATH
    (a virtualenv's moss run by its path)."""
    if server.command == OWN_COMMAND and sys.executable:
        return sys.executable, ("-P", "-m", "moss_files", *server.args)  # -P: the working folder never shadows the toolkit
    return server.command, server.args


class ToolHost:
    """The MCP servers of a run, the model-facing names of their tools, and the gate."""

    def __init__(
        self,
        settings: AgentSettings,
        gate: Policy,
        *,
        root: Path,
        environ: Mapping[str, str],
        sleeve: str | None,
        errlog: Callable[[str], Any] | None = None,
        connect_timeout: float = 30.0,
    ) -> None:
        self.settings = settings
        self.policy = gate
        self.root = root
        self.decisions: list[Decision] = []  # made while connecting (env_from), logged by the next run
        self.connections: list[Connection] = []
        self.by_name: dict[str, ServerSettings] = {}
        self._logs: list[Any] = []
        for server in settings.servers:
            if not server.enabled:
                continue
            env = dict(server.env)
            for key in server.env_from:
                decision = policy.check_secret(gate, key)
                self.decisions.append(decision)
                if decision.granted and key in environ:
                    env[key] = environ[key]
            if sleeve and "NEEDLECAST_SLEEVE" not in env:
                env["NEEDLECAST_SLEEVE"] = sleeve
            if server.tool_map == "moss" and MOSS_TOOLS_ENV not in env:
                # The gate needs every tool's schema and hints before a call, from the list: moss
                # serve's default core set enables the others only as they are asked for, so
                # the runtime asks for its usual sets up front (`--tools` in args still wins).
                env[MOSS_TOOLS_ENV] = MOSS_AGENT_TOOL_SETS
            # Imported for the first server only: without one, the run never loads the MCP SDK.
            from moss_files.mcp.client import Connection

            log = errlog(server.name) if errlog is not None and server.url is None else None
            if log is not None:
                self._logs.append(log)
            command, args = launch_command(server)
            self.connections.append(
                Connection(
                    name=server.name,
                    command=command,
                    args=args,
                    env=env,
                    cwd=self.cwd_of(server),
                    url=server.url,
                    headers=server.headers,
                    errlog=log,
                    connect_timeout=connect_timeout,
                )
            )
            self.by_name[server.name] = server
        self.routes: dict[str, Route] = {}
        self._pool: Pool | None = None

    def cwd_of(self, server: ServerSettings) -> Path:
        """The folder a stdio server runs in (the workspace root unless `cwd` says otherwise);
        relative paths in its tools' arguments are taken from it."""
        if server.cwd is None:
            return self.root
        path = Path(server.cwd).expanduser()
        return path if path.is_absolute() else self.root / path

    async def __aenter__(self) -> ToolHost:
        if not self.connections:
            return self
        from moss_files.mcp.client import Pool

        self._pool = Pool(self.connections)
        await self._pool.__aenter__()
        taken: set[str] = set()
        for connection in self.connections:
            server = self.by_name[connection.name]
            for tool in connection.tools:
                name = model_tool_name(server.name, tool.name, taken)
                self.routes[name] = Route(name, server, tool.name, tool.description, tool.input_schema, tool.read_only)
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        pool, self._pool = self._pool, None
        try:
            return bool(pool is not None and await pool.__aexit__(*exc))
        finally:
            for log in self._logs:
                log.close()

    def statuses(self) -> list[dict[str, Any]]:
        """Each server: name, transport, whether it is connected, its tools, its error."""
        out = []
        for connection in self.connections:
            server = self.by_name[connection.name]
            out.append(
                {
                    "name": server.name,
                    "transport": server.transport,
                    "ok": connection.error is None,
                    "server": connection.server_info or None,
                    "tools": len(connection.tools),
                    "error": None if connection.error is None else {"code": connection.error.code, "message": connection.error.message},
                }
            )
        return out

    def model_tools(self) -> list[dict[str, Any]]:
        """The tools as the Messages API takes them."""
        return [
            {"name": route.name, "description": route.description[:1024] or route.qualified, "input_schema": route.input_schema}
            for route in self.routes.values()
        ]

    def find(self, name: str) -> Route | None:
        """The route of a model-facing name, or of `SERVER.TOOL`."""
        found = self.routes.get(name)
        if found is not None:
            return found
        return next((route for route in self.routes.values() if route.qualified == name), None)

    def rule_for(self, route: Route) -> policy.ToolRule | None:
        if route.server.tool_map == "moss":
            return policy.moss_rule(route.server.name, route.tool, read_only=bool(route.read_only))
        return None

    def decide(self, route: Route, arguments: Mapping[str, Any]) -> list[Decision]:
        """The gate's decisions for calling `route` with `arguments`."""
        return policy.decide(self.policy, route.qualified, arguments, base=str(self.cwd_of(route.server)), builtin=self.rule_for(route))

    def connection(self, route: Route) -> Connection:
        return next(c for c in self.connections if c.name == route.server.name)

    def timeout_of(self, route: Route) -> float:
        return route.server.timeout_seconds or self.settings.tool_timeout_seconds

    async def call(self, route: Route, arguments: Mapping[str, Any], *, meta: Mapping[str, Any] | None = None) -> ToolAnswer:
        """Call the tool (no gate: the caller decided). Raises MossError TOOL_TIMEOUT,
        SERVER_UNAVAILABLE or TOOL_FAILED."""
        return await self.connection(route).call(route.tool, arguments, timeout=self.timeout_of(route), meta=meta)


# --------------------------------------------------------------------------- small pure helpers


class DeltaCoalescer:
    """Collects streamed text and logs it as `assistant.delta` events of about
    DELTA_FLUSH_CHARS characters or DELTA_FLUSH_SECONDS seconds, not one line per token. The
    tail that never filled a batch is in the `assistant.message` that follows."""

    def __init__(self, emit: Callable[[str, dict[str, Any]], None], step: int) -> None:
        self.emit = emit
        self.step = step
        self.parts: list[str] = []
        self.size = 0
        self.since = 0.0
        self.attempt = 1

    def add(self, text: str, attempt: int) -> None:
        if attempt != self.attempt:
            self.parts, self.size, self.attempt = [], 0, attempt  # a retry starts the text anew
        if not self.parts:
            self.since = time.monotonic()
        self.parts.append(text)
        self.size += len(text)
        if self.size >= DELTA_FLUSH_CHARS or time.monotonic() - self.since >= DELTA_FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.emit("assistant.delta", {"step": self.step, "attempt": self.attempt, "text": "".join(self.parts)})
            self.parts, self.size = [], 0


# --------------------------------------------------------------------------- the run


@dataclass
class Runtime:
    """What runs need: the workspace's context, settings, policy, store, servers and model."""

    ctx: Context
    settings: AgentSettings
    policy: Policy
    store: SessionStore
    host: ToolHost
    model: Model | None  # None for the commands that call no model (mcp list, mcp call)
    decisions: list[Decision] = field(default_factory=list)  # made before any run (the API key), logged by the next

    def new_event(self, kind: str, session: str, run: str | None, data: Mapping[str, Any]) -> Event:
        return Event(self.ctx.new_ulid(), model.stamp_ms(self.ctx.now()), kind, session, run, dict(data))

    async def run(self, session_id: str, prompt: str, *, wait: float, output: Output, origin: str = "user", prelude: Prelude | None = None) -> RunSummary:
        """One run of `session_id` (created beforehand), holding its lock. A run that fails is
        recorded and raised as AgentFailure; the session stays usable. A `prelude` runs inside
        the run before the model is called (its tool calls pass the gate and are logged) and
        may add to the prompt, or end the run without a model call."""
        with await self._lock(session_id, wait):
            return await Run(self, session_id, prompt, output, origin, prelude).execute()

    async def _lock(self, session_id: str, wait: float) -> ExitStack:
        deadline = time.monotonic() + wait
        delay = 0.01
        while True:
            stack = ExitStack()
            try:
                stack.enter_context(self.store.run_lock(session_id, wait=0))
                return stack
            except Conflict as exc:
                if exc.code != "SESSION_BUSY":
                    raise
                if time.monotonic() >= deadline:
                    raise self.store.busy_error(session_id, wait) from None
            await anyio.sleep(delay)  # the lock is a flock: poll it, without blocking the loop
            delay = min(delay * 2, 0.2)


class Run:
    """One run in progress."""

    def __init__(self, runtime: Runtime, session_id: str, prompt: str, output: Output, origin: str, prelude: Prelude | None = None) -> None:
        self.rt = runtime
        self.session_id = session_id
        self.prompt = prompt
        self.output = output
        self.origin = origin
        self.prelude = prelude
        self.runtime_calls = 0
        self.run_id = runtime.ctx.new_ulid()
        self.usage = Usage()
        self.steps = 0
        self.tool_steps = 0
        self.tool_calls = 0
        self.llm = runtime.settings.llm

    def emit(self, kind: str, data: Mapping[str, Any]) -> None:
        self.rt.store.append(self.rt.new_event(kind, self.session_id, self.run_id, data))

    def decision_events(self, decisions: Sequence[Decision], extra: Mapping[str, Any]) -> None:
        for decision in decisions:
            kind = "capability.granted" if decision.granted else "capability.denied"
            self.emit(kind, {**extra, **policy.decision_to_dict(decision)})

    async def execute(self) -> RunSummary:
        store = self.rt.store
        log = store.read_events(self.session_id)
        if log.torn_tail:
            store.end_torn_line(self.session_id)
        self._close_interrupted(log.events)
        history = list(log.events)
        self.emit(
            "run.started",
            {
                "prompt": self.prompt,
                "origin": self.origin,
                "model": self.llm.model,
                "max_steps": self.llm.max_steps,
                "max_context_tokens": self.llm.max_context_tokens,
                "max_response_tokens": self.llm.max_response_tokens,
                "servers": self.rt.host.statuses(),
                "skipped_lines": len(log.problems),
            },
        )
        try:
            store.update_session(self.session_id, {"status": "running", "current_run": self.run_id, "updated": self.rt.ctx.stamp()})
            pending = [*self.rt.decisions, *self.rt.host.decisions]
            self.rt.decisions.clear()
            self.rt.host.decisions.clear()
            self.decision_events(pending, {"origin": "startup"})
            answer = await self._loop(history)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                self._finish_failed(AgentFailure("the run was cancelled", code="RUN_CANCELLED"))
            raise
        except MossError as err:
            summary = self._finish_failed(err)
            raise AgentFailure(
                err.message,
                code=err.code if err.code in _RUN_CODES else "RUN_FAILED",
                details={**err.details, "session": self.session_id, "run": self.run_id, "cause": err.code, "cost_usd": summary.cost_usd},
                hint=err.hint,
            ) from None
        except Exception as exc:
            self._finish_failed(MossError(f"internal error: {type(exc).__name__}: {exc}"))
            raise
        return self._finish_succeeded(answer)

    # ------------------------------------------------------------- the loop

    async def _loop(self, earlier: Sequence[Event]) -> str:
        host = self.rt.host
        system = self._system_prompt(earlier)
        if self._should_orient(earlier):
            system = self._system_prompt(earlier, await self._orient())
        tools = host.model_tools()
        tools_tokens = window.estimate_tokens(tools)  # once per run: the schemas do not change between steps
        history = window.history_turns(earlier)
        current: list[window.Message] = [window.user_text(self.prompt)]
        if self.prelude is not None:
            opening = await self.prelude(self)
            if opening.answer is not None:
                return opening.answer
            if opening.text:
                current = [window.user_text(f"{self.prompt}\n\n{opening.text}")]
        while True:
            self.steps += 1
            built = window.assemble(system=system, tools=tools, history=history, current=current, budget=self.llm.max_context_tokens, tools_tokens=tools_tokens)
            self.emit(
                "prompt.built",
                {
                    "step": self.steps,
                    "messages": len(built.messages),
                    "turns_kept": built.turns_kept,
                    "turns_dropped": built.turns_dropped,
                    "estimated_tokens": built.estimated_tokens,
                    "budget": self.llm.max_context_tokens,
                    "over_budget": built.over_budget,
                    "system_chars": len(system),
                    "tools": len(tools),
                    "max_tokens": self.llm.max_response_tokens,
                },
            )
            coalescer = DeltaCoalescer(self.emit, self.steps)

            # Both callbacks run during this step's model call, while `coalescer` is this step's.
            def on_text(text: str, attempt: int) -> None:
                coalescer.add(text, attempt)  # noqa: B023
                self.output.text(text)

            def on_retry(retry: Retry) -> None:
                coalescer.flush()  # noqa: B023
                self.emit(
                    "model.retried",
                    {"step": self.steps, "attempt": retry.attempt, "reason": retry.reason, "status": retry.status, "delay_seconds": round(retry.delay, 3)},
                )
                self.output.note(f"model: {retry.reason}; retrying in {retry.delay:.1f}s")

            request = ModelRequest(self.llm.model, system, built.messages, tools, self.llm.max_response_tokens)
            assert self.rt.model is not None, "a run always opens its runtime with a model"
            reply, attempt = await self.rt.model.complete(request, on_text=on_text, on_retry=on_retry)
            self.usage = self.usage + reply.usage
            self.emit(
                "assistant.message",
                {
                    "step": self.steps,
                    "attempt": attempt,
                    "content": list(reply.content),
                    "stop_reason": reply.stop_reason,
                    "usage": model.usage_to_dict(reply.usage),
                },
            )
            calls = reply.tool_calls
            if not calls:
                return reply.text
            if self.tool_steps >= self.llm.max_steps:
                raise AgentFailure(
                    f"the model asked for tools again after {self.tool_steps} tool steps; llm.max_steps is {self.llm.max_steps}",
                    code="STEP_LIMIT",
                    details={"max_steps": self.llm.max_steps},
                    hint="raise llm.max_steps in .moss/agent.toml, or split the task",
                )
            self.tool_steps += 1
            if reply.text:
                self.output.text("\n")
            results = [await self._call(call, self.steps) for call in calls]
            current.append({"role": "assistant", "content": list(reply.content)})
            current.append({"role": "user", "content": results})

    async def _call(self, call: Any, step: int, *, origin: str | None = None) -> dict[str, Any]:
        """Run one tool call through the gate; returns the tool_result block for the model."""
        self.tool_calls += 1
        host = self.rt.host
        route = host.find(call.name)
        extra = {"origin": origin} if origin else {}
        base = {"step": step, "call_id": call.id, **extra}
        self.emit(
            "tool.requested",
            {
                **base,
                "name": call.name,
                "server": route.server.name if route else None,
                "tool": route.qualified if route else call.name,
                "arguments": model.summarize_arguments(dict(call.input)),
            },
        )
        if route is None:
            return self._failed(base, call.name, NotFound(f"no tool named {call.name!r}", details={"tool": call.name}), 0)
        problems = schema.check_arguments(dict(call.input), route.input_schema)
        if problems:
            listed = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
            return self._failed(base, route.qualified, InvalidRequest(f"invalid arguments for {route.qualified}: {listed}", details={"errors": problems}), 0)
        decisions = host.decide(route, call.input)
        self.decision_events(decisions, {**base, "tool": route.qualified})
        denied = [decision for decision in decisions if not decision.granted]
        if denied:
            self.output.note(f"tool {route.qualified}: denied ({denied[0].reason})")
            reasons = "; ".join(decision.reason for decision in denied)
            error = Conflict(
                f"{route.qualified} is not allowed: {reasons}",
                code="CAPABILITY_DENIED",
                status=403,
                details={"decisions": [policy.decision_to_dict(d) for d in denied]},
            )
            return self._failed(base, route.qualified, error, 0)
        timeout = host.timeout_of(route)
        self.emit("tool.invoked", {**base, "server": route.server.name, "tool": route.qualified, "timeout_seconds": timeout})
        self.output.note(f"tool {route.qualified} …")
        started = time.monotonic()
        meta = {META_KEY: {"session": self.session_id, "run": self.run_id, "call": call.id}}
        try:
            answer = await host.call(route, call.input, meta=meta)
        except MossError as err:
            return self._failed(base, route.qualified, err, int((time.monotonic() - started) * 1000))
        text, truncated, size = model.cap_text(answer.text, self.rt.settings.max_output_bytes)
        common = {**base, "tool": route.qualified, "duration_ms": answer.duration_ms, "bytes": size, "truncated": truncated, "output": text}
        if answer.is_error:
            first = (answer.text.strip().splitlines() or ["(no message)"])[0][:300]
            self.emit("tool.failed", {**common, "code": "TOOL_FAILED", "message": first})
            return window.tool_result(call.id, text, is_error=True)
        self.emit("tool.succeeded", common)
        return window.tool_result(call.id, text, is_error=False)

    async def call_tool(self, route: Route, arguments: Mapping[str, Any], *, origin: str) -> RuntimeCall:
        """Call a tool for the runtime itself (not for the model): through the same checks,
        gate, limits and events as the model's calls, marked with `origin`; not counted among
        the model's tool calls."""
        from moss_files.agent.stream import ToolCall

        self.runtime_calls += 1
        call = ToolCall(f"{origin}-{self.run_id}-{self.runtime_calls}", route.name, dict(arguments))
        before = self.tool_calls
        result = await self._call(call, 0, origin=origin)
        self.tool_calls = before
        return RuntimeCall(not result.get("is_error"), str(result.get("content") or ""))

    def _failed(self, base: Mapping[str, Any], tool: str, err: MossError, duration_ms: int) -> dict[str, Any]:
        text = f"{err.code}: {err.message}"
        self.emit("tool.failed", {**base, "tool": tool, "code": err.code, "message": err.message, "duration_ms": duration_ms, "output": text})
        return window.tool_result(str(base["call_id"]), text, is_error=True)

    # ------------------------------------------------------------- orientation

    def _should_orient(self, earlier: Sequence[Event]) -> bool:
        if not self.llm.orient or self.origin != "user":
            return False
        return not any(event.kind == "session.oriented" for event in earlier)

    def _system_prompt(self, earlier: Sequence[Event], orientation: str | None = None) -> str:
        if orientation is None:
            found = [event for event in earlier if event.kind == "session.oriented"]
            orientation = str(found[-1].data.get("text") or "") if found else ""
        parts = [BASE_SYSTEM.format(root=self.rt.ctx.root)]
        if orientation:
            parts.append(orientation)
        if self.llm.system_prompt.strip():
            parts.append(self.llm.system_prompt.strip())
        return "\n\n".join(parts)

    async def _orient(self) -> str:
        """Read where things stand through the moss server's tools (each call through the gate
        and logged), and keep the summary as `session.oriented`."""
        from moss_files.agent.stream import ToolCall

        moss = next((server for server in self.rt.settings.servers if server.tool_map == "moss" and server.enabled), None)
        wanted: tuple[tuple[str, dict[str, Any], str], ...] = (
            ("moss.latest", {"include_text": True}, "Latest handoff capsule"),
            ("cstack.status", {}, "cstack status (CURRENT.md)"),
            ("needlecast.inbox", {"unread": True}, "Unread messages"),
        )
        sections: list[str] = []
        sources: list[dict[str, Any]] = []
        for number, (tool, arguments, title) in enumerate(wanted, start=1):
            route = None if moss is None else (self.rt.host.find(f"{moss.name}.{tool}") or self.rt.host.find(f"{moss.name}.{tool.replace('.', '_')}"))
            if route is None:
                sources.append({"tool": tool, "ok": False, "reason": "not served"})
                continue
            call = ToolCall(f"orient-{self.run_id}-{number}", route.name, arguments)
            before = self.tool_calls
            result = await self._call(call, 0, origin="orient")
            self.tool_calls = before  # orientation calls are the runtime's, not the model's
            ok = not result.get("is_error")
            sources.append({"tool": route.qualified, "ok": ok})
            if ok:
                sections.append(f"### {title}\n{_orientation_text(tool, str(result['content']))}")
        text = ""
        if sections:
            text = "## Where things stand (read from the workspace when this session began)\n\n" + "\n\n".join(sections)
        self.emit("session.oriented", {"sources": sources, "chars": len(text), "text": text})
        return text

    # ------------------------------------------------------------- ends

    def _close_interrupted(self, events: Sequence[Event]) -> None:
        """Record the runs a dead process left open (this run holds the lock, so no other
        run is alive)."""
        for run in model.summarize_runs(events):
            if run.status != "running":
                continue
            stamp = model.stamp_ms(self.rt.ctx.now())
            event = Event(
                self.rt.ctx.new_ulid(),
                stamp,
                "run.failed",
                self.session_id,
                run.id,
                {
                    "code": "RUN_INTERRUPTED",
                    "message": "the process running this run ended before the run did",
                    **model.usage_to_dict(run.usage),
                    "cost_usd": self._cost(run.usage),
                },
            )
            self.rt.store.append(event)
            closed = model.summarize_runs([*events, event])
            summary = next(r for r in closed if r.id == run.id)
            self._record_end(summary)

    def _cost(self, usage: Usage) -> float | None:
        return costs.cost_usd(usage, costs.price_for(self.llm.model, self.llm.prices))

    def _finish_succeeded(self, answer: str) -> RunSummary:
        self.emit(
            "run.succeeded",
            {
                "steps": self.steps,
                "tool_steps": self.tool_steps,
                "tool_calls": self.tool_calls,
                **model.usage_to_dict(self.usage),
                "cost_usd": self._cost(self.usage),
                "answer_chars": len(answer),
            },
        )
        return self._summary()

    def _finish_failed(self, err: MossError) -> RunSummary:
        self.emit(
            "run.failed",
            {
                "code": err.code,
                "message": err.message,
                "steps": self.steps,
                "tool_calls": self.tool_calls,
                **model.usage_to_dict(self.usage),
                "cost_usd": self._cost(self.usage),
            },
        )
        return self._summary()

    def _summary(self) -> RunSummary:
        events = self.rt.store.read_events(self.session_id).events
        summary = next(run for run in model.summarize_runs(events) if run.id == self.run_id)
        self._record_end(summary)
        return summary

    def _record_end(self, run: RunSummary) -> None:
        store = self.rt.store
        session = store.read_session(self.session_id)
        changes = {
            "status": "idle",
            "current_run": None,
            "updated": self.rt.ctx.stamp(),
            "runs": session.runs + 1,
            "input_tokens": session.usage.input_tokens + run.usage.input_tokens,
            "output_tokens": session.usage.output_tokens + run.usage.output_tokens,
            "cache_read_tokens": session.usage.cache_read_tokens + run.usage.cache_read_tokens,
            "cache_write_tokens": session.usage.cache_write_tokens + run.usage.cache_write_tokens,
            "cost_usd": model.add_cost(session.cost_usd, run.cost_usd),
        }
        store.update_session(self.session_id, changes, section=model.render_run_section(run))


_RUN_CODES = frozenset({"MODEL_ERROR", "STEP_LIMIT", "RUN_CANCELLED", "TOOL_TIMEOUT", "SERVER_UNAVAILABLE", "TOOL_FAILED", "RUN_FAILED"})


def _orientation_text(tool: str, text: str) -> str:
    """The part of an orientation tool's answer worth a model's context, capped."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if tool == "moss.latest" and isinstance(data, dict):
        item = data.get("item")
        if not item:
            return "(no capsule yet)"
        if isinstance(item, dict):
            head = f"{item.get('name') or item.get('id')} ({item.get('updated_at') or item.get('updated') or ''})".strip()
            return f"{head}\n{str(item.get('capsule_text') or item.get('text') or '')[:ORIENT_PART_CHARS]}"
    if tool == "needlecast.inbox" and isinstance(data, dict):
        messages = data.get("messages") or []
        if not messages:
            return "(none)"
        lines = []
        for entry in messages[:20]:
            message = entry.get("message", {}) if isinstance(entry, dict) else {}
            body = " ".join(str(message.get("body", "")).split())[:200]
            lines.append(f"- {message.get('id', '?')} from {message.get('from', '?')}: {body}")
        return "\n".join(lines)
    compact = json.dumps(data, ensure_ascii=False) if data is not None else text
    return compact[:ORIENT_PART_CHARS]
