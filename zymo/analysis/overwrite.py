"""Which memory writes can run after a given op (the "may be overwritten" question).

Contract: `Overwrites(fn, act).first_writer(op, v)` returns a write op (a store
or an `out=` call) that may change the contents of array `v` after `op` has
run and before the function returns, or None when nothing can. "After" covers
the rest of `op`'s block, every op of each enclosing loop (later iterations run
them again) and everything after the enclosing ops. Two arrays may overlap when
their memory roots intersect (see `activity.py`: roots are per alias class, so
arguments that share memory at run time are one root). A value without known
roots is assumed to be overwritten. The reverse sweep reads an array's
contents directly when nothing may overwrite them, and copies them otherwise.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Block, Function, Op, Value, walk
from .activity import Activity


class Overwrites:
    def __init__(self, fn: Function, act: Activity):
        self.act = act
        self.parent: dict[int, tuple[Op | None, Block, int]] = {}  # op id -> (owner op, block, index)
        self.block_owner: dict[int, Op | None] = {id(fn.body): None}
        self._index(fn.body, None)

    def _index(self, block: Block, owner: Op | None) -> None:
        self.block_owner[id(block)] = owner
        for i, op in enumerate(block.ops):
            self.parent[id(op)] = (owner, block, i)
            for region in op.regions:
                self._index(region, op)

    @staticmethod
    def _writes(op: Op) -> list[tuple[Op, Value]]:
        """The (write op, written array) pairs of `op` and its regions."""
        out = []
        for o in [op] + list(_walk_regions(op)):
            if o.kind == "setitem" and isinstance(o.args[0].type, T.Array):
                out.append((o, o.args[0]))
            elif o.kind == "setitem" and isinstance(o.args[0].type, T.List) and not T.is_memory(o.args[1].type):
                out.append((o, o.args[0]))
            elif o.kind == "prim" and "out" in o.attrs:
                out.append((o, o.args[o.attrs["out"]]))
        return out

    def _later_ops(self, op: Op):
        """Ops that may run after `op` (themselves, not their regions' contents)."""
        owner, block, i = self.parent[id(op)]
        yield from block.ops[i + 1:]
        while owner is not None:
            if owner.kind in ("for", "while"):
                for region in owner.regions:
                    yield from region.ops
            o_owner, o_block, o_i = self.parent[id(owner)]
            yield from o_block.ops[o_i + 1:]
            owner = o_owner

    def first_writer(self, op: Op, v: Value, include_self: bool = False) -> Op | None:
        roots = self.act.roots.get(v.id)
        if not roots:
            return op
        candidates = [op] if include_self else []
        candidates += list(self._later_ops(op))
        for c in candidates:
            for w, target in self._writes(c):
                troots = self.act.roots.get(target.id)
                if not troots or troots & roots:
                    return w
        return None


def _walk_regions(op: Op):
    for region in op.regions:
        yield from walk(region)
