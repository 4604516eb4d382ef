"""Entry checks of compiled functions' indices (`codegen/index_checks.py`, `numba/margins.py`):
an index out of range raises IndexError in every backend, never a silently wrong number, and a
check that cannot prove its indices in range costs speed only, never a different result."""
from __future__ import annotations

import numba
import numpy as np
import pytest

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.codegen.index_checks import IndicesUnproven, Lin, _extreme, entry_checks
from zymo.codegen.numba.backend import compile_numba
from zymo.codegen.numba.rewrites import SourceFacts


def _compiled(src: str, arrays: set[str], exempt: frozenset[str] = frozenset()):
    return compile_numba(src, ["f"], "a test function", SourceFacts(arrays=frozenset(arrays)), exempt=exempt,
                         fallback=True)[0]


def _python(src: str):
    ns: dict = {"np": np, "_rt": zymo.runtime}
    exec(src, ns)
    return ns["f"]


SHIFTED = """
def f(a, b, n):
    for i in range(n):
        a[i] = b[i + 1] * 2.0
    return a
"""

REVERSED = """
def f(a, b, n):
    for _r in range(n):
        i = n - 1 - _r
        a[i] += b[i, n - 1 - i]
    return a
"""

JAMMED = """
def f(a, x, n):
    for i in range(0, n - 3, 4):
        i_j1 = i + 1
        i_j2 = i + 2
        i_j3 = i + 3
        a[i] += x[i]
        a[i_j1] += x[i_j1]
        a[i_j2] += x[i_j2]
        a[i_j3] += x[i_j3]
    for i in range(_rt.span(0, n) // 4 * 4, n):
        a[i] += x[i]
    return a
"""


@pytest.mark.parametrize("src, good, bad", [
    (SHIFTED, lambda: (np.zeros(5), np.arange(6.0), 5), lambda: (np.zeros(5), np.arange(5.0), 5)),
    (REVERSED, lambda: (np.zeros(4), np.ones((4, 4)), 4), lambda: (np.zeros(4), np.ones((3, 4)), 4)),
    (JAMMED, lambda: (np.zeros(11), np.arange(11.0), 11), lambda: (np.zeros(11), np.arange(10.0), 11)),
])
def test_indices_in_range_run_fast_and_out_of_range_raise(src, good, bad):
    """In range: the fast version's result, its entry check passing (no false alarm for shifted,
    reversed and jammed loops). Out of range: IndexError, as the Python function raises, where
    the compiled loop would read past the array."""
    fast = _compiled(src, {"a", "b", "x"})
    assert "_rt.index_check(" in _checked_source(src, {"a", "b", "x"})
    np.testing.assert_array_equal(fast(*good()), _python(src)(*good()))
    np.testing.assert_array_equal(fast.__wrapped__(*good()), _python(src)(*good()))  # no fallback needed
    with pytest.raises(IndexError):
        _python(src)(*bad())
    with pytest.raises(IndicesUnproven):
        fast.__wrapped__(*bad())  # the check fails before the loop runs
    with pytest.raises(IndexError):
        fast(*bad())


def _checked_source(src: str, arrays: set[str]) -> str:
    return entry_checks(src, arrays)[0]


def test_a_check_that_fails_where_nothing_is_out_of_range_gives_the_same_result():
    """The conditions are sufficient, not necessary: here the guarded write never goes past `y`,
    but the check cannot see the guard; the `boundscheck=True` version runs and agrees."""
    src = """
def f(x, y, n):
    for i in range(n):
        if i < y.shape[0]:
            y[i] += x[i]
    return y
"""
    fast = _compiled(src, {"x", "y"})
    args = lambda: (np.arange(6.0), np.ones(3), 6)  # noqa: E731
    with pytest.raises(IndicesUnproven):
        fast.__wrapped__(*args())
    np.testing.assert_array_equal(fast(*args()), _python(src)(*args()))


