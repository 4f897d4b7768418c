"""Board use cases of talking: Moe's chat (channels, messages, joins, pins, decisions, read
cursors), comments on tasks, and questions between agents and humans.

Shell layer: each function takes a Context and typed keyword arguments and returns the JSON
result the `moe.*` tool returns and `moss board chat …` / `moss task comment …` print. Every
thread is one JSONL file that git merges by union (see `threads`); sends are single O_APPEND
writes, so concurrent senders never tear a line. A worker's read position in each channel is
per machine (`.moss/run/board/cursors/`), and advances only over messages it was given.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from moss_files.board import rules, threads
from moss_files.board.model import GONE_WORKER_STATUSES, Board
from moss_files.board.rules import worker_status
from moss_files.board.threads import HUMAN, SYSTEM, Post
from moss_files.board.usecase import board_store, caller, event_time, find_epic, log, task_on_file, touch, waits, with_problems
from moss_files.foundation import arguments
from moss_files.foundation.context import HUMAN as HUMAN_ACTOR
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, NotFound

DEFAULT_READ_LIMIT, MAX_READ_LIMIT = 10, 200
DEFAULT_RESYNC_LIMIT = 50
PRESENCE_SECONDS = 120  # Moe's presence window: a worker heard from within it is online

# --------------------------------------------------------------------------- who speaks


def speaker(ctx: Context, worker_id: str | None) -> str:
    """Who a line is from: the named worker, else `human` at the command line and `agent` over
    MCP. Raises NOT_ALLOWED for an agent that names itself `human` or `system`."""
    worker = caller(ctx, worker_id)
    if worker is not None:
        if worker in (HUMAN, SYSTEM) and (ctx.actor != HUMAN_ACTOR or worker == SYSTEM):
            raise Conflict(f"{worker!r} is reserved; name the worker that speaks", code="NOT_ALLOWED", status=403, details={"workerId": worker})
        return worker
    return HUMAN if ctx.actor == HUMAN_ACTOR else "agent"


def _alive(ctx: Context, speaker_id: str) -> Board | None:
    """A worker that speaks is alive (Moe touches the worker on every chat call): its lease
    is renewed (at most every twentieth of the lease). A STALE or DEAD worker stays so.
    Returns the board's people as this look left them (a worker it registered included), or
    None for a speaker that is no worker (nothing was looked at)."""
    if speaker_id in (HUMAN, SYSTEM, "agent"):
        return None
    store = board_store(ctx)
    with store.writing():
        board = store.people()
        record = board.workers.get(speaker_id)
        if record is None or record.status not in GONE_WORKER_STATUSES:
            board = touch(ctx, board, speaker_id)
    return board


def _roles(board: Board) -> dict[str, str | None]:
    """Every known worker's role: its team's role, else its own type."""
    roles: dict[str, str | None] = {worker_id: worker.type for worker_id, worker in board.workers.items()}
    for team in board.teams.values():
        for member in team.members:
            if team.role:
                roles[member] = team.role
    return roles


# --------------------------------------------------------------------------- channels


def known_channel(ctx: Context, board: Board, ref: str) -> threads.Channel:
    """The channel `ref` names (`board` needs its epics, not its tasks: a task channel's task
    is read from its file). Raises NotFound `Channel not found` for a custom channel never
    created or the channel of a task or epic that does not exist."""
    channel_id = threads.channel_ref(ref)
    channel = threads.channel_of(channel_id)
    if channel.type == "task":
        task_on_file(ctx, channel_id)
    elif channel.type == "epic":
        find_epic(board, channel_id)
    elif channel.type == "custom" and channel_id not in board_store(ctx).thread_names("chat"):
        raise NotFound(f"Channel not found: {ref}", details={"channel": ref}, hint="moe.chat_create_channel makes it; moe.chat_channels lists them")
    return channel


def _channel_ids(ctx: Context) -> list[str]:
    """Every channel: the built-in ones, then those with a file."""
    return list(dict.fromkeys((*threads.CANONICAL_CHANNELS, *board_store(ctx).thread_names("chat"))))


def _channel_row(channel_id: str, posts: Sequence[Post]) -> dict[str, Any]:
    channel = threads.channel_of(channel_id)
    created = threads.created_line(posts)
    shown = threads.messages(posts)
    return {
        "id": channel.id,
        "name": channel.id,
        "type": channel.type,
        "linkedEntityId": channel.linked,
        "createdAt": created.timestamp if created else (posts[0].timestamp if posts else None),
        "createdBy": created.sender if created else None,
        "messageCount": len(shown),
        "lastMessageAt": shown[-1].timestamp if shown else None,
        "pinnedCount": len(threads.pins(posts)),
        "members": threads.members(posts),
    }


def chat_channels(ctx: Context) -> dict[str, Any]:
    """Moe's chat_channels: every channel (built-in, custom, and the task and epic channels
    that have messages) with its counts."""
    store = board_store(ctx)
    rows, problems = [], []
    for channel_id in _channel_ids(ctx):
        posts, trouble = store.read_channel(channel_id)
        problems.extend(trouble)
        rows.append(_channel_row(channel_id, posts))
    return with_problems({"channels": rows}, problems)


def chat_create_channel(ctx: Context, *, name: str, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's chat_create_channel: a custom channel (its file, with a creation line). Creating
    one that exists returns it (`created: false`); so do two clones that both created it."""
    channel_id = threads.check_custom_name(arguments.required(name, "name"))
    sender = speaker(ctx, worker_id)
    store = board_store(ctx)
    with store.thread_lock("chat", channel_id):
        posts, _ = store.read_channel(channel_id)
        created = threads.created_line(posts) is None and not posts
        if created:
            line = Post(kind="channel", id=f"CHAN-{ctx.new_ulid()}", channel=channel_id, sender=sender, timestamp=event_time(ctx), content=channel_id)
            store.append_record("chat", channel_id, threads.post_to_record(line))
            posts, _ = store.read_channel(channel_id)
    if created:
        log(ctx, store.read_project(), "CHANNEL_CREATED", worker=sender if sender not in (HUMAN, "agent") else None, channel=channel_id)
    return {"success": True, "channel": _channel_row(channel_id, posts), "created": created}


