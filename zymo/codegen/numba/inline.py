"""Helpers of generated code written into the program, for Numba-compiled derivative code.

Contract: Numba intrinsics (callable from Numba-compiled code only) that generated code reaches
as `_rt.<name>` (`twins` exports them; `rewrites.numba_source` writes the calls that are not
in the generated source already):

- `zeros(shape, dtype)`, `empty(shape, dtype)`: `np.zeros`/`np.empty` (an int or a tuple of
  ints, a NumPy scalar type or dtype): a C-ordered array;
- `nonneg(i)`: the int `i`, known to be >= 0 (`analysis.bounds`), as an unsigned int, which
  Numba uses as an index without first adding the extent to a negative one (`rewrites.nonneg_indices`);
- `span(lo, hi)`: `zymo.runtime.span`, `hi - lo` or 0 where `hi <= lo`, in signed `intp`
  (unsigned bounds do not wrap), as one select: a conditional expression would be three more
  blocks for Numba and LLVM (a trip count);
- `grow(buf, need)`, `grow_stack(buf, row, need)`: `zymo.runtime.grow`/`grow_stack`, a cache
  copied into a larger one (one memcpy: a C-ordered cache's entries are its leading bytes);
- `reuse_tape(buf, size, dtype)`: `zymo.runtime.reuse_tape`, a kept cache or a new one (decision 0021);
- `ew_max(x)`, `ew_min(x)`: `np.max(x)`/`np.min(x)` of a 1-d array of real numbers: the first
  of equal elements, NaN as soon as one is met (Numba's), NumPy's error when `x` is empty; a
  C-ordered `x` by eight running extremes held as one LLVM vector (`_lanes_extreme`: LLVM's
  loop vectorizer leaves eight scalar selects alone, and Numba runs no SLP vectorizer), scanned
  again in order only where that could differ (a NaN, a zero extreme);
- `acc_extreme(d, g, x, ans)`: `d += rt.expand_reduced(g, x, None, False) *
  rt.extreme_mask(x, ans, None, False)`, the adjoint of `ans = np.max(x)` (or min): `g` shared
  among the elements equal to `ans` (NaN everywhere when none is, as NumPy's 0/0 gives), added
  into `d` (of `x`'s shape) with the same operations, in the same order, as the statement;
  C-ordered float `d` and `x` eight elements per instruction (`_acc_extreme_lanes`).

Outside these cases (other layouts, dtypes, ranks) each runs the helper or NumPy function it
stands for, compiled by Numba, so results never depend on which path ran.

Why: each of these, as a Numba function, is a compile of its own per signature, where the
intrinsics add a few instructions to the program's own compile (measurements:
`docs/decisions/0002`). They also allocate nothing per call that the statement did not.
"""
from __future__ import annotations

import operator

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import impl_ret_borrowed, impl_ret_new_ref
from numba.extending import intrinsic
from numba.np.arrayobj import load_item, store_item

from zymo import runtime as rt

from .elementwise import _as_written
from .ew_loops import _copy_into_new, _span, apply
from .ew_types import new_array

_SHAPE_MISMATCH = "zymo internal error: an adjoint does not have its operand's shape"


def _helper(typingctx, fn, args):
    """The typing and lowering of `fn` (a helper or NumPy function, compiled by Numba) for `args`."""
    fnty = typingctx.resolve_value_type(fn)
    sig = typingctx.resolve_function_type(fnty, args, {})
    if sig is None:
        from numba.core.errors import TypingError

        raise TypingError(f"no implementation of {getattr(fn, '__name__', fn)} for {args}")

    def codegen(context, builder, signature, vals):
        omitted = [context.get_dummy_value() for _ in sig.args[len(vals):]]  # defaults (`types.Omitted`)
        return context.get_function(fnty, sig)(builder, [*vals, *omitted])
    return sig.return_type(*args), codegen


# -- allocation ------------------------------------------------------------------------------


def _new_array_type(shape, dtype):
    """The C-ordered array type `np.zeros(shape, dtype)` gives, or None (not handled here)."""
    if isinstance(shape, types.Integer):
        nd = 1
    elif isinstance(shape, types.BaseTuple) and len(shape) > 0 and all(isinstance(e, types.Integer) for e in shape):
        nd = len(shape)
    else:
        return None
    if isinstance(dtype, types.NumberClass):
        dt = dtype.instance_type
    elif isinstance(dtype, types.DType):
        dt = dtype.dtype
    else:
        return None
    if not isinstance(dt, (types.Number, types.Boolean)):
        return None
    return types.Array(dt, nd, "C")


