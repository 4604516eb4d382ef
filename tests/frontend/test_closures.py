"""Closures (seed 003): captured arrays, scalars (`nonlocal`), functions, defaults and objects.

Correct by default (captured memory that receives active data gets an internal
shadow for the call), fast by default (captured data that is only read is not
differentiated), `Duplicated(f, make_zero(f))` owns the shadow of what `f`
captured, and `Const(f)` refuses active writes into captured memory.
"""
from __future__ import annotations

import numpy as np
import pytest
from data_helpers import check_data

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse, ReverseWithPrimal, ZymoUsageError


def make_model(n=3):
    W = np.linspace(-1.0, 1.0, n * n).reshape(n, n)     # only read: constant
    work = np.zeros(n)                                   # scratch: receives active data
    total = 0.0                                          # nonlocal accumulator

    def act(v):
        return np.tanh(v)

    def layer(x, scale=0.5):
        np.matmul(W, x, out=work)
        return act(work) * scale

    def f(x):
        nonlocal total
        y = layer(x)
        total = total + np.sum(y * x)
        return total * total
    return f


def _cell(f, name):
    return f.__closure__[f.__code__.co_freevars.index(name)]


def test_nonlocal_nested_functions_and_defaults_against_fd():
    W = np.array([[0.5, -1.0], [0.25, 2.0]])
    work = np.zeros(2)
    total = 0.0

    def layer(x, scale=0.5):
        np.matmul(W, x, out=work)
        return np.tanh(work) * scale

    def f(x, c):
        nonlocal total
        total = c                                        # reset: each call is a function of (x, c)
        for _ in range(2):
            total = total + np.sum(layer(x) * x)
        return total * total
    out = check_data(f, lambda: [np.array([0.3, -0.4]), 0.2])
    assert out["grads"][(1,)] > 0


def test_nonlocal_is_written_back_and_repeated_calls_are_right():
    f = make_model()
    g = make_model()                                     # reference closure for the primal and FD
    h = 1e-6
    for k in range(3):
        x = np.array([0.3, -0.4, 0.8]) * (k + 1)
        before = _cell(f, "total").cell_contents
        dx = np.zeros(3)
        (_, y) = zymo.autodiff(ReverseWithPrimal, f, Active, Duplicated(x.copy(), dx))
        (t,) = zymo.autodiff(Forward, g, Duplicated, Duplicated(x.copy(), np.ones(3)))  # advances g too
        assert _cell(g, "total").cell_contents == pytest.approx(_cell(f, "total").cell_contents)
        assert y == pytest.approx(_cell(f, "total").cell_contents ** 2) and _cell(f, "total").cell_contents != before
        fd = np.zeros(3)
        for i in range(3):
            vals = []
            for s in (h, -h):
                _cell(g, "total").cell_contents = before
                xp = x.copy()
                xp[i] += s
                vals.append(g(xp))
            fd[i] = (vals[0] - vals[1]) / (2 * h)
        _cell(g, "total").cell_contents = _cell(f, "total").cell_contents
        np.testing.assert_allclose(dx, fd, rtol=1e-6)
        assert t == pytest.approx(fd.sum(), rel=1e-6)


def test_duplicated_function_shadows_what_it_captured():
    f = make_model()
    df = zymo.make_zero(f)
    cells = dict(zip(f.__code__.co_freevars, df.__closure__))
    assert cells["total"].cell_contents == 0.0 and isinstance(cells["layer"].cell_contents, type(f))
    x = np.array([0.3, -0.4, 0.8])
    results = []
    for _ in range(2):
        zymo.make_zero_(df)
        fresh = make_model()
        dx = np.zeros(3)
        zymo.autodiff(Reverse, Duplicated(fresh, df), Active, Duplicated(x.copy(), dx))
        results.append((dx.copy(), cells["total"].cell_contents))
    # d(total^2)/d(total_initial) = 2*total: the shadow cell accumulates the adjoint
    t = np.sum(np.tanh(np.linspace(-1.0, 1.0, 9).reshape(3, 3) @ x) * 0.5 * x)
    assert results[0][1] == pytest.approx(2 * t)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[1][1] == results[0][1]                 # make_zero_ re-zeroed the shadow cell
    # forward: the shadow cell holds the tangent of the accumulator
    zymo.make_zero_(df)
    cells["total"].cell_contents = 1.0
    (tan,) = zymo.autodiff(Forward, Duplicated(make_model(), df), Duplicated, Duplicated(x.copy(), np.zeros(3)))
    assert tan == pytest.approx(2 * t) and cells["total"].cell_contents == 1.0


