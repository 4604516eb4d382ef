"""A compiled function's entry check of its indices, as one intrinsic (`codegen/index_checks.py`).

Contract: `index_check(spec, arrays, ints)` (callable from Numba-compiled code only) raises
`IndicesUnproven` where the value of `spec` is negative, where computing it overflowed 64-bit
integers, or where `ints` holds anything but integers and booleans, and does nothing else.
`spec` is a literal string holding one integer expression (the margin) over `a<k>_<d>` (the
extent of axis `d` of `arrays[k]`, a tuple of arrays), `i<k>` (`ints[k]`, a tuple of
integers) and integer constants, built from `+`, `-`, unary `-`, `*`, `//`, `max` and `min`,
computed in 64-bit integers with Python's meaning for each operation (`//` rounds down; a sum,
difference or product that does not fit fails the check), except that a divisor below 1 gives
0 instead of raising: the checks make such a divisor's own condition negative, so the margin
is negative anyway. `in_range(i, shape, axis)` checks one index where it is read (its own
docstring).

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
    if not isinstance(ints, types.BaseTuple):
        raise TypingError("index_check: ints must be a tuple")
    # a name the analysis took for an integer that is not one (an array the facts did not know):
    # no margin can be written, and the check always fails (the bounds-checked version runs)
    numbers = all(isinstance(i, (types.Integer, types.Boolean)) for i in ints.types)
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
            if not numbers:
                break
            if ival.type.width < 64:  # a bool counts as 0 or 1
                signed = isinstance(ity, types.Integer) and ity.signed
                ival = builder.sext(ival, i64) if signed else builder.zext(ival, i64)
            values[f"i{k}"] = ival
        if not numbers:
            with builder.if_then(cgutils.true_bit):  # in a block of its own: the function goes on after it
                context.call_conv.return_user_exc(builder, IndicesUnproven, ())
            return context.get_dummy_value()
        emit = _Emit(builder, i64, {**shapes, **values})
        result = emit.value(tree)
        bad = builder.or_(builder.icmp_signed("<", result, ir.Constant(i64, 0)), emit.overflow)
        with builder.if_then(bad, likely=False):  # a margin that overflowed proves nothing
            context.call_conv.return_user_exc(builder, IndicesUnproven, ())
        return context.get_dummy_value()
    return types.none(spec, arrays, ints), codegen


@intrinsic(prefer_literal=True)
def in_range(typingctx, i, shape, axis):
    """`i`, the index of the axes from `axis` on of an array of shape `shape`, after raising
    `IndexError` where Python's indexing would: an integer outside `[-n, n)` (`n` that axis's
    extent), a tuple of integers with one outside its axis, an array of integers holding one, an
    array of booleans (a mask) whose shape is not that of the axes it covers. Anything else (a
    slice, None) is returned as it is: it reads no element out of range. The check of one index
    that has no interval at entry (`codegen/index_checks.py`: an index read from an array, a
    counter); Numba checks none of these, nor does its fancy indexing."""
    if not (isinstance(shape, types.UniTuple) and isinstance(axis, types.IntegerLiteral)):
        raise TypingError("in_range: an array's shape and a literal axis")
    first, ndim = axis.literal_value, shape.count
    if isinstance(i, types.Integer):
        kind, width = "int", 1
    elif isinstance(i, types.BaseTuple) and all(isinstance(t, types.Integer) for t in i.types):
        kind, width = "tuple", len(i.types)
    elif isinstance(i, types.Array) and isinstance(i.dtype, types.Integer):
        kind, width = "ints", 1
    elif isinstance(i, types.Array) and isinstance(i.dtype, types.Boolean):
        kind, width = "mask", i.ndim
    else:
        kind, width = "", 0

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)

        def wide(v, ty):
            if v.type.width >= 64:
                return v
            return builder.sext(v, i64) if getattr(ty, "signed", False) else builder.zext(v, i64)

        def fail(message):
            context.call_conv.return_user_exc(builder, IndexError, (message,))
        if first + width > ndim:
            if kind:
                fail("too many indices for array")
            return impl_ret_borrowed(context, builder, signature.return_type, args[0])
        extents = [wide(v, types.intp) for v in cgutils.unpack_tuple(builder, args[1], ndim)][first:first + width]

        def check(v, ty, m, k=0):
            past = builder.icmp_signed(">=", v, m) if ty.signed else builder.icmp_unsigned(">=", v, m)
            below = builder.icmp_signed("<", v, builder.neg(m)) if ty.signed else ir.Constant(ir.IntType(1), 0)
            with builder.if_then(builder.or_(past, below), likely=False):
                fail(f"index out of range on axis {first + k} (numba=False names the index and the size)")
        if kind == "int":
            check(wide(args[0], i), i, extents[0])
        elif kind == "tuple":
            for k, (ty, v) in enumerate(zip(i.types, cgutils.unpack_tuple(builder, args[0], width))):
                check(wide(v, ty), ty, extents[k], k)
        elif kind:
            ary = context.make_array(i)(context, builder, args[0])
            dims = cgutils.unpack_tuple(builder, ary.shape, i.ndim)
            if kind == "mask":
                for dim, m in zip(dims, extents):
                    with builder.if_then(builder.icmp_signed("!=", wide(dim, types.intp), m), likely=False):
                        fail("boolean index did not match the indexed array")
            else:
                strides = cgutils.unpack_tuple(builder, ary.strides, i.ndim)
                with cgutils.loop_nest(builder, dims, dims[0].type) as at:
                    ptr = cgutils.get_item_pointer2(context, builder, ary.data, dims, strides, i.layout, at)
                    check(wide(load_item(context, builder, i, ptr), i.dtype), i.dtype, extents[0])
        return impl_ret_borrowed(context, builder, signature.return_type, args[0])  # an array: one more reference
    return i(i, shape, axis), codegen


class _Emit:
    """The instructions of one expression of `index_check`'s language."""

    def __init__(self, builder: ir.IRBuilder, i64: ir.IntType, names: dict):
        self.builder, self.i64, self.names = builder, i64, names
        self.overflow: ir.Value = ir.Constant(ir.IntType(1), 0)  # set where a sum or product wrapped

    def _checked(self, op: str, x: ir.Value, y: ir.Value) -> ir.Value:
        got = getattr(self.builder, f"{op}_with_overflow")(x, y)
        self.overflow = self.builder.or_(self.overflow, self.builder.extract_value(got, 1))
        return self.builder.extract_value(got, 0)

    def value(self, node: ast.AST) -> ir.Value:
        b = self.builder
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return ir.Constant(self.i64, node.value)
        if isinstance(node, ast.Name):
            return self.names[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self._checked("ssub", ir.Constant(self.i64, 0), self.value(node.operand))
        if isinstance(node, ast.BinOp):
            x, y = self.value(node.left), self.value(node.right)
            if isinstance(node.op, ast.Add):
                return self._checked("sadd", x, y)
            if isinstance(node.op, ast.Sub):
                return self._checked("ssub", x, y)
            if isinstance(node.op, ast.Mult):
                return self._checked("smul", x, y)
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
