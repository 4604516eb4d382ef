"""Rules for NumPy's products (matmul, `@`, dot), copies and views (copy, transpose,
reshape), allocation (zeros, ones, empty, full, *_like, eye, identity: fresh memory
no input flows into), arange and linspace (differentiable in their float start, step and
endpoints), shape queries and `np.random` (non-differentiable by rule, typed without drawing).
Ufuncs, reductions, shape ops and linear algebra have modules of their own (ufuncs.py,
reductions.py, shape.py, linalg.py).
"""
from __future__ import annotations

import operator

import numpy as np

from .. import runtime as _rt
from .registry import BOTH, Form, Rule

# -- products ------------------------------------------------------------------
_PAIRS = tuple(Form("call2", p, BOTH) for p in [((3, 4), (4, 2)), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 3))])
_BATCHED = tuple(Form("call2", p, BOTH) for p in [((2, 3, 4), (4, 2)), ((2, 3, 4), (2, 4, 5)), ((3, 4), (2, 4, 5))])
_SELF = (Form("call2", ((3, 4), (4,)), ("mixed",)), Form("self2", ((3, 3),), BOTH), Form("self2", ((4,),), BOTH))
_OUT = (Form("outmat", ((3, 4), (4, 2)), BOTH),)


class matmul(Rule, key="numpy.matmul", fn=np.matmul, call="np.matmul", out=True, keeps_shape=True, matrix_product=True,
             cases=_PAIRS + _BATCHED + _SELF + _OUT):
    def jvp_a(t, ans, a, b): return t @ b
    def jvp_b(t, ans, a, b): return a @ t
    def vjp_a(g, ans, a, b): return _rt.matmul_vjp_a(g, a, b)
    def vjp_b(g, ans, a, b): return _rt.matmul_vjp_b(g, a, b)


class matmul_op(matmul, key="matmul", fn=operator.matmul, template="{0} @ {1}", out=False,
                cases=_PAIRS + _BATCHED + _SELF):
    pass


class dot(Rule, key="numpy.dot", fn=np.dot, out=True, keeps_shape=True, matrix_product=True, cases=_PAIRS + (
        Form("call2", ((), (4,)), BOTH), Form("call2", ((3, 4), ()), BOTH)) + _SELF + _OUT):
    def jvp_a(t, ans, a, b): return np.dot(t, b)
    def jvp_b(t, ans, a, b): return np.dot(a, t)
    def vjp_a(g, ans, a, b): return _rt.dot_vjp_a(g, a, b)
    def vjp_b(g, ans, a, b): return _rt.dot_vjp_b(g, a, b)


# -- copies and views ----------------------------------------------------------
class copy(Rule, key="numpy.copy", fn=np.copy, keeps_shape=True, cases=(
        Form("call1", ((5,),), BOTH), Form("call1", ((3, 4),), BOTH), Form("copy_write", ((5,),), BOTH))):
    def jvp_x(t, ans, x): return np.copy(t)
    def vjp_x(g, ans, x): return g


class transpose(Rule, key="numpy.transpose", fn=np.transpose, view=True, cases=(
        Form("view", ((3, 4),), BOTH, extra=(("w", (4, 3)),)),
        Form("view_write", ((3, 4),), BOTH, extra=(("w", (3, 4)),)),
        Form("transpose_axes", ((2, 3, 4),), BOTH, extra=(("w", (3, 2, 4)),)),
        Form("transpose_attr", ((3, 4),), BOTH, extra=(("w", (4, 3)),)))):
    def jvp_x(t, ans, x, axes=None): return np.transpose(t, axes)
    def vjp_x(g, ans, x, axes=None): return np.transpose(g, np.argsort(axes) if axes is not None else None)


class reshape(Rule, key="numpy.reshape", fn=np.reshape, maybe_view=True, cases=(
        Form("reshape_flat", ((3, 4),), BOTH, extra=(("w", (12,)),)),
        Form("reshape_infer", ((3, 4),), BOTH, extra=(("w", (2, 6)),)),
        Form("reshape_method", ((3, 4),), BOTH, extra=(("w", (4, 3)),)),
        Form("reshape_write", ((3, 4),), BOTH, extra=(("w", (3, 4)),)))):
    def jvp_x(t, ans, x, shape): return np.reshape(t, shape)
    def vjp_x(g, ans, x, shape): return np.reshape(g, np.shape(x))


# -- allocation (fresh memory no input flows into) ------------------------------
_A = dict(alloc=True, nondiff=True)


