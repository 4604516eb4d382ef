"""Helpers of the sorting and lookup rules (`rules/sorting.py`); generated code calls them
as `_rt.<name>` (`zymo.runtime` re-exports them).

Contract: pure functions of NumPy values (they never write into their arguments, except
`put_along_axis` into its `out`). `axis=None` means "along the flattened array", as in
NumPy. A permutation helper (`sort_perm`, `match_perm`) returns int64 indices `p` with
`np.take_along_axis(a, p, axis)` equal to the sorted (partitioned) values; ties are
matched in their original order (a stable sort), so tied elements keep the derivative of
the element NumPy's stable sort puts there. The interpolation helpers compute in float64,
as `np.interp` does, and cast adjoints to their operand's dtype.
"""
from __future__ import annotations

import numpy as np

from .core import unbroadcast

__all__ = [
    "along_index",
    "histogram_edges",
    "histogram_edges_jvp",
    "histogram_edges_vjp",
    "histogram_hist",
    "histogram_vjp_weights",
    "interp_above",
    "interp_below",
    "interp_dx",
    "interp_jvp_fp",
    "interp_jvp_xp",
    "interp_slope_t",
    "interp_vjp_fp",
    "interp_vjp_x",
    "interp_vjp_xp",
    "interp_zero_if_given",
    "match_perm",
    "put_along_axis",
    "put_along_axis_vjp_values",
    "sort_perm",
    "stored_along_axis",
    "take_along_axis_vjp",
]


def _fdtype(v):
    """The float dtype of `v`'s derivatives: its own for float32/float64 arrays and NumPy
    scalars, float64 for Python numbers and ints (never NumPy's weak-scalar float32)."""
    return np.result_type(np.asarray(v).dtype, np.float32)


def _flat(a, axis):
    """`a` and the axis to work along (`a` flattened for `axis=None`)."""
    if axis is None:
        return np.ravel(a), -1
    return a, axis


def sort_perm(a, axis=-1):
    """The stable `argsort` of `a` along `axis` (of the flattened `a` for None)."""
    a, ax = _flat(a, axis)
    return np.argsort(a, axis=ax, kind="stable")


def match_perm(a, ans, axis=-1):
    """Indices `p` with `take_along_axis(a, p, axis) == ans`, for `ans` a rearrangement of `a`
    along `axis` (`np.partition`'s result): equal values are matched in order."""
    a, ax = _flat(a, axis)
    src = np.argsort(a, axis=ax, kind="stable")
    dst = np.argsort(ans, axis=ax, kind="stable")
    p = np.empty_like(src)
    np.put_along_axis(p, dst, src, ax)
    return p


def along_index(shape, indices, axis):
    """The advanced index into an array of `shape` that `take_along_axis(arr, indices, axis)`
    reads and `put_along_axis` writes (a tuple of int arrays)."""
    indices = np.asarray(indices)
    if axis is None:
        return np.unravel_index(indices, shape)
    nd = len(shape)
    axis = axis % nd
    out = []
    for d in range(nd):
        if d == axis:
            out.append(indices)
        else:
            s = [1] * nd
            s[d] = shape[d]
            out.append(np.arange(shape[d]).reshape(s))
    return tuple(out)


def take_along_axis_vjp(g, arr, indices, axis):
    """Adjoint of `arr` in `take_along_axis(arr, indices, axis)`: `g` added back where each
    element was read (repeated indices accumulate). Linear in `g`."""
    out = np.zeros(np.shape(arr), np.result_type(_fdtype(g), _fdtype(arr)))
    np.add.at(out, along_index(np.shape(arr), indices, axis), g)
    return out


def put_along_axis(arr, indices, values, axis, out=None):
    """`np.put_along_axis(arr, indices, values, axis)` as a function of its operands: the result
    is `out` (the frontend makes it `arr` itself), holding `arr` with `values` stored."""
    if out is None:
        out = np.array(arr, copy=True)
    elif out is not arr:
        out[...] = arr
    out[along_index(out.shape, indices, axis)] = values
    return out


def stored_along_axis(arr, indices, values, axis):
    """A copy of `arr` with `values` stored along `axis` (the derivatives' functional form of
    `put_along_axis`, which the frontend treats as writing into its first argument)."""
    return put_along_axis(arr, indices, values, axis)


