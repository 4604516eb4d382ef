"""Reverse mode's caches addressed by the loop index inside a loop, not by a running counter.

Contract: `index_caches(fn, counters, fresh)` rewrites, in place, the loops of the generated
function `fn` that push to or pop from a cache once per iteration, and returns whether it
changed any. `counters` are the caches' entry counters (`transform/reverse/facts.py`: ints the
program starts at 0, moved only by `+= 1` and `-= 1` and read only as cache subscripts);
`fresh(base)` gives a name the program does not use.

- a forward loop `for v in range(lo, hi)` (`range(hi)`: `lo` 0; `loop_forms.plain`) whose body
  moves the counter `k` once, at its top level, by `k += X` (`X` the constant 1, or an amount
  the body does not change: `_rt.span(a, b)` of an inner loop already rewritten, so nests of
  any depth are addressed level by level), and otherwise only reads `k`, before that move,
  becomes

      for v in range(lo, hi):
          _pos = k + (v - lo) * X
          ... c[_pos] = x ...        (every read of `k` in the body reads `_pos`)
      k += _rt.span(lo, hi) * X

- a reversed loop (`for _r in range(N): i = N - 1 - _r`, or over `_rt.span(lo, N)`) whose body
  has, at its top level, one `k -= X` and only reads `k` after it, becomes

      k -= _rt.span(lo, N) * X
      for _r in range(...):
          i = N - 1 - _r
          _pos = k + (i - lo) * X
          ... c[_pos] ...

- a loop running down, `for v in range(hi, lo, -1)` (bounds as `plain`'s), that pushes as the
  forward loop does: `_pos = k + (hi - v) * X`, and `k += _rt.span(lo, hi) * X` after it;
- a forward loop that pops as the reversed one does (reverse mode's adjoint of a loop running
  down: `for _r in range(_n): i = hi - (_n - 1 - _r)`): `k -= _rt.span(lo, N) * X` before it,
  and `_pos = k + (N - 1 - v) * X` in it.

(`* X` is left out where `X` is 1.) An amount may name what the body assigns once, at its top
level before the move, as index arithmetic of names it does not assign (`_n = _rt.span(0, m)`):
that value stands in for the name (`_invariant`). Each read of `k` reads the value it read before: the loop's
iterations run in order, each moving `k` by `X` and nothing else storing it, so in iteration `v`
of the forward loop `k` is `k0 + (v - lo) * X` before the move, and the reversed loop, which
starts where the matching pushes ended, reads `k_end - (_r + 1) * X` after its move. With the
counter gone from the body, the loop carries nothing through it: it may run forward
(`codegen/loop_order.py`) or in parallel (`codegen/parallel.py`: each push writes an entry no
other push writes); a loop running down and the pop loop of its adjoint stay serial themselves
(parallel loops and unroll-and-jam take forward loops whose index they can read), but a loop
holding them no longer carries the counter through them (adi's rows). Loops that store `k`
anywhere else (an `if`, an inner loop not rewritten, a cache growing inside the loop) stay as
they are.
"""
from __future__ import annotations

import ast
from collections.abc import Callable

from .. import pyast
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
            if isinstance(s, ast.For) and (plain(s) or _down(s) is not None):
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
    head = reversed_head(s) if plain(s) else None
    down = _down(s)
    skip = 1 if head is not None else 0
    if head is not None:
        index, lo, stop = head
        steps = ["-="]
    else:
        it = s.iter  # `plain`: range(hi), range(lo, hi) or range(lo, hi, 1); or `_down`'s range(hi, lo, -1)
        assert isinstance(it, ast.Call) and isinstance(s.target, ast.Name)
        if down is not None:
            lo, stop = down
        else:
            lo, stop = (it.args[0] if len(it.args) >= 2 else None), it.args[min(len(it.args) - 1, 1)]
        index = s.target.id
        bounds = _loads(stop) | (_loads(lo) if lo is not None else set())
        if bounds & (_stores(ast.Module(s.body, [])) | {index}):
            return None  # `k` moves after the loop by its trip count, read again there
        steps = ["+="] if down is not None else ["+=", "-="]
    moves: list[ast.stmt] = []
    step = steps_taken = steps[0]
    stored: set[str] | None = None  # what the body assigns, found when an amount reads names
    for k in sorted(moved & counters):  # each counter in turn, on the body the last one left
        body = s.body[skip:]
        found = None
        for step in steps:
            found = _moves(body, k, step)
            if found is not None:
                break
        if found is None or moves and step != steps_taken:
            continue
        steps_taken = step
        at, amount = found
        reads = _loads(amount)
        if reads and stored is None:
            stored = _stores(ast.Module(s.body, [])) | {index}
        if reads & (stored or set()):
            amount = _invariant(amount, body[:at], stored or set())
            if amount is None:
                continue
        if not _only_reads(body, k, at, before=step == "+="):
            continue
        pos = fresh(f"_pos{k}")
        # bounds in parentheses: `hi << 1` or `m - 1` is one operand (review 49)
        if down is not None:  # pushes from `stop` down: the first at `stop`
            offset = f"(({ast.unparse(stop)}) - {index})"
        elif step == "-=" and head is None:  # pops in a forward loop: the first at its last entry
            offset = f"(({ast.unparse(stop)}) - 1 - {index})"
        else:
            offset = index if lo is None else f"({index} - ({ast.unparse(lo)}))"
        span = f"_rt.span({'0' if lo is None else ast.unparse(lo)}, {ast.unparse(stop)})"
        if not (isinstance(amount, ast.Constant) and amount.value == 1):
            offset, span = f"{offset} * {ast.unparse(amount)}", f"{span} * {ast.unparse(amount)}"
        new_body = body[:at] + body[at + 1:]
        for t in new_body:  # in place: the loop is rewritten for good
            _Renamer(k, pos).visit(t)
        s.body = [*s.body[:skip], ast.parse(f"{pos} = {k} + {offset}").body[0], *new_body]
        if stored is not None:
            stored.add(pos)
        moves.append(ast.parse(f"{k} {step} {span}").body[0])
    if not moves:
        return None
    return [s, *moves] if steps_taken == "+=" else [*moves, s]


