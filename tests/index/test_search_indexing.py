"""The index's pure model: routing files to sources, refresh planning, and each source's rows."""

from __future__ import annotations

import pytest

from moss_files.index.model import (
    Entry,
    Extracted,
    FileInput,
    Place,
    RefreshPlan,
    Registry,
    Source,
    facets_of,
    plan_refresh,
    stored_signature,
    tidy_entries,
)
from moss_files.index.sources import default_registry


def _source(name: str, *places: Place) -> Source:
    return Source(name, (name,), places, lambda file: Extracted(), lambda file, anchor: None)


REGISTRY = Registry(
    [
        _source("insight", Place(".moss/insights")),
        _source("cstack", Place(".cstack", recursive=False, names=frozenset({"PLAN.md"}))),
        _source("mailbox", Place(".needlecast", recursive=False, names=frozenset({"inbox.md"}))),
        _source("message", Place(".needlecast/inbox")),
        _source("documents", Place(".moss")),
    ]
)


@pytest.mark.parametrize(
    ("relpath", "owner"),
    [
        (".moss/insights/INS-1.md", "insight"),
        (".moss/insights/sub/INS-2.md", "insight"),
        (".moss/board/tasks/T-1.md", "documents"),
        (".moss/notes.md", "documents"),
        (".moss/cache/x.md", None),
        (".moss/run/x.md", None),
        (".moss/insights/.INS-1.md.tmp-1-ab", None),
        (".moss/insights/INS-1.txt", None),
        (".moss/.hidden/x.md", None),
        (".cstack/PLAN.md", "cstack"),
        (".cstack/OTHER.md", None),
        (".cstack/archive/PLAN.md", None),
        (".needlecast/inbox.md", "mailbox"),
        (".needlecast/inbox/m1.md", "message"),
        (".needlecast/outbox.md", None),
        ("README.md", None),
        ("docs/x.md", None),
    ],
)
def test_each_file_has_at_most_one_owner(relpath: str, owner: str | None) -> None:
    source = REGISTRY.source_for(relpath)
    assert (source.name if source else None) == owner


def test_walks_only_where_sources_read() -> None:
    assert REGISTRY.tops == (".cstack", ".moss", ".needlecast")
    assert REGISTRY.descend(".moss/insights") and REGISTRY.descend(".needlecast/inbox")
    assert not REGISTRY.descend(".moss/cache") and not REGISTRY.descend(".cstack/archive")


def test_a_source_naming_files_wins_over_a_catch_all_at_the_same_folder() -> None:
    registry = Registry([_source("all", Place(".x")), _source("named", Place(".x", names=frozenset({"a.md"})))])
    assert registry.source_for(".x/a.md").name == "named"
    assert registry.source_for(".x/b.md").name == "all"


def test_source_names_are_unique_and_the_fingerprint_follows_versions() -> None:
    with pytest.raises(ValueError):
        Registry([_source("a", Place(".a")), _source("a", Place(".b"))])
    bumped = Registry([Source("a", ("a",), (Place(".a"),), lambda f: Extracted(), lambda f, a: None, version=2)])
    assert Registry([_source("a", Place(".a"))]).fingerprint != bumped.fingerprint


def test_plan_refresh() -> None:
    cached = {"a": 1, "b": 2, "c": None, "d": 4}
    disk = {"a": 1, "b": 5, "c": 3, "e": 6}
    assert plan_refresh(disk, cached) == RefreshPlan(added=("e",), changed=("b", "c"), removed=("d",))
    assert plan_refresh({"a": 1}, {"a": 1}).empty
    assert plan_refresh({"a": 1}, {"a": None}) == RefreshPlan(changed=("a",))


def test_recent_files_get_a_racy_signature() -> None:
    second = 1_000_000_000
    assert stored_signature((0, 10 * second, 5, 7), now_ns=20 * second) == 10 * second
    assert stored_signature((0, 19 * second, 5, 7), now_ns=20 * second) is None
    assert stored_signature((0, 25 * second, 5, 7), now_ns=20 * second) is None  # from the future


def test_tidy_entries() -> None:
    entries = tidy_entries(
        [
            Entry("task", "t", "A  two\nline title", "s" * 150, anchor="L3", status="DONE", facets=(("priority", "P1"), ("x", ""))),
            Entry("task", "u", "B", "short", anchor="L3", tags=("Tag",), links=("INS-1",)),
        ]
    )
    assert [e.anchor for e in entries] == ["L3", "L3~2"]
    assert entries[0].title == "A two line title" and len(entries[0].summary) <= 100
    assert entries[0].status == "done" and entries[0].facets == (("priority", "p1"),)
    assert facets_of(entries[1]) == (("tag", "tag"), ("link", "ins-1"))


def test_a_build_stores_each_entry_as_its_fields_say() -> None:
    """The rows a build writes for an entry: its fields in the items row, `facets_of(entry)`
    as facet rows (each pair once), its tags joined in the FTS row."""
    from moss_files.index import database, query

    entries = tidy_entries(
        [
            Entry("task", "t1", "First", "one", body="text", anchor="L3", line=3, status="done", date="2026-01-02", facets=(("priority", "p1"),)),
            Entry("task", "t2", "Second", "two", anchor="L4", line=4, updated="2026-01-03T04:05:06Z", tags=("Tag", "tag", "other"), links=("INS-1", "ins-1")),
            Entry("doc", "d", "Third", "three", tags=("x",), facets=(("tag", "x"), ("type", "note")), extra="more", handle="w/n"),
        ]
    )
    rows = database._Rows()
    stat = (1_000, 2_000, 3, 4)
    rows.add(("a/b.md", "documents", stat, "digest", 10**19, Extracted(entries)))
    assert rows.count == 3 and rows.files == [("a/b.md", "documents", stored_signature(stat, 10**19), 1_000, "digest", None)]
    assert rows.items == [
        (n, "a/b.md", e.anchor, e.kind, e.id, e.line, e.title, e.summary, e.status, e.date, e.updated, query.timestamp_of(e.updated or e.date), e.handle)
        for n, e in enumerate(entries, 1)
    ]
    assert rows.facets == [(n, name, value) for n, e in enumerate(entries, 1) for name, value in facets_of(e)]
    assert rows.fts == [(n, e.id, e.title, " ".join(e.tags), e.body, e.extra) for n, e in enumerate(entries, 1)]


