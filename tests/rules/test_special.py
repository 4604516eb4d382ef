"""The `scipy.special` rules of `rules/special.py` and `rules/special_bessel.py` end to end.

`tests/rules/test_rule_cases.py` checks every rule alone from its cases (both modes against central
differences, both dtypes). Here: functions that combine them, in forward and reverse mode
against central differences (`zymo.testing.check_grad`); gradients against autograd's
(`autograd.scipy.special`) where autograd has the function; values at the removable
singularities and kinks the rules' docstrings name; the parameters without a derivative
refused when active; second order (`zymo.hessian`) against finite differences of the
gradient; and Numba: `np.sinc` compiles, SciPy's functions fall back to Python with a warning
(or raise `ZymoNumbaError` at the user's line under `numba=True`).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

sp = pytest.importorskip("scipy.special")

from helpers import autograd_grad

import zymo
from zymo import Const, Duplicated, Forward, Reverse
from zymo.rules import REGISTRY
from zymo.rules.registry import rule_for_callable
from zymo.testing import check_grad

X = np.array([0.35, 0.8, 1.3, 2.1])
P = np.array([0.15, 0.4, 0.55, 0.85])  # probabilities / arguments in (0, 1)
R = np.array([-1.7, -0.4, 0.3, 1.9])  # signed


# -- composites in both modes against central differences -----------------------------------


def gammas(x, y):
    return np.sum(sp.gamma(x) * sp.loggamma(y) + sp.beta(x, y) - sp.betaln(y, x) * sp.rgamma(x)
                  + sp.polygamma(1, x) * y + sp.poch(x, y))


def normals(p, r):
    return np.sum(sp.ndtri(p) * sp.ndtr(r) + sp.log_ndtr(r) * sp.erfinv(2.0 * p - 1.0)
                  + sp.erfcinv(2.0 * p) * sp.erfcx(r) + sp.dawsn(r) * sp.erfi(0.5 * r))


def elementary(x, r):
    return np.sum(sp.expm1(r) * sp.log1p(x) + sp.exp2(r) / sp.exp10(0.5 * r) + sp.cbrt(r) * sp.exprel(r)
                  + sp.xlog1py(r, x) + sp.softplus(r) * sp.log_expit(r))


def information(p, x):
    return np.sum(sp.entr(p) + sp.rel_entr(p, x) * sp.kl_div(x, p) + sp.huber(1.0, 2.0 * x - 1.5)
                  + sp.pseudo_huber(x, p - 0.5))


def bessels(x, r):
    return np.sum(sp.i0(r) * sp.i0e(r) + sp.i1(r) * sp.i1e(r) + sp.j0(x) * sp.j1(r) + sp.y0(x) * sp.y1(x)
                  + sp.k0(x) * sp.k1(x) + sp.k0e(x) / sp.k1e(x) + sp.jv(1.5, x) + sp.iv(0.5, x) * sp.kv(2.0, x)
                  + sp.yv(0.5, x) + sp.ive(1.0, x) + sp.kve(0.5, x))


def integrals(x, p):
    return np.sum(sp.expi(x) * sp.exp1(x) + sp.expn(2, x) + sp.spence(x) + sp.zeta(2.5, x)
                  + sp.gammainc(1.7, x) * sp.gammaincc(0.8, x) + sp.betainc(2.0, 3.0, p)
                  + sp.gammaincinv(1.5, p) + sp.betaincinv(1.5, 2.0, p))


def transforms(x, lam):
    return np.sum(sp.boxcox(x, lam) + sp.inv_boxcox(0.3 * x, lam) + sp.boxcox1p(x, lam)
                  + sp.inv_boxcox1p(x - 1.0, 0.5 * lam))


def numpy_ones(x, r):
    return np.sum(np.sinc(r) * np.i0(x) + sp.sindg(30.0 * r) * sp.cosdg(20.0 * x) + sp.tandg(10.0 * r)
                  + sp.cotdg(40.0 * x) + sp.ellipk(0.3 * x) * sp.ellipe(0.4 * x) + sp.wrightomega(r))


def extras(x, r):
    return np.sum(sp.binom(3.5 + x, x) + sp.owens_t(r, x) + sp.stdtr(3.0, r) * sp.ndtri_exp(-x)
                  + sp.cosm1(r) * sp.powm1(x, r) + sp.hyp1f1(0.7, 1.4, r) + sp.hyp2f1(0.5, 1.5, 2.5, 0.3 * r))


@pytest.mark.parametrize("f, args", [
    (gammas, (X, X[::-1] + 0.2)), (normals, (P, R)), (elementary, (X, R)), (information, (P, X)),
    (bessels, (X, R)), (integrals, (X, P)), (transforms, (X, np.array([-0.3, 0.0, 0.45, 1.2]))),
    (numpy_ones, (X * 0.9, R)), (extras, (X, R))], ids=lambda a: getattr(a, "__name__", ""))
def test_composites_both_modes_against_central_differences(f, args):
    check_grad(f, *[a.copy() for a in args], rtol=1e-5, atol=1e-6)


def scalar_loop(x, n):
    s = 0.0
    for i in range(n):
        s = s + sp.gamma(x + 0.1 * i) * sp.erfcx(x) + sp.betaln(x, 1.0 + i)
    return s


def test_numbers_in_a_loop():
    check_grad(scalar_loop, 1.3, 3, const=[1])


# -- models as real code writes them ---------------------------------------------------------


def beta_binomial_loglik(alpha, beta, k, n):
    return np.sum(sp.betaln(k + alpha, n - k + beta) - sp.betaln(alpha, beta) + np.log(sp.binom(n, k)))


def boxcox_profile_loglik(lam, x):
    y = sp.boxcox(x, lam)
    return -0.5 * x.size * np.log(np.var(y)) + (lam - 1.0) * np.sum(np.log(x))


def probit_loglik(w, a, y):
    z = a @ w
    return np.sum(y * sp.log_ndtr(z) + (1.0 - y) * sp.log_ndtr(-z))


def poisson_loglik(lam, k):
    return np.sum(k * np.log(lam) - lam - np.log(sp.factorial(k)))


def comb_repetition(n, k):
    return np.sum(sp.comb(n, k, repetition=True))


def test_factorial_of_data_and_comb_refusal():
    """factorial of int data (Poisson) carries no derivative; comb(repetition=True) is refused."""
    k = np.array([0, 3, 7, 2])
    lam = np.array([0.5, 2.5, 6.0, 1.5])
    for mode in (Reverse, Forward):
        (g, _) = zymo.gradient(mode, poisson_loglik, lam, Const(k))
        np.testing.assert_allclose(g, k / lam - 1.0, rtol=1e-13)
    with pytest.raises(zymo.UnsupportedCall, match="repetition=False"):
        zymo.gradient(Reverse, comb_repetition, np.array([5.0]), np.array([2.0]))


def test_models_both_modes_and_autograd():
    k, n = np.array([3, 0, 7, 5]), np.array([10, 4, 9, 12])
    check_grad(beta_binomial_loglik, 1.7, 2.4, k, n, const=[2, 3])
    x = np.array([0.8, 1.9, 3.3, 0.4, 5.1])
    for lam in (0.3, 0.0, -0.6):
        check_grad(boxcox_profile_loglik, lam, x.copy(), const=[1])
    rng = np.random.default_rng(0)
    a, y = rng.normal(size=(6, 3)), (rng.uniform(size=6) < 0.5).astype(float)
    check_grad(probit_loglik, np.array([0.3, -0.5, 0.8]), a, y, const=[1, 2])
    anp, asp = _ag()
    ref = autograd_grad(lambda al, be: anp.sum(asp.betaln(k + al, n - k + be) - asp.betaln(al, be)), 1.7, 2.4,
                        argnum=(0, 1))
    for mode in (Reverse, Forward):
        got = zymo.gradient(mode, beta_binomial_loglik, 1.7, 2.4, Const(k), Const(n))
        np.testing.assert_allclose(got[:2], ref, rtol=1e-10)


# -- autograd's gradients ------------------------------------------------------------------


def _ag():
    pytest.importorskip("autograd")
    import autograd.numpy as anp
    import autograd.scipy.special as asp

    return anp, asp


def ag_gamma(x):
    return np.sum(sp.gamma(x) * x)


def ag_rgamma(x):
    return np.sum(sp.rgamma(x) + sp.polygamma(2, x))


def ag_beta(x):
    return np.sum(sp.beta(x, 2.5 - x) + sp.betaln(x, x * x))


def ag_erfinv(p):
    return np.sum(sp.erfinv(2.0 * p - 1.0) * sp.erfcinv(p))


def ag_bessel(r):
    return np.sum(sp.i0(r) * sp.i1(r) + sp.j0(r) * sp.j1(r))


def ag_bessel_pos(x):
    return np.sum(sp.y0(x) + sp.y1(x) + sp.iv(1.5, x) + sp.ive(2.0, x))


def ag_gammainc(x):
    return np.sum(sp.gammainc(1.7, x) - sp.gammaincc(0.6, x) * x)


def ag_betainc(p):
    return np.sum(sp.betainc(2.0, 0.7, p) * p)


def ag_psi(x):
    return np.sum(sp.psi(x) * x)


def test_gradients_match_autograd():
    anp, asp = _ag()
    pairs = [
        (ag_gamma, lambda x: anp.sum(asp.gamma(x) * x), X),
        (ag_rgamma, lambda x: anp.sum(asp.rgamma(x) + asp.polygamma(2, x)), X),
        (ag_beta, lambda x: anp.sum(asp.beta(x, 2.5 - x) + asp.betaln(x, x * x)), X * 0.5),
        (ag_erfinv, lambda p: anp.sum(asp.erfinv(2.0 * p - 1.0) * asp.erfcinv(p)), P),
        (ag_bessel, lambda r: anp.sum(asp.i0(r) * asp.i1(r) + asp.j0(r) * asp.j1(r)), R),
        (ag_bessel_pos, lambda x: anp.sum(asp.y0(x) + asp.y1(x) + asp.iv(1.5, x) + asp.ive(2.0, x)), X),
        (ag_gammainc, lambda x: anp.sum(asp.gammainc(1.7, x) - asp.gammaincc(0.6, x) * x), X),
        (ag_betainc, lambda p: anp.sum(asp.betainc(2.0, 0.7, p) * p), P),
        (ag_psi, lambda x: anp.sum(asp.psi(x) * x), X),
    ]
    for f, fa, x in pairs:
        ref = autograd_grad(fa, x)
        assert np.max(np.abs(ref)) > 0.1
        for mode in (Reverse, Forward):
            got = zymo.gradient(mode, f, x)[0]
            np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12, err_msg=f"{f.__name__}, {mode}")


# -- aliases, values at removable singularities and kinks ------------------------------------


def test_psi_is_digamma_and_sinc_is_numpys():
    assert sp.psi is sp.digamma
    assert rule_for_callable(sp.psi) == "scipy.special.digamma"
    if hasattr(sp, "sinc"):
        assert sp.sinc is np.sinc
    assert rule_for_callable(np.sinc) == "numpy.sinc" and rule_for_callable(np.i0) == "numpy.i0"
    for name in ["gamma", "loggamma", "beta", "betaln", "polygamma", "erfinv", "erfcinv", "erfcx", "ndtr",
                 "ndtri", "log_ndtr", "expm1", "log1p", "exp2", "exp10", "cbrt", "xlog1py", "entr", "rel_entr",
                 "kl_div", "huber", "pseudo_huber", "i0", "i0e", "i1", "i1e", "j0", "j1", "y0", "y1", "k0",
                 "k1", "k0e", "k1e", "dawsn", "expi", "exp1", "exprel", "gammainc", "gammaincc", "softplus",
                 "spence", "zeta", "boxcox", "inv_boxcox", "binom", "owens_t", "stdtr", "ndtri_exp", "cosm1",
                 "powm1", "hyp1f1", "hyp2f1", "factorial", "comb", "perm"]:
        key = rule_for_callable(getattr(sp, name))
        assert key == f"scipy.special.{name}" and REGISTRY[key].jvps() and REGISTRY[key].vjps(), name


def sinc_sum(x):
    return np.sum(np.sinc(x))


def exprel_sum(x):
    return np.sum(sp.exprel(x))


def spence_sum(x):
    return np.sum(sp.spence(x))


def boxcox_l(x, lam):
    return np.sum(sp.boxcox(x, lam))


def inv_boxcox_l(y, lam):
    return np.sum(sp.inv_boxcox(y, lam))


def elliptic(m):
    return np.sum(sp.ellipk(m) + 2.0 * sp.ellipe(m))


def i0e_sum(x):
    return np.sum(sp.i0e(x))


def huber_sum(d, r):
    return np.sum(sp.huber(d, r))


def pseudo_huber_sum(d, r):
    return np.sum(sp.pseudo_huber(d, r))


def entr_sum(x):
    return np.sum(sp.entr(x))


def _exprel_d(u):
    """exprel'(u) = sum over k >= 1 of k u^(k-1) / (k+1)!, summed far enough for |u| <= 3."""
    return sum(k * u ** (k - 1) / np.prod(np.arange(1.0, k + 2)) for k in range(1, 40))


