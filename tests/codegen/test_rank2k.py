"""`codegen/rank2k.py`: two masked adds into one triangle that together are a symmetric rank-2k
update become one `_rt.sym2_add` (BLAS's `?syr2k`), also past statements that touch neither the
target nor the operands and through a buffer filled as a scaled copy of an operand; and
`_rt.sym2_add` against the two statements it stands for (the triangle to rounding, every other
element bit for bit, nothing written where it falls back). End to end: symm's gradient and a
user's syr2k written as two updates, against the Python backend and central differences."""
from __future__ import annotations

import ast

import numpy as np
import pytest

import zymo
from zymo import Active, Const, Duplicated, Reverse
from zymo import runtime as _rt
from zymo.codegen.rank2k import rank2k_pairs

# symm's adjoint as `compiled_masks` leaves it (the buffer `_x` filled with `alpha * dC`, dB's
# guarded update between the two adds into dA's strict lower triangle)
FILL = "_x[:n_1, :n] = alpha * dC[:n_1, :n]\n"
MASK = "_tri_1 = _rt.tri_mask(n_1 - 1)\n"
ADD1 = "_tri_ops.add(dA[1:n_1, :n_1 - 1], _x[1:n_1, :n] @ B[:n_1 - 1, :n].T, _tri_1, True)\n"
GUARDED = ("if np.isfinite(A[:n_1, :n_1]).all():\n"
           "    dB[:n_1 - 1, :n] += _rt.tri_dot(A[1:n_1, :n_1 - 1], True, True, _x[1:n_1, :n], True)\n"
           "else:\n"
           "    for i in range(n_1):\n"
           "        for _r in range(i):\n"
           "            k = i - 1 - _r\n"
           "            for j in range(n):\n"
           "                t = A[i, k]\n"
           "                dB[k, j] += t * _x[i, j]\n")
ADD2 = "_tri_ops.add(dA[1:n_1, :n_1 - 1], alpha * (B[1:n_1, :n] @ dC[:n_1 - 1, :n].T), _tri_1, True)\n"
SYMM = FILL + MASK + ADD1 + GUARDED + ADD2
CALL = "if not _rt.sym2_add(dA, n_1, True, True, alpha, dC[:n_1, :n], B[:n_1, :n]):"


def _rewritten(src: str) -> str:
    return "\n".join(ast.unparse(s) for s in rank2k_pairs(ast.parse(src).body))


def test_symms_two_adds_are_one_syr2k_past_dbs_update():
    got = _rewritten(SYMM)
    assert got.count("_rt.sym2_add(") == 1 and CALL in got, got
    lines = got.splitlines()
    k = lines.index(CALL)
    assert lines[k + 1].strip() == ADD1.strip() and lines[k + 2].strip() == ADD2.strip()  # the fallback
    assert lines[k + 3].startswith("if np.isfinite(A[:n_1, :n_1]).all():")  # dB's update after it


UPPER = ("_m = _rt.tri_mask(n - 1)\n"
         "_tri_ops.add(C[:n - 1, 1:n], c * (_w[:n - 1, :k] @ Y[1:n, :k].T), _m.T, False)\n"
         "_tri_ops.add(C[:n - 1, 1:n], 2.0 * c * (Y[:n - 1, :k] @ X[1:n, :k].T), _m.T, False)\n")


