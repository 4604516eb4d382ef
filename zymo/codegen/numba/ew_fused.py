"""One loop nest for a run of elementwise statements (`ew_groups.fuse_runs` writes the calls),
for Numba-compiled derivative code.

Contract: the intrinsic `ew_run(spec, xs)` (callable from Numba-compiled code only) runs the
statements of `spec` (`ew_groups`: `t<k> = e`, `x<i>[...] = e`, `x<i> += e`, over the operands
`xs` and the temporaries `t<k>`; `-> t<k>, ...` the temporaries it returns, as a tuple; none:
it returns None) with NumPy's results, each statement's as `elementwise.ew_new`, `ew_set` and
`acc_ew` give them (to the rounding of accumulation order, below).

Fused: at typing, every statement is fast as its own intrinsic would be (`elementwise`'s
module contract), every target is a writable array of one rank N >= 1, no operand or
temporary has a higher rank, and each returned temporary has rank N. At run time, with S the
first target's shape: every target has shape S, every array operand broadcasts to S (extent 1
or a lower rank), every returned temporary's broadcast shape is S, and any two distinct
operands one of which the run writes either reach disjoint memory (byte ranges), or are the
same elements (same data, same steps over S: then each element is read and written in
statement order, as NumPy does), or are both only accumulated into (`+=`, never read by the
run otherwise: the additions into one element happen in another order, the same up to
rounding). Then one loop nest over S computes, at each element, every statement in order
(indexed by items along S's last axis where every array operand steps by whole items there,
which LLVM vectorizes; else by bytes, as a field of a packed record array steps): a
temporary is a number there (cast to its dtype, as storing it would), written into a new
array only when returned. When a run-time condition fails, the statements run one by one
(`ew_loops._statement`, each as its intrinsic runs it, which raises NumPy's errors); when a
typing condition fails, the statements are compiled as written (the intrinsics' calls).
An accumulated target that is not an array is refused at typing (TypingError): the run
cannot rebind it.
"""
from __future__ import annotations

import ast
import operator

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.imputils import impl_ret_new_ref
from numba.extending import intrinsic
from numba.np.arrayobj import load_item, store_item

from ... import pyast
from .elementwise import _as_written, _set_fast
from .ew_loops import _broadcast_shape, _element, _hoist, _shared, _span, _statement, apply
from .ew_types import _dtype, _is_as_shape, _writable, new_array


class _Step:
    """One statement of a spec: `kind` "new", "set" or "acc"; `target` (the temporary's or
    operand's index); `tree` over the run's names (`x<i>`, `t<k>`); `local` the same over
    `x0, x1, ...` (`refs`: the run's names in that order)."""

    def __init__(self, text: str):
        node = ast.parse(text).body[0]
        if isinstance(node, ast.AugAssign):
            self.kind, name, value = "acc", node.target.id, node.value  # type: ignore[attr-defined]
        elif isinstance(node.targets[0], ast.Subscript):  # type: ignore[attr-defined]
            self.kind, name, value = "set", node.targets[0].value.id, node.value  # type: ignore[attr-defined]
        else:
            self.kind, name, value = "new", node.targets[0].id, node.value  # type: ignore[attr-defined]
        self.target = int(name[1:])
        self.tree = value
        self.refs: list[str] = []
        for n in pyast.walk(value):
            if isinstance(n, ast.Name) and n.id[:1] in "xt" and n.id[1:].isdigit() and n.id not in self.refs:
                self.refs.append(n.id)
        local = {r: f"x{i}" for i, r in enumerate(self.refs)}

        class _Local(ast.NodeTransformer):
            def visit_Name(self, n: ast.Name) -> ast.Name:
                return ast.Name(local.get(n.id, n.id), ast.Load())
        self.local = _Local().visit(ast.parse(ast.unparse(value), mode="eval")).body
        self.text = ast.unparse(self.local)


def _parse_spec(spec) -> tuple[list[_Step], list[int]]:
    if not isinstance(spec, types.StringLiteral):
        raise TypingError("zymo: ew_run takes a constant spec")
    body, _, ret = spec.literal_value.partition(" -> ")
    return [_Step(s) for s in body.split("; ")], [int(t.strip()[1:]) for t in ret.split(",") if t.strip()]


