"""Checkpointing: reverse mode under a memory limit (`memory_limit=`, issue 35).

Contract: `checkpointed(fn, rev0, limit, ...)` is called by `pipeline.compile_program` with the store-all
generator `rev0` of `fn`. The top-level `for` and `while` loops whose iterations record a tape
(`taped_loops`) are *checkpointed* (with no limit, only those marked `zymo.checkpointed(...)`,
`op.attrs["checkpoint"]`); the others, and everything outside them, are generated as without a
limit. For such a loop the IR gets, just before it, identity ops for its start, stop and carried
numbers (`zymo.checkpoint_bound`, `zymo.checkpoint_carry`), so that the generated driver can run
the loop over any range of iterations from any state; the IR is restored after the program is
written.

A `for` loop (`Checkpoint`) makes a `runtime.checkpoint.Plan` at its entry. When the whole tape fits
the limit, the loop is taped and reversed as without a limit. Otherwise the forward sweep runs
only the primal of the loop, storing snapshots of the loop's state at the iterations the
schedule says (Revolve), and the adjoint sweep restores snapshots, runs iterations again (the
primal, then the taped forward of the iterations it reverses) and their adjoint. A `while` loop
(`WhileCheckpoint`, also a `for` with `break`) makes a `runtime.checkpoint.OnlinePlan` and is always
checkpointed. Loops share the limit (`Checkpoint._room`). The state of the loop: its carried
numbers, and the memory defined before the loop that it writes, or that it reads and the code
after it writes (each snapshot copies all of it). What cannot be snapshotted is refused at the
loop's line: carried arrays or lists, writes into memory zymo cannot trace to an array or list
of arrays defined before the loop. Split mode: the tape carries the plans and the snapshots.
Backends: Python and "kernels"; "prefer" warns and runs Python; Numba ("always", `numba=True`) runs
as "kernels" (`pipeline.compile_program`): the driver, which holds the plans and snapshots, is Python,
and the loops of numbers, the steps and their recomputation included, compile with Numba.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ZymoSourceError
from ..ir import types as T
from ..ir.core import Function, Op, Value, walk
from ..rules.registry import Rule, lookup
from .emit import Emitter, assign_all, range_args, span, trip_count

if TYPE_CHECKING:
    from .reverse import Reverse
    from .writer import Writer


def _same(x: Any) -> Any:
    return x


class checkpoint_bound(Rule, key="zymo.checkpoint_bound", fn=_same, template="{0}", nondiff=True):
    """A checkpointed loop's bound, as a name the driver sets per range of iterations."""
    user = True  # made by zymo only: no rule cases (test_rules exempts these, as user rules)


class checkpoint_carry(Rule, key="zymo.checkpoint_carry", fn=_same, template="{0}", elementwise=True):
    """A checkpointed loop's initial carried number, as a name the driver sets from a snapshot."""
    user = True  # made by zymo only; its derivative is tested through tests/checkpoint/test_memory_limit.py
    def jvp_x(t, ans, x): return t
    def vjp_x(g, ans, x): return g


class CheckpointError(ZymoSourceError):
    """A loop zymo cannot checkpoint under the memory limit."""


def taped_loops(rev0: Reverse) -> list[Op]:
    """The top-level loops (`for` and `while`) in which the store-all program `rev0` records a tape."""
    out = []
    for op in rev0.fn.body.ops:
        if op.kind not in ("for", "while"):
            continue
        taped = any(rev0._cached(rev0.values[vid]) and not rev0._remat(rev0.values[vid], role)
                    and rev0._inside(rev0.def_block[vid], op) for vid, role in rev0.needed)
        if taped:
            out.append(op)
    return out


def iter_bytes_estimate(rev0: Reverse, op: Op) -> tuple[int, int]:
    """(bytes of the numbers, count of arrays) one iteration of `op` records in `rev0`'s tape."""
    scalars = arrays = 0
    for vid, role in rev0.needed:
        v = rev0.values[vid]
        if rev0._cached(v) and not rev0._remat(v, role) and rev0._inside(rev0.def_block[vid], op):
            if isinstance(v.type, T.Scalar):
                scalars += 4 if v.type.kind == "f32" else 8
            else:
                arrays += 1
    return scalars, arrays


