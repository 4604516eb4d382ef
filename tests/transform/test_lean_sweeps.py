"""Lean adjoint sweeps (issue 32, item 3): what the forward sweep no longer writes for the
adjoint sweep, and what the adjoint sweep no longer copies.

Each function is checked in both modes against central differences and against the other
mode (`zymo.testing.check_grad`), then its generated program is inspected.
"""
import numpy as np

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.testing import check_grad


def limiter(x, c, steps):
    """hdiff's flux limiter: the fresh `lim` is read only through views (`lim[1:]`,
    `lim[:-1]`), and the loop reads shadow views of `x` and `c`."""
    for _ in range(steps):
        flx = x[1:] - x[:-1]
        lim = np.where(flx * c[1:] > 0.0, 0.0, flx)
        x[1:-1] = x[1:-1] - c[1:-1] * (lim[1:] - lim[:-1])
    return np.sum(x * x)


def transposed(x, steps):
    """A fresh temporary read through a view rule (`transpose`) and a view of that view."""
    for _ in range(steps):
        t = x * x
        m = np.transpose(t)
        x[:, 1:] = x[:, 1:] + 0.5 * m[1:, :].T + 0.25 * np.sum(m[0])
    return np.sum(x * x)


def reshaped(x, steps):
    """A reshape that may be a view: the adjoint sweep asks whether it views `t`, so `t` is the
    forward sweep's object, never recomputed (a recomputed `t` is no view's base)."""
    for _ in range(steps):
        t = x * x
        m = t.reshape(2, 3)
        x[:] = x + 0.5 * m.ravel()
    return np.sum(x * x)


def kept(x, steps):
    """A view of the temporary is carried out of the iteration: its shadow is the forward
    sweep's, allocated there as before."""
    last = x[:2]
    for _ in range(steps):
        t = np.sin(x)
        last = t[:2]
        x[:] = x * 0.5 + t
    return np.sum(last * x[:2])


def _sweeps(f, *ann):
    src = zymo.generated_code(Reverse, f, Active, *ann)
    forward, adjoint = src.split("# adjoint sweep")
    return src, forward, adjoint


def _dup(a):
    return Duplicated(a, np.zeros_like(a))


def test_a_temporary_read_through_views_gets_its_shadow_in_the_adjoint_sweep():
    rng = np.random.default_rng(0)
    x, c = rng.random(8), rng.random(8) - 0.5
    check_grad(lambda x, c: limiter(x, c, 3), x, c)
    src, forward, adjoint = _sweeps(limiter, _dup(x.copy()), _dup(c.copy()), 3)
    # the forward sweep neither allocates nor caches `lim`'s shadow, nor writes shadow views
    assert "zeros" not in forward and "_cache_dlim" not in forward and " = dx[" not in forward
    assert " = dc[" not in forward and "dwhere" not in forward and "dlim" not in forward
    assert "dwhere = np.zeros((_shape_where_0,), np.float64)" in adjoint and "dlim = dwhere[1:]" in adjoint
    g = zymo.gradient(Reverse, limiter, x.copy(), c.copy(), 3)
    assert np.abs(g[0]).max() > 0.1 and np.abs(g[1]).max() > 0.01


def test_a_temporary_read_through_a_view_rule():
    x = np.random.default_rng(1).random((3, 4))
    check_grad(lambda x: transposed(x, 2), x)
    src, forward, adjoint = _sweeps(transposed, _dup(x.copy()), 2)
    assert "zeros" not in forward and "_cache_d" not in forward and "np.zeros_like(t_3)" in adjoint


def test_a_maybe_view_base_is_not_recomputed():
    x = np.random.default_rng(1).random(6)
    check_grad(lambda x: reshaped(x, 2), x)
    src, forward, adjoint = _sweeps(reshaped, _dup(x.copy()), 2)
    assert "_rt.is_view(reshape, t_1)" in adjoint and "t_1 = _cache_t.pop()" in adjoint


def test_a_view_carried_out_of_the_loop_keeps_the_forward_shadow():
    x = np.random.default_rng(2).random(5)
    check_grad(lambda x: kept(x, 3), x)
    src, forward, adjoint = _sweeps(kept, _dup(x.copy()), 3)
    assert "dsin = np.zeros_like(sin)" in forward and "dlast = dsin[:2]" in forward


def rows(X, out):
    """softmax's rows: the adjoint of `np.sum(out[i])` adds a number to the row's shadow."""
    for i in range(X.shape[0]):
        np.exp(X[i] - np.max(X[i]), out=out[i])
        out[i] /= np.sum(out[i])
    return np.sum(out * out)


