"""Unroll-and-jam (`codegen/jam.py`, run by `codegen/loop_order.lean_loops`): an independent
loop whose inner loop carries a chain runs 4 (or 2) iterations at once, to the bit.

Tested on generated-style source (what it rewrites, what it leaves alone, the same numbers run
as Python for every remainder of the trip count, the parallel twins' loop restored whole),
then end to end: the compiled backends' gradients equal the Python backend's to the bit, and
central differences and forward mode agree."""
from __future__ import annotations

import ast

import numpy as np
import pytest
from helpers import assert_tree_close, fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse
from zymo.codegen.jam import unjammed
from zymo.codegen.loop_order import lean_loops
from zymo.transform.reverse.facts import MemoryFacts

ROWS = '''
def f(A, d, x, n, m):
    for i in range(n):
        for j in range(m):
            d[i] += A[i, j] * x[j]
'''
NDIMS = {"A": 2, "B": 2, "d": 1, "e": 1, "x": 1, "p": 2, "q": 2}


def _facts(names=("A", "d", "x"), shared=()) -> MemoryFacts:
    roots = {n: (k,) for k, n in enumerate(names)}
    for a, b in shared:
        roots[b] = roots[a]
    return MemoryFacts(roots, frozenset(roots), dict(NDIMS))


def _run(src: str, *args):
    env: dict = {"np": np, "_rt": zymo.runtime}
    exec(src, env)
    return env["f"](*args)


def _jammed(src, facts=None):
    copies: dict[str, str] = {}
    return lean_loops(src, facts or _facts(), copies), copies


def test_rows_run_four_at_a_time_and_exact_for_every_remainder():
    out, copies = _jammed(ROWS)
    assert "for i in range(0, n - 3, 4):" in out and "for i in range(_rt.span(0, n) // 4 * 4, n):" in out
    assert "_acc_d_j3 += A[i_j3, j] * x[j]" in out
    assert copies["i_j1"] == "i" and copies["_acc_d_j2"] == "_acc_d"
    rng = np.random.default_rng(0)
    for n in (0, 1, 3, 4, 5, 7, 8, 9):
        A, x, d = rng.random((n, 6)) * 1e3, rng.random(6), rng.random(n)
        d1, d2 = d.copy(), d.copy()
        _run(ROWS, A, d1, x, n, 6)
        _run(out, A, d2, x, n, 6)
        assert np.array_equal(d1, d2)


def test_a_larger_body_runs_two_at_a_time():
    body = "\n".join(f"            t{k} = A[i, j] * {k + 1}.5" for k in range(12))
    src = f'''
def f(A, d, x, n, m):
    for i in range(n):
        for j in range(m):
{body}
            d[i] += {" + ".join(f"t{k}" for k in range(12))} * x[j]
'''
    out, _ = _jammed(src)
    assert "for i in range(0, n - 1, 2):" in out and "_rt.span(0, n) // 2 * 2" in out
    rng = np.random.default_rng(1)
    for n in (3, 4):
        A, x, d = rng.random((n, 5)), rng.random(5), rng.random(n)
        d1, d2 = d.copy(), d.copy()
        _run(src, A, d1, x, n, 5)
        _run(out, A, d2, x, n, 5)
        assert np.array_equal(d1, d2)


RECURRENCE = '''
def f(p, q, x, n, m):
    for i in range(1, n):
        p[i, 0] = x[i]
        for j in range(1, m):
            p[i, j] = -0.5 / (0.3 * p[i, j - 1] + 1.7)
            q[i, j] = (x[j] - 0.3 * q[i, j - 1]) / (0.3 * p[i, j - 1] + 1.7)
'''


def test_a_recurrence_through_memory_is_jammed_from_its_start():
    """adi's sweeps: a chain through `p[i, j - 1]`, rows from 1."""
    out, _ = _jammed(RECURRENCE, _facts(("p", "q", "x")))
    assert "for i in range(1, n - 3, 4):" in out and "range(1 + _rt.span(1, n) // 4 * 4, n)" in out
    rng = np.random.default_rng(2)
    for n in (1, 2, 5, 6, 9):
        x = rng.random(max(n, 7))
        a = [np.zeros((n, 7)), np.zeros((n, 7))]
        b = [np.zeros((n, 7)), np.zeros((n, 7))]
        _run(RECURRENCE, *a, x, n, 7)
        _run(out, *b, x, n, 7)
        assert all(np.array_equal(u, v) for u, v in zip(a, b))


