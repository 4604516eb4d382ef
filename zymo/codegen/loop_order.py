"""Loops of a compiled program made lean: element accumulators kept in locals, invariant reads
hoisted, column walks turned into row walks, and adjoint loops whose iterations are independent
run forward.

Contract: `lean_loops(src, memory)` returns the generated program `src` (as the transforms write
it, for a compiled backend) computing the same numbers, to the bit, with these rewrites of its
`for` loops, innermost first. `memory` (`loop_forms.Memory`, built by
`transform/reverse/facts.MemoryFacts`) says which array names may point into overlapping memory
and which hold float64 or complex128 elements; a name it does not list may overlap anything,
and is never rewritten. Loops with `break`, `continue`, `return`, `while` or an impure call
inside stay as they are (`loop_forms.plain`).

0. *Caches by index.* A loop that pushes to or pops from a cache once per iteration addresses
   it by its index (`codegen/tape_index.py`), so that the counter no longer carries from one
   iteration to the next. *Copies back.* In a loop body, `b = a` after `a = b`, neither name
   assigned in between, is dropped (it changes nothing): reverse mode passes a carried scalar's
   adjoint through an inner loop so, which made the loop look carried. Then a nest of two loops
   whose inner one walks down columns may swap them (`codegen/interchange.py`, whose contract
   says when that is exact); a loop holding such a nest beside other statements is first split
   into one loop per part where that is exact and lets a part swap (`codegen/distribute.py`).
   Last of all, a cache block that a swapped nest fills is laid out in the order the nest now
   runs, at its pushes and pops alike (`codegen/tape_layout.py`): gramschmidt's cache of `A`
   was stored at a stride of 62 entries (exact mode, n=60: 350 -> 325 us per gradient).
1. *Scalar promotion.* In a loop `L` (`for` over `range(...)`, its arguments names, constants
   and arithmetic), an array `X` that `L` writes, and names only through the element `X[E]`
   (every dimension subscripted, `E` the same expression everywhere in `L`, reading no name
   `L` assigns and calling nothing), is held in a local for the run of `L`:

       if <L runs at least once>:
           x = X[E]
           <L with each X[E] read as x, and each store into X[E] a store into x>
           X[E] = x

   Exact when nothing else in `L` reaches that element: `X` overlaps no other array `L`
   touches (`memory`), and `X` holds float64 or complex128 (a narrower dtype rounds at each
   store, which the local would not). An element `L` only reads (`X[E]`, `E` invariant as
   above) is read once before `L` where `X` overlaps no array `L` writes (LLVM cannot hoist
   it past stores it must assume reach it), whatever other elements of `X` `L` reads. The
   guard keeps `X[E]` unread when `L` does not run (there `E` may be out of bounds). The
   gain: `d[i] += a[i, j] * b[j]` over `j` was a load and a store through memory LLVM must
   assume the other stores reach; it is now a register.
2. *Forward order.* Reverse mode runs a loop's adjoint backwards: `for _r in range(N): i = N - 1
   - _r` (or `range(_rt.span(lo, N))`). Where the iterations are independent
   (`codegen/parallel.py`'s contract: they write disjoint elements, carry no scalar, and what
   they assign is not read after the loop) and each array the loop writes overlaps no other
   it touches (`memory`), the order does not matter, and the loop runs forward: `for i in
   range(N)` (`range(lo, N)`). LLVM vectorizes forward loops over contiguous memory; the
   reversed index defeats it (atax's adjoint at n=120: 120 -> 27 us with 1 and 2, measured
   with Numba 0.68). With `reorder` (`config.set_reassociate`: the program is compiled to add
   in any order), iterations that also add into shared elements (`d[j] += e`) or locals
   (`s += e`, `s` a float64 number by the memory facts or a local of rewrite 1), and touch them
   no other way, count as independent (`independent(..., sums=...)`): running them forward only
   reorders those sums. symm's
   adjoint at n=60: 141 -> 67 us with LLVM's `reassoc`, where `reassoc` alone, the loop
   reversed, gave 134 us (Numba 0.68).
3. *Unroll-and-jam.* A forward loop of independent iterations whose inner loop carries a
   chain (a sum in a local, a recurrence through memory) runs 4 or 2 iterations at once, its
   inner loops fused (`codegen/jam.py`, whose contract says when that is exact): the chains
   of the copies overlap. The names the copies introduce go to `copies`. A loop whose
   iterations are not independent, but which splits into one loop per part
   (`distribute.split`, exact to the bit) where a part's are, runs as those loops, that part
   jammed (`split_to_jam`: atax's row sums; small loops only, for compile time).
"""
from __future__ import annotations

