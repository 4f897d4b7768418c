"""The documentation's examples run as tests, so the README and docs/ cannot drift from the tools.

The convention (docs/development.md states it for writers):
- a fenced block opened with ```sh is an example that runs. The blocks of one page run in
  order, in one bash process (so `cd` and variables carry from block to block), with
  `set -euo pipefail`, in a fresh git project in a temporary folder, as a new user of an
  installed toolkit runs them: HOME in that folder, with a git that knows no user name or
  email and whose default branch is not `main` (`trunk`), and on PATH links to `moss`,
  `cstack` and `needlecast` as install.sh makes them, not this environment's `bin/` (so
  `python3` is the system's, which lacks the toolkit's libraries);
- ```sh checkout runs the block from the root of this checkout instead (commands that need the
  source tree: pytest, the benches), with this environment's `bin/` first on PATH, as after
  `. .venv/bin/activate`; such a block must leave the checkout as it found it;
- ```sh model is an example that needs a model API (`moss agent run`); the agent's own doc test
  runs it against a loopback API that speaks the Messages protocol;
- a command that is meant to fail says so: `moss fetch ghost || test $? -eq 3`;
- a shell example that must not run (an install into a real home, a daemon that never ends, a
  command with placeholders) is fenced ```text; ```bash, ```shell, ```console and a fence
  without a language are refused, so no shell example can hide from this test;
- every page has at least one runnable example.
A failure names the page, the block's line, and the command that failed with its line.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
# The reference pages the README promises; each must exist and carry a runnable example.
REQUIRED_PAGES = ("capsules", "cstack", "needlecast", "board", "search", "mcp", "formats", "errors", "architecture", "development")
RUNNABLE = {"sh"}
REFUSED = {"bash", "shell", "console", "zsh", "shell-session"}
FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)\s*(.*?)\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# Seconds one page's examples may take; the slowest (the board) needs about ten.
PAGE_TIMEOUT = 300


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced code block: where it starts (the line after the fence) and what it holds."""

    page: Path
    line: int
    language: str
    options: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line - 1}"


def fenced_blocks(page: Path) -> list[Block]:
    """Every fenced block of a markdown page, in order. Raises AssertionError on an unclosed
    fence or an indented shell fence (which a reader sees but this test would not run)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    number = 0
    while number < len(lines):
        text = lines[number]
        number += 1
        stripped = text.lstrip()
        if stripped.startswith("```") and text != stripped:
            language = stripped[3:].split()[0] if stripped[3:].split() else ""
            assert language not in RUNNABLE | REFUSED, f"{page.name}:{number}: an indented shell fence is not run; start it at column 0"
        found = FENCE.match(text)
        if not found:
            continue
        ticks, language, options = found.groups()
        start = number
        body: list[str] = []
        while number < len(lines) and not (lines[number].startswith(ticks) and lines[number].strip() == ticks):
            body.append(lines[number])
            number += 1
        assert number < len(lines), f"{page.name}:{start}: the fence is never closed"
        number += 1
        blocks.append(Block(page, start + 1, language, options, "\n".join(body) + "\n"))
    return blocks


def runnable(page: Path) -> list[Block]:
    """The blocks this test runs: ```sh blocks, but not ```sh model ones, which talk to a model
    API and run in tests/agent/test_agent_docs.py against a loopback one."""
    return [block for block in fenced_blocks(page) if block.language in RUNNABLE and block.options.split() != ["model"]]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@dataclass(frozen=True, slots=True)
class Script:
    """The bash script for one page, and which markdown line each of its lines came from."""

    text: str
    origin: dict[int, tuple[Block, int]]


PRELUDE = """\
set -eEuo pipefail
shopt -s inherit_errexit
trap '[ -e "$DOCS_FAILED" ] || printf "%s\\n%s\\n" "$LINENO" "$BASH_COMMAND" > "$DOCS_FAILED"' ERR
"""


def build_script(blocks: list[Block], checkout: Path) -> Script:
    """One bash script running `blocks` in order; a checkout block runs in a subshell in
    `checkout`, so it cannot change the project's directory or variables."""
    lines = PRELUDE.splitlines()
    origin: dict[int, tuple[Block, int]] = {}
    for block in blocks:
        in_checkout = block.options.split() == ["checkout"]
        assert in_checkout or not block.options, f"{block.where}: unknown fence option {block.options!r} (only `checkout`)"
        if in_checkout:
            lines.append(f'( cd {shlex.quote(str(checkout))} && export PATH={shlex.quote(str(BIN))}:"$PATH"')
        for offset, code_line in enumerate(block.code.splitlines()):
            lines.append(code_line)
            origin[len(lines)] = (block, block.line + offset)
        if in_checkout:
            lines.append(")")
    return Script("\n".join(lines) + "\n", origin)


