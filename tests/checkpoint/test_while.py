"""Checkpointed `while` loops and `for` loops with `break` (trip count unknown at entry):
`runtime.checkpoint.OnlinePlan` (online doubling, then Revolve between the snapshots kept), against
store-all and central differences, for limits from "one step per snapshot" to a single snapshot."""
import numpy as np
import pytest
from test_memory_limit import _fd

import zymo
from zymo import Const, Reverse
from zymo.runtime.checkpoint import ADVANCE, RESTORE, TAPE, OnlinePlan, Plan

LIMITS = [None, 10**6, 500, 100, 30, 1]


def brk(x, n):
    s = 0.0
    for i in range(n):
        s = s + np.sin(x[i % 5] * s + 1.0)
        if s > 100.0:
            break
    return s


def converge(x, tol):
    s = 1.0
    k = 0
    while s > tol:
        s = s * 0.9 + 0.01 * np.sin(x[k % x.shape[0]] * s)
        k += 1
    return s


def decay(u0, tol):
    u = u0.copy()
    t = 0
    while np.max(np.abs(u)) > tol:
        u[:] = 0.93 * u + 0.03 * np.sin(u)
        u[1:] += 0.01 * u[:-1]
        t += 1
    return np.sum(u * u) + t


def early_exit(x, n):
    u = x.copy()
    for _t in range(n):
        u[:] = np.tanh(1.2 * u + 0.1)
        if np.sum(u) > 4.5:
            break
    return np.sum(u * u * u)


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("n", [0, 1, 37])
def test_for_with_break_scalar_state(limit, n):
    x = np.linspace(0.1, 0.9, 5)
    ref = zymo.gradient(Reverse, brk, x, Const(n))
    got = zymo.gradient(Reverse, brk, x, Const(n), memory_limit=limit)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got[0], _fd(lambda x: brk(x, n), [x], 0), rtol=1e-5, atol=1e-8)
    if n > 1:
        assert np.max(np.abs(got[0])) > 1e-2


@pytest.mark.parametrize("limit", LIMITS)
def test_while_loop_scalar_state(limit):
    x = np.linspace(0.1, 0.9, 5)
    ref = zymo.gradient(Reverse, converge, x, 0.05)
    got = zymo.gradient(Reverse, converge, x, 0.05, memory_limit=limit)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda x: converge(x, 0.05), [x], 0), rtol=1e-5, atol=1e-9)
    assert np.min(got[0]) > 1e-3


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("tol", [0.3, 5.0])  # 5.0: the loop runs zero times
def test_while_loop_array_state(limit, tol):
    x = np.linspace(0.1, 0.9, 5)
    ref = zymo.gradient(Reverse, decay, x.copy(), tol)
    got = zymo.gradient(Reverse, decay, x.copy(), tol, memory_limit=limit)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda x: decay(x, tol), [x.copy()], 0), rtol=1e-5, atol=1e-8)
    assert np.min(np.abs(got[0])) > 1e-3


@pytest.mark.parametrize("limit", [None, 400, 60])
@pytest.mark.parametrize("n", [3, 50])  # 50: breaks out
def test_break_out_of_an_array_loop(limit, n):
    x = np.linspace(0.1, 0.9, 6)
    ref = zymo.gradient(Reverse, early_exit, x.copy(), Const(n))
    got = zymo.gradient(Reverse, early_exit, x.copy(), Const(n), memory_limit=limit)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda x: early_exit(x, n), [x.copy()], 0), rtol=1e-5, atol=1e-8)
    assert np.max(np.abs(got[0])) > 1e-2


def _simulate(p: OnlinePlan, n: int) -> tuple[list[int], int]:
    """Run plan `p`'s forward sweep over a loop of `n` iterations and its reverse actions on a
    model state (the iteration number); (iterations taped, most snapshots held at once)."""
    snaps: dict = {}
    state, most, more = 0, 0, True
    while more:
        if p.store(snaps):
            snaps[p.step] = state
        most = max(most, len(snaps))
        c = min(p.block, n - state)
        state += c
        more = p.advanced(c, snaps)
    assert state == n
    taped = []
    for a, n0, n1, x in p.reverse(snaps):
        j0, j1 = p.iterations(n0, n1)
        if a == ADVANCE:
            assert state == j0
            if x:
                snaps[n0] = state
            state = j1
        elif a == RESTORE:
            state = snaps[n0] if x else snaps.pop(n0)
        else:
            assert a == TAPE and state == j0
            taped += list(range(j1 - 1, j0 - 1, -1))
        most = max(most, len(snaps))
    return taped, most


