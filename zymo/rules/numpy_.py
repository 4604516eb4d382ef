"""Rules for NumPy: ufuncs, reductions, products, allocation and shape ops.

Elementwise rules broadcast (codegen sums adjoints back to operand shapes) and
accept `out=`. Adding a function is one class: key, primal, jvp and vjp bodies.
"""
from __future__ import annotations

import operator

import numpy as np

from . import runtime as _rt
from .registry import Rule

# -- products ------------------------------------------------------------------
class matmul(Rule, key="numpy.matmul", fn=np.matmul, call="np.matmul", out=True):
    def jvp_a(t, ans, a, b): return t @ b
    def jvp_b(t, ans, a, b): return a @ t
    def vjp_a(g, ans, a, b): return _rt.matmul_vjp_a(g, a, b)
    def vjp_b(g, ans, a, b): return _rt.matmul_vjp_b(g, a, b)


class matmul_op(matmul, key="matmul", fn=operator.matmul, template="{0} @ {1}", out=False):
    pass


class dot(Rule, key="numpy.dot", fn=np.dot, out=True):
    def jvp_a(t, ans, a, b): return np.dot(t, b)
    def jvp_b(t, ans, a, b): return np.dot(a, t)
    def vjp_a(g, ans, a, b): return _rt.dot_vjp_a(g, a, b)
    def vjp_b(g, ans, a, b): return _rt.dot_vjp_b(g, a, b)


# -- copies and views ----------------------------------------------------------
class copy(Rule, key="numpy.copy", fn=np.copy):
    def jvp_x(t, ans, x): return np.copy(t)
    def vjp_x(g, ans, x): return g


class transpose(Rule, key="numpy.transpose", fn=np.transpose, view=True):
    def jvp_x(t, ans, x, axes=None): return np.transpose(t, axes)
    def vjp_x(g, ans, x, axes=None): return np.transpose(g, np.argsort(axes) if axes is not None else None)


class reshape(Rule, key="numpy.reshape", fn=np.reshape, maybe_view=True):
    def jvp_x(t, ans, x, shape): return np.reshape(t, shape)
    def vjp_x(g, ans, x, shape): return np.reshape(g, np.shape(x))


# -- allocation (fresh memory no input flows into) ------------------------------
_A = dict(alloc=True, nondiff=True)


class zeros(Rule, key="numpy.zeros", fn=np.zeros, **_A): pass
class ones(Rule, key="numpy.ones", fn=np.ones, **_A): pass
class empty(Rule, key="numpy.empty", fn=np.empty, **_A): pass
class full(Rule, key="numpy.full", fn=np.full, **_A): pass
class zeros_like(Rule, key="numpy.zeros_like", fn=np.zeros_like, **_A): pass
class ones_like(Rule, key="numpy.ones_like", fn=np.ones_like, **_A): pass
class empty_like(Rule, key="numpy.empty_like", fn=np.empty_like, **_A): pass
class arange(Rule, key="numpy.arange", fn=np.arange, **_A): pass
class eye(Rule, key="numpy.eye", fn=np.eye, **_A, cases=(
        ("fn(3) @ x", ((3, 4),)), ("fn(x.shape[0], 4, 1) * x", ((3, 4),)), ("fn(3, dtype=x.dtype) * x", ((3, 3),)))):
    pass
class identity(Rule, key="numpy.identity", fn=np.identity, **_A, cases=(("fn(3) * x", ((3, 3),)),)): pass


class linspace(Rule, key="numpy.linspace", fn=np.linspace, cases=(
        ("fn(x, y, 5)", ((), ())), ("fn(x, 2.0, 4, endpoint=False) * z", ((), (), (4,))),
        ("fn(0.0, y, num=3)", ((), ())))):
    """Differentiable in start and stop (scalars): start + (stop - start) * (0, 1/(n-1), ..., 1)."""
    def jvp_start(t, ans, start, stop, num=50, endpoint=True):
        return t * (1.0 - _rt.linspace_unit(num, endpoint, ans))
    def jvp_stop(t, ans, start, stop, num=50, endpoint=True): return t * _rt.linspace_unit(num, endpoint, ans)
    def vjp_start(g, ans, start, stop, num=50, endpoint=True):
        return np.sum(g * (1.0 - _rt.linspace_unit(num, endpoint, g)))
    def vjp_stop(g, ans, start, stop, num=50, endpoint=True): return np.sum(g * _rt.linspace_unit(num, endpoint, g))


# -- non-differentiable by rule -------------------------------------------------
_ND = dict(nondiff=True)


class shape(Rule, key="numpy.shape", fn=np.shape, **_ND): pass
class ndim(Rule, key="numpy.ndim", fn=np.ndim, **_ND): pass
class size(Rule, key="numpy.size", fn=np.size, **_ND): pass
class argmax(Rule, key="numpy.argmax", fn=np.argmax, **_ND): pass
class argmin(Rule, key="numpy.argmin", fn=np.argmin, **_ND): pass
