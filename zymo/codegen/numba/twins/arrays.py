"""Numba twins of the shape and array-function helpers (`zymo/runtime/arrays.py`).

Contract: importing this module (the `twins` package does) registers, with
`numba.extending.overload` on each helper's own function object, Numba versions of
`concat2`, `split_first`, `split_last`, `negate`, `flatten`, `diag`, `diag_vjp`, `diagonal` (a
view, as NumPy's), `diagonal_view`, `diagonal_vjp`, `expand_diag` (1-d and 2-d arrays, a
constant axis, diagonals of matrices), `_rt.conv_vjp` (1-d, every mode and
kind), `_rt.kron_vjp` (operands both 1-d or both 2-d), `_rt.diff_vjp` (1-d, or 2-d along a
constant axis) and `_rt.cross_vjp` (3-vectors along the last axis, 1-d or 2-d, one operand
broadcast), `_rt.pad_jvp`/`pad_vjp`, `_rt.gradient_vjp`, and, for the
primal and the tangents, `np.pad` (modes constant, edge, wrap, reflect, symmetric; 1-d and
2-d; mode constant of any rank) and `np.gradient` (1-d, or 2-d along a constant axis), which Numba lacks (`np_shim`
wraps them, and `np.diff` with an axis, `np.cross` with its default axes, `np.rollaxis`),
and `np.einsum` where it is a view of one operand (`'ji'`, `'ii->i'`: a strided view built
from the constant subscripts; other einsums fail at typing: Numba has no einsum). Anything else
fails at typing with a message the backend reports (the derivative then runs in Python under the
default policy, or `numba=True` refuses).
"""
from __future__ import annotations

import numpy as _np
from numba import types as _t
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable
from numpy.lib.stride_tricks import as_strided

from zymo import runtime as rt

from .. import np_shim as nnp
from ..np_shim import _axis, _literal, _ndim


@register_jitable
def _conv_start(na, nv, mode, kind):
    lo = min(na, nv)
    if mode == 0:  # full
        return 0
    if mode == 2:  # valid
        return lo - 1
    if kind == 0:  # np.convolve
        return (lo - 1) // 2
    if kind == 1:  # np.correlate
        return (lo - 1) // 2 if na >= nv else lo // 2
    return (nv - 1) // 2  # scipy.signal: centred on in1


_MODE = {"full": 0, "f": 0, "same": 1, "s": 1, "valid": 2, "v": 2}
_KIND = {"np.convolve": 0, "np.correlate": 1, "scipy.signal.convolve": 2, "scipy.signal.correlate": 3}


@overload(rt.conv_vjp, prefer_literal=True)
def _conv_vjp(g, a, v, mode, which, kind):
    m, w, k = _MODE[_literal(mode, "mode")], _literal(which, "which"), _KIND[_literal(kind, "kind")]
    if _ndim(a) != 1 or _ndim(v) != 1:
        raise TypingError("zymo's Numba backend differentiates 1-d convolutions")
    corr = k in (1, 3)

    def impl(g, a, v, mode, which, kind):
        na, nv = a.shape[0], v.shape[0]
        full = _np.zeros(na + nv - 1, g.dtype)
        start = _conv_start(na, nv, m, k)
        full[start:start + g.shape[0]] = g
        if w == 0:
            out = _np.zeros(na, g.dtype)
            for i in range(na):
                s = 0.0
                for j in range(nv):
                    s += full[i + j] * (v[nv - 1 - j] if corr else v[j])
                out[i] = s
            return out
        out = _np.zeros(nv, g.dtype)
        for j in range(nv):
            s = 0.0
            for i in range(na):
                s += full[i + j] * a[i]
            out[nv - 1 - j if corr else j] = s
        return out
    return impl


