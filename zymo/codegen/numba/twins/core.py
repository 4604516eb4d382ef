"""Numba twins of the core runtime helpers (`zymo/runtime/core.py`), and the accumulating
product adjoints (`acc_dot_vjp_a`, ...) generated code calls in their place.

Contract: importing this module (the `twins` package does) registers, with
`numba.extending.overload`, a Numba implementation for each core helper that generated
derivative code calls, on the helper's own function object (the reductions: `centered`
and `prod_others` along constant axes, `extreme_mask` over a tuple of axes, `norm_grad` for
vector norms (also along one constant axis) and the Frobenius norm, and `cumprod_jvp`/`cumprod_vjp`
of 1-d arrays); Python calls are unaffected. Numba-compiled code
then reaches them as `_rt.<name>` exactly like the Python code does. A helper
without a Numba implementation (split-mode tape reuse) fails at Numba's typing,
which the backend reports. Shapes and axes are resolved at typing time from the
argument types (ndim, literal axis/keepdims); sizes at run time.
"""
from __future__ import annotations

import numpy as np
from numba import types as t
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable

from zymo import runtime as rt

from .. import np_shim as nnp
from ..accumulate import product as _product
from ..elementwise import ew_set, fdiv
from ..inline import span
from ..np_shim import _literal, _ndim, _none

for _fn in (rt.trip, rt.grow, rt.grow_stack):  # the helpers as written (`inline`'s fallbacks)
    register_jitable(_fn)


# the IEEE arithmetic of rules of numbers and the trip counts, reached as the Python helpers
# (`zymo.runtime`) where a program is compiled as written (second order's primal check)
@overload(rt.fdiv)
def _fdiv(a, b):
    return lambda a, b: fdiv(a, b)


@overload(rt.sum_product)
def _sum_product(a, b):
    """`np.sum(a * b)`: the adjoint of a quotient by a number (`adjoint._scalar_reduction`) whose
    operands `ew_rewrite` did not turn into one loop (an expression, not a name)."""
    def impl(a, b):
        return np.sum(a * b)
    return impl


@overload(rt.fpow)
def _fpow(a, b):
    return lambda a, b: a ** b


@overload(rt.fp_raises)
def _fp_raises():
    return lambda: False  # compiled arithmetic never raises FloatingPointError


@overload(rt.span)
def _span(lo, hi):
    return lambda lo, hi: span(lo, hi)


def raise_shape_mismatch(src_shapes, index_shape):
    """Stands in for Numba's `raise_with_shape_context` while zymo compiles (`backend.quick_compile`)."""
    raise ValueError("cannot assign slice from input of different size")


@overload(raise_shape_mismatch)
def _raise_shape_mismatch(src_shapes, index_shape):
    def impl(src_shapes, index_shape):
        raise ValueError("cannot assign slice from input of different size")
    return impl


def _arr(x) -> bool:
    return isinstance(x, t.Array)


@overload(rt.check_bound)
def _check_bound(trips, name):
    def impl(trips, name):
        if trips <= 0:
            raise NameError("a loop variable is read after its for loop ran zero times")
    return impl


_KERNELS: dict[tuple[int, int], object] = {}


