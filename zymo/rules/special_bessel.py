"""Rules for `scipy.special`, continued from `rules/special.py` (whose contract holds here):
Bessel functions, exponential integrals and relatives, incomplete gamma and beta functions,
Box-Cox transforms, binomial coefficients, Owen's T, Student's t, the hypergeometric 1F1 and
2F1, factorials and combinations. Registered lazily with `rules/special.py`
(`rules/__init__.py`); nothing registers without SciPy.
"""
from __future__ import annotations

import numpy as np

from .. import runtime as _rt  # names used by inlined rule bodies
from .registry import Rule
from .special import _ANY, _E, _POS, _U, S, _refused_first

try:
    import scipy.special as _sp
except ImportError:  # pragma: no cover - SciPy is optional
    _sp = None

if _sp is not None:
    # -- Bessel functions (DLMF 10) ------------------------------------------------------------

    class i0(Rule, key="scipy.special.i0", fn=_sp.i0, call=S + "i0", **_U):
        """I0' = I1 (DLMF 10.29.3)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x): return t * _rt.sp_special.i1(x)
        def vjp_x(g, ans, x): return g * _rt.sp_special.i1(x)

    class i0e(Rule, key="scipy.special.i0e", fn=_sp.i0e, call=S + "i0e", **_U):
        """exp(-|x|) I0(x): i1e(x) - sign(x) i0e(x). It has a kink at 0 (one-sided derivatives
        +1 and -1): there zymo gives 0 (sign(0) = 0, their mean, as for abs)."""
        domains = ((0.2, 2.0, True),)
        def jvp_x(t, ans, x): return t * (_rt.sp_special.i1e(x) - np.sign(x) * ans)
        def vjp_x(g, ans, x): return g * (_rt.sp_special.i1e(x) - np.sign(x) * ans)

    class i1(Rule, key="scipy.special.i1", fn=_sp.i1, call=S + "i1", **_U):
        """I1' = (I0 + I2) / 2 (DLMF 10.29.1; 1/2 at 0, no I1 / x)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x): return t * 0.5 * (_rt.sp_special.i0(x) + _rt.sp_special.iv(2.0, x))
        def vjp_x(g, ans, x): return g * 0.5 * (_rt.sp_special.i0(x) + _rt.sp_special.iv(2.0, x))

    class i1e(Rule, key="scipy.special.i1e", fn=_sp.i1e, call=S + "i1e", **_U):
        """exp(-|x|) I1(x): (i0e + ive(2, x)) / 2 - sign(x) i1e(x) (continuous at 0: i1e(0) = 0)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x):
            return t * (0.5 * (_rt.sp_special.i0e(x) + _rt.sp_special.ive(2.0, x)) - np.sign(x) * ans)
        def vjp_x(g, ans, x):
            return g * (0.5 * (_rt.sp_special.i0e(x) + _rt.sp_special.ive(2.0, x)) - np.sign(x) * ans)

    class j0(Rule, key="scipy.special.j0", fn=_sp.j0, call=S + "j0", **_U):
        """J0' = -J1 (DLMF 10.6.3)."""
        domains = ((-4.0, 4.0),)
        def jvp_x(t, ans, x): return -t * _rt.sp_special.j1(x)
        def vjp_x(g, ans, x): return -g * _rt.sp_special.j1(x)

    class j1(Rule, key="scipy.special.j1", fn=_sp.j1, call=S + "j1", **_U):
        """J1' = (J0 - J2) / 2 (DLMF 10.6.1)."""
        domains = ((-4.0, 4.0),)
        def jvp_x(t, ans, x): return t * 0.5 * (_rt.sp_special.j0(x) - _rt.sp_special.jv(2.0, x))
        def vjp_x(g, ans, x): return g * 0.5 * (_rt.sp_special.j0(x) - _rt.sp_special.jv(2.0, x))

    class y0(Rule, key="scipy.special.y0", fn=_sp.y0, call=S + "y0", **_U):
        """Y0' = -Y1 (DLMF 10.6.3), x > 0."""
        domains = (_POS,)
        def jvp_x(t, ans, x): return -t * _rt.sp_special.y1(x)
        def vjp_x(g, ans, x): return -g * _rt.sp_special.y1(x)

    class y1(Rule, key="scipy.special.y1", fn=_sp.y1, call=S + "y1", **_U):
        """Y1' = (Y0 - Y2) / 2 (DLMF 10.6.1), x > 0."""
        domains = (_POS,)
        def jvp_x(t, ans, x): return t * 0.5 * (_rt.sp_special.y0(x) - _rt.sp_special.yv(2.0, x))
        def vjp_x(g, ans, x): return g * 0.5 * (_rt.sp_special.y0(x) - _rt.sp_special.yv(2.0, x))

    class k0(Rule, key="scipy.special.k0", fn=_sp.k0, call=S + "k0", **_U):
        """K0' = -K1 (DLMF 10.29.3), x > 0."""
        domains = (_POS,)
        def jvp_x(t, ans, x): return -t * _rt.sp_special.k1(x)
        def vjp_x(g, ans, x): return -g * _rt.sp_special.k1(x)

    class k1(Rule, key="scipy.special.k1", fn=_sp.k1, call=S + "k1", **_U):
        """K1' = -(K0 + K2) / 2 (DLMF 10.29.1), x > 0."""
        domains = (_POS,)
        def jvp_x(t, ans, x): return -t * 0.5 * (_rt.sp_special.k0(x) + _rt.sp_special.kv(2.0, x))
        def vjp_x(g, ans, x): return -g * 0.5 * (_rt.sp_special.k0(x) + _rt.sp_special.kv(2.0, x))

    class k0e(Rule, key="scipy.special.k0e", fn=_sp.k0e, call=S + "k0e", **_U):
        """exp(x) K0(x): k0e(x) - k1e(x), x > 0."""
        domains = (_POS,)
        def jvp_x(t, ans, x): return t * (ans - _rt.sp_special.k1e(x))
        def vjp_x(g, ans, x): return g * (ans - _rt.sp_special.k1e(x))

    class k1e(Rule, key="scipy.special.k1e", fn=_sp.k1e, call=S + "k1e", **_U):
        """exp(x) K1(x): k1e(x) - (k0e(x) + kve(2, x)) / 2, x > 0."""
        domains = (_POS,)
        def jvp_x(t, ans, x):
            return t * (ans - 0.5 * (_rt.sp_special.k0e(x) + _rt.sp_special.kve(2.0, x)))
        def vjp_x(g, ans, x):
            return g * (ans - 0.5 * (_rt.sp_special.k0e(x) + _rt.sp_special.kve(2.0, x)))

    class jv(Rule, key="scipy.special.jv", fn=_sp.jv, call=S + "jv", cases=_refused_first("1.5", "y - 0.5"),
             **_U):
        """J_v(x): (J_{v-1} - J_{v+1}) / 2 in x (DLMF 10.6.1); the order v: refused when active."""
        auto_cases = False
        domains = (_POS,)
        def jvp_v(t, ans, v, x): return _rt.special_no_derivative("scipy.special.jv", "v")
        def jvp_x(t, ans, v, x): return t * 0.5 * (_rt.sp_special.jv(v - 1.0, x) - _rt.sp_special.jv(v + 1.0, x))
        def vjp_v(g, ans, v, x): return _rt.special_no_derivative("scipy.special.jv", "v")
        def vjp_x(g, ans, v, x): return g * 0.5 * (_rt.sp_special.jv(v - 1.0, x) - _rt.sp_special.jv(v + 1.0, x))

    class yv(Rule, key="scipy.special.yv", fn=_sp.yv, call=S + "yv", cases=_refused_first("1.5", "y - 0.5"),
             **_U):
        """Y_v(x), x > 0: (Y_{v-1} - Y_{v+1}) / 2 in x (DLMF 10.6.1); the order v: refused when active."""
        auto_cases = False
        domains = (_POS,)
        def jvp_v(t, ans, v, x): return _rt.special_no_derivative("scipy.special.yv", "v")
        def jvp_x(t, ans, v, x): return t * 0.5 * (_rt.sp_special.yv(v - 1.0, x) - _rt.sp_special.yv(v + 1.0, x))
        def vjp_v(g, ans, v, x): return _rt.special_no_derivative("scipy.special.yv", "v")
        def vjp_x(g, ans, v, x): return g * 0.5 * (_rt.sp_special.yv(v - 1.0, x) - _rt.sp_special.yv(v + 1.0, x))

    class iv(Rule, key="scipy.special.iv", fn=_sp.iv, call=S + "iv", cases=_refused_first("1.5", "y - 0.5"),
             **_U):
        """I_v(x): (I_{v-1} + I_{v+1}) / 2 in x (DLMF 10.29.1); the order v: refused when active."""
        auto_cases = False
        domains = (_POS,)
        def jvp_v(t, ans, v, x): return _rt.special_no_derivative("scipy.special.iv", "v")
        def jvp_x(t, ans, v, x): return t * 0.5 * (_rt.sp_special.iv(v - 1.0, x) + _rt.sp_special.iv(v + 1.0, x))
        def vjp_v(g, ans, v, x): return _rt.special_no_derivative("scipy.special.iv", "v")
        def vjp_x(g, ans, v, x): return g * 0.5 * (_rt.sp_special.iv(v - 1.0, x) + _rt.sp_special.iv(v + 1.0, x))

    class kv(Rule, key="scipy.special.kv", fn=_sp.kv, call=S + "kv", cases=_refused_first("1.5", "y - 0.5"),
             **_U):
        """K_v(x), x > 0: -(K_{v-1} + K_{v+1}) / 2 in x (DLMF 10.29.1); the order v: refused when active."""
        auto_cases = False
        domains = (_POS,)
        def jvp_v(t, ans, v, x): return _rt.special_no_derivative("scipy.special.kv", "v")
        def jvp_x(t, ans, v, x): return -t * 0.5 * (_rt.sp_special.kv(v - 1.0, x) + _rt.sp_special.kv(v + 1.0, x))
        def vjp_v(g, ans, v, x): return _rt.special_no_derivative("scipy.special.kv", "v")
        def vjp_x(g, ans, v, x): return -g * 0.5 * (_rt.sp_special.kv(v - 1.0, x) + _rt.sp_special.kv(v + 1.0, x))

    class ive(Rule, key="scipy.special.ive", fn=_sp.ive, call=S + "ive", cases=_refused_first("1.5", "y - 0.5"),
              **_U):
        """exp(-|x|) I_v(x), x > 0 (or an integer v): (ive(v-1) + ive(v+1)) / 2 - sign(x) ive(v, x)
        in x; the order v: refused when active."""
        auto_cases = False
        domains = (_POS,)
        def jvp_v(t, ans, v, x): return _rt.special_no_derivative("scipy.special.ive", "v")
        def jvp_x(t, ans, v, x):
            return t * (0.5 * (_rt.sp_special.ive(v - 1.0, x) + _rt.sp_special.ive(v + 1.0, x)) - np.sign(x) * ans)
        def vjp_v(g, ans, v, x): return _rt.special_no_derivative("scipy.special.ive", "v")
        def vjp_x(g, ans, v, x):
            return g * (0.5 * (_rt.sp_special.ive(v - 1.0, x) + _rt.sp_special.ive(v + 1.0, x)) - np.sign(x) * ans)

    class kve(Rule, key="scipy.special.kve", fn=_sp.kve, call=S + "kve", cases=_refused_first("1.5", "y - 0.5"),
              **_U):
        """exp(x) K_v(x), x > 0: kve(v, x) - (kve(v-1) + kve(v+1)) / 2 in x; the order v: refused
        when active."""
        auto_cases = False
        domains = (_POS,)
        def jvp_v(t, ans, v, x): return _rt.special_no_derivative("scipy.special.kve", "v")
        def jvp_x(t, ans, v, x):
            return t * (ans - 0.5 * (_rt.sp_special.kve(v - 1.0, x) + _rt.sp_special.kve(v + 1.0, x)))
        def vjp_v(g, ans, v, x): return _rt.special_no_derivative("scipy.special.kve", "v")
        def vjp_x(g, ans, v, x):
            return g * (ans - 0.5 * (_rt.sp_special.kve(v - 1.0, x) + _rt.sp_special.kve(v + 1.0, x)))

    # -- exponential integrals and relatives (DLMF 6, 8.19, 25.12) ----------------------------

    class expi(Rule, key="scipy.special.expi", fn=_sp.expi, call=S + "expi", **_U):
        """Ei(x): exp(x) / x (DLMF 6.2.5), infinite at 0."""
        domains = ((0.3, 2.0, True),)
        def jvp_x(t, ans, x): return t * np.exp(x) / x
        def vjp_x(g, ans, x): return g * np.exp(x) / x

    class exp1(Rule, key="scipy.special.exp1", fn=_sp.exp1, call=S + "exp1", **_U):
        """E1(x), x > 0: -exp(-x) / x (DLMF 6.2.1)."""
        domains = (_POS,)
        def jvp_x(t, ans, x): return -t * np.exp(-x) / x
        def vjp_x(g, ans, x): return -g * np.exp(-x) / x

    class expn(Rule, key="scipy.special.expn", fn=_sp.expn, call=S + "expn", cases=(
            ("fn(1, x)", ((),)), ("fn(0, x)", ((5,),)), ("fn(3, x) * x", ((3, 4),)),
            ("fn(y, x)", ((3, 4), ("int", (4,), 0, 4)))), **_U):
        """E_n(x), x > 0: -E_{n-1}(x) in x (DLMF 8.19.13), with E_{-1}(x) = E_0(x) (1 + 1 / x);
        the order n is an integer (no derivative)."""
        auto_cases = False
        domains = (_POS,)
        def jvp_x(t, ans, n, x): return -t * np.where(n == 0, ans * (1.0 + 1.0 / x), _rt.sp_special.expn(n - 1, x))
        def vjp_x(g, ans, n, x): return -g * np.where(n == 0, ans * (1.0 + 1.0 / x), _rt.sp_special.expn(n - 1, x))

    class spence(Rule, key="scipy.special.spence", fn=_sp.spence, call=S + "spence", **_U):
        """SciPy's spence(z) = integral from 1 to z of log(t) / (1 - t) (DLMF 25.12.2 with
        Li2(1 - z)), z >= 0: log(z) / (1 - z), -inf at 0; its series in w = z - 1
        (-(1 - w / 2 + w^2 / 3 - ...)) where |w| < 0.01 (-1 at z = 1, the limit)."""
        domains = (_POS,)
        def jvp_x(t, ans, x):
            return t * np.where(np.abs(x - 1.0) < 0.01, -1.0 + (x - 1.0) * (0.5 + (x - 1.0) * (
                -1 / 3 + (x - 1.0) * (0.25 + (x - 1.0) * (-0.2 + (x - 1.0) * (1 / 6 - (x - 1.0) / 7))))),
                (np.log(x) - (x == 1)) / (1.0 - x + (x == 1)))
        def vjp_x(g, ans, x):
            return g * np.where(np.abs(x - 1.0) < 0.01, -1.0 + (x - 1.0) * (0.5 + (x - 1.0) * (
                -1 / 3 + (x - 1.0) * (0.25 + (x - 1.0) * (-0.2 + (x - 1.0) * (1 / 6 - (x - 1.0) / 7))))),
                (np.log(x) - (x == 1)) / (1.0 - x + (x == 1)))

    class zeta(Rule, key="scipy.special.zeta", fn=_sp.zeta, call=S + "zeta", cases=(
            ("fn(2.5, x)", ((),)), ("fn(3.0, x)", ((5,),)), ("fn(2.5, x) * x", ((3, 4),)),
            ("fn(y * 0.5 + 1.5, x)", ((3, 4), ("int", (4,), 0, 5))), ("fn(2.0, q=x)", ((5,),)),
            ("fn(x)", ((5,),)), ("fn(x - 4.0)", ((5,),)), ("fn(x, 0.7)", ((3, 4),))), **_E):
        """Hurwitz zeta(x, q), x > 1, q > 0 (Riemann's, any real x != 1, when q is None): in q
        -x zeta(x + 1, q) (DLMF 25.11.17); in x `_rt.zeta_ds`, Euler-Maclaurin differentiated in
        s (DLMF 25.11.5; Riemann's below -0.5 through the functional equation, DLMF 25.4.1),
        which SciPy does not provide: it has no tangent rule, so second order in x is refused."""
        domains = ((1.5, 4.0), _POS)
        def jvp_x(t, ans, x, q=None): return t * _rt.zeta_ds(x, q).astype(np.result_type(ans))
        def jvp_q(t, ans, x, q=None): return -t * x * _rt.sp_special.zeta(x + 1.0, q)
        def vjp_x(g, ans, x, q=None): return g * _rt.zeta_ds(x, q)
        def vjp_q(g, ans, x, q=None): return -g * x * _rt.sp_special.zeta(x + 1.0, q)

    # -- incomplete gamma and beta functions (DLMF 8.8, 8.17) ---------------------------------

    class gammainc(Rule, key="scipy.special.gammainc", fn=_sp.gammainc, call=S + "gammainc",
                   cases=_refused_first("1.7"), **_U):
        """Regularised lower incomplete gamma P(a, x): in x x^(a-1) exp(-x) / Gamma(a) (DLMF
        8.8.13), written exp(xlogy(a - 1, x) - x - gammaln(a)) (1 at x = 0 for a = 1). The
        derivative in a has no closed form: refused when a is active."""
        auto_cases = False
        domains = (_POS,)
        def jvp_a(t, ans, a, x): return _rt.special_no_derivative("scipy.special.gammainc", "a")
        def jvp_x(t, ans, a, x):
            return t * np.exp(_rt.sp_special.xlogy(a - 1.0, x) - x - _rt.sp_special.gammaln(a)).astype(np.result_type(ans))
        def vjp_a(g, ans, a, x): return _rt.special_no_derivative("scipy.special.gammainc", "a")
        def vjp_x(g, ans, a, x):
            return g * np.exp(_rt.sp_special.xlogy(a - 1.0, x) - x - _rt.sp_special.gammaln(a))

    class gammaincc(Rule, key="scipy.special.gammaincc", fn=_sp.gammaincc, call=S + "gammaincc",
                    cases=_refused_first("1.7"), **_U):
        """Q(a, x) = 1 - P(a, x): minus gammainc's derivative in x; in a refused when a is active."""
        auto_cases = False
        domains = (_POS,)
        def jvp_a(t, ans, a, x): return _rt.special_no_derivative("scipy.special.gammaincc", "a")
        def jvp_x(t, ans, a, x):
            return -t * np.exp(_rt.sp_special.xlogy(a - 1.0, x) - x - _rt.sp_special.gammaln(a)).astype(np.result_type(ans))
        def vjp_a(g, ans, a, x): return _rt.special_no_derivative("scipy.special.gammaincc", "a")
        def vjp_x(g, ans, a, x):
            return -g * np.exp(_rt.sp_special.xlogy(a - 1.0, x) - x - _rt.sp_special.gammaln(a))

    class gammaincinv(Rule, key="scipy.special.gammaincinv", fn=_sp.gammaincinv, call=S + "gammaincinv",
                      cases=_refused_first("1.7"), **_U):
        """The x with P(a, x) = y: 1 / P's derivative at x = ans, in y; in a refused when a is active."""
        auto_cases = False
        domains = ((0.1, 0.9),)
        def jvp_a(t, ans, a, y): return _rt.special_no_derivative("scipy.special.gammaincinv", "a")
        def jvp_y(t, ans, a, y):
            return t * np.exp(ans - _rt.sp_special.xlogy(a - 1.0, ans) + _rt.sp_special.gammaln(a)).astype(np.result_type(ans))
        def vjp_a(g, ans, a, y): return _rt.special_no_derivative("scipy.special.gammaincinv", "a")
        def vjp_y(g, ans, a, y):
            return g * np.exp(ans - _rt.sp_special.xlogy(a - 1.0, ans) + _rt.sp_special.gammaln(a))

    class gammainccinv(Rule, key="scipy.special.gammainccinv", fn=_sp.gammainccinv, call=S + "gammainccinv",
                       cases=_refused_first("1.7"), **_U):
        """The x with Q(a, x) = y: -1 / P's derivative at x = ans, in y; in a refused when a is active."""
        auto_cases = False
        domains = ((0.1, 0.9),)
        def jvp_a(t, ans, a, y): return _rt.special_no_derivative("scipy.special.gammainccinv", "a")
        def jvp_y(t, ans, a, y):
            return -t * np.exp(ans - _rt.sp_special.xlogy(a - 1.0, ans) + _rt.sp_special.gammaln(a)).astype(np.result_type(ans))
        def vjp_a(g, ans, a, y): return _rt.special_no_derivative("scipy.special.gammainccinv", "a")
        def vjp_y(g, ans, a, y):
            return -g * np.exp(ans - _rt.sp_special.xlogy(a - 1.0, ans) + _rt.sp_special.gammaln(a))

    _AB = (("fn(1.5, 2.5, x)", ((),)), ("fn(0.7, 3.0, x)", ((5,),)), ("fn(2.0, 1.0, x) * x", ((3, 4),)),
           ("fn(y * 0.5 + 0.5, z * 0.7 + 0.8, x)", ((3, 4), ("int", (4,), 0, 5), ("int", (3, 1), 0, 4))))

    class betainc(Rule, key="scipy.special.betainc", fn=_sp.betainc, call=S + "betainc", cases=_AB, **_U):
        """Regularised incomplete beta I_x(a, b): in x x^(a-1) (1 - x)^(b-1) / B(a, b) (DLMF 8.17.1),
        as exp(xlogy(a - 1, x) + xlog1py(b - 1, -x) - betaln(a, b)); in a and b refused when active."""
        auto_cases = False
        domains = ((0.1, 0.9),)
        def jvp_a(t, ans, a, b, x): return _rt.special_no_derivative("scipy.special.betainc", "a")
        def jvp_b(t, ans, a, b, x): return _rt.special_no_derivative("scipy.special.betainc", "b")
        def jvp_x(t, ans, a, b, x):
            return t * np.exp(_rt.sp_special.xlogy(a - 1.0, x) + _rt.sp_special.xlog1py(b - 1.0, -x)
                              - _rt.sp_special.betaln(a, b)).astype(np.result_type(ans))
        def vjp_a(g, ans, a, b, x): return _rt.special_no_derivative("scipy.special.betainc", "a")
        def vjp_b(g, ans, a, b, x): return _rt.special_no_derivative("scipy.special.betainc", "b")
        def vjp_x(g, ans, a, b, x):
            return g * np.exp(_rt.sp_special.xlogy(a - 1.0, x) + _rt.sp_special.xlog1py(b - 1.0, -x)
                              - _rt.sp_special.betaln(a, b))

    class betaincinv(Rule, key="scipy.special.betaincinv", fn=_sp.betaincinv, call=S + "betaincinv", cases=_AB,
                     **_U):
        """The x with I_x(a, b) = y: 1 / betainc's derivative at x = ans, in y; in a and b refused."""
        auto_cases = False
        domains = ((0.1, 0.9),)
        def jvp_a(t, ans, a, b, y): return _rt.special_no_derivative("scipy.special.betaincinv", "a")
        def jvp_b(t, ans, a, b, y): return _rt.special_no_derivative("scipy.special.betaincinv", "b")
        def jvp_y(t, ans, a, b, y):
            return t * np.exp(_rt.sp_special.betaln(a, b) - _rt.sp_special.xlogy(a - 1.0, ans)
                              - _rt.sp_special.xlog1py(b - 1.0, -ans)).astype(np.result_type(ans))
        def vjp_a(g, ans, a, b, y): return _rt.special_no_derivative("scipy.special.betaincinv", "a")
        def vjp_b(g, ans, a, b, y): return _rt.special_no_derivative("scipy.special.betaincinv", "b")
        def vjp_y(g, ans, a, b, y):
            return g * np.exp(_rt.sp_special.betaln(a, b) - _rt.sp_special.xlogy(a - 1.0, ans)
                              - _rt.sp_special.xlog1py(b - 1.0, -ans))

    # -- Box-Cox transforms ---------------------------------------------------------------------
    # boxcox(x, l) = L exprel(l L), L = log x: in l, L^2 exprel'(l L) (exprel' as in `exprel`);
    # inv_boxcox(y, l) = exp(log1p(l y) / l): in l, -ans y^2 S(l y) / (1 + l y) with
    # S(v) = ((1 + v) log1p(v) - v) / v^2 = 1/2 - v/6 + v^2/12 - ... (its series where |v| < 0.01).

    class boxcox(Rule, key="scipy.special.boxcox", fn=_sp.boxcox, call=S + "boxcox", **_U):
        """(x^l - 1) / l (log x at l = 0), x > 0: in x x^(l-1); in l (x^l log x - ans) / l, taken
        through its series near l log x = 0 ((log x)^2 / 2 at l = 0)."""
        domains = (_POS, (-1.0, 1.5))
        def jvp_x(t, ans, x, lmbda): return t * np.power(x, lmbda - 1.0)
        def jvp_lmbda(t, ans, x, lmbda):
            return t * np.log(x) ** 2 * np.where(
                np.abs(lmbda * np.log(x)) < 0.01,
                0.5 + lmbda * np.log(x) * (1 / 3 + lmbda * np.log(x) * (1 / 8 + lmbda * np.log(x) * (1 / 30 + lmbda * np.log(x) * (1 / 144 + lmbda * np.log(x) / 840)))),
                (np.exp(lmbda * np.log(x)) - _rt.sp_special.exprel(lmbda * np.log(x)))
                / (lmbda * np.log(x) + (lmbda * np.log(x) == 0)))
        def vjp_x(g, ans, x, lmbda): return g * np.power(x, lmbda - 1.0)
        def vjp_lmbda(g, ans, x, lmbda):
            return g * np.log(x) ** 2 * np.where(
                np.abs(lmbda * np.log(x)) < 0.01,
                0.5 + lmbda * np.log(x) * (1 / 3 + lmbda * np.log(x) * (1 / 8 + lmbda * np.log(x) * (1 / 30 + lmbda * np.log(x) * (1 / 144 + lmbda * np.log(x) / 840)))),
                (np.exp(lmbda * np.log(x)) - _rt.sp_special.exprel(lmbda * np.log(x)))
                / (lmbda * np.log(x) + (lmbda * np.log(x) == 0)))

    class boxcox1p(Rule, key="scipy.special.boxcox1p", fn=_sp.boxcox1p, call=S + "boxcox1p", **_U):
        """boxcox(1 + x, l), x > -1: as boxcox with log1p(x) for log x."""
        domains = ((-0.5, 2.0), (-1.0, 1.5))
        def jvp_x(t, ans, x, lmbda): return t * np.power(1.0 + x, lmbda - 1.0)
        def jvp_lmbda(t, ans, x, lmbda):
            return t * np.log1p(x) ** 2 * np.where(
                np.abs(lmbda * np.log1p(x)) < 0.01,
                0.5 + lmbda * np.log1p(x) * (1 / 3 + lmbda * np.log1p(x) * (1 / 8 + lmbda * np.log1p(x) * (1 / 30 + lmbda * np.log1p(x) * (1 / 144 + lmbda * np.log1p(x) / 840)))),
                (np.exp(lmbda * np.log1p(x)) - _rt.sp_special.exprel(lmbda * np.log1p(x)))
                / (lmbda * np.log1p(x) + (lmbda * np.log1p(x) == 0)))
        def vjp_x(g, ans, x, lmbda): return g * np.power(1.0 + x, lmbda - 1.0)
        def vjp_lmbda(g, ans, x, lmbda):
            return g * np.log1p(x) ** 2 * np.where(
                np.abs(lmbda * np.log1p(x)) < 0.01,
                0.5 + lmbda * np.log1p(x) * (1 / 3 + lmbda * np.log1p(x) * (1 / 8 + lmbda * np.log1p(x) * (1 / 30 + lmbda * np.log1p(x) * (1 / 144 + lmbda * np.log1p(x) / 840)))),
                (np.exp(lmbda * np.log1p(x)) - _rt.sp_special.exprel(lmbda * np.log1p(x)))
                / (lmbda * np.log1p(x) + (lmbda * np.log1p(x) == 0)))

    class inv_boxcox(Rule, key="scipy.special.inv_boxcox", fn=_sp.inv_boxcox, call=S + "inv_boxcox", **_U):
        """(1 + l y)^(1/l) (exp(y) at l = 0), 1 + l y > 0: in y ans / (1 + l y); in l
        -ans y^2 S(l y) / (1 + l y) (see above; -ans y^2 / 2 at l = 0)."""
        domains = (_ANY, (-0.3, 0.3))
        def jvp_y(t, ans, y, lmbda): return t * ans / (1.0 + lmbda * y)
        def jvp_lmbda(t, ans, y, lmbda):
            return -t * ans * y * y / (1.0 + lmbda * y) * np.where(
                np.abs(lmbda * y) < 0.01,
                0.5 - lmbda * y * (1 / 6 - lmbda * y * (1 / 12 - lmbda * y * (1 / 20 - lmbda * y * (1 / 30 - lmbda * y / 42)))),
                ((1.0 + lmbda * y) * np.log1p(lmbda * y) - lmbda * y) / (lmbda * y * lmbda * y + (lmbda * y == 0)))
        def vjp_y(g, ans, y, lmbda): return g * ans / (1.0 + lmbda * y)
        def vjp_lmbda(g, ans, y, lmbda):
            return -g * ans * y * y / (1.0 + lmbda * y) * np.where(
                np.abs(lmbda * y) < 0.01,
                0.5 - lmbda * y * (1 / 6 - lmbda * y * (1 / 12 - lmbda * y * (1 / 20 - lmbda * y * (1 / 30 - lmbda * y / 42)))),
                ((1.0 + lmbda * y) * np.log1p(lmbda * y) - lmbda * y) / (lmbda * y * lmbda * y + (lmbda * y == 0)))

    class inv_boxcox1p(Rule, key="scipy.special.inv_boxcox1p", fn=_sp.inv_boxcox1p, call=S + "inv_boxcox1p",
                       **_U):
        """inv_boxcox(y, l) - 1: as inv_boxcox with 1 + ans for ans."""
        domains = (_ANY, (-0.3, 0.3))
        def jvp_y(t, ans, y, lmbda): return t * (1.0 + ans) / (1.0 + lmbda * y)
        def jvp_lmbda(t, ans, y, lmbda):
            return -t * (1.0 + ans) * y * y / (1.0 + lmbda * y) * np.where(
                np.abs(lmbda * y) < 0.01,
                0.5 - lmbda * y * (1 / 6 - lmbda * y * (1 / 12 - lmbda * y * (1 / 20 - lmbda * y * (1 / 30 - lmbda * y / 42)))),
                ((1.0 + lmbda * y) * np.log1p(lmbda * y) - lmbda * y) / (lmbda * y * lmbda * y + (lmbda * y == 0)))
        def vjp_y(g, ans, y, lmbda): return g * (1.0 + ans) / (1.0 + lmbda * y)
        def vjp_lmbda(g, ans, y, lmbda):
            return -g * (1.0 + ans) * y * y / (1.0 + lmbda * y) * np.where(
                np.abs(lmbda * y) < 0.01,
                0.5 - lmbda * y * (1 / 6 - lmbda * y * (1 / 12 - lmbda * y * (1 / 20 - lmbda * y * (1 / 30 - lmbda * y / 42)))),
                ((1.0 + lmbda * y) * np.log1p(lmbda * y) - lmbda * y) / (lmbda * y * lmbda * y + (lmbda * y == 0)))

    # -- other ----------------------------------------------------------------------------------

    class wrightomega(Rule, key="scipy.special.wrightomega", fn=_sp.wrightomega, call=S + "wrightomega", **_U):
        """Wright omega w (w + log w = x) of a real x: w / (1 + w)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x): return t * ans / (1.0 + ans)
        def vjp_x(g, ans, x): return g * ans / (1.0 + ans)

    class ellipk(Rule, key="scipy.special.ellipk", fn=_sp.ellipk, call=S + "ellipk", **_U):
        """Complete elliptic integral K(m), m < 1: (E - (1 - m) K) / (2 m (1 - m)) (DLMF 19.4.1),
        its series (pi / 8 + 9 pi m / 64 + ..., DLMF 19.5.1) where |m| < 0.001; infinite at 1."""
        domains = ((0.05, 0.9),)
        def jvp_x(t, ans, x):
            return t * np.where(np.abs(x) < 0.001, 0.39269908169872414 + x * (0.44178646691106466 + x * (
                0.46019423636569234 + x * (0.4697816162899776 + x * 0.47565388649360235))),
                (_rt.sp_special.ellipe(x) - (1.0 - x) * ans) / (2.0 * x * (1.0 - x) + (x == 0)))
        def vjp_x(g, ans, x):
            return g * np.where(np.abs(x) < 0.001, 0.39269908169872414 + x * (0.44178646691106466 + x * (
                0.46019423636569234 + x * (0.4697816162899776 + x * 0.47565388649360235))),
                (_rt.sp_special.ellipe(x) - (1.0 - x) * ans) / (2.0 * x * (1.0 - x) + (x == 0)))

    class ellipe(Rule, key="scipy.special.ellipe", fn=_sp.ellipe, call=S + "ellipe", **_U):
        """Complete elliptic integral E(m), m <= 1: (E - K) / (2 m) (DLMF 19.4.1), its series
        (-pi / 8 - 3 pi m / 64 - ..., DLMF 19.5.2) where |m| < 0.001."""
        domains = ((0.05, 0.9),)
        def jvp_x(t, ans, x):
            return t * np.where(np.abs(x) < 0.001, -0.39269908169872414 + x * (-0.14726215563702155 + x * (
                -0.09203884727313846 + x * (-0.0671116594699968 - x * 0.05285043183262248))),
                (ans - _rt.sp_special.ellipk(x)) / (2.0 * x + (x == 0)))
        def vjp_x(g, ans, x):
            return g * np.where(np.abs(x) < 0.001, -0.39269908169872414 + x * (-0.14726215563702155 + x * (
                -0.09203884727313846 + x * (-0.0671116594699968 - x * 0.05285043183262248))),
                (ans - _rt.sp_special.ellipk(x)) / (2.0 * x + (x == 0)))

    # -- more: binomial coefficients, Owen's T, Student's t, hypergeometric functions ------------

    class binom(Rule, key="scipy.special.binom", fn=_sp.binom, call=S + "binom", **_U):
        """Gamma(n + 1) / (Gamma(k + 1) Gamma(n - k + 1)) of real n, k (DLMF 1.2.6, 5.2.2): in n
        binom (psi(n + 1) - psi(n - k + 1)), in k binom (psi(n - k + 1) - psi(k + 1)). Where a
        Gamma of the denominator has a pole (binom 0, e.g. n an integer below k) the formulas give nan."""
        domains = ((2.0, 5.0), (0.2, 1.8))
        def jvp_n(t, ans, n, k):
            return t * ans * (_rt.sp_special.digamma(n + 1.0) - _rt.sp_special.digamma(n - k + 1.0))
        def jvp_k(t, ans, n, k):
            return t * ans * (_rt.sp_special.digamma(n - k + 1.0) - _rt.sp_special.digamma(k + 1.0))
        def vjp_n(g, ans, n, k):
            return g * ans * (_rt.sp_special.digamma(n + 1.0) - _rt.sp_special.digamma(n - k + 1.0))
        def vjp_k(g, ans, n, k):
            return g * ans * (_rt.sp_special.digamma(n - k + 1.0) - _rt.sp_special.digamma(k + 1.0))

    class owens_t(Rule, key="scipy.special.owens_t", fn=_sp.owens_t, call=S + "owens_t", **_U):
        """Owen's T(h, a): in h -exp(-h^2 / 2) erf(a h / sqrt 2) / (2 sqrt(2 pi)), in a
        exp(-h^2 (1 + a^2) / 2) / (2 pi (1 + a^2)) (Owen 1956)."""
        domains = (_ANY, _ANY)
        def jvp_h(t, ans, h, a):
            return -t * 0.19947114020071635 * np.exp(-0.5 * h * h) * _rt.sp_special.erf(0.7071067811865476 * a * h)
        def jvp_a(t, ans, h, a): return t * 0.15915494309189535 * np.exp(-0.5 * h * h * (1.0 + a * a)) / (1.0 + a * a)
        def vjp_h(g, ans, h, a):
            return -g * 0.19947114020071635 * np.exp(-0.5 * h * h) * _rt.sp_special.erf(0.7071067811865476 * a * h)
        def vjp_a(g, ans, h, a): return g * 0.15915494309189535 * np.exp(-0.5 * h * h * (1.0 + a * a)) / (1.0 + a * a)

    class stdtr(Rule, key="scipy.special.stdtr", fn=_sp.stdtr, call=S + "stdtr", cases=_refused_first("3.5"), **_U):
        """Student's t CDF at x with df degrees of freedom: in x its density Gamma((df + 1) / 2) /
        (sqrt(df pi) Gamma(df / 2)) (1 + x^2 / df)^(-(df + 1) / 2); in df refused when df is active."""
        auto_cases = False
        domains = (_ANY,)
        def jvp_df(t, ans, df, x): return _rt.special_no_derivative("scipy.special.stdtr", "df")
        def jvp_x(t, ans, df, x):
            return t * np.exp(_rt.sp_special.gammaln(0.5 * df + 0.5) - _rt.sp_special.gammaln(0.5 * df)
                              - 0.5 * np.log(3.141592653589793 * df)
                              - (0.5 * df + 0.5) * np.log1p(x * x / df)).astype(np.result_type(ans))
        def vjp_df(g, ans, df, x): return _rt.special_no_derivative("scipy.special.stdtr", "df")
        def vjp_x(g, ans, df, x):
            return g * np.exp(_rt.sp_special.gammaln(0.5 * df + 0.5) - _rt.sp_special.gammaln(0.5 * df)
                              - 0.5 * np.log(3.141592653589793 * df) - (0.5 * df + 0.5) * np.log1p(x * x / df))

    class ndtri_exp(Rule, key="scipy.special.ndtri_exp", fn=_sp.ndtri_exp, call=S + "ndtri_exp", **_U):
        """ndtri(exp(y)), y < 0: sqrt(2 pi) exp(y + ans^2 / 2)."""
        domains = ((-4.0, -0.1),)
        def jvp_x(t, ans, x): return t * 2.5066282746310002 * np.exp(x + 0.5 * ans * ans)
        def vjp_x(g, ans, x): return g * 2.5066282746310002 * np.exp(x + 0.5 * ans * ans)

    class cosm1(Rule, key="scipy.special.cosm1", fn=_sp.cosm1, call=S + "cosm1", **_U):
        """cos(x) - 1: -sin(x)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x): return -t * np.sin(x)
        def vjp_x(g, ans, x): return -g * np.sin(x)

    class powm1(Rule, key="scipy.special.powm1", fn=_sp.powm1, call=S + "powm1", **_U):
        """x^y - 1, x > 0: in x y x^(y-1), in y x^y log x (0 at x = 0, as for powers)."""
        domains = (_POS, _ANY)
        def jvp_x(t, ans, x, y): return t * y * np.power(x, y - 1.0)
        def jvp_y(t, ans, x, y): return t * (ans + 1.0) * np.log(x + (x == 0))
        def vjp_x(g, ans, x, y): return g * y * np.power(x, y - 1.0)
        def vjp_y(g, ans, x, y): return g * (ans + 1.0) * np.log(x + (x == 0))

    class hyp1f1(Rule, key="scipy.special.hyp1f1", fn=_sp.hyp1f1, call=S + "hyp1f1", cases=(
            ("fn(0.7, 1.4, x)", ((),)), ("fn(1.5, 0.6, x)", ((5,),)), ("fn(-0.4, 2.5, x) * x", ((3, 4),)),
            ("fn(y * 0.5 + 0.25, 1.7, x)", ((3, 4), ("int", (4,), 0, 5)))), **_U):
        """Kummer's M(a, b, x) of real arguments: a / b M(a + 1, b + 1, x) in x (DLMF 13.3.15);
        in a and b refused when active."""
        auto_cases = False
        domains = (_ANY,)
        def jvp_a(t, ans, a, b, x): return _rt.special_no_derivative("scipy.special.hyp1f1", "a")
        def jvp_b(t, ans, a, b, x): return _rt.special_no_derivative("scipy.special.hyp1f1", "b")
        def jvp_x(t, ans, a, b, x):
            return t * (a / b * _rt.sp_special.hyp1f1(a + 1.0, b + 1.0, x)).astype(np.result_type(ans))
        def vjp_a(g, ans, a, b, x): return _rt.special_no_derivative("scipy.special.hyp1f1", "a")
        def vjp_b(g, ans, a, b, x): return _rt.special_no_derivative("scipy.special.hyp1f1", "b")
        def vjp_x(g, ans, a, b, x): return g * a / b * _rt.sp_special.hyp1f1(a + 1.0, b + 1.0, x)

    class hyp2f1(Rule, key="scipy.special.hyp2f1", fn=_sp.hyp2f1, call=S + "hyp2f1", cases=(
            ("fn(0.7, 1.4, 2.3, x)", ((),)), ("fn(1.5, -0.6, 0.8, x)", ((5,),)), ("fn(0.3, 2.5, 1.2, x) * x", ((3, 4),)),
            ("fn(y * 0.5 + 0.25, 1.7, 2.2, x)", ((3, 4), ("int", (4,), 0, 5)))), **_U):
        """Gauss's 2F1(a, b; c; z), real z < 1: a b / c 2F1(a + 1, b + 1; c + 1; z) in z (DLMF
        15.5.1); in a, b, c refused when active."""
        auto_cases = False
        domains = ((-0.6, 0.7),)
        def jvp_a(t, ans, a, b, c, z): return _rt.special_no_derivative("scipy.special.hyp2f1", "a")
        def jvp_b(t, ans, a, b, c, z): return _rt.special_no_derivative("scipy.special.hyp2f1", "b")
        def jvp_c(t, ans, a, b, c, z): return _rt.special_no_derivative("scipy.special.hyp2f1", "c")
        def jvp_z(t, ans, a, b, c, z):
            return t * (a * b / c * _rt.sp_special.hyp2f1(a + 1.0, b + 1.0, c + 1.0, z)).astype(np.result_type(ans))
        def vjp_a(g, ans, a, b, c, z): return _rt.special_no_derivative("scipy.special.hyp2f1", "a")
        def vjp_b(g, ans, a, b, c, z): return _rt.special_no_derivative("scipy.special.hyp2f1", "b")
        def vjp_c(g, ans, a, b, c, z): return _rt.special_no_derivative("scipy.special.hyp2f1", "c")
        def vjp_z(g, ans, a, b, c, z): return g * a * b / c * _rt.sp_special.hyp2f1(a + 1.0, b + 1.0, c + 1.0, z)

    # -- factorials and combinations (Python functions of SciPy's; exact=False) -----------------

    class factorial(Rule, key="scipy.special.factorial", fn=_sp.factorial, call=S + "factorial",
                    cases=(("fn(x)", ((),)), ("fn(x)", ((5,),)), ("fn(x, exact=False) * x", ((3, 4),)),
                           ("fn(x, extend='complex')", ((5,),)), ("fn(y) * x", ((4,), ("int", (4,), 0, 6)))), **_E):
        """Gamma(n + 1) for n >= 0 (0 below, or Gamma(n + 1) with extend='complex'): ans psi(n + 1)
        (DLMF 5.2.2). exact=True computes integers, which carry no derivative."""
        auto_cases = False
        domains = (_POS,)
        def jvp_n(t, ans, n, exact=False, extend="zero"): return t * ans * _rt.sp_special.digamma(n + 1.0)
        def vjp_n(g, ans, n, exact=False, extend="zero"): return g * ans * _rt.sp_special.digamma(n + 1.0)

    class comb(Rule, key="scipy.special.comb", fn=_sp.comb, call=S + "comb", cases=(
            ("fn(x, y)", ((), ())), ("fn(x, y)", ((5,), (5,))), ("fn(x, y, exact=False) * x", ((3, 4), (4,))),
            ("fn(x, 2.0)", ((5,),)), ("fn(y + 3, x * 0.3)", ((5,), ("int", (5,), 3, 8)))), **_E):
        """N choose k of reals (exact=False): as binom, 0 where k > N, N < 0 or k < 0 (the formulas
        give 0 there too). repetition=True is refused (a different function)."""
        auto_cases = False
        domains = ((3.0, 6.0), (0.3, 2.5))
        def jvp_N(t, ans, N, k, exact=False, repetition=False):
            return t * ans * (_rt.sp_special.digamma(N + 1.0) - _rt.sp_special.digamma(N - k + 1.0))
        def jvp_k(t, ans, N, k, exact=False, repetition=False):
            return t * ans * (_rt.sp_special.digamma(N - k + 1.0) - _rt.sp_special.digamma(k + 1.0))
        def vjp_N(g, ans, N, k, exact=False, repetition=False):
            return g * ans * (_rt.sp_special.digamma(N + 1.0) - _rt.sp_special.digamma(N - k + 1.0))
        def vjp_k(g, ans, N, k, exact=False, repetition=False):
            return g * ans * (_rt.sp_special.digamma(N - k + 1.0) - _rt.sp_special.digamma(k + 1.0))

        @classmethod
        def check(cls, pos, kw):
            from .registry import const_value

            if const_value(kw.get("repetition", False)) is not False:
                return "scipy.special.comb is differentiable with repetition=False only (write comb(N + k - 1, k))"
            return None

    class perm(Rule, key="scipy.special.perm", fn=_sp.perm, call=S + "perm", cases=(
            ("fn(x, y)", ((), ())), ("fn(x, y)", ((5,), (5,))), ("fn(x, y, exact=False) * x", ((3, 4), (4,))),
            ("fn(x, 2.0)", ((5,),))), **_E):
        """N! / (N - k)! of reals (exact=False): in N ans (psi(N + 1) - psi(N - k + 1)), in k
        ans psi(N - k + 1); 0 where k > N, N < 0 or k < 0."""
        auto_cases = False
        domains = ((3.0, 6.0), (0.3, 2.5))
        def jvp_N(t, ans, N, k, exact=False):
            return t * ans * (_rt.sp_special.digamma(N + 1.0) - _rt.sp_special.digamma(N - k + 1.0))
        def jvp_k(t, ans, N, k, exact=False): return t * ans * _rt.sp_special.digamma(N - k + 1.0)
        def vjp_N(g, ans, N, k, exact=False):
            return g * ans * (_rt.sp_special.digamma(N + 1.0) - _rt.sp_special.digamma(N - k + 1.0))
        def vjp_k(g, ans, N, k, exact=False): return g * ans * _rt.sp_special.digamma(N - k + 1.0)