def put_along_axis_vjp_values(g, indices, values, axis):
    """Adjoint of `values` in `put_along_axis`: `g` read where each value was stored; with a
    repeated index only the value NumPy stored last (the one that stays) gets it, and the
    result is summed back to `values`' shape (NumPy broadcasts `values`)."""
    idx = along_index(np.shape(g), indices, axis)
    read = g[idx]
    ids = np.arange(read.size).reshape(read.shape)
    pos = np.full(np.shape(g), -1, np.int64)
    pos[idx] = ids
    read = np.where(pos[idx] == ids, read, np.zeros_like(read))
    out = unbroadcast(read, values)
    return out.astype(_fdtype(values)) if np.ndim(values) else _fdtype(values).type(out)


# -- np.interp --------------------------------------------------------------------------
def _segments(x, xp):
    """For each `x`: the segment `j` (xp[j] <= x <= xp[j1]), its upper end `j1`, the fraction
    `w` along it, and whether `x` lies within [xp[0], xp[-1]]."""
    x = np.asarray(x, np.float64)
    xp = np.asarray(xp, np.float64)
    n = xp.shape[0]
    j = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, max(n - 2, 0))
    j1 = np.minimum(j + 1, n - 1)
    span = xp[j1] - xp[j]
    w = np.where(j1 == j, 0.0, (x - xp[j]) / np.where(j1 == j, 1.0, span))
    inside = ~((x < xp[0]) | (x > xp[-1]))
    return j, j1, w, inside


def _like(r, x):
    """`r` as a scalar where `x` is one."""
    return r[()] if np.ndim(x) == 0 else r


def interp_dx(x, xp, fp):
    """d interp / d x: the slope of the segment `x` lies in (0 outside [xp[0], xp[-1]]); at a
    knot, the slope of the segment to its right (the last segment at xp[-1])."""
    j, j1, _w, inside = _segments(x, xp)
    fp = np.asarray(fp, np.float64)
    xp = np.asarray(xp, np.float64)
    span = np.where(j1 == j, 1.0, xp[j1] - xp[j])
    return _like(np.where(inside & (j1 != j), (fp[j1] - fp[j]) / span, 0.0), x)


def interp_vjp_x(g, x, xp, fp):
    return _like(np.asarray(g * interp_dx(x, xp, fp)).astype(_fdtype(x)), x)


def interp_slope_t(c, x, xp, like):
    """The transpose of "the slope of a knot-value vector at `x`" (`interp_dx(x, xp, v)` is
    linear in `v`): `c / span` added at each point's upper knot and subtracted at its lower
    one, inside the range; in `like`'s shape and dtype (second order of interp)."""
    j, j1, _w, inside = _segments(x, xp)
    xp64 = np.asarray(xp, np.float64)
    span = np.where(j1 == j, 1.0, xp64[j1] - xp64[j])
    q = np.where(inside & (j1 != j), np.broadcast_to(np.asarray(c, np.float64), np.shape(j)) / span, 0.0)
    out = np.zeros(np.shape(like), np.float64)
    np.add.at(out, j1, q)
    np.add.at(out, j, -q)
    return out.astype(_fdtype(like))


def interp_zero_if_given(v):
    """The `left`/`right` argument of interp's tangent in `fp`: None stays None (the end
    value of `fp` is used, so its tangent is), a given value becomes 0."""
    return None if v is None else 0.0


def interp_jvp_fp(t, x, xp, left=None, right=None):
    """Tangent of interp along a tangent `t` of `fp`: interp is linear in `fp`, so it is the
    interpolation of `t` (0 outside the range where `left`/`right` is given)."""
    return np.interp(x, xp, t, interp_zero_if_given(left), interp_zero_if_given(right))


def interp_below(x, xp):
    """1.0 where `x < xp[0]` (where `left` is the result), else 0.0."""
    return _like((np.asarray(x, np.float64) < np.asarray(xp)[0]).astype(np.float64), x)


def interp_above(x, xp):
    return _like((np.asarray(x, np.float64) > np.asarray(xp)[-1]).astype(np.float64), x)


def interp_jvp_xp(t, x, xp, fp):
    """Tangent of interp along a tangent `t` of the knots: -slope ((1-w) t[j] + w t[j1])
    inside [xp[0], xp[-1]], 0 outside."""
    j, j1, w, inside = _segments(x, xp)
    t = np.asarray(t, np.float64)
    return _like(np.where(inside, -interp_dx(x, xp, fp) * ((1.0 - w) * t[j] + w * t[j1]), 0.0), x)