import ast

from .. import pyast
from .distribute import _from_nonneg, distributed, split
from .interchange import interchanged
from .jam import jammed
from .loop_forms import Memory, copy_pair, invariant, plain, remembered, reversed_head, same, touched
from .outline import _loads, _stores
from .parallel import independent, written_arrays
from .tape_index import index_caches
from .tape_layout import transpose_caches
from .tree import parse, source


def lean_loops(src: str, memory: Memory, copies: dict[str, str] | None = None, reorder: bool = False,
               whole: bool = False) -> str:
    """`src` with its loops rewritten (module contract); the comments of the functions' top
    level (`# adjoint sweep`) kept. `copies`, if given, receives the names the jammed loops'
    copies introduce, each mapped to the name it copies (`codegen/jam.py`). `reorder`
    (`config.set_reassociate`): a reversed loop whose iterations differ only in the order they
    add into shared elements or locals runs forward too (rewrite 2). `whole`: a program Numba
    compiles whole (`numba=True`): larger loop bodies are jammed (`jam.jammed`)."""
    tree = parse(src)
    return source(tree) if lean_tree(tree, memory, copies, reorder, whole) else src


def lean_tree(tree: ast.Module, memory: Memory, copies: dict[str, str] | None = None,
              reorder: bool = False, whole: bool = False) -> bool:
    """`lean_loops` on the program's tree (`codegen/tree.py`), in place; whether it changed."""
    taken = {n.id for n in pyast.walk(tree) if isinstance(n, ast.Name)} | {a.arg for a in pyast.walk(tree)
                                                                         if isinstance(a, ast.arg)}
    rw = _Rewriter(memory, taken, copies if copies is not None else {}, reorder, whole)
    fns = [fn for fn in tree.body if isinstance(fn, ast.FunctionDef)]
    with remembered():
        for fn in fns:
            rw.changed |= index_caches(fn, memory.counters, rw.fresh)
            fn.body[:] = rw.block(fn.body, [])
    for fn in fns:  # after the swaps, which decide the order a cache's pushes run in
        elsewhere = frozenset(n.value.id for g in fns if g is not fn for n in pyast.walk(g)
                              if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name))
        rw.changed |= transpose_caches(fn, memory.counters, elsewhere)
    return rw.changed


# the largest loop (statements, itself included) `split_to_jam` splits: code size is compile time
_SPLIT_MOST = 24

