"""A float32 array carried through a loop that makes it float64 (the frontend converts the
carry with a copy, `zymo.as_dtype`), and the refusal when an in-place write could tell
the copy from the original."""
import numpy as np
import pytest

import zymo
from zymo import Reverse
from zymo.errors import ZymoTypeError
from zymo.testing import check_grad


def widening(x):
    acc = x * 0.5
    for i in range(3):
        acc = np.float_power(acc, 1.0) * 1.5 + x * (i + 1.0)
    return acc


def widening_written(x, o):
    acc = x * 0.5
    for _i in range(3):
        o[0] = acc[0]          # float32 memory written in place
        acc = np.float_power(acc, 1.0) * 1.5 + x
    return acc


def test_widening_carry_is_differentiated():
    x = np.random.default_rng(0).normal(size=4).astype(np.float32)
    check_grad(widening, x)
    (g,) = zymo.gradient(Reverse, lambda_sum, x)
    np.testing.assert_allclose(g, np.full(4, 0.5 * 1.5**3 + 1.5**2 + 2 * 1.5 + 3), rtol=1e-6)


def lambda_sum(x):
    return np.sum(widening(x))


def test_widening_carry_with_in_place_writes_is_refused():
    x = np.ones(3, np.float32)
    with pytest.raises(ZymoTypeError) as e:
        zymo.gradient(Reverse, widening_written, x, np.zeros(3, np.float32))
    assert "written in place" in str(e.value) and "test_dtype_carry.py" in str(e.value)
