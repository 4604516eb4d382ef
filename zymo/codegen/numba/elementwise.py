"""Elementwise statements compiled as loops in place, for Numba-compiled derivative code.

Contract: five Numba intrinsics (callable from Numba-compiled code only;
`ew_rewrite.elementwise_statements` writes the calls), each taking `expr`, a constant string
built of the names `x<i>` and numbers by `+ - * /`, unary minus, NumPy's functions of one operand
(`np.exp(x0)`; `ew_rewrite._EW_FUNCS`) and of two (`np.maximum(x0, x1)`; `ew_rewrite._EW_BINARY`),
`_rt.as_shape(e, x<k>)` (or `as_tangent`: `e` cast to the dtype of array `x<k>`, whose shape
takes part in the broadcast; a number `x<k>` is refused at typing) and masks (one comparison,
`|`, `&`, `_MASKS`, `np.where(c, a, b)`; typed as `_operand_types` says), and `xs`, the tuple
of its operands:

- `acc_ew(d, expr, xs)`: Python's `d += e` (`e` the value of `expr`); returns `d` (the new
  value, for a number);
- `ew_set(d, expr, xs)`: `d[...] = e`;
- `ew_out(d, expr, xs, call)`: a ufunc statement with `out=d` (`call`, its text) that computes
  `e`: `d[...] = e` when fast, else `call` itself;
- `ew_new(expr, xs)`: `e`, a new array (or a number when every operand is one);
- `ew_sum(expr, xs)`: `np.sum(e)`;
- `ew_like(x, expr, xs)`: `rt.as_tangent(e, x)`, `e` broadcast into a new array like `x`.

NumPy's semantics hold exactly: the same operations on each element, in the same order
(tests compare real dtypes bit for bit; `a ** 2` is the square `a * a`, as NumPy and Python
compute it; any other power is Numba's power of two numbers, which its array expressions
use too: `0.0 ** -2` raises ZeroDivisionError there, where NumPy gives inf; a function, and
complex arithmetic, are Numba's lowering for one element, as in Numba's own ufunc loops:
NumPy's SIMD loops can differ in the last bit). A sum over a flat
loop keeps eight interleaved partial sums (element `i` into sum `i % 8`, the rest after the
last full block into the total), added pairwise at the end as NumPy does within a block (its
pairwise recursion over longer arrays is not followed: last bits differ from NumPy's and
from Numba's C-order `np.sum`; the error bound is eight times smaller than C order's, and the
adds no longer wait on each other: `docs/decisions/0001`); a nested loop adds
in C order. A read-only `d` is never fast
(Numba refuses the statement, as NumPy does). When the
statement is *fast* (below) the intrinsic writes the loops over the elements itself: no
temporary array, no call, no compiled kernel. Operands broadcast as in NumPy (extent 1, or a
lower rank, against the statement's shape; the shape of a new array or a sum is the operands'
broadcast shape); any other mismatch raises NumPy's error. An array operand whose memory
overlaps `d` other than element for element (NumPy computes `e` whole before writing `d`) is
copied first. When `d` and every array operand are C-ordered and of one shape, one flat loop
runs over the elements; otherwise the loops nest, stepping by each operand's strides.

Fast: every array operand has one float or complex dtype (or is a bool array: a mask), `d`'s
when there is a `d`, a rank no higher than the statement's, and the element arithmetic
(`accumulate`-style lowering by Numba's own operators) stays in that dtype (a number
that would widen it, as Python's floats do float32's, is not fast); a division only in real
dtypes (it is written as IEEE division, NumPy's: a zero divisor gives inf, as everywhere in the
generated program: `fdiv`).
`ew_set` of numbers only is always fast (they are computed, then cast, as NumPy does).
Anything else runs the statement itself, compiled by Numba (`compile_internal`).

Why intrinsics: Numba's array expressions compile a kernel per statement and run the loop nest
of the result's rank with no collapse, slow over 3-d arrays with a last extent of 2 (a gm3
state `r[:, :, k]`, `ddr += s * w`). In loops over small arrays the call and temporaries of an
array expression cost more than the work (measurements: `docs/decisions/0001`).
"""
from __future__ import annotations