def test_the_adjoint_of_a_whole_sum_reads_nothing_of_its_operand():
    rng = np.random.default_rng(3)
    X, out = rng.standard_normal((3, 5)), np.zeros((3, 5))
    X[1, 2] = X[1, 4] = X[1].max() + 1.0  # a tied max: its shared adjoint cancels (shift invariance)
    check_grad(rows, X, out, wrt=(0,))
    src, forward, adjoint = _sweeps(rows, _dup(X), _dup(out.copy()))
    # one copy of the row: after exp and before the division it holds the same contents (`_shared_snapshot`)
    assert forward.count("grow_stack") == 1
    assert "expand_reduced(dsum" not in adjoint and "+= dsum_1\n" in adjoint
    assert "-_rt.sum_product(" in adjoint and "-np.sum(dt" in adjoint  # the numbers' adjoints: one reduction each


def shift(a, b, steps):
    """Stores whose adjoints are read before they are zeroed: into a fresh temporary's
    shadow (`0.5 * ...`, the store overlapping its own operand) and accumulated into another
    array's shadow (`b[1:] = a[1:]`)."""
    for _ in range(steps):
        a[1:] = 0.5 * (a[:-1] + a[1:])
        b[1:] = a[1:]
        a[:-1] = a[:-1] * b[:-1]
    return np.sum(a * b)


def test_a_store_adjoint_is_read_before_it_is_zeroed_not_copied():
    rng = np.random.default_rng(4)
    a, b = rng.random(6), rng.random(6)
    check_grad(lambda a, b: shift(a, b, 2), a, b)
    src, forward, adjoint = _sweeps(shift, _dup(a.copy()), _dup(b.copy()), 2)
    assert " = 0.5 * da[1:]\n" in adjoint and "da[1:] = 0.0" in adjoint
    assert "np.copy(da[1:])" not in adjoint
    g = zymo.gradient(Reverse, shift, a.copy(), b.copy(), 2)
    assert np.abs(g[0]).max() > 0.1 and np.abs(g[1]).max() > 0.1


def overlapping_reader(a, steps):
    """The store's adjoint is read by two accumulations into views of the same shadow (one
    overlapping the zeroed part): the copy stays."""
    for _ in range(steps):
        a[1:] = a[1:] * a[:-1]
    return np.sum(a * a)


def test_a_reader_of_overlapping_memory_keeps_the_copy():
    a = np.random.default_rng(5).random(6) + 0.5
    check_grad(lambda a: overlapping_reader(a, 2), a)
    src, forward, adjoint = _sweeps(overlapping_reader, _dup(a.copy()), 2)
    assert "_g = np.copy(da[1:])" in adjoint


def conv(x, w, b, out):
    """conv2d's inner update `out[f] += w[f, c, k] * x[c, k:k + m]`: the number `w[f, c, k]`
    gets one reduction; `np.multiply(b[f], x[0], out=...)` broadcasts a row into a 2-d output."""
    m = x.shape[1] - w.shape[2] + 1
    for f in range(w.shape[0]):
        np.multiply(b[f], x[0, :m], out=out[f])
        for c in range(x.shape[0]):
            for k in range(w.shape[2]):
                out[f] += w[f, c, k] * x[c, k:k + m]
    return np.sum(out * out)


def test_a_number_operand_gets_one_reduction():
    rng = np.random.default_rng(6)
    x, w, b = rng.random((2, 7)), rng.standard_normal((3, 2, 3)), rng.standard_normal(3)
    out = np.zeros((3, 2, 5))  # each row of `out[f]` is `b[f] * x[0, :m]` broadcast
    check_grad(conv, x, w, b, out, wrt=(0, 1, 2))
    src, forward, adjoint = _sweeps(conv, _dup(x), _dup(w), _dup(b), _dup(out.copy()))
    # (`dout[i]` read in place: nothing writes it before both reads, `fuse._needless_copies`)
    assert "_rt.sum_product(dout[i], x_1)" in adjoint and "np.copy" not in adjoint
    assert adjoint.count("sum_product") == 2  # and b's: the shapes differ, np.sum(a * b) at run time
    g = zymo.gradient(Reverse, conv, x, w, b, out.copy())
    assert min(np.abs(g[k]).max() for k in range(3)) > 0.1


def gram(a, c):
    """correlation's `c[i, j] += a[k, i] * a[k, j]`: the store's adjoint takes `dc[i, j]`
    and zeroes it, the read gives it back (`fuse._restored_zeroing` leaves it as it is)."""
    for i in range(a.shape[1]):
        for j in range(a.shape[1]):
            for k in range(a.shape[0]):
                c[i, j] += a[k, i] * a[k, j]
    return np.sum(c * c)


def test_a_store_that_gives_its_adjoint_back_leaves_the_shadow_alone():
    a = np.random.default_rng(7).standard_normal((3, 2))
    check_grad(gram, a, np.zeros((2, 2)), wrt=(0,))
    src, forward, adjoint = _sweeps(gram, _dup(a), _dup(np.zeros((2, 2))))
    assert "dt_1 = dc[i, i_1]" in adjoint and "+= dt_1\n" not in adjoint and "dc[i, i_1] = 0.0" not in adjoint
