"""Forward mode: the primal with tangents propagated next to it.

Contract: `forward(fn, act)` writes a Python function

    def <name>_fwd(<params>, <tangents of active params>):
        ...
        return (<results>,), (<tangents of results>,)

Every active value `v` gets a tangent `dv` computed right after `v` (an array's
tangent is its shadow memory). A store writes the tangent of the stored value
into the shadow of that memory (zero when the value is inactive); memory that
is only read keeps its tangents. `out=` computes the tangent from the operands'
values before the call, so `np.sin(x, out=x)` is right. Inactive values get no
code at all.

Batch mode (`width` W > 1) propagates W tangents through the same primal: every
tangent statement is written once per lane (`dx_1`, ..., `dx_W`), the primal
once; the function takes the lanes' tangents lane by lane and returns one
tuple of result tangents per lane.
"""
from __future__ import annotations

from ..analysis.activity import Activity
from ..ir import types as T
from ..ir.core import Block, Function, Op, Value, walk
from ..rules.registry import lookup, uses
from .emit import Emitter, assign_all, range_args, zero
from .naming import Namer
from .writer import Writer


class Forward:
    def __init__(self, fn: Function, act: Activity, width: int = 1):
        self.fn = fn
        self.act = act
        self.namer = Namer()
        self.namer.width = width
        self.w = Writer()
        self.e = Emitter(self.namer, self.w)
        # where each loop body's yield sends its values (the next iteration's carries)
        self._yield_targets: dict[int, list[Value]] = {}
        for op in walk(fn.body):
            if op.kind == "for":
                self._yield_targets[id(op.regions[0].ops[-1])] = op.regions[0].args[1:]
            elif op.kind == "while":
                self._yield_targets[id(op.regions[1].ops[-1])] = op.regions[0].args

    def tangent(self, v: Value) -> str:
        """The tangent expression of `v` (zero when inactive)."""
        if self.act.is_active(v):
            return self.namer.d(v)
        return zero(v, self.namer(v))

    def run(self) -> tuple[str, str, list[int]]:
        fn, n = self.fn, self.namer
        active_params = [k for k, p in enumerate(fn.params) if self.act.is_active(p)]
        params = [n(p) for p in fn.params] + [n.d(fn.params[k]) for _ in n.lanes() for k in active_params]
        name = n.fresh(f"{fn.name}_fwd")
        with self.w.indent(f"def {name}({', '.join(params)}):"):
            self.block(fn.body)
        return self.w.source(), name, active_params

    def block(self, block: Block) -> None:
        for op in block.ops:
            getattr(self, "op_" + op.kind)(op)

    # -- straight-line ops ----------------------------------------------------
    def op_const(self, op: Op) -> None:
        self.e.primal(op)

    def op_prim(self, op: Op) -> None:
        n, w, act = self.namer, self.w, self.act
        rule = lookup(op.attrs["key"])
        out = op.args[op.attrs["out"]] if "out" in op.attrs else None
        if rule.nondiff or (not op.results and out is None):
            self.e.primal(op)
            for _ in n.lanes():
                if out is not None and act.is_active(out):
                    w(f"{n.d(out)}[...] = 0.0")
                for r in op.results:
                    if T.is_memory(r.type) and act.is_active(r):
                        w(f"{n.d(r)} = {zero(r, n(r))}")  # a list allocated inside: a list of zeros
            return
        if rule.view or rule.maybe_view:
            self.e.primal(op)
            r = op.result
            if act.is_active(r):
                x = op.args[0]
                for _ in n.lanes():
                    expr = self.e.rule_expr(rule, "jvp", rule.diff_params()[0], self.tangent(x), n(r), op)
                    if rule.maybe_view:
                        expr = f"_rt.maybe_view_shadow({n(r)}, {n(x)}, {expr}, {self.tangent(x)}, False)"
                    w(f"{n.d(r)} = {expr}")
            return
        if out is None:
            self.e.primal(op)
            r = op.result
            if not act.is_active(r):
                return
            for _ in n.lanes():
                terms, _needs_ans = self._terms(op, rule)
                if not terms:
                    w(f"{n.d(r)} = {zero(r, n(r))}")
                    continue
                expr = _sum([t(n(r)) for t in terms])
                if isinstance(r.type, T.Array):
                    single_name = len(terms) == 1 and expr.isidentifier()
                    expr = f"_rt.{'as_tangent' if single_name else 'as_shape'}({expr}, {n(r)})"
                w(f"{n.d(r)} = {expr}")
            return
        # out=: the tangent is computed from the operands as they were before the call
        if not act.is_active(out):
            self.e.primal(op)
            return
        terms, needs_ans = self._terms(op, rule)
        if not terms:
            self.e.primal(op)
            for _ in n.lanes():
                w(f"{n.d(out)}[...] = 0.0")
            return
        ans = "None"
        if needs_ans:
            ans = n.fresh("_ans")
            w(f"{ans} = {self.e.call(op, with_out=False)}")
        tmps = []
        for _ in n.lanes():
            terms, _needs_ans = self._terms(op, rule)
            tmps.append(n.fresh("_t"))
            w(f"{tmps[-1]} = " + _sum([t(ans) for t in terms]))
        if needs_ans:
            w(f"{n(out)}[...] = {ans}")
        else:
            self.e.primal(op)
        for lane in n.lanes():
            w(f"{n.d(out)}[...] = {tmps[lane]}")

    def _terms(self, op: Op, rule) -> tuple[list, bool]:
        """Tangent contributions of the op's active arguments, as functions of `ans`."""
        vals = self.e.arg_values(rule, op)
        terms = []
        needs_ans = False
        for p in rule.diff_params():
            v = vals.get(p)
            if v is None or not self.act.is_active(v) or p not in rule.jvps():
                continue
            if "ans" in uses(rule, "jvp", p):
                needs_ans = True
            t = self.tangent(v)
            terms.append(lambda ans, p=p, t=t: self.e.rule_expr(rule, "jvp", p, t, ans, op))
        return terms, needs_ans

    def op_getitem(self, op: Op) -> None:
        self.e.primal(op)
        base, r = op.args[0], op.result
        if self.act.is_active(r):
            for _ in self.namer.lanes():
                self.w(f"{self.namer.d(r)} = {self.namer.d(base)}[{self.e.index(op)}]")

    def op_setitem(self, op: Op) -> None:
        self.e.primal(op)
        obj, val = op.args[0], op.args[1]
        if not self.act.is_active(obj):
            return
        for _ in self.namer.lanes():
            if self.act.is_active(val):
                t = self.namer.d(val)
            elif isinstance(obj.type, T.List) and T.is_memory(val.type):
                t = f"np.zeros_like({self.namer(val)})"
            else:
                t = "0.0"
            self.w(f"{self.namer.d(obj)}[{self.e.index(op)}] = {t}")

    # -- regions --------------------------------------------------------------
    def _assign(self, dsts: list[Value], srcs: list[Value]) -> None:
        n = self.namer
        pairs = []
        for d, s in zip(dsts, srcs):
            pairs.append((n(d), n(s)))
            if self.act.is_active(d):
                for _ in n.lanes():
                    pairs.append((n.d(d), self.tangent(s)))
        assign_all(self.w, pairs)

    def op_for(self, op: Op) -> None:
        n = self.namer
        body = op.regions[0]
        iv, carries = body.args[0], body.args[1:]
        self._assign(carries, op.args[3:])
        start, stop, step = (n(v) for v in op.args[:3])
        with self.w.indent(f"for {n(iv)} in range({range_args(start, stop, step)}):"):
            self.block(body)
        self._assign(op.results, carries)

    def op_while(self, op: Op) -> None:
        cond, body = op.regions
        self._assign(cond.args, op.args)
        with self.w.indent("while True:"):
            self.block(cond)
            self._assign(body.args, cond.args)
            self.block(body)
        self._assign(op.results, cond.args)

    def op_condition(self, op: Op) -> None:
        with self.w.indent(f"if not {self.namer(op.args[0])}:"):
            self.w("break")

    def op_yield(self, op: Op) -> None:
        parent = self._yield_targets.get(id(op))
        if parent is not None:
            self._assign(parent, op.args)

    def op_if(self, op: Op) -> None:
        n = self.namer
        then, orelse = op.regions
        for region, header in ((then, f"if {n(op.args[0])}:"), (orelse, "else:")):
            self._yield_targets[id(region.ops[-1])] = op.results
            with self.w.indent(header):
                self.block(region)

    def op_return(self, op: Op) -> None:
        n = self.namer
        vals = ", ".join(n(v) for v in op.args)
        one = "," if len(op.args) == 1 else ""
        lanes = []
        for _ in n.lanes():
            tans = ", ".join(self.tangent(v) if v.type.differentiable else "None" for v in op.args)
            lanes.append(f"({tans}{one})")
        if n.width == 1:
            self.w(f"return ({vals}{one}), {lanes[0]}")
        else:
            self.w(f"return ({vals}{one}), ({', '.join(lanes)},)")


def _sum(exprs: list[str]) -> str:
    """`a + b + ...` with only the parentheses Python needs."""
    import ast

    node = ast.parse(exprs[0], mode="eval").body
    for e in exprs[1:]:
        node = ast.BinOp(node, ast.Add(), ast.parse(e, mode="eval").body)
    return ast.unparse(node)


def forward(fn: Function, act: Activity, width: int = 1) -> tuple[str, str, list[int], Namer]:
    """The tangent program's source, its name, the active parameters, and the names it gave."""
    fwd = Forward(fn, act, width)
    return (*fwd.run(), fwd.namer)
