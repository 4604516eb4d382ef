"""Rules for the elementwise functions of `scipy.special` (and `np.sinc`, `np.i0`) that
`rules/scipy_.py` does not cover: gamma and beta functions, error functions and the normal
distribution, Bessel functions, exponential integrals, incomplete gamma and beta functions,
information-theory functions, Box-Cox transforms, trigonometry in degrees, binomial
coefficients, Owen's T, Student's t, the hypergeometric 1F1 and 2F1.

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
    _U = {"elementwise": True, "out": True}
    S = "_rt.sp_special."

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