def _unbroadcast_kernel(nd: int, k: int):
    """A jitted `(g, shape) -> g summed over the broadcast dimensions of shape`, for `g` of
    `nd` dimensions and `shape` of `k`: `nd` nested loops over `g` that add each element at
    its output position, `q = sum(i_d * s_d)` with `s_d = 0` on a broadcast (or leading)
    dimension. Written out per rank: plain loops compile in a fraction of a generic odometer's
    time and run without a division per element."""
    key = (nd, k)
    if key not in _KERNELS:
        lead = nd - k
        lines = ["def kernel(g, shape):",
                 "    out = np.zeros(shape, g.dtype)",
                 "    flat = out.reshape(out.size)",
                 "    m = 1"]
        for d in range(-lead):  # shape's extra leading dimensions (a store that drops them) are 1
            lines.append(f"    if shape[{d}] != 1:")
            lines.append("        raise ValueError('zymo: an adjoint does not broadcast to its operand')")
        first = max(lead, 0)  # g's first dimension that shape has
        for d in range(nd - 1, first - 1, -1):
            n = f"shape[{d - lead}]"
            lines.append(f"    if {n} != 1 and {n} != g.shape[{d}]:")
            lines.append("        raise ValueError('zymo: an adjoint does not broadcast to its operand')")
            lines.append(f"    s{d} = m if {n} != 1 else 0")
            lines.append(f"    m *= {n}")
        for d in range(first):
            lines.append(f"    s{d} = 0")
        indent, prev = "    ", "0"
        for d in range(nd):
            lines.append(f"{indent}for i{d} in range(g.shape[{d}]):")
            indent += "    "
            lines.append(f"{indent}q{d} = {prev} + i{d} * s{d}")
            prev = f"q{d}"
        idx = ", ".join(f"i{d}" for d in range(nd)) or "()"
        lines.append(f"{indent}flat[{prev}] += g[{idx}]")
        lines.append("    return out")
        ns = {"np": np}
        exec(compile("\n".join(lines) + "\n", f"<zymo unbroadcast {nd}->{k}>", "exec"), ns)
        _KERNELS[key] = register_jitable(ns["kernel"])
    return _KERNELS[key]


@overload(rt.unbroadcast)
def _unbroadcast(g, x):
    if not _arr(x):
        if _arr(g):
            return lambda g, x: np.sum(g)
        return lambda g, x: g
    if not _arr(g):
        return lambda g, x: np.full(x.shape, g)
    kernel = _unbroadcast_kernel(g.ndim, x.ndim)
    if g.ndim == x.ndim:
        def impl(g, x):
            if g.shape == x.shape:
                return g
            return kernel(g, x.shape)
        return impl
    return lambda g, x: kernel(g, x.shape)


@overload(rt.as_tangent)
def _as_tangent(tan, y):
    if isinstance(tan, t.Array) and isinstance(y, t.Array) and tan.dtype == y.dtype and y.ndim > 0:
        # the intrinsic's loop: Numba's `out[...] = tan` of an array compiles its shape-mismatch
        # message (str of two shapes), a compile of its own (docs/decisions/0009)
        def fill(tan, y):
            out = np.empty_like(y)
            ew_set(out, "x0", (tan,))
            return out
        return fill
    if (isinstance(tan, t.Array) and isinstance(y, t.Array) and isinstance(tan.dtype, t.Float)
            and isinstance(y.dtype, t.Float) and y.ndim > 0):
        def fill_cast(tan, y):  # float64 tangents of a float32 primal: cast first, as NumPy's store
            out = np.empty_like(y)
            ew_set(out, "x0", (tan.astype(y.dtype),))
            return out
        return fill_cast

    def impl(tan, y):
        out = np.empty_like(y)
        out[...] = tan
        return out
    return impl


@overload(rt.as_shape)
def _as_shape(tan, y):
    return lambda tan, y: rt.as_tangent(tan, y)


def _expand(ax, keep, ndim):
    """A jitted `g -> g with the reduced axes put back` for a literal axis or tuple of axes (or
    the identity)."""
    if ax is None or keep:
        return register_jitable(lambda g: g)
    if isinstance(ax, tuple):
        step = register_jitable(lambda g: g)
        for a in sorted(k % ndim for k in ax):  # first axis first: each goes back where it was
            step = _expand_after(step, a)
        return step
    a = ax % ndim
    return register_jitable(lambda g: np.expand_dims(g, a))


def _expand_after(before, a):
    return register_jitable(lambda g: np.expand_dims(before(g), a))


@overload(rt.expand_reduced, prefer_literal=True)
def _expand_reduced(g, x, axis, keepdims):
    ax, keep = _literal(axis, "axis"), bool(_literal(keepdims, "keepdims"))
    if ax is not None and not isinstance(ax, int) and not (
            isinstance(ax, tuple) and all(isinstance(k, int) for k in ax)):
        raise TypingError("zymo's Numba backend reduces over constant axes only")
    if not _arr(x):
        return lambda g, x, axis, keepdims: g
    if not _arr(g) and (ax is None or x.ndim == 1):
        # the adjoint of a full reduction (over every axis, or the one axis of a 1-d array)
        # is one number: generated code adds it into the operand's adjoint (`dx += ...`),
        # which broadcasts it without allocating
        return lambda g, x, axis, keepdims: g
    ex = _expand(ax, keep, x.ndim)
    return lambda g, x, axis, keepdims: np.broadcast_to(ex(g), x.shape)


