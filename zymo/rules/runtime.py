"""Helpers that generated derivative code calls (imported there as `_rt`).

Contract: small pure functions over NumPy values and Python scalars, written in
the subset Numba compiles (a later issue compiles them), each doing one thing the
rules or transforms need: sum an adjoint back to an operand's shape, the adjoints
of matrix products and reductions, trip counts of reversed loops.
"""
from __future__ import annotations

import numpy as np

# user functions generated code calls: inactive functions and custom rules (rules/custom.py)
USER: list = []


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


def reshape_shadow(du, u, x, dx):
    """`maybe_view_shadow(u, x, du, dx, True)` with the shadow first: second order reads the
    reverse program's reshape shadows through it (a rule whose result may view `du`)."""
    return maybe_view_shadow(u, x, du, dx, True)


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


# -- reductions and scans ------------------------------------------------------------------


def _axes(x, axis):
    """`axis` of a reduction of `x` as a tuple of non-negative ints (None: every axis)."""
    if axis is None:
        return tuple(range(np.ndim(x)))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    return tuple(a % np.ndim(x) for a in axes)


def prod_others(x, axis):
    """For each element of `x`, the product of the other elements it is reduced with (exact
    with zeros: exclusive products from the left times exclusive products from the right)."""
    if np.ndim(x) == 0:
        return np.ones_like(x)
    x = np.asarray(x)
    axes = _axes(x, axis)
    rest = [a for a in range(x.ndim) if a not in axes]
    perm = rest + list(axes)
    xt = np.transpose(x, perm)
    flat = xt.reshape(xt.shape[:len(rest)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], axis=-1), axis=-1), -1)
    return np.transpose((left * right).reshape(xt.shape), np.argsort(perm))


def centered(x, axis):
    """`x` minus its mean over `axis` (kept broadcastable)."""
    return x - np.mean(x, axis=axis, keepdims=True)


def cumsum_vjp(g, x, axis):
    """Adjoint of `np.cumsum(x, axis)`: reversed cumulative sums of `g`, in `x`'s shape."""
    if axis is None:
        flat = np.ravel(g)
        return np.reshape(np.flip(np.cumsum(np.flip(flat))), np.shape(x))
    if np.ndim(x) == 0:
        return np.reshape(g, ())
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


def _scan_layout(x, axis):
    """`x` with the scanned axis first (flattened when axis is None), and how to undo that."""
    x = np.asarray(x)
    if axis is None:
        return np.ravel(x), lambda r: np.reshape(r, x.shape)
    if x.ndim == 0:
        return np.reshape(x, (1,)), lambda r: np.reshape(r, ())
    a = axis % x.ndim
    return np.moveaxis(x, a, 0), lambda r: np.moveaxis(r, 0, a)


def cumprod_jvp(t, x, axis):
    """Tangent of `np.cumprod(x, axis)`: d_j = d_{j-1} x_j + p_{j-1} t_j (exact with zeros)."""
    xs, back = _scan_layout(x, axis)
    ts, _ = _scan_layout(np.broadcast_to(t, np.shape(x)), axis)
    d = np.empty(xs.shape, dtype=np.result_type(xs, ts))
    p = xs[0]
    d[0] = ts[0]
    for j in range(1, xs.shape[0]):
        d[j] = d[j - 1] * xs[j] + p * ts[j]
        p = p * xs[j]
    return d if axis is None else back(d)


def cumprod_vjp(g, x, axis):
    """Adjoint of `np.cumprod(x, axis)`: p_{i-1} s_i with s_i = g_i + x_{i+1} s_{i+1}."""
    xs, back = _scan_layout(x, axis)
    gs, _ = _scan_layout(g, axis)
    n = xs.shape[0]
    out = np.empty(xs.shape, dtype=np.result_type(xs, gs))
    s = gs[n - 1]
    out[n - 1] = s
    for i in range(n - 2, -1, -1):
        s = gs[i] + xs[i + 1] * s
        out[i] = s
    p = np.ones_like(xs[0])
    for i in range(n):
        out[i] = out[i] * p
        p = p * xs[i]
    return back(out)


def norm_grad(x, nrm, ord, axis, keepdims):
    """d norm / d x, elementwise, for vector p-norms (ord >= 1, inf, -inf) and the Frobenius norm
    (`nrm` is the norm)."""
    a = expand_reduced(nrm, x, axis, keepdims)
    if ord is None or ord == "fro" or ord == 2:
        if ord == 2 and axis is None and np.ndim(x) == 2:
            raise NotImplementedError("the derivative of the matrix 2-norm is not supported")
        return np.where(a == 0, 0.0 * x, x / np.where(a == 0, 1.0, a))
    if isinstance(ord, str):
        raise NotImplementedError(f"the derivative of norm ord={ord!r} is not supported")
    if np.isinf(ord):
        ax = tuple(range(np.ndim(x))) if axis is None else axis
        return np.sign(x) * extreme_mask(np.abs(x), nrm, ax, keepdims)
    if ord == 1:
        return np.sign(x)
    if ord < 1:
        raise NotImplementedError(f"the derivative of norm ord={ord} is not supported")
    return np.sign(x) * (np.abs(x) / np.where(a == 0, 1.0, a)) ** (ord - 1)


