"""Derivative rules, stored as data (see `registry.py` for the contract)."""
import numpy as _np

from . import (  # noqa: F401  (importing a module registers its rules)
    arith,
    arrays,
    complex,
    custom,
    fft,
    indexing,
    internal,
    linalg,
    lists,
    npmisc,
    pymath,
    reductions,
    runtime_rules,
    shape,
    sorting,
    statistics,
    ufuncs,
)
from .registry import LAZY, LAZY_IDS, REGISTRY, Rule, load_all, lookup, rule_for_callable

# SciPy's rules register when a callable without a rule is met and SciPy is in use (SciPy is
# slow to import: docs/decisions/0007)
LAZY["scipy.signal"] = ("zymo.rules.scipy_signal",)
LAZY["scipy.linalg"] = LAZY["scipy.special"] = ("zymo.rules.scipy_base", "zymo.rules.special",
                                                  "zymo.rules.special_bessel")
LAZY_IDS[id(_np.sinc)] = LAZY_IDS[id(_np.i0)] = "zymo.rules.special"  # rules/special.py (np.i0's needs SciPy)

__all__ = ["REGISTRY", "Rule", "load_all", "lookup", "rule_for_callable"]
