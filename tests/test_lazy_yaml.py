"""PyYAML loads only when a file's frontmatter needs it: `cstack status` and a plain `moss list`
run as real processes, and the import log (`PYTHONPROFILEIMPORTTIME`) says whether `yaml` was
imported. Importing it costs every command several milliseconds of start-up."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli

CURRENT_PLAIN = """# Current Context

## Now

- Rounding per invoice.

## Next Steps

1. Write the property test.
"""

# A block scalar is beyond the plain scanner: only the C loader reads it.
CURRENT_BLOCK_SCALAR = """---
status: working
task: |
  Round totals
  once per invoice
---
# Current Context
"""


def loads_yaml(stderr: str) -> bool:
    """Whether the import log of a process shows PyYAML imported."""
    return re.search(r"^import time:.*\|\s*yaml$", stderr, re.MULTILINE) is not None


def run_logged(tool: str, *args: str, cwd: Path) -> tuple[str, str]:
    done = run_cli(tool, *args, cwd=cwd, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "import time:" in done.stderr  # the log is there, so its silence about yaml means something
    return done.stdout, done.stderr


def test_cstack_status_does_not_import_yaml_without_frontmatter_to_parse(repo: Path) -> None:
    assert run_cli("cstack", "init", cwd=repo).returncode == 0
    (repo / ".cstack" / "CURRENT.md").write_text(CURRENT_PLAIN, encoding="utf-8")
    stdout, stderr = run_logged("cstack", "status", "--json", cwd=repo)
    assert json.loads(stdout)["focus"] == "- Rounding per invoice."
    assert not loads_yaml(stderr)
    # Simple frontmatter is read by the plain scanner: still no PyYAML.
    (repo / ".cstack" / "CURRENT.md").write_text("---\nstatus: blocked\ntask: Ship it\n---\n" + CURRENT_PLAIN, encoding="utf-8")
    stdout, stderr = run_logged("cstack", "status", "--json", cwd=repo)
    assert (json.loads(stdout)["task"], json.loads(stdout)["state"]) == ("Ship it", "blocked")
    assert not loads_yaml(stderr)


def test_cstack_status_imports_yaml_when_frontmatter_needs_it(repo: Path) -> None:
    assert run_cli("cstack", "init", cwd=repo).returncode == 0
    (repo / ".cstack" / "CURRENT.md").write_text(CURRENT_BLOCK_SCALAR, encoding="utf-8")
    stdout, stderr = run_logged("cstack", "status", "--json", cwd=repo)
    assert json.loads(stdout)["task"] == "Round totals\nonce per invoice"
    assert loads_yaml(stderr)


def test_moss_list_does_not_import_yaml_for_capsules_the_toolkit_wrote(repo: Path) -> None:
    assert run_cli("moss", "init", cwd=repo).returncode == 0
    for name in ("alpha", "beta"):
        stored = run_cli("moss", "store", "--name", name, "--allow-thin", cwd=repo, input=f"## Objective\n{name}\n")
        assert stored.returncode == 0, stored.stderr
    stdout, stderr = run_logged("moss", "list", "--json", cwd=repo)
    assert sorted(item["name"] for item in json.loads(stdout)["items"]) == ["alpha", "beta"]
    assert not loads_yaml(stderr)


READER_PROBE = """
import sys
from moss_files.foundation import document, yaml_reader
seen = ['yaml' in sys.modules]
document.parse("# no frontmatter\\n")
seen.append('yaml' in sys.modules)
simple = yaml_reader.load_fast("name: a\\ntags: [x, y]\\n")
seen.append('yaml' in sys.modules)
first = yaml_reader.load_fast("text: |\\n  one\\n  two\\n")
second = yaml_reader.load_fast("m: {a: 1}\\n")
seen.append('yaml' in sys.modules)
print(seen, simple, first, second, yaml_reader._fast_loader.cache_info().misses)
"""


def test_the_reader_imports_yaml_at_the_first_document_the_scanner_declines_and_builds_its_loader_once() -> None:
    done = subprocess.run([sys.executable, "-c", READER_PROBE], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[False, False, False, True] {'name': 'a', 'tags': ['x', 'y']} {'text': 'one\\ntwo\\n'} {'m': {'a': 1}} 1"
