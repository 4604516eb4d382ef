"""Lowering `raise`, `assert` and `try/except/else/finally` statements.

Contract (a mixin of `Lowerer`, which provides `b`, `frame`, `expr`, `stmts`, `lower_if`):
- `raise E(c, ...)` (a class, constant arguments) lowers to a primitive whose statement is
  `raise E(c, ...)` (`checks.raise_key`): it runs in the primal, in forward mode and in the
  forward sweep of reverse mode, and has no derivative. After it the path is dead: the frame's
  env holds `RAISED`, `stmts` stops, and `lower_if` merges a branch that raised as if it had
  only the other branch's values (`merge_raised`). `assert c, msg` is `if not c: raise
  AssertionError(msg)` (not evaluated under `python -O`, as Python does).
- `try` is lowered as branches, so reverse mode replays the path taken like any `if`: the
  body's statements are lowered in turn; an op that may raise an exception a handler catches
  is preceded by a probe (`checks.probe_key`: the same call in Python's `try`, giving the
  handler's number or 0), and the rest of the body, then `else`, runs under `if code == 0`,
  the handlers (dispatched on the code) under the other branch, each in the env of the point
  where the exception happened. A `raise` the try catches, at the body's top level or in its
  `if`s, takes its handler directly. `finally` runs after the whole statement (on the paths
  that do not raise out of it). A read `x[i]` is probed as `obj[index]`. Refused, with the
  line and a hint: a catching handler around an item assignment, a read with a slice, a call
  inside a loop, a call writing into an array or with effects (random, `inactive`), a bare
  `raise`, `except ... as e` that reads `e`, `return`/`break`/`continue` in `finally`.
`with` statements are `managers.py`'s (`contextlib.suppress` lowers through `lower_try`).
"""
from __future__ import annotations

import ast
import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import pyast
from ..errors import UnsupportedSyntax
from ..ir import types as T
from ..ir.core import Block, Op, Value
from ..rules.registry import REGISTRY
from . import checks
from .bindings import S
from .host import LoweringHost
from .syntax import may_exit

RAISED = "$raised"  # env key: the current path has raised (everything after is dead)



@dataclass
class TryCtx:
    """A try statement being lowered: its handlers' classes and bodies."""

    node: ast.AST
    handlers: list[tuple[tuple[type, ...], list[ast.stmt]]]

    def match(self, cls: type) -> int | None:
        """The index of the handler that catches an exception of class `cls`."""
        for k, (classes, _) in enumerate(self.handlers):
            if issubclass(cls, classes):
                return k
        return None

    def may_catch(self, raisable: tuple[type, ...], library: bool = False) -> bool:
        """Whether some handler may catch an exception of a class in `raisable` (or a subclass);
        `library`: raised by NumPy's or math's code, which raises no `AssertionError`."""
        return any(issubclass(r, h) or issubclass(h, r) for classes, _ in self.handlers for h in classes
                   for r in raisable if not (library and issubclass(h, AssertionError)))

    def classes(self) -> tuple[tuple[type, ...], ...]:
        return tuple(c for c, _ in self.handlers)


def _tags(tree: tuple) -> set[str]:
    """The kinds of node in an argument tree ("v", "c", "t", "s")."""
    out = {tree[0]}
    if tree[0] == "t":
        for t in tree[1]:
            out |= _tags(t)
    elif tree[0] == "s":
        for t in tree[1:]:
            out |= _tags(t)
    return out


