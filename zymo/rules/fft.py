"""Rules for `np.fft`: fft, ifft, fft2, ifft2, fftn, ifftn, rfft, irfft, fftshift, ifftshift.

Contract: every transform is linear, so its tangent is the same transform of the tangent; its
adjoint (JAX's convention, `rules/complex.py`) is the transform's transpose, computed by
`runtime/fft.py`: a complex DFT matrix is symmetric (the adjoint of `fft` is `fft` of the
adjoint, same `norm`, cut or padded back to the input's length), `rfft`'s is the real part of
the full `fft` of the zero-padded adjoint, `irfft`'s weights the rfft of the adjoint by the
Hermitian weights. NumPy's `n`, `s`, `axis`, `axes` and `norm` arguments are taken; `out=` is
refused. Numba has no `np.fft`: a derivative that calls one runs as Python (`python_only`).
"""
from __future__ import annotations

import numpy as np

from .. import runtime as _rt  # (names used by inlined rule bodies)
from .registry import Rule

_PY = "np.fft has no Numba implementation"


class _FFT(Rule):
    python_only = _PY


class fft(_FFT, key="numpy.fft.fft", fn=np.fft.fft, cases=(
        ("np.real(fn(x) * (0.5 + 1.5j))", ((8,),)), ("np.abs(fn(x * (1.0 + 1.0j), 6, 0, 'ortho'))", ((5, 3),)),
        ("np.imag(fn(x, n=3, norm='forward'))", ((5,),)))):
    def jvp_a(t, ans, a, n=None, axis=-1, norm=None): return np.fft.fft(t, n, axis, norm)
    def vjp_a(g, ans, a, n=None, axis=-1, norm=None): return _rt.fft_vjp(g, a, axis, norm, False)


class ifft(_FFT, key="numpy.fft.ifft", fn=np.fft.ifft, cases=(
        ("np.real(fn(x) * (0.5 + 1.5j))", ((8,),)), ("np.abs(fn(x * (1.0 + 1.0j), 6, 0, 'ortho'))", ((5, 3),)),
        ("np.imag(fn(x, n=3, norm='forward'))", ((5,),)))):
    def jvp_a(t, ans, a, n=None, axis=-1, norm=None): return np.fft.ifft(t, n, axis, norm)
    def vjp_a(g, ans, a, n=None, axis=-1, norm=None): return _rt.fft_vjp(g, a, axis, norm, True)


class fftn(_FFT, key="numpy.fft.fftn", fn=np.fft.fftn, cases=(
        ("np.real(fn(x) * (0.5 + 1.5j))", ((3, 4),)),
        ("np.abs(fn(x * (1.0 + 1.0j), s=(2, 5), axes=(1, 0)))", ((3, 4),)))):
    def jvp_a(t, ans, a, s=None, axes=None, norm=None): return np.fft.fftn(t, s, axes, norm)
    def vjp_a(g, ans, a, s=None, axes=None, norm=None): return _rt.fftn_vjp(g, a, s, axes, norm, False)


class ifftn(_FFT, key="numpy.fft.ifftn", fn=np.fft.ifftn, cases=(
        ("np.real(fn(x) * (0.5 + 1.5j))", ((3, 4),)),
        ("np.abs(fn(x * (1.0 + 1.0j), s=(2, 5), axes=(0, 1), norm='ortho'))", ((3, 4),)))):
    def jvp_a(t, ans, a, s=None, axes=None, norm=None): return np.fft.ifftn(t, s, axes, norm)
    def vjp_a(g, ans, a, s=None, axes=None, norm=None): return _rt.fftn_vjp(g, a, s, axes, norm, True)


class fft2(_FFT, key="numpy.fft.fft2", fn=np.fft.fft2, cases=(
        ("np.real(fn(x) * (0.5 + 1.5j))", ((3, 4),)), ("np.abs(fn(x + 1j, s=(4, 3)))", ((2, 3, 4),)))):
    def jvp_a(t, ans, a, s=None, axes=(-2, -1), norm=None): return np.fft.fft2(t, s, axes, norm)
    def vjp_a(g, ans, a, s=None, axes=(-2, -1), norm=None): return _rt.fftn_vjp(g, a, s, axes, norm, False)


class ifft2(_FFT, key="numpy.fft.ifft2", fn=np.fft.ifft2, cases=(
        ("np.real(fn(x) * (0.5 + 1.5j))", ((3, 4),)), ("np.abs(fn(x + 1j, s=(4, 3), norm='forward'))", ((2, 3, 4),)))):
    def jvp_a(t, ans, a, s=None, axes=(-2, -1), norm=None): return np.fft.ifft2(t, s, axes, norm)
    def vjp_a(g, ans, a, s=None, axes=(-2, -1), norm=None): return _rt.fftn_vjp(g, a, s, axes, norm, True)


class rfft(_FFT, key="numpy.fft.rfft", fn=np.fft.rfft, cases=(
        ("np.real(fn(x) * (0.5 + 1.5j))", ((8,),)), ("np.abs(fn(x, 7, 0, 'ortho'))", ((5, 3),)),
        ("np.imag(fn(x, n=4))", ((5,),)))):
    """Of a real array only (NumPy discards the imaginary part of a complex one: refused)."""
    def jvp_a(t, ans, a, n=None, axis=-1, norm=None): return np.fft.rfft(t, n, axis, norm)
    def vjp_a(g, ans, a, n=None, axis=-1, norm=None): return _rt.rfft_vjp(g, a, n, axis, norm)


class irfft(_FFT, key="numpy.fft.irfft", fn=np.fft.irfft, cases=(
        ("fn(x * (0.5 + 1.5j))", ((5,),)), ("fn(x + 1j * x * x, 7, 0, 'ortho')", ((5, 3),)),
        ("fn(x * 1j + x, n=3, norm='forward')", ((5,),)), ("fn(x)", ((4,),)))):
    def jvp_a(t, ans, a, n=None, axis=-1, norm=None): return np.fft.irfft(t, n, axis, norm)
    def vjp_a(g, ans, a, n=None, axis=-1, norm=None): return _rt.irfft_vjp(g, a, n, axis, norm)


class fftshift(Rule, key="numpy.fft.fftshift", fn=np.fft.fftshift, cases=(
        ("fn(x)", ((5,),)), ("fn(x, axes=(1,))", ((3, 4),)))):
    python_only = _PY

    def jvp_x(t, ans, x, axes=None): return np.fft.fftshift(t, axes)
    def vjp_x(g, ans, x, axes=None): return np.fft.ifftshift(g, axes)


class ifftshift(Rule, key="numpy.fft.ifftshift", fn=np.fft.ifftshift, cases=(
        ("fn(x)", ((5,),)), ("fn(x, axes=(1,))", ((3, 4),)))):
    python_only = _PY

    def jvp_x(t, ans, x, axes=None): return np.fft.ifftshift(t, axes)
    def vjp_x(g, ans, x, axes=None): return np.fft.fftshift(g, axes)
