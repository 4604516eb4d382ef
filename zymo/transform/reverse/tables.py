"""Facts about names in generated code that reverse mode's dead-primal elimination reads (`dead.py`).

Facts about primitives are flags on their rules (`rules/registry.py`: `cheap`, `pure`,
`numbers_safe`, `array_safe`, `numba_safe`); what is left here is about the text the sweeps
write: NumPy functions that read only an argument's shape, and the attributes that do.
"""
from __future__ import annotations

# NumPy's functions that read only the shape and dtype of one argument (`dead.py`; zymo's own
# helpers say so in `runtime/registry.py`, `shape_arg`)
_NP_SHAPE_ARGS = {"zeros_like": 0, "empty_like": 0, "ones_like": 0, "shape": 0, "ndim": 0}
_SHAPE_ATTRS = frozenset({"shape", "ndim", "dtype", "size"})
