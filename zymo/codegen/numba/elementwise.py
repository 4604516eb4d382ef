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
adds no longer wait on each other: 100,000 squares sum about 2.5x faster); a nested loop adds
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
of the result's rank with no collapse: over 3-d arrays with a last extent of 2 (a gm3 state
`r[:, :, k]`, `ddr += s * w`) a product of two 8,192-element arrays took 18.6 µs against 3.1
µs for the same elements as a 2-d array. In loops over small arrays the call and temporaries
of an array expression cost more than the work (16 ns against 4 for ten elements).
"""
from __future__ import annotations

import ast
import operator

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.imputils import impl_ret_borrowed, impl_ret_new_ref
from numba.extending import intrinsic
from numba.np.arrayobj import get_itemsize, load_item, make_array, populate_array, store_item
from numba.np.numpy_support import as_dtype

_BROADCAST = "operands could not be broadcast together with the shape of the elementwise statement"
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_FLOATS = ("float32", "float64", "complex64", "complex128")
_LANES = 8  # partial sums of a flat sum


# -- typing ----------------------------------------------------------------------------------


def _is_as_shape(node) -> bool:
    """Whether `node` is `_rt.as_shape(e, y)` or `_rt.as_tangent(e, y)` (`y` an operand's name)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("as_shape", "as_tangent")
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "_rt")


_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
_LOGIC = {ast.BitOr: operator.or_, ast.BitAnd: operator.and_}
_BINOPS = {**_OPS, **_LOGIC}
# NumPy's functions of one operand that give a bool (`ew_rewrite._EW_MASKS`, which imports Numba late)
_MASKS = ("logical_not", "isnan", "isinf", "isfinite", "signbit")


