"""Dependency patterns of primitives: which input elements each result element depends on.

Contract: `prim_rows(call)` returns the boolean CSR rows (one per element of the result, C
order, columns = the function's inputs) of one `prim` op, from the rows of its operands
(`call.rows(k)`, `call.dset(k)`) and its concrete arguments and result. Patterns by rule:
- `nondiff` and `alloc` rules: no dependency.
- `elementwise` rules: each element depends on the elements it is broadcast from.
- data movement (copies, views that turned out to be copies, concatenate, stack, roll,
  tile, repeat, flip, pad, triu/tril, diag, take_along_axis, broadcast_to): the rule is
  run on arrays of element ids, which says where each result element comes from.
- reductions by `axis` (sum, mean, max, norm, var, logsumexp, ...): the union over the
  reduced elements; softmax-like and cumulative ops and sort: the union over the axis;
  diff: the window of `n + 1` elements; matmul/dot/inner (at most 2-d) and outer by their
  row/column structure, and by the nonzeros of an operand that is *fixed* (its values do
  not depend on the input: `call.fixed(k)`), so `A @ x` with a constant banded A is banded.
- any other rule: conservative, every result element depends on every element of every
  operand (always valid, never sparser than the truth).
`LINEAR` and `is_linear(call)` say which ops have a zero second derivative (the Hessian
pattern of `detect` adds the pairs of the result's inputs only for nonlinear ops).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import memory as M

DATA_MOVE = frozenset({
    "numpy.copy", "numpy.copy_flat", "numpy.roll", "numpy.tile", "numpy.repeat", "numpy.diag", "zymo.concat2",
    "numpy.concatenate", "numpy.stack", "numpy.hstack", "numpy.vstack", "numpy.broadcast_to", "numpy.triu",
    "numpy.tril", "numpy.pad", "numpy.take_along_axis",
})
REDUCE = frozenset({
    "numpy.sum", "numpy.mean", "numpy.max", "numpy.min", "numpy.amax", "numpy.amin", "numpy.prod", "numpy.var",
    "numpy.std", "numpy.linalg.norm", "numpy.nansum", "numpy.nanmean", "numpy.nanmax", "numpy.nanmin",
    "numpy.nanprod", "numpy.nanvar", "numpy.nanstd", "scipy.special.logsumexp",
})
ALONG_AXIS = frozenset({
    "scipy.special.softmax", "scipy.special.log_softmax", "numpy.cumsum", "numpy.cumprod", "numpy.nancumsum",
    "numpy.nancumprod", "numpy.sort",
})
PRODUCTS = frozenset({"matmul", "numpy.matmul", "numpy.dot", "numpy.inner"})
BILINEAR = frozenset({"mul", "numpy.multiply", "numpy.outer", "numpy.kron", "numpy.cross", "numpy.convolve",
                      "numpy.correlate", "numpy.tensordot", "numpy.einsum", "numpy.polyval"}) | PRODUCTS
DIVISIONS = frozenset({"truediv", "numpy.divide", "numpy.true_divide"})
LINEAR = frozenset({
    "add", "sub", "neg", "pos", "numpy.add", "numpy.subtract", "numpy.negative", "numpy.positive", "numpy.sum",
    "numpy.mean", "numpy.nansum", "numpy.cumsum", "numpy.nancumsum", "numpy.trace", "numpy.diff", "numpy.gradient",
    "builtins.float", "zymo.as_dtype", "numpy.real", "numpy.conjugate", "numpy.conj",
}) | DATA_MOVE


class Call:
    """One prim op being interpreted: its rule, concrete arguments and result, and access
    to its operands' dependency rows (given by the interpreter)."""

    def __init__(self, op: Any, rule: Any, vals: list, res: Any, n: int, rows: Callable[[int], sp.csr_matrix],
                 dset: Callable[[int], frozenset], run_with: Callable[[dict], Any],
                 fixed: Callable[[int], bool]) -> None:
        self.op, self.rule, self.key = op, rule, op.attrs["key"]
        self.vals, self.res, self.n = vals, res, n
        self.rows, self.dset, self.run_with, self.fixed = rows, dset, run_with, fixed

    @property
    def size(self) -> int:
        return int(np.size(self.res)) if isinstance(self.res, np.ndarray) else 1

    def data_args(self) -> list[int]:
        """Operand positions that can carry dependencies (arrays and non-empty sets)."""
        return [k for k, v in enumerate(self.vals)
                if (isinstance(v, np.ndarray) and v.dtype.kind in "fc") or (not isinstance(v, np.ndarray)
                                                                            and self.dset(k))]

    def bound(self) -> dict[str, Any]:
        """Rule parameter -> concrete argument, defaults included."""
        from ..ir.core import tree_map
        from ..transform.emit import _bound

        out: dict[str, Any] = {}
        try:
            for name, p in self.rule.signature().parameters.items():
                if p.default is not p.empty:
                    out[name] = p.default
        except TypeError:
            pass
        for p, t in _bound(self.rule, self.op):
            out[p] = tree_map(t, lambda k: self.vals[k], lambda c: c)
        return out

    def array_arg(self) -> int | None:
        for k, v in enumerate(self.vals):
            if isinstance(v, np.ndarray):
                return k
        return None