@overload(rt.kron_vjp, prefer_literal=True)
def _kron_vjp(g, a, b, which):
    w = _literal(which, "which")
    if _ndim(a) != _ndim(b) or _ndim(a) not in (1, 2):
        raise TypingError("zymo's Numba backend differentiates np.kron of two 1-d or two 2-d arrays")
    if _ndim(a) == 1:
        def impl1(g, a, b, which):
            na, nb = a.shape[0], b.shape[0]
            out = _np.zeros(na if w == 0 else nb, g.dtype)
            for i in range(na):
                for j in range(nb):
                    if w == 0:
                        out[i] += g[i * nb + j] * b[j]
                    else:
                        out[j] += g[i * nb + j] * a[i]
            return out
        return impl1

    def impl2(g, a, b, which):
        ma, na = a.shape
        mb, nb = b.shape
        out = _np.zeros(a.shape if w == 0 else b.shape, g.dtype)
        for i in range(ma):
            for k in range(na):
                for j in range(mb):
                    for q in range(nb):
                        gv = g[i * mb + j, k * nb + q]
                        if w == 0:
                            out[i, k] += gv * b[j, q]
                        else:
                            out[j, q] += gv * a[i, k]
        return out
    return impl2


@register_jitable
def _diff_t_1d(g):
    out = _np.zeros(g.shape[0] + 1, g.dtype)
    for i in range(g.shape[0]):
        out[i] -= g[i]
        out[i + 1] += g[i]
    return out


@register_jitable
def _diff_t_rows(g):
    """The transposed first difference along the last axis of a 2-d array."""
    out = _np.zeros((g.shape[0], g.shape[1] + 1), g.dtype)
    for r in range(g.shape[0]):
        for i in range(g.shape[1]):
            out[r, i] -= g[r, i]
            out[r, i + 1] += g[r, i]
    return out


@overload(rt.diff_vjp, prefer_literal=True)
def _diff_vjp(g, a, n=1, axis=-1):
    ax = _literal(axis, "axis")
    if _ndim(a) == 1 and ax in (0, -1):
        def impl1(g, a, n=1, axis=-1):
            r = _np.ascontiguousarray(g)
            for _ in range(n):
                r = _diff_t_1d(r)
            return r
        return impl1
    if _ndim(a) == 2 and ax in (0, 1, -1, -2):
        along_rows = ax % 2 == 1

        def impl2(g, a, n=1, axis=-1):
            r = _np.ascontiguousarray(g if along_rows else g.T)
            for _ in range(n):
                r = _diff_t_rows(r)
            return r if along_rows else _np.ascontiguousarray(r.T)
        return impl2
    raise TypingError("zymo's Numba backend differentiates np.diff of 1-d or 2-d arrays along a constant axis")


@overload(rt.cross_vjp, prefer_literal=True)
def _cross_vjp(g, a, b, which, axisa=-1, axisb=-1, axisc=-1, axis=None):
    w = _literal(which, "which")
    axes = (_literal(axisa, "axisa"), _literal(axisb, "axisb"), _literal(axisc, "axisc"), _literal(axis, "axis"))
    if axes[:3] != (-1, -1, -1) or axes[3] not in (None, -1) or _ndim(a) not in (1, 2) or _ndim(b) not in (1, 2):
        raise TypingError("zymo's Numba backend differentiates np.cross of 3-vectors along the last axis "
                          "of 1-d or 2-d arrays")
    target = _ndim(a) if w == 0 else _ndim(b)
    summed = target == 1 and max(_ndim(a), _ndim(b)) == 2

    def impl(g, a, b, which, axisa=-1, axisb=-1, axisc=-1, axis=None):
        r = _np.cross(b, g) if w == 0 else _np.cross(g, a)
        if summed:
            return _np.sum(r, axis=0)
        return r
    return impl


# -- rollaxis (a transpose) --------------------------------------------------------------------------


@overload(rt.rollaxis_vjp, prefer_literal=True)
def _rollaxis_vjp(g, a, axis, start=0):
    perm = rt.rollaxis_perm(_ndim(a), _literal(axis, "axis"), _literal(start, "start"))
    inv = tuple(int(i) for i in _np.argsort(perm))
    return lambda g, a, axis, start=0: _np.transpose(g, inv)


