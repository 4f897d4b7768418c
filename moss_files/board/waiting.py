"""Board use cases that block: `wait_for_task` (until a task the worker may claim appears) and
`chat_wait` (until messages arrive for it).

Shell layer. A wait starts a `watch.BoardWatcher` on `.moss/board/` first, then looks, then
sleeps until a file changes (in this process or any other, or by a `git pull`), a deadline
that no file announces comes (a lease running out, a SPEED-mode approval), or the timeout; then
it looks again. No loop spins: between looks the waiter sleeps on an event. A worker's new
wait in the same server cancels its previous one (`cancelled: true`), as in Moe.

What wakes wait_for_task mirrors claim_next_task exactly (`rules.wait_answer`): a task it
would be given, or its own task once in a wanted column. Also: a human's comment on a task it
holds (`hasPendingQuestion`), and a chat message that mentions it, or a human's message in a
channel it listens to (`hasChatMessage`). It never claims.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from moss_files.board import rules, threads
from moss_files.board.conversation import known_channel, merge_oldest_first, speaker
from moss_files.board.model import CLAIMABLE, GONE_WORKER_STATUSES, Board, Task, check_statuses
from moss_files.board.usecase import (
    Wait,
    board_store,
    caller,
    find_epic,
    find_team,
    question_blocked,
    settle_approvals,
    settle_leases,
    touch,
    waits,
)
from moss_files.board.watch import BoardWatcher
from moss_files.foundation import arguments
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidRequest

DEFAULT_TIMEOUT_MS = 300_000
MIN_TIMEOUT_MS, MAX_TIMEOUT_MS = 1_000, 600_000
QUIET_SECONDS = 0.002  # a write is several events (create, modify, close, rename): look once
CANCEL_CHECK_SECONDS = 1.0  # how often a waiter whose caller may go away asks `still_wanted`
MAX_BURST = 100
WATCH_KEY = "board.watch-mode"
ROLE_CHANNEL = {role: channel for channel, role in threads.ROLE_CHANNELS.items()}

Check = Callable[[], dict[str, Any] | None]


def _timeout(timeout_ms: int | None) -> float:
    """Moe's clamp: default 5 minutes, 1 s to 10 min; 0 looks once without waiting."""
    if timeout_ms is None:
        return DEFAULT_TIMEOUT_MS / 1000
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float) or timeout_ms < 0:
        raise InvalidRequest("timeoutMs must be a number of milliseconds, at least 0", details={"field": "timeoutMs"})
    if timeout_ms == 0:
        return 0.0
    return min(max(timeout_ms, MIN_TIMEOUT_MS), MAX_TIMEOUT_MS) / 1000


def _block(
    ctx: Context,
    *,
    kind: str,
    worker: str,
    timeout: float,
    check: Check,
    next_deadline: Callable[[], datetime | None],
    poll: bool,
    still_wanted: Callable[[], bool] | None,
    channels: frozenset[str] | None = None,
) -> tuple[dict[str, Any] | None, str, float]:
    """Look with `check` until it answers, the wait is cancelled, or `timeout` seconds pass.
    Returns (the answer or None on timeout, how the files were watched, seconds waited)."""
    started = time.monotonic()
    wait = Wait(channels=channels)
    registry = waits(ctx)
    registry.enter(kind, worker, wait)
    modes: dict[str, bool] = ctx.resource(WATCH_KEY, dict)
    watcher = BoardWatcher(board_store(ctx).base, poll=poll or modes.get("blind", False))
    wait.wake = watcher.changed
    try:
        watcher.start()
        if watcher.fallback_reason is not None:
            modes["blind"] = True  # later waits of this server poll from the start
        deadline = started + timeout
        looked = False
        while True:
            watcher.changed.clear()
            answer = check()
            if answer is not None:
                return answer, watcher.mode, time.monotonic() - started
            if not looked and timeout > 0:
                looked = True
                # From here on any change to the board's files wakes this wait: say so.
                ctx.say(f"waiting ({watcher.mode}) up to {timeout:g}s for {'a task' if kind == 'task' else 'messages'}")
            if wait.cancelled.is_set():
                return {"cancelled": True}, watcher.mode, time.monotonic() - started
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, watcher.mode, time.monotonic() - started
            sleep = remaining
            due = next_deadline()
            if due is not None:
                sleep = min(sleep, max(0.0, (due - ctx.now()).total_seconds()) + 0.005)
            if still_wanted is not None:
                sleep = min(sleep, CANCEL_CHECK_SECONDS)
            if watcher.changed.wait(sleep):
                time.sleep(QUIET_SECONDS)
            if wait.cancelled.is_set():
                return {"cancelled": True}, watcher.mode, time.monotonic() - started
            if still_wanted is not None and not still_wanted():
                return {"cancelled": True}, watcher.mode, time.monotonic() - started
    finally:
        watcher.stop()
        registry.leave(kind, worker, wait)


