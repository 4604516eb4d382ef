"""Numba twins of the second-order helpers (`zymo/runtime/second.py`).

Contract: importing this module (the `twins` package does) registers, with
`numba.extending.overload` on each helper's own function object, Numba implementations of
`cholesky_vjp_dl` (the tangent of `cholesky_vjp` along the factor's tangent) and `norm_grad_dx`
(the tangent of `norm_grad`), with the restrictions of the helpers they differentiate
(`twins/linalg.py`, `twins/core.py`); the other helpers of `second.py` are Python only
(`zymo.runtime.registry`). Anything else fails at typing with a message the backend reports.
"""
from __future__ import annotations

import numpy as np
from numba.extending import overload, register_jitable

from zymo.runtime import second as srt

from ..np_shim import _none
from .core import _literal_ord, _runtime_ord
from .linalg import _c, _mm, _need, _phi, _t, _to_lower


@overload(srt.cholesky_vjp_dl)
def _cholesky_vjp_dl(t_, g, l):
    """Second order: the tangent of `cholesky_vjp(g, l)` along a tangent `t_` of the factor."""
    _need("np.linalg.cholesky", t_, g, l)

    def impl(t_, g, l):
        linv = np.linalg.inv(_c(l))
        s = _mm(_mm(_t(linv), _phi(_mm(_t(l), g))), linv)
        ds = (_mm(_mm(_t(linv), _phi(_mm(_t(t_), g))), linv) - _mm(_mm(_t(linv), _t(t_)), s)
              - _mm(_mm(s, t_), linv))
        return _to_lower(ds)
    return impl


@overload(srt.norm_grad_dx, prefer_literal=True)
def _norm_grad_dx(tx, tans, x, nrm, ord, axis, keepdims):
    """Second order: the tangent of `norm_grad` along `tx` (of x) or `tans` (of the norm), the
    other one None: (p - 1) (tx (|x|/a)^(p-2) / a - sign(x) (|x|/a)^(p-1) tans / a), 0 where the
    norm `a` is 0, and 0 for ord 1 and inf (piecewise constant)."""
    if _runtime_ord(x, ord, axis):
        exponent = lambda ord: 0.0 if ord == 1 or np.isinf(ord) else float(ord)  # noqa: E731
    else:
        o = _literal_ord(x, ord, axis)
        p = 0.0 if o is not None and o != "fro" and (o == 1 or np.isinf(o)) else (
            2.0 if o is None or o == "fro" else float(o))
        exponent = lambda ord: p  # noqa: E731
    exponent = register_jitable(exponent)  # 0.0: ord 1 or inf, piecewise constant
    if _none(tans):
        def impl_x(tx, tans, x, nrm, ord, axis, keepdims):
            p = exponent(ord)
            if nrm == 0 or p == 0.0:
                return np.zeros(x.shape)
            return (p - 1.0) * (tx * (np.abs(x) / nrm) ** (p - 2.0) / nrm)
        return impl_x

    def impl_nrm(tx, tans, x, nrm, ord, axis, keepdims):
        p = exponent(ord)
        if nrm == 0 or p == 0.0:
            return np.zeros(x.shape)
        return -(p - 1.0) * (np.sign(x) * (np.abs(x) / nrm) ** (p - 1.0) * (tans / nrm))
    return impl_nrm
