"""Custom rules (`zymo.custom_rule`) and inactive functions (`zymo.inactive`).

Custom rules go through the checker built-in rules use (`zymo.testing.check_custom_rule`:
finite differences in forward and reverse mode, forward against reverse); a wrong rule
is caught; `reads=` limits what the reverse sweep caches; inactive functions run in the
primal and contribute nothing; incomplete rules are refused at the caller's line.
"""
import time

import numpy as np
import pytest

import zymo
from zymo import testing

# -- a custom rule in the simple form: softplus with a hand-written jvp/vjp ------------------


@zymo.custom_rule
def softplus(x):
    return np.log1p(np.exp(x))


@softplus.defjvp
def _softplus_jvp(ans, x, dx):
    return dx / (1.0 + np.exp(-x))


@softplus.defvjp(reads=("x",))
def _softplus_vjp(g, ans, x):
    assert ans is None  # reads= says the vjp does not use ans: it is not recorded
    return (g / (1.0 + np.exp(-x)),)


# two arguments, one of them an integer (not differentiated)
@zymo.custom_rule
def scaled_dot(a, b, k):
    return k * float(a @ b)


@scaled_dot.defjvp
def _sd_jvp(ans, a, b, k, da, db, dk):
    out = 0.0
    if da is not None:
        out += k * float(da @ b)
    if db is not None:
        out += k * float(a @ db)
    return out


@scaled_dot.defvjp
def _sd_vjp(g, ans, a, b, k):
    return g * k * b, g * k * a, None


# the Enzyme form: an augmented primal that returns a tape, and a reverse rule
@zymo.custom_rule
def normalize(x):
    return x / np.sqrt(x @ x)


@normalize.defforward
def _norm_fwd(ans, x, dx):
    n = np.sqrt(x @ x)
    return dx / n - ans * (ans @ dx) / n


def _norm_aug(x):
    n = np.sqrt(x @ x)
    return x / n, n


def _norm_rev(tape, g, x):
    y = x / tape
    return ((g - y * (y @ g)) / tape,)


normalize.defreverse(_norm_aug, _norm_rev, reads=("x",))


def uses_softplus(x):
    acc = 0.0
    for i in range(3):
        acc = acc + np.sum(softplus(x * (i + 1.0)))
    return acc


def uses_dot(a, b):
    return scaled_dot(a, b, 3) * scaled_dot(a, a, 2)


def uses_normalize(x, w):
    return np.sum(normalize(x * x) * w)


@pytest.mark.parametrize("shape", [(), (5,), (3, 4)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_custom_rule_passes_the_rule_checker(shape, dtype):
    x = np.random.default_rng(0).uniform(-2, 2, size=shape).astype(dtype)
    if shape == ():
        x = x[()]  # a NumPy scalar
    testing.check_custom_rule(softplus, x)


def test_custom_rules_in_user_code_forward_and_reverse():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, 4)
    testing.check_grad(uses_softplus, x)
    testing.check_grad(uses_dot, rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3))
    testing.check_grad(uses_normalize, x + 2.0, rng.uniform(-1, 1, 4))
    (g,) = zymo.gradient(zymo.Reverse, uses_softplus, x)
    expect = sum((i + 1.0) / (1.0 + np.exp(-x * (i + 1.0))) for i in range(3))
    np.testing.assert_allclose(g, expect, rtol=1e-12)


def test_reads_limits_what_is_recorded():
    src = zymo.generated_code(zymo.Reverse, uses_softplus, zymo.Active, zymo.Duplicated(np.ones(3), np.zeros(3)))
    assert "jvp_term" not in src and "vjp_term(0, " in src
    call = [ln for ln in src.splitlines() if "vjp_term" in ln][0]
    assert "None" in call  # ans is not passed: not recorded


def _bad_jvp(ans, x, dx):
    return -dx / (1.0 + np.exp(-x))


def _bad_vjp(g, ans, x):
    return (0.0 * g,)


def test_the_checker_catches_a_wrong_custom_rule():
    bad = zymo.custom_rule(lambda x: np.log1p(np.exp(x)))
    bad.defjvp(_bad_jvp)
    bad.defvjp(_bad_vjp)  # zero adjoints
    x = np.array([0.3, -0.2, 1.0])
    with pytest.raises(AssertionError, match="forward-mode"):
        testing.check_custom_rule(bad, x, modes=("forward",))
    with pytest.raises(AssertionError, match="reverse-mode"):
        testing.check_custom_rule(bad, x, modes=("reverse",))


incomplete = zymo.custom_rule(lambda x: x * 2.0)


def uses_incomplete(x):
    return np.sum(incomplete(x))


def test_an_incomplete_rule_is_refused_at_the_callers_line():
    with pytest.raises(zymo.UnsupportedCall, match="incomplete") as e:
        zymo.gradient(zymo.Reverse, uses_incomplete, np.ones(3))
    assert "test_custom_rules.py" in str(e.value) and "incomplete(x)" in str(e.value)


# -- inactive functions ----------------------------------------------------------------------

LOG = []


@zymo.inactive(result=None)
def log_value(label, v):
    LOG.append((label, float(np.sum(v))))


@zymo.inactive
def noise(n):
    return np.random.default_rng(n).normal(size=n)


@zymo.inactive(result=0.0)
def now():
    return time.perf_counter()


def logged(x):
    t0 = now()
    y = x * x + noise(x.shape[0]) * x
    log_value("y", y)
    dt = now() - t0
    return np.sum(y) + 0.0 * dt


def test_inactive_functions_run_in_the_primal_and_have_no_derivative():
    x = np.array([0.5, -1.0, 2.0])
    LOG.clear()
    (g,) = zymo.gradient(zymo.Reverse, logged, x)
    np.testing.assert_allclose(g, 2 * x + np.random.default_rng(3).normal(size=3), rtol=1e-12)
    assert LOG and LOG[-1][0] == "y"
    (t,) = zymo.autodiff(zymo.Forward, logged, zymo.Duplicated, zymo.Duplicated(x, np.ones(3)))
    assert t == pytest.approx(float(np.sum(g)))
    testing.check_grad(logged, x)


def test_inactive_result_is_not_differentiated_even_when_it_depends_on_x():
    """By rule: an inactive function of x contributes nothing (it is a constant to zymo)."""
    (g,) = zymo.gradient(zymo.Reverse, _inactive_of_x, np.array([1.0, 2.0]))
    np.testing.assert_allclose(g, [2.0, 2.0])


@zymo.inactive
def _detached_square(x):
    return x * x


def _inactive_of_x(x):
    return np.sum(_detached_square(x) + 2.0 * x)
