"""Matrix-product loop nests as NumPy/BLAS calls (`codegen/idioms.py`, the "kernels" backend).

The recognizer on generated-style source: the nests it rewrites (run against the loops they
replace) and those it must leave alone; then gradients through `numba="kernels"` against
central differences and the Python backend, with an aliased call that must run the loops."""
from __future__ import annotations

import ast
import math

import numpy as np
import pytest

import zymo
from zymo import Active, Duplicated, Reverse
from zymo import runtime as _rt
from zymo.codegen.idioms import blas_nests
from zymo.codegen.numba import masked as _tri_ops
from zymo.codegen.triangles import share_masks
from zymo.testing import check_grad

GEMM = '''
def g(alpha, beta, C, A, B, n, m, p):
    for i in range(n):
        for j in range(m):
            C[i, j] = C[i, j] * beta
        for k in range(p):
            for j_1 in range(m):
                t = alpha * A[i, k]
                b = B[k, j_1]
                C[i, j_1] = C[i, j_1] + t * b
    return C
'''

ADJOINT = '''
def g(alpha, A, B, dA, dB, dC, n, m, p):
    for _r_2 in range(n):
        i = n - 1 - _r_2
        for _r_1 in range(p):
            k = p - 1 - _r_1
            for _r in range(m):
                j = m - 1 - _r
                t = alpha * A[i, k]
                dt = dC[i, j]
                dC[i, j] = 0.0
                dB[k, j] += t * dt
                dA[i, k] += alpha * (dt * B[k, j])
                dC[i, j] += dt
    return dA
'''

ND = {"A": 2, "B": 2, "C": 2, "D": 2, "E": 2, "dA": 2, "dB": 2, "dC": 2, "x": 1, "y": 1, "u": 1, "v": 1}
NUMBERS = frozenset({"alpha", "beta", "n", "m", "p", "i", "j", "k", "j_1", "t", "b", "dt"})


# a triangle of (i, j), RANGE the loop over j: a masked update and a product over a masked operand
TRI = '''
def g(alpha, C, A, D, E, n, p):
    for i in range(n):
        for k in range(p):
            for j in RANGE:
                C[i, j] += alpha * A[i, k] * A[j, k]
    for i in range(n):
        for k in range(p):
            for j in RANGE:
                D[i, k] += E[i, j] * A[j, k]
                D[j, k] += E[i, j] * A[i, k]
    return C
'''

# the forms of the module contract of codegen/triangles.py: j's loop forward and reversed, and
# the triangle as a function of (i, j)
FORMS = {
    "range(i + 1)": ("range(i + 1)", "t = i + 1\n{}for _r in range(t):\n{}    j = t - 1 - _r",
                     lambda i, j: j <= i),
    "range(i)": ("range(i)", "t = i\n{}for _r in range(t):\n{}    j = t - 1 - _r", lambda i, j: j < i),
    "range(i, n)": ("range(i, n)", "for _r in range(_rt.span(i, n)):\n{}    j = n - 1 - _r",
                    lambda i, j: j >= i),
    "range(i + 1, n)": ("range(i + 1, n)", "for _r in range(_rt.span(i + 1, n)):\n{}    j = n - 1 - _r",
                        lambda i, j: j > i),
}


def _tri_src(form: str, reverse: bool) -> str:
    fwd, rev, _ = FORMS[form]
    if not reverse:
        return TRI.replace("RANGE", fwd)
    out = []
    for line in TRI.replace("RANGE", "RANGE:").splitlines():
        if "for j in RANGE:" in line:
            pad = line[:len(line) - len(line.lstrip())]
            line = pad + rev.format(pad, pad)
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("form", list(FORMS))
def test_triangles_become_masked_products(form, reverse):
    src = _tri_src(form, reverse)
    out = blas_nests(src, ND, NUMBERS)
    assert out.count("_rt.blas_ready(") == 2 and "_tri_ops." in out and "where=" not in out
    # one mask per nest, one masked operand `E` for both statements of the second nest where
    # their products merge (`(w + w.T) @ A`); where they do not (a strict triangle's two boxes),
    # two triangular products (`_triangular_products`), no masked copy and no mask made for it
    if form in ("range(i)", "range(i + 1, n)"):
        assert out.count("_rt.tri_mask(") == 1 and "_tri_ops.where(" not in out and out.count("_rt.tri_dot(") == 2
    else:
        assert out.count("_rt.tri_mask(") == 2
        assert out.count("_tri_ops.where(") + out.count("_tri_ops.sym_where(") == 1
    rng = np.random.default_rng(5)
    n, p = 5, 3
    inside = np.fromfunction(FORMS[form][2], (n, n))
    C = rng.random((n, n))
    C[~inside] = np.where(rng.random(n * n - inside.sum()) < 0.5, -0.0, np.nan)  # stay, bit for bit
    E = rng.random((n, n))
    E[~inside] = np.nan  # never read
    for nan_in_A in (False, True):  # a NaN where the masked zeros meet it: the loops run
        A = rng.random((n, p))
        A[n - 1, 0] = np.nan if nan_in_A else A[n - 1, 0]
        args = [1.5, C.copy(), A, rng.random((n, p)), E, n, p]
        want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        _run(src, *want)
        _run(out, *args)
        for a, b in zip(args[1:4], want[1:4]):
            np.testing.assert_allclose(a, b, rtol=1e-12)
        assert np.array_equal(args[1][~inside].view(np.int64), C[~inside].view(np.int64))


# a triangle's mirror store (forward) and its adjoint, as reverse mode writes them; RANGE the
# loop over j, its triangle with i of the module contract of codegen/triangles.py
MIRROR = '''
def g(C, A, dC, dA, n, p, s):
    for i in range(n):
        for j in RANGE:
            C[i, j] = 0.0
            for k in range(p):
                C[i, j] += A[k, i] * A[k, j]
            C[i, j] /= s
            C[j, i] = C[i, j]
    for _r_2 in range(n):
        i = n - 1 - _r_2
        for j in RANGE:
            t = s + 0.0
            dC_1 = dC[j, i]
            dC[j, i] = 0.0
            dC[i, j] += dC_1
            dt = dC[i, j]
            dC[i, j] = 0.0
            dC[i, j] += _rt.fdiv(dt, t)
            for _r in range(p):
                k = p - 1 - _r
                dt_2 = dC[i, j]
                dA[k, j] += A[k, i] * dt_2
                dA[k, i] += dt_2 * A[k, j]
            dC[i, j] = 0.0
'''


