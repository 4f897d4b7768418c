"""The agent runtime's use cases: init, run, chat, sessions, logs, mcp list and mcp call, each
returning the JSON-ready dict `moss agent ... --json` prints. Shell layer.

Entry points pass the environment in (`environ`): the API key and the variables servers may
receive are read from it here, after the policy allowed each (`secrets_read`), and nowhere else.
The SDKs are imported when a use case needs them (the MCP client to talk to servers, the
Anthropic SDK only to run the model), so `moss agent sessions` and `logs` start fast.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from typing import Any

import anyio

from moss_files.agent import model, paths, policy, schema
from moss_files.agent.model import Session
from moss_files.agent.policy import Policy
from moss_files.agent.runtime import HANDOFF_PROMPT, Output, Runtime, Silent, ToolHost
from moss_files.agent.settings import AGENT_TOML, AGENT_TOML_TEMPLATE, AgentSettings, parse_settings
from moss_files.agent.store import Redactor, SessionStore, open_server_log
from moss_files.foundation import arguments, fs
from moss_files.foundation.context import Context
from moss_files.foundation.errors import AgentFailure, Conflict, InvalidDocument, InvalidRequest, MossError, NotFound

# --------------------------------------------------------------------------- settings and policy


def init(ctx: Context) -> dict[str, Any]:
    """Write `.moss/agent.toml` with every setting and its restrictive default; an existing
    file is left as it is. Returns {path, created}."""
    path = ctx.root / AGENT_TOML
    created = fs.create_exclusive(path, AGENT_TOML_TEMPLATE.encode("utf-8"))
    return {"path": AGENT_TOML, "created": created}


def load_settings(ctx: Context) -> AgentSettings:
    """The workspace's agent settings (the defaults when it has no `.moss/agent.toml`).
    Raises InvalidDocument for a file that is not valid TOML or has a bad value."""
    path = ctx.root / AGENT_TOML
    snapshot = fs.read_snapshot(path)
    if snapshot.data is None:
        return AgentSettings()
    try:
        text = snapshot.data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidDocument("agent settings are not valid UTF-8", code="INVALID_ENCODING", path=AGENT_TOML) from None
    return parse_settings(text, AGENT_TOML)


def load_policy(ctx: Context, settings: AgentSettings) -> Policy:
    """The capability policy of the settings, its roots resolved on disk."""
    root = paths.resolve(settings.workspace_root, str(ctx.root))
    try:
        return policy.policy_from_table(settings.policy, settings.secrets, root=root, resolve=paths.resolve, where="policy", toolkit_root=str(ctx.root))
    except ValueError as exc:
        raise InvalidDocument(str(exc), code="SCHEMA_ERROR", path=settings.path or AGENT_TOML) from None


def open_store(ctx: Context, settings: AgentSettings, secrets: Sequence[str] = ()) -> SessionStore:
    return SessionStore(ctx.root, settings.storage, redactor=Redactor(secrets))


# --------------------------------------------------------------------------- runtime


@contextmanager
def redacting(ctx: Context, environ: Mapping[str, str]) -> Iterator[None]:
    """Errors leaving the block carry no secret the runtime could have read: the API key and
    the variables passed on to servers are replaced in their message, details and hint."""
    try:
        yield
    except MossError as err:
        raise Redactor(_secret_values(ctx, environ)).error(err) from None
    except Exception as exc:
        redactor = Redactor(_secret_values(ctx, environ))
        raise MossError(f"internal error: {type(exc).__name__}: {redactor.text(str(exc))}", hint="set MOSS_DEBUG=1 for the traceback") from exc


def _secret_values(ctx: Context, environ: Mapping[str, str]) -> list[str]:
    try:
        settings = load_settings(ctx)
    except MossError:
        settings = AgentSettings()
    names = {settings.llm.api_key_env, *(key for server in settings.servers for key in server.env_from)}
    return [environ[name] for name in names if environ.get(name)]


class _Loader:
    """Builds the model client on a thread while the MCP servers start: importing the SDK takes
    about a second, which this overlaps with the servers' own start-up."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._work, name="moss-agent-model", daemon=True)
        self.thread.start()

    def _work(self) -> None:
        try:
            self.value = self.make()
        except BaseException as exc:  # handed to the loop's thread, raised there
            self.error = exc

    async def result(self) -> Any:
        await anyio.to_thread.run_sync(self.thread.join)
        if self.error is not None:
            raise self.error
        return self.value