# -- np.pad (1-d, 2-d; constant: any rank) -----------------------------------------------------------------------------


def _pad_widths(pad_width, nd):
    """A jitable `pad_width -> (before0, after0, before1, after1)`, chosen from the type of
    `pad_width` (an int, a pair, a 1-tuple, or one pair per axis); the values are read at run
    time (Numba keeps no literal values in nested tuples)."""
    from numba import types as nt

    def ints(t, n):
        return isinstance(t, nt.BaseTuple) and len(t) == n and all(isinstance(e, nt.Integer) for e in t)

    if isinstance(pad_width, (nt.Integer, int)):
        return register_jitable(lambda pw: (pw, pw, pw, pw))
    if ints(pad_width, 1):
        return register_jitable(lambda pw: (pw[0], pw[0], pw[0], pw[0]))
    if ints(pad_width, 2):
        return register_jitable(lambda pw: (pw[0], pw[1], pw[0], pw[1]))
    if isinstance(pad_width, nt.BaseTuple) and all(ints(e, 2) for e in pad_width):
        if len(pad_width) == 1:
            return register_jitable(lambda pw: (pw[0][0], pw[0][1], pw[0][0], pw[0][1]))
        if len(pad_width) == nd == 2:
            return register_jitable(lambda pw: (pw[0][0], pw[0][1], pw[1][0], pw[1][1]))
        if len(pad_width) == nd == 1:
            return register_jitable(lambda pw: (pw[0][0], pw[0][1], 0, 0))
    raise TypingError("zymo's Numba backend pads with int pad widths: n, (before, after) or one pair per axis")


_PAD = {"constant": 0, "edge": 1, "wrap": 2, "reflect": 3, "symmetric": 4}


@register_jitable
def _pad_src(j, n, before, mode):
    """The element of an axis of length n that element j of its padding copies (-1: the constant)."""
    i = j - before
    if 0 <= i < n:
        return i
    if mode == 0:
        return -1
    if mode == 1:
        return 0 if i < 0 else n - 1
    if mode == 2:
        return i % n
    if mode == 3:
        if n == 1:
            return 0
        p = i % (2 * n - 2)
        return p if p < n else 2 * n - 2 - p
    p = i % (2 * n)
    return p if p < n else 2 * n - 1 - p


_PAD_ND: dict = {}


def _pad_nd(pad_width, nd: int):
    """Jitables `(widths, pad, unpad)` for mode constant of an array of rank `nd` (3 or more):
    `widths(pw)` the (before, after) of each axis in one flat tuple (from the type of
    `pad_width`, as `_pad_widths`), `pad(array, w, c)` the array in a new one of `c`, and
    `unpad(g, array, w)` the block of `g` the array fills (the adjoint: a copy of that slice)."""
    from numba import types as nt

    def ints(t, n):
        return isinstance(t, nt.BaseTuple) and len(t) == n and all(isinstance(e, nt.Integer) for e in t)

    if isinstance(pad_width, (nt.Integer, int)):
        form, one = "int", "pw, pw"
    elif ints(pad_width, 1):
        form, one = "one", "pw[0], pw[0]"
    elif ints(pad_width, 2):
        form, one = "pair", "pw[0], pw[1]"
    elif isinstance(pad_width, nt.BaseTuple) and all(ints(e, 2) for e in pad_width) and len(pad_width) in (1, nd):
        form, one = ("pairs", None) if len(pad_width) == nd else ("pair1", "pw[0][0], pw[0][1]")
    else:
        raise TypingError("zymo's Numba backend pads with int pad widths: n, (before, after) or one pair per axis")
    key = (form, nd)
    if key not in _PAD_ND:
        flat = (", ".join(f"pw[{k}][0], pw[{k}][1]" for k in range(nd)) if one is None
                else ", ".join([one] * nd))
        block = ", ".join(f"w[{2 * k}]:w[{2 * k}] + array.shape[{k}]" for k in range(nd))
        shape = ", ".join(f"array.shape[{k}] + w[{2 * k}] + w[{2 * k + 1}]" for k in range(nd))
        src = "\n".join([
            "def widths(pw):",
            f"    w = ({flat},)",
            "    for v in w:",
            "        if v < 0:",
            "            raise ValueError(\"index can't contain negative values\")",
            "    return w",
            "def pad(array, w, c):",
            f"    out = np.full(({shape},), c, array.dtype)",
            f"    out[{block}] = array",
            "    return out",
            "def unpad(g, array, w):",
            f"    return g[{block}].copy()", ""])
        ns = {"np": _np}
        exec(compile(src, f"<zymo pad {form} {nd}>", "exec"), ns)
        _PAD_ND[key] = tuple(register_jitable(ns[k]) for k in ("widths", "pad", "unpad"))
    return _PAD_ND[key]


