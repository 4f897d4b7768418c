"""What the sidecar's `/status` reports about the sleeve beyond its files: the agent CLI (the
seed's "DHF") and which agent credentials are present. Edge layer: runs `<cli> --version` and
looks at files; the shapes and the order of the probes are `needlecast.status`'s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from needlecast.peers import without_secrets
from needlecast.status import AUTH_SOURCES, DHF_CANDIDATES, dhf_unknown, parse_version_output

VERSION_TIMEOUT = 5.0  # an agent CLI that hangs on --version must not hold /status for ever


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
