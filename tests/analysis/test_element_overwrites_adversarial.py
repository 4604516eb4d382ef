"""Adversarial checks of element-precise re-reading of scalar loads
(`Overwrites.first_element_writer`), reversed step-1 loops and written-out trip counts.

Each program reads `x[i + a]` and writes `x[i + b]` (or rows, views, `out=`, branches, callees,
while loops, nested loops, odd starts and steps) and is checked in both modes against central
differences (`zymo.testing.check_grad`), and its reverse gradient under Numba against the Python backend.
Update rules are contracting (sin, small factors) so finite differences stay accurate.

The review that wrote this file found two wrong gradients, fixed since and kept at the end:
an `as_strided` array inside a list argument (now refused) and loop carries swapped through a
temporary (now one tuple assignment).
"""
from dataclasses import dataclass

import numpy as np
import pytest
from helpers import assert_tree_close, zymo_grad
from numpy.lib.stride_tricks import as_strided

import zymo
from zymo import Active, Const, Duplicated, Reverse
from zymo.testing import check_grad


def _g(a):
    return 0.5 * np.sin(a) * a


# -- programs ------------------------------------------------------------------------------

def back_read(x):
    for i in range(1, x.shape[0]):
        x[i] = np.sin(x[i - 1]) * x[i - 1] + 0.5 * x[i]
    return np.sum(x * x)


def neg_start(x):
    """Start -2, read x[i + 2] (>= 0), write x[i + 3]."""
    for i in range(-2, x.shape[0] - 3):
        a = x[i + 2]
        x[i + 3] = 0.5 * np.sin(a) * a + x[i + 3]
    return np.sum(x * x)


def neg_start_wrap(x):
    """x[i + 1] at i = -2 is x[-1], which the last iteration writes."""
    for i in range(-2, x.shape[0] - 2):
        a = x[i + 1]
        x[i + 2] = 0.5 * np.sin(a) * a + 0.3 * x[i + 2]
    return np.sum(x * x)


def step3_ahead(x):
    """Step 3, read x[i + 2], write x[i]: the next write is x[i + 3] (proof holds)."""
    for i in range(0, x.shape[0] - 2, 3):
        x[i] = 0.5 * np.sin(x[i + 2]) * x[i + 2] + x[i]
    return np.sum(x * x)


def step2_ahead2(x):
    """Step 2, read x[i + 2], write x[i]: the next iteration writes x[i + 2]."""
    for i in range(0, x.shape[0] - 2, 2):
        x[i] = 0.5 * np.sin(x[i + 2]) * x[i + 2] + x[i]
    return np.sum(x * x)


def step2_var_start(x):
    s = 1
    for i in range(s, x.shape[0] - 2, 2):
        x[i] = 0.5 * np.sin(x[i + 2]) * x[i + 2] + x[i]
    return np.sum(x * x)


def arg_start(x, s):
    """A start that is an argument (not a constant): no proof."""
    for i in range(s, x.shape[0] - 1):
        x[i] = 0.5 * np.sin(x[i + 1]) * x[i + 1] + x[i]
    return np.sum(x * x)


def neg_arg_start(x, s):
    """A negative start passed in: x[i + 3] wraps for s = -4."""
    for i in range(s, x.shape[0] - 4):
        a = x[i + 3]
        x[i + 4] = 0.5 * np.sin(a) * a + 0.5 * x[i + 4]
    return np.sum(x * x)


def arith_idx(x):
    """(i + 2) - 3 read, i + 1 - 1 written: the next iteration writes what this one read."""
    for i in range(1, x.shape[0] - 1):
        a = x[(i + 2) - 3]
        x[i + 1 - 1] = 0.5 * np.sin(a) * a + x[i * 1]
    return np.sum(x * x)


def arith_idx_ahead(x):
    """(i + 3) - 1 read, i - 0 + 1 written (read one ahead of the write)."""
    for i in range(x.shape[0] - 2):
        a = x[(i + 3) - 1]
        x[i - 0 + 1] = 0.5 * np.sin(a) * a + x[i + 1]
    return np.sum(x * x)


def rev_idx(x):
    n = x.shape[0]
    for i in range(n - 1):
        a = x[n - 1 - i]
        x[n - 2 - i] = 0.5 * np.sin(a) * a + x[n - 2 - i]
    return np.sum(x * x)


