"""A cache block filled by a swapped nest stored in the order the nest runs
(`codegen/tape_layout.transpose_caches`).

On generated-style source: the positions of such a cache change at its pushes and its pops
alike and the program, run as Python, computes the same numbers (the pops read what the pushes
stored); five shapes are left as they are. End to end: gramschmidt's cache of `A` (pushed by a
swapped nest) is stored along the swapped loop, and the compiled gradients equal the Python
backend's to the bit, and central differences and forward mode to rounding."""
from __future__ import annotations

import ast

import numpy as np
import pytest
from helpers import assert_tree_close, fd_grad

import zymo
import zymo.runtime as _rt
from zymo import Active, Duplicated, Forward, Reverse
from zymo.codegen.tape_layout import transpose_caches

# the shape `tape_index` and `interchange` leave: the push nest swapped (its inner loop over
# `j`, whose offset is scaled by the inner block `X = span(0, m)`), the pop nest reversed
SWAPPED = '''
def f(A, out, c, m, n, lo):
    _k_c = 0
    for i in range(m):
        for j in range(lo, n):
            _p = _k_c + (j - lo) * _rt.span(0, m)
            _q = _p + i
            c[_q] = A[i, j]
            A[i, j] = 2.0 * A[i, j] + i
    for _r in range(_rt.span(lo, n)):
        j = n - 1 - _r
        _p_1 = _k_c + (j - lo) * _rt.span(0, m)
        for i in range(m):
            _q_1 = _p_1 + i
            out[i, j] = c[_q_1] * (j + 1)
'''


def _run(src: str, m: int = 4, n: int = 6, lo: int = 2):
    ns = {"np": np, "_rt": _rt}
    exec(compile(src, "<test>", "exec"), ns)
    A = np.arange(m * n, dtype=float).reshape(m, n) / 7.0
    out = np.zeros((m, n))
    c = np.zeros((n - lo) * m)
    ns["f"](A, out, c, m, n, lo)
    return out, c


def _transposed(src: str, elsewhere: frozenset[str] = frozenset()) -> tuple[bool, str]:
    tree = ast.parse(src)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    changed = transpose_caches(fn, frozenset({"_k_c"}), elsewhere)
    return changed, ast.unparse(tree)


def test_a_cache_pushed_along_a_swapped_loop_is_laid_out_along_it():
    changed, new = _transposed(SWAPPED)
    assert changed
    assert "_p = _k_c + (j - lo)\n" in new and "_q = _p + i * _rt.span(lo, n)" in new
    assert "_p_1 = _k_c + (j - lo)\n" in new and "_q_1 = _p_1 + i * _rt.span(lo, n)" in new
    out0, c0 = _run(SWAPPED)
    out1, c1 = _run(new)
    np.testing.assert_array_equal(out1, out0)  # each pop reads what its push stored
    assert np.count_nonzero(out1) > 0
    # the same entries, stored in the order the swapped nest runs: side by side along `j`
    m, n, lo = 4, 6, 2
    np.testing.assert_array_equal(c1, c0.reshape(n - lo, m).T.ravel())
    np.testing.assert_array_equal(c1[:n - lo], (np.arange(m * n, dtype=float).reshape(m, n) / 7.0)[0, lo:])


POP_OUTER = "    for _r in range(_rt.span(lo, n)):\n        j = n - 1 - _r\n"
POP_INNER = "        for i in range(m):\n            _q_1 = _p_1 + i\n"
PUSH = """    for i in range(m):
        for j in range(lo, n):
            _p = _k_c + (j - lo) * _rt.span(0, m)
            _q = _p + i"""
LEFT_AS_THEY_ARE = {
    "the push nest not swapped (it already stores side by side)": (PUSH, """    for j in range(lo, n):
        _p = _k_c + (j - lo) * _rt.span(0, m)
        for i in range(m):
            _q = _p + i"""),
    "a bound of the outer index assigned in its loop": (
        "            A[i, j] = 2.0 * A[i, j] + i\n",
        "            A[i, j] = 2.0 * A[i, j] + i\n            lo = lo + 0\n"),
    "a position assigned twice": ("            _q = _p + i\n", "            _q = _p + i\n            _q = _p + i\n"),
    "a position also bound by a tuple": (
        POP_INNER, POP_INNER + "            _q_1, _z = _k_c + (j - lo) * _rt.span(0, m) + i, 0\n"),
    "a position read for something else": (
        "            A[i, j] = 2.0", "            out[0, 0] = _q\n            A[i, j] = 2.0"),
    "a subscript that is not a position (a slice)": (
        "            out[i, j] = c[_q_1] * (j + 1)\n",
        "            out[i, j] = c[_q_1] * (j + 1)\n    out[0, 0] = c[0:1].sum()\n"),
    "the cache read through an alias": (POP_OUTER, "    d = c\n" + POP_OUTER),
    "the cache passed to a function that is no runtime helper": (POP_OUTER, "    print(c.sum())\n" + POP_OUTER),
    "the cache passed to a runtime helper that reads entries": (POP_OUTER, "    _rt.sum_product(c, c)\n" + POP_OUTER),
    "a pop loop of fewer trips than the push loop": (
        POP_OUTER, "    n2 = n - 1\n    for _r in range(_rt.span(lo, n2)):\n        j = n2 - 1 - _r\n"),
    "an inner offset its loop does not bound by X": (
        POP_INNER, "        for i in range(m - 1):\n            _q_1 = _p_1 + i\n"),
    "an inner loop over a list": (POP_INNER, "        for i in list(range(m)):\n            _q_1 = _p_1 + i\n"),
    "an inner loop over enumerate": (
        POP_INNER, "        for i, _z in enumerate(range(m)):\n            _q_1 = _p_1 + i\n"),
}


