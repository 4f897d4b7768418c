"""The capability gate: what a tool call needs, what the policy allows, and each decision.
Core layer (pure; paths are resolved by a function the caller passes in).

Capabilities (Bosun M0/M1 §4): `fs_read` and `fs_write` (paths), `net_http` (domains), `exec`
(commands), `secrets_read` (environment variable names). Defaults deny: exec and network are
off, file access is the workspace, the only secret is the model's API key. A deny always wins
over an allow. Every decision names the setting that made it (`rule`), so the event log says
why, not only what.

Matching, done right where the reference runtime did it with string prefixes, and so that a
deny holds whatever spelling reaches the same thing (issue 24):
- paths are resolved first (links followed, `..` applied, by the resolver) and then compared
  component by component: `/work` contains `/work/a`, never `/workshop`; `.` never contains
  `../x`, which resolves outside it; a path that starts with a URI scheme (`file:/etc/passwd`)
  is refused by the resolver;
- hosts are read by the one parser of `foundation.hosts`: a URL with urlsplit, refused when
  another parser would read it differently (a backslash, userinfo, a scheme without `//`);
  addresses in every spelling the resolver accepts (`2852039166` is 169.254.169.254) and
  compared as addresses, also inside IPv6 (`::ffff:169.254.169.254`); a loopback entry stands
  for every way to this machine (`127.1`, `0`, `[::1]`, `localhost`). Names match exactly or on
  a label boundary: `github.com` allows `api.github.com`, never `evilgithub.com`;
- commands: an allow matches word by word from the start (`git` allows `git status`, never
  `gitk` or `/usr/bin/git`); a deny matches wherever the program stands and however it is
  named (`env git push`, `/usr/bin/git push`, `sh -c 'git push'`, `git-push`), git's global
  options read as git reads them (`git -C . push`); what the gate cannot read (a git alias set
  on the command line, an unknown git option) is refused. A command holding shell control
  characters (`;`, `|`, `&`, `$`, backquote, redirections, newlines) is refused, since a tool
  may hand it to a shell;
- tools match in every spelling of their name (`moss.moss.purge`, `moss.moss_purge`,
  `moss.capsule_purge`), and a deny in any case too.

A tool call is mapped to capabilities by a rule (`[[policy.tools]]`, else the built-in map of
`moss serve`'s tools for a server configured with `tool_map = "moss"`): the capabilities it
needs and the arguments that carry each one's scope. A tool no rule maps is denied unless
`allow_tools` names it; `deny_tools` denies a tool whatever else says.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moss_files.foundation import hosts

CAPABILITIES = ("fs_read", "fs_write", "net_http", "exec", "secrets_read")
FS = ("fs_read", "fs_write")

# (text, base folder) -> an absolute path with links and `..` resolved. Raises ValueError for
# a text that cannot be a path (a NUL byte).
Resolver = Callable[[str, str], str]

_SHELL_CONTROL = frozenset(";&|`$<>(){}\n\r\x00")


@dataclass(frozen=True, slots=True)
class Decision:
    """One capability decision: granted or not, for which capability and scope, by which rule."""

    granted: bool
    capability: str | None
    scope: str | None
    rule: str
    reason: str


def decision_to_dict(decision: Decision) -> dict[str, Any]:
    return {
        "granted": decision.granted,
        "capability": decision.capability,
        "scope": decision.scope,
        "rule": decision.rule,
        "reason": decision.reason,
    }


@dataclass(frozen=True, slots=True)
class ToolRule:
    """How one tool (or a `*` pattern of tools) maps to capabilities.

    `args[capability]` names the arguments whose values are that capability's scopes (a text
    or a list of texts); `scopes[capability]` is the scope when no such argument is given
    (default: the workspace root for files, `*` for the rest, which only an allow-all grants);
    `arg_defaults[argument]` is the scope a tool uses when the argument is omitted.
    """

    pattern: str
    needs: tuple[str, ...]
    args: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    scopes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    arg_defaults: Mapping[str, str] = field(default_factory=dict)
    source: str = "policy.tools"


@dataclass(frozen=True, slots=True)
class Policy:
    """The capability policy of one workspace, with its roots already resolved."""

    root: str
    resolve: Resolver = field(repr=False, compare=False)
    read_roots: tuple[str, ...] = ()
    write_roots: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = ()
    deny_write: tuple[str, ...] = ()
    allow_exec: bool = False
    allow_network: bool = False
    deny_kinds: frozenset[str] = frozenset()
    allow_domains: tuple[str, ...] = ()
    deny_domains: tuple[str, ...] = ()
    allow_commands: tuple[tuple[str, ...], ...] = ()
    deny_commands: tuple[tuple[str, ...], ...] = ()
    secret_keys: tuple[str, ...] = ()
    deny_secrets: tuple[str, ...] = ()
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()
    rules: tuple[ToolRule, ...] = ()


# --------------------------------------------------------------------------- reading the policy


DEFAULT_DENY_WRITE = (".git", ".moss/agent.toml", ".moss/config.toml")
DEFAULT_DENY_TOOLS = ("*.moss.purge",)  # moss serve's purge, whatever its server entry is named


def policy_from_table(
    table: Mapping[str, Any], secrets: Mapping[str, Any], *, root: str, resolve: Resolver, where: str, toolkit_root: str | None = None
) -> Policy:
    """The policy of `[policy]` (and `[secrets]`) as parsed from TOML, over restrictive defaults.
    Relative paths are taken from `root` (`[workspace] root`); the default `deny_write` entries
    name the toolkit's own files, so they are taken from `toolkit_root` (the folder holding
    `.moss/`; default: `root`).

    Raises ValueError naming the key at fault (the settings reader makes it SCHEMA_ERROR).
    """
    fs_table = _table(table, "fs", where)
    net = _table(table, "net_http", where)
    exe = _table(table, "exec", where)
    # A misspelt key must not pass for an absent one: in a policy that could drop a deny.
    for label, found, known in (
        (where, table, {"allow_exec", "allow_network", "deny", "allow_tools", "deny_tools", "fs", "net_http", "exec", "tools"}),
        (f"{where}.fs", fs_table, {"read_roots", "write_roots", "deny_read", "deny_write"}),
        (f"{where}.net_http", net, {"allow_domains", "deny_domains"}),
        (f"{where}.exec", exe, {"allow_commands", "deny_commands"}),
        ("secrets", secrets, {"keys", "deny"}),
    ):
        unknown = sorted(set(found) - known)
        if unknown:
            raise ValueError(f"{label} has unknown keys {', '.join(unknown)}; it takes {', '.join(sorted(known))}")

    def roots(source: Mapping[str, Any], key: str, default: Sequence[str], label: str) -> tuple[str, ...]:
        return tuple(resolve(item, root) for item in _texts(source, key, default, f"{where}.{label}"))

    deny_kinds = _texts(table, "deny", (), where)
    unknown = sorted(set(deny_kinds) - set(CAPABILITIES))
    if unknown:
        raise ValueError(f"{where}.deny names unknown capabilities {', '.join(unknown)}; they are {', '.join(CAPABILITIES)}")
    domains = {
        key: tuple(normalize_domain_pattern(item, f"{where}.net_http.{key}") for item in _texts(net, key, (), f"{where}.net_http"))
        for key in ("allow_domains", "deny_domains")
    }
    commands = {
        key: tuple(_pattern_tokens(item, f"{where}.exec.{key}") for item in _texts(exe, key, (), f"{where}.exec"))
        for key in ("allow_commands", "deny_commands")
    }
    rules = tuple(_rule(item, f"{where}.tools[{index}]") for index, item in enumerate(_list(table, "tools", where)))
    return Policy(
        root=resolve(".", root),
        resolve=resolve,
        read_roots=roots(fs_table, "read_roots", (".",), "fs"),
        write_roots=roots(fs_table, "write_roots", (".",), "fs"),
        deny_read=roots(fs_table, "deny_read", (), "fs"),
        deny_write=(
            roots(fs_table, "deny_write", (), "fs") if "deny_write" in fs_table else tuple(resolve(item, toolkit_root or root) for item in DEFAULT_DENY_WRITE)
        ),
        allow_exec=_flag(table, "allow_exec", where),
        allow_network=_flag(table, "allow_network", where),
        deny_kinds=frozenset(deny_kinds),
        allow_domains=domains["allow_domains"],
        deny_domains=domains["deny_domains"],
        allow_commands=commands["allow_commands"],
        deny_commands=commands["deny_commands"],
        secret_keys=_texts(secrets, "keys", ("ANTHROPIC_API_KEY",), "secrets"),
        deny_secrets=_texts(secrets, "deny", (), "secrets"),
        allow_tools=_texts(table, "allow_tools", (), where),
        deny_tools=_texts(table, "deny_tools", DEFAULT_DENY_TOOLS, where),
        rules=rules,
    )


def _table(table: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = table.get(key, {})
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}.{key} must be a table")
    return value


def _list(table: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = table.get(key, [])
    if not isinstance(value, list):
        raise ValueError(f"{where}.{key} must be an array of tables ([[{where}.{key}]])")
    return value


def _texts(table: Mapping[str, Any], key: str, default: Sequence[str], where: str) -> tuple[str, ...]:
    value = table.get(key)
    if value is None:
        return tuple(default)
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ValueError(f"{where}.{key} must be a list of non-empty texts")
    return tuple(item.strip() for item in value)


def _flag(table: Mapping[str, Any], key: str, where: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{where}.{key} must be true or false")
    return value


def _rule(item: Any, where: str) -> ToolRule:
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} must be a table")
    pattern = item.get("tool")
    if not isinstance(pattern, str) or "." not in pattern:
        raise ValueError(f"{where}.tool must name SERVER.TOOL (with * as a wildcard)")
    needs = _texts(item, "needs", (), where)
    unknown = sorted(set(needs) - set(CAPABILITIES))
    if unknown:
        raise ValueError(f"{where}.needs names unknown capabilities {', '.join(unknown)}")
    extra = sorted(set(item) - {"tool", "needs", *CAPABILITIES})
    if extra:
        raise ValueError(f"{where} has unknown keys {', '.join(extra)}; argument lists go under the capability's name")
    args = {kind: _texts(item, kind, (), where) for kind in CAPABILITIES if kind in item}
    missing = sorted(set(args) - set(needs))
    if missing:
        raise ValueError(f"{where} lists arguments for {', '.join(missing)} but does not need it")
    return ToolRule(pattern=pattern, needs=needs, args=args, source=where)


# --------------------------------------------------------------------------- matching


def within(path: str, root: str) -> bool:
    """Whether the absolute, normalized `path` is `root` or inside it, compared by component."""
    path_parts = [part for part in path.split("/") if part]
    root_parts = [part for part in root.split("/") if part]
    return path_parts[: len(root_parts)] == root_parts


# moss serve's tool sets whose tools are named SET.TOOL (`moss.purge`), served as SET_TOOL
# under `--names underscore`; `loop_*` has one spelling. `capsule_X` (Moss's newest names, the
# opt-in `capsule` set) is the same tool as `moss.X`.
_DOTTED_SETS = ("moss", "cstack", "needlecast", "moe")
_CAPSULE_PREFIX = "capsule_"
_CAPSULE_WORD = re.compile(r"(?<![a-z0-9-])capsule_")


def tool_key(tool: str) -> str:
    """A tool's name (without its server) in the one spelling names are compared in: dots as
    underscores, Moss's newest capsule names as the `moss` set's. `moss.fetch_many`,
    `moss_fetch_many` and `capsule_fetch_many` are all `moss_fetch_many`."""
    key = tool.replace(".", "_")
    return "moss_" + key[len(_CAPSULE_PREFIX) :] if key.startswith(_CAPSULE_PREFIX) else key


def canonical_tool(tool: str) -> str:
    """The seeds' name of one of moss serve's tools, however it was served: `moss_purge`,
    `capsule_purge` and `moss.purge` are `moss.purge`; `loop_scan` stays. A name of no known
    set comes back as its tool_key."""
    key = tool_key(tool)
    prefix, sep, rest = key.partition("_")
    return f"{prefix}.{rest}" if sep and rest and prefix in _DOTTED_SETS else key


def _qualified_key(name: str) -> str:
    server, dot, tool = name.partition(".")
    return f"{server}.{tool_key(tool)}" if dot else tool_key(name)


def _folded(name: str) -> str:
    # Case, dots, runs of underscores (`moss__moss_purge`, the model's name) and capsule_ all alike.
    return _CAPSULE_WORD.sub("moss_", re.sub(r"[._]+", "_", name.casefold()))


def _glob(pattern: str, name: str) -> bool:
    if "*" not in pattern:
        return name == pattern
    regex = "^" + ".*".join(re.escape(piece) for piece in pattern.split("*")) + "$"
    return re.match(regex, name, re.DOTALL) is not None


def tool_matches(name: str, pattern: str, *, qualified: bool = True) -> bool:
    """Whether tool `name` matches `pattern` (`*` stands for any run of characters) as written
    or in any other spelling of the same tool (tool_key). `qualified`: both are SERVER.TOOL (the
    agent's gate); otherwise both are names as one server serves them (moss serve's gate)."""
    key = _qualified_key if qualified else tool_key
    return _glob(pattern, name) or _glob(key(pattern), key(name))


def tool_denied(name: str, pattern: str, *, qualified: bool = True) -> bool:
    """tool_matches, and blind to case and to which separator stands where, so that a deny
    holds whatever spelling reaches the tool (`moss.MOSS_PURGE`, `moss__moss_purge`). Only
    denies compare this loosely: a wider deny refuses more, a wider allow would grant more."""
    return tool_matches(name, pattern, qualified=qualified) or _glob(_folded(pattern), _folded(name))


def normalize_domain_pattern(pattern: str, where: str) -> str:
    """A domain pattern as matching uses it: `*`, `*.example.com`, `example.com` (lower-case,
    IDNA), an IP address in any spelling (`[::1]`, `127.1`) written as `ipaddress` writes it,
    or a network (`10.0.0.0/8`). Raises ValueError for one that names no host."""
    text = pattern.strip()
    if text == "*":
        return text
    if "/" in text:
        network = hosts.ip_network_of(text)
        if network is None:
            raise ValueError(f"{where}: {pattern!r} is not a network (write 10.0.0.0/8 or fe80::/10)")
        return str(network)
    wildcard = text.startswith("*.")
    try:
        host = hosts.host_name(text[2:] if wildcard else text)
    except hosts.AmbiguousURL:
        raise ValueError(f"{where}: {pattern!r} is not a domain (write example.com, *.example.com, an IP address or *)") from None
    if wildcard and hosts.ip_address_of(host) is not None:
        raise ValueError(f"{where}: {pattern!r}: *. takes a domain, not an address")
    return ("*." if wildcard else "") + host


def _local_network(network: hosts.IPNetwork) -> bool:
    """Whether `network` holds an address that reaches this machine (loopback, unspecified)."""
    if network.version == 4:
        return network.overlaps(_LOOPBACK_V4) or ipaddress.IPv4Address(0) in network
    return any(network.overlaps(local) for local in _LOCAL_V6)


_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
_LOCAL_V6 = (ipaddress.IPv6Network("::1/128"), ipaddress.IPv6Network("::/128"), ipaddress.IPv6Network("::ffff:127.0.0.0/104"))


def domain_matches(host: str, pattern: str) -> bool:
    """`host` (as hosts.url_host gives it) against a normalized pattern. A name matches exactly
    or as a subdomain on a label boundary; `*.` takes subdomains only; `*` takes any host. An
    address or network matches the addresses it holds, in every spelling, also inside an IPv6
    address that embeds one (`::ffff:169.254.169.254`). A pattern that reaches this machine
    (a loopback address, `0.0.0.0`, `::`, `localhost`) matches every such destination: `127.1`,
    `0`, `[::1]`, `localhost` all reach the same listeners."""
    if pattern == "*":
        return True
    address = hosts.ip_address_of(host)
    network = hosts.ip_network_of(pattern)
    if pattern == "localhost" or (network is not None and _local_network(network)):
        if hosts.is_local_destination(host):
            return True
    if network is not None:
        return address is not None and any(found in network for found in hosts.reached_addresses(address) if found.version == network.version)
    if address is not None:
        return False  # a name never matches an address: what a name resolves to is not known here
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern or host.endswith("." + pattern)


class Undecidable(ValueError):
    """A command of which the gate cannot tell whether it runs a denied one."""


def command_tokens(value: Any) -> tuple[str, ...] | None:
    """A command's words (from a text, split as a shell would, or a list of texts); None for
    one that is empty, badly quoted, not text, or holds shell control characters."""
    if isinstance(value, str):
        if any(char in _SHELL_CONTROL for char in value):
            return None
        try:
            words = shlex.split(value)
        except ValueError:
            return None
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        words = value
        if any(char in _SHELL_CONTROL for item in words for char in item):
            return None
    else:
        return None
    return tuple(words) or None


def _pattern_tokens(pattern: str, where: str) -> tuple[str, ...]:
    if pattern.strip() == "*":
        return ("*",)
    words = command_tokens(pattern)
    if words is None:
        raise ValueError(f"{where}: {pattern!r} is not a plain command (no shell control characters)")
    return words


def command_matches(words: Sequence[str], pattern: Sequence[str]) -> bool:
    """Whether the command `words` starts with the words of `pattern` (`*` allows any): how an
    allow matches, exactly as written."""
    if tuple(pattern) == ("*",):
        return True
    return tuple(words[: len(pattern)]) == tuple(pattern)


# git's global options (git.c, handle_options): those that take the next word as their value,
# those written NAME=VALUE, those that print something and exit, and the plain flags.
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--attr-source", "--shallow-file"})
_GIT_VALUED_EQUALS = ("--git-dir=", "--work-tree=", "--namespace=", "--config-env=", "--attr-source=", "--exec-path=")
_GIT_QUERIES = ("--exec-path", "--html-path", "--man-path", "--info-path", "--list-cmds=")
_GIT_FLAGS = frozenset(
    {
        "-p",
        "--paginate",
        "-P",
        "--no-pager",
        "--no-lazy-fetch",
        "--no-replace-objects",
        "--bare",
        "--literal-pathspecs",
        "--no-literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
        "--no-optional-locks",
        "--no-advice",
    }
)
# Settings given on git's command line that make a word run another command than it names.
_GIT_RENAMING_SETTINGS = ("alias.", "include.", "includeif.", "help.autocorrect")
_MAX_NESTING = 8


def _program(word: str) -> str:
    # The program a word runs, as a deny compares it: no folder, any case (`/usr/bin/GIT`).
    return word.rsplit("/", 1)[-1].casefold()


def git_command(words: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """(subcommand, its arguments) of `git WORDS`, the global options read as git reads them;
    None when git runs no subcommand (`git --version`, `git --exec-path`). Raises Undecidable
    for an option git does not know, one that lacks its value, and a `-c`/`--config-env`
    setting that renames commands (aliases, includes, autocorrect)."""
    index = 0
    while index < len(words):
        word = words[index]
        if not word.startswith("-"):
            return word, tuple(words[index + 1 :])
        if word in ("--help", "-h", "--version", "-v"):
            return ("help" if word in ("--help", "-h") else "version"), tuple(words[index + 1 :])
        if word in _GIT_FLAGS:
            index += 1
            continue
        if word in _GIT_VALUED or word.startswith(_GIT_VALUED_EQUALS):
            if word in _GIT_VALUED:
                if index + 1 >= len(words):
                    raise Undecidable(f"git's {word} needs a value")
                value, index = words[index + 1], index + 2
            else:
                value, index = word.partition("=")[2], index + 1
            if word.startswith(("-c", "--config-env")) and value.casefold().startswith(_GIT_RENAMING_SETTINGS):
                raise Undecidable(f"git {word} {value} can make another word run a denied command")
            continue
        if word.startswith(_GIT_QUERIES):
            return None
        raise Undecidable(f"git has no global option {word!r}")
    return None


def _commands_within(words: tuple[str, ...], depth: int = 0) -> list[tuple[str, ...]]:
    """The command and every command held in one of its words, as `sh -c 'git push'`, `env -S
    'git push'`, `--exec='git push'` and `core.pager=git push` hold one."""
    found = [words]
    for word in words:
        texts = {word, word.partition("=")[2]}
        if len(word) > 2 and word[0] == "-" and word[1].isalpha():
            texts.add(word[2:])  # an option's value written against it: -S'git push'
        for text in texts:
            if " " not in text and "\t" not in text:
                continue
            if depth >= _MAX_NESTING:
                raise Undecidable("commands nested too deep to read")
            try:
                inner = tuple(shlex.split(text))
            except ValueError:
                continue  # badly quoted: no shell would run it either
            found.extend(_commands_within(inner, depth + 1))
    return found


def command_denied(words: Sequence[str], pattern: Sequence[str]) -> bool:
    """Whether running `words` may run the denied command `pattern`, wherever the program stands
    (after `env`, `sudo`, `nice`, `xargs` ..., inside `sh -c '…'`) and however it is named
    (`/usr/bin/git`, `git-push`). git's global options are read as git reads them, so the
    subcommand is known exactly (`git -C . push`); for another program, the pattern's later
    words need only appear after it, in order (`npm --prefix x publish` for `npm publish`).
    Words after git's subcommand may stand anywhere among its arguments. Raises Undecidable when
    it cannot tell."""
    if tuple(pattern) == ("*",):
        return True
    program, *rest = pattern
    program = _program(program)
    for command in _commands_within(tuple(words)):
        for index, word in enumerate(command):
            name, after = _program(word), command[index + 1 :]
            if program == "git" and name.startswith("git-") and len(name) > 4:
                if not rest or _git_runs(name[4:], after, rest):  # git-push is git push
                    return True
            if name != program:
                continue
            if not rest:
                return True
            if program == "git":
                parsed = git_command(after)
                if parsed is not None and _git_runs(*parsed, rest):
                    return True
            elif _in_order(rest, after):
                return True
    return False


def _git_runs(subcommand: str, arguments: Sequence[str], pattern: Sequence[str]) -> bool:
    sub, *words = pattern
    return subcommand.casefold() == sub.casefold() and all(word in arguments for word in words)


def _in_order(wanted: Sequence[str], words: Sequence[str]) -> bool:
    remaining = iter(words)
    return all(any(word == item for item in remaining) for word in wanted)


# --------------------------------------------------------------------------- decisions


def check_kind(policy: Policy, kind: str) -> Decision | None:
    """The denial that applies to a whole capability (deny list, exec or network off), if any."""
    if kind in policy.deny_kinds:
        return Decision(False, kind, None, "policy.deny", f"{kind} is denied by policy")
    if kind == "exec" and not policy.allow_exec:
        return Decision(False, kind, None, "policy.allow_exec", "exec is off (policy.allow_exec = false)")
    if kind == "net_http" and not policy.allow_network:
        return Decision(False, kind, None, "policy.allow_network", "network access is off (policy.allow_network = false)")
    return None


def check_path(policy: Policy, kind: str, raw: str, base: str) -> Decision:
    """fs_read or fs_write of the path `raw` (relative to `base`)."""
    try:
        resolved = policy.resolve(raw, base)
    except ValueError as exc:
        return Decision(False, kind, raw, "policy.fs", f"not a path: {exc}")
    reading = kind == "fs_read"
    denies, roots = (policy.deny_read, policy.read_roots) if reading else (policy.deny_write, policy.write_roots)
    label = "deny_read" if reading else "deny_write"
    for denied in denies:
        if within(resolved, denied):
            return Decision(False, kind, resolved, f"policy.fs.{label}", f"{resolved} is inside {denied}, which policy.fs.{label} names")
    for allowed in roots:
        if within(resolved, allowed):
            return Decision(True, kind, resolved, f"policy.fs.{'read_roots' if reading else 'write_roots'}", f"{resolved} is inside {allowed}")
    listed = ", ".join(roots) or "none"
    return Decision(False, kind, resolved, f"policy.fs.{'read_roots' if reading else 'write_roots'}", f"{resolved} is outside the allowed roots ({listed})")


def check_domain(policy: Policy, raw: str) -> Decision:
    """net_http to the URL or host `raw`, read by the one parser of hosts (`hosts.url_host`)."""
    if raw == "*":
        host = raw
    else:
        try:
            host = hosts.url_host(raw)
        except hosts.AmbiguousURL as exc:
            return Decision(False, "net_http", raw, "policy.net_http.ambiguous", f"{raw!r} is refused: {exc}")
    for pattern in policy.deny_domains:
        if host == "*" or domain_matches(host, pattern):
            return Decision(False, "net_http", host, "policy.net_http.deny_domains", f"{host} matches denied domain {pattern}")
    for pattern in policy.allow_domains:
        if (host == "*" and pattern == "*") or (host != "*" and domain_matches(host, pattern)):
            return Decision(True, "net_http", host, "policy.net_http.allow_domains", f"{host} matches {pattern}")
    return Decision(False, "net_http", host, "policy.net_http.allow_domains", f"{host} is not in policy.net_http.allow_domains")


def check_command(policy: Policy, raw: Any) -> Decision:
    shown = raw if isinstance(raw, str) else " ".join(map(str, raw)) if isinstance(raw, list) else repr(raw)
    if raw == "*":
        words: tuple[str, ...] | None = ("*",)
    else:
        words = command_tokens(raw)
    if words is None:
        return Decision(False, "exec", shown, "policy.exec", "not a plain command: empty, badly quoted, or holding shell control characters")
    for pattern in policy.deny_commands:
        try:
            denied = words == ("*",) or command_denied(words, pattern)
        except Undecidable as exc:
            return Decision(False, "exec", shown, "policy.exec.undecidable", f"cannot tell whether it runs denied command {' '.join(pattern)!r}: {exc}")
        if denied:
            return Decision(False, "exec", shown, "policy.exec.deny_commands", f"runs denied command {' '.join(pattern)!r}")
    for pattern in policy.allow_commands:
        if (words == ("*",) and pattern == ("*",)) or (words != ("*",) and command_matches(words, pattern)):
            return Decision(True, "exec", shown, "policy.exec.allow_commands", f"starts with allowed command {' '.join(pattern)!r}")
    return Decision(False, "exec", shown, "policy.exec.allow_commands", "no allowed command starts it (policy.exec.allow_commands)")


def check_secret(policy: Policy, key: str) -> Decision:
    if key in policy.deny_secrets or "*" in policy.deny_secrets:
        return Decision(False, "secrets_read", key, "secrets.deny", f"{key} is denied by secrets.deny")
    if key in policy.secret_keys or "*" in policy.secret_keys:
        return Decision(True, "secrets_read", key, "secrets.keys", f"{key} is listed in secrets.keys")
    return Decision(False, "secrets_read", key, "secrets.keys", f"{key} is not listed in secrets.keys")


def check_scope(policy: Policy, kind: str, value: Any, base: str) -> Decision:
    """One capability for one scope value (a path, a domain or URL, a command, a key name)."""
    denied = check_kind(policy, kind)
    if denied is not None:
        return Decision(False, kind, value if isinstance(value, str) else None, denied.rule, denied.reason)
    if kind in FS:
        return check_path(policy, kind, value, base) if isinstance(value, str) else _not_text(kind, value)
    if kind == "net_http":
        return check_domain(policy, value) if isinstance(value, str) else _not_text(kind, value)
    if kind == "exec":
        return check_command(policy, value)
    return check_secret(policy, value) if isinstance(value, str) else _not_text(kind, value)


def _not_text(kind: str, value: Any) -> Decision:
    return Decision(False, kind, None, "policy.tools", f"the scope of {kind} must be text, not {type(value).__name__}")


def decide(
    policy: Policy,
    name: str,
    arguments: Mapping[str, Any],
    *,
    base: str,
    builtin: ToolRule | None = None,
) -> list[Decision]:
    """Every decision for calling tool `name` (`server.tool`) with `arguments`; the call may go
    ahead only when all are granted. `base` is the folder relative paths are taken from (the
    server's working folder); `builtin` is the built-in rule for the tool, when it has one."""
    for pattern in policy.deny_tools:
        if tool_denied(name, pattern):
            return [Decision(False, None, name, "policy.deny_tools", f"{name} matches {pattern} in policy.deny_tools")]
    rule = next((rule for rule in policy.rules if tool_matches(name, rule.pattern)), None) or builtin
    if rule is None:
        for pattern in policy.allow_tools:
            if tool_matches(name, pattern):
                return [Decision(True, None, name, "policy.allow_tools", f"{name} matches {pattern} in policy.allow_tools")]
        return [Decision(False, None, name, "policy.tools", f"no rule maps {name} to capabilities, and policy.allow_tools does not name it")]
    decisions: list[Decision] = []
    for kind in rule.needs:
        values: list[Any] = []
        for argument in rule.args.get(kind, ()):
            value = arguments.get(argument)
            if value is None:
                if argument in rule.arg_defaults:
                    values.append(rule.arg_defaults[argument])
                continue
            if isinstance(value, list) and kind != "exec":
                values.extend(value)
            else:
                values.append(value)
        if not values:
            values = list(rule.scopes.get(kind) or ((".",) if kind in FS else ("*",)))
        fixed_base = policy.root if not any(arguments.get(a) is not None for a in rule.args.get(kind, ())) else base
        for value in values:
            decisions.append(check_scope(policy, kind, value, fixed_base))
    if not decisions:
        decisions.append(Decision(True, None, name, rule.source, f"{name} needs no capability ({rule.source})"))
    return decisions


# --------------------------------------------------------------------------- moss serve's own tools

_SET_FOLDERS: Mapping[str, tuple[str, ...]] = {
    "moss": (".moss/capsules",),
    "loop": (".moss", ".cstack", ".needlecast"),
    "cstack": (".cstack",),
    "needlecast": (".needlecast",),
    "moe": (".moss/board",),
}
_WRITE_FOLDERS: Mapping[str, tuple[str, ...]] = {"loop": (".moss",)}


def moss_rule(server: str, tool: str, *, read_only: bool) -> ToolRule | None:
    """The built-in rule of one of `moss serve`'s tools, under any of its names (canonical_tool:
    `moss_store` and `capsule_store` are `moss.store`): its set's folders, read or written as its
    readOnly annotation says. The tools that take a file's path are checked on that path:
    export writes and import reads the file its `path` names (export's default folder,
    ~/.moss/exports, lies outside the workspace); `loop_export` writes its `output_path`
    (default .moss/exports), `loop_import` and `loop_import_preview` read their
    `bundle_path`. None for a tool of no known set."""
    canonical = canonical_tool(tool)
    tool_set = re.split(r"[._]", canonical, maxsplit=1)[0]
    folders = _SET_FOLDERS.get(tool_set)
    if folders is None:
        return None
    pattern = f"{server}.{tool}"
    source = "tool_map.moss"
    if canonical == "moss.export":
        return ToolRule(
            pattern, ("fs_read", "fs_write"), args={"fs_write": ("path",)}, scopes={"fs_read": folders}, arg_defaults={"path": "~/.moss/exports"}, source=source
        )
    if canonical == "moss.import":
        return ToolRule(pattern, ("fs_read", "fs_write"), args={"fs_read": ("path",)}, scopes={"fs_write": folders}, source=source)
    if canonical == "loop_export":
        return ToolRule(
            pattern,
            ("fs_read", "fs_write"),
            args={"fs_write": ("output_path",)},
            scopes={"fs_read": folders},
            arg_defaults={"output_path": ".moss/exports"},
            source=source,
        )
    if canonical in ("loop_import", "loop_import_preview"):
        writes = {} if canonical == "loop_import_preview" else {"fs_write": _WRITE_FOLDERS[tool_set]}
        return ToolRule(pattern, ("fs_read", *writes), args={"fs_read": ("bundle_path",)}, scopes=writes, source=source)
    if read_only:
        return ToolRule(pattern, ("fs_read",), scopes={"fs_read": folders}, source=source)
    return ToolRule(pattern, ("fs_write",), scopes={"fs_write": _WRITE_FOLDERS.get(tool_set, folders)}, source=source)
