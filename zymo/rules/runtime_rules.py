"""Rules for the runtime helpers generated code calls (`_rt.*`): second order.

Contract: forward mode over a reverse-mode program (`zymo.hvp`) reads zymo's own
generated source, which calls the helpers of `zymo.runtime`. Each helper is a
primitive with a rule here, so the frontend treats it as one op instead of
inlining its body: the adjoint-shaping helpers are linear in the adjoint they
reshape (`unbroadcast`, `expand_reduced`, `as_shape`), the matrix-product
adjoints and `sum_product` are bilinear, `grow` and `grow_stack` copy, and the helpers that only inspect values
(`reduced_count`, `extreme_mask`, `is_view`, `clip_inside`, `int_pow` and `negate` of ints) have zero derivative by rule.

The helpers of issue 7's rules follow (linear algebra, norm, cumsum, var/std, joins):
each has a tangent rule for every argument a derivative flows through, and an adjoint
(for the rule tests); multi-statement derivatives live in `runtime/second.py`. Helpers
without a rule here (eigh, qr, svd, lstsq, cumprod, prod, tile, repeat, diagonal,
einsum, SciPy's) make `zymo.hvp` refuse the function (`derivatives.py`), so second
order never inlines a helper's body by accident.
"""
from __future__ import annotations

import numpy as np

from .. import runtime as _rt
from .registry import BOTH, Form, Rule

# their cases: small functions of the helper, the inputs drawn anywhere in [-2, 2]
_ADD = "numpy.add"
_RESHAPE = tuple(Form("rt2", s, BOTH, dom=_ADD) for s in (((4,), (3, 4)), ((3, 4), (3, 4)), ((), (5,))))
_PRODUCT = tuple(Form("rt_matrix", s, BOTH, dom=_ADD)
                 for s in (((3, 2), (3, 4), (4, 2)), ((3,), (3, 4), (4,)), ((2,), (4,), (4, 2)), ((), (4,), (4,))))

# Helpers whose result may be their adjoint argument itself or a read-only broadcast view of
# it, yet are flagged as fresh memory: neither `view` (a broadcast view's adjoints must add
# up) nor `maybe_view` (the argument may be a number) describes them, and generated code
# consumes their result at once (`dx += _rt.unbroadcast(g, x)`), never after writing to
# the argument. tests/rules/test_views_shapes.py checks every other rule's flags.
ALIASING_HELPERS = ("zymo.rt.unbroadcast", "zymo.rt.as_shape", "zymo.rt.expand_reduced")


class unbroadcast(Rule, key="zymo.rt.unbroadcast", fn=_rt.unbroadcast, call="_rt.unbroadcast", cases=tuple(
        Form("rt2", s, BOTH, dom=_ADD) for s in (((3, 4), (4,)), ((3, 4), (3, 1)), ((3, 4), (3, 4)), ((5,), ()),
                                                 ((), ())))):
    """`g` itself where it has `x`'s shape, else fresh sums or a broadcast view: not fresh memory,
    but flagged plain (see ALIASING_HELPERS)."""
    def jvp_g(t, ans, g, x): return _rt.unbroadcast(t, x)
    def vjp_g(gb, ans, g, x): return gb + np.zeros_like(g)


class sum_product(Rule, key="zymo.rt.sum_product", fn=_rt.sum_product, call="_rt.sum_product", cases=tuple(
        Form("rt2", s, BOTH, dom=_ADD) for s in (((3, 4), (3, 4)), ((4,), (3, 4)), ((), (5,))))):
    """`np.sum(a * b)` (the adjoint of a number scaling an array, `transform/reverse/adjoint.py`):
    bilinear."""
    def jvp_a(t, ans, a, b): return _rt.sum_product(t, b)
    def jvp_b(t, ans, a, b): return _rt.sum_product(a, t)
    def vjp_a(g, ans, a, b): return _rt.unbroadcast(g * np.broadcast_to(b, np.broadcast_shapes(np.shape(a), np.shape(b))), a)
    def vjp_b(g, ans, a, b): return _rt.unbroadcast(g * np.broadcast_to(a, np.broadcast_shapes(np.shape(a), np.shape(b))), b)


