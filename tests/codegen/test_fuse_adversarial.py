"""Adversarial checks of the reverse-mode adjoint-code rewrites of 11f5802, da93586 (and 808a6f1):

- `codegen/fuse.py` with `Reverse.shadow_roots()`: `d += e1; ...; d += e2` merged into
  `d += e1 + e2`, and single-use temporaries moved past accumulations into shadows they do
  not read (`_merge_accumulations`, `_passes`, `_overlap`);
- `Reverse._top_remat`: a cheap top-level array temporary recomputed inside the adjoint
  expression instead of kept from the forward sweep;
- `ShadowFacts.zero` with `Reverse.zero_shadows()` (808a6f1): a `Const` buffer's
  internal shadow filled by one `d += e` and zeroed by `d[...] = 0.0` is read as `e`.

Every case asserts numbers: reverse mode against central differences and/or forward mode
(which none of these rewrites touch) by the dot-product identity, with fixed seeds. Aliased
arguments (one array passed twice, overlapping views of one buffer) get their shadows as the
same views of one shadow buffer, and the oracle is the function of the buffer.
The cases that failed at 808a6f1 are kept (at the end) as regression tests.
"""
from __future__ import annotations

import importlib.util
import random
import re
import textwrap
import zlib

import numpy as np
import pytest
from helpers import fd_grad, zymo_grad
from test_fuse import buffer_products

import zymo
from zymo import Active, BatchDuplicated, Const, Duplicated, Forward, Reverse, ReverseSplitWithPrimal
from zymo.testing import check_grad

# -- oracles for aliased arguments -------------------------------------------------------------


def _alias_reverse(f, split, base, cot, numba=None):
    """zymo's reverse mode for `f(*split(base))`, shadows `split(dbase)` with dbase = cot:
    the gradient with respect to the buffer (of ret + <cot, final buffer>)."""
    b, db = base.copy(), cot.copy()
    parts, dparts = split(b), split(db)
    zymo.autodiff(Reverse, f, Active, *[Duplicated(p, d) for p, d in zip(parts, dparts)], numba=numba)
    return db


def _alias_forward(f, split, base, tan):
    """Forward mode with tangents `split(tan)`: (tangent of the return, tangent of the buffer)."""
    b, tb = base.copy(), tan.copy()
    parts, tparts = split(b), split(tb)
    res = zymo.autodiff(Forward, f, Duplicated, *[Duplicated(p, t) for p, t in zip(parts, tparts)])
    return float(np.sum(res[0])), tb


def alias_check(f, split, base, rng_seed=0, rtol=1e-6, fd=True):
    """Reverse mode on aliased arguments against central differences of the buffer function
    and against forward mode (dot-product identity)."""
    rng = np.random.default_rng(rng_seed)
    cot, tan = rng.standard_normal(base.shape), rng.standard_normal(base.shape)
    g = _alias_reverse(f, split, base, cot)
    if fd:
        g_fd = fd_grad(lambda b: f(*split(b)), [base.copy()], [cot.copy()])[0]
        scale = max(1.0, float(np.abs(g_fd).max()))
        np.testing.assert_allclose(g, g_fd, rtol=rtol, atol=1e-6 * scale)
    dret, tb = _alias_forward(f, split, base, tan)
    lhs, rhs = dret + float(np.sum(cot * tb)), float(np.sum(tan * g))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-9, atol=1e-9 * max(1.0, abs(lhs)))
    return g


SAME = lambda b: (b, b)  # noqa: E731  one array passed twice
OVERLAP = lambda b: (b[0:5], b[1:6])  # noqa: E731  overlapping views of one buffer


# -- merged accumulations across views, stores and broadcasting --------------------------------


def views_of_one_argument(x, y):
    a = x[0:3]
    b = x[1:4]
    t = a * y[0:3]
    u = b * b
    return np.sum(t * u[0:3]) + np.sum(np.sin(a) * b)


def overlapping_stores(x, out):
    out[0:3] = x[0:3] * 2.0
    out[1:4] += x[1:4] * x[1:4]
    z = out[0:3] * x[2:5]
    out[2:5] = z
    return np.sum(out * out)


def temporary_then_argument_overwritten(x, y):
    t = x * y
    s = np.sum(np.sin(t))
    x[...] = y * 3.0
    return s + np.sum(x * y)


