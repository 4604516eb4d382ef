"""`DuplicatedNoNeed` arguments in reverse mode (Enzyme's): the caller does not need the
argument's primal contents after the call, so the forward sweep leaves out the top-level primal
statements whose only effect is to write such memory (`Reverse._dead_primal_ops`). Likewise
`Reverse` (not `ReverseWithPrimal`) does not return the primal value: what computes only that
is left out, whole loops and branches included, where it cannot raise (an index out of
range raises in Python, not under Numba). The gradient is the same as with `Duplicated`
and `ReverseWithPrimal`, against central differences too; what anyone reads stays: the adjoint
sweep's operands, memory the caller keeps, the return value of `ReverseWithPrimal`, draws of
`np.random`, `print`, a loop that records anything for the adjoint sweep.
"""
import math

import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Active, Const, Duplicated, DuplicatedNoNeed, Reverse, ReverseWithPrimal


def reaction(r, w, out, Ay, Ayu, uAx):
    """gm3's shape: products into buffers, a store into a view of `out`, a loss over `out`."""
    u, v = r[:, :, 0], r[:, :, 1]
    np.dot(Ay, u, out=Ayu)
    np.dot(u, Ay, out=uAx)
    du = out[:, :, 0]
    du[...] = 0.5 * (Ayu + uAx) + u * u / v - u
    out[:, :, 1] = u * v
    return np.sum(out * w)


def _reaction_args(n=5):
    rng = np.random.default_rng(4)
    r = rng.random((n, n, 2)) + 0.5
    w = rng.random((n, n, 2))
    return r, w, np.zeros((n, n, 2)), rng.random((n, n)), np.zeros((n, n)), np.zeros((n, n))


def _reaction_gradient(ann, numba=False):
    r, w, out, Ay, Ayu, uAx = _reaction_args()
    dr = np.zeros_like(r)
    bufs = (out, Ayu, uAx)
    zymo.autodiff(Reverse, reaction, Active, Duplicated(r, dr), Const(w), ann(out, np.zeros_like(out)),
                  Const(Ay), ann(Ayu, np.zeros_like(Ayu)), ann(uAx, np.zeros_like(uAx)), numba=numba)
    return dr, bufs


@pytest.mark.slow
@pytest.mark.parametrize("numba", [False, True], ids=["python", "numba"])
def test_buffers_the_caller_does_not_need_are_not_written(numba):
    """With the output and both product buffers `DuplicatedNoNeed`, the forward sweep keeps only
    the views of `r` the adjoint reads: no product, no store (the buffers stay zeros here), the
    same gradient as `Duplicated`, and central differences'."""
    pytest.importorskip("numba") if numba else None
    want, kept = _reaction_gradient(Duplicated, numba)
    got, bufs = _reaction_gradient(DuplicatedNoNeed, numba)
    np.testing.assert_array_equal(got, want)
    assert all(np.any(b != 0) for b in kept)
    assert all(not np.any(b) for b in bufs)
    r, w, out, Ay, Ayu, uAx = _reaction_args()
    fd = fd_grad(lambda r: reaction(r, w, np.zeros_like(out), Ay, np.zeros_like(Ayu), np.zeros_like(uAx)), [r])[0]
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
    assert np.abs(got).max() > 0.1
    src = zymo.generated_code(Reverse, reaction, Active, Duplicated(r, np.zeros_like(r)), Const(w),
                              DuplicatedNoNeed(out, np.zeros_like(out)), Const(Ay),
                              DuplicatedNoNeed(Ayu, np.zeros_like(Ayu)), DuplicatedNoNeed(uAx, np.zeros_like(uAx)))
    forward = src.split("# adjoint sweep")[0]
    assert "np.dot" not in forward and "np.sum" not in forward and "[...] =" not in forward, forward


def squares_read_back(x, buf):
    buf[...] = x * x
    return np.sum(buf * x)


def kept_through_another(x, tmp, keep):
    tmp[...] = 3.0 * x
    keep[...] = tmp * 2.0
    return np.sum(x * x)


def summed(x, buf):
    buf[...] = 2.0 * x
    return np.sum(buf)


def in_a_loop(x, buf):
    for i in range(x.shape[0]):
        buf[i] = x[i] * x[i]
    return np.sum(buf * x)


def draws(x, buf):
    buf[...] = np.random.rand(3)
    return np.sum(x * x)


