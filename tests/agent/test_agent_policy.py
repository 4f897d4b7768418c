"""The capability gate: every matching rule, with the cases the reference runtime got wrong
(string prefixes for paths, suffixes for domains, no word boundary for commands), property
tests over generated paths with real links on disk, and the gate in front of `moss serve`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moss_files.agent import paths, policy, serve_gate
from moss_files.agent.policy import Policy, ToolRule


def make_policy(root: Path, table: dict[str, Any] | None = None, secrets: dict[str, Any] | None = None) -> Policy:
    return policy.policy_from_table(table or {}, secrets or {}, root=str(root), resolve=paths.resolve, where="policy")


def granted(decisions: list[policy.Decision]) -> bool:
    return bool(decisions) and all(decision.granted for decision in decisions)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    (tmp_path / "workshop").mkdir()
    (tmp_path / "secret").mkdir()
    return root


# --------------------------------------------------------------------------- defaults


def test_with_no_settings_exec_network_and_secrets_are_denied_and_files_stay_in_the_workspace(ws: Path) -> None:
    gate = make_policy(ws)
    assert not policy.check_scope(gate, "exec", "ls", str(ws)).granted
    assert policy.check_scope(gate, "exec", "ls", str(ws)).rule == "policy.allow_exec"
    assert not policy.check_scope(gate, "net_http", "https://api.github.com/", str(ws)).granted
    assert not policy.check_scope(gate, "secrets_read", "GITHUB_TOKEN", str(ws)).granted
    assert policy.check_scope(gate, "secrets_read", "ANTHROPIC_API_KEY", str(ws)).granted  # the model's key only
    assert policy.check_scope(gate, "fs_read", "src/main.py", str(ws)).granted
    assert policy.check_scope(gate, "fs_write", "src/main.py", str(ws)).granted
    assert not policy.check_scope(gate, "fs_read", "/etc/passwd", str(ws)).granted
    # The agent may not rewrite its own policy, the workspace's settings, or git's internals.
    for path in (".moss/agent.toml", ".moss/config.toml", ".git/config"):
        refused = policy.check_scope(gate, "fs_write", path, str(ws))
        assert not refused.granted and refused.rule == "policy.fs.deny_write", path
    assert policy.check_scope(gate, "fs_read", ".moss/agent.toml", str(ws)).granted


def test_a_deny_overrides_an_allow(ws: Path) -> None:
    gate = make_policy(
        ws,
        {
            "allow_exec": True,
            "allow_network": True,
            "deny": ["fs_write"],
            "exec": {"allow_commands": ["git"], "deny_commands": ["git push"]},
            "net_http": {"allow_domains": ["github.com"], "deny_domains": ["gist.github.com"]},
            "fs": {"read_roots": ["."], "deny_read": ["src/private"]},
        },
        {"keys": ["*"], "deny": ["AWS_SECRET_ACCESS_KEY"]},
    )
    assert policy.check_scope(gate, "exec", "git status", str(ws)).granted
    assert not policy.check_scope(gate, "exec", "git push origin main", str(ws)).granted
    assert policy.check_scope(gate, "net_http", "https://api.github.com", str(ws)).granted
    assert not policy.check_scope(gate, "net_http", "https://gist.github.com/x", str(ws)).granted
    assert not policy.check_scope(gate, "fs_write", "src/a.py", str(ws)).granted  # the whole capability
    assert policy.check_scope(gate, "fs_write", "src/a.py", str(ws)).rule == "policy.deny"
    assert not policy.check_scope(gate, "fs_read", "src/private/key.pem", str(ws)).granted
    assert policy.check_scope(gate, "secrets_read", "GITHUB_TOKEN", str(ws)).granted
    assert not policy.check_scope(gate, "secrets_read", "AWS_SECRET_ACCESS_KEY", str(ws)).granted


# --------------------------------------------------------------------------- paths


def test_paths_are_resolved_before_they_are_compared(ws: Path) -> None:
    gate = make_policy(ws)
    base = str(ws)
    assert not policy.check_scope(gate, "fs_read", "../secret/x", base).granted  # `.` never contains `../x`
    assert not policy.check_scope(gate, "fs_read", "src/../../secret/x", base).granted
    assert policy.check_scope(gate, "fs_read", "src/../README.md", base).granted
    assert not policy.check_scope(gate, "fs_read", str(ws.parent / "workshop" / "a"), base).granted  # /work never matches /workshop
    assert not policy.check_scope(gate, "fs_read", "~/notes.txt", base).granted
    assert not policy.check_scope(gate, "fs_read", "src/a\x00b", base).granted
    # A link inside the workspace that leads out of it is followed, then refused.
    (ws / "src" / "out").symlink_to(ws.parent / "secret")
    decision = policy.check_scope(gate, "fs_read", "src/out/id_rsa", base)
    assert not decision.granted and decision.scope == str((ws.parent / "secret" / "id_rsa").resolve())
    # `link/..` means the parent of the link's target, as the kernel reads it.
    assert not policy.check_scope(gate, "fs_read", "src/out/../workshop/x", base).granted
    # A link outside that leads in is fine: what counts is where the path ends up.
    (ws.parent / "into").symlink_to(ws / "src")
    assert policy.check_scope(gate, "fs_read", str(ws.parent / "into" / "a.py"), base).granted


def test_within_compares_components_not_strings() -> None:
    assert policy.within("/tmp", "/tmp") and policy.within("/tmp/a/b", "/tmp")
    assert not policy.within("/tmpfoo", "/tmp") and not policy.within("/tmp-x/a", "/tmp")
    assert not policy.within("/", "/tmp") and policy.within("/anything", "/")
    assert not policy.within("/work/ab", "/work/a")


def test_roots_in_the_settings_are_resolved_too(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (ws / "shared").symlink_to(tmp_path / "shared")
    gate = make_policy(ws, {"fs": {"read_roots": [".", "shared"], "write_roots": ["src"]}})
    assert policy.check_scope(gate, "fs_read", str(tmp_path / "shared" / "a"), str(ws)).granted
    assert not policy.check_scope(gate, "fs_write", "README.md", str(ws)).granted
    assert policy.check_scope(gate, "fs_write", "src/README.md", str(ws)).granted
    assert not policy.check_scope(gate, "fs_write", "srcfoo/README.md", str(ws)).granted


SEGMENTS = st.sampled_from(["a", "b", "..", ".", "", "src", "out", "in", "loop", "x y", "ä"])


@settings(max_examples=300)
@given(parts=st.lists(SEGMENTS, min_size=1, max_size=8), absolute=st.booleans())
def test_a_granted_path_always_resolves_inside_a_root(parts: list[str], absolute: bool, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Over generated paths (with `..`, `.`, empty parts and links that lead out, in and in
    circles), the gate grants exactly the paths whose real location is inside the root, and
    the oracle here is the operating system's own view of the path, not our matcher."""
    base = _linked_tree(tmp_path_factory)
    root = base / "work"
    gate = make_policy(root, {"fs": {"read_roots": ["."], "deny_read": []}})
    raw = "/".join(parts)
    text = str(root / raw) if absolute else raw
    decision = policy.check_scope(gate, "fs_read", text, str(root))
    real = os.path.realpath(os.path.join(str(root), text))
    inside = os.path.commonpath([real, str(root.resolve())]) == str(root.resolve())
    assert decision.granted == inside, (text, real)
    if decision.granted:
        assert decision.scope == real


