"""`moss projects list|add|remove`: the registry of the projects this user works on, so that
`--project NAME` (on every command that takes `--root`) finds one from anywhere.

Entry layer: reads the home folder and the clock, calls `foundation.projects` and renders.
Exit codes: 0 done; 2 bad name; 3 no such project (PROJECT_NOT_FOUND); 4 the registry file
cannot be read (it is left as it is); 5 the name is taken (ALREADY_EXISTS) or the registry is
locked; 6 no workspace around the current directory (add without PATH).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.cli.support import JsonOpt, emit, new_app, note, reporting


def register(app: typer.Typer) -> None:
    """Add the `projects` group to the `moss` app."""
    projects_app = new_app(
        "The projects you work on, by name (~/.moss/projects.json; Moe's ~/.moe/projects.json is read too): "
        "`--project NAME` then works from anywhere, on every command that takes --root."
    )
    app.add_typer(projects_app, name="projects")

    @projects_app.command("list")
    def list_cmd(as_json: JsonOpt = False) -> None:
        """The registered projects, ours then Moe's, most recently opened first, with whether each folder is
        there. JSON: {projects: [{name, path, lastOpenedAt, source, exists}], count, registry, problems}."""
        from moss_files.foundation import projects

        with reporting(as_json):
            home = Path.home()
            registry = projects.read_registry(home)
        rows = [_project_dict(project) for project in registry.projects]
        for problem in registry.problems if not as_json else ():
            note(f"warning[{problem['code']}] {problem['path']}: {problem['message']}")
        result = {"projects": rows, "count": len(rows), "registry": str(projects.registry_path(home)), "problems": list(registry.problems)}
        width = max((len(row["name"]) for row in rows), default=0)
        lines = [f"{row['name']:<{width}}  {row['path']}{'' if row['exists'] else '  (missing)'}{'  [moe]' if row['source'] == 'moe' else ''}" for row in rows]
        emit(result, as_json, text="\n".join(lines) if lines else "no projects registered (moss projects add)")

    @projects_app.command("add")
    def add_cmd(
        path: Annotated[
            Path | None,
            typer.Argument(metavar="[PATH]", help="The project's folder (default: the workspace around the current directory).", show_default=False),
        ] = None,
        name: Annotated[str | None, typer.Option("--name", "-n", help="Its name (default: the folder's name).", show_default=False)] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Register a project (or rename it and mark it opened now, when its folder is registered already).
        JSON: {project, created}."""
        with reporting(as_json):
            result = _add(path, name)
        project = result["project"]
        emit(result, as_json, text=f"{'added' if result['created'] else 'updated'} {project['name']}: {project['path']}")

    @projects_app.command("remove")
    def remove_cmd(
        project: Annotated[str, typer.Argument(metavar="NAME|PATH", help="The project's name, or its folder.", show_default=False)],
        as_json: JsonOpt = False,
    ) -> None:
        """Unregister a project (its folder is not touched). Moe's registry is never changed. JSON: {removed}."""
        with reporting(as_json):
            result = _remove(project)
        emit(result, as_json, text="\n".join(f"removed {entry['name']}: {entry['path']}" for entry in result["removed"]))


def _project_dict(project: Any) -> dict[str, Any]:
    return {
        "name": project.name,
        "path": project.path,
        "lastOpenedAt": project.last_opened or None,
        "source": project.source,
        "exists": Path(project.path).expanduser().is_dir(),
    }


def _add(path: Path | None, name: str | None) -> dict[str, Any]:
    from moss_files.foundation import projects, workspace
    from moss_files.foundation.errors import InvalidRequest
    from moss_files.foundation.ids import format_time, system_clock

    if path is None:
        folder = workspace.find_workspace()
    else:
        folder = path.expanduser()
        if not folder.is_dir():
            raise InvalidRequest(f"{path} is not a folder", path=path)
        folder = folder.resolve()
    chosen = projects.check_name(name if name is not None else folder.name)
    stamp = format_time(system_clock())
    outcome: dict[str, Any] = {}

    def edit(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        new, created = projects.with_project(entries, chosen, str(folder), stamp)
        outcome["created"] = created
        return new

    projects.change(Path.home(), edit)
    project = projects.Project(chosen, str(folder), stamp, "moss")
    return {"project": _project_dict(project), "created": outcome["created"]}


def _remove(key: str) -> dict[str, Any]:
    from moss_files.foundation import projects
    from moss_files.foundation.errors import NotFound

    home = Path.home()
    folder = Path(key).expanduser()
    path = str(folder.resolve()) if not projects.is_name(key) or folder.is_dir() else None
    removed: list[dict[str, Any]] = []

    def edit(entries: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        kept, gone = projects.without_project(entries, key, path)
        removed[:] = gone
        return kept if gone else None

    projects.change(home, edit)
    if not removed:
        registry = projects.read_registry(home)
        in_moe = [p for p in registry.projects if p.source == "moe" and (p.name == key or p.path == path)]
        raise NotFound(
            f"no project {key!r} in {projects.registry_path(home)}",
            code="PROJECT_NOT_FOUND",
            details={"name": key, "known": sorted({p.name for p in registry.projects if p.source == "moss"})},
            hint=f"it is in Moe's registry ({projects.moe_registry_path(home)}), which moss never changes" if in_moe else "`moss projects list` shows them",
        )
    return {"removed": [_project_dict(projects.project_of(entry, "moss")) for entry in removed]}
