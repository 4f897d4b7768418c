"""Mailboxes: cortical-stack's INBOX.md/OUTBOX.md into needlecast, and needlecast's layout v1 <-> v2."""

from __future__ import annotations

from pathlib import Path

import pytest
from migrate_support import commit_all, context, copy_fixture, make_workspace, snapshot

import needlecast
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidDocument, RepoError
from moss_files.migrate import service


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "project")


def _sleeve_ctx(root: Path, name: str) -> Context:
    return Context(root, sleeve=name)


def _inbox(root: Path) -> dict[str, dict]:
    """key -> the message, with `unread`."""
    rows = needlecast.list_inbox(_sleeve_ctx(root, root.name))["messages"]
    return {row["key"]: {**row["message"], "unread": not row["read"]} for row in rows}


# --------------------------------------------------------------------------- cortical stack


def test_inbox_and_outbox_messages_move_into_needlecast_keeping_ids_and_read_state(root: Path) -> None:
    copy_fixture("cortical", root)
    result = service.migrate_cortical(context(root))
    assert (result["created"], result["changed"], result["skipped"]) == (0, 7, 0)
    assert [check["ok"] for check in result["checks"]] == [True, True, True]
    inbox = _inbox(root)
    assert len(inbox) == 4
    assert inbox["msg-2026-01-19T12-00-00"]["thread"] == "auth" and not inbox["msg-2026-01-19T12-00-00"]["unread"]
    assert "The session store comes next." in inbox["msg-2026-01-19T12-00-00"]["body"]  # a second paragraph survives
    derived = [key for key in inbox if key.startswith("nc-")]
    assert len(derived) == 2 and all(inbox[key]["unread"] for key in derived)  # id-less: the router's derived ids
    assert inbox["msg-a7f3"]["from"] == "envoy"  # lowercase keys beside capitalised ones
    outbox = needlecast.list_outbox(_sleeve_ctx(root, "project"))
    assert sorted(row["message"]["to"][0] for row in outbox["messages"]) == ["agent-frontend", "manager"]
    assert (root / ".cstack/INBOX.md").is_file()  # without --move the source stays


def test_cortical_twice_changes_nothing_and_a_dry_run_writes_nothing(root: Path) -> None:
    copy_fixture("cortical", root)
    commit_all(root)
    before = snapshot(root)
    dry = service.migrate_cortical(context(root), dry_run=True)
    assert snapshot(root) == before
    assert dry["items"] == service.migrate_cortical(context(root))["items"]
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_cortical(context(root))
    assert (again["changed"], again["skipped"], again["report"]) == (0, 6, None)
    assert snapshot(root) == before


def test_move_removes_the_old_files_only_when_git_can_bring_them_back(root: Path) -> None:
    copy_fixture("cortical", root)
    before = snapshot(root)
    with pytest.raises(RepoError) as caught:
        service.migrate_cortical(context(root), move=True)
    assert caught.value.code == "MOVE_REFUSED" and caught.value.details["files"] == {".cstack/INBOX.md": "untracked", ".cstack/OUTBOX.md": "untracked"}
    assert snapshot(root) == before
    commit_all(root)
    (root / ".cstack/OUTBOX.md").write_text((root / ".cstack/OUTBOX.md").read_text() + "\n")
    with pytest.raises(RepoError) as caught:
        service.migrate_cortical(context(root), move=True, dry_run=True)
    assert caught.value.details["files"] == {".cstack/OUTBOX.md": "changed"}
    commit_all(root)
    result = service.migrate_cortical(context(root), move=True)
    assert result["files"]["removed"] == [".cstack/INBOX.md", ".cstack/OUTBOX.md"]
    assert not (root / ".cstack/INBOX.md").exists() and len(_inbox(root)) == 4
    assert (root / ".cstack/PLAN.md").is_file()


def test_a_block_that_is_not_a_message_stops_the_source_at_its_line(root: Path) -> None:
    copy_fixture("cortical", root)
    inbox = root / ".cstack/INBOX.md"
    inbox.write_text(inbox.read_text() + "\n---\nFrom: [unclosed\nType: task\n---\nbody\n")
    commit_all(root)
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_cortical(context(root))
    assert (caught.value.code, caught.value.path, caught.value.line) == ("SOURCE_INVALID", ".cstack/INBOX.md", 39)
    assert snapshot(root) == before


def test_a_memory_file_cstack_cannot_read_is_reported_with_its_line(root: Path) -> None:
    copy_fixture("cortical", root)
    (root / ".cstack/PLAN.md").write_text("# Plan\n\n<<<<<<< ours\n- [ ] P1: a\n=======\n- [ ] P1: b\n>>>>>>> theirs\n")
    result = service.migrate_cortical(context(root), dry_run=True)
    plan_check = next(check for check in result["checks"] if check["path"] == ".cstack/PLAN.md")
    assert (plan_check["ok"], plan_check["code"], plan_check["line"]) == (False, "MERGE_CONFLICT", 3)


