"""`_rt.sym_add`: a triangle-masked add of a symmetric product (syrk's `x @ x.T`, syr2k's
`x @ y.T + y @ x.T`) through BLAS's `?syrk`/`?syr2k`, as `codegen/triangles.py` writes it for
`codegen/idioms.py`'s masked updates. Each call against the NumPy statement it stands for:
the triangle to rounding, every element off it bit for bit; the fallbacks bit for bit."""
from __future__ import annotations

import ast

import numpy as np
import pytest

from zymo import runtime as _rt
from zymo.codegen.triangles import _symmetric


def _statement(t, m, alpha, x, y):
    p = alpha * (x @ x.T) if y is None else alpha * (x @ y.T) + alpha * (y @ x.T)
    np.add(t, p, out=t, where=m)


def _odd(rng, n):
    """A target whose off-triangle elements hold values a write would change."""
    t = rng.random((n, n))
    t[0, -1], t[-1, 0] = -0.0, np.nan
    return t


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("two", [False, True])
@pytest.mark.parametrize("layout", ["C", "F", "T", "strided"])
@pytest.mark.parametrize("alpha", [1.0, -1.5, np.float64(0.25), 3])
def test_sym_add_is_the_masked_statement(lower, order, two, layout, alpha):
    rng = np.random.default_rng(0)
    n, k = 7, 5

    def operand():
        a = rng.standard_normal((n, 2 * k) if layout == "strided" else (k, n) if layout == "T" else (n, k))
        return a[:, ::2] if layout == "strided" else a.T if layout == "T" else np.asarray(a, order=layout)
    x = operand()
    y = operand() if two else None
    m = _rt.tri_mask(n) if lower else _rt.tri_mask(n).T
    t = np.asarray(_odd(rng, n), order=order)
    want = t.copy(order="K")
    _statement(want, m, alpha, x, y)
    _rt.sym_add(t, m, lower, alpha, x, y)
    inside = m
    np.testing.assert_allclose(t[inside], want[inside], rtol=1e-13, atol=1e-13)
    assert np.array_equal(t[~inside].view(np.int64), want[~inside].view(np.int64))  # not written at all


@pytest.mark.parametrize("case", ["alpha0", "alpha_inf", "alpha_nan", "mask_copy", "strided_target", "float32_mix",
                                  "empty"])
def test_sym_add_falls_back_to_the_statement(case, monkeypatch):
    rng = np.random.default_rng(1)
    n, k = 6, 4
    x = rng.standard_normal((n, k))
    x[1, 2] = np.inf
    t = _odd(rng, n)
    m = _rt.tri_mask(n)
    alpha = {"alpha0": 0.0, "alpha_inf": np.inf, "alpha_nan": np.nan}.get(case, 1.5)
    if case == "mask_copy":
        m = m.copy()
    if case == "strided_target":
        t = _odd(rng, 2 * n)[::2, ::2]
    if case == "float32_mix":
        x = x.astype(np.float32)
    if case == "empty":
        x = x[:, :0]
    from zymo.runtime import linalg
    assert linalg._syrk(t, m, True, alpha, x, None) is None
    want = t.copy()
    with np.errstate(invalid="ignore", over="ignore"):
        _statement(want, m, alpha, x, None)
        _rt.sym_add(t, m, True, alpha, x, None)
    assert np.array_equal(t.view(np.int64), want.view(np.int64))  # the statement itself


def test_infinities_land_where_the_statement_puts_them():
    rng = np.random.default_rng(2)
    n, k = 6, 4
    x = rng.standard_normal((n, k))
    x[2, 1] = np.inf
    for lower in (True, False):
        m = _rt.tri_mask(n) if lower else _rt.tri_mask(n).T
        t, want = np.zeros((n, n)), np.zeros((n, n))
        with np.errstate(invalid="ignore"):
            _statement(want, m, 1.0, x, None)
            _rt.sym_add(t, m, lower, 1.0, x, None)
        assert np.array_equal(np.isnan(t), np.isnan(want)) and np.array_equal(np.isinf(t), np.isinf(want))
        assert np.any(np.isinf(want))


@pytest.mark.parametrize("src, args", [
    ("data[:n, :m].T @ data[:n, :m]", ["1.0", "data[:n, :m].T"]),
    ("alpha * (A[:n, :k] @ A[:n, :k].T)", ["alpha", "A[:n, :k]"]),
    ("alpha * (B[:n, :k] @ A[:n, :k].T) + alpha * (A[:n, :k] @ B[:n, :k].T)", ["alpha", "B[:n, :k]", "A[:n, :k]"]),
])
def test_the_symmetric_products_recognized(src, args):
    got = _symmetric(ast.parse(src, mode="eval").body)
    assert got is not None and [ast.unparse(a) for a in got] == args


@pytest.mark.parametrize("src", [
    "A[:n, :k] @ B[:n, :k].T",  # not symmetric
    "alpha * (B @ A.T) + beta * (A @ B.T)",  # two coefficients
    "A[0, 0] * (A @ A.T)",  # a coefficient reading an array
    "alpha * (B @ A.T) - alpha * (A @ B.T)",
])
def test_other_products_are_not(src):
    assert _symmetric(ast.parse(src, mode="eval").body) is None