def _invariant(amount: ast.expr, before: list[ast.stmt], stored: set[str]) -> ast.expr | None:
    """`amount` with each name the body assigns replaced by its value, where that name is
    assigned once before the move (`before`: the body's top level up to it), as index
    arithmetic of names the body does not assign (`_n = _rt.span(0, m)`, reverse mode's trip
    count of a loop running down): at the move, the same value in every iteration, and before
    the loop (a later assignment in the body changes nothing: the definition runs again at the
    top of the next iteration). None where some name is not such."""
    from .interchange import _index_arithmetic

    values: dict[str, ast.expr] = {}
    for name in _loads(amount) & stored:
        defs = [t for t in before if isinstance(t, ast.Assign) and len(t.targets) == 1
                and isinstance(t.targets[0], ast.Name) and t.targets[0].id == name]
        if len(defs) != 1 or not _index_arithmetic(defs[0]) or _loads(defs[0].value) & stored:
            return None
        if sum(name in _stores(t) for t in before) != 1:
            return None
        values[name] = defs[0].value

    class _Put(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.expr:
            return pyast.clone(values[n.id]) if n.id in values else n
    return _Put().visit(pyast.clone(amount))


def _down(s: ast.For) -> tuple[ast.expr, ast.expr] | None:
    """(lo, hi) of `for v in range(hi, lo, -1)`, a loop `plain` but for its step (its bounds
    names, constants and arithmetic), or None."""
    it = s.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and len(it.args) == 3 and not it.keywords):
        return None
    st = it.args[2]
    if not (isinstance(st, ast.Constant) and type(st.value) is int and st.value == -1
            or isinstance(st, ast.UnaryOp) and isinstance(st.op, ast.USub) and isinstance(st.operand, ast.Constant)
            and type(st.operand.value) is int and st.operand.value == 1):
        return None
    probe = ast.For(target=s.target, iter=ast.Call(it.func, [it.args[1], it.args[0]], []), body=s.body,
                    orelse=s.orelse, type_comment=None)
    return (it.args[1], it.args[0]) if plain(probe) else None


def _moves(body: list[ast.stmt], k: str, step: str) -> tuple[int, ast.expr] | None:
    """The position and amount of the one `k += X` (`k -= X`) at the body's top level, `X` the
    constant 1 or a product of names, constants and `_rt.span(...)` of them."""
    op = ast.Add if step == "+=" else ast.Sub
    found = [(j, t.value) for j, t in enumerate(body) if isinstance(t, ast.AugAssign)
             and isinstance(t.target, ast.Name) and t.target.id == k and isinstance(t.op, op)]
    if len(found) != 1 or not _amount(found[0][1]):
        return None
    return found[0]


def _amount(e: ast.expr) -> bool:
    if isinstance(e, ast.Constant):
        return type(e.value) is int and e.value >= 1
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
        return _amount(e.left) and _amount(e.right)
    return isinstance(e, ast.Call) and ast.unparse(e.func) == "_rt.span" and not e.keywords \
        and all(isinstance(n, (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Load))
                for a in e.args for n in pyast.walk(a))


def _only_reads(body: list[ast.stmt], k: str, at: int, before: bool) -> bool:
    """Whether the body, besides the move at `at`, only reads `k`, and only in top-level
    statements before the move (pushes) or after it (pops)."""
    for j, t in enumerate(body):
        if j == at:
            continue
        names = [n for n in pyast.walk(t) if isinstance(n, ast.Name) and n.id == k]
        if not names:
            continue
        if (j > at) == before or any(not isinstance(n.ctx, ast.Load) for n in names):
            return False
    return True


class _Renamer(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old = old
        self.new = new

    def visit_Name(self, n: ast.Name) -> ast.Name:
        return ast.Name(self.new, n.ctx) if n.id == self.old else n
