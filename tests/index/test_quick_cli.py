"""`moss search` and `moss index refresh|rebuild` without typer (`cli.quick`) give what the typer
commands give: the same parameters for every command line the quick parser accepts (checked
against click's own parsing on generated command lines), and the same stdout, stderr and exit
status as whole processes, on real workspaces, for text and JSON, errors, warnings and help."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN
from hypothesis import given, settings
from hypothesis import strategies as st

from moss_files.cli import app as cli
from moss_files.cli import quick
from moss_files.foundation import workspace

# The typer path of the same console script: `cli.main.main` with the quick path turned off.
TYPER_MAIN = 'import sys; sys.argv[0] = "moss"; import moss_files.cli.quick as q; q.run = lambda argv: None; from moss_files.cli.main import main; main()'
# Seconds a refresh or rebuild took, the one part of their output that differs run to run.
SECONDS = re.compile(r'\d+\.\d+s$|"seconds": [0-9.e-]+', re.MULTILINE)


def click_params(command_words: list[str], args: list[str], env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The parameters click gives the typer command for `args`; None when click refuses them."""
    command: Any = cli.feature_command("moss_files.cli.search", command_words[0])
    for word in command_words[1:]:
        command = command.get_command(None, word)
    saved = dict(os.environ)
    try:
        for name in workspace.ROOT_ENVS:
            os.environ.pop(name, None)
        os.environ.update(env or {})
        ctx = command.make_context(" ".join(["moss", *command_words]), list(args))
    except Exception:  # click's usage errors, --help's exit
        return None
    finally:
        os.environ.clear()
        os.environ.update(saved)
    params = dict(ctx.params)
    if params.get("root") is not None:
        params["root"] = str(params["root"])
    for key in ("query", "kind"):
        if key in params:
            params[key] = tuple(params[key] or ())
    return params


