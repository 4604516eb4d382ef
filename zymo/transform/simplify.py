"""Dead-code elimination on the IR, before analysis.

Contract: `dce(fn)` removes, in place and until nothing changes,
- ops without side effects whose results nobody reads (constants, calls
  without `out=`, loads and views);
- loop carries whose result is unused and whose block argument is read by
  nothing but the yield that passes it on (flags, loop variables never read
  after the loop), and `if` results nobody reads;
- `for` carries that only feed one another (`_dead_for_carries`: a loop variable
  reused by later loops, `for k in ...` twice, is carried from loop to loop and
  through the enclosing ones, but read by no op).
Stores, `out=` calls, calls without results and terminators are kept, and so are element
reads that may raise (`_may_raise`: `x[10]` of a 5-element `x` raises in the primal, so in the
derivative too).

`cse_loads(fn)` makes a float loaded twice from the same place with no write in
between (`x[i] * x[i]`) one value, so reverse mode caches it once.

`cse_numbers(fn)` makes arithmetic of numbers computed twice with the same operands
(`0.5 * dt` in each stage of a Runge-Kutta step) one value, where the first computation
comes before the second in its block or in a block around it: `+ - * / // % **`,
negation, comparisons and `math` functions (rules declaring `value_numbered`), of numbers only
(never an array: two arrays are two memories), and an array's dimension. Constants match by type and value. The
second computation would have given the same number, or raised where the first had.

`hoist_sizes(fn)` moves an array's dimension (`A.shape[1]`, `len(x)`: a shape never
changes) and integer `+ - *` (rules declaring `size_arith`) of such values and constants out of the loops and branches
that do not define their operands, to just before the loop or branch. So
`for j in range(A.shape[1])` inside another loop has a trip count known at the outer
loop's entry, where reverse mode makes room for the whole nest's caches. None of these
can raise, so computing one where the loop body would not have run changes nothing.

All four passes leave the IR valid (`ir.verify`) when it was.
"""
from __future__ import annotations

from ..ir.core import Block, Function, Op, Value, walk
from ..ir.types import INT, Array, List, Scalar, is_memory
from ..rules.registry import REGISTRY

_PURE = {"const", "prim", "getitem"}  # op kinds without an effect of their own


def _fact(key: str, fact: str) -> bool:
    """Whether the rule of `key` declares `fact` (`rules/registry.py`)."""
    rule = REGISTRY.get(key)
    return rule is not None and bool(getattr(rule, fact))


def dce(fn: Function) -> Function:
    while True:
        uses = _uses(fn)
        changed = _sweep(fn.body, uses)
        for op in list(walk(fn.body)):
            if op.kind in ("for", "while", "if"):
                changed |= _drop_carries(op, _uses(fn))
        for op, dead in _dead_for_carries(fn).items():
            _remove_for_carries(op, dead)
            changed = True
        if not changed:
            return fn


def _dead_for_carries(fn: Function) -> dict[Op, set[int]]:
    """The carries of `for` loops no op reads, through any chain of carries: a carry is live
    when its result or its block argument is read by an op other than a `for` (as a carry's
    initial value) or a `for` body's yield (as a carry's next value), or feeds a live carry
    that way. Found by marking from those reads (a greatest set of dead carries)."""
    loops = [op for op in walk(fn.body) if op.kind == "for"]
    if not loops:
        return {}
    feeds: dict[int, list[tuple[Op, int]]] = {}  # value id -> carries it flows into
    yields = {id(op.regions[0].ops[-1]): op for op in loops}
    for op in loops:
        for k, init in enumerate(op.args[3:]):
            feeds.setdefault(init.id, []).append((op, k))
        for k, nxt in enumerate(op.regions[0].ops[-1].args):
            feeds.setdefault(nxt.id, []).append((op, k))
    live: set[tuple[int, int]] = set()
    work: list[int] = []  # value ids known to be read
    for o in walk(fn.body):
        loop = yields.get(id(o))
        for j, v in enumerate(o.args):
            if o.kind == "for" and j >= 3:
                continue  # an initial value: read only if its carry is live
            if loop is not None:
                continue  # a next value: likewise
            work.append(v.id)
    seen: set[int] = set()
    owner: dict[int, tuple[Op, int]] = {}  # result / block argument id -> its carry
    for op in loops:
        for k, r in enumerate(op.results):
            owner[r.id] = (op, k)
            owner[op.regions[0].args[k + 1].id] = (op, k)
    while work:
        vid = work.pop()
        if vid in seen:
            continue
        seen.add(vid)
        if vid in owner:
            op, k = owner[vid]
            if (id(op), k) not in live:
                live.add((id(op), k))
                work.append(op.args[3 + k].id)
                work.append(op.regions[0].ops[-1].args[k].id)
    dead: dict[Op, set[int]] = {}
    for op in loops:
        ks = {k for k in range(len(op.results)) if (id(op), k) not in live}
        if ks:
            dead[op] = ks
    return dead


