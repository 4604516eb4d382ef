"""Which arrays have the same shape: symbolic extents, with guards on the call's sizes.

Contract: `Extents(fn, dims).same(a, b)` is True only when values `a` and `b` (arrays
or scalars of `fn`) have equal shapes at every call of the program that satisfies
`guards`: the equalities between parameter extents the True answers relied on,
each a pair `((param, axis), (param, axis))`. `dims[k]` is the shape parameter `k`
has at the call being specialized (None where unknown or not an array); extents of
parameters are compared through those sizes, so two arrays of the same size `n` in
one call are treated as equal, and the compiled program must then be reused only for
calls whose sizes satisfy the same `guards` (`api._prepare` checks them).
`fits(v, shape)` asks the same of `v` and a shape from `shape(w)`, or from
`store_shape(op)` (the destination `x[idx]` of a `setitem` op). Reverse mode uses the answers to
leave out the sums over broadcast dimensions (`_rt.unbroadcast`) of adjoints that have their operand's shape already.

Each value gets a shape: a tuple of extents, each
- `("p", k, axis)`: extent `axis` of parameter `k`;
- `("1",)`: a literal 1 (an inserted axis, `x[None]`);
- `("u", id, axis)` (`("s", ...)` for a bounded slice): unknown, equal only to itself;
with the guards its derivation assumed. The rules (anything else is unknown):
- a parameter's extents are its own; a scalar's shape is `()`;
- a basic-indexing view keeps the base's extent where it takes a whole axis (`:`,
  `...`), drops it for an integer index, inserts `("1",)` for `None`; a bounded slice
  gives an unknown extent; an index by an array makes every extent unknown;
- an elementwise rule's result (no `out=`) broadcasts its operands: per axis, a literal
  1 gives way, and equal extents give that extent; unequal ones give an unknown;
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
                extents.append(src[pos] if whole and pos < len(src) else ("s", id(op), len(extents)))
                pos += 1
            else:
                pos += 1
        extents.extend(src[pos:])  # the axes an index leaves out are taken whole
        return tuple(extents), sb[1]

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


def guards_hold(guards: Sequence[Guard], dims: Sequence[Any]) -> bool:
    """Whether the call whose parameter shapes are `dims` satisfies `guards`."""
    for (i, a), (j, b) in guards:
        di, dj = dims[i], dims[j]
        if di is None or dj is None or len(di) <= a or len(dj) <= b or di[a] != dj[b]:
            return False
    return True
