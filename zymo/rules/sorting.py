"""Rules for sorting, gathering along an axis and lookups: `np.sort`, `np.argsort`,
`np.partition`, `np.take_along_axis`, `np.put_along_axis`, `np.searchsorted`, `np.interp`,
`np.histogram` (helpers in `runtime/sorting.py`).

Contract:
- Parameters are named as NumPy names them (`a`, `axis`, `kind`, `arr`, `indices`, ...).
- `sort` and `partition` move each element to a new place: the derivative follows that
  permutation (a tangent is gathered, an adjoint scattered back). At ties the permutation
  is the stable one (`sort_perm`, `match_perm`): tied elements keep their own derivative
  in their original order. `order=` (structured arrays) is refused. `axis=None` sorts the
  flattened array. `ndarray.sort()` (in place) is not covered: use `np.sort`.
- `argsort` and `searchsorted` return indices: non-differentiable by rule. Gathering with
  their results (`np.take_along_axis(x, np.argsort(x), axis)`, `x[np.searchsorted(g, t)]`)
  is differentiable in the gathered array.
- `take_along_axis(arr, indices, axis)`: derivative in `arr`; the adjoint adds back with
  repetition (a repeated index accumulates).
- `put_along_axis(arr, indices, values, axis)` stores into `arr` in place (the frontend
  passes `arr` as `out=`, as for `np.add.at`): the derivative of `arr` passes through except
  at the stored places; with a repeated index only the value NumPy stores last gets the
  adjoint (as `x[idx] = v`).
- `interp(x, xp, fp, left, right)`: differentiable in `x` (the slope of the segment; at a
  knot the segment to its right, 0 outside [xp[0], xp[-1]]), in `fp` (the interpolation
  weights; outside the range the end value when `left`/`right` is None), in `xp` (where
  `x` lies strictly inside a segment: -slope * the weights; `xp` must be strictly
  increasing) and in `left`/`right`. `period=` is refused. Results are float64 (NumPy's).
- `histogram(a, bins, range, density, weights)` returns (hist, bin_edges): one op per part.
  `hist` is differentiable in `weights` (each weight goes to its element's bin) and
  piecewise constant in `a`; `bin_edges` depends on `a` through min(a) and max(a) when
  `bins` is an int and `range` is None (ties at the min or max share equally), and equals
  `bins` when that is an array. Refused: `density=True`, string `bins` ('auto', ...),
  a `range` not known at compile time.
- Second order: the helpers the adjoints call have rules of their own at the end of this
  module (`zymo.rt.*`: linear in the adjoint, permutations and masks non-differentiable),
  so `zymo.hvp`/`zymo.hessian` differentiate through every rule here.
"""
from __future__ import annotations

import numpy as np

from .. import runtime as _rt
from ..ir import types as T
from .registry import BY_CALLABLE, NOT_CONST, Rule, const_value

_C = "const"


def _ndim(v) -> int | None:
    return getattr(getattr(v, "type", None), "ndim", None)


def _args(names, pos, kw):
    out = dict(zip(names, pos))
    out.update(kw)
    return out


