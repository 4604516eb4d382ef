"""Reverse programs that run as Python keep their array caches for the next call
(`_rt.tape_take` / `_rt.tape_keep`, docs/decisions/0021).

A kept buffer holds the last call's entries; the next call overwrites what it pushes and reads
only that, so every gradient below is checked, call after call, against central differences and
against a second method (forward mode, or the same program that keeps nothing), with sizes that
shrink and grow between calls, from threads, after a call that raised, and under second order.
"""
import threading
import tracemalloc

import numpy as np
import pytest
from helpers import assert_tree_close, fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse, config


def overwrite_loop(x):
    """A for loop that overwrites its input: one cache of n floats (`_trips` entries)."""
    s = 0.0
    for i in range(x.shape[0]):
        x[i] = np.sin(x[i]) * x[i]
        s += x[i] * x[i]
    return s


def shrink(x, tol):
    """A while loop: its cache grows (`_rt.grow`) by its trip count, which `tol` decides."""
    a = x[0]
    while a > tol:
        a = a * 0.5 + 0.1 * np.sin(a)
    return a * a


def gather(x, idx):
    """Raises IndexError in the forward sweep when an index is out of range."""
    s = 0.0
    for i in range(idx.shape[0]):
        t = x[idx[i]]
        x[idx[i]] = t * t
        s += np.cos(t)
    return s


@pytest.fixture(autouse=True)
def _default_keep():
    config.set_keep_tapes(None)
    yield
    config.set_keep_tapes(None)


def _reverse(f, x, *consts, numba=False):
    dx = np.zeros_like(x)
    zymo.autodiff(Reverse, f, Active, Duplicated(x.copy(), dx), *map(Const, consts), numba=numba)
    return dx


def _forward(f, x, *consts):
    """The gradient column by column in forward mode (the second method)."""
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = 1.0
        dy, = zymo.autodiff(Forward, f, Duplicated, Duplicated(x.copy(), e), *map(Const, consts))
        g.flat[k] = dy
    return g


