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

The sleeve terminal (NEEDLECAST_TERMINAL=true; off by default): before the command, the init
starts the agent in a tmux session (`agent`) and serves that session through ttyd on a port of
its own (NEEDLECAST_TERMINAL_HOST, else NEEDLECAST_HOST; NEEDLECAST_TERMINAL_PORT, 7681), behind
basic authentication with the sidecar's token (user `sleeve`). The command then finds the
terminal's URL in NEEDLECAST_TERMINAL_URL, which the sidecar's /status reports. ttyd takes the
credential only on its command line, which every user of a machine can read (ps, /proc), so the
terminal starts only where the init is PID 1: in a container, whose processes are the sleeve's
own and can read the token file anyway.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import NoReturn

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH)
DEFAULT_COMMAND = ["needlecast", "sidecar"]
PR_SET_CHILD_SUBREAPER = 36
# The agent CLIs the terminal runs, the first found on PATH (needlecast.status.DHF_CANDIDATES, the
# order /status's `dhf` reports them in; a test keeps the two lists equal); else a shell.
AGENT_COMMANDS = ("claude", "gemini", "codex", "aider", "opencode")
TERMINAL_SESSION = "agent"
TERMINAL_USER = "sleeve"
TERMINAL_PORT = 7681  # ttyd's own default
TERMINAL_READY_SECONDS = 10.0
TERMINAL_STOP_SECONDS = 2.0
TTYD_LOG_LEVEL = "3"  # errors and warnings: ttyd's notices would print the credential
TRUE_WORDS = {"1", "true", "yes", "y", "on"}
FALSE_WORDS = {"", "0", "false", "no", "n", "off"}


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


def fail(status: int, text: str) -> NoReturn:
    print(f"init: {text}", file=sys.stderr)
    sys.exit(status)


@dataclass(frozen=True)
class Terminal:
    """Where and what the sleeve terminal serves."""

    host: str
    port: int
    url: str
    command: list[str]
    credential: str


def switched_on(name: str) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value in TRUE_WORDS:
        return True
    if value not in FALSE_WORDS:
        fail(2, f"{name}={os.environ[name]!r} is neither true nor false")
    return False


def terminal_token() -> str:
    """The sidecar's token (NEEDLECAST_TOKEN, else the file NEEDLECAST_TOKEN_FILE names)."""
    token = os.environ.get("NEEDLECAST_TOKEN", "").strip()
    path = os.environ.get("NEEDLECAST_TOKEN_FILE", "")
    if not token and path:
        try:
            with open(path, encoding="utf-8") as handle:
                token = handle.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            fail(2, f"NEEDLECAST_TOKEN_FILE: cannot read {path}: {exc}")
    if not token:
        fail(2, "the terminal needs the sidecar's token: set NEEDLECAST_TOKEN_FILE (or NEEDLECAST_TOKEN)")
    if not (token.isascii() and token.isprintable()):
        # A browser encodes a basic-auth password outside printable ASCII in its own way.
        fail(2, "the token cannot be the terminal's password: it holds a character outside printable ASCII")
    return token


def agent_command(shell: str) -> list[str]:
    given = os.environ.get("NEEDLECAST_TERMINAL_COMMAND", "").strip()
    if given:
        return shlex.split(given)
    for name in AGENT_COMMANDS:
        if shutil.which(name):
            return [name]
    return [shell]


def terminal_settings(shell: str) -> Terminal | None:
    """The terminal to start, or None when NEEDLECAST_TERMINAL is off; exits (2, or 127 for a
    missing program) when it is on but cannot start."""
    if not switched_on("NEEDLECAST_TERMINAL"):
        return None
    if os.getpid() != 1:
        fail(2, "NEEDLECAST_TERMINAL: the terminal starts only when the init is PID 1 (a container): ttyd's command line holds its credential")
    credential = f"{TERMINAL_USER}:{terminal_token()}"
    host = os.environ.get("NEEDLECAST_TERMINAL_HOST") or os.environ.get("NEEDLECAST_HOST") or "127.0.0.1"
    text = os.environ.get("NEEDLECAST_TERMINAL_PORT") or str(TERMINAL_PORT)
    if not text.isdigit() or not 0 < int(text) < 65536:
        fail(2, f"NEEDLECAST_TERMINAL_PORT={text!r} is not a port number")
    port = int(text)
    for program in ("tmux", "ttyd"):
        if shutil.which(program) is None:
            fail(127, f"NEEDLECAST_TERMINAL: {program} is not installed")
    shown = f"[{host}]" if ":" in host else host
    url = os.environ.get("NEEDLECAST_TERMINAL_URL") or f"http://{shown}:{port}/"
    return Terminal(host, port, url, agent_command(shell), credential)


