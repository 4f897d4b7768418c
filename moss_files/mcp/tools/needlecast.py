"""The `needlecast` tool set: this sleeve's messages (send to the outbox, list and read the
inbox, wait for new mail, list the outbox) as MCP tools. Entry layer: each tool calls the needlecast use case its
`needlecast` command calls and returns the dict that command prints with --json. The sender is
the server's sleeve (the context's `sleeve`, fixed at start-up, else the folder's name): an
agent cannot speak for another.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

import needlecast  # loads nothing until a name is used: the use cases load on the first call
from moss_files.foundation.errors import InvalidRequest
from moss_files.mcp.server import ToolRegistry

# A long poll, bounded: a tool call holds one of the server's worker threads while it waits.
DEFAULT_WAIT_SECONDS = 30.0
MAX_WAIT_SECONDS = 300.0


def register(tools: ToolRegistry) -> None:
    """Declare the message tools."""
    ws = tools.context

    @tools.tool(
        "needlecast.send",
        "Write a message to this sleeve's outbox; the router delivers it to each recipient's inbox exactly once. Returns {ok, message, path}.",
    )
    def send(
        body: Annotated[str, Field(description="The message (markdown).")],
        to: Annotated[list[str] | None, Field(description="Recipients: sleeve names, 'all' or 'envoy' (default with reply_to: its sender).")] = None,
        type: Annotated[str | None, Field(description="task, question, response, milestone, directive, blocked, done, ...")] = None,
        thread: Annotated[str | None, Field(description="Thread name.")] = None,
        reply_to: Annotated[str | None, Field(description="Id of the inbox message this answers.")] = None,
    ) -> dict[str, Any]:
        return needlecast.send(ws, body=body, to=to or (), type_=type, thread=thread, reply_to=reply_to)

    @tools.tool(
        "needlecast.inbox",
        "This sleeve's inbox: {workspace, layout, messages: [{key, source, line, message, read}], problems, unread}.",
        read_only=True,
    )
    def inbox(
        unread: Annotated[bool, Field(description="Only messages not yet marked read.")] = False,
        sender: Annotated[str | None, Field(description="Only messages from this sleeve.")] = None,
        thread: Annotated[str | None, Field(description="Only messages in this thread.")] = None,
    ) -> dict[str, Any]:
        return needlecast.list_inbox(ws, unread=unread, sender=sender, thread=thread)

    @tools.tool(
        "needlecast.read",
        "One inbox message by id, marked read (once, in read.log): {key, source, line, message, read}.",
        idempotent=True,
    )
    def read(id: Annotated[str, Field(description="Message id, as in needlecast.inbox.")]) -> dict[str, Any]:
        return needlecast.read_message(ws, key=id)

    @tools.tool(
        "needlecast.wait",
        "Block until a new message reaches this sleeve's inbox, or the timeout: {messages, timed_out, waited_ms, watch}.",
        read_only=True,
    )
    def wait(
        timeout: Annotated[float, Field(description=f"Seconds, 0 to {MAX_WAIT_SECONDS:g} (default {DEFAULT_WAIT_SECONDS:g}).")] = DEFAULT_WAIT_SECONDS,
        unread: Annotated[bool, Field(description="Answer at once with unread messages already there.")] = False,
    ) -> dict[str, Any]:
        if not 0 <= timeout <= MAX_WAIT_SECONDS:
            raise InvalidRequest(f"timeout must be 0 to {MAX_WAIT_SECONDS:g} seconds", details={"field": "timeout"})
        return needlecast.wait_for_mail(ws, timeout=timeout, unread=unread)

    @tools.tool(
        "needlecast.outbox",
        "Messages waiting in this sleeve's outbox: {workspace, layout, messages, problems, unsettled}.",
        read_only=True,
    )
    def outbox() -> dict[str, Any]:
        return needlecast.list_outbox(ws)
