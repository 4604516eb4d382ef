"""Compile only what needs compiling: loop nests of scalar work outlined into Numba kernels.

Contract: `outline(src, arrays)` takes a generated derivative program as the Python backend
runs it and returns an `Outlined`: the same program in which every loop that does scalar
work is replaced by a call of a *kernel*, and the source of a module defining those kernels.
Everything else (whole-array NumPy statements, BLAS calls, reductions, list bookkeeping) stays
Python and runs as NumPy calls, so a first call compiles only the loops, never a whole program.
A loop outside loops that only stores a constant on a matrix's diagonal becomes one NumPy call
first (`codegen/fills.py`).

A loop is outlined when
- it does scalar work: it reads or writes an element of an array (`a[i, j]`, a subscript of a
  name in `arrays` or of a cache buffer with no slice in its index) - the statements NumPy
  runs slowly one at a time from Python;
- it computes with no whole arrays or slices (`_ScalarWork.array_level`: those are NumPy's
  work, and compiling them costs seconds) other than views by basic slicing (`v = a[i, 1:n]`)
  and, inside two loops or more of the function, the statements `in_place` accepts: the elementwise
  statements and sums that the Numba backend writes as loops in place, an intrinsic each, with
  NumPy's semantics (`codegen/numba/ew_rewrite.in_place`; none when `in_place` is not given),
  run many times per call (conv2d's `out[f] += w[f, c, i, j] * x[c, i:, j:]`). A loop of such
  statements only, with no scalar work, or with them in the body of a single loop (a time loop
  of a few large statements) stays NumPy's: its compile would cost more than it saves; a loop that does
  scalar work and also other array statements stays Python, and its inner loops are
  candidates in turn (outlined loops are loop nests: an outlined loop is outlined whole);
- Numba may compile it: no `return`, `yield`, `try`, `with`, `raise`, `del`, `global`,
  `nonlocal`, nested function, lambda or comprehension in it;
- every name it may read before writing it (its inputs: upward-exposed uses, found by a
  definite-assignment walk) is definitely assigned before it, and so is every name it writes
  that the program may read after it (its outputs), so that the kernel's parameters and results
  are always bound, whether or not the loop runs.

The kernel `def _kernel_k(inputs): <the loop>; return (outputs,)` takes the inputs by value;
arrays are shared, so what the loop writes into memory is seen by the program, and rebound
names come back as results. The program's statement becomes `(outputs,) = _kernel_k(inputs)`.
Names never assigned in the generated function (`np`, `_rt`, `math`, builtins) are globals of
both modules, not inputs.

A kernel whose loops write disjoint memory in every iteration (`codegen/parallel.py`) has a
twin with `numba.prange` loops, compiled with `parallel=True` when first used: with more than
one thread (`zymo.config.set_threads`) and no written array argument overlapping another, the
twin runs (same results, to the bit), else the serial kernel. The twin may also split a loop
kept serial only by what its parts share into loops that each run in parallel or by blocks
(`_split_for_twin`, `codegen/distribute.split`); the serial kernel keeps the loop whole.

At run time each kernel is a `Kernel`: its first call tries the Numba dispatcher (compiled
then, or loaded from the disk cache) when all arguments are numbers, NumPy arrays of numbers
or tuples of them; when an argument is anything else (a list, an object) or Numba cannot
compile the loop, it runs the loop's Python function instead, for good. Compiled and Python
kernels compute the same numbers as the two backends do.
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .. import pyast
from .index_checks import IndicesUnproven

_FORBIDDEN = (ast.Return, ast.Yield, ast.YieldFrom, ast.Try, ast.With, ast.Raise, ast.Delete, ast.Global,
              ast.Nonlocal, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp,
              ast.DictComp, ast.GeneratorExp, ast.ClassDef, ast.Await)
if hasattr(ast, "TryStar"):
    _FORBIDDEN += (ast.TryStar,)


@dataclass
class Outlined:
    """A program with its scalar loops outlined (module contract)."""
    src: str  # the program, calling the kernels
    kernels: str  # the source of the module defining them ("" when none)
    names: list[str] = field(default_factory=list)  # the kernels' names, in order
    # kernel -> (its twin with `numba.prange` loops, the positions of the arrays those write, and
    # of those the twin needs to hold float64: `codegen/expand.py`)
    parallel: dict[str, tuple[str, list[int], list[int]]] = field(default_factory=dict)


def outline(src: str, ndims: dict[str, int], numbers: frozenset[str], caches: frozenset[str] = frozenset(),
            prefix: str = "_kernel", in_place: Callable[[ast.stmt], bool] | None = None) -> Outlined:
    """`src` with its scalar loops replaced by kernel calls (module contract); `ndims`: the
    names that hold arrays in the generated program, with their dimensions; `numbers`: names
    that hold only numbers; `caches`: the names of reverse mode's stacked caches; `in_place`:
    the array statements a kernel may hold."""
    token = _NAMES.set({})
    try:
        got = _outline(ast.parse(src), ndims, numbers, caches, prefix, in_place)
    finally:
        _NAMES.reset(token)
    return got if got is not None else Outlined(src, "")


def outline_tree(tree: ast.Module, ndims: dict[str, int], numbers: frozenset[str],
                 caches: frozenset[str] = frozenset(), prefix: str = "_kernel",
                 in_place: Callable[[ast.stmt], bool] | None = None) -> Outlined | None:
    """`outline` on the program's tree (`codegen/tree.py`), in place: the program printed once
    (without its comments: a comment between two loops would keep them out of one kernel), or
    None where nothing is outlined or changed (the tree as it was, comments included)."""
    from .tree import put_comments, take_comments

    taken = take_comments(tree)
    token = _NAMES.set({})
    try:
        got = _outline(tree, ndims, numbers, caches, prefix, in_place)
    finally:
        _NAMES.reset(token)
    if got is None:
        put_comments(taken)
    return got


def _outline(tree: ast.Module, ndims: dict[str, int], numbers: frozenset[str], caches: frozenset[str], prefix: str,
             in_place: Callable[[ast.stmt], bool] | None) -> Outlined | None:
    from .fills import diagonal_fills

    kernels: list[ast.FunctionDef] = []
    work = _ScalarWork(ndims, numbers, caches, in_place)
    filled = False
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            filled |= diagonal_fills(fn, ndims)  # before outlining: such a loop needs no kernel
            _Outliner(fn, work, kernels, prefix).run()
    if not kernels:
        return Outlined(ast.unparse(tree) + "\n", "") if filled else None
    from .blocks import blocked_nests
    from .expand import expanded_loops
    from .parallel import parallel_loops, to_prange, written_arrays

    twins, parallel = [], {}
    for k in kernels:
        whole, pairs = _unjammed(k)
        base = _split_for_twin(whole, ndims, caches)
        loops = parallel_loops(base, ndims, caches)
        nests = blocked_nests(base, ndims, caches, loops)
        sums = expanded_loops(base, ndims, caches, loops + nests)
        if loops or nests or sums:
            written = written_arrays(loops + nests + [loop for loop, _ in sums])
            # by their text: `_split_for_twin` deep-copies a body it splits
            by_text = {ast.dump(loop): pair for loop, pair in pairs}
            grouped = {id(loop): by_text[ast.dump(loop)] for loop in loops if ast.dump(loop) in by_text}
            if grouped:  # a jammed loop run in parallel: by its groups of iterations (`jam.parallel_groups`)
                base = _grouped(base, grouped)
                loops = [loop for loop in loops if id(loop) not in grouped]
            twin = to_prange(base, loops, k.name + "_parallel", nests, sums)
            params = [a.arg for a in k.args.args]
            floats = set().union(*(arrays for _, arrays in sums))
            twins.append(twin)
            parallel[k.name] = (twin.name, [i for i, n in enumerate(params) if n in written],
                                [i for i, n in enumerate(params) if n in floats])
    from .hoist import hoist_spans

    for k in kernels + twins:  # last: the passes above read the trip counts where they are
        hoist_spans(k)
    body = "\n\n".join(ast.unparse(k) for k in kernels + twins) + "\n"
    return Outlined(ast.unparse(tree) + "\n", body, [k.name for k in kernels], parallel)


def _unjammed(kernel: ast.FunctionDef) -> tuple[ast.FunctionDef, list[tuple[ast.For, tuple[ast.For, ast.For]]]]:
    """`kernel`, or a copy whose jammed loops run whole again (`codegen/jam.unjammed`), for the
    twin's analysis; and each such loop with the jammed pair it stands for."""
    from .jam import unjammed

    new = pyast.clone(kernel)
    pairs: dict[int, tuple[ast.For, ast.For]] = {}
    new.body = unjammed(new.body, pairs)
    if not pairs:
        return kernel, []
    wholes = [n for n in pyast.walk(new) if id(n) in pairs]
    return new, [(w, pairs[id(w)]) for w in wholes]  # type: ignore[misc]


