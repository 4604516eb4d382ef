"""Whole-array statements inside compiled kernels (`codegen/numba/ew_rewrite.in_place`).

A loop that does scalar work may hold the array statements that the Numba backend's elementwise
intrinsics compute in place (`a[1:n] = e`, `d += e`, `np.add(a, b, out=d)`, `np.copy`, sums to a
number): the outliner compiles it whole. Tested: which statements are accepted and how they are
rewritten, that parallel twins refuse loops writing arrays whole, and end to end gradients of
such loops (a convolution, an in-place shift whose views overlap) against central differences
and the Python backend, with a look at which loops were compiled."""
from __future__ import annotations

import ast

import numpy as np
import pytest

import zymo
from zymo import Reverse
from zymo.codegen.numba.ew_rewrite import elementwise_statements, in_place
from zymo.codegen.outline import Kernel, outline
from zymo.codegen.parallel import parallel_loops
from zymo.testing import check_grad

pytest.importorskip("numba")

ARRAYS = frozenset({"a", "b", "x", "g", "d"})
NUMBERS = frozenset({"w", "c", "n", "i", "s"})


def _accepted(line: str) -> bool:
    return in_place(ast.parse(line).body[0], NUMBERS, ARRAYS)


@pytest.mark.parametrize("line", [
    "a[1:n] = 2.0 * b[1:n] + c",
    "a[1:n] += b[0:m] * w",
    "a[i, 1:n] -= x[i, 1:n]",
    "t = np.copy(a[i, 1:n])",
    "s = _rt.unbroadcast(g * x, w)",
    "s = _rt.sum_product(g, x)",
    "s = -_rt.sum_product(g, x) / w",
    "np.add(d, w * x, out=d)",
    "d += _rt.unbroadcast(w * g, d)",
    "d += g",
])
def test_in_place_statements(line):
    assert _accepted(line)


@pytest.mark.parametrize("line", [
    "t = np.dot(a, b)",  # a product: NumPy's (BLAS) work
    "a[i] = b[i]",  # elements (numbers): not an array statement at all
    "t = a.T",  # a view by an attribute
    "a[x > 0] = 0.0",  # a boolean mask
    "s = w + c",  # numbers only
])
def test_other_statements_are_not(line):
    assert not _accepted(line)


def test_a_store_into_a_slice_becomes_ew_set():
    src = "def f(a, b, n, c):\n    a[1:n] = 2.0 * b[1:n] + c\n    a[0:n] += b[0:n]\n"
    out = elementwise_statements(src, NUMBERS, ARRAYS)
    assert "_rt.ew_set(a[1:n], '2.0 * x0 + x1', (b[1:n], c))" in out
    assert "_rt.ew_set(a[0:n], 'x0 + x1', (a[0:n], b[0:n]))" in out


LOOP = '''
def f(x, w, out, n, m):
    for k in range(n):
        c = w[k]
        for r in range(m):
            out[1:] = out[:-1] * c + x[1:]
        out[0] += c * x[0]
'''

ONCE = '''
def f(x, w, out, n):
    for k in range(n):
        c = w[k]
        out[1:] = out[:-1] * c + x[1:]
        out[0] += c * x[0]
'''


def test_outlined_with_in_place_statements_and_never_parallel():
    def fast(s):
        return in_place(s, NUMBERS | {"c"}, frozenset({"x", "w", "out"}))
    ndims = {"x": 1, "w": 1, "out": 1}
    numbers = frozenset({"n", "k", "c", "m", "r"})
    plain = outline(LOOP, ndims, numbers)
    assert not plain.names  # without `in_place` the loop stays Python
    assert not outline(ONCE, ndims, numbers, in_place=fast).names  # once per iteration: NumPy's
    out = outline(LOOP, ndims, numbers, in_place=fast)
    assert out.names == ["_kernel_0"] and not out.parallel
    kernel = ast.parse(out.kernels).body[0]
    assert isinstance(kernel, ast.FunctionDef)
    assert parallel_loops(kernel, ndims) == []  # its iterations all write `out[1:]`


def shift_accumulate(x, w, out):
    for k in range(w.shape[0]):
        c = w[k]
        for _r in range(2):
            out[1:] = out[:-1] + c * x[1:]  # views of one array that overlap: read before written
        out[0] += c * x[0]
    return np.sum(out * out)


def conv1d(x, w, b, out):
    m = out.shape[1]
    for f in range(w.shape[0]):
        out[f] = b[f]
        for d in range(w.shape[1]):
            wf = w[f, d]
            np.add(out[f], wf * x[d:d + m], out=out[f])
    return np.sum(out * out)


def _kernels(f):
    comps = [c for entries in zymo.cache.COMPILED.values() for c in entries
             if c.backend == "kernels" and c.ir.name == f.__name__]
    fn = comps[-1].fn if not isinstance(comps[-1].fn, list) else comps[-1].fn[0]
    return {k.name: k for k in fn.__globals__.values() if isinstance(k, Kernel)}


@pytest.fixture
def kernels_backend():
    zymo.config.set_numba("kernels")
    yield
    zymo.config.set_numba(None)


@pytest.mark.parametrize("f, make", [
    (shift_accumulate, lambda r: [r.random(7), 0.5 + r.random(4), r.random(7)]),
    (conv1d, lambda r: [r.random(9), r.standard_normal((3, 4)), r.random(3), np.zeros((3, 6))]),
], ids=["overlapping_shift", "conv1d"])
def test_gradients_against_fd_and_python(kernels_backend, f, make):
    args = make(np.random.default_rng(11))
    check_grad(f, *[np.array(a) for a in args], modes=("reverse",))
    kernels = _kernels(f)
    assert kernels and all(k.fn is k.compiled for k in kernels.values()), {k: v.why for k, v in kernels.items()}
    got = zymo.gradient(Reverse, f, *[np.array(a) for a in args])
    primal = [np.array(a) for a in args]
    value = f(*primal)
    zymo.config.set_numba("never")
    ref = zymo.gradient(Reverse, f, *[np.array(a) for a in args])
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-14)
    assert zymo.autodiff(zymo.ReverseWithPrimal, f, zymo.Active,
                         *[zymo.Duplicated(np.array(a), np.zeros_like(a)) for a in args])[1] == pytest.approx(value)
