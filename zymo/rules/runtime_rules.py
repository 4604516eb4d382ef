"""Rules for the runtime helpers generated code calls (`_rt.*`): second order.

Contract: forward mode over a reverse-mode program (`zymo.hvp`) reads zymo's own
generated source, which calls the helpers of `runtime.py`. Each helper is a
primitive with a rule here, so the frontend treats it as one op instead of
inlining its body: the adjoint-shaping helpers are linear in the adjoint they
reshape (`unbroadcast`, `expand_reduced`, `as_shape`), the matrix-product
adjoints are bilinear, `grow` and `grow_stack` copy, and the helpers that only inspect values
(`reduced_count`, `extreme_mask`, `is_view`) have zero derivative by rule.
"""
from __future__ import annotations

import numpy as np

from . import runtime as _rt
from .registry import Rule



class unbroadcast(Rule, key="zymo.rt.unbroadcast", fn=_rt.unbroadcast, call="_rt.unbroadcast"):
    def jvp_g(t, ans, g, x): return _rt.unbroadcast(t, x)
    def vjp_g(gb, ans, g, x): return gb + np.zeros_like(g)


class as_shape(Rule, key="zymo.rt.as_shape", fn=_rt.as_shape, call="_rt.as_shape"):
    def jvp_t(tt, ans, t, y): return _rt.as_shape(tt, y)
    def vjp_t(gb, ans, t, y): return _rt.unbroadcast(gb, t)


class as_tangent(Rule, key="zymo.rt.as_tangent", fn=_rt.as_tangent, call="_rt.as_tangent"):
    def jvp_t(tt, ans, t, y): return _rt.as_tangent(tt, y)
    def vjp_t(gb, ans, t, y): return _rt.unbroadcast(gb, t)


class expand_reduced(Rule, key="zymo.rt.expand_reduced", fn=_rt.expand_reduced, call="_rt.expand_reduced"):
    def jvp_g(t, ans, g, x, axis, keepdims): return _rt.expand_reduced(t, x, axis, keepdims)
    def vjp_g(gb, ans, g, x, axis, keepdims): return np.sum(gb, axis=axis, keepdims=keepdims)


# The adjoint of `a` in `a @ b` is linear in the adjoint `g` and in `b` (`a` gives only
# its shape); the transposes follow from <gb, vjp_a(g, a, b)> = <gb @ b, g>.
class matmul_vjp_a(Rule, key="zymo.rt.matmul_vjp_a", fn=_rt.matmul_vjp_a, call="_rt.matmul_vjp_a"):
    def jvp_g(t, ans, g, a, b): return _rt.matmul_vjp_a(t, a, b)
    def jvp_b(t, ans, g, a, b): return _rt.matmul_vjp_a(g, a, t)
    def vjp_g(gb, ans, g, a, b): return np.matmul(gb, b)
    def vjp_b(gb, ans, g, a, b): return _rt.matmul_vjp_b(g, gb, b)


class matmul_vjp_b(Rule, key="zymo.rt.matmul_vjp_b", fn=_rt.matmul_vjp_b, call="_rt.matmul_vjp_b"):
    def jvp_g(t, ans, g, a, b): return _rt.matmul_vjp_b(t, a, b)
    def jvp_a(t, ans, g, a, b): return _rt.matmul_vjp_b(g, t, b)
    def vjp_g(gb, ans, g, a, b): return np.matmul(a, gb)
    def vjp_a(gb, ans, g, a, b): return _rt.matmul_vjp_a(g, a, gb)


class dot_vjp_a(Rule, key="zymo.rt.dot_vjp_a", fn=_rt.dot_vjp_a, call="_rt.dot_vjp_a"):
    def jvp_g(t, ans, g, a, b): return _rt.dot_vjp_a(t, a, b)
    def jvp_b(t, ans, g, a, b): return _rt.dot_vjp_a(g, a, t)
    def vjp_g(gb, ans, g, a, b): return np.dot(gb, b)
    def vjp_b(gb, ans, g, a, b): return _rt.dot_vjp_b(g, gb, b)


class dot_vjp_b(Rule, key="zymo.rt.dot_vjp_b", fn=_rt.dot_vjp_b, call="_rt.dot_vjp_b"):
    def jvp_g(t, ans, g, a, b): return _rt.dot_vjp_b(t, a, b)
    def jvp_a(t, ans, g, a, b): return _rt.dot_vjp_b(g, t, b)
    def vjp_g(gb, ans, g, a, b): return np.dot(a, gb)
    def vjp_a(gb, ans, g, a, b): return _rt.dot_vjp_a(g, a, gb)


class grow(Rule, key="zymo.rt.grow", fn=_rt.grow, call="_rt.grow"):
    def jvp_buf(t, ans, buf, need=0): return _rt.grow(t, need)
    def vjp_buf(g, ans, buf, need=0): return g[:buf.shape[0]]


class grow_stack(Rule, key="zymo.rt.grow_stack", fn=_rt.grow_stack, call="_rt.grow_stack"):
    # the row only gives the new rows their shape: no derivative flows from it
    def jvp_buf(t, ans, buf, row, need): return _rt.grow_stack(t, row, need)
    def vjp_buf(g, ans, buf, row, need): return g[:buf.shape[0]]


class reduced_count(Rule, key="zymo.rt.reduced_count", fn=_rt.reduced_count, call="_rt.reduced_count",
                    nondiff=True): pass


class extreme_mask(Rule, key="zymo.rt.extreme_mask", fn=_rt.extreme_mask, call="_rt.extreme_mask",
                   nondiff=True): pass


class is_view(Rule, key="zymo.rt.is_view", fn=_rt.is_view, call="_rt.is_view", nondiff=True): pass
