"""Conversations on the board: chat channels and a task's comments and questions, each thread
one JSON Lines file that git merges by union.

Core layer (pure: decoded lines in, records and decisions out; no I/O, no clock). A chat
channel's file holds every line of its history, of these kinds (a line without `kind` is a
message, as in Moe's `messages/<channel>.jsonl`):

    message   {id MSG-…, channel, sender, content, replyTo, mentions, timestamp}
    channel   a custom channel's creation {name, sender}
    join      a worker joined the channel {sender}
    pin/unpin {target: the message id, sender}
    decision  a proposal for a human {id DEC-…, content, sender}, also shown as a message
    verdict   a human's answer to a decision {target: the decision id, status APPROVED|REJECTED}

Every state of a channel (members, pins, decisions) is a fold over its lines in file order, so
two clones that both appended merge into one history without a conflict. Channels `general`,
`architects`, `workers`, `qa`, `governors` always exist, as does the channel of every task and
epic (its id is the task's or epic's id); other channels are created by name.

A task's comment file holds comments `{id COMMENT-…, taskId, author, content, timestamp,
question?, replyTo?}`. Two kinds of question come out of it: Moe's pending questions (comments
by a human after the last comment by anyone else: an agent should answer), and questions an
agent asked a human (`question: true`), which block the task until a human answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moss_files.board.model import is_valid_name
from moss_files.foundation import formats
from moss_files.foundation.errors import InvalidDocument, InvalidRequest

HUMAN = "human"
SYSTEM = "system"
MAX_CONTENT_CHARS = 10_000
DEFAULT_SHOWN_CHARS = 1000
ROLE_CHANNELS = {"architects": "architect", "workers": "worker", "qa": "qa", "governors": "governor"}
CANONICAL_CHANNELS = ("general", *ROLE_CHANNELS)
POST_KINDS = ("message", "channel", "join", "pin", "unpin", "decision", "verdict")
# @-mentions that name a group rather than one worker (`@all`, or a role by either spelling).
GROUPS = {"all": None, "architects": "architect", "architect": "architect", "workers": "worker", "qa": "qa", "governors": "governor", "governor": "governor"}
CONTINUE = "@continue"  # a message holding it lets agents mention each other again

_MENTION = re.compile(r"(?<![\w@])@([A-Za-z0-9][A-Za-z0-9._-]*)")
_CUSTOM = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_ITEM_CHANNEL = re.compile(r"(?i)(task|epic)-")


# --------------------------------------------------------------------------- channels


@dataclass(frozen=True, slots=True)
class Channel:
    """A chat channel: `id` is its file's stem and the name agents use (with or without `#`)."""

    id: str
    type: str  # general | role | task | epic | custom
    linked: str | None = None  # the task or epic a task/epic channel belongs to
    created: str | None = None
    created_by: str | None = None


def channel_of(channel_id: str) -> Channel:
    """The channel `channel_id` names, by its form: a canonical name, a task or epic id, or a
    custom name."""
    if channel_id == "general":
        return Channel(channel_id, "general")
    if channel_id in ROLE_CHANNELS:
        return Channel(channel_id, "role")
    if _ITEM_CHANNEL.match(channel_id):
        kind = channel_id.split("-", 1)[0].lower()
        return Channel(channel_id, kind, linked=channel_id)
    return Channel(channel_id, "custom")


def channel_ref(ref: str) -> str:
    """A channel reference as agents write it (`#general`, `General`, `TASK-…`) as the id its
    file goes by. Raises InvalidRequest for a name no channel can have."""
    text = ref.strip().lstrip("#").strip()
    if _ITEM_CHANNEL.match(text):
        if not is_valid_name(text):
            raise InvalidRequest(f"channel {ref!r} is not a task or epic id", details={"field": "channel"})
        return text
    name = text.lower()
    if not _CUSTOM.fullmatch(name):
        raise InvalidRequest(
            f"channel {ref!r}: a channel name is 1-64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", details={"field": "channel"}
        )
    return name


