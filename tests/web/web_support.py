"""Helpers for the web view's tests: a full workspace (every kind of artifact, with hostile
content in each), a real `moss serve --http` daemon, raw HTTP with any headers, and the
headless browser (Chromium from the system packages, driven by Playwright)."""

from __future__ import annotations

import functools
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from conftest import BIN
from helpers import wait_for

from moss_files import scaffold
from moss_files.board import claims, editing, plans
from moss_files.capsules import service as capsules
from moss_files.foundation.context import Context
from moss_files.mcp import daemon as mcp_daemon

# Hostile content: markup that must show as text, links that must not become links, a line far
# longer than any screen.
SCRIPT = '<script>alert("owned")</script>'
IMG = "<img src=x onerror=alert(1)>"
JS_LINK = "[click me](javascript:alert(1))"
HUGE_LINE = "W" * 120_000
HOSTILE = f'Hostile {SCRIPT} and {IMG} and {JS_LINK} and <a href="javascript:alert(2)">raw</a>\n\n{HUGE_LINE}\n'

CAPSULE = """## Objective
Ship the login flow.

## Current status
Endpoints done; UI pending.

## Decisions
- Sessions in cookies.

## Next actions
- Build the form.

## Key locations
- src/auth/

## Open questions
- (none)
"""


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout


