"""The loop marker `zymo.checkpointed(range(n), snapshots=k)`: the loop is checkpointed with k
snapshots without a memory limit (and under one); gradients against the unmarked loop's store-all
gradient, forward mode and central differences; misuse refused at the user's line."""
import numpy as np
import pytest
from checkpoint_marked import bad_snapshots, marked, marked_break, not_a_range, unmarked
from test_memory_limit import _fd

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse, ReverseSplitWithPrimal
from zymo.runtime.checkpoint import Plan


@pytest.mark.parametrize("limit", [None, 10**7, 500])
def test_marked_loop_is_checkpointed_with_its_snapshots(limit):
    u0 = np.random.default_rng(7).standard_normal(20)
    Plan.log = []
    try:
        got = zymo.gradient(Reverse, marked, u0, 0.1, Const(30), memory_limit=limit)
        (plan,) = Plan.log
    finally:
        Plan.log = None
    assert not plan.fits and plan.marked == 3 and plan.snapshots == 3 and plan.recomputed() > 0
    assert "marked zymo.checkpointed(..., snapshots=3)" in plan.describe()
    ref = zymo.gradient(Reverse, unmarked, u0, 0.1, Const(30))
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12)
    np.testing.assert_allclose(got[0], _fd(lambda u: marked(u, 0.1, 30), [u0], 0), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(got[0], zymo.gradient(Forward, marked, u0, 0.1, Const(30))[0], rtol=1e-12)
    assert np.max(np.abs(got[0])) > 1e-2
    assert marked(u0, 0.1, 30) == unmarked(u0, 0.1, 30)  # run as Python, the marker is the range


def test_marked_loop_with_break_and_split_mode():
    x = np.linspace(0.1, 0.9, 5)
    got = zymo.gradient(Reverse, marked_break, x, Const(30))
    np.testing.assert_allclose(got[0], _fd(lambda x: marked_break(x, 30), [x], 0), rtol=1e-5, atol=1e-8)
    assert np.max(np.abs(got[0])) > 1e-2
    u0 = np.random.default_rng(8).standard_normal(20)
    du = np.zeros(20)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, marked, Active, Duplicated(u0, du), Active(0.1),
                                   Const(30))
    tape, _ = fwd(Duplicated(u0, du), Active(0.1), Const(30))
    rev(Duplicated(u0, du), Active(0.1), Const(30), 1.0, tape)
    np.testing.assert_allclose(du, zymo.gradient(Reverse, unmarked, u0, 0.1, Const(30))[0], rtol=1e-12)


def test_marker_misuse_is_refused_at_its_line():
    with pytest.raises(zymo.ZymoError, match="marks a loop over range") as e:
        zymo.gradient(Reverse, not_a_range, np.ones(3))
    assert "checkpoint_marked.py" in str(e.value)
    with pytest.raises(zymo.ZymoError, match="snapshots= a positive int") as e:
        zymo.gradient(Reverse, bad_snapshots, np.ones(3), Const(3))
    assert "checkpoint_marked.py" in str(e.value)
    with pytest.raises(ValueError):
        zymo.checkpointed(range(3), snapshots=0)