def reversed_range(x):
    for i in range(x.shape[0] - 1, 0, -1):
        a = x[i]
        x[i - 1] = 0.5 * np.sin(a) * a + x[i - 1]
    return np.sum(x * x)


def reversed_range_back(x):
    """Step -1, read x[i - 1], write x[i]: the next iteration writes x[i - 1]."""
    for i in range(x.shape[0] - 1, 0, -1):
        x[i] = 0.5 * np.sin(x[i - 1]) * x[i - 1] + x[i]
    return np.sum(x * x)


def neg_const_idx(x):
    for i in range(x.shape[0] - 1):
        a = x[-1]
        x[i] = a * x[i] + 0.1
    x[-1] = x[-1] * 0.5
    return np.sum(x * x)


def neg_const_idx2(x):
    """x[0] read; x[i - 1] written (x[-1] first, x[0] at i = 1)."""
    s = 0.0
    for i in range(x.shape[0]):
        a = x[0]
        s = s + a * a
        x[i - 1] = 1.5 * x[i - 1]
    return s + np.sum(x)


def row_write(A):
    for i in range(A.shape[0] - 1):
        a = A[i, 0]
        A[i + 1] = a * A[i + 1] + 0.1
    return np.sum(A * A)


def row_write_back(A):
    for i in range(A.shape[0] - 1):
        a = A[i + 1, 0]
        A[i] = a * A[i] + 0.1
    return np.sum(A * A)


def three_d(A):
    for i in range(A.shape[0] - 1):
        for j in range(A.shape[1]):
            a = A[i, j, 0]
            A[i + 1, j, 1] = a * A[i + 1, j, 1] + a
            A[i, j, 1] = A[i, j, 1] * 0.5 + a
    return np.sum(A * A)


def three_d_plane(A):
    """Read A[i, j, 0], write the plane A[i + 1] and the element A[i, j, 0] itself later."""
    s = 0.0
    for i in range(A.shape[0] - 1):
        for j in range(A.shape[1]):
            a = A[i, j, 0]
            s = s + a * a
        A[i + 1] = 0.5 * A[i + 1] + 0.1
        A[i, 0, 0] = A[i, 0, 0] * 1.5
    return s + np.sum(A * A)


def nested_inner_ahead(A):
    for i in range(A.shape[0]):
        for j in range(A.shape[1] - 1):
            a = A[i, j + 1]
            A[i, j] = _g(a) + A[i, j]
    return np.sum(A * A)


def nested_outer_back(A):
    for i in range(1, A.shape[0]):
        for j in range(A.shape[1]):
            a = A[i, j]
            A[i - 1, j] = _g(a) + A[i - 1, j]
    return np.sum(A * A)


def nested_cross(A):
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            if i != j:
                a = A[i, j]
                A[j, i] = _g(a) + 0.5 * A[j, i]
    return np.sum(A * A)


def diag_shift(A):
    """Read A[i + 1, j + 1], write A[i, j]: a later i with a later j writes what was read."""
    for i in range(A.shape[0] - 1):
        for j in range(A.shape[1] - 1):
            a = A[i + 1, j + 1]
            A[i, j] = _g(a) + A[i, j]
    return np.sum(A * A)


def inner_restarts(A):
    """Read A[0, j], write A[0, j + 1]: the outer loop starts j again."""
    s = 0.0
    for _i in range(2):
        for j in range(A.shape[1] - 1):
            a = A[0, j]
            s = s + a * a
            A[0, j + 1] = A[0, j + 1] + 0.5 * a
    return s + np.sum(A * A)


def outer_key(A):
    """Read A[i, j], write A[i, j + 1]: proved (other rows later, later columns in this one)."""
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1] - 1):
            a = A[i, j]
            s = s + a * a
            A[i, j + 1] = A[i, j + 1] + 0.5 * a
    return s + np.sum(A * A)


def triangle(A):
    """Read A[i, 0], write A[j, 1] for j >= i (column 0 never written)."""
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(i, A.shape[0]):
            a = A[i, 0]
            s = s + a * a
            A[j, 1] = A[j, 1] * 0.8 + a
    return s + np.sum(A * A)


