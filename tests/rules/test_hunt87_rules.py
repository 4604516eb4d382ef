"""Regression tests of hunt 87's rule findings: `np.arange` with an active start or step,
`np.linspace` with array endpoints, `np.linalg.norm` with a 2-tuple axis known only at run
time, `np.heaviside`'s derivative in `h0`, `np.var`/`np.std` with `ddof` equal to the count.

Each derivative is compared in Reverse and Forward mode with central finite differences and,
where JAX differentiates the same function, with `jax.grad` in float64.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import zymo
from zymo import Const, Forward, Reverse
from zymo.errors import ZymoError

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)


def _fd(f, args, i, h=1e-6):
    """Central differences of the number `f(*args)` in argument `i` (a float or an array)."""
    x = args[i]
    if np.ndim(x) == 0:
        hi = list(args)
        lo = list(args)
        hi[i], lo[i] = x + h, x - h
        return (f(*hi) - f(*lo)) / (2 * h)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        p, m = x.copy(), x.copy()
        p[k] += h
        m[k] -= h
        hi = list(args)
        lo = list(args)
        hi[i], lo[i] = p, m
        g[k] = (f(*hi) - f(*lo)) / (2 * h)
    return g


def _check(f, args, jf=None, rtol=1e-6, atol=1e-8, fd_atol=1e-5, **kw):
    """zymo's gradient of `f` at `args` in both modes against finite differences and `jf` (JAX)."""
    want_fd = [_fd(f, args, i) for i in range(len(args))]
    want_jax = jax.grad(jf, argnums=tuple(range(len(args))))(*args) if jf is not None else None
    for mode in (Reverse, Forward):
        got = zymo.gradient(mode, f, *[np.copy(a) if isinstance(a, np.ndarray) else a for a in args], **kw)
        for i in range(len(args)):
            np.testing.assert_allclose(got[i], want_fd[i], rtol=1e-5, atol=fd_atol, err_msg=f"{mode} vs FD, arg {i}")
            if want_jax is not None:
                np.testing.assert_allclose(got[i], np.asarray(want_jax[i]), rtol=rtol, atol=atol,
                                           err_msg=f"{mode} vs JAX, arg {i}")
            assert np.any(np.asarray(got[i]) != 0), "the test point must have a nonzero gradient"


# -- H6: np.arange with an active start or step ------------------------------------------------
# jnp.arange needs concrete bounds; its JAX twin is start + step * k with the same k.

def test_arange_active_start():
    def f(s):
        return np.sum(np.sin(np.arange(s, s + 3.0)))

    _check(f, (0.3,), lambda s: jnp.sum(jnp.sin(s + jnp.arange(3.0))))


def test_arange_active_step():
    def g(h):
        t = np.arange(0.0, 1.0, h)[:3]
        return np.sum(t ** 2)

    _check(g, (0.3,), lambda h: jnp.sum((h * jnp.arange(3.0)) ** 2))


def test_arange_start_and_step_and_stop():
    def f(s, e, h):  # stop only sets the count: derivative 0
        return np.sum(np.sin(np.arange(s, e, h)) * np.arange(1.0, 6.0))

    n = len(np.arange(0.2, 2.3, 0.45))
    assert n == 5

    def jf(s, e, h):
        return jnp.sum(jnp.sin(s + h * jnp.arange(5.0)) * jnp.arange(1.0, 6.0)) + 0.0 * e

    for mode in (Reverse, Forward):
        got = zymo.gradient(mode, f, 0.2, 2.3, 0.45)
        want = jax.grad(jf, argnums=(0, 1, 2))(0.2, 2.3, 0.45)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        assert got[1] == 0.0
    np.testing.assert_allclose(_fd(f, (0.2, 2.3, 0.45), 0), want[0], rtol=1e-6)
    np.testing.assert_allclose(_fd(f, (0.2, 2.3, 0.45), 2), want[2], rtol=1e-6)


def test_arange_lone_argument_is_the_stop():
    def f(s):  # np.arange(s): 0, 1, ..., ceil(s) - 1, piecewise constant in s
        return np.sum(np.arange(s) * s)

    for mode in (Reverse, Forward):
        assert zymo.gradient(mode, f, 3.5)[0] == pytest.approx(np.sum(np.arange(3.5)))


def test_arange_step_keyword():
    def f(h):
        return np.sum(np.cos(np.arange(0.0, 2.0, step=h)))

    n = len(np.arange(0.0, 2.0, 0.3))
    _check(f, (0.3,), lambda h: jnp.sum(jnp.cos(h * jnp.arange(float(n)))))


@pytest.mark.slow
def test_arange_active_numba():
    def f(s, h):
        return np.sum(np.sin(np.arange(s, s + 3.0, h)))

    want = jax.grad(lambda s, h: jnp.sum(jnp.sin(s + h * jnp.arange(6.0))), argnums=(0, 1))(0.3, 0.5)
    for mode in (Reverse, Forward):
        got = zymo.gradient(mode, f, 0.3, 0.5, numba=True)
        np.testing.assert_allclose(got, want, rtol=1e-9)


