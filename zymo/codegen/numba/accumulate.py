"""Product adjoints accumulated in place, for Numba-compiled derivative code.

Contract: `product(which, overloaded)` makes the Numba intrinsics `acc_dot_vjp_a` and their kin
(`rewrites.accumulating_products` writes the calls; callable from Numba-compiled code only):
`acc += <product>_vjp_<which>(g, a, b)`, with outer and matrix-vector product adjoints of one
float dtype written as loops into the calling program (no temporary, no call), and the rest
by a call to `overloaded` (`twins.core._acc_product`: BLAS with beta = 1, or the plain sum).
Elementwise accumulations (`d += e`) are `elementwise.acc_ew`.

Why intrinsics: the loops run once per iteration of the user's loop over arrays of a few
elements, where a call costs more than the work (16 ns against 4 for ten elements, measured,
mostly reference counts that Numba keeps on the arguments of a call). Numba's own inlining
(`overload(..., inline="always")`) avoided the call but broke two programs of the test suite
under Numba 0.68 (writes through an array appended to a list in a loop were lost; a product
adjoint's BLAS call read wrong values), so it is not used. The element arithmetic is Numba's
own lowering of each operator (`elementwise.apply`).
"""
from __future__ import annotations

import operator

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import load_item, store_item

from .ew_loops import apply as _apply

# -- product adjoints ---------------------------------------------------------------------
# `rewrites.accumulating_products` writes `d = _rt.acc_dot_vjp_a(d, g, a, b)` (and `_b`,
# `acc_matmul_vjp_*`). For an outer product (`dot(A, x)`'s adjoint of `A`) and a matrix-vector
# product (its adjoint of `x`, or `dot(x, A)`'s of `x`) of arrays of one float dtype, the
# intrinsic below writes the loops into the program: `acc[i, j] += u[i] * v[j]`, and
# `acc[i] += s` with `s` the row's sum of products (`acc[j] += m[i, j] * v[i]` for the
# transposed product). Mismatched shapes raise; an accumulator that shares memory with an
# operand, and every other case, run the overloaded implementation (`twins.core._acc_product`:
# BLAS with beta = 1, or the plain sum) by a call.


def product(which: str, overloaded):
    """The intrinsic `acc_<product>_vjp_<which>(acc, g, a, b)` (`which` "a" or "b"),
    `acc += <product>_vjp_<which>(g, a, b)`, falling back to `overloaded` (see above), which
    is lowered as an ordinary call to its overload: nothing else is compiled for it."""
    @intrinsic
    def acc_product(typingctx, acc, g, a, b):
        kind = _loop_kind(which, acc, g, a, b)
        if kind is not None:  # nothing else is compiled: not even `overloaded` (its typing compiles it)
            if kind[0] == "gemm":
                _ensure_blas()

            def codegen_loops(context, builder, signature, args):
                (_gemm if kind[0] == "gemm" else _product_loops)(context, builder, kind, signature, args)
                return impl_ret_borrowed(context, builder, acc, args[0])
            return acc(acc, g, a, b), codegen_loops
        fnty = typingctx.resolve_value_type(overloaded)
        sig = typingctx.resolve_function_type(fnty, (acc, g, a, b), {})

        def codegen(context, builder, signature, args):
            return context.get_function(fnty, sig)(builder, args)
        return sig.return_type(acc, g, a, b), codegen
    return acc_product


