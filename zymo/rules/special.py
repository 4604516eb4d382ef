"""Rules for the elementwise functions of `scipy.special` (and `np.sinc`, `np.i0`) that
`rules/scipy_base.py` does not cover: gamma and beta functions, error functions and the normal
distribution, elementary functions SciPy computes accurately, trigonometry in degrees,
information-theory functions and losses. Bessel functions, exponential integrals, incomplete
gamma and beta functions, Box-Cox transforms, binomial coefficients, Owen's T, Student's t,
the hypergeometric 1F1 and 2F1 are in `rules/special_bessel.py`, under the same contract.

Contract:
- One `Rule` per function, keyed `scipy.special.<name>` (`numpy.sinc`, `numpy.i0` for
  NumPy's), `elementwise` (operands broadcast; adjoints are summed back), `out=True` for
  SciPy's ufuncs. Generated code calls SciPy as `_rt.sp_special.<name>`. Without SciPy only
  `np.sinc` registers (`np.i0`'s derivative is SciPy's `i1`).
- Each derivative is a closed form from the DLMF (https://dlmf.nist.gov, section in the
  rule's docstring), written with NumPy and `scipy.special` functions that have rules
  themselves, so second order (`zymo.hvp`, `zymo.hessian`) differentiates them too.
  Removable singularities are evaluated at their limits (`np.sinc` and `exprel` at 0,
  `spence` at 1, Box-Cox at lambda = 0) without dividing 0 by 0; edge conventions are in
  each rule's docstring.
- A parameter with no closed-form derivative (a Bessel order `v`, `a` of `gammainc`, `a`
  and `b` of `betainc`, `df` of `stdtr`, the parameters of
  `hyp1f1`/`hyp2f1`) calls `_rt.special_no_derivative`,
  which raises `NotImplementedError` when the derivative program runs with that argument
  active (never a silent zero); constant there, the rule differentiates in the others.
  Integer orders (`polygamma`'s and `expn`'s `n`) have no derivative (they are integers).
- Tangents have the result's dtype: where SciPy picks a float64 loop for a Python float
  beside a float32 array (`gammainc(1.7, x)`) or a float32 one (`betainc`), the jvp casts
  (`.astype(np.result_type(ans))`). Adjoints are not cast: second order parses the vjp
  bodies, and the frontend has no `astype`.
- `domains` (one `(lo, hi[, signed])` per argument) says where `zymo.testing` draws each
  argument for the rule's automatic cases: where the function is smooth. `cases` adds the
  calls with a constant argument (orders, shape parameters).
- Under Numba the SciPy functions do not compile (Numba has no `scipy.special` without
  numba-scipy): the default policy falls back to the Python backend with a warning and
  `numba=True` raises `ZymoNumbaError` at the user's line. `np.sinc` compiles.
"""
from __future__ import annotations

import numpy as np

from .. import runtime as _rt
from .registry import Rule

try:
    import scipy.special as _sp
except ImportError:  # pragma: no cover - SciPy is optional
    _sp = None

_E = {"elementwise": True}
_U = {"elementwise": True, "out": True}  # SciPy's ufuncs
S = "_rt.sp_special."  # how generated code names scipy.special
_POS = (0.3, 3.0)
_ANY = (-2.0, 2.0)


# -- NumPy's (SciPy re-exports np.sinc as scipy.special.sinc where it has one) ------------------

