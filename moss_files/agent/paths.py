"""Resolving a path the way the kernel will when a tool opens it. Edge layer (reads links).

The capability gate compares resolved paths only: links are followed (as far as they exist)
and `..` is applied after each link, so `link/../x` means what it means on disk, not what it
looks like. A path that does not exist yet resolves through its existing folders.

A text that starts with a URI scheme (`file:/etc/passwd`, `http://…`) is refused rather than
resolved: taken as a path it would be a harmless folder named `file:` in the workspace, but a
tool that reads it as a URI opens what the URI names. Write `./a:b` for a file whose name
holds a colon.
"""

from __future__ import annotations

import os
import re

URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def resolve(text: str, base: str) -> str:
    """`text` (relative to `base`, `~` for the home folder) as an absolute path with every link
    and `..` resolved. Raises ValueError for a text holding a NUL byte or starting with a URI
    scheme."""
    if "\x00" in text:
        raise ValueError("a path cannot hold a NUL byte")
    scheme = URI_SCHEME.match(text)
    if scheme:
        raise ValueError(f"{text!r} starts with the URI scheme {scheme.group(0)!r}; a path argument takes a path (write ./{text} for a file of that name)")
    return os.path.realpath(os.path.join(base, os.path.expanduser(text)))
