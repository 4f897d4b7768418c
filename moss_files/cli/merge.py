"""`moss merge driver|setup|check`: git as the transport between clones.

Entry layer. `driver` is what git runs (`merge.moss.driver`), `setup` defines it in this
clone, `check` lists the toolkit's files that still hold conflict markers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from moss_files import scaffold
from moss_files.cli.support import JsonOpt, RootOpt, emit, new_app, note, reporting
from moss_files.foundation import gitsettings, workspace
from moss_files.foundation.conflicted import find_conflicted
from moss_files.foundation.errors import RepoError
from moss_files.merge import driver


def register(app: typer.Typer) -> None:
    """Add the `merge` group to the `moss` app."""
    merge_app = new_app("Merge the toolkit's files between clones: the git merge driver, its setup, and a check for leftover conflicts.")
    app.add_typer(merge_app, name="merge")

    @merge_app.command("driver")
    def driver_cmd(
        base: Annotated[Path, typer.Argument(metavar="BASE", help="The ancestor's version (git's %O).")],
        ours: Annotated[Path, typer.Argument(metavar="OURS", help="Our version, which receives the result (git's %A).")],
        theirs: Annotated[Path, typer.Argument(metavar="THEIRS", help="Their version (git's %B).")],
        path: Annotated[str, typer.Argument(metavar="PATH", help="The file's path in the repository (git's %P).")],
        as_json: JsonOpt = False,
    ) -> None:
        """Merge one file three ways by its kind (git runs this; see `moss merge setup`).
        Exit 0: merged cleanly into OURS; 1: OURS holds conflict markers for a person to resolve."""
        with reporting(as_json):
            report = driver.run(base, ours, theirs, path)
        if report.fallback:
            note(f"moss merge: {path}: merged as plain text ({report.fallback})")
        if report.conflicts:
            note(f"moss merge: {path}: {report.conflicts} conflict(s) left for you to resolve")
        emit(driver.report_to_dict(report), as_json, text="")
        if report.conflicts:
            raise typer.Exit(1)

    @merge_app.command("setup")
    def setup_cmd(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Define the merge driver in this clone's git config (git never copies it between clones:
        run this once per clone; `moss init`, `cstack init` and install.sh do it for you)."""
        with reporting(as_json):
            top = workspace.find_workspace(explicit=root)
            planned = scaffold.plan_merge_driver(top)
            if planned is None:
                raise RepoError(
                    f"{top} is not inside a git work tree",
                    code="REPO_ERROR",
                    path=top,
                    hint="the merge driver is a git setting: run `git init` (or clone the project) first",
                )
            done = scaffold.apply_scaffold(top, [planned])[0]
        settings = dict(scaffold.merge_driver_settings())
        text = "\n".join(f"{key} = {value}" for key, value in settings.items())
        emit({"ok": True, "changed": done.kind == "config", "settings": settings}, as_json, text=text)

    @merge_app.command("check")
    def check_cmd(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """List the toolkit's files that hold git conflict markers (exit 4 when there is one)."""
        with reporting(as_json):
            top = workspace.find_workspace(explicit=root)
            found = find_conflicted(top)
            missing = gitsettings.missing_merge_driver(top)
        rows = [{"path": str(path.relative_to(top)), "line": line} for path, line in found]
        text = "\n".join(f"{row['path']}:{row['line']}: conflict markers" for row in rows) or "no conflict markers in the toolkit's files"
        if missing:
            text += "\n" + gitsettings.WARNING
        emit({"ok": not rows, "conflicted": rows, "driver_configured": not missing}, as_json, text=text)
        if rows:
            raise typer.Exit(4)