_TREES: dict[str, Path] = {}


def _linked_tree(factory: pytest.TempPathFactory) -> Path:
    """work/{src,a,b} with links: out -> ../outside, in -> src, loop -> loop (a cycle)."""
    if "tree" not in _TREES:
        base = factory.mktemp("tree")
        root = base / "work"
        for name in ("src", "a", "b"):
            (root / name).mkdir(parents=True)
        (base / "outside").mkdir()
        (base / "workfoo").mkdir()
        (root / "out").symlink_to(base / "outside")
        (root / "src" / "out").symlink_to("../../outside")
        (root / "in").symlink_to(root / "src")
        (root / "loop").symlink_to(root / "loop")
        _TREES["tree"] = base
    return _TREES["tree"]


@settings(max_examples=300)
@given(name=st.text(alphabet="abt/.-", min_size=1, max_size=12))
def test_a_prefix_of_a_root_never_counts_as_inside_it(name: str) -> None:
    root = "/srv/tmp"
    path = os.path.normpath("/srv/" + name)
    expected = path == root or path.startswith(root + "/")
    assert policy.within(path, root) == expected


# --------------------------------------------------------------------------- domains


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("api.github.com", True),
        ("https://api.github.com/repos/x", True),
        ("https://API.GitHub.com./x", True),  # case and a trailing dot do not matter
        ("http://api.github.com:8443/x", True),
        ("uploads.api.github.com", True),  # a subdomain, on a label boundary
        ("evilapi.github.com", False),
        ("github.com", False),
        ("evilgithub.com", False),
        ("api.github.com.evil.com", False),
        ("https://api.github.com@evil.com/", False),  # userinfo is not the host
        ("https://evil.com\\@api.github.com/", False),  # a backslash is a slash
        ("https://evil.com/?u=https://api.github.com", False),
        ("", False),
        ("https://", False),
    ],
)
def test_domains_match_exactly_or_on_a_label_boundary(ws: Path, value: str, expected: bool) -> None:
    gate = make_policy(ws, {"allow_network": True, "net_http": {"allow_domains": ["api.github.com"]}})
    assert policy.check_scope(gate, "net_http", value, str(ws)).granted is expected


