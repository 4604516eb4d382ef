"""Adjoint accumulations compiled in place under Numba (`numba.ew_rewrite.elementwise_statements`,
`numba_elementwise.acc_ew` and `numba_accumulate`'s outer and matrix-vector product
adjoints): the source rewrite touches only what it should, each kernel gives NumPy's
`d += e` (broadcasting, overlapping operands, dtypes, zero divisors), and gradients
through them agree with the Python backend, finite differences and forward mode.
"""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

from helpers import fd_grad

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.codegen.numba import twins as numba_rt
from zymo.codegen.numba.ew_rewrite import elementwise_statements
from zymo.codegen.numba.rewrites import numba_source
from zymo.testing import check_grad


@pytest.fixture(scope="module", autouse=True)
def private_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZYMO_CACHE_DIR", str(tmp_path_factory.mktemp("zymo_cache")))
        yield


# -- the source rewrite ------------------------------------------------------------------


def test_rewrite_of_elementwise_statements():
    src = ("def f(d, e, g, a, b, s, n):\n"
           "    d += s * a\n"                      # anywhere
           "    t = a * (b - 1.5) / s\n"           # a new array, outside loops
           "    d[...] = 0.0\n"
           "    u = a\n"                            # a name: nothing to compute
           "    for i in range(n):\n"
           "        d += s * a\n"
           "        d += -b\n"
           "        e[i] += s * a\n"               # a subscript target: an element, left alone
           "        d += a\n"
           "        d += np.heaviside(a, b)\n"     # a call of two operands Numba lowers for no number
           "        d += a ** 3\n"                 # a power: Numba's of two numbers, per element
           "        d += a * (b - 1.5) / s\n"
           "        q = a * b\n"                   # in a loop: left to Numba
           "        d[...] = q\n"
           "        while s > 0:\n"
           "            g += 2 * a * (a - 1.5)\n"
           "            s -= 1\n"
           "    return np.sum(d * a) + np.sum(d)\n")
    out = elementwise_statements(src).split("\n")
    assert out[1] == "    d = _rt.acc_ew(d, 'x0 * x1', (s, a))"
    assert out[2] == "    t = _rt.ew_new('x0 * (x1 - 1.5) / x2', (a, b, s))"
    assert out[3] == "    _rt.ew_set(d, '0.0', ())"
    assert out[4] == "    u = a"
    assert out[6] == "        d = _rt.acc_ew(d, 'x0 * x1', (s, a))"
    assert out[7] == "        d = _rt.acc_ew(d, '-x0', (b,))"
    assert out[8] == "        e[i] += s * a"
    assert out[9] == "        d += a"  # a name, in a loop: left to Numba
    assert out[10:12] == ["        d += np.heaviside(a, b)", "        d = _rt.acc_ew(d, 'x0 ** 3', (a,))"]
    assert out[12] == "        d = _rt.acc_ew(d, 'x0 * (x1 - 1.5) / x2', (a, b, s))"
    assert out[13] == "        q = a * b"
    assert out[14] == "        _rt.ew_set(d, 'x0', (q,))"
    assert out[16] == "            g = _rt.acc_ew(g, '2 * x0 * (x0 - 1.5)', (a,))"
    assert out[18] == "    return _rt.ew_sum('x0 * x1', (d, a)) + _rt.ew_sum('x0', (d,))"
    # the names the transform knows to hold floats are left alone
    floats = elementwise_statements(src, frozenset({"d", "s"}))
    assert "    for i in range(n):\n        d += s * a\n" in floats
    assert "    t = _rt.ew_new(" in floats  # `a`, `b` are not floats
    assert "    w = s * s\n" in elementwise_statements("def f(s):\n    w = s * s\n", frozenset({"s"}))
    # both rewrites: product adjoints first
    both = numba_source("def f(d, g, a, b):\n    for i in range(3):\n        d += _rt.dot_vjp_b(g, a, b)\n")
    assert "d = _rt.acc_dot_vjp_b(d, g, a, b)" in both
    # indexed names are operands (evaluated once, before the statement, as in the original)
    src = ("def f(d, xc, x, m, r, s, i, k):\n"
           "    np.subtract(x[i], m[k], out=xc)\n"
           "    d += s * r[:, :, 0] - r[:, :, 0]\n"
           "    d += x[len(m)]\n"                      # a call in the index: left alone
           "    d[...] = np.exp(x[i, -1:])\n"
           "    for j in range(k):\n"
           "        t = np.exp(d - s)\n"              # in a loop, a function: a new array
           "        u = d - s\n")                    # in a loop, arithmetic only: left to Numba
    out = elementwise_statements(src).split("\n")
    assert out[6] == "        t = _rt.ew_new('np.exp(x0 - x1)', (d, s))"
    assert out[7] == "        u = d - s"
    assert out[1] == "    _rt.ew_out(xc, 'x0 - x1', (x[i], m[k]), 'np.subtract(x0, x1, out=d)')"
    assert out[2] == "    d = _rt.acc_ew(d, 'x0 * x1 - x1', (s, r[:, :, 0]))"
    assert out[3] == "    d += x[len(m)]"
    assert out[4] == "    _rt.ew_set(d, 'np.exp(x0)', (x[i, -1:],))"
    # sums over broadcast dimensions, into arrays and floats, in loops too
    src = ("def f(d, s, g, x, y, n):\n"
           "    d += _rt.unbroadcast(g, d)\n"
           "    for i in range(n):\n"
           "        s += _rt.unbroadcast(-g * y, x)\n"
           "        d += _rt.unbroadcast(np.dot(g, y), d)\n")  # not elementwise: left alone
    out = elementwise_statements(src, frozenset({"s"})).split("\n")
    assert out[1] == "    d = _rt.acc_unbroadcast(d, d, 'x0', (g,))"
    assert out[3] == "        s = _rt.acc_unbroadcast(s, x, '-x0 * x1', (g, y))"
    assert out[4] == "        d += _rt.unbroadcast(np.dot(g, y), d)"


