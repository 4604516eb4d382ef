"""The everyday call's fast paths (issue 32, item 5) and everything that must make them fall back.

Four fast paths: `zymo.gradient`'s typed call (`cache.TypedGradient`), `autodiff`'s replay of
the very same objects (`cache.Repeat`, several per function), `autodiff` on new objects of the
recorded types (`cache.TypedCall`) and a prepared
`zymo.interface` operator, which holds its own replay entry (`Repeat.replay`). An unchanged
call must not reach the full path (`cache.prepare` is replaced by a function that fails);
a new shape or dtype, a global rebound to another array, a changed closure cell, another
context array and a changed setting must give the derivative of the call as it now is.
Every gradient is compared with central differences and with forward mode (lives next to
`test_replay.py` and `test_typed_gradient.py`, the older tests of the same paths)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse, cache, config
from zymo.interface import AutoZymo, Constant, PreparationMismatch, gradient, prepare_gradient

_rng = np.random.default_rng(7)
X_DATA = _rng.standard_normal((20, 3))
Y_DATA = np.sign(_rng.standard_normal(20))


def nll(w):
    z = X_DATA @ w
    return np.sum(np.logaddexp(0.0, -Y_DATA * z))


def wave(w):
    return np.sum(np.sin(w) * w)


def weighted(w, data):
    return np.sum(np.logaddexp(0.0, data @ w))


def closure():
    data = np.array([[1.0, -2.0, 0.5], [0.3, 0.2, -1.0]])

    def f(w):
        return np.sum(np.logaddexp(0.0, data @ w))

    def set_data(d):
        nonlocal data
        data = d
    return f, set_data


def _check(f, w, g, *rest):
    np.testing.assert_allclose(g, fd_grad(f, [w, *rest])[0], rtol=1e-6, atol=1e-8)
    (fwd,) = zymo.gradient(Forward, f, w, *(Const(r) for r in rest))[:1]
    np.testing.assert_allclose(g, fwd, rtol=1e-12, atol=1e-14)


def _no_full_path(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the full path ran")
    monkeypatch.setattr(cache, "prepare", boom)


class Replayer:
    """`autodiff(Reverse, f, Active, Duplicated(w, dw))` on the same w and dw every call."""

    def __init__(self, f, w):
        self.f, self.w, self.dw = f, w.copy(), np.zeros_like(w)

    def __call__(self, w):
        if w.shape != self.w.shape or w.dtype != self.w.dtype:
            self.w, self.dw = w.copy(), np.zeros_like(w)
        self.w[...] = w
        self.dw.fill(0.0)
        zymo.autodiff(Reverse, self.f, Active, Duplicated(self.w, self.dw))
        return self.dw.copy()


class Prepared:
    """A prepared `zymo.interface.gradient`, prepared again for a new shape or dtype."""

    def __init__(self, f, w):
        self.f, self.b = f, AutoZymo()
        self.prep = prepare_gradient(f, self.b, w)

    def __call__(self, w):
        try:
            return gradient(self.f, self.b, w, prep=self.prep)
        except PreparationMismatch:
            self.prep = prepare_gradient(self.f, self.b, w)
            return gradient(self.f, self.b, w, prep=self.prep)


def _typed_call(f, w):
    """`autodiff` on new objects every call (`cache.TypedCall`)."""
    def call(v):
        v, dv = v.copy(), np.zeros_like(v)
        zymo.autodiff(Reverse, f, Active, Duplicated(v, dv))
        return dv
    return call


PATHS = {
    "gradient": lambda f, w: (lambda v: zymo.gradient(Reverse, f, v)[0]),
    "replay": Replayer,
    "typed autodiff": _typed_call,
    "interface": Prepared,
}


@pytest.fixture(autouse=True)
def _fresh():
    cache.cache_clear()
    yield
    cache.cache_clear()


@pytest.mark.parametrize("path", PATHS)
def test_an_unchanged_call_takes_the_fast_path(path, monkeypatch):
    w = np.array([0.3, -0.2, 0.1])
    call = PATHS[path](nll, w)
    expected = call(w)
    call(w)  # recorded now (the typed gradient after its first full call, a replay after its first match)
    _check(nll, w, expected)
    _no_full_path(monkeypatch)
    for _ in range(3):
        np.testing.assert_array_equal(call(w), expected)
    np.testing.assert_array_equal(call(w.copy()), expected)  # a new array of the same type


@pytest.mark.parametrize("path", PATHS)
def test_new_shapes_and_dtypes_take_the_full_path(path):
    w = np.array([0.3, -0.2, 0.1])
    call = PATHS[path](wave, w)
    _check(wave, w, call(w))
    call(w)
    for v in (np.linspace(-1.0, 1.0, 5), np.array([[0.1, 0.2], [0.3, -0.4]]), np.asfortranarray(np.ones((2, 3))),
              np.linspace(0.0, 1.0, 8)[::2]):
        g = call(v)
        assert g.shape == v.shape
        _check(wave, v, g)
    v32 = np.array([0.5, -1.0], dtype=np.float32)
    g32 = call(v32)
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, np.cos(v32) * v32 + np.sin(v32), rtol=1e-5)


@pytest.mark.parametrize("path", PATHS)
def test_a_rebound_global_and_a_global_changed_in_place(path):
    global X_DATA
    w = np.array([0.3, -0.2, 0.1])
    call = PATHS[path](nll, w)
    call(w)
    call(w)
    old = X_DATA
    try:
        X_DATA = old * 3.0 + 1.0  # another array bound to the name
        g = call(w)
        _check(nll, w, g)
        np.testing.assert_allclose(g, _grad_with(X_DATA, w), rtol=1e-12)
        assert not np.allclose(g, _grad_with(old, w))
        X_DATA[0, 0] = 10.0  # the same array, new values: read at call time
        _check(nll, w, call(w))
        X_DATA = np.ones((20, 4))[:, :3]  # a strided view
        _check(nll, w, call(w))
    finally:
        X_DATA = old
    _check(nll, w, call(w))


def _grad_with(data, w):
    z = -Y_DATA * (data @ w)
    return data.T @ (-Y_DATA / (1.0 + np.exp(-z)))


@pytest.mark.parametrize("path", PATHS)
def test_a_changed_closure_cell(path):
    f, set_data = closure()
    w = np.array([0.3, -0.2, 0.1])
    call = PATHS[path](f, w)
    call(w)
    call(w)
    set_data(np.array([[2.0, 1.0, -0.5], [0.1, 0.7, 1.5]]))
    g = call(w)
    _check(f, w, g)
    np.testing.assert_allclose(g, np.array([[2.0, 1.0, -0.5], [0.1, 0.7, 1.5]]).T @ (
        1.0 / (1.0 + np.exp(-np.array([[2.0, 1.0, -0.5], [0.1, 0.7, 1.5]]) @ w))))


def test_a_prepared_interface_call_with_another_context_array():
    w = np.array([0.3, -0.2, 0.1])
    b = AutoZymo()
    d1, d2 = np.arange(6.0).reshape(2, 3) / 5, -np.ones((2, 3))
    prep = prepare_gradient(weighted, b, w, Constant(d1))
    for d in (d1, d1, d2, d1, d2.copy()):
        g = gradient(weighted, b, w, Constant(d), prep=prep)
        _check(weighted, w, g, d)
    with pytest.raises(PreparationMismatch):
        gradient(weighted, b, w, Constant(np.ones((3, 3))), prep=prep)


@pytest.mark.parametrize("path", PATHS)
def test_setting_changes_are_not_replayed_past(path):
    w = np.array([0.3, -0.2, 0.1])
    call = PATHS[path](nll, w)
    call(w)
    call(w)
    try:
        config.set_numba("always")
        g = call(w)
        # the program that ran: the last recorded one (the prepared operator's own entry)
        ran = {"interface": lambda: call.prep.engine.held[(Reverse, Active)],
               "typed autodiff": lambda: cache.TYPED_CALLS[(nll, Reverse, Active, None)]}.get(
                   path, lambda: cache.LAST[nll])
        assert ran().comp.backend != "python"
        _check(nll, w, g)
        config.set_numba(None)
        config.set_strong_zero(True)
        _check(nll, w, call(w))
        config.set_strong_zero(None)
        config.set_memory_limit(1 << 20)
        _check(nll, w, call(w))
        config.set_memory_limit(None)
        config.set_numba("kernels")
        call(w)
        exact = ran().comp
        config.set_reassociate(True)  # sums in any order: another program, not the exact one replayed
        _check(nll, w, call(w))
        assert ran().comp is not exact
    finally:
        config.set_strong_zero(None)
        config.set_memory_limit(None)
        config.set_numba(None)
        config.set_reassociate(None)
    _check(nll, w, call(w))


def test_a_return_activity_given_as_an_array_is_a_usage_error():
    w = np.array([0.3, -0.2, 0.1])
    with pytest.raises(zymo.ZymoUsageError, match="return activity .* not an array of shape \\(3,\\)"):
        zymo.autodiff(Reverse, nll, w)
    with pytest.raises(zymo.ZymoUsageError, match="not 'Active'"):
        zymo.autodiff(Reverse, nll, "Active", Duplicated(w, np.zeros(3)))


def test_the_held_entry_checks_the_generation_and_the_memory_limit():
    w = np.array([0.3, -0.2, 0.1])
    b = AutoZymo()
    prep = prepare_gradient(nll, b, w)
    gradient(nll, b, w, prep=prep)
    (rep,) = prep.engine.held.values()
    args = (prep.engine.xa,)
    assert rep.replay(args) is not None
    try:
        config.set_memory_limit(1 << 20)
        assert rep.replay(args) is None
    finally:
        config.set_memory_limit(None)
    config.set_strong_zero(None)  # any setting: the recorded calls are forgotten
    assert rep.replay(args) is None


def test_prepared_results_are_fresh_arrays():
    w = np.array([0.3, -0.2, 0.1])
    b = AutoZymo()
    prep = prepare_gradient(nll, b, w)
    g1 = gradient(nll, b, w, prep=prep)
    g2 = gradient(nll, b, w * 2.0, prep=prep)
    assert g1 is not g2 and not np.shares_memory(g1, g2)
    _check(nll, w, g1)
    _check(nll, w * 2.0, g2)
    out = np.empty(3)
    assert gradient(nll, b, w, prep=prep, out=out) is out
    np.testing.assert_array_equal(out, g1)


def test_replays_of_two_callers_of_one_function_are_both_kept(monkeypatch):
    """A direct `autodiff` replay and a prepared operator on the same function used to evict
    each other's entry (one per function), so both took the full path every call."""
    w, dw = np.array([0.3, -0.2, 0.1]), np.zeros(3)
    b = AutoZymo()
    prep = prepare_gradient(nll, b, w)
    for _ in range(2):
        zymo.autodiff(Reverse, nll, Active, Duplicated(w, dw))
        gradient(nll, b, w, prep=prep)
    _no_full_path(monkeypatch)
    monkeypatch.setattr(cache.TypedCall, "run", lambda self, args: None)  # replays only
    for _ in range(3):
        dw.fill(0.0)
        zymo.autodiff(Reverse, nll, Active, Duplicated(w, dw))
        np.testing.assert_array_equal(gradient(nll, b, w, prep=prep), dw)
    monkeypatch.undo()
    _check(nll, w, dw)

