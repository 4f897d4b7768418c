"""A text search ranked from its pool of best bm25 (`View._ranked_from_pool`) gives the page the
full ranking of every match gives: the same hits, scores and order, ties included, and the
same `more`, for every page, pool size and query shape, whichever way the search answered."""

from __future__ import annotations

import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from moss_files.index import query, service

BENCH = Path(__file__).resolve().parents[2] / "bench"
QUERIES = ("deploy", "auth token", "dep*", "auth OR token", "retry -deploy", '"deploy retry"', "tie", "tie deploy", "kind:insight deploy", "nothinglikeit")


def generated(root: Path, count: int, seed: int) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from corpus import generate_workspace
    finally:
        sys.path.remove(str(BENCH))
    generate_workspace(root, count, seed=seed)


def add_ties(root: Path, moment: datetime) -> None:
    """Insights that tie: the same text and date under ids of one shape (equal bm25 and boost,
    so only the id orders them), some dated inside the recency window and some outside."""
    folder = root / ".moss" / "insights"
    for number in range(12):
        # Odd ones two days old (boosted alike), even ones older each than the last, out of
        # the recency window (the same score: their dates order them).
        when = moment - timedelta(days=2) if number % 2 else moment - timedelta(days=90 + number)
        stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        text = f"---\nid: INS-20260101-tie{number:05d}\ntype: technical\nstatus: unprocessed\ncreated: {stamp}\nupdated: {stamp}\n---\nA tie about deploy and tie retry.\n"
        (folder / f"INS-20260101-tie{number:05d}.md").write_text(text, encoding="utf-8")


def test_the_pool_ranks_as_every_match_does(tmp_path: Path) -> None:
    generated(tmp_path, 500, seed=7)
    index = service.open_index(service.Context(tmp_path))
    index.ask_watcher = False
    index.rebuild()
    stamps = index.run(lambda view: [row[0] for row in view.conn.execute("SELECT ts FROM items WHERE ts IS NOT NULL ORDER BY ts")], refresh=False)
    moment = datetime.fromtimestamp(stamps[-1], UTC)
    add_ties(tmp_path, moment)
    # `now` at several places among the items' dates: the recency boost differs between
    # matches (the newer the more), so the full ranking is not bm25's order.
    moments = [datetime.fromtimestamp(stamps[len(stamps) * share // 4], UTC) for share in (1, 2, 3)] + [moment]
    rng = random.Random(3)
    answered: dict[str, int] = {"pool": 0, "full": 0}

    def compare(view: Any) -> None:
        for text in QUERIES:
            parsed = query.parse_query(text)
            for now in moments:
                for limit, offset in [(20, 0), (1, 0), (3, 2), (200, 0), (20, 180), *((rng.randint(1, 30), rng.randint(0, 60)) for _ in range(4))]:
                    full = view.search(parsed, now=now, limit=limit, offset=offset, pool=0)
                    assert view.last_ranking in (None, "full")
                    for pool in (None, 2, 8, 30, 120, 1000):
                        pooled = view.search(parsed, now=now, limit=limit, offset=offset, pool=pool)
                        assert pooled == full, (text, now, limit, offset, pool)
                        if view.last_ranking is not None:
                            answered[view.last_ranking] += 1

    index.run(compare)
    # Both ways answered: pools big enough to vouch for the page, and pools too small to.
    assert answered["pool"] > 50 and answered["full"] > 50, answered


def test_the_pool_keeps_the_order_of_ties(tmp_path: Path) -> None:
    moment = datetime(2026, 3, 1, tzinfo=UTC)
    (tmp_path / ".moss" / "insights").mkdir(parents=True)
    add_ties(tmp_path, moment)
    index = service.open_index(service.Context(tmp_path))
    index.ask_watcher = False
    index.rebuild()

    def pages(view: Any) -> list[list[str]]:
        parsed = query.parse_query("tie")
        full = view.search(parsed, now=moment, limit=5, offset=9, pool=0)
        pooled = view.search(parsed, now=moment, limit=5, offset=9, pool=13)
        assert view.last_ranking == "pool"  # all twelve matches are in the pool
        return [[hit.id for hit in found.hits] for found in (full, pooled)]

    full, pooled = index.run(pages)
    # The recent ones first (boosted, equal: by id), then the older ones by date, newest first.
    assert full == pooled == [f"INS-20260101-tie{n:05d}" for n in (6, 8, 10)]


def test_a_raw_query_fts5_refuses_is_reported_as_before(tmp_path: Path) -> None:
    (tmp_path / ".moss" / "insights").mkdir(parents=True)
    add_ties(tmp_path, datetime(2026, 3, 1, tzinfo=UTC))
    ctx = service.Context(tmp_path)
    with pytest.raises(service.InvalidRequest, match="invalid FTS5 query"):
        service.scan(ctx, 'tie AND "unclosed', raw=True)
