"""Unroll-and-jam: a loop of independent iterations runs `k` of them at once, their inner loops
fused, so that `k` chains of an inner loop's carried arithmetic overlap.

Contract: `jammed(s, memory, rest, fresh, copies)` returns the statements replacing the loop
`s`, or None. `s` is a plain forward loop (`for v in range(N)` or `range(lo, N)`, its bounds
names, constants, arithmetic and `_rt.span`, none of them assigned by its body) whose
iterations are independent (`parallel.independent`: they write disjoint elements, carry no
name, and nothing they assign is read after the loop) and each array it writes overlaps no
other array it reaches (`memory`). The replacement:

    for v in range(lo, N - (k - 1), k):         # k iterations at once
        v_1 = v + 1 ...                          # each copy's index
        <the body of iteration v, then of v + 1, ...; its inner loops fused>
    for v in range(lo + _rt.span(lo, N) // k * k, N):
        <the body>                               # the last span % k iterations, as before

Each copy renames every name the body assigns (`fresh`; recorded in `copies`, new name -> old
one: the copy holds in iteration `v + c` what the old name holds in `v`, so every fact about the
old name holds for it), except the index names of the fused loops. A statement of the body is
*fused* when it is an inner `for` whose bounds read no name the body assigns (so the same range
in every copy): one loop runs every copy's body in turn per inner iteration (its
reversed-index assignment once); or an `if` whose test reads no such name: one `if` holds
every copy's branches, fused in turn. Every other statement runs once per copy, in the copies'
order.

Why the numbers are the same, to the bit: the iterations touch disjoint elements of every
array one of them writes and pass no value to each other, so the order in which their
operations interleave changes no operation's operands; each copy keeps its own statements in
their order, inner iterations included, and its own names. What helps: the copies' chains are
independent, so the CPU overlaps their latencies (a strict-order sum `acc = acc + A[i, j] *
y[j]` over `j` waits 4 cycles per term; four rows at once wait once for all four). Only done
where an inner loop carries a chain (`_chained`: a name or an element it writes read in a
later iteration), and for bodies of at most `_LARGE` statements (code size: compile time), or
`_WHOLE` in a program Numba compiles whole (`whole`: `numba=True`, whose first call the
"kernels" backend's stands in for).

Parallel twins (`codegen/outline.py`) analyse the loop whole again (`unjammed`); where it runs
in parallel there, its groups of `k` iterations are split between threads (`parallel_groups`).
"""
from __future__ import annotations

import ast
from collections.abc import Callable

from .. import pyast
from .loop_forms import Memory, dotted, plain, reversed_head, touched
from .outline import _exposed, _loads, _stores
from .parallel import independent, written_arrays

_SMALL = 12  # statements of a body run four at a time
_LARGE = 20  # two at a time; larger bodies are left alone (compile time: adi, decision 0022)
_WHOLE = 40  # four at a time in whole programs (`numba=True`): adi's sweeps, 525 -> 372 us (decision 0028)


