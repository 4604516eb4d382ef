"""Dead-code elimination on the IR, before analysis.

Contract: `dce(fn)` removes, in place, ops without side effects whose results
nobody reads (constants, calls without `out=`, loads and views), repeating until
nothing changes. Stores, `out=` calls, regions and terminators are kept. The
result passes `ir.verify` whenever the input does.
"""
from __future__ import annotations

from ..ir.core import Block, Function, walk

_PURE = {"const", "prim", "getitem"}


def dce(fn: Function) -> Function:
    while True:
        used: set[int] = set()
        for op in walk(fn.body):
            used.update(v.id for v in op.args)
        if not _sweep(fn.body, used):
            return fn


def _sweep(block: Block, used: set[int]) -> bool:
    changed = False
    kept = []
    for op in block.ops:
        for region in op.regions:
            changed |= _sweep(region, used)
        removable = (op.kind in _PURE and "out" not in op.attrs and op.results
                     and not any(r.id in used for r in op.results))
        if removable:
            changed = True
        else:
            kept.append(op)
    block.ops[:] = kept
    return changed
