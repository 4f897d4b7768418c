"""Files the toolkit may not read, and things in a file's place that are not files.

Each case takes a workspace holding a file of every kind (tests/fixtures/formats/v1, the files
`moss upgrade` knows) and spoils one file: either the operating system denies reading it
(mode 000), or a FIFO (named pipe) stands at its name. A command of that kind must then answer
with a documented code naming the file: NOT_READABLE (exit 6, status 403) or NOT_REGULAR_FILE
(exit 4), or, for a listing, a problem entry with that code. Never INTERNAL, never a listing
that silently leaves the file out, and never a command that waits forever on a FIFO.

The tests run as root, and root reads a file of mode 000 (CAP_DAC_OVERRIDE). So a command is
run without those capabilities: `setpriv --bounding-set=-dac_override,-dac_read_search`
drops them from the bounding set, so the command (still uid 0, owner of the files) meets the
permission bits as any user does. The MCP server and the sidecar are run the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import BIN
from helpers import wait_for
from mcp import Client, StdioServerParameters
from migrate_support import copy_fixture, make_workspace

from needlecast.sidecar import read_runtime

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "formats" / "v1"
DROP_READ_RIGHTS = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
TIMEOUT = 60  # seconds: a command reading a FIFO would hang; this turns a hang into a failure

TASK = "TASK-20261127-p4v0s32j"
AGENT_SESSION = "01M8DEJYJBAHE859Q742G7PN42"

# (kind, the file spoiled, the command that reads it, "error" when the command fails with the
# file's code, "problem" when it answers with the file among its problems).
CASES = [
    ("capsule", ".moss/capsules/default/auth.md", ["moss", "fetch", "auth"], "error"),
    ("capsule (listing)", ".moss/capsules/default/auth.md", ["moss", "list"], "problem"),
    ("task", f".moss/board/tasks/{TASK}.md", ["moss", "task", "show", TASK], "error"),
    ("epic", ".moss/board/epics/EPIC-20261127-vrdnx3xe.md", ["moss", "epic", "show", "EPIC-20261127-vrdnx3xe"], "error"),
    ("worker", ".moss/board/workers/dev-1.md", ["moss", "worker", "show", "dev-1"], "error"),
    ("team", ".moss/board/teams/TEAM-20261127-6v89h36w.md", ["moss", "team", "join", "TEAM-20261127-6v89h36w", "dev-1"], "error"),
    ("proposal", ".moss/board/proposals/PROP-20261127-9q8fkgyk.md", ["moss", "board", "resolve", "PROP-20261127-9q8fkgyk", "approved"], "error"),
    ("project", ".moss/board/project.md", ["moss", "board", "status"], "problem"),
    ("insight", ".moss/insights/INS-20261127-sj4esh00.md", ["moss", "insight", "show", "INS-20261127-sj4esh00"], "error"),
    ("session", ".moss/sessions/SES-20261127-ztj6efvc.md", ["moss", "session", "show", "SES-20261127-ztj6efvc"], "error"),
    ("feedback", ".moss/feedback/FB-20261127-gbzx767e.md", ["moss", "feedback", "list"], "problem"),
    ("summary", ".moss/summary.md", ["moss", "session", "summary"], "error"),
    ("agent-session", f".moss/agent/sessions/{AGENT_SESSION}.md", ["moss", "agent", "sessions"], "error"),
    ("agent-events", f".moss/agent/sessions/{AGENT_SESSION}.jsonl", ["moss", "agent", "logs", "--session", AGENT_SESSION], "error"),
    ("agent-policy", ".moss/agent.toml", ["moss", "agent", "sessions"], "error"),
    ("config", ".moss/config.toml", ["moss", "list"], "error"),
    ("activity", ".moss/board/activity.jsonl", ["moss", "board", "log"], "error"),
    ("chat", ".moss/board/chat/general.jsonl", ["moss", "board", "chat", "read", "general"], "error"),
    ("comments", f".moss/board/comments/{TASK}.jsonl", ["moss", "task", "comments", TASK], "error"),
    ("search index", ".moss/capsules/default/auth.md", ["moss", "index", "status"], "problem"),
    ("upgrade", f".moss/board/tasks/{TASK}.md", ["moss", "upgrade", "--dry-run"], "problem"),
    ("current", ".cstack/CURRENT.md", ["cstack", "status"], "error"),
    ("plan", ".cstack/PLAN.md", ["cstack", "plan"], "error"),
    ("memory", ".cstack/MEMORY.md", ["cstack", "memory"], "error"),
    ("mailbox", ".needlecast/inbox.md", ["needlecast", "inbox"], "error"),
    ("mailbox (outbox)", ".needlecast/outbox.md", ["needlecast", "outbox"], "error"),
    ("message", ".needlecast/inbox/2026-11-27T02-50-35Z_bob_msg-01M8DEJVSVBG3JA03G4KQ6V7BP.md", ["needlecast", "inbox"], "error"),
    ("message (outbox)", ".needlecast/outbox/2026-11-27T02-50-36Z_msg-01M8DEJW6PZ84P1FJAM1FV2140.md", ["needlecast", "outbox"], "error"),
    (
        "dead-letter",
        ".needlecast/dead-letters/2026-11-27T02-50-34Z_msg-01M8DEJTHWGHR7Y8237E52A4Q9_unknown_recipient.md",
        ["needlecast", "dead-letters"],
        "error",
    ),
    ("read-log", ".needlecast/read.log", ["needlecast", "inbox"], "error"),
    ("sleeves", ".needlecast/sleeves.toml", ["needlecast", "sleeves"], "error"),
]
IDS = [case[0] for case in CASES]


def read_rights_can_be_denied() -> str | None:
    """Why a test cannot make a read fail with EACCES here (None when it can)."""
    if os.geteuid() != 0:
        return None  # mode 000 denies an ordinary user
    if shutil.which("setpriv") is None:
        return "running as root without setpriv (util-linux): root reads files of mode 000"
    probe = subprocess.run([*DROP_READ_RIGHTS, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"running as root and setpriv cannot drop CAP_DAC_OVERRIDE here: {probe.stderr.strip()}"
    return None


def as_reader(argv: list[str]) -> list[str]:
    """`argv` (a tool of ours and its arguments) run so that permission bits apply to it."""
    command = [str(BIN / argv[0]), *argv[1:]]
    return [*DROP_READ_RIGHTS, *command] if os.geteuid() == 0 else command


@pytest.fixture
def needs_permissions() -> None:
    reason = read_rights_can_be_denied()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A git repository holding a file of every kind."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    return root


def run(root: Path, argv: list[str], *, drop_rights: bool = False) -> subprocess.CompletedProcess[str]:
    command = as_reader(argv) if drop_rights else [str(BIN / argv[0]), *argv[1:]]
    return subprocess.run([*command, "--json"], cwd=root, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def unreadable(path: Path) -> None:
    path.chmod(0)


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def problems_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A listing's problem entries, flattened (needlecast nests them under `problem`)."""
    return [{**entry, **entry.get("problem", {})} for entry in body.get("problems", [])]


