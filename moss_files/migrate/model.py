"""What every migration shares: where a source item came from, the items a reader offers, the
plan (created, changed, skipped, and why), derived ids, times, provenance keys and the report.

Core layer: pure functions over values (no I/O; the clock's reading comes in as text). A reader
turns a source into Candidates, each one file our workspace would hold, keyed by the id the
item had in its source. `decide` compares them with what the workspace holds already: an item
imported before is recognised by that old id (kept in the new file's frontmatter as
`imported_from` and `source_id`) and skipped, so a second run changes nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from moss_files.foundation import document, yaml_reader
from moss_files.foundation.errors import Conflict, InvalidDocument
from moss_files.foundation.ids import CROCKFORD
from moss_files.migrate.ledger import DROPPED, EXAMPLES, Fate, item_fates, summarize

_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
SOURCES = ("moss", "moe", "loopflow", "backlog", "beads", "cortical", "needlecast")
CREATE, CHANGE, SKIP = "create", "change", "skip"
REPORT_DIR = ".moss/migrations"
# Provenance keys every imported file carries (capsules keep their Moss ids instead).
IMPORTED_FROM, SOURCE_ID, SOURCE_FIELDS = "imported_from", "source_id", "source_fields"


# --------------------------------------------------------------------------- locations


@dataclass(frozen=True, slots=True)
class Where:
    """Where a source item is: a file (as shown to people), and a line or a JSON path in it."""

    file: str
    line: int | None = None
    pointer: str | None = None  # JSON path such as `tasks[3].status`

    def __str__(self) -> str:
        if self.line is not None:
            return f"{self.file}:{self.line}"
        if self.pointer:
            return f"{self.file}#{self.pointer}"
        return self.file


def source_error(message: str, where: Where, **details: Any) -> InvalidDocument:
    """The error that stops a source: SOURCE_INVALID naming the file and line or JSON path."""
    if where.pointer:
        details = {"json_path": where.pointer, **details}
    shown = f"{message} (at {where.pointer})" if where.pointer and where.line is None else message
    return InvalidDocument(shown, code="SOURCE_INVALID", path=where.file, line=where.line, details=details)


# --------------------------------------------------------------------------- candidates and the plan


@dataclass(frozen=True, slots=True)
class Candidate:
    """One file a source item becomes: `path` relative to the workspace root, holding `data`,
    or what `data()` renders: the text of an item imported before is never rendered again,
    which keeps a second run over ten thousand items cheap."""

    kind: str
    old_id: str
    new_id: str
    path: str
    data: bytes | Callable[[], bytes]
    where: Where
    note: str | None = None
    fates: tuple[Fate, ...] = ()  # what became of each source field (see `ledger`)
    made: bool = False  # made here to hold others (an epic for a system without epics), not a source item

    def content(self) -> bytes:
        return self.data if isinstance(self.data, bytes) else self.data()


@dataclass(frozen=True, slots=True)
class Item:
    """What happens to one source item: created (a new file), changed (added to an existing
    file), or skipped with the reason; `loss` marks a skip that leaves the item's content
    behind (an unreadable file, a refused item), as opposed to one imported before or one
    the source system itself does not read."""

    kind: str
    old_id: str
    where: Where
    action: str
    path: str | None = None
    new_id: str | None = None
    reason: str | None = None
    fates: tuple[Fate, ...] = ()
    made: bool = False
    loss: bool = False


@dataclass(frozen=True, slots=True)
class Comment:
    """A board comment made from a source's comment (Moe, Beads, Backlog.md): the task's new
    id and the comment's JSONL record."""

    task: str
    record: dict[str, Any]


