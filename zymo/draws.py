"""NumPy's global generator across the passes of one derivative operator.

Contract: inside `one_call(f, values)` (the operators that run `f` more than once: `gradient(Forward)`,
`jacobian`, `hessian`, `hvp`, their sparse and memory-limited forms), `next_pass()` is called
before each run of `f` or of a program derived from it (`cache.call` calls it for every
program; a direct call of `f` calls it first). Every pass after the first starts where the
first started, so all passes see the draws one call of `f` makes (`np.random.normal(size=...)`
inside `f`: the derivative of that call), and leaving `one_call()` leaves the generator where
that one call leaves it, as `zymo.gradient(Reverse, ...)` (one pass) does. Until a pass draws
(a sparse pattern found from the IR draws nothing), nothing is set. Nested operators share the
outermost one's passes. Only functions whose IR draws get a session (`draws`). Not Numba's own
generator (`numba=True` draws from it: docs/rules.md), nor a `np.random.Generator` (zymo
refuses one as an argument).
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np


class _Sessions(threading.local):
    """The open `one_call()` of this thread (outermost only): each thread's operators their own."""

    def __init__(self) -> None:
        self.open: list[OneDraw] = []


_LOCAL = _Sessions()


class OneDraw:
    """The generator's state before the first pass, and after the first pass that drew (None
    while none has)."""

    def __init__(self) -> None:
        self.start = np.random.get_state()
        self.after: Any = None
        self.passes = 0

    def next(self) -> None:
        if self.passes >= 1 and self.after is None:  # until a pass draws (pattern detection may not)
            after = np.random.get_state()
            self.after = None if _same_state(after, self.start) else after
        if self.after is not None:
            np.random.set_state(self.start)
        self.passes += 1

    def done(self) -> None:
        if self.after is not None:
            np.random.set_state(self.after)


def _same_state(a: Any, b: Any) -> bool:
    return bool(a[0] == b[0] and a[2:] == b[2:] and np.array_equal(a[1], b[1]))


@contextlib.contextmanager
def one_call(f: Any, values: tuple) -> Iterator[None]:
    """The passes inside draw as one call of `f(*values)` does (module contract), where `f`
    draws from NumPy's global generator at all (`draws`): else nothing is done (reading the
    generator's state costs about 30 us)."""
    sessions = _LOCAL.open
    if sessions or f is None or not draws(f, values):  # inside another operator (its passes), or no draw
        yield
        return
    session = OneDraw()
    sessions.append(session)
    try:
        yield
    finally:
        sessions.pop()
        session.done()


def next_pass() -> None:
    """Before a run of `f` or of a program derived from it (module contract)."""
    sessions = _LOCAL.open
    if sessions:
        sessions[0].next()


def draws(f: Any, values: tuple) -> bool:
    """Whether `f`, lowered for `values` (the IR its derivatives are made of, callees inlined),
    may draw: it calls a function of `np.random`, or a user's inactive function or custom rule
    (which may draw: `zymo.inactive`'s docs name random numbers); False where it does not lower
    (the operator then raises its own error)."""
    from .cache import lowered
    from .ir.core import walk

    try:
        lw = lowered(f, values)[0]
    except Exception:
        return False
    if lw.draws is None:
        lw.draws = any(op.kind == "prim" and op.attrs["key"].startswith(("numpy.random.", "inactive.", "custom."))
                       for op in walk(lw.ir.body))
    return lw.draws


def in_one_call(f_and_values: Any) -> Any:
    """A decorator: the operator runs inside `one_call(*f_and_values(*args, **kwargs))`."""
    import functools

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        def operator(*args: Any, **kwargs: Any) -> Any:
            f, values = f_and_values(*args, **kwargs)
            with one_call(f, tuple(getattr(v, "val", v) for v in values)):
                return fn(*args, **kwargs)
        return operator
    return wrap
