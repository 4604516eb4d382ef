"""What a cached derivative must not reuse (helper 83's hunt): each case changes, between
two calls, something a cache could miss, and checks the second call against central
differences and against a fresh computation (`zymo.cache.cache_clear()` first), in
forward and reverse mode where both apply."""
import gc
import weakref

import numpy as np
import pytest

import zymo
from zymo import Active, Duplicated, Forward, Reverse, ReverseSplitWithPrimal


def central(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def fresh_gradient(mode, f, *args):
    zymo.cache.cache_clear()
    return zymo.gradient(mode, f, *args)


def make_scaled_sine(c):
    def act(t):
        return np.sin(t) * c
    return act


def loss_of(x, act):
    return np.sum(act(x))


@pytest.mark.parametrize("mode", [Reverse, Forward])
def test_a_new_closure_passed_as_an_argument_is_never_an_old_ones_program(mode):
    # keyed by id() alone, a closure made anew for each call found the freed one's entry
    # (its address) and read the old closure's captured `c`: 98 of 100 gradients were wrong
    x = np.array([0.1, 0.2, 0.3])
    for c in (1.0, 2.0, 3.0, 4.0, -5.0):
        act = make_scaled_sine(c)
        (g, _) = zymo.gradient(mode, loss_of, x, act)
        np.testing.assert_allclose(g, central(lambda z, act=act: loss_of(z, act), x), rtol=1e-7)
        np.testing.assert_allclose(g, np.cos(x) * c, rtol=1e-12)
        del act  # freed: the next closure may take its address


def rows_loss(rows):
    s = 0.0
    for k in range(len(rows)):
        s += rows[k][0] * rows[k][0] * rows[k][1]
    return s


def test_a_list_of_tuples_is_read_afresh_at_each_call():
    # a list of tuples of floats is copied for the call (`data.Rows`): a replay ran on that
    # copy (a new row unseen) and wrote no shadow back
    rows = [(1.0, 2.0), (3.0, 4.0)]
    drows = [(0.0, 0.0), (0.0, 0.0)]
    for call in range(4):
        if call == 2:
            rows[0] = (5.0, 6.0)  # the same list object, a new row
        drows[:] = [(0.0, 0.0), (0.0, 0.0)]
        zymo.autodiff(Reverse, rows_loss, Active, Duplicated(rows, drows))
        assert drows == [(2 * a * b, a * a) for a, b in rows]
    flat = np.array(rows).ravel()
    fd = central(lambda z: rows_loss([tuple(z[:2]), tuple(z[2:])]), flat)
    np.testing.assert_allclose(np.array(drows).ravel(), fd, rtol=1e-7)


def test_split_mode_thunks_read_a_list_of_tuples_afresh():
    rows = [(1.0, 2.0), (3.0, 4.0)]
    drows = [(0.0, 0.0), (0.0, 0.0)]
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, rows_loss, Active, Duplicated(rows, drows))
    for call in range(3):
        if call == 2:
            rows[0] = (5.0, 6.0)
        drows[:] = [(0.0, 0.0), (0.0, 0.0)]
        tape, y = fwd(Duplicated(rows, drows))
        rev(Duplicated(rows, drows), 1.0, tape)
        assert y == rows_loss(rows)
        assert drows == [(2 * a * b, a * a) for a, b in rows]


G = np.array([1.0, 2.0, 3.0])


def scale_then_weigh(x):
    x *= 2.0
    return np.sum(x * G)


def test_an_argument_that_is_a_captured_global_is_refused_after_a_recorded_call():
    # the recorded fast paths checked overlap among the arguments only: `gradient(f, G)` ran
    # the program recorded for another array, where the full path refuses
    zymo.gradient(Reverse, scale_then_weigh, np.array([0.5, 1.5, 2.5]))
    with pytest.raises(zymo.ZymoUsageError, match="shares memory"):
        zymo.gradient(Reverse, scale_then_weigh, G)
    np.testing.assert_array_equal(G, [1.0, 2.0, 3.0])  # refused before running
    a, da = np.array([0.5, 1.5, 2.5]), np.zeros(3)
    zymo.autodiff(Reverse, scale_then_weigh, Active, Duplicated(a, da))
    with pytest.raises(zymo.ZymoUsageError, match="shares memory"):
        zymo.autodiff(Reverse, scale_then_weigh, Active, Duplicated(G, np.zeros(3)))
    # and the recorded path still serves other arrays
    x = np.array([1.0, -1.0, 0.5])
    (g,) = zymo.gradient(Reverse, scale_then_weigh, x.copy())
    np.testing.assert_allclose(g, central(lambda z: scale_then_weigh(z.copy()), x), rtol=1e-7)
    np.testing.assert_allclose(g, 2 * G)


def make_cell():
    c = 2.0

    def f(x):
        return np.sum(x * c)

    def set_c(v):
        nonlocal c
        c = v

    return f, set_c, lambda: c