class as_shape(Rule, key="zymo.rt.as_shape", fn=_rt.as_shape, call="_rt.as_shape", cases=_RESHAPE):
    """`t` itself where it already has `y`'s shape and dtype, else a fresh copy (see ALIASING_HELPERS)."""
    def jvp_t(tt, ans, t, y): return _rt.as_shape(tt, y)
    def vjp_t(gb, ans, t, y): return _rt.unbroadcast(gb, t)


class as_tangent(Rule, key="zymo.rt.as_tangent", fn=_rt.as_tangent, call="_rt.as_tangent", cases=_RESHAPE):
    def jvp_t(tt, ans, t, y): return _rt.as_tangent(tt, y)
    def vjp_t(gb, ans, t, y): return _rt.unbroadcast(gb, t)


class expand_reduced(Rule, key="zymo.rt.expand_reduced", fn=_rt.expand_reduced, call="_rt.expand_reduced", cases=(
        Form("rt_expand", ((3,), (3, 4)), BOTH, dom=_ADD, tag=",axis1", params=(1, False)),
        Form("rt_expand", ((3, 1), (3, 4)), BOTH, dom=_ADD, tag=",keepdims", params=(1, True)),
        Form("rt_expand", ((), (3, 4)), BOTH, dom=_ADD, tag=",all", params=(None, False)))):
    """A read-only broadcast view of `g` (see ALIASING_HELPERS)."""
    def jvp_g(t, ans, g, x, axis, keepdims): return _rt.expand_reduced(t, x, axis, keepdims)
    def vjp_g(gb, ans, g, x, axis, keepdims): return np.sum(gb, axis=axis, keepdims=keepdims)


# The adjoint of `a` in `a @ b` is linear in the adjoint `g` and in `b` (`a` gives only
# its shape); the transposes follow from <gb, vjp_a(g, a, b)> = <gb @ b, g>.
class matmul_vjp_a(Rule, key="zymo.rt.matmul_vjp_a", fn=_rt.matmul_vjp_a, call="_rt.matmul_vjp_a", cases=_PRODUCT):
    def jvp_g(t, ans, g, a, b): return _rt.matmul_vjp_a(t, a, b)
    def jvp_b(t, ans, g, a, b): return _rt.matmul_vjp_a(g, a, t)
    def vjp_g(gb, ans, g, a, b): return np.matmul(gb, b)
    def vjp_b(gb, ans, g, a, b): return _rt.matmul_vjp_b(g, gb, b)


class matmul_vjp_b(Rule, key="zymo.rt.matmul_vjp_b", fn=_rt.matmul_vjp_b, call="_rt.matmul_vjp_b", cases=_PRODUCT):
    def jvp_g(t, ans, g, a, b): return _rt.matmul_vjp_b(t, a, b)
    def jvp_a(t, ans, g, a, b): return _rt.matmul_vjp_b(g, t, b)
    def vjp_g(gb, ans, g, a, b): return np.matmul(a, gb)
    def vjp_a(gb, ans, g, a, b): return _rt.matmul_vjp_a(g, a, gb)


class dot_vjp_a(Rule, key="zymo.rt.dot_vjp_a", fn=_rt.dot_vjp_a, call="_rt.dot_vjp_a", cases=_PRODUCT):
    def jvp_g(t, ans, g, a, b): return _rt.dot_vjp_a(t, a, b)
    def jvp_b(t, ans, g, a, b): return _rt.dot_vjp_a(g, a, t)
    def vjp_g(gb, ans, g, a, b): return np.dot(gb, b)
    def vjp_b(gb, ans, g, a, b): return _rt.dot_vjp_b(g, gb, b)


class dot_vjp_b(Rule, key="zymo.rt.dot_vjp_b", fn=_rt.dot_vjp_b, call="_rt.dot_vjp_b", cases=_PRODUCT):
    def jvp_g(t, ans, g, a, b): return _rt.dot_vjp_b(t, a, b)
    def jvp_a(t, ans, g, a, b): return _rt.dot_vjp_b(g, t, b)
    def vjp_g(gb, ans, g, a, b): return np.dot(a, gb)
    def vjp_a(gb, ans, g, a, b): return _rt.dot_vjp_a(g, a, gb)


