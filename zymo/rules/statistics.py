"""Rules for NaN-ignoring reductions and scans (`nansum`, `nanmean`, `nanmax`, `nanmin`,
`nanprod`, `nanvar`, `nanstd`, `nancumsum`, `nancumprod`), `np.cov`, `np.corrcoef` and
`np.polyval` (helpers in `runtime/statistics.py`).

Contract:
- Parameters are named as NumPy names them (`a`, `axis`, `keepdims`, `ddof`, `m`, `y`,
  `rowvar`, `bias`, `p`, `x`).
- The `nan*` functions treat NaN entries as absent: a NaN entry has derivative 0 and the
  others the derivative of the plain function over the non-NaN entries (the mean and
  variance count only those). A slice that is all NaN has a NaN result (NumPy warns) and a
  NaN derivative. `nanmax`/`nanmin` share the derivative among ties, as `max`/`min` do.
  `nanprod`/`nancumprod` are exact with zeros. Only `axis` may be positional (NumPy's next
  positions are dtype and out, which are refused with `where=` and `initial=`).
- `cov(m, y=None, rowvar=True, bias=False, ddof=None)` and `corrcoef(x, y=None, rowvar=True)`
  follow NumPy's layout (variables in rows, or in columns with `rowvar=False`); the result
  is float64 (as NumPy computes it), squeezed: a 0-d result for one variable (zymo types a
  2-d `m` as giving a matrix; the helpers accept either shape, so a 2-d `m` holding one
  variable is differentiated all the same in the Python backend). `fweights`, `aweights`
  and `dtype` are refused. `corrcoef`'s clipping to [-1, 1] is taken as inactive (it
  changes only rounding).
- `polyval(p, x)`: differentiable in the 1-d coefficients `p` (highest power first) and in
  `x`; a `poly1d` or a 2-d `p` is refused.
- Second order: the helpers the adjoints call have rules of their own at the end of this
  module (`zymo.rt.*`), except `nanprod`/`nancumprod`, whose adjoints call `prod`'s and
  `cumprod`'s helpers (no tangent rules yet: `zymo.hvp` refuses them). The rule for
  `scipy.special.logsumexp`'s adjoint helper (`zymo.rt.lse_vjp`) lives here too.
"""
from __future__ import annotations

import numpy as np

from .. import runtime as _rt
from ..ir import types as T
from .registry import Rule

_M5 = ("const", np.array([False, True, False, False, True]))
_M34 = ("const", np.array([[True, False, False, True], [False, True, False, False], [False, False, True, False]]))


def _red_cases(dom=None):
    o = {"dom": dom} if dom else {}
    return (("fn(x)", ((5,),), o), ("fn(x)", ((3, 4),), o), ("fn(x, axis=0)", ((3, 4),), o),
            ("fn(x, 1)", ((3, 4),), o), ("fn(x, axis=-1, keepdims=True)", ((2, 3, 4),), o),
            ("fn(x, axis=(0, 2))", ((2, 3, 4),), o), ("fn(x, keepdims=True)", ((3, 4),), o),
            ("fn(np.where(y, np.nan, x))", ((5,), _M5), o), ("fn(np.where(y, np.nan, x), axis=1)", ((3, 4), _M34), o),
            ("fn(np.where(y, np.nan, x), axis=0, keepdims=True) * x", ((3, 4), _M34), o))


class _NanReduction(Rule):
    allowed = frozenset({"a", "axis", "keepdims"})

    @classmethod
    def check(cls, pos, kw):
        if len(pos) > 2:
            return (f"pass keepdims and the other options of {cls.key} by keyword (positionally NumPy reads "
                    "them as dtype and out)")
        extra = set(kw) - cls.allowed
        if extra:
            return f"{cls.key} with {', '.join(sorted(extra))} is not supported (axis= and keepdims= are)"
        return None


class nansum(_NanReduction, key="numpy.nansum", fn=np.nansum, cases=_red_cases()):
    def jvp_a(t, ans, a, axis=None, keepdims=False):
        return np.sum(np.where(np.isnan(a), 0.0, t), axis=axis, keepdims=keepdims)
    def vjp_a(g, ans, a, axis=None, keepdims=False):
        return np.where(np.isnan(a), 0.0, _rt.expand_reduced(g, a, axis, keepdims))


