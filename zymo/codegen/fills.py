"""Diagonal fills: a loop that stores one number on a matrix's diagonal becomes one NumPy call.

Contract: `diagonal_fills(fn, ndims)` rewrites, in place, each statement of the function `fn`
(outside its loops: at its top level or in branches there) of the form

    for v in range(n):          # or range(0, n); `n` a name or an int constant
        x[v, v] = c             # `x` a 2-d array of `ndims`, not named `v`; `c` a float
                                # constant that is finite or an int/bool one within 2**53

where the program reads `v` nowhere after the loop, as `_rt.fill_diagonal(x, n, c)`, and returns
whether it changed anything. `runtime.arrays.fill_diagonal` does what the loop does, to the
bit, warnings and errors included: on a writable float or complex `ndarray`, an int `n` and a
`c` the element type holds exactly (no store rounds, overflows or warns), it stores `c` into
the first `n` diagonal elements through one writable view (`np.einsum("ii->i", ...)`), and
where `n` passes an axis it stores the elements before that and then raises the IndexError the
loop raises (`x[m, m] = c`); on anything else it runs the loop itself.

Why: the loop does scalar work, so `codegen/outline.py` would compile it as a kernel of its
own, about 55 ms of Numba for a few microseconds of work per call. Correlation's adjoint keeps
two such loops beside the NumPy statements of `codegen/idioms.py` (`corr[i, i] = 1.0` and its
shadow's reset): its first call loses their two compiles. Loops inside other loops are left
alone: they go into their loop's kernel, where a Python call would keep it from compiling.
"""
from __future__ import annotations

import ast
import math

from .outline import _exposed


def diagonal_fills(fn: ast.FunctionDef, ndims: dict[str, int]) -> bool:
    """Rewrite `fn`'s diagonal fills (module contract); whether any was."""
    return _block(fn.body, [], ndims)


def _block(stmts: list[ast.stmt], after: list[list[ast.stmt]], ndims: dict[str, int]) -> bool:
    changed = False
    for k, s in enumerate(stmts):
        rest = [stmts[k + 1:], *after]
        if isinstance(s, ast.If):
            changed |= _block(s.body, rest, ndims)
            changed |= _block(s.orelse, rest, ndims)
            continue
        fill = _fill(s, ndims)
        if fill is not None and not _read_later(fill[0], rest):
            stmts[k] = ast.Expr(ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), "fill_diagonal", ast.Load()),
                                         list(fill[1:]), []))
            changed = True
    return changed


def _fill(s: ast.stmt, ndims: dict[str, int]) -> tuple[str, ast.Name, ast.expr, ast.expr] | None:
    """(the loop's index, the array, the bound, the constant) of a diagonal fill, or None."""
    if not (isinstance(s, ast.For) and isinstance(s.target, ast.Name) and not s.orelse and len(s.body) == 1):
        return None
    it = s.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and not it.keywords and len(it.args) in (1, 2)):
        return None
    if len(it.args) == 2 and not (isinstance(it.args[0], ast.Constant) and type(it.args[0].value) is int
                                  and it.args[0].value == 0):
        return None
    bound = it.args[-1]
    if not (isinstance(bound, ast.Name) or isinstance(bound, ast.Constant) and type(bound.value) is int):
        return None
    store = s.body[0]
    v = s.target.id
    if not (isinstance(store, ast.Assign) and len(store.targets) == 1 and isinstance(store.targets[0], ast.Subscript)):
        return None
    target = store.targets[0]
    x, index = target.value, target.slice
    if not (isinstance(x, ast.Name) and ndims.get(x.id) == 2 and isinstance(index, ast.Tuple) and len(index.elts) == 2
            and all(isinstance(e, ast.Name) and e.id == v for e in index.elts)):
        return None
    if v == x.id or isinstance(bound, ast.Name) and bound.id in (v, x.id):
        return None
    if not _constant(store.value):
        return None
    return v, ast.Name(x.id, ast.Load()), bound, store.value


def _constant(e: ast.expr) -> bool:
    """A finite int, float or bool constant, or its negation."""
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        e = e.operand
    value = e.value if isinstance(e, ast.Constant) else None
    if isinstance(value, int):  # bool is one
        return abs(value) <= 2 ** 53
    return isinstance(value, float) and math.isfinite(value)


def _read_later(name: str, rest: list[list[ast.stmt]]) -> bool:
    """Whether the statements that may run after the loop may read `name` before writing it."""
    seen: set[str] = set()
    for stmts in rest:
        exposed, seen = _exposed(stmts, seen)
        if name in exposed:
            return True
    return False
