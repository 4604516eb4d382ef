"""Sums in any order (`zymo.config.set_reassociate`): compiled derivatives built with LLVM's
`reassoc` flag, and reversed loops that differ only in the order of their sums run forward
(`codegen/parallel.independent(..., sums=...)`, `codegen/loop_order.lean_loops(reorder=True)`).

Tested on generated-style source (what counts as a sum, what does not, and that the strict rule
used for parallel loops is unchanged), then end to end: with the setting on, the compiled
gradients agree with the Python backend to rounding and with central differences; with it off
(the default) they equal the Python backend to the bit, and the two settings are cached apart."""
from __future__ import annotations

import ast
import os

import numpy as np
import pytest
from helpers import assert_tree_close, fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse
from zymo.codegen.loop_forms import nonneg_names
from zymo.codegen.loop_order import lean_loops
from zymo.codegen.parallel import independent
from zymo.transform.reverse.facts import MemoryFacts

NDIMS = {"A": 2, "B": 2, "dA": 2, "dB": 2, "d": 1, "x": 1, "y": 1}


def _loop(src: str) -> ast.For:
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    loop = next(s for s in fn.body if isinstance(s, ast.For))
    return loop


def _after(src: str) -> list[list[ast.stmt]]:
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    k = next(k for k, s in enumerate(fn.body) if isinstance(s, ast.For))
    return [fn.body[k + 1:]]


SHARED_ROW = '''
def f(A, B, dB, dA, n, m, i):
    for _r in range(i):
        k = i - 1 - _r
        for j in range(m):
            dB[k, j] += A[i, k] * B[k, j]
            dB[i, j] += A[i, k] * B[i, j]
        dA[i, k] = B[k, 0]
'''
LOCAL_SUM = '''
def f(x, y, n):
    s = 0.0
    for _r in range(n):
        i = n - 1 - _r
        y[i] = 2.0 * x[i]
        s += x[i] * x[i]
        s -= x[i]
    return s
'''


def test_shared_sums_count_only_when_reordering_is_allowed():
    for src in (SHARED_ROW, LOCAL_SUM):
        loop, rest = _loop(src), _after(src)
        assert not independent(loop, NDIMS, rest)
        assert independent(loop, NDIMS, rest, sums=frozenset({"s"}))


@pytest.mark.parametrize("body", [
    "dB[i, j] += A[i, k]\n            t = dB[i, j]",  # the sum read back
    "dB[i, j] *= A[i, k]",  # a product: not a sum
    "dB[i, j] = dB[i, j] + A[i, k]",  # read as a value: the loop must see the store
    "dB[i, j] += dB[k, j]",  # terms read the sum
    "dB[i, j] += A[i, k]\n            np.copyto(dB, B)",  # the array reached whole
])
def test_what_is_not_a_sum(body):
    src = f'''
def f(A, B, dB, n, m, i):
    for _r in range(i):
        k = i - 1 - _r
        for j in range(m):
            {body}
'''
    assert not independent(_loop(src), NDIMS, _after(src), sums=frozenset())


def test_a_local_read_inside_the_loop_is_carried():
    src = LOCAL_SUM.replace("y[i] = 2.0 * x[i]", "y[i] = s * x[i]")
    assert not independent(_loop(src), NDIMS, _after(src), sums=frozenset({"s"}))


VIEW_SUM = '''
def f(A, x, n):
    acc = A[0]
    for _r in range(n):
        i = n - 1 - _r
        acc += A[i] * x[i]
'''


def test_a_name_not_known_to_hold_a_number_is_not_a_sum():
    # `acc` is a view of `A`'s first row, which the loop reads: adding into it in another order
    # changes the terms (review 50)
    assert not independent(_loop(LOCAL_SUM), NDIMS, _after(LOCAL_SUM), sums=frozenset())
    assert not independent(_loop(VIEW_SUM), NDIMS, _after(VIEW_SUM), sums=frozenset({"s"}))
    out = lean_loops(VIEW_SUM, MemoryFacts({"A": (0,), "x": (1,)}, frozenset({"A", "x"}), {"A": 2, "x": 1}),
                     reorder=True)
    assert "i = n - 1 - _r" in out
    facts = MemoryFacts({"x": (1,), "y": (2,)}, frozenset({"x", "y"}), {"x": 1, "y": 1}, floats=frozenset({"s"}))
    assert "for i in range(n):" in lean_loops(LOCAL_SUM, facts, reorder=True)
    assert "i = n - 1 - _r" in lean_loops(LOCAL_SUM, facts)


def _facts(names=("A", "B", "dA", "dB", "x", "y")) -> MemoryFacts:
    return MemoryFacts({n: (k,) for k, n in enumerate(names)}, frozenset(names), dict(NDIMS))


