"""Verification evidence: what a worker reports with complete_step and complete_task (commands
run, files touched, test results, how each definition-of-done item was shown), and the check
of that evidence against the task's definition of done.

Core layer (pure). The argument (camelCase, as tools and `--verification` JSON give it):

    {command?, exitCode?, outputTail?,                  Moe's one command
     commands?: [{command, exitCode, outputTail?}],
     filesTouched?: [path], tests?: {command?, passed, failed, skipped?},
     dod?: [{item: text or 1-based number, evidence}]}

is stored in the task file (snake_case, under the step or the task's `verification:` key) with
the time it was reported. A task completes only when no reported command failed, no test failed,
every definition-of-done item is covered by some step's or the task's `dod` entries, and, when
the task names a test file, some reported command or test run names it. Without any evidence
the task completes as before, unless the project's `require_verification` is set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from moss_files.board.model import Task
from moss_files.board.rules import check_project_path
from moss_files.foundation.errors import Conflict, InvalidRequest

MAX_OUTPUT_TAIL = 2000
MAX_COMMANDS = 50
MAX_DOD_ENTRIES = 100


def _refuse(message: str) -> InvalidRequest:
    return InvalidRequest(f"verification: {message}", details={"field": "verification"})


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _refuse(f"{name} must be a whole number of at least 0")
    return value


def _command(item: Any) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise _refuse("each command must be an object {command, exitCode, outputTail?}")
    command = item.get("command")
    if not isinstance(command, str) or not command.strip():
        raise _refuse("a command needs its command line")
    code = item.get("exitCode", item.get("exit_code"))
    if isinstance(code, bool) or not isinstance(code, int):
        raise _refuse(f"command {command.strip()!r} needs its exitCode (a whole number)")
    found: dict[str, Any] = {"command": command.strip(), "exit_code": code}
    tail = item.get("outputTail", item.get("output_tail"))
    if tail is not None:
        if not isinstance(tail, str):
            raise _refuse("outputTail must be text")
        if tail.strip():
            found["output_tail"] = tail[-MAX_OUTPUT_TAIL:]
    return found


def read_verification(raw: Any, now: str) -> dict[str, Any] | None:
    """The evidence to store from a tool's `verification` argument (None when it holds none).

    Raises InvalidRequest naming what is malformed; nothing is checked against the task here.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _refuse("must be an object")
    known = {"command", "exitCode", "exit_code", "outputTail", "output_tail", "commands", "filesTouched", "files_touched", "tests", "dod"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise _refuse(f"unknown field(s) {', '.join(unknown)}")
    commands = []
    if raw.get("command") is not None:
        commands.append(_command(raw))
    listed = raw.get("commands") or []
    if not isinstance(listed, list) or len(listed) > MAX_COMMANDS:
        raise _refuse(f"commands must be a list of at most {MAX_COMMANDS}")
    commands.extend(_command(item) for item in listed)
    files = raw.get("filesTouched", raw.get("files_touched")) or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise _refuse("filesTouched must be a list of paths")
    evidence: dict[str, Any] = {}
    if commands:
        evidence["commands"] = commands
    if files:
        evidence["files_touched"] = list(dict.fromkeys(check_project_path(f) for f in files))
    tests = raw.get("tests")
    if tests is not None:
        if not isinstance(tests, Mapping):
            raise _refuse("tests must be an object {command?, passed, failed, skipped?}")
        run: dict[str, Any] = {"passed": _count(tests.get("passed", 0), "tests.passed"), "failed": _count(tests.get("failed", 0), "tests.failed")}
        if tests.get("skipped") is not None:
            run["skipped"] = _count(tests["skipped"], "tests.skipped")
        if tests.get("command") is not None:
            if not isinstance(tests["command"], str):
                raise _refuse("tests.command must be text")
            run["command"] = tests["command"].strip()
        evidence["tests"] = run
    dod = raw.get("dod") or []
    if not isinstance(dod, list) or len(dod) > MAX_DOD_ENTRIES:
        raise _refuse(f"dod must be a list of at most {MAX_DOD_ENTRIES} {{item, evidence}}")
    entries = []
    for entry in dod:
        if not isinstance(entry, Mapping) or "item" not in entry:
            raise _refuse("each dod entry must be an object {item, evidence}")
        item = entry["item"]
        if isinstance(item, bool) or not isinstance(item, str | int) or (isinstance(item, str) and not item.strip()):
            raise _refuse("a dod entry's item is the item's text or its 1-based number")
        shown = entry.get("evidence")
        if not isinstance(shown, str) or not shown.strip():
            raise _refuse(f"dod item {item!r} needs its evidence (what shows it is done)")
        entries.append({"item": item.strip() if isinstance(item, str) else item, "evidence": shown.strip()})
    if entries:
        evidence["dod"] = entries
    if not evidence:
        return None
    evidence["reported"] = now
    return evidence


def verification_to_dict(evidence: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Stored evidence in the tools' camelCase."""
    if not evidence:
        return None
    data: dict[str, Any] = {}
    if evidence.get("commands"):
        data["commands"] = [
            {"command": c.get("command"), "exitCode": c.get("exit_code"), **({"outputTail": c["output_tail"]} if c.get("output_tail") else {})}
            for c in evidence["commands"]
        ]
    if evidence.get("files_touched"):
        data["filesTouched"] = list(evidence["files_touched"])
    if evidence.get("tests"):
        data["tests"] = dict(evidence["tests"])
    if evidence.get("dod"):
        data["dod"] = [dict(entry) for entry in evidence["dod"]]
    data["reportedAt"] = evidence.get("reported")
    return data


def failures(evidence: Mapping[str, Any] | None) -> list[str]:
    """What the evidence itself says went wrong: failed commands and failed tests."""
    if not evidence:
        return []
    found = [f"{c.get('command')!r} exited {c.get('exit_code')}" for c in evidence.get("commands", ()) if c.get("exit_code") != 0]
    tests = evidence.get("tests") or {}
    if tests.get("failed"):
        found.append(f"{tests['failed']} test(s) failed")
    return found


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def dod_missing(task: Task, evidences: Iterable[Mapping[str, Any] | None]) -> list[str]:
    """The task's definition-of-done items no `dod` entry covers (by its text, any case and
    spacing, or its 1-based number)."""
    covered_text: set[str] = set()
    covered_index: set[int] = set()
    for evidence in evidences:
        for entry in (evidence or {}).get("dod", ()):
            item = entry.get("item")
            if isinstance(item, int) and not isinstance(item, bool):
                covered_index.add(item)
            elif isinstance(item, str):
                text = item.strip().lstrip("#")
                if text.isdigit():
                    covered_index.add(int(text))
                covered_text.add(_norm(item))
    return [item for number, item in enumerate(task.definition_of_done, start=1) if number not in covered_index and _norm(item) not in covered_text]


def _mentions_test_file(task: Task, evidences: Iterable[Mapping[str, Any] | None]) -> bool:
    name = (task.test_file or "").strip()
    for evidence in evidences:
        evidence = evidence or {}
        lines = [c.get("command", "") for c in evidence.get("commands", ())] + [(evidence.get("tests") or {}).get("command") or ""]
        if any(name in line for line in lines):
            return True
    return False


def completion_problems(task: Task, evidence: Mapping[str, Any] | None, *, required: bool) -> dict[str, Any]:
    """Why `task` may not complete with `evidence` (plus what its steps reported): an empty
    dict when it may. Keys: `failures`, `missingDod`, `testFileNotRun`, `missing`."""
    reported = [step.verification for step in task.plan if step.verification] + ([evidence] if evidence else [])
    problems: dict[str, Any] = {}
    if not reported:
        if required:
            problems["missing"] = "this project requires verification evidence: the commands run, their exit codes and the tests' results"
        return problems
    failed = failures(evidence)
    if failed:
        problems["failures"] = failed
    missing = dod_missing(task, reported)
    if missing:
        problems["missingDod"] = missing
    if task.test_file and not _mentions_test_file(task, reported):
        problems["testFileNotRun"] = task.test_file
    return problems


def verification_error(task_id: str, problems: Mapping[str, Any], *, step_id: str | None = None) -> Conflict:
    """The VERIFICATION_FAILED error for `problems` (listed in details)."""
    parts = []
    if problems.get("missing"):
        parts.append(str(problems["missing"]))
    if problems.get("failures"):
        parts.append("failed: " + "; ".join(problems["failures"]))
    if problems.get("missingDod"):
        parts.append("definition of done not shown: " + "; ".join(problems["missingDod"]))
    if problems.get("testFileNotRun"):
        parts.append(f"the task's test file {problems['testFileNotRun']} was not run")
    where = f"step {step_id} of {task_id}" if step_id else task_id
    return Conflict(
        f"{where} cannot be completed: " + " | ".join(parts),
        code="VERIFICATION_FAILED",
        status=422,
        details={"taskId": task_id, "stepId": step_id, **problems},
        hint="report what you ran: verification {commands [{command, exitCode}], tests {passed, failed}, dod [{item, evidence}]}",
    )
