"""One error tree for every package, CLI and (later) the MCP server. Core layer: stdlib only.

`code` is API: a stable, machine-readable string that is never renamed once released.
`status` is the HTTP-like status the seeds use in their error bodies, and `exit_code` is
what a CLI exits with. Subclasses inherit status and exit code; where one class covers
several situations, the instance carries the finer code (for example every frontmatter
problem is an `InvalidDocument`, with codes such as FRONTMATTER_UNCLOSED).

    class               default code        status  exit
    MossError           INTERNAL            500     1
    InvalidRequest      INVALID_REQUEST     400     2   bad arguments (usage)
    NotFound            NOT_FOUND           404     3
    InvalidDocument     INVALID_DOCUMENT    422     4   a file's content is at fault
    Conflict            CONFLICT            409     5   exists, stale write, lock held
    RepoError           REPO_ERROR          500     6   workspace or git problem
    CacheError          CACHE_ERROR         500     7   derived index unusable
    WatchError          WATCH_ERROR         500     8   file watching failed
    AgentFailure        RUN_FAILED          502     9   an agent run, model, MCP server or tool failed
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

# Every code any package may raise, with its class's status and exit code. docs/errors.md's
# table and tests/test_meta.py are checked against this mapping, so adding a code here is
# how a code becomes part of the API.
ERROR_CODES: dict[str, str] = {
    "INTERNAL": "unexpected failure; a bug",
    "INVALID_REQUEST": "arguments are missing, malformed or contradictory",
    "INVALID_REVISION": "a git revision is not one commit: an option, a path inside a commit (rev:path), a range, or control characters",
    "CONFIRMATION_REQUIRED": "a command that deletes for good was run without a terminal to confirm at and without --yes; nothing was deleted",
    "AMBIGUOUS_ADDRESSING": "an item was addressed in two ways, or a reference matched several items",
    "NOT_FOUND": "no such item, file or workspace",
    "WORKSPACE_NOT_FOUND": "no workspace above the current directory",
    "PROJECT_NOT_FOUND": "--project names no folder and no project of the registry (moss projects list)",
    "INVALID_DOCUMENT": "a file's content cannot be used",
    "INVALID_ENCODING": "a file is not valid UTF-8",
    "BINARY_FILE": "a file holds NUL bytes, so it is not a text document",
    "FILE_TOO_LARGE": "a file exceeds the size limit for its kind",
    "EMPTY_FILE": "a file that must hold a document (a capsule) is empty: 0 bytes, or blank lines only",
    "FRONTMATTER_UNCLOSED": "an opening '---' fence has no closing fence",
    "FRONTMATTER_SYNTAX": "the frontmatter is not valid YAML (tabs used as indentation included)",
    "FRONTMATTER_NOT_MAPPING": "the frontmatter is YAML but not a mapping of keys to values",
    "FRONTMATTER_DUPLICATE_KEY": "a key appears twice in the same mapping",
    "FRONTMATTER_ALIAS": "the frontmatter uses YAML anchors or aliases, which are refused",
    "FRONTMATTER_TAG": "the frontmatter uses an explicit YAML tag other than the core ones",
    "FRONTMATTER_TOO_DEEP": "the frontmatter nests deeper than allowed",
    "JSON_DUPLICATE_KEY": "a key appears twice in the same JSON object (a migration source, a sharing bundle), with its line",
    "JSON_TOO_DEEP": "a JSON file or line nests deeper than the parser can follow",
    "TOML_TOO_DEEP": "a TOML file nests arrays or inline tables deeper than the parser can follow",
    "SCHEMA_ERROR": "a field has the wrong type or a value outside its allowed set",
    "SETTINGS_INVALID": "an agent's settings file (.claude/settings.json, .mcp.json, .codex/config.toml) is not valid JSON or TOML, or not in the shape its agent reads; nothing was written to it",
    "PARSE_ERROR": "an import line is not a JSON object (per-line import error)",
    "INVALID_RECORD": "an import line is JSON but not a valid capsule record (per-line import error)",
    "ID_COLLISION": "an import line's capsule id is taken, in the workspace or by an earlier line (per-line import error, mode 'error')",
    "NAME_COLLISION": "an import line's capsule name is taken by a live capsule of its workspace (per-line import error, mode 'error')",
    "AMBIGUOUS_COLLISION": "an import line's id matches one capsule and its name another (per-line import error, mode 'replace')",
    "MERGE_CONFLICT": "a file holds git conflict markers from an unfinished merge; it is neither read nor written until resolved",
    "SYMLINK_REFUSED": "a file or folder inside the toolkit's folders is a symbolic link, which is never followed",
    "NOT_REGULAR_FILE": "a folder, FIFO, socket or device stands where a file is read; it is never read (a FIFO would block)",
    "FORMAT_TOO_NEW": "a file (or a log line) is in a newer format than this moss-files knows, written by a newer one; it is neither read nor written: upgrade moss-files",
    "SOURCE_INVALID": "a migration source file is not what its system writes (file and line, or JSON path); nothing of that source was written",
    "MIGRATION_WOULD_DROP": "with --strict: the migration would skip an item or drop a field (details list each); nothing was written",
    "CONFLICT": "the operation collides with the current state",
    "STALE_WRITE": "the file changed since it was read; nothing was written",
    "LOCK_TIMEOUT": "another writer held the file's lock for too long",
    "ALREADY_EXISTS": "the item to create exists already",
    "NAME_ALREADY_EXISTS": "a live item with that name exists already",
    "CAPSULE_TOO_LARGE": "a capsule's text exceeds capsule_max_chars (status 413)",
    "CAPSULE_TOO_THIN": "a capsule lacks required sections (status 422)",
    "COMPOSE_TOO_LARGE": "a composed bundle exceeds capsule_max_chars (status 413)",
    "DEPENDENCY_CYCLE": "task dependencies form a cycle",
    "INVALID_TRANSITION": "the item's current state does not allow that change",
    "OPEN_SUBTASKS": "a PLAN.md task cannot be done or closed while subtasks under it are open (details.open_subtasks)",
    "CURRENT_UNEDITABLE": "CURRENT.md names the task in a shape a transition cannot update line by line (several lines of hand-written text); nothing was written",
    "RAIL_VIOLATION": "a board plan uses a forbidden pattern or lacks a required one (status 422; details.violations)",
    "PLAN_TOO_LARGE": "a board plan is past the size gate's limits (settings.task_sizing); the task is to be split (status 422)",
    "NOT_ALLOWED": "the caller may not do this: another worker holds the task, only a human may, or the worker has not read the task's context (status 403)",
    "WORKER_CONFLICT": "another worker already works that status in that epic (solo-worker rule; replaceExisting takes over)",
    "TEAM_FULL": "the team has its maximum number of members",
    "LEASE_EXPIRED": "the worker's lease ran out (or it deregistered) and its task was released; it claims again",
    "QUESTION_PENDING": "the task waits for a human's answer to an agent's question",
    "AMENDMENT_PENDING": "a plan step has an amendment waiting for a human's approval",
    "VERIFICATION_FAILED": "the evidence does not show the work done: a failed command or test, a definition-of-done item not shown (status 422)",
    "RAIL_NOT_FOUND": "an approved rail proposal modifies or removes a rail that is not there",
    "BRANCH_POLICY_FAILED": "complete_task on a branch the project's consolidation_branch does not allow (status 422)",
    "REPO_ERROR": "a workspace or git operation failed",
    "MOVE_REFUSED": "a migration would remove or empty files git could not bring back (untracked or changed); nothing was removed",
    "NOT_WRITABLE": "a project file or folder cannot be written (permissions, read-only or full file system)",
    "NOT_READABLE": "a file or folder cannot be read: the operating system denies this user permission (status 403)",
    "CACHE_ERROR": "the derived index is missing or unusable; rebuild it",
    "WATCH_ERROR": "watching files for changes failed",
    "MESSAGE_INVALID": "a needlecast message block or file cannot be read as a message",
    "MESSAGE_TOO_LARGE": "a needlecast message is over the 1 MiB a message may hold (status 413; dead-lettered by the router)",
    "INBOX_FULL": "delivering would grow a v1 inbox file past the 64 MiB a mailbox file may hold; the messages wait (status 507)",
    "UNKNOWN_RECIPIENT": "a message names a recipient that no sleeve answers to",
    "DUPLICATE_MESSAGE_ID": "a sender reused a message id for different content",
    "SLEEVE_UNAVAILABLE": "a registered sleeve's workspace or sidecar cannot be reached",
    "REGISTRY_INVALID": "the sleeve registry file cannot be read",
    "OUTSIDE_ROOT": "a local sleeve's workspace resolves to a folder outside the envoy root; nothing is delivered there",
    "NOT_ENVOY_ROOT": "an envoy command (route, sleeves, a routing sidecar) ran in a sleeve of an envoy root above; the sleeve's messages wait for the envoy's router",
    "ALREADY_RUNNING": "another instance of the daemon holds this workspace",
    "TOKEN_REQUIRED": "serving on a non-loopback address needs a bearer token",
    "UNAUTHORIZED": "the request lacks the bearer token the server requires",
    "PEER_MISMATCH": "a peer's request is signed with the token of another peer",
    "REQUEST_EXPIRED": "a peer's signed request is dated outside the accepted time window",
    "REPLAYED_REQUEST": "a peer's signed request was already received (its nonce was used)",
    "PEER_NOT_ALLOWED": "a peer asked for an endpoint that peers may not use",
    "PEER_TOKEN_MISSING": "no token was found for a configured peer, or a token file is unreadable or empty",
    "TOKEN_ON_COMMAND_LINE": "a token was given on the command line, where other users can read it",
    "GIT_SYNC_FAILED": "a git pull, merge or push of the sidecar's git sync failed",
    "HOST_NOT_ALLOWED": "an HTTP request names a host this loopback server does not answer for (status 421; DNS rebinding)",
    "ORIGIN_NOT_ALLOWED": "an HTTP request comes from a web page of another origin (status 403)",
    "UNSUPPORTED_MEDIA_TYPE": "an HTTP POST does not declare Content-Type: application/json (status 415)",
    "SERVER_BUSY": "every worker of the HTTP server is busy, or it holds as many connections as it can; retry after the Retry-After seconds (status 503)",
    "REQUEST_TIMEOUT": "an HTTP request did not arrive in time: its head within 10 s, or its body without a pause of 2 s (status 408)",
    "TOO_MANY_ATTEMPTS": "this client gave a wrong token too often; it may try again after the Retry-After seconds (status 429)",
    "CSRF_TOKEN_INVALID": "a form posted to the web view lacks the CSRF token of the page it came from, or carries a stale one (status 403)",
    # The agent runtime (`moss agent`, and the gate in front of `moss serve`).
    "CAPABILITY_DENIED": "the capability policy denies this tool call (status 403; details.decisions names the rule)",
    "SESSION_BUSY": "another run holds this agent session; a session's runs are serial (status 409; --wait queues)",
    "EVENT_LINE_INVALID": "a line of an agent event log is not a complete event (a torn write); it is reported and skipped",
    "API_KEY_MISSING": "the model API key is not in the environment variable that llm.api_key_env names",
    "RUN_FAILED": "an agent run failed; the session's log keeps it as run.failed and the session stays usable (exit 9)",
    "MODEL_ERROR": "the model API refused the request, or kept failing after the retries (status 502, exit 9)",
    "STEP_LIMIT": "a run needed more model-tool steps than llm.max_steps allows (exit 9)",
    "RUN_CANCELLED": "the run was cancelled (Ctrl-C); the session stays usable (exit 9)",
    "RUN_INTERRUPTED": "a run's process ended before the run did; the session's next run records it",
    "TOOL_TIMEOUT": "an MCP tool did not answer within its timeout (status 504, exit 9)",
    "TOOL_FAILED": "an MCP tool answered with an error, or its server with a protocol error (status 502, exit 9)",
    "SERVER_UNAVAILABLE": "an MCP server could not be started or reached, or stopped answering (status 503, exit 9)",
    "TASK_UNFINISHED": "a role run (moss agent run --role) ended twice with its task still in the role's column; the task was released for another agent (exit 9)",
}


class MossError(Exception):
    """Base of every error this toolkit raises on purpose."""

    code: ClassVar[str] = "INTERNAL"
    status: ClassVar[int] = 500
    exit_code: ClassVar[int] = 1

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        path: Path | str | None = None,
        line: int | None = None,
        hint: str | None = None,
        details: dict[str, Any] | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            if code not in ERROR_CODES:
                raise ValueError(f"unregistered error code {code!r}")
            # A per-instance code shadows the class default without touching the class.
            self.code = code  # type: ignore[misc]
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.hint = hint
        self.details = dict(details or {})
        if status is not None:
            # Some seed codes carry their own status (CAPSULE_TOO_LARGE is 413 within a 4xx class).
            self.status = status  # type: ignore[misc]

    def __str__(self) -> str:
        where = ""
        if self.path:
            where = f"{self.path}:{self.line}: " if self.line else f"{self.path}: "
        return f"{where}{self.message}"


class InvalidRequest(MossError):
    code = "INVALID_REQUEST"
    status = 400
    exit_code = 2


class NotFound(MossError):
    code = "NOT_FOUND"
    status = 404
    exit_code = 3


class InvalidDocument(MossError):
    code = "INVALID_DOCUMENT"
    status = 422
    exit_code = 4


class Conflict(MossError):
    code = "CONFLICT"
    status = 409
    exit_code = 5


class RepoError(MossError):
    code = "REPO_ERROR"
    status = 500
    exit_code = 6


class CacheError(MossError):
    code = "CACHE_ERROR"
    status = 500
    exit_code = 7


class AgentFailure(MossError):
    """A run, a model call, an MCP server or a tool call failed (exit 9). The code says how:
    RUN_FAILED, MODEL_ERROR, STEP_LIMIT, RUN_CANCELLED, TOOL_TIMEOUT, TOOL_FAILED, SERVER_UNAVAILABLE."""

    code = "RUN_FAILED"
    status = 502
    exit_code = 9


class WatchError(MossError):
    code = "WATCH_ERROR"
    status = 500
    exit_code = 8


def error_body(err: MossError) -> dict[str, Any]:
    """The one JSON error shape shared by every CLI's --json output and the MCP server.

    The inner object is the seeds' `{"code", "message", "status", "details"}`, extended
    with where the fault lies (`path`, `line`) and what to do about it (`hint`) when known.
    """
    inner: dict[str, Any] = {
        "code": err.code,
        "message": err.message,
        "status": err.status,
        "details": err.details,
    }
    if err.path is not None:
        inner["path"] = err.path
    if err.line is not None:
        inner["line"] = err.line
    if err.hint is not None:
        inner["hint"] = err.hint
    return {"ok": False, "error": inner}


def describe(err: MossError) -> str:
    """What a person reads on stderr: `error[CODE] path:line: message`, then each detail on
    its own line (`missing: Objective, Next steps`), then the hint."""
    lines = [f"error[{err.code}] {err}"]
    lines += [f"  {key}: {_detail_text(value)}" for key, value in err.details.items()]
    if err.hint:
        lines.append(f"  hint: {err.hint}")
    return "\n".join(lines)


def _detail_text(value: Any) -> str:
    """One detail for people: lists joined by commas, mappings as `key=value`, a list of
    mappings (RAIL_VIOLATION's violations) one item after another separated by '; '."""
    if isinstance(value, dict):
        return " ".join(f"{key}={_detail_text(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        separator = "; " if any(isinstance(item, dict) for item in value) else ", "
        return separator.join(_detail_text(item) for item in value) or "(none)"
    return str(value)
