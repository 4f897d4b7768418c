"""Issue 27 item 1: a router knows whether it stands at an envoy root or in one of its sleeves,
and a message dead-lettered because of where a router ran can be sent again.

Real `needlecast` processes in real folders: an envoy root with its sleeves (found as child
folders, or named by the registry), lone workspaces beside each other, a sleeve routed alone.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

from needlecast import mailbox
from needlecast.mailbox import Mailbox


def nc(*args: str, cwd: Path, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("needlecast", *args, cwd=cwd, input=input)


def ok_json(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def error_of(result: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(result.stderr.strip().splitlines()[-1])["error"]


def sleeve(folder: Path, *, git: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if git:
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
    assert nc("init", cwd=folder).returncode == 0
    return folder


def inbox_bodies(folder: Path) -> list[str]:
    return [entry.message.body.strip() for entry in mailbox.read_inbox(Mailbox(folder)) if entry.message is not None and entry.message.type != "bounce"]


@pytest.mark.parametrize("own_mailbox", [True, False], ids=["envoy-with-its-own-mailbox", "envoy-of-child-folders-only"])
def test_routing_in_a_sleeve_is_refused_and_its_message_waits_for_the_envoy(tmp_path: Path, own_mailbox: bool) -> None:
    """The issue's session: in a sleeve's folder `send --to bob && route --once` dead-lettered
    the message (exit 0), and the envoy's router never delivered it."""
    envoy = tmp_path / "envoy"
    envoy.mkdir()
    subprocess.run(["git", "init", "-q", str(envoy)], check=True)
    if own_mailbox:
        assert nc("init", cwd=envoy).returncode == 0
    alice, bob = sleeve(envoy / "alice"), sleeve(envoy / "bob")
    sent = ok_json(nc("send", "--to", "bob", "--json", "hi", cwd=alice))["message"]["id"]
    for command in (("route", "--once"), ("sleeves",)):
        refused = nc(*command, "--json", cwd=alice)
        assert refused.returncode == 2, (command, refused.stdout)
        error = error_of(refused)
        assert error["code"] == "NOT_ENVOY_ROOT" and error["details"] == {"envoy": str(envoy.resolve()), "sleeve": "alice"}
        assert f"--root {envoy.resolve()}" in error["hint"]
    # Nothing was routed, dead-lettered or bounced: the message waits in the outbox.
    assert [row["key"] for row in ok_json(nc("outbox", "--json", cwd=alice))["messages"]] == [sent]
    assert ok_json(nc("dead-letters", "--json", cwd=alice))["dead_letters"] == []
    assert mailbox.read_inbox(Mailbox(alice)) == []
    # The envoy's router delivers it.
    assert ok_json(nc("route", "--once", "--json", cwd=envoy))["delivered"] == 1
    assert inbox_bodies(bob) == ["hi"]
    listed = ok_json(nc("sleeves", "--json", cwd=envoy))["sleeves"]
    assert {row["name"]: row["path"] for row in listed} == {"envoy": str(envoy.resolve()), "alice": str(alice.resolve()), "bob": str(bob.resolve())}


def test_a_sleeve_the_registry_names_deeper_in_the_tree_is_known_by_its_registered_name(tmp_path: Path) -> None:
    envoy = tmp_path / "envoy"
    sleeve(envoy)
    carol = sleeve(envoy / "repos" / "carol-repo")
    (envoy / ".needlecast" / "sleeves.toml").write_text('carol = "repos/carol-repo"\n')
    refused = nc("route", "--once", "--json", cwd=carol)
    assert refused.returncode == 2 and error_of(refused)["details"] == {"envoy": str(envoy.resolve()), "sleeve": "carol"}
    # An explicit --root naming the sleeve is refused the same way: it is no envoy root.
    explicit = nc("route", "--once", "--root", str(carol), "--json", cwd=tmp_path)
    assert explicit.returncode == 2 and error_of(explicit)["code"] == "NOT_ENVOY_ROOT"


