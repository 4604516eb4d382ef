"""The tape plan: how the adjoint sweep gets each value it reads (Enzyme's CacheUtility).

Contract: for each (value, role) the adjoint sweep reads (`needs.py`), one decision among
read in place (defined outside every loop), recompute (`_remat`: a view's or list item's
shadow taken again, a number recomputed from loads nothing overwrites, `_recomputable`, or a
function of numbers that are the same in every iteration of its loop, `_invariant`),
snapshot (a copy of an array a later write may change, `Needs.contents`; also the copy a
scalar load in a loop nest reads from when it loads values the array had at the nest's entry,
`_entry_loop`), or a per-iteration
cache: a list, a stacked array buffer (`_stackable`), or a NumPy buffer allocated once with
the trip counts of its loop nest (`_nest`) or grown geometrically (`_kind`). `_plan_caches`
writes them all into `self.plan` (`tape.TapePlan`) before the forward sweep is written.
Whether a number in a loop is recomputed depends on which numbers the adjoint sweep restores
anyway, and recomputing one makes the adjoint sweep read its operands: so it is decided, once,
as the adjoint sweep closes the value's block (`AdjointEmitter.rev_block`), and kept in
`plan.recompute`; no decision is taken once the plan is complete (asserted).
"""
from __future__ import annotations

from ...ir import types as T
from ...ir.core import Op, Value, walk
from ...rules import indexing
from ...rules.registry import lookup
from ..emit import trip_count
from .needs import Needs
from .tape import Decision