TOOLS = ("moss", "cstack", "needlecast")
# A new user's git: no identity yet (and no guessing one from the host name), and a default
# branch other than main, so an example may assume neither.
GITCONFIG = "[user]\n\tuseConfigOnly = true\n[init]\n\tdefaultBranch = trunk\n"


def example_env(home: Path) -> dict[str, str]:
    """The environment a new user of an installed toolkit has: links to our three tools first
    on PATH (as install.sh makes them; the toolkit's Python is not on PATH), a home of their
    own (and a temporary folder) inside the test's folder, a git without an identity whose
    default branch is `trunk`, none of the toolkit's variables."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("MOSS_", "NEEDLECAST_", "CSTACK_", "MOE_", "GIT_"))}
    (home / ".gitconfig").write_text(GITCONFIG)
    scratch = home.parent / "tmp"  # mktemp in an example stays inside the test's folder
    scratch.mkdir()
    links = home.parent / "bin"
    links.mkdir()
    for tool in TOOLS:
        (links / tool).symlink_to(BIN / tool)
    # An activated virtualenv (ours) on the caller's PATH would lend its python3 to the examples.
    outside = [entry for entry in env.get("PATH", "").split(os.pathsep) if entry and Path(entry).resolve() != BIN.resolve()]
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join([str(links), *outside]),
        GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
        GIT_CONFIG_NOSYSTEM="1",
        COLUMNS="100",
        TMPDIR=str(scratch),
    )
    env.pop("XDG_DATA_HOME", None)
    env.pop("VIRTUAL_ENV", None)
    return env


def checkout_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def failure_report(page: Path, script: Script, failed: Path, result: subprocess.CompletedProcess[str]) -> str:
    where = "the page's examples"
    if failed.exists():
        line_text, _, command = failed.read_text().partition("\n")
        line = int(line_text)
        # bash reports a multi-line command (a heredoc, a continued line) by one of its lines;
        # take the nearest line of a block at or before it.
        near = max((number for number in script.origin if number <= line), default=None)
        if near is not None:
            block, md_line = script.origin[near]
            source = page.read_text(encoding="utf-8").splitlines()[md_line - 1].strip()
            where = f"block at {block.where}, line {md_line}: `{source}` (bash ran `{command.strip()}`)"
    output = "\n".join((result.stdout + result.stderr).splitlines()[-60:])
    return f"{page_id(page)}: example failed with exit status {result.returncode}\n  {where}\n--- output (last lines) ---\n{output}"


def test_every_reference_page_exists() -> None:
    missing = [name for name in REQUIRED_PAGES if not (DOCS / f"{name}.md").is_file()]
    assert not missing, f"docs/ lacks: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_shell_examples_are_fenced_so_the_test_sees_them(page: Path) -> None:
    refused = [block.where for block in fenced_blocks(page) if block.language in REFUSED or not block.language]
    assert not refused, f"name each fence's language; use ```sh (runs) or ```text (shown only) for shell examples: {refused}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_page_has_a_runnable_example(page: Path) -> None:
    assert runnable(page), f"{page_id(page)} has no ```sh block; every page shows at least one command that works"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
@pytest.mark.slow  # every page's examples, as a user would type them
def test_examples_run(page: Path, tmp_path: Path) -> None:
    blocks = runnable(page)
    if not blocks:
        pytest.fail(f"{page_id(page)} has no runnable example")
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    env = example_env(home)
    subprocess.run(["git", "init", "-q"], cwd=project, env=env, check=True)
    script = build_script(blocks, ROOT)
    failed = tmp_path / "failed"
    env["DOCS_FAILED"] = str(failed)
    before = checkout_state() if any(block.options for block in blocks) else None
    result = subprocess.run(
        ["bash", "-c", script.text, "docs-example"], cwd=project, env=env, capture_output=True, text=True, timeout=PAGE_TIMEOUT, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        pytest.fail(failure_report(page, script, failed, result), pytrace=False)
    if before is not None:
        assert checkout_state() == before, f"{page_id(page)}: a ```sh checkout block changed the checkout"


def table_rows(page: Path) -> list[list[str]]:
    """The cells of every markdown table row of `page` (header and separator rows included)."""
    rows = []
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and line.rstrip().endswith("|"):
            rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])])
    return rows


def test_the_error_classes_table_matches_the_error_tree() -> None:
    from moss_files.foundation import errors

    classes = {cls.__name__: cls for cls in (errors.MossError, *errors.MossError.__subclasses__())}
    documented = {row[0].strip("`"): row[1:4] for row in table_rows(DOCS / "errors.md") if row[0].strip("`") in classes}
    assert documented == {name: [f"`{cls.code}`", str(cls.status), str(cls.exit_code)] for name, cls in classes.items()}


def test_every_code_row_of_the_error_page_names_a_registered_code() -> None:
    from moss_files.foundation.errors import ERROR_CODES

    rows = [row for row in table_rows(DOCS / "errors.md") if len(row) == 4 and re.fullmatch(r"`[A-Z][A-Z0-9_]+`", row[0])]
    codes = [row[0].strip("`") for row in rows]
    assert sorted(set(codes)) == sorted(codes), "a code is listed twice"
    assert set(codes) == set(ERROR_CODES), f"listed but not registered: {set(codes) - set(ERROR_CODES)}"
    for row in rows:
        status, exit_code = row[1], row[2]
        assert status == "—" or 400 <= int(status) < 600, row
        assert exit_code == "—" or int(exit_code) in range(1, 10), row


def section(page: Path, heading: str) -> str:
    """The text of `page` under the `## heading`, up to the next `## `."""
    text = page.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_readme_says_what_the_test_suite_needs_and_how_long_it_runs() -> None:
    """The README's Development section once said nothing of what ./test.sh fetches and
    installs (the npm registry, Chromium through apt-get as root, the disk all that takes) or
    how long it runs, and development.md gave a third of a full run's time."""
    readme = " ".join(section(ROOT / "README.md", "Development").split())
    script = (ROOT / "test.sh").read_text(encoding="utf-8")
    for marker, named in (("npm ci", "npm"), ("apt-get install", "apt-get"), ("chromium", "Chromium"), ("sudo", "root")):
        if marker in script:
            assert named in readme, f"./test.sh uses {marker}; the README's Development section does not say so"
    assert re.search(r"\d+ MB", readme), "the README does not say how much disk the tests take"
    said = re.findall(r"full run takes (about [\w-]+ minutes)", readme)
    assert said, "the README does not say how long a full run takes"
    development = " ".join((DOCS / "development.md").read_text(encoding="utf-8").split())
    assert re.findall(r"full run takes (about [\w-]+ minutes)", development) == said


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    in_fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith("#"):
            base = github_anchor(line.lstrip("#"))
            anchor, count = base, 0
            while anchor in found:
                count += 1
                anchor = f"{base}-{count}"
            found.add(anchor)
    return found


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_links_between_pages_resolve(page: Path) -> None:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    broken: list[str] = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # an outside address
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    assert not broken, f"{page_id(page)}: links to nothing: {broken}"