@pytest.mark.parametrize("why", list(LEFT_AS_THEY_ARE))
def test_what_stays_as_it_is(why):
    old, new = LEFT_AS_THEY_ARE[why]
    assert old in SWAPPED
    src = SWAPPED.replace(old, new)
    assert _transposed(src) == (False, ast.unparse(ast.parse(src)))


def test_a_cache_grown_whole_is_still_laid_out_along_the_swapped_loop():
    src = SWAPPED.replace(PUSH, "    c = _rt.grow(c, c.shape[0])\n" + PUSH)
    changed, new = _transposed(src)
    assert changed
    np.testing.assert_array_equal(_run(new)[0], _run(src)[0])


def test_caches_of_other_functions_and_counters_stay_as_they_are():
    # the cache is subscripted by another function of the module (split mode's reverse half)
    assert _transposed(SWAPPED, frozenset({"c"})) == (False, ast.unparse(ast.parse(SWAPPED)))
    # a counter the facts do not name
    tree = ast.parse(SWAPPED)
    assert not transpose_caches(tree.body[0], frozenset({"_k_other"}), frozenset())  # type: ignore[arg-type]


def gramschmidt(A, R, Q):
    m, n = A.shape
    for k in range(n):
        nrm = 0.0
        for i in range(m):
            nrm += A[i, k] * A[i, k]
        R[k, k] = np.sqrt(nrm)
        for i in range(m):
            Q[i, k] = A[i, k] / R[k, k]
        for j in range(k + 1, n):
            R[k, j] = 0.0
            for i in range(m):
                R[k, j] += Q[i, k] * A[i, j]
            for i in range(m):
                A[i, j] = A[i, j] - Q[i, k] * R[k, j]
    return np.sum(R * R) + np.sum(Q * np.arange(Q.size).reshape(Q.shape))


@pytest.mark.parametrize("numba", ["kernels", True])
def test_gramschmidt_cache_of_A_is_stored_along_the_swapped_loop(numba):
    r = np.random.default_rng(21)
    args = [r.random((8, 6)) + np.eye(8, 6), np.zeros((6, 6)), np.zeros((8, 6))]
    A0 = args[0].copy()

    def grads(backend):
        ann = [Duplicated(a.copy(), np.zeros_like(a)) for a in args]
        zymo.autodiff(Reverse, gramschmidt, Active, *ann, numba=backend)
        return [a.dval for a in ann]
    got, ref = grads(numba), grads(False)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)  # to the bit: only where the cache keeps entries moved
    assert np.abs(got[0]).max() > 0
    fd = fd_grad(gramschmidt, args)
    assert_tree_close(got[0], fd[0], rtol=1e-6, atol=1e-6)
    direction = r.standard_normal(args[0].shape)
    ann = [Duplicated(A0.copy(), direction.copy()), Duplicated(np.zeros((6, 6)), np.zeros((6, 6))),
           Duplicated(np.zeros((8, 6)), np.zeros((8, 6)))]
    (tangent,) = zymo.autodiff(Forward, gramschmidt, Duplicated, *ann)
    np.testing.assert_allclose(np.sum(got[0] * direction), tangent, rtol=1e-10)
    ann = [Duplicated(a.copy(), np.zeros_like(a)) for a in args]
    code = zymo.generated_code(Reverse, gramschmidt, Active, *ann, numba=numba)
    tree = ast.parse(code)
    stores = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Subscript)
              and ast.unparse(n.targets[0].value) == "_cache_A"]
    assert stores, code
    # the store's position steps by one along the loop around it (the swapped loop over `j`)
    defs = {n.targets[0].id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and isinstance(n.targets[0], ast.Name) and n.targets[0].id.startswith("_pos_k_A")}
    for st in stores:
        q = defs[ast.unparse(st.targets[0].slice)]  # type: ignore[attr-defined]
        assert isinstance(q, ast.BinOp) and "_rt.span(" in ast.unparse(q.right), ast.unparse(q)
        p = defs[ast.unparse(q.left)]
        assert "_rt.span" not in ast.unparse(p), ast.unparse(p)
