"""Numba twins of the sorting and interpolation helpers (`zymo/runtime/sorting.py`).

Contract: importing this module (the `twins` package does) registers, with `numba.extending.overload`
on each helper's own function object, Numba implementations for what Numba compiles in the
primal: `sort_perm`, `match_perm` and `take_along_axis_vjp` (1-d and 2-d arrays, a constant
axis or None; stable sorts are Numba's mergesort), the `np.interp` helpers (a 1-d `xp`/`fp`,
`x` a number or an array of any shape); the statistics helpers' twins are in
`statistics.py`. Everything else fails at typing with a message the backend reports
(`numba=True` raises ZymoNumbaError, the default policy falls back to Python).
`put_along_axis` and `histogram` with weights have no Numba version because Numba cannot
compile their primal.
"""
from __future__ import annotations

import numpy as _np
from numba import types as _t
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable
from numba.np.numpy_support import as_dtype

from zymo import runtime as rt

from ..np_shim import _literal, _ndim, _none


def _arr(x) -> bool:
    return isinstance(x, _t.Array)


def _fdt(*tys):
    """The float dtype (a NumPy dtype) of derivatives of values of these Numba types."""
    dts = []
    for ty in tys:
        d = ty.dtype if _arr(ty) else ty
        try:
            d = as_dtype(d)
        except Exception:  # None, literals of Python ints
            d = _np.dtype(_np.float64)
        dts.append(_np.result_type(d, _np.float32))
    return _np.result_type(*dts) if dts else _np.dtype(_np.float64)


def _axis_of(axis, a, what):
    ax = _literal(axis, "axis")
    if ax is None:
        return None
    nd = _ndim(a)
    if not isinstance(ax, int) or nd not in (1, 2):
        raise TypingError(f"zymo's Numba backend differentiates {what} of 1-d and 2-d arrays along one axis")
    return ax % nd


# -- permutations --------------------------------------------------------------------------


@register_jitable
def _stable_argsort(v):
    return _np.argsort(v, kind="mergesort")


@register_jitable
def _match_1d(a, ans):
    src = _np.argsort(a, kind="mergesort")
    dst = _np.argsort(ans, kind="mergesort")
    p = _np.empty(src.shape[0], _np.int64)
    for k in range(src.shape[0]):
        p[dst[k]] = src[k]
    return p


def _per_lane(fn1, ax):
    """A 2-d implementation applying the 1-d `fn1(a_lane, b_lane)` to each row (ax=1) or
    column (ax=0)."""
    if ax == 1:
        def impl(a, b):
            out = _np.empty(a.shape, _np.int64)
            for i in range(a.shape[0]):
                out[i] = fn1(_np.ascontiguousarray(a[i]), _np.ascontiguousarray(b[i]))
            return out
    else:
        def impl(a, b):
            out = _np.empty(a.shape, _np.int64)
            for j in range(a.shape[1]):
                out[:, j] = fn1(_np.ascontiguousarray(a[:, j]), _np.ascontiguousarray(b[:, j]))
            return out
    return register_jitable(impl)


@register_jitable
def _sort1(a, b):
    return _stable_argsort(a)


_SORT_ROWS, _SORT_COLS = _per_lane(_sort1, 1), _per_lane(_sort1, 0)
_MATCH_ROWS, _MATCH_COLS = _per_lane(_match_1d, 1), _per_lane(_match_1d, 0)


@overload(rt.sort_perm, prefer_literal=True)
def _ov_sort_perm(a, axis=-1):
    ax = _axis_of(axis, a, "np.sort")
    if ax is None:
        return lambda a, axis=-1: _stable_argsort(_np.ravel(a))
    if _ndim(a) == 1:
        return lambda a, axis=-1: _stable_argsort(a)
    if ax == 1:
        return lambda a, axis=-1: _SORT_ROWS(a, a)
    return lambda a, axis=-1: _SORT_COLS(a, a)


@overload(rt.match_perm, prefer_literal=True)
def _ov_match_perm(a, ans, axis=-1):
    ax = _axis_of(axis, a, "np.partition")
    if ax is None:
        return lambda a, ans, axis=-1: _match_1d(_np.ravel(a), _np.ravel(ans))
    if _ndim(a) == 1:
        return lambda a, ans, axis=-1: _match_1d(a, ans)
    if ax == 1:
        return lambda a, ans, axis=-1: _MATCH_ROWS(a, ans)
    return lambda a, ans, axis=-1: _MATCH_COLS(a, ans)


