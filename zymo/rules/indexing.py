"""Advanced (NumPy "fancy") indexing: integer arrays and boolean masks, and `np.add.at`.

Contract:
- An index is *advanced* when one of its parts is an array value (an int array or a
  bool mask; a list of ints is converted to an int array by `zymo.index_array`).
  `getitem` and `setitem` ops keep such indices (the IR is unchanged); this module
  says what they mean to the analyses and transforms:
  - an advanced read `y = x[idx]` is a COPY (`is_advanced`): `y` is fresh memory with
    roots of its own, active when `x` is; its tangent is `dx[idx]`, its adjoint is
    scattered back with repetition (`_rt.scatter_add`, i.e. `np.add.at`).
  - an advanced write `x[idx] = v` writes into `x`'s memory (the overwrite analysis
    treats it as a write of the whole base, as for any store). With repeated indices
    NumPy keeps the LAST value written to each element; the adjoint of `v` follows
    that exactly (`_rt.store_adjoint` gives the other occurrences zero).
  - `x[idx] += v` is lowered as NumPy runs it: a read (a copy), an add, a write; so
    repeated indices add once, and the derivative agrees.
- `result_type` types an advanced read by evaluating it on example arrays.
- `np.add.at(a, idx, v)` is the rule `numpy.add.at`: the frontend lowers it to a call
  whose `out=` is `a` (`_rt.add_at(a, idx, v, out=a)`, unbuffered accumulation); the
  adjoint of `a` passes through, the adjoint of `v` gathers `da[idx]` with repetition.
- Refused (at the user's line, by the frontend): float arrays as indices, a bool
  scalar index, indexing a list with an array, an index mixing an advanced part
  with `None`/`...` in a read of a 0-d result.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import runtime as _rt
from ..errors import Loc, ZymoTypeError
from ..ir import types as T
from ..ir.core import Op, Value
from .registry import BY_METHOD, Rule


def is_index_array(v: Any) -> bool:
    """Whether index part `v` is an advanced index (an int array or a bool mask)."""
    return isinstance(v, Value) and isinstance(v.type, T.Array) and v.type.dtype in ("int64", "bool")


def is_advanced(op: Op) -> bool:
    """Whether a `getitem`/`setitem` op indexes with an array (a gather / scatter)."""
    if op.kind not in ("getitem", "setitem"):
        return False
    first = 1 if op.kind == "getitem" else 2
    return any(isinstance(v.type, T.Array) for v in op.args[first:])


def result_type(obj: T.Array, index: tuple, loc: Loc) -> T.Type:
    """Type of `obj[index]` when `index` has an advanced part: NumPy's own answer on
    example arrays (every dimension 2, int indices 0, masks all True)."""
    def ex(p: Any) -> Any:
        if isinstance(p, Value):
            if isinstance(p.type, T.Array):
                return np.zeros((2,) * p.type.ndim, np.int64) if p.type.dtype == "int64" else \
                    np.ones((2,) * p.type.ndim, bool)
            return p.const if p.is_const else 1
        if isinstance(p, slice):
            return slice(ex(p.start), ex(p.stop), ex(p.step))
        return p

    try:
        out = np.zeros((2,) * obj.ndim, obj.dtype)[tuple(ex(p) for p in index)]
    except IndexError as e:
        raise ZymoTypeError(f"cannot index an array of {obj.ndim} dimensions this way: {e}", loc) from None
    if np.ndim(out) == 0:
        return T.scalar_of_dtype(obj.dtype)
    return T.Array(obj.dtype, out.ndim)


def index_expr(e, op: Op, name=None) -> str:
    """The op's index as one Python expression usable as a call argument: a tuple in
    which slices are written `slice(a, b, c)` (`x[(i, slice(None, None, None))]` is `x[i, :]`)."""
    namer = name or e.n
    tree = op.attrs["index"]
    parts = list(tree[1]) if tree[0] == "t" else [tree]

    def one(t: Any) -> str:
        if t[0] == "s":
            return "slice(" + ", ".join(one(u) for u in t[1:]) + ")"
        return e.tree(t, op, namer)

    return "(" + ", ".join(one(t) for t in parts) + ",)"


def index_values(op: Op) -> list[Value]:
    """The values in an indexing op's index (after the base and, for a store, the value)."""
    first = 1 if op.kind == "getitem" else 2
    return op.args[first:]


# -- rules -----------------------------------------------------------------------
class index_array(Rule, key="zymo.index_array", fn=_rt.index_array, call="_rt.index_array",
                  nondiff=True, alloc=True, cases=(("x[fn((0, 2, 2))] * y", ((5,), (3,))),)):
    """`x[[0, 2, 2]]`: a list of ints written in the index becomes an int array."""


_AT = {"fn": np.add.at}  # cases call NumPy's (in place), not the rule's functional form


class add_at(Rule, key="numpy.add.at", fn=_rt.add_at, call="_rt.add_at", out=True, cases=(
        ("o = x.copy()\nfn(o, z, y)\nreturn o", ((5,), (4,), ("const", np.array([0, 2, 2, 4]))), _AT),
        ("o = x * 1.0\nfn(o, z, y)\nreturn o * o", ((3, 2), (3, 2), ("const", np.array([1, 1, 0]))), _AT),
        ("o = x * 1.0\nfn(o, z, 2.0 * y)\nreturn o", ((4,), (), ("const", np.array([3, 0, 3]))), _AT))):
    """`np.add.at(a, idx, v)`: unbuffered `a[idx] += v` (repeated indices all add)."""
    inplace_arg = 0  # the frontend passes `a` as out=: the call writes a's memory
    def jvp_a(t, ans, a, idx, v): return t
    def jvp_v(t, ans, a, idx, v): return _rt.add_at(np.zeros_like(a), idx, t)
    def vjp_a(g, ans, a, idx, v): return g
    def vjp_v(g, ans, a, idx, v): return _rt.unbroadcast(g[idx], v)


BY_METHOD[(id(np.add), "at")] = add_at.key  # user code calls the bound method np.add.at


def _add_at_type(pos: list, kw: dict) -> T.Type:
    return pos[0].type  # example arrays (all dimensions 1) cannot stand for the indices


def _register_types() -> None:
    from ..analysis import types as TI

    TI.RESULT_TYPES[add_at.key] = _add_at_type


_register_types()
