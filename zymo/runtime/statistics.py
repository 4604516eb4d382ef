"""Helpers of the statistics rules (`rules/statistics.py`); generated code calls them as
`_rt.<name>` (`zymo.runtime` re-exports them).

Contract: pure functions of NumPy values. NaN-aware helpers treat NaN entries as absent
(zero weight, zero derivative). `cov`/`corrcoef` helpers follow NumPy's layout exactly
(`m` and `y` as rows, transposed when `rowvar=False` unless 1-d, joined, centred, divided
by N - ddof, the result squeezed); they compute in float64 as NumPy does and cast adjoints
to their operand's dtype. `fweights`/`aweights` are not covered (the rules refuse them). `lse_*` serve
`scipy.special.logsumexp` with `b=` (`rules/scipy_.py`).
"""
from __future__ import annotations

import numpy as np

from .core import expand_reduced, unbroadcast

__all__ = [
    "corrcoef_jvp",
    "corrcoef_vjp",
    "corrcoef_vjp_d",
    "corrcoef_vjp_t",
    "cov_jvp",
    "cov_vjp",
    "cov_vjp_tg",
    "cov_vjp_tx",
    "lse_vjp",
    "lse_vjp_d",
    "lse_vjp_t",
    "lse_weights",
    "nan_centered",
    "nan_centered_lin",
    "nan_count",
    "nan_ones",
    "none_or_zeros",
    "polyder_coef",
    "polyder_coef_t",
    "polyval_vjp_p",
    "polyval_vjp_p_dx",
]


def _fdtype(v):
    """The float dtype of `v`'s derivatives: its own for float32/float64 arrays and NumPy
    scalars, float64 for Python numbers and ints (never NumPy's weak-scalar float32)."""
    return np.result_type(np.asarray(v).dtype, np.float32)


def nan_count(a, axis=None, keepdims=False):
    """How many non-NaN elements each reduction of `a` over `axis` sees, in `a`'s float dtype."""
    n = np.sum(~np.isnan(a), axis=axis, keepdims=keepdims)
    return np.asarray(n).astype(_fdtype(a))[()]


def nan_centered(a, axis=None):
    """`a - nanmean(a)` along `axis` (kept), 0 at NaN entries."""
    with np.errstate(invalid="ignore"):
        c = a - np.nanmean(a, axis=axis, keepdims=True)
    return np.where(np.isnan(a), np.zeros_like(c), c)


def nan_ones(a):
    """`a` with NaN entries replaced by 1 (the neutral element of a product)."""
    return np.where(np.isnan(a), np.ones_like(a), a)


# -- np.cov / np.corrcoef ------------------------------------------------------------------
def _rows(v, rowvar):
    """`v` as NumPy's cov lays it out: 2-d, variables in rows."""
    x = np.array(v, dtype=np.float64, ndmin=2)
    if not rowvar and np.ndim(v) != 1:
        x = x.T
    return x


def _rows_y(v, rowvar):
    x = np.array(v, dtype=np.float64, ndmin=2)
    if not rowvar and x.shape[0] != 1:
        x = x.T
    return x


def _joined(m, y, rowvar):
    x = _rows(m, rowvar)
    if y is not None:
        x = np.concatenate((x, _rows_y(y, rowvar)), axis=0)
    return x


def _fact(x, bias, ddof):
    if ddof is None:
        ddof = 0 if bias else 1
    return x.shape[1] - ddof


def _centered(x):
    return x - x.mean(axis=1, keepdims=True)


def _cov2(m, y, rowvar, bias, ddof):
    x = _joined(m, y, rowvar)
    xc = _centered(x)
    return xc, xc @ xc.T / _fact(x, bias, ddof), _fact(x, bias, ddof)


def cov_jvp(m, y, tm, ty, rowvar=True, bias=False, ddof=None):
    """Tangent of `np.cov(m, y, rowvar, bias, ddof)` along tangents `tm` of `m` and `ty` of `y`
    (None: zero)."""
    xc, _, f = _cov2(m, y, rowvar, bias, ddof)
    tm = np.zeros(np.shape(m)) if tm is None else tm
    ty = None if y is None else (np.zeros(np.shape(y)) if ty is None else ty)
    tc = _centered(_joined(tm, ty, rowvar))
    return ((tc @ xc.T + xc @ tc.T) / f).squeeze()


