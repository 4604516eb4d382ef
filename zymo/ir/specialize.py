"""Rename a primitive call to a more specific rule, decided from its constant arguments.

Contract: `specialize(fn)` walks the IR once, right after lowering (`api._lowered`), and
for each `prim` op whose rule defines a `specialize(pos, kw)` classmethod replaces the
op's key by the key that method returns (None: keep it). `pos`/`kw` are as `Rule.check`
sees them: IR values (with their types) and Python constants. The replacement rule takes
the same arguments and computes the same primal; it differs in what the transforms need
to know, such as its flags: `np.einsum('ji', a)` is a view of `a` (`numpy.einsum_view`),
`np.einsum('ij,jk', a, b)` fresh memory (`numpy.einsum`).

This belongs in the frontend's call lowering (where `check` is applied); it is a pass of
its own until the frontend consults `Rule.specialize` itself.
"""
from __future__ import annotations

from typing import Any

from ..rules.registry import lookup
from .core import Function, Op, walk


def _arg(tree: Any, op: Op) -> Any:
    tag = tree[0]
    if tag == "v":
        return op.args[tree[1]]
    if tag == "c":
        return tree[1]
    if tag == "t":
        return tuple(_arg(t, op) for t in tree[1])
    if tag == "s":
        return slice(*(_arg(t, op) for t in tree[1:]))
    raise AssertionError(tree)


def specialize(fn: Function) -> Function:
    for op in walk(fn.body):
        if op.kind != "prim":
            continue
        rule = lookup(op.attrs["key"])
        how = getattr(rule, "specialize", None)
        if how is None:
            continue
        pos = [_arg(t, op) for t in op.attrs["pos"]]
        kw = {k: _arg(t, op) for k, t in op.attrs["kw"]}
        key = how(pos, kw)
        if key is not None and key != op.attrs["key"]:
            lookup(key)
            op.attrs["key"] = key
    return fn
