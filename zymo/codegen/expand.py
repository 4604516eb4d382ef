"""Sums across a loop's iterations expanded, so that the loop runs in parallel and the sums are
then added in the serial order: the same numbers, to the bit.

Contract: `expanded_loops(kernel, ndims, caches, taken)` returns, for the `for` statements `O` of
an outlined kernel (`codegen/outline.py`) inside no other loop and not in `taken` (the loops
run in parallel otherwise), the arrays `R` whose updates keep `O` serial, where `O` would be
independent (`parallel.independent`) without them. Such an update, a *reduction*, is

    for v in range(...):                 # O, step 1 (a reversed adjoint loop too)
        ...
        [if c:]                          # optionally; `c` unchanged by O
            for w in range(lo, hi):      # I, at O's top level (or the `if`'s), bounds unchanged by O
                <I's index names>        # `i = hi - 1 - w`: one-to-one in `w` (`parallel._index_names`)
                ...
                R[idx] += e              # at I's top level

with `R` a float64 array parameter of the kernel reached nowhere else in `O` (not even read),
`idx` naming an index name of `I` at some place and otherwise only names `O` does not change, and
`O`'s and `I`'s bounds reading only the kernel's parameters. `expand(O, arrays, fresh, threads)`
(on the twin's copy of `O`) returns the statements to allocate before everything else in the twin,
and those replacing `O`:

    _exp_R = np.empty((trips of O, trips of I), np.float64)      # (the allocations)
    for v in numba.prange(...):
        _o = v - lo_O
        ... _exp_R[_o, w - lo] = e ...                            # each `R[idx] += e`
    for _blk in numba.prange(_threads):                           # one block of I's range each
        for v in range(...):                                      # O's order
            _o = v - lo_O
            [if c:]
                for w in <block of range(lo, hi)>:
                    <I's index names>
                    R[idx] += _exp_R[_o, w - lo]

Why the numbers are the same: `R` is touched by nothing but its update, so `R[idx(w)]` ends as
its start plus each `e(v, w)` in `O`'s order, and `e` does not depend on `R`; `idx` is one-to-one
in `w` and the same for every `v`, so each element is added to by one block, in `O`'s order. The
caller runs the twin only where each `R` holds float64 (`e` then rounds as the temporary holds it),
and runs the serial kernel where the allocations raise `MemoryError` (they come first: nothing is
written yet). The cost: a temporary of `O`'s by `I`'s trip count per reduction, with threads only.
The gain: rows_map's adjoint, whose outer loop adds into `dv[j]` (a shadow of a vector shared
by all rows) beside a carried row sum, runs in parallel over the rows. Only where the inner loop
computes a function per iteration (`_costly`): for a multiply-add per term the temporary's
traffic costs more than the second thread gives.
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from .. import pyast
from .outline import _loads, _stores
from .parallel import _index_names, _simple_range, independent


@dataclass
class _Reduction:
    stmt: ast.AugAssign  # `R[idx] += e`
    inner: ast.For
    guard: ast.If | None

    @property
    def array(self) -> str:
        target = self.stmt.target
        assert isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
        return target.value.id


def expanded_loops(kernel: ast.FunctionDef, ndims: dict[str, int], caches: frozenset[str],
                   taken: list[ast.For]) -> list[tuple[ast.For, frozenset[str]]]:
    """The kernel's loops to expand, each with its reduced arrays (module contract)."""
    params = {a.arg for a in kernel.args.args}
    out: list[tuple[ast.For, frozenset[str]]] = []
    for k, s in enumerate(kernel.body):
        if isinstance(s, ast.For) and s not in taken:
            arrays = _expandable(s, ndims, caches, params, [kernel.body[k + 1:]])
            if arrays:
                out.append((s, arrays))
    return out