def _split(gx, m, y, rowvar, which):
    """The rows of an adjoint of the joined matrix that belong to `m` (which=0) or `y` (1),
    in that operand's layout, shape and dtype."""
    nm = _rows(m, rowvar).shape[0]
    if which == 0:
        part, v = gx[:nm], m
        if not rowvar and np.ndim(v) != 1:
            part = part.T
    else:
        part, v = gx[nm:], y
        if not rowvar and np.array(y, ndmin=2).shape[0] != 1:
            part = part.T
    return part.reshape(np.shape(v)).astype(_fdtype(v))


def cov_vjp(g, m, y=None, rowvar=True, bias=False, ddof=None, which=0):
    """Adjoint of `m` (which=0) or `y` (which=1) in `np.cov`: (G + G^T) Xc / (N - ddof)."""
    xc, c, f = _cov2(m, y, rowvar, bias, ddof)
    g = np.reshape(np.asarray(g, np.float64), c.shape)
    return _split((g + g.T) @ xc / f, m, y, rowvar, which)


def none_or_zeros(y):
    """None for None, else zeros of `y`'s shape (a zero tangent of an optional argument)."""
    return None if y is None else np.zeros(np.shape(y))


def cov_vjp_tg(gb, m, y=None, rowvar=True, bias=False, ddof=None, which=0):
    """The transpose of `cov_vjp` in `g`: with `gb` in the layout of `m` (which=0) or `y` (1),
    (E Xc^T + Xc E^T) / (N - ddof) for E the joined rows holding `gb`, i.e. `cov_jvp` along it."""
    return cov_jvp(m, y, gb if which == 0 else None, gb if which == 1 else None, rowvar, bias, ddof)


def cov_vjp_tx(gb, g, m, y=None, rowvar=True, bias=False, ddof=None, which=0, part=0):
    """The transpose of `cov_vjp` in its data (`m` for part=0, `y` for 1): `cov_vjp` is linear
    in the joined rows X through Xc, so this is centred((G + G^T) E) / (N - ddof), split."""
    _, c, f = _cov2(m, y, rowvar, bias, ddof)
    gm = np.reshape(np.asarray(g, np.float64), c.shape)
    em = gb if which == 0 else np.zeros(np.shape(m))
    ey = None if y is None else (gb if which == 1 else np.zeros(np.shape(y)))
    return _split(_centered((gm + gm.T) @ _joined(em, ey, rowvar) / f), m, y, rowvar, part)


def _corr_parts(m, y, rowvar):
    _, c, _ = _cov2(m, y, rowvar, False, None)
    d = np.diag(c)
    s = np.sqrt(np.outer(d, d))
    return c, d, s, c / s


def corrcoef_jvp(m, y, tm, ty, rowvar=True):
    """Tangent of `np.corrcoef` (R = C / sqrt(d_i d_j), d = diag C): dC / s - R (dd_i / d_i +
    dd_j / d_j) / 2; a single variable's 1.0 has derivative 0."""
    c, d, s, r = _corr_parts(m, y, rowvar)
    dc = np.reshape(cov_jvp(m, y, tm, ty, rowvar, False, None), c.shape)
    q = np.diag(dc) / d
    return (dc / s - r * (q[:, None] + q[None, :]) / 2.0).squeeze()


def _corr_gc(g, d, s, r):
    """The adjoint of C given one `g` of R = C / s: g / s - diag(sum_j (g_ij R_ij + g_ji R_ji) / 2d).
    Linear in `g`."""
    gr = g * r
    return g / s - np.diag((gr.sum(axis=1) + gr.sum(axis=0)) / (2.0 * d))


def _corr_gc_t(h, d, s, r):
    """The transpose of `_corr_gc` in `g`: h / s - R (h_ii / 2d_i + h_jj / 2d_j)."""
    hd = np.diag(h) / (2.0 * d)
    return h / s - r * (hd[:, None] + hd[None, :])


