"""Rules for NumPy's shape and indexing functions and tensor products.

Contract: `view` rules (swapaxes, moveaxis, squeeze, expand_dims, flip, einsum_view,
diagonal, diag_view) return a view of their first array argument; their shadow is the
same view of its shadow, so writes through the view reach the base (their jvp body,
applied to the base's shadow, builds that view). `diagonal` and `diag` of a matrix are
NumPy's read-only views: view rules whose shadow is a writable view of the base's shadow
(`_rt.diagonal_view`). `broadcast_to` is called through an `_rt` helper that returns a
copy, because its shadow cannot be a view (the adjoints of the repeated elements must add
up): a write to its base while the copy is still read is refused at lowering time
(`zymo.ir.specialize.check_copies_of_views`). `ravel` is a view or a copy as NumPy decides (`maybe_view`).

A rule whose calls are views or copies depending on constant arguments declares
`specialize(pos, kw)`, returning the key of the rule to use instead (or None):
`zymo.ir.specialize` applies it right after lowering. `np.einsum` of one operand that keeps
every label (`'ji'`, `'ii->i'`, `'...ij->...ji'`) is NumPy's (writable) view of it:
`numpy.einsum_view`; every other einsum is fresh memory (`numpy.einsum`: up to six operands,
ellipses, labels repeated within an operand, implicit outputs, `optimize=` ignored).
`np.diag` of a matrix is `numpy.diag_view`. `tensordot` is differentiated as the einsum it
equals. Joining arrays (`concatenate`, `stack`, `hstack`, `vstack`) is lowered by the
frontend to a chain of `zymo.concat2` (see `frontend/expr.py`).
"""
from __future__ import annotations

import numpy as np

from .. import runtime as _rt
from .registry import Rule, const_value

_V = dict(view=True)


class swapaxes(Rule, key="numpy.swapaxes", fn=np.swapaxes, **_V, cases=(
        ("fn(a=x, axis1=1, axis2=0) * y", ((3, 4), (4, 3))),
        ("np.sum(fn(x, 0, 1) * y)", ((3, 4), (4, 3))), ("np.sum(x.swapaxes(0, 2) * y)", ((2, 3, 4), (4, 3, 2))),
        ("z = np.copy(x)\nv = fn(z, 0, 1)\nv[1, 0] = v[1, 0] * v[0, 1]\nreturn z * y", ((3, 4), (3, 4))))):
    def jvp_a(t, ans, a, axis1, axis2): return np.swapaxes(t, axis1, axis2)
    def vjp_a(g, ans, a, axis1, axis2): return np.swapaxes(g, axis1, axis2)


class moveaxis(Rule, key="numpy.moveaxis", fn=np.moveaxis, **_V, cases=(
        ("fn(a=x, source=(0, 1), destination=(1, 0)) * y", ((2, 3), (3, 2))), ("fn(x, source=-1, destination=0) * y", ((2, 3, 4), (4, 2, 3))),
        ("np.sum(fn(x, 0, -1) * y)", ((2, 3, 4), (3, 4, 2))),
        ("z = np.copy(x)\nv = fn(z, 1, 0)\nv[0, 1] = v[0, 1] * 3.0\nreturn z * y", ((3, 4), (3, 4))))):
    def jvp_a(t, ans, a, source, destination): return np.moveaxis(t, source, destination)
    def vjp_a(g, ans, a, source, destination): return np.moveaxis(g, destination, source)


class squeeze(Rule, key="numpy.squeeze", fn=np.squeeze, **_V, cases=(
        ("fn(a=x, axis=-1) * y", ((4, 1), (4,))),
        ("np.sum(fn(x, 1) * y)", ((3, 1, 4), (3, 4))), ("np.sum(fn(x, axis=0) * y)", ((1, 4), (4,))),
        ("np.sum(x.squeeze(0) * y)", ((1, 5), (5,))), ("np.sum(fn(x, (0, 2)) * y)", ((1, 5, 1), (5,))))):
    """Only with `axis` given: zymo types arrays by their number of dimensions, which
    `np.squeeze(x)` would make depend on the shape."""
    def jvp_a(t, ans, a, axis=None): return np.squeeze(t, axis)
    def vjp_a(g, ans, a, axis=None): return np.reshape(g, np.shape(a))

    @classmethod
    def check(cls, pos, kw):
        if len(pos) < 2 and "axis" not in kw:
            return ("np.squeeze without axis= is not supported: the result's number of dimensions would depend "
                    "on the shape; give the axes to remove")
        return None


