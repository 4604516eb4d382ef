"""Sums across a loop's iterations expanded (`codegen/expand.py`): which loops qualify, the twin
computing the serial kernel's numbers to the bit whatever order its blocks run in, and the
run-time conditions (float64 sums, memory)."""
from __future__ import annotations

import ast

import numpy as np
import pytest

import zymo
from zymo.codegen.expand import expanded_loops
from zymo.codegen.outline import Kernel
from zymo.codegen.parallel import to_prange

# rows_map's adjoint: `dv[j]` summed over the rows beside a carried row sum `acc`
KERNEL = '''
def k(A, u, v, dA, du, dv, dB, n, m):
    for _r in range(n):
        i = n - 1 - _r
        if m > 0:
            acc = du[i]
            for _r2 in range(m):
                j = m - 1 - _r2
                d = dB[i, j]
                dv[j] += d * A[i, j] * A[i, j]
                acc += d * np.sin(A[i, j])
                dA[i, j] += d * u[i] * np.cos(A[i, j]) + 2.0 * d * v[j] * A[i, j]
            du[i] = acc
    for i in range(1, n):
        for j in range(m):
            dv[j] += dB[i, j] * np.exp(dB[i - 1, j])
    return ()
'''
NDIMS = {"A": 2, "u": 1, "v": 1, "dA": 2, "du": 1, "dv": 1, "dB": 2}


def _expanded(src: str) -> list[tuple[int, list[str]]]:
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return [(loop.lineno, sorted(arrays)) for loop, arrays in expanded_loops(fn, NDIMS, frozenset(), [])]


def test_sums_over_the_outer_loop_are_expanded():
    assert _expanded(KERNEL) == [(3, ["dv"]), (14, ["dv"])]


@pytest.mark.parametrize("change", [
    ("dv[j] += d * A[i, j] * A[i, j]", "dv[j] += d * A[i, j] * dv[0]"),  # the sum is read in the loop
    ("dv[j] += d * A[i, j] * A[i, j]", "dv[i] += d * A[i, j] * A[i, j]"),  # one element per row: no sum
    ("dv[j] += d * A[i, j] * A[i, j]", "dv[j] += d * A[i, j] * A[i, j]\n                dv[0] += d"),
    ("dv[j] += d * A[i, j] * A[i, j]", "dv[j] += d * A[i, j] * A[i, j]\n                du[j] += d"),  # du too
    ("        if m > 0:", "        if i > 0:"),  # a guard that changes with the row
    ("            for _r2 in range(m):", "            for _r2 in range(i):"),  # a triangle
])
def test_loops_whose_sums_cannot_be_replayed_stay_serial(change):
    src = KERNEL.replace(*change)
    assert change[0] in KERNEL
    assert 3 not in [line for line, _ in _expanded(src)]


def test_sums_of_a_multiply_add_stay_serial():
    """The temporary's traffic would cost more than a second thread gives (`expand._costly`)."""
    assert _expanded(KERNEL.replace("np.exp(dB[i - 1, j])", "dB[i - 1, j]")) == [(3, ["dv"])]


def test_bounds_computed_in_the_kernel_stay_serial():
    """The temporaries are allocated first, from the kernel's parameters only."""
    src = KERNEL.replace("    for _r in range(n):", "    t = n\n    for _r in range(t):").replace(
        "i = n - 1 - _r", "i = t - 1 - _r")
    assert [line for line, _ in _expanded(src)] == [15]


class _Numba:
    @staticmethod
    def prange(*args):
        return reversed(range(*args))  # blocks and rows in reverse order: the order must not matter


class _Rt:
    @staticmethod
    def span(lo, hi):
        return hi - lo if hi > lo else 0

    @staticmethod
    def nonneg(i):
        assert i >= 0, "an index read as unsigned is negative"
        return i


@pytest.mark.parametrize("n, m", [(5, 4), (1, 3), (4, 1), (0, 3), (3, 0)])
def test_expanded_twin_equals_the_serial_kernel_to_the_bit(n, m):
    fn = ast.parse(KERNEL).body[0]
    assert isinstance(fn, ast.FunctionDef)
    twin = to_prange(fn, [], "k_parallel", [], expanded_loops(fn, NDIMS, frozenset(), []))
    src = ast.unparse(twin)
    assert src.count("np.empty") == 2 and src.index("np.empty") < src.index("for ")

    def run(code, name, *threads):
        env = {"numba": _Numba, "_rt": _Rt, "np": np}
        exec(code, env)
        rng = np.random.default_rng(4)
        rows, cols = max(n, 1), max(m, 1)
        args = [rng.random((rows, cols)), rng.random(rows), rng.random(cols), rng.random((rows, cols)),
                rng.random(rows), rng.random(cols), rng.random((rows, cols))]
        env[name](*args, n, m, *threads)
        return args

    for threads in (1, 2, 3):
        for want, got in zip(run(KERNEL, "k"), run(src, "k_parallel", threads)):
            assert np.array_equal(want, got)


def _kernel(floats):
    calls = []

    def serial(*args):
        calls.append("serial")

    def twin(*args):
        calls.append("twin")
        if args[-1] == 99:
            raise MemoryError

    k = Kernel("k", serial, serial, twin, [0], floats)
    k(np.zeros(3))  # the first call decides: the compiled kernel serves
    return k, calls


def test_twin_runs_only_on_float64_sums_and_falls_back_when_memory_fails(monkeypatch):
    zymo.config.set_threads(2)
    try:
        k, calls = _kernel([0])
        k(np.zeros(3))
        k(np.zeros(3, np.float32))
        assert calls == ["serial", "twin", "serial"]
        import zymo.codegen.outline as outline

        monkeypatch.setattr(outline, "_threads", lambda: 99)
        monkeypatch.setattr("numba.config.NUMBA_NUM_THREADS", 99)
        monkeypatch.setattr("numba.set_num_threads", lambda n: None)
        k(np.zeros(3))
        assert calls[-2:] == ["twin", "serial"]
    finally:
        zymo.config.set_threads(None)


@pytest.mark.parametrize("assign", ["m = 5", "m = 2", "n = 2"])
def test_review_defect_bounds_the_loop_assigns_stay_serial(assign):
    """The temporary is sized from the parameters before the loop, and the adding pass evaluates
    the bounds again after it: a parameter the loop assigns (`m = 5` with `m` 3) wrote past the
    temporary's end (IndexError as Python; out of bounds in Numba)."""
    src = f'''
def k(A, R, n, m):
    for i in range(n):
        {assign}
        for j in range(m):
            R[j] += np.cos(A[i, j])
    return ()
'''
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    twin = ast.unparse(to_prange(fn, [], "k_parallel", [], expanded_loops(fn, {"A": 2, "R": 1}, frozenset(), [])))

    def run(code, name, *threads):
        env = {"numba": _Numba, "_rt": _Rt, "np": np}
        exec(code, env)
        args = [np.random.default_rng(8).random((4, 5)), np.zeros(5)]
        env[name](*args, 4, 3, *threads)
        return args

    for threads in (1, 2):
        for want, got in zip(run(src, "k"), run(twin, "k_parallel", threads)):
            assert np.array_equal(want, got)