def test_what_is_read_afterwards_is_kept():
    """A store the adjoint sweep reads back (`buf * x` needs `buf`), one another store reads
    into memory the caller keeps, the return value `ReverseWithPrimal` returns, a store in a
    loop that the adjoint reads, and a draw of `np.random` (it moves the generator) all stay."""
    x = np.array([0.5, -1.5, 2.0])
    buf, dx = np.zeros(3), np.zeros(3)
    zymo.autodiff(Reverse, squares_read_back, Active, Duplicated(x, dx), DuplicatedNoNeed(buf, np.zeros(3)))
    np.testing.assert_allclose(dx, 3 * x * x, rtol=1e-15)
    np.testing.assert_allclose(dx, fd_grad(lambda x: squares_read_back(x, np.zeros(3)), [x])[0], rtol=1e-7)

    tmp, keep, dx = np.zeros(3), np.zeros(3), np.zeros(3)
    zymo.autodiff(Reverse, kept_through_another, Active, Duplicated(x, dx), DuplicatedNoNeed(tmp, np.zeros(3)),
                  Duplicated(keep, np.zeros(3)))
    np.testing.assert_array_equal(keep, 6.0 * x)
    np.testing.assert_allclose(dx, 2 * x, rtol=1e-15)

    dx = np.zeros(3)
    (_, value) = zymo.autodiff(ReverseWithPrimal, summed, Active, Duplicated(x, dx),
                               DuplicatedNoNeed(np.zeros(3), np.zeros(3)))
    assert value == pytest.approx(2.0 * np.sum(x), rel=1e-15)
    np.testing.assert_allclose(dx, 2.0, rtol=1e-15)

    buf, dx = np.zeros(3), np.zeros(3)
    zymo.autodiff(Reverse, in_a_loop, Active, Duplicated(x, dx), DuplicatedNoNeed(buf, np.zeros(3)))
    np.testing.assert_allclose(dx, 3 * x * x, rtol=1e-15)

    np.random.seed(7)
    dx = np.zeros(3)
    zymo.autodiff(Reverse, draws, Active, Duplicated(x, dx), DuplicatedNoNeed(np.zeros(3), np.zeros(3)))
    after = np.random.rand()
    np.random.seed(7)
    draws(x, np.zeros(3))
    assert after == np.random.rand()
    np.testing.assert_allclose(dx, 2 * x, rtol=1e-15)


def test_memory_shared_with_a_needed_argument_is_kept():
    """`DuplicatedNoNeed` of an array that is also passed as `Duplicated` (one alias class):
    the caller needs that memory, so its stores stay, as `Duplicated` alone gives them."""
    x = np.array([0.5, -1.5, 2.0])
    a, b = x.copy(), x.copy()
    da, db = np.zeros(3), np.zeros(3)
    zymo.autodiff(Reverse, summed, Active, Duplicated(a, da), DuplicatedNoNeed(a, da))
    zymo.autodiff(Reverse, summed, Active, Duplicated(b, db), Duplicated(b, db))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(da, db)
    np.testing.assert_array_equal(a, 2.0 * x)


def computed_view(r, out, w):
    k = r.shape[2] - 1
    o = out[:, :, k]
    o[...] = r[:, :, 0] * r[:, :, 1]
    return np.sum(out * w)


def test_a_view_left_out_keeps_its_shadow_view_and_index():
    """The store into a view of a NoNeed output is left out, but the view's shadow is still
    taken (the adjoint sweep reads it), at an index the forward sweep computes: that stays."""
    rng = np.random.default_rng(2)
    r, w = rng.random((3, 4, 2)), rng.random((3, 4, 2))
    dr, out = np.zeros_like(r), np.zeros((3, 4, 2))
    zymo.autodiff(Reverse, computed_view, Active, Duplicated(r, dr), DuplicatedNoNeed(out, np.zeros_like(out)),
                  Const(w))
    np.testing.assert_array_equal(dr[:, :, 0], w[:, :, 1] * r[:, :, 1])
    np.testing.assert_array_equal(dr[:, :, 1], r[:, :, 0] * w[:, :, 1])
    assert not np.any(out)
    src = zymo.generated_code(Reverse, computed_view, Active, Duplicated(r, dr),
                              DuplicatedNoNeed(out, np.zeros_like(out)), Const(w))
    assert "[...] =" not in src.split("# adjoint sweep")[0]


