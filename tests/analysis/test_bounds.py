"""analysis.bounds: which ints are never negative, and the Numba indices that use it
(`numba.rewrites.nonneg_indices`): gradients with and without wraparound against the Python backend
and central differences."""
import re

import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.analysis.bounds import NeverUnsigned, NonNegative
from zymo.ir.core import walk
from zymo.testing import check_grad


def indices(x, A, m):
    n = x.shape[0]
    s = 0.0
    for i in range(n - 1):
        a = x[i + 1]                      # i >= 0
        b = x[n - 1 - i]                  # i <= n - 2
        c = x[i - 1]                      # -1 at i = 0: wraps around
        e = x[(i * 7 + 3) % 4]            # a remainder by a positive constant
        s += a * b + c * e
    for r in range(A.shape[0]):
        for q in range(r):
            t = A[r, r - q - 1]           # q <= r - 1
            u = A[q, q * (2 * r - q - 1) // 2 - r * m]  # m is a parameter: unknown
            s += t * u
    k = 0
    while k < 2:
        s += x[k]                         # a while loop's counter: unknown
        k += 1
    for j in range(5, 0, -1):
        s += x[j - 1]                     # a negative step: unknown
    return s


def test_which_indices_are_never_negative():
    fn = zymo.ir(indices, np.ones(6), np.ones((4, 4)), 0)
    nn = NonNegative(fn)
    by_expr = {}
    for op in walk(fn.body):
        if op.kind == "getitem" and op.args[0].hint in ("x", "A"):
            by_expr.setdefault(op.args[0].hint, []).append([nn(v) for v in op.args[1:] if str(v.type) == "int"])
    # x[i + 1], x[n - 1 - i], x[i - 1], x[(...) % 4], then x[k] and x[j - 1]
    assert by_expr["x"] == [[True], [True], [False], [True], [False], [False]]
    # A[r, r - q - 1], A[q, ... - r * m]
    assert by_expr["A"] == [[True, True], [True, False]]


def shifted(x):
    n = x.shape[0]
    s = 0.0
    for i in range(2, n):
        s += x[i - 1] * x[i - 2]      # i >= 2: both never negative
    for j in range(1, n):
        s += x[j - 2]                 # -1 at j = 1: wraps around
    return s


def test_loop_start_bounds_sums_below():
    """A loop variable is at least its loop's constant start: `i - 2` over `range(2, n)` is
    never negative, `j - 2` over `range(1, n)` may be."""
    fn = zymo.ir(shifted, np.ones(6))
    nn = NonNegative(fn)
    got = [nn(op.args[1]) for op in walk(fn.body) if op.kind == "getitem" and op.args[0].hint == "x"]
    assert got == [True, True, False]


def test_which_ints_are_never_unsigned():
    """`NeverUnsigned`: sizes, literals, loop variables over them and their arithmetic are
    Python's (or Numba's signed) ints; a parameter (`m`), an int read from memory, a `while`
    counter carried by the loop, and anything computed from them may be an unsigned NumPy int."""
    fn = zymo.ir(indices, np.ones(6), np.ones((4, 4)), 0)
    nu = NeverUnsigned(fn)
    by_expr = {}
    for op in walk(fn.body):
        if op.kind == "getitem" and op.args[0].hint in ("x", "A"):
            by_expr.setdefault(op.args[0].hint, []).append([nu(v) for v in op.args[1:] if str(v.type) == "int"])
    # x[i + 1], x[n - 1 - i], x[i - 1], x[(...) % 4]; x[k] (a while loop's carry); x[j - 1]
    assert by_expr["x"] == [[True], [True], [True], [True], [False], [True]]
    # A[r, r - q - 1], A[q, ... - r * m]: `m` is a parameter
    assert by_expr["A"] == [[True, True], [True, False]]


def triangle(L, v):
    """gmm's packed lower triangle: `L[k, d + c * (2 * d - c - 1) // 2 + (r - c - 1)]`."""
    d = v.shape[0]
    s = 0.0
    for k in range(L.shape[0]):
        for r in range(d):
            t = v[r]
            for c in range(r):
                idx = d + c * (2 * d - c - 1) // 2 + (r - c - 1)
                t += L[k, idx] * v[c]
            s += t * t
    return s


@pytest.mark.slow
def test_computed_indices_skip_wraparound_under_numba():
    from numba_helpers import numba_sources

    rng = np.random.default_rng(7)
    L, v = rng.standard_normal((2, 10)), rng.standard_normal(4)
    with numba_sources() as sources:
        dL, dv = np.zeros_like(L), np.zeros_like(v)
        zymo.autodiff(Reverse, triangle, Active, Duplicated(L, dL), Duplicated(v, dv), numba=True)
    # (reverse mode: the loop variable `i_1` unsigned too, `reversed_loops`)
    assert any(re.search(r"(?<!d)L\[_rt\.nonneg\(i_1\), _rt\.nonneg\(idx\)\]", s)
               and "dL[_rt.nonneg(i_1), _rt.nonneg(idx)]" in s for s in sources), sources
    dL_py, dv_py = np.zeros_like(L), np.zeros_like(v)
    zymo.autodiff(Reverse, triangle, Active, Duplicated(L, dL_py), Duplicated(v, dv_py), numba=False)
    np.testing.assert_allclose(dL, dL_py, rtol=1e-12)
    np.testing.assert_allclose(dv, dv_py, rtol=1e-12)
    fd = fd_grad(triangle, [L, v])
    np.testing.assert_allclose(dL, fd[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dv, fd[1], rtol=1e-6, atol=1e-8)
    assert np.abs(dL).max() > 0.1 and np.abs(dv).max() > 0.1
    with numba_sources() as sources:  # forward mode reads the same index, unsigned too
        gL, gv = zymo.gradient(zymo.Forward, triangle, L, v, numba=True)
    assert any("L[i, _rt.nonneg(idx)]" in s and "dL_1[i, _rt.nonneg(idx)]" in s for s in sources), sources
    np.testing.assert_allclose(gL, dL, rtol=1e-12)
    np.testing.assert_allclose(gv, dv, rtol=1e-12)


@pytest.mark.parametrize("numba", [False, True])
def test_indices_that_may_be_negative_keep_wraparound(numba):
    """`x[i - 1]` at `i = 0` reads the last element, under Numba as in Python."""
    from numba_helpers import numba_sources

    x = np.linspace(0.3, 1.5, 6)
    with numba_sources() as sources:
        dx = np.zeros_like(x)
        zymo.autodiff(Reverse, indices, Active, Duplicated(x, dx), np.ones((4, 4)) * 0.5, 0, numba=numba)
    if numba:
        (src,) = sources
        wrapped = set(re.findall(r"_rt\.nonneg\((\w+)\)", src))
        defs = {name: expr for name, expr in re.findall(r"^\s*(\w+) = (.*)$", src, re.M) if name in wrapped}
        # the remainder, the counter of the while loop's cache (its `k`, for the adjoint sweep),
        # and in a program with an adjoint sweep, whose loops run backwards (`i = n - 1 - _r`,
        # which LLVM does not bound), loop variables and sums of them never negative:
        # `i + 1`, `n - 1 - i`; not `i - 1`, which may be negative
        (counter,) = [n for n in wrapped if n.startswith("_k_")]
        assert re.search(rf"_cache_\w+\[_rt\.nonneg\({counter}\)\]", src)
        assert any("% 4" in e for e in defs.values()), (wrapped, defs)
        minus_one = re.findall(r"^\s*(\w+) = \w+ - 1$", src, re.M)
        assert len(set(minus_one)) == 1 and not set(minus_one) & wrapped, (minus_one, wrapped)
        # x's plain reads: `i - 1` and the while loop's counter; `i + 1`, `n - 1 - i` and
        # the remainder are unsigned
        assert set(re.findall(r"\bx\[(\w+)\]", src)) == {minus_one[0], "k"}, src
        assert len(set(re.findall(r"\bx\[_rt\.nonneg\((\w+)\)\]", src))) == 3, src
    fd = fd_grad(lambda y: indices(y, np.ones((4, 4)) * 0.5, 0), [x])[0]
    np.testing.assert_allclose(dx, fd, rtol=1e-6, atol=1e-8)
    assert abs(dx[-1]) > 0.1  # x[i - 1] at i = 0 is x[-1]
    check_grad(indices, x, np.ones((4, 4)) * 0.5, 0, const=(1, 2))


def upper(A, x):
    n = x.shape[0]
    s = 0.0
    for i in range(n):
        for j in range(i + 1, n):         # a computed start, never negative
            A[i, j] = A[i, j] + x[i] * x[j]
        for k in range(i - 2, n):         # a computed start, negative at i < 2: wraps around
            s += A[i, k] * x[k]
    return s + np.sum(A * A)


def test_loop_variables_from_a_computed_start_index_unsigned():
    """`range(i + 1, n)`: LLVM cannot bound `j` below, so Numba would test each index for a
    negative value (and not vectorize the loop); read unsigned instead. `range(i - 2, n)` may
    start below zero: its `k` keeps the wraparound (`A[0, -2]` is `A[0, n - 2]`)."""
    from numba_helpers import numba_sources

    rng = np.random.default_rng(8)
    A, x = rng.random((5, 5)), rng.random(5)
    with numba_sources() as sources:
        dA, dx = np.zeros_like(A), np.zeros_like(x)
        zymo.autodiff(Reverse, upper, Active, Duplicated(A.copy(), dA), Duplicated(x, dx), numba=True)
    (src,) = sources
    wrapped = set(re.findall(r"_rt\.nonneg\((\w+)\)", src))
    loops = set(re.findall(r"for (\w+) in range\(t_\d+, n\)", src))  # j's and k's loops, forward sweep
    assert len(loops) == 2 and len(loops & wrapped) == 1, (loops, wrapped)
    (j,) = loops & wrapped
    assert f"A[_rt.nonneg(i_1), _rt.nonneg({j})]" in src and f"dA[_rt.nonneg(i_1), _rt.nonneg({j})]" in src
    pA, px = np.zeros_like(A), np.zeros_like(x)
    zymo.autodiff(Reverse, upper, Active, Duplicated(A.copy(), pA), Duplicated(x, px), numba=False)
    assert np.array_equal(dA, pA) and np.array_equal(dx, px) and np.abs(dx).max() > 0.1
    check_grad(upper, A, x)
