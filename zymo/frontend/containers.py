"""Lists and dicts built inside the differentiated function: what they are while lowering
(a mixin of `Lowerer`).

Contract:
- A list or dict the function builds is a `Ref` binding: an identity whose *contents*
  live in the current frame's env under the name `Ref.key` (`$c<N>`), so that `if`s merge
  them, loops carry them and aliases (`b = a`) see every mutation, exactly as for other
  names. Contents are
  - a *static list*: a Python tuple of bindings (scalar replacement, as for tuples: the
    length is known while lowering; `append`, `extend`, `insert`, `pop`, `+=`, item
    assignment with constant indices rebind the contents);
  - a *runtime list*: an IR array of numbers (or a list of arrays), filled by a loop whose
    trip count is known only at run time (fills.py);
  - a *dict*: a tuple `(S(keys), *values)` with keys that are constants while lowering.
- This module reads and writes the contents (`contents`, `set_contents`), lowers list and
  dict displays, indexing, item assignment, `+`/`*`, truth, `in` and iteration over them,
  and what `if`s and loops must know of them (`touches_containers`, `loop_containers`,
  `cond_containers`, `merge_error`). Inlined calls share the contents with their caller
  (`share_containers`, `return_containers`).
- A Ref passed to a rule or builtin is frozen (`freeze`): a static list becomes a tuple
  (`np.empty([n, m])`, `np.concatenate(lst)`), or an array where NumPy would read one
  (`np.sum([a, b])`), a runtime list its array; user functions receive the Ref itself.
  Calls and methods are container_calls.py's, comprehensions comprehensions.py's.
- A run-time index into a static list, a dict key that is not a constant, a list or dict
  whose length or keys differ between the paths of an `if` or change in a loop of run-time
  length: refused with the user's line and a hint. A list returned by the top-level
  function comes back as a tuple (static) or an array (runtime list); a dict is refused.
"""
from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from .. import pyast
from ..errors import UnsupportedCall, UnsupportedSyntax, ZymoSourceError
from ..ir import types as T
from ..ir.core import Value
from ..rules.registry import rule_for_callable
from .bindings import Poison, S, same_shape
from .host import LoweringHost
from .syntax import BINOPS

if TYPE_CHECKING:
    from .frame import Frame

ids = itertools.count()  # numbers the env names of contents (`$c<N>`) and of other synthetic names
_KEYS: dict[tuple, tuple] = {}  # interned key tuples of dicts: same keys, same object


def intern_keys(keys: tuple) -> tuple:
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
    """A method of a list or dict built in the function (`lst.append`), before it is called."""
    ref: Ref
    name: str


