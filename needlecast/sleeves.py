"""The sleeve directory: which names the envoy's router delivers to, and where they live.

Edge layer (reads the envoy root and the registry file); `parse_registry` itself is pure.
By default every child folder of the envoy root that holds `.needlecast/` is a sleeve named
after the folder, and the root itself answers to `envoy`. The optional registry
`<root>/.needlecast/sleeves.toml` adds or overrides names:

    alice = "work/alice-repo"              # a local workspace (relative to the root)

    [bob]
    url = "http://10.0.0.7:7471"           # a sleeve on another host, via its sidecar
    token_env = "NEEDLECAST_TOKEN_BOB"     # env var holding the bearer token (never the token)
                                           # (or token_file = "/run/secrets/bob")
    [carol]
    peer = "host-b"                        # sleeve `carol` of the peer host `host-b` (signed requests)

    [needlecast]
    discover_children = false              # only the names listed here

Peers (`--peer NAME=URL`, see `needlecast.peers`) add `name@peer` addresses and, for each peer
whose name is free here, the name itself (the peer's own sleeve: a lone sleeve's sidecar
answers to its name). A sidecar's own name (`self_name`) is an alias of the root.

A registered sleeve whose workspace is missing stays in the directory with a problem attached,
so messages to it wait in the outbox (they are not dead-lettered) and `needlecast sleeves`
reports it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from moss_files.foundation import datafiles, fs
from moss_files.foundation.errors import InvalidDocument, MossError, NotFound, error_body
from needlecast.mailbox import DIR_NAME, iter_mailboxes
from needlecast.message import ENVOY
from needlecast.routing import RESERVED, Directory, Sleeve, sleeve_at_peer

REGISTRY_NAME = "sleeves.toml"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def registry_path(root: Path) -> Path:
    """Where the envoy's registry file lives."""
    return root / DIR_NAME / REGISTRY_NAME


def holds_sleeves(folder: Path) -> bool:
    """True when `folder` is an envoy root: it has a sleeve registry or a child sleeve."""
    # Whatever stands at the registry's name counts (a FIFO, a link): reading it then refuses it.
    return os.path.lexists(registry_path(folder)) or next(iter_mailboxes(folder), None) is not None


def enclosing_envoy(workspace: Path) -> tuple[Path, str] | None:
    """The envoy root above `workspace` whose router delivers its messages, and the sleeve name
    it has there; None for a workspace no envoy root above holds (a lone one, or an envoy root
    itself: one that holds sleeves).

    A registry above that names the workspace (a local `path` resolving to it) decides first.
    Else its parent folder holds it as a child sleeve (a name a sleeve may have, children not
    switched off there) when the parent is an envoy root of its own (a `.needlecast/` folder or
    a registry), or when the workspace is no repository of its own and the parent holds other
    sleeves too: a folder of projects, each its own git repository, is no envoy.

    Raises InvalidDocument REGISTRY_INVALID for a bad registry above.
    """
    root = workspace.resolve()
    if holds_sleeves(root):
        return None
    parent_discovers = True
    for ancestor in root.parents:
        registry = registry_path(ancestor)
        if not registry.is_file():
            continue
        try:
            text = fs.read_bytes(registry).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidDocument(f"registry is not UTF-8 text: {exc}", code="REGISTRY_INVALID", path=registry) from None
        entries, discover = parse_registry(text, registry)
        for name, value in entries.items():
            if "path" in value:
                target = Path(value["path"]).expanduser()
                if (target if target.is_absolute() else ancestor / target).resolve() == root:
                    return ancestor, name
        if ancestor == root.parent:
            parent_discovers = discover
    parent = root.parent
    if parent == root or not parent_discovers or not NAME_RE.fullmatch(root.name) or root.name.lower() in RESERVED:
        return None
    if (parent / DIR_NAME).is_dir() or registry_path(parent).is_file():
        return parent, root.name
    if not (root / ".git").exists() and any(child != root for child in iter_mailboxes(parent)):
        return parent, root.name
    return None


