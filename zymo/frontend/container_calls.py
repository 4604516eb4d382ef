"""Calls that involve lists and dicts built in the function (a mixin of `Lowerer`).

Contract: `container_call(callee, pos, kw, node)` lowers a call the ordinary call path
(expr.py) cannot: a list's or dict's method (`container_method`: `LIST_METHODS`,
`DICT_METHODS`, on static contents), `np.array`/`np.asarray` (of numbers: an `np.empty`
filled by stores, `array_from`; of ints an index array; of arrays `np.stack`), the builtins
`len`, `any`, `all`, `sum`, `min`, `max`, `tuple`, `list`, `dict`, `sorted`, `reversed` and
`functools.reduce` of lists, dicts and tuples, and `np.stack` of a runtime list of arrays
(`stack_list`: a fresh array filled row by row). Otherwise it returns NotImplemented, having
frozen (containers.py) the lists and dicts in `pos` and `kw` for a rule or builtin, or left
them as they are for a user function, which is inlined and receives the `Ref` itself.
"""
from __future__ import annotations

import ast
import functools
import itertools
import types
from typing import Any, cast

import numpy as np

from .. import pyast
from ..errors import UnsupportedCall, UnsupportedSyntax, ZymoSourceError, ZymoTypeError
from ..ir import types as T
from ..ir.core import Value
from ..rules.registry import lookup, rule_for_callable
from .bindings import S
from .containers import NOKEY, CMethod, Ref, ids, intern_keys, is_join, key_binding, key_of
from .host import LoweringHost

LIST_METHODS = ("append", "extend", "insert", "pop", "copy", "reverse", "index", "count")
DICT_METHODS = ("get", "items", "keys", "values", "setdefault", "pop", "update", "copy")
_GO_ON = object()  # a part of `container_call` did not handle the call: the next one looks at it


