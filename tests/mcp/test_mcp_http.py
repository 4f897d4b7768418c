"""`moss serve --http`: one real daemon on a free loopback port, its record, its token, a second
instance refused, a clean stop on SIGTERM; and the refusals that happen before anything binds."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import BIN, run_cli
from helpers import wait_for
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import CAPSULE, anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)

from moss_files.foundation import httpguard
from moss_files.mcp import daemon as mcp_http

TOKEN = "t0ken-for-tests"


def live_record(root: Path, pid: int) -> dict[str, Any] | None:
    record = mcp_http.read_record(root)
    return record if record and record.get("pid") == pid else None


@pytest.mark.anyio
async def test_http_daemon(repo: Path, tmp_path: Path) -> None:
    root = make_workspace(repo)
    run_dir = root / ".moss" / "run"
    run_dir.mkdir()
    # Left by a daemon that was killed: nobody holds the lock, so it is replaced.
    (run_dir / "mcp.json").write_text(json.dumps({"pid": 999999, "port": 1, "url": "http://127.0.0.1:1/mcp"}))
    log = (tmp_path / "daemon.log").open("wb")
    daemon = subprocess.Popen(
        [str(BIN / "moss"), "serve", "--http", "127.0.0.1:0", "--token", TOKEN], cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log
    )
    try:
        record = wait_for(lambda: live_record(root, daemon.pid), timeout=30, message="the daemon's record")
        assert set(record) >= {"port", "pid", "startedAt", "projectPath", "url"}
        assert record["projectPath"] == str(root.resolve()) and record["port"] > 0
        url = record["url"]
        assert url == f"http://127.0.0.1:{record['port']}/mcp"
        assert subprocess.run(["git", "check-ignore", "-q", ".moss/run/mcp.json"], cwd=root).returncode == 0

        async with httpx2.AsyncClient() as http:
            refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "UNAUTHORIZED"
            rebinding = await http.post(url, json={}, headers={"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"})
            assert rebinding.status_code == 421 and rebinding.json()["error"]["code"] == "HOST_NOT_ALLOWED"
            cross_site = await http.post(url, json={}, headers={"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"})
            assert cross_site.status_code == 403 and cross_site.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"
            simple = await http.post(url, content=b"{}", headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"})
            assert simple.status_code == 415 and simple.json()["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"

        async def agent(mode: str, name: str) -> None:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
                async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                    assert len((await client.list_tools()).tools) == 17
                    stored = await client.call_tool("moss.store", {"capsule_text": CAPSULE, "name": name})
                    assert not stored.is_error
                    fetched = await client.call_tool("moss.fetch", {"name": name, "include_text": False})
                    assert fetched.structured_content["id"] == stored.structured_content["id"]
                    missing = await client.call_tool("moss.fetch", {"name": "nope"})
                    assert missing.is_error and missing.structured_content["error"]["code"] == "NOT_FOUND"

        async with anyio.create_task_group() as group:  # two agents share the daemon at once
            group.start_soon(agent, "auto", "first")
            group.start_soon(agent, "legacy", "second")
        listed = json.loads(run_cli("moss", "list", "--json", cwd=root).stdout)
        assert sorted(item["name"] for item in listed["items"]) == ["first", "second"]

        second = run_cli("moss", "serve", "--http", "127.0.0.1:0", cwd=root)
        assert second.returncode == 5 and "ALREADY_RUNNING" in second.stderr
        assert live_record(root, daemon.pid) is not None

        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
        assert not (run_dir / "mcp.json").exists()
        assert daemon.stdout is not None and daemon.stdout.read() == b""
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=10)
        if daemon.stdout is not None:
            daemon.stdout.close()
        log.close()
    text = (tmp_path / "daemon.log").read_text()
    assert "stale record left by pid 999999" in text and "stopped" in text and "Traceback" not in text


def test_refusals_before_binding(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    exposed = run_cli("moss", "serve", "--http", "0.0.0.0:0", cwd=root)
    assert exposed.returncode == 2 and "TOKEN_REQUIRED" in exposed.stderr
    assert run_cli("moss", "serve", "--http", "no-port", cwd=root).returncode == 2
    assert not (root / ".moss" / "run" / "mcp.json").exists()


def test_a_busy_port_is_a_conflict_with_a_hint_naming_the_option(tmp_path: Path) -> None:
    import socket

    root = make_workspace(tmp_path / "project")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = run_cli("moss", "serve", "--http", f"127.0.0.1:{port}", cwd=root)
    assert busy.returncode == 5 and "error[CONFLICT]" in busy.stderr and "Traceback" not in busy.stderr
    assert "hint:" in busy.stderr and "--http 127.0.0.1:0" in busy.stderr
    assert mcp_http.running_record(root) is None


def test_addresses_and_loopback() -> None:
    assert mcp_http.parse_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert mcp_http.parse_address("[::1]:0") == ("::1", 0)
    assert mcp_http.parse_address("localhost:9") == ("localhost", 9)
    for bad in ("8765", "host:", ":80", "h:99999", "h:x"):
        with pytest.raises(Exception) as caught:
            mcp_http.parse_address(bad)
        assert getattr(caught.value, "code", None) == "INVALID_REQUEST"
    assert httpguard.is_loopback("127.0.0.2") and httpguard.is_loopback("::1") and httpguard.is_loopback("localhost")
    assert not httpguard.is_loopback("0.0.0.0") and not httpguard.is_loopback("192.168.1.2") and not httpguard.is_loopback("example.org")


@pytest.mark.slow  # three daemons started and stopped
def test_a_sigterm_while_the_daemon_starts_stops_it_cleanly(repo: Path, tmp_path: Path) -> None:
    """SIGTERM's handler was set last in start-up, after the index watcher, the web view's
    watcher (with its probe) and the MCP app: a SIGTERM in between killed the daemon (-15)
    without its clean stop. The index watcher running is the first sign of a start-up."""
    from moss_files.index import sources, watch

    root = make_workspace(repo)
    fingerprint = sources.default_registry().fingerprint
    for attempt in range(3):
        with (tmp_path / f"daemon{attempt}.log").open("wb") as log:
            daemon = subprocess.Popen(
                [str(BIN / "moss"), "serve", "--http", "127.0.0.1:0"], cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
            )
        try:
            wait_for(lambda: watch.synced(root, fingerprint) is not None, timeout=60, interval=0.002, message="the daemon's index watcher")
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=60) == 0, (tmp_path / f"daemon{attempt}.log").read_text()
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait(timeout=10)
        assert mcp_http.read_record(root) is None
        wait_for(lambda: watch.synced(root, fingerprint) is None, timeout=20, message="the index watcher to stop with its daemon")
        assert "moss serve: stopped" in (tmp_path / f"daemon{attempt}.log").read_text()


def test_the_daemon_keeps_the_search_index_warm_while_it_runs(repo: Path, tmp_path: Path) -> None:
    from moss_files.index import sources, watch

    root = make_workspace(repo)
    fingerprint = sources.default_registry().fingerprint
    with (tmp_path / "daemon.log").open("wb") as log:
        daemon = subprocess.Popen(
            [str(BIN / "moss"), "serve", "--http", "127.0.0.1:0"], cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
        )
    try:
        wait_for(lambda: watch.synced(root, fingerprint) is not None, timeout=60, message="the daemon's index watcher")
        note = root / ".moss" / "notes" / "idea.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text("# Idea\n\nplatypus migration\n", encoding="utf-8")
        found = json.loads(run_cli("moss", "search", "platypus", "--json", cwd=root).stdout)
        assert [match["kind"] for match in found["matches"]] == ["note"]
        assert json.loads(run_cli("moss", "index", "refresh", "--json", cwd=root).stdout)["watched"] is True
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
        assert watch.synced(root, fingerprint) is None and not watch.socket_path(root).exists()  # stopped with it
        assert json.loads(run_cli("moss", "index", "refresh", "--json", cwd=root).stdout)["watched"] is False
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=10)
    assert "keeping the index warm" in (tmp_path / "daemon.log").read_text()
    # Asked not to, it runs none.
    with (tmp_path / "daemon2.log").open("wb") as log:
        quiet = subprocess.Popen(
            [str(BIN / "moss"), "serve", "--http", "127.0.0.1:0", "--no-index-watch"], cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
        )
    try:
        wait_for(lambda: live_record(root, quiet.pid), timeout=30, message="the daemon's record")
        assert watch.synced(root, fingerprint) is None
        quiet.send_signal(signal.SIGTERM)
        assert quiet.wait(timeout=30) == 0
    finally:
        if quiet.poll() is None:
            quiet.kill()
            quiet.wait(timeout=10)
