"""Regressions of hunt 87 in the linear-algebra rules: matmul of a 1-d operand with a stack,
solve of a stack with a 1-d right-hand side, lstsq of a wide matrix (the minimum-norm
solution) and of a rank-deficient one (refused), lstsq's empty residuals, det at a singular
matrix (the adjugate), qr of a wide matrix (refused). Each derivative is checked in Reverse
and Forward mode against central differences and JAX."""
from __future__ import annotations

import numpy as np
import pytest

import zymo
from zymo import Forward, Reverse
from zymo.errors import ZymoError

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def _fd(f, args, h=1e-6):
    out = []
    for k in range(len(args)):
        g = np.zeros_like(args[k])
        for i in np.ndindex(g.shape):
            p = [a.copy() for a in args]
            m = [a.copy() for a in args]
            p[k][i] += h
            m[k][i] -= h
            g[i] = (f(*p) - f(*m)) / (2 * h)
        out.append(g)
    return out


def _check(f, jf, args, numba=None, tol=1e-6):
    fd = _fd(f, args)
    jx = jax.grad(jf, argnums=tuple(range(len(args))))(*[jnp.asarray(a) for a in args])
    for k in range(len(args)):
        assert np.abs(fd[k]).max() > 1e-3  # a clearly nonzero gradient
        np.testing.assert_allclose(np.asarray(jx[k]), fd[k], atol=tol, rtol=tol)
    for mode in (Reverse, Forward):
        kw = {} if numba is None else {"numba": numba}
        got = zymo.gradient(mode, f, *[a.copy() for a in args], **kw)
        for k in range(len(args)):
            assert got[k].shape == args[k].shape
            np.testing.assert_allclose(got[k], np.asarray(jx[k]), atol=1e-9, rtol=1e-9, err_msg=f"{mode} arg {k}")


def _mm(a, b):
    return np.sum(np.sin(a @ b))


def _jmm(a, b):
    return jnp.sum(jnp.sin(a @ b))


_MATMUL_SHAPES = [((3, 3, 3), (3,)), ((2, 3, 4), (4,)), ((3,), (2, 3, 4)), ((3,), (3, 3, 3)),
                  ((5, 2, 3, 4), (4,)), ((3,), (5, 2, 3, 4)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 5)),
                  ((3, 4), (2, 4, 5)), ((2, 3, 4), (4, 2))]


@pytest.mark.parametrize("sa,sb", _MATMUL_SHAPES)
def test_matmul_stack_and_vector(sa, sb):
    rng = np.random.default_rng(3)
    _check(_mm, _jmm, [rng.standard_normal(sa), rng.standard_normal(sb)])


def test_matmul_np_matmul_and_dot_of_stacks():
    rng = np.random.default_rng(4)
    y, w = rng.standard_normal((3, 3, 3)), rng.standard_normal(3)
    _check(lambda y, w: np.sum(np.matmul(y, w) ** 2), lambda y, w: jnp.sum(jnp.matmul(y, w) ** 2), [y, w])
    _check(lambda w, y: np.sum(np.cos(np.matmul(w, y))), lambda w, y: jnp.sum(jnp.cos(jnp.matmul(w, y))), [w, y])


@pytest.mark.slow
@pytest.mark.parametrize("numba", ["kernels", True])
def test_matmul_stack_and_vector_numba(numba):
    rng = np.random.default_rng(3)
    y, w = rng.standard_normal((3, 3, 3)), rng.standard_normal(3)
    try:
        _check(_mm, _jmm, [y, w], numba=numba)
    except zymo.errors.ZymoError as exc:  # numba=True may refuse a stacked product clearly
        assert numba is True, exc


def _solve(a, b):
    return np.sum(np.sin(np.linalg.solve(a, b)))


def _jsolve(a, b):
    return jnp.sum(jnp.sin(jnp.linalg.solve(a, b)))


@pytest.mark.parametrize("sa,sb", [((3, 3, 3), (3,)), ((2, 3, 3), (3,)), ((4, 2, 3, 3), (3,)), ((3, 3), (3,)),
                                   ((2, 3, 3), (2, 3, 2)), ((2, 3, 3), (3, 2))])
def test_solve_stack_and_vector(sa, sb):
    rng = np.random.default_rng(6)
    a = rng.standard_normal(sa) + 3 * np.eye(3)
    _check(_solve, _jsolve, [a, rng.standard_normal(sb)])


def _lsq(a, b, w):
    return np.sum(w * np.linalg.lstsq(a, b)[0])


