"""Contexts: extra arguments of the differentiated function that are not differentiated.

Contract: the operators differentiate `f(x, *contexts)` (or `f(y, x, *contexts)`)
with respect to `x` only. Each extra argument must be wrapped:
- `Constant(c)`: read by `f`, not differentiated (parameters, data). Any value.
- `Cache(buf)`: scratch memory `f` may overwrite; its contents on entry do not
  matter and are not preserved. Backends that differentiate through memory
  (zymo) give it a shadow when active data flows through it; functional
  backends (JAX, autograd) refuse it with `BackendLimitation`.
`signature(v)` describes a value's type and shape; preparations compare
signatures on reuse.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ZymoUsageError


class Context:
    __slots__ = ("value",)

    def __init__(self, value: Any):
        if isinstance(value, Context):
            raise ZymoUsageError(f"{type(self).__name__}({type(value).__name__}(...)): wrap the value once")
        self.value = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


class Constant(Context):
    """An extra argument that `f` reads and that is not differentiated."""


class Cache(Context):
    """Scratch memory `f` writes into; its contents on entry do not matter."""

    def __init__(self, value: Any):
        super().__init__(value)
        if not isinstance(value, (np.ndarray, list)):
            raise ZymoUsageError(f"Cache takes mutable memory (an array or a list of arrays), not "
                                 f"{type(value).__name__}; use Constant for values f only reads")


def check_contexts(contexts: tuple, where: str) -> tuple:
    for k, c in enumerate(contexts):
        if not isinstance(c, Context):
            raise ZymoUsageError(
                f"{where}: extra argument {k} is a {type(c).__name__}; wrap every argument after x "
                f"(and after the tangent or cotangent, if the operator takes one) in Constant(...) or Cache(...)")
    return contexts


def is_scalar(v: Any) -> bool:
    return isinstance(v, (float, int, np.floating, np.integer)) and not isinstance(v, (bool, np.bool_))


def signature(v: Any) -> Any:
    """What a preparation remembers of a value: its type, and its shape and dtype if it is an array."""
    if isinstance(v, np.ndarray):
        return ("array", v.shape, v.dtype.str)
    if is_scalar(v):
        return ("scalar",)
    if isinstance(v, (list, tuple)):
        return (type(v).__name__,) + tuple(signature(o) for o in v)
    return (type(v).__name__,)


def describe(sig: Any) -> str:
    if sig[0] == "array":
        return f"an array of shape {sig[1]} and dtype {np.dtype(sig[2]).name}"
    if sig[0] == "scalar":
        return "a scalar"
    if sig[0] in ("list", "tuple"):
        return f"a {sig[0]} of {len(sig) - 1} items"
    return f"a {sig[0]}"


def context_signature(contexts: tuple) -> tuple:
    return tuple((type(c).__name__, signature(c.value)) for c in contexts)