# --------------------------------------------------------------------------- messages


def chat_send(ctx: Context, *, channel: str, content: str, worker_id: str | None = None, reply_to: str | None = None) -> dict[str, Any]:
    """Moe's chat_send: append a message; @mentions (`@worker`, `@all`, `@workers`, …) are
    parsed and the workers they wake are returned as `routingTargets` (none once agents have
    mentioned each other `chatMaxAgentHops` times in a row without a human: Moe's loop guard).

    Raises NotFound for the channel or the `replyTo` message, InvalidRequest for empty or
    oversized content, NOT_ALLOWED for an agent speaking as `human` or `system`.
    """
    text = threads.check_content(content)
    sender = speaker(ctx, worker_id)
    store = board_store(ctx)
    people = store.people()
    target = known_channel(ctx, people, channel)
    board = _alive(ctx, sender) or people  # after the sign of life: a worker it registered has its role
    posts, problems = store.read_channel(target.id)
    reply = arguments.optional(reply_to)
    if reply is not None and not any(p.id == reply for p in threads.messages(posts)):
        raise NotFound(f"message {reply} not found in channel {target.id}", details={"field": "replyTo", "messageId": reply})
    post = Post(
        kind="message",
        id=f"MSG-{ctx.new_ulid()}",
        channel=target.id,
        sender=sender,
        timestamp=event_time(ctx),
        content=text,
        reply_to=reply,
        mentions=threads.mentions_in(text),
    )
    paused = threads.agent_hops(posts) >= board.project.settings.chat_max_agent_hops
    targets = threads.routing_targets(post, _roles(board), paused=paused)
    store.append_record("chat", target.id, threads.post_to_record(post))
    result = {"success": True, "messageId": post.id, "channel": target.id, "timestamp": post.timestamp, "routingTargets": list(targets)}
    if paused and post.sender not in (HUMAN, SYSTEM) and post.mentions:
        result["routingPaused"] = True
        result["hint"] = (
            f"agents mentioned each other {board.project.settings.chat_max_agent_hops} times in a row; a human message or @continue resumes routing"
        )
    return with_problems(result, problems)


