"""The Numba backend: derivatives compiled with Numba agree with the Python backend and
with finite differences, Numba dispatchers use it by default, split mode and its tape
work, failures are explained (or fall back with a warning), a derivative that caches
nothing allocates nothing, and compiled derivatives are cached on disk across processes.

Numba compiles take seconds, so each function below exercises several features at once.
Generated modules go to a temporary `ZYMO_CACHE_DIR`, never to the user's cache.
"""
import json
import math
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from helpers import assert_tree_close, fd_grad, zymo_grad
from numba_helpers import numba_entries, numba_sources, private_cache_dir  # noqa: F401  (fixture: fresh cache directory)

import zymo
import zymo.cache
from zymo import Active, Const, Duplicated, Forward, Reverse, ReverseSplitWithPrimal, ReverseWithPrimal, ZymoWarning
from zymo.codegen.numba.backend import ZymoNumbaError
from zymo.codegen.numba.rewrites import ieee_divisions, whole_views
from zymo.config import set_numba
from zymo.testing import check_grad

Dispatcher = numba.core.dispatcher.Dispatcher


@pytest.fixture(autouse=True)
def default_policy(monkeypatch):
    monkeypatch.delenv("ZYMO_NUMBA", raising=False)
    set_numba(None)
    yield
    set_numba(None)


def _compiled(fn) -> bool:
    """Whether `fn` is a Numba dispatcher, or one wrapped to run its `boundscheck=True` version
    after a failed entry check (`codegen/index_checks.py`)."""
    return isinstance(fn, Dispatcher) or isinstance(getattr(fn, "__wrapped__", None), Dispatcher)


def assert_substantial(tree, at_least=0.1):
    """Guards against a vacuous check: a derivative of 0 would not pass for this tree."""
    assert np.max(np.abs(np.asarray(tree, dtype=np.float64))) > at_least, tree


# -- gradients: Numba vs Python vs finite differences, both modes --------------------


def damped(u, a):
    return math.exp(-0.1 * u * u) * math.tanh(a * u)


def scalar_mix(x, a):
    """In-place scalar writes, a while loop, an if in a loop, a user call, math.* on floats."""
    for i in range(len(x)):
        x[i] = x[i] ** 2
    s = 0.0
    i = 0
    while i < len(x):
        if x[i] > 0.5:
            s += damped(x[i], a)
        else:
            s -= math.sin(x[i]) * a
        i += 1
    return s + math.sqrt(a) * math.log(1.0 + a * a)


def array_mix(A, B, C, v, w, r):
    """np.dot with out= (2-d and 1-d), ufuncs with and without positional out, a broadcast
    +=, views of r written through, np.sum and np.max of a row."""
    np.dot(A, B, out=C)
    np.dot(v, B, out=w)
    u = r[:, :, 0]
    u[...] = np.sin(C)
    np.tanh(u, u)
    u += w
    h = r[:, :, 1]
    np.exp(u * 0.5, h)
    return np.sum(r) + np.max(C[0])


def _scalar_args(rng):
    return [rng.standard_normal(7), 0.7]


def _array_args(rng):
    A, B, v = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal(4)
    return [A, B, np.zeros((3, 5)), v, np.zeros(5), np.zeros((3, 5, 2))]


@pytest.mark.slow
@pytest.mark.parametrize("f, make_args, wrt", [(scalar_mix, _scalar_args, (0, 1)),
                                               (array_mix, _array_args, (0, 1, 3))])
def test_numba_gradients_match_python_and_finite_differences(f, make_args, wrt):
    """`check_grad` compares reverse and forward mode with finite differences and with each
    other; run it under Numba and under Python with the same seeds, then compare."""
    args = make_args(np.random.default_rng(0))
    results = {}
    for policy in ("always", "never"):
        set_numba(policy)
        results[policy] = check_grad(f, *args)
    num, py = results["always"], results["never"]
    for k in wrt:
        assert_substantial(num.reverse[k])
    assert_substantial(num.forward[(None, 0)][0])  # the tangent of the (float) return, all arguments seeded
    assert_tree_close(num.reverse, py.reverse, rtol=1e-12, atol=1e-12, what="reverse")
    # tangents of the return and of the final arguments, for every direction
    assert_tree_close(list(num.forward.values()), list(py.forward.values()), rtol=1e-12, atol=1e-12,
                      what="forward")
    entries = numba_entries(f)
    assert len(entries) >= 2  # the reverse and the forward derivative
    assert all(c.backend == "always" and c.checked and _compiled(c.fn) for c in entries)


# -- Numba dispatchers use Numba by default ---------------------------------------------


@numba.njit
def njit_cube(u, a):
    return a * u ** 3


@numba.njit
def njit_cubic(x, a):
    s = 0.0
    for i in range(len(x)):
        s += njit_cube(x[i], a)
    return s


def test_a_dispatcher_is_differentiated_with_numba_by_default():
    x = np.array([0.5, -1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZymoWarning)  # no fallback to Python
        dx, da = zymo.gradient(Reverse, njit_cubic, x, 1.5)
    np.testing.assert_allclose(dx, 3 * 1.5 * x ** 2)
    assert da == pytest.approx(np.sum(x ** 3))
    (entry,) = numba_entries(njit_cubic)
    assert entry.backend == "prefer" and entry.checked and _compiled(entry.fn)


# -- results of the Python backend's types ------------------------------------------------


def norm_and_scale(x, y, a):
    """Three numbers the Python backend returns as np.float64, np.float32 and a float."""
    return np.sum(x * x) * a, np.sum(y * y), a * a + 1.0


def scaled_norm(x, a):
    return np.sum(x * x) * a


@pytest.mark.parametrize("numba_choice", [True, "kernels"])
def test_compiled_results_have_the_python_backends_types(numba_choice):
    # numba=True returned the primal (and the tangent) as Python floats, a float32 widened,
    # where the Python backend returns np.sum's np.float64 and np.float32
    x, y, a = np.array([0.3, -1.2, 2.0]), np.array([0.5, 1.5], dtype=np.float32), 0.7

    def run(mode, numba):
        if mode.forward:
            tan, prim = zymo.autodiff(zymo.ForwardWithPrimal, norm_and_scale, Duplicated,
                                      Duplicated(x.copy(), np.ones(3)), Const(y), Duplicated(a, 1.0), numba=numba)
            return prim, tan
        dx = np.zeros(3)
        (_, da), prim = zymo.autodiff(ReverseWithPrimal, scaled_norm, Active, Duplicated(x.copy(), dx), Active(a),
                                      numba=numba)
        return (prim,), (dx, da)

    for mode in (Reverse, Forward):
        for _ in range(2):  # the full path, then a replay
            py_prim, py_der = run(mode, False)
            prim, der = run(mode, numba_choice)
            assert [type(v) for v in prim] == [type(v) for v in py_prim]
            assert [type(v) for v in der] == [type(v) for v in py_der]
            assert_tree_close(list(prim), list(py_prim), rtol=1e-7, atol=0, what="primal")
            assert_tree_close(list(der), list(py_der), rtol=1e-12, atol=1e-12, what="derivatives")
    prim, tan = run(Forward, numba_choice)
    assert [type(v) for v in prim] == [np.float64, np.float32, float]
    assert [type(v) for v in tan] == [np.float64, float, float]
    fd = fd_grad(scaled_norm, [x, a])
    dx, da = run(Reverse, numba_choice)[1]
    np.testing.assert_allclose(dx, fd[0], rtol=1e-7)
    assert da == pytest.approx(fd[1], rel=1e-7)
    assert tan[0] == pytest.approx(fd[0].sum() + fd[1], rel=1e-7)  # the tangent along (1, 1, 1; 1)
    assert tan[2] == pytest.approx(2 * a, rel=1e-12)


# -- split mode --------------------------------------------------------------------------


def sumsq_inplace(x):
    for i in range(len(x)):
        x[i] = x[i] ** 2  # the adjoint needs the old x[i]: a float cache
    return x.sum()


def _split_run(numba_choice, x0, tape=None, seed=1.0):
    """(primal, final x, dx, tape) of one forward + reverse call of the split program."""
    x, dx = x0.copy(), np.zeros_like(x0)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, sumsq_inplace, Active, Duplicated(x, dx),
                                   numba=numba_choice)
    tape, y = fwd(Duplicated(x, dx), tape=tape)
    (derivs,) = rev(Duplicated(x, dx), seed, tape)
    assert derivs == (None,)
    return y, x, dx, tape


@pytest.mark.slow
def test_split_mode_with_a_float_cache_and_tape_reuse_matches_python():
    x0 = np.array([0.5, -1.5, 2.0, 3.0])
    y, x, dx, tape = _split_run(True, x0)
    y_py, x_py, dx_py, _ = _split_run(False, x0)
    assert y == pytest.approx(y_py) and y == pytest.approx(np.sum(x0 ** 2))
    np.testing.assert_allclose(x, x_py)
    np.testing.assert_allclose(dx, dx_py)
    np.testing.assert_allclose(dx, 2 * x0)
    # the tape passed back: its cache buffer is reused, the results stay right
    y2, _, dx2, tape2 = _split_run(True, x0, tape=tape, seed=3.0)
    assert tape2.inner[0] is tape.inner[0]
    assert y2 == pytest.approx(y)
    np.testing.assert_allclose(dx2, 6 * x0)
    (entry,) = numba_entries(sumsq_inplace, split=True)
    assert all(_compiled(fn) for fn in entry.fn)


def nested_caches(x, w, out):
    """Nested loops whose values the adjoint sweep reads: grown caches, counters, an extent."""
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(w.shape[0]):
            t = math.sin(x[i] * w[j])
            s += t * t
        out[i] = s
    return s + np.sum(out * out)