@overload(rt.reduced_count)
def _reduced_count(x, ans):
    return lambda x, ans: nnp.size(x) // max(nnp.size(ans), 1)


@overload(rt.extreme_mask, prefer_literal=True)
def _extreme_mask(x, ans, axis, keepdims):
    ax, _keep = _literal(axis, "axis"), bool(_literal(keepdims, "keepdims"))
    if ax is None and _arr(x) and x.ndim == 1 and isinstance(x.dtype, (t.Integer, t.Float)) and isinstance(
            ans, (t.Integer, t.Float)):
        dt = t.float64 if isinstance(x.dtype, t.Integer) else x.dtype

        def impl_loop(x, ans, axis, keepdims):
            # as loops: the array expressions below are kernels compiled per signature (docs/decisions/0003)
            n = x.shape[0]
            c = 0
            for i in range(n):
                if x[i] == ans:
                    c += 1
            share = dt(np.nan) if c == 0 else dt(1) / dt(c)
            rest = dt(np.nan) if c == 0 else dt(0)
            out = np.empty(n, dt)
            for i in range(n):
                out[i] = share if x[i] == ans else rest
            return out
        return impl_loop
    if ax is None:
        def impl(x, ans, axis, keepdims):
            m = (x == rt.expand_reduced(ans, x, axis, keepdims)).astype(np.float64)
            return m / np.sum(m)
        return impl
    if not isinstance(ax, int):  # a tuple of axes: each group's count by rows
        rows = nnp._Rows(x.ndim, nnp._axes_of(axis, x, "np.max/np.min"))
        if rows.whole:
            def impl_all(x, ans, axis, keepdims):
                m = (x == ans).astype(np.float64) if not keepdims else (x == ans.ravel()[0]).astype(np.float64)
                return m / np.sum(m)
            return impl_all

        flat, kept = rows.flat, rows.kept

        def impl_axes(x, ans, axis, keepdims):
            m = (x == rt.expand_reduced(ans, x, axis, keepdims)).astype(np.float64)
            return m / np.sum(flat(m), axis=1).reshape(kept(x))
        return impl_axes
    a = ax % x.ndim

    def impl_axis(x, ans, axis, keepdims):
        m = (x == rt.expand_reduced(ans, x, axis, keepdims)).astype(np.float64)
        return m / np.expand_dims(np.sum(m, axis=a), a)
    return impl_axis


def _result_dtype(*tys):
    """The NumPy dtype of a product of Numba array or scalar types (a constant for `np.empty`;
    a scalar is the seed of a 1-d by 1-d product)."""
    from numba.np.numpy_support import as_dtype

    return np.result_type(*(as_dtype(getattr(ty, "dtype", ty)) for ty in tys))


@register_jitable
def _add_outer(acc, x, y):
    """`acc += np.outer(x, y)` for 1-d `x`, `y`, as a loop (Numba's own `np.outer` costs about
    a second of compile per signature, this a tenth, and runs as fast at these sizes)."""
    if acc.shape[0] != x.shape[0] or acc.shape[1] != y.shape[0]:
        raise ValueError("zymo: product adjoint shapes do not match")
    for i in range(x.shape[0]):
        xi = x[i]
        for j in range(y.shape[0]):
            acc[i, j] += xi * y[j]
    return acc


def _outer(dt):
    """`np.outer(x, y)` of 1-d arrays of result dtype `dt` (`_add_outer` into zeros)."""
    return register_jitable(lambda x, y: _add_outer(np.zeros((x.shape[0], y.shape[0]), dt), x, y))


