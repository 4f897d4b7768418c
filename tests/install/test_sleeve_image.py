"""The sleeve image built here (mmdebstrap, podman import, podman build) and run as an engine runs
it: its entrypoint as PID 1 of a new PID namespace, chrooted into the image's root filesystem as
the image's user. And the sleeve terminal (tmux served by ttyd), in the image and, where this
machine has ttyd, from the checkout.

No image registry is reachable from these machines, so the base is made from Debian's packages;
`podman run` fails here (crun cannot set the container's rlimits), so the image is entered with
unshare and chroot instead (test_an_engine_runs_the_image runs it where an engine can).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import wait_for
from sleeve_support import (
    BuiltImage,
    Place,
    Sleeve,
    TtydSession,
    build_image,
    free_port,
    get_json,
    host_place,
    image_tools_missing,
    namespace_refusal,
    remove_image_work,
    request,
    skip_or_fail,
)

from needlecast import mailbox
from needlecast.mailbox import Mailbox

TOKEN = "sleeve-image-" + "7" * 24
SESSION = "agent"


@pytest.fixture(scope="session")
def built_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuiltImage]:
    """The image, built once for every test of the session that needs it."""
    missing = image_tools_missing()
    if missing:
        skip_or_fail(f"the sleeve image cannot be built here: {missing}")
    work = tmp_path_factory.mktemp("sleeve-image")
    try:
        yield build_image(work)
    finally:
        remove_image_work(work)


def terminal_tools_missing() -> str | None:
    missing = [tool for tool in ("tmux", "ttyd") if shutil.which(tool) is None]
    if not missing:
        return None
    debian = Path("/etc/debian_version")
    release = f" (this machine runs Debian {debian.read_text().strip()})" if debian.exists() else ""
    return f"{' and '.join(missing)} not installed here; Debian packages ttyd from forky on{release}. The image's variant of this test runs it"


@pytest.fixture(params=[pytest.param("host", marks=pytest.mark.slow), pytest.param("image", marks=pytest.mark.slow)])
def place(request: pytest.FixtureRequest) -> Place:
    if request.param == "host":
        why = namespace_refusal() or terminal_tools_missing()
        if why:
            pytest.skip(f"the terminal from the checkout cannot run here: {why}")
        return host_place()
    built: BuiltImage = request.getfixturevalue("built_image")
    return built.place()


def start_sleeve(place: Place, tmp_path: Path, settings: dict[str, str]) -> tuple[Sleeve, str]:
    """A sleeve with the sidecar's token in a mounted file, on loopback ports; (sleeve, workspace
    as the sleeve sees it)."""
    workspace = place.new_folder(tmp_path, f"{tmp_path.name}-workspace")
    secrets = place.new_folder(tmp_path, f"{tmp_path.name}-secrets")
    token_file = place.host_path(secrets) / "token"
    token_file.write_text(TOKEN + "\n")
    if place.rootfs is not None:
        os.chown(token_file, 10001, 10001)
    env = {
        **place.base_env(),
        "MOSS_ROOT": workspace,
        "NEEDLECAST_HOST": "127.0.0.1",  # loopback only: the namespace shares this machine's network
        "NEEDLECAST_PORT": str(free_port()),
        "NEEDLECAST_TOKEN_FILE": f"{secrets}/token",
        "NEEDLECAST_INIT_LAYOUT": "v2",
        **settings,
    }
    if place.rootfs is None:
        env["TMUX_TMPDIR"] = str(tmp_path)  # a tmux server of its own, not this machine's user's
    return Sleeve(place, env, workspace, tmp_path / "sleeve.log"), workspace


def sidecar_url(sleeve: Sleeve) -> str:
    return f"http://127.0.0.1:{sleeve.env['NEEDLECAST_PORT']}"


def wait_healthy(sleeve: Sleeve) -> None:
    def healthy() -> bool:
        if sleeve.process.poll() is not None:
            raise AssertionError(f"the sleeve exited with {sleeve.process.returncode}: {sleeve.log_text()}")
        try:
            return get_json(sidecar_url(sleeve) + "/health") == (200, {"status": "ok"})
        except OSError:
            return False

    wait_for(healthy, timeout=60, interval=0.1, message="the sidecar's /health")


def status_field(pid: int, name: str) -> str:
    """A line's value in /proc/<pid>/status (Uid: real, effective, saved, fs; NSpid: one PID per
    namespace, outermost first)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"/proc/{pid}/status has no {name} line")


