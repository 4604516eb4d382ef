"""One index of a Function: where each value is defined, its loop nest, and who reads it.

Contract: `Index(fn)` walks `fn` once and answers, for the function as built (the IR is
not changed afterwards):
- `values[id]`: every value (parameters, block arguments, op results) by id;
- `def_block[id]`: the block defining a value (the body for parameters);
- `producer[id]`: the op whose result a value is (results only);
- `def_op[id]`: `producer`, and for a block argument the op owning its region (a loop's
  index and carries, a branch's none: branches have no arguments);
- `parent[id(op)]`: (the op whose region holds `op` or None at the top level, that block,
  the position of `op` in it); `block_owner[id(block)]`: the op owning a region (None for
  the body); `block_of_op[id(op)]`: the block holding `op`;
- `depth[id(block)]`: how many `for`/`while` loops enclose a block (0 for the body);
  `value_depth(v)`: that of `v`'s defining block;
- `loop_var[id]`: the `for` op of a loop's induction variable;
- `readers[id]`: the ops taking a value as an argument, in program order (an op taking it
  twice is listed twice);
- `order`: the block arguments and results in program order (parameters not included);
- `loop_of(block)`, `loops(op)`, `inside(block, op)`: the loop nest around a block or op.

Reverse mode (`transform/reverse/`), `overwrite.py`, `shapes.py` and `bounds.py` read this
index instead of walking the function themselves; one is built per transform and shared.
"""
from __future__ import annotations

from ..ir.core import Block, Function, Op, Value

LOOPS = ("for", "while")


class Index:
    def __init__(self, fn: Function):
        self.fn = fn
        self.values: dict[int, Value] = {}
        self.def_block: dict[int, Block] = {}
        self.producer: dict[int, Op] = {}
        self.def_op: dict[int, Op] = {}
        self.parent: dict[int, tuple[Op | None, Block, int]] = {}
        self.block_owner: dict[int, Op | None] = {id(fn.body): None}
        self.block_of_op: dict[int, Block] = {}
        self.depth: dict[int, int] = {}
        self.loop_var: dict[int, Op] = {}
        self.readers: dict[int, list[Op]] = {}
        self.order: list[Value] = []
        for p in fn.params:
            self.values[p.id] = p
            self.def_block[p.id] = fn.body
        self._index(fn.body, None, 0)

    def _index(self, block: Block, owner: Op | None, depth: int) -> None:
        self.block_owner[id(block)] = owner
        self.depth[id(block)] = depth
        for a in block.args:
            self._define(a, block)
            if owner is not None:
                self.def_op[a.id] = owner
        for i, op in enumerate(block.ops):
            self.parent[id(op)] = (owner, block, i)
            self.block_of_op[id(op)] = block
            for a in op.args:
                self.readers.setdefault(a.id, []).append(op)
            for r in op.results:
                self._define(r, block)
                self.producer[r.id] = op
                self.def_op[r.id] = op
            if op.kind == "for":
                self.loop_var[op.regions[0].args[0].id] = op
            inner = depth + 1 if op.kind in LOOPS else depth
            for region in op.regions:
                self._index(region, op, inner)

    def _define(self, v: Value, block: Block) -> None:
        self.values[v.id] = v
        self.def_block[v.id] = block
        self.order.append(v)

    def value_depth(self, v: Value) -> int:
        """How many loops enclose the definition of `v` (0 for a value not of this function)."""
        block = self.def_block.get(v.id)
        return 0 if block is None else self.depth[id(block)]

    def reader_count(self, v: Value) -> int:
        """How many op arguments are `v`."""
        return len(self.readers.get(v.id, ()))

    def loop_of(self, block: Block) -> Op | None:
        """The nearest loop op around `block`."""
        owner = self.block_owner.get(id(block))
        while owner is not None and owner.kind not in LOOPS:
            owner = self.parent[id(owner)][0]
        return owner

    def loops(self, op: Op) -> list[Op]:
        """The loops around `op`, innermost first."""
        out = []
        owner = self.parent[id(op)][0]
        while owner is not None:
            if owner.kind in LOOPS:
                out.append(owner)
            owner = self.parent[id(owner)][0]
        return out

    def inside(self, block: Block, op: Op) -> bool:
        """Whether `block` is one of `op`'s regions or nested in one."""
        owner = self.block_owner.get(id(block))
        while owner is not None:
            if owner is op:
                return True
            owner = self.parent[id(owner)][0]
        return False