# written into, partly or wholly, then read
_NEW = (Form("new_n", ((5,),), BOTH), Form("new_2d", ((4,),), BOTH))
_FILLED = _NEW + (Form("new_n_partial", ((5,),), BOTH), Form("new_dtype", ((5,),), BOTH))
_LIKE = (Form("like", ((5,),), BOTH),)


class zeros(Rule, key="numpy.zeros", fn=np.zeros, **_A, cases=_FILLED): pass
class ones(Rule, key="numpy.ones", fn=np.ones, **_A, cases=_FILLED): pass
class empty(Rule, key="numpy.empty", fn=np.empty, **_A, cases=_NEW): pass
class full(Rule, key="numpy.full", fn=np.full, cases=(
        ("fn(x.shape[0], y) * x", ((5,), ())), ("fn((2, 3), y) * x", ((2, 3), (3,))), Form("full", ((5,),), BOTH))):
    """Fresh memory filled with `fill_value`, which is differentiable (a float or an array)."""
    def jvp_fill_value(t, ans, shape, fill_value, dtype=None): return _rt.as_tangent(t, ans)
    def vjp_fill_value(g, ans, shape, fill_value, dtype=None): return _rt.unbroadcast(g, fill_value)
class zeros_like(Rule, key="numpy.zeros_like", fn=np.zeros_like, **_A, keeps_shape=True,
                 cases=_LIKE + (Form("like_partial", ((5,),), BOTH),)): pass
class ones_like(Rule, key="numpy.ones_like", fn=np.ones_like, **_A, keeps_shape=True,
                cases=_LIKE + (Form("like_partial", ((5,),), BOTH),)): pass
class empty_like(Rule, key="numpy.empty_like", fn=np.empty_like, **_A, keeps_shape=True, cases=_LIKE): pass
class arange(Rule, key="numpy.arange", fn=np.arange, data_shaped=True, cases=(
        Form("arange", ((3,),), BOTH), ("np.sum(np.sin(fn(x, x + 3.0)))", ((),)),
        ("np.sum(np.sin(fn(x, x + 2.5, 0.38 + 0.005 * y)))", ((), ())),
        ("fn(x, x + 4.0 + 0.1 * y, 0.5)[:3] * z", ((), (), (3,))),
        ("np.sum(fn(0.0, 2.0, step=0.3 + 0.01 * x) ** 2)", ((),)), ("fn(x * x + 3.5) * 2.0", ((),), {"kind": "zero"}))):
    """`start + k * step` for k = 0, ..., n - 1, n = ceil((stop - start) / step): derivative 1 in
    `start`, k in `step`; `stop` (and a lone argument, which is the stop) only sets n, a piecewise
    constant function: derivative 0."""
    def jvp_start(t, ans, start, stop=None, step=1, dtype=None):
        return np.zeros_like(ans) + t if _rt.is_given(stop) else np.zeros_like(ans)
    def jvp_step(t, ans, start, stop=None, step=1, dtype=None):
        return t * np.arange(ans.shape[0])
    def vjp_start(g, ans, start, stop=None, step=1, dtype=None):
        return np.sum(g) if _rt.is_given(stop) else 0.0 * np.sum(g)
    def vjp_step(g, ans, start, stop=None, step=1, dtype=None):
        return np.sum(g * np.arange(g.shape[0]))
class eye(Rule, key="numpy.eye", fn=np.eye, **_A, cases=(
        ("fn(3) @ x", ((3, 4),)), ("fn(x.shape[0], 4, 1) * x", ((3, 4),)), ("fn(3, dtype=x.dtype) * x", ((3, 3),)))):
    pass
class identity(Rule, key="numpy.identity", fn=np.identity, **_A, cases=(("fn(3) * x", ((3, 3),)),)): pass


class linspace(Rule, key="numpy.linspace", fn=np.linspace, data_shaped=True, cases=(
        ("fn(x, y, 5)", ((), ())), ("fn(x, 2.0, 4, endpoint=False) * z", ((), (), (4,))),
        ("fn(0.0, y, num=3)", ((), ())), ("fn(x, y, 4) * z", ((3,), (3,), (4, 3))),
        ("fn(x, y, 5, axis=1) * z", ((3,), (2, 3), (2, 5, 3))), ("fn(x, y, 3, endpoint=False, axis=-1) * z", ((2,), (), (2, 3))),
        ("fn(x, 1.5, num=4) * z", ((2, 2), (), (4, 2, 2))))):
    """Differentiable in start and stop: start + (stop - start) * (0, 1/(n-1), ..., 1), NumPy's
    semantics for array endpoints (broadcast against each other, the samples along `axis`).
    `retstep=True` is refused (a parameter the rule does not take)."""
    def jvp_start(t, ans, start, stop, num=50, endpoint=True, axis=0):
        return _rt.linspace_jvp(t, ans, num, endpoint, axis, False)
    def jvp_stop(t, ans, start, stop, num=50, endpoint=True, axis=0):
        return _rt.linspace_jvp(t, ans, num, endpoint, axis, True)
    def vjp_start(g, ans, start, stop, num=50, endpoint=True, axis=0):
        return _rt.linspace_vjp(g, ans, num, endpoint, axis, False, start)
    def vjp_stop(g, ans, start, stop, num=50, endpoint=True, axis=0):
        return _rt.linspace_vjp(g, ans, num, endpoint, axis, True, stop)