class ContainerLowering(LoweringHost):
    # -- contents --------------------------------------------------------------------
    def new_container(self, kind: str, contents: Any, node: ast.AST) -> Ref:
        ref = Ref(f"$c{next(ids)}", kind, getattr(node, "lineno", 0))
        self.frame.env[ref.key] = contents
        return ref

    def contents(self, ref: Ref, node: ast.AST) -> Any:
        fill = self.fills.get(ref.key)
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
                if is_counted(c):  # being filled at a count: the part filled so far
                    assert fill is not None  # a count stands in the env only while its loop is lowered
                    return self.b.getitem(fill.buf, (slice(None, c[1], None),), self.loc(node), "sl")
                return c
            f = f.parent
        raise self.error(ZymoSourceError, f"{ref.what()} is used outside the loop or branch that built it", node,
                         hint="build the list before the loop or if")

    def make_dict(self, items: dict, node: ast.AST) -> Ref:
        """A dict built here holding `items` (string keys: a call's `**kwargs`)."""
        return self.new_container("dict", (S(intern_keys(tuple(items))),) + tuple(items.values()), node)

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

    def static_items(self, ref: Ref, node: ast.AST, what: str) -> tuple:
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

    # -- displays and constant keys --------------------------------------------------
    def expr_List(self, node: ast.List) -> Any:
        return self.new_container("list", tuple(self.expr(e) for e in node.elts), node)

    def expr_Dict(self, node: ast.Dict) -> Any:
        keys: list[Any] = []
        vals: list[Any] = []
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise self.error(UnsupportedSyntax, "** unpacking in a dict display is not supported", node,
                                 hint="write the items out, or use d.update(other)")
            key = self.const_key(self.expr(k), k)
            if key in keys:
                vals[keys.index(key)] = self.expr(v)
            else:
                keys.append(key)
                vals.append(self.expr(v))
        return self.new_container("dict", (S(intern_keys(tuple(keys))),) + tuple(vals), node)

    def const_key(self, b: Any, node: ast.AST) -> Any:
        k = key_of(b)
        if k is NOKEY:
            raise self.error(UnsupportedSyntax, "a dict built in a differentiated function needs keys that are "
                             "constants while zymo lowers it", node,
                             "zymo scalar-replaces dicts: each key becomes a variable of its own",
                             "use string or integer keys written out (or loop variables of loops over "
                             "constant ranges, tuples and lists); for run-time keys use an array indexed by "
                             "an integer")
        return k

    def const_index(self, b: Any, node: ast.AST, ref: Ref) -> int:
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

    # -- indexing and operators ------------------------------------------------------
    def container_getitem(self, ref: Ref, node: ast.Subscript) -> Any:
        c = self.contents(ref, node)
        if ref.kind == "dict":
            key = self.const_key(self.expr(node.slice), node.slice)
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
            parts = [None if p is None else self.const_index(self.expr(p), p, ref) for p in (s.lower, s.upper, s.step)]
            return self.new_container("list", c[slice(*parts)], node)
        k = self.const_index(self.expr(s), s, ref)
        try:
            return c[k]
        except IndexError:
            raise self.error(ZymoSourceError, f"list index {k} out of range ({ref.what()} has {len(c)} items)",
                             node) from None

    def container_setitem(self, ref: Ref, target: ast.Subscript, value: Any, node: ast.AST) -> None:
        c = self.contents(ref, target)
        if ref.kind == "dict":
            key = self.const_key(self.expr(target.slice), target.slice)
            keys = c[0].obj
            if key in keys:
                j = keys.index(key)
                self.set_contents(ref, c[:1 + j] + (value,) + c[2 + j:])
            else:
                self.set_contents(ref, (S(intern_keys(keys + (key,))),) + c[1:] + (value,))
            return
        if isinstance(c, Value):
            self.store(c, self.index(target.slice), value, target)
            return
        if isinstance(target.slice, ast.Slice):
            raise self.error(UnsupportedSyntax, "assigning to a slice of a list is not supported", target,
                             hint="assign the items one by one, or build a new list")
        k = self.const_index(self.expr(target.slice), target.slice, ref)
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
                self.extend_list(cur, self.expr(s.value), s)
            else:
                n = self.const_index(self.expr(s.value), s.value, cur)
                self.set_contents(cur, self.static_items(cur, s, "repeating") * max(n, 0))
            return True
        if isinstance(t, ast.Subscript):
            obj = self.expr(t.value)
            if not isinstance(obj, Ref):
                return False
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
            return self.new_container("list", self.static_items(a, node, "+") + self.static_items(b, node, "+"),
                                      node)
        if key == "mul" and (isinstance(a, Ref) != isinstance(b, Ref)):
            ref, n = (a, b) if isinstance(a, Ref) else (b, a)
            if ref.kind == "list":
                k = self.const_index(n, node, ref)
                return self.new_container("list", self.static_items(ref, node, "*") * max(k, 0), node)
        raise self.error(UnsupportedSyntax, f"operator {key} on a list or dict built in the function is not "
                         "supported here", node, hint="lists support + (another list) and * (a constant); "
                         "for arithmetic convert with np.array(lst)")

    def container_truth(self, ref: Ref, node: ast.AST) -> Any:
        c = self.contents(ref, node)
        if isinstance(c, Value):
            return self.b.prim("gt", [self.runtime_len(c, node),
                                      self.b.const(0, self.loc(node))], {}, self.loc(node), "cond")
        return len(c) > (1 if ref.kind == "dict" else 0)

    def container_in(self, item: Any, coll: Any, node: ast.AST) -> Any:
        """`key in d`, `x in lst` with constants: decided while lowering."""
        key = key_of(item)
        if isinstance(coll, Ref) and coll.kind == "dict":
            keys = list(self.contents(coll, node)[0].obj)
        else:
            items = self.static_items(coll, node, "`in`") if isinstance(coll, Ref) else coll
            keys = [key_of(x) for x in items]
        if key is NOKEY or any(k is NOKEY for k in keys):
            raise self.error(UnsupportedSyntax, "`in` is only supported with constants here", node,
                             hint="compare the items explicitly")
        return key in keys

    def iteration(self, ref: Ref, node: ast.AST) -> Any:
        """What `for x in ref` iterates: a tuple (unrolled) or an array (a runtime list)."""
        c = self.contents(ref, node)
        if ref.kind == "dict":
            out = tuple(key_binding(self, k, node) for k in c[0].obj)
            self.iterated[id(out)] = (ref, c[0], out)
            return out
        if isinstance(c, tuple):
            self.iterated[id(c)] = (ref, c, c)
        return c

    def iterated_unchanged(self, desc: tuple, node: ast.AST) -> None:
        """After a loop over static lists or dicts: the body changed none of them (Python reads a
        list's items as it goes, where zymo unrolled the loop over the items it had)."""
        seen = self.iterated
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

    # -- freezing --------------------------------------------------------------------
    def freeze(self, b: Any, node: ast.AST, numeric: bool = False) -> Any:
        """A binding with its lists as tuples (or arrays where `numeric` and NumPy reads one)."""
        if isinstance(b, Ref):
            c = self.contents(b, node)
            if b.kind == "dict":
                raise self.error(UnsupportedCall, "a dict built in the function cannot be passed here", node,
                                 hint="pass its values: d['key'], or tuple(d.values())")
            if isinstance(c, Value):  # NumPy reads a list of arrays as their stack
                return self.stack_list(c, node) if numeric and isinstance(c.type, T.List) else c
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

    # -- control flow ----------------------------------------------------------------
    def peek(self, name: str) -> Any:
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
        targets = {n.id for n in pyast.walk(s.target) if isinstance(n, ast.Name)}

        def static(node: ast.AST) -> bool:
            if not isinstance(node, ast.Name):
                return False
            b = self.peek(node.id)
            if not isinstance(b, Ref) or b.key in self.fills:
                return False
            c = self.frame.env.get(b.key)
            return b.kind == "dict" or isinstance(c, tuple) and not is_counted(c)

        for n in pyast.walk(ast.Module(body=s.body, type_ignores=[])):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute) and static(n.func.value):
                    return True
                if any(static(a) for a in n.args) or any(static(k.value) for k in n.keywords):
                    return True
            elif isinstance(n, ast.Subscript) and static(n.value) and \
                    any(isinstance(m, ast.Name) and m.id in targets for m in pyast.walk(n.slice)):
                return True
        return False

    def cond_containers(self, outer: dict, env: dict, node: ast.AST) -> None:
        if any(k.startswith("$c") and env.get(k, v) is not v for k, v in outer.items()):
            raise self.error(UnsupportedSyntax, "a while loop's condition changes a list or dict built in the "
                             "function", node, hint="change it in the loop's body")

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


