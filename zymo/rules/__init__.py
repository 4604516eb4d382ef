"""Derivative rules, stored as data (see `registry.py` for the contract)."""
from . import (arith, arrays, custom, indexing, internal, linalg, lists, math_, numpy_, reductions, runtime_rules, scipy_,  # noqa: F401
               sorting, statistics,
               shape, ufuncs)  # (registers the rules)
from . import special  # noqa: F401  (scipy.special and np.sinc/np.i0: rules/special.py)
from . import complex_, fft  # noqa: F401  (after ufuncs: np.abs and np.conj keep their real rules' keys)
from .registry import LAZY, REGISTRY, Rule, load_all, lookup, rule_for_callable

LAZY["scipy.signal"] = "zymo.rules.scipy_signal"  # importing scipy.signal takes about a second

__all__ = ["REGISTRY", "Rule", "load_all", "lookup", "rule_for_callable"]
