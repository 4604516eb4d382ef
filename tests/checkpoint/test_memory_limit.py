"""Checkpointing under `memory_limit` (transform/checkpoint.py): gradients equal store-all's and
central differences, for every schedule shape (all steps stored, Revolve, a single snapshot)."""
import numpy as np
import pytest

import zymo
from zymo import Active, Const, Duplicated, Reverse
from zymo.cache import prepare
from zymo.runtime.checkpoint import Plan

LIMITS = [None, 10**7, 6000, 2500, 900, 1]


def rd(u0, D, k, dt, steps):
    u = u0.copy()
    for _t in range(steps):
        lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
        u[1:-1] += dt * (D * lap - k * u[1:-1] ** 3)
    return np.sum(u * u)


def scalar_carry(x, a, n):
    s = 0.0
    y = x[0]
    for i in range(1, n, 2):
        y = np.sin(y * a) + x[i % x.shape[0]]
        s = s + y * y
    return s + y


def nested(x, n):
    acc = 0.0
    for _t in range(n):
        for j in range(x.shape[0]):
            x[j] = np.tanh(x[j] + 0.1 * acc)
            acc = acc + x[j] * x[j]
    return acc


def post_write(x, n):
    u = x.copy()
    for _t in range(n):
        u[:] = np.sin(u) * 1.1
    u[0] = 5.0
    return np.sum(u * u)


def _fd(f, args, k, h=1e-6):
    """Central differences of f in argument k (array or float)."""
    a = args[k]
    if isinstance(a, np.ndarray):
        g = np.zeros_like(a)
        for i in range(a.size):
            p = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
            m = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
            p[k].flat[i] += h
            m[k].flat[i] -= h
            g.flat[i] = (f(*p) - f(*m)) / (2 * h)
        return g
    p, m = list(args), list(args)
    p[k] += h
    m[k] -= h
    return (f(*p) - f(*m)) / (2 * h)


