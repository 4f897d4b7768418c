"""needlecast: messages between sleeves, routed exactly once, as markdown files in git.

The public API: other packages (the search index, the MCP server) and needlecast's own CLI use
these names, never the modules.

Use cases take a `moss_files.foundation.context.Context` (the workspace, the sleeve's name, the
clock, `notify` for log lines) and typed keyword arguments, and return the JSON-ready dict that
`needlecast <command> --json` and the `needlecast.*` MCP tool print:

    a sleeve's:  init_workspace(ctx, layout=)    send(ctx, body=, to=, type_=, thread=, reply_to=)
                 send_many(ctx, items, source=)
                 list_inbox(ctx, unread=, sender=, thread=)     read_message(ctx, key=)
                 wait_for_mail(ctx, timeout=, unread=, poll=)
                 list_outbox(ctx)                list_dead_letters(ctx)      retry_dead_letter(ctx, key=)
                 rewrite_mailbox_file(path, transform) -> bool
    the envoy's: list_sleeves(ctx)               route_once(ctx, environ=)
                 watch(ctx, poll=, sweep_seconds=, environ=) -> exit code (runs until stopped)
                 run_sidecar(ctx, host=, port=, token=, ...) -> exit code (runs until stopped)

Readers, parse functions and shapes:

    iter_messages(root) -> (where, Entry)...          message_text(entry) -> str
    inbox_glance(root, newest=) -> {layout, total, unread, keys, newest_unread}
    find_inbox_message(root, key) -> Entry            holds_sleeves(folder) -> bool
    split_blocks(text) -> Mailfile                    parse_block(block, path=) -> Message
    parse_message_document(text, path=) -> Message    message_to_dict(message), entry_to_dict(entry)

Importing this package loads nothing else; each name is imported on first use, so a sleeve's
commands never load the router, the HTTP server or the HTTP client.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

DEFAULT_PORT = 7471  # where `needlecast sidecar` listens unless told otherwise

_EXPORTS = {
    # merges (the git merge driver)
    "merge_mailbox": "needlecast.merge",
    # a sleeve's use cases
    "init_workspace": "needlecast.service",
    "send": "needlecast.service",
    "send_many": "needlecast.service",
    "list_inbox": "needlecast.service",
    "read_message": "needlecast.service",
    "inbox_glance": "needlecast.service",
    "wait_for_mail": "needlecast.service",
    "list_outbox": "needlecast.service",
    "list_dead_letters": "needlecast.service",
    "retry_dead_letter": "needlecast.service",
    # a v1 mailbox file rewritten without losing an agent's append (moss upgrade)
    "rewrite_mailbox_file": "needlecast.mailbox",
    # the envoy's use cases
    "list_sleeves": "needlecast.envoy",
    "route_once": "needlecast.envoy",
    "watch": "needlecast.envoy",
    "run_sidecar": "needlecast.envoy",
    # readers
    "find_inbox_message": "needlecast.service",
    "iter_messages": "needlecast.service",
    "message_text": "needlecast.service",
    "holds_sleeves": "needlecast.sleeves",
    # parse functions and shapes
    "Message": "needlecast.message",
    "split_blocks": "needlecast.message",
    "parse_block": "needlecast.message",
    "parse_message_document": "needlecast.message",
    "message_to_dict": "needlecast.message",
    "Entry": "needlecast.routing",
    "entry_to_dict": "needlecast.routing",
    **dict.fromkeys(("read_mailfile", "with_key", "known_messages", "import_messages", "plan_switch", "apply_switch", "switch_to_dict"), "needlecast.layout"),
}

__all__ = sorted([*_EXPORTS, "DEFAULT_PORT"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'needlecast' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
