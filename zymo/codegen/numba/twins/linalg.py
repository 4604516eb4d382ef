"""Numba twins of the linear-algebra helpers (`zymo/runtime/linalg.py`, reached as `_rt.<name>`).

Contract: importing this module (the `twins` package does) registers, with `numba.extending.overload`
on each helper's own function object, a Numba implementation for 2-d matrices (and 1-d
right-hand sides), which is what Numba's `np.linalg` compiles in the primal: solve, inv,
det, slogdet, cholesky, eigh, qr (reduced) (`cholesky_vjp_dl`, which second order of cholesky
calls, is in `second.py`). A batched (3-d or more) operand fails at
typing with a message; the backend reports it. The formulas are those of `runtime/linalg.py`
written with explicit transposes (`_t`: a contiguous copy), since Numba has no `swapaxes`
on matrices nor `[..., None]` indexing. svd and lstsq helpers have no Numba version yet
(their derivatives fall back to Python, or are refused under `numba=True`).
"""
from __future__ import annotations

import numpy as np
from numba import types as t
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable

from zymo.runtime import linalg as rt


def _need(what: str, *arrs) -> None:
    """Typing-time check: matrices are 2-d (vectors 1-d where `arrs` says None for the ndim)."""
    for a in arrs:
        if not (isinstance(a, t.Array) and a.ndim == 2):
            raise TypingError(f"zymo's Numba backend differentiates {what} of 2-d matrices only")


def _part(part) -> int:
    """Which element of a tuple-returning function a helper differentiates (a literal)."""
    if not isinstance(part, t.IntegerLiteral):
        raise TypingError("zymo's Numba backend needs the part of a factorisation as a constant")
    return part.literal_value


@register_jitable
def _t(a):
    return np.ascontiguousarray(a.T)


@register_jitable
def _c(a):
    return np.ascontiguousarray(a)


@register_jitable
def _mm(a, b):
    return np.dot(_c(a), _c(b))


@overload(rt.mT)
def _mT(a):
    _need("a transpose", a)
    return lambda a: _t(a)


# -- solve, inv, det, slogdet -----------------------------------------------------------------------


@overload(rt.mv)
def _mv(m, v):
    _need("a matrix product", m)
    return lambda m, v: _mm(m, v)


@overload(rt.solve_jvp_a)
def _solve_jvp_a(t_, ans, a):
    _need("np.linalg.solve", a)
    return lambda t_, ans, a: -np.linalg.solve(_c(a), _mm(t_, ans))


@overload(rt.solve_vjp_b)
def _solve_vjp_b(g, a):
    _need("np.linalg.solve", a)
    return lambda g, a: np.linalg.solve(_t(a), _c(g))


@overload(rt.solve_vjp_a)
def _solve_vjp_a(g, sol, a):
    _need("np.linalg.solve", a)
    if isinstance(sol, t.Array) and sol.ndim == 1:
        return lambda g, sol, a: -np.outer(np.linalg.solve(_t(a), _c(g)), sol)
    return lambda g, sol, a: -_mm(np.linalg.solve(_t(a), _c(g)), _t(sol))


@register_jitable
def _adj_t(a):
    """`runtime.linalg._adjugate_t` of a matrix (the transposed adjugate, by the SVD)."""
    u, s, vh = np.linalg.svd(_c(a))
    n = s.shape[0]
    c = np.ones(n, s.dtype)
    acc = 1.0
    for i in range(n):
        c[i] = acc
        acc *= s[i]
    acc = 1.0
    for i in range(n - 1, -1, -1):
        c[i] *= acc
        acc *= s[i]
    return (np.linalg.det(u) * np.linalg.det(vh)) * np.dot(u * c, vh)


@overload(rt.det_vjp)
def _det_vjp(g, d, a):
    _need("np.linalg.det", a)

    def impl(g, d, a):
        if d == 0 and np.linalg.det(_c(a)) == 0:  # singular: the adjugate (inv fails)
            return g * _adj_t(a)
        return (g * d) * _t(np.linalg.inv(_c(a)))
    return impl


@overload(rt.det_solve)
def _det_solve(a, t_):
    _need("np.linalg.det", a)
    return lambda a, t_: np.linalg.solve(_c(a), _c(t_))


@overload(rt.logdet_vjp)
def _logdet_vjp(g, a):
    _need("np.linalg.slogdet", a)
    return lambda g, a: g * _t(np.linalg.inv(_c(a)))


@overload(rt.slogdet_sign)
def _slogdet_sign(a):
    _need("np.linalg.slogdet", a)
    return lambda a: np.linalg.slogdet(_c(a))[0]


