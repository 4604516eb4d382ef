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
    elif lead < 0:
        # a store that drops leading length-1 dimensions (`out[0] = a`, `a` of shape (1, n)):
        # the adjoint is `a`'s, without them
        if any(n != 1 for n in shape[:-lead]):
            raise ValueError(f"zymo: an adjoint of shape {g.shape} does not broadcast to {shape}")
        g = g.reshape((1,) * -lead + g.shape)
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
    """Broadcast the adjoint `g` of a reduction of `x` over `axis` back to `x`'s shape (a
    read-only view); for a number `x` (`np.sum(np.mean(a))`), a number, which an adjoint
    accumulates into by rebinding."""
    if np.ndim(x) == 0:
        return np.asarray(g)[()]
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


def grow_stack(buf, row, need):
    """A stacked cache (`(entries, *row.shape)`) with room for at least `need` entries and
    twice the old ones, the old entries copied; its rows take `row`'s shape."""
    n = buf.shape[0]
    if n > 0 and buf.shape[1:] != row.shape:
        raise ValueError("zymo internal error: a stacked cache's rows changed shape")
    out = np.empty((max(2 * n + 1, need),) + row.shape, buf.dtype)
    if n > 0:
        out[:n] = buf
    return out


def reuse_buffer(tape, slot, size, dtype):
    """Slot `slot` of a tape passed back in, if it can hold `size` entries; else a new buffer."""
    if tape is not None and tape[slot] is not None:  # None: a checkpointed loop that did not tape
        buf = tape[slot]
        if buf.dtype == dtype and buf.shape[0] >= size:
            return buf
    return np.empty(max(size, 1), dtype)


def reuse_list(tape, slot):
    """A list cache from a tape passed back in (emptied), or a new one."""
    if tape is not None and tape[slot] is not None:
        lst = tape[slot]
        lst.clear()
        return lst
    return []


def fdiv(a, b):
    """`a / b`, where a zero divisor gives inf or nan as IEEE (NumPy's) division does, not
    Python's `ZeroDivisionError`: what derivative rules of numbers divide with
    (`transform.emit.IEEEDivisions`). Arrays divide as NumPy divides them."""
    try:
        return a / b
    except ZeroDivisionError:
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.true_divide(a, b)
        return q.item() if isinstance(q, np.generic) else q


def fpow(a, b):
    """`a ** b`, where a zero base and a negative exponent give inf as NumPy's power does, not
    Python's `ZeroDivisionError`: what derivative rules of numbers raise to powers with
    (`transform.emit.IEEEDivisions`). Arrays compute as NumPy computes them."""
    try:
        return a ** b
    except ZeroDivisionError:
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.power(np.float64(a), b)
        return q.item() if isinstance(q, np.generic) else q


def span(lo, hi):
    """`hi - lo` as an int, or 0 where `hi <= lo`: compared before subtracting, so unsigned
    bounds never wrap (a trip count written out: `transform.emit.trip_count`)."""
    return int(hi) - int(lo) if hi > lo else 0


def trip(start, stop, step):
    """The number of iterations of `range(start, stop, step)` (as Python ints, as `range`
    reads its bounds: unsigned NumPy ints would wrap round below zero)."""
    start, stop, step = int(start), int(stop), int(step)
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
    if x.size == 0:  # nothing to multiply: an empty array of x's shape
        return np.ones_like(x)
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
    if xs.shape[0] == 0:  # an empty scan: an empty tangent
        return d if axis is None else back(d)
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
    if n == 0:  # an empty scan: an empty adjoint
        return back(out)
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


def broadcast_to(array, shape):
    """`np.broadcast_to` as fresh, writable memory."""
    return np.array(np.broadcast_to(array, shape))


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


def diagonal(a, offset=0, axis1=0, axis2=1):
    """`np.diagonal(a, offset, axis1, axis2)`: NumPy's read-only view of the diagonal (the
    Numba backend's twin returns a view of 2-d arrays too, `numba_shape._diagonal`)."""
    return np.diagonal(a, offset, axis1, axis2)


