"""`np.linalg` as Numba-compiled derivative code sees it (`np_shim.linalg`).

Contract: every attribute is `numpy.linalg`'s own, except `norm`, wrapped with the same Python
behaviour and a Numba implementation registered with `numba.extending.overload`: Numba's own
types `np.linalg.norm(A, 'fro')` but raises "Invalid norm order for matrices" when it runs (its
matrix norms take numbers and None only). Here the string order `'fro'` of a matrix is its
order `None` (the same number, the square root of the sum of squares); of a vector it raises
NumPy's ValueError. Any other order is Numba's.
"""
from __future__ import annotations

import numpy as _np
from numba import types as _t
from numba.extending import overload as _overload


def __getattr__(name: str):
    return getattr(_np.linalg, name)


def norm(x, ord=None, axis=None, keepdims=False):
    return _np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


def _is_none(t) -> bool:
    return t is None or isinstance(t, (_t.NoneType, _t.Omitted))


@_overload(norm)
def _ov_norm(x, ord=None, axis=None, keepdims=False):
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
