"""`codegen/numba/compile_costs.py`: Numba's slice-assignment error is swapped for one that costs
no string formatting to compile, and still raises NumPy's exception type with both shapes;
a derivative that assigns to slices under `numba=True` is unchanged."""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

import zymo
from zymo import Forward, Reverse
from zymo.codegen.numba import compile_costs, np_shim  # noqa: F401  (np_shim installs the swap)


def test_the_slice_assignment_error_is_swapped_on_this_numba():
    assert compile_costs.install() == ["raise_with_shape_context"]


@pytest.mark.parametrize("rank", [1, 2])
def test_a_mismatched_slice_assignment_raises_with_both_shapes(rank):
    @numba.njit
    def assign(a, b):
        a[1:3] = b
        return a

    a = np.zeros((5,) + (3,) * (rank - 1))
    good = np.ones((2,) + (3,) * (rank - 1))
    np.testing.assert_array_equal(assign(a, good)[1:3], good)
    bad = np.ones((4,) + (3,) * (rank - 1))
    with pytest.raises(ValueError) as info:
        assign(a, bad)
    assert info.value.args[1:] == ((2,) + (3,) * (rank - 1), bad.shape)
    with pytest.raises(ValueError):  # NumPy's own exception type for the same statement
        a[1:3] = bad


def shifted_products(x):
    y = np.empty(len(x) + 1)
    y[0] = 1.0
    y[1:] = x * x
    z = np.zeros((2, len(x)))
    z[0, :] = np.sin(x)
    z[1, :] = y[:-1] * x
    return np.sum(y * y) + np.sum(z[0] * z[1])


@pytest.mark.parametrize("mode", [Reverse, Forward], ids=["reverse", "forward"])
def test_derivatives_that_assign_to_slices_compile_and_agree(mode, tmp_path, monkeypatch):
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    x = np.array([0.3, -0.7, 1.1, 0.5])
    got = zymo.gradient(mode, shifted_products, x, numba=True)[0]
    ref = zymo.gradient(Reverse if mode is Forward else Forward, shifted_products, x)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    h = 1e-6
    fd = np.array([(shifted_products(x + h * e) - shifted_products(x - h * e)) / (2 * h) for e in np.eye(len(x))])
    assert np.max(np.abs(fd)) > 0.1
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
