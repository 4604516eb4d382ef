"""Rules for NumPy's elementwise functions: ufuncs, `clip`, `where`, and the
non-differentiable ones (rounding, comparisons, predicates, integer operations).

Contract: every rule here is `elementwise` (operands broadcast; codegen sums each
adjoint back to its operand's shape) and, when the primal is a ufunc, accepts
`out=` (in-place operators `x += y` lower to `np.add(x, y, out=x)`). Derivative
bodies keep the operands' dtype (float32 stays float32). Choices at kinks:
`maximum`/`minimum`/`fmax`/`fmin` split the derivative equally between tied
operands (as `np.max` splits it between tied elements); `abs`/`fabs` have
derivative `sign(x)` (0 at 0); `clip` passes the derivative to `x` inside
`[lo, hi]` including the bounds, and to a bound where `x` is strictly beyond it.
`nondiff` rules have zero derivative by rule.
"""
from __future__ import annotations

import numpy as np

from .. import runtime as _rt  # names used by inlined rule bodies
from .registry import Rule

_U = dict(elementwise=True, out=True)


# -- unary -------------------------------------------------------------------------
class sin(Rule, key="numpy.sin", fn=np.sin, **_U):
    def jvp_x(t, ans, x): return t * np.cos(x)
    def vjp_x(g, ans, x): return g * np.cos(x)


class cos(Rule, key="numpy.cos", fn=np.cos, **_U):
    def jvp_x(t, ans, x): return -t * np.sin(x)
    def vjp_x(g, ans, x): return -g * np.sin(x)


class tan(Rule, key="numpy.tan", fn=np.tan, **_U):
    def jvp_x(t, ans, x): return t * (1.0 + ans * ans)
    def vjp_x(g, ans, x): return g * (1.0 + ans * ans)


class arcsin(Rule, key="numpy.arcsin", fn=np.arcsin, **_U):
    def jvp_x(t, ans, x): return t / np.sqrt(1.0 - x * x)
    def vjp_x(g, ans, x): return g / np.sqrt(1.0 - x * x)


class arccos(Rule, key="numpy.arccos", fn=np.arccos, **_U):
    def jvp_x(t, ans, x): return -t / np.sqrt(1.0 - x * x)
    def vjp_x(g, ans, x): return -g / np.sqrt(1.0 - x * x)


class arctan(Rule, key="numpy.arctan", fn=np.arctan, **_U):
    def jvp_x(t, ans, x): return t / (1.0 + x * x)
    def vjp_x(g, ans, x): return g / (1.0 + x * x)


class sinh(Rule, key="numpy.sinh", fn=np.sinh, **_U):
    def jvp_x(t, ans, x): return t * np.cosh(x)
    def vjp_x(g, ans, x): return g * np.cosh(x)


class cosh(Rule, key="numpy.cosh", fn=np.cosh, **_U):
    def jvp_x(t, ans, x): return t * np.sinh(x)
    def vjp_x(g, ans, x): return g * np.sinh(x)


class tanh(Rule, key="numpy.tanh", fn=np.tanh, **_U):
    def jvp_x(t, ans, x): return t * (1.0 - ans * ans)
    def vjp_x(g, ans, x): return g * (1.0 - ans * ans)


class arcsinh(Rule, key="numpy.arcsinh", fn=np.arcsinh, **_U):
    def jvp_x(t, ans, x): return t / np.sqrt(x * x + 1.0)
    def vjp_x(g, ans, x): return g / np.sqrt(x * x + 1.0)


class arccosh(Rule, key="numpy.arccosh", fn=np.arccosh, **_U):
    def jvp_x(t, ans, x): return t / np.sqrt(x * x - 1.0)
    def vjp_x(g, ans, x): return g / np.sqrt(x * x - 1.0)


class arctanh(Rule, key="numpy.arctanh", fn=np.arctanh, **_U):
    def jvp_x(t, ans, x): return t / (1.0 - x * x)
    def vjp_x(g, ans, x): return g / (1.0 - x * x)


class exp(Rule, key="numpy.exp", fn=np.exp, **_U):
    def jvp_x(t, ans, x): return t * ans
    def vjp_x(g, ans, x): return g * ans


class exp2(Rule, key="numpy.exp2", fn=np.exp2, **_U):
    def jvp_x(t, ans, x): return t * ans * 0.6931471805599453
    def vjp_x(g, ans, x): return g * ans * 0.6931471805599453