@pytest.mark.parametrize("form", ["range(i, n)", "range(i + 1, n)", "range(i + 1)"])
def test_mirror_store_leaves_the_nest(form):
    out = blas_nests(MIRROR.replace("RANGE", form), ND, NUMBERS | {"s"})
    # the adjoint's two products into dA share a factor where both triangles have one box:
    # one product (`_merge_products`)
    merged = form != "range(i + 1, n)"
    products = (out.count(" @ ") + out.count("_rt.sym_add(") + out.count("_rt.sym_set(")  # `F.T @ F`: BLAS's syrk
                + out.count("_rt.tri_dot("))
    divisions = ("_tri_ops.div(", "_tri_ops.div_mirror(", "_tri_ops.move_div(")  # alone or paired (`_pairs`)
    assert out.count("_rt.blas_ready(") == 2 and products == (2 if merged else 3) and any(d in out for d in divisions)
    assert ("_tri_ops.sym_where(" in out) == merged  # `w + w.T` made in one pass (`triangles._symmetrized`)
    rng = np.random.default_rng(8)
    n, p = 5, 4
    inside = np.fromfunction(FORMS[form][2], (n, n))
    outside = ~(inside | inside.T)  # the diagonal of a strict triangle: never touched
    for alias in (False, True):
        C, dC = rng.random((n, n)), rng.random((n, n)) - 0.5
        C[outside], dC[outside] = np.nan, -0.0
        A = rng.random((p, n))
        args = [C, A, dC, rng.random((p, n)), n, p, 0.7]
        if alias:  # A is C's memory: the forward nest runs its loops
            args[1] = C[:p]
        want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        if alias:
            want[1] = want[0][:p]
        _run(MIRROR.replace("RANGE", form), *want)
        _run(out, *args)
        for a, b in zip(args[:4], want[:4]):
            np.testing.assert_allclose(a, b, rtol=1e-12)
        for a, b in ((args[0], C), (args[2], dC)):
            assert np.array_equal(a[outside].view(np.int64), b[outside].view(np.int64))
        assert np.array_equal(C.view(np.int64), C.T.view(np.int64))  # the mirror copied, bit for bit


def test_upper_triangle_under_a_shorter_loop_checks_its_bound():
    """`for i in range(q): for j in range(i + 1, n)` is the strict triangle of side n only
    when `q >= n - 1`; else (a trapezoid) the loops run."""
    src = (MIRROR.split("    for _r_2")[0].replace("range(n)", "range(q)").replace("RANGE", "range(i + 1, n)")
           .replace("dC, dA, n, p, s", "n, p, s, q"))
    out = blas_nests(src, ND, NUMBERS | {"s", "q"})
    assert " and q >= n - 1" in out and " @ " in out
    rng = np.random.default_rng(9)
    n, p = 6, 3
    for q in (n - 1, n + 2, n - 3):
        C, A = rng.random((n, n)), rng.random((p, n))
        want = C.copy()
        _run(src, want, A, n, p, 0.7, q)
        _run(out, C, A, n, p, 0.7, q)
        np.testing.assert_allclose(C, want, rtol=1e-12)


def test_masked_operands_in_a_branch_are_made_in_it_after_writes_there():
    """A piece checked where it starts (`if np.isfinite(...).all(): ... else: <loops>`): what
    its branch makes stays in it, after the statements of the branch that write its array."""
    body = ast.parse("a = np.where(_rt.tri_mask(n), X, 0.0) @ Y\n"
                     "if np.isfinite(Y).all():\n"
                     "    b = np.where(_rt.tri_mask(n), X, 0.0) @ Y\n"
                     "    X *= 2.0\n"
                     "    c = np.where(_rt.tri_mask(n), X, 0.0) @ Y\n"
                     "else:\n"
                     "    for i in range(n):\n"
                     "        X[i, 0] = 0.0\n"
                     "d = np.where(_rt.tri_mask(n), X, 0.0) @ Y\n").body
    names = iter(["_tri", "_masked", "_masked_1", "_masked_2"])
    got = ast.unparse(ast.Module(share_masks(body, lambda base: next(names)), []))
    assert got.split("\n") == [
        "_tri = _rt.tri_mask(n)", "_masked = np.where(_tri, X, 0.0)", "a = _masked @ Y",
        "if np.isfinite(Y).all():", "    b = _masked @ Y", "    X *= 2.0", "    _masked_1 = np.where(_tri, X, 0.0)",
        "    c = _masked_1 @ Y", "else:", "    for i in range(n):", "        X[i, 0] = 0.0",
        "_masked_2 = np.where(_tri, X, 0.0)", "d = _masked_2 @ Y"]


def test_masked_operand_made_again_after_its_array_is_written():
    body = ast.parse("a = np.where(_rt.tri_mask(n), X, 0.0) @ Y\n"
                     "b = np.where(_rt.tri_mask(n), X, 0.0) @ Y\n"
                     "np.multiply(X, 2.0, out=X, where=_rt.tri_mask(n))\n"
                     "c = np.where(_rt.tri_mask(n), X, 0.0) @ Y\n").body
    names = iter(["_tri", "_masked", "_masked_1"])
    got = ast.unparse(ast.Module(share_masks(body, lambda base: next(names)), []))
    assert got.split("\n") == [
        "_tri = _rt.tri_mask(n)", "_masked = np.where(_tri, X, 0.0)", "a = _masked @ Y", "b = _masked @ Y",
        "np.multiply(X, 2.0, out=X, where=_tri)", "_masked_1 = np.where(_tri, X, 0.0)", "c = _masked_1 @ Y"]


def _run(src: str, *args):
    ns = {"np": np, "math": math, "_rt": _rt, "_tri_ops": _tri_ops}
    exec(src, ns)
    return ns["g"](*args)


def _gemm_args(rng, n=5, m=4, p=3):
    return [1.5, 0.5, rng.random((n, m)), rng.random((n, p)), rng.random((p, m)), n, m, p]


