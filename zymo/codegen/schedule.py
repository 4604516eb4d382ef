"""A loop nest cut into one perfect nest per array update, run in an order that keeps every
dependence: what `codegen/idioms.py` lowers when distributing the nest piece by piece, in the
order written, is not proved (a scalar passed between parts, symm's and gemm's accumulator
`temp2`, a part that must run before one written above it).

Contract: `scheduled(nest, fresh)` takes a loop nest (the `for` statement `nest`, its loops of
the forms `idioms._head` reads) and returns a `Schedule`, or None (`fresh`: a name no other
has):

1. *Scalar expansion.* A name assigned at the top level of a loop body `B` and named inside a
   loop nested in `B`, or in two runs of `B`'s statements that a loop separates, becomes an
   element `_x[v1, ..., vd]` of a new float64 array indexed by the indices of the loops
   around `B` (all of them over `range(N)`, forward or reversed, `N` an int or a name the nest
   does not write: no triangle). It is done where the name's first occurrence in `B` is such
   an assignment, not reading the name, the name occurs nowhere in the nest outside `B`,
   never in a subscript's index or a loop's bounds (an int there), and every value assigned
   to it is a float (it reads an array element or a float constant, or such a name):
   each iteration then assigns its own element before reading it, so every element sees the
   scalar's values in the scalar's order. The arrays come back in `Schedule.arrays` (name ->
   the sources of its shape's bounds), to be allocated before the nest's statements run.
2. *Units.* Every statement that stores into an array element (an assignment or augmented
   assignment; reverse mode's round trip `X[o] = 0.0; ...; X[o] += e`, no statement between
   naming `X`, as one) is a unit: a perfect nest of the loops around it, whose body is the
   statement after copies of the temporaries (names assigned in the same run, before it)
   it reads, in their order. A temporary belongs to the loop body whose top level assigns it
   (later statements of that level may read it, their loads keeping its position); one read
   before it is assigned in an iteration, assigned twice, or read inside another body (an
   inner loop's: expansion's business), or an augmented assignment to a name, and the nest is
   refused. A unit `X[o] = t`, `t` a temporary holding `X[o]` and nothing storing
   into `X` between the two, changes nothing and is dropped (a carried scalar's last copy).
3. *Dependences.* Every access (a load or store of an element) has the position of the
   statement that runs it in the nest's text (a temporary's load: the temporary's). Two
   units touching one array, one of them storing, conflict where some instances (iterations)
   of the two may reach the same element; the instance that ran first in the nest decides
   which unit must run first. Per loop the two share (outermost first) the possible orders of
   two such instances are read from the subscripts at each place: both the loop's index (the
   same iteration), or one the index and the other a triangle's index on it (`idioms._kind`:
   the rows of iterations run before or after). Where all shared loops may coincide, the
   positions decide. Two units that only add into an array (`X[o] += e`, `X[o] = X[o] + e`)
   do not conflict there: their order only reorders a sum, which the NumPy statements do
   anyway (`codegen/idioms.py`'s contract). Conflicting instances in both orders (a cycle)
   and the nest is refused.
4. The units come back as `Schedule.pieces` in an order that runs each unit before those that
   depend on it (the order written where that is free): each runs all its iterations in
   turn, which keeps the order of every two conflicting operations (distribution by a
   topological order of the dependence graph, as Allen and Kennedy's algorithm does).

All arrays are known to share no memory where one is written (`_rt.blas_ready`, checked by
the caller's guard), so names tell arrays apart; the expanded arrays are new.
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import pyast

# possible orders of two instances from how an index relates to a shared loop's index
# (`idioms._kind` of the other side): u's instance before ("<"), with ("="), after (">") w's
_FROM_W = {"eq": {"="}, "lt": {"<"}, "le": {"<", "="}, "gt": {">"}, "ge": {">", "="}}
_FROM_U = {"eq": {"="}, "lt": {">"}, "le": {">", "="}, "gt": {"<"}, "ge": {"<", "="}}
_ALL = frozenset("<=>")


@dataclass
class Schedule:
    """The nest's units in the order they run (module contract)."""
    pieces: list[Any]  # `idioms._Piece`s
    arrays: dict[str, tuple[str, ...]] = field(default_factory=dict)  # expanded scalar arrays: name -> bounds


@dataclass
class _Access:
    array: str
    node: ast.Subscript
    store: bool
    pos: int


