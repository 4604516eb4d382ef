"""Transcendental functions through glibc's vector math (`codegen/numba/vecmath.py`): loops of
`exp`, `log`, `tanh`, `arctan2`, ... in compiled derivative code call libmvec's vector
versions (checked in the LLVM IR), give Numba's own values within 4 units in the last place
with the same special values, keep NumPy's `out=` semantics (overlap, broadcast, read-only and
integer operands), and gradients through them agree with finite differences and the Python
backend in both modes. `ZYMO_VECTOR_MATH=0` turns the lanes off.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from helpers import fd_grad

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse
from zymo.codegen.numba import elementwise as ew
from zymo.codegen.numba import np_shim as snp
from zymo.codegen.numba import vecmath

pytestmark = pytest.mark.skipif(not vecmath.available(), reason="no glibc vector math on this machine")

UNARY = [f for f, (_, n) in vecmath.FUNCS.items() if n == 1]
BINARY = [f for f, (_, n) in vecmath.FUNCS.items() if n == 2]
_DOMAIN = {"arccosh": (1.0, 4.0), "arcsin": (-1.0, 1.0), "arccos": (-1.0, 1.0), "arctanh": (-0.99, 0.99),
           "log": (0.01, 5.0), "log2": (0.01, 5.0), "log10": (0.01, 5.0), "log1p": (-0.9, 5.0)}


@pytest.fixture(scope="module", autouse=True)
def private_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZYMO_CACHE_DIR", str(tmp_path_factory.mktemp("zymo_cache")))
        yield


def _vector_calls(dispatcher) -> set[str]:
    return set(re.findall(r"@(_ZGV\w+)\(", dispatcher.inspect_llvm(dispatcher.signatures[0])))


def _ulps(got, want):
    fin = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    return float(np.max(np.abs(got[fin] - want[fin]) / np.spacing(np.abs(want[fin])), initial=0))


def _inputs(f, dtype, n=1000):
    lo, hi = _DOMAIN.get(f, (-3.0, 3.0))
    return np.random.default_rng(len(f)).uniform(lo, hi, n).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_loops_of_every_function_call_the_vector_versions(dtype):
    """An elementwise statement and a scalar loop over the shim's function, for each function
    and both float types: libmvec's vector version is called, values are within 4 ulps of
    Numba's own loop (NumPy's to float rounding), NaNs and infinities where Numba has them."""
    for f in UNARY + BINARY:
        args = "x0" if f in UNARY else "x0, x1"
        ns = {"ew": ew, "snp": snp, "np": np, "numba": numba}
        exec(f"@numba.njit\ndef stmt(x0, x1):\n    return ew.ew_new('np.{f}({args})', (x0, x1))\n"
             f"@numba.njit\ndef loop(x0, x1, out):\n    for i in range(x0.size):\n"
             f"        out[i] = snp.{f}({args.replace('x0', 'x0[i]').replace('x1', 'x1[i]')})\n"
             f"@numba.njit\ndef own(x0, x1):\n    return np.{f}({args})\n", ns)
        x0, x1 = _inputs(f, dtype), _inputs(f + "_", dtype)
        x0[:4] = [np.inf, -np.inf, np.nan, 0.0]
        out = np.empty_like(x0)
        with np.errstate(all="ignore"):
            got, want = ns["stmt"](x0, x1), ns["own"](x0, x1)
            ns["loop"](x0, x1, out)
            numpy = getattr(np, f)(x0, x1) if f in BINARY else getattr(np, f)(x0)
        suffix = "f" if dtype == np.float32 else ""
        name = vecmath.FUNCS[f][0] + suffix
        for disp in (ns["stmt"], ns["loop"]):
            assert any(c.endswith("_" + name) for c in _vector_calls(disp)), (f, _vector_calls(disp))
        assert got.dtype == out.dtype == want.dtype == dtype
        assert _ulps(got, want) <= 4, f
        assert _ulps(out, want) <= 4, f
        np.testing.assert_allclose(got, numpy, rtol=2e-6 if dtype == np.float32 else 2e-15, err_msg=f)


def test_special_values_and_signed_zeros():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, -1e-310, 710.0, -746.0, 1e300] * 2)
    for f in UNARY:
        ns = {"ew": ew, "numba": numba, "np": np}
        exec(f"@numba.njit\ndef stmt(x):\n    return ew.ew_new('np.{f}(x0)', (x,))\n"
             f"@numba.njit\ndef own(x):\n    return np.{f}(x)\n", ns)
        with np.errstate(all="ignore"):
            got, want = ns["stmt"](x), ns["own"](x)
        number = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]), err_msg=f)
        assert _ulps(got, want) <= 4, f


@numba.njit
def _shim_calls(x, y, z, out):
    a = snp.exp(x)                 # a new array
    b = snp.tanh(x[0])             # a number
    snp.log(z, out=out)            # out=, returning out
    c = snp.arctan2(x, y[0])       # an array and a number
    snp.exp(x[:-1], out=x[1:])     # overlapping: NumPy reads x as it was
    return a, b, c


def test_shim_keeps_numpys_semantics():
    rng = np.random.default_rng(3)
    x, y, z = rng.standard_normal(37), rng.standard_normal(37), rng.random((4, 37)) + 0.1
    out = np.empty_like(z)
    x_before = x.copy()
    a, b, c = _shim_calls(x, y, z, out)
    np.testing.assert_allclose(a, np.exp(x_before), rtol=1e-15)
    assert b == pytest.approx(np.tanh(x_before[0]), rel=1e-15)
    np.testing.assert_allclose(out, np.log(z), rtol=1e-15)
    np.testing.assert_allclose(c, np.arctan2(x_before, y[0]), rtol=1e-15)
    want = x_before.copy()
    np.exp(want[:-1], out=want[1:])
    np.testing.assert_allclose(x, want, rtol=1e-15)


def test_integers_stay_numbas_and_broadcast_into_out():
    @numba.njit
    def f(i, row, out):
        snp.exp(row, out=out)   # a row broadcast into a matrix
        return snp.exp(i)
    out = np.empty((3, 5))
    row = np.linspace(-1, 1, 5)
    got = f(np.arange(4), row, out)
    np.testing.assert_allclose(got, np.exp(np.arange(4)), rtol=1e-15)
    np.testing.assert_allclose(out, np.broadcast_to(np.exp(row), (3, 5)), rtol=1e-15)


def test_turned_off_by_the_environment():
    code = ("import numba, numpy as np, re\n"
            "from zymo.codegen.numba import elementwise as ew, vecmath\n"
            "f = numba.njit(lambda x: ew.ew_new('np.exp(x0)', (x,)))\n"
            "f(np.ones(64))\n"
            "print(vecmath.available(), vecmath.signature(),"
            " bool(re.search('_ZGV', f.inspect_llvm(f.signatures[0]))))\n")
    env = dict(os.environ, ZYMO_VECTOR_MATH="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "libmvec:", "False"]


def softmax_rows(X, out):
    for i in range(X.shape[0]):
        row = X[i]
        np.exp(row - np.max(row), out=out[i])
        out[i] /= np.sum(out[i])
    return np.sum(out * np.log(out + 1.0))


def scalar_loop(x, w):
    s = 0.0
    for i in range(x.shape[0]):
        s += w[i] * np.tanh(x[i]) + np.exp(-x[i] * x[i]) * np.log1p(x[i] * x[i]) + np.arctan2(x[i], w[i])
    return s


@pytest.mark.parametrize("backend", [True, "kernels"])
def test_gradients_through_vector_math(backend):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((6, 40))
    dX, dX_py = np.zeros_like(X), np.zeros_like(X)
    zymo.autodiff(Reverse, softmax_rows, Active, Duplicated(X, dX), Duplicated(np.zeros_like(X), np.zeros_like(X)),
                  numba=backend)
    zymo.autodiff(Reverse, softmax_rows, Active, Duplicated(X, dX_py), Duplicated(np.zeros_like(X), np.zeros_like(X)),
                  numba=False)
    np.testing.assert_allclose(dX, dX_py, rtol=1e-12, atol=1e-14)
    fd = fd_grad(lambda X: softmax_rows(X, np.zeros_like(X)), [X])[0]
    np.testing.assert_allclose(dX, fd, rtol=1e-6, atol=1e-8)
    assert np.abs(dX).max() > 1e-3

    x, w = rng.standard_normal(50), rng.standard_normal(50)
    dx, dx_py = np.zeros_like(x), np.zeros_like(x)
    zymo.autodiff(Reverse, scalar_loop, Active, Duplicated(x, dx), Const(w), numba=backend)
    zymo.autodiff(Reverse, scalar_loop, Active, Duplicated(x, dx_py), Const(w), numba=False)
    np.testing.assert_allclose(dx, dx_py, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dx, fd_grad(lambda x: scalar_loop(x, w), [x])[0], rtol=1e-6, atol=1e-8)
    v = rng.standard_normal(50)
    (tangent,) = zymo.autodiff(Forward, scalar_loop, Duplicated, Duplicated(x, v), Const(w), numba=backend)
    assert tangent == pytest.approx(float(dx @ v), rel=1e-12)


def test_zero_dimensional_arrays_keep_numbas_ufunc():
    """0-d arrays are not `elementwise`'s (its `ew_out` calls the ufunc back for them): with
    `out=` a 0-d destination compiled to a typing error (the shim and `ew_out` calling each
    other); the shim leaves them to Numba, as before the vector math."""
    @numba.njit
    def f(x, out, out1):
        snp.exp(x, out=out)
        snp.arctan2(x, x, out=out1)
        return snp.tanh(x), snp.hypot(x, x)
    x, out, out1 = np.array(0.5), np.zeros(()), np.zeros(())
    a, b = f(x, out, out1)
    assert out[()] == pytest.approx(np.exp(0.5), rel=1e-15)
    assert out1[()] == pytest.approx(np.arctan2(0.5, 0.5), rel=1e-15)
    assert a == pytest.approx(np.tanh(0.5), rel=1e-15) and b == pytest.approx(np.hypot(0.5, 0.5), rel=1e-15)


def test_functions_libmvec_lacks_stay_numbas():
    """glibc 2.22 to 2.34 have libmvec versions of exp, log, sin and cos only: a function whose
    vector versions the library lacks must not name them (a loop LLVM vectorizes would call
    address 0: the process died of SIGSEGV), and the shim's function of a number must still
