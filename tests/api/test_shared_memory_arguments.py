"""Arguments that share memory. Where the function writes into that memory, their shadows must
share memory the same way (Enzyme's rule): `zymo.gradient(Reverse, f, x, x)` makes one shadow
per argument, and gave per-argument results that were no derivative at all (helper 66); it is
refused now. Where the function only reads, each argument keeps its own partial derivative."""
import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.errors import ZymoUsageError


def writes_through_one(a, b):
    a[0] = b[0] * b[1]
    return a[0] * b[0] + np.sum(a * b)


def reads_both(a, b):
    return np.sum(a * b * b)


def test_written_shared_memory_needs_one_shadow():
    x = np.array([0.5, 1.5, -0.7])
    y = x.copy()
    with pytest.raises(ZymoUsageError, match="share memory"):
        zymo.gradient(Reverse, writes_through_one, y, y)
    xx = x.copy()
    with pytest.raises(ZymoUsageError, match="share memory"):
        zymo.autodiff(Reverse, writes_through_one, Active, Duplicated(xx, np.zeros(3)), Duplicated(xx, np.zeros(3)))
    xx, dx = x.copy(), np.zeros(3)
    zymo.autodiff(Reverse, writes_through_one, Active, Duplicated(xx, dx), Duplicated(xx, dx))

    def one(v):
        w = v.copy()
        return writes_through_one(w, w)
    np.testing.assert_allclose(dx, fd_grad(one, [x])[0], rtol=1e-7)
    np.testing.assert_allclose(dx, [4.5, 4.5, -1.4], rtol=1e-14)


def test_read_only_shared_memory_keeps_partial_derivatives():
    x = np.array([0.5, 1.5, -0.7])
    ga, gb = zymo.gradient(Reverse, reads_both, *(2 * [x]))
    np.testing.assert_allclose(ga, x * x, rtol=1e-15)
    np.testing.assert_allclose(gb, 2.0 * x * x, rtol=1e-15)
    fa, fb = fd_grad(reads_both, [x, x.copy()])
    np.testing.assert_allclose(ga, fa, rtol=1e-7)
    np.testing.assert_allclose(gb, fb, rtol=1e-7)


def writes_first(a, b):
    a[0] = 2.0 * b[1]
    return np.sum(a * b) + a[0] * b[0]


G = np.array([1.0, 2.0, 3.0, 4.0])


def writes_arg_reads_global(x):
    x[1] = 3.0 * G[2]
    return np.sum(x * G)


def test_shared_memory_checked_element_for_element():
    """Helper 67's cases: a strided array passed twice with one contiguous shadow, and disjoint
    interleaved views with separate shadows, are accepted (and right); a batch of two lanes, a
    list holding the array, and a global that is the argument's memory are refused."""
    big = np.arange(1.0, 9.0)
    x = big[::2]
    dx = np.zeros_like(x)
    zymo.autodiff(Reverse, writes_first, Active, Duplicated(x, dx), Duplicated(x, dx))

    def once(v):
        w = v.copy()
        return writes_first(w, w)
    np.testing.assert_allclose(dx, fd_grad(once, [big[::2].copy()])[0], rtol=1e-7)
    y = np.arange(1.0, 9.0)
    da, db = np.zeros(4), np.zeros(4)
    zymo.autodiff(Reverse, writes_first, Active, Duplicated(y[::2], da), Duplicated(y[1::2], db))
    fa, fb = fd_grad(lambda a, b: writes_first(a.copy(), b.copy()), [y[::2].copy(), y[1::2].copy()])
    np.testing.assert_allclose(da, fa, rtol=1e-7)
    np.testing.assert_allclose(db, fb, rtol=1e-7)
    z = np.arange(1.0, 5.0)
    with pytest.raises(ZymoUsageError, match="element for element"):
        zymo.autodiff(Reverse, writes_first, Active, zymo.BatchDuplicated(z, (np.zeros(4), np.zeros(4))),
                      zymo.BatchDuplicated(z, (np.zeros(4), np.zeros(4))))
    with pytest.raises(ZymoUsageError, match="Const argument or a global"):
        zymo.autodiff(Reverse, writes_arg_reads_global, Active, Duplicated(G, np.zeros(4)))


def writes_complex(c, r):
    c[0] = 2.0 * c[1]
    return np.sum(np.abs(c) ** 2) + np.sum(r * r)


def test_elements_that_overlap_in_part_are_refused():
    """`c.imag` of a written complex `c` shares the second half of each element (helper 68): no
    element-for-element relation exists, so separate shadows are refused."""
    c = np.array([1.0 + 2.0j, 3.0 - 1.0j, 0.5j])
    with pytest.raises(ZymoUsageError, match="element for element"):
        zymo.autodiff(Reverse, writes_complex, Active, Duplicated(c, np.zeros_like(c)),
                      Duplicated(c.imag, np.zeros(3)))
