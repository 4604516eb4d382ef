"""scipy.linalg factor/solve pairs: cho_factor -> cho_solve and lu_factor -> lu_solve.

The rules themselves are in the systematic cases (`tests/rules/test_rule_cases.py`); here the
compositions are checked against finite differences, the other mode (`check_grad`)
and `np.linalg.solve` as a second method: solving through a factorization has the
derivative of solving with the matrix, w.r.t. the matrix and the right-hand side.
"""
from __future__ import annotations

import numpy as np
import pytest

scipy_linalg = pytest.importorskip("scipy.linalg")

import zymo
from zymo import Forward, Reverse
from zymo.errors import ZymoError
from zymo.testing import check_grad

cho_factor, cho_solve = scipy_linalg.cho_factor, scipy_linalg.cho_solve
lu_factor, lu_solve = scipy_linalg.lu_factor, scipy_linalg.lu_solve


def spd(m):
    return m @ m.T + 3.0 * np.eye(m.shape[0])


def via_cholesky(m, b):
    return np.sum(cho_solve(cho_factor(spd(m)), b) * np.arange(1.0, 5.0))


def via_cholesky_lower(m, b):
    c, low = cho_factor(spd(m), lower=True)
    x = cho_solve((c, low), b)
    return np.sum(x * x)


def via_solve(m, b):
    return np.sum(np.linalg.solve(spd(m), b) * np.arange(1.0, 5.0))


def via_solve_sq(m, b):
    x = np.linalg.solve(spd(m), b)
    return np.sum(x * x)


def via_lu(a, b):
    lu, piv = lu_factor(a)
    x = lu_solve((lu, piv), b)
    return np.sum(x * np.sin(x))


def via_solve_lu(a, b):
    x = np.linalg.solve(a, b)
    return np.sum(x * np.sin(x))


def lu_twice(a, b):
    fac = lu_factor(a * 2.0)
    return np.sum(lu_solve(fac, lu_solve(fac, b)))


def args(shape_b=(4,)):
    r = np.random.default_rng(3)
    return r.normal(size=(4, 4)), r.normal(size=shape_b)


@pytest.mark.parametrize("f, ref, shape_b", [
    (via_cholesky, via_solve, (4,)), (via_cholesky_lower, via_solve_sq, (4,)),
    (via_cholesky_lower, via_solve_sq, (4, 2)), (via_lu, via_solve_lu, (4,)), (via_lu, via_solve_lu, (4, 2))])
def test_factor_then_solve_is_solve(f, ref, shape_b):
    m, b = args(shape_b)
    a = m + 4.0 * np.eye(4) if f is via_lu else m
    check_grad(f, a, b)
    for mode in (Reverse, Forward):
        got = zymo.gradient(mode, f, a, b)
        want = zymo.gradient(Reverse, ref, a, b)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
            assert np.max(np.abs(g)) > 0.01


def test_one_factor_two_solves():
    a, b = args()
    check_grad(lu_twice, a + 4.0 * np.eye(4), b)


def lu_transposed(a, b):
    return np.sum(lu_solve(lu_factor(a), b, trans=1))


def cho_untupled(c, b):
    return np.sum(cho_solve(c, b))


@pytest.mark.parametrize("f, what", [(lu_transposed, "trans != 0"), (cho_untupled, "as a tuple")])
def test_refused_with_the_line(f, what):
    a, b = args()
    with pytest.raises(ZymoError) as e:
        zymo.gradient(Reverse, f, a + 4.0 * np.eye(4), b)
    assert what in str(e.value) and "test_factor_solve.py" in str(e.value)