import ast
import operator
import re

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.imputils import impl_ret_borrowed, impl_ret_new_ref
from numba.extending import intrinsic

from .ew_loops import _broadcast_shape, _element, _numbers, _statement, apply
from .ew_types import _FLOATS, _dtype, _elements, _fallback, _parse, _typeof, _writable, new_array

# -- the intrinsics --------------------------------------------------------------------------


def _add_numbers(typingctx, d, tree, xs, at):
    """`d + e` of numbers `d` and `xs` (the intrinsic's argument `at`): its type and lowering."""
    total = ast.BinOp(ast.Name("d"), ast.Add(), tree)
    ret = _typeof(typingctx, total, dict(_elements(xs), d=d))

    def codegen(context, builder, signature, args):
        env = _numbers(builder, xs, args[at])
        env["d"] = (args[0], d)
        value, ty = _element(context, builder, total, env)
        return context.cast(builder, value, ty, ret)
    return ret, codegen


@intrinsic(prefer_literal=True)
def acc_ew(typingctx, d, expr, xs):
    text, tree, unpack = _parse(expr, xs)
    if isinstance(d, types.Number):
        if not any(isinstance(x, types.Array) for x in xs):  # numbers: the arithmetic in place
            try:
                ret, codegen_scalar = _add_numbers(typingctx, d, tree, xs, 2)
                return ret(d, expr, xs), codegen_scalar
            except TypingError:
                pass
        # a number that becomes an array, as `+=` rebinds it (or numbers the element code does
        # not take: the statement as written)
        ret, codegen_rebind = _as_written(typingctx, "rebind", "d, xs", f"{unpack}    return d + ({text})\n",
                                          (d, xs), (0, 2))
        return ret(d, expr, xs), codegen_rebind
    if not _writable(d) or _dtype(typingctx, tree, xs, d) is None:
        add = _fallback("d, xs", f"{unpack}    d += {text}\n    return d\n")

        def codegen_numpy(context, builder, signature, args):
            return context.compile_internal(builder, add, d(d, xs), [args[0], args[2]])
        return d(d, expr, xs), codegen_numpy

    def codegen(context, builder, signature, args):
        _statement(context, builder, "+=", tree, xs, args[2], d, args[0])
        return impl_ret_borrowed(context, builder, d, args[0])
    return d(d, expr, xs), codegen