def diagonal_view(x, offset=0, axis1=0, axis2=1):
    """A writable view of the diagonal `np.diagonal(x, offset, axis1, axis2)` reads (the
    diagonal last): the shadow of a diagonal, which adjoints accumulate into."""
    v = np.moveaxis(x, (axis1, axis2), (-2, -1))
    i0, j0 = max(-offset, 0), max(offset, 0)
    m = max(0, min(v.shape[-2] - i0, v.shape[-1] - j0))
    v = v[..., i0:, j0:]
    return np.lib.stride_tricks.as_strided(v, v.shape[:-2] + (m,), v.strides[:-2] + (v.strides[-2] + v.strides[-1],))


def diag(v, k=0):
    """`np.diag(v, k)`: of a vector a new matrix, of a matrix NumPy's read-only view of its
    diagonal (rule `numpy.diag_view`)."""
    return np.diag(v, k)


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


def einsum_expand(subscripts, shapes):
    """The operands' and the output's subscripts of `np.einsum(subscripts, *operands)` for
    operands of `shapes`, written out: spaces dropped, the implicit output made explicit
    (the labels used once, in alphabetical order, after the ellipsis' dimensions) and each
    ellipsis replaced by letters of its own, right-aligned as NumPy broadcasts them."""
    s = subscripts.replace(" ", "")
    if "->" in s:
        ins_s, out = s.split("->")
    else:
        ins_s, out = s, None
    ins = ins_s.split(",")
    if out is None:
        letters = ins_s.replace(".", "").replace(",", "")
        once = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        out = ("..." if "..." in ins_s else "") + once
    free = [c for c in _LETTERS if c not in s]
    nell = max([len(sh) - (len(spec) - 3) for spec, sh in zip(ins, shapes) if "..." in spec] or [0])
    ell = "".join(free[:nell])
    ins = [spec.replace("...", ell[nell - (len(sh) - (len(spec) - 3)):]) if "..." in spec else spec
           for spec, sh in zip(ins, shapes)]
    return ins, out.replace("...", ell)


def einsum_is_view(subscripts, ndims):
    """Whether `np.einsum(subscripts, x)` is a view of `x` (for operands of `ndims`
    dimensions): one operand of at least one dimension whose labels all reach the output,
    in any order (a permutation, a diagonal when a label repeats). NumPy copies when a label
    is summed (`'ij->i'`, the trace `'ii'`)."""
    if len(ndims) != 1 or ndims[0] < 1 or subscripts.count(",") != 0:
        return False
    ins, out = einsum_expand(subscripts, [(1,) * ndims[0]])
    return set(ins[0]) == set(out) and len(set(out)) == len(out)


def einsum_jvp(subscripts, k, t, *ops):
    """Tangent of `np.einsum(subscripts, *ops)` along operand `k` (linear in each operand)."""
    ops = [o for o in ops if o is not None]
    ops[k] = t
    return np.einsum(subscripts, *ops)


def _unique(s):
    return "".join(c for i, c in enumerate(s) if c not in s[:i])