class expand_dims(Rule, key="numpy.expand_dims", fn=np.expand_dims, **_V, cases=(
        ("fn(a=x, axis=(0, 2)) * y", ((3,), (1, 3, 1))),
        ("np.sum(fn(x, 0) * y)", ((3, 4), (2, 3, 4))), ("fn(x, -1) * y", ((5,), (5, 2))),
        ("z = np.copy(x)\nv = fn(z, 1)\nv[2, 0] = v[2, 0] * v[1, 0]\nreturn z * y", ((5,), (5,))))):
    def jvp_a(t, ans, a, axis): return np.expand_dims(t, axis)
    def vjp_a(g, ans, a, axis): return np.reshape(g, np.shape(a))


class flip(Rule, key="numpy.flip", fn=np.flip, **_V, cases=(
        ("fn(m=x, axis=(0, 1)) * y", ((3, 4), (3, 4))),
        ("fn(x) * y", ((5,), (5,))), ("fn(x, 0) * y", ((3, 4), (3, 4))), ("fn(x, axis=1) * y", ((3, 4), (4,))),
        ("z = np.copy(x)\nv = fn(z)\nv[0] = v[0] * v[1]\nreturn z * y", ((5,), (5,))))):
    def jvp_m(t, ans, m, axis=None): return np.flip(t, axis)
    def vjp_m(g, ans, m, axis=None): return np.flip(g, axis)


class ravel(Rule, key="numpy.ravel", fn=np.ravel, maybe_view=True, cases=(
        ("fn(x) * y", ((3, 4), (12,))), ("x.ravel() * y", ((3, 4), (12,))), ("fn(x.T) * y", ((3, 4), (12,))),
        ("fn(x, 'C') * y", ((3, 4), (12,))), ("fn(a=x, order='C') * y", ((2, 3), (6,))))):
    """C order only (`order='F'`, `'A'`, `'K'` are refused: the derivative would ignore them)."""
    def jvp_a(t, ans, a, order="C"): return np.ravel(t)
    def vjp_a(g, ans, a, order="C"): return np.reshape(g, np.shape(a))

    @classmethod
    def check(cls, pos, kw):
        order = const_value(kw["order"] if "order" in kw else (pos[1] if len(pos) > 1 else "C"))
        if order != "C":
            return f"np.ravel with order={order!r} is not supported (C order only)"
        return None


class flatten(Rule, key="numpy.copy_flat", fn=_rt.flatten, call="_rt.flatten", cases=(
        ("x.flatten() * y", ((3, 4), (12,))), ("z = x.flatten()\nz[0] = z[1] * z[2]\nreturn z * y", ((3, 4), (12,))),
        ("x.flatten('C') * y", ((3, 4), (12,))), ("x.T.flatten(order='C') * y", ((3, 4), (12,))))):
    """`x.flatten()`: always a copy; `x.flatten('C')` too (the frontend refuses other orders)."""
    def jvp_x(t, ans, x): return _rt.flatten(t)
    def vjp_x(g, ans, x): return np.reshape(g, np.shape(x))


class broadcast_to(Rule, key="numpy.broadcast_to", fn=np.broadcast_to, call="_rt.broadcast_to", cases=(
        ("fn(array=x, shape=(2, 3)) * y", ((3,), (2, 3))),
        ("fn(x, (3, 4)) * y", ((4,), (3, 4))), ("fn(x, (2, 3, 4)) * y", ((3, 1), (2, 3, 4))),
        ("fn(x, (3,)) * y", ((), (3,))))):
    """A copy (NumPy's result is a read-only view, whose shadow could not be a view: the
    adjoints of the repeated elements must add up). A write to the base while the copy is
    still read is refused at lowering time (`zymo.ir.specialize.check_copies_of_views`)."""
    copies_view = True

    def jvp_array(t, ans, array, shape): return _rt.broadcast_to(t, shape)
    def vjp_array(g, ans, array, shape): return _rt.unbroadcast(g, array)


class roll(Rule, key="numpy.roll", fn=np.roll, cases=(
        ("fn(a=x, shift=-2) * y", ((5,), (5,))), ("fn(x, shift=1, axis=0) * y", ((3, 4), (3, 4))),
        ("fn(x, 2) * y", ((5,), (5,))), ("fn(x, -1, axis=1) * y", ((3, 4), (3, 4))), ("fn(x, 5) * y", ((3, 4), (3, 4))),
        ("fn(x, (1, 2), axis=(0, 1)) * y", ((3, 4), (3, 4))))):
    def jvp_a(t, ans, a, shift, axis=None): return np.roll(t, shift, axis)
    def vjp_a(g, ans, a, shift, axis=None): return np.roll(g, _rt.negate(shift), axis)


