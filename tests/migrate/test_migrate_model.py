"""The pure planner every migration shares: times, derived ids, provenance keys, decisions."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moss_files.board import files as board_files
from moss_files.board.model import Task
from moss_files.foundation import document
from moss_files.foundation import yaml_editor as yamlrt
from moss_files.foundation.errors import Conflict
from moss_files.foundation.ids import PREFIXED_RE
from moss_files.migrate.ledger import DROPPED, EXAMPLES, KEPT, MAPPED, Account, Fate, _add, shown, summarize
from moss_files.migrate.model import (
    CREATE,
    SKIP,
    Builder,
    Candidate,
    Where,
    _block,
    _block_dumped,
    _example_values_only,
    decide,
    derived_id,
    iso_time,
    item_to_dict,
    ledger,
    losses,
    provenance_of,
    source_error,
    with_provenance,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-02-03T11:19:51.668611800Z", "2026-02-03T11:19:51Z"),  # Moe: seven fraction digits
        ("2026-01-22T08:48:53.156Z", "2026-01-22T08:48:53Z"),
        ("2026-01-17", "2026-01-17T00:00:00Z"),  # LoopFlow 0.1: a day alone
        ("2026-08-17 07:26", "2026-08-17T07:26:00Z"),  # Backlog.md
        ("2026-03-02T09:00:00+02:00", "2026-03-02T07:00:00Z"),
        ("2025-12-13T22:02:14.948353-08:00", "2025-12-14T06:02:14Z"),  # Beads: six digits and an offset
        ("2026-01-22t08:48:53z", "2026-01-22T08:48:53Z"),  # lower-case T and Z
        ("2026-01-22T08:48:53 Z", "2026-01-22T08:48:53Z"),  # a space before the zone
        ("0001-01-01T00:00:00+08:00", None),  # before year 1 in UTC
        ("9999-12-31T23:59:59-01:00", None),  # after year 9999 in UTC
        (1737260000, "2025-01-19T04:13:20Z"),  # Moss: unix seconds
        (1737260000123, "2025-01-19T04:13:20Z"),  # milliseconds
        ("next tuesday", None),
        ("", None),
        (None, None),
        (True, None),
    ],
)
def test_times_from_every_source_read_as_rfc3339_utc(value: object, expected: str | None) -> None:
    assert iso_time(value) == expected


@settings(max_examples=300, deadline=None)
@given(
    moment=st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    zone=st.sampled_from(["", "Z", "z", "+00:00", "-00:00", "+0000", "+05:30", "-08:00"]),
    fraction=st.sampled_from(["", ".5", ".123456", ".1234567"]),
)
def test_a_time_reads_as_converting_and_formatting_read_it(moment: datetime, zone: str, fraction: str) -> None:
    """`_utc_text`'s shortcut (the UTC time's ISO text) gives what converting to UTC and
    `strftime` give, years before 1000 (which `strftime` writes unpadded) included."""
    text = f"{moment.isoformat(timespec='seconds')}{fraction}{zone}"
    offset = {"": "+00:00", "Z": "+00:00", "z": "+00:00", "+0000": "+00:00"}.get(zone, zone)
    moment_there = datetime.fromisoformat(f"{moment.isoformat(timespec='seconds')}{offset}")
    try:
        expected: str | None = moment_there.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError:
        expected = None
    assert iso_time(text) == expected


@pytest.mark.parametrize("value", [4, True, None, 1.5, ["a", "é"], {"b": [1, {"c": "x  y\nz"}]}, {"when": datetime(2026, 1, 2)}, "x" * 300])
def test_a_shown_value_is_its_json_as_json_dumps_writes_it(value: object) -> None:
    """`shown` encodes with one encoder made once: the text `json.dumps` with its options gives."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    assert shown(value) == (text if len(text) <= 120 else text[:119] + "…")


class _Text(str):
    pass


