"""Architecture and documentation checks: layers, docstrings, help texts, error codes in docs/errors.md."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from moss_files.foundation.errors import ERROR_CODES

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("moss_files", "cstack", "needlecast")
# Modules of the pure core must not reach the outside world themselves.
FORBIDDEN_IN_CORE = {"sqlite3", "subprocess", "socket", "http", "urllib", "watchdog", "typer", "click", "mcp", "git", "threading"}
# Pure parts of those packages: urllib.parse splits texts (the one URL parser, foundation.hosts).
PURE_IN_CORE = ("urllib.parse",)


def modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def imported_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_says_what_it_holds(path: Path) -> None:
    assert ast.get_docstring(ast.parse(path.read_text())), f"{path} has no module docstring"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_modules_do_no_io_of_their_own(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    if not re.search(r"\bcore layer\b|\(core\)|^core\b", docstring, re.IGNORECASE | re.MULTILINE):
        return
    roots = {name.split(".")[0] for name in imported_names(path) if not name.startswith(PURE_IN_CORE)}
    assert not roots & FORBIDDEN_IN_CORE, f"core module {path.name} imports {sorted(roots & FORBIDDEN_IN_CORE)}"


def all_commands() -> list[tuple[str, Any]]:
    """(full name, command) for every command and group of the three CLIs."""
    found: list[tuple[str, Any]] = []
    for tool, module in (("moss", "moss_files.cli.main"), ("cstack", "cstack.cli"), ("needlecast", "needlecast.cli")):
        group = typer.main.get_command(importlib.import_module(module).app)

        def walk(prefix: str, command: Any) -> None:
            found.append((prefix, command))
            if hasattr(command, "list_commands"):  # a group (typer vendors its own click)
                context = command.context_class(command)
                for name in command.list_commands(context):
                    walk(f"{prefix} {name}", command.get_command(context, name))

        walk(tool, group)
    return found


@pytest.mark.parametrize(("name", "command"), all_commands(), ids=lambda value: value if isinstance(value, str) else "")
def test_every_command_has_help_text(name: str, command: Any) -> None:
    assert (command.help or "").strip(), f"`{name}` has no help text"


TOOL_APPS = (("moss", "moss_files.cli.main"), ("cstack", "cstack.cli"), ("needlecast", "needlecast.cli"))


@pytest.mark.parametrize(("tool", "module"), TOOL_APPS)
def test_every_command_takes_dash_h_as_help(tool: str, module: str) -> None:
    """`-h` is `--help` everywhere, as it is for install.sh and migrate.sh (it once was
    `No such option: -h`)."""
    from typer.testing import CliRunner

    app = importlib.import_module(module).app
    runner = CliRunner()
    paths = [name.split()[1:] for name, _command in all_commands() if name.split()[0] == tool]
    assert len(paths) >= 10
    for words in paths:
        short = runner.invoke(app, [*words, "-h"], prog_name=tool)
        assert short.exit_code == 0, (words, short.output)
        assert short.output == runner.invoke(app, [*words, "--help"], prog_name=tool).output, words


def first_sentence(help_text: str) -> str:
    """A command's help up to its first sentence's end, on one line."""
    words = " ".join(help_text.split("\n\n")[0].split()).split(" ")
    for index, word in enumerate(words):
        if word.endswith("."):
            return " ".join(words[: index + 1])
    return " ".join(words)


@pytest.mark.parametrize(("tool", "module"), TOOL_APPS)
def test_command_lists_show_each_first_sentence_whole(tool: str, module: str) -> None:
    """`moss --help` once cut descriptions short with '...' at 45 characters or so."""
    from typer.testing import CliRunner

    app = importlib.import_module(module).app
    runner = CliRunner()
    groups = [(name, command) for name, command in all_commands() if name.split()[0] == tool and hasattr(command, "list_commands")]
    for name, group in groups:
        shown = runner.invoke(app, [*name.split()[1:], "--help"], prog_name=tool, env={"COLUMNS": "100"}).output
        listing = shown.split("\nCommands:\n", 1)[1]
        assert not re.search(r"(\.\.\.|…)\s*$", listing, re.MULTILINE), f"`{name} --help` cuts a description short:\n{listing}"
        flat = re.sub(r"(?<=\w)- (?=\w)", "-", " ".join(listing.split()))  # click wraps after a word's hyphen
        context = group.context_class(group)
        for sub in group.list_commands(context):
            sentence = first_sentence(group.get_command(context, sub).help or "")
            assert sentence and sentence in flat, f"`{name} --help` does not show {sub}'s {sentence!r}"


@pytest.mark.parametrize("tool", ["moss", "cstack", "needlecast"])
def test_each_tool_takes_dash_h_and_version_as_a_process(tool: str) -> None:
    from conftest import run_cli

    from moss_files import __version__

    for flag in ("-h", "--help"):
        helped = run_cli(tool, flag)
        assert helped.returncode == 0 and helped.stdout.startswith(f"Usage: {tool} "), (flag, helped.stderr)
    version = run_cli(tool, "--version")
    assert (version.returncode, version.stdout, version.stderr) == (0, f"moss-files {__version__}\n", "")


def test_the_quick_forms_of_moss_take_dash_h() -> None:
    """`moss search` and `moss index refresh|rebuild` run without typer in their common forms;
    `-h` must still reach typer's help, not become a query word."""
    from conftest import run_cli

    for args in (["search", "-h"], ["search", "token", "-h"], ["index", "refresh", "-h"], ["index", "rebuild", "-h"]):
        done = run_cli("moss", *args)
        assert done.returncode == 0 and done.stdout.startswith("Usage: moss "), (args, done.stdout, done.stderr)