@pytest.mark.parametrize("n", [0, 1, 2, 7, 64, 65, pytest.param(1000, marks=pytest.mark.slow),
                               pytest.param(4097, marks=pytest.mark.slow)])  # long: Numba compiles Multistage
@pytest.mark.parametrize("sizes", [(10, 10, 95), (8, 8, 9), (100, 10, 2000), (16000, 48000, 4 * 2**20)])
def test_online_plan_reverses_every_iteration_once_within_the_slots(n, sizes):
    p = OnlinePlan(*sizes)
    taped, most = _simulate(p, n)
    assert taped == list(range(n - 1, -1, -1))
    assert most <= p.slots
    assert p.n == n and (n == 0 or "checkpointed online" in p.describe())


def test_plans_are_logged_for_the_report():
    x = np.linspace(0.1, 0.9, 5)
    Plan.log = []
    try:
        zymo.gradient(Reverse, converge, x, 0.05, memory_limit=100)
        (p,) = Plan.log
    finally:
        Plan.log = None
    assert isinstance(p, OnlinePlan) and p.n == 30 and p.recomputed() > 0


def test_a_while_loop_that_rebinds_an_array_is_refused_at_its_line():
    def rebind(x, tol):
        u = x.copy()
        while np.sum(u) > tol:
            u = u * 0.5
        return np.sum(u * u)

    x = np.linspace(0.1, 0.9, 5)
    with pytest.raises(zymo.ZymoError, match="rebound in each iteration") as e:
        zymo.gradient(Reverse, rebind, x, 0.1, memory_limit=16)
    assert "test_while.py" in str(e.value)


def test_cache_report_shows_the_schedules():
    from test_memory_limit import rd

    u0 = np.random.default_rng(3).standard_normal(40)
    text = zymo.cache_report(Reverse, rd, zymo.Active, zymo.Duplicated(u0, np.zeros(40)), 0.1, 0.2, 0.1,
                             Const(25), memory_limit=2500)
    assert "checkpoint schedule under memory_limit=2500 bytes" in text
    assert "checkpointed (Revolve)" in text and "snapshot(s) of 320 bytes" in text
    assert "iterations recomputed" in text
    x = np.linspace(0.1, 0.9, 5)
    text = zymo.cache_report(Reverse, converge, zymo.Active, zymo.Duplicated(x, np.zeros(5)), 0.05,
                             memory_limit=100)
    assert "while loop at line" in text and "30 iterations (not known at its entry)" in text
    assert "memory_limit" not in zymo.cache_report(Reverse, converge, zymo.Active,
                                                   zymo.Duplicated(x, np.zeros(5)), 0.05)
    assert Plan.log is None


def two_loops(x, n, tol):
    u = x.copy()
    for _t in range(n):
        u[:] = np.sin(u) * 1.1 + 0.05
    v = u * 2.0
    while np.sum(v * v) > tol:
        v[:] = 0.9 * v + 0.01 * np.cos(v)
    w = v + u
    for _t in range(n):
        w[:] = w * 0.95 + 0.1 * np.tanh(u)
    return np.sum(w * w * u)


@pytest.mark.parametrize("limit", [None, 10**6, 3000, 1500, 400])
def test_several_loops_share_the_limit(limit):
    x = np.linspace(0.1, 0.9, 6)
    ref = zymo.gradient(Reverse, two_loops, x.copy(), Const(20), 0.5)
    Plan.log = []
    try:
        got = zymo.gradient(Reverse, two_loops, x.copy(), Const(20), 0.5, memory_limit=limit)
        plans = Plan.log
    finally:
        Plan.log = None
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda x: two_loops(x, 20, 0.5), [x.copy()], 0), rtol=1e-5, atol=1e-8)
    assert np.max(np.abs(got[0])) > 1e-2
    if limit is None:
        return
    assert len(plans) == 3
    # each loop's plan is made under what the loops before it hold for the adjoint sweep
    assert plans[0].limit == limit // 3
    assert plans[1].limit == (limit - plans[0].held_bytes()) // 2
    assert plans[2].limit == limit - plans[0].held_bytes() - plans[1].held_bytes()
    if limit >= 1500:
        assert sum(p.held_bytes() for p in plans[:2]) + plans[2].peak_bytes() <= limit