def _allocator(fn, fill):
    @intrinsic
    def new(typingctx, shape, dtype):
        arr = _new_array_type(shape, dtype)
        if arr is None:
            return _helper(typingctx, fn, (shape, dtype))

        def codegen(context, builder, signature, args):
            intp = context.get_value_type(types.intp)
            if isinstance(shape, types.Integer):
                dims = [context.cast(builder, args[0], shape, types.intp)]
            else:
                dims = [context.cast(builder, builder.extract_value(args[0], k), e, types.intp)
                        for k, e in enumerate(shape)]
            negative = cgutils.false_bit
            for n in dims:
                negative = builder.or_(negative, builder.icmp_signed("<", n, ir.Constant(intp, 0)))
            with builder.if_then(negative, likely=False):
                context.call_conv.return_user_exc(builder, ValueError, ("negative dimensions are not allowed",))
            ary = new_array(context, builder, arr, dims)
            if fill:
                nbytes = builder.mul(ary.nitems, ir.Constant(intp, context.get_abi_sizeof(
                    context.get_data_type(arr.dtype))))
                cgutils.memset(builder, ary.data, nbytes, 0)
            return impl_ret_new_ref(context, builder, arr, ary._getvalue())
        return arr(shape, dtype), codegen
    new.__name__ = fn.__name__
    return new


zeros = _allocator(np.zeros, fill=True)
empty = _allocator(np.empty, fill=False)


# -- cache growth ----------------------------------------------------------------------------


def _grown(context, builder, buf_ty, buf, first, rest):
    """A new C-ordered array of `buf_ty` of shape `(first, *rest)` with `buf`'s bytes first."""
    out = new_array(context, builder, buf_ty, [first, *rest])
    cgutils.raw_memcpy(builder, out.data, buf.data, buf.nitems, buf.itemsize)
    return impl_ret_new_ref(context, builder, buf_ty, out._getvalue())


def _room(context, builder, n, need, need_ty):
    """`max(2 * n + 1, need)`."""
    need = context.cast(builder, need, need_ty, types.intp)
    twice = builder.add(builder.mul(n, ir.Constant(n.type, 2)), ir.Constant(n.type, 1))
    return builder.select(builder.icmp_signed(">", need, twice), need, twice)


@intrinsic
def nonneg(typingctx, i):
    """`i` as `uint64` (module contract): the same bits."""
    if not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return context.cast(builder, args[0], i, types.uint64)
    return types.uint64(i), codegen


@intrinsic
def span(typingctx, lo, hi):
    """`rt.span(lo, hi)` of ints or bools (module contract)."""
    if not all(isinstance(t, (types.Integer, types.Boolean)) for t in (lo, hi)):
        return None

    def codegen(context, builder, signature, args):
        a, b = (context.cast(builder, v, types.unliteral(t), types.intp) for v, t in zip(args, (lo, hi)))
        return builder.select(builder.icmp_signed(">", b, a), builder.sub(b, a), ir.Constant(a.type, 0))
    return types.intp(lo, hi), codegen


@intrinsic
def grow(typingctx, buf, need):
    """`rt.grow(buf, need)` (module contract)."""
    if not (isinstance(buf, types.Array) and buf.ndim == 1 and buf.layout == "C" and isinstance(need, types.Integer)):
        return _helper(typingctx, rt.grow, (buf, need))

    def codegen(context, builder, signature, args):
        ary = context.make_array(buf)(context, builder, args[0])
        n = cgutils.unpack_tuple(builder, ary.shape, 1)[0]
        return _grown(context, builder, buf, ary, _room(context, builder, n, args[1], need), [])
    return buf(buf, need), codegen