def _grouped(base: ast.FunctionDef, grouped: dict[int, tuple[ast.For, ast.For]]) -> ast.FunctionDef:
    """A copy of the twin's `base` whose loops of `grouped` run their jammed groups in parallel."""
    import copy

    from .jam import parallel_groups

    taken = {n.id for n in pyast.walk(base) if isinstance(n, ast.Name)}
    for jam, tail in grouped.values():
        taken |= {n.id for t in (jam, tail) for n in pyast.walk(t) if isinstance(n, ast.Name)}

    def fresh(stem: str) -> str:
        name, j = stem, 0
        while name in taken:
            j += 1
            name = f"{stem}_{j}"
        taken.add(name)
        return name
    new = copy.copy(base)
    new.body = parallel_groups(list(base.body), grouped, fresh)
    return new


def _split_for_twin(kernel: ast.FunctionDef, ndims: dict[str, int], caches: frozenset[str]) -> ast.FunctionDef:
    """`kernel`, or a copy whose loops (at its top level) that run neither in parallel nor by
    blocks are split into loops that each do (`distribute.split`): gesummv's adjoint adds into
    `dx[j]` for every row and resets `dy[i]` around that nest; split, the resets run as
    parallel loops and the nest by blocks of `j`. The parts' elements are told apart as if
    every array parameter were memory of its own, which the twin's caller checks at run time
    (`overlapping`) for the arrays the parallel loops write; other arrays are unknown, and so
    is a parameter the kernel binds again (`a = b`: then a view of another)."""
    import copy

    from ..transform.memory import MemoryFacts
    from .blocks import _blockable
    from .distribute import split
    from .parallel import independent

    rebound = _stores(ast.Module(kernel.body, []))
    params = [a.arg for a in kernel.args.args if a.arg in ndims and a.arg not in rebound]
    memory = MemoryFacts({n: (i,) for i, n in enumerate(params)}, frozenset(), dict(ndims), caches=caches)
    body: list[ast.stmt] = []
    changed = False
    for k, s in enumerate(kernel.body):
        rest = [kernel.body[k + 1:]]
        if isinstance(s, ast.For) and not independent(s, ndims, rest, caches) \
                and not _blockable(s, ndims, caches, rest):
            loops = split(s, memory, rest)
            if loops is not None and all(
                    independent(t, ndims, [loops[j + 1:], *rest], caches)
                    or _blockable(t, ndims, caches, [loops[j + 1:], *rest]) for j, t in enumerate(loops)):
                body += loops
                changed = True
                continue
        body.append(s)
    if not changed:
        return kernel
    new = copy.copy(kernel)
    new.body = pyast.clone(body)
    return new


