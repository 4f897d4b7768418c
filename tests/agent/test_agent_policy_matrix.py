"""The policy matrix (issue 24, items 6-10): every deny the gate promises, tried in every
spelling that reaches the same thing, must never be granted.

- each default deny of a tool (purge) × its spellings (dots, underscores, Moss's newest
  `capsule_` names, the server's name, case) × policies that allow everything else;
- each denied command × the ways to run it (git's global options before the subcommand, a
  path to the program, wrappers, `sh -c`, quoting, aliases set on the command line);
- each denied address × its other spellings (inet_aton forms, IPv4-mapped IPv6, loopback
  names) × URL forms;
- URLs two parsers read differently, and `file:` URIs given as paths.

A case counts as a wrong allow when the gate grants it. The matrix only calls the gate's pure
functions that existed before the fix, so it ran against that code too: `wrong_allows()`
counted 704 wrong allows in 925 cases there (tools 186/246, commands 299/412, addresses
192/210, URLs 15/36, paths 12/21), and counts none now.
"""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from moss_files.agent import paths, policy, serve_gate

# --------------------------------------------------------------------------- the cases


def _case_variants(name: str) -> list[str]:
    return [name, name.upper(), name.title()]


PURGE_SPELLINGS = ["moss.purge", "moss_purge", "capsule_purge", "capsule.purge"]
# The tool as the agent's gate sees it: SERVER.TOOL, the server being any `tool_map = "moss"` entry.
AGENT_PURGE_NAMES = [(server, tool) for server in ("moss", "m", "moss-files") for spelling in PURGE_SPELLINGS for tool in _case_variants(spelling)]
# The agent's policies: the default, and ones that allow every tool by name or by rule.
AGENT_TOOL_POLICIES: list[dict[str, Any]] = [
    {},
    {"allow_tools": ["*"]},
    {"allow_tools": ["moss.*", "m.*", "moss-files.*"]},
    {"tools": [{"tool": "*.*", "needs": []}]},
]
# moss serve's gate, with the docs' example deny, under policies that allow the rest.
SERVE_PURGE_NAMES = [tool for spelling in PURGE_SPELLINGS for tool in _case_variants(spelling)]
SERVE_TOOL_POLICIES: list[dict[str, Any]] = [
    {"deny_tools": ["moss.purge"]},
    {"deny_tools": ["moss_purge"]},
    {"deny_tools": ["capsule_purge"]},
    {"deny_tools": ["moss.purge"], "allow_tools": ["moss.*", "capsule_*"]},
]
# Export and import, whose paths `path_roots` limits, under each of their names.
EXPORT_NAMES = ["moss.export", "moss_export", "capsule_export", "moss.import", "moss_import", "capsule_import"]


def git_forms(sub: str, rest: str = "") -> list[str]:
    """`git SUB REST` with git's global options in front, as git's own option parser reads them."""
    tail = f"{sub} {rest}".strip()
    options = [
        "",
        "-C .",
        "-C ./src",
        "--git-dir=.git",
        "--git-dir .git",
        "--work-tree=.",
        "--work-tree .",
        "-c a.b=c",
        "-c user.name=x -c user.email=y",
        "--config-env=a.b=HOME",
        "--config-env a.b=HOME",
        "--no-pager",
        "-P",
        "-p",
        "--paginate",
        "--bare",
        "--namespace=x",
        "--namespace x",
        "--exec-path=/usr/lib/git-core",
        "--literal-pathspecs",
        "--no-literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
        "--no-optional-locks",
        "--no-advice",
        "--no-lazy-fetch",
        "--no-replace-objects",
        "--shallow-file x",
        "--attr-source=HEAD",
        "--attr-source HEAD",
        "-C . -c a.b=c --no-pager",
    ]
    forms = [f"git {option} {tail}".replace("  ", " ") for option in options]
    forms += [
        f"/usr/bin/git {tail}",
        f"./git {tail}",
        f"GIT {tail}",
        f"/usr/lib/git-core/git-{tail}",
        f"git-{tail}",
        f"'git' {tail}",
        f'g"i"t {tail}',
        f"git '{sub}' {rest}".strip(),
        f'git "{sub}" {rest}'.strip(),
        f"git {sub[:2]}\\{sub[2:]} {rest}".strip(),
        f"env git {tail}",
        f"env -i git {tail}",
        f"env FOO=1 git {tail}",
        f"env -u HOME git {tail}",
        f"env -S 'git {tail}'",
        f"command git {tail}",
        f"exec git {tail}",
        f"nice git {tail}",
        f"nice -n 5 git {tail}",
        f"nohup git {tail}",
        f"timeout 5 git {tail}",
        f"time git {tail}",
        f"sudo git {tail}",
        f"sudo -u root git {tail}",
        f"xargs git {tail}",
        f"sh -c 'git {tail}'",
        f'bash -c "git {tail}"',
        f"sh -c 'git -C . {tail}'",
        f"sh -c 'env git --no-pager {tail}'",
        f"sh -c \"sh -c 'git {tail}'\"",
        f"git rebase --exec 'git {tail}' main",
        f"git -c core.pager='git {tail}' -p log",
    ]
    return forms


