"""A ufunc's `out=` in compiled code follows NumPy's shape rule: every array operand
broadcasts to `out`'s shape unchanged. Numba's own ufuncs with `out` do not check it (a 2-d
operand into a 1-d `out` wrote the first row's values and then memory beside `out`), so
`np_shim` checks before calling them and raises NumPy's ValueError. Operands that broadcast
into `out` keep working.
"""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.codegen.numba import np_shim as snp
from zymo.errors import ZymoTypeError


@numba.njit
def _floor_into(x, o):
    snp.floor(x, o)
    return o


@numba.njit
def _add_into(x, y, o):
    snp.add(x, y, o)
    return o


@numba.njit
def _exp_into(x, o):
    snp.exp(x, o)
    return o


BAD = [
    (_floor_into, (np.ones((2, 3)), np.zeros(3))),                  # operand of higher rank
    (_floor_into, (np.ones((2, 3)), np.zeros((2, 2)))),             # same rank, other shape
    (_floor_into, (np.ones((2, 3)), np.zeros((3, 2)))),
    (_floor_into, (np.ones((1, 3)) + 0.5, np.zeros((2, 2)))),
    (_add_into, (np.ones((2, 3)), np.ones(3), np.zeros(3))),
    (_add_into, (1.0, np.ones((2, 3)), np.zeros(3))),
    (_add_into, (np.ones(4), 1.0, np.zeros(3))),
    (_exp_into, (np.ones((2, 3)), np.zeros(3))),                    # float64: the vector-math path
    (_exp_into, (np.ones((2, 3), np.int64), np.zeros(3))),          # int operand: Numba's ufunc
    (_floor_into, (np.ones((2, 3), np.float32), np.zeros(3, np.float32))),
]


@pytest.mark.parametrize("fn, args", BAD, ids=range(len(BAD)))
def test_an_out_that_operands_do_not_broadcast_to_raises_as_numpy(fn, args):
    with pytest.raises(ValueError):
        fn.py_func(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])  # NumPy's own rule
    out = args[-1]
    before = out.copy()
    with pytest.raises(ValueError):
        fn(*args)
    np.testing.assert_array_equal(out, before)


GOOD = [
    (_floor_into, (np.arange(6.0).reshape(1, 6) / 4, np.zeros((3, 6)))),
    (_floor_into, (np.arange(3.0) / 2, np.zeros((2, 3)))),
    (_add_into, (np.arange(2.0).reshape(2, 1), np.arange(3.0), np.zeros((2, 3)))),
    (_add_into, (np.arange(2.0).reshape(2, 1), 1.5, np.zeros((2, 3)))),
    (_add_into, (np.arange(6, dtype=np.int64).reshape(2, 3), 2, np.zeros((2, 3), np.int64))),
    (_exp_into, (np.arange(3, dtype=np.int64), np.zeros((2, 3)))),
]


@pytest.mark.parametrize("fn, args", GOOD, ids=range(len(GOOD)))
def test_operands_that_broadcast_into_out_keep_numpys_values(fn, args):
    want = fn.py_func(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])
    got = fn(*args)
    assert got is args[-1]
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert np.any(got != 0)


def exp_rows_into(x, o):
    np.exp(x, out=o)
    return np.sum(o)


@pytest.mark.parametrize("backend", [False, True, "kernels"])
def test_a_gradient_with_a_lower_rank_out_is_refused_at_the_users_line(backend):
    """The front end refuses the program before any backend (the shim's check is for
    generated code)."""
    x = np.ones((2, 3))
    with pytest.raises(ZymoTypeError, match=r"out= has type f64\[:\].*\n.*test_numba_ufunc_out.py"):
        zymo.autodiff(Reverse, exp_rows_into, Active, Duplicated(x, np.zeros_like(x)),
                      Duplicated(np.zeros(3), np.zeros(3)), numba=backend)
