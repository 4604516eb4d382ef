"""Rules for the `math` module (scalar functions of Python floats)."""
from __future__ import annotations

import math

import numpy as np

from .. import runtime as _rt
from .registry import Rule

# facts (registry.py): every `math` function is a function of its numbers (value-numbered);
# those of `_S` Numba computes without raising (nan or inf where Python raises)
_N = dict(value_numbered=True)
_S = dict(value_numbered=True, numba_safe=True)


class sin(Rule, key="math.sin", fn=math.sin, **_S):
    def jvp_x(t, ans, x): return t * math.cos(x)
    def vjp_x(g, ans, x): return g * math.cos(x)


class cos(Rule, key="math.cos", fn=math.cos, **_S):
    def jvp_x(t, ans, x): return -t * math.sin(x)
    def vjp_x(g, ans, x): return -g * math.sin(x)


class tan(Rule, key="math.tan", fn=math.tan, **_S):
    def jvp_x(t, ans, x): return t * (1.0 + ans * ans)
    def vjp_x(g, ans, x): return g * (1.0 + ans * ans)


class exp(Rule, key="math.exp", fn=math.exp, **_S):
    def jvp_x(t, ans, x): return t * ans
    def vjp_x(g, ans, x): return g * ans


class expm1(Rule, key="math.expm1", fn=math.expm1, **_S):
    def jvp_x(t, ans, x): return t * (ans + 1.0)
    def vjp_x(g, ans, x): return g * (ans + 1.0)


class log(Rule, key="math.log", fn=math.log, **_S):
    def jvp_x(t, ans, x): return t / x
    def vjp_x(g, ans, x): return g / x


class log1p(Rule, key="math.log1p", fn=math.log1p, **_S):
    def jvp_x(t, ans, x): return t / (1.0 + x)
    def vjp_x(g, ans, x): return g / (1.0 + x)


class log2(Rule, key="math.log2", fn=math.log2, **_S):
    def jvp_x(t, ans, x): return t / (x * 0.6931471805599453)
    def vjp_x(g, ans, x): return g / (x * 0.6931471805599453)


class log10(Rule, key="math.log10", fn=math.log10, **_S):
    def jvp_x(t, ans, x): return t / (x * 2.302585092994046)
    def vjp_x(g, ans, x): return g / (x * 2.302585092994046)


class sqrt(Rule, key="math.sqrt", fn=math.sqrt, **_S):
    def jvp_x(t, ans, x): return t / (2.0 * ans)
    def vjp_x(g, ans, x): return g / (2.0 * ans)


class tanh(Rule, key="math.tanh", fn=math.tanh, **_S):
    def jvp_x(t, ans, x): return t * (1.0 - ans * ans)
    def vjp_x(g, ans, x): return g * (1.0 - ans * ans)


class sinh(Rule, key="math.sinh", fn=math.sinh, **_S):
    def jvp_x(t, ans, x): return t * math.cosh(x)
    def vjp_x(g, ans, x): return g * math.cosh(x)


class cosh(Rule, key="math.cosh", fn=math.cosh, **_S):
    def jvp_x(t, ans, x): return t * math.sinh(x)
    def vjp_x(g, ans, x): return g * math.sinh(x)


class asin(Rule, key="math.asin", fn=math.asin, **_S):
    def jvp_x(t, ans, x): return t / math.sqrt(1.0 - x * x)
    def vjp_x(g, ans, x): return g / math.sqrt(1.0 - x * x)


class acos(Rule, key="math.acos", fn=math.acos, **_S):
    def jvp_x(t, ans, x): return -t / math.sqrt(1.0 - x * x)
    def vjp_x(g, ans, x): return -g / math.sqrt(1.0 - x * x)


class atan(Rule, key="math.atan", fn=math.atan, **_S):
    def jvp_x(t, ans, x): return t / (1.0 + x * x)
    def vjp_x(g, ans, x): return g / (1.0 + x * x)


class atan2(Rule, key="math.atan2", fn=math.atan2, **_S):
    def jvp_y(t, ans, y, x): return t * x / (x * x + y * y)
    def jvp_x(t, ans, y, x): return -t * y / (x * x + y * y)
    def vjp_y(g, ans, y, x): return g * x / (x * x + y * y)
    def vjp_x(g, ans, y, x): return -g * y / (x * x + y * y)


class hypot(Rule, key="math.hypot", fn=math.hypot, **_S):
    def jvp_x(t, ans, x, y): return t * x / ans
    def jvp_y(t, ans, x, y): return t * y / ans
    def vjp_x(g, ans, x, y): return g * x / ans
    def vjp_y(g, ans, x, y): return g * y / ans


class pow_(Rule, key="math.pow", fn=math.pow, **_S):
    """NumPy's arithmetic in the derivatives, as for every rule of numbers (`_rt.fpow`, `np.log`):
    at `x = 0` they are inf (or nan), where `math.pow(0.0, -0.5)` and `math.log(0.0)` raise."""
    def jvp_x(t, ans, x, y): return t * y * _rt.fpow(x, y - 1.0 + (y == 0))
    def jvp_y(t, ans, x, y): return t * ans * np.log(x + (x == 0))
    def vjp_x(g, ans, x, y): return g * y * _rt.fpow(x, y - 1.0 + (y == 0))
    def vjp_y(g, ans, x, y): return g * ans * np.log(x + (x == 0))


class fabs(Rule, key="math.fabs", fn=math.fabs, **_S):
    def jvp_x(t, ans, x): return t * math.copysign(1.0, x)
    def vjp_x(g, ans, x): return g * math.copysign(1.0, x)


class erf(Rule, key="math.erf", fn=math.erf, **_N):
    def jvp_x(t, ans, x): return t * 1.1283791670955126 * math.exp(-x * x)
    def vjp_x(g, ans, x): return g * 1.1283791670955126 * math.exp(-x * x)


_ND = dict(nondiff=True)


class floor(Rule, key="math.floor", fn=math.floor, **_ND, **_N): pass
class ceil(Rule, key="math.ceil", fn=math.ceil, **_ND, **_N): pass
class trunc(Rule, key="math.trunc", fn=math.trunc, **_ND, **_N): pass
class isfinite(Rule, key="math.isfinite", fn=math.isfinite, **_ND, **_N): pass
class isnan(Rule, key="math.isnan", fn=math.isnan, **_ND, **_N): pass