def test_batch_mode_takes_batch_duplicated_no_need():
    """In batch mode (several adjoints in one call) `BatchDuplicatedNoNeed` does the same: one
    forward sweep without the products and stores, every lane's gradient `BatchDuplicated`'s."""
    from zymo import BatchDuplicated, BatchDuplicatedNoNeed

    def run(ann):
        r, w, out, Ay, Ayu, uAx = _reaction_args()
        lanes = (np.zeros_like(r), np.zeros_like(r))
        twice = lambda a: (np.zeros_like(a), np.zeros_like(a))  # noqa: E731
        zymo.autodiff(Reverse, reaction, Active, BatchDuplicated(r, lanes), Const(w), ann(out, twice(out)),
                      Const(Ay), ann(Ayu, twice(Ayu)), ann(uAx, twice(uAx)))
        return lanes, Ayu

    want, kept = run(BatchDuplicated)
    got, skipped = run(BatchDuplicatedNoNeed)
    for g, w_ in zip(got, want):
        np.testing.assert_array_equal(g, w_)
    assert np.abs(got[0]).max() > 0.1 and np.any(kept) and not np.any(skipped)


def sine_into(x, out):
    out[...] = np.sin(x) * x
    return np.sum(out)


@pytest.mark.parametrize("numba", [False, True], ids=["python", "numba"])
def test_an_adjoint_that_reads_only_the_shape_leaves_the_store_out(numba):
    """`np.sum(out)`'s adjoint names `out` only for its shape (`_rt.expand_reduced(g, out,
    ...)`): the store into a NoNeed `out` is still left out. A name read for its contents
    anywhere keeps it (`_shape_only_names`)."""
    pytest.importorskip("numba") if numba else None
    from zymo.transform.reverse import _shape_only_names

    x = np.array([0.3, 1.2, -0.7])
    dx, out = np.zeros(3), np.zeros(3)
    zymo.autodiff(Reverse, sine_into, Active, Duplicated(x, dx), DuplicatedNoNeed(out, np.zeros(3)), numba=numba)
    np.testing.assert_allclose(dx, np.cos(x) * x + np.sin(x), rtol=1e-15)
    np.testing.assert_allclose(dx, fd_grad(lambda x: sine_into(x, np.zeros(3)), [x])[0], rtol=1e-7)
    assert not np.any(out)
    src = ("d += _rt.expand_reduced(g, a, None, False) + np.zeros_like(b) * c.shape[0]\n"
           "e = _rt.unbroadcast(g * b, c)\n"
           "f = d.ndim + np.sum(a * 0.0)\n")
    assert _shape_only_names(src) == frozenset({"c"})  # `a` and `b` are also read for their contents


def data_term(x, w):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.sin(x[i]) * w[i]
    return s


def penalized(x, w):
    """A data term, and a penalty on `w` that only adds to the value: a loop nest (gmm's prior)."""
    s = data_term(x, w)
    penalty = 0.0
    for i in range(w.shape[0]):
        acc = 0.0
        for j in range(i + 1):
            acc = acc + w[j] * w[j]
        penalty = penalty + acc
    return s + 0.5 * penalty


def penalized_root(x, w):
    """`penalized` with a root of each partial sum: the adjoint reads the sums, so the forward
    sweep computes and caches them, and the loop nest stays."""
    s = data_term(x, w)
    penalty = 0.0
    for i in range(w.shape[0]):
        acc = 0.0
        for j in range(i + 1):
            acc = acc + w[j] * w[j]
        penalty = penalty + np.sqrt(acc)
    return s + 0.5 * penalty


def penalized_into(x, w, out):
    """`penalized`, with each partial sum of the penalty also stored into the caller's `out`."""
    s = data_term(x, w)
    penalty = 0.0
    for i in range(w.shape[0]):
        acc = 0.0
        for j in range(i + 1):
            acc = acc + w[j] * w[j]
        out[i] = acc
        penalty = penalty + acc
    return s + 0.5 * penalty


def talkative(x):
    total = 0.0
    for i in range(x.shape[0]):
        print("term", i)
        total = total + x[i] * x[i]
    count = 0
    for i in range(x.shape[0]):
        print("again", i)
        count = count + 1
    return total + count


def _loops(src: str) -> int:
    return sum(line.lstrip().startswith("for ") for line in src.splitlines())


@pytest.mark.slow
@pytest.mark.parametrize("numba, penalized, left_out", [
    (True, penalized, 2), (True, penalized_root, 0), (False, penalized, 0)], ids=["numba", "numba-root", "python"])