def test_removable_singularities_take_their_limits():
    for mode in (Reverse, Forward):
        np.testing.assert_allclose(zymo.gradient(mode, sinc_sum, np.array([0.0, 0.5]))[0],
                                   [0.0, -4.0 / np.pi], rtol=1e-12, atol=1e-15)
        x = np.array([0.0, 1e-3, -0.02, 1.0, -3.0])
        np.testing.assert_allclose(zymo.gradient(mode, exprel_sum, x)[0], _exprel_d(x), rtol=1e-12)
        np.testing.assert_allclose(zymo.gradient(mode, spence_sum, np.array([1.0, 2.0]))[0],
                                   [-1.0, -np.log(2.0)], rtol=1e-12)
        x = np.array([0.5, 2.0, 3.0])
        gx, gl = zymo.gradient(mode, boxcox_l, x, np.zeros(3))
        np.testing.assert_allclose(gx, 1.0 / x, rtol=1e-12)
        np.testing.assert_allclose(gl, np.log(x) ** 2 / 2, rtol=1e-12)
        y = np.array([-0.5, 0.7, 1.5])
        gy, gl = zymo.gradient(mode, inv_boxcox_l, y, np.zeros(3))
        np.testing.assert_allclose(gy, np.exp(y), rtol=1e-12)
        np.testing.assert_allclose(gl, -np.exp(y) * y * y / 2, rtol=1e-12)
        np.testing.assert_allclose(zymo.gradient(mode, elliptic, np.array([0.0]))[0], [np.pi / 8 - np.pi / 4],
                                   rtol=1e-12)


