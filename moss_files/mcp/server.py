"""The MCP server behind `moss serve`: tool sets, the registry their tools go through, and the
one translation of errors into MCP results. Entry layer; the only moss_files module (with the
`mcp_*` tool-set modules and `mcp_http`) that imports the `mcp` SDK, and only `moss serve`
imports it, so no other command pays for the SDK at start-up.

Tool sets. A tool set is one module with a `register(tools: ToolRegistry) -> None` function
and one row in `TOOL_SETS` below. `register` declares each tool with the `tools.tool(...)`
decorator over a plain function whose typed parameters become the input schema and whose body
calls the same use case the CLI calls and returns its dict:

    # moss_files/mcp_moe.py  (entry layer)
    def register(tools: ToolRegistry) -> None:
        ctx = tools.context  # the one foundation Context: root, clock, home, sleeve, actor

        @tools.tool("moe.claim", "Claim a task for a worker. Returns {task, worker}.",
                    destructive=False, idempotent=True)
        def claim(task: Annotated[str, Field(description="Task id.")], worker: str) -> dict[str, Any]:
            return board.claim(ctx, task, worker)

    # here:  ToolSet("moe", "moss_files.mcp_moe", "board: epics, tasks, workers, claims")

The module is imported only when its set is served (`--tools` / MOSS_MCP_TOOLS). A tool raises
MossError for domain errors and returns a JSON-ready dict; the registry does the rest:
the result is `structuredContent` plus the same JSON as text, a MossError becomes an isError
result carrying `error_body` (text `CODE: message` and the body), anything else becomes an
INTERNAL error whose cause goes only to the server's log. Arguments are checked against the
schema before the tool runs (types, required, unknown names) and rejected as INVALID_REQUEST.

Annotations are required on every tool and must be true of it: `read_only` (changes no file;
the derived, git-ignored search cache does not count), `destructive` (may overwrite or remove
what is in a file, rather than only add to it), `idempotent` (a repeat with the same arguments
changes nothing more). `openWorldHint` is always false: every tool works on local files.

Names. Tools are declared with the seeds' dotted names (`moss.store`); `names="underscore"`
serves them as `moss_store` for hosts whose model API refuses dots in function names (Codex,
Claude Desktop). Either spelling is accepted on a call. A workspace's `disabled_tools` setting
(`.moss/config.toml`) leaves the listed tools out. Arguments may be spelled as LoopFlow and its
spec spell them (`includeLinks`, `filters`, `next_session_should`): `spellings` brings them to
ours before they are checked, in one table for every tool.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from moss_files import __version__
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest, MossError, NotFound, error_body
from moss_files.mcp import spellings

if TYPE_CHECKING:
    from moss_files.agent.serve_gate import ServeGate

log = logging.getLogger("moss_files.mcp")

F = TypeVar("F", bound=Callable[..., Any])

NAME_STYLES = ("dotted", "underscore")


@dataclass(frozen=True, slots=True)
class ToolSet:
    """A named group of tools: the module whose `register(tools)` declares them, or (for the
    core set) `picks`, tools taken from other sets by name."""

    name: str
    module: str | None
    summary: str
    default: bool = False  # served when no --tools / MOSS_MCP_TOOLS is given
    picks: tuple[str, ...] = ()


META_TOOL = "moss.tools"
# What an agent needs in every session, and nothing more: every tools/list is in every request
# to the model, so the default list stays small (docs/mcp.md has its bytes), and `moss.tools`
# lists and enables the rest; a tool of another set may also be called by its name directly.
CORE_TOOLS = (
    "moss.store",
    "moss.fetch",
    "moss.latest",
    "loop_scan",
    "loop_expand",
    "loop_remember",
    "cstack.status",
    "cstack.ready",
    "cstack.add",
    "cstack.start",
    "cstack.done",
    "cstack.remember",
    "needlecast.inbox",
    "needlecast.read",
    "needlecast.send",
    "needlecast.wait",
)

TOOL_SETS: dict[str, ToolSet] = {
    toolset.name: toolset
    for toolset in (
        ToolSet("core", None, "the tools every session needs, and moss.tools to enable the other sets", default=True, picks=CORE_TOOLS),
        ToolSet("moss", "moss_files.mcp.tools.moss", "context capsules: store, fetch, update, list, compose, export/import"),
        ToolSet("capsule", "moss_files.mcp.tools.capsule", "the moss set's tools under Moss's newest names: capsule_store, capsule_search, ..."),
        ToolSet("loop", "moss_files.mcp.tools.loop", "search every artifact (scan, expand, timeline), sessions and insights"),
        ToolSet("share", "moss_files.mcp.tools.share", "insight bundles between repositories (loop_export, loop_import) and feedback"),
        ToolSet("cstack", "moss_files.mcp.tools.cstack", "memory files: CURRENT.md status, PLAN.md tasks, MEMORY.md"),
        ToolSet("needlecast", "moss_files.mcp.tools.needlecast", "messages between sleeves: send, inbox, read, wait, outbox"),
        ToolSet("moe", "moss_files.mcp.tools.moe", "task board: epics, tasks, claims, plans, steps, QA, teams, activity"),
    )
}
# The modules the core set's tools come from.
_CORE_SOURCES = ("moss", "loop", "cstack", "needlecast")


def parse_sets(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """The tool sets named in `value` ("moss,loop", a list, "all"; None or "" for the default).

    Raises InvalidRequest naming an unknown set.
    """
    items = value.split(",") if isinstance(value, str) else list(value or ())
    wanted = [item.strip().lower() for item in items if item.strip()]
    if not wanted:
        return tuple(name for name, toolset in TOOL_SETS.items() if toolset.default)
    if "all" in wanted:
        return tuple(TOOL_SETS)
    unknown = [name for name in wanted if name not in TOOL_SETS]
    if unknown:
        raise InvalidRequest(
            f"unknown tool set {', '.join(map(repr, unknown))}; choose from {', '.join(TOOL_SETS)} or all",
            details={"unknown": unknown, "sets": list(TOOL_SETS)},
        )
    return tuple(dict.fromkeys(wanted))


def check_name_style(value: str | None) -> str:
    """`dotted` (default) or `underscore`. Raises InvalidRequest for anything else."""
    style = (value or "dotted").strip().lower()
    if style not in NAME_STYLES:
        raise InvalidRequest(f"names must be one of {', '.join(NAME_STYLES)}, not {value!r}")
    return style


def underscored(name: str) -> str:
    """`moss.fetch_many` -> `moss_fetch_many`."""
    return name.replace(".", "_")


# --------------------------------------------------------------------------- results


def _dump(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def ok_result(data: dict[str, Any]) -> CallToolResult:
    """A tool's dict as structured content, with the same JSON as text for hosts that show text."""
    return CallToolResult(content=[TextContent(type="text", text=_dump(data))], structured_content=data)


