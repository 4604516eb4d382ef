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


class Journal:
    """Undo logs of speculative regions (a joined branch, a fixed-point iteration): each
    open log keeps, for what the region changes, the value before its first change there:
    `rows[(buffer, p)]` a row, `mats[buffer]` a whole state (matrix, overlay, taint),
    `taints[buffer]`. A region then costs what it writes, not the size of memory."""

    def __init__(self) -> None:
        self.stack: list[Log] = []

    def open(self) -> Log:
        log = Log()
        self.stack.append(log)
        return log

    def close(self) -> Log:
        return self.stack.pop()


class Log:
    __slots__ = ("rows", "mats", "taints", "bufs")

    def __init__(self) -> None:
        self.rows: dict[tuple[int, int], frozenset] = {}
        self.mats: dict[int, tuple] = {}
        self.taints: dict[int, bool] = {}
        self.bufs: dict[int, Buffer] = {}


class Buffer:
    """The dependency rows of one memory owner (see the module docstring)."""

    __slots__ = ("own", "n", "mat", "over", "_taint", "journal")

    def __init__(self, own: np.ndarray, n: int, mat: sp.csr_matrix | None = None, taint: bool = False,
                 journal: Journal | None = None) -> None:
        self.own = own  # keeps the owner alive: buffers are keyed by id(owner)
        self.n = n
        self.mat = mat if mat is not None else empty(own.size, n)
        self.over: dict[int, frozenset] = {}
        self._taint = taint
        self.journal = journal

    # -- journaled changes --------------------------------------------------------------
    def _note_row(self, p: int) -> None:
        if self.journal is not None and self.journal.stack:
            key = (id(self), p)
            old = None
            for log in self.journal.stack:
                if id(self) not in log.mats and key not in log.rows:
                    if old is None:
                        old = self.row(p)
                    log.rows[key] = old
                    log.bufs[id(self)] = self

    def _note_mat(self) -> None:
        if self.journal is not None and self.journal.stack:
            state = None
            for log in self.journal.stack:
                if id(self) not in log.mats:
                    if state is None:
                        state = (self.mat, dict(self.over), self._taint)
                    log.mats[id(self)] = state
                    log.bufs[id(self)] = self

    @property
    def taint(self) -> bool:
        return self._taint

    @taint.setter
    def taint(self, t: bool) -> None:
        if t != self._taint and self.journal is not None:
            for log in self.journal.stack:
                log.taints.setdefault(id(self), self._taint)
                log.bufs[id(self)] = self
        self._taint = t

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
        self._note_row(p)
        self.over[p] = s

    def rows(self, pos: np.ndarray) -> sp.csr_matrix:
        return take_rows(self.matrix(), pos)

    def set_rows(self, pos: np.ndarray, m: sp.csr_matrix) -> None:
        """Strong update: the rows at `pos` (C order) become `m`'s rows (a position given
        twice gets the union of its rows)."""
        self._note_mat()
        self.mat = _replace_rows(self.matrix(), np.asarray(pos, dtype=np.int64).reshape(-1), m)

    def union_rows(self, pos: np.ndarray, m: sp.csr_matrix) -> None:
        """Weak update: the rows at `pos` gain `m`'s rows."""
        self._note_mat()
        pos = np.asarray(pos, dtype=np.int64).reshape(-1)
        self.mat = bool_(self.matrix() + _scatter(pos, m, self.mat.shape[0]))

    def set_state(self, mat: sp.csr_matrix, over: dict, taint: bool) -> None:
        self._note_mat()
        self.mat, self.over, self._taint = mat, dict(over), taint


def state_matrix(state: tuple, n: int) -> sp.csr_matrix:
    """The matrix of a saved (matrix, overlay, taint) state."""
    mat, over, _t = state
    if not over:
        return mat
    keys = np.fromiter(over.keys(), dtype=np.int64, count=len(over))
    return _replace_rows(mat, keys, from_sets(list(over.values()), n))


def undo(log: Log) -> None:
    """Memory as it was when `log` was opened (the log must be closed)."""
    for bid, state in log.mats.items():
        buf = log.bufs[bid]
        buf.mat, buf.over, buf._taint = state[0], dict(state[1]), state[2]
    for (bid, p), old in log.rows.items():
        log.bufs[bid].over[p] = old
    for bid, t in log.taints.items():
        if bid not in log.mats:
            log.bufs[bid]._taint = t


def current(log: Log) -> Log:
    """What `log`'s region left in the places it changed (a log of the current values)."""
    out = Log()
    out.bufs = dict(log.bufs)
    for bid in log.mats:
        b = log.bufs[bid]
        out.mats[bid] = (b.matrix(), {}, b.taint)
    for (bid, p) in log.rows:
        if bid not in log.mats:
            out.rows[(bid, p)] = log.bufs[bid].row(p)
    for bid in log.taints:
        out.taints[bid] = log.bufs[bid].taint
    return out


def join(values: Log) -> bool:
    """Memory becomes its union with the values saved in `values` (rows, states, taints);
    whether it is now larger than those values."""
    grew = False
    for bid, state in values.mats.items():
        buf = values.bufs[bid]
        old = state_matrix(state, buf.n)
        joined = bool_(buf.matrix() + old)
        grew = grew or joined.nnz != old.nnz or (buf.taint and not state[2])
        buf.set_state(joined, {}, buf.taint or state[2])
    for (bid, p), old in values.rows.items():
        if bid in values.mats:
            continue
        buf = values.bufs[bid]
        cur = buf.row(p)
        if not cur <= old:
            grew = True
        if not old <= cur:
            buf.set_row(p, cur | old)
    for bid, t in values.taints.items():
        buf = values.bufs[bid]
        grew = grew or (buf.taint and not t)
        buf.taint = buf.taint or t
    return grew


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
