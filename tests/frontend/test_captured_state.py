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


# -- helper 82: every capture is guarded (dict spreads, class attributes, tuples, modules) --------
#
# Each case changes what the function captured between calls and checks the cached gradient
# (`gradient`, and `autodiff` on the same arrays: the replay) against the expected numbers, against
# central differences and against a fresh computation after `cache_clear`; the old numbers differ.

def _fd(f, x, *rest):
    from helpers import fd_grad

    return fd_grad(lambda x: f(x, *rest), [x])[0]


def _check_now(f, x, want, *rest):
    """The cached gradient of `f` at `x` (`rest` Const) is `want`, central differences' and that of
    a fresh computation."""
    from zymo import Const

    consts = [Const(r) for r in rest]
    g = zymo.gradient(Reverse, f, x, *consts)[0]
    dx = np.zeros_like(x)
    zymo.autodiff(Reverse, f, Active, Duplicated(x, dx), *consts)
    zymo.cache.cache_clear()
    fresh = zymo.gradient(Reverse, f, x, *consts)[0]
    for got in (g, dx, fresh):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g, _fd(f, x, *rest), rtol=1e-6, atol=1e-8)


def _warm(f, x, *rest):
    from zymo import Const

    for _ in range(2):
        zymo.gradient(Reverse, f, x, *(Const(r) for r in rest))
        zymo.autodiff(Reverse, f, Active, Duplicated(x, np.zeros_like(x)), *(Const(r) for r in rest))


SPREAD = {"w": np.array([1.0, 2.0, 3.0]), "p": 2}
X3 = np.array([0.5, 1.5, 2.5])


def _spread_target(x, w, p=2, c=0.0):
    return np.sum(w * x ** p) + c * np.sum(x)


def _spread(x):
    return _spread_target(x, **SPREAD)


def test_a_dict_spread_into_a_call_is_read_at_every_call():
    """`g(x, **P)` with a global dict: each value was captured as it was (`lambda: v`), so a value
    rebound, an int that steers the lowering changed, or a key added or removed kept the first
    program (helper 82, H2)."""
    saved = dict(SPREAD)
    x = X3.copy()
    try:
        _warm(_spread, x)
        _check_now(_spread, x, SPREAD["w"] * 2 * x)
        _warm(_spread, x)
        SPREAD["w"] = np.array([10.0, 20.0, 30.0])
        _check_now(_spread, x, [10.0, 60.0, 150.0])
        _warm(_spread, x)
        SPREAD["p"] = 3
        _check_now(_spread, x, [7.5, 135.0, 562.5])
        _warm(_spread, x)
        SPREAD["c"] = 4.0  # a key added
        _check_now(_spread, x, [11.5, 139.0, 566.5])
        _warm(_spread, x)
        del SPREAD["p"]  # a key removed: the default p=2
        _check_now(_spread, x, [14.0, 64.0, 154.0])
    finally:
        SPREAD.clear()
        SPREAD.update(saved)


def _partial_target(x, w):
    return np.sum(w * np.sin(x))


PARTIAL = __import__("functools").partial(_partial_target, w=np.array([1.0, 2.0, 3.0]))


def _through_partial(x):
    return PARTIAL(x)


def test_a_partials_keywords_are_read_at_every_call():
    """`functools.partial(g, w=...)`: its `keywords` dict is mutable and was read once."""
    x = X3.copy()
    saved = PARTIAL.keywords["w"]
    try:
        _warm(_through_partial, x)
        PARTIAL.keywords["w"] = np.array([-1.0, 0.5, 4.0])
        _check_now(_through_partial, x, np.array([-1.0, 0.5, 4.0]) * np.cos(x))
    finally:
        PARTIAL.keywords["w"] = saved


class _Model:
    def __init__(self):
        self.w = np.array([1.0, 2.0, 3.0])

    def act(self, x):
        return np.sin(x)

    @property
    def ww(self):
        return self.w * 2.0

    @staticmethod
    def s(x):
        return x ** 2

    @classmethod
    def c(cls, x):
        return np.exp(x)


def _cos_act(self, x):
    return np.cos(x)


def _by_method(x, m):
    return np.sum(m.w * m.act(x))


def _by_property(x, m):
    return np.sum(m.ww * x)


def _by_static(x, m):
    return np.sum(m.w * m.s(x))


