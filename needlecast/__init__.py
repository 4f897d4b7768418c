"""needlecast: messages between sleeves, routed exactly once, as markdown files in git.

The public API other packages use (the search index, the MCP server):

    send(root, body, to, ...) -> (Message, Path)      list_inbox(root, ...) -> InboxListing
    read_message(root, id) -> Entry                   list_outbox(root) -> OutboxScan
    list_dead_letters(root) -> [DeadLetter]           route_once(root) -> RouteReport
    iter_messages(root) -> (where, Entry)...          message_text(entry) -> str
    message_to_dict(message), entry_to_dict(entry), report_to_dict(report)

Importing this package loads nothing else; each name is imported on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "merge_mailbox": "needlecast.merge",
    "send": "needlecast.service",
    "list_inbox": "needlecast.service",
    "read_message": "needlecast.service",
    "find_inbox_message": "needlecast.service",
    "list_outbox": "needlecast.service",
    "list_dead_letters": "needlecast.service",
    "route_once": "needlecast.service",
    "iter_messages": "needlecast.service",
    "message_text": "needlecast.service",
    "InboxListing": "needlecast.service",
    "Message": "needlecast.message",
    "message_to_dict": "needlecast.message",
    "Entry": "needlecast.routing",
    "entry_to_dict": "needlecast.routing",
    "report_to_dict": "needlecast.router",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'needlecast' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