def _matvec(dt, transpose: bool):
    """`m @ v` (`m.T @ v` when `transpose`) of a 2-d and a 1-d array as a loop in `m`'s row
    order (no BLAS call: the adjoints of matrix-vector products are small and memory-bound)."""
    if transpose:
        @register_jitable
        def mv(m, v):
            out = np.zeros(m.shape[1], dt)
            for i in range(m.shape[0]):
                vi = v[i]
                for j in range(m.shape[1]):
                    out[j] += m[i, j] * vi
            return out
    else:
        @register_jitable
        def mv(m, v):
            out = np.zeros(m.shape[0], dt)
            for i in range(m.shape[0]):
                acc = out[i]  # a zero of the result's dtype (of `np.empty`, NaN * 0 could be NaN)
                for j in range(m.shape[1]):
                    acc += m[i, j] * v[j]
                out[i] = acc
            return out
    return mv


def _matmul_vjp(which):
    def ov(g, a, b):
        if not (_arr(a) and _arr(b)) or a.ndim > 2 or b.ndim > 2:
            raise TypingError("zymo's Numba backend differentiates products of 1-d and 2-d arrays")
        dt = _result_dtype(g, b) if which == "a" else _result_dtype(a, g)
        if which == "a":
            if b.ndim == 1:
                if a.ndim == 1:
                    return lambda g, a, b: g * b
                outer = _outer(dt)
                return lambda g, a, b: outer(g, b)
            if a.ndim == 1:
                mv = _matvec(dt, False)
                return lambda g, a, b: mv(b, g)
            return lambda g, a, b: nnp.dot(g, b.T)  # a transposed C array is F: BLAS takes it as is
        if a.ndim == 1:
            if b.ndim == 1:
                return lambda g, a, b: g * a
            outer = _outer(dt)
            return lambda g, a, b: outer(a, g)
        if b.ndim == 1:
            mv = _matvec(dt, True)
            return lambda g, a, b: mv(a, g)
        return lambda g, a, b: nnp.dot(a.T, g)
    return ov


overload(rt.matmul_vjp_a)(_matmul_vjp("a"))
overload(rt.matmul_vjp_b)(_matmul_vjp("b"))


@overload(rt.dot_vjp_a)
def _dot_vjp_a(g, a, b):
    if not _arr(a):
        return lambda g, a, b: np.sum(g * b)
    if not _arr(b):
        return lambda g, a, b: g * b
    return lambda g, a, b: rt.matmul_vjp_a(g, a, b)


@overload(rt.dot_vjp_b)
def _dot_vjp_b(g, a, b):
    if not _arr(b):
        return lambda g, a, b: np.sum(g * a)
    if not _arr(a):
        return lambda g, a, b: g * a
    return lambda g, a, b: rt.matmul_vjp_b(g, a, b)


@overload(rt.is_view)
def _is_view(u, x):
    return lambda u, x: nnp.may_share_memory(u, x)


@overload(rt.check_shadow_view)
def _check_shadow_view(u, x, du, dx):
    def impl(u, x, du, dx):
        if nnp.may_share_memory(u, x) != nnp.may_share_memory(du, dx):
            raise ValueError("reshape returned a view of the primal but a copy of its shadow (or the "
                             "other way round); give the shadow the primal's layout (np.zeros_like(x))")
        return du
    return impl


@overload(rt.maybe_view_shadow, prefer_literal=True)
def _maybe_view_shadow(u, x, du, dx, zero):
    if _literal(zero, "zero"):
        def impl(u, x, du, dx, zero):
            if nnp.may_share_memory(u, x):
                return rt.check_shadow_view(u, x, du, dx)
            return np.zeros_like(u)
        return impl

    def impl_copy(u, x, du, dx, zero):
        if nnp.may_share_memory(u, x):
            return rt.check_shadow_view(u, x, du, dx)
        return du.copy()
    return impl_copy


@overload(rt.as_dtype)
def _as_dtype(x, dtype):
    return lambda x, dtype: x.astype(dtype)


@overload(rt.reshape_shadow)
def _reshape_shadow(du, u, x, dx):
    return lambda du, u, x, dx: rt.maybe_view_shadow(u, x, du, dx, True)


@overload(rt.zeros_list)
def _zeros_list(lst):
    return lambda lst: [np.zeros_like(a) for a in lst]


def __getattr__(name: str):
    return getattr(rt, name)


