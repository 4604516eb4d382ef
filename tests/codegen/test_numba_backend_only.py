"""Functions the Python backend differentiated and `numba=True` refused, with an error naming
the generated code or a Numba typing error (helper 70): `np.mean` along an axis, sums and
means over several axes, `np.cumsum` of a matrix along
an axis, and a matrix indexed by one int array per axis (`A[r, c]`, read and stored) (helper 78's
cases are in `test_numba_reductions_by_rows.py`). Each is
checked against the Python backend (forward and reverse) and central differences."""
import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, ReverseWithPrimal

pytest.importorskip("numba")

R = np.array([0, 3, 3, -1, 2])
C = np.array([1, 4, 4, 0, -2])


def sum_over_axes(A):
    return np.sum(np.sum(A ** 2, axis=(0, 2)) ** 2)


def mean_over_axes_kept(A):
    return np.sum(np.mean(A * A, axis=(0, 2), keepdims=True) * A)


def sum_over_negative_axes(A):
    return np.sum(np.sum(A, axis=(-1, 0)) ** 3)


def cumsum_rows(A):
    return np.sum(np.cumsum(A, axis=1) ** 2 * np.arange(A.shape[1]))


def cumsum_columns(A):
    return np.sum(np.cumsum(A, axis=-2) ** 2)


def pairs_read(A):
    v = A[R, C] * 3.0
    return np.sum(v * v * np.arange(v.size))


def pairs_stored(A):
    A[R, C] = A[C % 4, R % 5] * 2.0  # (3, 4) twice: the last store survives
    return np.sum(A * A * np.arange(A.shape[1]))


def mean_along_rows(A):
    return np.sum(np.mean(A, axis=1) ** 2 * np.arange(A.shape[0]))


def layernorm(x):  # Numba's np.mean takes no axis (helper 70)
    mu = np.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    return np.sum((xc / np.sqrt(var + 1e-5)) ** 3)


CASES = [(mean_along_rows, (4, 5)), (layernorm, (4, 5)),
         (sum_over_axes, (3, 4, 5)), (mean_over_axes_kept, (3, 4, 5)), (sum_over_negative_axes, (3, 4, 5)),
         (cumsum_rows, (4, 5)), (cumsum_columns, (4, 5)), (pairs_read, (4, 5)), (pairs_stored, (4, 5))]


@pytest.mark.parametrize("f,shape", CASES, ids=[f.__name__ for f, _ in CASES])
def test_compiles_and_matches_the_python_backend(f, shape):
    A = np.random.default_rng(3).standard_normal(shape)
    got = {}
    for backend in (False, True):
        dA = np.zeros_like(A)
        (_, value) = zymo.autodiff(ReverseWithPrimal, f, Active, Duplicated(A.copy(), dA), numba=backend)
        assert value == pytest.approx(f(A.copy()), rel=1e-12)
        tA = np.random.default_rng(4).standard_normal(shape)
        (tangent,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(A.copy(), tA.copy()), numba=backend)
        got[backend] = (dA, tangent, tA)
    np.testing.assert_allclose(got[True][0], got[False][0], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got[False][0], fd_grad(lambda a: f(a.copy()), [A])[0], rtol=1e-6, atol=1e-7)
    assert np.abs(got[True][0]).max() > 0.1
    for backend in (False, True):
        assert got[backend][1] == pytest.approx(np.sum(got[False][0] * got[backend][2]), rel=1e-10)


def test_const_indices_are_arguments_too():
    A = np.random.default_rng(5).standard_normal((4, 5))

    def f(A, r, c):
        return np.sum(A[r, c] ** 2)
    dA = {b: np.zeros_like(A) for b in (False, True)}
    for b in (False, True):
        zymo.autodiff(ReverseWithPrimal, f, Active, Duplicated(A.copy(), dA[b]), Const(R), Const(C), numba=b)
    np.testing.assert_array_equal(dA[True], dA[False])
    assert dA[True][3, 4] == pytest.approx(4.0 * A[3, 4])  # the pair read twice: its adjoint twice


def pairs_broadcast_row(A):
    return np.sum(A[np.array([2]), np.array([0, 1, 2])] ** 2)  # one row index for three columns


def pairs_broadcast_store(A):
    A[np.array([2, 0, 1]), np.array([1])] = A[3, :3] * 2.0
    return np.sum(A * A * np.arange(A.shape[1]))


