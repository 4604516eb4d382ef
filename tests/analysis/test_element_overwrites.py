"""Element-precise overwrite reasoning for scalar loads (`Overwrites.first_element_writer`).

A number loaded from an array (`x = traj[i, 0]`) is read again by the adjoint sweep instead
of being kept on a tape when no later store can change that element. A store into the same
array is passed over when its index provably names another element whenever it runs after
the load: a time-stepping loop that reads row `i` and writes row `i + 1` keeps no tape at all.
A store that runs before the load in the same iteration (an earlier inner loop) does not count
there, and an inner loop's variable is bounded by the enclosing one (`range(i + 1, n)`: j > i;
`range(i)`: j < i), so PolyBench-style triangular loops keep no tape for the elements they
only read (gramschmidt, atax).

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


def inner_sweeps(x, y):
    """atax: x[i] accumulated in one inner loop, read in the next one of the same iteration."""
    for i in range(x.shape[0]):
        for j in range(y.shape[0]):
            x[i] = x[i] + 0.3 * y[j]
        for j in range(y.shape[0]):
            y[j] = y[j] + x[i] * x[i]
    return np.sum(y * y) + np.sum(x)


def tri_after(x):
    """x[i] read, then x[j] written for j in range(i + 1, n): never x[i], now or later."""
    s = 0.0
    for i in range(x.shape[0]):
        a = x[i]
        s = s + a * a
        for j in range(i + 1, x.shape[0]):
            x[j] = x[j] * 0.9 + 0.1 * a
    return s + np.sum(x * x)


def tri_before(x):
    """x[j] written for j in range(i, n), then x[i] read: later iterations write j > i."""
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(i, x.shape[0]):
            x[j] = x[j] * 0.9 + 0.1
        a = x[i]
        s = s + a * a * a
    return s + np.sum(x * x)


def row_prefix(A):
    """lu: A[i, i] read, then A[i, k] written for k in range(i) (k < i); later rows differ."""
    s = 0.0
    for i in range(A.shape[0]):
        a = A[i, i]
        s = s + a * a
        for k in range(i):
            A[i, k] = A[i, k] * 0.8 + 0.1 * a
    return s + np.sum(A * A)


def rev_prefix(x):
    """Step -1: x[i] read, then x[j] written for j < i; later iterations (smaller i) too."""
    s = 0.0
    for i in range(x.shape[0] - 1, -1, -1):
        a = x[i]
        s = s + a * a * a
        for j in range(0, i):
            x[j] = x[j] * 0.9 + 0.1 * a
    return s + np.sum(x * x)


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
ORDERED = [
    (inner_sweeps, lambda: [0.3 * rng.random(4), rng.random(3)], ()),
    (tri_after, lambda: [rng.random(5) + 0.2], ()),
    (tri_before, lambda: [rng.random(5) + 0.2], ()),
    (row_prefix, lambda: [rng.random((4, 4)) + 0.2], ()),
    (rev_prefix, lambda: [rng.random(5) + 0.2], ()),
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
@pytest.mark.parametrize("f,make,const", PROVED + ORDERED + KEPT, ids=lambda c: getattr(c, "__name__", ""))
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


@pytest.mark.parametrize("f,make,const", ORDERED, ids=lambda c: getattr(c, "__name__", ""))
def test_ordered_loads_read_again(f, make, const):
    """Textual order and ordered loop variables: no tape, and the gradient is right (finite
    differences, forward mode; Numba in `test_gradients`)."""
    args = make()
    assert "_cache" not in _code(f, args, const)
    check_grad(f, *args, const=const)


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


@pytest.mark.parametrize("name,kept", [("gramschmidt", {"_cache_A", "_cache_sqrt"}), ("atax", set())])
def test_polybench_tapes(name, kept):
    """gramschmidt keeps only A[i, j] of the dot product (overwritten later in the same j) and
    the norm; atax keeps nothing. Gradients: finite differences and forward mode."""
    import re
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from kernels import KERNELS

    k = KERNELS[name]
    args = k.make(4)
    const = tuple(i for i in range(len(args)) if i not in k.wrt)
    src = _code(k.primal, args, const)
    assert set(re.findall(r"_cache_\w+(?=\[_k)", src)) == kept, src
    check_grad(k.primal, *args, const=const)
