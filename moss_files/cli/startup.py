"""Start-up economies for the command-line entry points. Entry layer.

`defer_inspect` lets a process import `dataclasses` without paying for `inspect`. The
standard library's `dataclasses` imports `inspect` (which loads `ast`, `dis`, `tokenize` and
`linecache`: about 10 ms, a third of a quick command's own start-up) but calls it only to
write a signature into a class that has no docstring, and every dataclass here has one.

The mechanism is Mercurial's "demand import" for one module: a placeholder stands in
`sys.modules` and loads the real module on the first attribute anyone reads from it. The
placeholder carries a real `__spec__` as a plain attribute, so `import inspect` elsewhere
(which reads `__spec__` to see whether the module is still initialising) is answered without
loading; `importlib.util.LazyLoader` cannot do this, because its module loads on any
attribute read, `__spec__` included. Once loaded, the real module takes its place in
`sys.modules` and the placeholder holds copies of all its names, so a module that kept the
placeholder reads the same objects.
"""

from __future__ import annotations

import _thread
import importlib
import importlib.machinery
import sys
import types

DEFERRED = "inspect"


def defer_inspect() -> None:
    """Stand a loading placeholder in for `inspect`, unless something has loaded it already."""
    if DEFERRED in sys.modules:
        return
    spec = importlib.machinery.PathFinder.find_spec(DEFERRED)
    if spec is None:  # an unusual interpreter layout: import it the ordinary way, when asked
        return
    placeholder = types.ModuleType(DEFERRED, "Stands in for the standard library's `inspect` until first use.")
    placeholder.__spec__ = spec

    loading = _thread.allocate_lock()

    def load(name: str) -> object:
        """Import the real module, give the placeholder its names, and read `name` from it."""
        with loading:  # one thread swaps the modules; another asking meanwhile waits for it
            if sys.modules.get(DEFERRED) is placeholder:
                del sys.modules[DEFERRED]
                placeholder.__dict__.update(importlib.import_module(DEFERRED).__dict__)
        return getattr(importlib.import_module(DEFERRED), name)

    placeholder.__getattr__ = load  # type: ignore[method-assign]  # PEP 562: asked only for names it lacks
    sys.modules[DEFERRED] = placeholder
