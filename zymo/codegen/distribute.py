"""A loop whose body holds inner loops split into one loop per part, where that lets a part's
nest walk rows (`codegen/interchange.py`): covariance's `mean[j] = 0; for i: mean[j] +=
data[i, j]; mean[j] /= n` over `j` becomes three loops over `j`, the middle one swapped.

Contract: `distributed(s, memory, rest)` returns the loops replacing the loop `s` (`for v ...`,
forward or reverse mode's reversed loop, `loop_forms.plain`), with `memory` and the arrays they
allocate (scalar expansion, below), or None. Its body (after the
reversed-index assignment, which each new loop repeats) is cut into parts: each inner `for` a
part of its own, the other statements between them one part. Index arithmetic the body computes
from names it does not change (`p = k + j * w`, a cache position) is computed again by each
part that reads it (`_recomputed`): the same value anywhere in an iteration. The new loops run the parts one
after the other, each over the whole range, in `s`'s order. It is done only where it computes
the same numbers, to the bit, and at least one part then swaps (`interchanged`):

- no name is carried from one iteration to the next, none a part assigns is read after `s`
  (`rest`: the statement lists that may run after it); a float64 scalar one part assigns and
  another reads is held in an array of one element per iteration (`_expanded`: scalar
  expansion, symm's `temp2` summed over `k` for each `j`), other names are not passed between
  parts;
- where two parts reach one array and one of them writes it, the two iterations that reach an
  element are one and the same: for each pair of their subscripts, some place holds the same
  index expression in both (`a[i, k]` and `a[i, 0]`: `i` twice), or the two pin the iteration
  to one value alike (`a[i, j]` and `a[j, i]` with `j` unchanged by `s`: both only where `i` is
  `j`); every place is an index (one of `s`'s index names plus or minus terms `s` does not
  change) or such a term; the array is known to overlap no other array the parts reach.

With `sums` (`config.set_reassociate`: the program may add in any order), an array that `s`
touches only as `a[...] += e` / `a[...] -= e` targets (`parallel._added_only`) is exempt from
the last rule: the parts then add into its elements in another order, the same terms.

Why: distribution reorders only operations of different parts and different iterations (part
`X` of iteration `i'` now runs before part `Y` of iteration `i` where it ran after, or the
reverse); those touch no common element, so each element sees the same operations in the same
order, and scalars pass between iterations or parts nowhere.
"""
from __future__ import annotations

import ast
from collections.abc import Callable

from .. import pyast
from .interchange import _index_arithmetic, _last_place, interchanged
from .loop_forms import Memory, never_negative, plain, reversed_head, touched
from .outline import _exposed, _loads, _stores
from .parallel import _added_only, _affine


def distributed(s: ast.For, memory: Memory, rest: list[list[ast.stmt]],
                sums: bool = False) -> tuple[list[ast.stmt], Memory] | None:
    """The loops replacing `s`, at least one of them swapped, and the memory facts naming the
    arrays they add (`_expanded`), or None (module contract; `sums`: arrays only added into
    may be added into in another order)."""
    return _split(s, memory, rest, swap=True, sums=sums)


def split(s: ast.For, memory: Memory, rest: list[list[ast.stmt]]) -> list[ast.For] | None:
    """The loops replacing `s`, one per part, none swapped (the module's conditions, a part
    also being an `if` that holds a loop, with the names it assigns before it: a hoisted
    guard), or None. For the parallel twins (`codegen/outline.py`): a loop kept serial only by
    what its parts share may split into loops that run in parallel, each in its own way."""
    got = _split(s, memory, rest, swap=False)
    return None if got is None else [t for t in got[0] if isinstance(t, ast.For)]


