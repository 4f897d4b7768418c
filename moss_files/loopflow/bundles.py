"""Insight bundles: LoopFlow's sharing format, and the decisions of export, preview and import.

Core layer: pure functions over insights and parsed JSON (no I/O; the clock, ids and the
sanitizer's result come in). A bundle is one JSON file (LoopFlow's spec, version 1.0):

    {"version": "1.0", "exported_at": "...Z", "source_repo": {"name", "hash"},
     "insights": [{"original_id", "content", "summary", "context", "type", "status", "tags",
                   "links", "source", "notes", "created", "exported_from_repo", "content_hash"}],
     "metadata": {"total_count", "export_reason"?, "linked_added", "sanitized": {kind: n}}}

A LoopFlow `insights.json` export (`schema_version`, `insights: [{id, content, ...}]`) is
read as a bundle too. Identity across repositories is the content hash (whitespace-insensitive,
never trusted from the file) and the original id (an insight imported earlier records it as
`source.original_id`): an entry whose content is here already is a duplicate; one whose id is
here with other content is a conflict; the rest are new. Importing gives new insights fresh
ids and rewrites every link that names a bundled or known insight to its id here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import moss_files.loopflow.insights as insight_core
from moss_files.foundation import formats
from moss_files.foundation.errors import InvalidDocument, InvalidRequest
from moss_files.loopflow.insights import Insight

BUNDLE_VERSION = "1.0"
STATUSES = ("new", "duplicate", "conflict")
ORIGIN_KEY = "original_id"  # the key in `source` that records where an imported insight came from
REPO_KEY = "repo"


def content_hash(content: str) -> str:
    """The hash that identifies an insight's content: sha256 of its words, white space ignored."""
    return "sha256:" + hashlib.sha256(" ".join(content.split()).encode("utf-8")).hexdigest()[:32]


def repo_hash(name: str) -> str:
    """A short, stable hash naming a repository without revealing where it lives."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class Entry:
    """One insight as a bundle carries it."""

    original_id: str
    content: str
    type: str = insight_core.DEFAULT_TYPE
    status: str = insight_core.DEFAULT_STATUS
    summary: str | None = None
    context: str | None = None
    tags: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    source: Mapping[str, str] = field(default_factory=dict)
    notes: str | None = None
    created: str | None = None
    exported_from: str | None = None

    @property
    def hash(self) -> str:
        return content_hash(self.content)


@dataclass(frozen=True, slots=True)
class Bundle:
    """A bundle as read: where it came from, its entries, and its free metadata."""

    entries: tuple[Entry, ...]
    source_name: str | None = None
    source_hash: str | None = None
    exported_at: str | None = None
    format: str = "bundle"  # or "loopflow-insights" for a LoopFlow insights.json
    metadata: Mapping[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- export


def select(
    insights: Sequence[Insight],
    *,
    ids: Sequence[str] = (),
    tags: Sequence[str] = (),
    types: Sequence[str] = (),
    matched: Sequence[str] | None = None,
    include_links: bool = True,
) -> tuple[list[Insight], list[str]]:
    """The insights an export takes: those named by id, else every insight passing the tag
    (any), type (any) and query (`matched` ids) filters; with `include_links`, also every
    insight they link to, transitively. Returns the chosen insights (oldest first) and the ids
    added for their links. Raises InvalidRequest for an unknown id or type."""
    by_id = {item.id: item for item in insights}
    folded = {item.id.casefold(): item for item in insights}
    if ids:
        missing = [wanted for wanted in ids if wanted not in by_id and wanted.casefold() not in folded]
        if missing:
            raise InvalidRequest(f"no insight {', '.join(map(repr, missing))}", details={"missing": missing})
        chosen = [by_id.get(wanted) or folded[wanted.casefold()] for wanted in ids]
    else:
        wanted_types = {insight_core.check_type(t) for t in types}
        wanted_tags = {t.casefold() for t in tags}
        hits = set(matched) if matched is not None else None
        chosen = [
            item
            for item in insights
            if (not wanted_types or item.type in wanted_types)
            and (not wanted_tags or wanted_tags & {t.casefold() for t in item.tags})
            and (hits is None or item.id in hits)
        ]
    taken = {item.id for item in chosen}
    added: list[str] = []
    queue = list(chosen)
    while include_links and queue:
        for link in queue.pop(0).links:
            target = by_id.get(link) or folded.get(link.casefold())
            if target is not None and target.id not in taken:
                taken.add(target.id)
                added.append(target.id)
                chosen.append(target)
                queue.append(target)
    chosen.sort(key=lambda item: (item.created or "", item.id))
    return chosen, added


def entry_of(insight: Insight, clean: Callable[[str], str], repo: str) -> Entry:
    """The bundle entry of a local insight, every text passed through `clean` (the sanitizer)."""

    def maybe(value: str | None) -> str | None:
        return clean(value) if value else value

    return Entry(
        original_id=insight.id,
        content=clean(insight.content),
        type=insight.type,
        status=insight.status,
        summary=clean(insight.effective_summary),
        context=maybe(insight.effective_context),
        tags=insight.tags,
        links=insight.links,
        source={key: clean(value) for key, value in insight.source.items()},
        notes=maybe(insight.notes),
        created=insight.created,
        exported_from=repo,
    )


def entry_to_dict(entry: Entry) -> dict[str, Any]:
    """An entry in the bundle file's shape (LoopFlow's ExportedInsight)."""
    return {
        "original_id": entry.original_id,
        "content": entry.content,
        "summary": entry.summary,
        "context": entry.context,
        "type": entry.type,
        "status": entry.status,
        "tags": list(entry.tags),
        "links": list(entry.links),
        "source": dict(entry.source) or None,
        "notes": entry.notes,
        "created": entry.created,
        "exported_from_repo": entry.exported_from,
        "content_hash": entry.hash,
    }


def bundle_to_dict(bundle: Bundle) -> dict[str, Any]:
    """The bundle file's JSON document."""
    return {
        "version": BUNDLE_VERSION,
        "exported_at": bundle.exported_at,
        "source_repo": {"name": bundle.source_name, "hash": bundle.source_hash},
        "insights": [entry_to_dict(entry) for entry in bundle.entries],
        "metadata": {"total_count": len(bundle.entries), **bundle.metadata},
    }


