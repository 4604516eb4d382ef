"""The tape plan of reverse mode (`transform/reverse/plan.py`, `tape.TapePlan`), tested directly.

Each test lowers a small function, writes its reverse-mode program and asserts the decision
the plan took for a value the adjoint sweep reads: read in place, recomputed, a snapshot, or
cached in a stack, a buffer or a growing buffer. The plan is complete before the forward
sweep is written and lists every value the adjoint sweep reads exactly once.
"""
import math

import numpy as np

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.analysis.activity import analyze
from zymo.transform.reverse import TapePlan, reverse


def plan_of(f, *args, split=False):
    """The generator of `f`'s reverse mode at `args` (floats and arrays active), after `run`."""
    fn = zymo.ir(f, *args)
    active = [isinstance(a, (float, np.ndarray)) for a in args]
    act = analyze(fn, active, list(range(len(args))), seed_return=True)
    *_, rev = reverse(fn, act, seed_return=True, split=split)
    return rev


def decisions(rev, hint, role="p"):
    return [d for d in rev.plan.decisions if d.value.hint == hint and d.role == role]


def how(rev, hint, role="p"):
    (d,) = decisions(rev, hint, role)
    return d.how


def overwritten_after_read(x):
    y = np.sin(x)  # the adjoint reads the contents `x` had here
    x[0] = 0.0
    return np.sum(y)


def overwritten_in_loop(x):
    s = 0.0
    for _ in range(3):
        s += np.sum(np.sin(x))
        x[0] = s
    return s


def cheap_scalar(x):
    s = 0.0
    for i in range(x.shape[0]):
        t = x[i] * 2.0
        s += t * t
    return s


def carried(x):
    s = 1.0
    for i in range(x.shape[0]):
        s = np.sin(s * x[i])
    return s


def rows(A):
    s = 0.0
    for i in range(A.shape[0]):
        t = np.exp(A[i])
        s += np.sum(t * t)
    return s


def outside_loops(x):
    y = np.exp(x)
    return np.sum(y * y)


def until(x):
    s = 1.0
    k = 0
    while s < 100.0:
        s = s * x[k % 3] + 1.0
        k += 1
    return s


def test_array_read_after_an_in_place_overwrite_is_copied():
    rev = plan_of(overwritten_after_read, np.ones(3))
    (d,) = decisions(rev, "_saved_x")
    assert d.how == "snapshot" and "may overwrite it" in d.reason
    assert not rev.plan.tape_slots  # at the top level: one copy, no per-iteration cache


def test_array_overwritten_in_a_loop_is_copied_into_a_stack():
    rev = plan_of(overwritten_in_loop, np.ones(3))
    (d,) = decisions(rev, "_saved_x")
    assert d.how == "stack" and "copy" in d.reason


def test_cheap_scalar_is_recomputed():
    rev = plan_of(cheap_scalar, np.ones(4))
    assert how(rev, "t") == "recompute"
    assert how(rev, "i") == "in place"  # a loop index: the reversed loop has it
    assert not rev.plan.tape_slots


def powers_in_a_loop(p, h):
    """cavity_flow's pressure loop: `h ** 2` (an int power: recomputed), `(h + k) ** 2.5` (a real
    power of a number the loop changes: cached), `h ** 1.5` (the same number in every iteration:
    recomputed, `TapePlanner._invariant`)."""
    for k in range(3):
        t = h ** 2
        hk = h + k
        u = hk ** 2.5
        w = h ** 1.5
        p[1:] = p[1:] * t + p[:-1] * u + w * p[1:]
    return np.sum(p * p)


def test_an_int_power_of_numbers_is_recomputed_and_a_real_one_cached():
    p, h = np.linspace(0.2, 1.0, 5), 0.7
    rev = plan_of(powers_in_a_loop, p.copy(), h)
    assert how(rev, "t") == "recompute"
    assert how(rev, "u") != "recompute" and how(rev, "u") != "in place"
    assert how(rev, "w") == "recompute"
    # exact: against central differences and forward mode, in both backends
    for numba in (False, True):
        dp = np.zeros(5)
        ((_, dh),) = zymo.autodiff(Reverse, powers_in_a_loop, Active, Duplicated(p.copy(), dp), Active(h), numba=numba)
        fd_h = (powers_in_a_loop(p.copy(), h + 1e-6) - powers_in_a_loop(p.copy(), h - 1e-6)) / 2e-6
        (fwd_h,) = zymo.autodiff(zymo.Forward, powers_in_a_loop, zymo.Duplicated,
                                 Duplicated(p.copy(), np.zeros(5)), zymo.Duplicated(h, 1.0))
        assert dh != 0.0 and abs(dh - fd_h) <= 1e-6 * abs(fd_h)
        assert abs(dh - fwd_h) <= 1e-12 * abs(fwd_h)
        e = np.eye(5)
        fd_p = [(powers_in_a_loop(p + 1e-6 * e[k], h) - powers_in_a_loop(p - 1e-6 * e[k], h)) / 2e-6 for k in range(5)]
        np.testing.assert_allclose(dp, fd_p, rtol=1e-6)
        assert np.all(dp != 0.0)