def _remove_for_carries(op: Op, dead: set[int]) -> None:
    body = op.regions[0]
    y = body.ops[-1]
    keep = [k for k in range(len(op.results)) if k not in dead]
    op.args[3:] = [op.args[3 + k] for k in keep]
    body.args[1:] = [body.args[1 + k] for k in keep]
    y.args[:] = [y.args[k] for k in keep]
    op.results[:] = [op.results[k] for k in keep]


def _uses(fn: Function) -> dict[int, list[Op]]:
    uses: dict[int, list[Op]] = {}
    for op in walk(fn.body):
        for v in op.args:
            uses.setdefault(v.id, []).append(op)
    return uses


def _sweep(block: Block, uses: dict[int, list[Op]]) -> bool:
    changed = False
    kept = []
    read: set[tuple[int, ...]] = set()  # the element reads this block made so far (by value ids)
    # the parts of a call another part of which is used (`np.linalg.eigh(a)[1]`): they raise with it
    siblings = _used_siblings(block.ops, uses)
    for op in block.ops:
        for region in op.regions:
            changed |= _sweep(region, uses)
        place = tuple(a.id for a in op.args) if op.kind == "getitem" else ()
        removable = (op.kind in _PURE and "out" not in op.attrs and op.results
                     and not any(r.id in uses for r in op.results)
                     and (place in read or id(op) in siblings  # read before: it raised there
                          or not _may_raise(op)))
        if place:
            read.add(place)
        if removable:
            changed = True
        else:
            kept.append(op)
    block.ops[:] = kept
    return changed


def _used_siblings(ops: list[Op], uses: dict) -> set[int]:
    """The ops computing parts of one call (`_call_of`, next to each other in `ops`, as the
    frontend writes them: nothing in between changes what they read) one of which is used."""
    out: set[int] = set()
    k = 0
    while k < len(ops):
        call, end = _call_of(ops[k]), k + 1
        while call is not None and end < len(ops) and _call_of(ops[end]) == call:
            end += 1
        if end - k > 1 and any(r.id in uses for op in ops[k:end] for r in op.results):
            out.update(id(op) for op in ops[k:end])
        k = end
    return out


def _call_of(op: Op) -> tuple | None:
    """The call whose part `op` computes (a rule with `part_of`: `np.linalg.eigh`'s eigenvalues
    and eigenvectors), with its operands, or None."""
    if op.kind != "prim":
        return None
    rule = REGISTRY.get(op.attrs["key"])
    if rule is None or rule.part_of is None:
        return None
    return (rule.part_of, tuple(a.id for a in op.args), repr(op.attrs.get("pos")), repr(op.attrs.get("kw")))


def _may_raise(op: Op) -> bool:
    """Whether `op` may raise or has an effect of its own, so that it is kept though nothing
    uses its value: a read of an element that may not be there (an array's or list's item at an
    integer or an index array: `x[10]` raises IndexError for a 5-element `x`); a call of a rule
    that is not pure (a draw of `np.random` moves the generator the next draw reads) or unknown;
    a call that may raise (`math.sqrt(x - 10.0)`), unless its rule says it never does
    (`may_raise`), never on numbers (`numbers_safe`) or on float arrays (`array_safe`). So a
    derivative raises where its primal does; the reverse transform leaves out what its backend
    cannot have raise, or computes it only where NumPy's error state may raise
    (`transform/reverse/dead.py`)."""
    if op.kind == "prim":
        rule = REGISTRY.get(op.attrs["key"])
        if rule is None or not rule.pure:
            return True
        arrays = [a for a in op.args if isinstance(a.type, Array)]
        return not (not rule.may_raise
                    or rule.numbers_safe and all(isinstance(a.type, Scalar) for a in op.args)
                    or rule.array_safe and arrays and all(a.type.differentiable for a in arrays))
    if op.kind != "getitem" or not isinstance(op.args[0].type, (Array, List)):
        return False
    return any(isinstance(a.type, (Scalar, Array)) for a in op.args[1:])


def _only_yielded(v, yield_op: Op, uses, k: int) -> bool:
    """`v` is read by nothing but `yield_op`, and only at position `k` (passed on unchanged)."""
    return (all(u is yield_op for u in uses.get(v.id, []))
            and all(j == k for j, a in enumerate(yield_op.args) if a is v))


def _drop_carries(op: Op, uses) -> bool:
    if op.kind == "if":
        keep = [k for k, r in enumerate(op.results) if r.id in uses]
        if len(keep) == len(op.results):
            return False
        op.results[:] = [op.results[k] for k in keep]
        for region in op.regions:
            y = region.ops[-1]
            y.args[:] = [y.args[k] for k in keep]
        return True
    if op.kind == "for":
        body = op.regions[0]
        y = body.ops[-1]
        dead = [k for k, r in enumerate(op.results)
                if r.id not in uses and _only_yielded(body.args[k + 1], y, uses, k)]
        if not dead:
            return False
        keep = [k for k in range(len(op.results)) if k not in dead]
        op.args[3:] = [op.args[3 + k] for k in keep]
        body.args[1:] = [body.args[1 + k] for k in keep]
        y.args[:] = [y.args[k] for k in keep]
        op.results[:] = [op.results[k] for k in keep]
        return True
    # while: the carry must be dead in the condition and in the body
    cond, body = op.regions
    y = body.ops[-1]
    dead = [k for k, r in enumerate(op.results)
            if r.id not in uses and cond.args[k].id not in uses and _only_yielded(body.args[k], y, uses, k)]
    if not dead:
        return False
    keep = [k for k in range(len(op.results)) if k not in dead]
    op.args[:] = [op.args[k] for k in keep]
    cond.args[:] = [cond.args[k] for k in keep]
    body.args[:] = [body.args[k] for k in keep]
    y.args[:] = [y.args[k] for k in keep]
    op.results[:] = [op.results[k] for k in keep]
    return True