def chain_then_in_place(x, y):
    t = x + y
    u = t * 2.0
    v = u - x
    x *= 2.0
    return np.sum(np.exp(v)) + np.sum(x)


def out_buffer_read_then_written(x, buf):
    np.multiply(x, 2.0, out=buf)
    t = buf + x
    buf[0] = 1.0
    return np.sum(t * t) + np.sum(buf * x)


def dot_into_buffer_twice(A, x, buf):
    np.dot(A, x, out=buf)
    t = buf * x
    r = np.sum(np.sin(t))
    np.dot(A, t, out=buf)
    return r + np.sum(buf * buf)


def outer_broadcast(x, y):
    t = x[:, None] * y[None, :]
    u = t - x[:, None]
    return np.sum(u * u) + np.sum(np.cos(t))


def element_stores_between(x, out):
    t = x * 2.0
    out[...] = t
    out[0] = out[1] * 3.0
    u = x / 3.0
    out += u
    return np.sum(out * x)


def broadcast_3x1_1x4(x, y, out):
    a = x * y
    out[...] = a * 1.5 - x * 0.5 + y * y
    out[0] += np.sin(a[0]) * y[0]
    return np.sum(out * out) + np.sum(np.exp(0.1 * a) * x)


def shifted_views_of_output(x, out):
    u = x[0:4]
    v = x[1:5]
    w = x[2:6]
    out[0:4] = 1.5 * u * u / v - 0.5 * u
    out[1:5] += 0.3 * w * v
    out[2:6] = out[2:6] * 0.5 + u * w
    return np.sum(out * out)


def mod_floordiv_neg(x, y):
    t = x % 1.7
    u = -y
    w = x // 0.7
    return np.sum(np.sin(t) * u) + np.sum(np.cos(w * y))


def masked_temporary(x, y):
    t = x * y
    m = np.where(x > 0, t, 0.0)
    return np.sum(m * m)


def index_arithmetic(x, i):
    j = i + 1
    t = x * 2.0
    return np.sum(t[j] * x[i])


def three_op_chain_broadcast(x, y):
    t = x[:, None] * y[None, :]
    u = t / (1.0 + y[None, :] ** 2)
    v = u - x[:, None]
    return np.sum(np.exp(0.1 * v))


def temporary_read_twice_in_chain(x, y):
    a = x * y
    b = a + 1.0
    c = b * b
    d = c - a
    return np.sum(np.sin(d))


def bool_and_int_arrays(x, k, m):
    t = x * k          # int array operand
    u = t * m          # bool array operand
    w = (k + 1) * x
    return np.sum(np.sin(u) * w)


def view_written_through_other_view(x, y):
    a = x[0:4]
    t = a * y          # operand: a view of x
    s = np.sum(np.tanh(t))
    b = x[2:6]
    b[...] = y * 0.5   # overwrites a's last two elements through another view
    return s + np.sum(a * b)


def in_place_on_temporary_between_uses(x, y):
    t = x * y
    r = np.sum(np.sin(t))
    t += x
    t *= y
    return r + np.sum(t * t)


def seed_through_float_adjoints(x, y):
    s = np.sum(x * y)
    t = x * s
    u = y + t
    return np.sum(u * u) + s * s


_RNG = np.random.default_rng(20261123)