def test_domain_patterns(ws: Path) -> None:
    gate = make_policy(ws, {"allow_network": True, "net_http": {"allow_domains": ["*.example.org", "bücher.de"]}})
    assert policy.check_scope(gate, "net_http", "a.example.org", str(ws)).granted
    assert not policy.check_scope(gate, "net_http", "example.org", str(ws)).granted  # *. means subdomains only
    assert not policy.check_scope(gate, "net_http", "badexample.org", str(ws)).granted
    assert policy.check_scope(gate, "net_http", "https://xn--bcher-kva.de/", str(ws)).granted  # IDNA
    assert policy.check_scope(gate, "net_http", "https://BÜCHER.de/", str(ws)).granted
    with pytest.raises(ValueError):
        make_policy(ws, {"net_http": {"allow_domains": ["https://github.com/"]}})
    anything = make_policy(ws, {"allow_network": True, "net_http": {"allow_domains": ["*"]}})
    assert policy.check_scope(anything, "net_http", "any.where", str(ws)).granted


# --------------------------------------------------------------------------- commands


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("git", True),
        ("git status", True),
        ("git  log --oneline", True),
        (["git", "diff"], True),
        ("gitk", False),
        ("git-lfs pull", False),
        ("/usr/bin/git status", False),
        ("FOO=1 git status", False),
        ("git status; rm -rf /", False),
        ("git status && curl x", False),
        ("git log | sh", False),
        ("git $(rm -rf /)", False),
        ("git `id`", False),
        ("git status > /etc/passwd", False),
        ("git status\nrm -rf /", False),
        (["git", "status; rm"], False),
        ("git 'unbalanced", False),
        ("", False),
        ("pytest -q", True),
        ("pytestx", False),
    ],
)
def test_commands_match_word_by_word(ws: Path, value: Any, expected: bool) -> None:
    gate = make_policy(ws, {"allow_exec": True, "exec": {"allow_commands": ["git", "pytest -q", "pytest"]}})
    assert policy.check_scope(gate, "exec", value, str(ws)).granted is expected


def test_a_multi_word_pattern_needs_all_its_words(ws: Path) -> None:
    gate = make_policy(ws, {"allow_exec": True, "exec": {"allow_commands": ["git status"]}})
    assert policy.check_scope(gate, "exec", "git status --short", str(ws)).granted
    assert not policy.check_scope(gate, "exec", "git statusx", str(ws)).granted
    assert not policy.check_scope(gate, "exec", "git push", str(ws)).granted
    assert not policy.check_scope(gate, "exec", "git", str(ws)).granted