def mix(x, A, s):
    return np.sum(np.tanh(A @ x)) * s + s * s


def test_typed_autodiff_with_const_and_active_arguments(monkeypatch):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 3))

    def call(x, s, mode=Reverse):
        dx = np.zeros_like(x)
        derivs, *value = zymo.autodiff(mode, mix, Active, Duplicated(x.copy(), dx), Const(A.copy()), Active(s))
        return dx, derivs[2], value
    x = rng.standard_normal(3)
    call(x, 0.5)
    ref = [call(x + k, 0.5 * k) for k in range(3)]
    call(x + 1.0, 0.5, zymo.ReverseWithPrimal)
    _no_full_path(monkeypatch)
    for k in range(3):
        dx, ds, _ = call(x + k, 0.5 * k)
        np.testing.assert_array_equal(dx, ref[k][0])
        assert ds == ref[k][1]
    dx, ds, value = call(x, 0.5, zymo.ReverseWithPrimal)
    monkeypatch.undo()
    assert value[0] == pytest.approx(mix(x, A, 0.5))
    gx, _, gs = fd_grad(mix, [x, A, 0.5])
    np.testing.assert_allclose(dx, gx, rtol=1e-6, atol=1e-8)
    assert ds == pytest.approx(gs, rel=1e-6)
    assert isinstance(ds, float)