def test_gemm_nest_becomes_products():
    out = blas_nests(GEMM, ND, NUMBERS)
    assert "_rt.blas_ready(" in out
    assert "C[:n, :m] *= beta" in out and "C[:n, :m] += alpha * (A[:n, :p] @ B[:p, :m])" in out
    assert "for k in range(p)" in out  # the loops stay, as the fallback
    rng = np.random.default_rng(0)
    args = _gemm_args(rng)
    want = _run(GEMM, *[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    np.testing.assert_allclose(_run(out, *args), want, rtol=1e-12)


def test_matrix_vector_nests_alone_stay_loops():
    src = """
def g(A, x, y, n, m):
    for i in range(n):
        for j in range(m):
            y[i] = y[i] + A[i, j] * x[j]
"""
    assert blas_nests(src, ND, NUMBERS) == src
    both = GEMM.replace("    return C", "    for i in range(n):\n        for j in range(m):\n"
                                       "            C[i, j] += x[i] * y[j]\n    return C")
    assert "C[:n, :m] += x[:n][:, None] * y[:m][None, :]" not in blas_nests(both, ND, NUMBERS)


def test_adjoint_nest_with_round_trip():
    out = blas_nests(ADJOINT, ND, NUMBERS)
    assert "dB[:p, :m] += alpha * (A[:n, :p].T @ dC[:n, :m])" in out
    assert "dA[:n, :p] += alpha * (dC[:n, :m] @ B[:p, :m].T)" in out
    rng = np.random.default_rng(1)
    n, m, p = 4, 5, 3
    args = [0.7, rng.random((n, p)), rng.random((p, m)), rng.random((n, p)), rng.random((p, m)),
            rng.random((n, m)), n, m, p]
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    _run(ADJOINT, *copies)
    _run(out, *args)
    for a, b in zip(args, copies):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("src", [
    # the accumulated array read inside the nest
    GEMM.replace("t * b\n", "t * C[k, j_1]\n"),
    # a step other than 1
    GEMM.replace("range(p)", "range(0, p, 2)"),
    # a temporary read after the nest
    GEMM.replace("    return C", "    return t"),
    # a triangle's bound written in the nest
    GEMM.replace("range(p)", "range(t_b)").replace("    for i in range(n):\n",
                                                   "    for i in range(n):\n        t_b = i + p\n"),
    # a triangle with a step other than 1
    GEMM.replace("range(p)", "range(0, i + 1, 2)"),
    # an upper triangle whose bound reads an index
    GEMM.replace("range(p)", "range(i, i + p)"),
    # the triangle's written array read off the triangle by a later piece of the nest
    '''
def g(alpha, C, A, D, n, p):
    for i in range(n):
        for k in range(p):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]
        for j in range(n):
            D[i, j] = C[j, i]
''',
    # two triangles in one nest
    TRI.replace("for k in range(p)", "for k in range(i + 1)").replace("RANGE", "range(k + 1)"),
    # a mirror store over a rectangle (`X[j, i]` is another iteration's `X[i, j]`), or before
    # the last statement touching `X[i, j]`
    MIRROR.replace("RANGE", "range(n)"),
    MIRROR.split("    for _r_2")[0].replace("RANGE", "range(i, n)").replace(
        "C[i, j] /= s\n            C[j, i] = C[i, j]", "C[j, i] = C[i, j]\n            C[i, j] /= s"),
    # distribution would read `x[j]` before the later iteration that writes it
    '''
def g(A, x, y, n):
    for i in range(n):
        for j in range(n):
            y[i] += A[i, j] * x[j]
        x[i] = y[i]
''',
])
def test_refused_nests_stay_loops(src):
    assert blas_nests(src, ND, NUMBERS | {"i"}) == src


@pytest.mark.parametrize("case", ["overlap", "ints"])
def test_run_time_checks_fall_back_to_the_loops(case):
    out = blas_nests(GEMM, ND, NUMBERS)
    rng = np.random.default_rng(2)
    args = _gemm_args(rng, 4, 4, 4)
    if case == "overlap":
        args[3] = args[2]  # A is C: the loops read what they wrote
    else:
        args[2:5] = [(10 * a).astype(np.int64) for a in args[2:5]]
        args[:2] = [1.5, 3]  # the loops truncate each sum; `+=` of floats into ints would raise
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    if case == "overlap":
        copies[3] = copies[2]
    want = _run(GEMM, *copies)
    assert np.array_equal(_run(out, *args), want)


# trmm (B := alpha * (B + strict-upper(A)^T B), in place) and its adjoint, as reverse mode writes
# them: each reads rows of the array it writes, every read of a row in an iteration of `i` run
# before the one that writes it, and distributes over `i` by that order (`_ordered`, `_read_first`)
TRMM = '''
def g(alpha, A, B, dA, dB, S, n, p):
    for i in range(n):
        t_1 = i + 1
        for j in range(p):
            for k in range(t_1, n):
                a = A[k, i]
                b = B[k, j]
                B[i, j] = B[i, j] + a * b
            B[i, j] = alpha * B[i, j]
    for _r_2 in range(n):
        i = n - 1 - _r_2
        t_1 = i + 1
        for _r_1 in range(p):
            j = p - 1 - _r_1
            dt = dB[i, j]
            dB[i, j] = 0.0
            dB[i, j] += alpha * dt
            for _r in range(_rt.span(t_1, n)):
                k = n - 1 - _r
                a = A[k, i]
                b = S[k, j]
                dt_2 = dB[i, j]
                dB[k, j] += a * dt_2
                dA[k, i] += dt_2 * b
    return B
'''


def _trmm_args(rng, n=6, p=4):
    return [1.5, rng.random((n, n)), rng.random((n, p)), rng.random((n, n)), rng.random((n, p)), rng.random((n, p)),
            n, p]


def test_nests_reading_rows_before_writing_them_become_products():
    out = blas_nests(TRMM, ND | {"S": 2}, NUMBERS | {"a", "dt_2"})
    # the masked operands' products as BLAS's triangular products, the adjoint's other as `@`
    # (trmm's in place: `_rt.tri_dot_add`, its rows checked finite whole)
    assert out.count("_rt.blas_ready(") == 2 and out.count("_rt.tri_dot_add(") == 2 and out.count(" @ ") == 1, out
    assert "np.isfinite(B[:n, :p]).all()" in out and "np.isfinite(dB[:n, :p]).all()" in out
    # the adjoint's product reading dB comes before the one writing it
    assert out.index("_tri_ops.add(dA") < out.index("_rt.tri_dot_add(dB[:n, :p]")
    rng = np.random.default_rng(11)
    for bad in (None, np.inf, np.nan):  # a non-finite element the masked zeros would meet: those loops run
        args = _trmm_args(rng)
        if bad is not None:
            args[2][3, 1] = bad
            args[4][2, 2] = bad
        want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        _run(TRMM, *want)
        _run(out, *args)
        for a, b in zip(args[1:6], want[1:6]):
            if bad is None:
                np.testing.assert_allclose(a, b, rtol=1e-12)
            else:  # the loops, bit for bit
                assert np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("src", [
    # rows read after the iteration that writes them: `k < i` forward
    TRMM.split("    for _r_2")[0].replace("range(t_1, n)", "range(i)") + "    return B\n",
    # ... and `k > i` in a reversed loop
    TRMM.split("    for _r_2")[0].replace("for i in range(n):", "for _r_3 in range(n):\n        i = n - 1 - _r_3")
    + "    return B\n",
    # distribution would run every read of a row (`B[k, j]`, `k < i`) before the write of it
    '''
def g(A, B, C, n, p):
    for i in range(n):
        for k in range(i):
            for j in range(p):
                C[i, j] += A[i, k] * B[k, j]
        for j in range(p):
            B[i, j] = C[i, j]
    return C
''',
    # two accumulations each reading the other's array: no order reads both before the writes
    '''
def g(A, B, C, n, p):
    for i in range(n):
        for k in range(i + 1, n):
            for j in range(p):
                B[i, j] += A[k, i] * C[k, j]
                C[i, j] += A[k, i] * B[k, j]
    return C
''',
])
def test_nests_reading_rows_they_wrote_stay_loops(src):
    assert blas_nests(src, ND, NUMBERS | {"a", "b"}) == src


def test_distribution_before_reads_of_later_rows():
    """The later piece writes row `i`, which the earlier one reads only in earlier iterations
    (`k > i`): distributed, and the same result as the loops."""
    src = '''
def g(A, B, C, n, p):
    for i in range(n):
        for k in range(i + 1, n):
            for j in range(p):
                C[i, j] += A[i, k] * B[k, j]
        for j in range(p):
            B[i, j] = C[i, j]
    return C
'''
    out = blas_nests(src, ND, NUMBERS)
    assert "_rt.blas_ready(" in out and "_rt.tri_dot(" in out
    rng = np.random.default_rng(12)
    args = [rng.random((6, 6)), rng.random((6, 4)), rng.random((6, 4)), 6, 4]
    want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    _run(src, *want)
    _run(out, *args)
    for a, b in zip(args[:3], want[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


# -- end to end through numba="kernels" ---------------------------------------------------------

def gemm_like(alpha, C, A, B):
    n, m = C.shape
    p = A.shape[1]
    for i in range(n):
        for j in range(m):
            C[i, j] *= 0.5
        for k in range(p):
            for j in range(m):
                C[i, j] += alpha * A[i, k] * B[k, j]
    return np.sum(C * C)


def matvec_rank1(A, x, y, u, v):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            A[i, j] = A[i, j] + u[i] * v[j]
    for i in range(n):
        for j in range(m):
            y[i] = y[i] + A[i, j] * x[j]
    return np.sum(y * y) + np.sum(A * x)


@pytest.fixture
def kernels_backend():
    zymo.config.set_numba("kernels")
    yield
    zymo.config.set_numba(None)


def _grads(f, args, numba):
    shadows = [np.zeros_like(a) if isinstance(a, np.ndarray) else None for a in args]
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    ann = [Duplicated(a, s) if s is not None else a for a, s in zip(copies, shadows)]
    out = zymo.autodiff(Reverse, f, Active, *ann, numba=numba)
    return [s for s in shadows if s is not None], out


def test_gradients_match_python_and_differences(kernels_backend):
    rng = np.random.default_rng(3)
    args = [1.3, rng.random((4, 3)), rng.random((4, 5)), rng.random((5, 3))]
    check_grad(gemm_like, *args)
    fast, out = _grads(gemm_like, args, "kernels")
    slow, ref = _grads(gemm_like, args, False)
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    code = zymo.generated_code(Reverse, gemm_like, Active, *[Duplicated(a, np.zeros_like(a)) if i else a
                                                             for i, a in enumerate(args)], numba="kernels")
    assert code.count(" @ ") + code.count("_rt.dot_nt(") >= 3  # forward product and both adjoint products
    # matrix-vector products and rank-1 updates alone stay loops (module contract): exact still
    vargs = [rng.random((4, 3)), rng.random(3), rng.random(4), rng.random(4), rng.random(3)]
    check_grad(matvec_rank1, *vargs, modes=("reverse",))
    fast, _ = _grads(matvec_rank1, vargs, "kernels")
    slow, _ = _grads(matvec_rank1, vargs, False)
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_aliased_operand_runs_the_loops():
    """`C` passed as `A` too: the loops read elements they wrote, BLAS would not. (The boundary
    gives aliased arguments their own program, with caches; `blas_ready`'s check of memory is
    tested on rewritten source above.)"""
    rng = np.random.default_rng(4)
    C = rng.random((3, 3))
    B = rng.random((3, 3))
    results = []
    for numba in ("kernels", False):
        c = C.copy()
        dc = np.zeros_like(c)
        db = np.zeros_like(B)
        zymo.autodiff(Reverse, gemm_like, Active, 0.9, Duplicated(c, dc), Duplicated(c, dc), Duplicated(B, db),
                      numba=numba)
        results.append((c, dc, db))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12)


# -- triangles end to end -----------------------------------------------------------------------

def syrk_like(alpha, C, A):
    n, m = A.shape
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= 0.5
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]
    return np.sum(C * C)


def syr2k_like(alpha, C, A, B):
    n, m = A.shape
    for i in range(n):
        for k in range(m):
            for j in range(i):
                C[i, j] += A[j, k] * alpha * B[i, k] + B[j, k] * alpha * A[i, k]
    return np.sum(C * C)


def syr2k_lower(alpha, C, A, B):
    """syr2k with the diagonal (the benchmark's): the adjoint's products merge past each other."""
    n, m = A.shape
    for i in range(n):
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += A[j, k] * alpha * B[i, k] + B[j, k] * alpha * A[i, k]
    return np.sum(C * C)


def covariance_like(data, cov):
    n, m = data.shape
    for i in range(m):
        for j in range(i, m):
            cov[i, j] = 0.0
            for k in range(n):
                cov[i, j] += data[k, i] * data[k, j]
            cov[i, j] /= n - 1.0
            cov[j, i] = cov[i, j]
    return np.sum(cov * cov)


def correlation_like(data, corr):
    n, m = data.shape
    for i in range(m - 1):
        corr[i, i] = 1.0
        for j in range(i + 1, m):
            corr[i, j] = 0.0
            for k in range(n):
                corr[i, j] += data[k, i] * data[k, j]
            corr[j, i] = corr[i, j]
    corr[m - 1, m - 1] = 1.0
    return np.sum(corr * corr)


def trmm_like(alpha, A, B):
    m, n = B.shape
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]
    return np.sum(B * B)


@pytest.mark.parametrize("f, shapes, products", [
    (syrk_like, [(4, 4), (4, 3)], 2),  # the adjoint's two products merged, one coefficient on both
    (syr2k_like, [(4, 4), (4, 3), (4, 3)], 6),  # a strict triangle: each product on its own box
    (syr2k_lower, [(4, 4), (4, 3), (4, 3)], 3),  # merged past the other shadow's product; forward one ?syr2k
    (covariance_like, [(5, 3), (3, 3)], 2),  # the adjoint's two products merged (`_merge_products`)
    (correlation_like, [(5, 4), (4, 4)], 3),
    (trmm_like, [(5, 5), (5, 3)], 3),  # rows read before they are written, forward and adjoint
])
def test_triangle_gradients_match_python_and_differences(f, shapes, products):
    rng = np.random.default_rng(6)
    arrays = [rng.random(s) for s in shapes]
    args = arrays if f in (covariance_like, correlation_like) else [1.3, *arrays]
    grads = _grads(f, args, "kernels")[0]  # the inputs' (an output's shadow ends zero)
    assert all(np.all(g != 0.0) for g in (grads[:1] if f in (covariance_like, correlation_like) else grads[1:]))
    check_grad(f, *args, modes=("reverse",))
    fast, _ = _grads(f, args, "kernels")
    slow, _ = _grads(f, args, False)
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    code = zymo.generated_code(Reverse, f, Active, *[Duplicated(a, np.zeros_like(a)) if isinstance(a, np.ndarray)
                                                     else a for a in args], numba="kernels")
    assert sum(code.count(p) for p in (" @ ", "_rt.dot_nt(", "_rt.tri_dot(", "_rt.tri_dot_add(", "_rt.sym_add(",
                                       "_rt.sym_set(")) \
        == products


def test_triangle_outside_unchanged_and_aliased_runs_the_loops():
    """Elements of `C` off the triangle (here -0.0 and NaN) stay as they are, bit for bit, and
    their adjoints too; `C` passed as `A` too must run the loops."""
    rng = np.random.default_rng(7)
    C = rng.random((4, 4))
    C[0, 1:] = -0.0
    C[1, 2:] = np.nan
    A = rng.random((4, 4))
    runs = {}
    for numba in ("kernels", False):
        c, dc, da = C.copy(), np.zeros_like(C), np.zeros_like(A)
        dc[np.triu_indices(4, 1)] = -0.0
        zymo.autodiff(Reverse, syr2k_like, Active, 0.7, Duplicated(c, dc), Duplicated(A, da),
                      Duplicated(A.T.copy(), np.zeros_like(A)), numba=numba)
        runs[numba] = (c, dc, da)
        assert np.array_equal(c[np.triu_indices(4)].view(np.int64), C[np.triu_indices(4)].view(np.int64))
    for a, b in zip(*runs.values()):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    for numba in ("kernels", False):  # aliased: C is A
        c, dc = C[:, :3].copy() + 0.5, np.zeros((4, 3))
        c[np.isnan(c)] = 0.25
        c4 = np.zeros((4, 4))
        zymo.autodiff(Reverse, syrk_like, Active, 0.9, Duplicated(c4, np.zeros_like(c4)), Duplicated(c, dc),
                      numba=numba)
        runs[numba] = (c4, dc)
    for a, b in zip(runs["kernels"], runs[False]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _scaled_product(A, B, C, t):
    n, m = A.shape
    for i in range(n):
        for k in range(m):
            for j in range(B.shape[1]):
                C[i, j] += A[i, k] * B[k, j] / t
    return np.sum(C * C)


def test_division_by_a_number_divides_as_the_loops_do():
    """A product divided by a number `t`: the NumPy statements divide as IEEE (`_rt.fdiv`), as
    the loops do on NumPy numbers, so a zero `t` gives the loops' inf and no ZeroDivisionError;
    a nonzero one the Python backend's gradient and central differences."""
    rng = np.random.default_rng(5)
    A, B = rng.random((4, 3)), rng.random((3, 5))
    code = zymo.generated_code(Reverse, _scaled_product, Active, Duplicated(A, np.zeros_like(A)), B,
                               np.zeros((4, 5)), 0.7, numba="kernels")
    assert "_rt.fdiv(1.0, t)" in code and " @ " in code
    for t in (0.7, -1.3):
        fast, _ = _grads(_scaled_product, [A, B, np.zeros((4, 5)), t], "kernels")
        slow, _ = _grads(_scaled_product, [A, B, np.zeros((4, 5)), t], False)
        np.testing.assert_allclose(fast[0], slow[0], rtol=1e-12)
        assert np.all(np.abs(fast[0]) > 0.1)
    check_grad(_scaled_product, A, B, np.zeros((4, 5)), 0.7, wrt=(0,), modes=("reverse",))
    with np.errstate(divide="ignore", invalid="ignore"):
        fast, _ = _grads(_scaled_product, [A, B, np.zeros((4, 5)), 0.0], "kernels")
        slow, _ = _grads(_scaled_product, [A, B, np.zeros((4, 5)), 0.0], False)
    assert np.all(np.isinf(fast[0])) and np.array_equal(fast[0], slow[0])


def test_adjacent_products_into_one_target_merge_and_others_do_not():
    from zymo.codegen.idioms import _merge_products

    def merged(src, scales=None, finite=None):
        out = _merge_products(ast.parse(src).body, frozenset({"c", "d", "t"}), scales, {"A", "B", "C"}, finite)
        return "\n".join(ast.unparse(st) for st in out)

    finite: list[str] = []
    assert merged("X[:n] += A @ B\nX[:n] += A @ C.T", finite=finite) == "X[:n] += A @ (B + C.T)"
    assert finite == ["A"]  # checked by the guard: an infinity in the shared factor would change the sum
    assert merged("X[:n] += W @ B\nX[:n] += W @ C") == \
        "if np.isfinite(W).all():\n    X[:n] += W @ (B + C)\nelse:\n    X[:n] += W @ B\n    X[:n] += W @ C"
    assert merged("X[:n] += A @ B\nX[:n] += C @ B") == "X[:n] += (A + C) @ B"
    for kept in ["X[:n] += A @ B\nX[1:n] += A @ C",  # another target
                 "X[:n] += A @ B\nX[:n] -= A @ C",  # not both additions
                 "X[:n] += A @ B\nX[:n] += 2.0 * (A @ C)",  # not a bare product
                 "X[:n] += A @ B\nX[:n] += C @ D",  # no shared factor
                 "X[:n] += c * (A @ B)\nX[:n] += d * (A @ C)",  # other coefficients
                 "X[:n] += c * (A @ B)\nX[:n] += A @ C",
                 "X[:n] += c[0] * (A @ B)\nX[:n] += c[0] * (A @ C)",  # not a number's name
                 "X[:n] += A @ B\nC = D\nX[:n] += A @ C",  # an operand written in between
                 "X[:n] += A @ B\nC[0] = 1.0\nX[:n] += A @ C",
                 "X[:n] += A @ B\nY = X[0]\nX[:n] += A @ C",  # the target read in between
                 "X[:n] += A @ B\nif c:\n    Y = 1\nX[:n] += A @ C"]:  # not an assignment in between
        assert merged(kept) == ast.unparse(ast.parse(kept))
    assert merged("X[:n] += X * (A @ B)\nX[:n] += X * (A @ C)") == "X[:n] += X * (A @ B)\nX[:n] += X * (A @ C)"
    # with one number coefficient on both (syrk), which the guard checks, and past statements that commute (syr2k)
    scales = []
    assert merged("X[:n] += c * (A.T @ B)\nX[:n] += c * (A @ B)", scales) == "X[:n] += c * ((A.T + A) @ B)"
    assert scales == ["c"]
    assert merged("X[:n] += _rt.fdiv(1.0, t) * (A @ B)\nX[:n] += _rt.fdiv(1.0, t) * (A @ C)") == \
        "X[:n] += _rt.fdiv(1.0, t) * (A @ (B + C))"
    assert merged("X[:n] += c * (M @ B)\nY[:n] += c * (M.T @ A)\nX[:n] += c * (M.T @ B)") == \
        "X[:n] += c * ((M + M.T) @ B)\nY[:n] += c * (M.T @ A)"
    assert merged("X[:n] += A @ B\nY = 1\nX[:n] += A @ C") == "X[:n] += A @ (B + C)\nY = 1"


def test_a_product_whose_output_is_transposed_is_written_transposed():
    """`X[j, i] += A[k, i] * B[j, k]` summed over k: `(B @ A)`, not `(A.T @ B.T).T`."""
    src = """
def f(X, A, B, n, m, p):
    for i in range(n):
        for j in range(m):
            for k in range(p):
                X[j, i] += A[k, i] * B[j, k]
"""
    out = blas_nests(src, {"X": 2, "A": 2, "B": 2}, frozenset({"n", "m", "p"}))
    assert "X[:m, :n] += B[:m, :p] @ A[:p, :n]" in out and ").T" not in out
    rng = np.random.default_rng(3)
    n, m, p = 4, 3, 5
    X, A, B = rng.random((m, n)), rng.random((p, n)), rng.random((m, p))
    want = X + np.einsum("ki,jk->ji", A, B)
    ns = {"np": np, "_rt": _rt, "_tri_ops": _tri_ops}
    exec(out, ns)
    ns["f"](X, A, B, n, m, p)
    np.testing.assert_allclose(X, want, rtol=1e-13)


def test_a_transposed_product_keeps_the_broadcast_axes_of_its_target():
    """Found in review: `X[j, l, i] += A[i, k] * B[k, j]` (`l` read by no factor) was written
    `B.T @ A.T` without the new axis, which broadcasts wrongly when the shapes allow it."""
    src = """
def f(X, A, B, n, m, p, q):
    for i in range(n):
        for j in range(m):
            for l in range(q):
                for k in range(p):
                    X[j, l, i] += A[i, k] * B[k, j]
"""
    out = blas_nests(src, {"X": 3, "A": 2, "B": 2}, frozenset({"n", "m", "p", "q"}))
    assert "@" in out
    rng = np.random.default_rng(4)
    n, m, p, q = 4, 3, 5, 3  # m == q: a missing axis would broadcast without an error
    X, A, B = rng.random((m, q, n)), rng.random((n, p)), rng.random((p, m))
    want = X + np.einsum("ik,kj->ji", A, B)[:, None, :]
    ns = {"np": np, "_rt": _rt, "_tri_ops": _tri_ops}
    exec(out, ns)
    ns["f"](X, A, B, n, m, p, q)
    np.testing.assert_allclose(X, want, rtol=1e-13)


def _two_scaled(C, A, B, E, t):
    n, m = A.shape
    for i in range(n):
        for k in range(m):
            for j in range(B.shape[1]):
                C[i, j] += A[i, k] * B[k, j] / t
                C[i, j] += A[i, k] * E[k, j] / t
    return np.sum(C)


@pytest.mark.parametrize("t", [0.7, 0.0, np.inf, np.nan])
def test_products_merged_under_a_coefficient_only_where_it_is_finite_and_nonzero(t):
    """Found in review: `c * P + c * Q` is `c * (P + Q)` only for a finite nonzero `c`; with
    `t = 0` the loops' `inf + -inf` (nan) became `inf * (1 - 2)` (-inf). The guard now runs the
    loops there, and the primal and its gradient are the Python backend's."""
    A, B, E = np.ones((3, 2)), np.ones((2, 4)), -2.0 * np.ones((2, 4))
    code = zymo.generated_code(Reverse, _two_scaled, Active, Duplicated(np.zeros((3, 4)), np.zeros((3, 4))),
                               Duplicated(A, np.zeros_like(A)), B, E, 0.7, numba="kernels")
    assert "@ (B[:n_1, :n] + E[:n_1, :n])" in code
    assert "np.isfinite(_rt.fdiv(1.0, t))" in code
    runs = {}
    for numba in ("kernels", False):
        C, dC, dA = np.zeros((3, 4)), np.zeros((3, 4)), np.zeros_like(A)
        with np.errstate(all="ignore"):
            zymo.autodiff(Reverse, _two_scaled, Active, Duplicated(C, dC), Duplicated(A.copy(), dA), B, E, t,
                          numba=numba)
        runs[numba] = (C, dA)
    for a, b in zip(runs["kernels"], runs[False]):
        np.testing.assert_allclose(a, b, rtol=1e-12)  # nan where nan, inf where inf
    if t == 0.7:
        assert np.all(runs[False][1] != 0.0)
        check_grad(_two_scaled, np.zeros((3, 4)), A, B, E, 0.7, wrt=(1,), modes=("reverse",))


def test_blas_ready_checks_types_memory_and_bounds():
    """`_rt.blas_ready`, the guard of every rewritten nest, refuses what the NumPy statements
    could not run as the loops do."""
    A, B = np.zeros((4, 3)), np.zeros((3, 5))
    assert _rt.blas_ready((A,), (B,), ((A, 4, 3), (B, (1, 3), 5)))
    assert _rt.blas_ready((A,), (B,), ((A, np.int64(2), 0),))
    assert not _rt.blas_ready((A,), ([[0.0]],), ())  # not an ndarray
    assert not _rt.blas_ready((A,), (B.astype(np.int64),), ())  # not float32/float64
    assert not _rt.blas_ready((A,), (B.astype(">f8"),), ())  # not in native byte order
    assert not _rt.blas_ready((A,), (A[1:],), ())  # a written array sharing memory with another
    assert _rt.blas_ready((A[:2],), (A[2:],), ())
    assert not _rt.blas_ready((A,), (B,), ((A, 5, 3),))  # past the axis
    assert not _rt.blas_ready((A,), (B,), ((A, -1, 3),))
    assert not _rt.blas_ready((A,), (B,), ((B, (2, 1), 5),))  # start past stop
    assert not _rt.blas_ready((A,), (B,), ((A, 2.0, 3),))  # not an int
    assert not _rt.blas_ready((A,), (B,), ((A, 4),))  # not one bound per axis


def _foreign_wrapper(owner: np.ndarray) -> np.ndarray:
    """An ndarray over `owner`'s memory with no base and not owning its data, as a C extension
    makes with `PyArray_New` (NumPy's C API, slot 93)."""
    import ctypes
    core = getattr(np, "_core", None) or np.core
    capsule = core._multiarray_umath._ARRAY_API
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = ctypes.cast(get(capsule, None), ctypes.POINTER(ctypes.c_void_p))
    new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_ssize_t),
                            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                            ctypes.c_void_p)(table[93])
    dims = (ctypes.c_ssize_t * owner.ndim)(*owner.shape)
    flags = 0x0001 | 0x0100 | 0x0400  # C-contiguous, aligned, writeable
    return new(id(np.ndarray), owner.ndim, dims, 12, None, owner.ctypes.data, 0, flags, None)  # 12: float64


