"""Overwrites of subarrays taken in a loop (`Overwrites.first_writer` on a view `x[i]`).

A row normalised in place (`x[i] /= s`) is written again by the same `out=` call in later
iterations, and by any other call that writes `x[i]` there. Those later writes name other rows
when the index provably differs (`_disjoint`, as for scalar loads), so the adjoint sweep reads
the row as the division left it (`-sum(g * x[i]) / s`) instead of keeping a copy of it from
before the division. Where a later write can reach the row (the same iteration writes it again
after the division, a later iteration writes the previous row, a negative index wraps round),
the copy stays.

Every program is checked against central differences and forward mode (`check_grad`) and
against the Numba backend; the generated code is inspected for the copy.
"""
import numpy as np
import pytest
from helpers import assert_tree_close, zymo_grad

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.testing import check_grad

rng = np.random.default_rng(41)


def scale_rows(x, w):
    """Each row divided by a number computed from another array: no later write reaches it."""
    for i in range(x.shape[0]):
        s = np.sum(w[i] * w[i]) + 1.0
        x[i] /= s
    return np.sum(x * x * w)


def scale_rows_next_written(x, w):
    """The next row scaled after the division: a later iteration divides it, never row i again."""
    for i in range(x.shape[0] - 1):
        s = np.sum(w[i] * w[i]) + 1.0
        x[i] /= s
        x[i + 1] *= 1.5
    return np.sum(x * x * w)


def rewritten_same_iteration(x, w):
    """The row written again after the division in the same iteration."""
    for i in range(x.shape[0]):
        s = np.sum(w[i] * w[i]) + 1.0
        x[i] /= s
        x[i] += w[i]
    return np.sum(x * x * w)


def previous_row_written(x, w):
    """A later iteration writes the row divided before (x[i - 1] of iteration i + 1 is x[i])."""
    for i in range(1, x.shape[0]):
        s = np.sum(w[i] * w[i]) + 1.0
        x[i] /= s
        x[i - 1] *= 1.5
    return np.sum(x * x * w)


def wraps(x, w):
    """range(-2, 2) over 3 rows: x[-2] is x[1], divided again two iterations later."""
    for i in range(-2, 2):
        s = np.sum(w[i] * w[i]) + 1.0
        x[i] /= s
    return np.sum(x * x * w)


def scaled_by_vector(x, w):
    """The row reads itself: its own write is the op's, whatever the indices (helper 77)."""
    x[0] *= w[1]
    return np.sum(x * w)


def each_row_scaled(x, w):
    for i in range(x.shape[0]):
        x[i] *= w[i]
    return np.sum(x * x * w)


def rows_enumerated(x, w):
    for i, row in enumerate(x):
        row *= w[i]
    return np.sum(x * x * w)


def out_at_run_time_index(x, w, i):
    """`x[i]` is `x[0]` only at run time: the write may reach what the call read."""
    np.multiply(x[0], w[1], out=x[i])
    return np.sum(x * x * w)


def _make(rows=3):
    return [rng.random((rows, 4)) + 0.5, rng.random((rows, 4)) + 0.5]


PROVED = [scale_rows, scale_rows_next_written]
KEPT = [rewritten_same_iteration, previous_row_written, wraps]
# the op's own write reaches the row it reads: its old contents are kept (the adjoint of `*=`)
SELF = [scaled_by_vector, each_row_scaled, rows_enumerated]


def _code(f, args):
    ann = [Duplicated(a, np.zeros_like(a)) for a in args]
    return zymo.generated_code(Reverse, f, Active, *ann)


@pytest.mark.parametrize("f", PROVED + KEPT + SELF, ids=lambda f: f.__name__)
def test_gradients(f):
    args = _make()
    check_grad(f, *args)
    cots = [np.zeros_like(a) for a in args]
    g_py = zymo_grad(f, [np.copy(a) for a in args], cots)
    g_nb = zymo_grad(f, [np.copy(a) for a in args], cots, numba=True)
    assert_tree_close(g_nb, g_py, rtol=1e-10, atol=1e-12)
    for g in g_py:  # every element's derivative reaches the result (a zero rule would not pass)
        assert np.all(np.abs(g) > 1e-5) and np.max(np.abs(g)) > 1e-2


@pytest.mark.parametrize("f", PROVED, ids=lambda f: f.__name__)
def test_row_read_as_divided(f):
    src = _code(f, _make())
    assert "_saved" not in src and "_cache_x" not in src, src


@pytest.mark.parametrize("f", KEPT, ids=lambda f: f.__name__)
def test_row_kept(f):
    src = _code(f, _make())
    assert "_saved" in src or "_cache_x" in src, src


@pytest.mark.parametrize("f", SELF, ids=lambda f: f.__name__)
def test_own_write_kept(f):
    src = _code(f, _make())
    assert "_saved" in src or "_cache_x" in src, src


def test_out_at_run_time_index():
    x, w = _make()
    check_grad(out_at_run_time_index, x, w, 0, const=(2,))
    dx, dw = zymo.gradient(Reverse, out_at_run_time_index, x.copy(), w.copy(), zymo.Const(0))[:2]
    assert np.any(dx != 0.0)
    e = 1e-6
    for k in np.ndindex(w.shape):
        wp, wm = w.copy(), w.copy()
        wp[k] += e
        wm[k] -= e
        fd = (out_at_run_time_index(x.copy(), wp, 0) - out_at_run_time_index(x.copy(), wm, 0)) / (2 * e)
        assert abs(dw[k] - fd) <= 1e-6 * max(1.0, abs(fd))
