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
    move(t, v, m, lower)       w = v.copy(); np.copyto(v, 0.0, where=m);
                               np.add(t, w, out=t, where=m)        (the mirror's adjoint)
    where(m, f, lower)         np.where(m, f, 0.0)

A loop over the triangle's elements (Numba: one signature, float64 arrays of layout "A",
compiled once on a machine and then loaded from Numba's disk cache) runs them where its result
is the NumPy statement's: `m` is the cached `_rt.tri_mask(s)` itself (or exactly its
transpose), every array a float64 `ndarray` of `m`'s shape (a writable one where the loop
writes it, and one whose elements are distinct memory: NumPy copies a target overlapping
itself first), and

- `add`: `t` and `v` not overlapping;
- `scale`, `div`, `fill`: `c` a Python float, an int of at most 2**53 in magnitude, or a
  NumPy float64: the float64 NumPy converts it to;
- `mirror`, `move`: `t` and `v` not overlapping, or the two views of one matrix `X` that
  `codegen/triangles.split_mirror` writes: the mirror store `mirror(X[jbox, ibox].T, X[ibox,
  jbox], ...)` and its adjoint `move(X[ibox, jbox], X[jbox, ibox].T, ...)` over the boxes of
  triangles.py's table (the box of `j` starting where `i`'s does, or one after it for an
  upper strict triangle, one before it for a lower one), `X` a C- or F-contiguous float64
  matrix both views are slices of (checked from their strides and addresses: each square lies
  inside `X`). triangles.py proves that the elements one view reads and the other writes are
  disjoint besides the diagonal's, where `mirror` copies an element to itself and `move` reads
  it, sets 0.0 and adds, as the statements do;
- `where`: the result laid out as NumPy's (C order, or F order where `m` is the transposed
  mask and `f` column-major), so that products of it sum in the same order.

Every element is updated on its own (from its own operands), so the loop may visit them in
any order: a column-major `t` runs as its transpose's other triangle, walking memory in order.
The numbers are IEEE arithmetic's, as NumPy's, with two differences of compiled code (the
Numba backend's, docs/ir.md): no floating-point warnings and no `np.errstate` errors, and
where both operands of `+` or `*` are NaN, which NaN's payload the result keeps (NumPy's own
SIMD and scalar loops differ there too). Elsewhere each runs the NumPy statement itself.

Why: NumPy's masked ufunc loops take 1.6 ns an element (covariance at n=60: 2.9 us a masked
zero fill, 4.5 us a masked division, 4.4 us a masked operand), where the triangle's loop
takes 0.2-0.4 ns and the call about 1 us.
"""
from __future__ import annotations

import threading

import numba
import numpy as np

from ... import runtime as _rt

_F64 = np.dtype(np.float64)


ADD, SCALE, DIV, FILL, COPY, MOVE = range(6)


@numba.njit(cache=True, error_model="numpy")  # IEEE division: x / 0.0 is inf or NaN, as NumPy's
def _apply(t, v, c, op, lower):
    """The masked update `op` of `t` over its lower (upper) triangle: `t + v`, `t * c`, `t / c`,
    `c`, `v`, or (MOVE) `t + v` with `v` read and then set to 0.0 first. One function and one
    signature (arrays of layout "A"): the first call of a process costs one load from Numba's
    cache, the first on a machine one compile."""
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
        elif op == COPY:
            for j in range(lo, hi):
                t[i, j] = v[i, j]
        else:
            for j in range(lo, hi):
                x = v[i, j]
                v[i, j] = 0.0
                t[i, j] = t[i, j] + x


_READY: list = []
_LOCK = threading.Lock()
_ARRAY = numba.float64[:, :]


@numba.njit(cache=True)
def _delta(a, b):
    """The address of `a`'s first element less `b`'s, in bytes (signed)."""
    return np.intp(a.ctypes.data) - np.intp(b.ctypes.data)


def _ready() -> None:
    """`_apply` and `_delta`, each its one signature compiled (or loaded) at the first call and
    compiling then disabled for good: arrays of other layouts convert to "A"."""
    with _LOCK:
        if not _READY:
            _apply.compile((_ARRAY, _ARRAY, numba.float64, numba.int64, numba.boolean))
            _apply.disable_compile()
            _delta.compile((_ARRAY, _ARRAY))
            _delta.disable_compile()
            _READY.append(True)


def _loop(t, v, c, op, lower):
    """`_apply`; a column-major `t` runs as its transpose's other triangle, so that the inner
    loop walks memory in order (module contract)."""
    if not _READY:
        _ready()
    if abs(t.strides[0]) < abs(t.strides[1]):
        t, v, lower = t.T, v.T, not lower
    _apply(t, v, c, op, lower)


def _square(a, m, lower) -> bool:
    """Whether `a` is a float64 2-d ndarray of the mask's shape and `m` the cached triangle mask
    of that side (`lower`) or exactly its transpose."""
    if type(a) is not np.ndarray or a.ndim != 2 or a.dtype != _F64:
        return False
    s = a.shape[0]
    if a.shape[1] != s or m.shape != a.shape:
        return False
    tri = _rt.tri_mask(s)
    if lower:
        return m is tri
    return m.base is tri and m.strides == tri.strides[::-1]


def _number(c):
    """`c` as the float64 NumPy converts it to in a float64 ufunc, or None where that is not
    a plain conversion (other types, ints beyond 2**53)."""
    tc = type(c)
    if tc is float or tc is np.float64:
        return float(c)
    if tc is int and -(2**53) <= c <= 2**53:
        return float(c)
    return None


def _operand(v, t) -> bool:
    """Whether `v` is a writable float64 ndarray of `t`'s shape (the loop's signature takes
    writable arrays only)."""
    return type(v) is np.ndarray and v.shape == t.shape and v.dtype == _F64 and v.flags.writeable


def _separate(a) -> bool:
    """Whether the elements of the square `a` are distinct memory (rows, or columns, apart): a
    target NumPy would copy first (`out=` overlapping itself) runs as NumPy's statement."""
    s = a.shape[0]
    r, c = abs(a.strides[0]), abs(a.strides[1])
    return s <= 1 or (c >= 8 and r >= s * c) or (r >= 8 and c >= s * r)