def test_blas_ready_checks_arrays_without_a_base_that_share_memory():
    owner = np.zeros((4, 4))
    a, b = _foreign_wrapper(owner), _foreign_wrapper(owner)
    assert a.base is None and not a.flags.owndata and np.shares_memory(a, b)
    assert not _rt.blas_ready((a,), (b,), ())
    assert _rt.blas_ready((a,), (np.zeros(3),), ())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("lower", [True, False])
def test_tri_dot_is_the_masked_product_and_reads_one_half(lower, trans, left, dtype):
    """`_rt.tri_dot`, BLAS's triangular product: the masked operand's product, whatever the
    other half of the triangle's matrix holds (here NaN: not read), on non-contiguous slices."""
    rng = np.random.default_rng(13)
    n, p = 5, 3
    mask = _rt.tri_mask(n) if lower else _rt.tri_mask(n).T
    a = rng.random((n + 1, n + 2)).astype(dtype)[1:, :n]
    a[~mask] = np.nan
    b = (rng.random((n, p)) if left else rng.random((p, n))).astype(dtype)
    m = np.where(mask, a, 0.0)
    m = m.T if trans else m
    want = m @ b if left else b @ m
    got = _rt.tri_dot(a, lower, trans, b, left)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-13)
    assert np.any(got != 0.0)


