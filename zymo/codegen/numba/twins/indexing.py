"""Numba twins of the advanced-indexing runtime helpers (`zymo/runtime/indexing.py`).

Contract: importing this module registers, with `numba.extending.overload`, Numba
implementations of `_rt.index_array`, `_rt.scatter_add`, `_rt.store_adjoint`,
`_rt.add_at`, `_rt.get_item`, `_rt.set_item` and `_rt.mask_store_apart` on the helpers' own function objects
(imported by the `twins` package). NumPy's `np.add.at` does not exist under Numba, so these
are explicit loops. They cover what Numba itself compiles in the primal: ONE advanced index,
a 1-d int array (negative entries wrap) or a 1-d bool mask, selecting along the first axis
(`x[idx]`, `x[idx] = v`, `np.add.at(a, idx, v)` with `v` a number or an array with one
entry per index); the adjoints of `x[r, c]` and `x[r, c] = v` with one 1-d int array per
axis of a matrix (repeated pairs: `np.add.at`'s sums, the last store); and one more, which
Numba does not take: a bool mask of `x`'s own shape
(`x[x > 0] = 0.0` of a matrix), selecting elements in C order, as NumPy does. `get_item` and
`set_item` (what `rewrites.full_masks` writes for `x[m]` and `x[m] = v`) run such a mask as
loops and any other index as Numba's own `x[index]`. Any other index fails at Numba's typing
with a message naming the helper, which the backend reports (and the default policy
falls back to the Python backend).
"""
from __future__ import annotations

import numpy as np
from numba import types as t
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable

from zymo import runtime as rt

from .. import np_shim as _nps
from ..np_shim import _none


def _one_index(index) -> t.Array | None:
    """The single 1-d index array of an index tuple `(idx,)`, or None."""
    if isinstance(index, t.BaseTuple) and len(index) == 1:
        ix = index[0]
        if isinstance(ix, t.Array) and ix.ndim == 1 and (isinstance(ix.dtype, t.Integer) or ix.dtype == t.boolean):
            return ix
    return None


def _full_mask(x, index) -> bool:
    """Whether `index` is a bool mask of `x`'s own rank, 2 or more (`x[m]`, or `(m,)` as the
    adjoint helpers get it)."""
    if isinstance(index, t.BaseTuple) and len(index) == 1:
        index = index[0]
    return (isinstance(x, t.Array) and x.ndim >= 2 and isinstance(index, t.Array)
            and index.dtype == t.boolean and index.ndim == x.ndim)


@register_jitable
def _mask_count(x, m):
    """How many elements the mask `m` of `x`'s shape selects (NumPy's IndexError when the
    shapes differ)."""
    if m.shape != x.shape:
        raise IndexError("boolean index did not match indexed array")
    count = 0
    for pos in np.ndindex(m.shape):
        if m[pos]:
            count += 1
    return count


def _refuse(what: str):
    raise TypingError(f"zymo's Numba backend differentiates {what} with one 1-d integer array or "
                      "boolean mask as the whole index only")


@register_jitable
def _mask_positions(ix, n):
    """The positions a bool mask selects."""
    out = np.empty(ix.shape[0], np.int64)
    k = 0
    for i in range(ix.shape[0]):
        if ix[i]:
            out[k] = i
            k += 1
    return out[:k]


@register_jitable
def _int_positions(ix, n):
    """The positions an int array selects along an axis of length n (negative entries wrap;
    out of range is NumPy's IndexError, not a write past the end: Numba checks no bounds)."""
    out = np.empty(ix.shape[0], np.int64)
    for k in range(ix.shape[0]):
        i = ix[k]
        if i < -n or i >= n:
            raise IndexError("index out of bounds for the axis it indexes")
        out[k] = i + n if i < 0 else i
    return out


def _positions(ix: t.Array):
    """The jitable giving the positions index array type `ix` selects."""
    return _mask_positions if ix.dtype == t.boolean else _int_positions


@overload(rt.index_array)
def _index_array(items):
    def impl(items):
        out = np.empty(len(items), np.int64)
        for k in range(len(items)):
            out[k] = items[k]
        return out
    return impl


def _element_indices(x, index) -> bool:
    """Whether `index` is a tuple of one 1-d int array per axis of `x` (2 or more): `x[r, c]`,
    the elements at `(r[k], c[k])`."""
    return (isinstance(x, t.Array) and x.ndim >= 2 and isinstance(index, t.BaseTuple) and len(index) == x.ndim
            and all(isinstance(ix, t.Array) and ix.ndim == 1 and isinstance(ix.dtype, t.Integer) for ix in index))


