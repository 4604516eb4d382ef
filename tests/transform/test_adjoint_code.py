"""The shape of the adjoint code issue 4's performance work relies on.

- `np.f(x, y, out=x)` updates `x`'s adjoint in place instead of copying, zeroing and
  accumulating it back (`Reverse._update_in_place`);
- a scalar adjoint whose first mention in its block is `d += e` starts as `d = e`
  (`_fold_zero_inits`), which keeps `0.0 + e` off an inner loop's carried chain;
- loops run backwards as a count up (`for _r in range(n): i = n - 1 - _r`);
- a temporary's shadow whose first adjoint is a reduction's is that adjoint broadcast into a
  fresh array (`dt = _rt.as_tangent(...)`), not zeros plus an add;
- constant arithmetic from literal arguments is folded (`x ** (2 - 1)` is `x`).

Each function is checked in both modes against central differences and the other mode
(`zymo.testing.check_grad`), then the generated program is inspected; the cases where the shortcut
must not apply (the output read twice, an operand that overlaps the output, an adjoint first
touched inside a branch) are checked the same way.
"""
import math
import re

import numpy as np
import pytest
from helpers import assert_tree_close

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.testing import check_grad


def layers(W, b, X, h):
    """mlp_loss's layer: the buffer is written by `out=` and then updated in place."""
    np.dot(X, W, out=h)
    h += b
    np.tanh(h, out=h)
    return np.sum(h * h)


def square_in_place(x, y):
    """`x` is read twice by the op that overwrites it: the copy stays."""
    np.multiply(x, x, out=x)
    x += y
    return np.sum(np.sin(x))


def reversed_operand(x):
    """The other operand is a view of the output: the copy stays."""
    np.add(x, x[::-1], out=x)
    return np.sum(x * x * np.arange(1.0, x.shape[0] + 1.0))


def branchy(x, c):
    """A scalar adjoint first touched inside a branch keeps its `= 0.0`."""
    s = 0.0
    for i in range(x.shape[0]):
        t = x[i] * x[i]
        if c[i] > 0:
            s += t * 3.0
        else:
            s += math.sin(t)
    return s


def triangle(x, w):
    """gmm's inner loops: a triangular nest whose inner adjoint carries a float."""
    s = 0.0
    for r in range(x.shape[0]):
        t = x[r]
        for c in range(r):
            t += w[r, c] * x[c]
        s += t * t
    return s


def sum_of_powers(x):
    """`np.sum(x ** 2)` (sumsq_vectorized) and a cube: the power rule with literal exponents."""
    return np.sum(x ** 2) + np.sum(x ** 3)


def row_sums(x):
    """A reduction along an axis of a temporary: its adjoint is broadcast back."""
    t = np.exp(x)
    return np.sum(np.sum(t, axis=1) ** 2)


def _code(f, *args, numba=False):
    ann = [Duplicated(a, np.zeros_like(a)) if isinstance(a, np.ndarray) and a.dtype == float else a
           for a in args]
    return zymo.generated_code(Reverse, f, Active, *ann, numba=numba)


def _adjoint(src):
    return src.split("# adjoint sweep", 1)[1]


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def test_in_place_update_of_an_out_buffer(rng):
    W, b, X = rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((5, 4))
    check_grad(layers, W, b, X, np.zeros((5, 3)))
    adj = _adjoint(_code(layers, W, b, X, np.zeros((5, 3))))
    assert ".copy()" not in adj and "np.copy" not in adj
    assert "dh[...] = dh * (1.0 - h * h)" in adj  # tanh's adjoint, in place
    assert "db += _rt.unbroadcast(dh, db)" in adj  # `h += b`: b reads dh, dh is unchanged


def test_in_place_update_is_not_used_when_the_output_is_read_twice(rng):
    x, y = rng.standard_normal(6), rng.standard_normal(6)
    check_grad(square_in_place, x, y)
    assert ".copy()" in _adjoint(_code(square_in_place, x, y))


def test_in_place_update_is_not_used_when_an_operand_overlaps_the_output(rng):
    x = rng.standard_normal(7)
    check_grad(reversed_operand, x)
    assert ".copy()" in _adjoint(_code(reversed_operand, x))


