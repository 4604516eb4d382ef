"""Numba implementations of the shape, join and reduction helpers of issue 7's rules.

Contract: importing this module (numba_rt does) registers, with `numba.extending.overload`
on each helper's own function object, Numba implementations of `_rt.concat2`,
`split_first`, `split_last`, `negate`, `diag`, `diag_vjp`, `diagonal` (a view, as NumPy's),
`diagonal_view`, `diagonal_vjp`,
`expand_diag`, `flatten`, `norm_grad` (and `second_rt.norm_grad_dx`, for second order), `centered`
and `cumprod_jvp`/`cumprod_vjp` (1-d), for what Numba compiles in the primal: 1-d and 2-d arrays,
a constant `axis` (None for `norm` and `var`/`std`, which Numba reduces over every element only),
diagonals of matrices (`axis1=0, axis2=1`). Anything
else fails at typing with a message that the backend reports.
"""
from __future__ import annotations

import numpy as _np
from numba import types as _t
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable
from numpy.lib.stride_tricks import as_strided

from .. import runtime as rt
from ..runtime import second as srt
from .numba_np import _axis, _literal, _ndim, _none

# -- joins -------------------------------------------------------------------------------------------


@overload(rt.concat2, prefer_literal=True)
def _concat2(a, b, axis=0):
    ax = _literal(axis, "axis")
    if ax is None:
        return lambda a, b, axis=0: _np.concatenate((_np.ravel(a), _np.ravel(b)))
    ax = _axis(axis, a, "np.concatenate")
    return lambda a, b, axis=0: _np.concatenate((a, b), axis=ax)


@overload(rt.split_first, prefer_literal=True)
def _split_first(g, a, axis):
    if _literal(axis, "axis") is None:
        return lambda g, a, axis: g[:a.size].copy().reshape(a.shape)
    ax = _axis(axis, a, "np.concatenate")
    if ax == 0:
        return lambda g, a, axis: g[:a.shape[0]]
    return lambda g, a, axis: g[:, :a.shape[1]]


@overload(rt.split_last, prefer_literal=True)
def _split_last(g, b, axis):
    if _literal(axis, "axis") is None:
        return lambda g, b, axis: g[g.size - b.size:].copy().reshape(b.shape)
    ax = _axis(axis, b, "np.concatenate")
    if ax == 0:
        return lambda g, b, axis: g[g.shape[0] - b.shape[0]:]
    return lambda g, b, axis: g[:, g.shape[1] - b.shape[1]:]


@overload(rt.negate)
def _negate(shift):
    if not isinstance(shift, _t.Integer):
        raise TypingError("zymo's Numba backend rolls by an int shift")
    return lambda shift: -shift


@overload(rt.flatten)
def _flatten(x):
    return lambda x: _np.ravel(x).copy()


# -- diagonals ---------------------------------------------------------------------------------------


def _diag_axes(x, axis1, axis2, what):
    a1, a2 = _literal(axis1, "axis1"), _literal(axis2, "axis2")
    if _ndim(x) != 2 or {a1 % 2, a2 % 2} != {0, 1}:
        raise TypingError(f"zymo's Numba backend takes {what} of 2-d arrays")
    return a1 % 2 == 1  # swapped


@overload(rt.diag)
def _diag(v, k=0):
    if _ndim(v) == 1:
        return lambda v, k=0: _np.diag(v, k)
    return lambda v, k=0: _diag_view(v, k, False)  # a matrix's diagonal: a view, as NumPy's


@register_jitable
def _place_diag(g, n1, n2, offset, swap, dt):
    out = _np.zeros((n2, n1), dt) if swap else _np.zeros((n1, n2), dt)
    i0, j0 = max(-offset, 0), max(offset, 0)
    for p in range(g.shape[0]):
        if swap:
            out[j0 + p, i0 + p] = g[p]
        else:
            out[i0 + p, j0 + p] = g[p]
    return out


@register_jitable
def _diag_view(x, offset, swap):
    if swap:
        x = x.T
    i0, j0 = max(-offset, 0), max(offset, 0)
    m = max(0, min(x.shape[0] - i0, x.shape[1] - j0))
    return as_strided(x[i0:, j0:], shape=(m,), strides=(x.strides[0] + x.strides[1],))


@overload(rt.diagonal, prefer_literal=True)
def _diagonal(a, offset=0, axis1=0, axis2=1):
    """NumPy's diagonal is a (read-only) view: so is this one (writable), of 2-d arrays."""
    swap = _diag_axes(a, axis1, axis2, "np.diagonal")
    return lambda a, offset=0, axis1=0, axis2=1: _diag_view(a, offset, swap)


@overload(rt.diagonal_view, prefer_literal=True)
def _diagonal_view(x, offset=0, axis1=0, axis2=1):
    swap = _diag_axes(x, axis1, axis2, "np.diagonal")
    return lambda x, offset=0, axis1=0, axis2=1: _diag_view(x, offset, swap)


@overload(rt.diagonal_vjp, prefer_literal=True)
def _diagonal_vjp(g, x, offset=0, axis1=0, axis2=1):
    swap = _diag_axes(x, axis1, axis2, "np.diagonal")

    dt = _adjoint_dtype(g, x)

    def impl(g, x, offset=0, axis1=0, axis2=1):
        n1, n2 = (x.shape[1], x.shape[0]) if swap else (x.shape[0], x.shape[1])
        return _place_diag(_np.ascontiguousarray(g).ravel(), n1, n2, offset, swap, dt)
    return impl


def _adjoint_dtype(g, x):
    """NumPy's `result_type(g, x)` at typing time, as the Python helper's adjoint has (complex
    when either is)."""
    from numba.np.numpy_support import as_dtype

    return _np.result_type(*(as_dtype(getattr(v, "dtype", v)) for v in (g, x)))


