"""`moss list`, `inventory`, `latest`, `fetch` and `history` without typer (`cli.quick`) give what the typer commands
give: the same parameters for every command line the quick parser accepts (checked against
click's own parsing on generated command lines), and the same stdout, stderr and exit status
as whole processes, on a real workspace read through the index and through the files, for
text and JSON, every option, errors, warnings and help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moss_files.cli import app as cli
from moss_files.cli import quick
from moss_files.foundation import workspace
from tests.capsules.test_list_through_index import generate
from tests.conftest import BIN

# The typer path of the same console script: `cli.main.main` with the quick path turned off.
TYPER_MAIN = 'import sys; sys.argv[0] = "moss"; import moss_files.cli.quick as q; q.run = lambda argv: None; from moss_files.cli.main import main; main()'
COMMANDS = ("list", "inventory", "latest", "fetch", "history")


def click_params(command_name: str, args: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    """The parameters click gives the typer command for `args`; None when click refuses them."""
    command: Any = cli.feature_command("moss_files.cli.capsules", command_name)
    saved = dict(os.environ)
    try:
        for name in workspace.ROOT_ENVS:
            os.environ.pop(name, None)
        os.environ.update(env)
        ctx = command.make_context(f"moss {command_name}", list(args))
    except Exception:  # click's usage errors, --help's exit
        return None
    finally:
        os.environ.clear()
        os.environ.update(saved)
    params = dict(ctx.params)
    if params.get("root") is not None:
        params["root"] = str(params["root"])
    return params


def quick_params(command_name: str, args: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    saved = dict(os.environ)
    try:
        for name in workspace.ROOT_ENVS:
            os.environ.pop(name, None)
        os.environ.update(env)
        return quick.parse_listing(args, command_name)
    finally:
        os.environ.clear()
        os.environ.update(saved)


TOKENS = st.sampled_from(
    [
        "--workspace",
        "-w",
        "w3",
        "Team B",
        "--workspace=x",
        "--workspace=",
        "--limit",
        "-l",
        "--limit=5",
        "--limit=x",
        "5",
        "-3",
        " 7",
        "5_0",
        "-l5",
        "--offset",
        "-o",
        "--offset=2",
        "--include-deleted",
        "--include-deleted=1",
        "--include-text",
        "--tag",
        "--tag=group1",
        "--name-prefix",
        "--name-prefix=auth",
        "--run-id",
        "--run-id=r1",
        "--phase",
        "plan",
        "--role=qa",
        "--json",
        "--json=yes",
        "handoff",
        "01J0000000000000000000000A",
        "--id",
        "--id=01J0000000000000000000000A",
        "--name",
        "-n",
        "--name=handoff",
        "--at",
        "--at=HEAD~1",
        "--no-text",
        "--no-text=1",
        "--root",
        "--root=",
        "--root=/tmp",
        "--project",
        "--project=shop",
        "/tmp",
        "--help",
        "-h",
        "--",
        "--lim=3",
        "-x",
        "",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    command=st.sampled_from(COMMANDS),
    args=st.lists(TOKENS, max_size=7),
    env=st.sampled_from([{}, {"MOSS_ROOT": "/srv/ws"}, {"MOE_PROJECT_PATH": "/srv/moe"}, {"MOSS_ROOT": "/a", "MOE_PROJECT_PATH": "/b"}]),
)
def test_every_listing_command_line_the_quick_parser_takes_parses_as_click_parses_it(command: str, args: list[str], env: dict[str, str]) -> None:
    mine = quick_params(command, args, env)
    if mine is None:
        return  # left to typer
    assert mine == click_params(command, args, env), (command, args)


def test_the_common_forms_are_taken_by_the_quick_parser() -> None:
    for command, args in (
        ("list", []),
        ("list", ["--workspace", "w3", "--json"]),
        ("list", ["-w", "w3", "-l", "5", "-o", "10", "--include-deleted", "--phase", "plan"]),
        ("inventory", []),
        ("inventory", ["--tag", "x", "--name-prefix=a", "--root", "/x"]),
        ("latest", ["--workspace", "w3", "--include-text"]),
    ):
        assert quick.parse_listing(args, command) is not None, (command, args)
    assert quick.parse_listing(["handoff", "-l", "2", "--json"], "history") is not None
    assert quick.parse_listing(["--id", "01J0000000000000000000000A"], "history") is not None
    assert quick.parse_listing(["handoff", "--at", "HEAD~3", "--no-text", "-w", "w3"], "fetch") is not None
    for command, args in (
        ("list", ["--help"]),
        ("list", ["x"]),
        ("list", ["--limit"]),
        ("inventory", ["-l5"]),
        ("latest", ["--tag", "x"]),
        ("history", ["a", "b"]),
        ("history", ["-x"]),
    ):
        assert quick.parse_listing(args, command) is None, (command, args)


def test_the_quick_parser_knows_each_option_of_the_typer_commands() -> None:
    """Every option the typer commands declare is one the quick parser reads (or `--help`)."""
    for command_name, (defaults, values, flags) in quick.LISTING_COMMANDS.items():
        command: Any = cli.feature_command("moss_files.cli.capsules", command_name)
        declared = {opt for param in command.params if param.param_type_name == "option" for opt in [*param.opts, *param.secondary_opts]}
        assert declared - {"--help", "-h"} == set(values) | set(flags), command_name
        arguments = [param.name for param in command.params if param.param_type_name == "argument"]
        assert arguments == ([quick.LISTING_ARGUMENTS[command_name]] if command_name in quick.LISTING_ARGUMENTS else []), command_name
        assert set(defaults) == {param.name for param in command.params}, command_name


# --------------------------------------------------------------------------- whole processes


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git workspace of 360 capsules in three workspaces (ties, deleted ones, orchestration
    fields), a capsule file that cannot be read, and a .gitattributes naming a merge driver
    this clone does not define."""
    root = tmp_path_factory.mktemp("quick-listing") / "ws"
    generate(root, 360, seed=5)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitattributes").write_text(".moss/** merge=moss\n", encoding="utf-8")
    broken = root / ".moss" / "capsules" / "x" / "broken.md"
    broken.write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
    subprocess.run([str(BIN / "moss"), "index", "rebuild"], cwd=root, check=True, capture_output=True)
    return root


def both(
    ws: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """(the console script, the typer path) run with the same arguments."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("MOSS_DEBUG", None)
    quick_run = subprocess.run([str(BIN / "moss"), *args], cwd=cwd or ws, env=full_env, capture_output=True, text=True, timeout=120)
    typer_run = subprocess.run([sys.executable, "-c", TYPER_MAIN, *args], cwd=cwd or ws, env=full_env, capture_output=True, text=True, timeout=120)
    return quick_run, typer_run


def same(quick_run: subprocess.CompletedProcess[str], typer_run: subprocess.CompletedProcess[str]) -> None:
    assert (quick_run.returncode, quick_run.stdout, quick_run.stderr) == (typer_run.returncode, typer_run.stdout, typer_run.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["list", "--json"],
        ["list", "--workspace", "Team B", "-l", "7", "-o", "3"],
        ["list", "-w", "x", "--include-deleted", "--json"],  # the unreadable file: a warning, by both
        ["list", "-w", "x", "--include-deleted"],
        ["list", "--phase", "plan", "--run-id", "r1", "--role=qa", "--limit=100"],
        ["list", "--workspace", "nobody"],
        ["list", "--limit", "0"],  # the use case refuses: exit 2
        ["list", "--limit", "500", "--json"],
        ["list", "--limit", "many"],  # click refuses: typer runs it either way
        ["list", "extra"],
        ["list", "--help"],
        ["inventory"],
        ["inventory", "--json", "-l", "3", "-o", "40"],
        ["inventory", "--tag", "nothing", "--include-deleted"],
        ["inventory", "--name-prefix", "Auth", "--workspace", "default"],
        ["inventory", "--name-prefix=caf", "--json"],
        ["inventory", "--phase", "build", "--limit", "2"],
        ["inventory", "--offset", "-1"],
        ["inventory", "-h"],
        ["latest"],
        ["latest", "--json"],
        ["latest", "-w", "Team B", "--include-text"],
        ["latest", "--workspace", "nobody"],  # none: exit 3, error on stderr
        ["latest", "--workspace", "nobody", "--json"],
        ["latest", "--phase", "build", "--role", "qa", "--run-id", "r0"],
        ["latest", "--phase", "nothing", "--role", "qa"],
        ["latest", "-w", "x", "--include-deleted", "--include-text", "--json"],
    ],
)
def test_the_quick_path_prints_what_typer_prints(ws: Path, args: list[str]) -> None:
    same(*both(ws, *args))


def test_roots_given_by_option_and_by_environment_and_none(ws: Path, tmp_path: Path) -> None:
    same(*both(ws, "list", "--root", str(ws), cwd=tmp_path))
    same(*both(ws, "inventory", "--json", env={workspace.ROOT_ENV: str(ws)}, cwd=tmp_path))
    same(*both(ws, "latest", env={workspace.MOE_ROOT_ENV: f"{ws}/"}, cwd=tmp_path))
    quick_run, typer_run = both(ws, "list", cwd=tmp_path)  # no workspace here: exit 6
    same(quick_run, typer_run)
    assert quick_run.returncode == 6
    same(*both(ws, "inventory", "--root", str(tmp_path / "missing"), "--json"))


def test_a_few_capsules_are_read_from_their_files_by_both(tmp_path: Path) -> None:
    generate(tmp_path / "small", 12, seed=2)
    for args in (["list"], ["inventory", "--json"], ["latest", "--include-text"]):
        same(*both(tmp_path / "small", *args))


def test_the_merge_driver_warning_is_said_by_both_and_not_with_json(ws: Path) -> None:
    quick_run, typer_run = both(ws, "inventory")
    same(quick_run, typer_run)
    assert "merge driver" in quick_run.stderr
    assert "merge driver" not in both(ws, "inventory", "--json")[0].stderr


def test_a_broken_pipe_ends_the_listing_quietly_with_status_1(ws: Path) -> None:
    for command in ([str(BIN / "moss")], [sys.executable, "-c", TYPER_MAIN]):
        process = subprocess.Popen([*command, "inventory", "--limit", "500"], cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None
        process.stdout.close()  # the reader is gone before the first line
        _, err = process.communicate(timeout=60)
        assert (process.returncode, b"Traceback" in err) == (1, False), (command, err)


def test_a_common_listing_never_loads_typer(ws: Path) -> None:
    for args in (["list", "--json"], ["inventory"], ["latest", "-w", "x"]):
        probe = (
            "import sys\n"
            f"sys.argv = ['moss', *{args!r}]\n"
            "from moss_files.cli.main import main\n"
            "try:\n"
            "    main()\n"
            "except SystemExit as done:\n"
            "    print(done.code, 'typer' in sys.modules, 'ast' in sys.modules, file=sys.stderr)\n"
        )
        done = subprocess.run([sys.executable, "-c", probe], cwd=ws, capture_output=True, text=True, timeout=60)
        # ... nor `inspect` (whose first import is `ast`): `dataclasses` gets a placeholder (cli.startup)
        assert done.stderr.strip().splitlines()[-1] in ("0 False False", "3 False False"), (args, done.stderr)


# --------------------------------------------------------------------------- moss history

CAPSULE = "## Objective\nShip auth.\n\n## Current status\nHalf.\n\n## Decisions\n- JWT.\n\n## Next actions\n- Tests.\n\n## Key locations\n- src/auth.py\n\n## Open questions\n- None.\n"


@pytest.fixture(scope="module")
def history_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git workspace where one capsule has three committed versions and uncommitted changes,
    and another has one."""
    root = tmp_path_factory.mktemp("quick-history") / "ws"
    root.mkdir()
    (root / ".moss").mkdir()

    def run(*args: str, input: str | None = None) -> str:
        return subprocess.run(list(args), cwd=root, check=True, capture_output=True, text=True, input=input).stdout.strip()

    def commit(message: str) -> None:
        run("git", "add", "-A")
        run("git", "commit", "-qm", message)

    run("git", "init", "-q")
    run(str(BIN / "moss"), "store", "--name", "auth", input=CAPSULE)
    run(str(BIN / "moss"), "store", "--name", "billing", input=CAPSULE.replace("auth", "billing"))
    commit("auth and billing")
    for state in ("Most.", "Done."):
        run(str(BIN / "moss"), "update", "auth", "--text", "-", input=CAPSULE.replace("Half.", state))
        commit(f"auth: {state}")
    run(str(BIN / "moss"), "update", "auth", "--text", "-", input=CAPSULE.replace("Half.", "Reopened."))
    return root


def test_history_and_fetch_by_the_quick_path_print_what_typer_prints(history_ws: Path, tmp_path: Path) -> None:
    auth_id = json.loads(both(history_ws, "history", "auth", "--json")[0].stdout)["versions"][0]["id"]
    for args in (
        ["history", "auth"],
        ["history", "auth", "--json"],
        ["history", "auth", "-l", "2"],
        ["history", "--name", "billing", "--json"],
        ["history", "-n", "auth", "auth"],
        ["history", "auth", "--name", "billing"],  # they disagree: exit 2
        ["history", "--id", auth_id, "--limit", "1", "--json"],
        ["history", auth_id],  # an id as the argument, as Moss's CLI takes it
        ["history", "nobody"],  # exit 3
        ["history", "auth", "--workspace", "elsewhere", "--json"],
        ["history", "auth", "--limit", "0"],
        ["history"],  # neither a name nor an id: the use case refuses
        ["history", "auth", "extra"],  # click refuses: typer either way
    ):
        same(*both(history_ws, *args))
    for args in (
        ["fetch", "auth"],
        ["fetch", "auth", "--json"],
        ["fetch", "auth", "--no-text"],
        ["fetch", "--id", auth_id, "--json"],
        ["fetch", auth_id, "--no-text"],
        ["fetch", "auth", "--at", "HEAD~1"],
        ["fetch", "auth", "--at", "HEAD~2", "--json"],
        ["fetch", "--id", auth_id, "--at", "HEAD~1", "--no-text"],
        ["fetch", "auth", "--at", "HEAD~9"],  # no such commit: exit 3
        ["fetch", "auth", "--at", "HEAD:x"],  # not a revision: exit 2
        ["fetch", "nobody"],
        ["fetch", "billing", "--workspace", "elsewhere", "--include-deleted"],
        ["fetch"],
        ["fetch", "auth", "--at"],  # click refuses: typer either way
    ):
        same(*both(history_ws, *args))
    same(*both(history_ws, "fetch", "auth", "--root", str(history_ws), cwd=tmp_path))
    same(*both(history_ws, "history", "auth", "--root", str(history_ws), cwd=tmp_path))
    same(*both(history_ws, "history", "auth", cwd=tmp_path))  # no workspace: exit 6


def test_a_common_history_loads_neither_typer_nor_gitpython_once_the_record_is_made(history_ws: Path) -> None:
    """The first question builds the path-history record (GitPython runs the walk); every later
    one reads the record, and git only through its own command line."""
    probe = (
        "import sys\n"
        "sys.argv = ['moss', 'history', 'auth', '--json']\n"
        "from moss_files.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    print(done.code, 'typer' in sys.modules, 'git' in sys.modules, file=sys.stderr)\n"
    )
    first, again = (subprocess.run([sys.executable, "-c", probe], cwd=history_ws, capture_output=True, text=True, timeout=60) for _ in range(2))
    assert first.stderr.strip().splitlines()[-1] in ("0 False True", "0 False False"), first.stderr  # made now, or by a test before
    assert again.stderr.strip().splitlines()[-1] == "0 False False", again.stderr