def make_workspace(root: Path) -> Path:
    """A git project with .cstack/, .needlecast/ and .moss/ as `moss init` makes them."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / ".git").exists():
        subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
    return root


@dataclass
class Full:
    """What `fill_workspace` made: ids by role."""

    root: Path
    epic: str = ""
    tasks: dict[str, str] = field(default_factory=dict)
    capsule: str = ""
    hostile_capsule: str = ""
    session: str = ""


def board_task(ctx: Context, epic: str, title: str, *, to: str, description: str | None = None) -> str:
    """A task moved through the workflow to `to` (BACKLOG … DONE; `DONE` after one QA rejection,
    so its reopen count is 1) by the workers arch, dev and qa. Returns its id. Each claim takes
    the next task of its column: move the furthest first."""
    status = "planning" if to != "BACKLOG" else None
    task_id = editing.create_task(ctx, epic_id=epic, title=title, description=description, definition_of_done=["tests pass"], status=status, priority="high")[
        "task"
    ]["id"]
    if to in ("BACKLOG", "PLANNING"):
        return task_id
    architect, worker, qa = "arch", "dev", "qa"
    claims.claim_next_task(ctx, statuses=["PLANNING"], worker_id=architect)
    plans.submit_plan(ctx, task_id=task_id, steps=["Write the code", "Write a test"], worker_id=architect)
    if to == "AWAITING_APPROVAL":
        return task_id
    plans.approve_plan(ctx, task_id=task_id)
    claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=worker)
    if to == "WORKING":
        return task_id
    for step in ("step-1", "step-2"):
        plans.complete_step(ctx, task_id=task_id, step_id=step, worker_id=worker)
    plans.complete_task(ctx, task_id=task_id, summary="done", worker_id=worker)
    if to == "REVIEW":
        return task_id
    claims.claim_next_task(ctx, statuses=["REVIEW"], worker_id=qa)
    plans.get_context(ctx, task_id=task_id, worker_id=qa)  # the QA verdicts need it
    claims.qa_reject(ctx, task_id=task_id, reason="tests pass: not yet", worker_id=qa)
    claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=worker)
    plans.complete_task(ctx, task_id=task_id, summary="fixed", worker_id=worker)
    claims.claim_next_task(ctx, statuses=["REVIEW"], worker_id=qa)
    plans.get_context(ctx, task_id=task_id, worker_id=qa)
    claims.qa_approve(ctx, task_id=task_id, summary="good", worker_id=qa)
    return task_id


def fill_workspace(root: Path, *, agent: bool = True) -> Full:
    """Every kind of artifact, each with hostile content somewhere: board tasks in every
    column, capsules with two committed versions, messages in the inbox, the outbox and the
    dead letters, memory files, an insight, and (with `agent`) an agent session."""
    import cstack
    import needlecast
    from moss_files.loopflow import service as loopflow

    make_workspace(root)
    ctx = Context(root)
    full = Full(root)
    editing.init_board(ctx, name="shop")
    full.epic = editing.create_epic(ctx, title=f"Checkout {SCRIPT}", description=HOSTILE, epic_rails=["no secrets in logs"], status="ACTIVE")["epic"]["id"]
    for status in ("DONE", "REVIEW", "WORKING", "AWAITING_APPROVAL", "PLANNING", "BACKLOG"):
        title = f"{status.title()} task {SCRIPT}" if status == "REVIEW" else f"{status.title()} task"
        full.tasks[status] = board_task(ctx, full.epic, title, to=status, description=HOSTILE)
    full.capsule = capsules.store(ctx, capsule_text=CAPSULE, name="login handoff", workspace="web", tags=["auth"])["id"]
    # Capsules are bounded (12,000 characters by default): its huge line is a shorter one.
    full.hostile_capsule = capsules.store(ctx, capsule_text=HOSTILE.replace(HUGE_LINE, "W" * 11_000), name=f"evil {SCRIPT}", workspace="evil", allow_thin=True)[
        "id"
    ]
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first versions")
    capsules.update(ctx, id=full.capsule, capsule_text=CAPSULE.replace("UI pending.", "UI done; review pending."))
    git(root, "commit", "-q", "-am", "login handoff: UI done")
    sleeve = Context(root, sleeve="alice")
    needlecast.send(sleeve, body=f"Hello **bob**. {HOSTILE}", to=["bob"], thread="greeting")
    cstack.add_task(ctx, task=f"Write the parser P1 #core {SCRIPT}", ident="parser")
    cstack.add_task(ctx, task="Ship it", ident="ship", depends=["parser"])
    cstack.remember(ctx, text=f"Use SQLite for the cache {IMG}", category="decisions")
    loopflow.remember(ctx, f"Insight about parsing {SCRIPT} {JS_LINK}", type="process", tags=["parser"])
    inbox = root / ".needlecast" / "inbox.md"
    inbox.write_text(
        inbox.read_text() + f"\n---\nid: m-hostile\nfrom: mallory\nto: [alice]\nthread: t1\ntype: note\ntime: 2026-01-21T10:00:00Z\n---\n{HOSTILE}\n"
    )
    # A message to nobody: routing leaves it as a dead letter with its reason.
    needlecast.send(sleeve, body="Lost message", to=["nobody-here"])
    needlecast.route_once(Context(root))
    if agent:
        full.session = agent_session(root)
    return full


def agent_session(root: Path) -> str:
    """One real agent session, run against a loopback Messages API, with a hostile prompt."""
    from agent_support import FakeMessagesAPI, agent_env, text, write_settings

    from moss_files.agent import service as agent

    write_settings(root, "", moss=False, demo=False)
    with FakeMessagesAPI([text(f"An answer {SCRIPT}")]) as fake:
        done = agent.run(Context(root), f"Question {SCRIPT} {JS_LINK}", environ=agent_env(fake))
    return str(done["session"]["id"])


# --------------------------------------------------------------------------- the daemon


@dataclass
class Served:
    root: Path
    process: subprocess.Popen[bytes]
    record: dict[str, Any]
    log: Path

    @property
    def base(self) -> str:
        return str(self.record["web"]).rstrip("/")

    @property
    def host(self) -> str:
        return urlsplit(self.base).netloc


@contextmanager
def serve(root: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """`moss serve --http 127.0.0.1:0` for `root`, until the block ends (then SIGTERM, exit 0)."""
    log = root.parent / f"serve-{root.name}.log"
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [str(BIN / "moss"), "serve", "--http", "127.0.0.1:0", *args],
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env={**os.environ, **(env or {})},
        )
    try:

        def running() -> dict[str, Any] | None:
            assert process.poll() is None, log.read_text()
            record = mcp_daemon.read_record(root)
            return record if record and record.get("pid") == process.pid else None

        record = wait_for(running, timeout=60, message="the daemon's record")
        yield Served(root, process, record, log)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()
        assert "Traceback" not in log.read_text(), log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    cookies: dict[str, str]

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    base: str,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    body: bytes | None = None,
    source: str | None = None,
) -> Answer:
    """One HTTP request with exactly the headers given (Host included, when given), from the
    loopback address `source` when given (127.0.0.2 is another client of a loopback server)."""
    from urllib.parse import urlencode

    parts = urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60, source_address=(source, 0) if source else None)
    try:
        sent = dict(headers or {})
        if form is not None:
            body = urlencode(form).encode()
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        connection.putrequest(method, path, skip_host="Host" in sent, skip_accept_encoding=True)
        for name, value in sent.items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        data = response.read()
        cookies = {}
        for name, value in response.getheaders():
            if name.lower() == "set-cookie":
                key, _, rest = value.partition("=")
                cookies[key] = rest.split(";", 1)[0]
        return Answer(response.status, {name.lower(): value for name, value in response.getheaders()}, data, cookies)
    finally:
        connection.close()


CSRF_FIELD = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def csrf_of(page: str) -> str:
    found = CSRF_FIELD.search(page)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def mask_times(text: str) -> str:
    """Text with RFC 3339 times replaced (two runs at different moments compare equal)."""
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z", "<time>", text)


# --------------------------------------------------------------------------- the browser

# Read at import: the isolated_env fixture clears MOSS_* variables before every test.
CHROMIUM = os.environ.get("MOSS_TEST_CHROMIUM", "/usr/bin/chromium")
REQUIRE_BROWSER = os.environ.get("MOSS_REQUIRE_BROWSER") == "1"
# Where screenshots are kept for a person (or CI's artifact upload); unset: each test's tmp_path.
ARTIFACTS = os.environ.get("MOSS_TEST_ARTIFACTS")
BROWSER_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers (CI) often give /dev/shm 64 MB, too little for Chromium
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def short_tmp() -> str | None:
    """/tmp when it is there (short paths), else the default temporary folder."""
    return "/tmp" if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK) else None


def browser_missing() -> str | None:
    """What the browser tests lack here, said exactly; None when they can run."""
    missing = []
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        found = shutil.which("chromium")
        missing.append(f"Chromium is not at {CHROMIUM}" + (f" (one is at {found}: set MOSS_TEST_CHROMIUM)" if found else " (Debian: apt-get install chromium)"))
    else:
        broken = chromium_broken()
        if broken:
            missing.append(broken)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the Python package playwright is not installed (pip install -e '.[test]')")
    return "; ".join(missing) or None


@functools.cache
def chromium_broken() -> str | None:
    """Why the Chromium at CHROMIUM cannot start (a snap wrapper without snapd, libraries
    missing), from its own words; None when `--version` answers. Asked once per session."""
    try:
        done = subprocess.run([CHROMIUM, "--headless", "--version"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{CHROMIUM} --version did not answer ({exc})"
    if done.returncode != 0 or "chrom" not in done.stdout.lower():
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        return f"{CHROMIUM} --version failed (exit {done.returncode}: {said[-1] if said else 'no output'})"
    return None


def require_browser() -> None:
    """Skip, saying exactly what is missing, where the browser cannot run (a machine where
    ./test.sh could not install it: not root, no apt-get, no network); with
    MOSS_REQUIRE_BROWSER=1 (a machine that must run them), fail instead."""
    missing = browser_missing()
    if missing is None:
        return
    if REQUIRE_BROWSER:
        pytest.fail(f"browser tests cannot run (MOSS_REQUIRE_BROWSER=1): {missing}")
    pytest.skip(f"browser tests need a headless browser: {missing}")


def processes_using(folder: str) -> list[str]:
    """The processes whose command line names `folder` (pid and command), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue  # it ended while we looked
        if folder in command:
            found.append(f"{entry.name}: {command[:200]}")
    return found