@pytest.mark.parametrize("src, call", [
    # no buffer, nothing between, the operands as transposes
    ("_tri_ops.add(C[1:n, :n - 1], A[:k, 1:n].T @ B[:k, :n - 1], _rt.tri_mask(n - 1), True)\n"
     "_tri_ops.add(C[1:n, :n - 1], B[:k, 1:n].T @ A[:k, :n - 1], _rt.tri_mask(n - 1), True)\n",
     "_rt.sym2_add(C, n, True, True, 1.0, A[:k, :n].T, B[:k, :n].T)"),
    # the strict upper triangle; the buffer's coefficient and the adds' (factors in another order)
    ("_w[:n, :k] = 2.0 * X[:n, :k]\n" + UPPER, "_rt.sym2_add(C, n, False, True, c * 2.0, X[:n, :k], Y[:n, :k])"),
    ("_w[:, :k] = 2.0 * X[:, :k]\n" + UPPER, "_rt.sym2_add(C, n, False, True, c * 2.0, X[:n, :k], Y[:n, :k])"),
    # both operands of both products read the buffer (one the branch made): syrk's `x @ x.T` twice
    ("_w = np.empty((n, k))\n_w[:n, :k] = 2.0 * X[:n, :k]\n_m = _rt.tri_mask(n - 1)\n"
     "_tri_ops.add(C[1:n, :n - 1], _w[1:n, :k] @ _w[:n - 1, :k].T, _m, True)\n"
     "_tri_ops.add(C[1:n, :n - 1], _w[1:n, :k] @ _w[:n - 1, :k].T, _m, True)\n",
     "_rt.sym2_add(C, n, True, True, 2.0 * 2.0, X[:n, :k], X[:n, :k])"),
    # the diagonal included (the whole square's triangle), past an update of another array
    ("_m = _rt.tri_mask(n)\n_tri_ops.add(C[:n, :n], A[:n, :k] @ B[:n, :k].T, _m.T, False)\n"
     "D[:n, :k] += A[:n, :k]\n"
     "_tri_ops.add(C[:n, :n], B[:n, :k] @ A[:n, :k].T, _m.T, False)\n",
     "_rt.sym2_add(C, n, False, False, 1.0, A[:n, :k], B[:n, :k])"),
])
def test_other_rank2k_pairs(src, call):
    got = _rewritten(src)
    assert got.count("_rt.sym2_add(") == 1 and f"if not {call}:" in got, got


def test_a_coefficient_inside_a_product_is_not_taken_out():
    src = "_w[:n, :k] = 2.0 * X[:n, :k]\n" + UPPER.replace("2.0 * c * (Y[:n - 1, :k] @ X[1:n, :k].T)",
                                                          "c * (2.0 * Y[:n - 1, :k] @ X[1:n, :k].T)")
    assert "sym2_add" not in _rewritten(src)  # `(2.0 * Y) @ X.T`: no operand the pass reads


@pytest.mark.parametrize("between, why", [
    ("    dA[0, 0] += 1.0\n", "writes the target"),
    ("    s = dA[0, 0]\n", "reads the target"),
    ("    B[0, 0] = 2.0\n", "writes an operand of the second add"),
    ("    np.copyto(dC[:n_1, :n], 0.0)\n", "writes an operand (a call's first operand)"),
    ("    v[0, 0] = 2.0\n", "writes an operand through a view made before"),
    ("    f(B)\n", "a call of unknown effect on an operand"),
    ("    alpha = 2.0\n", "rebinds the coefficient of the second add"),
    ("    _tri_1 = _rt.tri_mask(n_1)\n", "rebinds the mask"),
    ("    for i in range(n_1):\n        dC[i, 0] = 0.0\n", "loops writing an operand"),
    ("    while c:\n        pass\n", "a statement the lowering does not write"),
])
def test_not_past_a_statement_touching_the_target_or_an_operand(between, why):
    src = "v = B[:2]\n" + FILL + MASK + ADD1 + "if c:\n" + between + ADD2
    assert "sym2_add" not in _rewritten(src), why
    ok = "v = B[:2]\n" + FILL + MASK + ADD1 + "if c:\n    dB[0, 0] = 2.0\n" + ADD2
    assert "sym2_add" in _rewritten(ok)


