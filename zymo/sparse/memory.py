"""Dependency memory: which inputs each element of an array's memory depends on.

Contract:
- A `Buffer` mirrors one NumPy memory owner (an array whose `.base` is not an array) the
  way a shadow mirrors memory in derivative code: row `p` of its boolean CSR matrix
  (shape `(owner.size, n_inputs)`) holds the inputs the element at memory offset `p` (in
  elements from the owner's start) depends on. Views of the owner share its buffer, so a
  write through a view is seen by every other view, as in the primal.
- Scalar stores go to an overlay (`set_row`) that is merged into the matrix on the next
  whole-array read (`matrix`), so scalar loops cost a set operation per store, not a
  sparse-matrix rebuild. Matrices are never changed in place: a snapshot is a reference.
- `positions(a)` gives the memory offsets of a view's elements in its owner (shape
  `a.shape`), from its data pointer and strides; a view that does not fall on the owner's
  element grid (another itemsize) raises `DetectionFailed`.
- Helpers build rows from Python sets and unions of rows; everything is boolean.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp


class DetectionFailed(Exception):
    """Global detection cannot bound this program (a shape or a slice that depends on the
    input, arrays chosen by an input-dependent branch, ...): the caller falls back to local
    detection or reports it. `loc` is the user's line when known."""

    def __init__(self, msg: str, loc: Any = None) -> None:
        super().__init__(msg)
        self.loc = loc


def empty(rows: int, n: int) -> sp.csr_matrix:
    return sp.csr_matrix((rows, n), dtype=bool)


def from_sets(sets: list[frozenset], n: int) -> sp.csr_matrix:
    """One CSR row per set."""
    lens = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
    indptr = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])
    indices = np.fromiter((j for s in sets for j in sorted(s)), dtype=np.int64, count=int(indptr[-1]))
    return sp.csr_matrix((np.ones(len(indices), dtype=bool), indices, indptr), shape=(len(sets), n))


def row_set(m: sp.csr_matrix, p: int) -> frozenset:
    return frozenset(m.indices[m.indptr[p]:m.indptr[p + 1]].tolist())


def union_all(m: sp.csr_matrix) -> frozenset:
    """The inputs any row depends on."""
    return frozenset(np.unique(m.indices).tolist())


def broadcast_set(s: frozenset, rows: int, n: int) -> sp.csr_matrix:
    """`rows` rows, each the set `s`."""
    if not s or rows == 0:
        return empty(rows, n)
    cols = np.array(sorted(s), dtype=np.int64)
    k = len(cols)
    indptr = np.arange(rows + 1, dtype=np.int64) * k
    return sp.csr_matrix((np.ones(rows * k, dtype=bool), np.tile(cols, rows), indptr), shape=(rows, n))


def take_rows(m: sp.csr_matrix, idx: np.ndarray) -> sp.csr_matrix:
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    return m[idx] if len(idx) else empty(0, m.shape[1])


def select(groups: np.ndarray, n_out: int, m: sp.csr_matrix) -> sp.csr_matrix:
    """Row o of the result is the union of the rows i of `m` with `groups[i] == o`
    (a reduction by union)."""
    groups = np.asarray(groups, dtype=np.int64).reshape(-1)
    sel = sp.csr_matrix((np.ones(len(groups), dtype=bool), (groups, np.arange(len(groups)))),
                        shape=(n_out, m.shape[0]))
    return bool_(sel @ m)


def bool_(m: Any) -> sp.csr_matrix:
    m = sp.csr_matrix(m, dtype=bool)
    m.eliminate_zeros()
    return m


def owner(a: np.ndarray) -> np.ndarray:
    b = a
    while isinstance(b.base, np.ndarray):
        b = b.base
    return b


def positions(a: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Memory offsets (in elements of `own`) of the elements of `a`, shaped like `a`."""
    size = own.itemsize
    if a.itemsize != size:
        raise DetectionFailed("a view with another element size than its memory")
    start = a.__array_interface__["data"][0] - own.__array_interface__["data"][0]
    if start % size or any(s % size for s in a.strides):
        raise DetectionFailed("a view that does not fall on its memory's elements")
    pos = np.full(a.shape, start // size, dtype=np.int64)
    for ax, (n, s) in enumerate(zip(a.shape, a.strides, strict=False)):
        shape = [1] * a.ndim
        shape[ax] = n
        pos = pos + (np.arange(n, dtype=np.int64) * (s // size)).reshape(shape)
    return pos


class Buffer:
    """The dependency rows of one memory owner (see the module docstring)."""

    __slots__ = ("own", "n", "mat", "over", "taint")

    def __init__(self, own: np.ndarray, n: int, mat: sp.csr_matrix | None = None, taint: bool = False) -> None:
        self.own = own  # keeps the owner alive: buffers are keyed by id(owner)
        self.n = n
        self.mat = mat if mat is not None else empty(own.size, n)
        self.over: dict[int, frozenset] = {}
        self.taint = taint

    def matrix(self) -> sp.csr_matrix:
        if self.over:
            keys = np.fromiter(self.over.keys(), dtype=np.int64, count=len(self.over))
            rows = from_sets(list(self.over.values()), self.n)
            self.over = {}
            self.mat = _replace_rows(self.mat, keys, rows)
        return self.mat

    def row(self, p: int) -> frozenset:
        s = self.over.get(p)
        return s if s is not None else row_set(self.mat, p)

    def set_row(self, p: int, s: frozenset) -> None:
        self.over[p] = s

    def rows(self, pos: np.ndarray) -> sp.csr_matrix:
        return take_rows(self.matrix(), pos)

    def set_rows(self, pos: np.ndarray, m: sp.csr_matrix) -> None:
        """Strong update: the rows at `pos` (C order) become `m`'s rows (a position given
        twice gets the union of its rows)."""
        self.mat = _replace_rows(self.matrix(), np.asarray(pos, dtype=np.int64).reshape(-1), m)

    def union_rows(self, pos: np.ndarray, m: sp.csr_matrix) -> None:
        """Weak update: the rows at `pos` gain `m`'s rows."""
        pos = np.asarray(pos, dtype=np.int64).reshape(-1)
        self.mat = bool_(self.matrix() + _scatter(pos, m, self.mat.shape[0]))

    def snapshot(self) -> tuple[sp.csr_matrix, bool]:
        return self.matrix(), self.taint

    def restore(self, snap: tuple[sp.csr_matrix, bool]) -> None:
        self.mat, self.taint = snap
        self.over = {}


def _scatter(pos: np.ndarray, m: sp.csr_matrix, rows: int) -> sp.csr_matrix:
    place = sp.csr_matrix((np.ones(len(pos), dtype=bool), (pos, np.arange(len(pos)))), shape=(rows, len(pos)))
    return bool_(place @ m)


def _replace_rows(mat: sp.csr_matrix, pos: np.ndarray, m: sp.csr_matrix) -> sp.csr_matrix:
    if len(pos) == 0:
        return mat
    keep = np.ones(mat.shape[0], dtype=bool)
    keep[pos] = False
    r = np.flatnonzero(keep)
    kept = sp.csr_matrix((np.ones(len(r), dtype=bool), (r, r)), shape=(mat.shape[0], mat.shape[0])) @ mat
    return bool_(kept + _scatter(pos, m, mat.shape[0]))


def sets_union(sets: Iterable[frozenset]) -> frozenset:
    out: frozenset = frozenset()
    for s in sets:
        if s:
            out = out | s if out else s
    return out
