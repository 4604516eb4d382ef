"""zymo.interface: operators, in-place functions, contexts, preparation and its checks, refusals.

Every derivative is checked against an analytic formula and against finite differences
(AutoFiniteDiff) or another AD backend; references are nonzero, so zeros or a wrong sign fail."""
import importlib

import numpy as np
import pytest

import zymo
from zymo.errors import ZymoUsageError
from zymo.interface import (
    AutoAutograd,
    AutoFiniteDiff,
    AutoJAX,
    AutoTorch,
    AutoZymo,
    BackendLimitation,
    BackendUnavailable,
    Cache,
    Constant,
    PreparationMismatch,
    derivative,
    gradient,
    gradient_and_hvp,
    hessian,
    hvp,
    jacobian,
    prepare_gradient,
    prepare_hvp,
    prepare_pullback,
    prepare_pushforward,
    pullback,
    pushforward,
    second_derivative,
    value_and_derivative,
    value_and_gradient,
    value_and_jacobian,
    value_and_pullback,
    value_and_pushforward,
    value_gradient_and_hessian,
)

HAS_HVP = getattr(zymo, "hvp", None) is not None
X = np.array([0.7, -1.1, 1.9, 0.4])
C = np.array([1.5, -0.5, 2.0, 0.8])
FD = AutoFiniteDiff()


def weighted(x, c):
    s = 0.0
    for i in range(len(x)):
        s += np.sin(x[i]) * c[i]
    return s + np.dot(x, x) ** 2 / 10


def weighted_grad(x, c):
    return np.cos(x) * c + 0.4 * np.dot(x, x) * x


def square_inplace(x):  # overwrites its input
    for i in range(len(x)):
        x[i] = x[i] * x[i]
    return np.sum(x * x)


def mapping(x):
    return np.sin(x) * x[0] + x * x


def mapping_jac(x):
    J = np.diag(np.cos(x) * x[0] + 2 * x)
    J[:, 0] += np.sin(x)
    return J


def mapping_inplace(y, x, c):
    for i in range(len(x)):
        y[i] = np.sin(x[i]) * x[0] * c[i]


def mapping_inplace_jac(x, c):
    J = np.diag(np.cos(x) * x[0] * c)
    J[:, 0] += np.sin(x) * c
    return J


def test_gradient_matches_analytic_and_finite_differences():
    want = weighted_grad(X, C)
    assert np.all(np.abs(want) > 0.1)
    val, g = value_and_gradient(weighted, AutoZymo(), X, Constant(C))
    np.testing.assert_allclose(g, want, rtol=1e-12)
    np.testing.assert_allclose(g, gradient(weighted, FD, X, Constant(C)), rtol=1e-7, atol=1e-9)
    assert val == pytest.approx(weighted(X, C))
    g_fwd = gradient(weighted, AutoZymo(mode=zymo.Forward), X, Constant(C))
    np.testing.assert_allclose(g_fwd, want, rtol=1e-12)


def test_jacobian_pushforward_pullback_forward_and_reverse():
    J = mapping_jac(X)
    for b in (AutoZymo(), AutoZymo(mode=zymo.Forward), AutoZymo(mode=zymo.Reverse)):
        val, Jz = value_and_jacobian(mapping, b, X)
        np.testing.assert_allclose(Jz, J, rtol=1e-12)
        np.testing.assert_allclose(val, mapping(X))
    np.testing.assert_allclose(jacobian(mapping, FD, X), J, rtol=1e-7, atol=1e-9)
    t, w = np.array([0.3, -1.0, 0.5, 2.0]), np.array([1.0, 0.5, -2.0, 0.25])
    val, ty = value_and_pushforward(mapping, AutoZymo(), X, t)
    np.testing.assert_allclose(ty, J @ t, rtol=1e-12)
    val, tx = value_and_pullback(mapping, AutoZymo(), X, w)
    np.testing.assert_allclose(tx, w @ J, rtol=1e-12)
    np.testing.assert_allclose(val, mapping(X))
    np.testing.assert_allclose(pullback(mapping, FD, X, w), w @ J, rtol=1e-7, atol=1e-9)


