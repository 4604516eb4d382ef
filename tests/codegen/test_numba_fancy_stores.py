"""Stores through an index array or a mask into rows of a matrix (`A[idx] = e`, `A[mask] = e`,
`A[idx] += e`) under the compiled backends. `a[idx]` is a copy, not a view: the elementwise
rewrite (`ew_rewrite._view`) wrote `e` into that copy, so the store was lost and both the
primal value and the gradient were wrong (helper 66). Each case is checked against the Python
backend, against central differences, and in forward mode."""
import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Active, Duplicated, Forward, ReverseWithPrimal

W = np.array([[1.0, 2.0], [3.0, -4.0], [5.0, 6.0]])


def rows_set(A, B):
    A[np.array([1, 2])] = B
    return np.sum(A * A * W)


def rows_masked(A, B):
    A[np.array([False, True, True])] = B * 3.0
    return np.sum(A * A * W)


def rows_added(A, B):
    A[np.array([2, 0])] += B * B
    return np.sum(A * A * W)


@pytest.mark.parametrize("f", [rows_set, rows_masked, rows_added], ids=lambda f: f.__name__)
@pytest.mark.parametrize("numba", [True, "kernels"], ids=["numba", "kernels"])
def test_row_stores_through_index_arrays_and_masks(f, numba):
    pytest.importorskip("numba")
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((3, 2)), rng.standard_normal((2, 2))
    want = f(A.copy(), B.copy())
    got = {}
    for backend in (False, numba):
        dA, dB = np.zeros_like(A), np.zeros_like(B)
        (_, value) = zymo.autodiff(ReverseWithPrimal, f, Active, Duplicated(A.copy(), dA), Duplicated(B.copy(), dB),
                                   numba=backend)
        assert value == pytest.approx(want, rel=1e-14)
        got[backend] = (dA, dB)
    fd = fd_grad(lambda a, b: f(a.copy(), b.copy()), [A, B])
    for k in range(2):
        np.testing.assert_allclose(got[numba][k], got[False][k], rtol=1e-13)
        np.testing.assert_allclose(got[numba][k], fd[k], rtol=1e-6, atol=1e-8)
    assert np.abs(got[numba][1]).max() > 0.1  # the stored values reach the loss
    tB = np.ones_like(B)
    (tangent,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(A.copy(), np.zeros_like(A)),
                               Duplicated(B.copy(), tB), numba=numba)
    assert tangent == pytest.approx(np.sum(got[False][1] * tB), rel=1e-12)