class sinc(Rule, key="numpy.sinc", fn=np.sinc, **_E):
    """sin(pi x) / (pi x): the derivative (cos(pi x) - sinc(x)) / x, its Taylor series
    (-pi^2 x / 3 + ...) where |x| < 0.03 (no cancellation; 0 at x = 0, and the series' own
    derivative -pi^2 / 3 there for second order)."""
    domains = (_ANY,)
    def jvp_x(t, ans, x):
        return t * np.where(np.abs(x) < 0.03, x * (-3.289868133696453 + x * x * (3.246969701133414 + x * x * (
            -1.144510944732505 + x * x * (0.20918278254123832 - 0.023460810354558225 * x * x)))),
            (np.cos(np.pi * x) - ans) / (x + (x == 0)))
    def vjp_x(g, ans, x):
        return g * np.where(np.abs(x) < 0.03, x * (-3.289868133696453 + x * x * (3.246969701133414 + x * x * (
            -1.144510944732505 + x * x * (0.20918278254123832 - 0.023460810354558225 * x * x)))),
            (np.cos(np.pi * x) - ans) / (x + (x == 0)))


if _sp is not None:
    class i0_np(Rule, key="numpy.i0", fn=np.i0, **_E):
        """Modified Bessel function I0 (NumPy's): I0' = I1 (DLMF 10.29.3)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x): return t * _rt.sp_special.i1(x)
        def vjp_x(g, ans, x): return g * _rt.sp_special.i1(x)


def _refused_first(first: str, many: str = "y * 0.5 + 0.25") -> tuple:
    """Cases of `fn(c, x)` with the first argument constant: scalars, arrays, and `many` (an
    expression of an int array y, so that it carries no derivative) broadcast against x."""
    return ((f"fn({first}, x)", ((),)), (f"fn({first}, x)", ((5,),)), (f"fn({first}, x) * x", ((3, 4),)),
            (f"fn({many}, x)", ((3, 4), ("int", (4,), 0, 5))))


if _sp is not None:
    # -- gamma and beta functions (DLMF 5) ---------------------------------------------------

    class gamma(Rule, key="scipy.special.gamma", fn=_sp.gamma, call=S + "gamma", **_U):
        """Gamma' = Gamma psi (DLMF 5.2.2); infinite at the poles (non-positive integers)."""
        domains = (_POS,)
        def jvp_x(t, ans, x): return t * ans * _rt.sp_special.digamma(x)
        def vjp_x(g, ans, x): return g * ans * _rt.sp_special.digamma(x)

    class loggamma(Rule, key="scipy.special.loggamma", fn=_sp.loggamma, call=S + "loggamma", **_U):
        """log Gamma of a real x > 0: psi(x) (DLMF 5.2.2). SciPy gives nan for real x < 0."""
        domains = (_POS,)
        def jvp_x(t, ans, x): return t * _rt.sp_special.digamma(x)
        def vjp_x(g, ans, x): return g * _rt.sp_special.digamma(x)

    class rgamma(Rule, key="scipy.special.rgamma", fn=_sp.rgamma, call=S + "rgamma", **_U):
        """1 / Gamma: -psi / Gamma (nan at the non-positive integers, where rgamma is 0 and psi infinite)."""
        domains = (_POS,)
        def jvp_x(t, ans, x): return -t * ans * _rt.sp_special.digamma(x)
        def vjp_x(g, ans, x): return -g * ans * _rt.sp_special.digamma(x)

    class gammasgn(Rule, key="scipy.special.gammasgn", fn=_sp.gammasgn, call=S + "gammasgn", nondiff=True,
                   **_U):
        """The sign of Gamma: piecewise constant, derivative 0."""
        domains = (_POS,)

    class beta(Rule, key="scipy.special.beta", fn=_sp.beta, call=S + "beta", **_U):
        """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b): dB/da = B (psi(a) - psi(a + b)) (DLMF 5.12.1)."""
        domains = (_POS, _POS)
        def jvp_a(t, ans, a, b): return t * ans * (_rt.sp_special.digamma(a) - _rt.sp_special.digamma(a + b))
        def jvp_b(t, ans, a, b): return t * ans * (_rt.sp_special.digamma(b) - _rt.sp_special.digamma(a + b))
        def vjp_a(g, ans, a, b): return g * ans * (_rt.sp_special.digamma(a) - _rt.sp_special.digamma(a + b))
        def vjp_b(g, ans, a, b): return g * ans * (_rt.sp_special.digamma(b) - _rt.sp_special.digamma(a + b))

    class betaln(Rule, key="scipy.special.betaln", fn=_sp.betaln, call=S + "betaln", **_U):
        """log |B(a, b)|: psi(a) - psi(a + b) in a (DLMF 5.12.1)."""
        domains = (_POS, _POS)
        def jvp_a(t, ans, a, b): return t * (_rt.sp_special.digamma(a) - _rt.sp_special.digamma(a + b))
        def jvp_b(t, ans, a, b): return t * (_rt.sp_special.digamma(b) - _rt.sp_special.digamma(a + b))
        def vjp_a(g, ans, a, b): return g * (_rt.sp_special.digamma(a) - _rt.sp_special.digamma(a + b))
        def vjp_b(g, ans, a, b): return g * (_rt.sp_special.digamma(b) - _rt.sp_special.digamma(a + b))

    class poch(Rule, key="scipy.special.poch", fn=_sp.poch, call=S + "poch", **_U):
        """Pochhammer (z)_m = Gamma(z + m) / Gamma(z) (DLMF 5.2.5): in z (z)_m (psi(z + m) - psi(z)),
        in m (z)_m psi(z + m)."""
        domains = (_POS, _POS)
        def jvp_z(t, ans, z, m): return t * ans * (_rt.sp_special.digamma(z + m) - _rt.sp_special.digamma(z))
        def jvp_m(t, ans, z, m): return t * ans * _rt.sp_special.digamma(z + m)
        def vjp_z(g, ans, z, m): return g * ans * (_rt.sp_special.digamma(z + m) - _rt.sp_special.digamma(z))
        def vjp_m(g, ans, z, m): return g * ans * _rt.sp_special.digamma(z + m)

    class polygamma(Rule, key="scipy.special.polygamma", fn=_sp.polygamma, call=S + "polygamma", cases=(
            ("fn(1, x)", ((),)), ("fn(0, x)", ((5,),)), ("fn(2, x) * x", ((3, 4),)),
            ("fn(y, x)", ((3, 4), ("int", (4,), 0, 3)))), **_E):
        """psi^(n)(x): derivative psi^(n+1)(x) in x (DLMF 5.15.1); the order n is an integer (no
        derivative). SciPy computes it in float64 (also for float32 x) and returns arrays."""
        auto_cases = False
        domains = (_POS,)
        def jvp_x(t, ans, n, x): return t * _rt.sp_special.polygamma(n + 1, x)
        def vjp_x(g, ans, n, x): return g * _rt.sp_special.polygamma(n + 1, x)

    # -- error functions and the normal distribution (DLMF 7) --------------------------------

    class erfinv(Rule, key="scipy.special.erfinv", fn=_sp.erfinv, call=S + "erfinv", **_U):
        """Inverse of erf on (-1, 1): sqrt(pi) / 2 exp(erfinv(x)^2); infinite at +-1."""
        domains = ((-0.9, 0.9),)
        def jvp_x(t, ans, x): return t * 0.886226925452758 * np.exp(ans * ans)
        def vjp_x(g, ans, x): return g * 0.886226925452758 * np.exp(ans * ans)

    class erfcinv(Rule, key="scipy.special.erfcinv", fn=_sp.erfcinv, call=S + "erfcinv", **_U):
        """Inverse of erfc on (0, 2): -sqrt(pi) / 2 exp(erfcinv(x)^2); infinite at 0 and 2."""
        domains = ((0.1, 1.9),)
        def jvp_x(t, ans, x): return -t * 0.886226925452758 * np.exp(ans * ans)
        def vjp_x(g, ans, x): return -g * 0.886226925452758 * np.exp(ans * ans)

    class erfcx(Rule, key="scipy.special.erfcx", fn=_sp.erfcx, call=S + "erfcx", **_U):
        """exp(x^2) erfc(x): 2 x erfcx(x) - 2 / sqrt(pi) (DLMF 7.10.1, 7.2.3); where x > 20, where
        those terms cancel, the asymptotic series -1 / (sqrt(pi) x^2) (1 - 3 / (2 x^2) + ...)
        (from DLMF 7.12.1, exact to rounding there; evaluated at max(|x|, 20): no overflow where
        it is not taken)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x):
            return t * np.where(x > 20.0, -0.5641895835477563 / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x),
                20.0) * (1.0 - (1.5 - (3.75 - (13.125 - (59.0625 - (324.84375 - (2111.484375 - 15836.1328125 /
                np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) /
                np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) /
                np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) /
                np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) /
                np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)), 2.0 * x * ans - 1.1283791670955126)
        def vjp_x(g, ans, x):
            return g * np.where(x > 20.0, -0.5641895835477563 / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x),
                20.0) * (1.0 - (1.5 - (3.75 - (13.125 - (59.0625 - (324.84375 - (2111.484375 - 15836.1328125 /
                np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) /
                np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) /
                np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) /
                np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) /
                np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)), 2.0 * x * ans - 1.1283791670955126)

    class erfi(Rule, key="scipy.special.erfi", fn=_sp.erfi, call=S + "erfi", **_U):
        """-i erf(i x): 2 / sqrt(pi) exp(x^2) (DLMF 7.2.8)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x): return t * 1.1283791670955126 * np.exp(x * x)
        def vjp_x(g, ans, x): return g * 1.1283791670955126 * np.exp(x * x)

    class dawsn(Rule, key="scipy.special.dawsn", fn=_sp.dawsn, call=S + "dawsn", **_U):
        """Dawson's integral F: F' = 1 - 2 x F (DLMF 7.10.2); where |x| > 20, where those terms
        cancel, the asymptotic series -1 / (2 x^2) (1 + 3 / (2 x^2) + ...) (from DLMF 7.12.1)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x):
            return t * np.where(np.abs(x) > 20.0, -0.5 / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0) *
                (1.0 + (1.5 + (3.75 + (13.125 + (59.0625 + (324.84375 + (2111.484375 + 15836.1328125 / np.maximum(np.abs(x),
                20.0) / np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) /
                np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) /
                np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) /
                np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) /
                np.maximum(np.abs(x), 20.0)), 1.0 - 2.0 * x * ans)
        def vjp_x(g, ans, x):
            return g * np.where(np.abs(x) > 20.0, -0.5 / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0) *
                (1.0 + (1.5 + (3.75 + (13.125 + (59.0625 + (324.84375 + (2111.484375 + 15836.1328125 / np.maximum(np.abs(x),
                20.0) / np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) /
                np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) /
                np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) /
                np.maximum(np.abs(x), 20.0) / np.maximum(np.abs(x), 20.0)) / np.maximum(np.abs(x), 20.0) /
                np.maximum(np.abs(x), 20.0)), 1.0 - 2.0 * x * ans)

    class ndtr(Rule, key="scipy.special.ndtr", fn=_sp.ndtr, call=S + "ndtr", **_U):
        """Standard normal CDF: its density exp(-x^2 / 2) / sqrt(2 pi)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x): return t * 0.3989422804014327 * np.exp(-0.5 * x * x)
        def vjp_x(g, ans, x): return g * 0.3989422804014327 * np.exp(-0.5 * x * x)

    class ndtri(Rule, key="scipy.special.ndtri", fn=_sp.ndtri, call=S + "ndtri", **_U):
        """Inverse of ndtr on (0, 1): sqrt(2 pi) exp(ndtri(x)^2 / 2); infinite at 0 and 1."""
        domains = ((0.05, 0.95),)
        def jvp_x(t, ans, x): return t * 2.5066282746310002 * np.exp(0.5 * ans * ans)
        def vjp_x(g, ans, x): return g * 2.5066282746310002 * np.exp(0.5 * ans * ans)

    class log_ndtr(Rule, key="scipy.special.log_ndtr", fn=_sp.log_ndtr, call=S + "log_ndtr", **_U):
        """log ndtr: density / ndtr, as exp(-x^2 / 2 - log_ndtr(x)) / sqrt(2 pi) (no underflow of
        ndtr in the far left tail, where it is about -x)."""
        domains = ((-4.0, 3.0),)
        def jvp_x(t, ans, x): return t * 0.3989422804014327 * np.exp(-0.5 * x * x - ans)
        def vjp_x(g, ans, x): return g * 0.3989422804014327 * np.exp(-0.5 * x * x - ans)

    class log_expit(Rule, key="scipy.special.log_expit", fn=_sp.log_expit, call=S + "log_expit", **_U):
        """log(expit(x)): expit(-x)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x): return t * _rt.sp_special.expit(-x)
        def vjp_x(g, ans, x): return g * _rt.sp_special.expit(-x)

    if hasattr(_sp, "softplus"):
        class softplus(Rule, key="scipy.special.softplus", fn=_sp.softplus, call=S + "softplus", **_E):
            """log(1 + exp(x)): expit(x). SciPy's keyword arguments (`out=`, ...) are not taken."""
            domains = (_ANY,)
            def jvp_x(t, ans, x): return t * _rt.sp_special.expit(x)
            def vjp_x(g, ans, x): return g * _rt.sp_special.expit(x)

    # -- elementary functions SciPy computes accurately --------------------------------------

    class expm1(Rule, key="scipy.special.expm1", fn=_sp.expm1, call=S + "expm1", **_U):
        """exp(x) - 1: exp(x) (not ans + 1, which cancels for x << 0)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x): return t * np.exp(x)
        def vjp_x(g, ans, x): return g * np.exp(x)

    class log1p(Rule, key="scipy.special.log1p", fn=_sp.log1p, call=S + "log1p", **_U):
        """log(1 + x): 1 / (1 + x), infinite at -1."""
        domains = ((-0.5, 2.0),)
        def jvp_x(t, ans, x): return t / (1.0 + x)
        def vjp_x(g, ans, x): return g / (1.0 + x)

    class exp2(Rule, key="scipy.special.exp2", fn=_sp.exp2, call=S + "exp2", **_U):
        """2^x: 2^x log 2."""
        domains = (_ANY,)
        def jvp_x(t, ans, x): return t * ans * 0.6931471805599453
        def vjp_x(g, ans, x): return g * ans * 0.6931471805599453

    class exp10(Rule, key="scipy.special.exp10", fn=_sp.exp10, call=S + "exp10", **_U):
        """10^x: 10^x log 10."""
        domains = ((-1.5, 1.5),)
        def jvp_x(t, ans, x): return t * ans * 2.302585092994046
        def vjp_x(g, ans, x): return g * ans * 2.302585092994046

    class cbrt(Rule, key="scipy.special.cbrt", fn=_sp.cbrt, call=S + "cbrt", **_U):
        """Real cube root: 1 / (3 cbrt(x)^2), infinite at 0."""
        domains = ((0.3, 2.0, True),)
        def jvp_x(t, ans, x): return t / (3.0 * ans * ans)
        def vjp_x(g, ans, x): return g / (3.0 * ans * ans)

    class exprel(Rule, key="scipy.special.exprel", fn=_sp.exprel, call=S + "exprel", **_U):
        """(exp(x) - 1) / x: (exp(x) - exprel(x)) / x, its Taylor series (1/2 + x/3 + ...) where
        |x| < 0.01 (no cancellation; 1/2 at 0)."""
        domains = (_ANY,)
        def jvp_x(t, ans, x):
            return t * np.where(np.abs(x) < 0.01, 0.5 + x * (1 / 3 + x * (1 / 8 + x * (1 / 30 + x * (1 / 144 + x / 840)))),
                                (np.exp(x) - ans) / (x + (x == 0)))
        def vjp_x(g, ans, x):
            return g * np.where(np.abs(x) < 0.01, 0.5 + x * (1 / 3 + x * (1 / 8 + x * (1 / 30 + x * (1 / 144 + x / 840)))),
                                (np.exp(x) - ans) / (x + (x == 0)))

    class xlog1py(Rule, key="scipy.special.xlog1py", fn=_sp.xlog1py, call=S + "xlog1py", **_U):
        """x log(1 + y), 0 where x == 0 (as xlogy): log1p(y) in x, x / (1 + y) in y."""
        domains = ((-0.5, 2.0), (-0.5, 2.0))  # x too: cases call fn(x, x)
        def jvp_x(t, ans, x, y): return t * np.log1p(y)
        def jvp_y(t, ans, x, y): return t * x / (1.0 + y)
        def vjp_x(g, ans, x, y): return g * np.log1p(y)
        def vjp_y(g, ans, x, y): return g * x / (1.0 + y)

    class sindg(Rule, key="scipy.special.sindg", fn=_sp.sindg, call=S + "sindg", **_U):
        """Sine of x degrees: pi / 180 cosdg(x)."""
        domains = ((-200.0, 200.0),)
        def jvp_x(t, ans, x): return t * 0.017453292519943295 * _rt.sp_special.cosdg(x)
        def vjp_x(g, ans, x): return g * 0.017453292519943295 * _rt.sp_special.cosdg(x)

    class cosdg(Rule, key="scipy.special.cosdg", fn=_sp.cosdg, call=S + "cosdg", **_U):
        """Cosine of x degrees: -pi / 180 sindg(x)."""
        domains = ((-200.0, 200.0),)
        def jvp_x(t, ans, x): return -t * 0.017453292519943295 * _rt.sp_special.sindg(x)
        def vjp_x(g, ans, x): return -g * 0.017453292519943295 * _rt.sp_special.sindg(x)

    class tandg(Rule, key="scipy.special.tandg", fn=_sp.tandg, call=S + "tandg", **_U):
        """Tangent of x degrees: pi / 180 (1 + tandg(x)^2); infinite at the poles (90 + 180 k)."""
        domains = ((-60.0, 60.0),)
        def jvp_x(t, ans, x): return t * 0.017453292519943295 * (1.0 + ans * ans)
        def vjp_x(g, ans, x): return g * 0.017453292519943295 * (1.0 + ans * ans)

    class cotdg(Rule, key="scipy.special.cotdg", fn=_sp.cotdg, call=S + "cotdg", **_U):
        """Cotangent of x degrees: -pi / 180 (1 + cotdg(x)^2); infinite at the poles (180 k)."""
        domains = ((20.0, 160.0),)
        def jvp_x(t, ans, x): return -t * 0.017453292519943295 * (1.0 + ans * ans)
        def vjp_x(g, ans, x): return -g * 0.017453292519943295 * (1.0 + ans * ans)

    class round_(Rule, key="scipy.special.round", fn=_sp.round, call=S + "round", nondiff=True, **_U):
        """Rounding to the nearest integer: derivative 0."""
        domains = ((-2.5, 2.5),)

    # -- information theory and losses --------------------------------------------------------

    class entr(Rule, key="scipy.special.entr", fn=_sp.entr, call=S + "entr", **_U):
        """-x log x for x > 0 (0 at 0, -inf below): -(log x + 1). At x = 0 that is +inf (the
        one-sided limit); below 0, nan."""
        domains = (_POS,)
        def jvp_x(t, ans, x): return -t * (np.log(x) + 1.0)
        def vjp_x(g, ans, x): return -g * (np.log(x) + 1.0)

    class rel_entr(Rule, key="scipy.special.rel_entr", fn=_sp.rel_entr, call=S + "rel_entr", **_U):
        """x log(x / y) for x, y > 0: log(x / y) + 1 in x, -x / y in y. Where SciPy defines it by
        convention (0 at x = 0, inf outside the domain) the formulas give -inf / nan in x, 0 in y
        at x = 0."""
        domains = (_POS, _POS)
        def jvp_x(t, ans, x, y): return t * (np.log(x / y) + 1.0)
        def jvp_y(t, ans, x, y): return -t * x / y
        def vjp_x(g, ans, x, y): return g * (np.log(x / y) + 1.0)
        def vjp_y(g, ans, x, y): return -g * x / y

    class kl_div(Rule, key="scipy.special.kl_div", fn=_sp.kl_div, call=S + "kl_div", **_U):
        """x log(x / y) - x + y for x, y > 0: log(x / y) in x, 1 - x / y in y (edge conventions as
        rel_entr)."""
        domains = (_POS, _POS)
        def jvp_x(t, ans, x, y): return t * np.log(x / y)
        def jvp_y(t, ans, x, y): return t * (1.0 - x / y)
        def vjp_x(g, ans, x, y): return g * np.log(x / y)
        def vjp_y(g, ans, x, y): return g * (1.0 - x / y)

    class huber(Rule, key="scipy.special.huber", fn=_sp.huber, call=S + "huber", cases=(
            ("fn(x, 0.5 * y)", ((), ())), ("fn(x, 0.5 * y)", ((5,), (5,))), ("fn(x, 0.5 * y)", ((3, 4), (4,))),
            ("fn(1.0, y) + fn(x, 0.0)", ((), ()))), **_U):
        """r^2 / 2 where |r| <= delta, delta (|r| - delta / 2) beyond (delta >= 0). It is C^1, so
        the kink |r| = delta (taken on the quadratic side) has one derivative: in r
        clip(r, -delta, delta), in delta 0 inside and |r| - delta beyond. delta < 0 (inf) has nan."""
        domains = ((1.0, 1.2), (1.4, 2.0, True))  # beyond the kink; `cases` put r inside
        def jvp_delta(t, ans, delta, r): return t * np.where(abs(r) <= delta, 0.0, abs(r) - delta)
        def jvp_r(t, ans, delta, r): return t * np.where(abs(r) <= delta, r, np.copysign(delta, r))
        def vjp_delta(g, ans, delta, r): return g * np.where(abs(r) <= delta, 0.0, abs(r) - delta)
        def vjp_r(g, ans, delta, r): return g * np.where(abs(r) <= delta, r, np.copysign(delta, r))

    class pseudo_huber(Rule, key="scipy.special.pseudo_huber", fn=_sp.pseudo_huber, call=S + "pseudo_huber",
                       **_U):
        """delta^2 (sqrt(1 + (r / delta)^2) - 1) for delta > 0: in r r / s, in delta 2 ans / delta -
        r^2 / (delta s), s = sqrt(1 + (r / delta)^2), written delta q^2 / (s (1 + s)^2) with
        q = (r / delta)^2 (no cancellation for |r| << delta). At delta = 0 (SciPy: 0) the
        derivative in delta is nan (the one-sided limit is |r|)."""
        domains = ((0.5, 2.0), _ANY)
        def jvp_delta(t, ans, delta, r):
            return t * delta * (r / delta) ** 4 / (np.sqrt(1.0 + (r / delta) ** 2) * (1.0 + np.sqrt(1.0 + (r / delta) ** 2)) ** 2)
        def jvp_r(t, ans, delta, r): return t * r / np.sqrt(1.0 + (r / delta) ** 2)
        def vjp_delta(g, ans, delta, r):
            return g * delta * (r / delta) ** 4 / (np.sqrt(1.0 + (r / delta) ** 2) * (1.0 + np.sqrt(1.0 + (r / delta) ** 2)) ** 2)
        def vjp_r(g, ans, delta, r): return g * r / np.sqrt(1.0 + (r / delta) ** 2)
