"""Resolving a path the way the kernel will when a tool opens it. Edge layer (reads links).

The capability gate compares resolved paths only: links are followed (as far as they exist)
and `..` is applied after each link, so `link/../x` means what it means on disk, not what it
looks like. A path that does not exist yet resolves through its existing folders.
"""

from __future__ import annotations

import os


def resolve(text: str, base: str) -> str:
    """`text` (relative to `base`, `~` for the home folder) as an absolute path with every link
    and `..` resolved. Raises ValueError for a text holding a NUL byte."""
    if "\x00" in text:
        raise ValueError("a path cannot hold a NUL byte")
    return os.path.realpath(os.path.join(base, os.path.expanduser(text)))