def _settled(ctx: Context, board: Board, weighed: Sequence[str]) -> Board:
    """The board (an outline of the `weighed` statuses) with due leases released and due SPEED
    approvals made (both write, under the lock, only when something is due)."""
    now = ctx.now()
    due_approval = any(rules.approval_due(task, board.project.settings, now) for task in board.tasks.values())
    if not rules.expired_holds(board, now) and not due_approval:
        return board
    store = board_store(ctx)
    with store.writing():
        return settle_approvals(ctx, settle_leases(ctx, store.outline(weighed)))


def _role(board: Board, worker: str) -> str | None:
    for team in board.teams.values():
        if worker in team.members and team.role:
            return team.role
    record = board.workers.get(worker)
    return record.type if record else None


def _listened(board: Board, worker: str, joined: Sequence[str]) -> set[str]:
    """The channels whose human messages wake a worker: general, its role's, those it joined,
    and the channel of the task it holds."""
    found = {"general", *joined}
    role = _role(board, worker)
    if role in ROLE_CHANNEL:
        found.add(ROLE_CHANNEL[role])
    held = board.active_task_of(worker)
    if held is not None:
        found.add(held.id)
    return found


class _ChatWatch:
    """The chat messages that arrived since a wait began, reading only the channels whose file
    changed since the last look."""

    def __init__(self, ctx: Context) -> None:
        self.store = board_store(ctx)
        self.signatures = self.store.thread_signatures("chat")
        self.known = {name: {p.id for p in self.store.read_channel(name)[0]} for name in self.signatures}

    def arrivals(self) -> dict[str, tuple[list[threads.Post], set[str]]]:
        """{channel: (all its lines, the ids of the messages new since the last look)}."""
        found: dict[str, tuple[list[threads.Post], set[str]]] = {}
        current = self.store.thread_signatures("chat")
        for name, signature in current.items():
            if self.signatures.get(name) == signature:
                continue
            posts, _ = self.store.read_channel(name)
            seen = self.known.setdefault(name, set())
            fresh = {p.id for p in threads.messages(posts) if p.id not in seen}
            seen.update(p.id for p in posts)
            if fresh:
                found[name] = (posts, fresh)
        self.signatures = current
        return found


def _relevant_message(board: Board, worker: str, chat: _ChatWatch) -> dict[str, Any] | None:
    """A new message that mentions the worker (by name or group), or a human's in a channel it
    listens to."""
    arrived = chat.arrivals()
    if not arrived:
        return None
    roles = {worker_id: _role(board, worker_id) for worker_id in board.workers}
    joined = [name for name, (posts, _) in arrived.items() if worker in threads.members(posts)]
    listened = _listened(board, worker, joined)
    hops_limit = board.project.settings.chat_max_agent_hops
    for name, (posts, fresh) in arrived.items():
        shown = threads.messages(posts)
        for index, post in enumerate(shown):
            if post.id not in fresh or post.sender == worker:
                continue
            paused = threads.agent_hops(shown[:index]) >= hops_limit
            if worker in threads.routing_targets(post, roles, paused=paused) or (post.sender == threads.HUMAN and name in listened):
                return {
                    "hasNext": False,
                    "hasChatMessage": True,
                    "chatMessage": {"id": post.id, "channel": name, "sender": post.sender, "preview": post.content[:200]},
                    "nextAction": {
                        "tool": "moe.chat_read",
                        "args": {"channel": name, "workerId": worker},
                        "reason": "A message for you; read and answer it, then call moe.wait_for_task again.",
                    },
                }
    return None