# while `outline` runs: node id -> (the node, the names it loads, the names it stores)
_NAMES: ContextVar[dict[int, tuple[ast.AST, frozenset[str], frozenset[str]]] | None] = ContextVar(
    "_NAMES", default=None)


def _names(node: ast.AST) -> tuple[frozenset[str], frozenset[str]]:
    """The names `node` loads and the names it stores. While `outline` runs, they are kept for
    each node that holds no statements (an expression, an assignment): the outliner moves
    statements between lists (into kernels) but edits no such node in place, so what it found
    stays true. A node that holds statements (a loop, a branch) gets the union of its
    children's, found again each time: its lists change as loops become kernel calls."""
    memo = _NAMES.get()
    if hasattr(node, "body"):
        loads: set[str] = set()
        stores: set[str] = set()
        for child in ast.iter_child_nodes(node):
            cl, cs = _names(child)
            loads |= cl
            stores |= cs
        return frozenset(loads), frozenset(stores)
    if memo is not None:
        hit = memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1], hit[2]
    read: list[str] = []
    written: list[str] = []
    stack = [node]
    while stack:  # `ast.walk`, without its generators: this runs for every statement of a program
        n = stack.pop()
        if isinstance(n, ast.Name):
            if isinstance(n.ctx, ast.Load):
                read.append(n.id)
            elif isinstance(n.ctx, ast.Store):
                written.append(n.id)
            continue
        for f in n._fields:
            v = getattr(n, f, None)
            if isinstance(v, ast.AST):
                stack.append(v)
            elif isinstance(v, list):
                stack += [x for x in v if isinstance(x, ast.AST)]
    found = (frozenset(read), frozenset(written))
    if memo is not None:
        memo[id(node)] = (node, *found)
    return found


