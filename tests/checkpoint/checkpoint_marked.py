"""Functions with loops marked `zymo.checkpointed(...)` (tests/checkpoint/test_marker.py)."""
import numpy as np

import zymo
from zymo import checkpointed


def marked(u0, D, n):
    u = u0.copy()
    for _t in zymo.checkpointed(range(n), snapshots=3):
        lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
        u[1:-1] += 0.1 * (D * lap - 0.2 * u[1:-1] ** 3)
    return np.sum(u * u)


def unmarked(u0, D, n):
    u = u0.copy()
    for _t in range(n):
        lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
        u[1:-1] += 0.1 * (D * lap - 0.2 * u[1:-1] ** 3)
    return np.sum(u * u)


def marked_break(x, n):
    s = 0.0
    for i in checkpointed(range(n), snapshots=2):
        s = s + np.sin(x[i % 5] * s + 1.0)
        if s > 100.0:
            break
    return s


def not_a_range(x):
    s = 0.0
    for v in zymo.checkpointed(x, snapshots=2):
        s = s + v * v
    return s


def bad_snapshots(x, n):
    s = 0.0
    for i in zymo.checkpointed(range(n), snapshots=0):
        s = s + x[i] * s
    return s
