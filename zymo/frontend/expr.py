"""Lowering expressions and calls (a mixin of `Lowerer`).

Contract: `expr(node)` returns a binding (see bindings.py). Calls resolve, in
order: a registered rule for the callee object (`rules.registry`), the builtins
zymo lowers itself (`len`, `range` in loops, `min`/`max`/`sum`, `print`), array
methods and attributes (`x.sum()`, `x.T`, `x.shape`), then user functions, which
are inlined (Numba dispatchers through `py_func`). Anything else raises
`UnsupportedCall` with the user's line and a hint. A load or slice of an array is named
after the array's variable (`load_hint`: `u[1:-1]` is `u`, which the generated code and
`zymo.cache_report` show).
"""
from __future__ import annotations

import ast
import functools
import types
from typing import Any

import numpy as np

from ..errors import UnsupportedCall, UnsupportedSyntax, ZymoSourceError, ZymoTypeError
from ..ir import types as T
from ..ir.core import Value
from ..rules import indexing
from ..rules.registry import NOT_CONST, REGISTRY, const_value, lookup, rule_for_callable
from . import fence, objects, several, signature
from .bindings import LocalFn, Partial, S
from .containers import CMethod, ContainerLowering, Ref
from .flow import RAISED
from .frame import Frame
from .source import FunctionSource, unwrap
from .syntax import BINOPS, nonlocal_names

CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne",
          ast.Is: "is", ast.IsNot: "is_not"}

# array methods -> (rule key, how the receiver and arguments map)
METHODS = {"sum": "numpy.sum", "mean": "numpy.mean", "max": "numpy.max", "min": "numpy.min", "copy": "numpy.copy",
           "dot": "numpy.dot", "transpose": "numpy.transpose", "reshape": "numpy.reshape", "prod": "numpy.prod",
           "var": "numpy.var", "std": "numpy.std", "cumsum": "numpy.cumsum", "cumprod": "numpy.cumprod",
           "argmax": "numpy.argmax", "argmin": "numpy.argmin", "clip": "numpy.clip", "swapaxes": "numpy.swapaxes",
           "squeeze": "numpy.squeeze", "ravel": "numpy.ravel", "flatten": "numpy.copy_flat",
           "repeat": "numpy.repeat", "diagonal": "numpy.diagonal", "trace": "numpy.trace", "round": "numpy.round",
           "any": "numpy.any", "all": "numpy.all", "argsort": "numpy.argsort", "conj": "numpy.conjugate",
           "conjugate": "numpy.conjugate"}
# methods that sort in place: `x.sort(axis)` is `x[...] = np.sort(x, axis)` (a store of the sorted copy)
INPLACE_METHODS = {"sort": "numpy.sort", "partition": "numpy.partition"}