@pytest.mark.parametrize(
    ("name", "command"), [pair for pair in all_commands() if not hasattr(pair[1], "commands")], ids=lambda value: value if isinstance(value, str) else ""
)
def test_every_command_offers_json_output(name: str, command: Any) -> None:
    options = {opt for param in command.params for opt in getattr(param, "opts", [])}
    long_running = {"needlecast sidecar", "moss serve"}
    if name in long_running:
        return  # daemons log to stderr and serve JSON over their own protocol
    assert "--json" in options, f"`{name}` has no --json option"


def test_every_error_code_is_documented_in_the_errors_page() -> None:
    page = (ROOT / "docs" / "errors.md").read_text()
    missing = [code for code in ERROR_CODES if f"| `{code}` |" not in page]
    assert not missing, f"docs/errors.md has no table row for: {missing}"


def test_every_package_module_imports() -> None:
    for package in PACKAGES:
        imported = importlib.import_module(package)
        for info in pkgutil.walk_packages(imported.__path__, prefix=f"{package}."):
            importlib.import_module(info.name)


def test_lazy_command_table_matches_what_the_modules_register() -> None:
    from moss_files.cli import main as cli

    for module_name, names in cli.LAZY_COMMANDS.items():
        assert set(cli.feature_commands(module_name)) == set(names), module_name
    everything = [name for names in cli.LAZY_COMMANDS.values() for name in names]
    assert len(everything) == len(set(everything)), "a command name is claimed by two modules"


_CODE_SHAPE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{4,}")