def assert_refused(done: subprocess.CompletedProcess[str], outcome: str, relpath: str, code: str, exit_code: int) -> None:
    if outcome == "error":
        assert done.returncode == exit_code, (done.returncode, done.stdout, done.stderr)
        error = json.loads(done.stderr)["error"]
        assert error["code"] == code, error
        assert error["path"].endswith(relpath), error
        if code == "NOT_READABLE":
            assert error["status"] == 403, error
    else:
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        found = {(entry["code"], entry["path"]) for entry in problems_of(json.loads(done.stdout))}
        assert any(found_code == code and path.endswith(relpath) for found_code, path in found), found


@pytest.mark.usefixtures("needs_permissions")
@pytest.mark.parametrize(("kind", "relpath", "argv", "outcome"), CASES, ids=IDS)
def test_a_file_this_user_may_not_read_is_named_with_not_readable(workspace: Path, kind: str, relpath: str, argv: list[str], outcome: str) -> None:
    path = workspace / relpath
    before = path.read_bytes()
    unreadable(path)
    done = run(workspace, argv, drop_rights=True)
    assert_refused(done, outcome, relpath, "NOT_READABLE", 6)
    path.chmod(0o644)
    assert path.read_bytes() == before


@pytest.mark.parametrize(("kind", "relpath", "argv", "outcome"), CASES, ids=IDS)
def test_a_fifo_in_a_files_place_is_refused_and_never_waited_on(workspace: Path, kind: str, relpath: str, argv: list[str], outcome: str) -> None:
    path = workspace / relpath
    fifo(path)
    done = run(workspace, argv)
    assert_refused(done, outcome, relpath, "NOT_REGULAR_FILE", 4)
    assert stat.S_ISFIFO(path.lstat().st_mode)  # left where it was