def make_buffered():
    buf = np.zeros(2)

    def f(x):
        buf[0] = 1.0
        buf[0] += x
        buf[1] = buf[0] * x
        return buf[1] ** 2
    return f, buf


def test_duplicated_function_buffer_shadow_and_const_error():
    f, buf = make_buffered()
    df = zymo.make_zero(f)
    for x in (0.5, 2.0, 0.5):
        zymo.make_zero_(df)
        (d,) = zymo.autodiff(Reverse, Duplicated(f, df), Active, Active(x))
        # (x(1+x))^2 -> 2 x (1+x) (1 + 2x)
        assert d[0] == pytest.approx(2 * x * (1 + x) * (1 + 2 * x))
        (d,) = zymo.autodiff(Reverse, f, Active, Active(x))          # plain f: correct by default
        assert d[0] == pytest.approx(2 * x * (1 + x) * (1 + 2 * x))
        (t,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(x, 1.0))
        assert t == pytest.approx(2 * x * (1 + x) * (1 + 2 * x))
    with pytest.raises(ZymoUsageError) as e:
        zymo.autodiff(Reverse, Const(f), Active, Active(0.5))
    msg = str(e.value)
    assert "'buf'" in msg and "test_closures.py" in msg and "buf[0] += x" in msg
    assert "Duplicated(f, zymo.make_zero(f))" in msg


def test_const_function_is_fine_when_captured_data_is_only_read():
    W = np.array([[1.0, 2.0], [3.0, 4.0]])

    def f(x):
        return np.sum((W @ x) ** 2)
    x = np.array([0.5, -1.0])
    dx = np.zeros(2)
    zymo.autodiff(Reverse, Const(f), Active, Duplicated(x, dx))
    np.testing.assert_allclose(dx, 2 * W.T @ (W @ x))


def test_captured_weights_stay_constant_and_cost_nothing():
    W = np.ones((4, 4))

    def f(x):
        return np.sum(np.tanh(W @ x))
    src = zymo.generated_code(Reverse, f, Active, Duplicated(np.ones(4), np.zeros(4)))
    assert "dW" not in src and "d_W" not in src
    comp = zymo.cache.prepare(Reverse, f, Active, (Duplicated(np.ones(4), np.zeros(4)),))[0]
    assert comp.active_params == [0]                    # only x has a shadow


class Clock:
    def __init__(self):
        self.t = 0.0
        self.rate = 2.0
        self.hist = np.zeros(3)


clock = Clock()
settings = {"gain": 1.5, "offset": 0.25}


def tick(x):
    for k in range(3):
        clock.t = clock.t + x * clock.rate * settings["gain"]
        clock.hist[k] = clock.t * x
    return clock.hist[2] + settings["offset"]


def test_captured_object_with_float_attribute_writes():
    for x in (0.5, 1.5):
        clock.t = 0.0
        (d,) = zymo.autodiff(Reverse, tick, Active, Active(x))
        # t_k = 3 (k+1) x  ->  hist[2] = 9 x^2
        assert d[0] == pytest.approx(18 * x) and clock.t == pytest.approx(9 * x)
        clock.t = 0.0
        (t,) = zymo.autodiff(Forward, tick, Duplicated, Duplicated(x, 1.0))
        assert t == pytest.approx(18 * x)
    with pytest.raises(ZymoUsageError, match="'t'"):
        zymo.autodiff(Reverse, Const(tick), Active, Active(1.0))


def test_default_argument_buffer_and_captured_function():
    def scale(v):
        return 3.0 * v

    def f(x, out=np.zeros(2), g=scale):  # noqa: B008  (an array default, under test)
        out[0] = g(x)
        out[1] = out[0] * x
        return out[1]
    check_data(f, lambda: [0.7])
    df = zymo.make_zero(f)
    assert df.__defaults__[0] is not f.__defaults__[0] and np.all(df.__defaults__[0] == 0)