# -- the kernel ----------------------------------------------------------------------------


@numba.njit
def _acc1(d, a):
    return numba_rt.acc_ew(d, "-x0", (a,))


@numba.njit
def _acc2(d, s, a):
    return numba_rt.acc_ew(d, "x0 * x1", (s, a))


@numba.njit
def _acc3(d, a, b, s):
    return numba_rt.acc_ew(d, "x0 * (x1 - 1.5) * x2 + 2 * x0", (a, b, s))


@numba.njit
def _div(d, a, b):
    return numba_rt.acc_ew(d, "x0 / x1 - x0", (a, b))


def _numpy(d, expr, xs):
    env = {f"x{i}": x for i, x in enumerate(xs)}
    d += eval(expr, {}, env)
    return d


KERNELS = {"-x0": _acc1, "x0 * x1": _acc2, "x0 * (x1 - 1.5) * x2 + 2 * x0": _acc3, "x0 / x1 - x0": _div}


def _cases():
    rng = np.random.default_rng(7)
    r = rng.standard_normal
    yield "1-d", lambda: (r(10), "x0 * x1", (0.7, r(10)))
    yield "1-d, array first", lambda: (r(10), "x0 * x1", (r(10), 3))
    yield "neg", lambda: (r(10), "-x0", (r(10),))
    yield "three operands", lambda: (r((3, 4)), "x0 * (x1 - 1.5) * x2 + 2 * x0", (r((3, 4)), r((3, 4)), 0.3))
    yield "3-d", lambda: (r((2, 3, 4)), "x0 * x1", (-1.25, r((2, 3, 4))))
    yield "broadcast row", lambda: (r((3, 4)), "x0 * x1", (2.0, r((1, 4))))
    yield "broadcast column", lambda: (r((3, 4)), "x0 * (x1 - 1.5) * x2 + 2 * x0", (r((3, 1)), r((1, 4)), 4.0))
    yield "complex", lambda: (r(5) + 1j * r(5), "x0 * x1", (0.5 - 2j, r(5) + 1j * r(5)))
    yield "float32 with a float64 number", lambda: (r(6).astype(np.float32), "x0 * x1",
                                                    (np.float64(0.1), r(6).astype(np.float32)))
    yield "strided operand", lambda: (r(5), "x0 * x1", (2.0, r(10)[::2]))
    yield "empty", lambda: (np.zeros((0, 3)), "x0 * x1", (2.0, np.zeros((0, 3))))
    # a division is IEEE division, as NumPy's (a zero divisor gives inf, not an exception)
    yield "zero divisor array", lambda: (r(4), "x0 / x1 - x0", (r(4), np.array([1.0, 0.0, -0.0, 2.0])))
    yield "zero divisor number", lambda: (r(4), "x0 / x1 - x0", (r(4), 0.0))
    yield "zero factor", lambda: (r(4), "x0 * x1", (r(4), 0.0))

    def itself():
        d = r(6)
        return d, "x0 * x1", (3.0, d)
    yield "the accumulator itself", itself

    def above():
        base = r(12)
        return base[:8], "x0 * x1", (2.0, base[3:11])  # the operand starts above d
    yield "overlap above", above

    def below():
        base = r(12)
        return base[3:11], "-x0", (base[:8],)
    yield "overlap below", below

    def rows():
        base = r((6, 4))
        return base[1:5], "x0 * (x1 - 1.5) * x2 + 2 * x0", (base[:4], base[2:6], 1.5)  # two operands, one each side
    yield "rows on both sides", rows

    def rows_below():
        base = r((6, 4))
        return base[2:6], "x0 * (x1 - 1.5) * x2 + 2 * x0", (base[:4], base[1:5], 1.5)
    yield "rows below", rows_below

    def rows_division():
        base = r((6, 4))
        return base[1:5], "x0 / x1 - x0", (base[:4], base[2:6])  # both sides, with a division
    yield "rows on both sides, division", rows_division

    def broadcast_inside():
        base = r((4, 4))
        return base[:3], "x0 * x1", (2.0, base[1:2])  # row 1 of d, broadcast over d's rows
    yield "broadcast operand inside the accumulator", broadcast_inside

    def misaligned():
        raw = np.zeros(8 * 13 + 4, np.uint8)
        base = raw[4:4 + 8 * 12].view(np.float64)
        base[:] = r(12)
        other = raw[:8 * 12].view(np.float64)  # shifted by half an element
        return base[:8].copy(), "x0 * x1", (2.0, other[:8])
    yield "unrelated memory", misaligned


