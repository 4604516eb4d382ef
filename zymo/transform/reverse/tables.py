"""Facts about primitives that reverse mode reads by name, kept together in one place.

These tables are to become flags on the rules (issue 34, item 2: pure, may raise, shape-only
arguments, cheap to recompute); until then every module of the package reads them here.
"""
from __future__ import annotations

# cheap arithmetic, recomputed by the adjoint sweep rather than cached (`plan.py`, `needs.py`)
_CHEAP = {"add", "sub", "mul", "truediv", "floordiv", "mod", "neg"}

# reductions that never raise on a float array (an empty one gives 0, 1 or nan): not max/min (`dead.py`)
_NEVER_RAISING_REDUCTIONS = frozenset({"numpy.sum", "numpy.mean", "numpy.prod"})

# rules whose call is an effect of its own (output), never left out of the forward sweep (`dead.py`)
_EFFECTS = frozenset({"builtins.print"})

# rules that never raise on numbers (ints are Python's or Numba's, floats IEEE's) (`dead.py`)
_SAFE_OPS = frozenset({"add", "sub", "mul", "neg", "pos", "lt", "le", "gt", "ge", "eq", "ne", "not",
                       "builtins.abs", "builtins.min", "builtins.max"})
# `math` functions that Numba computes without raising (nan or inf where Python raises) (`dead.py`)
_NUMBA_SAFE_MATH = frozenset({"math.exp", "math.log", "math.log1p", "math.expm1", "math.sqrt", "math.sin", "math.cos",
                              "math.tan", "math.tanh", "math.sinh", "math.cosh", "math.atan", "math.asin", "math.acos",
                              "math.atan2", "math.hypot", "math.fabs", "math.pow", "math.log10", "math.log2"})

# zymo's helpers and NumPy's functions that read only the shape and dtype of one argument (`dead.py`)
_SHAPE_ARGS = {("_rt", "expand_reduced"): 1, ("_rt", "unbroadcast"): 1, ("_rt", "as_tangent"): 1,
               ("_rt", "as_shape"): 1, ("_rt", "reduced_count"): 0, ("np", "zeros_like"): 0,
               ("np", "empty_like"): 0, ("np", "ones_like"): 0, ("np", "shape"): 0, ("np", "ndim"): 0}
_SHAPE_ATTRS = frozenset({"shape", "ndim", "dtype", "size"})
