"""Git settings read without running git: whether this clone defines the moss merge driver.

Edge layer (reads a few small files; stdlib only, so every CLI can afford it at start-up).
`.gitattributes` is committed and reaches every clone, but `.git/config` never does; a clone
whose `.gitattributes` names `merge=moss` without defining the driver merges the toolkit's
files as plain text, and every command says so (once) until `moss merge setup` is run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# Patterns as text, compiled by `re` where first used: every command imports this module, few
# commands ask it anything (compiling both cost each start-up about 0.2 ms, issue 29).
_ATTRIBUTE = r"(?m)^[^#\s][^\n]*\smerge=moss(\s|$)"
_SECTION = r'(?ms)^\s*\[merge\s+"moss"\][^\[]*?^\s*driver\s*='


def git_dir(root: Path) -> Path | None:
    """The `.git` folder of the work tree holding `root` (following a worktree's `.git` file
    to its common folder), or None outside git."""
    for folder in (root, *root.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():
            text = dot_git.read_text(errors="replace").strip()
            if text.startswith("gitdir:"):
                linked = (folder / text.removeprefix("gitdir:").strip()).resolve()
                common = linked / "commondir"
                return (linked / common.read_text().strip()).resolve() if common.is_file() else linked
            return None
    return None


def _config_files(git_dir: Path) -> list[Path]:
    home = Path(os.environ.get("HOME", "~")).expanduser()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [git_dir / "config", xdg / "git" / "config", home / ".gitconfig"]
    if os.environ.get("GIT_CONFIG_GLOBAL"):
        files.append(Path(os.environ["GIT_CONFIG_GLOBAL"]))
    return files


def missing_merge_driver(root: Path) -> bool:
    """True when the workspace's `.gitattributes` names the moss merge driver but no git
    config this clone reads defines it (git would then merge those files as plain text)."""
    try:
        attributes = (root / ".gitattributes").read_text(errors="replace")
    except OSError:
        return False
    if not re.search(_ATTRIBUTE, attributes):
        return False
    found = git_dir(root)
    if found is None:
        return False
    for file in _config_files(found):
        try:
            if re.search(_SECTION, file.read_text(errors="replace")):
                return False
        except OSError:
            continue
    return True


WARNING = (
    "warning: this clone lacks the moss merge driver that .gitattributes names, so git merges "
    "PLAN.md, mailboxes and capsules as plain text; run `moss merge setup` once in this clone"
)