@intrinsic
def grow_stack(typingctx, buf, row, need):
    """`rt.grow_stack(buf, row, need)` (module contract)."""
    if not (isinstance(buf, types.Array) and buf.layout == "C" and isinstance(row, types.Array)
            and buf.ndim == row.ndim + 1 and isinstance(need, types.Integer)):
        return _helper(typingctx, rt.grow_stack, (buf, row, need))

    def codegen(context, builder, signature, args):
        ary = context.make_array(buf)(context, builder, args[0])
        rows = context.make_array(row)(context, builder, args[1])
        shape = cgutils.unpack_tuple(builder, ary.shape, buf.ndim)
        row_shape = cgutils.unpack_tuple(builder, rows.shape, row.ndim)
        other = cgutils.false_bit
        for a, b in zip(shape[1:], row_shape):
            other = builder.or_(other, builder.icmp_signed("!=", a, b))
        used = builder.icmp_signed(">", shape[0], ir.Constant(shape[0].type, 0))
        with builder.if_then(builder.and_(used, other), likely=False):
            context.call_conv.return_user_exc(builder, ValueError, (
                "zymo internal error: a stacked cache's rows changed shape",))
        return _grown(context, builder, buf, ary, _room(context, builder, shape[0], args[2], need), row_shape)
    return buf(buf, row, need), codegen


@intrinsic
def reuse_tape(typingctx, buf, size, dtype):
    """`rt.reuse_tape(buf, size, dtype)` (module contract): `buf` itself (a new reference) when
    it holds `size` entries, else a new C-ordered array of `max(size, 1)` of its dtype."""
    if not (isinstance(buf, types.Array) and buf.ndim == 1 and buf.layout == "C" and isinstance(size, types.Integer)):
        return _helper(typingctx, rt.reuse_tape, (buf, size, dtype))

    def codegen(context, builder, signature, args):
        ary = context.make_array(buf)(context, builder, args[0])
        n = cgutils.unpack_tuple(builder, ary.shape, 1)[0]
        need = context.cast(builder, args[1], size, types.intp)
        slot = cgutils.alloca_once(builder, context.get_value_type(buf))
        with builder.if_else(builder.icmp_signed(">=", n, need)) as (fits, other):
            with fits:
                context.nrt.incref(builder, buf, args[0])
                builder.store(args[0], slot)
            with other:
                one = ir.Constant(need.type, 1)
                out = new_array(context, builder, buf, [builder.select(builder.icmp_signed(">", need, one), need, one)])
                builder.store(out._getvalue(), slot)
        return impl_ret_new_ref(context, builder, buf, builder.load(slot))
    return buf(buf, size, dtype), codegen


# -- max and min of a whole array, and their adjoint -------------------------------------------


def _real_vector(x) -> bool:
    return isinstance(x, types.Array) and x.ndim == 1 and isinstance(x.dtype, (types.Integer, types.Float))


def _extreme(larger: bool):
    from . import np_shim as numba_np

    fn = numba_np.max if larger else numba_np.min
    name = "maximum" if larger else "minimum"

    @intrinsic
    def extreme(typingctx, x):
        if not _real_vector(x):
            return _helper(typingctx, fn, (x,))

        def codegen(context, builder, signature, args):
            ary = context.make_array(x)(context, builder, args[0])
            n = cgutils.unpack_tuple(builder, ary.shape, 1)[0]
            stride = cgutils.unpack_tuple(builder, ary.strides, 1)[0]
            zero = ir.Constant(n.type, 0)
            with builder.if_then(builder.icmp_signed("==", n, zero), likely=False):
                context.call_conv.return_user_exc(builder, ValueError, (
                    f"zero-size array to reduction operation {name} which has no identity",))

            def at(i):
                return load_item(context, builder, x, cgutils.get_item_pointer2(
                    context, builder, ary.data, [n], [stride], x.layout, [i]))
            real = isinstance(x.dtype, types.Float)

            def above(v, m):
                if real:
                    return builder.fcmp_ordered(">" if larger else "<", v, m)
                return builder.icmp_signed(">" if larger else "<", v, m) if x.dtype.signed else \
                    builder.icmp_unsigned(">" if larger else "<", v, m)
            best = cgutils.alloca_once_value(builder, at(zero))
            exact = cgutils.alloca_once_value(builder, cgutils.true_bit)
            if x.layout == "C":
                lanes = _lanes_extreme(context, builder, x, ary, n, above, real)
                if lanes is not None:
                    value, settled = lanes
                    builder.store(value, best)
                    builder.store(builder.not_(settled), exact)
            with builder.if_then(builder.load(exact)):
                builder.store(at(zero), best)
                with cgutils.for_range(builder, n, start=ir.Constant(n.type, 1)) as loop:
                    v, m = at(loop.index), builder.load(best)
                    take = above(v, m)
                    if real:  # NaN as soon as one is met (kept: nothing compares above NaN)
                        nan_m = builder.fcmp_unordered("uno", m, m)
                        take = builder.or_(take, builder.and_(builder.not_(nan_m), builder.fcmp_unordered("uno", v, v)))
                    with builder.if_then(take):
                        builder.store(v, best)
            return builder.load(best)
        return x.dtype(x), codegen
    extreme.__name__ = "ew_max" if larger else "ew_min"
    return extreme


