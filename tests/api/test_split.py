"""Split reverse mode: an augmented forward thunk returning a tape, a reverse thunk consuming it."""
import math

import numpy as np
import pytest

import zymo
from zymo import Active, Const, Duplicated, Reverse, ReverseSplitNoPrimal, ReverseSplitWithPrimal


def sumsq_inplace(x):
    for i in range(len(x)):
        x[i] = x[i] ** 2
    return x.sum()


def branchy(x, a):
    if a > 0.0:
        s = math.sin(a) * x[0]
    else:
        s = a * a
    for i in range(len(x)):
        s = s + x[i] * a
    return s


def write_out(out, x):
    out[0] = x[0] * x[1]


def test_split_matches_combined_and_reuses_the_tape():
    x0 = np.array([1.0, 2.0, 3.0])
    dx = np.zeros(3)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, sumsq_inplace, Active, Duplicated(x0.copy(), dx))
    x = x0.copy()
    tape, y = fwd(Duplicated(x, dx))
    assert y == pytest.approx(14.0)
    np.testing.assert_allclose(x, x0**2)  # the forward thunk ran the primal
    (derivs,) = rev(Duplicated(x, dx), 1.0, tape)
    assert derivs == (None,)
    np.testing.assert_allclose(dx, 2 * x0)
    # the same tape passed back in: its cache buffer is reused, the result is the same
    x = x0.copy()
    dx[:] = 0.0
    tape2, _ = fwd(Duplicated(x, dx), tape=tape)
    assert tape2.inner[0] is tape.inner[0]
    rev(Duplicated(x, dx), 3.0, tape2)
    np.testing.assert_allclose(dx, 6 * x0)


@pytest.mark.parametrize("a", [0.7, -0.4])
def test_split_with_branches_and_active_floats(a):
    x = np.array([0.5, -1.0, 2.0])
    fwd, rev = zymo.autodiff_thunk(ReverseSplitNoPrimal, branchy, Active, Duplicated(x, np.zeros(3)), Active(a))
    dx = np.zeros(3)
    tape, primal = fwd(Duplicated(x, dx), Active(a))
    assert primal is None
    ((_, da),) = rev(Duplicated(x, dx), Active(a), 1.0, tape)
    (_, da_ref), = zymo.autodiff(Reverse, branchy, Active, Duplicated(x, np.zeros(3)), Active(a))
    assert da == pytest.approx(da_ref)
    eps = 1e-6
    assert da == pytest.approx((branchy(x, a + eps) - branchy(x, a - eps)) / (2 * eps), rel=1e-6)


def test_split_const_return_and_misuse():
    out, dout = np.zeros(1), np.array([1.0])
    x, dx = np.array([2.0, 3.0]), np.zeros(2)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, write_out, Const, Duplicated(out, dout), Duplicated(x, dx))
    tape, _ = fwd(Duplicated(out, dout), Duplicated(x, dx))
    rev(Duplicated(out, dout), Duplicated(x, dx), tape)
    np.testing.assert_allclose(dx, [3.0, 2.0])
    assert dout[0] == 0.0
    with pytest.raises(zymo.ZymoUsageError):
        rev(Duplicated(out, dout), Duplicated(x, dx))  # no tape
    with pytest.raises(zymo.ZymoUsageError):
        zymo.autodiff(ReverseSplitWithPrimal, write_out, Const, Duplicated(out, dout), Duplicated(x, dx))


def test_reused_tape_allocates_no_cache():
    """seed 001: with a tape passed back in, the forward thunk allocates no n-float cache."""
    import tracemalloc

    n = 50_000
    x0 = np.linspace(0.1, 1.0, n)
    dx = np.zeros(n)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, sumsq_inplace, Active, Duplicated(x0.copy(), dx))
    x = x0.copy()
    tape, _ = fwd(Duplicated(x, dx))
    rev(Duplicated(x, dx), 1.0, tape)

    def peak(call):
        tracemalloc.start()
        call()
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    x = x0.copy()
    fresh = peak(lambda: fwd(Duplicated(x, dx)))
    x = x0.copy()
    reused = peak(lambda: fwd(Duplicated(x, dx), tape=tape))
    assert fresh >= 8 * n  # the cache: one float per iteration
    assert reused < 8 * n // 10


_SCALE = [2.0]


def scaled_sumsq(x, w):
    return np.sum(w * x * x) * _SCALE[0]


def test_thunks_replay_a_call_with_the_same_arguments(monkeypatch):
    """A thunk called again with the very same argument objects skips `cache.prepare` (about half
    of a small call), like `autodiff`'s replays; new objects, a changed captured global and
    a changed Numba policy prepare afresh. Every call's numbers are the closed form."""
    import zymo.cache as cache

    calls = []
    real = cache.prepare
    monkeypatch.setattr(cache, "prepare", lambda *a, **k: calls.append(1) or real(*a, **k))
    x, dx, w = np.linspace(0.1, 1.0, 4), np.zeros(4), np.linspace(1.0, 2.0, 4)
    args = (Duplicated(x, dx), Const(w))
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, scaled_sumsq, Active, *args, numba=False)

    def run(a):
        a[0].dval[:] = 0.0
        tape, y = fwd(*a)
        rev(*a, 1.0, tape)
        assert y == pytest.approx(np.sum(w * x * x) * _SCALE[0], rel=1e-14)
        np.testing.assert_allclose(a[0].dval, 2 * w * x * _SCALE[0], rtol=1e-14)

    run(args)
    n = len(calls)
    for _ in range(3):
        run(args)
    assert len(calls) == n  # replayed: the same objects
    run((Duplicated(x, dx), Const(w.copy())))
    assert len(calls) == n + 2  # a new array: both halves prepare again
    _SCALE[0] = 3.0
    try:
        n = len(calls)
        run(args)  # the captured global changed: prepared again, with the new value
        assert len(calls) > n
    finally:
        _SCALE[0] = 2.0
    run(args)
    n = len(calls)
    zymo.config.set_numba("never")
    try:
        run(args)
        assert len(calls) == n + 2  # a new policy: the recorded calls are forgotten
    finally:
        zymo.config.set_numba(None)


def _smoothed(x):
    u = x.copy()
    for _ in range(3):
        u[1:] += 0.2 * u[:-1]
    return np.sum(u ** 2)


def test_a_tape_serves_one_reverse_call():
    """A second reverse call on one tape read what the first left (the internal shadow of `u`
    it carries, the caches it popped): a wrong gradient, or a raw IndexError (helper 73)."""
    x, dx = np.array([0.9, 0.8, 0.5]), np.zeros(3)
    fw, rv = zymo.autodiff_thunk(zymo.ReverseSplitWithPrimal, _smoothed, zymo.Active, zymo.Duplicated(x, dx))
    tape, _ = fw(zymo.Duplicated(x, dx))
    rv(zymo.Duplicated(x, dx), 1.0, tape)
    first = dx.copy()
    with pytest.raises(zymo.ZymoUsageError, match="already used by a reverse call"):
        rv(zymo.Duplicated(x, np.zeros(3)), 1.0, tape)
    tape, _ = fw(zymo.Duplicated(x, dx), tape=tape)  # a new recording, in the old tape's buffers
    dx[:] = 0.0
    rv(zymo.Duplicated(x, dx), 1.0, tape)
    np.testing.assert_array_equal(dx, first)
    np.testing.assert_allclose(first, zymo.gradient(zymo.Reverse, _smoothed, x)[0], rtol=1e-14)
