"""The language zymo differentiates, item by item.

Every test checks forward AND reverse mode against central finite differences and
against each other (the dot-product test in `zymo.testing.check_grad`), and, where a
functional rewrite is natural, against autograd.
"""
from __future__ import annotations

import math
import zlib

import autograd.numpy as anp
import numpy as np
import pytest
from helpers import assert_tree_close, autograd_grad, autograd_jvp, copy_tree, run

import zymo
from zymo import Active, Const, Duplicated, Forward, ForwardWithPrimal, Reverse, ReverseWithPrimal
from zymo.testing import check_grad

RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _inputs_of_this_test(request):
    """Each test draws its inputs from a generator seeded by its own name: the same numbers
    whichever tests run before it (`-k`, a single test, another order)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def arr(*shape, lo=0.5, hi=1.5, dtype=np.float64):
    return RNG.uniform(lo, hi, shape).astype(dtype)


# ============================================================================
# arguments: positional, defaults, keyword arguments
# ============================================================================

def with_defaults(x, a=2.0, n=3, scale=1.5):
    return scale * x ** n + a * x


def test_positional_args_with_defaults():
    x = 1.3
    # all defaults
    (d,) = zymo.autodiff(Reverse, with_defaults, Active, Active(x))
    assert d[0] == pytest.approx(1.5 * 3 * x ** 2 + 2.0)
    (t,) = zymo.autodiff(Forward, with_defaults, Duplicated, Duplicated(x, 1.0))
    assert t == pytest.approx(1.5 * 3 * x ** 2 + 2.0)
    # some defaults overridden positionally, the rest from defaults
    check_grad(with_defaults, x, 0.7)
    check_grad(with_defaults, x, 0.7, 2)
    check_grad(with_defaults, x, 0.7, 4, 0.25)


def test_default_args_are_active_when_given():
    (d,) = zymo.autodiff(Reverse, with_defaults, Active, Active(1.3), Active(0.7), Const(2), Active(0.5))
    assert d[0] == pytest.approx(0.5 * 2 * 1.3 + 0.7)
    assert d[1] == pytest.approx(1.3)
    assert d[2] is None
    assert d[3] == pytest.approx(1.3 ** 2)


def none_default(x, w=None):
    if w is None:
        return x * x
    return x * w


def calls_none_default(x, y):
    return none_default(x) + none_default(x, y) + none_default(x, w=None)


def buffer_default(x, buf=np.zeros(2)):  # noqa: B008  (an array default, under test)
    buf[0] = x * 2.0                 # an array default is captured memory, like a global
    buf[1] = buf[0] * x
    return buf[1]


def tuple_default(x, t=(1.0, 2.0)):
    return x * t[0] + x * x * t[1]


def test_none_array_and_tuple_defaults():
    check_grad(none_default, 1.5)
    check_grad(none_default, 1.5, 2.0)
    check_grad(calls_none_default, 1.3, 0.4)
    for x in (1.5, 0.5):
        (d,) = zymo.autodiff(Reverse, buffer_default, Active, Active(x))
        assert d[0] == pytest.approx(4 * x)
        (t,) = zymo.autodiff(Forward, buffer_default, Duplicated, Duplicated(x, 1.0))
        assert t == pytest.approx(4 * x)
    check_grad(tuple_default, 0.7)
    check_grad(tuple_default, 0.7, (0.5, 3.0))


def kw_callee(x, y=1.0, power=2, shift=0.0):
    return (x + shift) ** power * y


def kw_caller(x, y):
    a = kw_callee(x)
    b = kw_callee(x, y=y)
    c = kw_callee(x, power=3, shift=y)
    d = kw_callee(y, shift=x, y=2.0)
    return a + b + c + d


def test_keyword_arguments_at_call_sites():
    check_grad(kw_caller, 1.2, 0.8)
    g = autograd_grad(lambda x, y: ((x ** 2) + (x ** 2) * y + (x + y) ** 3 + (y + x) ** 2 * 2.0), 1.2, 0.8,
                      argnum=(0, 1))
    (d,) = zymo.autodiff(Reverse, kw_caller, Active, Active(1.2), Active(0.8))
    assert_tree_close(d, g, 1e-12, 1e-12)


# ============================================================================
# scalars: float, int, bool
# ============================================================================

def scalars(x, n, flag):
    y = x * n + float(n) / x
    if flag:
        y = y * x
    k = n * 2 + 1          # int arithmetic
    return y + x ** k - n


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize("flag", [True, False])
def test_float_int_bool_scalars(n, flag):
    x = 1.1
    check_grad(scalars, x, n, flag)
    ag = autograd_grad(lambda x: (x * n + float(n) / x) * (x if flag else 1.0) + x ** (2 * n + 1) - n, x)
    (d,) = zymo.autodiff(Reverse, scalars, Active, Active(x), n, flag)
    assert d[0] == pytest.approx(ag, rel=1e-12)
    assert d[1] is None and d[2] is None
    (t,) = zymo.autodiff(Forward, scalars, Duplicated, Duplicated(x, 1.0), n, flag)
    assert t == pytest.approx(ag, rel=1e-12)


def int_result_scaled(x, n):
    m = int(x * 3.0)          # int() has no derivative
    return x * m + n


def test_int_conversion_has_no_derivative():
    x = 1.7
    check_grad(int_result_scaled, x, 4)
    (d,) = zymo.autodiff(Reverse, int_result_scaled, Active, Active(x), 4)
    assert d[0] == pytest.approx(float(int(x * 3.0)))


def np_float_arg(x):
    return x * x * 3.0


def test_numpy_float64_scalar():
    x = np.float64(1.5)
    (d,) = zymo.autodiff(Reverse, np_float_arg, Active, Active(x))
    assert d[0] == pytest.approx(9.0)
    (t,) = zymo.autodiff(Forward, np_float_arg, Duplicated, Duplicated(x, np.float64(2.0)))
    assert t == pytest.approx(18.0)


# ============================================================================
# arrays: float64 and float32, ndim 1-3
# ============================================================================

def array_fn(x):
    y = np.sin(x) * x + np.exp(x * 0.5)
    return np.sum(y * y)


def array_mutating(x, out):
    out[...] = np.tanh(x) * 2.0
    x *= 3.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 2, 3)])
def test_arrays_dtype_ndim(dtype, shape):
    x = arr(*shape, dtype=dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float64 else dict(rtol=2e-3, atol=2e-3)
    check_grad(array_fn, x, **tol)
    out = np.zeros(shape, dtype=dtype)
    check_grad(array_mutating, x, out, **tol)
    # autograd oracle of the functional version
    ag = autograd_grad(lambda x: anp.sum((anp.sin(x) * x + anp.exp(x * 0.5)) ** 2), x.astype(np.float64))
    g = zymo.gradient(Reverse, array_fn, x.copy())[0]
    assert g.dtype == dtype and g.shape == shape
    assert_tree_close(g, ag, **tol)
    # forward mode: the tangent written into the shadow of `out` keeps its dtype
    t = arr(*shape, dtype=dtype)
    tout = np.zeros(shape, dtype=dtype)
    assert zymo.autodiff(Forward, array_mutating, Const, Duplicated(x.copy(), t.copy()),
                         Duplicated(np.zeros(shape, dtype=dtype), tout)) == ()
    assert tout.dtype == dtype
    x64 = x.astype(np.float64)
    assert_tree_close(tout, 2.0 * (1 - np.tanh(x64) ** 2) * t, **tol)
    # shadows of a mutating function keep their dtype
    dx, dout = np.zeros_like(x), np.ones_like(out)
    zymo.autodiff(Reverse, array_mutating, Const, Duplicated(x.copy(), dx), Duplicated(out.copy(), dout))
    assert dx.dtype == dtype and dout.dtype == dtype
    # x's final value gets cotangent 0 here: dx = d<1, out>/dx = 2 (1 - tanh(x)^2)
    assert_tree_close(dx, 2.0 * (1 - np.tanh(x.astype(np.float64)) ** 2), **tol)
    assert np.all(dout == 0)


# ============================================================================
# tuples and lists as arguments
# ============================================================================

def tuple_of_floats(t, c):
    a, b = t
    return a * a * b + t[1] * c + math.sin(t[0])


def test_active_tuple_gives_tuple_derivative():
    t = (1.2, 0.7)
    (d,) = zymo.autodiff(Reverse, tuple_of_floats, Active, Active(t), Active(2.0))
    assert isinstance(d[0], tuple) and len(d[0]) == 2
    assert d[0][0] == pytest.approx(2 * 1.2 * 0.7 + math.cos(1.2))
    assert d[0][1] == pytest.approx(1.2 ** 2 + 2.0)
    assert d[1] == pytest.approx(0.7)
    check_grad(tuple_of_floats, t, 2.0)
    (ft,) = zymo.autodiff(Forward, tuple_of_floats, Duplicated, Duplicated(t, (1.0, 0.0)), 2.0)
    assert ft == pytest.approx(d[0][0])


def tuple_of_arrays(t, out):
    x, y = t
    out[0] = np.sum(x * y) + np.sum(np.sin(t[0]))
    t[1][0] = 0.0


def test_duplicated_tuple_of_arrays():
    t = (arr(3), arr(3))
    check_grad(tuple_of_arrays, t, np.zeros(1))
    x, y = copy_tree(t)
    dt = zymo.make_zero((x, y))
    dout = np.array([1.0])
    zymo.autodiff(Reverse, tuple_of_arrays, Const, Duplicated((x, y), dt), Duplicated(np.zeros(1), dout))
    assert_tree_close(dt[0], t[1] + np.cos(t[0]), 1e-12, 1e-12)
    assert_tree_close(dt[1], t[0], 1e-12, 1e-12)
    assert y[0] == 0.0


def list_of_arrays(L, w):
    s = 0.0
    for k in range(len(L)):
        s += np.sum(L[k] * L[k]) * w
    L[0][1] = s
    return s + L[1][0]


def test_list_of_arrays_argument():
    L = [arr(3), arr(3), arr(3)]
    check_grad(list_of_arrays, L, 0.8)
    x = copy_tree(L)
    dL = zymo.make_zero(x)
    assert isinstance(dL, list) and all(isinstance(d, np.ndarray) for d in dL)
    (d,) = zymo.autodiff(Reverse, list_of_arrays, Active, Duplicated(x, dL), Active(0.8))
    for k in range(3):
        expect = 2 * 0.8 * L[k]
        if k == 1:
            expect = expect.copy()
            expect[0] += 1.0
        assert_tree_close(dL[k], expect, 1e-12, 1e-12)
    assert d[1] == pytest.approx(sum(np.sum(a * a) for a in L))


# ============================================================================
# arithmetic and comparison operators, boolean operators, conditional expressions
# ============================================================================

def op_add(x, y): return x + y + 2.0
def op_sub(x, y): return x - y - 0.5 - (1.0 - x)
def op_mul(x, y): return x * y * 3.0
def op_div(x, y): return x / y + 2.0 / x + y / 4.0
def op_floordiv(x, y): return x * (x // y) + y * (7.0 // x)
def op_mod(x, y): return x % y + (y * 3.0) % x + x % 0.4
def op_pow(x, y): return x ** y + x ** 2 + 2.0 ** y + x ** 3.5 + x ** -1
def op_neg(x, y): return -x * y + -(-y) - (-x)  # noqa: B002  (a double negation, under test)
def op_abs(x, y): return abs(x - y) * abs(-x) + abs(y)
def op_mixed(x, y): return (x + y) * (x - y) / (x * y + 1.0) ** 2 - x % y


OPS = [op_add, op_sub, op_mul, op_div, op_floordiv, op_mod, op_pow, op_neg, op_abs, op_mixed]


@pytest.mark.parametrize("fn", OPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("xy", [(1.3, 0.55), (0.6, 1.7)])
def test_scalar_operators(fn, xy):
    check_grad(fn, *list(xy))


def ag_ops(fn):
    return {
        "op_add": lambda x, y: x + y + 2.0,
        "op_mul": lambda x, y: x * y * 3.0,
        "op_div": lambda x, y: x / y + 2.0 / x + y / 4.0,
        "op_pow": lambda x, y: x ** y + x ** 2 + 2.0 ** y + x ** 3.5 + x ** -1,
        "op_abs": lambda x, y: anp.abs(x - y) * anp.abs(-x) + anp.abs(y),
    }.get(fn.__name__)


@pytest.mark.parametrize("fn", [op_add, op_mul, op_div, op_pow, op_abs], ids=lambda f: f.__name__)
def test_scalar_operators_vs_autograd(fn):
    x, y = 1.3, 0.55
    (d,) = zymo.autodiff(Reverse, fn, Active, Active(x), Active(y))
    assert_tree_close(d, autograd_grad(ag_ops(fn), x, y, argnum=(0, 1)), 1e-12, 1e-12)


@pytest.mark.parametrize("fn", OPS, ids=lambda f: f.__name__)
def test_array_operators(fn):
    # the same operators elementwise on arrays (and broadcasting a float)
    x, y = arr(4), arr(4)

    def run_it(x, y, out):
        out[:] = fn(x, y)

    # the wrapper is a closure over `fn`: zymo inlines it
    check_grad(run_it, x, y, np.zeros(4))


def compare_ops(x, y):
    s = 0.0
    if x < y:
        s += x * 2.0
    if x <= y:
        s += y * 3.0
    if x > y:
        s += x * y
    if x >= y:
        s += x * x
    if x == y:
        s += 100.0 * x
    if x != y:
        s += y * y
    if 0.0 < x < 2.0 <= y + 2.0:
        s += x * y * y
    return s


@pytest.mark.parametrize("xy", [(0.5, 1.5), (1.5, 0.5), (1.0, 1.0)])
def test_comparisons(xy):
    if xy[0] == xy[1]:
        # on the tie, finite differences straddle branches: compare the modes only
        (d,) = zymo.autodiff(Reverse, compare_ops, Active, Active(xy[0]), Active(xy[1]))
        # at x == y: s = 2... branches taken: <=, >=, == : 3y + x*x + 100x + x*y*y
        x, y = xy
        assert_tree_close(d, (2 * x + 100.0 + y * y, 3.0 + 2 * x * y), 1e-12, 1e-12)
        (tx,) = zymo.autodiff(Forward, compare_ops, Duplicated, Duplicated(x, 1.0), Duplicated(y, 0.0))
        (ty,) = zymo.autodiff(Forward, compare_ops, Duplicated, Duplicated(x, 0.0), Duplicated(y, 1.0))
        assert_tree_close((tx, ty), d, 1e-12, 1e-12)
    else:
        check_grad(compare_ops, *list(xy))


def bool_ops(x, y, flag):
    s = x
    if x > 0.0 and y > 0.0:
        s = s * y
    if x > 1.0 or y > 1.0:
        s = s + x * x
    if not flag:
        s = s - y
    if not (x > y) and flag:
        s = s * 2.0
    a = x and y          # value of `and`: y if x is truthy
    b = 0.0 or x         # value of `or`: x
    return s + a * b


@pytest.mark.parametrize("x,y", [(0.5, 1.5), (1.5, 0.5), (-0.5, 0.7)])
@pytest.mark.parametrize("flag", [True, False])
def test_and_or_not(x, y, flag):
    check_grad(bool_ops, x, y, flag)


def conditional_expr(x, y):
    a = x * x if x > y else y * y
    b = (x if x > 0.5 else 0.5) * (y if y < 1.0 else 2.0 * y)
    return a + b + (math.sin(x) if a > 1.0 else math.cos(y))


def tuple_ifexp(x, y):
    a, b = (x, y) if x > y else (y, x)
    return a * a * b


@pytest.mark.parametrize("x,y", [(1.2, 0.4), (0.3, 1.4), (0.7, 0.9)])
def test_conditional_expressions(x, y):
    check_grad(conditional_expr, x, y)
    check_grad(tuple_ifexp, x, y)


def if_elif_else(x, k):
    if x < 0.0:
        y = -x * x
    elif x < 1.0:
        y = x * 3.0
        if k > 2:
            y = y * x
        else:
            y = y + x
    elif x < 2.0:
        y = math.exp(x)
    else:
        y = x ** 3
    return y * 2.0


@pytest.mark.parametrize("x", [-0.7, 0.4, 1.5, 2.5])
@pytest.mark.parametrize("k", [1, 3])
def test_if_elif_else(x, k):
    check_grad(if_elif_else, x, k)


def if_on_array(x, out):
    for i in range(x.shape[0]):
        if x[i] > 1.0:
            out[i] = x[i] * x[i]
        elif x[i] > 0.0:
            out[i] = math.sin(x[i])
        else:
            out[i] = -x[i]


def test_if_inside_loop_over_array():
    check_grad(if_on_array, np.array([1.5, 0.5, -0.3, 2.2]), np.zeros(4))


# ============================================================================
# loops: for over range / tuples / arrays / rows / lists, enumerate, zip, while
# ============================================================================

def range1(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[i] * (i + 1)
    return s


def range2(x):
    s = 1.0
    for i in range(1, len(x)):
        s = s * x[i] + x[i - 1]
    return s


def range3(x):
    s = 0.0
    for i in range(0, len(x), 2):
        s += math.sin(x[i]) * s + x[i]
    return s


def range_negative_step(x):
    s = 0.0
    for i in range(len(x) - 1, -1, -1):
        s = s * 0.5 + x[i] * x[i]
    for j in range(len(x) - 1, 0, -2):
        s += x[j] * x[j - 1]
    return s


def range_empty(x):
    s = x[0]
    for i in range(3, 1):
        s += x[i] * 100.0
    for i in range(0, 3, -1):
        s += x[i] * 100.0
    return s * s


def range_bounds_from_args(x, lo, hi):
    s = 0.0
    for i in range(lo, hi):
        s += x[i] ** 3
    return s


@pytest.mark.parametrize("fn", [range1, range2, range3, range_negative_step, range_empty],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("n", [1, 4, 5])
def test_for_range(fn, n):
    check_grad(fn, arr(n))


def test_for_range_bounds_from_int_args():
    x = arr(6)
    check_grad(range_bounds_from_args, x, 1, 4)
    check_grad(range_bounds_from_args, x, 4, 1)
    (d,) = zymo.autodiff(Reverse, range_bounds_from_args, Active, Duplicated(x.copy(), np.zeros(6)), 2, 5)


def range_by_two(x, a, b):
    s = 0.0
    for i in range(a, b, 2):
        s = np.sin(s + x[i])
    return s


def range_back(x, a, b):
    s = 0.0
    for i in range(b, a, -1):
        s = np.sin(s + x[i])
    for i in range(a, b):
        s = s * x[i]
    return s


@pytest.mark.slow
@pytest.mark.parametrize("fn", [range_by_two, range_back], ids=lambda f: f.__name__)
@pytest.mark.parametrize("bounds", [(5, 1), (1, 5), (2, 2)], ids=str)
@pytest.mark.parametrize("kind", [np.uint64, np.uint8, int])
def test_for_range_unsigned_and_empty_bounds(fn, bounds, kind):
    """Loop bounds of unsigned type: `b - a` wraps round where `b < a` (2**64 - 4), so the
    trip counts and reversed loops compare before they subtract (`_rt.span`). Empty loops give
    zeros, the others match central differences; both modes, both backends."""
    a, b = (kind(v) for v in bounds)
    x = arr(8)
    check_grad(fn, x, a, b, const=[1, 2])
    for numba in (False, True):
        dx = np.zeros(8)
        zymo.autodiff(Reverse, fn, Active, Duplicated(x.copy(), dx), Const(a), Const(b), numba=numba)
        want = np.zeros(8)
        zymo.autodiff(Reverse, fn, Active, Duplicated(x.copy(), want), Const(int(a)), Const(int(b)), numba=False)
        np.testing.assert_allclose(dx, want, rtol=1e-13, atol=1e-15)
        assert (np.abs(dx).max() > 0.1) == (bounds == (1, 5))


def triangle_back(x, n):
    s = 0.0
    for i in range(n):
        for k in range(i, i - 2, -1):  # k = i, i - 1 (x[-1] at i = 0)
            s = np.sin(s + x[k] * x[i])
    for j in range(n - 1, -1, -1):
        s = s * 0.5 + x[j]
    return s


@pytest.mark.slow
@pytest.mark.parametrize("kind", [np.uint64, np.uint8, np.int32, int])
def test_loop_indices_are_python_ints_under_unsigned_bounds(kind):
    """`range(n)` gives the primal Python ints whatever `n` is; the adjoint sweep's index
    `n - 1 - _r` of an unsigned `n` was unsigned, and the inner loop's bound `i - 2` wrapped
    round at `i = 0` (its adjoint skipped: a wrong gradient without an error). Bounds that may
    be unsigned are read through `int` (`Reverse._signed`); `_rt.span` and `_rt.trip` count in
    Python ints. Both backends and modes, against the int bounds' gradient and differences."""
    x = arr(8)
    n = kind(5)
    check_grad(triangle_back, x, n, const=[1])
    want = zymo.gradient(Reverse, triangle_back, x.copy(), Const(5), numba=False)[0]
    for numba in (False, True):
        for mode in (Reverse, Forward):
            (g,) = zymo.gradient(mode, triangle_back, x.copy(), Const(n), numba=numba)[:1]
            np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-14)
    assert np.abs(want).max() > 0.1


