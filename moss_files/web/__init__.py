"""The web view of a workspace: pages rendered on the server from the use cases, served by the
`moss serve --http` daemon beside the MCP endpoint, kept live by server-sent events.

`app` is the ASGI application (entry), `watch` the file watcher behind the live updates (edge);
`html` and `markdown` are the pure renderers; `board`, `capsules`, `messages`, `memory`,
`search` and `agents` gather each page through the existing use cases and render it.
"""