# -- H7: np.linspace with array endpoints ------------------------------------------------------
_R = np.random.default_rng(7)
_A, _B = _R.standard_normal(4), _R.standard_normal(4)
_W4 = _R.standard_normal((4, 4))
_W5 = _R.standard_normal((2, 5, 3))
_W3 = _R.standard_normal((3, 2))


def test_linspace_array_endpoints():
    def f(a, b):
        return np.sum(_W4 * np.linspace(a, b, 4))

    _check(f, (_A.copy(), _B.copy()), lambda a, b: jnp.sum(_W4 * jnp.linspace(a, b, 4)))


def test_linspace_broadcast_endpoints_axis():
    a, b = _R.standard_normal(3), _R.standard_normal((2, 3))

    def f(a, b):
        return np.sum(_W5 * np.linspace(a, b, 5, axis=1))

    _check(f, (a, b), lambda a, b: jnp.sum(_W5 * jnp.linspace(a, b, 5, axis=1)))


def test_linspace_endpoint_false_last_axis():
    a, b = _R.standard_normal(3), 0.7

    def f(a, b):
        return np.sum(_W3 * np.linspace(a, b, 2, endpoint=False, axis=-1) ** 2)

    _check(f, (a, b), lambda a, b: jnp.sum(_W3 * jnp.linspace(a, b, 2, endpoint=False, axis=-1) ** 2))


def test_linspace_other_num():
    a, b = _R.standard_normal(2), _R.standard_normal(2)
    w = _R.standard_normal((6, 2))

    def f(a, b):
        return np.sum(w * np.sin(np.linspace(a, b, 6)))

    _check(f, (a, b), lambda a, b: jnp.sum(w * jnp.sin(jnp.linspace(a, b, 6))))


def test_linspace_retstep_refused():
    def f(a):
        y, step = np.linspace(a, 2.0, 5, retstep=True)
        return np.sum(y) * step

    with pytest.raises(ZymoError, match="retstep"):
        zymo.gradient(Reverse, f, 0.5)


# -- H10: np.linalg.norm with a 2-tuple axis not written as a literal ---------------------------
_X = np.random.default_rng(1).standard_normal((3, 4))


@pytest.mark.parametrize("order", [1, 2, np.inf, -1, "nuc"])
def test_norm_matrix_axis_from_argument_refused(order):
    def f(x, o, ax):
        return np.linalg.norm(x, o, ax)

    def g(x, ax):
        return np.linalg.norm(x, order, ax)

    def h(x, i, j):
        return np.linalg.norm(x, order, (i, j))

    for mode in (Reverse, Forward):
        with pytest.raises(ZymoError, match="matrix norm|ord is known only at run time") as e:
            zymo.gradient(mode, g, _X.copy(), Const((0, 1)))
        assert "test_hunt87_rules.py" in str(e.value)
        with pytest.raises(ZymoError, match="matrix norm"):
            zymo.gradient(mode, h, _X.copy(), Const(0), Const(1))


def test_norm_runtime_ord_of_a_matrix_refused():
    def f(x, o, ax):
        return np.linalg.norm(x, o, ax)

    def g(x, o):
        return np.linalg.norm(x, o)

    with pytest.raises(ZymoError, match="ord is known only at run time"):
        zymo.gradient(Reverse, f, _X.copy(), Const(2), Const((0, 1)))
    with pytest.raises(ZymoError, match="ord is known only at run time"):
        zymo.gradient(Forward, g, _X.copy(), Const(1))


