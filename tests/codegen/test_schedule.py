"""Loop nests scheduled unit by unit (`codegen/schedule.py`) and lowered by `codegen/idioms.py`:
scalar expansion, own-element maps, diagonal elements, and units run in another order than
written where the dependences demand it (symm). Each rewritten program is run against the
loops it replaces; the refused nests stay loops; gradients end to end against central
differences and the Python backend."""
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
from zymo.codegen.schedule import scheduled
from zymo.testing import check_grad

# the forward and adjoint nests reverse mode writes for a gemm with a scalar accumulator
GEMM_ACC = '''
def g(alpha, beta, C, A, B, n, m, p):
    for i in range(n):
        for j in range(m):
            acc = 0.0
            for k in range(p):
                a = A[i, k]
                b = B[k, j]
                acc = acc + a * b
            C[i, j] = beta * C[i, j] + alpha * acc
    return C
'''

GEMM_ACC_ADJOINT = '''
def g(alpha, beta, A, B, dC, dA, dB, n, m, p):
    for _r_2 in range(n):
        i = n - 1 - _r_2
        for _r_1 in range(m):
            j = m - 1 - _r_1
            dt = dC[i, j]
            dC[i, j] = 0.0
            dacc = alpha * dt
            dC[i, j] += beta * dt
            dacc_next = dacc
            for _r in range(p):
                k = p - 1 - _r
                a = A[i, k]
                b = B[k, j]
                d = dacc_next
                da = d * b
                dB[k, j] += a * d
                dA[i, k] += da
                dacc_next = d
    return dA
'''

SYMM = '''
def g(alpha, beta, C, A, B, n_1, n):
    for i in range(n_1):
        for i_1 in range(n):
            temp2 = 0.0
            for i_2 in range(i):
                t_7 = alpha * B[i, i_1]
                A_3 = A[i, i_2]
                C[i_2, i_1] = C[i_2, i_1] + t_7 * A_3
                B_2 = B[i_2, i_1]
                A_2 = A[i, i_2]
                temp2 = temp2 + B_2 * A_2
            t_4 = alpha * B[i, i_1]
            A_1 = A[i, i]
            C[i, i_1] = beta * C[i, i_1] + t_4 * A_1 + alpha * temp2
    return C
'''

SYMM_ADJOINT = '''
def g(alpha, beta, A, B, dC, dA, dB, n_1, n):
    for _r_2 in range(n_1):
        i = n_1 - 1 - _r_2
        for _r_1 in range(n):
            i_1 = n - 1 - _r_1
            t_4 = alpha * B[i, i_1]
            A_1 = A[i, i]
            dt_1 = dC[i, i_1]
            dC[i, i_1] = 0.0
            dtemp2 = alpha * dt_1
            dt_6 = dt_1 * A_1
            dA[i, i] += t_4 * dt_1
            dB[i, i_1] += alpha * dt_6
            dC[i, i_1] += beta * dt_1
            dtemp2_next = dtemp2
            for _r in range(i):
                i_2 = i - 1 - _r
                t_7 = alpha * B[i, i_1]
                A_3 = A[i, i_2]
                B_2 = B[i_2, i_1]
                A_2 = A[i, i_2]
                dt_7 = dtemp2_next
                dB_2 = dt_7 * A_2
                dA[i, i_2] += B_2 * dt_7
                dB[i_2, i_1] += dB_2
                dt_9 = dC[i_2, i_1]
                dt_11 = dt_9 * A_3
                dA[i, i_2] += t_7 * dt_9
                dB[i, i_1] += alpha * dt_11
                dtemp2_next = dt_7
    return dA, dB, dC
'''

ND = {"A": 2, "B": 2, "C": 2, "D": 2, "E": 2, "dA": 2, "dB": 2, "dC": 2, "x": 1, "y": 1}
NUMBERS = frozenset({"alpha", "beta", "n", "m", "p", "n_1", "i", "j", "k", "i_1", "i_2"})


def _run(src: str, *args):
    ns = {"np": np, "math": math, "_rt": _rt, "_tri_ops": _tri_ops}
    exec(src, ns)
    return ns["g"](*args)


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _same_as_loops(src: str, args, rtol=1e-12):
    """`src` rewritten, run against the loops on copies of `args`; the rewritten source."""
    out = blas_nests(src, ND, NUMBERS)
    want = _run(src, *_copies(args))
    got = _run(out, *_copies(args))
    for a, b in zip(want if isinstance(want, tuple) else [want], got if isinstance(got, tuple) else [got]):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-13)
    return out


def _statements(out: str) -> list[str]:
    """The rewritten branch's statements, in order."""
    fn = ast.parse(out).body[0]
    guarded = next(s for s in fn.body if isinstance(s, ast.If))  # type: ignore[attr-defined]
    return [ast.unparse(s) for s in guarded.body]


