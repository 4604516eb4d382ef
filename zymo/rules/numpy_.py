"""Rules for NumPy: ufuncs, reductions, products, allocation and shape ops.

Elementwise rules broadcast (codegen sums adjoints back to operand shapes) and
accept `out=`. Adding a function is one class: key, primal, jvp and vjp bodies.
"""
from __future__ import annotations

import operator

import numpy as np

from . import runtime as _rt
from .registry import Rule

_U = dict(elementwise=True, out=True)


# -- unary ufuncs --------------------------------------------------------------
class sin(Rule, key="numpy.sin", fn=np.sin, **_U):
    def jvp_x(t, ans, x): return t * np.cos(x)
    def vjp_x(g, ans, x): return g * np.cos(x)


class cos(Rule, key="numpy.cos", fn=np.cos, **_U):
    def jvp_x(t, ans, x): return -t * np.sin(x)
    def vjp_x(g, ans, x): return -g * np.sin(x)


class tan(Rule, key="numpy.tan", fn=np.tan, **_U):
    def jvp_x(t, ans, x): return t * (1.0 + ans * ans)
    def vjp_x(g, ans, x): return g * (1.0 + ans * ans)


class exp(Rule, key="numpy.exp", fn=np.exp, **_U):
    def jvp_x(t, ans, x): return t * ans
    def vjp_x(g, ans, x): return g * ans


class log(Rule, key="numpy.log", fn=np.log, **_U):
    def jvp_x(t, ans, x): return t / x
    def vjp_x(g, ans, x): return g / x


class sqrt(Rule, key="numpy.sqrt", fn=np.sqrt, **_U):
    def jvp_x(t, ans, x): return t / (2.0 * ans)
    def vjp_x(g, ans, x): return g / (2.0 * ans)


class tanh(Rule, key="numpy.tanh", fn=np.tanh, **_U):
    def jvp_x(t, ans, x): return t * (1.0 - ans * ans)
    def vjp_x(g, ans, x): return g * (1.0 - ans * ans)


class absolute(Rule, key="numpy.absolute", fn=np.absolute, **_U):
    def jvp_x(t, ans, x): return t * np.sign(x)
    def vjp_x(g, ans, x): return g * np.sign(x)


class negative(Rule, key="numpy.negative", fn=np.negative, **_U):
    def jvp_x(t, ans, x): return -t
    def vjp_x(g, ans, x): return -g


class square(Rule, key="numpy.square", fn=np.square, **_U):
    def jvp_x(t, ans, x): return 2.0 * x * t
    def vjp_x(g, ans, x): return 2.0 * x * g


# -- binary ufuncs (also the targets of in-place operators x += y) ------------
class add(Rule, key="numpy.add", fn=np.add, **_U):
    def jvp_x(t, ans, x, y): return t
    def jvp_y(t, ans, x, y): return t
    def vjp_x(g, ans, x, y): return g
    def vjp_y(g, ans, x, y): return g


class subtract(Rule, key="numpy.subtract", fn=np.subtract, **_U):
    def jvp_x(t, ans, x, y): return t
    def jvp_y(t, ans, x, y): return -t
    def vjp_x(g, ans, x, y): return g
    def vjp_y(g, ans, x, y): return -g


class multiply(Rule, key="numpy.multiply", fn=np.multiply, **_U):
    def jvp_x(t, ans, x, y): return t * y
    def jvp_y(t, ans, x, y): return x * t
    def vjp_x(g, ans, x, y): return g * y
    def vjp_y(g, ans, x, y): return x * g


class divide(Rule, key="numpy.divide", fn=np.divide, **_U):
    def jvp_x(t, ans, x, y): return t / y
    def jvp_y(t, ans, x, y): return -t * x / (y * y)
    def vjp_x(g, ans, x, y): return g / y
    def vjp_y(g, ans, x, y): return -g * x / (y * y)


class power(Rule, key="numpy.power", fn=np.power, **_U):
    def jvp_x(t, ans, x, y): return t * y * x ** (y - 1)
    def jvp_y(t, ans, x, y): return t * ans * np.log(x)
    def vjp_x(g, ans, x, y): return g * y * x ** (y - 1)
    def vjp_y(g, ans, x, y): return g * ans * np.log(x)


# -- reductions ----------------------------------------------------------------
class sum_(Rule, key="numpy.sum", fn=np.sum):
    def jvp_x(t, ans, x, axis=None, keepdims=False): return np.sum(t, axis=axis, keepdims=keepdims)
    def vjp_x(g, ans, x, axis=None, keepdims=False): return _rt.expand_reduced(g, x, axis, keepdims)


class mean(Rule, key="numpy.mean", fn=np.mean):
    def jvp_x(t, ans, x, axis=None, keepdims=False): return np.mean(t, axis=axis, keepdims=keepdims)
    def vjp_x(g, ans, x, axis=None, keepdims=False):
        return _rt.expand_reduced(g, x, axis, keepdims) / _rt.reduced_count(x, ans)


class max_(Rule, key="numpy.max", fn=np.max):
    """Ties share the derivative equally (the subgradient of the mean of the tied elements)."""
    def jvp_x(t, ans, x, axis=None, keepdims=False):
        return np.sum(t * _rt.extreme_mask(x, ans, axis, keepdims), axis=axis, keepdims=keepdims)
    def vjp_x(g, ans, x, axis=None, keepdims=False):
        return _rt.expand_reduced(g, x, axis, keepdims) * _rt.extreme_mask(x, ans, axis, keepdims)


class min_(max_, key="numpy.min", fn=np.min):
    """Ties share the derivative equally."""


class amax(max_, key="numpy.amax", fn=np.amax):
    """Ties share the derivative equally."""


class amin(max_, key="numpy.amin", fn=np.amin):
    """Ties share the derivative equally."""


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


# -- non-differentiable by rule -------------------------------------------------
_ND = dict(nondiff=True)


class sign(Rule, key="numpy.sign", fn=np.sign, **_ND): pass
class floor(Rule, key="numpy.floor", fn=np.floor, **_ND): pass
class ceil(Rule, key="numpy.ceil", fn=np.ceil, **_ND): pass
class shape(Rule, key="numpy.shape", fn=np.shape, **_ND): pass
class ndim(Rule, key="numpy.ndim", fn=np.ndim, **_ND): pass
class size(Rule, key="numpy.size", fn=np.size, **_ND): pass
class argmax(Rule, key="numpy.argmax", fn=np.argmax, **_ND): pass
class argmin(Rule, key="numpy.argmin", fn=np.argmin, **_ND): pass
class isfinite(Rule, key="numpy.isfinite", fn=np.isfinite, **_ND): pass
