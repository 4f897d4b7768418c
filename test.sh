#!/usr/bin/env bash
# Run the whole test suite. Creates a virtual environment of its own (.venv, or $MOSS_TEST_VENV)
# on first use and refreshes it when pyproject.toml changes; extra arguments go to pytest.
#   ./test.sh                  # everything
#   ./test.sh -k needlecast    # a subset
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v python3 >/dev/null 2>&1; then
    echo "test.sh: python3 is required (3.11 or newer)" >&2
    exit 3
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "test.sh: python3 is $(python3 -V 2>&1 | cut -d' ' -f2); 3.11 or newer is required" >&2
    exit 3
fi
if ! command -v git >/dev/null 2>&1; then
    echo "test.sh: git is required" >&2
    exit 3
fi

venv="${MOSS_TEST_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
    echo "test.sh: creating virtual environment $venv" >&2
    python3 -m venv "$venv"
fi
stamp="$venv/.moss-files-test-stamp"
wanted="$(cat pyproject.toml | python3 -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$wanted" ]; then
    echo "test.sh: installing moss-files and test dependencies into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]'
    echo "$wanted" > "$stamp"
fi

exec "$venv/bin/python" -m pytest "$@"
