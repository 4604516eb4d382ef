"""Loops split into one loop per part so that a part's nest walks rows (`codegen/distribute.py`,
through `codegen/loop_order.lean_loops`): where it happens, what keeps a loop whole, and the
rewritten source computing the same numbers, to the bit, run as Python; end to end, the
compiled gradients of covariance-like code equal the Python backend's to the bit."""
from __future__ import annotations

import re

import numpy as np
import pytest

import zymo
from zymo import Active, Const, Duplicated, Reverse
from zymo.codegen.loop_order import lean_loops
from zymo.testing import check_grad
from zymo.transform.reverse.facts import MemoryFacts

MEAN = '''
def f(data, mean, n, m):
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] = mean[j] + data[i, j]
        mean[j] = mean[j] / n
'''
# covariance's adjoint: scalar shuffles of `dcov` (both triangles), then a column walk adding
# into two columns of `ddata`, then a reset
ADJOINT = '''
def f(data, dcov, ddata, j, n, m):
    for _r in range(_rt.span(j, m)):
        i = m - 1 - _r
        t = dcov[i, j]
        dcov[i, j] = 0.0
        dcov[j, i] += t
        for k in range(n):
            ddata[k, i] += data[k, j] * dcov[j, i]
            ddata[k, j] += data[k, i] * dcov[j, i]
        dcov[j, i] = 0.0
'''
NDIMS = {"data": 2, "mean": 1, "dcov": 2, "ddata": 2}


def _facts(names=("data", "mean", "dcov", "ddata")) -> MemoryFacts:
    return MemoryFacts({n: (k,) for k, n in enumerate(names)}, frozenset(names), dict(NDIMS))


class _Rt:
    @staticmethod
    def span(lo, hi):
        return hi - lo if hi > lo else 0


def _run(src: str, *args):
    env: dict = {"np": np, "_rt": _Rt}
    exec(src, env)
    env["f"](*args)
    return args


def test_column_sums_split_and_swapped_exact():
    out = lean_loops(MEAN, _facts())
    assert out.count("for j in range(m)") == 3 and "for i in range(n):\n        for j in range(m):" in out
    rng = np.random.default_rng(1)
    data = rng.random((7, 5))
    want = _run(MEAN, data, np.full(5, np.nan), 7, 5)
    got = _run(out, data, np.full(5, np.nan), 7, 5)
    assert np.array_equal(want[1], got[1]) and not np.isnan(got[1]).any()


@pytest.mark.parametrize("j, m", [(0, 5), (2, 5), (4, 5), (5, 5)])
def test_adjoint_split_and_swapped_exact(j, m):
    from zymo.codegen.loop_forms import nonneg_names

    with nonneg_names(frozenset({"j"})):  # as the IR's analysis proves of an outer loop's index
        out = lean_loops(ADJOINT, _facts())
    assert "\n    for k in range(n):\n" not in lean_loops(ADJOINT, _facts())  # `j` may be negative
    assert "\n    for k in range(n):\n" in out  # split in three, the middle one swapped
    rng = np.random.default_rng(2)
    args = [rng.random((6, m)), rng.random((m, m)), rng.random((6, m))]
    want = _run(ADJOINT, *[a.copy() for a in args], j, 6, m)
    got = _run(out, *[a.copy() for a in args], j, 6, m)
    for w, g in zip(want[:3], got[:3]):
        assert np.array_equal(w, g)


@pytest.mark.parametrize("change", [
    ("        mean[j] = mean[j] / n\n", "        mean[j] = mean[j] / n\n        s = mean[j]\n"),  # read after
    ("        mean[j] = 0.0\n", "        mean[j] = 0.0\n        z = mean[j] * 2.0\n"),  # a scalar to a part
    ("mean[j] = mean[j] + data[i, j]", "mean[j] = mean[j] + data[i, j] + mean[j + 1]"),  # a neighbour
    ("        mean[j] = mean[j] / n\n", "        mean[j] = mean[j] / n\n        data[0, j + 1] = 1.0\n"),
])
def test_loops_whose_parts_meet_stay_whole(change):
    src = MEAN.replace(*change)
    if "z = " in src:
        src = src.replace("mean[j] + data[i, j]", "mean[j] + data[i, j] * z")
    if "s = " in src:
        src += "    return s\n"
    assert change[0] in MEAN
    out = lean_loops(src, _facts())
    assert out.count("for j in range(m)") <= 1


