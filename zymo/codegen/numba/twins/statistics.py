"""Numba twins of the statistics helpers (`zymo/runtime/statistics.py`).

Contract: importing this module (the `twins` package does) registers, with
`numba.extending.overload` on each helper's own function object, Numba implementations of
`nan_count`/`nan_centered`/`nan_ones` over every element (`axis=None`: Numba's nan reductions
take no axis; `nan_centered_lin` and `none_or_zeros` for second order), and `cov_jvp`/`cov_vjp`/
`corrcoef_jvp`/`corrcoef_vjp` (1-d or 2-d `m`, `y` None or an array, constant `rowvar`, `bias`,
`ddof`). Everything else fails at typing with a message the backend reports. `histogram` with
weights, `polyval` and SciPy's `logsumexp` have no Numba version because Numba cannot compile
their primal.
"""
import numpy as _np
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable

from zymo import runtime as rt

from ..np_shim import _literal, _ndim, _none
from .sorting import _fdt

# -- NaN-ignoring helpers (every element: Numba's nan reductions take no axis) -----------------


def _whole(axis, keepdims=None):
    if _literal(axis, "axis") is not None or (keepdims is not None and _literal(keepdims, "keepdims")):
        raise TypingError("zymo's Numba backend differentiates the nan reductions over every element only "
                          "(Numba's take no axis)")


@overload(rt.nan_count, prefer_literal=True)
def _ov_nan_count(a, axis=None, keepdims=False):
    _whole(axis, keepdims)
    dt = _fdt(a).type

    def impl(a, axis=None, keepdims=False):
        c = 0
        for v in _np.ravel(a):
            if not _np.isnan(v):
                c += 1
        return dt(c)
    return impl


@overload(rt.nan_centered, prefer_literal=True)
def _ov_nan_centered(a, axis=None):
    _whole(axis)

    def impl(a, axis=None):
        m = _np.nanmean(a)
        out = _np.zeros_like(a)
        af, of = _np.ravel(a), out.reshape(out.size)
        for k in range(af.shape[0]):
            if not _np.isnan(af[k]):
                of[k] = af[k] - m
        return out
    return impl


@overload(rt.nan_centered_lin, prefer_literal=True)
def _ov_nan_centered_lin(t, a, axis=None):
    _whole(axis)

    def impl(t, a, axis=None):
        af, tf = _np.ravel(a), _np.ravel(t)
        tot, n = 0.0, 0
        for k in range(af.shape[0]):
            if not _np.isnan(af[k]):
                tot += tf[k]
                n += 1
        out = _np.zeros_like(t)
        of = out.reshape(out.size)
        for k in range(af.shape[0]):
            if not _np.isnan(af[k]):
                of[k] = tf[k] - tot / n
        return out
    return impl


@overload(rt.none_or_zeros)
def _ov_none_or_zeros(y):
    if _none(y):
        return lambda y: None
    return lambda y: _np.zeros(_np.shape(y))


@overload(rt.nan_ones)
def _ov_nan_ones(a):
    def impl(a):
        out = _np.ones_like(a)
        af, of = _np.ravel(a), out.reshape(out.size)
        for k in range(af.shape[0]):
            if not _np.isnan(af[k]):
                of[k] = af[k]
        return out
    return impl


# -- np.cov / np.corrcoef -----------------------------------------------------------------------


def _rows_fn(v, rowvar: bool, is_y: bool):
    """A jitted `v -> float64 2-d rows` as NumPy's cov lays `v` out (`runtime/statistics.py`'s `_rows`)."""
    nd = _ndim(v)
    if nd == 1:
        return register_jitable(lambda v: _np.asarray(v, _np.float64).reshape(1, v.shape[0]).copy())
    if nd != 2:
        raise TypingError("zymo's Numba backend differentiates np.cov/np.corrcoef of 1-d and 2-d arrays")
    if rowvar:
        return register_jitable(lambda v: _np.asarray(v, _np.float64).copy())
    if is_y:  # NumPy transposes y only when it has more than one row
        return register_jitable(lambda v: _np.asarray(v, _np.float64).T.copy() if v.shape[0] != 1
                                else _np.asarray(v, _np.float64).copy())
    return register_jitable(lambda v: _np.ascontiguousarray(_np.asarray(v, _np.float64).T))


@register_jitable
def _center(x):
    out = x.copy()
    for i in range(x.shape[0]):
        out[i] -= _np.mean(x[i])
    return out


def _joined_fn(m, y, rowvar):
    rm = _rows_fn(m, rowvar, False)
    if _none(y):
        return register_jitable(lambda m, y: rm(m))
    ry = _rows_fn(y, rowvar, True)
    return register_jitable(lambda m, y: _np.concatenate((rm(m), ry(y))))


def _fact_fn(bias, ddof):
    d = _literal(ddof, "ddof")
    if d is None:
        d = 0 if _literal(bias, "bias") else 1
    return d


def _one_var(m, y) -> bool:
    return _ndim(m) == 1 and _none(y)


def _cov_core(m, y, rowvar, bias, ddof):
    """(join, d, scalar, rows of m): what the cov overloads need at typing time."""
    rv = bool(_literal(rowvar, "rowvar"))
    return _joined_fn(m, y, rv), _fact_fn(bias, ddof), _one_var(m, y), rv