# -- shapes ------------------------------------------------------------------------------


def flatten(x):
    """`x.flatten()`: a C-ordered 1-d copy."""
    return np.array(np.ravel(x))


def broadcast_to(x, shape):
    """`np.broadcast_to` as fresh, writable memory."""
    return np.array(np.broadcast_to(x, shape))


def negate(shift):
    """`-shift` for an int or a tuple of ints (np.roll's shift)."""
    if isinstance(shift, tuple):
        return tuple(-s for s in shift)
    return -shift


def tile_vjp(g, x, reps):
    """Adjoint of `np.tile(x, reps)`: the tiles summed."""
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    d = max(np.ndim(x), len(reps))
    shape = (1,) * (d - np.ndim(x)) + tuple(np.shape(x))
    reps = (1,) * (d - len(reps)) + reps
    inter = []
    for r, n in zip(reps, shape):
        inter += [r, n]
    s = np.reshape(g, inter).sum(axis=tuple(range(0, 2 * d, 2)))
    return np.reshape(s, np.shape(x))


def repeat_vjp(g, x, repeats, axis):
    """Adjoint of `np.repeat(x, repeats, axis)`: the repeated copies summed."""
    xs = np.ravel(x) if axis is None else np.asarray(x)
    a = 0 if axis is None else axis % xs.ndim
    n = xs.shape[a]
    idx = np.repeat(np.arange(n), repeats)
    out = np.zeros(xs.shape, dtype=np.result_type(g))
    np.add.at(np.moveaxis(out, a, 0), idx, np.moveaxis(np.asarray(g), a, 0))
    return np.reshape(out, np.shape(x))


def diagonal(x, offset=0, axis1=0, axis2=1):
    """`np.diagonal` as fresh, writable memory."""
    return np.array(np.diagonal(x, offset, axis1, axis2))


def diag(x, k=0):
    """`np.diag`, with the diagonal of a matrix copied."""
    return np.array(np.diag(x, k))


def _diag_index(n1, n2, offset):
    i0, j0 = max(-offset, 0), max(offset, 0)
    m = max(0, min(n1 - i0, n2 - j0))
    return np.arange(m) + i0, np.arange(m) + j0


def diagonal_vjp(g, x, offset=0, axis1=0, axis2=1):
    """Adjoint of `np.diagonal(x, offset, axis1, axis2)`: `g` placed on that diagonal."""
    out = np.zeros(np.shape(x), dtype=np.result_type(g, x))
    view = np.moveaxis(out, (axis1, axis2), (-2, -1))
    i, j = _diag_index(view.shape[-2], view.shape[-1], offset)
    view[..., i, j] = g
    return out


def expand_diag(g, x, offset, axis1, axis2):
    """The adjoint `g` of a trace, repeated along the diagonal it sums."""
    view_shape = np.moveaxis(np.empty(np.shape(x), dtype=np.bool_), (axis1, axis2), (-2, -1)).shape
    i, _ = _diag_index(view_shape[-2], view_shape[-1], offset)
    return np.broadcast_to(np.expand_dims(g, -1), np.shape(g) + (len(i),))


def diag_vjp(g, x, k):
    """Adjoint of `np.diag(x, k)`."""
    if np.ndim(x) == 1:
        return np.array(np.diagonal(g, k))
    return diagonal_vjp(g, x, k)


def inner_vjp_a(g, a, b):
    """Adjoint of `a` in `np.inner(a, b)` (products over the last axes)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.sum(g * b) if np.ndim(a) == 0 else g * b
    nb = np.ndim(b) - 1
    return np.tensordot(g, b, axes=(list(range(np.ndim(g) - nb, np.ndim(g))), list(range(nb))))


def inner_vjp_b(g, a, b):
    """Adjoint of `b` in `np.inner(a, b)`."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.sum(g * a) if np.ndim(b) == 0 else g * a
    na = np.ndim(a) - 1
    r = np.tensordot(a, g, axes=(list(range(na)), list(range(na))))
    return np.moveaxis(r, 0, -1)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def tensordot_subscripts(na, nb, axes):
    """The einsum subscripts of `np.tensordot(a, b, axes)` for operands of na and nb dimensions."""
    if np.ndim(axes) == 0:
        ax_a, ax_b = list(range(na - axes, na)), list(range(axes))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if np.ndim(ax_a) == 0 else list(ax_a)
        ax_b = [ax_b] if np.ndim(ax_b) == 0 else list(ax_b)
    ax_a = [x % na for x in ax_a]
    ax_b = [x % nb for x in ax_b]
    la = list(_LETTERS[:na])
    lb = list(_LETTERS[na:na + nb])
    for i, j in zip(ax_a, ax_b):
        lb[j] = la[i]
    out = [la[i] for i in range(na) if i not in ax_a] + [lb[j] for j in range(nb) if j not in ax_b]
    return "".join(la) + "," + "".join(lb) + "->" + "".join(out)