def _pad_impl(array, pad_width, mode, constant_values, scatter):
    nd = _ndim(array)
    if nd not in (1, 2):
        raise TypingError("zymo's Numba backend pads 1-d and 2-d arrays (mode constant: any rank)")
    m = _literal(mode, "mode")
    if m not in _PAD:
        raise TypingError(f"zymo's Numba backend pads with modes {', '.join(_PAD)}")
    return nd, _PAD[m], _pad_widths(pad_width, nd)


def _pad_overload(array, pad_width, mode, constant_values):
    from numba import types as nt
    if not isinstance(constant_values, (nt.Number, nt.Omitted, int, float)) and constant_values is not None:
        raise TypingError("zymo's Numba backend pads with one constant value")
    if _ndim(array) >= 3 and _literal(mode, "mode") == "constant":
        widths_nd, pad_nd, _ = _pad_nd(pad_width, _ndim(array))
        return lambda array, pad_width, mode="constant", constant_values=0: pad_nd(
            array, widths_nd(pad_width), constant_values)
    nd, md, widths = _pad_impl(array, pad_width, mode, constant_values, False)
    if nd == 1:
        def impl1(array, pad_width, mode="constant", constant_values=0):
            b0, a0, b1, a1 = widths(pad_width)
            n = array.shape[0]
            out = _np.empty(n + b0 + a0, array.dtype)
            for j in range(out.shape[0]):
                s = _pad_src(j, n, b0, md)
                out[j] = constant_values if s < 0 else array[s]
            return out
        return impl1

    def impl2(array, pad_width, mode="constant", constant_values=0):
        b0, a0, b1, a1 = widths(pad_width)
        n0, n1 = array.shape
        out = _np.empty((n0 + b0 + a0, n1 + b1 + a1), array.dtype)
        for j in range(out.shape[0]):
            s = _pad_src(j, n0, b0, md)
            for k in range(out.shape[1]):
                r = _pad_src(k, n1, b1, md)
                out[j, k] = constant_values if s < 0 or r < 0 else array[s, r]
        return out
    return impl2


@overload(rt.pad_jvp, prefer_literal=True)
def _pad_jvp(t, pad_width, mode):
    impl = register_jitable(_pad_overload(t, pad_width, mode, 0.0))
    return lambda t, pad_width, mode: impl(t, pad_width, mode, 0.0)