def without_secrets(environ: dict[str, str]) -> dict[str, str]:
    """What the agent's session gets: the environment without the sidecar's token variables
    (needlecast.peers.without_secrets's rule)."""
    return {name: value for name, value in environ.items() if not name.startswith(("NEEDLECAST_TOKEN", "NEEDLECAST_PEER_TOKEN_"))}


def spawn(argv: list[str], env: dict[str, str]) -> int:
    """Fork and exec `argv` with no signal blocked (the init blocks the ones it waits for)."""
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        try:
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            print(f"init: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
            os._exit(127)
    return child


def listening(host: str, port: int) -> bool:
    target = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    try:
        socket.create_connection((target, port), timeout=0.5).close()
    except OSError:
        return False
    return True


def start_terminal(terminal: Terminal, workspace: str, shell: str) -> int:
    """Start the agent's tmux session and ttyd; return ttyd's pid once it listens. Both start
    with no signal blocked (spawn): a tmux server that inherited a blocked SIGCHLD would never
    learn that its panes ended."""
    env = without_secrets(dict(os.environ))
    # tmux runs new windows with $SHELL, else the user's login shell, which is nologin in the image.
    env.setdefault("SHELL", shell)
    session = ["-s", TERMINAL_SESSION, "-c", workspace, *terminal.command]
    status = os.waitpid(spawn(["tmux", "new-session", "-d", "-x", "160", "-y", "48", *session], env), 0)[1]
    if exit_status(status) != 0:
        fail(exit_status(status), f"the terminal's tmux session did not start (status {exit_status(status)})")
    serve = ["ttyd", "--port", str(terminal.port), "--credential", terminal.credential, "--writable", "--check-origin", "--debug", TTYD_LOG_LEVEL]
    if terminal.host not in {"", "0.0.0.0", "::"}:
        serve += ["--interface", terminal.host]
    # Each client attaches to the agent's session, or starts it again if the agent has ended.
    ttyd = spawn([*serve, "tmux", "new-session", "-A", *session], env)
    deadline = time.monotonic() + TERMINAL_READY_SECONDS
    while not listening(terminal.host, terminal.port):
        pid, status = os.waitpid(ttyd, os.WNOHANG)
        if pid == ttyd:
            fail(exit_status(status) or 1, f"the terminal's ttyd ended before it listened on port {terminal.port} (status {exit_status(status)})")
        if time.monotonic() > deadline:
            os.kill(ttyd, signal.SIGKILL)
            fail(1, f"the terminal's ttyd did not listen on port {terminal.port} within {TERMINAL_READY_SECONDS:.0f} s")
        time.sleep(0.05)
    print(f"init: the terminal serves tmux session {TERMINAL_SESSION!r} ({shlex.join(terminal.command)}) on {terminal.url}", file=sys.stderr)
    return ttyd


def stop_terminal(ttyd: int | None) -> None:
    """End ttyd and the tmux server (the agent's session gets SIGHUP, as a closed terminal
    sends it)."""
    if ttyd is not None:
        try:
            os.kill(ttyd, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + TERMINAL_STOP_SECONDS
        while os.waitpid(ttyd, os.WNOHANG)[0] == 0:
            if time.monotonic() > deadline:
                os.kill(ttyd, signal.SIGKILL)
                os.waitpid(ttyd, 0)
                break
            time.sleep(0.02)
    subprocess.run(["tmux", "kill-server"], capture_output=True, timeout=10, check=False)


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
    shell = shutil.which("bash") or "/bin/sh"
    terminal = terminal_settings(shell)
    prepare_workspace()
    # Block the signals first: one that arrives between the fork and the wait below stays
    # pending for sigwait instead of killing the init with its default action.
    watched = {*FORWARDED, signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    env = dict(os.environ)
    env.pop("NEEDLECAST_TERMINAL_URL", None)  # /status names a terminal only when one runs
    ttyd: int | None = None
    if terminal is not None:
        ttyd = start_terminal(terminal, os.environ.get("MOSS_ROOT") or os.getcwd(), shell)
        env.update(NEEDLECAST_TERMINAL_URL=terminal.url, NEEDLECAST_TERMINAL_HOST=terminal.host, NEEDLECAST_TERMINAL_PORT=str(terminal.port))
    child = spawn(command, env)
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
            if pid == ttyd:
                print(f"init: the terminal's ttyd ended (status {exit_status(status)}); the command goes on", file=sys.stderr)
                ttyd = None
            if pid == child:
                if terminal is not None:
                    stop_terminal(ttyd)
                return exit_status(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