# --------------------------------------------------------------------------- tools


def test_a_tool_no_rule_maps_is_denied_unless_allowed_by_name(ws: Path) -> None:
    gate = make_policy(ws, {"allow_tools": ["demo.echo", "other.*"]})
    assert granted(policy.decide(gate, "demo.echo", {}, base=str(ws)))
    assert granted(policy.decide(gate, "other.anything", {}, base=str(ws)))
    refused = policy.decide(gate, "demo.fetch", {}, base=str(ws))
    assert not granted(refused) and refused[0].rule == "policy.tools"
    denied = make_policy(ws, {"allow_tools": ["demo.*"], "deny_tools": ["demo.echo"]})
    assert policy.decide(denied, "demo.echo", {}, base=str(ws))[0].rule == "policy.deny_tools"


def test_a_rule_names_the_arguments_that_carry_each_scope(ws: Path) -> None:
    gate = make_policy(
        ws,
        {
            "allow_network": True,
            "net_http": {"allow_domains": ["example.com"]},
            "tools": [
                {"tool": "files.copy", "needs": ["fs_read", "fs_write"], "fs_read": ["source"], "fs_write": ["target"]},
                {"tool": "web.*", "needs": ["net_http"], "net_http": ["url", "urls"]},
            ],
        },
    )
    assert granted(policy.decide(gate, "files.copy", {"source": "src/a", "target": "src/b"}, base=str(ws)))
    escaping = policy.decide(gate, "files.copy", {"source": "../secret/a", "target": "src/b"}, base=str(ws))
    assert [d.granted for d in escaping] == [False, True]
    assert granted(policy.decide(gate, "web.get", {"url": "https://example.com/a"}, base=str(ws)))
    assert not granted(policy.decide(gate, "web.get", {"urls": ["https://example.com/a", "https://evil.com"]}, base=str(ws)))
    # Without the argument, the scope is `*`, which only an allow-all grants.
    assert not granted(policy.decide(gate, "web.get", {}, base=str(ws)))


def test_the_built_in_map_of_moss_serve(ws: Path) -> None:
    gate = make_policy(ws)
    base = str(ws)

    def check(tool: str, arguments: dict[str, Any], *, read_only: bool) -> list[policy.Decision]:
        return policy.decide(gate, f"moss.{tool}", arguments, base=base, builtin=policy.moss_rule("moss", tool, read_only=read_only))

    assert [d.capability for d in check("moss.fetch", {"name": "x"}, read_only=True)] == ["fs_read"]
    assert [d.capability for d in check("moss.store", {}, read_only=False)] == ["fs_write"]
    assert granted(check("cstack.status", {}, read_only=True))
    assert granted(check("moss_store", {}, read_only=False))  # served with --names underscore
    # Export without a path writes to ~/.moss/exports, outside the workspace: denied.
    assert not granted(check("moss.export", {}, read_only=False))
    assert granted(check("moss.export", {"path": ".moss/exports/a.jsonl"}, read_only=False))
    assert not granted(check("moss.import", {"path": "/etc/passwd"}, read_only=False))
    # purge is in the default deny_tools.
    assert policy.decide(gate, "moss.moss.purge", {}, base=base, builtin=policy.moss_rule("moss", "moss.purge", read_only=False))[0].rule == "policy.deny_tools"
    assert policy.moss_rule("moss", "weird.tool", read_only=True) is None


def test_bad_policy_settings_are_named(ws: Path) -> None:
    for table in (
        {"deny": ["fs_delete"]},
        {"allow_exec": "yes"},
        {"fs": {"read_roots": "."}},
        {"tools": [{"tool": "x", "needs": ["fs_read"]}]},
        {"tools": [{"tool": "a.b", "needs": ["teleport"]}]},
        {"tools": [{"tool": "a.b", "needs": ["fs_read"], "net_http": ["url"]}]},
        {"exec": {"allow_commands": ["git; rm"]}},
        {"deny_tool": ["moss.moss.purge"]},  # a misspelt key never passes for an absent one
        {"fs": {"deny_writes": [".env"]}},
    ):
        with pytest.raises(ValueError):
            make_policy(ws, table)