def _stores(node: ast.AST) -> set[str]:
    return set(_names(node)[1])


def _loads(node: ast.AST) -> set[str]:
    return set(_names(node)[0])


def _exposed(stmts: list[ast.stmt], written: set[str]) -> tuple[set[str], set[str]]:
    """Names the statements may read before writing them (given `written` already definitely
    written), and the names definitely written after them."""
    exposed: set[str] = set()
    written = set(written)
    for s in stmts:
        e, written = _exposed_stmt(s, written)
        exposed |= e
    return exposed, written


def _exposed_stmt(s: ast.stmt, written: set[str]) -> tuple[set[str], set[str]]:
    if isinstance(s, ast.If):
        e = _loads(s.test) - written
        e1, w1 = _exposed(s.body, written)
        e2, w2 = _exposed(s.orelse, written)
        return e | e1 | e2, w1 & w2
    if isinstance(s, (ast.For, ast.While)):
        if isinstance(s, ast.For):
            e = _loads(s.iter) - written
            inner = written | _stores(s.target)
        else:
            e = _loads(s.test) - written
            inner = set(written)
        e1, _ = _exposed(s.body, inner)
        e2, _ = _exposed(s.orelse, written)
        return e | e1 | e2, written  # the loop may run zero times
    if isinstance(s, (ast.Assign, ast.AnnAssign)):
        value = s.value
        e = (_loads(value) if value is not None else set()) - written
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        for t in targets:  # subscripts and attributes of targets read their bases
            e |= _loads(t) - written
        return e, written | set().union(*(_stores(t) for t in targets))
    if isinstance(s, ast.AugAssign):
        e = (_loads(s.value) | _loads(s.target)) - written
        if isinstance(s.target, ast.Name):
            e.add(s.target.id) if s.target.id not in written else None
        return e, written | _stores(s.target)
    return _loads(s) - written, written | _stores(s)


