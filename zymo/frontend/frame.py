"""The function being lowered: where its names are bound.

Contract: a `Frame` is one function being lowered (the top-level one or an inlined callee):
`env` maps its names (and the synthetic `$...` names of flags, list contents and the like)
to bindings (bindings.py); `parent` is the defining frame of a nested function, where names
it does not bind are looked up; `src` is where its free names resolve (None: see `parent`).
`ret`/`retval` are the env names of its return flag and value, `loops` the (break, continue)
flag names of the loops being lowered, innermost last. `uid` numbers synthetic names so that
no two frames or loops share one.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from .source import FunctionSource

uid = itertools.count()


@dataclass(eq=False)
class Frame:
    """One function being lowered (the top-level one or an inlined callee)."""

    name: str
    file: str
    src: FunctionSource | None  # where free names resolve (None: see parent)
    parent: Frame | None  # defining frame of a nested function
    env: dict[str, Any] = field(default_factory=dict)
    ret: str = ""
    retval: str = ""
    loops: list[tuple[str, str]] = field(default_factory=list)  # (break flag, continue flag)
    nonlocals: set[str] = field(default_factory=set)  # names declared `nonlocal`

    def __post_init__(self) -> None:
        n = next(uid)
        self.ret, self.retval = f"$ret{n}", f"$retval{n}"
