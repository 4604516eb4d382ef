"""Primitives the frontend introduces itself (not names a user calls)."""
from __future__ import annotations

from .. import runtime as _rt
from .registry import BOTH, Form, Rule


def _dim(x, k):
    return x.shape[k]


def _or(a, b):
    return a or b


def _and(a, b):
    return a and b


S2 = ((), ())  # two scalars
_BOOL = (Form("bool_zero", S2, kind="zero"), Form("bool_const", S2))
_LOOP = (Form("break_continue", ((6,),), extra=(0.9,)),)


class dim(Rule, key="zymo.dim", fn=_dim, template="{0}.shape[{1}]", nondiff=True, may_raise=False, value_numbered=True, cases=(
        Form("dim", ((3, 4),), BOTH), Form("dim_syntax", ((5,),), BOTH))): pass
class or_(Rule, key="zymo.or", fn=_or, template="({0} or {1})", nondiff=True, may_raise=False, cases=_BOOL + _LOOP): pass
class and_(Rule, key="zymo.and", fn=_and, template="({0} and {1})", nondiff=True, may_raise=False,
           cases=_BOOL + (Form("chain_cmp", S2),) + _LOOP): pass
class trip(Rule, key="zymo.trip", fn=_rt.trip, call="_rt.trip", nondiff=True, may_raise=False, cases=(
        Form("trip", ((5,),), BOTH), Form("after_loop", ((5,),), BOTH))): pass
class span(Rule, key="zymo.span", fn=_rt.span, call="_rt.span", nondiff=True, may_raise=False, cases=(
        Form("span", ((5,),), BOTH),)): pass
class check_bound(Rule, key="zymo.check_bound", fn=_rt.check_bound, call="_rt.check_bound", nondiff=True,
                  cases=(Form("after_loop", ((5,),), BOTH),)): pass


class as_dtype(Rule, key="zymo.as_dtype", fn=_rt.as_dtype, call="_rt.as_dtype", cases=(
        ("acc = x * 0.0\nfor i in range(3):\n    acc = acc + np.float_power(x, 2.0) * (i + 1.0)\nreturn acc",
         ((4,),), {"dtypes": ("float32",)}),)):
    """A loop carry that becomes a wider float array (float32 -> float64), converted by the
    frontend: a copy. The adjoint is added into the narrower shadow as it is."""
    def jvp_x(t, ans, x, dtype): return _rt.as_dtype(t, dtype)
    def vjp_x(g, ans, x, dtype): return g