def quick_params(parse: Any, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any] | None:
    saved = dict(os.environ)
    try:
        for name in workspace.ROOT_ENVS:
            os.environ.pop(name, None)
        os.environ.update(env or {})
        return parse(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_the_quick_parser_names_the_root_variable_the_workspace_reads() -> None:
    assert (quick.ROOT_ENV, quick.MOE_ROOT_ENV) == workspace.ROOT_ENVS


SEARCH_TOKENS = st.sampled_from(
    [
        "deploy",
        "auth token",
        '"a phrase"',
        "-legacy",
        "-kind:x",
        "kind:insight",
        "-",
        "--",
        "--kind",
        "--kind=task",
        "--kind=",
        "insight,task",
        "--limit",
        "--limit=5",
        "--limit=x",
        "5",
        "-3",
        " 7",
        "5_0",
        "--offset",
        "--offset=2",
        "--all",
        "--all=1",
        "--raw",
        "--json",
        "--json=yes",
        "--root",
        "--root=",
        "--root=/tmp",
        "--project",
        "--project=shop",
        "/tmp",
        "--help",
        "--help=1",
        "-h",
        "--lim=3",
        "--roo",
        "--foo=bar",
        "-x",
        "",
    ]
)


@settings(max_examples=600, deadline=None)
@given(
    args=st.lists(SEARCH_TOKENS, max_size=7),
    env=st.sampled_from([{}, {"MOSS_ROOT": "/srv/ws"}, {"MOE_PROJECT_PATH": "/srv/moe"}, {"MOSS_ROOT": "/a", "MOE_PROJECT_PATH": "/b"}]),
)
def test_every_search_command_line_the_quick_parser_takes_parses_as_click_parses_it(args: list[str], env: dict[str, str]) -> None:
    mine = quick_params(quick.parse_search, args, env)
    if mine is None:
        return  # left to typer
    assert mine == click_params(["search"], args, env), args


@settings(max_examples=300, deadline=None)
@given(
    args=st.lists(
        st.sampled_from(["--json", "--json=1", "--root", "--root=/tmp", "--root=", "--project", "--project=x", "/tmp", "--help", "x", "--", "-r"]), max_size=4
    )
)
def test_every_index_command_line_the_quick_parser_takes_parses_as_click_parses_it(args: list[str]) -> None:
    for sub in ("refresh", "rebuild"):
        mine = quick_params(lambda words, sub=sub: quick.parse_index(words, sub), args)
        if mine is not None:
            assert mine == click_params(["index", sub], args), (sub, args)


def test_the_common_forms_are_taken_by_the_quick_parser() -> None:
    for args in (["deploy"], ["auth", "-legacy", "--kind", "insight", "--limit", "5", "--json"], ["--all", "a", "b", "--root", "/x"], ["x", "--", "--json"]):
        assert quick.parse_search(args) is not None, args
    for args in ([], ["--json"], ["--root", "/x", "--json"]):
        assert quick.parse_index(args) is not None, args
    for args in (["--help"], [], ["a", "--limit"], ["a", "--limit", "many"], ["a", "--json=1"]):
        assert quick.parse_search(args) is None, args


# --------------------------------------------------------------------------- whole processes


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git workspace with a few of each kind, a file the index cannot read, a title with an
    ANSI escape, and a .gitattributes naming a merge driver this clone does not define."""
    root = tmp_path_factory.mktemp("quick") / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for number in range(12):
        write(
            root / ".moss" / "insights" / f"INS-{number}.md",
            f"---\nid: INS-{number}\ntype: technical\ntags: [deploy]\ncreated: 2026-01-{number + 1:02d}T10:00:00Z\n---\nDeploy step {number}: retry the token refresh.\n",
        )
    write(root / ".moss" / "notes" / "colour.md", "---\ntitle: \x1b[31mred deploy\x1b[0m note\n---\nA deploy note with colour.\n")
    write(root / ".moss" / "notes" / "broken.md", "---\ntitle: [unclosed\n---\nbody\n")
    write(root / ".cstack" / "PLAN.md", "# Plan\n\n## Active\n- [ ] P1: Deploy the gateway #ops (id: gw)\n")
    write(root / ".gitattributes", ".moss/** merge=moss\n")
    subprocess.run([str(BIN / "moss"), "index", "rebuild"], cwd=root, check=True, capture_output=True)  # its note said once, here
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
    assert quick_run.returncode == typer_run.returncode, (quick_run, typer_run)
    assert SECONDS.sub("S", quick_run.stdout) == SECONDS.sub("S", typer_run.stdout)
    assert SECONDS.sub("S", quick_run.stderr) == SECONDS.sub("S", typer_run.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["search", "deploy"],
        ["search", "deploy", "--json"],
        ["search", "deploy", "-legacy", "--kind", "insight,note", "--limit", "3", "--offset", "1"],
        ["search", "deploy", "--all", "retry"],
        ["search", "nothing-matches-this"],
        ["search", "kind:task"],
        ["search", "red"],  # the title with an escape sequence: removed on a pipe, by both
        ["search", "deploy", "--limit", "0"],  # the use case refuses: exit 2
        ["search", "deploy", "--limit", "0", "--json"],
        ["search", "--raw", "AND ("],
        ["search", "--raw", "deploy", "--json"],
        ["search", "deploy", "--limit", "many"],  # click refuses: typer runs it either way
        ["search"],
        ["search", "--help"],
        ["index", "refresh"],
        ["index", "refresh", "--json"],
        ["index", "rebuild"],
        ["index", "rebuild", "--json"],
        ["index", "refresh", "--help"],
    ],
)
def test_the_quick_path_prints_what_typer_prints(ws: Path, args: list[str]) -> None:
    same(*both(ws, *args))


def test_roots_given_by_option_and_by_environment_and_none(ws: Path, tmp_path: Path) -> None:
    same(*both(ws, "search", "deploy", "--root", str(ws), cwd=tmp_path))
    same(*both(ws, "search", "deploy", env={workspace.ROOT_ENV: str(ws)}, cwd=tmp_path))
    same(*both(ws, "index", "refresh", "--root", str(ws), "--json", cwd=tmp_path))
    quick_run, typer_run = both(ws, "search", "deploy", cwd=tmp_path)  # no workspace here: exit 6
    same(quick_run, typer_run)
    assert quick_run.returncode == 6
    same(*both(ws, "search", "deploy", "--root", str(tmp_path / "missing")))
    same(*both(ws, "index", "refresh", "--root", str(tmp_path / "missing")))


def test_a_hand_edit_just_before_a_quick_search_is_found(ws: Path) -> None:
    target = ws / ".moss" / "insights" / "INS-3.md"
    before = target.stat()
    text = target.read_text(encoding="utf-8")
    target.write_text(text.replace("retry", "zebra"), encoding="utf-8")  # same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # same mtime
    found = subprocess.run([str(BIN / "moss"), "search", "zebra", "--json"], cwd=ws, capture_output=True, text=True, timeout=60, check=True)
    assert [match["id"] for match in json.loads(found.stdout)["matches"]] == ["INS-3"]
    target.write_text(text, encoding="utf-8")


def test_the_merge_driver_warning_is_said_by_both_and_not_with_json(ws: Path) -> None:
    quick_run, typer_run = both(ws, "search", "deploy")
    same(quick_run, typer_run)
    assert "merge driver" in quick_run.stderr
    assert "merge driver" not in both(ws, "search", "deploy", "--json")[0].stderr


def test_a_broken_pipe_ends_the_search_quietly_with_status_1(ws: Path) -> None:
    for command in ([str(BIN / "moss")], [sys.executable, "-c", TYPER_MAIN]):
        process = subprocess.Popen([*command, "search", "deploy", "--limit", "200"], cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None
        process.stdout.close()  # the reader is gone before the first line
        _, err = process.communicate(timeout=60)
        assert (process.returncode, b"Traceback" in err) == (1, False), (command, err)


def test_a_common_search_never_loads_typer(ws: Path) -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['moss', 'search', 'deploy', '--json']\n"
        "from moss_files.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    print(done.code, 'typer' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ws, capture_output=True, text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "0 False", done.stderr


def test_a_search_without_a_watcher_never_loads_the_watchers_module(ws: Path) -> None:
    """No watcher's socket: the query walks, and loads neither the watcher nor inotify."""
    assert not (ws / ".moss" / "run" / "index.sock").exists()
    probe = (
        "import sys\n"
        "sys.argv = ['moss', 'search', 'deploy', '--json']\n"
        "from moss_files.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    print(done.code, [m for m in ('moss_files.index.watch', 'moss_files.foundation.inotify') if m in sys.modules], file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ws, capture_output=True, text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "0 []", done.stderr


def test_a_common_refresh_builds_no_context(ws: Path) -> None:
    """`moss index refresh` finds the workspace and refreshes its index without a Context, so
    the process never loads the foundation's context and settings modules."""
    probe = (
        "import sys\n"
        "sys.argv = ['moss', 'index', 'refresh', '--json']\n"
        "from moss_files.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    print(done.code, [m for m in ('moss_files.foundation.context', 'moss_files.foundation.config') if m in sys.modules], file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ws, capture_output=True, text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "0 []", done.stderr
