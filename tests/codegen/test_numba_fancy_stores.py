"""Stores through an index array or a mask into rows of a matrix (`A[idx] = e`, `A[mask] = e`,
`A[idx] += e`) under the compiled backends. `a[idx]` is a copy, not a view: the elementwise
rewrite (`ew_rewrite._view`) wrote `e` into that copy, so the store was lost and both the
primal value and the gradient were wrong (helper 66). Each case is checked against the Python
backend, against central differences, and in forward mode."""
import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, ReverseWithPrimal

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


# -- a boolean mask of the array's own shape (`A[A > 0.5] = ...` of a matrix) -------------------
# Numba takes a mask of one dimension only (an `AssertionError` while typing a matrix's); the
# Numba backend writes them `_rt.get_item`/`_rt.set_item` (`rewrites.full_masks`), run as loops.

def masked_set(A, B):
    m = A > 0.2
    A[m] = 2.0 * B[m]
    return np.sum(A * A * W)


def masked_zero(A, B):
    A[A > 0.2] = 0.0
    return np.sum(A * B * W)


def masked_added(A, B):
    m = A > 0.2
    B[m] += A[m] * 3.0
    return np.sum(B * B * W)


def masked_read(A, B):
    return np.sum(np.sin(A[B > 0.0]) * A[B > 0.0])


@pytest.mark.parametrize("f", [masked_set, masked_zero, masked_added, masked_read], ids=lambda f: f.__name__)
def test_full_rank_masks_compile_and_match(f):
    pytest.importorskip("numba")
    rng = np.random.default_rng(7)
    A, B = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    want = f(A.copy(), B.copy())
    got = {}
    for backend in (False, True):
        dA, dB = np.zeros_like(A), np.zeros_like(B)
        (_, value) = zymo.autodiff(ReverseWithPrimal, f, Active, Duplicated(A.copy(), dA), Duplicated(B.copy(), dB),
                                   numba=backend)
        assert value == pytest.approx(want, rel=1e-14)
        got[backend] = (dA, dB)
    fd = fd_grad(lambda a, b: f(a.copy(), b.copy()), [A, B])
    for k in range(2):
        np.testing.assert_allclose(got[True][k], got[False][k], rtol=1e-13)
        np.testing.assert_allclose(got[True][k], fd[k], rtol=1e-6, atol=1e-8)
    assert max(np.abs(g).max() for g in got[True]) > 0.1
    tA = np.ones_like(A)
    (tangent,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(A.copy(), tA),
                               Duplicated(B.copy(), np.zeros_like(B)), numba=True)
    assert tangent == pytest.approx(np.sum(got[False][0] * tA), rel=1e-12)


def test_full_rank_mask_twins_raise_numpys_errors():
    pytest.importorskip("numba")
    import numba

    from zymo.codegen.numba import twins as _rt

    @numba.njit
    def store(x, m, v):
        _rt.set_item(x, m, v)
        return x

    @numba.njit
    def load(x, m):
        return _rt.get_item(x, m)

    x = np.arange(6.0).reshape(2, 3)
    m = x > 2.5
    np.testing.assert_array_equal(load(x, m), x[m])
    np.testing.assert_array_equal(store(x.copy(), m, np.array([7.0, 8.0, 9.0])), np.where(m, [[0, 0, 0], [7, 8, 9]], x))
    np.testing.assert_array_equal(store(x.copy(), m, -1.0), np.where(m, -1.0, x))
    with pytest.raises(IndexError, match="did not match"):
        load(x, np.ones((3, 2), np.bool_))
    with pytest.raises(ValueError, match="cannot assign"):
        store(x.copy(), m, np.array([1.0, 2.0]))


def test_full_masks_rewrites_reads_of_full_masks_and_every_indexed_store():
    from zymo.codegen.numba.rewrites import full_masks

    src = ("def f(A, B, v, m, r, i):\n"
           "    A[m] = 2.0 * B[m]\n"
           "    A[m] += B[m]\n"
           "    v[r] = 1.0\n"
           "    x = B[r] + A[i, 0]\n"
           "    return A[m]\n")
    out = full_masks(src, frozenset({"A", "B", "v", "m", "r"}), {"A": 2, "B": 2, "v": 1, "m": 2, "r": 1})
    assert out.splitlines() == [
        "def f(A, B, v, m, r, i):",
        "    _rt.set_item(A, m, 2.0 * _rt.get_item(B, m))",
        "    _rt.set_item(A, m, _rt.get_item(A, m) + _rt.get_item(B, m))",
        "    _rt.set_item(v, r, 1.0)",  # every store through an array index: a mask's value is checked
        "    x = B[r] + A[i, 0]",  # reads: a 1-d array, or a row index of a matrix: Numba's own
        "    return _rt.get_item(A, m)"]


# masks indexing an expression (helper 69): `(A * B)[m]`, `A.T[m.T]`, `A[1:, :][m] = ...`
def mask_of_local(A, B):
    C = A * B
    return np.sum(C[C > 0.0] ** 2)


def mask_of_expression(A, B):
    return np.sum((A * B)[A > 0.0])


def mask_of_transposes(A, B):
    m = A > 0.0
    return np.sum(A.T[m.T] * B.T[m.T])


def mask_store_into_transpose(A, B):
    C = A.T
    C[C > 0.0] = B.T[C > 0.0] * 2.0
    return np.sum(A * A * B)