class expm1(Rule, key="numpy.expm1", fn=np.expm1, **_U):
    """`exp(x)`, not `ans + 1`: for x far below 0 that sum keeps few digits (2e-4 relative at -30)."""
    def jvp_x(t, ans, x): return t * np.exp(x)
    def vjp_x(g, ans, x): return g * np.exp(x)


class log(Rule, key="numpy.log", fn=np.log, **_U):
    def jvp_x(t, ans, x): return t / x
    def vjp_x(g, ans, x): return g / x


class log2(Rule, key="numpy.log2", fn=np.log2, **_U):
    def jvp_x(t, ans, x): return t / (x * 0.6931471805599453)
    def vjp_x(g, ans, x): return g / (x * 0.6931471805599453)


class log10(Rule, key="numpy.log10", fn=np.log10, **_U):
    def jvp_x(t, ans, x): return t / (x * 2.302585092994046)
    def vjp_x(g, ans, x): return g / (x * 2.302585092994046)


class log1p(Rule, key="numpy.log1p", fn=np.log1p, **_U):
    def jvp_x(t, ans, x): return t / (1.0 + x)
    def vjp_x(g, ans, x): return g / (1.0 + x)


class sqrt(Rule, key="numpy.sqrt", fn=np.sqrt, **_U):
    def jvp_x(t, ans, x): return t / (2.0 * ans)
    def vjp_x(g, ans, x): return g / (2.0 * ans)


class cbrt(Rule, key="numpy.cbrt", fn=np.cbrt, **_U):
    def jvp_x(t, ans, x): return t / (3.0 * ans * ans)
    def vjp_x(g, ans, x): return g / (3.0 * ans * ans)


class square(Rule, key="numpy.square", fn=np.square, **_U):
    def jvp_x(t, ans, x): return 2.0 * x * t
    def vjp_x(g, ans, x): return 2.0 * x * g


class reciprocal(Rule, key="numpy.reciprocal", fn=np.reciprocal, **_U):
    def jvp_x(t, ans, x): return -t * ans * ans
    def vjp_x(g, ans, x): return -g * ans * ans


class absolute(Rule, key="numpy.absolute", fn=np.absolute, **_U):
    def jvp_x(t, ans, x): return t * np.sign(x)
    def vjp_x(g, ans, x): return g * np.sign(x)


class fabs(Rule, key="numpy.fabs", fn=np.fabs, **_U):
    def jvp_x(t, ans, x): return t * np.sign(x)
    def vjp_x(g, ans, x): return g * np.sign(x)


class negative(Rule, key="numpy.negative", fn=np.negative, **_U):
    def jvp_x(t, ans, x): return -t
    def vjp_x(g, ans, x): return -g


class positive(Rule, key="numpy.positive", fn=np.positive, **_U):
    def jvp_x(t, ans, x): return t
    def vjp_x(g, ans, x): return g


class deg2rad(Rule, key="numpy.deg2rad", fn=np.deg2rad, **_U):
    def jvp_x(t, ans, x): return t * 0.017453292519943295
    def vjp_x(g, ans, x): return g * 0.017453292519943295


class radians(deg2rad, key="numpy.radians", fn=np.radians):
    pass


class rad2deg(Rule, key="numpy.rad2deg", fn=np.rad2deg, **_U):
    def jvp_x(t, ans, x): return t * 57.29577951308232
    def vjp_x(g, ans, x): return g * 57.29577951308232


class degrees(rad2deg, key="numpy.degrees", fn=np.degrees):
    pass


# -- binary ------------------------------------------------------------------------
class add(Rule, key="numpy.add", fn=np.add, **_U):
    def jvp_x(t, ans, x, y): return t
    def jvp_y(t, ans, x, y): return t
    def vjp_x(g, ans, x, y): return g
    def vjp_y(g, ans, x, y): return g


class subtract(Rule, key="numpy.subtract", fn=np.subtract, **_U):
    def jvp_x(t, ans, x, y): return t
    def jvp_y(t, ans, x, y): return -t
    def vjp_x(g, ans, x, y): return g
    def vjp_y(g, ans, x, y): return -g


class multiply(Rule, key="numpy.multiply", fn=np.multiply, **_U):
    def jvp_x(t, ans, x, y): return t * y
    def jvp_y(t, ans, x, y): return x * t
    def vjp_x(g, ans, x, y): return g * y
    def vjp_y(g, ans, x, y): return x * g


class divide(Rule, key="numpy.divide", fn=np.divide, **_U):
    def jvp_x(t, ans, x, y): return t / y
    def jvp_y(t, ans, x, y): return -t * x / (y * y)
    def vjp_x(g, ans, x, y): return g / y
    def vjp_y(g, ans, x, y): return -g * x / (y * y)