def _split(s: ast.For, memory: Memory, rest: list[list[ast.stmt]],
           swap: bool, sums: bool = False) -> tuple[list[ast.stmt], Memory] | None:
    if not plain(s) or not isinstance(s.target, ast.Name):
        return None
    head_at = 1 if reversed_head(s) is not None else 0
    head, body = s.body[:head_at], s.body[head_at:]
    if not any(isinstance(n, ast.For) for t in body for n in pyast.walk(t)) or len(body) < 2:
        return None
    index_name = reversed_head(s)[0] if head_at else s.target.id  # type: ignore[index]
    if _stores(ast.Module(body, [])) & (_loads(s.iter) | {s.target.id, index_name}):
        return None  # each new loop evaluates the bounds again and reads the index as `s` set it
    assigned = _stores(ast.Module(body, [])) | _stores(ast.Module(head, []))
    again = _recomputed(body, assigned - {s.target.id, index_name})
    parts = [_with_arithmetic(p, again) for p in _parts([t for t in body if t not in again], guards=not swap)]
    if len(parts) < 2 or swap and not any(_walks_columns(p, index_name) for p in parts):
        return None  # nothing a swap would help (the cheap test first)
    carried, _ = _exposed(body, {s.target.id, index_name})
    if carried & assigned:
        return None
    index = {s.target.id, index_name}
    reads = [_exposed(p, index)[0] for p in parts]  # what a part reads before it assigns it
    stores = [_stores(ast.Module(p, [])) for p in parts]
    passed = {n for x in range(len(parts)) for y in range(len(parts)) if y != x for n in stores[x] & reads[y]}
    alloc: list[ast.stmt] = []
    if passed and not swap:
        return None
    if passed:  # scalars passed from one part to another: one element each per iteration
        expanded = _expanded(s, parts, passed, memory, {n.id for t in [s, *(x for r in rest for x in r)]
                                                        for n in pyast.walk(t) if isinstance(n, ast.Name)})
        if expanded is None:
            return None
        parts, memory, alloc = expanded
        assigned = (assigned - passed) | {a.targets[0].id for a in alloc}  # type: ignore[attr-defined]
    added = _added_only(s, frozenset()) if sums else frozenset()  # arrays alone: no name is a sum here
    for x in range(len(parts)):
        for y in range(x + 1, len(parts)):
            if not _apart(parts[x], parts[y], index, assigned, memory, lambda e: never_negative(s, e), added):
                return None
    later: set[str] = set()
    seen: set[str] = set()
    for stmts in rest:  # the costliest test last
        e, seen = _exposed(stmts, seen)
        later |= e
    if later & (assigned | passed | {s.target.id}):
        return None  # (an expanded scalar read after `s` would be read from its last element)
    loops = [ast.For(target=ast.Name(s.target.id, ast.Store()), iter=pyast.clone(s.iter),
                     body=[*pyast.clone(head), *p], orelse=[], type_comment=None) for p in parts]
    if not swap:
        return [ast.fix_missing_locations(t) for t in loops], memory
    out: list[ast.stmt] = []
    swapped = False
    for k, loop in enumerate(loops):
        after = later | _exposed(loops[k + 1:], set())[0]  # a superset of what runs after part k reads
        new = interchanged(loop, memory, [loops[k + 1:], *rest], after) if _walks_columns(parts[k], index_name) \
            else None
        swapped |= new is not None
        out.append(new if new is not None else loop)
    return ([ast.fix_missing_locations(t) for t in [*alloc, *out]], memory) if swapped else None


def _expanded(s: ast.For, parts: list[list[ast.stmt]], passed: set[str], memory: Memory,
              taken: set[str]) -> tuple[list[list[ast.stmt]], Memory, list[ast.stmt]] | None:
    """Scalar expansion: `parts` with each name of `passed` (a scalar one part assigns and
    another reads) held in a float64 array `_xp_<name>` of one element per iteration of `s`,
    element `v` for `s` = `for v in range(stop)` (or `range(0, stop)`, or reversed: `for _r in
    range(stop): v = stop - 1 - _r`), that array allocated
    before the loops (with the facts naming it); None when `s` is not of that form or a name
    may hold other than float64 numbers (`memory.is_float`: the array would convert it). The
    array's name is none of `taken` (the names of `s` and of what may run after it). Each
    element is the scalar of one iteration: written and read in that iteration only (nothing
    is carried, nothing read after `s`: checked by the caller), so the parts compute the same
    numbers in the same order."""
    args = s.iter.args if isinstance(s.iter, ast.Call) else []
    if not (isinstance(s.iter, ast.Call) and isinstance(s.iter.func, ast.Name) and s.iter.func.id == "range"
            and isinstance(s.target, ast.Name) and not s.iter.keywords
            and (len(args) == 1 or len(args) == 2 and isinstance(args[0], ast.Constant) and args[0].value == 0)):
        return None
    head = reversed_head(s)
    if head is not None and head[1] is not None:
        return None  # `range(_rt.span(lo, N))`: its index runs from `lo`
    # the position: the index, from 0 (a reversed loop's `i = N - 1 - _r`, whose counter
    # `_r` nothing else may read, runs over 0 .. N - 1 too)
    position = head[0] if head is not None else s.target.id
    if not all(memory.is_float(n) for n in passed):
        return None
    names = {}
    for n in sorted(passed):
        name, k = f"_xp_{n}", 0
        while name in taken:
            k += 1
            name = f"_xp_{n}_{k}"
        names[n] = name
        memory = memory.with_array(name, 1)
    parts = [[_Expand(names, position).visit(pyast.clone(t)) for t in p] for p in parts]
    trips = f"_rt.span(0, {ast.unparse(args[-1])})"
    alloc = [ast.parse(f"{name} = np.empty({trips}, np.float64)").body[0] for name in names.values()]
    return parts, memory, alloc