_LANES = 8  # running extremes of a contiguous array, element i in lane i % 8


def _lanes_extreme(context, builder, x, ary, n, above, real):
    """The extreme of C-ordered `x` (`n` elements, at least `_LANES`) by `_LANES` running
    extremes, element i in lane i % `_LANES` (one LLVM vector: each block of `_LANES` elements
    is compared and selected in one instruction each), the elements after the last whole block
    folded into lane 0, the lanes combined in lane order: `(value, settled)`; `settled` is
    false where the value may differ from the serial scan's (the first of equal elements, NaN
    as soon as one is met): a NaN met, or a zero extreme (of `-0.0` and `0.0` the serial scan
    keeps the first). The caller then scans serially. Arrays of fewer than `_LANES` elements
    are never settled."""
    intp = n.type
    width = ir.Constant(intp, _LANES)
    elem = context.get_data_type(x.dtype)
    base = builder.bitcast(ary.data, elem.as_pointer())
    vt = ir.VectorType(elem, _LANES)
    align = context.get_abi_sizeof(elem)
    value = cgutils.alloca_once(builder, context.get_value_type(x.dtype))
    settled = cgutils.alloca_once_value(builder, cgutils.false_bit)
    with builder.if_then(builder.icmp_signed(">=", n, width)):
        def block(i):  # the `_LANES` elements from i, as one vector
            return builder.load(builder.bitcast(builder.gep(base, [i]), vt.as_pointer()), align=align)
        head = block(ir.Constant(intp, 0))
        best = cgutils.alloca_once_value(builder, head)
        nan = cgutils.alloca_once_value(builder, builder.fcmp_unordered("uno", head, head)) if real else None
        blocks = builder.sdiv(n, width)
        with cgutils.for_range(builder, blocks, start=ir.Constant(intp, 1)) as loop:
            v, m = block(builder.mul(loop.index, width)), builder.load(best)
            builder.store(builder.select(above(v, m), v, m), best)
            if real:
                builder.store(builder.or_(builder.load(nan), builder.fcmp_unordered("uno", v, v)), nan)
        whole = builder.load(best)
        lanes = [builder.extract_element(whole, ir.Constant(ir.IntType(32), k)) for k in range(_LANES)]
        seen = None
        if real:
            flags = builder.load(nan)
            seen = builder.extract_element(flags, ir.Constant(ir.IntType(32), 0))
            for k in range(1, _LANES):
                seen = builder.or_(seen, builder.extract_element(flags, ir.Constant(ir.IntType(32), k)))
        slot0 = cgutils.alloca_once_value(builder, lanes[0])
        tail_nan = cgutils.alloca_once_value(builder, seen if real else cgutils.false_bit)
        with cgutils.for_range(builder, builder.sub(n, builder.mul(blocks, width))) as loop:  # the rest
            v = load_item(context, builder, x, builder.gep(base, [builder.add(builder.mul(blocks, width), loop.index)]))
            m = builder.load(slot0)
            builder.store(builder.select(above(v, m), v, m), slot0)
            if real:
                builder.store(builder.or_(builder.load(tail_nan), builder.fcmp_unordered("uno", v, v)), tail_nan)
        m = builder.load(slot0)
        for v in lanes[1:]:
            m = builder.select(above(v, m), v, m)
        builder.store(m, value)
        if real:
            zero = builder.fcmp_ordered("==", m, ir.Constant(m.type, 0.0))
            builder.store(builder.not_(builder.or_(builder.load(tail_nan), zero)), settled)
        else:
            builder.store(cgutils.true_bit, settled)
    return builder.load(value), builder.load(settled)


ew_max = _extreme(True)
ew_min = _extreme(False)


