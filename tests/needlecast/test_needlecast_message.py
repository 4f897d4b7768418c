"""Needlecast message blocks: reading both dialects, the single-file rule, and the writer's promise."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moss_files.foundation import yaml_reader as yamlio
from moss_files.foundation.errors import InvalidDocument, InvalidRequest
from needlecast import message as msg
from needlecast.message import Message

# The two real dialects, as documented for cortical-stack V1 and needlecast V1.
CAPITALISED = """# Inbox

---
From: manager
Type: task
Time: 2026-01-19T10:30:00Z
---
Please implement the user authentication feature.
Priority: high

---
From: agent-frontend
Type: question
Time: 2026-01-19T11:00:00Z
---
What endpoint should I use for login?
"""

LOWERCASE = """---
id: msg-abc123
from: bob
to: alice
thread: auth-help
type: question
time: 2026-01-21T10:00:00Z
---
Need help understanding the JWT implementation.
Can you review my approach?

---
id: msg-abc124
from: envoy
to: alice
type: directive
time: 2026-01-21T09:30:00Z
---
Please prioritize the authentication module.

"""


def parse_all(text: str) -> list[Message]:
    return [msg.parse_block(block) for block in msg.split_blocks(text).blocks]


def test_capitalised_dialect_reads_keys_in_any_case() -> None:
    messages = parse_all(CAPITALISED)
    assert [m.sender for m in messages] == ["manager", "agent-frontend"]
    assert messages[0].type == "task"
    assert messages[0].time == "2026-01-19T10:30:00Z"  # a string, never a datetime
    assert messages[0].body == "Please implement the user authentication feature.\nPriority: high\n"
    assert all(m.capitalised for m in messages)
    assert msg.split_blocks(CAPITALISED).preamble == "# Inbox\n\n"


def test_lowercase_dialect_with_ids_threads_and_recipients() -> None:
    first, second = parse_all(LOWERCASE)
    assert (first.id, first.sender, first.to, first.thread, first.type) == ("msg-abc123", "bob", ("alice",), "auth-help", "question")
    assert first.body == "Need help understanding the JWT implementation.\nCan you review my approach?\n"
    assert second.id == "msg-abc124" and second.thread is None
    assert not first.capitalised


def test_multi_paragraph_bodies_fences_and_rules_survive() -> None:
    body = "First paragraph.\n\nSecond paragraph.\n\n```yaml\n---\nkey: value\n---\n```\n\n---\n\nAfter a rule.\n"
    text = msg.render_block(Message(id="m1", sender="a", to=("b",), type="task", body=body))
    text += msg.render_block(Message(id="m2", sender="a", to=("b",), type="done", body="next"))
    first, second = parse_all(text)
    assert first.body == body
    assert second.id == "m2" and second.body == "next\n"


def test_hand_written_rule_in_a_body_is_body_text() -> None:
    text = "---\nfrom: a\nto: b\ntype: task\n---\nabove\n\n---\n\nbelow\n---\nnot a header\n---\nend\n"
    (only,) = parse_all(text)
    assert only.body == "above\n\n---\n\nbelow\n---\nnot a header\n---\nend\n"


def test_a_fence_pair_around_non_message_keys_is_not_a_block() -> None:
    text = "---\nfrom: a\nto: b\n---\nA document:\n---\ntitle: Plan\n---\nbody\n"
    (only,) = parse_all(text)
    assert "title: Plan" in only.body


def test_list_and_all_recipients_and_comma_lists() -> None:
    text = "---\nfrom: a\nto: [b, c]\n---\nx\n\n---\nfrom: a\nTo: ALL\n---\ny\n\n---\nFrom: a\nTo: b, c , b\n---\nz\n"
    listed, broadcast, commas = parse_all(text)
    assert listed.to == ("b", "c")
    assert broadcast.to == ("all",)
    assert commas.to == ("b", "c")


def test_unknown_keys_are_kept_in_order_and_written_back() -> None:
    text = "---\nid: m\nfrom: a\nto: b\npriority: high\nlabels: [x, y]\ntype: task\nX-Trace: 7\n---\nbody\n"
    (m,) = parse_all(text)
    assert list(m.extra.items()) == [("priority", "high"), ("labels", ["x", "y"]), ("X-Trace", 7)]
    (again,) = parse_all(msg.render_block(m))
    assert again == m


def test_written_in_the_dialect_asked_for() -> None:
    m = Message(id="m", sender="a", to=("b",), type="task", time="2026-01-21T10:00:00Z", body="x")
    upper = msg.render_block(m, capitalised=True)
    assert upper.splitlines()[1:6] == ["ID: m", "From: a", "To: b", "Type: task", "Time: 2026-01-21T10:00:00Z"]
    (back,) = parse_all(upper)
    assert back.capitalised and back.sender == "a"
    assert msg.dialect_of(msg.split_blocks(upper)) is True
    assert msg.dialect_of(msg.split_blocks(LOWERCASE)) is False


def test_crlf_file_is_read() -> None:
    text = LOWERCASE.replace("\n", "\r\n")
    first, second = parse_all(text)
    assert first.id == "msg-abc123" and second.id == "msg-abc124"
    assert msg.split_blocks(text).newline == "\r\n"


def test_bad_header_reports_the_file_line() -> None:
    text = "# Outbox\n\n---\nfrom: a\nto: [b\n---\nx\n"
    (block,) = msg.split_blocks(text).blocks
    with pytest.raises(InvalidDocument) as caught:
        msg.parse_block(block, path="outbox.md")
    assert caught.value.code == "FRONTMATTER_SYNTAX"
    assert caught.value.path == "outbox.md"
    assert caught.value.line is not None and 4 <= caught.value.line <= 6


def test_wrong_recipient_type_is_message_invalid() -> None:
    (block,) = msg.split_blocks("---\nfrom: a\nto: {b: 1}\n---\nx\n").blocks
    with pytest.raises(InvalidDocument) as caught:
        msg.parse_block(block)
    assert caught.value.code == "MESSAGE_INVALID"


def test_writer_refuses_text_no_file_can_hold() -> None:
    with pytest.raises(InvalidRequest) as caught:
        msg.render_block(Message(id="m", sender="a", to=("b",), body="nul\x00"))
    assert caught.value.code == "MESSAGE_INVALID"


def test_file_per_message_document_keeps_the_body_verbatim() -> None:
    m = Message(id="m", sender="a", to=("b", "c"), type="task", body="one\n---\ntwo\n\n\n")
    text = msg.render_message_document(m)
    assert msg.parse_message_document(text) == m
    with pytest.raises(InvalidDocument) as caught:
        msg.parse_message_document("no header\n")
    assert caught.value.code == "MESSAGE_INVALID"


def test_derived_ids_are_stable_and_distinct() -> None:
    raw = "---\nto: b\n---\nsame\n"
    assert msg.derive_id("a", raw, "0") == msg.derive_id("a", raw + "\n\n", "0")
    assert msg.derive_id("a", raw, "0") != msg.derive_id("a", raw, "1")
    assert msg.derive_id("a", raw, "0") != msg.derive_id("z", raw, "0")


def test_json_shape_round_trip() -> None:
    m = Message(id="m", sender="a", to=("b",), thread="t", type="task", time="2026-01-21T10:00:00Z", body="x\n", extra={"k": [1]})
    data = msg.message_to_dict(m)
    assert set(data) == {"id", "from", "to", "thread", "type", "time", "body", "extra"}
    assert msg.message_from_dict(data) == m


# --------------------------------------------------------------------------- properties

body_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=300)
tricky_lines = st.sampled_from(["---", "\\---", "\\\\---", "---\r", "id: x", "from: a", "to: b", "", "```", "  ---", "--- "])
bodies = st.one_of(
    body_text,
    st.lists(st.one_of(tricky_lines, body_text.map(lambda t: t.replace("\n", " "))), max_size=12).map("\n".join),
)
names = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=20)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), names, st.sampled_from(["yes", "no", "null", "0777", "1.5", "- x", "a: b", "#c", "---"])
)
extras = st.dictionaries(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-XYZ", min_size=1, max_size=8).filter(lambda k: k.lower() not in msg.KNOWN_KEYS),
    st.one_of(scalars, st.lists(scalars, max_size=3)),
    max_size=3,
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    to = tuple(dict.fromkeys(n.strip() for n in draw(st.lists(names, min_size=1, max_size=3)) if n.strip() and "," not in n))
    return Message(
        id=draw(st.one_of(st.none(), names)),
        sender=draw(st.one_of(st.none(), names)),
        to=tuple(n.lower() if n.lower() in msg.RESERVED_NAMES else n for n in to) or ("b",),
        thread=draw(st.one_of(st.none(), names)),
        type=draw(st.one_of(st.none(), st.sampled_from(msg.TYPES), names)),
        time=draw(st.one_of(st.none(), st.just("2026-01-21T10:00:00Z"))),
        body=draw(bodies),
        extra=draw(extras),
    )


def expected(m: Message) -> Message:
    return msg.with_changes(m, body=msg.normalize_body(m.body), capitalised=False)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages(), min_size=1, max_size=4), st.sampled_from(["", "# Inbox\n\n", "# Outbox\n\n<!-- notes -->\n"]))
def test_writer_never_produces_a_file_the_reader_splits_differently(batch: list[Message], preamble: str) -> None:
    text = msg.join_blocks(preamble, [msg.render_block(m) for m in batch])
    mailfile = msg.split_blocks(text)
    assert len(mailfile.blocks) == len(batch)
    assert mailfile.preamble + "".join(b.raw for b in mailfile.blocks) == text
    assert [msg.parse_block(b) for b in mailfile.blocks] == [expected(m) for m in batch]


@settings(max_examples=200)
@given(messages())
def test_header_values_read_back_exactly(m: Message) -> None:
    header = msg.render_header(m)
    assert "\n\n" not in header and "\n---\n" not in "\n" + header
    assert list(yamlio.load_fast(header).items()) == msg.header_items(m)


@settings(max_examples=200)
@given(body_text)
def test_escaping_round_trips(body: str) -> None:
    assert msg.unescape_body(msg.escape_body(body)) == body
    assert all(line.rstrip("\r") != "---" for line in msg.escape_body(body).split("\n"))


def test_a_header_without_its_closing_fence_is_a_block_with_that_problem() -> None:
    """Issue 24: a hand-written block missing its closing `---` (or whose first header line is
    not `key: value`) was read as part of the message before it, or of the preamble, and
    nothing reported it. It is a block of its own, which reads as its problem."""
    text = (
        "# Outbox\n\n---\nid: m1\nto: bob\n---\nfirst\n\n"
        "---\nid: m2\nto: bob\nforgot the closing fence\n\n"
        "---\n# a note first\nid: m3\nto: bob\n---\nthird\n\n"
        "---\nto:\n  - bob\nfrom: me\n\n"
        "---\nid: m5\nto: bob\n---\nfifth\n"
    )
    mailfile = msg.split_blocks(text)
    assert mailfile.preamble == "# Outbox\n\n"
    assert mailfile.preamble + "".join(block.raw for block in mailfile.blocks) == text
    assert [block.malformed[0] if block.malformed else None for block in mailfile.blocks] == [
        None,
        "FRONTMATTER_UNCLOSED",
        "MESSAGE_INVALID",
        "FRONTMATTER_UNCLOSED",
        None,
    ]
    first, unclosed, noted, listed, fifth = mailfile.blocks
    assert msg.parse_block(first).body == "first\n"  # no longer carries the next block's text
    assert unclosed.raw == "---\nid: m2\nto: bob\nforgot the closing fence\n\n"
    for block, line in ((unclosed, 9), (noted, 14), (listed, 21)):
        with pytest.raises(InvalidDocument) as caught:
            msg.parse_block(block, path="outbox.md")
        assert (caught.value.code, caught.value.line) == (block.malformed[0], line)  # the line of its `---`
    assert msg.parse_block(fifth).id == "m5"
    # The first block of a file, before any message, is reported too (it was preamble).
    (alone,) = msg.split_blocks("# Outbox\n\n---\nfrom: me\nto: bob\nhello\n").blocks
    assert alone.malformed is not None and alone.malformed[0] == "FRONTMATTER_UNCLOSED" and alone.line == 3


def test_rules_and_documents_in_bodies_are_still_body_text() -> None:
    """What the malformed-start rule leaves alone: a rule followed by text, by keys that are
    no message keys, or by a blank line; a non-key first line with no message key or no
    closing fence before a blank line."""
    text = (
        "---\nid: m1\nto: bob\n---\nabove\n---\nPriority: high\nnote: kept\n\n"
        "---\n\nto: nobody, a paragraph\n\n---\nSome text\nto: x, y\n\nmore\n---\ntitle: Plan\n---\nend\n"
    )
    (only,) = parse_all(text)
    assert only.body.endswith("---\ntitle: Plan\n---\nend\n") and "Priority: high" in only.body


escaped_heavy = st.text(alphabet=st.sampled_from(['"', "\\", "\x01", "\x7f", "\u0085", "\u2028", "\U0001f600", "é", "-", "\n", "a"]), max_size=40)


@settings(max_examples=400)
@given(messages(), escaped_heavy, escaped_heavy)
def test_the_size_bound_is_never_below_the_rendered_block(m: Message, header_text: str, body_tail: str) -> None:
    """check_size skips rendering a block when `block_size_bound` is under the limit: the bound
    must hold for every message, the costliest characters to quote and escape included."""
    for message in (m, msg.with_changes(m, thread=header_text.replace("\n", " ") or None, body=m.body + body_tail, extra={**m.extra, "note": [header_text]})):
        bound = msg.block_size_bound(message)
        size = len(msg.render_block(message).encode("utf-8"))
        assert bound is None or bound >= size, (bound, size)


def test_a_message_over_the_limit_is_still_refused() -> None:
    """The bound only spares the rendering of a message far below the limit."""
    near = Message(id="m", sender="a", to=("b",), body="x" * (msg.MAX_MESSAGE_BYTES - 200))
    msg.check_size(near)  # the bound is over the limit here, so this one was rendered and measured
    assert msg.block_size_bound(near) is not None and msg.block_size_bound(near) > msg.MAX_MESSAGE_BYTES  # type: ignore[operator]
    with pytest.raises(InvalidRequest) as caught:
        msg.check_size(Message(id="m", sender="a", to=("b",), body="x" * msg.MAX_MESSAGE_BYTES))
    assert caught.value.code == "MESSAGE_TOO_LARGE"