def _code_parameters(trees: list[ast.AST]) -> dict[str, set[int]]:
    """Functions (of any module) with a parameter named `code`: their name and the position a
    positional argument for it takes in a call (not counting `self`/`cls`)."""
    found: dict[str, set[int]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = [arg.arg for arg in (*node.args.posonlyargs, *node.args.args)]
                if "code" in names:
                    position = names.index("code") - (1 if names[0] in ("self", "cls") else 0)
                    found.setdefault(node.name, set()).add(position)
    return found


def _codes_written(tree: ast.AST, code_parameters: dict[str, set[int]]) -> set[str]:
    """String constants used as error codes: `code=` arguments and positional arguments for a
    parameter named `code` (a local `error(line, record, "ID_COLLISION", …)`), values under a
    "code" key, the first argument of a `...Problem(...)` (per-line and per-file problems),
    assignments to `code` or a name ending in `_code`, and comparisons with `code`."""
    found: set[str] = set()

    def take(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _CODE_SHAPE.fullmatch(node.value):
            found.add(node.value)

    def name_of(node: ast.AST) -> str:
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "code":
                    take(keyword.value)
            name = name_of(node.func)
            if name.endswith("Problem") and node.args:
                take(node.args[0])
            for position in code_parameters.get(name, ()):
                if position < len(node.args):
                    take(node.args[position])
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "code":
                    take(value)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(name_of(target) == "code" or name_of(target).lower().endswith("_code") for target in targets):
                take(node.value)
        elif isinstance(node, ast.Compare) and name_of(node.left) == "code":
            for comparator in node.comparators:
                take(comparator)
    return found


def codes_the_code_writes() -> dict[str, list[str]]:
    """Every error code some module writes, with the modules that write it."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in modules()}
    parameters = _code_parameters(list(trees.values()))
    written: dict[str, list[str]] = {}
    for path, tree in trees.items():
        for code in _codes_written(tree, parameters):
            written.setdefault(code, []).append(path.relative_to(ROOT).as_posix())
    return written


def test_every_code_the_code_can_emit_is_registered() -> None:
    """`moss codes`, docs/errors.md's table and the MCP error contract list ERROR_CODES; a code
    written anywhere else (a per-line import error, a problem entry) must be there too."""
    written = codes_the_code_writes()
    # The scan sees codes in each of the places they are written.
    assert {"PARSE_ERROR", "INVALID_RECORD", "SYMLINK_REFUSED", "ID_COLLISION", "NAME_COLLISION", "RAIL_VIOLATION", "NOT_FOUND"} <= set(written)
    missing = {code: where for code, where in written.items() if code not in ERROR_CODES}
    assert not missing, f"codes used but not in ERROR_CODES: {missing}"


def test_every_code_the_code_can_emit_is_in_moss_codes_and_the_errors_page() -> None:
    """What a user sees of the registry: `moss codes --json` as a process, and docs/errors.md."""
    from conftest import run_cli

    listed = {row["code"] for row in json.loads(run_cli("moss", "codes", "--json").stdout)}
    page = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    written = set(codes_the_code_writes())
    assert not written - listed, f"not in `moss codes`: {sorted(written - listed)}"
    undocumented = sorted(code for code in written if f"| `{code}` |" not in page)
    assert not undocumented, f"no row in docs/errors.md: {undocumented}"


# --------------------------------------------------------------------------- import rules
#
# The layers, as docs/architecture.md states them. Every import counts, also one inside a
# function: a lazy import is still a dependency.

STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}
YAML = {"yaml", "ruamel"}
# Libraries the foundation may use besides the standard library: the two YAML parsers
# (GitPython is allowed in gitrepo only, below).
FOUNDATION_LIBRARIES = YAML
# Each kind's pure core: the model, and where a model grew large, its file forms, result shapes
# and rules beside it. They import the foundation and one another within their kind, nothing else.
KIND_MODELS = {
    "moss_files.capsules.model",
    "moss_files.board.model",
    "moss_files.board.files",
    "moss_files.board.shapes",
    "moss_files.board.rules",
    "moss_files.board.evidence",
    "moss_files.board.oversight",
    "moss_files.board.threads",
    "moss_files.board.review",
    "moss_files.board.worktree",
    "moss_files.loopflow.insights",
    "moss_files.loopflow.sessions",
    "moss_files.loopflow.tasks",
    "moss_files.loopflow.bundles",
    "moss_files.loopflow.sanitize",
    "moss_files.loopflow.summary",
    "moss_files.loopflow.feedback",
    "moss_files.loopflow.observations",
    "moss_files.loopflow.ai",
    "moss_files.loopflow.exchange",
    "moss_files.index.model",
    "moss_files.index.query",
    "moss_files.agent.model",
    "moss_files.agent.policy",
}
# Where each outside library may be imported (module-name prefixes).
ONLY_IN = {
    "sqlite3": ("moss_files.index.", "moss_files.migrate."),
    "typer": ("moss_files.cli.", "cstack.cli", "needlecast.cli"),
    "click": ("moss_files.cli.", "cstack.cli", "needlecast.cli"),
    "mcp": ("moss_files.mcp.",),
    "git": ("moss_files.foundation.gitrepo",),
    "uvicorn": ("moss_files.mcp.",),
    # The sidecar watches outboxes to route them; the board's waiters watch the board; the web
    # view watches the toolkit's folders to tell open pages what changed (server-sent events).
    "watchdog": ("needlecast.sidecar", "moss_files.board.watch", "moss_files.web.watch"),
    # File content is untrusted: the web view alone renders it as HTML, in one place.
    "markdown_it": ("moss_files.web.markdown",),
    "anthropic": ("moss_files.agent.llm",),
}
# What cstack and needlecast may use of moss_files: the foundation, the shared CLI support
# (with its typer-free output and command-line reading for the quick commands, and the kept
# help pages' printer, `cstack --help`), the templates, and the scaffold (`cstack init` /
# `needlecast init` set up their folders).
FOUNDATION_PREFIXES = (
    "moss_files.foundation",
    "moss_files.cli.support",
    "moss_files.cli.streams",
    "moss_files.cli.cmdline",
    "moss_files.cli.startup",
    "moss_files.cli.top_help",
    "moss_files.scaffold",
    "moss_files.templates",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_imports(path: Path) -> set[str]:
    """Every module `path` imports, at any depth of its code, as dotted names (for
    `from a.b import c`: `a.b`, and `a.b.c` when that is a module of ours)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if candidate in MODULES:
                    names.add(candidate)
    return names


MODULES = {module_name(path): path for path in modules()}
IMPORTS = {name: all_imports(path) for name, path in MODULES.items()}


def _violations(rule: Any) -> list[str]:
    return sorted(f"{name} imports {other}" for name, used in IMPORTS.items() for other in used if rule(name, other))


def test_the_foundation_imports_only_the_standard_library_yaml_and_itself() -> None:
    def broken(name: str, other: str) -> bool:
        if not name.startswith("moss_files.foundation"):
            return False
        root = other.split(".")[0]
        if root in STDLIB or root in FOUNDATION_LIBRARIES or other.startswith("moss_files.foundation") or other == "moss_files":
            return False
        return not (root == "git" and name == "moss_files.foundation.gitrepo")

    assert _violations(broken) == []


def test_a_kinds_pure_core_imports_only_the_foundation_and_its_own_kind() -> None:
    def broken(name: str, other: str) -> bool:
        root = other.split(".")[0]
        same_kind = other in KIND_MODELS and other.rsplit(".", 1)[0] == name.rsplit(".", 1)[0]
        return name in KIND_MODELS and root not in STDLIB and not other.startswith("moss_files.foundation") and other != "moss_files" and not same_kind

    assert _violations(broken) == []


@pytest.mark.parametrize("library", sorted(ONLY_IN))
def test_outside_libraries_are_imported_in_one_place(library: str) -> None:
    allowed = ONLY_IN[library]
    assert _violations(lambda name, other: other.split(".")[0] == library and not name.startswith(allowed)) == []


def test_cstack_and_needlecast_never_import_each_other_and_use_only_the_foundation() -> None:
    def broken(name: str, other: str) -> bool:
        mine, theirs = name.split(".")[0], other.split(".")[0]
        if mine not in ("cstack", "needlecast"):
            return False
        if theirs in ("cstack", "needlecast") and theirs != mine:
            return True
        return theirs == "moss_files" and other != "moss_files" and not other.startswith(FOUNDATION_PREFIXES)

    assert _violations(broken) == []


def test_others_read_cstack_and_needlecast_through_their_public_names() -> None:
    def broken(name: str, other: str) -> bool:
        theirs = other.split(".")[0]
        return theirs in ("cstack", "needlecast") and name.split(".")[0] != theirs and other != theirs

    assert _violations(broken) == []


def test_there_are_no_import_cycles() -> None:
    graph = {name: {other for other in used if other in MODULES and other != name} for name, used in IMPORTS.items()}
    # A package's __init__ that imports its own modules lazily (cstack, needlecast) is an
    # entrance, not a dependency of those modules.
    graph = {name: {other for other in targets if not (other in ("cstack", "needlecast") and name.startswith(other + "."))} for name, targets in graph.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == [], "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_every_package_is_listed_for_installation() -> None:
    """pyproject.toml names the packages one by one (the templates folder is mapped into the
    package); a package left out installs nowhere, and only an installed copy shows it."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        module_name(init) for top in ("moss_files", "cstack", "needlecast") for init in (ROOT / top).rglob("__init__.py") if "__pycache__" not in init.parts
    }
    assert found - listed == set()


def documented_tree() -> set[str]:
    """The module paths of docs/architecture.md's tree (two spaces per level; `a/b.py, c.py`
    names several files of one folder)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page[page.index("## Modules") :]
    block = section[section.index("```text\n") + 8 : section.index("\n```", section.index("```text"))]
    folders: list[str] = []
    paths: set[str] = set()
    for line in block.splitlines():
        name = line.strip().split("  ")[0]
        depth = (len(line) - len(line.lstrip(" "))) // 2
        del folders[depth:]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
            continue
        first, _, rest = name.partition(", ")
        folder, _, file = first.rpartition("/")
        prefix = [*folders, folder] if folder else folders
        for item in [file, *(part.strip() for part in rest.split(",") if part.strip())]:
            paths.add("/".join([*prefix, item]))
    return paths


def test_the_architecture_page_lists_every_module() -> None:
    """docs/architecture.md's tree names every module, and only modules that exist, so the map
    a newcomer reads cannot fall behind the code."""
    actual = {str(path.relative_to(ROOT)) for path in modules() if path.name != "__init__.py"}
    documented = {path for path in documented_tree() if path.endswith(".py") and not path.endswith("__init__.py")}
    assert sorted(actual - documented) == [] and sorted(documented - actual) == []


def test_no_command_declares_an_option_twice_and_root_goes_with_project() -> None:
    """A flag declared twice makes click take one silently (`--project` of `moss migrate` names
    the source, so there `--root` alone names the workspace); everywhere else `--root` and
    `--project` are one option."""
    for name, command in all_commands():
        flags = [flag for param in getattr(command, "params", []) for flag in (*param.opts, *param.secondary_opts)]
        assert len(flags) == len(set(flags)), f"`{name}` declares {sorted({f for f in flags if flags.count(f) > 1})} twice"
        if "--root" in flags and not name.startswith("moss migrate"):
            assert "--project" in flags, f"`{name}` takes --root but not --project"


def test_every_dataclass_has_a_docstring() -> None:
    """`dataclasses` calls `inspect` (10 ms to import) only to write a signature into a class
    without a docstring; with one, a quick command's placeholder for `inspect` (cli.startup)
    stays unloaded."""
    bare = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or ast.get_docstring(node) is not None:
                continue
            names = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
            if any(name.split(".")[-1] == "dataclass" for name in names):
                bare.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert bare == []
