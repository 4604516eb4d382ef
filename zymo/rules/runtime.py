"""Helpers that generated derivative code calls (imported there as `_rt`).

Contract: small pure functions over NumPy values and Python scalars, written in
the subset Numba compiles (a later issue compiles them), each doing one thing the
rules or transforms need: sum an adjoint back to an operand's shape, the adjoints
of matrix products and reductions, trip counts of reversed loops.
"""
from __future__ import annotations

import numpy as np


def unbroadcast(g, x):
    """Sum `g` (an adjoint of a broadcast result) back to the shape of operand `x`."""
    if np.ndim(x) == 0:
        return np.sum(g) if np.ndim(g) else g
    g = np.asarray(g)
    shape = np.shape(x)
    if g.shape == shape:
        return g
    if g.ndim == 0:
        return np.broadcast_to(g, shape)
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g


def as_tangent(t, y):
    """A fresh array with `y`'s shape and dtype holding the tangent `t` (broadcast)."""
    out = np.empty_like(y)
    out[...] = t
    return out


def as_shape(t, y):
    """`t` if it already has `y`'s shape and dtype (a fresh temporary), else a broadcast copy."""
    if isinstance(t, np.ndarray) and t.shape == np.shape(y) and t.dtype == np.result_type(y):
        return t
    return as_tangent(t, y)


def expand_reduced(g, x, axis, keepdims):
    """Broadcast the adjoint `g` of a reduction of `x` over `axis` back to `x`'s shape."""
    if axis is None:
        return np.broadcast_to(np.asarray(g), np.shape(x))
    if not keepdims:
        axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
        axes = tuple(a % np.ndim(x) for a in axes)
        g = np.expand_dims(g, axes)
    return np.broadcast_to(g, np.shape(x))


def reduced_count(x, ans):
    """How many elements of `x` each element of the reduction `ans` averages."""
    return np.size(x) // max(np.size(ans), 1)


def matmul_vjp_a(g, a, b):
    """Adjoint of `a` in `a @ b` (NumPy's 1-d promotion rules)."""
    if np.ndim(b) == 1:
        if np.ndim(a) == 1:
            return g * b
        return np.multiply.outer(g, b)
    if np.ndim(a) == 1:
        return b @ g
    return unbroadcast(g @ np.swapaxes(b, -1, -2), a)


def matmul_vjp_b(g, a, b):
    """Adjoint of `b` in `a @ b` (NumPy's 1-d promotion rules)."""
    if np.ndim(a) == 1:
        if np.ndim(b) == 1:
            return g * a
        return np.multiply.outer(a, g)
    if np.ndim(b) == 1:
        return unbroadcast(np.swapaxes(a, -1, -2) @ g, b) if np.ndim(a) > 2 else a.T @ g
    return unbroadcast(np.swapaxes(a, -1, -2) @ g, b)


def dot_vjp_a(g, a, b):
    """Adjoint of `a` in `np.dot(a, b)` (a 0-d operand makes it a product)."""
    _dot_check(a, b)
    if np.ndim(a) == 0:
        return np.sum(g * b)
    if np.ndim(b) == 0:
        return g * b
    return matmul_vjp_a(g, a, b)


def dot_vjp_b(g, a, b):
    """Adjoint of `b` in `np.dot(a, b)`."""
    _dot_check(a, b)
    if np.ndim(b) == 0:
        return np.sum(g * a)
    if np.ndim(a) == 0:
        return g * a
    return matmul_vjp_b(g, a, b)


def _dot_check(a, b):
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise NotImplementedError("np.dot of arrays with more than 2 dimensions is not differentiable yet; "
                                  "use np.matmul")


def zeros_list(lst):
    """A zero adjoint of a list of arrays: one zero array per element."""
    return [np.zeros_like(a) for a in lst]


def grow(buf, need=0):
    """`buf` copied into a buffer at least twice as long and of at least `need` entries."""
    out = np.empty(max(2 * buf.shape[0] + 1, need), buf.dtype)
    out[: buf.shape[0]] = buf
    return out


def reuse_buffer(tape, slot, size, dtype):
    """Slot `slot` of a tape passed back in, if it can hold `size` entries; else a new buffer."""
    if tape is not None:
        buf = tape[slot]
        if buf.dtype == dtype and buf.shape[0] >= size:
            return buf
    return np.empty(max(size, 1), dtype)


def reuse_list(tape, slot):
    """A list cache from a tape passed back in (emptied), or a new one."""
    if tape is not None:
        lst = tape[slot]
        lst.clear()
        return lst
    return []


def trip(start, stop, step):
    """The number of iterations of `range(start, stop, step)`."""
    if step > 0:
        return max(0, (stop - start + step - 1) // step)
    return max(0, (start - stop - step - 1) // (-step))


def extreme_mask(x, ans, axis, keepdims):
    """Weights of the elements of `x` equal to their max/min `ans`; ties share equally."""
    a = expand_reduced(ans, x, axis, keepdims)
    m = (x == a).astype(np.result_type(x, 1.0))
    if axis is None:
        return m / np.sum(m)
    return m / np.sum(m, axis=axis, keepdims=True)


def maybe_view_shadow(u, x, du, dx, zero):
    """Shadow of `u = reshape(x)`: the same view of `dx` when `u` views `x`, else fresh.

    Reverse mode asks for a fresh zero shadow (`zero=True`); forward mode for a copy of the
    reshaped tangent."""
    if np.may_share_memory(u, x):
        return check_shadow_view(u, x, du, dx)
    if zero:
        return np.zeros_like(u)
    return np.array(du, copy=True)


def is_view(u, x):
    return np.may_share_memory(u, x)


def check_bound(trips, name):
    """A loop variable read after its loop exists only if the loop ran (Python's NameError)."""
    if trips <= 0:
        raise NameError(f"name {name!r} is not defined (its for loop ran zero times)")


def check_shadow_view(u, x, du, dx):
    """A shadow view must alias its parent's shadow exactly when the primal view does."""
    if np.may_share_memory(u, x) != np.may_share_memory(du, dx):
        from ..errors import ZymoUsageError

        raise ZymoUsageError(
            "reshape returned a view of the primal but a copy of its shadow (or the other way "
            "round): the shadow's memory layout differs from the primal's. Give the shadow the "
            "same layout (np.zeros_like(x)) or reshape a contiguous copy."
        )
    return du


def clip_inside(x, lo, hi):
    """1 where `lo <= x <= hi` (a bound of None is no bound), else 0, as a bool mask."""
    m = np.ones(np.shape(x), dtype=np.bool_)
    if lo is not None:
        m = m & (x >= lo)
    if hi is not None:
        m = m & (x <= hi)
    return m
