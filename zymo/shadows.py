"""Shadows of Python data: `make_zero`, `make_zero_` and structural checks.

Contract: `make_zero(obj)` returns a structurally equal object of zeros (floats
become 0.0, arrays zeros of the same shape and dtype, tuples, lists, dicts,
namedtuples, dataclasses and instances of ordinary classes are rebuilt (without
calling `__init__`), a function gets a copy whose closure cells and defaults hold
shadows of what it captured; anything reachable twice gets one shadow; ints,
bools, strings, None, modules, classes and other objects are shared).
`make_zero_(shadow)` zeroes arrays, list items, float attributes, dict values and
closure cells in place (frozen records and tuples are immutable: only the memory
inside them is zeroed) and returns the shadow. `check_shadow(primal, shadow,
where)` raises `ZymoUsageError` naming the first place where the two differ.
"""
from __future__ import annotations

import types
from typing import Any

import numpy as np

from .errors import ZymoUsageError
from .frontend.objects import get_field, record, set_field


def make_zero(obj: Any, _memo: dict | None = None) -> Any:
    memo = {} if _memo is None else _memo
    if id(obj) in memo:
        return memo[id(obj)]
    if isinstance(obj, np.ndarray):
        out = np.zeros_like(obj)
    elif isinstance(obj, (bool, np.bool_, int, np.integer, str)) or obj is None:
        return obj
    elif isinstance(obj, (float, np.floating)):
        return type(obj)(0.0)
    elif isinstance(obj, tuple) and record(obj) is None:
        return tuple(make_zero(o, memo) for o in obj)
    elif isinstance(obj, list):
        out = []
        memo[id(obj)] = out
        out.extend(make_zero(o, memo) for o in obj)
        return out
    elif isinstance(obj, types.FunctionType):
        return _zero_function(obj, memo)
    elif record(obj) is not None:
        return _zero_record(obj, memo)
    elif isinstance(obj, tuple):
        return tuple(make_zero(o, memo) for o in obj)
    else:
        return obj  # modules, classes, builtins, other objects: no derivative, shared
    memo[id(obj)] = out
    return out


def _zero_function(fn: types.FunctionType, memo: dict) -> Any:
    if not fn.__closure__ and not fn.__defaults__:
        return fn
    fresh = [c for c in fn.__closure__ or () if id(c) not in memo]
    for c in fresh:
        memo[id(c)] = types.CellType()  # filled below: a cell may hold the function itself
    out = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, None,
                             tuple(memo[id(c)] for c in fn.__closure__) if fn.__closure__ else None)
    out.__dict__.update(fn.__dict__)
    memo[id(fn)] = out
    for c in fresh:
        try:
            memo[id(c)].cell_contents = make_zero(c.cell_contents, memo)
        except ValueError:  # an empty cell
            pass
    if fn.__defaults__:
        out.__defaults__ = tuple(make_zero(d, memo) for d in fn.__defaults__)
    return out


def _zero_record(obj: Any, memo: dict) -> Any:
    kind, fields = record(obj)
    if kind == "dict":
        out: Any = {}
        memo[id(obj)] = out
        out.update((k, make_zero(v, memo)) for k, v in fields)
        return out
    if isinstance(obj, tuple):  # a namedtuple
        return type(obj)(*(make_zero(v, memo) for _, v in fields))
    out = object.__new__(type(obj))
    memo[id(obj)] = out
    for k, v in fields:
        object.__setattr__(out, k, make_zero(v, memo))
    return out


def make_zero_(shadow: Any, _seen: set | None = None) -> Any:
    seen = set() if _seen is None else _seen
    if id(shadow) in seen:
        return shadow
    seen.add(id(shadow))
    if isinstance(shadow, types.FunctionType):
        for c in shadow.__closure__ or ():
            try:
                v = c.cell_contents
            except ValueError:
                continue
            if isinstance(v, (float, np.floating)):
                c.cell_contents = type(v)(0.0)
            else:
                make_zero_(v, seen)
        for d in shadow.__defaults__ or ():
            make_zero_(d, seen)
        return shadow
    rec = record(shadow)
    if rec is not None:
        for k, v in rec[1]:
            if isinstance(v, (float, np.floating)) and rec[0] != "frozen":
                set_field(shadow, k, type(v)(0.0))
            else:
                make_zero_(v, seen)
        return shadow
    if isinstance(shadow, np.ndarray):
        shadow[...] = 0
    elif isinstance(shadow, list):
        for k, o in enumerate(shadow):
            if isinstance(o, (float, np.floating)):
                shadow[k] = type(o)(0.0)
            else:
                make_zero_(o, seen)
    elif isinstance(shadow, tuple):
        for o in shadow:
            make_zero_(o, seen)
    return shadow


