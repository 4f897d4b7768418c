"""The search index over real files and a real SQLite file: search, refresh, rebuild, damage."""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from moss_files.foundation.errors import InvalidRequest, NotFound
from moss_files.index import service as search
from moss_files.index.database import DB_NAME, SearchIndex
from moss_files.index.sources import default_registry

NOW = datetime(2026, 3, 15, 12, 0, tzinfo=UTC)


def write(root: Path, relpath: str, text: str | bytes) -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def insight(root: Path, ident: str, body: str, *, created: str = "2026-03-01T10:00:00Z", extra: str = "") -> Path:
    return write(root, f".moss/insights/{ident}.md", f"---\nid: {ident}\ntype: technical\nstatus: unprocessed\n{extra}created: {created}\n---\n{body}\n")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    insight(ws, "INS-20260301-aaaaaaaa", "Token refresh must happen before expiry.", extra="tags: [auth, gotcha]\n")
    insight(ws, "INS-20260302-bbbbbbbb", "The cache keeps one entry per user; nothing about tokens in the title.", created="2026-03-02T10:00:00Z")
    write(
        ws,
        ".moss/sessions/SES-20260303-cccccccc.md",
        "---\nid: SES-20260303-cccccccc\ntask: LF-7 router\nstarted: 2026-03-03T09:00:00Z\nended: 2026-03-03T11:00:00Z\noutcome: PARTIAL\nnext_actions: [finish the router]\n---\n## Summary\n\nRouter half done.\n",
    )
    write(ws, ".cstack/PLAN.md", "# Plan\n\n## Tasks\n- [ ] P1: Rotate the signing keys #auth (id: keys)\n- [x] Ship the router | modified: 2026-03-04\n")
    write(ws, ".needlecast/inbox.md", "# Inbox\n\n---\nid: m1\nfrom: alice\nto: bob\ntime: 2026-03-05T08:00:00Z\n---\nPlease review the token rotation.\n")
    write(
        ws,
        ".moss/capsules/default/auth-work.md",
        "---\nid: 01KA0000000000000000000001\ntitle: Auth work\ncreated_at: 2026-03-06T10:00:00Z\nupdated_at: 2026-03-06T10:00:00Z\n---\n## Objective\nKeep login working while tokens rotate.\n",
    )
    return ws


def ctx_for(root: Path, messages: list[str] | None = None) -> search.Context:
    return search.Context(root, clock=lambda: NOW, notify=(messages.append if messages is not None else None))


def ids(result: dict) -> list[str]:
    return [match["id"] for match in result["matches"]]


# --------------------------------------------------------------------------- searching


def test_search_finds_every_kind(root: Path) -> None:
    messages: list[str] = []
    found = search.scan(ctx_for(root, messages), "token")
    assert messages == ["search index built"]
    assert {m["kind"] for m in found["matches"]} == {"insight", "message", "capsule"}
    # A capsule also shows the name it is addressed by (workspace/name); other kinds have none.
    assert all(len(m["summary"]) <= 100 and set(m) - {"handle"} <= {"id", "kind", "summary", "score", "date", "status"} for m in found["matches"])
    assert {m["kind"]: m.get("handle") for m in found["matches"]} == {"insight": None, "message": None, "capsule": "default/auth-work"}
    assert found["matches"][0]["score"] == 1.0 and found["truncated"] is False
    assert ids(search.scan(ctx_for(root), "kind:task")) == ["PLAN.md:L5", "keys"]  # newest first, undated last
    assert ids(search.scan(ctx_for(root), "router kind:session")) == ["SES-20260303-cccccccc"]


