"""Reverse mode: an augmented forward sweep, then an adjoint sweep.

Contract: `reverse(fn, act, seed_return)` writes a Python function

    def <name>_rev(<params>, <shadows of active memory params>[, seed]):
        <augmented forward: the primal, shadow views/allocations, caches>
        <adjoint sweep: the ops in reverse order, regions walked backwards>
        return (<results>,), (<adjoints of active float params>,)

Semantics (seed 002): the adjoint of a store `x[i] = v` adds `dx[i]` into the
adjoint of `v`, then sets `dx[i] = 0`; an `out=` call consumes and zeroes the
shadow of its output. Adjoints of floats are local variables; the adjoint of
an array is its shadow memory (so views accumulate into their base's shadow).

Caching: a value the adjoint sweep reads is used directly when it is defined
outside every loop (SSA values are never reassigned); a value defined inside a
loop is pushed on a per-value cache in the forward sweep and popped when the
adjoint sweep enters that block, so each cache holds exactly one entry per
execution of its definition. The contents of an array a rule reads are read in
place unless a later write may overwrite them (`analysis/overwrite.py`), in
which case they are copied before the op. `report()` says what was cached and
why. `for` loops run backwards over the same
range, `while` loops replay their recorded trip count, `if` replays its
condition.

Batch mode (`width` W > 1): one augmented forward sweep (the primal and its
caches, once) and one adjoint sweep in which every adjoint statement is written
once per lane; shadows, adjoints and seeds come per lane (`dx_1`, ..., `dx_W`),
and the function returns one tuple of adjoints per lane.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..analysis.activity import Activity
from ..analysis.bounds import NeverUnsigned
from ..analysis.extents import Extents
from ..analysis.overwrite import Overwrites
from ..analysis.shapes import FixedShapes
from ..ir import types as T
from ..ir.core import Block, Function, Op, Value, walk
from ..rules import indexing
from ..rules.registry import lookup, uses
from .emit import Emitter, assign_all, range_args, span, trip_count, zero
from .naming import Namer
from .writer import Writer, splice

if TYPE_CHECKING:
    from ..codegen.fuse import ShadowFacts


_CHEAP = {"add", "sub", "mul", "truediv", "floordiv", "mod", "neg"}  # recomputed rather than cached
# reductions that never raise on a float array (an empty one gives 0, 1 or nan): not max/min
_NEVER_RAISING_REDUCTIONS = frozenset({"numpy.sum", "numpy.mean", "numpy.prod"})
_TOP_REMAT_OPS = 3  # the most operations a top-level temporary is recomputed with (`_top_remat`)


class Reverse:
    def __init__(self, fn: Function, act: Activity, seed_return: bool, width: int = 1, dims=None,
                 internal: frozenset = frozenset(), no_need: frozenset = frozenset(), need_return: bool = True,
                 numba: bool = False):
        self.fn, self.act, self.seed_return = fn, act, seed_return
        # parameters whose primal contents the caller does not need after the call
        # (`DuplicatedNoNeed`), and whether it needs the primal return value (`_dead_primal_ops`)
        self.no_need, self.need_return = no_need, need_return
        self.numba = numba  # the program computes as Numba does (no bounds checks, no math domain errors)
        self.dead: set[int] = set()  # top-level primal ops the forward sweep leaves out
        self.internal = internal  # parameter indices whose shadows are zeros at entry (`zero_shadows`)
        self.extents = Extents(fn, dims)  # which adjoints need no sum over broadcast dimensions
        self.namer = Namer()
        self.namer.width = width
        self.e = Emitter(self.namer, Writer())
        self.depth: dict[int, int] = {}       # block id -> loop depth
        self.def_block: dict[int, Block] = {}  # value id -> defining block
        self.needed: set[tuple[int, str]] = set()  # (value id, "p" | "d") read by the adjoint sweep
        self.values: dict[int, Value] = {}
        self.snap_pre: dict[int, list[tuple[Value, Value]]] = {}   # op id -> [(snapshot, of)]
        self.snap_post: dict[int, list[tuple[Value, Value]]] = {}
        self.trips: dict[int, Value] = {}      # while op id -> trip count value
        self.recomputed: set[int] = set()      # loop induction variables
        self.adj_used: set[int] = set()
        self.adjoint_names: dict[str, set[str]] = {"float": set(), "memory": set()}  # `float_adjoints`
        self.ints: set[str] = set()  # cache counters and recorded extents (`int_names`)
        self.buffers: set[str] = set()  # caches that are arrays (`nonneg_facts`)
        self.counters: set[str] = set()  # their entry counters, never negative
        self.blocks_of_op: dict[int, Block] = {}
        self.why: dict[int, tuple] = {}        # snapshot id -> (op, array, writer, after op?)
        self.def_op: dict[int, Op] = {}        # value id -> the op (or loop) that defines it
        self.never_unsigned = NeverUnsigned(fn)  # ints a reversed loop may use as they are
        self.overwrites = Overwrites(fn, act)
        self.shapes = FixedShapes(fn)
        self.shape_needed: set[int] = set()    # values whose shape the adjoint sweep reads
        self.loop_trips: dict[int, str] = {}   # top-level for op id -> its trip count's name
        # decisions taken once (they must not change while the program is written)
        self._cheap_memo: dict[int, bool] = {}   # op id -> recompute its array result
        self._remat_memo: dict[int, bool] = {}   # value id -> number recomputed, not cached
        self._alloc_memo: dict[int, bool] = {}   # value id -> shadow allocated in the adjoint sweep
        self._lazy_memo: dict[int, bool] = {}    # value id -> shadow created by the adjoint sweep
        self._loop_lazy_memo: dict[int, bool] = {}  # value id -> loop temporary whose shadow may be (`_loop_lazy`)
        self._uniform_memo: dict[int, bool] = {}  # value id -> its adjoint is one number (`_uniform`)
        self._top_memo: dict[int, bool] = {}  # value id -> recomputed at the top level (`_top_remat`)
        # shadows of temporaries outside loops, created by the adjoint sweep (see `_lazy`):
        # (value id, lane) -> how the adjoint sweep referred to them, in order
        self.lazy_refs: dict[tuple[int, int], list] = {}
        self.deferred: set[int] = set()  # temporaries whose adjoint keeps its use's shape
        self.whole: set[tuple[int, str]] = set()  # (value id, adjoint term) known to have its shape
        self.deferred_to: dict[int, Any] = {}  # deferred temporary id -> its use's result (or store op)
        self._readers: dict[int, int] | None = None
        self._by_name: dict[str, Any] | None = None  # shadow name -> its value (`same_shape`)
        self.at_top = False
        self.checkpoints: dict[int, Any] = {}  # loop op id -> its `checkpoint.Checkpoint` (memory limit)
        self.while_header: dict[int, str] = {}  # while op id -> the header a checkpoint runs it by
        self._index(fn.body, 0)
        for p in fn.params:
            self.def_block[p.id] = fn.body
            self.values[p.id] = p

    # -- bookkeeping ----------------------------------------------------------
    def _index(self, block: Block, depth: int) -> None:
        self.depth[id(block)] = depth
        for a in block.args:
            self.def_block[a.id] = block
            self.values[a.id] = a
        for op in block.ops:
            self.blocks_of_op[id(op)] = block
            for r in op.results:
                self.def_block[r.id] = block
                self.values[r.id] = r
                self.def_op[r.id] = op
            for region in op.regions:
                for a in region.args:
                    self.def_op[a.id] = op
            inner = depth + 1 if op.kind in ("for", "while") else depth
            for region in op.regions:
                self._index(region, inner)
            if op.kind == "for":
                self.recomputed.add(op.regions[0].args[0].id)

    def use(self, v: Value) -> str:
        """Name of primal `v` in the adjoint sweep (recording that it is needed)."""
        self.needed.add((v.id, "p"))
        return self.namer(v)

    def use_d(self, v: Value, how: tuple = ("other",)) -> str:
        """Name of the shadow of memory value `v` in the adjoint sweep (`how` it is used,
        recorded for the shadows the adjoint sweep creates)."""
        self.needed.add((v.id, "d"))
        if self._lazy(v) or self._loop_lazy(v):
            self.lazy_refs.setdefault((v.id, self.namer.lane), []).append(how)
        name = self.namer.d(v)
        self.adjoint_names["memory"].add(name)
        return name

    def adj(self, v: Value) -> str:
        """Name of the adjoint of float `v`."""
        self.adj_used.add(v.id)
        name = self.namer.d(v)
        self.adjoint_names["float"].add(name)
        return name

    def float_adjoints(self) -> frozenset[str]:
        """The names that hold only adjoints of floats (never a shadow): Numba's in-place
        elementwise statements (`numba_.elementwise_statements`) pass them over."""
        return frozenset(self.adjoint_names["float"] - self.adjoint_names["memory"])

    def nonneg_facts(self) -> tuple[frozenset[str], frozenset[str]]:
        """(The caches that are arrays, their entry counters): a counter indexes its cache at
        entries `0 ..` only, never negative (`numba_.nonneg_indices`)."""
        return frozenset(self.buffers), frozenset(self.counters)

    def int_names(self) -> frozenset[str]:
        """Names the program starts at 0 that only ever hold ints: the caches' entry counters
        (`_k_... = 0`, then `+= 1` and `-= 1`) and the extents of arrays the adjoint sweep
        allocates (`_shape_..._0 = 0`, then `= a.shape[0]`). The Numba backend declares them
        `intp` (`codegen/numba_.compile_numba`)."""
        return frozenset(self.ints)

    def accumulate(self, w: Writer, v: Value, expr: str, fresh: bool = False) -> None:
        """`adjoint(v) += expr`; `fresh`: `expr` is an array nothing else writes later, so it
        may become the shadow of a temporary the adjoint sweep creates here."""
        if T.is_memory(v.type):
            if self._loop_lazy(v):  # resolved at the end of its block (`_resolve_loop_lazy`)
                how: tuple = ("acc", w, len(w.lines), expr, fresh, w.depth)
            else:
                how = ("acc", w, len(w.lines), expr) if fresh and self.at_top else ("other",)
            w(f"{self.use_d(v, how)} += {expr}")
        else:
            w(f"{self.adj(v)} += {expr}")

    def contents(self, op: Op, v: Value, post: bool = False) -> str:
        """The contents of array `v` as the op saw them: `v` itself when nothing may
        overwrite them before the adjoint sweep reads them, else a copy (`_saved_v`); at the
        top level, a cheap temporary's expression (`_top_remat`)."""
        if not isinstance(v.type, T.Array):
            return self.use(v)
        if not post and self.at_top and self._top_remat(v):
            return self._top_remat_expr(v)
        writer = self.overwrites.first_writer(op, v, include_self=not post)
        if writer is None:
            return self.use(v)
        table = self.snap_post if post else self.snap_pre
        for snap, of in table.get(id(op), []):
            if of is v:
                return self.use(snap)
        snap = Value(v.type, f"_saved_{v.hint}")
        self.values[snap.id] = snap
        self.def_block[snap.id] = self.blocks_of_op[id(op)]
        table.setdefault(id(op), []).append((snap, v))
        self.why[snap.id] = (op, v, writer, post)
        return self.use(snap)

    # -- entry ------------------------------------------------------------------
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
        for k in active_scalars:
            self.adj_used.add(fn.params[k].id)
        # the adjoint sweep first: it decides what the forward sweep must record
        rev = self.rev_block(fn.body, top=True)
        self._plan_caches()
        if (self.no_need or not self.need_return) and not split:
            self.dead = self._dead_primal_ops(_shape_only_names(rev.source()))
        fwd = Writer()
        for v, role in self.cache_at_start:
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
            name = n.fresh(f"{fn.name}_rev")
            with w.indent(f"def {name}({', '.join(params + ([seed] if seed else []))}):"):
                splice(w, fwd)
                w("# adjoint sweep")
                splice(w, rev)
                w(f"return {rets}, {adjs}")
            return w.source(), [name], shadow_params + active_scalars
        # split mode: the forward sweep returns a tape of everything the adjoint sweep reads
        also = {x for ck in self.checkpoints.values() for x in ck.tape_names(self)}  # `checkpoint.py`
        tape = self.tape_slots + sorted(
            _free_names(rev, fwd, also) - set(self.tape_slots) - set(params) - set(self.seeds))
        self.tape_names = tape
        tup = ", ".join(tape) + ("," if len(tape) == 1 else "")
        aug = n.fresh(f"{fn.name}_augmented")
        assert self.tape_in is not None  # split mode
        with w.indent(f"def {aug}({', '.join(params + [self.tape_in])}):"):
            late = [t for t in tape if t not in self.tape_slots or t in also]
            # names a branch or loop may leave unassigned still go on the tape; a zero of
            # their type where it is known (Numba types a variable once)
            for init in sorted({n.typed_zero.get(t, "None") for t in late}):
                w(" = ".join(t for t in late if n.typed_zero.get(t, "None") == init) + f" = {init}")
            splice(w, fwd)
            w(f"return {rets}, ({tup})")
        w("")
        name = n.fresh(f"{fn.name}_rev")
        # the tape's items come as arguments, not one tuple: Numba's dispatcher types a tuple
        # that holds typed lists in Python, 80 us a call, against 4 for the items themselves
        with w.indent(f"def {name}({', '.join(params + ([seed] if seed else []) + tape)}):"):
            splice(w, rev)
            w(f"return {adjs}")
        return w.source(), [aug, name], shadow_params + active_scalars

    def shadow_roots(self) -> dict[str, frozenset | None]:
        """Every name the program gives a shadow or an adjoint, with the memory roots it may
        point into (`codegen/fuse.py` merges accumulations by these facts): an array or list
        shadow mirrors its primal's roots (None where they are unknown), a float adjoint points
        into no memory (an empty set). Names not listed (primal values, copies, caches) never
        refer to shadow memory."""
        out: dict[str, frozenset | None] = {}
        for name, v in self._shadow_values().items():
            if v is not None and not T.is_memory(v.type):
                out[name] = frozenset()
            else:
                out[name] = (self.act.roots.get(v.id) if v is not None else None) or None
        return out

    def _shadow_values(self) -> dict[str, Value | None]:
        """Every shadow or adjoint name (each batch lane's), with the value it belongs to."""
        if self._by_name is None:
            self._by_name = {name: self.values.get(vid) for (vid, role), name in self.namer.values.items()
                             if role == "d" or role.startswith("d#")}
        return self._by_name

    def fuse_facts(self) -> ShadowFacts:
        """What `codegen/fuse.py` may rely on about this program's shadows."""
        from ..codegen.fuse import ShadowFacts

        return ShadowFacts(self.shadow_roots(), self.zero_shadows(), self.same_shape)

    def same_shape(self, a: str, b: str) -> bool:
        """Whether shadow names `a` (a parameter's) and `b` hold arrays of one shape: never a
        one-number adjoint (`_uniform`), and for a deferred temporary's adjoint the shape it
        keeps (`_adjoint_shape`). Equal sizes of two parameters count under a guard."""
        va, vb = self._shadow_values().get(a), self._shadow_values().get(b)
        if va is None or vb is None or not (isinstance(va.type, T.Array) and isinstance(vb.type, T.Array)):
            return False
        if va.id in self.deferred or self._uniform(va) or self._uniform(vb):
            return False
        return self.extents.fits(va, self._adjoint_shape(vb))

    def zero_shadows(self) -> frozenset:
        """The names of the shadows that are zeros when the program starts: those of the
        parameters in `internal` (`Const` memory that receives active data, whose shadow zymo
        allocates and zeroes for every call); none in split mode, where the reverse runs after
        a forward sweep of its own."""
        if self.split:
            return frozenset()
        out = set()
        for k in self.internal:
            p = self.fn.params[k]
            if T.is_memory(p.type) and self.act.is_active(p):
                for _ in self.namer.lanes():
                    out.add(self.namer.d(p))
        return frozenset(out)

    def _cached(self, v: Value) -> bool:
        """Whether `v` needs a per-iteration cache: defined in a loop, and not a constant
        (a constant's variable holds the same value in every iteration)."""
        return (v.id not in self.recomputed and not v.is_const
                and self.depth[id(self.def_block[v.id])] > 0)

    def _remat(self, v: Value, role: str) -> bool:
        """Whether the shadow of view/list item `v` is recomputed in the adjoint sweep
        (`dmat = dmat_vec[i]`) instead of cached: true unless a list store may rebind the
        item it was read from."""
        if not self._cached(v):
            return False
        op = self.def_op.get(v.id)
        if op is None or op.kind not in ("getitem", "prim") or op.result is not v:
            return False
        if role == "d" and self._adjoint_alloc(v):
            return True
        if role == "p":
            # a number loaded from memory that nothing overwrites later is re-read, and cheap
            # arithmetic on such loads, constants, loop indices and numbers the adjoint sweep
            # restores anyway is recomputed, not cached. Decided once: the answer depends on
            # what is already restored, which grows while the adjoint sweep is written.
            memo = self._remat_memo.get(v.id)
            if memo is None:
                memo = self._remat_memo[v.id] = self._recomputable(v, 8, top=True)
            return memo
        if op.kind == "getitem":
            base = op.args[0]
            if indexing.is_advanced(op):
                return False  # a copy's shadow is its own memory: cached, not re-derived
            if isinstance(base.type, T.List):
                roots = self.act.roots.get(base.id)
                for o in walk(self.fn.body):
                    if o.kind == "setitem" and isinstance(o.args[0].type, T.List) and (
                            not roots or self.act.roots.get(o.args[0].id, roots) & roots):
                        return False
            return True
        return op.kind == "prim" and lookup(op.attrs["key"]).view

    def _restored(self, v: Value) -> bool:
        """Whether number `v`, cached, is restored (or recomputed) by the adjoint sweep anyway:
        at the head of its block's reversed iteration, before anything there reads it."""
        return self._cached(v) and isinstance(v.type, T.Scalar) and (v.id, "p") in self.needed

    def _recomputable(self, v: Value, budget: int, top: bool = False) -> bool:
        """Whether scalar `v` can be recomputed in the adjoint sweep from values live there,
        with at most `budget` operations: loads of memory nothing overwrites later (elements
        no later store reaches: `Overwrites.first_element_writer`), numbers the adjoint sweep
        restores anyway (`_restored`; not `v` itself, `top`), the extents of arrays it has,
        and arithmetic (+ - * / // % and negation) on such values."""
        if not self._cached(v) or (not top and self._restored(v)):
            return True
        op = self.def_op.get(v.id)
        if budget <= 0 or op is None or op.kind not in ("getitem", "prim") or op.results != [v]:
            return False
        if isinstance(v.type, T.Array):
            if op.kind == "prim" and op.attrs["key"] in _CHEAP and "out" not in op.attrs:
                return self._cheap_array(op, budget)
            # a view is the same memory however often it is taken: recompute it from its base
            if op.kind == "getitem" and not _basic_index(op):
                return False
            if op.kind == "prim" and (not lookup(op.attrs["key"]).view or "out" in op.attrs):
                return False
            return all(self._recomputable(a, budget - 1) for a in op.args)
        if not isinstance(v.type, T.Scalar):
            return False
        if op.kind == "getitem":
            base = op.args[0]
            if not isinstance(base.type, T.Array) or self._cached(base):
                return False
            if self.overwrites.first_element_writer(op) is not None:
                return False
            return all(self._recomputable(a, budget - 1) for a in op.args[1:])
        if op.kind == "prim" and op.attrs["key"] in _CHEAP and "out" not in op.attrs:
            return all(self._recomputable(a, budget - 1) for a in op.args)
        if op.kind == "prim" and op.attrs["key"] == "zymo.dim":
            # an array's shape never changes: read it again from an array the sweep still has
            return all(not self._cached(a) for a in op.args)
        return False

    def _cheap_array(self, op: Op, budget: int) -> bool:
        """Whether the array result of cheap arithmetic `op` (`q * q`) is recomputed in the
        adjoint sweep rather than cached: its scalar operands are recomputable, and the
        contents its array operands had are there without a new copy (read in place, or a
        copy the adjoint sweep already reads). Decided once per op."""
        memo = self._cheap_memo.get(id(op))
        if memo is None:
            snaps = {of.id for _, of in self.snap_pre.get(id(op), [])}
            memo = all(
                (a.id in snaps or self.overwrites.first_writer(op, a, include_self=True) is None)
                if isinstance(a.type, T.Array) else
                (isinstance(a.type, T.Scalar) and self._recomputable(a, budget - 1))
                for a in op.args)
            self._cheap_memo[id(op)] = memo
        return memo

    def _recompute(self, v: Value, top: bool = False) -> str:
        """The expression recomputing `v` (see `_recomputable`)."""
        if not self._cached(v) or (not top and self._restored(v)):
            return self.use(v)
        op = self.def_op[v.id]
        if op.kind == "getitem":
            return f"{self._recompute(op.args[0])}[{self.e.index(op, self._recompute)}]"
        if isinstance(v.type, T.Array) and op.attrs["key"] in _CHEAP:
            def name(a: Value) -> str:
                return self.contents(op, a) if isinstance(a.type, T.Array) else self._recompute(a)
            return f"({self.e.call(op, with_out=False, name=name)})"
        return f"({self.e.call(op, with_out=False, name=self._recompute)})"

    def _top_remat(self, v: Value) -> bool:
        """Whether array `v` is recomputed where the top level of the adjoint sweep reads it
        instead of kept from the forward sweep: a temporary of the function's body (outside
        loops and branches), the result of cheap arithmetic (`_CHEAP`, no `out=`) read once by
        the primal and never written, on numbers and on arrays whose contents nothing writes
        later (an operand that is such a temporary is recomputed in turn; at most
        `_TOP_REMAT_OPS` operations in all). The forward sweep then writes it into its one reader
        (`codegen/fuse.py`) and the adjoint's expression computes it in its own pass (under
        Numba one fused loop, no array kept between the sweeps). Decided once per value."""
        memo = self._top_memo.get(v.id)
        if memo is None:
            # only under Numba: there the recomputation fuses into the adjoint's loop; in the
            # Python backend it would be whole-array passes again (the logistic loss's
            # `logaddexp - y * z` recomputed for the shape of its sum's adjoint)
            memo = self._top_memo[v.id] = self.numba and 0 < self._top_ops(v) <= _TOP_REMAT_OPS
        return memo

    def _top_ops(self, v: Value) -> int:
        """The operations recomputing `v` takes (0: `v` is not such a temporary)."""
        if not isinstance(v.type, T.Array) or self.def_block.get(v.id) is not self.fn.body:
            return 0
        op = self.def_op.get(v.id)
        if (op is None or op.kind != "prim" or op.results != [v] or op.attrs["key"] not in _CHEAP
                or "out" in op.attrs or self.overwrites.first_writer(op, v) is not None):
            return 0
        if self._count_readers().get(v.id) != 1:
            return 0
        n = 1
        for a in op.args:
            if isinstance(a.type, T.Array):
                if self.overwrites.first_writer(op, a, include_self=True) is not None:
                    return 0
                n += self._top_ops(a) if self._top_remat(a) else 0
            elif not isinstance(a.type, T.Scalar):
                return 0
        return n

    def _top_remat_expr(self, v: Value) -> str:
        op = self.def_op[v.id]

        def name(a: Value) -> str:
            return self._top_remat_expr(a) if isinstance(a.type, T.Array) and self._top_remat(a) else self.use(a)
        return f"({self.e.call(op, with_out=False, name=name)})"

    def _remat_expr(self, v: Value, role: str = "d") -> str:
        op = self.def_op[v.id]
        base = op.args[0]
        if role == "d" and self._adjoint_alloc(v):
            if (v.id, "p") in self.needed:
                return f"np.zeros_like({self.use(v)})"
            self.shape_needed.add(v.id)
            return f"np.zeros({self._shape_expr(v)}, np.{cast(T.Array, v.type).dtype})"
        if role == "p":
            expr = self._recompute(v, top=True)
            return expr[1:-1] if op.kind == "prim" else expr
        if op.kind == "getitem":
            return f"{self.use_d(base)}[{self.e.index(op, self.use)}]"
        rule = lookup(op.attrs["key"])
        return self.e.rule_expr(rule, "jvp", rule.diff_params()[0], self.use_d(base), None, op, name=self.use)

    def _adjoint_alloc(self, v: Value) -> bool:
        """Whether the shadow of loop temporary `v` is allocated in the adjoint sweep, where it
        is used, instead of in the forward sweep and cached: `v` is a fresh array (not a view,
        not an `out=` buffer) with a fixed shape, and nothing in the forward sweep refers to
        its shadow (no view of `v`, no list holding it, not carried out of its block)."""
        memo = self._alloc_memo.get(v.id)
        if memo is None:
            memo = self._alloc_memo[v.id] = self._adjoint_alloc_uncached(v)
        return memo

    def _adjoint_alloc_uncached(self, v: Value) -> bool:
        return self._cached(v) and self.shapes.fixed(v) and self._private_temporary(v)

    def _made_by_adjoint(self, v: Value) -> bool:
        """Whether loop temporary `v`'s shadow is one the forward sweep need not allocate: the
        adjoint sweep never restores it (not `needed`: it writes the shadow before any read,
        as a first accumulation or a reduction's adjoint kept as a number) and nothing in the
        forward sweep refers to it (`_private_temporary`). Known only once the adjoint sweep
        is written, as the forward sweep is."""
        return self._cached(v) and (v.id, "d") not in self.needed and self._private_temporary(v)

    def _lazy(self, v: Value) -> bool:
        """Whether `v` is a temporary of the function's body (outside every loop and branch) whose shadow the
        adjoint sweep creates: `dt = <first adjoint>` when a single accumulation at the top level reaches
        it, else zeros at the start of the adjoint sweep (never in the forward sweep)."""
        memo = self._lazy_memo.get(v.id)
        if memo is None:
            memo = (not self._cached(v) and v.id in self.def_op
                    and self.def_block[v.id] is self.fn.body and self._private_temporary(v))
            self._lazy_memo[v.id] = memo
        return memo

    def _loop_lazy(self, v: Value) -> bool:
        """Whether `v` is a temporary of a loop body whose shadow the adjoint sweep may create
        where its first contribution is written (`_resolve_loop_lazy`): a fresh active array
        defined in a block inside a loop (`_private_temporary`: nothing in the forward sweep
        refers to its shadow), every reader of which is an op of that same block, so that
        every contribution to its adjoint is a statement of that block's reversed body."""
        memo = self._loop_lazy_memo.get(v.id)
        if memo is None:
            block = self.def_block.get(v.id)
            memo = (v.id in self.def_op and self._cached(v) and isinstance(v.type, T.Array) and v.type.ndim > 0
                    and self._private_temporary(v)
                    and all(self.blocks_of_op[id(o)] is block
                            for o in walk(self.fn.body) if any(a is v for a in o.args)))
            self._loop_lazy_memo[v.id] = memo
        return memo

    def _private_temporary(self, v: Value) -> bool:
        """`v` is a fresh active array (not a view, not an `out=` buffer) whose shadow nothing
        in the forward sweep refers to (no view of `v`, no list holding it, no carry)."""
        if not (isinstance(v.type, T.Array) and self.act.is_active(v)):
            return False
        op = self.def_op.get(v.id)
        if op is None or op.kind != "prim" or op.results != [v] or "out" in op.attrs:
            return False
        rule = lookup(op.attrs["key"])
        if rule.view or rule.maybe_view:
            return False
        for o in walk(self.fn.body):
            if not any(a is v for a in o.args):
                continue
            if o.kind == "prim":
                r = lookup(o.attrs["key"])
                if r.view or r.maybe_view:
                    return False
            elif o.kind == "getitem":
                if o.args[0] is v and T.is_memory(o.result.type):
                    return False
            elif o.kind == "setitem":
                if o.args[1] is v and not isinstance(o.args[0].type, T.Array):
                    return False
            else:
                return False  # carried by a loop, yielded by a branch, returned
        return True

    def _shape_name(self, v: Value, d: int) -> str:
        """The int recording extent `d` of the (fixed) shape of `v` in the forward sweep (set
        to 0 at the start, so the name exists wherever the adjoint sweep reads it; a number,
        not an int array: an array cost Numba a compile of `np.zeros` per program)."""
        return self.namer.role(v, f"shape{d}", f"_shape_{v.hint.lstrip('$')}_{d}")

    def _shape_expr(self, v: Value) -> str:
        dims = [self._shape_name(v, k) for k in range(cast(T.Array, v.type).ndim)]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def _stackable(self, v: Value) -> bool:
        """Whether array `v` (a value the adjoint sweep reads) can be cached by copying it into
        a row of a stacked buffer: its shape is fixed, and its contents cannot change after it
        is recorded (a fresh result nothing writes later, or a snapshot), and nothing asks
        whether it is a view."""
        if v.id in self.why:
            return self.shapes.fixed(self.why[v.id][1])
        op = self.def_op.get(v.id)
        if op is None or op.kind != "prim" or op.results != [v] or not self.shapes.fixed(v):
            return False
        rule = lookup(op.attrs["key"])
        if rule.view or rule.maybe_view or self.overwrites.first_writer(op, v) is not None:
            return False
        return not any(o.kind == "prim" and lookup(o.attrs["key"]).maybe_view and o.args and o.args[0] is v
                       for o in walk(self.fn.body))

    def _cache_name(self, v: Value, role: str) -> str:
        """The cache of `v` (role "p") or of its shadow in the current lane (role "d")."""
        if role == "p":
            return self.namer.cache(v)
        return self.namer.lane_role(v, "dcache", "_cache_d" + v.hint.lstrip("$"))

    def _lanes_of(self, role: str):
        """The lanes a role comes in: the primal once, a shadow once per lane."""
        return self.namer.lanes() if role == "d" else (0,)

    def _counter(self, v: Value) -> str:
        return self.namer.role(v, "k", "_k_" + v.hint.lstrip("$"))

    def _plan_caches(self) -> None:
        """Where each cache is allocated. A float/int/bool cache is a NumPy buffer with a
        counter (one entry per iteration of its loop at most). When its loop is a `for` in a
        nest of `for` loops whose trip counts are known at the outermost one's entry
        (`_nest`), room for the whole nest (the product of the trip counts) is made there:
        the buffer is allocated there when that loop is outside every other loop, and
        otherwise allocated at the start and grown there. In any other case it is allocated
        at the start and grows geometrically, checked per entry. With the exact size, gmm's
        gradient runs 8% faster than when it grew at each inner loop's entry: that check (a
        branch that may rebind the buffer) was in the loop nest (same-process A/B). An array
        whose rows all have one shape is copied into a stacked buffer ("stack",
        `(entries, *shape)`), allocated like the scalar buffers; other array caches, and
        cached shadows (their identity matters), are Python lists."""
        self.cache_at_start: list[tuple[Value, str]] = []
        self.cache_at_loop: dict[int, list[tuple[Value, str]]] = {}
        self.reserve_at_loop: dict[int, list[tuple[Value, str]]] = {}  # grow caches of nested for loops
        self.reserved: set[str] = set()
        self.tape_slots: list[str] = []  # the caches, first in a split-mode tape
        for (vid, role) in sorted(self.needed):
            v = self.values[vid]
            if not self._cached(v) or self._remat(v, role):
                continue
            for _ in self._lanes_of(role):
                self.tape_slots.append(self._cache_name(v, role))
            kind = self._kind(v, role)
            if kind == "prealloc":
                self.cache_at_loop.setdefault(id(self._nest(v)[0]), []).append((v, role))
            elif kind == "stack" and self._top_for(v):
                self.cache_at_loop.setdefault(id(self._loop_of(self.def_block[vid])), []).append((v, role))
            else:
                self.cache_at_start.append((v, role))
                if kind == "grow" and self._nest(v):
                    # room for the whole nest is made at its entry, not checked per iteration
                    self.reserve_at_loop.setdefault(id(self._nest(v)[0]), []).append((v, role))
                    self.reserved.add(self._cache_name(v, role))

    def _kind(self, v: Value, role: str) -> str:
        """"list", "stack" (arrays of one shape), "prealloc" (once, at its top-level for loop's
        entry) or "grow"."""
        if role == "p" and isinstance(v.type, T.Array) and self._stackable(v):
            return "stack"
        if role == "d" or not isinstance(v.type, T.Scalar):
            return "list"
        nest = self._nest(v)
        return "prealloc" if nest and self.depth[id(self.blocks_of_op[id(nest[0])])] == 0 else "grow"

    def _nest(self, v: Value) -> list[Op]:
        """The `for` loops around `v`'s definition whose trip counts are all known at the
        entry of the outermost of them, outermost first: `v`'s own loop (when a `for`), then
        each `for` around them while their bounds are constants or defined outside it.
        Empty when `v`'s loop is not a `for`."""
        loop = self._loop_of(self.def_block[v.id])
        if loop is None or loop.kind != "for":
            return []
        nest = [loop]
        while True:
            outer = self._loop_of(self.blocks_of_op[id(nest[0])])
            if outer is None or outer.kind != "for" or any(
                    not b.is_const and self._inside(self.def_block[b.id], outer)
                    for inner in nest for b in inner.args[:3]):
                return nest
            nest.insert(0, outer)

    def _inside(self, block: Block, op: Op) -> bool:
        """Whether `block` is one of `op`'s regions or nested in one."""
        owner = self.overwrites.block_owner.get(id(block))
        while owner is not None:
            if owner is op:
                return True
            owner = self.overwrites.parent[id(owner)][0]
        return False

    def _nest_trips(self, v: Value, trips: str) -> str:
        """The entries `v`'s cache gets in one run of its nest (`_nest`), at the outermost
        loop's entry, whose own trip count is `trips`."""
        inner = [trip_count(*(self.namer(b) for b in loop.args[:3])) for loop in self._nest(v)[1:]]
        return " * ".join([trips, *inner])

    def _top_for(self, v: Value) -> bool:
        """Whether `v` is defined in a `for` loop (directly) that is outside every other loop."""
        loop = self._loop_of(self.def_block[v.id])
        return loop is not None and loop.kind == "for" and self.depth[id(self.blocks_of_op[id(loop)])] == 0

    def _loop_of(self, block: Block) -> Op | None:
        """The nearest loop op around `block`."""
        owner = self.overwrites.block_owner.get(id(block))
        while owner is not None and owner.kind not in ("for", "while"):
            owner = self.overwrites.parent[id(owner)][0]
        return owner

    def _alloc_cache(self, w: Writer, v: Value, role: str, trips: str | None) -> None:
        kind = self._kind(v, role)
        if kind == "list":
            for _ in self._lanes_of(role):
                name = self._cache_name(v, role)
                slot = self.tape_slots.index(name)
                w(f"{name} = _rt.reuse_list({self.tape_in}, {slot})" if self.split else f"{name} = []")
            return
        name = self._cache_name(v, role)
        slot = self.tape_slots.index(name)
        self.buffers.add(name)
        self.counters.add(self._counter(v))
        if kind == "stack":  # rows get their shape from the first entry; a tape is not reused
            arr = cast(T.Array, v.type)
            w(f"{name} = np.empty({(0,) * (arr.ndim + 1)}, np.{arr.dtype})")
            w(f"{self._int(self._counter(v))} = 0")
            return
        dtype = {"f64": "np.float64", "f32": "np.float32", "c128": "np.complex128", "c64": "np.complex64",
                 "int": "np.int64", "bool": "np.bool_"}[cast(T.Scalar, v.type).kind]
        size = trips if kind == "prealloc" else 16
        if self.split:  # a tape passed back in is reused when its buffer is big enough
            w(f"{name} = _rt.reuse_buffer({self.tape_in}, {slot}, {size}, {dtype})")
        else:
            w(f"{name} = np.empty({size}, {dtype})")
        w(f"{self._int(self._counter(v))} = 0")

    def _int(self, name: str) -> str:
        """`name`, recorded as one that only ever holds ints (`int_names`; a split-mode tape
        that carries it starts it at 0)."""
        self.ints.add(name)
        self.namer.typed_zero[name] = "0"
        return name

    # -- augmented forward sweep --------------------------------------------------
    def _record(self, w: Writer, v: Value, src: str | None = None) -> None:
        """Push `v` (or, for a stacked cache, the array `src` holding its contents) on its caches."""
        if not self._cached(v):
            return
        for role in ("p", "d"):
            if (v.id, role) in self.needed and not self._remat(v, role):
                kind = self._kind(v, role)
                if kind == "list":
                    for _ in self._lanes_of(role):
                        name = self.namer(v) if role == "p" else self.namer.d(v)
                        w(f"{self._cache_name(v, role)}.append({name})")
                    continue
                name = src or self.namer(v)
                cache = self._cache_name(v, role)
                k = self._counter(v)
                if kind == "stack":
                    loop = self._loop_of(self.def_block[v.id])
                    need = self.loop_trips.get(id(loop), f"{k} + 1") if self._top_for(v) else f"{k} + 1"
                    with w.indent(f"if {k} == {cache}.shape[0]:"):
                        w(f"{cache} = _rt.grow_stack({cache}, {name}, {need})")
                elif kind == "grow" and cache not in self.reserved:
                    with w.indent(f"if {k} == {cache}.shape[0]:"):
                        w(f"{cache} = _rt.grow({cache}, 0)")
                w(f"{cache}[{k}] = {name}")
                w(f"{k} += 1")

    def _restore(self, w: Writer, v: Value, role: str) -> None:
        if self._kind(v, role) == "list":
            for _ in self._lanes_of(role):
                name = self.namer(v) if role == "p" else self.namer.d(v)
                w(f"{name} = {self._cache_name(v, role)}.pop()")
        else:
            k = self._counter(v)
            w(f"{k} -= 1")
            w(f"{self.namer(v)} = {self._cache_name(v, role)}[{k}]")

    def fwd_block(self, block: Block, w: Writer) -> None:
        for a in block.args:
            self._record(w, a)
        for op in block.ops:
            for snap, of in self.snap_pre.get(id(op), []):
                self._snapshot(w, snap, of)
            self.fwd_op(op, w, primal=id(op) not in self.dead)
            for snap, of in self.snap_post.get(id(op), []):
                self._snapshot(w, snap, of)
            for r in op.results:
                self._record(w, r)
            if id(op) in self.trips:
                self._record(w, self.trips[id(op)])

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
        for op in reversed(body[:-1] if body and body[-1].kind == "return" else body):
            for _snap, of in self.snap_post.get(id(op), []):
                read(of)
            if self._droppable(op, live_vals, live_roots, unknown[0]):
                dead.add(id(op))
                if op.kind == "getitem" and T.is_memory(op.result.type) and self.act.is_active(op.result):
                    for v in op.args[1:]:  # the shadow view is still taken, at the same index
                        read(v)
            else:
                self._reads(op, read)
            for _snap, of in self.snap_pre.get(id(op), []):
                read(of)
        return dead

    def _droppable(self, op: Op, live_vals: set, live_roots: set, unknown: bool) -> bool:
        """Whether top-level `op` has no effect anyone reads (`_dead_primal_ops`)."""
        act, k = self.act, op.kind
        if not self.no_need and not self._cannot_raise(op):  # only `DuplicatedNoNeed` gives up errors
            return False
        if k in ("for", "while", "if"):
            return self._droppable_region(op, live_vals, live_roots, unknown)
        if k not in ("const", "getitem", "setitem", "prim"):
            return False
        if k == "prim":
            key = op.attrs["key"]
            rule = lookup(key)
            if key.startswith("numpy.random") or key in _EFFECTS or not (
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
        the functions of `math` and NumPy's elementwise ones on numbers. So `Reverse`, which
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
            if key in _NEVER_RAISING_REDUCTIONS and "out" not in op.attrs:
                return True  # an invalid axis failed while lowering (types come from example calls)
            if not numbers or "out" in op.attrs:
                return False
            if key in _SAFE_OPS:
                return True
            if key == "truediv" and self._numpy_scalar(args[0]):
                return True  # an np.float64 divided by zero is inf or nan (a warning), never an error
            return self.numba and (key == "truediv" or key.startswith("math.") and key in _NUMBA_SAFE_MATH
                                   or key.startswith("numpy.") and lookup(key).elementwise
                                   and all(T.is_float(a.type) for a in args))
        if k in ("getitem", "setitem") and self.numba:
            base = args[0]
            index = args[1:] if k == "getitem" else args[2:]
            value_ok = k == "getitem" or isinstance(args[1].type, T.Scalar)
            return (isinstance(base.type, T.Array) and value_ok and not indexing.is_advanced(op)
                    and len(index) == base.type.ndim and all(v.type == T.INT for v in index))
        return False

    def _numpy_scalar(self, v: Value) -> bool:
        """Whether number `v` is at run time a NumPy scalar: the result of a reduction of an array."""
        d = self.def_op.get(v.id)
        return (d is not None and d.kind == "prim" and d.attrs["key"] in _NEVER_RAISING_REDUCTIONS
                and any(isinstance(a.type, T.Array) for a in d.args))

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
            if (id(inner) in self.trips or self.cache_at_loop.get(id(inner)) or self.reserve_at_loop.get(id(inner))
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

    def _snapshot(self, w: Writer, snap: Value, of: Value) -> None:
        """Copy the contents of `of` for the adjoint sweep: straight into a row of its stacked
        cache when it has one, else into a new array (recorded like any value)."""
        if self._cached(snap) and (snap.id, "p") in self.needed and self._kind(snap, "p") == "stack":
            self._record(w, snap, src=self.namer(of))
            return
        w(f"{self.namer(snap)} = {self.namer(of)}.copy()")
        self._record(w, snap)

    def fwd_op(self, op: Op, w: Writer, primal: bool = True) -> None:
        n, act, e = self.namer, self.act, Emitter(self.namer, w)
        k = op.kind
        if op.regions and not primal:  # a loop or branch left out whole (`_droppable_region`)
            return
        if id(op) in self.checkpoints:  # `transform/checkpoint.py`
            self.checkpoints[id(op)].forward(self, op, w)
            return
        if k in ("const", "getitem", "setitem", "prim"):
            if primal:
                e.primal(op)
            if k == "prim":
                rule = lookup(op.attrs["key"])
                for r in op.results:
                    for _ in (n.lanes() if T.is_memory(r.type) and act.is_active(r) else ()):
                        if rule.view or rule.maybe_view:
                            x = op.args[0]
                            dx = n.d(x) if act.is_active(x) else f"np.zeros_like({n(x)})"
                            expr = e.rule_expr(rule, "jvp", rule.diff_params()[0], dx, n(r), op)
                            if rule.maybe_view:
                                expr = f"_rt.maybe_view_shadow({n(r)}, {n(x)}, {expr}, {dx}, True)"
                            w(f"{n.d(r)} = {expr}")
                        elif self._lazy(r) or self._made_by_adjoint(r) or self._adjoint_alloc(r):
                            if n.lane == 0 and r.id in self.shape_needed:
                                for d in range(cast(T.Array, r.type).ndim):
                                    w(f"{self._shape_name(r, d)} = {n(r)}.shape[{d}]")
                        else:
                            w(f"{n.d(r)} = {zero(r, n(r))}")  # a list allocated inside: a list of zeros
            elif k == "getitem":
                r = op.result
                for _ in (n.lanes() if T.is_memory(r.type) and act.is_active(r) else ()):
                    if indexing.is_advanced(op):  # a copy: a shadow of its own
                        w(f"{n.d(r)} = np.zeros_like({n(r)})")
                    else:
                        w(f"{n.d(r)} = {n.d(op.args[0])}[{e.index(op)}]")
            elif k == "setitem":
                obj, val = op.args[0], op.args[1]
                if isinstance(obj.type, T.List) and T.is_memory(val.type) and act.is_active(obj):
                    for _ in n.lanes():
                        dv = n.d(val) if act.is_active(val) else f"np.zeros_like({n(val)})"
                        w(f"{n.d(obj)}[{e.index(op)}] = {dv}")
        elif k == "for":
            body = op.regions[0]
            self._fwd_assign(w, body.args[1:], op.args[3:])
            a, b, s = (n(v) for v in op.args[:3])
            caches = self.cache_at_loop.get(id(op), [])
            reserve = self.reserve_at_loop.get(id(op), [])
            if caches or reserve:
                trips = n.fresh("_trips")
                self.loop_trips[id(op)] = trips
                w(f"{trips} = {trip_count(a, b, s)}")
                for v, role in caches:
                    size = trips if self._kind(v, role) == "stack" else self._nest_trips(v, trips)
                    self._alloc_cache(w, v, role, size)
                for v, role in reserve:
                    cache, k, need = self._cache_name(v, role), self._counter(v), self._nest_trips(v, trips)
                    with w.indent(f"if {k} + {need} > {cache}.shape[0]:"):
                        w(f"{cache} = _rt.grow({cache}, {k} + {need})")
            with w.indent(f"for {n(body.args[0])} in range({range_args(a, b, s)}):"):
                self.fwd_block(body, w)
                self._fwd_assign(w, body.args[1:], body.ops[-1].args)
            self._fwd_assign(w, op.results, body.args[1:])
        elif k == "while":
            cond, body = op.regions
            trip = self.trips.get(id(op))
            if trip is not None:
                w(f"{n(trip)} = 0")
            self._fwd_assign(w, cond.args, op.args)
            with w.indent(self.while_header.get(id(op), "while True:")):
                self.fwd_block(cond, w)
                self._fwd_assign(w, body.args, cond.args)
                if trip is not None:
                    w(f"{n(trip)} += 1")
                self.fwd_block(body, w)
                self._fwd_assign(w, cond.args, body.ops[-1].args)
            self._fwd_assign(w, op.results, cond.args)
        elif k == "if":
            for region, header in zip(op.regions, (f"if {n(op.args[0])}:", "else:")):
                with w.indent(header):
                    self.fwd_block(region, w)
                    self._fwd_assign(w, op.results, region.ops[-1].args)
        elif k == "condition":
            with w.indent(f"if not {n(op.args[0])}:"):
                w("break")
        elif k in ("yield", "return"):
            pass
        else:
            raise AssertionError(k)

    def _fwd_assign(self, w: Writer, dsts: list[Value], srcs: list[Value]) -> None:
        n = self.namer
        pairs = []
        for d, s in zip(dsts, srcs):
            pairs.append((n(d), n(s)))
            for _ in (n.lanes() if T.is_memory(d.type) and self.act.is_active(d) else ()):
                ds = n.d(s) if self.act.is_active(s) else f"np.zeros_like({n(s)})"
                pairs.append((n.d(d), ds))
        assign_all(w, pairs)

    # -- adjoint sweep --------------------------------------------------------------
    def rev_block(self, block: Block, top: bool = False,
                  seeds: Sequence[tuple[Value, Callable[[], str]]] = ()) -> Writer:
        """The adjoint code of `block`: pops, adjoint initialisation, then its ops reversed."""
        body = Writer()
        outer_top, self.at_top = self.at_top, top
        for v, expr in seeds:  # expr: the seed's expression in the current lane
            if self.act.is_active(v) and not T.is_memory(v.type):
                for _ in self.namer.lanes():
                    body(f"{self.adj(v)} += {expr()}")
        for op in reversed(block.ops):
            self.at_top = top
            self.rev_op(op, body)
        self.at_top = top  # also while this block's recomputed values are written (`_top_remat`)
        head = Writer()
        if top:
            self._resolve_lazy(head, body)
        elif self.depth[id(block)] > 0:
            self._resolve_loop_lazy(block, body)
        if self.depth[id(block)] > 0:
            defined = self._defined_in(block)
            remat = {}
            for v in reversed(defined):  # registers what the recomputations read first
                for role in ("d", "p"):
                    if (v.id, role) in self.needed and self._remat(v, role):
                        for lane in self._lanes_of(role):
                            remat[(v.id, role, lane)] = self._remat_expr(v, role)
            for v in defined:
                for role in ("p", "d"):
                    if (v.id, role) in self.needed and self._cached(v):
                        if (v.id, role, 0) in remat:
                            for lane in self._lanes_of(role):
                                name = self.namer(v) if role == "p" else self.namer.d(v)
                                head(f"{name} = {remat[(v.id, role, lane)]}")
                        else:
                            self._restore(head, v, role)
        defined = self._defined_in(block)
        if top:
            defined = list(self.fn.params) + defined
        zeros = [self.namer.d(v) for v in defined if v.id in self.adj_used and not T.is_memory(v.type)
                 for _ in self.namer.lanes()]
        for name in _fold_zero_inits(zeros, body):
            head(f"{name} = 0.0")
        splice(head, body)
        self.at_top = outer_top
        return head

    def _resolve_lazy(self, head: Writer, body: Writer) -> None:
        """Create the shadows of the temporaries outside loops (`_lazy`): when the first
        reference is an accumulation at the top level of a fresh array and the only other one
        is its defining op's read, that accumulation becomes the assignment; otherwise the
        shadow starts as zeros at the head of the adjoint sweep."""
        for (vid, lane), refs in self.lazy_refs.items():
            v = self.values[vid]
            if not self._lazy(v):
                continue  # a loop temporary's (`_resolve_loop_lazy`)
            self.namer.lane = lane
            name = self.namer.d(v)
            first = refs[0]
            if (first[0] == "acc" and first[1] is body and cast(T.Array, v.type).ndim > 0 and vid not in self.deferred
                    and all(r[0] in ("def", "acc") for r in refs[1:]) and any(r[0] == "acc" for r in refs[1:])
                    and _fresh_array_expr(first[3])):
                # several contributions, the first a new array (`_rt.unbroadcast(y * -g, z)`): it
                # becomes the shadow (a copy only if its shape or dtype is not the shadow's), the
                # others add into it, where zeros and one more pass were written before
                line = body.lines[first[2]]
                indent = line[:len(line) - len(line.lstrip())]
                body.lines[first[2]] = f"{indent}{name} = _rt.as_shape({first[3]}, {self.namer(v)})"
                self.needed.add((vid, "p"))
            elif (first[0] == "acc" and first[1] is body and all(r[0] == "def" for r in refs[1:])
                  and cast(T.Array, v.type).ndim > 0):
                line = body.lines[first[2]]
                indent = line[:len(line) - len(line.lstrip())]
                expr = first[3]
                # an unbroadcast adjoint has the shadow's whole shape; anything else (a
                # reduction's adjoint may be one number that `+=` broadcasts) is broadcast into
                # a fresh array: one pass instead of zeros and an add
                if not (expr.startswith("_rt.unbroadcast(") or (vid, expr) in self.whole) and vid not in self.deferred:
                    expr = f"_rt.as_tangent({expr}, {self.namer(v)})"
                    self.needed.add((vid, "p"))
                body.lines[first[2]] = f"{indent}{name} = {expr}"
            else:
                head(f"{name} = np.zeros_like({self.namer(v)})")
                self.needed.add((vid, "p"))
                if vid in self.deferred:  # the deferred sum over broadcast dimensions is due here
                    for r in refs:
                        if r[0] == "acc":
                            line = r[1].lines[r[2]]
                            cut = len(line) - len(r[3])
                            r[1].lines[r[2]] = f"{line[:cut]}_rt.unbroadcast({r[3]}, {self.namer(v)})"
            self.namer.lane = 0

    def _resolve_loop_lazy(self, block: Block, body: Writer) -> None:
        """Create the shadows of `block`'s loop temporaries (`_loop_lazy`) where the reversed
        iteration first contributes to them: that accumulation becomes the assignment
        (`_loop_first_assign`), so the shadow is neither zeroed (in the adjoint sweep, from
        extents the forward sweep recorded) nor allocated by the forward sweep and cached.
        When that is not possible (in some lane), the shadow stays as it was (zeros where it
        is used, or allocated and cached by the forward sweep), and a deferred sum over
        broadcast dimensions (`_defers_unbroadcast`) is written into each contribution."""
        plans: dict[int, list] = {}
        for (vid, lane), refs in self.lazy_refs.items():
            if self.def_block.get(vid) is block and self._loop_lazy(self.values[vid]):
                plans.setdefault(vid, []).append((lane, refs))
        for vid, lanes in plans.items():
            v = self.values[vid]
            edits = []
            for lane, refs in lanes:
                self.namer.lane = lane
                edits.append(self._loop_first_assign(v, refs, body))
            if all(e is not None for e in edits):
                for idx, text in cast(list[tuple[int, str]], edits):
                    body.lines[idx] = text
                self.needed.discard((vid, "d"))
            elif vid in self.deferred:
                for lane, refs in lanes:
                    self.namer.lane = lane
                    for r in refs:
                        if r[0] == "acc":
                            line = r[1].lines[r[2]]
                            cut = len(line) - len(r[3])
                            r[1].lines[r[2]] = f"{line[:cut]}_rt.unbroadcast({r[3]}, {self.namer.d(v)})"
            self.namer.lane = 0

    def _loop_first_assign(self, v: Value, refs: list, body: Writer) -> tuple[int, str] | None:
        """The line (index, text) assigning loop temporary `v`'s shadow its first
        contribution, or None. That contribution must be an accumulation at the block's own
        level, and every other reference another one or the defining op's read. The assigned
        array must be one only the shadow holds when anything adds into it later, and have
        `v`'s shape (or the deferred use's): a contribution summed back to `v`'s shape reads
        that shape from the primal `v` (only when the adjoint sweep reads it anyway), any
        other is copied into an array like the primal's (`_rt.as_shape`/`as_tangent`), or,
        known to have the shape (deferred, or `whole`), copied unless it is fresh."""
        first = refs[0]
        if (first[0] != "acc" or first[1] is not body or first[5] != 0
                or any(r[0] not in ("def", "acc") or (r[0] == "acc" and r[1] is not body) for r in refs[1:])):
            return None
        name, expr, fresh = self.namer.d(v), first[3], first[4]
        several = any(r[0] == "acc" for r in refs[1:])
        has_p = (v.id, "p") in self.needed
        if expr.startswith("_rt.unbroadcast(") and expr.endswith(f", {name})"):
            if has_p:
                like = self.namer(v)
            elif self.shapes.fixed(v):  # the extents the forward sweep records (`_shape_name`)
                self.shape_needed.add(v.id)
                like = f"np.empty({self._shape_expr(v)})"
            else:
                return None
            expr, shaped = f"{expr[:-len(name) - 1]}{like})", True
        else:
            shaped = v.id in self.deferred or (v.id, expr) in self.whole
        if shaped:
            # arithmetic is a new array; another expression (a name, a view, a helper's result)
            # is adopted only when nothing else holds it (`fresh`) and nothing adds into it later
            new = _fresh_array_expr(expr)
            rhs = expr if new or (fresh and not several) else f"np.copy({expr})"
        elif has_p:
            helper = "as_shape" if fresh and _fresh_array_expr(expr) else "as_tangent"
            rhs = f"_rt.{helper}({expr}, {self.namer(v)})"
        else:
            return None
        line = body.lines[first[2]]
        indent = line[:len(line) - len(line.lstrip())]
        return first[2], f"{indent}{name} = {rhs}"

    def _defined_in(self, block: Block) -> list[Value]:
        out = list(block.args)
        for op in block.ops:
            for snap, _ in self.snap_pre.get(id(op), []):
                out.append(snap)
            out.extend(op.results)
            for snap, _ in self.snap_post.get(id(op), []):
                out.append(snap)
            if id(op) in self.trips:
                out.append(self.trips[id(op)])
        return out

    def rev_op(self, op: Op, w: Writer) -> None:
        if id(op) in self.checkpoints:  # `transform/checkpoint.py`
            self.checkpoints[id(op)].adjoint(self, op, w)
            return
        if op.kind in ("for", "while", "if"):
            getattr(self, "rev_" + op.kind)(op, w)  # regions: lanes inside
            return
        for _ in self.namer.lanes():
            getattr(self, "rev_" + op.kind)(op, w)

    def rev_const(self, op: Op, w: Writer) -> None:
        pass

    def rev_yield(self, op: Op, w: Writer) -> None:
        pass  # handled by the enclosing region

    rev_condition = rev_yield

    def rev_return(self, op: Op, w: Writer) -> None:
        if self.seed_return:
            v = op.args[0]
            if self.act.is_active(v):
                w(f"{self.adj(v)} += {self.seeds[self.namer.lane]}")

    def rev_getitem(self, op: Op, w: Writer) -> None:
        base, r = op.args[0], op.result
        if indexing.is_advanced(op) and self.act.is_active(r) and self.act.is_active(base):
            # a gather: its adjoint is scattered back, repeated indices accumulating
            dr = self.use_d(r) if T.is_memory(r.type) else self.adj(r)
            w(f"_rt.scatter_add({self.use_d(base)}, {self._index_arg(op)}, {dr})")
            return
        if T.is_memory(r.type) or not self.act.is_active(r):
            return  # a view or list item: its shadow aliases the base's shadow
        idx = self.e.index(op, self.use)
        w(f"{self.use_d(base)}[{idx}] += {self.adj(r)}")

    def rev_setitem(self, op: Op, w: Writer) -> None:
        obj, val = op.args[0], op.args[1]
        if not self.act.is_active(obj):
            return
        if isinstance(obj.type, T.List) and T.is_memory(val.type):
            return  # storing a reference: the shadow reference was stored in the forward sweep
        if indexing.is_advanced(op):
            self._rev_scatter(op, w)
            return
        idx = self.e.index(op, self.use)
        dobj = self.use_d(obj)
        if self.act.is_active(val):
            if T.is_memory(val.type):
                g = self.namer.fresh("_g")
                copy = f"np.copy({dobj if idx == '...' else f'{dobj}[{idx}]'})"
                if T.is_complex(obj.type) and not T.is_complex(val.type):
                    copy = f"np.real({copy})"  # a real array stored into a complex one
                w(f"{g} = {copy}")
                w(f"{dobj}[{idx}] = 0.0")
                if (self.at_top or self._loop_lazy(val)) and self._defers_unbroadcast(val, op):
                    self.deferred.add(val.id)  # a store broadcasts like an elementwise op
                    self.deferred_to[val.id] = op
                    self.accumulate(w, val, g, fresh=True)
                elif self.extents.fits(val, self._adjoint_shape(op)):
                    self.whole.add((val.id, g))
                    self.accumulate(w, val, g, fresh=True)
                else:
                    self.accumulate(w, val, f"_rt.unbroadcast({g}, {self.use(val)})", fresh=True)
                return
            if isinstance(obj.type, T.Array) and isinstance(val.type, T.Scalar):
                sel = f"{dobj}[{idx}]"
                # a store of a scalar into more than one element (a slice, `...`, a row of a
                # 2-d array) broadcasts it: its adjoint sums the selection
                if not _one_element(op):
                    sel = f"np.sum({sel})"
                if T.is_complex(obj.type) and not T.is_complex(val.type):
                    sel = f"np.real({sel})"  # a real number stored into a complex array
                w(f"{self.adj(val)} += {sel}")
            else:
                w(f"{self.adj(val)} += {dobj}[{idx}]")
        w(f"{dobj}[{idx}] = 0.0")

    def _index_arg(self, op: Op) -> str:
        """An advanced index as one call argument, its arrays as the op saw them."""
        return indexing.index_expr(self.e, op, lambda v: self.contents(op, v))

    def _rev_scatter(self, op: Op, w: Writer) -> None:
        """Adjoint of `x[idx] = v` with an advanced index (`rules/indexing.py`): `v` gets
        the adjoint of the occurrences that survive (the last of repeated indices), and
        `dx[idx]` is zeroed."""
        obj, val = op.args[0], op.args[1]
        g = f"_rt.store_adjoint({self.use_d(obj)}, {self._index_arg(op)})"
        if not self.act.is_active(val):
            w(g)
        elif T.is_complex(obj.type) and not T.is_complex(val.type):  # a real value stored into complex memory
            w(f"{self.use_d(val)} += np.real(_rt.unbroadcast({g}, {self.use(val)}))" if T.is_memory(val.type)
              else f"{self.adj(val)} += np.real(np.sum({g}))")
        elif T.is_memory(val.type):
            w(f"{self.use_d(val)} += _rt.unbroadcast({g}, {self.use(val)})")
        else:
            w(f"{self.adj(val)} += np.sum({g})")

    def rev_prim(self, op: Op, w: Writer) -> None:
        act, n = self.act, self.namer
        rule = lookup(op.attrs["key"])
        out = op.args[op.attrs["out"]] if "out" in op.attrs else None
        if rule.view or rule.alloc:
            return
        if rule.maybe_view:
            r, x = op.result, op.args[0]
            if act.is_active(r) and act.is_active(x):
                # a copy (not a view) gets its own shadow: send it back to x's
                expr = self.e.rule_expr(rule, "vjp", rule.diff_params()[0], self.use_d(r), None, op, name=self.use)
                with w.indent(f"if not _rt.is_view({self.use(r)}, {self.use(x)}):"):
                    w(f"{self.use_d(x)} += {expr}")
            return
        if rule.nondiff:
            if out is not None and act.is_active(out):
                w(f"{self.use_d(out)}[...] = 0.0")
            if op.attrs["key"].startswith("zymo.errstate."):
                self._rev_errstate(op, w)
            return
        target = out if out is not None else (op.results[0] if op.results else None)
        if target is None or not act.is_active(target):
            return
        if out is None and self._adjoint_is_zero(target):
            return
        vals = self.e.arg_values(rule, op)
        actives = [(p, v) for p, v in vals.items()
                   if p in rule.vjps() and act.is_active(v) and v.type.differentiable]
        zero_after = None
        if out is not None:
            dout = self.use_d(out)
            if not actives:
                w(f"{dout}[...] = 0.0")
                return
            out_roots = self.act.roots.get(out.id) or {None}
            overlaps = any(not self.act.roots.get(v.id) or self.act.roots[v.id] & out_roots
                           for _, v in actives if T.is_memory(v.type))
            if overlaps and self._update_in_place(rule, op, out, actives, dout, w):
                return
            if overlaps:
                # an operand's shadow may be the output's: consume a copy first
                g = n.fresh("_g")
                w(f"{g} = {dout}.copy()")
                w(f"{dout}[...] = 0.0")
            else:
                g, zero_after = dout, dout
        elif self._uniform(target):
            g = self.namer.d(target)  # one number (`_uniform`): scaled by the vjps, never summed
        else:
            g = self.use_d(target, ("def",)) if T.is_memory(target.type) else self.adj(target)
        uniform = out is None and self._uniform(target)
        for p, v in actives:
            if uniform:  # a fresh shadow starts as this term broadcast (`_resolve_lazy`)
                self.accumulate(w, v, self._vjp(rule, p, g, op, target), fresh=True)
                continue
            self._accumulate_vjp(rule, p, v, g, op, target, w, fresh=zero_after is None)
        if zero_after is not None:
            w(f"{zero_after}[...] = 0.0")

    def _adjoint_is_zero(self, v: Value) -> bool:
        """Whether temporary `v`, whose shadow the adjoint sweep creates (`_lazy`, `_loop_lazy`),
        got no contribution at all (its readers are comparisons, or their results are not
        active): every reader follows `v`'s definition, so their adjoints are written before
        its op's adjoint; that adjoint, all zeros, is then left out, with the zeros it read."""
        if not (isinstance(v.type, T.Array) and (self._lazy(v) or self._loop_lazy(v))) or self._uniform(v):
            return False
        return all(r[0] == "def" for r in self.lazy_refs.get((v.id, self.namer.lane), ()))

    def _rev_errstate(self, op: Op, w: Writer) -> None:
        """The adjoint of a `with np.errstate(...)` block runs under the same settings: the
        adjoint sweep meets the block's exit first (and sets them, keeping the state it finds
        in a name of its own), then the block's ops, then its entry (and restores that state)."""
        if op.attrs["key"] == "zymo.errstate.exit":
            enter_key = op.attrs["pos"][1][1]
            w(f"_errstate_{self.namer(op.args[0])} = {lookup(enter_key).template}")
        else:
            w(f"np.seterr(**_errstate_{self.namer(op.results[0])})")

    def _accumulate_vjp(self, rule, p: str, v: Value, g: str, op: Op, target: Value, w: Writer,
                        fresh: bool) -> None:
        if self._uniform(v) and op.attrs.get("key") == "numpy.sum":
            w(f"{self.namer.d(v)} = {g}")  # the sum's only operand: its adjoint is this number
            return
        expr = self._vjp(rule, p, g, op, target)
        if rule.elementwise and isinstance(target.type, T.Array):
            # a loop temporary's shadow copies a contribution that is not fresh (`_loop_first_assign`)
            if ((fresh and self.at_top) or self._loop_lazy(v)) and self._defers_unbroadcast(v, op):
                self.deferred.add(v.id)
                self.deferred_to[v.id] = target
            elif isinstance(v.type, T.Array) and self.extents.fits(v, self._adjoint_shape(target)):
                self.whole.add((v.id, expr))  # the adjoint already has `v`'s shape
            else:
                if self._loop_lazy(v):  # not a reference: the first contribution reads the primal's shape
                    self.needed.add((v.id, "d"))
                    shape_of = self.namer.d(v)
                else:
                    shape_of = self.use(v) if not T.is_memory(v.type) or self._lazy(v) else self.use_d(v)
                expr = f"_rt.unbroadcast({expr}, {shape_of})"
        self.accumulate(w, v, expr, fresh=fresh)

    def _adjoint_shape(self, target: Value | Op):
        """The symbolic shape of the adjoint of `target` (a value, or a `setitem` op's
        destination): its own, or for a deferred temporary that of the use it was deferred to."""
        prev = target
        while isinstance(target, Value) and target.id in self.deferred:
            prev, target = target, self.deferred_to[target.id]
        if isinstance(target, Value):
            return self.extents.shape(target)
        dest = self.extents.store_shape(target)
        stored = prev if isinstance(prev, Value) else target.args[1]
        if dest is None or len(dest[0]) != getattr(stored.type, "ndim", 0):
            return None  # a store that drops leading length-1 axes: the terms keep them
        return dest

    def _uniform(self, v: Value) -> bool:
        """Whether the adjoint of array `v` is kept as one number: `v` is the fresh result of an
        elementwise op, read only by `np.sum(v)` (every axis) in the same block, so its adjoint is
        that sum's adjoint broadcast, the same in every element; and every active operand of
        its op is an array of `v`'s shape (`analysis/extents.py`), so the op's vjps scale that
        number to arrays of the operands' shapes without a sum over broadcast dimensions.
        `t = dr * w; s = np.sum(t)` then gives `dt = ds` and `ddr += dt * w`: no array of ones,
        no copy of `t` for its shape. Decided once per value."""
        memo = self._uniform_memo.get(v.id)
        if memo is None:
            memo = self._uniform_memo[v.id] = self._uniform_check(v)
        return memo

    def _uniform_check(self, v: Value) -> bool:
        d = self.def_op.get(v.id)
        if not (isinstance(v.type, T.Array) and d is not None and d.kind == "prim" and d.results == [v]
                and "out" not in d.attrs and lookup(d.attrs["key"]).elementwise):
            return False
        if self._count_readers().get(v.id) != 1:
            return False
        reader = next((o for o in self.blocks_of_op_list(d) if any(a is v for a in o.args)), None)
        if (reader is None or reader.kind != "prim" or reader.attrs["key"] != "numpy.sum"
                or reader.attrs.get("pos") != (("v", 0),) or reader.attrs.get("kw") or "out" in reader.attrs
                or not reader.results or not self.act.is_active(reader.results[0])):
            return False
        rule = lookup(d.attrs["key"])
        for p, a in self.e.arg_values(rule, d).items():
            if p in rule.vjps() and self.act.is_active(a) and a.type.differentiable:
                if not (isinstance(a.type, T.Array) and self.extents.same(a, v)):
                    return False
        return True

    def blocks_of_op_list(self, op: Op) -> list[Op]:
        """The ops of the block `op` is in."""
        return self.blocks_of_op[id(op)].ops

    def _count_readers(self) -> dict[int, int]:
        if self._readers is None:  # how many op arguments are each value, counted once
            self._readers = {}
            for o in walk(self.fn.body):
                for a in o.args:
                    self._readers[a.id] = self._readers.get(a.id, 0) + 1
        return self._readers

    def _defers_unbroadcast(self, v: Value, use: Op) -> bool:
        """Whether the adjoint of temporary `v` may keep the (broadcast) shape of its one use's
        result: `v` is the fresh result of an elementwise op and `use`, elementwise too, is its
        only reader. The defining op's vjps then scale that adjoint by factors of `v`'s shape,
        which are constant along the dimensions `v` lacks, so summing them away later, where
        the chain reaches an operand that is not such a temporary, gives the same numbers
        (linearity) and the chain's elementwise adjoints fuse into one expression."""
        if not (self._lazy(v) or self._loop_lazy(v)):
            return False
        d = self.def_op[v.id]
        if not lookup(d.attrs["key"]).elementwise:
            return False
        return self._count_readers().get(v.id) == 1 and any(a is v for a in use.args)

    def _update_in_place(self, rule, op: Op, out: Value, actives: list, dout: str, w: Writer) -> bool:
        """`np.f(x, y, out=x)` (`x += y`, `np.tanh(h, out=h)`), elementwise: the other operands
        take their adjoints from `dx` first, then `dx[...] = vjp_x(dx)` (nothing at all when
        that is `dx` itself), instead of copying `dx`, zeroing it and accumulating back.
        False (the caller copies) when `x` is read twice or another operand may overlap it."""
        selfs = [p for p, v in actives if v is out]
        others = [(p, v) for p, v in actives if v is not out]
        if not rule.elementwise or len(selfs) != 1 or not isinstance(out.type, T.Array):
            return False
        out_roots = self.act.roots.get(out.id) or {None}
        if any(T.is_memory(v.type) and (not self.act.roots.get(v.id) or self.act.roots[v.id] & out_roots)
               for _, v in others):
            return False
        for p, v in others:
            self._accumulate_vjp(rule, p, v, dout, op, out, w, fresh=False)
        expr = self._vjp(rule, selfs[0], dout, op, out)
        if expr != dout:
            w(f"{dout}[...] = {expr}")
        return True

    def _vjp(self, rule, p: str, g: str, op: Op, target: Value) -> str:
        used = uses(rule, "vjp", p)
        ans = None
        if "ans" in used:
            ans = self.contents(op, target, post=True) if isinstance(target.type, T.Array) else self.use(target)

        def name(v: Value) -> str:
            return self.contents(op, v) if isinstance(v.type, T.Array) else self.use(v)

        # only the parameters the rule reads are recorded as needed
        vals = self.e.arg_values(rule, op)
        read = {v.id for p2, v in vals.items() if p2 in used}
        lazy = {v.id for v in vals.values() if v.id not in read}
        expr = self.e.rule_expr(rule, "vjp", p, g, ans, op,
                                name=lambda v: self.namer(v) if v.id in lazy else name(v))
        if not T.is_complex(vals[p].type) and (getattr(rule, "complex_adjoint", False) or any(
                T.is_complex(v.type) for v in (*op.args, *op.results))):
            expr = f"np.real({expr})"  # a real operand of a complex op: JAX's convention (rules/complex_.py)
        return expr

    # -- regions ------------------------------------------------------------------
    def _carry_seeds(self, carries: list[Value], results: list[Value], w: Writer) -> list[Callable[[], str] | None]:
        """Adjoint variables flowing backwards through the carries (floats only)."""
        names: list[Callable[[], str] | None] = []
        for c, r in zip(carries, results):
            if self.act.is_active(c) and not T.is_memory(c.type):
                def nm(c: Value = c) -> str:
                    return self.namer.lane_role(c, "dnext", "d" + c.hint.lstrip("$") + "_next")

                for _ in self.namer.lanes():
                    w(f"{nm()} = {self.adj(r) if self.act.is_active(r) else '0.0'}")
                names.append(nm)
            else:
                names.append(None)
        return names

    def _carry_out(self, w: Writer, names: list, dsts: list[Value]) -> None:
        for nm, d in zip(names, dsts):
            if nm is not None and self.act.is_active(d) and not T.is_memory(d.type):
                for _ in self.namer.lanes():
                    w(f"{self.adj(d)} += {nm()}")

    def _carry_back(self, inner: Writer, names: list, carries: list[Value]) -> None:
        for nm, c in zip(names, carries):
            if nm is not None:
                for _ in self.namer.lanes():
                    inner(f"{nm()} = {self.adj(c)}")

    def rev_for(self, op: Op, w: Writer) -> None:
        body = op.regions[0]
        carries = body.args[1:]
        names = self._carry_seeds(carries, op.results, w)
        ys = body.ops[-1].args
        for nm, c in zip(names, carries):
            if nm is not None:
                self.adj_used.add(c.id)  # read after the body: initialise it at block entry
        inner = self.rev_block(body, seeds=[(y, nm) for y, nm in zip(ys, names) if nm])
        self._carry_back(inner, names, carries)
        start, stop, step = (self.use(v) for v in op.args[:3])
        iv = self.namer(body.args[0])
        # the iterations backwards, as a count up: `range` with a negative step keeps LLVM from
        # proving the index non-negative (bounds wraparound stays in the loop; ~10% on gmm).
        # With step 1 the count is `range(stop)` from 0, else `range(_rt.span(start, stop))`
        # (one select; unsigned bounds do not wrap), and the index `stop - 1 - _r`: LLVM sees
        # `_r < stop - start` directly (a count behind a conditional expression, three blocks
        # in Numba's IR, cost gmm's adjoint 15%).
        r = self.namer.fresh("_r")
        # the index is a Python int, as `range` gives it to the primal: a bound that may be an
        # unsigned NumPy int (`NeverUnsigned`) is read through `int` first (`n - 1 - _r` of a uint64
        # `n` is a uint64, and `i - 2` then wraps round where the primal's `i - 2` is -2)
        if step == "1":
            hi = self._signed_name(op.args[1], stop, w)
            head, index = f"for {r} in range({span(start, stop)}):", f"{iv} = {hi} - 1 - {r}"
        else:
            start = self._signed_name(op.args[0], start, w)
            trip = self.namer.fresh("_n")
            w(f"{trip} = {trip_count(start, stop, step)}")
            k = op.args[2].const if op.args[2].is_const and isinstance(op.args[2].const, int) else None
            if k is not None and k < 0 and start != "0":  # `start - |k| * j`: no negative int added
                back = f"({trip} - 1 - {r})" + ("" if k == -1 else f" * {-k}")
                index = f"{iv} = {start} - {back}"
            else:
                back = f"({trip} - 1 - {r}) * {step}"
                index = f"{iv} = {back}" if start == "0" else f"{iv} = {start} + {back}"
            head = f"for {r} in range({trip}):"
        with w.indent(head):
            w(index)
            splice(w, inner)
        self._carry_out(w, names, op.args[3:])

    def _signed_name(self, v: Value, text: str, w: Writer) -> str:
        """`text` (the name of int `v`), or a name for `int(text)` written by `w` where `v` may
        be unsigned (`analysis.bounds.NeverUnsigned`)."""
        if self.never_unsigned(v):
            return text
        name = self.namer.fresh(f"{text}_int" if text.isidentifier() else "_bound")
        w(f"{name} = int({text})")
        return name

    def rev_while(self, op: Op, w: Writer) -> None:
        cond, body = op.regions
        trip = self.trips.get(id(op))
        if trip is None:
            trip = Value(T.INT, "_trip")
            self.values[trip.id] = trip
            self.def_block[trip.id] = self.blocks_of_op[id(op)]
            self.trips[id(op)] = trip
        names = self._carry_seeds(body.args, op.results, w)
        ys = body.ops[-1].args
        for nm, c in zip(names, body.args):
            if nm is not None:
                self.adj_used.add(c.id)
        inner = self.rev_block(body, seeds=[(y, nm) for y, nm in zip(ys, names) if nm])
        self._carry_back(inner, names, body.args)
        with w.indent(f"for _ in range({self.use(trip)}):"):
            splice(w, inner)
        self._carry_out(w, names, op.args)

    def rev_if(self, op: Op, w: Writer) -> None:
        cond = self.use(op.args[0])
        branches = []
        for region in op.regions:
            seeds = [(y, lambda r=r: self.adj(r)) for y, r in zip(region.ops[-1].args, op.results)
                     if self.act.is_active(r) and not T.is_memory(r.type)]
            branches.append(self.rev_block(region, seeds=seeds))
        with w.indent(f"if {cond}:"):
            splice(w, branches[0])
        if branches[1].lines:
            with w.indent("else:"):
                splice(w, branches[1])


_WORD = re.compile(r"[A-Za-z_]\w*")


def _fold_zero_inits(names: list[str], body: Writer) -> list[str]:
    """The scalar adjoints of `names` that still need `d = 0.0` at the head of `body`.

    When the first line of `body` that mentions `d` is `d += e` at the block's own level
    (not inside a nested loop or branch) and `e` does not read `d`, that line becomes
    `d = e` and the initialisation goes. Besides a shorter program, this keeps `0.0 + e`
    (which LLVM may not fold: it is not `e` when `e` is -0.0) off loop-carried chains
    such as `dt_next` in an inner loop."""
    wanted = set(names)
    first: dict[str, int] = {}
    for i, line in enumerate(body.lines):
        for tok in _WORD.findall(line):
            if tok in wanted and tok not in first:
                first[tok] = i
    keep = []
    for name in names:
        at = first.get(name)
        prefix = f"{name} += "
        if at is not None and body.lines[at].startswith(prefix):
            rest = body.lines[at][len(prefix):]
            if name not in _WORD.findall(rest):
                body.lines[at] = f"{name} = {rest}"
                continue
        keep.append(name)
    return keep


def _where(loc) -> str:
    import linecache

    text = linecache.getline(loc.file, loc.line).strip()
    short = loc.file.rsplit("/", 1)[-1]
    return f"{short}:{loc.line}" + (f"  `{text}`" if text else "")


def report(rev: Reverse, measured: dict | None = None) -> str:
    """What the derivative program caches and why (Enzyme's printperf, for one call).

    `measured` maps tape names to what an augmented forward call recorded; with it,
    each entry says how many entries and bytes that call cached."""
    lines = [f"cache report for {rev.fn.name} (reverse mode)"]
    entries = []
    total = 0

    def used(name: str, count_name: str | None, is_copy: bool) -> str:
        nonlocal total
        if measured is None or name not in measured:
            return ""
        obj = measured[name]
        if isinstance(obj, list):
            nbytes = sum(getattr(o, "nbytes", 8) for o in obj) if is_copy else 8 * len(obj)
            n = len(obj)
        elif count_name is not None:
            n = int(measured.get(count_name, 0))
            nbytes = n * obj.dtype.itemsize * math.prod(obj.shape[1:])
        else:
            n, nbytes = 1, getattr(obj, "nbytes", 8)
        total += nbytes
        return f"\n      this call: {n} entr{'y' if n == 1 else 'ies'}, {nbytes} bytes"

    for (vid, role) in sorted(rev.needed):
        v = rev.values[vid]
        if vid in rev.why:
            op, of, writer, post = rev.why[vid]
            when = "after" if post else "before"
            kind = "a copy of array" + f" `{of.hint}` ({of.type})"
            name = rev._cache_name(v, "p") if rev._cached(v) else rev.namer(v)
            count = rev._counter(v) if rev._cached(v) and rev._kind(v, "p") == "stack" else None
            entries.append(
                f"{kind}, taken {when} {_where(op.loc)}\n"
                f"      why: the adjoint of that line reads it, and {_where(writer.loc)} may overwrite it"
                + _alias_note(rev, of, writer)
                + f"\n      size: {_size(of)} per execution"
                + (" of that line" if not rev._cached(v) else ", on a per-iteration cache")
                + used(name, count, True)
            )
        elif rev._cached(v) and not rev._remat(v, role):
            d = rev.def_op.get(vid)
            loop = _enclosing_loop(rev, rev.def_block[vid])
            what = "shadow of" if role == "d" else "value"
            kind = rev._kind(v, role)
            nest = len(rev._nest(v)) if role == "p" else 0
            how = {"prealloc": "a buffer allocated once at the loop's entry with its trip count" if nest < 2 else
                   f"a buffer allocated once at the entry of the {nest} loops around it, with their trip counts",
                   "grow": "a buffer that grows geometrically" if nest < 2 else
                   f"a buffer that grows geometrically, made room for at the entry of the {nest} loops around it",
                   "stack": "a stacked array buffer, one row per entry",
                   "list": "a list"}[kind]
            entries.append(
                f"{what} `{v.hint}` ({v.type}), defined at {_where(d.loc) if d else '?'}\n"
                f"      why: defined inside the loop at {_where(loop.loc) if loop else '?'}, "
                "read by the adjoint sweep\n"
                f"      size: one entry per execution ({_size(v)} each), in {how}"
                + used(rev._cache_name(v, role), None if kind == "list" else rev._counter(v), role == "p")
            )
    if not entries:
        lines.append("  nothing is cached: the adjoint sweep reads every value it needs in place")
    for k, e in enumerate(entries, 1):
        lines.append(f"  {k}. {e}")
    if measured is not None and entries:
        lines.append(f"  total cached by this call: {total} bytes")
    lines += _list_notes(rev)
    return "\n".join(lines)


def _list_notes(rev: Reverse) -> list[str]:
    """Lists the function builds by appending in a loop of run-time length (frontend/containers.py)."""
    from ..ir.core import walk

    out = []
    for op in walk(rev.fn.body):
        if op.kind == "prim" and "fills_list" in op.attrs:
            built, loop, calls, pre = op.attrs["fills_list"]
            room = "one item per iteration" if calls == 1 else f"{calls} items per iteration"
            room += f" plus the {pre} it had" if pre else ""
            v = op.result
            shadow = " (and its shadow, as big)" if rev.act.is_active(v) else ""
            if isinstance(v.type, T.List):
                out.append(f"  note: the list built at line {built} and appended to by the loop at line {loop} is a "
                           f"list `{v.hint}` ({v.type}) of the trip count's references to the appended arrays, "
                           f"allocated before that loop{shadow}: the primal's own memory, not a cache")
                continue
            dt = cast(T.Array, v.type).dtype
            item = "4 bytes" if dt == "float32" else "1 byte" if dt == "bool" else "8 bytes"
            out.append(f"  note: the list built at line {built} and appended to by the loop at line {loop} is an "
                       f"array `{v.hint}` ({v.type}) allocated before that loop with room for {room}, {item} "
                       f"per item{shadow}: the primal's own memory, not a cache")
    return out


def _alias_note(rev: Reverse, of: Value, writer: Op) -> str:
    """Whether the write reaches the array itself or memory that aliases it."""
    target = writer.args[writer.attrs["out"]] if writer.kind == "prim" else writer.args[0]
    roots_of = rev.act.roots.get(of.id, frozenset())
    roots_t = rev.act.roots.get(target.id, frozenset())
    params = {r for r in roots_of & roots_t if r[0] == "param"}
    if target is of:
        return ""
    members = [p.hint for k, p in enumerate(rev.fn.params)
               if rev.act.roots.get(p.id, frozenset()) & params]
    if len(members) > 1:
        return (f" (through an alias: {', '.join(f'`{m}`' for m in members)} share memory in this call; "
                "with disjoint arguments zymo compiles a version without this copy)")
    return f" (`{target.hint}` is the same memory as `{of.hint}`)"


def _size(v: Value) -> str:
    if isinstance(v.type, T.Array):
        return f"one {v.type} array"
    if isinstance(v.type, T.Scalar):
        return "4 bytes" if v.type.kind == "f32" else "8 bytes"
    return str(v.type)


def _enclosing_loop(rev: Reverse, block: Block):
    from ..ir.core import walk

    for op in walk(rev.fn.body):
        if op.kind in ("for", "while") and any(r is block or _contains(r, block) for r in op.regions):
            inner = [o for r in op.regions for o in walk(r) if o.kind in ("for", "while")
                     and any(rr is block or _contains(rr, block) for rr in o.regions)]
            return inner[-1] if inner else op
    return None


def _contains(region: Block, block: Block) -> bool:
    from ..ir.core import walk

    return any(r is block for o in walk(region) for r in o.regions)


def _basic_index(op: Op) -> bool:
    """Whether getitem `op` indexes with integers, slices, `None` and `...` only (a view)."""
    from ..ir.core import tree_values

    return all(isinstance(a.type, T.Scalar) for a in tree_values(op.attrs["index"], op.args))


def _index_parts(op: Op) -> list:
    tree = op.attrs["index"]
    return list(tree[1]) if tree[0] == "t" else [tree]


def _one_element(op: Op) -> bool:
    """Whether `setitem`/`getitem` `op` on an array selects a single element: a scalar index
    for every axis (no slice, `...` or `None`, none left out)."""
    parts = _index_parts(op)
    return (len(parts) == cast(T.Array, op.args[0].type).ndim
            and all(t[0] == "v" and isinstance(op.args[t[1]].type, T.Scalar) for t in parts))


def _free_names(rev: Writer, fwd: Writer, also: set[str] = frozenset()) -> set[str]:  # type: ignore[assignment]
    """Names the adjoint sweep reads but never assigns itself (and the names `also`), that the
    forward sweep assigns: what a split-mode tape must carry. (Cache counters are updated with
    `-=`, so they count as read; popped values and loop variables are assigned by the adjoint sweep.)"""
    import ast

    def scan(w: Writer) -> tuple[set[str], set[str]]:
        tree = ast.parse("\n".join(w.lines) or "pass")
        loads, stores = set(), set()
        aug = {id(n.target) for n in ast.walk(tree) if isinstance(n, ast.AugAssign)}
        for node in ast.walk(tree):
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


# rules whose call is an effect of its own (output), never left out of the forward sweep
_EFFECTS = frozenset({"builtins.print"})

# rules that never raise on numbers (ints are Python's or Numba's, floats IEEE's)
_SAFE_OPS = frozenset({"add", "sub", "mul", "neg", "pos", "lt", "le", "gt", "ge", "eq", "ne", "not",
                       "builtins.abs", "builtins.min", "builtins.max"})
# `math` functions that Numba computes without raising (nan or inf where Python raises)
_NUMBA_SAFE_MATH = frozenset({"math.exp", "math.log", "math.log1p", "math.expm1", "math.sqrt", "math.sin", "math.cos",
                              "math.tan", "math.tanh", "math.sinh", "math.cosh", "math.atan", "math.asin", "math.acos",
                              "math.atan2", "math.hypot", "math.fabs", "math.pow", "math.log10", "math.log2"})

# zymo's helpers and NumPy's functions that read only the shape and dtype of one argument
_SHAPE_ARGS = {("_rt", "expand_reduced"): 1, ("_rt", "unbroadcast"): 1, ("_rt", "as_tangent"): 1,
               ("_rt", "as_shape"): 1, ("_rt", "reduced_count"): 0, ("np", "zeros_like"): 0,
               ("np", "empty_like"): 0, ("np", "ones_like"): 0, ("np", "shape"): 0, ("np", "ndim"): 0}
_SHAPE_ATTRS = frozenset({"shape", "ndim", "dtype", "size"})


def _fresh_array_expr(expr: str) -> bool:
    """Whether `expr` (an adjoint contribution) evaluates to memory nothing else holds: an
    arithmetic expression, possibly summed back to an operand's shape by `_rt.unbroadcast`
    (which returns a new array or the one it was given). A name, a view or a helper's result
    may be shared, and a shadow adopting it would be written in place by later contributions."""
    import ast

    try:
        e = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return False
    if (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name)
            and e.func.value.id == "_rt" and e.func.attr == "unbroadcast" and len(e.args) == 2):
        e = e.args[0]
    # `np.where(c, a, b)` always returns a new array
    where = (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name)
             and e.func.value.id == "np" and e.func.attr == "where" and len(e.args) == 3 and not e.keywords)
    return where or isinstance(e, (ast.BinOp, ast.UnaryOp))


def _shape_only_names(src: str) -> frozenset[str]:
    """The names `src` (statements) reads only for their shape or dtype: every mention is
    `x.shape` (`ndim`, `dtype`, `size`) or an argument `_SHAPE_ARGS` says a call reads only
    that way."""
    import ast

    tree = ast.parse("def _f():\n" + "".join(f"    {line}\n" for line in src.splitlines()) + "    pass\n")
    shape_uses: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _SHAPE_ATTRS and isinstance(node.value, ast.Name):
            shape_uses[node.value.id] = shape_uses.get(node.value.id, 0) + 1
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(
                node.func.value, ast.Name):
            at = _SHAPE_ARGS.get((node.func.value.id, node.func.attr))
            arg = node.args[at] if at is not None and len(node.args) > at else None
            if isinstance(arg, ast.Name):
                shape_uses[arg.id] = shape_uses.get(arg.id, 0) + 1
    uses: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            uses[node.id] = uses.get(node.id, 0) + 1
    return frozenset(name for name, k in shape_uses.items() if uses.get(name) == k)


def _names_a_dead_value(rev: Reverse, src: str) -> bool:
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

