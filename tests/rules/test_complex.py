"""Complex numbers and FFTs (rules/complex.py, rules/fft.py).

Every case is a real loss of complex (or real) arguments, written once with `np` and run
three ways: zymo's reverse gradient and forward tangents against central finite differences
(real and imaginary parts of each argument separately), and against `jax.grad` of the same
code with `np` bound to `jax.numpy` (JAX's convention: the adjoint of a complex input is
`df/dx - i df/dy`; forward tangents are R-linear: `Re(sum(grad * t))` along `t`).
"""
from __future__ import annotations

import linecache
import textwrap
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse
from zymo.errors import ZymoTypeError

_RNG = np.random.default_rng(7)
_N = [0]


def _define(src: str) -> Callable:
    """A function `f` from source text, readable by zymo (its text is in `linecache`)."""
    _N[0] += 1
    file = f"<test_complex {_N[0]}>"
    text = textwrap.dedent(src)
    linecache.cache[file] = (len(text), None, text.splitlines(True), file)
    ns: dict[str, Any] = {"np": np, "W": W, "W2": W2, "H": H, "R": R}
    exec(compile(text, file, "exec"), ns)
    return ns["f"]


def _jax_version(f: Callable) -> Callable:
    import jax.numpy as jnp

    g = dict(f.__globals__)
    g.update(np=jnp, W=jnp.asarray(W), W2=jnp.asarray(W2), H=jnp.asarray(H), R=jnp.asarray(R))
    return types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)


def _c(*shape: int) -> Any:
    z = _RNG.normal(size=shape) + 1j * _RNG.normal(size=shape)
    return complex(z) if not shape else z


def _r(*shape: int) -> Any:
    return float(_RNG.normal()) if not shape else _RNG.normal(size=shape)


W = _c(6)        # fixed complex weights (make a real loss of a complex result non-degenerate)
W2 = _c(4, 6)
H = _c(8)        # a filter's transfer function
R = _r(8)

