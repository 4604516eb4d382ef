"""Rules for NumPy's reductions and scans: sum, mean, prod, var, std, max/min
(and amax/amin), cumsum, cumprod, linalg.norm; argmax/argmin are non-differentiable.

Contract: each rule takes `axis` (None, an int or a tuple of ints) and `keepdims`
by keyword (only `axis` may be positional: `check` refuses the rest, whose NumPy
positions are dtype/out). Derivatives are exact everywhere the function is
differentiable, including products and cumulative products with zeros (the
adjoint of `prod` multiplies the other elements; `cumprod` runs a recurrence, no
division). Ties in `max`/`min` share the derivative equally among the tied
elements (the subgradient of the mean of the tied elements; JAX makes the same
choice), and `norm(x, inf)` does likewise. `norm` differentiates vector p-norms
(any `ord` >= 1 with a float value, `inf`) and the Frobenius norm (`None`, 'fro');
matrix 2-norm, nuclear and induced 1/inf norms are refused at the user's line, also where a
2-tuple `axis` holds ints known only at run time, and where an `ord` known only at run time could
select a matrix norm.
At `x = 0` the 2-norm's derivative is taken as 0 (a subgradient).
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import runtime as _rt
from .registry import BOTH, NOT_CONST, Form, Rule, const_value

_AX = (("fn(x)", ((5,),)), ("fn(x)", ((3, 4),)), ("fn(x, axis=0)", ((3, 4),)), ("fn(x, 1)", ((3, 4),)),
       ("fn(x, axis=-1, keepdims=True)", ((2, 3, 4),)), ("fn(x, axis=(0, 2))", ((2, 3, 4),)),
       ("fn(x, keepdims=True)", ((3, 4),)), ("fn(fn(x * x, axis=0))", ((3, 4),)))


# sum, mean, max, min: all elements, axis 0, the last axis kept, all kept, axis 1, axes (0, 2)
_RED = tuple(Form(name, (s,), BOTH) for s in [(5,), (3, 4), (2, 3, 4)]
             for name in ("red_all", "red_axis0", "red_last_keep", "red_all_keep"))
_SUM = _RED + tuple(Form(name, (s,), BOTH) for s in [(3, 4), (2, 3, 4)] for name in ("red_axis1", "red_chain")) + (
    Form("red_axes02", ((2, 3, 4),), BOTH),)
_MAX = _RED + (Form("red_axis1", ((3, 4),), BOTH), Form("red_axes02", ((2, 3, 4),), BOTH))


class _Reduction(Rule):
    @classmethod
    def check(cls, pos, kw):
        if len(pos) > 2:
            return (f"pass keepdims and the other options of {cls.key} by keyword (positionally NumPy reads "
                    "them as dtype and out)")
        return None


class sum_(_Reduction, key="numpy.sum", fn=np.sum, array_safe=True, cases=_SUM + (
        Form("sum_method", ((3, 4),), BOTH), Form("sum_builtin", ((3, 4),), BOTH))):
    def jvp_x(t, ans, x, axis=None, keepdims=False): return np.sum(t, axis=axis, keepdims=keepdims)
    def vjp_x(g, ans, x, axis=None, keepdims=False): return _rt.expand_reduced(g, x, axis, keepdims)


class mean(_Reduction, key="numpy.mean", fn=np.mean, array_safe=True, cases=_SUM + (Form("mean_method", ((3, 4),), BOTH),)):
    def jvp_x(t, ans, x, axis=None, keepdims=False): return np.mean(t, axis=axis, keepdims=keepdims)
    def vjp_x(g, ans, x, axis=None, keepdims=False):
        return _rt.expand_reduced(g, x, axis, keepdims) / _rt.reduced_count(x, ans)


class max_(_Reduction, key="numpy.max", fn=np.max, cases=_MAX + (
        Form("max_method", ((3, 4),), BOTH), Form("call1", ((5,),), BOTH, fn=builtins.max, tag=",builtin"))):
    """Ties share the derivative equally (the subgradient of the mean of the tied elements)."""
    def jvp_x(t, ans, x, axis=None, keepdims=False):
        return np.sum(t * _rt.extreme_mask(x, ans, axis, keepdims), axis=axis, keepdims=keepdims)
    def vjp_x(g, ans, x, axis=None, keepdims=False):
        return _rt.expand_reduced(g, x, axis, keepdims) * _rt.extreme_mask(x, ans, axis, keepdims)


class min_(max_, key="numpy.min", fn=np.min, cases=_MAX + (
        Form("min_method", ((3, 4),), BOTH), Form("call1", ((5,),), BOTH, fn=builtins.min, tag=",builtin"))):
    """Ties share the derivative equally."""


class amax(max_, key="numpy.amax", fn=np.amax, cases=_MAX):
    """Ties share the derivative equally."""


class amin(max_, key="numpy.amin", fn=np.amin, cases=_MAX):
    """Ties share the derivative equally."""


class prod(_Reduction, key="numpy.prod", fn=np.prod, array_safe=True, cases=_AX + (
        ("x.prod(axis=1) * x.prod()", ((3, 4),)), ("fn(x, axis=1)", (("withzero", (3, 4)),)),
        ("fn(x)", (("withzero", (5,)),)))):
    """Exact with zeros: each element's derivative is the product of the others."""
    def jvp_x(t, ans, x, axis=None, keepdims=False):
        return np.sum(t * _rt.prod_others(x, axis), axis=axis, keepdims=keepdims)
    def vjp_x(g, ans, x, axis=None, keepdims=False):
        return _rt.expand_reduced(g, x, axis, keepdims) * _rt.prod_others(x, axis)


