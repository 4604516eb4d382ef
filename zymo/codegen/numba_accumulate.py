"""Adjoint accumulations compiled in place, for Numba-compiled derivative code.

Contract: two kinds of Numba intrinsics (callable from Numba-compiled code only), which write
their loops into the calling program: no temporary array, no call.

`product(which, overloaded)` makes `acc_dot_vjp_a` and its kin (`numba_.accumulating_products`
writes the calls): outer and matrix-vector product adjoints of one float dtype as loops, the
rest by a call to `overloaded` (section below).

`acc_ew(d, expr, xs)` (`numba_.elementwise_accumulations` writes the calls) has the value of
Python's `d += eval(expr, x0=xs[0], x1=xs[1], ...)`, `expr` a constant string built of the
names `x<i>` and numbers by `+ - * /` and unary minus. A float `d` gets the sum back (the
arithmetic in place). An array `d` is updated in place and returned; NumPy's semantics hold
exactly (the same operations on each element, in the same order):
- when `d` is a C-ordered float or complex array, every array operand is C-ordered of `d`'s
  rank and dtype, every number one that does not widen `d`'s dtype and `expr` has no
  division, the intrinsic writes the loops over `d`'s elements itself (no temporary array,
  no call): an operand of extent 1 where `d`'s is not is broadcast, any other mismatch raises
  NumPy's error; an operand that overlaps `d` other than element for element (NumPy computes
  `e` whole before adding it) is read before `d` writes over it, by running the loops in C
  order when every such operand starts above `d` in memory and in reverse when every one
  starts below; a broadcast one, or ones on both sides, raise `ValueError`. Divisions are
  left out because a zero divisor raises in a scalar division under the generated program's
  error model, where NumPy's array expression gives inf;
- otherwise it calls a compiled `d += e; return d` (Numba's array expressions).

Why intrinsics: the loops run once per iteration of the user's loop over arrays of a few
elements, where a call costs more than the work (16 ns against 4 for ten elements, measured,
mostly reference counts that Numba keeps on the arguments of a call). Numba's own inlining
(`overload(..., inline="always")`) avoided the call but broke two programs of the test suite
under Numba 0.68 (writes through an array appended to a list in a loop were lost; a product
adjoint's BLAS call read wrong values), so it is not used. The element arithmetic is Numba's
own lowering of each operator (`_apply`): a compiled helper per element stayed a call (17.6
against 4.4 ns per ten-element accumulation, measured).
"""
from __future__ import annotations

import ast
import operator

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import load_item, store_item
from numba.np.numpy_support import as_dtype

_BROADCAST = "operands could not be broadcast together with the shape of the accumulated adjoint"
_OVERLAP = ("zymo's Numba backend cannot add into an adjoint that arrays overlapping it in "
            "memory are read from (a broadcast one, or ones on both sides); call with numba=False")


def fast(d, xs, expr: str) -> bool:
    """Whether `acc_ew` writes the loops itself for these types (module contract)."""
    if not (isinstance(d, types.Array) and d.layout == "C" and d.ndim >= 1
            and str(d.dtype) in ("float32", "float64", "complex64", "complex128")):
        return False
    dt = as_dtype(d.dtype)
    for x in xs:
        if isinstance(x, types.Array):
            if not (x.layout == "C" and x.ndim == d.ndim and x.dtype == d.dtype):
                return False
        elif not (isinstance(x, (types.Integer, types.Float, types.Complex))
                  and np.result_type(dt, as_dtype(x)) == dt):
            return False
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) for n in ast.walk(ast.parse(expr, mode="eval"))):
        return False
    return any(isinstance(x, types.Array) for x in xs)


_SCALAR: dict = {}


def _function(params: str, body: str):
    ns: dict = {}
    exec(compile(f"def f({params}):\n{body}", "<zymo acc_ew>", "exec"), ns)
    return ns["f"]