def error_result(err: MossError) -> CallToolResult:
    """An isError result: text `CODE: message` then the JSON body, the body as structured content."""
    body = error_body(err)
    text = f"{err.code}: {err.message}\n{_dump(body)}"
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=body, is_error=True)


def _run_tool(
    name: str, fn: Callable[..., dict[str, Any]], args: tuple[Any, ...], kwargs: dict[str, Any], unavailable: MossError | None = None
) -> CallToolResult:
    if unavailable is not None:
        return error_result(unavailable)
    try:
        return ok_result(fn(*args, **kwargs))
    except MossError as err:
        return error_result(err)
    except Exception:
        # A bug: the client learns only that it happened; the cause goes to the server's log.
        log.exception("tool %s failed unexpectedly", name)
        return error_result(MossError(f"internal error in {name}; the server's log has the details"))


def compact_schema(node: Any) -> Any:
    """A JSON schema without pydantic's `title`s and the docstrings of shared types (`$defs`),
    with `X | None = None` published as plain `X` (omitting it means none). Validation still
    uses the full model, so this only saves context."""
    if isinstance(node, list):
        return [compact_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$defs" and isinstance(value, dict):
            # A shared type's docstring: every property using it describes it already.
            out[key] = {name: {k: v for k, v in compact_schema(sub).items() if k != "description"} for name, sub in value.items()}
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: compact_schema(sub) for name, sub in value.items()}
        elif key == "title" and isinstance(value, str):
            continue
        else:
            out[key] = compact_schema(value)
    choices = out.get("anyOf")
    if isinstance(choices, list) and {"type": "null"} in choices and "default" in out and out["default"] is None:
        others = [choice for choice in choices if choice != {"type": "null"}]
        rest = {key: value for key, value in out.items() if key not in ("anyOf", "default")}
        out = {**others[0], **rest} if len(others) == 1 else {"anyOf": others, **rest}
    return out


