"""The language zymo differentiates, item by item.

Every test checks forward AND reverse mode against central finite differences and
against each other (the dot-product test in `helpers.check`), and, where a
functional rewrite is natural, against autograd.
"""
from __future__ import annotations

import math

import autograd.numpy as anp
import numpy as np
import pytest

import zymo
from helpers import (assert_tree_close, autograd_grad, check, copy_tree, fd_grad, fd_jvp, rand_tree, run,
                     zymo_grad, zymo_jvp)
from zymo import Active, Const, Duplicated, Forward, ForwardWithPrimal, Reverse, ReverseWithPrimal

RNG = np.random.default_rng(1234)


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
    check(with_defaults, [x, 0.7])
    check(with_defaults, [x, 0.7, 2])
    check(with_defaults, [x, 0.7, 4, 0.25])


def test_default_args_are_active_when_given():
    (d,) = zymo.autodiff(Reverse, with_defaults, Active, Active(1.3), Active(0.7), Const(2), Active(0.5))
    assert d[0] == pytest.approx(0.5 * 2 * 1.3 + 0.7)
    assert d[1] == pytest.approx(1.3)
    assert d[2] is None
    assert d[3] == pytest.approx(1.3 ** 2)


def kw_callee(x, y=1.0, power=2, shift=0.0):
    return (x + shift) ** power * y


def kw_caller(x, y):
    a = kw_callee(x)
    b = kw_callee(x, y=y)
    c = kw_callee(x, power=3, shift=y)
    d = kw_callee(y, shift=x, y=2.0)
    return a + b + c + d


def test_keyword_arguments_at_call_sites():
    check(kw_caller, [1.2, 0.8])
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
    check(scalars, [x, n, flag])
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
    check(int_result_scaled, [x, 4])
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
    check(array_fn, [x], **tol)
    out = np.zeros(shape, dtype=dtype)
    check(array_mutating, [x, out], seed=None, **tol)
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
    check(tuple_of_floats, [t, 2.0])
    (ft,) = zymo.autodiff(Forward, tuple_of_floats, Duplicated, Duplicated(t, (1.0, 0.0)), 2.0)
    assert ft == pytest.approx(d[0][0])


def tuple_of_arrays(t, out):
    x, y = t
    out[0] = np.sum(x * y) + np.sum(np.sin(t[0]))
    t[1][0] = 0.0


def test_duplicated_tuple_of_arrays():
    t = (arr(3), arr(3))
    check(tuple_of_arrays, [t, np.zeros(1)], seed=None)
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
    check(list_of_arrays, [L, 0.8])
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
def op_neg(x, y): return -x * y + -(-y) - (-x)
def op_abs(x, y): return abs(x - y) * abs(-x) + abs(y)
def op_mixed(x, y): return (x + y) * (x - y) / (x * y + 1.0) ** 2 - x % y


OPS = [op_add, op_sub, op_mul, op_div, op_floordiv, op_mod, op_pow, op_neg, op_abs, op_mixed]


@pytest.mark.parametrize("fn", OPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("xy", [(1.3, 0.55), (0.6, 1.7)])
def test_scalar_operators(fn, xy):
    check(fn, list(xy))


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
    def wrap_sum(x, y, out):
        out[0] = 0.0
    x, y = arr(4), arr(4)

    def run_it(x, y, out):
        out[:] = fn(x, y)

    # the wrapper is a closure over `fn`: zymo inlines it
    check(run_it, [x, y, np.zeros(4)], seed=None)
    del wrap_sum


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
        check(compare_ops, list(xy))


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
    check(bool_ops, [x, y, flag])


def conditional_expr(x, y):
    a = x * x if x > y else y * y
    b = (x if x > 0.5 else 0.5) * (y if y < 1.0 else 2.0 * y)
    return a + b + (math.sin(x) if a > 1.0 else math.cos(y))


@pytest.mark.parametrize("x,y", [(1.2, 0.4), (0.3, 1.4), (0.7, 0.9)])
def test_conditional_expressions(x, y):
    check(conditional_expr, [x, y])


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
    check(if_elif_else, [x, k])


def if_on_array(x, out):
    for i in range(x.shape[0]):
        if x[i] > 1.0:
            out[i] = x[i] * x[i]
        elif x[i] > 0.0:
            out[i] = math.sin(x[i])
        else:
            out[i] = -x[i]


def test_if_inside_loop_over_array():
    check(if_on_array, [np.array([1.5, 0.5, -0.3, 2.2]), np.zeros(4)], seed=None)
