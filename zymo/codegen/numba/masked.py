"""Triangle-masked updates of `codegen/idioms.py`'s NumPy statements, as compiled loops.

Contract. The Python programs of the "kernels" backend reach this module as `_tri_ops`
(`codegen/idioms.py` writes the calls, `pipeline._with_kernels` binds the name). Each function
takes the statement's mask `m` (`_rt.tri_mask(s)`, or its transpose: `lower` says which) and
does what the NumPy statement it stands for does, element for element:

    add(t, v, m, lower)        np.add(t, v, out=t, where=m)
    scale(t, c, m, lower)      np.multiply(t, c, out=t, where=m)
    div(t, c, m, lower)        np.divide(t, c, out=t, where=m)
    fill(t, c, m, lower)       np.copyto(t, c, where=m)            (c a number)
    mirror(t, v, m, lower)     np.copyto(t, v, where=m)            (a symmetric matrix's mirror)
    where(m, f, lower)         np.where(m, f, 0.0)

A loop over the triangle's elements (Numba, compiled once per signature and kept in Numba's
disk cache) runs them where its result is the NumPy statement's to the bit: `m` is the cached
`_rt.tri_mask(s)` itself (or its transpose), every array a 2-d `ndarray` of `m`'s shape, and

- `add`: `t` and `v` of one dtype (float32 or float64) and not overlapping: each element is
  `t + v` in that dtype, as NumPy computes it;
- `scale`, `div`, `fill`: `t` float64 (`fill`: or float32) and `c` a Python float or int (an
  int of at most 2**53 in magnitude) or a NumPy float64: `c` is the float64 NumPy converts it
  to, and a float32 `t` takes `c` rounded to float32 as NumPy's cast does;
- `mirror`: `t` and `v` of one dtype; either not overlapping, or `t = X[jbox, ibox].T` and
  `v = X[ibox, jbox]` of one matrix `X` (views of one base, strides swapped), as
  `codegen/triangles.split_mirror` writes the mirror store: the loop then makes the stores
  `X[j, i] = X[i, j]` of the loops it stands for, in their order (triangles.py proves they
  touch the triangle's mirror only, besides the diagonal's self-copies);
- `where`: `f` float32 or float64 (the result is a new C-ordered array of `f`'s dtype).

Elsewhere each runs the NumPy statement itself. Why: NumPy's masked ufunc loops take 1.6 ns an
element (covariance at n=60: 2.9 us a masked zero fill, 4.5 us a masked division, 4.4 us a
masked operand), where the triangle's loop takes 0.2-0.4 ns and the call about 1 us.
"""
from __future__ import annotations

import threading

import numba
import numpy as np

from ... import runtime as _rt

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)


ADD, SCALE, DIV, FILL, COPY = range(5)


@numba.njit(cache=True, error_model="numpy")  # IEEE division: x / 0.0 is inf or NaN, as NumPy's
def _apply(t, v, c, op, lower):
    """The masked update `op` of `t` over its lower (upper) triangle: `t + v`, `t * c`, `t / c`,
    `c`, `v`. One function and one signature per dtype (arrays of layout "A"): the first call
    of a process costs one load from Numba's cache, the first on a machine one compile."""
    s = t.shape[0]
    for i in range(s):
        lo, hi = (0, i + 1) if lower else (i, s)
        if op == ADD:
            for j in range(lo, hi):
                t[i, j] = t[i, j] + v[i, j]
        elif op == SCALE:
            for j in range(lo, hi):
                t[i, j] = t[i, j] * c
        elif op == DIV:
            for j in range(lo, hi):
                t[i, j] = t[i, j] / c
        elif op == FILL:
            for j in range(lo, hi):
                t[i, j] = c
        else:
            for j in range(lo, hi):
                t[i, j] = v[i, j]


_READY: set = set()
_LOCK = threading.Lock()


def _loop(t, v, c, op, lower):
    """`_apply` of arrays of one dtype, its signature compiled (or loaded) at the dtype's first
    call; other layouts convert to "A" rather than compile again."""
    dt = t.dtype
    if dt not in _READY:
        with _LOCK:
            if dt not in _READY:
                a = numba.from_dtype(dt)[:, :]
                _apply.disable_compile(False)
                _apply.compile((a, a, numba.float64, numba.int64, numba.boolean))
                _apply.disable_compile(True)
                _READY.add(dt)
    _apply(t, v, c, op, lower)


def _square(a, m, lower) -> bool:
    """Whether `a` is a 2-d ndarray of the mask's shape and `m` the cached triangle mask (or its
    transpose, by `lower`) of that side."""
    if type(a) is not np.ndarray or a.ndim != 2:
        return False
    s = a.shape[0]
    if a.shape[1] != s or m.shape != a.shape:
        return False
    return (m if lower else m.base) is _rt.tri_mask(s)


def _number(c):
    """`c` as the float64 NumPy converts it to in a float64 ufunc, or None where that is not
    a plain conversion (other types, ints beyond 2**53)."""
    tc = type(c)
    if tc is float or tc is np.float64:
        return float(c)
    if tc is int and -(2**53) <= c <= 2**53:
        return float(c)
    return None


def add(t, v, m, lower):
    if (_square(t, m, lower) and type(v) is np.ndarray and v.shape == t.shape and v.dtype == t.dtype
            and t.dtype in (_F64, _F32) and not np.may_share_memory(t, v)):
        _loop(t, v, 0.0, ADD, lower)
    else:
        np.add(t, v, out=t, where=m)


def scale(t, c, m, lower):
    x = _number(c)
    if x is not None and _square(t, m, lower) and t.dtype == _F64:
        _loop(t, t, x, SCALE, lower)
    else:
        np.multiply(t, c, out=t, where=m)


def div(t, c, m, lower):
    x = _number(c)
    if x is not None and _square(t, m, lower) and t.dtype == _F64:
        _loop(t, t, x, DIV, lower)
    else:
        np.divide(t, c, out=t, where=m)


def fill(t, c, m, lower):
    x = _number(c)
    if x is not None and _square(t, m, lower) and t.dtype in (_F64, _F32):
        _loop(t, t, x, FILL, lower)
    else:
        np.copyto(t, c, where=m)


def mirror(t, v, m, lower):
    if (_square(t, m, lower) and type(v) is np.ndarray and v.shape == t.shape and v.dtype == t.dtype
            and t.dtype in (_F64, _F32)
            and (not np.may_share_memory(t, v)
                 or (t.base is not None and t.base is v.base and t.strides == v.strides[::-1]))):
        _loop(t, v, 0.0, COPY, lower)
    else:
        np.copyto(t, v, where=m)


def where(m, f, lower):
    if _square(f, m, lower) and f.dtype in (_F64, _F32):
        out = np.zeros(f.shape, f.dtype)
        _loop(out, f, 0.0, COPY, lower)
        return out
    return np.where(m, f, 0.0)
