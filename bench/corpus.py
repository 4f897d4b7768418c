"""Deterministic corpus of markdown documents with YAML frontmatter, for benchmarks.

`generate(root, count, seed)` writes `count` documents into nested folders under `root` and
returns their paths. The same seed always gives the same bytes, so figures from different runs
and issues compare. The mix mirrors what a workspace holds: capsules, messages, tasks, insights
and sessions; most frontmatter is flat `key: value` lines, and about one document in five has
what hand editing brings (comments, quoted strings, block lists, nested mappings).

`generate_workspace(root, count, seed)` lays the same mix out as a real workspace, each kind
in its own place and format (insights and sessions under `.moss/`, capsules in name slots,
needlecast messages one file each, board tasks, and a cstack PLAN.md/MEMORY.md/CURRENT.md), so
the search index reads every kind through its own source.

Run it directly to build a corpus on disk: `python bench/corpus.py DIR --count 10000`
(add `--workspace` for the workspace layout).
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


def _sentence(rng: random.Random, words=None) -> str:
    text = (words or _words)(rng, 6, 18)
    return text[0].upper() + text[1:] + "."


def _ulid(rng: random.Random, moment: datetime) -> str:
    number = (int(moment.timestamp() * 1000) << 80) | rng.getrandbits(80)
    return "".join(CROCKFORD[(number >> shift) & 31] for shift in range(125, -1, -5))


def _body(rng: random.Random, kind: str, words=None) -> str:
    if kind == "capsule":
        sections = ("Objective", "Current status", "Decisions", "Next actions", "Key locations", "Open questions")
        parts = []
        for title in sections:
            lines = [f"- {_sentence(rng, words)}" for _ in range(rng.randint(1, 4))]
            parts.append(f"## {title}\n" + "\n".join(lines))
        return "\n\n".join(parts) + "\n"
    paragraphs = [" ".join(_sentence(rng, words) for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 4))]
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


INSIGHT_TYPES = ("domain", "architecture", "edge_case", "technical")
# Workspace bodies mix the topical words (one word in ten) with a Zipf-distributed vocabulary
# of made-up words, so that, as in real text, a topical word is in about a fifth of the
# documents and most words are rare. `dense=True` keeps the 40-word bodies of `generate`,
# where every word is in most documents: the worst case for ranking.
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "fe", "gi", "hu", "ja", "bo", "ce", "ly", "wu", "xo")
VOCABULARY = tuple(dict.fromkeys(a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in ("", "n", "r", "st", "l")))
_ZIPF = tuple(__import__("itertools").accumulate(1.0 / (rank + 1) ** 1.07 for rank in range(len(VOCABULARY))))


def _zipf_words(rng: random.Random, low: int, high: int) -> str:
    count = rng.randint(low, high)
    picked = rng.choices(VOCABULARY, cum_weights=_ZIPF, k=count)
    return " ".join(rng.choice(WORDS) if rng.random() < 0.1 else word for word in picked)


MESSAGE_TYPES = ("task", "question", "response", "milestone", "done")
OUTCOMES = ("COMPLETE", "PARTIAL", "BLOCKED")


def _dated_id(rng: random.Random, prefix: str, moment: datetime) -> str:
    suffix = "".join(rng.choice(CROCKFORD.lower()) for _ in range(8))
    return f"{prefix}-{moment:%Y%m%d}-{suffix}"


def _workspace_file(rng: random.Random, kind: str, index: int, moment: datetime, words=_zipf_words) -> tuple[str, str]:
    """(relative path, text) of one artifact of `kind` in the workspace layout."""
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    tags = ", ".join(sorted({rng.choice(WORDS) for _ in range(rng.randint(0, 4))}))
    hand = rng.random() < 0.2  # what hand editing leaves behind
    if kind == "insight":
        ident = _dated_id(rng, "INS", moment)
        lines = [f"id: {ident}", f"type: {rng.choice(INSIGHT_TYPES)}", f"status: {rng.choice(('unprocessed', 'discussed'))}", f"tags: [{tags}]"]
        if hand:
            lines.insert(1, "# edited by hand")
            lines.append(f'summary: "{_sentence(rng, words)}"')
            lines.append(f"source:\n  task: LF-{index % 300:03d}\n  session: ses-{index % 50}")
        lines += [f"created: {stamp}", f"updated: {stamp}"]
        return f".moss/insights/{ident}.md", "---\n" + "\n".join(lines) + "\n---\n" + _body(rng, kind, words)
    if kind == "session":
        ident = _dated_id(rng, "SES", moment)
        ended = (moment + timedelta(minutes=rng.randint(5, 300))).strftime("%Y-%m-%dT%H:%M:%SZ")
        actions = "\n".join(f"  - {_words(rng, 3, 8)}" for _ in range(rng.randint(1, 3)))
        lines = [
            f"id: {ident}",
            f"task: LF-{index % 300:03d}",
            f"started: {stamp}",
            f"ended: {ended}",
            f"outcome: {rng.choice(OUTCOMES)}",
            f"next_actions:\n{actions}",
        ]
        body = f"## Summary\n\n{_sentence(rng, words)} {_sentence(rng, words)}\n\n## Learnings\n\n- {_sentence(rng, words)}\n"
        return f".moss/sessions/{ident}.md", "---\n" + "\n".join(lines) + "\n---\n" + body
    if kind == "capsule":
        ident = _ulid(rng, moment)
        lines = [f"id: {ident}", f"title: {_words(rng, 2, 7).capitalize()}", f"tags: [{tags}]", f"created_at: {stamp}", f"updated_at: {stamp}"]
        if hand:
            lines.insert(1, "# edited by hand")
        return f".moss/capsules/team-{index % 7}/capsule-{index:06d}.md", "---\n" + "\n".join(lines) + "\n---\n" + _body(rng, kind, words)
    if kind == "message":
        ident = _ulid(rng, moment)
        sender = f"sleeve-{rng.randint(1, 9)}"
        box = "inbox" if index % 2 else "archive"
        lines = [
            f"id: {ident}",
            f"from: {sender}",
            f"to: sleeve-{rng.randint(1, 9)}",
            f"thread: t-{index % 97}",
            f"type: {rng.choice(MESSAGE_TYPES)}",
            f"time: {stamp}",
        ]
        return f".needlecast/{box}/{moment:%Y%m%dT%H%M%SZ}_{sender}_{ident}.md", "---\n" + "\n".join(lines) + "\n---\n" + _body(rng, kind, words)
    ident = _dated_id(rng, "TSK", moment)
    lines = [
        f"id: {ident}",
        "kind: task",
        f"title: {_words(rng, 2, 7).capitalize()}",
        f"status: {rng.choice(STATUSES)}",
        f"priority: {rng.randint(0, 3)}",
        f"tags: [{tags}]",
        f"created: {stamp}",
        f"updated: {stamp}",
    ]
    return f".moss/board/tasks/{index // 500:03d}/{ident}.md", "---\n" + "\n".join(lines) + "\n---\n" + _body(rng, kind, words)


def generate_workspace(root: Path, count: int, seed: int = 42, *, dense: bool = False) -> list[Path]:
    """Write `count` artifacts under `root` in the workspace layout (plus the three cstack
    files, whose task lines and entries are extra items); return the paths written."""
    words = _words if dense else _zipf_words
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    paths: list[Path] = []
    for index in range(count):
        kind = KINDS[index % len(KINDS)]
        moment = start + timedelta(minutes=index * 7 + rng.randint(0, 6))
        relpath, text = _workspace_file(rng, kind, index, moment, words)
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    stack = root / ".cstack"
    stack.mkdir(parents=True, exist_ok=True)
    markers = " >x!~"
    tasks = "\n".join(
        f"- [{rng.choice(markers)}] P{rng.randint(0, 3)}: {_words(rng, 3, 8).capitalize()} #{rng.choice(WORDS)} (id: t{n})" for n in range(max(5, count // 100))
    )
    files = {
        "PLAN.md": f"# Plan\n\n## Tasks\n{tasks}\n\n## Notes\n{_sentence(rng)}\n",
        "MEMORY.md": "# Memory\n\n## Gotchas\n" + "\n".join(f"- {_sentence(rng)}" for _ in range(max(3, count // 500))) + "\n",
        "CURRENT.md": f"# Current\n\n## Now\n{_sentence(rng)}\n\n## Next Steps\n- {_sentence(rng)}\n",
    }
    for name, text in files.items():
        (stack / name).write_text(text, encoding="utf-8")
        paths.append(stack / name)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description="Write a deterministic benchmark corpus.")
    parser.add_argument("root", type=Path)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--workspace", action="store_true", help="Lay the corpus out as a real workspace.")
    args = parser.parse_args()
    paths = (generate_workspace if args.workspace else generate)(args.root, args.count, args.seed)
    print(f"wrote {len(paths)} documents under {args.root}")


if __name__ == "__main__":
    main()
