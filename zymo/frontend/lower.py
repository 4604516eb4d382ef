"""Lowering a Python function's AST to structured SSA IR.

Contract: `lower(fn, args)` returns an IR `Function` specialised on the types of
`args` (and of the globals and closure cells it reads, which become extra
parameters: `Function.attrs["captured"]`). It
- turns names into SSA values; `if`, `for` and `while` carry what they change;
- lowers `break`, `continue` and early `return` to boolean flags: the statements
  after one that may exit run under `if not flag`; loops that may break or
  return become `while` loops that test the flag; a loop's `else` clause runs
  under `if not (broke or returned)`;
- lowers `raise`, `assert` and `try` as `flow.py` says, `with` as `managers.py` says (after a raise
  the path is dead: `stmts` stops and `lower_if` merges the other branch alone);
- inlines calls to user functions and nested functions (a call is lowered in
  the caller, with the callee's own globals and closure), refusing recursion;
- unrolls iteration over tuples (their length is known); iterates arrays and
  lists with an index;
- raises `ZymoSourceError` subclasses naming the user's file and line for
  everything it does not accept;
- records in `Function.attrs` `python_only` (`[(why, loc)]`: constructs the Numba
  backend cannot compile, whose derivatives the API runs as Python) and `errstate`
  (the function has `with np.errstate(...)` blocks).
Expressions and calls are lowered by `ExprLowering` (expr.py).
"""
from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..analysis.types import type_of_value
from ..errors import Loc, UnsupportedSyntax, ZymoSourceError, ZymoTypeError
from ..ir import types as T
from ..ir.core import Block, Function, Op, Value, walk
from ..rules import indexing
from . import fence, objects, signature
from .bindings import Guarded, LocalFn, Poison, S, flatten, rebuild, same_shape
from .builder import Builder
from .containers import Ref
from .expr import ExprLowering
from .flow import RAISED, FlowLowering
from .managers import WithLowering
from .source import MISSING, FunctionSource

_uid = itertools.count()


@dataclass(eq=False)
class Frame:
    """One function being lowered (the top-level one or an inlined callee)."""

    name: str
    file: str
    src: FunctionSource | None  # where free names resolve (None: see parent)
    parent: Frame | None  # defining frame of a nested function
    env: dict[str, Any] = field(default_factory=dict)
    ret: str = ""
    retval: str = ""
    loops: list[tuple[str, str]] = field(default_factory=list)  # (break flag, continue flag)
    nonlocals: set[str] = field(default_factory=set)  # names declared `nonlocal`

    def __post_init__(self) -> None:
        n = next(_uid)
        self.ret, self.retval = f"$ret{n}", f"$retval{n}"


