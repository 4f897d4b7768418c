"""Running a sleeve as its image runs it, here or inside the built image.

A `Place` says where the init runs: on this machine (the checkout's docker/init.py and the test
venv's tools) or in the root filesystem of the image built with podman (its own Python, toolkit,
tmux and ttyd), entered with chroot as the image's user. Either way the init is PID 1 of a new
PID namespace (`unshare --pid --fork --mount-proc`), as a container engine starts it; `Sleeve.run`
runs a command beside it as `docker exec` would (in the image: nsenter into its namespaces and
root). Also: building the image without a registry (mmdebstrap, podman import, podman build),
and the small WebSocket client that talks ttyd's protocol.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
from conftest import BIN
from helpers import wait_for

ROOT = Path(__file__).resolve().parent.parent.parent
IMAGE_USER = "10001:10001"
# MOSS_REQUIRE_IMAGE=1 (a machine that must build and run the image): what would skip fails
# instead.
REQUIRE_IMAGE = os.environ.get("MOSS_REQUIRE_IMAGE") == "1"


def skip_or_fail(reason: str) -> NoReturn:
    if REQUIRE_IMAGE:
        pytest.fail(f"{reason} (MOSS_REQUIRE_IMAGE=1)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def request(url: str, *, token: str | None = None, basic: tuple[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """GET `url`: (status, headers with lower-case names, body), also for an error status."""
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if basic:
        req.add_header("Authorization", "Basic " + base64.b64encode(":".join(basic).encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, {name.lower(): value for name, value in response.headers.items()}, response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, {name.lower(): value for name, value in exc.headers.items()}, exc.read()


def get_json(url: str, token: str | None = None) -> tuple[int, Any]:
    status, _headers, body = request(url, token=token)
    return status, json.loads(body)


# --------------------------------------------------------------------------- where a sleeve runs


@dataclass(frozen=True)
class Place:
    """Where the init runs. `rootfs` None: on this machine; else the image's root filesystem."""

    name: str
    rootfs: Path | None = None
    image_env: dict[str, str] = field(default_factory=dict)

    def host_path(self, path: str) -> Path:
        """A path as the sleeve sees it, as this machine sees it."""
        return Path(path) if self.rootfs is None else self.rootfs / path.lstrip("/")

    def new_folder(self, host_base: Path, name: str) -> str:
        """A fresh folder the image's user owns; its path as the sleeve sees it."""
        inside = str(host_base / name) if self.rootfs is None else f"/workspace/{name}"
        folder = self.host_path(inside)
        folder.mkdir(parents=True)
        if self.rootfs is not None:
            uid, gid = (int(part) for part in IMAGE_USER.split(":"))
            os.chown(folder, uid, gid)
        return inside

    def base_env(self) -> dict[str, str]:
        if self.rootfs is None:
            return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        # What the engine gives the container: the image's ENV, and HOME from its user's entry.
        return {**self.image_env, "HOME": "/home/sleeve"}

    def init_command(self, cwd: str) -> list[str]:
        """The image's ENTRYPOINT as PID 1 of a new PID namespace (and, in the image, a mount
        namespace with its own /proc and the machine's /dev, as an engine provides them). With
        --kill-child, the namespace ends with unshare, even when a test is killed."""
        if self.rootfs is None:
            return ["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-I", str(ROOT / "docker" / "init.py")]
        script = (
            'mount --rbind /dev "$0/dev" && exec chroot --userspec="$1" "$0" env --chdir="$2" /opt/moss-files/venv/bin/python -I /opt/moss-files/docker/init.py'
        )
        return ["unshare", "--pid", "--fork", "--kill-child", f"--mount-proc={self.rootfs / 'proc'}", "sh", "-c", script, str(self.rootfs), IMAGE_USER, cwd]