# (name, source of f, arguments[, source for JAX where the first mutates arrays or calls complex()])
CASES = [
    ("arith_scalar", """
def f(z):
    w = z * z + 1j * z - 2.0 / (z + 3.0)
    return (w * np.conj(w)).real + w.imag * 0.5 + np.abs(w) - z.conjugate().imag
""", (_c(),)),
    ("mixed_real_complex", """
def f(z, x):
    w = complex(x, 2.0 * x) * z + x ** 2 * 1j
    return np.abs(w) ** 2 + np.angle(w) + np.real(w) * x
""", (_c(), _r()), """
def f(z, x):
    w = (x + 2.0j * x) * z + x ** 2 * 1j
    return np.abs(w) ** 2 + np.angle(w) + np.real(w) * x
"""),
    ("loop_arrays", """
def f(z, x):
    s = 0.0
    for i in range(z.shape[0]):
        s = s + np.abs(z[i] * x[i]) ** 2 + np.angle(z[i]) + z[i].imag * x[i]
    return s
""", (_c(3), _r(3))),
    ("elementwise", """
def f(z):
    w = np.exp(z) + np.log(z) * np.sin(z) - np.cos(z) ** 2 + np.sqrt(z) + z ** 2.5 + np.tanh(z)
    w = w + np.sinh(z) / np.cosh(z) + np.tan(z) + np.square(z) + np.reciprocal(z) + np.expm1(z)
    w = w + np.log1p(z) + np.log10(z) + np.log2(z) + np.exp2(z) + np.power(z, 1.5)
    return np.sum(np.real(W * w)) + np.sum(np.abs(w))
""", (_c(6),)),
    ("inverse_trig", """
def f(z):
    w = np.arcsin(z) + np.arccos(z) * np.arctan(z) + np.arcsinh(z) + np.arccosh(z + 2.0) + np.arctanh(z / 4.0)
    return np.sum(np.imag(W * w))
""", (_c(6) * 0.3,)),
    ("real_imag_arrays", """
def f(z, x):
    re = np.real(z)
    im = z.imag
    v = re * x + im ** 2 - np.imag(z * x) * re
    return np.sum(v) + np.sum(np.abs(z.real + 1j * x))
""", (_c(6), _r(6))),
    ("complex_array_built", """
def f(x, y):
    z = np.zeros(6, dtype=np.complex128)
    z[:] = x
    z[1:4] = z[1:4] + 1j * y[1:4]
    z[0] = x[0] * y[0] + 2j
    return np.sum(np.abs(z) ** 2) + np.sum(np.angle(z))
""", (_r(6), _r(6)), """
def f(x, y):
    z = x.astype(np.complex128)
    z = z.at[1:4].set(z[1:4] + 1j * y[1:4])
    z = z.at[0].set(x[0] * y[0] + 2j)
    return np.sum(np.abs(z) ** 2) + np.sum(np.angle(z))
"""),
    ("carries_become_complex", """
def f(x, z):
    s = 0.0
    a = x * 1.0
    for i in range(x.shape[0]):
        s = s + x[i] * z[i]
        a = a * z[i]
    return np.abs(s) + np.sum(np.real(a))
""", (_r(3), _c(3))),
    ("vdot", """
def f(a, b):
    return np.real(np.vdot(a, b)) + np.imag(np.vdot(b * b, a)) + np.abs(np.vdot(a, W))
""", (_c(6), _c(6))),
    ("matmul", """
def f(A, z, x):
    u = A @ z + np.dot(A, x) * 1j
    v = np.matmul(z, A.T) + A.T @ x
    return np.sum(np.abs(u) ** 2) + np.sum(np.real(v * np.conj(u)))
""", (_c(4, 4), _c(4), _r(4))),
    ("reductions_shapes", """
def f(z):
    M = np.reshape(z, (2, 3))
    s = np.sum(M, axis=0) + np.mean(M.T, axis=1)[0] + np.cumsum(z)[:3]
    t = np.concatenate((s, np.flip(s))) * np.roll(z, 2) + np.stack((z, z)).sum(axis=0)
    u = np.outer(s, s).trace() + np.einsum("ij,ij->", M, M) + np.diff(z).sum() + np.tile(s, 2)[4]
    p = np.prod(z[:3]) + np.prod(M, axis=1)[1]
    return (np.sum(np.abs(t)) + np.real(u * W[0]) + np.sum(np.real(np.where(np.abs(z) > 1.0, z, 2.0 * z)))
            + np.abs(p))
""", (_c(6),)),
    ("more_shapes", """
def f(z, x):
    M = np.reshape(z, (2, 3))
    a = np.diagonal(np.outer(z, x)) + np.diag(np.outer(x, z)) + np.ravel(np.swapaxes(M, 0, 1)) + np.copy(z)
    b = np.inner(M, M) + np.tensordot(M, M.T, axes=1) + np.squeeze(np.expand_dims(M, 0) @ np.moveaxis(M, 0, 1), axis=0)
    c = np.kron(z[:2], z[2:4]) + np.kron(x[:2], z[:2]) + np.repeat(z[:2], 2)
    d = np.hstack((z[:1], x[:1] * 1j)) + np.vstack((M[0], M[1]))[1, :2] + np.atleast_2d(z[:2])[0, 1]
    e = np.broadcast_to(z[:3], (2, 3)) * np.full(3, 2.0 - 1.0j) + np.einsum("ii->i", np.outer(z, z))[:3]
    return (np.sum(np.real(W * a)) + np.sum(np.abs(b)) + np.sum(np.imag(c * W[:4])) + np.sum(np.abs(d) ** 2)
            + np.sum(np.real(e * W2[:2, :3])))
""", (_c(6), _r(6))),
    ("linalg", """
def f(A, b):
    x = np.linalg.solve(A, b)
    return np.sum(np.abs(x) ** 2) + np.real(np.linalg.det(A)) + np.imag(np.trace(np.linalg.inv(A)))
""", (_c(3, 3) + 3.0 * np.eye(3), _c(3))),
    ("spectral_filter", """
def f(x):
    return np.sum(np.abs(np.fft.ifft(H * np.fft.fft(x))) ** 2)
""", (_r(8),)),
    ("fft_n_norm", """
def f(z):
    a = np.fft.fft(z, n=8, norm="ortho")
    b = np.fft.ifft(z, n=4, norm="forward")
    c = np.fft.fft(z)
    return np.sum(np.abs(a) ** 2) + np.sum(np.real(b * W[:4])) + np.sum(np.real(W * c)) + np.abs(c[1])
""", (_c(6),)),
    ("rfft_irfft", """
def f(x, z):
    a = np.fft.rfft(x)
    b = np.fft.rfft(x, n=11, norm="ortho")
    c = np.fft.irfft(z)
    d = np.fft.irfft(z, n=9, norm="forward")
    e = np.fft.irfft(z, n=7)
    return (np.sum(np.real(a * W[:5])) + np.sum(np.abs(b) ** 2) + np.sum(c * R[:c.shape[0]]) + np.sum(d ** 2)
            + np.sum(e * R[:7]))
""", (_r(8), _c(5))),
    ("fft2_fftn_shift", """
def f(Z, x):
    a = np.fft.fft2(Z)
    b = np.fft.ifft2(Z, s=(3, 8), norm="ortho")
    c = np.fft.fftn(Z, axes=(0,))
    d = np.fft.ifftn(Z * x)
    e = np.fft.fftshift(a, axes=(1,)) + np.fft.ifftshift(d)
    return (np.sum(np.real(W2 * a)) + np.sum(np.abs(b) ** 2) + np.sum(np.imag(W2 * c)) + np.sum(np.abs(e))
            + np.sum(np.fft.fftshift(x) * R[:6]))
""", (_c(4, 6), _r(6))),
    ("stack_numbers", """
def f(z, x):
    w = np.stack((z * x, np.conj(z), x * 2.0, 1.5j))
    v = np.hstack((z * z, x)) + np.array([x * 1j, z])
    return np.sum(np.abs(w) ** 2) + np.real(np.sum(W[:4] * w)) + np.imag(np.sum(v * W[:2]))
""", (_c(), _r())),
]

