"""The "kernels" backend (`codegen/outline.py`): scalar loops outlined into Numba kernels,
the rest of the derivative run as Python.

The outliner is tested on generated-style source (what it outlines, with which parameters and
results, and what it must leave alone); the backend end to end against central differences,
the other mode and the Python backend, with a look at which loops were compiled."""
from __future__ import annotations

import ast

import numpy as np
import pytest

import zymo
from zymo import Active, Duplicated, Reverse, ReverseSplitWithPrimal
from zymo.codegen.outline import Kernel, outline
from zymo.testing import check_grad

pytest.importorskip("numba")


def _outlined(src: str, ndims: dict[str, int], numbers: set[str], caches: frozenset[str] = frozenset()):
    out = outline(src, ndims, frozenset(numbers), caches)
    kernels = {f.name: f for f in ast.parse(out.kernels).body} if out.kernels else {}
    return out, kernels


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.args]


SRC = '''
def g(x, dx, n):
    s = 0.0
    for i in range(n):
        t = x[i] * 2.0
        s = s + t
    y = np.sin(x)
    for j in range(n):
        y[1:] = y[:-1]
    dx += y
    return s
'''


def test_outlines_the_scalar_loop_only():
    out, kernels = _outlined(SRC, {"x": 1, "dx": 1, "y": 1}, {"s", "t", "i", "j", "n"})
    assert list(kernels) == ["_kernel_0"]
    k = kernels["_kernel_0"]
    # inputs: what the loop may read before writing; results: what the rest of g reads
    assert _params(k) == ["n", "s", "x"]
    assert ast.unparse(k.body[-1]) == "return (s,)"
    assert "(s,) = _kernel_0(n, s, x)" in out.src.replace("s, =", "(s,) =")
    assert "y[1:] = y[:-1]" in out.src  # slices only: NumPy runs it, it stays Python


def test_leaves_loops_with_possibly_unbound_names():
    src = '''
def g(x, n, c):
    if c:
        t = 1.0
    for i in range(n):
        x[i] = t
    for i in range(n):
        u = x[i]
    return u
'''
    out, kernels = _outlined(src, {"x": 1}, {"t", "i", "n", "u", "c"})
    assert kernels == {}  # `t` may be unbound at the first loop; `u` only if the second one runs
    assert out.src == src


def test_leaves_loops_that_return_or_raise():
    src = '''
def g(x, n):
    for i in range(n):
        if x[i] > 0:
            return x[i]
    for i in range(n):
        if x[i] < 0:
            raise ValueError('negative')
    return 0.0
'''
    out, kernels = _outlined(src, {"x": 1}, {"i", "n"})
    assert kernels == {}


def test_outlines_inside_branches_and_cache_traffic():
    src = '''
def g(x, n, _cache, c):
    _k = 0
    x_1 = x[0]
    if c:
        for i in range(n):
            _cache[_k] = x_1
            _k += 1
    return _k
'''
    out, kernels = _outlined(src, {"x": 1, "_cache": 1}, {"i", "n", "_k", "x_1", "c"}, frozenset({"_cache"}))
    assert list(kernels) == ["_kernel_0"]
    assert _params(kernels["_kernel_0"]) == ["_cache", "_k", "n", "x_1"]


def test_a_row_stored_into_a_cache_is_not_scalar_work():
    src = '''
def g(x, n, _cache):
    _k = 0
    for i in range(n):
        _cache[_k] = x
        x[1:] = x[:-1]
        _k += 1
    return _k
'''
    _, kernels = _outlined(src, {"x": 1, "_cache": 2}, {"i", "n", "_k"}, frozenset({"_cache"}))
    assert kernels == {}


# -- end to end ---------------------------------------------------------------------------------

@pytest.fixture
def kernels_backend():
    zymo.config.set_numba("kernels")
    yield
    zymo.config.set_numba(None)


def trisolv(L, x, b):
    n = L.shape[0]
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]
    return np.sum(x * x) + np.sum(np.sin(L) * L)


