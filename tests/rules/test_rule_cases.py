"""Every registered derivative rule, against finite differences, in forward and reverse mode.

The cases (test functions and inputs) come from `zymo.testing.rule_cases`: one
pytest item per case, for every key of `zymo.rules.REGISTRY`, so a rule added
without cases fails here (no silent skips). Each case checks forward tangents and
reverse adjoints against central differences, forward against reverse, the
primal, that the IR verifies and that it calls the rule; `nondiff` rules must
also give a derivative of exactly zero where they are the only dependence.

Cases that fail because of known zymo bugs are listed in KNOWN_BUGS and marked
xfail(strict=True): the suite stays green while the bug is open and turns red
(XPASS) when it is fixed, so the entry is removed then.

The last part tests the tester: deliberately wrong rules (swapped into the
registry with monkeypatch) must be caught, by the mode that uses them.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import zymo
from zymo import testing
from zymo.rules import REGISTRY
from zymo.rules.registry import Rule

# case-name prefix -> the zymo bug that makes those cases fail
KNOWN_BUGS: dict[str, str] = {
    # e.g. "numpy.absolute[out1,": "np.absolute(x, out=o) is dropped (the frontend passed out= as a keyword)",
}


def _known_bug(name: str) -> str | None:
    for prefix, why in KNOWN_BUGS.items():
        if name.startswith(prefix):
            return why
    return None


def _params() -> list:
    out = []
    for key in sorted(REGISTRY):
        if getattr(REGISTRY[key], "user", False):
            continue  # users' rules (tests/rules/test_custom_rules.py) are checked with check_custom_rule
        if getattr(REGISTRY[key], "part_of", None):
            continue  # one element of a tuple-returning function: its cases are that function's
        try:
            cases = testing.rule_cases(key)
        except KeyError:
            out.append(pytest.param(key, None, id=f"{key}:no-cases"))
            continue
        for c in cases:
            why = _known_bug(c.name)
            marks = [pytest.mark.xfail(strict=True, reason=f"zymo bug: {why}")] if why else []
            out.append(pytest.param(key, c, id=c.name.replace("[", ":").rstrip("]"), marks=marks))
    return out


PARAMS = _params()


@pytest.mark.parametrize("key, case", PARAMS)
def test_rule(key, case):
    if case is None:
        pytest.fail(f"rule {key} has no test cases: declare them on the rule (`cases=`)")
    case.run(("forward", "reverse"))


@pytest.mark.slow
def test_every_registered_rule_is_exercised():
    """Each key has cases whose IR calls it, and the parametrized test enumerates them all."""
    enumerated = {p.values[0] for p in PARAMS if p.values[1] is not None}
    missing = sorted(k for k in set(REGISTRY) - enumerated
                     if not getattr(REGISTRY[k], "part_of", None) and not getattr(REGISTRY[k], "user", False))
    assert not missing, f"rules without test cases: {missing}"
    unexercised = []
    for key in sorted(REGISTRY):
        if getattr(REGISTRY[key], "user", False):
            continue
        cases = testing.rule_cases(key)
        expect = testing.expected_keys(REGISTRY[key])
        if not any(k in c.keys() for c in cases for k in expect):
            unexercised.append(key)
    assert not unexercised, f"rules whose cases never call them: {unexercised}"


def test_known_bug_entries_match_cases():
    names = [p.values[1].name for p in PARAMS if p.values[1] is not None]
    for prefix in KNOWN_BUGS:
        assert any(n.startswith(prefix) for n in names), f"KNOWN_BUGS entry {prefix!r} matches no case"


def test_cases_cover_flags_shapes_and_dtypes():
    """The systematic cases are not only scalars: shapes, dtypes and forms per rule kind."""
    sin = testing.rule_cases("numpy.sin")
    shapes = {tuple(np.shape(c.args[0])) for c in sin}
    assert {(), (5,), (3, 4)} <= shapes
    assert any(isinstance(c.args[0], np.ndarray) and c.args[0].ndim == 0 for c in sin)  # 0-d arrays
    assert {str(c.args[0].dtype) for c in sin if isinstance(c.args[0], np.ndarray)} == {"float64", "float32"}
    forms = {c.fn.__name__ for c in sin}
    assert {"call1", "out1", "inplace1", "loop1"} <= forms
    add = testing.rule_cases("numpy.add")
    assert any(np.shape(c.args[0]) != np.shape(c.args[1]) for c in add if len(c.args) == 2)  # broadcasting
    assert any(len({np.result_type(a) for a in c.args}) == 2 for c in add)  # mixed float32 / float64
    assert any(c.kind == "zero" for c in testing.rule_cases("lt"))
    assert any(c.fn.__name__ == "view_write" for c in testing.rule_cases("numpy.transpose"))


def test_check_rule_runs_all_cases_of_a_rule():
    cases = testing.check_rule("math.sin")
    assert cases and all(c.key == "math.sin" for c in cases)
    with pytest.raises(KeyError, match="no derivative rule"):
        testing.check_rule("numpy.no_such_function")


@pytest.mark.slow
def test_check_rule_reports_every_failing_case(swap_rule):
    """check_rule lists all failing cases of a rule in one AssertionError."""
    swap_rule(add_not_elementwise)
    with pytest.raises(AssertionError) as e:
        testing.check_rule("numpy.add", modes=("reverse",))
    msg = str(e.value)
    assert msg.startswith("check_rule('numpy.add'): ")
    for name in ["numpy.add[call2,3x4,4,float64]", "numpy.add[call2,3x1,1x4,float32]", "numpy.add[call2,s,5,float64]"]:
        assert name in msg


def test_max_ties_share_the_derivative():
    """At a tie (where finite differences do not apply) the rule's documented subgradient."""
    x = np.array([1.0, 3.0, 3.0, -2.0])
    (g,) = zymo.gradient(zymo.Reverse, _np_max, x)
    np.testing.assert_allclose(g, [0.0, 0.5, 0.5, 0.0])
    (t,) = zymo.autodiff(zymo.Forward, _np_max, zymo.Duplicated, zymo.Duplicated(x, np.array([0.0, 1.0, 3.0, 0.0])))
    assert t == pytest.approx(2.0)