def test_lean_loops_runs_the_sums_forward_only_when_asked():
    exact = lean_loops(SHARED_ROW, _facts())
    assert "for _r in range(i):" in exact and "k = i - 1 - _r" in exact
    out = lean_loops(SHARED_ROW, _facts(), reorder=True)
    assert "for k in range(i):" in out and "_r" not in out
    rng = np.random.default_rng(0)
    n, m = 5, 4
    A, B = rng.random((n, n)), rng.random((n, m))
    results = []
    for src in (SHARED_ROW, out):
        env: dict = {"np": np}
        exec(src, env)
        dB, dA = np.zeros((n, m)), np.zeros((n, n))
        env["f"](A, B, dB, dA, n, m, n - 1)
        results.append((dB, dA))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-14)
    assert np.array_equal(results[1][1], results[0][1])


def test_overlapping_arrays_keep_the_loop_reversed():
    facts = _facts()
    facts = MemoryFacts({**facts.roots, "B": facts.roots["dB"]}, facts.wide, dict(NDIMS))
    out = lean_loops(SHARED_ROW, facts, reorder=True)
    assert "k = i - 1 - _r" in out


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


def _symm_args(n=7):
    r = np.random.default_rng(9)
    return [1.5, 1.2, r.random((n, n + 2)), r.random((n, n)), r.random((n, n + 2))]


def _grad(numba, args=None):
    args = args or _symm_args()
    ann = [Duplicated(a.copy(), np.zeros_like(a)) if isinstance(a, np.ndarray) else Const(a) for a in args]
    zymo.autodiff(Reverse, symm, Active, *ann, numba=numba)
    return [a.dval for a in ann if isinstance(a, Duplicated)]


@pytest.fixture
def reassociate():
    zymo.config.set_reassociate(True)
    yield
    zymo.config.set_reassociate(None)


def test_the_setting_reads_the_environment(monkeypatch):
    monkeypatch.setenv("ZYMO_REASSOCIATE", "1")
    zymo.config.set_reassociate(None)  # reads it again (once otherwise: `zymo.config`'s docstring)
    try:
        assert zymo.config.reassociate()
        zymo.config.set_reassociate(False)
        assert not zymo.config.reassociate()
        zymo.config.set_reassociate(None)
        assert zymo.config.reassociate()
        monkeypatch.setenv("ZYMO_REASSOCIATE", "0")
        assert zymo.config.reassociate()  # kept: replays and new programs agree
        zymo.config.set_reassociate(None)
        assert not zymo.config.reassociate()
        assert "ZYMO_REASSOCIATE" in os.environ
    finally:
        monkeypatch.undo()
        zymo.config.set_reassociate(None)


@pytest.mark.parametrize("numba", ["kernels", True])
def test_reordered_gradients_agree_to_rounding(reassociate, numba):
    ref = _grad(False)
    got = _grad(numba)
    assert_tree_close(got, ref, rtol=1e-12, atol=1e-12)
    args = _symm_args()
    fd = fd_grad(symm, args)
    assert_tree_close(got, [fd[k] for k in (2, 3, 4)], rtol=1e-6, atol=1e-6)
    ann = [Duplicated(a.copy(), np.zeros_like(a)) if isinstance(a, np.ndarray) else Const(a) for a in _symm_args()]
    code = zymo.generated_code(Reverse, symm, Active, *ann, numba=True)  # loops ("kernels": BLAS products)
    assert "i_2 = i - 1 - _r" not in code  # the adjoint of `k` runs forward


def test_the_default_stays_exact_and_the_settings_are_cached_apart():
    # symm's nests run as loops under `numba=True` (as BLAS products under "kernels")
    ref = _grad(False)
    exact = _grad(True)
    for g, r in zip(exact, ref):
        assert np.array_equal(g, r)
    zymo.config.set_reassociate(True)
    try:
        ann = [Duplicated(a.copy(), np.zeros_like(a)) if isinstance(a, np.ndarray) else Const(a)
               for a in _symm_args()]
        reordered = zymo.generated_code(Reverse, symm, Active, *ann, numba=True)
    finally:
        zymo.config.set_reassociate(None)
    default = zymo.generated_code(Reverse, symm, Active, *ann, numba=True)
    assert "i_2 = i - 1 - _r" not in reordered and "i_2 = i - 1 - _r" in default
    assert [np.array_equal(g, r) for g, r in zip(_grad(True), ref)] == [True] * 3


def test_forward_mode_and_the_compiled_flag(reassociate):
    args = _symm_args()
    ann = [Duplicated(a.copy(), np.ones_like(a)) if isinstance(a, np.ndarray) else Const(a) for a in args]
    tangent = zymo.autodiff(Forward, symm, Duplicated, *ann, numba="kernels")[0]
    grads = _grad(False)
    assert np.isclose(tangent, sum(g.sum() for g in grads), rtol=1e-12)
    from zymo.codegen.numba.backend import compile_numba
    src = "def k(x):\n    s = 0.0\n    for i in range(x.shape[0]):\n        s += x[i]\n    return s\n"
    (fn,) = compile_numba(src, ["k"], "a test", reassociate=True)
    assert fn.targetoptions.get("fastmath") == {"reassoc"}
    assert fn(np.arange(10.0)) == 45.0