@dataclass
class _Unit:
    loops: list[Any]  # `idioms._Loop`s, outermost first
    keys: list[int]  # the identity of each loop (its `for` node)
    body: list[ast.stmt]
    pos: int  # the position of its (first) store
    accesses: list[_Access]
    adds: set[str]  # arrays it only adds into


class _Refused(Exception):
    pass


def scheduled(nest: ast.For, fresh: Callable[[str], str]) -> Schedule | None:
    """The nest's units and their order (module contract); `fresh`: a name no other has."""
    from .idioms import _head, _kind, _Piece, _simple

    if not _plain(nest, _head, _simple):
        return None  # (first: the nests of whole-array code are large, and never units)
    nest = pyast.clone(nest)
    try:
        arrays = _expand(nest, _head, fresh)
        units = _live(_Units(_head, _simple).run(nest))
        order = _order(units, _kind)
    except _Refused:
        return None
    return Schedule([_Piece(u.loops, u.body) for u in order], arrays)


def _plain(s: ast.stmt, head: Callable[[ast.stmt], Any], simple: Callable[[ast.stmt], bool]) -> bool:
    """Whether the nest holds only loops of `head`'s forms and statements `simple` takes."""
    if not isinstance(s, ast.For):
        return simple(s)
    got = head(s)
    return got is not None and all(_plain(t, head, simple) for t in got[1])


def _names(node: ast.AST) -> list[ast.Name]:
    return [n for n in pyast.walk(node) if isinstance(n, ast.Name)]


def _expand(nest: ast.For, head: Callable[[ast.stmt], Any], fresh: Callable[[str], str]) -> dict[str, tuple[str, ...]]:
    """Scalar expansion (module contract, 1), in place; the new arrays and their bounds."""
    arrays: dict[str, tuple[str, ...]] = {}

    def visit(s: ast.For, loops: list[Any], rect: bool) -> None:
        got = head(s)
        if got is None:
            raise _Refused
        loop, body = got
        loops = [*loops, loop]
        names = {lp.var for lp in loops} | {lp.counter for lp in loops if lp.counter}
        rect = rect and loop.lo is None and not any(n.id in names for n in _names(loop.bound))
        if rect:
            for name in _crossing(body):
                if name in names or not _first_assigned(body, name) or _indexes(nest, name) \
                        or not _floats(body, name):
                    continue
                inside = {id(n) for t in body for n in _names(t) if n.id == name}
                if any(n.id == name and id(n) not in inside for n in _names(nest)):
                    continue  # named outside this body: carried by an enclosing loop
                new = fresh(f"_x_{name}")
                arrays[new] = tuple(ast.unparse(lp.bound) for lp in loops)
                index = ast.Tuple([ast.Name(lp.var, ast.Load()) for lp in loops], ast.Load()) if len(loops) > 1 \
                    else ast.Name(loops[0].var, ast.Load())
                for t in body:
                    _Rename(name, new, index).visit(t)
        for t in body:
            if isinstance(t, ast.For):
                visit(t, loops, rect)

    visit(nest, [], True)
    for t in pyast.walk(nest):
        ast.fix_missing_locations(t)
    return arrays


def _crossing(body: list[ast.stmt]) -> list[str]:
    """Names assigned at the top level of `body` and named inside one of its loops, or in two
    of its runs of statements."""
    top = [t.targets[0].id for t in body if isinstance(t, ast.Assign) and len(t.targets) == 1
           and isinstance(t.targets[0], ast.Name)]
    out = []
    for name in dict.fromkeys(top):
        runs, run, inner = set(), 0, False
        for t in body:
            if isinstance(t, ast.For):
                run += 1
                inner |= any(n.id == name for n in _names(t))
            elif any(n.id == name for n in _names(t)):
                runs.add(run)
        if inner or len(runs) > 1:
            out.append(name)
    return out