@pytest.mark.parametrize("case", ["mixed", "empty", "vector"])
def test_tri_dot_without_blas_masks(case):
    """Operands `?trmm` does not take (mixed dtypes, an empty matrix, a vector): NumPy's masked
    product, the same result as that product."""
    rng = np.random.default_rng(14)
    n = 0 if case == "empty" else 4
    a = rng.random((n, n))
    b = {"mixed": rng.random((n, 3)).astype(np.float32), "empty": rng.random((n, 3)), "vector": rng.random(n)}[case]
    want = np.where(_rt.tri_mask(n), a, 0.0) @ b
    got = _rt.tri_dot(a, True, False, b, True)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("boxes, want", [
    (["data[:n, :n_1 - 1]", "data[:n, 1:n_1]"], ["data[:n, :n_1]"]),  # correlation's two column ranges
    (["B[:m - 1, :n]", "B[1:m, :n]"], ["B[:m, :n]"]),
    (["A[2:n]", "A[:n - 2]"], ["A[:n]"]),
    (["A[:, :n]", "A[:, 1:]"], ["A[:, :]"]),
    (["A[1:n, :n - 1]", "B[1:n, :n - 1]"], None),  # two arrays
    (["A[1:n, :n - 1]", "A[:n - 1, 1:n]"], None),  # two axes differ
    (["A[i:n, :m]", "A[:n, :m]"], None),  # bounds not comparable
    (["A[-1:, :m]", "A[:, :m]"], None),  # a negative start counts from the end
    (["A[k, :m]", "A[k, 1:m]"], None),  # not all slices
])
def test_finite_checks_of_one_array_cover_both_boxes(boxes, want):
    from zymo.codegen.idioms import _covering
    assert _covering(boxes) == (want or boxes)