def test_second_derivatives_at_removable_singularities():
    """The series branches make the second derivative right at the singular point too."""
    np.testing.assert_allclose(zymo.hessian(sinc_sum, np.array([0.0])), [[-np.pi ** 2 / 3]], rtol=1e-12)
    np.testing.assert_allclose(zymo.hessian(exprel_sum, np.array([0.0])), [[1 / 3]], rtol=1e-12)
    np.testing.assert_allclose(zymo.hessian(spence_sum, np.array([1.0])), [[0.5]], rtol=1e-12)
    np.testing.assert_allclose(zymo.hessian(elliptic, np.array([0.0])), [[np.pi / 2 * (2 * 9 / 64 - 2 * 6 / 64)]],
                               rtol=1e-12)
    x = np.array([0.5, 3.0])
    H = zymo.hessian(lambda_boxcox, np.zeros(2), x)
    np.testing.assert_allclose(np.diag(H), np.log(x) ** 3 / 3, rtol=1e-12)


def lambda_boxcox(lam, x):
    return np.sum(sp.boxcox(x, lam))


def test_near_removable_singularities_no_cancellation():
    """Close to the singular point the closed forms would lose digits (cos(pi x) - sinc(x),
    E - (1 - m) K): the series keep the derivative exact to rounding."""
    x = np.array([1e-7, -3e-5, 0.02])
    u = np.pi * x
    ref = np.pi * sum((-1) ** k * 2 * k * u ** (2 * k - 1) / np.prod(np.arange(1.0, 2 * k + 2)) for k in range(1, 12))
    np.testing.assert_allclose(zymo.gradient(Reverse, sinc_sum, x)[0], ref, rtol=1e-13)
    m = np.array([1e-9, -2e-6, 5e-4])
    c2 = np.array([1.0, 1 / 4, 9 / 64, 25 / 256, 1225 / 16384, 3969 / 65536, 53361 / 1048576])
    dk = np.pi / 2 * sum(n * c2[n] * m ** (n - 1) for n in range(1, 7))
    de = np.pi / 2 * sum(n * c2[n] / (1 - 2 * n) * m ** (n - 1) for n in range(1, 7))
    np.testing.assert_allclose(zymo.gradient(Reverse, elliptic, m)[0], dk + 2 * de, rtol=1e-13)
    r = np.array([1e-5, -3e-4])
    gd, _ = zymo.gradient(Reverse, pseudo_huber_sum, np.ones(2), r)
    np.testing.assert_allclose(gd, r ** 4 / 4 * (1 - r * r), rtol=1e-12)  # delta q^2 / 4 (1 - q + ...)
    z = np.array([0.996, 1.003, 1.0 + 1e-9])
    np.testing.assert_allclose(zymo.gradient(Reverse, spence_sum, z)[0], np.log(z) / (1.0 - z), rtol=1e-13)