class sort(Rule, key="numpy.sort", fn=np.sort, cases=(
        ("fn(x) * y", ((5,), (5,))), ("fn(x) * y", ((3, 4), (3, 4))), ("fn(x, axis=0) * y", ((3, 4), (3, 4))),
        ("fn(x, 0) * y", ((3, 4), (3, 4))), ("fn(x, axis=None) * y", ((3, 4), (12,))),
        ("fn(x, axis=-1, kind='stable') * y", ((2, 3, 4), (2, 3, 4))), ("fn(x, stable=True) * y", ((4,), (4,))), ("fn(x, order=None) * y", ((5,), (5,))), ("fn(x * x)[::-1] * y", ((6,), (6,))),
        ("np.sum(fn(x)[-2:] ** 2)", ((3, 4),)), ("fn(np.concatenate((x, x)))", ((3,),)))):
    """The derivative follows the (stable) permutation; ties keep their own derivative."""
    def jvp_a(t, ans, a, axis=-1, kind=None, order=None, stable=None):
        return np.take_along_axis(t, _rt.sort_perm(a, axis), axis)
    def vjp_a(g, ans, a, axis=-1, kind=None, order=None, stable=None):
        return _rt.take_along_axis_vjp(g, a, _rt.sort_perm(a, axis), axis)

    @classmethod
    def check(cls, pos, kw):
        args = _args(("a", "axis", "kind", "order"), pos, kw)
        if const_value(args.get("order")) is not None:  # order=None written out is the default
            return "np.sort with order= (structured arrays) is not differentiable"
        extra = set(kw) - {"a", "axis", "kind", "order", "stable"}
        if extra:
            return f"np.sort with {', '.join(sorted(extra))} is not supported"
        if _ndim(args.get("a")) == 0 and const_value(args.get("axis", -1)) is not None:
            return "np.sort of a 0-d array needs axis=None (NumPy refuses it too)"
        return None


class argsort(Rule, key="numpy.argsort", fn=np.argsort, nondiff=True, cases=(
        ("fn(x) * 1.0", ((5,),), {"kind": "zero"}), ("fn(x, axis=0) * 1.0", ((3, 4),), {"kind": "zero"}),
        ("x[fn(x)] * y", ((5,), (5,))), ("np.take_along_axis(x, fn(x, axis=1), axis=1) * y", ((3, 4), (3, 4))),
        ("y[fn(x, kind='stable')] * y", ((5,), (5,))))):
    """Indices: derivative zero by rule."""


class partition(Rule, key="numpy.partition", fn=np.partition, cases=(
        ("fn(x, 2) * y", ((5,), (5,))), ("fn(x, 1, axis=0) * y", ((3, 4), (3, 4))),
        ("fn(x, kth=2) * y", ((3, 4), (3, 4))), ("fn(x, (0, 3), axis=-1)[:, 3]", ((3, 5),)),
        ("fn(x, 4, axis=None) * y", ((3, 4), (12,))), ("fn(x, 2, order=None) * y", ((5,), (5,))))):
    """The derivative follows the rearrangement NumPy made (matched back by value)."""
    def jvp_a(t, ans, a, kth, axis=-1, kind="introselect", order=None):
        return np.take_along_axis(t, _rt.match_perm(a, ans, axis), axis)
    def vjp_a(g, ans, a, kth, axis=-1, kind="introselect", order=None):
        return _rt.take_along_axis_vjp(g, a, _rt.match_perm(a, ans, axis), axis)

    @classmethod
    def check(cls, pos, kw):
        args = _args(("a", "kth", "axis", "kind", "order"), pos, kw)
        if const_value(args.get("order")) is not None:  # order=None written out is the default
            return "np.partition with order= (structured arrays) is not differentiable"
        return None


def _arg(pos, kw, k, name, default=None):
    """Argument `name` (position `k`) of a call as the frontend has it."""
    return pos[k] if len(pos) > k else kw.get(name, default)


def _same_as_first(pos, kw):
    return _arg(pos, kw, 0, "arr").type


def _along_type(pos, kw):
    arr, axis = _arg(pos, kw, 0, "arr"), _arg(pos, kw, 2, "axis", -1)
    return T.Array(arr.type.dtype, 1) if const_value(axis) is None else arr.type


def _partition_type(pos, kw):
    a, axis = _arg(pos, kw, 0, "a"), _arg(pos, kw, 2, "axis", -1)
    return T.Array(a.type.dtype, 1) if const_value(axis) is None else a.type