def check_custom_name(name: str) -> str:
    """A new custom channel's id. Raises InvalidRequest for a name taken by a built-in
    channel's form (canonical names, task and epic ids)."""
    channel_id = channel_ref(name)
    if channel_id in CANONICAL_CHANNELS or _ITEM_CHANNEL.match(channel_id):
        raise InvalidRequest(f"#{channel_id} is a built-in channel; it exists already", details={"field": "name"})
    return channel_id


# --------------------------------------------------------------------------- lines


@dataclass(frozen=True, slots=True)
class Post:
    """One line of a channel's file."""

    kind: str
    id: str
    channel: str
    sender: str
    timestamp: str
    content: str = ""
    reply_to: str | None = None
    mentions: tuple[str, ...] = ()
    target: str | None = None  # the message a pin names, the decision a verdict answers
    status: str | None = None  # a verdict's APPROVED or REJECTED
    decision: str | None = None  # on a message that announces a decision: its id


def _fail(message: str, path: Path | str | None, line: int | None) -> InvalidDocument:
    return InvalidDocument(message, code="SCHEMA_ERROR", path=path, line=line)


def _texts(record: Mapping[str, Any], keys: Sequence[str], path: Path | str | None, line: int | None) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for key in keys:
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            raise _fail(f"field {key!r} must be a string", path, line)
        found[key] = value
    return found


def parse_post(record: Any, channel: str, path: Path | str | None = None, line: int | None = None) -> Post:
    """A Post from one decoded JSONL record of `channel`'s file. Raises InvalidDocument
    SCHEMA_ERROR for a record that is not one."""
    if not isinstance(record, dict):
        raise _fail("a chat line must be a JSON object", path, line)
    formats.check_record("chat", record, path, line)
    texts = _texts(record, ("kind", "id", "sender", "content", "timestamp", "replyTo", "target", "status", "decisionId"), path, line)
    kind = texts["kind"] or "message"
    if kind not in POST_KINDS:
        raise _fail(f"chat line kind {kind!r} is not one of {', '.join(POST_KINDS)}", path, line)
    if not texts["id"] or not texts["sender"] or not texts["timestamp"]:
        raise _fail("a chat line needs id, sender and timestamp", path, line)
    mentions = record.get("mentions") or []
    if not isinstance(mentions, list) or not all(isinstance(item, str) for item in mentions):
        raise _fail("field 'mentions' must be a list of strings", path, line)
    return Post(
        kind=kind,
        id=texts["id"],
        channel=channel,
        sender=texts["sender"],
        timestamp=texts["timestamp"],
        content=texts["content"] or "",
        reply_to=texts["replyTo"],
        mentions=tuple(mentions),
        target=texts["target"],
        status=texts["status"],
        decision=texts["decisionId"],
    )


def post_to_record(post: Post) -> dict[str, Any]:
    """A Post as its JSONL line stores it: a message in Moe's shape, other kinds with `kind`."""
    record: dict[str, Any] = {"id": post.id}
    if post.kind != "message":
        record["kind"] = post.kind
    record["channel"] = post.channel
    record["sender"] = post.sender
    if post.kind in ("message", "decision", "channel") or post.content:
        record["content"] = post.content
    if post.kind == "message":
        record["replyTo"] = post.reply_to
        record["mentions"] = list(post.mentions)
        if post.decision:
            record["decisionId"] = post.decision
    for key, value in (("target", post.target), ("status", post.status)):
        if value is not None:
            record[key] = value
    record["timestamp"] = post.timestamp
    return record


def check_content(content: str | None, field: str = "content") -> str:
    """Message or comment text: not blank, at most MAX_CONTENT_CHARS. Raises InvalidRequest."""
    if content is None or not content.strip():
        raise InvalidRequest(f"{field} is required", details={"field": field})
    text = content.strip()
    if len(text) > MAX_CONTENT_CHARS:
        raise InvalidRequest(f"{field} is {len(text)} characters; at most {MAX_CONTENT_CHARS} are allowed", details={"field": field})
    return text


