"""Derivative rules, stored as data (see `registry.py` for the contract)."""
from . import (  # noqa: F401
               arith,
               arrays,
               custom,
               indexing,
               internal,
               linalg,
               lists,
               math_,
               numpy_,
               reductions,
               runtime_rules,
               scipy_,
               shape,  # (registers the rules)
               sorting,
               special,  # scipy.special and np.sinc/np.i0: rules/special.py
               statistics,
               ufuncs,
)
from .registry import REGISTRY, Rule, lookup, rule_for_callable

__all__ = ["REGISTRY", "Rule", "lookup", "rule_for_callable"]
