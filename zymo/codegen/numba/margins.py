"""A compiled function's entry check of its indices, as one intrinsic (`codegen/index_checks.py`).

Contract: `index_check(spec, arrays, ints)` (callable from Numba-compiled code only) raises
`IndicesUnproven` where the value of `spec` is negative, and does nothing else. `spec` is a
literal string holding one integer expression (the margin) over
`a<k>_<d>` (the extent of axis `d` of `arrays[k]`, a tuple of arrays), `i<k>` (`ints[k]`, a
tuple of integers) and integer constants, built from `+`, `-`, unary `-`, `*`, `//`, `max`
and `min`, computed in 64-bit integers with Python's meaning for each operation (`//` rounds
down), except that a divisor below 1 gives 0 instead of raising: the checks make such a
divisor's own condition negative, so the margin is negative anyway.

Why an intrinsic: written as Python in the function, each comparison and each `.shape[d]`
is a few more operations for Numba to type and lower, about a millisecond each, and a `raise`
statement more; adi's two kernels (nineteen conditions each) took 0.25 s longer to compile.
Here the whole check is one call to type, and its instructions (the raise included) are
written straight into the function.
"""
from __future__ import annotations

import ast

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import load_item

from ..index_checks import IndicesUnproven


@intrinsic(prefer_literal=True)
def index_check(typingctx, spec, arrays, ints):
    if not isinstance(spec, types.StringLiteral):
        raise TypingError("index_check: the expression must be a literal string")
    if not (isinstance(arrays, types.BaseTuple) and all(isinstance(a, types.Array) for a in arrays.types)):
        raise TypingError("index_check: arrays must be a tuple of arrays")
    if not (isinstance(ints, types.BaseTuple)
            and all(isinstance(i, (types.Integer, types.Boolean)) for i in ints.types)):
        raise TypingError("index_check: ints must be a tuple of integers")
    tree = ast.parse(spec.literal_value, mode="eval").body

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        shapes = {}
        for k, (aty, aval) in enumerate(zip(arrays.types, cgutils.unpack_tuple(builder, args[1], len(arrays)))):
            ary = context.make_array(aty)(context, builder, aval)
            for d, n in enumerate(cgutils.unpack_tuple(builder, ary.shape, aty.ndim)):
                shapes[f"a{k}_{d}"] = builder.sext(n, i64) if n.type.width < 64 else n
        values = {}
        for k, (ity, ival) in enumerate(zip(ints.types, cgutils.unpack_tuple(builder, args[2], len(ints)))):
            if ival.type.width < 64:  # a bool counts as 0 or 1
                signed = isinstance(ity, types.Integer) and ity.signed
                ival = builder.sext(ival, i64) if signed else builder.zext(ival, i64)
            values[f"i{k}"] = ival
        names = {**shapes, **values}
        result = _Emit(builder, i64, names).value(tree)
        with builder.if_then(builder.icmp_signed("<", result, ir.Constant(i64, 0)), likely=False):
            context.call_conv.return_user_exc(builder, IndicesUnproven, ())
        return context.get_dummy_value()
    return types.none(spec, arrays, ints), codegen


@intrinsic
def in_range(typingctx, i, n):
    """`i`, an index of an axis of extent `n`, after raising `IndexError` where Python's
    indexing would: an integer `i < -n` or `i >= n`, an array of integers holding one, a 1-d
    array of booleans of another length than `n` (a mask); anything else is returned as it is.
    The check of one index that has no interval at entry (`codegen/index_checks.py`: an index
    read from an array, a counter): Numba checks neither, nor its fancy indexing."""
    if not isinstance(n, types.Integer):
        raise TypingError("in_range: an integer extent")
    kind = ("int" if isinstance(i, types.Integer) else
            "ints" if isinstance(i, types.Array) and isinstance(i.dtype, types.Integer) else
            "mask" if isinstance(i, types.Array) and isinstance(i.dtype, types.Boolean) and i.ndim == 1 else "")

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)

        def wide(v, ty):
            if v.type.width >= 64:
                return v
            return builder.sext(v, i64) if ty.signed else builder.zext(v, i64)
        m = wide(args[1], n)

        def check(v, ty):
            past = builder.icmp_signed(">=", v, m) if ty.signed else builder.icmp_unsigned(">=", v, m)
            below = builder.icmp_signed("<", v, builder.neg(m)) if ty.signed else ir.Constant(ir.IntType(1), 0)
            with builder.if_then(builder.or_(past, below), likely=False):
                context.call_conv.return_user_exc(builder, IndexError, ("index out of range",))
        if kind == "int":
            check(wide(args[0], i), i)
        elif kind:
            ary = context.make_array(i)(context, builder, args[0])
            shape = cgutils.unpack_tuple(builder, ary.shape, i.ndim)
            if kind == "mask":
                with builder.if_then(builder.icmp_signed("!=", wide(shape[0], types.intp), m), likely=False):
                    context.call_conv.return_user_exc(builder, IndexError, ("boolean index did not match",))
            else:
                strides = cgutils.unpack_tuple(builder, ary.strides, i.ndim)
                with cgutils.loop_nest(builder, shape, shape[0].type) as at:
                    ptr = cgutils.get_item_pointer2(context, builder, ary.data, shape, strides, i.layout, at)
                    check(wide(load_item(context, builder, i, ptr), i.dtype), i.dtype)
        return impl_ret_borrowed(context, builder, signature.return_type, args[0])  # an array: one more reference
    return i(i, n), codegen


class _Emit:
    """The instructions of one expression of `index_check`'s language."""

    def __init__(self, builder: ir.IRBuilder, i64: ir.IntType, names: dict):
        self.builder, self.i64, self.names = builder, i64, names

    def value(self, node: ast.AST) -> ir.Value:
        b = self.builder
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return ir.Constant(self.i64, node.value)
        if isinstance(node, ast.Name):
            return self.names[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return b.neg(self.value(node.operand))
        if isinstance(node, ast.BinOp):
            x, y = self.value(node.left), self.value(node.right)
            if isinstance(node.op, ast.Add):
                return b.add(x, y)
            if isinstance(node.op, ast.Sub):
                return b.sub(x, y)
            if isinstance(node.op, ast.Mult):
                return b.mul(x, y)
            if isinstance(node.op, ast.FloorDiv):
                return self._floordiv(x, y)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min") \
                and node.args and not node.keywords:
            op = ">" if node.func.id == "max" else "<"
            out = self.value(node.args[0])
            for arg in node.args[1:]:
                v = self.value(arg)
                out = b.select(b.icmp_signed(op, v, out), v, out)
            return out
        raise ValueError(f"index_check: {ast.unparse(node)!r} is not in its language")

    def _floordiv(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """`x // y` rounded down for `y >= 1`; 0 for `y < 1` (module contract)."""
        b = self.builder
        one, zero = ir.Constant(self.i64, 1), ir.Constant(self.i64, 0)
        ok = b.icmp_signed(">=", y, one)
        safe = b.select(ok, y, one)
        q, r = b.sdiv(x, safe), b.srem(x, safe)
        q = b.sub(q, b.zext(b.icmp_signed("<", r, zero), self.i64))  # y > 0: a negative remainder rounds down
        return b.select(ok, q, zero)
