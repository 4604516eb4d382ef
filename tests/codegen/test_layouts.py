"""`codegen/layouts.py`: a snapshot read only by products that run faster column-major is made
so; any other read keeps it as it was. End to end, trmm's gradient under "kernels" (its
snapshot of `B` read by the adjoint's `_saved_B[1:n] @ dB[:n - 1].T`) against the Python
backend and central differences."""
from __future__ import annotations

import ast

import numpy as np
import pytest

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.codegen.layouts import product_layouts
from zymo.testing import check_grad

HEAD = "def f(A, B, dB, dA, n):\n    S = B.copy()\n"


def _laid_out(body: str) -> bool:
    tree = ast.parse(HEAD + body)
    changed = product_layouts(tree)
    assert changed == ("S = _rt.product_copy(B)" in ast.unparse(tree))
    return changed


@pytest.mark.parametrize("body, column_major", [
    ("    dA[1:n] += S[1:n] @ dB[:n - 1].T\n", True),  # the left operand
    ("    dA += dB @ S.T\n", True),  # the transposed right operand
    ("    if _rt.blas_ready((dA,), (S,), ((S, n, n),)) and np.isfinite(S).all():\n"
     "        dA += S @ dB.T\n    else:\n        for i in range(n):\n            dA[i, 0] += S[i, 1]\n", True),
    ("    dA += dB @ S\n", False),  # a right operand not transposed: slower column-major
    ("    dA += S.T @ dB\n", False),
    ("    dA += S @ dB.T\n    x = S * 2.0\n", False),  # an elementwise read
    ("    dA += S @ dB.T\n    g(S)\n", False),  # a call of unknown kind
    ("    dA += S @ dB.T\n    S = A.copy()\n", False),  # assigned again
    ("    dA += S @ dB.T\n    for i in range(n):\n        g(S)\n", False),  # whole, in a loop
    ("    x = S[0, 0]\n", False),  # no product
    # reads whose values depend on the layout, or writes (helper 63)
    ("    dA += S @ dB.T\n    for i in range(n):\n        S[i].reshape(-1)[0] = 1.0\n", False),
    ("    dA += S @ dB.T\n    for i in range(n):\n        np.copyto(S[i], dB[i])\n", False),
    ("    dA += S @ dB.T\n    x = S[:, :].ravel(order='K')\n", False),
    ("    dA += S @ dB.T\n    ok = np.isfinite(dB, out=S)\n", False),
    ("    dA += S @ dB.T\n    ok = _rt.blas_ready((dA,), (g(S),), ())\n", False),
    ("    dA += S @ dB.T\n    for i in range(n):\n        x = S[i, :n].sum()\n", False),
])
def test_only_products_that_gain_choose_the_layout(body, column_major):
    assert _laid_out(body) == column_major


def trmm(alpha, A, B):
    m, n = B.shape
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]
    return np.sum(B * B)


def test_trmm_gradient_with_a_column_major_snapshot():
    rng = np.random.default_rng(3)
    A, B = rng.random((6, 6)), rng.random((6, 4))
    ann = lambda: (1.5, Duplicated(A.copy(), np.zeros_like(A)), Duplicated(B.copy(), np.zeros_like(B)))  # noqa: E731
    code = zymo.generated_code(Reverse, trmm, Active, *ann(), numba="kernels")
    assert "_rt.product_copy(B)" in code and "_saved_B[1:n, :n_1] @ dB[:n - 1, :n_1].T" in code
    got, want = ann(), ann()
    zymo.autodiff(Reverse, trmm, Active, *got, numba="kernels")
    zymo.autodiff(Reverse, trmm, Active, *want, numba=False)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g.dval, w.dval, rtol=1e-13)
        np.testing.assert_allclose(g.val, w.val, rtol=1e-13)
    assert np.all(got[1].dval[np.tril_indices(6, -1)] != 0.0) and np.all(got[2].dval != 0.0)
    check_grad(trmm, 1.5, A.copy(), B.copy(), modes=("reverse",))


def test_product_copy_is_column_major_for_small_matrices_only():
    from zymo import runtime as _rt
    for shape, column in (((60, 62), True), ((100, 91), False), ((5,), False)):
        y = np.random.default_rng(1).random(shape)
        c = _rt.product_copy(y)
        assert np.array_equal(c, y) and not np.shares_memory(c, y)
        assert (c.flags.f_contiguous and not c.flags.c_contiguous) == column


@pytest.mark.parametrize("case, copied", [
    ("C", True), ("F", False), ("strided_rows", True), ("columns", False), ("float32", True), ("mixed", False),
    ("ints", False), ("large", False),
])
def test_dot_nt_is_the_product(case, copied, monkeypatch):
    """`_rt.dot_nt(x, z)`: `x @ z.T`, with `z.T` copied row-major first for small row-major float
    matrices; the same products (to rounding) in every case."""
    from zymo import runtime as _rt
    rng = np.random.default_rng(4)
    m, k, n = (100, 90, 95) if case == "large" else (7, 5, 6)
    x, z = rng.standard_normal((m, k + 3)), rng.standard_normal((n, k + 3))
    if case == "strided_rows":
        x, z = x[::2, :k], z[::2, :k]
    elif case == "columns":
        x, z = x[:, ::2], z[:, ::2]
    elif case == "F":
        x, z = np.asfortranarray(x), np.asfortranarray(z)
    elif case == "float32":
        x, z = x.astype(np.float32), z.astype(np.float32)
    elif case == "mixed":
        z = z.astype(np.float32)
    elif case == "ints":
        x, z = (x * 10).astype(np.int64), (z * 10).astype(np.int64)
    want = x @ z.T
    seen = []
    real = np.ascontiguousarray
    monkeypatch.setattr(np, "ascontiguousarray", lambda a: seen.append(a.shape) or real(a))
    got = _rt.dot_nt(x, z)
    assert bool(seen) == copied
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5 if got.dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("body, written", [
    ("    dA += dC @ B.T\n", True),
    ("    dA[:n, :m] += alpha * (dC[:n, :k] @ B[:m, :k].T)\n", True),
    ("    dB += A.T @ dC\n", False),  # the left operand transposed: a fast product already
    ("    dB += A @ dC\n", False),
    ("    dA += (2.0 * dC) @ B.T\n", False),  # not a plain operand
    ("    for i in range(n):\n        dA += dC @ B.T\n", False),  # in a loop: compiled as a kernel
])
def test_products_of_transposed_right_operands(body, written):
    from zymo.codegen.layouts import nt_products
    tree = ast.parse("def f(A, B, dA, dB, dC, n, m, k, alpha):\n" + body)
    assert nt_products(tree) == written
    assert ("_rt.dot_nt(" in ast.unparse(tree)) == written and (".T)" not in ast.unparse(tree) or not written)