def test_cache_counters_are_typed_as_ints_from_their_start(tmp_path, monkeypatch):
    """Counters start at 0 and grow by 1 in loops; declared `intp` (the generator's `int_names`),
    Numba types them int64 from the first assignment instead of as the literal 0 widened pass
    after pass, with the same derivatives."""
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal(5), rng.standard_normal(3)
    grads = []
    for numba_ in (True, False):
        dx, dw = np.zeros(5), np.zeros(3)
        zymo.autodiff(Reverse, nested_caches, Active, Duplicated(x, dx), Duplicated(w, dw),
                      Duplicated(np.zeros(5), np.zeros(5)), numba=numba_)
        grads.append((dx, dw))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)
    assert_substantial(grads[0][0])
    h = 1e-6
    fd = [(nested_caches(x + h * e, w, np.zeros(5)) - nested_caches(x - h * e, w, np.zeros(5))) / (2 * h)
          for e in np.eye(5)]
    np.testing.assert_allclose(grads[0][0], fd, rtol=1e-6, atol=1e-8)
    (entry,) = numba_entries(nested_caches)
    ints = entry.generator.int_names()
    assert any(k.startswith("_k_") for k in ints)
    assert entry.fn.py_func.__globals__["_INTS"] == dict.fromkeys(ints, numba.intp)
    (res,) = entry.fn.overloads.values()  # compiled in this test (a fresh cache directory)
    typed = {v: t for v, t in res.type_annotation.typemap.items() if v.split(".")[0] in ints}
    assert typed and all(t == numba.intp for t in typed.values()), typed


def scaled_into_0d(x, b):
    b[...] = x[0] * 2.0  # a 0-d Const buffer that receives active data
    return np.sum(b * x)


@pytest.mark.slow
def test_a_0d_buffer_receiving_active_data_compiles_under_numba():
    """Its adjoint is summed as `np.sum(db[...])`; Numba types `db[...]` of a 0-d array as a
    number and cannot lower it (a NotImplementedError escaped), so reads of `x[...]` are of `x`
    (`numba.rewrites.whole_views`); writes into `x[...]` stay."""
    src = "def f(a, b):\n    b[...] = a[...] * 2.0\n    b[...] += np.sum(a[...]) + a[...][0]\n    return b[...]\n"
    assert whole_views(src) == ("def f(a, b):\n    b[...] = a * 2.0\n    b[...] += np.sum(a) + a[0]\n"
                                "    return b\n")
    x = np.array([0.3, -1.2, 2.0])
    grads = []
    for numba_ in (True, False):
        dx = np.zeros(3)
        zymo.autodiff(Reverse, scaled_into_0d, Active, Duplicated(x, dx), zymo.Const(np.zeros(())), numba=numba_)
        grads.append(dx)
    want = 2 * x[0] * np.ones(3) + np.array([2 * np.sum(x), 0.0, 0.0])  # f = 2 x0 (x0 + x1 + x2)
    np.testing.assert_allclose(grads[0], want, rtol=1e-14)
    np.testing.assert_allclose(grads[1], want, rtol=1e-14)
    h = 1e-6
    fd = [(scaled_into_0d(x + h * e, np.zeros(())) - scaled_into_0d(x - h * e, np.zeros(()))) / (2 * h)
          for e in np.eye(3)]
    np.testing.assert_allclose(grads[0], fd, rtol=1e-7)
    (entry,) = numba_entries(scaled_into_0d)
    assert _compiled(entry.fn)


# -- what Numba cannot compile -------------------------------------------------------------


def batched_matmul(A, B):
    C = np.matmul(A, B)  # Numba's np.matmul takes 1-d and 2-d arrays only
    return np.sum(C * C)


def repeated_sin(x, h):
    for _ in range(3):
        h[...] = np.sin(h * x)  # split mode: the loop's copies of h go in a stacked tape
    return np.sum(h)


def singular_values(a, out):
    out[...] = np.linalg.svd(a, full_matrices=False)[1]  # svd's adjoint has no Numba version
    return np.sum(out * out)


def _batched_args():
    rng = np.random.default_rng(1)
    return rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 3))


def test_primal_numba_cannot_compile_raises_or_falls_back():
    A, B = _batched_args()
    with pytest.raises(ZymoNumbaError, match=r"Numba cannot compile batched_matmul: .*matmul") as info:
        zymo.gradient(Reverse, batched_matmul, A, B, numba=True)
    assert info.value.loc.file == __file__  # the user's line, with its source
    assert "test_numba.py" in str(info.value) and "np.matmul(A, B)" in str(info.value)
    with pytest.warns(ZymoWarning, match="batched_matmul"):
        dA, dB = zymo.gradient(Reverse, batched_matmul, A, B, numba="prefer")
    C2 = 2 * np.matmul(A, B)
    np.testing.assert_allclose(dA, np.matmul(C2, B.transpose(0, 2, 1)))
    np.testing.assert_allclose(dB, np.matmul(A.transpose(0, 2, 1), C2))


@pytest.mark.slow
def test_backend_gap_raises_or_falls_back():
    rng = np.random.default_rng(4)
    a0 = rng.standard_normal((3, 3))

    def run(numba_choice):
        return zymo.gradient(Reverse, singular_values, a0.copy(), np.zeros(3), numba=numba_choice)[0]

    with pytest.raises(ZymoNumbaError, match="gap in zymo's Numba backend"):
        run(True)
    with pytest.warns(ZymoWarning, match="singular_values"):
        da = run("prefer")
    assert_substantial(da)
    np.testing.assert_allclose(da, run(False))
    u, s, vt = np.linalg.svd(a0)
    np.testing.assert_allclose(da, u @ np.diag(2 * s) @ vt, rtol=1e-10)  # d(sum s^2) = 2 A


def tanh_steps(x, W):
    h = x[::2]  # a view first, new arrays after: the list caches unify their layouts
    acc = 0.0
    for _ in range(3):
        h = np.tanh(W @ h)  # a new array per iteration: split mode caches them in a list
        acc += np.sum(h * h)
    return acc


def _split_grad(f, values, numba_choice, width=0, again=False):
    """Split mode on copies of `values` (all Duplicated, or BatchDuplicated of `width`):
    (primal, shadows after the reverse call); `again`: a second forward call reusing the
    tape, with new values, before the reverse call."""
    from zymo import BatchDuplicated
    vals = [np.array(v) for v in values]
    if width:
        args = [BatchDuplicated(v, tuple(np.zeros_like(v) for _ in range(width))) for v in vals]
        seeds = tuple(float(k + 1) for k in range(width))
    else:
        args, seeds = [Duplicated(v, np.zeros_like(v)) for v in vals], (1.0,)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, f, Active, *args, numba=numba_choice)
    tape, y = fwd(*args)
    if again:
        for a, v in zip(args, values):
            a.val[...] = 1.5 * np.asarray(v)
        tape, y = fwd(*args, tape=tape)
    rev(*args, *seeds, tape)
    return y, [np.array(a.dvals) if width else a.dval for a in args]


@pytest.mark.slow
def test_split_mode_list_caches_compile_under_numba():
    """Split mode's list caches (a new array per iteration, their shadows kept by identity)
    are Numba typed lists that the tape carries to the reverse function: their arrays differ
    in layout (a view, then new arrays), which a reflected list could not pass back in.
    Checked against the Python backend, finite differences, with a reused tape and in batch
    mode; under numba=True, so a refusal fails the test."""
    rng = np.random.default_rng(0)
    x, W = rng.standard_normal(8), 0.5 * rng.standard_normal((4, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numba.core.errors.NumbaPerformanceWarning)  # W @ a view
        for width, again in ((0, False), (0, True), (2, False)):
            y, grads = _split_grad(tanh_steps, (x, W), True, width, again)
            y_py, grads_py = _split_grad(tanh_steps, (x, W), False, width, again)
            assert y == pytest.approx(y_py, rel=1e-12)
            assert_tree_close(grads, grads_py, rtol=1e-12, atol=1e-14)
        _, grads = _split_grad(tanh_steps, (x, W), True, again=True)
    assert_tree_close(grads, fd_grad(tanh_steps, [1.5 * x, 1.5 * W]), rtol=1e-6, atol=1e-8)
    assert_substantial(grads[0])
    assert_substantial(grads[1])
    # the lists cross the call boundary as arguments of their own, never inside a tuple
    # (Numba types such a tuple in Python on every call: 80 us)
    sigs = [sig for entry in numba_entries(tanh_steps, split=True) for half in entry.fn for sig in half.signatures]
    assert any(isinstance(t, numba.types.ListType) for sig in sigs for t in sig)
    assert not any(isinstance(t, numba.types.BaseTuple) and any(isinstance(e, numba.types.ListType) for e in t)
                   for sig in sigs for t in sig)


def cumsum_sq(x):
    return np.sum(np.cumsum(x) ** 2)


@pytest.mark.slow
def test_a_refusal_of_zymos_shims_is_named_in_the_error():
    """Numba's message buries the shim's reason under the overloads it tried; the error leads
    with it. The primal compiles (Numba's cumsum flattens a 2-d array); zymo's Numba backend
    differentiates the cumsum of 1-d arrays only: refused under numba=True, and
    numba='prefer' runs the derivative as Python, with the Python backend's numbers."""
    x = np.arange(6.0).reshape(2, 3) / 5
    with pytest.raises(ZymoNumbaError, match="zymo's Numba backend differentiates np.cumsum of 1-d arrays"):
        zymo.gradient(Reverse, cumsum_sq, x, numba=True)
    with pytest.warns(ZymoWarning, match="cumsum_sq"):
        (dx,) = zymo.gradient(Reverse, cumsum_sq, x, numba="prefer")
    c = np.cumsum(x)
    np.testing.assert_allclose(dx.ravel(), 2 * np.cumsum(c[::-1])[::-1])  # d/dx_j = 2 sum_{i>=j} c_i
    np.testing.assert_allclose(dx, zymo.gradient(Reverse, cumsum_sq, x, numba=False)[0])
    assert_substantial(dx)


@pytest.mark.slow
def test_split_mode_tape_compiles_under_numba():
    """The loop's copies of `h` travel in a stacked tape, and no sum over broadcast dimensions
    needs the primal `sin(h * x)`, so the split program compiles (it once kept a list)."""
    x0, h0 = np.linspace(0.1, 1.0, 4), np.linspace(1.0, 2.0, 4)

    def run(numba_choice):
        x, h, dx, dh = x0.copy(), h0.copy(), np.zeros(4), np.zeros(4)
        fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, repeated_sin, Active, Duplicated(x, dx),
                                       Duplicated(h, dh), numba=numba_choice)
        tape, y = fwd(Duplicated(x, dx), Duplicated(h, dh))
        rev(Duplicated(x, dx), Duplicated(h, dh), 1.0, tape)
        return y, dx, dh

    y, dx, dh = run(True)
    assert numba_entries(repeated_sin, split=True)
    y_py, dx_py, dh_py = run(False)
    assert y == pytest.approx(y_py)
    assert_substantial(dx)
    np.testing.assert_allclose(dx, dx_py)
    np.testing.assert_allclose(dh, dh_py)
    dx_fd = np.zeros(4)  # central differences of sum(h) after the three steps
    for j in range(4):
        for sgn in (1, -1):
            xx, hh = x0.copy(), h0.copy()
            xx[j] += sgn * 1e-6
            for _ in range(3):
                hh = np.sin(hh * xx)
            dx_fd[j] += sgn * np.sum(hh) / 2e-6
    np.testing.assert_allclose(dx, dx_fd, rtol=1e-6)