def _all_posts(ctx: Context, channel_ids: Iterable[str]) -> tuple[dict[str, list[Post]], list[MossError]]:
    store = board_store(ctx)
    found: dict[str, list[Post]] = {}
    problems: list[MossError] = []
    for channel_id in channel_ids:
        posts, trouble = store.read_channel(channel_id)
        found[channel_id] = posts
        problems.extend(trouble)
    return found, problems


def merge_oldest_first(unread: dict[str, list[Post]], limit: int) -> list[Post]:
    """Up to `limit` messages from several channels, oldest first, always taking each channel's
    next unread message in its file order: whatever is left out comes after every message
    given in its own channel, so a cursor at the last given one skips nothing."""
    heads = [(posts[0].timestamp, order, 0) for order, posts in enumerate(unread.values()) if posts]
    lists = list(unread.values())
    heapq.heapify(heads)
    taken: list[Post] = []
    while heads and len(taken) < limit:
        _stamp, order, index = heapq.heappop(heads)
        taken.append(lists[order][index])
        if index + 1 < len(lists[order]):
            heapq.heappush(heads, (lists[order][index + 1].timestamp, order, index + 1))
    return taken


def chat_read(
    ctx: Context,
    *,
    channel: str | None = None,
    worker_id: str | None = None,
    since_id: str | None = None,
    limit: int | None = None,
    max_content_chars: int | None = None,
) -> dict[str, Any]:
    """Moe's chat_read: messages of a channel (or of every channel), oldest first.

    After a cursor (`sinceId`, else the worker's saved position) it gives the oldest `limit`
    messages not yet read, and moves the worker's position to the last one given, so reading
    again continues where it stopped; without a cursor it gives the newest `limit`. Returns
    `{messages, cursor, truncated, hasMore}`.
    """
    count = arguments.count(limit, "limit", default=DEFAULT_READ_LIMIT, maximum=MAX_READ_LIMIT)
    max_chars = arguments.count(max_content_chars, "maxContentChars", default=threads.DEFAULT_SHOWN_CHARS, minimum=0)
    worker = caller(ctx, worker_id)
    since = arguments.optional(since_id)
    store = board_store(ctx)
    ids = [known_channel(ctx, store.people(), channel).id] if channel is not None else _channel_ids(ctx)
    by_channel, problems = _all_posts(ctx, ids)
    saved = store.read_cursors(worker) if worker and since is None else {}
    unread: dict[str, list[Post]] = {}
    cursored = False
    for channel_id, posts in by_channel.items():
        cursor = since if since is not None else saved.get(channel_id)
        if cursor is not None or (worker is not None and since is None):
            cursored = True
            unread[channel_id] = threads.after(posts, cursor)
        else:
            unread[channel_id] = threads.messages(posts)
    if cursored:
        given = merge_oldest_first(unread, count)
    else:
        every = [post for posts in unread.values() for post in posts]
        given = [post for _, _, post in sorted((p.timestamp, i, p) for i, p in enumerate(every))][-count:]
    remaining = sum(len(posts) for posts in unread.values()) - len(given)
    if worker is not None:
        _alive(ctx, worker)
    if worker is not None and since is None and given:
        moves: dict[str, str | None] = {}
        for post in given:
            moves[post.channel] = post.id
        store.advance_cursors(worker, moves)
    shown = [threads.message_to_dict(post, max_chars) for post in given]
    truncated = sum(1 for message in shown if message.get("contentTruncated"))
    result: dict[str, Any] = {
        "messages": shown,
        "cursor": given[-1].id if given else since or (saved.get(ids[0]) if len(ids) == 1 else None),
        "truncated": truncated,
        "hasMore": remaining > 0 and cursored,
    }
    if truncated:
        result["hint"] = "Long chat messages are cut; read again with maxContentChars: 0 for the whole text."
    return with_problems(result, problems)


