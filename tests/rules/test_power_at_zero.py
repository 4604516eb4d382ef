"""Powers at a zero base and at a zero exponent: a derivative term with a zero factor is zero.

`d/dy 0 ** y = 0 ** y * log 0` is `0 * -inf = nan` computed naively; JAX and autograd give 0
(the log of a zero base is taken as 0), and so does zymo, in every power rule (`**` of
numbers and arrays, `np.power`, `np.float_power`, `math.pow`, `zymo.fpow`), in both modes and
both backends. Likewise `d/dx x ** 0 = 0 * x ** -1` is 0 at `x = 0`, not `0 * inf`. Away from
these points the derivatives are unchanged (checked against central differences)."""
from __future__ import annotations

import math

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

import zymo
from zymo import Forward, Reverse
from zymo.testing import check_grad


def np_power_base0(y):
    return np.sum(np.power(0.0, y) + np.power(y, 2.0))


def pow_base0(y):
    return 0.0 ** y + y * y


def math_pow_base0(y):
    return math.pow(0.0, y) + y * y


def float_power_base0(y):
    return np.sum(np.float_power(0.0, y) + y * y)


def pow_exp0(x):
    return np.sum(x ** 0.0 + x * x)


def pow_exp0_number(x, k):
    return x ** k + 3.0 * x


Y = np.array([0.5, 1.0, 2.0])


@pytest.mark.slow
@pytest.mark.parametrize("numba", [False, True])
@pytest.mark.parametrize("mode", [Reverse, Forward])
def test_zero_base_has_zero_derivative_in_the_exponent(mode, numba):
    for f in (np_power_base0, float_power_base0):
        (g,) = zymo.gradient(mode, f, Y.copy(), numba=numba)
        np.testing.assert_allclose(g, 2 * Y)  # only y**2's part
    for f in (pow_base0, math_pow_base0):
        (g,) = zymo.gradient(mode, f, 2.0, numba=numba)
        assert g == pytest.approx(4.0)


def test_zero_base_agrees_with_autograd():
    (g,) = zymo.gradient(Reverse, np_power_base0, Y.copy())
    ref = autograd.grad(lambda y: anp.sum(anp.power(0.0, y) + anp.power(y, 2.0)))(Y.copy())
    np.testing.assert_allclose(g, ref)


@pytest.mark.slow
@pytest.mark.parametrize("numba", [False, True])
@pytest.mark.parametrize("mode", [Reverse, Forward])
def test_zero_exponent_at_zero_base(mode, numba):
    x = np.array([0.0, 1.5, -2.0])
    (g,) = zymo.gradient(mode, pow_exp0, x.copy(), numba=numba)
    np.testing.assert_allclose(g, 2 * x)
    g = zymo.gradient(mode, pow_exp0_number, 0.0, zymo.Const(0), numba=numba)[0]
    assert g == 3.0


def test_away_from_zero_the_rules_are_unchanged():
    check_grad(np_power_base0, Y + 0.1)
    check_grad(pow_exp0, np.array([0.3, 1.5, 2.0]))
    check_grad(lambda_free_power, np.array([0.4, 1.2]), np.array([1.5, 2.5]))


def lambda_free_power(x, y):
    return np.sum(np.power(x, y) * x)