class _Expand(ast.NodeTransformer):
    """Names of `names` read and written as elements `names[n][position]`."""

    def __init__(self, names: dict[str, str], position: str):
        self.names, self.position = names, position

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.names:
            return node
        return ast.Subscript(ast.Name(self.names[node.id], ast.Load()), ast.Name(self.position, ast.Load()), node.ctx)


def _recomputed(body: list[ast.stmt], assigned: set[str]) -> list[ast.stmt]:
    """The statements of `body` that compute index arithmetic (`interchange._index_arithmetic`)
    from names the body does not change (but the loop's head and earlier such statements): the
    same value wherever in an iteration they run, so each part that reads one gets its own copy."""
    out: list[ast.stmt] = []
    mine: set[str] = set()
    stores: dict[str, int] = {}
    for n in pyast.walk(ast.Module(body, [])):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stores[n.id] = stores.get(n.id, 0) + 1
    for t in body:
        if _index_arithmetic(t):
            name = t.targets[0].id  # type: ignore[attr-defined]
            if stores.get(name) == 1 and not (_loads(t.value) & (assigned - mine)):  # type: ignore[attr-defined]
                out.append(t)
                mine.add(name)
    return out


def _with_arithmetic(part: list[ast.stmt], again: list[ast.stmt]) -> list[ast.stmt]:
    """`part` after copies of the statements of `again` it needs (with what they need), in order."""
    need = _exposed(part, set())[0]
    for t in reversed(again):
        if t.targets[0].id in need:  # type: ignore[attr-defined]
            need |= _loads(t.value)  # type: ignore[attr-defined]
    return [pyast.clone(t) for t in again if t.targets[0].id in need] + part  # type: ignore[attr-defined]


def _walks_columns(part: list[ast.stmt], outer: str) -> bool:
    """Whether `part` is index arithmetic and one loop whose subscripts hold the outer index
    last more often than its own (`interchange`'s test of a useful swap)."""
    if not isinstance(part[-1], ast.For) or not all(_index_arithmetic(t) for t in part[:-1]):
        return False
    inner = part[-1]
    head = reversed_head(inner) if plain(inner) else None
    own = head[0] if head is not None else inner.target.id if isinstance(inner.target, ast.Name) else None
    return own is not None and _last_place(inner.body, outer) > _last_place(inner.body, own)


def _parts(body: list[ast.stmt], guards: bool = False) -> list[list[ast.stmt]]:
    """Each `for` alone, the statements between them together; with `guards`, an `if` holding
    a `for` (lean loops' hoisted reads: `if n > 0: a = x[i]; for ...`) is a loop too."""
    def loop(t: ast.stmt) -> bool:
        return isinstance(t, ast.For) or guards and isinstance(t, ast.If) and not t.orelse \
            and any(isinstance(u, ast.For) for u in t.body)

    parts: list[list[ast.stmt]] = []
    for t in body:
        if loop(t) or not parts or loop(parts[-1][-1]):
            parts.append([t])
        else:
            parts[-1].append(t)
    return parts


def _apart(x: list[ast.stmt], y: list[ast.stmt], index: set[str], assigned: set[str], memory: Memory,
           sure: Callable[[ast.expr], bool], added: frozenset[str] = frozenset()) -> bool:
    """Whether parts `x` and `y` of different iterations reach no common element one of them
    writes (module contract), or only add into it (`added`)."""
    ex, bx = touched(ast.Module(x, []))  # type: ignore[arg-type]
    ey, by = touched(ast.Module(y, []))  # type: ignore[arg-type]
    wx, wy = _written(x), _written(y)
    below_x, below_y = _below(x), _below(y)
    arrays = set(ex) | set(ey) | {n for n in bx | by if memory.listed(n) or n in memory.ndims}  # used whole too
    for name in (wx | wy):
        if name in wx and (name in ey or name in by) or name in wy and (name in ex or name in bx):
            if not memory.listed(name) or name in bx or name in by:
                return False
            if any(memory.overlap(name, o) for o in arrays - {name}):
                return False
            if name in added:
                continue  # only added into, by both parts: the same terms in another order
            if not all(_same_iteration(a, b, index, assigned, sure)
                       or _never_one(a, b, below_x, below_y, index, assigned)
                       for a in ex.get(name, []) for b in ey.get(name, [])):
                return False
        elif name in wx | wy and any(memory.overlap(name, o) for o in arrays - {name}):
            return False
    return True


