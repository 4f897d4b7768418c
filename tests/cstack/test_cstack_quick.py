"""`cstack --version`, `status`, `add`, the transitions and `remember` without typer
(`cstack.quick`) do what the typer commands do: the same parameters for every command line the
quick parser accepts (checked against click's own parsing on generated command lines), and the
same stdout, stderr, exit status and files as whole processes, each on its own copy of one
workspace, for text and JSON, notes and errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from conftest import BIN
from hypothesis import given, settings
from hypothesis import strategies as st

from cstack import cli, quick
from moss_files.cli import streams
from moss_files.foundation import workspace

# The typer path of the same console script: `cstack.main.main` with the quick path turned off.
TYPER_MAIN = 'import sys; sys.argv[0] = "cstack"; import cstack.quick as q; q.run = lambda argv: None; from cstack.main import main; main()'
NOW = {"MOSS_NOW": "2026-01-21T10:00:00Z"}


def click_params(command_name: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The parameters click gives the typer command for `args`; None when click refuses them."""
    command: Any = typer.main.get_command(cli.app).get_command(None, command_name)  # type: ignore[attr-defined]
    saved = dict(os.environ)
    try:
        for name in workspace.ROOT_ENVS:
            os.environ.pop(name, None)
        os.environ.update(env or {})
        ctx = command.make_context(f"cstack {command_name}", list(args))
    except Exception:  # click's usage errors, --help's exit
        return None
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return normal(dict(ctx.params))


