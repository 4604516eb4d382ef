"""Checkpointing under `memory_limit` (issue 35): time and peak extra memory (tracemalloc) of one
reverse call against store-all, for the 1-d reaction-diffusion stencil (in place) and lorenz_rk4.

    PYTHONPATH=. python benchmarks/checkpoint.py [--points 2000] [--steps 4000]
"""
from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
from workloads import lorenz_rk4  # run from benchmarks/ or with it on sys.path

import zymo
from zymo import Const, Reverse


def rd(u0, D, k, dt, steps):
    u = u0.copy()
    for _t in range(steps):
        lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
        u[1:-1] += dt * (D * lap - k * u[1:-1] ** 3)
    return np.sum(u * u)


def measure(fn, *args, limit=None, reps=3):
    zymo.gradient(Reverse, fn, *args, memory_limit=limit)  # compile
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        g = zymo.gradient(Reverse, fn, *args, memory_limit=limit)
        best = min(best, time.perf_counter() - t0)
    tracemalloc.start()
    zymo.gradient(Reverse, fn, *args, memory_limit=limit)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak, g


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--lorenz-steps", type=int, default=10**6)
    a = ap.parse_args()
    u0 = np.random.default_rng(0).standard_normal(a.points)
    args = (u0, 0.1, 0.2, 0.1, Const(a.steps))
    t_ref, m_ref, g_ref = measure(rd, *args)
    print("| workload | memory_limit | time (s) | x store-all | peak extra (MB) | max rel. diff |")
    print("|---|---|---|---|---|---|")
    print(f"| rd {a.points}x{a.steps} | none | {t_ref:.3f} | 1.00 | {m_ref / 2**20:.1f} | 0 |")
    for mb in (32, 16, 8, 4, 1, 0.25):
        t, m, g = measure(rd, *args, limit=int(mb * 2**20))
        diff = np.max(np.abs(g[0] - g_ref[0])) / np.max(np.abs(g_ref[0]))
        print(f"| rd {a.points}x{a.steps} | {mb} MB | {t:.3f} | {t / t_ref:.2f} | {m / 2**20:.1f} | {diff:.1e} |")
    traj = np.zeros((a.lorenz_steps + 1, 3))
    traj[0] = 1.0
    largs = (traj, np.array([10.0, 28.0, 8.0 / 3.0]), Const(0.005))
    t_ref, m_ref, g_ref = measure(lorenz_rk4, *largs, reps=1)
    t, m, g = measure(lorenz_rk4, *largs, limit=2**20, reps=1)
    diff = np.max(np.abs(g[1] - g_ref[1])) / np.max(np.abs(g_ref[1]))
    print(f"| lorenz_rk4 {a.lorenz_steps} | none | {t_ref:.3f} | 1.00 | {m_ref / 2**20:.1f} | 0 |")
    print(f"| lorenz_rk4 {a.lorenz_steps} | 1 MB | {t:.3f} | {t / t_ref:.2f} | {m / 2**20:.1f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