def test_messages_go_to_files_in_a_v2_mailbox(root: Path) -> None:
    copy_fixture("cortical", root)
    needlecast.init_workspace(Context(root, sleeve="project"), layout="v2")
    result = service.migrate_cortical(context(root))
    assert result["created"] == 6 and result["changed"] == 1  # six message files, one read mark
    assert len(list((root / ".needlecast/inbox").glob("*.md"))) == 4
    assert len(list((root / ".needlecast/outbox").glob("*.md"))) == 2


# --------------------------------------------------------------------------- needlecast layouts


@pytest.fixture
def team(tmp_path: Path) -> Path:
    """An envoy root in git with sleeves alice and bob (v1), messages routed, one read, one
    hand-written block without an id, and one message still waiting in alice's outbox."""
    top = make_workspace(tmp_path / "team")
    for name in ("alice", "bob"):
        (top / name).mkdir()
        needlecast.init_workspace(Context(top / name, sleeve=name))
    alice, bob = Context(top / "alice", sleeve="alice"), Context(top / "bob", sleeve="bob")
    first = needlecast.send(alice, body="Which endpoint does login use?", to=["bob"], type_="question")["message"]["id"]
    with open(top / "alice/.needlecast/outbox.md", "a", encoding="utf-8") as handle:
        handle.write("---\nfrom: alice\nto: bob\ntype: task\n---\nA block written by hand.\n\n---\nwith a rule inside the body\n")
    needlecast.route_once(Context(top))
    needlecast.read_message(bob, key=first)
    needlecast.send(alice, body="Still waiting to be routed", to=["bob"])
    commit_all(top)
    return top


def _state(sleeve: Path) -> dict[str, object]:
    """What a sleeve's mailbox holds, whatever its layout: messages by box, read marks."""
    known = needlecast.known_messages(sleeve)
    rows = needlecast.list_inbox(Context(sleeve, sleeve=sleeve.name))["messages"]
    inbox = {(row["message"]["from"], row["key"], row["message"]["body"], row["read"]) for row in rows}
    return {"inbox": inbox, "outbox": known["outbox"], "archive": known["archive"], "read": known["read"]}


def test_switching_bob_to_v2_and_back_loses_nothing(team: Path) -> None:
    bob = team / "bob"
    before = _state(bob)
    assert len(before["inbox"]) == 2  # type: ignore[arg-type]
    to_v2 = service.migrate_needlecast(context(bob), layout="v2")
    assert to_v2["created"] == 2 and (bob / ".needlecast/inbox").is_dir()
    assert (bob / ".needlecast/inbox.md").read_text().count("\n---\n") == 0  # only its preamble stays
    assert _state(bob) == before
    commit_all(team)
    back = service.migrate_needlecast(context(bob), layout="v1")
    assert back["changed"] == 2 and len(back["files"]["removed"]) == 2
    assert not (bob / ".needlecast/inbox").exists()
    assert _state(bob) == before


def test_the_router_keeps_working_across_a_switch_and_delivers_nothing_twice(team: Path) -> None:
    alice, bob = team / "alice", team / "bob"
    service.migrate_needlecast(context(alice), layout="v2")
    service.migrate_needlecast(context(bob), layout="v2")
    report = needlecast.route_once(Context(team))
    assert report["delivered"] == 1  # only the message that was waiting
    assert len(_state(bob)["inbox"]) == 3  # type: ignore[arg-type]
    assert needlecast.route_once(Context(team))["delivered"] == 0
    needlecast.send(Context(alice, sleeve="alice"), body="After the switch", to=["bob"])
    assert needlecast.route_once(Context(team))["delivered"] == 1
    assert len(list((bob / ".needlecast/inbox").glob("*.md"))) == 4


def test_a_switch_refuses_files_git_could_not_bring_back(team: Path) -> None:
    bob = team / "bob"
    needlecast.send(Context(team / "alice", sleeve="alice"), body="Unsaved in git", to=["bob"])
    needlecast.route_once(Context(team))
    before = snapshot(team)
    with pytest.raises(RepoError) as caught:
        service.migrate_needlecast(context(bob), layout="v2")
    assert caught.value.code == "MOVE_REFUSED" and caught.value.details["files"] == {".needlecast/inbox.md": "changed"}
    with pytest.raises(RepoError):
        service.migrate_needlecast(context(bob), layout="v2", dry_run=True)
    assert snapshot(team) == before


def test_a_layout_dry_run_writes_nothing(team: Path) -> None:
    bob = team / "bob"
    before = snapshot(team)
    dry = service.migrate_needlecast(context(bob), layout="v2", dry_run=True)
    assert snapshot(team) == before
    assert [item["old_id"] for item in dry["items"]] == [item["old_id"] for item in service.migrate_needlecast(context(bob), layout="v2")["items"]]
