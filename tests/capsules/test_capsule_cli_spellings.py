"""Moss's own command-line spellings (`--name=auth`, `-n auth`, an id as the argument) and capsule
files saved with a UTF-8 BOM, through `moss` as a real process."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, run_cli

from moss_files.foundation import document

# Moss's examples/capsule.md, in our words, with the same six sections.
CAPSULE = "## Objective\nShip login.\n\n## Current status\nHalf.\n\n## Decisions\n- JWT\n\n## Next actions\n(none)\n\n## Key locations\n- a.py\n\n## Open questions\n- none yet\n"
BOM = "\ufeff"


@pytest.fixture
def ws(repo: Path) -> Path:
    (repo / ".moss").mkdir()
    return repo


def moss(ws: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("moss", *args, cwd=ws, input=input)


def moss_bytes(ws: Path, *args: str, data: bytes) -> subprocess.CompletedProcess[bytes]:
    """`moss` with `data` on stdin as bytes: `moss store < capsule.md`, the file as saved."""
    return subprocess.run([str(BIN / "moss"), *args], cwd=ws, input=data, capture_output=True, env=dict(os.environ), timeout=120)


def test_moss_name_option_addresses_a_capsule_in_every_command(ws: Path) -> None:
    """`moss fetch --name=auth` (Moss's spelling) was refused: no such option."""
    stored = moss(ws, "store", "--name=auth", "--json", input=CAPSULE)
    assert stored.returncode == 0, stored.stderr
    capsule_id = json.loads(stored.stdout)["id"]
    fetched = moss(ws, "fetch", "--name=auth")
    assert fetched.returncode == 0, fetched.stderr
    assert fetched.stdout == CAPSULE
    assert moss(ws, "fetch", "-n", "auth", "--no-text", "--json").returncode == 0
    updated = moss(ws, "update", "--name=auth", "--title", "Login", "--json")
    assert updated.returncode == 0 and json.loads(updated.stdout)["id"] == capsule_id, updated.stderr
    appended = moss(ws, "append", "--name=auth", "--section", "Decisions", "--content", "- cookies", "--json")
    assert appended.returncode == 0 and json.loads(appended.stdout)["section_hit"] == "## Decisions", appended.stderr
    assert json.loads(moss(ws, "fetch", "--name", "auth", "--json").stdout)["title"] == "Login"
    # The argument and --name together must agree.
    assert moss(ws, "fetch", "auth", "--name=auth").returncode == 0
    clash = moss(ws, "fetch", "auth", "--name=other", "--json")
    assert clash.returncode == 2
    error = json.loads(clash.stderr)["error"]
    assert error["code"] == "INVALID_REQUEST" and error["details"]["spellings"] == ["name", "--name"]
    deleted = moss(ws, "delete", "--name=auth", "--json")
    assert deleted.returncode == 0 and json.loads(deleted.stdout) == {"deleted": True, "id": capsule_id}
    assert moss(ws, "fetch", "--name=auth").returncode == 3


def test_an_id_as_the_argument_as_moss_takes_it(ws: Path) -> None:
    """Moss's `moss fetch 01J…` takes an id; here the argument is a name, tried as an id when no
    capsule has that name."""
    capsule_id = json.loads(moss(ws, "store", "--name", "auth", "--json", input=CAPSULE).stdout)["id"]
    assert moss(ws, "fetch", capsule_id).stdout == CAPSULE
    assert moss(ws, "update", capsule_id, "--title", "By id").returncode == 0
    assert json.loads(moss(ws, "fetch", "auth", "--json").stdout)["title"] == "By id"
    missing = moss(ws, "fetch", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--json")
    assert missing.returncode == 3 and json.loads(missing.stderr)["error"]["code"] == "NOT_FOUND"


def test_a_capsule_file_saved_with_a_bom_is_stored_without_it(ws: Path) -> None:
    """`moss store < capsule.md` of a file Notepad saved (a UTF-8 BOM first) was CAPSULE_TOO_THIN,
    missing Objective: the BOM hid the first header."""
    with_bom = (BOM + CAPSULE).encode("utf-8")
    stored = moss_bytes(ws, "store", "--name=auth", "--json", data=with_bom)
    assert stored.returncode == 0, stored.stderr
    assert moss(ws, "fetch", "auth").stdout == CAPSULE
    replaced = moss_bytes(ws, "update", "auth", "--text", "-", data=with_bom.replace(b"Half.", b"Done."))
    assert replaced.returncode == 0, replaced.stderr
    assert moss(ws, "fetch", "auth").stdout == CAPSULE.replace("Half.", "Done.")
    # Given as a value (an agent's capsule_text, `--text "$(cat capsule.md)"`) the BOM goes too.
    assert moss(ws, "store", "--name", "other", "--text", BOM + CAPSULE).returncode == 0
    assert moss(ws, "fetch", "other").stdout == CAPSULE


def test_a_capsule_file_with_a_bom_keeps_it_through_tool_edits(ws: Path) -> None:
    """A BOM is stripped where a file is read and put back where the tool rewrites the file."""
    folder = ws / ".moss" / "capsules" / "default"
    folder.mkdir(parents=True)
    path = folder / "handmade.md"
    path.write_bytes((BOM + "---\nname: handmade\n---\n" + CAPSULE).encode("utf-8"))
    assert moss(ws, "fetch", "handmade").stdout == CAPSULE
    assert moss(ws, "update", "--name=handmade", "--title", "Hand made").returncode == 0
    assert moss(ws, "append", "handmade", "-s", "Decisions", "-c", "- more").returncode == 0
    data = path.read_bytes()
    assert data.startswith(BOM.encode("utf-8")) and data.count(BOM.encode("utf-8")) == 1
    text, had_bom = document.decode(data)
    assert had_bom and document.parse(text).meta["title"] == "Hand made" and "- more" in document.parse(text).body


def test_text_piped_to_other_commands_loses_its_bom(ws: Path) -> None:
    """`moss insight add -` of a file saved with a BOM: the insight starts with its first word."""
    added = moss_bytes(ws, "insight", "add", "-", "--json", data=(BOM + "Caches lie when triggers are bypassed.\n").encode("utf-8"))
    assert added.returncode == 0, added.stderr
    insight = json.loads(moss(ws, "insight", "show", json.loads(added.stdout)["id"], "--json").stdout)
    assert insight["content"].startswith("Caches lie")