class Sleeve:
    """One sleeve's init, started as the image starts it, with its output in `log`."""

    def __init__(self, place: Place, env: dict[str, str], cwd: str, log: Path) -> None:
        self.place, self.env, self.cwd, self.log = place, env, cwd, log
        with open(log, "wb") as output:
            self.process = subprocess.Popen(
                place.init_command(cwd),
                env=env,
                cwd=cwd if place.rootfs is None else None,
                stdout=output,
                stderr=subprocess.STDOUT,
            )

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def init_pid(self) -> int:
        """The host PID of the namespace's PID 1 (unshare's only child)."""

        def found() -> int:
            if self.process.poll() is not None:
                raise AssertionError(f"the sleeve exited with {self.process.returncode}: {self.log_text()}")
            try:
                children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
            except FileNotFoundError:
                return 0
            return int(children[0]) if children else 0

        return wait_for(found, timeout=30, message="the init under unshare")

    def run(self, *argv: str, env: dict[str, str] | None = None, **options: Any) -> subprocess.CompletedProcess[str]:
        """A command beside the init, as `docker exec` runs it; on this machine, a plain one."""
        command_env = {**self.env, **(env or {})}
        return subprocess.run(self.exec_argv(*argv), env=command_env, capture_output=True, text=True, timeout=60, **options)

    def exec_argv(self, *argv: str) -> list[str]:
        if self.place.rootfs is None:
            return list(argv)
        uid, gid = IMAGE_USER.split(":")
        pid = str(self.init_pid())
        return ["nsenter", "--target", pid, "--mount", "--pid", "--root", "--wd", "--setuid", uid, "--setgid", gid, *argv]

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM to PID 1, as `docker stop` sends it; the namespace's exit status."""
        os.kill(self.init_pid(), signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        """End the namespace at once: SIGKILL to its PID 1 ends every process in it (unshare's
        --kill-child does the same should the test itself die)."""
        if self.process.poll() is None:
            try:
                children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
            except FileNotFoundError:
                children = []
            for pid in children:
                os.kill(int(pid), signal.SIGKILL)
            self.process.kill()
            self.process.wait(timeout=30)


def host_place() -> Place:
    return Place("host")


def namespace_refusal() -> str | None:
    """Why this machine cannot start an init as PID 1, or None when it can."""
    if sys.platform != "linux":
        return f"PID namespaces are Linux only (this is {sys.platform})"
    if shutil.which("unshare") is None:
        return "util-linux `unshare` is not on PATH"
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"`unshare --pid --fork true` is refused here (status {probe.returncode}: {probe.stderr.strip()})"
    return None


# --------------------------------------------------------------------------- the image, built here


# The base: Debian trixie (minbase) with the Python, venv, CA certificates and archive keyring
# the Dockerfile's stages expect of a python:3.x-slim image. No image registry is reachable here,
# so it is made from Debian's packages and imported; the Dockerfile builds on it through its
# PYTHON_IMAGE build argument.
BASE_SUITE = "trixie"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "debian-archive-keyring")
# apt set up as in Debian's official images (debuerreotype's docker-clean and no-languages), once
# the base is made: no downloaded packages or package caches kept in a layer, no translations.
BASE_APT_OPTIONS = ('APT::Keep-Downloaded-Packages "false"', 'Dir::Cache::pkgcache ""', 'Dir::Cache::srcpkgcache ""', 'Acquire::Languages "none"')
BASE_TAG = "localhost/moss-files-base:test"
IMAGE_TAG = "localhost/moss-files-sleeve:test"
# The machine's CA bundle, mounted into the build's RUN steps so pip trusts what this machine
# trusts (pip reaches PyPI through it).
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


@dataclass
class BuiltImage:
    """The sleeve image built here: its configuration, size, build times and root filesystem."""

    config: dict[str, Any]
    healthcheck: dict[str, Any]
    size_bytes: int
    seconds: dict[str, float]
    rootfs: Path
    podman: list[str]

    def place(self) -> Place:
        env = dict(item.split("=", 1) for item in self.config["Env"])
        return Place("image", self.rootfs, env)


def image_tools_missing() -> str | None:
    """Why the image cannot be built and run here, or None."""
    if sys.platform != "linux":
        return f"building the image needs Linux (this is {sys.platform})"
    missing = [tool for tool in ("mmdebstrap", "podman", "unshare", "nsenter", "chroot") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (./test.sh installs podman and mmdebstrap with apt-get when run as root)"
    if os.geteuid() != 0:
        return "building and entering the image needs root (mmdebstrap, podman's storage, chroot, mount)"
    return namespace_refusal()


def timed(seconds: dict[str, float], step: str, command: list[str], log: Path, timeout: float) -> None:
    started = time.monotonic()
    with open(log, "ab") as output:
        output.write(f"$ {' '.join(command)}\n".encode())
        output.flush()
        done = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, timeout=timeout)
    seconds[step] = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise AssertionError(f"{step} failed (status {done.returncode}):\n{tail}")