# --------------------------------------------------------------------------- registry


class ToolRegistry:
    """What a tool set's `register` receives: the use cases' `context`, and `tool()` to declare
    tools. When the server runs outside a workspace, `unavailable` is the error every tool call
    answers with (the tools are still listed, so the client sees why rather than a closed
    connection)."""

    def __init__(self, context: Context, *, names: str = "dotted", disabled: Collection[str] = (), unavailable: MossError | None = None) -> None:
        self.context = context
        self.unavailable = unavailable
        self.names = check_name_style(names)
        self.disabled = frozenset(disabled)
        self.tools: list[Tool] = []
        self.schemas: dict[str, dict[str, Any]] = {}
        self.only: frozenset[str] | None = None  # while set, only these (dotted) names are declared

    def declares(self, name: str) -> bool:
        """Whether a tool named `name` (as the seeds spell it) is to be declared now: not
        switched off, not declared already, and among `only` when that is set."""
        if {name, underscored(name)} & self.disabled or self.served(name) in self.schemas:
            return False
        return self.only is None or name in self.only

    def served(self, name: str) -> str:
        """`name` as this registry serves it (dotted or underscored)."""
        return underscored(name) if self.names == "underscore" else name

    def register_set(self, toolset: ToolSet) -> None:
        """Declare the tools of one set (its module's, or the core set's picks)."""
        if toolset.module is not None:
            importlib.import_module(toolset.module).register(self)
            return
        self.only = frozenset(toolset.picks)
        try:
            for source in _CORE_SOURCES:
                importlib.import_module(str(TOOL_SETS[source].module)).register(self)
        finally:
            self.only = None

    def tool(self, name: str, description: str, *, read_only: bool = False, destructive: bool = False, idempotent: bool = False) -> Callable[[F], F]:
        """Declare a tool named `name` (dotted, as in the seeds) over the decorated function."""
        if read_only and destructive:
            raise ValueError(f"{name}: a read-only tool cannot be destructive")

        def decorator(fn: F) -> F:
            served = self.served(name)
            if not self.declares(name):
                return fn

            @functools.wraps(fn)
            def call(*args: Any, **kwargs: Any) -> CallToolResult:
                return _run_tool(served, fn, args, kwargs, self.unavailable)

            annotations = ToolAnnotations(
                read_only_hint=read_only,
                destructive_hint=destructive,
                idempotent_hint=True if read_only else idempotent,
                open_world_hint=False,
            )
            # functools.wraps lets the SDK read fn's parameters (their schema) through `call`;
            # structured_output=False keeps it from publishing an output schema for the dict.
            built = Tool.from_function(call, name=served, description=self._spell(description), annotations=annotations, structured_output=False)
            built.parameters = json.loads(self._spell(json.dumps(compact_schema(built.parameters))))
            self.tools.append(built)
            self.schemas[served] = built.parameters
            return fn

        return decorator

    def _spell(self, text: str) -> str:
        """Tool names mentioned in descriptions, spelled the way this server serves them."""
        return _MENTION.sub(r"\1_\2", text) if self.names == "underscore" else text


