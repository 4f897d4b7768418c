#!/usr/bin/env bash
# Install the moss-files tools once per user (like git: the tool is system-wide, the data
# lives in each repository), then scaffold a project. Idempotent: a second run changes nothing.
set -euo pipefail

readonly EXIT_USAGE=2 EXIT_PREREQ=3 EXIT_TARGET=4 EXIT_INSTALL=5 EXIT_SCAFFOLD=6
readonly TOOLS=(moss cstack needlecast)
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
readonly SRC

usage() {
    cat <<'EOF'
Usage: ./install.sh [--dry-run] [--agent claude|codex]... [--no-tool] <project-dir>
       ./install.sh --remove --agent claude|codex... [--dry-run] <project-dir>

Installs the moss-files tools (moss, cstack, needlecast) for the current user, then sets up
<project-dir>: .cstack/, .needlecast/ and .moss/ from templates, .gitignore entries for
per-machine state, .gitattributes union merges for append-only files. Only missing files and
lines are added; no existing file is ever overwritten.

Options:
  --dry-run         print what would be done, for the tools and the project; write nothing
  --agent NAME      add an agent's integration, repeatable: claude (CLAUDE.md, .mcp.json, hooks
                    in .claude/settings.json, .claude/commands/, .claude/skills/) or codex
                    (AGENTS.md, MCP server and hooks in .codex/config.toml, .agents/skills/)
  --remove          take the --agent integration out of <project-dir> again (the user's own
                    settings, hooks and notes stay); installs nothing
  --no-tool         do not install the tools; only scaffold the project
  -h, --help        show this help

Environment:
  MOSS_HOME         where the tools' virtualenv lives
                    (default: ${XDG_DATA_HOME:-$HOME/.local/share}/moss-files)
  MOSS_BIN_DIR      where the moss, cstack and needlecast links go (default: $HOME/.local/bin)
  MOSS_PYTHON       the Python (3.11 or newer) to use (default: python3)

Exit status:
  0  done (or, with --dry-run, nothing stood in the way)
  2  usage: unknown option, missing or extra argument
  3  a prerequisite is missing: python3 >= 3.11 with venv, or git
  4  bad target: missing, not a directory, or not writable
  5  installing the tools failed (venv or pip), or a file that is not ours is in the way
     in the bin directory
  6  scaffolding the project failed (its error names the file and the reason)
EOF
}

say() { printf 'install.sh: %s\n' "$*" >&2; }
warn() { printf 'install.sh: warning: %s\n' "$*" >&2; }
die() {
    local status=$1
    shift
    printf 'install.sh: error: %s\n' "$*" >&2
    exit "$status"
}

# --- arguments -----------------------------------------------------------------------------
dry_run=0
no_tool=0
remove=0
agents=()
target=""
positional=()
while (($#)); do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --dry-run) dry_run=1 ;;
        --no-tool) no_tool=1 ;;
        --remove) remove=1 ;;
        --agent)
            (($# >= 2)) || die "$EXIT_USAGE" "--agent needs a value: claude or codex"
            agents+=("$2")
            shift
            ;;
        --agent=*) agents+=("${1#--agent=}") ;;
        --) shift; positional+=("$@"); break ;;
        -*) die "$EXIT_USAGE" "unknown option '$1' (see --help)" ;;
        *) positional+=("$1") ;;
    esac
    shift
