"""The primitives behind `raise`, `assert`, `try/except` and `with np.errstate(...)`.

Contract: each function returns the key of a primitive, registered once per distinct use
(exception class and argument count; rule and handler classes; errstate settings). All are
`nondiff` (no derivative), marked `user` (not enumerated by the rule tests) and keyed
`zymo....`, so reverse mode never leaves them out of the forward sweep (`Reverse._droppable`
keeps what is not NumPy's, math's or a builtin's, and `_cannot_raise` is False for them).

- `raise_key(cls, n)`: a statement `raise <cls>(<n constant arguments>)`, no result. The class
  is written by name for builtins, as `np.<path>` for NumPy's (both compile under Numba), and
  through `_rt.USER[k]` otherwise (Python only: `python_only(key)` says why).
- `probe_key(rule key, handler classes)`: calls the rule's primal function (or reads
  `obj[index]`, for the key "getitem") on the op's arguments and returns an int: 0 when it returns, k when it raises an
  exception the k-th handler (1-based) catches; other exceptions propagate unchanged. A try
  body's raising ops are preceded by their probe (they run twice). Python only.
- `errstate_enter_key(settings)`: `np.seterr(<settings>)`, returning the previous settings;
  `ERRSTATE_EXIT`: `np.seterr(**<previous>)`. The Numba backend drops both (compiled code
  never warns: `codegen.numba_.drop_errstate`); settings with 'raise' are Python only. Reverse
  mode runs the adjoint of the body under the same settings (`Reverse.rev_prim` writes them back in the adjoint sweep).

These rules live here and not in `zymo/rules/` because they are made by the frontend per use;
their runtime helpers are registered through `_rt.USER` as `rules.custom` does.
"""
from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .. import runtime as _rt
from ..analysis import types as TI
from ..ir import types as T
from ..rules.registry import REGISTRY, Rule

_KEYS: dict[Any, str] = {}
_PYTHON_ONLY: dict[str, str] = {}  # key -> why the Numba backend cannot compile it


def python_only(key: str) -> str | None:
    """Why the primitive `key` keeps a derivative on the Python backend (None: it need not)."""
    return _PYTHON_ONLY.get(key)


def _register(key: str, result: T.Type, python_why: str | None = None, **spec: Any) -> str:
    if key not in REGISTRY:
        type(f"check_{len(_KEYS)}", (Rule,), {"__module__": __name__, "user": True}, key=key, nondiff=True,
             **spec)
        TI.RESULT_TYPES[key] = lambda pos, kw, r=result: r
        if python_why:
            _PYTHON_ONLY[key] = python_why
    return key


def _fresh(key: str) -> str:
    """`key`, or `key#k` for the first k that no rule has yet (two uses that print alike)."""
    out, k = key, 1
    while out in REGISTRY:
        k += 1
        out = f"{key}#{k}"
    return out


def _slot(obj: Any) -> int:
    _rt.USER.append(obj)
    return len(_rt.USER) - 1


def class_expr(cls: type) -> tuple[str, bool]:
    """How generated code names exception class `cls`, and whether Numba can compile it."""
    name = cls.__name__
    if getattr(builtins, name, None) is cls:
        return name, True
    mod = getattr(cls, "__module__", "") or ""
    if mod == "numpy" or mod.startswith("numpy."):
        parts = mod.split(".")[1:] + [name]
        for k in range(len(parts)):  # the shortest public path: np.linalg.LinAlgError
            obj: Any = np
            for p in parts[k:]:
                obj = getattr(obj, p, None)
            if obj is cls:
                return "np." + ".".join(parts[k:]), True
    return f"_rt.USER[{_slot(cls)}]", False


def raise_key(cls: type, nargs: int) -> str:
    ident = ("raise", cls, nargs)
    if ident not in _KEYS:
        expr, numba_ok = class_expr(cls)
        args = ", ".join(f"{{{k}}}" for k in range(nargs))

        def fn(*a: Any) -> None:
            raise cls(*a)
        why = None if numba_ok else (f"it raises {cls.__qualname__}, a class the generated Numba module "
                                     "cannot name (only builtin and NumPy exceptions)")
        name = expr if numba_ok else f"{cls.__module__}.{cls.__qualname__}"
        _KEYS[ident] = _register(_fresh(f"zymo.raise.{name}/{nargs}"), T.NONE, why, fn=fn,
                                 template=f"raise {expr}({args})")
    return _KEYS[ident]


def _getitem(obj: Any, index: Any) -> Any:
    return obj[index]


def probe_key(rule_key: str, handlers: tuple[tuple[type, ...], ...]) -> str:
    """(`rule_key` "getitem": a read `obj[index]`, the index a tuple without slices.)"""
    ident = ("probe", rule_key, handlers)
    if ident not in _KEYS:
        inner = _getitem if rule_key == "getitem" else cast(Callable[..., Any], REGISTRY[rule_key].fn)

        def probe(*a: Any, **kw: Any) -> int:
            try:
                inner(*a, **kw)
            except BaseException as exc:  # matched below, re-raised otherwise
                for k, classes in enumerate(handlers):
                    if isinstance(exc, classes):
                        return k + 1
                raise
            return 0
        slot = _slot(probe)
        _KEYS[ident] = _register(_fresh(f"zymo.try.{rule_key}"), T.INT,
                                 "a try/except needs Python's exception handling to find the path taken",
                                 fn=probe, call=f"_rt.USER[{slot}]")
    return _KEYS[ident]


ERRSTATE_KINDS = ("all", "divide", "over", "under", "invalid")
ERRSTATE_MODES = ("ignore", "warn", "raise", "call", "print", "log")


def errstate_enter_key(settings: tuple[tuple[str, str], ...]) -> str:
    ident = ("errstate", settings)
    if ident not in _KEYS:
        text = ", ".join(f"{k}={v!r}" for k, v in settings)
        why = ("np.errstate(... 'raise') makes NumPy raise FloatingPointError, which compiled code never does"
               if any(v == "raise" for _, v in settings) else None)
        _KEYS[ident] = _register(f"zymo.errstate.enter({text})", T.INT, why,
                                 fn=lambda: np.seterr(**dict(settings)),  # type: ignore[arg-type]  # NumPy's names
                                 template=f"np.seterr({text})")
    return _KEYS[ident]


def _seterr_back(old: Any) -> None:
    np.seterr(**old)


ERRSTATE_EXIT = _register("zymo.errstate.exit", T.NONE, fn=_seterr_back, template="np.seterr(**{0})")


def is_errstate(key: str) -> bool:
    return key.startswith("zymo.errstate.")
