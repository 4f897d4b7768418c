"""The peers of this host and their tokens, read from the environment or from files, and the
record of nonces already accepted. Edge layer: reads token files and owns
`.needlecast/.state/nonces.log` (per machine, git-ignored).

A token never comes from the command line (any user can read a process's arguments) and is
never logged: `signing.Peer` keeps it out of its repr, and errors name the variable or the
file, never the value.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from moss_files.foundation import fs
from moss_files.foundation.errors import InvalidRequest, MossError
from needlecast.signing import Peer as Peer
from needlecast.signing import ReplayGuard, parse_peer_spec, token_variable

MAX_TOKEN_BYTES = 4096
NONCE_LOG = "nonces.log"
NONCE_LOG_MAX_BYTES = 1024 * 1024  # rewritten without the expired lines past this size


def read_token_file(path: Path) -> str:
    """The token a file holds (surrounding white space removed: `echo` adds a line break).

    Raises InvalidRequest PEER_TOKEN_MISSING when the file cannot be read or holds nothing.
    """
    try:
        data = path.read_bytes()[: MAX_TOKEN_BYTES + 1]
    except OSError as exc:
        raise InvalidRequest(f"cannot read the token file {path}: {exc.strerror}", code="PEER_TOKEN_MISSING", path=path) from None
    if len(data) > MAX_TOKEN_BYTES:
        raise InvalidRequest(f"the token file {path} holds more than {MAX_TOKEN_BYTES} bytes", code="PEER_TOKEN_MISSING", path=path)
    token = data.decode("utf-8", "replace").strip()
    if not token:
        raise InvalidRequest(f"the token file {path} is empty", code="PEER_TOKEN_MISSING", path=path)
    return token


def split_specs(values: Iterable[str]) -> list[str]:
    """Peer specs from flags and from NEEDLECAST_PEERS, which may hold several separated by
    commas or white space."""
    return [part for value in values for part in value.replace(",", " ").split() if part]


def load_peers(specs: Iterable[str], environ: Mapping[str, str], token_dir: Path | None) -> dict[str, Peer]:
    """The peers named by `NAME[=URL]` specs, each with its token: the environment variable
    NEEDLECAST_PEER_TOKEN_<NAME>, else the file `<token_dir>/<NAME>`.

    Raises InvalidRequest for a malformed spec, a peer named twice, or PEER_TOKEN_MISSING.
    """
    peers: dict[str, Peer] = {}
    for spec in split_specs(specs):
        name, url = parse_peer_spec(spec)
        if name in peers:
            raise InvalidRequest(f"peer {name!r} is named twice", code="INVALID_REQUEST")
        variable = token_variable(name)
        token = (environ.get(variable) or "").strip()
        if not token and token_dir is not None and (token_dir / name).exists():
            token = read_token_file(token_dir / name)
        if not token:
            where = f"{variable}" + (f" or the file {token_dir / name}" if token_dir is not None else " (or a file in the peer token folder)")
            raise InvalidRequest(f"no token for peer {name!r}: set {where}", code="PEER_TOKEN_MISSING")
        peers[name] = Peer(name, url, token)
    return peers


class NonceLog:
    """The nonces a sidecar accepted, kept across restarts: without them, a request captured
    before a restart could be replayed after it, within its time window."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, guard: ReplayGuard, now: float) -> None:
        """Fill `guard` with the nonces not yet expired; drop expired lines when the file is large."""
        try:
            data = fs.read_bytes(self.path)
        except (FileNotFoundError, MossError):
            return
        entries: list[tuple[str, str, float]] = []
        for line in data.decode("utf-8", "replace").splitlines():
            fields = line.split()
            if len(fields) == 3:
                try:
                    entries.append((fields[0], fields[1], float(fields[2])))
                except ValueError:
                    continue  # a torn last line
        guard.load(entries, now)
        if len(data) > NONCE_LOG_MAX_BYTES:
            kept = "".join(f"{peer} {nonce} {at:.0f}\n" for peer, nonce, at in entries if at > now)
            fs.write_atomic(self.path, kept.encode())

    def append(self, peer: str, nonce: str, forget_at: float) -> None:
        # Not fsynced: a kill -9 keeps what was written; only a power cut within the window
        # could lose one, and the window is two minutes.
        with fs.folder_fd(self.path.parent, create=True) as dir_fd:
            fd = os.open(self.path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
            try:
                os.write(fd, f"{peer} {nonce} {forget_at:.0f}\n".encode())
            finally:
                os.close(fd)


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the sidecar's own token variables: what a program it runs (git, an
    agent CLI's --version) gets, so no token reaches a process that has no use for it."""
    return {name: value for name, value in environ.items() if not name.startswith(("NEEDLECAST_TOKEN", "NEEDLECAST_PEER_TOKEN_"))}


def wall_clock() -> float:
    """Seconds since the epoch: the clock signed requests are dated by."""
    return time.time()