def check_shadow(primal: Any, shadow: Any, where: str) -> None:
    rec = record(primal)
    if rec is not None:
        _check_record(primal, rec, shadow, where)
        return
    if isinstance(primal, types.FunctionType):
        _check_function(primal, shadow, where)
        return
    if isinstance(primal, np.ndarray):
        if not isinstance(shadow, np.ndarray):
            raise ZymoUsageError(f"{where}: the shadow of an array must be an array, not {type(shadow).__name__}")
        if shadow.shape != primal.shape or shadow.dtype != primal.dtype:
            raise ZymoUsageError(
                f"{where}: the shadow has shape {shadow.shape} and dtype {shadow.dtype}, "
                f"the primal {primal.shape} and {primal.dtype}; use zymo.make_zero(x)"
            )
        if shadow is primal or np.may_share_memory(shadow, primal):
            raise ZymoUsageError(f"{where}: the shadow shares memory with its primal")
        if not shadow.flags.writeable:
            raise ZymoUsageError(f"{where}: the shadow is a read-only array (np.broadcast_to, a read-only view?); "
                                 "zymo writes derivatives into it: pass a writable array, e.g. zymo.make_zero(x)")
    elif isinstance(primal, (list, tuple)):
        if type(shadow) is not type(primal) or len(shadow) != len(primal):
            raise ZymoUsageError(
                f"{where}: the shadow must be a {type(primal).__name__} of length {len(primal)}, "
                f"got {type(shadow).__name__}" + (f" of length {len(shadow)}" if hasattr(shadow, '__len__') else "")
            )
        for k, (p, s) in enumerate(zip(primal, shadow)):
            check_shadow(p, s, f"{where}[{k}]")
    elif isinstance(primal, (float, np.floating)):
        if not isinstance(shadow, (float, int, np.floating, np.integer)) or isinstance(shadow, bool):
            raise ZymoUsageError(f"{where}: the shadow of a float must be a float, not {type(shadow).__name__}")


def _check_record(primal: Any, rec: tuple, shadow: Any, where: str) -> None:
    kind, fields = rec
    if type(shadow) is not type(primal):
        raise ZymoUsageError(f"{where}: the shadow of a {type(primal).__name__} must be a "
                             f"{type(primal).__name__}, not {type(shadow).__name__}; use zymo.make_zero(x)")
    srec = record(shadow)
    keys, skeys = [k for k, _ in fields], [k for k, _ in srec[1]] if srec else []
    if set(keys) != set(skeys):
        missing = [k for k in keys if k not in skeys]
        extra = [k for k in skeys if k not in keys]
        raise ZymoUsageError(f"{where}: the shadow's fields differ from the primal's"
                             + (f" (missing {missing})" if missing else "") + (f" (extra {extra})" if extra else "")
                             + "; use zymo.make_zero(x)")
    for k, v in fields:
        sub = f"{where}[{k!r}]" if kind == "dict" else f"{where}.{k}"
        sv = get_field(shadow, k)
        if isinstance(v, (bool, np.bool_, int, np.integer, str)) or v is None:
            if sv != v:
                raise ZymoUsageError(f"{sub}: the shadow holds {sv!r} where the primal holds {v!r} "
                                     "(ints, strings and None are shared, not shadowed); use zymo.make_zero(x)")
            continue
        check_shadow(v, sv, sub)


def _check_function(primal: types.FunctionType, shadow: Any, where: str) -> None:
    if shadow is primal:
        return
    if not isinstance(shadow, types.FunctionType) or shadow.__code__ is not primal.__code__:
        raise ZymoUsageError(f"{where}: the shadow of function {primal.__qualname__} must be "
                             "zymo.make_zero(f) (a copy of it holding shadows of what it captured)")
    names = primal.__code__.co_freevars
    for name, c, dc in zip(names, primal.__closure__ or (), shadow.__closure__ or ()):
        if c is dc:
            continue
        try:
            v = c.cell_contents
        except ValueError:
            continue
        check_shadow(v, dc.cell_contents, f"{where}: captured variable {name!r}")