class take_along_axis(Rule, key="numpy.take_along_axis", fn=np.take_along_axis, cases=(
        ("fn(x, z, 1) * y", ((3, 4), (3, 2), ("const", np.array([[0, 3], [1, 1], [2, 0]])))),
        ("fn(x, y, axis=0)", ((3, 4), ("const", np.array([[2, 0, 0, 1]])))),
        ("fn(x, z, axis=0) * y", ((5,), (4,), ("const", np.array([4, 0, 4, 2])))),
        ("fn(x, y, axis=-1)", ((2, 3), ("const", np.array([[2], [0]])))),
        ("fn(x, z, axis=None) * y", ((2, 3), (4,), ("const", np.array([5, 0, 5, 3])))),
        ("fn(x, np.argsort(x), axis=-1) * y", ((4,), (4,))))):
    """Derivative in `arr`; the adjoint accumulates at repeated indices."""
    def jvp_arr(t, ans, arr, indices, axis=-1): return np.take_along_axis(t, indices, axis)
    def vjp_arr(g, ans, arr, indices, axis=-1): return _rt.take_along_axis_vjp(g, arr, indices, axis)


class put_along_axis(Rule, key="numpy.put_along_axis", fn=_rt.put_along_axis, call="_rt.put_along_axis", out=True,
                     cases=(
        ("o = x * 1.0\nfn(o, z, y, 1)\nreturn o * o", ((3, 4), (3, 2), ("const", np.array([[0, 3], [1, 1], [2, 0]]))),
         {"fn": np.put_along_axis}),
        ("o = x.copy()\nfn(o, z, y, axis=0)\nreturn o", ((5,), (4,), ("const", np.array([4, 0, 4, 2]))),
         {"fn": np.put_along_axis}),
        ("o = x * 2.0\nfn(o, z, y, axis=0)\nreturn o * x", ((3, 4), (), ("const", np.array([[2, 0, 0, 1]]))),
         {"fn": np.put_along_axis}),
        ("o = x * 1.0\nfn(o, z, y, axis=-1)\nreturn o", ((2, 3), (2, 1), ("const", np.array([[2], [0]]))),
         {"fn": np.put_along_axis}),
        ("o = x * 1.0\nfn(o, z, y, None)\nreturn o * o", ((2, 3), (3,), ("const", np.array([5, 0, 5]))),
         {"fn": np.put_along_axis}))):
    """In place: `arr`'s stored places get `values` (the last occurrence of a repeated index)."""
    inplace_arg = 0  # the frontend passes `arr` as out=: the call writes arr's memory
    def jvp_arr(t, ans, arr, indices, values, axis): return _rt.stored_along_axis(t, indices, 0.0, axis)
    def jvp_values(t, ans, arr, indices, values, axis):
        return _rt.stored_along_axis(np.zeros_like(arr), indices, t, axis)
    def vjp_arr(g, ans, arr, indices, values, axis): return _rt.stored_along_axis(g, indices, 0.0, axis)
    def vjp_values(g, ans, arr, indices, values, axis): return _rt.put_along_axis_vjp_values(g, indices, values, axis)

    @classmethod
    def check(cls, pos, kw):
        if len(pos) + len(kw) < 4:
            return "np.put_along_axis needs arr, indices, values and axis"
        return None


BY_CALLABLE[id(np.put_along_axis)] = put_along_axis.key  # user code calls NumPy's; the rule runs _rt's


class searchsorted(Rule, key="numpy.searchsorted", fn=np.searchsorted, nondiff=True, cases=(
        ("x[fn(z, y)] * 2.0", ((5,), (3,), ("const", np.array([-1.5, -0.5, 0.5, 1.5, 2.5])))),
        ("x[fn(z, y, side='right')] * y", ((6,), (), ("const", np.array([-2.5, -1.0, 0.0, 1.0, 2.5])))),
        ("x[fn(z, 0.3)] * y", ((5,), (), ("const", np.array([-1.5, -0.5, 0.5, 1.5])))),
        ("fn(y, x) * 1.0", ((4,), ("const", np.array([-1.5, -0.5, 0.5, 1.5]))), {"kind": "zero"}),
        ("fn(y, x, side='right') * 1.0", ((3, 2), ("const", np.array([-1.5, -0.5, 0.5, 1.5]))), {"kind": "zero"}))):
    """Indices: derivative zero by rule (`x[np.searchsorted(grid, t)]` is an advanced read)."""


