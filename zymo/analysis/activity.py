"""Activity and memory roots: which values and which memory carry derivatives.

Contract: `analyze(fn, active_params, alias_classes)` returns an `Activity` with
- `roots[v]`: for every array/list value, the memory it may point into: a
  parameter's alias class (parameters that may share memory at run time are in
  one class, decided by the caller from the actual arguments), or the op that
  allocated it. Views, list items and `out=` results share their base's roots;
  an advanced read `x[idx]` (int array or mask) is a copy with a root of its own.
- `active_memory`: the roots that receive active data or belong to an active
  parameter (a `Duplicated` argument).
- `is_active(v)`: a scalar is active when it depends on an active value or is
  loaded from active memory; an array or list is active when its memory is.
- `shadow_params`: parameter indices whose memory needs a shadow (every active
  memory parameter, including `Const` ones that receive active data: the
  caller gives those an internal zero shadow, so a derivative never depends on
  memory the caller declared constant but the function wrote).
- `writes_memory`: whether the function stores into any memory (used by the
  conservative caching decision of reverse mode).
Both halves of Enzyme's activity analysis run: a float is active only when it
depends on an active input (forward, "varied") AND its derivative can reach
the seeded return value or active memory (backward, "useful"); values that
fail either get no derivative code.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import types as T
from ..ir.core import Block, Function, Op, Value, walk
from ..rules import indexing
from ..rules.registry import lookup


@dataclass
class Activity:
    active: set[int] = field(default_factory=set)
    roots: dict[int, frozenset] = field(default_factory=dict)
    active_memory: set = field(default_factory=set)
    shadow_params: list[int] = field(default_factory=list)
    writes_memory: bool = False
    useful: set[int] | None = None  # None while the forward half runs

    def is_active(self, v: Value) -> bool:
        if T.is_memory(v.type):
            return v.type.differentiable and bool(self.roots.get(v.id, frozenset()) & self.active_memory)
        return v.id in self.active and (self.useful is None or v.id in self.useful)

    def annotate(self, v: Value) -> str:
        return "active" if self.is_active(v) else ""


def analyze(fn: Function, active_params: list[bool], alias_classes: list[int],
            seed_return: bool = True) -> Activity:
    a = Activity()
    for k, p in enumerate(fn.params):
        if T.is_memory(p.type):
            a.roots[p.id] = frozenset({("param", alias_classes[k])})
            if active_params[k]:
                a.active_memory.add(("param", alias_classes[k]))
        elif active_params[k] and p.type.differentiable:
            a.active.add(p.id)
    a.writes_memory = any(op.kind == "setitem" or (op.kind == "prim" and "out" in op.attrs)
                          for op in walk(fn.body))
    for _ in range(100):
        before = (len(a.active), len(a.active_memory), sum(len(r) for r in a.roots.values()))
        _block(fn.body, a)
        after = (len(a.active), len(a.active_memory), sum(len(r) for r in a.roots.values()))
        if after == before:
            break
    a.useful = _useful(fn, a, seed_return)
    for k, p in enumerate(fn.params):
        if T.is_memory(p.type) and a.is_active(p):
            a.shadow_params.append(k)
    return a


def _useful(fn: Function, a: Activity, seed_return: bool) -> set[int]:
    """The backward half: floats whose derivative can reach the seeded return value or
    active memory (every active memory location may be seeded by its shadow)."""
    useful: set[int] = set()
    if seed_return:
        useful |= {v.id for v in fn.body.ops[-1].args if v.id in a.active}
    while True:
        before = len(useful)
        _useful_block(fn.body, a, useful)
        if len(useful) == before:
            return useful


def _useful_block(block: Block, a: Activity, useful: set[int]) -> None:
    def mark(v: Value) -> None:
        if v.id in a.active:
            useful.add(v.id)

    for op in reversed(block.ops):
        k = op.kind
        if k == "prim":
            rule = lookup(op.attrs["key"])
            if rule.nondiff or rule.alloc:
                continue
            if "out" in op.attrs:
                live = a.is_active(op.args[op.attrs["out"]])
            else:
                live = any((T.is_memory(r.type) and a.is_active(r)) or r.id in useful for r in op.results)
            if live:
                for v in op.args:
                    mark(v)
        elif k == "setitem":
            if a.is_active(op.args[0]):
                mark(op.args[1])
        elif k == "for":
            body = op.regions[0]
            _useful_block(body, a, useful)
            ys = body.ops[-1].args
            for c, init, y, r in zip(body.args[1:], op.args[3:], ys, op.results):
                if c.id in useful or r.id in useful:
                    for v in (c, init, y):
                        mark(v)
        elif k == "while":
            cond, body = op.regions
            _useful_block(body, a, useful)
            ys = body.ops[-1].args
            for cc, bc, init, y, r in zip(cond.args, body.args, op.args, ys, op.results):
                if bc.id in useful or cc.id in useful or r.id in useful:
                    for v in (cc, bc, init, y):
                        mark(v)
        elif k == "if":
            for region in op.regions:
                for y, r in zip(region.ops[-1].args, op.results):
                    if r.id in useful:
                        mark(y)
                _useful_block(region, a, useful)


def _roots(a: Activity, v: Value) -> frozenset:
    return a.roots.get(v.id, frozenset())


def _set_roots(a: Activity, v: Value, r: frozenset) -> None:
    a.roots[v.id] = a.roots.get(v.id, frozenset()) | r


def _mark(a: Activity, v: Value, active: bool) -> None:
    if active and v.type.differentiable and not T.is_memory(v.type):
        a.active.add(v.id)


def _block(block: Block, a: Activity) -> None:
    for op in block.ops:
        _op(op, a)


def _flow(a: Activity, dst: Value, src: Value) -> None:
    """`dst` holds whatever `src` holds (carries, branch results)."""
    if T.is_memory(dst.type):
        _set_roots(a, dst, _roots(a, src))
    else:
        _mark(a, dst, a.is_active(src))


def _op(op: Op, a: Activity) -> None:
    k = op.kind
    if k == "prim":
        rule = lookup(op.attrs["key"])
        args_active = any(a.is_active(v) for v in op.args if v.type.differentiable
                          and not ("out" in op.attrs and v is op.args[op.attrs["out"]]))
        if rule.nondiff:
            args_active = False
        if "out" in op.attrs:
            out = op.args[op.attrs["out"]]
            if args_active:
                a.active_memory |= _roots(a, out)
            return
        for r in op.results:
            if T.is_memory(r.type):
                if rule.view or rule.maybe_view:
                    _set_roots(a, r, _roots(a, op.args[0]))
                else:
                    _set_roots(a, r, frozenset({("op", id(op))}))
                    if args_active:
                        a.active_memory.add(("op", id(op)))
            else:
                _mark(a, r, args_active)
    elif k == "getitem":
        base, r = op.args[0], op.result
        if T.is_memory(r.type) and indexing.is_advanced(op):
            # x[idx] with an int array or a mask is a copy: fresh memory, active with x
            _set_roots(a, r, frozenset({("op", id(op))}))
            if a.is_active(base):
                a.active_memory.add(("op", id(op)))
        elif T.is_memory(r.type):
            _set_roots(a, r, _roots(a, base))
        else:
            _mark(a, r, a.is_active(base))
    elif k == "setitem":
        obj, val = op.args[0], op.args[1]
        if a.is_active(val):
            a.active_memory |= _roots(a, obj)
        if T.is_memory(val.type):  # storing an array reference into a list
            _set_roots(a, obj, _roots(a, val))
    elif k == "for":
        body = op.regions[0]
        inits = op.args[3:]
        carries = body.args[1:]
        ys = body.ops[-1].args
        for c, i, y in zip(carries, inits, ys):
            _flow(a, c, i)
            _flow(a, c, y)
        _block(body, a)
        for c, y, r in zip(carries, ys, op.results):
            _flow(a, c, y)
            _flow(a, r, c)
            _flow(a, r, y)
    elif k == "while":
        cond, body = op.regions
        ys = body.ops[-1].args
        for cc, bc, i, y in zip(cond.args, body.args, op.args, ys):
            for dst in (cc, bc):
                _flow(a, dst, i)
                _flow(a, dst, y)
        _block(cond, a)
        _block(body, a)
        for cc, bc, y, r in zip(cond.args, body.args, ys, op.results):
            _flow(a, cc, y)
            _flow(a, bc, y)
            _flow(a, r, cc)
    elif k == "if":
        for region in op.regions:
            _block(region, a)
            for y, r in zip(region.ops[-1].args, op.results):
                _flow(a, r, y)