def erfcx_dawsn(x):
    return np.sum(sp.erfcx(x) + sp.dawsn(x))


def test_erfcx_and_dawsn_far_out():
    """2 x erfcx(x) - 2 / sqrt(pi) and 1 - 2 x F(x) cancel for large x: the asymptotic series
    takes over beyond 20 (exact to rounding against mpmath)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    x = np.array([5.0, 19.0, 21.0, 300.0, 1e5, -25.0])
    ref = [float(mp.diff(lambda t: mp.exp(t * t) * mp.erfc(t) + mp.sqrt(mp.pi) / 2 * mp.exp(-t * t) * mp.erfi(t), v))
           for v in x]
    for mode in (Reverse, Forward):
        np.testing.assert_allclose(zymo.gradient(mode, erfcx_dawsn, x)[0], ref, rtol=1e-12)


def _mp_functions(mp):
    """scipy.special name -> (the function in mpmath, points, including hard ones)."""
    return {
        "gamma": (mp.gamma, [0.01, 0.5, 3.0, 50.0, 150.0, -2.5]),
        "loggamma": (mp.loggamma, [1e-8, 0.5, 1.0, 2.0, 1e5]),
        "rgamma": (mp.rgamma, [0.5, 3.0, -2.5, 50.0]),
        "erfinv": (mp.erfinv, [-0.999999, -0.3, 0.0, 0.9, 1 - 1e-12]),
        "erfcinv": (lambda y: mp.erfinv(1 - y), [1e-10, 0.3, 1.0, 1.7]),
        "erfcx": (lambda x: mp.exp(x * x) * mp.erfc(x), [-5.0, 0.0, 3.0, 19.9, 25.0, 1e4]),
        "erfi": (mp.erfi, [-3.0, 0.0, 2.0, 10.0]),
        "dawsn": (lambda x: mp.sqrt(mp.pi) / 2 * mp.exp(-x * x) * mp.erfi(x), [-30.0, -3.0, 0.0, 0.9, 1e3]),
        "ndtr": (mp.ncdf, [-30.0, -5.0, 0.0, 8.0]),
        "ndtri": (lambda p: mp.sqrt(2) * mp.erfinv(2 * p - 1), [1e-10, 0.2, 0.5, 0.999]),
        "log_ndtr": (lambda x: mp.log(mp.ncdf(x)), [-40.0, -5.0, 0.0, 5.0]),
        "log_expit": (lambda x: -mp.log1p(mp.exp(-x)), [-50.0, 0.0, 50.0, 800.0]),
        "softplus": (lambda x: mp.log1p(mp.exp(x)), [-50.0, 0.0, 50.0]),
        "expm1": (mp.expm1, [-30.0, 1e-10, 2.0]),
        "log1p": (mp.log1p, [-0.9, 1e-10, 5.0]),
        "exprel": (lambda x: mp.expm1(x) / x if x != 0 else mp.mpf(1), [-30.0, -1e-5, 1e-9, 0.009, 0.011, 50.0]),
        "entr": (lambda x: -x * mp.log(x), [1e-10, 0.5, 3.0]),
        "i0": (lambda x: mp.besseli(0, x), [-3.0, 0.0, 1e-5, 20.0]),
        "i1": (lambda x: mp.besseli(1, x), [-3.0, 0.0, 1e-5, 20.0]),
        "i0e": (lambda x: mp.exp(-abs(x)) * mp.besseli(0, x), [-3.0, 1e-5, 700.0]),
        "i1e": (lambda x: mp.exp(-abs(x)) * mp.besseli(1, x), [-3.0, 1e-5, 700.0]),
        "j0": (lambda x: mp.besselj(0, x), [0.0, 2.4048, 30.0]),
        "j1": (lambda x: mp.besselj(1, x), [0.0, 3.8317, 30.0]),
        "y0": (lambda x: mp.bessely(0, x), [1e-5, 0.8936, 30.0]),
        "y1": (lambda x: mp.bessely(1, x), [1e-3, 2.197, 30.0]),
        "k0": (lambda x: mp.besselk(0, x), [1e-5, 1.0, 50.0]),
        "k1": (lambda x: mp.besselk(1, x), [1e-3, 1.0, 50.0]),
        "k0e": (lambda x: mp.exp(x) * mp.besselk(0, x), [1e-5, 1.0, 700.0]),
        "k1e": (lambda x: mp.exp(x) * mp.besselk(1, x), [1e-3, 1.0, 700.0]),
        "expi": (mp.ei, [-30.0, -1e-8, 1e-8, 0.3725, 50.0]),
        "exp1": (mp.e1, [1e-8, 1.0, 50.0, 700.0]),
        "spence": (lambda z: mp.polylog(2, 1 - z), [1e-8, 0.5, 0.995, 1.0, 1.02, 50.0]),
        "ellipk": (mp.ellipk, [-5.0, 0.0, 1e-4, 0.0011, 0.5, 0.999999]),
        "ellipe": (mp.ellipe, [-5.0, 0.0, 1e-4, 0.0011, 0.5, 0.999999]),
        "wrightomega": (lambda x: mp.lambertw(mp.exp(x)), [-30.0, 0.0, 30.0]),
        "sindg": (lambda x: mp.sin(mp.pi * x / 180), [0.0, 89.0, 1e5 + 0.5]),
        "tandg": (lambda x: mp.tan(mp.pi * x / 180), [0.0, 89.0]),
        "cosm1": (lambda x: mp.cos(x) - 1, [1e-9, 1.0]),
        "ndtri_exp": (lambda y: mp.sqrt(2) * mp.erfinv(2 * mp.exp(y) - 1), [-50.0, -1.0, -1e-5]),
    }


@pytest.mark.slow
def test_first_derivatives_against_mpmath():
    """Each rule's derivative at ordinary and hard points (tails, near removable singularities,
    far out) against mpmath's numerical derivative at 50 digits: to rounding (2e-12)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    bad = []
    for name, (f, points) in _mp_functions(mp).items():
        jvp = REGISTRY[f"scipy.special.{name}"].jvps()["x"]
        for x in points:
            with np.errstate(all="ignore"):
                got = float(jvp(1.0, getattr(sp, name)(x), np.float64(x)))
            ref = float(mp.diff(f, mp.mpf(x)))
            if abs(got - ref) > 2e-12 * abs(ref):
                bad.append((name, x, got, ref))
    assert not bad, bad