def test_overlapping_arrays_stay_whole():
    facts = MemoryFacts({"data": (0,), "mean": (0,)}, frozenset({"data", "mean"}), dict(NDIMS))
    assert lean_loops(MEAN, facts).count("for j in range(m)") <= 1


def covariance_like(data, mean):
    n, m = data.shape
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= n
        for i in range(n):
            data[i, j] -= mean[j]
    return np.sum(data * data * data)


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_compiled_gradients_equal_the_python_backend(numba):
    rng = np.random.default_rng(3)
    args = [rng.random((7, 5)), np.zeros(5)]

    def grad(backend):
        shadows = [np.zeros_like(a) for a in args]
        zymo.autodiff(Reverse, covariance_like, Active, Duplicated(args[0].copy(), shadows[0]),
                      Duplicated(args[1].copy(), shadows[1]), numba=backend)
        return shadows[0]

    want, got = grad(False), grad(numba)
    assert np.array_equal(want, got) and np.any(want)
    src = zymo.generated_code(Reverse, covariance_like, Active, Duplicated(args[0].copy(), np.zeros((7, 5))),
                              Const(args[1].copy()), numba=numba)
    assert re.search(r"for \w+ in range\(n\):\n +for \w+ in range\(n_1\):", src)  # rows walked
    check_grad(covariance_like, *[a.copy() for a in args], modes=("reverse",), wrt=[0])


def test_an_element_one_part_pins_and_the_other_does_not_keeps_the_loop_whole():
    """`d[i, j]` written for each `i`, `d[j, 0]` read by every iteration: at `j == 0` the
    read sees the write of iteration 0 in the first iteration only."""
    src = '''
def f(d, x, out, j, n, m):
    for i in range(n):
        d[i, j] = x[i] * 2.0
        for k in range(m):
            out[k, i] = out[k, i] + d[j, 0] * x[k]
'''
    facts = MemoryFacts({"d": (0,), "x": (1,), "out": (2,)}, frozenset({"d", "x", "out"}),
                        {"d": 2, "x": 1, "out": 2})
    out = lean_loops(src, facts)
    assert out.count("for i in range(n)") == 1
    rng = np.random.default_rng(5)
    args = [rng.random((4, 4)), rng.random(4), rng.random((4, 4))]
    want = _run(src, *[a.copy() for a in args], 0, 4, 4)
    got = _run(out, *[a.copy() for a in args], 0, 4, 4)
    assert all(np.array_equal(w, g) for w, g in zip(want[:3], got[:3]))


# trmm's forward sweep, caches addressed by index: a push per element, index arithmetic
# (`p1`) between the loops, a column walk of `B` inside
TRMM = '''
def f(A, B, c, k, i, n, m):
    for j in range(m):
        p1 = k + j * _rt.span(i + 1, n)
        for r in range(i + 1, n):
            p = p1 + (r - (i + 1))
            b = B[r, j]
            c[p] = b
            B[i, j] = B[i, j] + A[r, i] * b
        B[i, j] = 2.0 * B[i, j]
'''


def _trmm_facts(caches=frozenset({"c"})) -> MemoryFacts:
    names = ("A", "B", "c")
    return MemoryFacts({n: (k,) for k, n in enumerate(names)}, frozenset(names), {"A": 2, "B": 2, "c": 1},
                       caches=caches)


