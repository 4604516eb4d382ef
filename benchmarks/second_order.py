"""Second order against first order: the cost of a Hessian-vector product relative to a gradient.

    python benchmarks/second_order.py            # full sizes of PEERS.md
    python benchmarks/second_order.py --quick    # small sizes

For each workload: zymo's reverse-mode gradient, `zymo.hvp` (forward mode over the
generated reverse program), both as Python, and JAX's `jvp(grad)` of the functional rewrite
where JAX is installed. The hvp is checked against central differences of gradients before
timing; the table gives medians and the ratio hvp / gradient (same run).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from run import median_time  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

import zymo  # noqa: E402
from zymo import Reverse  # noqa: E402

# workload -> index of the argument differentiated
WRT = {"sumsq_inplace": 0, "gm3_rhs": 0, "lorenz_rk4": 1, "gmm_objective": 0, "mlp_loss": 0}


def _split(name, args):
    """(f(x, *rest), x, rest): the workload with the differentiated argument first."""
    k = WRT[name]
    prim = WORKLOADS[name].primal
    if k == 0:
        return prim, args[0], tuple(args[1:])

    def f(x, a0, a2):
        return prim(a0, x, a2)
    return f, args[1], (args[0], args[2])


def _copies(rest):
    return [np.copy(a) if isinstance(a, np.ndarray) else a for a in rest]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--numba", action="store_true", help="compile both programs with Numba")
    opts = ap.parse_args()
    numba = bool(opts.numba)
    rows = []
    for name in WRT:
        w = WORKLOADS[name]
        args = w.make(w.small if opts.quick else w.full)["args"]
        f, x, rest = _split(name, args)
        v = np.random.default_rng(0).standard_normal(x.shape)
        try:
            hv = zymo.hvp(f, np.copy(x), v, *_copies(rest), numba=numba)
        except zymo.ZymoError as e:
            rows.append((name, x.size, None, None, f"not supported: {str(e).splitlines()[0][:70]}"))
            continue
        h = 1e-5 * max(1.0, float(np.abs(x).max()))
        gp = zymo.gradient(Reverse, f, x + h * v, *_copies(rest), numba=False)[0]
        gm = zymo.gradient(Reverse, f, x - h * v, *_copies(rest), numba=False)[0]
        ref = (gp - gm) / (2 * h)
        err = np.abs(hv - ref).max() / max(np.abs(ref).max(), 1e-30)
        if err > 1e-4:
            raise SystemExit(f"{name}: hvp differs from differences of gradients (relative {err:.1e})")
        def grad():  # with respect to x only, the others constant (as hvp)
            dx = np.zeros_like(x)
            zymo.autodiff(Reverse, f, zymo.Active, zymo.Duplicated(np.copy(x), dx),
                          *map(zymo.Const, _copies(rest)), numba=numba)
            return dx

        def hvp():
            return zymo.hvp(f, np.copy(x), v, *_copies(rest), numba=numba)
        grad(), hvp()  # compiled before timing (a slow call is timed once)
        t_grad, t_hvp = median_time(grad), median_time(hvp)
        rows.append((name, x.size, t_grad, t_hvp, f"checked (rel. err {err:.0e})"))
    print(f"{'workload':16} {'n':>6} {'gradient':>12} {'hvp':>12} {'hvp/grad':>9}  note")
    for name, n, tg, th, note in rows:
        if tg is None:
            print(f"{name:16} {n:>6} {'-':>12} {'-':>12} {'-':>9}  {note}")
        else:
            print(f"{name:16} {n:>6} {tg * 1e3:>10.3f}ms {th * 1e3:>10.3f}ms {th / tg:>8.1f}x  {note}")


if __name__ == "__main__":
    main()