class var(_Reduction, key="numpy.var", fn=np.var, cases=_AX + (
        ("fn(x, axis=0, ddof=1)", ((3, 4),)), ("x.var(axis=1) + x.var(ddof=1)", ((3, 4),)))):
    def jvp_x(t, ans, x, axis=None, ddof=0, keepdims=False):
        return np.sum(t * _rt.centered(x, axis), axis=axis, keepdims=keepdims) * (
            _rt.fdiv(2.0, max(_rt.reduced_count(x, ans) - ddof, 0)))
    def vjp_x(g, ans, x, axis=None, ddof=0, keepdims=False):
        return _rt.expand_reduced(g, x, axis, keepdims) * _rt.centered(x, axis) * (
            _rt.fdiv(2.0, max(_rt.reduced_count(x, ans) - ddof, 0)))


class std(_Reduction, key="numpy.std", fn=np.std, cases=_AX + (
        ("fn(x, axis=0, ddof=1)", ((3, 4),)), ("x.std(axis=1) + x.std(ddof=1)", ((3, 4),)))):
    def jvp_x(t, ans, x, axis=None, ddof=0, keepdims=False):
        return np.sum(t * _rt.centered(x, axis), axis=axis, keepdims=keepdims) / (
            ans * max(_rt.reduced_count(x, ans) - ddof, 0))
    def vjp_x(g, ans, x, axis=None, ddof=0, keepdims=False):
        return _rt.expand_reduced(g / (ans * max(_rt.reduced_count(x, ans) - ddof, 0)), x, axis, keepdims) * (
            _rt.centered(x, axis))


_SCAN = (("fn(x)", ((5,),)), ("fn(x)", ((3, 4),)), ("fn(x, axis=0)", ((3, 4),)), ("fn(x, 1)", ((3, 4),)),
         ("fn(x, axis=-2)", ((2, 3, 4),)), ("fn(x, axis=0)", ((),)))


class cumsum(_Reduction, key="numpy.cumsum", fn=np.cumsum, cases=_SCAN + (("x.cumsum(axis=1)", ((3, 4),)),)):
    def jvp_x(t, ans, x, axis=None): return np.cumsum(t, axis=axis)
    def vjp_x(g, ans, x, axis=None): return _rt.cumsum_vjp(g, x, axis)


class cumprod(_Reduction, key="numpy.cumprod", fn=np.cumprod, cases=_SCAN + (
        ("x.cumprod(axis=0)", ((3, 4),)), ("fn(x, axis=1)", (("withzero", (3, 4)),)),
        ("fn(x)", (("withzero", (5,)),)))):
    """Exact with zeros (a recurrence along the axis, no division)."""
    def jvp_x(t, ans, x, axis=None): return _rt.cumprod_jvp(t, x, axis)
    def vjp_x(g, ans, x, axis=None): return _rt.cumprod_vjp(g, x, axis)


class norm(Rule, key="numpy.linalg.norm", fn=np.linalg.norm, cases=(
        ("fn(x)", ((5,),)), ("fn(x)", ((3, 4),)), ("fn(x, 1)", ((5,),)), ("fn(x, np.inf)", ((5,),), {"dom": "numpy.amax"}),
        ("fn(x, axis=1)", ((3, 4),)), ("fn(x, 2, 0, True)", ((3, 4),)), ("fn(x, 'fro')", ((3, 4),)),
        ("fn(x, 3)", ((5,),)), ("fn(x, axis=(0, 1))", ((2, 3, 4),)), ("fn(x, ord=1, axis=0)", ((3, 4),)),
        ("fn(x)", ((),)))):
    def jvp_x(t, ans, x, ord=None, axis=None, keepdims=False):
        return np.sum(t * _rt.norm_grad(x, ans, ord, axis, keepdims), axis=axis, keepdims=keepdims)
    def vjp_x(g, ans, x, ord=None, axis=None, keepdims=False):
        return _rt.expand_reduced(g, x, axis, keepdims) * _rt.norm_grad(x, ans, ord, axis, keepdims)

    @classmethod
    def check(cls, pos, kw):
        args = dict(zip(("x", "ord", "axis", "keepdims"), pos), **kw)
        x, o, ax = args.get("x"), const_value(args.get("ord")), const_value(args.get("axis"))
        ndim = getattr(getattr(x, "type", None), "ndim", 0)
        # a 2-tuple axis is a matrix norm also when its ints are known only at run time (a
        # function's argument: the frontend passes a Python tuple of values)
        raw_ax = args.get("axis")
        pair = isinstance(raw_ax, tuple) and len(raw_ax) == 2
        matrix = (ax is None and ndim == 2 and o is not None) or pair
        if o is NOT_CONST and (matrix or (ax is None and ndim == 2)):
            return ("norm's ord is known only at run time here, where it could select a matrix norm that zymo "
                    "does not differentiate: write ord as a literal (None or 'fro' for matrices)")
        if matrix and o not in (None, "fro"):
            return (f"the matrix norm ord={o!r} is not differentiable in zymo yet (only ord=None or 'fro' for "
                    "matrices)")
        if not matrix and isinstance(o, (int, float)) and o != float("inf") and o < 1:
            return f"the vector norm ord={o!r} is not differentiable in zymo (ord must be >= 1 or inf)"
        if isinstance(o, str) and o != "fro":
            return f"norm ord={o!r} is not differentiable in zymo yet"
        return None