@pytest.mark.parametrize("mode", [Reverse, Forward])
def test_a_closure_float_rebound_to_an_int_or_an_array_makes_another_program(mode):
    f, set_c, get_c = make_cell()
    x = np.array([0.5, 1.5, 2.5])
    np.testing.assert_allclose(zymo.gradient(mode, f, x)[0], [2.0, 2.0, 2.0])
    set_c(4)  # an int: not boxed and written back as 4.0
    (g,) = zymo.gradient(mode, f, x)
    np.testing.assert_allclose(g, central(f, x), rtol=1e-7)
    np.testing.assert_allclose(g, [4.0, 4.0, 4.0])
    assert type(get_c()) is int
    set_c(np.array([1.0, 2.0, 3.0]))  # an array: was a raw TypeError
    (g,) = zymo.gradient(mode, f, x)
    np.testing.assert_allclose(g, central(f, x), rtol=1e-7)
    np.testing.assert_allclose(g, fresh_gradient(mode, f, x)[0])
    set_c(np.float32(3.0))  # another float type
    np.testing.assert_allclose(zymo.gradient(mode, f, x)[0], [3.0, 3.0, 3.0])
    set_c(0.5)
    np.testing.assert_allclose(zymo.gradient(mode, f, x)[0], [0.5, 0.5, 0.5])


def test_a_custom_rule_given_other_reads_drops_the_programs_that_call_it():
    @zymo.custom_rule
    def sq(x):
        return x * x

    sq.defjvp(lambda ans, x, t: 2 * x * t)
    sq.defvjp(lambda g, ans, x: (2 * g * x,), reads=("x",))

    def f(x):
        return np.sum(sq(x))

    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(zymo.gradient(Reverse, f, x)[0], 2 * x)
    # the vjp now reads `ans`, which the cached program passed as None (a raw TypeError)
    sq.defvjp(lambda g, ans, x: (2 * g * np.sqrt(ans),), reads=("ans",))
    for arg in (x, x.copy()):
        (g,) = zymo.gradient(Reverse, f, arg)
        np.testing.assert_allclose(g, central(f, x), rtol=1e-7)
        np.testing.assert_allclose(g, zymo.gradient(Forward, f, arg)[0])


def sine_times_rolled(x):
    return np.sum(np.sin(x) * np.roll(x, 1)) + np.sum(x * np.roll(x, -2, 0))


def rolled_by_a_tuple(x):
    return np.sum(x * np.roll(x, (2,), (0,)))


def test_second_order_through_roll():
    # np.roll's adjoint negates its shift with a runtime helper, which second order lowered
    # as Python and refused (`isinstance`)
    x = np.array([0.1, 0.2, 0.3, 0.4, 0.7])
    h = zymo.hessian(sine_times_rolled, x)
    fd = np.stack([central(lambda z, i=i: zymo.gradient(Reverse, sine_times_rolled, z)[0][i], x)
                   for i in range(x.size)])
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-8)
    v = np.array([1.0, -2.0, 0.5, 0.0, 3.0])
    np.testing.assert_allclose(zymo.hvp(sine_times_rolled, x, v), h @ v, rtol=1e-10, atol=1e-12)
    assert np.abs(h).max() > 0.5
    # a tuple of shifts: refused with the reason (the IR has no tuple-of-ints result)
    with pytest.raises(zymo.errors.UnsupportedCall, match="tuple of shifts"):
        zymo.hessian(rolled_by_a_tuple, x)


class Inner:
    k = 2.0


class Holder:
    pass


class WithProperty:
    def __init__(self):
        self._w = 4.0

    @property
    def w(self):
        return self._w


class Slotted:
    __slots__ = ("own",)
    k = 3.0

    def __init__(self):
        self.own = 0.5


HOLDER = Holder()
HOLDER.inner = Inner()
PROPERTIED = WithProperty()
SLOTTED = Slotted()


def weighted_by_class_attributes(x):
    return HOLDER.inner.k * np.sum(x * x) + PROPERTIED.w * x[0] + SLOTTED.k * SLOTTED.own * np.sum(x)


@pytest.mark.parametrize("mode", [Reverse, Forward])
def test_class_attributes_read_through_a_global_object_are_not_written_onto_it(mode):
    # a float attribute found on the class (or a property) was boxed as the object's own field and
    # written back after the call: the object got an attribute shadowing the class's, so a later
    # `Inner.k = 7.0` changed neither the function nor its gradient (and a property, or a read-only
    # class attribute of a __slots__ class, raised a raw AttributeError)
    x = np.array([1.0, 2.0, 3.0])
    try:
        (g,) = zymo.gradient(mode, weighted_by_class_attributes, x)
        np.testing.assert_allclose(g, central(weighted_by_class_attributes, x), rtol=1e-7)
        np.testing.assert_allclose(g, 4.0 * x + [4.0, 0.0, 0.0] + 1.5)
        assert vars(HOLDER.inner) == {} and vars(PROPERTIED) == {"_w": 4.0} and SLOTTED.own == 0.5
        Inner.k = 7.0
        (g,) = zymo.gradient(mode, weighted_by_class_attributes, x)
        np.testing.assert_allclose(g, 14.0 * x + [4.0, 0.0, 0.0] + 1.5)
        np.testing.assert_allclose(g, fresh_gradient(mode, weighted_by_class_attributes, x)[0])
    finally:
        Inner.k = 2.0