def jammed(s: ast.For, memory: Memory, rest: list[list[ast.stmt]], fresh: Callable[[str], str],
           copies: dict[str, str], whole: bool = False) -> list[ast.stmt] | None:
    """The statements replacing `s`, or None (module contract). `whole`: the loop is part of a
    program Numba compiles whole (`numba=True`), whose first call is no target of its own
    (the "kernels" backend's is): bodies of up to `_WHOLE` statements run four at a time."""
    span = _forward_range(s)
    if span is None or not plain(s):
        return None
    var, lo, stop = span
    body = s.body
    assigned = _stores(ast.Module(body, []))
    if (_loads(stop) | (_loads(lo) if lo is not None else set())) & (assigned | {var}):
        return None
    size = sum(isinstance(n, ast.stmt) for t in body for n in pyast.walk(t))
    k = 4 if size <= (_WHOLE if whole else _SMALL) else 2 if size <= _LARGE else 0
    if not k:
        return None
    blocked = assigned | {var}
    fused = _fused_loops(body, blocked)
    if not any(_chained(f) and not any(isinstance(n, ast.For) for t in f.body for n in pyast.walk(t)) for f in fused):
        return None  # no innermost loop with a chain (a jammed inner loop is no innermost one; a nest
        # may still hold one beside another chain: both jammed, their size counted after the inner jam)
    if not independent(s, memory.ndims, rest, memory.caches):  # the costliest test after the cheap ones
        return None
    elements, bare = touched(s)
    others = set(elements) | {b for b in bare if memory.listed(b)}
    if any(memory.overlap(w, o) for w in written_arrays([s]) for o in others if o != w):
        return None
    shared = set()
    for f in fused:
        shared |= _loop_names(f)
    if any(_assigned_elsewhere(body, name, fused) for name in shared):
        return None
    renamed = [body]
    heads: list[ast.stmt] = []
    for c in range(1, k):
        names = {n: fresh(f"{n}_j{c}") for n in sorted(assigned - shared | {var})}
        copies.update({new: old for old, new in names.items()})
        renamed.append(_Rename(names).visit_all(pyast.clone(body)))
        heads.append(ast.Assign([ast.Name(names[var], ast.Store())],
                                ast.BinOp(ast.Name(var, ast.Load()), ast.Add(), ast.Constant(c)), lineno=0))
    first = lo if lo is not None else ast.Constant(0)
    jam = ast.For(target=ast.Name(var, ast.Store()),
                  iter=_range([pyast.clone(first), ast.BinOp(pyast.clone(stop), ast.Sub(), ast.Constant(k - 1)),
                               ast.Constant(k)]),
                  body=[*heads, *_fuse(renamed, blocked)], orelse=[], type_comment=None)
    tail = ast.For(target=ast.Name(var, ast.Store()), iter=_tail_range(lo, stop, k), body=pyast.clone(body),
                   orelse=[], type_comment=None)
    return [ast.fix_missing_locations(ast.copy_location(t, s)) for t in (jam, tail)]


