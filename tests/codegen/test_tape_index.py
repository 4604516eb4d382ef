"""Caches addressed by the loop index (`codegen/tape_index.py`): the rewritten pushes and pops
reach the very entries the counter reached, and the loops lose their carried counter."""
from __future__ import annotations

import ast

import numpy as np
import pytest

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.codegen.tape_index import index_caches
from zymo.testing import check_grad

SRC = '''
def f(x, c, out, k, lo, n):
    for i in range(lo, n):
        c[k] = x[i] * 2.0
        k += 1
    for _r in range(_rt.span(lo, n)):
        i = n - 1 - _r
        k -= 1
        out[i] = c[k] + x[i]
    for j in range(n):
        c[k] = x[j]
        k += 1
    for _r in range(n):
        j = n - 1 - _r
        k -= 1
        out[j] += c[k]
    return k
'''


class _Rt:
    @staticmethod
    def span(lo, hi):
        return hi - lo if hi > lo else 0


def _rewritten(src: str, counters=("k",)) -> tuple[str, bool]:
    tree = ast.parse(src)
    names = iter(f"_p{i}" for i in range(100))
    changed = index_caches(tree.body[0], frozenset(counters), lambda base: next(names))
    return ast.unparse(tree), changed


def _run(src: str, lo: int, n: int):
    env = {"_rt": _Rt}
    exec(src, env)
    x = np.arange(1.0, n + 1.0)
    c = np.full(2 * n + 3, -1.0)
    out = np.zeros(n)
    k = env["f"](x, c, out, 3, lo, n)
    return k, c, out


@pytest.mark.parametrize("lo, n", [(0, 5), (2, 5), (5, 5), (6, 5)])
def test_same_entries_as_the_counter(lo, n):
    out, changed = _rewritten(SRC)
    assert changed and "k += 1" not in out and "k -= 1" not in out
    assert "k += _rt.span(lo, n)" in out and "k -= _rt.span(0, n)" in out
    for want, got in zip(_run(SRC, lo, n), _run(out, lo, n)):
        assert np.array_equal(want, got)


@pytest.mark.parametrize("body", [
    "if x[i] > 0:\n            c[k] = x[i]\n        k += 1",  # a store under a branch: fine, k moves once
    "c[k] = x[i]\n        k += 1\n        c[k] = x[i]\n        k += 1",  # two moves per iteration
    "c[k] = x[i]\n        k += 1\n        out[i] = k",  # the counter read as a number
    "k += 1\n        c[k] = x[i]",  # a push after the move
])
def test_other_uses_of_the_counter_stay(body):
    src = f"def f(x, c, out, k, n):\n    for i in range(n):\n        {body}\n"
    out, changed = _rewritten(src)
    if body.startswith("if"):
        assert changed  # the counter itself moves once per iteration at the top level
    else:
        assert not changed and out == ast.unparse(ast.parse(src))


NEST = '''
def f(x, c, out, k, lo, n, m):
    for i in range(lo, n):
        for j in range(m):
            c[k] = x[i] * x[j] + k
            k += 1
    for _r in range(_rt.span(lo, n)):
        i = n - 1 - _r
        for _r2 in range(m):
            j = m - 1 - _r2
            k -= 1
            out[i] += c[k] * x[j]
    return k
'''


def _run_nest(src: str, lo: int, n: int, m: int):
    env = {"_rt": _Rt}
    exec(src, env)
    x = np.arange(1.0, max(n, m) + 1.0)
    c = np.full(n * m + 3, -1.0)
    out = np.zeros(n)
    k = env["f"](x, c, out, 3, lo, n, m)
    return k, c, out


@pytest.mark.parametrize("lo, n, m", [(0, 4, 3), (1, 4, 3), (0, 4, 0), (4, 4, 2), (2, 5, 1)])
def test_nests_addressed_level_by_level(lo, n, m):
    out, changed = _rewritten(NEST)
    assert changed and "k += 1" not in out and "k -= 1" not in out
    assert "k += _rt.span(lo, n) * _rt.span(0, m)" in out and "k -= _rt.span(lo, n) * _rt.span(0, m)" in out
    for want, got in zip(_run_nest(NEST, lo, n, m), _run_nest(out, lo, n, m)):
        assert np.array_equal(want, got)  # the counter is also read as a number (`+ k`): same values