type (it is Numba's then). Simulated in a fresh process by a C function libm
    has and libmvec does not (tgamma) standing for tanh."""
    code = ("import math, re, numba, numpy as np\n"
            "from zymo.codegen.numba import elementwise as ew, vecmath\n"
            "vecmath.FUNCS['tanh'] = ('tgamma', 1)\n"
            "f = numba.njit(lambda x: ew.ew_new('np.tanh(x0) + np.exp(x0)', (x,)))\n"
            "x = np.linspace(1.0, 3.0, 64)\n"
            "got = f(x)\n"
            "assert np.allclose(got, np.tanh(x) + np.exp(x), rtol=1e-14, atol=0), got\n"
            "llvm = f.inspect_llvm(f.signatures[0])\n"
            "assert 'tgamma' not in llvm and re.search('_ZGV.N4v_exp', llvm)\n"
            "assert not vecmath.covers('tanh', (numba.float64,)) and vecmath.covers('exp', (numba.float64,))\n"
            "from zymo.codegen.numba import np_shim as snp\n"
            "g = numba.njit(lambda x: snp.tanh(x[0]) + snp.tanh(np.float32(x[1])) + snp.tanh(x)[2])\n"
            "assert abs(g(x) - (np.tanh(x[0]) + np.tanh(np.float32(x[1])) + np.tanh(x[2]))) < 1e-6\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.split() == ["ok"], (out.returncode, out.stderr[-2000:])


# glibc's vector versions and the scalar function differ in the last bits, and so do its SSE,
# AVX2 and AVX-512 versions with one another (measured by review: every function but a few
# float64 ones, on thousands of inputs in 65536). LLVM chooses by the loop's length which
# elements the vectorized body computes; `vecmath` therefore computes every element, in the body
# or not, with one vector version (`_one_lane`), so none depends on its place in the loop.


def test_an_elements_value_does_not_depend_on_the_arrays_length():
    f = numba.njit(lambda x: ew.ew_new("np.exp(x0)", (x,)))
    one = numba.njit(lambda v: snp.exp(v))
    x = np.random.default_rng(0).standard_normal(4096)
    full = f(x)
    for n in range(1, 64):
        np.testing.assert_array_equal(f(x[:n]), full[:n], err_msg=str(n))
    assert all(one(v) == full[k] for k, v in enumerate(x[:64]))  # a number alone: the same bits


def rows1(X, Y):
    for i in range(X.shape[0]):
        Y[i] = np.exp(X[i])
    return np.sum(Y)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="one thread only")
def test_parallel_kernel_gives_the_serial_bits():
    from zymo.config import set_threads

    X = np.random.default_rng(2).standard_normal(1001)
    got = []
    try:
        for threads in (1, 2):
            set_threads(threads)
            dX = np.zeros_like(X)
            zymo.autodiff(Reverse, rows1, Active, Duplicated(X, dX), Duplicated(np.zeros_like(X), np.zeros_like(X)),
                          numba="kernels")
            got.append(dX)
    finally:
        set_threads(None)
    np.testing.assert_array_equal(got[0], got[1])


def test_sums_through_the_vector_versions_keep_their_lanes():
    """A flat sum of a vector-math function runs the vector version on its eight lanes at once
    (`ew_loops._lanes_of`): the same bits as the eight partial sums of the elements `ew_new`
    computes, at every length around the lanes."""
    total = numba.njit(lambda x: ew.ew_sum("x0 * np.log(x0 + 1.0) - np.tanh(x0)", (x,)))
    values = numba.njit(lambda x: ew.ew_new("x0 * np.log(x0 + 1.0) - np.tanh(x0)", (x,)))
    x = np.random.default_rng(4).random(203)
    for n in list(range(1, 41)) + [203]:
        v = values(x[:n])
        lanes = [0.0] * 8
        full = n // 8 * 8
        for i in range(full):
            lanes[i % 8] = lanes[i % 8] + v[i]
        while len(lanes) > 1:
            lanes = [lanes[j] + lanes[j + 1] for j in range(0, len(lanes), 2)]
        want = lanes[0]
        for e in v[full:]:
            want = want + e
        assert total(x[:n]) == want, n
    assert any(c.endswith("_log") for c in _vector_calls(total))


def test_a_function_called_only_with_numbers_the_compiler_knows(tmp_path):
    """`np.log(1.0)` alone in a module: the one-lane function keeps its operand (with internal
    linkage LLVM folded it away, `zymo_vm_log()`, and its vectorizer then aborted the process
    on the call naming a vector version of one operand)."""
    code = ("import numpy as np, zymo\n"
            "from zymo import Reverse\n"
            "def f(y):\n"
            "    return np.sum(np.power(0.0, y) + np.power(y, 2.0))\n"  # its adjoint has np.log(1.0)
            "(g,) = zymo.gradient(Reverse, f, np.array([0.5, 1.0, 2.0]), numba=True)\n"
            "print(g.tolist() == [1.0, 2.0, 4.0])\n")
    here = os.path.dirname(os.path.dirname(zymo.__file__))  # this zymo, not another one installed
    env = dict(os.environ, ZYMO_CACHE_DIR=str(tmp_path),
               PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    script = tmp_path / "power_at_zero.py"  # zymo reads the function's source from its file
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0 and out.stdout.split() == ["True"], (out.returncode, out.stderr[-2000:])