def test_reverse_leaves_out_a_loop_nest_that_only_computes_the_value(numba, penalized, left_out):
    """`Reverse` does not return the value: under Numba the forward sweep leaves out the
    penalty's loop nest (the adjoint sweep recomputes the squares it needs), unless the adjoint
    reads what the nest computes. In Python the nest stays: its reads could raise an
    `IndexError`, which a derivative must raise as the primal does. The gradient equals
    `ReverseWithPrimal`'s, which keeps the nest, and central differences'; `ReverseWithPrimal`
    after `Reverse` gets its own program."""
    pytest.importorskip("numba") if numba else None
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal(5), rng.random(5) + 0.5
    dx, dw = np.zeros(5), np.zeros(5)
    zymo.autodiff(Reverse, penalized, Active, Duplicated(x, dx), Duplicated(w, dw), numba=numba)
    ex, ew = np.zeros(5), np.zeros(5)
    (_, value) = zymo.autodiff(ReverseWithPrimal, penalized, Active, Duplicated(x, ex), Duplicated(w, ew),
                               numba=numba)
    assert value == pytest.approx(penalized(x, w), rel=1e-14)
    np.testing.assert_allclose(dx, ex, rtol=1e-14)
    np.testing.assert_allclose(dw, ew, rtol=1e-14)
    fx, fw = fd_grad(penalized, [x, w])
    np.testing.assert_allclose(dx, fx, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dw, fw, rtol=1e-6, atol=1e-8)
    assert np.abs(dw).max() > 0.1 and np.abs(dx).max() > 0.1
    ann = (Duplicated(x, np.zeros(5)), Duplicated(w, np.zeros(5)))
    lean = zymo.generated_code(Reverse, penalized, Active, *ann, numba=numba)
    full = zymo.generated_code(ReverseWithPrimal, penalized, Active, *ann, numba=numba)
    assert _loops(lean) == _loops(full) - left_out
    assert ("penalty" in lean.split("# adjoint sweep")[0]) == (left_out == 0)


def test_a_loop_that_writes_memory_the_caller_keeps_stays():
    rng = np.random.default_rng(12)
    x, w = rng.standard_normal(4), rng.random(4) + 0.5
    out, dx, dw = np.zeros(4), np.zeros(4), np.zeros(4)
    zymo.autodiff(Reverse, penalized_into, Active, Duplicated(x, dx), Duplicated(w, dw),
                  Duplicated(out, np.zeros(4)))
    want = np.zeros(4)
    penalized_into(x, w, want)
    np.testing.assert_array_equal(out, want)
    fx, fw, _ = fd_grad(penalized_into, [x, w, np.zeros(4)], cotangents=[None, None, np.zeros(4)])
    np.testing.assert_allclose(dw, fw, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dx, fx, rtol=1e-6, atol=1e-8)


def test_print_stays_in_the_forward_sweep(capsys):
    """A loop that only prints and counts computes nothing the gradient needs; it stays, as
    the user's output."""
    x = np.array([0.5, -1.0, 2.0])
    dx = np.zeros(3)
    zymo.autodiff(Reverse, talkative, Active, Duplicated(x, dx))
    np.testing.assert_allclose(dx, 2 * x, rtol=1e-15)
    printed = capsys.readouterr().out
    assert printed.count("term") == 3 and printed.count("again") == 3


def raises_in_the_value(x, c):
    """The value reads `c` out of range (and takes a root of a negative number); the gradient
    with respect to `x` does not need either."""
    s = 0.0
    for i in range(c.shape[0]):
        s = s + math.sqrt(c[i + 1])
    return np.sum(x * x) + s


def test_an_error_only_the_value_would_raise_is_raised_in_python():
    x, c = np.array([0.3, -0.7, 1.1]), np.array([0.4, 1.3, 0.8])
    with pytest.raises(IndexError):
        raises_in_the_value(x, c)
    with pytest.raises(IndexError):
        zymo.autodiff(Reverse, raises_in_the_value, Active, Duplicated(x, np.zeros(3)), Const(c))
    c_neg = np.array([0.4, -1.3, 0.8, 0.5])
    with pytest.raises(ValueError, match="math domain"):
        zymo.autodiff(Reverse, raises_in_the_value, Active, Duplicated(x, np.zeros(3)), Const(c_neg))


def top_level_errors(x, k):
    q = 10 // k  # ZeroDivisionError for k = 0, in Python and in Numba
    return np.sum(x * x) + q