def api_key(settings: AgentSettings, gate: Policy, environ: Mapping[str, str]) -> tuple[str, policy.Decision]:
    """The model's API key, read from the environment once the policy allowed it.

    Raises Conflict CAPABILITY_DENIED when secrets_read denies it, InvalidRequest
    API_KEY_MISSING when the variable is not set."""
    name = settings.llm.api_key_env
    decision = policy.check_secret(gate, name)
    if not decision.granted:
        raise Conflict(
            f"the policy does not let the runtime read {name}: {decision.reason}",
            code="CAPABILITY_DENIED",
            status=403,
            details={"decisions": [policy.decision_to_dict(decision)]},
            hint=f"add {name!r} to [secrets] keys in {AGENT_TOML}",
        )
    key = environ.get(name, "")
    if not key.strip():
        raise InvalidRequest(f"{name} is not set", code="API_KEY_MISSING", hint=f"export {name}=... (the key is read from the environment only)")
    return key.strip(), decision


@asynccontextmanager
async def open_runtime(
    ctx: Context,
    *,
    environ: Mapping[str, str],
    servers: Sequence[str] | None = None,
    with_model: bool = True,
    connect_timeout: float = 30.0,
    adjust: Callable[[AgentSettings], AgentSettings] | None = None,
) -> AsyncIterator[Runtime]:
    """The settings, policy, store, MCP servers (all, or those named) and model of a workspace,
    open for runs; closed (servers stopped) on exit. `adjust` changes the settings for this
    runtime only (a role run's servers and system prompt)."""
    settings = load_settings(ctx)
    if adjust is not None:
        settings = adjust(settings)
    gate = load_policy(ctx, settings)
    secrets: list[str] = []
    decisions: list[policy.Decision] = []
    loader = None
    if with_model:
        key, decision = api_key(settings, gate, environ)
        secrets.append(key)
        decisions.append(decision)
        llm = settings.llm
        base_url = llm.base_url or environ.get("ANTHROPIC_BASE_URL") or None

        def make_model() -> Any:
            from moss_files.agent.llm import AnthropicModel

            return AnthropicModel(api_key=key, base_url=base_url, timeout=llm.request_timeout_seconds, retries=llm.retries, retry_base=llm.retry_base_seconds)

        loader = _Loader(make_model)
    chosen = settings
    if servers is not None:
        unknown = sorted(set(servers) - {server.name for server in settings.servers})
        if unknown:
            raise InvalidRequest(f"no MCP server named {', '.join(unknown)} in {AGENT_TOML}", details={"servers": [server.name for server in settings.servers]})
        from dataclasses import replace

        chosen = replace(settings, servers=tuple(server for server in settings.servers if server.name in servers))
    secrets.extend(environ[key] for server in chosen.servers for key in server.env_from if key in environ)
    store = open_store(ctx, settings, secrets)
    host = ToolHost(
        chosen, gate, root=ctx.root, environ=environ, sleeve=ctx.sleeve, errlog=lambda name: open_server_log(ctx.root, name), connect_timeout=connect_timeout
    )
    async with AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(host)
        finally:
            llm_client = await loader.result() if loader is not None else None
            if llm_client is not None:
                stack.push_async_callback(llm_client.aclose)
        yield Runtime(ctx, settings, gate, store, host, llm_client, decisions)


def create_session(ctx: Context, runtime: Runtime, prompt: str) -> str:
    """A new session titled after its first prompt; returns its id."""
    session_id = ctx.new_ulid()
    stamp = ctx.stamp()
    session = Session(session_id, model.title_from(prompt), stamp, stamp, runtime.settings.llm.model)
    event = runtime.new_event("session.created", session_id, None, {"title": session.title, "model": session.model})
    runtime.store.create(session, event)
    return session_id


