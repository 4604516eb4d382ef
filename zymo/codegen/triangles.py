"""Triangular iteration domains of the loop nests `codegen/idioms.py` runs as NumPy statements.

Contract. A perfect nest's loops (outermost first) define its domain (`domain`): a loop over
`range(N)` (`N` an int or a name that is no index of the nest) is an axis `[0, N)`; at most
one loop may instead run over a triangle on its index `j` and the index `i` of an enclosing
loop, which must run over `range(N)`:

    range(i + 1)     j <= i        box i in [0, N),     j in [0, N)      lower
    range(i)         j <  i        box i in [1, N),     j in [0, N - 1)  lower
    range(i, N)      j >= i        box i in [0, N),     j in [0, N)      upper
    range(i + 1, N)  j >  i        box i in [0, N - 1), j in [1, N)      upper

(forward, or reversed as reverse mode writes them: `for _r in range(i + 1): j = i + 1 - 1 - _r`,
`for _r in range(_rt.span(i, N)): j = N - 1 - _r`). The box is the smallest rectangle holding
the triangle: each of its rows and columns holds a point of it, so a sum over `j` (or `i`) of
a row (column) of the box is never empty. In box coordinates the triangle is a square's lower
(`np.tri(s, dtype=bool)`, s the box's side) or upper (its transpose) half, diagonal included.
A statement whose written element is subscripted by both `i` and `j` becomes a masked update
(`np.add(X[box], P, out=X[box], where=mask)`, `np.multiply`, `np.copyto`): elements outside
the triangle are not written at all (a -0.0 or NaN there stays). A product summed over `i` or
`j` takes the one factor subscripted by both through `np.where(mask, F[box], 0.0)`; the other
factors' elements then meet zeros, which gives the loops' sum only where they are finite: the
caller checks that at run time and keeps the loops otherwise (`np.isfinite(...).all()` in the
guard, on arrays the nest does not write). The mask is built per statement: O(s^2) beside the
O(s^3) products, not cached.

`inline_bounds` prepares a nest for this: the generated code names a triangle's bound
(`t = i + 1; for j in range(t)`), and the temporary is replaced by its value where that is
exact (module function's docstring).
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Protocol


class Loop(Protocol):
    """A loop of a perfect nest (`idioms._Loop`): its index, its range `[lo, bound)` (`lo`
    None for 0), and the counter of a reversed loop."""
    @property
    def var(self) -> str: ...
    @property
    def bound(self) -> ast.expr: ...
    @property
    def lo(self) -> ast.expr | None: ...


@dataclass(frozen=True)
class Domain:
    """The box a nest's NumPy statements slice, and the triangle in it (module contract)."""
    ranges: dict[str, tuple[str | None, str]]  # index -> (start or None for 0, stop) of the box
    pair: tuple[str, str] | None = None  # (i, j) of the triangle, if there is one
    side: str = ""  # the box's side over the pair
    lower: bool = True

    def mask(self) -> str:
        """The triangle as a boolean array, axes `pair`."""
        tri = f"np.tri({self.side}, dtype=bool)"
        return tri if self.lower else f"{tri}.T"


def domain(loops: list[Loop]) -> Domain | None:
    """The domain of the perfect nest `loops`, or None when a loop is of no kind the module
    contract lists."""
    names = [lp.var for lp in loops]
    ranges: dict[str, tuple[str | None, str]] = {}
    rect: dict[str, ast.expr] = {}
    pair = None
    side, lower = "", True
    for lp in loops:
        if lp.lo is None and _size(lp.bound, names):
            ranges[lp.var] = (None, ast.unparse(lp.bound))
            rect[lp.var] = lp.bound
            continue
        form = _form(lp, rect)
        if form is None or pair is not None:
            return None
        i, strict, lower = form
        n = ast.unparse(rect[i])
        less = f"{n} - 1"
        side = less if strict else n
        j = lp.var
        if not strict:
            ranges[i], ranges[j] = (None, n), (None, n)
        elif lower:
            ranges[i], ranges[j] = ("1", n), (None, less)
        else:
            ranges[i], ranges[j] = (None, less), ("1", n)
        pair = (i, j)
    return Domain(ranges, pair, side, lower)