def test_indices_without_an_interval_are_checked_where_they_are_read():
    """An index read from an array, or a counter, has no interval: it is checked where it is
    read (`_rt.in_range`), the others at entry, and an index out of range raises IndexError."""
    src = """
def f(x, idx, out):
    k = 0
    for i in range(idx.shape[0]):
        out[i] = x[idx[i]] + x[_rt.nonneg(k)]
        k += 1
    return out
"""
    checked, unproven, guarded = entry_checks(src, {"x", "idx", "out"})
    assert not unproven and guarded == {"f"}
    assert "x[_rt.in_range(idx[i], x.shape, 0)]" in checked
    assert "x[_rt.nonneg(_rt.in_range(k, x.shape, 0))]" in checked
    f = _compiled(src, {"x", "idx", "out"})
    np.testing.assert_array_equal(f(np.arange(4.0), np.array([3, -4]), np.zeros(2)), [3.0, 1.0])
    for bad in ([4, 0], [0, -5]):
        with pytest.raises(IndexError):
            f(np.arange(4.0), np.array(bad), np.zeros(2))
    with pytest.raises(IndexError):  # the counter passes x's end
        f(np.arange(2.0), np.array([0, 1, 1]), np.zeros(3))


def test_in_range_checks_ints_tuples_index_arrays_and_masks():
    """`_rt.in_range(i, shape, axis)`: an int in [-n, n), a tuple's ints each on its axis, every
    element of an index array, a mask's shape; a slice passes through (Numba's fancy indexing
    checks nothing itself)."""
    from zymo.codegen.numba import twins

    @numba.njit
    def take(x, i):
        return x[twins.in_range(i, x.shape, 0)]

    @numba.njit
    def take_row(x, i):
        return x[0, twins.in_range(i, x.shape, 1)]

    x = np.arange(5.0)
    m = np.arange(12.0).reshape(3, 4)
    assert take(x, -5) == 0.0 and take(x, 4) == 4.0 and take(x, np.int32(2)) == 2.0
    np.testing.assert_array_equal(take(x, np.array([[4, -5], [0, 1]])), x[np.array([[4, -5], [0, 1]])])
    np.testing.assert_array_equal(take(x, np.array([True, False, True, False, True])), [0.0, 2.0, 4.0])
    assert take(m, (2, -4)) == m[2, -4] and take_row(m, -1) == 3.0
    np.testing.assert_array_equal(take(x, slice(1, 9)), x[1:9])
    for bad in (5, -6, np.array([1, 5]), np.array([[0], [-6]]), np.array([True, False])):
        with pytest.raises(IndexError):
            take(x, bad)
    for bad, axis in (((3, 0), 0), ((0, 4), 1), ((-4, 0), 0)):
        with pytest.raises(IndexError, match=f"on axis {axis} "):
            take(m, bad)
    with pytest.raises(IndexError, match="on axis 1 "):
        take_row(m, 4)
    np.testing.assert_array_equal(take(np.arange(4.0), np.arange(4)[::2]), [0.0, 2.0])  # a strided view