def run(
    ctx: Context,
    prompt: str,
    *,
    session: str | None = None,
    wait: float = 0.0,
    handoff: bool = False,
    environ: Mapping[str, str],
    output: Output | None = None,
    catch_sigint: bool = False,
) -> dict[str, Any]:
    """One run of a prompt, in a new session or the one `session` names (an id, an
    unambiguous prefix, or `last`); with `handoff`, a second run writes the handoff capsule and
    memory. With `catch_sigint` (the CLI), Ctrl-C cancels the run, which is recorded as
    RUN_CANCELLED; a second Ctrl-C stops at once.

    Returns {session, run, handoff_run}. Raises AgentFailure (exit 9) with details {session, run}
    when the run fails, Conflict SESSION_BUSY when another run keeps the session past `wait`,
    KeyboardInterrupt after an interrupt.
    """
    text = arguments.required(prompt, "prompt")
    if wait < 0:
        raise arguments.refuse("wait", "must be 0 or more seconds")
    shown = output or Silent()
    stop = Interrupt()

    async def work() -> dict[str, Any] | None:
        with ExitStack() as signals:
            if catch_sigint:
                signals.enter_context(stop.on_sigint())
            return await attempt()

    async def attempt() -> dict[str, Any] | None:
        async with open_runtime(ctx, environ=environ) as runtime:
            if stop.fired:
                return None
            session_id = runtime.store.resolve_session(session) if session else create_session(ctx, runtime, text)
            with anyio.CancelScope() as scope:
                stop.scope = scope
                summary = await runtime.run(session_id, text, wait=wait, output=shown)
                after = await runtime.run(session_id, HANDOFF_PROMPT, wait=wait, output=shown, origin="handoff") if handoff else None
                return {
                    "session": _session_dict(runtime.store, session_id),
                    "run": model.run_to_dict(summary),
                    "handoff_run": model.run_to_dict(after) if after else None,
                }
            stop.scope = None
            return None

    with redacting(ctx, environ):
        result = anyio.run(work)
    if result is None:
        raise KeyboardInterrupt
    return result