@overload(rt.take_along_axis_vjp, prefer_literal=True)
def _ov_take_along_axis_vjp(g, arr, indices, axis):
    dt = _fdt(g, arr)
    ax = _axis_of(axis, arr, "np.take_along_axis")
    if ax is None or _ndim(arr) == 1:
        def impl_flat(g, arr, indices, axis):
            out = _np.zeros(arr.size, dt)
            gf = _np.ravel(g)
            idf = _np.ravel(indices)
            n = arr.size
            for k in range(idf.shape[0]):
                j = idf[k]
                out[j + n if j < 0 else j] += gf[k]
            return out.reshape(arr.shape)
        return impl_flat

    def impl_2d(g, arr, indices, axis):
        out = _np.zeros(arr.shape, dt)
        n = arr.shape[ax]
        for i in range(g.shape[0]):
            for k in range(g.shape[1]):
                ii = i if indices.shape[0] != 1 else 0
                kk = k if indices.shape[1] != 1 else 0
                j = indices[ii, kk]
                j = j + n if j < 0 else j
                if ax == 1:
                    out[i if arr.shape[0] != 1 else 0, j] += g[i, k]
                else:
                    out[j, k if arr.shape[1] != 1 else 0] += g[i, k]
        return out
    return impl_2d


# -- np.interp ----------------------------------------------------------------------------------


@register_jitable
def _seg(xv, xp):
    """(j, j1, w, inside) of one point (`runtime/sorting.py`'s `_segments`)."""
    n = xp.shape[0]
    j = _np.searchsorted(xp, xv, side="right") - 1
    j = min(max(j, 0), max(n - 2, 0))
    j1 = min(j + 1, n - 1)
    w = 0.0 if j1 == j else (xv - xp[j]) / (xp[j1] - xp[j])
    inside = not (xv < xp[0] or xv > xp[n - 1])
    return j, j1, w, inside


@register_jitable
def _slope(xv, xp, fp):
    j, j1, _w, inside = _seg(xv, xp)
    if inside and j1 != j:
        return (fp[j1] - fp[j]) / (xp[j1] - xp[j])
    return 0.0


@overload(rt.interp_dx)
def _ov_interp_dx(x, xp, fp):
    if not _arr(x):
        return lambda x, xp, fp: _slope(float(x), xp, fp)

    def impl(x, xp, fp):
        xf = _np.ravel(x)
        out = _np.empty(xf.shape[0], _np.float64)
        for k in range(xf.shape[0]):
            out[k] = _slope(xf[k], xp, fp)
        return out.reshape(x.shape)
    return impl


@overload(rt.interp_vjp_x)
def _ov_interp_vjp_x(g, x, xp, fp):
    dt = _fdt(x)
    if not _arr(x):
        return lambda g, x, xp, fp: dt.type(_np.sum(g * _slope(float(x), xp, fp)))

    def impl(g, x, xp, fp):
        xf = _np.ravel(x)
        gf = _np.ravel(_np.asarray(g) * _np.ones(x.shape))
        out = _np.empty(xf.shape[0], dt)
        for k in range(xf.shape[0]):
            out[k] = gf[k] * _slope(xf[k], xp, fp)
        return out.reshape(x.shape)
    return impl


@register_jitable
def _jvp_xp1(t, xv, xp, fp):
    j, j1, w, inside = _seg(xv, xp)
    if not inside:
        return 0.0
    return -_slope(xv, xp, fp) * ((1.0 - w) * t[j] + w * t[j1])


@overload(rt.interp_jvp_xp)
def _ov_interp_jvp_xp(t, x, xp, fp):
    if not _arr(x):
        return lambda t, x, xp, fp: _jvp_xp1(t, float(x), xp, fp)

    def impl(t, x, xp, fp):
        xf = _np.ravel(x)
        out = _np.empty(xf.shape[0], _np.float64)
        for k in range(xf.shape[0]):
            out[k] = _jvp_xp1(t, xf[k], xp, fp)
        return out.reshape(x.shape)
    return impl


