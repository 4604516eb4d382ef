"""Loops of a compiled program made lean: element accumulators kept in locals, and adjoint loops
whose iterations are independent run forward.

Contract: `lean_loops(src, memory)` returns the generated program `src` (as the transforms write
it, for a compiled backend) computing the same numbers, to the bit, with two rewrites of its
`for` loops. `memory` (`transform/reverse/facts.MemoryFacts`) says which array names may point
into overlapping memory and which hold float64 or complex128 elements; a name it does not
list may overlap anything, and is never rewritten.

1. *Scalar promotion.* In a loop `L` (`for` over `range(...)`, its arguments names, constants
   and arithmetic), an array `X` that `L` writes, and names only through the element `X[E]`
   (every dimension subscripted, `E` the same expression everywhere in `L`, reading no name
   `L` assigns and calling nothing), is held in a local for the run of `L`:

       if <L runs at least once>:
           x = X[E]
           <L with each X[E] read as x, and each store into X[E] a store into x>
           X[E] = x

   Exact when nothing else in `L` reaches that element: `X` overlaps no other array `L`
   touches (`memory`), `L` calls only pure functions (`_PURE`), and `X` holds float64 or
   complex128 (a narrower dtype rounds at each store, which the local would not). An element
   `L` only reads (`X[E]`, `E` invariant as above) is read once before `L` where `X` overlaps
   no array `L` writes (LLVM cannot hoist it past stores it must assume reach it). The guard
   keeps `X[E]` unread when `L` does not run (there `E` may be out of bounds). The gain:
   `d[i] += a[i, j] * b[j]` over `j` was a load and a store through memory LLVM must assume
   the other stores reach; it is now a register.
2. *Forward order.* Reverse mode runs a loop's adjoint backwards: `for _r in range(N): i = N - 1
   - _r` (or `range(_rt.span(lo, N))`). Where the iterations are independent
   (`codegen/parallel.py`'s contract: they write disjoint elements, carry no scalar, and what
   they assign is not read after the loop), calls only pure functions, and each array the
   loop writes overlaps no other it touches (`memory`), the order does not matter, and the
   loop runs forward: `for i in range(N)` (`range(lo, N)`). LLVM vectorizes forward loops
   over contiguous memory; the reversed index defeats it (atax's adjoint at n=120: 120 ->
   27 us with both rewrites, measured with Numba 0.68).

Before both, a loop body's copy back `b = a` after `a = b`, neither name assigned in between,
is dropped (it changes nothing): reverse mode passes a carried scalar's adjoint through an
inner loop so, which made the loop look carried. Both run innermost loops first. Loops with
`break`, `continue`, `return` or `while` inside stay as they are.
"""
from __future__ import annotations

import ast
import copy
from typing import Protocol

from .outline import _loads, _stores
from .parallel import independent, written_arrays

# calls that read their arguments only and write no memory (no keyword arguments allowed)
_PURE_MODULES = ("math", "np", "cmath")
_PURE_NAMES = {"abs", "min", "max", "float", "int", "complex", "bool", "len", "range", "_rt.fdiv", "_rt.nonneg",
               "_rt.span"}
_MUTATING_NP = {"copyto", "put", "place", "putmask", "fill_diagonal"}


class Memory(Protocol):
    """What the program's array names point into (`transform/reverse/facts.MemoryFacts`)."""

    @property
    def ndims(self) -> dict[str, int]:
        """The names that hold arrays (listed or not), with their dimensions."""

    def overlap(self, a: str, b: str) -> bool:
        """Whether `a` and `b` may point into overlapping memory (True for an unlisted one)."""

    def listed(self, name: str) -> bool:
        """Whether `name` is an array whose memory is known."""

    def is_wide(self, name: str) -> bool:
        """Whether `name` holds float64 or complex128 elements."""


def lean_loops(src: str, memory: Memory) -> str:
    """`src` with its loops rewritten (module contract)."""
    tree = ast.parse(src)
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(tree)
                                                                         if isinstance(a, ast.arg)}
    rw = _Rewriter(memory, taken)
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            fn.body = rw.block(fn.body, [])
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n" if rw.changed else src


