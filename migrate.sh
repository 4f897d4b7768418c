#!/usr/bin/env bash
# Bring work kept in older systems into a project that uses moss-files: a thin entry that finds
# the installed `moss` and runs `moss migrate …`. The migrations only read their sources; a dry
# run writes nothing; each run writes its report under .moss/migrations/.
set -euo pipefail

readonly EXIT_USAGE=2 EXIT_PREREQ=3
readonly SOURCES=(moss moe loopflow backlog beads cortical needlecast upgrade)

usage() {
    cat <<'EOF'
Usage: ./migrate.sh [--project-dir DIR] SOURCE [OPTIONS]...
       ./migrate.sh --all [--project-dir DIR] [--dry-run] [--json] [--strict]

Runs `moss migrate SOURCE OPTIONS...` in the project (default: the current directory), with
the moss that install.sh installed. Sources:

  moss        Moss capsules: ~/.moss/moss.db (read-only) or --jsonl EXPORT
  moe         Moe's .moe/ folder -> the board (project, epics, tasks and their comments,
              workers, teams, chat, log) (--strict)
  loopflow    LoopFlow's .loop-flow/ (database, JSON, progress.txt) -> insights, sessions,
              tasks (--tasks board|plan), the repository summary, feedback (--strict)
  backlog     Backlog.md's backlog/ (tasks, drafts, archive, milestones) -> board tasks,
              comments and epics (--strict: fail rather than skip or drop anything)
  beads       Beads' .beads/issues.jsonl -> board epics, tasks and comments (--strict)
  cortical    cortical-stack's .cstack/INBOX.md, OUTBOX.md -> needlecast (--move removes them)
  needlecast  switch the mailbox layout: --to v1 | --to v2
  upgrade     this toolkit's own files of older format versions -> the current ones
              (`moss upgrade`: --dry-run, --kind K, --json)

Every source takes --dry-run (print what would be created, changed and skipped; write
nothing), --json and --from PATH; `moss migrate SOURCE --help` lists the rest.

Options of this script:
  --project-dir DIR  the project to migrate into (default: the current directory)
  --all              run every source whose files the project holds (moe, loopflow, backlog,
                     beads, cortical), each on its own; stops at the first that fails.
                     With --strict, moe, loopflow, backlog and beads fail rather than skip
                     or drop anything (cortical moves every message or stops: it has no
                     --strict)
  -h, --help         show this help

Environment:
  MOSS               the moss command to use (default: moss on PATH, then ~/.local/bin/moss,
                     then the moss-files virtualenv install.sh makes)
  MOSS_HOME          where install.sh put that virtualenv
                     (default: ${XDG_DATA_HOME:-$HOME/.local/share}/moss-files)

Exit status:
  0  done (with --dry-run: nothing stood in the way)
  2  usage: no or unknown source, unknown option
  3  moss is not installed (run install.sh first)
  otherwise moss migrate's own status: 3 no such source, 4 a source file that is not its
  format, a workspace file with merge conflicts, or --strict and something the run would
  leave behind, 5 a collision with the workspace's files,
  6 no workspace, or --move refused (see docs/migrate.md)
EOF
}

say() { printf 'migrate.sh: %s\n' "$*" >&2; }
die() {
    local status=$1
    shift
    printf 'migrate.sh: error: %s\n' "$*" >&2
    exit "$status"
}

# --- the moss command ----------------------------------------------------------------------
find_moss() {
    local home=${MOSS_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/moss-files}
    if [[ -n ${MOSS:-} ]]; then
        [[ -x $MOSS ]] || command -v "$MOSS" >/dev/null 2>&1 || die "$EXIT_PREREQ" "MOSS=$MOSS is not an executable"
        printf '%s\n' "$MOSS"
    elif command -v moss >/dev/null 2>&1; then
        command -v moss
    elif [[ -x $HOME/.local/bin/moss ]]; then
        printf '%s\n' "$HOME/.local/bin/moss"
    elif [[ -x $home/venv/bin/moss ]]; then
        printf '%s\n' "$home/venv/bin/moss"
    else
        die "$EXIT_PREREQ" "moss is not installed: run ./install.sh first (or set MOSS to the moss command)"
    fi
}

# --- arguments -----------------------------------------------------------------------------
project_dir=.
run_all=0
args=()
while (($#)); do
    case $1 in
        -h | --help)
            if ((${#args[@]})); then args+=("$1"); else usage; exit 0; fi
            ;;
        --project-dir)
            (($# >= 2)) || die "$EXIT_USAGE" "--project-dir needs a folder"
            project_dir=$2
            shift
            ;;
        --project-dir=*) project_dir=${1#--project-dir=} ;;
        --all) run_all=1 ;;
        *) args+=("$1") ;;
    esac
    shift
done
[[ -d $project_dir ]] || die "$EXIT_USAGE" "project folder '$project_dir' does not exist"

moss_cmd=$(find_moss)

if ((run_all)); then
    strict=0
    common=()
    for arg in ${args[@]+"${args[@]}"}; do
        case $arg in
            --dry-run | --json) common+=("$arg") ;;
            --strict) strict=1 ;;
            *) die "$EXIT_USAGE" "--all takes only --dry-run, --json and --strict, not '$arg'" ;;
        esac
    done
    cd "$project_dir"
    ran=0
    for source in moe loopflow backlog beads cortical; do
        case $source in
            moe) [[ -d .moe ]] || continue ;;
            loopflow) [[ -d .loop-flow || -d .agents/plan ]] || continue ;;
            backlog) [[ -d backlog/tasks || -d .backlog/tasks ]] || continue ;;
            beads) [[ -f .beads/issues.jsonl || -f .beads/beads.jsonl ]] || continue ;;
            cortical) [[ -f .cstack/INBOX.md || -f .cstack/OUTBOX.md ]] || continue ;;
        esac
        say "migrating $source"
        options=(${common[@]+"${common[@]}"})
        if ((strict)) && [[ $source != cortical ]]; then
            options+=(--strict)
        fi
        "$moss_cmd" migrate "$source" ${options[@]+"${options[@]}"}
        ran=$((ran + 1))
    done
    ((ran)) || say "nothing to migrate: no .moe/, .loop-flow/, backlog/, .beads/ or .cstack/INBOX.md here"
    exit 0
fi

((${#args[@]})) || {
    usage >&2
    die "$EXIT_USAGE" "name a source: ${SOURCES[*]}"
}
source_name=${args[0]}
known=0
for candidate in "${SOURCES[@]}"; do
    [[ $candidate == "$source_name" ]] && known=1
done
((known)) || die "$EXIT_USAGE" "unknown source '$source_name': one of ${SOURCES[*]}"

cd "$project_dir"
if [[ $source_name == upgrade ]]; then
    exec "$moss_cmd" "${args[@]}"
fi
exec "$moss_cmd" migrate "${args[@]}"
