"""Run-time helpers of the `scipy.special` rules (`rules/special.py`), reached from generated
code as `_rt.<name>` (`zymo.runtime` re-exports its `__all__`).

Contract: `zeta_ds(s, q)` is the derivative of the Hurwitz zeta function in s (float64),
which SciPy does not provide (no tangent rule: second order in s is refused).
`special_no_derivative(key, param)` raises `NotImplementedError` naming the function
and the parameter. Rules whose derivative in a parameter has no closed form in functions zymo
can call (the order `v` of the Bessel functions, `a` of `gammainc`, the exponent `x` of `zeta`)
use it as that parameter's jvp/vjp: transforms emit it only when the parameter is active, so
a call with that argument constant (a literal, a `zymo.Const` argument, data the derivative
does not flow from) differentiates in the others, and an active one is refused when the
derivative program runs, never given a silent zero.
"""
from __future__ import annotations

import numpy as np

__all__ = ["special_no_derivative", "zeta_ds"]


def special_no_derivative(key: str, param: str):
    """Refuse the derivative of `key` in its parameter `param` (see the module docstring)."""
    raise NotImplementedError(
        f"zymo: the derivative of {key} in its argument {param!r} is not supported (no closed form "
        f"in functions zymo differentiates); pass {param} as a constant or zymo.Const, or write a "
        f"zymo.custom_rule (docs/rules.md, scipy.special)")


# B_2k / (2k)! for k = 1..8 (Bernoulli numbers over factorials): Euler-Maclaurin's corrections
_EM = (1 / 6 / 2, -1 / 30 / 24, 1 / 42 / 720, -1 / 30 / 40320, 5 / 66 / 3628800, -691 / 2730 / 479001600,
       7 / 6 / 87178291200, -3617 / 510 / 20922789888000)
_EM_TERMS = 16  # terms summed before the Euler-Maclaurin tail


def zeta_ds(s, q=None):
    """d/ds of the Hurwitz zeta function zeta(s, q), s > 1, q > 0, or of Riemann's (q None) for
    any real s != 1, to about 1e-13 relative (float64). Euler-Maclaurin (DLMF 25.11.5, 16 terms and 8
    Bernoulli corrections) differentiated in s; Riemann's at s < 0 through the functional
    equation zeta(s) = chi(s) zeta(1 - s) (DLMF 25.4.1) below -0.5, where the sum would cancel."""
    s = np.asarray(s, dtype=np.float64)
    if q is not None:
        out = _zeta_ds_em(s, np.asarray(q, dtype=np.float64))
        return out[()] if out.ndim == 0 else out
    import scipy.special as sp

    neg = s < -0.5
    r = np.where(neg, 1.0 - s, s)  # where the Euler-Maclaurin sum is used
    out = _zeta_ds_em(r, np.ones_like(r))
    if np.any(neg):
        sn = np.where(neg, s, -1.0)
        common = 2.0 ** sn * np.pi ** (sn - 1.0) * sp.gamma(1.0 - sn)
        chi = common * np.sin(0.5 * np.pi * sn)
        dchi = common * ((1.8378770664093453 - sp.digamma(1.0 - sn)) * np.sin(0.5 * np.pi * sn)
                         + 0.5 * np.pi * np.cos(0.5 * np.pi * sn))
        out = np.where(neg, dchi * sp.zeta(1.0 - sn) - chi * out, out)
    return out[()] if out.ndim == 0 else out


def _zeta_ds_em(s, q):
    s, q = np.broadcast_arrays(s, q)
    out = np.zeros(s.shape)
    for n in range(_EM_TERMS):
        out -= np.log(n + q) * (n + q) ** -s
    a = _EM_TERMS + q
    log_a = np.log(a)
    out += a ** (1.0 - s) * (-log_a / (s - 1.0) - 1.0 / (s - 1.0) ** 2) - 0.5 * log_a * a ** -s
    rising = s.copy()  # (s)_(2k-1) = s (s + 1) ... (s + 2k - 2) and its derivative in s
    drising = np.ones(s.shape)
    for k, c in enumerate(_EM, start=1):
        out += c * a ** (-s - 2 * k + 1) * (drising - log_a * rising)
        for j in (2 * k - 1, 2 * k):  # two more factors (s + j) for the next k
            drising = drising * (s + j) + rising
            rising = rising * (s + j)
    return out
