"""`report(rev)`: what the derivative program caches and why (`zymo.cache_report`).

Contract: reads a written `Reverse` generator's tape plan (`tape.TapePlan`): one entry per
cached value or snapshot, with its source line, the reason and its size (and, given what an
augmented forward call recorded, how many entries and bytes that call cached), then how many
values the adjoint sweep gets each way, and notes on the lists the function builds.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

from ...ir import types as T
from ...ir.core import Block, Value, walk

if TYPE_CHECKING:
    from ...ir.core import Op
    from . import Reverse

_CACHES = ("list", "stack", "buffer", "growing buffer")  # the decisions that keep a per-iteration cache
def _where(loc) -> str:
    import linecache

    text = linecache.getline(loc.file, loc.line).strip()
    short = loc.file.rsplit("/", 1)[-1]
    return f"{short}:{loc.line}" + (f"  `{text}`" if text else "")


def report(rev: Reverse, measured: dict | None = None) -> str:
    """What the derivative program caches and why (Enzyme's printperf, for one call).

    `measured` maps tape names to what an augmented forward call recorded; with it,
    each entry says how many entries and bytes that call cached."""
    lines = [f"cache report for {rev.fn.name} (reverse mode)"]
    entries = []
    total = 0

    def used(name: str, count_name: str | None, is_copy: bool) -> str:
        nonlocal total
        if measured is None or name not in measured:
            return ""
        obj = measured[name]
        if obj is None:  # a cache of a checkpointed loop: recorded again from its snapshots
            return "\n      this call: none kept (a checkpointed loop records it again from its snapshots)"
        if isinstance(obj, list):
            nbytes = sum(getattr(o, "nbytes", 8) for o in obj) if is_copy else 8 * len(obj)
            n = len(obj)
        elif count_name is not None:
            n = int(measured.get(count_name, 0))
            nbytes = n * obj.dtype.itemsize * math.prod(obj.shape[1:])
        else:
            n, nbytes = 1, getattr(obj, "nbytes", 8)
        total += nbytes
        return f"\n      this call: {n} entr{'y' if n == 1 else 'ies'}, {nbytes} bytes"

    for decision in rev.plan.decisions:
        v, role = decision.value, decision.role
        vid = v.id
        if vid in rev.why:
            op, of, writer, post = rev.why[vid]
            when = "after" if post else "before"
            kind = "a copy of array" + f" `{of.hint}` ({of.type})"
            cached = decision.how in _CACHES
            name = rev._cache_name(v, "p") if cached else rev.namer(v)
            count = rev._counter(v) if decision.how == "stack" else None
            entries.append(
                f"{kind}, taken {when} {_where(op.loc)}\n"
                f"      why: the adjoint of that line reads it, and {_where(writer.loc)} may overwrite it"
                + _alias_note(rev, of, writer)
                + f"\n      size: {_size(of)} per execution"
                + (" of that line" if not cached else ", on a per-iteration cache")
                + used(name, count, True)
            )
        elif decision.how in _CACHES:
            d = rev.def_op.get(vid)
            loop = _enclosing_loop(rev, rev.def_block[vid])
            what = "shadow of" if role == "d" else "value"
            nest = len(rev._nest(v)) if role == "p" else 0
            how = {"buffer": "a buffer allocated once at the loop's entry with its trip count" if nest < 2 else
                   f"a buffer allocated once at the entry of the {nest} loops around it, with their trip counts",
                   "growing buffer": "a buffer that grows geometrically" if nest < 2 else
                   f"a buffer that grows geometrically, made room for at the entry of the {nest} loops around it",
                   "stack": "a stacked array buffer, one row per entry",
                   "list": "a list"}[decision.how]
            entries.append(
                f"{what} `{v.hint}` ({v.type}), defined at {_where(d.loc) if d else '?'}\n"
                f"      why: defined inside the loop at {_where(loop.loc) if loop else '?'}, "
                "read by the adjoint sweep\n"
                f"      size: one entry per execution ({_size(v)} each), in {how}"
                + used(rev._cache_name(v, role), None if decision.how == "list" else rev._counter(v), role == "p")
            )
    if not entries:
        lines.append("  nothing is cached: the adjoint sweep reads every value it needs in place")
    for k, e in enumerate(entries, 1):
        lines.append(f"  {k}. {e}")
    if measured is not None and entries:
        lines.append(f"  total cached by this call: {total} bytes")
    counts = rev.plan.counts()
    if counts:
        lines.append("  tape plan: " + ", ".join(f"{k} {how}" for how, k in counts.items())
                     + " (values the adjoint sweep reads, by how it gets them)")
    lines += _list_notes(rev)
    return "\n".join(lines)


def _list_notes(rev: Reverse) -> list[str]:
    """Lists the function builds by appending in a loop of run-time length (frontend/containers.py)."""
    out = []
    for op in walk(rev.fn.body):
        if op.kind == "prim" and "fills_list" in op.attrs:
            built, loop, calls, pre = op.attrs["fills_list"]
            room = "one item per iteration" if calls == 1 else f"{calls} items per iteration"
            room += f" plus the {pre} it had" if pre else ""
            v = op.result
            shadow = " (and its shadow, as big)" if rev.act.is_active(v) else ""
            if isinstance(v.type, T.List):
                out.append(f"  note: the list built at line {built} and appended to by the loop at line {loop} is a "
                           f"list `{v.hint}` ({v.type}) of the trip count's references to the appended arrays, "
                           f"allocated before that loop{shadow}: the primal's own memory, not a cache")
                continue
            dt = cast(T.Array, v.type).dtype
            item = "4 bytes" if dt == "float32" else "1 byte" if dt == "bool" else "8 bytes"
            out.append(f"  note: the list built at line {built} and appended to by the loop at line {loop} is an "
                       f"array `{v.hint}` ({v.type}) allocated before that loop with room for {room}, {item} "
                       f"per item{shadow}: the primal's own memory, not a cache")
    return out


def _alias_note(rev: Reverse, of: Value, writer: Op) -> str:
    """Whether the write reaches the array itself or memory that aliases it."""
    target = writer.args[writer.attrs["out"]] if writer.kind == "prim" else writer.args[0]
    roots_of = rev.act.roots.get(of.id, frozenset())
    roots_t = rev.act.roots.get(target.id, frozenset())
    params = {r for r in roots_of & roots_t if r[0] == "param"}
    if target is of:
        return ""
    members = [p.hint for k, p in enumerate(rev.fn.params)
               if rev.act.roots.get(p.id, frozenset()) & params]
    if len(members) > 1:
        return (f" (through an alias: {', '.join(f'`{m}`' for m in members)} share memory in this call; "
                "with disjoint arguments zymo compiles a version without this copy)")
    return f" (`{target.hint}` is the same memory as `{of.hint}`)"


def _size(v: Value) -> str:
    if isinstance(v.type, T.Array):
        return f"one {v.type} array"
    if isinstance(v.type, T.Scalar):
        return "4 bytes" if v.type.kind == "f32" else "8 bytes"
    return str(v.type)


def _enclosing_loop(rev: Reverse, block: Block):
    for op in walk(rev.fn.body):
        if op.kind in ("for", "while") and any(r is block or _contains(r, block) for r in op.regions):
            inner = [o for r in op.regions for o in walk(r) if o.kind in ("for", "while")
                     and any(rr is block or _contains(rr, block) for rr in o.regions)]
            return inner[-1] if inner else op
    return None


def _contains(region: Block, block: Block) -> bool:
    return any(r is block for o in walk(region) for r in o.regions)
