"""The migration ledger: what became of every field of every source item, and whether every
item read came out or was skipped with its reason. Core layer (pure values, no I/O).

A reader accounts each field of an item it maps (`Account`): *mapped* to its home here (a key
of the new file, its body, its comments), *kept* verbatim under `source_fields` (shown by
`moss task show`, `moss epic show` and the web view) where this toolkit has no home for it,
or *dropped* with the reason. A mapped value that differs from the source's (a priority on
another scale, a status word guessed) is *changed*: the change is listed and the source's
value is kept beside it. `summarize` turns the accounts of a plan's items into the report's
ledger, per field: the counts of each fate, the homes, the reasons and a few examples.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

MAPPED, KEPT, DROPPED = "mapped", "kept", "dropped"
FATES = (MAPPED, KEPT, DROPPED)
SOURCE_FIELDS = "source_fields"
EMPTY = "(nothing: empty)"  # the home of a field that is empty in the source
EXAMPLES = 3  # examples the report shows per field and fate
_SHOWN_CHARS = 120  # an example's value is cut to this many characters
# `json.dumps` with these options makes an encoder on every call: one, made once.
_SHOWN_JSON = json.JSONEncoder(ensure_ascii=False, default=str)


class Fate(NamedTuple):
    """What became of one field of one item: `fate` (mapped, kept or dropped), its `home`
    here, why (`reason`), `changed` ("4 -> LOW") when a mapped value differs from the
    source's, and the source's value: its text, which `shown` cuts when an example shows it
    (most never are: `model.decide` keeps a few), or another value's `shown` JSON. A named
    tuple, as the index's value records are: a reader makes about 13 an item, and a frozen
    dataclass's `__init__` sets each field through `object.__setattr__`: 670 ns a fate, not 260."""

    field: str
    fate: str
    home: str | None = None
    reason: str | None = None
    changed: str | None = None
    value: str | None = None  # last: `model` takes a fate's other fields as the slice [:5]


def shown(value: Any) -> str:
    """A source value as a report shows it: JSON, cut to a line's length."""
    text = value if isinstance(value, str) else _SHOWN_JSON.encode(value)
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _kept_value(value: Any) -> str | None:
    """What a fate keeps of a source value: text as it is, `shown` only if an example shows it
    (idempotent: the report is the same); another value shown now, as a list or mapping may
    change once the reader moves on."""
    return value if value is None or isinstance(value, str) else shown(value)


class Account:
    """The fates of one item's fields, collected while a reader maps the item."""

    __slots__ = ("fates",)

    def __init__(self) -> None:
        self.fates: list[Fate] = []

    def mapped(self, field: str, home: str, value: Any = None, *, changed: str | None = None, reason: str | None = None) -> None:
        """`field` went to `home`; `changed` says how its value differs from the source's."""
        self.fates.append(Fate(field, MAPPED, home, reason, changed, _kept_value(value)))

    def kept(self, field: str, value: Any = None, *, home: str | None = None, reason: str | None = None) -> None:
        """`field` is kept verbatim (under `source_fields.<field>` unless `home` says where)."""
        self.fates.append(Fate(field, KEPT, home or f"{SOURCE_FIELDS}.{field}", reason, None, _kept_value(value)))

    def empty(self, field: str) -> None:
        """`field` is empty in the source (null, "", [], {}): there is nothing to carry."""
        self.fates.append(Fate(field, MAPPED, EMPTY, "empty in the source"))

    def dropped(self, field: str, reason: str, value: Any = None) -> None:
        """`field` is not brought over, for `reason`."""
        self.fates.append(Fate(field, DROPPED, None, reason, None, _kept_value(value)))

    def done(self) -> tuple[Fate, ...]:
        return tuple(self.fates)


def is_empty(value: Any) -> bool:
    """Whether a source value carries nothing (null, "", [], {})."""
    return value is None or (isinstance(value, str | list | dict) and not value)


def account_rest(account: Account, record: Mapping[str, Any], leftovers: dict[str, Any], *, prefix: str = "", reason: str | None = None) -> None:
    """Account every key of `record` no fate names yet: empty ones as empty, the others kept
    verbatim (added to `leftovers`, which becomes `source_fields`). `prefix` names the kind
    in the ledger (`worker.` for a worker's fields)."""
    done = {base_field(fate.field.removeprefix(prefix)).split(".", 1)[0] for fate in account.fates if fate.field.startswith(prefix)}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if key in done:
            continue
        if is_empty(value):
            account.empty(name)
            continue
        account.kept(name, value, home=f"{SOURCE_FIELDS}.{key}", reason=reason)
        leftovers[key] = value