def loop_count_of_a_bool(x, flag):
    y = x.copy()
    s = 0.0
    for i in range(flag):
        y[i] = np.sin(y[i]) * y[i + 1]
        s = s + y[i] * y[i]
    return s + np.sum(y)


@pytest.mark.slow
def test_for_range_of_a_bool():
    """`range(True)`: one iteration; its cache is sized by a trip count that is an int, not
    the bool (`np.empty(True)` raises)."""
    x = arr(4)
    check_grad(loop_count_of_a_bool, x, True, const=[1])
    for numba in (False, True):
        dx = np.zeros(4)
        zymo.autodiff(Reverse, loop_count_of_a_bool, Active, Duplicated(x.copy(), dx), Const(True), numba=numba)
        want = np.zeros(4)
        zymo.autodiff(Reverse, loop_count_of_a_bool, Active, Duplicated(x.copy(), want), Const(1), numba=False)
        np.testing.assert_allclose(dx, want, rtol=1e-13)
        assert np.abs(dx).max() > 0.1


def loop_over_tuple(x, y):
    s = 0.0
    for v in (x, y, x * y, 2.0):
        s += v * v
    for a in (x, y):
        for b in (y, x):
            s += a * b
    return s


def loop_over_tuple_arg(t):
    s = 0.0
    for v in t:
        s = s * v + v
    return s