@overload(rt.slogdet_logabsdet)
def _slogdet_logabsdet(a):
    _need("np.linalg.slogdet", a)
    return lambda a: np.linalg.slogdet(_c(a))[1]


# -- cholesky -------------------------------------------------------------------------------------


@register_jitable
def _sym_lower(x):
    return np.tril(x) + np.tril(x, -1).T


@register_jitable
def _to_lower(s):
    return np.tril(s) + np.tril(_t(s), -1)


@register_jitable
def _phi(x):
    return np.tril(x) - 0.5 * np.eye(x.shape[0]) * x


@overload(rt.cholesky_jvp)
def _cholesky_jvp(t_, l):
    _need("np.linalg.cholesky", t_, l)

    def impl(t_, l):
        linv = np.linalg.inv(_c(l))
        return _mm(l, _phi(_mm(_mm(linv, _sym_lower(t_)), _t(linv))))
    return impl


@overload(rt.cholesky_vjp)
def _cholesky_vjp(g, l):
    _need("np.linalg.cholesky", g, l)

    def impl(g, l):
        linv = np.linalg.inv(_c(l))
        return _to_lower(_mm(_mm(_t(linv), _phi(_mm(_t(l), g))), linv))
    return impl


# -- eigh (UPLO='L') --------------------------------------------------------------------------------


@register_jitable
def _gaps(w):
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it."""
    n = w.shape[0]
    f = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                f[i, j] = 1.0 / (w[j] - w[i])
    return f


@overload(rt.eigh_w)
def _eigh_w(a):
    _need("np.linalg.eigh", a)
    return lambda a: np.linalg.eigh(_c(a))[0]


@overload(rt.eigh_v)
def _eigh_v(a):
    _need("np.linalg.eigh", a)
    return lambda a: np.linalg.eigh(_c(a))[1]


@overload(rt.eigh_jvp, prefer_literal=True)
def _eigh_jvp(t_, a, part):
    _need("np.linalg.eigh", t_, a)
    if _part(part) == 0:
        def impl_w(t_, a, part):
            w, v = np.linalg.eigh(_c(a))
            return np.diag(_mm(_mm(_t(v), _sym_lower(t_)), v)).copy()
        return impl_w

    def impl_v(t_, a, part):
        w, v = np.linalg.eigh(_c(a))
        return _mm(v, _gaps(w) * _mm(_mm(_t(v), _sym_lower(t_)), v))
    return impl_v


@overload(rt.eigh_vjp, prefer_literal=True)
def _eigh_vjp(g, a, part):
    _need("np.linalg.eigh", a)
    if _part(part) == 0:
        def impl_w(g, a, part):
            w, v = np.linalg.eigh(_c(a))
            return _to_lower(_mm(v * g.reshape((1, g.shape[0])), _t(v)))
        return impl_w

    def impl_v(g, a, part):
        w, v = np.linalg.eigh(_c(a))
        return _to_lower(_mm(_mm(v, _gaps(w) * _mm(_t(v), g)), _t(v)))
    return impl_v


# -- qr (reduced, m >= n) ---------------------------------------------------------------------------


@overload(rt.qr_q)
def _qr_q(a):
    _need("np.linalg.qr", a)
    return lambda a: np.linalg.qr(_c(a))[0]


@overload(rt.qr_r)
def _qr_r(a):
    _need("np.linalg.qr", a)
    return lambda a: np.linalg.qr(_c(a))[1]


@overload(rt.qr_jvp, prefer_literal=True)
def _qr_jvp(t_, a, part):
    _need("np.linalg.qr", t_, a)
    want_q = _part(part) == 0

    def impl(t_, a, part):
        q, r = np.linalg.qr(_c(a))
        dx_rinv = _t(np.linalg.solve(_t(r), _t(t_)))  # t @ inv(r)
        qt = _mm(_t(q), dx_rinv)
        low = np.tril(qt, -1)
        do = low - _t(low)
        if want_q:
            return _mm(q, do - qt) + dx_rinv
        return _mm(qt - do, r)
    return impl


@overload(rt.qr_vjp, prefer_literal=True)
def _qr_vjp(g, a, part):
    _need("np.linalg.qr", g, a)
    want_q = _part(part) == 0

    def impl(g, a, part):
        q, r = np.linalg.qr(_c(a))
        if want_q:
            gq, gr = _c(g), np.zeros_like(r)
        else:
            gq, gr = np.zeros_like(q), _c(g)
        m = _mm(r, _t(gr)) - _mm(_t(gq), q)
        low = np.tril(m, -1)
        copyltu = low + _t(low) + np.eye(m.shape[0]) * m
        b = gq + _mm(q, copyltu)
        return _t(np.linalg.solve(r, _t(b)))  # b @ inv(r).T
    return impl