@pytest.mark.parametrize(
    "value", [None, "", "x", _Text(""), _Text("x"), (), ("a",), {}, {"a": 1}, MappingProxyType({}), MappingProxyType({"a": 1}), 0, 1, 0.0, False, True, [], [0]]
)
def test_a_board_file_leaves_out_the_keys_the_general_emptiness_rule_leaves_out(value: object) -> None:
    """`files._empty` checks the common exact types first; its answer is the general rule's."""
    general = (
        not value
        if isinstance(value, Mapping)
        else value is None or value is False or value == "" or value == () or value == 0 and not isinstance(value, bool | float)
    )
    assert board_files._empty(value) is general


def test_derived_ids_are_our_id_form_and_the_same_in_every_clone() -> None:
    first = derived_id("TASK", "moe:proj-1", "task", "task-f3b6132e", "20260206")
    assert PREFIXED_RE.match(first)
    assert first == derived_id("TASK", "moe:proj-1", "task", "task-f3b6132e", "20260206")
    assert first.startswith("TASK-20260206-")
    others = {
        derived_id("TASK", "moe:proj-2", "task", "task-f3b6132e", "20260206"),
        derived_id("TASK", "moe:proj-1", "epic", "task-f3b6132e", "20260206"),
        derived_id("TASK", "moe:proj-1", "task", "task-f3b6132f", "20260206"),
    }
    assert first not in others and len(others) == 3


def test_provenance_keys_go_at_the_end_and_the_board_still_reads_the_file() -> None:
    task = Task(id="TASK-20260101-aaaaaaaa", epic="EPIC-20260101-bbbbbbbb", title="A: with a colon", description="Body\n\nsecond paragraph")
    text = with_provenance(board_files.render_task(task), "moe:proj-1", "task-1", {"branch": "x", "comments": [{"author": "human"}]})
    doc = document.parse(text)
    assert list(doc.meta)[-3:] == ["imported_from", "source_id", "source_fields"]
    assert provenance_of(doc.meta) == ("moe:proj-1", "task-1")
    assert doc.meta["source_fields"] == {"branch": "x", "comments": [{"author": "human"}]}
    read = board_files.parse_task(doc, fallback_id=task.id)
    assert read.source == {"system": "moe:proj-1", "id": "task-1", "fields": {"branch": "x", "comments": [{"author": "human"}]}}
    assert replace(read, source=None) == task


def _candidate(old: str, path: str) -> Candidate:
    return Candidate("task", old, path.rsplit("/", 1)[-1][:-3], path, b"x", Where("src.json", None, "tasks[0]"))


def test_decide_skips_what_was_imported_and_a_second_copy_of_an_id() -> None:
    imported = {("task", "a"): ".moss/board/tasks/TASK-1.md"}
    items, writes = decide([_candidate("a", "t/A.md"), _candidate("b", "t/B.md"), _candidate("b", "t/B2.md")], imported, set())
    assert [(item.old_id, item.action) for item in items] == [("a", SKIP), ("b", CREATE), ("b", SKIP)]
    assert items[0].path == ".moss/board/tasks/TASK-1.md" and items[0].reason == "already imported"
    assert "twice" in (items[2].reason or "")
    assert [write.path for write in writes] == ["t/B.md"]


def test_decide_refuses_a_place_held_by_a_file_it_did_not_import() -> None:
    with pytest.raises(Conflict) as caught:
        decide([_candidate("a", "t/A.md")], {}, {"t/A.md"})
    assert caught.value.code == "ALREADY_EXISTS" and caught.value.details["paths"] == ["t/A.md"]


def test_a_source_error_names_the_file_and_line_or_json_path() -> None:
    by_line = source_error("bad", Where("a.jsonl", 3))
    assert (by_line.code, by_line.path, by_line.line, by_line.exit_code) == ("SOURCE_INVALID", "a.jsonl", 3, 4)
    by_path = source_error("bad", Where("b.json", None, "tasks[2].status"))
    assert by_path.details["json_path"] == "tasks[2].status" and "tasks[2].status" in by_path.message