def _floats(body: list[ast.stmt], name: str) -> bool:
    """Whether every value `body` may assign to `name` is a float: no value of it is built from
    ints alone. A value may be an int where each of its leaves may be: an int constant, a name
    `body` does not assign (a loop index, a parameter), or a name one of whose values may be an
    int (the least such set: a copy carried round a loop, `d = acc; ...; acc = d`, adds no int).
    An array element is a float (float64 under the guard), and so is a float constant. An int
    (`t = 3 * i`) would change in a float64 element: no bitwise operators, big ints rounded, a
    division by zero no longer raising."""
    values: dict[str, list[list[ast.expr]]] = {}  # name -> the leaves of each value it is assigned
    for t in body:
        for n in pyast.walk(t):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                values.setdefault(n.targets[0].id, []).append(_leaves(n.value))
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                values.setdefault(n.target.id, []).append([ast.Name(n.target.id, ast.Load()), *_leaves(n.value)])
    ints: set[str] = set()
    changed = True
    while changed:
        changed = False
        for x, each in values.items():
            if x not in ints and any(all(_int_leaf(leaf, values, ints) for leaf in v) for v in each):
                ints.add(x)
                changed = True
    return name not in ints


def _leaves(e: ast.expr) -> list[ast.expr]:
    """The operands an arithmetic expression combines (names, constants, subscripts, calls)."""
    if isinstance(e, ast.BinOp):
        return _leaves(e.left) + _leaves(e.right)
    if isinstance(e, ast.UnaryOp):
        return _leaves(e.operand)
    if isinstance(e, ast.Call) and all(not isinstance(a, ast.Starred) for a in e.args):
        return [x for a in e.args for x in _leaves(a)]  # `_rt.fdiv(a, b)`: as its operands
    return [e]


def _int_leaf(e: ast.expr, values: dict[str, list[list[ast.expr]]], ints: set[str]) -> bool:
    if isinstance(e, ast.Subscript) or isinstance(e, ast.Constant) and type(e.value) is float:
        return False
    if isinstance(e, ast.Name):
        return e.id not in values or e.id in ints
    return True


def _indexes(nest: ast.For, name: str) -> bool:
    """Whether `name` is read in a subscript's index or a loop's bounds: an int there, which
    a float64 element would not be."""
    for n in pyast.walk(nest):
        at = n.slice if isinstance(n, ast.Subscript) else n.iter if isinstance(n, ast.For) else None
        if at is not None and any(x.id == name for x in _names(at)):
            return True
    return False


def _first_assigned(body: list[ast.stmt], name: str) -> bool:
    """Whether the first statement of `body` naming `name` assigns it without reading it."""
    for t in body:
        if any(n.id == name for n in _names(t)):
            return (isinstance(t, ast.Assign) and len(t.targets) == 1 and isinstance(t.targets[0], ast.Name)
                    and t.targets[0].id == name and not any(n.id == name for n in _names(t.value)))
    return False


class _Rename(ast.NodeTransformer):
    """The name as an element of its expanded array."""

    def __init__(self, name: str, array: str, index: ast.expr):
        self.name, self.array, self.index = name, array, index

    def visit_Name(self, n: ast.Name) -> ast.AST:
        if n.id != self.name:
            return n
        return ast.Subscript(ast.Name(self.array, ast.Load()), pyast.clone(self.index), n.ctx)


def _target(s: ast.stmt) -> ast.expr | None:
    if isinstance(s, ast.Assign):
        return s.targets[0] if len(s.targets) == 1 else None
    if isinstance(s, ast.AugAssign):
        return s.target
    return None


def _subscripts(node: ast.AST) -> list[ast.Subscript]:
    return [n for n in pyast.walk(node) if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)]


