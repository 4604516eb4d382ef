"""Reverse mode: an augmented forward sweep, then an adjoint sweep.

Contract: `reverse(fn, act, seed_return)` writes a Python function

    def <name>_rev(<params>, <shadows of active memory params>[, seed]):
        <augmented forward: the primal, shadow views/allocations, caches>
        <adjoint sweep: the ops in reverse order, regions walked backwards>
        return (<results>,), (<adjoints of active float params>,)

or, in split mode, an augmented forward returning `(results, tape)` and a reverse taking the
tape's items. `Reverse.run` drives the stages in order: the adjoint sweep is written first
(`adjoint.py`), recording what it reads (`needs.py`); the tape plan then decides how each of
those values reaches it (`plan.py`, `tape.TapePlan`: read in place, recomputed, a snapshot, or
cached in a list, a stacked buffer or a NumPy buffer); dead-primal elimination (`dead.py`)
drops what nobody reads; the forward sweep (`augmented.py`) is written from the plan.
`report(rev)` (`report.py`) prints what the plan caches and why; `facts.py` says what the
written program's names hold for the later stages. Semantics (seed 002) are stated in
`adjoint.py`.

Batch mode (`width` W > 1): one augmented forward sweep (the primal and its caches, once)
and one adjoint sweep in which every adjoint statement is written once per lane; shadows,
adjoints and seeds come per lane (`dx_1`, ..., `dx_W`), and the function returns one tuple
of adjoints per lane.
"""
from __future__ import annotations

import ast
from typing import cast

from ... import pyast
from ...analysis.activity import Activity
from ...ir import types as T
from ...ir.core import Function
from ..writer import Writer, splice
from .adjoint import AdjointEmitter
from .dead import _names_a_dead_value, _shape_only_names
from .report import report
from .tape import Decision, TapePlan

__all__ = ["Decision", "Reverse", "TapePlan", "report", "reverse"]


class Reverse(AdjointEmitter):
    """The reverse-mode generator of one function (the attributes: `state.ReverseState`)."""

    def run(self, split: bool = False) -> tuple[str, list[str], list[int]]:
        """Source and function names: one combined function, or (augmented forward, reverse)."""
        fn, n, act = self.fn, self.namer, self.act
        shadow_params = [k for k, p in enumerate(fn.params) if T.is_memory(p.type) and act.is_active(p)]
        active_scalars = [k for k, p in enumerate(fn.params) if not T.is_memory(p.type) and act.is_active(p)]
        params = [n(p) for p in fn.params] + [n.d(fn.params[k]) for _ in n.lanes() for k in shadow_params]
        self.seeds = ([n.fresh("_seed" if n.width == 1 else f"_seed_{k + 1}") for k in range(n.width)]
                      if self.seed_return else [])
        seed = ", ".join(self.seeds) if self.seeds else None
        self.split = split
        self.tape_in = n.fresh("_tape_in") if split else None
        # a program that runs as Python keeps its array caches for its next call
        # (`_rt.tape_take`; docs/decisions/0021); whole-program Numba allocates its own
        name = n.fresh(f"{fn.name}_rev") if not split else ""
        self.keep = not (split or self.numba or self.checkpoints)
        for k in active_scalars:
            self.adj_used.add(fn.params[k].id)
        # the adjoint sweep first: it decides what the forward sweep must record
        rev = self.rev_block(fn.body, top=True)
        self._plan_caches()  # the tape plan, complete before the forward sweep is written
        if (self.no_need or not self.need_return) and not split:
            self.dead = self._dead_primal_ops(_shape_only_names(rev.source()))
        fwd = Writer()
        for v, role in self.plan.cache_at_start:
            self._alloc_cache(fwd, v, role, None)
        self.fwd_block(fn.body, fwd)
        for ck in self.checkpoints.values():  # the taped forward of a checkpointed loop: in the adjoint sweep
            ck.splice(rev.lines)
        if self.shape_needed:
            pre = Writer()
            for vid in sorted(self.shape_needed):
                for d in range(cast(T.Array, self.values[vid].type).ndim):
                    pre(f"{self._int(self._shape_name(self.values[vid], d))} = 0")
            splice(pre, fwd)
            fwd = pre
        ret_args = fn.body.ops[-1].args
        rets = ", ".join(n(v) if self.need_return or split else "None" for v in ret_args)
        rets = f"({rets}{',' if len(ret_args) == 1 else ''})"
        lanes = []
        for _ in n.lanes():
            adjs = ", ".join(n.d(fn.params[k]) for k in active_scalars)
            lanes.append(f"({adjs}{',' if len(active_scalars) == 1 else ''})")
        adjs = lanes[0] if n.width == 1 else f"({', '.join(lanes)},)"
        w = Writer()
        if not split:
            with w.indent(f"def {name}({', '.join(params + ([seed] if seed else []))}):"):
                if self.kept:
                    names, dtypes = zip(*self.kept)
                    one = "," if len(names) == 1 else ""
                    w(f"{', '.join(names)}{one} = _rt.tape_take({name}, ({', '.join(dtypes)}{one}))")
                splice(w, fwd)
                w("# adjoint sweep")
                splice(w, rev)
                if self.kept:
                    w(f"_rt.tape_keep({name}, ({', '.join(names)}{one}))")
                w(f"return {rets}, {adjs}")
            return w.source(), [name], shadow_params + active_scalars
        # split mode: the forward sweep returns a tape of everything the adjoint sweep reads
        also = {x for ck in self.checkpoints.values() for x in ck.tape_names(self)}  # `checkpoint.py`
        tape = self.plan.tape_slots + sorted(
            _free_names(rev, fwd, also) - set(self.plan.tape_slots) - set(params) - set(self.seeds))
        self.tape_names = tape
        tup = ", ".join(tape) + ("," if len(tape) == 1 else "")
        aug = n.fresh(f"{fn.name}_augmented")
        assert self.tape_in is not None  # split mode
        with w.indent(f"def {aug}({', '.join(params + [self.tape_in])}):"):
            late = [t for t in tape if t not in self.plan.tape_slots or t in also]
            # names a branch or loop may leave unassigned still go on the tape; a zero of
            # their type where it is known (Numba types a variable once)
            for init in sorted({n.typed_zero.get(t, "None") for t in late}):
                w(" = ".join(t for t in late if n.typed_zero.get(t, "None") == init) + f" = {init}")
            splice(w, fwd)
            w(f"return {rets}, ({tup})")
        w("")
        name = n.fresh(f"{fn.name}_rev")
        # the tape's items come as arguments, not one tuple: Numba's dispatcher types a tuple
        # that holds typed lists in Python, far slower (docs/decisions/0010)
        with w.indent(f"def {name}({', '.join(params + ([seed] if seed else []) + tape)}):"):
            splice(w, rev)
            w(f"return {adjs}")
        return w.source(), [aug, name], shadow_params + active_scalars