class ExprLowering(ContainerLowering):
    # -- dispatch ------------------------------------------------------------
    def expr(self, node: ast.expr) -> Any:
        m = getattr(self, "expr_" + type(node).__name__, None)
        if m is None:
            raise self.error(UnsupportedSyntax, f"{type(node).__name__} expressions are not supported", node)
        return m(node)

    def as_value(self, b: Any, node: ast.AST) -> Value:
        if isinstance(b, Value):
            return b
        if isinstance(b, S) and isinstance(b.obj, (int, float, bool)) and not isinstance(b.obj, type):
            return self.b.const(b.obj, self.loc(node))
        raise self.error(ZymoTypeError, "expected a number or an array here", node)

    def expr_Constant(self, node: ast.Constant) -> Any:
        v = node.value
        if isinstance(v, (bool, int, float, complex)):
            return self.b.const(v, self.loc(node))
        return S(v)

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.expr(e) for e in node.elts)

    def expr_Lambda(self, node: ast.Lambda) -> Any:
        return self.local_fn(node)

    def local_fn(self, node: ast.FunctionDef | ast.Lambda) -> LocalFn:
        """A function defined in the function: its defaults are evaluated here, as Python does."""
        a = node.args
        kw_defaults = {p.arg: self.expr(d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
        return LocalFn(node, self.frame, [self.expr(d) for d in a.defaults], kw_defaults)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.truth(self.expr(node.test), node.test)
        f = self.frame
        slot = f"$ifexp{id(node)}"

        def branch(e):
            def run():
                f.env[slot] = self.expr(e)
            return run

        self.lower_if(cond, branch(node.body), branch(node.orelse), node)
        return f.env.pop(slot)

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        # `a and b` is `b if a else a`; `a or b` is `a if a else b` (short-circuit)
        f = self.frame
        result = self.expr(node.values[0])
        for rhs in node.values[1:]:
            cond = self.truth(result, node)
            slot = f"$bool{id(rhs)}"
            left = result

            def keep(left=left, slot=slot):
                f.env[slot] = left

            def other(rhs=rhs, slot=slot):
                f.env[slot] = self.expr(rhs)

            if isinstance(node.op, ast.And):
                self.lower_if(cond, other, keep, node)
            else:
                self.lower_if(cond, keep, other, node)
            result = f.env.pop(slot)
        return result

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        x = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            t = self.truth(x, node)
            if isinstance(t, bool):
                return self.b.const(not t, self.loc(node))
            return self.b.prim("not", [t], {}, self.loc(node))
        key = {ast.USub: "neg", ast.UAdd: "pos"}.get(type(node.op))
        if key is None:
            raise self.error(UnsupportedSyntax, f"operator {type(node.op).__name__} is not supported", node)
        if isinstance(x, S):
            return S(-x.obj if key == "neg" else x.obj)
        if isinstance(x, Value) and x.is_const and not isinstance(x.const, bool):
            return self.b.const(-x.const if key == "neg" else x.const, self.loc(node))
        return self.b.prim(key, [self.as_value(x, node)], {}, self.loc(node))

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        key = BINOPS.get(type(node.op))
        if key is None:
            raise self.error(UnsupportedSyntax, f"operator {type(node.op).__name__} is not supported", node)
        return self.binop(key, self.expr(node.left), self.expr(node.right), node)

    def binop(self, key: str, a: Any, b: Any, node: ast.AST) -> Any:
        if isinstance(a, Ref) or isinstance(b, Ref):
            return self.container_binop(key, a, b, node)
        if isinstance(a, tuple) and isinstance(b, tuple) and key == "add":
            return a + b
        folded = _fold(key, a, b)
        if folded is not None:
            return self.b.const(folded, self.loc(node))
        return self.b.prim(key, [self.as_value(a, node), self.as_value(b, node)], {}, self.loc(node))

    def expr_Compare(self, node: ast.Compare) -> Any:
        left = self.expr(node.left)
        result = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.expr(comp)
            key = CMPOPS.get(type(op))
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (Ref, tuple)):
                found = self.container_in(left, right, node)  # constants: decided while lowering
                r = self.b.const(found == isinstance(op, ast.In), self.loc(node))
                result = r if result is None else self.b.prim("zymo.and", [result, r], {}, self.loc(node))
                left = right
                continue
            if key is None:
                raise self.error(UnsupportedSyntax, f"comparison {type(op).__name__} is not supported", node)
            if key in ("is", "is_not"):
                # identity: decided at compile time (None checks, flags)
                same = _static_is(left, right)
                if same is None:
                    raise self.error(UnsupportedSyntax, "`is` is only supported against None or constants", node)
                r = self.b.const(same if key == "is" else not same, self.loc(node))
            elif key in _CMP_FOLD and all(isinstance(v, Value) and v.is_const for v in (left, right)):
                # two compile-time constants (x.ndim == 1, a global int): decided now, so a check
                # such as `assert x.ndim == 1` leaves no dead branch to lower
                r = self.b.const(bool(_CMP_FOLD[key](left.const, right.const)), self.loc(node))
            elif _fold_cmp(key, left, right) is not None:  # constants (static comprehension conditions)
                r = self.b.const(_fold_cmp(key, left, right), self.loc(node))
            elif key in ("eq", "ne") and isinstance(left, S) and isinstance(right, S):
                # static values (strings held by records, None): decided at compile time
                r = self.b.const(bool((left.obj == right.obj) == (key == "eq")), self.loc(node))
            else:
                r = self.b.prim(key, [self.as_value(left, node), self.as_value(right, node)], {}, self.loc(node))
            result = r if result is None else self.b.prim("zymo.and", [result, r], {}, self.loc(node))
            left = right
        return result

    # -- subscripts and attributes -------------------------------------------
    def index(self, node: ast.expr) -> tuple:
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        out: list[Any] = []
        for e in elts:
            if isinstance(e, ast.Slice):
                parts = [None if p is None else self.as_value(self.expr(p), p) for p in (e.lower, e.upper, e.step)]
                out.append(slice(*parts))
            elif isinstance(e, ast.List):
                out.append(self.index_list(e))
            else:
                b = self.expr(e)
                if isinstance(b, Ref):  # x[lst] with a list built in the function
                    b = self.freeze(b, e)
                    if isinstance(b, tuple):
                        if not b or not all(isinstance(i, Value) and i.type == T.INT for i in b):
                            raise self.error(ZymoTypeError, "a list in an index must hold integers", e,
                                             hint="index with an integer array or a boolean mask")
                        b = self.b.prim("zymo.index_array", [b], {}, self.loc(e), "idx")
                if isinstance(b, S) and (b.obj is None or b.obj is Ellipsis):
                    out.append(b.obj)
                elif isinstance(b, tuple):
                    raise self.error(UnsupportedSyntax, "indexing with a tuple variable is not supported", e,
                                     hint="write the indices out: x[i, j]")
                else:
                    out.append(self.index_part(self.as_value(b, e), e))
        return tuple(out)

    def index_part(self, v: Value, e: ast.expr) -> Value:
        """One index: an int, an int array or a bool mask (advanced indexing, see
        `rules/indexing.py`); a list of ints becomes an int array."""
        if v.type == T.INT or indexing.is_index_array(v):
            return v
        if isinstance(v.type, T.List) and v.type.elt == T.INT:
            return self.b.prim("zymo.index_array", [v], {}, self.loc(e), "idx")
        raise self.error(ZymoTypeError, f"indices must be integers, not {v.type}", e,
                         hint="index with integers, slices, integer arrays or boolean arrays")

    def index_list(self, node: ast.List) -> Value:
        """`x[[0, 2, 2]]`: the ints written in the list, as an int array."""
        items = tuple(self.expr(e) for e in node.elts)
        if not items or not all(isinstance(i, Value) and i.type == T.INT for i in items):
            raise self.error(ZymoTypeError, "a list in an index must hold integers", node,
                             hint="index with an integer array or a boolean mask")
        return self.b.prim("zymo.index_array", [items], {}, self.loc(node), "idx")

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        obj = self.expr(node.value)
        if isinstance(obj, Ref):
            return self.container_getitem(obj, node)
        if isinstance(obj, objects.Obj):
            return objects.get_item(self, obj, self.expr(node.slice), node)
        if isinstance(obj, S) and type(obj.obj) is dict:
            return objects.captured_attr(self, obj.obj, self._dict_key(node.slice), node, item=True)
        if isinstance(obj, tuple):
            return self._tuple_index(obj, node)
        if not isinstance(obj, Value):
            raise self.error(ZymoTypeError, "cannot index this value", node)
        return self.b.getitem(obj, self.index(node.slice), self.loc(node),
                              "ld" if not isinstance(obj.type, T.Array) else load_hint(node.value, obj))

    def _tuple_index(self, tup: tuple, node: ast.Subscript) -> Any:
        s = node.slice
        if isinstance(s, ast.Slice):
            parts = [None if p is None else self._static_int(p) for p in (s.lower, s.upper, s.step)]
            return tup[slice(*parts)]
        k = self._static_int(s)
        try:
            return tup[k]
        except IndexError:
            raise self.error(ZymoSourceError, "tuple index out of range", node) from None

    def _static_int(self, node: ast.expr) -> int:
        b = self.expr(node)
        if isinstance(b, Value) and b.is_const and isinstance(b.const, int):
            return b.const
        if isinstance(b, S) and isinstance(b.obj, int):
            return b.obj
        raise self.error(UnsupportedSyntax, "tuples can only be indexed by constant integers here", node,
                         hint="convert the tuple to an array (np.array) or unroll the loop")

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        obj = self.expr(node.value)
        attr = node.attr
        if isinstance(obj, Ref):
            return CMethod(obj, attr)
        if isinstance(obj, objects.Obj):
            return objects.get_attr(self, obj, attr, node)
        if isinstance(obj, S):
            try:
                return objects.captured_attr(self, obj.obj, attr, node)
            except AttributeError:
                raise self.error(ZymoSourceError, f"{obj.obj!r} has no attribute {attr!r}", node) from None
        if isinstance(obj, Value) and obj.type.differentiable and isinstance(obj.type, (T.Scalar, T.Array)):
            if attr in ("real", "imag"):  # rules/complex_.py
                return self.b.prim("numpy." + attr, [obj], {}, self.loc(node), obj.hint + "_" + attr[:2])
            if attr in ("conj", "conjugate"):
                return _Method(obj, attr)
        if isinstance(obj, Value) and isinstance(obj.type, T.Array):
            loc = self.loc(node)
            if attr == "T":
                return self.b.prim("numpy.transpose", [obj], {}, loc, obj.hint + "T")
            if attr == "shape":
                return tuple(self.b.prim("zymo.dim", [obj, k], {}, loc, "n") for k in range(obj.type.ndim))
            if attr == "ndim":
                return self.b.const(obj.type.ndim, loc)
            if attr == "size":
                return self.b.prim("numpy.size", [obj], {}, loc, "n")
            if attr == "dtype":
                return S(np.dtype(obj.type.dtype))
            if attr in METHODS or attr in INPLACE_METHODS:
                return _Method(obj, attr)
        raise self.error(UnsupportedSyntax, f"attribute {attr!r} of a {getattr(obj, 'type', obj)} is not supported",
                         node, hint="attributes of arrays: T, shape, ndim, size and the methods "
                                    + ", ".join(sorted(METHODS)))

    # -- calls ---------------------------------------------------------------
    def expr_Call(self, node: ast.Call) -> Any:
        callee = self.expr(node.func)
        done = self.generator_call(callee, node)  # sum/any/all of a generator (comprehensions.py)
        if done is not NotImplemented:
            return done
        self.mark_consumed(callee, node)
        joins = isinstance(callee, S) and getattr(_rule_of(callee.obj), "via", None)
        # np.concatenate([a, b]): a list literal of arrays is taken as a tuple
        def err(msg: str) -> Exception:
            return self.error(UnsupportedCall, msg, node, hint="unpack a tuple or a dict with constant keys")

        pos: list = []
        for a in node.args:
            if isinstance(a, ast.Starred):  # f(*t)
                pos.extend(signature.spread_tuple(self.expr(a.value), err))
            else:
                pos.append(tuple(self.expr(e) for e in a.elts) if joins and isinstance(a, ast.List) else self.expr(a))
        kw: dict = {}
        for k in node.keywords:
            items = {k.arg: self.expr(k.value)} if k.arg is not None else signature.spread_dict(
                self.expr(k.value), lambda d: self.captured_items(d, node), err,
                lambda b: self.built_dict(b, node))
            for name, v in items.items():
                if name in kw:
                    raise self.error(ZymoSourceError, f"keyword argument {name!r} repeated", node)
                kw[name] = v
        done = self.container_call(callee, pos, kw, node)  # lists and dicts (container_calls.py)
        if done is not NotImplemented:
            return done
        return self.call(callee, pos, kw, node)

    def captured_items(self, d: dict, node: ast.AST) -> dict:
        """The bindings of the items of a captured dict with string keys (spread by `**d`, or a
        partial's keywords), guarded: its keys, in order, are re-checked at every call, and each
        value is captured as read afresh from the dict (`capture`: a value rebound makes another
        program, an int that steers the lowering included)."""
        keys = tuple(d)

        def same_keys() -> bool:
            return tuple(d) == keys
        self.guard(("keys", id(d), keys), same_keys)
        return {k: self.capture(d[k], lambda d=d, k=k: d[k], k, node, ("item", id(d), k)) for k in keys}

    def call(self, callee: Any, pos: list, kw: dict, node: ast.Call) -> Any:
        loc = self.loc(node)
        if isinstance(callee, _Method):
            return self.method(callee, pos, kw, node)
        if isinstance(callee, LocalFn):
            return self.inline(callee, pos, kw, node)
        if isinstance(callee, S) and isinstance(callee.obj, functools.partial):  # a global partial object
            p = callee.obj
            # (`p.func` and `p.args` cannot be rebound; `p.keywords` is a dict, mutable)
            callee = Partial(S(p.func), tuple(self.capture(a, lambda a=a: a, "partial", node) for a in p.args),
                             self.captured_items(p.keywords, node))
        if isinstance(callee, Partial):
            return self.call(callee.fn, list(callee.pos) + pos, {**callee.kw, **kw}, node)
        if isinstance(callee, S) and callee.obj is functools.partial:  # functools.partial(f, a, k=b)
            if not pos:
                raise self.error(ZymoSourceError, "functools.partial needs a function", node)
            return Partial(pos[0], tuple(pos[1:]), dict(kw))
        if isinstance(callee, objects.Bound):  # a method: `self` is the first argument
            return self.inline(callee.fn, [callee.self_] + pos, kw, node)
        if isinstance(callee, S) and isinstance(callee.obj, types.MethodType) and \
                isinstance(callee.obj.__func__, types.FunctionType):
            return self.inline(callee.obj.__func__, [S(callee.obj.__self__)] + pos, kw, node)
        if not isinstance(callee, S):
            raise self.error(UnsupportedCall, "this value is not callable", node)
        fn = callee.obj
        special = self.builtin(fn, pos, kw, node)
        if special is NotImplemented:
            special = several.lower_several(self, fn, pos, kw, node)  # np.split: a tuple of views
        if special is not NotImplemented:
            return special
        key = rule_for_callable(fn)
        if key is not None:
            rule = lookup(key)
            if not (rule.parts or getattr(rule, "via", None) or rule.nondiff or rule.alloc) and \
                    (rule.jvps() or rule.vjps()):
                pos, kw = rule.binding().canonical(pos, kw)
            if getattr(rule, "unpack_first", None):
                pos = self.unpack_first(rule, pos, node)
            self.positional_out(rule, pos, kw, node)
            self.check_rule(rule, pos, kw, node)
            if getattr(rule, "via", None):
                return self.join(key, pos, kw, node)
            if rule.parts:
                # a function returning a tuple: one op per element, each a rule of its own
                return tuple(self.b.prim(k, list(pos), dict(kw), loc, _hint(k)) for k in rule.parts)
            out = kw.pop("out", None)
            at = getattr(rule, "inplace_arg", None)
            if at is not None:  # np.add.at(a, ...) updates `a`
                out = pos[at] if len(pos) > at else None
                if not (isinstance(out, Value) and isinstance(out.type, T.Array)):
                    raise self.error(ZymoTypeError, f"{key} updates an array in place: pass the array", node)
            nin = 2 if key == "numpy.dot" else getattr(fn, "nin", None)
            if out is None and rule.out and nin is not None and len(pos) == nin + 1:
                out = pos.pop()  # NumPy takes `out` positionally too: np.tanh(x, x), np.dot(a, b, c)
            return self.prim_out(rule, pos, kw, out, node)
        py = unwrap(fn)
        if isinstance(py, types.FunctionType):
            if getattr(py, "__module__", "") and py.__module__.split(".")[0] in ("numpy", "scipy"):
                raise self._no_rule(fn, node)
            return self.inline(py, pos, kw, node)
        raise self._no_rule(fn, node)

    def unpack_first(self, rule: Any, pos: list, node: ast.Call) -> list:
        """`cho_solve((c, lower), b)`: a factor tuple passed first becomes separate arguments."""
        first = pos[0] if pos else None
        if not (isinstance(first, tuple) and len(first) == rule.unpack_first):
            raise self.error(UnsupportedCall, f"{rule.key} takes its factor as a tuple of "
                             f"{rule.unpack_first} as the first argument here", node,
                             hint="pass what the factorization returned, e.g. cho_solve(cho_factor(a), b)")
        return list(first) + list(pos[1:])

    def _no_rule(self, fn: Any, node: ast.AST) -> Exception:
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
        mod = getattr(fn, "__module__", None) or ""
        full = f"{mod}.{name}" if mod and mod != "builtins" else name
        import difflib

        near = difflib.get_close_matches(str(full), list(REGISTRY), n=3)
        hint = "zymo has no derivative rule for it and cannot read its source"
        if near:
            hint += f"; similar rules: {', '.join(near)}"
        return self.error(UnsupportedCall, f"cannot differentiate a call to {full}", node,
                          why=hint,
                          hint="rewrite it with supported NumPy functions, or wait for the NumPy coverage issue")

    def join(self, key: str, pos: list, kw: dict, node: ast.AST) -> Any:
        """`np.concatenate`, `np.stack`, `np.hstack`, `np.vstack` as chains of `zymo.concat2`."""
        loc = self.loc(node)
        name = key.split(".")[-1]
        items = pos[0] if pos else kw.get("arrays", kw.get("tup"))
        if not isinstance(items, tuple) or not items:
            raise self.error(UnsupportedCall, f"np.{name} needs a tuple or list of arrays written in the call",
                             node, hint="write the arrays out: np.concatenate((a, b))")
        extra = set(kw) - {"axis", "arrays", "tup"}
        if extra or len(pos) > 2:
            raise self.error(UnsupportedCall, f"np.{name} with {', '.join(sorted(extra)) or 'extra arguments'} "
                             "is not supported", node)
        if any(map(_number, items)):
            items = self.join_numbers(name, items, kw.get("axis", pos[1] if len(pos) > 1 else None), node)
            if isinstance(items, Value):
                return items
        for it in items:
            if not (isinstance(it, Value) and isinstance(it.type, T.Array) and it.type.ndim >= 1):
                raise self.error(ZymoTypeError, f"np.{name} joins arrays or numbers here", node,
                                 hint="pass a tuple or list of arrays (or of numbers) written in the call")
        axis_b = kw.get("axis", pos[1] if len(pos) > 1 else (0 if name in ("concatenate", "stack") else None))
        axis = const_value(axis_b)
        if axis is NOT_CONST or not (axis is None or isinstance(axis, int)):
            raise self.error(UnsupportedCall, f"np.{name} needs a constant integer axis here", node)
        nd = items[0].type.ndim
        if name == "stack":
            items = tuple(self.b.prim("numpy.expand_dims", [it, axis], {}, loc, it.hint) for it in items)
            axis = axis % (nd + 1)
        elif name == "hstack":
            axis = 0 if nd == 1 else 1
        elif name == "vstack":
            if nd == 1:
                items = tuple(self.b.prim("numpy.expand_dims", [it, 0], {}, loc, it.hint) for it in items)
            axis = 0
        if len(items) == 1:
            return self.b.prim("numpy.copy", [items[0]], {}, loc, name) if axis is not None else \
                self.b.prim("numpy.copy_flat", [items[0]], {}, loc, name)
        acc = items[0]
        for it in items[1:]:
            acc = self.b.prim("zymo.concat2", [acc, it, axis], {}, loc, name)
        return acc

    def join_numbers(self, name: str, items: tuple, axis_b: Any, node: ast.AST) -> Value | tuple:
        """`np.stack`, `np.hstack`, `np.vstack` of numbers (or 0-d arrays) as NumPy reads them: a
        fresh 1-d array (a column for vstack) filled by stores, as `np.array([a, b])` is; or, for
        `np.hstack` of numbers and 1-d arrays, the items with each number as a 1-d array of one.
        What NumPy refuses (np.concatenate of numbers, np.stack of numbers along axis 1, of
        numbers and arrays) is refused here with NumPy's reason."""
        loc = self.loc(node)
        if name == "concatenate":
            raise self.error(ZymoTypeError, "np.concatenate of numbers: NumPy raises ValueError (zero-dimensional "
                             "arrays cannot be concatenated)", node,
                             hint="np.stack((a, b)), np.hstack((a, b)) or np.array([a, b]) makes a 1-d array of "
                                  "numbers")
        if name != "stack" and axis_b is not None:
            raise self.error(UnsupportedCall, f"np.{name} takes no axis", node)
        nums = tuple(self.b.getitem(it, (), loc, it.hint) if isinstance(it.type, T.Array) else it
                     for it in items if _number(it))
        if len(nums) < len(items):
            if name == "hstack" and all(_number(it) or (isinstance(it, Value) and isinstance(it.type, T.Array)
                                                        and it.type.ndim == 1) for it in items):
                return tuple(self.array_from((it,), None, node) if _number(it) else it for it in items)
            raise self.error(ZymoTypeError, f"np.{name} of numbers and arrays is not supported", node,
                             why="NumPy raises ValueError for np.stack of items of different shapes; np.vstack "
                                 "of numbers and arrays, and np.hstack of numbers and arrays of two or more "
                                 "dimensions, are not supported here",
                             hint=f"np.{name} arrays only: np.array([a]) makes a number a 1-d array of one")
        if name == "stack":
            axis = 0 if axis_b is None else const_value(axis_b)
            if axis is NOT_CONST or not isinstance(axis, int) or isinstance(axis, bool):
                raise self.error(UnsupportedCall, "np.stack needs a constant integer axis here", node)
            if axis not in (0, -1):
                raise self.error(ZymoTypeError, f"np.stack of numbers along axis {axis}: NumPy raises AxisError "
                                 f"(axis {axis} is out of bounds for array of dimension 1)", node,
                                 hint="numbers stack along axis 0 (or -1) into a 1-d array")
        return self.array_from(tuple((v,) for v in nums) if name == "vstack" else nums, None, node)

    def check_rule(self, rule: Any, pos: list, kw: dict, node: ast.AST) -> None:
        """Refuse, at the user's line, a call the rule says it cannot differentiate, or one
        passing an argument the rule has no parameter for (`np.sum(x, where=m)`)."""
        why = rule.check(list(pos), dict(kw))
        if why:
            raise self.error(UnsupportedCall, f"cannot differentiate this call to {rule.key}", node, why=why,
                             hint="see docs/rules.md for what each rule covers")
        # the parts of eigh take eigh's arguments: bind them by one that has a derivative
        sig_rule = next((r for r in map(lookup, rule.parts) if r.jvps() or r.vjps()), rule) if rule.parts else rule
        if not (rule.nondiff or rule.alloc or getattr(rule, "via", None)):
            unbound = sig_rule.binding().unbound([const_value(v) for v in pos],
                                                 {k: const_value(v) for k, v in kw.items()})
            if unbound:
                args = ", ".join(f"{u}=" if u in kw else u for u in unbound)
                raise self.error(UnsupportedCall, f"cannot differentiate this call to {rule.key} with {args}", node,
                                 why=f"zymo's rule for {rule.key} takes {', '.join(sig_rule.binding().params)}; "
                                     f"{args} would change the derivative",
                                 hint="compute without that argument (e.g. mask with np.where), or see docs/rules.md")

    def method(self, m: _Method, pos: list, kw: dict, node: ast.Call) -> Any:
        if m.name in INPLACE_METHODS:
            key = INPLACE_METHODS[m.name]
            rule = lookup(key)
            pos, kw = rule.binding().canonical([m.obj] + pos, kw)
            self.check_rule(rule, pos, kw, node)
            loc = self.loc(node)
            done = self.b.prim(key, pos, kw, loc, _hint(key))
            self.b.setitem(m.obj, (Ellipsis,), done, loc)
            return S(None)
        key = METHODS[m.name]
        if m.name in ("reshape", "transpose") and len(pos) > 1:
            pos = [tuple(pos)]
        if m.name == "flatten" and (pos or kw):  # x.flatten(order): C order is what the rule computes
            pos, kw = list(pos), dict(kw)
            order = const_value(pos.pop(0) if pos else kw.pop("order", "C"))
            if order != "C" or pos or kw:
                raise self.error(UnsupportedCall, f"x.flatten with order={order!r} is not supported (C order only)"
                                 if order != "C" else "x.flatten takes one argument, order", node,
                                 hint="x.T.flatten() is x.flatten('F') of a 2-d array")
        rule = lookup(key)
        # the methods zymo lowers take the function's arguments after the array, `out` at the
        # same place: x.clip(lo, hi, r) is np.clip(x, lo, hi, r), A.dot(b, r) np.dot(A, b, r)
        pos = [m.obj] + pos
        self.positional_out(rule, pos, kw, node)
        self.check_rule(rule, pos, kw, node)
        out = kw.pop("out", None)
        return self.prim_out(rule, pos, kw, out, node)

    def positional_out(self, rule: Any, pos: list, kw: dict, node: ast.AST) -> None:
        """Move an `out` array passed by position (`np.clip(x, lo, hi, r)`, `np.outer(a, b, r)`,
        `np.fft.fft(v, None, -1, None, r)`) into `kw["out"]`, by the primal's signature, so that
        it is handled as `out=` is: supported where the rule takes `out`, refused otherwise (never
        dropped). Ufuncs, which have no signature, take it by their number of inputs (`call`)."""
        k = _out_index(rule.fn)
        if k is None or len(pos) <= k:
            return
        if "out" in kw:
            raise self.error(ZymoSourceError, f"{rule.key}: argument out given by position and by keyword", node)
        if len(pos) > k + 1:
            raise self.error(UnsupportedCall, f"{rule.key} with arguments after `out` passed by position is not "
                             "supported", node, hint="pass the arguments after `out` by keyword")
        kw["out"] = pos.pop(k)

    def prim_out(self, rule: Any, pos: list, kw: dict, out: Any, node: ast.AST) -> Any:
        """The call of `rule`, writing into `out` where one is given (never dropped): through the
        rule's own `out` where it has one (ufuncs, np.dot), else as the result stored into it,
        `out[...] = f(...)` (np.clip, np.outer, np.round, np.fft.fft, np.sum: the operands are
        read before `out` is written, as NumPy reads them), the call's value being `out`."""
        key, loc = rule.key, self.loc(node)
        if out is None or (isinstance(out, S) and out.obj is None):
            return self.b.prim(key, pos, kw, loc, _hint(key))
        if not isinstance(out, Value) or not isinstance(out.type, T.Array):
            raise self.error(ZymoTypeError, "out= must be an array", node)
        if rule.out:
            return self.b.prim(key, pos, kw, loc, _hint(key), out=out)
        res = self.b.prim(key, pos, kw, loc, _hint(key))
        if not isinstance(res, Value) or (isinstance(res.type, T.Array) and res.type.ndim > out.type.ndim):
            raise self.error(ZymoTypeError, f"{key}: out= does not fit the result", node,
                             hint="assign the result instead: r[...] = f(...)")
        self.b.setitem(out, (Ellipsis,), res, loc)
        return out

    def builtin(self, fn: Any, pos: list, kw: dict, node: ast.Call) -> Any:
        loc = self.loc(node)
        if fn is len:
            (x,) = pos
            if isinstance(x, tuple):
                return self.b.const(len(x), loc, "n")
            if isinstance(x, Value) and isinstance(x.type, T.Array):
                if x.type.ndim == 0:
                    raise self.error(ZymoTypeError, "len() of a 0-d array", node)
                return self.b.prim("zymo.dim", [x, 0], {}, loc, "n")
            return self.b.prim("builtins.len", [x], {}, loc, "n")
        if fn in (min, max):
            if kw:
                raise self.error(UnsupportedCall, f"{fn.__name__}() with keywords is not supported", node)
            items = pos[0] if len(pos) == 1 else tuple(pos)
            if isinstance(items, Value) and isinstance(items.type, T.Array) and items.type.ndim == 1:
                return self.b.prim("numpy." + fn.__name__, [items], {}, loc)
            if not isinstance(items, tuple) or not items:
                raise self.error(UnsupportedCall, f"{fn.__name__}() needs numbers or a tuple here", node)
            acc = self.as_value(items[0], node)
            for x in items[1:]:
                acc = self.b.prim("builtins." + fn.__name__, [acc, self.as_value(x, node)], {}, loc)
            return acc
        if fn is sum:
            if len(pos) != 1 or kw:  # sum(items, start): a partial's arguments reach here
                return self.sum_start(pos, kw, node)
            (items,) = pos
            if isinstance(items, tuple):
                acc = self.b.const(0, loc) if not items else self.as_value(items[0], node)
                for x in items[1:]:
                    acc = self.b.prim("add", [acc, self.as_value(x, node)], {}, loc)
                return acc
            if isinstance(items, Value) and isinstance(items.type, T.Array):
                return self.b.prim("numpy.sum", [items], {"axis": 0}, loc, "s")
            raise self.error(UnsupportedCall, "sum() of this value is not supported", node)
        if fn is range:
            raise self.error(UnsupportedSyntax, "range() is only supported as the iterable of a for loop", node)
        if fn is float or fn is int or fn is abs or fn is bool:
            (x,) = pos
            if isinstance(x, Value) and isinstance(x.type, T.Array):
                if fn is abs:
                    return self.b.prim("numpy.absolute", [x], {}, loc)
                raise self.error(ZymoTypeError, f"{fn.__name__}() of an array", node)
            x = self.as_value(x, node)
            if fn is float and x.type == T.F64 and not getattr(self, "trying", None):
                # (kept in a try body: a Python float divides by zero with ZeroDivisionError,
                # a NumPy float with inf, and the probe must see what the user's code sees)
                return x
            return self.b.prim("builtins." + fn.__name__, [x], {}, loc)
        if fn in (isinstance, getattr, setattr, hasattr, type, iter, next, open, input, eval, exec):
            raise self.error(UnsupportedCall, f"{fn.__name__}() is not supported in differentiated code", node)
        return NotImplemented

    def inline(self, fn: Any, pos: list, kw: dict, node: ast.Call) -> Any:
        """Lower a call to a user function in place, in a frame of its own."""
        if isinstance(fn, LocalFn):
            fnode, src, parent, defaults = fn.node, None, fn.frame, fn.defaults
            name = getattr(fnode, "name", "<lambda>")
            file, ident = parent.file, fnode
        else:
            src = FunctionSource.of(fn)
            fnode, parent = src.node, None
            defaults = [self.capture(d, lambda fn=fn, k=k: fn.__defaults__[k], "default", node)
                        for k, d in enumerate(fn.__defaults__ or ())]
            name, file, ident = fn.__name__, src.file, fn
        if any(x is ident for x in self.inlining):
            raise self.error(UnsupportedCall, f"recursive call to {name} is not supported", node,
                             "zymo inlines calls, so recursion has no bottom",
                             "rewrite the recursion as a loop")
        fence.check(fnode, file, name)
        if isinstance(fn, LocalFn):
            kw_defaults = fn.kw_defaults
        else:
            kw_defaults = {k: self.capture(d, lambda fn=fn, k=k: fn.__kwdefaults__[k], k, node)
                           for k, d in (fn.__kwdefaults__ or {}).items()}
        bound = signature.bind(fnode.args, name, pos, kw, defaults, kw_defaults,
                               lambda msg: self.error(ZymoSourceError, msg, node), lambda d: self.make_dict(d, node))
        caller = self.frame
        frame = Frame(name, file, src, parent)
        frame.nonlocals = nonlocal_names(fnode)
        frame.env.update(bound)
        frame.env[frame.ret] = self.b.const(False, self.loc(node), "ret")
        self.share_containers(caller, frame)
        self.frame = frame
        self.inlining.append(ident)
        try:
            self.lower_body(fnode)
        finally:
            self.inlining.pop()
            self.frame = caller
        self.return_containers(frame, caller)
        if frame.env.get(RAISED) is True:  # the callee raises on every path: so does the caller
            caller.env[RAISED] = True
        return frame.env.get(frame.retval, S(None))


def load_hint(node: ast.expr, arr: Value) -> str:
    """The name hint of a load or slice of the array `arr` that `node` evaluates to: the array
    variable's own name (`u[1:-1]` is `u`; the generated code makes it `u_1` when `u` is taken)."""
    return node.id if isinstance(node, ast.Name) else arr.hint


def _number(b: Any) -> bool:
    """A number or a 0-d array (what NumPy's joins read as a 0-d array)."""
    return isinstance(b, Value) and (isinstance(b.type, T.Scalar) or (isinstance(b.type, T.Array) and b.type.ndim == 0))


@functools.cache
def _out_index(fn: Any) -> int | None:
    """The position of the parameter `out` of NumPy function `fn` where it may be passed by
    position (`np.clip(a, a_min, a_max, out)`), or None."""
    import inspect

    try:
        ps = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in ps if p.kind in kinds]
    return names.index("out") if "out" in names else None