@pytest.mark.parametrize("fill, why", [
    ("_x[:n_1 - 1, :n] = alpha * dC[:n_1 - 1, :n]\n", "the fill misses a row the add reads"),
    ("_x[1:n_1, :n] = alpha * dC[1:n_1, :n]\n", "the add's rows, but not the whole square's (X[0])"),
    ("_x[:n_1, :m] = alpha * dC[:n_1, :m]\n", "other columns"),
    ("_x[:n_1, :n] = alpha * dC[1:n_1 + 1, :n]\n", "a shifted copy"),
    ("_x[:n_1, :n] = dC[:n_1, :n] + 1.0\n", "no scaled copy"),
    ("_x[:n_1, :n] = A[0, 0] * dC[:n_1, :n]\n", "a coefficient reading an array"),
    ("_x[:n_1, :n] = alpha * dC[:n_1, :n]\ndC[0, 0] = 0.0\n", "the copy's source written after the fill"),
    ("_x[:n_1, :n] = alpha * dC[:n_1, :n]\n_x[0, 0] = 0.0\n", "the buffer written after the fill"),
    ("_x[:n_1, :n] = alpha * dC[:n_1, :n]\nalpha = 3.0\n", "the fill's coefficient rebound"),
    ("_x[:n_1, :n] = alpha * dC[:n_1, :n]\nn_1 = n_1 - 1\n", "the rows rebound"),
    ("", "no fill"),
    ("_x = dC[1:, :]\n_x[:n_1, :n] = alpha * dC[:n_1, :n]\n", "the buffer a view of the copy's source"),
])
def test_not_through_a_buffer_that_is_no_scaled_copy_of_the_rows_read(fill, why):
    src = fill + MASK + ADD1 + GUARDED + ADD2
    got = _rewritten(src)
    if why == "the add's rows, but not the whole square's (X[0])":
        # the rows the adds read are filled: the substitution holds (the square's row 0 is
        # `dC[0]`, which the second add reads directly)
        assert CALL in got, got
        return
    assert "sym2_add" not in got, why


@pytest.mark.parametrize("second, why", [
    ("_tri_ops.add(dA[1:n_1, :n_1 - 1], beta * (B[1:n_1, :n] @ dC[:n_1 - 1, :n].T), _tri_1, True)\n",
     "another coefficient"),
    ("_tri_ops.add(dA[1:n_1, :n_1 - 1], alpha * (B[1:n_1, :n] @ B[:n_1 - 1, :n].T), _tri_1, True)\n",
     "not the transposed product"),
    ("_tri_ops.add(dA[1:n_1, :n_1 - 1], alpha * (dC[1:n_1, :n] @ B[:n_1 - 1, :n].T), _tri_1, True)\n",
     "the same product again"),
    ("_tri_ops.add(dA[1:n_1, :n_1 - 1], alpha * (B[1:n_1, :n] @ dC[:n_1 - 1, :n].T), _tri_1.T, False)\n",
     "another mask"),
    ("_tri_ops.scale(dA[1:n_1, :n_1 - 1], alpha, _tri_1, True)\n", "no add"),
])
def test_not_for_adds_that_are_no_rank2k_update(second, why):
    assert "sym2_add" not in _rewritten(FILL + MASK + ADD1 + GUARDED + second), why


def test_not_on_a_box_that_is_no_triangle_of_a_square():
    src = (FILL + "_tri_1 = _rt.tri_mask(n_1)\n" + ADD1 + ADD2)  # the mask's side: not the strict triangle's
    assert "sym2_add" not in _rewritten(src)
    src = FILL + MASK + ADD1.replace("dA[1:n_1, :n_1 - 1]", "dA[2:n_1, :n_1 - 1]") \
        + ADD2.replace("dA[1:n_1, :n_1 - 1]", "dA[2:n_1, :n_1 - 1]")
    assert "sym2_add" not in _rewritten(src)


# `_rt.sym2_add` against its two statements


def _two(t, n, lower, strict, alpha, x, y):
    """The two masked adds `sym2_add` stands for."""
    if strict:
        box = t[1:n, :n - 1] if lower else t[:n - 1, 1:n]
        m = _rt.tri_mask(n - 1)
        a, b = (slice(1, n), slice(0, n - 1)) if lower else (slice(0, n - 1), slice(1, n))
    else:
        box, m, a, b = t[:n, :n], _rt.tri_mask(n), slice(0, n), slice(0, n)
    m = m if lower else m.T
    np.add(box, alpha * (x[a] @ y[b].T), out=box, where=m)
    np.add(box, alpha * (y[a] @ x[b].T), out=box, where=m)


