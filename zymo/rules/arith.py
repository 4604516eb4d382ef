"""Rules for Python's operators and the builtins zymo accepts.

Keys of operators are the operator module's names (`add`, `mul`, ...); they
apply to scalars and arrays alike (elementwise, broadcasting). Builtins are keyed
`builtins.<name>`. Comparisons, `floordiv`, `int`, `len`, `round` are
non-differentiable by rule.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from .. import runtime as _rt  # noqa: F401  (names used by inlined rule bodies)
from .registry import BOTH, Form, Rule

_P = dict(elementwise=True)
# facts (registry.py): `+ - *` never raise on numbers but overflow under np.errstate, are
# cheap to recompute and keep ints computed from sizes such; each operator is value-numbered
_RING = dict(numbers_safe=True, overflows=True, cheap=True, value_numbered=True, size_arith=True)
_NUM = dict(value_numbered=True)
S2 = ((), ())  # two scalars


class add(Rule, key="add", fn=operator.add, template="{0} + {1}", **_P, **_RING):
    def jvp_x(t, ans, x, y): return t
    def jvp_y(t, ans, x, y): return t
    def vjp_x(g, ans, x, y): return g
    def vjp_y(g, ans, x, y): return g


class sub(Rule, key="sub", fn=operator.sub, template="{0} - {1}", **_P, **_RING):
    def jvp_x(t, ans, x, y): return t
    def jvp_y(t, ans, x, y): return -t
    def vjp_x(g, ans, x, y): return g
    def vjp_y(g, ans, x, y): return -g


class mul(Rule, key="mul", fn=operator.mul, template="{0} * {1}", **_P, **_RING):
    def jvp_x(t, ans, x, y): return t * y
    def jvp_y(t, ans, x, y): return x * t
    def vjp_x(g, ans, x, y): return g * y
    def vjp_y(g, ans, x, y): return x * g


class truediv(Rule, key="truediv", fn=operator.truediv, template="{0} / {1}", **_P, **_NUM, cheap=True):
    def jvp_x(t, ans, x, y): return t / y
    def jvp_y(t, ans, x, y): return -t * x / (y * y)
    def vjp_x(g, ans, x, y): return g / y
    def vjp_y(g, ans, x, y): return -g * x / (y * y)


class mod(Rule, key="mod", fn=operator.mod, template="{0} % {1}", **_P, **_NUM, cheap=True):
    def jvp_x(t, ans, x, y): return t
    def jvp_y(t, ans, x, y): return -t * (x // y)
    def vjp_x(g, ans, x, y): return g
    def vjp_y(g, ans, x, y): return -g * (x // y)


class pow_(Rule, key="pow", fn=operator.pow, template="{0} ** {1}", **_P, **_NUM):
    def jvp_x(t, ans, x, y): return t * y * x ** (y - 1 + (y == 0))
    def jvp_y(t, ans, x, y): return t * ans * np.log(x + (x == 0))
    def vjp_x(g, ans, x, y): return g * y * x ** (y - 1 + (y == 0))
    def vjp_y(g, ans, x, y): return g * ans * np.log(x + (x == 0))


class neg(Rule, key="neg", fn=operator.neg, template="-{0}", **_P, **_NUM, cheap=True, numbers_safe=True):
    def jvp_x(t, ans, x): return -t
    def vjp_x(g, ans, x): return -g


class pos(Rule, key="pos", fn=operator.pos, template="+{0}", **_P, **_NUM, numbers_safe=True):
    def jvp_x(t, ans, x): return t
    def vjp_x(g, ans, x): return g


class abs_(Rule, key="builtins.abs", fn=builtins.abs, **_P, numbers_safe=True, cases=(
        Form("call1", ((),), BOTH, fix="positive", tag=",x>0"),
        Form("call1", ((),), BOTH, fix="negative", tag=",x<0"))):
    def jvp_x(t, ans, x): return t * np.sign(x)
    def vjp_x(g, ans, x): return g * np.sign(x)


# not `numbers_safe`: float() of a Python int beyond 1.8e308 raises OverflowError
class float_(Rule, key="builtins.float", fn=builtins.float, cases=(Form("to_float", ((),), ("float32",)),)):
    def jvp_x(t, ans, x): return float(t)
    def vjp_x(g, ans, x): return g


_MINMAX = (Form("call2", S2, BOTH, fix="ascending", tag=",x<y"), Form("call2", S2, BOTH, fix="descending", tag=",x>y"),
           Form("loop2", S2))


class min_(Rule, key="builtins.min", fn=builtins.min, numbers_safe=True, cases=_MINMAX):
    """Ties go to the first argument (as Python's min returns it)."""
    def jvp_x(t, ans, x, y): return t * (x <= y)
    def jvp_y(t, ans, x, y): return t * (y < x)
    def vjp_x(g, ans, x, y): return g * (x <= y)
    def vjp_y(g, ans, x, y): return g * (y < x)


class max_(Rule, key="builtins.max", fn=builtins.max, numbers_safe=True, cases=_MINMAX):
    """Ties go to the first argument (as Python's max returns it)."""
    def jvp_x(t, ans, x, y): return t * (x >= y)
    def jvp_y(t, ans, x, y): return t * (y > x)
    def vjp_x(g, ans, x, y): return g * (x >= y)
    def vjp_y(g, ans, x, y): return g * (y > x)


# -- non-differentiable by rule ------------------------------------------------
_ND = dict(nondiff=True)
# a nondiff rule's result as the only dependence (derivative exactly zero), or as a constant
_ZERO2 = (Form("zero2", S2, kind="zero"), Form("const2", S2))
_CMP = _ZERO2 + (Form("branch2", S2), Form("zero2", ((5,), (5,)), BOTH, kind="zero"),
                 Form("const2", ((5,), (5,)), BOTH), Form("const2", ((3, 4), (3, 4)), BOTH))
_ZERO1 = (Form("zero1", ((),), kind="zero"), Form("const1", ((),)))


class floordiv(Rule, key="floordiv", fn=operator.floordiv, template="{0} // {1}", **_ND, **_NUM, cheap=True,
               cases=_ZERO2 + (Form("const2", ((5,), (5,)), BOTH),)): pass
class lt(Rule, key="lt", fn=operator.lt, template="{0} < {1}", **_ND, **_NUM, numbers_safe=True, cases=_CMP): pass
class le(Rule, key="le", fn=operator.le, template="{0} <= {1}", **_ND, **_NUM, numbers_safe=True, cases=_CMP): pass
class gt(Rule, key="gt", fn=operator.gt, template="{0} > {1}", **_ND, **_NUM, numbers_safe=True, cases=_CMP): pass
class ge(Rule, key="ge", fn=operator.ge, template="{0} >= {1}", **_ND, **_NUM, numbers_safe=True, cases=_CMP): pass
class eq(Rule, key="eq", fn=operator.eq, template="{0} == {1}", **_ND, **_NUM, numbers_safe=True, cases=_CMP): pass
class ne(Rule, key="ne", fn=operator.ne, template="{0} != {1}", **_ND, **_NUM, numbers_safe=True, cases=_CMP): pass
class not_(Rule, key="not", fn=operator.not_, template="not {0}", **_ND, numbers_safe=True, cases=(
        Form("not_zero", S2, kind="zero", dom="lt"), Form("not_const", S2, dom="lt"),
        Form("not_syntax", S2, dom="lt"))): pass
class is_(Rule, key="is", fn=operator.is_, template="{0} is {1}", **_ND, cases=_ZERO2): pass
class is_not(Rule, key="is_not", fn=operator.is_not, template="{0} is not {1}", **_ND, cases=_ZERO2): pass
class int_(Rule, key="builtins.int", fn=builtins.int, **_ND, cases=_ZERO1): pass
class bool_(Rule, key="builtins.bool", fn=builtins.bool, **_ND, numbers_safe=True, cases=_ZERO1): pass
class len_(Rule, key="builtins.len", fn=builtins.len, **_ND, may_raise=False, cases=(
        Form("len_list", ((),), extra=([1.0, 2.0, 3.0],)),)): pass
class round_(Rule, key="builtins.round", fn=builtins.round, **_ND, cases=_ZERO1): pass
class print_(Rule, key="builtins.print", fn=builtins.print, **_ND, pure=False, may_raise=False, cases=(
        Form("printed", ((),), BOTH), Form("printed", ((3,),), BOTH))): pass
