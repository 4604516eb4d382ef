"""End-to-end tests of the sorting, lookup and statistics rules (`rules/sorting.py`,
`rules/statistics.py`, `logsumexp(b=)` in `rules/scipy_base.py`).

The rule cases in `tests/rules/test_rule_cases.py` check every argument form against central
differences; here each function is differentiated inside a small program, with
`zymo.testing.check_grad` (reverse and forward mode against central differences and against each
other), against a value worked out by hand (a rule returning zeros or the wrong sign
fails it), and against autograd where autograd differentiates the function (sort,
partition, logsumexp with b) or an autograd rewrite of it with functions it does
differentiate; and, where JAX is installed, gradient and Hessian of one function using them
all against `jax.grad`/`jax.hessian`. Second order (`zymo.hessian`) is checked against
finite differences of zymo's gradient. Calls the rules do not cover must be refused at the
user's line.
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import autograd_grad
from scipy.special import logsumexp

import zymo
from zymo import Forward, Reverse
from zymo.errors import UnsupportedCall
from zymo.testing import check_grad

RNG = np.random.default_rng(3)
X = np.array([0.3, -0.45, 0.7, 0.1, -1.2])
M = RNG.normal(size=(3, 5))
W = np.arange(1.0, 6.0)


def grads(f, *args):
    """zymo's reverse and forward gradients of `f` in its first argument (they must agree)."""
    (gr,) = zymo.gradient(Reverse, f, *args)[:1]
    gf = zymo.gradient(Forward, f, *args)[0]
    np.testing.assert_allclose(gf, gr, rtol=1e-12, atol=1e-14)
    return gr


# -- sort, argsort, partition, take_along_axis ---------------------------------------------


def sort_weighted(x):
    return np.sum(np.sort(x) * np.arange(1.0, 6.0))


def sort_rows(m):
    return np.sum(np.sort(m, axis=1) ** 2 * np.arange(1.0, 6.0))


def sort_cols(m):
    return np.sum(np.sort(m, axis=0)[-1] * np.arange(1.0, 6.0))


def sort_flat(m):
    return np.sort(m, axis=None)[-1] - np.sort(m, axis=None)[0]


def test_sort_follows_the_permutation():
    g = grads(sort_weighted, X)
    # the k-th smallest element gets weight k + 1: ranks of X are [3, 1, 4, 2, 0]
    np.testing.assert_array_equal(g, [4.0, 2.0, 5.0, 3.0, 1.0])
    check_grad(sort_weighted, X)
    check_grad(sort_rows, M)
    check_grad(sort_cols, M)
    g = grads(sort_flat, M)
    want = np.zeros_like(M)
    want.flat[np.argmax(M)] = 1.0
    want.flat[np.argmin(M)] = -1.0
    np.testing.assert_array_equal(g, want)


def test_sort_and_partition_match_autograd():
    import autograd.numpy as anp

    np.testing.assert_allclose(grads(sort_pow, X),  # autograd sorts 1-d arrays only
                               autograd_grad(lambda x: anp.sum(anp.sort(x * x) ** 3 * anp.arange(1.0, 6.0)), X))
    np.testing.assert_allclose(grads(partition_pow, X),
                               autograd_grad(lambda x: anp.sum(anp.partition(x * x, 2) ** 3 * anp.arange(1.0, 6.0)), X))


def sort_pow(x):
    return np.sum(np.sort(x * x) ** 3 * np.arange(1.0, 6.0))


def sort_ties(x):
    return np.sum(np.sort(np.concatenate((x, x))) * np.arange(1.0, 11.0))


def test_sort_ties_keep_their_own_derivative():
    """Each copy of a tied pair keeps the weight of its own place (a stable sort)."""
    g = grads(sort_ties, X)
    ranks = np.argsort(np.argsort(X))
    np.testing.assert_array_equal(g, (2 * ranks + 1) + (2 * ranks + 2))


def partition_pow(x):
    return np.sum(np.partition(x * x, 2) ** 3 * np.arange(1.0, 6.0))


def partition_kth(m):
    return np.sum(np.partition(m, 1, axis=0)[1] * np.arange(1.0, 6.0))


def test_partition():
    check_grad(partition_pow, X)
    g = grads(partition_kth, M)
    want = np.zeros_like(M)
    med = np.argsort(M, axis=0)[1]
    want[med, np.arange(5)] = np.arange(1.0, 6.0)
    np.testing.assert_array_equal(g, want)