def test_what_the_analysis_cannot_read_is_bounds_checked():
    """Subscripts of expressions (`a[i][j]`, `a.T[i, 0]`), nested scopes and one-line functions
    make the function unproven (Numba's `boundscheck=True`); an 'int' that is an array the facts
    did not know fails the entry check (the bounds-checked version runs); an entry margin that
    overflows fails it too (helper 64's cases)."""
    for src in ("def f(a, n, m):\n    s = 0.0\n    for i in range(n):\n        for j in range(m):\n"
                "            s += a[i][j]\n    return s\n",
                "def f(a, n):\n    s = 0.0\n    for i in range(n):\n        s += a.T[i, 0]\n    return s\n",
                "def f(a, n):\n    g = lambda i: a[i]\n    s = 0.0\n    for i in range(n):\n        s += g(i + n)\n"
                "    return s\n",
                "def f(a): return a[0]\n"):
        assert entry_checks(src, {"a"})[1] == {"f"}, src
    f = _compiled("def f(a, n, m):\n    s = 0.0\n    for i in range(n):\n        for j in range(m):\n"
                  "            s += a[i][j]\n    return s\n", {"a"})
    with pytest.raises(IndexError):
        f(np.ones((3, 3)), 3, 5)
    src = "def f(a, n, k):\n    s = 0.0\n    for i in range(n):\n        if i >= k:\n            break\n" \
          "        s += a[4 * i]\n    return s\n"
    f = _compiled(src, {"a"})
    with pytest.raises(IndicesUnproven):
        f.__wrapped__(np.arange(8.0), 2 ** 62 + 1, 3)  # 4 * (n - 1) wraps round to 0
    with pytest.raises(IndexError):
        f(np.arange(8.0), 2 ** 62 + 1, 3)
    assert f(np.arange(8.0), 2, 3) == 4.0
    view = "def f(a, idx, n):\n    v = a[idx]\n    s = 0.0\n    for j in range(n):\n        s += v[j]\n    return s\n"
    f = _compiled(view, {"a"})  # `idx` an index array the facts do not call one: no entry margin
    with pytest.raises(IndicesUnproven):
        f.__wrapped__(np.arange(6.0), np.array([1, 0, 5]), 3)
    assert f(np.arange(6.0), np.array([1, 0, 5]), 3) == 6.0
    with pytest.raises(IndexError):
        f(np.arange(6.0), np.array([1, 0, 5]), 4)


def test_products_of_names_are_checked_where_they_are_read():
    """`(r * (r - 1)) // 2 + c`, a packed triangle's index: its interval through products of
    intervals is sound but far off (an entry check would fail where nothing is out of range:
    gmm_objective ran its bounds-checked version at every call), so it is checked where read."""
    src = """
def f(t, out, d):
    for r in range(d):
        for c in range(r):
            out[r, c] = t[(r * (r - 1)) // 2 + c]
    return out
"""
    checked, unproven, _ = entry_checks(src, {"t", "out"})
    assert not unproven and "_rt.in_range((r * (r - 1)) // 2 + c, t.shape, 0)" in checked
    f = _compiled(src, {"t", "out"})
    got = f(np.arange(6.0), np.zeros((4, 4)), 4)
    np.testing.assert_array_equal(got, _python(src)(np.arange(6.0), np.zeros((4, 4)), 4))
    with pytest.raises(IndexError):
        f(np.arange(5.0), np.zeros((4, 4)), 4)


def test_blocks_of_an_inner_loop_span_its_range():
    """A parallel twin's block loop (`codegen/blocks.py`) covers `range(lo, hi)` over all blocks:
    its entry check is the serial loop's, with no false alarm."""
    src = """
def f(y, A, n, m, _threads):
    _n_blk = _rt.span(1, n)
    for _blk in numba.prange(_threads):
        for j in range(m):
            for i in range(1 + _blk * _n_blk // _threads, 1 + (_blk + 1) * _n_blk // _threads):
                y[i] += A[j, i - 1]
    return y
"""
    checked, unproven, guarded = entry_checks(src, {"y", "A"})
    assert not unproven and guarded == {"f"} and "in_range" not in checked
    fast = _compiled(src, {"y", "A"})
    A = np.arange(12.0).reshape(2, 6)
    for threads in (1, 2, 3):
        got = fast.__wrapped__(np.zeros(7), A, 7, 2, threads)  # i up to 6: y[6], A[:, 5]
        np.testing.assert_array_equal(got[1:], A.sum(axis=0))
        with pytest.raises(IndicesUnproven):
            fast.__wrapped__(np.zeros(6), A, 7, 2, threads)
        with pytest.raises(IndexError):
            fast(np.zeros(6), A, 7, 2, threads)


def test_caches_the_program_sizes_itself_are_not_checked():
    src = """
def f(a, _cache, k, n):
    for i in range(n):
        _cache[k] = a[i]
        k += 1
    return k
"""
    assert "_cache[_rt.in_range(k, _cache.shape, 0)]" in entry_checks(src, {"a", "_cache"})[0]
    checked, unproven, guarded = entry_checks(src, {"a", "_cache"}, exempt={"_cache"})
    assert not unproven and guarded == {"f"} and "a0_0 - i0" in checked and "in_range" not in checked


