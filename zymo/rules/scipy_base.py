"""Rules for SciPy (an optional dependency; nothing registers when it is absent):
`scipy.special` gammaln, digamma, erf, erfc, expit, logit, xlogy, logsumexp, softmax,
log_softmax; `scipy.linalg` solve_triangular, expm, cho_factor, cho_solve, lu_factor,
lu_solve.

Contract: as for NumPy's rules; generated code names SciPy as `_rt.sp_special` and
`_rt.sp_linalg` (imported on first use). `solve_triangular` reads one triangle of `a`,
so its adjoint is triangular too; only `trans=0` without `unit_diagonal` is covered.
`logsumexp` with `b=` (differentiable in `a` and `b`); `return_sign=True` is lowered by `frontend/several.py`. `expm` of a 2-d matrix, through its Fréchet
derivative. `cho_factor`/`lu_factor` return tuples (one op per element, `parts`);
`cho_solve((c, lower), b)` and `lu_solve((lu, piv), b)` take that tuple first, and the
frontend unpacks it (`unpack_first`), so their rules see `(c, lower, b)` and
`(lu, piv, b)`: differentiable in `b` and in the factor (`cho_solve` reads one triangle
of `c`; `lu_solve` with `trans=0` only). `cho_factor`'s `c` holds `a`'s own entries in
the unused triangle, as SciPy leaves them, and their derivative is `da` there.
Under Numba these rules do not compile (SciPy functions are Python objects there):
the default policy falls back to the Python backend with a warning.
"""
from __future__ import annotations

try:
    import scipy.linalg as _sl
    import scipy.special as _sp
except ImportError:  # pragma: no cover - SciPy is optional
    _sp = _sl = None

import numpy as np

from .. import runtime as _rt  # names used by inlined rule bodies
from .registry import Rule, const_value