def triangle_same(A):
    """Inner start i: read A[j, 0], then write A[j, 0]; the next i reads it again."""
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(i, A.shape[0]):
            a = A[j, 0]
            s = s + a * a
            A[j, 0] = A[j, 0] * 0.9
    return s + np.sum(A * A)


def triangle_back(A):
    """Inner start i + 1: read A[j, 0], write A[j - 1, 0] (a later i re-reads, earlier j)."""
    s = 0.0
    for i in range(A.shape[0] - 1):
        for j in range(i + 1, A.shape[0]):
            a = A[j, 0]
            s = s + a * a
            A[j - 1, 0] = A[j - 1, 0] * 0.9 + 0.1 * a
    return s + np.sum(A * A)


def branch_write(x):
    for i in range(x.shape[0] - 1):
        a = x[i + 1]
        if a > 0.5:
            x[i] = _g(a)
        else:
            x[i] = x[i] + a
    return np.sum(x * x)


def branch_write_back(x):
    """Odd i writes x[i - 1], an element an earlier iteration read."""
    for i in range(x.shape[0] - 1):
        a = x[i]
        if i % 2 == 0:
            x[i + 1] = _g(a) + x[i + 1]
        else:
            x[i - 1] = a * 1.5
    return np.sum(x * x)


def view_write(x):
    v = x[1:]
    for i in range(x.shape[0] - 2):
        a = x[i + 2]
        v[i] = _g(a) + v[i]
    return np.sum(x * x)


def view_write_hit(x):
    """Through v = x[2:], v[i + 2] is x[i + 4], read by a later iteration."""
    v = x[2:]
    for i in range(x.shape[0] - 4):
        a = x[i + 3]
        v[i + 2] = _g(a) + v[i + 2]
    return np.sum(x * x)


def view_read(x):
    """Loads through the view v = x[1:], stores into x: v[i] is x[i + 1], written next."""
    v = x[1:]
    s = 0.0
    for i in range(x.shape[0] - 2):
        a = v[i]
        s = s + a * a
        x[i + 2] = x[i + 2] * 1.5
    return s + np.sum(x * x)


def row_view(A):
    for i in range(A.shape[0] - 1):
        a = A[i + 1, 0]
        row = A[i + 1]
        row[1] = a * row[1]
        r0 = A[i]
        r0[0] = a + r0[0]
    return np.sum(A * A)


def row_view_hit(A):
    """A[i, 0] read; row = A[i - 1] ... row[0] written a later iteration through a row view."""
    s = 0.0
    for i in range(1, A.shape[0]):
        a = A[i - 1, 0]
        s = s + a * a
        row = A[i]
        row[0] = row[0] * 1.5
    return s + np.sum(A * A)


def out_write(x):
    s = 0.0
    for i in range(x.shape[0]):
        a = x[i]
        s = s + a * a
        np.multiply(x, 1.1, out=x)
    return s


def aug_whole(x):
    s = 0.0
    for i in range(x.shape[0]):
        a = x[i]
        s = s + a * a
        x *= 1.1
    return s