def take_argsort(m):
    idx = np.argsort(m, axis=1)
    return np.sum(np.take_along_axis(m, idx, axis=1) * np.arange(1.0, 6.0))


IDX = np.array([[0, 4, 4], [1, 1, 2], [3, 0, 2]])


def take_repeat(m, idx):
    return np.sum(np.take_along_axis(m, idx, 1) ** 2)


def test_take_along_axis():
    np.testing.assert_allclose(grads(take_argsort, M), grads(lambda m: sort_rows_lin(m), M))
    g = zymo.gradient(Reverse, take_repeat, M, zymo.Const(IDX))[0]
    want = np.zeros_like(M)
    for i in range(3):
        for j in IDX[i]:
            want[i, j] += 2 * M[i, j]  # a repeated index accumulates
    np.testing.assert_allclose(g, want)
    check_grad(take_repeat, M, IDX, const=[1])
    # autograd has no take_along_axis VJP: the same gather written as fancy indexing
    rows = np.arange(3)[:, None]
    np.testing.assert_allclose(g, autograd_grad(lambda m: (m[rows, IDX] ** 2).sum(), M), rtol=1e-12)


def sort_rows_lin(m):
    return np.sum(np.sort(m, axis=1) * np.arange(1.0, 6.0))


def put_rows(m, v, idx):
    o = m * 2.0
    np.put_along_axis(o, idx, v, axis=1)
    return np.sum(o * o * np.arange(1.0, 6.0))


def test_put_along_axis():
    idx = np.array([[1, 3, 1], [0, 0, 4], [2, 2, 2]])
    v = RNG.normal(size=(3, 3))
    gm, gv = zymo.gradient(Reverse, put_rows, M, v, zymo.Const(idx))[:2]
    o = M * 2.0
    np.put_along_axis(o, idx, v, axis=1)
    wo = 2 * o * np.arange(1.0, 6.0)
    want_m = 2.0 * wo
    want_v = np.zeros_like(v)
    for i in range(3):
        want_m[i, idx[i]] = 0.0
        last = {}
        for k, j in enumerate(idx[i]):
            last[j] = k  # NumPy keeps the last value stored to a place
        for j, k in last.items():
            want_v[i, k] = wo[i, j]
    np.testing.assert_allclose(gm, want_m)
    np.testing.assert_allclose(gv, want_v)
    check_grad(put_rows, M, v, idx, const=[2])


# -- searchsorted, interp, histogram -------------------------------------------------------
GRID = np.array([-1.0, -0.2, 0.5, 1.5])


def lookup(x, t):
    return np.sum(x[np.searchsorted(GRID, t)] ** 2)


def lookup_scalar(x, s):
    return x[np.searchsorted(GRID, s, side="right")] * s


def test_searchsorted_lookup():
    x = np.array([1.0, -2.0, 3.0, 0.5, 4.0])
    t = np.array([0.1, -0.5, 2.0, 0.1])
    gx, gt = zymo.gradient(Reverse, lookup, x, t)
    np.testing.assert_allclose(gx, [0.0, -4.0, 2.0 * 3.0 * 2, 0.0, 8.0])
    np.testing.assert_array_equal(gt, 0.0)  # indices: derivative zero
    gx, gs = zymo.gradient(Reverse, lookup_scalar, x, 0.7)
    np.testing.assert_allclose(gx, [0.0, 0.0, 0.0, 0.7, 0.0])
    assert gs == pytest.approx(0.5)
    check_grad(lookup, x, t)


XP = np.array([-1.0, 0.0, 0.5, 2.0])
FP = np.array([1.0, -1.0, 2.0, 0.0])


def interp_all(x, xp, fp):
    return np.sum(np.interp(x, xp, fp) ** 2 * np.arange(1.0, 6.0))


def interp_scalar(s, fp):
    return np.interp(s, XP, fp, left=-5.0)


def test_interp():
    x = np.array([-1.5, -0.3, 0.2, 1.0, 2.4])
    check_grad(interp_all, x, XP, FP)
    gs, gfp = zymo.gradient(Reverse, interp_scalar, 0.2, FP)
    assert gs == pytest.approx((2.0 - -1.0) / 0.5)  # the slope of the segment [0, 0.5]
    np.testing.assert_allclose(gfp, [0.0, 0.6, 0.4, 0.0])
    t = zymo.autodiff(Forward, interp_scalar, zymo.Duplicated, zymo.Duplicated(-1.3, 1.0), zymo.Const(FP))[0]
    assert t == 0.0  # left of the range, left= is a constant


