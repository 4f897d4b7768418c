"""Throughput of the document layer: fast read path vs. faithful edit path, docs/s.

Usage: python bench/parse.py [--sizes 1000 10000] [--seed 42]

For each corpus size it prints, with the corpus size:
- baseline: read + split + PyYAML C loader (default YAML 1.1 resolver), the usual approach;
- fast read: `fs.read_document` (decode, split, plain scanner / C loader fallback, checks);
- edit in memory: `document.edit_frontmatter` changing one key (ruamel round trip + splice);
- edit on disk: `fs.modify_document` (lock, read, edit, stale check, atomic fsynced write),
  on a sample, since each write fsyncs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import generate

from moss_files.foundation import document, fs

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def baseline(paths: list[Path]) -> None:
    for path in paths:
        text = path.read_text(encoding="utf-8")
        end = text.index("\n---\n", 4)
        yaml.load(text[4:end], Loader=LOADER)


def fast_read(paths: list[Path]) -> None:
    for path in paths:
        fs.read_document(path)


def edit_in_memory(texts: list[str]) -> None:
    for text in texts:
        document.edit_frontmatter(text, {"status": "reviewed"})


def edit_on_disk(paths: list[Path]) -> None:
    for path in paths:
        fs.modify_document(path, lambda doc: document.edit_frontmatter(doc.text, {"status": "reviewed-on-disk"}))


def rate(run, items: list, repeats: int = 3) -> float:
    """Best-of-`repeats` items per second."""
    best = min(_timed(run, items) for _ in range(repeats))
    return len(items) / best


def _timed(run, items: list) -> float:
    started = time.perf_counter()
    run(items)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, libyaml C loader: {LOADER.__name__ == 'CSafeLoader'}")
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="moss-bench-") as tmp:
            paths = generate(Path(tmp), size, args.seed)
            texts = [path.read_text(encoding="utf-8") for path in paths]
            mean_bytes = statistics.mean(len(t.encode()) for t in texts)
            base = rate(baseline, paths)
            fast = rate(fast_read, paths)
            edit = rate(edit_in_memory, texts[: min(size, 2000)], repeats=1)
            disk = rate(edit_on_disk, paths[: min(size, 300)], repeats=1)
            print(f"\ncorpus: {size} documents, mean {mean_bytes:.0f} bytes, seed {args.seed}")
            print(f"  baseline (PyYAML C loader):   {base:9.0f} docs/s")
            print(f"  fast read path:               {fast:9.0f} docs/s  ({fast / base:.2f}x baseline)")
            print(f"  edit path, in memory:         {edit:9.0f} docs/s  ({edit / base:.2f}x baseline)")
            print(f"  edit path, durable on disk:   {disk:9.0f} docs/s  (lock + fsync per document)")


if __name__ == "__main__":
    main()