def unjammed(stmts: list[ast.stmt], pairs: dict[int, tuple[ast.For, ast.For]] | None = None) -> list[ast.stmt]:
    """`stmts` with each pair of loops `jammed` wrote back as the one loop they replaced (in
    nested lists too, in place), for the parallel twins' analysis; `pairs`, if given, receives
    for each such loop (by id) the pair it replaced (`parallel_groups`)."""
    out: list[ast.stmt] = []
    k = 0
    while k < len(stmts):
        s = stmts[k]
        nxt = stmts[k + 1] if k + 1 < len(stmts) else None
        whole = _whole(s, nxt)
        if whole is not None:
            if pairs is not None:
                assert isinstance(s, ast.For) and isinstance(nxt, ast.For)
                pairs[id(whole)] = (s, nxt)
            s = whole
            k += 1
        for field in ("body", "orelse"):
            inner = getattr(s, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                setattr(s, field, unjammed(inner, pairs))
        out.append(s)
        k += 1
    return out


def parallel_groups(stmts: list[ast.stmt], pairs: dict[int, tuple[ast.For, ast.For]],
                    fresh: Callable[[str], str]) -> list[ast.stmt]:
    """`stmts` (in nested lists too, in place) with each loop of `pairs`, one a parallel twin
    runs as `prange` (`parallel.independent` found its iterations write disjoint memory), as
    its jammed pair again, the groups of `k` iterations split between threads:

        for _grp in numba.prange(_rt.span(lo, N) // k):
            v = lo + _grp * k
            <the jammed loop's body>
        <the tail loop>

    The groups are sets of the loop's iterations, disjoint: run in any order or at once, they
    compute what the jammed loop computes."""
    out: list[ast.stmt] = []
    for s in stmts:
        pair = pairs.get(id(s))
        if pair is not None:
            jam, tail = pair
            it = jam.iter
            assert isinstance(it, ast.Call) and isinstance(jam.target, ast.Name)
            first, last, step = it.args
            assert isinstance(last, ast.BinOp) and isinstance(step, ast.Constant)
            k = step.value
            g = fresh("_grp")
            groups = ast.BinOp(ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), "span", ast.Load()),
                                        [pyast.clone(first), pyast.clone(last.left)], []),
                               ast.FloorDiv(), ast.Constant(k))
            start = ast.Assign([ast.Name(jam.target.id, ast.Store())],
                               ast.BinOp(pyast.clone(first), ast.Add(),
                                         ast.BinOp(ast.Name(g, ast.Load()), ast.Mult(), ast.Constant(k))), lineno=0)
            loop = ast.For(target=ast.Name(g, ast.Store()),
                           iter=ast.Call(ast.Attribute(ast.Name("numba", ast.Load()), "prange", ast.Load()), [groups],
                                         []),
                           body=[start, *jam.body], orelse=[], type_comment=None)
            out += [ast.fix_missing_locations(ast.copy_location(loop, s)), tail]
            continue
        for field in ("body", "orelse"):
            inner = getattr(s, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                setattr(s, field, parallel_groups(inner, pairs, fresh))
        out.append(s)
    return out


def _whole(s: ast.stmt, nxt: ast.stmt | None) -> ast.For | None:
    """The loop that the jammed loop `s` and its tail `nxt` replaced, or None."""
    if not (isinstance(s, ast.For) and isinstance(nxt, ast.For) and isinstance(s.target, ast.Name)
            and isinstance(nxt.target, ast.Name) and s.target.id == nxt.target.id):
        return None
    it = s.iter
    if not (isinstance(it, ast.Call) and dotted(it.func) == "range" and len(it.args) == 3
            and isinstance(it.args[2], ast.Constant) and it.args[2].value in (2, 4)):
        return None
    k = it.args[2].value
    first, last = it.args[0], it.args[1]
    if not (isinstance(last, ast.BinOp) and isinstance(last.op, ast.Sub) and isinstance(last.right, ast.Constant)
            and last.right.value == k - 1):
        return None
    stop = last.left
    lo = None if _zero(first) else first
    if ast.dump(nxt.iter) != ast.dump(_tail_range(lo, stop, k)):
        return None
    whole = ast.For(target=ast.Name(s.target.id, ast.Store()), iter=_range([stop] if lo is None else [first, stop]),
                    body=nxt.body, orelse=[], type_comment=None)
    return ast.fix_missing_locations(ast.copy_location(whole, s))


def _tail_range(lo: ast.expr | None, stop: ast.expr, k: int) -> ast.Call:
    """`range(lo + _rt.span(lo, N) // k * k, N)` (`lo` None: 0): the tail loop's range."""
    first = lo if lo is not None else ast.Constant(0)
    done = ast.BinOp(ast.BinOp(ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), "span", ast.Load()),
                                        [pyast.clone(first), pyast.clone(stop)], []),
                               ast.FloorDiv(), ast.Constant(k)), ast.Mult(), ast.Constant(k))
    start = done if lo is None else ast.BinOp(pyast.clone(lo), ast.Add(), done)
    return _range([start, pyast.clone(stop)])


def _zero(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) is int and e.value == 0


def _range(args: list[ast.expr]) -> ast.Call:
    return ast.Call(ast.Name("range", ast.Load()), args, [])


def _forward_range(s: ast.For) -> tuple[str, ast.expr | None, ast.expr] | None:
    """(v, lo or None, N) of `for v in range(N)` / `range(lo, N)`; None for other loops,
    reversed ones included (lean loops run those forward first where that is exact)."""
    it = s.iter
    if not (isinstance(s.target, ast.Name) and isinstance(it, ast.Call) and dotted(it.func) == "range"
            and 1 <= len(it.args) <= 2) or s.orelse:
        return None
    if reversed_head(s) is not None:
        return None
    if len(it.args) == 1 or _zero(it.args[0]):
        return s.target.id, None, it.args[-1]
    return s.target.id, it.args[0], it.args[1]


