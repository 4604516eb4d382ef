"""The call marker `zymo.checkpoint(fn)`: the call is one primitive whose adjoint reruns zymo's
reverse mode of `fn` on its saved inputs. Gradients against the unmarked function's store-all
gradient, forward mode and central differences, in the Python and "kernels" backends and split
mode; a call inside a loop, one that overwrites its argument, scalar, array and tuple results;
what is refused, at the user's line."""
import numpy as np
import pytest
from test_memory_limit import _fd

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse, ReverseSplitWithPrimal

SCALE = np.array([1.0, 0.5, 2.0, 1.5, 0.25, 1.0, 3.0])  # a global read by the marked functions


def react(u, a):
    u[1:-1] = u[1:-1] + a * (u[:-2] - 2.0 * u[1:-1] + u[2:]) - 0.1 * u[1:-1] ** 3 * SCALE[1:-1]


def pair(u, a):
    v = np.sin(u) * a
    return v * v, np.sum(u * u) * a


def energy(u, a):
    return np.sum(np.cos(u) * SCALE) * a * a


c_react, c_pair, c_energy = zymo.checkpoint(react), zymo.checkpoint(pair), zymo.checkpoint(energy)


def marked(u, a, n):
    for _t in range(n):
        c_react(u, a)
    x, s = c_pair(u, a)
    return np.sum(x * x) + s + c_energy(u, a)


def unmarked(u, a, n):
    for _t in range(n):
        react(u, a)
    x, s = pair(u, a)
    return np.sum(x * x) + s + energy(u, a)


def overwritten(u, a):
    y = c_energy(u, a)  # its input u is overwritten below: the call keeps a copy
    u[:] = u * 2.0
    return y * np.sum(u)


def overwritten0(u, a):
    y = energy(u, a)
    u[:] = u * 2.0
    return y * np.sum(u)


U0 = np.linspace(0.1, 1.2, 7)


@pytest.mark.parametrize("numba", [False, "kernels"])
@pytest.mark.parametrize("f, f0", [(marked, unmarked), (overwritten, overwritten0)])
def test_checkpointed_call_against_store_all(f, f0, numba):
    args = (3,) if f is marked else ()
    got = zymo.gradient(Reverse, f, U0.copy(), 0.3, *map(Const, args), numba=numba)
    ref = zymo.gradient(Reverse, f0, U0.copy(), 0.3, *map(Const, args))
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12, atol=1e-15)
    assert got[1] == pytest.approx(ref[1], rel=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda u: f0(u, 0.3, *args), [U0.copy()], 0), rtol=1e-6, atol=1e-8)
    assert got[1] == pytest.approx(_fd(lambda a: f0(U0.copy(), a, *args), [0.3], 0), rel=1e-6)
    fwd = zymo.gradient(Forward, f, U0.copy(), 0.3, *map(Const, args), numba=numba)
    np.testing.assert_allclose(fwd[0], ref[0], rtol=1e-12, atol=1e-15)
    assert np.max(np.abs(got[0])) > 1e-2


def test_the_call_stores_nothing_of_its_internals():
    args = (Duplicated(U0.copy(), np.zeros(7)), Active(0.3), Const(3))
    src = zymo.generated_code(Reverse, marked, Active, *args)
    assert "vjp_term" in src and "np.sin" not in src and "np.cos" not in src
    report = zymo.cache_report(Reverse, marked, Active, *args)
    assert "checkpointed call react(): 3 calls recomputed in the adjoint sweep, inputs saved: 192 bytes" in report
    assert "checkpointed call pair(): 1 call recomputed" in report
    assert "checkpointed call react()" not in zymo.cache_report(Reverse, unmarked, Active, *args)


@pytest.mark.parametrize("numba", [False, "kernels"])
def test_split_mode(numba):
    u, du = U0.copy(), np.zeros(7)
    ann = (Duplicated(u, du), Active(0.3), Const(3))
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, marked, Active, *ann, numba=numba)
    tape, y = fwd(*ann)
    assert y == pytest.approx(unmarked(U0.copy(), 0.3, 3), rel=1e-14)
    (d,) = rev(*ann, 1.0, tape)  # the arguments as the forward half left them
    ref = zymo.gradient(Reverse, unmarked, U0.copy(), 0.3, Const(3))
    np.testing.assert_allclose(du, ref[0], rtol=1e-12, atol=1e-15)
    assert d[1] == pytest.approx(ref[1], rel=1e-12)