@intrinsic(prefer_literal=True)
def acc_ew(typingctx, d, expr, xs):
    if not isinstance(expr, types.StringLiteral) or not isinstance(xs, types.BaseTuple):
        raise TypingError("zymo: acc_ew takes a constant expression and a tuple of operands")
    text = expr.literal_value
    n = len(xs)
    names = ", ".join(f"x{i}" for i in range(n))
    unpack = "".join(f"    x{i} = xs[{i}]\n" for i in range(n))
    if not isinstance(d, types.Array):
        tys = {f"x{i}": x for i, x in enumerate(xs)}
        if not any(isinstance(x, types.Array) for x in xs):  # numbers: the arithmetic in place
            tree = ast.parse(text, mode="eval").body
            ret = _typeof(typingctx, ast.BinOp(ast.Name("d"), ast.Add(), tree), dict(tys, d=d))

            def codegen_scalar(context, builder, signature, args):
                env = {f"x{i}": (builder.extract_value(args[2], i), x) for i, x in enumerate(xs)}
                env["d"] = (args[0], d)
                value, ty = _element(context, builder, ast.BinOp(ast.Name("d"), ast.Add(), tree), env)
                return context.cast(builder, value, ty, ret)
            return ret(d, expr, xs), codegen_scalar
        key = (text, n)
        if key not in _SCALAR:  # a float that becomes an array, as `+=` rebinds it: typed by a
            from numba import njit  # dispatcher of its own (kept: Numba holds a weak reference)

            _SCALAR[key] = njit(_function("d, xs", f"{unpack}    return d + ({text})\n"))
        add = _SCALAR[key].py_func
        ret = typingctx.resolve_function_type(types.Dispatcher(_SCALAR[key]), (d, xs), {}).return_type
        sig = ret(d, expr, xs)

        def codegen_rebind(context, builder, signature, args):
            return context.compile_internal(builder, add, ret(d, xs), [args[0], args[2]])
        return sig, codegen_rebind
    if not fast(d, xs, text):
        add = _function("d, xs", f"{unpack}    d += {text}\n    return d\n")

        def codegen_numpy(context, builder, signature, args):
            return context.compile_internal(builder, add, d(d, xs), [args[0], args[2]])
        return d(d, expr, xs), codegen_numpy

    tree = ast.parse(text, mode="eval").body

    def codegen(context, builder, signature, args):
        return _loops(context, builder, d, xs, args[0], args[2], tree)
    return d(d, expr, xs), codegen


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _apply(context, builder, fn, operands):
    """`fn` applied to `(value, type)` operands by Numba's own lowering of it (instructions
    in place, no call); returns `(value, type)`."""
    tys = tuple(ty for _, ty in operands)
    sig = context.typing_context.resolve_function_type(fn, tys, {})
    vals = [context.cast(builder, v, ty, want) for (v, ty), want in zip(operands, sig.args)]
    return context.get_function(fn, sig)(builder, vals), sig.return_type


def _typeof(typingctx, node, tys):
    """The Numba type of expression `node` over numbers (`_element`'s, at typing time)."""
    if isinstance(node, ast.Name):
        return tys[node.id]
    if isinstance(node, ast.Constant):
        return types.int64 if isinstance(node.value, int) else types.float64
    if isinstance(node, ast.UnaryOp):
        inner = _typeof(typingctx, node.operand, tys)
        if isinstance(node.op, ast.UAdd):
            return inner
        return typingctx.resolve_function_type(operator.neg, (inner,), {}).return_type
    args = (_typeof(typingctx, node.left, tys), _typeof(typingctx, node.right, tys))
    return typingctx.resolve_function_type(_OPS[type(node.op)], args, {}).return_type


def _element(context, builder, node, env):
    """The value of expression `node` for one element: `env` maps `x<i>` to `(value, type)`."""
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.Constant):
        ty = types.int64 if isinstance(node.value, int) else types.float64
        return context.get_constant(ty, node.value), ty
    if isinstance(node, ast.UnaryOp):
        operand = _element(context, builder, node.operand, env)
        if isinstance(node.op, ast.UAdd):
            return operand
        return _apply(context, builder, operator.neg, [operand])
    return _apply(context, builder, _OPS[type(node.op)], [_element(context, builder, node.left, env),
                                                         _element(context, builder, node.right, env)])


