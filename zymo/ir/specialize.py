"""Rename a primitive call to a more specific rule, decided from its constant arguments.

Contract: `specialize(fn)` walks the IR once, right after lowering (`pipeline.lower_ir`), and
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
    check_copies_of_views(fn)
    return fn


# -- copies of views -------------------------------------------------------------------------


def _ordered(block, loops=()):
    """(op, enclosing loops) for every op of `block` and its regions, in program order."""
    for op in block.ops:
        yield op, loops
        inner = loops + (op,) if op.kind in ("for", "while") else loops
        for region in op.regions:
            yield from _ordered(region, inner)


def check_copies_of_views(fn: Function) -> None:
    """Refuse a write to the base of a rule's copy of NumPy's read-only view (`copies_view`:
    `np.broadcast_to`) while the copy is still read after it: NumPy's view would show the
    write, zymo's copy would not. Aliasing comes from the activity analysis' memory roots
    (parameters taken as possibly aliasing each other)."""
    from ..analysis.activity import analyze
    from ..errors import UnsupportedCall
    from . import types as T

    order = list(_ordered(fn.body))
    sites = [(i, op) for i, (op, _) in enumerate(order)
             if op.kind == "prim" and getattr(lookup(op.attrs["key"]), "copies_view", False) and op.results]
    if not sites:
        return
    act = analyze(fn, [False] * len(fn.params), [0] * len(fn.params))
    roots = lambda v: act.roots.get(v.id, frozenset())  # noqa: E731
    for i0, op in sites:
        base = next((a for a in op.args if T.is_memory(a.type)), None)
        if base is None:
            continue
        derived = {op.results[0].id}
        uses, escapes, writes_through = [], False, False
        for i, (o, _) in enumerate(order[i0 + 1:], i0 + 1):
            if not any(a.id in derived for a in o.args):
                continue
            uses.append(i)
            if o.kind == "getitem" and T.is_memory(o.results[0].type) or (
                    o.kind == "prim" and (lookup(o.attrs["key"]).view or lookup(o.attrs["key"]).maybe_view)
                    and o.args[0].id in derived):
                derived.update(r.id for r in o.results)
            elif o.kind == "setitem" and o.args[0].id in derived or (
                    o.kind == "prim" and "out" in o.attrs and o.args[o.attrs["out"]].id in derived):
                writes_through = True
            elif o.kind in ("yield", "return", "for", "while", "if", "condition") or (
                    o.kind == "setitem" and isinstance(o.args[0].type, T.List)):
                escapes = True  # carried, returned or stored in a list: read at some later time
        if writes_through:
            raise UnsupportedCall(f"a write into the result of {op.attrs['key']}", op.loc,
                                  why="NumPy returns a read-only view here; zymo computes a copy",
                                  hint="write into np.array(np.broadcast_to(...)) (a copy) instead")
        loops0 = order[i0][1]
        for iw, (w, wloops) in enumerate(order):
            target = w.args[0] if w.kind == "setitem" else (
                w.args[w.attrs["out"]] if w.kind == "prim" and "out" in w.attrs else None)
            if target is None or not (roots(target) & roots(base)):
                continue
            if iw < i0:
                # before the call: only in a loop that runs both, and then only a result carried
                # into the next iteration sees the write stale
                stale = escapes and any(lp in loops0 for lp in wloops)
            else:
                stale = escapes or any(iu > iw or any(lp in order[iu][1] and lp not in loops0 for lp in wloops)
                                       for iu in uses)
            if stale:
                raise UnsupportedCall(
                    f"{op.attrs['key']} of an array written while the result is still read", w.loc,
                    why=f"NumPy's {op.attrs['key'].split('.')[-1]} (line {op.loc.line}) is a view, which shows "
                        "later writes to its base; zymo differentiates a copy",
                    hint="read the result before writing to its base, or broadcast a copy of the base")