def test_a_source_that_fails_is_reported_not_raised() -> None:
    def broken(file: FileInput) -> Extracted:
        raise KeyError("oops")

    source = Source("broken", ("x",), (Place(".x"),), broken, lambda f, a: None)
    extracted = Registry([source]).extract(source, FileInput(".x/a.md", b"text"))
    assert extracted.entries == () and extracted.problems[0].code == "INTERNAL"


# --------------------------------------------------------------------------- the real sources


def extract(relpath: str, text: str, mtime_ns: int = 1_768_989_600_000_000_000) -> Extracted:
    registry = default_registry()
    source = registry.source_for(relpath)
    assert source is not None, relpath
    return registry.extract(source, FileInput(relpath, text.encode(), mtime_ns))


def test_plan_md_gives_one_row_per_task_line() -> None:
    text = "# Plan\n\n## Tasks\n- [ ] P1: Build the index #search (id: s1, depends: s0)\n- [>] Write docs | modified: 2026-01-20\n- [?] not a task\n\n## Notes\n- [ ] not a task either\n"
    extracted = extract(".cstack/PLAN.md", text)
    assert [(e.kind, e.id, e.line, e.status) for e in extracted.entries] == [("task", "s1", 4, "pending"), ("task", "PLAN.md:L5", 5, "in_progress")]
    first = extracted.entries[0]
    assert first.tags == ("search",) and first.links == ("s0",) and ("priority", "p1") in first.facets
    assert extracted.entries[1].date == "2026-01-20"
    assert sorted((p.line, p.severity) for p in extracted.problems) == [(4, "warning"), (6, "warning")]  # unknown dependency, odd marker


def test_memory_and_current_files() -> None:
    memory = extract(".cstack/MEMORY.md", "# Memory\n\n## Gotchas\n- The lock file is per machine.\n")
    assert [(e.kind, e.id, ("type", "gotchas") in e.facets) for e in memory.entries] == [("memory", "MEMORY.md:L4", True)]
    current = extract(".cstack/CURRENT.md", "# Current\n\n## Now\nWiring the index into the sidecar.\n")
    assert [(e.kind, e.id, e.title) for e in current.entries] == [("current", "CURRENT.md", "Wiring the index into the sidecar.")]


def test_single_file_mailbox_gives_one_row_per_message_and_reports_a_bad_block() -> None:
    text = (
        "# Inbox\n\n---\nid: m1\nfrom: alice\nto: bob, carol\ntime: 2026-01-20T10:00:00Z\n---\nFirst body.\n\n"
        "---\nid: m2\nfrom: [not, text]\n---\nBad header.\n\n"
        "---\nFrom: dave\nType: question\n---\nNo id here.\n"
    )
    extracted = extract(".needlecast/inbox.md", text)
    assert [(e.id, e.line, e.status) for e in extracted.entries] == [("m1", 3, "inbox"), ("inbox.md:L17", 17, "inbox")]
    assert ("to", "carol") in extracted.entries[0].facets and ("from", "alice") in extracted.entries[0].facets
    assert [(p.code, p.line) for p in extracted.problems] == [("MESSAGE_INVALID", 11)]


def test_message_file_and_capsule_and_generic_document() -> None:
    message = extract(".needlecast/archive/20260120_alice_m9.md", "---\nid: m9\nfrom: alice\nto: bob\n---\nRouted.\n")
    assert [(e.kind, e.id, e.status) for e in message.entries] == [("message", "m9", "archive")]
    # A read message the inbox's rotation moved into a month folder is still an inbox message.
    rotated = extract(".needlecast/inbox/2026-01/2026-01-20T10-00-00Z_alice_m8.md", "---\nid: m8\nfrom: alice\nto: bob\n---\nRead.\n")
    assert [(e.kind, e.id, e.status) for e in rotated.entries] == [("message", "m8", "inbox")]
    capsule = extract(".moss/capsules/team+a/auth.md", "---\ntitle: Auth work\ntags: [auth]\n---\n## Objective\nKeep login working.\n")
    [entry] = capsule.entries
    assert (entry.kind, entry.title, entry.summary, entry.status) == ("capsule", "Auth work", "Keep login working.", "live")
    assert ("workspace", "team a") in entry.facets and entry.tags == ("auth",)
    board = extract(".moss/board/tasks/T-1.md", "---\nid: T-1\nkind: task\ntitle: Claim logic\nstatus: WORKING\n---\nBody.\n")
    assert [(e.kind, e.id, e.title, e.status) for e in board.entries] == [("task", "T-1", "Claim logic", "working")]


def test_an_unreadable_file_is_a_problem_with_its_line() -> None:
    extracted = extract(".moss/insights/INS-1.md", "---\nid: INS-1\ntype: [a]\n---\nx\n")
    assert extracted.entries == ()
    assert [(p.code, p.line, p.severity) for p in extracted.problems] == [("SCHEMA_ERROR", 3, "error")]
    unclosed = extract(".moss/sessions/SES-1.md", "---\nid: SES-1\n")
    assert [p.code for p in unclosed.problems] == ["FRONTMATTER_UNCLOSED"]