@intrinsic(prefer_literal=True)
def acc_unbroadcast(typingctx, d, x, expr, xs):
    """`d += rt.unbroadcast(e, x)`: `e` summed over the dimensions by which it broadcasts
    against `x`, added into `d` (the adjoint of `x`, of its shape). Fast (module contract; `e`
    of `d`'s rank or higher, whatever its operands' ranks): when `e` has `d`'s shape, `d += e`;
    otherwise one loop nest over the broadcast shape of `e` and `d` sums `e` into zeros of `d`'s shape (C
    order: last bits can differ from NumPy's pairwise sum), then adds that into `d`, as the
    helper does (adding each element into `d` directly would reorder the sum: `1 + 1e20 -
    1e20` is 0, the helper's `1 + (1e20 - 1e20)` is 1). `d` must have `x`'s shape (else
    ValueError). A number `d` with a number `x` gets the sum of `e` (`ew_sum`'s loops) added.
    Anything else runs the statement itself."""
    text, tree, unpack = _parse(expr, xs)
    arrays = [v for v in xs if isinstance(v, types.Array)]
    if isinstance(d, types.Number) and isinstance(x, types.Number):
        if not arrays:
            try:
                ret, codegen_numbers = _add_numbers(typingctx, d, tree, xs, 3)
                return ret(d, x, expr, xs), codegen_numbers
            except TypingError:  # numbers the element code does not take: the statement as written
                pass
        dt = _dtype(typingctx, tree, xs) if arrays else None
        if dt is not None:
            ret = typingctx.resolve_function_type(operator.add, (d, dt), {}).return_type
            nd = max(v.ndim for v in arrays)

            def codegen_sum(context, builder, signature, args):
                shape = _broadcast_shape(context, builder, nd, xs, args[3])
                s = _statement(context, builder, "sum", tree, xs, args[3], None, None, shape=shape, dt=dt)
                value, ty = apply(context, builder, operator.add, [(args[0], d), (s, dt)])
                return context.cast(builder, value, ty, ret)
            return ret(d, x, expr, xs), codegen_sum
    elif (_writable(d) and isinstance(x, types.Array) and x.ndim == d.ndim and arrays
          and max(v.ndim for v in arrays) >= d.ndim and _dtype(typingctx, tree, xs, d, reduce=True) is not None):
        nd = max([d.ndim] + [v.ndim for v in arrays])

        def codegen(context, builder, signature, args):
            intp = context.get_value_type(types.intp)
            dary = context.make_array(d)(context, builder, args[0])
            xary = context.make_array(x)(context, builder, args[1])
            dshape = cgutils.unpack_tuple(builder, dary.shape, d.ndim)
            other = cgutils.false_bit
            for a, b in zip(dshape, cgutils.unpack_tuple(builder, xary.shape, x.ndim)):
                other = builder.or_(other, builder.icmp_signed("!=", a, b))
            with builder.if_then(other, likely=False):
                context.call_conv.return_user_exc(builder, ValueError, (
                    "zymo internal error: an adjoint does not have its operand's shape",))
            shape = _broadcast_shape(context, builder, nd, xs, args[3])
            one = ir.Constant(intp, 1)
            for k, ext in enumerate(dshape):
                j = nd - d.ndim + k
                shape[j] = builder.select(builder.icmp_signed("!=", ext, one), ext, shape[j])
            whole = cgutils.true_bit if nd == d.ndim else cgutils.false_bit
            for k, ext in enumerate(dshape):
                whole = builder.and_(whole, builder.icmp_signed("==", ext, shape[nd - d.ndim + k]))
            with builder.if_else(whole) as (plain, summed):
                with plain:  # nothing to sum: `d += e`
                    _statement(context, builder, "+=", tree, xs, args[3], d, args[0], shape=shape)
                with summed:  # the sum first, into zeros of d's shape, then added (the helper's order)
                    part_ty = types.Array(d.dtype, d.ndim, "C")
                    part = new_array(context, builder, part_ty, dshape)
                    cgutils.memset(builder, part.data, builder.mul(part.nitems, part.itemsize), 0)
                    _statement(context, builder, "+=", tree, xs, args[3], part_ty, part._getvalue(), shape=shape)
                    parts = context.make_tuple(builder, types.Tuple([part_ty]), [part._getvalue()])
                    _statement(context, builder, "+=", ast.Name("x0"), (part_ty,), parts, d, args[0])
                    context.nrt.decref(builder, part_ty, part._getvalue())
            return impl_ret_borrowed(context, builder, d, args[0])
        return d(d, x, expr, xs), codegen
    ret, codegen_numpy = _as_written(typingctx, "unbroadcast", "d, x, xs",
                                     f"{unpack}    d += _rt.unbroadcast({text}, x)\n    return d\n",
                                     (d, x, xs), (0, 1, 3))
    return ret(d, x, expr, xs), codegen_numpy


def _set_fast(typingctx, d, tree, xs) -> bool:
    """Whether `d[...] = e` is fast (module contract): `e` of numbers only is computed, then cast."""
    numbers = not any(isinstance(x, types.Array) for x in xs)
    fast = _writable(d) and str(d.dtype) in _FLOATS and (numbers or _dtype(typingctx, tree, xs, d) is not None)
    if numbers and fast:
        try:
            ty = _typeof(typingctx, tree, _elements(xs))
            fast = d.ndim > 0 and (isinstance(ty, (types.Integer, types.Float))
                                   or isinstance(ty, types.Complex) and isinstance(d.dtype, types.Complex))
        except TypingError:
            fast = False
    return fast


@intrinsic(prefer_literal=True)
def ew_set(typingctx, d, expr, xs):
    text, tree, unpack = _parse(expr, xs)
    if not _set_fast(typingctx, d, tree, xs):
        put = _fallback("d, xs", f"{unpack}    d[...] = {text}\n")

        def codegen_numpy(context, builder, signature, args):
            context.compile_internal(builder, put, types.none(d, xs), [args[0], args[2]])
            return context.get_dummy_value()
        return types.none(d, expr, xs), codegen_numpy

    def codegen(context, builder, signature, args):
        _statement(context, builder, "=", tree, xs, args[2], d, args[0])
        return context.get_dummy_value()
    return types.none(d, expr, xs), codegen