def sine_loss_and_cubes():
    def loss(x):
        return np.sum(np.sin(x) * x)

    def cubes(x):
        return np.sum(x ** 3 - x)

    return loss, cubes


def autodiff_gradient(mode, f, x):
    """The gradient of `f` at `x` by `autodiff`: one reverse sweep, or one tangent per element."""
    if not mode.forward:
        dx = np.zeros_like(x)
        zymo.autodiff(mode, f, Active, Duplicated(x, dx))
        return dx
    return np.array([zymo.autodiff(mode, f, Duplicated, Duplicated(x, e))[0] for e in np.eye(x.size)])


@pytest.mark.parametrize("mode", [Reverse, Forward])
def test_the_functions_own_code_replaced_in_place_makes_a_new_program(mode):
    # every cache keyed on the function object: `f.__code__ = g.__code__` kept f's old derivative
    # (the lowered IR, gradient's recorded call, autodiff's replays of the same and of new objects)
    loss, cubes = sine_loss_and_cubes()
    x = np.array([0.1, 0.2, 0.3])
    for arg in (x, x.copy(), x.copy()):  # the full path, then the recorded fast paths
        np.testing.assert_allclose(zymo.gradient(mode, loss, arg)[0], np.sin(x) + x * np.cos(x), rtol=1e-12)
        np.testing.assert_allclose(autodiff_gradient(mode, loss, arg), np.sin(x) + x * np.cos(x), rtol=1e-12)
    same = x.copy()
    autodiff_gradient(mode, loss, same)  # the very same objects twice: replayed
    loss.__code__ = cubes.__code__
    fd = central(loss, x)
    np.testing.assert_allclose(fd, 3 * x ** 2 - 1, rtol=1e-7)
    for arg in (x.copy(), x.copy()):
        (g,) = zymo.gradient(mode, loss, arg)
        np.testing.assert_allclose(g, fd, rtol=1e-7)
        np.testing.assert_allclose(g, autodiff_gradient(mode, loss, arg), rtol=1e-12)
    np.testing.assert_allclose(autodiff_gradient(mode, loss, same), fd, rtol=1e-7)
    np.testing.assert_allclose(zymo.gradient(mode, loss, x)[0], fresh_gradient(mode, loss, x)[0], rtol=1e-12)


def test_split_mode_thunks_see_the_functions_code_replaced_in_place():
    loss, cubes = sine_loss_and_cubes()
    x, dx = np.array([0.1, 0.2, 0.3]), np.zeros(3)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, loss, Active, Duplicated(x, dx))
    for code in (None, cubes.__code__):
        if code is not None:
            loss.__code__ = code
        for _ in range(2):  # the second call with the same objects reuses the first's preparation
            dx[:] = 0.0
            tape, y = fwd(Duplicated(x, dx))
            rev(Duplicated(x, dx), 1.0, tape)
    assert y == loss(x)
    np.testing.assert_allclose(dx, central(loss, x), rtol=1e-7)
    np.testing.assert_allclose(dx, zymo.gradient(Forward, loss, x)[0], rtol=1e-12)


def scaled_sine_loss(c):
    def loss(x):
        return np.sum(np.sin(x)) * c
    return loss


def test_fresh_closures_are_not_held_past_the_caches_bound(monkeypatch):
    # `jacobian` of a new closure added two lowered functions (and a program) for good, each
    # holding the closure; `gradient` a recorded call
    monkeypatch.setattr(zymo.cache, "CACHED", 4, raising=False)  # (raising: the old code had no bound)
    zymo.cache.cache_clear()
    x = np.array([0.1, 0.2, 0.3])
    freed = []
    for c in range(1, 9):
        act, loss = make_scaled_sine(float(c)), scaled_sine_loss(float(c))
        for mode in (Reverse, Forward):
            J = zymo.jacobian(mode, act, x)
            np.testing.assert_allclose(J, np.diag(central(lambda z, act=act: np.sum(act(z)), x)), rtol=1e-7)
            np.testing.assert_allclose(J, np.diag(c * np.cos(x)), rtol=1e-12)
            (g,) = zymo.gradient(mode, loss, x)
            np.testing.assert_allclose(g, central(loss, x), rtol=1e-7)
            np.testing.assert_allclose(g, autodiff_gradient(mode, loss, x.copy()), rtol=1e-12)
        caches = zymo.cache
        assert len(caches.LOWERED) <= 4
        assert all(k[0] in caches.LOWERED for k in caches.COMPILED)  # programs go with their lowered function
        assert max(len(caches.FAST), len(caches.LAST), len(caches.TYPED), len(caches.TYPED_CALLS)) <= 4
        if c == 2:
            freed = [weakref.ref(act), weakref.ref(loss)]
        del act, loss
    gc.collect()
    assert [r() for r in freed] == [None, None]
    zymo.cache.cache_clear()