CASES = list(_cases())


@pytest.mark.slow
@pytest.mark.parametrize("name, make", CASES, ids=[c[0] for c in CASES])
def test_acc_ew_is_numpys_in_place_add(name, make):
    d, expr, xs = make()
    want_d = d.copy()
    xs_np = [x.copy() if isinstance(x, np.ndarray) and np.shares_memory(x, d) else x for x in xs]
    with np.errstate(divide="ignore", invalid="ignore"):
        want = _numpy(want_d, expr, xs_np)
    got = KERNELS[expr](d, *xs)
    assert np.shares_memory(got, d) or d.size == 0
    np.testing.assert_array_equal(d, want)  # bit for bit: the same operations in the same order
    assert d.size == 0 or np.any(want != make()[0]) or name == "zero factor"


def test_acc_ew_raises_numpys_error_for_shapes_that_do_not_broadcast():
    d = np.zeros((3, 4))
    with pytest.raises(ValueError, match="broadcast"):
        _acc2(d, 2.0, np.ones((2, 4)))
    with pytest.raises(ValueError):
        d += 2.0 * np.ones((2, 4))


@pytest.mark.slow
def test_acc_ew_of_a_float_accumulator_returns_the_sum():
    assert _acc2(1.5, 2.0, 3.0) == 7.5
    assert _acc2(1.5, 2, 3) == 7.5  # integers promote as in Python
    assert _acc3(0.25, 2.0, 3.5, -1.0) == 0.25 + 2.0 * (3.5 - 1.5) * -1.0 + 2 * 2.0
    assert _div(1.0, 3.0, 4.0) == 1.0 + (3.0 / 4.0 - 3.0)
    got = _acc2(1.0, 2.0, np.arange(3.0))  # a float becomes an array, as `d += e` rebinds it
    np.testing.assert_array_equal(got, 1.0 + 2.0 * np.arange(3.0))


