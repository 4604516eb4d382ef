"""Run-time helpers of the `scipy.special` rules (`rules/special.py`), reached from generated
code as `_rt.<name>` (`runtime.py` imports this module's `__all__`).

Contract: `special_no_derivative(key, param)` raises `NotImplementedError` naming the function
and the parameter. Rules whose derivative in a parameter has no closed form in functions zymo
can call (the order `v` of the Bessel functions, `a` of `gammainc`, the exponent `x` of `zeta`)
use it as that parameter's jvp/vjp: transforms emit it only when the parameter is active, so
a call with that argument constant (a literal, a `zymo.Const` argument, data the derivative
does not flow from) differentiates in the others, and an active one is refused when the
derivative program runs, never given a silent zero.
"""
from __future__ import annotations

__all__ = ["special_no_derivative"]


def special_no_derivative(key: str, param: str):
    """Refuse the derivative of `key` in its parameter `param` (see the module docstring)."""
    raise NotImplementedError(
        f"zymo: the derivative of {key} in its argument {param!r} is not supported (no closed form "
        f"in functions zymo differentiates); pass {param} as a constant or zymo.Const, or write a "
        f"zymo.custom_rule (docs/rules.md, scipy.special)")
