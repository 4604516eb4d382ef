"""Reverse mode's caches addressed by the loop index inside a loop, not by a running counter.

Contract: `index_caches(fn, counters, fresh)` rewrites, in place, the loops of the generated
function `fn` that push to or pop from a cache once per iteration, and returns whether it
changed any. `counters` are the caches' entry counters (`transform/reverse/facts.py`: ints the
program starts at 0, moved only by `+= 1` and `-= 1` and read only as cache subscripts);
`fresh(base)` gives a name the program does not use.

- a forward loop `for v in range(lo, hi)` (`range(hi)`: `lo` 0; `loop_forms.plain`) whose body
  has, at its top level, stores `c[k] = x` and then one `k += 1`, `k` a counter the body uses
  nowhere else, becomes

      for v in range(lo, hi):
          _pos = k + (v - lo)
          ... c[_pos] = x ...
      k += _rt.span(lo, hi)

- a reversed loop (`for _r in range(N): i = N - 1 - _r`, or over `_rt.span(lo, N)`) whose body
  has, at its top level, one `k -= 1` and after it reads `c[k]`, `k` used nowhere else in it,
  becomes

      k -= _rt.span(lo, N)
      for _r in range(...):
          i = N - 1 - _r
          _pos = k + (i - lo)
          ... c[_pos] ...

Each iteration reaches the very entry it reached before: the loop's iterations run in order,
each moving `k` by one, so iteration `v` of the forward loop pushes at `k + (v - lo)`, and the
reversed loop, which starts where the matching pushes ended, pops the same entries from the last
down. With the counter gone from the body, the loop carries nothing through it: it may run
forward (`codegen/loop_order.py`) or in parallel (`codegen/parallel.py`, which reads `_pos`, one
index plus an invariant, as an index of the loop). Loops with the counter anywhere else (an `if`,
an inner loop, a cache growing inside the loop) stay as they are.
"""
from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from .loop_forms import plain, reversed_head
from .outline import _loads, _stores


def index_caches(fn: ast.FunctionDef, counters: frozenset[str], fresh: Callable[[str], str]) -> bool:
    """Rewrite `fn`'s cache loops (module contract); True when any changed."""
    if not counters:
        return False
    changed = False

    def visit(stmts: list[ast.stmt]) -> list[ast.stmt]:
        nonlocal changed
        out: list[ast.stmt] = []
        for s in stmts:
            for field in ("body", "orelse"):
                if isinstance(s, (ast.For, ast.While, ast.If)):
                    setattr(s, field, visit(getattr(s, field)))
            if isinstance(s, ast.For) and plain(s):
                new = _rewrite(s, counters, fresh)
                if new is not None:
                    out += new
                    changed = True
                    continue
            out.append(s)
        return out

    fn.body = visit(fn.body)
    return changed


def _rewrite(s: ast.For, counters: frozenset[str], fresh: Callable[[str], str]) -> list[ast.stmt] | None:
    """The statements replacing the loop `s`, or None (module contract)."""
    moved = {t.target.id for t in s.body if isinstance(t, ast.AugAssign) and isinstance(t.target, ast.Name)}
    if not moved & counters:
        return None  # no counter moves at the top level: nothing to do (and nothing to walk)
    head = reversed_head(s)
    skip = 1 if head is not None else 0
    if head is not None:
        index, lo, stop = head
        step = "-="
    else:
        it = s.iter  # `plain`: range(hi), range(lo, hi) or range(lo, hi, 1)
        assert isinstance(it, ast.Call) and isinstance(s.target, ast.Name)
        index, lo, stop = s.target.id, (it.args[0] if len(it.args) >= 2 else None), it.args[min(len(it.args) - 1, 1)]
        bounds = _loads(stop) | (_loads(lo) if lo is not None else set())
        if bounds & (_stores(ast.Module(s.body, [])) | {index}):
            return None  # `k` moves after the loop by its trip count, read again there
        step = "+="
    body = s.body[skip:]
    for k in sorted(moved & counters):
        at = _moves(body, k, step)
        if at is None:
            continue
        if not _only_subscripts(body, k, at, before=step == "+="):
            continue
        pos = fresh(f"_pos{k}")
        offset = index if lo is None else f"({index} - {ast.unparse(lo)})"
        span = f"_rt.span({'0' if lo is None else ast.unparse(lo)}, {ast.unparse(stop)})"
        new_body = [copy.deepcopy(t) for t in body]
        del new_body[at]
        for t in new_body:
            _Renamer(k, pos).visit(t)
        s.body = [*s.body[:skip], ast.parse(f"{pos} = {k} + {offset}").body[0], *new_body]
        move = ast.parse(f"{k} {step} {span}").body[0]
        return [s, move] if step == "+=" else [move, s]
    return None


def _moves(body: list[ast.stmt], k: str, step: str) -> int | None:
    """The position of the one `k += 1` (`k -= 1`) at the body's top level."""
    op = ast.Add if step == "+=" else ast.Sub
    found = [j for j, t in enumerate(body) if isinstance(t, ast.AugAssign) and isinstance(t.target, ast.Name)
             and t.target.id == k and isinstance(t.op, op) and isinstance(t.value, ast.Constant)
             and t.value.value == 1]
    return found[0] if len(found) == 1 else None


def _only_subscripts(body: list[ast.stmt], k: str, at: int, before: bool) -> bool:
    """Whether `k` appears in the body only in the move at `at` and as the whole subscript of
    a cache, in top-level statements before the move (pushes) or after it (pops), and nowhere
    in a loop."""
    for j, t in enumerate(body):
        if j == at:
            continue
        names = [n for n in ast.walk(t) if isinstance(n, ast.Name) and n.id == k]
        if not names:
            continue
        if (j > at) == before or isinstance(t, (ast.For, ast.While)):
            return False
        slices = {id(n.slice) for n in ast.walk(t) if isinstance(n, ast.Subscript)}
        if any(id(n) not in slices or not isinstance(n.ctx, ast.Load) for n in names):
            return False
    return True


class _Renamer(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old = old
        self.new = new

    def visit_Name(self, n: ast.Name) -> ast.Name:
        return ast.Name(self.new, n.ctx) if n.id == self.old else n
