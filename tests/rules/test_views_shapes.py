"""Views, shapes and tensor products end to end: which calls return views (and that zymo
models them so), the forms of `np.einsum`, and the array rules of `rules/arrays.py`, each
checked with `zymo.gradient` in forward and reverse mode against central differences of
the map from the arguments' initial values (`zymo.testing.check_grad`), and against
autograd where autograd has the function.
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import fd_grad

import zymo
from zymo import Forward, Reverse
from zymo import runtime as _rt
from zymo.errors import ZymoError
from zymo.rules import REGISTRY
from zymo.testing import check_grad

# -- np.einsum('ji', a) is a view of a -------------------------------------------------------


def einsum_view_then_overwrite(a, b):
    s = np.sum(np.einsum('ji', a) * a.T)
    a[:, -1] = b
    return s


def test_einsum_view_regression():
    """`np.einsum('ji', a)` views `a`: its value must be read before `a` is overwritten (zymo
    took it for a copy, so reverse mode read the overwritten column: [3, 3], not [4, 10])."""
    a, b = np.arange(6.0).reshape(2, 3), np.array([1.0, -2.0])
    ga, gb = zymo.gradient(Reverse, einsum_view_then_overwrite, a.copy(), b)
    fa, fb = fd_grad(einsum_view_then_overwrite, [a.copy(), b], [np.zeros_like(a), np.zeros_like(b)])
    np.testing.assert_allclose(ga, fa, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ga, 2.0 * a)
    np.testing.assert_allclose(gb, fb, atol=1e-6)
    check_grad(einsum_view_then_overwrite, a.copy(), b)
    ir = str(zymo.ir(einsum_view_then_overwrite, a.copy(), b))
    assert "numpy.einsum_view" in ir, ir


def einsum_view_read_after_write(a, b):
    v = np.einsum('ji', a)
    a[:, -1] = b
    return np.sum(v * v)  # v sees the new column


def einsum_write_through_view(a, b):
    d = np.einsum('ii->i', a)
    d[...] = d * b  # scales a's diagonal in place
    return np.sum(a * a)


def einsum_ellipsis_view(a):
    v = np.einsum('...ij->...ji', a)
    v[0, 1, 0] = v[0, 1, 0] * 3.0
    return np.sum(a * np.sin(a))


@pytest.mark.parametrize("f, shapes", [
    (einsum_view_then_overwrite, [(2, 3), (2,)]),
    (einsum_view_read_after_write, [(2, 3), (2,)]),
    (einsum_write_through_view, [(3, 3), (3,)]),
    (einsum_ellipsis_view, [(2, 2, 3)]),
])
def test_einsum_views_both_modes(f, shapes):
    rng = np.random.default_rng(3)
    check_grad(f, *[rng.normal(size=s) for s in shapes])


@pytest.mark.parametrize("subscripts, shapes", [
    ("ji", [(2, 3)]), ("ij", [(2, 3)]), ("ij->ji", [(2, 3)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
    ("ii->", [(3, 3)]), ("ij->i", [(2, 3)]), ("...ij->...ji", [(2, 3, 4)]), ("i...->...", [(2, 3)]),
    ("...", [(2, 3)]), ("iij->ji", [(3, 3, 2)]), ("i...i->...", [(3, 2, 3)]), ("ba", [(2, 3)]),
    ("ij,jk", [(2, 3), (3, 4)]), ("i", [(3,)]), ("i->", [(3,)]),
])
def test_einsum_is_view_matches_numpy(subscripts, shapes):
    ops = [np.ones(s) for s in shapes]
    r = np.einsum(subscripts, *ops)
    assert _rt.einsum_is_view(subscripts, [len(s) for s in shapes]) == bool(np.shares_memory(r, ops[0]))


# -- every rule's flags against what its function returns --------------------------------------

from zymo import testing
from zymo.rules.runtime_rules import ALIASING_HELPERS

# rules no case calls as a function (their shares_memory is checked another way, or they
# have no array result): reason
NOT_CALLED = {
    "numpy.add.at": "updates its first argument in place (inplace_arg), returns None",
    "numpy.put_along_axis": "updates its first argument in place (out=), returns None",
    "numpy.copy_flat": "called as x.flatten(): checked in test_flatten_is_a_copy",
    "builtins.float": "numbers only", "zymo.as_dtype": "a conversion generated code makes (astype: a copy)",
    "zymo.check_bound": "no result",
    "scipy.linalg.cho_solve": "takes its factor as a tuple: checked in test_factor_solves_are_fresh",
    "scipy.linalg.lu_solve": "takes its factor as a tuple: checked in test_factor_solves_are_fresh",
}
# NumPy's function returns a view, the rule's callee a copy on purpose: why that is safe
COPIES_OF_VIEWS = {
    "numpy.broadcast_to": "a broadcast shadow cannot be a view; a write to the base while the copy is "
                          "read is refused at lowering time (test_broadcast_to_then_write_is_refused)",
    "numpy.histogram.bin_edges": "NumPy returns an array `bins` itself; generated code calls _rt.histogram_edges, "
                                 "which copies",
    "numpy.imag": "NumPy's np.imag of an array is a view; generated code calls _rt.imag_copy (an adjoint added "
                  "into a view of Im(dz) would have the wrong sign); writing into it is refused at lowering time "
                  "(tests/rules/test_complex.py, write_imag)",
}


def _callee(rule):
    import math
    env = {"np": np, "math": math, "_rt": _rt}
    if rule.template:
        n = rule.template.count("{")
        names = [f"a{i}" for i in range(n)]
        return eval(f"lambda {', '.join(names)}: " + rule.template.format(*names), env)
    try:
        return eval(rule.callee(), env)
    except Exception:
        return rule.fn


def _arrays(x):
    if isinstance(x, np.ndarray):
        return [x]
    if isinstance(x, (tuple, list)):
        return [a for e in x for a in _arrays(e)]
    return []


def _calls(key, impl):
    """(args, kwargs, result) of each call of `impl` in place of the rule's function, over the
    rule's float64 cases run as plain Python (the cases' closures rebound to a recorder)."""
    rule = REGISTRY[key]
    out = []
    for c in testing.rule_cases(key, dtypes=("float64",)):
        cells = [cell for cell in (c.fn.__closure__ or ()) if cell.cell_contents is rule.fn]
        if not cells:
            continue

        def recorder(*a, **k):
            r = impl(*a, **k)
            out.append((c.name, a, k, r))  # noqa: B023  (called within this iteration)
            return r
        for cell in cells:
            cell.cell_contents = recorder
        try:
            with np.errstate(all="ignore"):
                c.fn(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in c.args])
        finally:
            for cell in cells:
                cell.cell_contents = rule.fn
    return out


def _sharing(rule, a, k, r):
    """For each array argument (not an `out=` buffer): whether the result shares its memory."""
    outs = [k["out"]] if k.get("out") is not None else []
    nin = getattr(rule.fn, "nin", 2)
    if rule.out and len(a) > nin:
        outs += _arrays(a[nin:])
        a = a[:nin]
    ins = [x for x in _arrays(list(a) + [v for n, v in k.items() if n != "out"]) if not any(x is o for o in outs)]
    res = [x for x in _arrays(r) if not any(x is o for o in outs)]
    return [any(np.shares_memory(o, x) for o in res) for x in ins]


def _rule_keys():
    return sorted(k for k in REGISTRY if not getattr(REGISTRY[k], "user", False)
                  and not getattr(REGISTRY[k], "part_of", None) and not getattr(REGISTRY[k], "via", None))


@pytest.mark.parametrize("key", _rule_keys())
def test_flags_say_whether_the_result_shares_memory(key):
    """view: the result shares the first array argument's memory; maybe_view: either;
    anything else (alloc, plain): fresh memory, sharing no argument's. Checked for the
    function generated code calls (the rule's callee) and for NumPy's own function, which
    the user's program means."""
    rule = REGISTRY[key]
    if key in NOT_CALLED or key in ALIASING_HELPERS:
        pytest.skip(NOT_CALLED.get(key, "an adjoint helper whose result generated code consumes at once"))
    seen = 0
    for which, impl in (("callee", _callee(rule)), ("function", rule.fn)):
        for name, a, k, r in _calls(key, impl):
            seen += 1
            if rule.parts:  # a tuple (or list) of results: each part's own flags
                assert len(r) == len(rule.parts), f"{key}: {len(r)} results for {len(rule.parts)} parts"
                for part, rk in zip(rule.parts, r):
                    p = REGISTRY[part]
                    if which == "callee" and p.call:  # generated code calls the part's own callee
                        rk = _callee(p)(*a, **k)
                    share = _sharing(rule, a, k, rk)
                    if p.view:
                        assert share and share[0], f"{part} is flagged as a view but is not ({name})"
                    elif which == "function" and part in COPIES_OF_VIEWS:
                        continue
                    elif not p.maybe_view:
                        assert not any(share), f"{part} is flagged as fresh memory but shares ({name})"
                continue
            share = _sharing(rule, a, k, r)
            where = f"{key} ({which}) in case {name}: sharing {share}"
            if rule.view:
                assert share and share[0], "a view rule whose result is not a view: " + where
            elif rule.maybe_view:
                continue
            elif which == "function" and key in COPIES_OF_VIEWS:
                continue
            else:
                assert not any(share), "a rule flagged as fresh memory whose result shares an argument's: " + where
    assert seen, f"no case of {key} calls its function: add one, or list it in NOT_CALLED"


def test_flatten_is_a_copy():
    x = np.ones((2, 3))
    assert not np.shares_memory(_rt.flatten(x), x)


def test_factor_solves_are_fresh():
    import scipy.linalg
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    b = np.array([1.0, 2.0])
    c, lower = scipy.linalg.cho_factor(a)
    assert not any(np.shares_memory(_rt.cho_solve(c, lower, b), x) for x in (c, b))
    lu, piv = scipy.linalg.lu_factor(a)
    assert not any(np.shares_memory(_rt.lu_solve(lu, piv, b), x) for x in (lu, b))


# -- np.broadcast_to: a copy, so a later write to its base is refused ---------------------------


def bt_write_after_read(x, y):
    b = np.broadcast_to(x, (3, 4))
    s = np.sum(b * y)
    x[0] = 2.0 * x[1]
    return s + np.sum(x)


def bt_read_after_write(x, y):
    b = np.broadcast_to(x, (3, 4))
    x[0] = 2.0 * x[1]
    return np.sum(b * y)


def bt_in_loop_ok(x, y):
    s = 0.0
    for i in range(3):
        b = np.broadcast_to(x, (3, 4))
        s = s + np.sum(b * y)
        x[i] = x[i] * 0.5
    return s


def bt_loop_reads_after_write(x, y):
    b = np.broadcast_to(x, (3, 4))
    s = 0.0
    for i in range(3):
        s = s + np.sum(b[i] * y[i])
        x[i] = x[i] * 0.5
    return s


def bt_write_through(x, y):
    b = np.broadcast_to(x, (3, 4))
    b[0, 0] = 1.0
    return np.sum(b * y)


def bt_copied_then_written(x, y):
    z = np.zeros((3, 4))
    z[...] = np.broadcast_to(x, (3, 4))  # the values, copied before the write
    x[0] = 2.0 * x[1]
    return np.sum(z * y) + np.sum(x)


def bt_inplace_through(x, y):
    b = np.broadcast_to(x, (3, 4))
    np.multiply(b, 2.0, out=b)
    return np.sum(b * y)


def test_broadcast_to_copy_then_write_is_right():
    rng = np.random.default_rng(0)
    check_grad(bt_write_after_read, rng.normal(size=4), rng.normal(size=(3, 4)))
    check_grad(bt_in_loop_ok, rng.normal(size=4), rng.normal(size=(3, 4)))
    check_grad(bt_copied_then_written, rng.normal(size=4), rng.normal(size=(3, 4)))


@pytest.mark.parametrize("f", [bt_read_after_write, bt_loop_reads_after_write, bt_write_through, bt_inplace_through])
def test_broadcast_to_then_write_is_refused(f):
    """NumPy's broadcast_to is a view: a read after a write to the base sees the write, zymo's
    copy would not; refused with the lines named, never a wrong number."""
    x, y = np.arange(4.0), np.ones((3, 4))
    with pytest.raises(ZymoError, match="broadcast_to"):
        zymo.gradient(Reverse, f, x.copy(), y)


# -- end to end: the array functions, both modes against central differences, and autograd ---------

import types

import scipy.signal


def f_cross(a, b):
    return np.sum(np.cross(a, b) ** 2) + np.sum(np.cross(b, a, axis=-1) * a)


def f_kron(a, b):
    return np.sum(np.sin(np.kron(a, b)))


def f_convolve(a, v):
    return np.sum(np.convolve(a, v) ** 2) + np.sum(np.convolve(a, v, 'same') ** 3) \
        + np.sum(np.cos(np.convolve(v, a, mode='valid')))


def f_correlate(a, v):
    return np.sum(np.correlate(a, v, 'full') ** 2) + np.sum(np.correlate(a, v, mode='same') ** 3) \
        + np.sum(np.correlate(a, v) ** 3)


def f_sp_convolve(a, v):
    return np.sum(scipy.signal.convolve(a, v) ** 2) + np.sum(scipy.signal.convolve(a, v, 'same') * a) \
        + np.sum(scipy.signal.correlate(a, v, mode='valid', method='direct') ** 2)


def f_gradient(a, h):
    return np.sum(np.gradient(a) ** 2) + np.sum(np.gradient(a, h, edge_order=2) * a)


def f_gradient_2d(a):
    return np.sum(np.gradient(a, 0.5, axis=0) ** 2) + np.sum(np.gradient(a, axis=1) * a)


def f_diff(a):
    return np.sum(np.diff(a) ** 2) + np.sum(np.diff(a, n=2, axis=0) * np.diff(a, 2, 0))


def f_split(a):
    p, q = np.split(a, 2)
    r, s = np.array_split(a, (1,), axis=1)
    return np.sum(p * q) + np.sum(np.sin(r)) * np.sum(s ** 2)


def f_split_write(a, b):
    p, q = np.split(a, 2)
    p[0] = b * q[1]  # writes a through the view
    return np.sum(a * a)


def f_rollaxis(a):
    return np.sum(np.rollaxis(a, 2) * np.arange(24.0).reshape(4, 2, 3) / 10.0) + np.sum(np.rollaxis(a, 0, 3) ** 2)


def f_atleast(a, s):
    v = np.atleast_2d(a)
    w = np.atleast_3d(a)
    return np.sum(v * v) + np.sum(w) * np.sum(np.atleast_1d(s * a))


def f_tri(a):
    return np.sum(np.triu(a) ** 2) + np.sum(np.tril(a, -1) * a) + np.sum(np.triu(a, k=1) * np.tril(a, k=1).T)


def f_pad(a):
    return np.sum(np.pad(a, 2) ** 2) + np.sum(np.sin(np.pad(a, (1, 2), mode='edge'))) \
        + np.sum(np.pad(a, 2, 'reflect') ** 3) + np.sum(np.pad(a, 1, mode='wrap') * np.pad(a, 1, 'symmetric'))


def f_pad_2d(a):
    return np.sum(np.pad(a, ((1, 0), (2, 1)), mode='constant', constant_values=1.5) ** 2) \
        + np.sum(np.pad(a, 1, mode='reflect') ** 3)


def f_ndarray(a):
    z = np.ndarray(a.shape)
    z[...] = a * a
    return np.sum(z * a)


def f_einsum_forms(a, b, c):
    return (np.einsum('...ij,...jk->...ik', a, b).sum() + np.einsum('ii', c) * np.einsum('ii->i', c)[0]
            + np.sum(np.einsum('ij,jk,kl,lm->im', c, c, c, c, optimize=True))
            + np.einsum('bij,jk', a, b[0]).sum() ** 2)


def f_shapes_keywords(a):
    return np.sum(np.moveaxis(a, source=0, destination=-1) * np.roll(a, shift=1, axis=0).T) \
        + np.sum(np.tile(a, reps=(2, 1)) ** 2) + np.sum(np.repeat(a, repeats=2, axis=1) ** 3) \
        + np.sum(np.diagonal(a, offset=0) ** 2)


RNG = np.random.default_rng(7)
E2E = [
    (f_cross, [(4, 3), (3,)]), (f_cross, [(4, 3), (4, 3)]), (f_kron, [(2, 3), (2, 2)]), (f_convolve, [(6,), (3,)]),
    (f_convolve, [(2,), (5,)]),
    (f_correlate, [(6,), (3,)]), (f_correlate, [(3,), (6,)]), (f_sp_convolve, [(6,), (3,)]),
    (f_gradient, [(6,), ()]), (f_gradient_2d, [(4, 5)]), (f_diff, [(4, 5)]), (f_split, [(4, 3)]),
    (f_split_write, [(4,), ()]), (f_rollaxis, [(2, 3, 4)]), (f_atleast, [(3,), ()]), (f_tri, [(4, 4)]),
    (f_pad, [(4,)]), (f_pad_2d, [(2, 3)]), (f_ndarray, [(3, 2)]), (f_einsum_forms, [(2, 3, 4), (2, 4, 2), (3, 3)]),
    (f_shapes_keywords, [(3, 3)]),
]


def _sample(shape):
    return RNG.normal(size=shape) if shape else float(RNG.uniform(0.5, 1.5))


@pytest.mark.parametrize("f, shapes", E2E, ids=lambda v: getattr(v, "__name__", ""))
def test_end_to_end_both_modes(f, shapes):
    check_grad(f, *[_sample(s) for s in shapes])


# functions that do not mutate their arguments, as autograd differentiates them (with autograd.numpy)
AUTOGRAD = [f_cross, f_kron, f_diff, f_split, f_rollaxis, f_atleast, f_tri]


@pytest.mark.parametrize("f", AUTOGRAD, ids=lambda f: f.__name__)
def test_against_autograd(f):
    autograd = pytest.importorskip("autograd")
    import autograd.numpy as anp

    shapes = [s for g, s in E2E if g is f][-1]  # (autograd does not sum np.cross's broadcast operand)
    args = [_sample(s) for s in shapes]
    ag_f = types.FunctionType(f.__code__, {**f.__globals__, "np": anp}, f.__name__)
    ours = zymo.gradient(Reverse, f, *[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])
    for k in range(len(args)):
        try:
            theirs = autograd.grad(ag_f, k)(*args)
        except (NotImplementedError, TypeError, ValueError, AttributeError, AssertionError) as e:
            pytest.skip(f"autograd does not differentiate {f.__name__}: {type(e).__name__}: {e}")
        np.testing.assert_allclose(ours[k], theirs, rtol=1e-9, atol=1e-9)


def f_sp_conv_full_valid(a, v):
    return np.sum(scipy.signal.convolve(a, v) ** 2) + np.sum(scipy.signal.convolve(a, v, mode='valid') ** 3)


def test_scipy_convolve_against_autograd():
    """autograd's own scipy.signal.convolve (full and valid modes) as the oracle."""
    autograd = pytest.importorskip("autograd")
    import autograd.numpy as anp
    import autograd.scipy.signal as asig

    def theirs(a, v):
        return anp.sum(asig.convolve(a, v) ** 2) + anp.sum(asig.convolve(a, v, mode='valid') ** 3)

    a, v = RNG.normal(size=7), RNG.normal(size=3)
    ours = zymo.gradient(Reverse, f_sp_conv_full_valid, a, v)
    for k in range(2):
        np.testing.assert_allclose(ours[k], autograd.grad(theirs, k)(a, v), rtol=1e-9, atol=1e-9)
    check_grad(f_sp_conv_full_valid, a, v)


def f_pad_constant(a):
    return np.sum(np.pad(a, ((1, 0), (2, 1))) ** 3) + np.sum(np.sin(np.pad(a, 2)))


def test_pad_constant_both_modes():  # (autograd's pad fails on this NumPy version: no oracle)
    check_grad(f_pad_constant, _sample((2, 3)))


def f_einsum_autograd(a, b, c):
    return (np.einsum('...ij,...jk->...ik', a, b).sum() ** 2 + np.sum(np.einsum('ij,jk,kl,lm->im', c, c, c, c) ** 2)
            + np.sum(np.einsum('ij', c) * np.einsum('ji', c)))


@pytest.mark.parametrize("f, shapes", [(f_einsum_autograd, [(2, 3, 4), (2, 4, 2), (3, 3)])], ids=["einsum"])
def test_more_against_autograd(f, shapes):
    autograd = pytest.importorskip("autograd")
    import autograd.numpy as anp

    args = [_sample(s) for s in shapes]
    ag_f = types.FunctionType(f.__code__, {**f.__globals__, "np": anp}, f.__name__)
    ours = zymo.gradient(Reverse, f, *args)
    for k in range(len(args)):
        np.testing.assert_allclose(ours[k], autograd.grad(ag_f, k)(*args), rtol=1e-9, atol=1e-9)
    check_grad(f, *args)


# -- calls returning several arrays (frontend/several.py): tuples of slices and single calls ------


def split_three(x, w):
    a, b, c = np.split(x, 3)
    return np.sum(a * w) + np.sum(b * b) - np.sum(np.sin(c))


def array_split_loop(m):
    s = 0.0
    for k, p in enumerate(np.array_split(m, 3, axis=1)):  # widths 3, 2, 2
        s = s + (k + 1.0) * np.sum(p ** 2)
    return s


def split_at_indices(x):
    a, b, c = np.split(x, (1, -1))
    return np.sum(a) * 3.0 + np.sum(b ** 2) + np.sum(np.sin(c))


def split_at_listed_indices(x):
    a, b, c = np.split(x, [1, 3])  # a list literal of indices (hunt 86: refused as not constant)
    return np.sum(a * 2.0) + np.sum(b ** 2) + np.sum(c ** 3) + np.sum(np.array_split(x, [2])[1] ** 2)


def gradient_per_axis(f):
    gy, gx = np.gradient(f * f, 0.5)
    return np.sum(gy * gx)


def atleast_several(a, b):
    x, y = np.atleast_2d(a, b)
    return np.sum(x @ y.T)


def split_then_write(x, v):
    y = x * 1.0
    a, b = np.split(y, 2)
    b[0] = v * a[1]  # the parts are views: the write reaches y
    return np.sum(y ** 2)


@pytest.mark.parametrize("f, shapes", [
    (split_three, [(6,), ()]), (array_split_loop, [(2, 7)]), (split_at_indices, [(6,)]),
    (split_at_listed_indices, [(5,)]),
    (gradient_per_axis, [(4, 5)]), (atleast_several, [(5,), (5,)]), (split_then_write, [(4,), ()]),
])
def test_calls_returning_several_arrays(f, shapes):
    import autograd
    import autograd.numpy as anp
    args = [_sample(s) for s in shapes]
    check_grad(f, *args)
    ag_f = types.FunctionType(f.__code__, {**f.__globals__, "np": anp}, f.__name__)
    if f not in (split_then_write, gradient_per_axis, atleast_several):  # autograd lacks these forms
        ours = zymo.gradient(Reverse, f, *args)
        for k in range(len(args)):
            np.testing.assert_allclose(ours[k], autograd.grad(ag_f, k)(*args), rtol=1e-9, atol=1e-9)


def test_split_into_unequal_sections_raises_numpys_error():
    with pytest.raises(ValueError, match="equal division"):
        zymo.gradient(Reverse, split_three, np.ones(7), 1.0)


# -- refusals: clear messages at lowering time, never a derivative -----------------------------------


def r_pad_linear_ramp(x):
    return np.sum(np.pad(x, 1, mode='linear_ramp'))


def r_convolve_2d(x):
    return np.sum(scipy.signal.convolve(x, x))


def r_diff_prepend(x):
    return np.sum(np.diff(x, prepend=0.0))


def r_einsum_operand_list(x):
    return np.sum(np.einsum(x, (0, 1), (1,)))


def r_ndarray_buffer(x):
    return np.sum(np.ndarray((2,), buffer=x) * x[:2])


def r_triu_vector(x):
    return np.sum(np.triu(x))


def r_ravel_fortran(x):
    return np.sum(np.ravel(x, 'F') * np.arange(6.0))


@pytest.mark.parametrize("f, shape, message", [
    (r_pad_linear_ramp, (4,), "linear_ramp"), (r_convolve_2d, (3, 3), "1-d arrays only"),
    (r_diff_prepend, (4,), "prepend"), (r_einsum_operand_list, (2, 2), "string constant"),
    (r_ndarray_buffer, (4,), "buffer="),
    (r_triu_vector, (4,), "vector"), (r_ravel_fortran, (2, 3), "C order only"),
])
def test_refused_with_a_reason(f, shape, message):
    with pytest.raises(ZymoError, match=message):
        zymo.gradient(Reverse, f, np.ones(shape))


# -- the Numba backend ----------------------------------------------------------------------------

M3 = np.array([[0.3, -0.45, 0.7], [0.2, 0.1, -0.3], [0.5, 0.9, 1.1]])
X3 = np.array([0.3, -0.45, 0.7])


def numba_arrays(x):
    m = M3 * x
    out = np.sum(np.cross(x, x * x + 1.0) ** 2) + np.sum(np.kron(m, np.outer(x, x)) ** 2)
    out += np.sum(np.convolve(x, x * x) ** 2) + np.sum(np.correlate(x, x[:2], 'valid') ** 3)
    out += np.sum(np.diff(x) ** 3) + np.sum(np.diff(m, axis=0) ** 3)
    a, b = np.split(m, (1,))
    out += np.sum(a ** 2) * np.sum(b) + np.sum(np.rollaxis(m, 1) * M3)
    out += np.sum(np.triu(m) ** 2) + np.sum(np.tril(m, -1) ** 3) + np.sum(np.atleast_2d(x) ** 3)
    z = np.ndarray((3,))
    z[:] = x * x
    out += np.sum(np.pad(x, (1, 2), 'edge') ** 3) + np.sum(np.pad(m, ((1, 0), (2, 1)), mode='reflect') ** 3)
    out += np.sum(np.pad(x, 4, mode='wrap') * np.pad(x, 4, 'symmetric')) + np.sum(np.pad(m, 1) ** 3)
    out += np.sum(np.gradient(x) ** 3) + np.sum(np.gradient(m, 0.5, axis=0, edge_order=2) ** 3)
    return out + np.sum(z * x) + np.sum(np.diagonal(m) ** 3) + np.sum(np.diag(m) * x)


@pytest.mark.slow  # about a minute of Numba compiles per mode on two cores
@pytest.mark.parametrize("mode", [Reverse, Forward], ids=["reverse", "forward"])
def test_numba_compiles_the_array_rules(mode, tmp_path, monkeypatch):
    """cross, kron, convolve/correlate, diff, split, rollaxis, triu/tril, atleast_2d, ndarray,
    pad, gradient, diagonal/diag: compiled with numba=True (no fallback), equal to the Python
    backend and to central differences."""
    pytest.importorskip("numba")
    import warnings

    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = zymo.gradient(mode, numba_arrays, X3, numba=True)[0]
    ref = zymo.gradient(mode, numba_arrays, X3, numba=False)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    g_fd = fd_grad(numba_arrays, [X3.copy()], [np.zeros(3)])[0]
    np.testing.assert_allclose(got, g_fd, rtol=1e-6, atol=1e-6)


def numba_sp_convolve(x):
    return np.sum(scipy.signal.convolve(x, x * x) ** 2)


def numba_einsum_product(x):
    return np.sum(np.einsum('i,j->ij', x, x) ** 2)


def numba_einsum_views(x):
    m = M3 * x
    v = np.einsum('ji', m)
    d = np.einsum('ii->i', m)
    out = np.sum(v * M3) + np.sum(d ** 3) + np.sum(np.einsum('ij->ij', m, optimize=True) ** 2)
    m[0, 1] = m[1, 0] * 2.0  # seen through the views
    return out + np.sum(v ** 3) + np.sum(d * x)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [Reverse, Forward], ids=["reverse", "forward"])