def two_column_ranges(C, A):
    """Correlation's shape: one nest reads `A` at columns `:n - 1` and `1:n`; the adjoint's guard
    checks both finite as one box."""
    m, n = A.shape
    for i in range(n - 1):
        for j in range(i + 1, n):
            C[i, j] = 0.0
            for k in range(m):
                C[i, j] += A[k, i] * A[k, j]
    return np.sum(C * C)


def test_a_covering_finite_check_that_fails_runs_the_loops():
    rng = np.random.default_rng(21)
    A = rng.standard_normal((6, 5))
    C = np.zeros((5, 5))
    ann = lambda A, C: (Duplicated(C, np.zeros_like(C)), Duplicated(A, np.zeros_like(A)))  # noqa: E731
    code = zymo.generated_code(Reverse, two_column_ranges, Active, *ann(A, C), numba="kernels")
    assert "np.isfinite(A[:n, :n_1]).all()" in code and "np.isfinite(A[:n, :n_1 - 1])" not in code
    for bad in (None, (2, 0), (3, 4)):  # an infinity in one box only: the loops' inf and nan
        a = A.copy()
        if bad is not None:
            a[bad] = np.inf
        outs = []
        for numba in ("kernels", False):
            c, aa = C.copy(), a.copy()
            args = ann(aa, c)
            with np.errstate(invalid="ignore", over="ignore"):
                zymo.autodiff(Reverse, two_column_ranges, Active, *args, numba=numba)
            outs.append((c, args[0].dval, args[1].dval))
        for u, v in zip(*outs):
            np.testing.assert_allclose(u, v, rtol=1e-12, equal_nan=True)
            assert np.array_equal(np.isnan(u), np.isnan(v)) and np.array_equal(np.isinf(u), np.isinf(v))
        if bad is not None:
            assert np.isinf(outs[0][0]).any() and np.isnan(outs[0][2]).any()
    check_grad(two_column_ranges, C.copy(), A.copy(), modes=("reverse",))