class _acc_extreme_lanes:
    """`acc_extreme`'s two passes over the whole blocks of `_LANES` elements of C-ordered `x`
    and `d` (typed pointers `xdata`, `ddata` to elements of LLVM type `elem`), each block as
    one vector: `count()` the elements equal to `ans` (the ordered comparison `==` of
    `apply`), `update(share, rest, g)` does `d[i] = d[i] + g * (share if x[i] == ans else
    rest)` (IEEE `fmul`, `fadd`: Numba's own arithmetic). `done` is the first element after
    the blocks; the caller runs the rest one by one."""

    def __init__(self, builder, elem, intp, n, xdata, ddata, ans, align):
        self.builder, self.intp, self.xdata, self.ddata, self.align = builder, intp, xdata, ddata, align
        self.vt = ir.VectorType(elem, _LANES)
        self.width = ir.Constant(intp, _LANES)
        self.blocks = builder.sdiv(n, self.width)
        self.done = builder.mul(self.blocks, self.width)
        self.ans = self._splat(ans)

    def _splat(self, value):
        vec = ir.Constant(self.vt, ir.Undefined)
        for k in range(_LANES):
            vec = self.builder.insert_element(vec, value, ir.Constant(ir.IntType(32), k))
        return vec

    def _ptr(self, base, block):
        return self.builder.bitcast(self.builder.gep(base, [self.builder.mul(block, self.width)]),
                                    self.vt.as_pointer())

    def _equal(self, block):
        builder = self.builder
        return builder.fcmp_ordered("==", builder.load(self._ptr(self.xdata, block), align=self.align), self.ans)

    def count(self):
        builder = self.builder
        ivt = ir.VectorType(self.intp, _LANES)
        acc = cgutils.alloca_once_value(builder, ir.Constant(ivt, [0] * _LANES))
        with cgutils.for_range(builder, self.blocks) as loop:
            builder.store(builder.add(builder.load(acc), builder.zext(self._equal(loop.index), ivt)), acc)
        whole = builder.load(acc)
        total = builder.extract_element(whole, ir.Constant(ir.IntType(32), 0))
        for k in range(1, _LANES):
            total = builder.add(total, builder.extract_element(whole, ir.Constant(ir.IntType(32), k)))
        return total

    def update(self, share, rest, g):
        builder = self.builder
        shares, rests, gs = self._splat(share), self._splat(rest), self._splat(g)
        with cgutils.for_range(builder, self.blocks) as loop:
            ptr = self._ptr(self.ddata, loop.index)
            term = builder.fmul(gs, builder.select(self._equal(loop.index), shares, rests))
            builder.store(builder.fadd(builder.load(ptr, align=self.align), term), ptr, align=self.align)