def _corr_gc_dc(dc, g, c, d, s, r):
    """The tangent of `_corr_gc(g, ...)` along a tangent `dc` of C (d, s, R follow C)."""
    u = np.diag(dc) / d
    dr = dc / s - r * (u[:, None] + u[None, :]) / 2.0
    q = (g * r).sum(axis=1) + (g * r).sum(axis=0)
    dq = (g * dr).sum(axis=1) + (g * dr).sum(axis=0)
    return -g * (u[:, None] + u[None, :]) / (2.0 * s) - np.diag(dq / (2.0 * d) - q * u / (2.0 * d))


def _corr_gc_dc_t(h, g, c, d, s, r):
    """The transpose of `_corr_gc_dc` in `dc`."""
    hg = h * g / s
    a = -(hg.sum(axis=1) + hg.sum(axis=0)) / 2.0
    hh = np.diag(h) / (2.0 * d)
    p = -(hh[:, None] + hh[None, :]) * g
    q = (g * r).sum(axis=1) + (g * r).sum(axis=0)
    pr = (p * r).sum(axis=1) + (p * r).sum(axis=0)
    return p / s + np.diag(a / d - pr / (2.0 * d) + hh * q / d)


def corrcoef_vjp(g, m, y=None, rowvar=True, which=0):
    c, d, s, r = _corr_parts(m, y, rowvar)
    g = np.reshape(np.asarray(g, np.float64), c.shape)
    return cov_vjp(_corr_gc(g, d, s, r), m, y, rowvar, False, None, which)


def corrcoef_vjp_d(g, m, y, rowvar, which, tm, ty):
    """The tangent of `corrcoef_vjp(g, m, y, rowvar, which)` along tangents `tm`, `ty` of the
    data (None: zero): through C (in the adjoint of C) and through the centred data."""
    c, d, s, r = _corr_parts(m, y, rowvar)
    g = np.reshape(np.asarray(g, np.float64), c.shape)
    dc = np.reshape(cov_jvp(m, y, tm, ty, rowvar, False, None), c.shape)
    tm = np.zeros(np.shape(m)) if tm is None else tm
    ty = None if y is None else (np.zeros(np.shape(y)) if ty is None else ty)
    return (cov_vjp(_corr_gc_dc(dc, g, c, d, s, r), m, y, rowvar, False, None, which)
            + cov_vjp(_corr_gc(g, d, s, r), tm, ty, rowvar, False, None, which))


def corrcoef_vjp_t(gb, g, m, y=None, rowvar=True, which=0, part=0):
    """The transposes of `corrcoef_vjp` (for its rule's tests): the adjoint of `g` (part 0),
    of `m` (1) or of `y` (2) given an adjoint `gb` of its result."""
    c, d, s, r = _corr_parts(m, y, rowvar)
    h = np.reshape(cov_vjp_tg(gb, m, y, rowvar, False, None, which), c.shape)
    if part == 0:
        return _corr_gc_t(h, d, s, r).reshape(np.shape(g))
    g = np.reshape(np.asarray(g, np.float64), c.shape)
    return (cov_vjp(_corr_gc_dc_t(h, g, c, d, s, r), m, y, rowvar, False, None, part - 1)
            + cov_vjp_tx(gb, _corr_gc(g, d, s, r), m, y, rowvar, False, None, which, part - 1))


# -- np.polyval -----------------------------------------------------------------------------
def polyder_coef(p):
    """The coefficients of the derivative of the polynomial `p` (highest power first; empty
    for a constant). Linear in `p`."""
    n = np.shape(p)[0]
    return np.asarray(p)[:-1] * np.arange(n - 1, 0, -1).astype(_fdtype(p))


def polyder_coef_t(g, p):
    """The transpose of `polyder_coef`: the adjoint of `p` given one of its result."""
    n = np.shape(p)[0]
    out = np.zeros(n, np.result_type(_fdtype(p), _fdtype(g)))
    out[:-1] = np.asarray(g) * np.arange(n - 1, 0, -1)
    return out


def polyval_vjp_p(g, p, x):
    """Adjoint of the coefficients: sum(g * x ** (n - 1 - k)) for coefficient k (Horner order)."""
    n = np.shape(p)[0]
    out = np.zeros(n, np.result_type(_fdtype(p), _fdtype(g)))
    pw = np.ones_like(np.asarray(g, out.dtype) * x)
    for k in range(n - 1, -1, -1):
        out[k] = np.sum(g * pw)
        pw = pw * x
    return out.astype(_fdtype(p))