@dataclass(slots=True)
class TrackerPlan:
    """The plan of an issue tracker's export (Backlog.md's folder, a Beads file): candidates,
    skipped entries, the comments of new tasks (by the task's new id), notes."""

    candidates: list[Candidate] = field(default_factory=list)
    skipped: list[Item] = field(default_factory=list)
    comments: dict[str, list[Comment]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    later: Iterable[Candidate] = ()  # candidates made one at a time as this is consumed (see `every_candidate`)

    def every_candidate(self) -> Iterator[Candidate]:
        """`candidates`, then those of `later`: a reader that makes its candidates as they are
        consumed (Beads) fills `comments` meanwhile, so read those only after this is exhausted."""
        yield from self.candidates
        yield from self.later


@dataclass(frozen=True, slots=True)
class Write:
    """One write the plan makes. `create`: a new file, never replacing one. `append`: bytes added
    at the end of a file (a log). `replace`: a file rewritten, only if it still holds `expected`."""

    path: str
    data: bytes
    mode: str = CREATE
    expected: bytes | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """A source's whole migration, decided before anything is written."""

    source: str
    origin: str  # where the source was read, as shown to people
    items: tuple[Item, ...] = ()
    writes: tuple[Write, ...] = ()
    removals: tuple[str, ...] = ()  # source files --move takes away once the writes are verified
    notes: tuple[str, ...] = ()
    version: str | None = None  # the source format's version, as detected
    checks: tuple[dict[str, Any], ...] = ()  # files checked, not written (cstack's own files)
    accounted: bool = False  # whether the reader accounts every field (see `ledger`)

    def count(self, action: str) -> int:
        return sum(1 for item in self.items if item.action == action)

    @property
    def empty(self) -> bool:
        return not self.writes and not self.removals


def decide(
    candidates: Iterable[Candidate],
    imported: Mapping[tuple[str, str], str],
    existing: set[str],
    *,
    max_bytes: Mapping[str, int] | None = None,
) -> tuple[list[Item], list[Write]]:
    """Items and writes for `candidates`: an item whose (kind, old id) the workspace holds
    already is skipped (`imported` maps it to its file); the same id twice in one source keeps
    the first; an item whose file would be larger than its kind's reading limit (`max_bytes`
    by kind) is refused, a reported skip, because a file its readers refuse would break every
    listing. Raises Conflict ALREADY_EXISTS when a new file's place is taken by a file that is
    not this item's import."""
    items: list[Item] = []
    writes: list[Write] = []
    seen: dict[tuple[str, str], Where] = {}
    clashes: list[str] = []
    limits = max_bytes or {}
    examples: dict[tuple[str, str], set[str]] = {}
    shared: dict[tuple[str, str, str | None, str | None, str | None], Fate] = {}
    for candidate in candidates:
        key = (candidate.kind, candidate.old_id)
        if key in imported:
            items.append(Item(candidate.kind, candidate.old_id, candidate.where, SKIP, imported[key], reason="already imported", made=candidate.made))
            continue
        if key in seen:
            items.append(
                Item(
                    candidate.kind,
                    candidate.old_id,
                    candidate.where,
                    SKIP,
                    reason=f"the source holds this id twice; the first, at {seen[key]}, is imported",
                    made=candidate.made,
                    loss=True,
                )
            )
            continue
        seen[key] = candidate.where
        if candidate.path in existing:
            clashes.append(candidate.path)
            continue
        data = candidate.content()
        limit = limits.get(candidate.kind)
        if limit is not None and len(data) > limit:
            reason = f"refused: its file would be {len(data)} bytes, over the {limit} bytes the board reads (FILE_TOO_LARGE); nothing of it is written"
            items.append(Item(candidate.kind, candidate.old_id, candidate.where, SKIP, reason=reason, made=candidate.made, loss=True))
            continue
        existing.add(candidate.path)
        fates = _example_values_only(candidate.fates, candidate.old_id, examples, shared)
        items.append(Item(candidate.kind, candidate.old_id, candidate.where, CREATE, candidate.path, candidate.new_id, candidate.note, fates, candidate.made))
        writes.append(Write(candidate.path, data))
    if clashes:
        raise Conflict(
            f"{len(clashes)} file(s) the migration would create exist already and are not its imports: {', '.join(clashes[:5])}",
            code="ALREADY_EXISTS",
            path=clashes[0],
            details={"paths": clashes},
            hint="move those files away, or give the source another --project name",
        )
    return items, writes


def _example_values_only(
    fates: tuple[Fate, ...],
    old_id: str,
    examples: dict[tuple[str, str], set[str]],
    shared: dict[tuple[str, str, str | None, str | None, str | None], Fate],
) -> tuple[Fate, ...]:
    """`fates` without the source values the ledger will not show. `summarize` shows a value
    only in the examples of a field and fate: the first fate of each of the first EXAMPLES
    items (distinct old ids) that have them, in order. Items are decided in that order, so the
    values of the others can go: at a hundred thousand items they are most of a plan's size.
    `examples` holds, per (field, fate), the ids whose value is kept so far. A fate left
    without a value is one of few (the same field, fate, home and reason for most items):
    `shared` gives one object for each."""
    lean: list[Fate] = []
    firsts: set[tuple[str, str]] = set()
    for fate in fates:
        key = fate[:2]  # (field, fate): slices of the named tuple, cheaper than tuples built of its names
        first = key not in firsts
        firsts.add(key)
        if fate.value is not None and first:
            ids = examples.setdefault(key, set())
            if len(ids) < EXAMPLES and old_id not in ids:
                ids.add(old_id)
                lean.append(fate)
                continue
        whole = fate[:5]  # every field but the value
        common = shared.get(whole)
        if common is None:
            common = shared[whole] = fate if fate.value is None else Fate(*whole)
        lean.append(common)
    return tuple(lean)


# --------------------------------------------------------------------------- ids and times


def derived_id(prefix: str, scope: str, kind: str, old_id: str, day: str) -> str:
    """The id an imported item gets: `<PREFIX>-<YYYYMMDD>-<8 characters>` (our id form), the
    characters drawn from a hash of where the item came from. The same source item therefore
    gets the same id in every clone that migrates it, so two clones that migrate offline merge
    without duplicates."""
    digest = hashlib.blake2b(f"{scope}\0{kind}\0{old_id}".encode("utf-8", "surrogatepass"), digest_size=5).digest()
    number = int.from_bytes(digest, "big")
    chars = "".join(CROCKFORD[(number >> shift) & 31] for shift in range(35, -1, -5))
    return f"{prefix}-{day}-{chars}"


def day_of(stamp: str | None, fallback: str) -> str:
    """`YYYYMMDD` of an RFC 3339 time (or `fallback`, already in that form)."""
    if stamp and re.match(r"^\d{4}-\d{2}-\d{2}", stamp):
        return stamp[:10].replace("-", "")
    return fallback


_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?\s*(Z|[+-]\d{2}:?\d{2})?$", re.IGNORECASE)


def iso_time(value: Any) -> str | None:
    """An RFC 3339 UTC time with seconds (`2026-01-21T10:00:00Z`) from the forms sources use:
    ISO 8601 with or without a fraction or offset (Moe writes seven fraction digits), a date
    alone, `2026-08-17 07:26` (Backlog.md), or unix seconds or milliseconds. None when the
    value is empty or none of these."""
    if not isinstance(value, str):  # text first: three times an item of a large source
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        seconds = value / 1000 if value > 10**11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        except (OverflowError, OSError, ValueError):
            return None
    text = value.strip()
    if not _ISO.match(text):
        return None
    if len(text) > 19 and text[10] == "T" and text[-1] != "z":
        # The common full form (`2026-02-06T22:05:35.439Z`, `…123456-08:00`): Python 3.11's
        # reader takes it whole, fraction of any length and `Z` included.
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            return _utc_text(moment)
    text = text.replace(" ", "T", 1) if len(text) > 10 and text[10] == " " else text
    if len(text) == 10:
        text += "T00:00:00"
    fraction = re.search(r"\.(\d+)", text)
    if fraction and len(fraction.group(1)) > 6:
        text = text[: fraction.start(1) + 6] + text[fraction.end(1) :]  # Python reads at most six digits
    text = re.sub(r"[zZ]$", "+00:00", text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return _utc_text(moment)


def _utc_text(moment: datetime) -> str | None:
    """`moment` (UTC when it names no offset) as RFC 3339 UTC text; None when UTC falls
    outside the years 1–9999 (`0001-01-01T00:00:00+08:00`)."""
    if moment.utcoffset():  # neither naive nor UTC already
        try:
            moment = moment.astimezone(UTC)
        except OverflowError:
            return None
    if moment.year >= 1000:
        # Its ISO text, a third of the cost of `strftime`, which writes years before 1000
        # unpadded; seconds are its first 19 characters (`timespec` costs half as much again).
        return moment.isoformat()[:19] + "Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- provenance


def with_provenance(text: str, imported_from: str, source_id: str, fields: Mapping[str, Any] | None = None) -> str:
    """A new file's text with the provenance keys added at the end of its frontmatter:
    `imported_from` (the system, and its project when it names one), `source_id` (the id the
    item had there) and, when given, `source_fields` (the source's fields this toolkit has no
    key for, kept as they were)."""
    extra: dict[str, Any] = {IMPORTED_FROM: imported_from, SOURCE_ID: source_id}
    if fields:
        extra[SOURCE_FIELDS] = dict(fields)
    head, fm_text, tail, body = document.split(text)
    added_fm = _block(extra)
    if not head:
        return f"{document.FENCE}\n{added_fm}{document.FENCE}\n{body}"
    return head + fm_text + added_fm + tail + body


def _block(extra: Mapping[str, Any]) -> str:
    """YAML lines for `extra`: the round-trip emitter's text, rendered directly for the plain
    values almost every source has (`yamlrt.dump_simple`); else PyYAML's C emitter (ten times
    faster than the round-trip emitter, which matters at ten thousand files), checked to read
    back as the same values under the toolkit's YAML 1.2 reader, its text rendered directly
    where `yamlrt.dump_libyaml_simple` follows it (multi-line text, mostly); else the
    round-trip emitter."""
    import moss_files.foundation.yaml_editor as yamlrt  # ruamel: loaded by writes only; `import … as` skips fromlist handling

    values = dict(extra)
    simple = yamlrt.dump_simple(values)
    if simple is not None:
        return simple
    if _DUMPER is not yaml.SafeDumper:  # libyaml's text is what the fast path follows
        followed = yamlrt.dump_libyaml_simple(values)
        if followed is not None:
            return followed
    return _block_dumped(values)


def _block_dumped(extra: Mapping[str, Any]) -> str:
    """`_block`'s general path: PyYAML's text, read back to check it, else the round-trip
    emitter's."""
    values = dict(extra)
    try:
        text = yaml.dump(values, Dumper=_DUMPER, default_flow_style=False, sort_keys=False, allow_unicode=True, width=4096)
        if yaml_reader.load_fast(text) == values:
            return text
    except (yaml.YAMLError, yaml_reader.YamlProblem, ValueError):
        pass
    rendered = document.render(extra, "")
    return rendered[len(document.FENCE) + 1 : -(len(document.FENCE) + 1)]


def provenance_of(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """(imported_from, source_id) of a file's frontmatter, when it has both."""
    origin = meta.get(IMPORTED_FROM)
    old = meta.get(SOURCE_ID)
    if isinstance(origin, str) and isinstance(old, str | int) and not isinstance(old, bool):
        return origin, str(old)
    return None


def system_name(source: str, project: str | None) -> str:
    """The `imported_from` value: the system, and the project within it when one is named."""
    return f"{source}:{project}" if project else source


# --------------------------------------------------------------------------- the report


def item_to_dict(item: Item) -> dict[str, Any]:
    """One item of the report: where it came from, what happened to it, and how its fields
    departed from a plain mapping (kept verbatim, dropped, changed)."""
    data: dict[str, Any] = {"kind": item.kind, "old_id": item.old_id, "from": str(item.where), "action": item.action}
    if item.path is not None:
        data["path"] = item.path
    if item.new_id is not None:
        data["new_id"] = item.new_id
    if item.reason is not None:
        data["reason"] = item.reason
    if item.made:
        data["made"] = True
    if item.loss:
        data["loss"] = True
    data.update(item_fates(item.fates))
    return data


def ledger(plan: Plan) -> dict[str, Any]:
    """The plan's ledger: the source items in, out and skipped (in = out + skipped; `added`
    counts the items made here to hold others, `lost` the skips that leave content behind,
    each listed with its reason), and, for a source whose reader accounts its fields, each
    field's fate (`ledger.summarize`); `lossless` when nothing is lost or dropped."""
    source_items = [item for item in plan.items if not item.made]
    skipped = [item for item in source_items if item.action == SKIP]
    lost = [item for item in plan.items if item.loss]
    fields = summarize((item.old_id, item.fates) for item in plan.items if item.action != SKIP) if plan.accounted else None
    dropped = {name: entry[DROPPED] for name, entry in (fields or {}).items() if entry[DROPPED]}
    return {
        "items": {
            "in": len(source_items),
            "out": len(source_items) - len(skipped),
            "skipped": len(skipped),
            "added": sum(1 for item in plan.items if item.made and item.action != SKIP),
            "lost": [{"kind": item.kind, "old_id": item.old_id, "from": str(item.where), "reason": item.reason} for item in lost],
        },
        "fields": fields,
        "dropped": dropped,
        "accounted": plan.accounted,
        "lossless": plan.accounted and not lost and not dropped,
    }


def losses(plan: Plan) -> InvalidDocument | None:
    """The error a --strict run raises when the plan would leave anything behind (an item
    skipped with a loss, a field dropped, or a source whose fields are not accounted), else
    None."""
    summary = ledger(plan)
    if summary["lossless"]:
        return None
    parts = []
    if summary["items"]["lost"]:
        parts.append(f"{len(summary['items']['lost'])} item(s) would not be imported")
    if summary["dropped"]:
        parts.append("field(s) would be dropped: " + ", ".join(f"{name} ({count})" for name, count in summary["dropped"].items()))
    if not plan.accounted:
        parts.append(f"the {plan.source} reader does not account every field")
    first = summary["items"]["lost"][0] if summary["items"]["lost"] else None
    return InvalidDocument(
        "--strict: " + "; ".join(parts) + "; nothing was written",
        code="MIGRATION_WOULD_DROP",
        path=first["from"].rsplit(":", 1)[0] if first else None,
        details={"lost": summary["items"]["lost"], "dropped": summary["dropped"]},
        hint="run without --strict to import the rest; the report lists each loss and why",
    )


def plan_to_dict(plan: Plan, *, dry_run: bool, report: str | None = None, moved: Sequence[str] = ()) -> dict[str, Any]:
    """The one JSON shape of a migration: what `moss migrate … --json` prints and the report
    file holds."""
    created_files = sorted({write.path for write in plan.writes if write.mode == CREATE})
    changed_files = sorted({write.path for write in plan.writes if write.mode != CREATE})
    return {
        "source": plan.source,
        "from": plan.origin,
        "version": plan.version,
        "dry_run": dry_run,
        "created": plan.count(CREATE),
        "changed": plan.count(CHANGE),
        "skipped": plan.count(SKIP),
        "files": {"created": created_files, "changed": changed_files, "removed": list(plan.removals) if dry_run else list(moved)},
        "items": [item_to_dict(item) for item in plan.items],
        "ledger": ledger(plan),
        "checks": list(plan.checks),
        "notes": list(plan.notes),
        "report": report,
    }


def report_name(source: str, stamp: str) -> str:
    """The report file's path for a run started at `stamp` (RFC 3339)."""
    return f"{REPORT_DIR}/{stamp.replace(':', '-')}-{source}.json"


@dataclass(slots=True)
class Builder:
    """Collects a plan's parts while a service gathers them (items from several kinds)."""

    source: str
    origin: str
    items: list[Item] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    removals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    version: str | None = None
    accounted: bool = False

    def add(self, items: Iterable[Item], writes: Iterable[Write] = ()) -> None:
        self.items.extend(items)
        self.writes.extend(writes)

    def skip(self, kind: str, old_id: str, where: Where, reason: str, *, loss: bool = False) -> None:
        self.items.append(Item(kind, old_id, where, SKIP, reason=reason, loss=loss))

    def build(self) -> Plan:
        return Plan(
            self.source,
            self.origin,
            tuple(self.items),
            tuple(self.writes),
            tuple(self.removals),
            tuple(self.notes),
            self.version,
            tuple(self.checks),
            self.accounted,
        )
