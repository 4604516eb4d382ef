"""Elementwise statements compiled as loops under Numba (`numba_elementwise`: `acc_ew`,
`ew_set`, `ew_new`, `ew_sum`): each gives NumPy's value bit for bit over layouts (C, F,
strided, reversed, 3-d with a last extent of 2), broadcasting (extent 1 and lower ranks),
operands overlapping the written array, zero divisors and dtypes; shapes that do not broadcast
raise; statements that are not fast (mixed dtypes, integers, complex division, a widening
number) still give NumPy's value; gradients through the rewritten programs agree with the
Python backend and finite differences.
"""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

from helpers import fd_grad

import zymo
from zymo import Active, Const, Duplicated, Reverse, ReverseWithPrimal
from zymo.codegen.numba import elementwise as ew
from zymo.codegen.numba import twins as numba_rt
from zymo.codegen.numba import vecmath
from zymo.codegen.numba.rewrites import numba_source


@pytest.fixture(scope="module", autouse=True)
def private_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZYMO_CACHE_DIR", str(tmp_path_factory.mktemp("zymo_cache")))
        yield


EXPRS = ["x0 * x1", "x0 * (x1 - 1.5) / x2 + x1", "-x0 + x1 * x1 / x0", "x0 ** 2 - x1 * x2"]


def _kernels():
    out = {}
    for expr in EXPRS:
        ns = {"rt": numba_rt, "numba": numba}
        exec(f"@numba.njit\ndef acc(d, x0, x1, x2):\n    return rt.acc_ew(d, {expr!r}, (x0, x1, x2))\n"
             f"@numba.njit\ndef put(d, x0, x1, x2):\n    rt.ew_set(d, {expr!r}, (x0, x1, x2))\n"
             f"@numba.njit\ndef new(x0, x1, x2):\n    return rt.ew_new({expr!r}, (x0, x1, x2))\n"
             f"@numba.njit\ndef total(x0, x1, x2):\n    return rt.ew_sum({expr!r}, (x0, x1, x2))\n"
             f"@numba.njit\ndef plain(x0, x1, x2):\n    return {expr}\n", ns)
        out[expr] = ns
    return out


KERNELS = _kernels()


def _value(expr, xs):
    return eval(expr, {}, {f"x{i}": x for i, x in enumerate(xs)})


def _operands():
    rng = np.random.default_rng(11)

    def r(*shape):
        return rng.random(shape) + 0.5

    def seeded(make):
        """`make` drawing from a generator of its own: a case's values do not depend on which
        cases ran before it in the same process."""
        def fresh():
            nonlocal rng
            rng = np.random.default_rng(11)
            return make()
        return fresh

    for name, shape, make in _cases(r):
        yield name, shape, seeded(make)


def _cases(r):
    yield "1-d", (5,), lambda: (r(5), r(5), 0.75)
    yield "2-d", (3, 4), lambda: (r(3, 4), r(3, 4), r(3, 4))
    yield "3-d, last extent 2", (4, 3, 2), lambda: (r(4, 3, 2), r(4, 3, 2), 1.25)
    yield "strided views of 3-d", (4, 3), lambda: (r(4, 3, 2)[:, :, 0], r(4, 3, 2)[:, :, 1], 2.0)
    yield "Fortran order", (3, 4), lambda: (np.asfortranarray(r(3, 4)), r(3, 4), 0.5)
    yield "reversed", (6,), lambda: (r(6)[::-1], r(12)[::2], 3.0)
    yield "broadcast row and column", (3, 4), lambda: (r(1, 4), r(3, 1), r(3, 4))
    yield "lower rank", (3, 4), lambda: (r(4), r(3, 4), 2.5)
    yield "zero divisor", (4,), lambda: (r(4), r(4), np.array([1.0, 0.0, -0.0, np.inf]))
    yield "numbers and one array", (2, 3), lambda: (1.5, r(2, 3), -2.0)
    yield "float32", (7,), lambda: (r(7).astype(np.float32), r(7).astype(np.float32), np.float32(0.5))
    yield "complex", (5,), lambda: (r(5) + 1j * r(5), r(5) - 0.5j, 2.0 + 1.0j)
    yield "empty", (0, 3), lambda: (r(0, 3), r(0, 3), 1.0)
    # not fast: the statement runs as Numba compiles it, NumPy's value all the same
    yield "float32 with a float64 number", (4,), lambda: (r(4).astype(np.float32), r(4).astype(np.float32), 0.5)
    yield "mixed dtypes", (4,), lambda: (r(4).astype(np.float32), r(4), 2.0)
    yield "integers", (4,), lambda: (np.arange(1, 5), np.arange(2, 6), 3)


OPERANDS = list(_operands())
NOT_FAST = {"float32 with a float64 number", "mixed dtypes", "integers"}


def _fast(expr, xs):
    import ast

    from numba.core.registry import cpu_target

    tys = tuple(numba.typeof(x) for x in xs)
    cpu_target.typing_context.refresh()
    return ew._dtype(cpu_target.typing_context, ast.parse(expr, mode="eval").body, tys) is not None


def _flat(xs, shape):
    """Whether the intrinsics run one flat loop: C-ordered arrays of the statement's shape."""
    arrays = [x for x in xs if isinstance(x, np.ndarray)]
    return all(x.shape == shape and x.flags.c_contiguous and numba.typeof(x).layout == "C" for x in arrays)


def _reference_sum(values, flat):
    """The sum `ew_sum` computes: C order over a nested loop; over a flat loop, eight
    interleaved partial sums added pairwise, then the elements after the last full block."""
    zero = values.dtype.type(0)
    if not flat:
        total = zero
        for v in values:
            total = total + v
        return total
    lanes = [zero] * 8
    full = len(values) // 8 * 8
    for i in range(full):
        lanes[i % 8] = lanes[i % 8] + values[i]
    while len(lanes) > 1:
        lanes = [lanes[j] + lanes[j + 1] for j in range(0, len(lanes), 2)]
    total = lanes[0]
    for v in values[full:]:
        total = total + v
    return total