def _operand_types(typingctx, node, tys):
    """`node`'s operands (`left`, `right`; a comparison's; `np.where`'s two values) and the
    types each is cast to before the operation: a bool against a float or complex takes its
    type (NumPy's promotion, and Numba's for arrays: a bool array times a float32 one is
    float32). A comparison and `np.where` unify their operands' types as Numba does (a float32
    against a number written out, float64, compares in float64, as the `@njit` primal does:
    `float32(0.3) > 0.3` is True there, False in NumPy 2); a comparison takes real numbers
    only, `|` and `&` two bools or two integers (Numba's bitwise operators); a square, unary
    minus and NumPy's functions take no bool.
    Raises TypingError for anything else (not fast)."""
    if isinstance(node, ast.Compare):
        pair = (node.left, node.comparators[0])
    elif isinstance(node, ast.Call):
        pair = (node.args[1], node.args[2])
    else:
        pair = (node.left, node.right)
    a, b = (_typeof(typingctx, n, tys) for n in pair)
    if isinstance(node, (ast.Compare, ast.Call)):
        a = b = typingctx.unify_pairs(a, b)
        if a is None or isinstance(node, ast.Compare) and not isinstance(a, (types.Integer, types.Float)):
            raise TypingError(f"zymo: no {ast.unparse(node)} of {a} and {b}")
    elif isinstance(node.op, tuple(_LOGIC)):  # of bools, or of integers as Numba types them
        if not (isinstance(a, types.Boolean) and isinstance(b, types.Boolean)
                or isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            raise TypingError(f"zymo: {ast.unparse(node)} of {a} and {b} (bools or integers only)")
    elif isinstance(a, types.Boolean) or isinstance(b, types.Boolean):
        if isinstance(b, (types.Float, types.Complex)):
            a = b
        elif isinstance(a, (types.Float, types.Complex)):
            b = a
        else:
            raise TypingError(f"zymo: arithmetic of {a} and {b}")
    return pair, (a, b)


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
        sig = None if isinstance(inner, types.Boolean) else typingctx.resolve_function_type(
            operator.neg, (inner,), {})
        if sig is None:
            raise TypingError(f"zymo: no negation of {inner}")
        return sig.return_type
    if _is_as_shape(node):  # `e` cast to the dtype of `y`'s elements
        _typeof(typingctx, node.args[0], tys)
        return tys[node.args[1].id]
    if isinstance(node, ast.Call) and node.func.attr == "where":
        _, (a, _) = _operand_types(typingctx, node, tys)
        if not isinstance(_typeof(typingctx, node.args[0], tys), types.Boolean):
            raise TypingError("zymo: np.where of a condition that is not a bool")
        return a
    if isinstance(node, ast.Call) and len(node.args) == 2:  # a ufunc of two operands, no bools
        args = tuple(_typeof(typingctx, a, tys) for a in node.args)
        sig = None if any(isinstance(a, types.Boolean) for a in args) else (
            typingctx.resolve_function_type(getattr(np, node.func.attr), args, {}))
        if sig is None or isinstance(sig.return_type, types.Boolean):
            raise TypingError(f"zymo: no np.{node.func.attr} of {args}")
        return sig.return_type
    if isinstance(node, ast.Call):
        arg = _typeof(typingctx, node.args[0], tys)
        mask = node.func.attr in _MASKS
        sig = None if isinstance(arg, types.Boolean) != (node.func.attr == "logical_not") else (
            typingctx.resolve_function_type(getattr(np, node.func.attr), (arg,), {}))
        if sig is None or mask != isinstance(sig.return_type, types.Boolean):
            raise TypingError(f"zymo: no np.{node.func.attr} of {arg}")
        return sig.return_type
    if isinstance(node, ast.Compare):
        _operand_types(typingctx, node, tys)
        return types.boolean
    if _is_square(node):  # `a ** 2`: a square, `a * a` (NumPy's and Python's)
        inner = _typeof(typingctx, node.left, tys)
        args = (inner, inner)
        sig = None if isinstance(inner, types.Boolean) else typingctx.resolve_function_type(operator.mul, args, {})
    elif isinstance(node.op, ast.Pow):  # Numba's power of two numbers, as its array expression takes it
        args = tuple(_typeof(typingctx, n, tys) for n in (node.left, node.right))
        sig = None if any(isinstance(a, types.Boolean) for a in args) else (
            typingctx.resolve_function_type(operator.pow, args, {}))
        if sig is not None and not isinstance(sig.return_type, types.Float):
            sig = None
    else:
        _, args = _operand_types(typingctx, node, tys)
        sig = typingctx.resolve_function_type(_BINOPS[type(node.op)], args, {})
    if sig is None:
        raise TypingError(f"zymo: no {type(node.op).__name__} of {args}")
    return sig.return_type


def _elements(xs) -> dict:
    """`x<i>` -> the type of one element of operand i."""
    return {f"x{i}": (x.dtype if isinstance(x, types.Array) else x) for i, x in enumerate(xs)}


def _dtype(typingctx, tree, xs, d=None, reduce=False):
    """The one dtype a fast statement computes in (module contract), or None. `reduce`: the
    operands may have a higher rank than `d` (`acc_unbroadcast`)."""
    arrays = [x for x in xs if isinstance(x, types.Array)]
    dts = {x.dtype for x in arrays if not isinstance(x.dtype, types.Boolean)} | ({d.dtype} if d is not None else set())
    if len(dts) != 1:
        return None
    (dt,) = dts
    if str(dt) not in _FLOATS:
        return None
    nd = d.ndim if d is not None else max(x.ndim for x in arrays)
    if nd == 0 or not reduce and any(x.ndim > nd for x in arrays):  # NumPy gives numbers for 0-d arrays
        return None
    npdt = as_dtype(dt)
    for x in xs:
        if not isinstance(x, types.Array) and not (
                isinstance(x, (types.Boolean, types.Integer, types.Float, types.Complex))
                and np.result_type(npdt, as_dtype(x)) == npdt):
            return None
    if isinstance(dt, types.Complex) and any(isinstance(n, ast.Div) for n in ast.walk(tree)):
        return None
    try:
        if _typeof(typingctx, tree, _elements(xs)) != dt:
            return None
    except TypingError:
        return None
    return dt


def new_array(context, builder, arrtype, shape):
    """A new C-ordered array of `arrtype` (C layout) and `shape` (intp values), made as Numba's
    `arrayobj._empty_nd_impl` makes it: the same size overflow check and error, alignment and
    NRT allocation, without its call of the array type's `_allocate` class method. That is an
    extension point for array subclasses, which zymo's arrays never are, and a compile of its
    own the first time a process allocates (0.1 s of `gmm_objective`'s first gradient, whose
    primal allocates nothing)."""
    assert arrtype.layout == "C", arrtype
    intp = context.get_value_type(types.intp)
    itemsize = context.get_constant(types.intp, get_itemsize(context, arrtype))
    size, overflow = context.get_constant(types.intp, 1), cgutils.false_bit
    for n in [*shape, itemsize]:
        product = builder.smul_with_overflow(size, n)
        size = builder.extract_value(product, 0)
        overflow = builder.or_(overflow, builder.extract_value(product, 1))
    with builder.if_then(overflow, likely=False):
        context.call_conv.return_user_exc(builder, ValueError, (
            "array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum possible size.",))
    strides = [itemsize]
    for n in reversed(shape[1:]):
        strides.append(builder.mul(strides[-1], n))
    strides = strides[::-1] if shape else []
    align = context.get_constant(types.uint32, context.get_preferred_array_alignment(arrtype.dtype))
    meminfo = context.nrt.meminfo_alloc_aligned(builder, size, align)
    ary = make_array(arrtype)(context, builder)
    data = builder.bitcast(context.nrt.meminfo_data(builder, meminfo),
                           context.get_data_type(arrtype.dtype).as_pointer())
    populate_array(ary, data=data, shape=cgutils.pack_array(builder, shape, ty=intp),
                   strides=cgutils.pack_array(builder, strides, ty=intp), itemsize=itemsize, meminfo=meminfo)
    return ary


def _writable(d) -> bool:
    """An array the loops may write (a read-only one is left to Numba, which refuses it)."""
    return isinstance(d, types.Array) and d.mutable


def _fallback(params: str, body: str, np_module=np):
    from zymo import runtime  # its helpers' Numba implementations: `twins`

    ns: dict = {"np": np_module, "_rt": runtime}
    exec(compile(f"def f({params}):\n{body}", "<zymo elementwise>", "exec"), ns)
    return ns["f"]


def _parse(expr, xs):
    if not isinstance(expr, types.StringLiteral) or not isinstance(xs, types.BaseTuple):
        raise TypingError("zymo: elementwise statements take a constant expression and a tuple of operands")
    text = expr.literal_value
    unpack = "".join(f"    x{i} = xs[{i}]\n" for i in range(len(xs)))
    tree = ast.parse(text, mode="eval").body
    for n in ast.walk(tree):
        if _is_as_shape(n) and not isinstance(xs[int(n.args[1].id[1:])], types.Array):
            raise TypingError(f"zymo: {ast.unparse(n)} of a number {n.args[1].id} (a tangent takes an array's shape)")
    return text, tree, unpack


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


@intrinsic(prefer_literal=True)
def ew_set(typingctx, d, expr, xs):
    text, tree, unpack = _parse(expr, xs)
    numbers = not any(isinstance(x, types.Array) for x in xs)
    fast = _writable(d) and str(d.dtype) in _FLOATS and (numbers or _dtype(typingctx, tree, xs, d) is not None)
    if numbers and fast:
        try:
            ty = _typeof(typingctx, tree, _elements(xs))
            fast = d.ndim > 0 and (isinstance(ty, (types.Integer, types.Float))
                                   or isinstance(ty, types.Complex) and isinstance(d.dtype, types.Complex))
        except TypingError:
            fast = False
    if not fast:
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
    done = _value_or_fallback(typingctx, expr, xs, "new", "{}")
    if done is not None:
        return done
    _, tree, _ = _parse(expr, xs)
    dt = _dtype(typingctx, tree, xs)
    arr = types.Array(dt, max(x.ndim for x in xs if isinstance(x, types.Array)), "C")

    def codegen(context, builder, signature, args):
        shape = _broadcast_shape(context, builder, arr.ndim, xs, args[1])
        new = _statement(context, builder, "=", tree, xs, args[1], arr, None, shape=shape,
                         make=lambda: new_array(context, builder, arr, shape))
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
        new = _statement(context, builder, "=", tree, xs, args[2], arr, None, shape=shape,
                         make=lambda: new_array(context, builder, arr, shape))
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


# -- the element -----------------------------------------------------------------------------


def apply(context, builder, fn, operands, ieee=False):
    """`fn` applied to `(value, type)` operands by Numba's own lowering of it (instructions
    in place, no call); returns `(value, type)`. `ieee`: a real division is IEEE division
    (NumPy's: a zero divisor gives inf) instead of Numba's, which raises `ZeroDivisionError`
    as Python does."""
    tys = tuple(ty for _, ty in operands)
    sig = context.typing_context.resolve_function_type(fn, tys, {})
    vals = [context.cast(builder, v, ty, want) for (v, ty), want in zip(operands, sig.args)]
    if ieee and fn is operator.truediv and isinstance(sig.return_type, types.Float):
        a, b = (context.cast(builder, v, ty, sig.return_type) for v, ty in zip(vals, sig.args))
        return builder.fdiv(a, b), sig.return_type
    return context.get_function(fn, sig)(builder, vals), sig.return_type


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


def _element(context, builder, node, env, arrays=frozenset()):
    """The value of expression `node` for one element: `env` maps `x<i>` to `(value, type)`;
    `arrays`: the names that stand for elements of arrays (an operation on one is NumPy's)."""
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.Constant):
        ty = types.int64 if isinstance(node.value, int) else types.float64
        return context.get_constant(ty, node.value), ty
    if isinstance(node, ast.UnaryOp):
        operand = _element(context, builder, node.operand, env, arrays)
        if isinstance(node.op, ast.UAdd):
            return operand
        return apply(context, builder, operator.neg, [operand])
    if _is_as_shape(node):  # `e` cast to `y`'s dtype (`y`'s shape is the loops')
        value, ty = _element(context, builder, node.args[0], env, arrays)
        want = env[node.args[1].id][1]
        return context.cast(builder, value, ty, want), want
    if isinstance(node, ast.Call) and node.func.attr == "where":  # both values computed, as NumPy does
        cond, _ = _element(context, builder, node.args[0], env, arrays)
        a, b = _cast_operands(context, builder, node, env, arrays)
        return builder.select(cond, a[0], b[0]), a[1]
    if isinstance(node, ast.Call):  # NumPy's function of one or two numbers, as Numba lowers its ufunc loop
        return apply(context, builder, getattr(np, node.func.attr),
                     [_element(context, builder, a, env, arrays) for a in node.args])
    if isinstance(node, ast.Compare):
        return apply(context, builder, _COMPARE[type(node.ops[0])], _cast_operands(context, builder, node, env, arrays))
    if _is_square(node):
        base = _element(context, builder, node.left, env, arrays)
        return apply(context, builder, operator.mul, [base, base])
    if isinstance(node.op, ast.Pow):  # Numba's `a ** b` of numbers, in its array expressions too (0.0 ** -2 raises)
        return apply(context, builder, operator.pow, [_element(context, builder, n, env, arrays)
                                                      for n in (node.left, node.right)])
    return apply(context, builder, _BINOPS[type(node.op)], _cast_operands(context, builder, node, env, arrays),
                 ieee=True)


