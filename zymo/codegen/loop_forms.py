"""The shapes of loops the loop rewrites (`codegen/loop_order.py`, `codegen/interchange.py`)
read in generated programs, and what they need to know of memory.

Contract: `plain(s)`: a `for` over `range` with step 1, simple bounds and only pure calls in
it; `reversed_head(s)`: the index, start and stop of reverse mode's reversed loop; `touched(s)`:
the names a loop subscripts and those it uses otherwise; `invariant(e, assigned)`: an index
expression free of the names a loop assigns; `copy_pair(s)`, `same(a, b)`, `dotted(e)`: small
readers; `remembered()` lets the first two remember their answers while the loops are
rewritten. `Memory` is the protocol of the memory facts (`transform/reverse/facts.MemoryFacts`).
"""
from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from .outline import _loads, _stores

# calls that read their arguments only and write no memory (no keyword arguments allowed)
_PURE_MODULES = ("math", "np", "cmath")
_PURE_NAMES = {"abs", "min", "max", "float", "int", "complex", "bool", "len", "range", "_rt.fdiv", "_rt.nonneg",
               "_rt.span"}
_MUTATING_NP = {"copyto", "put", "place", "putmask", "fill_diagonal"}


class Memory(Protocol):
    """What the program's array names point into (`transform/reverse/facts.MemoryFacts`)."""

    @property
    def ndims(self) -> dict[str, int]:
        """The names that hold arrays (listed or not), with their dimensions."""

    def overlap(self, a: str, b: str) -> bool:
        """Whether `a` and `b` may point into overlapping memory (True for an unlisted one)."""

    def listed(self, name: str) -> bool:
        """Whether `name` is an array whose memory is known."""

    def is_wide(self, name: str) -> bool:
        """Whether `name` holds float64 or complex128 elements."""

    def is_float(self, name: str) -> bool:
        """Whether scalar `name` holds float64 numbers only."""

    def with_array(self, name: str, ndim: int) -> Memory:
        """These facts and a new float64 array `name`, memory of its own."""

    @property
    def counters(self) -> frozenset[str]:
        """The caches' entry counters (`codegen/tape_index.py`)."""

    @property
    def caches(self) -> frozenset[str]:
        """The caches that are arrays: each entry is written once, by a push."""


def touched(s: ast.For) -> tuple[dict[str, list[ast.Subscript]], set[str]]:
    """The names `s` subscripts (with their subscripts) and the names it uses otherwise."""
    elements: dict[str, list[ast.Subscript]] = {}
    bases = set()
    for n in ast.walk(s):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
            elements.setdefault(n.value.id, []).append(n)
            bases.add(id(n.value))
    bare = {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and id(n) not in bases}
    return elements, bare


def copy_pair(s: ast.stmt) -> tuple[str, str] | None:
    """(a, b) of `a = b`, two names."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
            and isinstance(s.value, ast.Name):
        return s.targets[0].id, s.value.id
    return None


def same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def invariant(e: ast.expr, assigned: set[str]) -> bool:
    """An index of names `L` does not assign, constants and arithmetic (no slices, no calls)."""
    return all(isinstance(n, (ast.Name, ast.Constant, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.operator,
                              ast.unaryop, ast.expr_context)) for n in ast.walk(e)) \
        and not (_loads(e) & assigned)


@contextmanager
def remembered() -> Iterator[None]:
    """While it lasts, `plain` and `reversed_head` remember their answer for each loop node.
    For the loop rewrites, whose changes (locals for elements, cache positions, guards, loops
    swapped as new nodes) leave both answers as they were."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


_MEMO: ContextVar[dict[tuple[str, int], tuple[ast.AST, Any]] | None] = ContextVar("_MEMO", default=None)


def _remember(kind: str, s: ast.For, compute: Callable[[ast.For], Any]) -> Any:
    memo = _MEMO.get()
    if memo is None:
        return compute(s)
    got = memo.get((kind, id(s)))
    if got is None or got[0] is not s:
        got = memo[(kind, id(s))] = (s, compute(s))  # the node kept: its id is not reused
    return got[1]


def plain(s: ast.For) -> bool:
    """A `for` over `range` whose arguments are names, constants, arithmetic or `_rt.span`,
    without `else`, whose body has no `break`, `continue`, `return`, `while` or impure call."""
    return _remember("plain", s, _plain)


def _plain(s: ast.For) -> bool:
    it = s.iter
    if s.orelse or not isinstance(s.target, ast.Name) or not (isinstance(it, ast.Call) and dotted(it.func) == "range"
                                                              and not it.keywords and 1 <= len(it.args) <= 3):
        return False
    for n in ast.walk(it):
        if isinstance(n, ast.Call) and n is not it and dotted(n.func) != "_rt.span":
            return False
        if isinstance(n, (ast.Subscript, ast.Attribute)) and dotted(n) != "_rt.span":
            return False
    if len(it.args) == 3 and not (isinstance(it.args[2], ast.Constant) and it.args[2].value == 1):
        return False
    for n in ast.walk(s):
        if isinstance(n, (ast.Break, ast.Continue, ast.Return, ast.While, ast.Yield, ast.Lambda)):
            return False
        if isinstance(n, ast.Call) and not pure(n):
            return False
    return True


def pure(c: ast.Call) -> bool:
    if c.keywords:
        return False
    name = dotted(c.func)
    if name in _PURE_NAMES:
        return True
    mod, _, attr = name.rpartition(".")
    return mod in _PURE_MODULES and attr not in _MUTATING_NP and "." not in mod


def dotted(e: ast.expr) -> str:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        inner = dotted(e.value)
        return f"{inner}.{e.attr}" if inner else ""
    return ""


def reversed_head(s: ast.For) -> tuple[str, ast.expr | None, ast.expr] | None:
    """(i, lo, N) of a reversed loop `for _r in range(N): i = N - 1 - _r` (lo None) or
    `for _r in range(_rt.span(lo, N)): i = N - 1 - _r`, whose counter `_r` is read nowhere
    else and whose `i` and bounds the body does not assign; else None."""
    got = _remember("reversed", s, _reversed_head)
    return None if got is None else (got[0], copy.deepcopy(got[1]), copy.deepcopy(got[2]))


def _reversed_head(s: ast.For) -> tuple[str, ast.expr | None, ast.expr] | None:
    it = s.iter
    assert isinstance(it, ast.Call) and isinstance(s.target, ast.Name)
    if len(it.args) != 1 or not s.body:
        return None
    arg = it.args[0]
    lo: ast.expr | None = None
    stop = arg
    if isinstance(arg, ast.Call) and dotted(arg.func) == "_rt.span" and len(arg.args) == 2 and not arg.keywords:
        lo, stop = arg.args
    first = s.body[0]
    counter = s.target.id
    rev = ast.BinOp(ast.BinOp(stop, ast.Sub(), ast.Constant(1)), ast.Sub(), ast.Name(counter, ast.Load()))
    if not (isinstance(first, ast.Assign) and len(first.targets) == 1 and isinstance(first.targets[0], ast.Name)
            and same(first.value, rev)):
        return None
    var = first.targets[0].id
    rest = ast.Module(s.body[1:], [])
    stored = _stores(rest)
    if counter in _loads(rest) or var in stored or (_loads(stop) | (_loads(lo) if lo is not None else set())) & (
            stored | {var}):
        return None
    return var, copy.deepcopy(lo), copy.deepcopy(stop)
