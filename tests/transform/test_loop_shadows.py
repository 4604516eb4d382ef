"""Shadows of loop temporaries made where the reversed iteration first contributes to them
(issue 32, item 3: `Reverse._resolve_loop_lazy`, `_loop_first_assign`, `_adjoint_is_zero`).

Each function is checked in both modes against central differences and against the other
mode (`zymo.testing.check_grad`), then its generated program is inspected: the forward sweep neither
allocates nor caches the temporaries' shadows nor records their extents, and the adjoint
sweep zeroes none of them.
"""
import numpy as np

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.testing import check_grad


def jacobi(A, B, steps):
    """A whole-array stencil in a time loop: every temporary has one reader (deferred)."""
    for _ in range(steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
    return np.sum(A * A)


def accumulated_into_a_view(x, w, out):
    """conv2d's inner loop: the temporary's one contribution is a view of `out`'s shadow, which
    the same iteration then scales in place (the view's contents are read before that)."""
    for i in range(w.shape[0]):
        t = w[i] * x[i]
        row = out[i % 2]
        np.add(row, t, out=row)
        row *= 1.5
    return np.sum(out * out)


def read_by_a_comparison(x, y, steps):
    """hdiff's limiter: `flx * t > 0` only selects; that product gets no adjoint at all."""
    for _ in range(steps):
        flx = x[1:] - x[:-1]
        t = y[1:] - y[:-1]
        lim = np.where(flx * t > 0.0, 0.0, flx)
        x[1:] = x[1:] + 0.5 * lim
    return np.sum(x * x)


def two_readers_broadcast(x, v):
    """A temporary read twice, once broadcast against a matrix: its adjoint is summed back to
    its own shape (the primal's, read anyway by the other reader's adjoint)."""
    s = 0.0
    for i in range(x.shape[0]):
        t = v * x[i, 0]
        s += np.sum(np.sin(t * x)) + np.sum(t * t)
    return s


def _sweeps(f, *ann):
    src = zymo.generated_code(Reverse, f, Active, *ann)
    forward, adjoint = src.split("# adjoint sweep")
    return src, forward, adjoint


def _dup(a):
    return Duplicated(a, np.zeros_like(a))


def test_a_stencil_loop_keeps_no_shadow_and_records_nothing():
    rng = np.random.default_rng(0)
    A, B = rng.random((6, 5)), rng.random((6, 5))
    check_grad(lambda A, B: jacobi(A, B, 3), A, B)
    src, forward, adjoint = _sweeps(jacobi, _dup(A.copy()), _dup(B.copy()), 3)
    # the forward sweep is the primal: no caches, no extents, no shadows made
    assert "_cache" not in forward and "_shape_" not in forward and "zeros" not in forward
    assert "np.zeros" not in adjoint and "_rt.as_" not in adjoint
    # the first (and only) contribution assigns, reading the store's adjoint before it is
    # zeroed (no copy): `dt = 0.2 * dB[1:-1, 1:-1]; dB[1:(-1), 1:(-1)] = 0.0`
    assert adjoint.count(" = 0.2 * d") == 2 and "np.copy" not in adjoint
    g = zymo.gradient(Reverse, jacobi, A.copy(), B.copy(), 3)
    assert np.abs(g[0]).max() > 0.1 and np.abs(g[1]).max() > 0.01


def test_a_contribution_that_is_a_view_is_copied():
    rng = np.random.default_rng(1)
    x, w, out = rng.random((4, 3)), rng.random((4, 3)), rng.random((2, 3))
    check_grad(accumulated_into_a_view, x, w, out)
    src, forward, adjoint = _sweeps(accumulated_into_a_view, _dup(x), _dup(w), _dup(out.copy()))
    assert "_cache_dt" not in forward and "np.zeros_like(t)" not in src
    # the view's contents after `dout_1[...] = dout_1 * 1.5`, read in place by the two terms
    # that come before anything writes it again (`fuse._needless_copies`), not copied
    assert "dout_1[...] = dout_1 * 1.5" in adjoint and "dw_1 += dout_1 * x_1" in adjoint
    assert "np.copy" not in adjoint


def test_an_adjoint_nothing_contributes_to_is_left_out():
    rng = np.random.default_rng(2)
    x, y = rng.random(7), rng.random(7)
    check_grad(lambda x, y: read_by_a_comparison(x, y, 2), x, y)
    src, forward, adjoint = _sweeps(read_by_a_comparison, _dup(x.copy()), _dup(y.copy()), 2)
    # `flx * t` has no adjoint, so neither `t` nor `y`'s shadow is touched, and `t` is not kept
    assert "np.zeros" not in src and "dy" not in adjoint
    assert "_cache_t " in forward and "_cache_t_1" not in forward  # the mask alone is kept
    (gx, gy) = zymo.gradient(Reverse, read_by_a_comparison, x.copy(), y.copy(), 2)[:2]
    assert np.abs(gx).max() > 0.1 and not gy.any()


def test_a_temporary_read_twice_is_summed_back_to_its_shape():
    rng = np.random.default_rng(3)
    x, v = rng.random((3, 4)), rng.random((3, 1))
    check_grad(two_readers_broadcast, x, v)
    src, forward, adjoint = _sweeps(two_readers_broadcast, _dup(x), _dup(v))
    assert "_cache_dt" not in forward and "np.zeros" not in src
    # (`t * t`'s two terms are one: `2.0 * (dt * t_1)`, `adjoint._square`)
    assert "dt_3 = _rt.as_shape(2.0 * (dt * t_1), t_1)" in adjoint and "_rt.unbroadcast(dt_4 * x, dt_3)" in adjoint


def test_batch_lanes_make_their_shadows_alike():
    """Two lanes, started from different shadows of `A` (cotangents of its final value): each
    equals the call with that lane alone, and the lanes differ."""
    rng = np.random.default_rng(4)
    A, B = rng.random((5, 5)), rng.random((5, 5))
    lanes = (rng.random((5, 5)), rng.random((5, 5)))
    dAs, dBs = tuple(s.copy() for s in lanes), tuple(np.zeros_like(B) for _ in lanes)
    src = zymo.generated_code(Reverse, jacobi, Active, zymo.BatchDuplicated(A.copy(), dAs),
                              zymo.BatchDuplicated(B.copy(), dBs), 2)
    assert "np.zeros" not in src and "_cache" not in src
    zymo.autodiff(Reverse, jacobi, Active, zymo.BatchDuplicated(A.copy(), dAs), zymo.BatchDuplicated(B.copy(), dBs), 2)
    for s, dA, dB in zip(lanes, dAs, dBs, strict=True):
        one, one_b = s.copy(), np.zeros_like(B)
        zymo.autodiff(Reverse, jacobi, Active, Duplicated(A.copy(), one), Duplicated(B.copy(), one_b), 2)
        np.testing.assert_allclose(dA, one, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(dB, one_b, rtol=1e-13, atol=1e-13)
    assert np.abs(dAs[0] - dAs[1]).max() > 1e-3