@dataclass(frozen=True)
class _ScalarWork:
    """Whether a loop reads or writes single elements of arrays (module contract)."""
    ndims: dict[str, int]
    numbers: frozenset[str]
    caches: frozenset[str]
    in_place: Callable[[ast.stmt], bool] | None = None

    def __call__(self, loop: ast.stmt) -> bool:
        for n in pyast.walk(loop):
            if isinstance(n, ast.Subscript) and self._element(n):
                return True
            if isinstance(n, ast.Assign) and len(n.targets) == 1:  # a number into / out of a cache
                t, v = n.targets[0], n.value
                if self._cache(t) and self._number(v) or self._cache(v) and self._number(t):
                    return True
        return False

    def array_level(self, loop: ast.stmt, depth: int = 0) -> bool:
        """Whether the loop computes with whole arrays or slices somewhere (NumPy's work, which
        a compiled kernel would cost compile time for): an array name used other than through
        one of its elements or its `shape`/`ndim`/`size`/`dtype`, outside views and the
        statements `in_place` accepts (module contract)."""
        return any(self._array_names(n) for n in self._pieces([loop], depth))

    def _pieces(self, stmts: list[ast.stmt], depth: int) -> list[ast.AST]:
        """The statements, loop headers and branch tests that are not views (inside a loop) or
        `in_place` statements inside two loops or more (`depth`: the loops of the function
        around `stmts`): an array statement run once per iteration of a single loop stays
        NumPy's work (a time loop of a few large statements gains less from a compile than it
        costs); one in a loop nest runs many times per call, each a NumPy call of its own."""
        out: list[ast.AST] = []
        for s in stmts:
            if self.in_place is not None and depth >= 1 and (self._view(s) or depth >= 2 and self.in_place(s)):
                continue
            if isinstance(s, (ast.For, ast.While)):
                head = [s.target, s.iter] if isinstance(s, ast.For) else [s.test]
                out += [*head, *self._pieces(s.body, depth + 1), *self._pieces(s.orelse, depth)]
            elif isinstance(s, ast.If):
                out += [s.test, *self._pieces(s.body + s.orelse, depth)]
            else:
                out.append(s)
        return out

    def _view(self, s: ast.stmt) -> bool:
        """`v = a[index]`, a basic-slicing view of an array (numbers and slices of numbers)."""
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
            return False
        v = s.value
        if not (isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and v.value.id in self.ndims):
            return False
        parts = v.slice.elts if isinstance(v.slice, ast.Tuple) else [v.slice]
        return all(all(b is None or self._number(b) for b in (p.lower, p.upper, p.step)) if isinstance(p, ast.Slice)
                   else self._number(p) for p in parts)

    def _array_names(self, node: ast.AST) -> bool:
        through: set[int] = set()
        for n in pyast.walk(node):
            if isinstance(n, ast.Subscript) and self._element(n):
                through.add(id(n.value))
            elif isinstance(n, ast.Attribute) and n.attr in ("shape", "ndim", "size", "dtype"):
                through.add(id(n.value))
        return any(isinstance(n, ast.Name) and n.id in self.ndims and id(n) not in through for n in pyast.walk(node))

    def _element(self, s: ast.Subscript) -> bool:
        if not isinstance(s.value, ast.Name) or s.value.id not in self.ndims:
            return False
        parts = s.slice.elts if isinstance(s.slice, ast.Tuple) else [s.slice]
        return len(parts) == self.ndims[s.value.id] and all(self._number(p) for p in parts)

    def _number(self, e: ast.expr) -> bool:
        if isinstance(e, ast.Constant):
            return isinstance(e.value, (int, float, bool)) and e.value is not None
        if isinstance(e, ast.Name):
            return e.id in self.numbers
        if isinstance(e, ast.BinOp):
            return self._number(e.left) and self._number(e.right)
        if isinstance(e, ast.UnaryOp):
            return self._number(e.operand)
        return False

    def _cache(self, e: ast.expr) -> bool:
        return isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name) and e.value.id in self.caches


def _compilable(loop: ast.stmt) -> bool:
    """Whether `loop` may run compiled: none of `_FORBIDDEN`'s constructs, and no draw from
    NumPy's global generator (`np.random.random()`: Numba's own generator is another one, which
    `np.random.seed` in the program, and `draws.py`'s passes, do not reach; helper 79)."""
    return not any(isinstance(n, _FORBIDDEN) or _draws(n) for n in pyast.walk(loop))


def _draws(n: ast.AST) -> bool:
    """Whether `n` is a call of `np.random.<f>`."""
    f = n.func if isinstance(n, ast.Call) else None
    return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and f.value.attr == "random"
            and isinstance(f.value.value, ast.Name) and f.value.value.id == "np")