def hist_weights(w, a):
    h, _e = np.histogram(a, bins=4, range=(-2.0, 2.0), weights=w * w)
    return np.sum(h * np.arange(1.0, 5.0))


def hist_edges(a):
    _h, e = np.histogram(a, bins=3)
    return np.sum(e * np.arange(1.0, 5.0))


def test_histogram():
    a = np.array([-1.5, 0.3, 1.2, -0.7, 1.9, 2.5])
    w = np.array([0.5, -1.0, 2.0, 1.5, 0.3, 4.0])
    g = zymo.gradient(Reverse, hist_weights, w, zymo.Const(a))[0]
    bins = np.array([1.0, 3.0, 4.0, 2.0, 4.0, 0.0])  # each element's bin (the last one is out of range)
    np.testing.assert_allclose(g, 2 * w * bins)
    check_grad(hist_weights, w, a, const=[1])
    g = grads(hist_edges, a)
    k = np.arange(4) / 3.0
    want = np.zeros_like(a)
    want[np.argmin(a)] = np.sum((1 - k) * np.arange(1.0, 5.0))
    want[np.argmax(a)] = np.sum(k * np.arange(1.0, 5.0))
    np.testing.assert_allclose(g, want)


# -- nan reductions ---------------------------------------------------------------------------
MASK = np.array([[False, True, False, False, True], [False, False, False, True, False],
                 [True, False, False, False, False]])


def nan_stats(m):
    a = np.where(MASK, np.nan, m)
    return (np.nansum(a * 2.0) ** 2 + np.sum(np.nanmean(a, axis=1) * np.arange(1.0, 4.0)) + np.nanvar(a)
            + np.sum(np.nanstd(a, axis=0, ddof=1) ** 2) + np.nanmax(a) - np.nanmin(a, axis=1)[0]
            + np.nanprod(a[0] + 2.0) + np.sum(np.nancumsum(a, axis=1) ** 2) + np.sum(np.nancumprod(a[1]) ** 2))


def nan_stats_ag(m):
    """The same with autograd: NaN entries dropped through masks."""
    import autograd.numpy as anp

    keep = ~MASK
    z = anp.where(keep, m, 0.0)
    n1, n0 = keep.sum(axis=1), keep.sum(axis=0)
    mean1 = anp.sum(z, axis=1) / n1
    mean0 = anp.sum(z, axis=0) / n0
    mu = anp.sum(z) / keep.sum()
    var = anp.sum(anp.where(keep, (m - mu) ** 2, 0.0)) / keep.sum()
    std0sq = anp.sum(anp.where(keep, (m - mean0) ** 2, 0.0), axis=0) / (n0 - 1)
    big = anp.max(anp.where(keep, m, -anp.inf))
    small0 = anp.min(anp.where(keep[0], m[0], anp.inf))
    prod0 = anp.prod(anp.where(keep[0], m[0] + 2.0, 1.0))
    cum1 = anp.cumsum(z, axis=1)
    v = anp.where(keep[1], m[1], 1.0)
    cp = anp.stack([anp.prod(v[:k + 1]) for k in range(v.shape[0])])  # autograd has no cumprod VJP
    return (anp.sum(z * 2.0) ** 2 + anp.sum(mean1 * anp.arange(1.0, 4.0)) + var + anp.sum(std0sq) + big - small0
            + prod0 + anp.sum(cum1 ** 2) + anp.sum(cp ** 2))


def test_nan_reductions_ignore_nans():
    g = grads(nan_stats, M)
    assert np.all(g[MASK] == 0.0)  # NaN entries get derivative zero
    np.testing.assert_allclose(g, autograd_grad(nan_stats_ag, M), rtol=1e-10, atol=1e-12)
    check_grad(nan_stats, M)


def nansum_simple(x):
    return np.nansum(np.where(x > 0.5, np.nan, x) * 3.0)


def test_nansum_sign():
    g = grads(nansum_simple, X)
    np.testing.assert_array_equal(g, np.where(X > 0.5, 0.0, 3.0))


# -- cov, corrcoef, polyval, logsumexp --------------------------------------------------------


