"""NumPy calls that return several arrays, lowered as tuples of single-result ops.

Contract: `lower_several(lw, fn, pos, kw, node)` returns the binding of a call to one of the
functions below (a tuple of bindings, as the frontend keeps tuples), or NotImplemented for any
other callable. The parts are ops the transforms already know, so their derivatives need no
rule of their own:
- `np.split(ary, indices_or_sections, axis=0)` and `np.array_split(...)` (and `hsplit`,
  `vsplit`, `dsplit`, splits along axis 1, 0, 2): slices of `ary`
  along `axis` (views, as NumPy's), with a constant number of sections or constant split
  indices; the section lengths come from the array's length at run time (`array_split` gives
  the first `len % n` sections one element more), and `np.split` raises NumPy's ValueError
  when the sections cannot be equal;
- `np.gradient(f, *varargs, axis=None, edge_order=1)` of an n-d array without one axis: one
  `np.gradient(f, h, axis=k)` per axis (NumPy returns them as a list);
- `np.atleast_1d/2d/3d(a, b, ...)` of several arrays: one call per array;
- `scipy.special.logsumexp(..., return_sign=True)`: `(log|s| + m, sign(s))` with `m` the
  maximum and `s` the scaled sum, from the rules of max, exp, sum, log, abs and sign.
NumPy returns lists for the first two; the tuple binding supports what code does with them
(unpacking, indexing by constants, `len`, iteration).
"""
from __future__ import annotations

import ast
import sys
from typing import Any, cast

import numpy as np

from ..errors import UnsupportedCall, ZymoTypeError
from ..ir import types as T
from ..ir.core import Value
from ..rules.registry import NOT_CONST, const_value
from .bindings import S

# what the frontend lowers here without a rule of its own (read by `rules.coverage`)
LOWERED = (np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit)
_SPLIT_AXIS = {"hsplit": 1, "vsplit": 0, "dsplit": 2}


def lower_several(lw: Any, fn: Any, pos: list, kw: dict, node: ast.Call) -> Any:
    if fn is np.split or fn is np.array_split:
        return _split(lw, fn, pos, kw, node)
    if fn in (np.hsplit, np.vsplit, np.dsplit):  # np.split along axis 1, 0, 2 (hsplit of 1-d: 0)
        args = _bind(lw, fn, pos, kw, node)
        ary = _array(lw, args["ary"], f"np.{fn.__name__}", node)
        ndim = cast(T.Array, ary.type).ndim
        axis = _SPLIT_AXIS[fn.__name__] if not (fn is np.hsplit and ndim == 1) else 0
        if axis >= ndim:
            raise lw.error(ZymoTypeError, f"np.{fn.__name__} needs an array of at least {axis + 1} dimensions", node)
        return _split(lw, np.split, [ary, args["indices_or_sections"]], {"axis": axis}, node)
    if fn is np.gradient and _per_axis(pos, kw):
        return _gradient(lw, pos, kw, node)
    if fn in (np.atleast_1d, np.atleast_2d, np.atleast_3d) and len(pos) > 1 and not kw:
        return tuple(lw.call(S(fn), [p], {}, node) for p in pos)
    if _is_logsumexp(fn) and const_value(_bind(lw, fn, pos, kw, node).get("return_sign", False)) is True:
        return _logsumexp_sign(lw, fn, pos, kw, node)
    return NotImplemented


def _is_logsumexp(fn: Any) -> bool:
    special = sys.modules.get("scipy.special")  # a function that calls it has imported it: never import here
    return special is not None and fn is getattr(special, "logsumexp", None)


def _logsumexp_sign(lw: Any, fn: Any, pos: list, kw: dict, node: ast.Call) -> tuple:
    """`logsumexp(a, axis, b, keepdims, return_sign=True)`: with `m = max(a)` and
    `s = sum(b * exp(a - m))`, the pair `(log|s| + m, sign(s))` (SciPy's own formula; the
    derivative through `m` cancels). The sign has no derivative."""
    args = _bind(lw, fn, pos, kw, node)
    a = args["a"]
    axis, keepdims = args.get("axis", S(None)), const_value(args.get("keepdims", False))
    b = args.get("b")
    loc = lw.loc(node)
    m = lw.call(S(np.max), [a], {"axis": axis, "keepdims": S(True)}, node)
    e = lw.call(S(np.exp), [lw.b.prim("sub", [a, m], {}, loc, "t")], {}, node)
    if b is not None and not (isinstance(b, S) and b.obj is None):
        e = lw.b.prim("mul", [b, e], {}, loc, "t")
    s = lw.call(S(np.sum), [e], {"axis": axis, "keepdims": S(True)}, node)
    lse = lw.b.prim("add", [lw.call(S(np.log), [lw.call(S(np.abs), [s], {}, node)], {}, node), m], {}, loc, "lse")
    sign = lw.call(S(np.sign), [s], {}, node)
    if keepdims is not True:
        lse = lw.call(S(np.squeeze), [lse], {"axis": axis}, node) if const_value(axis) is not None else \
            lw.call(S(np.sum), [lse], {}, node)
        sign = lw.call(S(np.squeeze), [sign], {"axis": axis}, node) if const_value(axis) is not None else \
            lw.call(S(np.sum), [sign], {}, node)
    return lse, sign


