"""Lean loops for the compiled backends (`codegen/loop_order.py`): element accumulators in
locals, invariant reads hoisted, independent adjoint loops run forward.

The rewrite is tested on generated-style source (what it changes, what it must leave alone,
and that the rewritten source computes the same numbers, to the bit, run as Python), then end
to end: gradients of the Numba and "kernels" backends equal the Python backend's to the bit and
central differences, including arguments that share memory, where nothing may move."""
from __future__ import annotations

import ast

import numpy as np
import pytest

import zymo
from zymo import Active, Const, Duplicated, Reverse
from zymo.codegen.loop_order import lean_loops
from zymo.testing import check_grad
from zymo.transform.reverse.facts import MemoryFacts

ACC = '''
def f(A, d, x, n, m):
    for i in range(n):
        for j in range(m):
            d[i] += A[i, j] * x[j]
'''
NDIMS = {"A": 2, "d": 1, "x": 1, "dA": 2, "dx": 1}


def _facts(roots: dict[str, tuple[int, ...]], wide: set[str] | None = None) -> MemoryFacts:
    return MemoryFacts(roots, frozenset(roots if wide is None else wide), dict(NDIMS))


def _run(src: str, *args):
    env: dict = {"np": np, "_rt": zymo.runtime}
    exec(src, env)
    return env["f"](*args)


def _acc_args(rng):
    return rng.random((5, 4)), rng.random(5), rng.random(4), 5, 4


def test_accumulator_kept_in_a_local_and_exact():
    out = lean_loops(ACC, _facts({"A": (0,), "d": (1,), "x": (2,)}))
    assert "_acc_d = d[i]" in out and "_acc_d += A[i, j] * x[j]" in out and "d[i] = _acc_d" in out
    assert "if m > 0:" in out  # the element is read only where the loop runs
    rng = np.random.default_rng(0)
    a, b = _acc_args(rng), _acc_args(np.random.default_rng(0))
    _run(ACC, *a)
    _run(out, *b)
    assert np.array_equal(a[1], b[1])


@pytest.mark.parametrize("roots, wide", [
    ({"A": (0,), "d": (1,), "x": (1,)}, None),  # d and x may overlap
    ({"A": (0,), "d": (1,)}, None),  # x unknown: may overlap anything
    ({"A": (0,), "d": (1,), "x": (2,)}, {"A", "x"}),  # d float32: each store rounds
])
def test_accumulator_stays_in_memory_unless_proved(roots, wide):
    out = lean_loops(ACC, _facts(roots, wide))
    assert "_acc_d" not in out


def test_element_read_only_where_the_loop_runs():
    src = '''
def f(d, x, k, n):
    for j in range(k, n):
        d[k] += x[j]
'''
    out = lean_loops(src, _facts({"d": (0,), "x": (1,)}))
    assert "if k < n:" in out and "_acc_d" in out
    d, x = np.zeros(3), np.ones(3)
    _run(out, d, x, 3, 3)  # no iteration: d[3] is never read (it would raise here)
    assert not d.any()
    _run(out, d, x, 1, 3)
    assert d.tolist() == [0.0, 2.0, 0.0]


def test_index_varying_in_the_loop_is_not_promoted():
    src = '''
def f(d, x, n):
    for j in range(n):
        k = j // 2
        d[k] += x[j]
'''
    assert lean_loops(src, _facts({"d": (0,), "x": (1,)})) == src


REV = '''
def f(dA, dx, A, n, m):
    for _r in range(n):
        i = n - 1 - _r
        for j in range(m):
            dA[i, j] += dx[i] * A[i, j]
'''


def test_independent_reversed_loop_runs_forward():
    out = lean_loops(REV, _facts({"dA": (0,), "dx": (1,), "A": (2,)}))
    loops = [n for n in ast.walk(ast.parse(out)) if isinstance(n, ast.For)]
    assert ast.unparse(loops[0].target) == "i" and ast.unparse(loops[0].iter) == "range(n)"
    assert "_r" not in out
    rng = np.random.default_rng(1)
    args = [rng.random((4, 3)), rng.random(4), rng.random((4, 3)), 4, 3]
    again = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    _run(REV, *args)
    _run(out, *again)
    assert np.array_equal(args[0], again[0])


