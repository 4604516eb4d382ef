"""Helpers of the FFT rules (`rules/fft.py`), called by generated code as `_rt.<name>`.

Contract: each `*_vjp` returns the adjoint of the FFT's input under JAX's convention (linear
in the adjoint `g`, no conjugate: `rules/complex_.py`), with the input's shape: an FFT that
padded its input (`n` or `s` larger than the input's length) gives the adjoint's leading part,
one that truncated it gives zeros beyond (the transpose of padding/truncating).
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "fit", "fft_vjp", "fftn_vjp", "rfft_vjp", "irfft_vjp",
]


def fit(g: Any, m: int, axis: int) -> Any:
    """`g` cut or zero-padded to length `m` along `axis` (the transpose of the reverse operation)."""
    k = g.shape[axis]
    if k == m:
        return g
    if k > m:
        return np.take(g, np.arange(m), axis=axis)
    pad = [(0, 0)] * g.ndim
    pad[axis] = (0, m - k)
    return np.pad(g, pad)


def _axes(a: Any, s: Any, axes: Any) -> tuple:
    if axes is None:
        return tuple(range(np.ndim(a))) if s is None else tuple(range(np.ndim(a) - len(s), np.ndim(a)))
    return tuple(axes)


def fft_vjp(g: Any, a: Any, axis: int, norm: Any, inverse: bool) -> Any:
    """Adjoint of `a` in `fft(a, n, axis, norm)` (`ifft` when `inverse`): the DFT matrix is
    symmetric, so its transpose is the same transform (same normalization)."""
    r = (np.fft.ifft if inverse else np.fft.fft)(g, axis=axis, norm=norm)
    return _like(fit(r, np.shape(a)[axis], axis), a)


def fftn_vjp(g: Any, a: Any, s: Any, axes: Any, norm: Any, inverse: bool) -> Any:
    """Adjoint of `a` in `fftn(a, s, axes, norm)` (`ifftn` when `inverse`)."""
    ax = _axes(a, s, axes)
    r = (np.fft.ifftn if inverse else np.fft.fftn)(g, axes=ax, norm=norm)
    for k in ax:
        r = fit(r, np.shape(a)[k], k)
    return _like(r, a)


def rfft_vjp(g: Any, a: Any, n: Any, axis: int, norm: Any) -> Any:
    """Adjoint of real `a` in `rfft(a, n, axis, norm)`: Re(fft(g zero-padded to n))."""
    m = np.shape(a)[axis]
    r = np.fft.fft(g, n=m if n is None else n, axis=axis, norm=norm)
    return fit(np.real(r), m, axis)


def irfft_vjp(g: Any, a: Any, n: Any, axis: int, norm: Any) -> Any:
    """Adjoint of `a` in `irfft(a, n, axis, norm)`: conj(w * rfft(g)) scaled, `w` the Hermitian
    weights (1 for the zero frequency and, n even, the Nyquist one; 2 for the others, which
    stand for two frequencies), as JAX's transpose of irfft."""
    m = np.shape(a)[axis]
    n = 2 * (m - 1) if n is None else n
    c = np.fft.rfft(g, axis=axis)
    w = np.full(n // 2 + 1, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    scale = {None: 1.0 / n, "backward": 1.0 / n, "ortho": 1.0 / np.sqrt(n), "forward": 1.0}[norm]
    shape = [1] * np.ndim(c)
    shape[axis] = n // 2 + 1
    return _like(fit(np.conj(c * (w * scale).reshape(shape)), m, axis), a)


def _like(r: Any, a: Any) -> Any:
    """The adjoint of a real input is the real part (JAX's transpose of a real-to-complex cast)."""
    return r if np.iscomplexobj(a) else np.real(r)
