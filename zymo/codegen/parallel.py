"""Loops of a kernel whose iterations may run in parallel: they write disjoint memory.

Contract: `parallel_loops(kernel, ndims, caches)` returns the `for` statements of an outlined
kernel (`codegen/outline.py`), inside no other loop of the kernel, that Numba may run as
`numba.prange` loops with the same results as the serial loop, to the bit, provided the
kernel's arrays do not overlap in memory (the caller checks that at run time: `overlapping`).
Only loops with no loop around them: a parallel loop inside a serial one starts and joins its
threads once per outer iteration, which cost more than the work of the inner loops measured here
(Numba 0.68, OpenMP layer: mvt at n=1500 took longer with 2 threads than with 1); such a nest
may run by blocks of its inner loop instead (`codegen/blocks.py`). A loop qualifies when

- it is `for v in range(...)` with step 1 (absent or the constant 1), no `else`, and no
  `break` or `continue` anywhere in it (the kernels' loops never `return`);
- its *index names* are `v` and names the body assigns once, at its top, before reading them,
  as `v` plus or minus loop-invariant terms (`i = n - 1 - _r` of a reversed adjoint loop):
  each is a one-to-one function of `v`;
- every other name it assigns is private to an iteration: never read before it is assigned in
  the iteration (nothing is carried from one iteration to the next; a sum `s = s + ...` is
  carried, and keeps the loop serial: a parallel reduction would round differently), and not
  read after the loop;
- it writes no memory through a whole-array statement (`_writes_arrays_whole`), and every
  array it writes is written and read only through single elements (`a[i, j]`), all
  with one and the same index name at one position (`A[i, :]`-like rows of `A`, one per
  iteration), that index never negative (`loop_forms.never_negative`: `a[-1]` is `a[n - 1]`):
  two iterations never touch the same element of an array one of them writes.
  Arrays it only reads are unconstrained. A reverse-mode cache (`caches`) the loop writes and
  does not read is exempt: each push writes an entry no other push writes (the caches' entry
  counters only grow, `transform/reverse/augmented.py`), and a loop whose iterations push by
  index (`codegen/tape_index.py`) no longer carries the counter.

`independent(loop, ndims, rest, sums=scalars)` (forward order only, never `prange`: iterations
would add into one element at once) also takes iterations that add into shared memory or
locals in a different order: an array the loop touches only as `a[...] += e` or `a[...] -= e`
targets (whatever the index), and a name of `scalars` (known to hold numbers, never an array
that may be a view of another) it touches only as `s += e` or `s -= e` targets (its value
after the loop may be read), are exempt from the rules above. Running the iterations in
another order then changes only the order of those sums (exact for ints; floats round
differently: `config.set_reassociate`).

Different names may still be one array (a user's argument passed twice, or overlapping views):
`overlapping(args, written)` says whether any written argument may share memory with another
array argument (`np.may_share_memory`, by bounds), in which case the serial kernel runs.
"""
from __future__ import annotations

import ast

import numpy as np

from .. import pyast
from .loop_forms import never_negative


def parallel_loops(kernel: ast.FunctionDef, ndims: dict[str, int],
                   caches: frozenset[str] = frozenset()) -> list[ast.For]:
    """The loops of `kernel` that may run as `prange` (module contract), in the kernel's order;
    loops inside other loops are not considered."""
    out: list[ast.For] = []

    def visit(stmts: list[ast.stmt], after: list[list[ast.stmt]]) -> None:
        for k, s in enumerate(stmts):
            rest = [stmts[k + 1:]] + after
            if isinstance(s, ast.For) and _simple_range(s) and independent(s, ndims, rest, caches):
                out.append(s)
            elif isinstance(s, ast.If):
                visit(s.body, rest)
                visit(s.orelse, rest)

    visit(kernel.body, [])
    return out


def written_arrays(loops: list[ast.For]) -> set[str]:
    """The arrays the loops write (through elements)."""
    names: set[str] = set()
    for loop in loops:
        for n in pyast.walk(loop):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name):
                names.add(n.value.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript) \
                    and isinstance(n.target.value, ast.Name):
                names.add(n.target.value.id)
    return names