def test_reversed_span_loop_runs_forward_over_its_range():
    src = REV.replace("range(n):\n        i = n - 1 - _r", "range(_rt.span(k, n)):\n        i = n - 1 - _r")
    src = src.replace("def f(dA, dx, A, n, m)", "def f(dA, dx, A, k, n, m)")
    from zymo.codegen.loop_forms import nonneg_names

    with nonneg_names(frozenset({"k"})):  # the IR's analysis proved `k` never negative
        out = lean_loops(src, _facts({"dA": (0,), "dx": (1,), "A": (2,)}))
    assert "for i in range(k, n):" in out
    # unknown, `k` may be negative: `i = -1` would be `n - 1` again (`never_negative`)
    assert "for i in range(k, n):" not in lean_loops(src, _facts({"dA": (0,), "dx": (1,), "A": (2,)}))


@pytest.mark.parametrize("src", [
    # a sum carried from one iteration to the next: its order is the program's
    '''
def f(dA, dx, A, n, m):
    s = 0.0
    for _r in range(n):
        i = n - 1 - _r
        s = s + dx[i]
        dA[i, 0] = s
    return s
''',
    # a neighbour's element: iteration i reads what iteration i + 1 wrote
    '''
def f(dA, dx, A, n, m):
    for _r in range(n - 1):
        i = n - 1 - 1 - _r
        dx[i] += dx[i + 1] * A[i, 0]
''',
    # the index read after the loop
    REV + "    return i\n",
])
def test_dependent_reversed_loops_stay_reversed(src):
    out = lean_loops(src, _facts({"dA": (0,), "dx": (1,), "A": (2,)}))
    assert "_r" in out


def test_reversed_loop_writing_memory_another_name_reads_stays_reversed():
    out = lean_loops(REV, _facts({"dA": (0,), "dx": (0,), "A": (2,)}))
    assert "i = n - 1 - _r" in out


# -- end to end ---------------------------------------------------------------------------

def atax(A, x, y, tmp):
    m, n = A.shape
    for i in range(n):
        y[i] = 0.0
    for i in range(m):
        tmp[i] = 0.0
        for j in range(n):
            tmp[i] = tmp[i] + A[i, j] * x[j]
        for j in range(n):
            y[j] = y[j] + A[i, j] * tmp[i]
    return np.sum(y * y)


def tri(L, b):
    n = b.shape[0]
    s = 0.0
    for i in range(n):
        acc = 0.0
        for j in range(i + 1, n):
            acc += L[i, j] * b[j]
        s += np.sin(acc) * b[i]
    return s


def mixes(d, x):
    """`d` and `x` may be one array: an element accumulated in `d` is read through `x`."""
    n = x.shape[0]
    for i in range(n):
        for j in range(n):
            d[i] += x[j] * x[j]
    return np.sum(d * d)


def _grads(f, args, wrt, numba):
    shadows = [np.zeros_like(a) if k in wrt else None for k, a in enumerate(args)]
    ann = [Duplicated(a, s) if s is not None else Const(a) for a, s in zip(args, shadows)]
    zymo.autodiff(Reverse, f, Active, *ann, numba=numba)
    return [s for s in shadows if s is not None]


@pytest.mark.parametrize("numba", [True, "kernels"])
@pytest.mark.parametrize("name", ["atax", "tri"])
def test_compiled_gradients_equal_python_to_the_bit(name, numba):
    rng = np.random.default_rng(2)
    f, args, wrt = {"atax": (atax, [rng.random((7, 5)), rng.random(5), np.zeros(5), np.zeros(7)], {0, 1}),
                    "tri": (tri, [rng.random((6, 6)), rng.random(6)], {0, 1})}[name]
    want = _grads(f, [a.copy() for a in args], wrt, False)
    got = _grads(f, [a.copy() for a in args], wrt, numba)
    from zymo.codegen.numba import vecmath
    # to the bit, but for tri's `np.sin` through glibc's vector math (4 ulps: decision 0019)
    rtol = 4e-15 if name == "tri" and vecmath.available() else 0
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=0)
    check_grad(f, *[a.copy() for a in args], modes=("reverse",), wrt=sorted(wrt))
    src = zymo.generated_code(Reverse, f, Active, *[Duplicated(a.copy(), np.zeros_like(a)) if k in wrt
                                                     else Const(a) for k, a in enumerate(args)], numba=numba)
    if name == "atax":
        assert "_acc_" in src  # the accumulations were promoted
        assert "for i_2 in range(n)" in src  # an adjoint loop runs forward
    else:  # the inner adjoint loop runs forward, its carried adjoint's copy back dropped
        assert src.count("for i_1 in range(t_2, n)") >= 2 and "dacc_next = dt_2" not in src


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_shared_memory_keeps_the_loops(numba):
    rng = np.random.default_rng(3)
    x = rng.random(4)
    want = _grads(mixes, [x.copy(), x.copy()], {0, 1}, False)
    same = x.copy()
    dsame = np.zeros(4)
    zymo.autodiff(Reverse, mixes, Active, Duplicated(same, dsame), Duplicated(same, dsame), numba=numba)
    py = x.copy()
    dpy = np.zeros(4)
    zymo.autodiff(Reverse, mixes, Active, Duplicated(py, dpy), Duplicated(py, dpy), numba=False)
    assert np.array_equal(same, py) and np.array_equal(dsame, dpy)
    assert not np.array_equal(dpy, want[0] + want[1])  # sharing changes the result: the case is live