@pytest.mark.parametrize("f", [pairs_broadcast_row, pairs_broadcast_store], ids=lambda f: f.__name__)
def test_pairs_broadcast_as_numpy_does(f):
    """`A[r, c]` with one index array of length 1: NumPy broadcasts it (helper 72: a raw
    IndexError from the adjoint's twin)."""
    A = np.random.default_rng(6).standard_normal((4, 4))
    dA = {b: np.zeros_like(A) for b in (False, True)}
    for b in (False, True):
        zymo.autodiff(ReverseWithPrimal, f, Active, Duplicated(A.copy(), dA[b]), numba=b)
    np.testing.assert_allclose(dA[True], dA[False], rtol=1e-13)
    np.testing.assert_allclose(dA[False], fd_grad(lambda a: f(a.copy()), [A])[0], rtol=1e-6, atol=1e-8)


def test_mean_of_ints_adds_in_float64():
    """NumPy's mean adds ints as float64; a sum in int64 overflowed under `numba=True` (helper 72)."""
    big = np.full((3, 4), 4 * 10**18, np.int64)
    A = np.random.default_rng(7).standard_normal((3, 4))

    def f(A, big):
        return np.sum(np.mean(big, axis=1) * A[:, 0]) + np.sum(np.mean(big, axis=(0, 1), keepdims=True) * A)
    got = {}
    for b in (False, True):
        dA = np.zeros_like(A)
        (_, value) = zymo.autodiff(ReverseWithPrimal, f, Active, Duplicated(A.copy(), dA), Const(big), numba=b)
        got[b] = (value, dA)
    assert got[True][0] == pytest.approx(f(A, big), rel=1e-12)
    np.testing.assert_allclose(got[True][1], got[False][1], rtol=1e-12)
    assert got[True][1][0, 0] == pytest.approx(8e18, rel=1e-12)


def zero_d_overwritten(x):
    y = x * x
    x[...] = 3.0 * x  # after y: the adjoint reads the snapshot `x.copy()` taken before
    return np.sum(y) + 2.0 * np.sum(x)


def test_a_snapshot_of_a_0d_array_is_a_copy():
    """`x.copy()` of a 0-d array, written `_rt.ew_new('x0', (x,))`, ran as written: `x0`, the
    operand itself, so the snapshot changed with `x` (helper 73: 10.2 where 7.4 is right)."""
    got = {}
    for backend in (False, True, "kernels"):
        dx = np.zeros(())
        zymo.autodiff(ReverseWithPrimal, zero_d_overwritten, Active, Duplicated(np.array(0.7), dx), numba=backend)
        got[backend] = float(dx)
    assert got[False] == pytest.approx(2 * 0.7 + 6.0, rel=1e-14)
    assert got[True] == pytest.approx(got[False], rel=1e-14) and got["kernels"] == pytest.approx(got[False], rel=1e-14)



def dot_into_operand(A, B):
    np.dot(A, B, out=B)
    return np.sum(B * B)


def matmul_into_operand(A):
    np.matmul(A, A, out=A)
    return np.sum(A * A)


@pytest.mark.parametrize("f,n", [(dot_into_operand, 2), (matmul_into_operand, 1)], ids=["dot", "matmul"])
def test_product_into_an_operand(f, n):
    """`out=` an operand of the product (`np.dot(A, B, out=B)`): NumPy computes the product
    first; Numba's BLAS call wrote into what it read, and `numba=True` gave zeros for the value,
    the arrays and the gradient (helper 77)."""
    rng = np.random.default_rng(5)
    args = [rng.random((3, 3)) + 0.1 for _ in range(n)]
    want = [a.copy() for a in args]
    value = f(*want)
    got = {}
    for numba in (False, True):
        xs = [a.copy() for a in args]
        grads, v = zymo.gradient(ReverseWithPrimal, f, *xs, numba=numba)
        assert v == pytest.approx(value, rel=1e-13)
        for x, w in zip(xs, want):
            np.testing.assert_allclose(x, w, rtol=1e-13)
        got[numba] = grads
    fd = fd_grad(f, [a.copy() for a in args])
    for g_nb, g_py, g_fd in zip(got[True], got[False], fd):
        np.testing.assert_allclose(g_nb, g_py, rtol=1e-12)
        np.testing.assert_allclose(g_py, g_fd, rtol=1e-6)
        assert np.all(np.abs(g_py) > 1e-3)