class _Units:
    """The units of a nest, with their accesses (module contract, 2)."""

    def __init__(self, head: Callable[[ast.stmt], Any], simple: Callable[[ast.stmt], bool]):
        self.head, self.simple = head, simple
        self.pos = 0
        self.units: list[_Unit] = []
        self.assigned: set[str] = set()

    def run(self, nest: ast.For) -> list[_Unit]:
        self.assigned = {n.id for n in _names(nest) if not isinstance(n.ctx, ast.Load)}
        self.loop(nest, [], [])
        return self.units

    def loop(self, s: ast.For, loops: list[Any], keys: list[int]) -> None:
        got = self.head(s)
        if got is None:
            raise _Refused
        loop, body = got
        outer = {lp.var for lp in loops} | {lp.counter for lp in loops if lp.counter}
        if any(n.id in self.assigned and n.id not in outer for e in (loop.bound, loop.lo) if e is not None
               for n in _names(e)):
            raise _Refused  # bounds the nest computes (`t = i + p; for k in range(t)`)
        loops, keys = [*loops, loop], [*keys, id(s)]
        if len({lp.var for lp in loops}) != len(loops):
            raise _Refused
        indices = {lp.var for lp in loops} | {lp.counter for lp in loops if lp.counter}
        temps: dict[str, tuple[int, ast.stmt, set[str]]] = {}  # name -> (position, statement, temporaries read)
        positions: dict[int, int] = {}
        pending: dict[int, int] = {}  # a round trip's `X[o] += e` -> its `X[o] = 0.0`
        for k, t in enumerate(body):
            positions[k] = self.pos
            self.pos += 1
            if isinstance(t, ast.For):
                self.loop(t, loops, keys)
                continue
            if not self.simple(t):
                raise _Refused
            target = _target(t)
            reads = {n.id for n in _names(t) if isinstance(n.ctx, ast.Load)} - indices
            if any(name in self.assigned and name not in temps for name in reads):
                raise _Refused  # a scalar from another run or from an earlier iteration
            if isinstance(target, ast.Name):
                if isinstance(t, ast.AugAssign) or target.id in temps or target.id in indices:
                    raise _Refused
                temps[target.id] = (positions[k], t, {n for n in reads if n in temps})
                continue
            if not isinstance(target, ast.Subscript) or not isinstance(target.value, ast.Name):
                raise _Refused
            trip = _round_trip(body, k)
            if trip is not None:
                pending[trip] = k  # the unit is made at its `+=`, with the temporaries assigned by then
            elif k in pending:
                self.unit(loops, keys, [(positions[pending[k]], body[pending[k]]), (positions[k], t)], temps, True)
            else:
                self.unit(loops, keys, [(positions[k], t)], temps, False)

    def unit(self, loops: list[Any], keys: list[int], stmts: list[tuple[int, ast.stmt]],
             temps: dict[str, tuple[int, ast.stmt, set[str]]], trip: bool) -> None:
        need: set[str] = set()
        todo = [n.id for _, t in stmts for n in _names(t) if isinstance(n.ctx, ast.Load) and n.id in temps]
        while todo:
            name = todo.pop()
            if name not in need:
                need.add(name)
                todo += list(temps[name][2])
        parts = [(pos, pyast.clone(t)) for pos, t in
                 sorted([*stmts, *((temps[n][0], temps[n][1]) for n in need)], key=lambda x: x[0])]
        bound = set(need) | {lp.var for lp in loops} | {lp.counter for lp in loops if lp.counter}
        if any(n.id in self.assigned and n.id not in bound for _, t in parts for n in _names(t)):
            raise _Refused  # a name the nest assigns that the unit would read unassigned
        accesses = []
        for pos, t in parts:
            target = _target(t)
            for n in _subscripts(t):
                accesses.append(_Access(n.value.id, n, n is target, pos))  # type: ignore[attr-defined]
        last = next(t for pos, t in parts if pos == stmts[0][0] and _target(t) is not None
                    and isinstance(_target(t), ast.Subscript))
        array = _target(last).value.id  # type: ignore[union-attr]
        adds = {array} if not trip and _adds(last, [a for a in accesses if a.array == array]) else set()
        self.units.append(_Unit(loops, keys, [t for _, t in parts], stmts[0][0], accesses, adds))


def _round_trip(body: list[ast.stmt], k: int) -> int | None:
    """The position in `body` of the `X[o] += e` completing a round trip `X[o] = 0.0` at `k`."""
    s = body[k]
    if not (isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and s.value.value == 0
            and type(s.value.value) in (int, float)):
        return None
    target = s.targets[0]
    name = target.value.id  # type: ignore[attr-defined]
    for j in range(k + 1, len(body)):
        t = body[j]
        if isinstance(t, ast.AugAssign) and isinstance(t.op, ast.Add) and ast.dump(t.target) == ast.dump(target):
            return None if any(n.id == name for n in _names(t.value)) else j  # `+= 2.0 * X[o]` reads the zero
        if isinstance(t, ast.For) or any(n.id == name for n in _names(t)):
            return None
    return None