@overload(rt.reuse_buffer, prefer_literal=True)
def _reuse_buffer(tape, slot, size, dtype):
    if _none(tape):
        return lambda tape, slot, size, dtype: np.empty(max(size, 1), dtype)
    k = _literal(slot, "tape slot")

    def impl(tape, slot, size, dtype):
        buf = tape[k]
        if buf.shape[0] >= size:
            return buf
        return np.empty(max(size, 1), dtype)
    return impl


@overload(rt.int_pow)
def _int_pow(a, b):
    def impl(a, b):
        if b < 0:
            raise ValueError("zymo: an int raised to a negative int power is a float in Python, and this program "
                             "typed the power as an int (its exponent is not a constant); write float(a) ** b")
        return a ** b
    return impl


@overload(rt.reuse_tape)
def _reuse_tape(buf, size, dtype):
    def impl(buf, size, dtype):
        if buf.shape[0] >= size:
            return buf
        return np.empty(max(size, 1), dtype)
    return impl


# -- issue 7's helpers (the common cases; others fail at typing and the backend reports it) -------


register_jitable(rt.clip_inside)  # the Python helper compiles as written (None bounds are pruned)


@overload(rt.cumsum_vjp, prefer_literal=True)
def _cumsum_vjp(g, x, axis):
    ax = None if _none(axis) else _literal(axis, "axis")
    if _arr(x) and _arr(g) and x.ndim == 2 and g.ndim == 2 and isinstance(ax, int) and -2 <= ax < 2:
        a = ax % 2

        def by_axis(g, x, axis):  # reversed running sums along the axis, added as NumPy's scan adds
            out = np.empty(g.shape, g.dtype)
            n0, n1 = g.shape
            if a == 0:
                for j in range(n1):
                    for i in range(n0 - 1, -1, -1):
                        out[i, j] = g[i, j] if i == n0 - 1 else g[i, j] + out[i + 1, j]
            else:
                for i in range(n0):
                    for j in range(n1 - 1, -1, -1):
                        out[i, j] = g[i, j] if j == n1 - 1 else g[i, j] + out[i, j + 1]
            return out
        return by_axis
    if not (_none(axis) and _arr(x) and x.ndim == 1):
        raise TypingError("zymo's Numba backend differentiates np.cumsum of 1-d arrays without axis, "
                          "and of 2-d arrays along an axis")

    def impl(g, x, axis):
        return np.cumsum(g[::-1])[::-1].copy()
    return impl


@register_jitable
def _others_rows(m):
    """Each element of each row of `m` replaced by the product of the row's other elements
    (exclusive products from the left times those from the right: exact with zeros)."""
    out = np.empty_like(m)
    one = np.ones(1, dtype=m.dtype)[0]
    for i in range(m.shape[0]):
        acc = one
        for j in range(m.shape[1]):
            out[i, j] = acc
            acc = acc * m[i, j]
        acc = one
        for j in range(m.shape[1] - 1, -1, -1):
            out[i, j] = out[i, j] * acc
            acc = acc * m[i, j]
    return out


@overload(rt.prod_others, prefer_literal=True)
def _prod_others(x, axis):
    if _arr(x) and x.ndim >= 1 and not (_none(axis) and x.ndim == 1):
        if not isinstance(x.dtype, (t.Integer, t.Float)):
            raise TypingError("zymo's Numba backend differentiates np.prod of real arrays only")
        rows = nnp._Rows(x.ndim, nnp._axes_of(axis, x, "np.prod"))
        flat, back = rows.flat, rows.back
        return lambda x, axis: back(_others_rows(flat(x)), x)
    if not (_none(axis) and _arr(x) and x.ndim == 1):
        raise TypingError("zymo's Numba backend differentiates np.prod of arrays")

    def impl(x, axis):
        n = x.shape[0]
        out = np.empty_like(x)
        acc = np.ones(1, dtype=x.dtype)[0]
        for i in range(n):
            out[i] = acc
            acc = acc * x[i]
        acc = np.ones(1, dtype=x.dtype)[0]
        for i in range(n - 1, -1, -1):
            out[i] = out[i] * acc
            acc = acc * x[i]
        return out
    return impl


