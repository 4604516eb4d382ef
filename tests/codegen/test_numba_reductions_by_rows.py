"""Functions the Python backend differentiated and `numba=True` refused (helper 78): `np.var`,
`np.std` and `np.prod` along axes (tuples of axes, negative axes, keepdims, ddof), `np.max`/
`np.min` over several axes or along an axis of an array of rank 3, `np.linalg.norm` along one
axis (ord None, 1, inf, 3.0; keepdims; rank 1 to 3), `np.matmul` into a view and `np.pad`
(mode constant) of a rank-3 array. `np_shim` reduces such axes by rows (`_Rows`). Each is
checked against the Python backend (forward and reverse) and central differences."""
import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, ReverseWithPrimal

pytest.importorskip("numba")


def var_std_along_axes(A):
    v = np.var(A, axis=1) ** 2 * np.arange(A.shape[0])
    s = np.std(A, axis=0, keepdims=True, ddof=1) * A
    return np.sum(v) + np.sum(s) + np.sum(np.std(A, axis=-1, ddof=2) ** 3)


def var_over_axes_kept(A):
    return np.sum(np.var(A, axis=(0, 2), keepdims=True) * A) + np.sum(np.std(A, axis=(-1, 1)) ** 3)


def prod_along_axes(A):
    return np.sum(np.prod(A, axis=1) * np.arange(A.shape[0])) + np.sum(np.prod(A, axis=0, keepdims=True) * A)


def prod_over_axes(A):
    return np.sum(np.prod(A[:2, :, :3], axis=(2, 0)) * np.array([1.0, -2.0, 0.5, 3.0]))


def max_min_over_axes(A):
    big = np.max(A, axis=(0, 2)) ** 2 * np.arange(A.shape[1])
    small = np.min(A, axis=(0, -1), keepdims=True) * A
    return np.sum(big) + np.sum(small) + np.sum(np.amax(A, axis=1) ** 3)


def norms_along_an_axis(A):
    two = np.linalg.norm(A, axis=1) * np.arange(A.shape[0])
    inf = np.linalg.norm(A, np.inf, axis=0, keepdims=True) * A
    one = np.linalg.norm(A, 1, axis=-1) ** 2
    three = np.linalg.norm(A, 3.0, axis=0) * np.arange(A.shape[1])
    return np.sum(two) + np.sum(inf) + np.sum(one) + np.sum(three) + np.linalg.norm(A[0], axis=0)


def norm_of_rank_3(A):
    return np.sum(np.linalg.norm(A, axis=1) ** 3 * np.arange(A.shape[2]))


def matmul_into_views(A):
    B = np.zeros((6, 6))
    np.matmul(A.T[1:4], A[:, 1:3], out=B[2:5, 1:3])
    C = np.zeros((3, 5))
    np.matmul(A, A[0], out=C[1, :4])
    return np.sum(B ** 3) + np.sum(C * C * np.arange(5))


def pad_rank_3(A):
    p = np.pad(A, ((0, 1), (1, 0), (2, 2)), constant_values=1.5) ** 3
    return np.sum(p * np.arange(p.shape[2])) + np.sum(np.pad(A, 1) ** 2)


CASES = [(var_std_along_axes, (4, 5)), (var_over_axes_kept, (3, 4, 5)), (prod_along_axes, (4, 5)),
         (prod_over_axes, (3, 4, 5)), (max_min_over_axes, (3, 4, 5)), (norms_along_an_axis, (4, 5)),
         (norm_of_rank_3, (3, 4, 5)), (matmul_into_views, (4, 5)), (pad_rank_3, (2, 3, 4))]


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


def test_prod_with_zeros_and_ints_along_axes():
    """The product's adjoint along an axis is exact where a row holds a zero (or two), and var,
    std and prod of ints along an axis take NumPy's dtypes (float64; int64)."""
    A = np.random.default_rng(8).standard_normal((3, 4, 5))
    A[0, 1, 2] = 0.0
    A[2, :, 3] = 0.0  # two zeros in a row reduced over axis 1
    K = np.arange(60, dtype=np.int32).reshape(3, 4, 5) % 7

    def f(A, K):
        return (np.sum(np.prod(A, axis=1) ** 2) + np.sum(np.prod(A, axis=(0, 2)) * np.var(K, axis=(0, 2)))
                + np.sum(np.std(K, axis=1, ddof=1) * A[:, 0, :]) + np.sum(np.prod(K, axis=2) * A[:, :, 0]))
    got = {}
    for b in (False, True):
        dA = np.zeros_like(A)
        (_, value) = zymo.autodiff(ReverseWithPrimal, f, Active, Duplicated(A.copy(), dA), Const(K), numba=b)
        assert value == pytest.approx(f(A, K), rel=1e-12)
        (tangent,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(A.copy(), A[::-1].copy()), Const(K), numba=b)
        got[b] = (dA, tangent)
    np.testing.assert_allclose(got[True][0], got[False][0], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got[False][0], fd_grad(lambda a: f(a, K), [A])[0], rtol=1e-6, atol=1e-7)
    assert got[True][0][2, 1, 3] != 0.0 or got[False][0][2, 1, 3] == 0.0
    assert got[True][1] == pytest.approx(got[False][1], rel=1e-11)
    assert got[True][1] == pytest.approx(np.sum(got[False][0] * A[::-1]), rel=1e-10)


def test_shim_reductions_by_rows_match_numpy():
    """`np_shim`'s var/std/prod/max/min along axes and `np_linalg.norm` along one axis give
    NumPy's values, shapes and dtypes (float32 stays float32; ints reduce to float64, or int64
    for prod), NaN propagating through max and min."""
    numba = pytest.importorskip("numba")
    from zymo.codegen.numba import np_shim as snp

    @numba.njit
    def reductions(x):
        return (snp.var(x, (0, 2)), snp.std(x, -1, ddof=1, keepdims=True), snp.prod(x, 1), snp.max(x, (1, 2)),
                snp.min(x, 0, keepdims=True), snp.linalg.norm(x, axis=1), snp.linalg.norm(x, 1, axis=2, keepdims=True))

    def want(x):
        return (np.var(x, (0, 2)), np.std(x, -1, ddof=1, keepdims=True), np.prod(x, 1), np.max(x, (1, 2)),
                np.min(x, 0, keepdims=True), np.linalg.norm(x, axis=1), np.linalg.norm(x, 1, axis=2, keepdims=True))

    # each dtype's rule on a few reductions (a compile per dtype and reduction: the suite's time)
    @numba.njit
    def of_ints(x):
        return snp.var(x, (0, 2)), snp.prod(x, 1), snp.max(x, (1, 2))

    @numba.njit
    def of_float32(x):
        return snp.std(x, -1, ddof=1, keepdims=True), snp.min(x, 0, keepdims=True), snp.linalg.norm(x, axis=1)
    rng = np.random.default_rng(9)
    nan = rng.standard_normal((3, 4, 5))
    nan[1, 2, 3] = np.nan
    f32 = rng.standard_normal((3, 4, 5)).astype(np.float32)
    ints = rng.integers(-5, 5, (3, 4, 5))
    for x, got, wanted in ((nan, reductions(nan), want(nan)), (ints, of_ints(ints), [want(ints)[k] for k in (0, 2, 3)]),
                           (f32, of_float32(f32), [want(f32)[k] for k in (1, 4, 5)])):
        for g, w in zip(got, wanted):
            assert g.shape == w.shape and g.dtype == w.dtype, (g.dtype, w.dtype, x.dtype)
            np.testing.assert_allclose(g, w, rtol=2e-6 if x.dtype == np.float32 else 1e-13)