def interp_vjp_xp(g, x, xp, fp):
    j, j1, w, inside = _segments(x, xp)
    c = np.where(inside, -interp_dx(x, xp, fp) * g, 0.0)
    out = np.zeros(np.shape(xp), np.float64)
    np.add.at(out, j, c * (1.0 - w))
    np.add.at(out, j1, c * w)
    return out.astype(_fdtype(xp))


def interp_vjp_fp(g, x, xp, fp, left, right):
    """Adjoint of `fp`: (1-w) g to fp[j] and w g to fp[j1] inside; outside, all of g to the
    end value when `left`/`right` is None (NumPy then uses fp[0]/fp[-1]), else nothing."""
    j, j1, w, inside = _segments(x, xp)
    x64 = np.asarray(x, np.float64)
    g = np.broadcast_to(np.asarray(g, np.float64), x64.shape)
    out = np.zeros(np.shape(fp), np.float64)
    np.add.at(out, j, np.where(inside, g * (1.0 - w), 0.0))
    np.add.at(out, j1, np.where(inside, g * w, 0.0))
    xp0, xpn = np.asarray(xp)[0], np.asarray(xp)[-1]
    if left is None:
        out[0] += np.sum(np.where(x64 < xp0, g, 0.0))
    if right is None:
        out[-1] += np.sum(np.where(x64 > xpn, g, 0.0))
    return out.astype(_fdtype(fp))


# -- np.histogram -------------------------------------------------------------------------
def histogram_hist(a, bins=10, range=None, density=None, weights=None):
    """`np.histogram(...)[0]`."""
    return np.histogram(a, bins, range, density, weights)[0]


def histogram_edges(a, bins=10, range=None, density=None, weights=None):
    """`np.histogram(...)[1]`, a copy (NumPy returns an array `bins` itself)."""
    return np.array(np.histogram(a, bins, range, density, weights)[1], copy=True)


def histogram_vjp_weights(g, a, bins=10, range=None, weights=None):
    """Adjoint of `weights` in the weighted histogram: each element's weight went to the bin
    holding it (bins are [e_k, e_k+1), the last one closed; elements outside get 0)."""
    edges = np.histogram_bin_edges(a, bins, range)
    flat = np.ravel(a)
    nb = edges.shape[0] - 1
    k = np.clip(np.searchsorted(edges, flat, side="right") - 1, 0, nb - 1)
    keep = (flat >= edges[0]) & (flat <= edges[-1])
    out = np.where(keep, np.asarray(g)[k], 0.0).reshape(np.shape(a))
    return out.astype(_fdtype(weights))


def _edge_weights(a, bins, range):
    """With `bins` an int and no `range`, edges are linspace(min(a), max(a)) (min == max:
    min - 0.5 and max + 0.5): the weights of each element of `a` in the first and the last
    edge (ties at the min or max share equally), and the fractions k / bins. None otherwise."""
    if range is not None or not isinstance(bins, (int, np.integer)) or np.size(a) == 0:
        return None
    flat = np.ravel(a)
    lo_m = (flat == np.min(flat)).astype(np.float64)
    hi_m = (flat == np.max(flat)).astype(np.float64)
    return lo_m / np.sum(lo_m), hi_m / np.sum(hi_m), np.arange(bins + 1) / bins


def histogram_edges_jvp(t, a, bins=10, range=None):
    """Tangent of the bin edges along a tangent `t` of `a`."""
    dt = _fdtype(a) if np.ndim(bins) == 0 else np.result_type(_fdtype(bins), _fdtype(a))
    w = _edge_weights(a, bins, range)
    if w is None:
        return np.zeros(np.shape(np.histogram_bin_edges(a, bins, range)), dt)
    lo, hi, f = w
    tf = np.ravel(np.asarray(t, np.float64))
    dlo, dhi = np.sum(lo * tf), np.sum(hi * tf)
    return (dlo + (dhi - dlo) * f).astype(dt)


def histogram_edges_vjp(g, a, bins=10, range=None):
    w = _edge_weights(a, bins, range)
    if w is None:
        return np.zeros(np.shape(a), _fdtype(a))
    lo, hi, f = w
    g = np.asarray(g, np.float64)
    out = lo * np.sum(g * (1.0 - f)) + hi * np.sum(g * f)
    return out.reshape(np.shape(a)).astype(_fdtype(a))