def test_small_box_cox_lambda_is_accurate():
    """Near lambda log x = 0 (the series branch) and beyond: (log x)^2 exprel'(lambda log x)."""
    x = np.array([0.5, 3.0])
    for lam in (1e-9, -3e-5, 4e-3, 0.02, -0.7):
        (_, gl) = zymo.gradient(Reverse, boxcox_l, x, np.full(2, lam))
        L = np.log(x)
        ref = L * L * _exprel_d(lam * L)
        np.testing.assert_allclose(gl, ref, rtol=1e-13)


def test_kinks_follow_the_docstrings():
    for mode in (Reverse, Forward):
        # huber at |r| = delta: C^1, the quadratic side
        gd, gr = zymo.gradient(mode, huber_sum, np.array([1.0, 1.0, 2.0]), np.array([1.0, -1.0, 3.0]))
        np.testing.assert_allclose(gr, [1.0, -1.0, 2.0])
        np.testing.assert_allclose(gd, [0.0, 0.0, 1.0])
        # i0e at 0: sign(0) = 0
        np.testing.assert_allclose(zymo.gradient(mode, i0e_sum, np.array([0.0, 1.0]))[0],
                                   [0.0, sp.i1e(1.0) - sp.i0e(1.0)], rtol=1e-12)
    with np.errstate(divide="ignore"):
        g = zymo.gradient(Reverse, entr_sum, np.array([0.0, 1.0]))[0]
    assert g[0] == np.inf and g[1] == -1.0