def test_for_over_tuples():
    check_grad(loop_over_tuple, 1.2, 0.7)
    ag = autograd_grad(lambda x, y: x * x + y * y + (x * y) ** 2 + 4.0 + x * y + x * x + y * y + y * x,
                       1.2, 0.7, argnum=(0, 1))
    (d,) = zymo.autodiff(Reverse, loop_over_tuple, Active, Active(1.2), Active(0.7))
    assert_tree_close(d, ag, 1e-12, 1e-12)
    check_grad(loop_over_tuple_arg, (0.5, 1.5, 2.5))
    check_grad(loop_over_tuple_arg, (np.float64(0.5),))


def loop_over_1d(x, w):
    s = 0.0
    for v in x:
        s += v * w[0] + v * v
    return s


def loop_over_rows(A, b, out):
    k = 0
    for row in A:
        out[k] = np.sum(row * b)
        row[0] = 0.0          # a row is a view: writes A
        k += 1


def loop_over_list(L, out):
    for a in L:
        out += a * a


def test_for_over_1d_array():
    check_grad(loop_over_1d, arr(5), arr(1))


def test_for_over_rows_of_2d_array():
    A, b = arr(3, 4), arr(4)
    check_grad(loop_over_rows, A, b, np.zeros(3))
    # the row writes reach A
    _, final = run(loop_over_rows, [A, b, np.zeros(3)])
    assert np.all(final[0][:, 0] == 0.0)
    # reverse: dA[:, 0] was overwritten -> its incoming cotangent is dropped, then add dout * b
    dA, db, dout = np.ones((3, 4)), np.zeros(4), np.ones(3)
    zymo.autodiff(Reverse, loop_over_rows, Const, Duplicated(A.copy(), dA), Duplicated(b.copy(), db),
                  Duplicated(np.zeros(3), dout))
    expect = np.ones((3, 4)) + b[None, :]
    expect[:, 0] = b[0]
    assert_tree_close(dA, expect, 1e-12, 1e-12)
    assert_tree_close(db, A.sum(axis=0), 1e-12, 1e-12)


