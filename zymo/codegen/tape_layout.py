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

It is done only where (each checked on the tree, whatever made it):
- every subscript of the cache in `fn` is such a `_q`; `_q` and `_p` are each bound once in
  `fn`, by a plain assignment, and read nowhere else (a position shared with another cache
  would move its entries too); every `_p` starts from the same counter with the same `X`;
- the inner offset is `i` or `i - lo_i`, `i` the index of a loop around the statement over
  `lo_i` to `hi_i` with `X` written `_rt.span(lo_i, hi_i)` (so it runs over the block's rows);
- `o` is the index of a loop around both statements (forward, `for o in range(lo, hi)`, or
  reversed, `loop_forms.reversed_head`) whose bounds that loop does not assign, and `N_o`,
  read there, is written alike at every position of the cache (pushes and pops run over the
  same rows: a pop loop of fewer trips keeps the layout);
- the cache itself is read only through those subscripts, for its `.shape`, or by runtime
  helpers that keep or copy it whole (`_WHOLE`: `_rt.grow`, `_rt.tape_keep`...): no alias, no
  return;
- some push stores from a loop over `o` itself (the swapped nest: nothing to gain otherwise).

Positions are ints; the numbers the program computes do not change, only where the cache keeps
them. Not done: caches whose pop nest unroll-and-jam copied (`codegen/jam.py` assigns the
positions again in its remainder loop, and its copies' offsets read `i + 1`, not a loop index),
as under `config.set_reassociate`, where gramschmidt's pop nest is jammed.
"""
from __future__ import annotations

import ast

from .. import pyast
from .loop_forms import reversed_head, same

# runtime helpers that take a cache whole: allocate or reuse it, grow it keeping each entry
# where it was, keep it for the next call (`runtime/core.py`)
_WHOLE = frozenset({"reuse_tape", "grow", "grow_stack", "tape_keep", "tape_take"})


def transpose_caches(fn: ast.FunctionDef, counters: frozenset[str], elsewhere: frozenset[str]) -> bool:
    """Rewrite the positions of `fn`'s caches filled across (module contract); whether any changed."""
    if not counters:
        return False
    parents: dict[int, ast.AST] = {}
    binds: dict[str, list[ast.Name]] = {}
    loads: dict[str, list[ast.Name]] = {}
    uses: dict[str, list[ast.Subscript]] = {}
    for node in pyast.walk(fn):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, ast.Name):
            (binds if isinstance(node.ctx, ast.Store) else loads).setdefault(node.id, []).append(node)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            uses.setdefault(node.value.id, []).append(node)
    changed = False
    for cache, subs in uses.items():
        if cache in elsewhere or not _kept_whole(cache, subs, loads, parents):
            continue
        plan = _plan(subs, binds, parents, counters)
        if plan is not None and _private(plan, subs, loads):
            _apply(plan)
            changed = True
    return changed


def _kept_whole(cache: str, subs: list[ast.Subscript], loads: dict[str, list[ast.Name]],
                parents: dict[int, ast.AST]) -> bool:
    """Whether `cache` is read, other than through the subscripts `subs`, only as an argument of
    a runtime helper (`_rt.grow`, `_rt.tape_keep`: they keep or copy it whole) or for its
    `.shape`: no alias, no return, nothing else that could index it."""
    through = {id(s.value) for s in subs}
    for name in loads.get(cache, []):
        if id(name) in through:
            continue
        up = parents.get(id(name))
        if isinstance(up, ast.Attribute) and up.attr == "shape":
            continue
        if isinstance(up, ast.Tuple):  # `_rt.tape_keep(f, (c1, c2))`
            up = parents.get(id(up))
        if isinstance(up, ast.Call) and isinstance(up.func, ast.Attribute) and isinstance(up.func.value, ast.Name) \
                and up.func.value.id == "_rt" and up.func.attr in _WHOLE:
            continue
        return False
    return True


def _plan(subs: list[ast.Subscript], binds: dict[str, list[ast.Name]], parents: dict[int, ast.AST],
          counters: frozenset[str]) -> list[tuple[ast.Assign, ast.Assign, ast.expr]] | None:
    """(inner def, outer def, N_o) for every position of one cache, or None where the cache is
    not one this module rewrites."""
    plan: list[tuple[ast.Assign, ast.Assign, ast.expr]] = []
    key: tuple[str, ast.expr, ast.expr] | None = None  # the counter, X and N_o, alike at every position
    gain = False
    for sub in subs:
        if not isinstance(sub.slice, ast.Name):
            return None
        inner = _only(binds, parents, sub.slice.id)
        if inner is None or not (isinstance(inner.value, ast.BinOp) and isinstance(inner.value.op, ast.Add)
                                 and isinstance(inner.value.left, ast.Name)):
            return None
        outer = _only(binds, parents, inner.value.left.id)
        if outer is None:
            return None
        form = _outer_form(outer.value, counters)
        if form is None:
            return None
        k, var, lo, x = form
        if not _inner_offset(inner, inner.value.right, x, parents):
            return None
        trips, there = _trips(inner, var, lo, parents), _trips(outer, var, lo, parents)
        if trips is None or there is None or not same(trips, there):
            return None  # no loop over `o` around both, or not one whose trip count reads alike
        if key is None:
            key = (k, x, trips)
        elif key[0] != k or not same(key[1], x) or not same(key[2], trips):
            return None
        plan.append((inner, outer, trips))
        if isinstance(sub.ctx, ast.Store):
            loop = _enclosing_loop(sub, parents)
            gain |= loop is not None and _loop_var(loop) == var
    if not plan or not gain:
        return None
    return plan


def _private(plan: list[tuple[ast.Assign, ast.Assign, ast.expr]], subs: list[ast.Subscript],
             loads: dict[str, list[ast.Name]]) -> bool:
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
    return all(len(loads.get(name, [])) == n for name, n in reads.items())


def _apply(plan: list[tuple[ast.Assign, ast.Assign, ast.expr]]) -> None:
    done: set[int] = set()
    for inner, outer, trips in plan:
        if id(inner) not in done:
            done.add(id(inner))
            value = inner.value
            assert isinstance(value, ast.BinOp)
            value.right = ast.BinOp(value.right, ast.Mult(), pyast.clone(trips))
        if id(outer) not in done:
            done.add(id(outer))
            value = outer.value
            assert isinstance(value, ast.BinOp) and isinstance(value.right, ast.BinOp)
            value.right = value.right.left  # k + (o - lo) * X -> k + (o - lo)


def _only(binds: dict[str, list[ast.Name]], parents: dict[int, ast.AST], name: str) -> ast.Assign | None:
    """The statement `name = e`, where it is the only binding of `name` in `fn`, else None."""
    got = binds.get(name, [])
    if len(got) != 1:
        return None
    st = parents.get(id(got[0]))
    return st if isinstance(st, ast.Assign) and len(st.targets) == 1 and st.targets[0] is got[0] else None


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


def _inner_offset(s: ast.stmt, e: ast.expr, x: ast.expr, parents: dict[int, ast.AST]) -> bool:
    """Whether `e` is `i` or `i - lo_i`, `i` the index of a loop around `s` that runs over
    `lo_i` (0 for `i`) to `hi_i`, and `X` is `_rt.span(lo_i, hi_i)`: the offset runs over 0 to
    `X - 1`, as the layout needs."""
    if isinstance(e, ast.Name):
        var, lo = e.id, None
    elif isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and isinstance(e.left, ast.Name):
        var, lo = e.left.id, e.right
    else:
        return False
    trips = _trips(s, var, lo, parents)
    return trips is not None and same(trips, x)


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
            assigned = {n.id for n in pyast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            if any(isinstance(n, ast.Name) and n.id in assigned for b in (start, stop) for n in pyast.walk(b)):
                return None
            return ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), "span", ast.Load()),
                            [pyast.clone(start), pyast.clone(stop)], [])
    return None


