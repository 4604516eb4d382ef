"""Which memory writes can run after a given op (the "may be overwritten" question).

Contract: `Overwrites(fn, act).first_writer(op, v)` returns a write op (a store
or an `out=` call) that may change the contents of array `v` after `op` has
run and before the function returns, or None when nothing can. "After" covers
the rest of `op`'s block, every op of each enclosing loop (later iterations run
them again) and everything after the enclosing ops. Two arrays may overlap when
their memory roots intersect (see `activity.py`: roots are per alias class, so
arguments that share memory at run time are one root). A value without known
roots is assumed to be overwritten. The reverse sweep reads an array's
contents directly when nothing may overwrite them, and copies them otherwise.

`entry_loop(op)` asks the converse for scalar load `op`: whether no store of the outermost
loop around it can write the element it reads before it does (`_disjoint_before`, the same
proof with time reversed), so that it loads the value the element had at that loop's entry.

`first_element_writer(op)` asks the same of the one element a scalar load `op`
(`x[i, 0]`) reads: a store into the same array value is passed over when its index
provably names another element whenever it runs after `op` (`_disjoint`), as in
a time-stepping loop that reads row `i` and writes row `i + 1`. A store that, within
one iteration of every loop around both, only runs before `op` (an earlier inner
loop of that iteration: `_never_after`) needs that proof only for later iterations;
an index bounded by an enclosing loop's variable (`j` of `range(i + 1, n)` is above
`i`, of `range(i)` below it: `_bounds`) differs from one on the other side. Element-precise
reasoning assumes what NumPy's own writes assume: two different indices of one
array name two different elements (`boundary.self_overlapping` refuses writable arrays
whose elements overlap).

`first_writer(op, v)` for a subarray `v = base[i, ...]` (integer indices, `base` defined
outside every loop) passes over the writes into the same `base` through integer indices, or
through such views of it, whose index provably differs at one leading axis whenever they run
after `op` (`_disjoint`): a row normalised in place (`x[i] /= s`) is written again only by
later iterations, at other rows, so the adjoint sweep reads it as the division left it.

The loop nests come from the shared `index.Index` (pass one in to share it).
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Block, Function, Op, Value, walk
from .activity import Activity
from .index import Index


class Overwrites:
    def __init__(self, fn: Function, act: Activity, index: Index | None = None):
        self.act = act
        self.index = index or Index(fn)
        self.parent = self.index.parent  # op id -> (owner op, block, index)
        self.block_owner = self.index.block_owner

    @staticmethod
    def _writes(op: Op) -> list[tuple[Op, Value]]:
        """The (write op, written array) pairs of `op` and its regions."""
        out = []
        for o in [op] + list(_walk_regions(op)):
            if o.kind == "setitem" and isinstance(o.args[0].type, T.Array):
                out.append((o, o.args[0]))
            elif o.kind == "setitem" and isinstance(o.args[0].type, T.List) and not T.is_memory(o.args[1].type):
                out.append((o, o.args[0]))
            elif o.kind == "prim" and "out" in o.attrs:
                out.append((o, o.args[o.attrs["out"]]))
        return out

    def _later_ops(self, op: Op):
        """Ops that may run after `op` (themselves, not their regions' contents)."""
        owner, block, i = self.parent[id(op)]
        yield from block.ops[i + 1:]
        while owner is not None:
            if owner.kind in ("for", "while"):
                for region in owner.regions:
                    yield from region.ops
            o_owner, o_block, o_i = self.parent[id(owner)]
            yield from o_block.ops[o_i + 1:]
            owner = o_owner

    def first_writer(self, op: Op, v: Value, include_self: bool = False) -> Op | None:
        roots = self.act.roots.get(v.id)
        if not roots:
            return op
        if include_self:  # `op`'s own run: it writes what it writes, whatever the indices
            for w, target in self._writes(op):
                troots = self.act.roots.get(target.id)
                if not troots or troots & roots:
                    return w
        view = self._part(v)
        for c in self._later_ops(op):  # `op` itself among them only as its runs in later iterations
            for w, target in self._writes(c):
                troots = self.act.roots.get(target.id)
                if not troots or troots & roots:
                    if view is not None and self._other_part(op, view, w, target):
                        continue
                    return w
        return None

    def _part(self, v: Value) -> tuple[Value, list] | None:
        """`(base, index)` when `v` is `base[i, ...]`, `base` an array defined outside every
        loop (one memory in every iteration) and each part of the index one integer: the
        subarray (or element) at those leading indices."""
        owner = v.owner
        if not (isinstance(owner, Op) and owner.kind == "getitem"):
            return None
        index = _element_index(owner, 1, full=False)
        base = owner.args[0]
        if index is None or not isinstance(base.type, T.Array) or self._in_loop(base):
            return None
        return base, index

    def _other_part(self, op: Op, view: tuple[Value, list], w: Op, target: Value) -> bool:
        """Whether write `w` (of `target`), in every run after `op`, writes memory apart from the
        subarray `view` (`_part`) as `op` saw it: `w` stores into the same base through an
        integer index, or writes a view `_part` gives of the same base, and at some leading
        axis the two indices provably differ whenever `w` runs after `op` (`_disjoint`: different
        integers at one axis are different subarrays of an array whose elements do not overlap,
        which `boundary.self_overlapping` makes sure of for writable arrays)."""
        base, read = view
        if w.kind == "setitem" and target is base:
            written = _element_index(w, 2, full=False)
        else:
            other = self._part(target)
            written = other[1] if other is not None and other[0] is base else None
        return written is not None and self._disjoint(op, read, w, written)

    def first_element_writer(self, op: Op) -> Op | None:
        """`first_writer(op, base)` for scalar load `op` (`base[idx]`), passing over the
        stores into `base` itself that provably write other elements (`_disjoint`). Only for
        a `base` defined outside every loop: the proof takes one array value to be one
        memory in every iteration, which a view taken in a loop, or a carried array, is not."""
        base = op.args[0]
        roots = self.act.roots.get(base.id)
        read = _element_index(op, 1)
        if not roots or read is None or self._in_loop(base):
            return self.first_writer(op, base)
        for c in self._later_ops(op):
            for w, target in self._writes(c):
                troots = self.act.roots.get(target.id)
                if troots and not troots & roots:
                    continue
                if (w.kind == "setitem" and target is base and isinstance(base.type, T.Array)
                        and self._disjoint(op, read, w)):
                    continue
                return w
        return None

    def entry_loop(self, op: Op) -> Op | None:
        """The outermost loop `L` around scalar load `op` (`base[idx]`) when the element `op`
        reads holds, whenever `op` runs, the value it had at `L`'s entry: no store in `L`
        into memory `base` may overlap can have written that element before (each is a store
        into `base` itself whose index provably names another element in every run before
        `op`'s: `_disjoint_before`). A copy of `base` taken at `L`'s entry then gives every
        value `op` loads. Only for a `base` defined outside every loop, as
        `first_element_writer`. None when not proved (or `op` is in no loop)."""
        base = op.args[0]
        roots = self.act.roots.get(base.id)
        read = _element_index(op, 1)
        loops = self._loops(op)
        if not roots or read is None or not loops or self._in_loop(base):
            return None
        top = loops[-1]
        for w, target in self._writes(top):
            troots = self.act.roots.get(target.id)
            if troots and not troots & roots:
                continue
            if not (w.kind == "setitem" and target is base and self._disjoint_before(op, read, w)):
                return None
        return top

    # -- element indices ---------------------------------------------------------
    def _in_loop(self, v: Value) -> bool:
        """Whether `v` is defined inside a loop (a block argument of a loop's region, or the
        result of an op inside one)."""
        owner = v.owner
        if isinstance(owner, Block):
            loop = self.block_owner.get(id(owner))
            return loop is not None and (loop.kind in ("for", "while") or bool(self._loops(loop)))
        return isinstance(owner, Op) and id(owner) in self.parent and bool(self._loops(owner))

    def _loops(self, op: Op) -> list[Op]:
        """The loops around `op`, innermost first."""
        return self.index.loops(op)

    def _affine(self, v: Value, depth: int = 0) -> tuple[Value | None, int] | None:
        """Integer `v` as `(iv, c)`, meaning `iv + c` for the induction variable `iv` of a
        `for` loop (`None`: the constant `c`), or None when it is not of that form."""
        if v.type != T.Scalar("int") or depth > 8:
            return None
        owner = v.owner
        if isinstance(owner, Block):
            loop = self.block_owner.get(id(owner))
            if loop is not None and loop.kind == "for" and owner is loop.regions[0] and owner.args[0] is v:
                return (v, 0)
            return None
        if not isinstance(owner, Op):
            return None
        if owner.kind == "const":
            val = owner.attrs["value"]
            return (None, val) if type(val) is int else None
        if owner.kind == "prim" and owner.attrs["key"] in ("add", "sub") and len(owner.args) == 2:
            a, b = (self._affine(x, depth + 1) for x in owner.args)
            if a is None or b is None:
                return None
            if owner.attrs["key"] == "sub":
                return (a[0], a[1] - b[1]) if b[0] is None else None
            if a[0] is not None and b[0] is not None:
                return None
            return (a[0] if a[0] is not None else b[0], a[1] + b[1])
        return None

    def _form(self, x: Value | int) -> tuple[Value | None, int] | None:
        return (None, x) if isinstance(x, int) else self._affine(x)

    def _step(self, loop: Op) -> int | None:
        """The constant, non-zero step of `for` loop `loop`, or None."""
        step = self._affine(loop.args[2])
        return step[1] if step is not None and step[0] is None and step[1] != 0 else None

    def _bounds(self, form: tuple[Value | None, int], lower: bool, depth: int = 0) -> list[tuple[Value | None, int]]:
        """Forms `(u, d)` with `iv + c >= u + d` (`lower`) or `<= u + d` for `form` `(iv, c)`,
        `u` taken at the same run as `iv` (`form` itself first). A `for` loop of constant step
        `s > 0` runs `iv` over `start, start + s, ...` below `stop`: `start <= iv <= stop - 1`;
        of step `s < 0`: `stop + 1 <= iv <= start`. A start or stop that is an affine form in
        another loop's variable `u` (`range(i + 1, n)`) is chased further (`u`'s own bounds).
        That `u` is the one of the same run: the start and stop are evaluated once, on entry,
        inside an iteration of `u`'s loop, which encloses this loop (SSA: `u` is defined only
        in that loop's body), and `u` does not change within the iteration."""
        out = [form]
        iv, c = form
        if iv is None or depth > 8:
            return out
        loop = self.block_owner[id(iv.owner)]
        step = None if loop is None else self._step(loop)
        if loop is None or step is None:
            return out
        if lower == (step > 0):
            edge, shift = self._affine(loop.args[0]), 0
        else:
            edge, shift = self._affine(loop.args[1]), (-1 if step > 0 else 1)
        if edge is not None:
            out += self._bounds((edge[0], edge[1] + shift + c), lower, depth + 1)
        return out

    def _nonneg(self, form: tuple[Value | None, int]) -> bool:
        """Whether `form` is never negative: a constant lower bound (`_bounds`) is >= 0."""
        return any(u is None and d >= 0 for u, d in self._bounds(form, True))

    def _apart(self, r: tuple, w: tuple, fixed: set[int], later: tuple[Value, int] | None) -> bool:
        """Whether read index `r` and written index `w` (each `(lower bounds, upper bounds)`,
        `_bounds`) differ when the loops in `fixed` (ids) are in the same iteration at both
        runs and, `later = (iv, s)`, the write runs in a later iteration of `iv`'s loop (step
        `s`: then `iv_w >= iv_r + s` for `s > 0`, `iv_w <= iv_r + s` for `s < 0`). A bound
        pair `w >= u + d`, `r <= u + e` over one `u` that is the same at both runs (a constant,
        or a fixed loop's variable) proves `w > r` when `d > e`; with `u = iv` later and
        `s > 0`, `w >= iv_r + s + d > r` when `s + d > e`. Mirrored for `w < r`."""
        (rl, ru), (wl, wu) = r, w

        def same(u: Value | None) -> bool:
            return u is None or id(self.block_owner[id(u.owner)]) in fixed

        for above, (lo, hi) in ((True, (wl, ru)), (False, (rl, wu))):
            for u, d in lo:
                for v, e in hi:
                    if u is not v:
                        continue
                    if same(u) and d > e:
                        return True
                    if later is not None and u is later[0] and (later[1] > 0) == above:
                        shifted = d + later[1] if above else d - later[1]
                        if shifted > e:
                            return True
        return False

    def _never_after(self, w: Op, op: Op) -> bool:
        """Whether, in one iteration of every loop around both `w` and `op`, `w` never runs
        after `op`. Walk their ancestors from the function body down while they are one op
        (a shared loop: one iteration of it; or an `if`, which runs once per run of its block):
        where they first differ, either they are two ops of one block, which runs them once
        each, in order (this block runs once per iteration of the innermost shared loop: the
        ops above are those loops and `if`s), so `w`'s runs all come first when its op comes
        first; or they lie in the two branches of one `if`, of which one runs; or in the two
        regions of a `while` (condition, body): not proved. `w` is `op`: its later runs (those
        in later iterations, which `first_writer` asks of an `out=` call) are never in the same
        iteration as the run in question; its own run is `first_writer`'s to count (`include_self`)."""
        if w is op:
            return True
        cw, cr = self._chain(w), self._chain(op)
        for (bw, iw), (br, ir) in zip(cw, cr):
            if bw is not br:
                owner = self.block_owner[id(bw)]
                return owner is not None and owner.kind == "if"
            if iw != ir:
                return iw < ir
        return False

    def _chain(self, op: Op) -> list[tuple[Block, int]]:
        """(block, position) of `op` and of each op holding it, outermost first."""
        out = []
        cur: Op | None = op
        while cur is not None:
            owner, block, i = self.parent[id(cur)]
            out.append((block, i))
            cur = owner
        return out[::-1]

    def _disjoint(self, op: Op, read: list, w: Op, written: list | None = None) -> bool:
        """Whether store `w`, in every run after load `op`, writes another element than the
        one `op` read. A later run of `w` happens in the same iteration of every loop around
        both (only if `w` may run after `op` there: `_never_after`), or in a later iteration of
        one of them (`k`), the loops outside it unchanged, those inside it anything. Each case
        needs one dimension whose two indices provably differ then (`_apart` on their bounds:
        two constants, `i + a` and `i + b` for the variable `i` of a loop unchanged, `j >= i + 1`
        written against `i` read, or, for `k`'s own variable of step s > 0, `i0 + a` read and
        `i1 + b` written with `i1 >= i0 + s`, which differ when `a - b < s`). Indices must be
        non-negative (a negative index counts from the end, where these sums say nothing).
        `written`: `w`'s index, where it is not `w`'s own (the view a call writes through)."""
        written = written if written is not None else _element_index(w, 2, full=False)
        if written is None:
            return False
        mine = {id(x) for x in self._loops(w)}
        shared = [x for x in self._loops(op) if id(x) in mine]  # innermost first
        pairs = []
        for r, q in zip(read, written):
            fr, fw = self._form(r), self._form(q)
            if fr is not None and fw is not None and self._nonneg(fr) and self._nonneg(fw):
                pairs.append(((self._bounds(fr, True), self._bounds(fr, False)),
                              (self._bounds(fw, True), self._bounds(fw, False))))

        def differ(fixed: list[Op], later: tuple[Value, int] | None = None) -> bool:
            ids = {id(x) for x in fixed}
            return any(self._apart(r, q, ids, later) for r, q in pairs)

        if not self._never_after(w, op) and not differ(shared):  # same iteration of every shared loop
            return False
        for k, loop in enumerate(shared):  # a later iteration of `loop`
            outside = shared[k + 1:]
            if differ(outside):
                continue
            step = self._step(loop) if loop.kind == "for" else None
            if step is None or not differ(outside, (loop.regions[0].args[0], step)):
                return False
        return True


    def reloads(self, op: Op) -> bool:
        """Whether scalar load `op` reads one element in several runs: every part of its index
        is an affine form (`_affine`) and some `for` loop around it is the variable of none."""
        read = _element_index(op, 1)
        if read is None:
            return False
        forms = [self._form(r) for r in read]
        if any(f is None for f in forms):
            return False
        used = {id(f[0]) for f in forms if f is not None and f[0] is not None}
        return any(loop.kind == "for" and id(loop.regions[0].args[0]) not in used for loop in self._loops(op))

    def _disjoint_before(self, op: Op, read: list, w: Op) -> bool:
        """Whether store `w`, in every run before load `op`, writes another element than the
        one `op` reads: `_disjoint` with time reversed. An earlier run of `w` happens in the
        same iteration of every loop around both (only if `w` may run before `op` there: not
        when `op` never runs after `w`, `_never_after(op, w)`), or in an earlier iteration of
        one of them (`k`, of constant step s: its variable at `w`'s run is `<= i_r - s` for
        s > 0, `>= i_r - s` for s < 0), the loops outside it unchanged."""
        written = _element_index(w, 2, full=False)
        if written is None:
            return False
        mine = {id(x) for x in self._loops(w)}
        shared = [x for x in self._loops(op) if id(x) in mine]  # innermost first
        pairs = []
        for r, q in zip(read, written):
            fr, fw = self._form(r), self._form(q)
            if fr is not None and fw is not None and self._nonneg(fr) and self._nonneg(fw):
                pairs.append(((self._bounds(fr, True), self._bounds(fr, False)),
                              (self._bounds(fw, True), self._bounds(fw, False))))
        if not pairs:
            return False

        def differ(fixed: list[Op], earlier: tuple[Value, int] | None = None) -> bool:
            ids = {id(x) for x in fixed}
            return any(self._apart(r, q, ids, earlier) for r, q in pairs)

        if not self._never_after(op, w) and not differ(shared):  # same iteration of every shared loop
            return False
        for k, loop in enumerate(shared):  # an earlier iteration of `loop`
            outside = shared[k + 1:]
            if differ(outside):
                continue
            step = self._step(loop) if loop.kind == "for" else None
            if step is None or not differ(outside, (loop.regions[0].args[0], -step)):
                return False
        return True


def _element_index(op: Op, first: int, full: bool = True) -> list[Value | int] | None:
    """The index of getitem (`first` 1) or setitem (`first` 2) `op`, one integer value or
    constant per part, when every part is one integer, else None. `full`: the index must
    name one element of the array (a scalar load)."""
    base = op.args[0]
    if not isinstance(base.type, T.Array):
        return None
    tree = op.attrs["index"]
    parts = list(tree[1]) if tree[0] == "t" else [tree]
    out: list[Value | int] = []
    for part in parts:
        if part[0] == "c" and type(part[1]) is int:
            out.append(part[1])
        elif part[0] == "v" and part[1] >= first and op.args[part[1]].type == T.Scalar("int"):
            out.append(op.args[part[1]])
        else:
            return None
    if full and len(out) != base.type.ndim:
        return None
    return out or None


def _walk_regions(op: Op):
    for region in op.regions:
        yield from walk(region)
