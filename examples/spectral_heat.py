"""Inverse problem for a spectral PDE: recover the initial temperature of a periodic rod.

Run:  python examples/spectral_heat.py

The heat equation u_t = nu u_xx with periodic boundaries is solved exactly in Fourier space,
written as ordinary imperative NumPy with complex intermediates: `rfft`, a loop of time steps
that multiplies the spectrum in place by the decay factors, `irfft`. zymo differentiates the
real misfit with respect to the real initial condition (reverse mode), the gradient is checked
against central finite differences (and JAX when it is installed), and a few steps of gradient
descent with a smoothness penalty reconstruct the initial condition from the final state.
Numba has no `np.fft`, so these derivatives run as Python (zymo says so under numba="prefer").
"""
from __future__ import annotations

import numpy as np

import zymo
from zymo import Const, Reverse

N, NU, DT, STEPS = 64, 0.002, 0.05, 20
X = np.linspace(0.0, 1.0, N, endpoint=False)
K = 2.0 * np.pi * np.fft.rfftfreq(N, d=1.0 / N)   # wavenumbers of the rfft's frequencies


def evolve(u0, k, nu, dt, steps):
    """u(T) from u(0): each step damps every Fourier mode by exp(-nu k^2 dt)."""
    spec = np.fft.rfft(u0)
    decay = np.exp(-nu * k * k * dt) + 0j
    for _ in range(steps):
        spec = spec * decay
    return np.fft.irfft(spec, n=u0.shape[0])


def misfit(u0, target, k, nu, dt, steps, alpha):
    u = evolve(u0, k, nu, dt, steps)
    r = u - target
    smooth = np.fft.rfft(u0) * (1j * k)            # spectral derivative of u0: a penalty on roughness
    return 0.5 * np.sum(r * r) + alpha * np.sum(np.abs(smooth) ** 2) / u0.shape[0]


def fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def main() -> None:
    truth = np.exp(-((X - 0.3) / 0.05) ** 2) + 0.5 * np.exp(-((X - 0.7) / 0.08) ** 2)
    target = evolve(truth, K, NU, DT, STEPS)
    consts = (Const(target), Const(K), Const(NU), Const(DT), STEPS, Const(1e-6))

    u0 = np.zeros(N)
    (g, *_) = zymo.gradient(Reverse, misfit, u0, *consts)
    f = lambda u: misfit(u, target, K, NU, DT, STEPS, 1e-6)  # noqa: E731
    fd = fd_grad(f, u0)
    print(f"gradient vs central differences: max abs error {np.max(np.abs(g - fd)):.2e} "
          f"(|g| = {np.max(np.abs(g)):.2e})")
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)

        def misfit_jax(u0):
            spec = jnp.fft.rfft(u0) * jnp.exp(-NU * K * K * DT) ** STEPS
            r = jnp.fft.irfft(spec, n=N) - target
            return 0.5 * jnp.sum(r * r) + 1e-6 * jnp.sum(jnp.abs(jnp.fft.rfft(u0) * (1j * K)) ** 2) / N

        print(f"gradient vs jax.grad:           max abs error {np.max(np.abs(g - jax.grad(misfit_jax)(u0))):.2e}")
    except ImportError:
        pass

    lr = 1.0
    for it in range(200):
        (g, *_) = zymo.gradient(Reverse, misfit, u0, *consts)
        u0 = u0 - lr * g
        if it % 50 == 0 or it == 199:
            print(f"step {it:3d}: misfit {f(u0):.3e}, error of u0 {np.sqrt(np.mean((u0 - truth) ** 2)):.3e}")


if __name__ == "__main__":
    main()