class nanmean(_NanReduction, key="numpy.nanmean", fn=np.nanmean, cases=_red_cases()):
    def jvp_a(t, ans, a, axis=None, keepdims=False):
        return np.sum(np.where(np.isnan(a), 0.0, t), axis=axis, keepdims=keepdims) / _rt.nan_count(a, axis, keepdims)
    def vjp_a(g, ans, a, axis=None, keepdims=False):
        return np.where(np.isnan(a), 0.0, _rt.expand_reduced(g / _rt.nan_count(a, axis, keepdims), a, axis, keepdims))


class nanmax(_NanReduction, key="numpy.nanmax", fn=np.nanmax, cases=_red_cases("numpy.amax")):
    """Ties share the derivative equally; NaN entries get none."""
    def jvp_a(t, ans, a, axis=None, keepdims=False):
        return np.sum(np.where(np.isnan(a), 0.0, t) * _rt.extreme_mask(a, ans, axis, keepdims), axis=axis,
                      keepdims=keepdims)
    def vjp_a(g, ans, a, axis=None, keepdims=False):
        return _rt.expand_reduced(g, a, axis, keepdims) * _rt.extreme_mask(a, ans, axis, keepdims)


class nanmin(nanmax, key="numpy.nanmin", fn=np.nanmin, cases=_red_cases("numpy.amin")):
    """Ties share the derivative equally; NaN entries get none."""


class nanprod(_NanReduction, key="numpy.nanprod", fn=np.nanprod, cases=_red_cases() + (
        ("fn(x, axis=1)", (("withzero", (3, 4)),)),)):
    """Exact with zeros: each element's derivative is the product of the other non-NaN ones."""
    def jvp_a(t, ans, a, axis=None, keepdims=False):
        return np.sum(np.where(np.isnan(a), 0.0, t) * _rt.prod_others(_rt.nan_ones(a), axis), axis=axis,
                      keepdims=keepdims)
    def vjp_a(g, ans, a, axis=None, keepdims=False):
        return np.where(np.isnan(a), 0.0, _rt.expand_reduced(g, a, axis, keepdims) * _rt.prod_others(
            _rt.nan_ones(a), axis))


class nanvar(_NanReduction, key="numpy.nanvar", fn=np.nanvar, cases=_red_cases() + (
        ("fn(x, axis=0, ddof=1)", ((3, 4),)), ("fn(np.where(y, np.nan, x), ddof=1, axis=0)", ((3, 4), _M34)))):
    allowed = frozenset({"a", "axis", "keepdims", "ddof"})
    def jvp_a(t, ans, a, axis=None, ddof=0, keepdims=False):
        return np.sum(t * _rt.nan_centered(a, axis), axis=axis, keepdims=keepdims) * (
            2.0 / (_rt.nan_count(a, axis, keepdims) - ddof))
    def vjp_a(g, ans, a, axis=None, ddof=0, keepdims=False):
        return _rt.expand_reduced(g * (2.0 / (_rt.nan_count(a, axis, keepdims) - ddof)), a, axis, keepdims) * (
            _rt.nan_centered(a, axis))


class nanstd(_NanReduction, key="numpy.nanstd", fn=np.nanstd, cases=_red_cases() + (
        ("fn(x, axis=0, ddof=1)", ((3, 4),)), ("fn(np.where(y, np.nan, x), ddof=1, axis=0)", ((3, 4), _M34)))):
    allowed = frozenset({"a", "axis", "keepdims", "ddof"})
    def jvp_a(t, ans, a, axis=None, ddof=0, keepdims=False):
        return np.sum(t * _rt.nan_centered(a, axis), axis=axis, keepdims=keepdims) / (
            ans * (_rt.nan_count(a, axis, keepdims) - ddof))
    def vjp_a(g, ans, a, axis=None, ddof=0, keepdims=False):
        return _rt.expand_reduced(g / (ans * (_rt.nan_count(a, axis, keepdims) - ddof)), a, axis, keepdims) * (
            _rt.nan_centered(a, axis))