# -- parameters without a closed-form derivative ---------------------------------------------


def gammainc_a(a, x):
    return np.sum(sp.gammainc(a, x))


def zeta_xq(x, q):
    return np.sum(sp.zeta(x, q))


def stdtr_df(df, x):
    return np.sum(sp.stdtr(df, x))


def jv_order(v, x):
    return np.sum(sp.jv(v, x) * x)


@pytest.mark.parametrize("f, args, name", [(gammainc_a, (X, X), "'a'"), (stdtr_df, (X + 2.0, R), "'df'"),
                                           (jv_order, (X, X), "'v'")], ids=["gammainc", "stdtr", "jv"])
def test_parameters_without_derivative_are_refused_when_active(f, args, name):
    for mode in (Reverse, Forward):
        with pytest.raises(NotImplementedError, match=f"in its argument {name}"):
            zymo.gradient(mode, f, *[a.copy() for a in args])
    # constant there: the derivative in the other argument, against central differences
    check_grad(f, *[a.copy() for a in args], const=[0])


def test_zeta_in_q_matches_its_closed_form():
    x, q = 3.0, np.array([0.5, 1.0, 2.5])
    dq = np.zeros(3)
    zymo.autodiff(Reverse, zeta_xq, zymo.Active, Const(np.full(3, x)), Duplicated(q, dq))
    np.testing.assert_allclose(dq, -x * sp.zeta(x + 1.0, q), rtol=1e-12)