@pytest.mark.parametrize("i", [0, 2, 5])
def test_pushes_and_index_arithmetic_move_with_the_swap_exact(i):
    out = lean_loops(TRMM, _trmm_facts())
    assert "\n    for r in range(i + 1, n):\n" in out and out.count("p1 = k + j * _rt.span(i + 1, n)") == 1
    rng = np.random.default_rng(6)
    args = [rng.random((6, 6)), rng.random((6, 4)), np.full(30, np.nan)]
    want = _run(TRMM, *[a.copy() for a in args], 1, i, 6, 4)
    got = _run(out, *[a.copy() for a in args], 1, i, 6, 4)
    assert all(np.array_equal(w, g, equal_nan=True) for w, g in zip(want[:3], got[:3]))


def test_a_cache_the_loop_also_reads_or_arithmetic_of_what_the_inner_loop_changes_keep_the_order():
    read = TRMM.replace("            c[p] = b\n", "            c[p] = b + c[0]\n")
    assert "\n    for r in range(i + 1, n):\n" not in lean_loops(read, _trmm_facts())
    assert "\n    for r in range(i + 1, n):\n" not in lean_loops(TRMM, _trmm_facts(caches=frozenset()))
    changed = TRMM.replace("            c[p] = b\n", "            c[p] = b\n            p1 = p1 + 1\n").replace(
        "        B[i, j] = 2.0 * B[i, j]\n", "")  # a perfect nest but for `p1`: interchange's own test
    assert "\n    for r in range(i + 1, n):\n" not in lean_loops(changed, _trmm_facts())


# review: a part that assigns the loop's own index (or a name its bounds read) changes what the
# later parts read in the serial loop; split, each new loop would start from the loop's own index
REVIEW_INDEX = '''
def f(data, mean, c, n, m):
    for j in range(m):
        for j in range(2):
            c[j] = 1.0
        for i in range(n):
            mean[j] = mean[j] + data[i, j]
'''


def test_review_defect_a_part_assigning_the_loop_index_keeps_the_loop_whole():
    facts = MemoryFacts({"data": (0,), "mean": (1,), "c": (2,)}, frozenset({"data", "mean", "c"}),
                        {"data": 2, "mean": 1, "c": 1})
    out = lean_loops(REVIEW_INDEX, facts)
    rng = np.random.default_rng(7)
    data = rng.random((4, 5))
    want = _run(REVIEW_INDEX, data, np.zeros(5), np.zeros(2), 4, 5)
    got = _run(out, data, np.zeros(5), np.zeros(2), 4, 5)
    assert np.array_equal(want[1], got[1])


def test_review_defect_an_unlisted_array_used_whole_keeps_the_loop_whole():
    """`v` (an array of unknown memory, here `data` itself) read whole by the second part sees
    the columns the first part doubled so far: split, it saw them all doubled."""
    src = '''
def f(data, t, v, n, m):
    for j in range(m):
        for i in range(n):
            data[i, j] = data[i, j] * 2.0
        t[j] = np.sum(v)
'''
    facts = MemoryFacts({"data": (0,), "t": (1,)}, frozenset({"data", "t"}), {"data": 2, "t": 1, "v": 2})
    out = lean_loops(src, facts)
    want, got = np.arange(12.0).reshape(3, 4), np.arange(12.0).reshape(3, 4)
    tw, tg = np.zeros(4), np.zeros(4)
    _run(src, want, tw, want, 3, 4)
    _run(out, got, tg, got, 3, 4)
    assert np.array_equal(tw, tg) and np.array_equal(want, got)


