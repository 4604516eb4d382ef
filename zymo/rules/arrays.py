"""Rules for NumPy's (and SciPy's) array functions: products of vectors (cross, kron),
1-d convolutions and correlations, finite differences (gradient, diff), splits, axis
rolls, atleast_nd, triangles, padding, and `np.ndarray(shape)` as an allocation.

Contract: each rule follows `registry.py` (single-expression `jvp_<param>`/`vjp_<param>`,
parameters named as NumPy names them, so keyword calls bind), declares `cases=` with
positional and keyword forms in 1-d and 2-d, and refuses at lowering time, in
`check(pos, kw)`, every argument form it does not differentiate (with the reason), never
giving a derivative it has not checked. The functions are linear (or bilinear) in their
array arguments: tangents apply the function to the tangent, adjoints are the transposes
written in `runtime/arrays.py` (`cross_vjp`, `kron_vjp`, `conv_vjp`, `gradient_vjp`, `diff_vjp`,
`rollaxis_vjp`, `pad_vjp`).

Views: `rollaxis` and `atleast_1d/2d/3d` return views of their argument (`view` rules);
`np.split`/`np.array_split` (any constant number of parts), `np.gradient` of an n-d array
without an axis and `atleast_*` of several arrays are lowered by the frontend to tuples of
slices and single-result calls (`frontend/several.py`). Every other rule here returns fresh
memory.
"""
from __future__ import annotations

import numpy as np

from .. import runtime as _rt
from .registry import NOT_CONST, Rule, const_value


def _arg(pos, kw, i, name, default=None):
    """The argument bound to NumPy's parameter `name` (position `i`)."""
    if name in kw:
        return kw[name]
    return pos[i] if len(pos) > i else default


def _ndim(b):
    t = getattr(b, "type", None)
    return getattr(t, "ndim", None)


def _const(pos, kw, i, name, default=None):
    return const_value(_arg(pos, kw, i, name, default))


def _extra(kw, allowed, what):
    extra = sorted(set(kw) - set(allowed))
    if extra:
        return f"{what} with {', '.join(k + '=' for k in extra)} is not supported"
    return None


# -- products of vectors ------------------------------------------------------------------------