def _loop_kind(which, acc, g, a, b):
    """`("outer", u, v)` (operand positions 1-3 of `(acc, g, a, b)`), `("mv", m, v)`,
    `("mvt", m, v)`, or None (the overloaded implementation)."""
    tys = (acc, g, a, b)
    if not all(isinstance(x, types.Array) for x in tys):
        return None
    if len({x.dtype for x in tys}) != 1 or str(acc.dtype) not in ("float32", "float64", "complex64", "complex128"):
        return None
    nd = (acc.ndim, g.ndim, a.ndim, b.ndim)
    if nd == (2, 2, 2, 2) and acc.layout == "C" and acc.mutable:
        # acc += x @ y: `which` "a": x = g, y = b.T; "b": x = a.T, y = g. Operand positions and
        # whether each is read transposed; BLAS reads C- and F-ordered operands as they are
        x, y = ((1, False), (3, True)) if which == "a" else ((2, True), (1, False))
        if all(tys[p].layout in ("C", "F") for p, _ in (x, y)):
            return ("gemm", x, y)
    if which == "a" and nd == (2, 1, 2, 1):
        return ("outer", 1, 3)  # dot(A, x), adjoint of A: g x^T
    if which == "b" and nd == (2, 1, 1, 2):
        return ("outer", 2, 1)  # dot(x, B), adjoint of B: x g^T
    if which == "a" and nd == (1, 1, 1, 2):
        return ("mv", 3, 1)     # dot(x, B), adjoint of x: B g
    if which == "b" and nd == (1, 1, 2, 1):
        return ("mvt", 2, 1)    # dot(A, x), adjoint of x: A^T g
    return None


def _product_loops(context, builder, kind, signature, args):
    tys = signature.args
    arys = [context.make_array(ty)(context, builder, v) for ty, v in zip(tys, args)]
    shapes = [cgutils.unpack_tuple(builder, ary.shape, ty.ndim) for ary, ty in zip(arys, tys)]
    strides = [cgutils.unpack_tuple(builder, ary.strides, ty.ndim) for ary, ty in zip(arys, tys)]
    op, p, q = kind
    acc_shape = shapes[0]
    if op == "outer":
        want = (acc_shape[0], acc_shape[1])
        sizes = (shapes[p][0], shapes[q][0])
    elif op == "mv":  # acc[i] += sum_j m[i, j] v[j]
        want = (acc_shape[0], shapes[q][0])
        sizes = (shapes[p][0], shapes[p][1])
    else:  # acc[j] += sum_i m[i, j] v[i]
        want = (shapes[q][0], acc_shape[0])
        sizes = (shapes[p][0], shapes[p][1])
    bad = builder.or_(builder.icmp_signed("!=", want[0], sizes[0]), builder.icmp_signed("!=", want[1], sizes[1]))
    with builder.if_then(bad, likely=False):
        context.call_conv.return_user_exc(builder, ValueError, ("zymo: product adjoint shapes do not match",))
    data, copies = {}, []
    for k in (p, q):
        data[k], step, copy = _unshared(context, builder, tys[0], arys[0], tys[k], arys[k], shapes[k], strides[k])
        strides[k] = step
        copies.append(copy)
    _loops(context, builder, op, p, q, tys, arys, shapes, strides, sizes, data)
    for copy in copies:
        copy.free()


class _Copy:
    """An operand's copy made when it shares memory with the accumulator (else none)."""

    def __init__(self, context, builder, made, buf):
        self.context, self.builder, self.made, self.buf = context, builder, made, buf

    def free(self):
        with self.builder.if_then(self.made, likely=False):
            self.context.nrt.free(self.builder, self.builder.load(self.buf))