done
if ((${#positional[@]} != 1)); then
    usage >&2
    die "$EXIT_USAGE" "expected exactly one project directory, got ${#positional[@]}"
fi
target=${positional[0]}
agent_args=()
for agent in ${agents[@]+"${agents[@]}"}; do
    case $agent in
        claude | codex) agent_args+=(--agent "$agent") ;;
        *) die "$EXIT_USAGE" "unknown agent '$agent': use claude or codex" ;;
    esac
done
if ((remove)) && ((${#agent_args[@]} == 0)); then
    die "$EXIT_USAGE" "--remove takes out an agent's integration: name it with --agent claude or --agent codex"
fi
((remove)) && no_tool=1

# --- prerequisites -------------------------------------------------------------------------
PYTHON=${MOSS_PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 ||
    die "$EXIT_PREREQ" "$PYTHON not found: install Python 3.11 or newer (or set MOSS_PYTHON)"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    found=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo unknown)
    die "$EXIT_PREREQ" "$PYTHON is version $found; moss-files needs 3.11 or newer (set MOSS_PYTHON to another interpreter)"
fi
command -v git >/dev/null 2>&1 || die "$EXIT_PREREQ" "git not found: install git first"

[[ -e $target || -L $target ]] || die "$EXIT_TARGET" "project directory '$target' does not exist"
[[ -d $target ]] || die "$EXIT_TARGET" "'$target' is not a directory"
# `-w` asks access(2), which also reports a read-only file system (root included).
[[ -w $target ]] || die "$EXIT_TARGET" "'$target' is not writable"
target=$(cd "$target" && pwd -P)

# --- the tools -----------------------------------------------------------------------------
MOSS_HOME=${MOSS_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/moss-files}
BIN_DIR=${MOSS_BIN_DIR:-$HOME/.local/bin}
VENV=$MOSS_HOME/venv
STAMP=$MOSS_HOME/source.stamp

# The installed copy is identified by a digest of the files pip installs (package sources,
# templates, project metadata), so a rerun from the same checkout skips pip entirely.
source_files() {
    "$PYTHON" -P - "$@" <<'PY'
import hashlib, os, shutil, sys
mode, src = sys.argv[1], sys.argv[2]
tops = ["pyproject.toml", "README.md", "LICENSE", "LICENSE.md", "setup.cfg", "MANIFEST.in"]
files = [t for t in tops if os.path.isfile(os.path.join(src, t))]
for folder in ("moss_files", "cstack", "needlecast", "templates"):
    for dirpath, dirnames, filenames in os.walk(os.path.join(src, folder)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.endswith(".egg-info"))
        files += [os.path.relpath(os.path.join(dirpath, f), src) for f in filenames if not f.endswith(".pyc")]
files.sort()
if mode == "hash":
    digest = hashlib.sha256()
    for rel in files:
        with open(os.path.join(src, rel), "rb") as handle:
            data = handle.read()
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    print(digest.hexdigest())
else:
    dest = sys.argv[3]
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(dest, rel)) or dest, exist_ok=True)
        shutil.copy2(os.path.join(src, rel), os.path.join(dest, rel))
PY
}

venv_works() {
    [[ -x $VENV/bin/python ]] && "$VENV/bin/python" -I -c 'import moss_files.cli' >/dev/null 2>&1
}

# A link in BIN_DIR is ours when it points at the tool in our venv; anything else there is
# someone else's file, which we never replace.
link_state() {
    local link=$BIN_DIR/$1
    if [[ -L $link ]]; then
        [[ $(readlink "$link") == "$VENV/bin/$1" ]] && echo ours || echo foreign
    elif [[ -e $link ]]; then
        echo foreign
    else
        echo missing
    fi
}

tool_status="skipped (--no-tool)"
install_tools() {
    local stamp tool state
    stamp=$(source_files hash "$SRC")
    for tool in "${TOOLS[@]}"; do
        if [[ $(link_state "$tool") == foreign ]]; then
            die "$EXIT_INSTALL" "$BIN_DIR/$tool exists and is not a moss-files link; not replacing it (remove it, or set MOSS_BIN_DIR to another folder)"
        fi
    done
    if [[ -f $STAMP && $(<"$STAMP") == "$stamp" ]] && venv_works; then
        tool_status="already installed from this source ($VENV)"
        say "tools: $tool_status"
    elif ((dry_run)); then
        tool_status="would install into $VENV"
        if [[ -x $VENV/bin/python ]]; then
            say "would reinstall moss-files from $SRC into the virtualenv $VENV (the source changed)"
        else
            say "would create the virtualenv $VENV (with $PYTHON) and pip install moss-files from $SRC"
        fi
    else
        if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
            die "$EXIT_PREREQ" "$PYTHON cannot create virtualenvs (on Debian/Ubuntu: apt install python3-venv)"
        fi
        mkdir -p "$MOSS_HOME" || die "$EXIT_INSTALL" "cannot create $MOSS_HOME"
        if ! [[ -x $VENV/bin/python ]] || ! "$VENV/bin/python" -I -c 'import pip' >/dev/null 2>&1; then
            say "creating the virtualenv $VENV"
            "$PYTHON" -m venv --clear "$VENV" >&2 || die "$EXIT_INSTALL" "could not create the virtualenv $VENV"
        fi
        BUILD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/moss-files-build.XXXXXX")
        # pip builds in the source folder; a copy keeps the checkout clean and makes what is
        # installed exactly what the stamp describes.
        trap 'rm -rf "$BUILD_DIR"' EXIT
        source_files copy "$SRC" "$BUILD_DIR"
        say "installing moss-files and its dependencies into $VENV (this can take a minute)"
        if ! "$VENV/bin/python" -I -m pip install --quiet --disable-pip-version-check --no-input "$BUILD_DIR" >&2; then
            die "$EXIT_INSTALL" "pip could not install moss-files from $SRC (see pip's messages above)"
        fi
        rm -rf "$BUILD_DIR"
        trap - EXIT
        # Written last, and by rename: an interrupted install leaves no stamp, so it is redone.
        if ! { printf '%s\n' "$stamp" >"$STAMP.tmp.$$" && mv -f "$STAMP.tmp.$$" "$STAMP"; }; then
            die "$EXIT_INSTALL" "cannot write $STAMP"
        fi
        tool_status="installed into $VENV"
        say "tools: $tool_status"
    fi
    for tool in "${TOOLS[@]}"; do
        state=$(link_state "$tool")
        if [[ $state == missing ]]; then
            if ((dry_run)); then
                say "would link $BIN_DIR/$tool -> $VENV/bin/$tool"
            else
                mkdir -p "$BIN_DIR" || die "$EXIT_INSTALL" "cannot create $BIN_DIR"
                ln -s "$VENV/bin/$tool" "$BIN_DIR/$tool" ||
                    die "$EXIT_INSTALL" "cannot create the link $BIN_DIR/$tool"
                say "linked $BIN_DIR/$tool -> $VENV/bin/$tool"
            fi
        fi
    done
    case ":$PATH:" in
        *":$BIN_DIR:"*) ;;
        *) warn "$BIN_DIR is not on your PATH; add it (for example in ~/.profile: export PATH=\"$BIN_DIR:\$PATH\")" ;;
    esac
}

