"""What the sidecar's `/status` reports about the sleeve beyond its files: the agent CLI (the
seed's "DHF"), which agent credentials are present, and the sleeve terminal. Edge layer: runs
`<cli> --version`, looks at files, connects to the terminal's port; the shapes and the order of
the probes are `needlecast.status`'s.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from needlecast.peers import without_secrets
from needlecast.status import AUTH_SOURCES, DHF_CANDIDATES, dhf_unknown, parse_version_output

VERSION_TIMEOUT = 5.0  # an agent CLI that hangs on --version must not hold /status for ever
TERMINAL_PROBE_TIMEOUT = 1.0


def detect_dhf(environ: Mapping[str, str]) -> dict[str, Any]:
    """`{name, version}` of the first agent CLI on PATH whose `--version` succeeds, in the seed's
    order (claude, gemini, codex, aider, opencode); `{name: "unknown", version: null}` when none does."""
    search = environ.get("PATH", os.defpath)
    for name in DHF_CANDIDATES:
        program = shutil.which(name, path=search)
        if program is None:
            continue
        try:
            done = subprocess.run(
                [program, "--version"],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=VERSION_TIMEOUT,
                stdin=subprocess.DEVNULL,
                env=without_secrets(environ),
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        version = parse_version_output(done.stdout)
        if done.returncode == 0 and version:
            return {"name": name, "version": version}
    return dhf_unknown()


def detect_auth(environ: Mapping[str, str]) -> dict[str, bool]:
    """`{claude, gemini}`: True when a credential for that agent is present (a file, or a key in
    the environment). Only presence is checked; no credential is read or reported."""
    home = Path(environ.get("HOME") or Path.home())
    found: dict[str, bool] = {}
    for agent, (files, variables) in AUTH_SOURCES.items():
        found[agent] = any((home / relative).is_file() for relative in files) or any(environ.get(name) for name in variables)
    return found


def detect_terminal(environ: Mapping[str, str]) -> dict[str, Any]:
    """The sleeve terminal (tmux served by ttyd), as the image's init announces it when it has
    started one: NEEDLECAST_TERMINAL_URL (the URL, without the secret), NEEDLECAST_TERMINAL_HOST
    and NEEDLECAST_TERMINAL_PORT (where ttyd listens). `listening` is whether that port accepts a
    connection now. `{"enabled": false}` when no terminal was started."""
    url = environ.get("NEEDLECAST_TERMINAL_URL")
    if not url:
        return {"enabled": False}
    host = environ.get("NEEDLECAST_TERMINAL_HOST", "127.0.0.1")
    port = int(environ.get("NEEDLECAST_TERMINAL_PORT", "7681"))
    target = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    try:
        socket.create_connection((target, port), timeout=TERMINAL_PROBE_TIMEOUT).close()
        listening = True
    except OSError:
        listening = False
    return {"enabled": True, "url": url, "listening": listening}