class Checkpoint:
    """One checkpointed loop: its IR edits and the code the generator writes for it."""

    def __init__(self, fn: Function, op: Op, limit: int | None, est: tuple[int, int]) -> None:
        self.fn, self.op, self.limit, self.est = fn, op, limit, est
        self.share = (0, 1)  # (this loop's place, how many) among the function's checkpointed loops
        self.taped_fwd: Writer | None = None
        self.marker = f"# zymo checkpoint forward {id(self)}"
        self.carries = op.regions[0].args[1:] if op.kind == "for" else op.regions[0].args
        for c in self.carries:
            if T.is_memory(c.type):
                raise CheckpointError(
                    f"zymo cannot checkpoint this loop: it carries `{c.hint}`, an array or list rebound in "
                    "each iteration", op.loc, why="a snapshot holds numbers and memory defined before the loop",
                    hint="update the array in place (x[...] = ...), or raise memory_limit")
        for inner in walk(op.regions[0]):
            key = inner.attrs.get("key", "") if inner.kind == "prim" else ""
            if key.startswith("numpy.random."):  # an inactive function or custom rule must draw nothing here
                raise CheckpointError(
                    "zymo cannot checkpoint this loop: it draws from np.random", inner.loc or op.loc,
                    why="the adjoint sweep runs checkpointed iterations again, which would draw other numbers",
                    hint="draw the numbers before the loop (one array) and index it, or raise memory_limit")
        self.state = self._state()
        # the IR edits: identity ops the driver can rebind
        self.old_args = list(op.args)
        self.index = fn.body.ops.index(op)
        new_ops, args = [], list(op.args)
        first = 3 if op.kind == "for" else 0
        for k in (0, 1) if op.kind == "for" else ():
            v = Value(T.INT, "_ck_lo" if k == 0 else "_ck_hi")
            new_ops.append(Op("prim", [args[k]], [v], op.loc, {"key": "zymo.checkpoint_bound",
                                                              "pos": (("v", 0),), "kw": ()}))
            args[k] = v
        for k in range(first, len(args)):
            c = args[k]
            v = Value(c.type, c.hint.lstrip("$") + "_0")
            key = "zymo.checkpoint_carry" if c.type.differentiable else "zymo.checkpoint_bound"
            new_ops.append(Op("prim", [c], [v], op.loc, {"key": key, "pos": (("v", 0),), "kw": ()}))
            args[k] = v
        self.new_ops = new_ops
        fn.body.ops[self.index:self.index] = new_ops
        op.args[:] = args

    def undo(self) -> None:
        ops = self.fn.body.ops
        if not self.new_ops:  # a while loop that carries nothing
            return
        del ops[ops.index(self.new_ops[0]):ops.index(self.new_ops[0]) + len(self.new_ops)]
        self.op.args[:] = self.old_args

    # -- the state --------------------------------------------------------------------------
    def _before(self, v: Value) -> bool:
        """Whether `v` is a parameter or defined at the top level before the loop."""
        if v in self.fn.params:
            return True
        owner = v.owner
        return isinstance(owner, Op) and owner in self.fn.body.ops[:self.fn.body.ops.index(self.op)]

    def _base(self, v: Value, why: Op) -> Value | None:
        """The memory defined before the loop that write or read target `v` is part of (None: memory
        made inside the loop, fresh in each iteration)."""
        seen = 0
        while not self._before(v):
            seen += 1
            owner = v.owner
            if isinstance(owner, Op) and owner.kind == "getitem" and seen < 64:
                v = owner.args[0]
                continue
            if isinstance(owner, Op) and owner.kind == "prim" and seen < 64:
                rule = lookup(owner.attrs["key"])
                if rule.view or rule.maybe_view:
                    v = owner.args[0]
                    continue
                if self._inside_loop(owner):
                    return None  # a fresh array made in the iteration
            raise CheckpointError(
                "zymo cannot checkpoint this loop: it writes memory whose origin zymo cannot trace for a snapshot",
                why.loc, why=f"`{v.hint}` is not an array or list defined before the loop at line {self.op.loc.line}",
                hint="write into arrays defined before the loop, or raise memory_limit")
        if isinstance(v.type, T.Array) or (isinstance(v.type, T.List) and isinstance(v.type.elt, T.Array)):
            return v
        raise CheckpointError(
            f"zymo cannot checkpoint this loop: it writes `{v.hint}` ({v.type}), which a snapshot cannot copy",
            why.loc, why="a snapshot copies arrays and lists of arrays", hint="raise memory_limit")

    def _inside_loop(self, o: Op) -> bool:
        return any(o is x for r in self.op.regions for x in walk(r))

    def _state(self) -> list[Value]:
        from ..analysis.overwrite import Overwrites

        out: list[Value] = []

        def add(v: Value | None) -> None:
            if v is not None and all(v is not s for s in out):
                out.append(v)

        for w, target in Overwrites._writes(self.op):
            if w.kind == "setitem" and isinstance(w.args[0].type, T.List):
                raise CheckpointError("zymo cannot checkpoint this loop: it rebinds an item of a list", w.loc,
                                      hint="write into the item's array in place, or raise memory_limit")
            add(self._base(target, w))
        # memory the loop reads that the code after it overwrites: restored for the recomputation
        later = self.fn.body.ops[self.fn.body.ops.index(self.op) + 1:]
        written_after = [(w, t) for o in later for w, t in Overwrites._writes(o)]
        if written_after:
            read = [a for r in self.op.regions for o in walk(r) for a in o.args if T.is_memory(a.type)]
            for w, t in written_after:
                b = t
                while not self._before(b) and isinstance(b.owner, Op) and b.owner.kind in ("getitem", "prim"):
                    b = b.owner.args[0]
                if not self._before(b):
                    continue
                if any(self._same_memory(b, r) for r in read):
                    add(self._base(b, w))
        return out

    def _same_memory(self, b: Value, r: Value) -> bool:
        while not self._before(r) and isinstance(r.owner, Op) and r.owner.kind in ("getitem", "prim") \
                and r.owner.args:
            r = r.owner.args[0]
        return r is b or not self._before(r)

    # -- code ---------------------------------------------------------------------------------
    def _names(self, rev: Reverse) -> tuple[str, str, str]:
        # by the loop's place among the function's checkpointed loops: distinct, and the same text
        # in every process (an id could repeat modulo a number, helper 71, and changes between runs)
        return tuple(f"_ck{self.share[0]}_{s}" for s in ("plan", "snaps", "act"))  # type: ignore[return-value]

    def forward(self, rev: Reverse, op: Op, w: Writer) -> None:
        """The forward sweep at the loop: the taped loop when it fits, else the primal with snapshots."""
        from .writer import Writer

        n = rev.namer
        taped = Writer()
        ck = rev.checkpoints.pop(id(op))
        try:
            rev.fwd_op(op, taped)
        finally:
            rev.checkpoints[id(op)] = ck
        self.taped_fwd = taped
        plan, snaps, _ = self._names(rev)
        a, b, s = (n(v) for v in op.args[:3])
        scal, arrs = self.est
        state = ", ".join(n(v) for v in self.state)
        w("from zymo.runtime import checkpoint as _ck")
        w(f"{plan}_n = {trip_count(a, b, s)}")
        w(f"{plan}_sb = _ck.nbytes({state}) + {8 * (len(op.args) - 3)}" if self.state else
          f"{plan}_sb = {8 * (len(op.args) - 3) or 8}")
        big = f"max(_ck.nbytes(x) for x in ({state},))" if self.state else "8"
        w(f"{plan} = _ck.Plan({plan}_n, {plan}_sb, {scal} + {arrs} * {big}, {self._room(w)}, {op.loc.line}, "
          f"{op.attrs.get('checkpoint')})")
        w(f"_ck_room -= {plan}.held_bytes()")
        self._new_snaps(rev, w)
        with w.indent(f"if {plan}.fits:"):
            for line in taped.lines:
                w(line)
        with w.indent("else:"):
            body = op.regions[0]
            assign_all(w, [(n(c), n(i)) for c, i in zip(body.args[1:], op.args[3:], strict=False)])
            with w.indent(f"for _ck_a in {plan}.forward:"):
                self._advance(rev, op, w)
            assign_all(w, [(n(r), n(c)) for r, c in zip(op.results, body.args[1:], strict=False)])

    def _room(self, w: Writer) -> str:
        """The limit of this loop's plan: the loops share the memory limit. The forward sweep holds
        what each loop's plan keeps for its adjoint (`held_bytes`) until the adjoint sweep reaches
        that loop, after every later loop's, so a loop gets an equal part of what the loops before
        it left (`_ck_room`), the first a 1/m part of the limit."""
        k, m = self.share
        if k == 0:
            w(f"_ck_room = {self.limit if self.limit is not None else 1 << 62}")
        return "_ck_room" if k == m - 1 else f"_ck_room // {m - k}"

    def _new_snaps(self, rev: Reverse, w: Writer) -> None:
        """The snapshots' dict (`runtime.checkpoint.Snapshots`); in split mode a slot of the tape, whose
        buffers a tape passed back in lends to this forward sweep."""
        _, snaps, _ = self._names(rev)
        if rev.split:
            slot = len(rev.tape_slots)
            rev.tape_slots.append(snaps)
            w(f"{snaps} = _ck.reuse_snaps({rev.tape_in}, {slot})")
        else:
            w(f"{snaps} = _ck.Snapshots()")

    @staticmethod
    def _adjoint_prelude(rev: Reverse, w: Writer) -> None:
        """The adjoint sweep's own import of the run-time module; in split mode, the taped forward
        it runs allocates fresh caches (no tape passed back in there)."""
        w("from zymo.runtime import checkpoint as _ck")
        if rev.split:
            w(f"{rev.tape_in} = None")

    def tape_names(self, rev: Reverse) -> set[str]:
        """Names the adjoint sweep assigns that it may read before assigning: the loop's bounds
        and first carried numbers, and what the taped forward assigns (caches, counters, extents),
        which the adjoint sweep runs again but reads from the forward sweep where the whole tape
        fitted. A split-mode tape carries them too (`reverse._free_names`)."""
        import ast

        from .. import pyast

        out = {rev.namer(v) for v in self.op.args}
        if self.taped_fwd is not None:
            tree = ast.parse("\n".join(self.taped_fwd.lines) or "pass")
            out |= {x.id for x in pyast.walk(tree) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store)}
        return out

    def _advance(self, rev: Reverse, op: Op, w: Writer) -> None:
        """Interpret an ADVANCE action `_ck_a`: store a snapshot, then run the primal of its steps."""
        n = rev.namer
        plan, snaps, _ = self._names(rev)
        body = op.regions[0]
        carries = [n(c) for c in body.args[1:]]
        with w.indent("if _ck_a[3]:"):
            items = [f"{snaps}.snap({n(v)})" for v in self.state] + carries
            w(f"{snaps}[_ck_a[1]] = ({', '.join(items)}{',' if len(items) == 1 else ''})")
        a, s = n(self.old_args[0]), n(op.args[2])
        w(f"_ck_j0, _ck_j1 = {plan}.iterations(_ck_a[1], _ck_a[2])")
        with w.indent(f"for {n(body.args[0])} in range({a} + _ck_j0 * {s}, {a} + _ck_j1 * {s}, {s}):"):
            self._primal_block(rev, body, w)
            assign_all(w, [(n(c), n(y)) for c, y in zip(body.args[1:], body.ops[-1].args, strict=False)])

    def _primal_block(self, rev: Reverse, block: Any, w: Writer) -> None:
        n, e = rev.namer, Emitter(rev.namer, w)
        for op in block.ops:
            k = op.kind
            if k in ("const", "getitem", "setitem", "prim"):
                e.primal(op)
            elif k == "for":
                body = op.regions[0]
                assign_all(w, [(n(c), n(i)) for c, i in zip(body.args[1:], op.args[3:], strict=False)])
                with w.indent(f"for {n(body.args[0])} in range({range_args(*(n(v) for v in op.args[:3]))}):"):
                    self._primal_block(rev, body, w)
                    assign_all(w, [(n(c), n(y)) for c, y in zip(body.args[1:], body.ops[-1].args, strict=False)])
                assign_all(w, [(n(r), n(c)) for r, c in zip(op.results, body.args[1:], strict=False)])
            elif k == "while":
                cond, body = op.regions
                assign_all(w, [(n(c), n(i)) for c, i in zip(cond.args, op.args, strict=False)])
                with w.indent("while True:"):
                    self._primal_block(rev, cond, w)
                    assign_all(w, [(n(b), n(c)) for b, c in zip(body.args, cond.args, strict=False)])
                    self._primal_block(rev, body, w)
                    assign_all(w, [(n(c), n(y)) for c, y in zip(cond.args, body.ops[-1].args, strict=False)])
                assign_all(w, [(n(r), n(c)) for r, c in zip(op.results, cond.args, strict=False)])
            elif k == "if":
                for region, header in zip(op.regions, (f"if {n(op.args[0])}:", "else:"), strict=False):
                    with w.indent(header):
                        self._primal_block(rev, region, w)
                        assign_all(w, [(n(r), n(y)) for r, y in zip(op.results, region.ops[-1].args, strict=False)])
            elif k == "condition":
                with w.indent(f"if not {n(op.args[0])}:"):
                    w("break")
            elif k in ("yield", "return"):
                pass
            else:  # pragma: no cover
                raise AssertionError(k)

    def adjoint(self, rev: Reverse, op: Op, w: Writer) -> None:
        """The adjoint sweep at the loop: the store-all adjoint when the tape fitted, else the driver
        that restores snapshots, recomputes and reverses steps (`runtime.checkpoint.Plan.reverse`)."""
        n = rev.namer
        plan, snaps, _ = self._names(rev)
        body = op.regions[0]
        carries = body.args[1:]
        names = rev._carry_seeds(carries, op.results, w)
        ys = body.ops[-1].args
        for nm, c in zip(names, carries, strict=False):
            if nm is not None:
                rev.adj_used.add(c.id)
        inner = rev.rev_block(body, seeds=[(y, nm) for y, nm in zip(ys, names, strict=False) if nm])
        rev._carry_back(inner, names, carries)
        lo, hi, step = (rev.use(v) for v in op.args[:3])
        self._adjoint_prelude(rev, w)
        iv = n(body.args[0])
        r = n.fresh("_r")
        loop = self._reverse_loop(lo, hi, step, iv, r)
        with w.indent(f"if {plan}.fits:"):
            for line in loop[0]:
                w(line)
            with w.indent(loop[1]):
                w(loop[2])
                for line in inner.lines:
                    w(line)
        with w.indent("else:"):
            with w.indent(f"for _ck_a in {plan}.reverse:"):
                with w.indent("if _ck_a[0] == 0:"):
                    self._advance(rev, op, w)
                with w.indent("elif _ck_a[0] == 1:"):
                    w(f"_ck_s = {snaps}[_ck_a[1]] if _ck_a[3] else {snaps}.pop(_ck_a[1])")
                    for k, v in enumerate(self.state):
                        w(f"_ck.put({n(v)}, _ck_s[{k}])")
                    for k, c in enumerate(carries):
                        w(f"{n(c)} = _ck_s[{len(self.state) + k}]")
                with w.indent("else:"):
                    a, s = n(self.old_args[0]), n(op.args[2])
                    w(f"_ck_j0, _ck_j1 = {plan}.iterations(_ck_a[1], _ck_a[2])")
                    w(f"{lo} = {a} + _ck_j0 * {s}")
                    w(f"{hi} = {a} + _ck_j1 * {s}")
                    for c, i in zip(carries, op.args[3:], strict=False):
                        w(f"{n(i)} = {n(c)}")
                    w(self.marker)
                    for line in loop[0]:
                        w(line)
                    with w.indent(loop[1]):
                        w(loop[2])
                        for line in inner.lines:
                            w(line)
        rev._carry_out(w, names, op.args[3:])

    @staticmethod
    def _reverse_loop(lo: str, hi: str, step: str, iv: str, r: str) -> tuple[list[str], str, str]:
        """(lines before, header, index line) of the iterations of `range(lo, hi, step)` backwards."""
        if step == "1":
            return [], f"for {r} in range({span(lo, hi)}):", f"{iv} = {hi} - 1 - {r}"
        trip = f"{r}_n"
        return ([f"{trip} = {trip_count(lo, hi, step)}"], f"for {r} in range({trip}):",
                f"{iv} = {lo} + ({trip} - 1 - {r}) * {step}")

    def splice(self, rev_lines: list[str]) -> None:
        """Put the taped forward of the loop at the marker in the adjoint sweep."""
        assert self.taped_fwd is not None
        for k, line in enumerate(rev_lines):
            if line.strip() == self.marker:
                pad = line[:len(line) - len(line.lstrip())]
                rev_lines[k:k + 1] = [pad + t for t in self.taped_fwd.lines]
                return
        raise AssertionError("checkpoint marker not found")