if _sp is not None:
    _U = dict(elementwise=True, out=True)

    class gammaln(Rule, key="scipy.special.gammaln", fn=_sp.gammaln, call="_rt.sp_special.gammaln", **_U):
        def jvp_x(t, ans, x): return t * _rt.sp_special.digamma(x)
        def vjp_x(g, ans, x): return g * _rt.sp_special.digamma(x)

    class digamma(Rule, key="scipy.special.digamma", fn=_sp.digamma, call="_rt.sp_special.digamma", **_U):
        def jvp_x(t, ans, x): return t * _rt.sp_special.polygamma(1, x).astype(np.result_type(t, x))
        def vjp_x(g, ans, x): return g * _rt.sp_special.polygamma(1, x)

    class erf(Rule, key="scipy.special.erf", fn=_sp.erf, call="_rt.sp_special.erf", **_U):
        def jvp_x(t, ans, x): return t * 1.1283791670955126 * np.exp(-x * x)
        def vjp_x(g, ans, x): return g * 1.1283791670955126 * np.exp(-x * x)

    class erfc(Rule, key="scipy.special.erfc", fn=_sp.erfc, call="_rt.sp_special.erfc", **_U):
        def jvp_x(t, ans, x): return -t * 1.1283791670955126 * np.exp(-x * x)
        def vjp_x(g, ans, x): return -g * 1.1283791670955126 * np.exp(-x * x)

    class expit(Rule, key="scipy.special.expit", fn=_sp.expit, call="_rt.sp_special.expit", **_U):
        def jvp_x(t, ans, x): return t * ans * (1.0 - ans)
        def vjp_x(g, ans, x): return g * ans * (1.0 - ans)

    class logit(Rule, key="scipy.special.logit", fn=_sp.logit, call="_rt.sp_special.logit", **_U):
        def jvp_x(t, ans, x): return t / (x * (1.0 - x))
        def vjp_x(g, ans, x): return g / (x * (1.0 - x))

    class xlogy(Rule, key="scipy.special.xlogy", fn=_sp.xlogy, call="_rt.sp_special.xlogy", **_U):
        """x * log(y), 0 where x == 0: the derivative in x is log(y), in y x / y."""
        def jvp_x(t, ans, x, y): return t * np.log(y)
        def jvp_y(t, ans, x, y): return t * x / y
        def vjp_x(g, ans, x, y): return g * np.log(y)
        def vjp_y(g, ans, x, y): return g * x / y

    _RED = (("fn(x)", ((5,),)), ("fn(x)", ((3, 4),)), ("fn(x, axis=0)", ((3, 4),)), ("fn(x, 1)", ((3, 4),)),
            ("fn(x, axis=-1, keepdims=True)", ((2, 3, 4),)), ("fn(x, axis=(0, 2))", ((2, 3, 4),)))

    _LSE_B = ("const", np.array([1.0, -0.05, 2.0, 0.5, 1.5]))

    class logsumexp(Rule, key="scipy.special.logsumexp", fn=_sp.logsumexp, call="_rt.sp_special.logsumexp",
                    cases=_RED + (
            ("fn(x, b=y)", ((5,), (5,)), {"dom": "xlogy"}), ("fn(x, axis=1, b=y)", ((3, 4), (4,)), {"dom": "xlogy"}),
            ("fn(x, 0, y, True)", ((3, 4), (3, 4)), {"dom": "xlogy"}),
            ("fn(x, b=y, axis=0, keepdims=True)", ((3, 4), (3, 1)), {"dom": "xlogy"}),
            ("fn(x, b=y)", ((5,), _LSE_B)), ("fn(a=x, b=y, return_sign=False)", ((2, 3), (2, 3)), {"dom": "xlogy"}),
            ("fn(x, b=y, axis=1)", ((4,), (3, 4)), {"dom": "xlogy"}), ("fn(x, b=y, axis=0)", ((3, 1), (3, 4)), {"dom": "xlogy"}))):
        """With `b=`: log(sum(b * exp(a))); `b` broadcasts against `a` and is differentiable too."""
        def jvp_a(t, ans, a, axis=None, b=None, keepdims=False, return_sign=False):
            return np.sum(t * _rt.lse_weights(a, b, ans, axis, keepdims, True), axis=axis, keepdims=keepdims)
        def jvp_b(t, ans, a, axis=None, b=None, keepdims=False, return_sign=False):
            return np.sum(t * _rt.lse_weights(a, b, ans, axis, keepdims, False), axis=axis, keepdims=keepdims)
        def vjp_a(g, ans, a, axis=None, b=None, keepdims=False, return_sign=False):
            return _rt.lse_vjp(g, a, b, ans, axis, keepdims, 0)
        def vjp_b(g, ans, a, axis=None, b=None, keepdims=False, return_sign=False):
            return _rt.lse_vjp(g, a, b, ans, axis, keepdims, 1)

        @classmethod
        def check(cls, pos, kw):
            if set(kw) - {"a", "axis", "b", "keepdims", "return_sign"}:
                return "scipy.special.logsumexp is differentiable with axis=, b= and keepdims="
            sign = kw.get("return_sign", pos[4] if len(pos) > 4 else False)
            if const_value(sign) is not False:
                return ("scipy.special.logsumexp(return_sign=True) returns a tuple only with that argument, which "
                        "zymo cannot type yet; compute the sign as np.sign(np.sum(b * np.exp(a - np.max(a))))")
            return None

    _SM = (("fn(x)", ((5,),)), ("fn(x, axis=0)", ((3, 4),)), ("fn(x, axis=1)", ((3, 4),)), ("fn(x)", ((3, 4),)))

    class softmax(Rule, key="scipy.special.softmax", fn=_sp.softmax, call="_rt.sp_special.softmax", cases=_SM):
        def jvp_x(t, ans, x, axis=None): return ans * (t - np.sum(ans * t, axis=axis, keepdims=True))
        def vjp_x(g, ans, x, axis=None): return ans * (g - np.sum(ans * g, axis=axis, keepdims=True))

    class log_softmax(Rule, key="scipy.special.log_softmax", fn=_sp.log_softmax, call="_rt.sp_special.log_softmax",
                      cases=_SM):
        def jvp_x(t, ans, x, axis=None): return t - np.sum(np.exp(ans) * t, axis=axis, keepdims=True)
        def vjp_x(g, ans, x, axis=None): return g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True)

    class solve_triangular(Rule, key="scipy.linalg.solve_triangular", fn=_sl.solve_triangular,
                           call="_rt.sp_linalg.solve_triangular", cases=(
            ("fn(x, y, lower=True)", (("tril", 3), (3,))), ("fn(x, y)", (("triu", 3), (3, 2))),
            ("fn(x, y, lower=True)", ((3, 3), (3,)), {"dom": "tri"}))):
        """Reads the `lower` (default upper) triangle of `a` only."""
        def jvp_a(t, ans, a, b, trans=0, lower=False):
            return -_rt.sp_linalg.solve_triangular(a, _rt.triangle(t, lower) @ ans, lower=lower)
        def jvp_b(t, ans, a, b, trans=0, lower=False): return _rt.sp_linalg.solve_triangular(a, t, lower=lower)
        def vjp_a(g, ans, a, b, trans=0, lower=False): return _rt.tri_solve_vjp_a(g, ans, a, lower)
        def vjp_b(g, ans, a, b, trans=0, lower=False):
            return _rt.sp_linalg.solve_triangular(a, g, trans=1, lower=lower)

        @classmethod
        def check(cls, pos, kw):
            if len(pos) > 2 or set(kw) - {"lower", "trans", "check_finite"}:
                return "scipy.linalg.solve_triangular is differentiable with lower= (and trans=0) only"
            if const_value(kw.get("trans", 0)) not in (0, "N"):
                return "scipy.linalg.solve_triangular with trans != 0 is not supported; transpose a instead"
            return None

    class expm(Rule, key="scipy.linalg.expm", fn=_sl.expm, call="_rt.sp_linalg.expm", cases=(
            ("fn(x)", ((3, 3),)), ("fn(x * 0.5) @ y", ((2, 2), (2,))))):
        def jvp_a(t, ans, a): return _rt.expm_frechet(a, t)
        def vjp_a(g, ans, a): return _rt.expm_frechet(a.T, g)

    # -- factor / solve pairs: the factor travels in a tuple ------------------------------
    # `cho_factor` and `lu_factor` return tuples (parts: one op per element); `cho_solve`
    # and `lu_solve` take that tuple as their first argument, which the frontend unpacks
    # (`unpack_first`): `cho_solve((c, lower), b)` is the rule `_rt.cho_solve(c, lower, b)`.
    _FACTOR_OPTS = ("lower", "overwrite_a", "check_finite")

    class cho_factor(Rule, key="scipy.linalg.cho_factor", fn=_sl.cho_factor,
                     parts=("scipy.linalg.cho_factor.c", "scipy.linalg.cho_factor.lower"), cases=(
            ("fn(x)[0]", (("spd", 3),)), ("fn(x, lower=True)[0] * y", (("spd", 3), (3, 3))),
            ("fn(x * 1.0, True)[0]", (("spd", 1),)),
            ("c, low = fn(x, lower=True)\nreturn c * (2.0 if low else 1.0)", (("spd", 3),)))):
        """(c, lower): the factor in one triangle, `a`'s entries in the other (as SciPy)."""

        @classmethod
        def check(cls, pos, kw):
            if len(pos) > 2 or set(kw) - set(_FACTOR_OPTS):
                return "scipy.linalg.cho_factor is differentiable with lower= (and check_finite=) only"
            return None

    class cho_factor_c(Rule, key="scipy.linalg.cho_factor.c", fn=_rt.cho_factor_c, call="_rt.cho_factor_c",
                       part_of="scipy.linalg.cho_factor"):
        def jvp_a(t, ans, a, lower=False, overwrite_a=False, check_finite=True):
            return _rt.cho_factor_jvp(t, ans, lower)
        def vjp_a(g, ans, a, lower=False, overwrite_a=False, check_finite=True):
            return _rt.cho_factor_vjp(g, ans, lower)

    class cho_factor_lower(Rule, key="scipy.linalg.cho_factor.lower", fn=_rt.cho_factor_lower,
                           call="_rt.cho_factor_lower", nondiff=True, part_of="scipy.linalg.cho_factor"):
        pass

    class cho_solve(Rule, key="scipy.linalg.cho_solve", fn=_rt.cho_solve, call="_rt.cho_solve", cases=(
            ("fn((x, True), y)", (("tril", 3), (3,)), {"fn": _sl.cho_solve}),
            ("fn((x, False), y)", (("triu", 3), (3, 2)), {"fn": _sl.cho_solve}),
            ("fn((x * 1.0, False), y)", ((3, 3), (3,)), {"fn": _sl.cho_solve, "dom": "tri"}))):
        """Reads the `lower` triangle of `c` (the other one is ignored: its adjoint is 0)."""
        unpack_first = 2  # (c, lower)
        def jvp_c(t, ans, c, lower, b, overwrite_b=False, check_finite=True):
            return _rt.cho_solve_jvp_c(t, c, lower, ans)
        def jvp_b(t, ans, c, lower, b, overwrite_b=False, check_finite=True): return _rt.cho_solve(c, lower, t)
        def vjp_c(g, ans, c, lower, b, overwrite_b=False, check_finite=True):
            return _rt.cho_solve_vjp_c(g, c, lower, ans)
        def vjp_b(g, ans, c, lower, b, overwrite_b=False, check_finite=True): return _rt.cho_solve(c, lower, g)

        @classmethod
        def check(cls, pos, kw):
            if set(kw) - {"check_finite", "overwrite_b"}:
                return "scipy.linalg.cho_solve is differentiable as cho_solve((c, lower), b)"
            return None

    class lu_factor(Rule, key="scipy.linalg.lu_factor", fn=_sl.lu_factor,
                    parts=("scipy.linalg.lu_factor.lu", "scipy.linalg.lu_factor.piv"), cases=(
            ("fn(x)[0]", (("wc", 3, 3),)), ("fn(x)[0] * y", (("wc", 4, 4), (4, 4))),
            ("lu, piv = fn(x)\nreturn lu[piv] * y", (("wc", 3, 3), (3, 3))))):
        """(lu, piv) of a square matrix: L's strict lower part and U packed in `lu`."""

        @classmethod
        def check(cls, pos, kw):
            if len(pos) > 1 or set(kw) - {"overwrite_a", "check_finite"}:
                return "scipy.linalg.lu_factor is differentiable as lu_factor(a)"
            return None

    class lu_factor_lu(Rule, key="scipy.linalg.lu_factor.lu", fn=_rt.lu_factor_lu, call="_rt.lu_factor_lu",
                       part_of="scipy.linalg.lu_factor"):
        def jvp_a(t, ans, a, overwrite_a=False, check_finite=True):
            return _rt.lu_factor_jvp(t, ans, _rt.lu_factor_piv(a))
        def vjp_a(g, ans, a, overwrite_a=False, check_finite=True):
            return _rt.lu_factor_vjp(g, ans, _rt.lu_factor_piv(a))

    class lu_factor_piv(Rule, key="scipy.linalg.lu_factor.piv", fn=_rt.lu_factor_piv, call="_rt.lu_factor_piv",
                        nondiff=True, part_of="scipy.linalg.lu_factor"):
        pass

    class lu_solve(Rule, key="scipy.linalg.lu_solve", fn=_rt.lu_solve, call="_rt.lu_solve", cases=(
            ("fn((x, z), y)", ((3, 3), (3,), ("const", np.array([2, 1, 2]))), {"fn": _sl.lu_solve, "dom": "tri"}),
            ("fn((x, z), y)", ((3, 3), (3, 2), ("const", np.array([0, 2, 2]))), {"fn": _sl.lu_solve, "dom": "tri"}))):
        """`trans=0` only; derivatives with respect to `b` and the packed factors `lu`."""
        unpack_first = 2  # (lu, piv)
        def jvp_lu(t, ans, lu, piv, b, trans=0, overwrite_b=False, check_finite=True):
            return _rt.lu_solve_jvp_lu(t, lu, piv, ans)
        def jvp_b(t, ans, lu, piv, b, trans=0, overwrite_b=False, check_finite=True):
            return _rt.lu_solve(lu, piv, t)
        def vjp_lu(g, ans, lu, piv, b, trans=0, overwrite_b=False, check_finite=True):
            return _rt.lu_solve_vjp_lu(g, lu, piv, ans)
        def vjp_b(g, ans, lu, piv, b, trans=0, overwrite_b=False, check_finite=True):
            return _rt.lu_solve(lu, piv, g, trans=1)

        @classmethod
        def check(cls, pos, kw):
            if len(pos) > 4 or set(kw) - {"trans", "check_finite", "overwrite_b"}:
                return "scipy.linalg.lu_solve is differentiable as lu_solve((lu, piv), b)"
            if const_value(kw.get("trans", pos[3] if len(pos) > 3 else 0)) not in (0, "N"):
                return "scipy.linalg.lu_solve with trans != 0 is not supported; factor the transpose instead"
            return None

    from .registry import BY_CALLABLE as _BY_CALLABLE

    _BY_CALLABLE[id(_sl.cho_solve)] = cho_solve.key  # user code calls SciPy's; the rule runs _rt's
    _BY_CALLABLE[id(_sl.lu_solve)] = lu_solve.key