def test_scalar_accumulator_becomes_an_array_and_products():
    rng = np.random.default_rng(0)
    n, m, p = 5, 4, 3
    out = _same_as_loops(GEMM_ACC, [1.5, 0.5, rng.random((n, m)), rng.random((n, p)), rng.random((p, m)), n, m, p])
    body = _statements(out)
    assert body[0].startswith("_x_acc = np.empty((_rt.span(0, n), _rt.span(0, m)), np.float64)")
    assert body[1:] == ["_x_acc[:n, :m] = 0.0", "_x_acc[:n, :m] += A[:n, :p] @ B[:p, :m]",
                        "C[:n, :m] = beta * C[:n, :m] + alpha * _x_acc[:n, :m]"]
    assert "C.dtype == np.float64" in out  # the expanded scalars hold float64: so must the arrays


def test_adjoint_of_the_accumulator_reads_the_shadow_before_the_round_trip_scales_it():
    rng = np.random.default_rng(1)
    n, m, p = 5, 4, 3
    args = [1.5, 0.5, rng.random((n, p)), rng.random((p, m)), rng.random((n, m)), rng.random((n, p)),
            rng.random((p, m)), n, m, p]
    body = _statements(_same_as_loops(GEMM_ACC_ADJOINT, args))
    # the carried copy `dacc_next = d` is dropped; `_x = alpha * dC` runs before `dC *= beta`
    assert body[1:] == ["_x_dacc_next[:n, :m] = alpha * dC[:n, :m]", "dC[:n, :m] *= beta",
                        "dB[:p, :m] += A[:n, :p].T @ _x_dacc_next[:n, :m]",
                        "dA[:n, :p] += _x_dacc_next[:n, :m] @ B[:p, :m].T"]


def test_symm_units_run_in_the_order_their_dependences_need():
    rng = np.random.default_rng(2)
    n1, n = 6, 4
    out = _same_as_loops(SYMM, [1.5, 1.2, rng.random((n1, n)), rng.random((n1, n1)), rng.random((n1, n)), n1, n])
    body = _statements(out)
    # temp2's products first, then the map reading C[i, j] (before any row is added into),
    # then the rows of C below the diagonal added into: the reverse of the order written
    at = [next(k for k, s in enumerate(body) if s.startswith(p))
          for p in ("_x_temp2[:n_1, :n] = 0.0", "_x_temp2[1:n_1, :n] +=", "C[:n_1, :n] = beta * C[:n_1, :n]",
                    "C[:n_1 - 1, :n] +=")]
    assert at == sorted(at)
    assert "A[:n_1, :n_1].diagonal()[:, None]" in out  # the diagonal factor A[i, i]


def test_symm_adjoint_with_a_diagonal_target_and_reordered_units():
    rng = np.random.default_rng(3)
    n1, n = 6, 4
    args = [1.5, 1.2, rng.random((n1, n1)), rng.random((n1, n)), rng.random((n1, n)), rng.random((n1, n1)),
            rng.random((n1, n)), n1, n]
    out = _same_as_loops(SYMM_ADJOINT, args)
    body = _statements(out)
    assert any(s.startswith("_rt.diagonal_view(dA[:n_1, :n_1])[...] += alpha * np.einsum('ab,ab->a'")
               for s in body)
    assert body[-1] == "dC[:n_1, :n] *= beta"  # the round trip runs after every unit reading dC


def test_schedule_orders_and_drops_the_carried_copy():
    nest = ast.parse(GEMM_ACC_ADJOINT).body[0].body[0]  # type: ignore[attr-defined]
    taken: set[str] = set()

    def fresh(base: str) -> str:
        taken.add(base)
        return base
    plan = scheduled(nest, fresh)
    assert plan is not None and plan.arrays == {"_x_dacc_next": ("n", "m")}
    last = [ast.unparse(p.body[-1]) for p in plan.pieces]
    assert last == ["_x_dacc_next[i, j] = dacc", "dC[i, j] += beta * dt", "dB[k, j] += a * d", "dA[i, k] += da"]
    assert all("= d\n" not in ast.unparse(ast.Module(p.body, [])) + "\n" for p in plan.pieces)


