"""The adjoint sweep: each op's adjoint, in reverse order, regions walked backwards.

Contract: `rev_block` writes the adjoint code of a block: the restores at the head of a
loop body's reversed iteration (popped from the caches the tape plan keeps, or recomputed),
the zero initialisation of float adjoints, then `rev_<kind>` for each op in reverse order
(mirroring the forward emitter's `fwd_<kind>`). It names every value it reads through
`needs.py`, which is what the tape plan then provides. Semantics (seed 002): the adjoint of
a store `x[i] = v` adds `dx[i]` into the adjoint of `v`, then sets `dx[i] = 0` (an
increment `x[i] += e`, `increments.py`: `dv = dx[i]` and `de += dv` alone); an `out=`
call consumes and zeroes the shadow of its output; `for` loops run backwards over the same
range, `while` loops replay their recorded trip count, `if` replays its condition.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import cast

from ...ir import types as T
from ...ir.core import Block, Op, Value
from ...rules import indexing
from ...rules.registry import lookup, uses
from ..emit import span, trip_count
from ..writer import Writer, splice
from .augmented import AugmentedEmitter

# the rules whose adjoint of a number operand is one reduction (`_scalar_reduction`)
_DIFFERENCES = frozenset({"sub", "numpy.subtract"})
_SUMS = frozenset({"add", "numpy.add"}) | _DIFFERENCES
_PRODUCTS = frozenset({"mul", "numpy.multiply"})
_QUOTIENTS = frozenset({"truediv", "numpy.divide", "numpy.true_divide"})


class AdjointEmitter(AugmentedEmitter):
    def rev_block(self, block: Block, top: bool = False,
                  seeds: Sequence[tuple[Value, Callable[[], str]]] = ()) -> Writer:
        """The adjoint code of `block`: pops, adjoint initialisation, then its ops reversed."""
        body = Writer()
        outer_top, self.at_top = self.at_top, top
        for v, expr in seeds:  # expr: the seed's expression in the current lane
            if self.act.is_active(v) and not T.is_memory(v.type):
                for _ in self.namer.lanes():
                    body(f"{self.adj(v)} += {expr()}")
        for op in reversed(block.ops):
            self.at_top = top
            self.rev_op(op, body)
        self.at_top = top  # also while this block's recomputed values are written (`_top_remat`)
        head = Writer()
        if top:
            self._resolve_lazy(head, body)
        elif self.depth[id(block)] > 0:
            self._resolve_loop_lazy(block, body)
        if self.depth[id(block)] > 0:
            defined = self._defined_in(block)
            remat = {}
            # the block's recompute decisions (`TapePlanner._remat`, kept in the plan) are taken
            # here, latest definition first, each registering what its recomputation reads
            for v in reversed(defined):
                for role in ("d", "p"):
                    if (v.id, role) in self.needed and self._remat(v, role):
                        for lane in self._lanes_of(role):
                            remat[(v.id, role, lane)] = self._remat_expr(v, role)
            for v in defined:
                for role in ("p", "d"):
                    if (v.id, role) in self.needed and self._cached(v):
                        if (v.id, role, 0) in remat:
                            for lane in self._lanes_of(role):
                                name = self.namer(v) if role == "p" else self.namer.d(v)
                                head(f"{name} = {remat[(v.id, role, lane)]}")
                        else:
                            self._restore(head, v, role)
        defined = self._defined_in(block)
        if top:
            defined = list(self.fn.params) + defined
        zeros = [self.namer.d(v) for v in defined if v.id in self.adj_used and not T.is_memory(v.type)
                 for _ in self.namer.lanes()]
        for name in _fold_zero_inits(zeros, body):
            head(f"{name} = 0.0")
        splice(head, body)
        self.at_top = outer_top
        return head

    def _restore(self, w: Writer, v: Value, role: str) -> None:
        if self._kind(v, role) == "list":
            for _ in self._lanes_of(role):
                name = self.namer(v) if role == "p" else self.namer.d(v)
                w(f"{name} = {self._cache_name(v, role)}.pop()")
        else:
            k = self._counter(v)
            w(f"{k} -= 1")
            w(f"{self.namer(v)} = {self._cache_name(v, role)}[{k}]")

    def _recompute(self, v: Value, top: bool = False) -> str:
        """The expression recomputing `v` (see `_recomputable`)."""
        if not self._cached(v) or (not top and self._restored(v)):
            return self.use(v)
        op = self.def_op[v.id]
        if op.kind == "getitem":
            entry = self.plan.entry_loads.get(id(op))  # a copy taken at a loop's entry (`_entry_loop`)
            base = self._recompute(op.args[0]) if entry is None else self.contents(entry, op.args[0])
            return f"{base}[{self.e.index(op, self._recompute)}]"
        if isinstance(v.type, T.Array) and lookup(op.attrs["key"]).cheap:
            def name(a: Value) -> str:
                return self.contents(op, a) if isinstance(a.type, T.Array) else self._recompute(a)
            return f"({self.e.call(op, with_out=False, name=name)})"
        return f"({self.e.call(op, with_out=False, name=self._recompute)})"

    def _remat_expr(self, v: Value, role: str = "d") -> str:
        op = self.def_op[v.id]
        base = op.args[0]
        if role == "d" and self._adjoint_alloc(v):
            if (v.id, "p") in self.needed:
                return f"np.zeros_like({self.use(v)})"
            self.shape_needed.add(v.id)
            return f"np.zeros({self._shape_expr(v)}, np.{cast(T.Array, v.type).dtype})"
        if role == "p":
            expr = self._recompute(v, top=True)
            return expr[1:-1] if op.kind == "prim" else expr
        if op.kind == "getitem":
            return f"{self.use_d(base)}[{self.e.index(op, self.use)}]"
        rule = lookup(op.attrs["key"])
        return self.e.rule_expr(rule, "jvp", rule.diff_params()[0], self.use_d(base), None, op, name=self.use)

    def _defined_in(self, block: Block) -> list[Value]:
        out = list(block.args)
        for op in block.ops:
            for snap, _ in self.snap_pre.get(id(op), []):
                out.append(snap)
            out.extend(op.results)
            for snap, _ in self.snap_post.get(id(op), []):
                out.append(snap)
            if id(op) in self.trips:
                out.append(self.trips[id(op)])
        return out

    def rev_op(self, op: Op, w: Writer) -> None:
        if id(op) in self.checkpoints:  # `transform/checkpoint.py`
            self.checkpoints[id(op)].adjoint(self, op, w)
            return
        if op.kind in ("for", "while", "if"):
            getattr(self, "rev_" + op.kind)(op, w)  # regions: lanes inside
            return
        for _ in self.namer.lanes():
            getattr(self, "rev_" + op.kind)(op, w)

    def rev_const(self, op: Op, w: Writer) -> None:
        pass

    def rev_yield(self, op: Op, w: Writer) -> None:
        pass  # handled by the enclosing region

    rev_condition = rev_yield

    def rev_return(self, op: Op, w: Writer) -> None:
        if self.seed_return:
            v = op.args[0]
            if self.act.is_active(v):
                w(f"{self.adj(v)} += {self.seeds[self.namer.lane]}")

    def rev_getitem(self, op: Op, w: Writer) -> None:
        base, r = op.args[0], op.result
        if indexing.is_advanced(op) and self.act.is_active(r) and self.act.is_active(base):
            # a gather: its adjoint is scattered back, repeated indices accumulating
            dr = self.use_d(r) if T.is_memory(r.type) else self.adj(r)
            w(f"_rt.scatter_add({self.use_d(base)}, {self._index_arg(op)}, {dr})")
            return
        if T.is_memory(r.type) or not self.act.is_active(r) or self.increments.get(op):
            return  # a view or list item: its shadow aliases the base's shadow; an increment's load
        idx = self.e.index(op, self.use)
        w(f"{self.use_d(base)}[{idx}] += {self.adj(r)}")

    def rev_setitem(self, op: Op, w: Writer) -> None:
        obj, val = op.args[0], op.args[1]
        if not self.act.is_active(obj):
            return
        if isinstance(obj.type, T.List) and T.is_memory(val.type):
            return  # storing a reference: the shadow reference was stored in the forward sweep
        if indexing.is_advanced(op):
            self._rev_scatter(op, w)
            return
        inc = self.increments.get(op)
        if inc is not None and not (self.act.is_active(inc.term) and inc.term.type.differentiable):
            return  # `x[s] += c`, `c` inactive: its adjoint leaves `dx[s]` as it is
        idx = self.e.index(op, self.use)
        dobj = self.use_d(obj)
        if self.act.is_active(val):
            if T.is_memory(val.type):
                g = self.namer.fresh("_g")
                copy = f"np.copy({dobj if idx == '...' else f'{dobj}[{idx}]'})"
                if T.is_complex(obj.type) and not T.is_complex(val.type):
                    copy = f"np.real({copy})"  # a real array stored into a complex one
                w(f"{g} = {copy}")
                w(f"{dobj}[{idx}] = 0.0")
                if (self.at_top or self._loop_lazy(val)) and self._defers_unbroadcast(val, op):
                    self.deferred.add(val.id)  # a store broadcasts like an elementwise op
                    self.deferred_to[val.id] = op
                    self.accumulate(w, val, g, fresh=True)
                elif self.extents.fits(val, self._adjoint_shape(op)):
                    self.whole.add((val.id, g))
                    self.accumulate(w, val, g, fresh=True)
                else:
                    self.accumulate(w, val, f"_rt.unbroadcast({g}, {self.use(val)})", fresh=True)
                return
            if isinstance(obj.type, T.Array) and isinstance(val.type, T.Scalar):
                sel = f"{dobj}[{idx}]"
                # a store of a scalar into more than one element (a slice, `...`, a row of a
                # 2-d array) broadcasts it: its adjoint sums the selection
                if not _one_element(op):
                    sel = f"np.sum({sel})"
                if T.is_complex(obj.type) and not T.is_complex(val.type):
                    sel = f"np.real({sel})"  # a real number stored into a complex array
                w(f"{self.adj(val)} += {sel}")
                if inc is not None:
                    return  # `x[s] += e`: `dx[s]` stays, the load's adjoint would give it back
            else:
                w(f"{self.adj(val)} += {dobj}[{idx}]")
        w(f"{dobj}[{idx}] = 0.0")

    def _index_arg(self, op: Op) -> str:
        """An advanced index as one call argument, its arrays as the op saw them."""
        return indexing.index_expr(self.e, op, lambda v: self.contents(op, v))

    def _rev_scatter(self, op: Op, w: Writer) -> None:
        """Adjoint of `x[idx] = v` with an advanced index (`rules/indexing.py`): `v` gets
        the adjoint of the occurrences that survive (the last of repeated indices), and
        `dx[idx]` is zeroed."""
        obj, val = op.args[0], op.args[1]
        g = f"_rt.store_adjoint({self.use_d(obj)}, {self._index_arg(op)})"
        if not self.act.is_active(val):
            w(g)
        elif T.is_complex(obj.type) and not T.is_complex(val.type):  # a real value stored into complex memory
            w(f"{self.use_d(val)} += np.real(_rt.unbroadcast({g}, {self.use(val)}))" if T.is_memory(val.type)
              else f"{self.adj(val)} += np.real(np.sum({g}))")
        elif T.is_memory(val.type):
            w(f"{self.use_d(val)} += _rt.unbroadcast({g}, {self.use(val)})")
        else:
            w(f"{self.adj(val)} += np.sum({g})")

    def rev_prim(self, op: Op, w: Writer) -> None:
        act, n = self.act, self.namer
        rule = lookup(op.attrs["key"])
        out = op.args[op.attrs["out"]] if "out" in op.attrs else None
        if rule.view or rule.alloc:
            return
        if rule.maybe_view:
            r, x = op.result, op.args[0]
            if act.is_active(r) and act.is_active(x):
                # a copy (not a view) gets its own shadow: send it back to x's
                expr = self.e.rule_expr(rule, "vjp", rule.diff_params()[0], self.use_d(r), None, op, name=self.use)
                with w.indent(f"if not _rt.is_view({self.use(r)}, {self.use(x)}):"):
                    w(f"{self.use_d(x)} += {expr}")
            return
        if rule.nondiff:
            if out is not None and act.is_active(out):
                w(f"{self.use_d(out)}[...] = 0.0")
            if op.attrs["key"].startswith("zymo.errstate."):
                self._rev_errstate(op, w)
            return
        target = out if out is not None else (op.results[0] if op.results else None)
        if target is None or not act.is_active(target):
            return
        if out is None and self._adjoint_is_zero(target):
            return
        vals = self.e.arg_values(rule, op)
        actives = [(p, v) for p, v in vals.items()
                   if p in rule.vjps() and act.is_active(v) and v.type.differentiable]
        inc = self.increments.get(op)
        if inc is not None:  # `x[s] += e`: the load's share stays in `dx[s]` (`increments.py`)
            actives = [(p, v) for p, v in actives if v is not inc.load.result]
            if not actives:
                return
        zero_after = None
        if out is not None:
            dout = self.use_d(out)
            if not actives:
                w(f"{dout}[...] = 0.0")
                return
            out_roots = self.act.roots.get(out.id) or {None}
            overlaps = any(not self.act.roots.get(v.id) or self.act.roots[v.id] & out_roots
                           for _, v in actives if T.is_memory(v.type))
            if overlaps and self._update_in_place(rule, op, out, actives, dout, w):
                return
            if overlaps:
                # an operand's shadow may be the output's: consume a copy first
                g = n.fresh("_g")
                w(f"{g} = {dout}.copy()")
                w(f"{dout}[...] = 0.0")
            else:
                g, zero_after = dout, dout
        elif self._uniform(target):
            g = self.namer.d(target)  # one number (`_uniform`): scaled by the vjps, never summed
        else:
            g = self.use_d(target, ("def",)) if T.is_memory(target.type) else self.adj(target)
        uniform = out is None and self._uniform(target)
        if uniform and self._square(op, actives):  # `x * x`: `g * x + x * g` is `2.0 * (g * x)`, to the bit
            self.accumulate(w, actives[0][1], f"2.0 * ({self._vjp(rule, actives[0][0], g, op, target)})", fresh=True)
            actives = []
        for p, v in actives:
            if uniform:  # a fresh shadow starts as this term broadcast (`_resolve_lazy`)
                self.accumulate(w, v, self._vjp(rule, p, g, op, target), fresh=True)
                continue
            self._accumulate_vjp(rule, p, v, g, op, target, w, fresh=zero_after is None)
        if zero_after is not None:
            w(f"{zero_after}[...] = 0.0")

    def _rev_errstate(self, op: Op, w: Writer) -> None:
        """The adjoint of a `with np.errstate(...)` block runs under the same settings: the
        adjoint sweep meets the block's exit first (and sets them, keeping the state it finds
        in a name of its own), then the block's ops, then its entry (and restores that state)."""
        if op.attrs["key"] == "zymo.errstate.exit":
            enter_key = op.attrs["pos"][1][1]
            w(f"_errstate_{self.namer(op.args[0])} = {lookup(enter_key).template}")
        else:
            w(f"np.seterr(**_errstate_{self.namer(op.results[0])})")

    def _accumulate_vjp(self, rule, p: str, v: Value, g: str, op: Op, target: Value, w: Writer,
                        fresh: bool) -> None:
        if self._uniform(v) and op.attrs.get("key") == "numpy.sum":
            w(f"{self.namer.d(v)} = {g}")  # the sum's only operand: its adjoint is this number
            return
        if self._whole_sum(rule, op, v):
            w(f"{self.use_d(v)} += {g}")  # the number, added to every element: `x` itself is not read
            return
        if rule.elementwise and isinstance(target.type, T.Array) and isinstance(v.type, T.Scalar):
            reduced = self._scalar_reduction(rule, p, g, op, target)
            if reduced is not None:
                self.accumulate(w, v, reduced)
                return
        expr = self._vjp(rule, p, g, op, target)
        if rule.elementwise and isinstance(target.type, T.Array):
            # a loop temporary's shadow copies a contribution that is not fresh (`_loop_first_assign`)
            if ((fresh and self.at_top) or self._loop_lazy(v)) and self._defers_unbroadcast(v, op):
                self.deferred.add(v.id)
                self.deferred_to[v.id] = target
            elif isinstance(v.type, T.Array) and self.extents.fits(v, self._adjoint_shape(target)):
                self.whole.add((v.id, expr))  # the adjoint already has `v`'s shape
            else:
                if self._loop_lazy(v):  # not a reference: the first contribution reads the primal's shape
                    self.needed.add((v.id, "d"))
                    shape_of = self.namer.d(v)
                else:
                    shape_of = self.use(v) if not T.is_memory(v.type) or self._lazy(v) else self.use_d(v)
                expr = f"_rt.unbroadcast({expr}, {shape_of})"
        self.accumulate(w, v, expr, fresh=fresh)

    def _square(self, op: Op, actives: list) -> bool:
        """Whether `op` is a real product of one value by itself (`x * x`, `np.multiply(x, x)`):
        its two terms `g * x` and `x * g` are one number `p`, and `p + p` is `2.0 * p` exactly
        (doubling rounds nothing; an overflow is inf either way), so the adjoint adds one term
        (one temporary fewer in the Python backend: a loss's `np.sum(x * x)`)."""
        return (op.attrs.get("key") in _PRODUCTS and len(actives) == 2 and actives[0][1] is actives[1][1]
                and not any(T.is_complex(v.type) for v in (*op.args, *op.results)))

    def _scalar_reduction(self, rule, p: str, g: str, op: Op, target: Value) -> str | None:
        """The adjoint of a number `p` of `x + y`, `x - y`, `x * y` or `x / y` whose result is
        an array, in the Python backend, as one reduction of the array adjoint `g`: `np.sum(g)`
        (negated for `y` of `x - y`) without a negated copy; for a product the sum of `g` times
        the array operand (`_rt.sum_product`: no product array, no `unbroadcast` pass); for `x /
        y`, `-sum(g * ans) / y` when the result is kept unchanged until the adjoint sweep reads it
        (no snapshot of `x`), else `-sum(g * x) / (y * y)`. Real operands only. None: the rule's
        vjp, summed back to the number's shape as usual. Under Numba only the quotient is
        reduced so (one division, where the rule's expression divides every element: softmax's
        normalization by its row sum spent a fifth of its adjoint dividing); the sums and
        products fuse with their sum into one loop there anyway."""
        key = op.attrs["key"]
        if any(T.is_complex(v.type) for v in (*op.args, *op.results)):
            return None
        if self.numba and not (key in _QUOTIENTS and p == "y"):
            return None
        if key in _SUMS:
            return f"-np.sum({g})" if key in _DIFFERENCES and p == "y" else f"np.sum({g})"
        if not (key in _PRODUCTS or (key in _QUOTIENTS and p == "y")):
            return None
        vals = self.e.arg_values(rule, op)
        other = vals["y" if p == "x" else "x"]
        if not isinstance(other.type, T.Array):
            return None
        if key in _PRODUCTS:
            return f"_rt.sum_product({g}, {self.contents(op, other)})"
        y = self.use(vals["y"])
        if self.overwrites.first_writer(op, target) is None:  # the result as the op left it
            return f"-_rt.sum_product({g}, {self.contents(op, target, post=True)}) / {y}"
        return f"-_rt.sum_product({g}, {self.contents(op, other)}) / ({y} * {y})"

    def _whole_sum(self, rule, op: Op, v: Value) -> bool:
        """Whether `op` is `np.sum(v)` over every axis, `v` a real array whose shadow exists
        where the adjoint is added (not one the adjoint sweep creates from its first
        contribution): `dv += g` adds the number `g` to every element, as
        `_rt.expand_reduced(g, v, None, False)` would, without reading `v` (no snapshot of
        contents the sum's adjoint never needed)."""
        return (op.attrs.get("key") == "numpy.sum" and isinstance(v.type, T.Array) and v.type.ndim > 0
                and not T.is_complex(v.type) and not (self._lazy(v) or self._loop_lazy(v))
                and set(self.e.bind(rule, op)) == {"x"})

    def _update_in_place(self, rule, op: Op, out: Value, actives: list, dout: str, w: Writer) -> bool:
        """`np.f(x, y, out=x)` (`x += y`, `np.tanh(h, out=h)`), elementwise: the other operands
        take their adjoints from `dx` first, then `dx[...] = vjp_x(dx)` (nothing at all when
        that is `dx` itself), instead of copying `dx`, zeroing it and accumulating back.
        False (the caller copies) when `x` is read twice or another operand may overlap it."""
        selfs = [p for p, v in actives if v is out]
        others = [(p, v) for p, v in actives if v is not out]
        if not rule.elementwise or len(selfs) != 1 or not isinstance(out.type, T.Array):
            return False
        out_roots = self.act.roots.get(out.id) or {None}
        if any(T.is_memory(v.type) and (not self.act.roots.get(v.id) or self.act.roots[v.id] & out_roots)
               for _, v in others):
            return False
        expr = self._vjp(rule, selfs[0], dout, op, out)
        for p, v in others:
            self._accumulate_vjp(rule, p, v, dout, op, out, w, fresh=False)
        if expr != dout:
            w(f"{dout}[...] = {expr}")
        return True

    def _vjp(self, rule, p: str, g: str, op: Op, target: Value) -> str:
        used = uses(rule, "vjp", p)
        ans = None
        if "ans" in used:
            ans = self.contents(op, target, post=True) if isinstance(target.type, T.Array) else self.use(target)

        def name(v: Value) -> str:
            return self.contents(op, v) if isinstance(v.type, T.Array) else self.use(v)

        # only the parameters the rule reads are recorded as needed
        vals = self.e.arg_values(rule, op)
        read = {v.id for p2, v in vals.items() if p2 in used}
        lazy = {v.id for v in vals.values() if v.id not in read}
        expr = self.e.rule_expr(rule, "vjp", p, g, ans, op,
                                name=lambda v: self.namer(v) if v.id in lazy else name(v))
        if not T.is_complex(vals[p].type) and (getattr(rule, "complex_adjoint", False) or any(
                T.is_complex(v.type) for v in (*op.args, *op.results))):
            expr = f"np.real({expr})"  # a real operand of a complex op: JAX's convention (rules/complex_.py)
        return expr

    # -- regions ------------------------------------------------------------------
    def _carry_seeds(self, carries: list[Value], results: list[Value], w: Writer) -> list[Callable[[], str] | None]:
        """Adjoint variables flowing backwards through the carries (floats only)."""
        names: list[Callable[[], str] | None] = []
        for c, r in zip(carries, results):
            if self.act.is_active(c) and not T.is_memory(c.type):
                def nm(c: Value = c) -> str:
                    return self.namer.lane_role(c, "dnext", "d" + c.hint.lstrip("$") + "_next")

                for _ in self.namer.lanes():
                    w(f"{nm()} = {self.adj(r) if self.act.is_active(r) else '0.0'}")
                names.append(nm)
            else:
                names.append(None)
        return names

    def _carry_out(self, w: Writer, names: list, dsts: list[Value]) -> None:
        for nm, d in zip(names, dsts):
            if nm is not None and self.act.is_active(d) and not T.is_memory(d.type):
                for _ in self.namer.lanes():
                    w(f"{self.adj(d)} += {nm()}")

    def _carry_back(self, inner: Writer, names: list, carries: list[Value]) -> None:
        for nm, c in zip(names, carries):
            if nm is not None:
                for _ in self.namer.lanes():
                    inner(f"{nm()} = {self.adj(c)}")

    def rev_for(self, op: Op, w: Writer) -> None:
        body = op.regions[0]
        carries = body.args[1:]
        names = self._carry_seeds(carries, op.results, w)
        ys = body.ops[-1].args
        for nm, c in zip(names, carries):
            if nm is not None:
                self.adj_used.add(c.id)  # read after the body: initialise it at block entry
        inner = self.rev_block(body, seeds=[(y, nm) for y, nm in zip(ys, names) if nm])
        self._carry_back(inner, names, carries)
        start, stop, step = (self.use(v) for v in op.args[:3])
        iv = self.namer(body.args[0])
        # the iterations backwards, as a count up: `range` with a negative step keeps LLVM from
        # proving the index non-negative (bounds wraparound stays in the loop; ~10% on gmm).
        # With step 1 the count is `range(stop)` from 0, else `range(_rt.span(start, stop))`
        # (one select; unsigned bounds do not wrap), and the index `stop - 1 - _r`: LLVM sees
        # `_r < stop - start` directly (a count behind a conditional expression, three blocks
        # in Numba's IR, cost gmm's adjoint 15%).
        r = self.namer.fresh("_r")
        # the index is a Python int, as `range` gives it to the primal: a bound that may be an
        # unsigned NumPy int (`NeverUnsigned`) is read through `int` first (`n - 1 - _r` of a uint64
        # `n` is a uint64, and `i - 2` then wraps round where the primal's `i - 2` is -2)
        if step == "1":
            hi = self._signed_name(op.args[1], stop, w)
            head, index = f"for {r} in range({span(start, stop)}):", f"{iv} = {hi} - 1 - {r}"
        else:
            start = self._signed_name(op.args[0], start, w)
            trip = self.namer.fresh("_n")
            w(f"{trip} = {trip_count(start, stop, step)}")
            k = op.args[2].const if op.args[2].is_const and isinstance(op.args[2].const, int) else None
            if k is not None and k < 0 and start != "0":  # `start - |k| * j`: no negative int added
                back = f"({trip} - 1 - {r})" + ("" if k == -1 else f" * {-k}")
                index = f"{iv} = {start} - {back}"
            else:
                back = f"({trip} - 1 - {r}) * {step}"
                index = f"{iv} = {back}" if start == "0" else f"{iv} = {start} + {back}"
            head = f"for {r} in range({trip}):"
        with w.indent(head):
            w(index)
            splice(w, inner)
        self._carry_out(w, names, op.args[3:])

    def _signed_name(self, v: Value, text: str, w: Writer) -> str:
        """`text` (the name of int `v`), or a name for `int(text)` written by `w` where `v` may
        be unsigned (`analysis.bounds.NeverUnsigned`)."""
        if self.never_unsigned(v):
            return text
        name = self.namer.fresh(f"{text}_int" if text.isidentifier() else "_bound")
        w(f"{name} = int({text})")
        return name

    def rev_while(self, op: Op, w: Writer) -> None:
        cond, body = op.regions
        trip = self.trips.get(id(op))
        if trip is None:
            trip = Value(T.INT, "_trip")
            self.values[trip.id] = trip
            self.def_block[trip.id] = self.blocks_of_op[id(op)]
            self.trips[id(op)] = trip
        names = self._carry_seeds(body.args, op.results, w)
        ys = body.ops[-1].args
        for nm, c in zip(names, body.args):
            if nm is not None:
                self.adj_used.add(c.id)
        inner = self.rev_block(body, seeds=[(y, nm) for y, nm in zip(ys, names) if nm])
        self._carry_back(inner, names, body.args)
        with w.indent(f"for _ in range({self.use(trip)}):"):
            splice(w, inner)
        self._carry_out(w, names, op.args)

    def rev_if(self, op: Op, w: Writer) -> None:
        cond = self.use(op.args[0])
        branches = []
        for region in op.regions:
            seeds = [(y, lambda r=r: self.adj(r)) for y, r in zip(region.ops[-1].args, op.results)
                     if self.act.is_active(r) and not T.is_memory(r.type)]
            branches.append(self.rev_block(region, seeds=seeds))
        with w.indent(f"if {cond}:"):
            splice(w, branches[0])
        if branches[1].lines:
            with w.indent("else:"):
                splice(w, branches[1])