@overload(rt.pad_vjp, prefer_literal=True)
def _pad_vjp(g, array, pad_width, mode):
    if _ndim(array) >= 3 and _literal(mode, "mode") == "constant":
        widths_nd, _, unpad_nd = _pad_nd(pad_width, _ndim(array))
        return lambda g, array, pad_width, mode: unpad_nd(g, array, widths_nd(pad_width))
    nd, md, widths = _pad_impl(array, pad_width, mode, 0.0, True)
    if nd == 1:
        def impl1(g, array, pad_width, mode):
            b0, a0, b1, a1 = widths(pad_width)
            n = array.shape[0]
            out = _np.zeros(n, g.dtype)
            for j in range(g.shape[0]):
                s = _pad_src(j, n, b0, md)
                if s >= 0:
                    out[s] += g[j]
            return out
        return impl1

    def impl2(g, array, pad_width, mode):
        b0, a0, b1, a1 = widths(pad_width)
        n0, n1 = array.shape
        out = _np.zeros((n0, n1), g.dtype)
        for j in range(g.shape[0]):
            s = _pad_src(j, n0, b0, md)
            for k in range(g.shape[1]):
                r = _pad_src(k, n1, b1, md)
                if s >= 0 and r >= 0:
                    out[s, r] += g[j, k]
        return out
    return impl2


# -- np.gradient (1-d, or 2-d along a constant axis; a scalar spacing) ---------------------------------


@register_jitable
def _grad_line(f, h, edge, out):
    n = f.shape[0]
    for i in range(1, n - 1):
        out[i] = (f[i + 1] - f[i - 1]) / (2.0 * h)
    if edge == 1:
        out[0] = (f[1] - f[0]) / h
        out[n - 1] = (f[n - 1] - f[n - 2]) / h
    else:
        out[0] = (-1.5 * f[0] + 2.0 * f[1] - 0.5 * f[2]) / h
        out[n - 1] = (1.5 * f[n - 1] - 2.0 * f[n - 2] + 0.5 * f[n - 3]) / h


@register_jitable
def _grad_line_t(g, h, edge, out):
    n = g.shape[0]
    for i in range(1, n - 1):
        out[i + 1] += 0.5 * g[i] / h
        out[i - 1] -= 0.5 * g[i] / h
    if edge == 1:
        out[1] += g[0] / h
        out[0] -= g[0] / h
        out[n - 1] += g[n - 1] / h
        out[n - 2] -= g[n - 1] / h
    else:
        out[0] -= 1.5 * g[0] / h
        out[1] += 2.0 * g[0] / h
        out[2] -= 0.5 * g[0] / h
        out[n - 1] += 1.5 * g[n - 1] / h
        out[n - 2] -= 2.0 * g[n - 1] / h
        out[n - 3] += 0.5 * g[n - 1] / h


def _grad_axis(f, axis, edge_order):
    ax, edge = _literal(axis, "axis"), _literal(edge_order, "edge_order")
    nd = _ndim(f)
    if nd == 1 and ax in (None, 0, -1):
        return 1, 0, edge
    if nd == 2 and ax is not None and ax % 2 in (0, 1):
        return 2, ax % 2, edge
    raise TypingError("zymo's Numba backend takes np.gradient of a 1-d array, or of a 2-d array along axis=")


def _ov_gradient(f, varargs=1.0, axis=None, edge_order=1):
    nd, ax, edge = _grad_axis(f, axis, edge_order)

    def impl(f, varargs=1.0, axis=None, edge_order=1):
        out = _np.empty(f.shape, f.dtype)
        if nd == 1:
            _grad_line(f, varargs, edge, out)
        elif ax == 0:
            for k in range(f.shape[1]):
                col = _np.ascontiguousarray(f[:, k])
                res = _np.empty(f.shape[0], f.dtype)
                _grad_line(col, varargs, edge, res)
                out[:, k] = res
        else:
            for k in range(f.shape[0]):
                _grad_line(f[k], varargs, edge, out[k])
        return out
    return impl


@overload(rt.gradient_vjp, prefer_literal=True)
def _gradient_vjp(g, f, spacing=1.0, axis=None, edge_order=1):
    nd, ax, edge = _grad_axis(f, axis, edge_order)

    def impl(g, f, spacing=1.0, axis=None, edge_order=1):
        out = _np.zeros(f.shape, g.dtype)
        if nd == 1:
            _grad_line_t(g, spacing, edge, out)
        elif ax == 0:
            for k in range(f.shape[1]):
                res = _np.zeros(f.shape[0], g.dtype)
                _grad_line_t(_np.ascontiguousarray(g[:, k]), spacing, edge, res)
                out[:, k] += res
        else:
            for k in range(f.shape[0]):
                _grad_line_t(g[k], spacing, edge, out[k])
        return out
    return impl