@pytest.mark.slow
def test_a_flat_sum_is_numpys_within_a_block():
    @numba.njit
    def squares(x):
        return numba_rt.ew_sum("x0 ** 2", (x,))

    @numba.njit
    def squares_numba(x):
        return np.sum(x ** 2)

    rng = np.random.default_rng(8)
    for n in (1, 7, 8, 9, 100, 128):
        x = rng.random(n)
        assert squares(x) == np.sum(x ** 2)  # NumPy's pairwise sum, for one block of 128
    x = rng.random(100_000)
    exact = float(np.sum(x.astype(np.longdouble) ** 2))
    assert abs(squares(x) - exact) <= 1e-14 * exact and abs(squares_numba(x) - exact) <= 1e-13 * exact
    assert squares(x) == _reference_sum(x ** 2, True)


def _shape(xs):
    return np.broadcast_shapes(*(np.shape(x) for x in xs))


@pytest.mark.slow
@pytest.mark.parametrize("expr", EXPRS)
@pytest.mark.parametrize("name, shape, make", OPERANDS, ids=[o[0] for o in OPERANDS])
def test_each_intrinsic_is_numpys_statement(expr, name, shape, make):
    k = KERNELS[expr]
    xs = make()
    with np.errstate(divide="ignore", invalid="ignore"):
        want = _value(expr, xs)
        if not _fast(expr, xs) or want.dtype.kind == "c":
            # run as Numba compiles the statement, which can differ from NumPy: it types
            # Python's numbers as float64 (NumPy keeps float32), divides complex numbers by
            # another formula (last bits); fast complex arithmetic is Numba's lowering for
            # one element too (NumPy's SIMD loops fuse multiply-adds: last bits)
            numba_own = k["plain"](*xs)
            # float32 operands: Numba widens to float64 where NumPy stays in float32, so a
            # difference that cancels (`x1 - 1.5`) differs by float32's rounding of the terms
            atol = 1e-5 if want.dtype == np.float32 else 0.0
            np.testing.assert_allclose(numba_own, want, rtol=1e-6, atol=atol)
            want = numba_own
        if _fast(expr, xs):
            assert name not in NOT_FAST
        got_new = k["new"](*xs)
        assert got_new.dtype == want.dtype and got_new.shape == want.shape
        np.testing.assert_array_equal(got_new, want)
        if want.size:
            s = _reference_sum(want.ravel(), _flat(xs, want.shape) and _fast(expr, xs))
            got = k["total"](*xs)
            assert got == s or (np.isnan(s) and np.isnan(got))
        if want.dtype.kind in "fc":
            d = np.random.default_rng(1).random(want.shape).astype(want.dtype)
            before = d.copy()
            put = d.copy()
            k["put"](put, *xs)
            np.testing.assert_array_equal(put, want)
            acc = k["acc"](d, *xs)
            assert acc is d or np.shares_memory(acc, d) or d.size == 0
            np.testing.assert_array_equal(d, before + want)


def test_fast_statements_are_recognized_at_typing():
    import ast

    from numba.core import types as t
    from numba.core.registry import cpu_target

    tc = cpu_target.typing_context
    tc.refresh()
    a64, a32 = t.Array(t.float64, 2, "A"), t.Array(t.float32, 1, "C")
    tree = ast.parse("x0 * (x1 - 1.5) / x2", mode="eval").body
    assert ew._dtype(tc, tree, (a64, a64, t.float64)) == t.float64
    assert ew._dtype(tc, tree, (a64, a64, t.float64), a64) == t.float64
    assert ew._dtype(tc, tree, (a32, a32, t.float32)) is None  # 1.5 widens float32
    assert ew._dtype(tc, tree, (t.Array(t.int64, 1, "C"),) * 2 + (t.int64,)) is None
    c = t.Array(t.complex128, 1, "C")
    assert ew._dtype(tc, tree, (c, c, t.float64)) is None  # complex division: not written as loops
    assert ew._dtype(tc, ast.parse("x0 * x1", mode="eval").body, (c, c)) == t.complex128
    zero_d = t.Array(t.float64, 0, "C")
    assert ew._dtype(tc, ast.parse("x0 * x1", mode="eval").body, (zero_d, t.float64)) is None  # NumPy: a number
    assert ew._dtype(tc, ast.parse("x0 * x1", mode="eval").body, (t.Array(t.float64, 3, "C"), a64), a64) is None


def _overlaps():
    rng = np.random.default_rng(5)

    def shifted():
        base = rng.random(12)
        return base[1:9], (base[:8], base[3:11], 2.0)

    def transposed():
        m = rng.random((4, 4))
        return m, (m.T, m, 1.5)

    def interleaved():  # views of one buffer that share no element: no copy needed, none wrong
        base = rng.random((3, 4, 2))
        return base[:, :, 0], (base[:, :, 1], base[:, :, 1], 0.5)

    def broadcast_inside():
        base = rng.random((4, 4))
        return base[:3], (base[1:2], base[2], 2.0)

    def reversed_self():
        base = rng.random(7)
        return base, (base[::-1], base, 3.0)

    def itself():
        base = rng.random((2, 3))
        return base, (base, base, 2.0)

    return [("shifted", shifted), ("transposed", transposed), ("interleaved", interleaved),
            ("broadcast inside", broadcast_inside), ("reversed self", reversed_self), ("itself", itself)]


OVERLAPS = _overlaps()


@pytest.mark.slow
@pytest.mark.parametrize("expr", EXPRS)
@pytest.mark.parametrize("name, make", OVERLAPS, ids=[o[0] for o in OVERLAPS])
def test_operands_overlapping_the_written_array(expr, name, make):
    k = KERNELS[expr]
    for kind in ("acc", "put"):
        d, xs = make()
        snapshot = [x.copy() if isinstance(x, np.ndarray) else x for x in xs]
        want = d.copy()
        value = _value(expr, snapshot)  # NumPy: the whole expression first
        if kind == "acc":
            want += value
        else:
            want[...] = value
        k[kind](d, *xs)
        np.testing.assert_array_equal(d, want, err_msg=kind)


def test_shapes_that_do_not_broadcast_raise():
    k = KERNELS["x0 * x1"]
    with pytest.raises(ValueError, match="broadcast"):
        k["new"](np.ones((2, 3)), np.ones((3, 3)), 1.0)
    with pytest.raises(ValueError, match="broadcast"):
        k["total"](np.ones(4), np.ones(5), 1.0)
    with pytest.raises(ValueError, match="broadcast"):
        k["put"](np.zeros((3, 4)), np.ones((2, 4)), np.ones(4), 1.0)
    with pytest.raises(ValueError, match="broadcast"):
        k["acc"](np.zeros((3, 4)), np.ones((3, 4)), np.ones(3), 1.0)