# -- accumulating product adjoints (Numba only) ---------------------------------------------
# `compile_numba` rewrites `d += _rt.dot_vjp_a(g, a, b)` (and the other three) in the source it
# compiles as `d = _rt.acc_dot_vjp_a(d, g, a, b)`: the product is added into `d` by loops
# (outer and matrix-vector products, written by the intrinsics at the end of this section) or
# one BLAS call with beta = 1, instead of being allocated and then added. The Python backend
# keeps the plain form, which is also what second order differentiates.


def _accumulating(plain):
    def acc_product(acc, g, a, b):
        acc += plain(g, a, b)
        return acc
    acc_product.__name__ = acc_product.__qualname__ = f"acc_{plain.__name__}"
    acc_product.__doc__ = f"`acc += {plain.__name__}(g, a, b)`; returns `acc` (the sum, for a float)."
    return acc_product


acc_dot_vjp_a, acc_dot_vjp_b, acc_matmul_vjp_a, acc_matmul_vjp_b = (
    _accumulating(f) for f in (rt.dot_vjp_a, rt.dot_vjp_b, rt.matmul_vjp_a, rt.matmul_vjp_b))


def _gemm_acc(c, x, y):
    """`c += x @ y` for 2-d arrays (module contract above)."""
    c += np.dot(x, y)


@overload(_gemm_acc)
def _ov_gemm_acc(c, x, y):
    """One `xgemm` with beta = 1 into C-ordered `c`, the operands C or F ordered, one dtype.
    BLAS is column-major: C's memory is C^T, so it computes C^T += y^T x^T; an operand stored
    C-ordered is its own transpose in column-major terms ('N'), one stored F-ordered is not
    ('T')."""
    from numba.np.linalg import _BLAS, ensure_blas, get_blas_kind

    ensure_blas()
    kind = ord(get_blas_kind(c.dtype, "zymo product adjoint"))
    xgemm = _BLAS().numba_xxgemm(c.dtype)
    ty = ord("N") if y.layout == "C" else ord("T")
    tx = ord("N") if x.layout == "C" else ord("T")
    dt = _result_dtype(c)
    y_c, x_c = y.layout == "C", x.layout == "C"

    def impl(c, x, y):
        m, k = x.shape
        n = y.shape[1]
        if y.shape[0] != k or c.shape[0] != m or c.shape[1] != n:
            raise ValueError("zymo: product adjoint shapes do not match")
        if m == 0 or n == 0 or k == 0:
            return
        one = np.ones(1, dt)
        ldy = max(1, n if y_c else k)
        ldx = max(1, k if x_c else m)
        r = xgemm(kind, ty, tx, n, m, k, one.ctypes, y.ctypes, ldy, x.ctypes, ldx, one.ctypes,
                  c.ctypes, max(1, n))
        if r < 0:
            raise ValueError("zymo: BLAS xgemm failed")
    return impl


def _gemm_ready(c, x, y) -> bool:
    return (_arr(c) and _arr(x) and _arr(y) and c.ndim == x.ndim == y.ndim == 2 and c.layout == "C"
            and x.layout in ("C", "F") and y.layout in ("C", "F")
            and c.dtype == x.dtype == y.dtype and str(c.dtype) in ("float64", "complex128", "float32", "complex64"))


def _acc_product(which: str, plain):
    def ov(acc, g, a, b):
        if not _arr(acc):
            return lambda acc, g, a, b: acc + plain(g, a, b)
        if _arr(a) and _arr(b) and a.ndim == 2 and b.ndim == 2:
            if which == "a" and _gemm_ready(acc, g, b):
                # b.T of a C array is F and of an F array C: both go to BLAS as they are
                def impl_a(acc, g, a, b):
                    _gemm_acc(acc, g, b.T)
                    return acc
                return impl_a
            if which == "b" and _gemm_ready(acc, a, g):
                def impl_b(acc, g, a, b):
                    _gemm_acc(acc, a.T, g)
                    return acc
                return impl_b
        # outer and matrix-vector products are loops the intrinsic writes (`accumulate
        # .product`), which calls this only for other dtypes or an accumulator that shares
        # memory with an operand: the plain sum below is right for both

        def fallback(acc, g, a, b):
            acc += plain(g, a, b)
            return acc
        return fallback
    return ov