def test_zero_inits_fold_into_the_first_accumulation(rng):
    x, w = rng.standard_normal(6), rng.standard_normal((6, 6))
    check_grad(triangle, x, w)
    adj = _adjoint(_code(triangle, x, w))
    # the inner loop's carried adjoint is copied, never `0.0 + ...`
    assert "dt_next = 0.0" not in adj
    inner = adj[adj.index("for _r", adj.index("for _r") + 1):]
    assert " = 0.0\n" not in inner.split("dw[")[0]


def test_a_branch_keeps_its_zero_init(rng):
    x, c = rng.standard_normal(8), np.array([1.0, -1.0] * 4)
    check_grad(branchy, x, c, const=[1])
    adj = _adjoint(_code(branchy, x, c))
    # the adjoints the `if` and the `else` accumulate into are initialised before the branch
    zeroed = set(re.findall(r"^\s+(\w+) = 0\.0$", adj, re.M))
    in_branches = set(re.findall(r"^\s{12,}(\w+) \+= ", adj.split("if ", 1)[1], re.M))
    assert in_branches and in_branches <= zeroed


def test_loops_run_backwards_as_a_count_up(rng):
    x, w = rng.standard_normal(5), rng.standard_normal((5, 5))
    adj = _adjoint(_code(triangle, x, w))
    assert ", -1):" not in adj
    assert "for _r" in adj and " - 1 - _r" in adj


@pytest.mark.slow
def test_the_same_code_compiles_with_numba(rng):
    numba = pytest.importorskip("numba")
    assert numba
    for f, args in ((layers, [rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((5, 4)),
                              np.zeros((5, 3))]),
                    (triangle, [rng.standard_normal(6), rng.standard_normal((6, 6))])):
        got = []
        for backend in (False, True):
            vals = [a.copy() for a in args]
            shadows = [np.zeros_like(a) for a in vals]
            zymo.autodiff(Reverse, f, Active, *[Duplicated(v, s) for v, s in zip(vals, shadows)], numba=backend)
            got.append(shadows)
        assert_tree_close(got[1], got[0], rtol=1e-12, atol=1e-12)
        assert max(float(np.abs(s).max()) for s in got[0]) > 0.1


def test_a_reduction_adjoint_becomes_the_shadow_and_constants_fold(rng):
    x = rng.standard_normal(7)
    check_grad(sum_of_powers, x)
    adj = _adjoint(_code(sum_of_powers, x))
    # the sum's operand has one adjoint in every element: the number itself scales the vjps
    # (`Reverse._uniform`), no array of it is made
    assert "np.zeros_like" not in adj and "_rt.as_tangent" not in adj and "expand_reduced" not in adj
    assert "(2 - 1)" not in adj and "(3 - 1)" not in adj
    assert "dx += _seed * 3 * x ** 2 + _seed * 2 * x\n" in adj  # x ** 1 is x inside; one accumulation
    assert "_rt.unbroadcast" not in adj  # each term has x's shape already (analysis/extents.py)