class tile(Rule, key="numpy.tile", fn=np.tile, cases=(
        ("fn(A=x, reps=(2, 1)) * y", ((3,), (2, 3))), ("fn(x, reps=2) * y", ((2, 2), (2, 4))),
        ("fn(x, 3) * y", ((4,), (12,))), ("fn(x, (2, 1)) * y", ((3, 4), (6, 4))), ("fn(x, (2, 2)) * y", ((3,), (2, 6))),
        ("fn(x, 2)", ((),)))):
    def jvp_A(t, ans, A, reps): return np.tile(t, reps)
    def vjp_A(g, ans, A, reps): return _rt.tile_vjp(g, A, reps)


class repeat(Rule, key="numpy.repeat", fn=np.repeat, data_shaped=True, cases=(
        ("fn(a=x, repeats=2, axis=0) * y", ((3,), (6,))), ("fn(x, repeats=3) * y", ((2, 2), (12,))),
        ("fn(x, 2) * y", ((4,), (8,))), ("fn(x, 3, axis=0) * y", ((2, 3), (6, 3))), ("fn(x, 2) * y", ((2, 3), (12,))),
        ("fn(x, np.arange(3), axis=1) * y", ((2, 3), (2, 3))), ("x.repeat(2, axis=1) * y", ((2, 3), (2, 6))))):
    def jvp_a(t, ans, a, repeats, axis=None): return np.repeat(t, repeats, axis)
    def vjp_a(g, ans, a, repeats, axis=None): return _rt.repeat_vjp(g, a, repeats, axis)


class diag(Rule, key="numpy.diag", fn=np.diag, call="_rt.diag", cases=(
        ("fn(x) * y", ((4,), (4, 4))), ("fn(x, 1) * y", ((3,), (4, 4))), ("fn(x, k=-2) * y", ((3,), (5, 5))),
        ("fn(v=x, k=1) * y", ((2,), (3, 3))))):
    """`np.diag` of a vector: a new matrix. Of a matrix NumPy returns a read-only view of the
    diagonal: that call is lowered to `numpy.diag_view` (`specialize`)."""
    def jvp_v(t, ans, v, k=0): return _rt.diag(t, k)
    def vjp_v(g, ans, v, k=0): return _rt.diag_vjp(g, v, k)

    @classmethod
    def specialize(cls, pos, kw):
        v = pos[0] if pos else kw.get("v")
        return "numpy.diag_view" if getattr(getattr(v, "type", None), "ndim", 1) == 2 else None


class diag_view(Rule, key="numpy.diag_view", fn=np.diag, call="_rt.diag", view=True, cases=(
        ("fn(x) * y", ((3, 4), (3,))), ("fn(x, -1) * y", ((4, 4), (3,))), ("fn(x, k=1) * y", ((3, 3), (2,))),
        ("z = np.copy(x)\nd = fn(z)\nz[1, 1] = z[0, 1] * 2.0\nreturn d * y", ((3, 3), (3,))),
        ("z = np.copy(x)\nd = fn(z, 1)\nz[0] = z[0] * z[2]\nreturn np.sum(d * y) * z", ((3, 3), (2,))))):
    """`np.diag` of a matrix: NumPy's read-only view of its k-th diagonal (later writes to
    the matrix show through it), called as `_rt.diag`; the shadow is the writable
    diagonal view of the matrix's shadow."""
    def jvp_v(t, ans, v, k=0): return _rt.diagonal_view(t, k)
    def vjp_v(g, ans, v, k=0): return _rt.diagonal_vjp(g, v, k)