class WhileCheckpoint(Checkpoint):
    """A checkpointed `while` loop (also a `for` with `break`): its trip count is known only when
    it ends, so it is always checkpointed, by `runtime.checkpoint.OnlinePlan` (online doubling, then
    Revolve between the snapshots kept)."""

    def forward(self, rev: Reverse, op: Op, w: Writer) -> None:
        """The forward sweep at the loop: its primal a step at a time, snapshots where the plan says."""
        from .writer import Writer

        n = rev.namer
        taped = Writer()
        ck = rev.checkpoints.pop(id(op))
        rev.while_header[id(op)] = "for _ck_it in range(_ck_cnt):"  # a TAPE action runs _ck_cnt iterations
        try:
            rev.fwd_op(op, taped)
        finally:
            rev.checkpoints[id(op)] = ck
            del rev.while_header[id(op)]
        self.taped_fwd = taped
        plan, snaps, _ = self._names(rev)
        scal, arrs = self.est
        state = ", ".join(n(v) for v in self.state)
        w("from zymo.runtime import checkpoint as _ck")
        w(f"{plan}_sb = _ck.nbytes({state}) + {8 * len(self.carries)}" if self.state else
          f"{plan}_sb = {8 * len(self.carries) or 8}")
        big = f"max(_ck.nbytes(x) for x in ({state},))" if self.state else "8"
        w(f"{plan} = _ck.OnlinePlan({plan}_sb, {scal} + {arrs} * {big}, {self._room(w)}, {op.loc.line}, "
          f"{op.attrs.get('checkpoint')})")
        w(f"_ck_room -= {plan}.held_bytes()")
        self._new_snaps(rev, w)
        cond = op.regions[0]
        assign_all(w, [(n(c), n(i)) for c, i in zip(cond.args, op.args, strict=False)])
        w("_ck_more = True")
        with w.indent("while _ck_more:"):
            with w.indent(f"if {plan}.store({snaps}):"):
                self._store(rev, w, f"{plan}.step")
            self._run(rev, op, w, f"{plan}.block")
            w(f"_ck_more = {plan}.advanced(_ck_c, {snaps})")
        assign_all(w, [(n(r), n(c)) for r, c in zip(op.results, cond.args, strict=False)])

    def _store(self, rev: Reverse, w: Writer, at: str) -> None:
        n = rev.namer
        _, snaps, _ = self._names(rev)
        items = [f"{snaps}.snap({n(v)})" for v in self.state] + [n(c) for c in self.op.regions[0].args]
        w(f"{snaps}[{at}] = ({', '.join(items)}{',' if len(items) == 1 else ''})")

    def _run(self, rev: Reverse, op: Op, w: Writer, count: str) -> None:
        """The primal of at most `count` iterations from the state in the condition's arguments;
        `_ck_c` counts those run (fewer when the loop ends)."""
        n = rev.namer
        cond, body = op.regions
        w("_ck_c = 0")
        with w.indent(f"while _ck_c < {count}:"):
            self._primal_block(rev, cond, w)  # ends with `if not ...: break`
            assign_all(w, [(n(b), n(c)) for b, c in zip(body.args, cond.args, strict=False)])
            self._primal_block(rev, body, w)
            assign_all(w, [(n(c), n(y)) for c, y in zip(cond.args, body.ops[-1].args, strict=False)])
            w("_ck_c += 1")

    def adjoint(self, rev: Reverse, op: Op, w: Writer) -> None:
        """The adjoint sweep at the loop: the driver of `OnlinePlan.reverse`."""
        n = rev.namer
        plan, snaps, _ = self._names(rev)
        cond, body = op.regions
        trip = rev.trips.get(id(op))
        if trip is None:
            trip = Value(T.INT, "_trip")
            rev.values[trip.id] = trip
            rev.def_block[trip.id] = rev.blocks_of_op[id(op)]
            rev.trips[id(op)] = trip
        names = rev._carry_seeds(body.args, op.results, w)
        ys = body.ops[-1].args
        for nm, c in zip(names, body.args, strict=False):
            if nm is not None:
                rev.adj_used.add(c.id)
        inner = rev.rev_block(body, seeds=[(y, nm) for y, nm in zip(ys, names, strict=False) if nm])
        rev._carry_back(inner, names, body.args)
        self._adjoint_prelude(rev, w)
        with w.indent(f"for _ck_a in {plan}.reverse({snaps}):"):
            w(f"_ck_j0, _ck_j1 = {plan}.iterations(_ck_a[1], _ck_a[2])")
            with w.indent("if _ck_a[0] == 0:"):
                with w.indent("if _ck_a[3]:"):
                    self._store(rev, w, "_ck_a[1]")
                self._run(rev, op, w, "_ck_j1 - _ck_j0")
            with w.indent("elif _ck_a[0] == 1:"):
                w(f"_ck_s = {snaps}[_ck_a[1]] if _ck_a[3] else {snaps}.pop(_ck_a[1])")
                for k, v in enumerate(self.state):
                    w(f"_ck.put({n(v)}, _ck_s[{k}])")
                for k, c in enumerate(cond.args):
                    w(f"{n(c)} = _ck_s[{len(self.state) + k}]")
            with w.indent("else:"):
                w("_ck_cnt = _ck_j1 - _ck_j0")
                for c, i in zip(cond.args, op.args, strict=False):
                    w(f"{n(i)} = {n(c)}")
                w(self.marker)
                with w.indent(f"for _ in range({rev.use(trip)}):"):
                    for line in inner.lines:
                        w(line)
        rev._carry_out(w, names, op.args)