class _Outliner:
    """Outlines the scalar loops of one generated function (module contract)."""

    def __init__(self, fn: ast.FunctionDef, work: _ScalarWork, kernels: list[ast.FunctionDef], prefix: str):
        self.fn = fn
        self.work = work
        self.kernels = kernels
        self.prefix = prefix
        self.depth = 0  # the loops around the statements `_block` looks at
        args = fn.args
        self.params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        self.local = self.params | _stores(fn)  # the names the function binds (the rest are globals)

    def run(self) -> None:
        self._block(self.fn.body, set(self.params), [])

    def _block(self, stmts: list[ast.stmt], written: set[str], after: list[list[ast.stmt]]) -> set[str]:
        """Outline in `stmts` (`written`: names definitely bound before them; `after`: the
        statement lists that may run after them, innermost first). Returns the names
        definitely bound after them."""
        k = 0
        while k < len(stmts):
            s = stmts[k]
            if isinstance(s, ast.If):
                self._block(s.body, set(written), [stmts[k + 1:]] + after)
                self._block(s.orelse, set(written), [stmts[k + 1:]] + after)
            elif self._candidate(s):
                end = self._run_end(stmts, k)
                for stop in dict.fromkeys((end, k + 1)):  # the run of loops, else the loop alone
                    call = self._outlined(stmts[k:stop], written, [stmts[stop:]] + after)
                    if call is not None:
                        _, written = _exposed(stmts[k:stop], written)
                        stmts[k:stop] = [call]
                        break
                else:
                    self._inner(s, written, [stmts[k + 1:]] + after)
                    _, written = _exposed_stmt(s, written)
                k += 1
                continue
            elif isinstance(s, (ast.For, ast.While)) and self.work(s):
                self._inner(s, written, [stmts[k + 1:]] + after)
            _, written = _exposed_stmt(s, written)
            k += 1
        return written

    def _inner(self, loop: ast.For | ast.While, written: set[str], rest: list[list[ast.stmt]]) -> None:
        """Outline inside a loop kept as Python: its inner loops, each run again by the next
        iteration of this one."""
        inner = written | (_stores(loop.target) if isinstance(loop, ast.For) else set())
        self.depth += 1
        self._block(loop.body, inner, [[loop]] + rest)
        self.depth -= 1

    def _candidate(self, s: ast.stmt) -> bool:
        """A loop that may become a kernel (or start one)."""
        return (isinstance(s, (ast.For, ast.While)) and self.work(s) and not self.work.array_level(s, self.depth)
                and _compilable(s))

    def _run_end(self, stmts: list[ast.stmt], k: int) -> int:
        """The end of the run of statements from the loop `stmts[k]` that one kernel may hold:
        more such loops, and between them the statements of numbers and caches that join them
        (`_glue`). One kernel compiles faster than several (Numba's cost per function)."""
        end = k + 1
        j = k + 1
        while j < len(stmts) and (self._candidate(stmts[j]) or self._glue(stmts[j])):
            j += 1
            if self._candidate(stmts[j - 1]):
                end = j
        return end

    def _glue(self, s: ast.stmt) -> bool:
        if not isinstance(s, (ast.Assign, ast.AugAssign)) or self.work.array_level(s, self.depth) \
                or not _compilable(s):
            return False
        for n in pyast.walk(s):
            if isinstance(n, ast.Call):
                f = n.func
                name = (f.id if isinstance(f, ast.Name)
                        else f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                        else "")
                if name not in _GLUE_CALLS and not name.startswith("math."):
                    return False
        return True

    def _outlined(self, run: list[ast.stmt], written: set[str], rest: list[list[ast.stmt]]) -> ast.stmt | None:
        """The call of a new kernel holding the statements `run`, or None if they cannot be one."""
        exposed, bound = _exposed(run, set())
        inputs = sorted(exposed & self.local)
        if any(n not in written for n in inputs):
            return None  # an input may be unbound here (the program reads it only on some path)
        later: set[str] = set()
        seen: set[str] = set()
        for stmts in rest:  # what the rest of the function may read before writing it
            e, w = _exposed(stmts, seen)
            later |= e
            seen = w
        stores = set().union(*(_stores(s) for s in run))
        outputs = sorted((stores & later) & self.local)
        if any(n not in written and n not in bound for n in outputs):
            return None  # bound by a loop only if it runs: keep it Python
        name = f"{self.prefix}_{len(self.kernels)}"
        ret = ast.Return(value=ast.Tuple(elts=[ast.Name(n, ast.Load()) for n in outputs], ctx=ast.Load()))
        kernel = ast.FunctionDef(name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in inputs],
                                                               kwonlyargs=[], kw_defaults=[], defaults=[]),
                                 body=[*run, ret], decorator_list=[], returns=None, type_params=[])
        self.kernels.append(ast.fix_missing_locations(kernel))
        call = ast.Call(func=ast.Name(name, ast.Load()), args=[ast.Name(n, ast.Load()) for n in inputs], keywords=[])
        if outputs:
            target = ast.Tuple(elts=[ast.Name(n, ast.Store()) for n in outputs], ctx=ast.Store())
            stmt: ast.stmt = ast.Assign(targets=[target], value=call)
        else:
            stmt = ast.Expr(value=call)
        return ast.copy_location(ast.fix_missing_locations(stmt), run[0])