@pytest.mark.slow
def test_a_reduction_along_an_axis_becomes_the_shadow(rng):
    x = rng.standard_normal((4, 3))
    check_grad(row_sums, x)
    adj = _adjoint(_code(row_sums, x))
    # the reduction's adjoint broadcast back, and the sum's a new array adopted as it is (`as_shape`)
    assert "np.zeros_like" not in adj and adj.count("_rt.as_tangent(") == 1 and adj.count("_rt.as_shape(") == 1
    got = []
    for backend in (False, True):
        dx = np.zeros_like(x)
        zymo.autodiff(Reverse, row_sums, Active, Duplicated(x.copy(), dx), numba=backend)
        got.append(dx)
    assert_tree_close(got[1], got[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[0], 2 * np.sum(np.exp(x), axis=1)[:, None] * np.exp(x), rtol=1e-12)


# -- the adjoint of a sum's operand kept as one number (`Reverse._uniform`) -----------------


def sum_of_product(x, w):
    return np.sum(x * w)


def scaled_sum(a, x):
    """An active float operand: its adjoint is the sum over every element, not the number."""
    return np.sum(a * x + x)


def sum_and_corner(x):
    """The sum is not the only reader: the adjoint differs from element to element."""
    t = x * x
    return np.sum(t) + t[0, 1]


def log_sum_exp_rows(x):
    s = 0.0
    for i in range(x.shape[0]):
        e = np.exp(x[i] - np.max(x[i]))
        s += np.log(np.sum(e))
    return s


def test_a_sum_of_same_shaped_operands_scales_them_by_its_adjoint(rng):
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    check_grad(sum_of_product, x, w)
    adj = _adjoint(_code(sum_of_product, x, w))
    assert "expand_reduced" not in adj and "as_tangent" not in adj
    assert "dx += _seed * w" in adj
    dx, dw = zymo.gradient(Reverse, sum_of_product, x, w)
    np.testing.assert_allclose(dx, w, rtol=1e-12)
    np.testing.assert_allclose(dw, x, rtol=1e-12)


def test_a_broadcast_operand_keeps_the_array_adjoint(rng):
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((1, 4))
    check_grad(sum_of_product, x, w)
    adj = _adjoint(_code(sum_of_product, x, w))
    assert "expand_reduced" in adj and "_rt.unbroadcast" in adj
    dx, dw = zymo.gradient(Reverse, sum_of_product, x, w)
    np.testing.assert_allclose(dw, x.sum(axis=0, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(dx, np.broadcast_to(w, x.shape), rtol=1e-12)


def test_an_active_float_operand_gets_the_sum(rng):
    x = rng.standard_normal((3, 4))
    check_grad(scaled_sum, 1.5, x)
    da, dx = zymo.gradient(Reverse, scaled_sum, 1.5, x)
    np.testing.assert_allclose(da, np.sum(x), rtol=1e-12)
    np.testing.assert_allclose(dx, np.full((3, 4), 2.5), rtol=1e-12)


def test_a_second_reader_keeps_the_array_adjoint(rng):
    x = rng.standard_normal((3, 4))
    check_grad(sum_and_corner, x)
    expected = 2 * x.copy()
    expected[0, 1] += 2 * x[0, 1]
    (dx,) = zymo.gradient(Reverse, sum_and_corner, x)
    np.testing.assert_allclose(dx, expected, rtol=1e-12)


@pytest.mark.slow
def test_log_sum_exp_rows_both_backends(rng):
    x = rng.standard_normal((5, 4))
    check_grad(log_sum_exp_rows, x)
    adj = _adjoint(_code(log_sum_exp_rows, x))
    assert "expand_reduced(dt" not in adj.split("np.exp", 1)[0]  # the sum's adjoint: one number
    got = []
    for backend in (False, True):
        dx = np.zeros_like(x)
        zymo.autodiff(Reverse, log_sum_exp_rows, Active, Duplicated(x.copy(), dx), numba=backend)
        got.append(dx)
    assert_tree_close(got[1], got[0], rtol=1e-12, atol=1e-12)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    onehot = np.zeros_like(x)
    onehot[np.arange(5), np.argmax(x, axis=1)] = 1.0  # the max's own adjoint (not added back)
    np.testing.assert_allclose(got[0], e / e.sum(axis=1, keepdims=True) - onehot, rtol=1e-12, atol=1e-15)


# -- cheap top-level temporaries recomputed by the adjoint sweep (`Reverse._top_remat`) -------


def cheap_chain(u, v, out):
    """seed 003's right-hand side: `a * u * u / v` is two temporaries the adjoint reads."""
    out[...] = 1.5 * u * u / v - 0.5 * u
    return np.sum(out * out)


def operand_overwritten(x, y):
    """`t` reads `x`, which is overwritten before the adjoint sweep reads `t`."""
    t = x * y
    z = np.sin(t)
    x[...] = 0.0
    return np.sum(z)


def read_twice(x, y):
    """`t` has two readers in the primal: the forward sweep keeps it."""
    t = x * y
    return np.sum(np.sin(t) + t * t)


def test_cheap_temporaries_are_recomputed_not_kept(rng):
    u, v = rng.random(6) + 0.5, rng.random(6) + 0.5
    check_grad(cheap_chain, u, v, np.zeros(6))
    # under Numba the recomputation fuses into the adjoint's loop: nothing is kept
    src = _code(cheap_chain, u, v, np.zeros(6), numba=True)
    fwd, adj = src.split("# adjoint sweep", 1)
    assert "1.5 * u * u / v - 0.5 * u" in fwd  # one expression: nothing kept
    assert "(1.5 * u * u)" in adj  # recomputed where the adjoint reads it
    # the Python backend keeps the temporary: recomputing it would be whole-array passes again
    fwd, adj = _code(cheap_chain, u, v, np.zeros(6)).split("# adjoint sweep", 1)
    assert "t_2 = t_3 * u" in fwd and "1.5 * u * u" not in adj


def test_a_temporary_whose_operand_is_overwritten_is_kept(rng):
    x, y = rng.standard_normal(5), rng.standard_normal(5)
    check_grad(operand_overwritten, x, y)  # a recomputed `x * y` would read the zeros
    fwd, adj = _code(operand_overwritten, x, y).split("# adjoint sweep", 1)
    assert "x * y" not in adj and "np.cos(t" in adj


def test_a_temporary_read_twice_is_kept(rng):
    x, y = rng.standard_normal(5), rng.standard_normal(5)
    check_grad(read_twice, x, y)
    fwd, adj = _code(read_twice, x, y).split("# adjoint sweep", 1)
    assert re.search(r"\bt\w* = x \* y\n", fwd) and "x * y" not in adj


@pytest.mark.slow
def test_recomputed_temporaries_under_numba(rng):
    pytest.importorskip("numba")
    u, v = rng.random((4, 3)) + 0.5, rng.random((4, 3)) + 0.5
    got = []
    for backend in (False, True):
        su, sv, so = np.zeros_like(u), np.zeros_like(v), np.zeros_like(u)
        zymo.autodiff(Reverse, cheap_chain, Active, Duplicated(u.copy(), su), Duplicated(v.copy(), sv),
                      Duplicated(np.zeros_like(u), so), numba=backend)
        got.append((su, sv))
    assert_tree_close(got[1], got[0], rtol=1e-12, atol=1e-12)
    assert min(float(np.abs(s).max()) for s in got[0]) > 0.1


def temporary_read_in_a_loop(x, y):
    """A top-level temporary read inside a loop: the loop's adjoint reads it, never recomputes
    it once per iteration (found in review)."""
    t = x * y
    s = 0.0
    for i in range(3):
        q = t * (i + 1.0)
        s += np.sum(np.sin(q))
    return s


def test_a_temporary_read_in_a_loop_is_not_recomputed_there(rng):
    x, y = rng.standard_normal(5), rng.standard_normal(5)
    check_grad(temporary_read_in_a_loop, x, y)
    fwd, adj = _code(temporary_read_in_a_loop, x, y).split("# adjoint sweep", 1)
    assert "x * y" not in adj.split("for ", 1)[1]


def ranges(x):
    """Reversed loops of every shape: start 0, a positive, a negative start (x[-2] first), a
    negative step, a step of 3, and an empty range."""
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[i]
    for i in range(2, x.shape[0]):
        s += math.sin(x[i]) * x[i - 1]
    for i in range(-2, 3):
        s += x[i] * 0.5 * x[i]
    for i in range(x.shape[0] - 1, 0, -1):
        s += math.cos(x[i]) * x[i - 1]
    for i in range(1, x.shape[0], 3):
        s += x[i] ** 3
    for i in range(3, 1):
        s += x[i] * 100.0
    return s


def test_reversed_ranges():
    x = np.linspace(0.2, 1.4, 7)
    check_grad(ranges, x)
    adj = zymo.generated_code(Reverse, ranges, Active, Duplicated(x.copy(), np.zeros_like(x)))
    assert "_rt.trip" not in adj and re.search(r"range\(_rt.span\(2, n(_\d+)?\)\)", adj) and "range(5)" in adj
    dx_py, dx_nb = np.zeros_like(x), np.zeros_like(x)
    zymo.autodiff(Reverse, ranges, Active, Duplicated(x.copy(), dx_py))
    zymo.autodiff(Reverse, ranges, Active, Duplicated(x.copy(), dx_nb), numba=True)
    np.testing.assert_allclose(dx_nb, dx_py, rtol=1e-12)
    assert np.abs(dx_py).min() > 1e-3


def mean_loss(x, y):
    t = np.logaddexp(0.0, x) - y * x
    return np.sum(t) / x.shape[0]


def test_a_reduction_divided_is_left_out_of_reverse():
    """`np.sum(t) / n` computes only the value `Reverse` does not return: an np.float64 divided
    by an int never raises (inf or nan at n = 0), so it is left out; the gradient is right."""
    x, y = np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.0, 1.0])
    check_grad(mean_loss, x, y)
    fwd = _code(mean_loss, x, y).split("# adjoint sweep")[0]
    assert "np.sum(" not in fwd, fwd
    (gx, gy) = zymo.gradient(Reverse, mean_loss, x.copy(), y.copy())
    np.testing.assert_allclose(gx, (1 / (1 + np.exp(-x)) - y) / 3)
    np.testing.assert_allclose(gy, -x / 3)