class Lowerer(FlowLowering, WithLowering, ExprLowering):
    def __init__(self) -> None:
        self.b = Builder()
        self.frame: Frame  # set by `lower_function`
        self.inlining: list[Any] = []
        # id(obj) -> (param, obj, [(resolver, name)]): globals and closure data read by the function
        self.captured: dict[int, tuple[Value, Any, list]] = {}
        self.array_converts: list[tuple[str, str, Loc]] = []  # (from dtype, to dtype, loop line)
        self.params: list[Value] = []
        self.frozen: list[tuple[Callable[[], Any], Any]] = []  # (resolver, value) of constant globals
        self.trying: list = []  # try statements being lowered, innermost last (flow.py)
        self.try_top = False  # lowering a raise at the top level of the innermost try body
        self.errstates: list = []  # np.errstate blocks being lowered: (enter value, key)
        self.uses_errstate = False
        self.python_only: list[tuple[str | None, Loc]] = []  # why a derivative must run as Python, and where
        self.last_broke: Any = None  # the break flag of the loop lowered last (for/else)
        self.unrolling = 0  # depth of unrolled loops being lowered (`merge_exited`)
        self.exited_envs: dict[int, dict] = {}  # id -> env of a path that certainly exited (`exited`)
        self.current: ast.stmt | None = None  # the statement being lowered (`loc` of nodes without a line)

    # -- entry ---------------------------------------------------------------
    def lower_function(self, fn: Any, args: tuple, names: list[str] | None = None) -> Function:
        src = FunctionSource.of(fn)
        node = src.node
        fence.check(node, src.file, src.fn.__name__)
        frame = Frame(src.fn.__name__, src.file, src, None, nonlocals=nonlocal_names(node))
        self.frame = frame
        self.inlining.append(src.fn)
        a = node.args
        params = [p.arg for p in a.posonlyargs + a.args]
        if len(args) > len(params) and a.vararg is None:
            raise ZymoSourceError(f"{frame.name} takes {len(params)} arguments, {len(args)} given", self.loc(node))
        structure = []
        body = self.b.push(Block())
        pos = []
        for i, obj in enumerate(args):  # `*args` parameters are named after the vararg: args_0, args_1
            pname = params[i] if i < len(params) else f"{cast(ast.arg, a.vararg).arg}_{i - len(params)}"
            binding, tree = self._param_binding(obj, pname)
            structure.append(tree)
            pos.append(binding)
        raw = src.fn.__defaults__ or ()
        first = len(params) - len(raw)  # defaults of the parameters not given are captured (data: parameters)
        defaults = [self.capture(d, lambda d=d: d, params[first + k], node) if first + k >= len(args) else None
                    for k, d in enumerate(raw)]
        kw_defaults = {k: self.capture(d, lambda d=d: d, k, node) for k, d in (src.fn.__kwdefaults__ or {}).items()}
        frame.env.update(signature.bind(a, frame.name, pos, {}, defaults, kw_defaults,
                                        lambda msg: ZymoSourceError(msg, self.loc(node)),
                                        lambda d: self.make_dict(d, node)))
        frame.env[frame.ret] = self.b.const(False, self.loc(node), "ret")
        self.lower_body(node)
        if frame.env.get(RAISED) is True:
            # every path raises (at run time, before it returns): any float stands for the result
            frame.env[frame.retval] = self.b.const(0.0, self.loc(node), "never")
        result = self.freeze_result(frame.env.get(frame.retval, S(None)), node)
        rvals = flatten(result)
        self.b.emit(Op("return", rvals, [], self.loc(node)))
        self.b.pop()
        self._check_array_converts(body)
        captured = [(v, obj, where) for v, obj, where in self.captured.values()]
        f = Function(frame.name, self.params + [c[0] for c in captured], body, self.loc(node), src.file)
        f.attrs.update(
            arg_structure=structure,
            n_user_params=len(self.params),
            captured=captured,
            frozen=self.frozen,
            result_template=result,
            python_only=[(why, loc) for why, loc in self.python_only if why] + _python_only_rules(body),
            errstate=self.uses_errstate,
        )
        return f

    def _param_binding(self, obj: Any, name: str) -> tuple[Any, Any]:
        """Binding and flattening tree (param indices) of one argument."""
        rec = objects.bind_argument(self, obj, name)
        if rec is not None:
            return rec
        if isinstance(obj, tuple):
            parts = [self._param_binding(o, f"{name}_{k}") for k, o in enumerate(obj)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        if obj is None or isinstance(obj, str) or callable(obj):
            return S(obj), None
        t = type_of_value(obj, f"argument {name!r}")
        v = Value(t, name)
        self.params.append(v)
        return v, len(self.params) - 1

    # -- helpers -------------------------------------------------------------
    def loc(self, node: ast.AST) -> Loc:
        """Where `node` is; a node without a position of its own (a `with` item, the arguments
        of a def) is at the statement being lowered, so that every error names a line."""
        f = self.frame
        if getattr(node, "lineno", None) is None:
            node = self.current or node
        return Loc(f.file, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), f.name)

    def error(self, cls: type[ZymoSourceError], msg: str, node: ast.AST, why: str = "",
              hint: str = "") -> ZymoSourceError:
        return cls(msg, self.loc(node), why, hint)

    def lookup(self, name: str, node: ast.AST) -> Any:
        f: Frame | None = self.frame
        while f is not None:
            if name in f.env:
                b = f.env[name]
                if isinstance(b, Poison):
                    raise self.error(ZymoSourceError, f"variable {name!r} may be undefined here", node,
                                     b.why, f"assign {name} before the if/loop that sets it")
                if isinstance(b, Guarded):
                    loc = self.loc(node)
                    trips = self.b.prim("zymo.trip", list(b.bounds), {}, loc, "trips")
                    self.b.prim("zymo.check_bound", [trips, S(name)], {}, loc)
                    return b.binding
                return b
            if f.src is not None:
                obj = f.src.resolve(name)
                if obj is not MISSING:
                    src = f.src
                    cell = src.cell(name)
                    if cell is not None and isinstance(obj, (float, np.floating)):
                        return objects.cell_read(self, cell, name, node)
                    return self.capture(obj, lambda src=src: src.resolve(name), name, node)
                break
            f = f.parent
        raise self.error(ZymoSourceError, f"name {name!r} is not defined", node)

    def capture(self, obj: Any, resolver: Callable[..., Any], name: str, node: ast.AST) -> Any:
        """Binding of a global or closure object: data becomes an extra parameter; ints and
        bools are compile-time constants (axes, sizes), re-checked on every call."""
        if isinstance(obj, (int, bool)) and not isinstance(obj, type):
            self.frozen.append((resolver, obj))
            return self.b.const(obj, self.loc(node), name)
        if isinstance(obj, (float, complex, __import__("numpy").ndarray, list)) and not isinstance(obj, type):
            key = id(obj)
            if key not in self.captured:
                t = type_of_value(obj, f"captured variable {name!r}")
                v = Value(t, name)
                self.captured[key] = (v, obj, [])
            entry = self.captured[key]
            entry[2].append((resolver, name))
            return entry[0]
        if isinstance(obj, tuple):
            return tuple(self.capture(o, lambda k=k: resolver()[k], name, node) for k, o in enumerate(obj))
        if objects.record(obj) is not None:
            objects.pin(self, resolver, obj)
        return S(obj)

    # -- statements ----------------------------------------------------------
    def lower_body(self, node: ast.FunctionDef | ast.Lambda) -> None:
        f = self.frame
        if isinstance(node, ast.Lambda):
            f.env[f.retval] = self.expr(node.body)
            f.env[f.ret] = self.b.const(True, self.loc(node), "ret")
            return
        self.stmts(node.body)

    def stmts(self, stmts: list[ast.stmt]) -> None:
        for i, s in enumerate(stmts):
            if self.frame.env.get(RAISED) is True:
                return  # everything after a raise is dead
            self.stmt(s)
            if self.frame.env.get(RAISED) is True:
                return
            if may_exit(s):
                cond = self.exit_flags(s)
                if cond is True:
                    return  # everything after is dead
                if cond is not None:
                    rest = stmts[i + 1:]
                    if rest:
                        self.lower_if(self.not_(cond, s), lambda r=rest: self.stmts(r), self.mark_exited, s)
                    return

    def exit_flags(self, node: ast.AST) -> Any:
        """The condition 'some exit happened' after `node`: a Value, True, or None."""
        f = self.frame
        names = [f.ret]
        if f.loops:
            names += list(f.loops[-1])
        vals = []
        for n in names:
            b = f.env.get(n)
            if isinstance(b, Value):
                if b.is_const:
                    if b.const:
                        return True
                    continue
                vals.append(b)
        if not vals:
            return None
        cond = vals[0]
        for v in vals[1:]:
            cond = self.b.prim("zymo.or", [cond, v], {}, self.loc(node), "exit")
        return cond

    def not_(self, v: Value, node: ast.AST) -> Value:
        return self.b.prim("not", [v], {}, self.loc(node), "go")

    def stmt(self, s: ast.stmt) -> None:
        m = getattr(self, "stmt_" + type(s).__name__, None)
        if m is None:
            raise self.error(UnsupportedSyntax, f"{type(s).__name__} statements are not supported", s,
                             hint="rewrite it with assignments, if, for and while")
        outer, self.current = self.current, s
        try:
            m(s)
        finally:
            self.current = outer

    def stmt_Pass(self, s: ast.Pass) -> None:
        pass

    def stmt_Nonlocal(self, s: ast.Nonlocal) -> None:
        pass  # the frame's `nonlocals` route assignments to the closure cell

    def stmt_Expr(self, s: ast.Expr) -> None:
        if isinstance(s.value, ast.Constant):
            return  # docstring
        self.expr(s.value)

    def stmt_Assign(self, s: ast.Assign) -> None:
        value = self.expr(s.value)
        for t in s.targets:
            self.assign(t, value, s)

    def stmt_AnnAssign(self, s: ast.AnnAssign) -> None:
        if s.value is not None:
            self.assign(s.target, self.expr(s.value), s)

    def stmt_AugAssign(self, s: ast.AugAssign) -> None:
        self.aug_assign(s)

    def stmt_FunctionDef(self, s: ast.FunctionDef) -> None:
        if s.decorator_list:
            raise self.error(UnsupportedSyntax, "decorated nested functions are not supported", s,
                             hint="define the function at module level")
        self.frame.env[s.name] = self.local_fn(s)

    def stmt_Return(self, s: ast.Return) -> None:
        f = self.frame
        f.env[f.retval] = self.expr(s.value) if s.value is not None else S(None)
        self.check_return(f.env[f.retval], s)
        f.env[f.ret] = self.b.const(True, self.loc(s), "ret")

    def stmt_Break(self, s: ast.Break) -> None:
        self.frame.env[self.frame.loops[-1][0]] = self.b.const(True, self.loc(s), "brk")

    def stmt_Continue(self, s: ast.Continue) -> None:
        self.frame.env[self.frame.loops[-1][1]] = self.b.const(True, self.loc(s), "cont")

    def stmt_If(self, s: ast.If) -> None:
        cond = self.truth(self.expr(s.test), s.test)
        self.lower_if(cond, lambda: self.stmts(s.body), lambda: self.stmts(s.orelse), s)

    # -- assignment ----------------------------------------------------------
    def assign(self, target: ast.expr, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if target.id in self.frame.nonlocals:
                self.assign_nonlocal(target.id, value, node)
                return
            if isinstance(value, Value) and value.hint in ("t", "c", "v"):
                value.hint = target.id
            self.frame.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, objects.Obj) and objects.as_tuple(value) is not None:
                value = objects.as_tuple(value)
            if not isinstance(value, tuple):
                raise self.error(UnsupportedSyntax, "only tuples can be unpacked here", node,
                                 hint="index the array explicitly: a, b = x[0], x[1]")
            if len(value) != len(target.elts):
                raise self.error(ZymoSourceError, f"cannot unpack {len(value)} values into {len(target.elts)}", node)
            for t, v in zip(target.elts, value):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            obj = self.expr(target.value)
            if isinstance(obj, Ref):
                self.container_setitem(obj, target, value, node)
                return
            if self.is_record(obj):
                objects.set_field_binding(self, obj, self._dict_key(target.slice), value, node, "item")
                return
            index = self.index(target.slice)
            self.store(obj, index, value, target)
        elif isinstance(target, ast.Attribute):
            objects.set_field_binding(self, self.expr(target.value), target.attr, value, node)
        else:
            raise self.error(UnsupportedSyntax, f"cannot assign to {type(target).__name__}", node)

    def store(self, obj: Any, index: tuple, value: Any, node: ast.AST) -> None:
        if not isinstance(obj, Value) or not T.is_memory(obj.type):
            raise self.error(UnsupportedSyntax, "item assignment needs an array or a list", node,
                             "tuples and scalars are immutable")
        value = self.as_value(value, node)
        if isinstance(obj.type, T.Array) and isinstance(value.type, T.Array):
            pass
        elif isinstance(obj.type, T.Array) and not isinstance(value.type, T.Scalar):
            raise self.error(ZymoTypeError, f"cannot store a {value.type} into an array", node)
        self.b.setitem(obj, index, value, self.loc(node))

    def aug_assign(self, s: ast.AugAssign) -> None:
        if self.container_aug(s):  # lists and dicts built in the function (containers.py)
            return
        key = BINOPS.get(type(s.op))
        if key is None:
            raise self.error(UnsupportedSyntax, f"operator {type(s.op).__name__} is not supported", s)
        rhs = self.expr(s.value)
        t = s.target
        if isinstance(t, ast.Name):
            cur = self.lookup(t.id, t)
            self._no_list_iadd(cur, s)
            if isinstance(cur, Value) and isinstance(cur.type, T.Array):
                self.inplace(cur, key, rhs, s)  # x += y on an array writes x's memory
            elif t.id in self.frame.nonlocals:
                self.assign_nonlocal(t.id, self.binop(key, cur, rhs, s), s)
            else:
                self.frame.env[t.id] = self.binop(key, cur, rhs, s)
        elif isinstance(t, ast.Attribute) or (isinstance(t, ast.Subscript) and self.is_record(self.expr(t.value))):
            cur = self.expr(t)  # obj.x += y: an array updates in place, a float is stored back
            self._no_list_iadd(cur, s)
            if isinstance(cur, Value) and isinstance(cur.type, T.Array):
                self.inplace(cur, key, rhs, s)
            else:
                self.assign(t, self.binop(key, cur, rhs, s), s)
        elif isinstance(t, ast.Subscript):
            obj = self.expr(t.value)
            index = self.index(t.slice)
            if not isinstance(obj, Value):
                raise self.error(UnsupportedSyntax, "augmented item assignment needs an array or list", s)
            cur = self.b.getitem(obj, index, self.loc(s), "ld")
            if any(indexing.is_index_array(ix) for ix in index):
                # x[idx] += v with an advanced index is NumPy's read (a copy), add, write:
                # a repeated index adds once (the last write wins)
                self.store(obj, index, self.binop(key, cur, rhs, s), s)
            elif isinstance(cur.type, T.Array):
                self.inplace(cur, key, rhs, s)  # a view: writes through to obj
            else:
                self.store(obj, index, self.binop(key, cur, rhs, s), s)
        else:
            raise self.error(UnsupportedSyntax, "augmented assignment to this target is not supported", s)

    def _no_list_iadd(self, cur: Any, s: ast.AugAssign) -> None:
        """`a += b` on a list extends it in place (every alias sees it); zymo's lists do not
        grow, and a rebinding `a = a + b` would leave the aliases behind: refused."""
        if (isinstance(cur, Value) and isinstance(cur.type, T.List)) or (isinstance(cur, S) and type(cur.obj) is list):
            raise self.error(UnsupportedSyntax, "augmented assignment to a list (in-place list.extend) is not "
                             "supported", s, hint="build a new list instead: a = a + b, or write into an array")

    def assign_nonlocal(self, name: str, value: Any, node: ast.AST) -> None:
        f = self.frame
        cell = f.src.cell(name) if f.src is not None else None
        if cell is None:
            raise self.error(UnsupportedSyntax, f"nonlocal {name!r} in a function defined inside the "
                             "differentiated function is not supported", node,
                             hint="return the new value from the inner function instead")
        objects.cell_write(self, cell, name, value, node)

    @staticmethod
    def is_record(b: Any) -> bool:
        """A dict or record binding (an argument record, or a captured dict)."""
        return isinstance(b, objects.Obj) or (isinstance(b, S) and type(b.obj) is dict)

    def _dict_key(self, node: ast.expr) -> str:
        b = self.expr(node)
        if isinstance(b, S) and isinstance(b.obj, str):
            return b.obj
        raise self.error(UnsupportedSyntax, "dicts can only be indexed by constant strings here", node,
                         hint="write the key out: d['name']")

    def inplace(self, arr: Value, key: str, rhs: Any, node: ast.AST) -> None:
        np_key = INPLACE.get(key)
        if np_key is None:
            raise self.error(UnsupportedSyntax, f"in-place {key} on arrays is not supported", node)
        self.b.prim(np_key, [arr, rhs], {}, self.loc(node), out=arr)

    # -- control flow --------------------------------------------------------
    def truth(self, b: Any, node: ast.AST) -> Any:
        """A condition as a bool value, or a Python bool when known at compile time."""
        if isinstance(b, S):
            return bool(b.obj)
        if isinstance(b, Value):
            if b.is_const:
                return bool(b.const)
            if b.type == T.BOOL:
                return b
            if isinstance(b.type, T.Scalar):
                return self.b.prim("builtins.bool", [b], {}, self.loc(node), "cond")
            raise self.error(ZymoTypeError, f"the truth value of a {b.type} is ambiguous", node,
                             hint="use np.any(...) or np.all(...)")
        if isinstance(b, tuple):
            return len(b) > 0
        if isinstance(b, Ref):
            return self.container_truth(b, node)
        raise self.error(ZymoTypeError, "cannot use this value as a condition", node)

    def lower_if(self, cond: Any, then: Callable[..., None], orelse: Callable[..., None], node: ast.AST,
                 ) -> None:
        if cond is True or cond is False:
            (then if cond else orelse)()
            return
        f = self.frame
        pre = dict(f.env)
        envs = []
        blocks = []
        for branch in (then, orelse):
            f.env = dict(pre)
            blk = self.b.push(Block())
            branch()
            self.b.pop()
            envs.append(f.env)
            blocks.append(blk)
        f.env = dict(pre)
        was_raised = [e.get(RAISED) is True for e in envs]
        self.merge_exited(envs, blocks, pre, node)
        if self.merge_raised(envs, blocks, pre, node):  # both branches raise
            for blk in blocks:
                blk.ops.append(Op("yield", [], [], self.loc(node)))
            self.b.emit(Op("if", [cond], [], self.loc(node), regions=blocks))
            f.env[RAISED] = True
            return
        names = sorted({n for e in envs for n in e if e.get(n) is not pre.get(n)})
        yields: list[list[Value]] = [[], []]
        templates = {}
        for n in names:
            # merging is not reading: a guarded loop variable passes through unchecked
            a, c = (_unguard(e.get(n)) for e in envs)
            if a is None or c is None or isinstance(a, Poison) or isinstance(c, Poison):
                if n.startswith("$") and (a is not None or c is not None):
                    known = a if a is not None else c
                    k = 1 if a is not None else 0
                    self.b.push(blocks[k])
                    ph = self.placeholder(known, node)
                    self.b.pop()
                    a, c = (known, ph) if k == 1 else (ph, known)
                else:
                    line = getattr(node, "lineno", "?")
                    f.env[n] = Poison(n, f"{n} is assigned in only one branch of the if at line {line}")
                    continue
            merged = self.merge(n, a, c, blocks, yields, node)
            if merged is not None:
                templates[n] = merged
        results = []
        for (ya, yc) in zip(yields[0], yields[1]):
            joined = cast(T.Type, T.join(ya.type, yc.type))  # `merge` refused types that do not join
            results.append(Value(joined, ya.hint if not ya.hint.startswith("$") else "r"))
        for k, blk in enumerate(blocks):
            blk.ops.append(Op("yield", yields[k], [], self.loc(node)))
        self.b.emit(Op("if", [cond], results, self.loc(node), regions=blocks))
        it = iter(results)
        for n, (template, count) in templates.items():
            vals = [next(it) for _ in range(count)]
            f.env[n] = rebuild(template, vals)
        if all(raised or self.exited(e) for raised, e in zip(was_raised, envs)):
            self.exited_envs[id(f.env)] = f.env

    def merge_exited(self, envs: list[dict], blocks: list[Block], pre: dict, node: ast.AST) -> None:
        """A branch that certainly returns, breaks or continues (its flag is the constant True)
        gives a name the other branch binds first (one unbound before the if) a placeholder:
        what runs after the if on its path is skipped (`stmts`), and such a name is not carried
        out of a lowered loop, so the placeholder is never read (`for ...: try: v = f(x)
        except E: continue` reads `v` after the try). Not in an unrolled loop, whose iterations
        share one env (a later read there would be Python's NameError)."""
        if self.unrolling:
            return
        for k in (0, 1):
            dead, live = envs[k], envs[1 - k]
            if dead.get(RAISED) is True or not self.exited(dead):
                continue
            self.b.push(blocks[k])
            try:
                for n, b in live.items():
                    if n not in pre and n not in dead and not n.startswith("$") and isinstance(b, (Value, tuple)):
                        try:
                            dead[n] = self.placeholder(b, node)
                        except ZymoTypeError:
                            pass  # (a list: stays undefined on this path)
            finally:
                self.b.pop()

    def mark_exited(self) -> None:
        """The current path has returned, broken or continued (the other branch of `if not exit`)."""
        self.exited_envs[id(self.frame.env)] = self.frame.env

    def exited(self, env: dict) -> bool:
        """Whether the path of `env` certainly returned, broke or continued (a flag is the
        constant True, or both branches of the if that made `env` exited or raised)."""
        f = self.frame
        flags = [f.ret] + (list(f.loops[-1]) if f.loops else [])
        return any(isinstance(env.get(n), Value) and env[n].is_const and env[n].const is True for n in flags) \
            or self.exited_envs.get(id(env)) is env

    def merge(self, name: str, a: Any, c: Any, blocks, yields, node) -> tuple | None:
        """Record the values of `name` leaving each branch; returns (template, count)."""
        if not same_shape(a, c):
            if name.startswith("$c") or isinstance(a, Ref) or isinstance(c, Ref):
                raise self.merge_error(name, node)
            if isinstance(a, S) or isinstance(c, S) or isinstance(a, LocalFn) or isinstance(c, LocalFn):
                raise self.error(ZymoTypeError, f"{name.lstrip('$')} has a different kind of value in each branch",
                                 node, hint="give it the same type on every path")
            raise self.error(ZymoTypeError, f"{name} has a different structure in each branch", node)
        va, vc = flatten(a), flatten(c)
        for k, (x, y) in enumerate(zip(va, vc)):
            j = T.join(x.type, y.type)
            if j is None:
                raise self.error(ZymoTypeError,
                                 f"{name.lstrip('$')} is a {x.type} on one path and a {y.type} on the other",
                                 node, hint="give it the same type on every path")
            if x.type != j:
                va[k] = self.convert(x, j, blocks[0], node)
            if y.type != j:
                vc[k] = self.convert(y, j, blocks[1], node)
        yields[0].extend(va)
        yields[1].extend(vc)
        return (a, len(va))

    def convert(self, v: Value, t: T.Type, block: Block, node) -> Value:
        self.b.push(block)
        try:
            if isinstance(t, T.Scalar) and t.differentiable:
                return self.b.prim("builtins.float", [v], {}, self.loc(node), v.hint)
            if isinstance(t, T.Array) and isinstance(v.type, T.Array) and t.ndim == v.type.ndim \
                    and t.differentiable and v.type.differentiable:
                # a float32 array carried through a loop that makes it float64: a copy, which
                # `_check_array_converts` makes sure no in-place write can tell apart
                self.array_converts.append((v.type.dtype, t.dtype, self.loc(node)))
                return self.b.prim("zymo.as_dtype", [v, S(np.dtype(t.dtype))], {}, self.loc(node), v.hint)
            raise self.error(ZymoTypeError, f"cannot convert {v.type} to {t}", node)
        finally:
            self.b.pop()

    def placeholder(self, like: Any, node: ast.AST) -> Any:
        """A value of the same type as `like`, never read (for flags not set on a path)."""
        if isinstance(like, tuple):
            return tuple(self.placeholder(x, node) for x in like)
        if not isinstance(like, Value):
            return like
        t = like.type
        loc = self.loc(node)
        if isinstance(t, T.Scalar):
            return self.b.const({"f64": 0.0, "f32": 0.0, "c128": 0j, "c64": 0j, "int": 0, "bool": False}[t.kind], loc,
                                "undef")
        if isinstance(t, T.Array):
            return self.b.prim("numpy.empty", [(0,) * t.ndim], {"dtype": S(t.dtype)}, loc, "undef")
        raise self.error(ZymoTypeError, f"cannot return a {t} from inside a loop or branch here", node)

    # -- loops ---------------------------------------------------------------
    def stmt_While(self, s: ast.While) -> None:
        self.last_broke = None
        self.lower_loop(s, kind="while", test=s.test)
        self.loop_else(s)

    def stmt_For(self, s: ast.For) -> None:
        self.last_broke = None
        self.lower_for(s)
        self.loop_else(s)

    def loop_else(self, s: ast.For | ast.While) -> None:
        """A loop's `else` clause: it runs when the loop ended without `break` (or `return`):
        under `if not (broke or returned)` with the loop's break flag."""
        if not s.orelse:
            return
        f = self.frame
        flags = [b for b in (self.last_broke, f.env.get(f.ret)) if isinstance(b, Value)]
        if any(b.is_const and b.const for b in flags):
            return
        flags = [b for b in flags if not b.is_const]
        if not flags:
            self.stmts(s.orelse)
            return
        cond = flags[0]
        for v in flags[1:]:
            cond = self.b.prim("zymo.or", [cond, v], {}, self.loc(s), "exit")
        self.lower_if(self.not_(cond, s), lambda: self.stmts(s.orelse), lambda: None, s)

    def lower_for(self, s: ast.For) -> None:
        it = s.iter
        if isinstance(it, ast.Call) and self._is_checkpoint_marker(it.func):
            self._lower_marked_loop(s, it)
            return
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name):
            fn = self.lookup(it.func.id, it.func)
            if fn == S(range):
                bounds = [self.as_value(self.expr(a), a) for a in it.args]
                if len(bounds) == 1:
                    bounds = [self.b.const(0, self.loc(s), "start"), bounds[0]]
                if len(bounds) == 2:
                    bounds.append(self.b.const(1, self.loc(s), "step"))
                for v in bounds:
                    if v.type not in (T.INT, T.BOOL):
                        raise self.error(ZymoTypeError, "range() needs integers", it)
                if (self._indexes_tuples(s) or self.touches_containers(s)) and all(v.is_const for v in bounds):
                    # `t[j]` over a tuple needs j known: unroll this small constant loop
                    idx = list(range(*(v.const for v in bounds)))
                    if len(idx) <= 64:
                        self.unroll(s, len(idx), lambda k: self.assign(
                            s.target, self.b.const(idx[k], self.loc(s), "k"), s))
                        return
                if self.fill_loop(s, bounds, None):  # out.append(v) once per iteration (containers.py)
                    return
                self.lower_range_loop(s, bounds, lambda i: self.assign(s.target, i, s))
                return
        desc = self._iter_desc(it)
        if self.fill_loop(s, None, desc):
            return
        self.lower_sequence_loop(s, desc)
        self.iterated_unchanged(desc, s)

    def _iter_desc(self, node: ast.expr) -> tuple:
        """What a for loop iterates: ("enum", d), ("zip", [d, ...]) or ("seq", binding)."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            fn = self.lookup(node.func.id, node.func)
            if fn == S(enumerate) and len(node.args) == 1:
                return ("enum", self._iter_desc(node.args[0]))
            if fn == S(zip):
                return ("zip", [self._iter_desc(a) for a in node.args])
            if fn == S(range):
                raise self.error(UnsupportedSyntax, "range() inside zip/enumerate is not supported", node,
                                 hint="loop over range(...) and index the other sequences")
        b = self.expr(node)
        return ("seq", self.iteration(b, node) if isinstance(b, Ref) else b)

    @staticmethod
    def _seqs(desc: tuple) -> list:
        if desc[0] == "seq":
            return [desc[1]]
        if desc[0] == "enum":
            return Lowerer._seqs(desc[1])
        return [q for d in desc[1] for q in Lowerer._seqs(d)]

    def _element(self, desc: tuple, i: Value, k: int | None, node: ast.AST) -> Any:
        if desc[0] == "enum":
            return (i, self._element(desc[1], i, k, node))
        if desc[0] == "zip":
            return tuple(self._element(d, i, k, node) for d in desc[1])
        q = desc[1]
        if isinstance(q, tuple):
            return q[cast(int, k)]  # a tuple is iterated unrolled, at a constant `k`
        return self.b.getitem(q, (i,), self.loc(node), "item")

    def _indexes_tuples(self, s: ast.For) -> bool:
        """Whether the loop body indexes a tuple with the loop variable."""
        if not isinstance(s.target, ast.Name):
            return False
        var = s.target.id
        for n in ast.walk(ast.Module(body=s.body, type_ignores=[])):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
                if any(isinstance(m, ast.Name) and m.id == var for m in ast.walk(n.slice)):
                    try:
                        if isinstance(self.lookup(n.value.id, n), tuple):
                            return True
                    except ZymoSourceError:
                        continue
        return False

    def lower_sequence_loop(self, s: ast.For, desc: tuple) -> None:
        seqs = self._seqs(desc)
        if all(isinstance(q, tuple) for q in seqs):
            n = min(len(q) for q in seqs)
            self.unroll(s, n, lambda k: self.assign(
                s.target, self._element(desc, self.b.const(k, self.loc(s), "k"), k, s), s))
            return
        lens = []
        for q in seqs:
            if not isinstance(q, Value) or not isinstance(q.type, (T.Array, T.List)) or (
                isinstance(q.type, T.Array) and q.type.ndim == 0
            ):
                raise self.error(UnsupportedSyntax, "can only iterate over range, tuples, lists and arrays "
                                 "(and zip/enumerate of them, not mixing tuples with arrays)", s.iter,
                                 hint="loop over range(len(x)) and index")
            if isinstance(q.type, T.Array):
                lens.append(self.b.prim("zymo.dim", [q, 0], {}, self.loc(s), "n"))
            else:
                lens.append(self.b.prim("builtins.len", [q], {}, self.loc(s), "n"))
        n = lens[0]
        for m in lens[1:]:
            n = self.b.prim("builtins.min", [n, m], {}, self.loc(s), "n")
        zero = self.b.const(0, self.loc(s), "start")
        one = self.b.const(1, self.loc(s), "step")
        self.lower_range_loop(s, [zero, n, one], lambda i: self.assign(s.target, self._element(desc, i, None, s), s))

    def unroll(self, s: ast.For, n: int, bind: Callable[[int], None]) -> None:
        f = self.frame
        brk, cont = f"$brk{next(_uid)}", f"$cont{next(_uid)}"
        f.loops.append((brk, cont))
        f.env[brk] = self.b.const(False, self.loc(s), "brk")

        def one(k: int) -> None:
            if k >= n:
                return
            f.env[cont] = self.b.const(False, self.loc(s), "cont")
            bind(k)
            self.stmts(s.body)
            f.env.pop(cont, None)
            flags = [f.env[x] for x in (brk, f.ret) if isinstance(f.env.get(x), Value)]
            stop = None
            for v in flags:
                if v.is_const:
                    if v.const:
                        return
                    continue
                stop = v if stop is None else self.b.prim("zymo.or", [stop, v], {}, self.loc(s), "stop")
            if stop is None:
                one(k + 1)
            else:
                self.lower_if(self.not_(stop, s), lambda: one(k + 1), lambda: None, s)

        self.unrolling += 1
        try:
            one(0)
        finally:
            self.unrolling -= 1
            f.loops.pop()
            self.last_broke = f.env.pop(brk, None)

    def _is_checkpoint_marker(self, func: ast.expr) -> bool:
        """Whether `func` names `zymo.checkpointed` (as a global or an attribute of a module)."""
        from ..runtime.checkpoint import checkpointed

        if isinstance(func, ast.Name):
            try:
                return self.lookup(func.id, func) == S(checkpointed)
            except ZymoSourceError:
                return False
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr == "checkpointed":
            try:
                base = self.lookup(func.value.id, func.value)
            except ZymoSourceError:
                return False
            return isinstance(base, S) and getattr(base.obj, "checkpointed", None) is checkpointed
        return False

    def _lower_marked_loop(self, s: ast.For, it: ast.Call) -> None:
        """`for t in zymo.checkpointed(range(...), snapshots=k):` lowered as the plain loop, whose op
        gets `attrs["checkpoint"] = k` (`transform/checkpoint.py` checkpoints it)."""
        if len(it.args) != 1 or not (isinstance(it.args[0], ast.Call) and isinstance(it.args[0].func, ast.Name)
                                     and self.lookup(it.args[0].func.id, it.args[0].func) == S(range)):
            raise self.error(UnsupportedSyntax, "zymo.checkpointed() marks a loop over range(...)", it,
                             hint="write: for t in zymo.checkpointed(range(n), snapshots=4):")
        k = 1
        for kw in it.keywords:
            v = self.expr(kw.value) if kw.arg == "snapshots" else None
            if isinstance(v, Value) and v.is_const:
                v = S(v.const)
            if kw.arg != "snapshots" or not (isinstance(v, S) and type(v.obj) is int and v.obj >= 1):
                raise self.error(UnsupportedSyntax, "zymo.checkpointed() takes snapshots= a positive int known "
                                 "when zymo reads the function", kw.value if kw.arg else it)
            k = v.obj
        plain = ast.copy_location(ast.For(target=s.target, iter=it.args[0], body=s.body, orelse=s.orelse,
                                          type_comment=None), s)
        block = self.b.block
        before = len(block.ops)
        self.lower_for(plain)
        loops = [op for op in block.ops[before:] if op.kind in ("for", "while")]
        if not loops:
            raise self.error(UnsupportedSyntax, "zymo cannot checkpoint this loop: it is unrolled", s,
                             hint="zymo unrolls small loops over tuples: remove zymo.checkpointed here")
        loops[-1].attrs["checkpoint"] = k

    def lower_range_loop(self, s: ast.For, bounds: list[Value], bind: Callable[[Value], None]) -> None:
        if contains(s.body, (ast.Break,), loops=False) or contains(s.body, (ast.Return,), loops=True):
            self.range_as_while(s, bounds, bind)
            return
        self.lower_loop(s, kind="for", bounds=bounds, bind=bind, guard_bounds=bounds)

    def range_as_while(self, s: ast.For, bounds: list[Value], bind) -> None:
        """A for loop that may break or return: `while i < stop and not flag`."""
        start, stop, step = bounds
        if not step.is_const or step.const == 0:
            raise self.error(UnsupportedSyntax, "a loop with break/return over a range needs a constant, "
                             "non-zero step", s, hint="use a while loop")
        f = self.frame
        ivar = f"$i{next(_uid)}"
        f.env[ivar] = start
        cmp = "lt" if step.const > 0 else "gt"

        def test(lw) -> Value:
            return self.b.prim(cmp, [f.env[ivar], stop], {}, self.loc(s), "more")

        def body(lw) -> None:
            i = f.env[ivar]
            bind(i)
            self.stmts(s.body)
            f.env[ivar] = self.b.prim("add", [i, step], {}, self.loc(s), "i")

        self.lower_loop(s, kind="while", test_fn=test, body_fn=body, extra=[ivar], guard_bounds=bounds)
        f.env[ivar] = Poison(ivar, "")

    def lower_loop(self, s: ast.For | ast.While, kind: str, test: ast.expr | None = None,
                   bounds: list[Value] | None = None, bind=None, test_fn=None, body_fn=None,
                   extra: Sequence[str] = (), guard_bounds: list[Value] | None = None) -> None:
        f = self.frame
        brk, cont = f"$brk{next(_uid)}", f"$cont{next(_uid)}"
        has_break = contains(s.body, (ast.Break,), loops=False)
        has_return = contains(s.body, (ast.Return,), loops=True)
        if has_break:
            f.env[brk] = self.b.const(False, self.loc(s), "brk")
        assigned = (assigned_names(s.body) | set(extra)) - f.nonlocals  # nonlocals live in their cells
        targets: set[str] = set()
        if isinstance(s, ast.For):
            targets = assigned_names([ast.Assign(targets=[s.target], value=ast.Constant(0))])
            assigned |= targets
        unbound_targets = {t for t in targets if not isinstance(f.env.get(t), Value)}
        if has_return:
            assigned |= {f.ret, f.retval}
        if has_break:
            assigned.add(brk)
        f.loops.append((brk, cont))
        try:
            for _attempt in range(6):
                for n in assigned:
                    if isinstance(f.env.get(n), Guarded):
                        f.env[n] = f.env[n].binding  # carried, not read
                carried = sorted(n for n in assigned if n in f.env and not isinstance(f.env[n], Poison)
                                 and not (isinstance(f.env[n], (S, LocalFn))))
                templates = [f.env[n] for n in carried]
                init = [v for t in templates for v in flatten(t)]
                types = [v.type for v in init]
                missing, result = self._loop_attempt(s, kind, test, bounds, bind, test_fn, body_fn,
                                                     carried, templates, init, types, assigned, brk, cont,
                                                     unbound_targets)
                if missing:
                    for n, like in missing.items():
                        f.env[n] = self.placeholder(like, s)
                    continue
                if result is not None:
                    break
            else:
                raise self.error(ZymoTypeError, "the types of the loop's variables do not settle", s)
        finally:
            f.loops.pop()
        op, out_types = result
        self.b.emit(op)
        it = iter(op.results)
        for n, t in zip(carried, templates):
            f.env[n] = rebuild(t, [next(it) for _ in flatten(t)])
        for n in assigned:
            if n not in carried and not n.startswith("$") and not isinstance(f.env.get(n), (S, LocalFn)):
                f.env[n] = Poison(n, f"{n} is assigned only inside the loop at line {s.lineno}")
        if unbound_targets and guard_bounds is not None:
            for n in unbound_targets:
                if n in carried:
                    f.env[n] = Guarded(f.env[n], guard_bounds)
        self.last_broke = f.env.pop(brk, None)

    def _loop_attempt(self, s, kind, test, bounds, bind, test_fn, body_fn, carried, templates, init,
                      types, assigned, brk, cont, unbound_targets):
        """Lower the loop once with the given carried types; returns (missing, (op, types))."""
        f = self.frame
        outer = dict(f.env)
        loc = self.loc(s)
        while True:
            regions = []
            # condition region of a while loop
            if kind == "while":
                cargs = [Value(t, v.hint) for v, t in zip(init, types)]
                f.env = dict(outer)
                self._bind_carried(carried, templates, cargs)
                cblk = self.b.push(Block(cargs))
                before = dict(f.env)
                c = test_fn(None) if test_fn else self.truth(self.expr(test), test)
                self.cond_containers(before, f.env, s)  # a while's test changes no list or dict
                for flag in (brk, f.ret):
                    fv = f.env.get(flag)
                    if isinstance(fv, Value) and fv.type == T.BOOL:
                        nf = self.not_(fv, s)
                        c = nf if c is True else self.b.prim("zymo.and", [c, nf], {}, loc, "more")
                if c is True or c is False:
                    c = self.b.const(bool(c), loc, "more")
                cblk.ops.append(Op("condition", [c], [], loc))
                self.b.pop()
                regions.append(cblk)
            bargs = [Value(t, v.hint) for v, t in zip(init, types)]
            f.env = dict(outer)
            self._bind_carried(carried, templates, bargs)
            iv = Value(T.INT, "i") if kind == "for" else None
            bblk = self.b.push(Block(([iv] if iv is not None else []) + bargs))
            if iv is not None:
                bind(iv)
            f.env[cont] = self.b.const(False, loc, "cont")
            if body_fn:
                body_fn(None)
            else:
                self.stmts(s.body)
            self.b.pop()
            body_env = f.env
            f.env = outer
            if self.loop_containers(s, outer, body_env, carried, assigned):
                return {}, None  # lists or dicts the body changes: carry them too
            # synthetic names first assigned inside the loop need an initial value
            missing = {n: body_env[n] for n in assigned
                       if (n.startswith("$") or n in unbound_targets)
                       and not isinstance(outer.get(n), Value) and not isinstance(outer.get(n), tuple)
                       and n in body_env and not isinstance(body_env[n], Poison)}
            if missing:
                return missing, None
            out = []
            for n, t in zip(carried, templates):
                b = body_env.get(n)
                if b is None or isinstance(b, Poison) or not same_shape(b, t):
                    raise self.error(ZymoTypeError, f"{n.lstrip('$')} changes kind inside the loop", s,
                                     hint="give it the same type before and inside the loop")
                out.extend(flatten(b))
            new_types = []
            for v, t in zip(out, types):
                j = T.join(v.type, t)
                if j is None:
                    raise self.error(ZymoTypeError, f"{v.hint} is a {t} before the loop and a {v.type} inside",
                                     s, hint="give it the same type before and inside the loop")
                new_types.append(j)
            if new_types != types:
                types = new_types
                continue
            for k, (v, t) in enumerate(zip(out, types)):
                if v.type != t:
                    out[k] = self.convert(v, t, bblk, s)
            bblk.ops.append(Op("yield", out, [], loc))
            regions.append(bblk)
            results = [Value(t, v.hint) for v, t in zip(init, types)]
            init_conv = []
            for v, t in zip(init, types):
                init_conv.append(v if v.type == t else self.convert(v, t, self.b.block, s))
            if kind == "for":
                op = Op("for", list(bounds) + init_conv, results, loc, regions=regions)
            else:
                op = Op("while", init_conv, results, loc, regions=regions)
            return {}, (op, types)

    def _check_array_converts(self, body: Block) -> None:
        """A converted loop carry is a copy: refuse it when the function writes in place into
        an array of the narrower dtype (the original, or a view of it, might be written)."""
        for src, dst, loc in self.array_converts:
            for op in walk(body):
                target = op.args[0] if op.kind == "setitem" else (
                    op.args[op.attrs["out"]] if op.kind == "prim" and "out" in op.attrs else None)
                if target is not None and isinstance(target.type, T.Array) and target.type.dtype == src:
                    raise ZymoTypeError(
                        f"a loop carries a {src} array that becomes {dst}, and {src} memory is written in place",
                        loc, why="zymo converts the carried array with a copy, which an in-place write could "
                        "tell apart from the original", hint=f"make it {dst} before the loop (pass {dst} arguments, or "
                        "np.float_power(x, 1.0), which is float64)")

    def _bind_carried(self, carried, templates, vals) -> None:
        it = iter(vals)
        for n, t in zip(carried, templates):
            self.frame.env[n] = rebuild(t, [next(it) for _ in flatten(t)])


def _unguard(b: Any) -> Any:
    return b.binding if isinstance(b, Guarded) else b


# -- syntactic helpers ----------------------------------------------------------
BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul",
}
INPLACE = {"add": "numpy.add", "sub": "numpy.subtract", "mul": "numpy.multiply",
           "truediv": "numpy.divide", "pow": "numpy.power", "matmul": "numpy.matmul"}


def contains(stmts: list[ast.stmt], kinds: tuple, loops: bool) -> bool:
    """Whether `stmts` contain a node of `kinds` (looking into nested loops if `loops`)."""
    stack: list[ast.AST] = list(stmts)
    while stack:
        n = stack.pop()
        if isinstance(n, kinds):
            return True
        if isinstance(n, (ast.FunctionDef, ast.Lambda)):
            continue
        if isinstance(n, (ast.For, ast.While)) and not loops:
            stack.extend(n.orelse)  # an else clause runs after the loop: its break is the outer loop's
            continue
        stack.extend(ast.iter_child_nodes(n))
    return False


def may_exit(s: ast.stmt) -> bool:
    if isinstance(s, (ast.Break, ast.Continue, ast.Return)):
        return True
    if isinstance(s, (ast.For, ast.While)):
        return contains(s.body + s.orelse, (ast.Return,), loops=True) or contains(
            s.orelse, (ast.Break, ast.Continue), loops=False)
    return contains([s], (ast.Return,), loops=True) or contains([s], (ast.Break, ast.Continue), loops=False)


def assigned_names(stmts: list[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                out.add(n.target.id)
            elif isinstance(n, ast.FunctionDef):
                out.add(n.name)
    return out


def nonlocal_names(node: ast.AST) -> set[str]:
    """Names a function body declares `nonlocal` (not looking into nested functions)."""
    out: set[str] = set()
    body = getattr(node, "body", None)
    stack = list(body) if isinstance(body, list) else []
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Nonlocal):
            out.update(n.names)
        elif not isinstance(n, (ast.FunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(n))
    return out


def lower(fn: Any, args: tuple) -> Function:
    return Lowerer().lower_function(fn, args)


def _python_only_rules(body: Any) -> list[tuple[str, Loc]]:
    """(why, where) of the calls whose rule has no Numba implementation (`Rule.python_only`: np.fft)."""
    from ..rules.registry import lookup

    found = []
    for op in walk(body):
        why = getattr(lookup(op.attrs["key"]), "python_only", None) if op.kind == "prim" else None
        if why:
            found.append((f"{why} ({op.attrs['key']})", op.loc))
    return found