def _tangent_join(m, y, tm, ty, rv):
    """A jitted `(m, y, tm, ty) -> the joined tangent rows` (None tangents are zeros)."""
    rm = _rows_fn(m, rv, False)
    if _none(y):
        if _none(tm):
            return register_jitable(lambda m, y, tm, ty: rm(m) * 0.0)
        return register_jitable(lambda m, y, tm, ty: rm(tm))
    ry = _rows_fn(y, rv, True)
    if _none(tm):
        return register_jitable(lambda m, y, tm, ty: _np.concatenate((rm(m) * 0.0, ry(ty))))
    if _none(ty):
        return register_jitable(lambda m, y, tm, ty: _np.concatenate((rm(tm), ry(y) * 0.0)))
    return register_jitable(lambda m, y, tm, ty: _np.concatenate((rm(tm), ry(ty))))


def _finish(scalar):
    if scalar:
        return register_jitable(lambda c: c[0, 0])
    return register_jitable(lambda c: c)


def _cov_jvp_impl(m, y, tm, ty, rowvar=True, bias=False, ddof=None):
    join, d, scalar, rv = _cov_core(m, y, rowvar, bias, ddof)
    tj = _tangent_join(m, y, tm, ty, rv)
    fin = _finish(scalar)

    def impl(m, y, tm, ty, rowvar=True, bias=False, ddof=None):
        xc = _center(join(m, y))
        tc = _center(tj(m, y, tm, ty))
        return fin((tc @ xc.T + xc @ tc.T) / (xc.shape[1] - d))
    return impl


def _split_fn(m, y, rv, which):
    """A jitted `(gx, m, y) -> the rows of gx belonging to m (which=0) or y, in that operand's
    layout`."""
    dm = _fdt(m)
    if which == 0:
        if _ndim(m) == 1:
            return register_jitable(lambda gx, m, y: gx[0].astype(dm).copy())
        if rv:
            return register_jitable(lambda gx, m, y: gx[:m.shape[0]].astype(dm).copy())
        return register_jitable(lambda gx, m, y: _np.ascontiguousarray(gx[:m.shape[1]].T).astype(dm))
    dy = _fdt(y)
    rm = _rows_fn(m, rv, False)
    if _ndim(y) == 1:
        return register_jitable(lambda gx, m, y: gx[rm(m).shape[0]].astype(dy).copy())
    if rv:
        return register_jitable(lambda gx, m, y: gx[rm(m).shape[0]:].astype(dy).copy())

    def split_y(gx, m, y):
        part = gx[rm(m).shape[0]:]
        if y.shape[0] != 1:
            return _np.ascontiguousarray(part.T).astype(dy)
        return part.astype(dy).copy()
    return register_jitable(split_y)


def _as_square(g, scalar):
    if scalar:
        return register_jitable(lambda g, k: _np.full((1, 1), g, _np.float64))
    return register_jitable(lambda g, k: _np.asarray(g, _np.float64).reshape(k, k))


def _cov_vjp_impl(g, m, y=None, rowvar=True, bias=False, ddof=None, which=0):
    join, d, scalar, rv = _cov_core(m, y, rowvar, bias, ddof)
    split = _split_fn(m, y, rv, _literal(which, "which"))
    sq = _as_square(g, scalar)

    def impl(g, m, y=None, rowvar=True, bias=False, ddof=None, which=0):
        xc = _center(join(m, y))
        gg = sq(g, xc.shape[0])
        return split((gg + gg.T) @ xc / (xc.shape[1] - d), m, y)
    return impl


def _corr_jvp_impl(m, y, tm, ty, rowvar=True):
    join, _, scalar, rv = _cov_core(m, y, rowvar, False, None)
    tj = _tangent_join(m, y, tm, ty, rv)
    fin = _finish(scalar)

    def impl(m, y, tm, ty, rowvar=True):
        xc = _center(join(m, y))
        tc = _center(tj(m, y, tm, ty))
        f = xc.shape[1] - 1
        c = xc @ xc.T / f
        dc = (tc @ xc.T + xc @ tc.T) / f
        k = c.shape[0]
        out = _np.empty((k, k))
        for i in range(k):
            for j in range(k):
                s = _np.sqrt(c[i, i] * c[j, j])
                r = c[i, j] / s
                out[i, j] = dc[i, j] / s - r * (dc[i, i] / c[i, i] + dc[j, j] / c[j, j]) / 2.0
        return fin(out)
    return impl


def _corr_vjp_impl(g, m, y=None, rowvar=True, which=0):
    join, _, scalar, rv = _cov_core(m, y, rowvar, False, None)
    split = _split_fn(m, y, rv, _literal(which, "which"))
    sq = _as_square(g, scalar)

    def impl(g, m, y=None, rowvar=True, which=0):
        xc = _center(join(m, y))
        f = xc.shape[1] - 1
        c = xc @ xc.T / f
        k = c.shape[0]
        gg = sq(g, k)
        gc = _np.empty((k, k))
        acc = _np.zeros(k)
        for i in range(k):
            for j in range(k):
                s = _np.sqrt(c[i, i] * c[j, j])
                gc[i, j] = gg[i, j] / s
                gr = gg[i, j] * c[i, j] / s
                acc[i] += gr
                acc[j] += gr
        for i in range(k):
            gc[i, i] -= acc[i] / (2.0 * c[i, i])
        return split((gc + gc.T) @ xc / f, m, y)
    return impl


overload(rt.cov_jvp, prefer_literal=True)(_cov_jvp_impl)
overload(rt.cov_vjp, prefer_literal=True)(_cov_vjp_impl)
overload(rt.corrcoef_jvp, prefer_literal=True)(_corr_jvp_impl)
overload(rt.corrcoef_vjp, prefer_literal=True)(_corr_vjp_impl)