@intrinsic
def acc_extreme(typingctx, d, g, x, ans):
    """`d += rt.expand_reduced(g, x, None, False) * rt.extreme_mask(x, ans, None, False)`
    (module contract): fast for 1-d float `d`, 1-d real `x` of one shape, numbers `g`, `ans`,
    when `g` times the weights stays in `d`'s dtype (the weights' dtype: `x`'s, float64 for
    integers); `x` overlapping `d` other than element for element is copied first. Where `d`
    and `x` are C-ordered of one float dtype, `g` and `ans` numbers of it, both passes (the ties
    counted, then `d` updated) take `_LANES` elements per instruction (`_acc_extreme_lanes`):
    the same operations on each element."""
    wt = (types.float64 if isinstance(x.dtype, types.Integer) else x.dtype) if _real_vector(x) else None
    fast = (wt is not None and isinstance(d, types.Array) and d.ndim == 1 and d.mutable and d.dtype == wt
            and isinstance(g, (types.Integer, types.Float)) and isinstance(ans, (types.Integer, types.Float)))
    if fast:
        sig = typingctx.resolve_function_type(operator.mul, (g, wt), {})
        fast = sig is not None and sig.return_type == wt
    lanes = (fast and d.layout == "C" and x.layout == "C" and isinstance(x.dtype, types.Float)
             and g == wt and ans == wt)
    if not fast:
        ret, codegen_numpy = _as_written(
            typingctx, "extreme", "d, g, x, ans",
            "    d += _rt.expand_reduced(g, x, None, False) * _rt.extreme_mask(x, ans, None, False)\n    return d\n",
            (d, g, x, ans), (0, 1, 2, 3))
        return ret(d, g, x, ans), codegen_numpy

    def codegen(context, builder, signature, args):
        intp = context.get_value_type(types.intp)
        zero = ir.Constant(intp, 0)
        dary = context.make_array(d)(context, builder, args[0])
        xary = context.make_array(x)(context, builder, args[2])
        n = cgutils.unpack_tuple(builder, dary.shape, 1)[0]
        xn = cgutils.unpack_tuple(builder, xary.shape, 1)[0]
        dstride = cgutils.unpack_tuple(builder, dary.strides, 1)[0]
        xstride = cgutils.unpack_tuple(builder, xary.strides, 1)[0]
        with builder.if_then(builder.icmp_signed("!=", n, xn), likely=False):
            context.call_conv.return_user_exc(builder, ValueError, (_SHAPE_MISMATCH,))
        # x overlapping d (other than element for element): read from a copy
        pd, px = builder.ptrtoint(dary.data, intp), builder.ptrtoint(xary.data, intp)
        d_lo, d_hi = _span(builder, intp, pd, [n], [dstride], dary.itemsize)
        x_lo, x_hi = _span(builder, intp, px, [n], [xstride], xary.itemsize)
        meets = builder.and_(builder.icmp_signed("<", x_lo, d_hi), builder.icmp_signed("<", d_lo, x_hi))
        same = builder.and_(builder.icmp_signed("==", px, pd), builder.icmp_signed("==", xstride, dstride))
        copy = builder.and_(builder.and_(meets, builder.not_(same)), builder.icmp_signed(">", n, zero))
        data = cgutils.alloca_once_value(builder, px)
        strides = [cgutils.alloca_once_value(builder, xstride)]
        buf = cgutils.alloca_once_value(builder, ir.Constant(cgutils.voidptr_t, None))
        with builder.if_then(copy, likely=False):
            _copy_into_new(context, builder, x, xary, [n], [xstride], data, strides, buf)
        xdata = builder.inttoptr(builder.load(data), context.get_data_type(x.dtype).as_pointer())
        xstep = builder.load(strides[0])

        def x_at(i):
            if x.layout == "C":  # by items (its copy is C-ordered too): loops LLVM vectorizes
                return load_item(context, builder, x, builder.gep(xdata, [i]))
            ptr = builder.inttoptr(builder.add(builder.ptrtoint(xdata, intp), builder.mul(i, xstep)),
                                   context.get_data_type(x.dtype).as_pointer())
            return load_item(context, builder, x, ptr)

        def equal(i):
            return apply(context, builder, operator.eq, [(x_at(i), x.dtype), (args[3], ans)])[0]
        count = cgutils.alloca_once_value(builder, zero)
        start = zero
        if lanes:
            elem = context.get_data_type(wt)
            vec = _acc_extreme_lanes(builder, elem, intp, n, xdata, builder.bitcast(dary.data, elem.as_pointer()),
                                     args[3], context.get_abi_sizeof(elem))
            builder.store(vec.count(), count)
            start = vec.done
        with cgutils.for_range(builder, n, start=start) as loop:  # no branch
            builder.store(builder.add(builder.load(count), builder.zext(equal(loop.index), intp)), count)
        c = builder.load(count)
        none = builder.icmp_signed("==", c, zero)
        nan = context.get_constant(wt, float("nan"))
        share = builder.select(none, nan, builder.fdiv(context.get_constant(wt, 1.0), builder.sitofp(
            c, context.get_value_type(wt))))
        rest = builder.select(none, nan, context.get_constant(wt, 0.0))
        if lanes:
            vec.update(share, rest, args[1])
        with cgutils.for_range(builder, n, start=start) as loop:
            i = loop.index
            w = builder.select(equal(i), share, rest)
            term, tty = apply(context, builder, operator.mul, [(args[1], g), (w, wt)])
            ptr = cgutils.get_item_pointer2(context, builder, dary.data, [n], [dstride], d.layout, [i])
            total, sty = apply(context, builder, operator.add, [(load_item(context, builder, d, ptr), d.dtype),
                                                               (term, tty)])
            store_item(context, builder, d, context.cast(builder, total, sty, d.dtype), ptr)
        with builder.if_then(copy, likely=False):
            context.nrt.free(builder, builder.load(buf))
        return impl_ret_borrowed(context, builder, d, args[0])
    return d(d, g, x, ans), codegen
