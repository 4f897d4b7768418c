"""Insight bundles between two workspaces: export, preview and import times beside the floor of
reading every insight once, and the round trip the issue asks for (a bundle exported, edited,
imported again) with the count of duplicates it makes, which must be 0.

Run: .venv/bin/python bench/sharing.py [--sizes 100,1000]

For each size, in a temporary folder: workspace `one` gets N insights (one in ten linking to the
previous one, every tenth holding a planted secret and an absolute path), all of them are
exported, the bundle is carried to workspace `two` and imported; then a tenth of the entries
are edited (new content), a tenth changed in white space only, N/10 new entries appended, and
the bundle is previewed and imported again, then a third time. The duplicates are counted from
the files: insights in `two` whose content (white space folded) another insight there holds too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from moss_files import scaffold
from moss_files.foundation import fs
from moss_files.foundation.context import Context
from moss_files.loopflow import service, sharing
from moss_files.loopflow.insights import Insight
from moss_files.loopflow.store import insight_store

T = TypeVar("T")


def workspace(root: Path) -> Context:
    root.mkdir(parents=True, exist_ok=True)
    scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
    return Context(root)


def seed(ctx: Context, count: int) -> None:
    previous: str | None = None
    for number in range(count):
        content = f"Insight {number}: the cache for shard {number % 37} must be warmed before the first read."
        if number % 10 == 0:
            content += f" Seen with token=abcd{number:04d}efgh1234 under {ctx.root}/src/cache.py"
        links = [previous] if previous and number % 10 == 5 else []
        previous = service.remember(ctx, content, tags=["bench", f"shard{number % 5}"], links=links)["id"]


def timed(action: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    result = action()
    return result, (time.perf_counter() - start) * 1000


def duplicates(ctx: Context) -> int:
    contents = Counter(" ".join(item.content.split()) for item in every_insight(ctx))
    return sum(n - 1 for n in contents.values() if n > 1)


def every_insight(ctx: Context) -> list[Insight]:
    """Every insight file of the workspace, read and parsed once (none may be unreadable)."""
    items, problems = insight_store(ctx.root).read_all()
    assert not problems, problems
    return [item for _path, item in items]


def write_files(target: Path, like: Path) -> None:
    """The import's floor: the same files written again, each durably and exclusively."""
    target.mkdir()
    for source in sorted(like.glob("*.md")):
        fs.create_exclusive(target / source.name, source.read_bytes())


def carry(bundle: str, to: Path) -> str:
    target = to / ".moss" / "exports" / "shared.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundle, target)
    return str(target)


def run(size: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="moss-bench-sharing-"))
    try:
        one, two = workspace(folder / "one"), workspace(folder / "two")
        seed(one, size)
        _, floor = timed(lambda: every_insight(one))
        exported, export_ms = timed(lambda: sharing.export_bundle(one))
        shared = carry(exported["bundle_path"], two.root)
        _, preview_ms = timed(lambda: sharing.preview_bundle(two, path=shared))
        first, import_ms = timed(lambda: sharing.import_bundle(two, path=shared))
        _, write_floor = timed(lambda: write_files(folder / "floor", two.root / ".moss" / "insights"))

        data = json.loads(Path(shared).read_text(encoding="utf-8"))
        entries = data["insights"]
        for number, entry in enumerate(entries):
            if number % 10 == 3:
                entry["content"] = entry["content"] + " Edited after the export."
            elif number % 10 == 7:
                entry["content"] = "  " + entry["content"].replace(" ", "   ") + "\n"
        added = max(1, size // 10)
        entries.extend({"original_id": f"INS-ADDED-{n}", "content": f"Added entry {n}.", "type": "technical"} for n in range(added))
        Path(shared).write_text(json.dumps(data), encoding="utf-8")

        seen = sharing.preview_bundle(two, path=shared)
        second = sharing.import_bundle(two, path=shared)
        third = sharing.import_bundle(two, path=shared)
        total = len(every_insight(two))
        print(
            f"{size:>9} {floor:>10.0f} {export_ms:>9.0f} {preview_ms:>10.0f} {import_ms:>9.0f} {write_floor:>11.0f}"
            f"   {first['imported']:>5} {sum(exported['sanitized'].values()):>9}"
            f"   {seen['new_insights']}/{seen['duplicates']}/{seen['conflicts']:<9}"
            f" {second['imported']:>6} {third['imported']:>6} {total:>6} {duplicates(two):>10}"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="100,1000", help="insight counts, comma-separated")
    args = parser.parse_args()
    print("insight bundles between two workspaces; milliseconds, one run each")
    print("read all = parse every insight file of `one` (the floor: export must read each once)")
    print("write floor = the imported files written again with the same durable exclusive create")
    print("2nd = the edited bundle (a tenth new content, a tenth white space only, N/10 added); 3rd = it again")
    print(
        f"{'insights':>9} {'read all':>10} {'export':>9} {'preview':>10} {'import':>9} {'write floor':>11}   {'imp.':>5} {'sanitized':>9}   {'new/dup/conf':<13} {'2nd':>6} {'3rd':>6} {'total':>6} {'duplicates':>10}"
    )
    for size in (int(part) for part in args.sizes.split(",")):
        run(size)


if __name__ == "__main__":
    main()
