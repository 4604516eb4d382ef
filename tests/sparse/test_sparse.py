"""Sparse Jacobians and Hessians (zymo/sparse): detection, coloring, drivers, interface."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import zymo
from zymo import Forward, Reverse, UnsupportedSyntax, ZymoUsageError, ZymoWarning
from zymo.sparse import coloring as C
from zymo.sparse import (
    column_coloring,
    hessian_pattern,
    jacobian_pattern,
    plan_hessian,
    plan_jacobian,
    row_coloring,
    star_coloring,
)

# -- functions with structure ------------------------------------------------------------

B = np.diag(np.full(7, 2.0)) + np.diag(np.ones(6), 1)  # bidiagonal constant matrix


def stencil_inplace(x, c):
    y = np.zeros_like(x)
    y[1:-1] = x[:-2] - 2.0 * x[1:-1] + x[2:] + c * x[1:-1] ** 2
    y[0] = x[0] ** 2
    y[-1] += x[-1] * x[0]  # a corner entry
    np.sin(y, out=y)
    y *= 2.0
    return y


def loop_branch(x):
    y = np.empty(x.shape[0] - 1)
    for i in range(x.shape[0] - 1):
        if x[i] > 0:
            y[i] = x[i] * x[i + 1]
        else:
            y[i] = np.sin(x[i])
    return y


def views(x):
    a = x.reshape(3, 4)
    t = a.T
    t[0] = t[1] * 2.0  # writes column 0 of a through the transposed view
    return np.sum(a ** 2, axis=0) + a[:, 1:].sum(axis=1).sum()


def products(x):
    z = B @ x[:7]
    w = np.outer(x[7:9], x[:2]).ravel()
    return np.concatenate([z * x[7], w, np.diff(x, 2)[:3], np.roll(x, 1)[:2] ** 3])


def gather_scatter(x):
    perm = np.array([3, 0, 4, 1, 5, 2])
    y = x[perm] * 2.0
    y[::2] = y[::2] * x[1:4]
    out = np.zeros(8)
    out[perm] = y
    out[6] = np.sum(x[:2] ** 2)  # (np.max would depend on one element only, by value)
    out[7] = np.linalg.norm(x[4:])
    return out


def while_loop(x):
    s = x[0]
    k = 0
    while s > 1.0 and k < 4:
        s = 0.5 * s + 0.1 * x[k + 1] ** 2
        k += 1
    y = np.copy(x)
    y[0] = s
    return y


def nested_branches(x):
    y = np.zeros(6)
    for i in range(5):
        if x[i] > 0:
            if x[i + 1] > 0:
                y[i] = x[i + 1] ** 2
            else:
                y[i + 1] = x[i] * 2.0
        else:
            y[:2] = y[:2] + x[i]  # a vector write in a branch
    return y


JAC_CASES = [
    (stencil_inplace, (10,), (0.3,)),
    (loop_branch, (9,), ()),
    (views, (12,), ()),
    (products, (10,), ()),
    (gather_scatter, (6,), ()),
    (while_loop, (6,), ()),
    (nested_branches, (6,), ()),
]
IDS = [c[0].__name__ for c in JAC_CASES]


def _x(shape, seed=0, scale=1.0):
    return scale * np.random.default_rng(seed).normal(size=shape) + (1.5 if scale > 2 else 0.0)


def _dense(f, x, *c):
    return zymo.jacobian(Forward, f, x, *c).reshape(-1, x.size)


def _fd_jacobian(f, x, *c, h=1e-6):
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e.reshape(-1)[j] = h
        cols.append((np.ravel(f(x + e, *c)) - np.ravel(f(x - e, *c))) / (2 * h))
    return np.array(cols).T


# -- detection -----------------------------------------------------------------------------


@pytest.mark.parametrize("f,shape,consts", JAC_CASES, ids=IDS)
def test_local_pattern_is_the_dense_pattern(f, shape, consts):
    for seed in range(3):
        x = _x(shape, seed, scale=3.0 if f is while_loop else 1.0)
        true = _dense(f, x, *consts) != 0
        local = jacobian_pattern(f, x, *consts, mode="local").toarray()
        assert local.shape == true.shape
        assert (local == true).all(), (f.__name__, np.argwhere(local != true))


@pytest.mark.parametrize("f,shape,consts", JAC_CASES, ids=IDS)
def test_global_pattern_holds_at_every_input(f, shape, consts):
    x0 = _x(shape, 0)
    glob = jacobian_pattern(f, x0, *consts, mode="global").toarray()
    for seed in range(6):
        x = _x(shape, seed, scale=3.0 if seed % 2 else 1.0)
        assert (glob >= (_dense(f, x, *consts) != 0)).all()
        assert (glob >= jacobian_pattern(f, x, *consts, mode="local").toarray()).all()


def test_global_pattern_of_nested_branches_is_the_union_over_all_sign_patterns():
    union = np.zeros((6, 6), dtype=bool)
    for signs in itertools.product([-1.0, 1.0], repeat=6):
        x = np.array(signs) * (1.0 + np.arange(6) / 10)
        union |= _dense(nested_branches, x) != 0
    glob = jacobian_pattern(nested_branches, np.ones(6), mode="global").toarray()
    assert (glob == union).all()


def test_global_pattern_of_a_branch_is_the_union_and_local_follows_the_branch():
    x = np.array([1.0, -1.0, 2.0, -2.0, 3.0])
    local = jacobian_pattern(loop_branch, x, mode="local").toarray()
    glob = jacobian_pattern(loop_branch, x, mode="global").toarray()
    expect_glob = np.eye(4, 5, dtype=bool) | np.eye(4, 5, 1, dtype=bool)
    assert (glob == expect_glob).all()
    assert (local == (np.eye(4, 5, dtype=bool) | (np.eye(4, 5, 1, dtype=bool) & (x[:4] > 0)[:, None]))).all()


def chained(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def hess_loop(x):
    s = 0.0
    for i in range(x.shape[0] - 2):
        if x[i] > 0:
            s = s + x[i] * x[i + 2]
        else:
            s = s + np.exp(x[i + 1])
    return s + np.sum(x)  # the linear term adds nothing


def hess_inplace(x):
    y = x.copy()
    y[1:] -= 0.5 * y[:-1] ** 2  # a chain through in-place writes
    y.reshape(2, 4)[:, 0] *= 3.0
    return np.dot(y, y)


HESS_CASES = [(chained, 9), (hess_loop, 8), (hess_inplace, 8)]


@pytest.mark.parametrize("f,n", HESS_CASES, ids=[c[0].__name__ for c in HESS_CASES])
def test_hessian_pattern_contains_the_dense_pattern(f, n):
    for seed in range(3):
        x = _x((n,), seed)
        true = zymo.hessian(f, x) != 0
        for mode in ("local", "global"):
            p = hessian_pattern(f, x, mode=mode).toarray()
            assert (p >= true).all()
            assert (p == p.T).all()
    x = _x((n,), 0)
    if f is chained:  # tridiagonal, exactly
        assert (hessian_pattern(f, x).toarray() == (zymo.hessian(f, x) != 0)).all()


# -- coloring -------------------------------------------------------------------------------


def _random_pattern(m, n, density, seed):
    return sp.random(m, n, density=density, random_state=seed, format="csr", dtype=float) != 0


@pytest.mark.parametrize("seed", range(8))
def test_column_and_row_colorings_are_valid(seed):
    p = _random_pattern(15, 12, 0.2, seed).toarray()
    cols = column_coloring(sp.csr_matrix(p))
    for a, b in itertools.combinations(range(p.shape[1]), 2):
        if cols[a] == cols[b]:
            assert not (p[:, a] & p[:, b]).any()
    rows = row_coloring(sp.csr_matrix(p))
    for a, b in itertools.combinations(range(p.shape[0]), 2):
        if rows[a] == rows[b]:
            assert not (p[a] & p[b]).any()
    assert cols.max() + 1 <= p.shape[1] and rows.max() + 1 <= p.shape[0]


def _symmetric(n, density, seed):
    p = _random_pattern(n, n, density, seed)
    return sp.csr_matrix(p + p.T + sp.identity(n, dtype=bool), dtype=bool)


@pytest.mark.parametrize("seed", range(8))
def test_star_coloring_is_a_star_coloring(seed):
    p = _symmetric(14, 0.12, seed).toarray()
    colors = star_coloring(sp.csr_matrix(p))
    n = p.shape[0]
    adj = p & ~np.eye(n, dtype=bool)
    for i, j in zip(*np.nonzero(adj), strict=True):
        assert colors[i] != colors[j]  # distance-1
    for a, b, c, d in itertools.permutations(range(n), 4):  # no path on 4 vertices in 2 colors
        if adj[a, b] and adj[b, c] and adj[c, d]:
            assert len({colors[a], colors[b], colors[c], colors[d]}) >= 3
    assert colors.max() + 1 < n


@pytest.mark.parametrize("seed", range(6))
def test_recovery_is_exact(seed):
    rng = np.random.default_rng(seed)
    p = _random_pattern(20, 16, 0.15, seed)
    J = sp.csr_matrix(p, dtype=float)
    J.data = rng.normal(size=J.nnz)
    cols, rows = column_coloring(p), row_coloring(p)
    assert abs(C.recover_columns(p, cols, J @ C.seeds(cols, 16)) - J).max() == 0
    assert abs(C.recover_rows(p, rows, C.seeds(rows, 20).T @ J) - J).max() == 0
    s = _symmetric(18, 0.15, seed)
    H = sp.csr_matrix(s, dtype=float)
    H.data = rng.normal(size=H.nnz)
    H = (H + H.T) * 0.5
    colors = star_coloring(s)
    assert abs(C.recover_symmetric(s, colors, H @ C.seeds(colors, 18)) - H).max() < 1e-15


def test_banded_patterns_take_few_colors():
    n = 200
    tri = sp.diags([np.ones(n - 1), np.ones(n), np.ones(n - 1)], [-1, 0, 1], format="csr") != 0
    assert column_coloring(tri).max() + 1 == 3
    assert star_coloring(tri).max() + 1 == 3


# -- drivers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("f,shape,consts", JAC_CASES, ids=IDS)
@pytest.mark.parametrize("mode", [Forward, Reverse], ids=["Forward", "Reverse"])
def test_sparse_jacobian_is_the_dense_jacobian(f, shape, consts, mode):
    x = _x(shape, 1, scale=3.0 if f is while_loop else 1.0)
    J = zymo.jacobian(mode, f, x, *consts, sparse=True)
    assert isinstance(J, sp.csr_matrix)
    dense = zymo.jacobian(mode, f, x, *consts).reshape(-1, x.size)
    np.testing.assert_allclose(J.toarray(), dense, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(J.toarray(), _fd_jacobian(f, x, *consts), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_both_directions_give_the_jacobian(direction):
    x = _x((10,), 2)
    plan = plan_jacobian(products, x, direction=direction)
    assert plan.direction == direction
    from zymo.sparse import jacobian_from_plan

    np.testing.assert_allclose(jacobian_from_plan(plan, products, x).toarray(), _dense(products, x), rtol=1e-13)


def test_a_dense_row_makes_reverse_cheaper():
    def dense_row(x):
        y = x * x
        y[0] = np.sum(np.sin(x))
        return y

    x = _x((9,), 3)
    plan = plan_jacobian(dense_row, x)
    assert plan.direction == "reverse" and plan.n_colors == 2
    np.testing.assert_allclose(zymo.jacobian(Forward, dense_row, x, sparse=True).toarray(), _dense(dense_row, x),
                               rtol=1e-13)


@pytest.mark.parametrize("f,n", HESS_CASES, ids=[c[0].__name__ for c in HESS_CASES])
def test_sparse_hessian_is_the_dense_hessian(f, n):
    x = _x((n,), 4)
    H = zymo.hessian(f, x, sparse=True)
    assert isinstance(H, sp.csr_matrix)
    np.testing.assert_allclose(H.toarray(), zymo.hessian(f, x), rtol=1e-12, atol=1e-10)
    h = 1e-5
    fd = np.array([(zymo.gradient(Reverse, f, x + h * e)[0] - zymo.gradient(Reverse, f, x - h * e)[0]) / (2 * h)
                   for e in np.eye(n)])
    np.testing.assert_allclose(H.toarray(), fd, rtol=1e-6, atol=1e-5)


def test_chained_hessian_takes_three_hvps():
    x = _x((50,), 5)
    assert plan_hessian(chained, x).n_colors == 3
    assert plan_jacobian(stencil_inplace, _x((50,), 5), 0.3).n_colors == 3


def test_a_plan_is_reused_at_other_inputs():
    from zymo.sparse import hessian_from_plan, jacobian_from_plan

    x = _x((10,), 6)
    plan = plan_jacobian(loop_branch, x)
    assert plan.detect == "global"
    for seed in range(3):
        y = _x((10,), 10 + seed)
        np.testing.assert_allclose(jacobian_from_plan(plan, loop_branch, y).toarray(), _dense(loop_branch, y),
                                   rtol=1e-13)
    hp = plan_hessian(hess_loop, x)
    y = _x((10,), 20)
    np.testing.assert_allclose(hessian_from_plan(hp, hess_loop, y).toarray(), zymo.hessian(hess_loop, y),
                               rtol=1e-12, atol=1e-12)


# -- errors and fallbacks ---------------------------------------------------------------------


def input_slice(x):
    k = int(np.argmax(x))
    return x[:k + 1] * 2.0


def test_global_detection_refuses_an_input_dependent_slice_and_names_the_line():
    x = np.array([0.0, 3.0, 1.0])
    with pytest.raises(UnsupportedSyntax, match="slice") as e:
        zymo.jacobian(Forward, input_slice, x, sparse=True, detect="global")
    assert "test_sparse.py" in str(e.value) and "x[:k + 1]" in str(e.value)


def test_auto_detection_falls_back_to_local_with_a_warning():
    x = np.array([0.0, 3.0, 1.0])
    with pytest.warns(ZymoWarning, match="local"):
        J = zymo.jacobian(Forward, input_slice, x, sparse=True)
    np.testing.assert_allclose(J.toarray(), _dense(input_slice, x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zymo.jacobian(Forward, input_slice, x, sparse=True, detect="local")


def test_bad_input_is_refused():
    with pytest.raises(ZymoUsageError, match="float array"):
        zymo.jacobian(Forward, np.sin, 1.0, sparse=True)
    with pytest.raises(ZymoUsageError, match="detect="):
        zymo.jacobian(Forward, loop_branch, _x((4,)), sparse=True, detect="everywhere")
    with pytest.raises(ZymoUsageError, match="direction="):
        plan_jacobian(loop_branch, _x((4,)), direction="sideways")
    plan = plan_jacobian(loop_branch, _x((4,)))
    from zymo.sparse import jacobian_from_plan

    with pytest.raises(ZymoUsageError, match="shape"):
        jacobian_from_plan(plan, loop_branch, _x((5,)))
    with pytest.raises(ZymoUsageError, match="return a float"):
        zymo.hessian(loop_branch, _x((4,)), sparse=True)
    with pytest.raises(ZymoUsageError, match="mode"):
        jacobian_pattern(loop_branch, _x((4,)), mode="sometimes")


# -- interface -----------------------------------------------------------------------------------


def test_autosparse_jacobian_and_hessian_reuse_the_preparation():
    from zymo.interface import (
        AutoSparse,
        AutoZymo,
        Constant,
        hessian,
        jacobian,
        prepare_hessian,
        prepare_jacobian,
        value_gradient_and_hessian,
    )

    b = AutoSparse(AutoZymo())
    x = _x((10,), 7)
    prep = prepare_jacobian(stencil_inplace, b, x, Constant(0.3))
    plan = prep.engine.jplan
    assert plan is not None and plan.n_colors == 3
    for seed in range(2):
        y = _x((10,), 30 + seed)
        J = jacobian(stencil_inplace, b, y, Constant(0.3), prep=prep)
        assert isinstance(J, sp.csr_matrix) and prep.engine.jplan is plan
        np.testing.assert_allclose(J.toarray(), jacobian(stencil_inplace, AutoZymo(), y, Constant(0.3)), rtol=1e-13)
    hp = prepare_hessian(chained, b, x)
    val, g, H = value_gradient_and_hessian(chained, b, x, prep=hp)
    np.testing.assert_allclose(H.toarray(), hessian(chained, AutoZymo(), x), rtol=1e-12)
    np.testing.assert_allclose(g, zymo.gradient(Reverse, chained, x)[0], rtol=1e-13)
    assert val == pytest.approx(chained(x))
    assert hp.engine.hplan.n_colors == 3


def test_autosparse_refuses_what_it_cannot_do():
    from zymo.interface import AutoFiniteDiff, AutoSparse, AutoZymo, BackendLimitation, Constant, jacobian

    with pytest.raises(BackendLimitation, match="AutoZymo"):
        AutoSparse(AutoFiniteDiff())
    with pytest.raises(BackendLimitation, match="detect"):
        AutoSparse(AutoZymo(), detect="sometimes")
    b = AutoSparse(AutoZymo())
    x = _x((10,), 8)
    with pytest.raises(ZymoUsageError, match="scipy.sparse"):
        jacobian(stencil_inplace, b, x, Constant(0.3), out=np.zeros((10, 10)))

    def inplace(y, x):
        y[:] = x * 2.0

    with pytest.raises(BackendLimitation, match="in-place"):
        jacobian(inplace, np.zeros(10), b, x)


def test_bdf_solve_with_the_sparse_jacobian():
    from scipy.integrate import solve_ivp

    def rhs(u, k):
        du = np.empty_like(u)
        du[1:-1] = k * (u[:-2] - 2.0 * u[1:-1] + u[2:]) - u[1:-1] ** 3
        du[0] = k * (u[1] - 2.0 * u[0]) - u[0] ** 3
        du[-1] = k * (u[-2] - 2.0 * u[-1]) - u[-1] ** 3
        return du

    from zymo.sparse import jacobian_from_plan

    u0 = np.sin(np.linspace(0, np.pi, 30))
    plan = plan_jacobian(rhs, u0, 400.0)
    sols = [solve_ivp(lambda t, u: rhs(u, 400.0), (0, 0.5), u0, method="BDF", jac=jac, rtol=1e-8, atol=1e-10)
            for jac in (lambda t, u: jacobian_from_plan(plan, rhs, u, 400.0),
                        lambda t, u: zymo.jacobian(Forward, rhs, u, 400.0))]
    assert all(s.status == 0 for s in sols)
    np.testing.assert_allclose(sols[0].y[:, -1], sols[1].y[:, -1], rtol=1e-12, atol=1e-14)
