"""What the adjoint sweep reads (Enzyme's DifferentialUseAnalysis, recorded as it is written).

Contract: the adjoint-sweep emitter names every value it reads through this module: `use`
(a primal value), `use_d` (the shadow of memory), `adj` (the adjoint of a float), `contents`
(an array's contents as an op saw them: the array itself when nothing may overwrite them
before the adjoint sweep reads them, else a snapshot the forward sweep takes, or at the top
level a cheap temporary's expression, `_top_remat`) and `accumulate` (`adjoint += expr`).
Each records what it read (`needed`, `adj_used`, `snap_pre`/`snap_post` with `why`,
`lazy_refs`), which is what the tape plan (`plan.py`) decides how to provide.
"""
from __future__ import annotations

from ...ir import types as T
from ...ir.core import Op, Value
from ...rules import indexing
from ...rules.registry import lookup
from ..writer import Writer
from .shadows import ShadowAllocation

_TOP_REMAT_OPS = 3  # the most operations a top-level temporary is recomputed with (`_top_remat`)


class Needs(ShadowAllocation):
    def use(self, v: Value) -> str:
        """Name of primal `v` in the adjoint sweep (recording that it is needed)."""
        self.needed.add((v.id, "p"))
        return self.namer(v)

    def use_d(self, v: Value, how: tuple = ("other",)) -> str:
        """Name of the shadow of memory value `v` in the adjoint sweep (`how` it is used,
        recorded for the shadows the adjoint sweep creates)."""
        self.needed.add((v.id, "d"))
        if self._lazy(v) or self._loop_lazy(v):
            self.lazy_refs.setdefault((v.id, self.namer.lane), []).append(how)
        name = self.namer.d(v)
        self.adjoint_names["memory"].add(name)
        return name

    def adj(self, v: Value) -> str:
        """Name of the adjoint of float `v`."""
        self.adj_used.add(v.id)
        name = self.namer.d(v)
        self.adjoint_names["float"].add(name)
        return name

    def accumulate(self, w: Writer, v: Value, expr: str, fresh: bool = False) -> None:
        """`adjoint(v) += expr`; `fresh`: `expr` is an array nothing else writes later, so it
        may become the shadow of a temporary the adjoint sweep creates here."""
        if T.is_memory(v.type):
            if self._loop_lazy(v):  # resolved at the end of its block (`_resolve_loop_lazy`)
                how: tuple = ("acc", w, len(w.lines), expr, fresh, w.depth)
            else:
                how = ("acc", w, len(w.lines), expr) if fresh and self.at_top else ("other",)
            w(f"{self.use_d(v, how)} += {expr}")
        else:
            w(f"{self.adj(v)} += {expr}")

    def contents(self, op: Op, v: Value, post: bool = False) -> str:
        """The contents of array `v` as the op saw them: `v` itself when nothing may
        overwrite them before the adjoint sweep reads them, else a copy (`_saved_v`); at the
        top level, a cheap temporary's expression (`_top_remat`)."""
        if not isinstance(v.type, T.Array):
            return self.use(v)
        if not post and self.at_top and self._top_remat(v):
            return self._top_remat_expr(v)
        writer = self.overwrites.first_writer(op, v, include_self=not post)
        if writer is None:
            return self.use(v)
        table = self.snap_post if post else self.snap_pre
        for snap, of in table.get(id(op), []):
            if of is v:
                return self.use(snap)
        shared = self._shared_snapshot(op, v, post)
        if shared is not None:
            return self.use(shared)
        snap = Value(v.type, f"_saved_{v.hint}")
        self.values[snap.id] = snap
        self.def_block[snap.id] = self.blocks_of_op[id(op)]
        table.setdefault(id(op), []).append((snap, v))
        self.why[snap.id] = (op, v, writer, post)
        return self.use(snap)

    def _shared_snapshot(self, op: Op, v: Value, post: bool) -> Value | None:
        """A snapshot another op of `op`'s block takes of the contents `contents(op, v, post)`
        asks for: of the same memory (`v` itself, or a basic view made by the same op on the
        same values) at a point of the same iteration with no op in between that may write it
        (the first writer after the earlier point, `overwrites.first_writer`, is none or an op
        of the block at or after the later point). `out[i] = np.exp(..); out[i] /= s` keeps
        one copy of the row, not one for `exp`'s adjoint and one for the division's."""
        block = self.blocks_of_op[id(op)]
        pos = {id(o): k for k, o in enumerate(block.ops)}
        here = pos[id(op)] + post  # program points: k before op k, k + 1 after it
        for other in block.ops:
            for other_post, table in ((False, self.snap_pre), (True, self.snap_post)):
                for snap, of in table.get(id(other), []):
                    there = pos[id(other)] + other_post
                    if there == here or not self._same_memory(of, v):
                        continue
                    (a, a_post, b), val = ((op, post, there), v) if here < there else ((other, other_post, here), of)
                    writer = self.overwrites.first_writer(a, val, include_self=not a_post)
                    if writer is None or pos.get(id(writer), -1) >= b:
                        return snap
        return None

    def _same_memory(self, a: Value, b: Value) -> bool:
        """Whether arrays `a` and `b` are provably one memory: one value, or basic views
        made by ops of one kind with equal attributes on the same values."""
        if a is b:
            return True
        da, db = self.def_op.get(a.id), self.def_op.get(b.id)
        return (da is not None and db is not None and da.kind == db.kind == "getitem"
                and not indexing.is_advanced(da) and not indexing.is_advanced(db)
                and len(da.args) == len(db.args) and all(x is y for x, y in zip(da.args, db.args))
                and da.attrs == db.attrs)

    def _top_remat(self, v: Value) -> bool:
        """Whether array `v` is recomputed where the top level of the adjoint sweep reads it
        instead of kept from the forward sweep: a temporary of the function's body (outside
        loops and branches), the result of cheap arithmetic (rules declaring `cheap`, no `out=`) read once by
        the primal and never written, on numbers and on arrays whose contents nothing writes
        later (an operand that is such a temporary is recomputed in turn; at most
        `_TOP_REMAT_OPS` operations in all). The forward sweep then writes it into its one reader
        (`codegen/fuse.py`) and the adjoint's expression computes it in its own pass (under
        Numba one fused loop, no array kept between the sweeps). Decided once per value."""
        top = self.plan.top_remat
        if v.id not in top:  # a question of the IR alone, answered when first asked
            # only under Numba: there the recomputation fuses into the adjoint's loop; in the
            # Python backend it would be whole-array passes again (the logistic loss's
            # `logaddexp - y * z` recomputed for the shape of its sum's adjoint)
            top[v.id] = self.numba and 0 < self._top_ops(v) <= _TOP_REMAT_OPS
        return top[v.id]

    def _top_ops(self, v: Value) -> int:
        """The operations recomputing `v` takes (0: `v` is not such a temporary)."""
        if not isinstance(v.type, T.Array) or self.def_block.get(v.id) is not self.fn.body:
            return 0
        op = self.def_op.get(v.id)
        if (op is None or op.kind != "prim" or op.results != [v] or not lookup(op.attrs["key"]).cheap
                or "out" in op.attrs or self.overwrites.first_writer(op, v) is not None):
            return 0
        if self.index.reader_count(v) != 1:
            return 0
        n = 1
        for a in op.args:
            if isinstance(a.type, T.Array):
                if self.overwrites.first_writer(op, a, include_self=True) is not None:
                    return 0
                n += self._top_ops(a) if self._top_remat(a) else 0
            elif not isinstance(a.type, T.Scalar):
                return 0
        return n

    def _top_remat_expr(self, v: Value) -> str:
        op = self.def_op[v.id]

        def name(a: Value) -> str:
            return self._top_remat_expr(a) if isinstance(a.type, T.Array) and self._top_remat(a) else self.use(a)
        return f"({self.e.call(op, with_out=False, name=name)})"