def _odd(rng, n, order="C"):
    t = rng.standard_normal((n, n))
    t[0, -1], t[-1, 0], t[1, 1], t[2, 2] = -0.0, np.nan, -0.0, np.nan  # the diagonal's too
    return np.asarray(t, order=order)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("alpha", [1.5, -0.25, 3])
def test_sym2_add_is_the_two_masked_adds(lower, strict, order, alpha):
    rng = np.random.default_rng(0)
    n, k = 7, 5
    x, y = rng.standard_normal((n, k + 2))[:, :k], rng.standard_normal((n, k))
    t = _odd(rng, n, order)
    want = t.copy(order="K")
    _two(want, n, lower, strict, alpha, x, y)
    assert _rt.sym2_add(t, n, lower, strict, alpha, x, y)
    inside = np.tri(n, k=-1 if strict else 0, dtype=bool)
    inside = inside if lower else inside.T
    np.testing.assert_allclose(t[inside], want[inside], rtol=1e-13, atol=1e-13)
    assert np.array_equal(t[~inside].view(np.int64), want[~inside].view(np.int64))  # the diagonal too


@pytest.mark.parametrize("case", ["alpha0", "alpha_inf", "alpha_nan", "n1", "n_negative", "n_float", "sub_square",
                                  "shapes", "float32_mix", "rows"])
def test_sym2_add_writes_nothing_where_blas_cannot_take_it(case):
    rng = np.random.default_rng(1)
    n, k = 6, 4
    x, y = rng.standard_normal((n, k)), rng.standard_normal((n, k))
    t = _odd(rng, n)
    alpha = {"alpha0": 0.0, "alpha_inf": np.inf, "alpha_nan": np.nan}.get(case, 1.5)
    size = {"n1": 1, "n_negative": -1, "n_float": 6.0, "rows": 5}.get(case, n)
    if case == "sub_square":  # `t[:n, :n]` of a larger matrix: not contiguous
        t = _odd(rng, n + 1)
    if case == "shapes":
        y = y[:, :3]
    if case == "float32_mix":
        x = x.astype(np.float32)
    want = t.copy()
    assert not _rt.sym2_add(t, size, True, True, alpha, x, y)
    assert np.array_equal(t.view(np.int64), want.view(np.int64))


# end to end


def symm(alpha, beta, C, A, B):
    m, n = C.shape
    for i in range(m):
        for j in range(n):
            temp2 = 0.0
            for k in range(i):
                C[k, j] += alpha * B[i, j] * A[i, k]
                temp2 += B[k, j] * A[i, k]
            C[i, j] = beta * C[i, j] + alpha * B[i, j] * A[i, i] + alpha * temp2
    return np.sum(C * C)


def symm_scaled(alpha, beta, C, A, B):
    """symm with other scalars: `0.5 * alpha` where symm has `alpha`, a constant on `temp2`."""
    m, n = C.shape
    for i in range(m):
        for j in range(n):
            temp2 = 0.0
            for k in range(i):
                C[k, j] += 0.5 * alpha * B[i, j] * A[i, k]
                temp2 += B[k, j] * A[i, k]
            C[i, j] = beta * C[i, j] + alpha * B[i, j] * A[i, i] + 0.5 * alpha * temp2
    return np.sum(C * C)


def syr2k_two(alpha, C, A, B):
    """syr2k's strict lower triangle written as two updates (the diagonal apart)."""
    n, m = A.shape
    for i in range(n):
        for j in range(i):
            for k in range(m):
                C[i, j] += alpha * A[i, k] * B[j, k]
                C[i, j] += alpha * B[i, k] * A[j, k]
        for k in range(m):
            C[i, i] += 2.0 * alpha * A[i, k] * B[i, k]
    return np.sum(C * C)