class ContainerCallLowering(LoweringHost):
    def container_call(self, callee: Any, pos: list, kw: dict, node: ast.Call) -> Any:
        """Calls involving lists and dicts; NotImplemented (with `pos`/`kw` frozen for rules
        and builtins) when the ordinary call path should go on."""
        if isinstance(callee, CMethod):
            return self.container_method(callee, pos, kw, node)
        if type(callee).__name__ == "_Method":  # an array method: x.reshape([2, -1]), x.dot([a, b])
            for k, x in enumerate(pos):
                pos[k] = self.numeric_tuple(self.freeze(x, node, numeric=True), node)
            for k, x in kw.items():
                kw[k] = self.numeric_tuple(self.freeze(x, node, numeric=True), node)
            return NotImplemented
        if not isinstance(callee, S):
            return NotImplemented  # user functions get the Refs themselves
        fn = callee.obj
        for lower in (self._array_call, self._builtin_call, self._join_call):
            done = lower(fn, pos, kw, node)
            if done is not _GO_ON:
                return done
        key = rule_for_callable(fn)
        if key is not None and key.split(".")[0] in ("numpy", "scipy") and not is_join(fn) and \
                not getattr(lookup(key), "unpack_first", None):
            # NumPy reads a tuple of numbers (or of arrays) where it wants an array as the array
            # np.array makes of it, as it reads a list: np.linalg.norm((a, b)), np.mean((x, y), axis=0)
            for k, x in enumerate(pos):
                pos[k] = self.numeric_tuple(x, node)
        has = any(_has_ref(x) for x in itertools.chain(pos, kw.values()))
        if fn is functools.reduce:
            return self._reduce(pos, kw, node)
        if fn in (enumerate, zip) and has:
            raise self.error(UnsupportedSyntax, f"{fn.__name__}() is only supported as the iterable of a for loop "
                             "or comprehension", node)
        if has and rule_for_callable(fn) is None and not isinstance(fn, (type, types.BuiltinFunctionType)):
            return NotImplemented  # a user function: inlined, it receives the list itself
        if key == "numpy.add.at" and len(pos) > 1 and isinstance(pos[1], Ref):
            # np.add.at(a, [i, j], v): NumPy reads a list index as an index array (rows i and j),
            # a tuple as one index per dimension
            idx = self.freeze(pos[1], node)
            if isinstance(idx, tuple):
                if not idx or not _all_int_values(idx):
                    raise self.error(ZymoTypeError, "a list in an index must hold integers", node,
                                     hint="index with an integer array or a boolean mask")
                idx = self.array_from(idx, None, node)
            pos[1] = idx
        if has:
            # NumPy reads a list of numbers as an array (np.sum([a, b])), a list of ints as a shape
            numeric = rule_for_callable(fn) is not None and not is_join(fn) and \
                (rule_for_callable(fn) or "").split(".")[0] in ("numpy", "scipy")
            for k, x in enumerate(pos):
                pos[k] = self.freeze(x, node, numeric=numeric)
            for k, x in kw.items():
                kw[k] = self.freeze(x, node)
        return NotImplemented

    def numeric_tuple(self, b: Any, node: ast.AST) -> Any:
        """A tuple holding floats or float arrays (at any depth) as the array NumPy makes of it
        (`array_from`); other bindings (shapes, axes: tuples of ints) as they are."""
        if isinstance(b, tuple):
            items = self.freeze(b, node)
            if holds_numbers(items, constants=True):
                return self.array_from(items, None, node)
        return b

    def sum_start(self, pos: list, kw: dict, node: ast.Call) -> Any:
        """Builtin `sum(items, start)` and `sum(items, start=s)`: `start + items[0] + items[1] + ...`
        as Python adds them (a tuple or static list), else `start +` the sum of the items (an
        array's rows, a runtime list)."""
        if len(pos) + len(kw) != 2 or len(pos) < 1 or set(kw) - {"start"}:
            raise self.error(ZymoSourceError, "sum() takes an iterable and, optionally, start (by position or "
                             "as start=)", node)
        start = kw["start"] if kw else pos[1]
        items = self.freeze(pos[0], node) if isinstance(pos[0], (Ref, tuple)) else pos[0]
        if isinstance(items, tuple):
            acc = start
            for x in items:
                acc = self.binop("add", acc, x, node)
            return acc
        rest = [pos[0]]
        total = self.container_call(S(sum), rest, {}, node)
        if total is NotImplemented:
            total = self.call(S(sum), rest, {}, node)
        return self.binop("add", start, total, node)

    def _array_call(self, fn: Any, pos: list, kw: dict, node: ast.Call) -> Any:
        """`np.array`/`np.asarray` of an array, of a list built in the function, of nested tuples."""
        if fn not in (np.array, np.asarray):
            return _GO_ON
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
                return self.stack_list(items, node)
            return self.b.prim("numpy.copy", [items], {}, self.loc(node), "arr")
        if isinstance(items, tuple):
            return self.array_from(items, dtype, node)
        return NotImplemented

    def _builtin_call(self, fn: Any, pos: list, kw: dict, node: ast.Call) -> Any:
        """`len`, `any`/`all`, `sum`/`min`/`max`, `tuple`/`list`, `dict`, `sorted`/`reversed` of lists,
        dicts and tuples."""
        if fn is len and len(pos) == 1 and isinstance(pos[0], Ref):
            c = self.contents(pos[0], node)
            if isinstance(c, Value):
                return self.runtime_len(c, node)
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
                return self.b.prim("numpy.sum", [self.stack_list(c, node)], {"axis": 0}, self.loc(node), "s")
            if isinstance(c, Value):
                pos[0] = c  # an array: np.sum/np.min/np.max
                return NotImplemented
        if fn is sum and (len(pos) == 2 or "start" in kw):
            return self.sum_start(pos, kw, node)
        if fn in (tuple, list) and len(pos) <= 1 and not kw:
            if not pos:
                items: Any = ()
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
            return self.new_container("dict", (S(intern_keys(keys)),) + tuple(kw.values()), node)
        if fn is sorted or fn is reversed:
            if len(pos) == 1 and not kw and isinstance(pos[0], (Ref, tuple)):
                items = self.freeze(pos[0], node) if not (isinstance(pos[0], Ref) and pos[0].kind == "dict") \
                    else self.iteration(pos[0], node)
                if fn is reversed and isinstance(items, tuple):
                    return items[::-1]
                if fn is sorted and isinstance(items, tuple) and all(key_of(x) is not NOKEY for x in items):
                    return self.new_container("list", tuple(sorted(items, key=key_of)), node)
            raise self.error(UnsupportedCall, f"{fn.__name__}() is only supported on constants and static lists "
                             "here", node, hint="sort with np.sort on an array")
        return _GO_ON

    def _join_call(self, fn: Any, pos: list, kw: dict, node: ast.Call) -> Any:
        """`np.stack` and its kin (rules with `via`) of a list filled by a loop of run-time length."""
        if is_join(fn) and pos and isinstance(pos[0], Ref) and pos[0].kind == "list":
            c = self.contents(pos[0], node)
            if isinstance(c, Value) and isinstance(c.type, T.List):
                axis = kw.get("axis", pos[1] if len(pos) > 1 else None)
                if fn is np.stack and (axis is None or key_of(axis) == 0) and len(pos) <= 2 \
                        and set(kw) <= {"axis"}:
                    return self.stack_list(c, node)
                raise self.error(UnsupportedCall, f"np.{fn.__name__} of a list of arrays filled by a loop of "
                                 "run-time length is not supported", node,
                                 hint="np.stack(lst) (axis 0) is; reshape or transpose its result")
            if isinstance(c, Value) and fn is np.stack and not kw and len(pos) == 1:
                return self.b.prim("numpy.copy", [c], {}, self.loc(node), "arr")
        return _GO_ON

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
        """A call of a list's or dict's method (`LIST_METHODS`, `DICT_METHODS`)."""
        if m.ref.kind == "list":
            return self._list_method(m.ref, m.name, pos, kw, node)
        return self._dict_method(m.ref, m.name, pos, kw, node)

    def _list_method(self, ref: Ref, name: str, pos: list, kw: dict, node: ast.Call) -> Any:
        loc = self.loc(node)
        fill = self.fills.get(ref.key)
        if fill is not None and name == "append":
            return self.fill_append(fill, pos, kw, node)
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
            self.extend_list(ref, pos[0], node)
            return S(None)
        if name == "insert" and len(pos) == 2 and not kw:
            k = self.const_index(pos[0], node, ref)
            lst = list(c)
            lst.insert(k, pos[1])
            self.set_contents(ref, tuple(lst))
            return S(None)
        if name == "pop" and len(pos) <= 1 and not kw:
            k = self.const_index(pos[0], node, ref) if pos else -1
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
            key = key_of(pos[0])
            keys = [key_of(x) for x in c]
            if key is not NOKEY and all(k is not NOKEY for k in keys):
                if name == "count":
                    return self.b.const(keys.count(key), loc)
                if key in keys:
                    return self.b.const(keys.index(key), loc)
                raise self.error(ZymoSourceError, f"{key!r} is not in the list", node)
            raise self.error(UnsupportedCall, f"list.{name} is only supported with constants", node)
        raise self.error(UnsupportedCall, f"list.{name} with these arguments is not supported", node,
                         hint="supported: " + ", ".join(LIST_METHODS))

    def _dict_method(self, ref: Ref, name: str, pos: list, kw: dict, node: ast.Call) -> Any:
        c = self.contents(ref, node)
        keys, vals = c[0].obj, c[1:]
        if name in ("keys", "values", "items") and not pos and not kw:
            kb = tuple(key_binding(self, k, node) for k in keys)
            return {"keys": kb, "values": tuple(vals), "items": tuple(zip(kb, vals))}[name]
        if name in ("get", "setdefault", "pop") and 1 <= len(pos) <= 2 and not kw:
            key = self.const_key(pos[0], node)
            default = pos[1] if len(pos) > 1 else S(None)
            if key in keys:
                j = keys.index(key)
                if name == "pop":
                    self.set_contents(ref, (S(intern_keys(keys[:j] + keys[j + 1:])),) + vals[:j] + vals[j + 1:])
                return vals[j]
            if name == "pop" and len(pos) == 1:
                raise self.error(ZymoSourceError, f"key {key!r} is not in {ref.what()}", node)
            if name == "setdefault":
                self.set_contents(ref, (S(intern_keys(keys + (key,))),) + vals + (default,))
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
                    self.set_contents(ref, (S(intern_keys(keys + (k,))),) + vals + (v,))
            return S(None)
        if name == "copy" and not pos and not kw:
            return self.new_container("dict", c, node)
        raise self.error(UnsupportedCall, f"dict.{name} with these arguments is not supported", node,
                         hint="supported: " + ", ".join(DICT_METHODS))

    def extend_list(self, ref: Ref, other: Any, node: ast.AST) -> None:
        c = self.static_items(ref, node, "extending")  # `ref` is a list (the callers check)
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
        if self.fills.get(ref.key) is not None:
            self.contents(ref, node)  # refuses
        self.set_contents(ref, c + tuple(items))

    def runtime_len(self, c: Value, node: ast.AST) -> Value:
        if isinstance(c.type, T.List):
            return self.b.prim("builtins.len", [c], {}, self.loc(node), "n")
        return self.b.prim("zymo.dim", [c, 0], {}, self.loc(node), "n")

    def stack_list(self, lst: Value, node: ast.AST) -> Value:
        """`np.stack(lst)` of a runtime list of arrays: a fresh array filled row by row in a loop
        (the adjoint of each row store adds into the shadow of that item)."""
        elt = cast(T.Array, cast(T.List, lst.type).elt)
        if elt.dtype not in ("float64", "float32") and elt.dtype != "int64":
            raise self.error(UnsupportedCall, "np.stack of this list is not supported", node)
        n = next(ids)
        names = {"lst": f"_zymo_lst{n}", "np": f"_zymo_np{n}", "res": f"_zymo_res{n}", "k": f"_zymo_k{n}"}
        code = ("{res} = {np}.empty((len({lst}),) + {lst}[0].shape, dtype={lst}[0].dtype)\n"
                "for {k} in range(len({lst})):\n"
                "    {res}[{k}] = {lst}[{k}]\n").format(**names)
        stmts = ast.parse(code).body
        for st in stmts:
            for sub in pyast.walk(st):
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
            if kinds & {"c128", "c64"}:  # NumPy's promotion: complex64 only with float32 (and bool)
                dt = "complex64" if not kinds & {"c128", "f64", "int"} else "complex128"
        if dt == "int64" and len(shape) == 1 and all(v.type == T.INT for v in vals) and vals:
            return self.b.prim("zymo.index_array", [tuple(vals)], {}, loc, "idx")
        arr = self.b.prim("numpy.empty", [tuple(self.b.const(d, loc, "n") for d in shape)], {"dtype": S(dt)}, loc,
                          "arr")
        for flat, v in enumerate(vals):
            idx = np.unravel_index(flat, shape) if shape else ()
            self.b.setitem(arr, tuple(self.b.const(int(i), loc, "k") for i in idx), v, loc)
        return arr


def _has_ref(b: Any) -> bool:
    if isinstance(b, Ref):
        return True
    return isinstance(b, tuple) and any(_has_ref(x) for x in b)


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


def holds_numbers(b: Any, constants: bool = False) -> bool:
    """Whether a (frozen) tuple binding holds, at any depth, a value of a differentiable type (a
    float or complex number or array: what NumPy reads as an array's elements, where shapes and
    axes are ints), constants counted where `constants`."""
    if isinstance(b, tuple):
        return any(holds_numbers(x, constants) for x in b)
    return isinstance(b, Value) and (constants or not b.is_const) and b.type.differentiable and \
        isinstance(b.type, (T.Scalar, T.Array))


def _all_int_values(items: tuple) -> bool:
    return all(_all_int_values(x) if isinstance(x, tuple) else isinstance(x, Value) and x.type == T.INT
               for x in items)