def test_the_toolkits_own_files_stay_protected_when_the_agent_works_in_a_subfolder(ws: Path) -> None:
    (ws / "app").mkdir()
    gate = policy.policy_from_table({}, {}, root=str(ws / "app"), resolve=paths.resolve, where="policy", toolkit_root=str(ws))
    assert policy.check_scope(gate, "fs_write", "main.py", str(ws / "app")).granted
    assert not policy.check_scope(gate, "fs_write", str(ws / ".moss" / "agent.toml"), str(ws)).granted
    assert not policy.check_scope(gate, "fs_write", str(ws / "src" / "x"), str(ws)).granted  # outside app/


def test_rule_patterns() -> None:
    assert policy.tool_matches("a.b", "a.b") and not policy.tool_matches("a.bc", "a.b")
    assert policy.tool_matches("moss.moss.fetch", "moss.*") and policy.tool_matches("x.y", "*")
    assert not policy.tool_matches("mossy.fetch", "moss.*")
    assert isinstance(ToolRule("a.b", ()), ToolRule)


# --------------------------------------------------------------------------- moss serve's gate


def test_the_serve_policy(ws: Path) -> None:
    rules = serve_gate.serve_policy({"serve": {"read_only": True, "deny_tools": ["moss.purge"], "path_roots": ["."]}}, root=ws)
    base = str(ws)
    assert serve_gate.decide(rules, "moss.purge", {}, read_only=False, base=base)[0].rule == "serve.deny_tools"
    assert serve_gate.decide(rules, "moss_purge", {}, read_only=False, base=base)[0].rule == "serve.deny_tools"
    assert serve_gate.decide(rules, "moss.store", {}, read_only=False, base=base)[0].rule == "serve.read_only"
    assert granted(serve_gate.decide(rules, "moss.fetch", {}, read_only=True, base=base))
    writes = serve_gate.serve_policy({"serve": {"path_roots": ["."], "allow_tools": ["moss.*"]}}, root=ws)
    assert not granted(serve_gate.decide(writes, "moss.export", {"path": "/tmp/x.jsonl"}, read_only=False, base=base))
    assert granted(serve_gate.decide(writes, "moss.export", {"path": ".moss/exports/x.jsonl"}, read_only=False, base=base))
    assert serve_gate.decide(writes, "cstack.status", {}, read_only=True, base=base)[0].rule == "serve.allow_tools"
    assert not serve_gate.serve_policy({}, root=ws).limits and serve_gate.serve_policy({}, root=ws).audit
    from moss_files.foundation.errors import InvalidDocument

    for bad in ({"serve": []}, {"serve": {"audit": "yes"}}, {"serve": {"deny_tools": "x"}}, {"serve": {"reed_only": True}}):
        with pytest.raises(InvalidDocument) as caught:
            serve_gate.serve_policy(bad, root=ws)
        assert caught.value.code == "SCHEMA_ERROR"


# --------------------------------------------------------------------------- issue 24: spellings that slipped past a deny


def test_the_default_deny_of_purge_holds_for_every_name_of_the_tool(ws: Path) -> None:
    """`moss serve --names underscore` serves `moss_purge` (Codex's spelling), `--tools
    capsule` serves `capsule_purge`: the agent's gate granted both and the capsule was purged."""
    for table in ({}, {"allow_tools": ["*"]}):
        gate = make_policy(ws, table)
        for server, tool in (("moss", "moss_purge"), ("moss", "capsule_purge"), ("moss", "moss.purge"), ("m", "moss_purge")):
            decisions = policy.decide(gate, f"{server}.{tool}", {}, base=str(ws), builtin=policy.moss_rule(server, tool, read_only=False))
            assert [d.rule for d in decisions] == ["policy.deny_tools"], (table, server, tool)


