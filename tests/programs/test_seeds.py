"""The behaviours of the seed threads (/work/shared/seeds), in Python.

000: reverse mode through a loop over a dynamically built tuple, writing a one-element box.
001: an input overwritten after it is read; a vector of matrices written in a loop.
002: reverse mode of a matrix product into `out=`: propagate the shadow of R, then zero it,
     for every shape.
003: a closure writing a captured buffer gives correct derivatives on repeated calls.
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_tree_close, fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, ForwardWithPrimal, Reverse, ReverseWithPrimal
from zymo.testing import check_grad

RNG = np.random.default_rng(2024)


# ============================================================================
# seed 002: np.matmul(A, B, out=R)
# ============================================================================

def mul(R, A, B):
    np.matmul(A, B, out=R)


def mul_dot(R, A, B):
    np.dot(A, B, out=R)


def mul_assign(R, A, B):
    R[...] = A @ B


def mul_loop(R, A, B):
    # only the last store matters: dA must not be 10x too large
    for _i in range(10):
        np.matmul(A, B, out=R)


SHAPES = [(3, 3, 3), (7, 3, 5), (1, 1, 1), (2, 4, 3), (5, 1, 2), (1, 3, 1)]


@pytest.mark.parametrize("fn", [mul, mul_dot, mul_assign, mul_loop], ids=lambda f: f.__name__)
@pytest.mark.parametrize("m,k,n", SHAPES, ids=[f"{m}x{k}@{k}x{n}" for m, k, n in SHAPES])
def test_seed002_matmul_out_reverse(fn, m, k, n):
    A, B = RNG.random((m, k)), RNG.random((k, n))
    R = np.zeros((m, n))
    dR = RNG.random((m, n))
    dR0 = dR.copy()
    dA, dB = np.zeros_like(A), np.zeros_like(B)
    res = zymo.autodiff(Reverse, fn, Const, Duplicated(R, dR), Duplicated(A, dA), Duplicated(B, dB))
    assert res == ((None, None, None),)
    np.testing.assert_allclose(R, A @ B, rtol=1e-12)
    np.testing.assert_allclose(dA, dR0 @ B.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dB, A.T @ dR0, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(dR, np.zeros((m, n)))   # square or not, dR is zeroed


@pytest.mark.parametrize("m,k,n", SHAPES, ids=[f"{m}x{k}@{k}x{n}" for m, k, n in SHAPES])
def test_seed002_matmul_out_accumulates_into_nonzero_shadows(m, k, n):
    A, B = RNG.random((m, k)), RNG.random((k, n))
    R = RNG.random((m, n))                   # R's old value is irrelevant
    dR, dA, dB = RNG.random((m, n)), RNG.random((m, k)), RNG.random((k, n))
    dR0, dA0, dB0 = dR.copy(), dA.copy(), dB.copy()
    zymo.autodiff(Reverse, mul, Const, Duplicated(R, dR), Duplicated(A, dA), Duplicated(B, dB))
    np.testing.assert_allclose(dA, dA0 + dR0 @ B.T, rtol=1e-12)
    np.testing.assert_allclose(dB, dB0 + A.T @ dR0, rtol=1e-12)
    np.testing.assert_array_equal(dR, 0.0)


@pytest.mark.parametrize("fn", [mul, mul_dot, mul_assign, mul_loop], ids=lambda f: f.__name__)
@pytest.mark.parametrize("m,k,n", SHAPES, ids=[f"{m}x{k}@{k}x{n}" for m, k, n in SHAPES])
def test_seed002_matmul_out_forward(fn, m, k, n):
    A, B = RNG.random((m, k)), RNG.random((k, n))
    R = np.zeros((m, n))
    tR = RNG.random((m, n))                  # overwritten by the tangent of the store
    tA, tB = RNG.random((m, k)), RNG.random((k, n))
    tA0, tB0 = tA.copy(), tB.copy()
    assert zymo.autodiff(Forward, fn, Const, Duplicated(R, tR), Duplicated(A, tA), Duplicated(B, tB)) == ()
    np.testing.assert_allclose(R, A @ B, rtol=1e-12)
    np.testing.assert_allclose(tR, tA0 @ B + A @ tB0, rtol=1e-12)
    # forward mode leaves the tangents of memory it only reads alone
    np.testing.assert_array_equal(tA, tA0)
    np.testing.assert_array_equal(tB, tB0)


@pytest.mark.parametrize("m,k,n", [(3, 3, 3), (4, 2, 3)])
def test_seed002_matmul_out_against_finite_differences(m, k, n):
    A, B = RNG.random((m, k)), RNG.random((k, n))
    check_grad(mul, np.zeros((m, n)), A, B)
    check_grad(mul_loop, np.zeros((m, n)), A, B)


def mul_then_use(R, A, B):
    np.matmul(A, B, out=R)
    return np.sum(R * R)


def test_seed002_active_return_through_out_buffer():
    A, B = RNG.random((2, 3)), RNG.random((3, 4))
    R, dR = np.zeros((2, 4)), np.zeros((2, 4))
    dA, dB = np.zeros_like(A), np.zeros_like(B)
    (_, primal) = zymo.autodiff(ReverseWithPrimal, mul_then_use, Active, Duplicated(R, dR), Duplicated(A, dA),
                                Duplicated(B, dB))
    P = A @ B
    assert primal == pytest.approx(np.sum(P * P))
    np.testing.assert_allclose(dA, 2 * P @ B.T, rtol=1e-12)
    np.testing.assert_allclose(dB, A.T @ (2 * P), rtol=1e-12)
    np.testing.assert_array_equal(dR, 0.0)
    check_grad(mul_then_use, np.zeros((2, 4)), A, B)


# ============================================================================
# seed 001: an input overwritten after it is read
# ============================================================================

def res_then_zero(x):
    res = 0.0
    for i in range(len(x)):
        res += x[i] * x[i]
        x[i] = 0.0
    return res


def square_in_place(x):
    for i in range(len(x)):
        x[i] = x[i] ** 2
    return np.sum(x)


@pytest.mark.parametrize("fn", [res_then_zero, square_in_place], ids=lambda f: f.__name__)
def test_seed001_overwritten_input_loop(fn):
    x, dx = np.array([1.0, 2.0]), np.zeros(2)
    zymo.autodiff(Reverse, fn, Active, Duplicated(x, dx))
    np.testing.assert_array_equal(dx, [2.0, 4.0])          # exact
    x0 = RNG.random(6) + 0.5
    x, dx = x0.copy(), np.zeros(6)
    (_, primal) = zymo.autodiff(ReverseWithPrimal, fn, Active, Duplicated(x, dx))
    assert primal == pytest.approx(np.sum(x0 * x0))
    np.testing.assert_array_equal(dx, 2.0 * x0)
    # repeated calls give the same (exact) answer
    for _ in range(3):
        x, dx = x0.copy(), np.zeros(6)
        zymo.autodiff(Reverse, fn, Active, Duplicated(x, dx))
        np.testing.assert_array_equal(dx, 2.0 * x0)
    check_grad(fn, x0)


def func_to_be_differentiated(mat_vec, vec):
    L = len(vec)
    for i in range(L):
        mat = mat_vec[i]
        a = vec[i]
        for j in range(3):
            mat[j, 0] = a
        mat[0, 0] = vec[i]


def vec_of_mats_loss(mat_vec, vec):
    func_to_be_differentiated(mat_vec, vec)
    return mat_vec[2][0, 0]


@pytest.mark.parametrize("init", ["zeros", "random"])
def test_seed001_vector_of_matrices(init):
    if init == "zeros":
        vec = np.zeros(3)
        mat_vec = [np.zeros((3, 1)) for _ in range(3)]
    else:
        vec = RNG.random(3)
        mat_vec = [RNG.random((3, 1)) for _ in range(3)]
    dvec = np.zeros(3)
    dmat_vec = zymo.make_zero(mat_vec)
    mv = [m.copy() for m in mat_vec]
    v = vec.copy()
    zymo.autodiff(Reverse, vec_of_mats_loss, Active, Duplicated(mv, dmat_vec), Duplicated(v, dvec))
    np.testing.assert_array_equal(dvec, [0.0, 0.0, 1.0])
    for d in dmat_vec:                       # every matrix entry is overwritten
        np.testing.assert_array_equal(d, np.zeros((3, 1)))
    for i in range(3):                       # the primal ran
        np.testing.assert_array_equal(mv[i][:, 0], [v[i]] * 3)
    # against finite differences (random cotangents on the final matrices too), both modes
    check_grad(vec_of_mats_loss, mat_vec, vec)
    g_fd = fd_grad(vec_of_mats_loss, [mat_vec, vec])
    assert_tree_close(g_fd[1], np.array([0.0, 0.0, 1.0]), 1e-8, 1e-8)
    # forward: the tangent of the loss is the tangent of vec[2]
    tv = RNG.random(3)
    tm = [RNG.random((3, 1)) for _ in range(3)]
    (t,) = zymo.autodiff(Forward, vec_of_mats_loss, Duplicated, Duplicated([m.copy() for m in mat_vec], tm),
                         Duplicated(vec.copy(), tv.copy()))
    assert t == pytest.approx(tv[2])
    for i in range(3):                       # shadows of the matrices hold the stored tangents
        np.testing.assert_allclose(tm[i][:, 0], [tv[i]] * 3)


# ============================================================================
# seed 000: iteration over a dynamically built tuple, output in a one-element box
# ============================================================================

def make_byref(out, x):
    res = 0.0
    for v in (x[0, 0], x[0, 1]):
        res += v * v
    out[0] = res


def make_byref2(out, x):
    res = 0.0
    tup = (x[0, 0], x[0, 1])
    if len(tup) > 0:
        res += tup[0]
    out[0] = res


def make_byref_tuple(out, x):
    # x is a tuple of tuples of floats, as the Julia vector of tuples
    res = 0.0
    for v in (x[0][0], x[0][1]):
        res += v * v
    out[0] = res


X000 = np.array([[2.0, 3.0], [7.9, 11.2]])


@pytest.mark.parametrize("dout0", [1.0, 3.0])
def test_seed000_tuple_iteration(dout0):
    x, dx = X000.copy(), np.zeros((2, 2))
    out, dout = np.zeros(1), np.array([dout0])
    res = zymo.autodiff(Reverse, make_byref, Const, Duplicated(out, dout), Duplicated(x, dx))
    assert res == ((None, None),)
    assert out[0] == pytest.approx(2.0 ** 2 + 3.0 ** 2)
    np.testing.assert_allclose(dx, [[2 * 2.0 * dout0, 2 * 3.0 * dout0], [0.0, 0.0]], rtol=1e-15)
    assert dout[0] == 0.0                    # out[0] was overwritten


def make_byref_list(out, x):
    # x is a list of float pairs (lists), as the Julia vector of tuples
    res = 0.0
    for v in (x[0][0], x[0][1]):
        res += v * v
    out[0] = res


@pytest.mark.parametrize("as_list", [False, True], ids=["array", "list_of_pairs"])
def test_seed000_batch_mode(as_list):
    """Seed 000 exactly: BatchDuplicated(out, (dout1, dout2)) with seeds 1.0 and 3.0."""
    f = make_byref_list if as_list else make_byref
    x = [[2.0, 3.0], [7.9, 11.2]] if as_list else X000.copy()
    dx1, dx2 = zymo.make_zero(x), zymo.make_zero(x)
    out, dout1, dout2 = np.zeros(1), np.array([1.0]), np.array([3.0])
    res = zymo.autodiff(Reverse, f, Const, zymo.BatchDuplicated(out, (dout1, dout2)),
                        zymo.BatchDuplicated(x, (dx1, dx2)))
    assert res == ((None, None),)
    assert out[0] == 13.0
    np.testing.assert_allclose(np.array(dx1, dtype=float), [[4.0, 6.0], [0.0, 0.0]], rtol=1e-15)
    np.testing.assert_allclose(np.array(dx2, dtype=float), [[12.0, 18.0], [0.0, 0.0]], rtol=1e-15)
    assert dout1[0] == 0.0 and dout2[0] == 0.0
    # the same as two separate width-1 calls (the second method)
    for seed, dxb in ((1.0, dx1), (3.0, dx2)):
        dx = zymo.make_zero(x)
        zymo.autodiff(Reverse, f, Const, Duplicated(np.zeros(1), np.array([seed])), Duplicated(x, dx))
        np.testing.assert_array_equal(np.array(dx, dtype=float), np.array(dxb, dtype=float))


def test_seed000_batch_loop_cache_one_entry_per_iteration():
    """A loop over a run-time tuple whose iterations each overwrite what the adjoint reads:
    the batch program caches one entry per iteration (not one per lane)."""
    def f(out, x):
        res = 0.0
        buf = np.zeros(1)
        for i in range(x.shape[0]):
            buf[0] = x[i, 0] * x[i, 1]
            res += buf[0] * buf[0]
        out[0] = res
    x = np.array([[2.0, 3.0], [7.9, 11.2], [0.5, -1.0]])
    args = (zymo.BatchDuplicated(np.zeros(1), (np.array([1.0]), np.array([3.0]))),
            zymo.BatchDuplicated(x, (np.zeros_like(x), np.zeros_like(x))))
    fwd, rev = zymo.autodiff_thunk(zymo.ReverseSplitNoPrimal, f, Const, *args)
    tape, _ = fwd(*args)
    counts = [int(v) for name, v in zip(_tape_names(f, args), tape.inner) if name.startswith("_k_")]
    assert counts and set(counts) == {3}  # each cache: one entry per iteration, not per lane
    rev(*args, tape)
    dx1, dx2 = args[1].dvals
    p = x[:, 0] * x[:, 1]
    np.testing.assert_allclose(dx1, np.stack([2 * p * x[:, 1], 2 * p * x[:, 0]], axis=1), rtol=1e-14)
    np.testing.assert_allclose(dx2, 3.0 * dx1, rtol=1e-14)


def _tape_names(f, args):
    comp, *_ = zymo.cache.prepare(zymo.ReverseSplitNoPrimal, f, Const, args)
    return comp.generator.tape_names


def test_seed000_two_seeds_in_separate_calls():
    # width 1 each: dout = 1.0, then dout = 3.0 (test_seed000_batch_mode does both in one call)
    dxs = []
    for dout0 in (1.0, 3.0):
        x, dx = X000.copy(), np.zeros((2, 2))
        zymo.autodiff(Reverse, make_byref, Const, Duplicated(np.zeros(1), np.array([dout0])),
                      Duplicated(x, dx))
        dxs.append(dx)
    np.testing.assert_allclose(dxs[0], [[4.0, 6.0], [0.0, 0.0]], rtol=1e-15)
    np.testing.assert_allclose(dxs[1], [[12.0, 18.0], [0.0, 0.0]], rtol=1e-15)
    np.testing.assert_allclose(dxs[1], 3.0 * dxs[0], rtol=1e-15)


def test_seed000_variants():
    check_grad(make_byref, np.zeros(1), X000)
    check_grad(make_byref2, np.zeros(1), X000)
    x, dx = X000.copy(), np.zeros((2, 2))
    zymo.autodiff(Reverse, make_byref2, Const, Duplicated(np.zeros(1), np.array([3.0])), Duplicated(x, dx))
    np.testing.assert_array_equal(dx, [[3.0, 0.0], [0.0, 0.0]])
    # forward mode: the tangent of out[0]
    tout = np.zeros(1)
    zymo.autodiff(Forward, make_byref, Const, Duplicated(np.zeros(1), tout),
                  Duplicated(X000.copy(), np.array([[1.0, 0.5], [9.0, 9.0]])))
    assert tout[0] == pytest.approx(2 * 2.0 * 1.0 + 2 * 3.0 * 0.5)


@pytest.mark.parametrize("dout0", [1.0, 3.0])
def test_seed000_tuple_of_tuples_active(dout0):
    x = ((2.0, 3.0), (7.9, 11.2))
    out, dout = np.zeros(1), np.array([dout0])
    (d,) = zymo.autodiff(Reverse, make_byref_tuple, Const, Duplicated(out, dout), Active(x))
    assert d[0] is None
    assert_tree_close(d[1], ((4.0 * dout0, 6.0 * dout0), (0.0, 0.0)), 1e-15, 1e-15)
    assert dout[0] == 0.0


def row_loop(out, x):
    # a loop whose length is only known at run time: the reverse sweep must replay
    # exactly one cached entry per iteration
    res = 0.0
    for v in x[0]:
        res = res * v + v * v
    out[0] = res


@pytest.mark.parametrize("n", [1, 2, 5])
def test_seed000_loop_cache_one_entry_per_iteration(n):
    x = RNG.random((2, n)) + 0.5
    for dout0 in (1.0, 3.0):
        check_grad(row_loop, np.zeros(1), x, cotangents=[np.array([dout0]), np.zeros((2, n))])


# ============================================================================
# seed 003: a closure writing a captured buffer
# ============================================================================

a = np.array([1.0])


def f003(x):
    a[0] = 1.0
    a[0] += x
    return a[0] ** 2


def test_seed003_captured_buffer_repeated_calls():
    for x in (0.5, 2.0, 0.5, -1.25, 2.0):
        (d,) = zymo.autodiff(Reverse, f003, Active, Active(x))
        assert d[0] == pytest.approx(2 * (1 + x), rel=1e-15)
        assert a[0] == pytest.approx(1 + x)           # the primal wrote the buffer
        (t,) = zymo.autodiff(Forward, f003, Duplicated, Duplicated(x, 1.0))
        assert t == pytest.approx(2 * (1 + x), rel=1e-15)
        (t, p) = zymo.autodiff(ForwardWithPrimal, f003, Duplicated, Duplicated(x, 2.0))
        assert t == pytest.approx(4 * (1 + x)) and p == pytest.approx((1 + x) ** 2)
    assert zymo.gradient(Reverse, f003, 0.25)[0] == pytest.approx(2.5)
    assert zymo.gradient(Forward, f003, 0.25)[0] == pytest.approx(2.5)


def make_closure_003():
    buf = np.array([1.0])

    def f(x):
        buf[0] = 1.0
        buf[0] += x
        return buf[0] ** 2
    return f, buf


def test_seed003_closure_cell_buffer():
    f, buf = make_closure_003()
    for x in (0.5, 3.0, 0.5):
        (d,) = zymo.autodiff(Reverse, f, Active, Active(x))
        assert d[0] == pytest.approx(2 * (1 + x))
        assert buf[0] == pytest.approx(1 + x)
    g, _ = make_closure_003()                          # a second closure, its own buffer
    (d,) = zymo.autodiff(Reverse, g, Active, Active(1.5))
    assert d[0] == pytest.approx(5.0)
    check_grad(f, 0.7)


def test_seed003_rebinding_the_global_buffer():
    global a
    old = a
    zymo.autodiff(Reverse, f003, Active, Active(0.25))  # compiled with the old buffer
    assert old[0] == 1.25
    try:
        a = np.array([7.0])                            # a new object: the cache must not hold the old one
        (d,) = zymo.autodiff(Reverse, f003, Active, Active(0.5))
        assert d[0] == pytest.approx(3.0)
        assert a[0] == pytest.approx(1.5)              # the new buffer was written ...
        assert old[0] == 1.25                          # ... not the old one
    finally:
        a = old


W = RNG.random((3, 3))                # "network weights": captured, only read
Ay = RNG.random((3, 3))
buf_Ayu = np.zeros((3, 3))            # a captured scratch buffer that receives active data
buf_Du = np.zeros((3, 3))


def gm3(dr, r):
    u = r[:, :, 0]
    v = r[:, :, 1]
    du = dr[:, :, 0]
    dv = dr[:, :, 1]
    np.matmul(Ay, u, out=buf_Ayu)
    buf_Du[...] = 0.5 * (buf_Ayu + u @ W)
    du[...] = buf_Du + u * u / v - 0.3 * u
    dv[...] = buf_Du * 2.0 + u * u - 0.7 * v


def test_seed003_preallocated_buffers_in_pde_rhs():
    r = RNG.random((3, 3, 2)) + 0.5
    check_grad(gm3, np.zeros((3, 3, 2)), r)
    # the captured weights get no derivative and keep their values
    W0, Ay0 = W.copy(), Ay.copy()
    for _ in range(2):                                  # repeated calls: same answer
        dr, ddr = np.zeros((3, 3, 2)), np.ones((3, 3, 2))
        dR = np.zeros_like(r)
        zymo.autodiff(Reverse, gm3, Const, Duplicated(dr, ddr), Duplicated(r.copy(), dR))
        if _ == 0:
            first = dR.copy()
        np.testing.assert_array_equal(dR, first)
    np.testing.assert_array_equal(W, W0)
    np.testing.assert_array_equal(Ay, Ay0)


def test_seed003_make_zero_and_make_zero_():
    obj = ([np.ones(2), np.ones((2, 2))], (1.5, np.ones(3)), 3)
    z = zymo.make_zero(obj)
    assert isinstance(z[0], list) and isinstance(z[1], tuple)
    assert np.all(z[0][0] == 0) and z[1][0] == 0.0 and z[2] == 3
    sh = [np.ones(2), np.full((2, 2), 5.0)]
    out = zymo.make_zero_(sh)
    assert out is sh and all(np.all(s == 0) for s in sh)
    # a shadow reused after make_zero_ gives the same gradient again
    mv = [RNG.random((3, 1)) for _ in range(3)]
    dmv = zymo.make_zero(mv)
    grads = []
    for _ in range(2):
        dv = np.zeros(3)
        zymo.make_zero_(dmv)
        zymo.autodiff(Reverse, vec_of_mats_loss, Active, Duplicated([m.copy() for m in mv], dmv),
                      Duplicated(np.ones(3), dv))
        grads.append(dv)
    np.testing.assert_array_equal(grads[0], grads[1])


def test_seed000_exact_call_with_a_list_of_tuples():
    """Seed 000's own call: x = [(2.0, 3.0)], a list of tuples of floats, BatchDuplicated with
    shadows that are lists of tuples. Tuples are immutable: the shadow tuples are replaced in
    the shadow lists, as Enzyme does. Checked against the width-1 calls and forward mode."""
    x = [(2.0, 3.0)]
    dx1, dx2 = zymo.make_zero(x), zymo.make_zero(x)
    assert dx1 == [(0.0, 0.0)]
    out, dout1, dout2 = np.zeros(1), np.array([1.0]), np.array([3.0])
    res = zymo.autodiff(Reverse, make_byref_list, Const, zymo.BatchDuplicated(out, (dout1, dout2)),
                        zymo.BatchDuplicated(x, (dx1, dx2)))
    assert res == ((None, None),)
    assert out[0] == 13.0 and x == [(2.0, 3.0)]
    assert dx1 == [(4.0, 6.0)] and dx2 == [(12.0, 18.0)]
    assert type(dx1[0]) is tuple and type(dx1[0][0]) is float
    dx = zymo.make_zero(x)
    zymo.autodiff(Reverse, make_byref_list, Const, Duplicated(np.zeros(1), np.array([1.0])), Duplicated(x, dx))
    assert dx == dx1
    # forward mode: the tangent of out[0] along (1, 0) is 2 * 2.0
    dout = np.zeros(1)
    zymo.autodiff(zymo.Forward, make_byref_list, Const, Duplicated(np.zeros(1), dout), Duplicated(x, [(1.0, 0.0)]))
    assert dout[0] == 4.0
