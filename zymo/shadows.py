"""Shadows of Python data: `make_zero`, `make_zero_` and structural checks.

Contract: `make_zero(obj)` returns a structurally equal object of zeros (floats
become 0.0, arrays zeros of the same shape and dtype, tuples and lists are
rebuilt, the same array reachable twice gets one shadow; ints, bools, strings
and None are shared). `make_zero_(shadow)` zeroes arrays and list items in
place and returns the shadow. `check_shadow(primal, shadow, where)` raises
`ZymoUsageError` naming the first place where the two differ.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ZymoUsageError


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
    elif isinstance(obj, tuple):
        return tuple(make_zero(o, memo) for o in obj)
    elif isinstance(obj, list):
        out = []
        memo[id(obj)] = out
        out.extend(make_zero(o, memo) for o in obj)
        return out
    else:
        raise ZymoUsageError(f"make_zero: values of type {type(obj).__name__} are not supported yet")
    memo[id(obj)] = out
    return out


def make_zero_(shadow: Any) -> Any:
    if isinstance(shadow, np.ndarray):
        shadow[...] = 0
    elif isinstance(shadow, list):
        for k, o in enumerate(shadow):
            if isinstance(o, (float, np.floating)):
                shadow[k] = type(o)(0.0)
            else:
                make_zero_(o)
    elif isinstance(shadow, tuple):
        for o in shadow:
            make_zero_(o)
    return shadow


def check_shadow(primal: Any, shadow: Any, where: str) -> None:
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