CASES = [
    (views_of_one_argument, lambda r: [r.standard_normal(5), r.standard_normal(5)], ()),
    (overlapping_stores, lambda r: [r.standard_normal(5), np.zeros(5)], ()),
    (temporary_then_argument_overwritten, lambda r: [r.standard_normal(4), r.standard_normal(4)], ()),
    (chain_then_in_place, lambda r: [r.standard_normal(4), r.standard_normal(4)], ()),
    (out_buffer_read_then_written, lambda r: [r.standard_normal(4), np.zeros(4)], ()),
    (dot_into_buffer_twice, lambda r: [r.standard_normal((4, 4)), r.standard_normal(4), np.zeros(4)], ()),
    (outer_broadcast, lambda r: [r.standard_normal(3), r.standard_normal(4)], ()),
    (element_stores_between, lambda r: [r.standard_normal(4), np.zeros(4)], ()),
    (broadcast_3x1_1x4, lambda r: [r.standard_normal((3, 1)), r.standard_normal((1, 4)), np.zeros((3, 4))], ()),
    (shifted_views_of_output, lambda r: [r.random(6) + 0.5, np.zeros(6)], ()),
    (mod_floordiv_neg, lambda r: [3.0 * r.standard_normal(5), r.standard_normal(5)], ()),
    (masked_temporary, lambda r: [r.standard_normal(5), r.standard_normal(5)], ()),
    (index_arithmetic, lambda r: [r.standard_normal(6), np.array([0, 2, 3])], ()),
    (three_op_chain_broadcast, lambda r: [r.standard_normal(3), r.standard_normal(4)], ()),
    (temporary_read_twice_in_chain, lambda r: [r.standard_normal(4), r.standard_normal(4)], ()),
    (bool_and_int_arrays, lambda r: [r.standard_normal(5), np.array([1, -2, 3, 0, 2]),
                                     np.array([True, False, True, True, False])], ()),
    (view_written_through_other_view, lambda r: [r.standard_normal(6), r.standard_normal(4)], ()),
    (in_place_on_temporary_between_uses, lambda r: [r.standard_normal(4), r.standard_normal(4)], ()),
    (seed_through_float_adjoints, lambda r: [r.standard_normal(4), r.standard_normal(4)], ()),
]


@pytest.mark.parametrize("f,make,const", CASES, ids=[c[0].__name__ for c in CASES])
def test_against_finite_differences_and_forward_mode(f, make, const):
    check_grad(f, *make(np.random.default_rng(zlib.crc32(f.__name__.encode()))), const=const)


def test_the_rewrites_fire_in_these_cases():
    """The cases above exercise merged accumulations and recomputed temporaries (and the one
    whose operand is overwritten through another view is not recomputed)."""
    r = np.random.default_rng(0)
    x, y = r.standard_normal(4), r.standard_normal(4)
    adj = zymo.generated_code(Reverse, seed_through_float_adjoints, Active, Duplicated(x, np.zeros(4)),
                              Duplicated(y, np.zeros(4))).split("# adjoint sweep")[1]
    assert re.search(r"\n    dx \+= [^\n]+ \+ [^\n]+\n", adj), adj  # two terms, one accumulation
    k, m = np.array([1, -2, 3, 0]), np.array([True, False, True, True])
    # recomputed (int and bool operands) where the recomputation fuses into the adjoint's loop:
    # under Numba; the Python backend keeps the temporary instead of passing over arrays again
    fwd, adj = zymo.generated_code(Reverse, bool_and_int_arrays, Active, Duplicated(x, np.zeros(4)), Const(k),
                                   Const(m), numba=True).split("# adjoint sweep")
    assert "np.cos(x * k * m)" in adj and "(k + 1) *" in adj, adj
    x6 = r.standard_normal(6)
    fwd, adj = zymo.generated_code(Reverse, view_written_through_other_view, Active, Duplicated(x6, np.zeros(6)),
                                   Duplicated(y, np.zeros(4))).split("# adjoint sweep")
    assert "_saved_x" in adj and "* y)" not in adj, adj  # `a * y`'s operand is overwritten: not recomputed


# -- aliased arguments -------------------------------------------------------------------------


def al_store_after_read(x, y):
    t = x * 2.0
    y[0] = 3.0
    return np.sum(t * t)


def al_overwrite_with_product(x, y):
    t = x * y
    y[...] = t + 1.0
    return np.sum(np.sin(x) * y)


def al_partial_zero(x, y):
    a = x * x
    b = y * 3.0
    y[1:3] = 0.0
    return np.sum(a * b)


def al_in_place_add(x, y):
    s = np.sum(x * x)
    y += x
    s2 = np.sum(y * y)
    return s + s2


def al_exp_back_into_x(x, y):
    t = x + y
    u = np.exp(t)
    x[...] = u
    return np.sum(y * u)


def al_square_into_y(x, y):
    y[...] = x * x
    return np.sum(x * y) + np.sum(y)


def al_chain_into_slice(x, y):
    u = x * 2.0 + y
    v = u - x
    y[0:2] = v[0:2]
    return np.sum(v * v)


