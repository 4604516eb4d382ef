"""A callee returning a tuple of an array and a number, indexed or unpacked by the caller.

`np.sum` of the number (a reduction of a 0-d value) once crashed reverse mode with
`ValueError: output array is read-only`: its adjoint was a read-only broadcast that a later
contribution was added into. Checked against central differences, the other mode and
autograd."""
from __future__ import annotations

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

import zymo
from zymo import Forward, Reverse
from zymo.errors import ZymoUsageError
from zymo.testing import check_grad


def moments(x, t):
    m = np.mean(x)
    return (x - m) * t, m


def indexed(a):
    r = moments(a, 0.5)
    return np.sum(r[0] ** 2) + np.sum(r[1]) * 3.0


def unpacked(a):
    y, m = moments(a, 0.5)
    return np.sum(y ** 2) + np.sum(m) * 3.0


def autograd_ref(a):
    m = anp.mean(a)
    return anp.sum(((a - m) * 0.5) ** 2) + m * 3.0


A = np.random.default_rng(4).standard_normal((3, 4))


@pytest.mark.slow
@pytest.mark.parametrize("f", [indexed, unpacked])
def test_sum_of_a_returned_number(f):
    check_grad(f, A.copy())
    (g,) = zymo.gradient(Reverse, f, A.copy())
    np.testing.assert_allclose(g, autograd.grad(autograd_ref)(A.copy()))
    (gf,) = zymo.gradient(Forward, f, A.copy())
    np.testing.assert_allclose(gf, g)


def centered(a):
    return moments(a, 0.5)[0]


def test_forward_gradient_of_an_array_result_is_a_usage_error():
    with pytest.raises(ZymoUsageError, match="one float"):
        zymo.gradient(Forward, centered, A.copy())
