"""Arrays a loop's adjoint sweep reads: stacked caches, recomputed views, shadows allocated
where they are used (issue 4's array caches).

Each function is checked in both modes against central differences and against the
other mode (`zymo.testing.check_grad`); the generated program is then inspected for what it
caches, and (for the loops users write most: a softmax per row, a buffer reused by
`out=` every iteration) compiled with Numba and compared with the Python program.
"""
import math

import numpy as np
import pytest
from helpers import assert_tree_close, fd_grad
from loop_programs import appended_each_time

import zymo
from zymo import Active, Const, Duplicated, Reverse, ReverseSplitWithPrimal
from zymo.testing import check_grad


def row_softmax_loss(logits, labels):
    """mlp_loss's loop: a view per row, a temporary per row whose exp the adjoint reads."""
    loss = 0.0
    for i in range(logits.shape[0]):
        row = logits[i]
        m = np.max(row)
        loss += m + np.log(np.sum(np.exp(row - m))) - row[labels[i]]
    return loss / logits.shape[0]


def reused_buffers(x, means, Q, xc, Qxc):
    """gmm_objective_dot's loop: buffers overwritten by out= every iteration, nested loops."""
    s = 0.0
    for i in range(x.shape[0]):
        for k in range(means.shape[0]):
            np.subtract(x[i], means[k], xc)
            np.dot(Q[k], xc, out=Qxc)
            s += math.exp(-0.5 * np.sum(Qxc * Qxc))
    return s


def growing_prefix(x):
    """The temporaries change shape every iteration: they stay in a list."""
    s = 0.0
    for i in range(x.shape[0]):
        t = np.exp(x[0:i + 1])
        s += np.sum(t * t) / (i + 1)
    return s


def written_after(x, out):
    """A temporary written after it is computed: its row is not copied early."""
    s = 0.0
    for i in range(x.shape[0]):
        t = np.sin(x[i])
        t[0] = t[1] * t[2]
        s += np.sum(t * np.cos(t))
        out[i] = t
    return s


def while_rows(x):
    """A while loop (no trip count known at its entry): the stack grows."""
    s = 0.0
    i = 0
    while i < x.shape[0]:
        e = np.exp(0.5 * x[i])
        s += np.sum(e) * np.sum(np.tanh(e))
        i += 1
    return s


def _softmax_args(rng, n=5, m=4):
    return [rng.standard_normal((n, m)), rng.integers(0, m, n)]


def _grad(logits, labels):
    g = np.zeros_like(logits)
    zymo.autodiff(Reverse, row_softmax_loss, Active, Duplicated(logits.copy(), g), Const(labels))
    return g


def _gen(f, *args):
    return zymo.generated_code(Reverse, f, Active, *args)


def test_row_softmax_stacks_exp_recomputes_the_row_and_allocates_shadows_in_the_adjoint():
    rng = np.random.default_rng(0)
    logits, labels = _softmax_args(rng)
    check_grad(row_softmax_loss, logits, labels, const=(1,))
    src = _gen(row_softmax_loss, Duplicated(logits, np.zeros_like(logits)), Const(labels))
    assert ".append(" not in src and ".pop()" not in src     # no list caches at all
    assert src.count("_rt.grow_stack(") == 1                 # exp(row - m), one row per iteration
    adjoint = src.split("# adjoint sweep")[1]
    assert "= logits[i]" in adjoint                           # the row view is taken again
    assert "np.zeros((_shape_t_0,)" in adjoint                   # d(row - m) allocated where it is used
    assert "np.zeros_like(exp)" not in adjoint               # sum(exp)'s operand: one number
    assert "dexp" not in adjoint and "* exp" in adjoint       # (`Reverse._uniform`) scales exp's vjp
    fwd = src.split("# adjoint sweep")[0]
    assert "np.zeros_like" not in fwd                        # no shadow allocated per iteration