def mask_store_into_slice(A, B):
    m = B[1:, :] > 0.0
    A[1:, :][m] = A[1:, :][m] * 3.0
    return np.sum(A * A * B)


@pytest.mark.parametrize("f", [mask_of_local, mask_of_expression, mask_of_transposes, mask_store_into_transpose,
                               mask_store_into_slice], ids=lambda f: f.__name__)
@pytest.mark.parametrize("numba", [True, "kernels"], ids=["numba", "kernels"])
def test_masks_of_expressions_in_both_modes(f, numba):
    pytest.importorskip("numba")
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    got = {}
    for backend in (False, numba):
        dA, dB = np.zeros_like(A), np.zeros_like(B)
        zymo.autodiff(ReverseWithPrimal, f, Active, Duplicated(A.copy(), dA), Duplicated(B.copy(), dB), numba=backend)
        (tangent,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(A.copy(), np.ones_like(A)),
                                   Duplicated(B.copy(), np.zeros_like(B)), numba=backend)
        got[backend] = (dA, dB, tangent)
    fd = fd_grad(lambda a, b: f(a.copy(), b.copy()), [A, B])
    for k in range(2):
        np.testing.assert_allclose(got[numba][k], got[False][k], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(got[False][k], fd[k], rtol=1e-6, atol=1e-8)
    assert np.abs(got[numba][0]).max() > 0.1
    assert got[numba][2] == pytest.approx(np.sum(got[False][0]), rel=1e-12)


def overlapping_mask_store(A, B):
    m = B > 0.0
    A[m] = A[1, ::-1]  # NumPy writes through the overlap element by element
    return np.sum(A * A * B)


def interleaved_mask_store(A, B):
    m = B[0, :2] > -10.0  # every element
    A[0, ::2][m] = A[0, 1::2]  # a view of A, its elements apart from the target's
    return np.sum(A * A * B)


@pytest.mark.parametrize("numba", [False, True, "kernels"], ids=["python", "numba", "kernels"])
def test_a_mask_store_of_an_overlapping_value_is_refused(numba):
    """`A[m] = A[1, ::-1]`: NumPy does not copy the value first (an int array index does), so
    later elements read values earlier ones stored; the store's adjoint took the value as it
    was, a wrong gradient in every backend (helper 69). Refused at run time, at the user's line;
    disjoint views of one array (interleaved columns) are still differentiated."""
    pytest.importorskip("numba")
    A = np.arange(8.0).reshape(2, 4) + 0.5
    B = np.ones((2, 4))
    B[0] = -1.0
    with pytest.raises(zymo.ZymoUsageError, match=r"fancy_stores.py:\d+: the value stored through a boolean"):
        zymo.autodiff(ReverseWithPrimal, overlapping_mask_store, Active, Duplicated(A.copy(), np.zeros_like(A)),
                      Duplicated(B.copy(), np.zeros_like(B)), numba=numba)
    B = np.random.default_rng(2).standard_normal((2, 4))
    dA = np.zeros_like(A)
    zymo.autodiff(ReverseWithPrimal, interleaved_mask_store, Active, Duplicated(A.copy(), dA),
                  Duplicated(B.copy(), np.zeros_like(B)), numba=numba)
    fd = fd_grad(lambda a, b: interleaved_mask_store(a.copy(), b.copy()), [A, B])
    np.testing.assert_allclose(dA, fd[0], rtol=1e-6, atol=1e-8)


def overlapping_vector_store(x, w):
    m = np.ones(6, dtype=np.bool_)
    m[2] = False
    x[m] = x[::-1][:5]  # NumPy: in place, element by element; Numba's own store copies first
    return np.sum(x * w * w)


def test_numba_never_stores_an_overlapping_value_differently():
    """Under `numba=True` a store through a 1-d mask of a value overlapping the array gave
    other primal values than NumPy's (Numba copies the value first), and so a wrong forward
    tangent, or a wrong gradient for another argument (helper 72). Such stores are refused
    under `numba=True` now (the twin of `_rt.set_item`); the Python and kernels backends run
    NumPy's store and differentiate it where the array itself is not differentiated."""
    pytest.importorskip("numba")
    x, w = np.arange(6.0) + 1.0, np.linspace(0.5, 1.0, 6)
    want = overlapping_vector_store(x.copy(), w)
    for backend in (False, "kernels"):
        dw = np.zeros(6)
        (_, value) = zymo.autodiff(ReverseWithPrimal, overlapping_vector_store, Active, Const(x.copy()),
                                   Duplicated(w.copy(), dw), numba=backend)
        assert value == pytest.approx(want, rel=1e-14)
        np.testing.assert_allclose(dw, fd_grad(lambda ww: overlapping_vector_store(x.copy(), ww), [w])[0], rtol=1e-6)
    with pytest.raises(zymo.ZymoUsageError, match="under numba=True: the value stored through a boolean mask"):
        zymo.autodiff(ReverseWithPrimal, overlapping_vector_store, Active, Const(x.copy()),
                      Duplicated(w.copy(), np.zeros(6)), numba=True)
    with pytest.raises(zymo.ZymoUsageError, match="under numba=True"):
        zymo.autodiff(Forward, overlapping_vector_store, Duplicated, Duplicated(x.copy(), np.ones(6)), Const(w),
                      numba=True)