@pytest.mark.parametrize("src", [
    # `s` carried from one iteration to the next beside the accumulator: no schedule
    '''
def g(A, B, C, x, n, m, p):
    s = 0.0
    for i in range(n):
        for j in range(m):
            acc = 0.0
            for k in range(p):
                acc = acc + A[i, k] * B[k, j]
            C[i, j] = acc
            s = s + acc
            x[i] = s
    return C
''',
    # the scalar is an index: an int there, not expanded (a float64 element would not index)
    '''
def g(A, B, C, x, n, m, p):
    for i in range(n):
        for j in range(m):
            q = j // 1
            for k in range(p):
                C[i, j] += A[i, k] * B[k, j]
                x[q] += A[i, k]
    return C
''',
    # the accumulator read before it is assigned in its iteration (carried over j)
    '''
def g(A, B, C, n, m, p):
    for i in range(n):
        acc = 0.0
        for j in range(m):
            for k in range(p):
                acc = acc + A[i, k] * B[k, j]
            C[i, j] = acc
    return C
''',
])
def test_refused_nests_stay_loops(src):
    assert blas_nests(src, ND, NUMBERS) == src


def test_a_cycle_of_dependences_is_refused():
    # unit 1 reads row i + 1 of C (not an index form: any order), unit 2 writes row i
    src = '''
def g(A, B, C, n, m, p):
    for i in range(n):
        for j in range(m):
            acc = 0.0
            for k in range(p):
                acc = acc + A[i, k] * B[k, j]
            C[i, j] = acc
            B[i, j] = acc
    return C
'''
    nest = ast.parse(src).body[0].body[0]  # type: ignore[attr-defined]
    assert scheduled(nest, lambda b: b) is None  # B read by the product and written: a cycle


def test_float32_arrays_run_the_loops():
    rng = np.random.default_rng(4)
    n, m, p = 5, 4, 3
    args = [1.5, 0.5, rng.random((n, m)).astype(np.float32), rng.random((n, p)).astype(np.float32),
            rng.random((p, m)).astype(np.float32), n, m, p]
    out = blas_nests(GEMM_ACC, ND, NUMBERS)
    want = _run(GEMM_ACC, *_copies(args))
    got = _run(out, *_copies(args))
    assert got.dtype == np.float32 and np.array_equal(got, want)  # the loops ran: bit for bit


def gemm_acc(alpha, beta, C, A, B):
    n, m = C.shape
    p = A.shape[1]
    for i in range(n):
        for j in range(m):
            acc = 0.0
            for k in range(p):
                acc += A[i, k] * B[k, j]
            C[i, j] = beta * C[i, j] + alpha * acc
    return np.sum(C * C)


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


@pytest.mark.parametrize("f, shapes, products", [
    (gemm_acc, [(5, 4), (5, 3), (3, 4)], 3),  # forward one, adjoint two
    (symm, [(6, 4), (6, 6), (6, 4)], 6),  # forward two over a triangle, adjoint four
])
def test_gradients_match_python_and_differences(f, shapes, products):
    rng = np.random.default_rng(5)
    args = [1.3, 0.7, *(rng.random(s) for s in shapes)]
    check_grad(f, *args, modes=("reverse",))
    runs = {}
    for numba in ("kernels", False):
        copies = _copies(args)
        shadows = [np.zeros_like(a) for a in copies[2:]]
        zymo.autodiff(Reverse, f, Active, *copies[:2], *(Duplicated(a, s) for a, s in zip(copies[2:], shadows)),
                      numba=numba)
        runs[numba] = shadows
    for a, b in zip(runs["kernels"], runs[False]):
        assert np.any(b != 0.0)
        np.testing.assert_allclose(a, b, rtol=1e-12)
    code = zymo.generated_code(Reverse, f, Active, *args[:2], *(Duplicated(a, np.zeros_like(a)) for a in args[2:]),
                               numba="kernels")
    assert sum(code.count(p) for p in (" @ ", "_rt.dot_nt(", "_rt.tri_dot(", "_rt.sym_add(")) == products


# -- what the review found (helper 59): each runs as the loops do ---------------------------------

def test_a_round_trip_reads_the_temporaries_assigned_inside_it():
    src = '''
def g(alpha, beta, A, B, C, D, E, n, m, p):
    for i in range(n):
        for j in range(m):
            acc = 0.0
            for k in range(p):
                acc = acc + A[i, k] * B[k, j]
            C[i, j] = beta * C[i, j] + alpha * acc
            t = D[i, j]
            D[i, j] = 0.0
            u = beta * t
            E[i, j] = u * A[i, j]
            D[i, j] += u
    return C, D, E
'''
    rng = np.random.default_rng(8)
    n, m, p = 3, 4, 2
    args = [1.5, 0.5, rng.random((n, 4)) + 1, rng.random((p, m)), rng.random((n, m)), rng.random((n, m)),
            rng.random((n, m)), n, m, p]
    out = _same_as_loops(src, args)
    assert "D[:n, :m] *= beta" in out


