"""`cstack --help` as typer prints it at a terminal of 80 columns or more, kept as text, so
that `cstack --help` loads no typer (`moss_files.cli.top_help` says when it is used).
Regenerate it with `.venv/bin/python -m cstack.top_help`. Entry layer."""

TEXT = """\
Usage: cstack [OPTIONS] COMMAND [ARGS]...

  Cortical-stack memory files: what you are doing (CURRENT.md), the plan
  (PLAN.md) and lasting knowledge (MEMORY.md), kept as markdown in .cstack/.
  Exit codes: 0 ok, 2 bad arguments, 3 not found, 4 malformed file or
  dependency cycle, 5 conflict, 6 no workspace. Dates are today's UTC date, or
  the date of $MOSS_NOW (RFC 3339) when set.

Options:
  --version   Print the toolkit's version and exit.
  -h, --help  Show this message and exit.

Commands:
  init      Create .cstack/ with CURRENT.md, PLAN.md and MEMORY.md where
            missing; never overwrites a file.
  status    Show CURRENT.md: status, task, focus, next steps, blockers,
            progress, last modified.
  plan      List PLAN.md's tasks, numbered, grouped by section.
  ready     List pending tasks whose dependencies are all done; with TASK, set
            that task back to pending.
  blocked   List blocked tasks and why: the `blocked:` reason and any unmet
            dependencies.
  graph     Draw the `depends:` graph as a tree; a dependency cycle is an
            error (exit 4) naming the cycle.
  stale     List open tasks whose `modified:` date is more than --days days
            old (and those without one).
  memory    List MEMORY.md's entries by category.
  stats     Count tasks: {exists, open, ready, in_progress, blocked, closed,
            total}.
  add       Add a pending task to PLAN.md.
  start     Mark a task in progress `[>]` (a Backlog item moves to Tasks) and
            make it CURRENT.md's active task.
  done      Mark a task completed `[x]` with today's `closed:` date and move
            it to Completed.
  close     Close a task without finishing it `[~]`, with a reason, and move
            it to Closed.
  block     Mark a task blocked `[!]` with the reason.
  reopen    Reopen a completed or closed task: back to pending `[ ]` and into
            Tasks.
  remember  Add an entry to MEMORY.md under its category.
"""


if __name__ == "__main__":
    from pathlib import Path

    from cstack.cli import app
    from moss_files.cli.top_help import render, rewrite

    rewrite(Path(__file__), render(app, "cstack"))