def test_quick_compile_keeps_the_shape_check_and_restores_numba():
    """zymo's first calls compile with Numba's short slice-shape message; the check stays."""
    from numba.np import arrayobj

    from zymo.codegen.numba.backend import quick_compile

    original = arrayobj.raise_with_shape_context

    @numba.njit
    def assign(a, b):
        a[:3] = b
        return a

    from numba.core import errors
    from numba.core.types import functions

    colours = (errors._termcolor_inst, functions._termcolor)
    with quick_compile():
        assert arrayobj.raise_with_shape_context is not original
        # plain messages, also where Numba's typing took its colour scheme at import
        assert functions._termcolor is errors._termcolor_inst and functions._termcolor is not colours[1]
        assert functions._termcolor.errmsg("rejected") == "rejected"
        with quick_compile():  # nested (a derivative whose first call compiles another)
            pass
        assert arrayobj.raise_with_shape_context is not original
        assert functions._termcolor is not colours[1]
        np.testing.assert_array_equal(assign(np.zeros(4), np.ones(3)), [1.0, 1.0, 1.0, 0.0])
    assert arrayobj.raise_with_shape_context is original
    assert (errors._termcolor_inst, functions._termcolor) == colours
    with pytest.raises(ValueError, match="different size"):
        assign(np.zeros(4), np.ones(2))


# -- NRT allocations -------------------------------------------------------------------------


def dot_loop(x, y):
    s = 0.0
    for i in range(len(x)):
        s += x[i] * y[i]
    return s


@numba.njit
def _touch(x, y, dx, dy):
    return x[0] + y[0] + dx[0] + dy[0]


@pytest.fixture
def nrt_stats():
    from numba.core.runtime import _nrt_python, rtsys

    was_enabled = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    yield rtsys
    if not was_enabled:
        _nrt_python.memsys_disable_stats()


def _nrt_delta(rtsys, call):
    """(allocations, frees) by Numba's runtime during `call()`."""
    before = rtsys.get_allocation_stats()
    call()
    after = rtsys.get_allocation_stats()
    return after.alloc - before.alloc, after.free - before.free


def test_reverse_call_without_caches_allocates_nothing_in_numba(nrt_stats):
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(50), rng.standard_normal(50)
    dx, dy = np.zeros(50), np.zeros(50)

    def grad():
        zymo.autodiff(Reverse, dot_loop, Active, Duplicated(x, dx), Duplicated(y, dy), numba=True)

    def touch():
        _touch(x, y, dx, dy)

    grad()  # compiles
    touch()
    np.testing.assert_allclose(dx, y)
    np.testing.assert_allclose(dy, x)
    # Numba's runtime wraps each array argument in a MemInfo: that is all a call may allocate
    boxing, _ = _nrt_delta(nrt_stats, touch)
    allocs, frees = _nrt_delta(nrt_stats, grad)
    assert (allocs, frees) == (boxing, boxing)
    # the measurement sees a cache: beyond its two arguments, sumsq_inplace's reverse call allocates one
    x2, dx2 = x.copy(), np.zeros(50)
    cached, _ = _nrt_delta(nrt_stats, lambda: zymo.autodiff(Reverse, sumsq_inplace, Active,
                                                            Duplicated(x2, dx2), numba=True))
    assert cached > 2


# -- the disk cache ----------------------------------------------------------------------------


_CHILD = """
import json, sys, time
sys.path.insert(0, {src!r})
import numpy as np
import zymo, zymo.cache
from cached_loss import loss
t = time.perf_counter()
(g,) = zymo.gradient(zymo.Reverse, loss, np.array([1.0, 2.0, 3.0]), numba=True)
seconds = time.perf_counter() - t
(fn,) = [c.fn for cs in zymo.cache.COMPILED.values() for c in cs]
print(json.dumps({{"grad": g.tolist(), "seconds": seconds, "hits": sum(fn.stats.cache_hits.values()),
                  "misses": sum(fn.stats.cache_misses.values())}}))
"""

_LOSS = """
def loss(x):
    s = 0.0
    for i in range(len(x)):
        s += x[i] ** {power}
    return s
"""


_TWO_FUNCS = """
import numpy as np


def row_sums(x):
    t = np.exp(x)
    return np.sum(np.sum(t, axis=1) ** 2)


def scaled_store(r, w, buf):
    buf[...] = r * w + np.sin(r)
    return np.sum(buf * buf)
"""

_TWO_CHILD = """
import sys
sys.path.insert(0, {src!r})
import numpy as np
import zymo
from zymo import Active, Const, Duplicated, Reverse
import two_funcs as m
ok = True
for which in {which!r}:
    if which == "rows":
        x = np.linspace(0.1, 1.2, 12).reshape(4, 3)
        dx = np.zeros_like(x)
        zymo.autodiff(Reverse, m.row_sums, Active, Duplicated(x, dx), numba=True)
        ok &= bool(np.allclose(dx, 2 * np.sum(np.exp(x), axis=1)[:, None] * np.exp(x), rtol=1e-12))
    else:
        r, w, buf = np.linspace(-1, 1, 12).reshape(3, 4), np.linspace(0.5, 2, 12).reshape(3, 4), np.zeros((3, 4))
        dr, dw = np.zeros_like(r), np.zeros_like(w)
        zymo.autodiff(Reverse, m.scaled_store, Active, Duplicated(r, dr), Duplicated(w, dw), Const(buf), numba=True)
        b = r * w + np.sin(r)
        ok &= bool(np.allclose(dr, 2 * b * (w + np.cos(r)), rtol=1e-12))
print("ok" if ok else "WRONG")
"""