def smooth_until(u, steps, tol):
    k = 0
    while k < steps:
        change = 0.0
        for i in range(1, u.shape[0] - 1):
            new = 0.5 * u[i] + 0.25 * (u[i - 1] + u[i + 1])
            change = max(change, abs(new - u[i]))
            u[i] = new
        if change < tol:
            break
        k += 1
    return np.sum(u ** 3)


def with_list(x):
    parts = []
    for i in range(x.shape[0]):
        parts.append(x[i] * x[i])
    total = 0.0
    for p in parts:
        total += p
    return total


def _compiled(f, *args):
    """The kernels of the program `autodiff(Reverse, f, Active, *args)` ran: name -> Numba or Python."""
    comps = [c for entries in zymo.cache.COMPILED.values() for c in entries
             if c.backend == "kernels" and c.ir.name == f.__name__]
    assert comps, "no program of the kernels backend"
    fn = comps[-1].fn if not isinstance(comps[-1].fn, list) else comps[-1].fn[0]
    return {k.name: k for k in fn.__globals__.values() if isinstance(k, Kernel)}


@pytest.mark.slow
def test_trisolv_against_fd_other_mode_and_python(kernels_backend):
    rng = np.random.default_rng(0)
    L = np.tril(rng.random((5, 5))) + 3 * np.eye(5)
    args = [L, np.zeros(5), rng.random(5)]
    check_grad(trisolv, *args)
    kernels = _compiled(trisolv)
    assert kernels and all(k.fn is k.compiled for k in kernels.values()), {k: v.why for k, v in kernels.items()}
    grads = zymo.gradient(Reverse, trisolv, *[np.array(a) for a in args])
    zymo.config.set_numba("never")
    ref = zymo.gradient(Reverse, trisolv, *[np.array(a) for a in args])
    for g, r in zip(grads, ref):
        np.testing.assert_allclose(g, r, rtol=1e-13, atol=1e-15)


def test_while_with_break_and_max(kernels_backend):
    u = np.random.default_rng(1).random(9)
    check_grad(smooth_until, u, 4, 1e-9, const=(1, 2))
    kernels = _compiled(smooth_until)
    assert any(k.fn is k.compiled for k in kernels.values())


def test_a_loop_over_a_list_runs_as_python(kernels_backend):
    x = np.random.default_rng(2).random(4)
    (g,) = zymo.gradient(Reverse, with_list, x)
    np.testing.assert_allclose(g, 2 * x, rtol=1e-14)
    check_grad(with_list, x)


def test_split_mode(kernels_backend):
    rng = np.random.default_rng(3)
    L = np.tril(rng.random((4, 4))) + 3 * np.eye(4)
    b = rng.random(4)
    dL, dx, db = np.zeros_like(L), np.zeros(4), np.zeros(4)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, trisolv, Active, Duplicated(L, dL),
                                   Duplicated(np.zeros(4), dx), Duplicated(b, db))
    x = np.zeros(4)
    tape, y = fwd(Duplicated(L, dL), Duplicated(x, dx), Duplicated(b, db))
    rev(Duplicated(L, dL), Duplicated(x, dx), Duplicated(b, db), 1.0, tape)
    zymo.config.set_numba("never")
    ref = zymo.gradient(Reverse, trisolv, L.copy(), np.zeros(4), b.copy())
    np.testing.assert_allclose(dL, ref[0], rtol=1e-13)
    np.testing.assert_allclose(db, ref[2], rtol=1e-13)
    assert y == pytest.approx(trisolv(L.copy(), np.zeros(4), b.copy()))


def test_generated_code_shows_kernels_then_program():
    L = np.eye(3) * 2.0
    src = zymo.generated_code(Reverse, trisolv, Active, Duplicated(L, np.zeros_like(L)),
                              Duplicated(np.zeros(3), np.zeros(3)), Duplicated(np.ones(3), np.zeros(3)),
                              numba="kernels")
    assert src.index("def _kernel_0(") < src.index("def trisolv_rev(")
    compile(src, "<shown>", "exec")  # valid Python as shown


