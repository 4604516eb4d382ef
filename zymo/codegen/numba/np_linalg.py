"""`np.linalg` as Numba-compiled derivative code sees it (`np_shim.linalg`).

Contract: every attribute is `numpy.linalg`'s own, except `norm`, wrapped with the same Python
behaviour and a Numba implementation registered with `numba.extending.overload`: Numba's own
types `np.linalg.norm(A, 'fro')` but raises "Invalid norm order for matrices" when it runs (its
matrix norms take numbers and None only). Here the string order `'fro'` of a matrix is its
order `None` (the same number, the square root of the sum of squares); of a vector it raises
NumPy's ValueError. Any other order is Numba's. With one constant axis (any rank, `keepdims`),
the vector norm of each row along it, of order None or a number (`_norm_along`).
"""
from __future__ import annotations

import numpy as _np
from numba import types as _t
from numba.extending import overload as _overload
from numba.extending import register_jitable as _jitable


def __getattr__(name: str):
    return getattr(_np.linalg, name)


def norm(x, ord=None, axis=None, keepdims=False):
    return _np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


def _is_none(t) -> bool:
    return t is None or isinstance(t, (_t.NoneType, _t.Omitted))


@_jitable
def _row_norm(r, ord):
    """NumPy's vector norm of order `ord` (a number; None is 2) of the 1-d `r`."""
    n = r.shape[0]
    if _np.isinf(ord):
        if n == 0:
            raise ValueError("zero-size array to reduction operation which has no identity")
        v = abs(float(r[0]))
        for j in range(1, n):
            w = abs(float(r[j]))
            if v != v:
                break
            if w != w or ((w > v) if ord > 0 else (w < v)):
                v = w
        return v
    s = 0.0
    if ord == 0:
        for j in range(n):
            s += 1.0 if r[j] != 0 else 0.0
        return s
    if ord == 1:
        for j in range(n):
            s += abs(float(r[j]))
        return s
    if ord == 2:
        for j in range(n):
            e = float(r[j])
            s += e * e
        return _np.sqrt(s)
    for j in range(n):
        s += abs(float(r[j])) ** ord
    return s ** (1.0 / ord)


def _rows_norm(dt):
    @_jitable
    def f(m, ord):
        out = _np.empty(m.shape[0], dt)
        for i in range(m.shape[0]):
            out[i] = _row_norm(m[i], ord)
        return out
    return f


def _norm_along(x, ord, axis, keepdims):
    """`norm(x, ord, axis=<one constant axis>, keepdims)`: the vector norm of each row along
    the axis (`np_shim`'s reductions by rows), any rank, `ord` None or a number (known at
    typing or at run time). None where this is not that case."""
    from .np_shim import _axes_of, _literal, _real_float, _Rows, _shaped

    ax = _literal(axis, "axis")
    one_axis = isinstance(ax, int) or isinstance(ax, tuple) and len(ax) == 1
    if not (isinstance(x, _t.Array) and x.ndim >= 1 and one_axis):
        return None
    dt = _real_float(x.dtype)
    if dt is None:
        return None
    if isinstance(ord, (_t.UnicodeType, _t.StringLiteral)):
        def vector(x, ord=None, axis=None, keepdims=False):
            raise ValueError("Invalid norm order for vectors.")
        return vector
    if not (_is_none(ord) or isinstance(ord, (_t.Integer, _t.Float))):
        return None
    rows = _Rows(x.ndim, _axes_of(axis, x, "np.linalg.norm"))
    red, shaped, flat = _rows_norm(dt), _shaped(rows, bool(_literal(keepdims, "keepdims"))), rows.flat
    if _is_none(ord):
        return lambda x, ord=None, axis=None, keepdims=False: shaped(red(flat(x), 2.0), x)
    return lambda x, ord=None, axis=None, keepdims=False: shaped(red(flat(x), ord), x)


@_overload(norm, prefer_literal=True)
def _ov_norm(x, ord=None, axis=None, keepdims=False):
    if not _is_none(axis):
        along = _norm_along(x, ord, axis, keepdims)
        if along is not None:
            return along
    if not (_is_none(axis) and (keepdims is False or _is_none(keepdims)
                                or isinstance(keepdims, _t.BooleanLiteral) and not keepdims.literal_value)):
        return None  # Numba's norm takes no axis: its typing error, at the user's line
    if isinstance(ord, (_t.UnicodeType, _t.StringLiteral)):
        if not isinstance(x, _t.Array) or x.ndim != 2:
            def vector(x, ord=None, axis=None, keepdims=False):
                raise ValueError("Invalid norm order for vectors.")
            return vector

        def frobenius(x, ord=None, axis=None, keepdims=False):
            if ord != "fro":
                raise ValueError("Invalid norm order for matrices.")
            return _np.linalg.norm(x)
        return frobenius
    if _is_none(ord):
        return lambda x, ord=None, axis=None, keepdims=False: _np.linalg.norm(x)
    return lambda x, ord=None, axis=None, keepdims=False: _np.linalg.norm(x, ord)