# the reverse program's shadow of `u = reshape(x)` (zymo.hvp rewrites maybe_view_shadow(u, x,
# du, dx, True) to this): `du` itself when u views x, else fresh zeros
class reshape_shadow(Rule, key="zymo.rt.reshape_shadow", fn=_rt.reshape_shadow, call="_rt.reshape_shadow",
                     maybe_view=True, cases=(
        ("z = np.copy(y)\nv = fn(np.reshape(z, (12,)), np.reshape(x, (12,)), x, z)\nv[1] = v[1] * v[2]\n"
         "return z * x", ((3, 4), (3, 4))),
        ("z = np.copy(y)\nv = fn(np.ravel(z), np.ravel(x.T), x.T, z)\nv[1] = v[1] * v[2]\nreturn z * x",
         ((3, 4), (3, 4))))):
    def jvp_du(t, ans, du, u, x, dx): return t if _rt.is_view(u, x) else np.zeros_like(t)
    def vjp_du(g, ans, du, u, x, dx): return np.zeros_like(du)


class grow(Rule, key="zymo.rt.grow", fn=_rt.grow, call="_rt.grow", cases=(Form("rt_grow", ((5,),), BOTH, dom=_ADD),)):
    def jvp_buf(t, ans, buf, need=0): return _rt.grow(t, need)
    def vjp_buf(g, ans, buf, need=0): return g[:buf.shape[0]]


class grow_stack(Rule, key="zymo.rt.grow_stack", fn=_rt.grow_stack, call="_rt.grow_stack",
                 cases=(Form("rt_grow_stack", ((2, 3),), BOTH, dom=_ADD),)):
    # the row only gives the new rows their shape: no derivative flows from it
    def jvp_buf(t, ans, buf, row, need): return _rt.grow_stack(t, row, need)
    def vjp_buf(g, ans, buf, row, need): return g[:buf.shape[0]]


_NUMBERS = tuple(Form("call2", p, BOTH) for p in [((), ()), ((5,), (5,)), ((3, 4), (4,))]) + (
    Form("loop2", ((), ()), BOTH),)


class fdiv(Rule, key="zymo.fdiv", fn=_rt.fdiv, call="_rt.fdiv", elementwise=True, cases=_NUMBERS):
    """IEEE division (rules of numbers divide with it): a quotient's derivatives, IEEE too."""
    def jvp_a(t, ans, a, b): return _rt.fdiv(t, b)
    def jvp_b(t, ans, a, b): return -_rt.fdiv(t * ans, b)
    def vjp_a(g, ans, a, b): return _rt.fdiv(g, b)
    def vjp_b(g, ans, a, b): return -_rt.fdiv(g * ans, b)


class fpow(Rule, key="zymo.fpow", fn=_rt.fpow, call="_rt.fpow", elementwise=True, cases=_NUMBERS):
    """A power as NumPy computes it (rules of numbers raise to powers with it): `pow`'s rule."""
    def jvp_a(t, ans, a, b): return t * b * _rt.fpow(a, b - 1 + (b == 0))
    def jvp_b(t, ans, a, b): return t * ans * np.log(a + (a == 0))
    def vjp_a(g, ans, a, b): return g * b * _rt.fpow(a, b - 1 + (b == 0))
    def vjp_b(g, ans, a, b): return g * ans * np.log(a + (a == 0))


class reduced_count(Rule, key="zymo.rt.reduced_count", fn=_rt.reduced_count, call="_rt.reduced_count",
                    nondiff=True, cases=(Form("rt_count", ((3, 4),), BOTH, dom=_ADD),)): pass


class extreme_mask(Rule, key="zymo.rt.extreme_mask", fn=_rt.extreme_mask, call="_rt.extreme_mask",
                   nondiff=True, cases=(Form("rt_mask", ((5,),), BOTH, kind="zero", dom=_ADD),
                                        Form("rt_mask_const", ((5,),), BOTH, dom=_ADD))): pass


class int_pow(Rule, key="zymo.rt.int_pow", fn=_rt.int_pow, call="_rt.int_pow", nondiff=True,
              cases=(Form("rt_int_pow", ((5,),), BOTH, dom=_ADD),)): pass


class negate(Rule, key="zymo.rt.negate", fn=_rt.negate, call="_rt.negate", nondiff=True,
             cases=(Form("rt_negate", ((5,),), BOTH, dom=_ADD),)):
    """`-shift` of np.roll's shift (an int or a tuple of them), in its adjoint. Second order
    takes an int: the IR has no value for a tuple of ints a rule returns."""

    @classmethod
    def check(cls, pos: list, kw: dict) -> str | None:
        if pos and isinstance(pos[0], (tuple, list)):
            return ("second order through np.roll with a tuple of shifts is not supported; "
                    "roll along one axis per call (np.roll(x, s, axis=k))")
        return None


