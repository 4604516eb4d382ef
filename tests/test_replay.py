"""`autodiff` called again with the very same objects replays the recorded program.

The replay must give the same derivatives as a fresh call: internal shadows are zeroed,
changed globals and different objects take the full path."""
import numpy as np
import pytest

import zymo
from zymo import Const, Duplicated, Forward, Reverse

buf = np.zeros(3)
SCALE = 2


def into_const_buffer(x, tmp):
    for i in range(3):
        tmp[i] = x[i] * x[i]
    return np.sum(tmp) * SCALE


def into_global_buffer(x):
    for i in range(3):
        buf[i] = x[i] * x[i]
    return np.sum(buf)


@pytest.mark.parametrize("fn, extra", [(into_const_buffer, (Const(np.zeros(3)),)), (into_global_buffer, ())])
def test_replay_with_internal_shadows_repeats_the_gradient(fn, extra):
    x = np.array([1.0, -2.0, 3.0])
    dx = np.zeros(3)
    args = (Duplicated(x, dx), *extra)
    expected = 2 * x * (SCALE if fn is into_const_buffer else 1)
    for _ in range(4):  # first call records, the others replay
        dx[:] = 0.0
        zymo.autodiff(Reverse, fn, zymo.Active, *args)
        np.testing.assert_allclose(dx, expected)
    # fresh annotation objects holding the same arrays replay too
    dx[:] = 0.0
    zymo.autodiff(Reverse, fn, zymo.Active, Duplicated(x, dx), *extra)
    np.testing.assert_allclose(dx, expected)


def test_replay_sees_a_changed_global_constant():
    global SCALE
    x = np.array([1.0, 2.0, 3.0])
    dx = np.zeros(3)
    tmp = Const(np.zeros(3))
    zymo.autodiff(Reverse, into_const_buffer, zymo.Active, Duplicated(x, dx), tmp)
    old = SCALE
    try:
        SCALE = 5
        dx[:] = 0.0
        zymo.autodiff(Reverse, into_const_buffer, zymo.Active, Duplicated(x, dx), tmp)
        np.testing.assert_allclose(dx, 10 * x)
    finally:
        SCALE = old


def test_replay_with_other_objects_and_aliasing_takes_the_full_path():
    def axpy(y, x):
        for i in range(y.shape[0]):
            y[i] = y[i] + 2.0 * x[i]
        return np.sum(y * y)

    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    dx, dy = np.zeros(2), np.zeros(2)
    zymo.autodiff(Reverse, axpy, zymo.Active, Duplicated(y, dy), Duplicated(x, dx))
    np.testing.assert_allclose(dx, 4 * (np.array([3.0, 4.0]) + 2 * x))
    # now the same array as both arguments: y[i] = 3 y[i], loss = 9 sum(y^2)
    z = np.array([1.0, 2.0])
    dz = np.zeros(2)
    zymo.autodiff(Reverse, axpy, zymo.Active, Duplicated(z, dz), Duplicated(z, dz))
    np.testing.assert_allclose(dz, 18 * np.array([1.0, 2.0]))


def test_forward_replay():
    def f(x):
        return np.sum(np.sin(x))

    x = np.array([0.1, 0.2])
    tx = np.array([1.0, -1.0])
    args = (Duplicated(x, tx),)
    first = zymo.autodiff(Forward, f, Duplicated, *args)
    again = zymo.autodiff(Forward, f, Duplicated, *args)
    assert first == again
    assert abs(first[0] - np.sum(np.cos(x) * tx)) < 1e-14
