"""Second order through issue 7's rules: `zymo.hessian` and `zymo.hvp` differentiate zymo's
reverse program, so the runtime helpers its adjoints call need tangent rules
(`rules/runtime_rules.py`). Each function below goes through one rule family; its
Hessian is checked against JAX's `jax.hessian` (when installed) and against central
differences of zymo's own gradient. Functions whose adjoint helpers have no tangent
rule must be refused with `UnsupportedCall` at the user's line, never give a number.
"""
from __future__ import annotations

import numpy as np
import pytest

import zymo
from zymo import Reverse
from zymo.errors import UnsupportedCall

RNG = np.random.default_rng(7)
A = RNG.normal(size=(3, 3)) + 3.0 * np.eye(3)
B = RNG.normal(size=(3, 2))
X = np.array([0.3, -0.45, 0.7])


# -- the functions (NumPy for zymo, the same written with jax.numpy for JAX) -----------------


def solve_vec(x):
    return np.sum(np.linalg.solve(A + np.outer(x, x), x) ** 2)


def solve_mat(x):
    return np.sum(np.linalg.solve(A + np.outer(x, x), B * x[0]) ** 2)


def inv(x):
    return np.sum(np.linalg.inv(A + np.outer(x, x)) * A)


def det(x):
    return np.linalg.det(A + np.outer(x, x))


def slogdet(x):
    sign, logdet = np.linalg.slogdet(A + np.outer(x, x))
    return sign * logdet


def cholesky(x):
    return np.sum(np.linalg.cholesky(A @ A.T + np.outer(x, x)) * A)


def norm(x):
    return np.linalg.norm(x) ** 3 + np.linalg.norm(x * x, 3)


def norm_axis(x):
    return np.sum(np.linalg.norm(np.outer(x, x + 1.0), axis=1) ** 2 * x)


def cumsum(x):
    return np.sum(np.cumsum(x) ** 2) + np.sum(np.cumsum(np.outer(x, x), axis=1) ** 3)


def clip(x):
    return np.sum(np.clip(x, -0.4, 0.5) ** 2 * x)


def var_std(x):
    return np.var(x) * np.std(x) + np.sum(np.var(np.outer(x, x), axis=0))


def max_axis(x):
    return np.sum(np.max(np.outer(x, x + 0.1), axis=0) ** 2)


def reshape_transpose(x):
    m = np.outer(x, x * x)
    return np.sum(np.reshape(m, (9,)) ** 3) + np.sum(m.T * m)


def join(x):
    return np.sum(np.concatenate((x, x * x)) ** 3) + np.sum(np.stack((x, np.sin(x)), axis=1) ** 3)


def _jax_versions(jnp):
    jA, jB = jnp.asarray(A), jnp.asarray(B)
    return {
        solve_vec: lambda x: jnp.sum(jnp.linalg.solve(jA + jnp.outer(x, x), x) ** 2),
        solve_mat: lambda x: jnp.sum(jnp.linalg.solve(jA + jnp.outer(x, x), jB * x[0]) ** 2),
        inv: lambda x: jnp.sum(jnp.linalg.inv(jA + jnp.outer(x, x)) * jA),
        det: lambda x: jnp.linalg.det(jA + jnp.outer(x, x)),
        slogdet: lambda x: jnp.prod(jnp.stack(jnp.linalg.slogdet(jA + jnp.outer(x, x)))),
        cholesky: lambda x: jnp.sum(jnp.linalg.cholesky(jA @ jA.T + jnp.outer(x, x)) * jA),
        norm: lambda x: jnp.linalg.norm(x) ** 3 + jnp.linalg.norm(x * x, 3),
        norm_axis: lambda x: jnp.sum(jnp.linalg.norm(jnp.outer(x, x + 1.0), axis=1) ** 2 * x),
        cumsum: lambda x: jnp.sum(jnp.cumsum(x) ** 2) + jnp.sum(jnp.cumsum(jnp.outer(x, x), axis=1) ** 3),
        clip: lambda x: jnp.sum(jnp.clip(x, -0.4, 0.5) ** 2 * x),
        var_std: lambda x: jnp.var(x) * jnp.std(x) + jnp.sum(jnp.var(jnp.outer(x, x), axis=0)),
        max_axis: lambda x: jnp.sum(jnp.max(jnp.outer(x, x + 0.1), axis=0) ** 2),
        reshape_transpose: lambda x: (jnp.sum(jnp.reshape(jnp.outer(x, x * x), (9,)) ** 3)
                                      + jnp.sum(jnp.outer(x, x * x).T * jnp.outer(x, x * x))),
        join: lambda x: (jnp.sum(jnp.concatenate((x, x * x)) ** 3)
                         + jnp.sum(jnp.stack((x, jnp.sin(x)), axis=1) ** 3)),
    }