def einsum_vjp(g, subscripts, k, *ops):
    """Adjoint of operand `k` of `np.einsum(subscripts, *ops)`: the einsum of the result's
    adjoint with the other operands, broadcast along the labels only operand `k` has (and
    its length-1 dimensions the others broadcast), placed on the diagonal where a label
    repeats within the operand (`'ii->i'`, `'ii'`)."""
    ops = [o for o in ops if o is not None]
    shapes = [np.shape(o) for o in ops]
    ins, out = einsum_expand(subscripts, shapes)
    mine, shape = ins[k], shapes[k]
    size = {}
    for spec, sh in zip(ins, shapes):
        for ch, n in zip(spec, sh):
            size[ch] = max(size.get(ch, 1), n)
    others = [ins[i] for i in range(len(ops)) if i != k]
    have = set(out).union(*others) if others else set(out)
    mysize = dict(zip(mine, shape))
    uniq = _unique(mine)
    keep = "".join(ch for ch in uniq if ch in have and not (mysize[ch] == 1 and size[ch] > 1))
    r = np.einsum(",".join([out] + others) + "->" + keep, g, *[ops[i] for i in range(len(ops)) if i != k])
    dtype = np.result_type(g, ops[k])
    # labels summed in operand k alone, or broadcast from length 1 (here or in another operand),
    # have length 1 in r: broadcast below
    r = np.reshape(r, [np.shape(r)[keep.index(ch)] if ch in keep else 1 for ch in uniq])
    if uniq == mine:
        return np.broadcast_to(r, shape).astype(dtype, copy=True) if r.shape != shape else r.astype(dtype)
    res = np.zeros(shape, dtype)
    # the diagonal of res that the operand's repeated labels select: one stride per label, the sum of its axes'
    strides = [sum(res.strides[i] for i, c in enumerate(mine) if c == ch) for ch in uniq]
    diag = np.lib.stride_tricks.as_strided(res, [mysize[ch] for ch in uniq], strides)
    diag[...] = r
    return res


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


from .fft_rt import *  # noqa: E402, F403  (helpers of the FFT rules: rules/fft.py)
from .linalg_rt import *  # noqa: E402, F403  (helpers of the linear-algebra rules)
from .linalg_rt import cholesky_jvp, cholesky_vjp  # noqa: E402  (used below)
from .second_rt import *  # noqa: E402, F403  (derivatives of helpers: second order)
from .sorting_rt import *  # noqa: E402, F403  (helpers of the sorting and lookup rules)
from .statistics_rt import *  # noqa: E402, F403  (helpers of the statistics rules)


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


def add_at(a, idx, v, out=None):
    """`np.add.at(a, idx, v)` written as a function of its operands: the result is `out`
    (which the frontend makes `a` itself), holding `a` with `v` added at `idx`."""
    if out is None:
        out = a.copy()
    elif out is not a:
        out[...] = a
    np.add.at(out, idx, v)
    return out


# -- scipy.linalg factor/solve pairs (rules/scipy_.py) ----------------------------------
def _outer_or_mat(y, x):
    """`y x^T` for vectors (an outer product) or matrices (right-hand sides in columns)."""
    return np.outer(y, x) if np.ndim(x) == 1 else y @ x.T


def cho_factor_c(a, lower=False, overwrite_a=False, check_finite=True):
    """The first element of `scipy.linalg.cho_factor(a, lower)`: the Cholesky factor in
    one triangle, `a`'s own entries in the other (SciPy leaves them: `clean=False`)."""
    import scipy.linalg

    return scipy.linalg.cho_factor(a, lower=lower, check_finite=check_finite)[0]


def cho_factor_lower(a, lower=False, overwrite_a=False, check_finite=True):
    """The second element of `scipy.linalg.cho_factor`: the `lower` flag."""
    return bool(lower)


def cho_factor_jvp(t, c, lower):
    """Tangent of `cho_factor_c`: the factor's (cholesky_jvp of the triangle that is read),
    and `t` itself in the other triangle."""
    if lower:
        return np.tril(cholesky_jvp(t, np.tril(c))) + np.triu(t, 1)
    return np.triu(cholesky_jvp(t.T, np.triu(c).T).T) + np.tril(t, -1)


def cho_factor_vjp(g, c, lower):
    """Adjoint of `a` in `cho_factor_c`: the factor's part reaches the triangle read."""
    if lower:
        return cholesky_vjp(np.tril(g), np.tril(c)) + np.triu(g, 1)
    return cholesky_vjp(np.triu(g).T, np.triu(c).T).T + np.tril(g, -1)


def cho_solve(c, lower, b, overwrite_b=False, check_finite=True):
    """`scipy.linalg.cho_solve((c, lower), b)` with the factor tuple unpacked."""
    import scipy.linalg

    return scipy.linalg.cho_solve((c, lower), b, check_finite=check_finite)


def _cho_tri(c, lower):
    return np.tril(c) if lower else np.triu(c)


