"""`memory_limit=` on `jacobian` (each reverse pass checkpointed) and `hvp` (reverse mode over the
forward-mode program, checkpointed): against the unlimited operators, another mode and central
differences."""
import numpy as np
import pytest
from test_memory_limit import _fd, rd

import zymo
from zymo import Forward, Reverse
from zymo.runtime.checkpoint import Plan


def traj(x, n):
    u = x.copy()
    for _t in range(n):
        u[:] = np.sin(u) + 0.1 * u[::-1]
    return u * 2.0


def _logged(fn):
    Plan.log = []
    try:
        out = fn()
        return out, Plan.log
    finally:
        Plan.log = None


@pytest.mark.parametrize("chunk", [None, 1])
def test_jacobian_reverse_under_a_limit(chunk):
    x = np.linspace(0.1, 0.9, 4)
    J, plans = _logged(lambda: zymo.jacobian(Reverse, traj, x, 12, chunk=chunk, memory_limit=200))
    assert plans and not any(p.fits for p in plans)
    np.testing.assert_allclose(J, zymo.jacobian(Reverse, traj, x, 12, chunk=chunk), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(J, zymo.jacobian(Forward, traj, x, 12), rtol=1e-12, atol=1e-15)
    h = 1e-6
    for j in range(4):
        e = np.zeros(4)
        e[j] = h
        np.testing.assert_allclose(J[:, j], (traj(x + e, 12) - traj(x - e, 12)) / (2 * h), rtol=1e-5, atol=1e-8)
    assert np.min(np.abs(np.diag(J))) > 1e-3


def test_jacobian_of_a_scalar_function_under_a_limit():
    u0 = np.random.default_rng(4).standard_normal(12)
    g, plans = _logged(lambda: zymo.jacobian(Reverse, rd, u0, 0.1, 0.2, 0.1, 15, memory_limit=300))
    assert len(plans) == 1 and not plans[0].fits
    np.testing.assert_allclose(g, zymo.jacobian(Forward, rd, u0, 0.1, 0.2, 0.1, 15), rtol=1e-12)
    np.testing.assert_allclose(g, _fd(lambda u: rd(u, 0.1, 0.2, 0.1, 15), [u0], 0), rtol=1e-5, atol=1e-8)
    with pytest.raises(zymo.ZymoError, match="sparse=True"):
        zymo.jacobian(Reverse, traj, u0, 3, sparse=True, memory_limit=300)


@pytest.mark.parametrize("limit", [10**7, 500, 1])
def test_hvp_under_a_limit_is_reverse_over_forward(limit):
    rng = np.random.default_rng(5)
    x, v = rng.standard_normal(12), rng.standard_normal(12)
    (hv, g), plans = _logged(lambda: zymo.hvp_and_gradient(rd, x.copy(), v, 0.1, 0.2, 0.1, 9, memory_limit=limit))
    assert len(plans) == 2 and all(p.fits == (limit == 10**7) for p in plans)
    hv0, g0 = zymo.hvp_and_gradient(rd, x.copy(), v, 0.1, 0.2, 0.1, 9)
    np.testing.assert_allclose(hv, hv0, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(g, g0, rtol=1e-12)
    grad = lambda y: zymo.gradient(Reverse, rd, y, 0.1, 0.2, 0.1, zymo.Const(9))[0]  # noqa: E731
    h = 1e-6
    np.testing.assert_allclose(hv, (grad(x + h * v) - grad(x - h * v)) / (2 * h), rtol=1e-5, atol=1e-7)
    assert np.max(np.abs(hv)) > 1e-2
    np.testing.assert_allclose(zymo.hvp(rd, x.copy(), v, 0.1, 0.2, 0.1, 9, memory_limit=limit), hv, rtol=1e-14)


@pytest.mark.parametrize("limit", [10**7, 300])
def test_hessian_under_a_limit(limit):
    x = np.random.default_rng(6).standard_normal(6)
    H, plans = _logged(lambda: zymo.hessian(rd, x.copy(), 0.1, 0.2, 0.1, 9, memory_limit=limit))
    assert plans and all(p.fits == (limit == 10**7) for p in plans)
    H0 = zymo.hessian(rd, x.copy(), 0.1, 0.2, 0.1, 9)
    np.testing.assert_allclose(H, H0, rtol=1e-11, atol=1e-13)
    grad = lambda y: zymo.gradient(Reverse, rd, y, 0.1, 0.2, 0.1, zymo.Const(9))[0]  # noqa: E731
    h = 1e-6
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = h
        np.testing.assert_allclose(H[:, j], (grad(x + e) - grad(x - e)) / (2 * h), rtol=1e-5, atol=1e-7)
    assert np.max(np.abs(H)) > 1e-2
    with pytest.raises(zymo.ZymoUsageError, match="memory_limit"):
        zymo.hessian(rd, x, 0.1, 0.2, 0.1, 9, sparse=True, memory_limit=limit)


def _marked(x, c):
    for _ in zymo.checkpointed(range(4), snapshots=2):
        for i in range(x.shape[0]):
            x[i] = x[i] * np.exp(-c) + np.sin(x[i]) * 0.1
    return np.sum(x * x)


def _unmarked(x, c):
    for _ in range(4):
        for i in range(x.shape[0]):
            x[i] = x[i] * np.exp(-c) + np.sin(x[i]) * 0.1
    return np.sum(x * x)


def test_hvp_through_a_marked_loop():
    """Forward over reverse cannot differentiate a checkpointed loop's driver: a clear refusal at
    the user's loop (it was an `import` refused in zymo's generated code, helper 79), and the
    hint's way, `memory_limit=`, gives the Hessian-vector product of the unmarked function."""
    x, v = np.linspace(0.2, 0.9, 5), np.linspace(1.0, -0.6, 5)
    with pytest.raises(zymo.UnsupportedSyntax, match="checkpointed loop") as err:
        zymo.hvp(_marked, x.copy(), v, 0.7)
    assert "test_checkpointed_operators.py" in str(err.value) and "memory_limit=" in str(err.value)
    want = zymo.hvp(_unmarked, x.copy(), v, 0.7)
    np.testing.assert_allclose(zymo.hvp(_marked, x.copy(), v, 0.7, memory_limit=10**6), want, rtol=1e-13)
    g = lambda y: zymo.gradient(Reverse, _unmarked, y, 0.7)[0]  # noqa: E731
    np.testing.assert_allclose(want, (g(x + 1e-6 * v) - g(x - 1e-6 * v)) / 2e-6, rtol=1e-6)
    assert np.all(np.abs(want) > 1e-4)