def _cast_operands(context, builder, node, env, arrays):
    """`node`'s two operands (`_operand_types`), each `(value, type)` cast to its type there."""
    pair, tys = _operand_types(context.typing_context, node, {k: ty for k, (_, ty) in env.items()})
    out = []
    for n, want in zip(pair, tys):
        value, ty = _element(context, builder, n, env, arrays)
        out.append((context.cast(builder, value, ty, want), want))
    return out


def _is_square(node) -> bool:
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant)
            and type(node.right.value) is int and node.right.value == 2)


def _reads(node, names) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))



def _hoist(node, arrays, out):
    """`node` with each largest subexpression of numbers only (no name in `arrays`, not a
    single name or number) replaced by a name `_s<k>`; `out` gets `(name, subexpression)`:
    computed once, before the loops, with the same arithmetic (IEEE division too)."""
    if not _reads(node, arrays):
        if isinstance(node, (ast.Name, ast.Constant)):
            return node
        name = f"_s{len(out)}"
        out.append((name, node))
        return ast.Name(name, ast.Load())
    if isinstance(node, ast.UnaryOp):
        return ast.UnaryOp(node.op, _hoist(node.operand, arrays, out))
    if isinstance(node, ast.BinOp):
        return ast.BinOp(_hoist(node.left, arrays, out), node.op, _hoist(node.right, arrays, out))
    if isinstance(node, ast.Compare):
        return ast.Compare(_hoist(node.left, arrays, out), node.ops, [_hoist(node.comparators[0], arrays, out)])
    if _is_as_shape(node):
        return ast.Call(node.func, [_hoist(node.args[0], arrays, out), *node.args[1:]], [])
    if isinstance(node, ast.Call):
        return ast.Call(node.func, [_hoist(a, arrays, out) for a in node.args], [])
    return node