def _symm_args(rng, n=9):
    return [1.5, 1.2, rng.random((n, n + 2)), rng.random((n, n)), rng.random((n, n + 2))]


def _syr2k_args(rng, n=9):
    return [0.7, rng.random((n, n)), rng.random((n, n + 3)), rng.random((n, n + 3))]


def _grad(f, args, wrt, numba):
    shadows = [np.zeros_like(a) if i in wrt else None for i, a in enumerate(args)]
    ann = [Duplicated(np.array(a), s) if s is not None else Const(a) for a, s in zip(args, shadows)]
    zymo.autodiff(Reverse, f, Active, *ann, numba=numba)
    return [s for s in shadows if s is not None]


def _code(f, args, wrt):
    ann = [Duplicated(np.array(a), np.zeros_like(a)) if i in wrt else Const(a) for i, a in enumerate(args)]
    return zymo.generated_code(Reverse, f, Active, *ann, numba="kernels")


@pytest.mark.parametrize("f, make, wrt", [(symm, _symm_args, (2, 3, 4)), (symm_scaled, _symm_args, (2, 3, 4)),
                                          (syr2k_two, _syr2k_args, (1, 2, 3))])
def test_gradients_through_sym2_add(f, make, wrt):
    rng = np.random.default_rng(7)
    args = make(rng)
    assert "_rt.sym2_add(" in _code(f, args, wrt)
    want, got = _grad(f, args, wrt, False), _grad(f, args, wrt, "kernels")
    for w, g in zip(want, got):
        assert np.any(w)
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=0.0)
    # central differences along random directions
    h = 1e-6
    for d_seed in range(2):
        d = [np.random.default_rng(100 + d_seed).standard_normal(np.shape(args[i])) for i in wrt]

        def at(s, d=d):
            moved = [np.array(a, dtype=float) if i in wrt else a for i, a in enumerate(args)]
            for i, di in zip(wrt, d):
                moved[i] = moved[i] + s * di
            return f(*moved)
        fd = (at(h) - at(-h)) / (2 * h)
        ad = sum(float(np.sum(g * di)) for g, di in zip(got, d))
        assert abs(fd - ad) <= 1e-6 * max(1.0, abs(ad)), (fd, ad)


# symm's forward: its masked operand read by two products, as two triangular products
# (`idioms._triangular_products`)

MASKED = "_tri = _rt.tri_mask(n - 1)\n_masked = np.where(_tri, A[1:n, :n - 1], 0.0)\n"


@pytest.mark.parametrize("reads, kept", [
    ("X[1:n, :m] += _masked @ B[:n - 1, :m]\nC[:n - 1, :m] += alpha * (_masked.T @ B[1:n, :m])\n", False),
    ("X[1:n, :m] += _masked @ B[:n - 1, :m]\nY[:m, 1:n] += B[:m, :n - 1] @ _masked.T\n", False),
    ("X[:n - 1, :m] += (_masked + _masked.T) @ B[:n - 1, :m]\n", True),  # a sum: merged products
    ("X[1:n, :m] += _masked @ B[:n - 1, :m]\ny = _masked\n", True),  # read besides the products
    ("X[1:n, :m] += _masked @ _masked\n", True),
    ("X[1:n, :m] += _masked @ B[:n - 1, :m]\nif c:\n    C[:n - 1, :m] += _masked.T @ B[1:n, :m]\n", True),
])
def test_a_masked_operand_read_only_by_products_takes_triangular_ones(reads, kept):
    from zymo.codegen.idioms import _triangular_products
    got = "\n".join(ast.unparse(s) for s in _triangular_products(ast.parse(MASKED + reads).body))
    assert ("_masked = np.where(" in got) == kept and ("_rt.tri_dot(" in got) != kept, got
    if not kept:
        assert "_masked" not in got and "_rt.tri_mask" not in got and got.count("_rt.tri_dot(A[1:n, :n - 1], True") == 2