def shown(text: str, max_chars: int) -> tuple[str, dict[str, Any]]:
    """`text` cut to `max_chars` (0 keeps all), and Moe's truncation fields when it was cut."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text, {}
    return text[:max_chars].rstrip() + "…", {"contentTruncated": True, "contentOriginalLength": len(text)}


def message_to_dict(post: Post, max_chars: int = DEFAULT_SHOWN_CHARS) -> dict[str, Any]:
    """A message as chat_read returns it (Moe's shape)."""
    content, cut = shown(post.content, max_chars)
    data: dict[str, Any] = {
        "id": post.id,
        "channel": post.channel,
        "sender": post.sender,
        "content": content,
        "replyTo": post.reply_to,
        "mentions": list(post.mentions),
        "timestamp": post.timestamp,
        **cut,
    }
    if post.decision:
        data["decisionId"] = post.decision
    return data


# --------------------------------------------------------------------------- mentions and routing


def mentions_in(content: str) -> tuple[str, ...]:
    """The names @-mentioned in `content`, each once, in order (`@continue` excluded)."""
    names = [match.group(1) for match in _MENTION.finditer(content)]
    return tuple(dict.fromkeys(name for name in names if name.lower() != "continue"))


def agent_hops(posts: Sequence[Post]) -> int:
    """How many agent messages follow the last human message (or `@continue`) in a channel."""
    hops = 0
    for post in reversed([p for p in posts if p.kind == "message"]):
        if post.sender == HUMAN or CONTINUE in post.content.lower():
            break
        if post.sender != SYSTEM:
            hops += 1
    return hops


def routing_targets(post: Post, roles: Mapping[str, str | None], *, paused: bool = False) -> tuple[str, ...]:
    """The workers a message wakes: those it @-mentions by name, every worker of a mentioned
    group (`@all`, `@workers`, …), and nobody when the channel's agent-to-agent hops reached
    the limit and the sender is an agent (Moe's loop guard; a human's message always routes).

    `roles` maps every known worker to its role (None when it has none).
    """
    if paused and post.sender not in (HUMAN, SYSTEM):
        return ()
    targets: list[str] = []
    for name in post.mentions:
        group = name.lower()
        if group in GROUPS:
            wanted = GROUPS[group]
            targets.extend(worker for worker, role in roles.items() if wanted is None or role == wanted)
        else:
            targets.append(name)
    return tuple(dict.fromkeys(target for target in targets if target != post.sender))


# --------------------------------------------------------------------------- folds over a channel


def messages(posts: Iterable[Post]) -> list[Post]:
    """The messages of a channel, in file order."""
    return [post for post in posts if post.kind == "message"]


def after(posts: Sequence[Post], cursor: str | None) -> list[Post]:
    """The messages after the one with id `cursor`, in file order. A cursor not in the file (a
    hand edit removed it) delivers everything: a duplicate is better than a loss."""
    shown_messages = messages(posts)
    if cursor is None:
        return shown_messages
    for index, post in enumerate(shown_messages):
        if post.id == cursor:
            return shown_messages[index + 1 :]
    return shown_messages


def members(posts: Iterable[Post]) -> list[str]:
    """Workers who joined the channel, in the order they joined."""
    return list(dict.fromkeys(post.sender for post in posts if post.kind == "join"))


def pins(posts: Iterable[Post]) -> list[Post]:
    """The pin lines in force: each message pinned and not unpinned since, oldest pin first."""
    current: dict[str, Post] = {}
    for post in posts:
        if post.kind == "pin" and post.target and post.target not in current:
            current[post.target] = post
        elif post.kind == "unpin" and post.target:
            current.pop(post.target, None)
    return list(current.values())


def decisions(posts: Iterable[Post]) -> list[dict[str, Any]]:
    """Every decision proposed in a channel, with its verdict when a human gave one."""
    found: dict[str, dict[str, Any]] = {}
    announced: dict[str, str] = {}
    lines = list(posts)
    for post in lines:
        if post.kind == "message" and post.decision:
            announced[post.decision] = post.id
    for post in lines:
        if post.kind == "decision":
            found.setdefault(
                post.id,
                {
                    "id": post.id,
                    "proposedBy": post.sender,
                    "content": post.content,
                    "status": "proposed",
                    "approvedBy": None,
                    "channel": post.channel,
                    "messageId": announced.get(post.id),
                    "createdAt": post.timestamp,
                    "resolvedAt": None,
                },
            )
        elif post.kind == "verdict" and post.target in found and found[post.target]["status"] == "proposed":
            decision = found[post.target]
            decision["status"] = (post.status or "").lower()
            decision["approvedBy"] = post.sender
            decision["resolvedAt"] = post.timestamp
    return list(found.values())


def created_line(posts: Iterable[Post]) -> Post | None:
    """The line that created a custom channel (the first, when two clones both created it)."""
    return next((post for post in posts if post.kind == "channel"), None)


# --------------------------------------------------------------------------- comments and questions


@dataclass(frozen=True, slots=True)
class Comment:
    """One comment on a task; `question` marks an agent's question to a human."""

    id: str
    task: str
    author: str
    content: str
    timestamp: str
    question: bool = False
    reply_to: str | None = None


def parse_comment(record: Any, task_id: str, path: Path | str | None = None, line: int | None = None) -> Comment:
    """A Comment from one decoded JSONL record. Raises InvalidDocument SCHEMA_ERROR."""
    if not isinstance(record, dict):
        raise _fail("a comment line must be a JSON object", path, line)
    formats.check_record("comments", record, path, line)
    texts = _texts(record, ("id", "author", "content", "timestamp", "replyTo"), path, line)
    if not texts["id"] or not texts["author"] or not texts["timestamp"] or texts["content"] is None:
        raise _fail("a comment needs id, author, content and timestamp", path, line)
    question = record.get("question", False)
    if not isinstance(question, bool):
        raise _fail("field 'question' must be true or false", path, line)
    return Comment(
        id=texts["id"],
        task=task_id,
        author=texts["author"],
        content=texts["content"],
        timestamp=texts["timestamp"],
        question=question,
        reply_to=texts["replyTo"],
    )


def comment_to_record(comment: Comment) -> dict[str, Any]:
    """A Comment as its JSONL line stores it (Moe's comment, with `question` and `replyTo`)."""
    record: dict[str, Any] = {"id": comment.id, "taskId": comment.task, "author": comment.author, "content": comment.content, "timestamp": comment.timestamp}
    if comment.question:
        record["question"] = True
    if comment.reply_to:
        record["replyTo"] = comment.reply_to
    return record


def comment_to_dict(comment: Comment, max_chars: int = 0) -> dict[str, Any]:
    """A comment as the tools return it."""
    content, cut = shown(comment.content, max_chars)
    return {
        "id": comment.id,
        "author": comment.author,
        "content": content,
        "timestamp": comment.timestamp,
        "question": comment.question,
        "replyTo": comment.reply_to,
        **cut,
    }


def in_time_order(comments: Iterable[Comment]) -> list[Comment]:
    """Comments by time, then file position (a union merge may interleave two clones' lines)."""
    return [comment for _, _, comment in sorted((c.timestamp, index, c) for index, c in enumerate(comments))]


def questions_for_agents(comments: Iterable[Comment]) -> list[Comment]:
    """Moe's pending questions: the human comments after the last comment by anyone else."""
    ordered = in_time_order(comments)
    last_other = max((index for index, c in enumerate(ordered) if c.author != HUMAN), default=-1)
    return [c for c in ordered[last_other + 1 :] if c.author == HUMAN]


def open_questions(comments: Iterable[Comment]) -> list[Comment]:
    """Questions agents asked a human that no human has answered: a human comment replying to
    one answers it, and a human comment replying to nothing answers every question before it."""
    ordered = in_time_order(comments)
    waiting: dict[str, Comment] = {}
    for comment in ordered:
        if comment.author != HUMAN:
            if comment.question:
                waiting[comment.id] = comment
        elif comment.reply_to:
            waiting.pop(comment.reply_to, None)
        else:
            waiting.clear()
    return list(waiting.values())
