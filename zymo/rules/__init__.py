"""Derivative rules, stored as data (see `registry.py` for the contract)."""
from . import (  # noqa: F401  (importing a module registers its rules; special: scipy.special, np.sinc, np.i0)
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
    shape,
    sorting,
    special,
    statistics,
    ufuncs,
)
from .registry import LAZY, REGISTRY, Rule, load_all, lookup, rule_for_callable

LAZY["scipy.signal"] = "zymo.rules.scipy_signal"  # importing scipy.signal takes about a second

__all__ = ["REGISTRY", "Rule", "load_all", "lookup", "rule_for_callable"]