def cov_fn(m, y):
    return np.sum(np.cov(m) * np.arange(9.0).reshape(3, 3)) + np.sum(np.cov(m.T, y, rowvar=False, bias=True) ** 2) \
        + np.cov(y, ddof=0)


def _ag_cov(x, ddof):
    import autograd.numpy as anp

    xc = x - anp.mean(x, axis=1, keepdims=True)
    return anp.dot(xc, xc.T) / (x.shape[1] - ddof)


def cov_fn_ag(m, y):
    import autograd.numpy as anp

    joined = anp.concatenate((m, y[None, :]), axis=0)
    return (anp.sum(_ag_cov(m, 1) * anp.arange(9.0).reshape(3, 3)) + anp.sum(_ag_cov(joined, 0) ** 2)
            + _ag_cov(y[None, :], 0)[0, 0])


def corr_fn(m):
    return np.sum(np.corrcoef(m) * np.arange(9.0).reshape(3, 3)) + np.sum(np.corrcoef(m.T, rowvar=False)[0])


def corr_fn_ag(m):
    import autograd.numpy as anp

    c = _ag_cov(m, 1)
    d = anp.sqrt(anp.diag(c))
    r = c / d[:, None] / d[None, :]
    return anp.sum(r * anp.arange(9.0).reshape(3, 3)) + anp.sum(r[0])


def test_cov_and_corrcoef_match_autograd():
    y = RNG.normal(size=5)
    gm, gy = zymo.gradient(Reverse, cov_fn, M, y)
    np.testing.assert_allclose(gm, autograd_grad(cov_fn_ag, M, y), rtol=1e-10)
    np.testing.assert_allclose(gy, autograd_grad(cov_fn_ag, M, y, argnum=1), rtol=1e-10)
    check_grad(cov_fn, M, y)
    np.testing.assert_allclose(grads(corr_fn, M), autograd_grad(corr_fn_ag, M), rtol=1e-10, atol=1e-12)
    check_grad(corr_fn, M)


def var_by_cov(x):
    return np.cov(x)


def test_cov_of_a_vector_is_its_variance():
    g = grads(var_by_cov, X)
    np.testing.assert_allclose(g, 2 * (X - X.mean()) / (X.size - 1))


def cov_one_row(m):
    return np.sum(np.cov(m) * 2.0) + np.sum(np.corrcoef(m.T, rowvar=False))


def test_cov_of_a_single_row_matrix():
    """NumPy squeezes the 1x1 result to 0-d (zymo's type says matrix): the derivative is right."""
    m = X[None, :]
    g = grads(cov_one_row, m)
    np.testing.assert_allclose(g, 4 * (m - m.mean()) / (X.size - 1))


def poly(p, x):
    return np.sum(np.polyval(p, x) ** 2)


def test_polyval():
    p = np.array([0.5, -1.0, 2.0])
    x = np.array([0.3, -1.2, 2.0])
    gp, gx = zymo.gradient(Reverse, poly, p, x)
    y = np.polyval(p, x)
    np.testing.assert_allclose(gp, [np.sum(2 * y * x ** 2), np.sum(2 * y * x), np.sum(2 * y)])
    np.testing.assert_allclose(gx, 2 * y * (2 * 0.5 * x - 1.0))
    check_grad(poly, p, x)

    def horner(p, x):  # autograd has no polyval VJP
        y = 0.0 * x
        for k in range(p.shape[0]):
            y = y * x + p[k]
        return (y ** 2).sum()

    np.testing.assert_allclose(gp, autograd_grad(horner, p, x), rtol=1e-12)
    np.testing.assert_allclose(gx, autograd_grad(horner, p, x, argnum=1), rtol=1e-12)
    check_grad(poly, p, 0.7)


def lse_b(a, b):
    return logsumexp(a, b=b) + np.sum(logsumexp(a[None, :] * b[:, None], axis=1, b=b))


def _lse_b_grad(a, b):
    """d lse_b / d b by hand: exp(a_k - L) + sum_i exp(a_k b_i - L_i) + [row k] sum_j b_j a_j exp(a_j b_k - L_k)."""
    rows = a[None, :] * b[:, None]
    li = logsumexp(rows, axis=1, b=b, keepdims=True)
    e = np.exp(rows - li)
    return np.exp(a - logsumexp(a, b=b)) + e.sum(axis=0) + (e * b[None, :] * a[None, :]).sum(axis=1)


