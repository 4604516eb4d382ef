"""Checkpointing under `memory_limit` (issue 35): time and peak extra memory (tracemalloc) of one
reverse call against store-all, for the 1-d reaction-diffusion stencil (in place, as a `for` loop
and as a `while` loop whose trip count the schedule learns only at its end) and `lorenz_state`,
the Lorenz RK4 integration with its state overwritten in place (`lorenz_rk4` in workloads.py
writes a trajectory, so its reverse mode reads every state in place and records no tape).

    PYTHONPATH=. python benchmarks/checkpoint.py [--points 2000] [--steps 4000]
        [--lorenz-steps 100000 1000000] [--skip-rd] [--rd-mb 32 16 8 4 1] [--numba kernels]
    PYTHONPATH=. python benchmarks/checkpoint.py --curve docs/benchmarks_checkpoint.png

`--curve PATH` measures only the trade-off curve: the stencil's reverse call under limits from
64 MB down to 0.25 MB, time against store-all and peak extra memory, as a table and a plot.
`--numba` picks the backend of every call (False, "kernels" or True; True runs a checkpointed
program as "kernels"). The rows `rd_call` mark the stencil's step `zymo.checkpoint(step)` (no
limit): the forward sweep keeps each step's input, and the adjoint sweep reruns the step.
"""
from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

import zymo
from zymo import Const, Reverse


def rd(u0, D, k, dt, steps):
    u = u0.copy()
    for _t in range(steps):
        lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
        u[1:-1] += dt * (D * lap - k * u[1:-1] ** 3)
    return np.sum(u * u)


def rd_step(u, D, k, dt):
    lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
    u[1:-1] += dt * (D * lap - k * u[1:-1] ** 3)


rd_step_checkpointed = zymo.checkpoint(rd_step)


def rd_call(u0, D, k, dt, steps):
    u = u0.copy()
    for _t in range(steps):
        rd_step_checkpointed(u, D, k, dt)
    return np.sum(u * u)


def rd_while(u0, D, k, dt, steps):
    u = u0.copy()
    t = 0
    while t < steps:
        lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
        u[1:-1] += dt * (D * lap - k * u[1:-1] ** 3)
        t += 1
    return np.sum(u * u)


def lorenz_state(s0, params, dt, steps):
    sigma, rho, beta = params[0], params[1], params[2]
    s = s0.copy()
    for _i in range(steps):
        x, y, z = s[0], s[1], s[2]
        k1x, k1y, k1z = sigma * (y - x), x * (rho - z) - y, x * y - beta * z
        x2, y2, z2 = x + 0.5 * dt * k1x, y + 0.5 * dt * k1y, z + 0.5 * dt * k1z
        k2x, k2y, k2z = sigma * (y2 - x2), x2 * (rho - z2) - y2, x2 * y2 - beta * z2
        x3, y3, z3 = x + 0.5 * dt * k2x, y + 0.5 * dt * k2y, z + 0.5 * dt * k2z
        k3x, k3y, k3z = sigma * (y3 - x3), x3 * (rho - z3) - y3, x3 * y3 - beta * z3
        x4, y4, z4 = x + dt * k3x, y + dt * k3y, z + dt * k3z
        k4x, k4y, k4z = sigma * (y4 - x4), x4 * (rho - z4) - y4, x4 * y4 - beta * z4
        s[0] = x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        s[1] = y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
        s[2] = z + dt / 6.0 * (k1z + 2.0 * k2z + 2.0 * k3z + k4z)
    return s[0] + s[1] + s[2]


NUMBA: object = False  # the backend of every call (`--numba`)


def measure(fn, *args, limit=None, reps=3):
    zymo.gradient(Reverse, fn, *args, memory_limit=limit, numba=NUMBA)  # compile
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        g = zymo.gradient(Reverse, fn, *args, memory_limit=limit, numba=NUMBA)
        best = min(best, time.perf_counter() - t0)
    tracemalloc.start()
    zymo.gradient(Reverse, fn, *args, memory_limit=limit, numba=NUMBA)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak, g


def row(name: str, limit: str, t: float, t_ref: float, m: float, g, g_ref) -> None:
    a, b = np.asarray(g[0]), np.asarray(g_ref[0])
    same = np.array_equal(a, b, equal_nan=True)
    diff = "identical" if same else f"{np.nanmax(np.abs(a - b)) / np.nanmax(np.abs(b)):.1e}"
    print(f"| {name} | {limit} | {t:.3f} | {t / t_ref:.2f} | {m / 2**20:.2f} | {diff} |", flush=True)