def test_for_over_list():
    L = [arr(3), arr(3)]
    check_grad(loop_over_list, L, np.zeros(3))


def enumerate_zip(x, y, out):
    for i, v in enumerate(x):
        out[i] = v * (i + 1.0)
    s = 0.0
    for a, b in zip(x, y):
        s += a * b
    for i, (a, b) in enumerate(zip(x, y)):
        s += a * b * i
    for a, b in zip((1.0, 2.0, 3.0), (y[0], y[1])):   # zip of tuples: unrolled
        s += a * b * b
    out[0] += s


def target_after_range_loop(x):
    s = 0.0
    i = 0
    for i in range(len(x)):
        s += x[i]
    return s * x[i]                  # i is len(x) - 1 after the loop


def target_after_array_loop(x):
    s = 0.0
    v = 0.0
    for v in x:
        s += v
    return s * v                     # v is x[-1] after the loop


def target_after_loop_no_init(x):
    s = 0.0
    for i in range(len(x)):
        s += x[i]
    return s * x[i]


@pytest.mark.parametrize("fn", [target_after_range_loop, target_after_array_loop, target_after_loop_no_init],
                         ids=lambda f: f.__name__)
def test_loop_variable_keeps_last_value_after_loop(fn):
    x = np.array([1.0, 2.0, 3.0])
    dx = np.zeros(3)
    _, primal = zymo.autodiff(ReverseWithPrimal, fn, Active, Duplicated(x.copy(), dx))
    assert fn(x.copy()) == 18.0
    assert primal == pytest.approx(18.0)
    np.testing.assert_allclose(dx, [3.0, 3.0, 9.0])
    check_grad(fn, arr(4))


def test_enumerate_and_zip():
    check_grad(enumerate_zip, arr(4), arr(5), np.zeros(4))


def while_loop(x, tol):
    y = x
    n = 0
    while y > tol:
        y = y * 0.5 + 0.01 * x
        n += 1
    return y * n


def while_newton_sqrt(a):
    # Newton iterations for sqrt(a): derivative -> 1 / (2 sqrt(a))
    y = a
    k = 0
    while k < 30 and abs(y * y - a) > 1e-14:
        y = 0.5 * (y + a / y)
        k += 1
    return y


def while_over_array(x):
    i = 0
    s = 0.0
    while i < len(x):
        s = s + x[i] * math.exp(-s)
        i += 1
    return s


def test_while_loops():
    check_grad(while_loop, 3.3, 0.1)
    check_grad(while_over_array, arr(4))
    (d,) = zymo.autodiff(Reverse, while_newton_sqrt, Active, Active(2.0))
    assert d[0] == pytest.approx(0.5 / math.sqrt(2.0), rel=1e-8)
    (t,) = zymo.autodiff(Forward, while_newton_sqrt, Duplicated, Duplicated(2.0, 1.0))
    assert t == pytest.approx(0.5 / math.sqrt(2.0), rel=1e-8)


def triangular(x):
    s = 0.0
    for i in range(len(x)):
        for j in range(i):
            s = math.sin(s) + x[i] * x[j]
    return s


def while_in_for(x):
    s = 0.0
    for i in range(len(x)):
        k = 0
        t = x[i]
        while k < i:
            t = t * x[k] + 0.1 * t * t
            k += 1
        s += t
    return s


def overwrite_chain(x):
    for _k in range(3):
        for i in range(1, len(x)):
            x[i] = x[i] * x[i - 1] + math.cos(x[i])
    return np.sum(x)


@pytest.mark.parametrize("fn", [triangular, while_in_for, overwrite_chain], ids=lambda f: f.__name__)
def test_nested_loops_with_values_the_reverse_sweep_must_cache(fn):
    check_grad(fn, arr(4))


# ============================================================================
# break, continue, early return
# ============================================================================

def brk(x, limit):
    s = 0.0
    for i in range(len(x)):
        if s > limit:
            break
        s += x[i] * x[i]
    return s


def cont(x):
    s = 0.0
    for i in range(len(x)):
        if i % 2 == 1:
            continue
        s += x[i] ** 3
        if x[i] > 1.0:
            continue
        s += x[i]
    return s


def brk_while(x):
    s = 0.0
    i = 0
    while True:
        if i >= len(x):
            break
        s = s * x[i] + 1.0
        i += 1
        if s > 10.0:
            break
    return s


def early_return_top(x, y):
    if x > y:
        return x * y
    z = x + y
    if z > 2.0:
        return z * z
    return math.sin(z)