def _shifted_statement(x, a, n, lower, trans):
    """The statement `_rt.tri_dot_add` stands for (its docstring's table)."""
    f = a[1:n, :n - 1] if lower else a[:n - 1, 1:n]
    t, o = (x[:n - 1], x[1:n]) if lower == trans else (x[1:n], x[:n - 1])
    t += _rt.tri_dot(f, lower, trans, o, True)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [True, False])
@pytest.mark.parametrize("case", ["C", "F", "columns", "float32", "narrow_a", "one_row", "mixed"])
def test_tri_dot_add_is_the_shifted_statement(lower, trans, case, monkeypatch):
    """`_rt.tri_dot_add`: trmm's row update in place with BLAS's unit-diagonal `?trmm` (the
    diagonal and the other half of `a` not read: NaN there), the statement where BLAS cannot
    take it (a narrow `a`, one row, mixed dtypes): the same numbers to rounding."""
    if case == "narrow_a" and not lower:
        pytest.skip("the upper triangle's box `a[:n - 1, 1:n]` needs n columns (the guard checks them)")
    rng = np.random.default_rng(31)
    n, p = (1 if case == "one_row" else 6), 4
    a = rng.standard_normal((n, n - 1 if case == "narrow_a" else n))
    inside = np.tril(np.ones(a.shape, bool), -1) if lower else np.triu(np.ones(a.shape, bool), 1)
    a[~inside] = np.nan
    x = rng.standard_normal((n, p + 2))
    x = {"F": np.asfortranarray(x), "columns": x[:, 1:p + 1], "float32": x.astype(np.float32)}.get(case, x)
    if case == "float32":
        a = a.astype(np.float32)
    if case == "mixed":
        a = a.astype(np.float32)
    want, orig = x.copy(), x.copy()
    _shifted_statement(want, a, n, lower, trans)
    base = x.base if case == "columns" else None
    before = base.copy() if base is not None else None
    if case in ("C", "F", "columns", "float32"):  # BLAS in place: the statement's product never made
        from zymo.runtime import linalg
        monkeypatch.setattr(linalg, "tri_dot", None)
    _rt.tri_dot_add(x, a, n, lower, trans)
    if x.dtype == np.float32:
        np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_allclose(x, want, rtol=1e-13, atol=1e-14)
    assert not np.isnan(x).any()
    assert np.array_equal(x, orig) == (n == 1)  # rows updated (none of one row)
    if base is not None:  # the columns outside the view untouched
        assert np.array_equal(base[:, [0, -1]], before[:, [0, -1]])


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [True, False])
def test_tri_dot_add_leaves_the_row_it_does_not_write(lower, trans):
    """BLAS rewrites the row the statement leaves (`1.0 * x + 0.0`): put back, a -0.0 stays
    -0.0 (helper 63)."""
    a = np.arange(1.0, 17.0).reshape(4, 4)
    x = np.arange(1.0, 9.0).reshape(4, 2)
    k = 3 if lower == trans else 0
    x[k] = -0.0
    want = x.copy()
    _shifted_statement(want, a, 4, lower, trans)
    _rt.tri_dot_add(x, a, 4, lower, trans)
    assert np.array_equal(x.view(np.int64), want.view(np.int64)) and np.signbit(x[k]).all()


