"""Lists, dicts, comprehensions and generators built inside the differentiated function
(a mixin of `Lowerer`).

Contract:
- A list or dict the function builds is a `Ref` binding: an identity whose *contents*
  live in the current frame's env under the name `Ref.key` (`$c<N>`), so that `if`s merge
  them, loops carry them and aliases (`b = a`) see every mutation, exactly as for other
  names. Contents are
  - a *static list*: a Python tuple of bindings (scalar replacement, as for tuples: the
    length is known while lowering; `append`, `extend`, `insert`, `pop`, `+=`, item
    assignment with constant indices rebind the contents);
  - a *runtime list*: an IR array of numbers, filled by a loop whose trip count is known
    only at run time (`out = []; for i in range(n): out.append(expr)`: `fill_loop`
    allocates `np.empty(trips)` before the loop and stores at the iteration's index);
  - a *dict*: a tuple `(S(keys), *values)` with keys that are constants while lowering.
- Inlined calls share the contents with their caller (`share_containers`,
  `return_containers`).
- A Ref passed to a rule or builtin is frozen (`freeze`): a static list becomes a tuple
  (`np.empty([n, m])`, `np.concatenate(lst)`), or an array where NumPy would read one
  (`np.sum([a, b])`), a runtime list its array; user functions receive the Ref itself.
  `np.array`/`np.asarray` of numbers (nested lists included) is an `np.empty` filled by
  stores, of ints an index array, of arrays `np.stack`.
- Comprehensions and generator expressions lower as the equivalent loops, written as
  synthetic statements at the comprehension's line (`comprehension`): unrolled over static
  iterables (tuples, static lists, dicts, `range` with constant bounds, `zip`,
  `enumerate`), the runtime-list idiom over a run-time `range(n)` or array without `if`.
  A generator is materialised as a list where it is written, then consumed.
- A list whose length would depend on a run-time value (an append under a run-time
  condition, in a `while` loop, or after a runtime list was filled), a run-time index into
  a static list, a dict key that is not a constant: refused with the user's line and a
  hint. A list returned by the top-level function comes back as a tuple (static) or an
  array (runtime list).
"""
from __future__ import annotations

import ast
import functools
import itertools
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import UnsupportedCall, UnsupportedSyntax, ZymoSourceError, ZymoTypeError
from ..ir import types as T
from ..ir.core import Block, Value
from ..rules.registry import rule_for_callable
from .bindings import Poison, S, same_shape
from .host import LoweringHost

if TYPE_CHECKING:
    from .lower import Frame

_ids = itertools.count()
_KEYS: dict[tuple, tuple] = {}  # interned key tuples of dicts: same keys, same object


def _intern(keys: tuple) -> tuple:
    return _KEYS.setdefault(keys, keys)


@dataclass(eq=False)
class Ref:
    """A list or dict built by the function; its contents are `env[key]`."""
    key: str
    kind: str  # "list" | "dict"
    line: int

    def what(self) -> str:
        return f"the {self.kind} built at line {self.line}"


@dataclass(eq=False)
class CMethod:
    ref: Ref
    name: str


@dataclass(eq=False)
class _Fill:
    """A runtime list being filled by one loop (`fill_loop`)."""
    ref: Ref
    buf: Value
    depth: int  # builder depth of the loop's body block
    start: Value
    step: Value
    k: int  # items before the loop
    line: int
    counted: bool = False  # stored at a carried count (else at the iteration's index)
    sites: list = field(default_factory=list)  # ids of the append calls written in the body
    keep: list = field(default_factory=list)  # those calls (kept alive: ids are reused)
    types: list = field(default_factory=list)  # of the items before the loop
    site_types: dict = field(default_factory=dict)  # append call id -> type of its item
    seen: list = field(default_factory=list)  # body blocks that appended (kept alive: ids are reused)


LIST_METHODS = ("append", "extend", "insert", "pop", "copy", "reverse", "index", "count")
DICT_METHODS = ("get", "items", "keys", "values", "setdefault", "pop", "update", "copy")