def chat_resync(ctx: Context, *, worker_id: str | None = None, channel: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """Moe's chat_resync: forget the worker's read positions (of one channel, or all) and give
    the newest messages again (`limit` per read, default 50); positions then stand at them."""
    worker = caller(ctx, worker_id)
    if worker is None:
        raise InvalidRequest("workerId is required", details={"field": "workerId"})
    count = arguments.count(limit, "limit", default=DEFAULT_RESYNC_LIMIT, maximum=MAX_READ_LIMIT)
    store = board_store(ctx)
    ids = [known_channel(ctx, store.people(), channel).id] if channel is not None else _channel_ids(ctx)
    by_channel, problems = _all_posts(ctx, ids)
    every = [post for channel_id in ids for post in threads.messages(by_channel[channel_id])]
    given = [post for _, _, post in sorted((p.timestamp, i, p) for i, p in enumerate(every))][-count:]
    moves: dict[str, str | None] = dict.fromkeys(ids)
    for channel_id in ids:
        shown_here = threads.messages(by_channel[channel_id])
        if shown_here:
            moves[channel_id] = shown_here[-1].id  # everything up to now counts as read
    store.advance_cursors(worker, moves)
    return with_problems(
        {"success": True, "messagesCount": len(given), "messages": [threads.message_to_dict(p, 0) for p in given], "cursorsReset": True}, problems
    )


# --------------------------------------------------------------------------- presence


def _online(ctx: Context, board: Board) -> list[tuple[str, Any]]:
    now = ctx.now()
    found = []
    for worker_id, worker in sorted(board.workers.items()):
        beat = rules.parse_time(worker.heartbeat)
        if worker.status in GONE_WORKER_STATUSES or beat is None or now - beat > timedelta(seconds=PRESENCE_SECONDS):
            continue
        found.append((worker_id, worker))
    return found


def chat_join(ctx: Context, *, channel: str, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's chat_join: the worker joins a channel (a join line, written once) and learns who is
    online (heard from within the last two minutes)."""
    sender = speaker(ctx, worker_id)
    _alive(ctx, sender)
    store = board_store(ctx)
    board = store.outline(())  # workers, and the tasks they hold (a worker's status)
    target = known_channel(ctx, board, channel)
    with store.thread_lock("chat", target.id):
        posts, _ = store.read_channel(target.id)
        joined = sender not in threads.members(posts)
        if joined:
            line = Post(kind="join", id=f"JOIN-{ctx.new_ulid()}", channel=target.id, sender=sender, timestamp=event_time(ctx))
            store.append_record("chat", target.id, threads.post_to_record(line))
    online = [{"id": worker_id, "status": worker_status(board, worker)} for worker_id, worker in _online(ctx, board)]
    return {"channel": target.id, "channelName": target.id, "joined": joined, "onlineWorkers": online}


def chat_who(ctx: Context, *, channel: str | None = None) -> dict[str, Any]:
    """Moe's chat_who: online workers (heard from within two minutes), or, for a channel, its
    members who are online and the workers waiting on it in this server (`source`)."""
    store = board_store(ctx)
    board = store.outline(())  # workers, and the tasks they hold (status, currentTaskId)
    wanted = threads.channel_ref(channel) if channel is not None else None
    waiting = {worker_id for worker_id, wait in waits(ctx).waiting("chat").items() if wanted is None or wait.channels is None or wanted in wait.channels}
    online = dict(_online(ctx, board))
    if channel is not None:
        target = known_channel(ctx, board, channel)
        posts, _ = store.read_channel(target.id)
        members = set(threads.members(posts))
        chosen = sorted((set(online) & members) | (waiting & set(board.workers)))
    else:
        chosen = sorted(set(online) | (waiting & set(board.workers)))
    rows = []
    for worker_id in chosen:
        worker = board.workers[worker_id]
        held = board.active_task_of(worker_id)
        listed = worker_id in online
        source = "both" if listed and worker_id in waiting else ("waiting" if worker_id in waiting else ("joined" if channel else "heartbeat"))
        rows.append(
            {
                "workerId": worker_id,
                "status": worker_status(board, worker),
                "lastActivity": worker.heartbeat,
                "currentTaskId": held.id if held else None,
                "source": source,
            }
        )
    return {"online": rows}


# --------------------------------------------------------------------------- pins and decisions


def _message(posts: Sequence[Post], message_id: str, channel: str) -> Post:
    found = next((p for p in threads.messages(posts) if p.id == message_id), None)
    if found is None:
        raise NotFound(f"message {message_id} not found in channel {channel}", details={"messageId": message_id, "channel": channel})
    return found


def _pin_dict(pin: Post) -> dict[str, Any]:
    return {"channel": pin.channel, "messageId": pin.target, "pinnedBy": pin.sender, "pinnedAt": pin.timestamp}


def chat_pin(ctx: Context, *, channel: str, message_id: str, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's chat_pin: pin a message (a pinned one stays pinned once: concurrent pins of one
    message write one line). Raises NotFound for the channel or message."""
    sender = speaker(ctx, worker_id)
    wanted = arguments.required(message_id, "messageId")
    store = board_store(ctx)
    target = known_channel(ctx, store.people(), channel)
    with store.thread_lock("chat", target.id):
        posts, _ = store.read_channel(target.id)
        _message(posts, wanted, target.id)
        existing = next((pin for pin in threads.pins(posts) if pin.target == wanted), None)
        if existing is None:
            existing = Post(kind="pin", id=f"PIN-{ctx.new_ulid()}", channel=target.id, sender=sender, timestamp=event_time(ctx), target=wanted)
            store.append_record("chat", target.id, threads.post_to_record(existing))
            return {"success": True, "pin": _pin_dict(existing), "alreadyPinned": False}
    return {"success": True, "pin": _pin_dict(existing), "alreadyPinned": True}


def chat_unpin(ctx: Context, *, channel: str, message_id: str, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's chat_unpin: take a pin off (`unpinned: false` when the message was not pinned)."""
    sender = speaker(ctx, worker_id)
    wanted = arguments.required(message_id, "messageId")
    store = board_store(ctx)
    target = known_channel(ctx, store.people(), channel)
    with store.thread_lock("chat", target.id):
        posts, _ = store.read_channel(target.id)
        pinned = any(pin.target == wanted for pin in threads.pins(posts))
        if pinned:
            line = Post(kind="unpin", id=f"PIN-{ctx.new_ulid()}", channel=target.id, sender=sender, timestamp=event_time(ctx), target=wanted)
            store.append_record("chat", target.id, threads.post_to_record(line))
    return {"success": True, "channel": target.id, "messageId": wanted, "unpinned": pinned}


def chat_pins(ctx: Context, *, channel: str) -> dict[str, Any]:
    """The pinned messages of a channel, oldest pin first."""
    store = board_store(ctx)
    target = known_channel(ctx, store.people(), channel)
    posts, problems = store.read_channel(target.id)
    by_id = {p.id: p for p in threads.messages(posts)}
    rows = [{**_pin_dict(pin), "message": threads.message_to_dict(by_id[pin.target], 0) if pin.target in by_id else None} for pin in threads.pins(posts)]
    return with_problems({"channel": target.id, "pins": rows}, problems)


def chat_decision(ctx: Context, *, content: str, channel: str | None = None, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's chat_decision: propose a decision for a human (in `channel`, default general), with
    a message announcing it. A human answers with `moss board chat decide DEC approved|rejected`."""
    text = threads.check_content(content)
    sender = speaker(ctx, worker_id)
    store = board_store(ctx)
    target = known_channel(ctx, store.people(), channel or "general")
    decision_id = f"DEC-{ctx.new_ulid()}"
    stamp = event_time(ctx)
    line = Post(kind="decision", id=decision_id, channel=target.id, sender=sender, timestamp=stamp, content=text)
    store.append_record("chat", target.id, threads.post_to_record(line))
    note = Post(
        kind="message",
        id=f"MSG-{ctx.new_ulid()}",
        channel=target.id,
        sender=sender,
        timestamp=stamp,
        content=f"Decision proposed ({decision_id}): {text}",
        decision=decision_id,
    )
    store.append_record("chat", target.id, threads.post_to_record(note))
    log(ctx, store.read_project(), "DECISION_PROPOSED", worker=sender if sender not in (HUMAN, "agent") else None, decisionId=decision_id, channel=target.id)
    posts, _ = store.read_channel(target.id)
    decision = next(d for d in threads.decisions(posts) if d["id"] == decision_id)
    return {"success": True, "decision": decision}


def list_decisions(ctx: Context, *, status: str | None = None) -> dict[str, Any]:
    """Every decision proposed in any channel, oldest first (of one status: proposed,
    approved, rejected)."""
    wanted = arguments.choice(status, ("proposed", "approved", "rejected"), "status", upper=False) if status is not None else None
    by_channel, problems = _all_posts(ctx, _channel_ids(ctx))
    found = [d for posts in by_channel.values() for d in threads.decisions(posts) if wanted is None or d["status"] == wanted]
    found.sort(key=lambda d: (d["createdAt"] or "", d["id"]))
    return with_problems({"decisions": found, "count": len(found)}, problems)


def resolve_decision(ctx: Context, *, decision_id: str, verdict: str) -> dict[str, Any]:
    """A human approves or rejects a proposed decision (a verdict line, and a message that
    mentions its proposer). Raises NOT_ALLOWED for an agent, NotFound, INVALID_TRANSITION."""
    if ctx.actor != HUMAN_ACTOR:
        raise Conflict("decisions are approved by a human", code="NOT_ALLOWED", status=403)
    wanted = arguments.required(decision_id, "decisionId")
    answer = arguments.choice(verdict, ("APPROVED", "REJECTED"), "verdict")
    store = board_store(ctx)
    for channel_id in _channel_ids(ctx):
        with store.thread_lock("chat", channel_id):
            posts, _ = store.read_channel(channel_id)
            decision = next((d for d in threads.decisions(posts) if d["id"] == wanted), None)
            if decision is None:
                continue
            if decision["status"] != "proposed":
                raise Conflict(f"decision {wanted} is {decision['status']} already", code="INVALID_TRANSITION", details={"decisionId": wanted})
            stamp = event_time(ctx)
            line = Post(kind="verdict", id=f"VERDICT-{ctx.new_ulid()}", channel=channel_id, sender=HUMAN, timestamp=stamp, target=wanted, status=answer)
            store.append_record("chat", channel_id, threads.post_to_record(line))
            text = f"@{decision['proposedBy']} decision {wanted} {answer.lower()}: {decision['content']}"
            note = Post(
                kind="message", id=f"MSG-{ctx.new_ulid()}", channel=channel_id, sender=HUMAN, timestamp=stamp, content=text, mentions=threads.mentions_in(text)
            )
            store.append_record("chat", channel_id, threads.post_to_record(note))
            posts, _ = store.read_channel(channel_id)
        log(ctx, store.read_project(), f"DECISION_{answer}", decisionId=wanted, channel=channel_id)
        return {"success": True, "decision": next(d for d in threads.decisions(posts) if d["id"] == wanted)}
    raise NotFound(f"Decision not found: {wanted}", details={"decisionId": wanted})


# --------------------------------------------------------------------------- comments and questions


def add_comment(
    ctx: Context, *, task_id: str, content: str, worker_id: str | None = None, question: bool = False, reply_to: str | None = None
) -> dict[str, Any]:
    """Moe's add_comment: a comment on a task. With `question`, an agent asks a human: the
    task is blocked (QUESTION_PENDING for its steps and completion, not offered to claims)
    until a human comments (replying to it, or to nothing, which answers every open one).

    Returns `{success, taskId, commentId, totalComments, question, openQuestions, answered}`.
    Raises NotFound for the task or `replyTo`, InvalidRequest for a human's `question`.
    """
    task_id = arguments.required(task_id, "taskId")
    text = threads.check_content(content)
    author = speaker(ctx, worker_id)
    if question and author == HUMAN:
        raise InvalidRequest(
            "question marks an agent's question to a human; a human's comment is already a question for the agent", details={"field": "question"}
        )
    store = board_store(ctx)
    task = task_on_file(ctx, task_id)
    before, problems = store.read_comments(task_id)
    reply = arguments.optional(reply_to)
    if reply is not None and not any(c.id == reply for c in before):
        raise NotFound(f"comment {reply} not found on task {task_id}", details={"field": "replyTo", "commentId": reply})
    comment = threads.Comment(
        id=f"COMMENT-{ctx.new_ulid()}", task=task_id, author=author, content=text, timestamp=event_time(ctx), question=question, reply_to=reply
    )
    store.append_record("comments", task_id, threads.comment_to_record(comment))
    # The project as a load gives it (the defaults when project.md does not read), from the
    # sign of life's look when there was one.
    project = (_alive(ctx, author) or store.people()).project
    after, _ = store.read_comments(task_id)
    still = {c.id for c in threads.open_questions(after)}
    answered = [c.id for c in threads.open_questions(before) if c.id not in still]
    worker = author if author not in (HUMAN, "agent") else None
    log(ctx, project, "QUESTION_ASKED" if question else "TASK_COMMENT_ADDED", task=task, worker=worker, commentId=comment.id, answered=answered or None)
    result = {
        "success": True,
        "taskId": task_id,
        "commentId": comment.id,
        "totalComments": len(after),
        "question": question,
        "openQuestions": len(still),
        "answered": answered,
    }
    return with_problems(result, problems)


def list_comments(ctx: Context, *, task_id: str, max_content_chars: int | None = None) -> dict[str, Any]:
    """A task's comments, oldest first, with its open questions."""
    task_id = arguments.required(task_id, "taskId")
    max_chars = arguments.count(max_content_chars, "maxContentChars", default=0, minimum=0)
    store = board_store(ctx)
    task_on_file(ctx, task_id)
    comments, problems = store.read_comments(task_id)
    ordered = threads.in_time_order(comments)
    return with_problems(
        {
            "taskId": task_id,
            "comments": [threads.comment_to_dict(c, max_chars) for c in ordered],
            "openQuestions": [c.id for c in threads.open_questions(ordered)],
            "pendingQuestions": [c.id for c in threads.questions_for_agents(ordered)],
        },
        problems,
    )


def get_pending_questions(
    ctx: Context,
    *,
    epic_id: str | None = None,
    include_archived: bool = False,
    limit: int | None = None,
    max_questions_per_task: int | None = None,
    max_content_chars: int | None = None,
    awaiting: str = "agent",
) -> dict[str, Any]:
    """Moe's get_pending_questions: tasks with questions waiting for an answer. `awaiting`
    `agent` (Moe's): human comments after the last comment by anyone else; `human`: questions
    agents asked that no human answered yet (the tasks they block)."""
    side = arguments.choice(awaiting, ("agent", "human"), "awaiting", upper=False)
    count = arguments.count(limit, "limit", default=10, maximum=50)
    per_task = arguments.count(max_questions_per_task, "maxQuestionsPerTask", default=3, maximum=20)
    max_chars = arguments.count(max_content_chars, "maxContentChars", default=threads.DEFAULT_SHOWN_CHARS, maximum=threads.MAX_CONTENT_CHARS, minimum=0)
    store = board_store(ctx)
    board = store.load()
    epic = arguments.optional(epic_id)
    if epic:
        find_epic(board, epic)
    rows: list[dict[str, Any]] = []
    problems: list[MossError] = []
    for task_id in store.thread_names("comments"):
        task = board.tasks.get(task_id)
        if task is None or (task.status == "ARCHIVED" and not include_archived) or (epic and task.epic != epic):
            continue
        comments, trouble = store.read_comments(task_id)
        problems.extend(trouble)
        waiting = threads.questions_for_agents(comments) if side == "agent" else threads.open_questions(comments)
        if not waiting:
            continue
        shown = []
        for comment in waiting[:per_task]:
            text, cut = threads.shown(comment.content, max_chars)
            shown.append({"commentId": comment.id, "author": comment.author, "content": text, "timestamp": comment.timestamp, **cut})
        rows.append(
            {
                "taskId": task.id,
                "title": task.title,
                "status": task.status,
                "epicId": task.epic or None,
                "assignedWorkerId": task.assigned_worker,
                "questions": shown,
                "totalQuestions": len(waiting),
                "omittedQuestions": max(0, len(waiting) - len(shown)),
            }
        )
    rows.sort(key=lambda row: (board.tasks[row["taskId"]].order, row["taskId"]))
    page = rows[:count]
    truncated = sum(1 for row in page for q in row["questions"] if q.get("contentTruncated"))
    result: dict[str, Any] = {
        "awaiting": side,
        "count": len(page),
        "totalMatches": len(rows),
        "tasks": page,
        "pagination": {"limit": count, "returned": len(page), "total": len(rows), "hasMore": len(page) < len(rows)},
        "truncatedQuestions": truncated,
    }
    if truncated or any(row["omittedQuestions"] for row in page):
        result["hint"] = "The answer is compact: raise maxQuestionsPerTask, or set maxContentChars to 0 for whole texts."
    return with_problems(result, problems)