def test_typed_autodiff_forward_mode(monkeypatch):
    x, t = np.array([0.3, -0.2, 0.1]), np.array([1.0, 2.0, -1.0])
    zymo.autodiff(Forward, nll, Duplicated, Duplicated(x.copy(), t.copy()))
    _no_full_path(monkeypatch)
    (tan,) = zymo.autodiff(Forward, nll, Duplicated, Duplicated(x.copy(), t.copy()))
    monkeypatch.undo()
    assert tan == pytest.approx(float(_grad_with(X_DATA, x) @ t), rel=1e-12)


def test_typed_autodiff_still_refuses_misused_shadows():
    x = np.array([0.3, -0.2, 0.1])
    zymo.autodiff(Reverse, nll, Active, Duplicated(x.copy(), np.zeros(3)))
    y = x.copy()
    ro = np.zeros(3)
    ro.flags.writeable = False
    for bad in (Duplicated(y, np.zeros(4)), Duplicated(y, np.zeros(3, dtype=np.float32)), Duplicated(y, y[::-1]),
                Duplicated(y, ro), Active(y)):
        with pytest.raises(zymo.ZymoUsageError):
            zymo.autodiff(Reverse, nll, Active, bad)


def test_typed_autodiff_with_aliased_arguments_takes_the_full_path():
    def axpy(y, x):
        y[:] = y + 2.0 * x
        return np.sum(y * y)

    def call(y, x):
        dy, dx = np.zeros_like(y), np.zeros_like(x)
        zymo.autodiff(Reverse, axpy, Active, Duplicated(y, dy), Duplicated(x, dx))
        return dy, dx
    for _ in range(2):
        _, dx = call(np.array([3.0, 4.0]), np.array([1.0, 2.0]))
        np.testing.assert_allclose(dx, 4 * (np.array([3.0, 4.0]) + 2 * np.array([1.0, 2.0])))
    z = np.array([1.0, 2.0])
    dz = np.zeros(2)
    zymo.autodiff(Reverse, axpy, Active, Duplicated(z, dz), Duplicated(z, dz))  # y = 3 y: loss 9 sum(y^2)
    np.testing.assert_allclose(dz, 18 * np.array([1.0, 2.0]))