# --------------------------------------------------------------------------- reading


def parse_bundle(data: Any, path: str | None = None) -> Bundle:
    """A bundle from a parsed JSON document: ours (version 1.0) or a LoopFlow insights.json.

    Content hashes in the file are recomputed, never trusted. Raises InvalidDocument
    SCHEMA_ERROR listing every entry that cannot be read (`details.errors`), so an import never
    takes part of a broken bundle.
    """
    if not isinstance(data, dict) or not isinstance(data.get("insights"), list):
        raise InvalidDocument("not an insight bundle: a JSON object with an 'insights' list is expected", code="SCHEMA_ERROR", path=path)
    if "version" in data:
        if str(data.get("version")) != BUNDLE_VERSION:
            formats.check_bundle_version(data.get("version"), path)  # FORMAT_TOO_NEW for "2.0"
            raise InvalidDocument(
                f"bundle version {data.get('version')!r} is not supported (expected {BUNDLE_VERSION})",
                code="SCHEMA_ERROR",
                path=path,
                details={"version": data.get("version")},
            )
        kind = "bundle"
    elif "schema_version" in data:
        kind = "loopflow-insights"
    else:
        raise InvalidDocument("not an insight bundle: it names neither 'version' nor 'schema_version'", code="SCHEMA_ERROR", path=path)
    entries: list[Entry] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, raw in enumerate(data["insights"]):
        try:
            entry = _entry(raw, kind)
        except InvalidRequest as problem:
            errors.append({"index": index, "original_id": raw.get("original_id", raw.get("id")) if isinstance(raw, dict) else None, "message": problem.message})
            continue
        if entry.original_id in seen:
            errors.append({"index": index, "original_id": entry.original_id, "message": "the id appears twice in the bundle"})
            continue
        seen.add(entry.original_id)
        entries.append(entry)
    if errors:
        raise InvalidDocument(f"{len(errors)} bundle entries cannot be read", code="SCHEMA_ERROR", path=path, details={"errors": errors})
    source_value = data.get("source_repo")
    source: dict[str, Any] = source_value if isinstance(source_value, dict) else {}
    metadata_value = data.get("metadata")
    metadata: dict[str, Any] = metadata_value if isinstance(metadata_value, dict) else {}
    return Bundle(
        entries=tuple(entries),
        source_name=_text(source.get("name")) or _text(data.get("source")),
        source_hash=_text(source.get("hash")),
        exported_at=_text(data.get("exported_at")),
        format=kind,
        metadata=metadata,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _entry(raw: Any, kind: str) -> Entry:
    if not isinstance(raw, dict):
        raise InvalidRequest("an entry must be a JSON object")
    original = raw.get("original_id") if kind == "bundle" else raw.get("id")
    if not isinstance(original, str) or not insight_core.is_valid_id(original.strip()):
        raise InvalidRequest("an entry needs an id made of letters, digits, '.', '_' and '-'")
    content = raw.get("content")
    if not isinstance(content, str) or not content.strip():
        raise InvalidRequest("an entry needs non-empty content")
    names: dict[str, tuple[str, ...]] = {}
    for key in ("tags", "links"):
        value = raw.get(key) or []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise InvalidRequest(f"{key} must be a list of strings")
        names[key] = insight_core.check_names(value, key[:-1])
    source = raw.get("source") or {}
    if not isinstance(source, dict):
        raise InvalidRequest("source must be an object")
    texts: dict[str, str | None] = {}
    for key in ("summary", "context", "notes", "created", "exported_from_repo"):
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            raise InvalidRequest(f"{key} must be text")
        texts[key] = value if value and value.strip() else None
    status = raw.get("status") or insight_core.DEFAULT_STATUS
    return Entry(
        original_id=original.strip(),
        content=content,
        type=insight_core.check_type(str(raw.get("type") or insight_core.DEFAULT_TYPE)),
        status=insight_core.check_status(str(status)),
        summary=texts["summary"],
        context=texts["context"],
        tags=names["tags"],
        links=names["links"],
        source={str(key): str(value) for key, value in source.items() if value is not None and not isinstance(value, dict | list)},
        notes=texts["notes"],
        created=texts["created"],
        exported_from=texts["exported_from_repo"],
    )


# --------------------------------------------------------------------------- preview and import


@dataclass(frozen=True, slots=True)
class Local:
    """An insight of this workspace as import sees it: the hashes its content goes by (as
    written, and as an export would sanitize it)."""

    insight: Insight
    hashes: frozenset[str]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What importing one entry would do: new, duplicate (its content is here as `existing`)
    or conflict (its id is here as `existing`, with other content)."""

    entry: Entry
    status: str
    existing: Insight | None = None


def preview(bundle: Bundle, local: Sequence[Local]) -> list[Verdict]:
    """The verdict for every entry of `bundle` against the workspace's insights."""
    by_id = {item.insight.id: item for item in local}
    by_origin: dict[str, Local] = {}
    for item in local:
        origin = item.insight.source.get(ORIGIN_KEY)
        if origin:
            by_origin.setdefault(origin, item)
    by_hash: dict[str, Local] = {}
    for item in local:
        for value in item.hashes:
            by_hash.setdefault(value, item)
    verdicts: list[Verdict] = []
    for entry in bundle.entries:
        twin = by_id.get(entry.original_id) or by_origin.get(entry.original_id)
        if twin is not None and entry.hash in twin.hashes:
            verdicts.append(Verdict(entry, "duplicate", twin.insight))
        elif entry.hash in by_hash:
            verdicts.append(Verdict(entry, "duplicate", by_hash[entry.hash].insight))
        elif twin is not None:
            verdicts.append(Verdict(entry, "conflict", twin.insight))
        else:
            verdicts.append(Verdict(entry, "new"))
    return verdicts


def unmapped_links(verdicts: Sequence[Verdict], local_ids: Iterable[str]) -> list[str]:
    """Links of the bundle's entries that name neither a bundled nor a local insight (they stay
    as written: they may name tasks or items the receiving workspace has under the same id)."""
    known = {v.entry.original_id for v in verdicts} | set(local_ids)
    known |= {v.existing.source.get(ORIGIN_KEY, "") for v in verdicts if v.existing is not None}
    return sorted({link for v in verdicts for link in v.entry.links if link not in known})


@dataclass(frozen=True, slots=True)
class Plan:
    """What an import writes: insights to create, insights to update (id -> Update), and what
    it leaves out, with the link mapping it used."""

    create: tuple[Insight, ...]
    update: tuple[tuple[str, insight_core.Update], ...]
    skipped: tuple[tuple[str, str], ...]  # (original id, why)
    mapping: Mapping[str, str]


def plan_import(
    bundle: Bundle,
    verdicts: Sequence[Verdict],
    *,
    new_id: Callable[[], str],
    now: str,
    selected: Sequence[str] | None = None,
    skip_duplicates: bool = True,
    skip_conflicts: bool = True,
) -> Plan:
    """Decide an import. Selected entries (all when `selected` is None) that are new become
    new insights (status unprocessed, for someone to review; `source` records the original id
    and repository); duplicates and conflicts are skipped, unless asked otherwise: a duplicate
    is then imported as a new insight, a conflict updates the local insight (content, summary,
    context, type, notes; tags and links added). Links are rewritten through the mapping
    original id -> id here. Raises InvalidRequest for a selected id the bundle lacks."""
    if selected is not None:
        known = {v.entry.original_id for v in verdicts}
        missing = [wanted for wanted in selected if wanted not in known]
        if missing:
            raise InvalidRequest(f"the bundle has no entry {', '.join(map(repr, missing))}", details={"missing": missing})
    chosen = set(selected) if selected is not None else None
    mapping: dict[str, str] = {}
    actions: list[tuple[Verdict, str]] = []  # (verdict, what to do: create | update | skip reason)
    for verdict in verdicts:
        original = verdict.entry.original_id
        if chosen is not None and original not in chosen:
            actions.append((verdict, "not selected"))
        elif verdict.status == "duplicate" and skip_duplicates:
            actions.append((verdict, "duplicate"))
        elif verdict.status == "conflict" and skip_conflicts:
            actions.append((verdict, "conflict"))
        elif verdict.status == "conflict":
            actions.append((verdict, "update"))
        else:
            actions.append((verdict, "create"))
        if actions[-1][1] == "create":
            mapping[original] = new_id()
        elif verdict.existing is not None:
            mapping[original] = verdict.existing.id

    def remap(links: Iterable[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(mapping.get(link, link) for link in links))

    def own(entry: Entry, name: str) -> str | None:
        # A summary or context the exporter generated from the content is generated again
        # here; only one written by hand is worth keeping in the file.
        value = getattr(entry, name)
        generated = getattr(Insight(id=entry.original_id, content=entry.content), f"effective_{name}")
        if not value or value == generated or (name == "summary" and "\n" in value.strip()):
            return None
        return value

    create: list[Insight] = []
    update: list[tuple[str, insight_core.Update]] = []
    skipped: list[tuple[str, str]] = []
    for verdict, action in actions:
        entry = verdict.entry
        if action == "create":
            source = {key: value for key, value in entry.source.items() if key in insight_core.SOURCE_KEYS}
            source[ORIGIN_KEY] = entry.original_id
            if bundle.source_name:
                source[REPO_KEY] = bundle.source_name
            create.append(
                insight_core.new_insight(
                    mapping[entry.original_id],
                    entry.content,
                    now=now,
                    type=entry.type,
                    tags=entry.tags,
                    links=remap(entry.links),
                    source=source,
                    summary=own(entry, "summary"),
                    context=own(entry, "context"),
                    notes=entry.notes,
                )
            )
        elif action == "update":
            assert verdict.existing is not None
            update.append(
                (
                    verdict.existing.id,
                    insight_core.Update(
                        type=entry.type,
                        add_tags=entry.tags,
                        add_links=tuple(link for link in remap(entry.links) if link != verdict.existing.id),
                        notes=entry.notes,
                        summary=own(entry, "summary") or "",
                        context=own(entry, "context") or "",
                        content=entry.content,
                    ),
                )
            )
        else:
            skipped.append((entry.original_id, action))
    return Plan(tuple(create), tuple(update), tuple(skipped), mapping)


def verdict_to_dict(verdict: Verdict) -> dict[str, Any]:
    """One line of a preview: LoopFlow's `{original_id, summary, status}`, plus `existing_id`."""
    entry = verdict.entry
    data: dict[str, Any] = {
        "original_id": entry.original_id,
        "summary": entry.summary or insight_core.Insight(id=entry.original_id, content=entry.content).effective_summary,
        "type": entry.type,
        "status": verdict.status,
    }
    if verdict.existing is not None:
        data["existing_id"] = verdict.existing.id
    return data
