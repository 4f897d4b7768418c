"""Git-sync storm: two clones of one bare remote share a workspace's mailbox through `--git-sync`
while senders keep writing in both, a router routes in the first and a peer keeps delivering
into the second; after 50 sync rounds in each clone, and once both have settled, every message
is in each clone's inbox (and archive) exactly once.

The writers: in each clone, a process that sends the way `needlecast send` does (under the
outbox lock) and one that appends the way an agent by hand does (no lock: v1 one O_APPEND write
of a whole block, v2 a temporary renamed into `outbox/`); a `needlecast route` process routing
the first clone's outbox into its inbox; POST /inbox on a sidecar of the second clone, as a peer
host delivers. The sync rounds of both clones (GitSync, the sidecar's `--git-sync` loop's
round) take turns in this process. Nothing here depends on timing to pass: the counts are read
once both clones are at the same commit with nothing left to route (a deadline only bounds
that wait). Before the fix of issue 24, layout v1 lost about a third of the messages here.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.request
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli
from helpers import wait_for

from moss_files.foundation import fs
from needlecast import mailbox
from needlecast.gitsync import GitSync, GitSyncSettings
from needlecast.mailbox import Mailbox
from needlecast.sidecar import read_runtime

pytestmark = pytest.mark.slow  # two clones, a router and a sidecar, 50 sync rounds each

ROUNDS = 50

PER_ROUND = 2  # messages each writer writes during one round of each clone, at random moments

# Writes messages to a workspace's outbox until a stop file appears, PER_ROUND a round (the
# round file holds the number of rounds done), at random moments so that writes land while
# rounds merge; prints each message's token once it is written. Every message goes to `envoy`:
# the first clone's router delivers the workspace's outbox into its own inbox.
SENDER = textwrap.dedent(
    """
    import os, random, sys, time
    from datetime import UTC, datetime
    from pathlib import Path
    root, label, layout, locked, stop, rounds, per_round = sys.argv[1:8]
    rng = random.Random(label)
    box = os.path.join(root, ".needlecast")
    if locked == "locked":
        from needlecast import mailbox, message as msg
    number, written = 0, {}

    def current_round():
        try:
            return int(Path(rounds).read_text())
        except (FileNotFoundError, ValueError):
            return 0

    while not os.path.exists(stop):
        now = current_round()
        if written.get(now, 0) >= int(per_round):
            time.sleep(0.02)  # this round's share is written: wait for the next round
            continue
        written[now] = written.get(now, 0) + 1
        time.sleep(rng.uniform(0, 0.3))
        token = f"tok-{label}-{number}"
        if locked == "locked":  # what `needlecast send` does, without a process start-up per message
            message = msg.Message(id=f"{label}-{number}", sender="envoy", to=("envoy",), type="task", body=token + "\\n")
            mailbox.append_outbox(mailbox.Mailbox(Path(root)), message, datetime.now(UTC))
        else:
            header = f"id: {label}-{number}\\n" if number % 3 else ""  # a third without an id
            block = f"---\\n{header}from: envoy\\nto: envoy\\ntype: task\\n---\\n{token}\\n\\n"
            if layout == "v1":
                fd = os.open(os.path.join(box, "outbox.md"), os.O_WRONLY | os.O_APPEND)
                os.write(fd, block.encode())
                os.close(fd)
            else:
                temp = os.path.join(box, "outbox", f".{label}-{number}.tmp-{os.getpid()}-0")
                with open(temp, "w") as handle:
                    handle.write(block)
                os.rename(temp, os.path.join(box, "outbox", f"{label}-{number:06d}.md"))
        print(token, flush=True)
        number += 1
    """
)


def git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), *args], check=True, capture_output=True, text=True).stdout


def tokens(entries: list[Any]) -> Counter[str]:
    found: Counter[str] = Counter()
    for entry in entries:
        assert entry.problem is None, entry.problem
        found[entry.message.body.strip()] += 1
    return found


class Sidecar:
    def __init__(self, clone: Path, *args: str) -> None:
        self.clone = clone
        self.log = clone.parent / f"{clone.name}-sidecar.log"
        with open(self.log, "ab") as stderr:
            self.process = subprocess.Popen(
                [str(BIN / "needlecast"), "sidecar", "--root", str(clone), "--port", "0", "--no-index-watch", *args], stdout=subprocess.DEVNULL, stderr=stderr
            )
        wait_for(self._ready, timeout=30, message=f"sidecar of {clone.name}")
        self.url = (read_runtime(clone) or {})["url"]

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"sidecar exited with {self.process.returncode}: {self.log.read_text()}")
        return (read_runtime(self.clone) or {}).get("pid") == self.process.pid

    def request(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"} if data else {})
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    def stop(self) -> None:
        self.process.terminate()
        assert self.process.wait(timeout=30) == 0, self.log.read_text()


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_git_sync_storm_loses_and_duplicates_nothing(tmp_path: Path, layout: str) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    first, second = tmp_path / "first", tmp_path / "second"
    subprocess.run(["git", "clone", "-q", str(remote), str(first)], check=True, capture_output=True)
    assert run_cli("needlecast", "init", "--layout", layout, "--root", str(first), "--json").returncode == 0
    git(first, "add", "-A")
    git(first, "commit", "-q", "-m", "start")
    git(first, "push", "-q", "origin", "HEAD:main")
    subprocess.run(["git", "clone", "-q", str(remote), str(second)], check=True, capture_output=True)
    # The rounds of both clones take turns in this process: each round merges what the other
    # pushed, and neither starves the other's push, so the test needs no timing to progress.
    syncs = [GitSync(clone, GitSyncSettings(), name=clone.name, clock=lambda: datetime.now(UTC), environ=os.environ) for clone in (first, second)]
    for sync in syncs:
        sync.setup()

    failures: Counter[str] = Counter()
    done = tmp_path / "rounds"  # how many rounds each clone has done, for the writers' pace
    round_done = threading.Condition()

    def rounds() -> None:
        for sync in syncs:
            sync.sync()
            assert sync.state in ("ok", "error"), sync.status()  # error: retried next round
            if sync.state == "error" and sync.error is not None:
                failures[sync.error["message"]] += 1
        fs.write_atomic(done, str(syncs[0].rounds).encode())
        with round_done:
            round_done.notify_all()

    stop = tmp_path / "stop"
    with open(tmp_path / "router.log", "ab") as log:
        router = subprocess.Popen([str(BIN / "needlecast"), "route", "--root", str(first)], stdout=subprocess.DEVNULL, stderr=log)
    peer = Sidecar(second, "--no-route")  # a peer host delivers into the second clone's inbox
    senders: list[tuple[subprocess.Popen[str], list[str]]] = []
    readers: list[threading.Thread] = []
    posted: list[str] = []

    def post_to_second() -> None:
        number = 0
        while not stop.exists():
            start = syncs[0].rounds
            for _message in range(PER_ROUND):
                with round_done:
                    round_done.wait(random.uniform(0, 0.3))  # a random moment of the round
                while True:
                    token = f"tok-post-{number}"
                    try:
                        answer = peer.request("/inbox", {"id": f"post-{number}", "from": "peer", "to": ["envoy"], "type": "task", "body": token + "\n"})
                        break
                    except urllib.error.HTTPError as err:
                        failures[f"POST /inbox: {err.code} {json.loads(err.read())['error']['code']}"] += 1  # a peer sends it again
                assert answer["results"][0]["status"] in ("delivered", "present"), answer
                posted.append(token)
                number += 1
            with round_done:
                round_done.wait_for(lambda start=start: syncs[0].rounds > start or stop.exists())

    poster = threading.Thread(target=post_to_second)
    try:
        for clone in (first, second):
            for mode in ("locked", "raw"):
                label = f"{clone.name}-{mode}"
                process = subprocess.Popen(
                    [sys.executable, "-c", SENDER, str(clone), label, layout, mode, str(stop), str(done), str(PER_ROUND)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                lines: list[str] = []
                reader = threading.Thread(target=lambda p=process, out=lines: out.extend(line.strip() for line in p.stdout or ()))
                reader.start()
                senders.append((process, lines))
                readers.append(reader)
        poster.start()
        for _round in range(ROUNDS):
            rounds()
        stop.touch()
        with round_done:
            round_done.notify_all()
        poster.join()
        for (process, _lines), reader in zip(senders, readers, strict=True):
            assert process.wait(timeout=30) == 0, process.stderr.read() if process.stderr else ""
            reader.join()

        def settled() -> bool:
            rounds()
            heads = {git(clone, "rev-parse", "HEAD") for clone in (first, second)} | {git(first, "rev-parse", "origin/main")}
            quiet = all(not git(clone, "status", "--porcelain", "--", ".needlecast") for clone in (first, second))
            return len(heads) == 1 and quiet and all(not mailbox.read_outbox(Mailbox(clone), "envoy").entries for clone in (first, second))

        try:
            wait_for(settled, timeout=120, interval=0, message="both clones settled")
        except AssertionError as err:
            raise AssertionError(f"{err}; rounds that failed and were retried: {dict(failures)}") from None
    finally:
        stop.touch()
        with round_done:
            round_done.notify_all()
        if poster.is_alive():
            poster.join()
        for process, _lines in senders:
            if process.poll() is None:
                process.kill()
                process.wait()
        for reader in readers:
            reader.join()
        for process, _lines in senders:
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
        router.terminate()
        router.wait(timeout=30)
        peer.stop()

    sent = [token for _process, lines in senders for token in lines]
    expected = set(sent) | set(posted)
    assert len(expected) == len(sent) + len(posted)  # every token is written once
    report = {}
    for clone in (first, second):
        box = Mailbox(clone)
        inbox = tokens(mailbox.read_inbox(box))
        archive = tokens(mailbox.read_archive(box, "envoy"))
        report[clone.name] = {
            "lost": sorted(expected - set(inbox)),
            "duplicated": sorted(token for token, count in inbox.items() if count > 1),
            "unexpected": sorted(set(inbox) - expected),
            "not archived": sorted(set(sent) - set(archive)),
            "archived twice": sorted(token for token, count in archive.items() if count > 1),
            "dead letters": [letter.meta.get("code") for letter in mailbox.read_dead_letters(box)],
        }
    counts = {name: {key: len(value) for key, value in found.items()} for name, found in report.items()}
    rounds_done = [sync.rounds for sync in syncs]
    print(f"git-sync storm ({layout}): {len(sent)} sent, {len(posted)} posted, rounds {rounds_done}: {counts}; retried: {dict(failures)}")
    assert all(not any(found.values()) for found in report.values()), report
