"""Tasks and epics in `moss search`: rows with the board's fields as filters, full records on
expand, and a file that is not a valid task kept findable with a warning."""

from __future__ import annotations

from pathlib import Path

from moss_files.board import claims, editing
from moss_files.foundation.context import AGENT, Context
from moss_files.index import service as search


def test_tasks_and_epics_are_found_filtered_and_expanded(repo: Path) -> None:
    board = Context(repo)
    epic = editing.create_epic(board, title="Payments", description="Card payments through the gateway.")["epic"]["id"]
    task = editing.create_task(
        board,
        epic_id=epic,
        title="Retry declined cards",
        description="Back off and retry a declined card.",
        priority="high",
        definition_of_done=["idempotency key reused"],
        status="WORKING",
    )["task"]["id"]
    other = editing.create_task(board, epic_id=epic, title="Refund flow", depends_on=[task])["task"]["id"]
    claims.claim_next_task(Context(repo, actor=AGENT), statuses=["WORKING"], worker_id="dev-1")
    ctx = search.Context(repo)

    hits = search.scan(ctx, "declined card")["matches"]
    assert hits[0]["id"] == task and hits[0]["kind"] == "task"
    assert [m["id"] for m in search.scan(ctx, "payments kind:epic")["matches"]] == [epic]
    assert [m["id"] for m in search.scan(ctx, "idempotency")["matches"]] == [task]  # definition of done is searched
    assert [m["id"] for m in search.scan(ctx, "kind:task priority:high")["matches"]] == [task]
    assert [m["id"] for m in search.scan(ctx, "kind:task agent:dev-1")["matches"]] == [task]
    assert {m["id"] for m in search.scan(ctx, f"kind:task link:{epic}")["matches"]} == {task, other}
    assert [m["id"] for m in search.scan(ctx, f"link:{task}")["matches"]] == [other]

    expanded = search.expand(ctx, [task, epic])["items"]
    records = {item["id"]: item["record"] for item in expanded}
    assert records[task]["status"] == "WORKING" and records[task]["assignedWorkerId"] == "dev-1"
    assert records[epic]["description"] == "Card payments through the gateway."


def test_a_broken_task_file_stays_findable_with_a_warning(repo: Path) -> None:
    board = Context(repo)
    epic = editing.create_epic(board, title="E")["epic"]["id"]
    task = editing.create_task(board, epic_id=epic, title="Quarantine flaky tests")["task"]["id"]
    path = repo / ".moss" / "board" / "tasks" / f"{task}.md"
    path.write_text(path.read_text().replace("status: BACKLOG", "status: SHIPPED"))
    ctx = search.Context(repo)
    assert search.scan(ctx, "quarantine")["matches"][0]["id"] == task
    problems = search.index_status(ctx)["problems"]
    assert any(p["path"] == f".moss/board/tasks/{task}.md" and p["code"] == "SCHEMA_ERROR" for p in problems)
