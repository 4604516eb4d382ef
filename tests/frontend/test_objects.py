"""Objects, dataclasses, namedtuples, dicts and lists of arrays as arguments (issue 6).

Every derivative is checked against central differences in both modes and by the
dot-product identity (tests/data_helpers.py), on repeated calls with reused shadows.
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import pytest
from data_helpers import check_data

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse, ReverseWithPrimal, ZymoError, ZymoUsageError

RNG = np.random.default_rng(6)


class Sim:
    """A small simulation with preallocated work buffers and a float clock."""

    def __init__(self, n: int):
        self.x = np.linspace(0.2, 1.0, n)
        self.buf = np.zeros(n)
        self.t = 0.3
        self.n = n
        self.label = "sim"

    def step(self, dt):
        np.multiply(self.x, self.x, out=self.buf)
        self.x[...] = self.x + dt * self.buf * self.t
        self.t += dt * self.x[0]

    @property
    def energy(self):
        return np.sum(self.x * self.x) + self.t ** 2


def run_sim(sim, dt):
    for _ in range(3):
        sim.step(dt)
    return sim.energy


def test_object_with_buffers_methods_and_float_attribute():
    out = check_data(run_sim, lambda: [Sim(4), 0.1])
    assert out["grads"][(0, "t")] > 0


def test_float_attribute_shadow_accumulates_and_is_written_back():
    s, ds = Sim(3), zymo.make_zero(Sim(3))
    ds.t = 0.5                                     # a seed on the final clock
    (_, dt), y = zymo.autodiff(ReverseWithPrimal, run_sim, Active, Duplicated(s, ds), Active(0.1))
    ref = Sim(3)
    assert y == pytest.approx(run_sim(ref, 0.1)) and s.t == pytest.approx(ref.t)   # primal written back
    np.testing.assert_allclose(s.x, ref.x)
    assert ds.label == "sim" and ds.n == 3          # inactive leaves are shared
    assert ds.t != 0.5 and dt > 0


@dataclass
class Particle:
    pos: np.ndarray
    vel: np.ndarray
    mass: float
    drag: float = 0.1
    steps: int = 4


def integrate(p, dt):
    for _ in range(p.steps):
        p.vel[...] = p.vel - dt * p.drag * p.vel / p.mass
        p.pos += dt * p.vel
        if p.pos[0] > 0.5:
            p.mass = p.mass + dt * p.pos[0]
        else:
            p.mass = p.mass * 1.01
    return np.sum(p.pos ** 2) * p.mass


def test_mutable_dataclass_in_loops_and_branches():
    check_data(integrate, lambda: [Particle(np.array([0.3, 0.1]), np.array([1.0, -0.5]), 2.0), 0.1])


@dataclass(frozen=True)
class Layer:
    W: np.ndarray
    b: np.ndarray
    act: str = "tanh"


def mlp_loss(layers, x):
    h = x
    for layer in layers:
        h = np.tanh(layer.W @ h + layer.b) if layer.act == "tanh" else layer.W @ h + layer.b
    return np.sum(h * h)


def test_frozen_dataclasses_in_a_tuple_and_string_static():
    W0 = RNG.standard_normal((3, 2))
    check_data(mlp_loss, lambda: [(Layer(W0.copy(), np.ones(3)), Layer(np.eye(3) * 0.5, np.zeros(3), "linear")),
                                  np.array([0.4, -0.2])])


def test_frozen_record_refuses_writes():
    def f(layer):
        layer.b = layer.b * 2.0
        return np.sum(layer.b)
    with pytest.raises(ZymoError, match="immutable"):
        zymo.autodiff(Reverse, f, Active, Duplicated(Layer(np.eye(2), np.ones(2)), zymo.make_zero(
            Layer(np.eye(2), np.ones(2)))))


Params = namedtuple("Params", "a b n")


def poly(p, x):
    acc = 0.0
    for k in range(p.n):
        acc = acc + p.a * x ** k + p.b[k]
    a, b, n = p
    return acc * a + p[1][0]


def test_namedtuple_active_and_forward():
    p = Params(1.3, 0.7, 3)
    (d,) = zymo.autodiff(Reverse, lambda q, x: q.a * q.b * x * x, Active, Active(p), Active(2.0))
    assert isinstance(d[0], Params) and d[0].a == pytest.approx(0.7 * 4) and d[0].b == pytest.approx(1.3 * 4)
    assert d[1] == pytest.approx(2 * 1.3 * 0.7 * 2.0) and d[0].n is None
    (t,) = zymo.autodiff(Forward, lambda q, x: q.a * q.b * x * x, Duplicated, Duplicated(p, Params(1.0, 0.0, 3)),
                         Duplicated(2.0, 0.0))
    assert t == pytest.approx(0.7 * 4)


def test_namedtuple_holding_an_array():
    check_data(poly, lambda: [Params(2, np.array([0.5, -0.2, 0.1]), 3), 0.8])


def dict_model(d, x):
    d["acc"] = d["acc"] + x * d["w"][0]
    d["w"][1] = x * d["w"][1]
    d["scale"] *= 1.5
    return d["acc"] * d["scale"] + d["w"][1] ** 2


def test_dict_with_string_keys_read_and_write():
    check_data(dict_model, lambda: [{"acc": 1.0, "w": np.array([3.0, 4.0]), "scale": 0.5, "tag": "m"}, 2.0])


def mats_model(holder, vec):
    for i in range(len(vec)):
        mat = holder.mats[i]
        a = vec[i]
        for j in range(3):
            mat[j, 0] = a * (j + 1)
        mat[0, 0] = vec[i] * holder.gain
    return holder.mats[2][1, 0] * holder.mats[2][0, 0]


class Holder:
    def __init__(self):
        self.mats = [np.zeros((3, 1)) for _ in range(3)]
        self.gain = 1.5


def test_list_of_arrays_in_an_object_seed001():
    check_data(mats_model, lambda: [Holder(), np.array([0.5, -1.0, 2.0])])


def mixed_tuple(t, y):
    c, n, arr = t
    for _ in range(n):
        arr[...] = arr * c + y
    return np.sum(arr) * c


def test_tuple_mixing_floats_ints_and_arrays():
    # forward: the tuple's float has a tangent; reverse: Active floats, the array in a list
    arr = np.array([0.5, 1.0])
    (t,) = zymo.autodiff(Forward, mixed_tuple, Duplicated, Duplicated((1.2, 2, arr.copy()), (1.0, 2, np.zeros(2))),
                         Duplicated(0.3, 0.0))
    h = 1e-6
    fd = (mixed_tuple((1.2 + h, 2, arr.copy()), 0.3) - mixed_tuple((1.2 - h, 2, arr.copy()), 0.3)) / (2 * h)
    assert t == pytest.approx(fd, rel=1e-6)
    with pytest.raises(ZymoUsageError, match="frozen dataclass"):
        zymo.autodiff(Reverse, mixed_tuple, Active, Duplicated((1.2, 2, arr), (0.0, 2, np.zeros(2))), Active(0.3))


def test_same_array_and_object_reachable_twice():
    shared = np.ones(2)

    class Two:
        def __init__(self):
            self.a = shared
            self.b = shared
            self.k = 3
    o = Two()
    z = zymo.make_zero(o)
    assert z.a is z.b and z.a is not shared and z.k == 3
    pair = (o, o)
    zp = zymo.make_zero(pair)
    assert zp[0] is zp[1]

    def f(p, q):
        p.a[0] = 2.0 * p.b[1]      # writes through the alias
        return q.a[0] * q.b[0]
    x = Two()
    x.a = x.b = np.array([1.0, 3.0])
    dx = zymo.make_zero(x)
    zymo.autodiff(Reverse, f, Active, Duplicated(x, dx), Duplicated(x, dx))
    # f = (2*b1)^2 -> d/db1 = 8*b1 = 24; b0 overwritten -> 0
    np.testing.assert_allclose(dx.a, [0.0, 24.0])


def test_shadow_structure_mismatch_is_refused():
    s = Sim(3)
    bad = zymo.make_zero(Sim(4))
    with pytest.raises(ZymoUsageError, match=r"argument 0\.x: the shadow has shape"):
        zymo.autodiff(Reverse, run_sim, Active, Duplicated(s, bad), Active(0.1))
    bad = zymo.make_zero(s)
    del bad.t
    with pytest.raises(ZymoUsageError, match=r"missing \['t'\]"):
        zymo.autodiff(Reverse, run_sim, Active, Duplicated(s, bad), Active(0.1))
    bad = zymo.make_zero(s)
    bad.n = 4
    with pytest.raises(ZymoUsageError, match=r"argument 0\.n: the shadow holds 4"):
        zymo.autodiff(Reverse, run_sim, Active, Duplicated(s, bad), Active(0.1))
    with pytest.raises(ZymoUsageError, match=r"must be a Sim, not dict"):
        zymo.autodiff(Reverse, run_sim, Active, Duplicated(s, {"x": 1}), Active(0.1))
    with pytest.raises(ZymoUsageError, match=r"\['w'\]: the shadow"):
        zymo.autodiff(Reverse, dict_model, Active, Duplicated({"acc": 1.0, "w": np.ones(2), "scale": 1.0},
                                                              {"acc": 0.0, "w": np.ones(3), "scale": 0.0}),
                      Active(1.0))


def test_unsupported_object_constructs_name_the_line():
    def rebind(s):
        s.buf = s.x * 2.0
        return s.t
    with pytest.raises(ZymoError, match=r"rebinding s.buf") as e:
        zymo.autodiff(Reverse, rebind, Active, Duplicated(Sim(2), zymo.make_zero(Sim(2))))
    assert "test_objects.py" in str(e.value) and "s.buf[...] = value" in str(e.value)

    def new_attr(s):
        s.extra = 1.0
        return s.t
    with pytest.raises(ZymoError, match="adding the new attribute 'extra'"):
        zymo.autodiff(Reverse, new_attr, Active, Duplicated(Sim(2), zymo.make_zero(Sim(2))))


def test_structure_is_part_of_the_compile_key():
    def f(d, x):
        return d["w"][0] * x * d["k"]
    for k in (2, 3, 2):
        (dx,) = zymo.autodiff(Reverse, f, Active, Const({"w": np.array([1.5]), "k": k}), Active(1.0))[0][1:]
        assert dx == pytest.approx(1.5 * k)


def test_the_simulation_example():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "simulation.py"
    spec = importlib.util.spec_from_file_location("zymo_example_simulation", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    heat = mod.Heat(6)
    heat.steps = 5
    out = check_data(mod.simulate, lambda: [_copy_heat(heat), 0.3])
    assert out["grads"][(0, "t")] != 0
    mod.main()


def _copy_heat(h):
    import copy
    return copy.deepcopy(h)


class _Two:
    def __init__(self):
        self.w = np.array([1.0, 2.0])
        self.c = 2.0


def _scale(o, x):
    o.c = o.c * x
    o.w[0] = o.w[0] * o.c
    return o.c * np.sum(o.w)


@pytest.mark.slow
@pytest.mark.parametrize("numba", [False, True])
def test_split_mode_and_numba_with_a_float_attribute(numba):
    # ret = w0 c1^2 + w1 c1 with c1 = c0 x: d/dx = 20, d/dc0 = 20, d/dw = [16, 4] at x = 2
    fwd, rev = zymo.autodiff_thunk(zymo.ReverseSplitWithPrimal, _scale, Active,
                                   Duplicated(_Two(), zymo.make_zero(_Two())), Active(2.0), numba=numba)
    for _ in range(2):
        o = _Two()
        do = zymo.make_zero(o)
        tape, y = fwd(Duplicated(o, do), Active(2.0))
        assert y == 24.0 and o.c == 4.0
        ((_, dx),) = rev(Duplicated(o, do), Active(2.0), 1.0, tape)
        assert dx == pytest.approx(20.0) and do.c == pytest.approx(20.0)
        np.testing.assert_allclose(do.w, [16.0, 4.0])
    o, do = _Two(), zymo.make_zero(_Two())
    ((_, dx),) = zymo.autodiff(Reverse, _scale, Active, Duplicated(o, do), Active(2.0), numba=numba)
    assert dx == pytest.approx(20.0) and do.c == pytest.approx(20.0)


@dataclass(frozen=True)
class _Mode:
    mode: str


_CFG = _Mode("square")


def _by_mode(x):
    if _CFG.mode == "square":  # a static field: read once, when the program is made
        return np.sum(x * x)
    return np.sum(3.0 * x)


def test_a_rebound_global_record_is_never_taken_for_the_old_one():
    """The program is kept while the global names the same object. That was checked by `id`
    alone; once the old record was freed, the new one could take its address, and the program
    made for the old record's static fields was reused: a wrong gradient (helper 71)."""
    global _CFG
    x = np.array([1.0, 2.0])
    for k in range(30):
        mode = ("square", "linear")[k % 2]
        _CFG = None
        _CFG = _Mode(mode)  # the old record freed first: its address is free for this one
        (g,) = zymo.gradient(zymo.Reverse, _by_mode, x)
        np.testing.assert_array_equal(g, 2.0 * x if mode == "square" else [3.0, 3.0])