@pytest.mark.slow
def test_row_softmax_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    rng = np.random.default_rng(1)
    logits, labels = _softmax_args(rng, 6, 3)

    def ref(lg):
        m = jnp.max(lg, axis=1)
        lse = m + jnp.log(jnp.sum(jnp.exp(lg - m[:, None]), axis=1))
        return jnp.mean(lse - lg[jnp.arange(lg.shape[0]), labels])

    g = _grad(logits, labels)
    np.testing.assert_allclose(g, np.asarray(jax.grad(ref)(logits)), rtol=1e-12, atol=1e-14)
    assert np.abs(g).max() > 1e-3


def _buffer_args(rng, n=4, k=3, d=3):
    return [rng.standard_normal((n, d)), rng.standard_normal((k, d)), 0.5 * rng.standard_normal((k, d, d)),
            np.zeros(d), np.zeros(d)]


def test_buffers_overwritten_by_out_are_copied_straight_into_stacked_rows():
    rng = np.random.default_rng(2)
    args = _buffer_args(rng)
    check_grad(reused_buffers, *args)
    src = _gen(reused_buffers, *[Duplicated(a, np.zeros_like(a)) for a in args])
    assert ".append(" not in src and ".copy()" not in src
    assert "_cache__saved_xc[_k__saved_xc] = xc" in src       # contents of xc, no temporary copy
    assert "_cache__saved_Qxc[_k__saved_Qxc] = Qxc" in src
    # Qxc * Qxc is neither cached nor recomputed: the adjoint of sum(Qxc * Qxc) is one number
    # that scales the saved copy (`Reverse._uniform`)
    adjoint = src.split("# adjoint sweep")[1]
    assert "_saved_Qxc * _saved_Qxc" not in adjoint and "* _saved_Qxc" in adjoint


def test_varying_shapes_stay_in_lists_and_stay_correct():
    x = np.linspace(-0.5, 0.7, 5)
    check_grad(growing_prefix, x)
    src = _gen(growing_prefix, Duplicated(x, np.zeros_like(x)))
    assert ".append(" in src and "grow_stack" not in src


def test_a_temporary_written_after_its_definition_is_not_copied_early():
    rng = np.random.default_rng(3)
    x, out = rng.standard_normal((4, 3)), np.zeros((4, 3))
    check_grad(written_after, x, out)


def test_a_while_loop_grows_its_stack():
    x = np.random.default_rng(4).standard_normal((7, 3))
    check_grad(while_rows, x)
    src = _gen(while_rows, Duplicated(x, np.zeros_like(x)))
    assert "grow_stack" in src and ".append(" not in src


def test_split_mode_tape_carries_the_stack_and_reports_its_size():
    rng = np.random.default_rng(5)
    logits, labels = _softmax_args(rng)
    dl = np.zeros_like(logits)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, row_softmax_loss, Active,
                                   Duplicated(logits, dl), Const(labels))
    tape, _ = fwd(Duplicated(logits, dl), Const(labels))
    rev(Duplicated(logits, dl), Const(labels), 1.0, tape)
    g = _grad(logits, labels)
    np.testing.assert_allclose(dl, g, rtol=1e-13)
    assert np.abs(g).max() > 1e-3
    rep = zymo.cache_report(Reverse, row_softmax_loss, Active, Duplicated(logits, np.zeros_like(logits)),
                            Const(labels))
    assert "a stacked array buffer, one row per entry" in rep
    assert f"this call: 5 entries, {5 * 4 * 8} bytes" in rep


def test_batch_split_mode_shares_one_stack_across_lanes():
    rng = np.random.default_rng(6)
    logits, labels = _softmax_args(rng)
    shadows = (np.zeros_like(logits), np.zeros_like(logits))
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, row_softmax_loss, Active,
                                   zymo.BatchDuplicated(logits, shadows), Const(labels))
    tape, _ = fwd(zymo.BatchDuplicated(logits, shadows), Const(labels))
    rev(zymo.BatchDuplicated(logits, shadows), Const(labels), 1.0, -2.0, tape)
    g = _grad(logits, labels)
    np.testing.assert_allclose(shadows[0], g, rtol=1e-13)
    np.testing.assert_allclose(shadows[1], -2.0 * g, rtol=1e-13)