@pytest.mark.parametrize("numba", [False, True], ids=["python", "numba"])
def test_an_integer_division_by_zero_in_the_value_is_raised(numba):
    pytest.importorskip("numba") if numba else None
    x = np.array([0.3, -0.7, 1.1])
    with pytest.raises(ZeroDivisionError):
        zymo.autodiff(Reverse, top_level_errors, Active, Duplicated(x, np.zeros(3)), Const(0), numba=numba)
    dx = np.zeros(3)
    zymo.autodiff(Reverse, top_level_errors, Active, Duplicated(x, dx), Const(3), numba=numba)
    np.testing.assert_allclose(dx, 2 * x, rtol=1e-15)


def test_the_guard_sees_values_made_inside_a_loop_left_out():
    """`_names_a_dead_value` (which rebuilds the program keeping everything if its text still
    names what was left out) looks inside a loop left out whole, not only at its results."""
    pytest.importorskip("numba")
    from zymo.ir.core import walk
    from zymo.transform.reverse import _names_a_dead_value

    x, w = np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.5, 2.0])
    comp, *_ = zymo.cache.prepare(Reverse, penalized, Active, (Duplicated(x, np.zeros(3)), Duplicated(w, np.zeros(3))),
                                 True)
    rev = comp.generator
    regions = [op for op in rev.fn.body.ops if id(op) in rev.dead and op.regions]
    assert len(regions) == 1  # the penalty's loop nest
    used = {vid for vid, _ in rev.needed}
    inner = [r for op in walk(regions[0].regions[0]) for r in op.results if not r.is_const and r.id not in used]
    assert inner and not _names_a_dead_value(rev, comp.source)
    assert _names_a_dead_value(rev, comp.source + f"\n    print({rev.namer(inner[0])})")


def sum_of_squares(x, y):
    return np.sum(x * x) + np.sum(np.multiply(y, y) * 0.5)


def mismatched(x, y):
    return np.sum(x * y) + np.sum(x * x)


@pytest.mark.parametrize("numba", [False, True], ids=["python", "numba"])
def test_the_adjoint_of_a_square_is_one_term_and_the_square_still_raises(numba):
    """The adjoint of `x * x` adds `2.0 * (g * x)`, which is `g * x + x * g` to the bit. The
    loss's product is kept under `Reverse`: it may raise (an overflow under `np.errstate(over=
    "raise")`), and then the derivative raises too."""
    pytest.importorskip("numba") if numba else None
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal(5)
    ann = lambda: (Duplicated(x, np.zeros_like(x)), Duplicated(y, np.zeros_like(y)))  # noqa: E731
    if not numba:
        assert "2.0 * (" in zymo.generated_code(Reverse, sum_of_squares, Active, *ann())
    a = ann()
    zymo.autodiff(Reverse, sum_of_squares, Active, *a, numba=numba)
    np.testing.assert_array_equal(a[0].dval, 1.0 * x + x * 1.0)  # the two terms, to the bit
    np.testing.assert_allclose(a[1].dval, y, rtol=1e-15)
    np.testing.assert_allclose(a[0].dval, fd_grad(sum_of_squares, [x, y])[0], rtol=1e-7)
    b = ann()
    (_, value) = zymo.autodiff(ReverseWithPrimal, sum_of_squares, Active, *b, numba=numba)
    assert value == pytest.approx(sum_of_squares(x, y), rel=1e-15)
    np.testing.assert_array_equal(b[0].dval, a[0].dval)
    # a product of two arrays that fail to broadcast raises as the primal does
    with pytest.raises(ValueError):
        zymo.autodiff(Reverse, mismatched, Active, Duplicated(x, np.zeros_like(x)), Const(y), numba=numba)


def test_a_dead_square_that_overflows_raises_under_errstate():
    big = np.array([1e200, 1.0])
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError):
            sum_of_squares(big, np.ones(2))
        with pytest.raises(FloatingPointError):
            zymo.autodiff(Reverse, sum_of_squares, Active, Duplicated(big, np.zeros(2)),
                          Duplicated(np.ones(2), np.zeros(2)))


def dead_reads(x):
    t = x[10]  # noqa: F841  (nothing reads t: the primal raises IndexError on a short x all the same)
    for i in range(5):
        u = x[i + 5]  # noqa: F841
    return np.sum(x * x)