def _np_max(x):
    return np.max(x)


def test_domains_respect_the_functions():
    rng = np.random.default_rng(0)
    for key, check in [("numpy.log", lambda x: x > 0), ("math.sqrt", lambda x: x > 0),
                       ("math.asin", lambda x: abs(x) < 1), ("math.acos", lambda x: abs(x) < 1),
                       ("numpy.absolute", lambda x: abs(x) > 0.1), ("math.log1p", lambda x: x > -1)]:
        for _ in range(50):
            (x,) = testing.draw_inputs(key, ((),), "float64", rng)
            assert check(x), (key, x)
    for _ in range(50):
        (x,) = testing.draw_inputs("math.floor", ((),), "float64", rng)
        frac = x - math.floor(x)
        assert 0.05 < frac < 0.95 and abs(frac - 0.5) > 0.05
        x, y = testing.draw_inputs("lt", ((5,), (5,)), "float64", rng)
        assert np.all(np.abs(x - y) >= 0.3 - 1e-12)


# -- test the tester --------------------------------------------------------------------
# Wrong rules, swapped into the registry for one test. Rule bodies may only use np and math.


class sin_bad_vjp(Rule, key="numpy.sin", fn=np.sin, register=False, elementwise=True, out=True):
    def jvp_x(t, ans, x): return t * np.cos(x)
    def vjp_x(g, ans, x): return -g * np.cos(x)  # wrong sign


class sin_bad_jvp(Rule, key="numpy.sin", fn=np.sin, register=False, elementwise=True, out=True):
    def jvp_x(t, ans, x): return t * 0.0  # zero
    def vjp_x(g, ans, x): return g * np.cos(x)


class sin_both_wrong(Rule, key="numpy.sin", fn=np.sin, register=False, elementwise=True, out=True):
    """Forward and reverse agree with each other; only finite differences can tell."""
    def jvp_x(t, ans, x): return t * np.sin(x)
    def vjp_x(g, ans, x): return g * np.sin(x)


class sin_slightly_off(Rule, key="numpy.sin", fn=np.sin, register=False, elementwise=True, out=True):
    def jvp_x(t, ans, x): return t * np.cos(x) * 1.0001
    def vjp_x(g, ans, x): return g * np.cos(x) * 1.0001


class sin_wrong_primal(Rule, key="numpy.sin", fn=np.sin, call="np.cos", register=False, elementwise=True,
                       out=True):
    def jvp_x(t, ans, x): return t * np.cos(x)
    def vjp_x(g, ans, x): return g * np.cos(x)


class math_sin_bad_vjp(Rule, key="math.sin", fn=math.sin, register=False):
    def jvp_x(t, ans, x): return t * math.cos(x)
    def vjp_x(g, ans, x): return g * math.sin(x)  # sin instead of cos


class math_sin_bad_jvp(Rule, key="math.sin", fn=math.sin, register=False):
    def jvp_x(t, ans, x): return -t * math.cos(x)
    def vjp_x(g, ans, x): return g * math.cos(x)


