"""`moss --help` and `cstack --help` as typer prints them at a terminal of 80 columns or more,
kept as text. Entry layer.

Typer prints a group's help after building every command to read its first help sentence,
which loads typer and, for `moss`, every feature module (about half a second on a busy 2-core
machine, for a page of text). `cli.main` and `cstack.main` print the kept text instead (`show`)
for exactly `--help` or `-h` when click would wrap the help at its widest (78 columns: a
terminal of 80 or more, or no terminal); any other width or invocation goes to typer.
tests/test_startup.py checks each text against typer's own rendering; after a change to a
group's commands or to a command's first help sentence, regenerate them with
`.venv/bin/python -m moss_files.cli.top_help` (`moss`'s, `TEXT` here) and
`.venv/bin/python -m cstack.top_help` (`cstack`'s, in `cstack/top_help.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MIN_COLUMNS = 80  # click wraps help at min(columns, 80) - 2: 78 from 80 columns on

TEXT = """\
Usage: moss [OPTIONS] COMMAND [ARGS]...

  moss-files: capsules, memory, messages, tasks and search for agent teams, as
  markdown files in git.

Options:
  --version   Print the toolkit's version and exit.
  -h, --help  Show this message and exit.

Commands:
  version         Print the toolkit's version.
  codes           List every stable error code with what it means.
  init            Scaffold .cstack/, .needlecast/, .moss/ and git settings in
                  a project; never overwrites a file.
  doc             Inspect and edit markdown documents with YAML frontmatter,
                  faithfully.
  store           Store a capsule read from stdin: `moss store --name auth <
                  capsule.md`.
  fetch           Print a capsule's text (or, with --json, the whole record).
  fetch-many      Fetch up to 50 capsules at once; missing ones are reported,
                  the rest returned (exit 3 if any failed).
  update          Change a capsule's text or metadata (name and workspace are
                  fixed).
  append          Add text to one section; a placeholder such as '(none)' is
                  replaced.
  delete          Soft-delete a capsule (recoverable until purged); its name
                  becomes free.
  latest          The most recently updated capsule of a workspace (exit 3
                  when there is none).
  list            List a workspace's capsules, newest first (never their
                  text).
  inventory       List capsules of every workspace, newest first (never their
                  text).
  capsule-search  Full-text search over capsules, best first, each with a
                  snippet (Moss's search).
  compose         Assemble several capsules into one bundle, all or nothing.
  export          Export capsules to a Moss-compatible JSONL file (mode 0600),
                  or LoopFlow's items to its own files.
  import          Import a JSONL export, all or nothing (exit 4 for bad lines,
                  5 for collisions).
  purge           Permanently remove soft-deleted capsules; asks first at a
                  terminal (--yes otherwise), --dry-run lists them.
  bulk-update     Set phase, role or tags on every live capsule the filters
                  match, all or nothing.
  bulk-delete     Soft-delete every live capsule the filters match, all or
                  nothing.
  history         List the committed versions of a capsule from git (see `moss
                  fetch --at <commit>`).
  search          Search every artifact: ids with one-line summaries, best
                  first (then `moss expand ID`).
  expand          Full records of items by id, read from their files; unknown
                  ids are listed (exit 3 if none is found).
  timeline        What happened around an item or a moment, oldest first.
  index           The search index: a derived SQLite cache under .moss/cache/,
                  safe to delete.
  insight         Insights: what was learned, one markdown file each under
                  .moss/insights/.
  session         Work sessions: orient at the start, hand off at the end
                  (.moss/sessions/).
  backlog         LoopFlow's tasks, kept as PLAN.md tasks (.cstack/PLAN.md)
                  with their ids.
  feedback        Pain points, feature ideas and bugs about the tools
                  (.moss/feedback/).
  observe         Record an observation (LoopFlow's observe): a file under
                  .moss/observations/, searchable and on the timeline.
  serve           Serve the MCP tools: over stdio for one agent (the default),
                  or with --http as one shared daemon per project that records
                  itself in .moss/run/mcp.json and stops cleanly on SIGTERM.
  task            Tasks on the board: create, claim, plan, work, review (Moe's
                  workflow as files).
  epic            Epics: groups of tasks with their own rails and architecture
                  notes.
  worker          Workers: the agents that claim tasks, their status and
                  blocks.
  team            Teams: workers of one role that may share an epic's column.
  board           The board itself: settings and rails, status, activity log,
                  rail proposals.
  merge           Merge the toolkit's files between clones: the git merge
                  driver, its setup, and a check for leftover conflicts.
  agent           The local agent runtime: sessions and runs as files under
                  .moss/agent/, a default-deny capability gate in front of MCP
                  tools, and a model loop with token and cost accounting.
  migrate         Bring work kept in older systems over: Moss, Moe, LoopFlow,
                  Backlog.md, Beads, cortical-stack, needlecast v1/v2.
  upgrade         Bring every toolkit file of the workspace to its kind's
                  current format version.
  ui              Open the web view (board, capsules, messages, memory,
                  search, agent sessions) in the default browser, starting
                  `moss serve --http 127.0.0.1:PORT` in the background when no
                  daemon serves this project.
  hook            The hooks Claude Code and Codex run (installed by `moss init
                  --agent claude|codex`).
  projects        The projects you work on, by name (~/.moss/projects.json;
                  Moe's ~/.moe/projects.json is read too): `--project NAME`
                  then works from anywhere, on every command that takes
                  --root.
"""


def render(app: Any = None, program: str = "moss") -> str:
    """The group help of `app` (a typer app; default: moss's) as typer prints it at 80 columns
    or more under the name `program` (its text and newline)."""
    import typer.main

    if app is None:
        from moss_files.cli.app import app

    group = typer.main.get_command(app)
    # A width given to the context is used as it is; click's own is min(columns, 80) - 2.
    with group.make_context(program, [], resilient_parsing=True, terminal_width=MIN_COLUMNS - 2) as ctx:
        return group.get_help(ctx) + "\n"


def show(text: str) -> bool:
    """Print `text`, a kept group help, when typer would print that very text (click wraps it
    at 78 columns, and writes to the streams as they are); False to leave it to typer."""
    import shutil
    import sys

    from moss_files.cli import streams

    if shutil.get_terminal_size().columns < MIN_COLUMNS or streams.misconfigured(sys.stdout) or streams.misconfigured(sys.stderr):
        return False
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # As click: the reader went away (`moss --help | head -1`); keep the interpreter's
        # final flush from failing again.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(1) from None
    return True


def rewrite(path: Path, text: str) -> None:
    """Replace the `TEXT` literal of the module at `path` by `text` (a development tool)."""
    source = path.read_text(encoding="utf-8")
    head, _, rest = source.partition('TEXT = """\\\n')
    _, _, tail = rest.partition('"""\n')
    if '"""' in text or "\\" in text:
        raise SystemExit("the help holds a triple quote or a backslash: store it another way")
    path.write_text(f'{head}TEXT = """\\\n{text}"""\n{tail}', encoding="utf-8")
    print(f"{path}: {len(text.splitlines())} lines")


if __name__ == "__main__":
    rewrite(Path(__file__), render())
