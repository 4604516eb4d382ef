"""Jacobians (batched forward and reverse), forward gradients, and second order
(forward mode over zymo's generated reverse program): against finite differences
and, where installed, JAX."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import zymo
from zymo import Forward, Reverse, ZymoUsageError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def rn_to_rm(x):  # R^4 -> R^3, loops and an in-place write
    y = np.empty(3)
    for i in range(3):
        y[i] = x[i] * np.sin(x[i + 1]) + x[(i + 2) % 4] ** 2
    y[1:] *= x[0]
    return y


def scalar_loop(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += np.exp(0.3 * x[i]) * x[(i + 1) % x.shape[0]] ** 3
    return s


def with_buffer(x, buf):  # a Const work buffer that receives active data
    np.multiply(x, x, out=buf)
    buf[1:] += np.sin(buf[:-1])
    return np.sum(buf * x)


def with_while(x):
    s = 0.0
    i = 0
    while i < 7:
        s = s + np.tanh(x[i % 3] * s + x[(i + 1) % 3])
        i += 1
    return s * s


X4 = np.array([0.4, -0.8, 1.3, 0.6])


def fd_jac(f, x, *c, h=1e-6):
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e.flat[j] = h
        yp = f(x + e, *[np.copy(a) for a in c])
        ym = f(x - e, *[np.copy(a) for a in c])
        cols.append((np.asarray(yp) - np.asarray(ym)) / (2 * h))
    return np.stack(cols, axis=-1)


def fd_hess(f, x, *c, h=1e-5):
    def g(z):
        return zymo.gradient(Reverse, f, z, *[np.copy(a) for a in c])[0]
    return fd_jac(g, x, h=h)


@pytest.mark.parametrize("chunk", [None, 1, 2, 3])
def test_jacobian_rn_to_rm_both_modes(chunk):
    Jf = zymo.jacobian(Forward, rn_to_rm, X4, chunk=chunk)
    Jr = zymo.jacobian(Reverse, rn_to_rm, X4, chunk=chunk)
    assert Jf.shape == Jr.shape == (3, 4)
    np.testing.assert_allclose(Jf, Jr, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(Jf, fd_jac(rn_to_rm, X4), rtol=1e-6, atol=1e-8)
    assert np.count_nonzero(Jf) > 6


def test_jacobian_matrix_input_and_scalar_output():
    x = np.arange(1.0, 7.0).reshape(2, 3) / 5
    J = zymo.jacobian(Forward, lambda z: np.tanh(z) * z[0, 0], x)
    assert J.shape == (2, 3, 2, 3)
    np.testing.assert_allclose(J, zymo.jacobian(Reverse, lambda z: np.tanh(z) * z[0, 0], x), rtol=1e-14)
    np.testing.assert_allclose(J.reshape(6, 6), fd_jac(lambda z: (np.tanh(z) * z[0, 0]).ravel(), x).reshape(6, 6),
                               rtol=1e-6, atol=1e-9)
    g = zymo.jacobian(Forward, scalar_loop, X4)
    np.testing.assert_allclose(g, zymo.gradient(Reverse, scalar_loop, X4)[0], rtol=1e-13)
    np.testing.assert_allclose(zymo.gradient_forward(scalar_loop, X4, chunk=3), g, rtol=1e-14)


def test_jacobian_leaves_inputs_alone_and_takes_constants():
    x = X4.copy()
    buf = np.zeros(4)
    J = zymo.jacobian(Reverse, lambda z, b: z * np.sum(b) + z ** 2, x, np.array([1.0, 2.0]))
    np.testing.assert_array_equal(x, X4)
    np.testing.assert_allclose(J, np.diag(3.0 + 2 * X4), rtol=1e-14)
    g = zymo.jacobian(Forward, with_buffer, x, buf)
    np.testing.assert_allclose(g, fd_jac(with_buffer, x, buf), rtol=1e-6)


def test_jacobian_of_float_input():
    assert zymo.jacobian(Forward, lambda t: np.sin(t) * t, 0.5) == pytest.approx(np.cos(0.5) * 0.5 + np.sin(0.5))
    assert zymo.jacobian(Reverse, lambda t: np.sin(t) * t, 0.5) == pytest.approx(np.cos(0.5) * 0.5 + np.sin(0.5))


@pytest.mark.parametrize("f, c", [(scalar_loop, ()), (with_buffer, (np.zeros(4),)),
                                  (lambda z: with_while(z[:3]) + z[3] * z[0], ())],
                         ids=["loop", "const_buffer", "while"])
def test_hessian_hvp_against_fd_of_gradients(f, c):
    H = zymo.hessian(f, X4, *c)
    ref = fd_hess(f, X4, *c)
    np.testing.assert_allclose(H, ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12)
    v = np.array([1.0, -2.0, 0.5, 3.0])
    v0 = v.copy()
    hv, g = zymo.hvp_and_gradient(f, X4, v, *c)
    np.testing.assert_array_equal(v, v0)  # v is not overwritten
    np.testing.assert_allclose(hv, ref @ v, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g, zymo.gradient(Reverse, f, X4.copy(), *[np.copy(a) for a in c])[0], rtol=1e-13)
    np.testing.assert_allclose(zymo.hvp(f, X4, v, *c), H @ v, rtol=1e-12, atol=1e-12)
    assert np.abs(np.diag(H)).max() > 0.1


@pytest.mark.parametrize("chunk", [1, 3, 8])
def test_hessian_chunks_agree(chunk):
    np.testing.assert_allclose(zymo.hessian(scalar_loop, X4, chunk=chunk), zymo.hessian(scalar_loop, X4, chunk=2),
                               rtol=1e-14)


def test_second_derivative_of_a_float():
    f = lambda t: np.sin(t) * t ** 3  # noqa: E731
    t = 0.7
    d2 = -np.sin(t) * t ** 3 + 6 * t ** 2 * np.cos(t) + 6 * t * np.sin(t)
    assert zymo.hessian(f, t) == pytest.approx(d2, rel=1e-13)
    hv, g = zymo.hvp_and_gradient(f, t, 2.0)
    assert hv == pytest.approx(2 * d2, rel=1e-13)
    assert g == pytest.approx(np.cos(t) * t ** 3 + 3 * t ** 2 * np.sin(t), rel=1e-13)


@pytest.mark.parametrize("name", ["sumsq_inplace", "gm3_rhs", "lorenz_rk4"])
def test_hvp_on_benchmark_workloads(name):
    from workloads import WORKLOADS

    w = WORKLOADS[name]
    args = w.make(w.small)["args"]
    if name == "lorenz_rk4":  # differentiate with respect to params (argument 1)
        traj, params, dt = args

        def f(p, traj, dt):
            return w.primal(traj, p, dt)
        x, rest = params, (traj, dt)
    else:
        f, x, rest = w.primal, args[0], tuple(args[1:])
    v = np.random.default_rng(3).standard_normal(x.shape)
    copies = [np.copy(a) if isinstance(a, np.ndarray) else a for a in rest]
    hv = zymo.hvp(f, np.copy(x), v, *copies)
    h = 1e-5
    gp = zymo.gradient(Reverse, f, x + h * v, *[np.copy(a) if isinstance(a, np.ndarray) else a for a in rest])[0]
    gm = zymo.gradient(Reverse, f, x - h * v, *[np.copy(a) if isinstance(a, np.ndarray) else a for a in rest])[0]
    ref = (gp - gm) / (2 * h)
    np.testing.assert_allclose(hv, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())


@pytest.mark.slow
def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jf(x):
        return jnp.sum(jnp.exp(0.3 * x) * jnp.roll(x, -1) ** 3)

    def jg(x):
        y = x[:3] * jnp.sin(x[1:]) + x[jnp.array([2, 3, 0])] ** 2
        return y.at[1:].multiply(x[0])

    np.testing.assert_allclose(zymo.hessian(scalar_loop, X4), jax.jit(jax.hessian(jf))(X4), rtol=1e-12)
    np.testing.assert_allclose(zymo.jacobian(Forward, rn_to_rm, X4), jax.jit(jax.jacfwd(jg))(X4), rtol=1e-12)
    np.testing.assert_allclose(zymo.jacobian(Reverse, rn_to_rm, X4), jax.jit(jax.jacrev(jg))(X4), rtol=1e-12)
    v = np.array([0.5, 1.0, -1.0, 2.0])
    jax_hvp = jax.jit(lambda x, t: jax.jvp(jax.grad(jf), (x,), (t,))[1])  # references jitted: one compile each
    np.testing.assert_allclose(zymo.hvp(scalar_loop, X4, v), jax_hvp(X4, v), rtol=1e-12)


def test_usage_errors():
    with pytest.raises(ZymoUsageError, match="float array"):
        zymo.jacobian(Forward, scalar_loop, np.arange(3))
    with pytest.raises(ZymoUsageError, match="must return one float"):
        zymo.hessian(rn_to_rm, X4)
    with pytest.raises(ZymoUsageError, match="v has shape"):
        zymo.hvp(scalar_loop, X4, np.ones(3))
    with pytest.raises(ZymoUsageError, match="chunk"):
        zymo.jacobian(Forward, rn_to_rm, X4, chunk=0)
    with pytest.raises(ZymoUsageError, match="Forward or Reverse"):
        zymo.jacobian(zymo.ReverseSplitWithPrimal, rn_to_rm, X4)


@pytest.mark.slow
def test_batch_and_second_order_under_numba():
    pytest.importorskip("numba")
    x = np.array([0.3, 0.5, 1.2, -0.4])
    (tans,) = zymo.autodiff(Forward, scalar_loop, zymo.BatchDuplicated,
                            zymo.BatchDuplicated(x, tuple(np.eye(4))), numba=True)
    np.testing.assert_allclose(tans, zymo.gradient(Reverse, scalar_loop, x)[0], rtol=1e-13)
    dxs = (np.zeros(4), np.zeros(4))
    zymo.autodiff(Reverse, scalar_loop, zymo.Active, zymo.BatchDuplicated(x, dxs), numba=True)
    np.testing.assert_allclose(dxs[1], tans, rtol=1e-13)
    np.testing.assert_allclose(zymo.hessian(scalar_loop, x, numba=True), zymo.hessian(scalar_loop, x), rtol=1e-12)


def test_gradient_forward_mode_is_batched_and_matches_reverse():
    x = np.linspace(-1.0, 1.0, 11)  # 11 elements: chunks of 8 and a padded 3
    buf = np.zeros(11)
    gf = zymo.gradient(Forward, with_buffer, x, buf)
    gr = zymo.gradient(Reverse, with_buffer, x, np.zeros(11))
    np.testing.assert_allclose(gf[0], gr[0], rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(gf[0], fd_jac(with_buffer, x, buf), rtol=1e-6, atol=1e-8)
    src = zymo.generated_code(Forward, scalar_loop, zymo.BatchDuplicated,
                              zymo.BatchDuplicated(x, tuple(np.eye(11)[:8])))
    assert "dx_8" in src


def _weighted(x):
    return np.sum(np.sin(x) * np.arange(1.0, x.size + 1).reshape(x.shape))


@pytest.mark.parametrize("layout", ["F", "strided"])
def test_forward_gradient_and_jacobian_of_a_non_c_ordered_array(layout):
    # the basis tangents were written through `zeros_like(x).reshape(-1)`, a copy for an
    # F-ordered x: the forward gradient came back as zeros
    base = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    x = np.asfortranarray(base) if layout == "F" else np.linspace(-1.0, 1.0, 24).reshape(3, 8)[:, ::2]
    (fwd,) = zymo.gradient(Forward, _weighted, x)[:1]
    (rev,) = zymo.gradient(Reverse, _weighted, x.copy())[:1]
    want = np.cos(x) * np.arange(1.0, x.size + 1).reshape(x.shape)
    np.testing.assert_allclose(fwd, want, rtol=1e-13)
    np.testing.assert_allclose(rev, want, rtol=1e-13)
    J = zymo.jacobian(Forward, lambda v: np.sin(v) * 2.0, x)
    np.testing.assert_allclose(J.reshape(x.size, x.size), np.diag(2.0 * np.cos(x).reshape(-1)), atol=1e-14)