class _Rewriter:
    def __init__(self, memory: Memory, taken: set[str]):
        self.memory = memory
        self.taken = taken
        self.changed = False

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def block(self, stmts: list[ast.stmt], after: list[list[ast.stmt]]) -> list[ast.stmt]:
        """The statement list `stmts` rewritten; `after`: the lists that may run after it."""
        out: list[ast.stmt] = []
        for k, s in enumerate(stmts):
            rest = [stmts[k + 1:], *after]
            if isinstance(s, (ast.For, ast.While)):
                s.body = self.block(s.body, [[s], *rest])  # the loop's next iteration runs after
                s.orelse = self.block(s.orelse, rest)
                if isinstance(s, ast.For):
                    out += self.loop(s, rest)
                    continue
            elif isinstance(s, ast.If):
                s.body = self.block(s.body, rest)
                s.orelse = self.block(s.orelse, rest)
            out.append(s)
        return out

    def loop(self, s: ast.For, rest: list[list[ast.stmt]]) -> list[ast.stmt]:
        """The loop `s` (its inner loops done) after both rewrites."""
        if not _plain(s):
            return [s]
        self._drop_copies_back(s)
        s = self.forward(s, rest)
        return self.promote(s)

    def _drop_copies_back(self, s: ast.For) -> None:
        """Drop `b = a` from the body of `s` where `a = b` came earlier in it and neither name
        is assigned in between: `b` holds `a` already. Reverse mode passes a carried scalar's
        adjoint through an inner loop so (`dt = dacc; ...; dacc = dt`), which would make the
        loop look carried."""
        body = s.body
        keep: list[ast.stmt] = []
        for k, st in enumerate(body):
            pair = _copy(st)
            if pair is not None and any(_copy(body[j]) == (pair[1], pair[0])
                                        and not (_stores(ast.Module(body[j + 1:k], [])) & set(pair))
                                        for j in range(k)):
                self.changed = True
                continue
            keep.append(st)
        s.body = keep

    # -- forward order -----------------------------------------------------------------------
    def forward(self, s: ast.For, rest: list[list[ast.stmt]]) -> ast.For:
        """`s` run forward where it is a reversed loop of independent iterations."""
        head = _reversed(s)
        if head is None:
            return s
        var, lo, stop = head
        elements, bare = _touched(s)
        if any(self._overlaps(w, elements, bare) for w in written_arrays([s])) \
                or not independent(s, self.memory.ndims, rest):
            return s
        args = [stop] if lo is None else [lo, stop]
        self.changed = True
        return ast.For(target=ast.Name(var, ast.Store()),
                       iter=ast.Call(ast.Name("range", ast.Load()), args, []),
                       body=s.body[1:], orelse=[], type_comment=None)

    # -- scalar promotion --------------------------------------------------------------------
    def promote(self, s: ast.For) -> list[ast.stmt]:
        """`s` with its promotable elements in locals (module contract), in its guard."""
        assigned = _stores(s)
        elements, bare = _touched(s)
        written = written_arrays([s])
        chosen: list[tuple[str, ast.expr, bool]] = []  # (array, element, written)
        for name, found in elements.items():
            if name in bare or name in written and not self.memory.is_wide(name):
                continue
            index = found[0].slice
            parts = index.elts if isinstance(index, ast.Tuple) else [index]
            if len(parts) != self.memory.ndims.get(name) or not _invariant(index, assigned) \
                    or not all(_same(n.slice, index) for n in found):
                continue
            if name in written and self._overlaps(name, elements, bare):
                continue
            if name not in written and any(self.memory.overlap(name, w) for w in written):
                continue
            chosen.append((name, index, name in written))
        if not chosen:
            return [s]
        pre: list[ast.stmt] = []
        post: list[ast.stmt] = []
        for name, index, stored in chosen:
            local = self.fresh(f"_acc_{name}" if stored else f"_at_{name}")
            _Replace(name, local).visit(s)
            element = f"{name}[{ast.unparse(index)}]"
            pre.append(ast.parse(f"{local} = {element}").body[0])
            if stored:
                post.append(ast.parse(f"{element} = {local}").body[0])
        self.changed = True
        guard = _runs(s.iter)
        return [ast.If(test=guard, body=[*pre, s, *post], orelse=[])]

    # -- facts -------------------------------------------------------------------------------
    def _overlaps(self, name: str, elements: dict[str, list[ast.Subscript]], bare: set[str]) -> bool:
        """Whether the array `name` may overlap another array the loop reaches: one it
        subscripts, or a listed array it names whole (an unlisted name used only whole is a
        number, a module or a fresh array of the backend's)."""
        others = set(elements) | {b for b in bare if self.memory.listed(b)}
        return any(self.memory.overlap(name, o) for o in others if o != name)


def _touched(s: ast.For) -> tuple[dict[str, list[ast.Subscript]], set[str]]:
    """The names `s` subscripts (with their subscripts) and the names it uses otherwise."""
    elements: dict[str, list[ast.Subscript]] = {}
    bases = set()
    for n in ast.walk(s):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
            elements.setdefault(n.value.id, []).append(n)
            bases.add(id(n.value))
    bare = {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and id(n) not in bases}
    return elements, bare