@pytest.mark.parametrize("mode, backend", [(Reverse, False), (ReverseWithPrimal, False), (ReverseWithPrimal, True)])
def test_a_dead_element_read_raises_as_the_primal_does(mode, backend):
    """`x[10]` of a 5-element `x` raises in the primal though nothing reads its value; the IR's
    dead-code pass keeps such reads (`simplify._may_raise`), so the derivative raises too (it
    returned a gradient). `Reverse` under Numba leaves out what only the value needs where
    Numba's semantics allow (`transform/reverse/dead.py`), this read among them."""
    x = np.arange(5.0)
    with pytest.raises(IndexError):
        dead_reads(x.copy())
    with pytest.raises(IndexError):
        zymo.autodiff(mode, dead_reads, Active, Duplicated(x.copy(), np.zeros(5)), numba=backend)
    big = np.arange(12.0)  # in range: the gradient, as before
    g = np.zeros(12)
    zymo.autodiff(mode, dead_reads, Active, Duplicated(big.copy(), g), numba=backend)
    np.testing.assert_allclose(g, 2 * big)


def weighted_square(W, out):
    return np.sum(W * out * out)


def unrelated_product(x, y, z):
    t = x * y
    u = t * z  # noqa: F841  (nothing reads u: the primal raises where z does not broadcast all the same)
    return np.sum(x * x)


def scaled_mean_square(r, k):
    return 0.5 * np.sum(r * r) / k


@pytest.mark.parametrize("numba", [False, True], ids=["python", "numba"])
def test_a_loss_product_that_broadcasts_for_certain_is_left_out(numba):
    """`(W * out) * out` broadcasts wherever `W * out` did: nothing reads it under `Reverse`, so
    the Python backend computes it only where NumPy's error state may raise (`_rt.fp_raises()`),
    and whole-program Numba (which never raises `FloatingPointError`) not at all. The gradient
    is the same as `ReverseWithPrimal`'s, which computes it, and central differences'."""
    pytest.importorskip("numba") if numba else None
    rng = np.random.default_rng(11)
    W, out = rng.random((4, 6)), rng.standard_normal((4, 6))
    if not numba:
        src = zymo.generated_code(Reverse, weighted_square, Active, Const(W), Duplicated(out, np.zeros_like(out)))
        sweep = src.split("# adjoint sweep")[0].splitlines()
        k = sweep.index("    if _rt.fp_raises():")
        assert sweep[k + 1].endswith(" * out") and sum(ln.endswith(" * out") for ln in sweep) == 2
    a, b = Duplicated(out, np.zeros_like(out)), Duplicated(out, np.zeros_like(out))
    zymo.autodiff(Reverse, weighted_square, Active, Const(W), a, numba=numba)
    _, value = zymo.autodiff(ReverseWithPrimal, weighted_square, Active, Const(W), b, numba=numba)
    assert value == pytest.approx(weighted_square(W, out), rel=1e-14)
    np.testing.assert_allclose(a.dval, 2.0 * W * out, rtol=1e-14)
    np.testing.assert_allclose(a.dval, b.dval, rtol=1e-14)
    np.testing.assert_allclose(a.dval, fd_grad(lambda o: weighted_square(W, o), [out])[0], rtol=1e-7)


def test_a_dead_product_left_out_raises_where_the_error_state_says_raise():
    """The product left out is computed where NumPy's error state may raise, so an overflow
    raises as in the primal; where the state is quiet, the derivative is the same as the
    primal's gradient without it."""
    W, big = np.array([1.0, 2.0]), np.array([1e200, 1.0])
    for state in ({"over": "raise"}, {"all": "call"}):
        with np.errstate(**state):
            if "all" in state:
                np.seterrcall(lambda *_: (_ for _ in ()).throw(FloatingPointError("called")))
            with pytest.raises(FloatingPointError):
                weighted_square(W, big)
            with pytest.raises(FloatingPointError):
                zymo.autodiff(Reverse, weighted_square, Active, Const(W), Duplicated(big, np.zeros(2)))
    np.seterrcall(None)
    with np.errstate(over="ignore"):
        d = Duplicated(big, np.zeros(2))
        zymo.autodiff(Reverse, weighted_square, Active, Const(W), d)
        np.testing.assert_allclose(d.dval, 2.0 * W * big)
    # a NumPy scalar divided by zero: the primal raises under divide="raise", the derivative too
    r = np.array([1.0, 3.0])
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            scaled_mean_square(r, 0)
        with pytest.raises(FloatingPointError):
            zymo.autodiff(Reverse, scaled_mean_square, Active, Duplicated(r, np.zeros(2)), Const(0))
    d = Duplicated(r, np.zeros(2))
    zymo.autodiff(Reverse, scaled_mean_square, Active, d, Const(4))
    np.testing.assert_allclose(d.dval, r / 4.0, rtol=1e-15)
    np.testing.assert_allclose(d.dval, fd_grad(lambda v: scaled_mean_square(v, 4), [r])[0], rtol=1e-7)


