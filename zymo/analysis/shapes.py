"""Which arrays keep one shape every time their definition runs ("fixed shape").

Contract: `FixedShapes(fn).fixed(v)` is True only when every execution of the op
(or loop) defining array `v` produces an array of the same shape during one call
of `fn`: its shape is a function of values defined outside every loop (and of
constants) alone. Reverse mode uses it to cache a loop's arrays in one stacked
buffer (a row per iteration) instead of a list, and to allocate the shadow of a
loop temporary in the adjoint sweep from a recorded shape.

The analysis is conservative; unknown ops are not fixed. The rules:
- a value defined outside every loop (parameters included) or a constant is
  fixed; a scalar is "invariant" when it is such a value, or cheap integer
  arithmetic on invariant scalars;
- a basic-indexing view `x[i, a:b]` is fixed when `x` is, and every slice bound
  (and every index that is not an integer) is invariant; integer indices may
  vary (they pick a row, not a shape); an index by an array is never fixed;
- an elementwise rule's result is fixed when its array operands are (scalars
  broadcast and do not change the shape);
- any other rule's result is fixed when its array operands are fixed float
  arrays and all its other operands are invariant (an integer array operand
  may carry data-dependent sizes, as in `np.repeat(x, counts)`), unless the
  rule is user-defined (`zymo.custom_rule`) or listed as data-shaped;
- a loop-carried array or an `if` result is fixed when every value flowing into
  it is (a greatest fixpoint, so a buffer rebound around a loop stays fixed).
  That optimism is sound only for cycles through ops that keep their operand's
  shape: so an op on a loop's cycle (computed from a loop-carried array and
  flowing back into it) is fixed only if it is elementwise, a view that keeps
  every axis whole (`h[:]`) or drops one by an integer index, or a product or
  copy (`_KEEPS_SHAPE`: a product that changed the shape would fail at the next
  iteration). `h = np.sin(h[1:] * h[:-1])` or `h = np.concatenate((h, y))` in a
  loop changes `h`'s shape every iteration; such values are cached in lists. An
  op that only reads the cycle (`t = h[1:]`, not fed back) follows the rules above.

Definitions and loop depths come from the shared `index.Index` (pass one in to share it).
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Function, Op, Value, tree_values, walk
from ..rules.registry import lookup
from .index import Index

_INT_ARITH = {"add", "sub", "mul", "floordiv", "mod", "neg"}
_DATA_SHAPED = {"numpy.nonzero", "numpy.flatnonzero", "numpy.argwhere", "numpy.unique",
                "numpy.extract", "numpy.compress", "numpy.trim_zeros", "numpy.repeat",
                "numpy.arange", "numpy.linspace", "numpy.histogram"}
# rules whose result keeps the shape of a loop-carried operand around a cycle (or the primal
# fails at the next iteration: `W @ h` with W not square)
_KEEPS_SHAPE = {"matmul", "numpy.matmul", "numpy.dot", "numpy.copy", "numpy.zeros_like",
                "numpy.ones_like", "numpy.empty_like", "numpy.full_like"}


class FixedShapes:
    def __init__(self, fn: Function, index: Index | None = None):
        index = index or Index(fn)
        self.depth: dict[int, int] = {}            # value id -> loop depth of its definition
        self.def_op: dict[int, Op] = index.producer  # value id -> defining op (results only)
        self.inflow: dict[int, list[Value]] = {}   # block arg / region result id -> values flowing in
        self.values: list[Value] = index.order
        for p in fn.params:
            self.depth[p.id] = 0
        for v in self.values:
            self.depth[v.id] = index.value_depth(v)
        for op in walk(fn.body):
            self._flows(op)
        self._cycle = self._cycle_values()
        self._fixed = {v.id for v in self.values if isinstance(v.type, T.Array)}
        changed = True
        while changed:  # greatest fixpoint: drop values until every remaining one is justified
            changed = False
            for v in self.values:
                if v.id in self._fixed and not self._justified(v):
                    self._fixed.discard(v.id)
                    changed = True

    def fixed(self, v: Value) -> bool:
        """Whether array `v` has one shape over every execution of its definition."""
        if self.depth.get(v.id, 0) == 0:
            return isinstance(v.type, T.Array)
        return v.id in self._fixed

    # -- what flows into loop carries and branch results ---------------------------
    def _flows(self, op: Op) -> None:
        def add(dst: Value, src: Value) -> None:
            self.inflow.setdefault(dst.id, []).append(src)

        if op.kind == "for":
            body = op.regions[0]
            ys = body.ops[-1].args
            for a, init, y, r in zip(body.args[1:], op.args[3:], ys, op.results):
                for dst, src in ((a, init), (a, y), (r, init), (r, y)):
                    add(dst, src)
        elif op.kind == "while":
            cond, body = op.regions
            ys = body.ops[-1].args
            for c, b, init, y, r in zip(cond.args, body.args, op.args, ys, op.results):
                for dst, src in ((c, init), (c, y), (b, c), (r, c)):
                    add(dst, src)
        elif op.kind == "if":
            for region in op.regions:
                for r, y in zip(op.results, region.ops[-1].args):
                    add(r, y)

    def _cycle_values(self) -> set[int]:
        """Ids of the arrays on a loop's cycle: computed, inside the loop, from one of its
        loop-carried arrays (a block argument) and flowing back into it (the module contract).
        A value that only reads the cycle (`t = h[1:]` used and dropped) is not on it."""
        sources: dict[int, list[Value]] = {}
        users: dict[int, list[Value]] = {}
        for v in self.values:
            op = self.def_op.get(v.id)
            srcs = list(self.inflow.get(v.id, ())) + (list(op.args) if op is not None else [])
            sources[v.id] = srcs
            for src in srcs:
                users.setdefault(src.id, []).append(v)

        def closure(start: list[Value], step) -> set[int]:
            seen: set[int] = set()
            todo = list(start)
            while todo:
                v = todo.pop()
                if v.id not in seen:
                    seen.add(v.id)
                    todo.extend(step(v))
            return seen

        cycle: set[int] = set()
        for a in self.values:
            if (a.id in self.inflow and self.def_op.get(a.id) is None and self.depth.get(a.id, 0) > 0
                    and isinstance(a.type, T.Array)):
                ahead = closure([a], lambda v: users.get(v.id, ()))
                behind = closure(self.inflow[a.id], lambda v: sources.get(v.id, ()))
                cycle |= ahead & behind
        return cycle

    # -- the rules ----------------------------------------------------------------------
    def _invariant(self, v: Value, budget: int = 6) -> bool:
        if v.is_const or self.depth.get(v.id, 0) == 0:
            return True
        op = self.def_op.get(v.id)
        if budget <= 0 or op is None or op.kind != "prim" or op.attrs["key"] not in _INT_ARITH:
            return False
        if not isinstance(v.type, T.Scalar) or v.type.kind != "int":
            return False
        return all(self._invariant(a, budget - 1) for a in op.args)

    def _arr_fixed(self, v: Value) -> bool:
        return self.depth.get(v.id, 0) == 0 or v.id in self._fixed

    def _justified(self, v: Value) -> bool:
        if v.id in self.inflow:
            return all(isinstance(s.type, T.Array) and self._arr_fixed(s) for s in self.inflow[v.id])
        op = self.def_op.get(v.id)
        if op is None:
            return False
        if op.kind == "getitem":
            return self._getitem(op)
        if op.kind == "prim" and op.results == [v]:
            return self._prim(op)
        return False

    def _getitem(self, op: Op) -> bool:
        base = op.args[0]
        if not isinstance(base.type, T.Array) or not self._arr_fixed(base):
            return False
        tree = op.attrs["index"]
        parts = list(tree[1]) if tree[0] == "t" else [tree]
        if op.results[0].id in self._cycle and not all(_keeps_axis(part, op.args) for part in parts):
            return False  # `h = f(h[1:])` around a loop shrinks `h` every iteration
        for part in parts:
            for a in tree_values(part, op.args):
                if not isinstance(a.type, T.Scalar):
                    return False  # an index array: the result's shape is the index's
                if part[0] == "v" and a.type.kind == "int":
                    continue      # an integer index picks a row whatever its value
                if not self._invariant(a):
                    return False
        return True

    def _prim(self, op: Op) -> bool:
        key = op.attrs["key"]
        rule = lookup(key)
        if key in _DATA_SHAPED or getattr(rule, "user", False):
            return False
        arrays = [a for a in op.args if T.is_memory(a.type)]
        if not all(isinstance(a.type, T.Array) and self._arr_fixed(a) for a in arrays):
            return False
        if rule.elementwise:
            return True
        if key not in _KEEPS_SHAPE and op.results[0].id in self._cycle:
            return False
        if any(not a.type.differentiable for a in arrays):
            return False
        return all(self._invariant(a) for a in op.args if not T.is_memory(a.type))


def _keeps_axis(part: tuple, args: list[Value]) -> bool:
    """Whether an index part keeps its axis whole (`:`, `...`) or picks within it by number
    (an integer, `None`): not a slice with a bound or a step."""
    if part[0] == "s":
        return all(t == ("c", None) for t in part[1:])
    return part[0] in ("v", "c")