def _einsum_parts(subscripts, n):
    s = subscripts.replace(" ", "")
    if "->" in s:
        ins, out = s.split("->")
        ins = ins.split(",")
    else:
        ins = s.split(",")
        letters = "".join(ins)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return ins[:n], out


def einsum_jvp(subscripts, k, t, a, b=None, c=None):
    """Tangent of `np.einsum(subscripts, a, b, c)` along operand `k` (linear in each operand)."""
    ops = [o for o in (a, b, c) if o is not None]
    ops[k] = t
    return np.einsum(subscripts, *ops)


def einsum_vjp(g, subscripts, k, a, b=None, c=None):
    """Adjoint of operand `k` of `np.einsum(subscripts, a, b, c)`: the einsum of the result's
    adjoint with the other operands, broadcast over indices only operand `k` has."""
    ops = [o for o in (a, b, c) if o is not None]
    ins, out = _einsum_parts(subscripts, len(ops))
    mine = ins[k]
    others = [ins[i] for i in range(len(ops)) if i != k]
    have = set(out).union(*others) if others else set(out)
    keep = "".join(ch for ch in mine if ch in have)
    r = np.einsum(",".join([out] + others) + "->" + keep, g, *[ops[i] for i in range(len(ops)) if i != k])
    # indices summed over in operand k alone: the adjoint is constant along them
    shape = np.shape(ops[k])
    full = [shape[i] if ch in have else 1 for i, ch in enumerate(mine)]
    r = np.reshape(r, full)
    return np.broadcast_to(r, shape).astype(np.result_type(g, ops[k]), copy=True) if r.shape != shape else r


def concat2(a, b, axis=0):
    """`np.concatenate((a, b), axis)`."""
    return np.concatenate((a, b), axis=axis)


def split_first(g, a, axis):
    """The part of `g` (adjoint of `concat2(a, b, axis)`) that came from `a`."""
    if axis is None:
        return np.reshape(g[:np.size(a)], np.shape(a))
    n = np.shape(a)[axis]
    return np.moveaxis(np.moveaxis(g, axis, 0)[:n], 0, axis)


def split_last(g, b, axis):
    """The part of `g` (adjoint of `concat2(a, b, axis)`) that came from `b`."""
    if axis is None:
        return np.reshape(g[np.size(g) - np.size(b):], np.shape(b))
    n = np.shape(b)[axis]
    m = np.shape(g)[axis]
    return np.moveaxis(np.moveaxis(g, axis, 0)[m - n:], 0, axis)


from .linalg_rt import *  # noqa: E402,F401,F403  (helpers of the linear-algebra rules)
from .second_rt import *  # noqa: E402,F401,F403  (derivatives of helpers: second order)


def linspace_unit(num, endpoint, like):
    """`np.linspace(0, 1, num, endpoint)` in the dtype of `like`."""
    return np.linspace(0.0, 1.0, num, endpoint=endpoint).astype(np.result_type(like))


def __getattr__(name):
    """`_rt.sp_special`, `_rt.sp_linalg`: SciPy's modules, imported when first used."""
    if name == "sp_special":
        import scipy.special

        return scipy.special
    if name == "sp_linalg":
        import scipy.linalg

        return scipy.linalg
    raise AttributeError(name)


def expm_frechet(a, e):
    """The Fréchet derivative of the matrix exponential at `a` in direction `e` (2-d)."""
    import scipy.linalg

    n = a.shape[-1]
    big = np.zeros((2 * n, 2 * n), dtype=np.result_type(a, e))
    big[:n, :n] = a
    big[n:, n:] = a
    big[:n, n:] = e
    return scipy.linalg.expm(big)[:n, n:]


def triangle(x, lower):
    """The lower (or upper) triangle of `x`."""
    return np.tril(x) if lower else np.triu(x)


def tri_solve_vjp_a(g, ans, a, lower):
    """Adjoint of `a` in `scipy.linalg.solve_triangular(a, b, lower=lower)`: triangular."""
    import scipy.linalg

    gb = scipy.linalg.solve_triangular(a, g, trans=1, lower=lower)
    full = np.outer(gb, ans) if np.ndim(ans) == 1 else gb @ ans.T
    return -triangle(full, lower)