def test_logsumexp_with_b_matches_autograd():
    import autograd.numpy as anp
    from autograd.scipy.special import logsumexp as alse

    b = np.array([1.0, 2.0, 0.5, 1.5, 0.2])

    def ag(a, b):
        return alse(a, b=b) + anp.sum(alse(a[None, :] * b[:, None], axis=1, b=b))

    ga, gb = zymo.gradient(Reverse, lse_b, X, b)
    np.testing.assert_allclose(ga, autograd_grad(ag, X, b), rtol=1e-10)
    # autograd differentiates logsumexp in a only; b against its closed form exp(a - lse)
    np.testing.assert_allclose(gb, _lse_b_grad(X, b), rtol=1e-10)
    check_grad(lse_b, X, b)


# -- refused at the user's line ---------------------------------------------------------------


def sort_order(x):
    return np.sum(np.sort(x, order="f"))


def interp_period(x):
    return np.sum(np.interp(x, XP, FP, period=2.0))


def hist_density(x):
    return np.sum(np.histogram(x, bins=3, density=True)[0])


def hist_auto(x):
    return np.sum(np.histogram(x, bins="auto", weights=x)[0])


def hist_range(x):
    return np.sum(np.histogram(x, bins=3, range=(np.min(x), 2.0), weights=x)[0])


def lse_sign(x):
    return logsumexp(x, return_sign=True)[0]


def test_logsumexp_return_sign_is_lowered_not_refused():
    """`return_sign=True` is lowered by the frontend (`frontend/several.py`): the value is the
    plain logsumexp's where the sum is positive, and so is the gradient."""
    g = zymo.gradient(Reverse, lse_sign, X.copy())[0]
    np.testing.assert_allclose(g, np.exp(X - logsumexp(X)), rtol=1e-12)
    check_grad(lse_sign, X.copy())


def cov_aweights(x):
    return np.sum(np.cov(np.outer(x, x), aweights=x))


def nansum_dtype(x):
    return np.nansum(x, 0, np.float64)


def polyval_tuple(x):
    return np.sum(np.polyval((1.0, 2.0), x) ** 2) + np.polyval((x[0], 1.5, x[1]), x[2])


def test_polyval_of_a_tuple():
    # NumPy reads a tuple of coefficients as an array (the frontend makes it one, as for a list)
    for mode in (Reverse, Forward):
        got = zymo.gradient(mode, polyval_tuple, X.copy())[0]
        fd = np.array([(polyval_tuple(X + 1e-6 * e) - polyval_tuple(X - 1e-6 * e)) / 2e-6 for e in np.eye(len(X))])
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("f, words", [
    (sort_order, "order="), (interp_period, "period="), (hist_density, "density=True"), (hist_auto, "bins='auto'"),
    (hist_range, "range="), (cov_aweights, "aweights"), (nansum_dtype, "keepdims")],
    ids=lambda v: getattr(v, "__name__", ""))
def test_refused_at_the_users_line(f, words):
    with pytest.raises(UnsupportedCall) as info:
        zymo.gradient(Reverse, f, X)
    text = str(info.value)
    assert words in text and "test_sorting_stats.py" in text


# -- second order: zymo.hessian differentiates the reverse program ----------------------------
X4 = np.array([0.3, -0.45, 0.7, 0.1])
MASK4 = np.array([False, True, False, False])
IDX4 = np.array([[1], [0], [3], [3]])
DATA4 = np.array([0.1, 0.5, 0.9, 0.3])
XP4 = np.array([0.0, 0.2, 0.5, 1.0])
FP4 = np.array([1.0, -1.0, 2.0, 0.5])


def h_sort(x):
    return np.sum(np.sort(np.outer(x, x + 1.0), axis=0) ** 3 * np.arange(1.0, 5.0)) + np.sum(np.sort(x * x) ** 3 * x)


def h_partition_take(x):
    return np.sum(np.partition(x * x, 2) ** 3 * np.arange(1.0, 5.0)) + np.sum(
        np.take_along_axis(x, np.argsort(x), axis=0) ** 3 * np.arange(1.0, 5.0))


def h_put(x):
    o = np.outer(x, x)
    np.put_along_axis(o, IDX4, x[:, None] ** 3, axis=1)
    return np.sum(o ** 2)