def test_scalar_input_derivative_and_pullback():
    def f(t):
        return np.sin(t) * t
    d = np.cos(0.7) * 0.7 + np.sin(0.7)
    assert derivative(f, AutoZymo(), 0.7) == pytest.approx(d, rel=1e-13)
    assert derivative(f, FD, 0.7) == pytest.approx(d, rel=1e-8)
    assert pullback(f, AutoZymo(), 0.7, -2.0) == pytest.approx(-2 * d, rel=1e-13)
    val, dd = value_and_derivative(f, AutoZymo(), 0.7)
    assert val == pytest.approx(f(0.7)) and dd == pytest.approx(d)


def test_inplace_function_writes_y_and_differentiates():
    J = mapping_inplace_jac(X, C)
    for b in (AutoZymo(), AutoZymo(mode=zymo.Reverse), FD):
        y = np.zeros(4)
        Jb = jacobian(mapping_inplace, y, b, X, Constant(C))
        np.testing.assert_allclose(Jb, J, rtol=1e-7 if b is FD else 1e-12, atol=1e-9)
        np.testing.assert_allclose(y, np.sin(X) * X[0] * C)
    y = np.zeros(4)
    t = np.array([0.3, -1.0, 0.5, 2.0])
    val, ty = value_and_pushforward(mapping_inplace, y, AutoZymo(), X, t, Constant(C))
    assert val is y
    np.testing.assert_allclose(ty, J @ t, rtol=1e-12)
    np.testing.assert_allclose(pullback(mapping_inplace, y, AutoZymo(), X, t, Constant(C)), t @ J, rtol=1e-12)


def test_inputs_are_never_mutated_even_when_f_overwrites_them():
    x = X.copy()
    g = gradient(square_inplace, AutoZymo(), x)
    np.testing.assert_array_equal(x, X)
    np.testing.assert_allclose(g, 4 * X ** 3, rtol=1e-12)
    np.testing.assert_allclose(gradient(square_inplace, FD, x), 4 * X ** 3, rtol=1e-7, atol=1e-9)
    np.testing.assert_array_equal(x, X)


def test_cache_context_and_closure_over_a_written_buffer():
    def f(x, buf):
        for i in range(len(x)):
            buf[i] = np.sin(x[i]) * x[i]
        return np.sum(buf * buf)

    s, ds = np.sin(X) * X, np.cos(X) * X + np.sin(X)
    want = 2 * s * ds
    np.testing.assert_allclose(gradient(f, AutoZymo(), X, Cache(np.zeros(4))), want, rtol=1e-12)
    np.testing.assert_allclose(gradient(f, FD, X, Cache(np.zeros(4))), want, rtol=1e-7, atol=1e-9)
    a = np.zeros(1)

    def g(t):  # seed 003: a captured buffer receives active data
        a[0] = 1.0
        a[0] += t
        return a[0] ** 2
    for t in (0.5, 3.1):
        assert derivative(g, AutoZymo(), t) == pytest.approx(2 * (1 + t), rel=1e-13)
        assert derivative(g, FD, t) == pytest.approx(2 * (1 + t), rel=1e-8)


def test_out_writes_into_caller_memory():
    out = np.zeros(4)
    prep = prepare_gradient(weighted, AutoZymo(), X, Constant(C))
    r = gradient(weighted, AutoZymo(), X, Constant(C), prep=prep, out=out)
    assert r is out
    np.testing.assert_allclose(out, weighted_grad(X, C), rtol=1e-12)
    J = np.zeros((4, 4))
    assert jacobian(mapping, AutoZymo(), X, out=J) is J
    np.testing.assert_allclose(J, mapping_jac(X), rtol=1e-12)
    with pytest.raises(ZymoUsageError, match="shape"):
        gradient(weighted, AutoZymo(), X, Constant(C), out=np.zeros(3))
    with pytest.raises(ZymoUsageError, match="float"):
        derivative(lambda t: t * t, AutoZymo(), 0.5, out=np.zeros(1))