if ((remove)); then
    say "tools: not installing (--remove)"
elif ((no_tool)); then
    say "tools: not installing (--no-tool)"
else
    install_tools
fi

# --- the project ---------------------------------------------------------------------------
if ! git -C "$target" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    warn "$target is not inside a git work tree; run 'git init' there so the files are tracked"
fi
scaffold_args=(${agent_args[@]+"${agent_args[@]}"})
((dry_run)) && scaffold_args+=(--dry-run)
((remove)) && scaffold_args+=(--remove)
if ((dry_run || no_tool)) || ! venv_works; then
    # Plan from the checkout: the scaffold is stdlib-only, -B keeps it from writing bytecode
    # there (a dry run writes nothing anywhere), -P keeps the current directory off sys.path.
    scaffold_python=("env" "PYTHONPATH=$SRC" "$PYTHON" -B -P)
else
    # -I: the installed package, never a moss_files folder in the current directory.
    scaffold_python=("$VENV/bin/python" -I)
    # The git merge driver this clone gets runs the installed moss.
    scaffold_args+=(--moss "$VENV/bin/moss")
fi
say "scaffolding $target"
status=0
"${scaffold_python[@]}" -m moss_files.scaffold ${scaffold_args[@]+"${scaffold_args[@]}"} -- "$target" || status=$?
((status == 0)) || die "$EXIT_SCAFFOLD" "scaffolding $target failed (status $status, reason above); run again once it is fixed"


# --- summary -------------------------------------------------------------------------------
if ((dry_run)); then
    say "dry run: nothing was written. Run again without --dry-run to do the above."
else
    say "done."
    say "  tools:   ${TOOLS[*]} in $BIN_DIR, $tool_status"
    say "  project: $target"
    say "  next:    cd $target && cstack status"
fi