def uid_of(pid: int) -> int:
    return int(status_field(pid, "Uid").split()[1])


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *descendants(int(child))]
    return found


def inbox_bodies(workspace: Path) -> list[tuple[str | None, str]]:
    return [(entry.message.sender, entry.message.body.strip()) for entry in mailbox.read_inbox(Mailbox(workspace)) if entry.message is not None]


# --------------------------------------------------------------------------- the image, built


@pytest.mark.slow
def test_the_image_is_built_here_and_configured_as_the_dockerfile_says(built_image: BuiltImage, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        steps = ", ".join(f"{step} {seconds:.0f} s" for step, seconds in built_image.seconds.items())
        print(f"\nsleeve image: {built_image.size_bytes / 1e6:.0f} MB; built in {sum(built_image.seconds.values()):.0f} s ({steps})")
    config = built_image.config
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["/opt/moss-files/venv/bin/python", "-I", "/opt/moss-files/docker/init.py"]
    assert config["Cmd"] == ["needlecast", "sidecar"] and config["WorkingDir"] == "/workspace"
    assert built_image.healthcheck["Test"] == ["CMD", "/opt/moss-files/venv/bin/python", "-I", "/opt/moss-files/docker/healthcheck.py"]
    assert set(config["ExposedPorts"]) == {"7471/tcp", "7681/tcp"}
    rootfs = built_image.rootfs
    for program in ("usr/bin/git", "usr/bin/tmux", "usr/bin/ttyd", *(f"opt/moss-files/venv/bin/{tool}" for tool in ("moss", "cstack", "needlecast"))):
        assert (rootfs / program).is_file(), f"/{program} is missing from the image"
    for tool in ("moss", "cstack", "needlecast"):  # install.sh's links, absolute inside the image
        assert os.readlink(rootfs / "opt/moss-files/bin" / tool) == f"/opt/moss-files/venv/bin/{tool}"
    # forky served ttyd alone: its source and pin are gone, and everything else is trixie's.
    assert not (rootfs / "etc/apt/sources.list.d/ttyd.sources").exists() and not (rootfs / "etc/apt/preferences.d/ttyd").exists()
    status = (rootfs / "var/lib/dpkg/status").read_text()
    assert "Package: ttyd\n" in status and "Package: tmux\n" in status
    assert "Version: 2.41" in status.split("Package: libc6\n", 1)[1].split("\n\n", 1)[0], "libc6 is trixie's"
    assert not list(rootfs.glob("var/cache/apt/*.bin")) and not list(rootfs.glob("var/cache/apt/archives/*.deb")), "apt's caches left in a layer"


@pytest.mark.slow
def test_the_image_serves_routes_a_message_and_stops_on_sigterm(built_image: BuiltImage, tmp_path: Path) -> None:
    """The image as an envoy on an empty volume with two sleeves: the init lays them out, the
    sidecar answers, routes alice's message to bob, and SIGTERM ends it all with status 0."""
    place = built_image.place()
    sleeve, workspace = start_sleeve(place, tmp_path, {"NEEDLECAST_SLEEVE": "envoy", "NEEDLECAST_INIT_SLEEVES": "alice,bob", "NEEDLECAST_ROUTE": "true"})
    try:
        wait_healthy(sleeve)
        init = sleeve.init_pid()
        # Everything in the namespace runs as the image's user, the init as PID 1.
        assert [uid_of(pid) for pid in (init, *descendants(init))] == [10001] * (1 + len(descendants(init)))
        assert status_field(init, "NSpid").split()[-1] == "1"
        # The image's own HEALTHCHECK command, run beside it.
        check = sleeve.run(*built_image.healthcheck["Test"][1:])
        assert check.returncode == 0, check.stderr
        assert get_json(sidecar_url(sleeve) + "/status")[0] == 401
        status, body = get_json(sidecar_url(sleeve) + "/status", TOKEN)
        assert status == 200 and body["sleeve_name"] == "envoy" and body["router"]["enabled"] is True
        assert body["router"]["sleeves"] == 2 and body["terminal"] == {"enabled": False}
        assert body["workspace"]["path"] == workspace
        # alice's message, sent with the image's own needlecast, is routed to bob.
        sent = sleeve.run("needlecast", "send", "--root", f"{workspace}/alice", "--to", "bob", "hello from the image")
        assert sent.returncode == 0, sent.stderr
        bob = place.host_path(f"{workspace}/bob")
        wait_for(lambda: inbox_bodies(bob) == [("alice", "hello from the image")], timeout=20, message="delivery to bob")
        started = time.monotonic()
        assert sleeve.stop() == 0, sleeve.log_text()
        assert time.monotonic() - started < 5.0
    except BaseException:
        sleeve.kill()
        raise
    log = sleeve.log_text()
    assert "stopping" in log and TOKEN not in log


# --------------------------------------------------------------------------- the sleeve terminal


def attach_with_tmux(sleeve: Sleeve, expected: str) -> str:
    """`tmux attach -t agent` on a terminal of its own (a pty); the screen it draws once it shows
    `expected`, after which the client is detached."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    client = subprocess.Popen(
        sleeve.exec_argv("tmux", "attach", "-t", SESSION),
        env={**sleeve.env, "TERM": "xterm"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    screen = b""

    def read_until(done: Callable[[], bool], what: str) -> None:
        """Read the client's output (it blocks when nobody reads) until `done`."""
        nonlocal screen
        deadline = time.monotonic() + 20
        while not done():
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"tmux attach: timed out waiting for {what}: {screen[-2000:]!r}"
            if select.select([master], [], [], min(remaining, 0.2))[0]:
                try:
                    screen += os.read(master, 65536)
                except OSError:  # EIO: the client has ended and closed its side
                    return

    try:
        read_until(lambda: expected.encode() in screen, repr(expected))
        # Detached by another client, as `tmux detach-client` from a second shell does (keys typed
        # at once can reach tmux while it still reads the terminal's answers to its queries).
        detached = sleeve.run("tmux", "detach-client", "-s", SESSION)
        assert detached.returncode == 0, detached.stderr
        read_until(lambda: client.poll() is not None, "the client to detach")
        assert client.wait(timeout=20) == 0
        while select.select([master], [], [], 0)[0]:  # what it wrote before it ended
            try:
                screen += os.read(master, 65536)
            except OSError:  # EIO: nothing more
                break
    finally:
        if client.poll() is None:
            client.kill()
            client.wait(timeout=10)
        os.close(master)
    return screen.decode(errors="replace")


def test_the_terminal_runs_the_agent_in_tmux_served_by_ttyd_with_the_token(place: Place, tmp_path: Path) -> None:
    """NEEDLECAST_TERMINAL=true: the init (PID 1) starts the agent (here a shell: the image has
    no agent CLI) in tmux and serves it through ttyd on a port of its own behind the sidecar's
    token; tmux attaches to the same session; /status names the terminal's URL."""
    port = free_port()
    sleeve, workspace = start_sleeve(
        place,
        tmp_path,
        {"NEEDLECAST_SLEEVE": "wendy", "NEEDLECAST_TERMINAL": "true", "NEEDLECAST_TERMINAL_HOST": "127.0.0.1", "NEEDLECAST_TERMINAL_PORT": str(port)},
    )
    page = f"http://127.0.0.1:{port}/"
    try:
        wait_healthy(sleeve)
        status, body = get_json(sidecar_url(sleeve) + "/status", TOKEN)
        assert status == 200 and body["terminal"] == {"enabled": True, "url": page, "listening": True}
        assert TOKEN not in json.dumps(body)

        # ttyd's page on loopback: only with the token as the basic-auth password.
        refused, headers, _ = request(page)
        assert refused == 401 and headers.get("www-authenticate", "").startswith("Basic")
        assert request(page, basic=("sleeve", "not-the-token"))[0] == 401
        served, _headers, html = request(page, basic=("sleeve", TOKEN))
        assert served == 200 and b"<html" in html.lower() and b"ttyd" in html.lower()

        # tmux: keys sent to the agent's session, read back from its pane, and a real attach.
        typed = sleeve.run("tmux", "send-keys", "-t", SESSION, "echo hello-$((6*7))", "Enter")
        assert typed.returncode == 0, typed.stderr

        def pane() -> str:
            shown = sleeve.run("tmux", "capture-pane", "-p", "-t", SESSION)
            assert shown.returncode == 0, shown.stderr
            return shown.stdout

        wait_for(lambda: "hello-42" in pane(), timeout=20, message="the shell's answer in the pane")
        screen = attach_with_tmux(sleeve, "hello-42")
        assert "[detached" in screen
        # The session's environment holds no token variable.
        environment = sleeve.run("tmux", "show-environment", "-g")
        assert environment.returncode == 0 and "MOSS_ROOT=" in environment.stdout and "NEEDLECAST_TOKEN" not in environment.stdout

        # Through ttyd's WebSocket, as a browser types: the same session answers.
        browser = TtydSession(port, ("sleeve", TOKEN))
        try:
            browser.type("echo via-ttyd-$((5*5))\r")
            browser.read_until(lambda text: "via-ttyd-25" in text)
        finally:
            browser.close()
        wait_for(lambda: "via-ttyd-25" in pane(), timeout=20, message="ttyd's input in tmux's pane")
        assert f"{workspace}" in pane(), "the agent runs in the workspace"

        started = time.monotonic()
        assert sleeve.stop() == 0, sleeve.log_text()
        assert time.monotonic() - started < 5.0
    except BaseException:
        sleeve.kill()
        raise
    log = sleeve.log_text()
    credential = base64.b64encode(f"sleeve:{TOKEN}".encode()).decode()
    assert f"the terminal serves tmux session '{SESSION}'" in log and page in log
    assert TOKEN not in log and credential not in log, "a token reached the log"


# --------------------------------------------------------------------------- an engine, where one runs


@pytest.mark.slow
def test_an_engine_runs_the_image_as_non_root_and_reports_healthy(built_image: BuiltImage) -> None:
    """`podman run` of the built image, its HEALTHCHECK and `podman stop`, where podman can run
    a container at all (here it cannot: crun is refused the container's rlimits)."""
    podman = built_image.podman
    probe = subprocess.run([*podman, "run", "--rm", "--entrypoint", "true", "localhost/moss-files-sleeve:test"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"podman cannot run a container on this machine: {reason}")
    name = f"moss-files-sleeve-test-{os.getpid()}"
    run = subprocess.run(
        [*podman, "run", "-d", "--name", name, "-e", "NEEDLECAST_INIT_LAYOUT=v2", "-e", "NEEDLECAST_SLEEVE=probe", "localhost/moss-files-sleeve:test"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    try:
        wait_for(
            lambda: subprocess.run([*podman, "healthcheck", "run", name], capture_output=True, timeout=30).returncode == 0,
            timeout=60,
            interval=1,
            message="the container's HEALTHCHECK",
        )
        assert subprocess.run([*podman, "stop", "--time", "10", name], capture_output=True, timeout=60).returncode == 0
        code = subprocess.run([*podman, "inspect", "--format", "{{.State.ExitCode}}", name], capture_output=True, text=True, timeout=30)
        assert code.stdout.strip() == "0"
    finally:
        subprocess.run([*podman, "rm", "-f", name], capture_output=True, timeout=60)