class ContainerLowering(LoweringHost):
    # -- contents -------------------------------------------------------------
    @property
    def _fills(self) -> dict:
        return self.__dict__.setdefault("_fill_state", {})

    def new_container(self, kind: str, contents: Any, node: ast.AST) -> Ref:
        ref = Ref(f"$c{next(_ids)}", kind, getattr(node, "lineno", 0))
        self.frame.env[ref.key] = contents
        return ref

    def contents(self, ref: Ref, node: ast.AST) -> Any:
        fill = self._fills.get(ref.key)
        if fill is not None and not fill.counted:
            raise self.error(UnsupportedSyntax, f"{ref.what()} is read inside the loop at line {fill.line}, "
                             "which fills it", node,
                             "zymo preallocates a list appended to in a loop of run-time length; "
                             "it can only be appended to there",
                             "keep the values you need in variables (prev = v; out.append(v)), or "
                             "preallocate an array with np.empty(n) and index it")
        f: Frame | None = self.frame
        while f is not None:
            if ref.key in f.env:
                c = f.env[ref.key]
                if isinstance(c, Poison):
                    break
                if _counted(c):  # being filled at a count: the part filled so far
                    assert fill is not None  # a count stands in the env only while its loop is lowered
                    return self.b.getitem(fill.buf, (slice(None, c[1], None),), self.loc(node), "sl")
                return c
            f = f.parent
        raise self.error(ZymoSourceError, f"{ref.what()} is used outside the loop or branch that built it", node,
                         hint="build the list before the loop or if")

    def make_dict(self, items: dict, node: ast.AST) -> Ref:
        """A dict built here holding `items` (string keys: a call's `**kwargs`)."""
        return self.new_container("dict", (S(_intern(tuple(items))),) + tuple(items.values()), node)

    def built_dict(self, b: Any, node: ast.AST) -> dict | None:
        """The items of `b` if it is a dict built in the function (None otherwise)."""
        if not (isinstance(b, Ref) and b.kind == "dict"):
            return None
        c = self.contents(b, node)
        return dict(zip(c[0].obj, c[1:]))

    def set_contents(self, ref: Ref, contents: Any) -> None:
        self.frame.env[ref.key] = contents

    def share_containers(self, caller: Any, callee: Any) -> None:
        """An inlined callee sees (and may change) the caller's lists and dicts."""
        callee.env.update({k: v for k, v in caller.env.items() if k.startswith("$c")})

    def return_containers(self, callee: Any, caller: Any) -> None:
        caller.env.update({k: v for k, v in callee.env.items() if k.startswith("$c")})

    def _static_items(self, ref: Ref, node: ast.AST, what: str) -> tuple:
        c = self.contents(ref, node)
        if ref.kind == "dict":
            return tuple(c[0].obj)
        if isinstance(c, Value):
            raise self.error(UnsupportedSyntax, f"{what} of a list filled by a loop of run-time length "
                             "is not supported", node,
                             "its length is known only at run time",
                             "convert it with np.array(lst) and use NumPy, or build it in a loop of "
                             "constant length")
        return c

    # -- expressions -------------------------------------------------------------
    def expr_List(self, node: ast.List) -> Any:
        return self.new_container("list", tuple(self.expr(e) for e in node.elts), node)

    def expr_Dict(self, node: ast.Dict) -> Any:
        keys: list[Any] = []
        vals: list[Any] = []
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise self.error(UnsupportedSyntax, "** unpacking in a dict display is not supported", node,
                                 hint="write the items out, or use d.update(other)")
            key = self._const_key(self.expr(k), k)
            if key in keys:
                vals[keys.index(key)] = self.expr(v)
            else:
                keys.append(key)
                vals.append(self.expr(v))
        return self.new_container("dict", (S(_intern(tuple(keys))),) + tuple(vals), node)

    def expr_ListComp(self, node: ast.ListComp) -> Any:
        return self.comprehension(node, "list")

    def expr_GeneratorExp(self, node: ast.GeneratorExp) -> Any:
        if not getattr(node, "_zymo_consumed", False):
            raise self.error(UnsupportedSyntax, "a generator expression is only supported as the argument of "
                             "a call that consumes it at once", node,
                             "zymo evaluates a generator where it is written; Python evaluates it when it is "
                             "consumed, which may be after later statements changed what it reads",
                             "pass it straight to sum, any, all, min, max, tuple, list, sorted, np.array or "
                             "functools.reduce, or write a list comprehension")
        return self.comprehension(node, "list")

    def mark_consumed(self, callee: Any, node: ast.Call) -> None:
        """Generator expressions passed straight to a consumer are evaluated there."""
        ok = isinstance(callee, CMethod) and callee.name == "extend" or isinstance(callee, S) and (
            callee.obj in (sum, any, all, min, max, tuple, list, sorted, functools.reduce, np.array, np.asarray,
                           np.stack) or _is_join(callee.obj))
        if ok:
            for a in node.args:
                if isinstance(a, ast.GeneratorExp):
                    a._zymo_consumed = True  # type: ignore[attr-defined]  # a mark on the node (read above)

    def cond_containers(self, outer: dict, env: dict, node: ast.AST) -> None:
        if any(k.startswith("$c") and env.get(k, v) is not v for k, v in outer.items()):
            raise self.error(UnsupportedSyntax, "a while loop's condition changes a list or dict built in the "
                             "function", node, hint="change it in the loop's body")

    def expr_DictComp(self, node: ast.DictComp) -> Any:
        return self.comprehension(node, "dict")

    def _const_key(self, b: Any, node: ast.AST) -> Any:
        k = _key_of(b)
        if k is _NOKEY:
            raise self.error(UnsupportedSyntax, "a dict built in a differentiated function needs keys that are "
                             "constants while zymo lowers it", node,
                             "zymo scalar-replaces dicts: each key becomes a variable of its own",
                             "use string or integer keys written out (or loop variables of loops over "
                             "constant ranges, tuples and lists); for run-time keys use an array indexed by "
                             "an integer")
        return k

    def _const_index(self, b: Any, node: ast.AST, ref: Ref) -> int:
        if isinstance(b, Value) and b.is_const and isinstance(b.const, int) and not isinstance(b.const, bool):
            return b.const
        if isinstance(b, S) and isinstance(b.obj, int) and not isinstance(b.obj, bool):
            return b.obj
        raise self.error(UnsupportedSyntax, f"indexing {ref.what()} with a value known only at run time "
                         "is not supported", node,
                         "zymo keeps a list built in the function as separate variables (its length is known "
                         "while lowering), so an index must be a constant",
                         "index with a constant or a loop variable of a loop over a constant range, or "
                         "convert it first: arr = np.array(lst); arr[i]")

    # -- indexing -------------------------------------------------------------
    def container_getitem(self, ref: Ref, node: ast.Subscript) -> Any:
        c = self.contents(ref, node)
        if ref.kind == "dict":
            key = self._const_key(self.expr(node.slice), node.slice)
            keys = c[0].obj
            if key not in keys:
                raise self.error(ZymoSourceError, f"key {key!r} is not in {ref.what()}", node)
            return c[1 + keys.index(key)]
        if isinstance(c, Value):  # a runtime list: its array (numbers) or list (arrays)
            index = self.index(node.slice)
            if any(isinstance(ix, slice) for ix in index) and isinstance(c.type, T.List):
                raise self.error(UnsupportedSyntax, "slicing a list of arrays filled by a loop of run-time length "
                                 "is not supported", node, hint="index its items, or np.stack(lst)[a:b]")
            if any(isinstance(ix, slice) for ix in index):
                view = self.b.getitem(c, index, self.loc(node), "sl")
                return self.new_container("list", self.b.prim("numpy.copy", [view], {}, self.loc(node), "sl"), node)
            return self.b.getitem(c, index, self.loc(node), "ld")
        s = node.slice
        if isinstance(s, ast.Slice):
            parts = [None if p is None else self._const_index(self.expr(p), p, ref) for p in (s.lower, s.upper, s.step)]
            return self.new_container("list", c[slice(*parts)], node)
        k = self._const_index(self.expr(s), s, ref)
        try:
            return c[k]
        except IndexError:
            raise self.error(ZymoSourceError, f"list index {k} out of range ({ref.what()} has {len(c)} items)",
                             node) from None

    def container_setitem(self, ref: Ref, target: ast.Subscript, value: Any, node: ast.AST) -> None:
        c = self.contents(ref, target)
        if ref.kind == "dict":
            key = self._const_key(self.expr(target.slice), target.slice)
            keys = c[0].obj
            if key in keys:
                j = keys.index(key)
                self.set_contents(ref, c[:1 + j] + (value,) + c[2 + j:])
            else:
                self.set_contents(ref, (S(_intern(keys + (key,))),) + c[1:] + (value,))
            return
        if isinstance(c, Value):
            self.store(c, self.index(target.slice), value, target)
            return
        if isinstance(target.slice, ast.Slice):
            raise self.error(UnsupportedSyntax, "assigning to a slice of a list is not supported", target,
                             hint="assign the items one by one, or build a new list")
        k = self._const_index(self.expr(target.slice), target.slice, ref)
        if not -len(c) <= k < len(c):
            raise self.error(ZymoSourceError, f"list assignment index {k} out of range", target)
        k %= len(c)
        self.set_contents(ref, c[:k] + (value,) + c[k + 1:])

    def container_aug(self, s: ast.AugAssign) -> bool:
        """`lst += other` (extends in place) and `lst[k] += v`, `d[key] += v`."""
        t = s.target
        if isinstance(t, ast.Name):
            try:
                cur = self.lookup(t.id, t)
            except ZymoSourceError:
                return False
            if not isinstance(cur, Ref):
                return False
            if cur.kind != "list" or not isinstance(s.op, (ast.Add, ast.Mult)):
                raise self.error(UnsupportedSyntax, f"operator {type(s.op).__name__}= on a {cur.kind} is not "
                                 "supported", s)
            if isinstance(s.op, ast.Add):
                self._extend(cur, self.expr(s.value), s)
            else:
                n = self._const_index(self.expr(s.value), s.value, cur)
                self.set_contents(cur, self._static_items(cur, s, "repeating") * max(n, 0))
            return True
        if isinstance(t, ast.Subscript):
            obj = self.expr(t.value)
            if not isinstance(obj, Ref):
                return False
            from .lower import BINOPS

            key = BINOPS.get(type(s.op))
            if key is None:
                raise self.error(UnsupportedSyntax, f"operator {type(s.op).__name__} is not supported", s)
            cur = self.container_getitem(obj, t)
            rhs = self.expr(s.value)
            if isinstance(cur, Value) and isinstance(cur.type, T.Array):
                self.inplace(cur, key, rhs, s)  # the array item is updated in place
                return True
            self.container_setitem(obj, t, self.binop(key, cur, rhs, s), s)
            return True
        return False

    def container_binop(self, key: str, a: Any, b: Any, node: ast.AST) -> Any:
        if key == "add" and isinstance(a, Ref) and isinstance(b, Ref) and a.kind == b.kind == "list" and any(
                isinstance(self.contents(r, node), Value) for r in (a, b)):
            # a list of numbers of run-time length joined with another: the arrays concatenated
            parts = []
            for r in (a, b):
                c = self.contents(r, node)
                if isinstance(c, Value) and isinstance(c.type, T.List):
                    raise self.error(UnsupportedSyntax, "+ of a list of arrays filled by a loop of run-time length "
                                     "is not supported", node, hint="np.stack the lists and concatenate the arrays")
                if isinstance(c, tuple):
                    if not c:
                        continue
                    c = self.array_from(self.freeze(r, node), None, node)
                    if cast(T.Array, c.type).ndim != 1:
                        raise self.error(UnsupportedSyntax, "+ of a list of numbers and a list of other items",
                                         node)
                parts.append(c)
            joined = parts[0] if len(parts) == 1 else self.join("numpy.concatenate", [tuple(parts)], {}, node)
            if len(parts) == 1:
                joined = self.b.prim("numpy.copy", [joined], {}, self.loc(node), "lst")
            return self.new_container("list", joined, node)
        if key == "add" and isinstance(a, Ref) and isinstance(b, Ref) and a.kind == b.kind == "list":
            return self.new_container("list", self._static_items(a, node, "+") + self._static_items(b, node, "+"),
                                      node)
        if key == "mul" and (isinstance(a, Ref) != isinstance(b, Ref)):
            ref, n = (a, b) if isinstance(a, Ref) else (b, a)
            if ref.kind == "list":
                k = self._const_index(n, node, ref)
                return self.new_container("list", self._static_items(ref, node, "*") * max(k, 0), node)
        raise self.error(UnsupportedSyntax, f"operator {key} on a list or dict built in the function is not "
                         "supported here", node, hint="lists support + (another list) and * (a constant); "
                         "for arithmetic convert with np.array(lst)")

    def container_truth(self, ref: Ref, node: ast.AST) -> Any:
        c = self.contents(ref, node)
        if isinstance(c, Value):
            return self.b.prim("gt", [self._runtime_len(c, node),
                                      self.b.const(0, self.loc(node))], {}, self.loc(node), "cond")
        return len(c) > (1 if ref.kind == "dict" else 0)

    def container_in(self, item: Any, coll: Any, node: ast.AST) -> Any:
        """`key in d`, `x in lst` with constants: decided while lowering."""
        key = _key_of(item)
        if isinstance(coll, Ref) and coll.kind == "dict":
            keys = list(self.contents(coll, node)[0].obj)
        else:
            items = self._static_items(coll, node, "`in`") if isinstance(coll, Ref) else coll
            keys = [_key_of(x) for x in items]
        if key is _NOKEY or any(k is _NOKEY for k in keys):
            raise self.error(UnsupportedSyntax, "`in` is only supported with constants here", node,
                             hint="compare the items explicitly")
        return key in keys

    def iteration(self, ref: Ref, node: ast.AST) -> Any:
        """What `for x in ref` iterates: a tuple (unrolled) or an array (a runtime list)."""
        c = self.contents(ref, node)
        if ref.kind == "dict":
            out = tuple(_key_binding(self, k, node) for k in c[0].obj)
            self.__dict__.setdefault("_iterated", {})[id(out)] = (ref, c[0], out)
            return out
        if isinstance(c, tuple):
            self.__dict__.setdefault("_iterated", {})[id(c)] = (ref, c, c)
        return c

    def iterated_unchanged(self, desc: tuple, node: ast.AST) -> None:
        """After a loop over static lists or dicts: the body changed none of them (Python reads a
        list's items as it goes, where zymo unrolled the loop over the items it had)."""
        seen = self.__dict__.get("_iterated", {})
        for q in self._seqs(desc):
            entry = seen.pop(id(q), None) if isinstance(q, tuple) else None
            if entry is None or entry[2] is not q:
                continue
            ref, before = entry[0], entry[1]
            try:
                now = self.contents(ref, node)
            except ZymoSourceError:
                continue
            now = now[0] if ref.kind == "dict" and isinstance(now, tuple) else now
            if now is not before:
                raise self.error(UnsupportedSyntax, f"{ref.what()} changes while the loop at line "
                                 f"{getattr(node, 'lineno', '?')} iterates over it", node,
                                 "zymo unrolls a loop over a list built in the function over the items it had "
                                 "when the loop started" + (" (a dict's keys)" if ref.kind == "dict" else ""),
                                 "iterate over a copy (for v in list(lst)) and build a new list")

    # -- freezing -------------------------------------------------------------
    def freeze(self, b: Any, node: ast.AST, numeric: bool = False) -> Any:
        """A binding with its lists as tuples (or arrays where `numeric` and NumPy reads one)."""
        if isinstance(b, Ref):
            c = self.contents(b, node)
            if b.kind == "dict":
                raise self.error(UnsupportedCall, "a dict built in the function cannot be passed here", node,
                                 hint="pass its values: d['key'], or tuple(d.values())")
            if isinstance(c, Value):  # NumPy reads a list of arrays as their stack
                return self._stack_list(c, node) if numeric and isinstance(c.type, T.List) else c
            items = tuple(self.freeze(x, node) for x in c)
            if numeric and items and not _all_ints(items):
                return self.array_from(items, None, node)
            return items
        if isinstance(b, tuple):
            return tuple(self.freeze(x, node) for x in b)
        return b

    def check_return(self, b: Any, node: ast.AST) -> None:
        """The top-level function returns no dict built in it (refused at the `return`)."""
        if self.frame.parent is None and len(self.inlining) == 1 and isinstance(b, Ref) and b.kind == "dict":
            self.freeze_result(b, node)

    def freeze_result(self, b: Any, node: ast.AST) -> Any:
        if isinstance(b, Ref) and b.kind == "dict":
            raise self.error(UnsupportedSyntax, "returning a dict built in the function is not supported", node,
                             hint="return a tuple of its values")
        return self.freeze(b, node)

    # -- calls --------------------------------------------------------------------
    def container_call(self, callee: Any, pos: list, kw: dict, node: ast.Call) -> Any:
        """Calls involving lists and dicts; NotImplemented (with `pos`/`kw` frozen for rules
        and builtins) when the ordinary call path should go on."""
        if isinstance(callee, CMethod):
            return self.container_method(callee, pos, kw, node)
        if type(callee).__name__ == "_Method":  # an array method: x.reshape([2, -1]), x.dot([a, b])
            for k, x in enumerate(pos):
                pos[k] = self.freeze(x, node, numeric=True)
            for k, x in kw.items():
                kw[k] = self.freeze(x, node, numeric=True)
            return NotImplemented
        if not isinstance(callee, S):
            return NotImplemented  # user functions get the Refs themselves
        fn = callee.obj
        has = any(_has_ref(x) for x in itertools.chain(pos, kw.values()))
        if fn in (np.array, np.asarray):
            if not pos:
                return NotImplemented
            dtype = kw.get("dtype")
            extra = set(kw) - {"dtype"}
            if extra or len(pos) > 1:
                what = ", ".join(sorted(extra)) or "more arguments"
                raise self.error(UnsupportedCall, f"np.{fn.__name__} with {what} is not supported", node)
            x = pos[0]
            if isinstance(x, Value) and isinstance(x.type, T.Array):
                if dtype is not None and np.dtype(getattr(dtype, "obj", dtype)).name != x.type.dtype:
                    return NotImplemented
                return self.b.prim("numpy.copy", [x], {}, self.loc(node), "arr") if fn is np.array else x
            items = self.freeze(x, node)
            if isinstance(items, Value):  # a runtime list
                if isinstance(items.type, T.List):
                    return self._stack_list(items, node)
                return self.b.prim("numpy.copy", [items], {}, self.loc(node), "arr")
            if isinstance(items, tuple):
                return self.array_from(items, dtype, node)
            return NotImplemented
        if fn is len and len(pos) == 1 and isinstance(pos[0], Ref):
            c = self.contents(pos[0], node)
            if isinstance(c, Value):
                return self._runtime_len(c, node)
            return self.b.const(len(c) - (1 if pos[0].kind == "dict" else 0), self.loc(node), "n")
        if fn in (any, all) and len(pos) == 1 and not kw:
            x = pos[0]
            if isinstance(x, Ref):
                c = self.contents(x, node)
                if isinstance(c, Value) and isinstance(c.type, T.Array):
                    return self.b.prim("numpy." + fn.__name__, [c], {}, self.loc(node))
                if isinstance(c, Value):
                    raise self.error(UnsupportedCall, f"{fn.__name__}() of a list of arrays is ambiguous", node,
                                     hint=f"use np.{fn.__name__}(np.stack(lst))")
                x = self.iteration(x, node)
            if isinstance(x, tuple):
                return self._any_all(fn is any, x, node)
            return NotImplemented
        if fn in (sum, min, max) and len(pos) == 1 and isinstance(pos[0], Ref):
            c = self.contents(pos[0], node)
            if isinstance(c, Value) and isinstance(c.type, T.List):
                if fn is not sum:
                    raise self.error(UnsupportedCall, f"{fn.__name__}() of a list of arrays compares arrays", node,
                                     hint=f"use np.{fn.__name__}(np.stack(lst), axis=0) for the elementwise "
                                          f"{fn.__name__}")
                return self.b.prim("numpy.sum", [self._stack_list(c, node)], {"axis": 0}, self.loc(node), "s")
            if isinstance(c, Value):
                pos[0] = c  # an array: np.sum/np.min/np.max
                return NotImplemented
        if fn is sum and len(pos) == 2 and not kw and isinstance(pos[0], (Ref, tuple)):
            items = self.freeze(pos[0], node)
            if isinstance(items, tuple):
                acc = pos[1]
                for x in items:
                    acc = self.binop("add", acc, x, node)
                return acc
        if fn in (tuple, list) and len(pos) <= 1 and not kw:
            if not pos:
                items = ()
            elif isinstance(pos[0], Ref):
                items = self.iteration(pos[0], node)
                if isinstance(items, Value):
                    raise self.error(UnsupportedCall, f"{fn.__name__}() of a list filled by a loop of run-time "
                                     "length is not supported", node, hint="use np.array(lst)")
            elif isinstance(pos[0], tuple):
                items = pos[0]
            else:
                return NotImplemented
            return items if fn is tuple else self.new_container("list", items, node)
        if fn is dict and not pos:
            keys = tuple(kw)
            return self.new_container("dict", (S(_intern(keys)),) + tuple(kw.values()), node)
        if fn is sorted or fn is reversed:
            if len(pos) == 1 and not kw and isinstance(pos[0], (Ref, tuple)):
                items = self.freeze(pos[0], node) if not (isinstance(pos[0], Ref) and pos[0].kind == "dict") \
                    else self.iteration(pos[0], node)
                if fn is reversed and isinstance(items, tuple):
                    return items[::-1]
                if fn is sorted and isinstance(items, tuple) and all(_key_of(x) is not _NOKEY for x in items):
                    return self.new_container("list", tuple(sorted(items, key=_key_of)), node)
            raise self.error(UnsupportedCall, f"{fn.__name__}() is only supported on constants and static lists "
                             "here", node, hint="sort with np.sort on an array")
        if _is_join(fn) and pos and isinstance(pos[0], Ref) and pos[0].kind == "list":
            c = self.contents(pos[0], node)
            if isinstance(c, Value) and isinstance(c.type, T.List):
                axis = kw.get("axis", pos[1] if len(pos) > 1 else None)
                if fn is np.stack and (axis is None or _key_of(axis) == 0) and len(pos) <= 2 \
                        and set(kw) <= {"axis"}:
                    return self._stack_list(c, node)
                raise self.error(UnsupportedCall, f"np.{fn.__name__} of a list of arrays filled by a loop of "
                                 "run-time length is not supported", node,
                                 hint="np.stack(lst) (axis 0) is; reshape or transpose its result")
            if isinstance(c, Value) and fn is np.stack and not kw and len(pos) == 1:
                return self.b.prim("numpy.copy", [c], {}, self.loc(node), "arr")
        if fn is functools.reduce:
            return self._reduce(pos, kw, node)
        if fn in (enumerate, zip) and has:
            raise self.error(UnsupportedSyntax, f"{fn.__name__}() is only supported as the iterable of a for loop "
                             "or comprehension", node)
        if has and rule_for_callable(fn) is None and not isinstance(fn, (type, types.BuiltinFunctionType)):
            return NotImplemented  # a user function: inlined, it receives the list itself
        if has:
            # NumPy reads a list of numbers as an array (np.sum([a, b])), a list of ints as a shape
            numeric = rule_for_callable(fn) is not None and not _is_join(fn) and \
                (rule_for_callable(fn) or "").split(".")[0] in ("numpy", "scipy")
            for k, x in enumerate(pos):
                pos[k] = self.freeze(x, node, numeric=numeric)
            for k, x in kw.items():
                kw[k] = self.freeze(x, node)
        return NotImplemented

    def _any_all(self, is_any: bool, items: tuple, node: ast.AST) -> Any:
        acc: Any = not is_any
        for x in items:
            t = self.truth(self.freeze(x, node), node)
            if isinstance(t, bool):
                if t == is_any:
                    return self.b.const(is_any, self.loc(node))
                continue
            acc = t if isinstance(acc, bool) else self.b.prim("zymo.or" if is_any else "zymo.and", [acc, t], {},
                                                              self.loc(node), "cond")
        return self.b.const(acc, self.loc(node)) if isinstance(acc, bool) else acc

    def _reduce(self, pos: list, kw: dict, node: ast.Call) -> Any:
        if kw or len(pos) not in (2, 3):
            raise self.error(UnsupportedCall, "functools.reduce(f, items[, initial]) without keywords is supported",
                             node)
        f, seq = pos[0], pos[1]
        items = self.iteration(seq, node) if isinstance(seq, Ref) else seq
        if not isinstance(items, tuple):
            raise self.error(UnsupportedCall, "functools.reduce over a sequence whose length is known only at run "
                             "time is not supported", node,
                             hint="write the loop: acc = init; for x in xs: acc = f(acc, x)")
        if len(pos) == 3:
            acc, rest = pos[2], items
        else:
            if not items:
                raise self.error(ZymoSourceError, "reduce() of an empty sequence with no initial value", node)
            acc, rest = items[0], items[1:]
        for x in rest:
            acc = self.call(f, [acc, x], {}, node)
        return acc

    def container_method(self, m: CMethod, pos: list, kw: dict, node: ast.Call) -> Any:
        ref, name = m.ref, m.name
        loc = self.loc(node)
        if ref.kind == "list":
            fill = self._fills.get(ref.key)
            if fill is not None and name == "append":
                return self._fill_append(fill, pos, kw, node)
            c = self.contents(ref, node)
            if isinstance(c, Value):
                raise self.error(UnsupportedSyntax, f"list.{name} on {ref.what()}, which a loop of run-time length "
                                 "filled, is not supported", node,
                                 "zymo allocates such a list once, with the loop's trip count: it cannot grow "
                                 "or shrink after the loop",
                                 "append only in that loop, or build a second list (or np.concatenate arrays)")
            if name == "append" and len(pos) == 1 and not kw:
                self.set_contents(ref, c + (pos[0],))
                return S(None)
            if name == "extend" and len(pos) == 1 and not kw:
                self._extend(ref, pos[0], node)
                return S(None)
            if name == "insert" and len(pos) == 2 and not kw:
                k = self._const_index(pos[0], node, ref)
                lst = list(c)
                lst.insert(k, pos[1])
                self.set_contents(ref, tuple(lst))
                return S(None)
            if name == "pop" and len(pos) <= 1 and not kw:
                k = self._const_index(pos[0], node, ref) if pos else -1
                if not c:
                    raise self.error(ZymoSourceError, "pop from an empty list", node)
                lst = list(c)
                try:
                    item = lst.pop(k)
                except IndexError:
                    raise self.error(ZymoSourceError, "pop index out of range", node) from None
                self.set_contents(ref, tuple(lst))
                return item
            if name == "copy" and not pos and not kw:
                return self.new_container("list", c, node)
            if name == "reverse" and not pos and not kw:
                self.set_contents(ref, c[::-1])
                return S(None)
            if name in ("index", "count") and len(pos) == 1 and not kw:
                key = _key_of(pos[0])
                keys = [_key_of(x) for x in c]
                if key is not _NOKEY and all(k is not _NOKEY for k in keys):
                    if name == "count":
                        return self.b.const(keys.count(key), loc)
                    if key in keys:
                        return self.b.const(keys.index(key), loc)
                    raise self.error(ZymoSourceError, f"{key!r} is not in the list", node)
                raise self.error(UnsupportedCall, f"list.{name} is only supported with constants", node)
            raise self.error(UnsupportedCall, f"list.{name} with these arguments is not supported", node,
                             hint="supported: " + ", ".join(LIST_METHODS))
        c = self.contents(ref, node)
        keys, vals = c[0].obj, c[1:]
        if name in ("keys", "values", "items") and not pos and not kw:
            kb = tuple(_key_binding(self, k, node) for k in keys)
            return {"keys": kb, "values": tuple(vals), "items": tuple(zip(kb, vals))}[name]
        if name in ("get", "setdefault", "pop") and 1 <= len(pos) <= 2 and not kw:
            key = self._const_key(pos[0], node)
            default = pos[1] if len(pos) > 1 else S(None)
            if key in keys:
                j = keys.index(key)
                if name == "pop":
                    self.set_contents(ref, (S(_intern(keys[:j] + keys[j + 1:])),) + vals[:j] + vals[j + 1:])
                return vals[j]
            if name == "pop" and len(pos) == 1:
                raise self.error(ZymoSourceError, f"key {key!r} is not in {ref.what()}", node)
            if name == "setdefault":
                self.set_contents(ref, (S(_intern(keys + (key,))),) + vals + (default,))
            return default
        if name == "update" and len(pos) <= 1:
            items: list = []
            if pos:
                other = pos[0]
                if isinstance(other, Ref) and other.kind == "dict":
                    oc = self.contents(other, node)
                    items += list(zip(oc[0].obj, oc[1:]))
                else:
                    raise self.error(UnsupportedCall, "dict.update takes a dict built in the function here", node)
            items += list(kw.items())
            for k, v in items:
                keys, vals = self.contents(ref, node)[0].obj, self.contents(ref, node)[1:]
                if k in keys:
                    j = keys.index(k)
                    self.set_contents(ref, (S(keys),) + vals[:j] + (v,) + vals[j + 1:])
                else:
                    self.set_contents(ref, (S(_intern(keys + (k,))),) + vals + (v,))
            return S(None)
        if name == "copy" and not pos and not kw:
            return self.new_container("dict", c, node)
        raise self.error(UnsupportedCall, f"dict.{name} with these arguments is not supported", node,
                         hint="supported: " + ", ".join(DICT_METHODS))

    def _extend(self, ref: Ref, other: Any, node: ast.AST) -> None:
        c = self._static_items(ref, node, "extending")  # `ref` is a list (the callers check)
        if isinstance(other, Ref):
            items = self.iteration(other, node)
            if isinstance(items, Value):
                raise self.error(UnsupportedSyntax, "extending a list with a list of run-time length is not "
                                 "supported", node, hint="use np.concatenate on arrays")
        elif isinstance(other, tuple):
            items = other
        else:
            raise self.error(UnsupportedSyntax, "a list can only be extended by a list or tuple here", node,
                             hint="for an array, use np.concatenate, or append its items in a loop of constant "
                                  "length")
        if self._fills.get(ref.key) is not None:
            self.contents(ref, node)  # refuses
        self.set_contents(ref, c + tuple(items))

    def _runtime_len(self, c: Value, node: ast.AST) -> Value:
        if isinstance(c.type, T.List):
            return self.b.prim("builtins.len", [c], {}, self.loc(node), "n")
        return self.b.prim("zymo.dim", [c, 0], {}, self.loc(node), "n")

    def _stack_list(self, lst: Value, node: ast.AST) -> Value:
        """`np.stack(lst)` of a runtime list of arrays: a fresh array filled row by row in a loop
        (the adjoint of each row store adds into the shadow of that item)."""
        elt = cast(T.Array, cast(T.List, lst.type).elt)
        if elt.dtype not in ("float64", "float32") and elt.dtype != "int64":
            raise self.error(UnsupportedCall, "np.stack of this list is not supported", node)
        n = next(_ids)
        names = {"lst": f"_zymo_lst{n}", "np": f"_zymo_np{n}", "res": f"_zymo_res{n}", "k": f"_zymo_k{n}"}
        code = ("{res} = {np}.empty((len({lst}),) + {lst}[0].shape, dtype={lst}[0].dtype)\n"
                "for {k} in range(len({lst})):\n"
                "    {res}[{k}] = {lst}[{k}]\n").format(**names)
        stmts = ast.parse(code).body
        for st in stmts:
            for sub in ast.walk(st):
                if "lineno" in sub._attributes:
                    ast.copy_location(sub, node)
        f = self.frame
        f.env[names["lst"]], f.env[names["np"]] = lst, S(np)
        try:
            self.stmts(stmts)
            return f.env[names["res"]]
        finally:
            for v in names.values():
                f.env.pop(v, None)

    # -- np.array of numbers -----------------------------------------------------
    def array_from(self, items: tuple, dtype: Any, node: ast.AST) -> Value:
        """`np.array` of nested tuples: numbers into a fresh array by stores, ints written out as an
        index array, arrays stacked."""
        loc = self.loc(node)
        shape, leaves = _nest_shape(items)
        if shape is None:
            raise self.error(ZymoTypeError, "np.array needs a (nested) list of numbers of one length per level, "
                             "or of arrays", node, hint="give every row the same length")
        if leaves and all(isinstance(x, Value) and isinstance(x.type, T.Array) for x in leaves):
            if len(shape) != 1:
                raise self.error(UnsupportedCall, "np.array of nested lists of arrays is not supported", node,
                                 hint="np.stack a flat list of arrays")
            return self.join("numpy.stack", [items], {}, node)
        vals = []
        for x in leaves:
            if isinstance(x, Value) and isinstance(x.type, T.Array):
                raise self.error(ZymoTypeError, "np.array of numbers mixed with arrays is not supported", node,
                                 hint="np.stack arrays of one shape")
            vals.append(self.as_value(x, node))
        dt = None
        if dtype is not None:
            obj = dtype.obj if isinstance(dtype, S) else dtype
            try:
                dt = np.dtype(obj).name
            except TypeError:
                raise self.error(ZymoTypeError, f"np.array with dtype={obj!r} is not supported", node) from None
        kinds = {v.type.kind for v in vals if isinstance(v.type, T.Scalar)}
        if dt is None:
            dt = "float64" if "f64" in kinds or not vals else "float32" if "f32" in kinds else \
                "int64" if "int" in kinds else "bool"
            if kinds == {"f32", "int"}:
                dt = "float64"
        if dt == "int64" and len(shape) == 1 and all(v.type == T.INT for v in vals) and vals:
            return self.b.prim("zymo.index_array", [tuple(vals)], {}, loc, "idx")
        arr = self.b.prim("numpy.empty", [tuple(self.b.const(d, loc, "n") for d in shape)], {"dtype": S(dt)}, loc,
                          "arr")
        for flat, v in enumerate(vals):
            idx = np.unravel_index(flat, shape) if shape else ()
            self.b.setitem(arr, tuple(self.b.const(int(i), loc, "k") for i in idx), v, loc)
        return arr

    # -- comprehensions ---------------------------------------------------------
    def comprehension(self, node: ast.ListComp | ast.GeneratorExp | ast.DictComp, kind: str) -> Ref:
        """Lowered as the loops it stands for, written as statements at its line; its
        targets do not leak (Python 3 scoping)."""
        f = self.frame
        for g in node.generators:
            if g.is_async:
                raise self.error(UnsupportedSyntax, "async comprehensions are not supported", node)
        acc = f"$comp{next(_ids)}"
        ref = self.new_container(kind, () if kind == "list" else (S(_intern(())),), node)
        f.env[acc] = ref
        name = ast.Name(id=acc, ctx=ast.Load())
        inner: ast.stmt
        if isinstance(node, ast.DictComp):
            inner = ast.Assign([ast.Subscript(ast.Name(id=acc, ctx=ast.Load()), node.key, ast.Store())], node.value)
        else:  # kind "list"
            inner = ast.Expr(ast.Call(ast.Attribute(name, "append", ast.Load()), [node.elt], []))
        try:
            self._comp_loops(node, inner)
        finally:
            f.env.pop(acc, None)
        return ref

    def generator_call(self, callee: Any, node: ast.Call) -> Any:
        """`sum(...)`, `any(...)`, `all(...)` of a generator expression: an accumulating loop over
        the generator's iterables (no list; `if` conditions may be run-time values)."""
        if not (isinstance(callee, S) and callee.obj in (sum, any, all) and len(node.args) == 1
                and not node.keywords and isinstance(node.args[0], ast.GeneratorExp)):
            return NotImplemented
        g = node.args[0]
        f = self.frame
        acc, conv = f"$acc{next(_ids)}", f"$bool{next(_ids)}"
        f.env[acc] = self.b.const({sum: 0, any: False, all: True}[callee.obj], self.loc(node), "acc")
        f.env[conv] = S(bool)
        load = ast.Name(id=acc, ctx=ast.Load())
        if callee.obj is sum:
            value: ast.expr = ast.BinOp(load, ast.Add(), g.elt)
        else:
            truth = ast.Call(ast.Name(id=conv, ctx=ast.Load()), [g.elt], [])
            value = ast.BoolOp(ast.Or() if callee.obj is any else ast.And(), [load, truth])
        inner = ast.Assign([ast.Name(id=acc, ctx=ast.Store())], value)
        saved = (len(self.b.blocks), len(self.b.block.ops), dict(f.env), len(self.inlining), dict(self._fills))
        try:
            self._comp_loops(g, inner)
            return f.env[acc]
        except ZymoTypeError:
            if callee.obj is not sum:
                raise
            # the items are arrays summed in a loop of run-time length (the int 0 the sum starts
            # from cannot be carried as an array): undo, and sum the list the generator makes
            depth, nops, env, inl, fills = saved
            del self.b.blocks[depth:]
            del self.b.block.ops[nops:]
            self.frame = f
            f.env = env
            del self.inlining[inl:]
            self._fills.clear()
            self._fills.update(fills)
        finally:
            f.env.pop(acc, None)
            f.env.pop(conv, None)
        g._zymo_consumed = True  # type: ignore[attr-defined]  # a mark on the node (expr_Call reads it)
        items = self.comprehension(g, "list")
        c = self.contents(items, node)
        if isinstance(c, Value) and isinstance(c.type, T.List):
            return self.b.prim("numpy.sum", [self._stack_list(c, node)], {"axis": 0}, self.loc(node), "s")
        return self.call(callee, [self.freeze(items, node)], {}, node)

    def _comp_loops(self, node: Any, inner: ast.stmt) -> None:
        f = self.frame
        if any(isinstance(n, ast.Lambda) for n in ast.walk(node)):
            raise self.error(UnsupportedSyntax, "a lambda inside a comprehension is not supported", node,
                             "its free variables would be read where it is called, after the comprehension's "
                             "variables are gone",
                             "define the function outside and pass the values as arguments")
        for g in reversed(node.generators):
            for cond in reversed(g.ifs):
                inner = ast.If(cond, [inner], [])
            inner = ast.For(g.target, g.iter, [inner], [])
        for n in ast.walk(inner):
            if "lineno" in n._attributes and getattr(n, "lineno", None) is None:
                ast.copy_location(n, node)
        targets = {t.id for g in node.generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}
        saved = {t: f.env[t] for t in targets if t in f.env}
        try:
            self.stmts([inner])
        finally:
            for t in targets:
                if t in saved:
                    f.env[t] = saved[t]
                else:
                    f.env.pop(t, None)

    # -- loops ----------------------------------------------------------------------
    def _peek(self, name: str) -> Any:
        """The binding of a local or enclosing name, without capturing globals (None if none)."""
        f: Frame | None = self.frame
        while f is not None and name not in f.env:
            f = f.parent
        return f.env.get(name) if f is not None else None

    def touches_containers(self, s: ast.For) -> bool:
        """Whether a loop of constant length must be unrolled for the static lists and dicts built
        in the function that its body uses: a method call on one (`out.append(v)`, `d.get(i)`),
        one passed to a call, or one indexed by the loop's variable. (Item updates with constant
        indices, `acc[0] += v`, need no unrolling: the loop carries the items.)"""
        targets = {n.id for n in ast.walk(s.target) if isinstance(n, ast.Name)}

        def static(node: ast.AST) -> bool:
            if not isinstance(node, ast.Name):
                return False
            b = self._peek(node.id)
            if not isinstance(b, Ref) or b.key in self._fills:
                return False
            c = self.frame.env.get(b.key)
            return b.kind == "dict" or isinstance(c, tuple) and not _counted(c)

        for n in ast.walk(ast.Module(body=s.body, type_ignores=[])):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute) and static(n.func.value):
                    return True
                if any(static(a) for a in n.args) or any(static(k.value) for k in n.keywords):
                    return True
            elif isinstance(n, ast.Subscript) and static(n.value) and \
                    any(isinstance(m, ast.Name) and m.id in targets for m in ast.walk(n.slice)):
                return True
        return False

    def loop_containers(self, s: ast.stmt, outer: dict, body_env: dict, carried: list, assigned: set) -> bool:
        """After lowering a loop body: lists and dicts it changed must be carried (True: lower
        the loop again); one whose length or keys changed is refused."""
        changed = []
        for k, before in outer.items():
            if not k.startswith("$c") or k in carried:
                continue
            after = body_env.get(k, before)
            if after is before:
                continue
            if not same_shape(after, before):
                kind = "dict" if isinstance(before, tuple) and before and isinstance(before[0], S) \
                    and isinstance(before[0].obj, tuple) else "list"
                raise self.error(UnsupportedSyntax, f"a {kind} built before the loop at line {s.lineno} changes "
                                 f"{'its keys' if kind == 'dict' else 'length'} inside it", s,
                                 "zymo keeps lists and dicts built in the function as separate variables; "
                                 "a loop of run-time length (or a while loop) cannot change how many there are",
                                 "append numbers in the for loop's own body (not in a loop nested in it, not in a "
                                 "while loop), which zymo preallocates with the trip count; or preallocate an "
                                 "array with np.empty(n) and assign out[i] = ...; or loop over a constant range")
            changed.append(k)
        if changed:
            assigned.update(changed)
            return True
        return False

    def merge_error(self, name: str, node: ast.AST) -> Exception:
        if not name.startswith("$c"):
            what = "the value" if name.startswith("$") else name
            return self.error(UnsupportedSyntax, f"{what} is a different list or dict on each path of the if at "
                              f"line {getattr(node, 'lineno', '?')}", node,
                              "zymo keeps lists and dicts built in the function as separate variables, so which "
                              "one a name refers to must be known while lowering",
                              "build one list before the if and assign its items on each path "
                              "(a = [0.0, 0.0]; a[0] = ...), or use a tuple")
        return self.error(UnsupportedSyntax, "a list or dict built in the function has a different length or keys "
                          f"on each path of the if at line {getattr(node, 'lineno', '?')}", node,
                          "zymo keeps lists and dicts built in the function as separate variables, so their "
                          "length must be known while lowering",
                          "append on both paths (e.g. out.append(a if cond else b)), or write into a "
                          "preallocated array")

    def fill_candidates(self, s: ast.For) -> list[tuple[Ref, str, bool, list]]:
        """The static lists a for loop appends to, outside loops nested in its body: (ref, name,
        counted, append calls). Not `counted`: one append per iteration, unconditionally, at
        the body's top level (no break/continue/return, the list named nowhere else in the
        body): stored at the iteration's index. `counted`: any other number of such appends
        (conditional ones included), reads of the list in the body allowed: stored at a
        carried count, the list being `buf[:count]`."""
        from .lower import assigned_names, contains

        exits = contains(s.body, (ast.Break, ast.Continue), loops=False) or \
            contains(s.body, (ast.Return,), loops=True)
        sites: dict[str, list] = {}
        nested: set[str] = set()
        stack: list[tuple[ast.AST, bool]] = [(n, False) for n in s.body]
        while stack:
            n, inner = stack.pop()
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append" \
                    and isinstance(n.func.value, ast.Name):
                (nested.add(n.func.value.id) if inner else sites.setdefault(n.func.value.id, []).append(n))
            deeper = inner or isinstance(n, (ast.For, ast.While, ast.FunctionDef, ast.Lambda, ast.ListComp,
                                             ast.GeneratorExp, ast.DictComp, ast.SetComp))
            stack.extend((c, deeper) for c in ast.iter_child_nodes(n))
        out = []
        assigned = assigned_names(s.body)
        for name, calls in sites.items():
            b = self._peek(name)
            if not isinstance(b, Ref) or b.kind != "list" or b.key in self._fills or name in nested \
                    or name in assigned:
                continue
            c = self.frame.env.get(b.key)
            if not isinstance(c, tuple) or _counted(c):
                continue
            uses = sum(1 for n in ast.walk(ast.Module(body=s.body, type_ignores=[]))
                       if isinstance(n, ast.Name) and n.id == name)
            top = not exits and len(calls) == 1 and uses == 1 and any(
                isinstance(st, ast.Expr) and st.value is calls[0] for st in s.body) and \
                len(calls[0].args) == 1 and not calls[0].keywords
            out.append((b, name, not top, calls))
        return out

    def fill_loop(self, s: ast.For, bounds: list[Value] | None, desc: tuple | None) -> bool:
        """Lists appended to in a loop of run-time length (`fill_candidates`): each becomes an array
        allocated before the loop with room for every append (the trip count times the append
        calls, plus the items it had), the appended value stored at the iteration's index or at a
        carried count. Arrays appended once per iteration (of one dtype and ndim) make a list
        (`zymo.list_of`) of references instead, as a list argument is."""
        if desc is not None and not all(isinstance(q, Value) for q in self._seqs(desc)):
            return False
        found = self.fill_candidates(s)
        if not found:
            return False
        loc = self.loc(s)
        parent = self.b.block
        at = len(parent.ops)
        fills = []
        for ref, name, counted, calls in found:
            pre = self.frame.env[ref.key]
            buf = Value(T.Array("float64", 1), name if not name.startswith("$") else "lst")
            if bounds is None:
                start, step = self.b.const(0, loc, "start"), self.b.const(1, loc, "step")
            else:
                start, step = bounds[0], bounds[2]
            fill = _Fill(ref, buf, len(self.b.blocks) + 1, start, step, len(pre), s.lineno, counted=counted,
                         sites=[id(c) for c in calls], keep=calls)
            for x in pre:
                fill.types.append(self._fill_type(x, s))
            self._fills[ref.key] = fill
            if counted:
                start = self.b.const(len(pre), loc, "count")
                self.set_contents(ref, (S(_COUNT), start))  # the buffer itself is never rebound
            else:
                self.set_contents(ref, buf)
            fills.append((fill, pre, calls))
        try:
            if bounds is not None:
                self.lower_range_loop(s, bounds, lambda i: self.assign(s.target, i, s))
            else:
                self.lower_sequence_loop(s, cast(tuple, desc))  # no bounds: a sequence
        finally:
            for fill, _, _ in fills:
                self._fills.pop(fill.ref.key, None)
        blk = self.b.push(Block())
        try:
            if bounds is not None:
                trips = self.b.prim("zymo.trip", list(bounds), {}, loc, "trips")
            else:
                lens = []
                for q in self._seqs(cast(tuple, desc)):
                    lens.append(self.b.prim("zymo.dim", [q, 0], {}, loc, "n") if isinstance(q.type, T.Array)
                                else self.b.prim("builtins.len", [q], {}, loc, "n"))
                trips = lens[0]
                for m in lens[1:]:
                    trips = self.b.prim("builtins.min", [trips, m], {}, loc, "n")
            for fill, pre, calls in fills:
                self._allocate(fill, pre, calls, trips, s)
        finally:
            self.b.pop()
        parent.ops[at:at] = blk.ops
        for fill, _, _ in fills:
            if fill.counted:  # the list is the part of the buffer filled
                c = self.frame.env[fill.ref.key]
                self.set_contents(fill.ref, self.b.getitem(fill.buf, (slice(None, c[1], None),), loc,
                                                           fill.buf.hint))
        return True

    def _allocate(self, fill: _Fill, pre: tuple, calls: list, trips: Value, s: ast.For) -> None:
        """The allocation of one filled list, written before its loop."""
        loc = self.loc(s)
        ref = fill.ref
        types = fill.types[:len(pre)] + [fill.site_types[k] for k in fill.sites if k in fill.site_types]
        arrays = [t for t in types if isinstance(t, T.Array)]
        if arrays and (len(arrays) != len(types) or len(set(arrays)) != 1):
            raise self.error(ZymoTypeError, f"{ref.what()} would hold "
                             + ("numbers and arrays" if len(arrays) != len(types) else
                                " and ".join(sorted({str(t) for t in arrays}))), s,
                             "zymo preallocates a list appended to in a loop of run-time length; its items must "
                             "have one type", "append arrays of one dtype and number of dimensions")
        if arrays and fill.counted:
            raise self.error(UnsupportedSyntax, f"{ref.what()} holds arrays appended conditionally, more than "
                             f"once per iteration, or read in the loop at line {s.lineno}", s,
                             "zymo preallocates a list of arrays appended to in a loop of run-time length "
                             "only when one array is appended per iteration, unconditionally, at the loop "
                             "body's top level",
                             "append exactly once per iteration (out.append(v if cond else w)), or "
                             "preallocate an array out = np.empty((n, m)) and keep a count")
        kinds = {t.kind for t in types if isinstance(t, T.Scalar)}
        dt = "float64" if "f64" in kinds or not kinds or kinds == {"f32", "int"} or kinds == {"f32", "bool"} \
            else "float32" if "f32" in kinds else "int64" if "int" in kinds else "bool"
        n = trips
        if len(calls) > 1:
            n = self.b.prim("mul", [n, self.b.const(len(calls), loc, "k")], {}, loc, "n")
        if pre:
            n = self.b.prim("add", [n, self.b.const(len(pre), loc, "k")], {}, loc, "n")
        if arrays:
            like = self.b.prim("numpy.empty", [tuple(self.b.const(0, loc, "n") for _ in range(arrays[0].ndim))],
                               {"dtype": S(arrays[0].dtype)}, loc, "like")
            alloc = self.b.prim("zymo.list_of", [n, like], {}, loc, "lst")
        else:
            alloc = self.b.prim("numpy.empty", [n], {"dtype": S(dt)}, loc, "lst")
        op = alloc.owner
        op.attrs["fills_list"] = (ref.line, s.lineno, len(calls), len(pre))  # for zymo.cache_report
        op.results[0] = fill.buf
        fill.buf.owner = op
        fill.buf.type = alloc.type
        for j, x in enumerate(pre):
            self.b.setitem(fill.buf, (self.b.const(j, loc, "k"),), self.as_value(x, s), loc)

    def _fill_type(self, x: Any, node: ast.AST) -> T.Type:
        if isinstance(x, Value) and isinstance(x.type, (T.Scalar, T.Array)):
            return x.type
        if isinstance(x, S) and isinstance(x.obj, (int, float, bool)):
            return T.BOOL if isinstance(x.obj, bool) else T.INT if isinstance(x.obj, int) else T.F64
        raise self.error(UnsupportedSyntax, "a list appended to in a loop of run-time length must hold numbers "
                         "or arrays", node, "zymo preallocates such a list with the loop's trip count",
                         "append numbers or arrays (keep tuples and other lists in lists of constant length)")

    def _fill_append(self, fill: _Fill, pos: list, kw: dict, node: ast.Call) -> Any:
        blk = self.b.block
        if len(pos) != 1 or kw:
            raise self.error(UnsupportedCall, "list.append takes one argument", node)
        loc = self.loc(node)
        if id(node) not in fill.sites:
            raise self.error(UnsupportedSyntax, f"{fill.ref.what()} is appended to here, inside the loop at line "
                             f"{fill.line} that fills it, through another name or a nested loop or call", node,
                             "zymo preallocates a list appended to in a loop of run-time length, with room "
                             "for the appends written in the loop's body",
                             "append with the list's own name, in the loop's body (not in a nested loop)")
        v = pos[0]
        fill.site_types[id(node)] = self._fill_type(v, node)  # the body's last lowering is the one kept
        if fill.counted:
            f = self.frame
            while fill.ref.key not in f.env:
                f = cast("Frame", f.parent)  # the frame that made the list encloses this one
            _, count = f.env[fill.ref.key]
            self.b.setitem(fill.buf, (count,), self.as_value(v, node), loc)
            self.set_contents(fill.ref, (S(_COUNT), self.b.prim("add", [count, self.b.const(1, loc, "k")], {}, loc,
                                                                "count")))
            return S(None)
        if len(self.b.blocks) != fill.depth or any(b is blk for b in fill.seen) or not blk.args \
                or blk.args[0].type != T.INT:
            raise self.error(UnsupportedSyntax, f"{fill.ref.what()} is appended to more than once, or "
                             f"conditionally, in the loop at line {fill.line}", node,
                             "zymo preallocates a list appended to in a loop of run-time length, one item "
                             "per iteration",
                             "append exactly once per iteration, at the top level of the loop's body")
        fill.seen.append(blk)
        i = blk.args[0]
        if not (fill.start.is_const and fill.start.const == 0 and fill.step.is_const and fill.step.const == 1):
            i = self.b.prim("floordiv", [self.b.prim("sub", [i, fill.start], {}, loc, "k"), fill.step], {}, loc, "k")
        if fill.k:
            i = self.b.prim("add", [i, self.b.const(fill.k, loc, "k")], {}, loc, "k")
        self.b.setitem(fill.buf, (i,), self.as_value(v, node), loc)
        return S(None)