def prim_rows(c: Call) -> sp.csr_matrix:
    rule, key = c.rule, c.key
    if rule.nondiff or rule.alloc:
        return M.empty(c.size, c.n)
    if not c.data_args():
        return M.empty(c.size, c.n)
    try:
        if rule.elementwise or key in ("zymo.as_dtype", "builtins.float"):
            return _elementwise(c)
        if key in DATA_MOVE or rule.view or rule.maybe_view:
            return _moved(c)
        if key in REDUCE:
            return _reduced(c, along=False)
        if key in ALONG_AXIS:
            return _reduced(c, along=True)
        if key == "numpy.diff":
            return _diff(c)
        if key in PRODUCTS:
            rows = _product(c)
            if rows is not None:
                return rows
        if key == "numpy.outer":
            return _outer(c)
    except _Conservative:
        pass
    return conservative(c)


class _Conservative(Exception):
    pass


def conservative(c: Call) -> sp.csr_matrix:
    u = M.sets_union(c.dset(k) for k in range(len(c.vals)))
    if c.size * len(u) > 50_000_000:
        from ..errors import ZymoUsageError

        raise ZymoUsageError(f"sparsity detection: {c.key} (line {getattr(c.op.loc, 'line', '?')}) has no "
                             f"dependency pattern in zymo/sparse/patterns.py, and the conservative one is dense "
                             f"({c.size} x {len(u)}); use the dense jacobian/hessian for this function")
    return M.broadcast_set(u, c.size, c.n)


def _shape(c: Call) -> tuple:
    return np.shape(c.res)


def _others(c: Call, used: set[int]) -> sp.csr_matrix | None:
    """Dependencies of the data operands a pattern does not place (scalars given to a data
    move, weights): conservatively every result element."""
    u = M.sets_union(c.dset(k) for k in c.data_args() if k not in used)
    return M.broadcast_set(u, c.size, c.n) if u else None


def _combine(parts: list[sp.csr_matrix | None], c: Call) -> sp.csr_matrix:
    out = None
    for p in parts:
        if p is not None:
            out = p if out is None else out + p
    return M.empty(c.size, c.n) if out is None else M.bool_(out)


def _elementwise(c: Call) -> sp.csr_matrix:
    shape = _shape(c)
    parts = []
    for k in c.data_args():
        v = c.vals[k]
        if isinstance(v, np.ndarray):
            try:
                idx = np.broadcast_to(np.arange(v.size).reshape(v.shape), shape)
            except ValueError:
                raise _Conservative() from None
            parts.append(M.take_rows(c.rows(k), idx))
        else:
            parts.append(M.broadcast_set(c.dset(k), c.size, c.n))
    return _combine(parts, c)


def _moved(c: Call) -> sp.csr_matrix:
    subst: dict[int, Any] = {}
    stacks = [M.empty(1, c.n)]  # id 0: no element (pad's constants, triu's zeros)
    start = 1
    for k in c.data_args():
        v = c.vals[k]
        if isinstance(v, np.ndarray):
            subst[k] = (np.arange(v.size, dtype=np.float64) + start).reshape(v.shape)
            stacks.append(c.rows(k))
            start += v.size
    ids = np.asarray(c.run_with(subst))
    if ids.size != c.size or start > 2**52:
        raise _Conservative()
    table = M.bool_(sp.vstack(stacks, format="csr"))
    return _combine([M.take_rows(table, ids.astype(np.int64).reshape(-1)), _others(c, set(subst))], c)


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    return tuple(sorted(int(a) % ndim for a in axis))