class exp_nondiff(Rule, key="numpy.exp", fn=np.exp, register=False, nondiff=True):
    """exp declared non-differentiable: every derivative is zero."""


class add_not_elementwise(Rule, key="numpy.add", fn=np.add, register=False, out=True):
    """add without the elementwise flag: adjoints are not summed back to broadcast operands."""
    def jvp_x(t, ans, x, y): return t
    def jvp_y(t, ans, x, y): return t
    def vjp_x(g, ans, x, y): return g
    def vjp_y(g, ans, x, y): return g


class mul_bad_y(Rule, key="mul", fn=__import__("operator").mul, template="{0} * {1}", register=False,
                elementwise=True):
    """The adjoint of y uses y instead of x: right only where x == y."""
    def jvp_x(t, ans, x, y): return t * y
    def jvp_y(t, ans, x, y): return x * t
    def vjp_x(g, ans, x, y): return g * y
    def vjp_y(g, ans, x, y): return y * g


@pytest.fixture
def swap_rule(monkeypatch):
    def swap(rule):
        monkeypatch.setitem(REGISTRY, rule.key, rule)
        zymo.cache_clear()

    yield swap
    zymo.cache_clear()


def _sin_sum(x):
    return np.sum(np.sin(x) * x)


def _math_sin(x, y):
    return math.sin(x) * y


@pytest.mark.slow
@pytest.mark.parametrize("bad, caught_by", [
    (sin_bad_vjp, {"reverse"}),
    (sin_bad_jvp, {"forward"}),
    (sin_both_wrong, {"forward", "reverse"}),
    (sin_slightly_off, {"forward", "reverse"}),
    (sin_wrong_primal, {"forward", "reverse"}),
    (math_sin_bad_vjp, {"reverse"}),
    (math_sin_bad_jvp, {"forward"}),
    (exp_nondiff, {"forward", "reverse"}),
    (mul_bad_y, {"reverse"}),
])
def test_check_rule_catches_a_wrong_rule(swap_rule, bad, caught_by):
    testing.check_rule(bad.key)  # the real rule passes
    swap_rule(bad)
    for modes in [("forward",), ("reverse",), ("forward", "reverse")]:
        if caught_by & set(modes):
            with pytest.raises(AssertionError, match=rf"check_rule\('{bad.key}'\)"):
                testing.check_rule(bad.key, modes=modes)
        else:
            testing.check_rule(bad.key, modes=modes)  # the mode that does not use the bad part passes


def test_check_rule_catches_missing_broadcast_sums(swap_rule):
    swap_rule(add_not_elementwise)
    with pytest.raises(AssertionError) as e:
        testing.check_rule("numpy.add", modes=("reverse",))
    msg = str(e.value)
    assert "numpy.add[call2,3x4,4,float64]" in msg  # a broadcasting case
    assert "numpy.add[call2,5,5,float64]" not in msg  # equal shapes need no sums


def test_check_grad_messages_name_function_argument_and_values(swap_rule):
    swap_rule(sin_bad_vjp)
    x = np.array([0.3, -0.7, 1.1])
    with pytest.raises(AssertionError) as e:
        testing.check_grad(_sin_sum, x, modes=("reverse",))
    msg = str(e.value)
    assert "_sin_sum" in msg and "argument 0 ('x'" in msg and "reverse-mode" in msg
    assert "zymo:" in msg and "finite differences:" in msg
    swap_rule(sin_bad_jvp)
    with pytest.raises(AssertionError) as e:
        testing.check_grad(_sin_sum, x, modes=("forward",))
    msg = str(e.value)
    assert "_sin_sum" in msg and "argument 0 ('x'" in msg and "forward-mode" in msg


def test_check_grad_names_the_wrong_argument(swap_rule):
    swap_rule(math_sin_bad_vjp)
    with pytest.raises(AssertionError, match=r"argument 0 \('x'"):
        testing.check_grad(_math_sin, 0.4, 1.3, modes=("reverse",))
    testing.check_grad(_math_sin, 0.4, 1.3, modes=("reverse",), wrt=[1])  # y's derivative is right


def test_dot_product_test_catches_disagreeing_modes(swap_rule, monkeypatch):
    """With the finite-difference tolerance made useless, forward vs reverse still catches a bad vjp."""
    swap_rule(sin_bad_vjp)
    x = np.array([0.3, -0.7, 1.1])
    with pytest.raises(AssertionError, match="forward and reverse mode disagree"):
        testing.check_grad(_sin_sum, x, rtol=10.0, atol=10.0)