_SCAN = (("fn(x)", ((5,),)), ("fn(x)", ((3, 4),)), ("fn(x, axis=0)", ((3, 4),)), ("fn(x, 1)", ((3, 4),)),
         ("fn(x, axis=-2)", ((2, 3, 4),)), ("fn(np.where(y, np.nan, x))", ((5,), _M5)),
         ("fn(np.where(y, np.nan, x), axis=1)", ((3, 4), _M34)), ("fn(np.where(y, np.nan, x), axis=0) * x", ((3, 4), _M34)))


class _NanScan(_NanReduction):
    allowed = frozenset({"a", "axis"})


class nancumsum(_NanScan, key="numpy.nancumsum", fn=np.nancumsum, cases=_SCAN):
    def jvp_a(t, ans, a, axis=None): return np.cumsum(np.where(np.isnan(a), 0.0, t), axis=axis)
    def vjp_a(g, ans, a, axis=None): return np.where(np.isnan(a), 0.0, _rt.cumsum_vjp(g, a, axis))


class nancumprod(_NanScan, key="numpy.nancumprod", fn=np.nancumprod, cases=_SCAN + (
        ("fn(x, axis=1)", (("withzero", (3, 4)),)),)):
    """Exact with zeros (a recurrence along the axis, no division)."""
    def jvp_a(t, ans, a, axis=None): return _rt.cumprod_jvp(np.where(np.isnan(a), 0.0, t), _rt.nan_ones(a), axis)
    def vjp_a(g, ans, a, axis=None): return np.where(np.isnan(a), 0.0, _rt.cumprod_vjp(g, _rt.nan_ones(a), axis))


# -- covariance and correlation --------------------------------------------------------------
class cov(Rule, key="numpy.cov", fn=np.cov, cases=(
        ("fn(x)", ((3, 5),)), ("fn(x)", ((6,),)), ("fn(x, rowvar=False)", ((6, 3),)), ("fn(x, y)", ((5,), (5,))),
        ("fn(x, y, rowvar=False)", ((5, 2), (5,))), ("fn(x, y, False, True)", ((4, 3), (4, 2))),
        ("fn(x, bias=True)", ((3, 5),)), ("fn(x, ddof=2)", ((2, 6),)), ("fn(m=x, y=y, ddof=0)", ((2, 4), (4,))),
        ("fn(x * x)[0, 1] * x", ((2, 5),)))):
    """float64 results; NumPy's layout (see the module docstring)."""
    def jvp_m(t, ans, m, y=None, rowvar=True, bias=False, ddof=None): return _rt.cov_jvp(m, y, t, None, rowvar, bias, ddof)
    def jvp_y(t, ans, m, y=None, rowvar=True, bias=False, ddof=None): return _rt.cov_jvp(m, y, None, t, rowvar, bias, ddof)
    def vjp_m(g, ans, m, y=None, rowvar=True, bias=False, ddof=None): return _rt.cov_vjp(g, m, y, rowvar, bias, ddof, 0)
    def vjp_y(g, ans, m, y=None, rowvar=True, bias=False, ddof=None): return _rt.cov_vjp(g, m, y, rowvar, bias, ddof, 1)

    @classmethod
    def check(cls, pos, kw):
        if len(pos) > 5 or set(kw) - {"m", "y", "rowvar", "bias", "ddof"}:
            return "np.cov is differentiable with y=, rowvar=, bias= and ddof= (not fweights, aweights, dtype)"
        return _check_ndim(pos, kw, ("m", "y"))


class corrcoef(Rule, key="numpy.corrcoef", fn=np.corrcoef, cases=(
        ("fn(x)", ((3, 5),)), ("fn(x, rowvar=False)", ((6, 3),)), ("fn(x, y)", ((5,), (5,))), ("fn(x) * y", ((5,), ())),
        ("fn(x, y, False)", ((5, 2), (5, 2))), ("fn(x=x, y=y, rowvar=True)", ((2, 4), (4,))))):
    """float64 results; a single variable's 1.0 has derivative 0."""
    def jvp_x(t, ans, x, y=None, rowvar=True): return _rt.corrcoef_jvp(x, y, t, None, rowvar)
    def jvp_y(t, ans, x, y=None, rowvar=True): return _rt.corrcoef_jvp(x, y, None, t, rowvar)
    def vjp_x(g, ans, x, y=None, rowvar=True): return _rt.corrcoef_vjp(g, x, y, rowvar, 0)
    def vjp_y(g, ans, x, y=None, rowvar=True): return _rt.corrcoef_vjp(g, x, y, rowvar, 1)

    @classmethod
    def check(cls, pos, kw):
        if len(pos) > 3 or set(kw) - {"x", "y", "rowvar"}:
            return "np.corrcoef is differentiable with y= and rowvar= (not dtype, nor the deprecated bias/ddof)"
        return _check_ndim(pos, kw, ("x", "y"))