def test_norm_frobenius_axis_from_argument():
    def f(x, ax):
        return np.linalg.norm(x, None, ax)

    want = jax.grad(lambda x: jnp.linalg.norm(x, None, (0, 1)))(_X)
    for mode in (Reverse, Forward):
        got = zymo.gradient(mode, f, _X.copy(), Const((0, 1)))[0]
        np.testing.assert_allclose(got, want, rtol=1e-9)
        np.testing.assert_allclose(got, _fd(lambda x: f(x, (0, 1)), (_X,), 0), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("order", [1, 2, 3.0, np.inf])
def test_norm_vector_axis_and_ord_from_arguments(order):
    def f(x, o, ax):
        return np.sum(np.linalg.norm(x, o, ax) * np.arange(1.0, 4.0))

    want = jax.grad(lambda x: jnp.sum(jnp.linalg.norm(x, order, 1) * jnp.arange(1.0, 4.0)))(_X)
    for mode in (Reverse, Forward):
        got = zymo.gradient(mode, f, _X.copy(), Const(order), Const(1))[0]
        np.testing.assert_allclose(got, want, rtol=1e-9)


def test_norm_grad_refuses_a_matrix_norm_at_run_time():
    from zymo import runtime as rt

    for order in (1, 2, np.inf, "nuc"):
        with pytest.raises(NotImplementedError, match="matrix norm"):
            rt.norm_grad(_X, np.linalg.norm(_X, order, (0, 1)), order, (0, 1), False)


# -- H11: np.heaviside's derivative in h0 -------------------------------------------------------
_XZ = np.array([-1.0, 0.0, 2.0, 0.0])


def test_heaviside_h0_number():
    def f(a):
        return np.sum(np.heaviside(_XZ, a) * np.arange(1.0, 5.0))

    _check(f, (0.5,), lambda a: jnp.sum(jnp.heaviside(_XZ, a) * jnp.arange(1.0, 5.0)))
    assert zymo.gradient(Reverse, f, 0.5)[0] == 6.0


def test_heaviside_h0_broadcast_array():
    h0 = np.array([[0.5], [0.25], [2.0]])
    w = np.arange(12.0).reshape(3, 4)

    def f(h):
        return np.sum(np.heaviside(_XZ, h) * w)

    _check(f, (h0,), lambda h: jnp.sum(jnp.heaviside(_XZ, h) * w))


def test_heaviside_x_derivative_zero_and_nan():
    x = np.array([-1.5, 0.0, 2.0, np.nan])

    def f(x, a):
        return np.nansum(np.heaviside(x, a) * np.arange(1.0, 5.0)) + np.nansum(x * x)

    assert np.isnan(np.heaviside(np.nan, 0.5))
    for mode in (Reverse, Forward):
        gx, ga = zymo.gradient(mode, f, x.copy(), 0.5)
        np.testing.assert_array_equal(gx[:3], 2 * x[:3])  # heaviside adds 0 in x
        assert ga == 2.0  # only the exact zero; NaN x has a NaN value and derivative 0 in h0


def test_heaviside_in_x_at_points_away_from_zero():
    x = np.array([-1.5, 0.3, 2.0])

    def f(x, a):
        return np.sum(np.heaviside(x, a) * x)

    for mode in (Reverse, Forward):
        gx, ga = zymo.gradient(mode, f, x.copy(), 0.5)
        np.testing.assert_array_equal(gx, np.heaviside(x, 0.5))
        np.testing.assert_allclose(gx, jax.grad(lambda x: jnp.sum(jnp.heaviside(x, 0.5) * x))(x))
        assert ga == 0.0


def test_heaviside_numba():
    def f(a):
        return np.sum(np.heaviside(_XZ, a) * np.arange(1.0, 5.0))

    # Numba has no np.heaviside: a clear refusal at the user's line, and "prefer" falls back to Python
    with pytest.raises(ZymoError, match="heaviside") as e:
        zymo.gradient(Reverse, f, 0.5, numba=True)
    assert "test_hunt87_rules.py" in str(e.value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in (Reverse, Forward):
            assert zymo.gradient(mode, f, 0.5, numba="prefer")[0] == 6.0


# -- M4: np.var / np.std with ddof equal to the number of elements -------------------------------

def test_var_ddof_n_is_inf_not_an_exception():
    x = np.array([1.0, 3.0])

    def f(x):
        return np.var(x, ddof=2)

    def g(x):
        return np.var(x, ddof=3)  # beyond the count: NumPy divides by max(n - ddof, 0) = 0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert f(x) == np.inf and g(x) == np.inf
        for fn in (f, g):
            for mode in (Reverse, Forward):
                np.testing.assert_array_equal(zymo.gradient(mode, fn, x.copy())[0], [-np.inf, np.inf])
        # the same rule in a finite case, against JAX
        _check(lambda x: np.var(x, ddof=1), (np.array([1.0, 3.0, 4.5]),), lambda x: jnp.var(x, ddof=1))


def test_std_ddof_n_axis():
    a = np.arange(6.0).reshape(2, 3)

    def g(x):
        return np.sum(np.std(x, axis=1, ddof=3))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for mode in (Reverse, Forward):
            d = zymo.gradient(mode, g, a.copy())[0]
            assert d.shape == a.shape and np.all(np.isnan(d))  # d sqrt(S / 0) = c / (0 * inf)
        _check(lambda x: np.sum(np.std(x, axis=1, ddof=2)), (a + np.array([[0.0, 0.5, 0.0]]),),
               lambda x: jnp.sum(jnp.std(x, axis=1, ddof=2)))


# -- second order through the new rules (forward over reverse) -----------------------------------

def test_hvp_through_arange_and_linspace():
    def f(p):
        return np.sum(np.sin(np.arange(p[0], p[0] + 3.0, p[1])))

    def jf(p):
        return jnp.sum(jnp.sin(p[0] + p[1] * jnp.arange(6.0)))

    x, v = np.array([0.3, 0.5]), np.array([1.0, -0.5])
    np.testing.assert_allclose(zymo.hvp(f, x, v), jax.jvp(jax.grad(jf), (x,), (v,))[1], rtol=1e-9)

    w = np.random.default_rng(0).standard_normal((4, 3))

    def g(ab):
        return np.sum(w * np.linspace(ab[:3], ab[3:], 4) ** 2)

    def jg(ab):
        return jnp.sum(w * jnp.linspace(ab[:3], ab[3:], 4) ** 2)

    y, u = np.random.default_rng(1).standard_normal(6), np.linspace(-1.0, 1.0, 6)
    np.testing.assert_allclose(zymo.hvp(g, y, u), jax.jvp(jax.grad(jg), (y,), (u,))[1], rtol=1e-9)