def test_set_of_numbers_and_names_and_scalar_statements():
    @numba.njit
    def fill(d, s):
        numba_rt.ew_set(d, "0.0", ())
        numba_rt.ew_set(d[1:], "x0 * 2.0", (s,))
        return numba_rt.ew_new("x0 * x0 + 1", (s,)), numba_rt.ew_sum("x0 - 1.5", (s,))

    d = np.full((4, 3), 7.0, np.float32)
    got, total = fill(d, 1.25)
    want = np.zeros((4, 3), np.float32)
    want[1:] = 1.25 * 2.0
    np.testing.assert_array_equal(d, want)
    assert got == 1.25 * 1.25 + 1 and total == 1.25 - 1.5

    @numba.njit
    def copy_into(d, a):
        numba_rt.ew_set(d, "x0", (a,))

    d = np.zeros((3, 2))
    a = np.arange(6.0).reshape(2, 3).T  # transposed source
    copy_into(d, a)
    np.testing.assert_array_equal(d, a)


# -- end to end ------------------------------------------------------------------------------


def gm3_like(r, w, dr, p):
    a, b = p
    u = r[:, :, 0]
    v = r[:, :, 1]
    du = dr[:, :, 0]
    dv = dr[:, :, 1]
    du[...] = a * u * u / v + b - u
    dv[...] = a * u * v - b * v / (u + 1.0)
    t = du * dv + u
    return np.sum(dr * w) + np.sum(t * t)


@pytest.mark.slow
def test_gm3_like_program_is_rewritten_and_matches_python_and_finite_differences():
    rng = np.random.default_rng(3)
    r, w = rng.random((5, 4, 2)) + 0.5, rng.random((5, 4, 2))
    p = (1.5, 0.25)

    def grad(numba_):
        dr = np.zeros_like(r)
        zymo.autodiff(Reverse, gm3_like, Active, Duplicated(r, dr), Const(w), Const(np.zeros_like(r)), Const(p),
                      numba=numba_)
        return dr

    # with the primal value: `Reverse` leaves out the sums that only the value needs
    src = numba_source(zymo.generated_code(ReverseWithPrimal, gm3_like, Active, Duplicated(r, np.zeros_like(r)),
                                           Const(w), Const(np.zeros_like(r)), Const(p)))
    for call, fused in (("_rt.ew_set(", "[...] = "), ("_rt.ew_sum(", None), ("_rt.ew_new(", " = ")):
        assert call in src or fused and "_rt.ew_run(" in src and fused in src  # runs: `ew_groups`
    fast, slow = grad(True), grad(False)
    np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)
    fd = fd_grad(lambda rr: gm3_like(rr, w, np.zeros_like(rr), p), [r])[0]
    np.testing.assert_allclose(fast, fd, rtol=1e-6, atol=1e-6)
    assert np.abs(fast).max() > 0.1


def test_division_of_numbers_and_of_array_elements_gives_inf():
    """Real divisions are IEEE divisions, NumPy's, for numbers too (Numba's own division of
    numbers raises `ZeroDivisionError`): a Python primal mostly divides NumPy numbers, an
    array's elements, and the Python backend then gives inf."""
    @numba.njit
    def numbers_first(d, s, t, a):
        return numba_rt.acc_ew(d, "x0 / x1 * x2", (s, t, a))

    @numba.njit
    def elements(s, a):
        return numba_rt.ew_new("x1 / x0", (s, a))

    @numba.njit
    def numbers(s, t):
        return numba_rt.ew_new("x0 / x1", (s, t))

    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(numbers_first(np.zeros(3), 1.0, 0.0, np.array([1.0, -1.0, 0.0])),
                                      np.float64(1.0) / np.float64(0.0) * np.array([1.0, -1.0, 0.0]))
        np.testing.assert_array_equal(elements(0.0, np.array([1.0, -2.0])), np.array([1.0, -2.0]) / 0.0)
        assert numbers(-2.0, 0.0) == -np.inf and np.isnan(numbers(0.0, 0.0)) and numbers(3.0, -0.0) == -np.inf
    np.testing.assert_array_equal(numbers_first(np.zeros(3), 1.0, 4.0, np.arange(3.0)), 0.25 * np.arange(3.0))
    assert numbers(3.0, 4.0) == 0.75


# -- NumPy's functions of one operand; ufuncs with out= ------------------------------------


def test_rewrite_of_functions_and_ufuncs_with_out():
    from zymo.codegen.numba.ew_rewrite import elementwise_statements

    src = ("def f(a, b, c, s):\n"
           "    np.add(a, b, out=c)\n"
           "    np.tanh(c, out=c)\n"
           "    np.multiply(s, np.exp(a), out=c)\n"
           "    np.negative(a, out=b)\n"
           "    np.heaviside(a, b, out=c)\n"          # no element code in Numba: left alone
           "    y = np.add(a, b, out=c)\n"            # its value used: left alone
           "    t = np.sqrt(a * a + s)\n"
           "    return np.sum(np.log(t))\n")
    out = elementwise_statements(src).split("\n")
    assert out[1] == "    _rt.ew_out(c, 'x0 + x1', (a, b), 'np.add(x0, x1, out=d)')"
    assert out[2] == "    _rt.ew_out(c, 'np.tanh(x0)', (c,), 'np.tanh(x0, out=d)')"
    assert out[3] == "    _rt.ew_out(c, 'x0 * np.exp(x1)', (s, a), 'np.multiply(x0, np.exp(x1), out=d)')"
    assert out[4] == "    _rt.ew_out(b, '-x0', (a,), 'np.negative(x0, out=d)')"
    assert out[5:7] == ["    np.heaviside(a, b, out=c)", "    y = np.add(a, b, out=c)"]
    assert out[7] == "    t = _rt.ew_new('np.sqrt(x0 * x0 + x1)', (a, s))"
    assert out[8] == "    return _rt.ew_sum('np.log(x0)', (t,))"


@numba.njit
def _functions(a, b, s):
    return (numba_rt.ew_new("np.tanh(x0) * np.exp(x1 - x2) + np.sqrt(x2) / np.cos(x0)", (a, b, s)),
            numba_rt.ew_sum("np.log(x0) * np.sin(x1)", (a, b)))