def _over_range(s: ast.For) -> bool:
    it = s.iter
    return (isinstance(s.target, ast.Name) and isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
            and it.func.id == "range" and not it.keywords and not s.orelse)


def _loop_var(s: ast.For) -> str | None:
    """The index a loop over `range` runs over: its target, or the `i` of a reversed loop's head."""
    if not _over_range(s):
        return None
    head = reversed_head(s)
    if head is not None:
        return head[0]
    return s.target.id  # type: ignore[attr-defined]


def _bounds(s: ast.For) -> tuple[ast.expr, ast.expr] | None:
    """(start, stop) of the values `_loop_var(s)` takes, each once: `range(stop)`,
    `range(start, stop)` or a reversed loop's head."""
    if not _over_range(s):
        return None
    head = reversed_head(s)
    if head is not None:
        return (head[1] if head[1] is not None else ast.Constant(0)), head[2]
    args = s.iter.args  # type: ignore[attr-defined]
    if not 1 <= len(args) <= 2:
        return None
    return (ast.Constant(0), args[0]) if len(args) == 1 else (args[0], args[1])


def _enclosing_loop(node: ast.AST, parents: dict[int, ast.AST]) -> ast.For | None:
    up = parents.get(id(node))
    while up is not None:
        if isinstance(up, ast.For):
            return up
        up = parents.get(id(up))
    return None