def _fused_loops(body: list[ast.stmt], blocked: set[str]) -> list[ast.For]:
    """The inner loops `_fuse` fuses: at the body's top level, or in `if`s it fuses."""
    out: list[ast.For] = []
    for t in body:
        if isinstance(t, ast.For) and _same_everywhere(t.iter, blocked) and isinstance(t.target, ast.Name):
            out.append(t)
        elif isinstance(t, ast.If) and _same_everywhere(t.test, blocked):
            out += _fused_loops(t.body, blocked) + _fused_loops(t.orelse, blocked)
    return out


def _same_everywhere(e: ast.expr, blocked: set[str]) -> bool:
    """Whether `e` has one value in every copy: it reads no name the body assigns, and calls
    nothing but `_rt.span` (`plain` allows only pure calls in the body anyway)."""
    return not (_loads(e) & blocked) and all(
        not isinstance(n, ast.Call) or dotted(n.func) in ("range", "_rt.span") for n in pyast.walk(e))


def _loop_names(f: ast.For) -> set[str]:
    """The names a fused loop shares between the copies: its target and reversed index."""
    assert isinstance(f.target, ast.Name)
    head = reversed_head(f)
    return {f.target.id} | ({head[0]} if head is not None else set())


def _assigned_elsewhere(body: list[ast.stmt], name: str, fused: list[ast.For]) -> bool:
    """Whether `name` is assigned in `body` other than as a fused loop's target or reversed index."""
    skip = {id(f) for f in fused}
    heads = {id(f.body[0]) for f in fused if reversed_head(f) is not None}

    def visit(stmts: list[ast.stmt]) -> bool:
        for t in stmts:
            if isinstance(t, ast.For) and id(t) in skip:
                if visit(t.body[1:] if id(t.body[0]) in heads else t.body):
                    return True
                continue
            if isinstance(t, (ast.For, ast.If, ast.While)):
                if isinstance(t, ast.For) and name in _stores(t.target):
                    return True
                if visit(t.body) or visit(t.orelse):
                    return True
                continue
            if name in _stores(t):
                return True
        return False
    return visit(body)


def _chained(f: ast.For) -> bool:
    """Whether the loop carries a chain from one iteration to the next: a name read before it
    is assigned (a sum in a local), or an array it writes read at another element."""
    assert isinstance(f.target, ast.Name)
    index = _loop_names(f)
    assigned = _stores(ast.Module(f.body, []))
    carried, _ = _exposed(f.body, index)
    if carried & assigned:
        return True
    elements, _ = touched(f)
    for subs in elements.values():
        stored = {ast.dump(n.slice) for n in subs if not isinstance(n.ctx, ast.Load)}
        if stored and any(ast.dump(n.slice) not in stored for n in subs if isinstance(n.ctx, ast.Load)):
            return True
    return False


def _fuse(bodies: list[list[ast.stmt]], blocked: set[str]) -> list[ast.stmt]:
    """The copies' statement lists (one structure, renamed) as one list (module contract)."""
    out: list[ast.stmt] = []
    for group in zip(*bodies):
        first = group[0]
        if isinstance(first, ast.For) and _same_everywhere(first.iter, blocked) and isinstance(first.target, ast.Name):
            head = 1 if reversed_head(first) is not None else 0
            inner = list(first.body[:head])
            for t in group:
                assert isinstance(t, ast.For)
                inner += t.body[head:]
            out.append(ast.For(target=first.target, iter=first.iter, body=inner, orelse=[], type_comment=None))
        elif isinstance(first, ast.If) and _same_everywhere(first.test, blocked):
            ifs = [t for t in group if isinstance(t, ast.If)]
            out.append(ast.If(test=first.test, body=_fuse([t.body for t in ifs], blocked),
                              orelse=_fuse([t.orelse for t in ifs], blocked) if first.orelse else []))
        else:
            out += group
    return out


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, n: ast.Name) -> ast.Name:
        new = self.names.get(n.id)
        return ast.copy_location(ast.Name(new, n.ctx), n) if new is not None else n

    def visit_all(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        return [self.visit(t) for t in stmts]