@pytest.fixture
def shots(tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> Path:
    """The test's screenshot folder: $MOSS_TEST_ARTIFACTS/web/<test>/ when set (kept after the
    run, for CI to upload), else under tmp_path (a module imports this fixture by name)."""
    folder = Path(ARTIFACTS) / "web" / request.node.name if ARTIFACTS else tmp_path / "screenshots"
    with capsys.disabled():
        print(f"\n[web] screenshots: {folder}")
    return folder


@contextmanager
def browser_page(shots: Path) -> Iterator[Any]:
    """A page of a fresh headless Chromium (its own profile folder), closed at the end; then
    every process of that browser must be gone (checked with a deadline, on Linux)."""
    from playwright.sync_api import sync_playwright

    shots.mkdir(parents=True, exist_ok=True)
    # Chromium puts a socket in TMPDIR, and a socket's path has at most 107 bytes: a short
    # folder of its own, whatever TMPDIR the test runs with.
    with tempfile.TemporaryDirectory(prefix="mc-", dir=short_tmp()) as profile:
        with sync_playwright() as driver:
            env = {**os.environ, "TMPDIR": profile}
            context = driver.chromium.launch_persistent_context(f"{profile}/p", executable_path=CHROMIUM, headless=True, args=BROWSER_FLAGS, env=env)
            try:
                page = context.new_page()
                page.set_default_timeout(15_000)
                yield page
            finally:
                context.close()
        if Path("/proc/self/cmdline").exists():
            try:
                wait_for(lambda: not processes_using(profile), timeout=15, message="the browser's processes to end")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; still running: {processes_using(profile)}") from None


class EventStream:
    """A reader of `GET /events` (server-sent events), with deadlines."""

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(base)
        self.connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
        self.connection.request("GET", "/events", headers=headers or {})
        self.response = self.connection.getresponse()

    def next_event(self, timeout: float = 10.0) -> tuple[str, dict[str, Any]]:
        """The next event's name and data (comments and keep-alives skipped)."""
        assert self.connection.sock is not None
        self.connection.sock.settimeout(timeout)
        name, data = "message", ""
        while True:
            line = self.response.readline()
            if not line:
                raise AssertionError("the event stream ended")
            text = line.decode("utf-8").rstrip("\n")
            if text.startswith("event: "):
                name = text[len("event: ") :]
            elif text.startswith("data: "):
                data += text[len("data: ") :]
            elif text == "" and data:
                return name, json.loads(data)

    def close(self) -> None:
        self.connection.close()


# --------------------------------------------------------------------------- realistic workspaces

MOE_FIXTURE = Path(__file__).resolve().parent.parent / "migrate" / "fixtures" / "moe"
BACKLOG_FIXTURE = MOE_FIXTURE.parent / "backlog"
# The words of the generated Moe board's titles: our own, in the shapes Moe's board has (a verb,
# what it acts on, sometimes why; 10 to 160 characters).
_VERBS = ("Fix", "Add", "Show", "Guard", "Rework", "Document", "Speed up", "Retry", "Split", "Cache", "Validate", "Remove")
_OBJECTS = (
    "the claim endpoint",
    "worker heartbeats",
    "the plan approval panel",
    "the activity log rotation",
    "epic rails in get_context",
    "QA rejection reasons",
    "the VS Code board webview",
    "channel pins",
    "stale worker detection",
    "the daemon's state file writes",
    "task ordering inside an epic",
    "the settings panel",
)
_WHYS = (
    "",
    "",
    " so that a restarted daemon keeps its queue",
    " (reported twice in review)",
    " before the 0.4 release",
    " when two agents claim within the same second and the second one sees a half-written task file on disk",
)


@dataclass
class Realistic:
    """What `realistic_workspace` made."""

    root: Path
    sleeves: tuple[str, ...] = ()
    capsules: list[str] = field(default_factory=list)
    long_capsule: str = ""
    sessions: list[str] = field(default_factory=list)
    latest_done: str = ""  # the board task completed last


def _moe_task(index: int, epic: str, status: str, rng: Any, base: float) -> dict[str, Any]:
    """One task of a Moe board as Moe writes it (`.moe/tasks/<id>.json`)."""
    from datetime import UTC, datetime

    def stamp(seconds: float) -> str:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{rng.randrange(1000):03d}Z"

    created = base + index * 3600 + rng.randrange(3600)
    title = f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)}{rng.choice(_WHYS)}"
    steps = [
        {
            "stepId": f"step-{n}",
            "description": f"Change `packages/moe-daemon/src/tools/part{n}.ts` and cover it with a test.",
            "status": "COMPLETED" if status in ("DONE", "ARCHIVED", "REVIEW") else "PENDING",
            "affectedFiles": [f"packages/moe-daemon/src/tools/part{n}.ts"],
        }
        for n in range(1, 1 + rng.randrange(1, 4))
    ]
    task: dict[str, Any] = {
        "id": f"task-{rng.getrandbits(32):08x}",
        "epicId": epic,
        "title": title,
        "description": f"{title}.\n\nWhat happens now: the {rng.choice(_OBJECTS)} is left as it was.\n\n- keep the old behaviour behind a flag\n- log once",
        "definitionOfDone": ["the new test passes", "no change in the public tool schema", "the docs say what changed"],
        "taskRails": [],
        "implementationPlan": steps if status != "BACKLOG" else [],
        "status": status,
        "assignedWorkerId": None,
        "branch": None,
        "prLink": None,
        "reopenCount": rng.choice((0, 0, 0, 1, 2)),
        "reopenReason": None,
        "createdBy": rng.choice(("HUMAN", "WORKER")),
        "parentTaskId": None,
        "priority": rng.choice(("MEDIUM",) * 14 + ("HIGH",) * 4 + ("CRITICAL", "LOW")),
        "order": index + 1,
        "createdAt": stamp(created),
        "updatedAt": stamp(created + 600),
        "comments": [],
    }
    if status in ("DONE", "ARCHIVED"):
        # Completed in an order of its own: neither creation nor priority tells it.
        task["completedAt"] = stamp(base + 300 * 3600 + rng.randrange(60 * 24 * 3600))
        task["updatedAt"] = task["completedAt"]
    return task


