"""Runs of elementwise statements fused into one loop nest under Numba (`ew_groups.fuse_runs`,
`ew_fused.ew_run`): which runs the recognizer fuses and where it splits them; the intrinsic
against NumPy's statements one by one (overlapping accumulation targets, an argument aliasing
another, a view read through another name, shapes that differ, broadcasting, a returned
temporary), and that the fused loop runs where it may; gradients of small stencils through
`numba=True` against the Python backend and central differences.
"""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

import zymo
from zymo import Active, Const, Duplicated, Reverse
from zymo.codegen.numba import twins as numba_rt
from zymo.codegen.numba.ew_groups import fuse_runs
from zymo.testing import check_grad


@pytest.fixture(scope="module", autouse=True)
def private_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZYMO_CACHE_DIR", str(tmp_path_factory.mktemp("zymo_cache")))
        yield


# -- the recognizer ---------------------------------------------------------------------------

JACOBI = """def f(dA, dB, n):
    for _r in range(n):
        dB_1 = dB[:(-2), 1:(-1)]
        dB_2 = dB[2:, 1:(-1)]
        dA_1 = dA[:(-2), 1:(-1)]
        dt_2 = _rt.ew_new('0.2 * x0', (dA[1:-1, 1:-1],))
        _rt.ew_set(dA[1:-1, 1:-1], '0.0', ())
        dB_1 = _rt.acc_ew(dB_1, 'x0', (dt_2,))
        dB_2 = _rt.acc_ew(dB_2, 'x0', (dt_2,))
        dt_7 = _rt.ew_new('0.2 * x0', (dB[1:-1, 1:-1],))
        _rt.ew_set(dB[1:-1, 1:-1], '0.0', ())
        dA_1 = _rt.acc_ew(dA_1, 'x0', (dt_7,))
"""
ARRAYS = frozenset({"dA", "dB", "dB_1", "dB_2", "dA_1", "dt_2", "dt_7", "a", "b", "c", "t", "v"})


def _runs(src):
    return [line.strip() for line in fuse_runs(src, ARRAYS).split("\n") if "ew_run" in line]


def test_recognizer_fuses_each_adjoint_into_one_run():
    out = fuse_runs(JACOBI, ARRAYS)
    assert _runs(JACOBI) == [
        "_rt.ew_run('t0 = 0.2 * x0; x0[...] = 0.0; x1 += t0; x2 += t0 -> ', (dA[1:-1, 1:-1], dB_1, dB_2))",
        "_rt.ew_run('t0 = 0.2 * x0; x0[...] = 0.0; x1 += t0 -> ', (dB[1:-1, 1:-1], dA_1))"]
    assert "dt_2" not in out and "acc_ew" not in out  # the temporaries are numbers in the loop


def _body(*lines):
    return "def f(a, b, c):\n" + "".join(f"    {line}\n" for line in lines)


def test_recognizer_returns_a_temporary_read_after_the_run():
    src = _body("t = _rt.ew_new('x0 * x1', (a, b))", "c = _rt.acc_ew(c, 'x0', (t,))", "return t")
    assert _runs(src) == ["(t,) = _rt.ew_run('t0 = x0 * x1; x2 += t0 -> t0', (a, b, c))"]
    in_loop = "def f(a, c, n):\n    for i in range(n):\n        s = np.sum(t)\n" \
              "        t = _rt.ew_new('x0 * 2.0', (a,))\n        c = _rt.acc_ew(c, 'x0', (t,))\n"
    assert _runs(in_loop) == ["(t,) = _rt.ew_run('t0 = x0 * 2.0; x1 += t0 -> t0', (a, c))"]


def test_recognizer_splits():
    # a read of accumulated memory inside the run (through another view of the same root)
    assert _runs(_body("v = a[1:]", "b = _rt.acc_ew(b, 'x0', (v,))", "a = _rt.acc_ew(a, 'x0', (c,))")) == []
    # `=` into a view read by a later statement through a different view
    assert _runs(_body("_rt.ew_set(a[1:], 'x0', (b,))", "c = _rt.acc_ew(c, 'x0', (a[:-1],))")) == []
    # a temporary after the in-place statements: another adjoint (maybe of another shape)
    assert [r.count(";") for r in _runs(_body(
        "t = _rt.ew_new('x0 * 2.0', (a,))", "b = _rt.acc_ew(b, 'x0', (t,))", "v = _rt.ew_new('x0', (c,))",
        "c = _rt.acc_ew(c, 'x0', (v,))"))] == [1, 1]
    # accumulations through overlapping views of one root, and a read of the same view: one run
    assert [r.count(";") for r in _runs(_body(
        "b = _rt.acc_ew(b, 'x0', (c,))", "_rt.ew_set(a[1:], 'x0 * 2.0', (a[1:],))"))] == [1]