def _free_names(rev: Writer, fwd: Writer, also: set[str] = frozenset()) -> set[str]:  # type: ignore[assignment]
    """Names the adjoint sweep reads but never assigns itself (and the names `also`), that the
    forward sweep assigns: what a split-mode tape must carry. (Cache counters are updated with
    `-=`, so they count as read; popped values and loop variables are assigned by the adjoint sweep.)"""
    def scan(w: Writer) -> tuple[set[str], set[str]]:
        tree = ast.parse("\n".join(w.lines) or "pass")
        loads, stores = set(), set()
        aug = {id(n.target) for n in pyast.walk(tree) if isinstance(n, ast.AugAssign)}
        for node in pyast.walk(tree):
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load) or id(node) in aug:
                    loads.add(node.id)
                else:
                    stores.add(node.id)
        return loads, stores

    rev_loads, rev_stores = scan(rev)
    _, fwd_stores = scan(fwd)
    return ((rev_loads - rev_stores) | set(also)) & fwd_stores


def reverse(fn: Function, act: Activity, seed_return: bool = True,
            split: bool = False, width: int = 1, dims=None, internal: frozenset = frozenset(),
            no_need: frozenset = frozenset(), need_return: bool = True,
            numba: bool = False) -> tuple[str, list[str], list[int], Reverse]:
    """The reverse-mode program: (source, function names, active params, the generator,
    whose `report(rev)` says what is cached, and whose `extents.guards` the call's sizes must
    satisfy for the program to be reused: `dims` are the parameters' shapes at this call).

    Combined mode writes one function; split mode an augmented forward that
    returns `(results, tape)` and a reverse that takes the tape's items. `internal`: the parameters
    whose shadows the caller passes as fresh zeros (`Reverse.zero_shadows`). `no_need`: the
    parameters whose primal contents the caller does not need after the call, and
    `need_return`: whether it takes the primal return value (combined mode only): the forward
    sweep leaves out what only they would have read (`Reverse._dead_primal_ops`); without
    `no_need`, only what cannot raise (`Reverse._cannot_raise`), which depends on whether the
    program computes as Numba does (`numba`) or as Python does."""
    rev = Reverse(fn, act, seed_return, width, dims, internal, no_need, need_return, numba)
    src, names, params = rev.run(split)
    if rev.dead and _names_a_dead_value(rev, src):  # a reference the analysis did not see: keep all
        rev = Reverse(fn, act, seed_return, width, dims, internal)
        src, names, params = rev.run(split)
    return src, names, params, rev