@register_jitable
def _pairs_count(r, c):
    """How many pairs `x[r, c]` selects: the index arrays broadcast (equal lengths, or one of
    length 1), as NumPy's."""
    if r.shape[0] == c.shape[0] or c.shape[0] == 1:
        return r.shape[0]
    if r.shape[0] == 1:
        return c.shape[0]
    raise IndexError("shape mismatch: indexing arrays could not be broadcast together")


@register_jitable
def _wrapped(i, n):
    if i < -n or i >= n:
        raise IndexError("index out of bounds for the axis it indexes")
    return i + n if i < 0 else i


@overload(rt.scatter_add)
def _scatter_add(dx, index, g):
    if _element_indices(dx, index) and len(index) == 2:
        def by_pairs(dx, index, g):
            r, c = index
            n = _pairs_count(r, c)
            n0, n1 = dx.shape[0], dx.shape[1]
            for k in range(n):  # repeated pairs accumulate (np.add.at)
                dx[_wrapped(r[k if r.shape[0] > 1 else 0], n0), _wrapped(c[k if c.shape[0] > 1 else 0], n1)] += g[k]
        return by_pairs
    if _full_mask(dx, index):
        def by_mask(dx, index, g):
            m = index[0]
            if g.shape[0] != _mask_count(dx, m):
                raise ValueError("scatter_add: one value per selected element expected")
            k = 0
            for pos in np.ndindex(m.shape):
                if m[pos]:
                    dx[pos] += g[k]
                    k += 1
        return by_mask
    if _one_index(index) is None:
        _refuse("the adjoint of x[idx]")
    positions = _positions(_one_index(index))

    def impl(dx, index, g):
        pos = positions(index[0], dx.shape[0])
        for k in range(pos.shape[0]):
            dx[pos[k]] += g[k]
    return impl


@overload(rt.store_adjoint)
def _store_adjoint(dx, index):
    if _element_indices(dx, index) and len(index) == 2:
        def by_pairs(dx, index):
            r, c = index
            n = _pairs_count(r, c)
            n0, n1 = dx.shape[0], dx.shape[1]
            last = np.full(n0 * n1, -1, np.int64)
            for k in range(n):  # repeated pairs: the last store survives
                last[_wrapped(r[k if r.shape[0] > 1 else 0], n0) * n1 + _wrapped(c[k if c.shape[0] > 1 else 0], n1)] = k
            g = np.zeros(n, dx.dtype)
            for k in range(n):
                i, j = _wrapped(r[k if r.shape[0] > 1 else 0], n0), _wrapped(c[k if c.shape[0] > 1 else 0], n1)
                if last[i * n1 + j] == k:
                    g[k] = dx[i, j]
            for k in range(n):
                dx[_wrapped(r[k if r.shape[0] > 1 else 0], n0), _wrapped(c[k if c.shape[0] > 1 else 0], n1)] = 0.0
            return g
        return by_pairs
    if _full_mask(dx, index):
        def by_mask(dx, index):  # a mask selects each element once: every one survives
            m = index[0]
            g = np.empty(_mask_count(dx, m), dx.dtype)
            k = 0
            for pos in np.ndindex(m.shape):
                if m[pos]:
                    g[k] = dx[pos]
                    dx[pos] = 0.0
                    k += 1
            return g
        return by_mask
    if _one_index(index) is None:
        _refuse("the adjoint of x[idx] = v")
    positions = _positions(_one_index(index))

    def impl(dx, index):
        pos = positions(index[0], dx.shape[0])
        last = np.full(dx.shape[0], -1, np.int64)
        for k in range(pos.shape[0]):
            last[pos[k]] = k  # repeated indices: the last store survives
        g = np.zeros((pos.shape[0],) + dx.shape[1:], dx.dtype)
        for k in range(pos.shape[0]):
            if last[pos[k]] == k:
                g[k] = dx[pos[k]]
        for k in range(pos.shape[0]):
            dx[pos[k]] = 0.0
        return g
    return impl


@overload(rt.get_item)
def _get_item(x, index):
    if not _full_mask(x, index):
        return lambda x, index: x[index]

    def impl(x, index):
        out = np.empty(_mask_count(x, index), x.dtype)
        k = 0
        for pos in np.ndindex(index.shape):
            if index[pos]:
                out[k] = x[pos]
                k += 1
        return out
    return impl