def _groups(shape: tuple, axes: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """Group id of each element (C order) when the `axes` are reduced, and the group count."""
    ids = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
    moved = np.moveaxis(ids, axes, tuple(range(len(shape) - len(axes), len(shape))))
    n_groups = int(np.prod([shape[a] for a in range(len(shape)) if a not in axes], dtype=np.int64))
    flat = moved.reshape(n_groups, -1)
    groups = np.empty(ids.size, dtype=np.int64)
    groups[flat] = np.arange(n_groups)[:, None]
    return groups, n_groups


def _reduced(c: Call, along: bool) -> sp.csr_matrix:
    k = c.array_arg()
    if k is None or k not in c.data_args():
        raise _Conservative()
    x = c.vals[k]
    b = c.bound()
    axis = b.get("axis")
    if c.key == "numpy.linalg.norm" and axis is None and b.get("ord") is not None and x.ndim == 2:
        axis = None
    if along and axis is None and c.key != "numpy.sort":
        x_shape = (x.size,)  # cumsum/softmax with axis=None work on the flattened array
    else:
        x_shape = x.shape
    groups, n_groups = _groups(x_shape, _axes(axis, len(x_shape)))
    grouped = M.select(groups, n_groups, c.rows(k))
    if along:
        if c.size != x.size:
            raise _Conservative()
        main = M.take_rows(grouped, groups)
    else:
        if n_groups != c.size:
            raise _Conservative()
        main = grouped
    return _combine([main, _others(c, {k})], c)


def _diff(c: Call) -> sp.csr_matrix:
    x = c.vals[0]
    b = c.bound()
    n, ax = int(b.get("n", 1)), int(b.get("axis", -1)) % max(x.ndim, 1)
    if not isinstance(x, np.ndarray) or n < 0 or b.get("prepend") is not None or b.get("append") is not None:
        raise _Conservative()
    ids = np.arange(x.size).reshape(x.shape)
    out_len = c.res.shape[ax]
    rows = c.rows(0)
    parts = []
    for s in range(n + 1):
        sl = [slice(None)] * x.ndim
        sl[ax] = slice(s, s + out_len)
        parts.append(M.take_rows(rows, ids[tuple(sl)]))
    return _combine(parts + [_others(c, {0})], c)


def _product(c: Call) -> sp.csr_matrix | None:
    a, b = c.vals[0], c.vals[1]
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.ndim not in (1, 2) or b.ndim not in (1, 2):
        if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
            return _elementwise(c)  # a product with a scalar
        return None
    if c.key == "numpy.inner" and (a.ndim, b.ndim) != (1, 1):
        return None
    m, k = (1, a.shape[0]) if a.ndim == 1 else a.shape
    p = 1 if b.ndim == 1 else b.shape[1]
    if m * p != c.size:
        return None
    a2, b2 = a.reshape(m, k), b.reshape(k, p)
    parts = []
    if 0 in c.data_args():  # out[i, j] <- a[i, l] for every l (or the l with b[l, j] != 0)
        if c.fixed(1):
            ll, jj = np.nonzero(b2)
            o = (np.arange(m)[:, None] * p + jj).reshape(-1)
            col = (np.arange(m)[:, None] * k + ll).reshape(-1)
        else:
            o = np.repeat(np.arange(m * p), k)
            col = (o // p) * k + np.tile(np.arange(k), m * p)
        sa = sp.csr_matrix((np.ones(len(o), dtype=bool), (o, col)), shape=(m * p, m * k))
        parts.append(sa @ c.rows(0))
    if 1 in c.data_args():  # out[i, j] <- b[l, j] for every l (or the l with a[i, l] != 0)
        if c.fixed(0):
            ii, ll = np.nonzero(a2)
            o = (ii[:, None] * p + np.arange(p)).reshape(-1)
            col = (ll[:, None] * p + np.arange(p)).reshape(-1)
        else:
            o = np.repeat(np.arange(m * p), k)
            col = np.tile(np.arange(k), m * p) * p + o % p
        sb = sp.csr_matrix((np.ones(len(o), dtype=bool), (o, col)), shape=(m * p, k * p))
        parts.append(sb @ c.rows(1))
    return _combine(parts, c)


def _outer(c: Call) -> sp.csr_matrix:
    a, b = c.vals[0], c.vals[1]
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
        raise _Conservative()
    m, p = a.size, b.size
    parts = []
    if 0 in c.data_args():
        parts.append(M.take_rows(c.rows(0), np.repeat(np.arange(m), p)))
    if 1 in c.data_args():
        parts.append(M.take_rows(c.rows(1), np.tile(np.arange(p), m)))
    return _combine(parts, c)


def is_linear(c: Call) -> bool:
    """Whether the op's result is linear in its inputs' dependencies (zero second derivative)."""
    rule, key = c.rule, c.key
    if rule.nondiff or rule.alloc or rule.view or rule.maybe_view or key in LINEAR:
        return True
    data = c.data_args()
    if key in BILINEAR:
        return len(data) <= 1
    if key in DIVISIONS:
        return 1 not in data
    return False