def _unshared(context, builder, acc_ty, acc, ty, ary, shape, strides):
    """`(data, strides, copy)` of operand `ary` as the loops read it: its own, or, when its
    memory meets the accumulator's (the loops would read what they write), a copy in NRT memory
    (C- and F-ordered operands as they are stored, one memcpy; others C-ordered); `copy.free()`
    after the loops."""
    from .ew_loops import _copy_into_new, _span

    intp = context.get_value_type(types.intp)
    zero = ir.Constant(intp, 0)
    acc_shape = cgutils.unpack_tuple(builder, acc.shape, acc_ty.ndim)
    acc_strides = cgutils.unpack_tuple(builder, acc.strides, acc_ty.ndim)
    a_lo, a_hi = _span(builder, intp, builder.ptrtoint(acc.data, intp), acc_shape, acc_strides, acc.itemsize)
    pd = builder.ptrtoint(ary.data, intp)
    lo, hi = _span(builder, intp, pd, shape, strides, ary.itemsize)
    meets = builder.and_(builder.icmp_signed("<", lo, a_hi), builder.icmp_signed("<", a_lo, hi))
    nonempty = builder.and_(builder.icmp_signed(">", ary.nitems, zero), builder.icmp_signed(">", acc.nitems, zero))
    shared = builder.and_(meets, nonempty)
    slot = cgutils.alloca_once_value(builder, pd)
    stride_slots = [cgutils.alloca_once_value(builder, st) for st in strides]
    buf = cgutils.alloca_once_value(builder, ir.Constant(cgutils.voidptr_t, None))
    with builder.if_then(shared, likely=False):
        if ty.layout in ("C", "F"):  # contiguous: the same bytes, the same strides
            new = context.nrt.allocate(builder, builder.mul(ary.nitems, ary.itemsize))
            cgutils.raw_memcpy(builder, new, ary.data, ary.nitems, ary.itemsize)
            builder.store(new, buf)
            builder.store(builder.ptrtoint(new, intp), slot)
        else:
            _copy_into_new(context, builder, ty, ary, shape, strides, slot, stride_slots, buf)
    ptr = builder.inttoptr(builder.load(slot), context.get_data_type(ty.dtype).as_pointer())
    return ptr, [builder.load(st) for st in stride_slots], _Copy(context, builder, shared, buf)


def _loops(context, builder, op, p, q, tys, arys, shapes, strides, sizes, data):
    """The loops of an outer or matrix-vector product adjoint (see above), operands `p`, `q`
    read through `data` and `strides`."""
    dty = tys[0].dtype

    def item(k, inds):
        base = arys[k].data if k == 0 else data[k]
        ptr = cgutils.get_item_pointer2(context, builder, base, shapes[k], strides[k], tys[k].layout, inds)
        return ptr, load_item(context, builder, tys[k], ptr)

    def madd(total, x, y):
        prod, pty = _apply(context, builder, operator.mul, [(x, dty), (y, dty)])
        s, sty = _apply(context, builder, operator.add, [(total, dty), (prod, pty)])
        return context.cast(builder, s, sty, dty)

    with cgutils.for_range(builder, sizes[0]) as outer:
        i = outer.index
        if op == "outer":
            _, u = item(p, [i])
            with cgutils.for_range(builder, sizes[1]) as inner:
                j = inner.index
                ptr, old = item(0, [i, j])
                _, v = item(q, [j])
                store_item(context, builder, tys[0], madd(old, u, v), ptr)
        elif op == "mv":
            total = cgutils.alloca_once_value(builder, context.get_constant_null(dty))
            with cgutils.for_range(builder, sizes[1]) as inner:
                j = inner.index
                _, m = item(p, [i, j])
                _, v = item(q, [j])
                builder.store(madd(builder.load(total), m, v), total)
            ptr, old = item(0, [i])
            s, sty = _apply(context, builder, operator.add, [(old, dty), (builder.load(total), dty)])
            store_item(context, builder, tys[0], context.cast(builder, s, sty, dty), ptr)
        else:
            _, v = item(q, [i])
            with cgutils.for_range(builder, sizes[1]) as inner:
                j = inner.index
                _, m = item(p, [i, j])
                ptr, old = item(0, [j])
                store_item(context, builder, tys[0], madd(old, m, v), ptr)



# -- matrix products: one BLAS call -----------------------------------------------------------
# For 2-d arrays (`acc` C-ordered, the operands C- or F-ordered, one BLAS dtype) the intrinsic
# calls Numba's BLAS entry (`numba_xxgemm`: SciPy's xgemm) once with beta = 1, from the program
# itself: no helper function is compiled (an overload and its BLAS wrapper cost 0.2-0.3 s of
# compile per signature). An operand that shares memory with `acc` is copied first (into NRT
# memory, freed after): BLAS would read what it writes.