_IDS = [c[0] for c in CASES]


def _loss(f: Callable, args: tuple) -> float:
    v = f(*args)
    assert np.ndim(v) == 0 and not np.iscomplexobj(v), "a case must return a real number"
    return float(v)


def _with(args: tuple, k: int, v: Any) -> tuple:
    return tuple(v if i == k else a for i, a in enumerate(args))


def _fd_gradient(f: Callable, args: tuple, k: int, eps: float = 1e-6) -> Any:
    """Central differences along the real, then the imaginary part of each element of
    argument `k`: `df/dx - i df/dy` for a complex argument (JAX's convention), `df/dx` for a real one."""
    a = args[k]
    arr = np.array(a, dtype=complex if np.iscomplexobj(a) else float)
    g = np.zeros(arr.shape, dtype=arr.dtype)
    for j in np.ndindex(arr.shape):
        for unit in ((1.0, 1j) if np.iscomplexobj(a) else (1.0,)):
            p, m = arr.copy(), arr.copy()
            p[j] += eps * unit
            m[j] -= eps * unit
            pa = p if isinstance(a, np.ndarray) else p[()].item()
            ma = m if isinstance(a, np.ndarray) else m[()].item()
            d = (_loss(f, _with(args, k, pa)) - _loss(f, _with(args, k, ma))) / (2 * eps)
            g[j] += d if unit == 1.0 else -1j * d
    return g if isinstance(a, np.ndarray) else g[()].item()


