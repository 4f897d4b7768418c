"""The `moss` command builds only the command it runs, and still shows every command's help."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from cstack import cli as cstack_cli
from cstack import top_help as cstack_help
from moss_files.cli import app as cli
from moss_files.cli import top_help
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


# Each program's typer app printing its help, and its console-script entry point run the same
# way, reporting its exit status and whether it loaded typer.
TYPER_HELP = {
    "moss": "import sys\nfrom moss_files.cli.app import app\napp(sys.argv[1:], prog_name='moss')\n",
    "cstack": "import sys\nfrom cstack.cli import app\napp(sys.argv[1:], prog_name='cstack')\n",
}
ENTRY_POINTS = {"moss": "moss_files.cli.main", "cstack": "cstack.main"}


def help_probe(program: str) -> str:
    return (
        "import sys\n"
        f"from {ENTRY_POINTS[program]} import main\n"
        f"sys.argv = [{program!r}, *sys.argv[1:]]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    print(done.code, 'typer' in sys.modules, file=sys.stderr)\n"
    )


def test_the_entry_points_are_the_light_modules() -> None:
    from importlib.metadata import entry_points

    scripts = {point.name: point.value for point in entry_points(group="console_scripts") if point.name in ENTRY_POINTS}
    assert scripts == {program: f"{module}:main" for program, module in ENTRY_POINTS.items()}


def help_env(columns: str | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return env


def test_top_help_texts_are_what_typer_renders_now() -> None:
    # A stale copy (a command added, a first help sentence changed) fails here: regenerate it
    # with `.venv/bin/python -m moss_files.cli.top_help` or `.venv/bin/python -m cstack.top_help`.
    assert top_help.TEXT == top_help.render()
    assert cstack_help.TEXT == top_help.render(cstack_cli.app, "cstack")


@pytest.mark.parametrize("program", ["moss", "cstack"])
@pytest.mark.parametrize("columns", [None, "80", "200", "79", "60"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_what_typer_prints_and_loads_typer_only_when_narrow(program: str, columns: str | None, flag: str) -> None:
    env = help_env(columns)
    typer_run = subprocess.run([sys.executable, "-c", TYPER_HELP[program], flag], capture_output=True, text=True, timeout=60, env=env, check=False)
    probe = subprocess.run([sys.executable, "-c", help_probe(program), flag], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert typer_run.returncode == 0, typer_run.stderr
    assert probe.stdout == typer_run.stdout
    narrow = columns is not None and int(columns) < top_help.MIN_COLUMNS
    assert probe.stderr.split() == ["0", str(narrow)], probe.stderr


@pytest.mark.parametrize("program", ["moss", "cstack"])
def test_other_help_requests_still_go_to_typer(program: str) -> None:
    # `cstack --version` runs without typer (cstack.quick; tests/cstack/test_cstack_quick.py).
    version_alone = [["--version"]] if program == "moss" else []
    for words in (["--help", "--version"], ["status" if program == "cstack" else "version", "--help"], *version_alone):
        probe = subprocess.run([sys.executable, "-c", help_probe(program), *words], capture_output=True, text=True, timeout=60, env=help_env("80"), check=False)
        assert probe.stderr.split()[-1] == "True", (words, probe.stderr)


# cli.startup: `inspect` deferred until something reads from it.
DEFERRED_PROBE = """
import sys
from dataclasses import dataclass
{defer}

@dataclass(frozen=True)
class Documented:
    '''Has a docstring, so dataclasses writes no signature.'''
    a: int

print('ast' in sys.modules, file=sys.stderr)

@dataclass
class Undocumented:
    a: int
    b: str = 'x'

print(Undocumented.__doc__)
import inspect
from inspect import Parameter, signature
print(sys.modules['inspect'].__file__ == inspect.__file__, inspect.Parameter is Parameter, signature(Undocumented))
print(type(inspect.getattr_static(Undocumented, 'a', None)).__name__, hasattr(inspect, 'no_such_name'))
"""


@pytest.mark.parametrize("deferred", [False, True])
def test_a_deferred_inspect_loads_on_first_use_and_then_is_the_real_module(deferred: bool) -> None:
    defer = "from moss_files.cli.startup import defer_inspect\ndefer_inspect()"
    source = DEFERRED_PROBE.replace("{defer}", "")
    if deferred:  # before `dataclasses`: its `import inspect` gets the placeholder
        source = defer + "\n" + source
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.split() == [str(not deferred)]
    # What the program sees once it asks is what it sees without the placeholder.
    assert done.stdout.splitlines() == ["Undocumented(a: int, b: str = 'x')", "True True (a: int, b: str = 'x') -> None", "NoneType False"]


def test_defer_inspect_leaves_a_loaded_inspect_alone() -> None:
    import inspect

    from moss_files.cli.startup import defer_inspect

    defer_inspect()
    assert sys.modules["inspect"] is inspect


def test_threads_asking_a_deferred_inspect_at_once_all_get_the_one_real_module() -> None:
    probe = (
        "import sys, threading\n"
        "from moss_files.cli.startup import defer_inspect\n"
        "defer_inspect()\n"
        "import inspect as placeholder\n"
        "start = threading.Barrier(8)\n"
        "got = []\n"
        "def ask():\n"
        "    start.wait()\n"
        "    got.append(placeholder.signature)\n"
        "threads = [threading.Thread(target=ask) for _ in range(8)]\n"
        "for thread in threads: thread.start()\n"
        "for thread in threads: thread.join()\n"
        "real = sys.modules['inspect']\n"
        "print(real is not placeholder, len(got), all(found is real.signature for found in got), placeholder.signature is real.signature)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout.split()) == (0, ["True", "8", "True", "True"]), done.stderr
