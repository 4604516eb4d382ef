"""Dead-primal elimination: the top-level primal ops the forward sweep may leave out.

Contract: `_dead_primal_ops` (Enzyme's `DuplicatedNoNeed`) returns the ops of the function's
body whose only effects are values nothing reads and stores into memory nobody reads
afterwards, once the adjoint sweep is written and the tape plan is complete (what they read
is live). `_names_a_dead_value` is the driver's guard on it: a program that still names a
result of a left-out op is written again with every op kept.
"""
from __future__ import annotations

import ast
import re

import numpy as np

from ... import pyast
from ...ir import types as T
from ...ir.core import Op, Value, walk
from ...rules import indexing
from ...rules.registry import lookup
from ...runtime.registry import shape_arg
from .plan import TapePlanner
from .tables import _NP_SHAPE_ARGS, _SHAPE_ATTRS


class DeadPrimal(TapePlanner):
    def _dead_primal_ops(self, shape_only: frozenset = frozenset()) -> set[int]:
        """The top-level primal ops the forward sweep may leave out (Enzyme's `DuplicatedNoNeed`):
        those whose only effects are values nothing reads and stores into memory nobody reads
        afterwards. Read afterwards: the values the adjoint sweep uses (`needed`) and the memory
        they point into, the memory of every parameter the caller keeps (not in `no_need`, or
        sharing an alias class with one that is), the return value when the caller takes it,
        what snapshots copy, and whatever a kept op reads (an op with regions reads everything
        inside it). A value whose forward shadow code names it (a shadow allocated `like` it, a
        view's shadow) is read. The adjoint sweep reads a value's memory unless it names it only
        for its shape or dtype (`shape_only`, `_shape_only_names`: `np.sum(out)`'s adjoint
        `_rt.expand_reduced(g, out, None, False)` needs `out`, not what it holds). Only ops of
        known rules are left out: never `np.random` (a draw moves the generator), `print`, a
        user's custom rule or zymo's own helpers. One backward pass over the top level: a loop
        or a branch is left out whole or kept whole (`_droppable_region`). It runs when the
        caller passes `DuplicatedNoNeed` memory or does not take the return value (`Reverse`,
        not `ReverseWithPrimal`): then what computes only the return value is left out, as
        Enzyme leaves it out (`gmm_objective`'s prior term, a loop nest), but without
        `DuplicatedNoNeed` only what cannot raise (`_cannot_raise`)."""
        fn, act = self.fn, self.act
        live_vals = {vid for vid, role in self.needed if role == "p"}
        live_roots: set = set()
        unknown = [False]  # memory read whose roots are unknown: every store is kept

        def read(v: Value, contents: bool = True) -> None:
            live_vals.add(v.id)
            if contents and T.is_memory(v.type):
                roots = act.roots.get(v.id)
                if not roots:
                    unknown[0] = True
                live_roots.update(roots or ())

        for k, p in enumerate(fn.params):
            if k not in self.no_need:
                read(p)
        for vid in list(live_vals):
            v = self.values[vid]
            read(v, contents=self.namer(v) not in shape_only)
        body = fn.body.ops
        if body and body[-1].kind == "return" and self.need_return:
            for v in body[-1].args:
                read(v)
        dead: set[int] = set()
        # values only ops computed where NumPy's error state may raise read (`quiet_dead`)
        quiet_live: set[int] = set()
        quiet = not self.no_need and not self.numba and not any(
            op.kind == "prim" and op.attrs["key"].startswith("zymo.errstate.") for op in walk(fn.body))

        def quiet_read(v: Value, contents: bool = True) -> None:
            quiet_live.add(v.id)
            if contents and T.is_memory(v.type):  # what it reads must hold what it held
                roots = act.roots.get(v.id)
                if not roots:
                    unknown[0] = True
                live_roots.update(roots or ())

        for op in reversed(body[:-1] if body and body[-1].kind == "return" else body):
            for _snap, of in self.snap_post.get(id(op), []):
                read(of)
            for_quiet = any(r.id in quiet_live for r in op.results)
            if not for_quiet and self._droppable(op, live_vals, live_roots, unknown[0]):
                dead.add(id(op))
                if op.kind == "getitem" and T.is_memory(op.result.type) and self.act.is_active(op.result):
                    for v in op.args[1:]:  # the shadow view is still taken, at the same index
                        read(v)
            elif quiet and op.kind == "prim" and op.results and (
                    for_quiet and self._droppable(op, live_vals, live_roots, unknown[0])
                    or self._droppable(op, live_vals, live_roots, unknown[0], errstate=True)):
                self.quiet_dead.add(id(op))  # computed only where NumPy's error state may raise
                self._reads(op, quiet_read)
            else:
                self._reads(op, read)
            for _snap, of in self.snap_pre.get(id(op), []):
                read(of)
        return dead

    def _droppable(self, op: Op, live_vals: set, live_roots: set, unknown: bool, errstate: bool = False) -> bool:
        """Whether top-level `op` has no effect anyone reads (`_dead_primal_ops`). `errstate`: it
        may raise, but only by NumPy's error state (`_raises_by_errstate`)."""
        act, k = self.act, op.kind
        if errstate:
            if self.no_need or self.numba or not self._raises_by_errstate(op):
                return False
        elif not self.no_need and not self._cannot_raise(op):  # only `DuplicatedNoNeed` gives up errors
            return False
        if k in ("for", "while", "if"):
            return self._droppable_region(op, live_vals, live_roots, unknown)
        if k not in ("const", "getitem", "setitem", "prim"):
            return False
        if k == "prim":
            key = op.attrs["key"]
            rule = lookup(key)
            if not rule.pure or not (
                    "." not in key or key.split(".")[0] in ("numpy", "math", "builtins")):
                return False
        for r in op.results:
            if r.id in live_vals:
                return False
            if T.is_memory(r.type) and act.is_active(r):  # the forward shadow code may name `r`
                if k == "getitem" and indexing.is_advanced(op):
                    return False
                if k == "prim" and (rule.view or rule.maybe_view or r.id in self.shape_needed
                                    or not (self._lazy(r) or self._adjoint_alloc(r))):
                    return False
        target = op.args[0] if k == "setitem" else (
            op.args[op.attrs["out"]] if k == "prim" and "out" in op.attrs else None)
        if target is not None:
            roots = act.roots.get(target.id)
            if unknown or not roots or roots & live_roots or not isinstance(target.type, T.Array):
                return False
        return True

    def _cannot_raise(self, op: Op) -> bool:
        """Whether `op` (not what its regions hold) never raises, as the program computes: a
        constant, arithmetic and comparisons of numbers, a branch, a `for` loop with a constant
        nonzero step; under Numba (no bounds checks, math domain errors give nan, divisions of
        numbers are IEEE's) also an array read or a store of a number at integer indices, and
        the functions of `math` and NumPy's elementwise ones on numbers, and the elementwise
        arithmetic of float arrays whose shapes broadcast for certain (`_broadcasts`). So
        `Reverse`, which
        leaves out what only the return value needs, keeps whatever could raise (an index out of
        range in Python, a domain error, a shape mismatch): a call that raises in the primal
        raises in its derivative too."""
        k, args = op.kind, op.args
        numbers = all(isinstance(a.type, T.Scalar) for a in args)
        if k in ("const", "if"):
            return True
        if k == "for":
            step = args[2]
            return step.is_const and isinstance(step.const, int) and step.const != 0
        if k == "prim":
            key = op.attrs["key"]
            if lookup(key).array_safe and "out" not in op.attrs:
                return True  # an invalid axis failed while lowering (types come from example calls)
            if self.numba and not numbers and "out" not in op.attrs and self._broadcasts(op):
                return True  # compiled arithmetic never raises FloatingPointError
            if not numbers or "out" in op.attrs:
                return False
            if lookup(key).numbers_safe:  # but a NumPy scalar's `+ - *` overflows by NumPy's error state
                return self.numba or not (lookup(key).overflows and any(self._numpy_scalar(a) for a in args))
            if key == "truediv" and self._numpy_scalar(args[0], chain=False):
                return True  # an np.float64 divided by zero is inf or nan (a warning), never an error
            return self.numba and (key == "truediv" or lookup(key).numba_safe
                                   or key.startswith("numpy.") and lookup(key).elementwise
                                   and all(T.is_float(a.type) for a in args))
        if k in ("getitem", "setitem") and self.numba:
            base = args[0]
            index = args[1:] if k == "getitem" else args[2:]
            value_ok = k == "getitem" or isinstance(args[1].type, T.Scalar)
            return (isinstance(base.type, T.Array) and value_ok and not indexing.is_advanced(op)
                    and len(index) == base.type.ndim and all(v.type == T.INT for v in index))
        return False

    def _raises_by_errstate(self, op: Op) -> bool:
        """Whether prim `op` raises, as the Python backend computes, only where NumPy's error state
        says "raise" (or "call" a function that raises): the elementwise arithmetic of float arrays
        whose shapes broadcast for certain (`_broadcasts`: `C * C`, `(W * out) * out`), and the
        division and `+ - *` of numbers one of which is a NumPy scalar (`0.5 * np.sum(r * r) / n`:
        division by zero, overflow). The forward
        sweep computes such an op only where the state says so (`_rt.fp_raises()`), and so raises
        where the primal does."""
        if op.kind != "prim" or "out" in op.attrs or not op.results:
            return False
        if any(isinstance(a.type, T.Array) for a in op.args):
            return self._broadcasts(op)
        key = op.attrs["key"]
        return ((key == "truediv" or lookup(key).overflows) and all(isinstance(a.type, T.Scalar) for a in op.args)
                and any(self._numpy_scalar(a) for a in op.args))

    def _broadcasts(self, op: Op) -> bool:
        """Whether elementwise `op` (`_float_elementwise`) cannot fail to broadcast its operands:
        the sources of one array operand's shape (`_shape_sources`) include every other's. Its
        result then has that operand's shape, which exists because the operand does (an op that
        made it and could fail is kept; one left out could not fail)."""
        if not self._float_elementwise(op):
            return False
        sources = [self._shape_sources(a) for a in op.args if isinstance(a.type, T.Array)]
        widest = max(sources, key=len)
        return all(s <= widest for s in sources)

    def _shape_sources(self, v: Value) -> frozenset:
        """Arrays whose broadcast shape is `v`'s: those of its operands when `v` is made by
        `_float_elementwise` arithmetic, else `v` itself."""
        memo = self.__dict__.setdefault("_sources_memo", {})
        if v.id not in memo:
            d = self.def_op.get(v.id)
            if d is not None and d.kind == "prim" and "out" not in d.attrs and self._float_elementwise(d):
                memo[v.id] = frozenset().union(*(self._shape_sources(a) for a in d.args
                                                 if isinstance(a.type, T.Array)))
            else:
                memo[v.id] = frozenset((v.id,))
        return memo[v.id]

    @staticmethod
    def _float_elementwise(op: Op) -> bool:
        """Whether prim `op` is arithmetic (`+ - * / **`, unary `-`/`+`) or a NumPy ufunc with a
        loop for doubles, of float or complex arrays (one at least; complex only for arithmetic)
        and numbers: NumPy computes it without raising, whatever the values (nan or inf, with a
        warning), once the shapes broadcast."""
        key = op.attrs["key"]
        arrays = [a.type for a in op.args if isinstance(a.type, T.Array)]
        if not arrays or not all(isinstance(a.type, (T.Array, T.Scalar)) for a in op.args):
            return False
        if key in ("add", "sub", "mul", "truediv", "pow", "neg", "pos"):
            return all(t.differentiable for t in arrays)
        fn = lookup(key).fn if key.startswith("numpy.") and lookup(key).elementwise else None
        return (isinstance(fn, np.ufunc) and fn.nin == len(op.args) and "d" * fn.nin + "->" + "d" * fn.nout in fn.types
                and all(t.dtype in ("float64", "float32") for t in arrays)
                and all(t.kind in ("f64", "f32", "int", "bool") for t in (a.type for a in op.args)
                        if isinstance(t, T.Scalar)))

    def _numpy_scalar(self, v: Value, chain: bool = True) -> bool:
        """Whether number `v` is at run time a NumPy scalar: the result of a reduction of an array,
        or arithmetic of numbers one of which is (`0.5 * np.sum(r * r)`: NumPy's scalar, whose
        division by zero is inf or nan with a warning, whichever side it is on)."""
        d = self.def_op.get(v.id)
        if d is None or d.kind != "prim":
            return False
        if lookup(d.attrs["key"]).array_safe:
            return any(isinstance(a.type, T.Array) for a in d.args)
        return (chain and d.attrs["key"] in ("add", "sub", "mul", "truediv", "neg", "pos")
                and all(isinstance(a.type, T.Scalar) for a in d.args)
                and any(self._numpy_scalar(a) for a in d.args))

    def _droppable_region(self, op: Op, live_vals: set, live_roots: set, unknown: bool) -> bool:
        """Whether a loop or branch has no effect anyone reads: none of its results is read
        afterwards, the forward sweep records nothing in it for the adjoint sweep (no cache, no
        trip count, no snapshot), every op inside is one `_droppable` would leave out at the
        top level and makes no memory with a shadow, and every value made inside that the
        adjoint sweep uses it writes itself (a constant, a loop index, a recomputed number)."""
        if any(r.id in live_vals for r in op.results):
            return False
        inner_ops = [op, *(inner for region in op.regions for inner in walk(region))]
        for inner in inner_ops:
            if (id(inner) in self.trips or self.plan.cache_at_loop.get(id(inner))
                    or self.plan.reserve_at_loop.get(id(inner))
                    or (inner is not op and (self.snap_pre.get(id(inner)) or self.snap_post.get(id(inner))))):
                return False
            made = [a for region in inner.regions for a in region.args]
            if inner is not op:
                made += inner.results
            for v in made:
                if v.id in live_vals and not v.is_const and v.id not in self.recomputed and not self._remat(v, "p"):
                    return False
                if (T.is_memory(v.type) and self.act.is_active(v)) or v.id in self.shape_needed:
                    return False
            if inner.kind in ("for", "while", "if", "condition", "yield"):
                if (inner is not op and not self.no_need and inner.kind in ("for", "while")
                        and not self._cannot_raise(inner)):
                    return False
                continue  # the ops of its regions are checked on their own
            if inner is not op and not self._droppable(inner, live_vals - {r.id for r in inner.results}, live_roots,
                                                       unknown):
                return False
        return True

    def _reads(self, op: Op, read) -> None:
        """`read(v[, contents])` for every value `op` reads (all of them inside its regions): the
        target of a store or of `out=` is written, not read; a view reads its base's value, not
        its contents."""
        k = op.kind
        if op.regions:
            for a in op.args:
                read(a)
            for region in op.regions:
                for inner in walk(region):
                    for a in inner.args:
                        read(a)
            return
        for j, a in enumerate(op.args):
            if k == "setitem" and j == 0:
                read(a, contents=isinstance(a.type, T.List))
            elif k == "prim" and "out" in op.attrs and j == op.attrs["out"] and not any(
                    b is a for i, b in enumerate(op.args) if i != j):
                read(a, contents=False)
            elif k == "getitem" and j == 0 and T.is_memory(op.result.type) and not indexing.is_advanced(op):
                read(a, contents=False)
            else:
                read(a)


