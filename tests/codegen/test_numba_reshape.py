"""`np.reshape` of arrays that are not C-contiguous under the Numba backend (`np_shim.reshape`).
Numba reshapes a C-contiguous array only: `A.T.reshape(-1)` raised a raw `NotImplementedError`
at run time under `numba=True`, where the Python backend differentiates it. The shim makes
NumPy's view where there is one and a copy otherwise, so writes through the result reach the
array exactly where NumPy's do."""
import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Active, Duplicated, Forward, ReverseWithPrimal

numba = pytest.importorskip("numba")


def transposed_flat(A, B):
    v = A.T.reshape(-1)
    return np.sum(v * B.reshape(-1) * np.arange(v.size))


def strided_view_written(A, B):
    v = A[::2].reshape(-1, 2, A.shape[1])  # NumPy: a view of A's even rows
    v[0] = v[0] * B[0]
    return np.sum(A * A) + np.sum(v * B[1])


def copy_written(A, B):
    v = A.T.reshape(-1)  # NumPy: a copy; the write does not reach A
    v[1:3] = 7.0 * B[0, :2]
    return np.sum(A * A * B) + np.sum(v * v)


@pytest.mark.parametrize("f", [transposed_flat, strided_view_written, copy_written], ids=lambda f: f.__name__)
def test_reshape_of_strided_arrays_compiles_and_matches(f):
    rng = np.random.default_rng(11)
    A, B = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    want = f(A.copy(), B.copy())
    got = {}
    for backend in (False, True):
        dA, dB = np.zeros_like(A), np.zeros_like(B)
        (_, value) = zymo.autodiff(ReverseWithPrimal, f, Active, Duplicated(A.copy(), dA), Duplicated(B.copy(), dB),
                                   numba=backend)
        assert value == pytest.approx(want, rel=1e-13)
        got[backend] = (dA, dB)
    fd = fd_grad(lambda a, b: f(a.copy(), b.copy()), [A, B])
    for k in range(2):
        np.testing.assert_allclose(got[True][k], got[False][k], rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(got[True][k], fd[k], rtol=1e-6, atol=1e-8)
        assert np.abs(got[True][k]).max() > 0.1
    tA = rng.standard_normal(A.shape)
    (tangent,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(A.copy(), tA.copy()),  # a copy: A is written
                               Duplicated(B.copy(), np.zeros_like(B)), numba=True)
    assert tangent == pytest.approx(np.sum(got[False][0] * tA), rel=1e-12)


def test_shim_reshape_views_where_numpy_does_and_copies_elsewhere():
    from zymo.codegen.numba import np_shim

    @numba.njit
    def reshape(a, shape):
        return np_shim.reshape(a, shape)

    base = np.random.default_rng(3).random((6, 8))
    cases = [(base.T, (-1,)), (base.T, -1), (base[::2], (3, 2, 4)), (base[::2], (-1,)), (base[:, ::2], (6, 4)),
             (base[:, ::2].T, (2, 2, 6)), (base[::2, 1:3], (3, 2)), (base[::2, 1:3], (6, 1)),
             (base[1:5, ::3], (4, 3, 1)), (base, (4, 12))]
    for a, shape in cases:
        got, want = reshape(a, shape), np.reshape(a, shape)
        np.testing.assert_array_equal(got, want)
        assert np.shares_memory(got, a) == np.shares_memory(want, a), (a.strides, shape)
        if np.shares_memory(want, a):
            assert got.strides == want.strides
    with pytest.raises(ValueError, match="cannot reshape"):
        reshape(base.T, (5, -1))
    with pytest.raises(ValueError, match="one unknown"):
        reshape(base.T, (-1, -1))