@numba.njit
def _functions_plain(a, b, s):
    return np.tanh(a) * np.exp(b - s) + np.sqrt(s) / np.cos(a), np.sum(np.log(a) * np.sin(b))


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["C", "strided", "broadcast"])
def test_functions_of_one_operand_are_numbas_ufuncs_bit_for_bit(layout):
    rng = np.random.default_rng(2)
    a, b = rng.random((6, 4)) + 0.1, rng.random((6, 4))
    if layout == "strided":
        a, b = (rng.random((6, 8)) + 0.1)[:, ::2], rng.random((12, 4))[::2]
    elif layout == "broadcast":
        b = rng.random(4)
    got, total = _functions(a, b, 0.3)
    want, want_total = _functions_plain(a, b, 0.3)
    # Numba's own ufunc loops, element for element, but for libmvec's lanes (`vecmath`)
    assert _ulps(got, want) <= (4 if vecmath.available() else 0)
    np.testing.assert_allclose(got, np.tanh(a) * np.exp(b - 0.3) + np.sqrt(0.3) / np.cos(a), rtol=1e-14)
    np.testing.assert_allclose(total, want_total, rtol=1e-13)


FUNCS = [f for f in __import__("zymo.codegen.numba.ew_rewrite", fromlist=["_"])._EW_FUNCS
         + ("isinf", "isfinite", "signbit")]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_function_of_one_operand_is_numbas_own_element_code(dtype):
    """Each of NumPy's functions of one operand in the intrinsics' expressions (`_EW_FUNCS`,
    and the masks `isinf`, `isfinite`, `signbit`) is Numba's lowering of one element of its
    ufunc loop: bit for bit, signed zeros and NaNs included, Numba's own array expression,
    and NumPy's value to rounding (`sign(-0.0)` is -0.0 in Numba, 0.0 in NumPy: the compiled
    derivative follows Numba, as the `@njit` primal does). Each statement is fast."""
    x = np.array([-2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.0, 1.5, 2.5, np.inf, -np.inf, np.nan, 1e-310, 7.5], dtype)
    lines = "".join(f"    out.append(rt.ew_new('np.{f}(x0) * x0 - x1', (x0, x1)))\n" for f in FUNCS)
    plain = "".join(f"    out.append(np.{f}(x0) * x0 - x1)\n" for f in FUNCS)
    ns = {"rt": numba_rt, "numba": numba, "np": np}
    exec(f"@numba.njit\ndef new(x0, x1):\n    out = []\n{lines}    return out\n"
         f"@numba.njit\ndef plain(x0, x1):\n    out = []\n{plain}    return out\n", ns)
    y = np.linspace(-1.0, 1.0, x.size).astype(dtype)
    with np.errstate(all="ignore"):
        got, own = ns["new"](x, y), ns["plain"](x, y)
        for f, g, o in zip(FUNCS, got, own):
            want = getattr(np, f)(x) * x - y
            assert _fast(f"np.{f}(x0) * x0 - x1", (x, y)), f
            assert g.dtype == o.dtype == want.dtype == dtype, f
            _same_but_lanes(f, g, o)
            np.testing.assert_allclose(g, want, rtol=1e-6 if dtype == np.float32 else 1e-15, atol=0, err_msg=f)


def _ulps(got, want):
    """The largest distance of `got` from `want` in units of `want`'s last place, where
    both are finite (elsewhere they must be the same)."""
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin], want[~fin])
    return float(np.max(np.abs(got[fin] - want[fin]) / np.spacing(np.abs(want[fin])), initial=0))


def _same_but_lanes(f, got, own):
    """`got` is Numba's own `own` bit for bit, or for a function of `vecmath` (glibc's vector
    math) within its 4 units in the last place, with the same NaNs, infinities and signs (a
    NaN's sign, which IEEE leaves open, aside)."""
    if f in vecmath.FUNCS and vecmath.available():
        number = ~np.isnan(own)
        np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(own[number]), err_msg=f)
        assert _ulps(got, own) <= 4, f
    else:
        np.testing.assert_array_equal(np.signbit(got), np.signbit(own), err_msg=f)
        np.testing.assert_array_equal(got, own, err_msg=f)


BINARY = list(__import__("zymo.codegen.numba.ew_rewrite", fromlist=["_"])._EW_BINARY)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_function_of_two_operands_is_numbas_own_element_code(dtype):
    """The same for NumPy's functions of two operands (`_EW_BINARY`: `maximum`, `fmin`,
    `arctan2`, `power`, ...) over every pair of special values (signed zeros, NaN, inf, ties),
    broadcast against each other; `float_power` computes in float64 (not fast for float32
    operands, Numba's own statement then, NumPy's dtype all the same)."""
    v = np.array([-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, np.inf, -np.inf, np.nan], dtype)
    x, y = v[:, None], v[None, :]
    lines = ", ".join(f"rt.ew_new('np.{f}(x0, x1) * x2', (x0, x1, x2))" for f in BINARY)
    plain = ", ".join(f"np.{f}(x0, x1) * x2" for f in BINARY)
    ns = {"rt": numba_rt, "numba": numba, "np": np}
    exec(f"@numba.njit\ndef new(x0, x1, x2):\n    return ({lines})\n"
         f"@numba.njit\ndef plain(x0, x1, x2):\n    return ({plain})\n", ns)
    z = np.full((v.size, v.size), 1.5, dtype)
    with np.errstate(all="ignore"):
        got, own = ns["new"](x, y, z), ns["plain"](x, y, z)
        for f, g, o in zip(BINARY, got, own):
            want = getattr(np, f)(x, y) * z
            assert _fast(f"np.{f}(x0, x1) * x2", (x, y, z)) == (want.dtype == dtype), f
            assert g.dtype == o.dtype == want.dtype and g.shape == want.shape, f
            _same_but_lanes(f, g, o)
            np.testing.assert_allclose(g, want, rtol=4e-7 if dtype == np.float32 else 1e-15, atol=0, err_msg=f)


@numba.njit
def _outs(a, b, c):
    numba_rt.ew_out(c, "x0 + x1", (a, b), "np.add(x0, x1, out=d)")
    numba_rt.ew_out(c, "np.tanh(x0)", (c,), "np.tanh(x0, out=d)")


