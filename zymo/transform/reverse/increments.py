"""Increment stores: `x[s] = x[s] + e` whose adjoint needs no round trip through `dx[s]`.

Contract: `Increments(fn, act, index, overwrites)` finds, once per transform, each store
`setitem(x, v, idx)` of one element of an array where
- `v = add(t, e)`, `add(e, t)` or `sub(t, e)`, a number (`x[s] += e`, `x[s] -= e`,
  `x[s] = x[s] + e`, `x[s] = e + x[s]`), read by the store alone;
- `t = getitem(x, idx)` reads the same element: the same array value, index values that are
  the same values (or equal int constants) in the same index tree, one element (an int for
  every axis: no slice, no advanced index, no view, not a list), read by the add alone, once;
- the load, the add and the store are in one block, and no op between the load and the store
  may write memory that overlaps `x` (`Overwrites.first_writer(load, x)` is the store);
- `x`, `t` and `v` are active.
`by_op` maps the ids of the three ops to the `Increment`.

Its adjoint (`adjoint.py`) is `dv = dx[s]` at the store and `de += dv` (`-=` for `sub`) at
the add, where the general rule writes `dv = dx[s]; dx[s] = 0` at the store, `dt = dv` at
the add and `dx[s] += dt` at the load: that round trip leaves `dx[s]` as it found it,
provided nothing between the two reads or writes `dx[s]` other than by adding to it. In the
adjoint sweep, the ops between them are the adjoints of the ops between the load and the
store. The adjoint of an op reads or assigns the shadow of an array only when the op writes
that array (a store, an `out=` call: excluded above); every other adjoint touches `dx` by
accumulation (`dx[s] += ...`, `dx += ...`: a load of `x[s]` in `e`, `x[i] = x[i] + x[i] *
y[i]` with the loads apart), and additions into `dx[s]` commute: the sum `dx[s]` ends with
is the same. The store's expression (and its casts: a float64 `e` stored into float32 `x`,
a real part into complex memory) is the general rule's, and the load's adjoint, which read
no primal value, is left out, so the tape plan provides nothing new and nothing less.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from ...analysis.activity import Activity
from ...analysis.index import Index
from ...analysis.overwrite import Overwrites
from ...ir import types as T
from ...ir.core import Function, Op, Value, walk
from ...rules import indexing

_INCREMENTS = ("add", "sub")


@dataclass(frozen=True)
class Increment:
    load: Op    # t = x[s]
    add: Op     # v = t + e, e + t or t - e
    store: Op   # x[s] = v
    term: Value  # e


class Increments:
    def __init__(self, fn: Function, act: Activity, index: Index, overwrites: Overwrites):
        self.by_op: dict[int, Increment] = {}
        for op in walk(fn.body):
            if op.kind == "setitem":
                inc = _increment(op, act, index, overwrites)
                if inc is not None:
                    for o in (inc.load, inc.add, inc.store):
                        self.by_op[id(o)] = inc

    def get(self, op: Op) -> Increment | None:
        return self.by_op.get(id(op))


def _increment(store: Op, act: Activity, index: Index, overwrites: Overwrites) -> Increment | None:
    x, v = store.args[0], store.args[1]
    if not (isinstance(x.type, T.Array) and isinstance(v.type, T.Scalar) and _one_element(store)
            and act.is_active(x) and act.is_active(v) and index.reader_count(v) == 1):
        return None
    add = index.producer.get(v.id)
    if add is None or add.kind != "prim" or add.attrs.get("key") not in _INCREMENTS or len(add.args) != 2:
        return None
    for pos, other in ((0, 1), (1, 0)):
        load = index.producer.get(add.args[pos].id)
        if pos == 1 and add.attrs["key"] == "sub":
            break  # `e - x[s]`: the load's adjoint is `-dv`, not the identity
        if (load is not None and load.kind == "getitem" and load.args[0] is x and _one_element(load)
                and _same_index(load, store)
                and isinstance(add.args[other].type, T.Scalar) and index.reader_count(load.result) == 1
                and act.is_active(load.result)
                and index.block_of_op[id(load)] is index.block_of_op[id(add)] is index.block_of_op[id(store)]
                and overwrites.first_writer(load, x) is store):
            return Increment(load, add, store, add.args[other])
    return None


def _parts(op: Op) -> list:
    tree = op.attrs["index"]
    return list(tree[1]) if tree[0] == "t" else [tree]


def _one_element(op: Op) -> bool:
    """An int for every axis of the array (no slice, `...`, `None` or advanced index)."""
    parts = _parts(op)
    return (not indexing.is_advanced(op) and len(parts) == cast(T.Array, op.args[0].type).ndim
            and all(t[0] == "v" and isinstance(ty := op.args[t[1]].type, T.Scalar) and ty.kind == "int"
                    for t in parts))


def _same_index(load: Op, store: Op) -> bool:
    """Whether the two ops' index trees name the same values (or equal int constants)."""
    a, b = _parts(load), _parts(store)
    return len(a) == len(b) and all(_same_part(load.args[p[1]], store.args[q[1]]) for p, q in zip(a, b))


def _same_part(a: Value, b: Value) -> bool:
    return a is b or (a.is_const and b.is_const and type(a.const) is type(b.const) is int and a.const == b.const)
