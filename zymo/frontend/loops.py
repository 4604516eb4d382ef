"""Lowering `for` and `while` loops (a mixin of `Lowerer`).

Contract:
- A loop whose trip count is known only at run time becomes a `for` op (over `range`
  bounds) or a `while` op (a condition region, then the body) that carries the names its
  body assigns: `lower_loop` lowers the body with the carried values as block arguments,
  joins their types with the values before the loop, and lowers it again until the types
  settle (`_loop_attempt`); names first bound inside the loop are `Poison` after it, and a
  loop variable unbound before the loop is `Guarded` by its bounds (a read after the loop
  checks that the loop ran).
- A `for` over `range` with `break` or `return` becomes `while i < stop and not flag`
  (`range_as_while`); a loop's `else` runs under `if not (broke or returned)`.
- Iteration over tuples (and static lists and dicts, and small constant ranges whose body
  indexes a tuple or uses a list or dict built in the function) is unrolled (`unroll`);
  arrays and runtime lists are iterated with an index; `zip` and `enumerate` of them are
  iterated together, up to the shortest.
- Lists appended to in a loop of run-time length are filled by `fill_loop` (fills.py).
- `for t in zymo.checkpointed(range(...), snapshots=k)` lowers the plain loop and marks its
  op with `attrs["checkpoint"] = k`.
"""
from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import Any, cast

from .. import pyast
from ..errors import UnsupportedSyntax, ZymoSourceError, ZymoTypeError
from ..ir import types as T
from ..ir.core import Block, Op, Value
from .bindings import Guarded, LocalFn, Poison, S, flatten, rebuild, same_shape
from .containers import Ref
from .frame import uid
from .host import LoweringHost
from .syntax import assigned_names, contains


class LoopLowering(LoweringHost):
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
                if self.fill_loop(s, bounds, None):  # out.append(v) in a loop of run-time length (fills.py)
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
            return LoopLowering._seqs(desc[1])
        return [q for d in desc[1] for q in LoopLowering._seqs(d)]

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
        for n in pyast.walk(ast.Module(body=s.body, type_ignores=[])):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
                if any(isinstance(m, ast.Name) and m.id == var for m in pyast.walk(n.slice)):
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
        brk, cont = f"$brk{next(uid)}", f"$cont{next(uid)}"
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
        ivar = f"$i{next(uid)}"
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
        brk, cont = f"$brk{next(uid)}", f"$cont{next(uid)}"
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

    def _bind_carried(self, carried, templates, vals) -> None:
        it = iter(vals)
        for n, t in zip(carried, templates):
            self.frame.env[n] = rebuild(t, [next(it) for _ in flatten(t)])