class diagonal(Rule, key="numpy.diagonal", fn=np.diagonal, call="_rt.diagonal", view=True, cases=(
        ("fn(x) * y", ((3, 4), (3,))), ("fn(x, 1) * y", ((4, 4), (3,))), ("x.diagonal() * y", ((4, 3), (3,))),
        ("fn(x, 0, 1, 2) * y", ((2, 3, 3), (2, 3))), ("fn(x, offset=-1, axis1=1, axis2=0) * y", ((3, 4), (3,))),
        ("fn(a=x, axis1=0, axis2=2) * y", ((3, 2, 3), (2, 3))),
        ("z = np.copy(x)\nd = fn(z)\nz[0, 0] = z[1, 0] * 3.0\nreturn d * y", ((3, 3), (3,))),
        ("z = np.copy(x)\nd = fn(z, 0, 1, 2)\nz[0] = z[1] * z[0]\nreturn np.sum(d * y) * z", ((2, 3, 3), (2, 3))))):
    """NumPy's read-only view of the diagonal (later writes to `a` show through it): a view
    rule whose shadow is the writable diagonal view of `a`'s shadow (`_rt.diagonal_view`)."""
    def jvp_a(t, ans, a, offset=0, axis1=0, axis2=1): return _rt.diagonal_view(t, offset, axis1, axis2)
    def vjp_a(g, ans, a, offset=0, axis1=0, axis2=1): return _rt.diagonal_vjp(g, a, offset, axis1, axis2)


class trace(Rule, key="numpy.trace", fn=np.trace, cases=(
        ("fn(x)", ((4, 4),)), ("fn(x, 1)", ((3, 4),)), ("x.trace() * x", ((3, 3),)), ("fn(x, 0, 1, 2) * y", ((2, 3, 3), (2,))))):
    def jvp_a(t, ans, a, offset=0, axis1=0, axis2=1): return np.trace(t, offset, axis1, axis2)
    def vjp_a(g, ans, a, offset=0, axis1=0, axis2=1):
        return _rt.diagonal_vjp(_rt.expand_diag(g, a, offset, axis1, axis2), a, offset, axis1, axis2)


class outer(Rule, key="numpy.outer", fn=np.outer, cases=(
        ("fn(x, y)", ((3,), (4,))), ("fn(x, y)", ((2, 2), (3,))), ("fn(x, x)", ((3,),)))):
    def jvp_a(t, ans, a, b): return np.outer(t, b)
    def jvp_b(t, ans, a, b): return np.outer(a, t)
    def vjp_a(g, ans, a, b): return np.reshape(g @ np.ravel(b), np.shape(a))
    def vjp_b(g, ans, a, b): return np.reshape(np.ravel(a) @ g, np.shape(b))


class inner(Rule, key="numpy.inner", fn=np.inner, cases=(
        ("fn(x, y)", ((4,), (4,))), ("fn(x, y)", ((3, 4), (4,))), ("fn(x, y)", ((3, 4), (2, 4))),
        ("fn(x, y)", ((2, 3, 4), (5, 4))), ("fn(x, x)", ((4,),)))):
    def jvp_a(t, ans, a, b): return np.inner(t, b)
    def jvp_b(t, ans, a, b): return np.inner(a, t)
    def vjp_a(g, ans, a, b): return _rt.inner_vjp_a(g, a, b)
    def vjp_b(g, ans, a, b): return _rt.inner_vjp_b(g, a, b)


class tensordot(Rule, key="numpy.tensordot", fn=np.tensordot, cases=(
        ("fn(x, y)", ((2, 3, 4), (3, 4, 5))), ("fn(x, y, 1)", ((3, 4), (4, 2))), ("fn(x, y, axes=0)", ((3,), (2,))),
        ("fn(x, y, axes=((0, 1), (1, 0)))", ((2, 3, 4), (3, 2))))):
    def jvp_a(t, ans, a, b, axes=2): return np.tensordot(t, b, axes)
    def jvp_b(t, ans, a, b, axes=2): return np.tensordot(a, t, axes)
    def vjp_a(g, ans, a, b, axes=2):
        return _rt.einsum_vjp(g, _rt.tensordot_subscripts(np.ndim(a), np.ndim(b), axes), 0, a, b, None)
    def vjp_b(g, ans, a, b, axes=2):
        return _rt.einsum_vjp(g, _rt.tensordot_subscripts(np.ndim(a), np.ndim(b), axes), 1, a, b, None)


_EINSUM_KW = ("optimize",)


def _einsum_check(pos, kw):
    extra = sorted(set(kw) - set(_EINSUM_KW))
    if extra:
        return f"np.einsum with {', '.join(extra)}= is not supported (only optimize=, which the derivative ignores)"
    s = const_value(pos[0]) if pos else None
    if not isinstance(s, str):
        return ("np.einsum needs its subscripts as a string constant (the operand-list form "
                "einsum(a, [0, 1], ...) is not supported)")
    if len(pos) - 1 > _EINSUM_MAX:
        return (f"np.einsum of more than {_EINSUM_MAX} operands is not supported; split it into several calls")
    if len(pos) < 2:
        return "np.einsum needs at least one operand"
    return None


_EINSUM_MAX = 6


