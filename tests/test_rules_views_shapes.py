"""Views, shapes and tensor products end to end: which calls return views (and that zymo
models them so), the forms of `np.einsum`, and the array rules of `rules/arrays.py`, each
checked with `zymo.gradient` in forward and reverse mode against central differences of
the map from the arguments' initial values (tests/helpers.py `check`), and against
autograd where autograd has the function.
"""
from __future__ import annotations

import numpy as np
import pytest

import zymo
from helpers import check, fd_grad
from zymo import Forward, Reverse
from zymo.errors import ZymoError
from zymo.rules import REGISTRY, runtime as _rt


# -- np.einsum('ji', a) is a view of a -------------------------------------------------------


def einsum_view_then_overwrite(a, b):
    s = np.sum(np.einsum('ji', a) * a.T)
    a[:, -1] = b
    return s


def test_einsum_view_regression():
    """`np.einsum('ji', a)` views `a`: its value must be read before `a` is overwritten (zymo
    took it for a copy, so reverse mode read the overwritten column: [3, 3], not [4, 10])."""
    a, b = np.arange(6.0).reshape(2, 3), np.array([1.0, -2.0])
    ga, gb = zymo.gradient(Reverse, einsum_view_then_overwrite, a.copy(), b)
    fa, fb = fd_grad(einsum_view_then_overwrite, [a.copy(), b], [np.zeros_like(a), np.zeros_like(b)])
    np.testing.assert_allclose(ga, fa, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ga, 2.0 * a)
    np.testing.assert_allclose(gb, fb, atol=1e-6)
    check(einsum_view_then_overwrite, [a.copy(), b])
    ir = str(zymo.ir(einsum_view_then_overwrite, a.copy(), b))
    assert "numpy.einsum_view" in ir, ir


def einsum_view_read_after_write(a, b):
    v = np.einsum('ji', a)
    a[:, -1] = b
    return np.sum(v * v)  # v sees the new column


def einsum_write_through_view(a, b):
    d = np.einsum('ii->i', a)
    d[...] = d * b  # scales a's diagonal in place
    return np.sum(a * a)


def einsum_ellipsis_view(a):
    v = np.einsum('...ij->...ji', a)
    v[0, 1, 0] = v[0, 1, 0] * 3.0
    return np.sum(a * np.sin(a))


@pytest.mark.parametrize("f, shapes", [
    (einsum_view_then_overwrite, [(2, 3), (2,)]),
    (einsum_view_read_after_write, [(2, 3), (2,)]),
    (einsum_write_through_view, [(3, 3), (3,)]),
    (einsum_ellipsis_view, [(2, 2, 3)]),
])
def test_einsum_views_both_modes(f, shapes):
    rng = np.random.default_rng(3)
    check(f, [rng.normal(size=s) for s in shapes])


@pytest.mark.parametrize("subscripts, shapes", [
    ("ji", [(2, 3)]), ("ij", [(2, 3)]), ("ij->ji", [(2, 3)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
    ("ii->", [(3, 3)]), ("ij->i", [(2, 3)]), ("...ij->...ji", [(2, 3, 4)]), ("i...->...", [(2, 3)]),
    ("...", [(2, 3)]), ("iij->ji", [(3, 3, 2)]), ("i...i->...", [(3, 2, 3)]), ("ba", [(2, 3)]),
    ("ij,jk", [(2, 3), (3, 4)]), ("i", [(3,)]), ("i->", [(3,)]),
])
def test_einsum_is_view_matches_numpy(subscripts, shapes):
    ops = [np.ones(s) for s in shapes]
    r = np.einsum(subscripts, *ops)
    assert _rt.einsum_is_view(subscripts, [len(s) for s in shapes]) == bool(np.shares_memory(r, ops[0]))
