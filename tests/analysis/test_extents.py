"""Symbolic extents (`zymo/analysis/extents.py`) and the sums over broadcast dimensions they remove.

An elementwise op's adjoint has the op's result shape; reverse mode sums it back to an
operand's shape (`_rt.unbroadcast`) unless the analysis shows the two shapes are equal. Equal
sizes of two parameters count as equal shapes for the call being compiled, and the program
records that as a guard: a later call whose sizes differ (an operand that now broadcasts)
must get a program of its own, never the one without the sum. Every case is checked in both
modes against central differences and the other mode (`zymo.testing.check_grad`), and under Numba
against the Python program.
"""
import numpy as np
import pytest
from helpers import assert_tree_close, zymo_grad

import zymo
from zymo import Active, Const, Duplicated, Reverse
from zymo.analysis.extents import Extents, guards_hold
from zymo.cache import lowered
from zymo.testing import check_grad


def scaled_store(r, w, buf):
    buf[...] = r * w + np.sin(r)
    return np.sum(buf * buf)


def rows_of(x, y):
    """Views taken whole (`x[i]`, `x[:, 0]`) keep their base's extents."""
    s = 0.0
    for i in range(x.shape[0]):
        s += np.sum(np.exp(x[i] - y[i]) * x[i])
    return s + np.sum(x[:, 0] * y[:, 1])


def species(r, dr, w):
    """gm3's pattern: views of two arguments combined and stored into a third one's view."""
    u, v = r[:, :, 0], r[:, :, 1]
    du = dr[:, :, 0]
    du[...] = u * u / v - 0.5 * u
    return np.sum(dr * w)


@pytest.fixture
def rng():
    return np.random.default_rng(23)


def _adjoint(src: str) -> str:
    return src.split("# adjoint sweep", 1)[1]


def _entries(f):
    return [c for key, cs in zymo.cache.COMPILED.items() if key[0][0] is f for c in cs]


# -- the analysis -------------------------------------------------------------------------


def test_views_and_broadcasts_have_symbolic_extents():
    x, y = np.ones((4, 3)), np.ones((4, 3))
    ir = lowered(rows_of, (x, y))[0].ir
    ops = list(_walk(ir.body))
    ext = Extents(ir, [x.shape, y.shape])
    row = next(op.result for op in ops if op.kind == "getitem" and op.args[0] is ir.params[0])  # x[i]
    assert ext.shape(row)[0] == (("p", 0, 1),)
    assert ext.same(row, row) and not ext.guards
    diff = next(r for op in ops for r in op.results if op.kind == "prim" and op.attrs["key"] == "sub")
    # x[i] - y[i]: extent 1 of x and of y, equal in this call, hence a guard
    assert ext.same(diff, row) and ext.guards == {((0, 1), (1, 1))}
    assert guards_hold(sorted(ext.guards), [(4, 3), (5, 3)])
    assert not guards_hold(sorted(ext.guards), [(4, 3), (4, 1)])
    # without sizes, different parameters' extents are never equal
    blind = Extents(ir)
    assert not blind.same(diff, row) and blind.same(row, row)


def test_a_bounded_slice_or_an_index_array_is_unknown():
    def f(x, idx):
        return np.sum(x[1:3] * x[idx])

    x, idx = np.ones((4, 3)), np.array([0, 1])
    ir = lowered(f, (x, idx))[0].ir
    views = [op.result for op in _walk(ir.body) if op.kind == "getitem"]
    ext = Extents(ir, [x.shape, idx.shape])
    assert not ext.same(views[0], views[1])
    assert ext.shape(views[0])[0][1] == ("p", 0, 1)  # the axis taken whole keeps its extent


def _walk(block):
    from zymo.ir.core import walk
    return walk(block)


# -- generated code -------------------------------------------------------------------------


def test_equal_shapes_need_no_sum_over_broadcast_dimensions(rng):
    r, w, buf = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), np.zeros((3, 4))
    check_grad(scaled_store, r, w, buf, const=(2,))
    src = zymo.generated_code(Reverse, scaled_store, Active, Duplicated(r, np.zeros_like(r)),
                              Duplicated(w, np.zeros_like(w)), Const(buf))
    assert "_rt.unbroadcast" not in _adjoint(src)
    assert "dw += r * _g" in src


@pytest.mark.parametrize("wshape", [(1, 4), (3, 1), (1, 1)])
def test_an_operand_that_broadcasts_keeps_its_sum(rng, wshape):
    r, w, buf = rng.standard_normal((3, 4)), rng.standard_normal(wshape), np.zeros((3, 4))
    got = check_grad(scaled_store, r, w, buf, const=(2,))
    src = zymo.generated_code(Reverse, scaled_store, Active, Duplicated(r, np.zeros_like(r)),
                              Duplicated(w, np.zeros_like(w)), Const(buf))
    assert "dw += _rt.unbroadcast(r * _g, dw)" in src
    assert np.max(np.abs(got.reverse[1])) > 0.1  # w's adjoint, summed over its broadcast axis