@pytest.mark.parametrize("shape", [(3, 5), (2, 4), (5, 3), (3, 3)])
@pytest.mark.parametrize("cols", [0, 2])
def test_lstsq_full_rank_wide_and_tall(shape, cols):
    rng = np.random.default_rng(22)
    m, n = shape
    a = rng.standard_normal(shape)
    b = rng.standard_normal((m, cols) if cols else m)
    w = rng.standard_normal((n, cols) if cols else n)

    def f(a, b):
        return np.sum(w * np.linalg.lstsq(a, b)[0])

    def jf(a, b):
        return jnp.sum(w * (jnp.linalg.pinv(a) @ b))
    _check(f, jf, [a, b])


def test_lstsq_rank_deficient_is_refused():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 3))
    a[:, 2] = a[:, 0] + a[:, 1]
    b = rng.standard_normal(5)

    def f(a, b):
        return np.sum(np.linalg.lstsq(a, b)[0])
    for mode in (Reverse, Forward):
        with pytest.raises(ZymoError, match="lstsq of a 5x3 matrix of rank 2"):
            zymo.gradient(mode, f, a.copy(), b.copy())


@pytest.mark.parametrize("shape", [(3, 3), (3, 5)])
def test_lstsq_empty_residuals(shape):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(shape), rng.standard_normal(shape[0])

    def f(a, b):
        return np.sum(np.linalg.lstsq(a, b)[1]) + np.sum(a) * np.sum(b)
    for mode in (Reverse, Forward):
        ga, gb = zymo.gradient(mode, f, a.copy(), b.copy())
        np.testing.assert_allclose(ga, np.full(shape, np.sum(b)))
        np.testing.assert_allclose(gb, np.full(shape[0], np.sum(a)))


@pytest.mark.parametrize("a", [np.array([[1.0, 2.0], [2.0, 4.0]]),
                               np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]),
                               np.array([[2.0, 1.0], [0.5, 3.0]])])
def test_det_gradient_is_the_adjugate(a):
    cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                     for j in range(a.shape[1])] for i in range(a.shape[0])])
    for mode in (Reverse, Forward):
        (g,) = zymo.gradient(mode, np.linalg.det, a.copy())
        np.testing.assert_allclose(g, cof, atol=1e-12)
    np.testing.assert_allclose(_fd(np.linalg.det, [a])[0], cof, atol=1e-6)


def test_det_of_a_stack_with_a_singular_matrix():
    a = np.stack([np.array([[1.0, 2.0], [2.0, 4.0]]), np.array([[2.0, 1.0], [0.5, 3.0]])])

    def f(a):
        return np.sum(np.linalg.det(a) * np.array([1.5, -2.0]))
    for mode in (Reverse, Forward):
        (g,) = zymo.gradient(mode, f, a.copy())
        np.testing.assert_allclose(g, _fd(f, [a])[0], atol=1e-6)


def test_qr_of_a_wide_matrix_is_refused():
    def f(a):
        return np.sum(np.linalg.qr(a)[1])
    for mode in (Reverse, Forward):
        with pytest.raises(ZymoError, match="qr of a wide 3x4 matrix"):
            zymo.gradient(mode, f, np.random.default_rng(0).standard_normal((3, 4)))


@pytest.mark.parametrize("s", [3, 2])
def test_hessian_of_solve_stack_and_vector(s):
    rng = np.random.default_rng(5)
    a0 = rng.standard_normal((s, 3, 3)) + 3 * np.eye(3)
    b0 = rng.standard_normal(3)

    def fa(a):
        return np.sum(np.sin(np.linalg.solve(a, b0)))

    def fb(b):
        return np.sum(np.sin(np.linalg.solve(a0, b)))
    ja = jax.hessian(lambda a: jnp.sum(jnp.sin(jnp.linalg.solve(a, jnp.asarray(b0)))))(jnp.asarray(a0))
    jb = jax.hessian(lambda b: jnp.sum(jnp.sin(jnp.linalg.solve(jnp.asarray(a0), b))))(jnp.asarray(b0))
    np.testing.assert_allclose(zymo.hessian(fa, a0.copy()), np.asarray(ja), atol=1e-10)
    np.testing.assert_allclose(zymo.hessian(fb, b0.copy()), np.asarray(jb), atol=1e-10)


@pytest.mark.slow
def test_det_adjugate_numba():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    for mode in (Reverse, Forward):
        (g,) = zymo.gradient(mode, np.linalg.det, a.copy(), numba=True)
        np.testing.assert_allclose(g, [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)


def test_hessian_of_det_singular_is_refused_and_nonsingular_agrees():
    with pytest.raises(ZymoError, match="second derivative of np.linalg.det at a singular matrix"):
        zymo.hessian(np.linalg.det, np.array([[1.0, 2.0], [2.0, 4.0]]))
    a = np.array([[2.0, 1.0, 0.5], [0.3, 3.0, 1.0], [1.0, -1.0, 2.5]])
    np.testing.assert_allclose(zymo.hessian(np.linalg.det, a.copy()),
                               np.asarray(jax.hessian(jnp.linalg.det)(jnp.asarray(a))), atol=1e-10)