# Aliases and autocorrection set on the command line: git would run the denied command under
# another name, which no reading of the words can see, so the gate must refuse them.
UNDECIDABLE_GIT = [
    "git -c alias.p=push p",
    "git -c Alias.P=push P",
    "git -c alias.p='!git push' p",
    "git --config-env=alias.p=ENV p",
    "git --config-env alias.p=ENV p",
    "git -c include.path=/tmp/aliases p",
    "git -c includeIf.onbranch:main.path=/tmp/aliases p",
    "git -c help.autocorrect=immediate psuh",
    "git -c help.autoCorrect=1 psuh",
    "git --frobnicate push",
]
DENIED_COMMANDS = ["git push", "git config"]
COMMAND_CASES = (
    [(form, "git push") for form in git_forms("push") + git_forms("push", "origin main")]
    + [(form, "git config") for form in git_forms("config", "core.hooksPath /tmp/hooks")]
    + [(form, "alias") for form in UNDECIDABLE_GIT]
    + [(shlex.split(form), "list form") for form in ("git -C . push", "git --git-dir=.git push", "sh -c 'git push'", "/usr/bin/git push")]
)
COMMAND_POLICIES: list[dict[str, Any]] = [
    {"allow_exec": True, "exec": {"allow_commands": ["git"], "deny_commands": DENIED_COMMANDS}},
    {"allow_exec": True, "exec": {"allow_commands": ["*"], "deny_commands": DENIED_COMMANDS}},
]

# Other spellings of an address: what inet_aton (the C library's resolver) and URL parsers
# accept for it, and the IPv6 forms that reach the same IPv4 host.
METADATA_SPELLINGS = [
    "169.254.169.254",
    "169.254.169.254.",
    "2852039166",
    "0xa9fea9fe",
    "0XA9FEA9FE",
    "0251.0376.0251.0376",
    "0xa9.0xfe.0xa9.0xfe",
    "0251.254.169.254",
    "169.254.43518",
    "169.16689662",
    "[::ffff:169.254.169.254]",
    "[::ffff:a9fe:a9fe]",
    "[0:0:0:0:0:ffff:a9fe:a9fe]",
    "[::169.254.169.254]",
    "[64:ff9b::a9fe:a9fe]",
]
LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "127.000.000.001",
    "2130706433",
    "0x7f000001",
    "017700000001",
    "0x7f.1",
    "127.0.0.2",
    "0",
    "0.0.0.0",
    "0x0",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "localhost",
    "LOCALHOST.",
    "api.localhost",
]
DENIED_ADDRESSES = {"169.254.169.254": METADATA_SPELLINGS, "127.0.0.1": LOOPBACK_SPELLINGS}


def url_forms(host: str) -> list[str]:
    return [host, f"{host}:8080", f"http://{host}/", f"https://{host}:443/latest/meta-data/", f"HTTP://{host}", f"http://{host}/?next=http://ok.com/"]


# URLs whose host differs between parsers (Python's urlsplit, WHATWG as browsers and Node read
# URLs, or a gate that drops the userinfo): granted, one of them reaches a denied host.
AMBIGUOUS_URLS = [
    "http://allowed.com\\@evil.com/",
    "http://allowed.com\\\\@evil.com/",
    "http://allowed.com:80\\@evil.com/",
    "https://allowed.com\\.evil.com/",
    "http://evil.com\\@allowed.com/",
    "http://allowed.com@evil.com/",
    "http://allowed.com:x@evil.com/",
    "http://evil.com@allowed.com/",
    "http:evil.com",
    "http:/evil.com",
    "http:\\\\evil.com",
    "http://evil.com\t.allowed.com/",
    "http://allowed.com\n@evil.com/",
    "http://allowed.com%2f@evil.com/",
    "http://evil%2ecom/",
    "http://1.2.3.4.5/",
    "http://08.1/",
    "http://4294967296/",
]
# Paths that are URIs: a tool that reads them as URIs reaches the file they name.
URI_PATHS = ["file:/etc/passwd", "file:///etc/passwd", "file://localhost/etc/passwd", "FILE:/etc/passwd", "file:.git/config", "http://evil.com/x"]


# --------------------------------------------------------------------------- running the matrix


def _granted(decisions: list[policy.Decision]) -> bool:
    return bool(decisions) and all(decision.granted for decision in decisions)


def _make(root: Path, table: dict[str, Any]) -> policy.Policy:
    return policy.policy_from_table(table, {}, root=str(root), resolve=paths.resolve, where="policy")