def early_return_loop(x):
    s = 0.0
    for i in range(len(x)):
        s += x[i] * x[i]
        if s > 2.0:
            return s * x[i]
    return -s


def early_return_nested(A):
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            if A[i, j] < 0.0:
                continue
            s += A[i, j] * (i + 1.0)
            if s > 3.0:
                return s * A[i, j]
            if j >= 2:
                break
        s = s * 1.5
    return s


def nested_break_continue(A):
    s = 0.0
    for i in range(A.shape[0]):
        if i == 1:
            continue
        for j in range(A.shape[1]):
            if j == 3:
                break
            for k in (1.0, 2.0):
                if k > 1.5 and A[i, j] > 1.0:
                    break
                s += k * A[i, j] ** 2
    return s


def return_in_while(x):
    i = 0
    while i < len(x):
        if x[i] > 1.2:
            return x[i] * 10.0
        i += 1
    return x[0]


@pytest.mark.parametrize("limit", [0.5, 2.0, 100.0])
def test_break(limit):
    check_grad(brk, arr(5), limit)


def brk_negative_step(x, limit):
    s = 0.0
    for i in range(len(x) - 1, -1, -1):
        s += x[i] * x[i]
        if s > limit:
            break
    return s


def return_negative_step(x):
    for i in range(len(x) - 1, 0, -2):
        if x[i] > 1.2:
            return x[i] * x[i - 1]
    return x[0]


@pytest.mark.parametrize("limit", [0.5, 100.0])
def test_break_and_return_in_negative_step_range(limit):
    check_grad(brk_negative_step, arr(5), limit)
    check_grad(return_negative_step, np.array([0.5, 0.7, 1.5, 0.9, 0.8]))
    check_grad(return_negative_step, np.array([0.5, 0.7, 0.6, 0.9, 0.8]))


def test_continue():
    check_grad(cont, np.array([0.5, 1.5, 1.2, 0.3, 0.9, 2.0]))


def brk_while_in_for(x, A):
    s = 0.0
    for i in range(A.shape[0]):
        j = 0
        while True:
            if j >= A.shape[1]:
                break
            A[i, j] = A[i, j] * x[j] + s
            s = s * 0.5 + A[i, j]
            if s > 2.0:
                break
            j += 1
    return s


def test_break_in_while_nested_in_for():
    check_grad(brk_while_in_for, arr(3), arr(3, 3))


def test_break_in_while_true():
    check_grad(brk_while, np.array([1.5, 2.0, 1.1, 3.0, 2.0]))
    check_grad(brk_while, np.array([1.5, 1.1]))


@pytest.mark.parametrize("x,y", [(1.5, 0.5), (0.5, 1.8), (0.3, 0.4)])
def test_early_return_top_level(x, y):
    check_grad(early_return_top, x, y)


@pytest.mark.parametrize("x", [np.array([0.5, 0.6, 1.2, 0.9]), np.array([0.5, 0.6, 0.2])])
def test_early_return_in_loop(x):
    check_grad(early_return_loop, x)


@pytest.mark.parametrize("A", [
    np.array([[0.5, -1.0, 0.7, 0.2], [0.3, 0.8, 0.1, 0.4], [1.1, 1.3, 0.9, 0.5]]),
    np.array([[0.1, 0.2, 0.1, 0.2], [0.3, -0.2, 0.1, 0.4]]),
])
def test_early_return_and_continue_in_nested_loops(A):
    check_grad(early_return_nested, A)


def test_break_continue_in_nested_loops():
    A = np.array([[0.5, 1.2, 0.7, 0.2], [0.3, 0.8, 0.1, 0.4], [1.1, 0.3, 0.9, 1.5]])
    check_grad(nested_break_continue, A)


@pytest.mark.parametrize("x", [np.array([0.5, 1.5, 2.0]), np.array([0.5, 0.7])])
def test_return_inside_while(x):
    check_grad(return_in_while, x)


def clipped(v, lo, hi):
    # a callee with several early returns, inlined into loops
    if v < lo:
        return lo
    for k in range(3):
        if v > hi + k:
            return hi * v / (hi + k)
    return v * v


def calls_early_return_in_nested_loops(A, out):
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            out[i] += clipped(A[i, j], 0.2, 1.0)
            if out[i] > 5.0:
                break


def test_early_return_in_callee_inside_nested_loops():
    A = np.array([[0.1, 0.5, 1.5, 2.7], [3.9, 0.9, 1.2, 0.3], [2.2, 2.4, 2.6, 2.8]])
    check_grad(calls_early_return_in_nested_loops, A, np.zeros(3))


# ============================================================================
# assignment and augmented assignment: names and subscripts
# ============================================================================

def assign_names(x, y):
    a = x
    b = a * y
    a = b + x           # rebinding
    a += y * 2.0
    a -= x
    a *= y
    a /= x + 1.0
    a **= 2
    c, d = a, b         # tuple unpacking
    c, d = d, c         # swap
    e = f2 = c * d      # chained assignment
    return e + f2 + d


def assign_subscripts(x, out):
    out[0] = x[0] * 2.0                  # int index
    out[-1] = x[-1] * x[-2]              # negative ints
    out[1:3] = x[1:3] * 3.0              # slice
    out[3:5] = np.sin(x[-3:-1])          # negative slice bounds
    out[::2] += x[::2]                   # strided slice, augmented
    out[0] -= x[1]
    out[-1] *= x[0]
    out[1] /= x[2]
    out[2] **= 2.0


def assign_2d(A, B):
    B[0, 0] = A[0, 0] * A[1, 1]          # tuple of ints
    B[-1, -2] = A[-1, -1] * 2.0          # tuple of negative ints
    B[1, :] = A[1, :] * A[0, :]          # int and slice
    B[:, 2] += A[:, 0]                   # slice and int, augmented
    B[0:2, 0:2] *= A[1:3, 1:3]           # two slices
    B[2, 1:] -= A[0, :-1]
    A[0, 0] = 0.0                        # overwrite an input after reading it


def assign_3d(R, S):
    S[0, 1, 2] = R[1, 0, 2] * R[0, 0, 0]
    S[1, :, 0] = R[0, :, 1] * 2.0
    S[:, -1, :] += R[:, 0, :] ** 2
    S[1, 0:2, 1:3] = R[0, 1:3, 0:2]


def test_assignment_to_names():
    check_grad(assign_names, 1.3, 0.7)


def test_assignment_to_subscripts_1d():
    check_grad(assign_subscripts, arr(6), arr(6))


def test_assignment_to_subscripts_2d():
    check_grad(assign_2d, arr(3, 3), arr(3, 3))


def test_assignment_to_subscripts_3d():
    check_grad(assign_3d, arr(2, 3, 3), arr(2, 3, 3))


def aug_on_whole_array(x, y):
    x += y
    x *= y
    x -= 0.5
    x /= 2.0
    x **= 2.0
    return np.sum(x)


def test_augmented_assignment_on_whole_arrays():
    check_grad(aug_on_whole_array, arr(4), arr(4))


def store_int_into_float_array(x, out):
    out[0] = 1
    out[1] = x[0] * x[1]
    out[2] = out[1] * out[0]


def test_store_then_read_back():
    check_grad(store_int_into_float_array, arr(2), np.zeros(3))


# ============================================================================
# views: writing through a view writes the base (and the shadows follow)
# ============================================================================

