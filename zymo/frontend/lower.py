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
The statements are lowered here; the rest by the mixins `Lowerer` is made of: assignments
(assign.py), conditions and `if` (branches.py), loops (loops.py), expressions and calls
(expr.py), lists, dicts and comprehensions built in the function (containers.py,
container_calls.py, comprehensions.py, fills.py), `raise`/`assert`/`try` (flow.py) and
`with` (managers.py); `host.py` declares what they use of each other.
"""
from __future__ import annotations

import ast
import types
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from ..analysis.types import type_of_value
from ..errors import Loc, UnsupportedSyntax, ZymoSourceError
from ..ir.core import Block, Function, Op, Value, walk
from . import fence, objects, signature
from .assign import AssignLowering
from .bindings import Guarded, Poison, S, flatten
from .branches import BranchLowering
from .builder import Builder
from .comprehensions import ComprehensionLowering
from .container_calls import ContainerCallLowering
from .expr import ExprLowering
from .fills import FillLowering
from .flow import RAISED, FlowLowering
from .frame import Frame
from .loops import LoopLowering
from .managers import WithLowering
from .source import MISSING, FunctionSource
from .syntax import may_exit, nonlocal_names


class Lowerer(FlowLowering, WithLowering, LoopLowering, BranchLowering, AssignLowering, ExprLowering,
              ComprehensionLowering, ContainerCallLowering, FillLowering):
    """Lowers one function (`lower_function`): its parameters, statements and result."""

    def __init__(self) -> None:
        self.b = Builder()
        self.frame: Frame  # set by `lower_function`
        self.inlining: list[Any] = []
        # id(obj) -> (param, obj, [(resolver, name)]): globals and closure data read by the function
        self.captured: dict[int, tuple[Value, Any, list]] = {}
        self.array_converts: list[tuple[str, str, Loc]] = []  # (from dtype, to dtype, loop line)
        self.params: list[Value] = []
        self.frozen: list[tuple[Callable[[], Any], Any]] = []  # (resolver, value) of constant globals
        self.guarded: dict[Any, Any] = {}  # the keys of the captures (and `guard`s) re-checked already
        self.trying: list = []  # try statements being lowered, innermost last (flow.py)
        self.try_top = False  # lowering a raise at the top level of the innermost try body
        self.errstates: list = []  # np.errstate blocks being lowered: (enter value, key)
        self.uses_errstate = False
        self.python_only: list[tuple[str | None, Loc]] = []  # why a derivative must run as Python, and where
        self.last_broke: Any = None  # the break flag of the loop lowered last (for/else)
        self.unrolling = 0  # depth of unrolled loops being lowered (`merge_exited`)
        self.exited_envs: dict[int, dict] = {}  # id -> env of a path that certainly exited (`exited`)
        self.current: ast.stmt | None = None  # the statement being lowered (`loc` of nodes without a line)
        self.fills: dict[str, Any] = {}  # Ref.key -> the `Fill` of a list being filled by a loop (fills.py)
        # id(items) -> (ref, contents, items) of the static lists and dicts loops iterate (containers.py)
        self.iterated: dict[int, tuple] = {}

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
        # read again at each call (`Lowered.still_valid`): `f.__defaults__` may be rebound
        defaults = [self.capture(d, lambda f=src.fn, k=k: f.__defaults__[k], params[first + k], node)
                    if first + k >= len(args) else None for k, d in enumerate(raw)]
        kw_defaults = {k: self.capture(d, lambda f=src.fn, k=k: f.__kwdefaults__[k], k, node)
                       for k, d in (src.fn.__kwdefaults__ or {}).items()}
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
        self.check_array_converts(body)
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
                    return self.capture(obj, src.resolver(name), name, node, ("name", src.fn, name))
                break
            f = f.parent
        raise self.error(ZymoSourceError, f"name {name!r} is not defined", node)

    def capture(self, obj: Any, resolver: Callable[..., Any], name: str, node: ast.AST,
                key: Any = None) -> Any:
        """Binding of a global or closure object, guarded: every capture adds a check that
        `Lowered.still_valid` re-runs at every call (`resolver` reads the object afresh), so a
        program is reused only while what it read is still what it read:
        - data (arrays, floats, lists) becomes an extra parameter, re-checked by identity (an
          array by its rank and dtype too: `A.shape = (3, 1)` in place);
        - ints and bools are compile-time constants (axes, sizes), re-checked by type and value;
        - a tuple is captured item by item, and re-checked by type and length (a global tuple
          rebound to a longer one: `T = T + (3.0,)`);
        - records, modules, functions, strings and other objects are constants of the program,
          re-checked by identity (a global rebound to another helper, module or record makes
          another program; a bound method by its parts, being a new object at each lookup; a
          function by its code as well).
        `key` (hashable) names the path the object was read by (a name of a function, an
        attribute of an object): a path read again adds no second check, so the checks at each
        call are one per distinct capture, not one per reference."""
        if key is not None:
            key = (key, id(obj))
            first = key not in self.guarded
            self.guarded[key] = obj  # (held: its id stays its own while lowering)
        else:
            first = True
        if isinstance(obj, (int, bool, np.integer, np.bool_)) and not isinstance(obj, type):
            if first:
                self.frozen.append((resolver, obj))  # (a NumPy int is re-checked as one: type and value)
            value = bool(obj) if isinstance(obj, (bool, np.bool_)) else int(obj)
            return self.b.const(value, self.loc(node), name)
        if isinstance(obj, (float, complex, np.floating, np.complexfloating, np.ndarray, list)) \
                and not isinstance(obj, type):
            entry = self.captured.get(id(obj))
            if entry is None:
                t = type_of_value(obj, f"captured variable {name!r}")
                entry = self.captured[id(obj)] = (Value(t, name), obj, [])
            if first:
                entry[2].append((_typed(resolver, obj) if isinstance(obj, np.ndarray) else resolver, name))
            return entry[0]
        if isinstance(obj, tuple):
            if first:
                kind, n = type(obj), len(obj)

                def same_len() -> bool:
                    now = resolver()
                    return type(now) is kind and len(now) == n
                self.frozen.append((same_len, True))
            return tuple(self.capture(o, lambda k=k: resolver()[k], name, node, None if key is None else (key, k))
                         for k, o in enumerate(obj))
        if first:
            if type(obj) is types.MethodType:
                def same(obj: Any = obj, resolver: Callable[..., Any] = resolver) -> bool:
                    now = resolver()  # (a bound method is a new object at each lookup: its parts)
                    return now is obj or (type(now) is types.MethodType and now.__self__ is obj.__self__
                                          and now.__func__ is obj.__func__)
                self.frozen.append((same, True))
            elif type(obj) is types.FunctionType:  # (and its code: `f.__code__ = g.__code__`)
                code = obj.__code__

                def same_fn() -> bool:
                    return resolver() is obj and obj.__code__ is code
                self.frozen.append((same_fn, True))
            else:  # (records: helper 71, `objects.pin`)
                objects.pin(self, resolver, obj)
        return S(obj)

    def guard(self, key: Any, check: Callable[[], bool]) -> None:
        """Re-run `check` at every call (`Lowered.still_valid`); once per hashable `key`."""
        if key not in self.guarded:
            self.guarded[key] = check
            self.frozen.append((check, True))

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


def _typed(resolver: Callable[[], Any], obj: np.ndarray) -> Callable[[], Any]:
    """`resolver` for the identity check of a captured array, which fails (None) once the array's
    IR type changed in place (`A.shape = (3, 1)`, `A.dtype = ...`: the program was written for the
    old rank and dtype)."""
    nd, dt = obj.ndim, obj.dtype

    def read() -> Any:
        now = resolver()
        return now if now.ndim == nd and (now.dtype is dt or now.dtype == dt) else None
    return read


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