def _by_classmethod(x, m):
    return np.sum(m.w * m.c(x))


def test_a_patched_method_property_or_static_method_makes_a_new_program():
    """The methods, properties, static and class methods of an argument object's class were
    inlined with no check: `Model.act = other` kept the old derivative (helper 82, H3)."""
    x = np.array([0.3, 0.6, 0.9])
    w = np.array([1.0, 2.0, 3.0])
    saved = {k: _Model.__dict__[k] for k in ("act", "ww", "s", "c")}
    try:
        for f in (_by_method, _by_property, _by_static, _by_classmethod):
            _warm(f, x, _Model())
        _Model.act = _cos_act
        _check_now(_by_method, x, -w * np.sin(x), _Model())
        _Model.ww = property(lambda self: self.w * 3.0)
        _check_now(_by_property, x, 3.0 * w, _Model())
        _Model.s = staticmethod(lambda x: x ** 3)
        _check_now(_by_static, x, 3.0 * w * x ** 2, _Model())
        _Model.c = classmethod(lambda cls, x: np.sin(x))
        _check_now(_by_classmethod, x, w * np.cos(x), _Model())
        _warm(_by_method, x, _Model())
        _Model.act = staticmethod(_cos_act)  # the same function, now static: act(x) has no self
        with pytest.raises(zymo.errors.ZymoSourceError, match="missing required argument"):
            zymo.gradient(Reverse, _by_method, x, zymo.Const(_Model()))
    finally:
        for k, v in saved.items():
            setattr(_Model, k, v)
    _check_now(_by_method, x, w * np.cos(x), _Model())


class _SubModel(_Model):
    pass


def test_a_method_patched_on_a_base_class_makes_a_new_program():
    x = np.array([0.3, 0.6, 0.9])
    w = np.array([1.0, 2.0, 3.0])
    saved = _Model.__dict__["act"]
    try:
        _warm(_by_method, x, _SubModel())
        _Model.act = _cos_act
        _check_now(_by_method, x, -w * np.sin(x), _SubModel())
        _warm(_by_method, x, _SubModel())
        _SubModel.act = lambda self, x: x ** 2  # now the subclass's own
        _check_now(_by_method, x, 2.0 * w * x, _SubModel())
    finally:
        _Model.act = saved
        del _SubModel.act


T = (1.0, 2.0)
N = (2, 3)
WS = (np.array([1.0, 1.0, 1.0]),)


def _over_tuple(x):
    s = 0.0
    for c in T:
        s += c * np.sum(x * x)
    return s


def _tuple_length(x):
    return np.sum(x ** len(N)) * N[0]


def _over_arrays(x):
    s = 0.0
    for w in WS:
        s += np.sum(w * np.sin(x))
    return s


def test_a_global_tuple_rebound_to_a_longer_one_makes_a_new_program():
    """A global tuple was captured item by item and its length never checked again: `T = T + (3.0,)`
    kept the old derivative (helper 82, H4)."""
    global T, N, WS
    x = np.array([0.5, 1.0, 1.5])
    try:
        for f in (_over_tuple, _tuple_length, _over_arrays):
            _warm(f, x)
        T, N, WS = T + (3.0,), N + (4,), WS + (np.array([2.0, 2.0, 2.0]),)
        _check_now(_over_tuple, x, 12.0 * x)
        _check_now(_tuple_length, x, 6.0 * x ** 2)
        _check_now(_over_arrays, x, 3.0 * np.cos(x))
        for f in (_over_tuple, _tuple_length, _over_arrays):
            _warm(f, x)
        T, N, WS = T[:1], N[:2], WS[:1]  # shorter again
        _check_now(_over_tuple, x, 2.0 * x)
        _check_now(_tuple_length, x, 4.0 * x)
        _check_now(_over_arrays, x, np.cos(x))
    finally:
        T, N, WS = (1.0, 2.0), (2, 3), (np.array([1.0, 1.0, 1.0]),)


def _mod(name, act):
    import types

    m = types.ModuleType(name)
    m.act = act
    return m


def _cos(t):
    return np.cos(t)


MOD_A = _mod("zymo_test_mod_a", _sin)
MOD_B = _mod("zymo_test_mod_b", _cos)
MOD = MOD_A


