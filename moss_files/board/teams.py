"""Board use cases of workers and teams: registering and listing workers, and the teams whose
members may share an epic's column.

Shell layer: each function takes a Context and typed keyword arguments and returns the JSON
result the `moe.*` tool returns and `moss worker|team … --json` prints.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from moss_files.board import shapes
from moss_files.board.model import ROLES, Board, Team, check_choice, check_name
from moss_files.board.usecase import board_store, ensure_worker, find_team, find_worker, log, with_problems
from moss_files.foundation import arguments
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict

MAX_TEAM_SIZE = 10_000

# --------------------------------------------------------------------------- workers


def register_worker(ctx: Context, *, worker_id: str, role: str | None = None) -> dict[str, Any]:
    """Register a worker (idempotent): its file under workers/, with its role as its `type`."""
    worker_id = check_name(worker_id, "workerId")
    kind = check_choice(role, ROLES, "type", upper=False) if role is not None else None
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        created = worker_id not in board.workers
        worker = ensure_worker(ctx, board, worker_id, kind)
        board = store.load()
    return {"worker": shapes.worker_to_dict(board, board.workers.get(worker_id, worker)), "created": created}


def list_workers(ctx: Context) -> dict[str, Any]:
    """Every registered worker with its derived status and current task."""
    board = board_store(ctx).outline(())  # the workers, and the tasks they hold: not every task
    rows = [shapes.worker_to_dict(board, worker) for worker in sorted(board.workers.values(), key=lambda w: w.id)]
    return with_problems({"workers": rows, "count": len(rows)}, board.problems)


def show_worker(ctx: Context, *, worker_id: str) -> dict[str, Any]:
    """One worker. Raises NotFound `Worker not found: <id>`."""
    worker_id = check_name(worker_id, "workerId")
    board = board_store(ctx).outline(())
    return shapes.worker_to_dict(board, find_worker(board, worker_id))


# --------------------------------------------------------------------------- teams


def _find_team(board: Board, team_id: str) -> Team:
    return find_team(board, team_id)


def _team_full(team: Team) -> Conflict:
    return Conflict(f"Team is full (max {team.max_size} members)", code="TEAM_FULL", details={"teamId": team.id, "maxSize": team.max_size})


def create_team(ctx: Context, *, name: str, role: str, max_size: int | None = None) -> dict[str, Any]:
    """Moe's create_team: a new team, or the existing one with the same name and role."""
    team_name = " ".join(arguments.required(name, "name").split())
    team_role = check_choice(role, ROLES, "role", upper=False)
    size = arguments.count(max_size, "maxSize", default=0, maximum=MAX_TEAM_SIZE) or None
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        for team in sorted(board.teams.values(), key=lambda t: (t.created or "", t.id)):
            if team.name.casefold() == team_name.casefold() and team.role == team_role:
                return {"team": shapes.team_to_dict(team), "created": False}
        now = ctx.stamp()
        team = Team(id=ctx.new_id("TEAM"), name=team_name, role=team_role, max_size=size or board.project.settings.max_team_size, created=now, updated=now)
        store.create("team", team)
        log(ctx, board.project, "TEAM_CREATED", teamId=team.id, name=team_name, role=team_role)
    return {"team": shapes.team_to_dict(team), "created": True}


def join_team(ctx: Context, *, team_id: str, worker_id: str) -> dict[str, Any]:
    """Moe's join_team: add a worker (registered on the way if new). Joining twice is a no-op.
    Raises NotFound `Team not found`, Conflict TEAM_FULL `Team is full (max N members)`."""
    team_id = arguments.required(team_id, "teamId")
    worker_id = check_name(worker_id, "workerId")
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        team = _find_team(board, team_id)
        if worker_id not in team.members:
            if len(team.members) >= team.max_size:
                raise _team_full(team)
            ensure_worker(ctx, board, worker_id, team.role)
            now = ctx.stamp()

            def add(current: Team) -> Team:
                if worker_id in current.members:
                    return current
                if len(current.members) >= current.max_size:
                    raise _team_full(current)
                return replace(current, members=(*current.members, worker_id), updated=now)

            team = store.update("team", team_id, add)
            log(ctx, board.project, "TEAM_JOINED", worker=worker_id, teamId=team_id)
    return {"team": shapes.team_to_dict(team)}


def leave_team(ctx: Context, *, team_id: str, worker_id: str) -> dict[str, Any]:
    """Moe's leave_team: remove a worker from a team (a no-op when it is not a member)."""
    team_id = arguments.required(team_id, "teamId")
    worker_id = check_name(worker_id, "workerId")
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        team = _find_team(board, team_id)
        if worker_id in team.members:
            now = ctx.stamp()
            team = store.update("team", team_id, lambda t: replace(t, members=tuple(m for m in t.members if m != worker_id), updated=now))
            log(ctx, board.project, "TEAM_LEFT", worker=worker_id, teamId=team_id)
    return {"team": shapes.team_to_dict(team)}


def list_teams(ctx: Context, *, role: str | None = None) -> dict[str, Any]:
    """Moe's list_teams: every team (of one role), each with its members' type and status."""
    wanted = check_choice(role, ROLES, "role", upper=False) if role is not None else None
    board = board_store(ctx).load()
    teams = [t for t in sorted(board.teams.values(), key=lambda t: (t.name.casefold(), t.id)) if wanted is None or t.role == wanted]
    return with_problems({"teams": [shapes.team_with_members(board, t) for t in teams]}, board.problems)