class power(Rule, key="numpy.power", fn=np.power, **_U):
    def jvp_x(t, ans, x, y): return t * y * x ** (y - 1 + (y == 0))
    def jvp_y(t, ans, x, y): return t * ans * np.log(x + (x == 0))
    def vjp_x(g, ans, x, y): return g * y * x ** (y - 1 + (y == 0))
    def vjp_y(g, ans, x, y): return g * ans * np.log(x + (x == 0))


class float_power(Rule, key="numpy.float_power", fn=np.float_power, **_U):
    """Computes in float64 whatever the operands' dtype (as NumPy does)."""
    def jvp_x(t, ans, x, y): return t * y * np.float_power(x, y - 1 + (y == 0))
    def jvp_y(t, ans, x, y): return t * ans * np.log(np.float_power(x + (x == 0), 1.0))
    def vjp_x(g, ans, x, y): return g * y * np.float_power(x, y - 1 + (y == 0))
    def vjp_y(g, ans, x, y): return g * ans * np.log(np.float_power(x + (x == 0), 1.0))


class arctan2(Rule, key="numpy.arctan2", fn=np.arctan2, **_U):
    def jvp_y(t, ans, y, x): return t * x / (x * x + y * y)
    def jvp_x(t, ans, y, x): return -t * y / (x * x + y * y)
    def vjp_y(g, ans, y, x): return g * x / (x * x + y * y)
    def vjp_x(g, ans, y, x): return -g * y / (x * x + y * y)


class hypot(Rule, key="numpy.hypot", fn=np.hypot, **_U):
    def jvp_x(t, ans, x, y): return t * x / ans
    def jvp_y(t, ans, x, y): return t * y / ans
    def vjp_x(g, ans, x, y): return g * x / ans
    def vjp_y(g, ans, x, y): return g * y / ans


class logaddexp(Rule, key="numpy.logaddexp", fn=np.logaddexp, **_U):
    def jvp_x(t, ans, x, y): return t * np.exp(x - ans)
    def jvp_y(t, ans, x, y): return t * np.exp(y - ans)
    def vjp_x(g, ans, x, y): return g * np.exp(x - ans)
    def vjp_y(g, ans, x, y): return g * np.exp(y - ans)


class logaddexp2(Rule, key="numpy.logaddexp2", fn=np.logaddexp2, **_U):
    def jvp_x(t, ans, x, y): return t * np.exp2(x - ans)
    def jvp_y(t, ans, x, y): return t * np.exp2(y - ans)
    def vjp_x(g, ans, x, y): return g * np.exp2(x - ans)
    def vjp_y(g, ans, x, y): return g * np.exp2(y - ans)


class maximum(Rule, key="numpy.maximum", fn=np.maximum, **_U):
    """Tied operands share the derivative equally."""
    def jvp_x(t, ans, x, y): return t * (x > y) + 0.5 * t * (x == y)
    def jvp_y(t, ans, x, y): return t * (y > x) + 0.5 * t * (x == y)
    def vjp_x(g, ans, x, y): return g * (x > y) + 0.5 * g * (x == y)
    def vjp_y(g, ans, x, y): return g * (y > x) + 0.5 * g * (x == y)


class minimum(Rule, key="numpy.minimum", fn=np.minimum, **_U):
    """Tied operands share the derivative equally."""
    def jvp_x(t, ans, x, y): return t * (x < y) + 0.5 * t * (x == y)
    def jvp_y(t, ans, x, y): return t * (y < x) + 0.5 * t * (x == y)
    def vjp_x(g, ans, x, y): return g * (x < y) + 0.5 * g * (x == y)
    def vjp_y(g, ans, x, y): return g * (y < x) + 0.5 * g * (x == y)


class fmax(Rule, key="numpy.fmax", fn=np.fmax, **_U):
    """Like `maximum`, except that a NaN operand passes the derivative to the other."""
    def jvp_x(t, ans, x, y): return t * ((x > y) | np.isnan(y)) + 0.5 * t * (x == y)
    def jvp_y(t, ans, x, y): return t * ((y > x) | np.isnan(x)) + 0.5 * t * (x == y)
    def vjp_x(g, ans, x, y): return g * ((x > y) | np.isnan(y)) + 0.5 * g * (x == y)
    def vjp_y(g, ans, x, y): return g * ((y > x) | np.isnan(x)) + 0.5 * g * (x == y)


