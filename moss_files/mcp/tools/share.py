"""The `share` tool set: LoopFlow's sharing bundles (`loop_export`, `loop_import_preview`,
`loop_import`) and feedback (`loop_painpoint`, `loop_feedback_list`).

Entry layer. Opt-in (`moss serve --tools moss,loop,share,...`): agents share and report now and
then, and five more schemas in every default tools/list would cost each of them context.
"""

from __future__ import annotations

from moss_files.mcp.tools.loop import register_sharing as register

__all__ = ["register"]