def _outside_zymo() -> int:
    """The `stacklevel` of the first caller outside zymo (and the decorators' stdlib frames)."""
    import sys

    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and (frame.f_globals.get("__name__", "").split(".")[0] in ("zymo", "contextlib",
                                                                                         "functools")):
        frame, level = frame.f_back, level + 1
    return level


def checkpointed(fn: Function, rev0: Reverse, limit: int | None, analyze: Any, options: dict, split: bool = False,
                 backend: str = "python") -> tuple | None:
    """The program with the taped loops of `rev0` checkpointed under `limit` bytes, as
    `(source, names, active params, generator, activity)`; None when no loop records a tape.
    `backend` "prefer" warns here (the program runs as Python); "always" runs as "kernels"."""
    from .reverse import Reverse

    loops = taped_loops(rev0)
    if limit is None:  # no memory limit: only the loops marked `zymo.checkpointed(...)`
        loops = [op for op in loops if "checkpoint" in op.attrs]
    if not loops:
        return None
    if backend == "prefer":
        import warnings

        from ..errors import ZymoWarning

        loc = loops[0].loc
        warnings.warn(f"the derivative of {fn.name} runs as Python, not Numba: memory_limit checkpoints the loop at "
                      f"line {loc.line} of {loc.file}, whose driver runs as Python (numba='kernels' compiles its "
                      "loops of numbers)", ZymoWarning, stacklevel=_outside_zymo())
    cks: list[Checkpoint] = []
    try:
        for op in loops:
            cls = WhileCheckpoint if op.kind == "while" else Checkpoint
            cks.append(cls(fn, op, limit, iter_bytes_estimate(rev0, op)))
        for k, ck in enumerate(cks):
            ck.share = (k, len(cks))
        act = analyze()
        rev = Reverse(fn, act, options["seed_return"], options["width"], options["dims"], options["internal"],
                      options["no_need"], options["need_return"], False)
        rev.checkpoints = {id(ck.op): ck for ck in cks}
        src, names, params = rev.run(split)
    finally:
        for ck in reversed(cks):
            ck.undo()
    return src, names, params, rev, act
