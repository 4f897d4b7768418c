"""The git facts board rules look at: the branch policy of complete_task (Moe's
`consolidationBranch`) and the disk-state signature of a handoff note.

Core layer (pure: texts in, decisions out; the edge `foundation.gitrepo` reads git).

Branch policy: a project may name the branch work is completed on, literally or as a glob
whose only wildcard is `*` (any run of characters, the empty one included), matched against
the whole branch name, case-sensitively as git names are. A completion on another branch is
refused; one whose branch cannot be told is let through with a warning (Moe's rule: not
knowing is not a reason to block every completion).

Disk-state signature: an opaque fingerprint of the working tree (HEAD's commit and what
`git status` lists as changed), stored on a handoff note, so the next claimer learns when the
tree the note describes has changed since. It leaves out the toolkit's own folders: on a
file-native board the release and the claim themselves write `.moss/`, and an agent's memory
and messages change all the time, so counting them would call every note stale.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from moss_files.foundation.errors import Conflict

MAX_BRANCH_CHARS = 255
MAX_WILDCARDS = 10
TOOLKIT_FOLDERS = (".moss", ".cstack", ".needlecast")
_OID_HEADER = "# branch.oid "


def branch_matches(branch: str, pattern: str) -> bool:
    """Whether `branch` satisfies `pattern` (a name, or a glob whose only wildcard is `*`).
    False for an empty or overlong branch, an empty pattern, or one with absurdly many
    wildcards: a malformed setting or argument never matches and never hangs."""
    if not branch or not pattern or len(branch) > MAX_BRANCH_CHARS:
        return False
    if "*" not in pattern:
        return branch == pattern
    if pattern.count("*") > MAX_WILDCARDS:
        return False
    # Every other character is literal; runs of `*` collapse to one, so no pattern can make
    # the match backtrack badly.
    source = ".*".join(re.escape(part) for part in re.split(r"\*+", pattern))
    return re.fullmatch(source, branch, flags=re.DOTALL) is not None


@dataclass(frozen=True, slots=True)
class BranchCheck:
    """The branch policy's verdict on one completion."""

    pattern: str
    branch: str | None  # None: it could not be told
    source: str | None  # "reported" (the caller said) or "checkout" (read from the workspace)
    matched: bool | None  # None: not enforced, for want of a branch

    @property
    def warning(self) -> str | None:
        return None if self.branch else "the branch could not be told (none reported, and the checkout is not on a branch): the branch policy was not enforced"


def check_branch(pattern: str | None, reported: str | None, checkout: str | None) -> BranchCheck | None:
    """The policy's verdict: None without a policy; the reported branch wins over the
    checkout's. Call `branch_error` when it did not match."""
    wanted = (pattern or "").strip()
    if not wanted:
        return None
    told = (reported or "").strip()
    if told:
        return BranchCheck(wanted, told, "reported", branch_matches(told, wanted))
    here = (checkout or "").strip()
    if here:
        return BranchCheck(wanted, here, "checkout", branch_matches(here, wanted))
    return BranchCheck(wanted, None, None, None)


def branch_error(task_id: str, check: BranchCheck) -> Conflict:
    """BRANCH_POLICY_FAILED (Moe: CONSTRAINT_VIOLATION, BRANCH-POLICY-FAIL): the completion
    happened on a branch the project does not allow; the task stays in WORKING."""
    return Conflict(
        f"{task_id} was completed on branch {check.branch!r}, but this project requires {check.pattern!r}",
        code="BRANCH_POLICY_FAILED",
        status=422,
        details={"taskId": task_id, "currentBranch": check.branch, "expectedPattern": check.pattern, "source": check.source},
        hint="switch to a branch the policy allows, move the commits onto it, then complete the task again",
    )


def branch_check_to_dict(check: BranchCheck) -> dict[str, Any]:
    """The `branchPolicy` of complete_task's answer."""
    data: dict[str, Any] = {"pattern": check.pattern, "currentBranch": check.branch, "source": check.source, "matched": check.matched}
    if check.warning:
        data["warning"] = check.warning
    return data


def disk_state_signature(status: str) -> str | None:
    """The signature of a working tree from `git status --porcelain=v2 --branch` output:
    `v1:<HEAD commit>:<changed paths>:<12 hex of their lines' SHA-256>`, compared only for
    equality. None when the output is not understood (no `# branch.oid` header): unknown,
    never taken as unchanged."""
    oid = None
    changes: list[str] = []
    for line in status.replace("\r\n", "\n").split("\n"):
        if line.startswith("#"):
            if oid is None and line.startswith(_OID_HEADER):
                oid = line[len(_OID_HEADER) :].strip() or None
        elif line:
            changes.append(line)
    if oid is None:
        return None
    digest = hashlib.sha256("\n".join(changes).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"v1:{oid}:{len(changes)}:{digest}"


STALE_HANDOFF = (
    "The working tree has changed since the newest handoff note was written, so the note describes a tree that no "
    "longer exists: check what it says (especially a reason something is blocked or broken) against the tree as it is now."
)