@overload(rt.diag_vjp)
def _diag_vjp(g, x, k):
    if _ndim(x) == 1:
        return lambda g, x, k: _np.diag(_np.ascontiguousarray(g), k).copy()
    dt = _adjoint_dtype(g, x)
    return lambda g, x, k: _place_diag(g, x.shape[0], x.shape[1], k, False, dt)


@overload(rt.expand_diag, prefer_literal=True)
def _expand_diag(g, x, offset, axis1, axis2):
    swap = _diag_axes(x, axis1, axis2, "np.trace")

    def impl(g, x, offset, axis1, axis2):
        n1, n2 = (x.shape[1], x.shape[0]) if swap else (x.shape[0], x.shape[1])
        i0, j0 = max(-offset, 0), max(offset, 0)
        m = max(0, min(n1 - i0, n2 - j0))
        return _np.full(m, g)
    return impl


# -- reductions over every element (Numba's norm, var and std take no axis) ---------------------


@overload(rt.centered, prefer_literal=True)
def _centered(x, axis):
    if _literal(axis, "axis") is not None:
        raise TypingError("zymo's Numba backend differentiates np.var/np.std over every element (no axis)")
    return lambda x, axis: x - _np.mean(x)


_NORMS = "zymo's Numba backend differentiates vector norms and the Frobenius norm (no axis)"


def _runtime_ord(x, ord, axis) -> bool:
    """Whether `ord` is a number known only at run time (a float such as 3.0 or np.inf: Numba
    has no float literals); the vector norms take one, as Numba's `np.linalg.norm` does."""
    if not isinstance(ord, (_t.Float, _t.Integer)) or isinstance(ord, _t.Literal):
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
    out = _np.zeros(n)
    if ord == 1:
        for i in range(n):
            out[i] = _np.sign(x[i])
    elif _np.isinf(ord):  # ties share: the sign over the number of elements at the norm
        ties = 0
        for i in range(n):
            if abs(x[i]) == nrm:
                ties += 1
        for i in range(n):
            if abs(x[i]) == nrm:
                out[i] = _np.sign(x[i]) / ties
    elif ord < 1:
        raise NotImplementedError("the derivative of norm with ord < 1 is not supported")
    elif nrm != 0:
        for i in range(n):
            out[i] = _np.sign(x[i]) * (abs(x[i]) / nrm) ** (ord - 1.0)
    return out


@overload(rt.norm_grad, prefer_literal=True)
def _norm_grad(x, nrm, ord, axis, keepdims):
    if _runtime_ord(x, ord, axis):
        return lambda x, nrm, ord, axis, keepdims: _norm_grad_runtime(x, nrm, ord)
    o = _literal_ord(x, ord, axis)
    if o is None or o == "fro" or o == 2:
        return lambda x, nrm, ord, axis, keepdims: x * 0.0 if nrm == 0 else x / nrm
    if o == 1:
        return lambda x, nrm, ord, axis, keepdims: _np.sign(x)
    if _np.isinf(o):
        def impl_inf(x, nrm, ord, axis, keepdims):
            m = (_np.abs(x) == nrm).astype(_np.float64)
            return _np.sign(x) * m / _np.sum(m)
        return impl_inf
    p = float(o)
    return lambda x, nrm, ord, axis, keepdims: _np.sign(x) * (_np.abs(x) / (1.0 if nrm == 0 else nrm)) ** (p - 1.0)



@overload(srt.norm_grad_dx, prefer_literal=True)
def _norm_grad_dx(tx, tans, x, nrm, ord, axis, keepdims):
    """Second order: the tangent of `norm_grad` along `tx` (of x) or `tans` (of the norm), the
    other one None: (p - 1) (tx (|x|/a)^(p-2) / a - sign(x) (|x|/a)^(p-1) tans / a), 0 where the
    norm `a` is 0, and 0 for ord 1 and inf (piecewise constant)."""
    if _runtime_ord(x, ord, axis):
        exponent = lambda ord: 0.0 if ord == 1 or _np.isinf(ord) else float(ord)  # noqa: E731
    else:
        o = _literal_ord(x, ord, axis)
        p = 0.0 if o is not None and o != "fro" and (o == 1 or _np.isinf(o)) else (
            2.0 if o is None or o == "fro" else float(o))
        exponent = lambda ord: p  # noqa: E731
    exponent = register_jitable(exponent)  # 0.0: ord 1 or inf, piecewise constant
    if _none(tans):
        def impl_x(tx, tans, x, nrm, ord, axis, keepdims):
            p = exponent(ord)
            if nrm == 0 or p == 0.0:
                return _np.zeros(x.shape)
            return (p - 1.0) * (tx * (_np.abs(x) / nrm) ** (p - 2.0) / nrm)
        return impl_x

    def impl_nrm(tx, tans, x, nrm, ord, axis, keepdims):
        p = exponent(ord)
        if nrm == 0 or p == 0.0:
            return _np.zeros(x.shape)
        return -(p - 1.0) * (_np.sign(x) * (_np.abs(x) / nrm) ** (p - 1.0) * (tans / nrm))
    return impl_nrm


def _scan_1d(x, axis, what):
    if _literal(axis, "axis") is not None or _ndim(x) != 1:
        raise TypingError(f"zymo's Numba backend differentiates {what} of 1-d arrays without axis")


@overload(rt.cumprod_jvp, prefer_literal=True)
def _cumprod_jvp(t, x, axis):
    _scan_1d(x, axis, "np.cumprod")

    def impl(t, x, axis):
        d = _np.empty(x.shape[0])
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
        out = _np.empty(n)
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
