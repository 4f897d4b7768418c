"""The agent runtime's settings: `.moss/agent.toml`, its template, and their validation.
Core layer (pure: parses text, never reads a file or the environment).

A workspace without the file runs with the same restrictive defaults the template writes, so
`moss agent init` only makes them visible and editable. Every key of the spec's `agent.toml`
(Bosun M0/M1 §6.1) is there; `[storage] path` names a folder of files rather than a database.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moss_files.agent import costs
from moss_files.agent.costs import Price
from moss_files.foundation import datafiles
from moss_files.foundation.errors import InvalidDocument

AGENT_TOML = ".moss/agent.toml"
DEFAULT_MODEL = "claude-sonnet-5-5"
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
TOOL_MAPS = ("moss",)
OWN_COMMAND = "moss"  # this toolkit's command: the runtime starts it with its own interpreter


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """One MCP server: a command over stdio, or a URL over streamable HTTP."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    env_from: tuple[str, ...] = ()
    cwd: str | None = None
    tool_map: str | None = None
    timeout_seconds: float | None = None
    enabled: bool = True

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


@dataclass(frozen=True, slots=True)
class LlmSettings:
    """The model and the loop's limits."""

    provider: str = "anthropic"
    model: str = DEFAULT_MODEL
    max_context_tokens: int = 32000
    max_response_tokens: int = 4096
    max_steps: int = 8
    api_key_env: str = "ANTHROPIC_API_KEY"
    base_url: str = ""
    retries: int = 4
    retry_base_seconds: float = 1.0
    request_timeout_seconds: float = 600.0
    system_prompt: str = ""
    orient: bool = True
    prices: Mapping[str, Price] = field(default_factory=lambda: dict(costs.DEFAULT_PRICES))


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """Everything `.moss/agent.toml` says (the policy as its raw tables: building it resolves
    paths, which is the caller's I/O)."""

    storage: str = ".moss/agent"
    workspace_root: str = "."
    llm: LlmSettings = field(default_factory=LlmSettings)
    policy: Mapping[str, Any] = field(default_factory=dict)
    secrets: Mapping[str, Any] = field(default_factory=dict)
    servers: tuple[ServerSettings, ...] = (ServerSettings("moss", command=OWN_COMMAND, args=("serve",), tool_map="moss"),)
    tool_timeout_seconds: float = 15.0
    max_output_bytes: int = 256 * 1024
    path: str | None = None


AGENT_TOML_TEMPLATE = """\
# moss_format: 2
# Settings of the agent runtime (`moss agent`). Restrictive by default: an agent may read and
# write files inside this workspace only, run no command, reach no network, and read no secret
# but the model's API key. A deny always wins over an allow. Paths are relative to the
# workspace root (the folder holding .moss/). Reference: docs/agent.md.

[storage]
# Where sessions (markdown files) and their events (JSON Lines) are kept.
path = ".moss/agent"

[workspace]
# The folder the agent works in; relative paths in [policy.fs] are taken from it.
root = "."

[llm]
provider = "anthropic"                 # the only provider
model = "claude-sonnet-5-5"
max_context_tokens = 32000             # system prompt + tool schemas + history + this turn (estimated); the
                                       # oldest turns are left out first. moss serve's tool schemas alone are
                                       # about 7,000 tokens, so the spec's 8000 leaves no room for a conversation.
max_response_tokens = 4096             # max_tokens of each model call
max_steps = 8                          # model<->tool steps per user turn; one more fails the run (STEP_LIMIT)
api_key_env = "ANTHROPIC_API_KEY"      # the key is read from this environment variable only, never a file
base_url = ""                          # empty: $ANTHROPIC_BASE_URL, else the public API
retries = 4                            # on 429, 529, 5xx and broken streams, with exponential backoff
retry_base_seconds = 1.0
request_timeout_seconds = 600
system_prompt = ""                     # your instructions, added to the built-in system prompt
orient = true                          # a session's first run reads the latest handoff capsule, cstack status
                                       # and unread messages first, through the moss server's tools

# Prices in USD per million tokens, over the built-in table (docs/agent.md lists it). A cache
# write costs 1.25 x input and a cache read 0.1 x input unless cache_write / cache_read say so.
[llm.prices]
# "claude-sonnet-5-5" = { input = 2.0, output = 10.0 }

[policy]
allow_exec = false                     # exec: run commands
allow_network = false                  # net_http: reach other hosts (the model API itself is not a tool)
deny = []                              # capabilities denied outright: fs_read fs_write net_http exec secrets_read
allow_tools = []                       # tools allowed by name although no rule maps them (SERVER.TOOL, * wildcards)
deny_tools = ["*.moss.purge"]          # tools always denied (moss serve's purge, under any server name or spelling)

[policy.fs]
read_roots = ["."]
write_roots = ["."]
deny_read = []
deny_write = [".git", ".moss/agent.toml", ".moss/config.toml"]

[policy.net_http]
allow_domains = []                     # for example ["api.github.com"]: that host and its subdomains
deny_domains = []                      # names, IP addresses (any spelling) or networks: ["169.254.169.254", "10.0.0.0/8"]

[policy.exec]
allow_commands = []                    # for example ["git status", "pytest"]: word by word, so "git" allows "git log"
deny_commands = []                     # for example ["git push"]: also as `git -C . push`, `env git push`, `sh -c 'git push'`

# A rule per tool of another server: the capabilities it needs, and the arguments holding
# each one's scope (paths, URLs or domains, commands, environment variable names).
# [[policy.tools]]
# tool = "files.read_file"
# needs = ["fs_read"]
# fs_read = ["path"]

[secrets]
keys = ["ANTHROPIC_API_KEY"]           # environment variables the runtime may read
deny = []

[mcp]
timeout_seconds = 15                   # per tool call
max_output_bytes = 262144              # a longer tool output is cut there, and the cut is logged

# This toolkit's own MCP server: capsules, memory, messages and search out of the box.
[[mcp_servers]]
name = "moss"
command = "moss"
args = ["serve"]
tool_map = "moss"                      # the built-in capability map of moss serve's tools

# Another server, over stdio or streamable HTTP:
# [[mcp_servers]]
# name = "github"
# command = "mcp-github"               # or: url = "http://127.0.0.1:8765/mcp" and headers = {}
# args = []
# env = {}                             # set for the server
# env_from = ["GITHUB_TOKEN"]          # passed on from your environment; each needs secrets_read
# timeout_seconds = 30
"""


