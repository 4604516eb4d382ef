"""Typing of the elementwise intrinsics (`elementwise.py`): what an `expr` over operands `xs`
computes, in which dtype, and whether it is *fast* (written as loops in place).

Contract: `_parse(expr, xs)` is the expression tree of an intrinsic's constant `expr`;
`_typeof`/`_dtype` its element type (None where it is not fast: the statement is then compiled
as written, `_fallback`); `_operand_types` the types both operands of a binary node are cast to;
`new_array` allocates the result of `ew_new`/`ew_like`. The semantics are the module contract of
`elementwise.py`.
"""
from __future__ import annotations

import ast
import operator

import numpy as np
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.np.arrayobj import get_itemsize, make_array, populate_array
from numba.np.numpy_support import as_dtype

from ... import pyast

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_FLOATS = ("float32", "float64", "complex64", "complex128")


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
    if isinstance(dt, types.Complex) and any(isinstance(n, ast.Div) for n in pyast.walk(tree)):
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
    own the first time a process allocates (`docs/decisions/0002`)."""
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

    from . import elementwise  # its intrinsics, for `ew_fused`'s runs compiled as written

    ns: dict = {"np": np_module, "_rt": runtime, "_ew": elementwise}
    exec(compile(f"def f({params}):\n{body}", "<zymo elementwise>", "exec"), ns)
    return ns["f"]


def _parse(expr, xs):
    if not isinstance(expr, types.StringLiteral) or not isinstance(xs, types.BaseTuple):
        raise TypingError("zymo: elementwise statements take a constant expression and a tuple of operands")
    text = expr.literal_value
    unpack = "".join(f"    x{i} = xs[{i}]\n" for i in range(len(xs)))
    tree = ast.parse(text, mode="eval").body
    for n in pyast.walk(tree):
        if _is_as_shape(n) and not isinstance(xs[int(n.args[1].id[1:])], types.Array):
            raise TypingError(f"zymo: {ast.unparse(n)} of a number {n.args[1].id} (a tangent takes an array's shape)")
    return text, tree, unpack


def _is_square(node) -> bool:
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant)
            and type(node.right.value) is int and node.right.value == 2)
