"""Derivatives of the runtime helpers themselves: what second order needs (`zymo.runtime`
re-exports them as `_rt.<name>`).

Contract: `zymo.hvp`/`zymo.hessian` differentiate zymo's generated reverse program in
forward mode, so a helper that program calls (`_rt.cholesky_vjp`, `_rt.norm_grad`, ...)
needs a tangent rule of its own (`rules/runtime_rules.py`) and, for the rule tests, an adjoint.
The rules' bodies are single expressions; the few that need several statements call the
functions here. Each is a pure function of NumPy arrays, named after the helper it
differentiates: `<helper>_d<param>` is the tangent along a tangent of `<param>`,
`<helper>_t<param>` the adjoint with respect to `<param>` (the transpose). Shapes and
conditions are those of the helper differentiated (2-d matrices for the linear algebra).
"""
from __future__ import annotations

import numpy as np

from .core import expand_reduced, norm_grad

__all__ = ["cholesky_vjp_dl", "cholesky_vjp_tl", "norm_grad_dx", "norm_grad_tx", "cumsum_vjp_tg",
           "split_first_tg", "split_last_tg"]


def _mT(a):
    return np.swapaxes(a, -1, -2)


def _sym_lower(t):
    return np.tril(t) + _mT(np.tril(t, -1))


def _to_lower(s):
    return np.tril(s) + np.tril(_mT(s), -1)


def _phi(x):
    return np.tril(x) - 0.5 * np.eye(x.shape[-1], dtype=x.dtype) * x


# -- cholesky_vjp(g, L) = to_lower(S), S = Li^T phi(L^T g) Li, Li = inv(L) -------------------------


def _chol_s(g, ans):
    li = np.linalg.inv(ans)
    return li, _mT(li) @ _phi(_mT(ans) @ g) @ li


def cholesky_vjp_dl(t, g, ans):
    """Tangent of `cholesky_vjp(g, ans)` along a tangent `t` of the factor `ans` (d Li = -Li t Li)."""
    li, s = _chol_s(g, ans)
    ds = -(_mT(li) @ _mT(t) @ s) + _mT(li) @ _phi(_mT(t) @ g) @ li - s @ t @ li
    return _to_lower(ds)


def cholesky_vjp_tl(gb, g, ans):
    """Adjoint of `cholesky_vjp(g, ans)` with respect to the factor `ans` (the transpose of
    `cholesky_vjp_dl`)."""
    li, s = _chol_s(g, ans)
    gs = _sym_lower(gb)
    return -(s @ _mT(gs) @ _mT(li)) + g @ _mT(_phi(li @ gs @ _mT(li))) - _mT(s) @ gs @ _mT(li)


# -- norm_grad(x, ans, ord, axis, keepdims): d norm / d x ----------------------------------------------


def _p(ord):
    """The exponent of the vector p-norm whose gradient has a derivative (None: piecewise constant)."""
    if ord is None or ord == "fro" or ord == 2:
        return 2.0
    if np.isinf(ord) or ord == 1:
        return None  # sign(x) (times the tie mask): derivative 0 away from kinks
    return float(ord)


def _norm_parts(x, ans, ord, axis, keepdims):
    a = expand_reduced(ans, x, axis, keepdims)
    safe = np.where(a == 0, 1.0, a)
    return a, safe, norm_grad(x, ans, ord, axis, keepdims)


def norm_grad_dx(tx, tans, x, ans, ord, axis, keepdims):
    """Tangent of `norm_grad` along `tx` (of x) and `tans` (of the norm `ans`); None: no tangent.
    With n = sign(x) (|x|/a)^(p-1): dn = (p-1) (tx (|x|/a)^(p-2) / a - n ta / a); 0 where a == 0."""
    p = _p(ord)
    if p is None:
        return np.zeros(np.shape(x), dtype=np.result_type(x, 1.0))
    a, safe, n = _norm_parts(x, ans, ord, axis, keepdims)
    out = np.zeros(np.shape(x), dtype=np.result_type(x, 1.0))
    if tx is not None:
        out = out + tx * np.power(np.abs(x) / safe, p - 2.0) / safe
    if tans is not None:
        out = out - n * expand_reduced(tans, x, axis, keepdims) / safe
    return np.where(a == 0, 0.0, (p - 1.0) * out).astype(out.dtype)


def norm_grad_tx(gb, x, ans, ord, axis, keepdims, wrt):
    """Adjoint of `norm_grad` with respect to x (wrt 0) or the norm `ans` (wrt 1)."""
    p = _p(ord)
    if p is None:
        return np.zeros(np.shape(x if wrt == 0 else ans), dtype=np.result_type(x, 1.0))
    a, safe, n = _norm_parts(x, ans, ord, axis, keepdims)
    gb = np.where(a == 0, 0.0, gb)
    if wrt == 0:
        return (p - 1.0) * gb * np.power(np.abs(x) / safe, p - 2.0) / safe
    return -(p - 1.0) * np.sum(gb * n / safe, axis=axis, keepdims=keepdims)


# -- linear helpers: transposes ------------------------------------------------------------------------


def cumsum_vjp_tg(gb, g, axis):
    """Adjoint of `cumsum_vjp(g, x, axis)` with respect to `g`: a forward cumulative sum."""
    return np.reshape(np.cumsum(gb, axis=axis), np.shape(g))


def _place(gb, g, axis, first):
    if axis is None:
        out = np.zeros(np.size(g), dtype=np.result_type(gb, g))
        k = np.size(gb)
        out[:k] = np.ravel(gb) if first else 0.0
        if not first:
            out[np.size(g) - k:] = np.ravel(gb)
        return out
    out = np.zeros(np.shape(g), dtype=np.result_type(gb, g))
    view = np.moveaxis(out, axis, 0)
    k = np.shape(gb)[axis]
    src = np.moveaxis(gb, axis, 0)
    if first:
        view[:k] = src
    else:
        view[view.shape[0] - k:] = src
    return out


def split_first_tg(gb, g, axis):
    """Adjoint of `split_first(g, a, axis)` with respect to `g`: `gb` in the leading part."""
    return _place(gb, g, axis, True)


def split_last_tg(gb, g, axis):
    """Adjoint of `split_last(g, b, axis)` with respect to `g`: `gb` in the trailing part."""
    return _place(gb, g, axis, False)
