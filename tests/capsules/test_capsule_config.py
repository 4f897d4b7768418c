"""Settings: user-level and workspace config files, merged as Moss merges them."""

from __future__ import annotations

from pathlib import Path

import pytest

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