class is_view(Rule, key="zymo.rt.is_view", fn=_rt.is_view, call="_rt.is_view", nondiff=True,
              cases=(Form("rt_view", ((5,),), BOTH, dom=_ADD),)): pass


class clip_inside(Rule, key="zymo.rt.clip_inside", fn=_rt.clip_inside, call="_rt.clip_inside", nondiff=True,
                  cases=(("fn(x, -0.5, 0.5) * x", ((6,),)), ("fn(x, None, 0.2) * y", ((3, 4), (3, 4))))):
    pass


class is_given(Rule, key="zymo.rt.is_given", fn=_rt.is_given, call="_rt.is_given", nondiff=True,
               cases=(("x * fn(y)", ((5,), ())), ("x * (1.0 + fn(None))", ((3,),)))):
    """Whether an optional argument was given (`np.arange`'s rule asks it of `stop`)."""


class linspace_jvp(Rule, key="zymo.rt.linspace_jvp", fn=_rt.linspace_jvp, call="_rt.linspace_jvp", cases=(
        ("fn(x, np.zeros(4), 4, True, 0, True) * y", ((), (4,))),
        ("fn(x, np.zeros((4, 3)), 4, False, 0, False) * y", ((3,), (4, 3))),
        ("fn(x, np.zeros((2, 5)), 5, True, -1, True) * y", ((2,), (2, 5))))):
    """Linear in the endpoint's tangent `t` (`ans` gives only the shape): its transpose is
    `linspace_vjp`."""
    def jvp_t(tt, ans, t, samples, num, endpoint, axis, stop_side):
        return _rt.linspace_jvp(tt, samples, num, endpoint, axis, stop_side)
    def vjp_t(gb, ans, t, samples, num, endpoint, axis, stop_side):
        return _rt.linspace_vjp(gb, samples, num, endpoint, axis, stop_side, t)


class linspace_vjp(Rule, key="zymo.rt.linspace_vjp", fn=_rt.linspace_vjp, call="_rt.linspace_vjp", cases=(
        ("fn(x, np.zeros(4), 4, True, 0, True, 1.0) * y", ((4,), ())),
        ("fn(x, np.zeros((4, 3)), 4, False, 0, False, np.zeros(3)) * y", ((4, 3), (3,))),
        ("fn(x, np.zeros((2, 5)), 5, True, -1, True, np.zeros((2,))) * y", ((2, 5), (2,))),
        ("fn(x, np.zeros((4, 2, 3)), 4, True, 0, False, np.zeros(3)) * y", ((4, 2, 3), (3,))))):
    """Linear in the samples' adjoint `g`: its transpose is `linspace_jvp`."""
    def jvp_g(t, ans, g, samples, num, endpoint, axis, stop_side, end):
        return _rt.linspace_vjp(t, samples, num, endpoint, axis, stop_side, end)
    def vjp_g(gb, ans, g, samples, num, endpoint, axis, stop_side, end):
        return _rt.linspace_jvp(gb, samples, num, endpoint, axis, stop_side)


class fp_raises(Rule, key="zymo.rt.fp_raises", fn=_rt.fp_raises, call="_rt.fp_raises", nondiff=True, pure=False,
                may_raise=False, cases=(("x * (1.0 + fn())", ((3,),)),)):
    """NumPy's error state, read (not pure: it may change between calls); a derivative computes
    what nobody reads only where it may raise (`transform/reverse/dead.py`)."""


# -- issue 7's helpers: linear algebra -------------------------------------------------------------

_WC = ("wc", 3, 3)


class mT(Rule, key="zymo.rt.mT", fn=_rt.mT, call="_rt.mT", view=True, cases=(
        ("fn(x) * y", ((3, 4), (4, 3))), ("fn(x) * y", ((2, 3, 4), (2, 4, 3))))):
    def jvp_a(t, ans, a): return _rt.mT(t)
    def vjp_a(gb, ans, a): return _rt.mT(gb)