def test_a_word_finds_its_other_forms_and_a_prefix_still_finds_longer_words(tmp_path: Path) -> None:
    """`moss search tokens` once missed "Token refresh": terms matched as typed (and as
    prefixes) only. They now match their Porter stem as well, and stay prefixes."""
    ws = tmp_path / "ws"
    insight(ws, "INS-refresh", "Token refresh must happen before expiry.")
    insight(ws, "INS-deploy", "Deployments roll back on a failed health check.", created="2026-03-02T10:00:00Z")
    insight(ws, "INS-studies", "Two studies of cache hit rates.", created="2026-03-03T10:00:00Z")
    ctx = ctx_for(ws)
    assert ids(search.scan(ctx, "tokens")) == ["INS-refresh"]
    assert ids(search.scan(ctx, "refreshed tokens", match="all")) == ["INS-refresh"]
    assert ids(search.scan(ctx, "deployme")) == ["INS-deploy"]  # a prefix cut inside a suffix still matches
    assert ids(search.scan(ctx, "deploying")) == ["INS-deploy"]
    assert ids(search.scan(ctx, "study")) == ["INS-studies"]
    assert ids(search.scan(ctx, "caching rates")) == ["INS-studies"]
    assert ids(search.scan(ctx, '"tokens refresh"')) == []  # a phrase is matched as written