def test_tool_patterns_match_every_spelling_of_a_tool_and_denies_any_case(ws: Path) -> None:
    assert policy.canonical_tool("moss_fetch_many") == policy.canonical_tool("capsule_fetch_many") == "moss.fetch_many"
    assert policy.canonical_tool("cstack_status") == "cstack.status" and policy.canonical_tool("loop_scan") == "loop_scan"
    assert policy.tool_matches("moss.moss_store", "moss.moss.*") and policy.tool_matches("moss.moss.store", "moss.capsule_*")
    assert policy.tool_matches("moss.moss.purge", "*moss.purge") and not policy.tool_matches("moss.moss.storex", "moss.moss.store")
    assert not policy.tool_matches("moss.MOSS.STORE", "moss.moss.*")  # an allow is exact about case ...
    assert policy.tool_denied("moss.MOSS.PURGE", "moss.moss.purge") and policy.tool_denied("moss.moss_purge", "moss__moss_purge")  # ... a deny is not
    assert not policy.tool_denied("moss.moss.purged", "moss.moss.purge") and not policy.tool_denied("mossy.x", "moss.*")
    assert policy.tool_matches("moss_purge", "moss.purge", qualified=False) and policy.tool_matches("capsule_store", "moss.*", qualified=False)
    # An allow by any spelling reaches the tool under its other names; the rule stays the tool's own.
    gate = make_policy(ws, {"allow_tools": ["demo.read.file"]})
    assert granted(policy.decide(gate, "demo.read_file", {}, base=str(ws)))


def test_the_capsule_names_and_the_bundle_paths_are_mapped_by_the_built_in_rules(ws: Path) -> None:
    gate = make_policy(ws, {"allow_tools": ["moss.*"]})
    base = str(ws)

    def check(tool: str, arguments: dict[str, Any], *, read_only: bool = False) -> list[policy.Decision]:
        return policy.decide(gate, f"moss.{tool}", arguments, base=base, builtin=policy.moss_rule("moss", tool, read_only=read_only))

    # capsule_export was unmapped, so `allow_tools = ["moss.*"]` granted it any path.
    assert not granted(check("capsule_export", {"path": "/tmp/elsewhere.jsonl"}))
    assert granted(check("capsule_export", {"path": ".moss/exports/a.jsonl"}))
    assert [d.capability for d in check("capsule_fetch", {}, read_only=True)] == ["fs_read"]
    # The sharing tools are checked on the file they read or write, not only on .moss.
    assert not granted(check("loop_import", {"bundle_path": "/etc/passwd"}))
    assert not granted(check("loop_import_preview", {"bundle_path": "../outside.json"}, read_only=True))
    assert not granted(check("loop_export", {"output_path": "/tmp/bundle.json"}))
    assert granted(check("loop_export", {}))  # the default, .moss/exports, is in the workspace
    assert granted(check("loop_import", {"bundle_path": ".moss/exports/b.json"}))


def test_moss_serve_gate_denies_every_name_and_limits_every_path_tool(ws: Path) -> None:
    rules = serve_gate.serve_policy({"serve": {"deny_tools": ["moss.purge"], "path_roots": ["."]}}, root=ws)
    base = str(ws)
    for name in ("capsule_purge", "Moss.Purge", "MOSS_PURGE"):
        assert serve_gate.decide(rules, name, {}, read_only=False, base=base)[0].rule == "serve.deny_tools", name
    for name, arguments in (
        ("capsule_export", {"path": "/tmp/x.jsonl"}),
        ("capsule_import", {"path": "/tmp/x.jsonl"}),
        ("loop_import", {"bundle_path": "/tmp/b.json"}),
    ):
        assert [d.rule for d in serve_gate.decide(rules, name, arguments, read_only=False, base=base)] == ["serve.path_roots"], name
    allowed = serve_gate.serve_policy({"serve": {"allow_tools": ["moss.*"]}}, root=ws)
    assert granted(serve_gate.decide(allowed, "capsule_fetch", {}, read_only=True, base=base))
    assert not granted(serve_gate.decide(allowed, "cstack_status", {}, read_only=True, base=base))


