"""What reverse mode caches, and the report that says so (seed 001's question)."""
import numpy as np
import pytest
from helpers import numpy_allocations, zymo_grad

import zymo
from zymo import Active, Const, Duplicated, Reverse
from zymo.testing import check_grad


def sumsq_inplace(x):
    for i in range(len(x)):
        x[i] = x[i] ** 2
    return x.sum()


def mul(R, A, B):
    np.matmul(A, B, out=R)


def product(out, inp):
    out[0] = inp[0] * inp[1]


def reads_then_overwrites(x):
    y = np.sin(x)
    x[0] = 3.0
    return np.sum(y * x)


def _entries(report: str) -> int:
    return sum(1 for line in report.splitlines() if line.strip()[:2].rstrip(".").isdigit())


def test_loop_that_overwrites_its_input_caches_one_value_per_iteration():
    x = np.linspace(0.5, 2.0, 6)
    rep = zymo.cache_report(Reverse, sumsq_inplace, Active, Duplicated(x.copy(), np.zeros(6)))
    assert _entries(rep) == 1
    assert "x[i] = x[i] ** 2" in rep and "for i in range(len(x))" in rep
    src = zymo.generated_code(Reverse, sumsq_inplace, Active, Duplicated(x.copy(), np.zeros(6)))
    # exactly one cache: n floats, allocated once at the loop's entry with its trip count (or
    # the buffer the last call kept, when it is big enough: `_rt.reuse_buffer`)
    assert src.count("_rt.reuse_tape(") == 1 and "_cache_x = _rt.reuse_tape(_cache_x, _trips, np.float64)" in src
    assert "np.empty(" not in src
    assert "_trips = _rt.span(0, n)" in src
    assert src.count("+= 1") == 1 and src.count("-= 1") == 1
    assert "allocated once at the loop's entry" in rep
    assert "this call: 6 entries, 48 bytes" in rep  # n floats, measured on a copy of the call
    (g,) = zymo.gradient(Reverse, sumsq_inplace, x.copy())
    np.testing.assert_allclose(g, 2 * x)


def test_matmul_out_caches_nothing_and_copies_nothing():
    A, B, R = np.ones((3, 2)), np.ones((2, 4)), np.zeros((3, 4))
    args = (Duplicated(R, np.zeros_like(R)), Duplicated(A, np.zeros_like(A)), Duplicated(B, np.zeros_like(B)))
    assert "nothing is cached" in zymo.cache_report(Reverse, mul, Const, *args)
    src = zymo.generated_code(Reverse, mul, Const, *args)
    assert ".copy()" not in src and "_saved" not in src


def test_disjoint_scalar_product_caches_nothing():
    rep = zymo.cache_report(Reverse, product, Const, Duplicated(np.zeros(1), np.ones(1)),
                            Duplicated(np.array([2.0, 3.0]), np.zeros(2)))
    assert "nothing is cached" in rep


def test_aliased_call_copies_and_stays_correct():
    """product(x, x): the store into out may overwrite inp, so the report must say so."""
    x = np.array([2.0, 3.0])
    dx = np.array([1.0, 0.0])
    zymo.autodiff(Reverse, product, Const, Duplicated(x, dx), Duplicated(x, dx))
    # out[0] = x0 * x1 overwrote x0; d(out0)/d(x0, x1) = (x1, x0) with the original x0 = 2
    np.testing.assert_allclose(dx, [3.0, 2.0])


def test_overwritten_array_is_copied_and_the_report_names_the_store():
    x = np.array([0.3, 0.8, 1.2])
    rep = zymo.cache_report(Reverse, reads_then_overwrites, Active, Duplicated(x.copy(), np.zeros(3)))
    assert "a copy of array `x`" in rep and "x[0] = 3.0" in rep and "y = np.sin(x)" in rep
    (g,) = zymo.gradient(Reverse, reads_then_overwrites, x.copy())
    expected = np.cos(x) * np.array([3.0, x[1], x[2]]) + np.array([0.0, np.sin(x[1]), np.sin(x[2])])
    np.testing.assert_allclose(g, expected)


def sine_of_inner_then_overwrite(u):
    v = np.sin(u[1:-1])
    u[2] = 0.5
    return np.sum(v * u[1:-1])