def _check_ndim(pos, kw, names):
    args = dict(zip(names, pos))
    args.update({k: v for k, v in kw.items() if k in names})
    for k in names:
        nd = getattr(getattr(args.get(k), "type", None), "ndim", None)
        if nd is not None and nd > 2:
            return f"{k} has more than 2 dimensions"
        if nd == 0:
            return f"{k} must be a 1-d or 2-d array"
    return None


def _cov_type(pos, kw):
    m = pos[0] if pos else kw.get("m", kw.get("x"))
    y = pos[1] if len(pos) > 1 else kw.get("y")
    one = getattr(getattr(m, "type", None), "ndim", 2) == 1 and (y is None or getattr(y, "type", None) is None
                                                                  or isinstance(y.type, T.NoneT))
    return T.scalar_of_dtype("float64") if one else T.Array("float64", 2)


# -- polynomials -------------------------------------------------------------------------------
class polyval(Rule, key="numpy.polyval", fn=np.polyval, cases=(
        ("fn(x, y)", ((4,), (5,))), ("fn(x, y)", ((3,), ())), ("fn(x, y)", ((4,), (3, 2))), ("fn(x, 0.5)", ((4,),)),
        ("fn(x, y)", ((1,), (3,))), ("fn(p=x, x=y)", ((3,), (2, 2))), ("fn(x, x[1:])", ((4,),)))):
    def jvp_p(t, ans, p, x): return np.polyval(t, x) + np.zeros_like(ans)
    def jvp_x(t, ans, p, x): return t * np.polyval(_rt.polyder_coef(p), x)
    def vjp_p(g, ans, p, x): return _rt.polyval_vjp_p(g, p, x)
    def vjp_x(g, ans, p, x): return _rt.unbroadcast(g * np.polyval(_rt.polyder_coef(p), x), x)

    @classmethod
    def check(cls, pos, kw):
        p = pos[0] if pos else kw.get("p")
        nd = getattr(getattr(p, "type", None), "ndim", None)
        if nd != 1:
            return "np.polyval is differentiable with 1-d coefficients p (not a poly1d, a list or a 2-d array)"
        return None


# -- the helpers' own rules: second order (zymo.hvp differentiates the reverse program) -------
class nan_count(Rule, key="zymo.rt.nan_count", fn=_rt.nan_count, call="_rt.nan_count", nondiff=True, cases=(
        ("x * fn(x, 0, False)", ((3, 4),)), ("fn(x, None, False) * 1.0", ((5,),), {"kind": "zero"}),
        ("fn(np.where(y, np.nan, x), 1, True) * x", ((3, 4), _M34)))):
    """A count: derivative zero by rule."""


class nan_centered(Rule, key="zymo.rt.nan_centered", fn=_rt.nan_centered, call="_rt.nan_centered", cases=(
        ("fn(x, None) * y", ((5,), (5,))), ("fn(x, 0)", ((3, 4),)), ("fn(np.where(z, np.nan, x), 1) * y", ((3, 4), (4,), _M34)),
        ("fn(np.where(y, np.nan, x), (0, 1))", ((3, 4), _M34)))):
    """Linear in `a` (a projection onto the non-NaN entries, centred): its own transpose."""
    def jvp_a(t, ans, a, axis=None): return _rt.nan_centered_lin(t, a, axis)
    def vjp_a(gb, ans, a, axis=None): return _rt.nan_centered_lin(gb, a, axis)


class nan_ones(Rule, key="zymo.rt.nan_ones", fn=_rt.nan_ones, call="_rt.nan_ones", cases=(
        ("fn(x) * y", ((5,), (5,))), ("fn(np.where(y, np.nan, x))", ((3, 4), _M34)))):
    def jvp_a(t, ans, a): return np.where(np.isnan(a), 0.0, t)
    def vjp_a(gb, ans, a): return np.where(np.isnan(a), 0.0, gb)