for _acc, _which, _plain in ((acc_dot_vjp_a, "a", rt.dot_vjp_a), (acc_dot_vjp_b, "b", rt.dot_vjp_b),
                             (acc_matmul_vjp_a, "a", rt.matmul_vjp_a), (acc_matmul_vjp_b, "b", rt.matmul_vjp_b)):
    overload(_acc)(_acc_product(_which, _plain))

# what generated code calls: intrinsics that write outer and matrix-vector product loops in
# place and call the overloads above for the rest (`accumulate.product`)
_overloaded_products = (acc_dot_vjp_a, acc_dot_vjp_b, acc_matmul_vjp_a, acc_matmul_vjp_b)
acc_dot_vjp_a, acc_dot_vjp_b, acc_matmul_vjp_a, acc_matmul_vjp_b = (
    _product(w, f) for w, f in zip("abab", _overloaded_products))


@overload(rt.imag_copy)
def _imag_copy(x):
    """Im(x) as fresh memory (`rules/complex_.py`'s `numpy.imag`)."""
    if isinstance(x, t.Array):
        return lambda x: np.imag(x).copy()
    return lambda x: x.imag


# -- reductions: var/std's centering, norms ------------------------------------------------------


@overload(rt.centered, prefer_literal=True)
def _centered(x, axis):
    if _literal(axis, "axis") is None or not _arr(x):
        return lambda x, axis: x - np.mean(x)
    step = nnp.centered_rows(x, nnp._axes_of(axis, x, "np.var/np.std"))  # by rows, any axes
    return lambda x, axis: step(x)


_NORMS = "zymo's Numba backend differentiates vector norms and the Frobenius norm (no axis)"


def _runtime_ord(x, ord, axis) -> bool:
    """Whether `ord` is a number known only at run time (a float such as 3.0 or np.inf: Numba
    has no float literals); the vector norms take one, as Numba's `np.linalg.norm` does."""
    if not isinstance(ord, (t.Float, t.Integer)) or isinstance(ord, t.Literal):
        return False
    if _literal(axis, "axis") is not None or _ndim(x) != 1:
        raise TypingError(_NORMS)
    return True


def _literal_ord(x, ord, axis):
    """The constant `ord` of a vector norm or the Frobenius norm, over every element."""
    o = _literal(ord, "ord")
    if _literal(axis, "axis") is not None or (_ndim(x) == 2 and o not in (None, "fro")):
        raise TypingError(_NORMS)
    return o


@register_jitable
def _norm_grad_runtime(x, nrm, ord):
    """`norm_grad` of a vector for an `ord` known at run time (see `rt.norm_grad`)."""
    n = x.shape[0]
    out = np.zeros(n)
    if ord == 1:
        for i in range(n):
            out[i] = np.sign(x[i])
    elif np.isinf(ord):  # ties share: the sign over the number of elements at the norm
        ties = 0
        for i in range(n):
            if abs(x[i]) == nrm:
                ties += 1
        for i in range(n):
            if abs(x[i]) == nrm:
                out[i] = np.sign(x[i]) / ties
    elif ord < 1:
        raise NotImplementedError("the derivative of norm with ord < 1 is not supported")
    elif nrm != 0:
        for i in range(n):
            out[i] = np.sign(x[i]) * (abs(x[i]) / nrm) ** (ord - 1.0)
    return out


@register_jitable
def _norm_grad_rows(m, nrm, ord):
    """`norm_grad` of each row of `m`, whose norm of order `ord` (a number) is `nrm[i]`."""
    out = np.zeros(m.shape, np.float64)
    inf, one = np.isinf(ord), ord == 1
    if not (inf or one) and ord < 1:
        raise NotImplementedError("the derivative of norm with ord < 1 is not supported")
    for i in range(m.shape[0]):
        a = nrm[i]
        if inf:  # ties share: the sign over the number of elements at the norm
            ties = 0
            for j in range(m.shape[1]):
                if abs(m[i, j]) == a:
                    ties += 1
            for j in range(m.shape[1]):
                if abs(m[i, j]) == a:
                    out[i, j] = np.sign(m[i, j]) / ties
        elif one:
            for j in range(m.shape[1]):
                out[i, j] = np.sign(m[i, j])
        elif a != 0:
            for j in range(m.shape[1]):
                out[i, j] = m[i, j] / a if ord == 2 else np.sign(m[i, j]) * (abs(m[i, j]) / a) ** (ord - 1.0)
    return out