def test_prepared_calls_reuse_compiled_code_and_check_their_inputs():
    prep = prepare_gradient(weighted, AutoZymo(), X, Constant(C))
    gradient(weighted, AutoZymo(), X, Constant(C), prep=prep)  # compiles, if no test did before
    n = len(zymo.cache.COMPILED)
    for k in range(3):
        x = X + k
        np.testing.assert_allclose(gradient(weighted, AutoZymo(), x, Constant(C), prep=prep), weighted_grad(x, C),
                                   rtol=1e-12)
    assert len(zymo.cache.COMPILED) == n
    with pytest.raises(PreparationMismatch, match=r"shape \(4,\).*\(5,\)"):
        gradient(weighted, AutoZymo(), np.ones(5), Constant(C), prep=prep)
    with pytest.raises(PreparationMismatch, match="float32"):
        gradient(weighted, AutoZymo(), X.astype(np.float32), Constant(C), prep=prep)
    with pytest.raises(PreparationMismatch, match="made for weighted"):
        gradient(square_inplace, AutoZymo(), X, Constant(C), prep=prep)
    with pytest.raises(PreparationMismatch, match="made for AutoZymo"):
        gradient(weighted, FD, X, Constant(C), prep=prep)
    with pytest.raises(PreparationMismatch, match="for gradient, not jacobian"):
        jacobian(weighted, AutoZymo(), X, Constant(C), prep=prep)
    with pytest.raises(PreparationMismatch, match="context 0"):
        gradient(weighted, AutoZymo(), X, Cache(C.copy()), prep=prep)
    with pytest.raises(PreparationMismatch, match="1 contexts"):
        gradient(weighted, AutoZymo(), X, prep=prep)
    pp = prepare_pushforward(mapping, AutoZymo(), X, np.ones(4))
    with pytest.raises(ZymoUsageError, match="tangent tx must be like x"):
        pushforward(mapping, AutoZymo(), X, np.ones(3), prep=pp)
    pb = prepare_pullback(mapping_inplace, np.zeros(4), AutoZymo(), X, np.ones(4), Constant(C))
    with pytest.raises(PreparationMismatch, match="y an array of shape"):
        pullback(mapping_inplace, np.zeros(5), AutoZymo(), X, np.ones(4), Constant(C), prep=pb)
    with pytest.raises(PreparationMismatch, match="in-place"):
        pullback(mapping_inplace, AutoZymo(), X, np.ones(4), Constant(C), prep=pb)


def test_a_prepared_call_of_x_alone_checks_its_inputs():
    """`f(x)` with no contexts: `Preparation.quick` takes its two-argument shortcut."""
    def loss(x):
        return np.sum(np.sin(x) * x)

    def loss_grad(x):
        return np.cos(x) * x + np.sin(x)

    prep = prepare_gradient(loss, AutoZymo(), X)
    assert prep.bare
    gradient(loss, AutoZymo(), X, prep=prep)
    n = len(zymo.cache.COMPILED)
    for k in range(3):
        x = X * (k + 1)
        g = gradient(loss, AutoZymo(), x, prep=prep)
        np.testing.assert_allclose(g, loss_grad(x), rtol=1e-12)
        np.testing.assert_allclose(g, gradient(loss, FD, x), rtol=1e-6)
    assert len(zymo.cache.COMPILED) == n
    g1 = gradient(loss, AutoZymo(), X, prep=prep)
    g2 = gradient(loss, AutoZymo(), 2 * X, prep=prep)
    assert not np.shares_memory(g1, g2)  # a fresh array each call
    np.testing.assert_allclose(g1, loss_grad(X), rtol=1e-12)
    with pytest.raises(ZymoUsageError, match="not list"):  # the full checks still run
        gradient(loss, AutoZymo(), list(X), prep=prep)
    with pytest.raises(PreparationMismatch, match=r"shape \(4,\).*\(5,\)"):
        gradient(loss, AutoZymo(), np.ones(5), prep=prep)
    with pytest.raises(PreparationMismatch, match="float32"):
        gradient(loss, AutoZymo(), X.astype(np.float32), prep=prep)
    with pytest.raises(PreparationMismatch, match="made for AutoZymo"):
        gradient(loss, FD, X, prep=prep)
    with pytest.raises(PreparationMismatch, match="0 contexts"):
        gradient(loss, AutoZymo(), X, Constant(C), prep=prep)
    with pytest.raises(PreparationMismatch, match="for gradient, not jacobian"):
        jacobian(loss, AutoZymo(), X, prep=prep)


