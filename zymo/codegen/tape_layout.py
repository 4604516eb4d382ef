"""A cache block filled by a swapped loop nest stored in the order the nest now runs.

Contract: `transpose_caches(fn, counters, elsewhere)` rewrites, in place, the position
arithmetic of the caches of the generated function `fn` that a two-level nest fills at a
stride, and returns whether it changed any. `counters` are the caches' entry counters
(`transform/reverse/facts.py`); `elsewhere` names the arrays other functions of the module
subscript (a cache read there, as split mode's reverse function reads its forward one's, keeps
its layout).

`codegen/tape_index.py` addresses the entries a two-level nest pushes (outer index `o` of `N_o`
trips, inner `i` of `X`) block by block, in the nest's order as the transforms wrote it:

    _p = k + (o - lo) * X          (at the outer level)
    _q = _p + (i - lo_i)           (at the inner level; `c[_q] = x`)

and the matching pops read the same positions. When `codegen/interchange.py` then swaps the
push nest, its inner loop runs over `o`, and each push stores `X` entries further on: a column
walk through the cache (gramschmidt's cache of `A`: 880 KB per call at n=60, stored at a stride
of 62 entries). Here every position of such a cache becomes

    _p = k + (o - lo)
    _q = _p + (i - lo_i) * N_o     (`N_o`: the trip count of `o`'s loop, `_rt.span(lo, hi)`)

at the pushes and at the pops alike: the same block of `N_o * X` entries from `k`, the entry of
each `(o, i)` another one of it, one to one, so every pop still reads what its push stored,
and the swapped pushes store side by side.

It is done only where every subscript of the cache in `fn` is such a `_q` (each `_q` and `_p`
assigned once in `fn`, every `_p` from the same counter with the same `X`), `o` is the variable
of a `for` around the statement (forward, `for o in range(lo, hi)`, or reversed,
`loop_forms.reversed_head`) whose bounds that loop does not assign (so `N_o` read there is its
trip count), and some push stores from a loop over `o` itself (the swapped nest: nothing to
gain otherwise). Positions are ints; the numbers the program computes do not change, only
where the cache keeps them.
"""
from __future__ import annotations

import ast
import copy

from .loop_forms import reversed_head, same


def transpose_caches(fn: ast.FunctionDef, counters: frozenset[str], elsewhere: frozenset[str]) -> bool:
    """Rewrite the positions of `fn`'s caches filled across (module contract); whether any changed."""
    if not counters:
        return False
    defs: dict[str, list[ast.Assign]] = {}
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defs.setdefault(node.targets[0].id, []).append(node)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) and isinstance(node.target, ast.Name):
            defs.setdefault(node.target.id, []).append(node)  # type: ignore[arg-type]
    uses: dict[str, list[ast.Subscript]] = {}
    loads: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            uses.setdefault(node.value.id, []).append(node)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads[node.id] = loads.get(node.id, 0) + 1
    changed = False
    for cache, subs in uses.items():
        if cache in elsewhere:
            continue
        plan = _plan(subs, defs, parents, counters)
        if plan is not None and _private(plan, subs, loads):
            _apply(plan)
            changed = True
    return changed


def _plan(subs: list[ast.Subscript], defs: dict[str, list[ast.Assign]], parents: dict[int, ast.AST],
          counters: frozenset[str]) -> list[tuple[ast.Assign, ast.Assign, ast.expr]] | None:
    """(inner def, outer def, N_o at the inner def) for every position of one cache, or None
    where the cache is not one this module rewrites."""
    plan, key, gain = [], None, False
    for sub in subs:
        if not isinstance(sub.slice, ast.Name):
            return None
        inner = _only(defs, sub.slice.id)
        if inner is None or not (isinstance(inner.value, ast.BinOp) and isinstance(inner.value.op, ast.Add)
                                 and isinstance(inner.value.left, ast.Name)):
            return None
        outer = _only(defs, inner.value.left.id)
        if outer is None:
            return None
        form = _outer_form(outer.value, counters)
        if form is None:
            return None
        k, var, lo, x = form
        if key is None:
            key = (k, x)
        elif key[0] != k or not same(key[1], x):
            return None
        trips = _trips(inner, var, lo, parents)
        if trips is None or _trips(outer, var, lo, parents) is None:
            return None
        plan.append((inner, outer, trips))
        if isinstance(sub.ctx, ast.Store):
            loop = _enclosing_loop(sub, parents)
            gain |= loop is not None and _loop_var(loop) == var
    if not plan or not gain:
        return None
    return plan