def test_unknown_backend_is_a_usage_error():
    with pytest.raises(zymo.ZymoUsageError, match="kernels"):
        zymo.gradient(Reverse, trisolv, np.eye(2), np.zeros(2), np.ones(2), numba="fast")


# -- parallel loops (codegen/parallel.py) -------------------------------------------------------

from zymo.codegen.parallel import overlapping, parallel_loops


def _loops(src: str, ndims: dict[str, int], caches: frozenset[str] = frozenset()) -> list[str]:
    fn = ast.parse(src).body[0]
    return [ast.unparse(loop.target) for loop in parallel_loops(fn, ndims, caches)]


def test_parallel_rows_of_a_written_array():
    src = '''
def k(A, x, n, m):
    for i in range(n):
        for j in range(m):
            A[i, j] = A[i, j] + x[j] * x[i]
    for _r in range(n):
        i_1 = n - 1 - _r
        x[i_1] = A[i_1, 0] * 2.0
    return ()
'''
    assert _loops(src, {"A": 2, "x": 1}) == ["i", "_r"]


def test_serial_when_iterations_meet():
    src = '''
def k(A, x, y, n):
    for i in range(1, n):
        x[i] = x[i - 1] + 1.0
    for i in range(n):
        y[0] = y[0] + x[i]
    s = 0.0
    for i in range(n):
        s = s + x[i]
    for i in range(n):
        t = x[i]
    for j in range(n):
        A[j, 0] = A[0, j]
    return (s, t)
'''
    # a read of another iteration's element, one element for all, a carried sum, a value read
    # after the loop, rows written and columns read
    assert _loops(src, {"A": 2, "x": 1, "y": 1}) == []


def test_no_parallel_loop_inside_a_serial_loop():
    """The inner loops of a time loop are independent, but would start and join threads once
    per time step: they stay serial; under an `if`, a loop may run in parallel."""
    src = '''
def k(A, B, n, T):
    for t in range(T):
        for i in range(1, n):
            B[i] = A[i - 1] + A[i]
        for i in range(1, n):
            A[i] = B[i]
    if n > 2:
        for j in range(1, n):
            A[j] = B[j] * 2.0
    return ()
'''
    assert _loops(src, {"A": 1, "B": 1}) == ["j"]


def test_pushes_to_a_cache_by_index_run_in_parallel():
    """A cache the loop only writes takes pushes at entries of their own (`_pos` from
    `tape_index`, over two levels); a cache the loop also reads, or an array that is not a
    cache written at a computed position, keeps it serial."""
    src = '''
def k(_cache_a, _k_a, A, B, n, m):
    for i in range(n):
        _pos_1 = _k_a + i * _rt.span(0, m)
        for j in range(m):
            _pos = _pos_1 + j
            _cache_a[_pos] = A[i, j]
            B[i, j] = np.sin(A[i, j])
    for i in range(n):
        _pos_1 = _k_a + i * _rt.span(0, m)
        for j in range(m):
            _cache_a[_pos_1 + j] = _cache_a[_pos_1] + A[i, j]
    return ()
'''
    ndims = {"_cache_a": 1, "A": 2, "B": 2}
    assert _loops(src, ndims, frozenset({"_cache_a"})) == ["i"]
    assert _loops(src, ndims) == []


def test_overlapping_arguments_keep_the_serial_kernel():
    a = np.zeros(10)
    assert overlapping((a, a[2:5], 3), [0])
    assert not overlapping((a, np.ones(3), 3), [0])


def rows(A, u, v):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            A[i, j] = np.sin(A[i, j]) * u[i] + v[j] * A[i, j]
    return np.sum(A * A)