def slice_write(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        a = x[i]
        s = s + a * a
        x[i:] = x[i:] * 1.2
    return s


def while_loop(x):
    s = 0.0
    i = 0
    while i < x.shape[0] - 1:
        a = x[i + 1]
        s = s + a * a
        x[i] = x[i] * 1.5 + a
        i = i + 1
    return s + np.sum(x * x)


def while_in_for(x):
    s = 0.0
    for _ in range(3):
        k = 0
        while k < x.shape[0] - 1:
            a = x[k]
            s = s + a * a
            x[k + 1] = x[k + 1] * 1.1
            k = k + 1
    return s


def for_in_while(x):
    s = 0.0
    t = 0
    while t < 2:
        for i in range(x.shape[0] - 1):
            a = x[i]
            s = s + a * a
            x[i + 1] = x[i + 1] * 1.1
        t = t + 1
    return s


def for_break(x):
    """A for loop with break is a while loop: no induction variable."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        a = x[i + 1]
        s = s + a * a
        x[i] = x[i] * 1.5 + a
        if s > 100.0:
            break
    return s + np.sum(x * x)


def _helper_step(x, i):
    x[i + 1] = 0.5 * np.sin(x[i]) * x[i] + x[i + 1]


def _helper_back(x, i):
    x[i] = 0.5 * np.sin(x[i + 1]) * x[i + 1] + x[i]


def _inner_loop(x, lo):
    for j in range(lo, x.shape[0]):
        x[j - 1] = np.sin(x[j]) * x[j] + 0.5 * x[j - 1]


def callee_step(x):
    for i in range(x.shape[0] - 1):
        _helper_step(x, i)
    return np.sum(x * x)


def callee_back(x):
    for i in range(x.shape[0] - 1):
        _helper_back(x, i)
    return np.sum(x * x)


def callee_loop(x):
    for i in range(2):
        _inner_loop(x, i + 1)
    return np.sum(x * x)


def two_arrays(x, y):
    for i in range(x.shape[0] - 1):
        a = x[i + 1]
        y[i] = _g(a) + y[i]
        x[i] = y[i + 1] * x[i]
    return np.sum(x * y)


def aliased_pair(x, y):
    """Called with the same array twice: y[i + 1] is x[i + 1], read next iteration."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        a = x[i]
        s = s + a * a
        y[i + 1] = y[i + 1] * 1.5
    return s


def list_arrays(L):
    for i in range(4):
        a = L[0][i + 1]
        L[0][i] = _g(a) + L[0][i]
        L[1][i + 1] = L[1][i] * a
    return np.sum(L[0] * L[1])


def list_row(L):
    """r = L[0] read, r[i + 1] written: proved."""
    r = L[0]
    s = 0.0
    for i in range(r.shape[0] - 1):
        a = r[i]
        s = s + a * a
        r[i + 1] = r[i + 1] * 1.2 + 0.1 * a
    return s + np.sum(r)


def list_row_hit(L):
    """r = L[0] read at r[i + 1]; L[0][i] written through a fresh list item: no proof."""
    r = L[0]
    s = 0.0
    for i in range(r.shape[0] - 1):
        a = r[i + 1]
        s = s + a * a
        L[0][i + 1] = L[0][i + 1] * 1.5
    return s + np.sum(r)


def iv_after_loop(x):
    s = 0.0
    i = 0
    for i in range(x.shape[0] - 2):
        a = x[i]
        s = s + a * a
    x[i] = x[i] * 5.0
    return s + np.sum(x * x)


def reassigned_iv(x):
    s = 0.0
    for i in range(x.shape[0] - 3):
        a = x[i]
        s = s + a * a
        i = i + 1
        x[i - 1] = x[i - 1] * 1.5
    return s + np.sum(x)


def two_stores(x):
    s = 0.0
    for i in range(1, x.shape[0] - 1):
        x[i - 1] = x[i - 1] * 1.2
        a = x[i]
        s = s + a * a
        x[i + 1] = x[i + 1] + a
    return s + np.sum(x * x)


def int_index_array(x, k):
    """The loop's stop is loaded from an int array that a later store changes."""
    s = 0.0
    for i in range(k[0]):
        a = x[i]
        s = s + a * a * (i + 1)
        k[0] = 0
    for j in range(k[1], x.shape[0]):
        s = s + x[j] * k[1]
    k[1] = 1
    return s


def nested_var_bounds(x):
    """Reversed loops of step 1 with starts i + 1, -i - 1 (negative) and i - 2."""
    n = x.shape[0]
    s = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            s = s + x[i] * x[j]
        for j in range(-i - 1, 0):
            s = s + 0.5 * x[j] * x[i]
        for j in range(i - 2, i + 1):
            s = s + 0.25 * x[j]
    return s


def nested_steps(x):
    """Steps 2 and 3 with variable and negative starts."""
    n = x.shape[0]
    s = 0.0
    for i in range(1, n, 2):
        for j in range(-i, n - i, 3):
            s = s + x[i] * x[j] * (j + 2)
    for i in range(n - 1, -n, -3):
        s = s + x[i] * x[i]
    return s


def extents_loop(A):
    """Extents read in the adjoint: A.shape[1] of an array the loop writes rows of."""
    s = 0.0
    for i in range(A.shape[0] - 1):
        m = A.shape[1]
        a = A[i, m - 1]
        s = s + a * m
        A[i + 1] = A[i + 1] * 0.9 + 0.1 * a
    return s + np.sum(A * A)


# -- textual order and ordered loop variables (the tape must stay) ----------------------------


def ord_after(x):
    """x[i] read in one inner loop, written in a later inner loop of the same iteration."""
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(2):
            a = x[i]
            s = s + a * a * (j + 1)
        for _ in range(2):
            x[i] = x[i] * 0.8 + 0.1
    return s + np.sum(x * x)


def ord_same_start(x):
    """x[j] for j in range(i, n) written first, x[i + 1] read: iteration i + 1 writes it."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        for j in range(i, x.shape[0]):
            x[j] = x[j] * 0.9 + 0.1
        a = x[i + 1]
        s = s + a * a
    return s + np.sum(x * x)


def ord_start_after(x):
    """x[i] read, then x[j] written for j in range(i, n): j = i in the same iteration."""
    s = 0.0
    for i in range(x.shape[0]):
        a = x[i]
        s = s + a * a
        for j in range(i, x.shape[0]):
            x[j] = x[j] * 0.9 + 0.1 * a
    return s + np.sum(x * x)


def ord_start_back(x):
    """x[j] for j in range(i - 1, n) written first, x[i] read: iteration i + 1 writes it."""
    s = 0.0
    for i in range(1, x.shape[0]):
        for j in range(i - 1, x.shape[0]):
            x[j] = x[j] * 0.9 + 0.1
        a = x[i]
        s = s + a * a
    return s + np.sum(x * x)


def ord_prefix_later(x):
    """x[i] read, x[k] written for k in range(i) (k < i now, k = i in later iterations)."""
    s = 0.0
    for i in range(x.shape[0]):
        a = x[i]
        s = s + a * a
        for k in range(i):
            x[k] = x[k] * 0.9 + 0.1 * a
    return s + np.sum(x * x)


def ord_prefix_edge(x):
    """Row i: x[i, i - 1] read, x[i, k] written for k in range(i): k = i - 1 (the stop is
    exclusive by one; later iterations write other rows)."""
    s = 0.0
    for i in range(1, x.shape[0]):
        a = x[i, i - 1]
        s = s + a * a
        for k in range(i):
            x[i, k] = x[i, k] * 0.9 + 0.1 * a
    return s + np.sum(x * x)


def ord_while(x):
    """x[k] written before x[k + 1] is read; the next iteration writes x[k + 1]."""
    s = 0.0
    k = 0
    while k < x.shape[0] - 1:
        x[k] = x[k] * 1.5 + 0.1
        a = x[k + 1]
        s = s + a * a
        k = k + 1
    return s + np.sum(x * x)


def ord_branch_deep(x):
    """x[i] read deep in a branch, written after the branch (a larger position in the loop
    body than the branch, a smaller one than the load inside the branch)."""
    s = 0.0
    for i in range(x.shape[0]):
        if i % 2 == 0:
            b = s + 1.0
            c = b * 0.5
            d = c + b
            d = d * d + c * b
            d = (d + c) * 0.25 + b * c
            a = x[i]
            s = s + a * a * d
        x[i] = x[i] * 0.7 + 0.1
    return s + np.sum(x * x)


def ord_branches(x):
    """x[0] read in one branch, written in the other: never in one iteration, but later."""
    s = 0.0
    for i in range(x.shape[0]):
        if i % 2 == 0:
            a = x[0]
            s = s + a * a
        else:
            x[0] = x[0] * 0.9 + 0.1
    return s + np.sum(x * x)


def ord_view(x):
    """v = x[i:] taken in the loop: v[0] written before v[1] read is x[i + 1], the next v[0]."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        v = x[i:]
        v[0] = v[0] * 0.5 + 0.1
        a = v[1]
        s = s + a * a
    return s + np.sum(x * x)


def ord_aliased(x, y):
    """Called with one array twice: y[j] for j in range(i, n) is x[i] at j = i."""
    s = 0.0
    for i in range(x.shape[0]):
        a = x[i]
        s = s + a * a
        for j in range(i, y.shape[0]):
            y[j] = y[j] * 1.2
    return s


def ord_reversed(x):
    """Step -1: x[j] for j in range(i, n) written first, x[i] read; iteration i - 1 writes it."""
    s = 0.0
    for i in range(x.shape[0] - 1, -1, -1):
        for j in range(i, x.shape[0]):
            x[j] = x[j] * 0.9 + 0.1
        a = x[i]
        s = s + a * a
    return s + np.sum(x * x)


rng = np.random.default_rng(11)


def _v(n):
    return lambda: rng.random(n) + 0.3


def _m(*shape):
    return lambda: rng.random(shape) + 0.3


CASES = [
    (back_read, [_v(8)], ()),
    (neg_start, [_v(8)], ()),
    (neg_start_wrap, [_v(8)], ()),
    (step3_ahead, [_v(9)], ()),
    (step2_ahead2, [_v(9)], ()),
    (step2_var_start, [_v(9)], ()),
    (arg_start, [_v(9), lambda: 1], (1,)),
    (neg_arg_start, [_v(9), lambda: -4], (1,)),
    (arith_idx, [_v(8)], ()),
    (arith_idx_ahead, [_v(8)], ()),
    (rev_idx, [_v(8)], ()),
    (reversed_range, [_v(8)], ()),
    (reversed_range_back, [_v(8)], ()),
    (neg_const_idx, [_v(8)], ()),
    (neg_const_idx2, [_v(8)], ()),
    (row_write, [_m(5, 3)], ()),
    (row_write_back, [_m(5, 3)], ()),
    (three_d, [_m(3, 4, 2)], ()),
    (three_d_plane, [_m(3, 2, 2)], ()),
    (nested_inner_ahead, [_m(4, 4)], ()),
    (nested_outer_back, [_m(4, 4)], ()),
    (nested_cross, [_m(4, 4)], ()),
    (diag_shift, [_m(4, 5)], ()),
    (inner_restarts, [_m(5, 3)], ()),
    (outer_key, [_m(5, 3)], ()),
    (triangle, [_m(4, 3)], ()),
    (triangle_same, [_m(4, 3)], ()),
    (triangle_back, [_m(4, 3)], ()),
    (branch_write, [_v(8)], ()),
    (branch_write_back, [_v(8)], ()),
    (view_write, [_v(8)], ()),
    (view_write_hit, [_v(8)], ()),
    (view_read, [_v(8)], ()),
    (row_view, [_m(5, 3)], ()),
    (row_view_hit, [_m(5, 3)], ()),
    (out_write, [_v(6)], ()),
    (aug_whole, [_v(6)], ()),
    (slice_write, [_v(6)], ()),
    (while_loop, [_v(8)], ()),
    (while_in_for, [_v(6)], ()),
    (for_in_while, [_v(6)], ()),
    (for_break, [_v(6)], ()),
    (callee_step, [_v(8)], ()),
    (callee_back, [_v(8)], ()),
    (callee_loop, [_v(8)], ()),
    (two_arrays, [_v(8), _v(8)], ()),
    (list_arrays, [lambda: [rng.random(5) + 0.3, rng.random(5) + 0.3]], ()),
    (list_row, [lambda: [rng.random(6) + 0.3]], ()),
    (list_row_hit, [lambda: [rng.random(6) + 0.3]], ()),
    (iv_after_loop, [_v(8)], ()),
    (reassigned_iv, [_v(8)], ()),
    (two_stores, [_v(8)], ()),
    (int_index_array, [_v(7), lambda: np.array([4, 2])], (1,)),
    (nested_var_bounds, [_v(6)], ()),
    (nested_steps, [_v(7)], ()),
    (extents_loop, [_m(4, 3)], ()),
]
ORDERED = [(f, [_v(5)], ()) for f in (ord_after, ord_same_start, ord_start_after, ord_start_back, ord_prefix_later,
                                       ord_while, ord_branch_deep, ord_branches, ord_view, ord_reversed)]
ORDERED.append((ord_prefix_edge, [_m(4, 4)], ()))
CASES += ORDERED

# Numba compiles cost ~1 s each: these run under Numba too (the rest in Python only)
NUMBA = {"neg_start_wrap", "step3_ahead", "step2_ahead2", "neg_arg_start", "arith_idx", "reversed_range_back",
         "neg_const_idx2", "row_write_back", "diag_shift", "inner_restarts", "outer_key", "triangle_back",
         "branch_write_back", "view_write_hit", "row_view_hit", "callee_loop", "list_row_hit",
         "nested_var_bounds", "nested_steps", "int_index_array", "ord_same_start", "ord_branches", "ord_reversed"}


def _copy(a):
    if isinstance(a, np.ndarray):
        return np.copy(a)
    if isinstance(a, list):
        return [_copy(b) for b in a]
    return a


@pytest.mark.slow
@pytest.mark.parametrize("f,make,const", CASES, ids=[c[0].__name__ for c in CASES])
def test_against_finite_differences(f, make, const):
    args = [m() for m in make]
    out = check_grad(f, *args, const=const)
    if f.__name__ in NUMBA:
        crng = np.random.default_rng(2)
        cots = [None if k in const else
                ([crng.random(b.shape) for b in a] if isinstance(a, list) else crng.random(a.shape))
                for k, a in enumerate(args)]
        g_py = zymo_grad(f, _copy(args), _copy(cots), const=const)
        g_nb = zymo_grad(f, _copy(args), _copy(cots), const=const, numba=True)
        assert_tree_close(g_nb, g_py, rtol=1e-10, atol=1e-12, what="numba vs python")
    assert out.reverse is not None


@pytest.mark.parametrize("f,make,const", ORDERED, ids=[c[0].__name__ for c in ORDERED])
def test_ordered_kept(f, make, const):
    """Where a store can reach the element read (later in the iteration, or in a later one),
    the load stays on the tape, and the gradient matches finite differences and forward mode."""
    args = [m() for m in make]
    src = zymo.generated_code(Reverse, f, Active, Duplicated(args[0], np.zeros_like(args[0])))
    # or, where no store reaches the element before the load (`ord_after`), loaded from a
    # copy taken at the nest's entry (`Overwrites.entry_loop`, tests/analysis/test_entry_snapshot.py)
    assert "_cache" in src or "_saved_x[" in src, src
    check_grad(f, *args, const=const)


def test_aliased_arguments():
    """The same array passed twice: the store y[i + 1] is x[i + 1], read next iteration."""
    x0 = rng.random(6) + 0.3

    def primal(v):
        b = v.copy()
        return aliased_pair(b, b)

    for numba in (False, True):
        x = x0.copy()
        dx = np.zeros(6)
        zymo.autodiff(Reverse, aliased_pair, Active, Duplicated(x, dx), Duplicated(x, dx), numba=numba)
        eps = 1e-6
        fd = np.array([(primal(x0 + eps * e) - primal(x0 - eps * e)) / (2 * eps) for e in np.eye(6)])
        np.testing.assert_allclose(dx, fd, rtol=1e-6, atol=1e-8)
        assert abs(fd[1] - 2 * 2.25 * x0[1]) < 1e-5  # x[1] was scaled before it was read


def test_aliased_ordered():
    """The same array twice to `ord_aliased`: y[j] (j >= i) is x[i]; Python, Numba and finite
    differences agree."""
    x0 = rng.random(5) + 0.3

    def primal(v):
        b = v.copy()
        return ord_aliased(b, b)

    eps = 1e-6
    fd = np.array([(primal(x0 + eps * e) - primal(x0 - eps * e)) / (2 * eps) for e in np.eye(5)])
    for numba in (False, True):
        x = x0.copy()
        dx = np.zeros(5)
        zymo.autodiff(Reverse, ord_aliased, Active, Duplicated(x, dx), Duplicated(x, dx), numba=numba)
        np.testing.assert_allclose(dx, fd, rtol=1e-6, atol=1e-8)
    assert abs(fd[1] - 2 * 1.44 * x0[1]) < 1e-5  # read as 1.2 * x[1]: scaled once (at i = 0) before


def test_overlapping_arguments():
    """x = buf[:-1] and y = buf[1:]: y[i] is x[i + 1], read next iteration."""
    def f(x, y):
        s = 0.0
        for i in range(x.shape[0]):
            a = x[i]
            s = s + a * a
            y[i] = y[i] * 1.5
        return s

    def primal(b0):
        b = b0.copy()
        x, y = b[:-1], b[1:]
        s = 0.0
        for i in range(x.shape[0]):
            s += x[i] ** 2
            y[i] *= 1.5
        return s

    b0 = rng.random(6) + 0.3
    b = b0.copy()
    db = np.zeros(6)
    zymo.autodiff(Reverse, f, Active, Duplicated(b[:-1], db[:-1]), Duplicated(b[1:], db[1:]))
    eps = 1e-6
    fd = np.array([(primal(b0 + eps * e) - primal(b0 - eps * e)) / (2 * eps) for e in np.eye(6)])
    np.testing.assert_allclose(db, fd, rtol=1e-6, atol=1e-8)


def test_overlapping_argument_refused():
    """A writable as_strided argument (and one inside a record) is refused."""
    @dataclass
    class Rec:
        r: np.ndarray

    def f(p, y):
        return p.r[0] * y[0]

    y = np.ones(3)
    with pytest.raises(zymo.ZymoUsageError, match="overlap"):
        zymo.autodiff(Reverse, f, Active, Const(Rec(as_strided(np.array([1.0, 2.0]), (4,), (0,)))),
                      Duplicated(y, np.zeros(3)))


# -- known wrong gradients ---------------------------------------------------------------------


def _overlap_in_list(L, y):
    r = L[0]
    s = 0.0
    for i in range(r.shape[0] - 1):
        a = r[i]
        s = s + a * y[i]
        r[i + 1] = r[i + 1] * 2.0
    return s


@pytest.mark.parametrize("numba", [False, True], ids=["python", "numba"])
def test_self_overlapping_array_in_list(numba):
    """Found by the review: an as_strided array inside a list argument was not refused, and
    the element-precise proof re-read r[i] after the loop changed it (dy = [12, 12, 12, 0]
    instead of [1.5, 3, 6, 0]). Now refused, like a top-level argument."""
    y = np.array([1.0, 2.0, 3.0, 4.0])
    dy = np.zeros(4)
    with pytest.raises(zymo.ZymoUsageError, match="overlap in memory"):
        zymo.autodiff(Reverse, _overlap_in_list, Active,
                      Const([as_strided(np.array([1.5, 7.0]), shape=(4,), strides=(0,))]),
                      Duplicated(y, dy), numba=numba)
    lst = [np.linspace(0.5, 1.0, 4)]  # the same call on a plain array: the right gradient
    zymo.autodiff(Reverse, _overlap_in_list, Active, Const(lst), Duplicated(y, dy), numba=numba)
    r0 = np.linspace(0.5, 1.0, 4)
    expected = [r0[0], 2 * r0[1], 2 * r0[2], 0.0]  # r[i] when read: r[i] doubled once, before
    np.testing.assert_allclose(dy, expected)


def _swap_arrays(A, B):
    x = A
    y = B
    s = 0.0
    for i in range(4):
        a = x[i]
        s = s + a * a * (i + 1)
        t = x
        x = y
        y = t
    return s


def _swap_scalars(p, q):
    for _ in range(3):
        t = p
        p = q
        q = t
    return p + 3.0 * q


def test_swapped_array_carries():
    """Found by the review (older than element-precise caching): carries swapped through a
    temporary were copied one after another (`A_1 = B_1; B_1 = A_1`): wrong primal and
    gradient. Now one tuple assignment (`emit.assign_all`)."""
    a0 = np.random.default_rng(1).random(6)
    b0 = np.random.default_rng(2).random(6)
    check_grad(_swap_arrays, a0, b0)
    assert zymo.autodiff(zymo.ReverseWithPrimal, _swap_arrays, Active, Const(a0), Const(b0))[1] == \
        pytest.approx(_swap_arrays(a0, b0))
    grads = {nb: (np.zeros(6), np.zeros(6)) for nb in (False, True)}
    for nb, (da, db) in grads.items():
        zymo.autodiff(Reverse, _swap_arrays, Active, Duplicated(a0, da), Duplicated(b0, db), numba=nb)
    np.testing.assert_allclose(grads[True][0], grads[False][0], rtol=1e-12)
    np.testing.assert_allclose(grads[True][1], grads[False][1], rtol=1e-12)
    assert grads[False][0][0] == pytest.approx(2 * a0[0]) and grads[False][1][1] == pytest.approx(4 * b0[1])


def test_swapped_scalar_carries():
    check_grad(_swap_scalars, 1.3, 0.7)