def test_check_grad_catches_assignment_instead_of_accumulation(monkeypatch):
    """Shadows start non-zero: a derivative program that overwrites them is wrong."""
    from zymo import api

    real = api.autodiff

    def overwriting(mode, f, ret, *args):
        if not mode.forward:
            for a in args:
                if isinstance(a, zymo.Duplicated) and isinstance(a.dval, np.ndarray):
                    a.dval[...] = 0.0  # as if the generated code assigned instead of adding
        return real(mode, f, ret, *args)

    monkeypatch.setattr(zymo, "autodiff", overwriting)
    with pytest.raises(AssertionError, match="reverse-mode"):
        testing.check_grad(_sin_sum, np.array([0.3, -0.7, 1.1]), modes=("reverse",))


def test_check_grad_passes_on_correct_derivatives():
    x = np.array([0.3, -0.7, 1.1])
    res = testing.check_grad(_sin_sum, x)
    np.testing.assert_allclose(res.reverse[0] - res.cotangents[0], np.cos(x) * x + np.sin(x), rtol=1e-12)
    res = testing.check_grad(_math_sin, 0.4, 1.3, directions=1)
    assert res.reverse[0] == pytest.approx(math.cos(0.4) * 1.3)
    assert res.reverse[1] == pytest.approx(math.sin(0.4))
    # array results and float32
    testing.check_grad(_array_result, x.astype(np.float32), np.float32(0.5))


def _array_result(x, s):
    return np.tanh(x) * s + x * x


def test_check_grad_rejects_what_it_cannot_check():
    with pytest.raises(ValueError, match="no float"):
        testing.check_grad(lambda n: float(n), 3)
    with pytest.raises(TypeError, match="must return a float"):
        testing.check_grad(_returns_int, 1.5)


def _returns_int(x):
    return 3


def _kink(x):
    return abs(x) * 2.0


def _jump(x):
    if x > 0.0:
        return x + 1.0
    return x


def test_no_verdict_where_finite_differences_do_not_converge():
    """A kink or jump within the step: FiniteDifferenceError, not a claim that zymo is wrong."""
    with pytest.raises(testing.FiniteDifferenceError, match="do not converge"):
        testing.check_grad(_kink, 1e-4, eps=1e-2)
    with pytest.raises(testing.FiniteDifferenceError):
        testing.check_grad(_jump, 1e-4, eps=1e-2)
    testing.check_grad(_kink, 0.5, eps=1e-2)  # away from the kink: a verdict, and zymo is right
    testing.check_grad(_jump, -0.5, eps=1e-2)


AXES = (0, 1)


def _mean_global_axes(x):
    return np.mean(x, axis=AXES) * np.sum(x, axis=AXES)


def test_reduction_axis_from_a_global_tuple():
    """Captured ints are compile-time constants (re-checked on every call), so axes work."""
    testing.check_grad(_mean_global_axes, np.arange(24.0).reshape(2, 3, 4) / 10)


def _reduce_by_argument(x, axes):
    return np.sum(np.sum(x, axis=axes) ** 2) + np.sum(np.max(x, axis=axes) * np.mean(x, axis=axes))


def test_reduction_axes_passed_as_an_argument():
    """`np.sum(x, axis=a)` with `a = (0, 1)` an argument (its ints are values of the program, not
    constants) was refused, "duplicate value in 'axis'": the type of the call was inferred on
    examples that gave every int 1. Python runs it; Numba, which needs constant axes, refuses it."""
    from helpers import fd_grad

    x = np.array([[[0.1, 0.7], [0.3, -0.2]], [[0.5, 0.4], [-0.6, 0.9]], [[0.2, 0.8], [0.05, -0.3]]])
    for axes in ((0, 1), (2, 0), (-1, 1), (0, 1, 2)):
        (g, _) = zymo.gradient(zymo.Reverse, _reduce_by_argument, x, axes)
        fd = fd_grad(lambda x, a=axes: _reduce_by_argument(x, a), [x])[0]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
        s, mx, mean = np.sum(x, axis=axes), np.max(x, axis=axes), np.mean(x, axis=axes)
        n = x.size // np.size(s)
        hit = x == np.expand_dims(mx, axes)
        want = np.expand_dims(2 * s + mx / n, axes) + hit * np.expand_dims(mean, axes)
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
    from zymo.codegen.numba.backend import ZymoNumbaError

    with pytest.raises(ZymoNumbaError, match="constant axis|No implementation"):
        zymo.gradient(zymo.Reverse, _reduce_by_argument, x, (0, 1), numba=True)
