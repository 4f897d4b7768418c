"""The git settings each clone needs for the merge driver, and the check that they are there.

Edge layer. `.gitattributes` (committed, so every clone has it) names the driver for the
toolkit's files (`merge=moss`), but git never copies `.git/config` from one clone to
another, so each clone must define the driver itself: `setup` writes the two settings with
`git config` (through foundation.gitrepo); `foundation.gitsettings.missing_merge_driver`
tells every command when a clone lacks them.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from moss_files.foundation import gitrepo

DRIVER_NAME = "moss"
DRIVER_LABEL = "moss-files: merge artifacts by their structure"


def driver_command(executable: str | None = None) -> str:
    """The driver line git runs: this installation's `moss`, by absolute path when known, so
    the merge works whatever PATH git was started with."""
    moss = executable or _this_moss()
    return f"{shlex.quote(moss)} merge driver %O %A %B %P"


def _this_moss() -> str:
    launched = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if launched is not None and launched.name == "moss" and launched.exists():
        return str(launched.resolve())
    beside = Path(sys.executable).parent / "moss"
    return str(beside) if beside.exists() else "moss"


def setup(root: Path, *, executable: str | None = None) -> dict[str, str]:
    """Define the merge driver in the clone holding `root` (a setting that already reads so
    is left alone); returns the settings.

    Raises RepoError when `root` is not inside a git work tree.
    """
    repo = gitrepo.open_repo(root)
    settings = {f"merge.{DRIVER_NAME}.name": DRIVER_LABEL, f"merge.{DRIVER_NAME}.driver": driver_command(executable)}
    for key, value in settings.items():
        if gitrepo.get_config(repo, key) != value:
            gitrepo.set_config(repo, key, value)
    return settings
