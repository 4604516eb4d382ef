"""Rule arguments are bound by the NumPy function's own signature.

A call names the primal's parameters (`np.clip(x, a_min=lo)`, NumPy 2's `min=`, a method's
`x.clip(max=hi)`, `np.sum(x, 0, None, None, True)` positionally); `Rule.binding` maps them to
the rule's parameters. An argument that would change the derivative and that the rule does not
take (`np.sum(x, where=m)`) is refused at the user's line, never dropped. Each derivative is
checked against central differences and the other mode (`zymo.testing.check_grad`), and against a
closed form that a dropped argument would miss."""
from __future__ import annotations

import numpy as np
import pytest

import zymo
from zymo import Forward, Reverse
from zymo.errors import UnsupportedCall
from zymo.testing import check_grad


def clip_keywords(x):
    return np.sum(np.clip(x, a_min=0.1, a_max=1.1) ** 2)


def clip_min_max(x):
    return np.sum(np.clip(x, min=0.1, max=1.1) ** 2)


def clip_method(x):
    return np.sum(x.clip(max=1.1) * x)


def clip_upper_only(x):
    return np.sum(np.clip(x, a_min=None, a_max=1.1))


X = np.array([0.0, 0.5, 2.0, -1.0, 0.9])


@pytest.mark.slow
@pytest.mark.parametrize("f", [clip_keywords, clip_min_max])
@pytest.mark.parametrize("numba", [False, True])
def test_clip_keyword_bounds_are_the_bounds(f, numba):
    inside = (X >= 0.1) & (X <= 1.1)
    expected = np.where(inside, 2 * X, 0.0)  # the bounds' own derivative is not asked for
    for mode in (Reverse, Forward):
        (g,) = zymo.gradient(mode, f, X.copy(), numba=numba)
        np.testing.assert_allclose(g, expected, atol=1e-12)
    check_grad(f, X + 0.013)


def test_clip_method_and_one_sided_keywords():
    (g,) = zymo.gradient(Reverse, clip_method, X.copy())
    np.testing.assert_allclose(g, np.where(X <= 1.1, 2 * X, 1.1))
    (g,) = zymo.gradient(Forward, clip_upper_only, X.copy())
    np.testing.assert_allclose(g, (X <= 1.1).astype(float))
    check_grad(clip_method, X + 0.013)


def keepdims_keyword(x):
    return np.sum(np.sum(x, 1, keepdims=True) * x)


def keepdims_positional(x):
    return np.sum(np.sum(x, 1, None, None, True) * x)


def var_keyword(x):
    return np.var(x, axis=0, ddof=1).sum()


def test_options_bind_by_name_and_positional_options_are_refused():
    x = np.random.default_rng(0).standard_normal((3, 4))
    # d/dx sum_ij (sum_k x_ik) x_ij = 2 * rowsum broadcast
    (g,) = zymo.gradient(Reverse, keepdims_keyword, x.copy())
    np.testing.assert_allclose(g, 2 * np.sum(x, axis=1, keepdims=True) * np.ones_like(x))
    check_grad(keepdims_keyword, x)
    (g,) = zymo.gradient(Reverse, var_keyword, x.copy())
    np.testing.assert_allclose(g, 2 * (x - x.mean(0)) / (x.shape[0] - 1))
    check_grad(var_keyword, x)
    with pytest.raises(UnsupportedCall, match="by keyword"):
        zymo.gradient(Reverse, keepdims_positional, x.copy())


def sum_where(x):
    return np.sum(x, where=x > 0)


def max_initial(x):
    return np.max(x, initial=10.0)


def mean_where_true(x):
    return np.mean(x * x, where=True)


@pytest.mark.parametrize("f, arg", [(sum_where, "where="), (max_initial, "initial=")])
def test_an_argument_the_rule_does_not_take_is_refused_at_the_users_line(f, arg):
    with pytest.raises(UnsupportedCall) as e:
        zymo.gradient(Reverse, f, X.copy())
    msg = str(e.value)
    assert arg in msg and "test_binding.py" in msg and f"np.{f.__name__.split('_')[0]}(" in msg


def test_an_argument_at_its_default_is_accepted():
    (g,) = zymo.gradient(Reverse, mean_where_true, X.copy())
    np.testing.assert_allclose(g, 2 * X / X.size)