def _box(a, x):
    """The (row, column) of `x` where the square view `a` of the contiguous matrix `x` (with
    `x`'s strides) starts, or None where the square does not lie inside `x`."""
    k, rest = divmod(_delta(a, x), 8)
    if rest or k < 0:
        return None
    n0, n1 = x.shape
    r, c = divmod(k, n1) if x.flags.c_contiguous else divmod(k, n0)[::-1]
    s = a.shape[0]
    if r + s > n0 or c + s > n1:
        return None
    return r, c


def _mirrored(a, b, lower) -> bool:
    """Whether `a = X[ibox, jbox]` and `b = X[jbox, ibox].T` of one contiguous float64 matrix `X`
    over the boxes of `codegen/triangles.py` (module contract), or arrays that do not overlap."""
    if not np.may_share_memory(a, b):
        return True
    x = a.base
    if (type(x) is not np.ndarray or b.base is not x or x.ndim != 2 or x.dtype != _F64
            or not (x.flags.c_contiguous or x.flags.f_contiguous)
            or a.strides != x.strides or b.strides != x.strides[::-1]):
        return False
    if not _READY:
        _ready()
    at, bt = _box(a, x), _box(b.T, x)
    if at is None or bt is None or bt != at[::-1]:
        return False
    d = at[1] - at[0]  # where j's box starts less where i's does
    return d == 0 or d == (-1 if lower else 1)


def add(t, v, m, lower):
    if (_square(t, m, lower) and t.flags.writeable and _separate(t) and _operand(v, t)
            and not np.may_share_memory(t, v)):
        _loop(t, v, 0.0, ADD, lower)
    else:
        np.add(t, v, out=t, where=m)


def scale(t, c, m, lower):
    x = _number(c)
    if x is not None and _square(t, m, lower) and t.flags.writeable and _separate(t):
        _loop(t, t, x, SCALE, lower)
    else:
        np.multiply(t, c, out=t, where=m)


def div(t, c, m, lower):
    x = _number(c)
    if x is not None and _square(t, m, lower) and t.flags.writeable and _separate(t):
        _loop(t, t, x, DIV, lower)
    else:
        np.divide(t, c, out=t, where=m)


def fill(t, c, m, lower):
    x = _number(c)
    if x is not None and _square(t, m, lower) and t.flags.writeable and _separate(t):
        _loop(t, t, x, FILL, lower)
    else:
        np.copyto(t, c, where=m)


def mirror(t, v, m, lower):
    """`np.copyto(t, v, where=m)`: the mirror store, `t = X[jbox, ibox].T`, `v = X[ibox, jbox]`."""
    if (_square(t, m, lower) and t.flags.writeable and _separate(t) and _operand(v, t)
            and _mirrored(v, t, lower)):
        _loop(t, v, 0.0, COPY, lower)
    else:
        np.copyto(t, v, where=m)


def move(t, v, m, lower):
    """`w = v.copy(); np.copyto(v, 0.0, where=m); np.add(t, w, out=t, where=m)`: the adjoint of
    the mirror store, `t = X[ibox, jbox]`, `v = X[jbox, ibox].T` (on the diagonal one element:
    0.0, then 0.0 + w, as the statements give)."""
    if (_square(t, m, lower) and t.flags.writeable and _separate(t) and _operand(v, t) and _separate(v)
            and _mirrored(t, v, lower)):
        _loop(t, v, 0.0, MOVE, lower)
    else:
        w = v.copy()
        np.copyto(v, 0.0, where=m)
        np.add(t, w, out=t, where=m)


def where(m, f, lower):
    if _square(f, m, lower) and min(f.strides) > 0:
        rows = f.strides[0] > f.strides[1]
        if lower or rows or f.strides[0] < f.strides[1]:
            out = np.zeros(f.shape, order="C" if lower or rows else "F")
            _loop(out, f if f.flags.writeable else f.copy(), 0.0, COPY, lower)
            return out
    return np.where(m, f, 0.0)