# atax's row loop: a chained sum per row, then an update every row adds into (`y[j]`)
COUPLED = '''
def f(A, d, x, y, n, m):
    for i in range(n):
        d[i] = 0.0
        for j in range(m):
            d[i] += A[i, j] * x[j]
        for j in range(m):
            y[j] += A[i, j] * d[i]
'''


def test_a_coupled_loop_splits_and_its_chained_part_is_jammed():
    facts = _facts(names=("A", "d", "x", "y"))
    out, copies = _jammed(COUPLED, facts)
    assert out.count("for i in ") == 4, out  # zeros, the sums four rows at once and the rest, the update
    assert "for i in range(0, n - 3, 4):" in out and copies["i_j1"] == "i"
    assert out.index("_acc_d_j1") < out.index("y[j] +=")
    rng = np.random.default_rng(9)
    for n in (0, 1, 2, 3, 5):
        A, x, y = rng.random((n, 6)) * 1e3, rng.random(6), rng.random(6)
        want = [np.zeros(n), y.copy()]
        got = [np.zeros(n), y.copy()]
        _run(COUPLED, A, want[0], x, want[1], n, 6)
        _run(out, A, got[0], x, got[1], n, 6)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_a_coupled_loop_without_a_chain_is_not_split():
    facts = _facts(names=("A", "d", "x", "y"))
    src = COUPLED.replace("d[i] += A[i, j] * x[j]", "A[i, j] = d[i] * x[j]")
    out, copies = _jammed(src, facts)
    assert "_j1" not in out and not copies and out.count("for i in ") == 1


@pytest.mark.parametrize("src, facts", [
    (ROWS.replace("d[i] +=", "d[j] +="), None),  # the rows share d: not independent
    (ROWS.replace("d[i] += A[i, j] * x[j]", "A[i, j] = d[i] * x[j]"), None),  # no chain
    (ROWS.replace("range(m)", "range(i)"), None),  # a triangle: no fused loop
    (ROWS, _facts(shared=[("d", "x")])),  # d may overlap x
    (ROWS, _facts(names=("A", "d"))),  # x unknown
    (ROWS.replace("    for i in range(n):", "    for i in range(n):\n        m = 3"), None),  # bounds assigned
    (ROWS.replace("for i in range(n):", "for i in range(0, n, 2):"), None),  # a step
    (ROWS + "    return i\n", None),  # the index read after the loop
])
def test_left_alone(src, facts):
    out, copies = _jammed(src, facts)
    assert "_j1" not in out and not copies


def test_a_branch_on_the_row_runs_per_copy_and_an_invariant_one_fused():
    src = '''
def f(A, d, e, x, n, m):
    for i in range(n):
        if i % 2 == 0:
            e[i] = 1.0
        if m > 2:
            for j in range(m):
                d[i] += A[i, j] * x[j]
'''
    out, _ = _jammed(src, _facts(("A", "d", "e", "x")))
    tree = ast.parse(out).body[0].body[0]
    assert isinstance(tree, ast.For) and "range(0, n - 3, 4)" in ast.unparse(tree.iter)
    branches = [s for s in tree.body if isinstance(s, ast.If)]
    assert [ast.unparse(b.test) for b in branches] == ["i % 2 == 0", "i_j1 % 2 == 0", "i_j2 % 2 == 0",
                                                      "i_j3 % 2 == 0", "m > 2"]
    rng = np.random.default_rng(3)
    for n, m in ((6, 4), (7, 2)):
        A, x = rng.random((n, m)), rng.random(m)
        a, b = [rng.random(n), np.zeros(n)], None
        b = [a[0].copy(), a[1].copy()]
        _run(src, A, *a, x, n, m)
        _run(out, A, *b, x, n, m)
        assert all(np.array_equal(u, v) for u, v in zip(a, b))


def test_the_twins_run_the_jammed_loop_whole():
    out, _ = _jammed(ROWS)
    fn = ast.parse(out).body[0]
    whole = unjammed(fn.body)
    assert len(whole) == 1 and ast.unparse(whole[0]).startswith("for i in range(n):")
    plain, _ = _jammed(RECURRENCE, _facts(("p", "q", "x")))
    whole = unjammed(ast.parse(plain).body[0].body)
    assert len(whole) == 1 and ast.unparse(whole[0]).startswith("for i in range(1, n):")


# -- end to end ---------------------------------------------------------------------------------


