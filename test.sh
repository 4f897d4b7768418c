#!/usr/bin/env bash
# Run the whole test suite. Creates a virtual environment of its own (.venv, or $MOSS_TEST_VENV)
# on first use and refreshes it when pyproject.toml changes, installs the pinned npm test
# clients (package.json) with `npm ci` when npm is there, and Chromium for the browser tests and
# podman, mmdebstrap, tmux and ttyd for the sleeve image's (apt-get, as root) when they are
# missing; extra arguments go to pytest.
#   ./test.sh                  # everything: ruff, mypy, then every test (what CI runs)
#   ./test.sh -m "not slow"    # skip the slow tests (storms, races, installs, external clients)
#   ./test.sh -k needlecast    # a subset (arguments skip ruff and mypy; MOSS_CHECKS=1 runs them)
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

# External MCP clients for the tests (the MCP Inspector CLI), pinned in package.json and
# package-lock.json; `npm ci` reinstalls them when either file changes. Without npm the tests
# that need them skip, saying so.
if [ -f package.json ]; then
    if command -v npm >/dev/null 2>&1; then
        npm_stamp=node_modules/.moss-files-npm-stamp
        npm_wanted="$(cat package.json package-lock.json | python3 -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
        if [ "$(cat "$npm_stamp" 2>/dev/null || true)" != "$npm_wanted" ]; then
            echo "test.sh: installing the pinned MCP Inspector (npm ci)" >&2
            npm ci --no-audit --no-fund --loglevel=error >&2
            echo "$npm_wanted" > "$npm_stamp"
        fi
    else
        echo "test.sh: npm not found; the MCP Inspector tests will be skipped" >&2
    fi
fi

# The web view's browser tests drive Chromium from the system packages through Playwright's
# Python API (an explicit executable path; `playwright install` is never run). When it is missing
# it is installed with apt-get, as root or through passwordless sudo; where that cannot be done
# (not root, no apt-get, no network) the browser tests skip, each saying exactly what is missing,
# and the rest of the suite runs (MOSS_REQUIRE_BROWSER=1 makes them fail instead).
chromium="${MOSS_TEST_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
    as_root=""
    if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        as_root="sudo -n"
    fi
    if { [ "$(id -u)" = 0 ] || [ -n "$as_root" ]; } && command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: installing Chromium and a font for the browser tests (${as_root:+sudo }apt-get install chromium fonts-liberation)" >&2
        if ! { $as_root apt-get update -qq && $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-liberation; } >&2; then
            echo "test.sh: apt-get could not install chromium; the browser tests will skip, saying why" >&2
        fi
    else
        echo "test.sh: no Chromium at $chromium and no way to install it here (needs root or passwordless sudo, and apt-get); the browser tests will skip" >&2
    fi
fi

# The sleeve image's tests build it here without a registry (mmdebstrap makes a Debian base,
# podman builds the Dockerfile on it) and run the terminal (tmux and ttyd) inside it; each
# program that is missing is installed with apt-get in the same way as Chromium, where that can
# be done. Where it cannot (or apt-get has no such package: Debian packages ttyd from forky on),
# the tests that need it skip, each saying what is missing (MOSS_REQUIRE_IMAGE=1 makes the
# image's tests fail instead).
image_tools=()
for program in podman mmdebstrap tmux ttyd; do
    command -v "$program" >/dev/null 2>&1 || image_tools+=("$program")
done
if [ "${#image_tools[@]}" -gt 0 ]; then
    as_root=""
    if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        as_root="sudo -n"
    fi
    if { [ "$(id -u)" = 0 ] || [ -n "$as_root" ]; } && command -v apt-get >/dev/null 2>&1; then
        # apt-get update once a day at most for packages it does not know (ttyd on Debian 12
        # would otherwise cost an update on every run).
        apt_stamp="$venv/.moss-files-apt-tried"
        # grep reads to the end (no -q): under pipefail, a grep -q that stops at the match
        # leaves apt-cache writing into a closed pipe, and its SIGPIPE failed the check.
        candidate() { LC_ALL=C apt-cache policy "$1" 2>/dev/null | grep '^  Candidate: [^(]' >/dev/null; }
        unknown=()
        for package in "${image_tools[@]}"; do
            candidate "$package" || unknown+=("$package")
        done
        updated=0
        if [ "${#unknown[@]}" -gt 0 ] && [ "$(cat "$apt_stamp" 2>/dev/null || true)" != "$(date +%F) ${unknown[*]}" ]; then
            $as_root apt-get update -qq >&2 || true
            echo "$(date +%F) ${unknown[*]}" > "$apt_stamp"
            updated=1
        fi
        installable=()
        for package in "${image_tools[@]}"; do
            if candidate "$package"; then
                installable+=("$package")
            else
                echo "test.sh: apt-get has no package $package here; the tests that need it will skip" >&2
            fi
        done
        if [ "${#installable[@]}" -gt 0 ]; then
            echo "test.sh: installing ${installable[*]} for the sleeve image's tests (${as_root:+sudo }apt-get install)" >&2
            if ! $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${installable[@]}" >&2 \
                && ! { [ "$updated" = 0 ] && $as_root apt-get update -qq >&2 \
                    && $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${installable[@]}" >&2; }; then
                echo "test.sh: apt-get could not install ${installable[*]}; the tests that need them will skip, saying why" >&2
            fi
        fi
    else
        echo "test.sh: ${image_tools[*]} missing and no way to install them here (needs root or passwordless sudo, and apt-get); the sleeve image's tests will skip" >&2
    fi
fi

# Lint, format and types first: a finding fails the suite, as a failing test does. Skipped when
# pytest is given arguments (a developer running a subset); CI runs ./test.sh bare.
if [ "$#" -eq 0 ] || [ "${MOSS_CHECKS:-}" = "1" ]; then
    echo "test.sh: ruff check, ruff format --check, mypy" >&2
    "$venv/bin/ruff" check --quiet .
    "$venv/bin/ruff" format --check --quiet .
    "$venv/bin/mypy"
fi

exec "$venv/bin/python" -m pytest "$@"
