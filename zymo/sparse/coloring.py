"""Graph coloring for compressed Jacobians and Hessians, and the recovery of their entries.

Contract (patterns are boolean `scipy.sparse` matrices; colors are int arrays from 0):
- `column_coloring(P)`: columns sharing no row get one color (greedy distance-2 coloring of
  the bipartite graph, largest degree first), so `J @ S` (S: one 0/1 seed column per
  color) holds every entry of J once: `recover_columns`.
- `row_coloring(P)`: the same for rows (`column_coloring(P.T)`), for reverse mode:
  `recover_rows` from `S.T @ J`.
- `star_coloring(P)`: for a symmetric pattern, a distance-1 coloring in which every path on
  four vertices uses at least three colors (greedy star coloring, Gebremedhin, Manne and
  Pothen 2005, Algorithm 4.1); `recover_symmetric(P, colors, B)` reads H from `B = H @ S`:
  the diagonal from its own color, an off-diagonal H[i, j] from B[i, color(j)] when j is
  i's only neighbour of that color, else from B[j, color(i)] (the star property makes one
  of the two hold).
- `seeds(colors, n)`: the seed matrix (n, n_colors) as a dense float array.
- `column_recovery`, `row_recovery`, `symmetric_recovery` precompute, once per pattern and
  coloring, where each entry is read from the compressed result (`Recovery`), so a
  repeated recovery is one gather; `recover_*` are the one-shot forms.
`scipy.sparse.csgraph` has no coloring and no library on the project's dependency list
does, so the greedy algorithms are here (small, tested for validity and exact recovery).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _order(adj: sp.csr_matrix) -> np.ndarray:
    deg = np.diff(adj.indptr)
    return np.argsort(-deg, kind="stable")


def _greedy(adj: sp.csr_matrix) -> np.ndarray:
    """Greedy distance-1 coloring of the graph `adj` (symmetric, diagonal ignored)."""
    n = adj.shape[0]
    colors = np.full(n, -1, dtype=np.int64)
    indptr, indices = adj.indptr.tolist(), adj.indices.tolist()
    col = colors.tolist()
    mark = [-1] * (max(np.diff(adj.indptr).max(initial=0), 0) + 2)
    for v in _order(adj).tolist():
        for w in indices[indptr[v]:indptr[v + 1]]:
            c = col[w]
            if c >= 0 and w != v:
                mark[c] = v
        c = 0
        while mark[c] == v:
            c += 1
        col[v] = c
    colors[:] = col
    return colors


def column_coloring(pattern: sp.spmatrix) -> np.ndarray:
    p = sp.csr_matrix(pattern, dtype=bool)
    adj = sp.csr_matrix(p.T @ p, dtype=bool)  # columns sharing a row
    return _greedy(adj)


def row_coloring(pattern: sp.spmatrix) -> np.ndarray:
    return column_coloring(sp.csr_matrix(pattern, dtype=bool).T)


def star_coloring(pattern: sp.spmatrix) -> np.ndarray:
    """A star coloring of the (symmetric) pattern's graph, diagonal ignored."""
    a = sp.csr_matrix(pattern, dtype=bool)
    a = sp.csr_matrix(a + a.T, dtype=bool)
    a.setdiag(False)
    a.eliminate_zeros()
    n = a.shape[0]
    indptr, indices = a.indptr.tolist(), a.indices.tolist()
    col = [-1] * n
    forbidden = [-1] * (n + 1)
    for v in _order(a).tolist():
        for w in indices[indptr[v]:indptr[v + 1]]:
            cw = col[w]
            if cw >= 0:
                forbidden[cw] = v
            for x in indices[indptr[w]:indptr[w + 1]]:
                cx = col[x]
                if x == v or cx < 0:
                    continue
                if cw < 0:
                    forbidden[cx] = v
                else:
                    for y in indices[indptr[x]:indptr[x + 1]]:
                        if y != w and col[y] == cw:
                            forbidden[cx] = v
                            break
        c = 0
        while forbidden[c] == v:
            c += 1
        col[v] = c
    return np.array(col, dtype=np.int64)


