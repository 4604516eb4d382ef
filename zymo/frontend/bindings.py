"""What a Python name is bound to while a function is lowered.

Contract: a binding is one of
- an IR `Value` (a runtime scalar, array or list);
- a Python `tuple` of bindings (tuples are virtual: never runtime IR values);
- `S(obj)`, a compile-time object (module, function, string, None, dtype);
- `LocalFn`, a function defined inside the function being lowered (inlined
  where it is called, reading its free names from its defining frame);
- `Poison`, a name that is not defined on every path (reading it is an error);
- `Guarded`, a for loop's variable first bound by the loop (reading it checks
  at run time that the loop ran, as Python would raise NameError).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from ..ir.core import Value


@dataclass(frozen=True, eq=False)
class S:
    obj: Any

    def __eq__(self, other: object) -> bool:
        return isinstance(other, S) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


@dataclass(eq=False)
class LocalFn:
    node: ast.FunctionDef | ast.Lambda
    frame: Any  # the defining Frame
    defaults: list  # bindings of default values, evaluated at definition
    kw_defaults: dict = field(default_factory=dict)  # keyword-only parameters' defaults, by name


@dataclass(eq=False)
class Partial:
    """`functools.partial(fn, *pos, **kw)`: a callable binding whose call prepends `pos`
    and adds `kw` (made in the function, or a partial object read from a global)."""
    fn: Any
    pos: tuple
    kw: dict


@dataclass(eq=False)
class Poison:
    name: str
    why: str


@dataclass(eq=False)
class Guarded:
    """A for loop's variable read after the loop: defined only if the loop ran."""
    binding: Any
    bounds: list  # start, stop, step values of the loop


def flatten(b: Any) -> list[Value]:
    """The runtime values inside a binding (tuples flattened, statics dropped)."""
    if isinstance(b, Value):
        return [b]
    if isinstance(b, tuple):
        out: list[Value] = []
        for x in b:
            out.extend(flatten(x))
        return out
    return []


def rebuild(template: Any, values: list[Value]) -> Any:
    """The binding shaped like `template` with its values replaced in order."""
    it = iter(values)

    def go(t: Any) -> Any:
        if isinstance(t, Value):
            return next(it)
        if isinstance(t, tuple):
            return tuple(go(x) for x in t)
        return t

    out = go(template)
    return out


def same_shape(a: Any, b: Any) -> bool:
    if isinstance(a, Value) and isinstance(b, Value):
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_shape(x, y) for x, y in zip(a, b))
    return a == b if isinstance(a, S) else a is b
