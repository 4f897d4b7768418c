"""Git as the wide-area path: the sidecar's `--git-sync` commits the toolkit's files, pulls
(merging through the moss merge driver) and pushes. Edge layer: the git command, through
subprocess, in the workspace's clone.

One round: (1) if a merge is unfinished, report its files and do nothing else until a person
finishes it; (2) commit what changed in `.cstack/`, `.needlecast/` and `.moss/` (those paths
only: a user's staged work elsewhere stays staged and uncommitted); (3) fetch the branch
and merge it, the clone's merge driver resolving the toolkit's files; a conflict it leaves is
left in the work tree, as `git pull` leaves it, and reported; (4) push, fetching and merging
again when someone pushed first. Every outcome is recorded in `status()` for `/status`:
conflicts and failures are reported there, never hidden.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from moss_files import scaffold
from moss_files.foundation.errors import MossError, RepoError, error_body
from moss_files.foundation.ids import format_time
from needlecast.peers import without_secrets

SYNCED = (".cstack", ".needlecast", ".moss")
GIT_TIMEOUT = 120.0  # a push over a slow network may take a while; a hung one must end
PUSH_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class GitSyncSettings:
    """Where to sync: the remote, the branch (None: the one checked out), how often."""

    remote: str = "origin"
    branch: str | None = None
    interval: float = 60.0  # seconds between rounds; a change brings the next one forward
    debounce: float = 2.0  # seconds a change waits, so a burst of changes makes one commit


class GitSync:
    """The git sync of one workspace's clone. Not thread-safe: the sidecar's loop runs it."""

    def __init__(self, root: Path, settings: GitSyncSettings, *, name: str, clock: Callable[[], datetime], environ: Mapping[str, str]) -> None:
        self.root = root
        self.settings = settings
        self.name = name
        self.clock = clock
        self.environ = dict(environ)
        self.top: Path | None = None
        self.branch: str | None = settings.branch
        self.state = "starting"
        self.rounds = 0
        self.last_round: str | None = None
        self.last_success: str | None = None
        self.error: dict[str, Any] | None = None
        self.conflicts: list[str] = []
        self.pushed = 0
        self.pulled = 0

    # ----------------------------------------------------------------- git

    def _git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        where = self.top or self.root
        try:
            done = subprocess.run(
                ["git", "-C", str(where), *args],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=GIT_TIMEOUT,
                stdin=subprocess.DEVNULL,
                env=self._env(),
                check=False,
            )
        except FileNotFoundError:
            raise RepoError("git is not installed", code="GIT_SYNC_FAILED") from None
        except subprocess.TimeoutExpired:
            raise RepoError(f"git {args[0]} took longer than {GIT_TIMEOUT:g}s", code="GIT_SYNC_FAILED") from None
        if check and done.returncode != 0:
            reason = (done.stderr or done.stdout).strip().splitlines()
            raise RepoError(
                f"git {args[0]} failed: {reason[-1] if reason else f'status {done.returncode}'}", code="GIT_SYNC_FAILED", details={"status": done.returncode}
            )
        return done

    def _env(self) -> dict[str, str]:
        env = without_secrets(self.environ or os.environ)
        env["GIT_TERMINAL_PROMPT"] = "0"  # never wait for a password nobody will type
        env.setdefault("GIT_MERGE_AUTOEDIT", "no")
        return env

    # ----------------------------------------------------------------- set-up

    def setup(self) -> None:
        """Find the clone and define the merge driver in it (as `moss merge setup` does).
        Raises RepoError GIT_SYNC_FAILED outside a git work tree."""
        found = self._git("rev-parse", "--show-toplevel", check=False)
        if found.returncode != 0:
            raise RepoError(f"{self.root} is not inside a git work tree: --git-sync needs a clone", code="GIT_SYNC_FAILED", path=self.root)
        self.top = Path(found.stdout.strip())
        planned = scaffold.plan_merge_driver(self.top)
        if planned is not None and planned.kind == "config":
            scaffold.apply_scaffold(self.top, [planned])
        if self.branch is None:
            head = self._git("symbolic-ref", "--short", "-q", "HEAD", check=False)
            self.branch = head.stdout.strip() or None
            if self.branch is None:
                raise RepoError("the clone has no branch checked out (a detached HEAD); name one with --git-sync-branch", code="GIT_SYNC_FAILED", path=self.top)
        self.state = "idle"

    # ----------------------------------------------------------------- one round

    def sync(self) -> None:
        """One round: commit, pull (merge), push. Failures are recorded, not raised."""
        self.rounds += 1
        self.last_round = format_time(self.clock())
        try:
            if self.top is None:
                self.setup()
            self._round()
        except MossError as err:
            self.state = "error"
            self.error = {"at": self.last_round, **error_body(err)["error"]}

    def _round(self) -> None:
        unmerged = self._unmerged()
        if unmerged or self._merging():
            self.state = "conflicted"
            self.conflicts = unmerged
            return
        self.conflicts = []
        self._commit()
        for _attempt in range(PUSH_ATTEMPTS):
            if not self._pull():
                return  # conflicted: recorded by _pull
            if self._push():
                self.state = "ok"
                self.error = None
                self.last_success = self.last_round
                return
        raise RepoError(f"the push to {self.settings.remote} kept being rejected (others pushed first); will retry", code="GIT_SYNC_FAILED")

    def _merging(self) -> bool:
        found = self._git("rev-parse", "-q", "--verify", "MERGE_HEAD", check=False)
        return found.returncode == 0

    def _unmerged(self) -> list[str]:
        done = self._git("diff", "--name-only", "--diff-filter=U", check=False)
        return sorted(line for line in done.stdout.splitlines() if line)

    def _paths(self) -> list[str]:
        assert self.top is not None
        prefix = self.root.resolve().relative_to(self.top.resolve())
        return [str(prefix / folder) for folder in SYNCED if (self.root / folder).is_dir()]

    def _per_machine(self) -> list[str]:
        """Pathspecs that leave out what `install.sh` git-ignores (locks, temporaries, caches,
        the router's state), also in a clone whose .gitignore lacks those lines: a displaced
        outbox kept beside `outbox.md` until its messages are routed would be folded into
        another clone's outbox, and routed there a second time. A folder .gitignore already
        ignores is not named (git refuses a pathspec naming an ignored folder)."""
        assert self.top is not None
        prefix = self.root.resolve().relative_to(self.top.resolve()).as_posix()
        place = "" if prefix == "." else prefix + "/"
        lines = [place + line for part in scaffold.PARTS for line in scaffold.GITIGNORE_LINES[part]]
        folders = [line.rstrip("/") for line in lines if line.endswith("/") and (self.top / line).is_dir()]
        ignored = set(self._git("check-ignore", "--", *folders, check=False).stdout.splitlines()) if folders else set()
        files = [f":(exclude,glob){line}" for line in lines if not line.endswith("/")]
        return files + [f":(exclude){folder}" for folder in folders if folder not in ignored]

    def _commit(self) -> None:
        paths = self._paths()
        if not paths:
            return
        self._git("add", "-A", "--", *paths, *self._per_machine())
        staged = self._git("diff", "--cached", "--name-only", "-z", "--", *paths).stdout.split("\0")
        # Only the folders with staged changes are named to commit: a folder that holds nothing
        # git tracks (only per-machine files) is a pathspec `git commit` refuses.
        paths = [path for path in paths if any(name == path or name.startswith(path + "/") for name in staged)]
        if not paths:
            return
        identity: list[str] = []
        if not self._git("config", "user.name", check=False).stdout.strip():
            identity = ["-c", f"user.name={self.name}", "-c", f"user.email={self.name}@needlecast.invalid"]
        stamp = format_time(self.clock())
        self._git(*identity, "commit", "-q", "-m", f"needlecast sync: {self.name} at {stamp}", "--", *paths)

    def _pull(self) -> bool:
        """Fetch and merge the branch; False (recording the files) when the merge conflicted."""
        assert self.branch is not None
        fetched = self._git("fetch", "-q", self.settings.remote, self.branch, check=False)
        if fetched.returncode != 0:
            if "couldn't find remote ref" in fetched.stderr:
                return True  # nothing pushed yet: our push creates the branch
            self._git("fetch", "-q", self.settings.remote, self.branch)  # raises with git's reason
        behind = self._git("rev-list", "--count", "HEAD..FETCH_HEAD").stdout.strip()
        if behind in ("", "0"):
            return True
        identity: list[str] = []
        if not self._git("config", "user.name", check=False).stdout.strip():
            identity = ["-c", f"user.name={self.name}", "-c", f"user.email={self.name}@needlecast.invalid"]
        merged = self._git(*identity, "merge", "--no-edit", "-q", "FETCH_HEAD", check=False)
        if merged.returncode == 0:
            self.pulled += int(behind)
            return True
        unmerged = self._unmerged()
        if unmerged:
            self.state = "conflicted"
            self.conflicts = unmerged
            self.error = {
                "at": self.last_round,
                "code": "MERGE_CONFLICT",
                "message": f"merging {self.settings.remote}/{self.branch} left conflicts in {len(unmerged)} file(s); resolve them and commit",
            }
            return False
        reason = (merged.stderr or merged.stdout).strip().splitlines()
        raise RepoError(f"git merge failed: {reason[-1] if reason else merged.returncode}", code="GIT_SYNC_FAILED")

    def _push(self) -> bool:
        assert self.branch is not None
        ahead = self._git("rev-list", "--count", f"{self.settings.remote}/{self.branch}..HEAD", check=False)
        count = int(ahead.stdout.strip()) if ahead.returncode == 0 and ahead.stdout.strip().isdigit() else None
        if count == 0:
            return True
        pushed = self._git("push", "-q", self.settings.remote, f"HEAD:refs/heads/{self.branch}", check=False)
        if pushed.returncode == 0:
            self.pushed += count or 1
            return True
        if "rejected" in pushed.stderr or "fetch first" in pushed.stderr or "non-fast-forward" in pushed.stderr:
            return False
        reason = pushed.stderr.strip().splitlines()
        raise RepoError(f"git push failed: {reason[-1] if reason else pushed.returncode}", code="GIT_SYNC_FAILED")

    # ----------------------------------------------------------------- report

    def status(self) -> dict[str, Any]:
        """The `/status` part: `{enabled, remote, branch, state, rounds, last_round,
        last_success, pushed, pulled, conflicts, error}`; state is starting, idle, ok,
        conflicted (a merge waits for a person) or error (the last round failed)."""
        return {
            "enabled": True,
            "remote": self.settings.remote,
            "branch": self.branch,
            "state": self.state,
            "rounds": self.rounds,
            "last_round": self.last_round,
            "last_success": self.last_success,
            "pushed": self.pushed,
            "pulled": self.pulled,
            "conflicts": list(self.conflicts),
            "error": self.error,
        }