def tool_cases(root: Path) -> Iterator[tuple[str, bool]]:
    for table, (server, tool) in itertools.product(AGENT_TOOL_POLICIES, AGENT_PURGE_NAMES):
        gate = _make(root, table)
        name = f"{server}.{tool}"
        decisions = policy.decide(gate, name, {}, base=str(root), builtin=policy.moss_rule(server, tool, read_only=False))
        yield f"agent {table} {name}", _granted(decisions)
    for table, tool in itertools.product(SERVE_TOOL_POLICIES, SERVE_PURGE_NAMES):
        rules = serve_gate.serve_policy({"serve": table}, root=root)
        yield f"serve {table} {tool}", _granted(serve_gate.decide(rules, tool, {}, read_only=False, base=str(root)))
    rules = serve_gate.serve_policy({"serve": {"path_roots": ["."]}}, root=root)
    for tool, path in itertools.product(EXPORT_NAMES, ["/tmp/elsewhere.jsonl", "../out.jsonl", *URI_PATHS]):
        arguments = {"path": path}
        yield f"serve path_roots {tool} {path}", _granted(serve_gate.decide(rules, tool, arguments, read_only=False, base=str(root)))
    gate = _make(root, {"allow_tools": ["moss.*"]})
    for tool, path in itertools.product(["moss.export", "moss_export", "capsule_export"], ["/tmp/elsewhere.jsonl", "file:///tmp/x.jsonl"]):
        decisions = policy.decide(gate, f"moss.{tool}", {"path": path}, base=str(root), builtin=policy.moss_rule("moss", tool, read_only=False))
        yield f"agent export {tool} {path}", _granted(decisions)


def command_cases(root: Path) -> Iterator[tuple[str, bool]]:
    for table in COMMAND_POLICIES:
        gate = _make(root, table)
        for command, label in COMMAND_CASES:
            yield f"{table['exec']['allow_commands']} {label}: {command!r}", policy.check_scope(gate, "exec", command, str(root)).granted


def address_cases(root: Path) -> Iterator[tuple[str, bool]]:
    for denied, spellings in DENIED_ADDRESSES.items():
        gate = _make(root, {"allow_network": True, "net_http": {"allow_domains": ["*"], "deny_domains": [denied]}})
        for spelling in spellings:
            for value in url_forms(spelling):
                yield f"deny {denied}: {value}", policy.check_scope(gate, "net_http", value, str(root)).granted


def url_cases(root: Path) -> Iterator[tuple[str, bool]]:
    allow_list = _make(root, {"allow_network": True, "net_http": {"allow_domains": ["allowed.com"]}})
    deny_list = _make(root, {"allow_network": True, "net_http": {"allow_domains": ["*"], "deny_domains": ["evil.com", "4.3.2.1"]}})
    for url in AMBIGUOUS_URLS:
        yield f"allow allowed.com: {url!r}", policy.check_scope(allow_list, "net_http", url, str(root)).granted
        yield f"deny evil.com: {url!r}", policy.check_scope(deny_list, "net_http", url, str(root)).granted


def path_cases(root: Path) -> Iterator[tuple[str, bool]]:
    gate = _make(root, {})
    for kind, path in itertools.product(policy.FS, URI_PATHS):
        yield f"{kind} {path}", policy.check_scope(gate, kind, path, str(root)).granted
    # The default deny_write, in every spelling of the same place.
    for path in (
        ".git/config",
        "./.git/config",
        "src/../.git/config",
        ".git/./hooks/pre-commit",
        ".moss/agent.toml",
        ".moss//config.toml",
        "src/../.moss/agent.toml",
    ):
        yield f"fs_write {path}", policy.check_scope(gate, "fs_write", path, str(root)).granted
    yield "fs_write absolute .git", policy.check_scope(gate, "fs_write", str(root / ".git" / "HEAD"), str(root)).granted
    (root / "src" / "dotgit").symlink_to(root / ".git")
    yield "fs_write through a link", policy.check_scope(gate, "fs_write", "src/dotgit/config", str(root)).granted


FAMILIES = {"tools": tool_cases, "commands": command_cases, "addresses": address_cases, "urls": url_cases, "paths": path_cases}


def workspace(base: Path) -> Path:
    root = base / "work"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    return root


def wrong_allows(base: Path) -> dict[str, tuple[int, list[str]]]:
    """{family: (cases, the cases the gate granted)}, every case of the matrix being a deny."""
    out = {}
    for family, cases in FAMILIES.items():
        listed = list(cases(workspace(base / family)))
        out[family] = (len(listed), [label for label, granted in listed if granted])
    return out


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_policy_matrix_has_no_wrong_allow(family: str, tmp_path: Path) -> None:
    listed = list(FAMILIES[family](workspace(tmp_path)))
    wrong = [label for label, granted in listed if granted]
    assert len(listed) > 20
    assert wrong == [], f"{len(wrong)} of {len(listed)} {family} cases granted:\n" + "\n".join(wrong)
