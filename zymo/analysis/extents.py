"""Which arrays have the same shape: symbolic extents, with guards on the call's sizes.

Contract: `Extents(fn, dims).same(a, b)` is True only when values `a` and `b` (arrays
or scalars of `fn`) have equal shapes at every call of the program that satisfies
`guards`: the equalities between parameter extents the True answers relied on,
each a pair `((param, axis), (param, axis))`. `dims[k]` is the shape parameter `k`
has at the call being specialized (None where unknown or not an array); extents of
parameters are compared through those sizes, so two arrays of the same size `n` in
one call are treated as equal, and the compiled program must then be reused only for
calls whose sizes satisfy the same `guards` (`cache.prepare` checks them).
`fits(v, shape)` asks the same of `v` and a shape from `shape(w)`, or from
`store_shape(op)` (the destination `x[idx]` of a `setitem` op). Reverse mode uses the answers to
leave out the sums over broadcast dimensions (`_rt.unbroadcast`) of adjoints that have their operand's shape already.

Each value gets a shape: a tuple of extents, each
- `("p", k, axis)`: extent `axis` of parameter `k`;
- `("1",)`: a literal 1 (an inserted axis, `x[None]`);
- `("d", e, k)`: extent `e` (a parameter's, never itself a `"d"`) shortened by a slice with
  constant bounds, `a:b` of step 1 with `a >= 0` and `b < 0` (either left out) and
  `k = b - a < 0`: its length, `max(0, len(e) + k)`, is a function of `e` and `k` alone, so
  `x[1:-1]`, `x[2:]` and `x[:-2]` have one extent; a slice of such a slice adds up the `k`s
  (`max(0, max(0, n + k1) + k2) = max(0, n + k1 + k2)` when `k1, k2 <= 0`);
- `("u", id, axis)` (`("s", ...)` for another bounded slice): unknown, equal only to itself;
with the guards its derivation assumed. The rules (anything else is unknown):
- a parameter's extents are its own; a scalar's shape is `()`;
- a basic-indexing view keeps the base's extent where it takes a whole axis (`:`,
  `...`), drops it for an integer index, inserts `("1",)` for `None`; a bounded slice
  gives an unknown extent; an index by an array makes every extent unknown;
- an elementwise rule's result (no `out=`) broadcasts its operands: per axis, a literal
  1 gives way, and equal extents give that extent; unequal ones give an unknown;
- a matrix product of vectors and matrices (`@`, `np.matmul`, `np.dot`, no keywords) has
  the outer extents of its operands;
- block arguments, region results and every other op's results are unknown.
The analysis is conservative: a False answer costs only a sum that finds nothing to do.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from ..ir import types as T
from ..ir.core import Function, Op, Value, tree_values, walk
from ..rules.registry import lookup

Extent = tuple
Guard = tuple  # ((param, axis), (param, axis)), the smaller first
_Shape = tuple  # (extents, frozenset of guards)


class Extents:
    def __init__(self, fn: Function, dims: Sequence[Any] | None = None):
        self.dims = list(dims) if dims is not None else [None] * len(fn.params)
        self.guards: set[Guard] = set()
        self._shape: dict[int, _Shape] = {}
        for k, p in enumerate(fn.params):
            if isinstance(p.type, T.Array):
                self._shape[p.id] = (tuple(("p", k, a) for a in range(p.type.ndim)), frozenset())
        self._def: dict[int, Op] = {}
        for op in walk(fn.body):
            for r in op.results:
                self._def[r.id] = op

    # -- queries ---------------------------------------------------------------------
    def same(self, a: Value, b: Value) -> bool:
        """Whether `a` and `b` have one shape (recording the guards that took)."""
        return self._same(self.shape(a), self.shape(b))

    def fits(self, v: Value, shape: _Shape | None) -> bool:
        """Whether `v` has the symbolic `shape` (from `shape` or `store_shape`)."""
        return self._same(self.shape(v), shape)

    def store_shape(self, op: Op) -> _Shape | None:
        """The shape of the destination `x[idx]` of `setitem` op."""
        return self._indexed(op, op.args[0])

    def _same(self, sa: _Shape | None, sb: _Shape | None) -> bool:
        if sa is None or sb is None or len(sa[0]) != len(sb[0]):
            return False
        used = set(sa[1] | sb[1])
        for x, y in zip(sa[0], sb[0]):
            ok, guard = self._equal(x, y)
            if not ok:
                return False
            if guard is not None:
                used.add(guard)
        self.guards |= used
        return True

    def _equal(self, x: Extent, y: Extent) -> tuple[bool, Guard | None]:
        if x == y:
            return True, None
        if x[0] == "d" and y[0] == "d" and x[2] == y[2]:
            return self._equal(x[1], y[1])
        if x[0] == "p" and y[0] == "p":
            dx, dy = self.dims[x[1]], self.dims[y[1]]
            if dx is not None and dy is not None and dx[x[2]] == dy[y[2]]:
                return True, tuple(sorted([(x[1], x[2]), (y[1], y[2])]))
        return False, None

    # -- shapes --------------------------------------------------------------------------
    def shape(self, v: Value) -> _Shape | None:
        """`v`'s symbolic shape, or None when not even its rank is known."""
        if isinstance(v.type, T.Scalar):
            return (), frozenset()
        if not isinstance(v.type, T.Array):
            return None
        got = self._shape.get(v.id)
        if got is None:
            got = self._derive(v)
            self._shape[v.id] = got
        return got

    def _unknown(self, v: Value) -> _Shape:
        return tuple(("u", v.id, a) for a in range(cast(T.Array, v.type).ndim)), frozenset()

    def _derive(self, v: Value) -> _Shape:
        op = self._def.get(v.id)
        got = None
        if op is not None and op.kind == "getitem" and op.results == [v]:
            got = self._indexed(op, op.args[0])
        elif op is not None and op.kind == "prim" and op.results == [v] and "out" not in op.attrs:
            if lookup(op.attrs["key"]).elementwise:
                got = self._broadcast(v, op)
            elif lookup(op.attrs["key"]).matrix_product and len(op.args) == 2 and not op.attrs.get("kw"):
                got = self._product(op)
        if got is None or len(got[0]) != cast(T.Array, v.type).ndim:
            return self._unknown(v)
        return got

    def _indexed(self, op: Op, base: Value) -> _Shape | None:
        """The shape of `base[idx]` for the index of `op` (None unless basic indexing)."""
        sb = self.shape(base)
        if sb is None or not isinstance(base.type, T.Array):
            return None
        tree = op.attrs["index"]
        parts = list(tree[1]) if tree[0] == "t" else [tree]
        consumed = 0
        for part in parts:
            if part[0] == "c" and (part[1] is None or part[1] is Ellipsis):
                continue
            if part[0] == "s":
                consumed += 1
                continue
            vals = list(tree_values(part, op.args))
            if part[0] == "c" and isinstance(part[1], int) and not isinstance(part[1], bool):
                consumed += 1
            elif part[0] == "v" and isinstance(vals[0].type, T.Scalar) and vals[0].type.kind == "int":
                consumed += 1
            else:
                return None  # an index array or a boolean: advanced indexing
        extents: list[tuple] = []
        src = list(sb[0])
        pos = 0
        for part in parts:
            if part[0] == "c" and part[1] is None:
                extents.append(("1",))
            elif part[0] == "c" and part[1] is Ellipsis:
                fill = len(src) - consumed
                extents.extend(src[pos:pos + fill])
                pos += fill
            elif part[0] == "s":
                whole = all(t == ("c", None) for t in part[1:])
                cut = _shortened(src[pos], part, op.args) if pos < len(src) and not whole else None
                extents.append(src[pos] if whole and pos < len(src) else cut or ("s", id(op), len(extents)))
                pos += 1
            else:
                pos += 1
        extents.extend(src[pos:])  # the axes an index leaves out are taken whole
        return tuple(extents), sb[1]

    def _product(self, op: Op) -> _Shape | None:
        """`a @ b` (`np.dot`, `np.matmul`) of vectors and matrices: the outer extents of its
        operands (the inner ones meet, or NumPy raised)."""
        a, b = op.args
        sa, sb = self.shape(a), self.shape(b)
        if sa is None or sb is None or not (1 <= len(sa[0]) <= 2 and 1 <= len(sb[0]) <= 2):
            return None
        extents = sa[0][:-1] + (sb[0][1:] if len(sb[0]) == 2 else ())
        return extents, sa[1] | sb[1]

    def _broadcast(self, v: Value, op: Op) -> _Shape | None:
        operands = []
        trees = list(op.attrs.get("pos", ())) + [t for _, t in op.attrs.get("kw", ())]
        for tree in trees:
            for a in tree_values(tree, op.args):
                s = self.shape(a)
                if s is None:
                    return None
                operands.append(s)
        rank = max((len(s[0]) for s in operands), default=0)
        conds = frozenset().union(*(s[1] for s in operands)) if operands else frozenset()
        used: set[Guard] = set()
        out = []
        for axis in range(rank):
            back = rank - axis
            ext = [s[0][len(s[0]) - back] for s in operands if len(s[0]) >= back]
            ext = [x for x in ext if x != ("1",)] or [("1",)]
            first = ext[0]
            for x in ext[1:]:
                ok, guard = self._equal(first, x)
                if not ok:
                    first = ("u", v.id, axis)
                    break
                if guard is not None:
                    used.add(guard)
            out.append(first)
        return tuple(out), conds | used