def _through_module(x):
    return np.sum(MOD.act(x))


def test_a_global_rebound_to_another_module_makes_a_new_program():
    """A global bound to a module was not checked again, and `M.act` was checked against the old
    module (helper 82, H5)."""
    global MOD
    from zymo.interface import AutoZymo, gradient, prepare_gradient

    x = np.array([0.3, 0.6, 0.9])
    try:
        _warm(_through_module, x)
        _check_now(_through_module, x, np.cos(x))
        _warm(_through_module, x)
        prep = prepare_gradient(_through_module, AutoZymo(), x.copy())
        MOD = MOD_B
        np.testing.assert_allclose(gradient(_through_module, AutoZymo(), x.copy(), prep=prep), -np.sin(x))
        _check_now(_through_module, x, -np.sin(x))
    finally:
        MOD = MOD_A


def test_guarded_captures_keep_their_program():
    """The checks pass while nothing changed: no call lowers again (a class method is a new bound
    method at each lookup, a property the same object), and each capture is checked once however
    often the function reads it."""
    from zymo import Const, cache

    x = np.array([0.3, 0.6, 0.9])
    cases = [(_spread, ()), (_through_partial, ()), (_over_tuple, ()), (_through_module, ()),
             (_by_method, (_Model(),)), (_by_property, (_Model(),)), (_by_static, (_Model(),)),
             (_by_classmethod, (_Model(),))]
    for f, rest in cases:
        zymo.gradient(Reverse, f, x, *(Const(r) for r in rest))
        lowered = dict(cache.LOWERED)
        for _ in range(3):
            zymo.gradient(Reverse, f, x, *(Const(r) for r in rest))
        assert all(cache.LOWERED.get(k) is v for k, v in lowered.items()), f.__name__
        lw = next(v for k, v in cache.LOWERED.items() if k[0] is f)
        assert lw.still_valid()

    def many(x):
        return np.sum(np.sin(x)) + np.sum(np.sin(x)) * np.sum(np.sin(x)) + np.sum(T[0] * x) + np.sum(T[0] * x)
    zymo.gradient(Reverse, many, x)
    lw = next(v for k, v in cache.LOWERED.items() if k[0] is many)
    # np (the module), np.sum, np.sin, T (its length), T's two floats: one check each
    assert len(lw.ir.attrs["frozen"]) + sum(len(w) for _, _, w in lw.captured) == 6


def _helper_a(x):
    return np.sin(x)


def _helper_b(x):
    return 3.0 * np.cos(x)


def _through_helper_a(x):
    return np.sum(_helper_a(x))


def test_a_helper_or_method_whose_code_is_replaced_makes_a_new_program():
    """`helper.__code__ = other.__code__` keeps the function object: checked by identity alone, the
    old program was reused (hunt 82's t10 swapped a differentiated function's own code: that one is
    the cache's key, see docs/frontend.md)."""
    x = np.array([0.3, 0.6, 0.9])
    w = np.array([1.0, 2.0, 3.0])
    code, mcode = _helper_a.__code__, _Model.act.__code__
    try:
        _warm(_through_helper_a, x)
        _warm(_by_method, x, _Model())
        _helper_a.__code__ = _helper_b.__code__
        _Model.act.__code__ = _cos_act.__code__
        _check_now(_through_helper_a, x, -3.0 * np.sin(x))
        _check_now(_by_method, x, -w * np.sin(x), _Model())
    finally:
        _helper_a.__code__, _Model.act.__code__ = code, mcode


RESHAPED = np.array([1.0, 2.0, 3.0])


def _through_reshaped(x):
    s = 0.0
    for i in range(3):
        s += np.sum(RESHAPED[i] * x[i] ** 2)
    return s


def test_a_captured_array_given_another_rank_in_place_makes_a_new_program():
    """`A.shape = (3, 1)` keeps the array object, so the identity check passed and the program
    written for a vector ran on a matrix (hunt 82's t37: a broadcast error); the rank and dtype of a
    captured array are re-checked with it."""
    x = np.array([0.5, 1.0, 1.5])
    try:
        _warm(_through_reshaped, x)
        RESHAPED.shape = (3, 1)
        _check_now(_through_reshaped, x, 2.0 * np.array([1.0, 2.0, 3.0]) * x)
    finally:
        RESHAPED.shape = (3,)