def mvt_like(A, x1, y1):
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            x1[i] = x1[i] + A[i, j] * y1[j]
    return np.sum(x1 * x1)


def sweeps(u, p, q, a, b):
    """adi's column sweep: independent rows, each a division chain."""
    n = u.shape[0]
    for i in range(1, n - 1):
        p[i, 0] = 0.0
        q[i, 0] = u[i, 0]
        for j in range(1, n - 1):
            p[i, j] = -a / (a * p[i, j - 1] + b)
            q[i, j] = (u[j, i] - a * q[i, j - 1]) / (a * p[i, j - 1] + b)
    return np.sum(q * q) + np.sum(p * u)


def atax_like(A, x, y, tmp):
    m, n = A.shape
    for i in range(m):
        tmp[i] = 0.0
        for j in range(n):
            tmp[i] = tmp[i] + A[i, j] * x[j]
        for j in range(n):
            y[j] = y[j] + A[i, j] * tmp[i]
    return np.sum(y * y)


def _atax_args():
    r = np.random.default_rng(6)
    return [r.random((7, 6)), r.random(6), np.zeros(6), np.zeros(7)]


def _mvt_args():
    r = np.random.default_rng(4)
    return [r.random((7, 7)), r.random(7), r.random(7)]


def _sweep_args():
    r = np.random.default_rng(5)
    return [r.random((8, 8)), np.zeros((8, 8)), np.zeros((8, 8)), -0.3, 1.6]


@pytest.mark.parametrize("f, make, wrt", [(mvt_like, _mvt_args, (0, 1, 2)), (sweeps, _sweep_args, (0,)),
                                           (atax_like, _atax_args, (0, 1))])  # atax: split, then jammed
@pytest.mark.parametrize("numba", [True, "kernels"])
def test_compiled_gradients_equal_python_to_the_bit(f, make, wrt, numba):
    def grads(backend):
        args = make()
        sh = {i: np.zeros_like(args[i]) for i in range(len(args)) if isinstance(args[i], np.ndarray)}
        ann = [Duplicated(a, sh[i]) if i in sh else Const(a) for i, a in enumerate(args)]
        zymo.autodiff(Reverse, f, Active, *ann, numba=backend)
        return [sh[i] for i in wrt]

    code = zymo.generated_code(Reverse, f, Active, *[Duplicated(a, np.zeros_like(a)) if isinstance(a, np.ndarray)
                                                     else Const(a) for a in make()], numba=numba)
    assert ", 4):" in code or ", 2):" in code  # jammed
    got, want = grads(numba), grads(False)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert all(np.any(g != 0.0) for g in got)
    fd = fd_grad(f, make())
    for k, i in enumerate(wrt):
        assert_tree_close(got[k], fd[i], rtol=1e-5, atol=1e-7)
    args = make()
    x = args[wrt[0]]
    for idx in [(1, 2), (3, 1)] if x.ndim == 2 else [(2,), (5,)]:
        e = np.zeros_like(x)
        e[idx] = 1.0
        args = make()
        ann = [Duplicated(a, e if i == wrt[0] else np.zeros_like(a)) if isinstance(a, np.ndarray) else Const(a)
               for i, a in enumerate(args)]
        tangent = zymo.autodiff(Forward, f, Duplicated, *ann, numba=numba)[0]
        assert tangent == pytest.approx(got[0][idx], rel=1e-12)


def test_two_threads_run_the_groups_in_parallel_with_the_same_gradient():
    """The parallel twin splits the jammed loop's groups of rows between threads
    (`jam.parallel_groups`); the tail stays serial."""
    import numba

    r = np.random.default_rng(6)
    A, y = r.random((301, 301)), r.random(301)
    code = zymo.generated_code(Reverse, mvt_like, Active, Duplicated(A, np.zeros_like(A)),
                               Duplicated(np.zeros(301), np.zeros(301)), Duplicated(y, np.zeros(301)), numba="kernels")
    twin = code[code.index("_parallel("):]
    assert "for _grp in numba.prange(_rt.span(0, n) // 4):\n        i = 0 + _grp * 4\n        i_j1 = i + 1" in twin
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread")
    out = []
    for threads in (1, 2):
        zymo.config.set_threads(threads)
        try:
            dA, dx, dy = np.zeros_like(A), np.zeros(301), np.zeros(301)
            zymo.autodiff(Reverse, mvt_like, Active, Duplicated(A, dA), Duplicated(np.zeros(301), dx),
                          Duplicated(y, dy), numba="kernels")
            out.append((dA, dy))
        finally:
            zymo.config.set_threads(None)
    assert all(np.array_equal(a, b) for a, b in zip(*out))