def test_an_output_index_no_factor_carries_is_broadcast():
    src = '''
def g(A, B, C, D, n, m, p):
    for i in range(n):
        for j in range(m):
            for k in range(p):
                C[i, j] += A[i, k] * B[k, j]
                D[i, j] += A[i, k] * B[i, k]
    return C, D
'''
    rng = np.random.default_rng(9)
    n, m, p = 3, 4, 5
    out = _same_as_loops(src, [rng.random((n, p)), rng.random((6, 6)), rng.random((n, m)), rng.random((n, m)),
                               n, m, p])
    assert "np.einsum('ac,ac->a', A[:n, :p], B[:n, :p])[:, None]" in out


def test_a_factor_without_the_summed_index_stays_in_the_loop():
    # einsum would take x[j] out of the sum: inf * (sum) where the loops add inf - inf = nan
    src = '''
def g(A, B, E, x, y, n, p):
    for i in range(n):
        for j in range(n):
            y[j] -= A[j, i] * x[j]
            for k in range(p):
                E[j, i] += A[i, k] * B[k, j]
    return E, y
'''
    A = np.array([[1.0, -2.0, 0.5], [1.0, -3.0, 1.0], [0.5, 0.5, 0.5]])
    args = [A, np.ones((2, 3)), np.zeros((3, 3)), np.array([1.0, np.inf, 1.0]), np.zeros(3), 3, 2]
    out = blas_nests(src, ND, NUMBERS)
    assert "np.einsum" not in out
    with np.errstate(invalid="ignore"):
        want, got = _run(src, *_copies(args)), _run(out, *_copies(args))
    assert np.isnan(want[1][1]) and np.array_equal(want[1], got[1], equal_nan=True)


# -- what the second review found (helper 60) ------------------------------------------------------

@pytest.mark.parametrize("src", [
    # a "round trip" whose `+=` reads the element it zeroed: not `C[o] = 2.0 * C[o]`
    '''
def g(A, B, C, D, n, m, p):
    for i in range(n):
        for j in range(m):
            C[i, j] = 0.0
            C[i, j] += 2.0 * C[i, j]
            for k in range(p):
                D[i, j] += A[i, k] * B[k, j]
    return C, D
''',
    '''
def g(A, B, C, D, n, m, p):
    for i in range(n):
        for j in range(m):
            acc = 0.0
            for k in range(p):
                acc += A[i, k] * B[k, j]
            C[i, j] = 0.0
            C[i, j] += acc + C[i, j]
    return C, D
''',
])
def test_a_round_trip_reading_its_zero_is_no_round_trip(src):
    rng = np.random.default_rng(10)
    n, m, p = 3, 4, 2
    _same_as_loops(src, [rng.random((n, p)), rng.random((p, m)), rng.random((n, m)), rng.random((n, m)), n, m, p])


def test_int_scalars_are_not_expanded():
    src = '''
def g(A, B, C, D, n, m, p):
    for i in range(n):
        t = 3 * i
        for j in range(m):
            acc = 0.0
            for k in range(p):
                acc += A[i, k] * B[k, j]
            C[i, j] = acc
        for j in range(m):
            D[i, j] = B[0, j] * (t ^ 1)
    return C, D
'''
    nest = ast.parse(src).body[0].body[0]  # type: ignore[attr-defined]
    plan = scheduled(nest, lambda b: b)
    assert plan is None or "_x_t" not in plan.arrays  # `t` an int: `^` on a float64 element would raise
    rng = np.random.default_rng(11)
    n, m, p = 3, 4, 2
    _same_as_loops(src, [rng.random((n, p)), rng.random((p, m)), rng.random((n, m)), rng.random((n, m)), n, m, p])


def test_merged_products_only_where_the_shared_factor_is_finite():
    src = '''
def g(A, B, C, D, n, p):
    for i in range(n):
        for j in range(n):
            for k in range(p):
                C[i, j] += A[i, k] * B[k, j]
            for k in range(p):
                C[i, j] += A[i, k] * D[k, j]
    return C
'''
    out = blas_nests(src, ND, NUMBERS)
    assert "A[:n, :p] @ (B[:p, :n] + D[:p, :n])" in out and "np.isfinite(A[:n, :p]).all()" in out
    A = np.array([[np.inf, 1.0], [1.0, 1.0]])
    args = [A, np.ones((2, 2)), np.zeros((2, 2)), np.array([[-2.0, -2.0], [1.0, 1.0]]), 2, 2]
    with np.errstate(invalid="ignore"):
        want, got = _run(src, *_copies(args)), _run(out, *_copies(args))
    assert np.isnan(want[0, 0]) and np.array_equal(want, got, equal_nan=True)  # inf - inf, as the loops add
    args[0] = np.array([[3.0, 1.0], [1.0, 1.0]])
    _same_as_loops(src, args)