def _child_env(cache):
    """The environment of a child process that compiles into `cache` with this checkout's zymo;
    without `NUMBA_CACHE_DIR`, Numba writes its machine code beside the module (`__pycache__`)."""
    repo = str(Path(zymo.__file__).resolve().parent.parent)
    env = {**os.environ, "ZYMO_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    env.pop("NUMBA_CACHE_DIR", None)
    return env


@pytest.mark.slow
def test_programs_cached_by_different_processes_load_together(tmp_path):
    """Numba names an array expression's kernel by an object address and a per-process counter:
    two processes compiling two programs could give their kernels one name, and a third process
    loading both from the cache then ran the first kernel for the second program (wrong
    gradients). zymo moves the counter by a random amount before each compile."""
    src, cache = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    (src / "two_funcs.py").write_text(_TWO_FUNCS)
    env = _child_env(cache)

    def child(*which):
        proc = subprocess.run([sys.executable, "-c", _TWO_CHILD.format(src=str(src), which=which)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()[-1]

    assert child("rows") == "ok"    # compiled and cached by one process,
    assert child("store") == "ok"   # the other by another,
    assert child("rows", "store") == "ok"  # both loaded from the cache by a third


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="the compile lock uses fcntl.flock")
def test_compiles_of_one_module_are_serialized_across_processes(tmp_path):
    """Numba's cache index is not safe for two processes compiling one module at once (both
    may store under one data file); each compile holds the module's lock file, so a second
    process waits for the first. Here the test holds the lock: the child's first call waits."""
    import fcntl

    src, cache = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    (src / "cached_loss.py").write_text(_LOSS.format(power=3))
    env = _child_env(cache)
    first = subprocess.run([sys.executable, "-c", _CHILD.format(src=str(src))], env=env,
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    (lock,) = cache.glob("*.py.lock")
    fd = os.open(lock, os.O_RDWR)
    ready = _CHILD.format(src=str(src)).replace("t = time.perf_counter()",
                                                "print('ready', flush=True)\nt = time.perf_counter()")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        child = subprocess.Popen([sys.executable, "-c", ready], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"  # imports done: the call comes next
        time.sleep(1.5)
        assert child.poll() is None  # waiting for the lock (a cache load takes a fraction of this)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    got = json.loads(out.splitlines()[-1])
    assert got["hits"] >= 1 and got["seconds"] >= 1.4
    np.testing.assert_allclose(got["grad"], 3 * np.array([1.0, 2.0, 3.0]) ** 2)


@pytest.mark.slow
def test_disk_cache_is_reused_across_processes_and_never_stale(tmp_path):
    src, cache = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    env = _child_env(cache)

    def child(power):
        (src / "cached_loss.py").write_text(_LOSS.format(power=power))
        proc = subprocess.run([sys.executable, "-c", _CHILD.format(src=str(src))], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout.splitlines()[-1])
        print(f"power {power}: gradient in {out['seconds']:.2f} s, {out['hits']} cache hit(s)")
        return out

    x = np.array([1.0, 2.0, 3.0])
    first = child(3)
    modules = set(cache.glob("*.py"))
    assert len(modules) == 1 and first["misses"] >= 1 and first["hits"] == 0
    assert list(cache.glob("__pycache__/*.nbi")) and list(cache.glob("__pycache__/*.nbc"))

    second = child(3)  # the same source: Numba loads the machine code instead of compiling
    assert set(cache.glob("*.py")) == modules
    assert second["hits"] >= 1 and second["misses"] == 0
    np.testing.assert_allclose(second["grad"], 3 * x ** 2)
    np.testing.assert_allclose(first["grad"], second["grad"])

    changed = child(4)  # a changed function: new generated source, compiled afresh
    np.testing.assert_allclose(changed["grad"], 4 * x ** 3)
    assert len(set(cache.glob("*.py")) - modules) == 1
    assert changed["misses"] >= 1 and changed["hits"] == 0


def test_the_disk_cache_stamp_reads_every_module_generated_code_depends_on(monkeypatch):
    """The generated module's hash covers zymo's runtime: every Numba shim, intrinsic and the
    compiler pipeline (a change to any must never reuse machine code Numba cached for it).
    `numba_inline.py` (now `numba/inline.py`), the intrinsics, was once missing."""
    from zymo.codegen.numba import backend as numba_

    read, real = [], Path.read_bytes

    def reading(self):
        read.append(self.resolve())
        return real(self)
    monkeypatch.setattr(Path, "read_bytes", reading)
    numba_._stamp()
    backend = Path(numba_.__file__).resolve().parent
    runtime = backend.parent.parent / "runtime"
    needed = set(backend.rglob("*.py")) | set(runtime.glob("*.py"))
    assert {backend / "inline.py", backend / "twins" / "core.py", runtime / "core.py", runtime / "second.py"} <= needed
    assert needed <= set(read), sorted(str(p.name) for p in needed - set(read))


def collector_seen(x):
    return np.sum(x * x)


def test_the_garbage_collector_is_paused_while_compiling_and_restored(monkeypatch):
    """zymo's transform and Numba compile run with the cyclic collector paused (a compile
    allocates enough to trigger full collections); it runs again after, also after a failed
    compile, and stays off if the user had turned it off."""
    import gc

    from zymo.codegen.numba import backend as numba_

    seen, real, real_ids = [], numba_.compile_numba, numba_._fresh_numba_ids

    def spying(*a, **kw):  # zymo's transform
        seen.append(gc.isenabled())
        return real(*a, **kw)

    def compiling():  # Numba's compile, at the first call
        seen.append(gc.isenabled())
        real_ids()
    monkeypatch.setattr(numba_, "compile_numba", spying)
    monkeypatch.setattr(numba_, "_fresh_numba_ids", compiling)
    assert gc.isenabled()
    x = np.array([1.0, 2.0, 3.0])
    (g,) = zymo.gradient(Reverse, collector_seen, x, numba=True)
    np.testing.assert_allclose(g, 2 * x)
    assert seen == [False, False] and gc.isenabled()
    with pytest.raises(ZymoNumbaError):
        zymo.gradient(Reverse, batched_matmul, *_batched_args(), numba=True)  # Numba refuses np.matmul of 3-d
    assert gc.isenabled()
    gc.disable()
    try:
        zymo.gradient(Reverse, collector_seen, 2.0 * x, numba=True)  # a new entry: compiles again
        assert not gc.isenabled()
    finally:
        gc.enable()


def issue7_ufuncs(x, y):
    z = np.maximum(x, y) + np.arctan2(y, x) + np.log1p(x * x)
    z += np.hypot(x, y)
    return np.sum(np.clip(z, -1.0, 2.0) ** 2) + np.sum(np.cumsum(x)) + np.prod(y)


@pytest.mark.slow
def test_numba_compiles_issue7_rules():
    """Representative new rules (binary ufuncs, in-place hypot, clip, cumsum, prod) under numba=True."""
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0.5, 1.5, 4), rng.uniform(-1, 1, 4)
    ref = zymo.gradient(Reverse, issue7_ufuncs, x, y)
    got = zymo.gradient(Reverse, issue7_ufuncs, x, y, numba=True)
    assert numba_entries(issue7_ufuncs)
    assert_tree_close(got, ref)
    assert_substantial(got[0])


UNBROADCAST_CASES = [((6, 5), (5,)), ((3, 4), (1, 4)), ((3, 4), (3, 1)), ((2, 3, 4), (3, 1)),
                     ((2, 3, 4), (2, 1, 4)), ((2, 3, 4), (1, 1, 1)), ((5,), (1,)), ((2, 0, 3), (3,)),
                     ((3, 4), (3, 4)), ((3,), (1, 3)), ((2, 3), (1, 1, 3))]


@pytest.mark.slow
@pytest.mark.parametrize("gs,xs", UNBROADCAST_CASES)
def test_numba_unbroadcast_sums_like_the_python_runtime(gs, xs):
    """`_rt.unbroadcast` under Numba (an odometer over `g`, `twins.core._unbroadcast_to`) sums
    over exactly the broadcast dimensions, for strided and complex adjoints too."""
    import numba

    from zymo import runtime
    from zymo.codegen.numba import twins as numba_rt

    f = numba.njit(lambda g, x: numba_rt.unbroadcast(g, x))
    rng = np.random.default_rng(7)
    x = np.zeros(xs)
    for g in (rng.standard_normal(gs), rng.standard_normal(gs[::-1]).T,
              rng.standard_normal(gs) + 1j * rng.standard_normal(gs)):
        got, want = f(g, x), runtime.unbroadcast(g, x)
        assert got.shape == np.shape(want) and got.dtype == g.dtype
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


@pytest.mark.slow
def test_numba_matrix_vector_product_adjoints_match_the_python_runtime():
    """The outer-product and matrix-vector adjoints are loops under Numba (`twins.core._outer`,
    `_matvec`): same values and dtypes as the Python runtime, strided and complex operands
    included."""
    import numba

    from zymo import runtime
    from zymo.codegen.numba import twins as numba_rt

    fns = {name: numba.njit(lambda g, a, b, f=getattr(numba_rt, name): f(g, a, b))  # noqa: B008  (binds each helper)
           for name in ("dot_vjp_a", "dot_vjp_b", "matmul_vjp_a", "matmul_vjp_b")}
    rng = np.random.default_rng(11)
    m, v3, v4 = rng.random((4, 3)), rng.random(3), rng.random(4)
    strided = rng.random((4, 3, 2))[:, :, 1]
    cplx = rng.random((4, 3)) + 1j * rng.random((4, 3))
    cases = [(v4, m, v3), (v4, strided, v3), (v4, cplx, v3), (v3, v4, m), (v3, v4, strided),
             (v3 + 1j, v4, m), (v4[::-1], m, v3[::-1])]
    for g, a, b in cases:
        for name, fn in fns.items():
            got, want = fn(g, a, b), getattr(runtime, name)(g, a, b)
            assert got.dtype == np.asarray(want).dtype and np.abs(want).max() > 0
            np.testing.assert_allclose(got, want, rtol=1e-13)


def test_numba_unbroadcast_refuses_shapes_that_do_not_broadcast():
    import numba

    from zymo.codegen.numba import twins as numba_rt

    f = numba.njit(lambda g, x: numba_rt.unbroadcast(g, x))
    with pytest.raises(ValueError, match="does not broadcast"):
        f(np.ones((3, 4)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="does not broadcast"):
        f(np.ones(3), np.zeros((2, 3)))
    assert f(np.array(2.5), np.array(1.0)) == 2.5  # 0-d


@pytest.mark.slow
def test_product_adjoints_accumulate_in_place_under_numba():
    """`d += _rt.dot_vjp_a(g, a, b)` is compiled as `d = _rt.acc_dot_vjp_a(d, g, a, b)`: one
    BLAS call with beta = 1 for C-ordered `d` and C/F operands, a loop for outer products, the
    plain sum otherwise; `d` is updated in place, a float `d` gets the sum."""
    import numba

    from zymo import runtime
    from zymo.codegen.numba import twins as numba_rt
    from zymo.codegen.numba.rewrites import accumulating_products

    src = ("def f(d, e, g, a, b):\n    d += _rt.dot_vjp_a(g, a, b)\n    e[0] += _rt.dot_vjp_b(g, a, b)\n"
           "    d += 2.0 * _rt.matmul_vjp_b(g, a, b)\n    return d\n")
    out = accumulating_products(src)
    assert "    d = _rt.acc_dot_vjp_a(d, g, a, b)\n" in out
    assert "e[0] += _rt.dot_vjp_b(g, a, b)" in out and "d += 2.0 * _rt.matmul_vjp_b(g, a, b)" in out

    names = ("dot_vjp_a", "dot_vjp_b", "matmul_vjp_a", "matmul_vjp_b")
    fns = {n: numba.njit(lambda acc, g, a, b, f=getattr(numba_rt, "acc_" + n): f(acc, g, a, b))  # noqa: B008
           for n in names}
    rng = np.random.default_rng(5)
    A, B, G, v3, v4 = rng.random((4, 3)), rng.random((3, 5)), rng.random((4, 5)), rng.random(3), rng.random(4)
    cases = [(G, A, B), (G, np.asfortranarray(A), B), (np.asfortranarray(G), A, np.asfortranarray(B)),
             (rng.random((4, 5, 2))[:, :, 0], A, B), (v4, A, v3), (v3, v4, A),
             (rng.random((0, 5)), rng.random((0, 3)), B), (G * (1 + 1j), A + 0j, B + 0j)]
    for g, a, b in cases:
        for n, fn in fns.items():
            inc = getattr(runtime, n)(g, a, b)
            assert inc.size == 0 or g.size == 0 or np.abs(inc).max() > 0
            for acc in (rng.random(np.shape(inc)) + 0 * inc, np.asfortranarray(rng.random(np.shape(inc)) + 0 * inc)):
                want = acc + inc
                got = fn(acc, g, a, b)
                np.testing.assert_allclose(acc, want, rtol=1e-13, atol=1e-14)  # in place
                assert got is acc or np.shares_memory(got, acc)
    assert fns["dot_vjp_a"](1.5, np.ones(3), 2.0, np.arange(3.0)) == 4.5  # a float accumulator


def _add_reversed_in_place(x):
    t = x[::-1]
    x += t  # the input overlaps the output in reverse order: NumPy buffers it
    return np.sum(x * x * np.arange(1.0, x.shape[0] + 1.0))


@pytest.mark.slow
def test_in_place_ufunc_over_an_overlapping_view_matches_numpy_under_numba():
    """Numba's ufuncs with `out` read an overlapping input while writing; zymo's shim copies
    such an input first (`numba_np._unaliased`), so primal and derivative are NumPy's."""
    x0 = np.random.default_rng(3).random(5)
    check_grad(_add_reversed_in_place, x0.copy())
    res = []
    for numba in (False, True):
        x, dx = x0.copy(), np.zeros(5)
        zymo.autodiff(Reverse, _add_reversed_in_place, Active, Duplicated(x, dx), numba=numba)
        res.append((x, dx))
    np.testing.assert_allclose(res[1][0], x0 + x0[::-1], rtol=1e-15)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-13)


def _clip_broadcast(a, lo, B):
    u = np.clip(np.maximum(a, 0.3), lo, 0.8)  # (3, 1) clipped by (1, 4) bounds: a (3, 4) result
    return np.sum(np.where(B > 0.5, u * B, B))


@pytest.mark.slow
def test_clip_with_bounds_that_broadcast_matches_numpy_under_numba():
    """Numba's own `np.clip` keeps `a`'s shape when the bounds broadcast it; zymo's shim
    computes NumPy's `minimum(maximum(a, lo), hi)`."""
    rng = np.random.default_rng(0)
    args = [rng.random((3, 1)), rng.random((1, 4)) * 0.6, rng.random((2, 3, 4))]
    check_grad(_clip_broadcast, *args)
    grads = [zymo_grad(_clip_broadcast, args, numba=numba) for numba in (False, True)]
    for g_py, g_nb in zip(*grads):
        np.testing.assert_allclose(g_nb, g_py, rtol=1e-13, atol=1e-14)
    assert np.abs(grads[1][1]).max() > 0



def _masked(x, y, c):
    u = np.maximum(x, y) * np.fmin(x, 0.5)
    v = np.where(c, np.clip(u, -0.4, 0.3), u * y)
    return np.sum(v * np.abs(y))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_masked_adjoints_compile_into_the_elementwise_intrinsics(mode):
    """The derivatives of `maximum`, `fmin`, `clip` and `where` multiply by masks
    (comparisons, `|` of `np.isnan`, `np.logical_not`, `_rt.clip_inside`): they are part of
    the intrinsics' expressions, so the compiled program has no comparison outside them. Ties
    (`x == y`) take half of each side. Against the Python backend and central differences."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(3, 4)), rng.normal(size=4)
    x[0, :2] = y[:2]  # ties
    c = rng.random((3, 4)) > 0.5
    with numba_sources() as sources:
        if mode == "reverse":
            got = zymo.gradient(zymo.Reverse, _masked, x, y, c, numba=True)
        else:
            got = zymo.gradient(zymo.Forward, _masked, x, y, c, numba=True)
    want = zymo.gradient(zymo.Reverse, _masked, x, y, c, numba=False)
    src = "\n".join(s for s in sources if "def _masked_" in s)
    outside = [line for line in src.split("\n")  # what is left once the intrinsics' expressions are taken out
               if re.search(r"[<>]|==|logical_not|isnan", re.sub(r"'[^']*'", "", line.split("#")[0]))]
    assert outside == [] and "np.isnan(" in src, outside
    for g, w in zip(got[:2], want[:2]):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-14)
    fd = fd_grad(lambda a, b: _masked(a, b, c), [x, y], [None, None], seed=1.0)
    np.testing.assert_allclose(want[0], fd[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(want[1], fd[1], rtol=1e-6, atol=1e-7)
    assert_substantial(got[0])
    assert_substantial(got[1])

def _ufuncs_with_out(x, mask):
    z = x * 1.5
    np.degrees(z, out=z)  # ufuncs Numba lowers only with `out` positional: zymo's shims pass it so
    np.greater(z, 40.0, out=mask)
    np.floor(z, out=x)  # nondifferentiable: x is a constant from here on
    return np.sum(np.where(mask, z * z, -z)) + np.sum(x)


@pytest.mark.slow
def test_ufuncs_called_with_out_compile_under_numba():
    """Numba types `np.degrees(z, out=z)` but cannot lower the `out` keyword (a bare
    NotImplementedError); every ufunc with a rule that Numba compiles goes through a shim that
    passes `out` positionally. Checked under numba=True against the Python backend, the
    closed form and finite differences."""
    x0 = np.array([0.2, 0.6, 0.9, -0.4, 0.5])
    # x's final value is floor(86 x): a step of 1e-6 (the old checker's), not 1e-3, stays between its jumps
    check_grad(_ufuncs_with_out, x0.copy(), np.zeros(5, np.bool_), const=(1,), eps=1e-6)
    grads = []
    for numba_choice in (False, True):
        x, dx, mask = x0.copy(), np.zeros(5), np.zeros(5, np.bool_)
        y = zymo.autodiff(ReverseWithPrimal, _ufuncs_with_out, Active, Duplicated(x, dx),
                          zymo.Const(mask), numba=numba_choice)[1]
        grads.append(dx)
        assert y == pytest.approx(_ufuncs_with_out(x0.copy(), np.zeros(5, np.bool_)), rel=1e-14)
        np.testing.assert_array_equal(x, np.floor(np.degrees(1.5 * x0)))
    z = np.degrees(1.5 * x0)
    closed = np.where(z > 40.0, 2 * z, -1.0) * 1.5 * 180 / np.pi
    np.testing.assert_allclose(grads[1], closed, rtol=1e-13)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-13)
    assert_substantial(grads[1])


def test_a_construct_numba_types_but_cannot_lower_is_a_numba_error():
    """Numba raises a bare NotImplementedError for some constructs it types but cannot lower;
    a compile of a zymo program reports it as a Numba error (so `numba=True` explains it and
    'prefer' falls back), never as if the program had raised it."""
    from numba.core.errors import NumbaError

    from zymo.codegen.numba.backend import _guard_compiles

    def floor_in_place(x):
        np.floor(x, out=x)  # NumPy itself: Numba cannot lower the keyword
        return x

    dispatcher = numba.njit(floor_in_place)
    with pytest.raises(NotImplementedError):
        dispatcher(np.ones(3))
    _guard_compiles(dispatcher, None)
    with pytest.raises(NumbaError, match="Numba cannot lower this construct: unsupported keyword"):
        dispatcher(np.ones(3))


@numba.njit
def _halve_sum(x):
    acc = x * 0.0  # Numba: float64 for a float32 x (NumPy 2 keeps float32)
    for i in range(3):
        acc = acc + np.sin(x) * (i + 0.5)
    return acc


@pytest.mark.slow
def test_a_compiled_derivative_has_the_dtypes_of_numba_not_numpy():
    """Where Numba's typing differs from NumPy's (a float32 array times a Python float), the
    compiled derivative follows Numba, like the `@njit` primal it differentiates; the Python
    backend follows NumPy. The values agree to float32 precision and with the closed form."""
    x = np.linspace(0.1, 1.0, 5).astype(np.float32)
    out = {}
    for numba_choice in (False, True):
        tangent, primal = zymo.autodiff(zymo.ForwardWithPrimal, _halve_sum, Duplicated,
                                        Duplicated(x.copy(), np.ones(5, np.float32)), numba=numba_choice)
        out[numba_choice] = tangent
        assert primal.dtype == tangent.dtype
    assert out[True].dtype == _halve_sum(x).dtype == np.float64
    assert out[False].dtype == _halve_sum.py_func(x).dtype == np.float32
    closed = 4.5 * np.cos(x.astype(np.float64))
    np.testing.assert_allclose(out[True], closed, rtol=1e-6)  # cos of float32 is float32 in both
    np.testing.assert_allclose(out[False], closed, rtol=1e-6)


def _vector_product(a, b):
    return (a @ b) * np.sum(a)


@pytest.mark.slow
def test_a_product_of_two_vectors_compiles_under_numba():
    """`a @ b` of 1-d arrays has a scalar adjoint: the shims' dtype of the product adjoint once
    read `.dtype` of it (an AttributeError out of Numba's typing)."""
    a, b = np.linspace(0.1, 1.0, 4), np.linspace(1.0, 2.0, 4)
    da, db = zymo.gradient(Reverse, _vector_product, a, b, numba=True)
    np.testing.assert_allclose(da, np.sum(a) * b + a @ b, rtol=1e-14)
    np.testing.assert_allclose(db, np.sum(a) * a, rtol=1e-14)
    check_grad(_vector_product, a, b)


def _axis_sums(x):
    return np.sum(x, axis=0) * np.sum(x * x) + sum(x) * 0.5  # sums over the one axis of a 1-d x


@pytest.mark.slow
def test_the_sum_over_the_one_axis_of_a_vector_compiles_under_numba():
    """Its adjoint is one number, added into the operand's adjoint; the shim took it for an
    array when the axis was given (`np.sum(x, axis=0)`, the builtin `sum(x)`)."""
    x = np.array([0.3, 1.4, 0.8, 2.1])
    (dx,) = zymo.gradient(Reverse, _axis_sums, x, numba=True)
    np.testing.assert_allclose(dx, np.sum(x * x) + 2 * x * np.sum(x) + 0.5, rtol=1e-14)
    np.testing.assert_allclose(dx, zymo.gradient(Reverse, _axis_sums, x, numba=False)[0], rtol=1e-14)
    check_grad(_axis_sums, x)


def _mask_2d(a):
    b = a * 1.0
    m = a[:, :, 0] < 0.0  # a mask of the first two axes of a 3-d array (a full-rank one compiles:
    b[m] = 0.5 * a[m]     # `rewrites.full_masks`); Numba 0.6x: a bare AssertionError
    return np.sum(b * b)


@pytest.mark.slow
def test_a_numba_failure_without_a_message_is_named():
    """Numba sometimes fails with an exception that has no text (here compiling the user's own
    2-d boolean mask); the error says so instead of a bare exception name, and 'prefer' falls
    back to Python with the right numbers."""
    a = np.array([[0.3, -0.2], [-1.0, 2.0]])[:, :, None] * np.array([1.0, 0.5])
    try:
        numba.njit(_mask_2d)(a)
    except Exception as exc:
        if str(exc):
            pytest.skip(f"this Numba explains its refusal: {exc}")
    else:
        pytest.skip("this Numba compiles a 2-d boolean mask")
    with pytest.raises(ZymoNumbaError, match=r"Numba cannot compile _mask_2d: Numba raised \w+Error with no message"):
        zymo.gradient(Reverse, _mask_2d, a, numba=True)
    with pytest.warns(ZymoWarning, match="_mask_2d"):
        (da,) = zymo.gradient(Reverse, _mask_2d, a, numba="prefer")
    neg = (a[:, :, 0] < 0.0)[:, :, None]
    np.testing.assert_allclose(da, np.where(neg, 0.5 * a, 2 * a), rtol=1e-14)


def test_matrix_vector_adjoint_starts_from_zeros_not_from_freed_memory():
    """The matrix-vector loop of a product adjoint took its zero as `out[i] * 0` of an
    `np.empty` array: NaN where the allocator handed back memory that held NaN (a rule test
    failed now and then). Freed blocks of NaN just before make that every time."""
    from zymo.codegen.numba.twins import core

    mv = core._matvec(np.dtype(np.float64), False)

    @numba.njit
    def poisoned(m, v):
        for _ in range(50):  # blocks of this size, full of NaN, freed: the next allocation reuses one
            junk = np.full(m.shape[0], np.nan)
            junk[0] = np.nan
        return mv(m, v)

    m, v = np.arange(12.0).reshape(4, 3), np.array([1.0, -2.0, 0.5])
    for _ in range(20):
        np.testing.assert_allclose(poisoned(m, v), m @ v, rtol=1e-15)


def _cumprod_sum(x):
    return np.sum(np.cumprod(x) * 2.0)


@pytest.mark.slow
@pytest.mark.parametrize("numba_choice", [False, True], ids=["python", "numba"])
def test_cumprod_of_an_empty_array_has_an_empty_derivative(numba_choice):
    """The scan adjoints read `x[0]` / `g[n - 1]`: an IndexError as Python, and under Numba
    (no bounds checks) a read and write out of bounds (a segfault)."""
    for n in (0, 3):
        x = np.linspace(0.5, 1.5, n)
        (dx,) = zymo.gradient(Reverse, _cumprod_sum, x, numba=numba_choice)
        (t,) = zymo.autodiff(zymo.Forward, _cumprod_sum, Duplicated, Duplicated(x, np.ones(n)), numba=numba_choice)
        expected = np.array([7.0, 2.5, 1.0]) if n else np.zeros(0)  # 2 (1 + x1 + x1 x2), ...
        np.testing.assert_allclose(dx, expected, rtol=1e-14)
        assert t == pytest.approx(np.sum(expected))


def _add_at_loss(x, v, idx):
    a = x * 1.0
    np.add.at(a, idx, v)
    return np.sum(a * a)


def _max_rows(x):
    return np.sum(np.max(x, axis=0))


@pytest.mark.slow
def test_out_of_bounds_reads_of_the_shims_are_errors_or_broadcasts():
    """Numba checks no bounds, so the shims must: `np.add.at` with one value for every index
    (`v` of shape (1,)) read `v[1:]` past its end (wrong numbers), an index out of range wrote
    past the array, and the max along an empty axis read `x[0]` of nothing. Found by an audit
    with the allocator poisoned and neighbouring memory set to 123."""
    big = np.full(64, 123.0)
    big[0] = 1.0
    x, v, idx = np.arange(4.0), big[:1], np.array([0, 1, 2, 3])
    for numba_choice in (False, True):
        dx, dv, _ = zymo.gradient(Reverse, _add_at_loss, x, v, idx, numba=numba_choice)
        np.testing.assert_allclose(dx, 2 * (x + 1.0), rtol=1e-15)
        np.testing.assert_allclose(dv, [np.sum(2 * (x + 1.0))], rtol=1e-15)
    with pytest.raises(IndexError):
        zymo.gradient(Reverse, _add_at_loss, x, v, np.array([0, 5]), numba=True)
    for shape in ((0, 3), (0, 0)):
        with pytest.raises(ValueError, match="zero-size array"):
            zymo.gradient(Reverse, _max_rows, np.zeros(shape), numba=True)
    (dx,) = zymo.gradient(Reverse, _max_rows, np.array([[1.0, 5.0], [3.0, 2.0]]), numba=True)
    np.testing.assert_array_equal(dx, [[0.0, 1.0], [1.0, 0.0]])


def _prod_loss(x):
    return np.prod(x) * 2.0 + np.prod(x * x)


@pytest.mark.slow
@pytest.mark.parametrize("numba_choice", [False, True], ids=["python", "numba"])
def test_prod_of_an_empty_array_has_an_empty_derivative(numba_choice):
    """`prod_others` (the products of the other elements) reshaped an empty array with -1:
    a ValueError in the Python backend, where Numba's shim already returned `[]`."""
    for n in (0, 3):
        x = np.linspace(0.5, 1.5, n)
        (dx,) = zymo.gradient(Reverse, _prod_loss, x, numba=numba_choice)
        (t,) = zymo.autodiff(zymo.Forward, _prod_loss, Duplicated, Duplicated(x, np.ones(n)), numba=numba_choice)
        p = np.prod(x)
        expected = (2 * p + 2 * p * p) / x  # d/dx_i of 2 prod x + prod x^2
        np.testing.assert_allclose(dx, expected, rtol=1e-14)
        assert t == pytest.approx(np.sum(expected), rel=1e-14)


def sum_of_squares_of_list(xs):
    s = 0.0
    for x in xs:
        s += np.sum(x * x) * 0.5
    return s


def test_a_list_argument_compiles_without_numbas_reflected_list_warning():
    """A Python list of arrays reaches the compiled derivative as Numba's reflected list, by
    zymo's choice: Numba's pending-deprecation warning about it, which names a generated file
    the user never wrote, is not shown. The derivative is still right."""
    xs = [np.array([1.0, -2.0, 3.0]), np.array([0.5, 4.0, -1.5])]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (dxs,) = zymo.gradient(Reverse, sum_of_squares_of_list, xs, numba=True)
    assert not [w for w in caught if issubclass(w.category, numba.core.errors.NumbaPendingDeprecationWarning)]
    assert numba_entries(sum_of_squares_of_list)  # compiled, not a fallback
    for dx, x in zip(dxs, xs):
        np.testing.assert_allclose(dx, x)  # d/dx of sum(x * x) / 2
    assert_tree_close(dxs, zymo.gradient(Reverse, sum_of_squares_of_list, xs, numba=False)[0])
    assert_tree_close(dxs, fd_grad(sum_of_squares_of_list, [xs])[0], rtol=1e-6, atol=1e-8)
    assert_substantial(dxs[1])


def sqrt_at(x):
    return np.sqrt(x[0]) + np.log(x[1]) * 2.0


def ratio(x):
    return x[1] / x[0] - 3.0 / x[1]


def loop_of_roots(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += math.sqrt(x[i]) / x[0]
    return s


def mean_of(x):
    return np.mean(x) * 2.0


def std_of(x):
    return np.std(x) + np.sum(x)


SINGULAR = [(sqrt_at, [0.0, 0.0]), (sqrt_at, [0.0, 1.0]), (ratio, [0.0, 2.0]), (ratio, [0.0, 0.0]),
            (loop_of_roots, [0.0, 1.0, 4.0]), (mean_of, []), (std_of, [1.5])]


def root_of_shifted(t):
    return math.sqrt(t - 2.0) + 0.5 * t


def root_of_nothing(t):
    return math.sqrt(t * 0.0) * 3.0 + t


def reciprocal_of_shifted(t):
    return 1.0 / (t - 2.0)


def power_of_shifted(t):
    return (t - 2.0) ** 0.5 + 0.5 * t


def negative_power_of_shifted(t):
    return (t - 2.0) ** -1.0


def math_power_of_shifted(t):
    return math.pow(t - 2.0, 0.5) + 0.5 * t


@pytest.mark.slow
@pytest.mark.parametrize("backend", [False, True], ids=["python", "numba"])
def test_derivatives_of_python_floats_divide_as_ieee(backend):
    """The derivative rules of numbers divide as IEEE division (`_rt.fdiv`, and raise to powers
    as NumPy does, `_rt.fpow`) in both backends:
    at a Python float where `math.sqrt`'s derivative is infinite the gradient is inf (and
    nan where it meets a zero factor), as NumPy, JAX and the compiled derivative give it; the
    Python backend raised `ZeroDivisionError` in code the user never wrote. The primal's own
    division by zero still raises in the Python backend, as the user's Python does (the
    compiled program divides all numbers as IEEE division: `ieee_divisions`)."""
    for mode in (Reverse, Forward):
        (g,) = zymo.gradient(mode, root_of_shifted, 2.0, numba=backend)
        assert g == math.inf
        (g,) = zymo.gradient(mode, power_of_shifted, 2.0, numba=backend)  # `0.0 ** -0.5` (`_rt.fpow`)
        assert g == math.inf
        (g,) = zymo.gradient(mode, power_of_shifted, 3.0, numba=backend)
        assert g == pytest.approx(fd_grad(power_of_shifted, [np.float64(3.0)])[0], rel=1e-7)
        (g,) = zymo.gradient(mode, math_power_of_shifted, 2.0, numba=backend)  # `math.pow`'s rule
        assert g == math.inf
        (g,) = zymo.gradient(mode, root_of_nothing, 2.0, numba=backend)
        assert math.isnan(g)
        (g,) = zymo.gradient(mode, root_of_shifted, 3.0, numba=backend)  # away from 0: finite, right
        assert g == pytest.approx(0.5 / math.sqrt(1.0) + 0.5, rel=1e-14)
        assert g == pytest.approx(fd_grad(root_of_shifted, [np.float64(3.0)])[0], rel=1e-7)
    if backend:  # the compiled program divides numbers as NumPy divides an array's elements
        (g,) = zymo.gradient(Reverse, reciprocal_of_shifted, 2.0, numba=backend)
        assert g == -math.inf
    else:
        with pytest.raises(ZeroDivisionError):
            zymo.gradient(Reverse, reciprocal_of_shifted, 2.0, numba=backend)
        with pytest.raises(ZeroDivisionError):  # the primal's own power of zero
            zymo.gradient(Reverse, negative_power_of_shifted, 2.0, numba=backend)


def scaled_by_sigma(x, σ):
    return math.sqrt(σ) * np.sum(x * x) / σ


def test_names_beyond_ascii_compile():
    """The Numba backend's rewrites of the source cut lines at the AST's columns, which count
    UTF-8 bytes: a name like `σ` shifted them (a `NameError` or `SyntaxError` from the cut).
    Both modes against the Python backend and central differences."""
    x = np.array([1.0, 2.0])
    for numba in (False, True):
        dx = np.zeros(2)
        (_, dsigma), = zymo.autodiff(Reverse, scaled_by_sigma, Active, Duplicated(x.copy(), dx), Active(2.0),
                                     numba=numba)
        assert dsigma == pytest.approx(-0.5 * 2.0 ** -1.5 * 5.0, rel=1e-13)
        np.testing.assert_allclose(dx, 2 * x / math.sqrt(2.0), rtol=1e-13)
        (t,) = zymo.autodiff(Forward, scaled_by_sigma, Duplicated, Const(x.copy()), Duplicated(2.0, 1.0), numba=numba)
        assert t == pytest.approx(dsigma, rel=1e-13)
    assert dsigma == pytest.approx(fd_grad(scaled_by_sigma, [x, np.float64(2.0)])[1], rel=1e-7)


def test_second_order_through_ieee_divisions():
    """zymo's reverse program of `math.sqrt` divides by `_rt.fdiv`, of `t ** 0.5` raises to a
    power by `_rt.fpow`; forward mode over it (the Hessian) differentiates those by their own
    rules: against the closed form."""
    t = 3.0
    want = -0.25 * (t - 2.0) ** -1.5
    assert zymo.hessian(root_of_shifted, t) == pytest.approx(want, rel=1e-12)
    assert zymo.hessian(power_of_shifted, t) == pytest.approx(want, rel=1e-12)  # through `_rt.fpow`
    assert zymo.hessian(root_of_shifted, t) == pytest.approx(
        (zymo.gradient(Reverse, root_of_shifted, t + 1e-5)[0] - zymo.gradient(Reverse, root_of_shifted, t - 1e-5)[0])
        / 2e-5, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("f, x", SINGULAR, ids=lambda a: getattr(a, "__name__", str(a)))
def test_a_compiled_derivative_divides_by_zero_as_the_python_backend(f, x):
    """Numba divides numbers as Python does (`ZeroDivisionError`); the Python backend divides
    NumPy numbers, which give inf or nan. Compiled derivatives divide as NumPy does
    (`ieee_divisions`): the same inf, nan and signs, where the derivative is infinite
    (sqrt and log at 0, a ratio at a zero divisor) or undefined (the mean of nothing, the
    std of one element), under numba=True (so a fallback fails the test)."""
    x = np.array(x)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        (got,) = zymo.gradient(Reverse, f, x, numba=True)
        (want,) = zymo.gradient(Reverse, f, x, numba=False)
    assert numba_entries(f)
    np.testing.assert_array_equal(got, want)  # equal inf, -inf and nan where they are
    assert got.shape == x.shape
    assert x.size == 0 or not np.all(np.isfinite(got))


@pytest.mark.parametrize("f, x", [(sqrt_at, [0.7, 1.3]), (ratio, [0.6, 2.0]), (loop_of_roots, [0.5, 1.0, 4.0]),
                                  (std_of, [1.5, 0.2, -0.4])], ids=lambda a: getattr(a, "__name__", str(a)))
def test_ieee_divisions_keep_the_derivative_away_from_zero(f, x):
    x = np.array(x)
    (got,) = zymo.gradient(Reverse, f, x, numba=True)
    np.testing.assert_allclose(got, fd_grad(f, [x])[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got, zymo.gradient(zymo.Forward, f, x, numba=False)[0], rtol=1e-12)
    assert_substantial(got)


def test_ieee_divisions_rewrites_divisions_by_what_may_be_zero_on_their_lines():
    src = ("def f(a, b, n, s):\n"
           "    t = a / b + a / 2.0 - a / -4\n"
           "    # a comment stays\n"
           "    if a / (b - 1.0) > 0:\n"
           "        s /= n\n"
           "        a /= n\n"
           "    return t // n, g(a / b) % n, a / 0\n")
    out = ieee_divisions(src, frozenset({"s"}))
    assert out.split("\n") == [
        "def f(a, b, n, s):",
        "    t = _rt.fdiv(a, b) + a / 2.0 - a / -4",
        "    # a comment stays",
        "    if _rt.fdiv(a, b - 1.0) > 0:",
        "        s = _rt.fdiv(s, n)",
        "        a /= n",  # not a float name: an array divides in place, as NumPy does
        "    return t // n, g(_rt.fdiv(a, b)) % n, _rt.fdiv(a, 0)",
        ""]
    assert ieee_divisions("def f(a):\n    return a * 2\n") == "def f(a):\n    return a * 2\n"


def norm_cubed(x):
    return np.linalg.norm(x) ** 3 + np.linalg.norm(x, 3.0) ** 2 + np.linalg.norm(x, 1) ** 2


def frobenius_cubed(a):
    return np.linalg.norm(a) ** 3  # Numba's own norm refuses ord="fro" at run time


def _fd_hessian(f, x, eps=1e-5):
    """Central differences of the Python backend's gradient, one column per element of x."""
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        up = zymo.gradient(Reverse, f, x + e.reshape(x.shape), numba=False)[0]
        down = zymo.gradient(Reverse, f, x - e.reshape(x.shape), numba=False)[0]
        cols.append(((up - down) / (2 * eps)).ravel())
    return np.array(cols).T


@pytest.mark.slow
@pytest.mark.parametrize("f, x", [(norm_cubed, np.array([0.3, -1.2, 2.0])),
                                  (frobenius_cubed, np.array([[0.3, -1.2], [2.0, 0.5]]))],
                         ids=["norm", "frobenius"])
def test_second_order_of_norms_compiles_under_numba(f, x):
    """Second order differentiates the helpers first order calls: `norm_grad` has a Numba
    tangent (`norm_grad_dx`), for an ord known at typing (None, 1, 'fro') or only at run time
    (3.0: Numba has no float literals). The Hessian under numba=True (a refusal raises)
    against the Python backend's and central differences of the gradient."""
    h = zymo.hessian(f, x, numba=True)
    h_py = zymo.hessian(f, x, numba=False)
    np.testing.assert_allclose(h, h_py, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.reshape(x.size, x.size), _fd_hessian(f, x), rtol=1e-5, atol=1e-6)
    assert_substantial(h)


def tangent_chain(x):
    y = np.sin(x) * x + np.cos(x)
    z = y * y - np.tanh(x)
    return np.sum(z * x)


def reshaped(x):
    a = x.reshape(1, 2)
    return np.sum(np.sin(a) * a.T)


@pytest.mark.slow
@pytest.mark.parametrize("f, x", [(tangent_chain, np.array([0.3, -1.2, 2.0])), (reshaped, np.array([0.7, -0.4]))],
                         ids=["elementwise", "reshape"])
def test_second_order_of_array_programs_compiles_into_the_elementwise_intrinsics(f, x):
    """Forward over reverse nests `_rt.as_shape` around each lane's tangent; under Numba every
    nested one was an array expression compiled as a kernel of its own (16 s for the Hessian
    of `tangent_chain`). They are elementwise expressions now: the compiled program calls no
    `as_shape` outside the intrinsics' expressions. The reverse program's reshape shadows
    (`reshape_shadow`) have a Numba version (the Hessian of `reshaped` was refused). Against
    the Python backend and central differences of the gradient."""
    with numba_sources() as sources:
        h = zymo.hessian(f, x, numba=True)
    second = [s for s in sources if "_rev_fwd" in s]
    assert second and not any(re.search(r"(?<!')_rt\.as_shape\(", line.split("_rt.ew_")[0])
                              for s in second for line in s.split("\n"))
    np.testing.assert_allclose(h, zymo.hessian(f, x, numba=False), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h, _fd_hessian(f, x), rtol=1e-5, atol=1e-6)
    assert_substantial(h)


def widening_sum(x):
    acc = x * 0.5
    for i in range(3):
        acc = np.float_power(acc, 1.0) * 1.5 + x * (i + 1.0)  # float32 -> float64 after one trip
    return np.sum(acc)


@pytest.mark.slow
def test_a_loop_carry_that_widens_compiles_under_numba():
    """A float32 carry that a loop widens to float64 is a converted copy (`_rt.as_dtype`),
    which had no Numba version: numba=True was refused. Reverse and forward mode under Numba
    against the Python backend and central differences (in float64)."""
    x = np.random.default_rng(4).normal(size=4).astype(np.float32)
    (g,) = zymo.gradient(Reverse, widening_sum, x, numba=True)
    (g_py,) = zymo.gradient(Reverse, widening_sum, x, numba=False)
    assert g.dtype == g_py.dtype == np.float32
    np.testing.assert_array_equal(g, g_py)
    (fd,) = fd_grad(widening_sum, [x])
    np.testing.assert_allclose(g, fd, rtol=1e-4)
    (t,) = zymo.gradient(zymo.Forward, widening_sum, x, numba=True)
    np.testing.assert_allclose(t, g, rtol=1e-6)
    assert_substantial(g)


@pytest.mark.slow
def test_the_tangent_of_the_cholesky_adjoint_compiles_under_numba():
    """`cholesky_vjp_dl`, what second order of `np.linalg.cholesky` calls, against its NumPy
    version (which the rule tests check against finite differences) and against central
    differences of `cholesky_vjp` itself. (A whole Hessian of a 3x3 cholesky program compiles
    for 87 s under Numba, eight lanes in one function; not run here.)"""
    from zymo.codegen.numba import twins as numba_rt
    from zymo.runtime import second as second_rt

    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 4))
    low = np.linalg.cholesky(a @ a.T + 4.0 * np.eye(4))
    g, t = rng.standard_normal((4, 4)), np.tril(rng.standard_normal((4, 4)))
    got = numba.njit(lambda t, g, low: numba_rt.cholesky_vjp_dl(t, g, low))(t, g, low)
    np.testing.assert_allclose(got, second_rt.cholesky_vjp_dl(t, g, low), rtol=1e-12, atol=1e-12)
    eps = 1e-6
    vjp = zymo.runtime.cholesky_vjp
    fd = (vjp(g, low + eps * t) - vjp(g, low - eps * t)) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)
    assert_substantial(got)


@pytest.mark.slow
def test_second_order_of_a_norm_at_zero_is_zero_under_numba():
    """At x = 0 the norm's gradient is 0 by convention, and so is its tangent (as in Python)."""
    x = np.zeros(3)
    h = zymo.hessian(frobenius_cubed, x, numba=True)
    np.testing.assert_array_equal(h, zymo.hessian(frobenius_cubed, x, numba=False))
    np.testing.assert_array_equal(h, np.zeros((3, 3)))


def norm_p3(x):
    return np.linalg.norm(x, 3.0)


def norm_inf(x):
    return np.linalg.norm(x, np.inf) * 2.0 + np.linalg.norm(x, -np.inf)


@pytest.mark.slow
@pytest.mark.parametrize("f", [norm_p3, norm_inf])
def test_a_norm_order_known_only_at_run_time_compiles_under_numba(f):
    """Numba has no float literals, so `ord=3.0` or `np.inf` reaches the gradient helper as a
    number known at run time (it was refused); ties at the max share the derivative, as in
    the Python backend."""
    x = np.array([0.3, -1.2, 2.0, 0.7])
    (dx,) = zymo.gradient(Reverse, f, x, numba=True)
    np.testing.assert_allclose(dx, zymo.gradient(Reverse, f, x, numba=False)[0], rtol=1e-12)
    np.testing.assert_allclose(dx, fd_grad(f, [x])[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(zymo.gradient(zymo.Forward, f, x, numba=True)[0], dx, rtol=1e-12)
    assert_substantial(dx)
    ties = np.array([2.0, -2.0, 0.5, 1.0])
    np.testing.assert_allclose(zymo.gradient(Reverse, f, ties, numba=True)[0],
                               zymo.gradient(Reverse, f, ties, numba=False)[0], rtol=1e-12)


def numbers_then_loops(x, m):
    k = m - 1
    w = 2 * k + 1
    c = x[0] * 0.5 + x[1]
    s = c * c
    for i in range(k, w):
        s += np.sin(x[i % x.shape[0]]) * c
    return s


@pytest.mark.slow
def test_statements_of_numbers_are_left_to_numba_in_both_modes():
    """Outside loops, `t = a - 1` of numbers was an elementwise intrinsic (`_rt.ew_new`) when
    its operands were not float adjoints: the intrinsic's fallback ran it as written, at the
    cost of one more typing. Names of numbers (`Namer.numbers`) are left to Numba now. Both
    modes under Numba, against the Python backend and central differences."""
    x = np.linspace(0.2, 1.4, 6)
    for mode in (Reverse, zymo.Forward):
        with numba_sources() as sources:
            g = zymo.gradient(mode, numbers_then_loops, x, 3, numba=True)[0]
        assert sources and not any("_rt.ew_new(" in s or "_rt.acc_ew(" in s for s in sources), sources
        g_py = zymo.gradient(mode, numbers_then_loops, x, 3, numba=False)[0]
        np.testing.assert_allclose(g, g_py, rtol=1e-12)
        np.testing.assert_allclose(g, fd_grad(lambda v: numbers_then_loops(v, 3), [x])[0], rtol=1e-6, atol=1e-8)
        assert_substantial(g)


def frobenius(A, B):
    return np.linalg.norm(A * B, "fro") + np.linalg.norm(A, ord="fro")


def test_frobenius_norm_by_its_name_compiles():
    """`np.linalg.norm(A, 'fro')`: Numba types it but raises "Invalid norm order for matrices"
    when it runs (a raw ValueError, helper 70); `np_linalg.norm` computes it."""
    from helpers import fd_grad

    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    got = {}
    for backend in (False, True):
        dA = np.zeros_like(A)
        (_, value) = zymo.autodiff(zymo.ReverseWithPrimal, frobenius, zymo.Active, zymo.Duplicated(A.copy(), dA),
                                   zymo.Const(B), numba=backend)
        assert value == pytest.approx(frobenius(A, B), rel=1e-14)
        got[backend] = dA
    np.testing.assert_allclose(got[True], got[False], rtol=1e-13)
    np.testing.assert_allclose(got[True], fd_grad(lambda a: frobenius(a, B), [A])[0], rtol=1e-6)
    (tangent,) = zymo.autodiff(zymo.Forward, frobenius, zymo.Duplicated, zymo.Duplicated(A.copy(), np.ones_like(A)),
                               zymo.Const(B), numba=True)
    assert tangent == pytest.approx(np.sum(got[False]), rel=1e-12)

    from zymo.codegen.numba import np_shim

    @numba.njit
    def vector_fro(v):
        return np_shim.linalg.norm(v, "fro")
    with pytest.raises(ValueError, match="Invalid norm order for vectors"):
        vector_fro(np.ones(3))


def _sort_down_columns(A):
    return np.sum(np.sort(A, axis=0) ** 2 * np.arange(A.shape[1]))


def test_a_refused_primal_also_names_the_derivatives_own_error():
    """`np.sort` along the first axis: Numba refuses the primal at the user's line, and the message
    also says why the derivative failed (zymo compiles derivatives of a few constructs Numba's
    primal does not, so the primal's refusal alone can mislead: helper 69; `np.max` over two
    axes, the example before, compiles since helper 78)."""
    A = np.random.default_rng(0).standard_normal((3, 4))
    with pytest.raises(ZymoNumbaError, match=r"(?s)Numba cannot compile _sort_down_columns.*derivative's own error: "
                                             r"No implementation of function Function\(<function sort"):
        zymo.gradient(Reverse, _sort_down_columns, A, numba=True)
    (g,) = zymo.gradient(Reverse, _sort_down_columns, A, numba="kernels")
    np.testing.assert_allclose(g, 2.0 * A * np.arange(A.shape[1]))
