"""The `capsule` tool set: the capsule tools under Moss's newest names (`capsule_store`,
`capsule_search`, `capsule_bulk_update`, …), the same tools as the `moss` set's `moss.*`.

Entry layer. Opt-in (`moss serve --tools capsule`, or beside `moss`): serving both names by
default would double the capsule tools' share of every agent's context for no new ability.
"""

from __future__ import annotations

from moss_files.mcp.tools.moss import register_capsule_names as register

__all__ = ["register"]
