"""The scaffold: pure planning over dict states, and apply on real project folders."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import run_cli

from moss_files import __version__, scaffold
from moss_files.foundation import document, fs
from moss_files.foundation.errors import MossError
from moss_files.scaffold import Action, Entry, McpServer

REPO = Path(__file__).resolve().parent.parent.parent
TEMPLATES = REPO / "templates"


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str | None, int]]:
    """Every path under `root` with its kind, bytes (or link target) and mtime."""
    seen: dict[str, tuple[str, bytes | str | None, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            stat = path.lstat()
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path), stat.st_mtime_ns)
            elif path.is_dir():
                seen[rel] = ("dir", None, 0)
            else:
                seen[rel] = ("file", path.read_bytes(), stat.st_mtime_ns)
    return seen


def scaffold_now(root: Path, **kwargs) -> list[Action]:
    return scaffold.apply_scaffold(root, scaffold.plan_scaffold(root, **kwargs))


def kinds(actions: list[Action]) -> dict[str, str]:
    return {a.path: a.kind for a in actions}


def template_files(part: str) -> dict[str, bytes]:
    folder = TEMPLATES / part
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def test_loaded_templates_are_the_template_folder() -> None:
    loaded = scaffold.load_templates()
    for part in scaffold.PARTS:
        assert dict(loaded.parts[part]) == template_files(part)
    assert set(loaded.agent_blocks) == {"claude", "codex"}


# --- pure planning --------------------------------------------------------------------------

TEMPLATES_FIXED = scaffold.Templates(
    parts={"cstack": {"PLAN.md": b"plan\n"}, "needlecast": {}, "moss": {"README.md": b"readme\n", "sub/x.md": b"x\n"}},
    agent_blocks={"claude": "claude notes\n", "codex": "codex notes\n"},
)


def test_plan_on_an_empty_project_creates_folders_first_then_files() -> None:
    actions = scaffold.plan_actions({}, TEMPLATES_FIXED, parts=scaffold.PARTS, agents=("claude",))
    assert [(a.kind, a.path) for a in actions] == [
        ("mkdir", ".claude"),
        ("mkdir", ".cstack"),
        ("mkdir", ".moss"),
        ("mkdir", ".moss/sub"),
        ("mkdir", ".needlecast"),
        ("create", ".cstack/PLAN.md"),
        ("create", ".moss/README.md"),
        ("create", ".moss/sub/x.md"),
        ("create", ".gitignore"),
        ("create", ".gitattributes"),
        ("create", "CLAUDE.md"),
        ("create", ".claude/settings.json"),
    ]
    created = {a.path: a.content for a in actions if a.kind == "create"}
    assert created[".moss/sub/x.md"] == b"x\n"
    gitignore = created[".gitignore"].decode().splitlines()
    assert gitignore[0] == scaffold.LINES_BEGIN and gitignore[-1] == scaffold.LINES_END
    assert set(gitignore[1:-1]) == {line for part in scaffold.PARTS for line in scaffold.GITIGNORE_LINES[part]}


def test_plan_keeps_existing_files_and_folders() -> None:
    state = {".moss": Entry("dir"), ".moss/README.md": Entry("file"), ".cstack/PLAN.md": Entry("dir")}
    actions = kinds(scaffold.plan_actions(state, TEMPLATES_FIXED, parts=("moss", "cstack")))
    assert actions[".moss/README.md"] == "exists"
    assert actions[".cstack/PLAN.md"] == "exists"
    assert ".moss" not in actions


def test_plan_for_one_part_touches_only_that_part() -> None:
    actions = scaffold.plan_actions({}, TEMPLATES_FIXED, parts=("cstack",))
    paths = {a.path for a in actions}
    assert paths == {".cstack", ".cstack/PLAN.md", ".gitignore", ".gitattributes"}
    ignore = next(a for a in actions if a.path == ".gitignore").content.decode()
    assert ".moss/cache/" not in ignore and ".cstack/**/.*.lock" in ignore


def test_a_file_where_a_part_folder_belongs_is_a_conflict() -> None:
    with pytest.raises(MossError) as caught:
        scaffold.plan_actions({".moss": Entry("file")}, TEMPLATES_FIXED, parts=("moss",))
    assert caught.value.code == "ALREADY_EXISTS" and caught.value.exit_code == 5


def test_unknown_parts_and_agents_are_refused() -> None:
    for kwargs in ({"parts": ("moss", "nope")}, {"parts": ("moss",), "agents": ("vim",)}, {"parts": "moss"}):
        with pytest.raises(MossError) as caught:
            scaffold.plan_actions({}, TEMPLATES_FIXED, **kwargs)
        assert caught.value.code == "INVALID_REQUEST" and caught.value.exit_code == 2


def test_lines_already_present_anywhere_are_not_repeated() -> None:
    user = b"node_modules/\n  .moss/cache/  \n*.log"
    action = scaffold.plan_lines(".gitignore", Entry("file", user), [".moss/cache/", ".moss/run/"])
    assert action.kind == "append"
    new = user + action.content
    assert new.startswith(user)
    assert new.decode().splitlines()[3:] == ["", scaffold.LINES_BEGIN, ".moss/run/", scaffold.LINES_END]


def test_missing_lines_join_an_existing_block_before_its_end() -> None:
    text = f"a\n{scaffold.LINES_BEGIN}\nx\n{scaffold.LINES_END}\nb\n".encode()
    action = scaffold.plan_lines(".gitignore", Entry("file", text), ["x", "y"])
    assert action.kind == "update"
    assert action.content == f"a\n{scaffold.LINES_BEGIN}\nx\ny\n{scaffold.LINES_END}\nb\n".encode()
    assert scaffold.plan_lines(".gitignore", Entry("file", action.content), ["x", "y"]).kind == "exists"


def test_added_lines_follow_the_files_crlf_endings() -> None:
    action = scaffold.plan_lines(".gitignore", Entry("file", b"a\r\n"), ["x"])
    assert action.content == f"\r\n{scaffold.LINES_BEGIN}\r\nx\r\n{scaffold.LINES_END}\r\n".encode()


@pytest.mark.parametrize(
    "text",
    [
        f"{scaffold.LINES_BEGIN}\nx\n",
        f"x\n{scaffold.LINES_END}\n",
        f"{scaffold.LINES_END}\n{scaffold.LINES_BEGIN}\n",
        f"{scaffold.LINES_BEGIN}\n{scaffold.LINES_END}\n{scaffold.LINES_BEGIN}\n{scaffold.LINES_END}\n",
    ],
)
def test_unbalanced_line_markers_are_reported_with_the_line(text: str) -> None:
    with pytest.raises(MossError) as caught:
        scaffold.plan_lines(".gitignore", Entry("file", text.encode()), ["y"])
    assert caught.value.code == "INVALID_DOCUMENT" and caught.value.exit_code == 4
    assert caught.value.line is not None


def test_an_undecodable_file_is_not_edited() -> None:
    with pytest.raises(MossError) as caught:
        scaffold.plan_lines(".gitignore", Entry("file", b"ok\n\xff\xfe\n"), ["y"])
    assert caught.value.code == "INVALID_ENCODING" and caught.value.line == 2


def test_agent_block_created_appended_kept_and_replaced_by_version() -> None:
    created = scaffold.plan_block("CLAUDE.md", Entry("missing"), "use the tools\n", "1.0")
    assert created.kind == "create"
    assert created.content.decode() == scaffold.render_block("use the tools\n", "1.0")

    user = b"# My project\n\nOur rules.\n"
    appended = scaffold.plan_block("CLAUDE.md", Entry("file", user), "use the tools\n", "1.0")
    assert appended.kind == "append"
    with_block = user + appended.content
    assert with_block.startswith(user + b"\n<!-- moss-files:begin")

    after = b"\n## Written after the block\n"
    edited_inside = with_block.replace(b"use the tools", b"use the tools, edited by hand") + after
    same = scaffold.plan_block("CLAUDE.md", Entry("file", edited_inside), "new text\n", "1.0")
    assert same.kind == "exists"

    bumped = scaffold.plan_block("CLAUDE.md", Entry("file", edited_inside), "new text\n", "2.0")
    assert bumped.kind == "update"
    assert bumped.content == user + b"\n" + scaffold.render_block("new text\n", "2.0").encode() + after


def test_agent_block_markers_must_be_balanced() -> None:
    text = b"intro\n" + scaffold.render_block("x\n", "1.0").encode().split(scaffold.BLOCK_END.encode())[0]
    with pytest.raises(MossError) as caught:
        scaffold.plan_block("AGENTS.md", Entry("file", text), "x\n", "1.0")
    assert caught.value.code == "INVALID_DOCUMENT" and caught.value.line == 2


def test_agents_register_moss_serve_with_the_names_their_model_api_accepts() -> None:
    assert scaffold.mcp_servers("claude") == (McpServer("moss", "moss", ("serve",)),)
    assert scaffold.mcp_servers("codex") == (McpServer("moss", "moss", ("serve", "--names", "underscore")),)


def test_mcp_entries_for_claude_are_added_only_when_missing() -> None:
    servers = (McpServer("moss", "moss", ("serve",)),)
    created = scaffold.plan_mcp("claude", Entry("missing"), servers)
    assert created.kind == "create" and created.path == ".mcp.json"
    assert json.loads(created.content) == {"mcpServers": {"moss": {"command": "moss", "args": ["serve"]}}}
    user = json.dumps({"mcpServers": {"other": {"command": "x"}}, "extra": 1}).encode()
    updated = scaffold.plan_mcp("claude", Entry("file", user), servers)
    assert updated.kind == "update"
    assert json.loads(updated.content) == {
        "mcpServers": {"other": {"command": "x"}, "moss": {"command": "moss", "args": ["serve"]}},
        "extra": 1,
    }
    assert scaffold.plan_mcp("claude", Entry("file", updated.content), servers).kind == "exists"
    with pytest.raises(MossError) as caught:
        scaffold.plan_mcp("claude", Entry("file", b"{not json"), servers)
    assert caught.value.exit_code == 4


def test_mcp_entries_for_codex_are_appended_as_toml_tables() -> None:
    servers = (McpServer("moss", "moss", ("serve",)),)
    created = scaffold.plan_mcp("codex", Entry("missing"), servers)
    assert created.path == ".codex/config.toml"
    config = tomllib.loads(created.content.decode())
    assert config["mcp_servers"] == {"moss": {"command": "moss", "args": ["serve"]}}
    assert set(config["hooks"]) == {"SessionStart", "UserPromptSubmit", "PreCompact", "Stop"}  # the same hooks as Claude Code's
    user = b'model = "o3"\n'
    appended = scaffold.plan_mcp("codex", Entry("file", user), servers)
    assert appended.kind == "append"
    assert tomllib.loads((user + appended.content).decode())["mcp_servers"]["moss"]["args"] == ["serve"]
    assert scaffold.plan_mcp("codex", Entry("file", user + appended.content), servers).kind == "exists"


def test_planned_mcp_files_get_their_folders() -> None:
    servers = {"codex": (McpServer("moss", "moss"),)}
    actions = scaffold.plan_actions({}, TEMPLATES_FIXED, parts=(), agents=("codex",), servers=servers)
    assert [(a.kind, a.path) for a in actions] == [("mkdir", ".codex"), ("create", "AGENTS.md"), ("create", ".codex/config.toml")]


# --- apply on real folders -------------------------------------------------------------------


def test_scaffold_creates_every_template_and_git_setting(repo: Path) -> None:
    actions = scaffold_now(repo, agents=("claude", "codex"))
    assert all(a.kind != "exists" for a in actions)
    for part in scaffold.PARTS:
        assert (repo / f".{part}").is_dir()
        for rel, data in template_files(part).items():
            assert (repo / f".{part}" / rel).read_bytes() == data
    for name in ("CLAUDE.md", "AGENTS.md"):
        text = (repo / name).read_text()
        assert f'<!-- moss-files:begin version="{__version__}" -->' in text and text.endswith(scaffold.BLOCK_END + "\n")
    assert not list(repo.rglob(".*.tmp-*")), "temporary files left behind"


def test_second_scaffold_writes_nothing(repo: Path) -> None:
    scaffold_now(repo, agents=("claude", "codex"))
    before = snapshot(repo)
    again = scaffold_now(repo, agents=("claude", "codex"))
    assert {a.kind for a in again} == {"exists"}
    assert snapshot(repo) == before


def test_existing_user_files_are_never_overwritten(repo: Path) -> None:
    (repo / ".moss").mkdir()
    (repo / ".moss" / "config.toml").write_bytes(b"capsule_max_chars = 500\n")
    (repo / ".gitignore").write_bytes(b"build/\n.moss/run/")
    (repo / "CLAUDE.md").write_bytes(b"# Rules\nBe brief.")
    actions = kinds(scaffold_now(repo, agents=("claude",)))
    assert actions[".moss/config.toml"] == "exists"
    assert (repo / ".moss" / "config.toml").read_bytes() == b"capsule_max_chars = 500\n"
    ignore = (repo / ".gitignore").read_bytes()
    assert ignore.startswith(b"build/\n.moss/run/\n")
    assert ignore.decode().splitlines().count(".moss/run/") == 1
    assert (repo / "CLAUDE.md").read_bytes().startswith(b"# Rules\nBe brief.\n\n<!-- moss-files:begin")


def test_later_parts_extend_the_same_gitignore_block(repo: Path) -> None:
    scaffold_now(repo, parts=("cstack",))
    (repo / ".gitignore").write_bytes((repo / ".gitignore").read_bytes() + b"my-own-line\n")
    actions = kinds(scaffold_now(repo))
    assert actions[".gitignore"] == "update" and actions[".cstack/PLAN.md"] == "exists"
    lines = (repo / ".gitignore").read_text().splitlines()
    assert lines.count(scaffold.LINES_BEGIN) == 1 and lines[-1] == "my-own-line"
    assert set(lines[1 : lines.index(scaffold.LINES_END)]) == {line for p in scaffold.PARTS for line in scaffold.GITIGNORE_LINES[p]}


def test_version_bump_replaces_only_the_block(repo: Path) -> None:
    (repo / "AGENTS.md").write_bytes(b"before\n")
    scaffold_now(repo, parts=(), agents=("codex",), version="0.0.1")
    with (repo / "AGENTS.md").open("ab") as handle:
        handle.write(b"after\n")
    old = (repo / "AGENTS.md").read_bytes()
    assert kinds(scaffold_now(repo, parts=(), agents=("codex",), version="0.0.1"))["AGENTS.md"] == "exists"
    assert kinds(scaffold_now(repo, parts=(), agents=("codex",), version="0.0.2"))["AGENTS.md"] == "update"
    new = (repo / "AGENTS.md").read_bytes()
    assert new.replace(b'version="0.0.2"', b'version="0.0.1"') == old
    assert new.startswith(b"before\n\n") and new.endswith(scaffold.BLOCK_END.encode() + b"\nafter\n")


def test_agents_md_linked_to_claude_md_gets_one_block_and_stays_a_link(repo: Path) -> None:
    (repo / "CLAUDE.md").write_text("shared notes\n")
    (repo / "AGENTS.md").symlink_to("CLAUDE.md")
    actions = kinds(scaffold_now(repo, parts=(), agents=("claude", "codex")))
    assert {path: actions[path] for path in ("CLAUDE.md", "AGENTS.md", ".mcp.json", ".codex", ".codex/config.toml")} == {
        "CLAUDE.md": "append",
        "AGENTS.md": "exists",
        ".mcp.json": "create",
        ".codex": "mkdir",
        ".codex/config.toml": "create",
    }
    assert (repo / "AGENTS.md").is_symlink()
    assert (repo / "CLAUDE.md").read_text().count("moss-files:begin") == 1
    scaffold_now(repo, parts=(), agents=("codex", "claude"), version="9")
    assert (repo / "AGENTS.md").is_symlink() and (repo / "CLAUDE.md").read_text().count('version="9"') == 1


def test_a_file_appearing_after_planning_is_not_replaced(repo: Path) -> None:
    actions = scaffold.plan_scaffold(repo)
    (repo / ".moss").mkdir()
    (repo / ".moss" / "README.md").write_bytes(b"mine\n")
    done = kinds(scaffold.apply_scaffold(repo, actions))
    assert done[".moss"] == "exists" and done[".moss/README.md"] == "exists"
    assert (repo / ".moss" / "README.md").read_bytes() == b"mine\n"


def test_a_file_edited_after_planning_is_left_alone(repo: Path) -> None:
    (repo / ".gitignore").write_bytes(b"one\n")
    actions = scaffold.plan_scaffold(repo, parts=("cstack",))
    (repo / ".gitignore").write_bytes(b"one\ntwo\n")
    with pytest.raises(MossError) as caught:
        scaffold.apply_scaffold(repo, actions)
    assert caught.value.code == "STALE_WRITE" and caught.value.exit_code == 5
    assert (repo / ".gitignore").read_bytes() == b"one\ntwo\n"
    scaffold_now(repo, parts=("cstack",))
    assert (repo / ".gitignore").read_bytes().startswith(b"one\ntwo\n\n" + scaffold.LINES_BEGIN.encode())


def test_broken_markers_leave_every_file_as_it_was(repo: Path) -> None:
    (repo / "CLAUDE.md").write_bytes(b"x\n<!-- moss-files:end -->\n")
    before = snapshot(repo)
    with pytest.raises(MossError) as caught:
        scaffold_now(repo, agents=("claude",))
    assert caught.value.code == "INVALID_DOCUMENT" and caught.value.path == "CLAUDE.md"
    assert snapshot(repo) == before


def test_missing_or_file_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MossError) as caught:
        scaffold.plan_scaffold(tmp_path / "nope")
    assert caught.value.exit_code == 3
    (tmp_path / "f").write_text("x")
    with pytest.raises(MossError) as caught:
        scaffold.plan_scaffold(tmp_path / "f")
    assert caught.value.exit_code == 2


def test_git_ignores_derived_state_and_names_a_merge_for_every_artifact(repo: Path) -> None:
    scaffold_now(repo)
    plan = repo / ".cstack" / "PLAN.md"
    ignored = [
        ".moss/cache/index.db",
        ".moss/run/sidecar.pid",
        ".needlecast/.state/cursor.json",
        str(fs.lock_path_for(plan).relative_to(repo)),
        str(fs.temp_path_for(plan).relative_to(repo)),
        str(fs.lock_path_for(repo / ".moss/board/tasks/T-1.md").relative_to(repo)),
        str(fs.temp_path_for(repo / ".needlecast/inbox.md").relative_to(repo)),
        str(fs.temp_path_for(repo / ".moss/config.toml").relative_to(repo)),
    ]
    kept = [".cstack/PLAN.md", ".moss/config.toml", ".moss/README.md", ".needlecast/inbox.md", ".moss/board/tasks/T-1.md", ".gitignore"]
    for path in ignored:
        assert subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=repo).returncode == 0, path
    for path in kept:
        assert subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=repo).returncode == 1, path
    attrs = subprocess.run(
        [
            "git",
            "check-attr",
            "merge",
            "--",
            ".cstack/MEMORY.md",
            ".moss/events/log.jsonl",
            ".moss/a.jsonl",
            ".cstack/PLAN.md",
            ".needlecast/outbox.md",
            "sleeves/bob/.needlecast/inbox.md",
            ".moss/capsules/default/auth.md",
            ".moss/board/tasks/T-1.md",
            ".needlecast/outbox/2026-01-01T00-00-00Z_x.md",
            "notes.md",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert attrs == [
        ".cstack/MEMORY.md: merge: moss",
        ".moss/events/log.jsonl: merge: union",
        ".moss/a.jsonl: merge: union",
        ".cstack/PLAN.md: merge: moss",
        ".needlecast/outbox.md: merge: moss",
        "sleeves/bob/.needlecast/inbox.md: merge: moss",
        ".moss/capsules/default/auth.md: merge: moss",
        ".moss/board/tasks/T-1.md: merge: moss",
        ".needlecast/outbox/2026-01-01T00-00-00Z_x.md: merge: unspecified",  # a file per message never conflicts
        "notes.md: merge: unspecified",
    ]


def test_an_older_block_is_brought_up_to_date_and_the_users_lines_stay(repo: Path) -> None:
    """The first version wrote `.cstack/MEMORY.md merge=union` into its block; the merge driver
    replaces it, so a second scaffold takes that line out of the block, and only out of it."""
    (repo / ".gitattributes").write_text(
        "*.png binary\n.cstack/MEMORY.md merge=union\n# >>> moss-files >>>\n.cstack/MEMORY.md merge=union\n# <<< moss-files <<<\n"
    )
    scaffold_now(repo)
    lines = (repo / ".gitattributes").read_text().splitlines()
    block = lines[lines.index("# >>> moss-files >>>") + 1 : lines.index("# <<< moss-files <<<")]
    assert lines[:2] == ["*.png binary", ".cstack/MEMORY.md merge=union"]  # the user's own lines, as written
    assert ".cstack/MEMORY.md merge=union" not in block and "**/.cstack/MEMORY.md merge=moss" in block
    before = (repo / ".gitattributes").read_bytes()
    scaffold_now(repo)
    assert (repo / ".gitattributes").read_bytes() == before  # idempotent


# --- templates ------------------------------------------------------------------------------


def test_moss_templates_parse() -> None:
    readme = (TEMPLATES / "moss" / "README.md").read_bytes()
    assert document.parse_bytes(readme).text.encode() == readme
    config = (TEMPLATES / "moss" / "config.toml").read_text()
    assert tomllib.loads(config) == {}, "every setting is commented out, so the defaults apply"
    settings = tomllib.loads(re.sub(r"(?m)^# (\w+ = )", r"\1", config))
    assert settings["capsule_max_chars"] == 12000


def test_agent_templates_hold_no_markers() -> None:
    for agent in scaffold.AGENT_FILES:
        body = (TEMPLATES / "agents" / f"{agent}.md").read_text()
        block = scaffold.render_block(body, "1")
        assert block.count(scaffold.BLOCK_END) == 1 and block.count(scaffold.BLOCK_BEGIN_PREFIX) == 1


# --- the module's command line --------------------------------------------------------------


def run_module(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the scaffold the way install.sh does from a checkout: no site-packages at all (-S),
    so any third-party import would fail, and no bytecode written (-B)."""
    return subprocess.run(
        [sys.executable, "-S", "-B", "-m", "moss_files.scaffold", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_module_runs_on_the_standard_library_alone(repo: Path) -> None:
    dry = run_module("--dry-run", "--json", "--agent", "claude", str(repo))
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)["actions"]
    # In a git work tree the clone also gets the merge driver that .gitattributes names.
    assert {row["kind"] for row in planned} == {"mkdir", "create", "config"}
    assert sorted(p.name for p in repo.iterdir()) == [".git"]
    assert subprocess.run(["git", "config", "--get", "merge.moss.driver"], cwd=repo).returncode == 1  # a dry run writes nothing
    done = run_module("--json", "--agent", "claude", str(repo))
    assert done.returncode == 0, done.stderr
    assert [(r["kind"], r["path"]) for r in json.loads(done.stdout)["actions"]] == [(r["kind"], r["path"]) for r in planned]
    driver = subprocess.run(["git", "config", "--get", "merge.moss.driver"], cwd=repo, capture_output=True, text=True).stdout
    assert driver.strip() == f"{Path(sys.executable).parent / 'moss'} merge driver %O %A %B %P"
    again = run_module("--json", "--parts", "cstack,moss", str(repo))
    assert {row["kind"] for row in json.loads(again.stdout)["actions"]} == {"exists"}


def test_outside_git_there_is_no_driver_to_define(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = run_module("--json", "--parts", "cstack", str(plain), cwd=tmp_path)
    assert done.returncode == 0 and "config" not in {row["kind"] for row in json.loads(done.stdout)["actions"]}


def test_module_exit_statuses(tmp_path: Path, repo: Path) -> None:
    assert run_module(str(tmp_path / "missing")).returncode == 3
    assert run_module("--parts", "bogus", str(repo)).returncode == 2
    assert run_module("--agent", "vim", str(repo)).returncode == 2
    (repo / ".needlecast").write_text("not a folder")
    failed = run_module("--json", str(repo))
    assert failed.returncode == 5
    assert json.loads(failed.stderr.strip().splitlines()[-1])["error"]["code"] == "ALREADY_EXISTS"


# --- moss init --------------------------------------------------------------------------------


def test_moss_init_scaffolds_the_git_work_tree_around_the_current_directory(repo: Path) -> None:
    (repo / "src" / "deep").mkdir(parents=True)
    dry = run_cli("moss", "init", "--dry-run", "--json", cwd=repo / "src" / "deep")
    assert dry.returncode == 0, dry.stderr
    assert {row["path"] for row in json.loads(dry.stdout)["actions"]} >= {".moss", ".moss/config.toml", ".gitignore"}
    assert sorted(p.name for p in repo.iterdir()) == [".git", "src"]
    done = run_cli("moss", "init", "--agent", "codex", "--json", cwd=repo / "src" / "deep")
    assert done.returncode == 0, done.stderr
    assert (repo / ".moss" / "config.toml").is_file() and (repo / "AGENTS.md").is_file()
    assert not (repo / "src" / ".moss").exists()
    again = run_cli("moss", "init", str(repo), "--agent", "codex", "--json")
    assert {row["kind"] for row in json.loads(again.stdout)["actions"]} == {"exists"}


def test_moss_init_errors_carry_codes(repo: Path, tmp_path: Path) -> None:
    bad_agent = run_cli("moss", "init", str(repo), "--agent", "vim", "--json")
    assert bad_agent.returncode == 2
    assert json.loads(bad_agent.stderr)["error"]["code"] == "INVALID_REQUEST"
    assert run_cli("moss", "init", str(tmp_path / "missing")).returncode == 2
    (repo / "CLAUDE.md").write_text("<!-- moss-files:end -->\n")
    broken = run_cli("moss", "init", str(repo), "--agent", "claude", "--json")
    assert broken.returncode == 4
    assert json.loads(broken.stderr)["error"]["path"] == "CLAUDE.md"
    assert not (repo / ".moss").exists(), "nothing is written when the plan fails"


def test_a_workspace_below_the_top_of_its_clone_still_gets_the_driver(repo: Path) -> None:
    """The config action once ran git in `<workspace>/.git`, which only exists at the top."""
    sleeve = repo / "team" / "alice"
    sleeve.mkdir(parents=True)
    done = run_module("--json", "--parts", "needlecast", str(sleeve))
    assert done.returncode == 0, done.stderr
    assert subprocess.run(["git", "config", "--get", "merge.moss.driver"], cwd=repo, capture_output=True).returncode == 0