class FlowLowering(LoweringHost):
    """`raise`, `assert` and `try` (see the module docstring)."""

    # -- raise and assert ---------------------------------------------------------
    def stmt_Raise(self, s: ast.Raise) -> None:
        cls, args = self.exception_of(s)
        for ctx in reversed(self.trying):
            if ctx.match(cls) is not None:
                raise self.error(UnsupportedSyntax, f"this raise of {cls.__name__} is caught by the try at line "
                                 f"{ctx.node.lineno}, from inside a loop or a function it calls", s,
                                 "zymo lowers a caught raise as a branch to its handler only at the top level of "
                                 "the try body or inside its if statements",
                                 "test the condition in the try body itself, or set a flag and test it there")
        self.raise_(cls, args, s)

    def raise_(self, cls: type, args: list, node: ast.AST) -> None:
        for enter in reversed(self.errstates):  # Python's with statements restore errstate on the way out
            self.b.prim(checks.ERRSTATE_EXIT, [enter[0], S(enter[1])], {}, self.loc(node))
        key = checks.raise_key(cls, len(args))
        why = checks.python_only(key)
        if why:
            self.python_only.append((why, self.loc(node)))
        self.b.prim(key, [S(a) for a in args], {}, self.loc(node))
        self.frame.env[RAISED] = True

    def exception_of(self, s: ast.Raise) -> tuple[type, list]:
        """The class and constant arguments of `raise E(args)` (or `raise E`)."""
        if s.exc is None:
            raise self.error(UnsupportedSyntax, "a bare raise (re-raising the caught exception) is not supported", s,
                             "zymo does not keep the exception object a handler caught",
                             "raise a new exception: raise ValueError('...')")
        if s.cause is not None and not (isinstance(s.cause, ast.Constant) and s.cause.value is None):
            raise self.error(UnsupportedSyntax, "raise ... from <exception> is not supported", s,
                             hint="raise the exception without a cause, or `from None`")
        node: ast.expr = s.exc
        arg_nodes: list[ast.expr] = []
        if isinstance(node, ast.Call):
            if node.keywords:
                raise self.error(UnsupportedSyntax, "keyword arguments of an exception are not supported", s,
                                 hint="pass the message positionally")
            arg_nodes = node.args
            node = node.func
        b = self.expr(node)
        cls = b.obj if isinstance(b, S) else None
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise self.error(UnsupportedSyntax, "raise needs an exception class (raise ValueError('...'))", s,
                             "zymo writes the raise into the derivative program and needs its class",
                             "raise a class by name with constant arguments")
        return cls, [self.constant(a, "an exception's arguments") for a in arg_nodes]

    def constant(self, node: ast.expr, what: str) -> Any:
        b = self.expr(node)
        if isinstance(b, S) and (b.obj is None or isinstance(b.obj, (str, int, float, bool))):
            return b.obj
        if isinstance(b, Value) and b.is_const:
            return b.const
        raise self.error(UnsupportedSyntax, f"{what} must be constants (strings or numbers written out)", node,
                         "the derivative program raises the same exception, and Numba needs its message "
                         "at compile time", "use a constant message: raise ValueError('n must be positive')")

    def stmt_Assert(self, s: ast.Assert) -> None:
        if sys.flags.optimize:
            return  # as Python: asserts are not evaluated under `python -O`
        cond = self.truth(self.expr(s.test), s.test)
        args = [self.constant(s.msg, "an assert's message")] if s.msg is not None else []
        if cond is True:
            return
        if cond is False:
            self.stmt_Raise_of(AssertionError, args, s)
            return
        self.lower_if(self.not_(cond, s), lambda: self.stmt_Raise_of(AssertionError, args, s), lambda: None, s)

    def stmt_Raise_of(self, cls: type, args: list, node: ast.AST) -> None:
        """`raise cls(*args)` at `node`: to a handler of the try being lowered, or raised."""
        ctx = self.trying[-1] if self.trying else None
        k = ctx.match(cls) if ctx is not None and self.try_top else None
        if ctx is not None and k is not None:
            self.handle(ctx, k)
            return
        for outer in self.trying:
            if outer.match(cls) is not None:
                raise self.error(UnsupportedSyntax, f"this {cls.__name__} is caught by the try at line "
                                 f"{outer.node.lineno}, from a place zymo cannot branch from", node,
                                 hint="test the condition at the top level of the try body")
        self.raise_(cls, args, node)

    def merge_raised(self, envs: list[dict], blocks: list[Block], pre: dict, node: ast.AST) -> bool:
        """Before `lower_if` merges two branches: a branch that raised takes the other branch's
        values (placeholders it never reads). True when both raised."""
        raised = [e.get(RAISED) is True for e in envs]
        if all(raised):
            return True
        for k in (0, 1):
            if raised[k]:
                live, dead = envs[1 - k], envs[k]
                dead.pop(RAISED)
                self.b.push(blocks[k])
                try:
                    for n in set(live) | set(dead):
                        if live.get(n) is not pre.get(n):
                            dead[n] = self._stand_in(live[n], n, node) if n in live else None
                        elif dead.get(n) is not pre.get(n):
                            dead[n] = pre.get(n)
                    for n in [n for n, v in dead.items() if v is None]:
                        del dead[n]
                finally:
                    self.b.pop()
        return False

    def _stand_in(self, like: Any, name: str, node: ast.AST) -> Any:
        """A value of `like`'s type on a path that raised (never read), or, for what has no
        placeholder (a list), the name left undefined there."""
        from ..errors import ZymoTypeError
        from .bindings import Poison

        try:
            return self.placeholder(like, node)
        except ZymoTypeError:
            return Poison(name, f"{name} is not assigned on every path")

    # -- try ------------------------------------------------------------------------
    def stmt_Try(self, s: ast.Try) -> None:
        for stmt in s.finalbody:
            for sub in pyast.walk(stmt):
                if isinstance(sub, (ast.Return, ast.Break, ast.Continue)):
                    raise self.error(UnsupportedSyntax, f"{type(sub).__name__.lower()} inside finally is not "
                                     "supported", sub, "it would cancel an exception zymo does not keep",
                                     "move it after the try statement")
        handlers = []
        for h in s.handlers:
            classes = self.handler_classes(h)
            if h.name is not None and any(isinstance(n, ast.Name) and n.id == h.name
                                          for st in h.body for n in pyast.walk(st)):
                raise self.error(UnsupportedSyntax, f"except ... as {h.name} is not supported when the handler "
                                 f"reads {h.name}", h, "zymo does not keep the exception object",
                                 "handle the error without reading the exception")
            handlers.append((classes, h.body))
        self.lower_try(TryCtx(s, handlers), s.body, s.orelse, s)
        if self.frame.env.get(RAISED) is not True:
            self.stmts(s.finalbody)

    def handler_classes(self, h: ast.ExceptHandler) -> tuple[type, ...]:
        if h.type is None:
            return (BaseException,)
        b = self.expr(h.type)
        objs = b if isinstance(b, tuple) else (b,)
        out = []
        for o in objs:
            cls = o.obj if isinstance(o, S) else None
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                raise self.error(UnsupportedSyntax, "except needs exception classes", h,
                                 hint="name the classes: except (ValueError, ZeroDivisionError):")
            out.append(cls)
        return tuple(out)

    def lower_try(self, ctx: TryCtx, body: list[ast.stmt], orelse: list[ast.stmt], node: ast.AST) -> None:
        self.trying.append(ctx)
        try:
            self.try_seq(ctx, list(body), orelse, node)
        finally:
            self.trying.pop()

    def handle(self, ctx: TryCtx, k: int) -> None:
        """Lower handler `k`'s body (its raises are not caught by the same try)."""
        saved, top = self.trying, self.try_top
        self.trying, self.try_top = saved[:saved.index(ctx)], False
        try:
            self.stmts(ctx.handlers[k][1])
        finally:
            self.trying, self.try_top = saved, top

    def outside(self, ctx: TryCtx, fn: Callable[[], None]) -> None:
        """Lower with `ctx` no longer catching (the else clause)."""
        saved, top = self.trying, self.try_top
        self.trying, self.try_top = saved[:saved.index(ctx)], False
        try:
            fn()
        finally:
            self.trying, self.try_top = saved, top

    def try_seq(self, ctx: TryCtx, stmts: list[ast.stmt], orelse: list[ast.stmt], node: ast.AST) -> None:
        """Lower `stmts`, then `orelse`, catching for `ctx` (see the module docstring)."""
        if not stmts:
            self.outside(ctx, lambda: self.stmts(orelse))
            return
        s, rest = stmts[0], stmts[1:]

        def go_on() -> None:
            self.try_seq(ctx, rest, orelse, node)
        if isinstance(s, ast.Assert) and not sys.flags.optimize:
            ops, _, cond = self.scratch(lambda: self.truth(self.expr(s.test), s.test))
            self.refuse_nested(ctx, ops)
            args = [self.constant(s.msg, "an assert's message")] if s.msg is not None else []

            def check() -> None:
                def fail() -> None:
                    self.at_top(lambda: self.stmt_Raise_of(AssertionError, args, s))

                if cond is True or cond is False:
                    (go_on if cond else fail)()
                    return
                self.lower_if(cond, go_on, fail, s)
            self.emit_probed(ctx, ops, s, check)
            return
        if isinstance(s, ast.Raise):
            cls, args = self.exception_of(s)
            self.at_top(lambda: self.stmt_Raise_of(cls, args, s))
            return
        if isinstance(s, ast.If):
            if not self.catches_raise(ctx, s):
                ops, post, _ = self.scratch(lambda: self.stmt(s))
                if not any(op.regions and self.raises_inside(ctx, op) for op in ops):
                    self.emit_probed(ctx, ops, s, lambda: self.go_on_after(s, post, go_on))
                    return
            # a branch may raise what a handler catches: the rest of the body in each branch
            ops, _, cond = self.scratch(lambda: self.truth(self.expr(s.test), s.test))
            self.refuse_nested(ctx, ops)
            self.emit_probed(ctx, ops, s, lambda: self.lower_if(
                cond, lambda: self.try_seq(ctx, s.body + rest, orelse, node),
                lambda: self.try_seq(ctx, s.orelse + rest, orelse, node), s))
            return
        # an ordinary statement: lowered apart, then its ops that may raise a caught exception probed
        ops, post, _ = self.scratch(lambda: self.stmt(s))
        self.refuse_nested(ctx, ops)
        self.emit_probed(ctx, ops, s, lambda: self.go_on_after(s, post, go_on))

    def scratch(self, fn: Callable[[], Any]) -> tuple[list[Op], dict, Any]:
        """Lower `fn()` into a block of its own: (its ops, the env after it, its value); the env is
        left as it was before."""
        f = self.frame
        pre = dict(f.env)
        blk = self.b.push(Block())
        try:
            out = fn()
        finally:
            self.b.pop()
        post = f.env
        f.env = pre
        return blk.ops, post, out

    def go_on_after(self, s: ast.stmt, post: dict, go_on: Callable[[], None]) -> None:
        self.frame.env = post
        self.continue_after(s, go_on)

    def at_top(self, fn: Callable[[], None]) -> None:
        saved, self.try_top = self.try_top, True
        try:
            fn()
        finally:
            self.try_top = saved

    def emit_probed(self, ctx: TryCtx, ops: list[Op], s: ast.stmt, then: Callable[[], None]) -> None:
        """Emit `ops`, each op that may raise what `ctx` catches preceded by its probe and the
        ops after it, then `then()`, under `if code == 0` (the handlers under the other branch)."""
        for j, op in enumerate(ops):  # noqa: B007  (j is read after the loop)
            if self.may_raise(ctx, op):
                break
        else:
            self.b.block.ops.extend(ops)
            then()
            return
        self.b.block.ops.extend(ops[:j])
        op = ops[j]
        loc = self.loc(s)
        if op.kind == "getitem":
            index = op.attrs["index"]
            if "s" in _tags(index):
                raise UnsupportedSyntax(
                    "a handler of this try may catch an error of a read with a slice", op.loc,
                    "zymo records which path a try takes by reading once more first, as a call, which a "
                    "slice cannot be passed to", "read the slice before the try, or catch a narrower exception")
            probe_attrs = {"key": checks.probe_key("getitem", ctx.classes()), "pos": (("v", 0), index), "kw": ()}
        else:
            probe_attrs = None
        key = op.attrs["key"] if op.kind == "prim" else "getitem"
        if key.startswith(("numpy.random.", "inactive.")):
            raise UnsupportedSyntax(
                f"a handler of this try may catch an error of {key.split('.', 1)[1]}, which has effects",
                op.loc, "zymo finds the path a try takes by calling the function once more first: a random "
                "draw or a function marked inactive would run twice", "call it before the try statement")
        if "out" in op.attrs:
            raise UnsupportedSyntax(
                "a handler of this try may catch an error of a call that writes into an array (out= or +=)",
                op.loc, "zymo finds the path a try takes by calling the function once more first, and "
                "cannot do that without writing the array twice", "compute a new array in the try body "
                "(y = a + b) and write it after the try statement, or catch a narrower exception")
        attrs: dict[str, Any] = probe_attrs or dict(op.attrs, key=checks.probe_key(key, ctx.classes()))
        self.python_only.append((checks.python_only(attrs["key"]), loc))
        code = Value(T.INT, "caught")
        self.b.emit(Op("prim", list(op.args), [code], op.loc, attrs))
        ok = self.b.prim("eq", [code, 0], {}, loc, "ok")

        def go() -> None:
            self.b.emit(op)
            self.emit_probed(ctx, ops[j + 1:], s, then)
        self.lower_if(ok, go, lambda: self.dispatch(ctx, code, s), s)

    def dispatch(self, ctx: TryCtx, code: Value, s: ast.AST, k: int = 0) -> None:
        """The handlers, chosen by the probe's `code` (1-based; never 0 here)."""
        if k == len(ctx.handlers) - 1:
            self.handle(ctx, k)
            return
        hit = self.b.prim("eq", [code, k + 1], {}, self.loc(s), "caught")
        self.lower_if(hit, lambda: self.handle(ctx, k), lambda: self.dispatch(ctx, code, s, k + 1), s)

    def continue_after(self, s: ast.stmt, go_on: Callable[[], None]) -> None:
        """What `stmts` does after a statement: stop after a raise or an exit, else go on."""
        if self.frame.env.get(RAISED) is True:
            return
        if may_exit(s):
            cond = self.exit_flags(s)
            if cond is True:
                return
            if cond is not None:
                self.lower_if(self.not_(cond, s), go_on, self.mark_exited, s)
                return
        go_on()

    def catches_raise(self, ctx: TryCtx, s: ast.If) -> bool:
        """Whether `if` statement `s` holds (outside loops and functions) a raise or assert `ctx` catches."""
        stack: list[ast.AST] = [*s.body, *s.orelse]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Raise) and n.exc is not None:
                exc = n.exc.func if isinstance(n.exc, ast.Call) else n.exc
                with contextlib.suppress(Exception):
                    b = self.expr(exc)
                    if isinstance(b, S) and isinstance(b.obj, type) and ctx.match(b.obj) is not None:
                        return True
            if isinstance(n, ast.Assert) and ctx.match(AssertionError) is not None:
                return True
            if isinstance(n, ast.If):
                stack.extend(n.body + n.orelse)
        return False

    def may_raise(self, ctx: TryCtx, op: Op) -> bool:
        """Whether top-level `op` may raise an exception a handler of `ctx` catches."""
        k = op.kind
        if k == "const":
            return False
        if k == "getitem":
            return ctx.may_catch((IndexError, TypeError))  # probed as a read (`emit_probed`)
        if k == "setitem":
            if ctx.may_catch((IndexError, ValueError, TypeError)):
                raise UnsupportedSyntax("a handler of this try may catch an error of an item assignment", op.loc,
                                        "zymo records which path a try takes by running a call or a read once "
                                        "more first, and cannot write the array twice", "assign outside the try, "
                                        "or catch a narrower exception (np.linalg.LinAlgError)")
            return False
        if k != "prim":
            return False
        key = op.attrs["key"]
        rule = REGISTRY.get(key)
        # the rule's facts: never raises; never on numbers (`+ - *` of NumPy numbers raise
        # FloatingPointError on overflow under np.errstate(over="raise"))
        if key.startswith("zymo.raise.") or checks.is_errstate(key) or (rule is not None and not rule.may_raise):
            return False
        if rule is not None and rule.numbers_safe and all(isinstance(a.type, T.Scalar) for a in op.args) and (
                not rule.overflows or not ctx.may_catch((FloatingPointError, RuntimeWarning))):
            return False
        raisable: tuple[type, ...] = (Exception,)
        if rule is not None and rule.elementwise and sum(isinstance(a.type, T.Array) for a in op.args) == 1:
            # one array and numbers: no shapes to mismatch; NumPy's error state may raise, or a
            # warnings filter turn its RuntimeWarning into an error
            raisable = (FloatingPointError, RuntimeWarning)
        if all(issubclass(c, np.linalg.LinAlgError) for cs in ctx.classes() for c in cs):
            linalg = key.startswith(("numpy.linalg.", "scipy.linalg.")) or not key.startswith(
                ("numpy.", "math.", "builtins.", "zymo.", "scipy.")) and "." in key
            raisable = (np.linalg.LinAlgError,) if linalg else ()
        return ctx.may_catch(raisable, library=key.startswith(("numpy.", "math.", "scipy.")) or "." not in key)

    def raises_inside(self, ctx: TryCtx, op: Op) -> Op | None:
        """The first op inside `op`'s regions that may raise what `ctx` catches (or None)."""
        from ..ir.core import walk

        for region in op.regions:
            for inner in walk(region):
                if inner.kind in ("prim", "getitem", "setitem") and self._quiet_may_raise(ctx, inner):
                    return inner
        return None

    def refuse_nested(self, ctx: TryCtx, ops: list[Op]) -> None:
        for op in ops:
            inner = self.raises_inside(ctx, op) if op.regions else None
            if inner is not None:
                raise UnsupportedSyntax(
                    "a handler of this try may catch an error raised inside a loop or a branch of the try body",
                    inner.loc, "zymo records which path a try takes only for calls at the top level of "
                    "the try body's statements (and of its if statements)", "compute the call in a statement of "
                    "its own in the try body, outside the loop, or move the try into the loop body")

    def _quiet_may_raise(self, ctx: TryCtx, op: Op) -> bool:
        try:
            return self.may_raise(ctx, op)
        except UnsupportedSyntax:
            return True