_WORD = re.compile(r"[A-Za-z_]\w*")


def _fold_zero_inits(names: list[str], body: Writer) -> list[str]:
    """The scalar adjoints of `names` that still need `d = 0.0` at the head of `body`.

    When the first line of `body` that mentions `d` is `d += e` at the block's own level
    (not inside a nested loop or branch) and `e` does not read `d`, that line becomes
    `d = e` and the initialisation goes. Besides a shorter program, this keeps `0.0 + e`
    (which LLVM may not fold: it is not `e` when `e` is -0.0) off loop-carried chains
    such as `dt_next` in an inner loop."""
    wanted = set(names)
    first: dict[str, int] = {}
    for i, line in enumerate(body.lines):
        for tok in _WORD.findall(line):
            if tok in wanted and tok not in first:
                first[tok] = i
    keep = []
    for name in names:
        at = first.get(name)
        prefix = f"{name} += "
        if at is not None and body.lines[at].startswith(prefix):
            rest = body.lines[at][len(prefix):]
            if name not in _WORD.findall(rest):
                body.lines[at] = f"{name} = {rest}"
                continue
        keep.append(name)
    return keep


def _index_parts(op: Op) -> list:
    tree = op.attrs["index"]
    return list(tree[1]) if tree[0] == "t" else [tree]


def _one_element(op: Op) -> bool:
    """Whether `setitem`/`getitem` `op` on an array selects a single element: a scalar index
    for every axis (no slice, `...` or `None`, none left out)."""
    parts = _index_parts(op)
    return (len(parts) == cast(T.Array, op.args[0].type).ndim
            and all(t[0] == "v" and isinstance(op.args[t[1]].type, T.Scalar) for t in parts))