def parse_settings(text: str, path: str) -> AgentSettings:
    """Read `.moss/agent.toml` (a BOM is dropped). Raises InvalidDocument (INVALID_DOCUMENT with
    the line for bad TOML, MERGE_CONFLICT at a conflict marker, SCHEMA_ERROR naming the key for
    a bad value, FORMAT_TOO_NEW for a newer format)."""
    data = datafiles.load_toml(text, path, what="agent settings", kind="agent-policy")
    try:
        return settings_from(data, path)
    except ValueError as exc:
        raise InvalidDocument(str(exc), code="SCHEMA_ERROR", path=path) from None


def settings_from(data: Mapping[str, Any], path: str | None = None) -> AgentSettings:
    """Settings from parsed TOML. Raises ValueError naming the key at fault."""
    known = {"storage", "workspace", "llm", "policy", "secrets", "mcp", "mcp_servers"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown settings {', '.join(unknown)}; the tables are {', '.join(sorted(known))}")
    storage = _table(data, "storage")
    workspace = _table(data, "workspace")
    mcp = _table(data, "mcp")
    policy = _table(data, "policy")
    secrets = _table(data, "secrets")
    defaults = AgentSettings()
    servers_raw = data.get("mcp_servers")
    if servers_raw is None:
        servers = defaults.servers
    elif isinstance(servers_raw, list):
        servers = tuple(_server(item, index) for index, item in enumerate(servers_raw))
    else:
        raise ValueError("mcp_servers must be an array of tables ([[mcp_servers]])")
    names = [server.name for server in servers]
    if len(set(names)) != len(names):
        raise ValueError(f"mcp_servers names must be unique: {names}")
    return AgentSettings(
        storage=_storage_folder(_text(storage, "path", defaults.storage, "storage")),
        workspace_root=_text(workspace, "root", defaults.workspace_root, "workspace"),
        llm=_llm(_table(data, "llm")),
        policy=policy,
        secrets=secrets,
        servers=servers,
        tool_timeout_seconds=_number(mcp, "timeout_seconds", defaults.tool_timeout_seconds, "mcp", minimum=0.001),
        max_output_bytes=int(_number(mcp, "max_output_bytes", defaults.max_output_bytes, "mcp", minimum=1, integer=True)),
        path=path,
    )


def _llm(table: Mapping[str, Any]) -> LlmSettings:
    d = LlmSettings()
    where = "llm"
    provider = _text(table, "provider", d.provider, where)
    if provider != "anthropic":
        raise ValueError(f"llm.provider {provider!r} is not supported; the runtime speaks to anthropic")
    prices = dict(costs.DEFAULT_PRICES)
    prices.update(costs.parse_prices(_table(table, "prices"), "llm.prices"))
    known = {f for f in LlmSettings.__dataclass_fields__}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"unknown llm settings {', '.join(unknown)}")
    return LlmSettings(
        provider=provider,
        model=_text(table, "model", d.model, where),
        max_context_tokens=int(_number(table, "max_context_tokens", d.max_context_tokens, where, minimum=256, integer=True)),
        max_response_tokens=int(_number(table, "max_response_tokens", d.max_response_tokens, where, minimum=1, integer=True)),
        max_steps=int(_number(table, "max_steps", d.max_steps, where, minimum=1, integer=True)),
        api_key_env=_text(table, "api_key_env", d.api_key_env, where),
        base_url=_text(table, "base_url", d.base_url, where, blank=True),
        retries=int(_number(table, "retries", d.retries, where, minimum=0, integer=True)),
        retry_base_seconds=_number(table, "retry_base_seconds", d.retry_base_seconds, where, minimum=0),
        request_timeout_seconds=_number(table, "request_timeout_seconds", d.request_timeout_seconds, where, minimum=0.001),
        system_prompt=_text(table, "system_prompt", d.system_prompt, where, blank=True),
        orient=_flag(table, "orient", d.orient, where),
        prices=prices,
    )