REPORTED_COMMANDS = [
    "git -C . push",
    "git --git-dir=.git push",
    "git -c a.b=c push",
    "git --no-pager push origin main",
    "git -C . config core.hooksPath /tmp/h",
]


@pytest.mark.parametrize("command", REPORTED_COMMANDS)
def test_an_option_before_the_denied_word_does_not_hide_it(ws: Path, command: str) -> None:
    gate = make_policy(ws, {"allow_exec": True, "exec": {"allow_commands": ["git"], "deny_commands": ["git push", "git config"]}})
    decision = policy.check_scope(gate, "exec", command, str(ws))
    assert not decision.granted and decision.rule == "policy.exec.deny_commands"


@pytest.mark.parametrize(
    "command",
    [
        "git -c alias.p=push p",
        "git --config-env=alias.p=MY_ALIAS p",
        "git -c include.path=/tmp/more p",
        "git -c help.autocorrect=immediate psuh",
        "git --unknown-option push",
        "git -C",
    ],
)
def test_a_command_the_gate_cannot_read_is_refused_with_its_own_rule(ws: Path, command: str) -> None:
    gate = make_policy(ws, {"allow_exec": True, "exec": {"allow_commands": ["*"], "deny_commands": ["git push"]}})
    decision = policy.check_scope(gate, "exec", command, str(ws))
    assert not decision.granted and decision.rule == "policy.exec.undecidable"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git status", True),
        ("git -C . status --short", True),
        ("git --no-pager log --oneline --grep push", True),  # push is log's argument, not the subcommand
        ("git commit -m push", True),
        ("git push-docs", True),  # another command
        ("git -c alias.p=push status", False),  # undecidable, whatever it runs
        ("env FOO=1 pytest -q", True),
        ("npm --prefix web publish", False),  # another program: the denied words in order, wherever they stand
        ("npm run publish-docs", True),
        ("npm install", True),
        ("sh -c 'npm publish'", False),
        ("git -C . push", False),
    ],
)
def test_denied_commands_refuse_what_runs_them_and_nothing_else(ws: Path, command: str, expected: bool) -> None:
    gate = make_policy(ws, {"allow_exec": True, "exec": {"allow_commands": ["*"], "deny_commands": ["git push", "npm publish"]}})
    assert policy.check_scope(gate, "exec", command, str(ws)).granted is expected


def test_git_global_options_are_read_as_git_reads_them() -> None:
    assert policy.git_command(["-C", ".", "-c", "a.b=c", "--no-pager", "push", "origin"]) == ("push", ("origin",))
    assert policy.git_command(["--git-dir", ".git", "--work-tree=.", "log"]) == ("log", ())
    assert policy.git_command(["--version"]) == ("version", ()) and policy.git_command(["-h", "push"]) == ("help", ("push",))
    assert policy.git_command(["--exec-path"]) is None and policy.git_command([]) is None  # prints, runs nothing
    for words in (["-C"], ["--frob", "push"], ["-c", "Alias.x=push", "x"]):
        with pytest.raises(policy.Undecidable):
            policy.git_command(words)


REPORTED_ADDRESSES = ["2852039166", "0xa9fea9fe", "0251.0376.0251.0376", "169.254.43518", "[::ffff:169.254.169.254]"]


@pytest.mark.parametrize("host", REPORTED_ADDRESSES)
def test_a_denied_address_is_denied_in_every_spelling(ws: Path, host: str) -> None:
    gate = make_policy(ws, {"allow_network": True, "net_http": {"allow_domains": ["*"], "deny_domains": ["169.254.169.254"]}})
    decision = policy.check_scope(gate, "net_http", f"http://{host}/latest/meta-data/", str(ws))
    assert not decision.granted and decision.rule == "policy.net_http.deny_domains"
    assert decision.scope == str(policy.hosts.ip_address_of(host))  # the address, as ipaddress writes it