class fmin(Rule, key="numpy.fmin", fn=np.fmin, **_U):
    """Like `minimum`, except that a NaN operand passes the derivative to the other."""
    def jvp_x(t, ans, x, y): return t * ((x < y) | np.isnan(y)) + 0.5 * t * (x == y)
    def jvp_y(t, ans, x, y): return t * ((y < x) | np.isnan(x)) + 0.5 * t * (x == y)
    def vjp_x(g, ans, x, y): return g * ((x < y) | np.isnan(y)) + 0.5 * g * (x == y)
    def vjp_y(g, ans, x, y): return g * ((y < x) | np.isnan(x)) + 0.5 * g * (x == y)


class copysign(Rule, key="numpy.copysign", fn=np.copysign, **_U):
    """|x| with the sign of y: the derivative in y is zero (away from y == 0)."""
    def jvp_x(t, ans, x, y): return t * np.sign(x) * np.sign(ans)
    def vjp_x(g, ans, x, y): return g * np.sign(x) * np.sign(ans)


class remainder(Rule, key="numpy.remainder", fn=np.remainder, **_U):
    def jvp_x(t, ans, x, y): return t
    def jvp_y(t, ans, x, y): return -t * np.floor_divide(x, y)
    def vjp_x(g, ans, x, y): return g
    def vjp_y(g, ans, x, y): return -g * np.floor_divide(x, y)


class fmod(Rule, key="numpy.fmod", fn=np.fmod, **_U):
    def jvp_x(t, ans, x, y): return t
    def jvp_y(t, ans, x, y): return -t * np.trunc(x / y)
    def vjp_x(g, ans, x, y): return g
    def vjp_y(g, ans, x, y): return -g * np.trunc(x / y)


# -- not ufuncs, elementwise all the same ---------------------------------------------
_CLIP = {"dom": "clip"}


class clip(Rule, key="numpy.clip", fn=np.clip, elementwise=True, cases=(
        ("fn(x, -0.5, 0.7)", ((3, 4),), _CLIP), ("fn(x, -0.5, 0.7)", ((),), _CLIP),
        ("fn(x, y, z)", ((5,), (5,), (5,)), _CLIP), ("fn(x, y, 0.9)", ((3, 4), (4,)), _CLIP),
        ("fn(x, None, z)", ((5,), (), ()), _CLIP), ("fn(x * x, y, None) * x", ((5,), ()), _CLIP),
        ("fn(x, a_min=-0.5, a_max=0.7)", ((3, 4),), _CLIP), ("fn(x, a_min=None, a_max=0.7)", ((5,),), _CLIP), ("fn(x, max=0.7)", ((5,),), _CLIP),
        ("fn(x, min=y, max=z)", ((5,), (), ()), _CLIP), ("x.clip(min=-0.5) * y", ((5,), (5,)), _CLIP),
        ("x.clip(max=y)", ((5,), ()), _CLIP)), aliases={"min": "lo", "max": "hi"}):
    """Inside [lo, hi] (bounds included) the derivative goes to x; beyond a bound to it."""
    def jvp_x(t, ans, x, lo, hi): return t * _rt.clip_inside(x, lo, hi)
    def jvp_lo(t, ans, x, lo, hi): return t * (x < lo)
    def jvp_hi(t, ans, x, lo, hi): return t * (x > hi)
    def vjp_x(g, ans, x, lo, hi): return g * _rt.clip_inside(x, lo, hi)
    def vjp_lo(g, ans, x, lo, hi): return g * (x < lo)
    def vjp_hi(g, ans, x, lo, hi): return g * (x > hi)


class where(Rule, key="numpy.where", fn=np.where, elementwise=True, cases=(
        ("fn(x > 0.0, x, y)", ((5,), (5,))), ("fn(x > 0.0, x * x, 2.0)", ((3, 4),)),
        ("fn(z, x, y)", ((3, 4), (4,), ("bool", (3, 4)))), ("fn(x > y, x, y)", ((), ())),
        ("fn(x > 0.0, y, x)", ((3, 4), ())))):
    """`np.where(cond, x, y)`; the one-argument form (indices) is not differentiable. The
    derivative is a select, as JAX's: the branch not taken contributes 0 even where its
    tangent or adjoint is inf or nan (`np.where(x > 0, np.sqrt(x), 0.0)` at 0 in forward mode)."""
    def jvp_x(t, ans, cond, x, y): return np.where(cond, t, 0.0)
    def jvp_y(t, ans, cond, x, y): return np.where(cond, 0.0, t)
    def vjp_x(g, ans, cond, x, y): return np.where(cond, g, 0.0)
    def vjp_y(g, ans, cond, x, y): return np.where(cond, 0.0, g)

    @classmethod
    def check(cls, pos, kw):
        if len(pos) + len(kw) != 3:
            return "np.where(cond) (the indices of true elements) is not supported; use np.where(cond, x, y)"
        return None