class interp(Rule, key="numpy.interp", fn=np.interp, cases=(
        ("fn(x, z, y)", ((7,), (4,), ("const", np.array([-1.5, -0.4, 0.3, 1.6])))),
        ("fn(x, y, z)", ((7,), ("const", np.array([-1.5, -0.4, 0.3, 1.6])), (4,))),
        ("fn(x, z, y, left=-3.0, right=w)", ((3, 4), (4,), ("const", np.array([-1.5, -0.4, 0.3, 1.6])), ())),
        ("fn(y, np.sort(x), z)", ((5,), (6,), (5,)), {"dom": "numpy.amax"}),
        ("fn(0.7 * x, (-1.0, 0.0, 1.5), (2.0, -1.0, 0.5))", ((),)),
        ("fn(x, y, x * 0.0 + z)", ((), ("const", np.array([-1.5, -0.4, 0.3, 1.6])), (4,))),
        ("fn(x, z, y, 0.5, 2.0)", ((5,), (3,), ("const", np.array([-0.5, 0.1, 0.9])))))):
    """Differentiable in x, fp, xp (strictly increasing) and left/right; float64 results."""
    def jvp_x(t, ans, x, xp, fp, left=None, right=None, period=None): return t * _rt.interp_dx(x, xp, fp)
    def jvp_xp(t, ans, x, xp, fp, left=None, right=None, period=None): return _rt.interp_jvp_xp(t, x, xp, fp)
    def jvp_fp(t, ans, x, xp, fp, left=None, right=None, period=None):
        return _rt.interp_jvp_fp(t, x, xp, left, right)
    def jvp_left(t, ans, x, xp, fp, left=None, right=None, period=None): return t * _rt.interp_below(x, xp)
    def jvp_right(t, ans, x, xp, fp, left=None, right=None, period=None): return t * _rt.interp_above(x, xp)
    def vjp_x(g, ans, x, xp, fp, left=None, right=None, period=None): return _rt.interp_vjp_x(g, x, xp, fp)
    def vjp_xp(g, ans, x, xp, fp, left=None, right=None, period=None): return _rt.interp_vjp_xp(g, x, xp, fp)
    def vjp_fp(g, ans, x, xp, fp, left=None, right=None, period=None):
        return _rt.interp_vjp_fp(g, x, xp, fp, left, right)
    def vjp_left(g, ans, x, xp, fp, left=None, right=None, period=None): return np.sum(g * _rt.interp_below(x, xp))
    def vjp_right(g, ans, x, xp, fp, left=None, right=None, period=None): return np.sum(g * _rt.interp_above(x, xp))

    @classmethod
    def check(cls, pos, kw):
        args = _args(("x", "xp", "fp", "left", "right", "period"), pos, kw)
        if args.get("period") is not None:
            return "np.interp with period= is not differentiable in zymo (periodic interpolation is not covered)"
        for k in ("xp", "fp"):
            if _ndim(args.get(k)) not in (None, 1):
                return f"np.interp needs a 1-d {k}"
        return None


_EDGES = np.array([-2.0, -0.9, 0.1, 0.7, 2.0])