def _shortened(e: Extent, part: tuple, args: list) -> Extent | None:
    """The extent of a slice `part` (`("s", start, stop, step)`) of an axis of extent `e`: a
    `"d"` extent (module docstring) for constant bounds `a >= 0`, `b < 0`, step 1; else None."""
    bounds: list[int | None] = []
    for t in part[1:4]:
        if t == ("c", None):
            bounds.append(None)
        elif t[0] == "c":
            bounds.append(t[1])
        elif t[0] == "v" and args[t[1]].is_const:
            bounds.append(args[t[1]].const)
        else:
            return None
    start, stop, step = bounds
    if any(x is not None and (isinstance(x, bool) or not isinstance(x, int)) for x in bounds):
        return None
    if step not in (None, 1) or (start is not None and start < 0) or (stop is not None and stop >= 0):
        return None
    k = (stop or 0) - (start or 0)
    if e[0] == "d":
        e, k = e[1], e[2] + k
    if e[0] != "p":
        return None
    return e if k == 0 else ("d", e, k)


def guards_hold(guards: Sequence[Guard], dims: Sequence[Any]) -> bool:
    """Whether the call whose parameter shapes are `dims` satisfies `guards`."""
    for (i, a), (j, b) in guards:
        di, dj = dims[i], dims[j]
        if di is None or dj is None or len(di) <= a or len(dj) <= b or di[a] != dj[b]:
            return False
    return True