FUNCS = [solve_vec, solve_mat, inv, det, slogdet, cholesky, norm, norm_axis, cumsum, clip, var_std, max_axis,
         reshape_transpose, join]


def fd_hessian(f, x, h=1e-5):
    """Central differences of zymo's reverse-mode gradient, column by column."""
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h
        gp = zymo.gradient(Reverse, f, x + e)[0]
        gm = zymo.gradient(Reverse, f, x - e)[0]
        cols.append((gp - gm) / (2 * h))
    return np.stack(cols, axis=1)


@pytest.fixture(scope="module")
def jax_hessians():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    # jitted: one XLA compile per function, not one per primitive op (a third of the time)
    return {f: np.asarray(jax.jit(jax.hessian(g))(jnp.asarray(X))) for f, g in _jax_versions(jnp).items()}


@pytest.mark.slow
@pytest.mark.parametrize("f", FUNCS, ids=lambda f: f.__name__)
def test_hessian_matches_fd_of_gradient(f):
    H = zymo.hessian(f, X)
    ref = fd_hessian(f, X)
    assert np.max(np.abs(ref)) > 0.05, "vacuous: the Hessian is (nearly) zero"
    np.testing.assert_allclose(H, ref, rtol=1e-6, atol=1e-7 * np.max(np.abs(ref)))
    np.testing.assert_allclose(H, H.T, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("f", FUNCS, ids=lambda f: f.__name__)
def test_hessian_and_hvp_match_jax(f, jax_hessians):
    ref = jax_hessians[f]
    np.testing.assert_allclose(zymo.hessian(f, X), ref, rtol=1e-9, atol=1e-10 * np.max(np.abs(ref)))
    v = np.array([0.5, -1.0, 0.25])
    hv, g = zymo.hvp_and_gradient(f, X, v)
    np.testing.assert_allclose(hv, ref @ v, rtol=1e-9, atol=1e-10 * np.max(np.abs(ref)))
    np.testing.assert_allclose(g, zymo.gradient(Reverse, f, X)[0], rtol=1e-12)


def eigh_vectors(x):
    return np.sum(np.linalg.eigh(A + A.T + np.outer(x, x))[1] ** 3)


def prod(x):
    return np.prod(x * x)


def trace(x):
    return np.trace(np.outer(x, x))


@pytest.mark.parametrize("f, key, helper", [
    (eigh_vectors, "numpy.linalg.eigh.eigenvectors", "_rt.eigh_vjp"),
    (prod, "numpy.prod", "_rt.prod_others"), (trace, "numpy.trace", "_rt.diagonal_vjp")],
    ids=["eigh", "prod", "trace"])
def test_helpers_without_tangent_rules_are_refused(f, key, helper):
    with pytest.raises(UnsupportedCall) as info:
        zymo.hvp(f, X, np.ones(3))
    text = str(info.value)
    assert key in text and helper in text and "test_second_order_rules.py" in text and "docs/rules.md" in text


def shape_of_vector(x, y):
    return np.sum(np.reshape(y, np.shape(x)) * x * x)


def test_np_shape_of_a_vector_is_a_tuple():
    """`np.shape(x)` of a 1-d array is a 1-tuple in generated code (it was written as an int
    and `np.reshape(y, (shape,))` then failed); the rules' adjoints use it (np.outer)."""
    x, y = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    (gx, gy) = zymo.gradient(Reverse, shape_of_vector, x, y)
    np.testing.assert_allclose(gx, 2 * y * x)
    np.testing.assert_allclose(gy, x * x)
    np.testing.assert_allclose(zymo.hessian(lambda v: shape_of_vector(v, y), x), np.diag(2 * y))