def test_decide_refuses_an_item_whose_file_its_readers_would_refuse() -> None:
    small, big = _candidate("a", "t/A.md"), Candidate("task", "b", "B", "t/B.md", b"x" * 101, Where("src.json", 2))
    items, writes = decide([small, big], {}, set(), max_bytes={"task": 100})
    assert [(item.old_id, item.action, item.loss) for item in items] == [("a", CREATE, False), ("b", SKIP, True)]
    assert "FILE_TOO_LARGE" in (items[1].reason or "") and [write.path for write in writes] == ["t/A.md"]


def test_the_ledger_counts_items_and_each_fields_fates_and_strict_refuses_any_loss() -> None:
    account = Account()
    account.mapped("priority", "priority", 4, changed="4 -> LOW")
    account.kept("labels", ["a"])
    account.dropped("color", "the board has no colors", "red")
    fated = Candidate("task", "a", "A", "t/A.md", b"x", Where("s.jsonl", 1), fates=account.done())
    holder = Candidate("epic", "all", "E", "e/E.md", b"x", Where("s.jsonl"), made=True)
    builder = Builder("beads", "s.jsonl", accounted=True)
    builder.add(*decide([fated, holder], {}, set()))
    builder.skip("task", "b", Where("s.jsonl", 2), "no id", loss=True)
    builder.skip("task", "c", Where("s.jsonl", 3), "deleted in the source")
    plan = builder.build()
    summary = ledger(plan)
    assert {key: summary["items"][key] for key in ("in", "out", "skipped", "added")} == {"in": 3, "out": 1, "skipped": 2, "added": 1}
    assert [lost["old_id"] for lost in summary["items"]["lost"]] == ["b"]
    fields = summary["fields"]
    assert (fields["priority"]["mapped"], fields["priority"]["changed"], fields["priority"]["examples"]["mapped"]) == (
        1,
        1,
        [{"id": "a", "value": "4", "changed": "4 -> LOW"}],
    )
    assert (fields["labels"]["kept"], fields["labels"]["homes"]) == (1, ["source_fields.labels"])
    assert summary["dropped"] == {"color": 1} and not summary["lossless"]
    assert item_to_dict(plan.items[0])["dropped"] == {"color": "the board has no colors"}
    refusal = losses(plan)
    assert refusal is not None and refusal.code == "MIGRATION_WOULD_DROP" and refusal.details["dropped"] == {"color": 1}
    assert losses(Builder("beads", "s.jsonl", accounted=True).build()) is None
    assert losses(Builder("moe", ".moe").build()) is not None  # a reader that does not account its fields cannot vouch for them


FATE_ONE = st.builds(
    Fate,
    field=st.sampled_from(["title", "status", "labels", "dependencies[blocks]"]),
    fate=st.sampled_from([MAPPED, KEPT, DROPPED]),
    home=st.sampled_from([None, "title", "source_fields.labels"]),
    reason=st.sampled_from([None, "why"]),
    changed=st.sampled_from([None, "4 -> LOW"]),
    value=st.one_of(st.none(), st.text(max_size=3)),
)


FATE_MANY_REASONS = st.builds(
    Fate,
    field=st.sampled_from(["title", "status", "labels"]),
    fate=st.sampled_from([MAPPED, KEPT, DROPPED]),
    home=st.sampled_from([None, "title", "source_fields.labels"]),
    reason=st.one_of(st.none(), st.sampled_from([f"why {number}" for number in range(14)])),  # past the ten a field lists
    changed=st.sampled_from([None, "4 -> LOW"]),
    value=st.one_of(st.none(), st.text(max_size=2)),
)