# -- loop interchange (`codegen/interchange.py`) ------------------------------------------

COLS = '''
def f(A, x2, y2, n, m):
    for i in range(n):
        for j in range(m):
            t = A[j, i] * y2[j]
            x2[i] = x2[i] + t
'''


def _cols_facts(**over):
    roots = {"A": (0,), "x2": (1,), "y2": (2,)}
    roots.update(over)
    return MemoryFacts(roots, frozenset(roots), {"A": 2, "x2": 1, "y2": 1, "s": 1})


def test_column_walk_swapped_and_exact():
    out = lean_loops(COLS, _cols_facts())
    loops = [n for n in ast.walk(ast.parse(out)) if isinstance(n, ast.For)]
    assert [ast.unparse(lp.target) for lp in loops] == ["j", "i"]
    rng = np.random.default_rng(4)
    a = [rng.random((6, 5)), rng.random(5), rng.random(6), 5, 6]
    b = [x.copy() if isinstance(x, np.ndarray) else x for x in a]
    _run(COLS, *a)
    _run(out, *b)
    assert np.array_equal(a[1], b[1])


@pytest.mark.parametrize("src, facts", [
    (COLS, {"x2": (0,)}),  # x2 may overlap A
    (COLS.replace("x2[i] = x2[i] + t", "x2[0] = x2[0] + t"), {}),  # one element for every iteration: order
    (COLS.replace("A[j, i]", "A[i, j]"), {}),  # rows already
    (COLS.replace("range(m)", "range(i)"), {}),  # a triangle
    (COLS.replace("t = A[j, i] * y2[j]", "t = A[j, i] * y2[j] + t"), {}),  # t carried
])
def test_interchange_only_where_exact_and_useful(src, facts):
    out = lean_loops(src, _cols_facts(**facts))
    loops = [n for n in ast.walk(ast.parse(out)) if isinstance(n, ast.For)]
    assert ast.unparse(loops[0].target) == "i"


def mvt_cols(A, x2, y2):
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            x2[i] = x2[i] + A[j, i] * y2[j]
    return np.sum(x2 * x2)


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_swapped_nests_gradients_equal_python_to_the_bit(numba):
    rng = np.random.default_rng(5)
    args = [rng.random((6, 6)), rng.random(6), rng.random(6)]
    want = _grads(mvt_cols, [a.copy() for a in args], {0, 1, 2}, False)
    got = _grads(mvt_cols, [a.copy() for a in args], {0, 1, 2}, numba)
    for w, g in zip(want, got):
        assert np.array_equal(w, g)
    check_grad(mvt_cols, *[a.copy() for a in args], modes=("reverse",))
    src = zymo.generated_code(Reverse, mvt_cols, Active, *[Duplicated(a.copy(), np.zeros_like(a)) for a in args],
                              numba=numba)
    assert "_at_y2" in src  # y2[j] read once per row: the nest was swapped


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_forward_mode_tangents_equal_python_to_the_bit(numba):
    from zymo import Forward

    rng = np.random.default_rng(6)
    args = [rng.random((7, 5)), rng.random(5), np.zeros(5), np.zeros(7)]
    tangents = [rng.random(a.shape) for a in args]

    def tangent(backend):
        ann = [Duplicated(a.copy(), t.copy()) for a, t in zip(args, tangents)]
        return zymo.autodiff(Forward, atax, Duplicated, *ann, numba=backend)

    want, got = tangent(False), tangent(numba)
    assert want == got and want[0] != 0.0
    src = zymo.generated_code(Forward, atax, Duplicated, *[Duplicated(a.copy(), t.copy())
                                                          for a, t in zip(args, tangents)], numba=numba)
    assert "_acc_" in src


# -- elements no other subscript of the loop reaches ----------------------------------------

TRI = '''
def f(d, x, n):
    for i in range(n):
        t = i + 1
        for j in range(t, n):
            d[j] += x[j] * d[i]
'''