class polyder_coef(Rule, key="zymo.rt.polyder_coef", fn=_rt.polyder_coef, call="_rt.polyder_coef", cases=(
        ("fn(x) * y", ((4,), (3,))), ("np.polyval(fn(x), y)", ((3,), (2, 2))))):
    """Linear in `p`."""
    def jvp_p(t, ans, p): return _rt.polyder_coef(t)
    def vjp_p(gb, ans, p): return _rt.polyder_coef_t(gb, p)


class polyval_vjp_p(Rule, key="zymo.rt.polyval_vjp_p", fn=_rt.polyval_vjp_p, call="_rt.polyval_vjp_p", cases=(
        ("fn(x, y, z)", ((3,), (4,), (3,))), ("fn(x, y, z)", ((2, 2), (3,), (2, 2))), ("fn(x, y, z)", ((), (3,), ())))):
    """Linear in `g`; `p` gives only the length; polynomial in `x`."""
    def jvp_g(t, ans, g, p, x): return _rt.polyval_vjp_p(t, p, x)
    def jvp_x(t, ans, g, p, x): return _rt.polyval_vjp_p_dx(t, g, p, x)
    def vjp_g(gb, ans, g, p, x): return np.polyval(gb, x) + np.zeros_like(g)
    def vjp_x(gb, ans, g, p, x): return _rt.unbroadcast(g * np.polyval(_rt.polyder_coef(gb), x), x)


class cov_vjp(Rule, key="zymo.rt.cov_vjp", fn=_rt.cov_vjp, call="_rt.cov_vjp", cases=(
        ("fn(x, y, None, True, False, None, 0)", ((3, 3), (3, 5))), ("fn(x, y, z, False, False, None, 1)", ((3, 3), (4, 2), (4,))),
        ("fn(x, y, z, False, False, None, 0)", ((3, 3), (4, 2), (4,))), ("fn(x, y, None, True, True, None, 0)", ((), (5,))),
        ("fn(x, y, z, True, False, 2, 0)", ((2, 2), (5,), (5,))))):
    """Linear in `g` and in the data (through the centred rows): bilinear."""
    def jvp_g(t, ans, g, m, y=None, rowvar=True, bias=False, ddof=None, which=0):
        return _rt.cov_vjp(t, m, y, rowvar, bias, ddof, which)
    def jvp_m(t, ans, g, m, y=None, rowvar=True, bias=False, ddof=None, which=0):
        return _rt.cov_vjp(g, t, _rt.none_or_zeros(y), rowvar, bias, ddof, which)
    def jvp_y(t, ans, g, m, y=None, rowvar=True, bias=False, ddof=None, which=0):
        return _rt.cov_vjp(g, np.zeros_like(m), t, rowvar, bias, ddof, which)
    def vjp_g(gb, ans, g, m, y=None, rowvar=True, bias=False, ddof=None, which=0):
        return _rt.cov_vjp_tg(gb, m, y, rowvar, bias, ddof, which)
    def vjp_m(gb, ans, g, m, y=None, rowvar=True, bias=False, ddof=None, which=0):
        return _rt.cov_vjp_tx(gb, g, m, y, rowvar, bias, ddof, which, 0)
    def vjp_y(gb, ans, g, m, y=None, rowvar=True, bias=False, ddof=None, which=0):
        return _rt.cov_vjp_tx(gb, g, m, y, rowvar, bias, ddof, which, 1)