def _written(part: list[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for n in pyast.walk(ast.Module(part, [])):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name):
            out.add(n.value.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript) \
                and isinstance(n.target.value, ast.Name):
            out.add(n.target.value.id)
    return out


def _same_iteration(a: ast.Subscript, b: ast.Subscript, index: set[str], assigned: set[str],
                    sure: Callable[[ast.expr], bool]) -> bool:
    """Whether subscripts `a` and `b` name one element only in one iteration (module contract)."""
    pa = list(a.slice.elts) if isinstance(a.slice, ast.Tuple) else [a.slice]
    pb = list(b.slice.elts) if isinstance(b.slice, ast.Tuple) else [b.slice]
    if len(pa) != len(pb):
        return False
    pins_a, pins_b = set(), set()  # (index name, the term it equals there)
    for p, q in zip(pa, pb):
        kp, kq = _kind(p, index, assigned), _kind(q, index, assigned)
        if kp == kq == "index" and ast.dump(p) == ast.dump(q) and sure(p):
            return True
        if kp == "index" and kq == "term" and isinstance(p, ast.Name) and sure(p):
            pins_a.add((p.id, ast.dump(q)))
        if kq == "index" and kp == "term" and isinstance(q, ast.Name) and sure(q):
            pins_b.add((q.id, ast.dump(p)))
    return bool(pins_a & pins_b)  # `a[i, j]`, `b[j, i]`: both only where `i` is `j`


def _never_one(a: ast.Subscript, b: ast.Subscript, below_a: dict[str, str], below_b: dict[str, str],
               index: set[str], assigned: set[str]) -> bool:
    """Whether subscripts `a` and `b` never name one element: at some place one holds a term
    `T` the loop does not change and the other the variable of an inner loop of its part that
    runs below `T` (`_below`: symm's adjoint adds into `dA[i, i]`, then into `dA[i, k]` for
    `k` in `range(i)`)."""
    pa = list(a.slice.elts) if isinstance(a.slice, ast.Tuple) else [a.slice]
    pb = list(b.slice.elts) if isinstance(b.slice, ast.Tuple) else [b.slice]
    if len(pa) != len(pb):
        return False
    def under(term: ast.expr, v: ast.expr, below: dict[str, str]) -> bool:
        return isinstance(v, ast.Name) and below.get(v.id) == ast.dump(term) and _kind(term, index, assigned) == "term"

    return any(under(p, q, below_b) or under(q, p, below_a) for p, q in zip(pa, pb))


def _below(part: list[ast.stmt]) -> dict[str, str]:
    """The variables of the `for` loops in `part` that stay below a bound `N` (`ast.dump`) and
    at or above 0: `for v in range(N)`, `range(lo, N)` (step 1), or reversed `for _r in
    range(N): v = N - 1 - _r` (`loop_forms.reversed_head`) or `range(_rt.span(lo, N))`, `lo` a
    constant `>= 0`, each assigned nowhere else in `part` (nor `N` in the loop). A negative
    `v` would name an element from the end (`a[i, -1]` is `a[i, N]` where the row is `N + 1`
    long), which may be the one `N` names."""
    stores: dict[str, int] = {}
    for n in pyast.walk(ast.Module(part, [])):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stores[n.id] = stores.get(n.id, 0) + 1
    out: dict[str, str] = {}
    for n in pyast.walk(ast.Module(part, [])):
        if not (isinstance(n, ast.For) and plain(n) and isinstance(n.target, ast.Name)):
            continue
        head = reversed_head(n)
        if head is not None:
            var, lo, stop = head
            if stores.get(n.target.id) == 1 and stores.get(var) == 1 and _from_nonneg(lo):
                out[var] = ast.dump(stop)
            continue
        args = n.iter.args  # type: ignore[attr-defined]
        if len(args) in (1, 2) and stores.get(n.target.id) == 1 and not (_stores(n) & _loads(args[-1])) \
                and _from_nonneg(args[0] if len(args) == 2 else None):
            out[n.target.id] = ast.dump(args[-1])
    return out


def _from_nonneg(lo: ast.expr | None) -> bool:
    """Whether a loop's first value `lo` (None: 0) is known to be at least 0."""
    return lo is None or isinstance(lo, ast.Constant) and type(lo.value) is int and lo.value >= 0


def _kind(e: ast.expr, index: set[str], assigned: set[str]) -> str:
    """"index" (an index name plus or minus terms the loop does not change), "term" (such a
    term) or "other" (a value that may change within an iteration)."""
    if _affine(e, index, assigned - index):
        return "index"
    for n in pyast.walk(e):
        if isinstance(n, (ast.Call, ast.Subscript, ast.Attribute, ast.Slice)):
            return "other"
        if isinstance(n, ast.Name) and n.id in assigned | index:
            return "other"
    return "term"