def build_image(work: Path) -> BuiltImage:
    """mmdebstrap → podman import → podman build (chroot isolation) → the root filesystem,
    exported. Podman keeps its storage under `work`, so nothing is left in the machine's."""
    log = work / "build.log"
    podman = ["podman", "--root", str(work / "storage"), "--runroot", str(work / "run")]
    seconds: dict[str, float] = {}
    base_tar = work / "base.tar"
    settings = "".join(f"{option};\\n" for option in BASE_APT_OPTIONS)
    # The caches apt made while mmdebstrap installed go too: with them unnamed, its clean-up misses them.
    options = [f'--customize-hook=printf \'{settings}\' > "$1/etc/apt/apt.conf.d/docker-clean" && rm -f "$1"/var/cache/apt/*.bin']
    timed(seconds, "mmdebstrap", ["mmdebstrap", "--variant=minbase", *options, f"--include={','.join(BASE_PACKAGES)}", BASE_SUITE, str(base_tar)], log, 900)
    timed(seconds, "import", [*podman, "import", str(base_tar), BASE_TAG], log, 300)
    base_tar.unlink()
    build = [*podman, "build", "--isolation", "chroot", "--format", "docker", "--build-arg", f"PYTHON_IMAGE={BASE_TAG}"]
    # The archive reachable here is a snapshot: forky's Release file is past its Valid-Until.
    build += ["--build-arg", "APT_CHECK_VALID_UNTIL=no"]
    if CA_BUNDLE.is_file():
        build += ["--volume", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"]
    timed(seconds, "build", [*build, "-t", IMAGE_TAG, "-f", str(ROOT / "Dockerfile"), str(ROOT)], log, 1200)
    inspect = subprocess.run([*podman, "image", "inspect", IMAGE_TAG], capture_output=True, text=True, timeout=60, check=True)
    (image,) = json.loads(inspect.stdout)
    rootfs = work / "rootfs"
    rootfs.mkdir()
    started = time.monotonic()
    container = subprocess.run([*podman, "create", IMAGE_TAG], capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    exported = work / "rootfs.tar"
    subprocess.run([*podman, "export", "--output", str(exported), container], capture_output=True, timeout=300, check=True)
    subprocess.run([*podman, "rm", container], capture_output=True, timeout=60, check=True)
    subprocess.run(["tar", "-x", "-f", str(exported), "-C", str(rootfs)], capture_output=True, timeout=300, check=True)
    exported.unlink()
    seconds["export"] = round(time.monotonic() - started, 1)
    return BuiltImage(image["Config"], image["Healthcheck"], int(image["Size"]), seconds, rootfs, podman)


def remove_image_work(work: Path) -> None:
    """Podman's storage (its images, unmounted first by `rmi`) and the root filesystem."""
    podman = ["podman", "--root", str(work / "storage"), "--runroot", str(work / "run")]
    if (work / "storage").exists():
        subprocess.run([*podman, "rmi", "--all", "--force"], capture_output=True, timeout=300)
    overlay = work / "storage" / "overlay"
    if os.path.ismount(overlay):  # podman's own mount of its layer folder, should rmi have left it
        subprocess.run(["umount", str(overlay)], capture_output=True, timeout=60)
    shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- ttyd's WebSocket


class TtydSession:
    """A browser's side of ttyd's terminal, over a WebSocket (RFC 6455) with the `tty`
    subprotocol: a JSON hello with the auth token and the size, then `0`+input frames out and
    `0`+output frames back."""

    def __init__(self, port: int, credential: tuple[str, str]) -> None:
        basic = "Basic " + base64.b64encode(":".join(credential).encode()).decode()
        status, _headers, body = request(f"http://127.0.0.1:{port}/token", basic=credential)
        assert status == 200, body
        token = json.loads(body)["token"]
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        handshake = (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: tty\r\n"
            f"Authorization: {basic}\r\n\r\n"
        )
        self.sock.sendall(handshake.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            assert chunk, f"ttyd closed the connection during the handshake: {head!r}"
            head += chunk
        head, _, self.pending = head.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        assert f"sec-websocket-accept: {accept}".lower().encode() in head.lower(), head
        self.output = b""
        self.send_frame(json.dumps({"AuthToken": token, "columns": 100, "rows": 30}).encode(), opcode=0x1)

    def send_frame(self, payload: bytes, opcode: int = 0x2) -> None:
        mask = os.urandom(4)
        length = len(payload)
        header = bytes([0x80 | opcode])
        if length < 126:
            header += bytes([0x80 | length])
        elif length < 1 << 16:
            header += bytes([0x80 | 126]) + length.to_bytes(2, "big")
        else:
            header += bytes([0x80 | 127]) + length.to_bytes(8, "big")
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def type(self, text: str) -> None:
        self.send_frame(b"0" + text.encode())

    def _read(self, count: int) -> bytes:
        while len(self.pending) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("ttyd closed the WebSocket")
            self.pending += chunk
        data, self.pending = self.pending[:count], self.pending[count:]
        return data

    def _frame(self) -> tuple[int, bytes]:
        first, second = self._read(2)
        length = second & 0x7F
        if length == 126:
            length = int.from_bytes(self._read(2), "big")
        elif length == 127:
            length = int.from_bytes(self._read(8), "big")
        return first & 0x0F, self._read(length)

    def read_until(self, predicate: Callable[[str], bool], timeout: float = 15.0) -> str:
        """Terminal output gathered until `predicate` holds for it (a deadline, not a sleep)."""
        deadline = time.monotonic() + timeout
        while not predicate(self.output.decode(errors="replace")):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout}s; the terminal showed: {self.output.decode(errors='replace')[-2000:]!r}")
            self.sock.settimeout(remaining)
            opcode, payload = self._frame()
            if opcode == 0x8:
                raise ConnectionError(f"ttyd closed the WebSocket: {payload!r}")
            if opcode in (0x1, 0x2) and payload[:1] == b"0":
                self.output += payload[1:]
        return self.output.decode(errors="replace")

    def close(self) -> None:
        self.sock.close()