def _tangent(a: Any) -> Any:
    shape = np.shape(a)
    t = _RNG.normal(size=shape) + (1j * _RNG.normal(size=shape) if np.iscomplexobj(a) else 0.0)
    return t if isinstance(a, np.ndarray) else t[()].item()


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_reverse_against_finite_differences(case: tuple) -> None:
    _, src, args, *_ = case
    f = _define(src)
    grads = zymo.gradient(Reverse, f, *args)
    for k, a in enumerate(args):
        assert np.iscomplexobj(grads[k]) == np.iscomplexobj(a), "a complex argument has a complex gradient"
        fd = _fd_gradient(f, args, k)
        assert np.max(np.abs(fd)) > 1e-3, "the case must depend on each argument"
        np.testing.assert_allclose(grads[k], fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_forward_against_finite_differences_and_reverse(case: tuple) -> None:
    _, src, args, *_ = case
    f = _define(src)
    grads = zymo.gradient(Reverse, f, *args)
    tangents = [_tangent(a) for a in args]
    (d,) = zymo.autodiff(Forward, f, Duplicated, *[Duplicated(np.copy(a) if isinstance(a, np.ndarray) else a, t)
                                                   for a, t in zip(args, tangents, strict=True)])
    eps = 1e-6
    plus = tuple(a + eps * t for a, t in zip(args, tangents, strict=True))
    minus = tuple(a - eps * t for a, t in zip(args, tangents, strict=True))
    fd = (_loss(f, plus) - _loss(f, minus)) / (2 * eps)
    assert abs(fd) > 1e-3
    assert not np.iscomplexobj(d)
    np.testing.assert_allclose(d, fd, rtol=1e-5, atol=1e-6)
    # forward and reverse agree: the tangent is Re(sum(grad * t)), JAX's convention
    along = sum(np.real(np.sum(g * t)) for g, t in zip(grads, tangents, strict=True))
    np.testing.assert_allclose(d, along, rtol=1e-10)


# every case in the fast lane: with the reference jitted, the longest (elementwise, fft2_fftn_shift,
# rfft_irfft: 5-7 s each op by op, hence `slow` before) take about a second
@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_reverse_against_jax(case: tuple) -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    _, src, args, *jax_src = case
    f = _define(src)
    grads = zymo.gradient(Reverse, f, *args)
    # jitted: one XLA compile per case, not one per primitive op (a quarter of the time)
    jf = _jax_version(_define(jax_src[0]) if jax_src else f)
    expected = jax.jit(jax.grad(jf, argnums=tuple(range(len(args)))))(*args)
    for g, e in zip(grads, expected, strict=True):
        np.testing.assert_allclose(g, np.asarray(e), rtol=1e-9, atol=1e-11)


def test_gradient_in_forward_mode_of_complex_arguments() -> None:
    f = _define(CASES[_IDS.index("loop_arrays")][1])
    args = CASES[_IDS.index("loop_arrays")][2]
    for g, e in zip(zymo.gradient(Forward, f, *args), zymo.gradient(Reverse, f, *args), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-10)
    (g,) = zymo.gradient(Forward, lambda z: np.abs(z) ** 2, 3 + 4j)
    assert g == 6 - 8j  # jax.grad(lambda z: jnp.abs(z) ** 2)(3 + 4j)


def test_active_complex_and_jax_convention() -> None:
    ((g,),) = zymo.autodiff(Reverse, lambda z: np.abs(z) ** 2, Active, Active(3 + 4j))
    assert g == 6 - 8j
    ((g,),) = zymo.autodiff(Reverse, lambda z: z.imag, Active, Active(1 + 1j))
    assert g == -1j  # df/dx - i df/dy
    ((g,),) = zymo.autodiff(Reverse, lambda z: np.real(z) * 2.0, Active, Active(1 + 1j))
    assert g == 2.0


HOLO = """
def f(z):
    return np.exp(z) * np.sin(z) / (1.0 + z ** 2) + z ** 3
"""


def test_real_part_of_a_0d_array() -> None:
    f = _define("def f(z):\n    return np.real(z) * 2.0 + np.imag(z)\n")
    (g,) = zymo.gradient(Reverse, f, np.array(1 + 2j))
    assert g == 2 - 1j


def test_real_part_of_real_numbers() -> None:
    f = _define("def f(x, y):\n    return x.real * 3.0 + np.sum(np.real(y) * y)\n")
    gx, gy = zymo.gradient(Reverse, f, 0.5, np.array([1.0, -2.0]))
    assert gx == 3.0 and not np.iscomplexobj(gy)
    np.testing.assert_allclose(gy, [2.0, -4.0])
    (d,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(0.5, 1.0), Duplicated(np.array([1.0, -2.0]), np.ones(2)))
    assert d == pytest.approx(3.0 - 2.0)
    with pytest.raises(ZymoTypeError, match="imaginary part of a real number"):
        zymo.gradient(Reverse, _define("def f(x):\n    return np.sum(np.imag(x) + x)\n"), np.ones(2))


def test_angle_of_real_numbers_has_zero_derivative() -> None:
    f = _define("def f(x, y):\n    return np.sum(np.angle(x) * y) + np.angle(y[0]) + np.sum(x * y)\n")
    x, y = np.array([0.5, -1.0, 2.0]), np.array([1.5, 2.0, -0.5])
    gx, gy = zymo.gradient(Reverse, f, x, y)
    assert not np.iscomplexobj(gx) and not np.iscomplexobj(gy)
    np.testing.assert_allclose(gx, y)
    np.testing.assert_allclose(gy, x + np.angle(x))
    (d,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(x.copy(), np.ones(3)), Duplicated(y.copy(), np.zeros(3)))
    assert d == pytest.approx(np.sum(y))


def test_holomorphic_function() -> None:
    """Forward mode with tangent 1 and reverse mode with seed 1 (Active return) both give f'(z)."""
    f = _define(HOLO)
    z = 0.3 + 0.4j
    (d,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(z, 1.0))
    ((g,),) = zymo.autodiff(Reverse, f, Active, Active(z))
    eps = 1e-6
    fd_x = (f(z + eps) - f(z - eps)) / (2 * eps)
    fd_y = (f(z + 1j * eps) - f(z - 1j * eps)) / (2j * eps)  # the same for a holomorphic f
    np.testing.assert_allclose(d, fd_x, rtol=1e-8)
    np.testing.assert_allclose(d, fd_y, rtol=1e-8)
    np.testing.assert_allclose(g, d, rtol=1e-12)
    # along i, the tangent is i f'(z)
    (d_i,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(z, 1j))
    np.testing.assert_allclose(d_i, 1j * d, rtol=1e-12)
    # complex step on the real axis: f is real-analytic there when its coefficients are real
    h = 1e-30
    (d_real,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(0.7, 1.0))
    np.testing.assert_allclose(d_real, np.imag(f(0.7 + 1j * h)) / h, rtol=1e-12)


def test_holomorphic_against_jax() -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f = _define(HOLO)
    z = 0.3 + 0.4j
    (d,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(z, 1.0))
    np.testing.assert_allclose(d, complex(jax.grad(_jax_version(f), holomorphic=True)(z)), rtol=1e-12)
    _, tan = jax.jvp(_jax_version(f), (z,), (1j,))
    (d_i,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(z, 1j))
    np.testing.assert_allclose(d_i, complex(tan), rtol=1e-12)


def test_complex_shadows_duplicated() -> None:
    """Reverse mode adds into a complex shadow; an overwritten complex output's shadow is consumed."""
    f = _define("""
def f(z, out):
    out[:] = z * z
    return np.sum(np.abs(out))
""")
    z = _c(4)
    dz, out, dout = np.zeros_like(z), np.zeros(4, complex), np.ones(4, complex)
    zymo.autodiff(Reverse, f, Active, Duplicated(z, dz), Duplicated(out, dout))
    expected = _fd_gradient(lambda z: f(z, np.zeros(4, complex)), (z,), 0) + 2 * z  # dout's 1s flow back too
    np.testing.assert_allclose(dz, expected, rtol=1e-5)
    assert np.all(dout == 0)


# -- refusals -----------------------------------------------------------------------------------
REFUSED = [
    ("maximum", "def f(z):\n    return np.sum(np.abs(np.maximum(z, 1.0)))\n"),
    ("sign", "def f(z):\n    return np.sum(np.abs(np.sign(z) * z))\n"),
    ("sort", "def f(z):\n    return np.sum(np.abs(np.sort(z)))\n"),
    ("var", "def f(z):\n    return np.var(z)\n"),
    ("max", "def f(z):\n    return np.abs(np.max(z))\n"),
    ("float", "def f(z):\n    return float(z[0])\n"),
    ("store_into_real", "def f(z):\n    x = np.zeros(3)\n    x[0] = z[0]\n    return np.sum(x)\n"),
    ("write_imag", "def f(z):\n    im = z.imag\n    im[0] = 1.0\n    return np.sum(np.abs(z))\n"),
    ("convolve", "def f(z):\n    return np.sum(np.abs(np.convolve(z, z)))\n"),
    ("inplace_into_real", "def f(z):\n    x = np.ones(3)\n    x += z\n    return np.sum(x)\n"),
    ("rfft_of_complex", "def f(z):\n    return np.sum(np.abs(np.fft.rfft(z)))\n"),
    ("clip", "def f(z):\n    return np.sum(np.abs(np.clip(z, 0.0, 1.0)))\n"),
    ("round", "def f(z):\n    return np.sum(np.abs(np.round(z) * z))\n"),
]


@pytest.mark.parametrize("src", [s for _, s in REFUSED], ids=[n for n, _ in REFUSED])
def test_refused_at_the_users_line(src: str) -> None:
    f = _define(src)
    with pytest.raises(ZymoTypeError) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zymo.gradient(Reverse, f, _c(3))
    assert "line" in str(e.value) and "test_complex" in str(e.value)


def test_unsupported_complex_attribute_is_refused() -> None:
    class Box:
        pass

    b = Box()
    b.z = 1 + 1j
    with pytest.raises(ZymoTypeError, match="complex number held by"):
        zymo.gradient(Reverse, lambda x: x * b.z.real, 1.0)


def test_const_complex_argument() -> None:
    f = _define("def f(x, z):\n    return np.abs(x * z) ** 2\n")
    g, gz = zymo.gradient(Reverse, f, 0.5, Const(1 + 2j))
    assert gz is None and g == pytest.approx(2 * 0.5 * 5.0)


def test_split_mode_caches_complex_values() -> None:
    f = _define("""
def f(z):
    s = 0.0
    for i in range(z.shape[0]):
        s = s + z[i] * z[i]
        z[i] = z[i] * 1j
    return np.abs(s)
""")
    z = _c(4)
    fwd, rev = zymo.autodiff_thunk(zymo.ReverseSplitWithPrimal, f, Active, Duplicated(z.copy(), np.zeros_like(z)))
    zc, dz = z.copy(), np.zeros_like(z)
    tape, y = fwd(Duplicated(zc, dz))
    rev(Duplicated(zc, dz), 1.0, tape)
    assert y == pytest.approx(np.abs(np.sum(z * z)))
    np.testing.assert_allclose(dz, _fd_gradient(lambda z: f(z.copy()), (z,), 0), rtol=1e-5)


SECOND = """
def f(x):
    A = np.outer(x, x) * (0.5 + 1j)
    u = A @ np.exp(1j * x) + np.sum(A, axis=0) * x
    return np.sum(np.abs(u + 1j) ** 2) + np.real(np.sum(u * u))
"""


def test_second_order_through_complex_intermediates() -> None:
    """hvp and hessian of a real loss of real inputs with complex intermediates: against central
    differences of the reverse gradient (and JAX below)."""
    f = _define(SECOND)
    x, v = _r(4), _r(4)
    eps = 1e-6
    g = lambda x: zymo.gradient(Reverse, f, x)[0]  # noqa: E731
    np.testing.assert_allclose(zymo.hvp(f, x, v), (g(x + eps * v) - g(x - eps * v)) / (2 * eps), rtol=1e-5)
    np.testing.assert_allclose(zymo.hessian(f, x) @ v, zymo.hvp(f, x, v), rtol=1e-10)


@pytest.mark.slow
def test_second_order_against_jax() -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f = _define(SECOND)
    x = _r(4)
    np.testing.assert_allclose(zymo.hessian(f, x), np.asarray(jax.jit(jax.hessian(_jax_version(f)))(x)), rtol=1e-9)


# second order through complex intermediates refused with an error naming zymo's generated code
# (`_rt.fdiv`, `_rt.fpow`, `_rt.imag_copy`, a complex constant named in a loop and read after
# it): each works now, against jax.hessian and central differences of the gradient
SECOND_MORE = {
    "division": """
def f(x):
    z = x[0] + 1j * x[1]
    return np.real(z * np.conj(z) / (z + 2.0)) + np.imag(1.0 / (z * x[2] - 3.0j))
""",
    "abs_angle": """
def f(x):
    z = x[0] + 1j * x[1]
    w = x * (1.0 + 0.5j) + W[:3]
    return np.abs(z) ** 3 + np.angle(z) * x[2] + np.sum(np.abs(w)) + abs(z) ** -1.5
""",
    "imag": """
def f(x):
    z = x[0] * x[1] + 1j * x[1] ** 2
    w = x * W[:3]
    return z.imag * x[0] + np.imag(z * z) + np.sum(w.imag ** 2 * np.real(w))
""",
    "powers": """
def f(x):
    z = x[0] + 1j * x[1]
    return np.abs(z ** x[2]) + np.real(z ** -2) + np.real((z + 2.0) ** 2.5)
""",
    "constant_in_loop": """
def f(x):
    s = 0.0
    for i in range(x.shape[0]):
        z = x[i] * (2.0 - 1j) + 1j * x[(i + 1) % 3]
        s = s + np.abs(z) / (1.0 + z.imag ** 2) + np.real(z / (z + 1.5j))
    return s
""",
    "stack_numbers": """
def f(x):
    z = np.stack((x[0] + 1j * x[1], x[2] * 1j, x[0] * x[2]))
    return np.sum(np.abs(z) ** 2 * x) + np.real(np.sum(z * W[:3]))
""",
}


@pytest.mark.parametrize("name", list(SECOND_MORE))
def test_second_order_of_complex_constructs(name: str) -> None:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f = _define(SECOND_MORE[name])
    x, v = np.array([0.4, -0.8, 1.3]), np.array([0.3, -1.0, 0.7])
    H = zymo.hessian(f, x.copy())
    expected = np.asarray(jax.hessian(_jax_version(f))(x))
    assert np.max(np.abs(expected)) > 0.1 and np.max(np.abs(expected - expected.T)) < 1e-12
    np.testing.assert_allclose(H, expected, rtol=1e-9, atol=1e-12)
    eps = 1e-6
    g = lambda y: zymo.gradient(Reverse, f, y)[0]  # noqa: E731
    hv, grad = zymo.hvp_and_gradient(f, x.copy(), v)
    np.testing.assert_allclose(hv, (g(x + eps * v) - g(x - eps * v)) / (2 * eps), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(hv, H @ v, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grad, g(x), rtol=1e-14)


def test_second_order_of_complex_constructs_of_a_float() -> None:
    """A float x (`derivatives._scalar_second`): the same programs, and the same checks of
    helpers without a tangent rule as for an array x (it named zymo's runtime source)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    f = _define("""
def f(x):
    z = x + 1j * x * x
    return np.real(z * np.conj(z) / (z + 2.0)) + z.imag * np.abs(z) + np.abs(z ** 1.5)
""")
    h = zymo.hessian(f, 0.7)
    assert h == pytest.approx(float(jax.hessian(_jax_version(f))(0.7)), rel=1e-10)
    assert zymo.hvp(f, 0.7, -2.0) == pytest.approx(-2.0 * h, rel=1e-12)
    g = lambda y: zymo.gradient(Reverse, f, y)[0]  # noqa: E731
    assert h == pytest.approx((g(0.7 + 1e-6) - g(0.7 - 1e-6)) / 2e-6, rel=1e-6)
    d = _define("""
def f(x):
    return np.sum(np.diff(np.stack((x, x * x, x ** 3))) ** 3)
""")
    with pytest.raises(zymo.errors.UnsupportedCall, match="through numpy.diff") as info:
        zymo.hessian(d, 0.7)
    assert "<test_complex" in str(info.value) and "line 3" in str(info.value)


def test_second_order_refusal_in_generated_code_names_the_users_line(monkeypatch) -> None:
    """What second order's reading of zymo's own program still refuses is said at the user's
    construct, not at the generated line (`derivatives._user_terms`): here with `zymo.fdiv` and
    `imag_copy` taken out of COMPLEX_SAFE, as they were."""
    import zymo.rules.complex as cx

    monkeypatch.setattr(cx, "COMPLEX_SAFE", cx.COMPLEX_SAFE - {"zymo.fdiv", "zymo.rt.imag_copy"})
    f = _define("""
def f(x):
    z = x[0] + 1j * x[1]
    w = z * z + x[1]
    return np.real(z * np.conj(z) / (w + 2.0))
""")
    g = _define("""
def f(x):
    z = x[0] * x[1] + 1j * x[1] ** 2
    return z.imag * x[0]
""")
    x = np.array([0.4, -0.8])
    for fn, call, line, what in ((f, lambda: zymo.hessian(f, x.copy()), 5, "truediv"),
                                 (f, lambda: zymo.hvp(f, x.copy(), x.copy()), 5, "truediv"),
                                 (g, lambda: zymo.hessian(g, x.copy()), 4, "numpy.imag")):
        with pytest.raises(ZymoTypeError, match=f"second derivatives .* through {what}") as info:
            call()
        msg = str(info.value)
        assert fn.__code__.co_filename in msg and f"line {line}" in msg and "Hint" in msg, msg
        assert "<zymo " not in msg.split("Why:")[0], msg  # the location is the user's


def test_second_order_through_fft_is_refused() -> None:
    f = _define(CASES[_IDS.index("spectral_filter")][1])
    with pytest.raises(zymo.errors.UnsupportedCall, match="numpy.fft"):
        zymo.hvp(f, _r(8), _r(8))


def test_jacobian_of_complex_values_is_refused() -> None:
    with pytest.raises(zymo.errors.ZymoUsageError):
        zymo.jacobian(Forward, lambda x: np.exp(1j * x), _r(3))
    with pytest.raises(zymo.errors.ZymoUsageError):
        zymo.jacobian(Reverse, lambda z: np.abs(z), _c(3))


# -- Numba -----------------------------------------------------------------------------------
def test_numba_backend_complex_arithmetic() -> None:
    """A loop over complex and real arrays (0.1 s to compile): both modes, against the Python backend."""
    f = _define(CASES[_IDS.index("loop_arrays")][1])
    args = CASES[_IDS.index("loop_arrays")][2]
    py = zymo.gradient(Reverse, f, *args)
    nb = zymo.gradient(Reverse, f, *args, numba=True)
    for a, b in zip(py, nb, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    t = [_tangent(a) for a in args]
    (d_py,) = zymo.autodiff(Forward, f, Duplicated, *[Duplicated(np.copy(a), u) for a, u in zip(args, t, strict=True)])
    (d_nb,) = zymo.autodiff(Forward, f, Duplicated, *[Duplicated(np.copy(a), u) for a, u in zip(args, t, strict=True)],
                            numba=True)
    np.testing.assert_allclose(d_py, d_nb, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["arith_scalar", "mixed_real_complex", "vdot", "complex_array_built", "linalg"])
def test_numba_backend_more(name: str) -> None:
    """Scalars, complex(), vdot, stores of real values into complex memory, linear algebra (compiles: 1-30 s)."""
    _, src, args, *_ = CASES[_IDS.index(name)]
    f = _define(src)
    for a, b in zip(zymo.gradient(Reverse, f, *args), zymo.gradient(Reverse, f, *args, numba=True), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    t = [_tangent(a) for a in args]
    dup = lambda: [Duplicated(np.copy(a) if isinstance(a, np.ndarray) else a, u) for a, u in zip(args, t, strict=True)]  # noqa: E731
    (d_py,) = zymo.autodiff(Forward, f, Duplicated, *dup())
    (d_nb,) = zymo.autodiff(Forward, f, Duplicated, *dup(), numba=True)
    np.testing.assert_allclose(d_py, d_nb, rtol=1e-10)


def test_fft_runs_as_python_under_numba() -> None:
    from zymo.codegen.numba.backend import ZymoNumbaError

    f = _define(CASES[_IDS.index("spectral_filter")][1])
    x = CASES[_IDS.index("spectral_filter")][2][0]
    with pytest.raises(ZymoNumbaError, match="np.fft"):
        zymo.gradient(Reverse, f, x, numba=True)
    with pytest.warns(zymo.errors.ZymoWarning, match="np.fft"):
        (g,) = zymo.gradient(Reverse, f, x, numba="prefer")
    np.testing.assert_allclose(g, zymo.gradient(Reverse, f, x)[0], rtol=1e-12)


@pytest.mark.slow
def test_kernels_backend_complex_loops_around_ffts() -> None:
    """numba='kernels': the FFTs stay Python, the loop over complex values is a Numba kernel."""
    f = _define("""
def f(u0, target, k):
    spec = np.fft.rfft(u0)
    decay = np.exp(-0.01 * k * k) + 0j
    for _ in range(3):
        for j in range(spec.shape[0]):
            spec[j] = spec[j] * decay[j] * (1.0 + 0.1j)
    return np.sum((np.fft.irfft(spec, n=u0.shape[0]) - target) ** 2)
""")
    u0, target, k = _r(8), _r(8), np.arange(5.0)
    (g, _, _) = zymo.gradient(Reverse, f, u0, Const(target), Const(k))
    (gk, _, _) = zymo.gradient(Reverse, f, u0, Const(target), Const(k), numba="kernels")
    np.testing.assert_allclose(gk, g, rtol=1e-12)
    np.testing.assert_allclose(g, _fd_gradient(lambda u: f(u, target, k), (u0,), 0), rtol=1e-5, atol=1e-8)


def _squares_into_complex_buffer(z):
    w = np.zeros(len(z), dtype=complex)  # the builtin: NumPy's complex128
    w[:] = z * z
    return np.sum(np.abs(w))


def test_dtype_complex_builtin():
    """`dtype=complex` was a raw TypeError from code generation (helper 80); it is complex128,
    in both modes, equal to central differences of the real and imaginary parts."""
    z = np.array([1.0 + 2.0j, 0.5 - 1.0j])
    (gr,) = zymo.gradient(zymo.Reverse, _squares_into_complex_buffer, z.copy())
    (gf,) = zymo.gradient(zymo.Forward, _squares_into_complex_buffer, z.copy())
    e = 1e-6
    fd = np.empty_like(z)
    for k in range(z.size):
        d = np.zeros_like(z)
        d[k] = e
        re = (_squares_into_complex_buffer(z + d) - _squares_into_complex_buffer(z - d)) / (2 * e)
        im = (_squares_into_complex_buffer(z + 1j * d) - _squares_into_complex_buffer(z - 1j * d)) / (2 * e)
        fd[k] = re - 1j * im  # JAX's convention: df/dx - i df/dy
    np.testing.assert_allclose(gr, fd, rtol=1e-6)
    np.testing.assert_allclose(gf, gr, rtol=1e-12)