@pytest.mark.parametrize("alpha", [np.float64(1e40), np.float64(1e-50), 1e-300, 1e40])
def test_float32_targets_take_blas_only_for_alphas_float32_keeps(alpha):
    # the statement widens a NumPy float64 alpha (its product in float64) and rounds a Python
    # float to float32 (to 0 or inf here), where ?syrk would skip or overflow: the statement runs
    from zymo.runtime import linalg
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    x[0, 0] = np.inf
    t = rng.random((4, 4)).astype(np.float32)
    m = _rt.tri_mask(4)
    assert linalg._syrk(t, m, True, alpha, x, None) is None
    want = t.copy()
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        _statement(want, m, alpha, x, None)
        _rt.sym_add(t, m, True, alpha, x, None)
    assert np.array_equal(t.view(np.int32), want.view(np.int32))
    assert linalg._syrk(t, m, True, 1.5, x, None) is not None  # a Python float float32 holds: BLAS


def test_an_infinite_coefficient_runs_the_loops():
    # `alpha * sum(terms)` is the loops' `sum(alpha * term)` only for a finite alpha: inf times
    # terms of both signs is nan, times their sum an infinity
    import zymo
    from zymo import Active, Duplicated, Reverse

    def syrk_like(alpha, C, A):
        n, m = A.shape
        for i in range(n):
            for k in range(m):
                for j in range(i + 1):
                    C[i, j] += alpha * A[i, k] * A[j, k]
        return np.sum(C * C)

    A = np.array([[1.0, -2.0], [3.0, 1.0]])
    code = zymo.generated_code(Reverse, syrk_like, Active, 1.0, Duplicated(np.zeros((2, 2)), np.zeros((2, 2))),
                               Duplicated(A, np.zeros_like(A)), numba="kernels")
    assert "np.isfinite(alpha)" in code
    outs = []
    for numba in ("kernels", False):
        C = np.zeros((2, 2))
        with np.errstate(invalid="ignore"):
            zymo.autodiff(Reverse, syrk_like, Active, np.inf, Duplicated(C, np.zeros((2, 2))),
                          Duplicated(A.copy(), np.zeros_like(A)), numba=numba)
        outs.append(C)
    assert np.isnan(outs[1][1, 0]) and np.array_equal(outs[0], outs[1], equal_nan=True)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("two", [False, True])
@pytest.mark.parametrize("beta", [0.5, -2, np.float64(3.0)])
def test_a_scaled_target_is_blas_beta(lower, order, two, beta):
    """`sym_add(..., beta=b)` for `triangles._pairs`' `_tri_ops.scale(t, b, m); sym_add(t, m, ...)`:
    BLAS scales the triangle alone, as the masked multiply does."""
    from zymo.runtime import linalg
    rng = np.random.default_rng(4)
    n, k = 7, 3
    x, y = rng.standard_normal((n, k)), (rng.standard_normal((n, k)) if two else None)
    m = _rt.tri_mask(n) if lower else _rt.tri_mask(n).T
    t = np.asarray(_odd(rng, n), order=order)
    want = t.copy(order="K")
    np.multiply(want, beta, out=want, where=m)
    _statement(want, m, -1.5, x, y)
    assert linalg._syrk(t, m, lower, -1.5, x, y) is not None and linalg._blas_scalar(t.dtype, beta)
    _rt.sym_add(t, m, lower, -1.5, x, y, beta=beta)
    np.testing.assert_allclose(t[m], want[m], rtol=1e-13, atol=1e-13)
    assert np.array_equal(t[~m].view(np.int64), want[~m].view(np.int64))


@pytest.mark.parametrize("beta", [0.0, np.inf, np.nan, 1e-50])
def test_betas_blas_would_treat_apart_run_the_statements(beta):
    # BLAS zeroes C for beta 0 (where `0 * inf` is nan); a float32 target with a NumPy float64
    # beta would be multiplied in float64 by the statement
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 2))
    t = _odd(rng, 5)
    t[3, 1] = np.inf
    m = _rt.tri_mask(5)
    want = t.copy()
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        np.multiply(want, beta, out=want, where=m)
        _statement(want, m, 1.0, x, None)
        _rt.sym_add(t, m, True, 1.0, x, None, beta=beta)
    assert np.array_equal(t.view(np.int64), want.view(np.int64))
    t32, x32 = t.astype(np.float32), x.astype(np.float32)
    want32 = t32.copy()
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        np.multiply(want32, np.float64(beta), out=want32, where=m)
        _statement(want32, m, 1.0, x32, None)
        _rt.sym_add(t32, m, True, 1.0, x32, None, beta=np.float64(beta))
    assert np.array_equal(t32.view(np.int32), want32.view(np.int32))


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("two", [False, True])
@pytest.mark.parametrize("alpha", [1.0, 0.0])
def test_sym_set_is_a_zero_fill_then_the_add(lower, two, alpha):
    """`sym_set` for `_tri_ops.fill(t, 0.0, m); sym_add(t, m, ...)`: a NaN in the triangle goes
    (BLAS's beta 0 does not read it), the other half is not written; alpha 0 runs the statements."""
    rng = np.random.default_rng(6)
    n, k = 6, 4
    x, y = rng.standard_normal((n, k)), (rng.standard_normal((n, k)) if two else None)
    m = _rt.tri_mask(n) if lower else _rt.tri_mask(n).T
    t = _odd(rng, n)
    t[m] = np.nan
    want = t.copy()
    np.copyto(want, 0.0, where=m)
    _statement(want, m, alpha, x, y)
    _rt.sym_set(t, m, lower, alpha, x, y)
    assert not np.isnan(t[m]).any()
    np.testing.assert_allclose(t[m], want[m], rtol=1e-13, atol=1e-13)
    assert np.array_equal(t[~m].view(np.int64), want[~m].view(np.int64))
    if alpha == 0.0:
        assert np.array_equal(t.view(np.int64), want.view(np.int64))