def test_element_outside_the_loop_range_is_hoisted():
    from zymo.codegen.loop_forms import nonneg_names

    facts = MemoryFacts({"d": (0,), "x": (1,)}, frozenset({"d", "x"}), {"d": 1, "x": 1})
    with nonneg_names(frozenset({"i"})):  # as the IR's analysis proves of a loop from 0
        out = lean_loops(TRI, facts)
    assert "_at_d = d[i]" in out and "x[j] * _at_d" in out  # j >= t = i + 1: d[i] is not written
    assert "_at_d" not in lean_loops(TRI, facts)  # `i` unknown: `d[-1]` would be `d[n - 1]`
    a, b = np.arange(1.0, 6.0), np.arange(1.0, 6.0)
    _run(TRI, a, np.ones(5), 5)
    _run(out, b, np.ones(5), 5)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("change", [
    ("t = i + 1", "t = i"),  # j may be i: d[i] changes in the loop
    ("        for j", "        t = t - 1\n        for j"),  # t reassigned in between
    ("range(t, n)", "range(i - 1, n)"),  # j may be i
])
def test_element_the_loop_may_reach_stays_in_memory(change):
    facts = MemoryFacts({"d": (0,), "x": (1,)}, frozenset({"d", "x"}), {"d": 1, "x": 1})
    out = lean_loops(TRI.replace(*change), facts)
    assert "_at_d" not in out and "_acc_d" not in out


def test_element_at_the_stop_is_hoisted():
    src = '''
def f(d, x, n):
    for i in range(n):
        for j in range(i):
            d[j] += x[j] * d[i]
'''
    facts = MemoryFacts({"d": (0,), "x": (1,)}, frozenset({"d", "x"}), {"d": 1, "x": 1})
    out = lean_loops(src, facts)
    assert "_at_d = d[i]" in out
    a, b = np.arange(1.0, 6.0), np.arange(1.0, 6.0)
    _run(src, a, np.ones(5), 5)
    _run(out, b, np.ones(5), 5)
    assert np.array_equal(a, b)


def test_top_level_comments_are_kept():
    src = ACC.replace("    for i in range(n):", "    # adjoint sweep\n    for i in range(n):")
    out = lean_loops(src, _facts({"A": (0,), "d": (1,), "x": (2,)}))
    assert "_acc_d" in out and "\n    # adjoint sweep\n    for i in range(" in out


@pytest.mark.parametrize("assign", ["m = j + 1", "m = 2"])
def test_review_defect_outer_bounds_the_body_assigns_keep_the_nest(assign):
    """Swapped, the outer loop's `range(m)` would be evaluated again after the body changed `m`
    (review: before the fix `x` came out [30, 28, 19, 3, 4] where the serial nest gives 30..46)."""
    src = f'''
def f(A, x, n, m):
    for i in range(m):
        for j in range(n):
            {assign}
            x[i] = x[i] + A[j, i] * 2.0
'''
    facts = MemoryFacts({"A": (0,), "x": (1,)}, frozenset({"A", "x"}), {"A": 2, "x": 1})
    out = lean_loops(src, facts)
    A = np.arange(20.0).reshape(4, 5)
    want, got = np.zeros(5), np.zeros(5)
    _run(src, A, want, 4, 5)
    _run(out, A, got, 4, 5)
    assert np.array_equal(want, got)


def test_review_defect_an_unlisted_array_used_whole_keeps_the_nest():
    """`v` (unknown memory, here `A` itself) summed whole in the body: swapped, each sum would
    see other elements of `A` already doubled."""
    src = '''
def f(A, v, n, m):
    for i in range(m):
        for j in range(n):
            A[j, i] = A[j, i] * 2.0 + np.sum(v)
'''
    facts = MemoryFacts({"A": (0,)}, frozenset({"A"}), {"A": 2, "v": 2})
    out = lean_loops(src, facts)
    want, got = np.arange(12.0).reshape(3, 4), np.arange(12.0).reshape(3, 4)
    _run(src, want, want, 3, 4)
    _run(out, got, got, 3, 4)
    assert np.array_equal(want, got)