class cross(Rule, key="numpy.cross", fn=np.cross, cases=(
        ("fn(x, y)", ((3,), (3,))), ("fn(x, y)", ((4, 3), (4, 3))), ("fn(x, y)", ((4, 3), (3,))),
        ("fn(x, y, axis=0)", ((3, 4), (3, 4))), ("fn(x, y, axisa=0, axisb=1, axisc=0)", ((3, 2), (2, 3))),
        ("fn(a=x, b=x * y)", ((3,), (3,))))):
    """3-vectors (along `axis`, or `axisa`/`axisb`/`axisc`), broadcasting over the others;
    2-vectors (deprecated by NumPy) fail at run time in the derivative."""
    def jvp_a(t, ans, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None): return np.cross(t, b, axisa, axisb, axisc, axis)
    def jvp_b(t, ans, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None): return np.cross(a, t, axisa, axisb, axisc, axis)
    def vjp_a(g, ans, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
        return _rt.cross_vjp(g, a, b, 0, axisa, axisb, axisc, axis)
    def vjp_b(g, ans, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
        return _rt.cross_vjp(g, a, b, 1, axisa, axisb, axisc, axis)

    @classmethod
    def check(cls, pos, kw):
        if any(_ndim(_arg(pos, kw, i, n)) in (None, 0) for i, n in ((0, "a"), (1, "b"))):
            return "np.cross needs two arrays of vectors"
        return None


class kron(Rule, key="numpy.kron", fn=np.kron, cases=(
        ("fn(x, y)", ((3,), (2,))), ("fn(x, y)", ((2, 3), (2, 2))), ("fn(x, y)", ((2,), (2, 3))),
        ("fn(a=x, b=y)", ((2, 2), (3,))), ("fn(x, x)", ((2, 2),)))):
    """Operands of any numbers of dimensions (the smaller gets leading ones, as NumPy's)."""
    def jvp_a(t, ans, a, b): return np.kron(t, b)
    def jvp_b(t, ans, a, b): return np.kron(a, t)
    def vjp_a(g, ans, a, b): return _rt.kron_vjp(g, a, b, 0)
    def vjp_b(g, ans, a, b): return _rt.kron_vjp(g, a, b, 1)


# -- convolutions and correlations (1-d) -----------------------------------------------------------

_MODES = ("full", "same", "valid")


def _conv_check(pos, kw, what, names, default, methods=False):
    bad = _extra(kw, names + ("mode",) + (("method",) if methods else ()), what)
    if bad:
        return bad
    for i, n in enumerate(names):
        if _ndim(_arg(pos, kw, i, n)) != 1:
            return f"{what} is differentiated for 1-d arrays only"
    mode = _const(pos, kw, 2, "mode", default)
    if mode not in _MODES:
        return f"{what} needs mode= as a constant 'full', 'same' or 'valid' (got {mode!r})"
    if methods and _const(pos, kw, 3, "method", "auto") not in ("auto", "direct", "fft"):
        return f"{what} needs method= as a constant 'auto', 'direct' or 'fft'"
    return None


class convolve(Rule, key="numpy.convolve", fn=np.convolve, cases=(
        ("fn(x, y)", ((5,), (3,))), ("fn(x, y, 'same')", ((5,), (3,))), ("fn(x, y, mode='valid')", ((5,), (3,))),
        ("fn(x, y, mode='same')", ((2,), (5,))), ("fn(a=x, v=y, mode='valid')", ((3,), (4,))),
        ("fn(x, x, 'full')", ((4,),)))):
    def jvp_a(t, ans, a, v, mode="full"): return np.convolve(t, v, mode)
    def jvp_v(t, ans, a, v, mode="full"): return np.convolve(a, t, mode)
    def vjp_a(g, ans, a, v, mode="full"): return _rt.conv_vjp(g, a, v, mode, 0, "np.convolve")
    def vjp_v(g, ans, a, v, mode="full"): return _rt.conv_vjp(g, a, v, mode, 1, "np.convolve")

    @classmethod
    def check(cls, pos, kw):
        return _conv_check(pos, kw, "np.convolve", ("a", "v"), "full")


class correlate(Rule, key="numpy.correlate", fn=np.correlate, cases=(
        ("fn(x, y)", ((5,), (3,))), ("fn(x, y, 'same')", ((5,), (3,))), ("fn(x, y, mode='full')", ((5,), (3,))),
        ("fn(x, y, mode='same')", ((2,), (5,))), ("fn(x, y, 'same')", ((4,), (7,))),
        ("fn(a=x, v=y, mode='valid')", ((3,), (4,))))):
    def jvp_a(t, ans, a, v, mode="valid"): return np.correlate(t, v, mode)
    def jvp_v(t, ans, a, v, mode="valid"): return np.correlate(a, t, mode)
    def vjp_a(g, ans, a, v, mode="valid"): return _rt.conv_vjp(g, a, v, mode, 0, "np.correlate")
    def vjp_v(g, ans, a, v, mode="valid"): return _rt.conv_vjp(g, a, v, mode, 1, "np.correlate")

    @classmethod
    def check(cls, pos, kw):
        return _conv_check(pos, kw, "np.correlate", ("a", "v"), "valid")


# -- finite differences --------------------------------------------------------------------------


class gradient(Rule, key="numpy.gradient", fn=np.gradient, cases=(
        ("fn(x)", ((5,),)), ("fn(x, 0.5)", ((5,),)), ("fn(x, edge_order=2)", ((5,),)),
        ("fn(x, 2.0, axis=0)", ((4, 3),)), ("fn(x, axis=1, edge_order=1) * y", ((3, 4), (3, 4))),
        ("fn(x, y)", ((5,), ())), ("fn(f=x, axis=-1, edge_order=2)", ((2, 4),)))):
    """One scalar spacing (a float, differentiable: the result is proportional to 1/h),
    edge_order 1 or 2, and one axis: a 1-d array, or `axis=` an int (NumPy returns one array
    per axis otherwise, a list zymo does not model)."""
    def jvp_f(t, ans, f, varargs=1.0, axis=None, edge_order=1): return np.gradient(t, varargs, axis=axis, edge_order=edge_order)
    def jvp_varargs(t, ans, f, varargs=1.0, axis=None, edge_order=1): return -ans * (t / varargs)
    def vjp_f(g, ans, f, varargs=1.0, axis=None, edge_order=1): return _rt.gradient_vjp(g, f, varargs, axis, edge_order)
    def vjp_varargs(g, ans, f, varargs=1.0, axis=None, edge_order=1): return -np.sum(g * ans) / varargs

    @classmethod
    def check(cls, pos, kw):
        bad = _extra(kw, ("f", "axis", "edge_order"), "np.gradient")
        if bad:
            return bad
        if len(pos) > 2:
            return "np.gradient with one spacing per axis is not supported; give one scalar spacing"
        nd = _ndim(_arg(pos, kw, 0, "f"))
        if not nd:
            return "np.gradient needs an array"
        sp = _arg(pos, kw, 1, "varargs", 1.0)
        if _ndim(sp) not in (None, 0):
            return "np.gradient with coordinate arrays is not supported; give a scalar spacing"
        axis = const_value(kw.get("axis"))
        if axis is NOT_CONST or isinstance(axis, tuple):
            return "np.gradient needs axis= as one constant int"
        if axis is None and nd != 1:
            return ("np.gradient of an array of more than one dimension returns a list (one array per "
                    "axis), which zymo does not model: call it once per axis with axis=k")
        if const_value(kw.get("edge_order", 1)) not in (1, 2):
            return "np.gradient needs edge_order= as the constant 1 or 2"
        return None


class diff(Rule, key="numpy.diff", fn=np.diff, cases=(
        ("fn(x)", ((5,),)), ("fn(x, 2)", ((5,),)), ("fn(x, n=1, axis=0)", ((3, 4),)), ("fn(x, axis=-1) * y", ((3, 4), (3, 3))),
        ("fn(a=x, n=3, axis=1)", ((2, 5),)), ("fn(x, 1, 0)", ((4,),)))):
    """`n` and `axis` constant ints; `prepend`/`append` are not supported."""
    def jvp_a(t, ans, a, n=1, axis=-1): return np.diff(t, n, axis)
    def vjp_a(g, ans, a, n=1, axis=-1): return _rt.diff_vjp(g, a, n, axis)

    @classmethod
    def check(cls, pos, kw):
        bad = _extra(kw, ("a", "n", "axis"), "np.diff")
        if bad:
            return bad + " (prepend=/append=: concatenate first)"
        if len(pos) > 3:
            return "np.diff with prepend/append is not supported (concatenate first)"
        n, axis = _const(pos, kw, 1, "n", 1), _const(pos, kw, 2, "axis", -1)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0 or not isinstance(axis, int):
            return "np.diff needs n and axis as constant ints"
        return None


# -- views of the axes -----------------------------------------------------------------------------


class rollaxis(Rule, key="numpy.rollaxis", fn=np.rollaxis, view=True, cases=(
        ("fn(x, 1) * y", ((3, 4), (4, 3))), ("fn(x, 2, 1) * y", ((2, 3, 4), (2, 4, 3))),
        ("fn(a=x, axis=-1, start=0) * y", ((2, 3, 4), (4, 2, 3))),
        ("z = np.copy(x)\nv = fn(z, 1)\nv[1, 0] = v[1, 0] * v[0, 1]\nreturn z * y", ((3, 4), (3, 4))))):
    def jvp_a(t, ans, a, axis, start=0): return np.rollaxis(t, axis, start)
    def vjp_a(g, ans, a, axis, start=0): return _rt.rollaxis_vjp(g, a, axis, start)


def _atleast_check(name):
    def check(cls, pos, kw):
        if kw or len(pos) != 1:
            return f"np.{name} of one array only (several arguments return a list)"
        if _ndim(pos[0]) is None:
            return f"np.{name} of a number is not supported: use np.array(...) outside, or np.full"
        return None
    return classmethod(check)


class atleast_1d(Rule, key="numpy.atleast_1d", fn=np.atleast_1d, view=True, cases=(
        ("fn(x) * y", ((4,), (4,))), ("fn(x) * y", ((2, 3), (2, 3))), ("fn(x[0, :] * 2.0) * y", ((2, 3), (3,))),
        ("z = np.copy(x)\nv = fn(z)\nv[0] = v[1] * 3.0\nreturn z * y", ((3,), (3,))))):
    """Of one array: the array itself (a 0-d array: a 1-d view of it)."""
    def jvp_arys(t, ans, arys): return np.atleast_1d(t)
    def vjp_arys(g, ans, arys): return np.reshape(g, np.shape(arys))
    check = _atleast_check("atleast_1d")


class atleast_2d(Rule, key="numpy.atleast_2d", fn=np.atleast_2d, view=True, cases=(
        ("fn(x) * y", ((4,), (3, 4))), ("fn(x) * y", ((2, 3), (2, 3))),
        ("z = np.copy(x)\nv = fn(z)\nv[0, 1] = v[0, 0] * 3.0\nreturn z * y", ((3,), (3,))))):
    def jvp_arys(t, ans, arys): return np.atleast_2d(t)
    def vjp_arys(g, ans, arys): return np.reshape(g, np.shape(arys))
    check = _atleast_check("atleast_2d")


class atleast_3d(Rule, key="numpy.atleast_3d", fn=np.atleast_3d, view=True, cases=(
        ("fn(x) * y", ((4,), (2, 4, 3))), ("fn(x) * y", ((2, 3), (2, 3, 2))), ("fn(x) * y", ((2, 3, 2), (2, 3, 2))),
        ("z = np.copy(x)\nv = fn(z)\nv[1, 0, 0] = v[0, 0, 0] * 3.0\nreturn z * y", ((2, 3), (2, 3))))):
    def jvp_arys(t, ans, arys): return np.atleast_3d(t)
    def vjp_arys(g, ans, arys): return np.reshape(g, np.shape(arys))
    check = _atleast_check("atleast_3d")


# -- triangles and padding -------------------------------------------------------------------------


class triu(Rule, key="numpy.triu", fn=np.triu, cases=(
        ("fn(x) * y", ((3, 3), (3, 3))), ("fn(x, 1) * y", ((3, 4), (3, 4))), ("fn(x, k=-1) * y", ((4, 3), (4, 3))),
        ("fn(m=x, k=0) * y", ((2, 3, 3), (3, 3))))):
    """Of matrices (or stacks of them): a masked copy, its own transpose."""
    def jvp_m(t, ans, m, k=0): return np.triu(t, k)
    def vjp_m(g, ans, m, k=0): return np.triu(g, k)

    @classmethod
    def check(cls, pos, kw):
        nd = _ndim(_arg(pos, kw, 0, "m"))
        if nd is None or nd < 2:
            return "np.triu of a vector (a matrix of repeated rows) is not supported: give a matrix"
        return None


class tril(Rule, key="numpy.tril", fn=np.tril, cases=(
        ("fn(x) * y", ((3, 3), (3, 3))), ("fn(x, 1) * y", ((3, 4), (3, 4))), ("fn(x, k=-1) * y", ((4, 3), (4, 3))),
        ("fn(m=x, k=0) * y", ((2, 3, 3), (3, 3))))):
    """Of matrices (or stacks of them): a masked copy, its own transpose."""
    def jvp_m(t, ans, m, k=0): return np.tril(t, k)
    def vjp_m(g, ans, m, k=0): return np.tril(g, k)

    @classmethod
    def check(cls, pos, kw):
        nd = _ndim(_arg(pos, kw, 0, "m"))
        if nd is None or nd < 2:
            return "np.tril of a vector (a matrix of repeated rows) is not supported: give a matrix"
        return None


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


class pad(Rule, key="numpy.pad", fn=np.pad, cases=(
        ("fn(x, 2)", ((4,),)), ("fn(x, (1, 2))", ((4,),)), ("fn(x, 1, 'edge') * y", ((3,), (5,))),
        ("fn(x, ((1, 0), (2, 1)), mode='reflect')", ((3, 4),)), ("fn(x, 2, mode='wrap')", ((3, 3),)),
        ("fn(x, (2, 3), 'symmetric')", ((4,),)), ("fn(x, 1, constant_values=2.5) * y", ((3,), (5,))),
        ("fn(array=x, pad_width=((0, 1), (1, 1)), mode='constant', constant_values=(1.0, -1.0))", ((2, 3),)),
        ("fn(x, 3, 'reflect')", ((3,),)))):
    """Modes constant (constant_values constant numbers), edge, reflect, symmetric and wrap
    (reflect_type 'even'): each result element copies an input element or a constant, so the
    adjoint sums into the element copied (`_rt.pad_vjp`). `pad_width` a constant."""
    def jvp_array(t, ans, array, pad_width, mode="constant", constant_values=0):
        return _rt.pad_jvp(t, pad_width, mode)
    def vjp_array(g, ans, array, pad_width, mode="constant", constant_values=0):
        return _rt.pad_vjp(g, array, pad_width, mode)

    @classmethod
    def check(cls, pos, kw):
        bad = _extra(kw, ("array", "pad_width", "mode", "constant_values"), "np.pad")
        if bad:
            return bad
        if len(pos) > 3:
            return "np.pad takes its options as keywords"
        if _ndim(_arg(pos, kw, 0, "array")) is None:
            return "np.pad needs an array"
        if _const(pos, kw, 1, "pad_width") is NOT_CONST:
            return "np.pad needs pad_width as constant ints"
        mode = _const(pos, kw, 2, "mode", "constant")
        if mode not in _PAD_MODES:
            return f"np.pad with mode={mode!r} is not supported (only {', '.join(_PAD_MODES)}; not a function)"
        if "constant_values" in kw and const_value(kw["constant_values"]) is NOT_CONST:
            return "np.pad needs constant_values as constant numbers (a derivative in them is not supported)"
        return None


# -- allocation ------------------------------------------------------------------------------------


class ndarray(Rule, key="numpy.ndarray", fn=np.ndarray, call="np.empty", alloc=True, nondiff=True, cases=(
        ("z = fn(x.shape)\nz[...] = x\nreturn z * y", ((4,), (4,))),
        ("z = fn((2, 3))\nz[:] = x\nreturn z * y", ((3,), (2, 3))),
        ("z = fn(shape=(3,), dtype=np.float64)\nz[:] = x\nreturn z * z", ((3,),)))):
    """`np.ndarray(shape, dtype)`: uninitialised fresh memory, as `np.empty` (called as that).
    A `buffer=` (a view of other memory), `offset=` and `strides=` are refused."""

    @classmethod
    def check(cls, pos, kw):
        if len(pos) > 2 or set(kw) - {"shape", "dtype", "order"}:
            return "np.ndarray(shape, dtype) only: buffer=, offset= and strides= (views of memory) are not supported"
        return None


# -- result types: evaluated on examples of extent 4 (the analysis' extent-1 examples are too
# small for a cross product, a gradient or a split in two)


def _typed_on_larger_examples(key, fn):
    def result(pos, kw):
        from ..analysis.types import example, type_of_result
        from ..ir.core import Value

        def ex(p):
            if isinstance(p, Value):
                e = example(p.type, p.const)
                if isinstance(e, np.ndarray) and e.ndim:
                    return np.ones((4 if key != "numpy.cross" else 3,) * e.ndim, e.dtype)
                return e
            if isinstance(p, tuple):
                return tuple(ex(q) for q in p)
            return p
        out = fn(*[ex(p) for p in pos], **{k: ex(v) for k, v in kw.items()})
        if isinstance(out, (tuple, list)):
            return tuple(type_of_result(o) for o in out)
        return type_of_result(out)
    return result


def _register_types():
    from ..analysis.types import RESULT_TYPES

    for key, fn in (("numpy.cross", np.cross), ("numpy.gradient", np.gradient)):
        RESULT_TYPES[key] = _typed_on_larger_examples(key, fn)


_register_types()
