"""Numba implementations of the adjoint helpers of `rules/arrays.py`.

Contract: importing this module (numba_rt does) registers, with `numba.extending.overload`
on each helper's own function object, Numba versions of `_rt.conv_vjp` (1-d, every mode and
kind), `_rt.kron_vjp` (operands both 1-d or both 2-d), `_rt.diff_vjp` (1-d, or 2-d along a
constant axis) and `_rt.cross_vjp` (3-vectors along the last axis, 1-d or 2-d, one operand
broadcast). `numba_np` wraps `np.diff` (an axis) and `np.cross` (its default axes) for the
primal and the tangents. Anything else fails at typing with a message the backend reports
(the derivative then runs in Python under the default policy, or `numba=True` refuses).
"""
from __future__ import annotations

import numpy as _np
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable

from ..rules import runtime as rt
from .numba_np import _literal, _ndim


@register_jitable
def _conv_start(na, nv, mode, kind):
    lo, hi = min(na, nv), max(na, nv)
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
                    for l in range(nb):
                        gv = g[i * mb + j, k * nb + l]
                        if w == 0:
                            out[i, k] += gv * b[j, l]
                        else:
                            out[j, l] += gv * a[i, k]
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


# -- splits in two (views: slices) -------------------------------------------------------------------


def _split_point(ios, axis, ary, even):
    """A jitable `(ary, ios) -> k`: where the first of two parts ends."""
    if isinstance(ios, _t.BaseTuple):
        return lambda ary, ios, n: ios[0]
    if even:
        def k_even(ary, ios, n):
            if ios != 2 or n % 2 != 0:
                raise ValueError("array split does not result in an equal division")
            return n // 2
        return k_even
    return lambda ary, ios, n: (n + 1) // 2  # array_split: the first part takes the remainder


def _split_overload(fn, part, even):
    @overload(fn, prefer_literal=True)
    def _ov(ary, indices_or_sections, axis=0):
        ax = _literal(axis, "axis")
        if _ndim(ary) not in (1, 2) or ax % _ndim(ary) not in (0, 1):
            raise TypingError("zymo's Numba backend splits 1-d or 2-d arrays along a constant axis")
        ax = ax % _ndim(ary)
        point = register_jitable(_split_point(indices_or_sections, ax, ary, even))
        if ax == 0:
            if part == 0:
                return lambda ary, indices_or_sections, axis=0: ary[:point(ary, indices_or_sections, ary.shape[0])]
            return lambda ary, indices_or_sections, axis=0: ary[point(ary, indices_or_sections, ary.shape[0]):]
        if part == 0:
            return lambda ary, indices_or_sections, axis=0: ary[:, :point(ary, indices_or_sections, ary.shape[1])]
        return lambda ary, indices_or_sections, axis=0: ary[:, point(ary, indices_or_sections, ary.shape[1]):]
    return _ov


from numba import types as _t  # noqa: E402

_split_overload(rt.split_part0, 0, True)
_split_overload(rt.split_part1, 1, True)
_split_overload(rt.array_split_part0, 0, False)
_split_overload(rt.array_split_part1, 1, False)


@overload(rt.split_part_vjp, prefer_literal=True)
def _split_part_vjp(g, ary, indices_or_sections, axis, k, array_split=False):
    part, whole = _literal(k, "k"), _literal(array_split, "array_split")
    pick = (rt.array_split_part0 if part == 0 else rt.array_split_part1) if whole else \
        (rt.split_part0 if part == 0 else rt.split_part1)

    def impl(g, ary, indices_or_sections, axis, k, array_split=False):
        out = _np.zeros(ary.shape, g.dtype)
        view = pick(out, indices_or_sections, axis)
        view[...] = g
        return out
    return impl


# -- rollaxis (a transpose) --------------------------------------------------------------------------


@overload(rt.rollaxis_vjp, prefer_literal=True)
def _rollaxis_vjp(g, a, axis, start=0):
    perm = rt.rollaxis_perm(_ndim(a), _literal(axis, "axis"), _literal(start, "start"))
    inv = tuple(int(i) for i in _np.argsort(perm))
    return lambda g, a, axis, start=0: _np.transpose(g, inv)