def _line_of(text: str, name: str) -> int | None:
    pattern = re.compile(rf"^\s*(?:\[\s*{re.escape(name)}\s*\]|\"?{re.escape(name)}\"?\s*=)", re.MULTILINE)
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def parse_registry(text: str, path: Path) -> tuple[dict[str, dict[str, Any]], bool]:
    """Return ({name: {path|url, token_env}}, discover_children) from the registry's text.

    Raises InvalidDocument REGISTRY_INVALID naming the file and line, MERGE_CONFLICT at a
    conflict marker, FORMAT_TOO_NEW for a registry of a newer format. A BOM is dropped.
    """
    data = datafiles.load_toml(text, path, code="REGISTRY_INVALID", what="registry", kind="sleeves")
    options = data.pop("needlecast", {})
    if not isinstance(options, dict) or set(options) - {"discover_children"} or not isinstance(options.get("discover_children", True), bool):
        raise InvalidDocument(
            "[needlecast] accepts only `discover_children = true|false`", code="REGISTRY_INVALID", path=path, line=_line_of(text, "needlecast")
        )
    entries: dict[str, dict[str, Any]] = {}
    for name, value in data.items():
        line = _line_of(text, name)
        if not NAME_RE.fullmatch(name) or name.lower() in RESERVED:
            raise InvalidDocument(
                f"{name!r} cannot name a sleeve (letters, digits, . _ -; not all/envoy/needlecast)", code="REGISTRY_INVALID", path=path, line=line
            )
        if isinstance(value, str):
            value = {"path": value}
        if not isinstance(value, dict):
            raise InvalidDocument(f"sleeve {name!r} must be a path string or a table", code="REGISTRY_INVALID", path=path, line=line)
        unknown = set(value) - {"path", "url", "token_env", "token_file", "peer"}
        if unknown:
            raise InvalidDocument(f"sleeve {name!r} has unknown keys: {', '.join(sorted(unknown))}", code="REGISTRY_INVALID", path=path, line=line)
        if sum(key in value for key in ("path", "url", "peer")) != 1:
            raise InvalidDocument(f"sleeve {name!r} needs exactly one of `path`, `url` or `peer`", code="REGISTRY_INVALID", path=path, line=line)
        if "peer" in value and ("token_env" in value or "token_file" in value):
            raise InvalidDocument(f"sleeve {name!r}: a peer's token is the peer's, not the sleeve's", code="REGISTRY_INVALID", path=path, line=line)
        if "url" in value and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", str(value["url"])):
            raise InvalidDocument(f"sleeve {name!r}: `url` must be an http(s) address", code="REGISTRY_INVALID", path=path, line=line)
        if not all(isinstance(v, str) and v for v in value.values()):
            raise InvalidDocument(f"sleeve {name!r}: values must be non-empty strings", code="REGISTRY_INVALID", path=path, line=line)
        entries[name] = dict(value)
    return entries, options.get("discover_children", True)


def _local(name: str, workspace: Path, origin: str) -> Sleeve:
    problem: MossError | None = None
    if not workspace.is_dir():
        problem = NotFound(
            f"sleeve {name!r}: workspace {workspace} does not exist",
            code="SLEEVE_UNAVAILABLE",
            path=workspace,
            hint=f"fix or remove {name!r} in {REGISTRY_NAME}",
        )
    elif not (workspace / DIR_NAME).is_dir():
        problem = NotFound(
            f"sleeve {name!r}: {workspace} has no {DIR_NAME} folder", code="SLEEVE_UNAVAILABLE", path=workspace, hint="run `needlecast init` in that workspace"
        )
    return Sleeve(name, path=workspace, origin=origin, problem=problem)