@pytest.mark.slow
@pytest.mark.parametrize("numba", [False, True])
def test_a_call_whose_sizes_break_a_guard_gets_its_own_program(rng, numba):
    def f(r, w, buf):
        buf[...] = r * w + np.sin(r)
        return np.sum(buf * buf)

    r = rng.standard_normal((3, 4))
    buf = np.zeros((3, 4))
    grads = []
    for wshape in [(3, 4), (1, 4), (3, 4), (3, 1)]:
        w = rng.standard_normal(wshape)
        dr, dw = np.zeros_like(r), np.zeros_like(w)
        zymo.autodiff(Reverse, f, Active, Duplicated(r, dr), Duplicated(w, dw), Const(buf), numba=numba)
        b = r * w + np.sin(r)
        full = 2 * b * r
        expected = full.sum(axis=tuple(k for k, n in enumerate(wshape) if n == 1), keepdims=True)
        np.testing.assert_allclose(dr, 2 * b * (w + np.cos(r)), rtol=1e-12)
        np.testing.assert_allclose(dw, expected, rtol=1e-12)
        assert np.max(np.abs(dw)) > 0.1
        grads.append(dw)
    entries = _entries(f)
    # (3, 4) twice: one program, whose guards (1, 4) breaks; the program compiled then sums
    # w's adjoint and assumes nothing about w, so (3, 1) reuses it
    assert len(entries) == 2
    assert ((1, 0), (2, 0)) in entries[0].guards and "_rt.unbroadcast" not in _adjoint(entries[0].source)
    assert "_rt.unbroadcast(r * _g, dw)" in entries[1].source
    assert not any(1 in (g[0][0], g[1][0]) for g in entries[1].guards)


def test_row_views_in_a_loop_need_no_sums(rng):
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    check_grad(rows_of, x, y)
    src = zymo.generated_code(Reverse, rows_of, Active, Duplicated(x, np.zeros_like(x)),
                              Duplicated(y, np.zeros_like(y)))
    assert "_rt.unbroadcast" not in _adjoint(src)
    assert "dx_3 += dt_4" in src and "dy_2 += -dt_4" in src  # the rows x[i], y[i]: views of dx, dy
    # the guards name only the extents that had to be equal: the rows' and the columns' lengths
    (entry,) = [c for c in _entries(rows_of) if c.source == src]
    assert set(entry.guards) == {((0, 0), (1, 0)), ((0, 1), (1, 1))}


def test_one_argument_needs_no_guard(rng):
    def f(x):
        return np.sum(np.exp(x[1] - x[0]) * x[2])

    x = rng.standard_normal((3, 4))
    check_grad(f, x)
    src = zymo.generated_code(Reverse, f, Active, Duplicated(x, np.zeros_like(x)))
    assert "_rt.unbroadcast" not in _adjoint(src)
    assert all(not c.guards for c in _entries(f))


@pytest.mark.slow
@pytest.mark.parametrize("numba", [False, True])
def test_gm3_pattern_stores_into_a_view_without_sums(rng, numba):
    r = rng.random((6, 6, 2)) + 0.5
    dr0, w = np.zeros((6, 6, 2)), rng.random((6, 6, 2))
    args = [r, dr0, w]
    if not numba:
        check_grad(species, *args, const=(2,))
    src = zymo.generated_code(Reverse, species, Active, Duplicated(r, np.zeros_like(r)),
                              Duplicated(dr0, np.zeros_like(dr0)), Const(w))
    assert "_rt.unbroadcast" not in _adjoint(src)
    ref = zymo_grad(species, args, const=(2,), numba=False)
    got = zymo_grad(species, args, const=(2,), numba=numba)
    assert_tree_close(got, ref, rtol=1e-12, atol=1e-12)
    u, v = r[:, :, 0], r[:, :, 1]
    expected_u = w[:, :, 0] * (2 * u / v - 0.5)
    np.testing.assert_allclose(got[0][:, :, 0], expected_u, rtol=1e-12)
    np.testing.assert_allclose(got[0][:, :, 1], -w[:, :, 0] * u * u / (v * v), rtol=1e-12)


# -- found in review: a store that drops leading length-1 axes, and a reshape in place -------


def store_drops_an_axis(a, b, out):
    out[0] = np.sin(a * b)  # a * b is (1, 3); NumPy drops the leading 1 on the store into (3,)
    return np.sum(out * out)