def al_scale_in_place(x, y):
    t = x * 3.0
    s = np.sum(np.sin(t))
    y *= 0.5
    return s + np.sum(y * x)


def al_out_is_input(u, out):
    out[...] = 1.5 * u * u - 0.5 * u
    out[1:] += u[:-1] * 2.0
    return np.sum(out)


ALIAS = [al_store_after_read, al_overwrite_with_product, al_partial_zero, al_in_place_add, al_exp_back_into_x,
         al_square_into_y, al_chain_into_slice, al_scale_in_place, al_out_is_input]


@pytest.mark.parametrize("how", ["same", "overlap"])
@pytest.mark.parametrize("f", ALIAS, ids=[f.__name__ for f in ALIAS])
def test_aliased_arguments(f, how):
    r = np.random.default_rng(len(f.__name__) + (how == "same"))
    if how == "same":
        alias_check(f, SAME, r.standard_normal(5))
    else:
        alias_check(f, OVERLAP, r.standard_normal(6))


def test_aliasing_blocks_the_merge_it_must_block():
    """Under aliasing `dx` and `dy` are one memory: `dx += ...; dy += ...; dx += ...` keeps
    its order relative to reads of `dy` (and the numbers are right, above)."""
    b, db = np.arange(6.0), np.zeros(6)  # one shadow buffer, overlapping as the primals do
    src = zymo.generated_code(Reverse, al_chain_into_slice, Active,
                              Duplicated(b[0:5], db[0:5]), Duplicated(b[1:6], db[1:6]))
    adj = src.split("# adjoint sweep")[1]
    assert adj.count("dx +=") == 2, adj


# -- Const buffers (internal shadows), output buffers, objects -----------------------------


def buffer_then_sum(x, A, buf):
    np.dot(A, x, out=buf)
    t = buf + x
    return np.sum(np.sin(t))


def buffer_add_scalar_product(x, s, buf):
    np.subtract(x, s, out=buf)
    v = np.sum(buf * x)
    return 3.0 * v


def buffer_written_twice(x, A, buf):
    np.dot(A, x, out=buf)
    s = np.sum(np.sin(buf))
    np.dot(x, A, out=buf)
    return s + np.sum(buf * buf * x)


@pytest.mark.parametrize("f,make,const", [
    (buffer_products, lambda r: [r.random(4), r.random((4, 4)), np.zeros(4), np.zeros(4)], (1, 2, 3)),
    (buffer_then_sum, lambda r: [r.standard_normal(4), r.standard_normal((4, 4)), np.zeros(4)], (1, 2)),
    (buffer_add_scalar_product, lambda r: [r.standard_normal(4), 0.5, np.zeros(4)], (2,)),
    (buffer_written_twice, lambda r: [r.random(4), r.random((4, 4)), np.zeros(4)], (1, 2)),
], ids=["products", "then_sum", "subtract_scalar", "written_twice"])
def test_const_buffers(f, make, const):
    r = np.random.default_rng(3)
    args = make(r)
    check_grad(f, *args, const=const)
    again = zymo_grad(f, make(np.random.default_rng(3)), const=const)  # replayed: internal shadows re-zeroed
    np.testing.assert_allclose(again[0], zymo_grad(f, args, const=const)[0], rtol=0, atol=0)


def output_buffer_only(u, v, out):
    out[...] = 1.5 * u * u / v - 0.5 * u
    out[1:] += u[:-1] * v[1:]


def output_buffer_views(x, out):
    a = x[0:3]
    b = x[1:4]
    out[0:3] = a * b
    out[1:4] += a * 2.0 - b
    out[0] = out[3] * a[1]


def test_functions_returning_through_output_buffers():
    r = np.random.default_rng(4)
    check_grad(output_buffer_only, r.random(5) + 0.5, r.random(5) + 0.5, np.zeros(5))
    check_grad(output_buffer_views, r.standard_normal(4), np.zeros(4))


class _State:
    def __init__(self, n, seed):
        r = np.random.default_rng(seed)
        self.x = r.standard_normal(n)
        self.buf = np.zeros(n)
        self.t = 0.3


