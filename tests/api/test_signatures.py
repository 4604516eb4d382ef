"""Signatures and calls as Python binds them: `*args`, `**kwargs`, keyword-only parameters
and their defaults, positional-only parameters, `f(*t)` and `f(**d)`, `functools.partial`
objects, bound methods and lambdas stored in variables, and callables without Python source
(`np.sin`, `np.linalg.det`, `math.exp`, `operator.mul`) differentiated through their rules.

Every derivative is checked against central differences and the other mode
(`zymo.testing.check_grad`), and against autograd or a closed form that a wrong binding would miss."""
from __future__ import annotations

import functools
import math
import operator

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

import zymo
from zymo import Forward, Reverse
from zymo.errors import UnsupportedSyntax, ZymoSourceError
from zymo.testing import check_grad


def scaled_powers(x, *scales, power=2, **opts):
    s = 0.0
    for c in scales:
        s = s + c * np.sum(x ** power)
    return s + shifted(x, **opts)


def shifted(x, shift=0.0, scale=1.0):
    return shift * scale * np.sum(x)


def varargs_callee(x):
    return scaled_powers(x, 1.0, 2.0, power=3)


def varargs_top(x, *rest):
    return np.sum(x * rest[0]) + np.sum(np.sin(x)) * rest[1]


OPTS = {"power": 2, "shift": 0.5}


def spread_call(x):
    t = (1.5, 0.5)
    return scaled_powers(x, *t, **OPTS) + scaled_powers(x, 1.0, shift=2.0, power=1)


def keyword_only(x, *, k=3.0):
    return np.sum(np.tanh(x)) * k


def positional_only(x, y, /, z=2.0):
    return np.sum(x * y) * z


def partial_inside(x):
    g = functools.partial(scaled_powers, x, power=2)
    return g(3.0)


DOUBLE = functools.partial(np.multiply, 2.0)


def partial_global_and_lambda(x):
    sq = lambda v, p=2: np.sum(v ** p)  # noqa: E731 (a lambda in a variable is what is tested)
    dot = np.dot
    return sq(DOUBLE(x)) + dot(x, x)


X = np.array([1.0, 2.0, -0.5])


def test_varargs_kwargs_and_keyword_defaults_in_a_callee():
    check_grad(varargs_callee, X.copy())
    (g,) = zymo.gradient(Reverse, varargs_callee, X.copy())
    np.testing.assert_allclose(g, 9 * X ** 2)  # (1 + 2) * 3 x^2: power=3 reached the callee


def test_star_and_double_star_expansion_at_a_call():
    check_grad(spread_call, X.copy())
    (g,) = zymo.gradient(Reverse, spread_call, X.copy())
    np.testing.assert_allclose(g, 2 * 2 * X + 0.5 + 3.0)


def test_varargs_of_the_differentiated_function():
    check_grad(varargs_top, X.copy(), 2.0, 3.0)
    g = zymo.gradient(Reverse, varargs_top, X.copy(), 2.0, 3.0)
    ref = autograd.grad(lambda x, a, b: anp.sum(x * a) + anp.sum(anp.sin(x)) * b, (0, 1, 2))(X.copy(), 2.0, 3.0)
    for mine, theirs in zip(g, ref):
        np.testing.assert_allclose(mine, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("numba", [False, True])
def test_keyword_only_and_positional_only_parameters(numba):
    for mode in (Reverse, Forward):
        (g,) = zymo.gradient(mode, keyword_only, X.copy(), numba=numba)
        np.testing.assert_allclose(g, 3.0 / np.cosh(X) ** 2)
        gx, gy = zymo.gradient(mode, positional_only, X.copy(), 2 * X, numba=numba)
        np.testing.assert_allclose(gx, 4 * X)
        np.testing.assert_allclose(gy, 2 * X)
    check_grad(keyword_only, X.copy())
    check_grad(positional_only, X.copy(), X + 1.0)


def test_partial_objects_lambdas_and_functions_in_variables():
    check_grad(partial_inside, X.copy())
    (g,) = zymo.gradient(Reverse, partial_inside, X.copy())
    np.testing.assert_allclose(g, 6 * X)
    check_grad(partial_global_and_lambda, X.copy())
    (g,) = zymo.gradient(Forward, partial_global_and_lambda, X.copy())
    np.testing.assert_allclose(g, 8 * X + 2 * X)


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return self.k * np.sum(x * x)


SCALER = Scaler(1.5)


def bound_method_in_a_variable(x):
    f = SCALER.apply
    return f(x) + f(2.0 * x)


def test_bound_method_in_a_variable():
    check_grad(bound_method_in_a_variable, X.copy())
    (g,) = zymo.gradient(Reverse, bound_method_in_a_variable, X.copy())
    np.testing.assert_allclose(g, 1.5 * (2 * X + 8 * X))


@pytest.mark.parametrize("mode", [Reverse, Forward])
def test_callables_without_source_use_their_rules(mode):
    a = np.array([[2.0, 1.0], [0.5, 3.0]])
    (g,) = zymo.gradient(mode, np.linalg.det, a.copy())
    np.testing.assert_allclose(g, np.linalg.det(a) * np.linalg.inv(a).T)
    assert zymo.gradient(mode, math.exp, 0.5)[0] == pytest.approx(math.exp(0.5))
    assert zymo.gradient(mode, operator.mul, 2.0, 3.0) == pytest.approx((3.0, 2.0))
    (g,) = zymo.gradient(mode, np.sum, a.copy())
    np.testing.assert_allclose(g, np.ones_like(a))
    j = zymo.jacobian(mode, np.sin, np.array([0.0, 1.0]))
    np.testing.assert_allclose(j, np.diag(np.cos([0.0, 1.0])))


def too_many(x):
    return shifted(x, 1.0, 2.0, 3.0)


def unknown_keyword(x):
    return shifted(x, offset=1.0)


def starred_assignment(x):
    a, *rest = (x, x, x)
    return np.sum(a) + len(rest)


def test_binding_errors_name_the_call():
    with pytest.raises(ZymoSourceError, match="positional arguments but 4 were given") as e:
        zymo.gradient(Reverse, too_many, X.copy())
    assert "test_signatures.py" in str(e.value)
    with pytest.raises(ZymoSourceError, match="unexpected keyword argument 'offset'"):
        zymo.gradient(Reverse, unknown_keyword, X.copy())
    with pytest.raises(UnsupportedSyntax, match="starred assignment"):
        zymo.gradient(Reverse, starred_assignment, X.copy())


def kwargs_methods(x, **opts):
    s = np.sum(x) * opts.get("shift", 0.0)
    for k, v in opts.items():
        if k != "shift":
            s = s + v * np.sum(x * x)
    return s


def calls_kwargs_methods(x, a):
    return kwargs_methods(x, shift=a, w1=2.0, w2=a * a)


def test_kwargs_is_a_dict_with_its_methods():
    check_grad(calls_kwargs_methods, X.copy(), 0.7)
    gx, ga = zymo.gradient(Reverse, calls_kwargs_methods, X.copy(), 0.7)
    np.testing.assert_allclose(gx, 0.7 + (2.0 + 0.49) * 2 * X)
    assert ga == pytest.approx(np.sum(X) + 2 * 0.7 * np.sum(X * X))