# -- scalar expansion (`distribute._expanded`) and elements never one (`_never_one`) --------
# symm's forward: `t` summed over `k` for each `j`, then read by the statement after the sum
SYMM_FORWARD = '''
def f(C, A, B, i, n):
    for j in range(n):
        t = 0.0
        for k in range(i):
            C[k, j] = C[k, j] + 1.5 * B[i, j] * A[i, k]
            t = t + B[k, j] * A[i, k]
        C[i, j] = 1.2 * C[i, j] + 1.5 * t
'''
# symm's adjoint: a scalar `dn` passed to the reversed inner loop, `dA[i, i]` beside `dA[i, k]`, `k < i`
SYMM_ADJOINT = '''
def f(dA, dB, dC, A, B, i, n):
    for _r_1 in range(n):
        j = n - 1 - _r_1
        dt = dC[i, j]
        dC[i, j] = 0.0
        dA[i, i] += B[i, j] * dt
        dn = 1.5 * dt
        for _r in range(i):
            k = i - 1 - _r
            dA[i, k] += B[k, j] * dn
            dB[k, j] += A[i, k] * dn
            dB[i, j] += dC[k, j] * A[i, k]
'''
SYMM_NDIMS = {"A": 2, "B": 2, "C": 2, "dA": 2, "dB": 2, "dC": 2}


def _symm_facts(floats=("t", "dn", "dt")) -> MemoryFacts:
    names = list(SYMM_NDIMS)
    return MemoryFacts({n: (k,) for k, n in enumerate(names)}, frozenset(names), dict(SYMM_NDIMS),
                       floats=frozenset(floats))


def _symm_args(n, seed):
    rng = np.random.default_rng(seed)
    return [rng.random((n, n)) for _ in range(3)]


@pytest.mark.parametrize("i", [0, 1, 3, 5])
def test_scalar_passed_between_parts_expanded_and_swapped_exact(i):
    out = lean_loops(SYMM_FORWARD, _symm_facts())
    assert "_xp_t = np.empty(_rt.span(0, n), np.float64)" in out, out
    assert re.search(r"for k in range\(i\):\n(.|\n)*for j in range\(n\):\n +C\[k, j\] = ", out), out  # rows
    assert re.search(r"_xp_t\[j\] = _xp_t\[j\] \+ B\[k, j\] \* ", out), out
    want = _run(SYMM_FORWARD, *_symm_args(6, i), i, 6)
    got = _run(out, *_symm_args(6, i), i, 6)
    assert np.array_equal(want[0], got[0])


@pytest.mark.parametrize("i", [0, 1, 4, 5])
def test_reversed_loop_expanded_and_elements_below_apart_exact(i):
    out = lean_loops(SYMM_ADJOINT, _symm_facts())
    assert "_xp_dn[j] = " in out and "_xp_dn = np.empty(_rt.span(0, n), np.float64)" in out, out
    assert re.search(r"for _r in range\(i\):\n +k = i - 1 - _r\n(.|\n)*for _r_1 in range\(n\):\n(.|\n)*dB\[k, j\]",
                     out), out
    args = _symm_args(6, 10 + i)
    want = _run(SYMM_ADJOINT, *[a.copy() for a in args], *_symm_args(6, 20)[:2], i, 6)
    got = _run(out, *[a.copy() for a in args], *_symm_args(6, 20)[:2], i, 6)
    for w, g in zip(want[:3], got[:3]):
        assert np.array_equal(w, g)
    assert np.any(want[0] != args[0])


@pytest.mark.parametrize("src, facts, why", [
    (SYMM_FORWARD, ("dn",), "not known to hold float64 numbers"),
    (SYMM_FORWARD + "    return t\n", ("t",), "read after the loop"),
    (SYMM_FORWARD.replace("for j in range(n)", "for j in range(1, n)"), ("t",), "not from 0"),
    (SYMM_ADJOINT.replace("range(n):\n        j = n - 1 - _r_1", "range(_rt.span(1, n)):\n        j = n - 1 - _r_1"),
     ("dn",), "a reversed loop from 1"),
    (SYMM_ADJOINT.replace("range(i):\n            k = i - 1 - _r", "range(i + 1):\n            k = i + 1 - 1 - _r"),
     ("dn",), "k reaches i: dA[i, i] written by both parts"),
])
def test_expansion_or_never_one_refused(src, facts, why):
    out = lean_loops(src, _symm_facts(facts))
    assert "_xp_" not in out, why