def test_recognizer_refuses():
    # an element read (no slice: a number read before the run), a name not known to be an array,
    # an operand that is a view of the run's temporary
    assert _runs(_body("t = _rt.ew_new('x0 * 2.0', (a,))", "b = _rt.acc_ew(b, 'x0', (a[0, 1],))")) == []
    assert _runs(_body("t = _rt.ew_new('x0 * 2.0', (a,))", "s = _rt.acc_ew(s, 'x0', (t,))")) == []
    assert _runs(_body("t = _rt.ew_new('x0 * 2.0', (a,))", "b = _rt.acc_ew(b, 'x0', (t[1:],))")) == []


# -- the intrinsic against NumPy ------------------------------------------------------------------

SPEC = "t0 = 0.2 * x0; x0[...] = 0.0; x1 += t0; x2 += -t0"


@numba.njit
def _stencil(dA, dB):
    numba_rt.ew_run("t0 = 0.2 * x0; x0[...] = 0.0; x1 += t0; x2 += -t0 -> ", (dA[1:-1], dB[:-2], dB[2:]))


@numba.njit
def _stencil_views(dA, dB, v, w):
    numba_rt.ew_run("t0 = 0.2 * x0; x0[...] = 0.0; x1 += t0; x2 += -t0 -> ", (v, dB[:-2], w))


def _stencil_numpy(dA, dB, v=None, w=None):
    v = dA[1:-1] if v is None else v
    t = 0.2 * v
    v[...] = 0.0
    dB[:-2] += t
    (dB[2:] if w is None else w)[...] += -t


def _both(f, g, *arrays):
    a, b = [x.copy() for x in arrays], [x.copy() for x in arrays]
    f(*a)
    g(*b)
    return a, b


def test_run_matches_numpy_with_overlapping_accumulations_and_aliases():
    rng = np.random.default_rng(0)
    dA, dB = rng.standard_normal((7, 5)), rng.standard_normal((7, 5))
    a, b = _both(_stencil, _stencil_numpy, dA, dB)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(a[0], b[0])
    # the same array passed twice: `dA[1:-1]` overlaps the accumulation targets (run one by one)
    x, y = dA.copy(), dA.copy()
    _stencil(x, x)
    _stencil_numpy(y, y)
    np.testing.assert_array_equal(x, y)
    # a view read and written through another name (`w` is `dA[1:-1]`, accumulated after `v` is zeroed)
    x, y = dA.copy(), dA.copy()
    _stencil_views(x, dB.copy(), x[1:-1], x[1:-1])
    _stencil_numpy(y, dB.copy(), y[1:-1], y[1:-1])
    np.testing.assert_array_equal(x, y)
    x, y = dA.copy(), dA.copy()  # ... and through a view shifted by one row (run one by one)
    _stencil_views(x, dB.copy(), x[1:-1], x[:-2])
    _stencil_numpy(y, dB.copy(), y[1:-1], y[:-2])
    np.testing.assert_array_equal(x, y)


def test_fused_loop_runs_where_it_may():
    # dB[m] gets t[m] (x1 = dB[:-1]) and then -t[m - 1] (x2 = dB[1:]) one by one; the fused loop
    # adds them the other way round: with 1 + 2**53 - 2**53, only that order keeps the 1
    big = 2.0 ** 53

    @numba.njit
    def run(x, dB):
        numba_rt.ew_run("t0 = x0 * 1.0; x1 += t0; x2 += -t0 -> ", (x, dB[:-1], dB[1:]))
    x = np.array([big, big, 0.0])
    dB = np.ones(4)
    run(x, dB)
    assert dB[1] == 1.0  # fused: (1 - 2**53) + 2**53; one by one: (1 + 2**53) - 2**53 == 0
    x = np.array([big, big, 1.0, 0.0, 0.0])
    y = x.copy()
    t = y[:3] * 1.0
    y[1:4] += t
    y[2:5] += -t
    run(x[:3], x[1:])  # `x` overlaps the accumulation targets: one by one
    np.testing.assert_array_equal(x, y)

    @numba.njit
    def mixed(a, b, c):
        numba_rt.ew_run("t0 = x0 * 2.0; x1 += t0; x2 += t0 -> ", (a, b, c))
    rng = np.random.default_rng(1)
    a, b, c = rng.standard_normal((1, 4)), rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    want_b, want_c = b + 2.0 * a, c + 2.0 * a
    mixed(a, b, c)  # targets of two shapes, the row broadcast into each
    np.testing.assert_array_equal(b, want_b)
    np.testing.assert_array_equal(c, want_c)
    with pytest.raises(ValueError):
        mixed(a, b, rng.standard_normal((3, 5)))


