"""The `moss` command builds only the command it runs, and still shows every command's help."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import typer.main
from typer.testing import CliRunner

from moss_files.cli import app as cli
from tests.conftest import run_cli


def every_command_path() -> list[list[str]]:
    """Every command and subcommand of `moss`, as the words that name it."""
    found: list[list[str]] = []
    group = typer.main.get_command(cli.app)

    def walk(words: list[str], command: Any) -> None:
        found.append(words)
        if hasattr(command, "list_commands"):
            context = command.context_class(command)
            for name in command.list_commands(context):
                walk([*words, name], command.get_command(context, name))

    walk([], group)
    return found


def test_every_command_help_runs() -> None:
    runner = CliRunner()
    paths = every_command_path()
    assert len(paths) > 60
    for words in paths:
        result = runner.invoke(cli.app, [*words, "--help"], prog_name="moss")
        assert result.exit_code == 0, (words, result.output)
        assert result.output.startswith(f"Usage: {' '.join(['moss', *words])}".rstrip()), words


def test_moss_help_lists_every_command_and_runs_build_one() -> None:
    listed = run_cli("moss", "--help").stdout
    names = ["version", "codes", "init", "doc", *(name for names in cli.LAZY_COMMANDS.values() for name in names)]
    assert all(f"\n  {name} " in listed for name in names), listed
    # A process that runs one command builds that command alone (the others stay registrations).
    probe = (
        "from moss_files.cli import app as m\n"
        "import sys\n"
        "for words in (['version', '--json'], ['fetch', '--help']):\n"
        "    try:\n"
        "        m.app(words, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(name for _module, name in m._built_commands), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stderr.strip().splitlines()[-1] == "['fetch', 'version']"