def _peak(call):
    """Peak bytes of NumPy buffers `call` allocates (tracemalloc, NumPy's domain included)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_program_keeps_its_caches_and_the_source_says_so():
    src = zymo.generated_code(Reverse, overwrite_loop, Active, Duplicated(np.ones(4), np.zeros(4)))
    assert "_cache_x, _cache_sin = _rt.tape_take(overwrite_loop_rev, (np.float64, np.float64))" in src
    assert "_cache_x = _rt.reuse_tape(_cache_x, _trips, np.float64)" in src
    assert "_rt.tape_keep(overwrite_loop_rev, (_cache_x, _cache_sin))" in src
    # split mode's tape is the caller's, and whole-program Numba allocates its own
    aug = zymo.generated_code(zymo.ReverseSplitWithPrimal, overwrite_loop, Active,
                              Duplicated(np.ones(4), np.zeros(4)))
    assert "tape_take" not in aug and "tape_keep" not in aug


def test_a_second_call_allocates_no_tape():
    x = np.linspace(0.1, 1.0, 20000)
    _reverse(overwrite_loop, x)  # compiles and keeps the tape
    kept = _peak(lambda: _reverse(overwrite_loop, x))
    config.set_keep_tapes(0)
    _reverse(overwrite_loop, x)  # keeps nothing from here on
    fresh = _peak(lambda: _reverse(overwrite_loop, x))
    # the tape is 20000 floats (160 kB); both calls allocate the shadow and the input's copy
    assert fresh - kept >= 8 * x.size
    # the kept limit is a number of bytes
    config.set_keep_tapes(8 * x.size - 1)
    _reverse(overwrite_loop, x)
    assert _peak(lambda: _reverse(overwrite_loop, x)) - kept >= 8 * x.size


@pytest.mark.parametrize("sizes", [(50, 7, 200, 7, 1), (3, 3000, 2)])
def test_sizes_that_change_between_calls(sizes):
    rng = np.random.default_rng(0)
    for n in sizes:
        x = rng.uniform(-2.0, 2.0, n)
        g = _reverse(overwrite_loop, x)
        assert np.all(g != 0.0)
        if n < 300:
            assert_tree_close(g, fd_grad(overwrite_loop, [x.copy()])[0], rtol=1e-6, atol=1e-6)
        else:  # central differences along random directions (one per element took a minute)
            for v in rng.standard_normal((3, n)):
                h = 1e-6
                fd = (overwrite_loop(x + h * v) - overwrite_loop(x - h * v)) / (2 * h)
                assert g @ v == pytest.approx(fd, rel=1e-6, abs=1e-6)
        # the second method: forward mode, or (many columns) whole-program Numba, which keeps nothing
        second = _forward(overwrite_loop, x) if n < 300 else _reverse(overwrite_loop, x, numba=True)
        assert_tree_close(g, second, rtol=1e-12, atol=1e-14)


def test_a_while_loops_growing_cache_kept_between_trip_counts():
    for a, tol in [(50.0, 1.0), (3.0, 1.0), (1e4, 0.5), (2.0, 1.5), (80.0, 0.25)]:
        da = _reverse(shrink, np.array([a]), tol)
        fd = fd_grad(shrink, [np.array([a]), tol])[0]
        fwd = _forward(shrink, np.array([a]), tol)
        assert da[0] != 0.0
        assert_tree_close(da, fd, rtol=1e-6, atol=1e-9)
        assert_tree_close(da, fwd, rtol=1e-12, atol=1e-14)


def test_calls_from_threads_take_the_kept_tape_one_at_a_time():
    rng = np.random.default_rng(1)
    xs = [rng.uniform(-2.0, 2.0, n) for n in (5, 400, 17, 90, 1, 250)]
    want = [_reverse(overwrite_loop, x) for x in xs]
    config.set_keep_tapes(0)
    assert all(np.array_equal(w, _reverse(overwrite_loop, x)) for w, x in zip(want, xs))
    config.set_keep_tapes(None)
    errors = []

    def work(k):
        for j in range(40):
            i = (k + j) % len(xs)
            if not np.array_equal(_reverse(overwrite_loop, xs[i]), want[i]):
                errors.append((k, j))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_call_that_raises_leaves_the_next_call_exact():
    x = np.linspace(0.2, 1.4, 6)
    idx = np.array([0, 3, 5, 1])
    want = _reverse(gather, x, idx)
    assert np.all(want[idx] != 0.0)
    assert_tree_close(want, fd_grad(gather, [x.copy(), idx])[0], rtol=1e-6, atol=1e-8)
    assert_tree_close(want, _forward(gather, x, idx), rtol=1e-12, atol=1e-14)
    with pytest.raises(IndexError):
        _reverse(gather, x, np.array([0, 1, 2, 3, 4, 9]))
    assert np.array_equal(_reverse(gather, x, idx), want)
    assert np.array_equal(_reverse(gather, x, idx), want)


def test_second_order_differentiates_a_program_that_keeps_its_tape():
    x = np.linspace(0.1, 1.3, 5)
    v = np.array([1.0, -0.5, 0.25, -2.0, 0.75])
    _reverse(overwrite_loop, x)  # the reverse program has kept a tape
    hv = zymo.hvp(overwrite_loop, x.copy(), v)

    def grad_dot_v(y):
        return float(np.dot(_reverse(overwrite_loop, y), v))

    eps = 1e-6
    fd = np.array([(grad_dot_v(x + eps * e) - grad_dot_v(x - eps * e)) / (2 * eps) for e in np.eye(5)])
    assert np.all(hv != 0.0)
    assert_tree_close(hv, fd, rtol=1e-5, atol=1e-7)
    assert_tree_close(zymo.hvp(overwrite_loop, x.copy(), v), hv, rtol=0, atol=0)


def test_kernels_keep_their_tape_too():
    x = np.linspace(0.1, 1.0, 20000)
    g = _reverse(overwrite_loop, x, numba="kernels")
    assert_tree_close(g, _reverse(overwrite_loop, x), rtol=1e-13, atol=1e-15)
    kept = _peak(lambda: _reverse(overwrite_loop, x, numba="kernels"))
    config.set_keep_tapes(0)
    _reverse(overwrite_loop, x, numba="kernels")
    fresh = _peak(lambda: _reverse(overwrite_loop, x, numba="kernels"))
    assert fresh - kept >= 8 * x.size
    small = np.linspace(-1.0, 0.5, 7)
    config.set_keep_tapes(None)
    assert_tree_close(_reverse(overwrite_loop, small, numba="kernels"), _forward(overwrite_loop, small),
                      rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "64"])
def test_set_keep_tapes_takes_a_number_of_bytes(bad):
    with pytest.raises(ValueError, match="set_keep_tapes"):
        config.set_keep_tapes(bad)


def test_second_derivatives_at_a_number_of_a_function_that_keeps_its_tape():
    """Found in review: `hvp` at a float differentiated the program with its `tape_take`."""
    def h(a):
        x = np.linspace(0.0, 1.0, 5) * a
        s = 0.0
        for i in range(5):
            x[i] = np.sin(x[i]) * a
            s += x[i] * x[i]
        return s

    for a in (0.7, -1.3):
        zymo.gradient(Reverse, h, a)  # the reverse program keeps a tape
        hv = zymo.hvp(h, a, 1.0)
        fd = (zymo.gradient(Reverse, h, a + 1e-6)[0] - zymo.gradient(Reverse, h, a - 1e-6)[0]) / 2e-6
        assert hv != 0.0 and abs(hv - fd) <= 1e-6 * abs(fd)
        assert abs(zymo.hessian(h, a) - hv) <= 1e-12 * abs(hv)


def two_loops(x):
    s = 0.0
    for i in range(x.shape[0]):
        x[i] = np.sin(x[i]) * 2.0
    for i in range(x.shape[0] - 1):
        x[i + 1] = x[i] * x[i + 1]
        s += np.cos(x[i])
    return s + x[-1]


def test_kept_caches_between_two_loops_leave_one_kernel_per_sweep():
    """Found in review: the kept allocation between two top-level loops split each sweep's
    kernel in two (`_rt.reuse_tape` is glue a kernel takes in, as `np.empty` was)."""
    x = np.linspace(0.1, 1.0, 9)
    src = zymo.generated_code(Reverse, two_loops, Active, Duplicated(x.copy(), np.zeros(9)), numba="kernels")
    assert src.count("def _kernel_") == 2
    for _ in range(3):
        g = _reverse(two_loops, x, numba="kernels")
        assert_tree_close(g, _reverse(two_loops, x), rtol=1e-13, atol=1e-15)
    assert_tree_close(g, fd_grad(two_loops, [x.copy()])[0], rtol=1e-6, atol=1e-8)
    assert_tree_close(g, _forward(two_loops, x), rtol=1e-12, atol=1e-14)


def test_a_bad_keep_setting_raises_before_the_call_writes(monkeypatch):
    monkeypatch.setenv("ZYMO_KEEP_TAPES", "64MiB")
    with pytest.raises(zymo.errors.ZymoUsageError, match="ZYMO_KEEP_TAPES"):
        config.set_keep_tapes(None)
    x = np.linspace(0.1, 1.0, 6)
    dx = np.zeros(6)
    with pytest.raises(zymo.errors.ZymoUsageError, match="ZYMO_KEEP_TAPES"):
        zymo.autodiff(Reverse, overwrite_loop, Active, Duplicated(x.copy(), dx))
    assert not dx.any()
    monkeypatch.setenv("ZYMO_KEEP_TAPES", "-5")
    with pytest.raises(zymo.errors.ZymoUsageError, match="ZYMO_KEEP_TAPES"):
        config.set_keep_tapes(None)
    monkeypatch.setenv("ZYMO_KEEP_TAPES", "0")
    config.set_keep_tapes(None)
    assert config.keep_tapes() == 0