# z = solve(a^T, g): dz = -solve(a^T, t^T z); the adjoint of a is -z w^T with w = solve(a, gb)
class solve_vjp_b(Rule, key="zymo.rt.solve_vjp_b", fn=_rt.solve_vjp_b, call="_rt.solve_vjp_b", cases=(
        ("fn(x, y)", ((3,), _WC)), ("fn(x, y)", ((3, 2), _WC)), ("fn(x, y)", ((2, 3), ("wc", 2, 3, 3))))):
    def jvp_g(t, ans, g, a): return _rt.solve_vjp_b(t, a)
    def jvp_a(t, ans, g, a): return -_rt.solve_vjp_b(_rt.mv(_rt.mT(t), ans), a)
    def vjp_g(gb, ans, g, a): return _rt.solve_vjp_b(gb, _rt.mT(a))
    def vjp_a(gb, ans, g, a): return _rt.mT(_rt.solve_vjp_a(gb, ans, _rt.mT(a)))


# R = -z sol^T with z = solve(a^T, g): linear in g and in sol (`mv`: a vector per matrix where
# `b` was 1-d and `a` a stack)
class solve_vjp_a(Rule, key="zymo.rt.solve_vjp_a", fn=_rt.solve_vjp_a, call="_rt.solve_vjp_a", cases=(
        ("fn(x, y, z)", ((3,), (3,), _WC)), ("fn(x, y, z)", ((3, 2), (3, 2), _WC)),
        ("fn(x, y, z)", ((2, 3), (2, 3), ("wc", 2, 3, 3))))):
    def jvp_g(t, ans, g, sol, a): return _rt.solve_vjp_a(t, sol, a)
    def jvp_sol(t, ans, g, sol, a): return _rt.solve_vjp_a(g, t, a)
    def jvp_a(t, ans, g, sol, a): return _rt.solve_vjp_a(-_rt.mv(_rt.mT(t), _rt.solve_vjp_b(g, a)), sol, a)
    def vjp_g(gb, ans, g, sol, a): return _rt.solve_vjp_b(-_rt.mv(gb, sol), _rt.mT(a))
    def vjp_sol(gb, ans, g, sol, a): return -_rt.mv(_rt.mT(gb), _rt.solve_vjp_b(g, a))
    def vjp_a(gb, ans, g, sol, a):
        return _rt.mT(_rt.solve_vjp_a(-_rt.mv(gb, sol), _rt.solve_vjp_b(g, a), _rt.mT(a)))


# R = g d inv(a)^T: d inv(a)^T = -inv(a)^T t^T inv(a)^T
class det_vjp(Rule, key="zymo.rt.det_vjp", fn=_rt.det_vjp, call="_rt.det_vjp", cases=(
        ("fn(x, y, z)", ((), (), _WC)),)):
    def jvp_g(t, ans, g, d, a): return _rt.det_vjp(t, d, a)
    def jvp_d(t, ans, g, d, a): return _rt.det_vjp(g, t, a)
    def jvp_a(t, ans, g, d, a): return -(ans @ _rt.mT(_rt.det_solve(a, t)))
    def vjp_g(gb, ans, g, d, a): return np.sum(gb * _rt.det_vjp(1.0, d, a), axis=(-2, -1))
    def vjp_d(gb, ans, g, d, a): return np.sum(gb * _rt.det_vjp(g, 1.0, a), axis=(-2, -1))
    def vjp_a(gb, ans, g, d, a): return -(ans @ _rt.mT(gb) @ _rt.mT(np.linalg.inv(a)))


class logdet_vjp(Rule, key="zymo.rt.logdet_vjp", fn=_rt.logdet_vjp, call="_rt.logdet_vjp", cases=(
        ("fn(x, y)", ((), _WC)),)):
    def jvp_g(t, ans, g, a): return _rt.logdet_vjp(t, a)
    def jvp_a(t, ans, g, a): return -(ans @ _rt.mT(np.linalg.solve(a, t)))
    def vjp_g(gb, ans, g, a): return np.sum(gb * _rt.logdet_vjp(1.0, a), axis=(-2, -1))
    def vjp_a(gb, ans, g, a): return -(ans @ _rt.mT(gb) @ _rt.mT(np.linalg.inv(a)))