class TapePlanner(Needs):
    def _remat(self, v: Value, role: str) -> bool:
        """Whether the shadow of view/list item `v` is recomputed in the adjoint sweep
        (`dmat = dmat_vec[i]`) instead of cached: true unless a list store may rebind the
        item it was read from."""
        if not self._cached(v):
            return False
        op = self.def_op.get(v.id)
        if op is None or op.kind not in ("getitem", "prim") or op.result is not v:
            return False
        if role == "d" and self._adjoint_alloc(v):
            return True
        if role == "p":
            # a number loaded from memory that nothing overwrites later is re-read, and cheap
            # arithmetic on such loads, constants, loop indices and numbers the adjoint sweep
            # restores anyway is recomputed, not cached. Decided once: the answer depends on
            # what is already restored, which grows while the adjoint sweep is written: taken
            # when the adjoint sweep closes `v`'s block (`AdjointEmitter.rev_block`), kept in the plan.
            if v.id not in self.plan.recompute:
                assert not self.plan.complete, "a tape decision taken after the plan was complete"
                self.plan.recompute[v.id] = self._recomputable(v, 8, top=True)
            return self.plan.recompute[v.id]
        if op.kind == "getitem":
            base = op.args[0]
            if indexing.is_advanced(op):
                return False  # a copy's shadow is its own memory: cached, not re-derived
            if isinstance(base.type, T.List):
                roots = self.act.roots.get(base.id)
                for o in walk(self.fn.body):
                    if o.kind == "setitem" and isinstance(o.args[0].type, T.List) and (
                            not roots or self.act.roots.get(o.args[0].id, roots) & roots):
                        return False
            return True
        return op.kind == "prim" and lookup(op.attrs["key"]).view

    def _restored(self, v: Value) -> bool:
        """Whether number `v`, cached, is restored (or recomputed) by the adjoint sweep anyway:
        at the head of its block's reversed iteration, before anything there reads it."""
        return self._cached(v) and isinstance(v.type, T.Scalar) and (v.id, "p") in self.needed

    def _recomputable(self, v: Value, budget: int, top: bool = False) -> bool:
        """Whether scalar `v` can be recomputed in the adjoint sweep from values live there,
        with at most `budget` operations: loads of memory nothing overwrites later (elements
        no later store reaches: `Overwrites.first_element_writer`), numbers the adjoint sweep
        restores anyway (`_restored`; not `v` itself, `top`), the extents of arrays it has,
        and arithmetic (+ - * / // % and negation; `**` by an int constant from -4 to 4,
        `_small_power`) on such values."""
        if not self._cached(v) or (not top and self._restored(v)):
            return True
        op = self.def_op.get(v.id)
        if budget <= 0 or op is None or op.kind not in ("getitem", "prim") or op.results != [v]:
            return False
        if isinstance(v.type, T.Array):
            if self._asked_if_viewed(v):
                return False  # a recomputed array is a new object: never the one a view was taken of
            if op.kind == "prim" and lookup(op.attrs["key"]).cheap and "out" not in op.attrs:
                return self._cheap_array(op, budget)
            # a view is the same memory however often it is taken: recompute it from its base
            if op.kind == "getitem" and not _basic_index(op):
                return False
            if op.kind == "prim" and (not lookup(op.attrs["key"]).view or "out" in op.attrs):
                return False
            return all(self._recomputable(a, budget - 1) for a in op.args)
        if not isinstance(v.type, T.Scalar):
            return False
        if op.kind == "getitem":
            base = op.args[0]
            if not isinstance(base.type, T.Array) or self._cached(base):
                return False
            if self.overwrites.first_element_writer(op) is not None and self._entry_loop(op) is None:
                return False
            return all(self._recomputable(a, budget - 1) for a in op.args[1:])
        if op.kind == "prim" and (lookup(op.attrs["key"]).cheap or _small_power(op)) and "out" not in op.attrs:
            return all(self._recomputable(a, budget - 1) for a in op.args)
        if op.kind == "prim" and self._invariant(op):
            return all(self._recomputable(a, budget - 1) for a in op.args)
        if op.kind == "prim" and op.attrs["key"] == "zymo.dim":
            # an array's shape never changes: read it again from an array the sweep still has
            return all(not self._cached(a) for a in op.args)
        return False

    def _invariant(self, op: Op) -> bool:
        """Whether `op` (in a loop) is a function of its numbers alone (rules declaring
        `value_numbered`: `math.sqrt(float_n)`, never a random draw) whose operands are the same
        in every iteration of the innermost loop around it (`_same_each_time`): then so is its
        result, which a cache would store once per iteration. Recomputed instead, however costly
        the function: the compiled backends' loops compute it once (LLVM moves it out of the
        loop), and the Python backend's reverse loop calls it where it would have read the
        cache. It raised nothing where the forward sweep computed it, from the same operands."""
        loops = self.index.loops(op)
        if not loops or not _numeric(op):
            return False
        return all(self._same_each_time(a, loops[0], 4) for a in op.args)

    def _same_each_time(self, v: Value, inner: Op, depth: int) -> bool:
        """Whether number `v`, read in loop `inner`'s body, holds one value in all its iterations:
        defined outside the loop (a parameter, a block argument of an enclosing loop, an op
        around it), a constant, or `_numeric` arithmetic of such numbers."""
        if not isinstance(v.type, T.Scalar):
            return False
        owner = self.def_op.get(v.id)
        if owner is None:  # a parameter, or a block argument of a loop (its variable, a carry)
            return self.index.block_owner.get(id(v.owner)) is not inner
        if owner is not inner and not any(x is inner for x in self.index.loops(owner)):
            return True
        if owner.kind == "const":
            return True
        return (depth > 0 and _numeric(owner) and owner.results == [v]
                and all(self._same_each_time(a, inner, depth - 1) for a in owner.args))

    def _entry_loop(self, op: Op) -> Op | None:
        """The loop at whose entry a copy of array `base` is taken for scalar load `op`
        (`base[idx]`) that a later store may overwrite: the adjoint sweep then loads the
        value from the copy (`AdjointEmitter._recompute`) instead of a cache entry per run.
        Taken when every value `op` loads is the one its element had at the entry of the
        outermost loop around it (`Overwrites.entry_loop`: trmm's `B[k, j]`, `k > i`, rows
        not yet updated) and `op` runs in a nest of two loops or more, one of which its index
        does not follow (`Overwrites.reloads`): the cache would hold one entry per run, more
        than the array's elements, where the copy is one pass over the array (trmm's cache had
        n**3 / 2 entries for n**2 elements). Decided once per op, kept in the plan."""
        loads = self.plan.entry_loads
        if id(op) not in loads:
            loop = self.overwrites.entry_loop(op)
            deep = len(self.index.loops(op)) >= 2 and self.overwrites.reloads(op)
            loads[id(op)] = loop if loop is not None and deep else None
        return loads[id(op)]

    def _cheap_array(self, op: Op, budget: int) -> bool:
        """Whether the array result of cheap arithmetic `op` (`q * q`) is recomputed in the
        adjoint sweep rather than cached: its scalar operands are recomputable, and the
        contents its array operands had are there without a new copy (read in place, or a
        copy the adjoint sweep already reads). Decided once per op, kept in the plan."""
        cheap = self.plan.cheap_ops
        if id(op) not in cheap:
            snaps = {of.id for _, of in self.snap_pre.get(id(op), [])}
            cheap[id(op)] = all(
                (a.id in snaps or self.overwrites.first_writer(op, a, include_self=True) is None)
                if isinstance(a.type, T.Array) else
                (isinstance(a.type, T.Scalar) and self._recomputable(a, budget - 1))
                for a in op.args)
        return cheap[id(op)]

    def _stackable(self, v: Value) -> bool:
        """Whether array `v` (a value the adjoint sweep reads) can be cached by copying it into
        a row of a stacked buffer: its shape is fixed, and its contents cannot change after it
        is recorded (a fresh result nothing writes later, or a snapshot), and nothing asks
        whether it is a view."""
        if v.id in self.why:
            return self.shapes.fixed(self.why[v.id][1])
        op = self.def_op.get(v.id)
        if op is None or op.kind != "prim" or op.results != [v] or not self.shapes.fixed(v):
            return False
        rule = lookup(op.attrs["key"])
        if rule.view or rule.maybe_view or self.overwrites.first_writer(op, v) is not None:
            return False
        return not self._asked_if_viewed(v)

    def _asked_if_viewed(self, v: Value) -> bool:
        """Whether the adjoint sweep asks whether a result of a maybe-view rule (`reshape`)
        views array `v` (`_rt.is_view(r, v)`): it must read the object the forward sweep had."""
        return any(o.kind == "prim" and lookup(o.attrs["key"]).maybe_view and o.args[0] is v
                   for o in self.index.readers.get(v.id, ()))

    def _cache_name(self, v: Value, role: str) -> str:
        """The cache of `v` (role "p") or of its shadow in the current lane (role "d")."""
        if role == "p":
            return self.namer.cache(v)
        return self.namer.lane_role(v, "dcache", "_cache_d" + v.hint.lstrip("$"))

    def _plan_caches(self) -> None:
        """Where each cache is allocated. A float/int/bool cache is a NumPy buffer with a
        counter (one entry per iteration of its loop at most). When its loop is a `for` in a
        nest of `for` loops whose trip counts are known at the outermost one's entry
        (`_nest`), room for the whole nest (the product of the trip counts) is made there:
        the buffer is allocated there when that loop is outside every other loop, and
        otherwise allocated at the start and grown there. In any other case it is allocated
        at the start and grows geometrically, checked per entry. With the exact size, gmm's
        gradient runs 8% faster than when it grew at each inner loop's entry: that check (a
        branch that may rebind the buffer) was in the loop nest (same-process A/B). An array
        whose rows all have one shape is copied into a stacked buffer ("stack",
        `(entries, *shape)`), allocated like the scalar buffers; other array caches, and
        cached shadows (their identity matters), are Python lists. Every value the adjoint
        sweep reads gets its `Decision`; the plan is then complete."""
        plan = self.plan
        for (vid, role) in sorted(self.needed):
            v = self.values[vid]
            if not self._cached(v) or self._remat(v, role):
                plan.decisions.append(self._uncached_decision(v, role))
                continue
            for _ in self._lanes_of(role):
                plan.tape_slots.append(self._cache_name(v, role))
            kind = self._kind(v, role)
            if kind == "prealloc":
                plan.cache_at_loop.setdefault(id(self._nest(v)[0]), []).append((v, role))
            elif kind == "stack" and self._top_for(v):
                plan.cache_at_loop.setdefault(id(self._loop_of(self.def_block[vid])), []).append((v, role))
            else:
                plan.cache_at_start.append((v, role))
                if kind == "grow" and self._nest(v):
                    # room for the whole nest is made at its entry, not checked per iteration
                    plan.reserve_at_loop.setdefault(id(self._nest(v)[0]), []).append((v, role))
                    plan.reserved.add(self._cache_name(v, role))
            how = {"prealloc": "buffer", "grow": "growing buffer"}.get(kind, kind)
            made = "a copy of an array made" if vid in self.why else "defined"
            plan.decisions.append(Decision(v, role, how, f"{made} inside a loop, read by the adjoint sweep"))
        plan.complete = True

    def _uncached_decision(self, v: Value, role: str) -> Decision:
        """The decision for a value the adjoint sweep reads without a per-iteration cache."""
        if self._cached(v):  # `_remat`
            if role == "d":
                why = ("allocated by the adjoint sweep where it is used" if self._adjoint_alloc(v)
                       else "a view or list item, taken again from its base's shadow")
            else:
                op = self.def_op[v.id]
                view = op.kind == "getitem" or lookup(op.attrs["key"]).view
                entry = self.plan.entry_loads.get(id(op))
                why = ("a view, taken again from its base" if isinstance(v.type, T.Array) and view
                       else f"a load from the copy taken before the loop at line {entry.loc.line}"
                       if entry is not None
                       else "a load of memory nothing overwrites later" if op.kind == "getitem"
                       else "an array's extent" if op.attrs["key"] == "zymo.dim"
                       else "cheap arithmetic on values the adjoint sweep has")
            return Decision(v, role, "recompute", why)
        if v.id in self.why:
            op, _of, writer, post = self.why[v.id]
            return Decision(v, role, "snapshot", f"taken {'after' if post else 'before'} line {op.loc.line}: "
                                                 f"the write at line {writer.loc.line} may overwrite it")
        why = ("a loop index" if v.id in self.recomputed else "a constant" if v.is_const
               else "defined outside every loop")
        return Decision(v, role, "in place", why)

    def _kind(self, v: Value, role: str) -> str:
        """"list", "stack" (arrays of one shape), "prealloc" (once, at its top-level for loop's
        entry) or "grow"."""
        if role == "p" and isinstance(v.type, T.Array) and self._stackable(v):
            return "stack"
        if role == "d" or not isinstance(v.type, T.Scalar):
            return "list"
        nest = self._nest(v)
        return "prealloc" if nest and self.depth[id(self.blocks_of_op[id(nest[0])])] == 0 else "grow"

    def _nest(self, v: Value) -> list[Op]:
        """The `for` loops around `v`'s definition whose trip counts are all known at the
        entry of the outermost of them, outermost first: `v`'s own loop (when a `for`), then
        each `for` around them while their bounds are constants or defined outside it.
        Empty when `v`'s loop is not a `for`."""
        loop = self._loop_of(self.def_block[v.id])
        if loop is None or loop.kind != "for":
            return []
        nest = [loop]
        while True:
            outer = self._loop_of(self.blocks_of_op[id(nest[0])])
            if outer is None or outer.kind != "for" or any(
                    not b.is_const and self._inside(self.def_block[b.id], outer)
                    for inner in nest for b in inner.args[:3]):
                return nest
            nest.insert(0, outer)

    def _nest_trips(self, v: Value, trips: str) -> str:
        """The entries `v`'s cache gets in one run of its nest (`_nest`), at the outermost
        loop's entry, whose own trip count is `trips`."""
        inner = [trip_count(*(self.namer(b) for b in loop.args[:3])) for loop in self._nest(v)[1:]]
        return " * ".join([trips, *inner])

    def _top_for(self, v: Value) -> bool:
        """Whether `v` is defined in a `for` loop (directly) that is outside every other loop."""
        loop = self._loop_of(self.def_block[v.id])
        return loop is not None and loop.kind == "for" and self.depth[id(self.blocks_of_op[id(loop)])] == 0


def _basic_index(op: Op) -> bool:
    """Whether getitem `op` indexes with integers, slices, `None` and `...` only (a view)."""
    from ...ir.core import tree_values

    return all(isinstance(a.type, T.Scalar) for a in tree_values(op.attrs["index"], op.args))


def _small_power(op: Op) -> bool:
    """`x ** k`, `k` an int constant from -4 to 4: a few multiplications (Numba) or one call,
    where a cache costs a store, a load and tape (`dx ** 2` in a time loop, cavity_flow's)."""
    if op.attrs.get("key") != "pow" or len(op.args) != 2:
        return False
    k = op.args[1].const if op.args[1].is_const else None
    return type(k) is int and -4 <= k <= 4


def _numeric(op: Op) -> bool:
    """Whether `op` computes a function of its operands alone (a rule declaring
    `value_numbered`, no `out=`)."""
    return op.kind == "prim" and "out" not in op.attrs and lookup(op.attrs["key"]).value_numbered