def _bind(lw: Any, fn: Any, pos: list, kw: dict, node: ast.Call) -> dict:
    import inspect

    try:
        return dict(inspect.signature(fn).bind(*pos, **kw).arguments)
    except TypeError as e:
        raise lw.error(UnsupportedCall, f"np.{fn.__name__}: {e}", node) from None


def _array(lw: Any, b: Any, name: str, node: ast.Call) -> Value:
    if not (isinstance(b, Value) and isinstance(b.type, T.Array) and b.type.ndim >= 1):
        raise lw.error(ZymoTypeError, f"{name} takes an array of at least one dimension here", node)
    return b


def _split(lw: Any, fn: Any, pos: list, kw: dict, node: ast.Call) -> tuple:
    name = f"np.{fn.__name__}"
    args = _bind(lw, fn, pos, kw, node)
    ary = _array(lw, args["ary"], name, node)
    axis = const_value(args.get("axis", 0))
    ndim = cast(T.Array, ary.type).ndim
    if not isinstance(axis, int) or not -ndim <= axis < ndim:
        raise lw.error(UnsupportedCall, f"{name} needs a constant axis of the array here", node)
    axis %= ndim
    ios = const_value(lw.freeze(args["indices_or_sections"], node))  # a list literal of indices: its tuple
    loc = lw.loc(node)

    def part(lo: Any, hi: Any) -> Value:
        index = (slice(None),) * axis + (slice(lo, hi),)
        return lw.b.getitem(ary, index, loc, "part")

    if isinstance(ios, (tuple, list)) and all(isinstance(i, int) for i in ios):
        bounds = [None, *ios, None]
        return tuple(part(bounds[k], bounds[k + 1]) for k in range(len(bounds) - 1))
    if not isinstance(ios, int) or isinstance(ios, bool) or ios is NOT_CONST or ios <= 0:
        raise lw.error(UnsupportedCall, f"{name} needs a constant number of sections (a positive int) or constant "
                       "split indices here", node, hint="the number of parts must be known when zymo reads the code")
    n = ios
    length = lw.b.prim("zymo.dim", [ary, axis], {}, loc, "n")
    if fn is np.split:
        rem = lw.b.prim("mod", [length, lw.b.const(n, loc)], {}, loc, "rem")
        uneven = lw.b.prim("ne", [rem, lw.b.const(0, loc)], {}, loc, "uneven")
        lw.lower_if(uneven, lambda: lw.raise_(ValueError, ["array split does not result in an equal division"], node),
                    lambda: None, node)
    size = lw.b.prim("floordiv", [length, lw.b.const(n, loc)], {}, loc, "size")
    extra = lw.b.prim("mod", [length, lw.b.const(n, loc)], {}, loc, "extra") if fn is np.array_split else None

    def start(k: int) -> Any:
        if k == 0:
            return None
        s = lw.b.prim("mul", [size, lw.b.const(k, loc)], {}, loc, "start")
        if extra is not None:  # the first `extra` sections are one longer
            s = lw.b.prim("add", [s, lw.b.prim("builtins.min", [extra, lw.b.const(k, loc)], {}, loc, "m")],
                          {}, loc, "start")
        return s

    return tuple(part(start(k), start(k + 1) if k + 1 < n else None) for k in range(n))


def _per_axis(pos: list, kw: dict) -> bool:
    """`np.gradient` of an n-d array (n > 1) without `axis=`: one result per axis."""
    f = pos[0] if pos else kw.get("f")
    return (isinstance(f, Value) and isinstance(f.type, T.Array) and f.type.ndim > 1
            and const_value(kw.get("axis")) is None)


def _gradient(lw: Any, pos: list, kw: dict, node: ast.Call) -> tuple:
    f = pos[0] if pos else kw["f"]
    spacing = list(pos[1:])
    rest = {k: v for k, v in kw.items() if k not in ("f", "axis")}
    nd = f.type.ndim
    if len(spacing) not in (0, 1, nd):
        raise lw.error(UnsupportedCall, "np.gradient takes no spacing, one, or one per axis", node)
    out = []
    for k in range(nd):
        h = [] if not spacing else [spacing[0] if len(spacing) == 1 else spacing[k]]
        out.append(lw.call(S(np.gradient), [f, *h], {**rest, "axis": k}, node))
    return tuple(out)