def to_prange(kernel: ast.FunctionDef, loops: list[ast.For], name: str, nests: list[ast.For] = (),  # type: ignore[assignment]
              expanded: list[tuple[ast.For, frozenset[str]]] = ()) -> ast.FunctionDef:  # type: ignore[assignment]
    """A copy of `kernel` named `name` whose `loops` are `numba.prange` loops, whose `nests` run
    by blocks (`codegen/blocks.py`) and whose `expanded` loops run with their sums expanded
    (`codegen/expand.py`), with one more parameter, last: the number of threads (the blocks;
    `numba.get_num_threads()` would keep Numba from caching the twin on disk)."""
    from .blocks import block
    from .expand import expand

    marks = {id(loop) for loop in loops}
    blocked = {id(nest) for nest in nests}
    sums = {id(loop): arrays for loop, arrays in expanded}
    new = pyast.clone(kernel)
    twins: dict[int, frozenset[str] | None] = {}  # copied statement -> its arrays to expand, or None: blocks
    for old, loop in zip(pyast.walk(kernel), pyast.walk(new)):  # the same walk over equal trees
        if id(old) in marks and isinstance(loop, ast.For):
            assert isinstance(loop.iter, ast.Call)
            loop.iter.func = ast.Attribute(value=ast.Name("numba", ast.Load()), attr="prange", ctx=ast.Load())
        elif id(old) in blocked:
            twins[id(loop)] = None
        elif id(old) in sums:
            twins[id(loop)] = sums[id(old)]
    taken = {n.id for n in pyast.walk(kernel) if isinstance(n, ast.Name)}
    count = iter(range(1 << 30))

    def fresh(base: str) -> str:
        while True:
            got = f"{base}_{next(count)}"
            if got not in taken:
                return got

    threads = fresh("_threads")
    allocs: list[ast.stmt] = []

    def rewritten(t: ast.stmt) -> list[ast.stmt]:
        arrays = twins[id(t)]
        assert isinstance(t, ast.For)
        if arrays is None:
            return block(t, fresh, threads)
        first, stmts = expand(t, arrays, fresh, threads)
        allocs.extend(first)
        return stmts

    for node in list(pyast.walk(new)):
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and any(id(t) in twins for t in stmts):
                setattr(node, field, [u for t in stmts for u in (rewritten(t) if id(t) in twins else [t])])
    new.body = [*allocs, *new.body]  # before anything is written (`expand`'s contract)
    new.args.args.append(ast.arg(threads))
    new.name = name
    return ast.fix_missing_locations(new)


def overlapping(args: tuple, written: list[int]) -> bool:
    """Whether an array argument the parallel loops write (positions `written`) may share
    memory with another array argument."""
    for w in written:
        a = args[w]
        for j, b in enumerate(args):
            if j != w and isinstance(b, np.ndarray) and np.may_share_memory(a, b):
                return True
    return False


def _simple_range(loop: ast.For) -> bool:
    it = loop.iter
    if not (isinstance(loop.target, ast.Name) and not loop.orelse and isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name) and it.func.id == "range" and not it.keywords and 1 <= len(it.args) <= 3):
        return False
    if len(it.args) == 3 and not (isinstance(it.args[2], ast.Constant) and it.args[2].value == 1):
        return False
    return not any(isinstance(n, (ast.Break, ast.Continue, ast.Return, ast.While)) for n in pyast.walk(loop))


def independent(loop: ast.For, ndims: dict[str, int], rest: list[list[ast.stmt]],
                caches: frozenset[str] = frozenset(), sums: frozenset[str] | None = None) -> bool:
    """Whether `loop`'s iterations write disjoint memory and carry nothing (module contract);
    `rest`: the statement lists that may run after it, innermost first; `caches`: the caches
    exempt from the element rule when only written; `sums`, if given: arrays only added into,
    and the names of `sums` (numbers) only added into, are exempt too (the order of the sums
    may change)."""
    from .outline import _exposed as exposed
    from .outline import _stores as stores

    assert isinstance(loop.target, ast.Name)
    assigned = set().union(*(stores(s) for s in loop.body)) if loop.body else set()
    index = _index_names(loop, assigned)
    added = _added_only(loop, sums) if sums is not None else frozenset()
    if index is None or _writes_arrays_whole(loop, ndims) \
            or not _disjoint_writes(loop, index, ndims, caches, added):
        return False
    carried, _ = exposed(loop.body, {loop.target.id})
    if (carried - added) & assigned:
        return False  # a value carried between iterations
    later: set[str] = set()
    seen: set[str] = set()
    for block in rest:  # what may run after the loop may read before writing it
        e, seen = exposed(block, seen)
        later |= e
    return not ((assigned - added) & later) and loop.target.id not in later  # nothing it sets is read after it