def _private(plan: list[tuple[ast.Assign, ast.Assign, ast.expr]], subs: list[ast.Subscript],
             loads: dict[str, int]) -> bool:
    """Whether the positions are read nowhere but where the plan reads them: each `_q` only
    as this cache's subscript, each `_p` only by the plan's `_q` (another cache sharing one
    would change layout with it)."""
    inner = {id(i): i for i, _, _ in plan}
    reads: dict[str, int] = {}
    for s in subs:
        reads[s.slice.id] = reads.get(s.slice.id, 0) + 1  # type: ignore[attr-defined]
    for i in inner.values():
        p = i.value.left.id  # type: ignore[attr-defined]
        reads[p] = reads.get(p, 0) + 1
    return all(loads.get(name, 0) == n for name, n in reads.items())


def _apply(plan: list[tuple[ast.Assign, ast.Assign, ast.expr]]) -> None:
    done: set[int] = set()
    for inner, outer, trips in plan:
        if id(inner) not in done:
            done.add(id(inner))
            value = inner.value
            assert isinstance(value, ast.BinOp)
            value.right = ast.BinOp(value.right, ast.Mult(), copy.deepcopy(trips))
        if id(outer) not in done:
            done.add(id(outer))
            value = outer.value
            assert isinstance(value, ast.BinOp) and isinstance(value.right, ast.BinOp)
            value.right = value.right.left  # k + (o - lo) * X -> k + (o - lo)


def _only(defs: dict[str, list[ast.Assign]], name: str) -> ast.Assign | None:
    """The one statement of `fn` that assigns `name`, an `Assign`, else None."""
    got = defs.get(name, [])
    return got[0] if len(got) == 1 and isinstance(got[0], ast.Assign) else None


def _outer_form(e: ast.expr, counters: frozenset[str]) -> tuple[str, str, ast.expr | None, ast.expr] | None:
    """(k, o, lo, X) of `k + (o - lo) * X` or `k + o * X` (lo None), `k` a counter."""
    if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and isinstance(e.left, ast.Name)
            and e.left.id in counters and isinstance(e.right, ast.BinOp) and isinstance(e.right.op, ast.Mult)):
        return None
    offset, x = e.right.left, e.right.right
    if isinstance(offset, ast.Name):
        return e.left.id, offset.id, None, x
    if isinstance(offset, ast.BinOp) and isinstance(offset.op, ast.Sub) and isinstance(offset.left, ast.Name):
        return e.left.id, offset.left.id, offset.right, x
    return None


def _trips(s: ast.stmt, var: str, lo: ast.expr | None, parents: dict[int, ast.AST]) -> ast.expr | None:
    """`_rt.span(lo, hi)`, the trip count of the loop around `s` over `var` from `lo`, as an
    expression that reads the same there (its names unassigned in the loop), or None."""
    node: ast.AST | None = s
    while node is not None:
        node = parents.get(id(node))
        if isinstance(node, ast.For) and _loop_var(node) == var:
            bounds = _bounds(node)
            if bounds is None:
                return None
            start, stop = bounds
            if not (same(start, lo) if lo is not None else isinstance(start, ast.Constant) and start.value == 0):
                return None
            assigned = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            if any(isinstance(n, ast.Name) and n.id in assigned for b in (start, stop) for n in ast.walk(b)):
                return None
            return ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), "span", ast.Load()),
                            [copy.deepcopy(start), copy.deepcopy(stop)], [])
    return None


def _loop_var(s: ast.For) -> str | None:
    """The index a loop runs over: its target, or the `i` of a reversed loop's head."""
    head = reversed_head(s)
    if head is not None:
        return head[0]
    return s.target.id if isinstance(s.target, ast.Name) else None


def _bounds(s: ast.For) -> tuple[ast.expr, ast.expr] | None:
    """(start, stop) of the values `_loop_var(s)` takes, each once: `range(stop)`,
    `range(start, stop)` or a reversed loop's head."""
    head = reversed_head(s)
    if head is not None:
        return (head[1] if head[1] is not None else ast.Constant(0)), head[2]
    it = s.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and not it.keywords and 1 <= len(it.args) <= 2):
        return None
    return (ast.Constant(0), it.args[0]) if len(it.args) == 1 else (it.args[0], it.args[1])


def _enclosing_loop(node: ast.AST, parents: dict[int, ast.AST]) -> ast.For | None:
    while node is not None:
        node = parents.get(id(node))  # type: ignore[assignment]
        if isinstance(node, ast.For):
            return node
    return None