@pytest.mark.slow
@pytest.mark.parametrize("case", ["C", "bias row", "overlapping output", "integers (the ufunc itself)"])
def test_ufuncs_with_out_match_numpy(case):
    rng = np.random.default_rng(4)
    a, b, c = rng.random((5, 3)), rng.random((5, 3)), np.zeros((5, 3))
    if case == "bias row":
        b = rng.random(3)
    elif case == "overlapping output":
        base = rng.random((6, 3))
        a, c = base[:5], base[1:]  # NumPy reads `a` as it was
    elif case.startswith("integers"):
        a, b, c = np.arange(15).reshape(5, 3), np.arange(3), np.zeros((5, 3))
    want = c.copy()
    np.add(a.copy(), b, out=want)
    np.tanh(want, out=want)
    _outs(a, b, c)
    np.testing.assert_allclose(c, want, rtol=1e-15)


def test_read_only_destinations_are_refused_not_written():
    def f(x, y):
        y[...] = x * x
        return np.sum(y)

    x, y = np.arange(3.0), np.zeros(3)
    y.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        zymo.autodiff(Reverse, f, Active, Duplicated(x, np.zeros(3)), Const(y), numba=False)
    with pytest.raises(Exception):  # noqa: B017  (Numba's own error: its class varies between versions)
        zymo.autodiff(Reverse, f, Active, Duplicated(x, np.zeros(3)), Const(y), numba=True)
    np.testing.assert_array_equal(y, np.zeros(3))


def test_errors_free_what_the_statement_allocated():
    from numba.core.runtime import _nrt_python, rtsys

    was_enabled = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    try:
        _check_no_leak(rtsys)
    finally:
        if not was_enabled:
            _nrt_python.memsys_disable_stats()


def _check_no_leak(rtsys):
    @numba.njit
    def bad_shape(a, b):
        return numba_rt.ew_new("x0 * x1", (a, b))

    @numba.njit
    def zero_divisor(d, a, s, t):
        numba_rt.acc_ew(d, "x0 * (x1 / x2)", (a[::-1], s, t))  # `a` overlaps `d`: copied

    # the same statements as Numba compiles them: on an error Numba keeps its wrappers of the
    # array arguments (its own leak); the intrinsics must not keep more
    @numba.njit
    def bad_shape_numba(a, b):
        return a * b

    @numba.njit
    def zero_divisor_numba(d, a, s, t):
        d += a[::-1] * (s / t)

    def kept(call):
        with pytest.raises((ValueError, ZeroDivisionError)):
            call()  # compiled, first
        before = rtsys.get_allocation_stats()
        for _ in range(5):
            with pytest.raises((ValueError, ZeroDivisionError)):
                call()
        after = rtsys.get_allocation_stats()
        return (after.alloc - before.alloc) - (after.free - before.free)

    a = np.ones(100)
    assert kept(lambda: bad_shape(a, np.ones(3))) <= kept(lambda: bad_shape_numba(a, np.ones(3)))
    assert kept(lambda: zero_divisor_numba(a[1:], a[:-1], 1.0, 0.0)) >= 0  # Numba's division raises
    # the intrinsic divides as IEEE (no error): the copy of the overlapping operand is freed
    d = np.ones(100)
    zero_divisor(d[1:], d[:-1], 1.0, 0.0)
    before = rtsys.get_allocation_stats()
    d = np.ones(100)
    zero_divisor(d[1:], d[:-1], 1.0, 0.0)
    after = rtsys.get_allocation_stats()
    assert after.alloc - before.alloc == after.free - before.free > 0  # the copy among them, all freed
    assert d[0] == 1.0 and np.all(d[1:] == np.inf)


def test_rewrite_leaves_lines_with_several_statements():
    from zymo.codegen.numba.ew_rewrite import elementwise_statements

    src = "def f(d, a, b):\n    d += a * b; d += a\n    t = a * b  # a comment\n    return t\n"
    out = elementwise_statements(src).split("\n")
    assert out[1] == "    d += a * b; d += a"
    assert out[2] == "    t = _rt.ew_new('x0 * x1', (a, b))  # a comment"
    # a sum inside an accumulation that is not elementwise itself
    assert "d += _rt.ew_sum('x0 * x1', (a, b))" in elementwise_statements(
        "def f(d, a, b):\n    for i in range(3):\n        d += np.sum(a * b)\n")


def test_a_fallback_is_kept_per_statement_not_per_expression_text():
    """A statement that is not fast runs as written, compiled once per source. One expression
    text can come with more operands than it reads (here a third, unused): the function kept
    for the three-operand statement must not serve the two-operand one (it unpacked a third
    operand that is not there: `tuple index out of range`)."""
    @numba.njit
    def three(a, m, c):
        return numba_rt.ew_new("x0 * x1", (a, m, c))

    @numba.njit
    def two(a, m):
        return numba_rt.ew_new("x0 * x1", (a, m))

    a = np.random.default_rng(3).random((2, 3))
    m = a > 0.5  # a bool operand: not fast, the statement as written
    np.testing.assert_array_equal(three(a, m, a), a * m)
    np.testing.assert_array_equal(two(a, m), a * m)
    assert np.any(a * m != 0)


def test_tangent_shapes_are_rewritten_into_the_elementwise_expressions():
    """Forward mode writes `_rt.as_shape(e, y)` around each tangent of an array, and forward
    over reverse nests it; under Numba each nested one was an array expression of its own (a
    compiled kernel). `as_shape`/`as_tangent` of an elementwise `e` and a name `y` are part
    of an elementwise expression now; a statement `t = _rt.as_shape(e, y)` is `ew_like`, as
    `as_tangent` (the same under Numba); `np.sum(e, axis=None, keepdims=False)` is `ew_sum`."""
    from zymo.codegen.numba.ew_rewrite import elementwise_statements

    src = ("def f(a, b, y, z, s, g):\n"
           "    t = _rt.as_shape(a * b, y)\n"
           "    u = z + _rt.as_shape(_rt.as_shape(a * s, y) - _rt.as_tangent(b, y), z)\n"
           "    v = _rt.as_shape(g(a) * b, y)\n"      # a call that is not elementwise: left alone
           "    w = np.sum(u * a, axis=None, keepdims=False)\n"
           "    return np.sum(u, axis=0, keepdims=False) + w\n")
    out = elementwise_statements(src).split("\n")
    assert out[1] == "    t = _rt.ew_like(y, 'x0 * x1', (a, b))"
    assert out[2] == ("    u = _rt.ew_new('x0 + _rt.as_shape(_rt.as_shape(x1 * x2, x3) - _rt.as_tangent(x4, x3), x0)', "
                      "(z, a, s, y, b))")
    assert out[3] == "    v = _rt.as_shape(g(a) * b, y)"
    assert out[4] == "    w = _rt.ew_sum('x0 * x1', (u, a))"
    assert out[5] == "    return np.sum(u, axis=0, keepdims=False) + w"