def riemann(x):
    return np.sum(sp.zeta(x))


def test_zeta_in_x_against_mpmath():
    """SciPy has no derivative of zeta in x: `_rt.zeta_ds` (Euler-Maclaurin; the functional
    equation for Riemann's below -0.5) against mpmath, in both modes."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    x, q = np.array([1.001, 1.5, 2.0, 3.7, 12.0]), np.array([0.05, 1.0, 2.5, 0.3, 40.0])
    ref = [float(mp.zeta(a, b, derivative=1)) for a, b in zip(x, q)]
    s = np.array([-20.5, -3.0, -0.6, -0.4, 0.0, 0.5, 0.999, 1.001, 2.0, 7.5])
    ref_r = [float(mp.zeta(a, 1, derivative=1)) for a in s]
    for mode in (Reverse, Forward):
        gx, gq = zymo.gradient(mode, zeta_xq, x, q)
        np.testing.assert_allclose(gx, ref, rtol=1e-12)
        np.testing.assert_allclose(gq, -x * sp.zeta(x + 1.0, q), rtol=1e-12)
        np.testing.assert_allclose(zymo.gradient(mode, riemann, s)[0], ref_r, rtol=1e-12)


def test_second_order_of_zeta_in_x_is_refused():
    with pytest.raises(zymo.UnsupportedCall, match="zeta_ds"):
        zymo.hessian(riemann, np.array([2.0, 3.0]))


# -- second order ----------------------------------------------------------------------------


def so_gamma(x):
    return np.sum(sp.gamma(x) * sp.loggamma(x) + sp.betaln(x, x[::-1]) + sp.polygamma(1, x) * x)


def so_normal(x):
    return np.sum(sp.ndtri(0.2 * x) + sp.log_ndtr(x) * sp.erfinv(0.3 * x) + sp.erfcx(x))


def so_bessel(x):
    return np.sum(sp.i1(x) * sp.j1(x) + sp.k1e(x) + sp.y1(x) * sp.i0e(x) + sp.iv(1.5, x))


def so_misc(x):
    return np.sum(sp.exprel(x) * sp.huber(1.0, x) + sp.boxcox(x, x - 1.0) + sp.gammainc(2.0, x)
                  + sp.softplus(x) * sp.xlog1py(x, x) + sp.spence(x) + np.sinc(x))


def _fd_hessian(f, x, h=1e-5):
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h
        cols.append((zymo.gradient(Reverse, f, x + e)[0] - zymo.gradient(Reverse, f, x - e)[0]) / (2 * h))
    return np.stack(cols, axis=1)


@pytest.mark.slow
@pytest.mark.parametrize("f", [so_gamma, so_normal, so_bessel, so_misc], ids=lambda f: f.__name__)
def test_hessians_match_finite_differences_of_the_gradient(f):
    x = np.array([0.45, 0.9, 1.6, 2.2])
    H = zymo.hessian(f, x)
    ref = _fd_hessian(f, x)
    assert np.max(np.abs(ref)) > 0.05
    np.testing.assert_allclose(H, ref, rtol=1e-6, atol=1e-7 * np.max(np.abs(ref)))
    np.testing.assert_allclose(H, H.T, rtol=1e-9, atol=1e-12)


# every differentiable rule of rules/special.py and rules/special_bessel.py: the Hessian of sum(fn(a[, b])) in all its
# differentiable arguments (one vector v = (a, b)), against central differences of the gradient;
# arguments drawn from the rule's test domains, constant ones (orders, shape parameters) fixed
_CONST_FIRST = {"polygamma": "1", "expn": "2", "jv": "1.5", "yv": "1.5", "iv": "1.5", "kv": "1.5", "ive": "1.5",
                "kve": "1.5", "gammainc": "1.7", "gammaincc": "1.7", "gammaincinv": "1.7", "gammainccinv": "1.7",
                "zeta": "2.5", "betainc": "1.5, 2.5", "betaincinv": "1.5, 2.5", "stdtr": "3.5", "hyp1f1": "0.7, 1.4",
                "hyp2f1": "0.7, 1.4, 2.3"}


def _special_keys():
    from zymo.rules import special, special_bessel

    modules = (special.__name__, special_bessel.__name__)
    return sorted(k for k, r in REGISTRY.items() if r.__module__ in modules and not r.nondiff)


@pytest.mark.slow
@pytest.mark.parametrize("key", _special_keys())
def test_second_order_of_every_rule(key):
    from zymo import testing

    rule, short = REGISTRY[key], key.split(".")[-1]
    rng = np.random.default_rng(3)
    if short in _CONST_FIRST:
        src, shapes = f"np.sum(fn({_CONST_FIRST[short]}, x))", ((3,),)
    elif len(rule.diff_params()) == 2:
        src, shapes = "np.sum(fn(x[:3], x[3:]))", ((3,), (3,))
    else:
        src, shapes = "np.sum(fn(x))", ((3,),)
    v = np.concatenate(testing.draw_inputs(key, shapes, "float64", rng))
    f = testing.expr_factory(src, 1, "so_" + short)(rule.fn)
    H = zymo.hessian(f, v)
    ref = _fd_hessian(f, v)
    scale = max(np.max(np.abs(ref)), 1e-3)
    np.testing.assert_allclose(H, ref, rtol=1e-5, atol=1e-6 * scale, err_msg=key)


def so_digamma(x):
    return np.sum(sp.digamma(x) * x)


def test_hessian_through_digamma():
    x = np.array([0.45, 0.9, 1.6])
    np.testing.assert_allclose(zymo.hessian(so_digamma, x), _fd_hessian(so_digamma, x), rtol=1e-6)


# -- Numba -----------------------------------------------------------------------------------


def nb_sinc(x):
    return np.sum(np.sinc(x) * x)


def nb_sinc_number(x):
    return np.sinc(x) * x


def nb_gamma(x):
    return np.sum(sp.gamma(x) * x)


@pytest.fixture
def private_cache_dir(tmp_path):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZYMO_CACHE_DIR", str(tmp_path))
        yield


@pytest.mark.slow
def test_numba_compiles_sinc_and_falls_back_for_scipy(private_cache_dir):
    pytest.importorskip("numba")
    from zymo.codegen.numba.backend import ZymoNumbaError
    from zymo.errors import ZymoWarning

    x = np.array([0.0, 0.3, -1.2, 2.5])
    for mode in (Reverse, Forward):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback for np.sinc
            got = zymo.gradient(mode, nb_sinc, x, numba=True)[0]
        np.testing.assert_allclose(got, zymo.gradient(mode, nb_sinc, x, numba=False)[0], rtol=1e-12)
        for v in (0.0, 0.01, -0.7):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got = zymo.gradient(mode, nb_sinc_number, v, numba=True)[0]
            assert got == pytest.approx(zymo.gradient(mode, nb_sinc_number, v, numba=False)[0], rel=1e-13)
        with pytest.raises(ZymoNumbaError, match="Numba cannot compile nb_gamma") as info:
            zymo.gradient(mode, nb_gamma, x + 1.0, numba=True)
        assert "test_special.py" in str(info.value)
        with pytest.warns(ZymoWarning, match="Numba cannot compile nb_gamma"):
            got = zymo.gradient(mode, nb_gamma, x + 1.0, numba="prefer")[0]
        np.testing.assert_allclose(got, sp.gamma(x + 1.0) * (1.0 + (x + 1.0) * sp.digamma(x + 1.0)), rtol=1e-12)