def view_write(r, x):
    u = r[:, :, 0]
    v = r[:, :, 1]
    u[0, 0] = x[0] * x[1]
    u[1, :] = x * 2.0
    v += u * u
    w = v[1]           # a view of a view
    w[0] = np.sin(x[0])
    return np.sum(r * r)


def view_read_after_write(r, x, out):
    u = r[:, :, 0]
    r[0, 0, 0] = x[0] * 3.0      # write the base ...
    out[0] = u[0, 0] * x[1]      # ... read through the view


def view_transpose_reshape(a, x):
    t = a.T
    t[0, 1] = x[0]               # writes a[1, 0]
    flat = a.reshape(6)
    flat[5] = x[1] * x[0]        # writes a[1, 2]
    return np.sum(a * a)


def test_view_writes_reach_the_base():
    r, x = arr(2, 2, 2), arr(2)
    ret, final = run(view_write, [r, x])
    assert final[0][0, 0, 0] == pytest.approx(x[0] * x[1])
    assert np.allclose(final[0][1, :, 0], x * 2.0)
    check_grad(view_write, r, x)


def test_view_shadows_follow():
    r, x = arr(2, 2, 2), arr(2)
    check_grad(view_read_after_write, r, x, np.zeros(1))
    # reverse, cotangents dr = 1 and dout = 1: out[0] = 3 x0 x1 and the final r[0,0,0] = 3 x0,
    # so dx = (3 x1 + 3, 3 x0); dr[0,0,0] is overwritten -> 0, the rest only read -> stays 1
    dr, dx, dout = np.ones((2, 2, 2)), np.zeros(2), np.ones(1)
    zymo.autodiff(Reverse, view_read_after_write, Const, Duplicated(r.copy(), dr), Duplicated(x.copy(), dx),
                  Duplicated(np.zeros(1), dout))
    assert_tree_close(dx, np.array([3.0 * x[1] + 3.0, 3.0 * x[0]]), 1e-12, 1e-12)
    assert dout[0] == 0.0
    expect = np.ones((2, 2, 2))
    expect[0, 0, 0] = 0.0
    assert_tree_close(dr, expect, 1e-12, 1e-12)
    # forward: the tangent of the stored value lands in the shadow of r, through the view
    tr, tx, tout = np.zeros((2, 2, 2)), np.array([1.0, 0.0]), np.zeros(1)
    zymo.autodiff(Forward, view_read_after_write, Const, Duplicated(r.copy(), tr), Duplicated(x.copy(), tx),
                  Duplicated(np.zeros(1), tout))
    assert tr[0, 0, 0] == pytest.approx(3.0)
    assert tout[0] == pytest.approx(3.0 * x[1])


def test_views_from_transpose_and_reshape():
    check_grad(view_transpose_reshape, arr(2, 3), arr(2))


# ============================================================================
# math.* functions
# ============================================================================

MATH_1 = [
    ("sin", math.sin, anp.sin), ("cos", math.cos, anp.cos), ("tan", math.tan, anp.tan),
    ("exp", math.exp, anp.exp), ("expm1", math.expm1, anp.expm1), ("log", math.log, anp.log),
    ("log1p", math.log1p, anp.log1p), ("log2", math.log2, anp.log2), ("log10", math.log10, anp.log10),
    ("sqrt", math.sqrt, anp.sqrt), ("tanh", math.tanh, anp.tanh), ("sinh", math.sinh, anp.sinh),
    ("cosh", math.cosh, anp.cosh), ("asin", math.asin, anp.arcsin), ("acos", math.acos, anp.arccos),
    ("atan", math.atan, anp.arctan), ("fabs", math.fabs, anp.abs),
    ("erf", math.erf, None),
]


def m_sin(x): return math.sin(x) * x
def m_cos(x): return math.cos(x) * x
def m_tan(x): return math.tan(x) * x
def m_exp(x): return math.exp(x) * x
def m_expm1(x): return math.expm1(x) * x
def m_log(x): return math.log(x) * x
def m_log1p(x): return math.log1p(x) * x
def m_log2(x): return math.log2(x) * x
def m_log10(x): return math.log10(x) * x
def m_sqrt(x): return math.sqrt(x) * x
def m_tanh(x): return math.tanh(x) * x
def m_sinh(x): return math.sinh(x) * x
def m_cosh(x): return math.cosh(x) * x
def m_asin(x): return math.asin(x) * x
def m_acos(x): return math.acos(x) * x
def m_atan(x): return math.atan(x) * x
def m_fabs(x): return math.fabs(x) * x
def m_erf(x): return math.erf(x) * x


MATH_FNS = {name: globals()["m_" + name] for name, _, _ in MATH_1}


@pytest.mark.parametrize("name,fn,afn", MATH_1, ids=[m[0] for m in MATH_1])
@pytest.mark.parametrize("x", [0.3, 0.8])
def test_math_unary(name, fn, afn, x):
    f = MATH_FNS[name]
    check_grad(f, x)
    if afn is not None:
        (d,) = zymo.autodiff(Reverse, f, Active, Active(x))
        assert d[0] == pytest.approx(autograd_grad(lambda x: afn(x) * x, x), rel=1e-10)


def m_binary(x, y):
    return math.atan2(x, y) + math.hypot(x, y) + math.pow(x, y) + math.pow(y, 2.0)


def m_nondiff(x):
    return x * math.floor(x * 2.0) + x * math.ceil(x) + x * math.trunc(x * 3.0) + math.pi * x + math.e


def test_math_binary_and_constants():
    check_grad(m_binary, 0.7, 1.3)
    ag = autograd_grad(lambda x, y: anp.arctan2(x, y) + anp.sqrt(x * x + y * y) + x ** y + y ** 2.0,
                       0.7, 1.3, argnum=(0, 1))
    (d,) = zymo.autodiff(Reverse, m_binary, Active, Active(0.7), Active(1.3))
    assert_tree_close(d, ag, 1e-10, 1e-12)
    check_grad(m_nondiff, 1.3)


# ============================================================================
# builtins: len range abs min max sum float int
# ============================================================================

def builtins_fn(x, y, t):
    n = len(x)
    s = 0.0
    for i in range(n):
        s += abs(x[i] - 1.0) * float(i)
    s += min(y, 1.0) + max(y, 1.0) + min(x[0], x[1], y) * max(x[1], y * 2.0)
    s += sum(t) + sum((y, y * y))   # tuples
    s += sum(x) * 0.5               # a 1-d array
    s += float(n) * y + int(y * 2.0) * y + float(3) + len(t)
    return s


@pytest.mark.parametrize("y", [0.4, 1.7])
def test_builtins(y):
    x = np.array([0.3, 1.4, 0.8, 2.1])
    check_grad(builtins_fn, x, y, (0.5, 1.5))


def min_max_of_array(x):
    return min(x) * max(x) + min(x * x)


def test_builtin_min_max_of_1d_array():
    check_grad(min_max_of_array, np.array([0.3, 1.4, 0.8, 2.1]))


# ============================================================================
# numpy
# ============================================================================

def np_unary(x):
    return np.sum(np.sin(x) + np.cos(x) * np.tan(x * 0.5) + np.exp(x) * np.log(x) + np.sqrt(x) * np.tanh(x))


def np_unary_out(x, out):
    np.sin(x, out=out)
    np.exp(out, out=out)