def _shape_only_names(src: str) -> frozenset[str]:
    """The names `src` (statements) reads only for their shape or dtype: every mention is
    `x.shape` (`ndim`, `dtype`, `size`) or an argument a call reads only that way (a runtime
    helper's `shape_arg`, `runtime/registry.py`; NumPy's `_NP_SHAPE_ARGS`)."""
    tree = ast.parse("def _f():\n" + "".join(f"    {line}\n" for line in src.splitlines()) + "    pass\n")
    shape_uses: dict[str, int] = {}
    for node in pyast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _SHAPE_ATTRS and isinstance(node.value, ast.Name):
            shape_uses[node.value.id] = shape_uses.get(node.value.id, 0) + 1
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(
                node.func.value, ast.Name):
            module, name = node.func.value.id, node.func.attr
            at = shape_arg(name) if module == "_rt" else _NP_SHAPE_ARGS.get(name) if module == "np" else None
            arg = node.args[at] if at is not None and len(node.args) > at else None
            if isinstance(arg, ast.Name):
                shape_uses[arg.id] = shape_uses.get(arg.id, 0) + 1
    uses: dict[str, int] = {}
    for node in pyast.walk(tree):
        if isinstance(node, ast.Name):
            uses[node.id] = uses.get(node.id, 0) + 1
    return frozenset(name for name, k in shape_uses.items() if uses.get(name) == k)


def _names_a_dead_value(rev: DeadPrimal, src: str) -> bool:
    """Whether the program names a result of an op its forward sweep left out, or a value made
    inside a loop or branch it left out whole that the adjoint sweep does not write itself (a
    guard on `_dead_primal_ops`: every result's name is its own, so a mention is a use; a
    constant's is its literal)."""
    dead = [r for op in walk(rev.fn.body) if id(op) in rev.dead for r in op.results if not r.is_const]
    used = {vid for vid, _ in rev.needed}
    for op in rev.fn.body.ops:  # what a loop or branch left out whole made, unless the adjoint writes it
        if id(op) in rev.dead and op.regions:
            for region in op.regions:
                made = [*region.args, *(r for inner in walk(region) for r in inner.results),
                        *(a for inner in walk(region) for rg in inner.regions for a in rg.args)]
                dead += [v for v in made if not v.is_const and v.id not in used]
    return any(re.search(rf"(?<![\w.]){re.escape(rev.namer(r))}(?!\w)", src) for r in dead)
