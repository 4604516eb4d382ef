"""Increment stores `x[s] += e` (issue 32, item 3; `transform/reverse/increments.py`): their
adjoint reads `dx[s]` once and sends it to `e`, without the round trip `dt = dx[s]; dx[s] =
0.0; ...; dx[s] += dt` in each iteration; where the rule's conditions fail the round trip stays.

Each function is checked in both modes against central differences and forward against
reverse (`zymo.testing.check_grad`), then its generated adjoint sweep is inspected.
"""
import re

import numpy as np
import pytest

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.testing import check_grad


def plus_equals(x, y):
    for i in range(x.shape[0]):
        x[i] += y[i] * y[i]
    return np.sum(x * x)


def minus_equals(x, y):
    for i in range(x.shape[0]):
        x[i] -= np.sin(y[i])
    return np.sum(x * x)


def spelled_out(x, y):
    for i in range(x.shape[0]):
        x[i] = x[i] + 3.0 * y[i]
    return np.sum(x * x)


def term_first(x, y):
    for i in range(x.shape[0]):
        x[i] = y[i] * y[i] + x[i]
    return np.sum(x * x)


def term_minus_element(x, y):
    """`x[i] = e - x[i]`: the load's adjoint is `-dv`, no increment."""
    for i in range(x.shape[0]):
        x[i] = y[i] - x[i]
    return np.sum(x * x)


def matmul(c, a, b):
    """gemm's nest: `C[i, j] += A[i, k] * B[k, j]` in the innermost loop."""
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * b[k, j]
    return np.sum(c * c)


def constant_step(x, y):
    """An inactive term: the store's adjoint leaves `dx[i]` as it is, and writes nothing."""
    for i in range(x.shape[0]):
        x[i] += 0.5
    return np.sum(x * x * y)


def through_view(x, y):
    """`e` reads `x[i]` again through a view: its adjoint adds into `dx[i]`, which commutes."""
    v = x[:]
    for i in range(x.shape[0]):
        x[i] = x[i] + v[i] * y[i]
    return np.sum(x * x)


def load_used_twice(x, y):
    """One load of `x[i]` read by the product and the sum: the round trip stays."""
    for i in range(x.shape[0]):
        x[i] = x[i] + x[i] * y[i]
    return np.sum(x * x)


def store_between(x, y):
    """A store into a view of `x` between the load and the store: the round trip stays (the
    view store's adjoint reads and zeroes `dx[i + 1]`)."""
    v = x[1:]
    for i in range(x.shape[0] - 1):
        t = x[i + 1]
        v[i] = 2.0 * y[i]
        x[i + 1] = t + y[i]
    return np.sum(x * x)


def _dup(a):
    return Duplicated(a.copy(), np.zeros_like(a))


def _adjoint(f, *args):
    src = zymo.generated_code(Reverse, f, Active, *(_dup(a) for a in args))
    return src.split("# adjoint sweep")[1]


def _zeroes_element(adjoint, shadow):
    """Whether the adjoint sweep sets an element of `shadow` to zero (a store's adjoint)."""
    return re.search(rf"\b{shadow}\[[^\]]*\] = 0\.0", adjoint) is not None


def _rng(seed):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("f", [plus_equals, minus_equals, spelled_out, term_first, through_view, constant_step])
def test_increments_read_the_shadow_once(f):
    x, y = _rng(0).random(5) - 0.5, _rng(1).random(5) + 0.5
    check_grad(f, x, y)
    adjoint = _adjoint(f, x, y)
    assert not _zeroes_element(adjoint, "dx")
    assert "dx[i] +=" not in adjoint or f is through_view  # the view's load adds into `dx_1[i]`


def test_an_inactive_term_writes_nothing():
    x, y = _rng(2).random(4), _rng(3).random(4)
    adjoint = _adjoint(constant_step, x, y)
    assert "dx[i]" not in adjoint


@pytest.mark.parametrize("f", [term_minus_element, load_used_twice, store_between])
def test_the_round_trip_stays_where_the_rule_does_not_hold(f):
    x, y = _rng(4).random(5) - 0.5, _rng(5).random(5) + 0.5
    check_grad(f, x, y)
    assert _zeroes_element(_adjoint(f, x, y), "dx")


def test_nested_loops_two_dimensions():
    c, a, b = _rng(6).random((3, 4)), _rng(7).random((3, 2)), _rng(8).random((2, 4))
    check_grad(matmul, c, a, b)
    adjoint = _adjoint(matmul, c, a, b)
    assert not _zeroes_element(adjoint, "dc")
    assert re.search(r"= dc\[\w+, \w+\]$", adjoint, re.M)  # read once, per iteration


def test_float32_array_and_float64_term():
    """`x[i]` float32, the term float64: the sum is float64, cast back by the store."""
    x, y = (_rng(9).random(5) - 0.5).astype(np.float32), _rng(10).random(5) + 0.5
    want = zymo.gradient(Reverse, plus_equals, x.astype(np.float64), y)
    got = zymo.gradient(Reverse, plus_equals, x.copy(), y)
    assert got[0].dtype == np.float32
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    assert not _zeroes_element(_adjoint(plus_equals, x, y), "dx")


def complex_increment(x, y, z):
    for i in range(x.shape[0]):
        x[i] += y[i] * z[i]  # a complex product and a real one into complex memory
        x[i] -= z[i]
    return np.sum(np.real(x * np.conj(x)))


def test_complex_memory():
    rng = _rng(11)
    x = rng.random(4) - 0.5 + 1j * (rng.random(4) - 0.5)
    y = rng.random(4) + 1j * rng.random(4)
    z = rng.random(4) + 0.5
    check_grad(complex_increment, x, y, z)
    assert not _zeroes_element(_adjoint(complex_increment, x, y, z), "dx")


def test_kernels_backend_agrees():
    """The "kernels" backend (where gemm's nest becomes a BLAS call when the check passes)
    against the closed form: `c + a @ b` squared and summed."""
    c, a, b = _rng(12).random((3, 4)), _rng(13).random((3, 2)), _rng(14).random((2, 4))
    dc = 2.0 * (c + a @ b)
    got = zymo.gradient(Reverse, matmul, c.copy(), a, b, numba="kernels")
    for g, w in zip(got, (dc, dc @ b.T, a.T @ dc)):
        np.testing.assert_allclose(g, w, rtol=1e-12)