def polyval_vjp_p_dx(t, g, p, x):
    """The tangent of `polyval_vjp_p(g, p, x)` along a tangent `t` of `x`: (n-1-k) sum(g t
    x ** (n-2-k)) for coefficient k."""
    n = np.shape(p)[0]
    out = np.zeros(n, np.result_type(_fdtype(p), _fdtype(g), _fdtype(t)))
    if n > 1:
        out[:-1] = polyval_vjp_p(g * t, np.asarray(p)[:-1], x) * np.arange(n - 1, 0, -1)
    return out


def nan_centered_lin(t, a, axis=None):
    """The tangent of `nan_centered(a, axis)` along `t` (linear, symmetric: its own
    transpose): `t` centred over the non-NaN entries of `a`, 0 at NaN entries."""
    keep = ~np.isnan(a)
    tk = np.where(keep, t, np.zeros_like(t))
    n = np.sum(keep, axis=axis, keepdims=True).astype(_fdtype(a))
    return np.where(keep, tk - np.sum(tk, axis=axis, keepdims=True) / n, np.zeros_like(tk))


# -- scipy.special.logsumexp with b= ----------------------------------------------------------
def lse_weights(a, b, ans, axis, keepdims, with_b):
    """exp(a - ans) (times `b` when `with_b`), in the shape `a` and `b` broadcast to: the
    derivative of logsumexp(a, axis, b) in `a` (with_b) or in `b` (without)."""
    full = np.broadcast_shapes(np.shape(a), np.shape(b)) if b is not None else np.shape(a)
    e = np.exp(a - expand_reduced(ans, np.broadcast_to(a, full), axis, keepdims))
    return e * b if (with_b and b is not None) else e


def lse_vjp(g, a, b, ans, axis, keepdims, which):
    """Adjoint of `a` (which=0) or `b` (1) in logsumexp(a, axis, b, keepdims)."""
    w = lse_weights(a, b, ans, axis, keepdims, which == 0)
    return unbroadcast(expand_reduced(g, w, axis, keepdims) * w, a if which == 0 else b)


def _lse_w(a, b, ans, axis, keepdims, which):
    """(e, w, full): exp(a - ans) in the broadcast shape, the weight of `which`'s adjoint
    (e * b for a, e for b), and that shape."""
    full = np.broadcast_shapes(np.shape(a), np.shape(b)) if b is not None else np.shape(a)
    e = np.exp(a - expand_reduced(ans, np.broadcast_to(a, full), axis, keepdims))
    return e, (e * b if (which == 0 and b is not None) else e), full


def lse_vjp_d(g, a, b, ans, axis, keepdims, which, ta, tb, tans):
    """The tangent of `lse_vjp(g, a, b, ans, ...)` along tangents `ta`, `tb`, `tans` of `a`,
    `b`, `ans` (None: zero): dw = w (ta - tans) (+ e tb for a's adjoint)."""
    e, w, full = _lse_w(a, b, ans, axis, keepdims, which)
    dw = np.zeros(full)
    if ta is not None:
        dw = dw + w * ta
    if tans is not None:
        dw = dw - w * expand_reduced(tans, dw, axis, keepdims)
    if tb is not None and which == 0:
        dw = dw + e * tb
    return unbroadcast(expand_reduced(g, dw, axis, keepdims) * dw, a if which == 0 else b)


def lse_vjp_t(gb, g, a, b, ans, axis, keepdims, which, part):
    """The transposes of `lse_vjp` (for its rule's tests): the adjoint of `g` (part 0), `a`
    (1), `b` (2) or `ans` (3) given an adjoint `gb` of its result."""
    e, w, full = _lse_w(a, b, ans, axis, keepdims, which)
    q = np.broadcast_to(gb, full) * w
    if part == 0:
        return np.sum(q, axis=axis, keepdims=keepdims)
    q = q * expand_reduced(g, q, axis, keepdims)
    if part == 1:
        return unbroadcast(q, a)
    if part == 2:
        if which != 0:  # b's adjoint exp(a - ans) does not depend on b
            return np.zeros(np.shape(b), np.result_type(_fdtype(b), _fdtype(gb)))
        return unbroadcast(np.broadcast_to(gb, full) * e * expand_reduced(g, q, axis, keepdims), b)
    return -np.sum(q, axis=axis, keepdims=keepdims)