def test_second_order_through_a_stacked_cache():
    """The reverse program's stacked caches are ordinary arrays to forward mode (hvp)."""
    rng = np.random.default_rng(7)
    logits, labels = _softmax_args(rng, 4, 3)
    v = rng.standard_normal(logits.shape)
    hv = zymo.hvp(row_softmax_loss, logits, v, labels)
    eps = 1e-5
    gp, gm = _grad(logits + eps * v, labels), _grad(logits - eps * v, labels)
    np.testing.assert_allclose(hv, (gp - gm) / (2 * eps), rtol=1e-6, atol=1e-9)
    assert np.abs(hv).max() > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("f, make", [(row_softmax_loss, _softmax_args), (reused_buffers, _buffer_args)])
def test_numba_compiles_stacked_caches_and_matches_python(f, make):
    args = make(np.random.default_rng(8))
    wrt = [0] if f is row_softmax_loss else list(range(len(args)))
    grads = {}
    for numba in (True, False):
        ann = [Duplicated(a.copy(), np.zeros_like(a)) if k in wrt else Const(a.copy()) for k, a in enumerate(args)]
        zymo.autodiff(Reverse, f, Active, *ann, numba=numba)
        grads[numba] = [ann[k].dval for k in wrt]
    assert_tree_close(grads[True], grads[False], rtol=1e-12, atol=1e-13, what="numba vs python")
    assert max(np.abs(g).max() for g in grads[True]) > 1e-3


# -- number caches in nested loops: room for a whole nest of for loops at its entry ---------


def nested_branch(A, c):
    """Two for loops; the cached sine only in a branch (fewer entries than iterations)."""
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            if c[j] > 0:
                t = math.sin(A[i, j])
                A[i, j] = t * t
                s += t * A[i, j]
            else:
                s += A[i, j] * A[i, j]
    return s


def for_in_while(x):
    """A for loop inside a while loop: no trip count at the while's entry, the cache grows."""
    s = 0.0
    k = 0
    while k < 3:
        for i in range(x.shape[0]):
            t = math.sin(x[i] + k)
            x[i] = t * t
            s += t
        k += 1
    return s


def test_nested_for_loops_with_a_branch():
    A = np.linspace(0.1, 1.2, 20).reshape(4, 5)
    c = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    check_grad(nested_branch, A.copy(), c, const=(1,))
    src = zymo.generated_code(Reverse, nested_branch, Active, Duplicated(A.copy(), np.zeros_like(A)), Const(c))
    # `A.shape[1]` is read before the loops (`hoist_sizes`): each cache is allocated once, for
    # the whole nest, with the inner loop's trip count written out
    # (into the buffer the last call kept, when it is big enough: `_rt.reuse_buffer`)
    assert "_rt.grow(" not in src and "_trips * _rt.span(0, n), np.float64)" in src
    dA = np.zeros_like(A)
    zymo.autodiff(Reverse, nested_branch, Active, Duplicated(A.copy(), dA), Const(c), numba=True)
    dA_py = np.zeros_like(A)
    zymo.autodiff(Reverse, nested_branch, Active, Duplicated(A.copy(), dA_py), Const(c))
    np.testing.assert_allclose(dA, dA_py, rtol=1e-12)
    assert np.abs(dA_py).max() > 0.1