# -- non-differentiable by rule ----------------------------------------------------------
_ND = dict(nondiff=True)

NONDIFF_UFUNCS = [
    "sign", "floor", "ceil", "trunc", "rint", "isfinite", "isnan", "isinf", "signbit", "floor_divide",
    "greater", "greater_equal", "less", "less_equal", "equal", "not_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "spacing",
]
# integer-only ufuncs (no float loop at all): non-differentiable by nature
INTEGER_UFUNCS = ["bitwise_count", "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift", "gcd", "lcm"]
NONDIFF_FUNCTIONS = ["round", "around", "fix", "isreal"]
_TWO = (("x * (1.0 + fn(x, y))", ((5,), (5,))), ("2.0 * fn(x, y)", ((5,), (5,)), {"kind": "zero"}))
_INT2 = (("x * (1.0 + fn(np.arange(5), 3))", ((5,),)), ("2.0 * fn(np.arange(4) + 1, 6) + x", ((4,),)))
_INT1 = (("x * (1.0 + fn(np.arange(5)))", ((5,),)),)
_CASES = {"isclose": _TWO, "allclose": _TWO, "array_equal": _TWO,
          "any": (("x * (1.0 + fn(x > 0.5))", ((5,),)), ("2.0 * fn(x > 0.5) + x", ((3, 4),))),
          "all": (("x * (1.0 + fn(x > -0.5))", ((5,),)), ("2.0 * fn(x > 0.5, axis=0) + x", ((3, 4),))),
          "count_nonzero": (("x * (1.0 + fn(x > 0.5))", ((5,),)), ("2.0 * fn(x > 0.5) + x", ((3, 4),))),
          "invert": _INT1, "bitwise_count": _INT1}
_CASES.update({k: _INT2 for k in INTEGER_UFUNCS if k not in ("invert", "bitwise_count")})

for _name in NONDIFF_UFUNCS + INTEGER_UFUNCS + NONDIFF_FUNCTIONS + ["isclose", "allclose", "array_equal", "any",
                                                                     "all", "count_nonzero"]:
    _fn = getattr(np, _name)
    type(_name, (Rule,), {"__module__": __name__}, key=f"numpy.{_name}", fn=_fn, **_ND,
         elementwise=isinstance(_fn, np.ufunc), out=isinstance(_fn, np.ufunc), cases=_CASES.get(_name, ()))


class conjugate(Rule, key="numpy.conjugate", fn=np.conjugate, **_U):
    """The identity on real numbers (zymo refuses complex ones)."""
    def jvp_x(t, ans, x): return t
    def vjp_x(g, ans, x): return g


class ldexp(Rule, key="numpy.ldexp", fn=np.ldexp, elementwise=True, out=True, cases=(
        ("fn(x, 3)", ((5,),)), ("fn(x, np.arange(4) - 2)", ((3, 4),)), ("fn(x, 2)", ((),)))):
    """x * 2**i for an integer i (not differentiated)."""
    auto_cases = False  # the generic binary cases would pass a float exponent
    def jvp_x(t, ans, x, i): return np.ldexp(t, i)
    def vjp_x(g, ans, x, i): return np.ldexp(g, i)


class heaviside(Rule, key="numpy.heaviside", fn=np.heaviside, **_U, cases=(
        ("fn(x * 0.0, y)", ((5,), (5,))), ("fn(np.floor(x), y) * x", ((3, 4), ())),
        ("fn(np.floor(x), y)", ((5,), (3, 1))), ("fn(x, y) * x", ((5,), ())))):
    """0 where x < 0, 1 where x > 0, h0 where x == 0 (nan where x is nan). The derivative in x
    is 0 (almost everywhere: zymo takes 0 also at x == 0, where the step is not
    differentiable); in h0 it is 1 where x == 0 exactly, else 0."""
    def jvp_h0(t, ans, x, h0): return t * (x == 0)
    def vjp_h0(g, ans, x, h0): return g * (x == 0)


class nextafter(Rule, key="numpy.nextafter", fn=np.nextafter, **_U):
    """The next float after x towards y: x's derivative is 1, y's is 0."""
    def jvp_x(t, ans, x, y): return t
    def vjp_x(g, ans, x, y): return g
