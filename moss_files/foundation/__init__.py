"""The foundation every package builds on: errors, ids and the clock, settings, workspace discovery,
YAML and markdown documents, files on disk (atomic writes, locks, no links followed), git, text
summaries and the HTTP request guard. Imports only the standard library, the YAML libraries and
GitPython (in gitrepo.py); tests/test_meta.py enforces it.
"""
