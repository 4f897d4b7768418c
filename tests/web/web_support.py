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
