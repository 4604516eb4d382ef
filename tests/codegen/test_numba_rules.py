"""Issue 7's rules compiled with Numba: each rule family whose primal Numba compiles is
differentiated with `numba=True` in forward and reverse mode, and the result is checked
against the Python backend and against central finite differences of the function.

Numba compiles take seconds on a small machine, so each function below exercises a whole
family; the linear algebra (the slowest compiles, 20-40 s) is marked slow. The
families Numba cannot compile (einsum, SciPy, svd/lstsq helpers) must be refused under
`numba=True` with `ZymoNumbaError`, never give a number.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

numba = pytest.importorskip("numba")

import zymo
import zymo.cache
from zymo import Forward, Reverse
from zymo.codegen.numba.backend import ZymoNumbaError
from zymo.frontend.source import unwrap

RNG = np.random.default_rng(11)
A = RNG.normal(size=(3, 3)) + 3.0 * np.eye(3)
S = A + A.T
X = np.array([0.3, -0.45, 0.7])


@pytest.fixture(scope="module", autouse=True)
def private_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZYMO_CACHE_DIR", str(tmp_path_factory.mktemp("zymo_cache")))
        yield


def linalg_basic(x):
    m = A + np.outer(x, x)
    s, logdet = np.linalg.slogdet(m)
    out = np.sum(np.linalg.solve(m, x) ** 2) + np.sum(np.linalg.solve(m, m.T * x[0]))
    out += np.sum(np.linalg.inv(m) * A) + np.linalg.det(m) + s * logdet
    return out + np.sum(np.linalg.cholesky(A @ A.T + np.outer(x, x)) * A)


def linalg_decomp(x):
    w, v = np.linalg.eigh(S + np.outer(x, x))
    q, r = np.linalg.qr(A + np.outer(x, x))
    return np.sum(w * w) + np.sum(v[:, 0] ** 4) + np.sum(r * r) + np.sum(q[0] ** 3)


def shapes(x):
    m = np.outer(x, x * x)
    out = np.sum(np.reshape(m, (9,)) ** 3) + np.sum(m.T * m)
    out += np.sum(np.concatenate((x, x * x)) ** 3) + np.sum(np.stack((x, np.sin(x))) ** 3)
    out += np.sum(np.flip(x) * x) + np.sum(np.roll(x, 1) * x * x)
    return out + np.sum(np.diag(x) @ m) + np.trace(m) * x[0] + np.sum(np.diag(m) * x)


def reductions(x):
    out = np.linalg.norm(x) ** 3 + np.linalg.norm(x * x, 3) + np.linalg.norm(np.outer(x, x))
    out += np.var(x) * np.std(x) + np.sum(np.cumsum(x) ** 2) + np.sum(np.cumprod(x + 1.0))
    return out + np.sum(np.clip(x, -0.4, 0.5) ** 2 * x)


def fd_gradient(f, x, h=1e-6):
    g = np.zeros_like(x)
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h
        g[j] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def compiled_with_numba(f) -> bool:
    return any(key[0][0] is unwrap(f) and c.backend != "python" for key, cs in zymo.cache.COMPILED.items() for c in cs)


def check_family(f, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to Python would warn
        got = zymo.gradient(mode, f, X, numba=True)[0]
    assert compiled_with_numba(f)
    ref = zymo.gradient(mode, f, X, numba=False)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    fd = fd_gradient(f, X)
    assert np.max(np.abs(fd)) > 0.1, "vacuous: the gradient is (nearly) zero"
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [Reverse, Forward], ids=["reverse", "forward"])
@pytest.mark.parametrize("f", [shapes, reductions], ids=lambda f: f.__name__)
def test_family_compiles_and_agrees(f, mode):
    check_family(f, mode)


@pytest.mark.slow  # 20-40 s of Numba compiles per call on two cores
@pytest.mark.parametrize("mode", [Reverse, Forward], ids=["reverse", "forward"])
@pytest.mark.parametrize("f", [linalg_basic, linalg_decomp], ids=lambda f: f.__name__)
def test_linear_algebra_compiles_and_agrees(f, mode):
    check_family(f, mode)


def einsum_fn(x):
    return np.sum(np.einsum("i,j->ij", x, x) ** 2)


def test_rules_numba_cannot_compile_are_refused():
    """einsum: Numba cannot compile the primal; the error says so and names the user's line."""
    with pytest.raises(ZymoNumbaError) as info:
        zymo.gradient(Reverse, einsum_fn, X, numba=True)
    assert "test_numba_rules.py" in str(info.value)
