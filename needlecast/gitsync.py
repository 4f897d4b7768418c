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

Agents keep writing while a round runs, and git replaces a file without the toolkit's locks,
without looking again at what it replaces: a send appended to `outbox.md` during `git merge`
was lost (issue 24). So a round merges beside the work tree (`git merge-tree --write-tree`),
brings the result into each shared mailbox file itself, under its lock and merging again
what was written since the round's commit (`mailbox.apply_merged`), and only then lets git
move the branch and write the other files (a fast-forward to the merge commit, which finds
those files already up to date). A merge that conflicts goes the way `git pull` goes, with
the shared files locked meanwhile and what was appended without the lock put back.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from moss_files import scaffold
from moss_files.foundation import fs
from moss_files.foundation.errors import Conflict, MossError, RepoError, error_body
from moss_files.foundation.ids import format_time
from needlecast import mailbox, shared_file
from needlecast.peers import without_secrets

SYNCED = (".cstack", ".needlecast", ".moss")
GIT_TIMEOUT = 120.0  # a push over a slow network may take a while; a hung one must end
PUSH_ATTEMPTS = 3
ADD_ATTEMPTS = 3
MERGE_ATTEMPTS = 5  # merges of one round that files written meanwhile may send back to a new commit
_REGULAR = ("100644", "100755")
_NO_OBJECT = "0" * 40


