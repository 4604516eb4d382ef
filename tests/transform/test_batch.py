"""Batch mode (BatchDuplicated): W tangents or adjoints in one call equal W separate calls.

Every case runs forward and reverse mode with W = 3 lanes and compares each lane
with a width-1 call (the second method) and with central finite differences.
"""
from __future__ import annotations

import numpy as np
import pytest

import zymo
from zymo import Active, BatchDuplicated, Const, Duplicated, Forward, ForwardWithPrimal, Reverse, ZymoUsageError

W = 3


def loop_sum(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += np.sin(x[i]) * x[i]
    return s


def while_loop(x):
    s = 0.0
    i = 0
    while s < 4.0:
        s += x[i % x.shape[0]] ** 2
        i += 1
    return s * x[0]


def inplace(x):
    for i in range(1, x.shape[0]):
        x[i] = x[i] * x[i - 1] + 0.5
    return np.sum(x * x)


def views(x):
    top = x[:2]
    top *= 3.0
    x[2:] += np.tanh(top)
    return np.sum(np.exp(x) * x)


def overwritten_cache(x):
    y = np.zeros(1)
    s = 0.0
    for i in range(x.shape[0]):
        y[0] = np.cos(x[i])
        s += y[0] * y[0] * x[i]
    return s


FUNCS = [loop_sum, while_loop, inplace, views, overwritten_cache]
X = np.array([0.3, -0.7, 1.1, 0.4])


def _fd(f, x, t, h=1e-6):
    return (f(x + h * t) - f(x - h * t)) / (2 * h)


@pytest.mark.parametrize("f", FUNCS, ids=lambda f: f.__name__)
def test_batch_forward_equals_separate_calls_and_fd(f):
    rng = np.random.default_rng(0)
    ts = tuple(rng.standard_normal(X.shape) for _ in range(W))
    (tans,) = zymo.autodiff(Forward, f, zymo.BatchDuplicated, BatchDuplicated(X.copy(), tuple(t.copy() for t in ts)))
    assert len(tans) == W
    for t, got in zip(ts, tans):
        (one,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(X.copy(), t.copy()))
        assert got == pytest.approx(one, rel=1e-13, abs=1e-13)
        assert got == pytest.approx(_fd(f, X.copy(), t), rel=1e-6, abs=1e-8)
    assert len({round(float(t), 9) for t in tans}) == W  # the lanes differ: no lane copied another


@pytest.mark.parametrize("f", FUNCS, ids=lambda f: f.__name__)
def test_batch_reverse_equals_separate_calls_and_fd(f):
    dxs = tuple(np.zeros_like(X) for _ in range(W))
    res = zymo.autodiff(Reverse, f, Active, BatchDuplicated(X.copy(), dxs))
    assert res == ((None,),)
    g1 = np.zeros_like(X)
    zymo.autodiff(Reverse, f, Active, Duplicated(X.copy(), g1))
    fd = np.array([_fd(f, X.copy(), e) for e in np.eye(X.size)])
    for d in dxs:  # every lane is seeded with 1.0
        np.testing.assert_allclose(d, g1, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(d, fd, rtol=1e-6, atol=1e-8)


def test_batch_reverse_with_output_seeds():
    def f(y, x):
        for i in range(y.shape[0]):
            y[i] = x[i] * x[(i + 1) % x.shape[0]] ** 2
    x = np.array([0.5, -1.5, 2.0])
    seeds = (np.array([1.0, 0.0, 2.0]), np.array([0.0, -3.0, 0.5]))
    dys = tuple(s.copy() for s in seeds)
    dxs = (np.zeros(3), np.zeros(3))
    zymo.autodiff(Reverse, f, Const, BatchDuplicated(np.zeros(3), dys), BatchDuplicated(x.copy(), dxs))
    J = np.zeros((3, 3))
    for j in range(3):
        e = np.eye(3)[j]
        J[:, j] = (_apply(f, x + 1e-6 * e) - _apply(f, x - 1e-6 * e)) / 2e-6
    for s, dx, dy in zip(seeds, dxs, dys):
        np.testing.assert_allclose(dx, J.T @ s, rtol=1e-7)
        np.testing.assert_array_equal(dy, 0.0)  # the stores consumed the output shadow


def _apply(f, x):
    y = np.zeros(3)
    f(y, x.copy())
    return y


def test_batch_active_float_returns_one_derivative_per_lane():
    def f(a, x):
        return a * np.sum(x * x)
    x = np.array([1.0, 2.0])
    dxs = (np.zeros(2), np.zeros(2))
    ((da, _),) = zymo.autodiff(Reverse, f, Active, Active(3.0), BatchDuplicated(x, dxs))
    assert da == (pytest.approx(5.0), pytest.approx(5.0))
    np.testing.assert_allclose(dxs[0], [6.0, 12.0])


def test_batch_forward_with_primal_and_array_return():
    def f(x):
        return np.sin(x) * x[0]
    x = np.array([0.2, 0.9])
    ts = (np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    (tans, prim) = zymo.autodiff(ForwardWithPrimal, f, BatchDuplicated, BatchDuplicated(x, ts))
    np.testing.assert_allclose(prim, np.sin(x) * x[0])
    J = np.stack(tans, axis=1)
    np.testing.assert_allclose(J, [[np.cos(0.2) * 0.2 + np.sin(0.2), 0.0],
                                   [np.sin(0.9), np.cos(0.9) * 0.2]], rtol=1e-14)


def test_batch_usage_errors():
    x = np.ones(2)

    def z():
        return np.zeros(2)
    with pytest.raises(ZymoUsageError, match="same number of shadows"):
        zymo.autodiff(Forward, lambda a, b: np.sum(a * b), BatchDuplicated, BatchDuplicated(x, (z(), z())),
                      BatchDuplicated(x.copy(), (z(),)))
    with pytest.raises(ZymoUsageError, match="cannot be mixed"):
        zymo.autodiff(Forward, lambda a, b: np.sum(a * b), BatchDuplicated, BatchDuplicated(x, (z(), z())),
                      Duplicated(x.copy(), z()))
    with pytest.raises(ZymoUsageError, match="return activity is BatchDuplicated"):
        zymo.autodiff(Forward, loop_sum, Duplicated, BatchDuplicated(x, (z(), z())))
    with pytest.raises(ZymoUsageError, match="tuple of shadows"):
        BatchDuplicated(x, z())
    with pytest.raises(ZymoUsageError, match="shadow 2"):
        zymo.autodiff(Forward, loop_sum, BatchDuplicated, BatchDuplicated(x, (z(), np.ones(3))))
    with pytest.raises(ZymoUsageError, match="float cannot be BatchDuplicated"):
        zymo.autodiff(Reverse, lambda a: a * a, Active, BatchDuplicated(2.0, (0.0, 0.0)))


def test_batch_split_mode():
    fwd, rev = zymo.autodiff_thunk(zymo.ReverseSplitWithPrimal, overwritten_cache, Active,
                                   BatchDuplicated(X.copy(), (np.zeros(4), np.zeros(4))))
    dxs = (np.zeros(4), np.zeros(4))
    tape, y = fwd(BatchDuplicated(X.copy(), dxs))
    assert y == pytest.approx(overwritten_cache(X.copy()))
    rev(BatchDuplicated(X.copy(), dxs), 1.0, 2.0, tape)
    g = np.zeros(4)
    zymo.autodiff(Reverse, overwritten_cache, Active, Duplicated(X.copy(), g))
    np.testing.assert_allclose(dxs[0], g, rtol=1e-13)
    np.testing.assert_allclose(dxs[1], 2.0 * g, rtol=1e-13)


def test_batch_code_runs_the_primal_once():
    src = zymo.generated_code(Reverse, overwritten_cache, Active,
                              BatchDuplicated(X.copy(), (np.zeros(4), np.zeros(4))))
    assert src.count("np.cos(") == 1      # the primal once
    assert src.count("np.sin(") == 2      # its derivative once per lane
    assert "dx_1" in src and "dx_2" in src


def test_a_batch_of_one_lane_writes_its_shadow():
    """One lane is still a batch: the shadow in the tuple receives the derivative (it used to
    be passed as the tuple itself, and the derivative was silently lost)."""
    x = np.linspace(0.3, 1.7, 5)
    dx = np.zeros(5)
    zymo.autodiff(Reverse, loop_sum, Active, BatchDuplicated(x.copy(), (dx,)))
    expected = np.sin(x) + x * np.cos(x)
    np.testing.assert_allclose(dx, expected, rtol=1e-13)
    ref = np.zeros(5)
    zymo.autodiff(Reverse, loop_sum, Active, Duplicated(x.copy(), ref))
    np.testing.assert_allclose(dx, ref, rtol=1e-15)
    # forward: one tangent per lane, as a tuple of one
    v = np.cos(np.arange(5.0))
    (tangents,) = zymo.autodiff(Forward, loop_sum, BatchDuplicated, BatchDuplicated(x.copy(), (v,)))
    assert isinstance(tangents, tuple) and len(tangents) == 1
    assert tangents[0] == pytest.approx(float(expected @ v), rel=1e-13)
    with pytest.raises(ZymoUsageError, match="BatchDuplicated"):
        zymo.autodiff(Forward, loop_sum, Duplicated, BatchDuplicated(x.copy(), (v,)))
