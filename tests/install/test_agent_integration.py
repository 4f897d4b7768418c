"""Claude Code and Codex integration as `moss init --agent` and `install.sh --agent` write it:
hooks merged into a user's settings without touching the user's own entries, a second install
byte for byte the same, `--remove` leaving the user's files as they were; commands and skills
in the formats their hosts read; the plugin in the repository equal to what the toolkit makes."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

from moss_files import integrations, scaffold
from moss_files.foundation.errors import MossError

ROOT = Path(__file__).resolve().parent.parent.parent
TEMPLATES = ROOT / "templates" / "claude"
USER_SETTINGS = """{
    "permissions": {
        "allow": ["Bash(npm run test:*)", "Read(~/.zshrc)"],
        "deny": ["Read(./.env)"]
    },
    "env": {"FOO": "1"},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}
        ],
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "echo mine"}]}
        ]
    }
}
"""


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and ".git/" not in p.as_posix() + "/"}


def init(root: Path, *args: str) -> dict:
    done = run_cli("moss", "init", "--json", *args, cwd=root)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_users_settings_keep_every_entry_and_come_back_byte_for_byte(repo: Path) -> None:
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(USER_SETTINGS)
    (repo / ".mcp.json").write_text('{"mcpServers": {"db": {"command": "db-mcp"}}}')
    (repo / "CLAUDE.md").write_text("# Our rules\n\nTabs, not spaces.\n")
    before = files_of(repo)
    init(repo, "--agent", "claude")
    settings = json.loads((repo / ".claude" / "settings.json").read_text())
    assert settings["permissions"] == json.loads(USER_SETTINGS)["permissions"] and settings["env"] == {"FOO": "1"}
    assert settings["hooks"]["PreToolUse"] == [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}]
    mine, ours = settings["hooks"]["SessionStart"]
    assert mine == {"matcher": "startup", "hooks": [{"type": "command", "command": "echo mine"}]}
    assert ours == integrations.hook_group("session-start", "startup|resume|clear|compact")
    assert set(settings["hooks"]) == {"PreToolUse", "SessionStart", "UserPromptSubmit", "PreCompact", "Stop"}
    text = (repo / ".claude" / "settings.json").read_text()
    assert text.startswith(USER_SETTINGS.split('        "SessionStart"')[0])  # the user's bytes, up to where ours begin
    assert '        "PreToolUse": [\n            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh"}]}\n        ],' in text
    assert json.loads((repo / ".mcp.json").read_text()) == {"mcpServers": {"db": {"command": "db-mcp"}, "moss": {"command": "moss", "args": ["serve"]}}}

    installed = files_of(repo)
    init(repo, "--agent", "claude")
    assert files_of(repo) == installed  # a second install is byte for byte the same

    init(repo, "--agent", "claude", "--remove")
    after = files_of(repo)
    assert {path: after[path] for path in before} == before  # every file the user had, as it was
    assert not (repo / ".claude" / "commands").exists() and not (repo / ".claude" / "skills").exists()
    assert set(after) - set(before) >= {".gitignore", ".cstack/PLAN.md"}  # the workspace stays; only the integration went


def test_a_hook_the_user_added_to_our_group_survives_update_and_remove(repo: Path) -> None:
    init(repo, "--agent", "claude")
    path = repo / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    settings["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "notify-send done"})
    settings["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 99  # an older toolkit's entry
    path.write_text(json.dumps(settings, indent=2) + "\n")
    init(repo, "--agent", "claude")
    stop = json.loads(path.read_text())["hooks"]["Stop"]
    assert stop == [{"hooks": [integrations.hook_group("stop", None)["hooks"][0], {"type": "command", "command": "notify-send done"}]}]
    init(repo, "--agent", "claude", "--remove")
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ('{\n  "hooks": {,}\n}\n', 2),
        ("[1, 2]\n", None),
        ('{"hooks": []}', None),
        ('{"hooks": {"Stop": {"hooks": []}}}', None),
        ('{"hooks": {}, "hooks": {}}', None),
    ],
)
def test_settings_that_are_not_settings_are_refused_and_left_alone(repo: Path, content: str, line: int | None) -> None:
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(content)
    done = run_cli("moss", "init", "--agent", "claude", "--json", cwd=repo)
    assert done.returncode == 4, done.stderr
    error = json.loads(done.stderr.strip().splitlines()[-1])["error"]
    assert error["code"] == "SETTINGS_INVALID" and error["path"] == ".claude/settings.json"
    if line is not None:
        assert error["line"] == line
    assert (repo / ".claude" / "settings.json").read_text() == content
    assert not (repo / ".cstack").exists()  # refused before anything was written


def test_a_command_or_skill_the_user_changed_is_kept_on_remove(repo: Path) -> None:
    init(repo, "--agent", "claude")
    command = repo / ".claude" / "commands" / "cstack-start.md"
    command.write_text(command.read_text() + "\nAlso read docs/ROADMAP.md.\n")
    report = init(repo, "--agent", "claude", "--remove")
    kept = [a for a in report["actions"] if a["path"] == ".claude/commands/cstack-start.md"]
    assert kept[0]["kind"] == "exists" and "changed" in kept[0]["detail"]
    assert command.exists() and not (repo / ".claude" / "commands" / "cstack-task.md").exists()
    assert not (repo / ".claude" / "settings.json").exists()  # it held only our hooks


def test_codex_gets_the_same_hooks_in_its_config_and_the_skills(repo: Path) -> None:
    (repo / ".codex").mkdir()
    user = 'model = "o3"\n\n[mcp_servers.db]\ncommand = "db-mcp"\n'
    (repo / ".codex" / "config.toml").write_text(user)
    init(repo, "--agent", "codex")
    text = (repo / ".codex" / "config.toml").read_text()
    assert text.startswith(user + "\n" + integrations.LINES_BEGIN + "\n")
    config = tomllib.loads(text)
    assert config["model"] == "o3" and set(config["mcp_servers"]) == {"db", "moss"}
    for host, event, _claude, matcher in integrations.HOOKS:
        (group,) = config["hooks"][host]
        assert group.get("matcher") == matcher and group["hooks"] == [{"type": "command", "command": integrations.hook_command(event), "timeout": 10}]
    assert sorted(p.name for p in (repo / ".agents" / "skills").iterdir()) == sorted(p.name for p in (TEMPLATES / "skills").iterdir())
    agents = (repo / "AGENTS.md").read_text()
    assert "moss hook session-start" in agents and "cstack-checkpoint" in agents
    installed = files_of(repo)
    init(repo, "--agent", "codex")
    assert files_of(repo) == installed
    init(repo, "--agent", "codex", "--remove")
    assert (repo / ".codex" / "config.toml").read_text() == user and not (repo / ".agents").exists() and not (repo / "AGENTS.md").exists()


def test_codex_config_that_would_break_is_refused(repo: Path) -> None:
    (repo / ".codex").mkdir()
    for bad in ('model = "o3\n', 'hooks = "off"\n'):
        (repo / ".codex" / "config.toml").write_text(bad)
        with pytest.raises(MossError) as caught:
            scaffold.run(repo, parts=(), agents=("codex",), dry_run=True)
        assert caught.value.code == "SETTINGS_INVALID"
        assert (repo / ".codex" / "config.toml").read_text() == bad


def frontmatter(path: Path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), path
    head, body = text[4:].split("\n---\n", 1)
    meta = yaml.safe_load(head)
    assert isinstance(meta, dict), path
    return meta, body


@pytest.mark.parametrize("path", sorted((TEMPLATES / "commands").glob("*.md")), ids=lambda p: p.stem)
def test_commands_carry_the_frontmatter_claude_code_reads(path: Path) -> None:
    meta, body = frontmatter(path)
    assert set(meta) <= {"description", "argument-hint", "allowed-tools", "model", "disable-model-invocation"}
    assert isinstance(meta["description"], str) and 10 <= len(meta["description"]) <= 100
    assert isinstance(meta.get("argument-hint", ""), str)
    tools = meta["allowed-tools"]
    assert isinstance(tools, str) and all(re.fullmatch(r"(Bash\([^()]+:\*\)|Read|Edit|Write)", item.strip()) for item in tools.split(","))
    assert body.strip() and ("$ARGUMENTS" in body) == ("argument-hint" in meta)


@pytest.mark.parametrize("path", sorted((TEMPLATES / "skills").glob("*/SKILL.md")), ids=lambda p: p.parent.name)
def test_skills_carry_a_name_and_a_description(path: Path) -> None:
    meta, body = frontmatter(path)
    assert set(meta) == {"name", "description"}
    assert meta["name"] == path.parent.name and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and len(meta["name"]) <= 64
    assert 40 <= len(meta["description"]) <= 1024 and re.search(r"\bUse (when|after|before)\b", meta["description"])  # what, and when
    assert body.lstrip().startswith("# ")


def test_the_plugin_in_the_repository_is_what_the_toolkit_makes() -> None:
    templates = scaffold.load_templates()
    wanted = integrations.plugin_files(templates.commands, templates.skills)
    plugin = ROOT / "claude-plugin"
    assert files_of(plugin) == wanted, "regenerate it: python -m moss_files.scaffold --plugin claude-plugin"
    manifest = json.loads(wanted[".claude-plugin/plugin.json"])
    assert manifest["name"] == "moss-files" and re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", manifest["name"])
    hooks = json.loads(wanted["hooks/hooks.json"])
    assert hooks["hooks"] == integrations.claude_hooks()
    assert json.loads(wanted[".mcp.json"]) == {"mcpServers": {"moss": {"command": "moss", "args": ["serve"]}}}
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_bytes())
    assert market == json.loads(integrations.marketplace("./claude-plugin"))
    (entry,) = market["plugins"]
    assert (ROOT / entry["source"] / ".claude-plugin" / "plugin.json").is_file()


def test_install_sh_adds_and_removes_the_integration(repo: Path) -> None:
    import subprocess

    def install(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(ROOT / "install.sh"), *args, str(repo)], capture_output=True, text=True, timeout=120)

    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(USER_SETTINGS)
    assert install("--no-tool", "--agent", "claude").returncode == 0
    assert (repo / ".claude" / "commands" / "moss-board.md").is_file()
    assert "moss hook stop" in (repo / ".claude" / "settings.json").read_text()
    dry = install("--remove", "--dry-run", "--agent", "claude")
    assert dry.returncode == 0 and "would remove" in dry.stderr and (repo / ".claude" / "commands" / "moss-board.md").is_file()
    done = install("--remove", "--agent", "claude")
    assert done.returncode == 0, done.stderr
    assert (repo / ".claude" / "settings.json").read_text() == USER_SETTINGS and not (repo / "CLAUDE.md").exists()
    refused = install("--remove")
    assert refused.returncode == 2 and "--agent" in refused.stderr
