"""Deterministic corpus of markdown documents with YAML frontmatter, for benchmarks.

`generate(root, count, seed)` writes `count` documents into nested folders under `root` and
returns their paths. The same seed always gives the same bytes, so figures from different runs
and issues compare. The mix mirrors what a workspace holds: capsules, messages, tasks, insights
and sessions; most frontmatter is flat `key: value` lines, and about one document in five has
what hand editing brings (comments, quoted strings, block lists, nested mappings).

Run it directly to build a corpus on disk: `python bench/corpus.py DIR --count 10000`.
"""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

WORDS = (
    "auth token session cache index router inbox outbox capsule plan task epic worker review "
    "deploy schema migration retry timeout lock queue handoff summary decision risk test bench "
    "parser writer frontmatter sidecar envoy sleeve merge branch commit release budget latency"
).split()
KINDS = ("capsule", "message", "task", "insight", "session")
STATUSES = ("open", "in_progress", "blocked", "done", "closed")
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _sentence(rng: random.Random) -> str:
    text = _words(rng, 6, 18)
    return text[0].upper() + text[1:] + "."


def _ulid(rng: random.Random, moment: datetime) -> str:
    number = (int(moment.timestamp() * 1000) << 80) | rng.getrandbits(80)
    return "".join(CROCKFORD[(number >> shift) & 31] for shift in range(125, -1, -5))


def _body(rng: random.Random, kind: str) -> str:
    if kind == "capsule":
        sections = ("Objective", "Current status", "Decisions", "Next actions", "Key locations", "Open questions")
        parts = []
        for title in sections:
            lines = [f"- {_sentence(rng)}" for _ in range(rng.randint(1, 4))]
            parts.append(f"## {title}\n" + "\n".join(lines))
        return "\n\n".join(parts) + "\n"
    paragraphs = [" ".join(_sentence(rng) for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.2:
        paragraphs.append("```python\ndef handler(event):\n    return event\n```")
    if rng.random() < 0.1:
        paragraphs.append("---\nA horizontal rule above, inside the body.")
    return "\n\n".join(paragraphs) + "\n"


def _frontmatter(rng: random.Random, kind: str, index: int, moment: datetime) -> str:
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    tags = ", ".join(sorted({rng.choice(WORDS) for _ in range(rng.randint(0, 4))}))
    lines = [
        f"id: {_ulid(rng, moment)}",
        f"kind: {kind}",
        f"title: {_words(rng, 2, 7).capitalize()}",
        f"status: {rng.choice(STATUSES)}",
        f"tags: [{tags}]",
        f"created: {stamp}",
        f"updated: {stamp}",
        f"priority: {rng.randint(0, 3)}",
    ]
    if kind == "message":
        lines += [f"from: sleeve-{rng.randint(1, 9)}", f"to: sleeve-{rng.randint(1, 9)}", f"thread: t-{index % 97}"]
    if rng.random() < 0.2:  # what hand editing leaves behind
        lines.insert(1, "# edited by hand")
        lines.append(f'summary: "{_sentence(rng)} It says: yes."')
        lines.append("owners:\n  - alice\n  - bob")
        lines.append(f"links:\n  parent: {_ulid(rng, moment)}\n  note: 'see #{index}'")
    return "\n".join(lines) + "\n"


def generate(root: Path, count: int, seed: int = 42) -> list[Path]:
    """Write `count` documents under `root` (nested `<kind>/<bucket>/` folders); return paths."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    paths: list[Path] = []
    for index in range(count):
        kind = KINDS[index % len(KINDS)]
        moment = start + timedelta(minutes=index * 7 + rng.randint(0, 6))
        folder = root / kind / f"{index // 500:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{kind}-{index:06d}.md"
        text = f"---\n{_frontmatter(rng, kind, index, moment)}---\n{_body(rng, kind)}"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description="Write a deterministic benchmark corpus.")
    parser.add_argument("root", type=Path)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    paths = generate(args.root, args.count, args.seed)
    print(f"wrote {len(paths)} documents under {args.root}")


if __name__ == "__main__":
    main()
