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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from .. import pyast
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
    for n in pyast.walk(s):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
            elements.setdefault(n.value.id, []).append(n)
            bases.add(id(n.value))
    bare = {n.id for n in pyast.walk(s) if isinstance(n, ast.Name) and id(n) not in bases}
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
                              ast.unaryop, ast.expr_context)) for n in pyast.walk(e)) \
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
    for n in pyast.walk(it):
        if isinstance(n, ast.Call) and n is not it and dotted(n.func) != "_rt.span":
            return False
        if isinstance(n, (ast.Subscript, ast.Attribute)) and dotted(n) != "_rt.span":
            return False
    if len(it.args) == 3 and not (isinstance(it.args[2], ast.Constant) and it.args[2].value == 1):
        return False
    for n in pyast.walk(s):
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
    return None if got is None else (got[0], pyast.clone(got[1]), pyast.clone(got[2]))


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
    return var, pyast.clone(lo), pyast.clone(stop)


# names the IR's analysis proved never negative (`analysis.bounds.index_names`), set by the
# pipeline while the loop rewrites and the outliner run (`never_negative`)
NONNEG: ContextVar[frozenset[str]] = ContextVar("NONNEG", default=frozenset())


@contextmanager
def nonneg_names(names: frozenset[str]) -> Iterator[None]:
    token = NONNEG.set(frozenset(names))
    try:
        yield
    finally:
        NONNEG.reset(token)


def never_negative(loop: ast.For, e: ast.expr) -> bool:
    """Whether index expression `e`, in the body of `loop`, is never negative there, so that it
    names the element it counts to, without wrapping round to the end: the rewrites that tell
    iterations apart by one index (one element per value) rely on it, as `a[-1]` is `a[n - 1]`.
    Proved for a name in `NONNEG`; `loop`'s own index over a range from a constant >= 0 (or
    from a name proved so), or a reversed loop's `i = N - 1 - _r` over `range(N)` or
    `range(_rt.span(lo, N))` with such an `lo`; a name assigned once in `loop`, at the top of its
    body, to such an expression; and sums of those, or one minus a constant no larger than its
    lower bound (`i - 1` over `range(1, n)`)."""
    low = _lower(loop, e, 0)
    return low is not None and low >= 0


def _lower(loop: ast.For, e: ast.expr, depth: int) -> int | None:
    """A lower bound of `e` (see `never_negative`), or None."""
    if depth > 8:
        return None
    if isinstance(e, ast.Constant) and type(e.value) is int:
        return e.value
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        a, b = _lower(loop, e.left, depth + 1), _lower(loop, e.right, depth + 1)
        return None if a is None or b is None else a + b
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and isinstance(e.right, ast.Constant) \
            and type(e.right.value) is int:
        a = _lower(loop, e.left, depth + 1)
        return None if a is None else a - e.right.value
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and isinstance(e.right, ast.Name) \
            and isinstance(loop.target, ast.Name) and e.right.id == loop.target.id:
        return _below_stop(loop, e.left)
    if not isinstance(e, ast.Name):
        return None
    if e.id in NONNEG.get():
        return 0
    if not (isinstance(loop.target, ast.Name) and isinstance(loop.iter, ast.Call) and dotted(loop.iter.func) == "range"
            and not loop.iter.keywords and 1 <= len(loop.iter.args) <= 2):
        return None
    stores = [n for n in pyast.walk(loop)
              if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and n.id == e.id]
    head = reversed_head(loop) if plain(loop) else None
    if head is not None and head[0] == e.id:
        return 0 if head[1] is None else _start(head[1])
    if e.id == loop.target.id:
        if len(stores) != 1:
            return None
        return 0 if len(loop.iter.args) == 1 else _start(loop.iter.args[0])
    if len(stores) != 1:
        return None
    for s in loop.body:  # assigned once, at the top of the body, before anything else runs
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
            return None
        if s.targets[0].id == e.id:
            return _lower(loop, s.value, depth + 1)
    return None


def _below_stop(loop: ast.For, left: ast.expr) -> int | None:
    """A lower bound of `left - v`, `v` the index of `loop` over `range(..., N)` (so `v <= N - 1`,
    its only store the loop's): 1 for `left` = `N`, `1 - c` for `N - c`."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and dotted(it.func) == "range" and 1 <= len(it.args) <= 2 and not it.keywords):
        return None
    stop = it.args[-1]
    if isinstance(stop, ast.Call) and dotted(stop.func) == "_rt.span" and len(stop.args) == 2:
        return None  # `span(lo, N)` counts from 0: `v <= N - lo - 1`
    assert isinstance(loop.target, ast.Name)
    if sum(1 for n in pyast.walk(loop) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
           and n.id == loop.target.id) != 1:
        return None
    if same(left, stop):
        return 1
    if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Sub) and same(left.left, stop) \
            and isinstance(left.right, ast.Constant) and type(left.right.value) is int:
        return 1 - left.right.value
    return None


def _start(e: ast.expr) -> int | None:
    """A loop's first value as a lower bound: an int constant, or a name proved never negative."""
    if isinstance(e, ast.Constant) and type(e.value) is int:
        return e.value
    return 0 if isinstance(e, ast.Name) and e.id in NONNEG.get() else None