@pytest.mark.parametrize("host", ["127.1", "0", "[::1]", "localhost", "0x7f000001", "[::ffff:127.0.0.1]"])
def test_a_denied_loopback_address_denies_every_way_to_this_machine(ws: Path, host: str) -> None:
    for denied in ("127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.0/8"):
        gate = make_policy(ws, {"allow_network": True, "net_http": {"allow_domains": ["*"], "deny_domains": [denied]}})
        assert not policy.check_scope(gate, "net_http", f"http://{host}:8080/", str(ws)).granted, (denied, host)


def test_addresses_and_networks_in_domain_lists(ws: Path) -> None:
    gate = make_policy(ws, {"allow_network": True, "net_http": {"allow_domains": ["*"], "deny_domains": ["10.0.0.0/8", "fd00::/8", "169.254.169.254"]}})

    def allowed(value: str) -> bool:
        return policy.check_scope(gate, "net_http", value, str(ws)).granted

    assert not allowed("http://167772161/") and not allowed("http://[::ffff:10.1.2.3]/") and not allowed("http://[fd12::1]/")
    assert allowed("http://169.254.169.253/") and allowed("http://11.0.0.1/") and allowed("https://example.com/") and allowed("http://[2001:db8::1]/")
    only = make_policy(ws, {"allow_network": True, "net_http": {"allow_domains": ["192.0.2.7", "example.com"]}})
    assert policy.check_scope(only, "net_http", "http://3221225991/", str(ws)).granted  # 192.0.2.7, spelled as one number
    assert not policy.check_scope(only, "net_http", "http://192.0.2.8/", str(ws)).granted
    assert not policy.check_scope(only, "net_http", "http://93.184.216.34/", str(ws)).granted  # a name never matches an address
    assert policy.normalize_domain_pattern("[::1]", "x") == "::1" and policy.normalize_domain_pattern("0x7f.1", "x") == "127.0.0.1"
    for bad in ("10.0.0.1/8", "*.10.0.0.1", "1.2.3.4.5", "http://example.com"):
        with pytest.raises(ValueError):
            policy.normalize_domain_pattern(bad, "x")


@pytest.mark.parametrize(
    "url",
    [
        "http://allowed.com\\@evil.com/",
        "http://allowed.com@evil.com/",
        "http://evil.com@allowed.com/",
        "http:allowed.com",
        "http://allowed.com\t/",
        "http://allowed%2ecom/",
    ],
)
def test_a_url_parsers_read_differently_is_refused(ws: Path, url: str) -> None:
    """`http://allowed.com\\@evil.com/` was granted as allowed.com while Python's urlsplit
    connects to evil.com: the gate reads URLs with urlsplit and refuses the ambiguous ones."""
    gate = make_policy(ws, {"allow_network": True, "net_http": {"allow_domains": ["allowed.com"]}})
    decision = policy.check_scope(gate, "net_http", url, str(ws))
    assert not decision.granted and decision.rule == "policy.net_http.ambiguous"


@pytest.mark.parametrize(
    "url", ["https://allowed.com/a?next=x@y", "https://ALLOWED.com.:8443/x#frag@z", "allowed.com", "allowed.com:80", "http://api.allowed.com/"]
)
def test_plain_urls_stay_allowed(ws: Path, url: str) -> None:
    gate = make_policy(ws, {"allow_network": True, "net_http": {"allow_domains": ["allowed.com"]}})
    assert policy.check_scope(gate, "net_http", url, str(ws)).granted


@pytest.mark.parametrize("kind", policy.FS)
def test_a_uri_given_as_a_path_is_refused(ws: Path, kind: str) -> None:
    """`file:/etc/passwd` was granted as <workspace>/file:/etc/passwd."""
    gate = make_policy(ws)
    for text in ("file:/etc/passwd", "file:///etc/passwd", "FILE:src/a", "https://example.com/a"):
        decision = policy.check_scope(gate, kind, text, str(ws))
        assert not decision.granted and decision.rule == "policy.fs" and "URI scheme" in decision.reason, text
    assert policy.check_scope(gate, kind, "./file:name.txt", str(ws)).granted  # a file whose name holds a colon
    with pytest.raises(ValueError):
        make_policy(ws, {"fs": {"read_roots": ["file:///srv"]}})
