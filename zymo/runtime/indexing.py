"""Runtime helpers of advanced indexing (`rules/indexing.py`).

Contract: the index array of a list subscript, the scatter-add adjoint of an advanced read,
the adjoint of an advanced store, and `np.add.at` as a function of its operands (compiled
twins: `codegen/numba/twins/indexing.py`). `scatter_add` and `store_adjoint` write into
their first argument (not pure).
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "index_array", "scatter_add", "store_adjoint", "add_at", "get_item", "set_item", "mask_store_apart",
]

# -- advanced indexing (rules/indexing.py) ------------------------------------------
def index_array(items):
    """The int array of the indices written as a list in `x[[i, j, k]]`."""
    return np.array(items, dtype=np.int64)


def scatter_add(dx, index, g):
    """Adjoint of the advanced read `y = x[index]`: `dx[index] += g`, repeated indices
    accumulating (`np.add.at`, unbuffered)."""
    np.add.at(dx, index, g)


def store_adjoint(dx, index):
    """Adjoint of the stored value in `x[index] = v`, in the shape of `x[index]`, then
    `dx[index] = 0`. With repeated indices NumPy keeps the last value written, so only
    that occurrence receives `dx`'s adjoint (the others were overwritten: zero). Which
    occurrence survives is asked of NumPy itself, by storing positions."""
    g = dx[index]
    ids = np.arange(g.size).reshape(g.shape)
    pos = np.zeros(dx.shape, np.int64)
    pos[index] = ids
    g = np.where(pos[index] == ids, g, np.zeros_like(g))
    dx[index] = 0.0
    return g


def get_item(x, index):
    """`x[index]`: the Numba backend's spelling of an advanced read whose index may be a boolean
    mask of `x`'s own rank (`codegen/numba/rewrites.full_masks`), which Numba does not take."""
    return x[index]


def set_item(x, index, v):
    """`x[index] = v`, the Numba backend's spelling of an advanced store (see `get_item`)."""
    x[index] = v


def mask_store_apart(x, v, where):
    """Raise where `x[mask] = v` stored a value `v` that shares memory with `x` (called before
    the store's adjoint where the two may overlap: `transform/reverse/adjoint._rev_scatter`).
    NumPy stores through a boolean mask element by element, without copying `v` first (an int
    array index copies it), so elements of `v` read after an earlier store wrote them carry the
    values stored, not their own; the adjoint, which takes `v` as it was, would be wrong."""
    if np.may_share_memory(x, v) and np.shares_memory(x, v):
        raise _overlap(where)


def _overlap(where):
    from ..errors import ZymoUsageError

    return ZymoUsageError(
        f"{where}: the value stored through a boolean mask shares memory with the array it is stored into "
        "(`A[m] = A[1, ::-1]`); NumPy then writes through the overlap element by element, and zymo cannot "
        "differentiate that store. Store a copy instead (`A[m] = A[1, ::-1].copy()`).")


def add_at(a, idx, v, out=None):
    """`np.add.at(a, idx, v)` written as a function of its operands: the result is `out`
    (which the frontend makes `a` itself), holding `a` with `v` added at `idx`."""
    if out is None:
        out = a.copy()
    elif out is not a:
        out[...] = a
    np.add.at(out, idx, v)
    return out