def test_the_form_typed_ranks_above_other_forms(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    insight(ws, "INS-stem", "Rotate the token nightly.")
    insight(ws, "INS-typed", "Rotate the tokens nightly.")
    assert ids(search.scan(ctx_for(ws), "tokens")) == ["INS-typed", "INS-stem"]


def test_title_outweighs_body(root: Path) -> None:
    found = search.scan(ctx_for(root), "token kind:insight")
    # The first insight's summary (its title) says "Token"; the second has it in the body only.
    assert ids(found) == ["INS-20260301-aaaaaaaa", "INS-20260302-bbbbbbbb"]


def test_recency_boost_matches_the_pure_rule(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    insight(ws, "INS-new", "Identical text about locks.", created="2026-03-15T12:00:00Z")
    insight(ws, "INS-old", "Identical text about locks.", created="2026-01-01T12:00:00Z")
    insight(ws, "INS-mid", "Identical text about locks.", created="2026-03-05T12:00:00Z")
    found = search.scan(ctx_for(ws), "locks")
    scores = {m["id"]: m["score"] for m in found["matches"]}
    assert ids(found) == ["INS-new", "INS-mid", "INS-old"]
    assert scores["INS-old"] == pytest.approx(1 / 1.2, abs=1e-4)
    assert scores["INS-mid"] == pytest.approx((1 + 0.2 * (1 - 10 / 30)) / 1.2, abs=1e-4)


def test_filters_exclusions_phrases_and_dates(root: Path) -> None:
    ctx = ctx_for(root)
    assert ids(search.scan(ctx, "tag:auth")) == ["INS-20260301-aaaaaaaa", "keys"]
    assert ids(search.scan(ctx, "token -rotation kind:insight,message")) == ["INS-20260301-aaaaaaaa", "INS-20260302-bbbbbbbb"]
    assert ids(search.scan(ctx, '"token rotation"')) == ["m1"]
    assert ids(search.scan(ctx, "from:alice")) == ["m1"]
    assert ids(search.scan(ctx, "after:2026-03-05 before:2026-03-06")) == ["m1"]
    assert ids(search.scan(ctx, "date:2026-03-03")) == ["SES-20260303-cccccccc"]
    assert ids(search.scan(ctx, "-kind:task -kind:capsule -kind:session -kind:insight")) == ["m1"]
    assert ids(search.scan(ctx, "status:partial")) == ["SES-20260303-cccccccc"]
    assert ids(search.scan(ctx, "title:signing")) == ["keys"]
    assert ids(search.scan(ctx, "rotate router", match="all")) == []
    # rotate and rotation are one word to the stemmer: each item with either has "both".
    assert set(ids(search.scan(ctx, "rotate rotation", match="all"))) == {"m1", "keys", "01KA0000000000000000000001"}
    assert ids(search.scan(ctx, "kinds:nothing")) == []


def test_limit_offset_and_truncation(root: Path) -> None:
    ctx = ctx_for(root)
    everything = ids(search.scan(ctx, "after:2000", limit=50))
    first = search.scan(ctx, "after:2000", limit=2)
    second = search.scan(ctx, "after:2000", limit=2, offset=2)
    assert first["truncated"] and ids(first) + ids(second) == everything[:4]
    with pytest.raises(InvalidRequest):
        search.scan(ctx, "x", limit=0)


def test_empty_query_is_an_empty_result_not_an_error(root: Path) -> None:
    result = search.scan(ctx_for(root), "   ")
    assert result["matches"] == [] and result["hint"]
    assert search.scan(ctx_for(root), "*** ---")["matches"] == []


def test_raw_queries_report_fts_errors_as_bad_requests(root: Path) -> None:
    assert ids(search.scan(ctx_for(root), "signing AND keys", raw=True)) == ["keys"]
    with pytest.raises(InvalidRequest):
        search.scan(ctx_for(root), '"unbalanced', raw=True)


def test_deleted_capsules_are_hidden_unless_asked_for(root: Path) -> None:
    write(
        root,
        ".moss/capsules/default/deleted/01KA0000000000000000000002.md",
        "---\nid: 01KA0000000000000000000002\ndeleted_at: 2026-03-07T00:00:00Z\n---\nOld token notes.\n",
    )
    assert "01KA0000000000000000000002" not in ids(search.scan(ctx_for(root), "token"))
    assert ids(search.scan(ctx_for(root), "token status:deleted")) == ["01KA0000000000000000000002"]


# --------------------------------------------------------------------------- expand and timeline


def test_expand_reads_full_records_and_lists_every_unknown_id(root: Path) -> None:
    result = search.expand(
        ctx_for(root), ["INS-20260301-aaaaaaaa", "keys", "m1", "nope", "../../etc/passwd", "x y", "ins-20260301-AAAAAAAA"], include_links=True
    )
    kinds = [(item["id"], item["kind"], item["path"]) for item in result["items"]]
    assert kinds == [
        ("INS-20260301-aaaaaaaa", "insight", ".moss/insights/INS-20260301-aaaaaaaa.md"),
        ("keys", "task", ".cstack/PLAN.md"),
        ("m1", "message", ".needlecast/inbox.md"),
        ("INS-20260301-aaaaaaaa", "insight", ".moss/insights/INS-20260301-aaaaaaaa.md"),
    ]
    assert result["items"][0]["record"]["content"] == "Token refresh must happen before expiry.\n"
    assert result["items"][1]["record"]["title"] == "Rotate the signing keys"
    assert result["items"][2]["record"]["body"] == "Please review the token rotation.\n"
    assert result["not_found"] == ["nope", "../../etc/passwd", "x y"]
    with pytest.raises(InvalidRequest):
        search.expand(ctx_for(root), [" "])


def test_expand_follows_links(root: Path) -> None:
    insight(root, "INS-20260310-dddddddd", "Links to others.", created="2026-03-10T00:00:00Z", extra="links: [INS-20260301-aaaaaaaa, keys, gone]\n")
    [item] = search.expand(ctx_for(root), ["INS-20260310-dddddddd"], include_links=True, include_timeline=True, depth=1)["items"]
    assert [i["id"] for i in item["links"]["items"]] == ["INS-20260301-aaaaaaaa", "keys"]
    assert item["links"]["missing"] == ["gone"]
    assert [i["id"] for i in item["timeline"]["before"]] == ["01KA0000000000000000000001"]


def test_timeline_around_an_id_and_a_time(root: Path) -> None:
    around = search.timeline(ctx_for(root), "SES-20260303-cccccccc", before=1, after=2)
    assert around["anchor"]["id"] == "SES-20260303-cccccccc"
    assert [i["id"] for i in around["before"]] == ["INS-20260302-bbbbbbbb"]
    assert [i["id"] for i in around["after"]] == ["PLAN.md:L5", "m1"]
    by_time = search.timeline(ctx_for(root), "2026-03-04", before=1, after=1, kinds=["insight", "message"])
    assert by_time["anchor"] == {"date": "2026-03-04"}
    assert ([i["id"] for i in by_time["before"]], [i["id"] for i in by_time["after"]]) == (["INS-20260302-bbbbbbbb"], ["m1"])
    assert [i["id"] for i in search.timeline(ctx_for(root), "now", before=1, after=0)["before"]] == ["01KA0000000000000000000001"]
    with pytest.raises(NotFound):
        search.timeline(ctx_for(root), "no-such-thing")
    with pytest.raises(InvalidRequest):
        search.timeline(ctx_for(root), "keys")  # an undated task


# --------------------------------------------------------------------------- freshness and identity


def test_a_file_changed_a_moment_ago_is_seen(root: Path) -> None:
    ctx = ctx_for(root)
    path = insight(root, "INS-fresh", "alpha words here")
    assert ids(search.scan(ctx, "alpha")) == ["INS-fresh"]
    stat = path.stat()
    insight(root, "INS-fresh", "bravo words here")  # same size, same clock tick
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert ids(search.scan(ctx, "bravo")) == ["INS-fresh"]
    assert ids(search.scan(ctx, "alpha")) == []
    path.unlink()
    assert ids(search.scan(ctx, "bravo")) == []


def _corpus(root: Path, rng: random.Random, count: int) -> None:
    words = "lock cache token router inbox plan review deploy schema retry budget merge".split()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(count):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(5, 30))) + "."
        moment = (start + timedelta(hours=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
        kind = n % 4
        if kind == 0:
            insight(root, f"INS-{n:04d}", text, created=moment, extra=f"tags: [{rng.choice(words)}]\n")
        elif kind == 1:
            write(root, f".moss/sessions/SES-{n:04d}.md", f"---\nid: SES-{n:04d}\nstarted: {moment}\n---\n## Summary\n\n{text}\n")
        elif kind == 2:
            write(root, f".needlecast/inbox/{n:04d}.md", f"---\nid: msg-{n}\nfrom: s{n % 3}\nto: s{n % 5}\ntime: {moment}\n---\n{text}\n")
        else:
            write(root, f".moss/board/tasks/T-{n:04d}.md", f"---\nid: T-{n}\nkind: task\ntitle: {text[:20]}\nstatus: open\n---\n{text}\n")
    tasks = "\n".join(f"- [ ] P{n % 4}: {rng.choice(words)} {rng.choice(words)} (id: p{n})" for n in range(12))
    write(root, ".cstack/PLAN.md", f"# Plan\n\n## Tasks\n{tasks}\n")


def _snapshot(root: Path, cache: Path) -> dict:
    index = SearchIndex(root, default_registry(), cache_dir=cache)
    return index.run(lambda view: view.snapshot())


def test_incremental_refresh_equals_a_full_rebuild(tmp_path: Path) -> None:
    rng = random.Random(7)
    ws = tmp_path / "ws"
    _corpus(ws, rng, 160)
    ctx = ctx_for(ws)
    assert len(search.scan(ctx, "lock", limit=5)["matches"]) == 5  # builds the index
    files = sorted(p for p in ws.rglob("*.md") if ".moss/cache" not in p.as_posix())
    for path in rng.sample(files, 20):  # edits, some keeping the size
        path.write_text(path.read_text().replace("lock", "lack"), encoding="utf-8")
    for path in rng.sample([p for p in files if p.exists()], 8):  # deletions
        path.unlink()
    for path in rng.sample([p for p in files if p.exists() and "PLAN" not in p.name], 8):  # renames
        path.rename(path.with_name("renamed-" + path.name))
    _corpus(tmp_path / "extra", rng, 8)
    for path in (tmp_path / "extra").rglob("*.md"):  # additions, PLAN.md replaced
        target = ws / path.relative_to(tmp_path / "extra")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    write(ws, ".moss/insights/INS-broken.md", "---\nid: INS-broken\ntype: [x]\n---\nbroken\n")
    touched = ws / ".moss" / "sessions" / "SES-0001.md"
    if touched.exists():
        os.utime(touched)  # stat changes, content does not
    refreshed = search.index_refresh(ctx)
    assert refreshed["added"] and refreshed["changed"] and refreshed["removed"]
    incremental = _snapshot(ws, ws / ".moss" / "cache")
    rebuilt = _snapshot(ws, tmp_path / "other-cache")
    assert incremental == rebuilt
    assert len(incremental["items"]) > 150
    queries = ["lock", "lack token", "kind:task -plan", "after:2026-01-03 retry"]
    other = search.Context(ws, clock=lambda: NOW)
    for query in queries:
        assert ids(search.scan(ctx, query)) == ids(search.scan(other, query))


def test_unparseable_files_are_listed_never_dropped(root: Path) -> None:
    write(root, ".moss/insights/INS-bad.md", "---\nid: INS-bad\nstatus: maybe\n---\nx\n")
    write(root, ".moss/sessions/SES-open.md", "---\nid: SES-open\n")
    write(root, ".moss/insights/INS-bin.md", b"---\nid: x\n---\n\x00\x01")
    os.symlink("/etc/hostname", root / ".moss" / "insights" / "INS-link.md")
    status = search.index_status(ctx_for(root))
    problems = {(p["path"], p["code"], p["line"]) for p in status["problems"] if p["severity"] == "error"}
    assert problems == {
        (".moss/insights/INS-bad.md", "SCHEMA_ERROR", 3),
        (".moss/sessions/SES-open.md", "FRONTMATTER_UNCLOSED", 1),
        (".moss/insights/INS-bin.md", "BINARY_FILE", 4),
        (".moss/insights/INS-link.md", "SYMLINK_REFUSED", None),
    }
    assert search.scan(ctx_for(root), "token")["unindexed"] == 4
    assert status["by_kind"]["insight"] == 2


def test_the_index_never_writes_an_artifact_file(root: Path) -> None:
    def files() -> dict[str, tuple[bytes, int]]:
        return {
            p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file() and ".moss/cache" not in p.as_posix()
        }

    before = files()
    ctx = ctx_for(root)
    search.scan(ctx, "token")
    search.expand(ctx, ["keys", "m1"], include_links=True, include_timeline=True)
    search.timeline(ctx, "m1")
    search.index_rebuild(ctx)
    search.index_status(ctx)
    assert files() == before
    assert (root / ".moss" / "cache" / ".gitignore").read_text().strip().endswith("*")


# --------------------------------------------------------------------------- damage and concurrency


def test_deleting_the_cache_mid_use(root: Path) -> None:
    ctx = ctx_for(root)
    index = search.open_index(ctx)

    def use_then_delete(view) -> list[str]:
        first = [hit.id for hit in view.search(__import__("moss_files.index.query", fromlist=["x"]).parse_query("token"), now=NOW).hits]
        for path in (root / ".moss" / "cache").iterdir():
            path.unlink()
        return first

    assert index.run(use_then_delete)
    assert not (root / ".moss" / "cache" / DB_NAME).exists()
    messages: list[str] = []
    assert ids(search.scan(ctx_for(root, messages), "signing")) == ["keys"]
    assert messages == ["search index built"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "old schema", "other sources"])
def test_a_damaged_cache_is_rebuilt_with_a_message(root: Path, damage: str) -> None:
    search.scan(ctx_for(root), "token")
    db = root / ".moss" / "cache" / DB_NAME
    if damage == "garbage":
        db.write_bytes(b"this is not a database at all" * 100)
    elif damage == "truncated":
        data = db.read_bytes()
        db.write_bytes(data[: len(data) // 3])
    elif damage == "empty":
        db.write_bytes(b"")
    else:
        conn = sqlite3.connect(db)
        if damage == "old schema":
            conn.execute("PRAGMA user_version = 0")
        else:
            conn.execute("UPDATE meta SET value = 'insight:1:0' WHERE key = 'registry'")
        conn.commit()
        conn.close()
    messages: list[str] = []
    assert ids(search.scan(ctx_for(root, messages), "signing")) == ["keys"]
    assert len(messages) == 1 and "rebuilt" in messages[0]
    assert ids(search.scan(ctx_for(root, messages), "signing")) == ["keys"]
    assert len(messages) == 1


def test_concurrent_readers_while_a_refresh_runs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _corpus(ws, random.Random(3), 120)
    search.scan(ctx_for(ws), "lock")
    errors: list[BaseException] = []
    done = threading.Event()
    counts: list[int] = []

    def reader() -> None:
        ctx = ctx_for(ws)
        try:
            while not done.is_set():
                counts.append(len(search.scan(ctx, "kind:insight", limit=200)["matches"]))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for thread in readers:
        thread.start()
    try:
        deadline = time.monotonic() + 20
        for n in range(25):
            insight(ws, f"INS-new-{n:02d}", f"added while reading, number {n}")
            search.index_refresh(ctx_for(ws))
            assert time.monotonic() < deadline
    finally:
        done.set()
        for thread in readers:
            thread.join(timeout=30)
    assert not errors, errors
    assert counts and min(counts) >= 30 and max(counts) <= 55
    assert len(search.scan(ctx_for(ws), "kind:insight", limit=200)["matches"]) == 55


def test_a_rebuild_while_others_read_and_refresh(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _corpus(ws, random.Random(5), 80)
    search.scan(ctx_for(ws), "lock")
    errors: list[BaseException] = []

    def rebuild() -> None:
        try:
            for _ in range(3):
                search.index_rebuild(ctx_for(ws))
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=rebuild)
    worker.start()
    try:
        for _ in range(15):
            assert search.scan(ctx_for(ws), "kind:insight", limit=100)["matches"]
    finally:
        worker.join(timeout=60)
    assert not errors, errors


def test_filters_given_as_data(root: Path) -> None:
    ctx = ctx_for(root)
    assert ids(search.scan(ctx, "token", filters={"kind": ["message"]})) == ["m1"]
    assert ids(search.scan(ctx, "", filters={"type": "technical", "status": ["unprocessed"]})) == ["INS-20260302-bbbbbbbb", "INS-20260301-aaaaaaaa"]
    with pytest.raises(InvalidRequest):
        search.scan(ctx, "x", filters={"colour": ["red"]})


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_refresh_equals_rebuild_after_every_round_of_random_changes(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    ws = tmp_path / "ws"
    _corpus(ws, rng, 60)
    ctx = ctx_for(ws)
    search.index_refresh(ctx)
    for round_number in range(4):
        files = sorted(p for p in ws.rglob("*.md") if ".moss/cache" not in p.as_posix())
        for path in rng.sample(files, 6):
            action = rng.choice(["edit", "delete", "rename", "touch", "break", "same-size"])
            if not path.exists():
                continue
            if action == "edit":
                path.write_text(path.read_text() + f"\nround {round_number} token\n")
            elif action == "delete":
                path.unlink()
            elif action == "rename":
                path.rename(path.with_name(f"r{round_number}-{path.name}"))
            elif action == "touch":
                os.utime(path)
            elif action == "break":
                path.write_text("---\nid: [broken\n---\n")
            else:
                text = path.read_text()
                path.write_text(text.replace("lock", "loch"))
        search.index_refresh(ctx)
        assert _snapshot(ws, ws / ".moss" / "cache") == _snapshot(ws, tmp_path / f"rebuild-{round_number}"), round_number


def test_a_huge_file_is_reported_not_read(root: Path) -> None:
    path = root / ".moss" / "insights" / "INS-huge.md"
    with open(path, "wb") as handle:
        handle.truncate(9 * 1024 * 1024)
    problems = search.index_status(ctx_for(root))["problems"]
    assert [(p["path"], p["code"]) for p in problems] == [(".moss/insights/INS-huge.md", "FILE_TOO_LARGE")]


def test_without_a_writable_cache_folder_the_search_still_works(root: Path) -> None:
    (root / ".moss" / "cache").write_text("a file where the cache folder belongs")
    messages: list[str] = []
    assert ids(search.scan(ctx_for(root, messages), "signing")) == ["keys"]
    assert len(messages) == 1 and "without one" in messages[0]
    assert (root / ".moss" / "cache").read_text() == "a file where the cache folder belongs"
    assert search.index_status(ctx_for(root))["by_kind"]["insight"] == 2
