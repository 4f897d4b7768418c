"""The board's layers, read from its modules' imports: a pure core (model, files, shapes, rules,
threads, evidence, oversight, review, worktree) that imports only the standard library, the foundation and
itself; a store (and its activity log) that adds only the file system; a watcher that alone imports watchdog; use
cases that never reach an entry point; and the MCP tool names in one table."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from moss_files.board import operations

BOARD = Path(__file__).resolve().parents[2] / "moss_files" / "board"
CORE = ("model", "files", "shapes", "rules", "threads", "evidence", "oversight", "review", "worktree")
USE_CASES = ("usecase", "plans", "claims", "editing", "teams", "queries", "leases", "conversation", "waiting", "governance", "operations")
# Standard-library modules that touch the machine: the core decides, it does not act.
EFFECTS = {"os", "io", "subprocess", "socket", "shutil", "tempfile", "time", "fcntl", "sqlite3", "threading"}


def imports(module: str) -> set[str]:
    """Every module `moss_files/board/<module>.py` imports, at any depth, as dotted names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse((BOARD / f"{module}.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "moss_files.board":
                names.update(f"moss_files.board.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_only_the_standard_library_the_foundation_and_itself(module: str) -> None:
    core = {f"moss_files.board.{name}" for name in CORE} | {"moss_files.board"}
    wrong = sorted(
        name
        for name in imports(module)
        if not (
            name.startswith("moss_files.foundation")
            or name in core
            or (name.split(".")[0] in sys.stdlib_module_names and name.split(".")[0] not in EFFECTS)
            or name == "__future__"
        )
    )
    assert wrong == []


@pytest.mark.parametrize(("module", "also"), [("store", ("threads", "activity")), ("activity", ("rules",))])
def test_the_store_adds_only_the_file_system(module: str, also: tuple[str, ...]) -> None:
    allowed_board = {f"moss_files.board.{name}" for name in ("model", "files", *also)} | {"moss_files.board"}
    wrong = sorted(
        name for name in imports(module) if name.startswith("moss_files.") and not name.startswith("moss_files.foundation") and name not in allowed_board
    )
    assert wrong == []


def test_only_the_watcher_imports_watchdog() -> None:
    modules = sorted(path.stem for path in BOARD.glob("*.py"))
    assert [module for module in modules if any(name.split(".")[0] == "watchdog" for name in imports(module))] == ["watch"]


@pytest.mark.parametrize("module", USE_CASES)
def test_use_cases_reach_no_entry_point(module: str) -> None:
    wrong = sorted(name for name in imports(module) if name.startswith(("moss_files.cli", "moss_files.mcp", "typer", "mcp", "pydantic")))
    assert wrong == []


def test_every_moe_tool_has_one_use_case() -> None:
    listed = (Path(__file__).resolve().parents[2] / "moss_files" / "mcp" / "tools" / "moe.py").read_text(encoding="utf-8")
    tools = {
        node.args[0].value.removeprefix("moe.")
        for node in ast.walk(ast.parse(listed))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "tool" and node.args and isinstance(node.args[0], ast.Constant)
    }
    assert tools == set(operations.OPERATIONS)
