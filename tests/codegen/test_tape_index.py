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
    "c[k + 1] = x[i]\n        k += 1",  # not the counter itself
    "k += 1\n        c[k] = x[i]",  # a push after the move
])
def test_other_uses_of_the_counter_stay(body):
    src = f"def f(x, c, out, k, n):\n    for i in range(n):\n        {body}\n"
    out, changed = _rewritten(src)
    if body.startswith("if"):
        assert changed  # the counter itself moves once per iteration at the top level
    else:
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
    for w, g in zip(want, got):
        assert np.array_equal(w, g)
    assert np.any(want[0]) and np.any(want[1])  # dB ends zero: B is overwritten
    check_grad(rows, *[a.copy() for a in args], modes=("reverse",), wrt=[0, 1])
    src = zymo.generated_code(Reverse, rows, Active, *[Duplicated(a.copy(), np.zeros_like(a)) for a in args],
                              numba=numba)
    assert "_cache_sin[_pos_k_sin" in src and "_k_sin += 1" not in src
