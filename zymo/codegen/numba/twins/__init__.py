"""The `_rt` namespace of Numba-compiled derivative code: the runtime helpers' compiled twins.

Contract: importing this package registers the Numba twin of every runtime helper that has
one, one module per runtime family (`core`, `arrays`, `indexing`, `linalg`, `second`,
`sorting`, `statistics`, matching `zymo/runtime/<family>.py`), with `numba.extending.overload`
or `register_jitable` on the helper's own function object. Generated code that Numba compiles
imports this package as `_rt`: a name it defines itself is what compiled code calls instead of
the Python helper (the elementwise and inline intrinsics, `fdiv`, `span`, `grow`, the
accumulating product adjoints `acc_dot_vjp_a`, ..., `List` for split mode's list caches);
any other name is the Python helper of `zymo.runtime` (module `__getattr__`), whose twin
Numba finds by the function object. Helpers without a twin are declared Python-only in
`zymo.runtime.registry`; a call of one fails at Numba's typing and the backend reports it.
Layering: this package imports `zymo.runtime`, never the reverse.
"""
from __future__ import annotations

from typing import Any

from numba.typed import List

from zymo import runtime as _runtime

from ...index_checks import IndicesUnproven
from ..elementwise import acc_ew, acc_unbroadcast, ew_like, ew_new, ew_out, ew_set, ew_sum, fdiv
from ..ew_fused import ew_run
from ..inline import acc_extreme, empty, ew_max, ew_min, grow, grow_stack, nonneg, reuse_tape, span, zeros
from ..margins import in_range, index_check
from . import arrays, core, indexing, linalg, second, sorting, statistics
from .core import acc_dot_vjp_a, acc_dot_vjp_b, acc_matmul_vjp_a, acc_matmul_vjp_b, raise_shape_mismatch

FAMILIES = (core, arrays, indexing, linalg, second, sorting, statistics)

__all__ = [
    "FAMILIES", "IndicesUnproven", "List", "acc_dot_vjp_a", "acc_dot_vjp_b", "acc_matmul_vjp_a", "acc_matmul_vjp_b",
    "acc_ew", "acc_extreme", "acc_unbroadcast", "empty", "ew_like", "ew_max", "ew_min", "ew_new", "ew_out", "ew_run",
    "ew_set", "ew_sum", "fdiv", "grow", "grow_stack", "in_range", "index_check", "nonneg", "raise_shape_mismatch",
    "reuse_tape", "span", "zeros",
]


def __getattr__(name: str) -> Any:
    """`_rt.<helper>`: the Python helper of `zymo.runtime` (its twin is registered on it)."""
    return getattr(_runtime, name)