def test_plain_python_call_is_fn():
    u = U0.copy()
    assert c_energy(u, 0.5) == energy(u, 0.5)
    c_react(u, 0.2)
    v = U0.copy()
    react(v, 0.2)
    np.testing.assert_array_equal(u, v)


def writes_two(u, v):
    u[0] = 1.0
    v[0] = 2.0


def writes_global(u):
    SCALE[0] = u[0]


def writes_and_returns(u):
    u[0] = 1.0
    return u[1]


def rebinds(u):
    u += 1.0


@pytest.mark.parametrize("fn, match", [(writes_two, "one parameter at most"), (writes_global, "SCALE, not a "),
                                       (writes_and_returns, "one or the other"), (rebinds, r"u\[...\] \+=")])
def test_refused_when_marked(fn, match):
    with pytest.raises(zymo.ZymoUsageError, match=match):
        zymo.checkpoint(fn)


def keyword_call(u, a):
    return c_energy(u, a=a)


def list_call(u, a):
    return c_energy([u, u], a)


@pytest.mark.parametrize("f, match", [(keyword_call, "positionally"), (list_call, "a list, a tuple or complex")])
def test_refused_at_the_users_line(f, match):
    with pytest.raises(zymo.ZymoError, match=match) as e:
        zymo.gradient(Reverse, f, U0.copy(), 0.3)
    assert "test_call_marker.py" in str(e.value)


def int_argument(u):
    return c_energy(u, 2) + c_energy(u, 1.5)


def test_an_int_argument_passes_as_a_constant():
    got = zymo.gradient(Reverse, int_argument, U0.copy())[0]
    np.testing.assert_allclose(got, _fd(lambda u: energy(u, 2) + energy(u, 1.5), [U0.copy()], 0), rtol=1e-6)


def test_numba_always_is_refused():
    with pytest.raises(zymo.ZymoError, match="Numba cannot compile marked"):
        zymo.gradient(Reverse, marked, U0.copy(), 0.3, Const(3), numba=True)


def through_a_view(u, a):
    v = u[1:-1]
    v[:] = np.sin(v) * a


def copies_first(u, a):
    w = u.copy()
    w[0] = a
    return w * u


c_view, c_copies = zymo.checkpoint(through_a_view), zymo.checkpoint(copies_first)


def view_user(u, a):
    c_view(u, a)
    return np.sum(c_copies(u, a) ** 2)


def view_user0(u, a):
    through_a_view(u, a)
    return np.sum(copies_first(u, a) ** 2)


def test_a_write_through_a_view_is_a_write_into_the_parameter():
    assert c_view.written == 0 and c_copies.written is None
    got = zymo.gradient(Reverse, view_user, U0.copy(), 0.3)
    ref = zymo.gradient(Reverse, view_user0, U0.copy(), 0.3)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    assert got[1] == pytest.approx(ref[1], rel=1e-12)



G = np.zeros(3)

def _bump(v):
    v[0] += 1.0
    return v

def _touch_global(u):
    G[0] += 1.0
    return u

def sneaky(u):
    _bump(u)
    return np.sum(u * u)

def test_a_write_through_a_callee_is_refused_when_the_call_runs():
    f = zymo.checkpoint(sneaky)
    def loss(x):
        y = x * 2.0
        return f(y)
    with pytest.raises(zymo.ZymoUsageError, match="wrote into its argument u"):
        zymo.gradient(Reverse, loss, np.array([1.0, 2.0]))

def test_a_callee_writing_a_global_is_refused_when_marking():
    def uses(u):
        return np.sum(_touch_global(u) ** 2)
    with pytest.raises(zymo.ZymoUsageError, match="calls _touch_global, which writes into G"):
        zymo.checkpoint(uses)

def _pure_helper(u):
    w = u * 3.0
    w[0] = 1.0
    return w

def test_a_callee_writing_only_its_own_arrays_is_accepted():
    def uses(u):
        return np.sum(_pure_helper(u) * u)
    f = zymo.checkpoint(uses)
    def loss(x):
        return f(x * 1.0)
    x = np.array([0.5, 1.5, -2.0])
    (g,) = zymo.gradient(Reverse, loss, x)
    (ref,) = zymo.gradient(Reverse, lambda x: np.sum(_pure_helper(x * 1.0) * (x * 1.0)), x)
    np.testing.assert_allclose(g, ref, rtol=1e-12)
    np.testing.assert_allclose(g, [2 * 0 + 1.0, 6 * 1.5, 6 * -2.0], rtol=1e-12)
