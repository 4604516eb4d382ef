"""Comprehensions and generator expressions (a mixin of `Lowerer`).

Contract: a list or dict comprehension, or a generator expression, lowers as the loops it
stands for, written as synthetic statements at its line (`comprehension`, `_comp_loops`):
unrolled over static iterables (tuples, static lists, dicts, `range` with constant bounds,
`zip`, `enumerate`), the runtime-list idiom (fills.py) over a run-time `range(n)` or array
without `if`. Its targets do not leak (Python 3 scoping). A generator is materialised as a
list where it is written, and only where a call consumes it at once (`mark_consumed`);
`sum`/`any`/`all` of a generator are an accumulating loop (`generator_call`), whose `if`s may
be run-time conditions. A lambda inside a comprehension is refused.
"""
from __future__ import annotations

import ast
import functools
from typing import Any

import numpy as np

from .. import pyast
from ..errors import UnsupportedSyntax, ZymoTypeError
from ..ir import types as T
from ..ir.core import Value
from .bindings import S
from .containers import CMethod, Ref, ids, intern_keys, is_join
from .host import LoweringHost


class ComprehensionLowering(LoweringHost):
    def expr_ListComp(self, node: ast.ListComp) -> Any:
        return self.comprehension(node, "list")

    def expr_DictComp(self, node: ast.DictComp) -> Any:
        return self.comprehension(node, "dict")

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
                           np.stack) or is_join(callee.obj))
        if ok:
            for a in node.args:
                if isinstance(a, ast.GeneratorExp):
                    a._zymo_consumed = True  # type: ignore[attr-defined]  # a mark on the node (read above)

    def comprehension(self, node: ast.ListComp | ast.GeneratorExp | ast.DictComp, kind: str) -> Ref:
        """Lowered as the loops it stands for, written as statements at its line; its
        targets do not leak (Python 3 scoping)."""
        f = self.frame
        for g in node.generators:
            if g.is_async:
                raise self.error(UnsupportedSyntax, "async comprehensions are not supported", node)
        acc = f"$comp{next(ids)}"
        ref = self.new_container(kind, () if kind == "list" else (S(intern_keys(())),), node)
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
        acc, conv = f"$acc{next(ids)}", f"$bool{next(ids)}"
        f.env[acc] = self.b.const({sum: 0, any: False, all: True}[callee.obj], self.loc(node), "acc")
        f.env[conv] = S(bool)
        load = ast.Name(id=acc, ctx=ast.Load())
        if callee.obj is sum:
            value: ast.expr = ast.BinOp(load, ast.Add(), g.elt)
        else:
            truth = ast.Call(ast.Name(id=conv, ctx=ast.Load()), [g.elt], [])
            value = ast.BoolOp(ast.Or() if callee.obj is any else ast.And(), [load, truth])
        inner = ast.Assign([ast.Name(id=acc, ctx=ast.Store())], value)
        saved = (len(self.b.blocks), len(self.b.block.ops), dict(f.env), len(self.inlining), dict(self.fills))
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
            self.fills.clear()
            self.fills.update(fills)
        finally:
            f.env.pop(acc, None)
            f.env.pop(conv, None)
        g._zymo_consumed = True  # type: ignore[attr-defined]  # a mark on the node (expr_Call reads it)
        items = self.comprehension(g, "list")
        c = self.contents(items, node)
        if isinstance(c, Value) and isinstance(c.type, T.List):
            return self.b.prim("numpy.sum", [self.stack_list(c, node)], {"axis": 0}, self.loc(node), "s")
        return self.call(callee, [self.freeze(items, node)], {}, node)

    def _comp_loops(self, node: Any, inner: ast.stmt) -> None:
        f = self.frame
        if any(isinstance(n, ast.Lambda) for n in pyast.walk(node)):
            raise self.error(UnsupportedSyntax, "a lambda inside a comprehension is not supported", node,
                             "its free variables would be read where it is called, after the comprehension's "
                             "variables are gone",
                             "define the function outside and pass the values as arguments")
        for g in reversed(node.generators):
            for cond in reversed(g.ifs):
                inner = ast.If(cond, [inner], [])
            inner = ast.For(g.target, g.iter, [inner], [])
        for n in pyast.walk(inner):
            if "lineno" in n._attributes and getattr(n, "lineno", None) is None:
                ast.copy_location(n, node)
        targets = {t.id for g in node.generators for t in pyast.walk(g.target) if isinstance(t, ast.Name)}
        saved = {t: f.env[t] for t in targets if t in f.env}
        try:
            self.stmts([inner])
        finally:
            for t in targets:
                if t in saved:
                    f.env[t] = saved[t]
                else:
                    f.env.pop(t, None)