def lorenz_rows(steps: int, limits: tuple) -> None:
    # rho = 0.5: the flow decays to the origin, so the gradient over 10^6 steps stays finite (at
    # the chaotic rho = 28 it overflows to inf and nan, the same in every schedule)
    s0, params = np.array([1.0, 1.0, 1.0]), np.array([10.0, 0.5, 8.0 / 3.0])
    args = (s0, params, Const(0.005), Const(steps))
    t_ref, m_ref, g_ref = measure(lorenz_state, *args, reps=1)
    row(f"lorenz_state {steps}", "none", t_ref, t_ref, m_ref, g_ref, g_ref)
    for lim in limits:
        t, m, g = measure(lorenz_state, *args, limit=lim, reps=1)
        row(f"lorenz_state {steps}", "1 MB" if lim == 2**20 else f"{lim} B", t, t_ref, m, g, g_ref)


def curve(points: int, steps: int, path: str) -> None:
    """Time and peak extra memory of the stencil's reverse call against the memory limit."""
    u0 = np.random.default_rng(0).standard_normal(points)
    args = (u0, 0.1, 0.2, 0.1, Const(steps))
    t_ref, m_ref, g_ref = measure(rd, *args, reps=2)
    mbs = (64, 32, 16, 8, 4, 2, 1, 0.5, 0.25)
    rows = []
    print(f"| memory_limit | time (s) | x store-all | peak extra (MB) | gradient vs store-all |  (rd {points}x{steps})")
    print("|---|---|---|---|---|")
    print(f"| none | {t_ref:.3f} | 1.00 | {m_ref / 2**20:.2f} | |", flush=True)
    for mb in mbs:
        t, m, g = measure(rd, *args, limit=int(mb * 2**20), reps=2)
        same = np.array_equal(np.asarray(g[0]), np.asarray(g_ref[0]))
        rows.append((mb, t / t_ref, m / 2**20))
        print(f"| {mb} MB | {t:.3f} | {t / t_ref:.2f} | {m / 2**20:.2f} | {'identical' if same else 'DIFFERS'} |",
              flush=True)
    plot_curve(rows, t_ref, m_ref, points, steps, path)


def plot_curve(rows: list, t_ref: float, m_ref: float, points: int, steps: int, path: str) -> None:
    """`rows`: (limit in MB, time / store-all, peak extra MB) per limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    lt = ax.plot([r[0] for r in rows], [r[1] for r in rows], "o-", label="time / store-all time")
    ax.set_xscale("log")
    ax.set_xlabel("memory_limit (MB, log)")
    ax.set_ylabel("reverse call time / store-all")
    ax.axhline(1.0, color="k", lw=0.5)
    ax2 = ax.twinx()
    lm = ax2.plot([r[0] for r in rows], [r[2] for r in rows], "s--", color="tab:orange", label="peak extra memory")
    ax2.set_ylabel("peak extra memory (MB)")
    ax.set_title(f"Checkpointing: reaction-diffusion stencil, {points} points, {steps} steps "
                 f"(store-all: {t_ref:.2f} s, {m_ref / 2**20:.0f} MB)", fontsize=9)
    ax.legend(lt + lm, [h.get_label() for h in lt + lm], loc="upper center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--lorenz-steps", type=int, nargs="*", default=[10**5, 10**6])
    ap.add_argument("--skip-rd", action="store_true")
    ap.add_argument("--rd-mb", type=float, nargs="*", default=[32, 16, 8, 4, 1], help="the stencil's limits (MB)")
    ap.add_argument("--numba", choices=("false", "kernels", "true"), default="false")
    ap.add_argument("--curve", metavar="PATH", help="only the trade-off curve, plotted into PATH")
    a = ap.parse_args()
    global NUMBA
    NUMBA = {"false": False, "kernels": "kernels", "true": True}[a.numba]
    if a.curve:
        return curve(a.points, a.steps, a.curve)
    print("| workload | memory_limit | time (s) | x store-all | peak extra (MB) | gradient vs store-all |")
    print("|---|---|---|---|---|---|", flush=True)
    lorenz_rows(300, (1,))  # 1 byte: a single snapshot
    if not a.skip_rd:
        u0 = np.random.default_rng(0).standard_normal(a.points)
        args = (u0, 0.1, 0.2, 0.1, Const(a.steps))
        t_rd, m_rd, g_rd = measure(rd, *args)
        for fn, mbs in ((rd, a.rd_mb), (rd_while, [mb for mb in (16, 4, 1) if mb in a.rd_mb]),
                        *(((rd_call, ()),) if NUMBA is not True else ())):  # Numba refuses the marker
            name = f"{fn.__name__} {a.points}x{a.steps}"
            t_ref, m_ref, g_ref = (t_rd, m_rd, g_rd) if fn is rd else measure(fn, *args)
            row(name, "none", t_ref, t_rd, m_ref, g_ref, g_rd)  # x store-all: against rd's
            for mb in mbs:
                t, m, g = measure(fn, *args, limit=int(mb * 2**20))
                row(name, f"{mb:g} MB", t, t_ref, m, g, g_ref)
    for steps in a.lorenz_steps:
        lorenz_rows(steps, (2**20,))


if __name__ == "__main__":
    main()
