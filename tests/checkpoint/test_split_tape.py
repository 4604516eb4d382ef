"""Split mode (`autodiff_thunk`) under `memory_limit`: the tape holds the plan and the snapshots
(`runtime.checkpoint.Snapshots`), and a tape passed back in lends their buffers to the next forward
sweep. Gradients against combined mode's and central differences."""
import numpy as np
import pytest
from test_memory_limit import _fd, rd
from test_while import decay

import zymo
from zymo import Active, Const, Duplicated, Reverse, ReverseSplitNoPrimal, ReverseSplitWithPrimal
from zymo.runtime.checkpoint import Snapshots


def _snapshots(tape):
    (s,) = [x for x in tape.inner if isinstance(x, Snapshots)]
    return s


def _buffers(s: Snapshots) -> set[int]:
    return {id(a) for e in s.values() for a in e if isinstance(a, np.ndarray)} | {id(a) for a in s.spare}


@pytest.mark.parametrize("limit", [None, 10**7, 300, 1])
def test_split_mode_stencil(limit):
    u0 = np.random.default_rng(2).standard_normal(10)
    scal = (Active(0.1), Active(0.2), Active(0.1), Const(15))
    du = np.zeros(10)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, rd, Active, Duplicated(u0, du), *scal, memory_limit=limit)
    ref = zymo.gradient(Reverse, rd, u0, 0.1, 0.2, 0.1, Const(15), memory_limit=limit)
    tape, y = fwd(Duplicated(u0, du), *scal)
    assert y == pytest.approx(rd(u0, 0.1, 0.2, 0.1, 15), rel=1e-14)
    (d,) = rev(Duplicated(u0, du), *scal, 1.0, tape)
    np.testing.assert_allclose(du, ref[0], rtol=1e-12)
    np.testing.assert_allclose(d[1:4], ref[1:4], rtol=1e-12)
    np.testing.assert_allclose(du, _fd(lambda u: rd(u, 0.1, 0.2, 0.1, 15), [u0], 0), rtol=1e-5, atol=1e-8)
    if limit is not None and limit < 10**7:
        before = _buffers(_snapshots(tape))
        assert before
        du2 = np.zeros(10)
        tape2, _ = fwd(Duplicated(u0, du2), *scal, tape=tape)
        assert _buffers(_snapshots(tape2)) <= before  # the snapshots reuse the first tape's buffers
        (d2,) = rev(Duplicated(u0, du2), *scal, 1.0, tape2)
        np.testing.assert_allclose(du2, du, rtol=1e-14)
        np.testing.assert_allclose(d2[1:4], d[1:4], rtol=1e-14)


@pytest.mark.parametrize("limit", [None, 400, 60])
def test_split_mode_while_loop(limit):
    x = np.linspace(0.1, 0.9, 5)
    dx = np.zeros(5)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitNoPrimal, decay, Active, Duplicated(x.copy(), dx), Const(0.3),
                                   memory_limit=limit)
    tape, y = fwd(Duplicated(x.copy(), dx), Const(0.3))
    assert y is None
    rev(Duplicated(x.copy(), dx), Const(0.3), 1.0, tape)
    ref = zymo.gradient(Reverse, decay, x.copy(), 0.3)[0]
    np.testing.assert_allclose(dx, ref, rtol=1e-12)
    np.testing.assert_allclose(dx, _fd(lambda x: decay(x, 0.3), [x.copy()], 0), rtol=1e-5, atol=1e-8)
    dx2 = np.zeros(5)
    tape2, _ = fwd(Duplicated(x.copy(), dx2), Const(0.3), tape=tape)
    rev(Duplicated(x.copy(), dx2), Const(0.3), 1.0, tape2)
    np.testing.assert_allclose(dx2, ref, rtol=1e-12)


def test_numba_prefer_warns_and_runs_python():
    u0 = np.random.default_rng(6).standard_normal(30)
    ref = zymo.gradient(Reverse, rd, u0, 0.1, 0.2, 0.1, Const(20))
    with pytest.warns(zymo.ZymoWarning, match="runs as Python, not Numba: memory_limit checkpoints the loop") as ws:
        got = zymo.gradient(Reverse, rd, u0, 0.1, 0.2, 0.1, Const(20), numba="prefer", memory_limit=700)
    assert ws[0].filename == __file__
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda u: rd(u, 0.1, 0.2, 0.1, 20), [u0], 0), rtol=1e-5, atol=1e-8)


@pytest.mark.slow
def test_numba_kernels_backend_runs_checkpointed_programs():
    from test_memory_limit import nested, scalar_carry
    from test_while import brk

    x = np.linspace(0.1, 0.9, 5)
    for f, args in [(scalar_carry, (x, 1.3, Const(17))), (brk, (x, Const(37))), (decay, (x, 0.3))]:
        ref = zymo.gradient(Reverse, f, *[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        for limit in (None, 100, 1):
            got = zymo.gradient(Reverse, f, *[a.copy() if isinstance(a, np.ndarray) else a for a in args],
                                numba="kernels", memory_limit=limit)
            np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    y = np.linspace(-0.5, 0.5, 4)
    ref = zymo.gradient(Reverse, nested, y.copy(), Const(6))
    got = zymo.gradient(Reverse, nested, y.copy(), Const(6), numba="kernels", memory_limit=30)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda y: nested(y, 6), [y], 0), rtol=1e-5, atol=1e-8)