def object_step(s, dt):
    u = s.x[0:3]
    v = s.x[1:4]
    np.multiply(u, v, out=s.buf[0:3])
    a = u * 2.0 + v
    s.t += dt * np.sum(a * a)
    s.x[2] = s.t * 0.5
    s.buf[3] = s.x[0] * s.t
    s.t *= 1.5
    return np.sum(s.buf * s.x) + s.t ** 2


def list_of_arrays(lst, w):
    a = lst[0]
    b = lst[1]
    t = a * w
    b += t
    u = b * 3.0 - a
    a[...] = u * 0.5
    return np.sum(a * b) + np.sum(np.sin(t))


def test_objects_and_lists():
    from data_helpers import check_data

    check_data(object_step, lambda: [_State(5, 1), 0.1])
    r = np.random.default_rng(2)
    a0, b0 = r.standard_normal(4), r.standard_normal(4)
    check_data(list_of_arrays, lambda: [[a0.copy(), b0.copy()], 0.7])
    # one array twice in the list: its shadow twice in the shadow list
    cot = r.standard_normal(4)
    a, da = a0.copy(), cot.copy()
    zymo.autodiff(Reverse, list_of_arrays, Active, Duplicated([a, a], [da, da]), Active(0.7))
    g = fd_grad(lambda z: list_of_arrays([z, z], 0.7), [a0.copy()], [cot.copy()])[0]
    np.testing.assert_allclose(da, g, rtol=1e-6, atol=1e-6)


# -- batch, split, second order ---------------------------------------------------------------


def batch_views(x, out):
    u = x[0:4]
    v = x[1:5]
    out[0:4] = 1.5 * u * u / (1.0 + v * v) - 0.5 * u
    out[1:5] += 0.25 * v * u
    out[4] = out[0] * 2.0
    return np.sum(out * out) + np.sum(np.sin(u * v))


def batch_chain(x):
    u = x[0:4]
    v = x[1:5]
    a = 1.5 * u * u / (1.0 + v * v) - 0.5 * u
    b = 0.3 * v + u * 2.0
    return np.sum(a * a) + np.sum(np.exp(b * 0.1) * u) + np.sum(u * v * x[2:6])


@pytest.mark.parametrize("f,make", [(batch_views, lambda x: [x.copy(), np.zeros(5)]),
                                    (batch_chain, lambda x: [x.copy()])], ids=["views", "chain"])
def test_batch_lanes(f, make):
    r = np.random.default_rng(5)
    x0 = r.standard_normal(6)
    W = 3
    cots = [[r.standard_normal(a.shape) for a in make(x0)] for _ in range(W)]
    args = make(x0)
    shs = [[c.copy() for c in lane] for lane in cots]
    zymo.autodiff(Reverse, f, Active, *[BatchDuplicated(args[i], tuple(shs[k][i] for k in range(W)))
                                         for i in range(len(args))])
    for k in range(W):
        g = fd_grad(f, make(x0), cots[k])
        for i in range(len(args)):
            np.testing.assert_allclose(shs[k][i], g[i], rtol=1e-5, atol=1e-6)


