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
    sym_where(m, f, lower)     w + w.T, w = np.where(m, f, 0.0)   (a symmetric matrix from a triangle)

and the pairs of them that `codegen/triangles.py` finds one after the other on one target and
mask, each run as one pass (every element takes both updates before the next one, which gives
the two passes' result because each element's updates read only that element and its mirror):

    assign(t, v, m, lower)     fill(t, 0.0, m, lower); add(t, v, m, lower)
    div_mirror(t, v, c, m, lower)  div(v, c, m, lower); mirror(t, v, m, lower)
    move_div(t, v, c, m, lower)    move(t, v, m, lower); div(t, c, m, lower)

A loop over the triangle's elements (`_run`: one Numba function with one signature, float64
arrays of layout "A", compiled once on a machine and then loaded from Numba's disk cache; it
checks what the Python side does not, from shapes, strides and addresses, and writes nothing
where a check fails) runs them where its result is the NumPy statement's: `m` is the cached
`_rt.tri_mask(s)` itself (or exactly its transpose), every array a float64 `ndarray` of `m`'s
shape (a writable one where the loop writes it, and one whose elements are distinct memory:
NumPy copies a target overlapping itself first), and

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
zero fill, 4.4 us a masked division, 4.5 us a masked operand, 8.0 us the adjoint mirror's
three statements), where a call here takes 2.2, 3.4, 3.7 and 3.0 us: about 1 us of Python
checks, 0.5 us of Numba's dispatch and the compiled checks, then the loop, which LLVM
vectorizes.
"""
from __future__ import annotations

import threading

import numba
import numpy as np

from ... import runtime as _rt

_F64 = np.dtype(np.float64)


ADD, SCALE, DIV, FILL, COPY, MOVE, SET, DIVCOPY, MOVEDIV, SYM = range(10)


@numba.njit(cache=True, error_model="numpy")  # IEEE division: x / 0.0 is inf or NaN, as NumPy's
def _run(t, v, x, m, c, op, lower):
    """The masked update `op` of `t` over its lower (upper) triangle (`t + v`, `t * c`, `t / c`,
    `c`, `v`, or MOVE: `t + v` with `v` read and then set to 0.0 first; the pairs SET: `0.0 + v`,
    DIVCOPY: `v / c` into `v` and `t`, MOVEDIV: MOVE's `t + v`, then `/ c`; SYM: `t`, all of it,
    `w + w.T` for `w` the triangle of `v`, zeros elsewhere) where the module
    contract allows it, returning whether it ran; nothing is written otherwise. Checks the
    shapes, `m`'s layout (C-ordered for the lower triangle, its transpose for the upper one: the
    caller checks that `m` is the cached mask or a view of it), that the targets' elements are
    distinct memory (rows, or columns, apart), that `v` does not overlap `t` (or, for COPY and
    MOVE, that both are the mirror's views, slices of the contiguous `x`). Written as one
    function (a compile of 1.5 s as six small functions, 0.7 s as one; zymo's own pipeline
    compiles it in 0.46 s but its calls took 0.35 us longer). One signature (arrays of layout
    "A"): the first call of a process costs one load from Numba's cache, the first on a machine
    the compile."""
    s = t.shape[0]
    if t.shape[1] != s or v.shape[0] != s or v.shape[1] != s or m.shape[0] != s or m.shape[1] != s:
        return False
    if s > 1 and lower and (m.strides[0] != s or m.strides[1] != 1):
        return False
    if s > 1 and not lower and (m.strides[0] != 1 or m.strides[1] != s):
        return False
    for k in range(2 if op == MOVE or op == MOVEDIV or op == DIVCOPY else 1):  # written: elements distinct memory
        a = t if k == 0 else v
        r, q = abs(a.strides[0]), abs(a.strides[1])
        if not (s <= 1 or (q >= 8 and r >= s * q) or (r >= 8 and q >= s * r)):
            return False
    if s > 1 and op == SYM and (t.strides[0] != s * 8 or t.strides[1] != 8):
        return False  # a new C-ordered matrix, written whole
    if s > 0 and op != SCALE and op != DIV and op != FILL:
        tlo = thi = np.intp(t.ctypes.data)  # the bytes t and v reach: [lo, hi)
        vlo = vhi = np.intp(v.ctypes.data)
        for d in range(2):
            step = (s - 1) * t.strides[d]
            if step < 0:
                tlo += step
            else:
                thi += step
            step = (s - 1) * v.strides[d]
            if step < 0:
                vlo += step
            else:
                vhi += step
        if tlo < vhi + 8 and vlo < thi + 8:  # overlapping: only the mirror's two views
            if op == ADD or op == SET or op == SYM:
                return False
            n0, n1 = x.shape
            rows = x.strides[0] == n1 * 8 and x.strides[1] == 8
            cols = x.strides[0] == 8 and x.strides[1] == n0 * 8
            own, other = t, v  # X[ibox, jbox], X[jbox, ibox].T
            if op == COPY or op == DIVCOPY:
                own, other = v, t
            if not (rows or cols) or own.strides[0] != x.strides[0] or own.strides[1] != x.strides[1]:
                return False
            if other.strides[0] != x.strides[1] or other.strides[1] != x.strides[0]:
                return False
            oo = np.intp(own.ctypes.data) - np.intp(x.ctypes.data)  # own, other.T: where in x they start
            ot = np.intp(other.ctypes.data) - np.intp(x.ctypes.data)
            if oo < 0 or ot < 0 or oo % 8 or ot % 8:
                return False
            oo //= 8
            ot //= 8
            if rows:
                r0, c0, r1, c1 = oo // n1, oo % n1, ot // n1, ot % n1
            else:
                r0, c0, r1, c1 = oo % n0, oo // n0, ot % n0, ot // n0
            if r0 + s > n0 or c0 + s > n1 or r1 + s > n0 or c1 + s > n1 or r1 != c0 or c1 != r0:
                return False
            d = c0 - r0  # where j's box starts less where i's does
            if d != 0 and d != (-1 if lower else 1):
                return False
    if op == SYM:  # the triangle's elements and their mirrors: `w + w.T` element for element
        for i in range(s):
            lo = 0 if lower else i + 1
            hi = i if lower else s
            for j in range(lo, hi):
                y = v[i, j]
                t[i, j] = y + 0.0
                t[j, i] = 0.0 + y
            t[i, i] = v[i, i] + v[i, i]
        return True
    if abs(t.strides[0]) < abs(t.strides[1]):  # column by column: the transposes' other triangle
        t, v, lower = t.T, v.T, not lower
    # row by row, the operation chosen once per row (each inner loop one operation), unsigned
    # indices (which Numba does not wrap round) so that LLVM vectorizes: a fill 3x at n=200
    n = np.uint64(s)
    for i in range(n):
        lo = np.uint64(0) if lower else i
        hi = i + np.uint64(1) if lower else n
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
        elif op == MOVE:
            for j in range(lo, hi):
                y = v[i, j]
                v[i, j] = 0.0
                t[i, j] = t[i, j] + y
        elif op == SET:
            for j in range(lo, hi):
                t[i, j] = 0.0 + v[i, j]
        elif op == DIVCOPY:  # on the diagonal `t` and `v` are one element: written twice alike
            for j in range(lo, hi):
                y = v[i, j] / c
                v[i, j] = y
                t[i, j] = y
        else:
            for j in range(lo, hi):
                y = v[i, j]
                v[i, j] = 0.0
                t[i, j] = (t[i, j] + y) / c
    return True


_READY: list = []
_LOCK = threading.Lock()
_F8 = numba.float64[:, :]
_MASK = numba.types.Array(numba.boolean, 2, "A", readonly=True)  # `_rt.tri_mask`'s, read-only


def _loop(t, v, x, m, c, op, lower) -> bool:
    """`_run`, its one signature compiled (or loaded) at the first call and compiling then
    disabled for good: arrays of other layouts convert to "A"."""
    if not _READY:
        with _LOCK:
            if not _READY:
                _run.compile((_F8, _F8, _F8, _MASK, numba.float64, numba.int64, numba.boolean))
                _run.disable_compile()
                _READY.append(True)
    return _run(t, v, x, m, c, op, lower)


def _target(t, m, lower) -> bool:
    """Whether `t` is a writable float64 matrix and `m` the cached triangle mask of its side
    (`lower`) or a view of it (`_run` checks it is the transpose)."""
    if type(t) is not np.ndarray or t.ndim != 2 or t.dtype != _F64 or not t.flags.writeable:
        return False
    if type(m) is not np.ndarray or m.dtype != np.bool_:
        return False
    tri = _rt.tri_mask(t.shape[0])
    return m is tri if lower else m.base is tri


def _operand(v) -> bool:
    """Whether `v` is a writable float64 matrix (the loop's signature takes writable arrays)."""
    return type(v) is np.ndarray and v.ndim == 2 and v.dtype == _F64 and v.flags.writeable


def _number(c):
    """`c` as the float64 NumPy converts it to in a float64 ufunc, or None where that is not
    a plain conversion (other types, ints beyond 2**53)."""
    tc = type(c)
    if tc is float or tc is np.float64:
        return float(c)
    if tc is int and -(2**53) <= c <= 2**53:
        return float(c)
    return None


def _base(a, b):
    """The contiguous float64 matrix two mirror views may be slices of (`a`'s base), else `a`."""
    x = a.base
    return x if type(x) is np.ndarray and x.ndim == 2 and x.dtype == _F64 and x.flags.writeable else a


def add(t, v, m, lower):
    if not (_target(t, m, lower) and _operand(v) and _loop(t, v, t, m, 0.0, ADD, lower)):
        np.add(t, v, out=t, where=m)


def scale(t, c, m, lower):
    x = _number(c)
    if x is None or not (_target(t, m, lower) and _loop(t, t, t, m, x, SCALE, lower)):
        np.multiply(t, c, out=t, where=m)


def div(t, c, m, lower):
    x = _number(c)
    if x is None or not (_target(t, m, lower) and _loop(t, t, t, m, x, DIV, lower)):
        np.divide(t, c, out=t, where=m)


def fill(t, c, m, lower):
    x = _number(c)
    if x is None or not (_target(t, m, lower) and _loop(t, t, t, m, x, FILL, lower)):
        np.copyto(t, c, where=m)


def mirror(t, v, m, lower):
    """`np.copyto(t, v, where=m)`: the mirror store, `t = X[jbox, ibox].T`, `v = X[ibox, jbox]`."""
    if not (_target(t, m, lower) and _operand(v) and _loop(t, v, _base(v, t), m, 0.0, COPY, lower)):
        np.copyto(t, v, where=m)


def move(t, v, m, lower):
    """`w = v.copy(); np.copyto(v, 0.0, where=m); np.add(t, w, out=t, where=m)`: the adjoint of
    the mirror store, `t = X[ibox, jbox]`, `v = X[jbox, ibox].T` (on the diagonal one element:
    0.0, then 0.0 + w, as the statements give)."""
    if not (_target(t, m, lower) and _operand(v) and _loop(t, v, _base(t, v), m, 0.0, MOVE, lower)):
        w = v.copy()
        np.copyto(v, 0.0, where=m)
        np.add(t, w, out=t, where=m)


def assign(t, v, m, lower):
    """`fill(t, 0.0, m, lower); add(t, v, m, lower)` in one pass: `t = 0.0 + v` on the triangle
    (a -0.0 of `v` becomes 0.0, as the two statements give)."""
    if not (_target(t, m, lower) and _operand(v) and _loop(t, v, t, m, 0.0, SET, lower)):
        np.copyto(t, 0.0, where=m)
        np.add(t, v, out=t, where=m)


def div_mirror(t, v, c, m, lower):
    """`div(v, c, m, lower); mirror(t, v, m, lower)` in one pass: `v` divided by `c` on the
    triangle and copied to its mirror `t` (`t = X[jbox, ibox].T`, `v = X[ibox, jbox]`)."""
    x = _number(c)
    if x is None or not (_target(t, m, lower) and _target(v, m, lower)
                         and _loop(t, v, _base(v, t), m, x, DIVCOPY, lower)):
        div(v, c, m, lower)
        mirror(t, v, m, lower)


def move_div(t, v, c, m, lower):
    """`move(t, v, m, lower); div(t, c, m, lower)` in one pass: the mirror's adjoint, then the
    division of the triangle (`t = X[ibox, jbox]`, `v = X[jbox, ibox].T`)."""
    x = _number(c)
    if x is None or not (_target(t, m, lower) and _operand(v) and _loop(t, v, _base(t, v), m, x, MOVEDIV, lower)):
        move(t, v, m, lower)
        div(t, c, m, lower)


def sym_where(m, f, lower):
    """`w + w.T` for `w = where(m, f, lower)`: the symmetric matrix whose triangle is `f`'s,
    doubled on the diagonal, each element the sum NumPy computes (`y + 0.0`, `0.0 + y`, `d + d`),
    C-ordered as NumPy's sum of a C-ordered `w` and its transpose."""
    if type(f) is np.ndarray and f.ndim == 2 and f.dtype == _F64 and f.shape[0] == f.shape[1]:
        out = np.empty(f.shape)
        if _target(out, m, lower) and _loop(out, f if f.flags.writeable else f.copy(), out, m, 0.0, SYM, lower):
            return out
    w = where(m, f, lower)
    return w + w.T


def where(m, f, lower):
    if type(f) is np.ndarray and f.ndim == 2 and f.dtype == _F64 and min(f.strides, default=0) > 0:
        rows = f.strides[0] > f.strides[1]
        if lower or rows or f.strides[0] < f.strides[1]:
            out = np.zeros(f.shape, order="C" if lower or rows else "F")
            if _target(out, m, lower) and _loop(out, f if f.flags.writeable else f.copy(), out, m, 0.0, COPY, lower):
                return out
    return np.where(m, f, 0.0)