# linear in g; its transpose is cholesky_jvp
class cholesky_vjp(Rule, key="zymo.rt.cholesky_vjp", fn=_rt.cholesky_vjp, call="_rt.cholesky_vjp", cases=(
        ("fn(x, y)", ((3, 3), ("tril", 3))),)):
    def jvp_g(t, ans, g, l): return _rt.cholesky_vjp(t, l)
    def jvp_l(t, ans, g, l): return _rt.cholesky_vjp_dl(t, g, l)
    def vjp_g(gb, ans, g, l): return _rt.cholesky_jvp(gb, l)
    def vjp_l(gb, ans, g, l): return _rt.cholesky_vjp_tl(gb, g, l)


# -- issue 7's helpers: reductions, scans, joins ---------------------------------------------------

_N = ("fn(x, 1.0 + y * y, {}, {}, {})")


class norm_grad(Rule, key="zymo.rt.norm_grad", fn=_rt.norm_grad, call="_rt.norm_grad", cases=(
        (_N.format(None, None, False), ((5,), ())), (_N.format(3.0, None, False), ((5,), ())),
        (_N.format(None, 1, False), ((3, 4), (3,))), (_N.format("'fro'", None, False), ((3, 4), ())),
        (_N.format(None, 0, True), ((3, 4), (1, 4))), (_N.format(1, None, False) + " * x", ((5,), ())))):
    """The 2-norm and p-norms (p > 1) have a derivative; ord 1 and inf give sign(x) (times
    the tie mask), piecewise constant: derivative 0 away from the kinks."""
    def jvp_x(t, ans, x, nrm, ord, axis, keepdims): return _rt.norm_grad_dx(t, None, x, nrm, ord, axis, keepdims)
    def jvp_nrm(t, ans, x, nrm, ord, axis, keepdims): return _rt.norm_grad_dx(None, t, x, nrm, ord, axis, keepdims)
    def vjp_x(gb, ans, x, nrm, ord, axis, keepdims): return _rt.norm_grad_tx(gb, x, nrm, ord, axis, keepdims, 0)
    def vjp_nrm(gb, ans, x, nrm, ord, axis, keepdims): return _rt.norm_grad_tx(gb, x, nrm, ord, axis, keepdims, 1)


class cumsum_vjp(Rule, key="zymo.rt.cumsum_vjp", fn=_rt.cumsum_vjp, call="_rt.cumsum_vjp", cases=(
        ("fn(x, y, None)", ((5,), (5,))), ("fn(x, y, None)", ((12,), (3, 4))), ("fn(x, y, 1)", ((3, 4), (3, 4))),
        ("fn(x, y, 0)", ((3, 4), (3, 4))))):
    """Linear in the adjoint `g`; `x` gives only the shape."""
    def jvp_g(t, ans, g, x, axis): return _rt.cumsum_vjp(t, x, axis)
    def vjp_g(gb, ans, g, x, axis): return _rt.cumsum_vjp_tg(gb, g, axis)


class centered(Rule, key="zymo.rt.centered", fn=_rt.centered, call="_rt.centered", cases=(
        ("fn(x, None) * y", ((5,), (5,))), ("fn(x, 1) * y", ((3, 4), (3, 4))), ("fn(x, (0, 1)) * y", ((3, 4), (3, 4))))):
    """Linear and symmetric (a projection): its own transpose."""
    def jvp_x(t, ans, x, axis): return _rt.centered(t, axis)
    def vjp_x(gb, ans, x, axis): return _rt.centered(gb, axis)


class split_first(Rule, key="zymo.rt.split_first", fn=_rt.split_first, call="_rt.split_first", maybe_view=True, cases=(
        ("fn(x, y, 0)", ((7,), (3,))), ("fn(x, y, 1)", ((2, 5), (2, 2))), ("fn(x, y, None)", ((7,), (2, 2))))):
    """Linear in `g`; `a` gives only the shape. A view of `g` (a copy where Numba reshapes)."""
    def jvp_g(t, ans, g, a, axis): return _rt.split_first(t, a, axis)
    def vjp_g(gb, ans, g, a, axis): return _rt.split_first_tg(gb, g, axis)


class split_last(Rule, key="zymo.rt.split_last", fn=_rt.split_last, call="_rt.split_last", maybe_view=True, cases=(
        ("fn(x, y, 0)", ((7,), (3,))), ("fn(x, y, 1)", ((2, 5), (2, 2))), ("fn(x, y, None)", ((7,), (2, 2))))):
    def jvp_g(t, ans, g, b, axis): return _rt.split_last(t, b, axis)
    def vjp_g(gb, ans, g, b, axis): return _rt.split_last_tg(gb, g, axis)