@dataclass(frozen=True, slots=True)
class _Change:
    """A path a merge changes: its blob before and after (None: absent) and its new mode."""

    path: str
    old: str | None
    new: str | None
    mode: str


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

    def _call(self, args: Sequence[str], *, text: bool, given: str | None = None) -> subprocess.CompletedProcess[Any]:
        where = self.top or self.root
        try:
            return subprocess.run(
                ["git", "-C", str(where), *args],
                capture_output=True,
                text=text,
                errors="replace" if text else None,
                timeout=GIT_TIMEOUT,
                input=given,
                stdin=subprocess.DEVNULL if given is None else None,
                env=self._env(),
                check=False,
            )
        except FileNotFoundError:
            raise RepoError("git is not installed", code="GIT_SYNC_FAILED") from None
        except subprocess.TimeoutExpired:
            raise RepoError(f"git {args[0]} took longer than {GIT_TIMEOUT:g}s", code="GIT_SYNC_FAILED") from None

    def _git(self, *args: str, check: bool = True, given: str | None = None) -> subprocess.CompletedProcess[str]:
        done: subprocess.CompletedProcess[str] = self._call(args, text=True, given=given)
        if check and done.returncode != 0:
            reason = (done.stderr or done.stdout).strip().splitlines()
            raise RepoError(
                f"git {args[0]} failed: {reason[-1] if reason else f'status {done.returncode}'}", code="GIT_SYNC_FAILED", details={"status": done.returncode}
            )
        return done

    def _blob(self, oid: str | None) -> bytes | None:
        """The bytes of a blob (None for None)."""
        if oid is None:
            return None
        done: subprocess.CompletedProcess[bytes] = self._call(("cat-file", "blob", oid), text=False)
        if done.returncode != 0:
            raise RepoError(f"git cat-file failed for {oid}", code="GIT_SYNC_FAILED", details={"status": done.returncode})
        return done.stdout

    def _identity(self) -> list[str]:
        """`-c` options naming this sidecar as the author when the clone names nobody."""
        if self._git("config", "user.name", check=False).stdout.strip():
            return []
        return ["-c", f"user.name={self.name}", "-c", f"user.email={self.name}@needlecast.invalid"]

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
        for attempt in range(ADD_ATTEMPTS):
            # A file the router removes while git lists the folder makes `git add` fail.
            if self._git("add", "-A", "--", *paths, *self._per_machine(), check=attempt == ADD_ATTEMPTS - 1).returncode == 0:
                break
        staged = self._git("diff", "--cached", "--name-only", "-z", "--", *paths).stdout.split("\0")
        # Only the folders with staged changes are named to commit: a folder that holds nothing
        # git tracks (only per-machine files) is a pathspec `git commit` refuses.
        paths = [path for path in paths if any(name == path or name.startswith(path + "/") for name in staged)]
        if not paths:
            return
        stamp = format_time(self.clock())
        self._git(*self._identity(), "commit", "-q", "-m", f"needlecast sync: {self.name} at {stamp}", "--", *paths)

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
        for _attempt in range(MERGE_ATTEMPTS):
            merged = self._merge_beside()
            if merged is None:
                return self._merge_in_work_tree(int(behind))
            if merged:
                self.pulled += int(behind)
                return True
            self._commit()  # a file the merge changes was written since the round's commit
        raise RepoError("files kept changing while the round merged; will retry", code="GIT_SYNC_FAILED")

    def _merge_beside(self) -> bool | None:
        """Merge FETCH_HEAD without git writing a shared mailbox file: True when merged; False
        when a file the merge changes was written since HEAD was committed in a way only a new
        commit can take in (commit and call again); None when the merge conflicts, or git is
        older than 2.38 (`_merge_in_work_tree` then)."""
        head = self._git("rev-parse", "HEAD").stdout.strip()
        fetched = self._git("rev-parse", "FETCH_HEAD^{commit}").stdout.strip()
        commit: str | None = None
        if self._git("merge-base", "--is-ancestor", head, fetched, check=False).returncode == 0:
            tree = commit = fetched  # nothing here to merge: a fast-forward, as `git merge` makes it
        else:
            found = self._git("merge-tree", "--write-tree", "--no-messages", head, fetched, check=False)
            if found.returncode != 0 or not found.stdout.strip():
                return None  # 1: conflicts, left for a person in the work tree; 129: an older git
            tree = found.stdout.split()[0]
        assert self.top is not None
        changes = [change for change in self._changes(head, tree) if mailbox.is_shared_file(change.path) and (self.top / change.path).parent.is_dir()]
        brought = [change for change in changes if change.new is not None and change.mode in _REGULAR]
        try:
            for change in brought:
                merged = self._blob(change.new)
                assert merged is not None
                mailbox.apply_merged(self.top / change.path, self._blob(change.old), merged)
        except Conflict as err:
            if err.code != "STALE_WRITE":
                raise
            return False
        if brought:
            # The index takes the merged versions, so the fast-forward below finds these files
            # up to date and leaves them (and whatever was appended since) as they are.
            entries = "".join(f"{change.mode} {change.new}\t{change.path}\0" for change in brought)
            self._git("update-index", "-z", "--index-info", given=entries)
        if commit is None:
            message = f"needlecast sync: {self.name} merges {self.settings.remote}/{self.branch}"
            commit = self._git(*self._identity(), "commit-tree", tree, "-p", head, "-p", fetched, "-m", message).stdout.strip()
        with ExitStack() as stack:
            # A shared file the merge deletes is git's to delete: locked meanwhile, and only when
            # nothing was written to it since the round's commit.
            for change in (change for change in changes if change.new is None):
                path = self.top / change.path
                stack.enter_context(fs.locked(path))
                if shared_file.read_if_any(path) not in (None, self._blob(change.old)):
                    return False
            forward = self._git("merge", "--ff-only", "-q", commit, check=False)
        if forward.returncode == 0:
            return True
        if "would be overwritten" in forward.stderr:
            return False  # another file written since the round's commit
        reason = (forward.stderr or forward.stdout).strip().splitlines()
        raise RepoError(f"git merge failed: {reason[-1] if reason else forward.returncode}", code="GIT_SYNC_FAILED")

    def _changes(self, before: str, after: str) -> list[_Change]:
        """Every file that differs between two trees (or commits)."""
        out = self._git("diff-tree", "-r", "-z", "--no-renames", before, after).stdout.split("\0")
        changes = []
        for meta, path in zip(out[0::2], out[1::2], strict=False):
            if not meta.startswith(":"):
                continue
            _old_mode, new_mode, old, new, _status = meta[1:].split(" ", 4)
            changes.append(_Change(path, None if old == _NO_OBJECT else old, None if new == _NO_OBJECT else new, new_mode))
        return changes

    def _merge_in_work_tree(self, behind: int) -> bool:
        """Merge FETCH_HEAD in the work tree, as `git pull` does, leaving conflicts for a person;
        False (recording the files) when it conflicted.

        The shared mailbox files the merge may change are locked meanwhile (no send, delivery
        or routing pass lands while git replaces them) and committed first under those locks;
        bytes appended without the lock while git replaced a file are appended to git's version,
        from the replaced file, held open."""
        assert self.top is not None
        theirs = self._git("diff", "--name-only", "-z", "HEAD...FETCH_HEAD").stdout.split("\0")
        paths = sorted(self.top / name for name in theirs if name and mailbox.is_shared_file(name) and (self.top / name).parent.is_dir())
        with ExitStack() as stack:
            for path in paths:
                stack.enter_context(fs.locked(path))
            self._commit()
            held: list[tuple[Path, int, bytes]] = []
            for path in paths:
                found = self._call(("cat-file", "blob", f"HEAD:{path.relative_to(self.top).as_posix()}"), text=False)
                if found.returncode != 0:
                    continue  # not tracked here: git will not replace it
                try:
                    fd = shared_file.open_read(path)
                except FileNotFoundError:
                    continue
                stack.callback(os.close, fd)
                held.append((path, fd, found.stdout))
            merged = self._git(*self._identity(), "merge", "--no-edit", "-q", "FETCH_HEAD", check=False)
            for path, fd, committed in held:
                try:
                    replaced = os.stat(path).st_ino != os.fstat(fd).st_ino
                except FileNotFoundError:
                    replaced = True
                before = shared_file.read_fd(fd) if replaced else b""
                if len(before) > len(committed) and before.startswith(committed):
                    shared_file.carry_over(path, before[len(committed) :])
        if merged.returncode == 0:
            self.pulled += behind
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