def test_nested_caches_in_split_mode():
    A = np.linspace(0.1, 1.2, 20).reshape(4, 5)
    c = np.array([1.0, -1.0, 1.0, 1.0, -1.0])
    dA_ref = np.zeros_like(A)
    zymo.autodiff(Reverse, nested_branch, Active, Duplicated(A.copy(), dA_ref), Const(c))
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, nested_branch, Active,
                                   Duplicated(A.copy(), np.zeros_like(A)), Const(c))
    tape = None
    for tape_in in (None, "reuse"):
        x, dA = A.copy(), np.zeros_like(A)
        tape, _ = fwd(Duplicated(x, dA), Const(c)) if tape_in is None else fwd(Duplicated(x, dA), Const(c), tape=tape)
        rev(Duplicated(x, dA), Const(c), 1.0, tape)
        np.testing.assert_allclose(dA, dA_ref, rtol=1e-12)


def test_a_for_loop_inside_a_while_loop_grows_its_cache():
    x = np.linspace(0.1, 0.9, 6)
    check_grad(for_in_while, x.copy())
    src = zymo.generated_code(Reverse, for_in_while, Active, Duplicated(x.copy(), np.zeros_like(x)))
    assert "_rt.grow(" in src


def triangle_in_while(A, rounds):
    """A nest of two for loops inside a while loop (room for the nest at its entry), and a
    triangular loop whose trip count is only known at its own entry."""
    s = 0.0
    k = 0
    while k < rounds:
        for i in range(A.shape[0]):
            for j in range(A.shape[1]):
                t = math.sin(A[i, j] * (k + 1.0))
                s += t * t
        k += 1
    for i in range(A.shape[0]):
        for j in range(i):
            u = math.cos(A[i, j] + A[j, i])
            s += u * A[j, j]
    return s


def test_room_for_a_nest_is_made_where_its_trip_counts_are_known():
    A = np.linspace(0.1, 1.3, 16).reshape(4, 4)
    check_grad(triangle_in_while, A.copy(), 2, const=(1,))
    src = zymo.generated_code(Reverse, triangle_in_while, Active, Duplicated(A.copy(), np.zeros_like(A)), Const(2))
    # the nest in the while loop: one check for both loops, before the outer one
    assert "_cache_sin = _rt.grow(_cache_sin, _k_sin + _trips * _rt.span(0, n_1))" in src
    # the triangle: its inner loop's bound is the outer index, so room is made at the inner loop
    assert "_cache_cos = _rt.grow(_cache_cos, _k_cos + _trips_" in src
    for numba in (True, False):
        dA = np.zeros_like(A)
        zymo.autodiff(Reverse, triangle_in_while, Active, Duplicated(A.copy(), dA), Const(2), numba=numba)
        if numba:
            dA_numba = dA
    np.testing.assert_allclose(dA_numba, dA, rtol=1e-12)
    assert np.abs(dA).max() > 0.1


def shrinking_window(x):
    """`h` loses an element every iteration (a slice of a loop-carried array)."""
    acc = 0.0
    h = x
    for k in range(3):
        h = np.sin(h[1:] * h[:-1])
        acc += np.sum(h) * (k + 1.0)
    return acc


def first_row_kept(x):
    """`h` is (3, 4) on the first iteration and (1, 4) after (cached values would broadcast)."""
    h = x
    acc = 0.0
    for k in range(3):
        s = np.sin(h)
        acc += np.sum(s * s) * (k + 1.0)
        h = h[:1] * 2.0
    return acc


def rebound_by_a_product(x, W):
    """`W @ h` keeps `h`'s shape around the loop (or the next product fails): stacked."""
    h = x
    acc = 0.0
    for _ in range(3):
        h = np.tanh(W @ h)
        acc += np.sum(h * h)
    return acc