def test_a_copied_slice_is_named_after_its_array():
    """`u[1:-1]` is read by sin's adjoint and overwritten by `u[2] = 0.5`: the report and the
    generated code name the copied slice after `u` (its own variable), not a generic name."""
    u = np.linspace(0.1, 1.0, 6)
    rep = zymo.cache_report(Reverse, sine_of_inner_then_overwrite, Active, Duplicated(u.copy(), np.zeros(6)))
    assert _entries(rep) == 1
    assert "a copy of array `u` (f64[:])" in rep and "`v = np.sin(u[1:-1])`" in rep and "`u[2] = 0.5`" in rep
    src = zymo.generated_code(Reverse, sine_of_inner_then_overwrite, Active, Duplicated(u.copy(), np.zeros(6)))
    assert "u_2 = u[1:(-1)]" in src and "_saved_u = u_2.copy()" in src
    check_grad(sine_of_inner_then_overwrite, u)


def halve_until_small(x):
    s = 0.0
    while x > 1e-3:
        s = s + np.sin(x) * x
        x = x * 0.9
    return s


def nested(A):
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            t = np.sin(A[i, j])
            A[i, j] = t * t
            s = s + A[i, j] * t
    return s


def test_growing_caches_in_while_and_nested_loops():
    """More entries than a growing cache's first guess: every entry must come back in order."""
    ((d,),) = zymo.autodiff(Reverse, halve_until_small, Active, Active(2.0))
    eps = 1e-6
    fd = (halve_until_small(2.0 + eps) - halve_until_small(2.0 - eps)) / (2 * eps)
    assert abs(d - fd) < 1e-6 * max(1.0, abs(fd))
    A = np.linspace(0.1, 1.0, 30).reshape(5, 6)
    (g,) = zymo.gradient(Reverse, nested, A.copy())
    for idx in [(0, 0), (2, 3), (4, 5)]:
        e = np.zeros_like(A)
        e[idx] = eps
        fd = (nested(A + e) - nested(A - e)) / (2 * eps)
        assert abs(g[idx] - fd) < 1e-6
    rep = zymo.cache_report(Reverse, nested, Active, Duplicated(A.copy(), np.zeros_like(A)))
    assert "grows geometrically" not in rep  # both trip counts are known before the loops
    assert "allocated once at the entry of the 2 loops around it, with their trip counts" in rep
    assert "this call: 30 entries" in rep
    (g,) = zymo.gradient(Reverse, triangular, A.copy())
    (g_fwd,) = zymo.gradient(zymo.Forward, triangular, A.copy())
    np.testing.assert_allclose(g, g_fwd, rtol=1e-12)
    assert np.abs(g).max() > 0.1
    rep = zymo.cache_report(Reverse, triangular, Active, Duplicated(A.copy(), np.zeros_like(A)))
    assert "grows geometrically" in rep


def triangular(A):
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(i + 1):
            t = np.sin(A[i, j])
            A[i, j] = t * t
            s = s + A[i, j] * t
    return s


def _fill(mat_vec, vec):
    for i in range(len(vec)):
        mat = mat_vec[i]
        a = vec[i]
        for j in range(3):
            mat[j, 0] = a * a
        mat[0, 0] = vec[i]


def vec_of_matrices(mat_vec, vec):
    _fill(mat_vec, vec)
    return mat_vec[2][0, 0] + mat_vec[0][1, 0] * mat_vec[1][2, 0]


def _fd_vec(mats_factory, vec, eps=1e-6):
    g = np.zeros_like(vec)
    for i in range(len(vec)):
        e = np.zeros_like(vec)
        e[i] = eps
        g[i] = (vec_of_matrices(mats_factory(), vec + e) - vec_of_matrices(mats_factory(), vec - e)) / (2 * eps)
    return g


