"""zymo.interface as a client sees it: SciPy's optimizer and stiff ODE solver, every backend.

    python examples/interface_scipy.py

1. `scipy.optimize.minimize(method="trust-ncg")` on the Rosenbrock function, with the
   gradient and the Hessian-vector product from the front end (`prepare_*` once, then
   prepared calls writing into a buffer).
2. `scipy.integrate.solve_ivp(method="BDF")` on a stiff reaction-diffusion system, with
   the Jacobian of the right-hand side from the front end. zymo also differentiates the
   in-place right-hand side `rhs_inplace(du, u, K)` written with loops, which JAX and
   autograd cannot run.

Each function is written once against a NumPy-like namespace `xp` (`backend.numpy`):
NumPy for zymo and finite differences, jax.numpy, autograd.numpy, torch.
"""
from __future__ import annotations

import time

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import minimize

import zymo
from zymo.interface import (
    AutoAutograd,
    AutoFiniteDiff,
    AutoJAX,
    AutoTorch,
    AutoZymo,
    BackendLimitation,
    Constant,
    gradient,
    hvp,
    jacobian,
    prepare_gradient,
    prepare_hvp,
    prepare_jacobian,
)


def make_rosenbrock(xp):
    def rosenbrock(x):
        s = 0.0
        for i in range(len(x) - 1):
            s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
        return s
    return rosenbrock


def minimize_with(backend, x0=None):
    """Minimize Rosenbrock with trust-ncg (gradient + Hessian-vector products), or with BFGS
    (gradient only) when the backend has no Hessian-vector product. Returns the OptimizeResult."""
    f = make_rosenbrock(backend.numpy)
    x0 = np.array([-1.2, 1.0, -0.5, 0.8, 1.1]) if x0 is None else x0
    gprep = prepare_gradient(f, backend, x0)
    g = np.zeros_like(x0)

    def jac(x):
        return gradient(f, backend, x, prep=gprep, out=g).copy()

    try:
        hprep = prepare_hvp(f, backend, x0, np.ones_like(x0))
    except BackendLimitation:
        return minimize(f if backend.numpy is np else make_rosenbrock(np), x0, jac=jac, method="BFGS",
                        options={"gtol": 1e-10})

    def hessp(x, p):
        return hvp(f, backend, x, p, prep=hprep)

    return minimize(make_rosenbrock(np), x0, jac=jac, hessp=hessp, method="trust-ncg", options={"gtol": 1e-10})


def make_rhs(xp):
    def rhs(u, K):
        return -xp.matmul(K, u) - u ** 3 + 1.0
    return rhs


def rhs_inplace(du, u, K):
    """The same right-hand side, as imperative code writing into du (zymo and finite differences)."""
    n = len(u)
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += K[i, j] * u[j]
        du[i] = -s - u[i] ** 3 + 1.0


def laplacian(n, stiffness=1000.0):
    return stiffness * (2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1))


def solve_with(backend, n=8, inplace=False, t_end=5.0):
    """Solve u' = -K u - u**3 + 1 with BDF, the Jacobian of the RHS from `backend`."""
    K = laplacian(n)
    u0 = 2.0 + np.sin(np.arange(n))
    if inplace:
        du = np.zeros(n)
        prep = prepare_jacobian(rhs_inplace, du, backend, u0, Constant(K))

        def fun(t, u):
            out = np.zeros(n)
            rhs_inplace(out, u, K)
            return out

        def jac(t, u):
            return jacobian(rhs_inplace, du, backend, u, Constant(K), prep=prep)
    else:
        rhs = make_rhs(backend.numpy)
        prep = prepare_jacobian(rhs, backend, u0, Constant(K))
        rhs_np = make_rhs(np)

        def fun(t, u):
            return rhs_np(u, K)

        def jac(t, u):
            return jacobian(rhs, backend, u, Constant(K), prep=prep)
    return solve_ivp(fun, (0.0, t_end), u0, method="BDF", jac=jac, rtol=1e-8, atol=1e-10)


def backends():
    return [b for b in (AutoZymo(), AutoJAX(), AutoTorch(), AutoAutograd(), AutoFiniteDiff()) if b.available()]


def main() -> None:
    print("minimize Rosenbrock (5 variables); exact minimum at ones")
    for b in backends():
        t0 = time.perf_counter()
        r = minimize_with(b)
        print(f"  {b!r:32} {r.message[:40]:40} nit={r.nit:3d} |x-1|={np.abs(r.x - 1).max():.1e} "
              f"{time.perf_counter() - t0:.2f} s")
    if getattr(zymo, "hvp", None) is None:
        print("  (AutoZymo used BFGS: Hessian-vector products need zymo.hvp)")
    print("solve_ivp BDF, stiff reaction-diffusion (8 unknowns), Jacobian of the RHS")
    ref = None
    for b in backends():
        for inplace in ((False, True) if b.supports_mutation and b.numpy is np else (False,)):
            t0 = time.perf_counter()
            r = solve_with(b, inplace=inplace)
            ref = r.y[:, -1] if ref is None else ref
            print(f"  {b!r:32} {'in-place rhs' if inplace else 'rhs':12} njev={r.njev:3d} "
                  f"|u - u_first|={np.abs(r.y[:, -1] - ref).max():.1e} {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