def seeds(colors: np.ndarray, n: int) -> np.ndarray:
    k = int(colors.max(initial=-1)) + 1
    s = np.zeros((n, k))
    s[np.arange(n), colors] = 1.0
    return s


class Recovery:
    """Where each stored entry of a pattern comes from in a compressed result `B` laid out
    `(n_colors, length)`: `data = B[color, index]`, written into the pattern's CSR
    structure. Made once per plan; `__call__(B)` is a gather and a CSR wrapper."""

    def __init__(self, pattern: sp.spmatrix, color: np.ndarray, index: np.ndarray) -> None:
        p = sp.csr_matrix(pattern, dtype=bool)
        self.shape = p.shape
        self.indptr, self.indices = p.indptr.copy(), p.indices.copy()
        self.flat = color.astype(np.int64), index.astype(np.int64)

    def __call__(self, b: np.ndarray) -> sp.csr_matrix:
        data = b[self.flat[0], self.flat[1]]
        return sp.csr_matrix((data, self.indices, self.indptr), shape=self.shape)


def _csr_entries(pattern: sp.spmatrix) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    p = sp.csr_matrix(pattern, dtype=bool)
    p.sum_duplicates()
    p.sort_indices()
    rows = np.repeat(np.arange(p.shape[0]), np.diff(p.indptr))
    return p, rows, p.indices


def column_recovery(pattern: sp.spmatrix, colors: np.ndarray) -> Recovery:
    """For `B = (J @ seeds(colors)).T`, shape (n_colors, m)."""
    p, rows, cols = _csr_entries(pattern)
    return Recovery(p, colors[cols], rows)


def row_recovery(pattern: sp.spmatrix, colors: np.ndarray) -> Recovery:
    """For `B = seeds(colors).T @ J`, shape (n_colors, n)."""
    p, rows, cols = _csr_entries(pattern)
    return Recovery(p, colors[rows], cols)


def symmetric_recovery(pattern: sp.spmatrix, colors: np.ndarray) -> Recovery:
    """For `B = (H @ seeds(colors)).T`, shape (n_colors, n), a star coloring of H's pattern."""
    a = sp.csr_matrix(pattern, dtype=bool)
    p, i, j = _csr_entries(sp.csr_matrix(a + a.T, dtype=bool))
    n = p.shape[0]
    off = p.copy()
    off.setdiag(False)
    off.eliminate_zeros()
    k = int(colors.max(initial=-1)) + 1
    onehot = sp.csr_matrix((np.ones(n), (np.arange(n), colors)), shape=(n, k))
    counts = (sp.csr_matrix(off, dtype=float) @ onehot).toarray()  # neighbours of i with color c
    direct = (i == j) | (counts[i, colors[j]] == 1)
    return Recovery(p, np.where(direct, colors[j], colors[i]), np.where(direct, i, j))


def recover_columns(pattern: sp.spmatrix, colors: np.ndarray, b: np.ndarray) -> sp.csr_matrix:
    """J from `B = J @ seeds(colors)` (B: (m, n_colors))."""
    return column_recovery(pattern, colors)(np.ascontiguousarray(b.T))


def recover_rows(pattern: sp.spmatrix, colors: np.ndarray, b: np.ndarray) -> sp.csr_matrix:
    """J from `B = seeds(colors).T @ J` (B: (n_colors, n))."""
    return row_recovery(pattern, colors)(b)


def recover_symmetric(pattern: sp.spmatrix, colors: np.ndarray, b: np.ndarray) -> sp.csr_matrix:
    """H from `B = H @ seeds(colors)` (B: (n, n_colors)) for a star coloring of H's pattern."""
    return symmetric_recovery(pattern, colors)(np.ascontiguousarray(b.T))
