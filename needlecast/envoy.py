"""Use cases of the envoy, which sees every sleeve: the sleeve directory, one routing pass, and
the long-running router and sidecar. A sleeve's own use cases are in `service`.

Shell layer. `ctx.root` is the envoy root (the folder holding the sleeves); `ctx.notify` hears
the router's and the sidecar's log lines; `environ` holds the bearer tokens that registry
entries name for remote sleeves (`token_env`), passed in because only entry points read the
environment. Kept apart from `service` so that a sleeve's commands never load the router, the
HTTP server or the HTTP client.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moss_files.foundation.errors import InvalidRequest
from needlecast.gitsync import GitSyncSettings
from needlecast.peers import Peer
from needlecast.router import Router, report_to_dict
from needlecast.sidecar import Sidecar
from needlecast.sleeves import enclosing_envoy, load_directory, sleeve_to_dict

if TYPE_CHECKING:
    from moss_files.foundation.context import Context


def check_envoy_root(root: Path, *, peers: Mapping[str, Any] | None = None) -> None:
    """Refuse to route (or list sleeves) from a sleeve of an envoy root above: its directory
    would be the sleeve's alone, every message for another sleeve a dead letter. A sleeve with
    peer hosts routes its own outbox to them, as a lone sleeve's sidecar does.

    Raises InvalidRequest NOT_ENVOY_ROOT (details: envoy, sleeve), InvalidDocument
    REGISTRY_INVALID for a bad registry above.
    """
    if peers:
        return
    found = enclosing_envoy(root)
    if found is None:
        return
    envoy, name = found
    raise InvalidRequest(
        f"{root} is the sleeve {name!r} of the envoy root {envoy}: its messages wait for the envoy's router",
        code="NOT_ENVOY_ROOT",
        path=root,
        details={"envoy": str(envoy), "sleeve": name},
        hint=f"route from the envoy root: cd {envoy}, or pass --root {envoy}",
    )


def list_sleeves(ctx: Context) -> dict[str, Any]:
    """`needlecast sleeves`: `{root, sleeves: [{name, origin, path, url, ok, problem?}]}`.

    Raises InvalidDocument REGISTRY_INVALID for a bad registry, InvalidRequest NOT_ENVOY_ROOT
    in a sleeve of an envoy root above.
    """
    check_envoy_root(ctx.root)
    directory = load_directory(ctx.root)
    return {"root": str(directory.root), "sleeves": [sleeve_to_dict(sleeve) for sleeve in directory.sleeves.values()]}


def route_once(
    ctx: Context,
    *,
    environ: Mapping[str, str] | None = None,
    peers: Mapping[str, Peer] | None = None,
    host_name: str | None = None,
) -> dict[str, Any]:
    """`needlecast route --once`: one routing pass over every sleeve; returns what it did
    (`{senders, delivered, archived, removed, dead_letters, bounces, pending, unsettled, held,
    problems}`). A sender's failure is reported in `problems`, an unreachable recipient in
    `held`. `peers` are the peer hosts (`name@peer` recipients; requests signed with each
    one's token, as `host_name`). Raises InvalidDocument REGISTRY_INVALID, InvalidRequest
    NOT_ENVOY_ROOT in a sleeve of an envoy root above (`check_envoy_root`)."""
    check_envoy_root(ctx.root, peers=peers)
    router = Router(ctx.root, clock=ctx.clock, environ=environ, log=ctx.notify, peers=peers, host_name=host_name or ctx.sleeve, self_name=ctx.sleeve)
    return report_to_dict(router.route_all())


def watch(
    ctx: Context,
    *,
    poll: bool = False,
    sweep_seconds: float = 30.0,
    environ: Mapping[str, str] | None = None,
    peers: Mapping[str, Peer] | None = None,
    host_name: str | None = None,
) -> int:
    """`needlecast route`: route on every outbox change until SIGTERM/SIGINT; returns 0. Raises
    InvalidRequest NOT_ENVOY_ROOT in a sleeve of an envoy root above (`check_envoy_root`)."""
    check_envoy_root(ctx.root, peers=peers)
    router = Sidecar(
        ctx.root,
        name=ctx.sleeve,
        serve_http=False,
        route=True,
        poll=poll,
        sweep_seconds=sweep_seconds,
        clock=ctx.clock,
        environ=environ,
        log=ctx.notify,
        peers=peers,
        host_name=host_name,
    )
    return router.run()


def run_sidecar(
    ctx: Context,
    *,
    host: str,
    port: int,
    token: str | None = None,
    route: bool | None = None,
    poll: bool = False,
    poll_interval: float = 0.5,
    sweep_seconds: float = 30.0,
    environ: Mapping[str, str] | None = None,
    peers: Mapping[str, Peer] | None = None,
    host_name: str | None = None,
    git_sync: GitSyncSettings | None = None,
    index_watch: bool = False,
    scan: int = 1,
) -> int:
    """`needlecast sidecar`: watch and route (when `route`, or when the root holds sleeves or
    has peers) and serve the HTTP API as the context's sleeve until SIGTERM/SIGINT; returns 0.
    `peers` may deliver to this host's sleeves (signed requests) and receive from them;
    `git_sync` commits, pulls and pushes the toolkit's files; `index_watch` keeps the
    workspace's search index warm (`moss index watch`) while the sidecar runs. With `scan`,
    a `port` in use gives way to the first free one of the `scan` ports from it.

    Raises InvalidRequest TOKEN_REQUIRED for a non-loopback `host` without a token, Conflict
    ALREADY_RUNNING when another sidecar holds the workspace, RepoError GIT_SYNC_FAILED when
    `git_sync` is asked outside a clone, InvalidRequest NOT_ENVOY_ROOT when `route` is asked
    of a sleeve of an envoy root above (its sidecar serves; the envoy's routes).
    """
    if route:
        check_envoy_root(ctx.root, peers=peers)
    sidecar = Sidecar(
        ctx.root,
        name=ctx.sleeve or ctx.root.name,
        host=host,
        port=port,
        token=token,
        route=route,
        poll=poll,
        poll_interval=poll_interval,
        sweep_seconds=sweep_seconds,
        clock=ctx.clock,
        environ=environ,
        log=ctx.notify,
        peers=peers,
        host_name=host_name,
        git_sync=git_sync,
        index_watch=index_watch,
        scan=scan,
    )
    return sidecar.run()