def dead_inner_loop(x):
    """The inner loop changes only `k`, which the adjoint sweep reads from its cache: the
    adjoint of that loop is its reversed head alone (`for _r in range(3): i_1 = 3 - 1 - _r`)."""
    n = x.shape[0]
    s = 0.0
    for i in range(1, n):
        k = i - 1
        for _t in range(3):
            k = k - 1
        s += x[k] * x[i]
    return s


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_review_defect_a_reversed_loop_of_its_head_alone_runs_forward(numba):
    """Run forward, a reversed loop whose body is its head alone kept an empty body, which is
    no Python (review: `IndentationError: expected an indented block after 'for'` from
    `numba=True` and "kernels"); it gets `pass`."""
    out = lean_loops("def f(n):\n    for _r in range(n):\n        i = n - 1 - _r\n", _facts({}))
    ast.parse(out)
    x = np.linspace(0.5, 1.5, 7)
    dx, dx_py = np.zeros_like(x), np.zeros_like(x)
    zymo.autodiff(Reverse, dead_inner_loop, Active, Duplicated(x.copy(), dx), numba=numba)
    zymo.autodiff(Reverse, dead_inner_loop, Active, Duplicated(x.copy(), dx_py), numba=False)
    assert np.array_equal(dx, dx_py) and np.abs(dx).max() > 0.1
    check_grad(dead_inner_loop, x, modes=("reverse",))


# -- indices that may wrap round (`loop_forms.never_negative`) ------------------------------------

def _wraps(x, y):
    """`y[-1]` is `y[n - 1]`: iterations -1 and n - 1 update one element, in that order."""
    n = x.shape[0]
    for i in range(-1, n):
        y[i] = y[i] * y[i] * 0.5 + x[i] * x[i]
    return np.sum(y * y)


@pytest.mark.parametrize("numba", [True, "kernels"])
def test_a_loop_from_a_negative_start_keeps_its_order(numba):
    """The adjoint loop ran forward (its iterations looked independent) and the twin in
    parallel: both wrong where two iterations reach one element through `a[-1]`."""
    rng = np.random.default_rng(12)
    x0, y0 = rng.random(40), rng.random(40)

    def grad(backend, threads=None):
        zymo.config.set_threads(threads)
        try:
            dx, dy = np.zeros_like(x0), np.zeros_like(y0)
            zymo.autodiff(Reverse, _wraps, Active, Duplicated(x0.copy(), dx), Duplicated(y0.copy(), dy),
                          numba=backend)
        finally:
            zymo.config.set_threads(None)
        return dx, dy

    want = grad(False)
    for threads in (None, 2):
        got = grad(numba, threads)
        assert all(np.array_equal(w, g) for w, g in zip(want, got))
    check_grad(_wraps, x0[:6].copy(), y0[:6].copy())


@pytest.mark.parametrize("src, index, sure", [
    ("for i in range(n): pass", "i", True),
    ("for i in range(2, n): pass", "i - 2", True),
    ("for i in range(2, n): pass", "i - 3", False),
    ("for i in range(-1, n): pass", "i", False),
    ("for i in range(k, n): pass", "i", False),         # `k` unknown
    ("for _r in range(n):\n    i = n - 1 - _r", "i", True),
    ("for _r in range(_rt.span(1, n)):\n    i = n - 1 - _r", "i - 1", True),
    ("for _r in range(_rt.span(m, n)):\n    i = n - 1 - _r", "i", False),
    ("for i in range(1, n):\n    t = i - 1\n    x[t] = 0.0", "t", True),
    ("for i in range(n):\n    t = i - 1\n    x[t] = 0.0", "t", False),
])
def test_which_indices_never_wrap(src, index, sure):
    from zymo.codegen.loop_forms import never_negative

    loop = ast.parse(src).body[0]
    assert never_negative(loop, ast.parse(index, mode="eval").body) is sure


def _row_from(X, v, c):
    """`X[c]` beside `X[k]` for `k` in `range(c + 1, n)`: at `c = -1`, `X[-1]` is `X[n - 1]`,
    which the loop reaches too, so `X[c]` is no accumulator of its own."""
    n = X.shape[0]
    for k in range(c + 1, n):
        X[c] = X[c] * 0.5 + v[k] * X[k]
    return np.sum(X * X)


@pytest.mark.parametrize("c", [-1, 2])
@pytest.mark.parametrize("numba", [True, "kernels"])
def test_an_element_one_before_the_range_may_wrap_round(numba, c):
    rng = np.random.default_rng(13)
    X0, v0 = rng.random(8), rng.random(8)

    def grad(backend):
        dX, dv = np.zeros_like(X0), np.zeros_like(v0)
        zymo.autodiff(Reverse, _row_from, Active, Duplicated(X0.copy(), dX), Duplicated(v0.copy(), dv), Const(c),
                      numba=backend)
        return dX, dv

    want, got = grad(False), grad(numba)
    assert all(np.array_equal(w, g) for w, g in zip(want, got)) and np.any(want[0])
    check_grad(_row_from, X0.copy(), v0.copy(), c, const=(2,))