def test_numba_compiles_einsum_views(mode, tmp_path, monkeypatch):
    """np.einsum of one operand keeping every label is a strided view under Numba too."""
    pytest.importorskip("numba")
    import warnings

    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = zymo.gradient(mode, numba_einsum_views, X3, numba=True)[0]
    np.testing.assert_allclose(got, zymo.gradient(mode, numba_einsum_views, X3, numba=False)[0], rtol=1e-10)
    np.testing.assert_allclose(got, fd_grad(numba_einsum_views, [X3.copy()], [np.zeros(3)])[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("f", [numba_sp_convolve, numba_einsum_product], ids=lambda f: f.__name__)
def test_numba_refuses_what_it_cannot_compile(f, tmp_path, monkeypatch):
    """Numba compiles neither SciPy nor a product einsum: numba=True refuses, naming the line."""
    pytest.importorskip("numba")
    from zymo.codegen.numba.backend import ZymoNumbaError

    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    with pytest.raises(ZymoNumbaError, match="Numba cannot compile"):
        zymo.gradient(Reverse, f, X3, numba=True)


# -- second order --------------------------------------------------------------------------------------


def so_views(x):
    m = M3 * x
    return (np.sum(np.triu(m) ** 3) + np.sum(np.tril(m, -1) ** 3) + np.sum(np.rollaxis(m, 1) ** 3)
            + np.sum(np.atleast_2d(x) ** 3) + np.sum(np.einsum('ji', m) ** 3))


def test_hessian_of_views_and_triangles():
    x = X3.copy()
    h = zymo.hessian(so_views, x)
    fd = np.zeros((3, 3))
    for j in range(3):
        e = np.zeros(3)
        e[j] = 1e-5
        fd[:, j] = (zymo.gradient(Reverse, so_views, x + e)[0] - zymo.gradient(Reverse, so_views, x - e)[0]) / 2e-5
    np.testing.assert_allclose(h, fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("f", [lambda x: np.sum(np.kron(x, x) ** 2), lambda x: np.sum(np.diff(x) ** 3),
                               lambda x: np.sum(np.diagonal(M3 * x) ** 3)], ids=["kron", "diff", "diagonal"])
def test_hessian_refused_where_a_helper_has_no_tangent_rule(f):
    with pytest.raises(ZymoError, match="not supported yet"):
        zymo.hessian(f, X3.copy())


def hvd_split(m):
    a, b = np.hsplit(m, 2)
    c, d = np.vsplit(m, (1,))
    return np.sum(a * b) + np.sum(c ** 2) * np.sum(d)


def test_hsplit_vsplit():
    m = np.arange(8.0).reshape(2, 4) * 0.3
    check_grad(hvd_split, m)


def lse_sign(a, b):
    lse, sign = scipy.special.logsumexp(a, axis=1, b=b, return_sign=True)
    return np.sum(lse * sign) + np.sum(lse)


def test_logsumexp_with_return_sign():
    logsumexp = scipy.special.logsumexp
    a = np.array([[0.3, -1.0, 2.0], [0.5, 0.1, -0.2]])
    b = np.array([[1.0, -2.0, 0.5], [-1.0, 0.3, 0.2]])  # one positive and one negative sum
    check_grad(lse_sign, a, b)
    _, value = zymo.gradient(zymo.ReverseWithPrimal, lse_sign, a.copy(), b.copy())
    lse, sign = logsumexp(a, axis=1, b=b, return_sign=True)
    assert set(sign) == {-1.0, 1.0}
    assert value == pytest.approx(np.sum(lse * sign) + np.sum(lse))