def _adds(s: ast.stmt, mine: list[_Access]) -> bool:
    """Whether the statement only adds into its target's element: `X[o] += e`, `X[o] -= e` or
    `X[o] = X[o] + e`, and no other access of the unit names `X` (`mine`: its accesses of it)."""
    target = _target(s)
    if isinstance(s, ast.AugAssign):
        ok = isinstance(s.op, (ast.Add, ast.Sub))
        own = 1
    elif isinstance(s, ast.Assign) and isinstance(s.value, ast.BinOp) and isinstance(s.value.op, (ast.Add, ast.Sub)):
        left = s.value.left
        ok = isinstance(left, ast.Subscript) and ast.dump(left.slice) == ast.dump(target.slice)  # type: ignore
        ok = ok and isinstance(left, ast.Subscript) and ast.dump(left.value) == ast.dump(target.value)  # type: ignore
        own = 2
    else:
        return False
    return ok and len(mine) == own


def _live(units: list[_Unit]) -> list[_Unit]:
    """The units without those that store into an element the value a temporary read from it,
    nothing storing into that array between the two (module contract, 2)."""
    out = []
    for u in units:
        s = u.body[-1]
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name) and len(u.body) >= 2:
            t = next((x for x in u.body[:-1] if isinstance(x, ast.Assign) and isinstance(x.targets[0], ast.Name)
                      and x.targets[0].id == s.value.id), None)
            target = s.targets[0]
            if t is not None and isinstance(t.value, ast.Subscript) and ast.dump(t.value.value) == ast.dump(
                    target.value) and ast.dump(t.value.slice) == ast.dump(target.slice):  # type: ignore[attr-defined]
                array = target.value.id  # type: ignore[attr-defined]
                start = next(a.pos for a in u.accesses if a.node is t.value)
                if not any(a.store and a.array == array and start < a.pos < u.pos
                           for w in units for a in w.accesses):
                    continue
        out.append(u)
    return out


def _order(units: list[_Unit], kind: Callable[..., str | None]) -> list[_Unit]:
    """The units in a topological order of their dependences, the order written where free."""
    n = len(units)
    after: list[set[int]] = [set() for _ in range(n)]
    before = [0] * n
    for a in range(n):
        for b in range(a + 1, n):
            first = _first(units[a], units[b], kind)
            if first == {"u", "w"}:
                raise _Refused
            x, y = (a, b) if first == {"u"} else (b, a) if first == {"w"} else (None, None)
            if x is not None and y not in after[x]:
                after[x].add(y)  # type: ignore[arg-type]
                before[y] += 1  # type: ignore[index]
    ready = sorted((units[k].pos, k) for k in range(n) if not before[k])
    out = []
    while ready:
        _, k = ready.pop(0)
        out.append(units[k])
        for j in after[k]:
            before[j] -= 1
            if not before[j]:
                ready.append((units[j].pos, j))
        ready.sort()
    if len(out) != n:
        raise _Refused
    return out


def _first(u: _Unit, w: _Unit, kind: Callable[..., str | None]) -> set[str]:
    """Which of the units ran first, for their conflicting instances: "u", "w", both or none."""
    out: set[str] = set()
    for a in u.accesses:
        for b in w.accesses:
            if a.array != b.array or not (a.store or b.store):
                continue
            if a.array in u.adds and a.array in w.adds:
                continue
            out |= _pair(u, a, w, b, kind)
    return out


def _pair(u: _Unit, a: _Access, w: _Unit, b: _Access, kind: Callable[..., str | None]) -> set[str]:
    """The possible orders of two instances reaching one element through `a` and `b`."""
    pa = a.node.slice.elts if isinstance(a.node.slice, ast.Tuple) else [a.node.slice]
    pb = b.node.slice.elts if isinstance(b.node.slice, ast.Tuple) else [b.node.slice]
    out: set[str] = set()
    for depth, (ku, kw) in enumerate(zip(u.keys, w.keys)):
        if ku != kw:
            break
        var = u.loops[depth].var
        dirs = set(_ALL)
        if len(pa) == len(pb):
            for ea, eb in zip(pa, pb):
                x, y = kind(ea, var, u.loops), kind(eb, var, w.loops)
                if x == "eq" and y is not None:
                    dirs &= _FROM_W[y]
                elif y == "eq" and x is not None:
                    dirs &= _FROM_U[x]
        if not dirs:
            return out
        if "<" in dirs:
            out.add("u")
        if ">" in dirs:
            out.add("w")
        if "=" not in dirs:
            return out
    out.add("u" if a.pos < b.pos or a.pos == b.pos and u.pos <= w.pos else "w")
    return out