class _Rewriter:
    def __init__(self, memory: Memory, taken: set[str], copies: dict[str, str], reorder: bool = False,
                 whole: bool = False):
        self.memory = memory
        self.whole = whole  # a program Numba compiles whole: larger bodies jammed
        self.reorder = reorder  # sums in any order (`independent(..., sums=...)`)
        self.scalars: set[str] = set()  # the locals `promote` made
        self.taken = taken
        self.copies = copies  # the jammed copies' names -> the names they copy
        self.outer: list[tuple[list[ast.stmt], ast.stmt]] = []  # (statements before, loop) around
        self.changed = False

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def block(self, stmts: list[ast.stmt], after: list[list[ast.stmt]]) -> list[ast.stmt]:
        """The statement list `stmts` rewritten; `after`: the lists that may run after it.

        `stmts` itself (a loop's body, which `after` holds as the loop's next iteration) is
        kept reading as the rewritten list will: the statements done, as rewritten, then the
        rest. The rewrites of a statement reach into the nodes it holds (a promoted element is
        read as its local), so the list as it was would read names that nothing assigns."""
        body = stmts
        out: list[ast.stmt] = []
        stmts = list(stmts)
        k = -1
        while k + 1 < len(stmts):
            k += 1
            body[:] = out + stmts[k:]
            s = stmts[k]
            rest = [stmts[k + 1:], *after]
            if isinstance(s, ast.For) and plain(s):
                for n in pyast.walk(s):
                    if isinstance(n, ast.For):
                        self._drop_copies_back(n)
                swapped = interchanged(s, self.memory, rest)
                if swapped is None:
                    split = distributed(s, self.memory, rest, sums=self.reorder)
                    if split is not None:  # one loop per part, each rewritten in turn
                        parts, self.memory = split  # with the arrays of scalars expanded
                        stmts[k:k + 1] = parts
                        s = stmts[k]
                        rest = [stmts[k + 1:], *after]
                        self.changed = True
                if swapped is not None:
                    s = stmts[k] = swapped
                    self.changed = True
                body[:] = out + stmts[k:]
            if isinstance(s, (ast.For, ast.While)):
                self.outer.append((out, s))
                s.body = self.block(s.body, [[s], *rest])  # the loop's next iteration runs after
                self.outer.pop()
                s.orelse = self.block(s.orelse, rest)
                if isinstance(s, ast.For):
                    out += self.loop(s, rest, out)
                    continue
            elif isinstance(s, ast.If):
                s.body = self.block(s.body, rest)
                s.orelse = self.block(s.orelse, rest)
            out.append(s)
        body[:] = out
        return out

    def loop(self, s: ast.For, rest: list[list[ast.stmt]], before: list[ast.stmt]) -> list[ast.stmt]:
        """The loop `s` (its inner loops done; `before`: the statements before it in its
        list) after both rewrites."""
        if not plain(s):
            return [s]
        self._drop_copies_back(s)
        pre, post = self.promote(s, before)
        s = self.forward(s, [post, *rest])
        loops = (jammed(s, self.memory, [post, *rest], self.fresh, self.copies, self.whole)
                 or self.split_to_jam(s, [post, *rest]) or [s])
        self.changed |= loops[0] is not s
        if not pre:
            return loops
        return [ast.If(test=_runs(s.iter), body=[*pre, *loops, *post], orelse=[])]

    def split_to_jam(self, s: ast.For, rest: list[list[ast.stmt]]) -> list[ast.stmt] | None:
        """The loops replacing `s` where it splits into one loop per part (`distribute.split`,
        exact to the bit) and some part then jams: atax's row loop, whose sum `tmp[i] += A[i, j]
        * x[j]` is chained and whose `y[j] += A[i, j] * tmp[i]` couples the iterations, as two
        loops, the first run four rows at once (jam's rule: 4 or 2 copies by the part's size).
        Each part also runs forward where it can (rewrite 2). None where no part jams: the split
        alone only walks the data again. Only loops of at most `_SPLIT_MOST` statements: the
        parts are more loops already, and Numba's compile time grows with the code. adi's sweeps
        (25 and 35 statements) split and jammed four rows at once made its first call 1.15 ->
        1.9 s, two rows at once 1.7 s, for a gradient 550 -> 440 us: over the first call's
        target of 1 s, which it met before (measured in one run, 0.97 s)."""
        if sum(isinstance(n, ast.stmt) for n in pyast.walk(s)) > _SPLIT_MOST:
            return None
        parts = split(s, self.memory, rest)
        if parts is None:
            return None
        out: list[ast.stmt] = []
        jams = False
        for k, part in enumerate(parts):
            after = [list(parts[k + 1:]), *rest]
            part = self.forward(part, after)
            got = jammed(part, self.memory, after, self.fresh, self.copies, self.whole)
            jams |= got is not None
            out += got or [part]
        return out if jams else None

    def _drop_copies_back(self, s: ast.For) -> None:
        """Drop `b = a` from the body of `s` where `a = b` came earlier in it and neither name
        is assigned in between: `b` holds `a` already. Reverse mode passes a carried scalar's
        adjoint through an inner loop so (`dt = dacc; ...; dacc = dt`), which would make the
        loop look carried."""
        body = s.body
        keep: list[ast.stmt] = []
        for k, st in enumerate(body):
            pair = copy_pair(st)
            if pair is not None and any(copy_pair(body[j]) == (pair[1], pair[0])
                                        and not (_stores(ast.Module(body[j + 1:k], [])) & set(pair))
                                        for j in range(k)):
                self.changed = True
                continue
            keep.append(st)
        s.body = keep

    # -- forward order -----------------------------------------------------------------------
    def forward(self, s: ast.For, rest: list[list[ast.stmt]]) -> ast.For:
        """`s` run forward where it is a reversed loop of independent iterations."""
        head = reversed_head(s)
        if head is None:
            return s
        var, lo, stop = head
        elements, bare = touched(s)
        if any(self._overlaps(w, elements, bare) for w in written_arrays([s])) \
                or not independent(s, self.memory.ndims, rest,
                                   sums=frozenset(self.memory.floats) | self.scalars if self.reorder else None):
            return s
        args = [stop] if lo is None else [lo, stop]
        self.changed = True
        return ast.For(target=ast.Name(var, ast.Store()),
                       iter=ast.Call(ast.Name("range", ast.Load()), args, []),
                       body=s.body[1:] or [ast.Pass()], orelse=[], type_comment=None)  # only its head: `pass`

    # -- scalar promotion --------------------------------------------------------------------
    def promote(self, s: ast.For, before: list[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
        """The statements that load `s`'s promotable elements into locals before it and store
        them back after it (module contract); `s` reads and writes the locals."""
        assigned = _stores(s)
        elements, bare = touched(s)
        written = written_arrays([s])
        span = _span(s, [(before, None), *reversed(self.outer)])
        chosen: list[tuple[str, ast.expr, bool]] = []  # (array, element, stored)
        for name, found in elements.items():
            if name in bare or name in written and not self.memory.is_wide(name):
                continue
            if name not in written:  # each invariant element read, where no write may reach it
                if not any(self.memory.overlap(name, w) for w in written):
                    chosen += [(name, index, False) for index in _distinct(found)
                               if self._element(name, index, assigned)]
                continue
            if self._overlaps(name, elements, bare):
                continue
            indices = _distinct(found)
            for index in indices:  # an element no other subscript of the loop reaches
                if self._element(name, index, assigned) and all(
                        _apart(other, index, span) for other in indices if other is not index):
                    stored = any(same(n.slice, index) and not isinstance(n.ctx, ast.Load) for n in found)
                    chosen.append((name, index, stored))
        pre: list[ast.stmt] = []
        post: list[ast.stmt] = []
        for name, index, stored in chosen:
            local = self.fresh(f"_acc_{name}" if stored else f"_at_{name}")
            self.scalars.add(local)  # an element of a float64 or complex128 array: a number
            _Replace(name, index, local).visit(s)
            element = f"{name}[{ast.unparse(index)}]"
            pre.append(ast.parse(f"{local} = {element}").body[0])
            if stored:
                post.append(ast.parse(f"{element} = {local}").body[0])
        self.changed |= bool(chosen)
        return pre, post

    def _element(self, name: str, index: ast.expr, assigned: set[str]) -> bool:
        """Whether `name[index]` is one element, the same in every iteration."""
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        return len(parts) == self.memory.ndims.get(name) and invariant(index, assigned)

    # -- facts -------------------------------------------------------------------------------
    def _overlaps(self, name: str, elements: dict[str, list[ast.Subscript]], bare: set[str]) -> bool:
        """Whether the array `name` may overlap another array the loop reaches: one it
        subscripts, or a listed array it names whole (an unlisted name used only whole is a
        number, a module or a fresh array of the backend's)."""
        others = set(elements) | {b for b in bare if self.memory.listed(b)}
        return any(self.memory.overlap(name, o) for o in others if o != name)


def _span(s: ast.For, frames: list[tuple[list[ast.stmt], ast.stmt | None]]) -> tuple[str, ast.expr | None, ast.expr]:
    """(The index, its first value (None: 0), its stop) of the plain loop `s`. A first value
    named by a temporary `t = e` before it is `e` where neither `t` nor what `e` reads is
    assigned in between: `frames` are the statements before `s` in its list, then those
    before each enclosing loop in its own list (innermost first), with the loop, all of whose
    body may run in between."""
    head = reversed_head(s)
    if head is not None:
        index, lo, stop = head
    else:
        it = s.iter
        assert isinstance(it, ast.Call) and isinstance(s.target, ast.Name)
        index, lo, stop = s.target.id, (it.args[0] if len(it.args) >= 2 else None), it.args[min(len(it.args) - 1, 1)]
    if isinstance(lo, ast.Name):
        between: set[str] = set()
        for before, loop in frames:
            if loop is not None:
                between |= _stores(loop)
            for k in range(len(before) - 1, -1, -1):
                t = before[k]
                if lo.id in _stores(t):
                    if isinstance(t, ast.Assign) and len(t.targets) == 1 and isinstance(t.targets[0], ast.Name) \
                            and not (between & (_loads(t.value) | {lo.id})):
                        return index, t.value, stop
                    return index, lo, stop
                between |= _stores(t)
            if lo.id in between:
                break
    return index, lo, stop


def _apart(other: ast.expr, index: ast.expr, span: tuple[str, ast.expr | None, ast.expr]) -> bool:
    """Whether the subscript `other` never reaches the element `index` in the loop of `span`:
    at some place `other` has the loop's index and `index` a value outside its range (its
    stop where the first value is known to be at least 0: a negative index names an element
    from the end, `a[-1]` for `k` in `range(-1, i)` being `a[i]` in the last row; or one less
    than its first value)."""
    var, lo, stop = span
    a = other.elts if isinstance(other, ast.Tuple) else [other]
    b = index.elts if isinstance(index, ast.Tuple) else [index]
    for x, e in zip(a, b):
        if not (isinstance(x, ast.Name) and x.id == var):
            continue
        if same(e, stop) and _from_nonneg(lo):
            return True
        one = ast.Constant(1)
        if isinstance(lo, ast.BinOp) and isinstance(lo.op, ast.Add) and _known_nonneg(e) and (
                same(lo.left, e) and same(lo.right, one) or same(lo.right, e) and same(lo.left, one)):
            return True  # (`e` never negative: `a[-1]` beside `k` in `range(0, n)` is `a[n - 1]`)
    return False


def _known_nonneg(e: ast.expr) -> bool:
    """An int constant >= 0, or a name the IR's analysis proved never negative (`loop_forms.NONNEG`)."""
    from .loop_forms import NONNEG

    if isinstance(e, ast.Constant):
        return type(e.value) is int and e.value >= 0
    return isinstance(e, ast.Name) and e.id in NONNEG.get()


def _distinct(found: list[ast.Subscript]) -> list[ast.expr]:
    """The distinct indices of the subscripts `found`, in order."""
    out: dict[str, ast.expr] = {}
    for n in found:
        out.setdefault(ast.dump(n.slice), n.slice)
    return list(out.values())


class _Replace(ast.NodeTransformer):
    """Each subscript `name[index]` as the local `local` (same context)."""

    def __init__(self, name: str, index: ast.expr, local: str):
        self.name = name
        self.index = ast.dump(index)
        self.local = local

    def visit_Subscript(self, n: ast.Subscript) -> ast.expr:
        if isinstance(n.value, ast.Name) and n.value.id == self.name and ast.dump(n.slice) == self.index:
            return ast.copy_location(ast.Name(self.local, n.ctx), n)
        return self.generic_visit(n)  # type: ignore[return-value]


def _runs(it: ast.expr) -> ast.expr:
    """A test that the loop over `it` (`range(...)`, step 1) runs at least once."""
    assert isinstance(it, ast.Call)
    args = it.args
    if len(args) == 1:
        return ast.Compare(pyast.clone(args[0]), [ast.Gt()], [ast.Constant(0)])
    return ast.Compare(pyast.clone(args[0]), [ast.Lt()], [pyast.clone(args[1])])
