"""Agent host hooks: what `moss hook session-start|pre-compact|stop|user-prompt-submit` tell
Claude Code and Codex at those moments, and how they stay fast and harmless.

`orientation` is the core (what to say), `gather` the edge (the files, git, the per-session
state), `events` the use cases, `run` the entry point `moss hook` runs without typer. The
settings files that call them are written by `moss_files.scaffold`.
"""