@intrinsic(prefer_literal=True)
def ew_out(typingctx, d, expr, xs, call):
    """`call` (a NumPy ufunc with `out=d`, as text over `x<i>` and `d`) when it is `d[...] = e`:
    fast (module contract) with array operands; otherwise `call` itself, compiled by Numba with
    zymo's `np` (`np_shim`: its `out=` buffers overlapping inputs as NumPy does)."""
    text, tree, unpack = _parse(expr, xs)
    if not isinstance(call, types.StringLiteral):
        raise TypingError("zymo: ew_out takes a constant call")
    fast = (_writable(d) and any(isinstance(x, types.Array) for x in xs)
            and _dtype(typingctx, tree, xs, d) is not None)
    if not fast:
        from . import np_shim as numba_np

        run = _fallback("d, xs", f"{unpack}    {call.literal_value}\n", numba_np)

        def codegen_numpy(context, builder, signature, args):
            context.compile_internal(builder, run, types.none(d, xs), [args[0], args[2]])
            return context.get_dummy_value()
        return types.none(d, expr, xs, call), codegen_numpy

    def codegen(context, builder, signature, args):
        _statement(context, builder, "=", tree, xs, args[2], d, args[0])
        return context.get_dummy_value()
    return types.none(d, expr, xs, call), codegen


def _value_or_fallback(typingctx, expr, xs, kind, template):
    """`ew_new`'s and `ew_sum`'s typing when no loops are written: numbers only (the value,
    computed in place) or a statement that is not fast (`return <template with the
    expression>`, compiled by Numba); None when the loops are written."""
    text, tree, unpack = _parse(expr, xs)
    numbers = not any(isinstance(x, types.Array) for x in xs)
    if numbers:
        try:
            ret = _typeof(typingctx, tree, _elements(xs))
        except TypingError:  # numbers the element code does not take: the statement as written
            ret = None
        if ret is not None:
            def codegen_scalar(context, builder, signature, args):
                value, ty = _element(context, builder, tree, _numbers(builder, xs, args[1]))
                return context.cast(builder, value, ty, ret)
            return ret(expr, xs), codegen_scalar
    elif _dtype(typingctx, tree, xs) is not None:
        return None
    ret, codegen_numpy = _as_written(typingctx, kind, "xs", f"{unpack}    return {template.format(text)}\n",
                                     (xs,), (1,))
    return ret(expr, xs), codegen_numpy


@intrinsic(prefer_literal=True)
def ew_new(typingctx, expr, xs):
    # a new array, also where the statement runs as written: `x0` alone would return the operand
    # itself (a 0-d array's `x.copy()`, written `ew_new('x0', ...)`, then shared its memory: a
    # snapshot that changed with `x`, a wrong gradient under numba=True, helper 73)
    bare = isinstance(expr, types.StringLiteral) and re.fullmatch(r"\s*\(?\s*x\d+\s*\)?\s*", expr.literal_value)
    done = _value_or_fallback(typingctx, expr, xs, "new", "np.copy({})" if bare else "{}")
    if done is not None:
        return done
    _, tree, _ = _parse(expr, xs)
    dt = _dtype(typingctx, tree, xs)
    arr = types.Array(dt, max(x.ndim for x in xs if isinstance(x, types.Array)), "C")

    def codegen(context, builder, signature, args):
        shape = _broadcast_shape(context, builder, arr.ndim, xs, args[1])
        new = _statement(context, builder, "=", tree, xs, args[1], arr, None, shape=shape, fresh=True)
        return impl_ret_new_ref(context, builder, arr, new)
    return arr(expr, xs), codegen


