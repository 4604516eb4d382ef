"""Type inference from the concrete values of a call.

Contract: `type_of_value(obj)` gives the IR type of an argument (raising
`ZymoTypeError` for what zymo refuses, such as object arrays). The frontend
calls `infer_prim` and `infer_getitem` while it builds each op, so every value
has a type as soon as it exists (loops are re-lowered until their carried types
are stable, as Julia specialises on argument types).

`infer_prim` evaluates the primal on small example values (arrays of the right
dtype and ndim with every dimension 1; constants as they are), so a rule needs
no hand-written type function unless the example cannot stand for the real
call; `RESULT_TYPES` holds those few exceptions (e.g. `reshape`, whose result
ndim is the length of the shape).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import Loc, ZymoTypeError
from ..ir import types as T
from ..ir.core import NOCONST, Value


def type_of_value(obj: Any, what: str = "argument") -> T.Type:
    if isinstance(obj, (bool, np.bool_)):
        return T.BOOL
    if isinstance(obj, (int, np.integer)):
        return T.INT
    if isinstance(obj, np.float32):
        return T.F32
    if isinstance(obj, (float, np.floating)):
        return T.F64
    if isinstance(obj, np.complex64):
        return T.C64
    if isinstance(obj, (complex, np.complexfloating)):
        if isinstance(obj, np.complexfloating) and obj.dtype.name != "complex128":
            raise ZymoTypeError(f"complex numbers of dtype {obj.dtype} are not supported ({what})",
                                hint="use complex128 or complex64")
        return T.C128
    if isinstance(obj, np.ndarray):
        if obj.dtype.name not in ("float64", "float32", "complex128", "complex64", "bool") and \
                not np.issubdtype(obj.dtype, np.integer):
            raise ZymoTypeError(f"arrays of dtype {obj.dtype} are not supported ({what})")
        name = obj.dtype.name if not np.issubdtype(obj.dtype, np.integer) else "int64"
        return T.Array(name, obj.ndim)
    if obj is None:
        return T.NONE
    if isinstance(obj, list):
        if not obj:
            raise ZymoTypeError(f"empty lists are not supported ({what})")
        elts = {type_of_value(o, what) for o in obj}
        if len(elts) != 1:
            raise ZymoTypeError(
                f"lists whose elements have different types are not supported ({what}: {sorted(map(str, elts))})",
                hint="use a tuple, or make all elements the same type",
            )
        return T.List(elts.pop())
    raise ZymoTypeError(f"values of type {type(obj).__name__} are not supported ({what})")


def example(t: T.Type, const: Any = NOCONST) -> Any:
    """A small value of type `t` that stands for any value of it in `infer_prim`."""
    if const is not NOCONST:
        return const
    if isinstance(t, T.Scalar):
        return {"f64": 1.0, "f32": np.float32(1.0), "c128": 1.0 + 1.0j, "c64": np.complex64(1.0 + 1.0j), "int": 1,
                "bool": True}[t.kind]
    if isinstance(t, T.Array):
        return np.ones((1,) * t.ndim, dtype=t.dtype)
    if isinstance(t, T.List):
        return [example(t.elt)]
    if isinstance(t, T.Static):
        return t.obj
    if isinstance(t, T.NoneT):
        return None
    raise AssertionError(t)


def type_of_result(obj: Any) -> T.Type:
    if isinstance(obj, np.ndarray) and obj.ndim == 0:
        return T.scalar_of_dtype(obj.dtype)
    if isinstance(obj, np.ndarray) and np.issubdtype(obj.dtype, np.integer):
        return T.Array("int64", obj.ndim)
    return type_of_value(obj, "result")


def _reshape_type(pos, kw):
    x, shape = pos[0], pos[1] if len(pos) > 1 else kw["shape"]
    nd = len(shape) if isinstance(shape, tuple) else 1
    return T.Array(x.type.dtype, nd)


def _irfft_type(pos, kw):  # a size-1 example has no valid default length (2 * (1 - 1) points)
    a = pos[0] if pos else kw["a"]
    return T.Array("float32" if a.type.dtype in ("complex64", "float32") else "float64", a.type.ndim)


RESULT_TYPES: dict[str, Callable[..., T.Type]] = {
    "numpy.reshape": _reshape_type,
    "numpy.fft.irfft": _irfft_type,
    "builtins.print": lambda pos, kw: T.NONE,  # never call print at compile time
}


def infer_prim(key: str, fn: Any, pos: list, kw: dict, loc: Loc) -> T.Type | tuple:
    """Result type of a primitive; `pos`/`kw` hold types (or Python constants / tuples)."""
    if key in RESULT_TYPES:
        return RESULT_TYPES[key](pos, kw)
    try:
        ex_pos = [_example_tree(p) for p in pos]
        ex_kw = {k: _example_tree(v) for k, v in kw.items()}
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # example values (size-1 dimensions) may warn: var(ddof=1)
            out = fn(*ex_pos, **ex_kw)
    except Exception as e:  # the real call would fail the same way
        raise ZymoTypeError(
            f"cannot call {key} with arguments of these types: {e}", loc,
            hint="check the argument types; zymo evaluates the call on example values",
        ) from None
    if isinstance(out, tuple):
        return tuple(type_of_result(o) for o in out)
    return type_of_result(out)


def _example_tree(p: Any) -> Any:
    if isinstance(p, Value):
        return example(p.type, p.const)
    if isinstance(p, tuple):
        return _distinct_ints(tuple(_example_tree(q) for q in p), p)
    if isinstance(p, slice):
        return slice(_example_tree(p.start), _example_tree(p.stop), _example_tree(p.step))
    return p


def _distinct_ints(ex: tuple, p: tuple) -> tuple:
    """The examples of a tuple whose ints are not constants (arguments: `np.sum(x, axis=a)` with
    `a = (0, 1)`) made distinct from one another and from the tuple's constant ints, 1, 0, 2, 3, ...
    in that order: a tuple of ints is often axes, where NumPy refuses a repeated one ("duplicate
    value in 'axis'", a refusal of a valid call when each example was 1); as a shape it is as good."""
    free = [k for k, q in enumerate(p) if isinstance(q, Value) and q.const is NOCONST and q.type == T.INT]
    if len(free) < 2 and not (free and any(isinstance(e, int) and e == 1 for e in ex)):
        return ex
    taken = {e for k, e in enumerate(ex) if k not in free and isinstance(e, int)}
    out = list(ex)
    candidates = iter([1, 0, *range(2, len(ex) + len(taken) + 2)])
    for k in free:
        v = next(c for c in candidates if c not in taken)
        out[k] = v
    return tuple(out)


def infer_getitem(obj: T.Type, index: tuple, loc: Loc) -> T.Type:
    """Type of `obj[index]`; `index` is a tuple of Value | slice | None | Ellipsis."""
    if isinstance(obj, T.List):
        if len(index) != 1 or not (isinstance(index[0], Value) and index[0].type in (T.INT, T.BOOL)):
            raise ZymoTypeError("a list can only be indexed by one integer here", loc,
                                hint="convert the list to an array to slice it")
        return obj.elt
    if not isinstance(obj, T.Array):
        raise ZymoTypeError(f"cannot index a value of type {obj}", loc)
    if any(isinstance(ix, Value) and isinstance(ix.type, T.Array) for ix in index):
        from ..rules import indexing  # an advanced index: integer arrays, boolean masks

        return indexing.result_type(obj, index, loc)
    ndim = obj.ndim
    consumed = 0
    added = 0
    ellipsis = False
    for ix in index:
        if ix is None:
            added += 1
        elif ix is Ellipsis:
            ellipsis = True
        elif isinstance(ix, slice):
            consumed += 1
        elif isinstance(ix, Value) and ix.type in (T.INT,):
            consumed += 1
            added -= 1
        else:
            raise ZymoTypeError(
                "indices must be integers, slices, integer arrays or boolean masks", loc,
                hint="index with integers, slices, integer arrays or boolean arrays",
            )
    if consumed > ndim:
        raise ZymoTypeError(f"too many indices for an array of {ndim} dimensions", loc)
    result_ndim = ndim + added
    if result_ndim == 0 and not ellipsis:
        return T.scalar_of_dtype(obj.dtype)
    return T.Array(obj.dtype, result_ndim)
