"""Loop nests run in parallel by blocks of their inner loop, the outer loop kept in order.

Contract: `blocked_nests(kernel, ndims, caches)` returns the `for` statements `O` of an outlined
kernel (`codegen/outline.py`), inside no other loop, that `parallel.parallel_loops` does not run
in parallel, of the form

    for a in range(...):           # any `for` loop, its order kept (a reversed adjoint loop too)
        P                          # assignments to names, reading no array the nest writes
        [if c:  P']                # optionally, with `c` reading no array the nest writes
            for b in range(lo, hi):
                body

where the inner loop `I` (`for b ...`) is independent in `parallel.py`'s sense with index names
affine in `b` with terms the whole nest leaves unchanged, `lo` and `hi` are unchanged by the
nest, and nothing follows `I` in `O`'s body. `block(O, fresh)` rewrites `O` as

    _n = _rt.span(lo, hi)
    for _blk in numba.prange(_threads):     # `_threads`: the twin's last parameter
        for a in range(...):
            P [if c: P']
                for b in range(lo + _blk * _n // _k, lo + (_blk + 1) * _n // _k):
                    body

Exact to the bit (with non-overlapping arguments, which the caller checks at run time): every
element the nest writes is touched by one value of `b` only (`parallel._disjoint_writes`, with
`b`'s index names one-to-one in `b` for every `a`), so by one block only, which runs the `a`
loop in its order: each element sees its updates in the serial order. `P` and `c` read nothing
another block writes, and what the nest assigns is not read after it. The gain over a serial
nest: mvt's `x2[i] += A[j, i] * y2[j]`, interchanged to walk rows (`codegen/interchange.py`),
keeps its row walks and runs on all threads, with one start and join per call, where a parallel
inner loop would start and join threads once per outer iteration.
"""
from __future__ import annotations

import ast
from collections.abc import Callable

from .. import pyast
from .loop_forms import reversed_head
from .outline import _exposed, _loads, _stores
from .parallel import _disjoint_writes, _index_names, _simple_range, _writes_arrays_whole, written_arrays


def blocked_nests(kernel: ast.FunctionDef, ndims: dict[str, int], caches: frozenset[str],
                  taken: list[ast.For]) -> list[ast.For]:
    """The outer loops of `kernel` to run by blocks (module contract); `taken`: the loops that
    run in parallel already."""
    out: list[ast.For] = []

    def visit(stmts: list[ast.stmt], after: list[list[ast.stmt]]) -> None:
        for k, s in enumerate(stmts):
            rest = [stmts[k + 1:]] + after
            if isinstance(s, ast.For) and s not in taken and _blockable(s, ndims, caches, rest):
                out.append(s)
            elif isinstance(s, ast.If):
                visit(s.body, rest)
                visit(s.orelse, rest)

    visit(kernel.body, [])
    return out


def block(outer: ast.For, fresh: Callable[[str], str], threads: str) -> list[ast.stmt]:
    """The statements running `outer` by blocks of its inner loop (module contract), one block
    per thread (`threads`: the name of their number)."""
    inner = _inner(outer)
    assert inner is not None and isinstance(inner.iter, ast.Call)
    args = inner.iter.args
    lo = ast.unparse(args[0]) if len(args) >= 2 else "0"
    hi = ast.unparse(args[1] if len(args) >= 2 else args[0])
    n, k, b = fresh("_n_blk"), threads, fresh("_blk")
    at = "" if lo == "0" else f"{lo} + "
    nonneg = _nonneg_index(inner)
    inner.iter = ast.parse(f"range({at}{b} * {n} // {k}, {at}({b} + 1) * {n} // {k})", mode="eval").body
    if nonneg is not None:
        _Unsigned(nonneg).visit(inner)
    loop = ast.parse(f"for {b} in numba.prange({k}):\n    pass").body[0]
    assert isinstance(loop, ast.For)
    loop.body = [outer]
    return [*ast.parse(f"{n} = _rt.span({lo}, {hi})").body, loop]