def h_nan(x):
    return (np.nansum(np.where(MASK4, np.nan, x * x)) ** 2 + np.nanmean(x * x) ** 2
            + np.nanvar(np.where(MASK4, np.nan, x * x)) + np.nanstd(x) ** 3
            + np.sum(np.nanstd(np.outer(x, x), axis=0, ddof=1)) + np.sum(np.nanmax(np.outer(x, x + 0.1), axis=0) ** 2)
            + np.sum(np.nancumsum(x * x) ** 2))


def h_poly_hist(x):
    return (np.sum(np.polyval(x, x) ** 2) + np.polyval(x * x, 0.7)
            + np.sum(np.histogram(DATA4, bins=3, range=(0.0, 1.0), weights=x ** 3)[0] ** 2)
            + np.sum(np.histogram(x, bins=3)[1] ** 3))


def h_cov(x):
    m = np.outer(x, x + 1.0)[:3]
    return np.sum(np.cov(m) ** 2) + np.cov(x * x, bias=True) ** 2 + np.sum(np.cov(m.T, x, rowvar=False, ddof=0) ** 2)


def h_interp(x):
    knots = np.sort(x)
    return (np.sum(np.interp(x * x, XP4, FP4) ** 2) + np.sum(np.interp(x[:2] * 0.5 + 0.1, knots, x ** 3) ** 2)
            + np.interp(x[2] * 0.3, XP4, FP4 * x, left=x[0] * x[0]) ** 2 + np.interp(x[3], knots, x * x) ** 3)


def h_lse(x):
    m = np.outer(x, x + 1.0)
    return (logsumexp(x, b=x * x + 0.5) + np.sum(logsumexp(m, axis=1, b=x + 2.0) ** 2) + logsumexp(x * x)
            + np.sum(logsumexp(m, axis=0, keepdims=True)))


def h_corr(x):
    m = np.stack((x, x * x, np.sin(x) + x[0]))
    return np.sum(np.corrcoef(m) ** 3) + np.sum(np.corrcoef(m.T, x ** 3, rowvar=False) * np.arange(16.0).reshape(4, 4))


def fd_hessian(f, x, h=1e-5):
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h
        cols.append((zymo.gradient(Reverse, f, x + e)[0] - zymo.gradient(Reverse, f, x - e)[0]) / (2 * h))
    return np.stack(cols, axis=1)


@pytest.mark.slow
@pytest.mark.parametrize("f", [h_sort, h_partition_take, h_put, h_nan, h_poly_hist, h_cov, h_corr, h_interp, h_lse],
                         ids=lambda f: f.__name__)
def test_hessian_matches_fd_of_gradient(f):
    H = zymo.hessian(f, X4)
    ref = fd_hessian(f, X4)
    assert np.max(np.abs(ref)) > 0.5, "vacuous: the Hessian is (nearly) zero"
    np.testing.assert_allclose(H, ref, rtol=1e-6, atol=1e-7 * np.max(np.abs(ref)))
    np.testing.assert_allclose(H, H.T, rtol=1e-9, atol=1e-12)








def h_nanprod(x):
    return np.nanprod(x * x) * x[0]


def test_second_order_not_covered_is_refused():
    """nanprod's adjoint calls _rt.prod_others, which has no tangent rule (as np.prod's)."""
    with pytest.raises(UnsupportedCall) as info:
        zymo.hessian(h_nanprod, X4)
    text = str(info.value)
    assert "numpy.nanprod" in text and "_rt.prod_others" in text and "test_sorting_stats.py" in text


# -- every argument by keyword, as NumPy names it -----------------------------------------------
I2 = np.array([[2, 0, 1, 1], [0, 0, 2, 1]])


def kw_sort(x):
    return np.sum(np.sort(a=x, axis=0, kind="stable") * np.arange(1.0, 13.0).reshape(3, 4)) + np.sum(
        np.partition(a=x, kth=1, axis=1)[:, 1])


def kw_take(x):
    return np.sum(np.take_along_axis(arr=x, indices=I2, axis=0) ** 2) + np.sum(
        x[0][np.searchsorted(a=XP, v=x[1], side="left")] * x[2])


def kw_interp_hist(x):
    return np.sum(np.interp(x=x, xp=XP, fp=FP) * x) + np.sum(
        np.histogram(a=XP, weights=x[0] * x[0], bins=2)[0] * np.arange(2.0))


def kw_stats(x):
    return (np.sum(np.nanmean(a=x, axis=0) ** 2) + np.nanvar(a=x, ddof=1, axis=None)
            + np.sum(np.cov(m=x, rowvar=False, ddof=0) ** 2) + np.sum(np.polyval(p=x[0], x=x[1]))
            + logsumexp(a=x[0], b=x[1] * x[1]))


