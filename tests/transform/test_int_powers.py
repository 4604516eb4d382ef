"""An int raised to an int power, as Python computes it, in every backend
(`transform.emit._int_power`): found in review 48, `(i + 1) ** -2` is 0.25 in Python and 0 in
Numba's int power, which the compiled backends computed silently."""
import numpy as np
import pytest
from helpers import assert_tree_close, fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse


def index_pow(x, h):
    s = 0.0
    for i in range(len(x)):
        t = (i + 1) ** -2
        u = (i - 1) ** 2
        s += t * x[i] * h + u * x[i] ** 2
    return s


def var_pow(x, k):
    s = 0.0
    for i in range(len(x)):
        s += x[i] * (i + 1) ** k
    return s


X = np.array([0.7, 1.3, 0.4, 2.1])


def _grad(f, k, numba):
    dx = np.zeros(4)
    zymo.autodiff(Reverse, f, Active, Duplicated(X.copy(), dx), Const(k), numba=numba)
    return dx


@pytest.mark.parametrize("numba", [False, "kernels", True])
def test_a_negative_constant_power_of_an_int_is_a_float(numba):
    want = np.array([0.9 * (i + 1) ** -2 + 2 * (i - 1) ** 2 * X[i] for i in range(4)])
    g = _grad(index_pow, 0.9, numba)
    assert g[1] == pytest.approx(0.225, rel=1e-15) and np.all(g != 0.0)
    assert_tree_close(g, want, rtol=1e-15, atol=0)
    assert_tree_close(g, fd_grad(index_pow, [X.copy(), 0.9])[0], rtol=1e-6, atol=1e-9)
    fwd = [zymo.autodiff(Forward, index_pow, Duplicated, Duplicated(X.copy(), e), Const(0.9))[0] for e in np.eye(4)]
    assert_tree_close(g, np.array(fwd), rtol=1e-14, atol=0)


@pytest.mark.parametrize("numba", [False, "kernels", True])
def test_a_variable_power_of_an_int_raises_where_it_is_negative(numba):
    assert_tree_close(_grad(var_pow, 2, numba), np.array([1.0, 4.0, 9.0, 16.0]), rtol=0, atol=0)
    with pytest.raises(ValueError, match="negative int power"):
        _grad(var_pow, -2, numba)
