"""Programs are cached; what they captured from Python is checked again at every call (helper 74
found five ways a later call reused a program, or the values it recorded, after that state had
changed: each gave the old call's numbers). Each case changes the state between calls and checks
the gradient against the current state, through the fast paths (`gradient`, `autodiff` on the
same arrays) and through a prepared `zymo.interface` operator."""
import numpy as np
import pytest

import zymo
from zymo import Active, Duplicated, Forward, Reverse

X = np.array([0.3, 0.7])


class _Params:
    pass


P = _Params()
P.a = 1.5
D = {"k": 4.0}


def _by_attribute(x):
    return np.sum(P.a * x ** 3)


def _by_item(x):
    return np.sum(D["k"] * x ** 2)


def _calls(f):
    dx = np.zeros_like(X)
    zymo.autodiff(Reverse, f, Active, Duplicated(X, dx))
    (t,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(X.copy(), np.ones_like(X)))
    return [zymo.gradient(Reverse, f, X)[0], dx, t]


def test_a_float_held_by_an_object_or_a_dict_is_read_at_every_call():
    """The fast paths reused the one-element array made of the float when the call was first
    recorded (`cache.TypedCall`, `TypedGradient`): a stale gradient, and a stale value."""
    for _ in range(3):
        _calls(_by_attribute)
        _calls(_by_item)
    P.a, D["k"] = -2.0, 0.5
    try:
        g, dx, t = _calls(_by_attribute)
        np.testing.assert_allclose(g, -6.0 * X ** 2)
        np.testing.assert_allclose(dx, -6.0 * X ** 2)
        assert t == pytest.approx(np.sum(-6.0 * X ** 2))
        g, dx, t = _calls(_by_item)
        np.testing.assert_allclose(g, X)
        np.testing.assert_allclose(dx, X)
    finally:
        P.a, D["k"] = 1.5, 4.0


class _State:
    pass


S = _State()
S.k = 1.0


def _doubling(x):
    S.k = S.k * 2.0
    return np.sum(S.k * x ** 2)


def test_a_float_the_function_writes_is_written_at_every_call():
    S.k = 1.0
    for k in range(1, 5):
        (g,) = zymo.gradient(Reverse, _doubling, X)
        assert S.k == 2.0 ** k
        np.testing.assert_allclose(g, 2.0 * S.k * X)


def _sin(x):
    return np.sin(x)


def _cube(x):
    return x ** 3


HELPER = _sin
MODE = "sin"


def _through_helper(x):
    return np.sum(HELPER(x))


def _by_mode(x):
    return np.sum(np.sin(x)) if MODE == "sin" else np.sum(x ** 2)


_ONES = np.array([1.0, 1.0])


def _with_defaults(x, k=2.0, w=_ONES):
    return np.sum(k * w * x ** 2)


def test_rebound_functions_strings_and_defaults_make_new_programs():
    """A global function, a string, a closure cell or `f.__defaults__` rebound: the old program
    was reused (only ints, bools, arrays and floats were checked again)."""
    global HELPER, MODE
    from zymo.interface import AutoZymo, gradient, prepare_gradient

    prep = prepare_gradient(_through_helper, AutoZymo(), X.copy())
    for f in (_through_helper, _by_mode, _with_defaults):
        zymo.gradient(Reverse, f, X)
        zymo.gradient(Reverse, f, X)
    HELPER, MODE = _cube, "square"
    saved = _with_defaults.__defaults__
    _with_defaults.__defaults__ = (5.0, np.array([1.0, 3.0]))
    try:
        np.testing.assert_allclose(zymo.gradient(Reverse, _through_helper, X)[0], 3.0 * X ** 2)
        np.testing.assert_allclose(gradient(_through_helper, AutoZymo(), X.copy(), prep=prep), 3.0 * X ** 2)
        np.testing.assert_allclose(zymo.gradient(Reverse, _by_mode, X)[0], 2.0 * X)
        np.testing.assert_allclose(zymo.gradient(Reverse, _with_defaults, X)[0], 10.0 * X * [1.0, 3.0])
    finally:
        HELPER, MODE = _sin, "sin"
        _with_defaults.__defaults__ = saved

    def make():
        fn = np.sin

        def inner(x):
            return np.sum(fn(x))

        def swap():
            nonlocal fn
            fn = np.cos
        return inner, swap
    inner, swap = make()
    np.testing.assert_allclose(zymo.gradient(Reverse, inner, X)[0], np.cos(X))
    swap()
    np.testing.assert_allclose(zymo.gradient(Reverse, inner, X)[0], -np.sin(X))


N64 = np.int64(3)
S32 = np.float32(2.0)


def _numpy_scalars(x):
    s = 0.0
    for i in range(N64):  # a NumPy int as a bound: a constant of the program, as an int is
        s += x[i] * x[i]
    return s + np.sum(S32 * x)


def test_numpy_scalars_captured_as_python_numbers_are():
    """A global `np.int64` bound or `np.float32` factor was refused ("expected a number or an
    array here", helper 74); a rebound one makes a new program."""
    global N64
    x = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(zymo.gradient(Reverse, _numpy_scalars, x)[0], [4.0, 6.0, 8.0, 2.0])
    N64 = np.int64(2)
    try:
        np.testing.assert_allclose(zymo.gradient(Reverse, _numpy_scalars, x)[0], [4.0, 6.0, 2.0, 2.0])
    finally:
        N64 = np.int64(3)


class _Scaled:
    def scaled(self, x):
        return 3.0 * x


_SCALER = _Scaled()


def _through_a_bound_method(x):
    return np.sum(_SCALER.scaled(x))


def _closure(a):
    def f(x):
        return np.sum(a * x ** 3)
    return f


def test_bound_methods_and_boxed_floats_keep_their_program():
    """A bound method is a new object at each lookup: checked by identity alone, every call made
    a new program (600x slower, helper 75); it is checked by its object and function. A captured
    float is boxed afresh at each call of the fast paths, which keep running (14x slower had they
    been skipped)."""
    from zymo import cache

    f = _closure(1.5)
    for g in (_through_a_bound_method, f, _by_attribute):
        zymo.gradient(Reverse, g, X)
        lowered = dict(cache.LOWERED)
        for _ in range(3):
            zymo.gradient(Reverse, g, X)
        assert all(cache.LOWERED.get(k) is v for k, v in lowered.items())  # nothing lowered again
        assert any(t.f is g for t in cache.TYPED.values())  # the fast path recorded
    np.testing.assert_allclose(zymo.gradient(Reverse, _through_a_bound_method, X)[0], [3.0, 3.0])