def test_lone_projects_side_by_side_still_route_their_own_outbox(tmp_path: Path) -> None:
    """Two projects, each its own git repository, in one folder of projects: neither is the
    other's sleeve, and each routes its own messages (to itself, `envoy`) as before."""
    projects = tmp_path / "projects"
    one, other = sleeve(projects / "one", git=True), sleeve(projects / "other", git=True)
    assert nc("send", "--to", "envoy", "note to self", cwd=one).returncode == 0
    report = ok_json(nc("route", "--once", "--json", cwd=one))
    assert report["delivered"] == 1 and report["dead_letters"] == 0
    assert inbox_bodies(one) == ["note to self"] and inbox_bodies(other) == []
    assert [row["name"] for row in ok_json(nc("sleeves", "--json", cwd=one))["sleeves"]] == ["envoy"]


def test_a_message_dead_lettered_where_its_router_stood_is_sent_again_by_retry(tmp_path: Path) -> None:
    """A sleeve routed on its own (in a container, say, where no envoy is in sight) dead-letters
    a message for a sleeve it cannot see. `needlecast dead-letters retry ID` puts it back in the
    outbox, for the recipients it missed, and the envoy's router delivers it."""
    envoy = tmp_path / "envoy"
    alice = sleeve(envoy / "alice", git=True)  # alone in the folder: routed as a lone workspace
    first = ok_json(nc("send", "--to", "bob", "--type", "question", "--thread", "auth", "--json", cwd=alice, input="Which endpoint?\n\nLogin."))["message"]
    assert ok_json(nc("route", "--once", "--json", cwd=alice))["dead_letters"] == 1
    (letter,) = ok_json(nc("dead-letters", "--json", cwd=alice))["dead_letters"]
    assert (letter["id"], letter["code"], letter["recipients"]) == (first["id"], "UNKNOWN_RECIPIENT", ["bob"])
    # The envoy is set up around it: its own mailbox, and bob.
    assert nc("init", cwd=envoy).returncode == 0
    bob = sleeve(envoy / "bob")
    retried = ok_json(nc("dead-letters", "retry", first["id"], "--json", cwd=alice))
    again = retried["message"]
    assert again["id"] != first["id"] and again["extra"]["retry_of"] == first["id"]
    assert (again["from"], again["to"], again["type"], again["thread"]) == ("alice", ["bob"], "question", "auth")
    assert again["body"].rstrip("\n") == first["body"].rstrip("\n") == "Which endpoint?\n\nLogin."
    (kept,) = ok_json(nc("dead-letters", "--json", cwd=alice))["dead_letters"]
    assert kept["retried_as"] == again["id"] and kept["bytes"] == letter["bytes"]  # the dead letter stays, marked
    assert ok_json(nc("route", "--once", "--json", cwd=envoy))["delivered"] == 1
    (received,) = [e.message for e in mailbox.read_inbox(Mailbox(bob)) if e.message is not None]
    assert received.id == again["id"] and received.body == again["body"] and received.extra["retry_of"] == first["id"]
    # Once only: a second retry of the same dead letter is refused, and nothing is queued.
    twice = nc("dead-letters", "retry", first["id"], "--json", cwd=alice)
    assert twice.returncode == 5 and error_of(twice)["code"] == "ALREADY_EXISTS"
    assert ok_json(nc("outbox", "--json", cwd=alice))["messages"] == []


def test_only_a_dead_letter_for_an_unknown_recipient_can_be_retried(tmp_path: Path) -> None:
    alice = sleeve(tmp_path / "alice", git=True)
    outbox = Mailbox(alice).outbox_file
    outbox.write_text(outbox.read_text() + "\n---\nid: broken-1\nto: [bob\n---\nunreadable header\n")
    assert ok_json(nc("route", "--once", "--json", cwd=alice))["dead_letters"] == 1
    (letter,) = ok_json(nc("dead-letters", "--json", cwd=alice))["dead_letters"]
    assert letter["code"] == "FRONTMATTER_SYNTAX"  # its header cannot be read
    refused = nc("dead-letters", "retry", letter["id"], "--json", cwd=alice)
    assert refused.returncode == 2 and error_of(refused)["code"] == "INVALID_REQUEST" and refused.stdout == ""
    missing = nc("dead-letters", "retry", "msg-nope", "--json", cwd=alice)
    assert missing.returncode == 3 and error_of(missing)["code"] == "NOT_FOUND"
    assert ok_json(nc("outbox", "--json", cwd=alice))["messages"] == []
