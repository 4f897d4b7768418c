"""docs/agent.md is true: its quick start runs exactly as written (against the loopback Messages
API), its settings example is the defaults, and it names every command, event kind and code."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from agent_support import FakeMessagesAPI, agent_env, text
from conftest import BIN

from moss_files.agent import model, settings
from moss_files.foundation.errors import ERROR_CODES

DOC = Path(__file__).resolve().parents[2] / "docs" / "agent.md"
AGENT_CODES = (
    "CAPABILITY_DENIED",
    "SESSION_BUSY",
    "EVENT_LINE_INVALID",
    "API_KEY_MISSING",
    "RUN_FAILED",
    "MODEL_ERROR",
    "STEP_LIMIT",
    "RUN_CANCELLED",
    "RUN_INTERRUPTED",
    "TOOL_TIMEOUT",
    "TOOL_FAILED",
    "SERVER_UNAVAILABLE",
    "TASK_UNFINISHED",
)


def section(title: str) -> str:
    """The text of one `## ` section (headings inside code blocks do not count)."""
    lines = DOC.read_text().splitlines()
    start = lines.index(f"## {title}")
    fenced = False
    for number in range(start + 1, len(lines)):
        if lines[number].startswith("```"):
            fenced = not fenced
        elif lines[number].startswith("## ") and not fenced:
            return "\n".join(lines[start:number])
    return "\n".join(lines[start:])


def blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of `language` (with or without a fence option such as `model`)."""
    return re.findall(rf"```{language}(?: \w+)?\n(.*?)```", text, re.DOTALL)


def test_the_quick_start_works_as_written(repo: Path) -> None:
    commands = [line for block in blocks(section("Quick start"), "sh") for line in block.splitlines() if line.strip()]
    assert commands[0] == "moss init" and any(line.startswith("moss agent run") for line in commands)
    with FakeMessagesAPI([text("It holds a fresh workspace."), text("Write the first plan.")]) as fake:
        env = {**os.environ, **agent_env(fake), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        for command in commands:
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", command], cwd=repo, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
            )
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        assert len(fake.requests) == 2
    assert (repo / ".moss" / "agent.toml").read_text() == settings.AGENT_TOML_TEMPLATE


def test_the_settings_example_is_the_defaults() -> None:
    (example,) = [block for block in blocks(section("Settings: `.moss/agent.toml`"), "toml") if "[storage]" in block]
    documented = settings.parse_settings(example, "docs/agent.md")
    template = settings.parse_settings(settings.AGENT_TOML_TEMPLATE, settings.AGENT_TOML)
    assert documented.llm == template.llm == settings.AgentSettings().llm
    assert documented.servers == template.servers and documented.policy == template.policy and documented.secrets == template.secrets
    assert tomllib.loads(example).keys() == tomllib.loads(settings.AGENT_TOML_TEMPLATE).keys()


def test_every_command_kind_and_code_is_documented() -> None:
    text_of_doc = DOC.read_text()
    for command in ("init", "run", "chat", "sessions", "logs", "mcp list", "mcp call"):
        assert f"`moss agent {command}" in text_of_doc, command
    events = section("Files")
    for kind in model.EVENT_KINDS:
        assert f"`{kind}`" in events, kind
    for code in AGENT_CODES:
        assert code in ERROR_CODES and f"`{code}`" in text_of_doc, code


@pytest.mark.parametrize("model_id", ["claude-sonnet-5-5", "claude-opus-4-1", "claude-haiku-4-5", "claude-3-5-haiku"])
def test_the_price_table_in_the_doc_is_the_built_in_one(model_id: str) -> None:
    from moss_files.agent import costs

    price = costs.DEFAULT_PRICES[model_id]
    rows = [line for line in section("Settings: `.moss/agent.toml`").splitlines() if line.startswith("| ") and model_id in line]
    assert rows, model_id
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert (float(cells[1]), float(cells[2])) == (price.input, price.output)