class _Plan:
    """The typing of a run: `temps` (the temporaries' array types), `rank` (N), whether it is
    `fused`, and the type it returns."""

    def __init__(self, typingctx, steps: list[_Step], kept: list[int], xs):
        self.steps, self.kept, self.xs = steps, kept, xs
        self.temps: dict[int, types.Array] = {}
        for s in steps:
            if s.kind == "acc" and not isinstance(xs[s.target], types.Array):
                raise TypingError(f"zymo internal error: ew_run accumulates into {xs[s.target]}, not an array")
        self.fused = self._type(typingctx)
        if self.fused:
            self.ret = types.Tuple([self.temps[k] for k in kept]) if kept else types.none

    def local_types(self, s: _Step) -> tuple:
        return tuple(self.xs[int(r[1:])] if r[0] == "x" else self.temps[int(r[1:])] for r in s.refs)

    def _type(self, typingctx) -> bool:
        targets = [self.xs[s.target] for s in self.steps if s.kind != "new"]
        if not targets or len({d.ndim for d in targets}) != 1 or targets[0].ndim < 1:
            return False
        self.rank = targets[0].ndim
        for s in self.steps:
            tys = self.local_types(s)
            if any(isinstance(x, types.Array) and x.ndim > self.rank for x in tys):
                return False
            arrays = [x for x in tys if isinstance(x, types.Array)]
            if s.kind == "new":
                dt = _dtype(typingctx, s.local, tys) if arrays else None
                if dt is None:
                    return False
                self.temps[s.target] = types.Array(dt, max(x.ndim for x in arrays), "C")
            elif s.kind == "set" and not _set_fast(typingctx, self.xs[s.target], s.local, tys):
                return False
            elif s.kind == "acc" and (not _writable(self.xs[s.target])
                                      or _dtype(typingctx, s.local, tys, self.xs[s.target]) is None):
                return False
            if any(_is_as_shape(n) and not isinstance(tys[int(n.args[1].id[1:])], types.Array)
                   for n in pyast.walk(s.local)):
                return False  # a tangent of a number's shape: its intrinsic refuses it
        return all(self.temps[k].ndim == self.rank for k in self.kept)

    def as_written(self) -> str:
        """The statements as their intrinsics' calls: the body of a function of `xs`."""
        out = "".join(f"    x{i} = xs[{i}]\n" for i in range(len(self.xs)))
        for s in self.steps:
            args = f"{s.text!r}, ({''.join(r + ', ' for r in s.refs)})"
            if s.kind == "new":
                out += f"    t{s.target} = _ew.ew_new({args})\n"
            elif s.kind == "set":
                out += f"    _ew.ew_set(x{s.target}, {args})\n"
            else:
                out += f"    x{s.target} = _ew.acc_ew(x{s.target}, {args})\n"
        kept = "".join(f"t{k}, " for k in self.kept)
        return out + (f"    return ({kept})\n" if self.kept else "")


@intrinsic(prefer_literal=True)
def ew_run(typingctx, spec, xs):
    steps, kept = _parse_spec(spec)
    plan = _Plan(typingctx, steps, kept, xs)
    if not plan.fused:
        ret, codegen_written = _as_written(typingctx, "run", "xs", plan.as_written(), (xs,), (1,))
        return ret(spec, xs), codegen_written

    def codegen(context, builder, signature, args):
        return _shared(context, builder, ("run", spec.literal_value), plan.ret, (xs,), [args[1]],
                       lambda context, builder, vals: _Run(context, builder, plan, vals[0]).run())
    return plan.ret(spec, xs), codegen