@numba.njit
def _mv_a(acc, g, a, b):
    return numba_rt.acc_dot_vjp_a(acc, g, a, b)


@numba.njit
def _mv_b(acc, g, a, b):
    return numba_rt.acc_dot_vjp_b(acc, g, a, b)


@pytest.mark.slow
def test_matrix_vector_adjoints_accumulate_in_place_and_survive_overlap():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 3))
    # an operand reversed or strided over the accumulator's memory (its data pointer alone
    # does not say where it reaches)
    for view in (lambda b: b[7:3:-1], lambda b: b[1:9:2]):
        buf = rng.standard_normal(12)
        acc, g = buf[:3], view(buf)
        want = acc + A.T @ g
        _mv_b(acc, g, A, rng.standard_normal(3))
        np.testing.assert_allclose(acc, want, rtol=1e-14, atol=1e-14)
    # an outer product into an accumulator that one operand reads backwards (written at row 0
    # before it is read at row 3: the plain sum, not a loop, is right)
    buf = rng.standard_normal(12)
    acc3, u3 = buf[:4].reshape(4, 1), buf[3::-1]
    want3 = acc3 + np.outer(u3, np.ones(1))
    _mv_a(acc3, u3, A[:, :1], np.ones(1))
    np.testing.assert_allclose(acc3, want3, rtol=1e-14, atol=1e-14)
    for view in (lambda b: b[7:3:-1], lambda b: b[1:9:2]):
        buf = rng.standard_normal(12)
        acc2 = buf.reshape(4, 3)[:, :1]  # a strided 2-d accumulator: an outer product into it
        u = view(buf)
        want2 = acc2 + np.outer(u, np.ones(1))
        _mv_a(acc2, u, A[:, :1], np.ones(1))
        np.testing.assert_allclose(acc2, want2, rtol=1e-14, atol=1e-14)
    # dot(A, v): dv += A.T @ g; dot(w, A): dw += A @ g (loops written by `numba_accumulate.product`)
    for overlap in (False, True):
        buf = rng.standard_normal(12)
        acc = buf[:3]
        g = buf[1:5] if overlap else rng.standard_normal(4)
        want = acc + A.T @ g
        got = _mv_b(acc, g, A, rng.standard_normal(3))
        assert got is acc or np.shares_memory(got, acc)
        np.testing.assert_allclose(acc, want, rtol=1e-14, atol=1e-14)

        buf = rng.standard_normal(12)
        acc = buf[:4]
        g = buf[2:5] if overlap else rng.standard_normal(3)
        want = acc + A @ g
        _mv_a(acc, g, rng.standard_normal(4), A)
        np.testing.assert_allclose(acc, want, rtol=1e-14, atol=1e-14)


# -- through zymo ---------------------------------------------------------------------------


def small_array_loop(means, Q, x, xc, y):
    """Per point and component: a small-array subtraction, matrix-vector product and squared
    norm, like `gmm_objective_dot`; their adjoints accumulate in the loop."""
    s = 0.0
    for i in range(x.shape[0]):
        for k in range(means.shape[0]):
            np.subtract(x[i], means[k], out=xc)
            np.dot(Q[k], xc, out=y)
            s += np.sum(y * y) * (k + 1.0) - 2.0 * np.sum(xc)
    return s