class histogram(Rule, key="numpy.histogram", fn=np.histogram, data_shaped=True,
                parts=("numpy.histogram.hist", "numpy.histogram.bin_edges"), cases=(
        ("fn(x, bins=4, range=(-2.0, 2.0), weights=y)[0]", ((9,), (9,))),
        ("fn(z, 3, weights=y * y)[0] * x", ((3,), (3, 4), (_C, np.linspace(-1.0, 1.3, 12).reshape(3, 4)))),
        ("fn(x, bins=z, weights=y)[0]", ((8,), (8,), (_C, _EDGES))),
        ("h, e = fn(x, bins=5)\nreturn e[1:] * 2.0 + h", ((7,),)),
        ("h, e = fn(x, bins=4, weights=y)\nreturn h * e[1:]", ((6,), (6,))),
        ("fn(y, bins=np.sort(x))[1] * 3.0", ((4,), (6,)), {"dom": "numpy.amax"}),
        ("fn(x * 0.0 + y, bins=3)[1]", ((4,), ())))):
    """(hist, bin_edges); see the module docstring for what is differentiable."""

    @classmethod
    def check(cls, pos, kw):
        args = _args(("a", "bins", "range", "density", "weights"), pos, kw)
        if set(kw) - {"a", "bins", "range", "density", "weights"}:
            return "np.histogram takes bins=, range=, density= and weights= here"
        if const_value(args.get("density")) not in (None, False):
            return "np.histogram(density=True) is not differentiable in zymo yet; divide by the bin widths yourself"
        b = args.get("bins", 10)
        if isinstance(const_value(b), str):
            return f"np.histogram with bins={const_value(b)!r} is not differentiable (edges chosen by a rule)"
        r = args.get("range")
        if r is not None and const_value(r) is NOT_CONST:
            return "np.histogram needs range= as constants (the edges' derivative in range is not covered)"
        return None


class histogram_hist(Rule, key="numpy.histogram.hist", fn=_rt.histogram_hist, call="_rt.histogram_hist",
                     part_of="numpy.histogram"):
    def jvp_weights(t, ans, a, bins=10, range=None, density=None, weights=None):
        return _rt.histogram_hist(a, bins, range, density, t)
    def vjp_weights(g, ans, a, bins=10, range=None, density=None, weights=None):
        return _rt.histogram_vjp_weights(g, a, bins, range, weights)


class histogram_edges(Rule, key="numpy.histogram.bin_edges", fn=_rt.histogram_edges, call="_rt.histogram_edges",
                      part_of="numpy.histogram"):
    def jvp_a(t, ans, a, bins=10, range=None, density=None, weights=None):
        return _rt.histogram_edges_jvp(t, a, bins, range)
    def jvp_bins(t, ans, a, bins=10, range=None, density=None, weights=None): return t + np.zeros_like(ans)
    def vjp_a(g, ans, a, bins=10, range=None, density=None, weights=None):
        return _rt.histogram_edges_vjp(g, a, bins, range)
    def vjp_bins(g, ans, a, bins=10, range=None, density=None, weights=None): return g + np.zeros_like(bins)


# -- the helpers' own rules: second order (zymo.hvp differentiates the reverse program) -------
_I32 = (_C, np.array([[0, 3], [1, 1], [2, 0]]))
_I33 = (_C, np.array([[1, 3, 1], [0, 0, 2], [2, 2, 2]]))


class sort_perm(Rule, key="zymo.rt.sort_perm", fn=_rt.sort_perm, call="_rt.sort_perm", nondiff=True, cases=(
        ("x[fn(x, -1)] * y", ((5,), (5,))), ("fn(x, 0) * 1.0", ((3, 4),), {"kind": "zero"}),
        ("np.take_along_axis(x, fn(x, None), None) * y", ((3, 4), (12,))))):
    """Indices (a permutation): derivative zero by rule."""


class match_perm(Rule, key="zymo.rt.match_perm", fn=_rt.match_perm, call="_rt.match_perm", nondiff=True, cases=(
        ("x[fn(x, np.partition(x, 2), -1)] * y", ((5,), (5,))),
        ("fn(x, np.sort(x, axis=0), 0) * 1.0", ((3, 4),), {"kind": "zero"}))):
    """Indices (a permutation): derivative zero by rule."""


class take_along_axis_vjp(Rule, key="zymo.rt.take_along_axis_vjp", fn=_rt.take_along_axis_vjp,
                          call="_rt.take_along_axis_vjp", cases=(
        ("fn(x, y, z, 1)", ((3, 2), (3, 4), _I32)), ("fn(x, y, z, None)", ((4,), (2, 3), (_C, np.array([5, 0, 5, 3])))),
        ("fn(x, y, np.argsort(y, axis=0), 0)", ((3, 4), (3, 4))))):
    """Linear in `g`; `arr` gives only the shape."""
    def jvp_g(t, ans, g, arr, indices, axis): return _rt.take_along_axis_vjp(t, arr, indices, axis)
    def vjp_g(gb, ans, g, arr, indices, axis): return np.take_along_axis(gb, indices, axis)