def np_reductions(A):
    return np.sum(A) * np.sum(A * A) + A.sum() + np.sum(A, axis=0)[1] + np.sum(A, axis=1)[0]


def np_products(A, B, v, out):
    C = np.matmul(A, B)
    D = A @ B
    w = np.dot(v, v) + v.dot(v)
    out[0] = np.sum(C * D) * w + np.dot(A[0], B[:, 1])
    np.matmul(A, B, out=C)
    out[1] = np.sum(C) + np.sum(np.dot(A, B))


def np_alloc(x, out):
    a = np.zeros(x.shape[0])
    b = np.ones((2, x.shape[0]))
    c = np.empty(3)
    d = np.zeros_like(x)
    e = np.copy(x)
    f = x.copy()
    for i in range(x.shape[0]):
        a[i] = x[i] * 2.0
        d[i] = e[i] * f[i]
        b[1, i] = a[i] * d[i]
    c[0] = 1.0
    c[1] = x[0]
    c[2] = c[0] + c[1]
    e[0] = 100.0          # copies are independent of x
    out[0] = np.sum(a * b) + np.sum(d) + np.sum(c * c) + np.sum(x - f)


def np_shapes(A, out):
    n, m = A.shape
    t = A.T
    r = A.reshape(m, n)
    r2 = A.reshape((n * m,))
    s = 0.0
    for i in range(m):
        for j in range(n):
            s += t[i, j] * r[i, j]
    out[0] = s + np.sum(r2 * r2) * n + np.sum(A.T @ A)


def ag_np_unary(x):
    return anp.sum(anp.sin(x) + anp.cos(x) * anp.tan(x * 0.5) + anp.exp(x) * anp.log(x) + anp.sqrt(x) * anp.tanh(x))


def test_numpy_elementwise():
    check_grad(np_unary, arr(5))
    x, t = arr(5), arr(5)
    g = zymo.gradient(Reverse, np_unary, x.copy())[0]
    assert_tree_close(g, autograd_grad(ag_np_unary, x), 1e-10, 1e-12)
    (ft,) = zymo.autodiff(Forward, np_unary, Duplicated, Duplicated(x.copy(), t.copy()))
    assert_tree_close(ft, autograd_jvp(ag_np_unary, [x], [t]), 1e-10, 1e-12)


def test_numpy_ufunc_out():
    check_grad(np_unary_out, arr(4), np.zeros(4))


def test_numpy_reductions():
    check_grad(np_reductions, arr(3, 2))


def test_numpy_products():
    check_grad(np_products, arr(3, 2), arr(2, 3), arr(3), np.zeros(2))


def test_numpy_allocation():
    check_grad(np_alloc, arr(3), np.zeros(1))


def test_numpy_shapes_transpose_reshape():
    check_grad(np_shapes, arr(2, 3), np.zeros(1))


def reshape_of_transpose(A):
    flat = A.T.reshape(6)            # A.T is not contiguous: NumPy returns a copy
    return np.sum(flat * flat)


def reshape_of_transpose_write(A, x):
    flat = np.reshape(A.T, (6,))
    flat[0] = x[0] * 5.0             # writes the copy, not A
    return np.sum(flat * flat) + np.sum(A)


def test_reshape_of_non_contiguous_array():
    A = arr(2, 3)
    g = zymo.gradient(Reverse, reshape_of_transpose, A.copy())[0]
    assert_tree_close(g, 2 * A, 1e-12, 1e-12)
    check_grad(reshape_of_transpose, A)
    check_grad(reshape_of_transpose_write, A, arr(1))


# ============================================================================
# calls to module-level user functions and nested functions
# ============================================================================

def helper_square(v, scale=1.0):
    return v * v * scale


def helper_fill(out, x, offset=0, factor=2.0):
    for i in range(len(x)):
        out[i + offset] = helper_square(x[i], scale=factor)


def helper_chain(x):
    return helper_square(helper_square(x), 0.5) + helper_square(scale=3.0, v=x)


def calls_user_functions(x, out):
    helper_fill(out, x)                    # defaults
    helper_fill(out, x[0:2], 1, factor=x[2])
    out[0] += helper_chain(x[1])


def test_module_level_calls():
    check_grad(calls_user_functions, arr(3), np.zeros(3))
    check_grad(helper_chain, 0.9)
    (d,) = zymo.autodiff(Reverse, helper_chain, Active, Active(0.9))
    assert d[0] == pytest.approx(autograd_grad(lambda x: 0.5 * x ** 4 + 3.0 * x * x, 0.9), rel=1e-12)


def nested_functions(x, y):
    k = 3.0

    def inner(a, b=2.0, c=1.0):
        return a * b * k + c          # reads k and y from the enclosing function
    def twice(v, f=inner):
        return f(f(v))
    g = lambda v, w=1.5: v * w + y  # noqa: E731  (a lambda with a default, under test)
    s = inner(x) + inner(x, y) + inner(x, c=y, b=0.5) + inner(b=x, a=y)
    return s + twice(x) + g(x) + g(x, w=y)


def test_nested_functions_with_defaults_and_keywords():
    check_grad(nested_functions, 0.8, 1.3)


def make_closure(scale):
    def f(x):
        return x * x * scale
    return f


def test_closure_over_float():
    f = make_closure(2.5)
    (d,) = zymo.autodiff(Reverse, f, Active, Active(1.2))
    assert d[0] == pytest.approx(2 * 1.2 * 2.5)
    g = make_closure(4.0)
    (d,) = zymo.autodiff(Reverse, g, Active, Active(1.2))
    assert d[0] == pytest.approx(2 * 1.2 * 4.0)
    check_grad(g, 0.3)


# ============================================================================
# seed 001: a function that mutates its input after reading it
# ============================================================================

def square_then_zero(x):
    res = 0.0
    for i in range(len(x)):
        res += x[i] * x[i]
        x[i] = 0.0
    return res


def square_in_place_then_sum(x):
    for i in range(len(x)):
        x[i] = x[i] ** 2
    return np.sum(x)


@pytest.mark.parametrize("fn", [square_then_zero, square_in_place_then_sum], ids=lambda f: f.__name__)
def test_mutating_input_after_read_exact(fn):
    x0 = np.array([1.0, 2.0, -3.0, 0.5])
    x, dx = x0.copy(), np.zeros(4)
    zymo.autodiff(Reverse, fn, Active, Duplicated(x, dx))
    np.testing.assert_array_equal(dx, 2.0 * x0)       # exact, not approximately
    x, tx = x0.copy(), np.ones(4)
    (t,) = zymo.autodiff(Forward, fn, Duplicated, Duplicated(x, tx))
    assert t == 2.0 * np.sum(x0)
    check_grad(fn, x0)


# ============================================================================
# ReverseWithPrimal / ForwardWithPrimal
# ============================================================================

def primal_fn(x, y, out):
    out[0] = np.sum(x * x) * y
    x[0] = 5.0
    return out[0] + y


def primal_tuple_ret(x):
    return x * 2.0, x * x