def test_bad_arguments_are_refused_clearly():
    with pytest.raises(ZymoUsageError, match="Constant"):
        gradient(weighted, AutoZymo(), X, C)
    with pytest.raises(ZymoUsageError, match="scalar"):
        gradient(mapping, AutoZymo(), X)
    with pytest.raises(ZymoUsageError, match="scalar x"):
        derivative(mapping, AutoZymo(), X)
    with pytest.raises(ZymoUsageError, match="float"):
        gradient(weighted, AutoZymo(), np.arange(4), Constant(C))
    with pytest.raises(ZymoUsageError, match="in-place"):
        gradient(mapping_inplace, np.zeros(4), AutoZymo(), X, Constant(C))
    with pytest.raises(ZymoUsageError, match="backend"):
        gradient(weighted, X, Constant(C))
    with pytest.raises(ZymoUsageError, match="Cache takes mutable memory"):
        Cache(1.0)
    with pytest.raises(BackendLimitation, match="Duplicated"):
        AutoZymo(function_annotation=zymo.Duplicated)


def test_zymo_function_annotation_const_is_accepted():
    g = gradient(weighted, AutoZymo(function_annotation=zymo.Const), X, Constant(C))
    np.testing.assert_allclose(g, weighted_grad(X, C), rtol=1e-12)


def quartic(x):
    return np.sum(np.sin(x) * x) + np.dot(x, x) ** 2 / 10


def quartic_hess(x):
    return np.diag(-np.sin(x) * x + 2 * np.cos(x)) + 0.4 * np.dot(x, x) * np.eye(len(x)) + 0.8 * np.outer(x, x)


def test_second_order_finite_differences_match_analytic():
    H = quartic_hess(X)
    v = np.array([0.3, -1.0, 0.5, 2.0])
    np.testing.assert_allclose(hessian(quartic, FD, X), H, rtol=1e-5, atol=1e-6)
    g, hv = gradient_and_hvp(quartic, FD, X, v)
    np.testing.assert_allclose(hv, H @ v, rtol=1e-5)
    assert second_derivative(lambda t: np.sin(t) * t, FD, 0.7) == pytest.approx(
        -np.sin(0.7) * 0.7 + 2 * np.cos(0.7), rel=1e-6)


@pytest.mark.skipif(HAS_HVP, reason="zymo.hvp exists: the second-order test below runs instead")
def test_zymo_second_order_without_hvp_is_a_clear_refusal():
    for call in (lambda: prepare_hvp(quartic, AutoZymo(), X, X), lambda: hessian(quartic, AutoZymo(), X),
                 lambda: second_derivative(lambda t: t ** 3, AutoZymo(), 0.5)):
        with pytest.raises(BackendLimitation, match="zymo.hvp"):
            call()


def test_zymo_second_order():
    if not HAS_HVP:
        pytest.skip("needs zymo.hvp (forward over reverse), not in this zymo yet")
    H = quartic_hess(X)
    v = np.array([0.3, -1.0, 0.5, 2.0])
    np.testing.assert_allclose(hvp(quartic, AutoZymo(), X, v), H @ v, rtol=1e-10)
    np.testing.assert_allclose(hvp(quartic, AutoZymo(), X, v), hvp(quartic, FD, X, v), rtol=1e-5)
    val, g, Hz = value_gradient_and_hessian(quartic, AutoZymo(), X)
    np.testing.assert_allclose(Hz, H, rtol=1e-10)
    assert second_derivative(lambda t: np.sin(t) * t, AutoZymo(), 0.7) == pytest.approx(
        -np.sin(0.7) * 0.7 + 2 * np.cos(0.7), rel=1e-10)


# -- other backends: results, and refusals instead of wrong numbers ---------------------------------

def _need(b):
    if not b.available():
        pytest.skip(f"{b!r} is not installed")
    return b


@pytest.mark.slow
@pytest.mark.parametrize("backend", [AutoJAX(), AutoTorch(), AutoAutograd()], ids=repr)
def test_peer_backends_agree_with_zymo(backend):
    b = _need(backend)
    xp = b.numpy

    def f(x, c):
        return xp.sum(xp.sin(x) * c) + xp.dot(x, x) ** 2 / 10

    def g(x):
        return xp.sin(x) * x[0] + x * x

    def h(x):
        return xp.sum(xp.sin(x) * x) + xp.dot(x, x) ** 2 / 10
    np.testing.assert_allclose(gradient(f, b, X, Constant(C)), gradient(weighted, AutoZymo(), X, Constant(C)),
                               rtol=1e-12)
    np.testing.assert_allclose(jacobian(g, b, X), jacobian(mapping, AutoZymo(), X), rtol=1e-12)
    np.testing.assert_allclose(hessian(h, b, X), quartic_hess(X), rtol=1e-10)