class _Run:
    """The lowering of one fused run (module contract)."""

    def __init__(self, context, builder, plan: _Plan, xsval):
        self.context, self.builder, self.plan, self.xsval = context, builder, plan, xsval
        self.intp = context.get_value_type(types.intp)
        self.zero, self.one = ir.Constant(self.intp, 0), ir.Constant(self.intp, 1)

    def run(self):
        context, builder, plan = self.context, self.builder, self.plan
        self._geometry()
        slots = {k: cgutils.alloca_once(builder, context.get_value_type(plan.temps[k])) for k in plan.kept}
        with builder.if_else(self._checks(), likely=True) as (fused, apart):
            with fused:
                with builder.if_else(self._whole_items(), likely=True) as (items, nbytes):
                    with items:
                        self._fused(slots, by_items=True)
                    with nbytes:
                        self._fused(slots, by_items=False)
            with apart:
                self._apart(slots)
        if not plan.kept:
            return context.get_dummy_value()
        tup = context.make_tuple(builder, plan.ret, [builder.load(slots[k]) for k in plan.kept])
        return impl_ret_new_ref(context, builder, plan.ret, tup)

    def _geometry(self):
        """Each array operand's data, shape, steps and byte range; S, the first target's shape."""
        context, builder, xs = self.context, self.builder, self.plan.xs
        self.arrays = {}
        for i, x in enumerate(xs):
            if isinstance(x, types.Array):
                ary = context.make_array(x)(context, builder, builder.extract_value(self.xsval, i))
                shape = cgutils.unpack_tuple(builder, ary.shape, x.ndim)
                strides = cgutils.unpack_tuple(builder, ary.strides, x.ndim)
                data = builder.ptrtoint(ary.data, self.intp)
                lo, hi = _span(builder, self.intp, data, shape, strides, ary.itemsize)
                self.arrays[i] = (ary, shape, strides, data, lo, hi)
        first = next(s.target for s in self.plan.steps if s.kind != "new")
        self.shape = self.arrays[first][1]

    def _padded(self, i):
        _, shape, strides, _, _, _ = self.arrays[i]
        pad = len(self.shape) - len(shape)
        return [self.one] * pad + list(shape), [self.zero] * pad + list(strides)

    def _checks(self):
        """Whether the run may be fused here (module contract), and each array operand's steps
        over S (`self.steps`, 0 where it broadcasts)."""
        builder, plan, S = self.builder, self.plan, self.shape
        ok = cgutils.true_bit
        self.steps = {}
        for i in self.arrays:
            shape, strides = self._padded(i)
            eq = [builder.icmp_signed("==", a, b) for a, b in zip(shape, S)]
            for e, a in zip(eq, shape):
                ok = builder.and_(ok, builder.or_(e, builder.icmp_signed("==", a, self.one)))
            self.steps[i] = [builder.select(e, st, self.zero) for e, st in zip(eq, strides)]
        for s in plan.steps:
            if s.kind != "new":
                for a, b in zip(self._padded(s.target)[0], S):
                    ok = builder.and_(ok, builder.icmp_signed("==", a, b))
        ok = builder.and_(ok, self._kept_shapes())
        return builder.and_(ok, self._no_overlap())

    def _whole_items(self):
        """Whether every array operand's step along S's last axis is a whole number of its
        items (`self.last`: that step in items), as NumPy's arrays of numbers have: the loop
        nest then indexes typed pointers by items along that axis, which LLVM vectorizes (a
        step of bytes it does not); else (a field of a packed record array) it steps by bytes
        there too: the same loop nest, the same bits (running the statements apart would add
        overlapping accumulations in another order)."""
        builder, plan = self.builder, self.plan
        ok = cgutils.true_bit
        self.last = {}
        for i, steps in self.steps.items():
            size = ir.Constant(self.intp, self.context.get_abi_sizeof(self.context.get_data_type(plan.xs[i].dtype)))
            step = steps[-1] if steps else self.zero
            ok = builder.and_(ok, builder.icmp_signed("==", builder.srem(step, size), self.zero))
            self.last[i] = builder.sdiv(step, size)
        return ok

    def _kept_shapes(self):
        """Whether each returned temporary's broadcast shape is S."""
        builder, plan, S = self.builder, self.plan, self.shape
        shapes: dict[str, list] = {f"x{i}": self._padded(i)[0] for i in self.arrays}
        ok = cgutils.true_bit
        for s in plan.steps:
            if s.kind != "new":
                continue
            ext = [self.one] * len(S)
            for r in s.refs:
                for k, e in enumerate(shapes.get(r, [])):
                    ext[k] = builder.select(builder.icmp_signed("!=", e, self.one), e, ext[k])
            shapes[f"t{s.target}"] = ext
            if s.target in plan.kept:
                for a, b in zip(ext, S):
                    ok = builder.and_(ok, builder.icmp_signed("==", a, b))
        return ok

    def _no_overlap(self):
        """Whether every two distinct operands, one written, are disjoint, the same elements, or
        both only accumulated into."""
        builder, plan = self.builder, self.plan
        read = {int(r[1:]) for s in plan.steps for r in s.refs if r[0] == "x"}
        written = {s.target for s in plan.steps if s.kind != "new"}
        acc_only = {s.target for s in plan.steps if s.kind == "acc"} - read - {
            s.target for s in plan.steps if s.kind == "set"}
        ok = cgutils.true_bit
        nonempty = {i: builder.icmp_signed(">", a[0].nitems, self.zero) for i, a in self.arrays.items()}
        for i in sorted(written):
            for j in sorted(self.arrays):
                if j == i or (j in written and j < i) or (i in acc_only and j in acc_only):
                    continue
                _, _, _, pi, lo_i, hi_i = self.arrays[i]
                _, _, _, pj, lo_j, hi_j = self.arrays[j]
                meets = builder.and_(builder.icmp_signed("<", lo_i, hi_j), builder.icmp_signed("<", lo_j, hi_i))
                meets = builder.and_(meets, builder.and_(nonempty[i], nonempty[j]))
                same = builder.icmp_signed("==", pi, pj) if plan.xs[i].dtype == plan.xs[j].dtype else cgutils.false_bit
                for a, b, e in zip(self.steps[i], self.steps[j], self.shape):
                    moves = builder.icmp_signed(">", e, self.one)
                    same = builder.and_(same, builder.or_(builder.not_(moves), builder.icmp_signed("==", a, b)))
                ok = builder.and_(ok, builder.or_(builder.not_(meets), same))
        return ok

    def _fused(self, slots, by_items):
        """The one loop nest over S; `by_items`: the last axis indexed by items
        (`_whole_items`), else by bytes as the outer axes."""
        context, builder, plan = self.context, self.builder, self.plan
        kept = {}
        for k in plan.kept:
            kept[k] = new_array(context, builder, plan.temps[k], self.shape)
            builder.store(kept[k]._getvalue(), slots[k])
        arrays = frozenset(f"x{i}" for i in self.arrays) | frozenset(f"t{k}" for k in plan.temps)
        hoisted: list = []
        trees = [_hoist(s.tree, arrays, hoisted) for s in plan.steps]
        scalars = {f"x{i}": (builder.extract_value(self.xsval, i), x) for i, x in enumerate(plan.xs)
                   if i not in self.arrays}
        numbers = {name: _element(context, builder, sub, scalars) for name, sub in hoisted}
        numbers.update(scalars)
        with cgutils.loop_nest(builder, self.shape, self.intp) as inds:
            ptrs = {}
            for i, (_, _, _, data, _, _) in self.arrays.items():
                off = self.zero  # bytes along the outer axes, items along the last (`_whole_items`)
                outer = inds[:-1] if by_items else inds
                for ix, st in zip(outer, self.steps[i]):
                    off = builder.add(off, builder.mul(ix, st))
                row = builder.inttoptr(builder.add(data, off), context.get_data_type(plan.xs[i].dtype).as_pointer())
                ptrs[i] = builder.gep(row, [builder.mul(inds[-1], self.last[i])]) if by_items and inds else row
            env = dict(numbers)
            for s, tree in zip(plan.steps, trees):
                for r in s.refs:
                    if r[0] == "x" and int(r[1:]) in ptrs:
                        i = int(r[1:])
                        env[r] = (load_item(context, builder, plan.xs[i], ptrs[i]), plan.xs[i].dtype)
                value, ty = _element(context, builder, tree, env)
                if s.kind == "new":
                    dt = plan.temps[s.target].dtype
                    env[f"t{s.target}"] = (context.cast(builder, value, ty, dt), dt)
                    if s.target in kept:
                        ary = kept[s.target]
                        ptr = cgutils.get_item_pointer2(context, builder, ary.data, self.shape, cgutils.unpack_tuple(
                            builder, ary.strides, len(self.shape)), "C", inds)
                        store_item(context, builder, plan.temps[s.target], env[f"t{s.target}"][0], ptr)
                    continue
                d = plan.xs[s.target]
                if s.kind == "acc":
                    value, ty = apply(context, builder, operator.add,
                                      [(load_item(context, builder, d, ptrs[s.target]), d.dtype), (value, ty)])
                store_item(context, builder, d, context.cast(builder, value, ty, d.dtype), ptrs[s.target])

    def _apart(self, slots):
        """The statements one by one, each as its own intrinsic runs it (`_shared`)."""
        context, builder, plan = self.context, self.builder, self.plan
        temps = {}
        for s in plan.steps:
            tys = plan.local_types(s)
            vals = [builder.extract_value(self.xsval, int(r[1:])) if r[0] == "x" else temps[int(r[1:])]
                    for r in s.refs]
            tup_ty = types.Tuple(tys)
            tup = context.make_tuple(builder, tup_ty, vals)
            if s.kind == "new":
                temps[s.target] = _shared(context, builder, (s.kind, s.text), plan.temps[s.target], (tup_ty,), [tup],
                                          _new_loops(plan.temps[s.target], s.local, tys))
            else:
                d = plan.xs[s.target]
                _shared(context, builder, (s.kind, s.text), types.none, (d, tup_ty),
                        [builder.extract_value(self.xsval, s.target), tup],
                        _in_place_loops("=" if s.kind == "set" else "+=", d, s.local, tys))
        for k, value in temps.items():
            if k in plan.kept:
                builder.store(value, slots[k])
            else:
                context.nrt.decref(builder, plan.temps[k], value)


def _new_loops(arr, tree, tys):
    def body(context, builder, args):
        shape = _broadcast_shape(context, builder, arr.ndim, tys, args[0])
        return _statement(context, builder, "=", tree, tys, args[0], arr, None, shape=shape, fresh=True, nested=True,
                          outline=False)
    return body


def _in_place_loops(mode, d, tree, tys):
    def body(context, builder, args):
        _statement(context, builder, mode, tree, tys, args[1], d, args[0], nested=True, outline=False)
        return context.get_dummy_value()
    return body
