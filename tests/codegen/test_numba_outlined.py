"""Once a compiled function has `ew_loops._INLINE_BUDGET` instructions, each further
elementwise statement's loops are a function of their own (`ew_loops._statement`, `_shared`),
called where the statement stands, and equal statements (same expression, mode and types)
share one function per module. A program of many statements is then many functions of
moderate size for LLVM instead of one large one (cavity_flow's whole-program compile: about
80 s before, about 20 s after). The calls keep every semantics of the loops: the values,
errors raised inside (shapes that do not broadcast), new arrays returned to the caller with
their reference, sums, and the statements in a loop. The tests set the budget to 0 (every
statement a call) and compare with a budget no function reaches.
"""
import re

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from zymo.codegen.numba import ew_loops
from zymo.codegen.numba import twins as rt


@pytest.fixture(autouse=True)
def every_statement_a_call(monkeypatch):
    monkeypatch.setattr(ew_loops, "_INLINE_BUDGET", 0)


def _steps(dispatcher):
    """The names of the statement functions the compiled `dispatcher` defines."""
    return set(re.findall(r"define [^@]*@(zymo_ew_step_\w+)\(", dispatcher.inspect_llvm(dispatcher.signatures[0])))


@numba.njit
def _six_equal_statements(a, b, c, d, e, f, g):
    rt.ew_set(c, "x0 * x1 + 1.0", (a, b))
    rt.ew_set(d, "x0 * x1 + 1.0", (b, a))
    rt.ew_set(e, "x0 * x1 + 1.0", (a, a))
    rt.acc_ew(f, "x0 * x1 + 1.0", (a, b))
    rt.acc_ew(g, "x0 * x1 + 1.0", (b, b))
    rt.acc_ew(f, "x0 - x1", (a, b))
    return rt.ew_sum("x0 * x1", (a, b))


def test_equal_statements_share_one_function_and_keep_their_values():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 7, 5))
    outs = [np.zeros((7, 5)) for _ in range(5)]
    f0, g0 = rng.standard_normal((2, 7, 5))
    outs[3][...], outs[4][...] = f0, g0
    total = _six_equal_statements(a, b, *outs)
    np.testing.assert_array_equal(outs[0], a * b + 1.0)
    np.testing.assert_array_equal(outs[1], b * a + 1.0)
    np.testing.assert_array_equal(outs[2], a * a + 1.0)
    np.testing.assert_array_equal(outs[3], f0 + (a * b + 1.0) + (a - b))
    np.testing.assert_array_equal(outs[4], g0 + (b * b + 1.0))
    assert total == pytest.approx(float(np.sum(a * b)), rel=1e-13)
    # "=" over (a, b), "+=" over (a, b), "+=" of the other expression, and the sum: four
    # functions for six statements (the three "=" share one, the two "+=" of one expression one)
    assert len(_steps(_six_equal_statements)) == 4


@numba.njit
def _new_in_a_loop(x, n):
    acc = np.zeros_like(x)
    for _ in range(n):
        t = rt.ew_new("x0 * 2.0 + x1", (x, acc))
        rt.ew_set(acc, "x0", (t,))
    return acc


@pytest.fixture
def nrt_stats():
    from numba.core.runtime import _nrt_python

    was = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    yield
    if not was:
        _nrt_python.memsys_disable_stats()


def test_new_arrays_returned_by_the_calls_are_owned_once(nrt_stats):
    x = np.arange(12.0).reshape(3, 4)
    _new_in_a_loop(x, 1)  # compiled before counting
    stats = numba.core.runtime.rtsys.get_allocation_stats()
    got = _new_in_a_loop(x, 50)
    after = numba.core.runtime.rtsys.get_allocation_stats()
    want = np.zeros_like(x)
    for _ in range(50):
        want = x * 2.0 + want
    np.testing.assert_array_equal(got, want)
    del got
    final = numba.core.runtime.rtsys.get_allocation_stats()
    # every array the loop made was freed: one allocation more than frees while `got` lived
    # (the result), none after
    assert after.alloc - after.free - (stats.alloc - stats.free) == 1
    assert final.alloc - final.free == stats.alloc - stats.free


@numba.njit
def _mismatch(d, a, b):
    rt.ew_set(d, "x0 + x1", (a, b))
    return 1


def test_an_error_inside_a_statement_function_reaches_the_caller():
    d = np.zeros((3, 4))
    with pytest.raises(ValueError, match="could not be broadcast"):
        _mismatch(d, np.ones((3, 4)), np.ones(3))
    assert _mismatch(d, np.ones((3, 4)), np.ones(4)) == 1
    np.testing.assert_array_equal(d, 2.0)


def test_below_the_budget_statements_stay_in_their_function(monkeypatch):
    monkeypatch.setattr(ew_loops, "_INLINE_BUDGET", 10**9)
    fn = numba.njit(_six_equal_statements.py_func)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 4, 3))
    outs = [np.zeros((4, 3)) for _ in range(5)]
    fn(a, b, *outs)
    np.testing.assert_array_equal(outs[0], a * b + 1.0)
    assert _steps(fn) == set()


@numba.njit
def _update(d, a, b):
    rt.ew_out(d, "x0 - 0.5 * (x1 - x2)", (d, a, b), "np.subtract(x0, 0.5 * (x1 - x2), out=d)")


@numba.njit
def _shifted(d):
    rt.ew_set(d[1:], "x0 * 2.0 + x1", (d[:-1], d[1:]))


@numba.njit
def _reduce(d, e):
    return rt.acc_unbroadcast(d, d, "x0 * 2.0", (e,))


@pytest.mark.parametrize("budget", [0, 10**9])
def test_loops_that_write_each_element_once_are_parallel_and_keep_numpys_values(monkeypatch, budget):
    """A statement's innermost loop reads its operands and reads and writes `d` at its own
    element only (an operand overlapping `d` otherwise is copied first), so it is marked
    `llvm.loop.parallel_accesses`: LLVM vectorizes it without testing at run time whether the
    pointers overlap, also where an operand is `d` itself (an argument apart from `d` once the
    statement is a call). Sums and reductions into a `d` that broadcasts are not marked."""
    monkeypatch.setattr(ew_loops, "_INLINE_BUDGET", budget)
    # LLVM's vectorized IR, at the level users compile at (the suite compiles at NUMBA_OPT=0)
    monkeypatch.setattr(numba.core.config, "OPT", numba.core.config._OptLevel(3))
    rng = np.random.default_rng(2)
    H, E = rng.standard_normal((2, 40, 42))
    d, a, b = E[1:, :], H[1:, :], H[:-1, :]
    want = d - 0.5 * (a - b)
    update = numba.njit(_update.py_func)
    update(d, a, b)
    np.testing.assert_array_equal(d, want)
    llvm = update.inspect_llvm(update.signatures[0])
    assert "llvm.loop.parallel_accesses" in llvm and "<4 x double>" in llvm
    assert "vector.memcheck" not in llvm

    x = rng.standard_normal((30, 33))
    want = x.copy()
    want[1:] = want[:-1] * 2.0 + want[1:]
    shifted = numba.njit(_shifted.py_func)
    shifted(x)
    np.testing.assert_array_equal(x, want)

    reduce = numba.njit(_reduce.py_func)
    e = rng.standard_normal((30, 333))
    for d in (rng.standard_normal(333), rng.standard_normal((30, 1))):  # along the first axis, the last
        want = d + np.sum(e * 2.0, axis=0 if d.ndim == 1 else 1, keepdims=d.ndim == 2)
        np.testing.assert_allclose(reduce(d.copy(), e), want, rtol=1e-13)
