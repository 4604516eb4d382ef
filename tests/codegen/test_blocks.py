"""Loop nests run in parallel by blocks of their inner loop (`codegen/blocks.py`): which nests
qualify, and the blocked twin computing the serial kernel's numbers to the bit, whatever order
the blocks run in."""
from __future__ import annotations

import ast
import types

import numpy as np
import pytest

import zymo
from zymo import Reverse
from zymo.codegen.blocks import blocked_nests
from zymo.codegen.outline import Kernel
from zymo.codegen.parallel import parallel_loops, to_prange
from zymo.testing import check_grad

KERNEL = '''
def k(A, x, y, dx, z, n, m):
    for j in range(n):
        if n > 0:
            _at_y = y[j]
            for i in range(m):
                x[i] = x[i] + A[j, i] * _at_y
    for _r in range(n):
        j = n - 1 - _r
        _at_dx = dx[j]
        for _r2 in range(1, m):
            i = m - _r2
            z[i] += A[j, i] * _at_dx * x[i]
    return ()
'''
NDIMS = {"A": 2, "x": 1, "y": 1, "dx": 1, "z": 1}


def _nests(src: str, ndims=NDIMS) -> list[int]:
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    nests = blocked_nests(fn, ndims, frozenset(), parallel_loops(fn, ndims))
    return [n.lineno for n in nests]


def test_nests_with_an_independent_inner_loop_run_by_blocks():
    assert _nests(KERNEL) == [3, 8]


class _Numba:
    """`numba` for the twin run as Python: blocks in reverse order."""

    @staticmethod
    def prange(n):
        return reversed(range(n))


class _Rt:
    @staticmethod
    def span(lo, hi):
        return hi - lo if hi > lo else 0

    @staticmethod
    def nonneg(i):
        assert i >= 0, "an index read as unsigned is negative"
        return i


@pytest.mark.parametrize("n, m", [(4, 7), (5, 2), (3, 1), (0, 4), (4, 0)])
def test_blocked_twin_equals_the_serial_kernel_to_the_bit(n, m):
    fn = ast.parse(KERNEL).body[0]
    assert isinstance(fn, ast.FunctionDef)
    nests = blocked_nests(fn, NDIMS, frozenset(), [])
    twin = to_prange(fn, [], "k_parallel", nests)
    src = ast.unparse(twin)
    assert src.count("numba.prange(_threads") == 2 and twin.args.args[-1].arg.startswith("_threads")
    # the first nest reads its index over `range(m)` unsigned; the second subscripts with `i = m - _r2`
    assert "x[_rt.nonneg(i)] = x[_rt.nonneg(i)] + A[j, _rt.nonneg(i)]" in src and "z[_rt.nonneg(i)]" not in src

    def run(code, name, *threads):
        env = {"numba": _Numba, "_rt": _Rt}
        exec(code, env)
        rng = np.random.default_rng(3)
        args = [rng.random((max(n, 1), max(m, 1))), rng.random(max(m, 1)), rng.random(max(n, 1)),
                rng.random(max(n, 1)), rng.random(max(m, 1))]
        env[name](*args, n, m, *threads)
        return args

    for threads in (1, 2, 3, 8):
        for want, got in zip(run(KERNEL, "k"), run(src, "k_parallel", threads)):
            assert np.array_equal(want, got)


@pytest.mark.parametrize("inner", [
    "for i in range(j):\n                x[i] = x[i] + A[j, i]",  # bounds move with the outer loop
    "for i in range(m):\n                x[i] = x[i] + A[j, i] * x[j]",  # reads another block's element
    "for i in range(m):\n                t = i + j\n                x[t] = x[t] + A[j, i]",  # index moves with j
    "for i in range(m):\n                s = s + A[j, i]\n                x[i] = s",  # a carried sum
])
def test_nests_that_blocks_would_change_stay_serial(inner):
    src = (f"def k(A, x, n, m):\n    s = 0.0\n    for j in range(n):\n        if n > 0:\n            {inner}\n"
           "    return ()\n")
    assert _nests(src, {"A": 2, "x": 1}) == []


def test_head_reading_a_written_array_or_a_statement_after_the_inner_loop_stay_serial():
    head = KERNEL.replace("_at_y = y[j]", "_at_y = x[j]")
    after = KERNEL.replace("                x[i] = x[i] + A[j, i] * _at_y\n",
                           "                x[i] = x[i] + A[j, i] * _at_y\n            y[j] = 0.0\n")
    read_later = KERNEL.replace("    return ()", "    return (_at_dx,)")
    assert _nests(head) == [8] and _nests(after) == [9] and _nests(read_later) == [3]


def mvt_like(A, x, y):
    n, m = A.shape
    for j in range(n):
        for i in range(m):
            x[i] += A[j, i] * y[j]
    return np.sum(x * x)


def test_two_threads_run_the_blocks_with_the_same_bits():
    zymo.config.set_numba("kernels")
    try:
        rng = np.random.default_rng(11)
        args = [rng.random((30, 40)), rng.random(40), rng.random(30)]
        check_grad(mvt_like, *[a[:5, :4] if a.ndim == 2 else a[:4] if a.shape[0] == 40 else a[:5] for a in args])
        g1 = zymo.gradient(Reverse, mvt_like, *[a.copy() for a in args])
        programs = [c.fn for entries in zymo.cache.COMPILED.values() for c in entries
                    if c.backend == "kernels" and c.ir.name == "mvt_like" and c.generator is not None]
        twins = [k.parallel for fn in programs for k in fn.__globals__.values()
                 if isinstance(k, Kernel) and k.parallel is not None]
        assert twins and any("_threads" in _source(t) for t in twins)
        zymo.config.set_threads(2)
        try:
            g2 = zymo.gradient(Reverse, mvt_like, *[a.copy() for a in args])
        finally:
            zymo.config.set_threads(None)
        for a, b in zip(g1, g2):
            assert np.array_equal(a, b) and np.any(a)
    finally:
        zymo.config.set_numba(None)


def _source(twin) -> str:
    py = getattr(twin, "py_func", twin)
    assert isinstance(py, types.FunctionType)
    import inspect

    return inspect.getsource(py)


@pytest.mark.parametrize("head", ["w = w * r", "n = 2"])
def test_review_defect_scalars_carried_by_the_outer_loop_or_its_bounds_keep_the_nest_serial(head):
    """Each block runs the outer loop itself: a scalar carried between its iterations (`w`) would
    run on from another block's value (in Numba: a reduction variable or a race), bounds the nest
    assigns (`n`) would be evaluated again."""
    src = f'''
def k(A, x, w, r, n, m):
    for j in range(n):
        {head}
        for i in range(m):
            x[i] = x[i] + A[j, i] * w
    return ()
'''
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    nests = blocked_nests(fn, {"A": 2, "x": 1}, frozenset(), [])
    twin = ast.unparse(to_prange(fn, [], "k_parallel", nests))

    def run(code, name, *threads):
        env = {"numba": _Numba, "_rt": _Rt}
        exec(code, env)
        rng = np.random.default_rng(5)
        args = [rng.random((4, 6)), rng.random(6)]
        env[name](*args, 1.0, 0.5, 4, 6, *threads)
        return args

    for threads in (1, 2, 3):
        for want, got in zip(run(src, "k"), run(twin, "k_parallel", threads)):
            assert np.array_equal(want, got)
