"""`autodiff` called again with the very same objects replays the recorded program.

The replay must give the same derivatives as a fresh call: internal shadows are zeroed,
changed globals and different objects take the full path."""
import dataclasses

import numpy as np
import pytest

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse

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


def _sq_into(dst, x, w):
    for i in range(x.shape[0]):
        dst[i] = w * x[i] * x[i]
    return np.sum(dst)


def test_replay_check_refuses_any_other_object():
    """The replay check is written out per recorded call (`_Repeat._matcher`): each kind of
    argument (annotation type, value, shadow, plain value) must be the very same object."""
    from zymo import cache

    x, dst = np.array([1.0, 2.0]), np.zeros(2)
    dx, ddst = np.zeros(2), np.zeros(2)
    args = (Duplicated(dst, ddst), Duplicated(x, dx), 3.0)
    zymo.autodiff(Reverse, _sq_into, zymo.Active, *args)
    rep = cache.FAST[(_sq_into, Reverse, zymo.Active, None)]
    assert rep.matches(args) and rep.matches((Duplicated(dst, ddst), Duplicated(x, dx), args[2]))
    others = [
        (Duplicated(dst, ddst), Const(x), args[2]),                # another annotation
        (Duplicated(dst, ddst), Duplicated(x.copy(), dx), args[2]),  # another value
        (Duplicated(dst, ddst), Duplicated(x, dx.copy()), args[2]),  # another shadow
        (Duplicated(dst, ddst), Duplicated(x, dx), 4.0),           # another plain value
        (Duplicated(dst, ddst), Duplicated(x, dx)),                # fewer arguments
    ]
    for other in others:
        assert not rep.matches(other)      # the written-out check
        assert not rep._first_match(other)  # and the loop it replaced after the first match
    # and each of them computes its own derivative
    dx[:] = 0.0
    zymo.autodiff(Reverse, _sq_into, zymo.Active, Duplicated(dst, ddst), Duplicated(x, dx), 4.0)
    np.testing.assert_allclose(dx, 8.0 * x)


def test_replay_alternating_modes_keeps_each_entry():
    """The per-function shortcut to the last replayed entry must not mix modes."""
    def f(x):
        return np.sum(x * x * x)

    x = np.array([0.5, -1.5])
    tx, dx = np.array([1.0, 2.0]), np.zeros(2)
    fwd, rev = (Duplicated(x, tx),), (Duplicated(x, dx),)
    for _ in range(3):
        (t,) = zymo.autodiff(Forward, f, Duplicated, *fwd)
        assert abs(t - np.sum(3 * x * x * tx)) < 1e-13
        dx[:] = 0.0
        zymo.autodiff(Reverse, f, zymo.Active, *rev)
        np.testing.assert_allclose(dx, 3 * x * x)


def test_replay_of_a_list_argument_checks_its_length():
    def weighted(x, ws):
        s = 0.0
        for w in ws:
            s += w * x[0] * x[0]
        return s

    x, dx = np.array([3.0]), np.zeros(1)
    ws = [1.0, 2.0]
    args = (Duplicated(x, dx), Const(ws))
    zymo.autodiff(Reverse, weighted, zymo.Active, *args)
    assert dx[0] == 18.0
    ws.append(4.0)  # the same list object, one weight more: the full path again
    dx[:] = 0.0
    zymo.autodiff(Reverse, weighted, zymo.Active, *args)
    assert dx[0] == 42.0


def test_a_changed_backend_policy_is_not_replayed_past():
    """`set_numba` forgets recorded calls, including the per-function shortcut to the last one."""
    from zymo import cache
    from zymo.config import set_numba

    def cube_sum(x):
        return np.sum(x * x * x)

    x, dx = np.array([0.5, 1.5]), np.zeros(2)
    args = (Duplicated(x, dx),)
    try:
        set_numba("never")
        for _ in range(2):
            zymo.autodiff(Reverse, cube_sum, zymo.Active, *args)
        assert cache.LAST[cube_sum].comp.backend == "python"
        set_numba("always")
        dx[:] = 0.0
        zymo.autodiff(Reverse, cube_sum, zymo.Active, *args)
        assert cache.LAST[cube_sum].comp.backend != "python"
        np.testing.assert_allclose(dx, 3 * x * x)
    finally:
        set_numba(None)


@dataclasses.dataclass
class _Holder:
    a: np.ndarray


def _nested_record_loss(t):
    return np.sum(t[0][0].a ** 2)


def test_a_record_nested_two_tuples_deep_is_never_replayed():
    """A record's field may be rebound between calls; one inside a tuple inside a tuple used to
    be replayed with the old array (silently zero here)."""
    p = _Holder(np.ones(3))
    dp = zymo.make_zero(p)
    t, dt = ((p,),), ((dp,),)
    for _ in range(2):
        zymo.autodiff(Reverse, _nested_record_loss, Active, Duplicated(t, dt))
    p.a = np.full(3, 5.0)
    dp.a = np.zeros(3)
    zymo.autodiff(Reverse, _nested_record_loss, Active, Duplicated(t, dt))
    np.testing.assert_allclose(dp.a, np.full(3, 10.0))