def expand(outer: ast.For, arrays: frozenset[str], fresh: Callable[[str], str],
           threads: str) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(The allocations, the statements replacing `outer`) (module contract)."""
    reductions = _reductions(outer, lambda name: name in arrays)
    assert reductions and isinstance(outer.target, ast.Name) and isinstance(outer.iter, ast.Call)
    o, o_set = _offset(outer, fresh)
    temps = {r.array: fresh(f"_exp_{r.array}") for r in reductions}
    allocs = [ast.parse(f"{temps[r.array]} = np.empty(({_trips(outer)}, {_trips(r.inner)}), "
                        "np.float64)").body[0] for r in reductions]
    passes = [t for inner in _unique([r.inner for r in reductions]) for t in _reduce_pass(
        outer, [r for r in reductions if r.inner is inner], temps, o, o_set, fresh, threads)]
    for r in reductions:  # the loop stores each term instead of adding it
        slot = ast.parse(f"{temps[r.array]}[{o}, {_offset_of(r.inner)}]", mode="eval").body
        slot.ctx = ast.Store()
        new = ast.Assign(targets=[slot], value=r.stmt.value)
        body = r.inner.body
        body[body.index(r.stmt)] = new
    outer.body = [*o_set, *outer.body]
    outer.iter.func = ast.Attribute(value=ast.Name("numba", ast.Load()), attr="prange", ctx=ast.Load())
    return allocs, [outer, *passes]


def _expandable(outer: ast.For, ndims: dict[str, int], caches: frozenset[str], params: set[str],
                rest: list[list[ast.stmt]]) -> frozenset[str]:
    params = params | {"_rt"}  # bounds of parameters, through `_rt.span`
    if not (_simple_range(outer) and isinstance(outer.target, ast.Name)) or not _bounds(outer) <= params:
        return frozenset()
    names = [n.id for n in pyast.walk(outer) if isinstance(n, ast.Name)]

    def alone(name: str) -> bool:  # an array parameter of the kernel, reached once in the loop
        return name in ndims and name in params and name not in caches and names.count(name) == 1
    nest = _stores(ast.Module(outer.body, [])) | {outer.target.id}
    if _bounds(outer) & nest:
        return frozenset()  # the passes would evaluate the bounds again, after the loop changed them
    reductions = [r for r in _reductions(outer, alone) if _sum_of_rows(r, nest, params) and _costly(r.inner)]
    if not reductions:
        return frozenset()
    arrays = frozenset(r.array for r in reductions)
    trial = pyast.clone(outer)  # the loop as the twin runs it: independent?
    temps = {a: f"_exp_{a}" for a in arrays}
    for r in _reductions(trial, lambda name: name in arrays):
        slot = ast.parse(f"{temps[r.array]}[{trial.target.id}, 0]", mode="eval").body
        slot.ctx = ast.Store()
        r.inner.body[r.inner.body.index(r.stmt)] = ast.Assign(targets=[slot], value=r.stmt.value)
    if not independent(trial, {**ndims, **{t: 2 for t in temps.values()}}, rest, caches):
        return frozenset()
    return arrays


def _sum_of_rows(r: _Reduction, nest: set[str], params: set[str]) -> bool:
    """Whether `r` adds into one element per iteration of its inner loop, the same elements for
    every iteration of the outer loop (module contract); `nest`: the names the outer loop assigns."""
    inner = r.inner
    if not (_simple_range(inner) and isinstance(inner.target, ast.Name)) or not _bounds(inner) <= params \
            or _bounds(inner) & nest:
        return False  # (a parameter the loop assigns: the temporary, sized first, would be too small)
    if r.guard is not None and _loads(r.guard.test) & nest:
        return False
    index = _index_names(inner, nest)
    target = r.stmt.target
    assert isinstance(target, ast.Subscript)
    parts = list(target.slice.elts) if isinstance(target.slice, ast.Tuple) else [target.slice]
    if index is None or not any(isinstance(p, ast.Name) and p.id in index for p in parts):
        return False
    return not any(not (isinstance(p, ast.Name) and p.id in index) and (_loads(p) & nest or any(
        isinstance(x, (ast.Call, ast.Subscript, ast.Slice)) for x in pyast.walk(p))) for p in parts)


def _costly(inner: ast.For) -> bool:
    """Whether the inner loop computes a function (`np.cos`, `math.exp`, ...) per iteration:
    work enough that running it on all threads pays for the temporary's traffic (written once,
    read once). Measured at n=1500 (`benchmarks/parallel.py`, 2 threads): rows_map's adjoint
    kernel (a cosine per element) 35 -> 20 ms expanded; gemver's (a multiply-add per term,
    two sums) 16 -> 30 ms."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
               and n.func.value.id in ("np", "math", "cmath") for n in pyast.walk(inner))


