"""Facts about the runtime helpers, asked by the code generators that emit and rewrite their calls.

Contract: `facts(name)` is the `HelperFacts` of helper `zymo.runtime.<name>` (`_rt.<name>` in
generated code); a helper not listed below has the defaults (not pure, no shape-only argument,
a Numba twin). The flags:

- `pure`: the call writes nothing and returns a new value, an argument unchanged or a
  read-only view of one;
- `movable`: pure and a mere adjustment of shape, dtype or a number, which `codegen/fuse.py`
  substitutes into its single reader (other pure helpers stay where they are: substituting
  `norm_grad` makes second order's elementwise statements ones the Numba backend refuses);
- `product_vjp`: the adjoint of an operand of a matrix product (`dot`, `matmul`): pure, but
  kept as its own accumulation (`fuse.py`), which the Numba backend adds in place
  (`codegen/numba/rewrites.accumulating_products`);
- `loop_operand`: pure, with an array result that the Numba backend's elementwise intrinsics
  may compute once and read as an operand of their loops (`codegen/numba/ew_rewrite._opaque`);
  `as_shape`/`as_tangent` are not: that rewrite writes them into the loop as a cast;
- `shape_arg`: the position of the argument the helper reads only for its shape and dtype
  (for the transforms' "shape-only names"; `transform/reverse.py`'s `_SHAPE_ARGS` holds the same
  entries until it asks here);
- `python_only`: no Numba twin (`codegen/numba/twins/`): a Numba-compiled call fails at
  typing and the backend falls back to Python or refuses. `tests/test_runtime_twins.py`
  checks that every helper has a twin or this flag.

This module itself imports nothing of zymo (the package imports the helpers, NumPy only).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HelperFacts:
    """What the code generators may assume of one runtime helper (module contract)."""

    pure: bool = False
    movable: bool = False
    product_vjp: bool = False
    loop_operand: bool = False
    shape_arg: int | None = None
    python_only: bool = False


_PRODUCT_VJPS = frozenset({"dot_vjp_a", "dot_vjp_b", "matmul_vjp_a", "matmul_vjp_b"})

_LOOP_OPERANDS = frozenset({"unbroadcast", "expand_reduced", "clip_inside", "matmul_vjp_a", "matmul_vjp_b",
                            "norm_grad", "norm_grad_dx", "cholesky_jvp", "cholesky_vjp", "cholesky_vjp_dl"})

# (`sum_product`, a reduction the Python backend writes for `unbroadcast(g * x, number)`, and both
# backends for a quotient's adjoint of its number divisor, moves as that expression did)
_MOVABLE = frozenset({"unbroadcast", "expand_reduced", "as_tangent", "as_shape", "trip", "negate", "fdiv", "fpow",
                      "is_given",
                      "sum_product"})

# pure helpers (module contract): the movable ones, the product adjoints and the loop operands
_PURE = _MOVABLE | _PRODUCT_VJPS | _LOOP_OPERANDS

_SHAPE_ARGS = {"expand_reduced": 1, "unbroadcast": 1, "as_tangent": 1, "as_shape": 1, "reduced_count": 0}

# helpers without a Numba twin, by family (`zymo/runtime/<family>.py`)
_PYTHON_ONLY = frozenset({
    # core: split mode's list caches are typed lists under Numba (`rewrites.fresh_lists`)
    "reuse_list", "linspace_unit", "linspace_jvp", "linspace_vjp",
    # core: the caches a Python-level reverse program keeps between calls (`tape_take`)
    "tape_take", "tape_keep",
    # arrays: subscripts and index arithmetic computed in Python, and adjoints of functions
    # whose primal Numba does not compile (tile, repeat, inner, tensordot/einsum beyond views,
    # SciPy's convolutions)
    "broadcast_to", "tile_vjp", "repeat_vjp", "inner_vjp_a", "inner_vjp_b", "tensordot_subscripts",
    "einsum_expand", "einsum_is_view", "einsum_jvp", "einsum_vjp", "rollaxis_perm", "pad_index", "sp_convolve",
    "sp_correlate",
    # linalg: svd, lstsq and SciPy's factorizations
    "svd_u", "svd_s", "svd_vh", "svd_jvp", "svd_vjp", "lstsq_x", "lstsq_residuals", "lstsq_rank", "lstsq_sv",
    "lstsq_jvp", "lstsq_vjp", "expm_frechet", "triangle", "tri_solve_vjp_a", "cho_factor_c", "cho_factor_lower",
    "cho_factor_jvp", "cho_factor_vjp", "cho_solve", "cho_solve_jvp_c", "cho_solve_vjp_c", "lu_factor_lu",
    "lu_factor_piv", "lu_factor_jvp", "lu_factor_vjp", "lu_solve", "lu_solve_jvp_lu", "lu_solve_vjp_lu",
    "fill_diagonal",  # codegen/fills.py's diagonal fills, in the Python programs of "kernels" only
    # the guard, masks and triangular products of codegen/idioms.py's NumPy statements, in Python programs only
    "blas_ready", "tri_mask", "tri_dot", "tri_dot_add", "sym_add", "sym_set", "sym2_add", "product_copy", "dot_nt",
    # fft: Numba has no FFT
    "fit", "fft_vjp", "fftn_vjp", "rfft_vjp", "irfft_vjp",
    # sorting: put_along_axis and weighted histograms (Numba does not compile their primal)
    "along_index", "histogram_edges", "histogram_edges_jvp", "histogram_edges_vjp", "histogram_hist",
    "histogram_vjp_weights", "interp_zero_if_given", "put_along_axis", "put_along_axis_vjp_values",
    "stored_along_axis",
    # statistics: logsumexp, polyval/polyder and the adjoints of second order's rule tests
    "corrcoef_vjp_d", "corrcoef_vjp_t", "cov_vjp_tg", "cov_vjp_tx", "lse_vjp", "lse_vjp_d", "lse_vjp_t",
    "lse_weights", "polyder_coef", "polyder_coef_t", "polyval_vjp_p", "polyval_vjp_p_dx",
    # special: scipy.special
    "special_no_derivative", "zeta_ds",
    # second: the transposes (adjoints) that only the rule tests call
    "cholesky_vjp_tl", "norm_grad_tx", "cumsum_vjp_tg", "split_first_tg", "split_last_tg",
})

_DEFAULT = HelperFacts()

HELPERS: dict[str, HelperFacts] = {
    name: HelperFacts(pure=name in _PURE, movable=name in _MOVABLE, product_vjp=name in _PRODUCT_VJPS,
                      loop_operand=name in _LOOP_OPERANDS, shape_arg=_SHAPE_ARGS.get(name),
                      python_only=name in _PYTHON_ONLY)
    for name in _PURE | _SHAPE_ARGS.keys() | _PYTHON_ONLY
}


def facts(name: str) -> HelperFacts:
    """The facts of helper `_rt.<name>` (the defaults for one not listed)."""
    return HELPERS.get(name, _DEFAULT)


def is_pure(name: str) -> bool:
    return facts(name).pure


def is_movable(name: str) -> bool:
    return facts(name).movable


def is_product_vjp(name: str) -> bool:
    return facts(name).product_vjp


def is_loop_operand(name: str) -> bool:
    return facts(name).loop_operand


def shape_arg(name: str) -> int | None:
    return facts(name).shape_arg