_BLAS_KIND = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}


def _ensure_blas():
    from numba.np.linalg import ensure_blas

    ensure_blas()  # SciPy's BLAS, as Numba's np.dot uses it; raises when SciPy is missing


def _gemm(context, builder, kind, signature, args):
    """`acc += x @ y` (`kind`: `("gemm", (p, transposed), (q, transposed))`, the operand
    positions of x and y); see above. BLAS is column-major: `acc`'s memory is acc^T, so this
    computes acc^T += y^T x^T, an operand read as it is stored when it is C-ordered as read."""
    from numba.core import funcdesc

    _, (px, tx), (py, ty) = kind
    tys = signature.args
    dt = tys[0].dtype
    intp = context.get_value_type(types.intp)
    zero = ir.Constant(intp, 0)
    arys = [context.make_array(t)(context, builder, v) for t, v in zip(tys, args)]
    shapes = [cgutils.unpack_tuple(builder, ary.shape, 2) for ary in arys]
    strides = [cgutils.unpack_tuple(builder, ary.strides, 2) for ary in arys]

    def read(p, transposed):
        return (shapes[p][1], shapes[p][0]) if transposed else (shapes[p][0], shapes[p][1])
    (m, k), (k2, n) = read(px, tx), read(py, ty)
    bad = builder.or_(builder.icmp_signed("!=", k, k2), builder.or_(
        builder.icmp_signed("!=", shapes[0][0], m), builder.icmp_signed("!=", shapes[0][1], n)))
    with builder.if_then(bad, likely=False):
        context.call_conv.return_user_exc(builder, ValueError, ("zymo: product adjoint shapes do not match",))
    empty = builder.or_(builder.icmp_signed("==", m, zero), builder.or_(
        builder.icmp_signed("==", n, zero), builder.icmp_signed("==", k, zero)))
    with builder.if_then(builder.not_(empty), likely=True):
        data, copies = {}, []
        for p in (px, py):
            ptr, _, copy = _unshared(context, builder, tys[0], arys[0], tys[p], arys[p], shapes[p], strides[p])
            data[p] = builder.bitcast(ptr, context.get_value_type(types.CPointer(dt)))
            copies.append(copy)
        xc = (tys[px].layout == "C") != tx  # x read C-ordered
        yc = (tys[py].layout == "C") != ty
        char = context.get_value_type(types.char)
        one = context.get_constant(dt, complex(1) if isinstance(dt, types.Complex) else 1.0)
        unit = cgutils.alloca_once_value(builder, one)
        sig = types.intc(types.char, types.char, types.char, types.intp, types.intp, types.intp,
                         types.CPointer(dt), types.CPointer(dt), types.intp, types.CPointer(dt), types.intp,
                         types.CPointer(dt), types.CPointer(dt), types.intp)
        fndesc = funcdesc.ExternalFunctionDescriptor("numba_xxgemm", sig.return_type, sig.args)
        fn = context.declare_external_function(builder.module, fndesc)
        acc_data = builder.bitcast(arys[0].data, context.get_value_type(types.CPointer(dt)))
        status = context.call_external_function(builder, fn, sig.args, [
            ir.Constant(char, ord(_BLAS_KIND[str(dt)])),
            ir.Constant(char, ord("N" if yc else "T")), ir.Constant(char, ord("N" if xc else "T")),
            n, m, k, unit, data[py], n if yc else k, data[px], k if xc else m, unit, acc_data, n])
        for copy in copies:
            copy.free()
        failed = builder.icmp_signed("<", status, ir.Constant(status.type, 0))
        with builder.if_then(failed, likely=False):
            context.call_conv.return_user_exc(builder, ValueError, ("zymo: BLAS xgemm failed",))
