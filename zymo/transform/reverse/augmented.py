"""The augmented forward sweep: the primal, its shadows, and what the tape plan records.

Contract: written after the adjoint sweep and once the tape plan is complete (`plan.py`):
`fwd_block` writes a block's primal ops (less those `dead.py` leaves out), the shadow code
of each (`fwd_<kind>`, mirroring the adjoint emitter's `rev_<kind>`: shadow views and
allocations, list stores of shadows), the snapshots the adjoint sweep reads (`_snapshot`),
and pushes every value the plan caches on its cache (`_record`), allocating the caches where
the plan says (`_alloc_cache`).
"""
from __future__ import annotations

from typing import cast

from ...ir import types as T
from ...ir.core import Block, Op, Value
from ...rules import indexing
from ...rules.registry import lookup
from ..emit import Emitter, assign_all, range_args, trip_count, zero
from ..writer import Writer
from .facts import ExportedFacts


class AugmentedEmitter(ExportedFacts):
    def _record(self, w: Writer, v: Value, src: str | None = None) -> None:
        """Push `v` (or, for a stacked cache, the array `src` holding its contents) on its caches."""
        if not self._cached(v):
            return
        for role in ("p", "d"):
            if (v.id, role) in self.needed and not self._remat(v, role):
                kind = self._kind(v, role)
                if kind == "list":
                    for _ in self._lanes_of(role):
                        name = self.namer(v) if role == "p" else self.namer.d(v)
                        w(f"{self._cache_name(v, role)}.append({name})")
                    continue
                name = src or self.namer(v)
                cache = self._cache_name(v, role)
                k = self._counter(v)
                if kind == "stack":
                    loop = self._loop_of(self.def_block[v.id])
                    need = self.loop_trips.get(id(loop), f"{k} + 1") if self._top_for(v) else f"{k} + 1"
                    with w.indent(f"if {k} == {cache}.shape[0]:"):
                        w(f"{cache} = _rt.grow_stack({cache}, {name}, {need})")
                elif kind == "grow" and cache not in self.plan.reserved:
                    with w.indent(f"if {k} == {cache}.shape[0]:"):
                        w(f"{cache} = _rt.grow({cache}, 0)")
                w(f"{cache}[{k}] = {name}")
                w(f"{k} += 1")

    def _snapshot(self, w: Writer, snap: Value, of: Value) -> None:
        """Copy the contents of `of` for the adjoint sweep: straight into a row of its stacked
        cache when it has one, else into a new array (recorded like any value)."""
        if self._cached(snap) and (snap.id, "p") in self.needed and self._kind(snap, "p") == "stack":
            self._record(w, snap, src=self.namer(of))
            return
        w(f"{self.namer(snap)} = {self.namer(of)}.copy()")
        self._record(w, snap)

    def _alloc_cache(self, w: Writer, v: Value, role: str, trips: str | None, top: bool = True) -> None:
        """Allocate `v`'s cache of `role` (`trips` entries, where the plan knows them); `top`: the
        allocation runs once per call (not inside a branch or an enclosing loop)."""
        kind = self._kind(v, role)
        if kind == "list":
            for _ in self._lanes_of(role):
                name = self._cache_name(v, role)
                slot = self.plan.tape_slots.index(name)
                w(f"{name} = _rt.reuse_list({self.tape_in}, {slot})" if self.split else f"{name} = []")
            return
        name = self._cache_name(v, role)
        slot = self.plan.tape_slots.index(name)
        self.buffers.add(name)
        self.counters.add(self._counter(v))
        if kind == "stack":  # rows get their shape from the first entry; a tape is not reused
            arr = cast(T.Array, v.type)
            w(f"{name} = np.empty({(0,) * (arr.ndim + 1)}, np.{arr.dtype})")
            w(f"{self._int(self._counter(v))} = 0")
            return
        dtype = {"f64": "np.float64", "f32": "np.float32", "c128": "np.complex128", "c64": "np.complex64",
                 "int": "np.int64", "bool": "np.bool_"}[cast(T.Scalar, v.type).kind]
        size = trips if kind == "prealloc" else 16
        if self.split:  # a tape passed back in is reused when its buffer is big enough
            w(f"{name} = _rt.reuse_buffer({self.tape_in}, {slot}, {size}, {dtype})")
        elif self.keep and top:  # the cache the last call kept (`run`: `_rt.tape_take`)
            w(f"{name} = _rt.reuse_tape({name}, {size}, {dtype})")
            self.kept.append((name, dtype))
        else:
            w(f"{name} = np.empty({size}, {dtype})")
        w(f"{self._int(self._counter(v))} = 0")

    def fwd_block(self, block: Block, w: Writer) -> None:
        for a in block.args:
            self._record(w, a)
        quiet_end = None  # where the last `if _rt.fp_raises():` block ended
        for op in block.ops:
            for snap, of in self.snap_pre.get(id(op), []):
                self._snapshot(w, snap, of)
            if id(op) in self.quiet_dead:  # nothing reads it, and it raises only by NumPy's error state
                if quiet_end == (id(w), len(w.lines)):  # right after another: in the same block
                    w.depth += 1
                    Emitter(self.namer, w).primal(op)
                    w.depth -= 1
                else:
                    with w.indent("if _rt.fp_raises():"):
                        Emitter(self.namer, w).primal(op)
                quiet_end = (id(w), len(w.lines))
            self.fwd_op(op, w, primal=id(op) not in self.dead and id(op) not in self.quiet_dead)
            for snap, of in self.snap_post.get(id(op), []):
                self._snapshot(w, snap, of)
            for r in op.results:
                self._record(w, r)
            if id(op) in self.trips:
                self._record(w, self.trips[id(op)])

    def fwd_op(self, op: Op, w: Writer, primal: bool = True) -> None:
        """The forward sweep of `op`: its primal (unless `primal` is False: left out by
        `_dead_primal_ops`), its shadow code, and what the tape plan records."""
        if op.regions and not primal:  # a loop or branch left out whole (`_droppable_region`)
            return
        if id(op) in self.checkpoints:  # `transform/checkpoint.py`
            self.checkpoints[id(op)].forward(self, op, w)
            return
        getattr(self, "fwd_" + op.kind)(op, w, primal)

    def fwd_const(self, op: Op, w: Writer, primal: bool) -> None:
        if primal:
            Emitter(self.namer, w).primal(op)

    def fwd_prim(self, op: Op, w: Writer, primal: bool) -> None:
        n, act, e = self.namer, self.act, Emitter(self.namer, w)
        if primal:
            e.primal(op)
        rule = lookup(op.attrs["key"])
        for r in op.results:
            for _ in (n.lanes() if T.is_memory(r.type) and act.is_active(r) else ()):
                if rule.view and not self._shadow_view_in_forward(r):
                    continue
                if rule.view or rule.maybe_view:
                    x = op.args[0]
                    dx = n.d(x) if act.is_active(x) else f"np.zeros_like({n(x)})"
                    expr = e.rule_expr(rule, "jvp", rule.diff_params()[0], dx, n(r), op)
                    if rule.maybe_view:
                        expr = f"_rt.maybe_view_shadow({n(r)}, {n(x)}, {expr}, {dx}, True)"
                    w(f"{n.d(r)} = {expr}")
                elif self._lazy(r) or self._made_by_adjoint(r) or self._adjoint_alloc(r):
                    if n.lane == 0 and r.id in self.shape_needed:
                        for d in range(cast(T.Array, r.type).ndim):
                            w(f"{self._shape_name(r, d)} = {n(r)}.shape[{d}]")
                else:
                    w(f"{n.d(r)} = {zero(r, n(r))}")  # a list allocated inside: a list of zeros

    def fwd_getitem(self, op: Op, w: Writer, primal: bool) -> None:
        n, e = self.namer, Emitter(self.namer, w)
        if primal:
            e.primal(op)
        r = op.result
        for _ in (n.lanes() if T.is_memory(r.type) and self.act.is_active(r) else ()):
            if indexing.is_advanced(op):  # a copy: a shadow of its own
                w(f"{n.d(r)} = np.zeros_like({n(r)})")
            elif self._shadow_view_in_forward(r):
                w(f"{n.d(r)} = {n.d(op.args[0])}[{e.index(op)}]")

    def _shadow_view_in_forward(self, r: Value) -> bool:
        """Whether the forward sweep writes the shadow of view `r` (`dA_1 = dA[1:-1]`): not
        when `r` is defined in a loop, its shadow is re-derived where the adjoint sweep reads
        it (`_remat`), and no shadow code of the forward sweep names it (`_forward_names_shadow`)."""
        if not (isinstance(r.type, T.Array) and self._cached(r) and self._remat(r, "d")):
            return True
        base = self.def_op[r.id].args[0]
        return not isinstance(base.type, T.Array) or self._forward_names_shadow(r)

    def _forward_names_shadow(self, v: Value) -> bool:
        """Whether the forward sweep's shadow code of a reader of array `v` names `v`'s shadow:
        a view of `v` whose shadow it writes, a maybe-view, a list store, a carry or a yield."""
        for o in self.index.readers.get(v.id, ()):
            if o.kind == "prim":
                rule = lookup(o.attrs["key"])
                if rule.maybe_view or (rule.view and o.args[0] is v and any(
                        self.act.is_active(x) and self._shadow_view_in_forward(x) for x in o.results)):
                    return True
            elif o.kind == "getitem":
                r = o.result
                if o.args[0] is v and T.is_memory(r.type) and self.act.is_active(r) and (
                        indexing.is_advanced(o) or self._shadow_view_in_forward(r)):
                    return True
            elif o.kind == "setitem":
                if o.args[1] is v and not isinstance(o.args[0].type, T.Array):
                    return True
            else:
                return True  # carried by a loop, yielded by a branch, returned
        return False

    def fwd_setitem(self, op: Op, w: Writer, primal: bool) -> None:
        n, act, e = self.namer, self.act, Emitter(self.namer, w)
        obj, val = op.args[0], op.args[1]
        if primal and T.is_memory(val.type) and act.is_active(obj) and any(
                isinstance(v.type, T.Array) and v.type.dtype == "bool" for v in indexing.index_values(op)):
            # `x[mask] = v`: NumPy stores element by element, without copying a `v` that
            # overlaps `x`; the store's adjoint takes `v` as it was, so that case is refused
            w(f"_rt.mask_store_apart({n(obj)}, {n(val)}, {str(op.loc)!r})")
        if primal:
            e.primal(op)
        if isinstance(obj.type, T.List) and T.is_memory(val.type) and act.is_active(obj):
            for _ in n.lanes():
                dv = n.d(val) if act.is_active(val) else f"np.zeros_like({n(val)})"
                w(f"{n.d(obj)}[{e.index(op)}] = {dv}")

    def fwd_for(self, op: Op, w: Writer, primal: bool) -> None:
        n = self.namer
        body = op.regions[0]
        self._fwd_assign(w, body.args[1:], op.args[3:])
        a, b, s = (n(v) for v in op.args[:3])
        caches = self.plan.cache_at_loop.get(id(op), [])
        reserve = self.plan.reserve_at_loop.get(id(op), [])
        if caches or reserve:
            trips = n.fresh("_trips")
            self.loop_trips[id(op)] = trips
            w(f"{trips} = {trip_count(a, b, s)}")
            top = any(o is op for o in self.fn.body.ops)
            for v, role in caches:
                size = trips if self._kind(v, role) == "stack" else self._nest_trips(v, trips)
                self._alloc_cache(w, v, role, size, top)
            for v, role in reserve:
                cache, k, need = self._cache_name(v, role), self._counter(v), self._nest_trips(v, trips)
                with w.indent(f"if {k} + {need} > {cache}.shape[0]:"):
                    w(f"{cache} = _rt.grow({cache}, {k} + {need})")
        with w.indent(f"for {n(body.args[0])} in range({range_args(a, b, s)}):"):
            self.fwd_block(body, w)
            self._fwd_assign(w, body.args[1:], body.ops[-1].args)
        self._fwd_assign(w, op.results, body.args[1:])

    def fwd_while(self, op: Op, w: Writer, primal: bool) -> None:
        n = self.namer
        cond, body = op.regions
        trip = self.trips.get(id(op))
        if trip is not None:
            w(f"{n(trip)} = 0")
        self._fwd_assign(w, cond.args, op.args)
        with w.indent(self.while_header.get(id(op), "while True:")):
            self.fwd_block(cond, w)
            self._fwd_assign(w, body.args, cond.args)
            if trip is not None:
                w(f"{n(trip)} += 1")
            self.fwd_block(body, w)
            self._fwd_assign(w, cond.args, body.ops[-1].args)
        self._fwd_assign(w, op.results, cond.args)

    def fwd_if(self, op: Op, w: Writer, primal: bool) -> None:
        for region, header in zip(op.regions, (f"if {self.namer(op.args[0])}:", "else:")):
            with w.indent(header):
                self.fwd_block(region, w)
                self._fwd_assign(w, op.results, region.ops[-1].args)

    def fwd_condition(self, op: Op, w: Writer, primal: bool) -> None:
        with w.indent(f"if not {self.namer(op.args[0])}:"):
            w("break")

    def fwd_yield(self, op: Op, w: Writer, primal: bool) -> None:
        pass  # the enclosing loop or branch assigns what it yields

    fwd_return = fwd_yield

    def _fwd_assign(self, w: Writer, dsts: list[Value], srcs: list[Value]) -> None:
        n = self.namer
        pairs = []
        for d, s in zip(dsts, srcs):
            pairs.append((n(d), n(s)))
            for _ in (n.lanes() if T.is_memory(d.type) and self.act.is_active(d) else ()):
                ds = n.d(s) if self.act.is_active(s) else f"np.zeros_like({n(s)})"
                pairs.append((n.d(d), ds))
        assign_all(w, pairs)