def test_loop_carried_number_is_cached_in_a_buffer():
    rev = plan_of(carried, np.ones(4))
    assert how(rev, "s") == "buffer"  # a `for` at the top level: allocated with its trip count
    # the load x[i] is read again (nothing overwrites x); the array x itself is read in place
    assert sorted((str(d.value.type), d.how) for d in decisions(rev, "x")) == [("f64", "recompute"),
                                                                              ("f64[:]", "in place")]
    assert len(rev.plan.tape_slots) == 1 and rev.plan.cache_at_loop


def test_loop_array_is_cached_in_a_stack():
    rev = plan_of(rows, np.ones((3, 2)))
    assert how(rev, "exp") == "stack"
    # the row A[i] (named after its array): its shadow is taken again from dA
    assert sorted((str(d.value.type), d.how) for d in decisions(rev, "A", "d")) == [("f64[:,:]", "in place"),
                                                                                   ("f64[:]", "recompute")]


def test_value_outside_loops_is_read_in_place():
    rev = plan_of(outside_loops, np.ones(3))
    assert {d.how for d in rev.plan.decisions} == {"in place"}
    assert not rev.plan.tape_slots


def test_while_loop_numbers_grow():
    rev = plan_of(until, np.full(3, 2.0))
    assert how(rev, "s") == "growing buffer"  # no trip count is known at a while loop's entry
    assert rev.plan.cache_at_start and not rev.plan.cache_at_loop


def test_the_plan_is_complete_and_lists_every_read_once():
    for f, args in [(carried, (np.ones(4),)), (rows, (np.ones((3, 2)),)), (until, (np.full(3, 2.0),))]:
        rev = plan_of(f, *args)
        assert isinstance(rev.plan, TapePlan) and rev.plan.complete
        keys = [(d.value.id, d.role) for d in rev.plan.decisions]
        assert sorted(keys) == sorted(rev.needed) and len(set(keys)) == len(keys)
        text = str(rev.plan)
        assert text.startswith("tape plan\n") and len(text.splitlines()) == len(keys) + 1


def test_split_tape_starts_with_the_planned_caches():
    rev = plan_of(until, np.full(3, 2.0), split=True)
    assert rev.tape_names[:len(rev.plan.tape_slots)] == rev.plan.tape_slots
    assert len(rev.plan.tape_slots) == sum(d.how in ("list", "stack", "buffer", "growing buffer")
                                           for d in rev.plan.decisions)


def test_cache_report_counts_the_plan():
    rep = zymo.cache_report(Reverse, carried, Active, Duplicated(np.ones(4), np.zeros(4)))
    assert "tape plan: " in rep and "1 buffer" in rep and "recompute" in rep


def invariant_functions(x, c):
    """`math.sqrt(c)`, `math.exp(-c)` in the loop (correlation's `math.sqrt(float_n)`): the same
    numbers in every iteration, recomputed by the adjoint sweep rather than cached per
    iteration; `math.sqrt(x[i])` changes with `i`: cached."""
    for i in range(x.shape[0]):
        s = math.sqrt(c)
        e = math.exp(-c)
        r = math.sqrt(x[i])
        x[i] = x[i] * s + e * r
    return np.sum(x * x)


def test_loop_invariant_functions_are_recomputed():
    x, c = np.linspace(0.5, 2.0, 5), 1.7
    rev = plan_of(invariant_functions, x.copy(), c)
    assert how(rev, "exp") == "recompute"
    assert sorted(d.how for d in decisions(rev, "sqrt")) == ["buffer", "recompute"]  # s, then r
    for numba in (False, True):
        dx = np.zeros(5)
        ((_, dc),) = zymo.autodiff(Reverse, invariant_functions, Active, Duplicated(x.copy(), dx), Active(c),
                                   numba=numba)
        fd_c = (invariant_functions(x.copy(), c + 1e-6) - invariant_functions(x.copy(), c - 1e-6)) / 2e-6
        (fwd_c,) = zymo.autodiff(zymo.Forward, invariant_functions, zymo.Duplicated,
                                 Duplicated(x.copy(), np.zeros(5)), zymo.Duplicated(c, 1.0))
        assert dc != 0.0 and abs(dc - fd_c) <= 1e-6 * abs(fd_c)
        assert abs(dc - fwd_c) <= 1e-12 * abs(fwd_c)
        e = np.eye(5)
        fd_x = [(invariant_functions(x + 1e-6 * e[k], c) - invariant_functions(x - 1e-6 * e[k], c)) / 2e-6
                for k in range(5)]
        np.testing.assert_allclose(dx, fd_x, rtol=1e-6)
        assert np.all(dx != 0.0)


def draws_in_a_loop(x):
    """A random draw is no function of its operands: cached, never drawn again."""
    for i in range(x.shape[0]):
        u = np.random.random()
        x[i] = x[i] * u
    return np.sum(x * x)


def test_a_draw_in_a_loop_is_not_recomputed():
    rev = plan_of(draws_in_a_loop, np.ones(4))
    assert all(d.how != "recompute" for d in decisions(rev, "u"))
