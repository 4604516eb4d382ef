"""Shadow allocation and adjoint shapes: where each shadow is made, what shape an adjoint has.

Contract: the questions of this module decide, from the IR and the analyses, where the shadow
of a temporary is created (`_lazy`: a temporary of the body whose shadow the adjoint sweep
creates; `_loop_lazy`: the same inside a loop; `_adjoint_alloc`: a loop temporary's shadow
allocated in the adjoint sweep from recorded extents), and which adjoints keep another shape
than their value's (`_uniform`: one number; `_defers_unbroadcast`: the broadcast shape of the
one use). `_resolve_lazy` and `_resolve_loop_lazy` then turn the first contribution to such a
shadow, in the written adjoint sweep, into its assignment.
"""
from __future__ import annotations

import ast
from typing import cast

from ...ir import types as T
from ...ir.core import Block, Op, Value
from ...rules import indexing
from ...rules.registry import lookup
from ..writer import Writer
from .state import ReverseState


class ShadowAllocation(ReverseState):
    def _private_temporary(self, v: Value, views: bool = False) -> bool:
        """`v` is a fresh active array (not a view, not an `out=` buffer) whose shadow nothing
        in the forward sweep refers to (no view of `v`, no list holding it, no carry). With
        `views`, views of `v` are allowed when they are private in the same sense
        (`_private_views`): their shadows, views of `v`'s, are re-derived where the adjoint
        sweep reads them and the forward sweep writes none (`_shadow_view_in_forward`)."""
        if not (isinstance(v.type, T.Array) and self.act.is_active(v)):
            return False
        op = self.def_op.get(v.id)
        if op is None or op.kind != "prim" or op.results != [v] or "out" in op.attrs:
            return False
        rule = lookup(op.attrs["key"])
        if rule.view or rule.maybe_view:
            return False
        return self._private_views(v, views)

    def _private_views(self, v: Value, views: bool) -> bool:
        """Whether nothing in the forward sweep refers to the shadow of array `v` through its
        readers: each reads its contents (an op that is no view), stores it into an array, or
        (with `views`) is a basic-index view or a view rule whose result is private again."""
        for o in self.index.readers.get(v.id, ()):
            if o.kind == "prim":
                r = lookup(o.attrs["key"])
                if r.maybe_view or (r.view and not (views and o.args[0] is v and len(o.results) == 1
                                                     and self._private_views(o.results[0], views))):
                    return False
            elif o.kind == "getitem":
                if o.args[0] is v and T.is_memory(o.result.type) and not (
                        views and isinstance(o.result.type, T.Array) and not indexing.is_advanced(o)
                        and self._private_views(o.result, views)):
                    return False
            elif o.kind == "setitem":
                if o.args[1] is v and not isinstance(o.args[0].type, T.Array):
                    return False
            else:
                return False  # carried by a loop, yielded by a branch, returned
        return True

    def _lazy(self, v: Value) -> bool:
        """Whether `v` is a temporary of the function's body (outside every loop and branch) whose shadow the
        adjoint sweep creates: `dt = <first adjoint>` when a single accumulation at the top level reaches
        it, else zeros at the start of the adjoint sweep (never in the forward sweep)."""
        return (not self._cached(v) and v.id in self.def_op
                and self.def_block[v.id] is self.fn.body and self._private_temporary(v))

    def _loop_lazy(self, v: Value) -> bool:
        """Whether `v` is a temporary of a loop body whose shadow the adjoint sweep may create
        where its first contribution is written (`_resolve_loop_lazy`): a fresh active array
        defined in a block inside a loop (`_private_temporary`: nothing in the forward sweep
        refers to its shadow), every reader of which is an op of that same block, so that
        every contribution to its adjoint is a statement of that block's reversed body."""
        block = self.def_block.get(v.id)
        return (v.id in self.def_op and self._cached(v) and isinstance(v.type, T.Array) and v.type.ndim > 0
                and self._private_temporary(v)
                and all(self.blocks_of_op[id(o)] is block for o in self.index.readers.get(v.id, ())))

    def _adjoint_alloc(self, v: Value) -> bool:
        """Whether the shadow of loop temporary `v` is allocated in the adjoint sweep, where it
        is used, instead of in the forward sweep and cached: `v` is a fresh array (not a view,
        not an `out=` buffer) with a fixed shape, and nothing in the forward sweep refers to
        its shadow (no list holding it, not carried out of its block; views of `v` only when
        they are private too, their shadows re-derived from this one in the adjoint sweep)."""
        return self._cached(v) and self.shapes.fixed(v) and self._private_temporary(v, views=True)

    def _made_by_adjoint(self, v: Value) -> bool:
        """Whether loop temporary `v`'s shadow is one the forward sweep need not allocate: the
        adjoint sweep never restores it (not `needed`: it writes the shadow before any read,
        as a first accumulation or a reduction's adjoint kept as a number) and nothing in the
        forward sweep refers to it (`_private_temporary`). Known only once the adjoint sweep
        is written, as the forward sweep is."""
        return self._cached(v) and (v.id, "d") not in self.needed and self._private_temporary(v)

    def _shape_name(self, v: Value, d: int) -> str:
        """The int recording extent `d` of the (fixed) shape of `v` in the forward sweep (set
        to 0 at the start, so the name exists wherever the adjoint sweep reads it; a number,
        not an int array: an array cost Numba a compile of `np.zeros` per program)."""
        return self.namer.role(v, f"shape{d}", f"_shape_{v.hint.lstrip('$')}_{d}")

    def _shape_expr(self, v: Value) -> str:
        dims = [self._shape_name(v, k) for k in range(cast(T.Array, v.type).ndim)]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def _uniform(self, v: Value) -> bool:
        """Whether the adjoint of array `v` is kept as one number: `v` is the fresh result of an
        elementwise op, read only by `np.sum(v)` (every axis) in the same block, so its adjoint is
        that sum's adjoint broadcast, the same in every element; and every active operand of
        its op is an array of `v`'s shape (`analysis/extents.py`), so the op's vjps scale that
        number to arrays of the operands' shapes without a sum over broadcast dimensions.
        `t = dr * w; s = np.sum(t)` then gives `dt = ds` and `ddr += dt * w`: no array of ones,
        no copy of `t` for its shape. Decided once per value."""
        if v.id not in self.uniform:
            self.uniform[v.id] = self._uniform_check(v)
        return self.uniform[v.id]

    def _uniform_check(self, v: Value) -> bool:
        d = self.def_op.get(v.id)
        if not (isinstance(v.type, T.Array) and d is not None and d.kind == "prim" and d.results == [v]
                and "out" not in d.attrs and lookup(d.attrs["key"]).elementwise):
            return False
        if self.index.reader_count(v) != 1:
            return False
        reader = next((o for o in self.blocks_of_op_list(d) if any(a is v for a in o.args)), None)
        if (reader is None or reader.kind != "prim" or reader.attrs["key"] != "numpy.sum"
                or reader.attrs.get("pos") != (("v", 0),) or reader.attrs.get("kw") or "out" in reader.attrs
                or not reader.results or not self.act.is_active(reader.results[0])):
            return False
        rule = lookup(d.attrs["key"])
        for p, a in self.e.arg_values(rule, d).items():
            if p in rule.vjps() and self.act.is_active(a) and a.type.differentiable:
                if not (isinstance(a.type, T.Array) and self.extents.same(a, v)):
                    return False
        return True

    def _adjoint_shape(self, target: Value | Op):
        """The symbolic shape of the adjoint of `target` (a value, or a `setitem` op's
        destination): its own, or for a deferred temporary that of the use it was deferred to."""
        prev = target
        while isinstance(target, Value) and target.id in self.deferred:
            prev, target = target, self.deferred_to[target.id]
        if isinstance(target, Value):
            return self.extents.shape(target)
        dest = self.extents.store_shape(target)
        stored = prev if isinstance(prev, Value) else target.args[1]
        if dest is None or len(dest[0]) != getattr(stored.type, "ndim", 0):
            return None  # a store that drops leading length-1 axes: the terms keep them
        return dest

    def _defers_unbroadcast(self, v: Value, use: Op) -> bool:
        """Whether the adjoint of temporary `v` may keep the (broadcast) shape of its one use's
        result: `v` is the fresh result of an elementwise op and `use`, elementwise too, is its
        only reader. The defining op's vjps then scale that adjoint by factors of `v`'s shape,
        which are constant along the dimensions `v` lacks, so summing them away later, where
        the chain reaches an operand that is not such a temporary, gives the same numbers
        (linearity) and the chain's elementwise adjoints fuse into one expression."""
        if not (self._lazy(v) or self._loop_lazy(v)):
            return False
        d = self.def_op[v.id]
        if not lookup(d.attrs["key"]).elementwise:
            return False
        return self.index.reader_count(v) == 1 and any(a is v for a in use.args)

    def _resolve_lazy(self, head: Writer, body: Writer) -> None:
        """Create the shadows of the temporaries outside loops (`_lazy`): when the first
        reference is an accumulation at the top level of a fresh array and the only other one
        is its defining op's read, that accumulation becomes the assignment; otherwise the
        shadow starts as zeros at the head of the adjoint sweep."""
        for (vid, lane), refs in self.lazy_refs.items():
            v = self.values[vid]
            if not self._lazy(v):
                continue  # a loop temporary's (`_resolve_loop_lazy`)
            self.namer.lane = lane
            name = self.namer.d(v)
            first = refs[0]
            if (first[0] == "acc" and first[1] is body and cast(T.Array, v.type).ndim > 0 and vid not in self.deferred
                    and all(r[0] in ("def", "acc") for r in refs[1:]) and any(r[0] == "acc" for r in refs[1:])
                    and _fresh_array_expr(first[3])):
                # several contributions, the first a new array (`_rt.unbroadcast(y * -g, z)`): it
                # becomes the shadow (a copy only if its shape or dtype is not the shadow's), the
                # others add into it, where zeros and one more pass were written before
                line = body.lines[first[2]]
                indent = line[:len(line) - len(line.lstrip())]
                body.lines[first[2]] = f"{indent}{name} = _rt.as_shape({first[3]}, {self.namer(v)})"
                self.needed.add((vid, "p"))
            elif (first[0] == "acc" and first[1] is body and all(r[0] == "def" for r in refs[1:])
                  and cast(T.Array, v.type).ndim > 0):
                line = body.lines[first[2]]
                indent = line[:len(line) - len(line.lstrip())]
                expr = first[3]
                # an unbroadcast adjoint has the shadow's whole shape; anything else (a
                # reduction's adjoint may be one number that `+=` broadcasts) is broadcast into
                # a fresh array: one pass instead of zeros and an add
                if not (expr.startswith("_rt.unbroadcast(") or (vid, expr) in self.whole) and vid not in self.deferred:
                    # a new array of the shadow's shape and dtype is adopted as it is (`as_shape`)
                    helper = "as_shape" if _fresh_array_expr(expr) else "as_tangent"
                    expr = f"_rt.{helper}({expr}, {self.namer(v)})"
                    self.needed.add((vid, "p"))
                body.lines[first[2]] = f"{indent}{name} = {expr}"
            else:
                head(f"{name} = np.zeros_like({self.namer(v)})")
                self.needed.add((vid, "p"))
                if vid in self.deferred:  # the deferred sum over broadcast dimensions is due here
                    for r in refs:
                        if r[0] == "acc":
                            line = r[1].lines[r[2]]
                            cut = len(line) - len(r[3])
                            r[1].lines[r[2]] = f"{line[:cut]}_rt.unbroadcast({r[3]}, {self.namer(v)})"
            self.namer.lane = 0

    def _resolve_loop_lazy(self, block: Block, body: Writer) -> None:
        """Create the shadows of `block`'s loop temporaries (`_loop_lazy`) where the reversed
        iteration first contributes to them: that accumulation becomes the assignment
        (`_loop_first_assign`), so the shadow is neither zeroed (in the adjoint sweep, from
        extents the forward sweep recorded) nor allocated by the forward sweep and cached.
        When that is not possible (in some lane), the shadow stays as it was (zeros where it
        is used, or allocated and cached by the forward sweep), and a deferred sum over
        broadcast dimensions (`_defers_unbroadcast`) is written into each contribution."""
        plans: dict[int, list] = {}
        for (vid, lane), refs in self.lazy_refs.items():
            if self.def_block.get(vid) is block and self._loop_lazy(self.values[vid]):
                plans.setdefault(vid, []).append((lane, refs))
        for vid, lanes in plans.items():
            v = self.values[vid]
            edits = []
            for lane, refs in lanes:
                self.namer.lane = lane
                edits.append(self._loop_first_assign(v, refs, body))
            if all(e is not None for e in edits):
                for idx, text in cast(list[tuple[int, str]], edits):
                    body.lines[idx] = text
                self.needed.discard((vid, "d"))
            elif vid in self.deferred:
                for lane, refs in lanes:
                    self.namer.lane = lane
                    for r in refs:
                        if r[0] == "acc":
                            line = r[1].lines[r[2]]
                            cut = len(line) - len(r[3])
                            r[1].lines[r[2]] = f"{line[:cut]}_rt.unbroadcast({r[3]}, {self.namer.d(v)})"
            self.namer.lane = 0

    def _loop_first_assign(self, v: Value, refs: list, body: Writer) -> tuple[int, str] | None:
        """The line (index, text) assigning loop temporary `v`'s shadow its first
        contribution, or None. That contribution must be an accumulation at the block's own
        level, and every other reference another one or the defining op's read. The assigned
        array must be one only the shadow holds when anything adds into it later, and have
        `v`'s shape (or the deferred use's): a contribution summed back to `v`'s shape reads
        that shape from the primal `v` (only when the adjoint sweep reads it anyway), any
        other is copied into an array like the primal's (`_rt.as_shape`/`as_tangent`), or,
        known to have the shape (deferred, or `whole`), copied unless it is fresh."""
        first = refs[0]
        if (first[0] != "acc" or first[1] is not body or first[5] != 0
                or any(r[0] not in ("def", "acc") or (r[0] == "acc" and r[1] is not body) for r in refs[1:])):
            return None
        name, expr, fresh = self.namer.d(v), first[3], first[4]
        several = any(r[0] == "acc" for r in refs[1:])
        has_p = (v.id, "p") in self.needed
        if expr.startswith("_rt.unbroadcast(") and expr.endswith(f", {name})"):
            if has_p:
                like = self.namer(v)
            elif self.shapes.fixed(v):  # the extents the forward sweep records (`_shape_name`)
                self.shape_needed.add(v.id)
                like = f"np.empty({self._shape_expr(v)})"
            else:
                return None
            expr, shaped = f"{expr[:-len(name) - 1]}{like})", True
        else:
            shaped = v.id in self.deferred or (v.id, expr) in self.whole
        if shaped:
            # arithmetic is a new array; another expression (a name, a view, a helper's result)
            # is adopted only when nothing else holds it (`fresh`) and nothing adds into it later
            new = _fresh_array_expr(expr)
            rhs = expr if new or (fresh and not several) else f"np.copy({expr})"
        elif has_p:
            helper = "as_shape" if fresh and _fresh_array_expr(expr) else "as_tangent"
            rhs = f"_rt.{helper}({expr}, {self.namer(v)})"
        else:
            return None
        line = body.lines[first[2]]
        indent = line[:len(line) - len(line.lstrip())]
        return first[2], f"{indent}{name} = {rhs}"

    def _adjoint_is_zero(self, v: Value) -> bool:
        """Whether temporary `v`, whose shadow the adjoint sweep creates (`_lazy`, `_loop_lazy`),
        got no contribution at all (its readers are comparisons, or their results are not
        active): every reader follows `v`'s definition, so their adjoints are written before
        its op's adjoint; that adjoint, all zeros, is then left out, with the zeros it read."""
        if not (isinstance(v.type, T.Array) and (self._lazy(v) or self._loop_lazy(v))) or self._uniform(v):
            return False
        return all(r[0] == "def" for r in self.lazy_refs.get((v.id, self.namer.lane), ()))


def _fresh_array_expr(expr: str) -> bool:
    """Whether `expr` (an adjoint contribution) evaluates to memory nothing else holds: an
    arithmetic expression, possibly summed back to an operand's shape by `_rt.unbroadcast`
    (which returns a new array or the one it was given). A name, a view or a helper's result
    may be shared, and a shadow adopting it would be written in place by later contributions."""
    try:
        e = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return False
    if (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name)
            and e.func.value.id == "_rt" and e.func.attr == "unbroadcast" and len(e.args) == 2):
        e = e.args[0]
    # `np.where(c, a, b)` always returns a new array
    where = (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name)
             and e.func.value.id == "np" and e.func.attr == "where" and len(e.args) == 3 and not e.keywords)
    return where or isinstance(e, (ast.BinOp, ast.UnaryOp))