@pytest.mark.slow
@pytest.mark.parametrize("numba", [False, True])
def test_a_store_that_drops_leading_axes_keeps_the_sum(rng, numba):
    a, b, out = rng.standard_normal(3), rng.standard_normal((1, 3)), rng.standard_normal((2, 3))
    if not numba:
        check_grad(store_drops_an_axis, a, b, out)
    ref = zymo_grad(store_drops_an_axis, [a, b, out], numba=False)
    got = zymo_grad(store_drops_an_axis, [a, b, out], numba=numba)
    assert_tree_close(got, ref, rtol=1e-12, atol=1e-12)
    # by hand: out[0] = sin(a * b[0]); the loss is sum(out ** 2) (zymo_grad's cotangents are zero)
    da, db, _ = zymo.gradient(Reverse, store_drops_an_axis, a, b, out.copy(), numba=numba)
    g = 2 * np.sin(a * b[0]) * np.cos(a * b[0])
    np.testing.assert_allclose(da, g * b[0], rtol=1e-12)
    np.testing.assert_allclose(db, (g * a)[None, :], rtol=1e-12)
    assert len(set(np.round(da, 12))) == 3  # no element repeated (the Numba symptom)


def sin_of_product(x, w):
    return np.sum(np.sin(x * w))


def test_a_replayed_call_checks_the_guards(rng):
    """The replay shortcut passes the same objects; one reshaped in place (with its shadow)
    breaks a guard (x and w had equal sizes), so the call is not replayed."""
    x, w = rng.standard_normal((1, 3)), rng.standard_normal((1, 3))
    dx, dw = np.zeros_like(x), np.zeros_like(w)
    for _ in range(2):  # the second call is a replay, and records the written-out check
        dx[...] = 0.0
        dw[...] = 0.0
        zymo.autodiff(Reverse, sin_of_product, Active, Duplicated(x, dx), Duplicated(w, dw))
    np.testing.assert_allclose(dx, np.cos(x * w) * w, rtol=1e-12)
    x.shape = (3, 1)
    dx.shape = (3, 1)
    dx[...] = 0.0
    dw[...] = 0.0
    zymo.autodiff(Reverse, sin_of_product, Active, Duplicated(x, dx), Duplicated(w, dw))
    c = np.cos(x * w)  # (3, 3)
    np.testing.assert_allclose(dx, (c * w).sum(axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(dw, (c * x).sum(axis=0, keepdims=True), rtol=1e-12)


def shifted_sum(x, y):
    """A stencil's views: slices with constant bounds that shorten an axis by the same count."""
    return np.sum(np.sin(x[1:-1] + x[2:] * x[:-2]) * y[1:-1, 0]) + np.sum(x[1:] * y[:-1, 1])


def test_slices_that_shorten_an_axis_alike_have_one_extent(rng):
    """`x[1:-1]`, `x[2:]`, `x[:-2]` have extent `("d", n, -2)` (`extents._shortened`); `x[1:]`
    another; a positive stop (`x[:3]`), a step or a run-time bound stays unknown. The
    adjoints into the stencil's views then need no sums (`y`'s rows are `x`'s length in this
    call: a guard). Both modes against central differences."""
    x, y = rng.standard_normal(7), rng.standard_normal((7, 2))
    ir = lowered(shifted_sum, (x, y))[0].ir
    views = [op.result for op in _walk(ir.body) if op.kind == "getitem"]
    ext = Extents(ir, [x.shape, y.shape])
    assert ext.shape(views[0])[0] == (("d", ("p", 0, 0), -2),)
    assert ext.same(views[0], views[1]) and ext.same(views[1], views[2]) and not ext.same(views[0], views[4])
    assert ext.same(views[0], views[3]) and ext.guards == {((0, 0), (1, 0))}  # y[1:-1, 0]: y's rows
    check_grad(shifted_sum, x, y)
    x, y = rng.standard_normal(7), rng.standard_normal((7, 2))
    src = _adjoint(zymo.generated_code(Reverse, shifted_sum, Active, Duplicated(x, np.zeros_like(x)),
                                       Duplicated(y, np.zeros_like(y))))
    assert "_rt.unbroadcast(" not in src


def test_other_slices_stay_unknown():
    def f(x, k):
        return np.sum(x[:3] * x[1:4]) + np.sum(x[::2] * x[k:]) + np.sum(x[-3:] * x[-3:])

    x = np.ones(7)
    ir = lowered(f, (x, 1))[0].ir
    views = [op.result for op in _walk(ir.body) if op.kind == "getitem"]
    ext = Extents(ir, [x.shape, None])
    assert all(ext.shape(v)[0][0][0] in ("s", "u") for v in views)


def test_matrix_products_have_their_operands_outer_extents():
    """`X @ w` has `X`'s rows: the adjoint of a sum of an expression of it stays one number
    (no `as_tangent` of the sum's adjoint over `X @ w`'s shape)."""
    rng = np.random.default_rng(4)
    X, y = rng.standard_normal((7, 3)), rng.random(7)

    def nll(w, X, y):
        z = X @ w
        return np.sum(np.logaddexp(0.0, z) - y * z) / X.shape[0]

    w = rng.standard_normal(3)
    src = zymo.generated_code(zymo.Reverse, nll, zymo.Active, zymo.Duplicated(w, np.zeros(3)), zymo.Const(X),
                              zymo.Const(y))
    assert "_rt.expand_reduced" not in src
    check_grad(nll, w, X, y, const=(1, 2))
