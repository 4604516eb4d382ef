"""A simulation object with preallocated work buffers, differentiated as written.

    python examples/simulation.py

`Heat` keeps its state (`u`), a work buffer (`lap`) and a float clock (`t`) in
attributes, and advances with in-place updates and `out=` calls. zymo differentiates
`simulate(heat, kappa)` as it is: the object is passed `Duplicated` with a shadow
from `zymo.make_zero`; after a reverse call the shadow's `u` holds d(loss)/d(initial u)
and its float `t` has accumulated d(loss)/d(initial t); `kappa` is Active.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's zymo

import zymo
from zymo import Active, Duplicated, Forward, Reverse


class Heat:
    """Explicit 1-d heat equation with a source that ramps with time."""

    def __init__(self, n: int = 16, dt: float = 0.1):
        self.u = np.sin(np.linspace(0.0, np.pi, n))
        self.lap = np.zeros(n)          # preallocated work buffer
        self.t = 0.0
        self.dt = dt
        self.steps = 20

    def laplacian(self):
        self.lap[0] = 0.0
        self.lap[-1] = 0.0
        np.subtract(self.u[:-2] + self.u[2:], 2.0 * self.u[1:-1], out=self.lap[1:-1])

    def step(self, kappa):
        self.laplacian()
        self.u += self.dt * (kappa * self.lap + 0.1 * self.t)
        self.t += self.dt

    def energy(self):
        return np.sum(self.u * self.u) * 0.5


def simulate(heat, kappa):
    for _ in range(heat.steps):
        heat.step(kappa)
    return heat.energy()


def main() -> None:
    kappa = 0.3
    heat, dheat = Heat(), zymo.make_zero(Heat())
    ((_, dkappa),) = zymo.autodiff(Reverse, simulate, Active, Duplicated(heat, dheat), Active(kappa))
    print(f"energy after {heat.steps} steps: {Heat().energy():.6f} -> {heat.energy():.6f} (t = {heat.t:.2f})")
    print(f"d energy / d kappa      = {dkappa:+.8f}")
    print(f"d energy / d t0         = {dheat.t:+.8f}   (the shadow's float attribute)")
    print(f"d energy / d u0[:4]     = {np.array2string(dheat.u[:4], precision=6)}")

    # check: forward mode and central differences
    h = 1e-6
    fd = (simulate(Heat(), kappa + h) - simulate(Heat(), kappa - h)) / (2 * h)
    (tangent,) = zymo.autodiff(Forward, simulate, Duplicated, Duplicated(Heat(), zymo.make_zero(Heat())),
                               Duplicated(kappa, 1.0))
    print(f"forward mode            = {tangent:+.8f}")
    print(f"central differences     = {fd:+.8f}")
    assert abs(dkappa - fd) < 1e-6 * max(1.0, abs(fd)) and abs(tangent - fd) < 1e-6 * max(1.0, abs(fd))

    # the same shadow, re-zeroed, gives the same gradient again
    zymo.make_zero_(dheat)
    ((_, again),) = zymo.autodiff(Reverse, simulate, Active, Duplicated(Heat(), dheat), Active(kappa))
    assert again == dkappa
    print("repeated call with the re-zeroed shadow: same gradient")


if __name__ == "__main__":
    main()