_COUNT = object()  # marks the contents (S(_COUNT), count) of a list filled at a carried count


def _counted(c: Any) -> bool:
    return isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], S) and c[0].obj is _COUNT


_NOKEY = object()


def _key_of(b: Any) -> Any:
    """The constant a binding stands for (a dict key), or _NOKEY."""
    if isinstance(b, S) and isinstance(b.obj, (str, int, float, bool, type(None), bytes)):
        return b.obj
    if isinstance(b, Value) and b.is_const:
        return b.const
    if isinstance(b, tuple):
        parts = tuple(_key_of(x) for x in b)
        return _NOKEY if any(p is _NOKEY for p in parts) else parts
    return _NOKEY


def _key_binding(low: Any, k: Any, node: ast.AST) -> Any:
    if isinstance(k, tuple):
        return tuple(_key_binding(low, x, node) for x in k)
    if isinstance(k, (int, float, bool)):
        return low.b.const(k, low.loc(node), "key")
    return S(k)


def _has_ref(b: Any) -> bool:
    if isinstance(b, Ref):
        return True
    return isinstance(b, tuple) and any(_has_ref(x) for x in b)


def _all_ints(items: tuple) -> bool:
    return all(isinstance(x, Value) and x.type in (T.INT, T.BOOL) or
               isinstance(x, tuple) and _all_ints(x) for x in items)


def _is_join(fn: Any) -> bool:
    from ..rules.registry import lookup

    key = rule_for_callable(fn)
    return key is not None and bool(getattr(lookup(key), "via", None))


def _nest_shape(items: tuple) -> tuple[tuple | None, list]:
    """Shape and leaves of nested tuples of numbers (None when ragged)."""
    if not all(isinstance(x, tuple) for x in items) or not items:
        if any(isinstance(x, tuple) for x in items):
            return None, []
        return (len(items),), list(items)
    subs = [_nest_shape(x) for x in items]
    if any(s is None for s, _ in subs) or len({s for s, _ in subs}) != 1:
        return None, []
    return (len(items),) + cast(tuple, subs[0][0]), [leaf for _, ls in subs for leaf in ls]


__all__ = ["CMethod", "ContainerLowering", "Ref"]