@pytest.mark.parametrize("numba", [False, True], ids=["python", "numba"])
def test_a_dead_product_that_may_not_broadcast_is_kept(numba):
    """`(x * y) * z` with `z` unrelated to `x` and `y` may fail to broadcast: it is kept, and the
    derivative raises `ValueError` where the primal does."""
    pytest.importorskip("numba") if numba else None
    x, y = np.ones((3, 4)), np.ones(4)
    with pytest.raises(ValueError):
        unrelated_product(x, y, np.ones(5))
    with pytest.raises(ValueError):
        zymo.autodiff(Reverse, unrelated_product, Active, Duplicated(x, np.zeros_like(x)), Const(y),
                      Const(np.ones(5)), numba=numba)
    d = Duplicated(x, np.zeros_like(x))
    zymo.autodiff(Reverse, unrelated_product, Active, d, Const(y), Const(np.ones(4)), numba=numba)
    np.testing.assert_allclose(d.dval, 2.0 * x)


def with_errstate(x):
    with np.errstate(over="ignore"):
        s = np.sum(x)
    return s + np.sum(x * x)


def test_a_function_that_sets_the_error_state_keeps_its_products():
    """A function that changes NumPy's error state itself keeps every product its primal
    computes: `_rt.fp_raises()` could answer differently inside and outside its block."""
    x = np.array([1.0, -2.0, 3.0])
    src = zymo.generated_code(Reverse, with_errstate, Active, Duplicated(x, np.zeros(3)))
    assert "fp_raises" not in src
    d = Duplicated(x, np.zeros(3))
    zymo.autodiff(Reverse, with_errstate, Active, d)
    np.testing.assert_allclose(d.dval, 1.0 + 2.0 * x)
    np.testing.assert_allclose(d.dval, fd_grad(with_errstate, [x])[0], rtol=1e-7)


def test_fp_raises_follows_numpy_error_state():
    from zymo import runtime as rt

    assert not rt.fp_raises()
    with np.errstate(over="raise"):
        assert rt.fp_raises()
        with np.errstate(over="ignore"):
            assert not rt.fp_raises()
        assert rt.fp_raises()
    with np.errstate(invalid="call"):
        assert rt.fp_raises()
    with np.errstate(all="ignore"):
        assert not rt.fp_raises()
    assert not rt.fp_raises()


def two_draws(x):
    u = np.random.normal()  # noqa: F841  (nothing reads u: the draw moves the generator all the same)
    return x * np.random.normal()


def domain_error(x):
    u = math.sqrt(x - 10.0)  # noqa: F841
    return x * x


def test_an_unread_draw_still_moves_the_generator():
    """The IR's dead-code pass keeps a call with an effect of its own: the first draw, though
    nothing reads it, moves the generator, so the gradient is the second draw, as the primal's."""
    np.random.seed(3)
    value = two_draws(2.0)
    np.random.seed(3)
    (g,), = zymo.autodiff(Reverse, two_draws, Active, Active(2.0))
    assert g == value / 2.0
    np.random.seed(3)
    (g2,), v2 = zymo.autodiff(ReverseWithPrimal, two_draws, Active, Active(2.0))
    assert (g2, v2) == (g, value)
    np.random.seed(3)
    np.random.normal()
    assert g == np.random.normal()  # the second draw, not the first


@pytest.mark.parametrize("mode", [Reverse, ReverseWithPrimal, zymo.Forward])
def test_an_unread_call_that_raises_raises_in_the_derivative(mode):
    """`math.sqrt(x - 10.0)` raises for x = 2 though nothing reads it: so does the derivative;
    for x = 12 the derivative is the square's."""
    def derivative(x):
        if mode is zymo.Forward:
            return zymo.autodiff(mode, domain_error, Duplicated, Duplicated(x, 1.0))[0]
        return zymo.autodiff(mode, domain_error, Active, Active(x))[0][0]
    with pytest.raises(ValueError):
        domain_error(2.0)
    with pytest.raises(ValueError):
        derivative(2.0)
    assert derivative(12.0) == pytest.approx(24.0, rel=1e-15)
    assert derivative(12.0) == pytest.approx(fd_grad(domain_error, [12.0])[0], rel=1e-7)


