"""Coverage: every NumPy function zymo accepts has a rule (with both directions) or is
non-differentiable by rule, and every one it has no rule for is refused at the user's line.

- Each NumPy ufunc is registered, or listed in GAPS with the reason (then refused).
- The functions issue 7 asks for are all registered.
- Every registered rule is `nondiff`/`alloc`, is lowered to other rules (`parts`, `via`),
  or has a jvp and a vjp for each parameter it differentiates.
- Every public callable of `numpy` and `numpy.linalg` without a rule raises
  `UnsupportedCall` naming the user's file and line (never a silent zero).
- Array methods the frontend maps to rules name registered rules.
"""
import numpy as np
import pytest

import zymo
from zymo import testing
from zymo.frontend.expr import METHODS
from zymo.rules import REGISTRY
from zymo.rules.registry import rule_for_callable

# ufuncs zymo does not differentiate, and why (calls are refused with UnsupportedCall)
GAPS = {
    "divmod": "returns a tuple (use // and %)", "frexp": "returns a tuple of mantissa and exponent",
    "modf": "returns a tuple (use np.trunc and subtraction)", "isnat": "datetimes are not supported",
    "vecdot": "use np.einsum or np.sum(a * b, axis=-1)", "matvec": "use np.matmul", "vecmat": "use np.matmul",
}

REQUESTED = """
add subtract multiply divide power float_power exp exp2 expm1 log log2 log10 log1p sqrt cbrt square reciprocal
sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh hypot arctan2 maximum minimum fmax fmin
absolute sign clip where logaddexp floor ceil round isfinite
sum prod mean var std max min cumsum cumprod argmax argmin linalg.norm
reshape transpose swapaxes moveaxis squeeze expand_dims concatenate stack hstack vstack broadcast_to flip roll
tile repeat diag trace outer inner tensordot einsum
dot matmul linalg.solve linalg.inv linalg.det linalg.slogdet linalg.cholesky linalg.eigh linalg.qr linalg.svd
linalg.lstsq greater less equal not_equal logical_and add.at
""".split()

SCIPY = """special.gammaln special.digamma special.erf special.erfc special.expit special.logit special.logsumexp
special.xlogy special.softmax linalg.solve_triangular linalg.expm linalg.cho_factor linalg.cho_solve
linalg.lu_factor linalg.lu_solve""".split()


def _resolve(path, root=np):
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_ufunc_is_covered_or_a_documented_gap():
    ufuncs = sorted(n for n in dir(np) if isinstance(getattr(np, n), np.ufunc))
    missing = [n for n in ufuncs if rule_for_callable(getattr(np, n)) is None and n not in GAPS]
    assert not missing, f"ufuncs without a rule and not in GAPS: {missing}"
    stale = [n for n in GAPS if rule_for_callable(getattr(np, n)) is not None]
    assert not stale, f"GAPS lists ufuncs that have rules now: {stale}"


def test_the_requested_functions_have_rules():
    missing = [n for n in REQUESTED if rule_for_callable(_resolve(n)) is None]
    assert not missing, missing
    pytest.importorskip("scipy")
    import scipy.linalg
    import scipy.special

    assert not [n for n in SCIPY if rule_for_callable(_resolve(n, scipy)) is None]
    assert rule_for_callable(np.random.rand) is not None  # bound methods of the global RandomState


def test_every_rule_has_both_directions_or_is_nondiff():
    bad = []
    for key, rule in REGISTRY.items():
        if rule.nondiff or rule.alloc or rule.parts or getattr(rule, "via", None):
            continue
        jv, vj = set(rule.jvps()), set(rule.vjps())
        if not jv or jv != vj:
            bad.append((key, sorted(jv), sorted(vj)))
    assert not bad, f"rules without matching jvp/vjp: {bad}"


def test_methods_name_registered_rules():
    assert not [m for m, k in METHODS.items() if k not in REGISTRY]


def _public_callables():
    out = []
    for mod, prefix in [(np, "np"), (np.linalg, "np.linalg")]:
        for name in sorted(dir(mod)):
            if name.startswith("_"):
                continue
            obj = getattr(mod, name)
            if callable(obj) and not isinstance(obj, type) and rule_for_callable(obj) is None:
                out.append((f"{prefix}.{name}", obj))
    return out


@pytest.mark.slow
def test_functions_without_rules_are_refused_at_the_users_line():
    calls = _public_callables()
    assert len(calls) > 100
    silent = []
    for name, fn in calls:
        f = testing.expr_factory("fn(x)", 1, "uses_" + name.replace(".", "_"))(fn)
        try:
            zymo.ir(f, np.ones(3))
        except zymo.UnsupportedCall as e:
            assert "_zymo_case_" in str(e), (name, str(e))  # names the user's file
            continue
        silent.append(name)
    # lowered by the frontend itself (frontend/containers.py): a copy, or stores into np.empty
    silent = [s for s in silent if s not in ("np.array", "np.asarray")]
    assert not silent, f"accepted without a rule: {silent}"


def test_gap_ufunc_error_message():
    f = testing.expr_factory("fn(x, 2.0)", 1, "uses_divmod")(np.divmod)
    with pytest.raises(zymo.UnsupportedCall, match="cannot differentiate a call to") as e:
        zymo.gradient(zymo.Reverse, f, np.ones(3))
    assert "fn(x, 2.0)" in str(e.value)


def test_the_published_coverage_table_is_current():
    """docs/coverage.md lists every public NumPy and scipy.special function with its status."""
    from pathlib import Path

    from zymo.rules import coverage

    published = (Path(__file__).resolve().parents[2] / "docs" / "coverage.md").read_text()
    assert published == coverage.markdown(), "regenerate: python -m zymo.rules.coverage > docs/coverage.md"
    statuses = {(ns, n): s for ns, n, s, _ in coverage.entries()}
    assert statuses[("numpy", "sin")] == "differentiable"
    assert statuses[("numpy", "argmax")] == "zero derivative"
    assert statuses[("numpy", "zeros")] == "allocation"