@overload(nnp.pad, prefer_literal=True)
def _ov_pad(array, pad_width, mode="constant", constant_values=0):
    return _pad_overload(array, pad_width, mode, constant_values)


overload(nnp.gradient, prefer_literal=True)(_ov_gradient)


# -- np.einsum of one operand that is a view of it ---------------------------------------------------


def _einsum_view_overload(subscripts, a, b=None, c=None, d=None, e=None, f=None, optimize=False):
    from ..np_shim import _none

    s = _literal(subscripts, "einsum subscripts")
    if not all(_none(o) for o in (b, c, d, e, f)) or not isinstance(s, str) or \
            not rt.einsum_is_view(s, [_ndim(a)]):
        raise TypingError("zymo's Numba backend takes np.einsum only where it is a view of one operand "
                          "(e.g. 'ji', 'ii->i'); Numba has no einsum")
    operands = (a,)
    nd = _ndim(operands[0])
    ins, out = rt.einsum_expand(s, [(1,) * nd])
    groups = [[i for i, c in enumerate(ins[0]) if c == ch] for ch in out]
    checks = "".join(f"    if a.shape[{g[0]}] != a.shape[{j}]:\n        raise ValueError('einsum: a repeated "
                     f"label needs equal dimensions')\n" for g in groups for j in g[1:])
    shape = ", ".join(f"a.shape[{g[0]}]" for g in groups) + ","
    strides = ", ".join(" + ".join(f"a.strides[{j}]" for j in g) for g in groups) + ","
    src = (f"def impl(subscripts, a, b=None, c=None, d=None, e=None, f=None, optimize=False):\n{checks}"
           f"    return as_strided(a, shape=({shape}), strides=({strides}))\n")
    ns = {"as_strided": as_strided}
    exec(src, ns)  # the indices are computed above from the constant subscripts
    return ns["impl"]


overload(nnp.einsum, prefer_literal=True)(_einsum_view_overload)


# -- joins -------------------------------------------------------------------------------------------


@overload(rt.concat2, prefer_literal=True)
def _concat2(a, b, axis=0):
    ax = _literal(axis, "axis")
    if ax is None:
        return lambda a, b, axis=0: _np.concatenate((_np.ravel(a), _np.ravel(b)))
    ax = _axis(axis, a, "np.concatenate")
    return lambda a, b, axis=0: _np.concatenate((a, b), axis=ax)


@overload(rt.split_first, prefer_literal=True)
def _split_first(g, a, axis):
    if _literal(axis, "axis") is None:
        return lambda g, a, axis: g[:a.size].copy().reshape(a.shape)
    ax = _axis(axis, a, "np.concatenate")
    if ax == 0:
        return lambda g, a, axis: g[:a.shape[0]]
    return lambda g, a, axis: g[:, :a.shape[1]]


@overload(rt.split_last, prefer_literal=True)
def _split_last(g, b, axis):
    if _literal(axis, "axis") is None:
        return lambda g, b, axis: g[g.size - b.size:].copy().reshape(b.shape)
    ax = _axis(axis, b, "np.concatenate")
    if ax == 0:
        return lambda g, b, axis: g[g.shape[0] - b.shape[0]:]
    return lambda g, b, axis: g[:, g.shape[1] - b.shape[1]:]


@overload(rt.negate)
def _negate(shift):
    if not isinstance(shift, _t.Integer):
        raise TypingError("zymo's Numba backend rolls by an int shift")
    return lambda shift: -shift


@overload(rt.flatten)
def _flatten(x):
    return lambda x: _np.ravel(x).copy()