def svd_twice(a, b):
    s = np.linalg.svd(a)[1]  # noqa: F841  (unread: raises LinAlgError where a holds nan)
    a[...] = b
    u = np.linalg.svd(a)[0]
    return np.sum(u * u)


def scaled_sum(r):
    return np.sum(r * r) * 1e300


def test_second_order_of_a_loss_with_a_left_out_chain():
    """`0.5 * np.sum(r * r) / n` is a chain computed only under `_rt.fp_raises()`; second order
    differentiates the reverse program without those blocks (helper 65: `hessian` failed on
    a name the frontend found possibly undefined)."""
    r = np.array([1.0, -2.0, 3.0])
    assert "fp_raises" in zymo.generated_code(Reverse, scaled_mean_square, Active, Duplicated(r, np.zeros(3)), Const(3))
    np.testing.assert_allclose(zymo.hessian(scaled_mean_square, r, 3), np.eye(3) / 3.0, rtol=1e-14)
    np.testing.assert_allclose(zymo.hvp(scaled_mean_square, r, np.array([1.0, 2.0, -1.0]), 3),
                               np.array([1.0, 2.0, -1.0]) / 3.0, rtol=1e-14)


def test_left_out_values_raise_under_warnings_errors_log_and_numpy_scalar_overflow():
    """A warnings filter that makes the overflow's `RuntimeWarning` an error, NumPy's "log"
    state, and a NumPy scalar's `*` overflowing under `over="raise"`: the primal raises, and
    so does the derivative (helper 65)."""
    import warnings

    W, big = np.array([1.0, 2.0]), np.array([1e200, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            weighted_square(W, big)
        with pytest.raises(RuntimeWarning):
            zymo.autodiff(Reverse, weighted_square, Active, Const(W), Duplicated(big, np.zeros(2)))

    class Raises:
        def write(self, msg):
            raise FloatingPointError(msg)
    old = np.seterrcall(Raises())
    try:
        with np.errstate(over="log"):
            with pytest.raises(FloatingPointError):
                weighted_square(W, big)
            with pytest.raises(FloatingPointError):
                zymo.autodiff(Reverse, weighted_square, Active, Const(W), Duplicated(big, np.zeros(2)))
    finally:
        np.seterrcall(old)
    r = np.array([1e10, 2.0])
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError):
            scaled_sum(r)
        with pytest.raises(FloatingPointError):
            zymo.autodiff(Reverse, scaled_sum, Active, Duplicated(r, np.zeros(2)))
    d = Duplicated(np.array([1.0, 2.0]), np.zeros(2))
    zymo.autodiff(Reverse, scaled_sum, Active, d)
    np.testing.assert_allclose(d.dval, 2e300 * np.array([1.0, 2.0]), rtol=1e-15)


def test_an_unread_part_of_a_call_on_memory_written_since_is_kept():
    """`np.linalg.svd(a)[1]` unread, then `a` written, then `np.linalg.svd(a)[0]` read: two
    calls, not one; the first raises `LinAlgError` on a nan-filled `a`, in the derivative too
    (helper 65). The parts of one call, next to each other, go with the part that is read."""
    a, b = np.full((3, 3), np.nan), np.eye(3) + 0.1
    with pytest.raises(np.linalg.LinAlgError):
        svd_twice(a.copy(), b)
    for mode in (Reverse, ReverseWithPrimal):
        with pytest.raises(np.linalg.LinAlgError):
            zymo.autodiff(mode, svd_twice, Active, Const(a.copy()), Duplicated(b.copy(), np.zeros((3, 3))))
    ir = str(zymo.ir(svd_twice, a.copy(), b))
    assert ir.count("numpy.linalg.svd.s") == 1 and ir.count("numpy.linalg.svd.vh") == 1  # the first call's
    d = Duplicated(b.copy(), np.zeros((3, 3)))
    zymo.autodiff(Reverse, svd_twice, Active, Const(np.eye(3)), d)
    np.testing.assert_allclose(d.dval, 0.0, atol=1e-12)  # u is orthogonal: sum(u * u) = 3 for every b
