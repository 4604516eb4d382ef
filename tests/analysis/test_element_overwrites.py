"""Element-precise overwrite reasoning for scalar loads (`Overwrites.first_element_writer`).

A number loaded from an array (`x = traj[i, 0]`) is read again by the adjoint sweep instead
of being kept on a tape when no later store can change that element. A store into the same
array is passed over when its index provably names another element whenever it runs after
the load: a time-stepping loop that reads row `i` and writes row `i + 1` keeps no tape at all.

Every program is checked in both modes against central differences and the other mode
(`zymo.testing.check_grad`) and under Numba, and the generated code is inspected: the tape must be gone
where the proof holds, and kept where the store can reach the element (a later iteration
writes what an earlier one read, a negative index wraps around, an outer loop starts the inner
one again, the store goes through a view or `out=`, the index is not an affine sum).
"""
import numpy as np
import pytest
from helpers import assert_tree_close, zymo_grad

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.testing import check_grad


def steps(traj, p):
    """Row i read, row i + 1 written: the Lorenz pattern."""
    for i in range(traj.shape[0] - 1):
        x, y = traj[i, 0], traj[i, 1]
        traj[i + 1, 0] = x + 0.1 * p[0] * (y - x)
        traj[i + 1, 1] = y + 0.1 * (x * x - p[1] * y)
    n = traj.shape[0] - 1
    return traj[n, 0] * traj[n, 1]


def steps_row_store(traj, p):
    """Row i + 1 stored whole (an index of fewer parts than dimensions)."""
    for i in range(traj.shape[0] - 1):
        a = traj[i, 0]
        traj[i + 1] = a * a * p
    return np.sum(traj * traj)


def recurrence(x):
    """x[i] read and x[i + 2] written, from 0: later iterations never write x[i]."""
    for i in range(x.shape[0] - 2):
        x[i + 2] = x[i] * x[i + 1] + np.sin(x[i])
    return np.sum(x)


def strided(x):
    """Step 2: x[i + 1] read, x[i] and x[i + 2] ... written (i + 1 - i < 2)."""
    for i in range(0, x.shape[0] - 1, 2):
        x[i] = x[i + 1] * x[i + 1] + x[i]
    return np.sum(x * x)


def grid(a):
    """Two loops: a[j, i] read, a[j + 1, i] written (later j, same i, later i all miss it)."""
    for j in range(a.shape[0] - 1):
        for i in range(a.shape[1]):
            v = a[j, i]
            a[j + 1, i] = a[j + 1, i] + v * v
    return np.sum(a * a)


# -- where the store can reach the element: the tape stays ------------------------------------


def ahead(x):
    """x[i + 1] read, x[i] written: the next iteration writes what this one read."""
    for i in range(x.shape[0] - 1):
        x[i] = x[i] * x[i + 1]
    return np.sum(x * x)


def wraps(x):
    """x[i - 1] at i = 0 is x[-1], which the last iteration writes."""
    for i in range(x.shape[0]):
        x[i] = x[i - 1] * x[i - 1] + 1.0
    return np.sum(x)


def same_element(x):
    """The store writes the element just read."""
    for i in range(x.shape[0]):
        x[i] = x[i] ** 2
    return np.sum(x)


def outer_repeats(x, m):
    """The inner loop reads x[i] and writes x[i + 1]; the outer loop runs it again."""
    for _ in range(m):
        for i in range(x.shape[0] - 1):
            x[i + 1] = 0.5 * x[i] + np.sin(x[i + 1])
    return np.sum(x * x)


def through_view(x):
    """The store goes through a view of x: not the same array value, so no proof."""
    v = x[1:]
    for i in range(x.shape[0] - 1):
        v[i] = x[i] * x[i] + v[i]
    return np.sum(x * x)


def through_out(x):
    """An `out=` call writes the whole array after the load."""
    for i in range(x.shape[0] - 1):
        a = x[i + 1]
        np.multiply(x, 1.5, out=x)
        x[0] = x[0] + a * a
    return np.sum(x)


def indirect(x, idx):
    """The store's index is read from memory: nothing is known about it."""
    for i in range(x.shape[0] - 1):
        x[idx[i]] = x[i] * x[i] + 1.0
    return np.sum(x * x)


def in_while(x):
    """A `while` loop around the load and the store has no induction variable."""
    k = 0
    while k < x.shape[0] - 1:
        x[k + 1] = np.cos(x[k]) + x[k + 1]
        k += 1
    return np.sum(x * x)


rng = np.random.default_rng(3)
PROVED = [
    (steps, lambda: [rng.random((6, 2)) + 0.5, np.array([1.5, 0.7])], ()),
    (steps_row_store, lambda: [rng.random((5, 3)), rng.random(3)], ()),
    (recurrence, lambda: [rng.random(7) + 0.2], ()),
    (strided, lambda: [rng.random(8)], ()),
    (grid, lambda: [0.3 * rng.random((4, 3))], ()),
]
KEPT = [
    (ahead, lambda: [rng.random(6) + 0.5], ()),
    (wraps, lambda: [0.5 * rng.random(5)], ()),
    (same_element, lambda: [rng.random(5)], ()),
    (outer_repeats, lambda: [rng.random(5), 3], (1,)),
    (through_view, lambda: [rng.random(6)], ()),
    (through_out, lambda: [0.5 * rng.random(4)], ()),
    (indirect, lambda: [rng.random(6), np.array([3, 0, 5, 1, 2])], (1,)),
    (in_while, lambda: [rng.random(5)], ()),
]


def _code(f, args, const):
    ann = [zymo.Const(a) if k in const else Duplicated(a, np.zeros_like(a)) for k, a in enumerate(args)]
    return zymo.generated_code(Reverse, f, Active, *ann)


@pytest.mark.slow
@pytest.mark.parametrize("f,make,const", PROVED + KEPT, ids=lambda c: getattr(c, "__name__", ""))
def test_gradients(f, make, const):
    args = make()
    check_grad(f, *args, const=const)
    cots = [None if k in const else np.zeros_like(a) for k, a in enumerate(args)]
    g_py = zymo_grad(f, [np.copy(a) if isinstance(a, np.ndarray) else a for a in args], cots, const=const)
    g_nb = zymo_grad(f, [np.copy(a) if isinstance(a, np.ndarray) else a for a in args], cots, const=const,
                     numba=True)
    assert_tree_close(g_nb, g_py, rtol=1e-10, atol=1e-12)
    assert np.any(np.abs(g_py[0]) > 1e-3)


@pytest.mark.parametrize("f,make,const", PROVED, ids=lambda c: getattr(c, "__name__", ""))
def test_loads_read_again(f, make, const):
    src = _code(f, make(), const)
    assert "_cache" not in src, src


@pytest.mark.parametrize("f,make,const", KEPT, ids=lambda c: getattr(c, "__name__", ""))
def test_loads_kept(f, make, const):
    src = _code(f, make(), const)
    assert "_cache" in src or "_saved" in src, src


def test_lorenz_keeps_no_tape():
    """The benchmark's Lorenz integrator: its adjoint reads traj[i, :] again."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from workloads import WORKLOADS

    w = WORKLOADS["lorenz_rk4"]
    args = w.make(6)["args"]
    assert "_cache" not in _code_lorenz(w, args)
    check_grad(w.primal, *args, const=(2,), rtol=1e-5)


def _code_lorenz(w, args):
    traj, params, dt = args
    return zymo.generated_code(Reverse, w.primal, Active, Duplicated(traj, np.zeros_like(traj)),
                               Duplicated(params, np.zeros_like(params)), zymo.Const(dt))