# -- non-differentiable by rule -------------------------------------------------
_ND = dict(nondiff=True)


_QUERY = (Form("const1", ((3, 4),), BOTH), Form("zero1", ((3, 4),), kind="zero"))
_PICK = (Form("pick", ((6,),), BOTH), Form("zero1", ((6,),), kind="zero"))


class shape(Rule, key="numpy.shape", fn=np.shape, **_ND, may_raise=False, cases=(
        Form("shape_const", ((3, 4),), BOTH), Form("shape_zero", ((3, 4),), kind="zero"))): pass
class ndim(Rule, key="numpy.ndim", fn=np.ndim, **_ND, cases=_QUERY): pass
class size(Rule, key="numpy.size", fn=np.size, **_ND, size=True, cases=_QUERY): pass
class argmax(Rule, key="numpy.argmax", fn=np.argmax, **_ND, cases=_PICK): pass
class argmin(Rule, key="numpy.argmin", fn=np.argmin, **_ND, cases=_PICK): pass


# -- random numbers: non-differentiable by rule (a sample's derivative in loc/scale is 0) ----
def _random_type(pos, kw):
    """Result type of a legacy np.random function, without calling it (which would draw)."""

    size = kw.get("size")
    dims = [p for p in pos if not isinstance(p, (tuple, type(None)))]
    if size is None and pos and isinstance(pos[-1], tuple):
        size = pos[-1]
    arrays = [getattr(getattr(p, "type", None), "ndim", 0) for p in list(pos) + list(kw.values())]
    return size, dims, max(arrays + [0])


def _random_result(kind):
    def result(pos, kw):
        from ..analysis.types import T

        size, dims, nd = _random_type(pos, kw)
        if kind == "dims":  # rand(d0, d1, ...)
            n = len(pos)
        elif size is not None:
            n = len(size) if isinstance(size, tuple) else 1
        else:
            # size as the last positional argument (uniform(0, 1, 5)) or no size
            n = nd
            if kind == "size_last" and len(pos) == 3 or kind == "size_first" and len(pos) == 1:
                last = pos[-1]
                n = len(last) if isinstance(last, tuple) else 1
        dtype = "int64" if kind == "int" else "float64"
        if n == 0:
            return T.INT if dtype == "int64" else T.F64
        return T.Array(dtype, n)
    return result


_RANDOM = {"rand": "dims", "randn": "dims", "random": "size_first", "random_sample": "size_first",
           "standard_normal": "size_first", "uniform": "size_last", "normal": "size_last"}
_RCASES = (("np.random.seed(3)\nreturn 2.0 * fn(5) + 0.0 * x", ((5,),), {"kind": "zero"}),
           ("np.random.seed(3)\nreturn x * fn(5)", ((5,),)))


def _register_random():
    from ..analysis.types import RESULT_TYPES, T

    for name, kind in _RANDOM.items():
        fn = getattr(np.random, name)
        cases = _RCASES if kind in ("dims", "size_first") else (
            ("np.random.seed(3)\nreturn x * fn(0.0, 1.0, 5)", ((5,),)),
            ("np.random.seed(3)\nreturn x * fn(1.0, 2.0, size=5)", ((5,),)),
            ("np.random.seed(3)\nreturn 2.0 * fn(0.0, 1.0, (2, 3)) + 0.0 * x", ((2, 3),), {"kind": "zero"}))
        type(name, (Rule,), {"__module__": __name__}, key=f"numpy.random.{name}", fn=fn, call=f"np.random.{name}",
             nondiff=True, alloc=True, pure=False, cases=cases)  # a draw advances the random state
        RESULT_TYPES[f"numpy.random.{name}"] = _random_result(kind)
    type("seed", (Rule,), {"__module__": __name__}, key="numpy.random.seed", fn=np.random.seed,
         call="np.random.seed", nondiff=True, pure=False, cases=(("fn(3)\nreturn x * np.random.rand(5)", ((5,),)),))
    RESULT_TYPES["numpy.random.seed"] = lambda pos, kw: T.NONE


_register_random()