def _rule_of(fn: Any) -> Any:
    key = rule_for_callable(fn)
    return REGISTRY.get(key) if key is not None else None


class _Method:
    def __init__(self, obj: Value, name: str):
        self.obj, self.name = obj, name


def _hint(key: str) -> str:
    return key.split(".")[-1]


_CMP_FOLD = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
             "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}

_FOLD = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b}


def _fold(key: str, a: Any, b: Any) -> int | None:
    """Integer arithmetic on compile-time constants (range bounds, shapes), or None."""
    if key not in _FOLD:
        return None
    if not (isinstance(a, Value) and isinstance(b, Value) and a.is_const and b.is_const):
        return None
    if type(a.const) is not int or type(b.const) is not int:
        return None
    try:
        return _FOLD[key](a.const, b.const)
    except ZeroDivisionError:
        return None


def _fold_cmp(key: str, a: Any, b: Any) -> bool | None:
    """A comparison of two integer (or string) constants, or None."""
    def const(x):
        if isinstance(x, Value) and x.is_const and type(x.const) in (int, bool):
            return x.const
        if isinstance(x, S) and type(x.obj) in (int, str):
            return x.obj
        return None
    x, y = const(a), const(b)
    if x is None or y is None or key not in _CMP_FOLD or (type(x) is str) != (type(y) is str):
        return None
    return bool(_CMP_FOLD[key](x, y))


def _static_is(a: Any, b: Any) -> bool | None:
    if isinstance(a, S) and isinstance(b, S):
        return a.obj is b.obj
    if isinstance(a, Value) and isinstance(b, S) and b.obj is None:
        return False
    if isinstance(b, Value) and isinstance(a, S) and a.obj is None:
        return False
    return None