def _numbers(builder, xs, xsval) -> dict:
    return {f"x{i}": (builder.extract_value(xsval, i), x) for i, x in enumerate(xs)}


# -- the loops -------------------------------------------------------------------------------


def _broadcast_shape(context, builder, nd, xs, xsval):
    """The operands' broadcast shape (rank `nd`): each extent the one that is not 1, else 1;
    mismatches are found by `_statement`."""
    intp = context.get_value_type(types.intp)
    one = ir.Constant(intp, 1)
    shape = [one] * nd
    for i, x in enumerate(xs):
        if isinstance(x, types.Array):
            ary = context.make_array(x)(context, builder, builder.extract_value(xsval, i))
            own = cgutils.unpack_tuple(builder, ary.shape, x.ndim)
            for k, ext in enumerate(own):
                j = nd - x.ndim + k
                shape[j] = builder.select(builder.icmp_signed("!=", ext, one), ext, shape[j])
    return shape


def _span(builder, intp, data, shape, strides, itemsize):
    """The byte range `[lo, hi)` an array reaches, from its strides (any layout)."""
    zero, one = ir.Constant(intp, 0), ir.Constant(intp, 1)
    lo = hi = data
    for extent, stride in zip(shape, strides):
        step = builder.mul(builder.sub(extent, one), stride)
        negative = builder.icmp_signed("<", step, zero)
        lo = builder.add(lo, builder.select(negative, step, zero))
        hi = builder.add(hi, builder.select(negative, zero, step))
    return lo, builder.add(hi, itemsize)