class Interrupt:
    """Ctrl-C, as the entry point's signal handler reports it: cancels the run in progress
    (an anyio cancel scope, so the run records RUN_CANCELLED and the servers still close in
    order), and remembers that it happened. `fire` is False when no run was in progress."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.fired = False

    def fire(self) -> bool:
        self.fired = True
        if self.scope is None:
            return False
        self.scope.cancel()
        return True

    @contextmanager
    def on_sigint(self, *, idle: Callable[[], None] | None = None) -> Iterator[None]:
        """Route SIGINT to `fire` through the running event loop, so the cancellation lands
        between two steps of the loop. With no run in progress: `idle` is called when given
        (chat: the prompt stays), else the first Ctrl-C is remembered (the run will not start)
        and a second one stops at once with KeyboardInterrupt."""
        import asyncio
        import signal

        loop = asyncio.get_running_loop()
        idle_presses = [0]

        def handler() -> None:
            if self.fire():
                return
            if idle is not None:
                idle()
                return
            idle_presses[0] += 1
            if idle_presses[0] > 1:
                raise KeyboardInterrupt

        loop.add_signal_handler(signal.SIGINT, handler)
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)


QUIT_WORDS = frozenset({"quit", "exit"})


async def chat(
    ctx: Context,
    *,
    environ: Mapping[str, str],
    session: str | None,
    read_line: Callable[[], Awaitable[str | None]],
    output: Output,
    interrupt: Interrupt,
    offer_handoff: Callable[[], Awaitable[bool]],
    wait: float = 0.0,
) -> dict[str, Any]:
    """An interactive session: each line read is a run, until `quit`, `exit` or the end of
    input. A fired `interrupt` cancels the run in progress (recorded as RUN_CANCELLED), not the
    session. At the end, when `offer_handoff` agrees, one more run writes the handoff.

    Returns {session, runs}."""
    runs: list[dict[str, Any]] = []
    async with open_runtime(ctx, environ=environ) as runtime:
        session_id = runtime.store.resolve_session(session) if session else None
        connected = [s for s in runtime.host.statuses() if s["ok"]]
        output.note(
            f"model {runtime.settings.llm.model} · {len(runtime.host.routes)} tools from {len(connected)} server(s)"
            + (f" · session {session_id}" if session_id else "")
            + " · quit or exit to leave, Ctrl-C cancels a run"
        )
        for status in runtime.host.statuses():
            if not status["ok"]:
                output.note(f"server {status['name']}: {status['error']['code']}: {status['error']['message']}")
        while True:
            line = await read_line()
            if line is None or line.strip().lower() in QUIT_WORDS:
                break
            if not line.strip():
                continue
            if session_id is None:
                session_id = create_session(ctx, runtime, line)
                output.note(f"session {session_id}")
            runs.append(await _chat_turn(runtime, session_id, line.strip(), output, interrupt, wait=wait, origin="user"))
        if session_id is not None and runs and await offer_handoff():
            runs.append(await _chat_turn(runtime, session_id, HANDOFF_PROMPT, output, interrupt, wait=wait, origin="handoff"))
        if session_id is None:
            return {"session": None, "runs": runs}
        runtime.store.append(runtime.new_event("session.ended", session_id, None, {"runs": len(runs)}))
        runtime.store.update_session(session_id, {"status": "ended", "updated": ctx.stamp()})
        return {"session": _session_dict(runtime.store, session_id), "runs": runs}


async def _chat_turn(runtime: Runtime, session_id: str, prompt: str, output: Output, interrupt: Interrupt, *, wait: float, origin: str) -> dict[str, Any]:
    with anyio.CancelScope() as scope:
        interrupt.scope = scope
        try:
            summary = await runtime.run(session_id, prompt, wait=wait, output=output, origin=origin)
            output.note(_cost_line(summary))
            return model.run_to_dict(summary)
        except AgentFailure as err:
            output.note(f"run failed: {err.code}: {err.message}")
            return _failed_run(runtime, session_id, err)
        except Conflict as err:
            output.note(f"{err.code}: {err.message}")
            return {"id": None, "session": session_id, "status": "failed", "error": {"code": err.code, "message": err.message}}
        finally:
            interrupt.scope = None
    output.note("run cancelled")
    events = runtime.store.read_events(session_id).events
    cancelled = [r for r in model.summarize_runs(events) if r.error and r.error.get("code") == "RUN_CANCELLED"]
    return model.run_to_dict(cancelled[-1]) if cancelled else {"id": None, "session": session_id, "status": "failed"}


def _failed_run(runtime: Runtime, session_id: str, err: AgentFailure) -> dict[str, Any]:
    run_id = err.details.get("run")
    for summary in model.summarize_runs(runtime.store.read_events(session_id).events):
        if summary.id == run_id:
            return model.run_to_dict(summary)
    return {"id": run_id, "session": session_id, "status": "failed", "error": {"code": err.code, "message": err.message}}


def _cost_line(summary: model.RunSummary) -> str:
    cost = "cost unknown" if summary.cost_usd is None else f"${summary.cost_usd:.4f}"
    return f"[{summary.usage.input_tokens} in · {summary.usage.output_tokens} out · {cost} · {summary.steps} step(s)]"


def _session_dict(store: SessionStore, session_id: str) -> dict[str, Any]:
    session = store.read_session(session_id)
    status = "interrupted" if session.status == "running" and not store.is_running(session_id) else None
    return model.session_to_dict(session, status=status)


# --------------------------------------------------------------------------- reading sessions


def sessions(ctx: Context, *, limit: int | None = None) -> dict[str, Any]:
    """The sessions, newest first (only their files are read, never the event logs):
    {sessions, count, total}. A session whose run died shows status `interrupted`."""
    settings = load_settings(ctx)
    store = open_store(ctx, settings)
    ids = list(reversed(store.session_ids()))
    shown = ids[: arguments.count(limit, "limit", default=len(ids) or 1, maximum=None)] if ids else []
    return {"sessions": [_session_dict(store, ident) for ident in shown], "count": len(shown), "total": len(ids)}


def logs(ctx: Context, *, session: str | None = None, run: str | None = None, kinds: Sequence[str] = ()) -> dict[str, Any]:
    """The events of a session or of a run (ids or unambiguous prefixes), optionally of some
    kinds only (`tool.failed`, or a family: `tool`, `capability.*`).

    Returns {session, run, events, count, problems}: lines that are not events (a torn last
    line after a crash) are listed in `problems` and skipped.
    """
    if (session is None) == (run is None):
        raise InvalidRequest("give exactly one of --session or --run", details={"session": session, "run": run})
    wanted = model.check_kinds(kinds)
    settings = load_settings(ctx)
    store = open_store(ctx, settings)
    if run is not None:
        session_id, run_id = store.resolve_run(run)
    else:
        session_id, run_id = store.resolve_session(session or ""), None
    log = store.read_events(session_id)
    events = model.filter_events(log.events, run=run_id, kinds=wanted)
    return {
        "session": session_id,
        "run": run_id,
        "events": [model.event_to_dict(event) for event in events],
        "count": len(events),
        "problems": [{"line": p.line, "code": p.code, "message": p.message, "path": store.relpath(store.events_path(session_id))} for p in log.problems],
    }


# --------------------------------------------------------------------------- mcp list and call


def mcp_list(ctx: Context, *, environ: Mapping[str, str]) -> dict[str, Any]:
    """Connect to every configured MCP server and list its tools, with the capabilities each
    needs by the policy's rules: {servers: [{name, transport, ok, server, error, tools: [...]}]}."""

    async def work() -> dict[str, Any]:
        async with open_runtime(ctx, environ=environ, with_model=False) as runtime:
            host = runtime.host
            out = []
            for status in host.statuses():
                tools = []
                for route in host.routes.values():
                    if route.server.name != status["name"]:
                        continue
                    rule = _rule_of(runtime, route)
                    tools.append(
                        {
                            "name": route.tool,
                            "model_name": route.name,
                            "description": route.description,
                            "read_only": route.read_only,
                            "needs": list(rule.needs) if rule else None,
                            "rule": rule.source if rule else None,
                        }
                    )
                out.append({**status, "tools": tools})
            return {"servers": out}

    with redacting(ctx, environ):
        return anyio.run(work)