def zero_divisor(A, d, w):
    n, m = A.shape
    for i in range(n):
        s = 0.0
        for j in range(m):
            s = s + A[i, j] / w[j]
        d[i] = s
    return np.sum(d)


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_copies_divide_as_the_names_they_copy(numba):
    """A copy's names hold the facts of the names they copy (`pipeline._with_copies`): a
    division by zero in row 1..3 gives what row 0's gives, as in the Python backend."""
    A = np.arange(1.0, 25.0).reshape(6, 4)
    w = np.array([1.0, 0.0, 2.0, -0.0])
    runs = []
    for backend in (numba, False):
        d, dA = np.zeros(6), np.zeros_like(A)
        with np.errstate(divide="ignore", invalid="ignore"):
            zymo.autodiff(Reverse, zero_divisor, Active, Duplicated(A, dA), Duplicated(d, np.zeros(6)), Const(w),
                          numba=backend)
        runs.append((d, dA))
    for a, b in zip(*runs):
        assert np.array_equal(a, b, equal_nan=True)


def nested(T, w, d, e):
    """A jammed middle loop beside a chain of the outer loop: both jammed, copies of copies."""
    n, m, p = T.shape
    for i in range(n):
        for j in range(m):
            s = 0.0
            for k in range(p):
                s = s + T[i, j, k] / w[k]
            d[i, j] = s
        t = 0.0
        for k in range(p):
            t = t * 0.5 + T[i, 0, k]
        e[i] = t
    return np.sum(d) + np.sum(e)


def test_copies_of_copies_hold_the_first_names_facts(monkeypatch):
    """Found in review: a copy of a copy (`s_j1_j1` of `s_j1` of `s`) got no facts."""
    import zymo.pipeline as P

    assert P._copy_roots({"a_j1": "a", "a_j1_j1": "a_j1", "b_j2": "b"}) == {"a_j1": "a", "a_j1_j1": "a",
                                                                          "b_j2": "b"}
    seen = []
    orig = P._with_copies

    def spy(facts, copies):
        out = orig(facts, copies)
        if copies:
            seen.append((copies, out))
        return out
    monkeypatch.setattr(P, "_with_copies", spy)
    import zymo.codegen.jam as J

    monkeypatch.setattr(J, "_LARGE", 40)  # the outer body holds the middle loop's copies
    zymo.cache.cache_clear()
    args = [np.random.default_rng(3).random((6, 5, 4)), np.array([1.0, 0.0, 2.0, -0.0]), np.zeros((6, 5)),
            np.zeros(6)]
    runs = []
    for numba in (True, False):
        sh = [np.zeros_like(a) for a in args]
        with np.errstate(divide="ignore", invalid="ignore"):
            zymo.autodiff(Reverse, nested, Active, *[Duplicated(a.copy(), s) for a, s in zip(args, sh)],
                          numba=numba)
        runs.append(sh)
    copies, facts = seen[-1]
    deep = [n for n in copies if n.count("_j") >= 2]
    assert deep and all(n in facts.nonneg or n in facts.floats or n in facts.arrays or n in facts.numbers
                        for n in deep)
    for a, b in zip(*runs):
        assert np.array_equal(a, b, equal_nan=True)


def rows_then_columns(A, x, y, z):
    """A jammed row loop, then a loop the twin splits (`outline._split_for_twin`): its resets
    run in parallel, its column sums by blocks. The split copies the kernel's body."""
    n = A.shape[0]
    for i in range(n):
        s = 0.0
        for j in range(n):
            s = s + A[i, j] * x[j]
        y[i] = s
    for i in range(n):
        y[i] = y[i] * 2.0
        for j in range(n):
            z[j] += A[i, j] * y[i]
    return np.sum(z * z)