def _statement(context, builder, mode, tree, xs, xsval, dty, dval, shape=None, dt=None, make=None):
    """The loops of the module contract, in LLVM IR. `mode`: "+=" or "=" into array `d`, or
    "sum" over `shape` (returns the sum). `make`: `d` is a new array of `shape` that `make()`
    allocates once the operands are checked (nothing overlaps it; returns it)."""
    intp = context.get_value_type(types.intp)
    zero, one = ir.Constant(intp, 0), ir.Constant(intp, 1)
    false, true = cgutils.false_bit, cgutils.true_bit
    fresh = make is not None
    if fresh:
        nd = dty.ndim
        flat = True
    elif dty is not None:
        dary = context.make_array(dty)(context, builder, dval)
        dshape = cgutils.unpack_tuple(builder, dary.shape, dty.ndim)
        dstrides = cgutils.unpack_tuple(builder, dary.strides, dty.ndim)
        if shape is None:
            shape = dshape
        nd = len(shape)
        pd = builder.ptrtoint(dary.data, intp)
        d_lo, d_hi = _span(builder, intp, pd, dshape, dstrides, dary.itemsize)
        d_nonempty = builder.icmp_signed(">", dary.nitems, zero)
        flat = dty.layout == "C" and dty.ndim == nd
    else:
        nd = len(shape)
        flat = True
    nitems = one
    for ext in shape:
        nitems = builder.mul(nitems, ext)
    bad, all_full = false, true
    d_full, d_steps = true, None  # `d` against the statement's shape (a reduction broadcasts it)
    if dty is not None and not fresh:
        pad = nd - dty.ndim
        d_full = true if pad == 0 else false
        d_steps = [zero] * pad
        for k in range(dty.ndim):
            eq = builder.icmp_signed("==", dshape[k], shape[pad + k])
            d_full = builder.and_(d_full, eq)
            bad = builder.or_(bad, builder.and_(builder.not_(eq), builder.icmp_signed("!=", dshape[k], one)))
            d_steps.append(builder.select(eq, dstrides[k], zero))
        all_full = d_full
    arys = {}
    for i, xty in enumerate(xs):  # shapes first: nothing is allocated before they are checked
        if isinstance(xty, types.Array):
            xary = context.make_array(xty)(context, builder, builder.extract_value(xsval, i))
            own_shape = cgutils.unpack_tuple(builder, xary.shape, xty.ndim)
            xshape = [one] * (nd - xty.ndim) + list(own_shape)
            full = true
            for k in range(nd):
                eq = builder.icmp_signed("==", xshape[k], shape[k])
                full = builder.and_(full, eq)
                bad = builder.or_(bad, builder.and_(builder.not_(eq), builder.icmp_signed("!=", xshape[k], one)))
            all_full = builder.and_(all_full, full)
            arys[i] = xary, own_shape, xshape, full
    with builder.if_then(bad, likely=False):
        context.call_conv.return_user_exc(builder, ValueError, (_BROADCAST,))
    # subexpressions of numbers, once (they may raise: before anything is allocated)
    arrays = frozenset(f"x{i}" for i, x in enumerate(xs) if isinstance(x, types.Array))
    numbers = []
    tree = _hoist(tree, arrays, numbers)
    scalars = {f"x{i}": (builder.extract_value(xsval, i), x) for i, x in enumerate(xs) if f"x{i}" not in arrays}
    hoisted = {name: _element(context, builder, sub, scalars) for name, sub in numbers}
    if fresh:
        dary = make()
        dstrides = cgutils.unpack_tuple(builder, dary.strides, nd)
        pd = builder.ptrtoint(dary.data, intp)
    operands, copies = [], []
    for i, xty in enumerate(xs):
        if not isinstance(xty, types.Array):
            operands.append((xty, builder.extract_value(xsval, i), None, None))
            continue
        flat = flat and xty.layout == "C" and xty.ndim == nd
        xary, own_shape, xshape, full = arys[i]
        own_strides = cgutils.unpack_tuple(builder, xary.strides, xty.ndim)
        pad = nd - xty.ndim
        px = builder.ptrtoint(xary.data, intp)
        data = cgutils.alloca_once_value(builder, px)
        strides = [cgutils.alloca_once_value(builder, s) for s in own_strides]
        if dty is not None and not fresh:
            x_lo, x_hi = _span(builder, intp, px, own_shape, own_strides, xary.itemsize)
            meets = builder.and_(builder.icmp_signed("<", x_lo, d_hi), builder.icmp_signed("<", d_lo, x_hi))
            meets = builder.and_(meets, builder.and_(d_nonempty, builder.icmp_signed(">", xary.nitems, zero)))
            same = builder.and_(builder.icmp_signed("==", px, pd), builder.and_(full, d_full))
            for k in range(xty.ndim):  # the same strides where they matter
                moves = builder.icmp_signed(">", own_shape[k], one)
                same = builder.and_(same, builder.or_(builder.not_(moves), builder.icmp_signed(
                    "==", own_strides[k], d_steps[pad + k])))
            copy = builder.and_(meets, builder.not_(same))
            buf = cgutils.alloca_once_value(builder, ir.Constant(cgutils.voidptr_t, None))
            with builder.if_then(copy, likely=False):
                _copy_into_new(context, builder, xty, xary, own_shape, own_strides, data, strides, buf)
            copies.append((copy, buf))
        operands.append((xty, None, (xshape, data, strides, pad), xary.itemsize))

    elem_ty = dty.dtype if dty is not None else dt
    total = None
    if mode == "sum":
        total = cgutils.alloca_once_value(builder, context.get_constant_null(dt))

    def add_to(slot, value, ty):
        s, sty = apply(context, builder, operator.add, [(builder.load(slot), dt), (value, ty)])
        builder.store(context.cast(builder, s, sty, dt), slot)

    def body(dptr, xptrs, slot=None):
        env = dict(hoisted)
        for i, (xty, x, _, _) in enumerate(operands):
            env[f"x{i}"] = (x, xty) if xptrs[i] is None else (
                load_item(context, builder, xty, xptrs[i]), xty.dtype)
        value, ty = _element(context, builder, tree, env, arrays)
        if mode == "sum":
            add_to(slot or total, value, ty)
            return
        if mode == "+=":
            value, ty = apply(context, builder, operator.add, [(load_item(context, builder, dty, dptr), elem_ty),
                                                                (value, ty)])
        store_item(context, builder, dty, context.cast(builder, value, ty, elem_ty), dptr)

    def pointer(base, offset):
        return builder.inttoptr(builder.add(base, offset), cgutils.voidptr_t)

    def typed(ptr, ty):
        return builder.bitcast(ptr, context.get_data_type(ty.dtype).as_pointer())

    def nested():
        bases = [None if geo is None else builder.load(geo[1]) for _, _, geo, _ in operands]
        eff = []
        for _, _, geo, _ in operands:
            if geo is None:
                eff.append(None)
                continue
            xshape, _, strides, pad = geo
            own = [builder.load(s) for s in strides]
            eff.append([zero] * pad + [builder.select(builder.icmp_signed("==", xshape[pad + k], shape[pad + k]),
                                                      own[k], zero) for k in range(len(own))])
        with cgutils.loop_nest(builder, shape, intp) as inds:
            dptr = None
            if dty is not None:
                off = zero
                for ix, st in zip(inds, dstrides if fresh else d_steps):
                    off = builder.add(off, builder.mul(ix, st))
                dptr = typed(pointer(pd, off), dty)
            xptrs = []
            for (xty, _, geo, _), base, st in zip(operands, bases, eff):
                if geo is None:
                    xptrs.append(None)
                    continue
                off = zero
                for ix, s in zip(inds, st):
                    off = builder.add(off, builder.mul(ix, s))
                xptrs.append(typed(pointer(base, off), xty))
            body(dptr, xptrs)

    def flat_loop():
        bases = [None if geo is None else builder.load(geo[1]) for _, _, geo, _ in operands]

        def at(i, slot=None):
            dptr = None if dty is None else typed(pointer(pd, builder.mul(i, dary.itemsize)), dty)
            xptrs = [None if geo is None else typed(pointer(base, builder.mul(i, size)), xty)
                     for (xty, _, geo, size), base in zip(operands, bases)]
            body(dptr, xptrs, slot)

        start = None
        if mode == "sum":  # eight interleaved partial sums, combined pairwise (as NumPy's blocks)
            lanes = [cgutils.alloca_once_value(builder, context.get_constant_null(dt)) for _ in range(_LANES)]
            blocks = builder.sdiv(nitems, ir.Constant(intp, _LANES))
            with cgutils.for_range(builder, blocks) as loop:
                first = builder.mul(loop.index, ir.Constant(intp, _LANES))
                for k, slot in enumerate(lanes):
                    at(builder.add(first, ir.Constant(intp, k)), slot)
            values = [(builder.load(slot), dt) for slot in lanes]
            while len(values) > 1:
                values = [apply(context, builder, operator.add, values[j:j + 2]) for j in range(0, len(values), 2)]
            builder.store(context.cast(builder, values[0][0], values[0][1], dt), total)
            start = builder.mul(blocks, ir.Constant(intp, _LANES))
        with cgutils.for_range(builder, nitems, start=start) as loop:
            at(loop.index)

    if flat:
        with builder.if_else(all_full, likely=True) as (whole, broadcast):
            with whole:
                flat_loop()
            with broadcast:
                nested()
    else:
        nested()
    for copy, buf in copies:
        with builder.if_then(copy, likely=False):
            context.nrt.free(builder, builder.load(buf))
    if mode == "sum":
        return builder.load(total)
    return dary._getvalue() if fresh else None