@functools.lru_cache(maxsize=1024)  # pure; asked of every fate of every item, of a few dozen names
def base_field(name: str) -> str:
    """The source key a ledger field is about: `dependencies[blocks]` and
    `dependencies (records)` are about `dependencies`."""
    return name.split("[", 1)[0].split(" (", 1)[0]


def item_fates(fates: Iterable[Fate]) -> dict[str, Any]:
    """One item's departures from a plain mapping, for its line in the report: the fields
    kept verbatim, those dropped (with why) and the mapped values that were changed."""
    kept: set[str] = set()
    dropped: dict[str, str | None] = {}
    changed: dict[str, str] = {}
    for fate in fates:  # one pass, not one for each: asked of every item of a report
        if fate.fate == KEPT:
            kept.add(fate.field)
        elif fate.fate == DROPPED:
            dropped[fate.field] = fate.reason
        elif fate.fate == MAPPED and fate.changed:
            changed[fate.field] = fate.changed
    out: dict[str, Any] = {}
    if kept:
        out["kept"] = sorted(kept)
    if dropped:
        out["dropped"] = dropped
    if changed:
        out["changed"] = changed
    return out


def summarize(accounts: Iterable[tuple[str, Iterable[Fate]]]) -> dict[str, dict[str, Any]]:
    """The ledger's fields: for each source field (in the order first met), how many items
    had it mapped, kept and dropped (an item counts once per fate), how many mapped values
    were changed, the homes and reasons met, and up to EXAMPLES examples of each fate.
    `accounts` are (item's old id, its fates).

    Most items of a large source have the same fates as an item before them (`model.decide`
    lets go of the values no example shows, and shares what is left): once an item's fates
    have added their homes and reasons and filled their examples, an item with the same
    fates adds only its counts (`_counts`), a few additions where `_add` looks at each fate."""
    fields: dict[str, dict[str, Any]] = {}
    settled: dict[tuple[Fate, ...], list[tuple[dict[str, Any], str]]] = {}
    for old_id, fates in accounts:
        shape = tuple(fates)
        counts = settled.get(shape)
        if counts is None:
            _add(fields, old_id, shape)
            if all(len(fields[fate.field]["examples"][fate.fate]) >= EXAMPLES for fate in shape):
                settled[shape] = _counts(fields, shape)
            continue
        for entry, name in counts:
            entry[name] += 1
    for entry in fields.values():
        entry["examples"] = {fate: found for fate, found in entry["examples"].items() if found}
    return fields


def _add(fields: dict[str, dict[str, Any]], old_id: str, fates: Iterable[Fate]) -> None:
    """One item's fates added to `summarize`'s fields."""
    counted: set[tuple[str, str]] = set()
    for fate in fates:
        entry = fields.get(fate.field)
        if entry is None:  # not `setdefault`, which would build this for every fate of every item
            by_fate: dict[str, list[dict[str, Any]]] = {MAPPED: [], KEPT: [], DROPPED: []}
            entry = fields[fate.field] = {MAPPED: 0, KEPT: 0, DROPPED: 0, "changed": 0, "homes": [], "reasons": [], "examples": by_fate}
        if (fate.field, fate.fate) not in counted:
            counted.add((fate.field, fate.fate))
            entry[fate.fate] += 1
        if fate.changed:
            entry["changed"] += 1
        if fate.home and fate.home not in entry["homes"]:
            entry["homes"].append(fate.home)
        if fate.reason and fate.reason not in entry["reasons"] and len(entry["reasons"]) < 10:
            entry["reasons"].append(fate.reason)
        examples = entry["examples"][fate.fate]
        if len(examples) < EXAMPLES and not any(example["id"] == old_id for example in examples):
            example: dict[str, Any] = {"id": old_id}
            if fate.value is not None:
                example["value"] = shown(fate.value)
            if fate.changed:
                example["changed"] = fate.changed
            if fate.reason and fate.fate != MAPPED:
                example["reason"] = fate.reason
            examples.append(example)


def _counts(fields: dict[str, dict[str, Any]], fates: tuple[Fate, ...]) -> list[tuple[dict[str, Any], str]]:
    """What `_add` still changes for fates already added whose examples are full: (the field's
    entry, the count to add one to), once per field and fate, and once per changed value.
    Their homes are listed already, and so are their reasons unless ten other reasons were
    first (the list only grows)."""
    counts: list[tuple[dict[str, Any], str]] = []
    counted: set[tuple[str, str]] = set()
    for fate in fates:
        entry = fields[fate.field]
        if (fate.field, fate.fate) not in counted:
            counted.add((fate.field, fate.fate))
            counts.append((entry, fate.fate))
        if fate.changed:
            counts.append((entry, "changed"))
    return counts