@pytest.mark.slow
def test_small_array_adjoints_in_loops_match_python_and_finite_differences():
    rng = np.random.default_rng(11)
    means, Q, x = rng.standard_normal((3, 4)), rng.standard_normal((3, 4, 4)), rng.standard_normal((5, 4))
    args = [means, Q, x, np.zeros(4), np.zeros(4)]
    check_grad(small_array_loop, *args, const=(2,))  # both modes, Python backend, finite differences
    grads = {}
    for use_numba in (False, True):
        shadows = [np.zeros_like(a) for a in args]
        zymo.autodiff(Reverse, small_array_loop, Active, Duplicated(means, shadows[0]),
                      Duplicated(Q, shadows[1]), zymo.Const(x), Duplicated(args[3].copy(), shadows[3]),
                      Duplicated(args[4].copy(), shadows[4]), numba=use_numba)
        grads[use_numba] = shadows
    np.testing.assert_allclose(grads[True][0], grads[False][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads[True][1], grads[False][1], rtol=1e-12, atol=1e-12)
    fd = fd_grad(small_array_loop, args, [None, None, None, np.zeros(4), np.zeros(4)])
    np.testing.assert_allclose(grads[True][0], fd[0], rtol=1e-6, atol=1e-6)
    assert np.abs(grads[True][0]).max() > 0.1 and np.abs(grads[True][1]).max() > 0.1
    src = zymo.generated_code(Reverse, small_array_loop, Active, Duplicated(means, np.zeros_like(means)),
                              Duplicated(Q, np.zeros_like(Q)), zymo.Const(x),
                              Duplicated(np.zeros(4), np.zeros(4)), Duplicated(np.zeros(4), np.zeros(4)))
    assert "acc_ew" in numba_source(src)  # the kernels were exercised


@numba.njit
def _through_a_list(dA, g, n):
    cache = []
    for _i in range(n):
        cache.append(dA)
    for _r in range(n):
        d = cache.pop()
        d = numba_rt.acc_ew(d, "x0 * x1", (2.0, g))


@pytest.mark.slow
def test_accumulating_into_an_array_taken_from_a_list_reaches_the_array():
    """Numba 0.68 loses such writes when the function has an inlined overload (`acc_ew` was
    inlined at first; the generated code's list caches do this)."""
    dA, g = np.zeros(3), np.arange(1.0, 4.0)
    _through_a_list(dA, g, 4)
    np.testing.assert_array_equal(dA, 8.0 * g)


def _aliased(u, v, w, s):
    t = 0.0
    for i in range(3):
        np.multiply(u, s, out=w)
        t += np.sum(w * v) + np.sum(u * u) * (i + 1.0)
    return t


@pytest.mark.slow
@pytest.mark.parametrize("case", ["disjoint", "overlapping", "identical"])
def test_in_place_accumulations_with_aliased_arguments_match_python(case):
    """Shadows that overlap as their primals do (`u`, `v` views of one buffer): the in-place
    accumulations (`du += dsum * u`, `dv += w * dt`, ...) give the Python backend's gradient."""
    rng = np.random.default_rng(4)
    base = rng.standard_normal(12)
    spans = {"disjoint": (slice(0, 4), slice(6, 10)), "overlapping": (slice(0, 4), slice(2, 6)),
             "identical": (slice(0, 4), slice(0, 4))}[case]
    got = {}
    for use_numba in (False, True):
        dbase, dw = np.zeros(12), np.zeros(4)
        zymo.autodiff(Reverse, _aliased, Active, Duplicated(base[spans[0]], dbase[spans[0]]),
                      Duplicated(base[spans[1]], dbase[spans[1]]), Duplicated(np.zeros(4), dw),
                      Active(0.7), numba=use_numba)
        got[use_numba] = dbase
    np.testing.assert_allclose(got[True], got[False], rtol=1e-12, atol=1e-12)
    assert np.abs(got[True]).max() > 0.1

    def loss(b):  # the function of the shared buffer (w is overwritten before it is read)
        return _aliased(b[spans[0]], b[spans[1]], np.zeros(4), 0.7)

    fd = np.array([(loss(base + h) - loss(base - h)) / 2e-6 for h in np.eye(12) * 1e-6])
    np.testing.assert_allclose(got[True], fd, rtol=1e-6, atol=1e-6)