def _norm_grad_along(x, nrm, ord, axis, keepdims):
    """`norm_grad` along one constant axis of an array of rank 2 or more (vector norms of its
    rows, `np_linalg._norm_along`), None where that is not the case."""
    ax = _literal(axis, "axis")
    if not (_arr(x) and x.ndim >= 1 and (isinstance(ax, int) or isinstance(ax, tuple) and len(ax) == 1)
            and (_none(ord) or isinstance(ord, (t.Integer, t.Float))) and isinstance(x.dtype, (t.Integer, t.Float))):
        return None
    dt = x.dtype if isinstance(x.dtype, t.Float) else t.float64
    rows = nnp._Rows(x.ndim, nnp._axes_of(axis, x, "np.linalg.norm"))
    flat, back = rows.flat, rows.back
    norms = (lambda nrm: np.ravel(nrm)) if _arr(nrm) else (lambda nrm: np.full(1, nrm))  # one per row
    norms = register_jitable(norms)
    if _none(ord):
        return lambda x, nrm, ord, axis, keepdims: back(_norm_grad_rows(flat(x), norms(nrm), 2.0), x).astype(dt)
    return lambda x, nrm, ord, axis, keepdims: back(_norm_grad_rows(flat(x), norms(nrm), ord), x).astype(dt)


@overload(rt.is_given)
def _is_given(v):
    if _none(v):
        return lambda v: False
    return lambda v: True


@overload(rt.norm_grad, prefer_literal=True)
def _norm_grad(x, nrm, ord, axis, keepdims):
    along = _norm_grad_along(x, nrm, ord, axis, keepdims)
    if along is not None:
        return along
    if _runtime_ord(x, ord, axis):
        return lambda x, nrm, ord, axis, keepdims: _norm_grad_runtime(x, nrm, ord)
    o = _literal_ord(x, ord, axis)
    if o is None or o == "fro" or o == 2:
        return lambda x, nrm, ord, axis, keepdims: x * 0.0 if nrm == 0 else x / nrm
    if o == 1:
        return lambda x, nrm, ord, axis, keepdims: np.sign(x)
    if np.isinf(o):
        def impl_inf(x, nrm, ord, axis, keepdims):
            m = (np.abs(x) == nrm).astype(np.float64)
            return np.sign(x) * m / np.sum(m)
        return impl_inf
    p = float(o)
    return lambda x, nrm, ord, axis, keepdims: np.sign(x) * (np.abs(x) / (1.0 if nrm == 0 else nrm)) ** (p - 1.0)



def _scan_1d(x, axis, what):
    if _literal(axis, "axis") is not None or _ndim(x) != 1:
        raise TypingError(f"zymo's Numba backend differentiates {what} of 1-d arrays without axis")


@overload(rt.cumprod_jvp, prefer_literal=True)
def _cumprod_jvp(t, x, axis):
    _scan_1d(x, axis, "np.cumprod")

    def impl(t, x, axis):
        d = np.empty(x.shape[0])
        if x.shape[0] == 0:  # nothing to read: x[0] would be out of bounds (Numba does not check)
            return d
        p = x[0]
        d[0] = t[0]
        for j in range(1, x.shape[0]):
            d[j] = d[j - 1] * x[j] + p * t[j]
            p = p * x[j]
        return d
    return impl


@overload(rt.cumprod_vjp, prefer_literal=True)
def _cumprod_vjp(g, x, axis):
    _scan_1d(x, axis, "np.cumprod")

    def impl(g, x, axis):
        n = x.shape[0]
        out = np.empty(n)
        if n == 0:  # g[n - 1] would wrap round to an element that is not there
            return out
        s = g[n - 1]
        out[n - 1] = s
        for i in range(n - 2, -1, -1):
            s = g[i] + x[i + 1] * s
            out[i] = s
        p = 1.0
        for i in range(n):
            out[i] = out[i] * p
            p = p * x[i]
        return out
    return impl