# -- diagonals ---------------------------------------------------------------------------------------


def _diag_axes(x, axis1, axis2, what):
    a1, a2 = _literal(axis1, "axis1"), _literal(axis2, "axis2")
    if _ndim(x) != 2 or {a1 % 2, a2 % 2} != {0, 1}:
        raise TypingError(f"zymo's Numba backend takes {what} of 2-d arrays")
    return a1 % 2 == 1  # swapped


@overload(rt.diag)
def _diag(v, k=0):
    if _ndim(v) == 1:
        return lambda v, k=0: _np.diag(v, k)
    return lambda v, k=0: _diag_view(v, k, False)  # a matrix's diagonal: a view, as NumPy's


@register_jitable
def _place_diag(g, n1, n2, offset, swap, dt):
    out = _np.zeros((n2, n1), dt) if swap else _np.zeros((n1, n2), dt)
    i0, j0 = max(-offset, 0), max(offset, 0)
    for p in range(g.shape[0]):
        if swap:
            out[j0 + p, i0 + p] = g[p]
        else:
            out[i0 + p, j0 + p] = g[p]
    return out


@register_jitable
def _diag_view(x, offset, swap):
    if swap:
        x = x.T
    i0, j0 = max(-offset, 0), max(offset, 0)
    m = max(0, min(x.shape[0] - i0, x.shape[1] - j0))
    return as_strided(x[i0:, j0:], shape=(m,), strides=(x.strides[0] + x.strides[1],))


@overload(rt.diagonal, prefer_literal=True)
def _diagonal(a, offset=0, axis1=0, axis2=1):
    """NumPy's diagonal is a (read-only) view: so is this one (writable), of 2-d arrays."""
    swap = _diag_axes(a, axis1, axis2, "np.diagonal")
    return lambda a, offset=0, axis1=0, axis2=1: _diag_view(a, offset, swap)


@overload(rt.diagonal_view, prefer_literal=True)
def _diagonal_view(x, offset=0, axis1=0, axis2=1):
    swap = _diag_axes(x, axis1, axis2, "np.diagonal")
    return lambda x, offset=0, axis1=0, axis2=1: _diag_view(x, offset, swap)


@overload(rt.diagonal_vjp, prefer_literal=True)
def _diagonal_vjp(g, x, offset=0, axis1=0, axis2=1):
    swap = _diag_axes(x, axis1, axis2, "np.diagonal")

    dt = _adjoint_dtype(g, x)

    def impl(g, x, offset=0, axis1=0, axis2=1):
        n1, n2 = (x.shape[1], x.shape[0]) if swap else (x.shape[0], x.shape[1])
        return _place_diag(_np.ascontiguousarray(g).ravel(), n1, n2, offset, swap, dt)
    return impl


def _adjoint_dtype(g, x):
    """NumPy's `result_type(g, x)` at typing time, as the Python helper's adjoint has (complex
    when either is)."""
    from numba.np.numpy_support import as_dtype

    return _np.result_type(*(as_dtype(getattr(v, "dtype", v)) for v in (g, x)))


@overload(rt.diag_vjp)
def _diag_vjp(g, x, k):
    if _ndim(x) == 1:
        return lambda g, x, k: _np.diag(_np.ascontiguousarray(g), k).copy()
    dt = _adjoint_dtype(g, x)
    return lambda g, x, k: _place_diag(g, x.shape[0], x.shape[1], k, False, dt)


@overload(rt.expand_diag, prefer_literal=True)
def _expand_diag(g, x, offset, axis1, axis2):
    swap = _diag_axes(x, axis1, axis2, "np.trace")

    def impl(g, x, offset, axis1, axis2):
        n1, n2 = (x.shape[1], x.shape[0]) if swap else (x.shape[0], x.shape[1])
        i0, j0 = max(-offset, 0), max(offset, 0)
        m = max(0, min(n1 - i0, n2 - j0))
        return _np.full(m, g)
    return impl