@pytest.mark.parametrize("f", [kw_sort, kw_take, kw_interp_hist, kw_stats], ids=lambda f: f.__name__)
def test_keyword_forms(f):
    check_grad(f, np.random.default_rng(1).normal(size=(3, 4)) * 0.8)


# -- JAX as a second oracle, where it is installed ----------------------------------------------
def jax_family(x):
    m = np.outer(x, x + 1.0)[:3]
    a = np.where(MASK4, np.nan, x)
    return (np.sum(np.sort(m, axis=0)[-1] * x) + np.sum(np.take_along_axis(m, np.argsort(m, axis=1), axis=1)[:, 0])
            + np.sum(np.interp(x * 1.5, XP4, FP4 * x) ** 2) + np.sum(np.polyval(x, x * 0.5))
            + np.nanmean(a) + np.nanvar(a) + np.nanstd(a) + np.sum(np.nancumsum(a) ** 2)
            + np.sum(np.cov(m) ** 2) + np.sum(np.corrcoef(m, rowvar=False) * 0.5)
            + np.sum(np.histogram(DATA4, bins=3, range=(0.0, 1.0), weights=x * x)[0] * np.arange(1.0, 4.0))
            + logsumexp(x, b=x * x + 0.5))


def _jax_family(jnp, jsp):
    def f(x):
        m = jnp.outer(x, x + 1.0)[:3]
        a = jnp.where(MASK4, jnp.nan, x)
        return (jnp.sum(jnp.sort(m, axis=0)[-1] * x)
                + jnp.sum(jnp.take_along_axis(m, jnp.argsort(m, axis=1), axis=1)[:, 0])
                + jnp.sum(jnp.interp(x * 1.5, XP4, FP4 * x) ** 2) + jnp.sum(jnp.polyval(x, x * 0.5))
                + jnp.nanmean(a) + jnp.nanvar(a) + jnp.nanstd(a) + jnp.sum(jnp.nancumsum(a) ** 2)
                + jnp.sum(jnp.cov(m) ** 2) + jnp.sum(jnp.corrcoef(m, rowvar=False) * 0.5)
                + jnp.sum(jnp.histogram(DATA4, bins=3, range=(0.0, 1.0), weights=x * x)[0] * jnp.arange(1.0, 4.0))
                + jsp.logsumexp(x, b=x * x + 0.5))
    return f


@pytest.mark.slow
def test_gradient_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.special as jsp

    # jitted: one XLA compile per derivative, not one per primitive op
    ref = np.asarray(jax.jit(jax.grad(_jax_family(jnp, jsp)))(jnp.asarray(X4)))
    assert np.max(np.abs(ref)) > 0.5
    np.testing.assert_allclose(grads(jax_family, X4), ref, rtol=1e-9, atol=1e-12)
    H = np.asarray(jax.jit(jax.hessian(_jax_family(jnp, jsp)))(jnp.asarray(X4)))
    np.testing.assert_allclose(zymo.hessian(jax_family, X4), H, rtol=1e-8, atol=1e-10 * np.max(np.abs(H)))


# -- array methods: x.sort() and x.partition() in place, x.argsort() -------------------------------


def method_sort_in_place(x, w):
    y = x * 1.0
    y.sort()
    return np.sum(y * w)


def method_argsort_gather(x, w):
    return np.sum(x[x.argsort()] * w)


def method_partition_in_place(x, w):
    y = x * 2.0
    y.partition(2)
    return np.sum(y[2:] * w[2:])


@pytest.mark.parametrize("f", [method_sort_in_place, method_argsort_gather, method_partition_in_place])
def test_sorting_methods(f):
    x = np.array([3.0, -1.0, 2.0, 0.5, 4.0])
    w = np.arange(5.0)
    check_grad(f, x, w)
    gx, _ = zymo.gradient(zymo.Reverse, f, x.copy(), w.copy())
    if f is not method_partition_in_place:  # each x gets the weight of its sorted position
        np.testing.assert_allclose(gx, [3.0, 0.0, 2.0, 1.0, 4.0])
    else:  # the three largest (after kth = 2) keep their weights, twice
        assert gx[1] == 0.0 and gx[3] == 0.0 and np.all(gx[[0, 2, 4]] > 0)