def einsum_specialize(pos, kw):
    """`numpy.einsum_view` where the constant subscripts make NumPy return a view of the one
    operand (a permutation of its axes or a diagonal, `'ji'`, `'ii->i'`, `'...ij->...ji'`)."""
    s = const_value(pos[0]) if pos else None
    if not isinstance(s, str) or len(pos) != 2:
        return None
    nd = getattr(getattr(pos[1], "type", None), "ndim", None)
    if nd is None or not _rt.einsum_is_view(s, [nd]):
        return None
    return "numpy.einsum_view"


class einsum(Rule, key="numpy.einsum", fn=np.einsum, cases=(
        ("fn('ij,jk->ik', x, y)", ((3, 4), (4, 2))), ("fn('i,i', x, y)", ((4,), (4,))),
        ("fn('ij->j', x)", ((3, 4),)), ("fn('ij,j,i->', x, y, z)", ((3, 4), (4,), (3,))),
        ("fn('bij,bjk->bik', x, y)", ((2, 3, 4), (2, 4, 5))), ("fn('ij,kl->ijkl', x, y)", ((2, 3), (2, 2))),
        ("fn('ij,ij->i', x, x)", ((3, 4),)),
        ("fn('i,j->ij', x, y) * fn('ij->i', z)[:, None]", ((3,), (4,), (3, 4))),
        # ellipses (broadcast batch dimensions included), implicit outputs
        ("fn('...ij,...jk->...ik', x, y)", ((2, 3, 4), (2, 4, 5))),
        ("fn('...ij,...jk->...ik', x, y)", ((2, 3, 4), (4, 5))),
        ("fn('...ij,...jk', x, y)", ((3, 4), (1, 4, 2))), ("fn('i...->...', x)", ((3, 4),)),
        ("fn('...i,...i', x, y)", ((2, 3), (3,))),
        ("fn('ij,ij->ij', x, y)", ((1, 3), (2, 3))), ("fn('ij,jk->ik', x, y)", ((2, 1), (3, 4))),
        # labels repeated within an operand: traces and diagonals that are sums or products
        ("fn('ii', x)", ((3, 3),)), ("fn('ii->', x)", ((4, 4),)), ("fn('ii,i->i', x, y)", ((3, 3), (3,))),
        ("fn('iij->j', x)", ((3, 3, 2),)), ("fn('ij,jj->i', x, y)", ((2, 3), (3, 3))),
        ("fn('...ii->...', x)", ((2, 3, 3),)),
        # four to six operands, optimize= (accepted, ignored by the derivative)
        ("fn('ij,jk,kl,l->i', x, y, z, w)", ((2, 3), (3, 4), (4, 2), (2,))),
        ("fn('i,i,i,i,i->', x, y, x, y, x)", ((3,), (3,))),
        ("fn('ij,jk->ik', x, y, optimize=True)", ((3, 4), (4, 2))),
        ("fn('ij,jk,kl->il', x, y, z, optimize='greedy')", ((2, 3), (3, 4), (4, 2))),
        ("fn('i,i->', x, y, optimize=False)", ((4,), (4,))))):
    """Any number of operands up to six, ellipses, labels repeated within an operand (traces,
    diagonals), implicit outputs and `optimize=` (ignored by the derivative). A call that
    returns a view of its operand (one operand, every label kept) is lowered to
    `numpy.einsum_view` instead (`einsum_specialize`)."""
    def jvp_a(t, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_jvp(subscripts, 0, t, a, b, c, d, e, f)
    def jvp_b(t, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_jvp(subscripts, 1, t, a, b, c, d, e, f)
    def jvp_c(t, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_jvp(subscripts, 2, t, a, b, c, d, e, f)
    def jvp_d(t, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_jvp(subscripts, 3, t, a, b, c, d, e, f)
    def jvp_e(t, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_jvp(subscripts, 4, t, a, b, c, d, e, f)
    def jvp_f(t, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_jvp(subscripts, 5, t, a, b, c, d, e, f)
    def vjp_a(g, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_vjp(g, subscripts, 0, a, b, c, d, e, f)
    def vjp_b(g, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_vjp(g, subscripts, 1, a, b, c, d, e, f)
    def vjp_c(g, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_vjp(g, subscripts, 2, a, b, c, d, e, f)
    def vjp_d(g, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_vjp(g, subscripts, 3, a, b, c, d, e, f)
    def vjp_e(g, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_vjp(g, subscripts, 4, a, b, c, d, e, f)
    def vjp_f(g, ans, subscripts, a, b=None, c=None, d=None, e=None, f=None):
        return _rt.einsum_vjp(g, subscripts, 5, a, b, c, d, e, f)

    @classmethod
    def check(cls, pos, kw):
        return _einsum_check(pos, kw)

    @classmethod
    def specialize(cls, pos, kw):
        return einsum_specialize(pos, kw)


class einsum_view(Rule, key="numpy.einsum_view", fn=np.einsum, call="np.einsum", **_V, cases=(
        ("fn('ji', x) * y", ((3, 4), (4, 3))), ("fn('ij', x) * y", ((3, 4), (3, 4))),
        ("fn('ij->ji', x, optimize=True) * y", ((3, 4), (4, 3))), ("fn('ii->i', x) * y", ((3, 3), (3,))),
        ("fn('...ij->...ji', x) * y", ((2, 3, 4), (2, 4, 3))), ("fn('i', x) * y", ((4,), (4,))),
        ("fn('iji->ij', x) * y", ((3, 2, 3), (3, 2))),
        ("z = np.copy(x)\nv = fn('ji', z)\nv[1, 0] = v[1, 0] * v[0, 1]\nreturn z * y", ((3, 4), (3, 4))),
        ("z = np.copy(x)\nv = fn('ii->i', z)\nv[0] = v[1] * v[2]\nreturn z * y", ((3, 3), (3, 3))))):
    """`np.einsum` of one operand that keeps every label: NumPy returns a writable view of the
    operand (its axes permuted, a diagonal where a label repeats), so this is a `view` rule:
    the shadow is the same einsum of the operand's shadow. The frontend's call is lowered to
    `numpy.einsum` and renamed to this key from its constant subscripts (`einsum_specialize`,
    applied by `zymo.ir.specialize`)."""
    def jvp_a(t, ans, subscripts, a, optimize=False): return np.einsum(subscripts, t)
    def vjp_a(g, ans, subscripts, a, optimize=False): return _rt.einsum_vjp(g, subscripts, 0, a)


class concat2(Rule, key="zymo.concat2", fn=_rt.concat2, call="_rt.concat2", cases=(
        ("fn(x, y, 0) * z", ((3,), (4,), (7,))), ("fn(x, y, 1) * z", ((2, 3), (2, 2), (2, 5))),
        ("fn(x, y, None) * z", ((2, 2), (3,), (7,))), ("fn(x, x, 0)", ((3,),)))):
    """Two arrays joined along `axis` (None: flattened); `np.concatenate`, `np.stack`,
    `np.hstack` and `np.vstack` lower to chains of it."""
    def jvp_a(t, ans, a, b, axis=0): return _rt.concat2(t, np.zeros_like(b), axis)
    def jvp_b(t, ans, a, b, axis=0): return _rt.concat2(np.zeros_like(a), t, axis)
    def vjp_a(g, ans, a, b, axis=0): return _rt.split_first(g, a, axis)
    def vjp_b(g, ans, a, b, axis=0): return _rt.split_last(g, b, axis)


class _Joined(Rule):
    """Lowered by the frontend (to `zymo.concat2` and `numpy.expand_dims`): never an op itself."""
    via = ("zymo.concat2",)


class concatenate(_Joined, key="numpy.concatenate", fn=np.concatenate, cases=(
        ("fn((x, y)) * z", ((3,), (4,), (7,))), ("fn((x, y, x), axis=1) * z", ((2, 3), (2, 1), (2, 7))),
        ("fn((x, y), axis=None) * z", ((2, 3), (4,), (10,))), ("fn((x, x * 2.0)) * y", ((2, 3), (4, 3))))):
    pass


class stack(_Joined, key="numpy.stack", fn=np.stack, cases=(
        ("fn((x, y)) * z", ((3,), (3,), (2, 3))), ("fn((x, y, x), axis=1) * z", ((2, 3), (2, 3), (2, 3, 3))),
        ("fn((x, y), axis=-1) * z", ((4,), (4,), (4, 2))))):
    pass


class hstack(_Joined, key="numpy.hstack", fn=np.hstack, cases=(
        ("fn((x, y)) * z", ((3,), (4,), (7,))), ("fn((x, y)) * z", ((2, 3), (2, 1), (2, 4))))):
    pass


class vstack(_Joined, key="numpy.vstack", fn=np.vstack, cases=(
        ("fn((x, y)) * z", ((3,), (3,), (2, 3))), ("fn((x, y)) * z", ((2, 3), (1, 3), (3, 3))))):
    pass