@pytest.mark.parametrize("lo, n", [(0, 5), (3, 5)])
def test_reads_of_the_counter_before_the_move_read_the_same_value(lo, n):
    src = SRC.replace("c[k] = x[i] * 2.0", "c[k] = x[i] * 2.0 + k\n        out[i] = c[k + 1]")
    out, changed = _rewritten(src)
    assert changed and "k += 1" not in out
    for want, got in zip(_run(src, lo, n), _run(out, lo, n)):
        assert np.array_equal(want, got)


def test_two_counters_in_one_loop():
    src = ("def f(x, c, d, k, q, n):\n    for i in range(n):\n        c[k] = x[i]\n        k += 1\n"
           "        d[q] = x[i] * 3.0\n        q += 1\n    return (k, q)\n")
    out, changed = _rewritten(src, counters=("k", "q"))
    assert changed and "k += _rt.span(0, n)" in out and "q += _rt.span(0, n)" in out

    def run(code):
        env = {"_rt": _Rt}
        exec(code, env)
        c, d = np.zeros(9), np.zeros(9)
        return (*env["f"](np.arange(1.0, 6.0), c, d, 2, 4, 5), c, d)

    for want, got in zip(run(src), run(out)):
        assert np.array_equal(want, got)


@pytest.mark.parametrize("amount", ["m", "_rt.span(0, m)", "_rt.span(0, x[0])", "2"])
def test_amounts_the_body_changes_or_cannot_vouch_for_stay(amount):
    """`k += m` with `m` set in the body, or an amount that is not a product of spans and
    constants, keeps the counter in the loop."""
    src = (f"def f(x, c, k, n, m):\n    for i in range(n):\n        m = i\n        c[k] = x[i]\n"
           f"        k += {amount}\n")
    if amount == "2":
        src = src.replace("        m = i\n", "")
        out, changed = _rewritten(src)
        assert changed and "_p0 = k + i * 2" in out and "k += _rt.span(0, n) * 2" in out
        return
    out, changed = _rewritten(src)
    assert not changed and out == ast.unparse(ast.parse(src))


def rows(A, u, B):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            B[i, j] = np.sin(A[i, j]) * u[i] + A[i, j] * A[i, j]
    return np.sum(B * B)


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_gradient_with_indexed_caches_equals_python_to_the_bit(numba):
    rng = np.random.default_rng(7)
    args = [rng.random((5, 4)), rng.random(5), np.zeros((5, 4))]

    def grads(backend):
        shadows = [np.zeros_like(a) for a in args]
        zymo.autodiff(Reverse, rows, Active, *[Duplicated(a.copy(), s) for a, s in zip(args, shadows)],
                      numba=backend)
        return shadows

    want, got = grads(False), grads(numba)
    from zymo.codegen.numba import vecmath
    for w, g in zip(want, got):  # to the bit, but for glibc's vector `sin` (4 ulps: `vecmath`)
        np.testing.assert_allclose(g, w, rtol=4e-15 if vecmath.available() else 0, atol=0)
    assert np.any(want[0]) and np.any(want[1])  # dB ends zero: B is overwritten
    check_grad(rows, *[a.copy() for a in args], modes=("reverse",), wrt=[0, 1])
    src = zymo.generated_code(Reverse, rows, Active, *[Duplicated(a.copy(), np.zeros_like(a)) for a in args],
                              numba=numba)
    assert "_cache_sin[_pos_k_sin" in src and "_k_sin += 1" not in src


DOWN = '''
def f(x, c, out, k, lo, n):
    for i in range(n, lo, -1):
        c[k] = x[i - 1] * 2.0 + k
        k += 1
    _n = _rt.span(lo, n)
    for _r in range(_n):
        i = n - (_n - 1 - _r)
        k -= 1
        out[i - 1] = c[k] + x[i - 1]
    return k
'''