def _nonneg_index(inner: ast.For) -> str | None:
    """The index name of `inner` never negative: its variable over `range(hi)` or `range(c,
    hi)` with a constant `c >= 0`, or the reversed index `i = hi - 1 - _r` over `range(hi)`."""
    assert isinstance(inner.iter, ast.Call) and isinstance(inner.target, ast.Name)
    args = inner.iter.args
    if len(args) >= 2 and not (isinstance(args[0], ast.Constant) and type(args[0].value) is int
                               and args[0].value >= 0):
        return None
    head = reversed_head(inner)
    if head is None:
        return inner.target.id
    return head[0] if head[1] is None else None


class _Unsigned(ast.NodeTransformer):
    """Subscript places that are the index name alone read it as `_rt.nonneg(i)`: Numba then
    indexes without first testing for a negative index, which in a block's range (its start
    computed) it cannot rule out, and LLVM vectorizes the loop again (mvt's blocked nest:
    2.23 -> 0.68 ms on one thread, the serial nest's time)."""

    def __init__(self, name: str):
        self.name = name

    def visit_Subscript(self, n: ast.Subscript) -> ast.Subscript:
        self.generic_visit(n)
        wrap = lambda e: (ast.parse(f"_rt.nonneg({self.name})", mode="eval").body  # noqa: E731
                          if isinstance(e, ast.Name) and e.id == self.name else e)
        if isinstance(n.slice, ast.Tuple):
            n.slice.elts = [wrap(e) for e in n.slice.elts]
        else:
            n.slice = wrap(n.slice)
        return n


def _inner(outer: ast.For) -> ast.For | None:
    """`O`'s inner loop, where `O`'s body has the form of the module contract."""
    got = _parts(outer)
    return got[1] if got is not None else None


def _parts(outer: ast.For) -> tuple[list[ast.expr], ast.For] | None:
    """What `O`'s head reads (`P`'s values, `c`), and its inner loop."""
    body, reads = outer.body, []
    if body and isinstance(body[-1], ast.If) and not body[-1].orelse:
        reads.append(body[-1].test)
        body = body[:-1] + body[-1].body
    if not body or not isinstance(body[-1], ast.For):
        return None
    for s in body[:-1]:
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
            return None
        reads.append(s.value)
    return reads, body[-1]


def _blockable(outer: ast.For, ndims: dict[str, int], caches: frozenset[str], rest: list[list[ast.stmt]]) -> bool:
    if outer.orelse or not isinstance(outer.target, ast.Name) or any(
            isinstance(n, (ast.Break, ast.Continue, ast.Return, ast.While)) for n in pyast.walk(outer)):
        return False
    got = _parts(outer)
    if got is None:
        return False
    reads, inner = got
    if not _simple_range(inner) or not isinstance(inner.target, ast.Name):
        return False
    nest = _stores(ast.Module(outer.body, [])) | {outer.target.id}
    if (_loads(inner.iter) | _loads(outer.iter)) & nest:
        return False  # the bounds change with the outer loop (each block evaluates them again)
    assigned = _stores(ast.Module(inner.body, [])) | {inner.target.id}
    index = _index_names(inner, nest)
    if index is None or _writes_arrays_whole(inner, ndims) or not _disjoint_writes(inner, index, ndims, caches):
        return False
    if set().union(*(_loads(e) for e in reads)) & (written_arrays([inner]) | assigned):
        return False  # the head would read what another block writes or assigns
    carried, _ = _exposed(inner.body, {inner.target.id})
    if carried & assigned:
        return False  # a value carried between the inner loop's iterations
    if _exposed(outer.body, {outer.target.id})[0] & nest:
        return False  # a value carried between the outer loop's iterations (each block would run its own)
    later: set[str] = set()
    seen: set[str] = set()
    for stmts in rest:
        e, seen = _exposed(stmts, seen)
        later |= e
    return not (nest & later)  # nothing the nest assigns is read after it