def _reductions(outer: ast.For, accept: Callable[[str], bool]) -> list[_Reduction]:
    """The updates `R[idx] += e` at the top level of the inner loops of `outer` (at its top
    level or in an `if` there without `else`) whose array `accept` takes."""
    out: list[_Reduction] = []
    for s in outer.body:
        guard = s if isinstance(s, ast.If) and not s.orelse else None
        for inner in (guard.body if guard is not None else [s]):
            if not isinstance(inner, ast.For):
                continue
            for t in inner.body:
                if isinstance(t, ast.AugAssign) and isinstance(t.op, ast.Add) and isinstance(t.target, ast.Subscript) \
                        and isinstance(t.target.value, ast.Name) and accept(t.target.value.id):
                    out.append(_Reduction(t, inner, guard))
    return out


def _reduce_pass(outer: ast.For, reductions: list[_Reduction], temps: dict[str, str], o: str,
                 o_set: list[ast.stmt], fresh: Callable[[str], str], threads: str) -> list[ast.stmt]:
    """The blocked loop adding the stored terms of `reductions` (one inner loop's) in `outer`'s order."""
    from .blocks import block

    inner = reductions[0].inner
    assert isinstance(inner.target, ast.Name)
    nest = _stores(ast.Module(outer.body, [])) | {outer.target.id}  # as `_sum_of_rows` found them
    index = _index_names(inner, nest) or {inner.target.id}
    head = []
    for t in inner.body:  # the inner loop's index names, as it assigns them
        if not (isinstance(t, ast.Assign) and isinstance(t.targets[0], ast.Name) and t.targets[0].id in index):
            break
        head.append(pyast.clone(t))
    adds = [ast.AugAssign(target=pyast.clone(r.stmt.target), op=ast.Add(),
                          value=ast.parse(f"{temps[r.array]}[{o}, {_offset_of(inner)}]",
                                          mode="eval").body) for r in reductions]
    new_inner = ast.For(target=pyast.clone(inner.target), iter=pyast.clone(inner.iter), body=[*head, *adds],
                        orelse=[], type_comment=None)
    guard = reductions[0].guard
    body: list[ast.stmt] = [new_inner]
    if guard is not None:
        body = [ast.If(test=pyast.clone(guard.test), body=body, orelse=[])]
    serial = ast.For(target=pyast.clone(outer.target), iter=pyast.clone(outer.iter),
                     body=[*pyast.clone(o_set), *body], orelse=[], type_comment=None)
    return block(serial, fresh, threads)


def _offset(outer: ast.For, fresh: Callable[[str], str]) -> tuple[str, list[ast.stmt]]:
    """The outer loop's iteration number from 0, and the statement setting it (if one)."""
    assert isinstance(outer.target, ast.Name) and isinstance(outer.iter, ast.Call)
    if len(outer.iter.args) < 2:
        return outer.target.id, []
    o = fresh("_o")
    return o, [ast.parse(f"{o} = {outer.target.id} - {ast.unparse(outer.iter.args[0])}").body[0]]


def _offset_of(inner: ast.For) -> str:
    assert isinstance(inner.target, ast.Name) and isinstance(inner.iter, ast.Call)
    args = inner.iter.args
    return inner.target.id if len(args) < 2 else f"({inner.target.id} - {ast.unparse(args[0])})"


def _bounds(loop: ast.For) -> set[str]:
    """The names a loop's `range(...)` arguments read."""
    assert isinstance(loop.iter, ast.Call)
    return set().union(*(_loads(a) for a in loop.iter.args))


def _trips(loop: ast.For) -> str:
    assert isinstance(loop.iter, ast.Call)
    args = loop.iter.args
    return f"_rt.span(0, {ast.unparse(args[0])})" if len(args) < 2 else \
        f"_rt.span({ast.unparse(args[0])}, {ast.unparse(args[1])})"


def _unique(loops: list[ast.For]) -> list[ast.For]:
    out: list[ast.For] = []
    for loop in loops:
        if not any(loop is seen for seen in out):
            out.append(loop)
    return out