def test_seed001_vector_of_matrices_disjoint_and_aliased():
    vec = np.array([0.5, 1.5, -2.0])
    disjoint = lambda: [np.zeros((3, 1)) for _ in range(3)]  # noqa: E731

    def aliased():
        m = np.zeros((3, 1))
        return [m, m, np.zeros((3, 1))]

    for factory in (disjoint, aliased):
        mats = factory()
        dmats = zymo.make_zero(mats)
        args = (Duplicated(mats, dmats), Duplicated(vec, np.zeros(3)))
        assert "nothing is cached" in zymo.cache_report(Reverse, vec_of_matrices, Active, *args)
        dvec = np.zeros(3)
        zymo.autodiff(Reverse, vec_of_matrices, Active, Duplicated(mats, dmats), Duplicated(vec, dvec))
        np.testing.assert_allclose(dvec, _fd_vec(factory, vec), rtol=1e-7, atol=1e-9)
        assert all(not d.any() for d in dmats)  # every overwritten location's shadow is zeroed


def scale_into(out, x):
    y = np.sin(x)
    out[...] = 2.0 * y
    return np.sum(y * x)


def test_report_says_when_an_alias_forces_a_copy():
    x = np.linspace(0.1, 0.9, 4)
    disjoint = zymo.cache_report(Reverse, scale_into, Active, Duplicated(np.zeros(4), np.zeros(4)),
                                 Duplicated(x.copy(), np.zeros(4)))
    assert "nothing is cached" in disjoint
    buf = x.copy()
    dbuf = np.zeros(4)
    aliased = zymo.cache_report(Reverse, scale_into, Active, Duplicated(buf, dbuf), Duplicated(buf, dbuf))
    assert "through an alias" in aliased and "`out`, `x` share memory" in aliased
    # and the aliased derivative is right: out and x are the same array
    zymo.autodiff(Reverse, scale_into, Active, Duplicated(buf, dbuf), Duplicated(buf, dbuf))

    def primal(v):
        b = v.copy()
        return scale_into(b, b)

    eps = 1e-6
    for i in range(4):
        e = np.zeros(4)
        e[i] = eps
        assert abs(dbuf[i] - (primal(x + e) - primal(x - e)) / (2 * eps)) < 1e-6


def test_reverse_of_disjoint_product_allocates_no_array():
    out, dout, inp, dinp = np.zeros(1), np.ones(1), np.array([2.0, 3.0]), np.zeros(2)
    call = lambda: zymo.autodiff(Reverse, product, Const, Duplicated(out, dout), Duplicated(inp, dinp))  # noqa
    call()
    dout[0] = 1.0
    assert numpy_allocations(call)[0] == 0


def seed001(x):
    res = 0.0
    for i in range(len(x)):
        res += x[i] * x[i]
        x[i] = 0.0
    return res


def test_seed001_caches_the_overwritten_values_once():
    x = np.array([0.5, -1.5, 2.0])
    rep = zymo.cache_report(Reverse, seed001, Active, Duplicated(x.copy(), np.zeros(3)))
    assert _entries(rep) == 1 and "res += x[i] * x[i]" in rep
    (g,) = zymo.gradient(Reverse, seed001, x.copy())
    np.testing.assert_allclose(g, 2 * x)


def packed_triangle(L, x, out):
    """Index arithmetic on loop indices and loads of unmodified memory, in nested loops."""
    d = x.shape[0]
    s = 0.0
    for r in range(d):
        t = x[r]
        for c in range(r):
            idx = c * (2 * d - c - 1) // 2 + (r - c - 1)
            t += L[idx] * (x[c] - out[0])
        s += t * t
    return s


