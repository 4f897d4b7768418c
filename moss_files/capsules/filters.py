"""What a bulk operation touches and what it sets: the filter and the changes of
`bulk_update` and `bulk_delete`, checked.

Core layer: pure functions over values. Kept apart from `model` so the commands that only read
capsules do not build what only a bulk operation uses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from moss_files.capsules.model import CONTROL_CHARACTERS, Capsule, normalize
from moss_files.foundation.errors import InvalidRequest


@dataclass(frozen=True, slots=True)
class BulkFilter:
    """Which live capsules a bulk operation touches: every given filter must match (AND).

    `workspace` and `name_prefix` are in normalized form; the others compare exactly.
    """

    workspace: str | None = None
    tag: str | None = None
    name_prefix: str | None = None
    run_id: str | None = None
    phase: str | None = None
    role: str | None = None

    def matches(self, capsule: Capsule) -> bool:
        """Whether `capsule` is live and passes every filter."""
        return (
            not capsule.deleted
            and (self.workspace is None or capsule.workspace_norm == self.workspace)
            and (self.tag is None or self.tag in (capsule.tags or ()))
            and (self.name_prefix is None or (capsule.name_norm or "").startswith(self.name_prefix) and capsule.name_norm is not None)
            and (self.run_id is None or capsule.run_id == self.run_id)
            and (self.phase is None or capsule.phase == self.phase)
            and (self.role is None or capsule.role == self.role)
        )

    def describe(self) -> str:
        """`workspace="web", phase="qa"`: the filters as the result message names them."""
        names = ("workspace", "tag", "name_prefix", "run_id", "phase", "role")
        return ", ".join(f"{name}={json.dumps(getattr(self, name), ensure_ascii=False)}" for name in names if getattr(self, name) is not None)


def bulk_filter(
    *,
    workspace: str | None = None,
    tag: str | None = None,
    name_prefix: str | None = None,
    run_id: str | None = None,
    phase: str | None = None,
    role: str | None = None,
) -> BulkFilter:
    """The filter a bulk operation was given (blank values count as not given).

    Raises InvalidRequest when no filter is left: a bulk operation never means "everything".
    """
    given = (workspace, tag, name_prefix, run_id, phase, role)
    if all(value is None for value in given):
        raise InvalidRequest(
            "at least one filter is required: workspace, tag, name_prefix, run_id, phase or role",
            details={"filters": ["workspace", "tag", "name_prefix", "run_id", "phase", "role"]},
        )

    def clean(value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    found = BulkFilter(
        workspace=normalize(workspace) or None if workspace is not None else None,
        tag=clean(tag),
        name_prefix=normalize(name_prefix) or None if name_prefix is not None else None,
        run_id=clean(run_id),
        phase=clean(phase),
        role=clean(role),
    )
    if found == BulkFilter():
        raise InvalidRequest("at least one filter must be non-empty after normalization", details={"filters": "blank"})
    return found


@dataclass(frozen=True, slots=True)
class BulkChanges:
    """What bulk_update sets; `given` names the fields to set ('' and [] clear them)."""

    given: frozenset[str]
    phase: str | None = None
    role: str | None = None
    tags: tuple[str, ...] | None = None

    def apply(self, capsule: Capsule, now_ms: int) -> Capsule | None:
        """The capsule with the changes applied and `updated_ms` moved, or None when it
        already holds these values (it is then left alone)."""
        wanted = {name: getattr(self, name) for name in ("phase", "role", "tags") if name in self.given}
        if all(getattr(capsule, name) == value for name, value in wanted.items()):
            return None
        return replace(capsule, **wanted, updated_ms=now_ms)

    def describe(self) -> str:
        """`phase="qa", tags=null`: the changes as the result message names them."""
        parts = []
        for name in ("phase", "role", "tags"):
            if name in self.given:
                value = getattr(self, name)
                parts.append(f"{name}={json.dumps(list(value) if isinstance(value, tuple) else value, ensure_ascii=False)}")
        return ", ".join(parts)


def bulk_changes(*, set_phase: str | None = None, set_role: str | None = None, set_tags: Sequence[str] | None = None) -> BulkChanges:
    """The changes bulk_update was given. Raises InvalidRequest when there are none, or when a
    value cannot be written on one frontmatter line."""
    given = {name for name, value in (("phase", set_phase), ("role", set_role), ("tags", set_tags)) if value is not None}
    if not given:
        raise InvalidRequest(
            "at least one update field is required: set_phase, set_role or set_tags", details={"fields": ["set_phase", "set_role", "set_tags"]}
        )
    if isinstance(set_tags, str):
        raise InvalidRequest("set_tags must be a list of strings", details={"field": "set_tags"})
    tags = tuple(dict.fromkeys(tag.strip() for tag in set_tags if tag.strip())) if set_tags is not None else None
    for field, value in (("set_phase", set_phase), ("set_role", set_role), *(("set_tags", tag) for tag in tags or ())):
        if value is not None and CONTROL_CHARACTERS.search(value):
            raise InvalidRequest(f"{field} must not contain control characters (newlines included)", details={"field": field})
    return BulkChanges(
        given=frozenset(given),
        phase=set_phase.strip() or None if set_phase is not None else None,
        role=set_role.strip() or None if set_role is not None else None,
        tags=tags or None,
    )