def test_a_twin_that_splits_another_loop_still_runs_the_groups():
    import numba

    r = np.random.default_rng(9)
    A, x = r.random((37, 37)), r.random(37)
    ann = [Duplicated(A, np.zeros_like(A)), Duplicated(x, np.zeros(37)), Duplicated(np.zeros(37), np.zeros(37)),
           Duplicated(np.zeros(37), np.zeros(37))]
    code = zymo.generated_code(Reverse, rows_then_columns, Active, *ann, numba="kernels")
    first = code[code.index("def _kernel_0_parallel("):]
    first = first[:first.index("\ndef ")]
    assert "for _grp in numba.prange(" in first and "_blk" in first  # grouped, and the split's blocks
    runs = []
    for threads, backend in ((1, "kernels"), (2, "kernels"), (1, False)):
        zymo.config.set_threads(threads)
        try:
            sh = [np.zeros_like(A), np.zeros(37), np.zeros(37), np.zeros(37)]
            fresh = [A.copy(), x.copy(), np.zeros(37), np.zeros(37)]
            zymo.autodiff(Reverse, rows_then_columns, Active, *[Duplicated(a, s) for a, s in zip(fresh, sh)],
                          numba=backend)
            runs.append(sh[:2])
        finally:
            zymo.config.set_threads(None)
    assert all(np.array_equal(a, b) for a, b in zip(runs[0], runs[1]))
    assert all(np.array_equal(a, b) for a, b in zip(runs[0], runs[2]))
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread: the twin did not run")


def test_whole_programs_run_larger_bodies_four_at_a_time():
    """A body of 14-40 statements: two at a time (up to 20) or left alone in the "kernels"
    backend's loops (their first call is a target: compile time), four at a time in a program
    Numba compiles whole (`whole`, `numba=True`); the same numbers either way, every remainder."""
    body = "\n".join(f"            t{k} = A[i, j] * {k + 1}.5" for k in range(24))
    src = f'''
def f(A, d, x, n, m):
    for i in range(n):
        for j in range(m):
{body}
            d[i] += {" + ".join(f"t{k}" for k in range(24))} * x[j]
'''
    alone = lean_loops(src, _facts(), {})  # 26 statements: not jammed (accumulators in locals)
    assert ", 4):" not in alone and ", 2):" not in alone
    out = lean_loops(src, _facts(), {}, whole=True)
    assert "for i in range(0, n - 3, 4):" in out and "_rt.span(0, n) // 4 * 4" in out
    rng = np.random.default_rng(2)
    for n in (3, 4, 5, 6, 7):
        A, x, d = rng.random((n, 5)), rng.random(5), rng.random(n)
        d1, d2 = d.copy(), d.copy()
        _run(src, A, d1, x, n, 5)
        _run(out, A, d2, x, n, 5)
        assert np.array_equal(d1, d2)


def adi_sweeps(u, v, p, q, a, b):
    """adi's row sweep with its back substitution: a body too large for the "kernels" backend's
    jam, jammed in whole programs."""
    n = u.shape[0]
    for i in range(1, n - 1):
        v[i, 0] = 1.0
        p[i, 0] = 0.0
        q[i, 0] = v[i, 0]
        for j in range(1, n - 1):
            p[i, j] = -a / (a * p[i, j - 1] + b)
            q[i, j] = ((-a * u[i - 1, j] + (1.0 + 2.0 * a) * u[i, j] - a * u[i + 1, j] - a * q[i, j - 1])
                       / (a * p[i, j - 1] + b))
        v[i, n - 1] = 1.0
        for j in range(n - 2, 0, -1):
            v[i, j] = p[i, j] * v[i, j + 1] + q[i, j]
    return np.sum(v * v)


def test_whole_program_gradient_with_a_large_jammed_body_equals_python_to_the_bit():
    def make():
        r = np.random.default_rng(9)
        return [r.random((9, 9)), np.zeros((9, 9)), np.zeros((9, 9)), np.zeros((9, 9)), -0.3, 1.6]

    def grads(backend):
        args = make()
        sh = {i: np.zeros_like(args[i]) for i in range(4)}
        ann = [Duplicated(a, sh[i]) if i in sh else Const(a) for i, a in enumerate(args)]
        zymo.autodiff(Reverse, adi_sweeps, Active, *ann, numba=backend)
        return sh[0]

    ann = [Duplicated(a, np.zeros_like(a)) if isinstance(a, np.ndarray) else Const(a) for a in make()]
    assert ", 4):" in zymo.generated_code(Reverse, adi_sweeps, Active, *ann, numba=True)
    assert ", 4):" not in zymo.generated_code(Reverse, adi_sweeps, Active, *ann, numba="kernels")
    got, want = grads(True), grads(False)
    assert np.array_equal(got, want) and np.any(got != 0.0)
    assert_tree_close(got, fd_grad(adi_sweeps, make())[0], rtol=1e-5, atol=1e-7)
