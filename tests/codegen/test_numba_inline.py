"""Helpers the Numba backend writes into the program instead of compiling a function for each:
sums over broadcast dimensions added in place (`acc_unbroadcast`), matrix-product adjoints as
one BLAS call (`numba_accumulate._gemm`), `numba_inline`'s allocation, cache growth, max/min
and max adjoint, `ew_like`, and the loops that replace Numba's `np.max`/`np.min` of a whole
array and `extreme_mask` where the overloads are still called. Each is compared with NumPy (and with the
Python helper it stands for) over layouts, dtypes, broadcasting, shared memory and errors; a
program using them all differentiates as the Python backend and finite differences do.
"""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

from helpers import fd_grad

import zymo
from zymo import Active, Const, Duplicated, Reverse
from zymo import runtime as rt
from zymo.codegen.numba import np_shim as numba_np
from zymo.codegen.numba import twins as numba_rt
from zymo.codegen.numba.rewrites import numba_source


@pytest.fixture(scope="module", autouse=True)
def private_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZYMO_CACHE_DIR", str(tmp_path_factory.mktemp("zymo_cache")))
        yield


def _nrt_kept(call, reps=5):
    """NRT allocations `call` keeps over `reps` calls (after a first, compiling one)."""
    from numba.core.runtime import _nrt_python, rtsys

    was = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    try:
        call()
        before = rtsys.get_allocation_stats()
        for _ in range(reps):
            call()
        after = rtsys.get_allocation_stats()
        return (after.alloc - before.alloc) - (after.free - before.free)
    finally:
        if not was:
            _nrt_python.memsys_disable_stats()


# -- acc_unbroadcast -----------------------------------------------------------------------


@numba.njit
def _sum_to(d, x, g):
    return numba_rt.acc_unbroadcast(d, x, "x0", (g,))


@numba.njit
def _sum_to_expr(d, x, g, h, s):
    return numba_rt.acc_unbroadcast(d, x, "-x0 * x1 + x2", (g, h, s))


def _expected(d, x, g):
    return d + rt.unbroadcast(g, x)


CASES = [  # d's shape, g's shape
    ((4,), (6, 4)),         # a bias: leading dimension summed
    ((1, 4), (6, 4)),       # kept as extent 1
    ((6, 1), (6, 4)),       # a trailing extent 1
    ((3, 1, 2), (5, 3, 4, 2)),
    ((5,), (5,)),           # nothing to sum
    ((3, 4), (1, 4)),       # g broadcast into d: each row gets g
    ((4,), (0, 4)),         # an empty sum: d unchanged
]