def cse_loads(fn: Function) -> Function:
    subst: dict[int, Value] = {}
    _cse_block(fn.body, subst)
    if subst:
        for op in walk(fn.body):
            op.args[:] = [subst.get(v.id, v) for v in op.args]
    return fn


def _writes_memory(op: Op) -> bool:
    return any(o.kind == "setitem" or (o.kind == "prim" and "out" in o.attrs)
               for o in [op] + [x for r in op.regions for x in walk(r)])


def _cse_block(block: Block, subst: dict) -> None:
    seen: dict[tuple, object] = {}
    for op in block.ops:
        for region in op.regions:
            _cse_block(region, subst)
        if _writes_memory(op):
            seen.clear()
            continue
        if op.kind == "getitem" and not is_memory(op.result.type):
            key = (op.attrs["index"], tuple(subst.get(v.id, v).id for v in op.args))
            if key in seen:
                subst[op.result.id] = seen[key]
            else:
                seen[key] = op.result


def hoist_sizes(fn: Function) -> Function:
    _hoist_from(fn.body)
    return fn


def _hoist_from(block: Block) -> None:
    ops: list[Op] = []
    for op in block.ops:
        if op.regions:
            inside = _defined_in(op)
            for region in op.regions:
                _hoist_from(region)  # inner loops first: what they give up may go further
                consts = {o.results[0].id: o for o in region.ops if o.kind == "const"}
                moved: set[int] = set()
                for o in region.ops:
                    if _size_op(o) and all(a.id not in inside or a.id in consts for a in o.args):
                        for a in o.args:  # a constant operand goes along (it stays one for other readers)
                            c = consts.get(a.id)
                            if c is not None and id(c) not in moved:
                                ops.append(c)
                                moved.add(id(c))
                                inside.discard(a.id)
                        ops.append(o)
                        moved.add(id(o))
                        inside.difference_update(r.id for r in o.results)
                region.ops[:] = [o for o in region.ops if id(o) not in moved]
        ops.append(op)
    block.ops[:] = ops


def _size_op(op: Op) -> bool:
    """An integer computed from sizes: a dimension, `+ - *` of ints."""
    if op.kind != "prim" or "out" in op.attrs:
        return False
    key = op.attrs["key"]
    return key == "zymo.dim" or (_fact(key, "size_arith") and op.results[0].type == INT
                                 and all(a.type == INT for a in op.args))


def _defined_in(op: Op) -> set[int]:
    """The values `op`'s regions define (block arguments and results), at any depth."""
    ids: set[int] = set()
    for region in op.regions:
        ids.update(a.id for a in region.args)
        for o in walk(region):
            ids.update(r.id for r in o.results)
            for inner in o.regions:
                ids.update(a.id for a in inner.args)
    return ids


def cse_numbers(fn: Function) -> Function:
    subst: dict[int, object] = {}
    _number_block(fn.body, {}, subst)
    return fn


def _number_block(block: Block, seen: dict, subst: dict) -> None:
    """Value numbering in program order; `seen` holds what the blocks around `block` computed
    before it (each region gets a copy: what an `if` branch computes is not seen after it)."""
    repeated = set()  # computations that give the first one's number, or raise where it had
    for op in block.ops:
        op.args[:] = [subst.get(v.id, v) for v in op.args]
        for region in op.regions:
            _number_block(region, dict(seen), subst)
        key = _number_key(op)
        if key is None:
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = op.results[0]
        else:
            subst[op.results[0].id] = first
            repeated.add(id(op))
    if repeated:  # removed here: `dce` keeps what may raise
        block.ops[:] = [op for op in block.ops if id(op) not in repeated]


def _number_key(op: Op) -> tuple | None:
    if op.kind != "prim" or "out" in op.attrs or len(op.results) != 1:
        return None
    key = op.attrs["key"]
    if not _fact(key, "value_numbered"):
        return None
    operand_types_ok = key == "zymo.dim" or all(isinstance(v.type, Scalar) for v in op.args)
    if not (operand_types_ok and isinstance(op.results[0].type, Scalar)):
        return None
    operands = tuple(("c", str(v.type), repr(v.const)) if v.is_const else ("v", v.id) for v in op.args)
    number = (key, op.attrs["pos"], op.attrs["kw"], operands)
    try:
        hash(number)
    except TypeError:  # an unhashable literal among the arguments
        return None
    return number