def _copy_into_new(context, builder, xty, xary, shape, strides, data, stride_slots, buf):
    """Copy array `xary` into a new C-ordered buffer (NRT memory, freed by the caller through
    `buf`) and point `data` and `stride_slots` at it."""
    intp = context.get_value_type(types.intp)
    size = context.get_abi_sizeof(context.get_data_type(xty.dtype))
    nbytes = builder.mul(xary.nitems, ir.Constant(intp, size))
    new = context.nrt.allocate(builder, nbytes)
    builder.store(new, buf)
    cstrides, acc = [], ir.Constant(intp, size)
    for ext in reversed(shape):
        cstrides.append(acc)
        acc = builder.mul(acc, ext)
    cstrides.reverse()
    src, dst = builder.ptrtoint(xary.data, intp), builder.ptrtoint(new, intp)
    ptr_ty = context.get_data_type(xty.dtype).as_pointer()
    with cgutils.loop_nest(builder, shape, intp) as inds:
        so = do = ir.Constant(intp, 0)
        for ix, s, c in zip(inds, strides, cstrides):
            so = builder.add(so, builder.mul(ix, s))
            do = builder.add(do, builder.mul(ix, c))
        value = builder.load(builder.inttoptr(builder.add(src, so), ptr_ty))
        builder.store(value, builder.inttoptr(builder.add(dst, do), ptr_ty))
    builder.store(dst, data)
    for slot, c in zip(stride_slots, cstrides):
        builder.store(c, slot)
