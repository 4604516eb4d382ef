"""Modes and activity annotations (Enzyme's vocabulary).

Contract: a mode says which derivative program `autodiff` runs; an annotation
wraps one argument and says how it takes part: `Const(x)` carries no
derivative, `Active(x)` is an immutable float (or tuple of floats) whose
derivative reverse mode returns, `Duplicated(x, dx)` pairs mutable memory (or,
in forward mode, a float) with its shadow, `DuplicatedNoNeed` is `Duplicated`
whose primal result is not needed (in reverse mode, the forward sweep may skip stores
into it). Annotations check what they can at construction; shape and dtype agreement is
checked by `autodiff`.
"""
from __future__ import annotations

from typing import Any


class Mode:
    def __init__(self, name: str, forward: bool, with_primal: bool, split: bool = False):
        self.name, self.forward, self.with_primal, self.split = name, forward, with_primal, split

    def __repr__(self) -> str:
        return self.name


Forward = Mode("Forward", True, False)
ForwardWithPrimal = Mode("ForwardWithPrimal", True, True)
Reverse = Mode("Reverse", False, False)
ReverseWithPrimal = Mode("ReverseWithPrimal", False, True)
ReverseSplitWithPrimal = Mode("ReverseSplitWithPrimal", False, True, split=True)
ReverseSplitNoPrimal = Mode("ReverseSplitNoPrimal", False, False, split=True)


class Annotation:
    __slots__ = ("val",)

    def __init__(self, val: Any):
        self.val = val

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.val!r})"


class Const(Annotation):
    """An argument that carries no derivative."""


class Active(Annotation):
    """An immutable float (or tuple of floats) whose derivative reverse mode returns."""


class Duplicated(Annotation):
    """A value and its shadow: adjoints are accumulated into / tangents read from `dval`."""

    __slots__ = ("dval",)

    def __init__(self, val: Any, dval: Any):
        self.val = val  # not super().__init__: this runs on every cached gradient call
        self.dval = dval

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.val!r}, {self.dval!r})"


class DuplicatedNoNeed(Duplicated):
    """`Duplicated` whose primal result the caller does not need. As a forward-mode return
    activity: the tangent alone. As a reverse-mode argument (an array, combined mode): the
    array's contents after the call are unspecified, and the forward sweep may leave out the
    stores that only this memory would have kept (`transform/reverse.py`,
    `Reverse._dead_primal_ops`); its shadow is `Duplicated`'s."""


class BatchDuplicated(Annotation):
    """A value and W shadows (batch mode): W tangents or W adjoints in one call.

    `BatchDuplicated(x, (dx1, ..., dxW))`; every shadow has the structure of `x`."""

    __slots__ = ("dvals",)

    def __init__(self, val: Any, dvals: Any):
        super().__init__(val)
        if not isinstance(dvals, (tuple, list)) or len(dvals) == 0:
            from .errors import ZymoUsageError

            raise ZymoUsageError("BatchDuplicated(x, dxs) takes a non-empty tuple of shadows, "
                                 f"one per lane, not {type(dvals).__name__}")
        self.dvals = tuple(dvals)

    @property
    def width(self) -> int:
        return len(self.dvals)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.val!r}, {self.dvals!r})"


class BatchDuplicatedNoNeed(BatchDuplicated):
    """`BatchDuplicated` whose primal result the caller does not need (as `DuplicatedNoNeed`,
    in batch mode)."""
