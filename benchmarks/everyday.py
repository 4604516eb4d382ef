"""The everyday call (issue 32, item 5): what one gradient call costs beyond the primal.

    python benchmarks/everyday.py            # about 10 s
    python benchmarks/everyday.py --quick    # a few seconds

A vectorized logistic loss (200x5 data as module globals, `w` of 5 floats), timed as users
call it: the NumPy primal, `zymo.gradient(Reverse, nll, w)`, `zymo.autodiff(Reverse, nll,
Active, Duplicated(w, dw))` with the same `w` and `dw` every call (the replay; `dw` zeroed
per call), the same with a new `dw = np.zeros_like(w)` each call, a prepared
`zymo.interface.gradient`, and JAX `jit(grad)` of the same loss when JAX is installed; then
the `tuple_iter` bare call of `benchmarks/run.py` (Numba, the annotations made once).
Every gradient is checked against central differences first.
Contestants run interleaved, in rounds of a few calls each, in one process; the table
gives the median time per call over the rounds and its ratio to the primal.
Targets: `zymo.gradient` within 2.5x the primal, the prepared interface gradient within
2x, the `tuple_iter` bare call under 2 us.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's zymo

import zymo
from zymo import Active, Const, Duplicated, Reverse
from zymo.interface import AutoZymo, gradient, prepare_gradient

_rng = np.random.default_rng(0)
X = _rng.standard_normal((200, 5))
Y = np.sign(X @ np.array([1.0, -2.0, 0.5, 0.0, 1.5]) + 0.3 * _rng.standard_normal(200))


def nll(w):
    z = X @ w
    return np.sum(np.logaddexp(0.0, -Y * z))


def tuple_iter(out, x):  # benchmarks/workloads.py's
    res = 0.0
    for v in (x[0][0], x[0][1]):
        res += v * v
    out[0] = res


def contestants() -> dict[str, Callable[[], object]]:
    """name -> a zero-argument call returning the gradient (or the value, for the primal)."""
    w = np.array([0.1, -0.2, 0.3, 0.05, -0.1])
    dw = np.zeros_like(w)

    def replay():
        dw.fill(0.0)
        zymo.autodiff(Reverse, nll, Active, Duplicated(w, dw))
        return dw

    def new_shadow(w):
        d = np.zeros_like(w)
        zymo.autodiff(Reverse, nll, Active, Duplicated(w, d))
        return d

    backend = AutoZymo()
    prep = prepare_gradient(nll, backend, w)
    out, x = np.zeros(1), np.array([[0.5, 2.0]])
    ann = (Duplicated(out, np.ones(1)), Duplicated(x, np.zeros_like(x)))
    return {
        "NumPy primal": lambda: nll(w),
        "zymo.gradient(Reverse, nll, w)": lambda: zymo.gradient(Reverse, nll, w)[0],
        "zymo.autodiff replay": replay,
        "zymo.autodiff, a new shadow each call": lambda: new_shadow(w),
        "interface.gradient, prepared": lambda: gradient(nll, backend, w, prep=prep),
        "tuple_iter bare call (Numba)": lambda: zymo.autodiff(Reverse, tuple_iter, Const, *ann, numba=True),
    }


def jax_contestants() -> dict[str, Callable[[], object]]:
    """The primal and JAX's `jit(grad)`, or nothing without JAX. Measured after the others:
    once imported, JAX's threads slow every call in the process here (the primal by up to 2x)."""
    try:
        import jax
    except ImportError:
        return {}
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    w = np.array([0.1, -0.2, 0.3, 0.05, -0.1])
    Xj, Yj = jnp.asarray(X), jnp.asarray(Y)
    g = jax.jit(jax.grad(lambda w: jnp.sum(jnp.logaddexp(0.0, -Yj * (Xj @ w)))))
    wj = jnp.asarray(w)
    return {"NumPy primal": lambda: nll(w), "JAX jit(grad)": lambda: g(wj).block_until_ready()}


def check(calls: dict[str, Callable[[], object]]) -> None:
    """Every gradient of the logistic loss against central differences."""
    w = np.array([0.1, -0.2, 0.3, 0.05, -0.1])
    h = 1e-6
    fd = np.array([(nll(w + h * e) - nll(w - h * e)) / (2 * h) for e in np.eye(5)])
    for name, fn in calls.items():
        if name.startswith(("NumPy", "tuple_iter")):
            continue
        g = np.asarray(fn())
        err = float(np.max(np.abs(g - fd))) / max(1.0, float(np.max(np.abs(fd))))
        if err > 1e-6:
            raise SystemExit(f"{name}: gradient off by {err:.2e} from central differences")


def measure(calls: dict[str, Callable[[], object]], rounds: int, per_round: int) -> dict[str, float]:
    """Median seconds per call, the contestants interleaved round by round."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for fn in calls.values():  # warm up (compiles)
        for _ in range(3):
            fn()
    for _ in range(rounds):
        for name, fn in calls.items():
            t = time.perf_counter()
            for _ in range(per_round):
                fn()
            samples[name].append((time.perf_counter() - t) / per_round)
    return {name: statistics.median(s) for name, s in samples.items()}


def table(times: dict[str, float], jax_times: dict[str, float]) -> str:
    lines = ["| call | time (us) | x primal |", "|---|---|---|"]
    for name, t in times.items():
        ratio = "" if name.startswith("tuple_iter") else f"{t / times['NumPy primal']:.2f}"
        lines.append(f"| {name} | {t * 1e6:.2f} | {ratio} |")
    if jax_times:
        primal, t = jax_times["NumPy primal"], jax_times["JAX jit(grad)"]
        lines.append(f"| JAX jit(grad) (after importing JAX; primal then {primal * 1e6:.2f} us) | {t * 1e6:.2f} "
                     f"| {t / primal:.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a short run")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--no-jax", action="store_true", help="leave JAX out")
    opts = ap.parse_args()
    rounds = opts.rounds or (60 if opts.quick else 600)
    calls = contestants()
    check(calls)
    times = measure(calls, rounds, 20)
    jax_calls = {} if opts.no_jax else jax_contestants()
    check(jax_calls)
    print(table(times, measure(jax_calls, rounds, 20) if jax_calls else {}))


if __name__ == "__main__":
    main()