@numba.njit
def _kept(a, b, c):
    return numba_rt.ew_run("t0 = x0 * x1; x2 += t0; x2[...] = x2 * 2.0 -> t0", (a, b, c))


def test_run_returns_a_temporary_and_broadcasts_a_row():
    rng = np.random.default_rng(2)
    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((3, 4))
    want_c = (c + a * b) * 2.0
    (t,) = _kept(a, b, c)
    np.testing.assert_array_equal(t, a * b)
    np.testing.assert_array_equal(c, want_c)
    (t,) = _kept(a[:1], b, c)  # its broadcast shape is not the run's: one by one
    np.testing.assert_array_equal(t, a[:1] * b)


def test_run_not_fast_at_typing_is_compiled_as_written():
    # an int target, a float32 operand with a float64 target: each statement as its intrinsic runs it
    @numba.njit
    def run(a, b, c):
        return numba_rt.ew_run("t0 = x0 * 2.0; x1 += t0; x2[...] = x2 + 1.0 -> t0", (a, b, c))
    a, b, c = np.arange(4.0, dtype=np.float32), np.ones(4), np.arange(4)
    (t,) = run(a, b, c)
    np.testing.assert_array_equal(t, a * 2.0)
    np.testing.assert_array_equal(b, 1.0 + a * 2.0)
    np.testing.assert_array_equal(c, np.arange(4) + 1)


# -- gradients ----------------------------------------------------------------------------------