def test_batch_lanes_with_one_array_passed_twice():
    r = np.random.default_rng(6)
    base = r.standard_normal(4)
    cots = [r.standard_normal(4) for _ in range(2)]

    def f(x, y):
        t = x * 2.0
        y[1:3] = t[0:2] * t[1:3]
        u = x + y
        return np.sum(u * u)

    b, shs = base.copy(), tuple(c.copy() for c in cots)
    zymo.autodiff(Reverse, f, Active, BatchDuplicated(b, shs), BatchDuplicated(b, shs))
    for k in range(2):
        g = fd_grad(lambda z: f(z, z), [base.copy()], [cots[k]])[0]
        np.testing.assert_allclose(shs[k], g, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("f,make", [(batch_views, lambda x: [x.copy(), np.zeros(5)]),
                                    (output_buffer_views, lambda x: [x[:4].copy(), np.zeros(4)])],
                         ids=["views", "output_buffer"])
def test_split_mode(f, make):
    r = np.random.default_rng(7)
    x0 = r.standard_normal(6)
    ret = Active if f is batch_views else Const
    a = make(x0)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, f, ret, *[Duplicated(p, np.zeros_like(p)) for p in a])
    cots = [r.standard_normal(p.shape) for p in a]
    tape = None
    for _ in range(2):  # the second call reuses the tape's buffers
        a = make(x0)
        sh = [c.copy() for c in cots]
        ann = [Duplicated(p, s) for p, s in zip(a, sh)]
        tape, _y = fwd(*ann, tape=tape)
        rev(*ann, *((1.0,) if ret is Active else ()), tape)
        g = fd_grad(f, make(x0), cots, seed=1.0 if ret is Active else 0.0)
        for i in range(len(a)):
            np.testing.assert_allclose(sh[i], g[i], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_hessian_and_hvp():
    r = np.random.default_rng(8)
    x = r.standard_normal(6)

    def fwd_grad(z):
        return zymo.gradient(Forward, batch_chain, z)[0]

    eps = 1e-5
    H_fd = np.stack([(fwd_grad(x + eps * e) - fwd_grad(x - eps * e)) / (2 * eps) for e in np.eye(6)], axis=1)
    np.testing.assert_allclose(zymo.hessian(batch_chain, x.copy()), H_fd, rtol=1e-5, atol=1e-6)
    v = r.standard_normal(6)
    np.testing.assert_allclose(zymo.hvp(batch_chain, x.copy(), v), H_fd @ v, rtol=1e-5, atol=1e-6)


def test_hessian_through_const_buffers():
    r = np.random.default_rng(9)
    x, A = r.random(4), r.random((4, 4))
    H = zymo.hessian(buffer_products, x.copy(), A, np.zeros(4), np.zeros(4))

    def fwd_grad(z):
        return zymo.gradient(Forward, lambda q: buffer_products(q, A, np.zeros(4), np.zeros(4)), z)[0]

    eps = 1e-5
    H_fd = np.stack([(fwd_grad(x + eps * e) - fwd_grad(x - eps * e)) / (2 * eps) for e in np.eye(4)], axis=1)
    np.testing.assert_allclose(H, H_fd, rtol=1e-5, atol=1e-7)


# -- Numba against Python (few cases: each compile costs seconds) --------------------------


@pytest.mark.slow
def test_numba_views_and_broadcast():
    pytest.importorskip("numba")
    r = np.random.default_rng(10)
    for f, args in [(shifted_views_of_output, [r.random(6) + 0.5, np.zeros(6)]),
                    (broadcast_3x1_1x4, [r.standard_normal((3, 1)), r.standard_normal((1, 4)), np.zeros((3, 4))])]:
        cots = [r.standard_normal(a.shape) for a in args]
        g_py = zymo_grad(f, args, cots, numba=False)
        g_nb = zymo_grad(f, args, cots, numba=True)
        g_fd = fd_grad(f, args, cots)
        for p, n, e in zip(g_py, g_nb, g_fd):
            np.testing.assert_allclose(p, e, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(n, p, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_numba_aliased_views():
    pytest.importorskip("numba")
    r = np.random.default_rng(11)
    base, cot = r.standard_normal(6), r.standard_normal(6)
    g_py = _alias_reverse(al_chain_into_slice, OVERLAP, base, cot, numba=False)
    g_nb = _alias_reverse(al_chain_into_slice, OVERLAP, base, cot, numba=True)
    g_fd = fd_grad(lambda b: al_chain_into_slice(*OVERLAP(b)), [base.copy()], [cot.copy()])[0]
    np.testing.assert_allclose(g_py, g_fd, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(g_nb, g_py, rtol=1e-12, atol=1e-12)


# -- random straight-line programs: views, stores, in-place ops, out= -------------------------


def _random_program(seed: int) -> str:
    R = random.Random(seed)
    arrays, views, temps, lines = ["a0", "a1", "a2"], [], [], []
    count = [0]

    def new(p):
        count[0] += 1
        return f"{p}{count[0]}"

    def operand():
        c = R.random()
        if c < 0.3 and views:
            return R.choice(views)
        if c < 0.6 and temps:
            return R.choice(temps)
        s = R.randint(0, 2)
        return f"{R.choice(arrays)}[{s}:{s + 4}]"

    def expr(depth=0):
        if depth > 1 or R.random() < 0.3:
            return operand()
        op = R.choice(["+", "-", "*", "/", "f", "s"])
        if op == "f":
            return f"np.{R.choice(['sin', 'cos', 'tanh'])}({expr(depth + 1)})"
        if op == "s":
            return f"{R.choice(['2.0', '0.5', '1.5'])} * {expr(depth + 1)}"
        if op == "/":
            o = operand()
            return f"({expr(depth + 1)} / (1.5 + {o} * {o}))"
        return f"({expr(depth + 1)} {op} {expr(depth + 1)})"

    def target():
        return R.choice(views + temps) if views or temps else "a0[1:5]"

    for _ in range(8):
        c = R.random()
        s = R.randint(0, 2)
        if c < 0.15:
            v = new("v")
            lines.append(f"{v} = {R.choice(arrays)}[{s}:{s + 4}]")
            views.append(v)
        elif c < 0.45:
            t = new("t")
            lines.append(f"{t} = {expr()}")
            temps.append(t)
        elif c < 0.55:
            lines.append(f"{target()} += {expr()}")
        elif c < 0.62:
            lines.append(f"{target()} *= {expr()}")
        elif c < 0.75:
            lines.append(f"{R.choice(arrays)}[{s}:{s + 4}] = {expr()}")
        elif c < 0.82:
            src = R.choice(views + temps) if views or temps else "a1"
            lines.append(f"{R.choice(arrays)}[{R.randint(0, 5)}] = {src}[{R.randint(0, 3)}] * 1.5")
        elif c < 0.9:
            lines.append(f"np.multiply({expr()}, {expr()}, out={target()})" if R.random() < 0.5
                         else f"np.sin({expr()}, out={target()})")
        else:
            t = new("t")
            lines.append(f"{t} = np.sum({expr()}) * {expr()}")
            temps.append(t)
    lines.append(f"return np.sum({expr()} * {operand()}) + np.sum({expr()} * {operand()})")
    return f"def prog{seed}(a0, a1, a2):\n" + textwrap.indent("\n".join(lines), "    ") + "\n"


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """Thirty random programs that run (zymo reads their source from a file)."""
    d = tmp_path_factory.mktemp("programs")
    out = []
    seed = 0
    while len(out) < 30:
        src = _random_program(seed)
        path = d / f"prog{seed}.py"
        path.write_text("import numpy as np\n" + src)
        spec = importlib.util.spec_from_file_location(f"zymo_adv_prog{seed}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        f = getattr(mod, f"prog{seed}")
        r = np.random.default_rng(seed)
        try:
            with np.errstate(all="raise"):
                f(*[r.standard_normal(6) for _ in range(3)])
        except Exception:
            seed += 1
            continue
        out.append((seed, f, src))
        seed += 1
    return out


_SPLITS = {
    "disjoint": (18, lambda b: (b[0:6], b[6:12], b[12:18]), lambda f: f),
    "same": (12, lambda b: (b[0:6], b[6:12]), lambda f: (lambda p, q: f(p, p, q))),
    "overlap": (14, lambda b: (b[0:6], b[2:8], b[8:14]), lambda f: f),
    "overlap3": (9, lambda b: (b[0:6], b[3:9], b[1:7]), lambda f: f),
}


@pytest.mark.slow
@pytest.mark.parametrize("how", list(_SPLITS))
def test_random_programs_reverse_equals_forward(programs, how):
    """<J t, c> == <t, J^T c> for every program, reverse mode under test, forward mode as the
    reference (the fused accumulations and recomputed temporaries exist only in reverse mode)."""
    n, split, wrap = _SPLITS[how]
    for seed, f, src in programs:
        g = wrap(f)
        r = np.random.default_rng(1000 + seed)
        base = r.standard_normal(n)
        for k in range(2):
            cot, tan = r.standard_normal(n), r.standard_normal(n)
            rev = _alias_reverse(g, split, base, cot)
            dret, tb = _alias_forward(g, split, base, tan)
            lhs, rhs = dret + float(np.sum(cot * tb)), float(np.sum(tan * rev))
            assert np.isclose(lhs, rhs, rtol=1e-8, atol=1e-8), f"{how}, direction {k}:\n{src}"


def test_random_programs_against_finite_differences(programs):
    for seed, f, _src in programs[:10]:
        r = np.random.default_rng(seed)
        args = [r.standard_normal(6) for _ in range(3)]
        check_grad(f, *args, rtol=1e-4, atol=1e-4)


# -- cases that failed at 808a6f1 (fixed in the working tree since: now regression tests) ------


def zero_shadow_scalar_broadcast(x, s, buf):
    """`buf` is Const (an internal shadow, zeros at entry). `t = buf + x` is read only by
    `np.sum`, so its adjoint is one number (`Reverse._uniform`): `dbuf += dsum` broadcasts a
    float into `dbuf`. At 808a6f1 `_pass_zero_shadow` then read `dsum` wherever `dbuf` was
    read, so the adjoint of `np.add(x, s, out=buf)` with respect to the scalar `s`,
    `_rt.unbroadcast(dbuf, s)` (a sum over 4 elements), became `_rt.unbroadcast(dsum, s)`
    (one element): ds = 2.0 instead of 8.0, silently."""
    np.add(x, s, out=buf)
    return 2.0 * np.sum(buf + x)


def test_zero_shadow_filled_by_a_float_adjoint():
    x = np.random.default_rng(12).standard_normal(4)
    check_grad(zero_shadow_scalar_broadcast, x, 0.5, np.zeros(4), const=(2,))
    g = zymo_grad(zero_shadow_scalar_broadcast, [x, 0.5, np.zeros(4)], const=(2,))
    assert g[1] == pytest.approx(8.0)  # d/ds 2 * sum(x + s + x) over 4 elements
    src = zymo.generated_code(Reverse, zero_shadow_scalar_broadcast, Active, Duplicated(x, np.zeros(4)),
                              Active(0.5), Const(np.zeros(4)))
    assert "_rt.unbroadcast(dsum, s)" not in src


def zero_shadow_product(x, A, buf):
    """The same pass-through into a product adjoint: at 808a6f1 `_rt.dot_vjp_b(dsum, A, x)`,
    a float where the (4,) array `dbuf` was, and NumPy raised in `matmul` ("Input operand 1
    does not have enough dimensions")."""
    np.dot(A, x, out=buf)
    return 2.0 * np.sum(buf + x)


def zero_shadow_product_sin(x, A, buf):
    np.dot(A, x, out=buf)
    s = np.sum(buf - x)
    return np.sin(s)


@pytest.mark.parametrize("f", [zero_shadow_product, zero_shadow_product_sin])
def test_zero_shadow_into_a_product_adjoint(f):
    r = np.random.default_rng(13)
    check_grad(f, r.standard_normal(4), r.standard_normal((4, 4)), np.zeros(4), const=(1, 2))


def test_zero_shadow_float_adjoint_in_batch_mode():
    r = np.random.default_rng(16)
    x = r.standard_normal(4)
    cots = [r.standard_normal(4) for _ in range(2)]
    shs = tuple(c.copy() for c in cots)
    (dx, ds, _), = zymo.autodiff(Reverse, zero_shadow_scalar_broadcast, Active, BatchDuplicated(x.copy(), shs),
                                 Active(0.5), Const(np.zeros(4)))
    for k in range(2):
        g = fd_grad(zero_shadow_scalar_broadcast, [x, 0.5, np.zeros(4)], [cots[k], None, None])
        np.testing.assert_allclose(shs[k], g[0], rtol=1e-6, atol=1e-6)
        assert ds[k] == pytest.approx(g[1], rel=1e-6)


def scalar_into_row(out, x):
    """Older than these commits (the same at 41a925c), fixed in the working tree since:
    `out[1] = s` with a 2-d `out` stores a float into a row; the adjoint `dsum_1 += dout[1]`
    (folded to `dsum_1 = dout[1]`) bound a VIEW of the row, which `dout[1] = 0.0` then
    zeroed, and no sum over the row was taken (reverse gradient of x off by ~44)."""
    s = np.sum(x)
    out[1] = s
    out[0] = out[1] * 3.0
    return np.sum(out * out)


def scalar_into_row_float(out, s):
    out[0] = s * 2.0
    return np.sum(out * out)


def test_float_stored_into_a_row():
    r = np.random.default_rng(14)
    check_grad(scalar_into_row, r.standard_normal((3, 2)), r.standard_normal(2))
    check_grad(scalar_into_row_float, r.standard_normal((3, 2)), 0.7)