def _loops(context, builder, dty, xsty, dval, xsval, tree):
    """The guarded loop nests of the module contract, in LLVM IR."""
    intp = context.get_value_type(types.intp)
    zero, one = ir.Constant(intp, 0), ir.Constant(intp, 1)
    false, true = cgutils.false_bit, cgutils.true_bit
    nd = dty.ndim
    dary = context.make_array(dty)(context, builder, dval)
    dshape = cgutils.unpack_tuple(builder, dary.shape, nd)
    dstrides = cgutils.unpack_tuple(builder, dary.strides, nd)
    pd = builder.ptrtoint(dary.data, intp)
    ed = builder.add(pd, builder.mul(dary.nitems, dary.itemsize))
    d_nonempty = builder.icmp_signed(">", dary.nitems, zero)
    bad = conflict = above = below = false
    operands = []
    for i, xty in enumerate(xsty):
        xval = builder.extract_value(xsval, i)
        if not isinstance(xty, types.Array):
            operands.append((xty, xval, None))
            continue
        xary = context.make_array(xty)(context, builder, xval)
        xshape = cgutils.unpack_tuple(builder, xary.shape, nd)
        steps, full = [], true
        for k in range(nd):
            eq = builder.icmp_signed("==", xshape[k], dshape[k])
            steps.append(builder.zext(eq, intp))  # 1, or 0 on a broadcast dimension
            full = builder.and_(full, eq)
            bad = builder.or_(bad, builder.and_(builder.not_(eq), builder.icmp_signed("!=", xshape[k], one)))
        px = builder.ptrtoint(xary.data, intp)
        ex = builder.add(px, builder.mul(xary.nitems, xary.itemsize))
        meets = builder.and_(builder.icmp_signed("<", px, ed), builder.icmp_signed("<", pd, ex))
        meets = builder.and_(meets, builder.and_(d_nonempty, builder.icmp_signed(">", xary.nitems, zero)))
        same = builder.and_(builder.icmp_signed("==", px, pd), full)
        overlaps = builder.and_(meets, builder.not_(same))
        conflict = builder.or_(conflict, builder.and_(overlaps, builder.not_(full)))
        above = builder.or_(above, builder.and_(overlaps, builder.icmp_signed(">", px, pd)))
        below = builder.or_(below, builder.and_(overlaps, builder.icmp_signed("<", px, pd)))
        operands.append((xty, xary, (xshape, cgutils.unpack_tuple(builder, xary.strides, nd), steps)))
    with builder.if_then(bad, likely=False):
        context.call_conv.return_user_exc(builder, ValueError, (_BROADCAST,))
    with builder.if_then(builder.or_(conflict, builder.and_(above, below)), likely=False):
        context.call_conv.return_user_exc(builder, ValueError, (_OVERLAP,))

    def body(inds):
        dptr = cgutils.get_item_pointer2(context, builder, dary.data, dshape, dstrides, dty.layout, inds)
        env = {}
        for i, (xty, x, geo) in enumerate(operands):
            if geo is None:
                env[f"x{i}"] = (x, xty)
                continue
            xshape, xstrides, steps = geo
            xinds = [builder.mul(ix, st) for ix, st in zip(inds, steps)]
            xptr = cgutils.get_item_pointer2(context, builder, x.data, xshape, xstrides, xty.layout, xinds)
            env[f"x{i}"] = (load_item(context, builder, xty, xptr), xty.dtype)
        e = _element(context, builder, tree, env)
        total, ty = _apply(context, builder, operator.add, [(load_item(context, builder, dty, dptr), dty.dtype), e])
        store_item(context, builder, dty, context.cast(builder, total, ty, dty.dtype), dptr)

    with builder.if_else(below) as (downwards, upwards):
        with downwards:
            with cgutils.loop_nest(builder, dshape, intp) as inds:
                body([builder.sub(builder.sub(dshape[k], one), inds[k]) for k in range(nd)])
        with upwards:
            with cgutils.loop_nest(builder, dshape, intp) as inds:
                body(list(inds))
    return impl_ret_borrowed(context, builder, dty, dval)