def test_cheap_arithmetic_on_unmodified_loads_is_recomputed_not_cached():
    rng = np.random.default_rng(8)
    d = 5
    L, x, out = rng.random(d * (d - 1) // 2), rng.random(d), np.array([0.3])
    dL, dx = np.zeros_like(L), np.zeros_like(x)
    args = (Duplicated(L, dL), Duplicated(x, dx), Const(out))
    rep = zymo.cache_report(Reverse, packed_triangle, Active, *args)
    assert "idx" not in rep and "x[c]" not in rep  # only the running sums t are kept
    zymo.autodiff(Reverse, packed_triangle, Active, *args)
    for arr, grad in ((L, dL), (x, dx)):
        for k in range(arr.size):
            e = np.zeros_like(arr)
            e[k] = 1e-6
            plus = packed_triangle(*[a + e if a is arr else a for a in (L, x, out)])
            minus = packed_triangle(*[a - e if a is arr else a for a in (L, x, out)])
            assert abs(grad[k] - (plus - minus) / 2e-6) < 1e-6
    assert np.abs(dL).max() > 0.1


def rk2_steps(traj, h):
    """Time stepping: every stage value is arithmetic on the state loaded at the step's start."""
    for i in range(traj.shape[0] - 1):
        x, y = traj[i, 0], traj[i, 1]
        kx, ky = y - x, x * y
        xm, ym = x + 0.5 * h * kx, y + 0.5 * h * ky
        traj[i + 1, 0] = x + h / 3.0 * (ym - xm)
        traj[i + 1, 1] = y + h / 3.0 * xm * ym
    return traj[-1, 0] * traj[-1, 1]


def squared_steps(x):
    """Only the difference is needed by the adjoint sweep, not the loads it is made of."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        t = x[i + 1] - x[i]
        s += t * t
        x[i] = 0.5 * x[i]
    return s


def _rk2_args():
    traj = np.zeros((7, 2))
    traj[0] = (0.3, 0.8)
    return traj


def test_stage_values_are_recomputed_from_the_restored_state():
    traj = _rk2_args()
    args = (Duplicated(traj.copy(), np.zeros_like(traj)), Const(0.1))
    rep = zymo.cache_report(Reverse, rk2_steps, Active, *args)
    # row i is loaded and only rows i + 1, i + 2, ... are written later: the adjoint sweep
    # loads row i again (`Overwrites.first_element_writer`), and kx, ky, xm, ym and h / 3.0
    # are recomputed from it (truediv counts as cheap arithmetic)
    assert _entries(rep) == 0 and "nothing is cached" in rep
    src = zymo.generated_code(Reverse, rk2_steps, Active, *args)
    assert src.count("np.empty(") == 0 and src.count("= traj[i, 0]") == 2
    check_grad(rk2_steps, _rk2_args(), 0.1, const=(1,))


def test_a_value_whose_operands_are_not_restored_stays_cached():
    x = np.array([0.4, 1.3, -0.2, 0.9, 2.0])
    rep = zymo.cache_report(Reverse, squared_steps, Active, Duplicated(x.copy(), np.zeros(5)))
    assert _entries(rep) == 1 and "t = x[i + 1] - x[i]" in rep  # one difference, not two loads
    check_grad(squared_steps, x)


def test_recomputed_stage_values_under_numba_match_python():
    pytest.importorskip("numba")
    py = zymo_grad(rk2_steps, [_rk2_args(), 0.1], const=(1,))
    nb = zymo_grad(rk2_steps, [_rk2_args(), 0.1], const=(1,), numba=True)
    np.testing.assert_allclose(nb[0], py[0], rtol=1e-12)
    assert np.abs(py[0]).max() > 0.1


def scaled_rows(X, y):
    """An array quotient in a loop, from a row nothing overwrites: recomputed, not copied."""
    s = 0.0
    for i in range(X.shape[0]):
        q = X[i] / y
        s += np.sum(q * q)
    return s


def test_array_quotient_of_unmodified_memory_is_recomputed():
    rng = np.random.default_rng(3)
    X, y = rng.random((4, 3)), rng.random(3) + 0.5
    args = (Duplicated(X.copy(), np.zeros_like(X)), Duplicated(y.copy(), np.zeros_like(y)))
    assert "nothing is cached" in zymo.cache_report(Reverse, scaled_rows, Active, *args)
    out = check_grad(scaled_rows, X, y)
    assert np.abs(out.reverse[1]).max() > 0.1


def _checkpointed_steps(x, n):
    s = 0.0
    for _t in zymo.checkpointed(range(n), snapshots=2):
        x[1:] = x[1:] * 0.9 + 0.1 * np.sin(x[:-1])
        s += np.sum(x * x)
    return s


def test_report_of_a_checkpointed_loop():
    """The caches of a checkpointed loop are recorded again from its snapshots, not kept by
    the forward sweep: the report says so (it raised AttributeError on their empty entry)."""
    x = np.linspace(0.1, 1.0, 5)
    text = zymo.cache_report(Reverse, _checkpointed_steps, Active, Duplicated(x, np.zeros_like(x)), zymo.Const(4))
    assert text.count("none kept (a checkpointed loop records it again from its snapshots)") == 2, text
    assert "a copy of array `x`" in text