def _added_only(loop: ast.For, scalars: frozenset[str]) -> frozenset[str]:
    """The names of `scalars` `loop` touches only as the targets of `+=` or `-=`, and the arrays
    it touches only through their elements, as `a[...] += e`, `a[...] -= e` (the index reading
    none of them): whatever order the iterations run in, each such array element and local
    ends up the sum of the same terms. (A bare name not known to be a number may be an array,
    a view of one the loop reads: `acc += A[i]` with `acc = A[0]`.)"""
    targets: dict[str, int] = {}
    for n in pyast.walk(loop):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Add, ast.Sub)):
            t = n.target
            name = t.value if isinstance(t, ast.Subscript) else t
            if isinstance(name, ast.Name) and (isinstance(t, ast.Subscript) or name.id in scalars):
                targets[name.id] = targets.get(name.id, 0) + 1
            elif isinstance(name, ast.Name):
                targets[name.id] = -1 << 30  # never all its uses
    uses: dict[str, int] = {}
    for n in pyast.walk(loop):
        if isinstance(n, ast.Name):
            uses[n.id] = uses.get(n.id, 0) + 1
    return frozenset(k for k, count in targets.items() if uses.get(k) == count and k != loop.target.id)


def _writes_arrays_whole(loop: ast.For, ndims: dict[str, int]) -> bool:
    """Whether the loop writes memory other than through single elements: a whole-array
    statement let into the kernel (`outline`'s `in_place`: `np.add(a, b, out=d)`, `d += e` of an
    array `d`, `a[1:n] = e`), whose writes `_disjoint_writes` does not see."""
    for n in pyast.walk(loop):
        if isinstance(n, ast.Call) and any(k.arg == "out" for k in n.keywords):
            return True
        target = n.target if isinstance(n, ast.AugAssign) else n.targets[0] if isinstance(n, ast.Assign) \
            and len(n.targets) == 1 else None
        if isinstance(n, ast.AugAssign) and isinstance(target, ast.Name) and target.id in ndims:
            return True
        if isinstance(target, ast.Subscript) and any(isinstance(p, ast.Slice) or isinstance(p, ast.Constant)
                                                     and p.value is Ellipsis for p in pyast.walk(target.slice)):
            return True
    return False


def _index_names(loop: ast.For, assigned: set[str]) -> set[str] | None:
    """`v` and the names assigned at the top of the body as `v` plus or minus invariants."""
    assert isinstance(loop.target, ast.Name)
    index = {loop.target.id}
    counts: dict[str, int] = {}
    for n in pyast.walk(loop):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            counts[n.id] = counts.get(n.id, 0) + 1
    if counts.get(loop.target.id, 0) != 1:
        return None
    for s in loop.body:
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
            break
        name = s.targets[0].id
        if counts.get(name) == 1 and _affine(s.value, index, assigned):
            index.add(name)
        else:
            break
    return index


def _affine(e: ast.expr, index: set[str], assigned: set[str]) -> bool:
    """`e` is one index name plus or minus loop-invariant terms (coefficient +1 or -1)."""
    if isinstance(e, ast.Name):
        return e.id in index
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        left, right = _affine(e.left, index, assigned), _affine(e.right, index, assigned)
        if left and _invariant(e.right, index, assigned):
            return True
        return right and _invariant(e.left, index, assigned)
    return False


def _invariant(e: ast.expr, index: set[str], assigned: set[str]) -> bool:
    for n in pyast.walk(e):
        if isinstance(n, ast.Name) and (n.id in index or n.id in assigned):
            return False
        if isinstance(n, (ast.Call, ast.Subscript, ast.Attribute)):
            return False
    return isinstance(e, (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp))


def _disjoint_writes(loop: ast.For, index: set[str], ndims: dict[str, int], caches: frozenset[str],
                     added: frozenset[str] = frozenset()) -> bool:
    accesses: dict[str, list[tuple[ast.expr, ...]]] = {}
    read: set[str] = set()
    for n in pyast.walk(loop):
        if isinstance(n, ast.Subscript):
            if not isinstance(n.value, ast.Name):
                return False
            parts = tuple(n.slice.elts) if isinstance(n.slice, ast.Tuple) else (n.slice,)
            accesses.setdefault(n.value.id, []).append(parts)
            if not isinstance(n.ctx, ast.Store):
                read.add(n.value.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript) \
                and isinstance(n.target.value, ast.Name):
            read.add(n.target.value.id)
    for name in written_arrays([loop]):
        if name in caches and name not in read:
            continue  # pushes: each to an entry of its own (module contract)
        if name in added:
            continue  # only added into: the same terms in another order (`independent(sums=...)`)
        seen = accesses.get(name, [])
        nd = ndims.get(name)
        if nd is None or not seen or any(len(p) != nd or any(isinstance(x, ast.Slice) for x in p) for p in seen):
            return False
        if not any(all(isinstance(p[k], ast.Name) and p[k].id in index and p[k].id == seen[0][k].id
                       for p in seen) and never_negative(loop, seen[0][k])
                   for k in range(nd) if isinstance(seen[0][k], ast.Name)):
            return False  # (an index that may be negative wraps round: `a[-1]` is `a[n - 1]`)
    return True