@pytest.mark.slow
@pytest.mark.parametrize("dshape,gshape", CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_acc_unbroadcast_is_the_helpers_sum(dshape, gshape, dtype):
    rng = np.random.default_rng(3)

    def r(shape):
        v = rng.standard_normal(shape) + 0.5
        return (v + 1j * rng.standard_normal(shape) if dtype is np.complex128 else v).astype(dtype)
    d, g = r(dshape), r(gshape)
    want = _expected(d, d, g)
    got = _sum_to(d.copy(), d, g)
    tol = 1e-5 if dtype is np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    h, s = r(gshape), dtype(0.25)
    want = d + rt.unbroadcast(-g * h + s, d)
    np.testing.assert_allclose(_sum_to_expr(d.copy(), d, g, h, s), want, rtol=tol, atol=tol)


@pytest.mark.slow
def test_acc_unbroadcast_layouts_in_place_and_overlaps():
    rng = np.random.default_rng(4)
    base = rng.standard_normal((8, 6))
    g = np.asfortranarray(rng.standard_normal((5, 6)))
    d = base[::2, ::-1][0]               # a strided, reversed row
    want = _expected(d, d, g)
    out = _sum_to(d, d, g)
    assert out is not None and np.shares_memory(out, base)
    np.testing.assert_allclose(base[0, ::-1], want, rtol=1e-12)
    # g is d's own memory (read while d is written): copied first, as NumPy sums first
    buf = rng.standard_normal((4, 3))
    d, g = buf[-1], buf  # the last row of g is d, read after the others were added into it
    want = _expected(d, d, g)
    np.testing.assert_allclose(_sum_to(d, d, g), want, rtol=1e-12)
    buf = rng.standard_normal((4, 3))
    want = _expected(buf, buf, buf)
    np.testing.assert_allclose(_sum_to(buf, buf, buf), want, rtol=1e-12)  # element for element
    # no allocation kept, with or without the copy
    d, g = np.zeros(3), np.ones((4, 3))
    assert _nrt_kept(lambda: _sum_to(d, d, g)) == 0
    assert _nrt_kept(lambda: _sum_to(buf[-1], buf[-1], buf)) == 0


def test_acc_unbroadcast_sums_before_adding():
    # the helper's order, d + (e0 + e1): adding into d element by element would cancel d away
    d = np.array([1.0, -0.0, 1e308])
    g = np.array([[1e20, 0.0, 1e308], [-1e20, 0.0, -1e308]])
    want = d + rt.unbroadcast(g, d)
    np.testing.assert_array_equal(_sum_to(d.copy(), d, g), want)
    assert want[0] == 1.0 and np.isfinite(want[2])
    empty = _sum_to(d.copy(), d, np.zeros((0, 3)))  # an empty sum is +0.0: -0.0 + 0.0
    np.testing.assert_array_equal(empty, d + rt.unbroadcast(np.zeros((0, 3)), d))
    assert not np.signbit(empty[1])


@pytest.mark.slow
def test_acc_unbroadcast_of_floats_and_fallbacks():
    g = np.arange(6.0).reshape(2, 3)
    assert _sum_to(1.5, 2.0, g) == 1.5 + g.sum()          # a float's adjoint: the whole sum
    assert _sum_to(1.5, 2.0, 0.25) == 1.75                # numbers only
    ints = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(_sum_to(np.zeros(3), np.zeros(3), ints), ints.sum(0))  # mixed: Numba's
    np.testing.assert_array_equal(_sum_to(np.zeros(3, np.int64), np.zeros(3), ints), ints.sum(0))
    np.testing.assert_allclose(_sum_to(np.zeros(3), np.zeros(3), g.astype(np.float32)), g.sum(0))


@pytest.mark.slow
def test_acc_unbroadcast_errors():
    with pytest.raises(ValueError, match="broadcast"):
        _sum_to(np.zeros(3), np.zeros(3), np.ones((2, 4)))
    with pytest.raises(ValueError, match="does not broadcast"):  # a lower rank: the helper's refusal
        _sum_to(np.zeros((3, 4)), np.zeros((3, 4)), np.ones(4))
    with pytest.raises(ValueError, match="operand's shape"):
        _sum_to(np.zeros(3), np.zeros(4), np.ones((2, 3)))


# -- matrix-product adjoints: one BLAS call ---------------------------------------------------


@numba.njit
def _acc_a(acc, g, a, b):
    return numba_rt.acc_dot_vjp_a(acc, g, a, b)


@numba.njit
def _acc_b(acc, g, a, b):
    return numba_rt.acc_dot_vjp_b(acc, g, a, b)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
def test_product_adjoints_by_blas(dtype, orders):
    rng = np.random.default_rng(5)

    def r(*shape):
        v = rng.standard_normal(shape)
        if dtype is np.complex128:
            v = v + 1j * rng.standard_normal(shape)
        return v.astype(dtype)
    a, b, g = r(5, 4), r(4, 3), r(5, 3)
    a = np.asfortranarray(a) if orders[0] == "F" else a
    b = np.asfortranarray(b) if orders[1] == "F" else b
    g = np.asfortranarray(g) if orders == "FF" else g
    tol = 1e-4 if dtype is np.float32 else 1e-12
    acc = r(5, 4)
    np.testing.assert_allclose(_acc_a(acc.copy(), g, a, b), acc + rt.dot_vjp_a(g, a, b), rtol=tol, atol=tol)
    acc = r(4, 3)
    np.testing.assert_allclose(_acc_b(acc.copy(), g, a, b), acc + rt.dot_vjp_b(g, a, b), rtol=tol, atol=tol)


def test_product_adjoints_sharing_memory_and_errors():
    rng = np.random.default_rng(6)
    n = 300  # large enough for BLAS to work in blocks: writes seen by later reads
    s, g, a = rng.standard_normal((3, n, n))
    want = s + g @ s.T
    np.testing.assert_allclose(_acc_a(s, g, a, s), want, rtol=1e-12, atol=1e-10)   # b is acc: copied first
    s = rng.standard_normal((n, n))
    want = s + a.T @ s
    np.testing.assert_allclose(_acc_b(s, s, a, g), want, rtol=1e-12, atol=1e-10)   # g is acc
    s = rng.standard_normal((n, n))
    want = s + s @ a.T
    np.testing.assert_allclose(_acc_a(s, s.T.T, a, a), want, rtol=1e-12, atol=1e-10)
    assert _nrt_kept(lambda: _acc_a(s, g, a, s)) == 0
    with pytest.raises(ValueError, match="shapes do not match"):
        _acc_a(np.zeros((5, 5)), g, a, a)
    acc = np.ones((2, 3))
    np.testing.assert_array_equal(_acc_a(acc, np.zeros((2, 0)), np.zeros((2, 3)), np.zeros((3, 0))), 1.0)
    assert _acc_a(np.zeros((0, 3)), np.zeros((0, 2)), np.zeros((0, 3)), np.zeros((3, 2))).shape == (0, 3)


def test_loop_product_adjoints_free_their_copies():
    a = np.arange(12.0).reshape(4, 3)
    buf = np.ones(12)
    want = buf[:3] + a.T @ buf[1:5]
    np.testing.assert_allclose(_acc_b(buf[:3], buf[1:5], a, np.ones(3)), want)  # g overlaps acc: copied
    assert _nrt_kept(lambda: _acc_b(buf[:3], buf[1:5], a, np.ones(3))) == 0
    assert _nrt_kept(lambda: _acc_b(buf[:3], buf[1:5][::-1], a, np.ones(3))) == 0  # strided: C copy


@pytest.mark.slow
def test_product_adjoints_of_strided_operands_take_the_general_path():
    rng = np.random.default_rng(7)
    big = rng.standard_normal((8, 6))
    a, b, g = big[::2, :4], rng.standard_normal((4, 3)), rng.standard_normal((4, 3))  # `a`: not contiguous
    acc = np.zeros((4, 3))
    np.testing.assert_allclose(_acc_b(acc, g, a, b), a.T @ g, rtol=1e-12)


# -- max and min of a whole array, extreme_mask, grow_stack -----------------------------------


@numba.njit
def _max(x):
    return numba_np.max(x)


@numba.njit
def _min(x):
    return numba_np.min(x)


@numba.njit
def _amax_keep(x):
    return numba_np.amax(x, keepdims=True)


@pytest.mark.slow
@pytest.mark.parametrize("x", [
    np.array([3.0, -1.0, 7.5, 7.5, 2.0]), np.array([1.0, np.nan, 3.0]), np.array([np.nan, 1.0]),
    np.arange(12.0).reshape(3, 4)[:, ::-2], np.array([[5, -2], [7, 1]]), np.array([[1.0, 2.0], [np.nan, 0.0]]),
    np.random.default_rng(8).standard_normal((6, 5)).T, np.array([-np.inf, -np.inf]), np.array([4], np.int32),
], ids=lambda x: f"{x.dtype}{x.shape}")
def test_max_and_min_of_a_whole_array(x):
    np.testing.assert_array_equal(_max(x), np.max(x))
    np.testing.assert_array_equal(_min(x), np.min(x))
    np.testing.assert_array_equal(_amax_keep(x), np.amax(x, keepdims=True))


def test_max_of_nothing_raises_numpys_error():
    for e in (np.zeros(0), np.zeros((0, 3)), np.zeros((3, 0))):
        with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
            _max(e)
        with pytest.raises(ValueError, match="minimum"):
            _min(e)


@numba.njit
def _mask(x, ans):
    return rt.extreme_mask(x, ans, None, False)


@pytest.mark.slow
@pytest.mark.parametrize("x,ans", [
    (np.array([1.0, 3.0, 3.0, 2.0]), 3.0), (np.array([2.0, -1.0]), -1.0), (np.array([1.0, np.nan]), np.nan),
    (np.array([4, 1, 4]), 4), (np.array([1.5, 2.5], np.float32), np.float32(2.5)),
])
def test_extreme_mask_shares_the_adjoint_among_ties(x, ans):
    want = rt.extreme_mask(x, ans, None, False)
    got = _mask(x, ans)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@numba.njit
def _grow(buf, row, need):
    return numba_rt.grow_stack(buf, row, need)


@numba.njit
def _grow1(buf, need):
    return numba_rt.grow(buf, need)


@numba.njit
def _span(lo, hi):
    return numba_rt.span(lo, hi)


@pytest.mark.parametrize("lo, hi", [(0, 5), (0, -5), (3, 3), (2, 7), (7, 2), (-4, 1), (np.uint64(5), np.uint64(1)),
                                    (np.uint64(1), np.uint64(5)), (np.uint8(200), np.int64(3)),
                                    (np.int32(-3), np.uint8(4)),
                                    (False, True), (True, False)])
def test_span_is_the_helper(lo, hi):
    """`_rt.span(lo, hi)`, a trip count written out: `hi - lo`, or 0 where `hi <= lo`, an int;
    compared before subtracting, so unsigned bounds do not wrap round (`np.uint64(1) -
    np.uint64(5)` is 2**64 - 4)."""
    got = _span(lo, hi)
    want = max(int(hi) - int(lo), 0)
    assert got == rt.span(lo, hi) == want
    assert type(got) is int and type(rt.span(lo, hi)) is int


@numba.njit
def _helpers_as_written(a, b, lo, hi):
    return rt.fdiv(a, b), rt.fpow(a, -0.5), rt.span(lo, hi)


def test_the_python_helpers_compile_as_written():
    """`zymo.runtime.fdiv`, `fpow` and `span`, reached as the Python functions (as where zymo
    compiles a reverse program as written, to say why a second order failed), compile with
    Numba: IEEE results, as the Python helpers give them."""
    got = _helpers_as_written(0.0, 0.0, np.uint64(5), np.uint64(1))
    want = (rt.fdiv(0.0, 0.0), rt.fpow(0.0, -0.5), rt.span(np.uint64(5), np.uint64(1)))
    assert np.isnan(got[0]) and np.isnan(want[0])
    assert got[1:] == want[1:] == (np.inf, 0)
    assert _helpers_as_written(3.0, 2.0, 1, 4) == (rt.fdiv(3.0, 2.0), rt.fpow(3.0, -0.5), 3) == (1.5, 3.0 ** -0.5, 3)


def test_span_refuses_a_float():
    with pytest.raises(numba.core.errors.TypingError):
        _span(0, 1.5)


@pytest.mark.slow
def test_grow_copies_its_entries():
    buf = np.arange(3.0)
    for need, size in ((0, 7), (12, 12)):
        out = _grow1(buf, need)
        assert out.shape == (size,) and out.dtype == buf.dtype
        np.testing.assert_array_equal(out[:3], buf)
    ints = np.arange(4, dtype=np.int32)
    np.testing.assert_array_equal(_grow1(ints, np.int32(1))[:4], ints)
    np.testing.assert_array_equal(_grow1(np.arange(6.0)[::2], 0)[:3], [0.0, 2.0, 4.0])  # strided: as written
    assert _grow1(np.zeros(0, np.bool_), 0).shape == (1,)


@numba.njit
def _reuse(buf, size):
    out = numba_rt.reuse_tape(buf, size, np.float64)
    out[0] = 7.0  # written: the caller sees it where `buf` itself came back
    return out


@numba.njit
def _reuse_bool(buf, size):
    return numba_rt.reuse_tape(buf, size, np.bool_)


def test_reuse_tape_gives_the_kept_buffer_back_or_a_new_one():
    """`reuse_tape` (decision 0021): the buffer itself when it holds `size` entries, else a new
    one of `max(size, 1)` of its dtype, as the Python helper does."""
    buf = np.zeros(5)
    for size in (0, 3, 5):
        out = _reuse(buf, size)
        assert np.shares_memory(out, buf) and out.shape == (5,) and buf[0] == 7.0
        buf[0] = 0.0
        assert rt.reuse_tape(buf, size, np.float64) is buf
    for size, want in ((6, 6), (40, 40)):
        out = _reuse(buf, size)
        assert not np.shares_memory(out, buf) and out.shape == (want,) and out.dtype == np.float64
        assert buf[0] == 0.0 and rt.reuse_tape(buf, size, np.float64).shape == (want,)
    assert _reuse_bool(np.zeros(0, np.bool_), 0).shape == (0,)  # an empty buffer holds 0 entries
    assert rt.reuse_tape(np.zeros(0), 0, np.float64).shape == (0,)
    flags = _reuse_bool(np.zeros(0, np.bool_), 3)
    assert flags.shape == (3,) and flags.dtype == np.bool_
    for _ in range(2000):  # references balance: the kept buffer survives its reuses
        _reuse(buf, 2)
    assert buf[0] == 7.0 and buf.shape == (5,)


@pytest.mark.slow
def test_grow_stack_copies_its_entries():
    row = np.arange(3.0)
    buf = _grow(np.empty((0, 0)), row, 2)
    assert buf.shape == (2, 3)
    buf[0], buf[1] = row, row + 1
    bigger = _grow(buf, row, 1)
    assert bigger.shape == (5, 3)
    np.testing.assert_array_equal(bigger[:2], buf)
    with pytest.raises(ValueError, match="changed shape"):
        _grow(buf, np.arange(4.0), 1)
    f = np.asfortranarray(np.arange(6.0).reshape(2, 3))  # not C-ordered: the helper as written
    np.testing.assert_array_equal(_grow(f, row, 1)[:2], f)


# -- numba_inline: allocation, max/min and their adjoint; ew_like -------------------------------


@numba.njit
def _zeros(shape):
    return numba_rt.zeros(shape, np.float32), numba_rt.zeros(shape, np.int64), numba_rt.empty(shape, np.float64)


def test_zeros_and_empty():
    for shape in (3, (2, 4), (0, 5), np.int32(2)):
        z, zi, e = _zeros(shape)
        want = np.zeros(shape, np.float32)
        assert z.shape == want.shape and z.dtype == np.float32 and zi.dtype == np.int64 and e.dtype == np.float64
        assert z.flags.c_contiguous and e.shape == want.shape
        np.testing.assert_array_equal(z, want)
        np.testing.assert_array_equal(zi, 0)
    with pytest.raises(ValueError, match="negative"):
        _zeros(-1)
    with pytest.raises(ValueError, match="array is too big"):  # NumPy's and Numba's check
        _zeros((2 ** 40, 2 ** 40))
    with pytest.raises(ValueError, match="array is too big"):
        _zeros(2 ** 61)  # the element count fits, its bytes do not
    big, _, _ = _zeros(3_000_000)  # an allocation NRT aligns like Numba's own arrays
    assert big.ctypes.data % 32 == 0 and not big.any()

    @numba.njit
    def other(n):
        return numba_rt.zeros(n, np.complex128), numba_rt.zeros((), np.float64)  # () : Numba's own
    c, s = other(2)
    assert c.dtype == np.complex128 and s.shape == () and s == 0.0


@numba.njit
def _ew_max(x):
    return numba_rt.ew_max(x), numba_rt.ew_min(x)


@pytest.mark.parametrize("x", [
    np.array([3.0, -1.0, 7.5, 7.5, 2.0]), np.array([1.0, np.nan, 3.0]), np.array([np.nan, 1.0]),
    np.array([2.0, 5.0, np.nan]), np.arange(12.0)[::-3], np.array([5, -2, 7], np.int32),
    np.array([3, 250, 7], np.uint8), np.array([-np.inf]), np.arange(6.0).reshape(2, 3),
], ids=lambda x: f"{x.dtype}{x.shape}")
def test_ew_max_and_min(x):
    hi, lo = _ew_max(x)
    np.testing.assert_array_equal(hi, np.max(x))
    np.testing.assert_array_equal(lo, np.min(x))


def _serial_extreme(x, larger):
    """Numba's `np.max`/`np.min`: the first of equal elements, NaN as soon as one is met."""
    m = x[0]
    for v in x[1:]:
        if (v > m if larger else v < m) or (not np.isnan(m) and np.isnan(v)):
            m = v
    return m


@pytest.mark.parametrize("kind", ["normal", "signed zeros", "a NaN", "ints", "uint8", "float32",
                                  "zeros and infinities"])
def test_ew_max_and_min_by_lanes_are_the_serial_scan(kind):
    """Arrays of 8 elements or more run eight running extremes (`inline._lanes_extreme`, one
    LLVM vector), the rest folded into the first: the same value, sign of zero and NaN as the
    serial scan, at every length around the lanes."""
    rng = np.random.default_rng(11)
    make = {"normal": lambda n: rng.standard_normal(n),
            "signed zeros": lambda n: rng.choice([0.0, -0.0, -1.0, -2.0], n),
            "a NaN": lambda n: np.where(np.arange(n) == rng.integers(n), np.nan, rng.standard_normal(n)),
            "ints": lambda n: rng.integers(-5, 5, n),
            "uint8": lambda n: rng.integers(0, 256, n).astype(np.uint8),
            "float32": lambda n: rng.standard_normal(n).astype(np.float32),
            "zeros and infinities": lambda n: rng.choice([0.0, -0.0, 1.0, np.inf, -np.inf], n)}[kind]
    for _ in range(200):
        x = make(int(rng.integers(1, 41)))
        hi, lo = _ew_max(x)
        for got, want in ((hi, _serial_extreme(x, True)), (lo, _serial_extreme(x, False))):
            np.testing.assert_array_equal(got, want)
            assert np.signbit(got) == np.signbit(want), (x, got, want)


def test_ew_max_of_nothing_raises():
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        _ew_max(np.zeros(0))


@numba.njit
def _acc_extreme(d, g, x, ans):
    return numba_rt.acc_extreme(d, g, x, ans)


@pytest.mark.slow
@pytest.mark.parametrize("x,ans,g", [
    (np.array([1.0, 3.0, 3.0, 2.0]), 3.0, 1.5), (np.array([2.0, -1.0, 0.5]), -1.0, -2.0),
    (np.array([1.0, np.nan]), np.nan, 1.0),                       # no element equals NaN: NaN, as 0/0
    (np.array([4, 1, 4]), 4, 0.5),                                 # integers: float64 weights
    (np.array([1.5, 2.5], np.float32), np.float32(2.5), np.float32(3.0)),
    (np.array([1.5, 2.5], np.float32), np.float32(2.5), 3.0),    # a float64 g: the statement itself
    (np.arange(10.0)[::-2], 8.0, np.inf),                          # strided; g * 0 is NaN for inf
])
def test_acc_extreme_is_the_statement(x, ans, g):
    dt = np.result_type(x, 1.0)
    d = np.linspace(-1.0, 1.0, x.shape[0]).astype(dt)
    want = d + rt.expand_reduced(g, x, None, False) * rt.extreme_mask(x, ans, None, False)
    with np.errstate(invalid="ignore", divide="ignore"):
        got = _acc_extreme(d.copy(), g, x, ans)
    np.testing.assert_array_equal(got, want.astype(dt))


def test_acc_extreme_overlap_and_errors():
    buf = np.array([1.0, 4.0, 4.0, 2.0, 0.0])
    d, x = buf[1:], buf[:4]          # d is x shifted by one: x is read from a copy
    want = d + 2.0 * rt.extreme_mask(x, 4.0, None, False)
    np.testing.assert_array_equal(_acc_extreme(d, 2.0, x, 4.0), want)
    assert _nrt_kept(lambda: _acc_extreme(buf[1:], 2.0, buf[:4], 4.0)) == 0
    same = np.array([1.0, 3.0, 3.0])  # d is x, element for element
    want = same + 1.0 * rt.extreme_mask(same, 3.0, None, False)
    np.testing.assert_array_equal(_acc_extreme(same, 1.0, same, 3.0), want)
    with pytest.raises(ValueError, match="operand's shape"):
        _acc_extreme(np.zeros(2), 1.0, np.ones(3), 1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_acc_extreme_by_lanes_is_the_statement(dtype):
    """C-ordered float `d` and `x` of 8 elements or more run both passes eight elements per
    instruction (`inline._acc_extreme_lanes`), the rest one by one: bit for bit the statement,
    at every length around the lanes, with ties, NaN, signed zeros and infinite `g`."""
    rng = np.random.default_rng(12)
    for _ in range(300):
        n = int(rng.integers(1, 41))
        x = rng.choice([1.0, 2.0, 3.0, -0.0, 0.0, np.nan], n).astype(dtype)
        ans = dtype(rng.choice([3.0, 0.0, np.nan, 7.0]))  # 7.0: no element equal (NaN weights)
        g = dtype(rng.choice([1.5, -2.0, 0.0, -0.0, np.inf]))
        d = rng.choice([0.25, -0.0, 0.0, -1.0], n).astype(dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            want = (d + rt.expand_reduced(g, x, None, False) * rt.extreme_mask(x, ans, None, False)).astype(dtype)
            got = _acc_extreme(d.copy(), g, x, ans)
        np.testing.assert_array_equal(got, want)
        numbers = ~np.isnan(want)  # the sign of zeros (a NaN's sign bit means nothing)
        assert (np.signbit(got) == np.signbit(want))[numbers].all(), (x, ans, g, d, got, want)
    same = rng.choice([1.0, 3.0], 19)  # d is x, element for element, past the lanes
    want = same + 1.0 * rt.extreme_mask(same, 3.0, None, False)
    np.testing.assert_array_equal(_acc_extreme(same, 1.0, same, 3.0), want)


@numba.njit
def _like(x, a, s):
    return numba_rt.ew_like(x, "x0 / x1 * x2", (a, s, a)), numba_rt.ew_like(x, "x0", (s,))


@pytest.mark.slow
def test_ew_like_broadcasts_into_a_new_array_like_x():
    x = np.zeros((3, 4))
    a = np.arange(1.0, 5.0)
    got, filled = _like(x, a, 2.0)
    np.testing.assert_array_equal(got, rt.as_tangent(a / 2.0 * a, x))
    np.testing.assert_array_equal(filled, np.full((3, 4), 2.0))
    assert got.flags.c_contiguous and got.shape == (3, 4) and not np.shares_memory(got, a)
    with pytest.raises(ValueError):
        _like(np.zeros((3, 5)), a, 2.0)
    f32, _ = _like(np.zeros(4, np.float32), a, 2.0)  # float64 operands into float32: the helper
    np.testing.assert_array_equal(f32, rt.as_tangent(a / 2.0 * a, np.zeros(4, np.float32)))


def test_rewrites_of_calls_and_helpers():
    from zymo.codegen.numba.ew_rewrite import elementwise_statements

    src = ("def f(d, g, x, m, t, n):\n"
           "    a = np.zeros((n, 2), np.float32)\n"
           "    b = np.empty(n)\n"
           "    c = np.max(x) + np.amin(x[0])\n"
           "    e = np.max(x, axis=0)\n"
           "    d += _rt.expand_reduced(g, x, None, False) * _rt.extreme_mask(x, m, None, False)\n"
           "    d += _rt.expand_reduced(g, x, 0, False) * _rt.extreme_mask(x, m, 0, False)\n"
           "    t = _rt.as_tangent(g / m * x, x)\n")
    out = elementwise_statements(src).split("\n")
    assert out[1] == "    a = _rt.zeros((n, 2), np.float32)"
    assert out[2] == "    b = _rt.empty(n, np.float64)"
    assert out[3] == "    c = _rt.ew_max(x) + _rt.ew_min(x[0])"
    assert out[4] == "    e = np.max(x, axis=0)"
    assert out[5] == "    d = _rt.acc_extreme(d, g, x, m)"
    assert out[6].startswith("    d += _rt.expand_reduced(g, x, 0, False)")  # along an axis: left
    assert out[7] == "    t = _rt.ew_like(x, 'x0 / x1 * x2', (g, m, x))"


# -- a program using them all -----------------------------------------------------------------


def softmax_loss(W, b, X, labels, h):
    np.dot(X, W, out=h)
    h += b
    loss = 0.0
    for i in range(h.shape[0]):
        row = h[i]
        m = np.max(row)
        loss += m + np.log(np.sum(np.exp(row - m))) - row[labels[i]]
    return loss / h.shape[0]


@pytest.mark.slow
def test_softmax_loss_matches_python_and_finite_differences():
    rng = np.random.default_rng(9)
    W, b, X = rng.standard_normal((5, 4)), rng.standard_normal(4), rng.standard_normal((6, 5))
    labels = rng.integers(0, 4, 6)

    def grads(numba_):
        dW, db = np.zeros_like(W), np.zeros_like(b)
        h, dh = np.zeros((6, 4)), np.zeros((6, 4))
        zymo.autodiff(Reverse, softmax_loss, Active, Duplicated(W, dW), Duplicated(b, db), Const(X),
                      Const(labels), Duplicated(h, dh), numba=numba_)
        return dW, db
    dW, db = grads(True)
    pW, pb = grads(False)
    np.testing.assert_allclose(dW, pW, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(db, pb, rtol=1e-12, atol=1e-14)
    fW, fb = fd_grad(softmax_loss, [W, b, X, labels, np.zeros((6, 4))])[:2]
    np.testing.assert_allclose(dW, fW, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(db, fb, rtol=1e-6, atol=1e-8)
    assert np.abs(db).max() > 1e-3 and np.abs(dW).max() > 1e-3
    src = numba_source(zymo.generated_code(Reverse, softmax_loss, Active, Duplicated(W, dW), Duplicated(b, db),
                                           Const(X), Const(labels), Duplicated(np.zeros((6, 4)), np.zeros((6, 4)))))
    assert "_rt.acc_unbroadcast(" in src and "_rt.acc_dot_vjp_b(" in src


_W = np.random.default_rng(10).standard_normal((4, 3))


def _mixed(x):
    """Every rewritten call in one function of one array (a 3x4 `x`): a 2-d product with `out=`,
    a bias broadcast in place, the max of rows, zeros allocated in a loop, a logsumexp."""
    h = np.zeros((3, 3))
    np.dot(x, _W, out=h)
    h += x[0, :3]
    total = 0.0
    for i in range(3):
        row = h[i]
        m = np.max(row)
        buf = np.zeros(3)
        buf += np.exp(row - m)
        total += m + np.log(np.sum(buf)) + np.min(x[i]) * 0.5
    return total + np.sum(h * h) * 0.1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_mixed_program_in_both_modes_matches_python_and_finite_differences(mode):
    from zymo import Forward

    m = Reverse if mode == "reverse" else Forward
    x = np.random.default_rng(11).standard_normal((3, 4))
    got = zymo.gradient(m, _mixed, x, numba=True)[0]
    ref = zymo.gradient(m, _mixed, x, numba=False)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-13)
    fd = fd_grad(_mixed, [x])[0]
    assert np.abs(fd).max() > 0.1
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)