@settings(max_examples=300)
@given(st.data())
def test_the_ledger_adds_only_the_counts_of_fates_met_before_as_looking_at_each_fate_would(data: st.DataObject) -> None:
    """summarize adds only the counts of an item whose fates an earlier item had, once those
    filled their examples: the ledger equals the one made by looking at every fate of every
    item (`_add`), however the items repeat, their reasons overflow or their ids recur."""
    shapes = data.draw(st.lists(st.lists(FATE_MANY_REASONS, max_size=6).map(tuple), min_size=1, max_size=4))
    accounts = data.draw(st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from(shapes)), max_size=40))
    general: dict[str, dict[str, Any]] = {}
    for old_id, fates in accounts:
        _add(general, old_id, fates)
    for entry in general.values():
        entry["examples"] = {fate: found for fate, found in entry["examples"].items() if found}
    assert summarize(accounts) == general


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e"]), st.lists(FATE_ONE, max_size=5)), max_size=12))
def test_a_decided_plan_keeps_every_value_its_ledger_shows(accounts: list[tuple[str, list[Fate]]]) -> None:
    """decide drops the source values of fates the ledger's examples will not show (most of a
    large plan's size): the ledger is the same as from the fates in full, ids repeated included."""
    full = summarize((old_id, tuple(fates)) for old_id, fates in accounts)
    examples: dict[tuple[str, str], set[str]] = {}
    lean = [(old_id, _example_values_only(tuple(fates), old_id, examples, {})) for old_id, fates in accounts]
    assert summarize(lean) == full
    assert [[(f.field, f.fate, f.home, f.reason, f.changed) for f in fates] for _old, fates in lean] == [
        [(f.field, f.fate, f.home, f.reason, f.changed) for f in fates] for _old, fates in accounts
    ]


def test_a_decided_plan_keeps_few_values_of_many_items() -> None:
    fates = (Fate("title", MAPPED, "title", value="Fix it"), Fate("labels", KEPT, "source_fields.labels", value='["ops"]'))
    examples: dict[tuple[str, str], set[str]] = {}
    lean = [_example_values_only(fates, f"bd-{number}", examples, {}) for number in range(1000)]
    assert sum(fate.value is not None for item in lean for fate in item) == 2 * EXAMPLES


# Source fields a provenance block carries: multi-line text (PyYAML's path), odd text, numbers.
_FIELD_TEXT = st.one_of(
    st.text(alphabet="ab '#:-\n\t\u00e9\U0001f600", max_size=16), st.sampled_from(["a\n", "\n\nb", "1e3", "no", "2026-04-01T18:00:00Z", "x: y\nz"])
)
_FIELD_VALUES = st.recursive(
    st.one_of(_FIELD_TEXT, st.integers(), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, min_size=1, max_size=3), st.dictionaries(st.sampled_from(["text", "id", "on"]), inner, min_size=1, max_size=3)),
    max_leaves=8,
)


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(["title", "comments", "status", "labels"]), _FIELD_VALUES, min_size=1, max_size=4))
def test_a_provenance_block_pyyaml_would_write_is_its_general_paths_text(fields: dict[str, Any]) -> None:
    extra = {"imported_from": "beads", "source_id": "bd-1", "source_fields": fields}
    if yamlrt.dump_simple(extra) is None:  # else the round-trip emitter's text, another style
        assert _block(extra) == _block_dumped(extra)


@given(st.one_of(st.text(alphabet=" \t\n\x1c\u00a0\u2028ab…", max_size=300), st.lists(st.text(max_size=60), max_size=6)))
def test_shown_is_idempotent_so_a_fate_may_keep_text_as_it_is(value: Any) -> None:
    # An Account keeps text as it is and the report shows it through `shown` (others are shown
    # at once): equal only because showing shown text changes nothing.
    assert shown(shown(value)) == shown(value)


def test_a_fates_text_is_shown_cut_in_the_report_examples() -> None:
    account = Account()
    text = "a  long\n" * 40
    account.mapped("description", "description", text)
    account.kept("labels", ["x", "y"])
    fields = summarize([("bd-1", account.done())])
    assert fields["description"]["examples"][MAPPED] == [{"id": "bd-1", "value": shown(text)}]
    assert fields["labels"]["examples"][KEPT] == [{"id": "bd-1", "value": '["x", "y"]'}]