def symm(alpha, beta, C, A, B):
    m, n = C.shape
    for i in range(m):
        for j in range(n):
            temp2 = 0.0
            for k in range(i):
                C[k, j] += alpha * B[i, j] * A[i, k]
                temp2 += B[k, j] * A[i, k]
            C[i, j] = beta * C[i, j] + alpha * B[i, j] * A[i, i] + alpha * temp2
    return np.sum(C * C)


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_symm_compiled_gradients_equal_the_python_backend(numba):
    rng = np.random.default_rng(5)
    args = [rng.random((6, 7)), rng.random((6, 6)), rng.random((6, 7))]

    def grad(backend):
        shadows = [np.zeros_like(a) for a in args]
        zymo.autodiff(Reverse, symm, Active, Const(1.5), Const(1.2),
                      *[Duplicated(a.copy(), s) for a, s in zip(args, shadows)], numba=backend)
        return shadows

    want, got = grad(False), grad(numba)
    assert all(np.any(w) for w in want)
    if numba is True:
        assert all(np.array_equal(w, g) for w, g in zip(want, got))
    else:  # the nests run as BLAS products (`codegen/schedule.py`): the loops, expanded, are their fallback
        assert all(np.allclose(w, g, rtol=1e-12, atol=0.0) for w, g in zip(want, got))
    src = zymo.generated_code(Reverse, symm, Active, Const(1.5), Const(1.2),
                              *[Duplicated(a.copy(), np.zeros_like(a)) for a in args], numba=numba)
    # both sweeps expanded (a kernel computes its trip counts once, at its top: `codegen/hoist.py`)
    assert len(re.findall(r"np\.empty\((?:_rt\.span\(0, n\)|_span_\d+), np\.float64\)", src)) == 2, src
    check_grad(symm, 1.5, 1.2, *[a.copy() for a in args], const=(0, 1))


# review: an inner loop from a negative first value names elements from the end (`dA[i, -1]` is
# `dA[i, i]` in the last row), so it does not stay apart from the term it runs below
SYMM_ADJOINT_FROM_MINUS_ONE = SYMM_ADJOINT.replace("for _r in range(i):\n            k = i - 1 - _r",
                                                   "for k in range(-1, i):")


@pytest.mark.parametrize("i", [0, 3, 5])
def test_review_defect_an_inner_loop_from_a_negative_value_is_not_below_its_stop(i):
    src = SYMM_ADJOINT_FROM_MINUS_ONE
    assert src != SYMM_ADJOINT
    out = lean_loops(src, _symm_facts())
    assert "_xp_" not in out and "_acc_dB" not in out, out  # neither split nor `dB[i, j]` held in a local
    args = _symm_args(6, 30 + i)
    want = _run(src, *[a.copy() for a in args], *_symm_args(6, 40)[:2], i, 6)
    got = _run(out, *[a.copy() for a in args], *_symm_args(6, 40)[:2], i, 6)
    for w, g in zip(want[:3], got[:3]):
        assert np.array_equal(w, g)


def symm_from_minus_one(C, A, B):
    m, n = C.shape
    for i in range(m):
        for j in range(n):
            temp2 = 0.0
            for k in range(-1, i):
                C[k, j] += 1.5 * B[i, j] * A[i, k]
                temp2 += B[k, j] * A[i, k]
            C[i, j] = 1.2 * C[i, j] + 1.5 * B[i, j] * A[i, i] + 1.5 * temp2
    return np.sum(C * C)


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_review_defect_symm_from_minus_one_compiled_gradients_equal_the_python_backend(numba):
    rng = np.random.default_rng(0)
    args = [rng.random((6, 7)), rng.random((6, 6)), rng.random((6, 7))]

    def grad(backend):
        shadows = [np.zeros_like(a) for a in args]
        zymo.autodiff(Reverse, symm_from_minus_one, Active,
                      *[Duplicated(a.copy(), s) for a, s in zip(args, shadows)], numba=backend)
        return shadows

    want, got = grad(False), grad(numba)
    assert all(np.array_equal(w, g) for w, g in zip(want, got))
