"""Lowering conditions and `if`: branches and the merge of their envs (a mixin of `Lowerer`).

Contract: `truth(b)` is a condition as a bool value, or a Python bool when it is known while
lowering (then `lower_if` lowers only the branch taken). `lower_if(cond, then, orelse)`
lowers each branch into a region of its own, from a copy of the env before the `if`, and
merges the two envs into the `if` op's results: a name bound on both paths yields one
result (its types joined, converted with `convert` where they differ: an int becomes a
float, a float32 array a float64 copy, which `check_array_converts` refuses when float32
memory is written in place); a name bound on one path only is `Poison` after the `if`
(a synthetic `$` name gets a `placeholder` on the other path). A branch that raised merges
as the other branch alone (flow.py); a branch that certainly returned, broke or continued
gives the other's new names placeholders (`merge_exited`), and a path whose every branch
exited is remembered as exited (`exited`).
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from ..errors import ZymoTypeError
from ..ir import types as T
from ..ir.core import Block, Op, Value, walk
from .bindings import Guarded, LocalFn, Poison, S, flatten, rebuild, same_shape
from .containers import Ref
from .flow import RAISED
from .host import LoweringHost


class BranchLowering(LoweringHost):
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
                # `check_array_converts` makes sure no in-place write can tell apart
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

    def check_array_converts(self, body: Block) -> None:
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


def _unguard(b: Any) -> Any:
    return b.binding if isinstance(b, Guarded) else b
