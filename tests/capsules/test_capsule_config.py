"""Settings: user-level and workspace config files, merged as Moss merges them."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import run_cli

from moss_files.foundation import config
from moss_files.foundation.errors import MossError


def test_defaults_when_no_file(tmp_path: Path) -> None:
    loaded = config.load_config(tmp_path, home=tmp_path / "home")
    assert loaded.capsule_max_chars == 12000 and loaded.allowed_paths == () and not loaded.allow_unsafe_paths
    assert loaded.sources == ()


def test_workspace_wins_for_scalars_booleans_or_arrays_union(tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "project"
    (home / ".moss").mkdir(parents=True)
    (root / ".moss").mkdir(parents=True)
    (home / ".moss/config.toml").write_text('capsule_max_chars = 5000\nallow_unsafe_paths = true\nallowed_paths = ["backups", "/shared"]\nfuture_key = 1\n')
    (root / ".moss/config.toml").write_text('capsule_max_chars = 8000\nallow_unsafe_paths = false\nallowed_paths = ["/shared", "exports"]\n')
    loaded = config.load_config(root, home=home)
    assert loaded.capsule_max_chars == 8000
    assert loaded.allow_unsafe_paths is True
    assert loaded.allowed_paths == (home / "backups", Path("/shared"), root / "exports")
    assert loaded.data["future_key"] == 1
    assert loaded.sources == (home / ".moss/config.toml", root / ".moss/config.toml")


def test_zero_means_default_like_moss(tmp_path: Path) -> None:
    (tmp_path / ".moss").mkdir()
    (tmp_path / ".moss/config.toml").write_text("capsule_max_chars = 0\n")
    assert config.load_config(tmp_path, home=tmp_path / "h").capsule_max_chars == 12000


def test_merge_is_recursive_for_tables() -> None:
    assert config.merge({"t": {"a": 1, "b": [1]}}, {"t": {"b": [2], "c": 3}}) == {"t": {"a": 1, "b": [1, 2], "c": 3}}


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ("capsule_max_chars = \n", "INVALID_DOCUMENT", 1),
        ("a = 1\ncapsule_max_chars = 'big'\n", "SCHEMA_ERROR", None),
        ("capsule_max_chars = -1\n", "SCHEMA_ERROR", None),
        ("allowed_paths = 'x'\n", "SCHEMA_ERROR", None),
        ("allow_unsafe_paths = 1\n", "SCHEMA_ERROR", None),
    ],
)
def test_bad_config_is_reported_with_file(tmp_path: Path, text: str, code: str, line: int | None) -> None:
    (tmp_path / ".moss").mkdir()
    (tmp_path / ".moss/config.toml").write_text(text)
    with pytest.raises(MossError) as caught:
        config.load_config(tmp_path, home=tmp_path / "h")
    assert caught.value.code == code and caught.value.line == line
    assert caught.value.path and "config.toml" in caught.value.path


def test_the_scaffold_template_is_a_valid_config() -> None:
    template = Path(__file__).parent.parent.parent / "templates/moss/config.toml"
    assert config.parse_config_text(template.read_text(), template) == {}


def test_moss_own_config_json_in_the_home_folder_is_read_under_ours(tmp_path: Path) -> None:
    """Issue 27 item 14: Moss keeps its settings in ~/.moss/config.json; a user coming from Moss
    keeps them. Our ~/.moss/config.toml and the workspace's file win over it."""
    home, root = tmp_path / "home", tmp_path / "project"
    (home / ".moss").mkdir(parents=True)
    (root / ".moss").mkdir(parents=True)
    moss_json = home / ".moss/config.json"
    moss_json.write_text('{"capsule_max_chars": 5000, "allowed_paths": ["backups"], "db_max_open_conns": 0, "allow_unsafe_paths": false}\n')
    loaded = config.load_config(root, home=home)
    assert loaded.capsule_max_chars == 5000 and loaded.allowed_paths == (home / "backups",)
    assert loaded.sources == (moss_json,) and loaded.data["db_max_open_conns"] == 0
    (home / ".moss/config.toml").write_text("capsule_max_chars = 7000\n")
    assert config.load_config(root, home=home).capsule_max_chars == 7000
    (root / ".moss/config.toml").write_text("capsule_max_chars = 9000\n")
    loaded = config.load_config(root, home=home)
    assert loaded.capsule_max_chars == 9000 and loaded.sources == (moss_json, home / ".moss/config.toml", root / ".moss/config.toml")


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ('{\n  "capsule_max_chars": 5000,\n}\n', "INVALID_DOCUMENT", 3),
        ("[1, 2]\n", "INVALID_DOCUMENT", None),
        ('{"capsule_max_chars": "big"}', "SCHEMA_ERROR", None),
    ],
)
def test_a_bad_moss_config_json_is_reported_with_its_file(tmp_path: Path, text: str, code: str, line: int | None) -> None:
    (tmp_path / "h" / ".moss").mkdir(parents=True)
    (tmp_path / "h" / ".moss/config.json").write_text(text)
    with pytest.raises(MossError) as caught:
        config.load_config(tmp_path, home=tmp_path / "h")
    assert caught.value.code == code and caught.value.line == line
    assert caught.value.path and "config.json" in caught.value.path


def test_the_cli_applies_capsule_max_chars_from_moss_config_json(repo: Path) -> None:
    home = Path(os.environ["HOME"])
    (home / ".moss").mkdir(mode=0o700)
    (home / ".moss/config.json").write_text('{"capsule_max_chars": 300}\n')
    assert run_cli("moss", "init", str(repo)).returncode == 0
    text = "## Objective\nShip it.\n\n## Current status\n" + "A long status line. " * 20 + "\n"
    result = run_cli("moss", "store", "--name", "big", "--allow-thin", "--json", cwd=repo, input=text)
    assert result.returncode == 4, result.stdout
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "CAPSULE_TOO_LARGE" and error["details"]["max_chars"] == 300


def test_the_home_moss_folder_is_made_private_as_moss_makes_it(repo: Path) -> None:
    """Issue 27 item 14: the first export makes ~/.moss/ and ~/.moss/exports/ mode 700, not
    only the last of them (a parent made on the way took the umask's 755)."""
    home = Path(os.environ["HOME"])
    assert not (home / ".moss").exists()
    assert run_cli("moss", "init", str(repo)).returncode == 0
    result = run_cli("moss", "export", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE((home / ".moss").stat().st_mode) == 0o700
    assert stat.S_IMODE((home / ".moss/exports").stat().st_mode) == 0o700