TRMM_UPPER = '''
def g(A, B, n, p):
    for i in range(n):
        for j in range(p):
            for k in range(i):
                B[i, j] += A[k, i] * B[k, j]
    return B
'''


def test_in_place_products_need_the_check_and_no_write_before():
    from zymo.codegen.idioms import _in_place_products
    stmt = "B[:n - 1, :p] += _rt.tri_dot(A[1:n, :n - 1], True, True, B[1:n, :p], True)"
    ok = f"if np.isfinite(B[1:n, :p]).all():\n    {stmt}\n"
    got = ast.unparse(ast.Module(_in_place_products(ast.parse(ok).body), []))
    assert "_rt.tri_dot_add(B[:n, :p], A, n, True, True)" in got and "np.isfinite(B[:n, :p])" in got
    for src in (stmt + "\n",  # no finite check around it
                f"if np.isfinite(C[1:n, :p]).all():\n    {stmt}\n",  # not the operand's
                f"if np.isfinite(B[1:n, :p]).all():\n    B[0, :p] = C[0, :p]\n    {stmt}\n",  # B written before
                f"if np.isfinite(B[1:n, :p]).all():\n    _tri_ops.fill(B[:3, :3], 0.0, _tri, True)\n    {stmt}\n",
                ok.replace("B[:n - 1, :p] +=", "B[1:n, :p] +="),  # rows not shifted the table's way
                ok.replace("B[1:n, :p], True)", "B[1:n, :q], True)"),  # other columns
                ok.replace("A[1:n, :n - 1]", "A[1:n, :n - 2]"),  # not the strict triangle's box
                *(f"if np.isfinite(B[1:n, :p]).all():\n    {w}\n    {stmt}\n" for w in (  # writes of B (helper 63)
                    "np.fill_diagonal(B, 0.0)", "np.add(B, 1.0, B)", "np.add.at(B, 0, 1.0)",
                    "V = B[:n, :p]\n    V += 1.0", "np.ravel(B)[0] = 1.0", "B = C",
                    "_tri_ops.move(D[:3, :3], B[:3, :3].T, _tri, True)"))):
        out = ast.unparse(ast.Module(_in_place_products(ast.parse(src).body), []))
        assert "tri_dot_add" not in out and out == ast.unparse(ast.parse(src)), src
    reads = f"if np.isfinite(B[1:n, :p]).all():\n    D[:3, :3] += B[1:n, :p] @ C.T\n    {stmt}\n"  # B only read
    assert "tri_dot_add" in ast.unparse(ast.Module(_in_place_products(ast.parse(reads).body), []))
