"""A tiny init for the sleeve image: PID 1 starts one command (`needlecast sidecar` unless told
otherwise), passes on the signals a container receives, reaps every orphan, and exits with the
command's status (128 + N when a signal N ended it).

Why not the sidecar as PID 1: the kernel hands PID 1 every orphaned process of the container
(an agent's `git` hooks, a shell's background job), and only PID 1 can reap them; a Python
daemon that reaped with waitpid(-1) would steal the exit status of the processes it runs itself
(git for --git-sync, an agent CLI's --version). So the init reaps, and the sidecar stays an
ordinary child.

Standard library only. Before the command, when NEEDLECAST_INIT_LAYOUT is v1 or v2 and the
workspace ($MOSS_ROOT, else the current folder) has no `.needlecast/` yet, it runs
`needlecast init --layout <it>` there, so a sleeve on an empty volume can be routed to at once.
An envoy's NEEDLECAST_INIT_SLEEVES (names, separated by commas or spaces) lays out those
sleeves' workspaces under its own the same way, so its router knows every sleeve from its
first pass instead of finding the late ones at its next full sweep.
Outside a PID namespace (a plain `docker/init.py needlecast sidecar` in a shell) it makes itself
the child subreaper, so it reaps the same way.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH)
DEFAULT_COMMAND = ["needlecast", "sidecar"]
PR_SET_CHILD_SUBREAPER = 36


def command_of(argv: list[str]) -> list[str]:
    """The command to run: the arguments, or the sidecar; arguments that start with `-` are the
    sidecar's own flags."""
    if not argv:
        return list(DEFAULT_COMMAND)
    if argv[0].startswith("-"):
        return [*DEFAULT_COMMAND, *argv]
    return argv


def sleeve_names(text: str) -> list[str]:
    """The names NEEDLECAST_INIT_SLEEVES lists; a name that is not a plain folder name stops
    the init (status 2) rather than lay out a workspace somewhere unexpected."""
    names = [part for part in text.replace(",", " ").split() if part]
    for name in names:
        if name in {".", ".."} or "/" in name or name.startswith("."):
            print(f"init: NEEDLECAST_INIT_SLEEVES: {name!r} is not a sleeve's folder name", file=sys.stderr)
            sys.exit(2)
    return names


def lay_out(layout: str, workspace: str) -> None:
    if os.path.isdir(os.path.join(workspace, ".needlecast")):
        return
    os.makedirs(workspace, exist_ok=True)
    done = subprocess.run(["needlecast", "init", "--layout", layout, "--root", workspace], check=False)
    if done.returncode != 0:
        print(f"init: `needlecast init --layout {layout}` failed in {workspace} (status {done.returncode})", file=sys.stderr)
        sys.exit(done.returncode)


def prepare_workspace() -> None:
    layout = os.environ.get("NEEDLECAST_INIT_LAYOUT", "").strip()
    if not layout:
        return
    root = os.environ.get("MOSS_ROOT") or os.getcwd()
    lay_out(layout, root)
    for name in sleeve_names(os.environ.get("NEEDLECAST_INIT_SLEEVES", "")):
        lay_out(layout, os.path.join(root, name))


def exit_status(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def main(argv: list[str]) -> int:
    command = command_of(argv)
    if os.getpid() != 1:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # not Linux: orphans go to the real init, which reaps them
    prepare_workspace()
    # Block the signals first: one that arrives between the fork and the wait below stays
    # pending for sigwait instead of killing the init with its default action.
    watched = {*FORWARDED, signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"init: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
            os._exit(127)
    while True:
        received = signal.sigwait(watched)
        if received != signal.SIGCHLD:
            try:
                os.kill(child, received)
            except ProcessLookupError:
                pass
            continue
        while True:  # reap every child that has ended: ours and the orphans handed to us
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == child:
                return exit_status(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
