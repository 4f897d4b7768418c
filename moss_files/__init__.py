"""moss-files: a file-native, git-tracked workspace toolkit for teams of AI coding agents.

This package's __init__ imports nothing, so `python -m moss_files.scaffold` runs on a bare
python3 (install.sh relies on that before the toolkit's dependencies are installed).
"""

__version__ = "0.1.0"