def writes_numpy_buffer(x):
    buf = np.zeros(len(x))
    buf[:] = x
    return (buf * buf).sum()


@pytest.mark.parametrize("backend", [AutoJAX(), AutoTorch(), AutoAutograd()], ids=repr)
def test_peers_refuse_numpy_mutation_instead_of_wrong_numbers(backend):
    b = _need(backend)
    with pytest.raises(BackendLimitation, match="AutoZymo"):
        gradient(writes_numpy_buffer, b, X)
    np.testing.assert_allclose(gradient(writes_numpy_buffer, AutoZymo(), X), 2 * X, rtol=1e-12)


def test_jax_refuses_inplace_cache_and_numpy_calls():
    b = _need(AutoJAX())
    with pytest.raises(BackendLimitation, match="in-place"):
        jacobian(mapping_inplace, np.zeros(4), b, X, Constant(C))
    with pytest.raises(BackendLimitation, match="Cache"):
        gradient(lambda x, buf: x.sum(), b, X, Cache(np.zeros(4)))
    with pytest.raises(BackendLimitation, match="jax.numpy"):
        gradient(quartic, b, X)  # NumPy calls on a tracer


def test_torch_refuses_what_would_cut_its_graph():
    b = _need(AutoTorch())
    import torch

    a = np.zeros(1)

    def leaks(x):  # stores a tracked value into NumPy memory: torch would drop it silently
        a[0] = x[0]
        return torch.sum(x) + float(a[0])

    with pytest.raises(BackendLimitation, match="torch"):
        gradient(leaks, b, X)
    with pytest.raises(BackendLimitation, match="returned a"):
        gradient(lambda x: float(np.sum(x.detach().numpy())), b, X)
    with pytest.raises(BackendLimitation, match="step must be greater than zero"):  # helper 80: a raw ValueError
        gradient(lambda x: torch.sum(x[::-1] * x), b, X)


def test_missing_backend_says_how_to_install(monkeypatch):
    from zymo.interface import backends

    real = importlib.import_module

    def fake(name, *a):
        if name.split(".")[0] == "jax":
            raise ImportError("No module named 'jax'")
        return real(name, *a)
    monkeypatch.setattr(backends.importlib, "import_module", fake)
    with pytest.raises(BackendUnavailable, match=r'pip install "jax\[cpu\]"'):
        gradient(quartic, AutoJAX(jit=False), X)
    monkeypatch.setattr(backends.importlib, "import_module", real)


@pytest.mark.slow
def test_scipy_minimize_and_solve_ivp_agree_across_backends():
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    try:
        import interface_scipy as ex
    finally:
        sys.path.pop(0)
    results = {repr(b): ex.minimize_with(b) for b in ex.backends()}
    for name, r in results.items():
        assert r.success, name
        np.testing.assert_allclose(r.x, np.ones(5), atol=1e-7, err_msg=name)
    sols = {}
    for b in ex.backends():
        sols[repr(b)] = ex.solve_with(b).y[:, -1]
        if b.supports_mutation and b.numpy is np:
            sols[repr(b) + " in-place"] = ex.solve_with(b, inplace=True).y[:, -1]
    ref = sols["AutoZymo()"]
    for name, u in sols.items():
        np.testing.assert_allclose(u, ref, rtol=1e-9, atol=1e-12, err_msg=name)
    # the Jacobian the solver used, at the final state, against the analytic one
    K = ex.laplacian(8)
    want = -K - 3 * np.diag(ref ** 2)
    Jz = jacobian(ex.rhs_inplace, np.zeros(8), AutoZymo(), ref, Constant(K))
    np.testing.assert_allclose(Jz, want, rtol=1e-12)
    np.testing.assert_allclose(jacobian(ex.make_rhs(np), FD, ref, Constant(K)), want, rtol=1e-6)
