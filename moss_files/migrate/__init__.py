"""Migrations: bring work kept in the systems this toolkit replaces into its own files.

One reader per source format (`moss`, `moe`, `loopflow`, `backlog`, `beads`, `cortical`), each
pure; `model` holds the plan every source shares (what is created, changed and skipped, and
why) and the report; `sources` reads the sources without changing them, `targets` reads and
writes the workspace; `service` holds the use cases behind `moss migrate`.
"""
