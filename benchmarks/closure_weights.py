"""Seed 003: a closure over a large constant network costs what passing the weights as Const costs.

    python benchmarks/closure_weights.py            # n = 1000 (two 1000x1000 layers)
    python benchmarks/closure_weights.py --n 300

Two workloads, each differentiated in reverse mode three ways:
- "closure, f plain": the weights are captured and only read, so zymo leaves them
  constant (fast by default);
- "weights as Const": the same function with the weights passed as `Const` arguments;
- "Duplicated(f, make_zero(f))": the user asks for the shadow of everything `f`
  captured, so the weights' adjoints are computed too (what DifferentiationInterface's
  "duplicate the function" option costs).
Workload "NN() + x" is the seed's example (the network does not depend on x);
"NN(x * v)" sends x through the network. Every gradient is checked against central
differences before timing. Times are medians of repeated calls.
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
from zymo import Active, Const, Duplicated, Reverse


def median_time(fn, budget: float = 0.5, max_reps: int = 500) -> float:
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < max_reps and (time.perf_counter() - start < budget or len(times) < 5):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make(n: int):
    rng = np.random.default_rng(0)
    W1 = rng.standard_normal((n, n)) / np.sqrt(n)
    W2 = rng.standard_normal((n, n)) / np.sqrt(n)
    u = rng.standard_normal(n)
    v = rng.standard_normal(n)

    def nn_plus_x(x):                       # the seed's `x -> NN() + x`
        return np.sum(np.tanh(W2 @ np.tanh(W1 @ u))) + x

    def nn_plus_x_args(x, A, B, w):
        return np.sum(np.tanh(B @ np.tanh(A @ w))) + x

    def nn_of_x(x):                          # x flows through the network
        return np.sum(np.tanh(W2 @ np.tanh(W1 @ (x * v))))

    def nn_of_x_args(x, A, B, w):
        return np.sum(np.tanh(B @ np.tanh(A @ (x * w))))

    return (W1, W2, u, v), [("NN() + x", nn_plus_x, nn_plus_x_args, u), ("NN(x * v)", nn_of_x, nn_of_x_args, v)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    n = ap.parse_args().n
    (W1, W2, _, _), workloads = make(n)
    x = 0.3
    rows = []
    for name, f, g, w in workloads:
        df = zymo.make_zero(f)
        h = 1e-6
        fd = (f(x + h) - f(x - h)) / (2 * h)
        runs = {
            "closure, f plain": lambda: zymo.autodiff(Reverse, f, Active, Active(x))[0][0],
            "weights as Const": lambda: zymo.autodiff(Reverse, g, Active, Active(x), Const(W1), Const(W2),
                                                      Const(w))[0][0],
            "Duplicated(f, make_zero(f))": lambda: zymo.autodiff(Reverse, Duplicated(f, zymo.make_zero_(df)),
                                                                 Active, Active(x))[0][0],
        }
        primal = median_time(lambda: f(x))
        for label, run in runs.items():
            d = run()
            assert abs(d - fd) <= 1e-5 * max(1.0, abs(fd)), (name, label, d, fd)
            rows.append((name, label, median_time(run), primal))
    print(f"reverse-mode derivative w.r.t. the scalar x, two {n}x{n} layers (median of repeated calls)\n")
    print("| workload | how f is passed | time per gradient | / primal |")
    print("| --- | --- | ---: | ---: |")
    for name, label, t, p in rows:
        print(f"| {name} | {label} | {t * 1e3:9.3f} ms | {t / p:6.2f} |")


if __name__ == "__main__":
    main()
