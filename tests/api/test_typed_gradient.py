"""`zymo.gradient`'s everyday call: the same function on new arrays of the same types reuses
the program after O(number of arguments) checks (`cache.TypedGradient`), and anything the
checks do not admit takes the full path. Each result is compared with the full path's (a
fresh cache) and with central differences."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Reverse, ReverseWithPrimal, cache

W_DATA = np.random.default_rng(0).standard_normal((20, 3))
SCALE = 2.0


def loss(w):
    z = W_DATA @ w
    return np.sum(np.logaddexp(0.0, z)) * SCALE


def pair(x, y, a):
    return np.sum(x * y) * a + np.sum(np.sin(x))


def _full(f, *args, mode=Reverse):
    cache.cache_clear()
    return zymo.gradient(mode, f, *args)


def test_new_arrays_of_the_same_type_reuse_the_program():
    rng = np.random.default_rng(1)
    zymo.gradient(Reverse, loss, rng.standard_normal(3))
    assert (loss, Reverse, None) in cache.TYPED
    for _ in range(3):
        w = rng.standard_normal(3)
        (g,) = zymo.gradient(Reverse, loss, w)
        np.testing.assert_allclose(g, fd_grad(loss, [w])[0], rtol=1e-6, atol=1e-8)
    g2, v = zymo.gradient(ReverseWithPrimal, loss, w)
    g2b, _ = zymo.gradient(ReverseWithPrimal, loss, w)
    np.testing.assert_allclose(g2[0], g)
    np.testing.assert_allclose(g2b[0], g2[0])
    assert v == pytest.approx(loss(w))


def test_floats_and_arrays_together():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    first = zymo.gradient(Reverse, pair, x, y, 1.5)
    again = zymo.gradient(Reverse, pair, x + 1.0, y, 0.5)
    ref = _full(pair, x + 1.0, y, 0.5)
    for a, b in zip(again, ref):
        np.testing.assert_allclose(a, b)
    assert again[2] == pytest.approx(np.sum((x + 1.0) * y))
    assert first[0] is not again[0]  # fresh shadows per call


def test_what_the_checks_do_not_admit_takes_the_full_path():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(4)
    zymo.gradient(Reverse, pair, x, x.copy(), 1.0)
    # the same array twice: aliasing the recorded program did not assume
    g = zymo.gradient(Reverse, pair, x, x, 1.0)
    ref = _full(pair, x, x, 1.0)
    for a, b in zip(g, ref):
        np.testing.assert_allclose(a, b)
    # float32 and 2-d arrays: other types
    zymo.gradient(Reverse, pair, x, x.copy(), 1.0)
    g32 = zymo.gradient(Reverse, pair, x.astype(np.float32), x.astype(np.float32), 1.0)
    assert g32[0].dtype == np.float32
    m = rng.standard_normal((2, 3))
    g2d = zymo.gradient(Reverse, pair, m, m.copy(), 1.0)
    np.testing.assert_allclose(g2d[0], m * 1.0 + np.cos(m))


def test_a_rebound_global_is_read_again():
    global SCALE
    w = np.array([0.1, -0.2, 0.3])
    (g1,) = zymo.gradient(Reverse, loss, w)
    old = SCALE
    try:
        SCALE = 3.0  # a captured float is a parameter; the check sees the new object
        (g3,) = zymo.gradient(Reverse, loss, w)
    finally:
        SCALE = old
    np.testing.assert_allclose(g3, g1 * 1.5)