_SHAPED = "x0 + _rt.as_shape(_rt.as_shape(x1 * x2, x3) - _rt.as_tangent(x4, x3), x0)"


@numba.njit
def _shaped_new(z, a, s, y, b):
    return numba_rt.ew_new(_SHAPED, (z, a, s, y, b))


@numba.njit
def _shaped_like(z, a, s, y, b):
    return numba_rt.ew_like(z, "_rt.as_shape(x0 * x1, x2)", (a, s, y))


def _shaped_numpy(z, a, s, y, b):
    from zymo import runtime as rt

    return z + rt.as_shape(rt.as_shape(a * s, y) - rt.as_tangent(b, y), z)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["one shape", "broadcast up to y", "strided", "float32 y (not fast)"])
def test_tangent_shapes_inside_elementwise_expressions_are_numpys(case):
    """`as_shape(e, y)` inside an intrinsic's expression: `e` cast to `y`'s dtype, `y`'s shape
    taking part in the broadcast: the value and dtype of the helpers themselves, bit for bit.
    Operands of lower rank than `y` broadcast up to it; a float32 `y` under float64 operands
    is not fast (the statement as written: the helpers' cast)."""
    rng = np.random.default_rng(5)
    z, y = rng.random((3, 4)), rng.random((3, 4))
    a, s, b = rng.random((3, 4)), 1.5, rng.random((3, 4))
    if case == "broadcast up to y":
        a, b = rng.random(4), rng.random((1, 4))
    elif case == "strided":
        z, a = rng.random((3, 8))[:, ::2], np.asfortranarray(rng.random((3, 4)))
    elif case == "float32 y (not fast)":
        y = y.astype(np.float32)
    xs = (z, a, s, y, b)
    want = _shaped_numpy(*xs)
    got = _shaped_new(*xs)
    assert got.dtype == want.dtype and got.shape == want.shape == (3, 4)
    np.testing.assert_array_equal(got, want)
    assert np.any(got != z)
    from zymo import runtime as rt

    like = _shaped_like(*xs)
    want_like = rt.as_tangent(rt.as_shape(a * s, y), z)
    assert like.dtype == want_like.dtype and like.shape == want_like.shape
    np.testing.assert_array_equal(like, want_like)


def test_a_tangent_shape_of_a_number_is_refused():
    """`as_shape(e, y)` takes `y`'s shape: a number `y` has none (the Python helper makes a 0-d
    array); the intrinsic refuses it at typing rather than give a number."""
    @numba.njit
    def f(a, y):
        return numba_rt.ew_new("x0 + _rt.as_shape(x0, x1)", (a, y))

    with pytest.raises(numba.core.errors.TypingError, match="as_shape"):
        f(np.ones(3), 2.0)


def test_masks_are_rewritten_into_the_elementwise_expressions():
    """The adjoints of `maximum`, `clip`, `where`, `fmax` multiply by masks: a comparison,
    `np.logical_not`, `|` of `np.isnan`, `_rt.clip_inside`. Each was an array expression of
    its own (a compiled kernel) or made a statement not fast; they are part of the
    elementwise expressions now, as are the primal's ufuncs of two operands (`np.maximum`,
    also with `out=`). A statement whose value is a mask (a bool array) is left to Numba."""
    from zymo.codegen.numba.ew_rewrite import elementwise_statements

    src = ("def f(g, x, y, t, m, lo, d, a, b):\n"
           "    u = g * (x > y) + 0.5 * g * (x == y)\n"
           "    v = g * ((x < y) | np.isnan(y))\n"
           "    w = np.where(t, a * b, b)\n"
           "    d += _rt.unbroadcast(g * np.logical_not(t), d)\n"
           "    dm = g * _rt.clip_inside(m, lo, 0.8)\n"
           "    t = b > 0.5\n"
           "    s = np.sum(x > 0)\n"
           "    m = np.maximum(x, y) * np.arctan(g)\n"
           "    np.fmin(x, a * b, out=d)\n"
           "    return u\n")
    out = elementwise_statements(src).split("\n")
    assert out[1] == "    u = _rt.ew_new('x0 * (x1 > x2) + 0.5 * x0 * (x1 == x2)', (g, x, y))"
    assert out[2] == "    v = _rt.ew_new('x0 * ((x1 < x2) | np.isnan(x2))', (g, x, y))"
    assert out[3] == "    w = _rt.ew_new('np.where(x0, x1 * x2, x2)', (t, a, b))"
    assert out[4] == "    d = _rt.acc_unbroadcast(d, d, 'x0 * np.logical_not(x1)', (g, t))"
    assert out[5] == "    dm = _rt.ew_new('x0 * x1', (g, _rt.clip_inside(m, lo, 0.8)))"
    assert out[6:8] == ["    t = b > 0.5", "    s = np.sum(x > 0)"]
    assert out[8] == "    m = _rt.ew_new('np.maximum(x0, x1) * np.arctan(x2)', (x, y, g))"
    assert out[9] == "    _rt.ew_out(d, 'np.fmin(x0, x1 * x2)', (x, a, b), 'np.fmin(x0, x1 * x2, out=d)')"


MASKS = ["x0 * (x1 > x2) + 0.5 * x0 * (x1 == x2)", "x0 * ((x1 < x2) | np.isnan(x2))",
         "np.where(x3, x0 * x1, x1)", "x0 * np.logical_not(x3) - x1 * (x3 & (x1 != x2))",
         "x0 * (x1 > 0.3)", "np.where(x1 >= -0.5, x0, 0.0)", "x0 / (x1 <= x2)"]