class lse_vjp(Rule, key="zymo.rt.lse_vjp", fn=_rt.lse_vjp, call="_rt.lse_vjp", cases=(
        ("fn(x, y, z, w, None, False, 0)", ((), (5,), (5,), ())), ("fn(x, y, z, w, None, False, 1)", ((), (5,), (5,), ())),
        ("fn(x, y, None, z, 1, False, 0)", ((3,), (3, 4), (3,))), ("fn(x, y, z, w, 0, True, 1)", ((1, 4), (3, 4), (3, 1), (1, 4))),
        ("fn(x, y, z, w, 1, False, 0)", ((3,), (4,), (3, 4), (3,))))):
    """Adjoint of `a` (which=0) or `b` (1) in logsumexp: linear in `g`, smooth in a, b, ans."""
    def jvp_g(t, ans, g, a, b, lse, axis, keepdims, which): return _rt.lse_vjp(t, a, b, lse, axis, keepdims, which)
    def jvp_a(t, ans, g, a, b, lse, axis, keepdims, which):
        return _rt.lse_vjp_d(g, a, b, lse, axis, keepdims, which, t, None, None)
    def jvp_b(t, ans, g, a, b, lse, axis, keepdims, which):
        return _rt.lse_vjp_d(g, a, b, lse, axis, keepdims, which, None, t, None)
    def jvp_lse(t, ans, g, a, b, lse, axis, keepdims, which):
        return _rt.lse_vjp_d(g, a, b, lse, axis, keepdims, which, None, None, t)
    def vjp_g(gb, ans, g, a, b, lse, axis, keepdims, which): return _rt.lse_vjp_t(gb, g, a, b, lse, axis, keepdims, which, 0)
    def vjp_a(gb, ans, g, a, b, lse, axis, keepdims, which): return _rt.lse_vjp_t(gb, g, a, b, lse, axis, keepdims, which, 1)
    def vjp_b(gb, ans, g, a, b, lse, axis, keepdims, which): return _rt.lse_vjp_t(gb, g, a, b, lse, axis, keepdims, which, 2)
    def vjp_lse(gb, ans, g, a, b, lse, axis, keepdims, which):
        return _rt.lse_vjp_t(gb, g, a, b, lse, axis, keepdims, which, 3)


class corrcoef_vjp(Rule, key="zymo.rt.corrcoef_vjp", fn=_rt.corrcoef_vjp, call="_rt.corrcoef_vjp", cases=(
        ("fn(x, y, None, True, 0)", ((3, 3), (3, 5))), ("fn(x, y, z, False, 1)", ((3, 3), (4, 2), (4,))),
        ("fn(x, y, z, False, 0)", ((3, 3), (4, 2), (4,))), ("fn(x, y, z, True, 0)", ((2, 2), (5,), (5,))),
        ("fn(x, y, None, True, 0)", ((), (5,))))):
    """Linear in `g`; smooth in the data (through C and the centred rows)."""
    def jvp_g(t, ans, g, m, y=None, rowvar=True, which=0): return _rt.corrcoef_vjp(t, m, y, rowvar, which)
    def jvp_m(t, ans, g, m, y=None, rowvar=True, which=0): return _rt.corrcoef_vjp_d(g, m, y, rowvar, which, t, None)
    def jvp_y(t, ans, g, m, y=None, rowvar=True, which=0): return _rt.corrcoef_vjp_d(g, m, y, rowvar, which, None, t)
    def vjp_g(gb, ans, g, m, y=None, rowvar=True, which=0): return _rt.corrcoef_vjp_t(gb, g, m, y, rowvar, which, 0)
    def vjp_m(gb, ans, g, m, y=None, rowvar=True, which=0): return _rt.corrcoef_vjp_t(gb, g, m, y, rowvar, which, 1)
    def vjp_y(gb, ans, g, m, y=None, rowvar=True, which=0): return _rt.corrcoef_vjp_t(gb, g, m, y, rowvar, which, 2)


def _register_types() -> None:
    from ..analysis import types as TI

    # example arrays (all dimensions 1) would make cov's result a 0-d array
    TI.RESULT_TYPES[cov.key] = _cov_type
    TI.RESULT_TYPES[corrcoef.key] = _cov_type
    TI.RESULT_TYPES[cov_vjp.key] = _cov_vjp_type
    TI.RESULT_TYPES[corrcoef_vjp.key] = _corr_vjp_type


def _corr_vjp_type(pos, kw):
    """As `_cov_vjp_type`, for corrcoef_vjp(g, m, y, rowvar, which)."""
    pos = list(pos[:4]) + [None, None] + list(pos[4:5])
    return _cov_vjp_type(pos, kw)


def _cov_vjp_type(pos, kw):
    """The adjoint of `m` (which=0) or `y` (1): that operand's shape, a float dtype."""
    from .registry import const_value

    which = const_value(pos[6] if len(pos) > 6 else kw.get("which", 0))
    v = (pos[1] if len(pos) > 1 else kw["m"]) if which == 0 else (pos[2] if len(pos) > 2 else kw["y"])
    dt = getattr(v.type, "dtype", "float64")
    return T.Array(dt if dt == "float32" else "float64", v.type.ndim)


_register_types()
