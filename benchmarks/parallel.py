"""Multi-core: zymo's gradients of map-like kernels with 1, 2, 4, ... threads (issue 32, item 4).

    python benchmarks/parallel.py                    # threads 1, 2, 4 and all cores, default sizes
    python benchmarks/parallel.py --threads 1,2 --scale 0.5

The "kernels" backend (`numba="kernels"`) compiles the derivative's scalar loop nests; those
whose iterations write disjoint memory (`zymo/codegen/parallel.py`) run as `numba.prange`
loops when `zymo.config.set_threads(n)` allows more than one thread. For every kernel the
gradient with n threads is checked to equal the 1-thread gradient bit for bit, then timed
(median of repeated calls, inputs restored before each call; the thread counts alternated
over four rounds, the best round of each kept). The table gives each time and
the speedup over 1 thread. Which loops run in parallel is listed per kernel. A second table
times the gradient call alone: the inputs restored and the shadows zeroed before each call,
outside the timer (that serial copying and zeroing is the harness's work, which no thread
count changes).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_kernels import KERNELS, Inputs, median_time, primal_call, zymo_call  # noqa: E402

import zymo  # noqa: E402
from zymo.codegen.outline import Kernel  # noqa: E402


def rows_map(A, u, v, B):
    """A map over rows: every row of B computed from the same row of A (the parallel case)."""
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            B[i, j] = np.sin(A[i, j]) * u[i] + v[j] * A[i, j] * A[i, j]
    return np.sum(B * B)


class _Map:
    name, wrt = "rows_map", (0, 1, 2)

    @staticmethod
    def primal(*a):
        return rows_map(*a)

    @staticmethod
    def make(n):
        r = np.random.default_rng(7)
        return [r.random((n, n)), r.random(n), r.random(n), np.zeros((n, n))]


def call_alone(k, inp):
    """(prepare, call): restoring the inputs and zeroing the shadows, then the gradient call."""
    args, restore = inp.args, inp.restore
    shadows = {i: np.zeros_like(args[i]) for i in k.wrt}
    ann = [zymo.Duplicated(a, shadows[i]) if i in shadows else zymo.Const(a) for i, a in enumerate(args)]

    def prepare():
        restore()
        for s in shadows.values():
            s.fill(0.0)

    def call():
        zymo.autodiff(zymo.Reverse, k.primal, zymo.Active, *ann, numba="kernels")
    return prepare, call


def median_alone(prepare, call, budget):
    """Median seconds of `call()` alone over about `budget` seconds, `prepare()` before each."""
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < 5 or time.perf_counter() - start < budget:
        prepare()
        t = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t)
    return float(np.median(samples))


ROUNDS = 4  # rounds of timings per kernel, the thread counts alternated in each

# kernel name -> size at scale 1
SIZES = {"rows_map": 1500, "gemver": 1500, "mvt": 1500, "gesummv": 1200, "jacobi_1d": (200000, 20)}


def kernel(name):
    return _Map if name == "rows_map" else KERNELS[name]


def scaled(size, scale):
    if isinstance(size, tuple):
        return (max(8, int(size[0] * scale)), size[1])
    return max(8, int(size * scale))


def parallel_kernels():
    comps = [c for entries in zymo.cache.COMPILED.values() for c in entries if c.backend == "kernels"]
    fn = comps[-1].fn
    fn = fn[0] if isinstance(fn, list) else fn
    return [k.name for k in fn.__globals__.values() if isinstance(k, Kernel) and k.parallel is not None]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="", help="comma-separated thread counts (default 1,2,4,all cores)")
    ap.add_argument("--scale", type=float, default=1.0, help="size factor")
    ap.add_argument("--only", default="", help="comma-separated kernel names")
    opts = ap.parse_args(argv)
    import numba

    cores = numba.config.NUMBA_NUM_THREADS
    counts = [int(t) for t in opts.threads.split(",")] if opts.threads else sorted({1, 2, 4, cores})
    counts = [t for t in counts if t <= cores]
    print(f"{os.cpu_count()} cores, Numba threads at most {cores}, threading layer "
          f"{numba.config.THREADING_LAYER}; NumPy {np.__version__}, Numba {numba.__version__}")
    head = ["kernel", "size", "NumPy primal"] + [f"{t} thread{'s' if t > 1 else ''}" for t in counts]
    lines = ["| " + " | ".join(head) + " | parallel kernels |", "|" + "---|" * (len(head) + 1)]
    alone = ["| " + " | ".join(head[:2] + head[3:]) + " |", "|" + "---|" * (len(head) - 1)]
    for name in SIZES:
        if opts.only and name not in opts.only.split(","):
            continue
        k = kernel(name)
        size = scaled(SIZES[name], opts.scale)
        call = zymo_call(k, Inputs(k, size), "kernels")
        zymo.config.set_threads(1)
        ref = [np.array(g) for g in call()]
        times: dict[int, float] = {}
        bare: dict[int, float] = {}
        prepare, bare_call = call_alone(k, Inputs(k, size))
        for t in counts:
            zymo.config.set_threads(t)
            got = call()
            if not all(np.array_equal(a, b) for a, b in zip(got, ref)):
                raise SystemExit(f"{name}: the gradient with {t} threads differs from 1 thread's")
        for _ in range(ROUNDS):  # thread counts alternated, the best round of each kept: this
            for t in counts:     # machine's speed drifts by tens of percent within seconds
                zymo.config.set_threads(t)
                times[t] = min(times.get(t, np.inf), median_time(call, 2.0 / ROUNDS))
                bare[t] = min(bare.get(t, np.inf), median_alone(prepare, bare_call, 1.0 / ROUNDS))
        zymo.config.set_threads(None)
        primal = median_time(primal_call(k, Inputs(k, size)), 1.0)
        cells = [f"{times[t] * 1e3:.2f} ms" + (f" ({times[1] / times[t]:.2f}×)" if t != 1 else "") for t in counts]
        lines.append(f"| {name} | {size} | {primal * 1e3:.2f} ms | " + " | ".join(cells)
                     + f" | {', '.join(parallel_kernels()) or 'none'} |")
        print(lines[-1], flush=True)
        alone.append(f"| {name} | {size} | " + " | ".join(
            f"{bare[t] * 1e3:.2f} ms" + (f" ({bare[1] / bare[t]:.2f}×)" if t != 1 else "") for t in counts) + " |")
        print(alone[-1], flush=True)
    print("\n" + "\n".join(lines))
    print("\nThe gradient call alone (inputs restored and shadows zeroed outside the timer):\n")
    print("\n".join(alone))


if __name__ == "__main__":
    main()
