"""Compiling generated Python source into a function.

Contract: `compile_source(src, name, extra_globals)` executes the source in a
fresh module namespace holding `np`, `math`, `_rt` (`zymo.runtime`) and the given
globals, registers the text with `linecache` under a `<zymo ...>` filename (so
tracebacks and `inspect.getsource` show the generated lines, and zymo can
differentiate its own output), and returns the named function. `paused_collector()` pauses
Python's cyclic garbage collector while zymo builds and compiles a derivative.
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import linecache
import math
from typing import Any

import numpy as np

from .. import runtime as _rt

_counter = itertools.count()


def compile_source(src: str, name: str | list[str], extra_globals: dict[str, Any] | None = None):
    """The function `name` defined by `src` (or a list of functions for a list of names)."""
    filename = f"<zymo {name} #{next(_counter)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns: dict[str, Any] = {"np": np, "math": math, "_rt": _rt, "__name__": "zymo_generated"}
    if extra_globals:
        ns.update(extra_globals)
    code = compile(src, filename, "exec")
    exec(code, ns)
    fns = [ns[n] for n in ([name] if isinstance(name, str) else name)]
    for fn in fns:
        fn.__zymo_source__ = src
    return fns[0] if isinstance(name, str) else fns


@contextlib.contextmanager
def paused_collector():
    """Pause Python's cyclic garbage collector, if it runs, for the block (a derivative's
    transform or its Numba compile). Both allocate objects by the ten thousand, and every
    full collection then walks each object of the process (NumPy's, Numba's, LLVM's
    wrappers; docs/decisions/0009). The block's garbage is collected at the collector's next run after it resumes.
    Concurrent or nested blocks: the collector resumes when the block that paused it ends."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