_MENTION = re.compile(r"\b(moss|cstack|needlecast|moe)\.(\w+)")


class MossMCPServer(MCPServer):
    """MCPServer whose argument errors and unknown tools are answered like domain errors, and
    whose every call passes the workspace's gate (policy and audit log) when it has one."""

    def __init__(
        self,
        *args: Any,
        schemas: dict[str, dict[str, Any]],
        read_only: dict[str, bool] | None = None,
        gate: ServeGate | None = None,
        registry: ToolRegistry | None = None,
        enabled: Sequence[str] = (),
        dynamic: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.schemas = schemas
        self.read_only = read_only or {}
        self.gate = gate
        self.registry = registry
        self.enabled = list(enabled)
        self.dynamic = dynamic and registry is not None
        self.generation = 0  # counts the changes of the tool list
        self._sets_lock = threading.Lock()
        self._catalog: dict[str, str] | None = None
        if self.dynamic:
            self._announce_list_changes()

    def _announce_list_changes(self) -> None:
        """Say `tools.listChanged: true` in the handshake era's capabilities (the SDK says it
        only when told so at start-up; the 2026 era derives it from `subscriptions/listen`)."""
        lowlevel = self._lowlevel_server
        original = lowlevel.create_initialization_options

        def with_tool_changes(notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any) -> Any:
            return original(notification_options or NotificationOptions(tools_changed=True), *args, **kwargs)

        lowlevel.create_initialization_options = with_tool_changes  # type: ignore[method-assign]

    # ----------------------------------------------------------- tool sets at run time

    def install_declared(self) -> list[str]:
        """Serve every tool the registry declared and the server lacks; returns their names."""
        assert self.registry is not None
        # The SDK adds tools from functions only; these are built already (their schemas
        # compacted), so they go into its tool table as the constructor's `tools=` puts them.
        table = self._tool_manager._tools
        added = [tool for tool in self.registry.tools if tool.name not in table]
        for tool in added:
            table[tool.name] = tool
            self.read_only[tool.name] = bool(tool.annotations and tool.annotations.read_only_hint)
        if added:
            self.generation += 1
        return [tool.name for tool in added]

    def enable_sets(self, wanted: Sequence[str]) -> list[str]:
        """Serve the tools of the sets named in `wanted` ("all" for every set) that are not
        served yet; returns the names added. Raises InvalidRequest for an unknown set."""
        if self.registry is None:
            raise InvalidRequest("this server's tool sets are fixed")
        chosen = parse_sets(list(wanted)) if wanted else ()
        with self._sets_lock:
            for name in chosen:
                if name not in self.enabled:
                    self.registry.register_set(TOOL_SETS[name])
                    self.enabled.append(name)
            return self.install_declared()

    def set_of(self, name: str) -> str | None:
        """The tool set that holds the tool `name` (either spelling), None when none does."""
        assert self.registry is not None
        with self._sets_lock:
            if self._catalog is None:
                found: dict[str, str] = {}
                for toolset in TOOL_SETS.values():
                    if toolset.module is None:
                        continue
                    scratch = ToolRegistry(self.registry.context, names=self.registry.names, disabled=self.registry.disabled)
                    scratch.register_set(toolset)
                    for served in scratch.schemas:
                        found.setdefault(underscored(served), toolset.name)
                self._catalog = found
            return self._catalog.get(underscored(name))

    def sets_report(self, added: Sequence[str] = ()) -> dict[str, Any]:
        """What `moss.tools` answers: every set, whether it is served, and the tools just added."""
        return {
            "sets": [{"name": name, "summary": toolset.summary, "enabled": name in self.enabled} for name, toolset in TOOL_SETS.items()],
            "added": list(added),
            "served": len(self.schemas),
        }

    async def _reach(self, name: str, context: Any) -> None:
        """On a dynamic server, a call of a tool no served set holds enables the set that does."""
        if not self.dynamic or self._served_name(name) is not None:
            return
        toolset = await anyio.to_thread.run_sync(self.set_of, name)
        if toolset is not None:
            await anyio.to_thread.run_sync(self.enable_sets, [toolset])

    async def _tell_list_changed(self, context: Any) -> None:
        """notifications/tools/list_changed to the caller's session (handshake era) and to the
        `subscriptions/listen` streams (2026 era); best effort, as the protocol has it."""
        if context is None:
            return
        try:
            await context.request_context.session.send_tool_list_changed()
        except Exception:  # a closed stream, a transport without a back channel
            log.debug("tools/list_changed not sent to the session", exc_info=True)
        try:
            await context.notify_tools_changed()
        except Exception:
            log.debug("tools/list_changed not published", exc_info=True)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Run a tool through the gate: a call its policy denies is a CAPABILITY_DENIED result,
        and every call answered gets its audit line. The policy sees the arguments in the
        tool's own spelling (a path given as `outputPath` is checked as `output_path`). A call
        that changed the served tools (`moss.tools`, or a tool of a set not served yet)
        announces the new list."""
        generation = self.generation
        try:
            await self._reach(name, context)
            return await self._gated(name, arguments, context)
        finally:
            if self.generation != generation:
                await self._tell_list_changed(context)

    async def _gated(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        served = self._served_name(name)
        spelled = self._spelled(served, arguments)
        if self.gate is None:
            return await self._answer(name, served, spelled, context)
        started = time.monotonic()
        checked = spelled.arguments if isinstance(spelled, spellings.Normalized) else arguments
        refusal, decisions = self.gate.refusal(served or name, checked, read_only=self.read_only.get(served or name, False))
        code = "INTERNAL"
        try:
            result = error_result(refusal) if refusal is not None else await self._answer(name, served, spelled, context)
            code = _result_code(result)
            return result
        finally:
            record = functools.partial(
                self.gate.record,
                client=_client_of(context),
                name=served or name,
                arguments=arguments,
                meta=_meta_of(context),
                code=code,
                duration_ms=int((time.monotonic() - started) * 1000),
                decisions=decisions,
            )
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(record)

    def _spelled(self, served: str | None, arguments: dict[str, Any]) -> spellings.Normalized | InvalidRequest | None:
        """The call's arguments in the tool's own spelling (None for an unknown tool), or why
        they cannot be (two spellings of one argument that disagree)."""
        if served is None:
            return None
        try:
            return spellings.normalize(served, arguments, self.schemas[served].get("properties", {}))
        except InvalidRequest as err:
            return err

    async def _answer(self, name: str, served: str | None, spelled: spellings.Normalized | InvalidRequest | None, context: Any = None) -> Any:
        """Run a tool; bad arguments are INVALID_REQUEST and an unknown name NOT_FOUND results."""
        if served is None or spelled is None:
            return error_result(
                NotFound(
                    f"no tool named {name!r}",
                    details={"tool": name},
                    hint="tools/list shows what is served; `moss serve --help` tells how to choose tool sets",
                )
            )
        if isinstance(spelled, InvalidRequest):
            return error_result(spelled)
        known = self.schemas[served].get("properties", {})
        arguments = spelled.arguments
        unknown = sorted(set(arguments) - set(known))
        if unknown:
            return error_result(
                InvalidRequest(
                    f"{served} has no argument {', '.join(map(repr, unknown))}; it takes {', '.join(known) or 'none'}",
                    details={"unknown": unknown, "allowed": list(known)},
                )
            )
        try:
            result = await super().call_tool(served, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            problems = [
                {"field": ".".join(str(part) for part in problem["loc"]) or "(arguments)", "message": problem["msg"]} for problem in exc.__cause__.errors()
            ]
            listed = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
            return error_result(InvalidRequest(f"invalid arguments for {served}: {listed}", details={"errors": problems}))
        if spelled.ignored and isinstance(result, CallToolResult) and not result.is_error and isinstance(result.structured_content, dict):
            # Another tool's argument with nothing to do here: the answer says so rather than drop it unseen.
            return ok_result({**result.structured_content, "ignored_arguments": spelled.ignored})
        return result

    def _served_name(self, name: str) -> str | None:
        if name in self.schemas:
            return name
        for candidate in self.schemas:
            if underscored(candidate) == underscored(name):
                return candidate
        return None


def _result_code(result: Any) -> str:
    """OK, or the error code an isError result carries (TOOL_FAILED when it names none)."""
    if not getattr(result, "is_error", False):
        return "OK"
    body = getattr(result, "structured_content", None)
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("code")) if isinstance(error, dict) and error.get("code") else "TOOL_FAILED"


def _client_of(context: Any) -> dict[str, Any]:
    """The calling client's name and version, as its `initialize` (or request envelope) said."""
    try:
        info = context.request_context.session.client_params.client_info
        return {"name": info.name, "version": info.version}
    except (AttributeError, ValueError):
        return {}


def _meta_of(context: Any) -> dict[str, Any] | None:
    try:
        meta = context.request_context.meta
    except (AttributeError, ValueError):
        return None
    return dict(meta) if isinstance(meta, dict) else None


def build_server(
    context: Context,
    sets: Sequence[str] = (),
    *,
    names: str = "dotted",
    disabled: Collection[str] = (),
    unavailable: MossError | None = None,
    gate: ServeGate | None = None,
) -> MossMCPServer:
    """A server whose tools act through `context`, with the given tool sets (default: the
    default sets); with `unavailable`, every tool call answers that error; with `gate`, every
    call passes its policy and is written to its audit log.

    Raises InvalidRequest for an unknown set or name style.
    """
    chosen = parse_sets(list(sets))
    registry = ToolRegistry(context, names=names, disabled=disabled, unavailable=unavailable)
    for name in chosen:
        registry.register_set(TOOL_SETS[name])
    dynamic = "core" in chosen
    server = MossMCPServer(
        "moss-files",
        version=__version__,
        instructions=registry._spell(_instructions(chosen, dynamic)),
        tools=list(registry.tools),
        schemas=registry.schemas,
        read_only={tool.name: bool(tool.annotations and tool.annotations.read_only_hint) for tool in registry.tools},
        gate=gate,
        registry=registry,
        enabled=chosen,
        dynamic=dynamic,
        log_level="WARNING",
    )
    if dynamic:
        _declare_meta_tool(registry, server)
        server.install_declared()
        server.generation = 0
    return server


def _declare_meta_tool(registry: ToolRegistry, server: MossMCPServer) -> None:
    """`moss.tools`: the sets beyond the core, and enabling them while the server runs."""

    @registry.tool(
        META_TOOL,
        "Tool sets beyond these (moss, loop, cstack, needlecast, moe, capsule, share): enable adds them to tools/list. "
        "Calling a tool by name enables its set too. Returns {sets, added, served}.",
        read_only=True,
    )
    def tools_(
        enable: Annotated[list[str] | None, Field(description='Sets to add, or ["all"].')] = None,
    ) -> dict[str, Any]:
        return server.sets_report(server.enable_sets(enable or ()))


def _instructions(sets: Sequence[str], dynamic: bool = False) -> str:
    lines = [
        "moss-files: this project's shared memory as markdown files in git (a human reads the same files).",
        *(f"- {name}: {TOOL_SETS[name].summary}" for name in sets),
        *(
            ["loop_* tools also take LoopFlow's and its spec's argument names: camelCase, filters{types,statuses,tags,dateRange}, next_session_should."]
            if "loop" in sets
            else []
        ),
        *([f"More tools ({', '.join(name for name in TOOL_SETS if name not in sets)}): {META_TOOL} lists and enables them."] if dynamic else []),
        "Errors are results with isError and a stable code (NOT_FOUND, CAPSULE_TOO_THIN, ...) in structuredContent.error.",
    ]
    return "\n".join(lines)
