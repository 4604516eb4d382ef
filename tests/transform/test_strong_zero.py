"""Strong zeros (`zymo.config.set_strong_zero`, Enzyme's `strong_zero`).

By default derivatives follow IEEE arithmetic, as NumPy, JAX and PyTorch do: the branch that
`np.where` does not take still passes `0 * inf = nan` to a reverse-mode gradient. With strong
zeros, a zero adjoint or tangent gives a zero term in the rules of elementwise functions and of
numbers (a zero SEED: an infinite tangent times a zero partial is still nan in forward mode,
as in Enzyme). `np.where`'s own derivative is a select in both settings, so forward mode is never
poisoned through it. Away from the singular points both settings give the same derivatives
(checked against central differences and the other mode)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo
from zymo import Forward, Reverse
from zymo.testing import check_grad


def masked_sqrt(x):
    return np.sum(np.where(x > 0, np.sqrt(x), 0.0))


def masked_div(x, y):
    return np.sum(np.where(y != 0, x / y, 0.0))


def scalar_mask(x):
    s = 0.0
    for i in range(x.shape[0]):
        v = x[i]
        s += math.sqrt(v) * 0.0 + 2.0 * v
    return s


X = np.array([0.0, 1.0, 4.0])
Y = np.array([0.0, 2.0, 1.0])


@pytest.fixture
def strong():
    zymo.config.set_strong_zero(True)
    yield
    zymo.config.set_strong_zero(None)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_default_is_ieee_in_reverse_mode():
    (g,) = zymo.gradient(Reverse, masked_sqrt, X.copy())
    assert np.isnan(g[0]) and g[1] == 0.5
    (g,) = zymo.gradient(Forward, masked_sqrt, X.copy())  # a select: no nan in forward mode
    np.testing.assert_allclose(g, [0.0, 0.5, 0.25])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("numba", [False, True])
@pytest.mark.parametrize("mode", [Reverse, Forward])
def test_strong_zeros_keep_masked_branches_out(strong, mode, numba):
    (g,) = zymo.gradient(mode, masked_sqrt, X.copy(), numba=numba)
    np.testing.assert_allclose(g, [0.0, 0.5, 0.25])
    gx, gy = zymo.gradient(mode, masked_div, X.copy(), Y.copy(), numba=numba)
    np.testing.assert_allclose(gx, [0.0, 0.5, 1.0])
    np.testing.assert_allclose(gy, [0.0, -0.25, -4.0])
    (g,) = zymo.gradient(mode, scalar_mask, X.copy(), numba=numba)
    if mode is Reverse:  # the adjoint of sqrt(v) is zero: a zero seed
        np.testing.assert_allclose(g, [2.0, 2.0, 2.0])
    else:  # the tangent of sqrt(v) at 0 is inf, times a zero partial: nan, as Enzyme and JAX give
        assert np.isnan(g[0]) and g[1] == 2.0


def test_strong_zeros_change_nothing_away_from_singular_points(strong):
    check_grad(masked_sqrt, np.array([0.5, -1.0, 4.0]))
    check_grad(masked_div, X + 0.3, np.array([0.5, -2.0, 1.0]))
    assert "np.where(" in zymo.generated_code(Reverse, masked_sqrt, zymo.Active,
                                              zymo.Duplicated(X.copy(), np.zeros(3)))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_variable_is_read_once_so_replays_and_new_programs_agree(monkeypatch):
    # ZYMO_STRONG_ZERO set in os.environ at run time: `config.strong_zero()` and every new
    # program had strong zeros, while the recorded calls (gradient's, autodiff's replays) went on
    # without them. It is read once now; `set_strong_zero(None)` reads it again.
    x = np.array([-1.0, 1.0, 4.0])  # masked out at -1: the gradient there is 0, IEEE's nan
    h = 1e-6
    fd = np.array([(masked_sqrt(x + h * e) - masked_sqrt(x - h * e)) / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(fd, [0.0, 0.5, 0.25], rtol=1e-7)
    ieee = [np.nan, 0.5, 0.25]
    same, dsame = x.copy(), np.zeros(3)

    def grads():
        """gradient's recorded call, autodiff's replay of the same objects, a new program."""
        (g,) = zymo.gradient(Reverse, masked_sqrt, x.copy())
        dsame[:] = 0.0
        zymo.autodiff(Reverse, masked_sqrt, zymo.Active, zymo.Duplicated(same, dsame))
        fresh = zymo.gradient(Reverse, lambda z: np.sum(np.where(z > 0, np.sqrt(z), 0.0)), x.copy())[0]
        return g, dsame.copy(), fresh

    monkeypatch.delenv("ZYMO_STRONG_ZERO", raising=False)
    zymo.config.set_strong_zero(None)
    try:
        for _ in range(2):  # recorded, then replayed
            for g in grads():
                np.testing.assert_allclose(g, ieee)
        monkeypatch.setenv("ZYMO_STRONG_ZERO", "1")
        for g in grads():
            np.testing.assert_allclose(g, ieee)
        assert not zymo.config.strong_zero()
        zymo.config.set_strong_zero(None)  # read again: on, for every call
        assert zymo.config.strong_zero()
        for _ in range(2):
            for g in grads():
                np.testing.assert_allclose(g, fd, rtol=1e-7)
        np.testing.assert_allclose(zymo.gradient(Forward, masked_sqrt, x.copy())[0], fd, rtol=1e-7)
    finally:
        monkeypatch.undo()
        zymo.config.set_strong_zero(None)
