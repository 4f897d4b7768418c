"""The local agent runtime (Bosun M0/M1): sessions, runs and events as files, a capability gate, an
MCP client and an LLM loop. Pure modules and edges; the commands are in moss_files/cli/agent.py."""
