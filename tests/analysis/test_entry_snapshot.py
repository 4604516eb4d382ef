"""Loads that read the values an array had at a loop nest's entry (`Overwrites.entry_loop`,
`TapePlanner._entry_loop`).

trmm's `B[i, j] += A[k, i] * B[k, j]` for `k > i` reads rows a later iteration updates, so
the load cannot be read again in place (`first_element_writer`), but no store has reached them
yet when it runs: every value it loads is the one the element had at the nest's entry. The
adjoint sweep then loads from one copy of `B` taken there (n**2 numbers) instead of a cache
entry per run (n**3 / 2). The proof is `_disjoint` with time reversed; where a store can reach
the element first (rows below `i`, already updated; a store through a view or `out=`; an index
that is not an affine form), the load keeps its cache.

Every program is checked in both modes against central differences and the other mode
(`zymo.testing.check_grad`), and its reverse gradient under Numba and the kernels backend
against the Python backend's, with the generated code inspected.
"""
import numpy as np
import pytest
from helpers import assert_tree_close, zymo_grad

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.testing import check_grad


def trmm(alpha, A, B):
    """Rows below `i` not yet updated (`k > i`): loads from the entry copy."""
    m, n = B.shape
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]
    return np.sum(B * B)


def trmm_down(A, B):
    """Rows processed from the last: `k < i` not yet updated when row `i` is."""
    m, n = B.shape
    for i in range(m - 1, -1, -1):
        for j in range(n):
            for k in range(i):
                B[i, j] += A[i, k] * B[k, j]
    return np.sum(B * B)


def all_rows(A, B):
    """Every row `k`: those below `i` already updated, `i`'s own being updated; the cache
    is kept."""
    m, n = B.shape
    for i in range(m):
        for j in range(n):
            for k in range(m):
                B[i, j] += A[k, i] * B[k, j]
    return np.sum(B * B)


def same_iteration(A, B):
    """Row `i + 1` written before row `k >= i + 1` is read in the same iteration."""
    m, n = B.shape
    for i in range(m - 1):
        for j in range(n):
            B[i + 1, j] = B[i + 1, j] * 0.5
            for k in range(i + 1, m):
                B[i, j] += A[k, i] * B[k, j]
    return np.sum(B * B)


def through_view(A, B):
    """A store through a row view: not proved, the cache is kept."""
    m, n = B.shape
    for i in range(m):
        row = B[i]
        for j in range(n):
            for k in range(i + 1, m):
                row[j] += A[k, i] * B[k, j]
    return np.sum(B * B)


def every_element_once(A, B):
    """Each run loads another element: a cache entry per run, not a copy."""
    m, n = B.shape
    s = 0.0
    for i in range(m):
        for j in range(n):
            s += A[i, j] * B[i, j]
        B[i, 0] = s
    return s + np.sum(B * B)


rng = np.random.default_rng(11)
COPIED = [
    (trmm, lambda: [1.5, rng.random((5, 5)) / 5, rng.random((5, 6))], (0,)),
    (trmm_down, lambda: [rng.random((5, 5)) / 5, rng.random((5, 4))], ()),
]
KEPT = [
    (all_rows, lambda: [rng.random((5, 5)) / 5, rng.random((5, 4))], ()),
    (same_iteration, lambda: [rng.random((5, 5)) / 5, rng.random((5, 4))], ()),
    (through_view, lambda: [rng.random((5, 5)) / 5, rng.random((5, 4))], ()),
    (every_element_once, lambda: [rng.random((4, 3)), rng.random((4, 3))], ()),
]


def _ann(args, const):
    return [zymo.Const(a) if k in const else Duplicated(a, np.zeros_like(a)) for k, a in enumerate(args)]


def _code(f, args, const, numba=False):
    return zymo.generated_code(Reverse, f, Active, *_ann(args, const), numba=numba)


@pytest.mark.parametrize("f,make,const", COPIED, ids=lambda c: getattr(c, "__name__", ""))
def test_loads_from_entry_copy(f, make, const):
    src = _code(f, make(), const)
    assert "_saved_B = B.copy()" in src and "_saved_B[" in src, src
    assert "_cache" not in src, src
    report = zymo.cache_report(Reverse, f, Active, *_ann(make(), const))
    text = str(report)
    assert "a copy of array `B`" in text and "taken before" in text and "`for i in range(" in text, text
    assert "1 snapshot" in text, text


@pytest.mark.parametrize("f,make,const", KEPT, ids=lambda c: getattr(c, "__name__", ""))
def test_cache_kept(f, make, const):
    src = _code(f, make(), const)
    assert "_cache" in src and "_saved_B[" not in src, src


@pytest.mark.parametrize("f,make,const", COPIED + KEPT, ids=lambda c: getattr(c, "__name__", ""))
def test_gradients(f, make, const):
    args = make()
    check_grad(f, *args, const=const)
    cots = [None if k in const else np.zeros_like(a) for k, a in enumerate(args)]

    def grad(numba):
        fresh = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
        return zymo_grad(f, fresh, cots, const=const, numba=numba)

    g_py = grad(False)
    assert np.any(np.abs(g_py[-1]) > 1e-3)
    for numba in (True, "kernels"):
        assert_tree_close(grad(numba), g_py, rtol=1e-12, atol=1e-14)


def test_trmm_kernels_code_reads_copy():
    """The kernels backend passes the copy to the adjoint's kernels (the loops of its matrix
    products and their fallback), which swap their nests so that they walk rows of the copy (the
    copy is memory of its own for the loop rewrites); the products read the copy too."""
    args = COPIED[0][1]()
    src = _code(trmm, args, (0,), numba="kernels")
    starts = [k for k in range(len(src)) if src.startswith("def _kernel_", k)]
    adjoints = [src[k:src.index("return", k)] for k in starts if "_saved_B" in src[k:src.index(")", k)]]
    assert len(adjoints) == 2, src
    for adjoint in adjoints:
        inner = adjoint[adjoint.index("for _r_1"):]
        assert "_saved_B[i_2, i_1]" in inner, src  # the row walk (i_1) is the inner loop
    program = src[src.index("# the program"):]
    assert "_saved_B[1:n, :n_1] @ " in program, src
