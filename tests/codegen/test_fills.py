"""Diagonal fills (`codegen/fills.py`, `runtime.arrays.fill_diagonal`): a loop outside loops that
stores a constant on a matrix's diagonal runs as one NumPy call under "kernels", not as a
kernel of its own, and computes what the loop computes, raising where it raises."""
import ast
import warnings

import numpy as np
import pytest
from helpers import assert_tree_close, fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse
from zymo.codegen.fills import diagonal_fills
from zymo.runtime import fill_diagonal


def gram_unit(A, C, w):
    """A Gram matrix with its diagonal set to one (correlation's shape), then a weighted sum."""
    n, m = A.shape
    for i in range(m):
        for j in range(m):
            C[i, j] = 0.0
            for k in range(n):
                C[i, j] += A[k, i] * A[k, j]
    for i in range(m):
        C[i, i] = 1.0
    return np.sum(w * C * C)


def _args():
    r = np.random.default_rng(3)
    return [r.random((5, 4)), np.zeros((4, 4)), r.random((4, 4))]


def _grad(numba):
    A, C, w = _args()
    dA = np.zeros_like(A)
    zymo.autodiff(Reverse, gram_unit, Active, Duplicated(A, dA), Duplicated(C, np.zeros_like(C)), Const(w),
                  numba=numba)
    return dA


def test_the_gradient_through_a_diagonal_fill_is_exact():
    g = _grad("kernels")
    assert np.all(g != 0.0)
    assert_tree_close(g, _grad(False), rtol=1e-13, atol=0)  # the Python backend (the Gram nest is a BLAS call)
    A, C, w = _args()
    assert_tree_close(g, fd_grad(gram_unit, [A, C, w])[0], rtol=1e-6, atol=1e-8)
    fwd = np.zeros_like(A)
    for idx in np.ndindex(A.shape):
        e = np.zeros_like(A)
        e[idx] = 1.0
        A, C, w = _args()
        fwd[idx] = zymo.autodiff(Forward, gram_unit, Duplicated, Duplicated(A, e), Duplicated(C, np.zeros_like(C)),
                                 Const(w), numba="kernels")[0]
    assert_tree_close(g, fwd, rtol=1e-12, atol=1e-14)


def test_kernels_run_both_fills_as_numpy_calls():
    A, C, w = _args()
    src = zymo.generated_code(Reverse, gram_unit, Active, Duplicated(A, np.zeros_like(A)),
                              Duplicated(C, np.zeros_like(C)), Const(w), numba="kernels")
    kernels, program = src.split("# the program (Python)")
    assert "_rt.fill_diagonal(C, n, 1.0)" in program
    assert "_rt.fill_diagonal(dC, n, 0.0)" in program  # the adjoint's reset of the diagonal's shadow
    names = [f.name for f in ast.parse(kernels).body if isinstance(f, ast.FunctionDef)]
    assert [n for n in names if not n.endswith("_parallel")] == ["_kernel_0", "_kernel_1"]  # no kernel for a fill


def _rewritten(src, ndims=None):
    fn = ast.parse(src).body[0]
    changed = diagonal_fills(fn, ndims or {"x": 2, "y": 1})
    return changed, ast.unparse(fn)


def test_the_rewrite_takes_a_top_level_fill_and_one_in_a_branch():
    changed, out = _rewritten("def f(x, n):\n    for i in range(n):\n        x[i, i] = 1.0\n"
                              "    if n > 2:\n        for j in range(0, 3):\n            x[j, j] = -2\n")
    assert changed
    assert "_rt.fill_diagonal(x, n, 1.0)" in out and "_rt.fill_diagonal(x, 3, -2)" in out and "for" not in out


@pytest.mark.parametrize("src", [
    "def f(x, n):\n    for i in range(n):\n        x[i, i] = 1.0\n    return i",  # the index read after
    "def f(x, n):\n    for k in range(2):\n        for i in range(n):\n            x[i, i] = 1.0",  # inside a loop
    "def f(x, n, c):\n    for i in range(n):\n        x[i, i] = c",  # not a constant
    "def f(x, n):\n    for i in range(n):\n        x[i, i] = float('nan')",
    "def f(x, n):\n    for i in range(n):\n        x[i, i] = 1e400",  # not finite
    "def f(y, n):\n    for i in range(n):\n        y[i, i] = 1.0",  # not a known 2-d array
    "def f(x, n):\n    for i in range(1, n):\n        x[i, i] = 1.0",  # not from 0
    "def f(x, n):\n    for i in range(n):\n        x[i, i + 1] = 1.0",  # off the diagonal
    "def f(x, n):\n    for i in range(n):\n        x[i, i] = 1.0\n        n = 3",  # two statements
    "def f(x, n):\n    for i in range(n):\n        x[i, i] += 1.0",
    "def f(x, n):\n    for i in range(n):\n        x[i, i] = 1.0\n    else:\n        pass",
])
def test_the_rewrite_leaves_other_loops(src):
    changed, out = _rewritten(src)
    assert not changed and "fill_diagonal" not in out


