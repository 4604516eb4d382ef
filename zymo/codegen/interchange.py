"""Two perfectly nested loops swapped where the inner one walks down the columns of C-ordered
arrays: `x[i] += A[j, i] * y[j]` over `j` inside `i` becomes a pass along the rows of `A`.

Contract: `interchanged(s, memory, rest)` returns the nest `s` (`for a ...: sunk; for b ...: body`,
each loop forward, `for v in range(...)`, or reverse mode's reversed loop, `for _r in
range(N): v = N - 1 - _r`; `codegen/loop_forms.py`) as `for b ...: for a ...: body`, each loop
keeping its bounds and direction, or None. It swaps only where that computes the same numbers,
to the bit, and helps:
- the outer loop's body is (its reversed-index assignment,) index arithmetic `sunk` (`x = e`,
  `e` of names, constants, arithmetic and `_rt.span`, reading nothing the inner loop assigns,
  which the swapped nest computes again at the top of each inner iteration: the same values) and
  the inner loop; the inner loop's bounds read neither the outer index nor anything the body
  assigns (a rectangle);
- the body is assignments and augmented assignments only, its calls pure (`loop_forms.plain`);
  each name it assigns is assigned before it is read in every iteration (nothing carried),
  and none is read after the nest (`rest`: the statement lists that may run after it);
- each array the body writes is reached in it through subscripts that index every dimension
  and hold one and the same loop index (the outer or the inner one, never negative:
  `loop_forms.never_negative`, as `a[-1]` is `a[n - 1]`) at one place, their other
  parts free of names the body assigns; and it overlaps no other array the body reaches
  (`memory`); a cache the body only pushes to (`memory.caches`: each entry written once) is
  exempt;
- more subscripts of the body have the outer index in their last (contiguous in C order)
  place than the inner one.
Why the numbers stay the same: the iterations that reach an element of a written array share
the index its subscripts hold at that place: with the outer index `a`, they are iterations of
one `a`, run in the inner loop's order before and after the swap; with the inner index, likewise
in the outer loop's order. Each written element so sees the same operations in the same order
(covariance's adjoint adds into `ddata[k, i]` and `ddata[k, j]`, both at `k`), and what is only
read does not change during the nest. The gain: mvt's `x2` (`x2[i] += A[j, i] * y2[j]`) becomes
a vectorized row update instead of a strided sum per element.
"""
from __future__ import annotations

import ast

from .. import pyast
from .loop_forms import Memory, never_negative, plain, reversed_head, touched
from .outline import _exposed, _loads, _stores


def interchanged(s: ast.For, memory: Memory, rest: list[list[ast.stmt]],
                 later: set[str] | None = None) -> ast.For | None:
    """The nest `s` with its two loops swapped, or None (module contract); `later`, if given:
    a superset of the names `rest` may read before writing them (found once by a caller)."""
    outer = _index(s)
    if outer is None or not s.body or not isinstance(s.body[-1], ast.For):
        return None
    a, head_a = outer
    inner_loop = s.body[-1]
    sunk = s.body[len(head_a):-1]  # index arithmetic, computed again in each inner iteration
    if not all(_index_arithmetic(t) for t in sunk):
        return None
    inner = _index(inner_loop)
    if inner is None:
        return None
    b, head_b = inner
    body = [*sunk, *inner_loop.body[len(head_b):]]
    if not body or not all(isinstance(t, (ast.Assign, ast.AugAssign)) for t in body):
        return None
    assigned = _stores(ast.Module(body, []))
    loop_names = {a, b, s.target.id, inner_loop.target.id}  # type: ignore[attr-defined]
    bounds = _loads(inner_loop.iter) | (_loads(ast.Module(head_b, [])) - {b, inner_loop.target.id})  # type: ignore
    own = _stores(ast.Module(inner_loop.body, [])) | {b, inner_loop.target.id}  # type: ignore[attr-defined]
    if sunk and (_loads(ast.Module(sunk, [])) | _stores(ast.Module(sunk, []))) & own:
        return None  # computed again, `sunk` would read (or be) what the inner loop changes
    if bounds & (assigned | {a, s.target.id}) or assigned & loop_names:  # type: ignore[attr-defined]
        return None
    if _loads(s.iter) & assigned:
        return None  # swapped, the outer loop's bounds would be evaluated again after the body changed them
    if _last_place(body, a) <= _last_place(body, b):
        return None  # the swap would not help (the cheap test first)
    carried, _ = _exposed(body, {a, b})
    sure = {x for x, loop in ((a, s), (b, inner_loop)) if never_negative(loop, ast.Name(x, ast.Load()))}
    if carried & assigned or not _writes_ok(body, a, b, assigned, memory, sure):
        return None
    if later is None:
        later, seen = set(), set()
        for block in rest:
            e, seen = _exposed(block, seen)
            later |= e
    if later & (assigned | loop_names):
        return None
    new_inner = ast.For(target=s.target, iter=s.iter, body=[*head_a, *body], orelse=[], type_comment=None)
    return ast.For(target=inner_loop.target, iter=inner_loop.iter, body=[*head_b, new_inner], orelse=[],
                   type_comment=None)