def test_a_fifo_in_place_of_the_board_cache_is_not_waited_on(workspace: Path) -> None:
    cache = workspace / ".moss/cache/board.json"  # derived: without it the board reads its files
    cache.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(cache)
    done = run(workspace, ["moss", "task", "list"])
    assert done.returncode == 0, done.stderr
    assert TASK in {task["id"] for task in json.loads(done.stdout)["tasks"]}


# --------------------------------------------------------------------------- folders


@pytest.mark.usefixtures("needs_permissions")
def test_a_folder_this_user_may_not_read_is_named_too(workspace: Path) -> None:
    capsules = workspace / ".moss/capsules/default"
    capsules.chmod(0)
    try:
        assert_refused(run(workspace, ["moss", "list"], drop_rights=True), "error", ".moss/capsules/default", "NOT_READABLE", 6)
    finally:
        capsules.chmod(0o755)
    tasks = workspace / ".moss/board/tasks"
    tasks.chmod(0o644)  # listed, but not looked into: no file in it can be opened
    try:
        assert_refused(run(workspace, ["moss", "task", "list"], drop_rights=True), "problem", ".moss/board/tasks", "NOT_READABLE", 6)
        assert_refused(run(workspace, ["moss", "index", "status"], drop_rights=True), "problem", ".moss/board/tasks", "NOT_READABLE", 6)
    finally:
        tasks.chmod(0o755)


# --------------------------------------------------------------------------- files a person names


@pytest.mark.parametrize("spoil", [fifo, unreadable], ids=["fifo", "unreadable"])
def test_an_import_file_or_bundle_that_cannot_be_read_is_refused(workspace: Path, spoil: Any) -> None:
    if spoil is unreadable and (reason := read_rights_can_be_denied()) is not None:
        pytest.skip(reason)
    exports = workspace / ".moss/exports"
    exports.mkdir()
    bundle, capsules = exports / "bundle.json", exports / "capsules.jsonl"
    assert run(workspace, ["moss", "insight", "export", "--path", str(bundle)]).returncode == 0
    assert run(workspace, ["moss", "export", "--path", str(capsules)]).returncode == 0
    code, exit_code = ("NOT_REGULAR_FILE", 4) if spoil is fifo else ("NOT_READABLE", 6)
    for path, argv in ((bundle, ["moss", "insight", "import", str(bundle)]), (capsules, ["moss", "import", "--path", str(capsules)])):
        spoil(path)
        assert_refused(run(workspace, argv, drop_rights=spoil is unreadable), "error", path.name, code, exit_code)


def test_an_export_over_a_fifo_is_refused_without_waiting(workspace: Path) -> None:
    exports = workspace / ".moss/exports"
    exports.mkdir()
    target = exports / "capsules.jsonl"
    os.mkfifo(target)
    done = run(workspace, ["moss", "export", "--path", str(target)])
    assert done.returncode == 5 and json.loads(done.stderr)["error"]["code"] == "ALREADY_EXISTS", done.stderr
    assert stat.S_ISFIFO(target.lstat().st_mode)


# --------------------------------------------------------------------------- migration sources