class put_along_axis_vjp_values(Rule, key="zymo.rt.put_along_axis_vjp_values", fn=_rt.put_along_axis_vjp_values,
                                call="_rt.put_along_axis_vjp_values", cases=(
        ("fn(x, z, y, 1)", ((3, 4), (3, 3), _I33)), ("fn(x, z, y, 0)", ((5,), (), (_C, np.array([4, 0, 4, 2])))),
        ("fn(x, z, y, None)", ((2, 3), (3,), (_C, np.array([5, 0, 5])))))):
    """Linear in `g`; `values` gives only the shape. The transpose stores into zeros (the last
    occurrence of a repeated index is the one the adjoint read)."""
    def jvp_g(t, ans, g, indices, values, axis): return _rt.put_along_axis_vjp_values(t, indices, values, axis)
    def vjp_g(gb, ans, g, indices, values, axis): return _rt.stored_along_axis(np.zeros_like(g), indices, gb, axis)


class stored_along_axis(Rule, key="zymo.rt.stored_along_axis", fn=_rt.stored_along_axis, call="_rt.stored_along_axis",
                        cases=(
        ("fn(x, z, y, 1) * x", ((3, 4), (3, 2), _I32)), ("fn(x, y, 0.0, 1)", ((3, 4), _I33)),
        ("fn(x, z, y, None)", ((2, 3), (), (_C, np.array([5, 0, 5])))))):
    """`put_along_axis` on a copy (no argument written): the derivatives' form of it."""
    def jvp_arr(t, ans, arr, indices, values, axis): return _rt.stored_along_axis(t, indices, 0.0, axis)
    def jvp_values(t, ans, arr, indices, values, axis):
        return _rt.stored_along_axis(np.zeros_like(arr), indices, t, axis)
    def vjp_arr(g, ans, arr, indices, values, axis): return _rt.stored_along_axis(g, indices, 0.0, axis)
    def vjp_values(g, ans, arr, indices, values, axis): return _rt.put_along_axis_vjp_values(g, indices, values, axis)


_DATA = (_C, np.array([[-1.5, 0.3, 1.2], [-0.7, 1.9, 2.5]]))


class histogram_vjp_weights(Rule, key="zymo.rt.histogram_vjp_weights", fn=_rt.histogram_vjp_weights,
                            call="_rt.histogram_vjp_weights", cases=(
        ("fn(x, z, 4, (-2.0, 2.0), y)", ((4,), (2, 3), _DATA)), ("fn(x, y, 3, None, y)", ((3,), (6,))))):
    """Linear in `g`; piecewise constant in `a` (each element's bin): derivative 0 there."""
    def jvp_g(t, ans, g, a, bins=10, range=None, weights=None):
        return _rt.histogram_vjp_weights(t, a, bins, range, weights)
    def vjp_g(gb, ans, g, a, bins=10, range=None, weights=None): return _rt.histogram_hist(a, bins, range, None, gb)


class histogram_edges_vjp(Rule, key="zymo.rt.histogram_edges_vjp", fn=_rt.histogram_edges_vjp,
                          call="_rt.histogram_edges_vjp", cases=(
        ("fn(x, y, 3, None)", ((4,), (5,))), ("fn(x, y, 4, (-1.0, 1.0))", ((5,), (3,))),
        ("fn(x, y * 0.0 + 1.0, 2, None)", ((3,), (4,))))):
    """Linear in `g`; piecewise constant in `a` (which elements are the min and max)."""
    def jvp_g(t, ans, g, a, bins=10, range=None): return _rt.histogram_edges_vjp(t, a, bins, range)
    def vjp_g(gb, ans, g, a, bins=10, range=None): return _rt.histogram_edges_jvp(gb, a, bins, range)


