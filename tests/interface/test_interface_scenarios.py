"""The scenario suite on every installed backend, and the suite's own ability to catch a wrong backend."""
from dataclasses import dataclass

import numpy as np
import pytest

import zymo
from zymo.interface import AutoAutograd, AutoFiniteDiff, AutoJAX, AutoTorch, AutoZymo
from zymo.interface import scenarios as sc
from zymo.interface._finitediff import FiniteDiffEngine
from zymo.interface.backends import Backend

HAS_HVP = getattr(zymo, "hvp", None) is not None


def _zymo_second_order(r):
    """Without zymo.hvp, AutoZymo refuses second order (clearly), and the second derivative of an
    array-valued function always; everything else must pass."""
    if r.op == "second_derivative" and "array-valued" in r.message:
        return True
    return not HAS_HVP and r.op in ("hvp", "hessian", "second_derivative") and "zymo.hvp" in r.message


def test_references_are_nonzero_and_consistent_with_finite_differences():
    fd = AutoFiniteDiff()
    for s in sc.default_scenarios():
        J = np.asarray(s.jac(s.x, *[c.value for c in s.contexts]))
        assert np.abs(J).max() > 0.1, s.name
        r = sc.run_one(fd, s, "jacobian")
        assert r.status == "ok", (s.name, r.message)


@pytest.mark.slow
def test_zymo_passes_every_scenario():
    results = sc.check(AutoZymo(), allow=_zymo_second_order)
    ok = [r for r in results if r.status == "ok"]
    assert len(ok) >= 70
    assert {r.scenario for r in ok} >= {s.name for s in sc.default_scenarios()}


@pytest.mark.slow
def test_zymo_forward_and_reverse_modes_pass():
    subset = [s for s in sc.default_scenarios() if s.name in ("array_to_array", "inplace_array", "overwrites_input",
                                                                 "array_to_scalar_cache_closure")]
    for mode in (zymo.Forward, zymo.Reverse):
        sc.check(AutoZymo(mode=mode), subset, allow=_zymo_second_order)


def test_finite_differences_pass_every_scenario():
    results = sc.check(AutoFiniteDiff())
    assert all(r.status == "ok" for r in results)


@pytest.mark.parametrize("backend", [AutoTorch(), AutoAutograd()], ids=repr)
def test_peer_backend_scenarios(backend):
    if not backend.available():
        pytest.skip(f"{backend!r} is not installed")
    results = sc.check(backend)
    # what they cannot do, they refuse: every unexpected scenario ended as a limitation, never a number
    refused = [r for r in results if not r.expected]
    assert refused and all(r.status == "limitation" for r in refused)
    assert sum(r.status == "ok" for r in results) >= 50


_JAX_SUBSET = ("scalar_to_scalar", "array_to_array_constant", "scalar_to_array_closure", "inplace_array",
               "numpy_buffers_loop", "captured_cache")


@pytest.mark.slow
def test_jax_scenarios_subset():
    b = AutoJAX(jit=False)
    if not b.available():
        pytest.skip("jax is not installed")
    results = sc.check(b, [s for s in sc.default_scenarios() if s.name in _JAX_SUBSET])
    assert {r.status for r in results if not r.expected} == {"limitation"}
    assert sum(r.status == "ok" for r in results) >= 12


@pytest.mark.slow
def test_jax_all_scenarios_jitted():
    b = AutoJAX()
    if not b.available():
        pytest.skip("jax is not installed")
    sc.check(b)


@dataclass(frozen=True)
class WrongSign(Backend):
    """A broken backend: finite differences with the sign of every derivative flipped."""

    supports_mutation = True
    supports_overwrite = True

    def engine(self, f, x, contexts, y=None):
        return _Flipped(self, f, x, contexts, y)


class _Flipped(FiniteDiffEngine):
    def setup(self, x, contexts, y):
        self.backend = AutoFiniteDiff()
        super().setup(x, contexts, y)

    def value_and_pushforward(self, x, tx, contexts, y=None):
        val, ty = super().value_and_pushforward(x, tx, contexts, y)
        return val, -ty


@dataclass(frozen=True)
class Zeros(Backend):
    """A broken backend: every derivative is zero."""

    supports_mutation = True
    supports_overwrite = True

    def engine(self, f, x, contexts, y=None):
        return _Zero(AutoFiniteDiff(), f, x, contexts, y)


class _Zero(FiniteDiffEngine):
    def value_and_pushforward(self, x, tx, contexts, y=None):
        val, ty = super().value_and_pushforward(x, tx, contexts, y)
        return val, ty * 0.0


@pytest.mark.parametrize("broken", [WrongSign(), Zeros()], ids=lambda b: type(b).__name__)
def test_the_suite_catches_wrong_signs_and_zeros(broken):
    subset = [s for s in sc.default_scenarios() if s.name in ("scalar_to_scalar", "array_to_array")]
    with pytest.raises(AssertionError, match="mismatch"):
        sc.check(broken, subset, operators=["jacobian", "pushforward", "derivative"])


def test_benchmark_reports_time_and_allocations():
    subset = [s for s in sc.default_scenarios() if s.name in ("array_to_scalar", "inplace_array")]
    rows = sc.benchmark([AutoZymo(), AutoFiniteDiff()], subset, operators=["gradient", "jacobian"], repeat=3)
    assert {(r["scenario"], r["operator"], r["backend"]) for r in rows} == {
        ("array_to_scalar", "gradient", "AutoZymo()"), ("array_to_scalar", "gradient", "AutoFiniteDiff(rel_step=None)"),
        ("array_to_scalar", "jacobian", "AutoZymo()"), ("array_to_scalar", "jacobian", "AutoFiniteDiff(rel_step=None)"),
        ("inplace_array", "jacobian", "AutoZymo()"), ("inplace_array", "jacobian", "AutoFiniteDiff(rel_step=None)")}
    for r in rows:
        assert 0 < r["call_s"] < 1 and r["peak_bytes"] > 0
    text = sc.table(rows)
    assert text.count("\n") == len(rows) + 1 and "KiB" in text