@overload(rt.set_item)
def _set_item(x, index, v):
    store = _plain_store if not _full_mask(x, index) else register_jitable(_masked_store(v))
    if isinstance(index, t.Array) and index.dtype == t.boolean and isinstance(v, t.Array) and isinstance(x, t.Array):
        # NumPy stores through a mask in place, without copying a `v` that overlaps `x`; Numba's
        # store (and the loops below) would give other values there: refused, never different
        def apart(x, index, v):
            if _nps.may_share_memory(x, v) and _shares_elements(x, v):
                raise _OVERLAP_CLS(_OVERLAP_MESSAGE)
            store(x, index, v)
        return apart
    return lambda x, index, v: store(x, index, v)


_OVERLAP = rt.indexing._overlap("under numba=True")
_OVERLAP_CLS, _OVERLAP_MESSAGE = type(_OVERLAP), str(_OVERLAP)


@register_jitable
def _plain_store(x, index, v):
    x[index] = v


def _masked_store(v):
    """The loops of a store through a mask of `x`'s own shape, for value type `v`."""
    if isinstance(v, (t.Number, t.Boolean)):
        def fill(x, index, v):
            _mask_count(x, index)
            for pos in np.ndindex(index.shape):
                if index[pos]:
                    x[pos] = v
        return fill
    if not (isinstance(v, t.Array) and v.ndim <= 1):
        raise TypingError("zymo's Numba backend stores through a boolean mask of the array's shape "
                          "a number or a 1-d array of the selected elements only")
    if v.ndim == 0:
        def one(x, index, v):
            _mask_count(x, index)
            for pos in np.ndindex(index.shape):
                if index[pos]:
                    x[pos] = v[()]
        return one

    def each(x, index, v):
        n = _mask_count(x, index)
        if v.shape[0] != n and v.shape[0] != 1:
            raise ValueError("NumPy boolean array indexing assignment cannot assign the input values "
                             "to the output values the mask is true")
        k = 0
        for pos in np.ndindex(index.shape):
            if index[pos]:
                x[pos] = v[k if v.shape[0] == n else 0]
                k += 1
    return each


@overload(rt.mask_store_apart, prefer_literal=True)
def _mask_store_apart(x, v, where):
    """`rt.mask_store_apart` (its message is built while typing: `where` is a constant)."""
    from zymo.codegen.numba import np_shim

    error = rt.indexing._overlap(where.literal_value if isinstance(where, t.StringLiteral) else "here")
    cls, message = type(error), str(error)

    def impl(x, v, where):
        if np_shim.may_share_memory(x, v) and _shares_elements(x, v):
            raise cls(message)
    return impl


@register_jitable
def _starts(a):
    """The addresses of `a`'s elements, sorted."""
    out = np.empty(a.size, np.int64)
    base = a.ctypes.data
    k = 0
    for pos in np.ndindex(a.shape):
        addr = base
        for d in range(a.ndim):
            addr += pos[d] * a.strides[d]
        out[k] = addr
        k += 1
    out.sort()
    return out


@register_jitable
def _shares_elements(x, v):
    """Whether an element of `x` and one of `v` share a byte (`np.shares_memory`, exact), for
    arrays whose address ranges meet (interleaved views do without sharing an element)."""
    xs, vs = _starts(x), _starts(v)
    for b in vs:
        k = np.searchsorted(xs, b, side="right")  # the last element of x starting at or before b
        if k > 0 and xs[k - 1] + x.itemsize > b:
            return True
        if k < xs.shape[0] and xs[k] < b + v.itemsize:
            return True
    return False


@overload(rt.add_at)
def _add_at(a, idx, v, out=None):
    if not (isinstance(idx, t.Array) and idx.ndim == 1 and isinstance(idx.dtype, t.Integer)):
        raise TypingError("zymo's Numba backend compiles np.add.at(a, idx, v) with idx a 1-d integer array only")
    per_index = isinstance(v, t.Array) and v.ndim == a.ndim

    if per_index:  # one value per index, or one for all (a first axis of length 1)
        @register_jitable
        def add(o, idx, v):
            pos = _int_positions(idx, o.shape[0])
            if v.shape[0] != pos.shape[0] and v.shape[0] != 1:
                raise ValueError("np.add.at: the values do not broadcast to the indices")
            for k in range(pos.shape[0]):
                o[pos[k]] += v[k if v.shape[0] == pos.shape[0] else 0]
            return o
    else:
        @register_jitable
        def add(o, idx, v):
            pos = _int_positions(idx, o.shape[0])
            for k in range(pos.shape[0]):
                o[pos[k]] += v
            return o

    if _none(out):
        def impl(a, idx, v, out=None):
            return add(a.copy(), idx, v)
    else:
        def impl(a, idx, v, out=None):
            return add(out, idx, v)  # the frontend passes out=a: the update is in place
    return impl