def cho_solve_jvp_c(t, c, lower, ans):
    """Tangent of `x = A^-1 b`, `A = L L^T` (or `U^T U`), along the factor's tangent `t`
    (its unused triangle ignored): `-A^-1 dA x`."""
    f, df = _cho_tri(c, lower), _cho_tri(t, lower)
    da = df @ f.T + f @ df.T if lower else df.T @ f + f.T @ df
    return -cho_solve(c, lower, da @ ans)


def cho_solve_vjp_c(g, c, lower, ans):
    """Adjoint of the factor: with `gA = -A^-1 g x^T`, `tril((gA + gA^T) L)` (lower) or
    `triu(U (gA + gA^T))` (upper)."""
    ga = -_outer_or_mat(cho_solve(c, lower, g), ans)
    s = ga + ga.T
    return np.tril(s @ np.tril(c)) if lower else np.triu(np.triu(c) @ s)


def lu_factor_lu(a, overwrite_a=False, check_finite=True):
    """The first element of `scipy.linalg.lu_factor(a)`: L (unit diagonal, not stored)
    below the diagonal, U on and above it."""
    import scipy.linalg

    return scipy.linalg.lu_factor(a, check_finite=check_finite)[0]


def lu_factor_piv(a, overwrite_a=False, check_finite=True):
    """The second element of `scipy.linalg.lu_factor(a)`: LAPACK's row swaps, as int64."""
    import scipy.linalg

    return scipy.linalg.lu_factor(a, check_finite=check_finite)[1].astype(np.int64)


def _lu_perm(piv, n):
    """`perm` with `P^T M == M[perm]` for `A = P L U` (LAPACK's swaps applied in order)."""
    perm = np.arange(n)
    for i in range(len(piv)):
        j = piv[i]
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _lu_parts(lu):
    n = lu.shape[0]
    return np.tril(lu, -1) + np.eye(n, dtype=lu.dtype), np.triu(lu)


def lu_factor_jvp(t, lu, piv):
    """Tangent of the packed factors: `F = L^-1 P^T dA U^-1`, `dL = L tril(F, -1)`,
    `dU = triu(F) U` (square `a`)."""
    l, u = _lu_parts(lu)
    pt = t[_lu_perm(piv, lu.shape[0])]
    f = np.linalg.solve(u.T, np.linalg.solve(l, pt).T).T
    return l @ np.tril(f, -1) + np.triu(f) @ u


def lu_factor_vjp(g, lu, piv):
    """Adjoint of `a`: `P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T`."""
    l, u = _lu_parts(lu)
    gf = np.tril(l.T @ np.tril(g, -1), -1) + np.triu(np.triu(g) @ u.T)
    m = np.linalg.solve(l.T, np.linalg.solve(u, gf.T).T)
    out = np.empty_like(m)
    out[_lu_perm(piv, lu.shape[0])] = m
    return out


def lu_solve(lu, piv, b, trans=0, overwrite_b=False, check_finite=True):
    """`scipy.linalg.lu_solve((lu, piv), b, trans)` with the factor tuple unpacked."""
    import scipy.linalg

    return scipy.linalg.lu_solve((lu, piv), b, trans=trans, check_finite=check_finite)


def lu_solve_jvp_lu(t, lu, piv, ans):
    """Tangent of `x = A^-1 b`, `A = P L U`, along the packed factors' tangent `t`."""
    l, u = _lu_parts(lu)
    w = np.tril(t, -1) @ (u @ ans) + l @ (np.triu(t) @ ans)
    pw = np.empty_like(w)
    pw[_lu_perm(piv, lu.shape[0])] = w
    return -lu_solve(lu, piv, pw)


def lu_solve_vjp_lu(g, lu, piv, ans):
    """Adjoint of the packed factors: with `gA = -A^-T g x^T`,
    `tril(P^T gA U^T, -1) + triu(L^T P^T gA)`."""
    l, u = _lu_parts(lu)
    pga = -_outer_or_mat(lu_solve(lu, piv, g, trans=1), ans)[_lu_perm(piv, lu.shape[0])]
    return np.tril(pga @ u.T, -1) + np.triu(l.T @ pga)