def _server(item: Any, index: int) -> ServerSettings:
    where = f"mcp_servers[{index}]"
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} must be a table")
    known = {"name", "command", "args", "url", "headers", "env", "env_from", "cwd", "tool_map", "timeout_seconds", "enabled"}
    unknown = sorted(set(item) - known)
    if unknown:
        raise ValueError(f"{where} has unknown keys {', '.join(unknown)}")
    name = _text(item, "name", "", where)
    if not SERVER_NAME.match(name):
        raise ValueError(f"{where}.name must be 1-32 letters, digits, '_' or '-' (it prefixes the tool names: SERVER.TOOL)")
    command = item.get("command")
    url = item.get("url")
    if (command is None) == (url is None):
        raise ValueError(f"{where} ({name}) needs exactly one of command (stdio) or url (streamable HTTP)")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise ValueError(f"{where}.command must be a non-empty text")
    if url is not None and (not isinstance(url, str) or not re.match(r"^https?://", url)):
        raise ValueError(f"{where}.url must be an http:// or https:// URL")
    tool_map = item.get("tool_map")
    if tool_map is not None and tool_map not in TOOL_MAPS:
        raise ValueError(f"{where}.tool_map must be one of {', '.join(TOOL_MAPS)}")
    timeout = item.get("timeout_seconds")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
        raise ValueError(f"{where}.timeout_seconds must be a number of seconds above 0")
    return ServerSettings(
        name=name,
        command=command,
        args=_texts(item, "args", where),
        url=url,
        headers=_text_map(item, "headers", where),
        env=_text_map(item, "env", where),
        env_from=_texts(item, "env_from", where),
        cwd=_text(item, "cwd", "", where, blank=True) or None,
        tool_map=tool_map,
        timeout_seconds=float(timeout) if timeout is not None else None,
        enabled=_flag(item, "enabled", True, where),
    )


def _table(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ValueError(f"{key} must be a table ([{key}])")
    return value


# Bosun's agent.toml names a SQLite file (`path = "./agent.db"`); ours names a folder of files.
_DATABASE_SUFFIXES = (".db", ".db3", ".sqlite", ".sqlite3")


def _storage_folder(path: str) -> str:
    """`[storage] path`, refused when it names a database file: it would become a folder of
    that name holding session files."""
    if path.lower().rstrip("/").endswith(_DATABASE_SUFFIXES):
        raise ValueError(
            f"storage.path {path!r} names a SQLite database file, as Bosun's agent.toml does; moss agent keeps its sessions "
            'as markdown and JSON Lines files in a folder: name a folder, for example path = ".moss/agent" (the default)'
        )
    return path


def _text(table: Mapping[str, Any], key: str, default: str, where: str, *, blank: bool = False) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or (not blank and not value.strip()):
        raise ValueError(f"{where}.{key} must be {'text' if blank else 'a non-empty text'}")
    return value if blank else value.strip()


def _texts(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{where}.{key} must be a list of texts")
    return tuple(value)


def _text_map(table: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{where}.{key} must be a table of texts")
    return {str(k): v for k, v in value.items()}


def _number(table: Mapping[str, Any], key: str, default: float, where: str, *, minimum: float, integer: bool = False) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        raise ValueError(f"{where}.{key} must be {'a whole number' if integer else 'a number'}")
    if value < minimum:
        raise ValueError(f"{where}.{key} must be at least {minimum:g}")
    return value


def _flag(table: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"{where}.{key} must be true or false")
    return value