def _index_arithmetic(t: ast.stmt) -> bool:
    """`x = e`, `e` names, constants, arithmetic and `_rt.span(...)` only: the same value
    wherever it is computed again while its names keep their values."""
    if not (isinstance(t, ast.Assign) and len(t.targets) == 1 and isinstance(t.targets[0], ast.Name)):
        return False
    for n in pyast.walk(t.value):
        if isinstance(n, ast.Call) and not (ast.unparse(n.func) == "_rt.span" and not n.keywords):
            return False
        if isinstance(n, (ast.Subscript, ast.Lambda, ast.Starred)) or isinstance(n, ast.Attribute) \
                and ast.unparse(n) != "_rt.span":
            return False
    return True


def _index(s: ast.For) -> tuple[str, list[ast.stmt]] | None:
    """(The index, the reversed-index assignment or nothing) of a plain loop, else None."""
    if not isinstance(s.target, ast.Name) or not plain(s):
        return None
    head = reversed_head(s)
    return (head[0], s.body[:1]) if head is not None else (s.target.id, [])


def _parts(n: ast.Subscript) -> list[ast.expr]:
    return list(n.slice.elts) if isinstance(n.slice, ast.Tuple) else [n.slice]


def _writes_ok(body: list[ast.stmt], a: str, b: str, assigned: set[str], memory: Memory,
               sure: set[str]) -> bool:
    """The contract's conditions on the arrays the body writes; `sure`: the indices (of `a`,
    `b`) never negative (`loop_forms.never_negative`), the only ones that tell elements apart."""
    box = ast.Module(body, [])
    elements, bare = touched(box)  # type: ignore[arg-type]
    written = {n.value.id for subs in elements.values() for n in subs  # type: ignore[attr-defined]
               if isinstance(n.ctx, ast.Store)}
    written |= {t.target.value.id for t in body if isinstance(t, ast.AugAssign)  # type: ignore[attr-defined]
                and isinstance(t.target, ast.Subscript)}
    for name in written:
        if name in memory.caches and all(isinstance(n.ctx, ast.Store) for n in elements[name]):
            continue  # pushes: each to an entry of its own, in any order
        subs = [_parts(n) for n in elements[name]]
        nd = memory.ndims.get(name)
        if name in bare or any(len(parts) != nd for parts in subs):
            return False
        shared = [k for k in range(len(subs[0])) if isinstance(subs[0][k], ast.Name) and subs[0][k].id in sure
                  and all(isinstance(parts[k], ast.Name) and parts[k].id == subs[0][k].id for parts in subs)]
        if not shared:
            return False
        for parts in subs:
            rest = [p for p in parts if not (isinstance(p, ast.Name) and p.id in (a, b))]
            if any(isinstance(x, (ast.Call, ast.Subscript, ast.Slice)) for p in rest for x in pyast.walk(p)):
                return False
            if any(_loads(p) & (assigned | {a, b}) for p in rest):
                return False
        others = set(elements) | {n for n in bare if memory.listed(n) or n in memory.ndims}  # arrays used whole too
        if any(memory.overlap(name, o) for o in others if o != name):
            return False
    return True


def _last_place(body: list[ast.stmt], index: str) -> int:
    """How many subscripts of arrays of two or more dimensions have `index` last."""
    count = 0
    for t in body:
        for n in pyast.walk(t):
            if isinstance(n, ast.Subscript):
                parts = _parts(n)
                if len(parts) >= 2 and isinstance(parts[-1], ast.Name) and parts[-1].id == index:
                    count += 1
    return count