def test_two_threads_give_the_same_bits(kernels_backend):
    rng = np.random.default_rng(5)
    args = [rng.random((40, 30)), rng.random(40), rng.random(30)]
    check_grad(rows, *[a[:6, :5] if a.ndim == 2 else a[:6] if a.shape[0] == 40 else a[:5] for a in args])
    g1 = zymo.gradient(Reverse, rows, *[a.copy() for a in args])
    # the gradient's program (reverse mode: `generator` set) runs its kernels in parallel: the
    # forward one pushes to its caches by index (`tape_index`), over both loops
    programs = [c.fn if not isinstance(c.fn, list) else c.fn[0] for entries in zymo.cache.COMPILED.values()
                for c in entries if c.backend == "kernels" and c.ir.name == "rows" and c.generator is not None]
    kernels = [k for fn in programs for k in fn.__globals__.values() if isinstance(k, Kernel)]
    # every kernel: the adjoint one adds into `dv[j]` over the rows, a sum expanded (`expand.py`)
    assert kernels and all(k.parallel is not None for k in kernels) and any(k.floats for k in kernels)
    zymo.config.set_threads(2)
    try:
        g2 = zymo.gradient(Reverse, rows, *[a.copy() for a in args])
    finally:
        zymo.config.set_threads(None)
    for a, b in zip(g1, g2):
        assert np.array_equal(a, b)


def test_threads_setting_is_checked():
    with pytest.raises(ValueError):
        zymo.config.set_threads(0)


# -- loops split for the twins (`outline._split_for_twin`, `distribute.split`) -------------------

GESUMMV_ADJOINT = '''
def k(A, B, dA, dB, dtmp, dx, dy, x, alpha, beta, n):
    for _r_1 in range(n):
        i = n - 1 - _r_1
        dt_1 = dy[i]
        dy[i] = 0.0
        dy[i] += beta * dt_1
        dtmp[i] += alpha * dt_1
        if n > 0:
            _at_dy = dy[i]
            _at_dtmp = dtmp[i]
            for i_1 in range(n):
                dx[i_1] += B[i, i_1] * _at_dy + A[i, i_1] * _at_dtmp
                dB[i, i_1] += _at_dy * x[i_1]
                dA[i, i_1] += _at_dtmp * x[i_1]
        dy[i] = 0.0
        dtmp[i] = 0.0
    return ()
'''
GESUMMV_NDIMS = {"A": 2, "B": 2, "dA": 2, "dB": 2, "dtmp": 1, "dx": 1, "dy": 1, "x": 1}


def _run_kernel(src: str, args: list):
    env: dict = {"np": np}
    exec(src, env)
    env["k"](*args)
    return args


def _gesummv_args(n=5):
    rng = np.random.default_rng(9)
    return [rng.random((n, n)), rng.random((n, n)), np.zeros((n, n)), np.zeros((n, n)), rng.random(n),
            rng.random(n), rng.random(n), rng.random(n), 1.5, 1.2, n]


def test_a_loop_serial_as_a_whole_splits_into_loops_that_run_in_parallel():
    """gesummv's adjoint adds into `dx[j]` for every row: serial as a whole, but its resets of
    `dy[i]` run in parallel once split off, and the nest by blocks of `j`."""
    from zymo.codegen.blocks import blocked_nests
    from zymo.codegen.outline import _split_for_twin

    fn = ast.parse(GESUMMV_ADJOINT).body[0]
    assert parallel_loops(fn, GESUMMV_NDIMS) == [] and blocked_nests(fn, GESUMMV_NDIMS, frozenset(), []) == []
    base = _split_for_twin(fn, GESUMMV_NDIMS, frozenset())
    loops = [t for t in base.body if isinstance(t, ast.For)]
    assert len(loops) == 3
    assert len(parallel_loops(base, GESUMMV_NDIMS)) == 2
    assert len(blocked_nests(base, GESUMMV_NDIMS, frozenset(), parallel_loops(base, GESUMMV_NDIMS))) == 1
    want = _run_kernel(GESUMMV_ADJOINT, _gesummv_args())
    got = _run_kernel(ast.unparse(base), _gesummv_args())
    for w, g in zip(want[:8], got[:8]):
        assert np.array_equal(w, g)
    assert np.any(want[5])