class _Sub(np.ndarray):
    pass


def _loop(x, n, value):
    for i in range(n):
        x[i, i] = value


def _both(make, n, value, errstate=None):
    """(array, exception, warnings) after the loop and after `fill_diagonal`, from equal starts."""
    out = []
    for f in (_loop, fill_diagonal):
        x = make()
        with warnings.catch_warnings(record=True) as caught, np.errstate(**(errstate or {})):
            warnings.simplefilter("always")
            try:
                f(x, n, value)
                err = None
            except Exception as e:  # compared below
                err = (type(e), str(e))
        out.append((x, err, [(w.category, str(w.message)) for w in caught]))
    (a, ea, wa), (b, eb, wb) = out
    assert wa == wb
    return (a, ea), (b, eb)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int64, np.bool_])
@pytest.mark.parametrize("shape,n", [((4, 4), 4), ((4, 6), 3), ((6, 4), 4), ((4, 4), 0), ((4, 4), -2),
                                     ((3, 5), 5), ((5, 3), 4), ((4, 4), 9)])
@pytest.mark.parametrize("value", [1.0, -0.0, 0.1, 3, True, 1e300, -1e-320, 2 ** 70 + 1])
def test_fill_diagonal_does_what_the_loop_does(dtype, shape, n, value):
    def make():
        return np.arange(np.prod(shape)).reshape(shape).astype(dtype) + 7

    (a, ea), (b, eb) = _both(make, n, value)
    assert ea == eb
    assert a.dtype == b.dtype and np.array_equal(a, b) and np.array_equal(np.signbit(a.real), np.signbit(b.real))


def test_fill_diagonal_on_views_other_arrays_and_bounds():
    base = np.arange(64.0).reshape(8, 8)
    for make in (lambda: base.copy()[1::2, ::3], lambda: base.copy().T, lambda: base.copy()[2:, 1:6]):
        for n in (0, 2, 3, 7):
            (a, ea), (b, eb) = _both(make, n, 5.0)
            assert ea == eb and np.array_equal(a, b)
    ro = np.zeros((3, 3))
    ro.setflags(write=False)
    (_, ea), (_, eb) = _both(lambda: ro, 2, 1.0)
    assert ea == eb and ea[0] is ValueError
    (a, ea), (b, eb) = _both(lambda: np.zeros((2, 3)).view(_Sub), 2, 1.0)  # not an ndarray: the loop itself
    assert ea is None and eb is None and type(b) is _Sub and np.array_equal(a, b) and b[1, 1] == 1.0
    (_, ea), (_, eb) = _both(lambda: [[0.0, 0.0], [0.0, 0.0]], 2, 1.0)
    assert ea == eb and ea[0] is TypeError
    (_, ea), (_, eb) = _both(lambda: np.zeros((3, 3)), 2.0, 1.0)  # range(2.0): the loop's TypeError
    assert ea == eb and ea[0] is TypeError
    (a, ea), (b, eb) = _both(lambda: np.zeros((3, 3)), np.int32(2), 1.0)
    assert ea is None and eb is None and np.array_equal(a, b)


@pytest.mark.parametrize("n", [-1, 0, 2, 5])
def test_fill_diagonal_raises_and_warns_as_the_loop_does(n):
    """A constant the element type cannot hold (found in review): the loop casts it at each
    store, so no store means no error, and each store warns (or raises) once."""
    for value, errstate in [(1e300, {"over": "raise"}), (1e300, {}), (2 ** 1100, {}), (1e-50, {"under": "raise"})]:
        (a, ea), (b, eb) = _both(lambda: np.ones((3, 3), np.float32), n, value, errstate)
        assert ea == eb and np.array_equal(a, b)


def huge_fill(x, d):
    """A user's fill of a constant no float holds: the loop, not a fill, and the same error."""
    n = d.shape[0]
    for i in range(n):
        d[i, i] = 17976931348623157000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000  # noqa: E501
    return np.sum(x * x)


@pytest.mark.parametrize("numba", [False, "kernels"])
def test_a_constant_beyond_a_float_is_left_to_the_loop(numba):
    x = np.array([0.5, -1.5])
    dx = np.zeros(2)
    zymo.autodiff(Reverse, huge_fill, Active, Duplicated(x, dx), Const(np.zeros((0, 0))), numba=numba)
    assert_tree_close(dx, 2 * x, rtol=0, atol=0)
    with pytest.raises(OverflowError):
        zymo.autodiff(Reverse, huge_fill, Active, Duplicated(x, dx), Const(np.zeros((2, 2))), numba=numba)
    assert _rewritten("def f(x, n):\n    for i in range(n):\n        x[i, i] = 2 ** 1100\n")[0] is False
    assert _rewritten(f"def f(x, n):\n    for i in range(n):\n        x[i, i] = {2 ** 1100}\n")[0] is False


def test_the_rewrite_needs_an_index_other_than_the_array():
    assert _rewritten("def f(x, n):\n    for x in range(n):\n        x[x, x] = 1.0\n")[0] is False