def _rule_of(runtime: Runtime, route: Any) -> policy.ToolRule | None:
    name = route.qualified
    found = next((rule for rule in runtime.policy.rules if policy.tool_matches(name, rule.pattern)), None)
    return found or runtime.host.rule_for(route)


def mcp_call(
    ctx: Context, target: str, *, assignments: Sequence[str] = (), json_arguments: Mapping[str, Any] | None = None, environ: Mapping[str, str]
) -> dict[str, Any]:
    """Call one tool (`SERVER.TOOL`) exactly as the agent would: arguments checked against its
    schema, then the capability gate, then the call with its timeout and output cap.

    `assignments` are `key=value` texts read by each argument's declared type. Returns
    {server, tool, decisions, is_error, text, structured, bytes, truncated, duration_ms}.
    Raises Conflict CAPABILITY_DENIED, AgentFailure TOOL_FAILED (the tool answered an error),
    TOOL_TIMEOUT or SERVER_UNAVAILABLE, NotFound for an unknown tool.
    """
    server_name, dot, tool_name = arguments.required(target, "tool").partition(".")
    if not dot or not tool_name:
        raise arguments.refuse("tool", "must be SERVER.TOOL, for example moss.cstack.status", value=target)

    async def work() -> dict[str, Any]:
        async with open_runtime(ctx, environ=environ, servers=[server_name], with_model=False) as runtime:
            host = runtime.host
            connection = host.connections[0]
            if connection.error is not None:
                raise connection.error
            route = host.find(target)
            if route is None:
                raise NotFound(f"{server_name} has no tool {tool_name!r}", details={"tools": [t.name for t in connection.tools]})
            try:
                values = dict(json_arguments or {})
                values.update(schema.parse_assignments(list(assignments), route.input_schema))
            except ValueError as exc:
                raise arguments.refuse("arg", str(exc)) from None
            problems = schema.check_arguments(values, route.input_schema)
            if problems:
                listed = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
                raise InvalidRequest(f"invalid arguments for {target}: {listed}", details={"errors": problems})
            decisions = host.decide(route, values)
            shown = [policy.decision_to_dict(decision) for decision in decisions]
            denied = [decision for decision in decisions if not decision.granted]
            if denied:
                raise Conflict(
                    f"{target} is not allowed: {'; '.join(d.reason for d in denied)}",
                    code="CAPABILITY_DENIED",
                    status=403,
                    details={"decisions": shown},
                    hint=f"the policy is in {AGENT_TOML}",
                )
            answer = await host.call(route, values)
            text, truncated, size = model.cap_text(answer.text, runtime.settings.max_output_bytes)
            if answer.is_error:
                raise AgentFailure(
                    f"{target} answered an error: {(answer.text.strip().splitlines() or [''])[0][:300]}",
                    code="TOOL_FAILED",
                    details={"text": text[:4000], "structured": answer.structured},
                )
            return {
                "server": server_name,
                "tool": route.tool,
                "decisions": shown,
                "is_error": False,
                "text": text,
                "structured": answer.structured,
                "bytes": size,
                "truncated": truncated,
                "duration_ms": answer.duration_ms,
            }

    with redacting(ctx, environ):
        return anyio.run(work)