# gramschmidt's adjoint loop over `j` (before the loop rewrites): a column sum into `dR[k, j]`,
# then a column update of `dA[:, j]`, both adding into the column `dQ[:, k]`
GS = '''
def f(Q, R, A, dA, dQ, dR, k, n, m):
    for _r in range(_rt.span(k + 1, m)):
        j = m - 1 - _r
        for _s in range(n):
            i = n - 1 - _s
            t = -dA[i, j]
            dR[k, j] += Q[i, k] * t
            dQ[i, k] += t * R[k, j]
        for i2 in range(n):
            dA[i2, j] += Q[i2, k] * dR[k, j]
            dQ[i2, k] += dR[k, j] * A[i2, j]
        dR[k, j] = 0.0
'''
GS_NDIMS = {"Q": 2, "R": 2, "A": 2, "dA": 2, "dQ": 2, "dR": 2}


class _Rt:
    @staticmethod
    def span(lo, hi):
        return hi - lo if hi > lo else 0


def test_parts_that_add_into_one_column_split_and_walk_rows_only_when_sums_may_reorder():
    names = tuple(GS_NDIMS)
    facts = MemoryFacts({n: (k,) for k, n in enumerate(names)}, frozenset(names), dict(GS_NDIMS))
    with nonneg_names(frozenset({"i", "i2", "j", "k"})):  # as the analysis proves them (`pipeline._proven`)
        exact = lean_loops(GS, facts)
        out = lean_loops(GS, facts, reorder=True)
    assert exact.count("for ") == 3  # one loop over `j` around both column walks
    tree = ast.parse(out).body[0]
    assert isinstance(tree, ast.FunctionDef)
    tops = [s for s in tree.body if isinstance(s, (ast.For, ast.If))]
    assert len(tops) >= 2  # split into one nest per part
    for nest in tops:  # each nest walks rows: its innermost loop runs over `j`
        inner = [n for n in ast.walk(nest) if isinstance(n, ast.For)][-1]
        assert "j" in ast.unparse(inner), ast.unparse(nest)
    rng = np.random.default_rng(1)
    n, m, k = 6, 5, 1
    Q, R, A = rng.random((n, m)), rng.random((m, m)), rng.random((n, m))
    start = rng.random((n, m)), rng.random((n, m)), rng.random((m, m))  # dA, dQ, dR
    got = []
    for src in (GS, out):
        env: dict = {"np": np, "_rt": _Rt}
        exec(src, env)
        dA, dQ, dR = (x.copy() for x in start)
        env["f"](Q, R, A, dA, dQ, dR, k, n, m)
        assert all(not np.array_equal(x, x0) for x, x0 in zip((dA, dQ, dR), start))
        got.append((dA, dQ, dR))
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=1e-13)


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
def test_a_split_and_swapped_adjoint_agrees_to_rounding(reassociate, numba):
    r = np.random.default_rng(14)
    args = [r.random((7, 5)) + np.eye(7, 5), np.zeros((5, 5)), np.zeros((7, 5))]

    def grads(backend):
        ann = [Duplicated(a.copy(), np.zeros_like(a)) for a in args]
        zymo.autodiff(Reverse, gramschmidt, Active, *ann, numba=backend)
        return [a.dval for a in ann]
    got, ref = grads(numba), grads(False)
    assert_tree_close(got, ref, rtol=1e-12, atol=1e-12)
    fd = fd_grad(gramschmidt, args)
    assert_tree_close(got[0], fd[0], rtol=1e-6, atol=1e-6)
    ann = [Duplicated(a.copy(), np.zeros_like(a)) for a in args]
    code = zymo.generated_code(Reverse, gramschmidt, Active, *ann, numba="kernels")
    adjoint = ast.parse(code[code.index("def _kernel_1"):code.index("# the program")])
    # no inner loop walks down a column of `dA` that an enclosing loop (other than the one over
    # `k`) moves along: those nests were swapped to walk rows
    kernel = adjoint.body[0]
    assert isinstance(kernel, ast.FunctionDef)
    columns, rows = [], []

    def visit(stmts, outer):
        for st in stmts:
            if isinstance(st, ast.For):
                var = st.target.id  # type: ignore[attr-defined]
                inner = [n for b in st.body for n in ast.walk(b) if isinstance(n, ast.For)]
                if not inner:
                    for n in ast.walk(st):
                        if isinstance(n, ast.AugAssign) and ast.unparse(n.target).startswith("dA["):
                            parts = n.target.slice.elts  # type: ignore[attr-defined]
                            last = ast.unparse(parts[-1])
                            (rows if last == var else columns).append((var, last, tuple(outer)))
                visit(st.body, outer + [var])
            elif isinstance(st, ast.If):
                visit(st.body, outer)
                visit(st.orelse, outer)
    visit(kernel.body, [])
    assert rows  # rows of `dA`, walked by the inner loop over `j`
    assert all(last not in outer[1:] for _, last, outer in columns), columns