@intrinsic(prefer_literal=True)
def ew_like(typingctx, x, expr, xs):
    """`rt.as_tangent(e, x)`: a new array of `x`'s shape and dtype holding `e` broadcast to it.
    Fast for a C-ordered float or complex `x` of rank 1 or more (`e` then typed as `ew_set`'s
    statement into it); otherwise the helper itself."""
    text, tree, unpack = _parse(expr, xs)
    fast = isinstance(x, types.Array) and x.layout == "C" and x.ndim > 0 and str(x.dtype) in _FLOATS
    arr = types.Array(x.dtype, x.ndim, "C") if fast else None
    if fast and not any(isinstance(v, types.Array) for v in xs):
        try:
            ty = _typeof(typingctx, tree, _elements(xs))
            fast = isinstance(ty, (types.Integer, types.Float)) or (
                isinstance(ty, types.Complex) and isinstance(x.dtype, types.Complex))
        except TypingError:
            fast = False
    elif fast:
        fast = _dtype(typingctx, tree, xs, arr) is not None
    if not fast:
        ret, codegen_numpy = _as_written(typingctx, "like", "x, xs",
                                         f"{unpack}    return _rt.as_tangent({text}, x)\n", (x, xs), (0, 2))
        return ret(x, expr, xs), codegen_numpy

    def codegen(context, builder, signature, args):
        xary = context.make_array(x)(context, builder, args[0])
        shape = cgutils.unpack_tuple(builder, xary.shape, x.ndim)
        new = _statement(context, builder, "=", tree, xs, args[2], arr, None, shape=shape, fresh=True)
        return impl_ret_new_ref(context, builder, arr, new)
    return arr(x, expr, xs), codegen


@intrinsic(prefer_literal=True)
def ew_sum(typingctx, expr, xs):
    done = _value_or_fallback(typingctx, expr, xs, "sum", "np.sum({})")
    if done is not None:
        return done
    _, tree, _ = _parse(expr, xs)
    dt = _dtype(typingctx, tree, xs)
    nd = max(x.ndim for x in xs if isinstance(x, types.Array))

    def codegen(context, builder, signature, args):
        shape = _broadcast_shape(context, builder, nd, xs, args[1])
        return _statement(context, builder, "sum", tree, xs, args[1], None, None, shape=shape, dt=dt)
    return dt(expr, xs), codegen


_DISPATCHERS: dict = {}


def _as_written(typingctx, kind, params, body, tys, positions):
    """The statement as written (`def f(<params>): <body>`, see `_fallback`), compiled by Numba:
    its return type for argument types `tys`, and a lowering that passes it the intrinsic's
    arguments at `positions`."""
    disp = _dispatcher((kind, params, body), _fallback(params, body))
    fn = disp.dispatcher.py_func
    ret = typingctx.resolve_function_type(disp, tys, {}).return_type

    def codegen(context, builder, signature, args):
        return context.compile_internal(builder, fn, ret(*tys), [args[p] for p in positions])
    return ret, codegen


def _dispatcher(key, fn):
    """A Numba dispatcher type for typing a fallback (kept: Numba holds a weak reference).
    `key` names the function's whole source: one expression text may come with more operands
    than it reads, and a function cached by the text alone would unpack the wrong number."""
    from numba import njit

    if key not in _DISPATCHERS:
        _DISPATCHERS[key] = njit(fn)
    return types.Dispatcher(_DISPATCHERS[key])


@intrinsic
def fdiv(typingctx, a, b):
    """`a / b` (`rewrites.ieee_divisions` writes the calls): two real numbers divide as IEEE
    division, NumPy's (a zero divisor gives inf or nan; Numba's division of numbers raises
    `ZeroDivisionError`, as Python's does); anything else as Numba divides it."""
    real = (types.Integer, types.Float, types.Boolean)
    if isinstance(a, real) and isinstance(b, real):
        ret = typingctx.resolve_function_type(operator.truediv, (a, b), {}).return_type

        def codegen(context, builder, signature, args):
            value, ty = apply(context, builder, operator.truediv, list(zip(args, signature.args)), ieee=True)
            return context.cast(builder, value, ty, signature.return_type)
        return ret(a, b), codegen
    ret, codegen = _as_written(typingctx, "div", "a, b", "    return a / b\n", (a, b), (0, 1))
    return ret(a, b), codegen