def _mask_kernels():
    out = {}
    for expr in MASKS:
        ns = {"rt": numba_rt, "numba": numba, "np": np}
        exec(f"@numba.njit\ndef new(x0, x1, x2, x3):\n    return rt.ew_new({expr!r}, (x0, x1, x2, x3))\n"
             f"@numba.njit\ndef plain(x0, x1, x2, x3):\n    return {expr}\n"
             f"@numba.njit\ndef acc(d, x0, x1, x2, x3):\n    return rt.acc_ew(d, {expr!r}, (x0, x1, x2, x3))\n"
             f"@numba.njit\ndef total(x0, x1, x2, x3):\n    return rt.ew_sum({expr!r}, (x0, x1, x2, x3))\n", ns)
        out[expr] = ns
    return out


MASK_KERNELS = _mask_kernels()


@pytest.mark.slow
@pytest.mark.parametrize("case", ["float64", "float32", "broadcast", "strided"])
def test_masks_inside_elementwise_expressions_are_numpys(case):
    """Comparisons, `|`, `&`, `np.logical_not`, `np.isnan` and `np.where` inside an
    intrinsic's expression give NumPy's value and dtype bit for bit: ties, NaN, -0.0, bool
    operands (a bool times a float is the float's dtype), a division by a mask (inf). With
    float32 arrays, a number written out is a float64 as Numba types it, as in the `@njit`
    primal: a comparison is made in float64 (`float32(0.3) > 0.3` is True, where NumPy 2
    says False), and arithmetic or `np.where` with it widens (not fast: Numba's own
    statement). Against Numba's own statement there."""
    x1 = np.array([[0.3, -0.0, np.nan, 2.0], [1.0, 0.3, -0.5, -1.0], [0.0, 4.0, 0.25, np.inf]])
    x2 = np.array([[0.3, 0.0, 1.0, np.nan], [1.0, 2.0, -0.5, 0.0], [-0.0, 3.0, 0.5, np.inf]])
    x0 = np.arange(1.0, 13.0).reshape(3, 4) * np.array([1.0, -1.0, 1.0, 1.0])
    x3 = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, True]])
    if case == "float32":
        x0, x1, x2 = (v.astype(np.float32) for v in (x0, x1, x2))
    elif case == "broadcast":
        x0, x3 = x0[:1], x3[2]  # extent 1, and a bool of lower rank
    elif case == "strided":
        x1 = np.asfortranarray(x1)
        x3 = np.repeat(x3, 2, axis=1)[:, ::2]
    xs = (x0, x1, x2, x3)
    for expr in MASKS:
        k = MASK_KERNELS[expr]
        widens = case == "float32" and ("0.5 * x0" in expr or "0.0" in expr)
        assert _fast(expr, xs) != widens, expr
        with np.errstate(divide="ignore", invalid="ignore"):
            want = eval(expr, {"np": np}, {f"x{i}": x for i, x in enumerate(xs)})
            if case == "float32":
                want = k["plain"](*xs)
            got = k["new"](*xs)
            assert got.dtype == want.dtype and got.shape == want.shape, expr
            np.testing.assert_array_equal(got, want, err_msg=expr)
            d = np.ones(want.shape, want.dtype)
            np.testing.assert_array_equal(k["acc"](d, *xs), 1 + want, err_msg=expr)
            total = k["total"](*xs)
        if not widens:
            assert total == _reference_sum(want.ravel(), _flat(xs, want.shape)) or np.isnan(total), expr
    above = MASK_KERNELS["x0 * (x1 > 0.3)"]["new"](*xs)
    assert above[0, 0] == (x0[0, 0] if case == "float32" else 0)  # float32(0.3) > 0.3 as Numba compares
    assert np.any(above != x0) and np.any(above != 0)


def test_masks_are_typed_as_numpy_or_left_to_numba():
    """What the masks' typing takes: a bool in arithmetic only with a float or complex (it
    takes its dtype); `|`, `&` and `np.logical_not` of bools only; no negation, square or
    function of a bool; comparisons of real numbers, unified as Numba unifies them. Anything
    else is not fast (the statement as written, by Numba), never a guess."""
    import ast

    from numba.core import types as t
    from numba.core.registry import cpu_target

    tc = cpu_target.typing_context
    tc.refresh()
    f32, f64, b = t.Array(t.float32, 1, "C"), t.Array(t.float64, 1, "C"), t.Array(t.boolean, 1, "C")
    c128 = t.Array(t.complex128, 1, "C")

    def dtype(expr, *xs):
        return ew._dtype(tc, ast.parse(expr, mode="eval").body, xs)

    assert dtype("x0 * x1", f32, b) == t.float32
    assert dtype("x0 * (x1 > 2)", f32, f32) == t.float32
    assert dtype("x0 * (x1 > 0.5)", f32, f32) == t.float32  # compared in float64, as Numba does
    assert dtype("x0 * (x1 > x2)", f32, f32, t.float64) is None  # a float64 number widens float32
    assert dtype("np.where(x1, x0, 0.0)", f32, b) is None  # so does a float64 value (Numba's np.where)
    assert dtype("x0 * (x1 > x2)", c128, c128, c128) is None  # comparisons of real numbers only
    assert dtype("x0 * (x1 == x1)", c128, c128) is None
    assert dtype("x0 * (x2 == 1)", c128, b, t.float64) == t.complex128
    for bad in ("x1 + x1", "x0 * -x1", "x0 * x1 ** 2", "x0 * np.exp(x1)", "x0 * np.logical_not(x0)",
                "x0 * (x0 | x1)", "np.where(x0, x0, x0)", "x0 * np.isnan(x1)"):
        assert dtype(bad, f64, b) is None, bad
    assert dtype("x1 & (x0 > 1)", f64, b) is None  # a mask: not a float statement
    assert dtype("x0 * (x1 | (x0 > 1))", f64, b) == t.float64


def test_statements_of_numbers_the_element_code_does_not_take_run_as_written():
    """Outside loops a statement of numbers only is an intrinsic too (`(i & 1) + k`, integer
    bits; `-(a > b)`, a negated bool, which the element code refuses): each gives Python's
    value as Numba computes it, never a typing error."""
    @numba.njit
    def f(i, k, a, b, x):
        d = 1.0
        d = numba_rt.acc_ew(d, "(x0 & 1) * 0.5", (i,))
        e = 2.0
        e = numba_rt.acc_unbroadcast(e, e, "-(x0 > x1)", (a, b))
        return (numba_rt.ew_new("(x0 & 1) + x1", (i, k)), numba_rt.ew_new("(x0 | x1) * 2", (i, k)),
                numba_rt.ew_new("-(x0 > x1)", (b, a)), d, e, numba_rt.ew_sum("x0 * (x1 & 1)", (x, i)))

    got = f(5, 2, 1.0, 2.0, np.arange(3.0))
    assert got == ((5 & 1) + 2, (5 | 2) * 2, -(2.0 > 1.0), 1.5, 2.0, 3.0)