def normal(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters in one shape: the root as a string, a repeated option as a list or None."""
    if params.get("root") is not None:
        params["root"] = str(params["root"])
    if "depends" in params:
        params["depends"] = list(params["depends"] or ()) or None
    return params


def quick_params(command: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any] | None:
    saved = dict(os.environ)
    try:
        for name in workspace.ROOT_ENVS:
            os.environ.pop(name, None)
        os.environ.update(env or {})
        found = quick.parse(command, args)
        return None if found is None else normal(found)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_the_quick_paths_name_the_root_variables_the_workspace_reads() -> None:
    assert (quick.ROOT_ENV, quick.MOE_ROOT_ENV) == (streams.ROOT_ENV, streams.MOE_ROOT_ENV) == workspace.ROOT_ENVS


def test_the_quick_commands_are_the_typer_commands_of_the_same_names() -> None:
    group: Any = typer.main.get_command(cli.app)
    for name, (positional, values, _defaults) in quick.COMMANDS.items():
        command = group.get_command(None, name)
        options = {option for param in command.params for option in getattr(param, "opts", ()) if option.startswith("--")} - {"--help"}
        assert options == {*values, "--root", "--project", "--json"}, name
        arguments = [param.name for param in command.params if param.param_type_name == "argument"]
        assert arguments == ([positional[0]] if positional else []), name


TOKENS = st.sampled_from(
    [
        "3",
        "P1: Ship the parser #core",
        "fix",
        "-",
        "--",
        "-x",
        "-3",
        "",
        "--id",
        "--id=gw",
        "--id=",
        "--depends",
        "--depends=a,b",
        "--depends=c",
        "--parent",
        "--parent=gw",
        "--section",
        "--section=backlog-bugs",
        "--reason",
        "--reason=shipped",
        "--reason=-x",
        "--category",
        "--category=facts",
        "--json",
        "--json=1",
        "--root",
        "--root=/tmp",
        "--root=",
        "--project",
        "--project=shop",
        "/tmp",
        "--help",
        "-h",
        "--roo",
        "--version",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    command=st.sampled_from(sorted(quick.COMMANDS)),
    args=st.lists(TOKENS, max_size=6),
    env=st.sampled_from([{}, {"MOSS_ROOT": "/srv/ws"}, {"MOE_PROJECT_PATH": "/srv/moe"}, {"MOSS_ROOT": "/a", "MOE_PROJECT_PATH": "/b"}]),
)
def test_every_command_line_the_quick_parser_takes_parses_as_click_parses_it(command: str, args: list[str], env: dict[str, str]) -> None:
    mine = quick_params(command, args, env)
    if mine is None:
        return  # left to typer
    assert mine == click_params(command, args, env), (command, args)


def test_the_common_forms_are_taken_by_the_quick_parser() -> None:
    taken = {
        "status": [[], ["--json"], ["--root", "/x"]],
        "add": [["P1: Title #x"], ["Title", "--id", "t", "--depends", "a,b", "--depends", "c", "--section", "backlog", "--json"]],
        "done": [[], ["3"], ["fix", "--reason", "shipped", "--json"]],
        "close": [["3", "--reason", "superseded"]],
        "remember": [["the vendor answers on Fridays", "--category", "facts"]],
    }
    for command, lines in taken.items():
        for args in lines:
            assert quick.parse(command, args) is not None, (command, args)
    left = {
        "status": [["--help"], ["extra"]],
        "add": [[], ["a", "b"], ["a", "--id"], ["a", "--json=1"], ["-a"]],
        "close": [["3"]],  # --reason is required
        "start": [[]],
    }
    for command, lines in left.items():
        for args in lines:
            assert quick.parse(command, args) is None, (command, args)


# --------------------------------------------------------------------------- whole processes

PLAN = """# Plan

## Tasks

- [>] P1: Wire the parser #core (id: parser)
- [ ] P2: Write the docs #docs (id: docs, depends: parser)
- [!] P2: Ask the vendor (id: vendor) | blocked: no answer yet
- [ ] P3: Tidy the \x1b[31mred\x1b[0m logs

## Completed

- [x] P1: Sketch the format (id: sketch) | closed: 2026-01-10

## Closed

## Backlog

### Bugs
_None._
"""
CURRENT = """# Current

**Status:** In progress
**Task:** Wire the parser
**Started:** 2026-01-19

## Focus
The parser's error lines.

## Next Steps
1. Line numbers in errors
"""
MEMORY = "# Memory\n\n## Decisions\n\n## Gotchas\n\n## Preferences\n\n## Facts\n- 2026-01-02: The CI runs on two cores.\n"


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git workspace with a plan, CURRENT.md and MEMORY.md, and a .gitattributes naming a
    merge driver this clone does not define (its warning is said by both paths)."""
    root = tmp_path_factory.mktemp("cstack-quick") / "ws"
    (root / ".cstack").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".cstack" / "PLAN.md").write_text(PLAN, encoding="utf-8")
    (root / ".cstack" / "CURRENT.md").write_text(CURRENT, encoding="utf-8")
    (root / ".cstack" / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (root / ".gitattributes").write_text(".cstack/** merge=moss\n", encoding="utf-8")
    return root


def both(
    original: Path, tmp_path: Path, *args: str, env: dict[str, str] | None = None, outside: bool = False
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str], Path, Path]:
    """(the console script, the typer path, the workspace each ran in), each run on its own
    copy of `original` with the same arguments (`outside`: from a folder outside it)."""
    runs = []
    roots = []
    for name, command in (("quick", [str(BIN / "cstack")]), ("typer", [sys.executable, "-c", TYPER_MAIN])):
        root = tmp_path / name / "ws"
        shutil.copytree(original, root, symlinks=True)
        roots.append(root)
        full_env = {**os.environ, **NOW, **(env or {})}
        full_env.pop("MOSS_DEBUG", None)
        for variable in workspace.ROOT_ENVS:
            full_env.pop(variable, None) if variable not in (env or {}) else None
        cwd = tmp_path / name if outside else root
        words = [word.replace("{root}", str(root)) for word in args]
        runs.append(subprocess.run([*command, *words], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120))
    return runs[0], runs[1], roots[0], roots[1]


def same(quick_run: subprocess.CompletedProcess[str], typer_run: subprocess.CompletedProcess[str], quick_root: Path, typer_root: Path) -> None:
    """The same exit status, output (with each run's own folder named alike) and files."""
    assert quick_run.returncode == typer_run.returncode, (quick_run, typer_run)
    for stream in ("stdout", "stderr"):
        mine = getattr(quick_run, stream).replace(str(quick_root.parent), "HERE")
        theirs = getattr(typer_run, stream).replace(str(typer_root.parent), "HERE")
        assert mine == theirs, stream
    for name in ("PLAN.md", "CURRENT.md", "MEMORY.md"):
        assert (quick_root / ".cstack" / name).read_bytes() == (typer_root / ".cstack" / name).read_bytes(), name


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["status"],
        ["status", "--json"],
        ["add", "P2: Measure the parser #perf"],
        ["add", "P2: Measure the parser #perf", "--id", "perf", "--depends", "parser,docs", "--section", "backlog-bugs", "--json"],
        ["add", "Measure it", "--depends", "nobody"],  # an unknown dependency: exit 3
        ["add", "Measure it", "--section", "nowhere", "--json"],  # an unknown section: exit 2
        ["add", "-", "--parent=parser"],
        ["done"],  # the one task in progress
        ["done", "parser", "--reason", "covered by tests", "--json"],
        ["done", "99"],  # no such task: exit 3
        ["start", "docs"],
        ["start", "4"],  # the task with an escape sequence: removed on a pipe, by both
        ["close", "docs", "--reason", "superseded"],
        ["block", "docs", "--reason", "waiting for the parser"],
        ["reopen", "sketch", "--json"],
        ["remember", "Always pin the parser version", "--category", "decisions"],
        ["remember", "The vendor answers on Fridays", "--json"],
        ["remember", "x", "--category", "moods"],  # an unknown category: exit 2
        ["add"],  # click refuses: typer reports it either way
        ["close", "docs"],
        ["add", "--help"],
        ["status", "extra"],
    ],
)
def test_the_quick_path_does_what_typer_does(original: Path, tmp_path: Path, args: list[str]) -> None:
    same(*both(original, tmp_path, *args))


