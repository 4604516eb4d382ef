"""What every part of reverse mode shares: the inputs, the analyses, the index, the records.

Contract: `ReverseState.__init__` sets every attribute of the generator (the mixins of this
package add methods only): the function and its activity, the analyses it reads (one shared
`analysis.index.Index`, `Overwrites`, `FixedShapes`, `NeverUnsigned`, `Extents`, the
increment stores of `increments.py`), the names,
what the adjoint sweep reads (`needed` and the other records `needs.py` keeps), the tape plan
(`tape.TapePlan`), and what the program's writing leaves for later stages. Its methods answer
questions of the IR alone: whether a value needs a per-iteration cache, the loop around a block.

The package is a chain of mixins, each reading only those below it: `state` < `shadows`
(shadow allocation, adjoint shapes) < `needs` (what the adjoint sweep reads) < `plan` (the
tape plan) < `dead` (dead-primal elimination) < `facts` (facts for later stages) <
`augmented` (forward-sweep emitter) < `adjoint` (adjoint-sweep emitter) < `Reverse` (driver).
"""
from __future__ import annotations

from typing import Any

from ...analysis.activity import Activity
from ...analysis.bounds import NeverUnsigned
from ...analysis.extents import Extents
from ...analysis.index import Index
from ...analysis.overwrite import Overwrites
from ...analysis.shapes import FixedShapes
from ...ir.core import Block, Function, Op, Value
from ..emit import Emitter
from ..naming import Namer
from ..writer import Writer
from .increments import Increments
from .tape import TapePlan