def as_dtype(x, dtype):
    """A loop-carried float array whose dtype widens (float32 -> float64): a converted copy."""
    return x.astype(dtype)


# -- array functions (rules/arrays.py) ------------------------------------------------------------


def cross_vjp(g, a, b, which, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Adjoint of `a` (which=0) or `b` (which=1) in `np.cross(a, b, ...)` of 3-vectors:
    <g, a x b> = <a, b x g> = <b, g x a>, summed back over broadcast dimensions."""
    if axis is not None:
        axisa = axisb = axisc = axis
    am, bm = np.moveaxis(a, axisa, -1), np.moveaxis(b, axisb, -1)
    if am.shape[-1] != 3 or bm.shape[-1] != 3:
        raise NotImplementedError("zymo differentiates np.cross of 3-vectors only (2-vectors are deprecated "
                                  "by NumPy)")
    gm = np.moveaxis(g, axisc, -1)
    if which == 0:
        return np.moveaxis(unbroadcast(np.cross(bm, gm), am), -1, axisa)
    return np.moveaxis(unbroadcast(np.cross(gm, am), bm), -1, axisb)


def _kron_layout(g, a, b):
    nd = max(np.ndim(a), np.ndim(b))
    sa = (1,) * (nd - np.ndim(a)) + tuple(np.shape(a))
    sb = (1,) * (nd - np.ndim(b)) + tuple(np.shape(b))
    inter = []
    for m, n in zip(sa, sb):
        inter += [m, n]
    gg = np.reshape(g, inter)
    gg = np.transpose(gg, list(range(0, 2 * nd, 2)) + list(range(1, 2 * nd, 2)))
    return nd, sa, sb, gg


def kron_vjp(g, a, b, which):
    """Adjoint of `a` (which=0) or `b` (which=1) in `np.kron(a, b)`: the result's blocks are
    a[i] * b, so g (read as blocks) contracted with the other operand."""
    nd, sa, sb, gg = _kron_layout(g, a, b)
    if which == 0:
        r = np.tensordot(gg, np.reshape(b, sb), axes=(list(range(nd, 2 * nd)), list(range(nd))))
        return np.reshape(r, np.shape(a))
    r = np.tensordot(np.reshape(a, sa), gg, axes=(list(range(nd)), list(range(nd))))
    return np.reshape(r, np.shape(b))


def _conv_start(na, nv, mode, kind):
    """Where `kind`'s `mode` result starts in the full convolution of lengths na and nv."""
    lo = min(na, nv)
    if mode == "full":
        return 0
    if mode == "valid":
        return lo - 1
    if kind == "np.convolve":
        return (lo - 1) // 2
    if kind == "np.correlate":
        return (lo - 1) // 2 if na >= nv else lo // 2
    return (na + nv - 1 - na) // 2  # scipy.signal: centred on in1


def conv_vjp(g, a, v, mode, which, kind):
    """Adjoint of `a` (which=0) or `v` (which=1) in the 1-d convolution or correlation `kind`
    (`np.convolve`, `np.correlate`, `scipy.signal.convolve`, `scipy.signal.correlate`) with
    `mode` full, same or valid: `g` placed in the full result, correlated with the other
    operand (a correlation is the convolution with `v` reversed)."""
    a, v, g = np.asarray(a), np.asarray(v), np.asarray(g)
    na, nv = a.shape[0], v.shape[0]
    mode = {"f": "full", "s": "same", "v": "valid"}.get(mode, mode)
    full = np.zeros(na + nv - 1, dtype=np.result_type(g, a, v))
    start = _conv_start(na, nv, mode, kind)
    full[start:start + g.shape[0]] = g
    corr = kind.endswith("correlate")
    w = v[::-1] if corr else v
    if which == 0:
        return np.correlate(full, w, "valid")
    dw = np.correlate(full, a, "valid")
    return dw[::-1] if corr else dw


def gradient_vjp(g, f, spacing=1.0, axis=None, edge_order=1):
    """Adjoint of `np.gradient(f, spacing, axis=axis, edge_order=edge_order)` along one axis
    (the transpose of its difference stencils; a scalar spacing)."""
    f = np.asarray(f)
    ax = 0 if axis is None else axis % f.ndim
    gm = np.moveaxis(np.asarray(g), ax, 0) / spacing
    out = np.zeros(np.moveaxis(f, ax, 0).shape, dtype=np.result_type(g, f, 1.0))
    out[2:] += 0.5 * gm[1:-1]
    out[:-2] -= 0.5 * gm[1:-1]
    if edge_order == 1:
        out[1] += gm[0]
        out[0] -= gm[0]
        out[-1] += gm[-1]
        out[-2] -= gm[-1]
    else:
        out[0] -= 1.5 * gm[0]
        out[1] += 2.0 * gm[0]
        out[2] -= 0.5 * gm[0]
        out[-1] += 1.5 * gm[-1]
        out[-2] -= 2.0 * gm[-1]
        out[-3] += 0.5 * gm[-1]
    return np.moveaxis(out, 0, ax)


def diff_vjp(g, a, n=1, axis=-1):
    """Adjoint of `np.diff(a, n, axis)`: the transposed difference, n times."""
    for _ in range(n):
        width = [(0, 0)] * np.ndim(g)
        width[axis % np.ndim(g)] = (1, 1)
        g = -np.diff(np.pad(g, width), axis=axis)
    return g


def rollaxis_perm(ndim, axis, start=0):
    """The axes `np.rollaxis(a, axis, start)` transposes `a` by."""
    axis = axis % ndim
    if start < 0:
        start += ndim
    if axis < start:
        start -= 1
    axes = list(range(ndim))
    axes.remove(axis)
    axes.insert(start, axis)
    return tuple(axes)


def rollaxis_vjp(g, a, axis, start=0):
    """Adjoint of `np.rollaxis(a, axis, start)`: the inverse transpose."""
    return np.transpose(g, np.argsort(rollaxis_perm(np.ndim(a), axis, start)))


def pad_index(shape, pad_width, mode):
    """`np.pad` of the flat indices of an array of `shape` (-1 where a constant is padded):
    every supported mode gathers elements of the input."""
    idx = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    if mode == "constant":
        return np.pad(idx, pad_width, mode="constant", constant_values=-1)
    return np.pad(idx, pad_width, mode=mode)


def pad_jvp(t, pad_width, mode):
    """Tangent of `np.pad(array, pad_width, mode, ...)`: the padding of the tangent (zeros for
    mode constant: the constant's derivative)."""
    return np.pad(t, pad_width, mode=mode)


def pad_vjp(g, array, pad_width, mode):
    """Adjoint of `np.pad(array, pad_width, mode)`: the adjoint of each result element summed
    into the input element it copies."""
    idx = pad_index(np.shape(array), pad_width, mode).ravel()
    gf = np.ravel(g)
    keep = idx >= 0
    s = np.bincount(idx[keep], weights=gf[keep], minlength=int(np.size(array)))
    return np.reshape(s, np.shape(array)).astype(np.result_type(g, array))


def sp_convolve(in1, in2, mode="full", method="auto"):
    """`scipy.signal.convolve`."""
    import scipy.signal

    return scipy.signal.convolve(in1, in2, mode=mode, method=method)


def sp_correlate(in1, in2, mode="full", method="auto"):
    """`scipy.signal.correlate`."""
    import scipy.signal

    return scipy.signal.correlate(in1, in2, mode=mode, method=method)


from .special_rt import *  # noqa: E402, F403  (helpers of the scipy.special rules: rules/special.py)


def imag_copy(x):
    """Im(x) as fresh memory (NumPy's `np.imag` of an array is a view; zymo's rule is not)."""
    return np.imag(x).copy() if isinstance(x, np.ndarray) else np.imag(x)