def into_buffer(x, tmp):
    for i in range(3):
        tmp[i] = x[i] * x[i]
    return np.sum(tmp) * 2.0


@pytest.mark.parametrize("as_const", [True, False])
def test_typed_autodiff_with_a_const_buffer_receiving_active_data(as_const):
    """Const memory written with active data gets an internal shadow: calls on new objects
    must allocate it (the full path), not run the program without it."""
    for k in range(3):
        x, dx, tmp = np.array([1.0, -2.0, 3.0]) + k, np.zeros(3), np.zeros(3)
        zymo.autodiff(Reverse, into_buffer, Active, Duplicated(x, dx), Const(tmp) if as_const else tmp)
        np.testing.assert_allclose(dx, 4.0 * x)


def test_the_same_objects_twice_on_the_typed_path_become_a_replay(monkeypatch):
    f, set_data = closure()
    zymo.autodiff(Reverse, f, Active, Duplicated(np.ones(3), np.zeros(3)))  # records the typed call
    w, dw = np.array([0.3, -0.2, 0.1]), np.zeros(3)
    for _ in range(2):  # typed, then typed with the very same objects: recorded as a replay
        dw.fill(0.0)
        zymo.autodiff(Reverse, f, Active, Duplicated(w, dw))
    assert any(rep.flat[0] is w and rep.flat[-2] is dw for rep in cache.FAST[(f, Reverse, Active, None)])
    expected = dw.copy()
    _check(f, w, expected)
    monkeypatch.setattr(cache.TypedCall, "run", lambda self, args: None)  # replays only
    _no_full_path(monkeypatch)
    dw.fill(0.0)
    zymo.autodiff(Reverse, f, Active, Duplicated(w, dw))
    np.testing.assert_array_equal(dw, expected)
    monkeypatch.undo()
    set_data(np.array([[2.0, 1.0, -0.5], [0.1, 0.7, 1.5]]))  # the replay must see the new cell
    dw.fill(0.0)
    zymo.autodiff(Reverse, f, Active, Duplicated(w, dw))
    _check(f, w, dw)