def jacobi(A, B, steps):
    for _ in range(steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
    return np.sum(A * A)


def fdtd(ex, ey, hz, steps):
    for _ in range(steps):
        ey[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return np.sum(hz * hz) + np.sum(ex * ey)


def smear(x, y):
    """Overlapping accumulation targets: `y`'s adjoint gets `t` through three shifted views."""
    y[1:-1] = y[1:-1] + np.sin(x[1:-1]) * x[:-2] + x[2:]
    return np.sum(y * y)


def _grads(f, args, wrt, numba_):
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    shadows = {i: np.zeros_like(args[i]) for i in wrt}
    ann = [Duplicated(a, shadows[i]) if i in shadows else Const(a) for i, a in enumerate(args)]
    zymo.autodiff(Reverse, f, Active, *ann, numba=numba_)
    return shadows


@pytest.mark.parametrize("f, make, wrt", [
    (jacobi, lambda r: (r.standard_normal((6, 7)), r.standard_normal((6, 7)), 3), (0, 1)),
    (fdtd, lambda r: (r.standard_normal((5, 6)), r.standard_normal((5, 6)), r.standard_normal((5, 6)), 3), (0, 1, 2)),
    (smear, lambda r: (r.standard_normal(9), r.standard_normal(9)), (0, 1)),
])
def test_gradients_of_stencils(f, make, wrt):
    args = make(np.random.default_rng(3))
    fused, python = _grads(f, args, wrt, True), _grads(f, args, wrt, False)
    for i in wrt:
        np.testing.assert_allclose(fused[i], python[i], rtol=1e-12, atol=1e-12)
        assert np.abs(fused[i]).max() > 0
    check_grad(f, *args, modes="reverse", const=(len(args) - 1,))


def test_gradient_with_an_argument_passed_twice():
    r = np.random.default_rng(4)
    A = r.standard_normal((6, 7))

    def twice(A, B, steps):
        return jacobi(A, B, steps)
    for numba_ in (True, False):
        a = A.copy()
        da = np.zeros_like(a)
        zymo.autodiff(Reverse, twice, Active, Duplicated(a, da), Duplicated(a, da), Const(2), numba=numba_)
        if numba_:
            fused = da
        else:
            np.testing.assert_allclose(fused, da, rtol=1e-12, atol=1e-12)
            assert np.abs(da).max() > 0


@numba.njit
def _run_on_fields(a, b, c):
    return numba_rt.ew_run("t0 = x0 * x1; x0[...] = 0.0; x2 += t0 -> t0", (a, b, c))


@pytest.mark.parametrize("packed", [False, True])
def test_fused_run_over_steps_of_whole_items_and_not(packed):
    """Operands stepping by whole items are fused with loops indexed by items (`_whole_items`);
    a field of a packed record array steps by 12 bytes over float64s: the loops then step by
    bytes, with the same results."""
    rec = np.zeros(9, dtype=np.dtype([("a", "f8"), ("b", "f4")], align=not packed))
    rng = np.random.default_rng(8)
    rec["a"] = rng.random(9)
    a = rec["a"]
    assert (a.strides[0] % 8 == 0) != packed
    b, c = rng.random(9), rng.random(9)
    want_t, want_c = a * b, c + a * b
    (t,) = _run_on_fields(a, b, c)
    np.testing.assert_array_equal(t, want_t)
    np.testing.assert_array_equal(c, want_c)
    assert not np.any(rec["a"])


@numba.njit
def _accumulate_shifted(x, b, c):
    numba_rt.ew_run("t0 = x0 * 3.0; x1 += t0; x2 += t0 -> ", (x, b, c))


def test_fused_run_over_a_packed_field_keeps_the_fused_order():
    """Overlapping accumulations (`dB[:-2] += t; dB[2:] += t`, a stencil's adjoint) into a
    field of a packed record array (steps of 12 bytes over float64s) add in the fused loop's
    order, as into an array of numbers: the same bits (run apart, element j took t[j] before
    t[j - 2], another rounding)."""
    rng = np.random.default_rng(3)
    n = 40
    start = rng.standard_normal(n + 2) * 1e3
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    plain = start.copy()
    _accumulate_shifted(x, plain[:-2], plain[2:])
    rec = np.zeros(n + 2, dtype=np.dtype([("a", "f8"), ("b", "f4")]))
    rec["a"] = start
    field = rec["a"]
    assert field.strides == (12,)
    _accumulate_shifted(x, field[:-2], field[2:])
    t = x * 3.0
    fused = start.copy()
    for i in range(n):
        fused[i] += t[i]
        fused[i + 2] += t[i]
    np.testing.assert_array_equal(plain, fused)
    np.testing.assert_array_equal(field, fused)


# -- one view under several names, and a number added into a view ----------------------------------


def test_recognizer_reads_names_of_one_view_as_one():
    # reverse mode names each use of `dout[i]`: the statements on them fuse, read as the first name,
    # and the temporary that reads the view they update joins after them
    src = ("def f(dout, dX, saved, s, ds, n):\n    for i in range(n):\n"
           "        dout_3 = dout[_rt.nonneg(i)]\n        dout_2 = dout[_rt.nonneg(i)]\n"
           "        dout_1 = dout[_rt.nonneg(i)]\n        _rt.ew_set(dout_1, 'x0 / x1', (dout_1, s))\n"
           "        dout_2 = _rt.acc_ew(dout_2, 'x0', (ds,))\n        t = _rt.ew_new('x0 * x1', (dout_3, saved))\n"
           "        _rt.ew_set(dout_3, '0.0', ())\n        dX = _rt.acc_ew(dX, 'x0', (t,))\n")
    arrays = frozenset({"dout", "dX", "saved", "dout_1", "dout_2", "dout_3", "t"})
    ints = frozenset({"i"})  # an int never negative (`analysis.bounds`): `dout[i]` is a view
    runs = [line.strip() for line in fuse_runs(src, arrays, ints).split("\n") if "ew_run" in line]
    assert runs == ["_rt.ew_run('x0[...] = x0 / x1; x0 += x2; t0 = x0 * x3; x0[...] = 0.0; x4 += t0 -> ', "
                    "(dout_3, s, ds, saved, dX))"]
    # the index changes between the two names: two views, two operands (`ew_run` checks at run
    # time how they overlap)
    first = "        dout_1 = dout[_rt.nonneg(i)]\n"
    moved = src.replace(first, "        i = i + 1\n" + first)
    assert "(dout_1, s, ds, dout_3, saved, dX))" in fuse_runs(moved, arrays, ints)
    # a name bound twice in the function is not taken for the view
    twice = src + "        dout_2 = dX\n"
    assert "(dout_3, s, ds, dout_2, saved, dX))" in fuse_runs(twice, arrays, ints)
    # an index that may be an array (not known an int) makes a copy: no alias
    assert "(dout_1, s, ds, dout_2))" in fuse_runs(src, arrays)
    # a name not known to hold an array (`x[0]` of a vector is a number, a copy): not aliased
    assert "dout_2" in fuse_runs(src, arrays - {"dout_2"}, ints).split("dout_2 = dout")[1]


def _softmax_rows(X, W, out):
    for i in range(X.shape[0]):
        row = X[i]
        m = np.max(row)
        np.exp(row - m, out=out[i])
        out[i] /= np.sum(out[i])
    return np.sum(W * out * out)


def _normalized(x, s, y):
    y[...] = x / s
    y *= 2.0  # the quotient overwritten: its adjoint reads `x`, not the result
    return np.sum(y * x) + np.sum(x / s)


@pytest.mark.parametrize("f, make, wrt", [
    (_softmax_rows, lambda r: (r.standard_normal((5, 7)), r.random((5, 7)), np.zeros((5, 7))), (0, 1)),
    (_normalized, lambda r: (r.standard_normal((4, 3)), 1.7, np.zeros((4, 3))), (0, 1)),
])
def test_fused_row_adjoints_and_quotients_by_a_number(f, make, wrt):
    # softmax's row adjoint fuses into one loop (`dout[i]` under three names, a number added
    # into it); `x / s`'s adjoint of the number `s` is one division of a sum under Numba too
    args = make(np.random.default_rng(5))
    active = [i for i in wrt if isinstance(args[i], np.ndarray)]

    def grads(numba_):
        a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
        shadows = {i: np.zeros_like(a[i]) for i in active}
        ann = [Duplicated(x, shadows[i]) if i in shadows else (Active(x) if i in wrt else Const(x))
               for i, x in enumerate(a)]
        out = zymo.autodiff(Reverse, f, Active, *ann, numba=numba_)
        return shadows, [g for g in out[0] if g is not None]
    (fused, nf), (python, npy) = grads(True), grads(False)
    for i in active:
        np.testing.assert_allclose(fused[i], python[i], rtol=1e-12, atol=1e-14)
        assert np.abs(fused[i]).max() > 0
    np.testing.assert_allclose(nf, npy, rtol=1e-12)
    assert all(abs(g) > 0 for g in nf)
    check_grad(f, *args, modes="reverse", const=(len(args) - 1,))


def _copies_of_one_index(x, idx, w, y):
    c = x[idx]
    b = x[idx]  # a second copy (an int-array index): not `c`
    c[...] = c * 2.0
    y[...] = b * w
    return np.sum(y * c)


def _number_then_store(x, w, y, z):
    c = x[0]
    x[0] = 5.0
    b = x[0]  # a number read after the store: not `c`
    y[...] = b * w
    z[...] = c * w
    return np.sum(y * y) + np.sum(z * x[1:])


def _quotient(x, s):
    return np.sum(np.sin(x / s)) + np.sum((x / s) ** 2)


@pytest.mark.parametrize("case", ["copies", "number", "quotient"])
def test_copies_are_not_views_and_a_quotient_of_a_number_compiles(case):
    # reads through a fancy index or of one element are copies, whatever their text: a run must
    # not read one for the other; the adjoint of `x / s` for a number `s` with `x` constant
    # compiles (`_rt.sum_product` of expressions: its Numba twin)
    r = np.random.default_rng(6)
    if case == "copies":
        f, active = _copies_of_one_index, (0,)
        args = [r.standard_normal(6), np.array([0, 2, 3]), r.random(3), np.zeros(3)]
    elif case == "number":
        f, args, active = _number_then_store, [r.standard_normal(3), r.random(2), np.zeros(2), np.zeros(2)], (0,)
    else:
        f, args, active = _quotient, [r.standard_normal(4), 1.7], (1,)

    def run(numba_):
        a = [v.copy() if isinstance(v, np.ndarray) else v for v in args]
        sh = {i: np.zeros_like(a[i]) for i in active if isinstance(a[i], np.ndarray)}
        ann = [Duplicated(v, sh[i]) if i in sh else Active(v) if i in active else
               (Duplicated(v, np.zeros_like(v)) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else Const(v))
               for i, v in enumerate(a)]
        (grads, value) = zymo.autodiff(zymo.ReverseWithPrimal, f, Active, *ann, numba=numba_)
        return value, [sh[i] if i in sh else grads[i] for i in active]
    (v_nb, g_nb), (v_py, g_py) = run(True), run(False)
    assert v_nb == pytest.approx(v_py, rel=1e-13)
    assert v_py == pytest.approx(f(*[v.copy() if isinstance(v, np.ndarray) else v for v in args]), rel=1e-13)
    for a, b in zip(g_nb, g_py, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
        assert np.abs(b).max() > 0
    check_grad(f, *args, modes="reverse", const=tuple(i for i in range(len(args)) if i not in active))