@pytest.mark.parametrize("lo, n", [(0, 5), (2, 5), (5, 5), (6, 5), (-1, 0)])
def test_a_loop_running_down_and_its_adjoint_address_by_index(lo, n):
    """`for i in range(hi, lo, -1)` pushes from `hi` down; reverse mode pops in a forward loop
    over its trip count (`i = hi - (_n - 1 - _r)`): the same entries as the counter's."""
    out, changed = _rewritten(DOWN)
    assert changed and "k += 1" not in out and "k -= 1" not in out
    assert "_p0 = k + (n - i)" in out and "k += _rt.span(lo, n)" in out
    assert "_p1 = k + (_n - 1 - _r)" in out and "k -= _rt.span(0, _n)" in out
    for want, got in zip(_run(DOWN, max(lo, 0), n), _run(out, max(lo, 0), n)):
        assert np.array_equal(want, got)


DOWN_NEST = '''
def f(x, c, out, k, lo, n, m):
    for _r2 in range(_rt.span(lo, n)):
        i = n - 1 - _r2
        _n = _rt.span(0, m)
        for _r in range(_n):
            j = m - (_n - 1 - _r)
            k -= 1
            out[i] += c[k] * x[j - 1]
    return k
'''


def test_a_trip_count_named_in_the_body_is_read_as_its_value():
    """The outer loop moves `k` by `_rt.span(0, _n)`, `_n` set in its body to an invariant:
    its value stands in for it, and the outer loop too addresses by index."""
    out, changed = _rewritten(DOWN_NEST)
    assert changed and "k -= _rt.span(lo, n) * _rt.span(0, _rt.span(0, m))" in out

    def run(code, lo, n, m):
        env = {"_rt": _Rt}
        exec(code, env)
        x, c, res = np.arange(1.0, m + 2.0), np.arange(2.0, 40.0), np.zeros(max(n, 1))
        return env["f"](x, c, res, 30, lo, n, m), res

    for lo, n, m in ((0, 4, 3), (1, 4, 2), (0, 3, 0)):
        for want, got in zip(run(DOWN_NEST, lo, n, m), run(out, lo, n, m)):
            assert np.array_equal(want, got)
    for moved in ("_n = _rt.span(0, i)", "_n = _rt.span(0, x[0])"):  # not invariant: stays
        src = DOWN_NEST.replace("_n = _rt.span(0, m)", moved)
        assert "k -= _rt.span(lo, n)" not in _rewritten(src)[0]
    src = DOWN.replace("range(n, lo, -1)", "range(n, lo, -2)")  # another step: stays
    assert "_p0 = k + (n - i)" not in _rewritten(src)[0]


def back_substitution(U, b, x):
    n = U.shape[0]
    for i in range(n - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, n):
            s = s - U[i, j] * x[j]
        x[i] = s / U[i, i]
    out = 0.0
    for i in range(n - 1, -1, -1):
        out += x[i] * x[i] * (i + 1.0)
    return out


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_gradient_through_loops_running_down_equals_python_to_the_bit(numba):
    rng = np.random.default_rng(8)
    U = np.triu(rng.random((6, 6))) + 2.0 * np.eye(6)
    b = rng.random(6)

    def grads(backend):
        dU, db = np.zeros_like(U), np.zeros_like(b)
        zymo.autodiff(Reverse, back_substitution, Active, Duplicated(U.copy(), dU), Duplicated(b.copy(), db),
                      Duplicated(np.zeros(6), np.zeros(6)), numba=backend)
        return dU, db

    want, got = grads(False), grads(numba)
    for w, g in zip(want, got):
        assert np.array_equal(w, g) and np.any(w != 0.0)
    check_grad(back_substitution, U, b, np.zeros(6), modes=("reverse",), wrt=[0, 1])


@pytest.mark.parametrize("src", [
    DOWN.replace("range(n, lo, -1)", "range(n << 0, lo, -1)"),  # compound bounds stay one operand
    SRC.replace("range(lo, n)", "range(lo * 2 - lo, n)"),
    DOWN.replace("    for _r in range(_n):", "    for _r in range(_n | 0):"),
])
def test_compound_bounds_address_the_same_entries(src):
    """Found in review: offsets pasted as text read `i - m - 1` for `i - (m - 1)`."""
    out, changed = _rewritten(src)
    assert changed
    for lo, n in ((0, 5), (2, 5), (5, 5)):
        for want, got in zip(_run(src, lo, n), _run(out, lo, n)):
            assert np.array_equal(want, got)
