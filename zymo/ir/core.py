"""The IR: SSA values, operations with structured regions, functions.

Contract:
- A `Value` is defined exactly once: as a function parameter, a block argument or
  an operation result. Scalars are immutable; arrays and lists are references to
  memory, whose contents change only through `setitem` or a `prim` with `out=`.
- An `Op` has a `kind` from the closed set `OP_KINDS`, operand values (`args`),
  result values, attributes and nested regions (`Block`s). Every op carries the
  `Loc` of the user's line it came from.
- Regions are structured (MLIR `scf` style): `for`, `while` and `if` carry the
  values they change explicitly (block arguments in, `yield` out). There are no
  jumps: `break`, `continue` and early `return` are lowered to flags.
- Operands that are not plain values (tuples, slices, constants in calls and
  subscripts) are described by an *argument tree*: `("v", k)` is `args[k]`,
  `("c", obj)` a compile-time constant, `("t", (...))` a tuple, `("s", a, b, c)`
  a slice.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import Loc
from .types import Type

OP_KINDS = {
    "const",      # attrs: value                       -> 1 result
    "prim",       # attrs: key, pos, kw                -> 0 or 1 result (a registered rule)
    "getitem",    # args: obj, *index; attrs: index     -> 1 result (scalar load, view, list item)
    "setitem",    # args: obj, val, *index; attrs: index -> 0 results (a store)
    "for",        # args: start, stop, step, *inits; regions: [body(iv, *carries)]
    "while",      # args: *inits; regions: [cond(*carries), body(*carries)]
    "if",         # args: cond; regions: [then, else]
    "yield",      # terminator of for/while bodies and if branches
    "condition",  # terminator of a while's cond region: args: [bool]
    "return",     # terminator of the function body
}

NOCONST = object()
_ids = itertools.count()


class Value:
    """An SSA value. `hint` is the user's variable name, used for readable code."""

    __slots__ = ("id", "hint", "type", "const", "owner")

    def __init__(self, type: Type, hint: str = "v", const: Any = NOCONST):
        self.id = next(_ids)
        self.hint = hint
        self.type = type
        self.const = const
        self.owner: Op | Block | Function | None = None

    @property
    def is_const(self) -> bool:
        return self.const is not NOCONST

    def __repr__(self) -> str:
        return f"%{self.hint}.{self.id}"


@dataclass(eq=False)
class Block:
    args: list[Value] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)

    @property
    def terminator(self) -> Op | None:
        return self.ops[-1] if self.ops else None


@dataclass(eq=False)
class Op:
    kind: str
    args: list[Value]
    results: list[Value]
    loc: Loc
    attrs: dict[str, Any] = field(default_factory=dict)
    regions: list[Block] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.kind in OP_KINDS, self.kind
        assert isinstance(self.loc, Loc)
        for r in self.results:
            r.owner = self
        for region in self.regions:
            for a in region.args:
                a.owner = region

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, self
        return self.results[0]


@dataclass(eq=False)
class Function:
    name: str
    params: list[Value]
    body: Block
    loc: Loc
    source_file: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for p in self.params:
            p.owner = self

    def __str__(self) -> str:
        from .printer import print_function

        return print_function(self)


def walk(block: Block) -> Iterator[Op]:
    """All ops of `block` and of its nested regions, in program order."""
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from walk(region)


def tree_values(tree: Any, args: list[Value]) -> Iterator[Value]:
    """The values an argument tree refers to."""
    tag = tree[0]
    if tag == "v":
        yield args[tree[1]]
    elif tag == "t":
        for t in tree[1]:
            yield from tree_values(t, args)
    elif tag == "s":
        for t in tree[1:]:
            yield from tree_values(t, args)


def tree_map(tree: Any, fv, fc):
    """Rebuild an argument tree: `fv(value_index)` for values, `fc(obj)` for constants."""
    tag = tree[0]
    if tag == "v":
        return fv(tree[1])
    if tag == "c":
        return fc(tree[1])
    if tag == "t":
        return tuple(tree_map(t, fv, fc) for t in tree[1])
    if tag == "s":
        return slice(*(tree_map(t, fv, fc) for t in tree[1:]))
    raise AssertionError(tree)