_XP = (_C, np.array([-1.5, -0.4, 0.3, 1.6]))


class interp_vjp_x(Rule, key="zymo.rt.interp_vjp_x", fn=_rt.interp_vjp_x, call="_rt.interp_vjp_x", cases=(
        ("fn(x, y, z, w)", ((6,), (6,), _XP, (4,))), ("fn(x, y, z, w)", ((2, 3), (2, 3), _XP, (4,))),
        ("fn(x, y, z, w)", ((), (), _XP, (4,))), ("fn(x, y, np.sort(z), w)", ((5,), (5,), (4,), (4,)), {"dom": "numpy.amax"}))):
    """g * slope: linear in `g` and `fp`, piecewise constant in `x`, a quotient in `xp`."""
    def jvp_g(t, ans, g, x, xp, fp): return _rt.interp_vjp_x(t, x, xp, fp)
    def jvp_fp(t, ans, g, x, xp, fp): return _rt.interp_vjp_x(g, x, xp, t)
    def jvp_xp(t, ans, g, x, xp, fp): return _rt.interp_vjp_x(-g * _rt.interp_dx(x, xp, fp), x, xp, t)
    def vjp_g(gb, ans, g, x, xp, fp): return gb * _rt.interp_dx(x, xp, fp)
    def vjp_fp(gb, ans, g, x, xp, fp): return _rt.interp_slope_t(g * gb, x, xp, fp)
    def vjp_xp(gb, ans, g, x, xp, fp): return _rt.interp_slope_t(-g * gb * _rt.interp_dx(x, xp, fp), x, xp, xp)


class interp_vjp_fp(Rule, key="zymo.rt.interp_vjp_fp", fn=_rt.interp_vjp_fp, call="_rt.interp_vjp_fp", cases=(
        ("fn(x, y, z, w, None, None)", ((6,), (6,), _XP, (4,))), ("fn(x, y, z, w, 0.5, None)", ((2, 3), (2, 3), _XP, (4,))),
        ("fn(x, y, z, w, None, 1.0)", ((), (), _XP, (4,))),
        ("fn(x, y, np.sort(z), w, None, None)", ((5,), (5,), (4,), (4,)), {"dom": "numpy.amax"}))):
    """The interpolation weights scattered: linear in `g`, linear in `x` within a segment, a
    quotient in `xp`; `fp` gives only the shape."""
    def jvp_g(t, ans, g, x, xp, fp, left, right): return _rt.interp_vjp_fp(t, x, xp, fp, left, right)
    def jvp_x(t, ans, g, x, xp, fp, left, right): return _rt.interp_slope_t(g * t, x, xp, fp)
    def jvp_xp(t, ans, g, x, xp, fp, left, right):
        return _rt.interp_slope_t(-g * _rt.interp_jvp_fp(t, x, xp, 0.0, 0.0), x, xp, fp)
    def vjp_g(gb, ans, g, x, xp, fp, left, right): return _rt.interp_jvp_fp(gb, x, xp, left, right)
    def vjp_x(gb, ans, g, x, xp, fp, left, right): return _rt.interp_vjp_x(g, x, xp, gb)
    def vjp_xp(gb, ans, g, x, xp, fp, left, right):
        return _rt.interp_vjp_fp(-g * _rt.interp_dx(x, xp, gb), x, xp, xp, 0.0, 0.0)