class ReverseState:
    def __init__(self, fn: Function, act: Activity, seed_return: bool, width: int = 1, dims=None,
                 internal: frozenset = frozenset(), no_need: frozenset = frozenset(), need_return: bool = True,
                 numba: bool = False):
        self.fn, self.act, self.seed_return = fn, act, seed_return
        # parameters whose primal contents the caller does not need after the call
        # (`DuplicatedNoNeed`), and whether it needs the primal return value (`_dead_primal_ops`)
        self.no_need, self.need_return = no_need, need_return
        self.numba = numba  # the program computes as Numba does (no bounds checks, no math domain errors)
        self.internal = internal  # parameter indices whose shadows are zeros at entry (`zero_shadows`)
        self.split = False  # split mode: an augmented forward returning a tape, then the reverse (`run`)
        # -- the analyses and the index --------------------------------------------------------
        self.index = Index(fn)
        self.extents = Extents(fn, dims)  # which adjoints need no sum over broadcast dimensions
        self.never_unsigned = NeverUnsigned(fn, self.index)  # ints a reversed loop may use as they are
        self.overwrites = Overwrites(fn, act, self.index)
        self.shapes = FixedShapes(fn, self.index)
        self.increments = Increments(fn, act, self.index, self.overwrites)  # `x[s] += e` (`increments.py`)
        self.depth = self.index.depth              # block id -> loop depth
        self.blocks_of_op = self.index.block_of_op  # op id -> its block
        self.def_op = self.index.def_op            # value id -> the op (or loop) that defines it
        self.values: dict[int, Value] = dict(self.index.values)  # and the snapshots and trip counts made here
        self.def_block: dict[int, Block] = dict(self.index.def_block)
        self.recomputed: set[int] = set(self.index.loop_var)  # loop induction variables
        # -- names --------------------------------------------------------------------------------
        self.namer = Namer()
        self.namer.width = width
        self.e = Emitter(self.namer, Writer())
        self.seeds: list[str] = []  # the seeds of an Active return, one per lane
        self.tape_in: str | None = None  # split mode: the tape passed back in
        self.tape_names: list[str] = []  # split mode: the tape's items, in order
        self.keep = False  # fused mode as Python: caches are kept for the next call (`run`)
        self.kept: list[tuple[str, str]] = []  # (name, dtype) of the caches allocated once per call
        # -- what the adjoint sweep reads (`needs.py`) ---------------------------------------------
        self.needed: set[tuple[int, str]] = set()  # (value id, "p" | "d") read by the adjoint sweep
        self.adj_used: set[int] = set()  # floats whose adjoint the adjoint sweep names
        self.shape_needed: set[int] = set()    # values whose shape the adjoint sweep reads
        self.snap_pre: dict[int, list[tuple[Value, Value]]] = {}   # op id -> [(snapshot, of)]
        self.snap_post: dict[int, list[tuple[Value, Value]]] = {}
        self.why: dict[int, tuple] = {}        # snapshot id -> (op, array, writer, after op?)
        self.trips: dict[int, Value] = {}      # while op id -> trip count value
        self.at_top = False  # the adjoint sweep is writing the function body's own ops
        # -- shadows the adjoint sweep creates, and adjoint shapes (`shadows.py`) ---------------------
        # shadows of temporaries, created by the adjoint sweep (see `_lazy`, `_loop_lazy`):
        # (value id, lane) -> how the adjoint sweep referred to them, in order
        self.lazy_refs: dict[tuple[int, int], list] = {}
        self.deferred: set[int] = set()  # temporaries whose adjoint keeps its use's shape
        self.whole: set[tuple[int, str]] = set()  # (value id, adjoint term) known to have its shape
        self.deferred_to: dict[int, Any] = {}  # deferred temporary id -> its use's result (or store op)
        # value id -> its adjoint is one number (`_uniform`): decided once, when first asked (the
        # answer records the extents' guards it relied on)
        self.uniform: dict[int, bool] = {}
        # -- the tape plan (`plan.py`) and the forward sweep ---------------------------------------
        self.plan = TapePlan()
        self.tape_slots = self.plan.tape_slots  # `checkpoint.py` appends its snapshots' slot
        self.dead: set[int] = set()  # top-level primal ops the forward sweep leaves out (`dead.py`)
        # top-level primal ops it computes only where NumPy's error state may raise (`dead.py`)
        self.quiet_dead: set[int] = set()
        self.loop_trips: dict[int, str] = {}   # top-level for op id -> its trip count's name
        self.checkpoints: dict[int, Any] = {}  # loop op id -> its `checkpoint.Checkpoint` (memory limit)
        self.while_header: dict[int, str] = {}  # while op id -> the header a checkpoint runs it by
        # -- facts for later stages (`facts.py`) ------------------------------------------------------
        self.adjoint_names: dict[str, set[str]] = {"float": set(), "memory": set()}  # `float_adjoints`
        self.ints: set[str] = set()  # cache counters and recorded extents (`int_names`)
        self.buffers: set[str] = set()  # caches that are arrays (`nonneg_facts`)
        self.counters: set[str] = set()  # their entry counters, never negative
        self.by_name: dict[str, Value | None] | None = None  # shadow name -> its value, once written

    def _cached(self, v: Value) -> bool:
        """Whether `v` needs a per-iteration cache: defined in a loop, and not a constant
        (a constant's variable holds the same value in every iteration)."""
        return (v.id not in self.recomputed and not v.is_const
                and self.depth[id(self.def_block[v.id])] > 0)

    def blocks_of_op_list(self, op: Op) -> list[Op]:
        """The ops of the block `op` is in."""
        return self.blocks_of_op[id(op)].ops

    def _loop_of(self, block: Block) -> Op | None:
        """The nearest loop op around `block`."""
        return self.index.loop_of(block)

    def _inside(self, block: Block, op: Op) -> bool:
        """Whether `block` is one of `op`'s regions or nested in one."""
        return self.index.inside(block, op)

    def _int(self, name: str) -> str:
        """`name`, recorded as one that only ever holds ints (`int_names`; a split-mode tape
        that carries it starts it at 0)."""
        self.ints.add(name)
        self.namer.typed_zero[name] = "0"
        return name

    def _lanes_of(self, role: str):
        """The lanes a role comes in: the primal once, a shadow once per lane."""
        return self.namer.lanes() if role == "d" else (0,)

    def _counter(self, v: Value) -> str:
        """The entry counter of `v`'s cache."""
        return self.namer.role(v, "k", "_k_" + v.hint.lstrip("$"))