def test_roots_given_by_option_and_by_environment_and_none(original: Path, tmp_path: Path) -> None:
    same(*both(original, tmp_path / "a", "add", "Rooted", "--root", "{root}", outside=True))
    same(*both(original, tmp_path / "b", "status", "--project", "{root}", "--json", outside=True))
    quick_run, typer_run, *roots = both(original, tmp_path / "c", "status", outside=True)  # no workspace there: exit 6
    same(quick_run, typer_run, *roots)
    assert quick_run.returncode == 6
    same(*both(original, tmp_path / "d", "done", "--root", str(tmp_path / "missing")))


def test_a_bad_moss_now_is_refused_alike_and_writes_nothing(original: Path, tmp_path: Path) -> None:
    quick_run, typer_run, quick_root, typer_root = both(original, tmp_path, "done", "parser", env={"MOSS_NOW": "yesterday"})
    same(quick_run, typer_run, quick_root, typer_root)
    assert quick_run.returncode == 2 and "MOSS_NOW" in quick_run.stderr
    assert (quick_root / ".cstack" / "PLAN.md").read_text(encoding="utf-8") == PLAN


def test_the_merge_driver_warning_is_said_by_both_and_not_with_json(original: Path, tmp_path: Path) -> None:
    quick_run, typer_run, *roots = both(original, tmp_path / "text", "status")
    same(quick_run, typer_run, *roots)
    assert "merge driver" in quick_run.stderr
    assert "merge driver" not in both(original, tmp_path / "json", "status", "--json")[0].stderr


def test_a_common_add_never_loads_typer(original: Path, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(original, root)
    probe = (
        "import sys\n"
        "sys.argv = ['cstack', *sys.argv[1:]]\n"
        "from cstack.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    print(done.code, 'typer' in sys.modules, 'click' in sys.modules, 'ast' in sys.modules, file=sys.stderr)\n"
    )
    # ... nor `inspect` (whose first import is `ast`): `dataclasses` gets a placeholder (cli.startup)
    for args in (["add", "Quick one", "--json"], ["done", "parser"], ["--version"], ["status"]):
        done = subprocess.run([sys.executable, "-c", probe, *args], cwd=root, env={**os.environ, **NOW}, capture_output=True, text=True, timeout=60)
        assert done.stderr.strip().splitlines()[-1] == "0 False False False", (args, done.stderr)


def test_a_quick_command_runs_with_the_cyclic_collector_paused(original: Path, tmp_path: Path) -> None:
    """Its work is a parse of the stack's files, kept to the end: no collection walks it
    (counted while the command's work is on the stack; the imports before it may collect)."""
    root = tmp_path / "ws"
    shutil.copytree(original, root)
    closed = "".join(f"- [x] Finished item {n} (id: f{n}) | closed: 2026-01-0{1 + n % 9}\n" for n in range(2000))
    plan = root / ".cstack" / "PLAN.md"
    plan.write_text(plan.read_text(encoding="utf-8") + "\n## Completed\n\n" + closed, encoding="utf-8")
    probe = (
        "import gc, sys\n"
        "sys.argv = ['cstack', *sys.argv[1:]]\n"
        "started = []\n"
        "def working():\n"
        "    frame = sys._getframe()\n"
        "    while frame is not None and frame.f_code.co_name != '_run_command':\n"
        "        frame = frame.f_back\n"
        "    return frame is not None\n"
        "gc.callbacks.append(lambda phase, info: started.append(info['generation']) if phase == 'start' and working() else None)\n"
        "from cstack.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    print(done.code, len(started), gc.isenabled(), file=sys.stderr)\n"
    )
    for args in (["status"], ["done", "parser", "--json"], ["remember", "Pin the parser"]):
        done = subprocess.run([sys.executable, "-c", probe, *args], cwd=root, env={**os.environ, **NOW}, capture_output=True, text=True, timeout=60)
        assert done.stderr.strip().splitlines()[-1] == "0 0 True", (args, done.stderr)
