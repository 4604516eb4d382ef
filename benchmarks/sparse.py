"""Sparse Jacobians and Hessians (issue 36): compressed passes against one pass and dense.

    python benchmarks/sparse.py                 # n = 100000 (Jacobian), 10000 (Hessian)
    python benchmarks/sparse.py --n 20000 --nh 2000 --ode 300

Three workloads, each checked against the dense result at a small size before timing:
- "FD residual": the Jacobian of a 1-d finite-difference residual (Bratu's problem,
  tridiagonal, 3 colors) with `n` unknowns: the sparse Jacobian from a prepared plan
  against one forward-mode JVP (target: about 3 JVPs); "prepare" is detection + coloring.
- "chained objective": the Hessian of the chained Rosenbrock function (tridiagonal) with
  `nh` unknowns: the sparse Hessian against one hvp (target: under 10 hvps).
- "BDF solve": `scipy.integrate.solve_ivp(method="BDF")` on a reaction-diffusion system with
  `ode` unknowns, `jac=` the sparse Jacobian against `jac=` the dense one (zymo.jacobian),
  each Jacobian function called once before timing (so compilation is not counted); the
  solve time includes SciPy's LU factorizations (sparse LU for a sparse jac, dense LU else).
Times are medians of repeated calls (wall clock, this machine, the Python backend).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's zymo

import zymo
from zymo import Const, Duplicated, Forward
from zymo.sparse import hessian_from_plan, jacobian_from_plan, plan_hessian, plan_jacobian


def bratu(u: np.ndarray, lam: float) -> np.ndarray:
    """Residual of -u'' = lam exp(u) on (0, 1), u(0) = u(1) = 0, central differences."""
    n = u.shape[0]
    h2 = 1.0 / ((n + 1) * (n + 1))
    r = np.empty_like(u)
    r[1:-1] = u[:-2] - 2.0 * u[1:-1] + u[2:] + h2 * lam * np.exp(u[1:-1])
    r[0] = -2.0 * u[0] + u[1] + h2 * lam * np.exp(u[0])
    r[-1] = u[-2] - 2.0 * u[-1] + h2 * lam * np.exp(u[-1])
    return r


def chained_rosenbrock(x: np.ndarray) -> float:
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def brusselator(u: np.ndarray, t: float) -> np.ndarray:
    """1-d Brusselator reaction-diffusion, u = (a, b) interleaved, fixed ends."""
    m = u.shape[0] // 2
    a = u[0::2]
    b = u[1::2]
    dx2 = 1.0 / ((m + 1) * (m + 1))
    alpha = 0.02 / dx2
    da = np.empty(m)
    db = np.empty(m)
    da[1:-1] = alpha * (a[:-2] - 2.0 * a[1:-1] + a[2:])
    db[1:-1] = alpha * (b[:-2] - 2.0 * b[1:-1] + b[2:])
    da[0] = alpha * (1.0 - 2.0 * a[0] + a[1])
    da[-1] = alpha * (a[-2] - 2.0 * a[-1] + 1.0)
    db[0] = alpha * (3.0 - 2.0 * b[0] + b[1])
    db[-1] = alpha * (b[-2] - 2.0 * b[-1] + 3.0)
    da += 1.0 + a * a * b - 4.0 * a
    db += 3.0 * a - a * a * b
    out = np.empty_like(u)
    out[0::2] = da
    out[1::2] = db
    return out


def median_time(fn, budget: float = 1.0, max_reps: int = 50) -> float:
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < max_reps and (time.perf_counter() - start < budget or len(times) < 3):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def once(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def check_small() -> None:
    rng = np.random.default_rng(0)
    u = rng.normal(size=12)
    J = zymo.jacobian(Forward, bratu, u, 1.5, sparse=True).toarray()
    assert np.allclose(J, zymo.jacobian(Forward, bratu, u, 1.5), rtol=1e-13, atol=1e-13)
    x = rng.normal(size=12)
    H = zymo.hessian(chained_rosenbrock, x, sparse=True).toarray()
    assert np.allclose(H, zymo.hessian(chained_rosenbrock, x), rtol=1e-12, atol=1e-10)
    v = rng.normal(size=12)
    J = zymo.jacobian(Forward, brusselator, v, 0.0, sparse=True).toarray()
    assert np.allclose(J, zymo.jacobian(Forward, brusselator, v, 0.0), rtol=1e-13, atol=1e-12)


def bench_jacobian(n: int) -> list[tuple]:
    rng = np.random.default_rng(1)
    u = 0.1 * rng.random(n)
    t_prep, plan = once(lambda: plan_jacobian(bratu, u, 1.5))
    tangent = rng.normal(size=n)

    def jvp():
        return zymo.autodiff(Forward, bratu, Duplicated, Duplicated(np.copy(u), tangent), Const(1.5))

    t_jvp = median_time(jvp)
    t_jac = median_time(lambda: jacobian_from_plan(plan, bratu, u, 1.5))
    t_primal = median_time(lambda: bratu(u, 1.5))
    return [
        ("FD residual Jacobian", n, plan.n_colors, plan.direction, t_primal, t_jvp, t_jac, t_jac / t_jvp, t_prep),
    ]


def bench_hessian(n: int) -> list[tuple]:
    rng = np.random.default_rng(2)
    x = rng.normal(size=n)
    t_prep, plan = once(lambda: plan_hessian(chained_rosenbrock, x))
    v = rng.normal(size=n)
    t_hvp = median_time(lambda: zymo.hvp(chained_rosenbrock, x, v))
    t_hess = median_time(lambda: hessian_from_plan(plan, chained_rosenbrock, x))
    t_primal = median_time(lambda: chained_rosenbrock(x))
    return [("chained Hessian", n, plan.n_colors, "fwd over rev", t_primal, t_hvp, t_hess, t_hess / t_hvp, t_prep)]


def bench_ode(n: int) -> list[str]:
    from scipy.integrate import solve_ivp

    m = n // 2
    xs = np.linspace(0, 1, m + 2)[1:-1]
    u0 = np.empty(2 * m)
    u0[0::2] = 1.0 + np.sin(2 * np.pi * xs)
    u0[1::2] = 3.0
    plan = plan_jacobian(brusselator, u0, 0.0)

    def jac_sparse(t, u):
        return jacobian_from_plan(plan, brusselator, u, t)

    def jac_dense(t, u):
        return zymo.jacobian(Forward, brusselator, u, t)

    rows = []
    sols = {}
    for name, jac in (("sparse jac", jac_sparse), ("dense jac", jac_dense)):
        jac(0.0, u0)  # derivative programs compiled before timing
        t_jac = median_time(lambda jac=jac: jac(0.0, u0), budget=0.5, max_reps=10)
        t0 = time.perf_counter()
        sol = solve_ivp(lambda t, u: brusselator(u, t), (0.0, 10.0), u0, method="BDF", jac=jac, rtol=1e-6, atol=1e-8)
        dt = time.perf_counter() - t0
        sols[name] = sol
        rows.append(f"| BDF solve, {name} | {2 * m} | {t_jac * 1e3:.2f} ms | {dt:.3f} s | {sol.njev} | {sol.nlu} | "
                    f"{sol.status} |")
    err = np.abs(sols["sparse jac"].y[:, -1] - sols["dense jac"].y[:, -1]).max()
    rows.append(f"\nfinal states agree to {err:.1e} (max abs difference); pattern {plan.pattern.nnz} nonzeros, "
                f"{plan.n_colors} colors ({plan.direction})")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--nh", type=int, default=10_000)
    ap.add_argument("--ode", type=int, default=400)
    a = ap.parse_args()
    check_small()
    rows = bench_jacobian(a.n) + bench_hessian(a.nh)
    print("| workload | n | colors | direction | primal | one JVP / hvp | sparse derivative | ratio | prepare |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, n, k, d, tp, t1, tj, r, tprep in rows:
        print(f"| {name} | {n} | {k} | {d} | {tp * 1e3:.2f} ms | {t1 * 1e3:.2f} ms | {tj * 1e3:.2f} ms | "
              f"{r:.2f} | {tprep:.2f} s |")
    print()
    print("| ODE | unknowns | one Jacobian | solve time | Jacobians | LU factorizations | status |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for line in bench_ode(a.ode):
        print(line)


if __name__ == "__main__":
    main()