def test_with_primal_modes():
    x0, y = arr(3), 1.3
    expect = float(np.sum(x0 * x0) * y + y)
    x, dx, out, dout = x0.copy(), np.zeros(3), np.zeros(1), np.zeros(1)
    derivs, primal = zymo.autodiff(ReverseWithPrimal, primal_fn, Active, Duplicated(x, dx), Active(y),
                                   Duplicated(out, dout))
    assert primal == pytest.approx(expect)
    assert derivs[0] is None and derivs[2] is None
    assert derivs[1] == pytest.approx(np.sum(x0 * x0) + 1.0)
    assert_tree_close(dx, 2 * x0 * y, 1e-12, 1e-12)
    assert x[0] == 5.0 and out[0] == pytest.approx(np.sum(x0 * x0) * y)   # the primal ran
    (plain,) = zymo.autodiff(Reverse, primal_fn, Active, Duplicated(x0.copy(), np.zeros(3)), Active(y),
                             Duplicated(np.zeros(1), np.zeros(1)))
    assert plain[1] == pytest.approx(derivs[1])

    x, tx, out, tout = x0.copy(), np.ones(3), np.zeros(1), np.zeros(1)
    tangent, primal = zymo.autodiff(ForwardWithPrimal, primal_fn, Duplicated, Duplicated(x, tx),
                                    Duplicated(y, 0.5), Duplicated(out, tout))
    assert primal == pytest.approx(expect)
    assert tangent == pytest.approx(2 * np.sum(x0) * y + np.sum(x0 * x0) * 0.5 + 0.5)
    assert tout[0] == pytest.approx(2 * np.sum(x0) * y + np.sum(x0 * x0) * 0.5)
    assert tx[0] == 0.0 and np.all(tx[1:] == 1.0)        # x[0] = 5.0 stores a constant
    # Const return in forward mode: the primal alone
    (p,) = zymo.autodiff(ForwardWithPrimal, primal_fn, Const, Duplicated(x0.copy(), np.ones(3)),
                         Duplicated(y, 0.5), Duplicated(np.zeros(1), np.zeros(1)))
    assert p == pytest.approx(expect)
    # tuple returns in forward mode
    tangent, primal = zymo.autodiff(ForwardWithPrimal, primal_tuple_ret, Duplicated, Duplicated(1.5, 1.0))
    assert primal == (3.0, 2.25)
    assert tangent == pytest.approx((2.0, 3.0))


# ============================================================================
# repeated calls: the compile cache gives the same correct answers
# ============================================================================

def cached_fn(x, n):
    s = 0.0
    for i in range(n):
        s += np.sum(np.sin(x) * (i + 1.0))
    x[0] = s
    return s * x[0]


def test_repeated_calls_compile_cache():
    results = []
    for _rep in range(3):
        for x0 in (np.array([0.3, 0.7]), np.array([1.1, 0.2, 0.5])):
            for n in (1, 3):
                x, dx = x0.copy(), np.zeros_like(x0)
                zymo.autodiff(Reverse, cached_fn, Active, Duplicated(x, dx), n)
                s = np.sum(np.sin(x0)) * n * (n + 1) / 2
                expect = 2 * s * np.cos(x0) * n * (n + 1) / 2
                assert_tree_close(dx, expect, 1e-12, 1e-12)
                (t,) = zymo.autodiff(Forward, cached_fn, Duplicated, Duplicated(x0.copy(), np.ones_like(x0)), n)
                assert t == pytest.approx(np.sum(expect))
                results.append(dx.copy())
    for a, b in zip(results[:4], results[4:8]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(results[:4], results[8:]):
        np.testing.assert_array_equal(a, b)
    # different dtypes and ndims through the same function
    x32 = np.array([0.3, 0.7], dtype=np.float32)
    g32 = zymo.gradient(Reverse, cached_fn, x32.copy(), 2)[0]
    assert g32.dtype == np.float32
    g64 = zymo.gradient(Reverse, cached_fn, x32.astype(np.float64), 2)[0]
    assert_tree_close(g32, g64, 1e-5, 1e-5)


SCALE = 2.0
N_TERMS = 2


def reads_globals(x):
    s = 0.0
    for i in range(N_TERMS):
        s += x[i] * SCALE
    return s


def test_repeated_calls_see_rebound_globals():
    global SCALE, N_TERMS
    try:
        for scale, n in ((2.0, 2), (3.0, 2), (3.0, 3), (2.0, 2)):
            SCALE, N_TERMS = scale, n
            g = zymo.gradient(Reverse, reads_globals, np.ones(4))[0]
            np.testing.assert_array_equal(g, [scale] * n + [0.0] * (4 - n))
            (t,) = zymo.autodiff(Forward, reads_globals, Duplicated, Duplicated(np.ones(4), np.ones(4)))
            assert t == scale * n
    finally:
        SCALE, N_TERMS = 2.0, 2


def alias_fn(a, b):
    a[0] = b[1] * b[1]
    return a[0] + b[0]


def test_repeated_calls_with_different_alias_patterns():
    for _rep in range(2):
        # a and b are the same array: the function is 2 * x1^2 (and x0 is overwritten)
        x, dx = np.array([1.0, 2.0]), np.zeros(2)
        zymo.autodiff(Reverse, alias_fn, Active, Duplicated(x, dx), Duplicated(x, dx))
        np.testing.assert_array_equal(dx, [0.0, 8.0])
        shared = Duplicated(np.array([1.0, 2.0]), np.array([0.0, 1.0]))
        (t,) = zymo.autodiff(Forward, alias_fn, Duplicated, shared, shared)
        assert t == 8.0
        # two different arrays with the same values
        x, y, dx, dy = np.array([1.0, 2.0]), np.array([1.0, 2.0]), np.zeros(2), np.zeros(2)
        zymo.autodiff(Reverse, alias_fn, Active, Duplicated(x, dx), Duplicated(y, dy))
        np.testing.assert_array_equal(dx, [0.0, 0.0])
        np.testing.assert_array_equal(dy, [1.0, 4.0])


def test_repeated_calls_with_generated_code_and_ir():
    x = np.array([0.3, 0.7])
    src1 = zymo.generated_code(Reverse, cached_fn, Active, Duplicated(x, np.zeros(2)), 2)
    src2 = zymo.generated_code(Reverse, cached_fn, Active, Duplicated(x, np.zeros(2)), 2)
    assert src1 == src2 and "def " in src1
    assert "cached_fn" in str(zymo.ir(cached_fn, x, 2))
    np.testing.assert_array_equal(x, [0.3, 0.7])      # generated_code and ir do not run f


# ============================================================================
# forward mode never changes tangents of memory that is only read
# ============================================================================

def reads_only(A, b, out):
    s = 0.0
    for i in range(A.shape[0]):
        s += np.sum(A[i] * b) * A[i, 0]
    out[0] = s
    out[1] = np.sum(A @ b)
    c = b.T
    u = A[:, 0]
    out[2] = np.sum(c * c) + np.sum(u)


def test_forward_never_changes_tangents_of_read_only_memory():
    A, b = arr(3, 2), arr(2)
    tA, tb = arr(3, 2), arr(2)
    tA0, tb0 = tA.copy(), tb.copy()
    tout = np.zeros(3)
    zymo.autodiff(Forward, reads_only, Const, Duplicated(A.copy(), tA), Duplicated(b.copy(), tb),
                  Duplicated(np.zeros(3), tout))
    np.testing.assert_array_equal(tA, tA0)
    np.testing.assert_array_equal(tb, tb0)
    assert np.any(tout != 0)
    check_grad(reads_only, A, b, np.zeros(3))
    # and with a float return
    (t,) = zymo.autodiff(Forward, np_unary, Duplicated, Duplicated(b.copy(), tb))
    np.testing.assert_array_equal(tb, tb0)