# -- product adjoints ---------------------------------------------------------------------
# `numba_.accumulating_products` writes `d = _rt.acc_dot_vjp_a(d, g, a, b)` (and `_b`,
# `acc_matmul_vjp_*`). For an outer product (`dot(A, x)`'s adjoint of `A`) and a matrix-vector
# product (its adjoint of `x`, or `dot(x, A)`'s of `x`) of arrays of one float dtype, the
# intrinsic below writes the loops into the program: `acc[i, j] += u[i] * v[j]`, and
# `acc[i] += s` with `s` the row's sum of products (`acc[j] += m[i, j] * v[i]` for the
# transposed product). Mismatched shapes raise; an accumulator that shares memory with an
# operand, and every other case, run the overloaded implementation (`numba_rt._acc_product`:
# BLAS with beta = 1, or the plain sum) by a call.


def product(which: str, overloaded):
    """The intrinsic `acc_<product>_vjp_<which>(acc, g, a, b)` (`which` "a" or "b"),
    `acc += <product>_vjp_<which>(g, a, b)`, falling back to `overloaded` (see above), which
    is lowered as an ordinary call to its overload: nothing else is compiled for it."""
    @intrinsic
    def acc_product(typingctx, acc, g, a, b):
        kind = _loop_kind(which, acc, g, a, b)
        fnty = typingctx.resolve_value_type(overloaded)
        sig = typingctx.resolve_function_type(fnty, (acc, g, a, b), {})

        def codegen(context, builder, signature, args):
            def call():
                return context.get_function(fnty, sig)(builder, args)
            if kind is None:
                return call()
            return _product_loops(context, builder, kind, signature, args, call)
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
    if which == "a" and nd == (2, 1, 2, 1):
        return ("outer", 1, 3)  # dot(A, x), adjoint of A: g x^T
    if which == "b" and nd == (2, 1, 1, 2):
        return ("outer", 2, 1)  # dot(x, B), adjoint of B: x g^T
    if which == "a" and nd == (1, 1, 1, 2):
        return ("mv", 3, 1)     # dot(x, B), adjoint of x: B g
    if which == "b" and nd == (1, 1, 2, 1):
        return ("mvt", 2, 1)    # dot(A, x), adjoint of x: A^T g
    return None


def _product_loops(context, builder, kind, signature, args, call):
    intp = context.get_value_type(types.intp)
    zero = ir.Constant(intp, 0)
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

    def span(k):
        """The byte range array `k` reaches, from its strides (any layout; negative too)."""
        lo = hi = builder.ptrtoint(arys[k].data, intp)
        for extent, stride in zip(shapes[k], strides[k]):
            step = builder.mul(builder.sub(extent, ir.Constant(intp, 1)), stride)
            negative = builder.icmp_signed("<", step, zero)
            lo = builder.add(lo, builder.select(negative, step, zero))
            hi = builder.add(hi, builder.select(negative, zero, step))
        return lo, builder.add(hi, arys[k].itemsize)

    a_lo, a_hi = span(0)
    shared = cgutils.false_bit
    for k in (p, q):
        lo, hi = span(k)
        meets = builder.and_(builder.icmp_signed("<", lo, a_hi), builder.icmp_signed("<", a_lo, hi))
        nonempty = builder.and_(builder.icmp_signed(">", arys[k].nitems, zero),
                                builder.icmp_signed(">", arys[0].nitems, zero))
        shared = builder.or_(shared, builder.and_(meets, nonempty))
    dty = tys[0].dtype

    def item(k, inds):
        ptr = cgutils.get_item_pointer2(context, builder, arys[k].data, shapes[k], strides[k], tys[k].layout, inds)
        return ptr, load_item(context, builder, tys[k], ptr)

    def madd(total, x, y):
        prod, pty = _apply(context, builder, operator.mul, [(x, dty), (y, dty)])
        s, sty = _apply(context, builder, operator.add, [(total, dty), (prod, pty)])
        return context.cast(builder, s, sty, dty)

    with builder.if_else(shared, likely=False) as (through_call, loops):
        with through_call:
            context.nrt.decref(builder, tys[0], call())  # the overload returns `acc` (a new reference)
        with loops:
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
    return impl_ret_borrowed(context, builder, tys[0], args[0])