class interp_vjp_xp(Rule, key="zymo.rt.interp_vjp_xp", fn=_rt.interp_vjp_xp, call="_rt.interp_vjp_xp", cases=(
        ("fn(x, y, z, w)", ((6,), (6,), _XP, (4,))), ("fn(x, y, z, w)", ((2, 3), (2, 3), _XP, (4,))),
        ("fn(x, y, z, w)", ((), (), _XP, (4,))), ("fn(x, y, np.sort(z), w)", ((5,), (5,), (4,), (4,)), {"dom": "numpy.amax"}))):
    """-slope * g * weights, scattered: linear in `g` and `fp`, polynomial in `x` within a
    segment, rational in `xp`."""
    def jvp_g(t, ans, g, x, xp, fp): return _rt.interp_vjp_xp(t, x, xp, fp)
    def jvp_fp(t, ans, g, x, xp, fp): return _rt.interp_vjp_xp(g, x, xp, t)
    def jvp_x(t, ans, g, x, xp, fp): return _rt.interp_slope_t(-g * t * _rt.interp_dx(x, xp, fp), x, xp, xp)
    def jvp_xp(t, ans, g, x, xp, fp):
        return _rt.interp_vjp_fp(g * _rt.interp_dx(x, xp, fp) * _rt.interp_dx(x, xp, t), x, xp, xp, 0.0, 0.0) + (
            _rt.interp_slope_t(g * _rt.interp_dx(x, xp, fp) * _rt.interp_jvp_fp(t, x, xp, 0.0, 0.0), x, xp, xp))
    def vjp_g(gb, ans, g, x, xp, fp): return _rt.interp_jvp_xp(gb, x, xp, fp)
    def vjp_fp(gb, ans, g, x, xp, fp): return _rt.interp_slope_t(-g * _rt.interp_jvp_fp(gb, x, xp, 0.0, 0.0), x, xp, fp)
    def vjp_x(gb, ans, g, x, xp, fp): return _rt.interp_vjp_x(-g * _rt.interp_dx(x, xp, fp), x, xp, gb)
    def vjp_xp(gb, ans, g, x, xp, fp):
        return _rt.interp_slope_t(g * _rt.interp_dx(x, xp, fp) * _rt.interp_jvp_fp(gb, x, xp, 0.0, 0.0), x, xp, xp) + (
            _rt.interp_vjp_fp(g * _rt.interp_dx(x, xp, fp) * _rt.interp_dx(x, xp, gb), x, xp, xp, 0.0, 0.0))


class interp_below(Rule, key="zymo.rt.interp_below", fn=_rt.interp_below, call="_rt.interp_below", nondiff=True,
                   cases=(("fn(x, z) * y", ((6,), (6,), _XP)), ("fn(x, y) * 1.0", ((2, 3), _XP), {"kind": "zero"}))):
    """A mask: derivative zero by rule."""


class interp_above(Rule, key="zymo.rt.interp_above", fn=_rt.interp_above, call="_rt.interp_above", nondiff=True,
                   cases=(("fn(x, z) * y", ((6,), (6,), _XP)), ("fn(x, y) * 1.0", ((2, 3), _XP), {"kind": "zero"}))):
    """A mask: derivative zero by rule."""


def _register_types() -> None:
    from ..analysis import types as TI

    # example arrays (all dimensions 1) cannot stand for the indices or kth
    TI.RESULT_TYPES[put_along_axis.key] = _same_as_first
    TI.RESULT_TYPES[take_along_axis.key] = _along_type
    TI.RESULT_TYPES[partition.key] = _partition_type
    TI.RESULT_TYPES[take_along_axis_vjp.key] = lambda pos, kw: T.Array(_float(pos[0], pos[1]), pos[1].type.ndim)
    TI.RESULT_TYPES[put_along_axis_vjp_values.key] = lambda pos, kw: pos[2].type
    TI.RESULT_TYPES[stored_along_axis.key] = _same_as_first
    TI.RESULT_TYPES[histogram_vjp_weights.key] = _hist_weights_type


def _float(*vals) -> str:
    """The float dtype of derivatives of these values (float32 only if all are)."""
    dts = {getattr(v.type, "dtype", None) or {"f32": "float32"}.get(getattr(v.type, "kind", ""), "float64")
           for v in vals if hasattr(v, "type")}
    return "float32" if dts == {"float32"} else "float64"


def _hist_weights_type(pos, kw):
    a = pos[1]
    w = kw.get("weights", pos[4] if len(pos) > 4 else None)
    return T.Array(_float(w) if hasattr(w, "type") else "float64", a.type.ndim)


_register_types()