COUNT = object()  # marks the contents (S(COUNT), count) of a list filled at a carried count


def is_counted(c: Any) -> bool:
    return isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], S) and c[0].obj is COUNT


NOKEY = object()


def key_of(b: Any) -> Any:
    """The constant a binding stands for (a dict key), or NOKEY."""
    if isinstance(b, S) and isinstance(b.obj, (str, int, float, bool, type(None), bytes)):
        return b.obj
    if isinstance(b, Value) and b.is_const:
        return b.const
    if isinstance(b, tuple):
        parts = tuple(key_of(x) for x in b)
        return NOKEY if any(p is NOKEY for p in parts) else parts
    return NOKEY


def key_binding(low: Any, k: Any, node: ast.AST) -> Any:
    if isinstance(k, tuple):
        return tuple(key_binding(low, x, node) for x in k)
    if isinstance(k, (int, float, bool)):
        return low.b.const(k, low.loc(node), "key")
    return S(k)


def _all_ints(items: tuple) -> bool:
    return all(isinstance(x, Value) and x.type in (T.INT, T.BOOL) or
               isinstance(x, tuple) and _all_ints(x) for x in items)


def is_join(fn: Any) -> bool:
    from ..rules.registry import lookup

    key = rule_for_callable(fn)
    return key is not None and bool(getattr(lookup(key), "via", None))