def _flat_fn(g, x):
    """A jitted `(g, x) -> (x, g)` as float64 1-d arrays of one length (g broadcast to x)."""
    if not _arr(x):
        return register_jitable(lambda g, x: (_np.full(1, float(x)), _np.full(1, float(g))))
    if _arr(g):
        return register_jitable(lambda g, x: (_np.ravel(x) * 1.0, _np.ravel(g) * 1.0))
    return register_jitable(lambda g, x: (_np.ravel(x) * 1.0, _np.full(x.size, float(g))))


@overload(rt.interp_vjp_xp)
def _ov_interp_vjp_xp(g, x, xp, fp):
    dt = _fdt(xp)
    flat = _flat_fn(g, x)

    def impl(g, x, xp, fp):
        xf, gf = flat(g, x)
        out = _np.zeros(xp.shape[0], _np.float64)
        for k in range(xf.shape[0]):
            j, j1, w, inside = _seg(xf[k], xp)
            if inside:
                c = -_slope(xf[k], xp, fp) * gf[k]
                out[j] += c * (1.0 - w)
                out[j1] += c * w
        return out.astype(dt)
    return impl


@overload(rt.interp_vjp_fp)
def _ov_interp_vjp_fp(g, x, xp, fp, left, right):
    dt = _fdt(fp)
    use_left, use_right = _none(left), _none(right)
    flat = _flat_fn(g, x)

    def impl(g, x, xp, fp, left, right):
        xf, gf = flat(g, x)
        out = _np.zeros(fp.shape[0], _np.float64)
        n = xp.shape[0]
        for k in range(xf.shape[0]):
            j, j1, w, inside = _seg(xf[k], xp)
            if inside:
                out[j] += gf[k] * (1.0 - w)
                out[j1] += gf[k] * w
            elif use_left and xf[k] < xp[0]:
                out[0] += gf[k]
            elif use_right and xf[k] > xp[n - 1]:
                out[n - 1] += gf[k]
        return out.astype(dt)
    return impl


@overload(rt.interp_slope_t)
def _ov_interp_slope_t(c, x, xp, like):
    dt = _fdt(like)
    flat = _flat_fn(c, x)

    def impl(c, x, xp, like):
        xf, cf = flat(c, x)
        out = _np.zeros(like.shape[0], _np.float64)
        for k in range(xf.shape[0]):
            j, j1, _w, inside = _seg(xf[k], xp)
            if inside and j1 != j:
                q = cf[k] / (xp[j1] - xp[j])
                out[j1] += q
                out[j] -= q
        return out.astype(dt)
    return impl


@overload(rt.interp_jvp_fp)
def _ov_interp_jvp_fp(t, x, xp, left, right):
    use_left, use_right = _none(left), _none(right)

    @register_jitable
    def one(t, xv, xp):
        j, j1, w, inside = _seg(xv, xp)
        n = xp.shape[0]
        if inside:
            return (1.0 - w) * t[j] + w * t[j1]
        if use_left and xv < xp[0]:
            return t[0] * 1.0
        if use_right and xv > xp[n - 1]:
            return t[n - 1] * 1.0
        return 0.0

    if not _arr(x):
        return lambda t, x, xp, left, right: one(t, float(x), xp)

    def impl(t, x, xp, left, right):
        xf = _np.ravel(x)
        out = _np.empty(xf.shape[0], _np.float64)
        for k in range(xf.shape[0]):
            out[k] = one(t, xf[k], xp)
        return out.reshape(x.shape)
    return impl


def _side(upper: bool):
    def ov(x, xp):
        if not _arr(x):
            if upper:
                return lambda x, xp: 1.0 if x > xp[xp.shape[0] - 1] else 0.0
            return lambda x, xp: 1.0 if x < xp[0] else 0.0

        def impl(x, xp):
            xf = _np.ravel(x)
            out = _np.zeros(xf.shape[0], _np.float64)
            for k in range(xf.shape[0]):
                if (upper and xf[k] > xp[xp.shape[0] - 1]) or (not upper and xf[k] < xp[0]):
                    out[k] = 1.0
            return out.reshape(x.shape)
        return impl
    return ov


overload(rt.interp_below)(_side(False))
overload(rt.interp_above)(_side(True))