# calls a statement between two outlined loops may make (numbers, sizes, cache buffers)
_GLUE_CALLS = frozenset({"_rt.span", "_rt.grow", "_rt.reuse_tape", "np.empty", "min", "max", "abs", "int", "float",
                         "bool", "len",
                         "range", "_rt.fdiv"})


_NUMBERS = (int, float, bool, complex)


def _compilable_arg(a: Any) -> bool:
    import numpy as np

    if isinstance(a, np.ndarray):
        return a.dtype.kind in "biufc"
    if isinstance(a, tuple):
        return all(_compilable_arg(x) for x in a)
    return isinstance(a, _NUMBERS) or isinstance(a, np.generic) and a.dtype.kind in "biufc"


class Kernel:
    """One outlined loop at run time (module contract): the Numba dispatcher while it serves,
    the loop's Python function once an argument or Numba says it cannot."""

    __slots__ = ("compiled", "python", "fn", "name", "why", "parallel", "written", "floats", "bounded")

    def __init__(self, name: str, compiled: Callable, python: Callable, parallel: Callable | None = None,
                 written: list[int] | None = None, floats: list[int] | None = None,
                 bounded: Callable[[], Callable] | None = None):
        self.name = name
        self.compiled = compiled
        self.python = python
        # the version compiled with `boundscheck=True`, made when a call's entry check fails
        # (`codegen/index_checks.py`); None: the Python function is that version
        self.bounded = bounded
        self.fn: Callable | None = None  # decided at the first call
        self.why = ""  # why it runs as Python, once it does
        self.parallel = parallel  # the twin with prange loops (module contract), or None; its last
        # parameter: the number of threads
        self.written = written or []
        self.floats = floats or []  # the twin runs only where these arguments hold float64

    def __call__(self, *args: Any) -> Any:
        fn = self.fn
        try:
            if fn is not None:
                if self.parallel is not None and fn is self.compiled and _threads() > 1:
                    return self._run_parallel(args)
                return fn(*args)
            if not all(_compilable_arg(a) for a in args):
                self.why = "an argument is not a number, an array of numbers or a tuple of them"
                self.fn = self.python
                return self.python(*args)
            from numba.core.errors import NumbaError

            from .numba.backend import quick_compile

            try:
                with quick_compile():
                    out = self.compiled(*args)
            except NumbaError as exc:
                self.why = f"Numba cannot compile it: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}"
                self.fn = self.python  # Numba refuses this loop: it runs as Python, as it would anyway
                return self.python(*args)
            self.fn = self.compiled
            return out
        except IndicesUnproven:  # raised at entry, before anything was written
            if self.fn is None:
                self.fn = self.compiled
            return self._run_bounded(args)

    def _run_bounded(self, args: tuple) -> Any:
        """The kernel with every index checked (`bounded`), for a call whose entry check failed:
        `IndexError` where Python's would raise, else the same results."""
        if self.bounded is None:
            return self.python(*args)
        from numba.core.errors import NumbaError

        from .numba.backend import quick_compile

        try:
            with quick_compile():
                return self.bounded()(*args)
        except NumbaError:
            self.bounded = None
            return self.python(*args)

    def _run_parallel(self, args: tuple) -> Any:
        from .parallel import overlapping

        if overlapping(args, self.written) or any(args[i].dtype.str[1:] != "f8" for i in self.floats):
            return self.compiled(*args)
        import numba

        from .numba.backend import quick_compile

        threads = min(_threads(), numba.config.NUMBA_NUM_THREADS)
        numba.set_num_threads(threads)
        try:
            with quick_compile():
                return self.parallel(*args, threads)  # type: ignore[misc]
        except MemoryError:  # an expanded sum's temporary, allocated before anything is written
            return self.compiled(*args)
        except Exception as exc:  # Numba refused the parallel twin: the serial kernel, for good
            from numba.core.errors import NumbaError

            if not isinstance(exc, NumbaError):
                raise
            self.parallel = None
            return self.compiled(*args)


def _threads() -> int:
    from .. import config

    return config.threads()
