"""Facts about names in generated code that reverse mode's dead-primal elimination reads (`dead.py`).

Facts about primitives are flags on their rules (`rules/registry.py`: `cheap`, `pure`,
`numbers_safe`, `array_safe`, `numba_safe`); what is left here is about the text the sweeps
write: helpers and NumPy functions that read only an argument's shape, and the attributes that
do.
"""
from __future__ import annotations

# zymo's helpers and NumPy's functions that read only the shape and dtype of one argument (`dead.py`)
_SHAPE_ARGS = {("_rt", "expand_reduced"): 1, ("_rt", "unbroadcast"): 1, ("_rt", "as_tangent"): 1,
               ("_rt", "as_shape"): 1, ("_rt", "reduced_count"): 0, ("np", "zeros_like"): 0,
               ("np", "empty_like"): 0, ("np", "ones_like"): 0, ("np", "shape"): 0, ("np", "ndim"): 0}
_SHAPE_ATTRS = frozenset({"shape", "ndim", "dtype", "size"})
