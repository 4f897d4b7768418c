"""Tasks and epics in `moss search`: rows with the board's fields as filters, full records on
expand, and a file that is not a valid task kept findable with a warning."""

from __future__ import annotations

from pathlib import Path

from moss_files.board import service as svc
from moss_files.index import service as search


def test_tasks_and_epics_are_found_filtered_and_expanded(repo: Path) -> None:
    board = svc.Context.for_root(repo)
    epic = svc.create_epic(board, title="Payments", description="Card payments through the gateway.")["epic"]["id"]
    task = svc.create_task(board, epicId=epic, title="Retry declined cards", description="Back off and retry a declined card.",
                           priority="high", definitionOfDone=["idempotency key reused"], status="WORKING")["task"]["id"]
    other = svc.create_task(board, epicId=epic, title="Refund flow", dependsOn=[task])["task"]["id"]
    svc.claim_next_task(svc.Context.for_root(repo, actor=svc.AGENT), statuses=["WORKING"], workerId="dev-1")
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
    board = svc.Context.for_root(repo)
    epic = svc.create_epic(board, title="E")["epic"]["id"]
    task = svc.create_task(board, epicId=epic, title="Quarantine flaky tests")["task"]["id"]
    path = repo / ".moss" / "board" / "tasks" / f"{task}.md"
    path.write_text(path.read_text().replace("status: BACKLOG", "status: SHIPPED"))
    ctx = search.Context(repo)
    assert search.scan(ctx, "quarantine")["matches"][0]["id"] == task
    problems = search.index_status(ctx)["problems"]
    assert any(p["path"] == f".moss/board/tasks/{task}.md" and p["code"] == "SCHEMA_ERROR" for p in problems)