@pytest.mark.parametrize("limit", LIMITS)
def test_reaction_diffusion(limit):
    u0 = np.random.default_rng(0).standard_normal(40)
    args = (u0, 0.1, 0.2, 0.1)
    ref = zymo.gradient(Reverse, rd, *args, Const(25))
    got = zymo.gradient(Reverse, rd, *args, Const(25), memory_limit=limit)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1:4], ref[1:4], rtol=1e-12)
    f = lambda u, D, k, dt: rd(u, D, k, dt, 25)  # noqa: E731
    np.testing.assert_allclose(got[0], _fd(f, list(args), 0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[1], _fd(f, list(args), 1), rtol=1e-5)
    assert np.max(np.abs(got[0])) > 1e-3


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("n", [0, 1, 2, 17])
def test_scalar_carries_step_and_zero_trips(limit, n):
    x = np.linspace(0.1, 0.9, 5)
    ref = zymo.gradient(Reverse, scalar_carry, x, 1.3, Const(n))
    got = zymo.gradient(Reverse, scalar_carry, x, 1.3, Const(n), memory_limit=limit)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12, atol=1e-14)
    f = lambda x, a: scalar_carry(x, a, n)  # noqa: E731
    np.testing.assert_allclose(got[0], _fd(f, [x, 1.3], 0), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(got[1], _fd(f, [x, 1.3], 1), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("limit", [None, 200, 30])
def test_nested_loops_checkpoint_the_outer(limit):
    x = np.linspace(-0.5, 0.5, 4)
    ref = zymo.gradient(Reverse, nested, x.copy(), Const(6))
    got = zymo.gradient(Reverse, nested, x.copy(), Const(6), memory_limit=limit)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda x: nested(x, 6), [x], 0), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("limit", [None, 100])
def test_memory_the_loop_reads_and_later_code_writes_is_restored(limit):
    x = np.linspace(0.1, 0.8, 6)
    got = zymo.gradient(Reverse, post_write, x, Const(5), memory_limit=limit)
    np.testing.assert_allclose(got[0], _fd(lambda x: post_write(x, 5), [x], 0), rtol=1e-5, atol=1e-8)
    assert got[0][0] == 0.0 and abs(got[0][1]) > 1e-3


def test_autodiff_and_config_default():
    u0 = np.random.default_rng(1).standard_normal(30)
    du_ref, du = np.zeros(30), np.zeros(30)
    ref = zymo.autodiff(Reverse, rd, Active, Duplicated(u0, du_ref), Active(0.1), Active(0.2), Active(0.1),
                        Const(20))
    zymo.config.set_memory_limit(1000)
    try:
        assert zymo.config.memory_limit() == 1000
        Plan.log = []
        got = zymo.autodiff(Reverse, rd, Active, Duplicated(u0, du), Active(0.1), Active(0.2), Active(0.1),
                            Const(20))
        (plan,) = Plan.log
    finally:
        Plan.log = None
        zymo.config.set_memory_limit(None)
    assert not plan.fits and plan.snapshots * plan.state_bytes <= 1000
    assert "checkpointed (Revolve)" in plan.describe()
    np.testing.assert_allclose(du, du_ref, rtol=1e-12)
    act = lambda r: [v for v in r[0] if v is not None]  # noqa: E731
    np.testing.assert_allclose(act(got), act(ref), rtol=1e-12)
    assert len(act(got)) == 3


def test_schedules_replay_every_step_once_reversed():
    for n, sb, ib, lim in [(100, 10, 10, 95), (4000, 16000, 48000, 4 * 2**20), (7, 10, 10, 15), (50, 8, 8, 9)]:
        p = Plan(n, sb, ib, lim)
        taped = [j for a in p.reverse if a[0] == 2 for j in range(*p.iterations(a[1], a[2]))]
        assert sorted(taped) == list(range(n)) and not p.fits


def oscillator(s0, w, dt, n):
    s = s0.copy()
    for _t in range(n):  # scalar work: the "kernels" outliner compiles it
        x, v = s[0], s[1]
        s[0] = x + dt * v
        s[1] = v - dt * w * w * (x + 0.1 * x * x * x)
    return s[0] * s[1]


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_numba_runs_the_driver_as_python_and_the_steps_compiled(numba):
    s0 = np.array([1.0, 0.2])
    args = (Duplicated(s0.copy(), np.zeros(2)), Active(1.3), Active(0.01), Const(300))
    comp, *_ = prepare(Reverse, oscillator, Active, args, numba, 200)
    assert comp.backend == "kernels" and "_ck.Plan(" in comp.source
    assert "_kernel_1(_ck_j0, _ck_j1" in comp.source  # a step's recomputation is a kernel
    got = zymo.gradient(Reverse, oscillator, s0, 1.3, 0.01, Const(300), numba=numba, memory_limit=200)
    ref = zymo.gradient(Reverse, oscillator, s0, 1.3, 0.01, Const(300))
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    assert got[1] == pytest.approx(ref[1], rel=1e-12) and got[2] == pytest.approx(ref[2], rel=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda s: oscillator(s, 1.3, 0.01, 300), [s0], 0), rtol=1e-5)


def test_list_of_arrays_state():
    def f(x, n):
        xs = [x.copy(), 2.0 * x]
        for _t in range(n):
            xs[0][:] = np.sin(xs[1]) + xs[0]
            xs[1][:] = xs[1] * 0.9 + xs[0] * 0.1
        return np.sum(xs[0] * xs[1])

    x = np.linspace(0.1, 0.6, 4)
    ref = zymo.gradient(Reverse, f, x, Const(7))
    got = zymo.gradient(Reverse, f, x, Const(7), memory_limit=100)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda x: f(x, 7), [x], 0), rtol=1e-5)


def test_bad_limit():
    with pytest.raises(ValueError):
        zymo.gradient(Reverse, rd, np.ones(4), 0.1, 0.2, 0.1, Const(2), memory_limit=-5)