@pytest.mark.slow
@pytest.mark.parametrize("f, make", [
    (shrinking_window, lambda r: [r.random(7)]),
    (appended_each_time, lambda r: [r.random(4)]),
    (first_row_kept, lambda r: [r.random((3, 4))]),
])
def test_arrays_whose_shape_changes_around_a_loop_are_cached_in_lists(f, make):
    """A loop-carried array whose shape changes every iteration: the shape analysis once
    took the cycle for fixed and stacked its values in rows of the first one's shape (a
    broadcast error in the forward sweep). Checked against central differences and forward
    mode, in split mode, and under Numba."""
    args = make(np.random.default_rng(2))
    check_grad(f, *args)
    src = zymo.generated_code(Reverse, f, Active, *[Duplicated(a, np.zeros_like(a)) for a in args])
    assert ".append(" in src and "grow_stack" not in src
    (g,) = zymo.gradient(Reverse, f, *args, numba=False)
    assert_tree_close([g], fd_grad(f, args), rtol=1e-6, atol=1e-8)
    (g_numba,) = zymo.gradient(Reverse, f, *args, numba=True)
    assert_tree_close([g_numba], [g], rtol=1e-12, atol=1e-14)
    shadow = [Duplicated(args[0].copy(), np.zeros_like(args[0]))]
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, f, Active, *shadow, numba=True)
    tape, _ = fwd(*shadow)
    rev(*shadow, 1.0, tape)
    assert_tree_close([shadow[0].dval], [g], rtol=1e-12, atol=1e-14)
    assert np.abs(g).max() > 0.1


@pytest.mark.slow
def test_a_shadow_the_adjoint_sweep_makes_is_not_allocated_in_the_loop():
    """`np.sum(np.sin(h))`'s adjoint is a number the adjoint sweep writes itself, never the
    forward sweep's zeros: the forward sweep allocated `dsin = np.zeros_like(sin)` in every
    iteration all the same (`Reverse._made_by_adjoint`). The carried shadow `dconcatenate` is
    still allocated and cached; the temporary `t_2`'s shadow, once allocated and cached too, is
    made where its one contribution is written (`Reverse._resolve_loop_lazy`). Both backends
    against central differences."""
    x = np.random.default_rng(5).random(4)
    src = zymo.generated_code(Reverse, appended_each_time, Active, Duplicated(x, np.zeros_like(x)))
    forward, adjoint = src.split("# adjoint sweep")
    assert "dsin" not in forward and "= np.zeros_like(concatenate)" in forward and "_cache_dt" not in forward
    assert "dt_2 = _rt.as_tangent(" in adjoint
    want = fd_grad(appended_each_time, [x])
    for numba in (False, True):
        (g,) = zymo.gradient(Reverse, appended_each_time, x.copy(), numba=numba)
        assert_tree_close([g], want, rtol=1e-6, atol=1e-8)
    assert np.abs(g).max() > 0.1


def test_a_product_around_a_loop_keeps_its_stacked_cache():
    """The cycle through `W @ h` keeps `h`'s shape (a product that changed it would fail at the
    next iteration), so its values stay in one stacked buffer."""
    r = np.random.default_rng(3)
    args = [r.standard_normal(4), 0.5 * r.standard_normal((4, 4))]
    check_grad(rebound_by_a_product, *args)
    src = zymo.generated_code(Reverse, rebound_by_a_product, Active,
                              *[Duplicated(a, np.zeros_like(a)) for a in args])
    assert "grow_stack" in src


def reads_a_slice_of_the_state(x, W):
    """`h[1:]` read but not fed back: as fixed as `h`, so stacked."""
    h = x
    acc = 0.0
    for _ in range(3):
        h = np.tanh(W @ h)
        t = np.sin(h[1:])
        acc += np.sum(t * t)
    return acc


def test_a_slice_that_only_reads_a_loop_carried_array_stays_stacked():
    """Only ops on the cycle itself must keep the shape; `sin(h[1:])` reads the cycle."""
    r = np.random.default_rng(4)
    args = [r.standard_normal(4), 0.5 * r.standard_normal((4, 4))]
    check_grad(reads_a_slice_of_the_state, *args)
    src = zymo.generated_code(Reverse, reads_a_slice_of_the_state, Active,
                              *[Duplicated(a, np.zeros_like(a)) for a in args])
    assert "_cache_sin = _rt.grow_stack(" in src and "_cache_sin.append(" not in src
