"""Runtime helpers of the shape and array-function rules (`rules/shape.py`, `rules/arrays.py`).

Contract: pure functions over NumPy arrays (compiled twins: `codegen/numba/twins/arrays.py`):
reshapes and their adjoints, diagonals, einsum/tensordot subscripts, concatenation and
splitting, and the adjoints of `cross`, `kron`, the convolutions, `gradient`, `diff`,
`rollaxis`, `pad`, `tile`, `repeat`.
"""
from __future__ import annotations

import numpy as np

from .core import unbroadcast

__all__ = [
    "flatten", "broadcast_to", "negate", "tile_vjp", "repeat_vjp", "diagonal", "diagonal_view", "fill_diagonal",
    "diag",
    "diagonal_vjp", "expand_diag", "diag_vjp", "inner_vjp_a", "inner_vjp_b", "tensordot_subscripts",
    "einsum_expand", "einsum_is_view", "einsum_jvp", "einsum_vjp", "concat2", "split_first", "split_last",
    "cross_vjp", "kron_vjp", "conv_vjp", "gradient_vjp", "diff_vjp", "rollaxis_perm", "rollaxis_vjp", "pad_index",
    "pad_jvp", "pad_vjp", "sp_convolve", "sp_correlate",
]

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
    Numba backend's twin returns a view of 2-d arrays too, `twins/arrays.py`)."""
    return np.diagonal(a, offset, axis1, axis2)


def diagonal_view(x, offset=0, axis1=0, axis2=1):
    """A writable view of the diagonal `np.diagonal(x, offset, axis1, axis2)` reads (the
    diagonal last): the shadow of a diagonal, which adjoints accumulate into."""
    if offset == 0 and x.ndim == 2 and x.shape[0] == x.shape[1] and type(x) is np.ndarray:
        return np.einsum("ii->i", x)  # the same view, without `as_strided`'s cost (7 us against 0.9)
    v = np.moveaxis(x, (axis1, axis2), (-2, -1))
    i0, j0 = max(-offset, 0), max(offset, 0)
    m = max(0, min(v.shape[-2] - i0, v.shape[-1] - j0))
    v = v[..., i0:, j0:]
    return np.lib.stride_tricks.as_strided(v, v.shape[:-2] + (m,), v.strides[:-2] + (v.strides[-2] + v.strides[-1],))


def fill_diagonal(x, n, value):
    """What `for i in range(n): x[i, i] = value` does to a matrix `x`, to the bit, warnings
    and errors included (`codegen/fills.py`): on a writable float or complex `ndarray`, an int
    `n` and a `value` its element type holds exactly (so that no store rounds, overflows or
    warns), the first `n` diagonal elements set through one view, and where `n` passes an axis
    the elements before it set and then NumPy's IndexError raised by the element store the
    loop fails on; on anything else the loop itself."""
    if not (type(x) is np.ndarray and x.ndim == 2 and x.dtype.kind in "fc" and x.flags.writeable
            and isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))):
        _diagonal_loop(x, n, value)
        return
    if n <= 0:
        return
    with np.errstate(all="ignore"):
        exact = x.dtype.type(value).item() == value  # as Python numbers: no cast of `value`
    if not exact:
        _diagonal_loop(x, n, value)
        return
    m = min(x.shape)
    k = min(int(n), m)
    np.einsum("ii->i", x[:k, :k])[...] = value
    if n > m:
        x[m, m] = value  # out of bounds: the loop's IndexError


def _diagonal_loop(x, n, value):
    for i in range(n):
        x[i, i] = value


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