class _Replace(ast.NodeTransformer):
    """Each subscript of the array `name` as the local `local` (same context)."""

    def __init__(self, name: str, local: str):
        self.name = name
        self.local = local

    def visit_Subscript(self, n: ast.Subscript) -> ast.expr:
        if isinstance(n.value, ast.Name) and n.value.id == self.name:
            return ast.copy_location(ast.Name(self.local, n.ctx), n)
        return self.generic_visit(n)  # type: ignore[return-value]


def _copy(s: ast.stmt) -> tuple[str, str] | None:
    """(a, b) of `a = b`, two names."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
            and isinstance(s.value, ast.Name):
        return s.targets[0].id, s.value.id
    return None


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _invariant(e: ast.expr, assigned: set[str]) -> bool:
    """An index of names `L` does not assign, constants and arithmetic (no slices, no calls)."""
    return all(isinstance(n, (ast.Name, ast.Constant, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.operator,
                              ast.unaryop, ast.expr_context)) for n in ast.walk(e)) \
        and not (_loads(e) & assigned)


def _plain(s: ast.For) -> bool:
    """A `for` over `range` whose arguments are names, constants, arithmetic or `_rt.span`,
    without `else`, whose body has no `break`, `continue`, `return`, `while` or impure call."""
    it = s.iter
    if s.orelse or not isinstance(s.target, ast.Name) or not (isinstance(it, ast.Call) and _name(it.func) == "range"
                                                              and not it.keywords and 1 <= len(it.args) <= 3):
        return False
    for n in ast.walk(it):
        if isinstance(n, ast.Call) and n is not it and _name(n.func) != "_rt.span":
            return False
        if isinstance(n, (ast.Subscript, ast.Attribute)) and _name(n) != "_rt.span":
            return False
    if len(it.args) == 3 and not (isinstance(it.args[2], ast.Constant) and it.args[2].value == 1):
        return False
    for n in ast.walk(s):
        if isinstance(n, (ast.Break, ast.Continue, ast.Return, ast.While, ast.Yield, ast.Lambda)):
            return False
        if isinstance(n, ast.Call) and not _pure(n):
            return False
    return True


def _pure(c: ast.Call) -> bool:
    if c.keywords:
        return False
    name = _name(c.func)
    if name in _PURE_NAMES:
        return True
    mod, _, attr = name.rpartition(".")
    return mod in _PURE_MODULES and attr not in _MUTATING_NP and "." not in mod


def _name(e: ast.expr) -> str:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        inner = _name(e.value)
        return f"{inner}.{e.attr}" if inner else ""
    return ""


def _reversed(s: ast.For) -> tuple[str, ast.expr | None, ast.expr] | None:
    """(i, lo, N) of a reversed loop `for _r in range(N): i = N - 1 - _r` (lo None) or
    `for _r in range(_rt.span(lo, N)): i = N - 1 - _r`, whose counter `_r` is read nowhere
    else and whose `i` and bounds the body does not assign; else None."""
    it = s.iter
    assert isinstance(it, ast.Call) and isinstance(s.target, ast.Name)
    if len(it.args) != 1 or not s.body:
        return None
    arg = it.args[0]
    lo: ast.expr | None = None
    stop = arg
    if isinstance(arg, ast.Call) and _name(arg.func) == "_rt.span" and len(arg.args) == 2 and not arg.keywords:
        lo, stop = arg.args
    first = s.body[0]
    counter = s.target.id
    rev = ast.BinOp(ast.BinOp(stop, ast.Sub(), ast.Constant(1)), ast.Sub(), ast.Name(counter, ast.Load()))
    if not (isinstance(first, ast.Assign) and len(first.targets) == 1 and isinstance(first.targets[0], ast.Name)
            and _same(first.value, rev)):
        return None
    var = first.targets[0].id
    rest = ast.Module(s.body[1:], [])
    stored = _stores(rest)
    if counter in _loads(rest) or var in stored or (_loads(stop) | (_loads(lo) if lo is not None else set())) & (
            stored | {var}):
        return None
    return var, copy.deepcopy(lo), copy.deepcopy(stop)


def _runs(it: ast.expr) -> ast.expr:
    """A test that the loop over `it` (`range(...)`, step 1) runs at least once."""
    assert isinstance(it, ast.Call)
    args = it.args
    if len(args) == 1:
        return ast.Compare(copy.deepcopy(args[0]), [ast.Gt()], [ast.Constant(0)])
    return ast.Compare(copy.deepcopy(args[0]), [ast.Lt()], [copy.deepcopy(args[1])])
