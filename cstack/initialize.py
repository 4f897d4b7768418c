"""The `cstack init` use case: create `.cstack/` with the three memory files where missing.

Shell layer over the toolkit's scaffold (which never overwrites a file). Kept apart from
`service` because no other command needs the scaffold, so none of them loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from moss_files import scaffold

if TYPE_CHECKING:
    from moss_files.foundation.context import Context


def init_stack(ctx: Context, *, dry_run: bool = False) -> dict[str, Any]:
    """Plan, and unless `dry_run`, create the missing parts of `.cstack/` at `ctx.root`;
    each action and a summary line are said to `ctx.notify`. Returns `{root, dry_run, actions}`.

    Raises Conflict STALE_WRITE when a file changed while it was written, RepoError
    NOT_WRITABLE when the folder cannot be written.
    """
    actions = scaffold.plan_scaffold(ctx.root, parts=("cstack",))
    if not dry_run:
        actions = scaffold.apply_scaffold(ctx.root, actions)
    for action in actions:
        ctx.say(scaffold.render_action(action, dry_run=dry_run))
    ctx.say(scaffold.summary_line(ctx.root, actions, dry_run=dry_run))
    return scaffold.report_to_dict(ctx.root, actions, dry_run=dry_run)