def test_views_and_allocations_have_their_extents():
    src = """
def f(A, n, m):
    t = np.empty((n, 3), np.float64)
    for i in range(n):
        row = A[i]
        for j in range(m):
            row[j] = 0.0
        t[i, 2] = 1.0
    return t
"""
    checked, unproven, guarded = entry_checks(src, {"A"})
    assert not unproven and guarded == {"f"}
    line = next(ln for ln in checked.splitlines() if "index_check" in ln)
    assert "a0_0 - i0" in line and "a0_1 - i1" in line  # A.shape[0] >= n, A.shape[1] >= m (row is A[i])


def test_the_algebra_folds_what_it_can():
    n, m = Lin.atom("n"), Lin.atom("A.shape[0]", nonneg=True)
    assert str(n - Lin(const=1) - (n - Lin(const=3))) == "2"
    assert str(_extreme("max", [n - Lin(const=1), n - Lin(const=4), n])) == "n"
    assert str(_extreme("max", [n, m])) == "max(A.shape[0], n)"
    assert (m + Lin(const=0)).never_negative() and not (m - Lin(const=1)).never_negative()
    assert str(m.scaled(2) - n) == "2 * A.shape[0] - n"


def test_index_check_computes_with_pythons_floor_division():
    """`//` rounds down as Python's does (LLVM's sdiv truncates), and a divisor below 1 gives 0."""
    from zymo.codegen.numba import twins

    @numba.njit
    def margin(spec_ok, a, i, k):
        twins.index_check("i0 // i1 + a0_0", (a,), (i, k))
        return spec_ok

    a = np.zeros(3)
    assert margin(1, a, -6, 2) == 1          # -6 // 2 + 3 = 0
    with pytest.raises(IndicesUnproven):
        margin(1, a, -7, 2)                  # -7 // 2 + 3 = -1 (truncated: -3 + 3 = 0, no raise)
    assert margin(1, a, -7, 0) == 1          # divisor 0: 0 + 3 >= 0


def _loop_loss(A, x, y):
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            y[i] += A[i, j] * x[j]
    return np.sum(y * y)


@pytest.mark.parametrize("backend", ["kernels", True])
def test_gradients_raise_index_error_for_arguments_of_the_wrong_shape(backend):
    """A user's argument too short for the loop: the Python program raises IndexError; the
    compiled derivative did read past `x` (garbage gradients, a corrupted heap) and now
    raises IndexError too. With arguments of the right shape it agrees with Python's."""
    rng = np.random.default_rng(3)
    A, x = rng.standard_normal((6, 6)), rng.standard_normal(6)
    grads = {}
    for b in (False, backend):
        dA, dx, dy = np.zeros_like(A), np.zeros_like(x), np.zeros(6)
        zymo.autodiff(Reverse, _loop_loss, Active, Duplicated(A.copy(), dA), Duplicated(x.copy(), dx),
                      Duplicated(np.zeros(6), dy), numba=b)
        grads[b] = (dA, dx)
    for got, want in zip(grads[backend], grads[False]):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    assert np.abs(grads[False][1]).max() > 0.1
    short = x[:4].copy()
    with pytest.raises(IndexError):
        zymo.autodiff(Reverse, _loop_loss, Active, Duplicated(A.copy(), np.zeros_like(A)),
                      Duplicated(short, np.zeros_like(short)), Duplicated(np.zeros(6), np.zeros(6)), numba=False)
    with pytest.raises(IndexError):
        zymo.autodiff(Reverse, _loop_loss, Active, Duplicated(A.copy(), np.zeros_like(A)),
                      Duplicated(short, np.zeros_like(short)), Duplicated(np.zeros(6), np.zeros(6)), numba=backend)