@pytest.mark.parametrize("change", [
    # `dx[i]`, which the nest of every row adds into
    ("        dy[i] = 0.0\n        dtmp[i] = 0.0\n", "        dy[i] = dx[i]\n        dtmp[i] = 0.0\n"),
    ("        dt_1 = dy[i]\n", "        dt_1 = dy[i] + dx[0]\n"),  # an element another iteration writes
    ("            _at_dy = dy[i]\n", "            _at_dy = dt_1\n"),  # a scalar passed between parts
])
def test_loops_whose_parts_meet_are_not_split_for_the_twins(change):
    from zymo.codegen.outline import _split_for_twin

    src = GESUMMV_ADJOINT.replace(*change)
    assert change[0] in GESUMMV_ADJOINT
    fn = ast.parse(src).body[0]
    assert _split_for_twin(fn, GESUMMV_NDIMS, frozenset()) is fn


def gesummv(alpha, beta, A, B, tmp, x, y):
    n = A.shape[0]
    for i in range(n):
        tmp[i] = 0.0
        y[i] = 0.0
        for j in range(n):
            tmp[i] = A[i, j] * x[j] + tmp[i]
            y[i] = B[i, j] * x[j] + y[i]
        y[i] = alpha * tmp[i] + beta * y[i]
    return np.sum(y * y)


def test_gesummv_adjoint_twin_gives_the_same_bits(kernels_backend):
    rng = np.random.default_rng(6)
    n = 50
    args = [rng.random((n, n)), rng.random((n, n)), np.zeros(n), rng.random(n), np.zeros(n)]
    check_grad(gesummv, 1.5, 1.2, *[a[:5, :5] if a.ndim == 2 else a[:5] for a in args], const=(0, 1))

    def grad():
        shadows = [np.zeros_like(a) for a in args]
        zymo.autodiff(Reverse, gesummv, Active, zymo.Const(1.5), zymo.Const(1.2),
                      *[Duplicated(a.copy(), s) for a, s in zip(args, shadows)], numba="kernels")
        return shadows

    g1 = grad()
    programs = [c.fn for entries in zymo.cache.COMPILED.values() for c in entries
                if c.backend == "kernels" and c.ir.name == "gesummv" and c.generator is not None]
    kernels = [k for fn in programs for k in fn.__globals__.values() if isinstance(k, Kernel)]
    assert len(kernels) >= 2 and all(k.parallel is not None for k in kernels)  # the adjoint's too
    zymo.config.set_threads(2)
    try:
        g2 = grad()
    finally:
        zymo.config.set_threads(None)
    for a, b in zip(g1, g2):
        assert np.array_equal(a, b)
    assert np.any(g1[0]) and np.any(g1[3])


# review: a parameter the kernel binds again points where the new value does (here `b`), so it
# is not memory of its own; the loop, which reads `b[i + 1]` after writing `a[i]` through `a = b`,
# stays whole
REBOUND = '''
def k(a, b, c, n):
    t = a[0]
    for i in range(n):
        a = b
        a[i] = 2.0 * a[i] + t
        for j in range(n):
            c[j] += b[(i + 1) % n] + b[j]
    return ()
'''


def test_review_defect_a_parameter_bound_again_is_not_memory_of_its_own():
    from zymo.codegen.outline import _split_for_twin

    ndims = {"a": 1, "b": 1, "c": 1}
    fn = ast.parse(REBOUND).body[0]
    base = _split_for_twin(fn, ndims, frozenset())
    assert base is fn, ast.unparse(base)
    split = _split_for_twin(ast.parse(REBOUND.replace("        a = b\n", "")).body[0], ndims, frozenset())
    assert sum(isinstance(t, ast.For) for t in split.body) == 2  # without the rebinding: split
    rng = np.random.default_rng(3)
    args = [rng.random(5), rng.random(5), rng.random(5), 5]
    want = _run_kernel(REBOUND, [x.copy() if isinstance(x, np.ndarray) else x for x in args])
    got = _run_kernel(ast.unparse(base), [x.copy() if isinstance(x, np.ndarray) else x for x in args])
    assert all(np.array_equal(w, g) for w, g in zip(want[:3], got[:3]))