def _outside(name: str, workspace: Path, root: Path, where: Path, line: int | None, origin: str) -> Sleeve:
    # Delivering there would write outside the envoy's tree; the sleeve stays listed, with
    # the problem, so messages to it wait and `needlecast sleeves` says why.
    problem = InvalidDocument(
        f"sleeve {name!r}: {workspace} resolves to {workspace.resolve()}, outside the envoy root {root}",
        code="OUTSIDE_ROOT",
        path=where,
        line=line,
        hint="keep every local sleeve's workspace inside the envoy root, or reach it by `url`",
    )
    return Sleeve(name, path=workspace, origin=origin, problem=problem)


def load_directory(root: Path, *, self_name: str | None = None, peers: Mapping[str, str | None] | None = None, host_name: str | None = None) -> Directory:
    """The envoy's sleeve directory. Raises InvalidDocument REGISTRY_INVALID for a bad registry.

    A local sleeve whose workspace resolves (links followed) outside the root is listed with
    an OUTSIDE_ROOT problem and never delivered to. `peers` (name -> address) are the peer
    hosts; `host_name` is this host's name among them; `self_name` is this sidecar's name.
    """
    peers = dict(peers or {})
    root = root.resolve()
    sleeves: dict[str, Sleeve] = {ENVOY: Sleeve(ENVOY, path=root, origin="envoy")}
    registry = registry_path(root)
    entries: dict[str, dict[str, Any]] = {}
    discover = True
    text = ""
    try:
        # Read whatever stands at the name: a FIFO, a folder or a link there is refused by the
        # read, never taken for a missing registry.
        data: bytes | None = fs.read_bytes(registry)
    except FileNotFoundError:
        data = None
    if data is not None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidDocument(f"registry is not UTF-8 text: {exc}", code="REGISTRY_INVALID", path=registry) from None
        entries, discover = parse_registry(text, registry)
    if discover:
        for child in iter_mailboxes(root):
            if NAME_RE.fullmatch(child.name) and child.name.lower() not in RESERVED:
                if not child.resolve().is_relative_to(root):
                    sleeves[child.name] = _outside(child.name, child, root, child, None, "child")
                else:
                    sleeves[child.name] = Sleeve(child.name, path=child, origin="child")
    for name, value in entries.items():
        if "url" in value:
            sleeves[name] = Sleeve(name, url=value["url"].rstrip("/"), token_env=value.get("token_env"), token_file=value.get("token_file"), origin="registry")
            continue
        if "peer" in value:
            if value["peer"] in peers:
                sleeves[name] = sleeve_at_peer(name, name, value["peer"], peers[value["peer"]], "registry")
            else:
                problem = NotFound(
                    f"sleeve {name!r}: no peer named {value['peer']!r} is configured", code="SLEEVE_UNAVAILABLE", path=registry, line=_line_of(text, name)
                )
                sleeves[name] = Sleeve(name, peer=value["peer"], origin="registry", problem=problem)
            continue
        target = Path(value["path"]).expanduser()
        workspace = target if target.is_absolute() else root / target
        if not workspace.resolve().is_relative_to(root):
            sleeves[name] = _outside(name, workspace, root, registry, _line_of(text, name), "registry")
        else:
            sleeves[name] = _local(name, workspace.resolve(), "registry")
    for peer, url in peers.items():
        if peer not in sleeves:
            sleeves[peer] = sleeve_at_peer(peer, peer, peer, url, "peer")
    if self_name and self_name not in sleeves:
        sleeves[self_name] = Sleeve(self_name, path=root, origin="self")
    return Directory(root, sleeves, peers, host_name)


def sleeve_to_dict(sleeve: Sleeve) -> dict[str, Any]:
    """JSON shape of a directory entry."""
    data: dict[str, Any] = {
        "name": sleeve.name,
        "origin": sleeve.origin,
        "path": str(sleeve.path) if sleeve.path is not None else None,
        "url": sleeve.url,
        "peer": sleeve.peer,
        "ok": sleeve.problem is None,
    }
    if sleeve.problem is not None:
        data["problem"] = error_body(sleeve.problem)["error"]
    return data
