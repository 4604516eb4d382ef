"""The element and the loops of the elementwise intrinsics (`elementwise.py`), in LLVM IR.

Contract: `_element` computes an expression tree for one element by Numba's own lowering of
each operation (`apply`; a transcendental function of floats by `vecmath`, whose lanes LLVM
may vectorize), `_hoist` takes out the subexpressions of numbers only (computed once,
before the loops), and `_Loops` writes the statement's loops: shapes checked and broadcast,
overlapping operands copied first (`_copy_into_new`), one flat loop when everything is
C-ordered and of one shape, else nested loops by each operand's strides; a sum keeps
`_LANES` interleaved partial sums, one vector of them where the element is IEEE arithmetic of
the sum's float type (`_lanes_of`: the same operations per lane, which LLVM would not vectorize
as eight separate sums; Numba runs no SLP vectorizer). Innermost loops that write each
element of `d` once are marked `llvm.loop.parallel_accesses` (no run-time overlap tests), and
once a function is large a statement's loops are a shared function of their own, called
(`_statement`, `_shared`; decision 0020). The semantics are the module contract of `elementwise.py`.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import operator

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.np.arrayobj import load_item, store_item

from ... import pyast
from . import vecmath
from .ew_types import _BINOPS, _COMPARE, _is_as_shape, _is_square, _operand_types, new_array

_BROADCAST = "operands could not be broadcast together with the shape of the elementwise statement"
_LANES = 8  # partial sums of a flat sum


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
        operands = [_element(context, builder, a, env, arrays) for a in node.args]
        if vecmath.covers(node.func.attr, tuple(ty for _, ty in operands)):  # lanes of libmvec
            return vecmath.call(context, builder, node.func.attr, operands)
        return apply(context, builder, getattr(np, node.func.attr), operands)
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




def _reads(node, names) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in pyast.walk(node))



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


def _statement(context, builder, mode, tree, xs, xsval, dty, dval, shape=None, dt=None, fresh=False, nested=False,
               outline=True):
    """The loops of the module contract, in LLVM IR. `mode`: "+=" or "=" into array `d`, or
    "sum" over `shape` (returns the sum). `fresh`: `d` is a new array of type `dty` and of
    `shape`, allocated once the operands are checked (nothing overlaps it; returns it).
    `nested`: the nested loops only, never the flat loop (the same results; less code where
    speed matters little: `ew_fused`'s fallback). `outline`: once the function being written
    has `_INLINE_BUDGET` instructions, the loops are a function of their own, called here
    (`_shared`: one per module for equal statements and types), so that a program of many
    statements is many functions of moderate size for LLVM, not one large one."""
    if not outline or _size(builder.function) < _INLINE_BUDGET:
        return _loops(context, builder, mode, tree, xs, xsval, dty, dval, shape, dt, fresh, nested)
    xs_ty = xs if isinstance(xs, types.BaseTuple) else types.Tuple(list(xs))
    intp = types.intp
    argtys, args = [xs_ty], [xsval]
    if dty is not None and not fresh:
        argtys.append(dty)
        args.append(dval)
    if shape is not None:
        argtys.append(types.UniTuple(intp, len(shape)))
        args.append(context.make_tuple(builder, argtys[-1], list(shape)))
    restype = dty if fresh else (dt if mode == "sum" else types.none)

    def body(context, inner, vals):
        d = vals[1] if dty is not None and not fresh else None
        sh = None if shape is None else cgutils.unpack_tuple(inner, vals[-1], len(shape))
        out = _loops(context, inner, mode, tree, xs, vals[0], dty, d, sh, dt, fresh, nested)
        return context.get_dummy_value() if out is None else out
    key = ("statement", mode, ast.dump(tree), fresh, nested, shape is None)
    return _shared(context, builder, key, restype, argtys, args, body)


# instructions a function may have before its statements' loops become calls (`_statement`):
# LLVM's passes take time superlinear in a function's size (cavity_flow's whole program, 135,000
# instructions as one function, took 70 s of LLVM work), while a call costs the statement the
# facts its caller knows (an operand that is the destination, invariants of an enclosing loop:
# 10-40% over a 28x28 slice in a loop)
_INLINE_BUDGET = 10_000


def _size(function) -> int:
    return sum(len(block.instructions) for block in function.blocks)


def _loops(context, builder, mode, tree, xs, xsval, dty, dval, shape, dt, fresh, nested):
    make = (lambda: new_array(context, builder, dty, shape)) if fresh else None
    return _Loops(context, builder, mode, xs, xsval, dty, dt, make).run(tree, dval, shape, nested)


def _shared(context, builder, key, restype, argtys, args, body):
    """A call of the function `body(context, builder, args)` writes (Numba's calling convention:
    its errors propagate), defined once per module for equal `key` and types: equal statements
    (the ten `d += t` of a 2-d stencil's adjoint) and equal runs (the six of a 3-d stencil's
    adjoint) share one function, which LLVM optimizes once. The function is never inlined: a
    program of many statements stays many small functions, which LLVM's passes take in time
    about linear in their number (one function of them all took superlinear time)."""
    fnty = context.call_conv.get_function_type(restype, argtys)
    digest = hashlib.sha256(repr((key, restype, argtys)).encode()).hexdigest()[:20]
    fn = cgutils.get_or_insert_function(builder.module, fnty, f"zymo_ew_step_{digest}")
    if fn.is_declaration:
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        inner = ir.IRBuilder(fn.append_basic_block("entry"))
        value = body(context, inner, context.call_conv.decode_arguments(inner, argtys, fn))
        context.call_conv.return_value(inner, context.get_return_value(inner, restype, value))
    status, res = context.call_conv.call_function(builder, fn, restype, argtys, args)
    with cgutils.if_unlikely(builder, status.is_error):
        context.call_conv.return_status_propagate(builder, status)
    return res


class _Loops:
    """The state of one `_statement` while its steps write it: the destination `d` (`dty`,
    None for a sum), the operands `xs` (their tuple value `xsval`) and the statement's shape."""

    def __init__(self, context, builder, mode, xs, xsval, dty, dt, make):
        self.context, self.builder, self.mode = context, builder, mode
        self.xs, self.xsval, self.dty, self.dt, self.make = xs, xsval, dty, dt, make
        self.fresh = make is not None
        self.intp = context.get_value_type(types.intp)
        self.zero, self.one = ir.Constant(self.intp, 0), ir.Constant(self.intp, 1)
        self.total = None

    def run(self, tree, dval, shape, nested=False):
        builder, dty = self.builder, self.dty
        # each element of `d` written once, by its own iteration (`d` of the statement's shape),
        # and every operand that overlaps `d` is either copied first or `d` itself element for
        # element: the innermost loop's reads of the operands and reads and writes of `d`
        # carry no dependence between iterations (`_parallel`)
        self.parallel = self.mode != "sum" and (self.fresh or shape is None)
        self.group = None
        flat = self._destination(dval, shape) and not nested
        nitems = self.one
        for ext in self.shape:
            nitems = builder.mul(nitems, ext)
        bad, all_full = self._check_destination()
        arys, bad, all_full = self._check_operands(bad, all_full)
        with builder.if_then(bad, likely=False):
            self.context.call_conv.return_user_exc(builder, ValueError, (_BROADCAST,))
        tree = self._hoist_numbers(tree)
        if self.fresh:
            self.dary = self.make()
            self.dstrides = cgutils.unpack_tuple(builder, self.dary.strides, self.nd)
            self.pd = builder.ptrtoint(self.dary.data, self.intp)
        flat, copies = self._operands(arys, flat)
        self.tree = tree
        self.elem_ty = dty.dtype if dty is not None else self.dt
        if self.mode == "sum":
            self.total = cgutils.alloca_once_value(builder, self.context.get_constant_null(self.dt))
        if flat:
            with builder.if_else(all_full, likely=True) as (whole, broadcast):
                with whole:
                    self._flat_loop(nitems)
                with broadcast:
                    self._nested()
        else:
            self._nested()
        for copy, buf in copies:
            with builder.if_then(copy, likely=False):
                self.context.nrt.free(builder, builder.load(buf))
        if self.mode == "sum":
            return builder.load(self.total)
        return self.dary._getvalue() if self.fresh else None

    def _destination(self, dval, shape):
        """The statement's shape and rank, and `d`'s geometry; returns whether one flat loop
        may do (everything C-ordered and of one shape, checked at run time too)."""
        context, builder, dty = self.context, self.builder, self.dty
        if self.fresh:
            self.shape, self.nd = shape, dty.ndim
            return True
        if dty is None:
            self.shape, self.nd = shape, len(shape)
            return True
        self.dary = dary = context.make_array(dty)(context, builder, dval)
        self.dshape = cgutils.unpack_tuple(builder, dary.shape, dty.ndim)
        self.dstrides = cgutils.unpack_tuple(builder, dary.strides, dty.ndim)
        self.shape = self.dshape if shape is None else shape
        self.nd = len(self.shape)
        self.pd = builder.ptrtoint(dary.data, self.intp)
        self.d_lo, self.d_hi = _span(builder, self.intp, self.pd, self.dshape, self.dstrides, dary.itemsize)
        self.d_nonempty = builder.icmp_signed(">", dary.nitems, self.zero)
        return dty.layout == "C" and dty.ndim == self.nd

    def _check_destination(self):
        """`d` against the statement's shape (a reduction broadcasts it): `(bad, all_full)`,
        and `d`'s steps along the statement's dimensions (`d_steps`, 0 where it broadcasts)."""
        builder, dty, zero = self.builder, self.dty, self.zero
        bad, all_full = cgutils.false_bit, cgutils.true_bit
        self.d_full, self.d_steps = cgutils.true_bit, None
        if dty is None or self.fresh:
            return bad, all_full
        pad = self.nd - dty.ndim
        d_full = cgutils.true_bit if pad == 0 else cgutils.false_bit
        d_steps = [zero] * pad
        for k in range(dty.ndim):
            eq = builder.icmp_signed("==", self.dshape[k], self.shape[pad + k])
            d_full = builder.and_(d_full, eq)
            bad = builder.or_(bad, builder.and_(builder.not_(eq), builder.icmp_signed("!=", self.dshape[k], self.one)))
            d_steps.append(builder.select(eq, self.dstrides[k], zero))
        self.d_full, self.d_steps = d_full, d_steps
        return bad, d_full

    def _check_operands(self, bad, all_full):
        """The array operands' shapes against the statement's (before anything is allocated):
        `({i: (array, own shape, shape padded to the rank, full)}, bad, all_full)`."""
        context, builder, nd, one = self.context, self.builder, self.nd, self.one
        arys = {}
        for i, xty in enumerate(self.xs):
            if isinstance(xty, types.Array):
                xary = context.make_array(xty)(context, builder, builder.extract_value(self.xsval, i))
                own_shape = cgutils.unpack_tuple(builder, xary.shape, xty.ndim)
                xshape = [one] * (nd - xty.ndim) + list(own_shape)
                full = cgutils.true_bit
                for k in range(nd):
                    eq = builder.icmp_signed("==", xshape[k], self.shape[k])
                    full = builder.and_(full, eq)
                    bad = builder.or_(bad, builder.and_(builder.not_(eq), builder.icmp_signed("!=", xshape[k], one)))
                all_full = builder.and_(all_full, full)
                arys[i] = xary, own_shape, xshape, full
        return arys, bad, all_full

    def _hoist_numbers(self, tree):
        """`tree` with its subexpressions of numbers computed once, here (they may raise: before
        anything is allocated) into `self.hoisted`."""
        builder = self.builder
        self.arrays = frozenset(f"x{i}" for i, x in enumerate(self.xs) if isinstance(x, types.Array))
        numbers = []
        tree = _hoist(tree, self.arrays, numbers)
        scalars = {f"x{i}": (builder.extract_value(self.xsval, i), x) for i, x in enumerate(self.xs)
                   if f"x{i}" not in self.arrays}
        self.hoisted = {name: _element(self.context, builder, sub, scalars) for name, sub in numbers}
        return tree

    def _operands(self, arys, flat):
        """`self.operands`: per operand `(type, value or None, geometry or None, itemsize)`; an
        array that overlaps `d` other than element for element is copied first. Returns
        `(flat, copies)`: whether one flat loop may still do, and the copies to free after."""
        context, builder, intp, dty = self.context, self.builder, self.intp, self.dty
        operands, copies = [], []
        for i, xty in enumerate(self.xs):
            if not isinstance(xty, types.Array):
                operands.append((xty, builder.extract_value(self.xsval, i), None, None))
                continue
            flat = flat and xty.layout == "C" and xty.ndim == self.nd
            xary, own_shape, xshape, full = arys[i]
            own_strides = cgutils.unpack_tuple(builder, xary.strides, xty.ndim)
            pad = self.nd - xty.ndim
            px = builder.ptrtoint(xary.data, intp)
            data = cgutils.alloca_once_value(builder, px)
            strides = [cgutils.alloca_once_value(builder, s) for s in own_strides]
            if dty is not None and not self.fresh:
                x_lo, x_hi = _span(builder, intp, px, own_shape, own_strides, xary.itemsize)
                meets = builder.and_(builder.icmp_signed("<", x_lo, self.d_hi),
                                     builder.icmp_signed("<", self.d_lo, x_hi))
                nonempty = builder.icmp_signed(">", xary.nitems, self.zero)
                meets = builder.and_(meets, builder.and_(self.d_nonempty, nonempty))
                same = builder.and_(builder.icmp_signed("==", px, self.pd), builder.and_(full, self.d_full))
                for k in range(xty.ndim):  # the same strides where they matter
                    moves = builder.icmp_signed(">", own_shape[k], self.one)
                    same = builder.and_(same, builder.or_(builder.not_(moves), builder.icmp_signed(
                        "==", own_strides[k], self.d_steps[pad + k])))
                copy = builder.and_(meets, builder.not_(same))
                buf = cgutils.alloca_once_value(builder, ir.Constant(cgutils.voidptr_t, None))
                with builder.if_then(copy, likely=False):
                    _copy_into_new(context, builder, xty, xary, own_shape, own_strides, data, strides, buf)
                copies.append((copy, buf))
            operands.append((xty, None, (xshape, data, strides, pad), xary.itemsize))
        self.operands = operands
        return flat, copies

    def _add_to(self, slot, value, ty):
        s, sty = apply(self.context, self.builder, operator.add, [(self.builder.load(slot), self.dt), (value, ty)])
        self.builder.store(self.context.cast(self.builder, s, sty, self.dt), slot)

    def _value(self, xptrs):
        """One element's value, `(value, type)`, the operands read at `xptrs`."""
        env = dict(self.hoisted)
        for i, (xty, x, _, _) in enumerate(self.operands):
            env[f"x{i}"] = (x, xty) if xptrs[i] is None else (
                self._access(lambda ty=xty, ptr=xptrs[i]: load_item(self.context, self.builder, ty, ptr)), xty.dtype)
        return _element(self.context, self.builder, self.tree, env, self.arrays)

    def _access(self, emit):
        """`emit()`'s value; its loads and stores join the access group of the loop being
        written, if it is marked parallel (`_parallel`)."""
        if self.group is None:
            return emit()
        block = self.builder.block
        n = len(block.instructions)
        value = emit()
        for inst in block.instructions[n:]:
            if isinstance(inst, (ir.LoadInstr, ir.StoreInstr)):
                inst.set_metadata("llvm.access.group", self.group)
        return value

    @contextlib.contextmanager
    def _parallel(self, marked):
        """The loop written inside (its body ends in the block current at the end) marked
        `llvm.loop.parallel_accesses` with the accesses `_access` tags, when `marked`."""
        if not marked:
            yield
            return
        from .lowering import AccessGroup

        self.group = AccessGroup(self.builder.module)
        yield
        body_end = self.builder.block
        group, self.group = self.group, None
        self._latch = (body_end, group)

    def _mark_latch(self):
        """Mark the back edge of the loop `_parallel` recorded (call after the loop is closed)."""
        from .lowering import parallel_loop_id

        latch = getattr(self, "_latch", None)
        if latch is not None:
            block, group = latch
            block.terminator.set_metadata("llvm.loop", parallel_loop_id(self.builder.module, group))
            self._latch = None

    def _body(self, dptr, xptrs, slot=None):
        """One element: the operands read at `xptrs`, the value added to the sum (`slot`, else
        the total) or stored (added, for "+=") at `dptr`."""
        context, builder, dty = self.context, self.builder, self.dty
        value, ty = self._value(xptrs)
        if self.mode == "sum":
            self._add_to(slot or self.total, value, ty)
            return
        if self.mode == "+=":
            old = self._access(lambda: load_item(context, builder, dty, dptr))
            value, ty = apply(context, builder, operator.add, [(old, self.elem_ty), (value, ty)])
        value = context.cast(builder, value, ty, self.elem_ty)
        self._access(lambda: store_item(context, builder, dty, value, dptr))

    def _pointer(self, base, offset):
        return self.builder.inttoptr(self.builder.add(base, offset), cgutils.voidptr_t)

    def _typed(self, ptr, ty):
        return self.builder.bitcast(ptr, self.context.get_data_type(ty.dtype).as_pointer())

    def _lanes(self, tree, vt, bases, first):
        """`_lanes_of` for the statement (`bases`: typed pointers to the operands' first
        elements)."""
        return _lanes_of(self, tree, vt, bases, first)

    def _nested(self):
        """The loop nest over the statement's shape, stepping by each operand's strides (0
        where it broadcasts). Where every step along the last axis is a whole number of items
        (NumPy's arrays of numbers; a field of a packed record array is not), the innermost
        loop indexes typed pointers by items, which LLVM vectorizes (steps of bytes it does
        not); otherwise it steps by bytes. The elements and their order are the same."""
        builder, zero, shape = self.builder, self.zero, self.shape
        bases = [None if geo is None else builder.load(geo[1]) for _, _, geo, _ in self.operands]
        eff = []
        for _, _, geo, _ in self.operands:
            if geo is None:
                eff.append(None)
                continue
            xshape, _, strides, pad = geo
            own = [builder.load(s) for s in strides]
            eff.append([zero] * pad + [builder.select(builder.icmp_signed("==", xshape[pad + k], shape[pad + k]),
                                                      own[k], zero) for k in range(len(own))])
        dsteps = None if self.dty is None else (self.dstrides if self.fresh else self.d_steps)
        if not shape:
            self._nest(bases, eff, dsteps, None)
            return
        whole, last = cgutils.true_bit, []
        for (xty, _, geo, _), st in zip([*self.operands, (self.dty, None, dsteps, None)], [*eff, dsteps]):
            if geo is None:
                last.append(None)
                continue
            item = ir.Constant(self.intp, self.context.get_abi_sizeof(self.context.get_data_type(xty.dtype)))
            whole = builder.and_(whole, builder.icmp_signed("==", builder.srem(st[-1], item), zero))
            last.append(builder.sdiv(st[-1], item))
        with builder.if_else(whole, likely=True) as (items, nbytes):
            with items:
                self._nest(bases, eff, dsteps, last)
            with nbytes:
                self._nest(bases, eff, dsteps, None)

    def _nest(self, bases, eff, dsteps, last):
        """`_nested`'s loops; `last`: each operand's step along the last axis in items (then
        `d`'s), None to step by bytes there too."""
        builder, zero = self.builder, self.zero

        def pointer(base, steps, inds, ty, items):
            off = zero
            for ix, st in zip(inds if items is None else inds[:-1], steps):
                off = builder.add(off, builder.mul(ix, st))
            ptr = self._typed(self._pointer(base, off), ty)
            return ptr if items is None else builder.gep(ptr, [builder.mul(inds[-1], items)])
        with cgutils.loop_nest(builder, self.shape, self.intp) as inds:
            with self._parallel(self.parallel and last is not None and bool(self.shape)):
                dptr = None
                if self.dty is not None:
                    dptr = pointer(self.pd, dsteps, inds, self.dty, None if last is None else last[-1])
                xptrs = []
                for k, ((xty, _, geo, _), base, st) in enumerate(zip(self.operands, bases, eff)):
                    step = None if last is None else last[k]
                    xptrs.append(None if geo is None else pointer(base, st, inds, xty, step))
                self._body(dptr, xptrs)
        self._mark_latch()

    def _flat_loop(self, nitems):
        """One loop over the elements (everything C-ordered, of one shape); a sum keeps
        `_LANES` interleaved partial sums, combined pairwise (as NumPy's blocks)."""
        context, builder, intp, dt = self.context, self.builder, self.intp, self.dt
        # typed pointers to the first elements, indexed by the element (`gep`): LLVM's
        # vectorizer sees consecutive elements there, not through integer addresses
        bases = [None if geo is None else self._typed(builder.inttoptr(builder.load(geo[1]), cgutils.voidptr_t), xty)
                 for xty, _, geo, _ in self.operands]
        dbase = None if self.dty is None else self._typed(builder.inttoptr(self.pd, cgutils.voidptr_t), self.dty)

        def at(i, slot=None):
            dptr = None if dbase is None else builder.gep(dbase, [i])
            xptrs = [None if base is None else builder.gep(base, [i]) for base in bases]
            self._body(dptr, xptrs, slot)

        start = None
        if self.mode == "sum":
            lanes = [cgutils.alloca_once_value(builder, context.get_constant_null(dt)) for _ in range(_LANES)]
            vt = ir.VectorType(context.get_value_type(dt), _LANES) if isinstance(dt, types.Float) else None
            vector = vt is not None and self._lanes(self.tree, vt, None, None) is not None
            blocks = builder.sdiv(nitems, ir.Constant(intp, _LANES))
            acc = cgutils.alloca_once_value(builder, ir.Constant(vt, [0.0] * _LANES)) if vector else None
            with cgutils.for_range(builder, blocks) as loop:
                first = builder.mul(loop.index, ir.Constant(intp, _LANES))
                if vector:  # the eight lanes' values as one vector, added in one instruction
                    builder.store(builder.fadd(builder.load(acc), self._lanes(self.tree, vt, bases, first)), acc)
                else:
                    for k, slot in enumerate(lanes):
                        at(builder.add(first, ir.Constant(intp, k)), slot)
            if vector:
                whole = builder.load(acc)
                values = [(builder.extract_element(whole, ir.Constant(ir.IntType(32), k)), dt) for k in range(_LANES)]
            else:
                values = [(builder.load(slot), dt) for slot in lanes]
            while len(values) > 1:
                values = [apply(context, builder, operator.add, values[j:j + 2]) for j in range(0, len(values), 2)]
            builder.store(context.cast(builder, values[0][0], values[0][1], dt), self.total)
            start = builder.mul(blocks, ir.Constant(intp, _LANES))
        with cgutils.for_range(builder, nitems, start=start) as loop:
            with self._parallel(self.parallel):
                at(loop.index)
        self._mark_latch()


_VECTOR_OPS = {ast.Add: "fadd", ast.Sub: "fsub", ast.Mult: "fmul", ast.Div: "fdiv"}


def _lanes_of(loops, node, vt, bases, first):
    """`node`'s values for `_LANES` consecutive elements from `first`, as one vector of type
    `vt` (`_Loops._lanes`); None where `node` is more than IEEE arithmetic (`+ - * /`, unary
    minus, a square) and `vecmath`'s functions of operands and numbers of `vt`'s float type,
    where each lane's value is what `_element` computes for its element, bit for bit. With `bases` None: whether it is
    (a non-None marker), writing nothing."""
    builder, dt = loops.builder, loops.dt
    probe = bases is None

    def splat(value):
        if probe:
            return True
        vec = ir.Constant(vt, ir.Undefined)
        for k in range(_LANES):
            vec = builder.insert_element(vec, value, ir.Constant(ir.IntType(32), k))
        return vec
    if isinstance(node, ast.Constant):
        if type(node.value) is not float:  # an int: Numba's promotion rules, left to `_element`
            return None
        return splat(ir.Constant(vt.element, node.value))
    if isinstance(node, ast.Name):
        if node.id in loops.hoisted:
            value, ty = loops.hoisted[node.id]
            return splat(value) if ty == dt else None
        xty, x, geo, _ = loops.operands[int(node.id[1:])]
        if geo is None:
            return splat(x) if xty == dt else None
        if xty.dtype != dt:
            return None
        if probe:
            return True
        ptr = builder.bitcast(builder.gep(bases[int(node.id[1:])], [first]), vt.as_pointer())
        return builder.load(ptr, align=loops.context.get_abi_sizeof(vt.element))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _lanes_of(loops, node.operand, vt, bases, first)
        if inner is None or probe or isinstance(node.op, ast.UAdd):
            return inner
        return builder.fneg(inner)
    if _is_square(node):
        inner = _lanes_of(loops, node.left, vt, bases, first)
        return inner if inner is None or probe else builder.fmul(inner, inner)
    if (isinstance(node, ast.Call) and node.func.attr in vecmath.FUNCS and not node.keywords
            and vecmath.covers(node.func.attr, (dt,) * len(node.args))):  # the vector version, lane by lane
        args = [_lanes_of(loops, a, vt, bases, first) for a in node.args]
        if any(a is None for a in args) or probe:
            return None if any(a is None for a in args) else True
        return vecmath.call_lanes(loops.context, builder, node.func.attr, dt, args)
    if isinstance(node, ast.BinOp) and type(node.op) in _VECTOR_OPS:
        left = _lanes_of(loops, node.left, vt, bases, first)
        right = None if left is None else _lanes_of(loops, node.right, vt, bases, first)
        if right is None or probe:
            return right
        return getattr(builder, _VECTOR_OPS[type(node.op)])(left, right)
    return None


def _copy_into_new(context, builder, xty, xary, shape, strides, data, stride_slots, buf):
    """Copy array `xary` into a new C-ordered buffer (NRT memory, freed by the caller through
    `buf`) and point `data` and `stride_slots` at it. The copy's loops are one function per
    module, rank and item size (`_copy_function`), called here: a statement's operands may each
    need a copy, and loops written in place once per operand made LLVM's work grow with them."""
    intp = context.get_value_type(types.intp)
    size = context.get_abi_sizeof(context.get_data_type(xty.dtype))
    nbytes = builder.mul(xary.nitems, ir.Constant(intp, size))
    new = context.nrt.allocate(builder, nbytes)
    builder.store(new, buf)
    nd = len(shape)
    if nd:
        shape_arr = cgutils.alloca_once(builder, intp, size=nd)
        stride_arr = cgutils.alloca_once(builder, intp, size=nd)
        for k in range(nd):
            builder.store(shape[k], builder.gep(shape_arr, [ir.Constant(intp, k)]))
            builder.store(strides[k], builder.gep(stride_arr, [ir.Constant(intp, k)]))
        src = builder.bitcast(xary.data, cgutils.voidptr_t)
        builder.call(_copy_function(builder.module, intp, nd, size), [src, new, shape_arr, stride_arr])
    else:
        cgutils.raw_memcpy(builder, new, xary.data, ir.Constant(intp, 1), size)
    cstrides, acc = [], ir.Constant(intp, size)
    for ext in reversed(shape):
        cstrides.append(acc)
        acc = builder.mul(acc, ext)
    cstrides.reverse()
    builder.store(builder.ptrtoint(new, intp), data)
    for slot, c in zip(stride_slots, cstrides):
        builder.store(c, slot)


def _copy_function(module, intp, nd, size):
    """`void copy(i8* src, i8* dst, intp* shape, intp* strides)` of `module`: the `nd`-dimensional
    strided array at `src` (items of `size` bytes) copied C-ordered to `dst`, defined once."""
    name = f"zymo_ew_copy_{nd}d_{size}b"
    fnty = ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, cgutils.voidptr_t, intp.as_pointer(),
                                           intp.as_pointer()])
    fn = cgutils.get_or_insert_function(module, fnty, name)
    if not fn.is_declaration:
        return fn
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    src, dst, shape_p, strides_p = fn.args
    shape = [builder.load(builder.gep(shape_p, [ir.Constant(intp, k)])) for k in range(nd)]
    strides = [builder.load(builder.gep(strides_p, [ir.Constant(intp, k)])) for k in range(nd)]
    cstrides, acc = [], ir.Constant(intp, size)
    for ext in reversed(shape):
        cstrides.append(acc)
        acc = builder.mul(acc, ext)
    cstrides.reverse()
    s0, d0 = builder.ptrtoint(src, intp), builder.ptrtoint(dst, intp)
    item = ir.IntType(8 * size).as_pointer()
    with cgutils.loop_nest(builder, shape, intp) as inds:
        so = do = ir.Constant(intp, 0)
        for ix, st, c in zip(inds, strides, cstrides):
            so = builder.add(so, builder.mul(ix, st))
            do = builder.add(do, builder.mul(ix, c))
        value = builder.load(builder.inttoptr(builder.add(s0, so), item))
        builder.store(value, builder.inttoptr(builder.add(d0, do), item))
    builder.ret_void()
    return fn