def tree(root: Path) -> dict[str, bytes | str]:
    """Every entry below `root` outside .git: a file's bytes, or what else stands there."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        if ".git" in path.relative_to(root).parts:
            continue
        mode = path.lstat().st_mode
        found[path.relative_to(root).as_posix()] = path.read_bytes() if stat.S_ISREG(mode) else stat.filemode(mode)
    return found


@pytest.fixture
def backlog_project(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "backlog-project")
    copy_fixture("backlog", root)
    return root


def backlog_loss(done: subprocess.CompletedProcess[str], relpath: str) -> str:
    """The reason the migration's report gives for the one item it could not bring from
    `relpath`: a published folder is never refused as a whole for one odd file (issue 25)."""
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    lost = [entry for entry in json.loads(done.stdout)["ledger"]["items"]["lost"] if entry["from"].startswith(relpath)]
    assert len(lost) == 1, lost
    return str(lost[0]["reason"])


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_a_fifo_among_backlog_tasks_is_reported_instead_of_hanging_the_migration(backlog_project: Path, dry_run: bool) -> None:
    pipe = backlog_project / "backlog/tasks/back-999 - Pipe.md"
    os.mkfifo(pipe)
    before = tree(backlog_project)
    done = run(backlog_project, ["moss", "migrate", "backlog", *(["--dry-run"] if dry_run else [])])  # a read that waits fails by TIMEOUT
    assert "NOT_REGULAR_FILE" in backlog_loss(done, "backlog/tasks/back-999 - Pipe.md")
    assert stat.S_ISFIFO(pipe.lstat().st_mode)  # left where it was, never opened for reading
    if dry_run:
        assert tree(backlog_project) == before  # nothing written
    else:
        assert list((backlog_project / ".moss/board/tasks").glob("*.md"))  # the rest came over
    strict = run(backlog_project, ["moss", "migrate", "backlog", "--dry-run", "--strict"])
    assert strict.returncode == 4 and json.loads(strict.stderr)["error"]["code"] == "MIGRATION_WOULD_DROP"


@pytest.mark.usefixtures("needs_permissions")
def test_an_unreadable_backlog_task_is_reported_with_its_name_and_code(backlog_project: Path) -> None:
    task = next((backlog_project / "backlog/tasks").glob("back-1*.md"))
    task.chmod(0)
    done = run(backlog_project, ["moss", "migrate", "backlog", "--dry-run"], drop_rights=True)
    assert "NOT_READABLE" in backlog_loss(done, f"backlog/tasks/{task.name}")


@pytest.mark.parametrize(
    ("source", "argv"),
    [(".beads/issues.jsonl", ["moss", "migrate", "beads"]), ("moss-export.jsonl", ["moss", "migrate", "moss", "--jsonl", "moss-export.jsonl"])],
    ids=["beads", "moss-jsonl"],
)
def test_a_fifo_as_a_json_lines_source_is_refused(tmp_path: Path, source: str, argv: list[str]) -> None:
    root = make_workspace(tmp_path / "project")
    (root / source).parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(root / source)
    assert_refused(run(root, argv), "error", source, "NOT_REGULAR_FILE", 4)


# --------------------------------------------------------------------------- MCP and HTTP


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
@pytest.mark.usefixtures("needs_permissions")
def test_mcp_answers_an_unreadable_file_with_an_error_result(workspace: Path) -> None:
    (workspace / ".moss/capsules/default/auth.md").chmod(0)
    command = as_reader(["moss", "serve"])
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(workspace), env={**os.environ})

    async def fetch() -> Any:
        async with Client(params) as client:
            return await client.call_tool("moss.fetch", {"name": "auth"})

    result = anyio.run(fetch)
    assert result.is_error
    error = result.structured_content["error"]
    assert (error["code"], error["status"]) == ("NOT_READABLE", 403) and error["path"].endswith(".moss/capsules/default/auth.md")


@pytest.fixture
def sidecar_without_read_rights(workspace: Path) -> Iterator[str]:
    """A sidecar of the workspace, run without the right to read unreadable files; its URL."""
    (workspace / ".needlecast" / "sleeves.toml").unlink()  # no other sleeves: nothing to route to
    log = workspace.parent / "sidecar.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen([*as_reader(["needlecast", "sidecar", "--root", str(workspace), "--port", "0"])], stdout=subprocess.DEVNULL, stderr=stderr)

    def ready() -> dict[str, Any] | None:
        if process.poll() is not None:
            raise AssertionError(f"sidecar exited with {process.returncode}: {log.read_text()}")
        runtime = read_runtime(workspace)
        return runtime if runtime is not None and runtime.get("pid") == process.pid else None

    try:
        yield wait_for(ready, timeout=20, message="sidecar ready")["url"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)


@pytest.mark.slow
@pytest.mark.usefixtures("needs_permissions")
def test_the_sidecar_answers_an_unreadable_inbox_with_403(workspace: Path, sidecar_without_read_rights: str) -> None:
    import urllib.error
    import urllib.request

    (workspace / ".needlecast/inbox.md").chmod(0)
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(sidecar_without_read_rights + "/inbox", timeout=10)
    with caught.value as answer:
        body = json.loads(answer.read())
    assert answer.code == 403 and body["error"]["code"] == "NOT_READABLE", body