def moe_board(root: Path, *, tasks: int = 257, seed: int = 28) -> None:
    """A `.moe/` folder shaped like Moe's own board (257 tasks in 25 epics, nearly all DONE or
    ARCHIVED, a few in flight), made of the Moe fixture of tests/migrate plus generated tasks."""
    import random

    rng = random.Random(seed)
    moe = root / ".moe"
    shutil.copytree(MOE_FIXTURE / ".moe", moe, dirs_exist_ok=True)
    fixture_tasks = len(list((moe / "tasks").glob("*.json")))
    epics = ["epic-a205c7a1"]
    for number in range(24):
        epic_id = f"epic-{rng.getrandbits(32):08x}"
        epics.append(epic_id)
        title = f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)}" + (
            " and everything that depends on it across the daemon and the extension" if number == 3 else ""
        )
        epic = {
            "id": epic_id,
            "projectId": "proj-3830fac7",
            "title": title,
            "description": f"Group of work: {title.lower()}.",
            "architectureNotes": "",
            "epicRails": [],
            "status": "ACTIVE",
            "order": number + 1,
            "createdAt": "2026-02-03T12:00:00.000Z",
            "updatedAt": "2026-02-03T12:00:00.000Z",
        }
        (moe / "epics" / f"{epic_id}.json").write_text(json.dumps(epic, indent=2) + "\n")
    base = 1770000000.0  # early February 2026
    live = ["BACKLOG"] * 5 + ["PLANNING"] * 2 + ["WORKING"] * 2 + ["REVIEW"] * 2
    generated = tasks - fixture_tasks
    statuses = live + ["DONE"] * ((generated - len(live)) // 2) + ["ARCHIVED"] * (generated - len(live) - (generated - len(live)) // 2)
    rng.shuffle(statuses)
    for index, status in enumerate(statuses):
        task = _moe_task(index, epics[index % len(epics)], status, rng, base)
        (moe / "tasks" / f"{task['id']}.json").write_text(json.dumps(task, indent=2) + "\n")


def big_board(root: Path, count: int = 5000, *, seed: int = 5) -> None:
    """`count` tasks in epics of 100 (every status; DONE ones completed at different times),
    written straight as files, as bench/board.py writes its boards."""
    import random
    from datetime import UTC, datetime

    from moss_files.board import files
    from moss_files.board.model import PRIORITIES, Epic, Step, Task
    from moss_files.foundation.ids import IdSource, seeded_random

    rng = random.Random(seed)
    ids = IdSource(random_bytes=seeded_random(seed))
    base = root / ".moss" / "board"
    for folder in ("epics", "tasks"):
        (base / folder).mkdir(parents=True, exist_ok=True)
    epics = [ids.prefixed("EPIC") for _ in range(max(1, -(-count // 100)))]
    for order, epic_id in enumerate(epics, start=1):
        epic = Epic(id=epic_id, title=f"Billing area {order}", description="Related work.", status="ACTIVE", order=order, created="2026-01-01T00:00:00Z")
        (base / "epics" / f"{epic_id}.md").write_text(files.render_epic(epic))
    statuses = ("BACKLOG", "BACKLOG", "PLANNING", "WORKING", "REVIEW", "DONE", "DONE", "DONE")

    def stamp(seconds: float) -> str:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    for index in range(count):
        status = statuses[index % len(statuses)]
        created = 1767225600 + index * 60
        steps = tuple(Step(f"step-{n}", f"Change part {n}", status="COMPLETED" if status in ("REVIEW", "DONE") else "PENDING") for n in (1, 2))
        task = Task(
            id=ids.prefixed("TASK"),
            epic=epics[index % len(epics)],
            title=f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {index}{rng.choice(_WHYS)}",
            description="Totals are rounded per line instead of per invoice.",
            status=status,
            priority=PRIORITIES[index % 4],
            order=index // len(epics) + 1,
            definition_of_done=("totals match the ledger",),
            plan=steps if status != "BACKLOG" else (),
            created=stamp(created),
            updated=stamp(created),
            completed=stamp(created + rng.randrange(90 * 24 * 3600)) if status == "DONE" else None,
        )
        (base / "tasks" / f"{task.id}.md").write_text(files.render_task(task))


def agent_session_with_tools(root: Path, steps: int = 6) -> str:
    """An agent session of several tool calls (the demo server's echo and count) and an
    answer: a few dozen events."""
    from agent_support import FakeMessagesAPI, agent_env, text, tool, write_settings

    from moss_files.agent import service as agent

    write_settings(root, '[policy]\nallow_tools = ["demo.echo", "demo.count"]\n', moss=False, demo=True)
    replies = [tool("demo__echo", {"text": f"look at part {n}"}, say=f"Step {n}: checking.") for n in range(1, steps)]
    replies.append(tool("demo__count", {"a": 2, "b": 3}))
    replies.append(text("All parts checked; the count is 5."))
    with FakeMessagesAPI(replies) as fake:
        done = agent.run(Context(root), "Check every part of the billing module and count them", environ=agent_env(fake))
    return str(done["session"]["id"])


def realistic_workspace(root: Path, *, agent: bool = True) -> Realistic:
    """The workspace people would look at: Moe's board imported (`moss migrate moe`), with the
    Backlog.md fixture's tasks beside it (types and labels), capsules (one long), an envoy root
    with two sleeves that have mail (the root's own mailbox empty), memory files with decisions
    and their reasons, and (with `agent`) an agent session."""
    import cstack
    import needlecast
    from moss_files.migrate import service as migrate
    from needlecast import mailbox

    make_workspace(root)
    moe_board(root)
    ctx = Context(root)
    migrate.migrate_moe(ctx)
    shutil.copytree(BACKLOG_FIXTURE / "backlog", root / "backlog")
    migrate.migrate_backlog(ctx)
    shutil.rmtree(root / "backlog")
    made = Realistic(root)
    for name, workspace, tags in (("login handoff", "web", ["auth"]), ("billing notes", "web", []), ("release checklist", "ops", ["release"])):
        made.capsules.append(capsules.store(ctx, capsule_text=CAPSULE, name=name, workspace=workspace, tags=tags)["id"])
    long_text = CAPSULE.replace(
        "- src/auth/", "\n".join(f"- src/billing/module_{n}.py: rounding and totals, part {n} of the invoice pipeline" for n in range(90))
    )
    made.long_capsule = capsules.store(ctx, capsule_text=long_text, name="billing deep dive", workspace="ops")["id"]
    made.capsules.append(made.long_capsule)
    made.sleeves = ("alice", "bob")
    for name in made.sleeves:
        mailbox.init_mailbox(root / name, "v1")
    alice, bob = (Context(root / name, sleeve=name) for name in made.sleeves)
    needlecast.send(alice, body="Can you take the rounding task? The ledger test fails on invoices with 40 lines.", to=["bob"], thread="rounding")
    needlecast.send(bob, body="Taking it. I will round once, at the end, half-even.", to=["alice"], thread="rounding")
    needlecast.send(alice, body="Thanks. Ping me when the property test is in.", to=["bob"], thread="rounding")
    needlecast.send(alice, body="The release checklist capsule is up to date.", to=["bob"], thread="release")
    needlecast.send(bob, body="Reviewed **the checklist**: two items need an owner.", to=["alice"], thread="release")
    needlecast.route_once(ctx)
    cstack.add_task(ctx, task="Write the rounding property test P1 #billing", ident="rounding-test")
    cstack.add_task(ctx, task="Ship the invoice fix", ident="ship", depends=["rounding-test"])
    cstack.remember(ctx, text="Rounding | half-even at the end | per-line rounding drifts from the ledger by a cent on long invoices", category="decisions")
    cstack.remember(ctx, text="Cache | SQLite | one file, safe to delete", category="decisions")
    cstack.remember(ctx, text="The ledger test needs a fixed clock", category="gotchas")
    if agent:
        made.sessions.append(agent_session_with_tools(root))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a realistic workspace")
    from moss_files.board import queries

    done = queries.list_tasks(ctx, statuses=["DONE"])["tasks"]
    finished = {task["id"]: queries.show_task(ctx, task_id=task["id"]) for task in done}
    made.latest_done = max(finished, key=lambda ident: finished[ident].get("completedAt") or finished[ident].get("updatedAt") or "")
    return made