def _question_for(ctx: Context, board: Board, worker: str) -> dict[str, Any] | None:
    """A human's comment waiting for an answer on the task the worker holds."""
    held = board.active_task_of(worker)
    if held is None:
        return None
    comments, _ = board_store(ctx).read_comments(held.id)
    if not threads.questions_for_agents(comments):
        return None
    return {
        "hasNext": False,
        "hasPendingQuestion": True,
        "taskId": held.id,
        "nextAction": {
            "tool": "moe.get_pending_questions",
            "args": {},
            "reason": "A human commented on your task; read it and answer with moe.add_comment.",
        },
    }


def wait_for_task(
    ctx: Context,
    *,
    statuses: Sequence[str] | None = None,
    worker_id: str | None = None,
    epic_id: str | None = None,
    team_id: str | None = None,
    timeout_ms: int | None = None,
    poll: bool = False,
    still_wanted: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Moe's wait_for_task: block until a task the worker may claim appears (it does not claim
    it), a human comments on its task, or a chat message is for it; answer at once when one is
    there already.

    `team_id`: wait as a member of that team (its role's column when `statuses` is omitted).
    `timeout_ms`: default 300000, clamped to 1000..600000; 0 looks once. Answers
    `{hasNext: true, task {id, title, status, priority, epicId}, ownTask?, nextAction}`, or
    `{hasNext: false, hasPendingQuestion | hasChatMessage | timedOut | cancelled, nextAction?}`,
    with `waitedMs` and `watcher` (inotify or polling).

    Raises InvalidRequest without a worker or with statuses agents may not claim, NotFound for
    the epic or team, NOT_ALLOWED when the worker is not in the team, LEASE_EXPIRED never (a
    stale worker waits for a new task like any other).
    """
    worker = caller(ctx, worker_id)
    if worker is None:
        raise InvalidRequest("workerId is required", details={"field": "workerId"})
    speaker(ctx, worker)
    timeout = _timeout(timeout_ms)
    store = board_store(ctx)
    board = store.outline(())
    epic = arguments.optional(epic_id)
    if epic:
        find_epic(board, epic)
    wanted = check_statuses(statuses, "statuses")
    team = arguments.optional(team_id)
    if team is not None:
        found = find_team(board, team)
        if worker not in found.members:
            raise Conflict(f"{worker} is not a member of team {team}", code="NOT_ALLOWED", status=403, details={"teamId": team, "workerId": worker})
        if not wanted and found.role:
            wanted = tuple(status for status, role in (("PLANNING", "architect"), ("WORKING", "worker"), ("REVIEW", "qa")) if role == found.role)
    if not wanted:
        raise InvalidRequest("statuses must list at least one of " + ", ".join(CLAIMABLE), details={"field": "statuses"})
    bad = [s for s in wanted if s not in CLAIMABLE]
    if bad:
        raise InvalidRequest(
            f"agents wait only for {', '.join(CLAIMABLE)} tasks, not {', '.join(bad)}; the other columns are human-gated",
            details={"field": "statuses", "statuses": bad},
        )
    _sign_of_life(ctx, worker)
    chat = _ChatWatch(ctx)
    latest: list[Board] = [board]

    # What a claim weighs (see claims.claim_next_task): the answer mirrors the claim's.
    weighed = (*wanted, "AWAITING_APPROVAL")

    def check() -> dict[str, Any] | None:
        current = _settled(ctx, store.outline(weighed), weighed)
        latest[0] = current
        task = rules.wait_answer(current, wanted, worker, epic_id=epic, blocked=question_blocked(ctx))
        if task is not None:
            return _task_answer(task, worker, wanted, epic)
        return _question_for(ctx, current, worker) or _relevant_message(current, worker, chat)

    def next_deadline() -> datetime | None:
        moments = [m for m in (rules.next_lease_expiry(latest[0]), rules.next_auto_approval(latest[0])) if m is not None]
        return min(moments, default=None)

    answer, mode, waited = _block(
        ctx, kind="task", worker=worker, timeout=timeout, check=check, next_deadline=next_deadline, poll=poll, still_wanted=still_wanted
    )
    if answer is None:
        answer = {
            "hasNext": False,
            "timedOut": True,
            "nextAction": {
                "tool": "moe.wait_for_task",
                "args": {"statuses": list(wanted), "workerId": worker, "epicId": epic},
                "reason": "Nothing came; wait again to keep listening.",
            },
        }
    elif answer.get("cancelled"):
        answer = {"hasNext": False, "cancelled": True}
    _sign_of_life(ctx, worker)
    return {**answer, "waitedMs": round(waited * 1000), "watcher": mode}


def _sign_of_life(ctx: Context, worker: str) -> None:
    """A waiting worker is alive: its lease is renewed, at the start and end of each wait (a
    wait lasts at most ten minutes). A STALE or DEAD worker is left so: it claims again."""
    store = board_store(ctx)
    with store.writing():
        board = settle_leases(ctx, store.outline(()))
        record = board.workers.get(worker)
        if record is None or record.status not in GONE_WORKER_STATUSES:
            touch(ctx, board, worker)


def _task_answer(task: Task, worker: str, statuses: Sequence[str], epic: str | None) -> dict[str, Any]:
    own = task.assigned_worker == worker
    return {
        "hasNext": True,
        "task": {"id": task.id, "title": task.title, "status": task.status, "priority": task.priority, "epicId": task.epic or None},
        **({"ownTask": True} if own else {}),
        "nextAction": {
            "tool": "moe.get_context" if own else "moe.claim_next_task",
            "args": {"taskId": task.id, "workerId": worker} if own else {"statuses": list(statuses), "workerId": worker, "epicId": epic},
            "reason": "Your task is in a column you wait on; carry on with it." if own else "A task is there for you; claim it, then call moe.get_context.",
        },
    }


def chat_wait(
    ctx: Context,
    *,
    worker_id: str | None = None,
    channels: Sequence[str] | None = None,
    since_id: str | None = None,
    timeout_ms: int | None = None,
    max_content_chars: int | None = None,
    poll: bool = False,
    still_wanted: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Moe's chat_wait: the messages from others the worker has not read yet, in `channels`
    (default: general, its role's channel, the channels it joined, its task's), oldest first
    (at most 100, `hasMore`); when there are none, wait for the next ones. Read positions move
    only over the messages given. `sinceId` reads after that message instead of the saved
    position. Answers `{hasMessage, messages, truncated, hasMore}` or `{hasMessage: false,
    timedOut | cancelled}`, with `waitedMs` and `watcher`."""
    worker = caller(ctx, worker_id)
    if worker is None:
        raise InvalidRequest("workerId is required", details={"field": "workerId"})
    speaker(ctx, worker)
    timeout = _timeout(timeout_ms)
    max_chars = arguments.count(max_content_chars, "maxContentChars", default=threads.DEFAULT_SHOWN_CHARS, minimum=0)
    since = arguments.optional(since_id)
    store = board_store(ctx)
    board = store.load()
    named = frozenset(threads.channel_ref(ref) for ref in channels) if channels else None
    if named is not None:
        for ref in named:
            known_channel(ctx, board, ref)

    def listened(current: Board) -> list[str]:
        if named is not None:
            return sorted(named)
        joined = [name for name in store.thread_names("chat") if worker in threads.members(store.read_channel(name)[0])]
        return sorted(_listened(current, worker, joined))

    def check() -> dict[str, Any] | None:
        current = store.load()
        saved = store.read_cursors(worker)
        unread: dict[str, list[threads.Post]] = {}
        for name in listened(current):
            posts, _ = store.read_channel(name)
            cursor = since if since is not None else saved.get(name)
            # A message from the worker itself needs no delivery, but it moves the position.
            unread[name] = threads.after(posts, cursor)
        if not any(post.sender != worker for posts in unread.values() for post in posts):
            return None
        given = merge_oldest_first(unread, MAX_BURST)
        store.advance_cursors(worker, {post.channel: post.id for post in given})
        shown = [threads.message_to_dict(post, max_chars) for post in given if post.sender != worker]
        left = sum(len(posts) for posts in unread.values()) - len(given)
        truncated = sum(1 for message in shown if message.get("contentTruncated"))
        return {"hasMessage": True, "messages": shown, "truncated": truncated, "hasMore": left > 0}

    answer, mode, waited = _block(
        ctx, kind="chat", worker=worker, timeout=timeout, check=check, next_deadline=lambda: None, poll=poll, still_wanted=still_wanted, channels=named
    )
    if answer is None:
        answer = {"hasMessage": False, "timedOut": True}
    elif answer.get("cancelled"):
        answer = {"hasMessage": False, "cancelled": True}
    return {**answer, "waitedMs": round(waited * 1000), "watcher": mode}