POWERS = ["x0 ** x1", "x0 ** x2 * x1", "x0 ** 3 - x1", "x0 ** 0.5", "x3 ** x0", "x0 ** -1.5", "(x0 - x1) ** x2"]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_powers_are_numbas_own_array_expression(dtype):
    """`a ** b` other than a square is Numba's power of two numbers, which its array
    expressions use too (`int_power` for an int exponent, `pow` otherwise): bit for bit over
    every pair of special values, each statement fast. `0.0 ** -2` raises ZeroDivisionError
    there, as the `@njit` primal does (NumPy gives inf)."""
    v = np.array([-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, np.inf, -np.inf, np.nan, 1e-310], dtype)
    x, y = (a.copy() for a in np.broadcast_arrays(v[:, None], v[None, :]))
    lines = ", ".join(f"rt.ew_new('{e}', (x0, x1, x2, x3))" for e in POWERS)
    plain = ", ".join(POWERS)
    ns = {"rt": numba_rt, "numba": numba, "np": np}
    exec(f"@numba.njit\ndef new(x0, x1, x2, x3):\n    return ({lines})\n"
         f"@numba.njit\ndef plain(x0, x1, x2, x3):\n    return ({plain})\n", ns)
    with np.errstate(all="ignore"):
        for e, g, o in zip(POWERS, ns["new"](x, y, 3, 1.5), ns["plain"](x, y, 3, 1.5)):
            assert g.dtype == o.dtype and _fast(e, (x, y, 3, 1.5)) == (dtype == np.float64), e
            np.testing.assert_array_equal(g, o, err_msg=e)
            np.testing.assert_array_equal(np.signbit(g), np.signbit(o), err_msg=e)
            ok = np.isfinite(o)
            np.testing.assert_allclose(g[ok], eval(e, {"x0": x, "x1": y, "x2": 3, "x3": 1.5})[ok],
                                       rtol=1e-6 if dtype == np.float32 else 1e-14, err_msg=e)
    exec("@numba.njit\ndef minus_two(x0):\n    return rt.ew_new('x0 ** -2', (x0,))\n"
         "@numba.njit\ndef minus_two_plain(x0):\n    return x0 ** -2\n", ns)
    for f in (ns["minus_two"], ns["minus_two_plain"]):
        with pytest.raises(ZeroDivisionError):
            f(v)


def powers(x, p):
    y = x ** 3 - 0.5 * x ** 2.5
    return np.sum(y * x ** p)


@pytest.mark.slow
def test_gradients_of_powers_compile_into_the_intrinsics():
    """Both modes under Numba: no power is left outside the intrinsics' expressions (each one
    was an array expression, a kernel compiled on its own). Against the Python backend and
    central differences."""
    from numba_helpers import numba_sources

    x, p = np.linspace(0.3, 1.7, 7), 1.5
    for mode in (Reverse, zymo.Forward):
        with numba_sources() as sources:
            g = zymo.gradient(mode, powers, x, p, numba=True)[0]
        left = [line for s in sources for line in s.split("\n") if "**" in line.split("_rt.")[0]]
        assert sources and not left, left
        np.testing.assert_allclose(g, zymo.gradient(mode, powers, x, p, numba=False)[0], rtol=1e-12)
        np.testing.assert_allclose(g, fd_grad(lambda v: powers(v, p), [x])[0], rtol=1e-6)
        assert np.abs(g).max() > 0.1


@numba.njit
def _nested_set(d, a, b):
    numba_rt.ew_set(d, "x0 * x1 - 0.5", (a, b))
    return numba_rt.ew_sum("x0 * x1", (a, b))


@pytest.mark.parametrize("packed", [False, True])
def test_nested_loops_over_steps_of_whole_items_and_not(packed):
    """Strided and broadcast statements index their innermost loop by items (`_nested`), and
    step by bytes where a step is not whole items (a field of a packed record array, 12 bytes
    over float64s) as destination and as operand: the same values, bit for bit."""
    rng = np.random.default_rng(9)
    rec = np.zeros((4, 9), dtype=np.dtype([("a", "f8"), ("b", "f4")], align=not packed))
    rec["a"] = rng.random((4, 9))
    a, b = rec["a"][:, ::3], rng.random(3)
    assert (a.strides[1] % 8 == 0) != packed
    d = np.zeros((8, 3))[::2]
    want_d, want_s = a * b - 0.5, _reference_sum((a * b).ravel(), False)
    s = _nested_set(d, a, b)
    np.testing.assert_array_equal(d, want_d)
    assert s == want_s
    d2 = rec["a"][:, 1::3]
    _nested_set(d2, a.copy(), b)
    np.testing.assert_array_equal(rec["a"][:, 1::3], want_d)


def test_rows_of_matrices_of_known_rank_are_views_to_write():
    """`out[i]` of a matrix (`ndims`: the transform's ranks) is a view: a ufunc's `out=` and an
    assignment into it become intrinsics in loops; of an array of unknown rank it stays."""
    from zymo.codegen.numba.ew_rewrite import elementwise_statements

    src = ("def f(X, out, b, m):\n    for i in range(n):\n        np.exp(X[i] - m, out=out[i])\n"
           "        out[i] = b[i]\n")
    ranked = elementwise_statements(src, arrays=frozenset({"X", "out", "b"}), ndims={"X": 2, "out": 2, "b": 2})
    assert "_rt.ew_out(out[i], 'np.exp(x0 - x1)', (X[i], m), 'np.exp(x0 - x1, out=d)')" in ranked
    assert "_rt.ew_set(out[i], 'x0', (b[i],))" in ranked
    unknown = elementwise_statements(src, arrays=frozenset({"X", "out", "b"}))
    assert "np.exp(X[i] - m, out=out[i])" in unknown and "out[i] = b[i]" in unknown