def _size(e: ast.expr, names: list[str]) -> bool:
    return (isinstance(e, ast.Name) and e.id not in names
            or isinstance(e, ast.Constant) and type(e.value) is int)


def _offset(e: ast.expr | None) -> tuple[str, int] | None:
    """`i` or `i + 1` as (i, 0 or 1)."""
    if isinstance(e, ast.Name):
        return e.id, 0
    if (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and isinstance(e.left, ast.Name)
            and isinstance(e.right, ast.Constant) and e.right.value == 1 and type(e.right.value) is int):
        return e.left.id, 1
    return None


def _form(lp: Loop, rect: dict[str, ast.expr]) -> tuple[str, bool, bool] | None:
    """The triangle the loop `lp` runs over with an enclosing loop over `range(N)`: (its index,
    strict, lower), or None."""
    if lp.lo is None:
        at = _offset(lp.bound)
        if at is None or at[0] not in rect:
            return None
        return at[0], at[1] == 0, True
    at = _offset(lp.lo)
    if at is None or at[0] not in rect or ast.dump(rect[at[0]]) != ast.dump(lp.bound):
        return None
    return at[0], at[1] == 1, False


def inline_bounds(nest: ast.For) -> ast.For:
    """A copy of `nest` without the temporaries that name loop bounds: each `t = i` or
    `t = i + c` (`c` an int) in a loop's body, `t` written nowhere else in the nest and read
    only by the statements after it in that body, which write neither `t` nor `i`, is dropped
    and its value written where `t` was read."""
    nest = copy.deepcopy(nest)
    stores: dict[str, int] = {}
    for n in ast.walk(nest):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stores[n.id] = stores.get(n.id, 0) + 1
    loads = _count_loads(nest)
    for loop in [n for n in ast.walk(nest) if isinstance(n, ast.For)]:
        k = 0
        while k < len(loop.body):
            s = loop.body[k]
            value = _bound_value(s)
            after = ast.Module(loop.body[k + 1:], [])
            if value is not None:
                t = s.targets[0].id  # type: ignore[attr-defined]
                idx = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
                written = {n.id for n in ast.walk(after) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                if (stores.get(t) == 1 and t not in idx and not (written & (idx | {t}))
                        and _count_loads(after).get(t, 0) == loads.get(t, 0)):
                    loop.body[k + 1:] = _Replace(t, value).visit(after).body
                    del loop.body[k]
                    continue
            k += 1
    return nest


def _bound_value(s: ast.stmt) -> ast.expr | None:
    """The value of `t = i` or `t = i + c`, or None."""
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
        return None
    v = s.value
    if isinstance(v, ast.Name):
        return v
    if (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add) and isinstance(v.left, ast.Name)
            and isinstance(v.right, ast.Constant) and type(v.right.value) is int):
        return v
    return None


def _count_loads(node: ast.AST) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out[n.id] = out.get(n.id, 0) + 1
    return out


class _Replace(ast.NodeTransformer):
    def __init__(self, name: str, value: ast.expr):
        self.name = name
        self.value = value

    def visit_Name(self, n: ast.Name) -> ast.expr:
        return copy.deepcopy(self.value) if n.id == self.name and isinstance(n.ctx, ast.Load) else n


def masked(kind: str, target: str, value: str, mask: str) -> str:
    """The update of kind "acc", "scale" or "map" of `target` by `value` where `mask` holds."""
    if kind == "scale":
        return f"np.multiply({target}, {value}, out={target}, where={mask})"
    if kind == "map":
        return f"np.copyto({target}, {value}, where={mask})"
    return f"np.add({target}, {value}, out={target}, where={mask})"
