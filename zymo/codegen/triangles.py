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
`for _r in range(_rt.span(i, N)): j = N - 1 - _r`). An upper triangle's `i` may instead run
over `range(M)`, `M` another such bound (correlation's `for i in range(n - 1): for j in
range(i + 1, n)`): the domain is the triangle above when `M >= N` (`M >= N - 1` for the strict
one: no `j` exists for a larger `i`), which the guard checks (`Domain.requires`). The box is
the smallest rectangle holding the triangle: each of its rows and columns holds a point of it,
so a sum over `j` (or `i`) of a row (column) of the box is never empty. In box coordinates
the triangle is a square's lower (`np.tri(s, dtype=bool)`, s the box's side) or upper (its
transpose) half, diagonal included.
A statement whose written element is subscripted by both `i` and `j` becomes a masked update
(`np.add(X[box], P, out=X[box], where=mask)`, `np.multiply`, `np.divide`, `np.copyto`):
elements outside the triangle are not written at all (a -0.0 or NaN there stays). A product
summed over `i` or `j` takes the one factor subscripted by both through `np.where(mask, F[box], 0.0)`; the other
factors' elements then meet zeros, which gives the loops' sum only where they are finite: the
caller checks that at run time and keeps the loops otherwise (`np.isfinite(...).all()` in the
guard, on arrays the nest does not write). `share_masks` computes each mask and each masked
operand once per nest (a temporary before its first use; a masked operand again after a
statement that writes its array); `_rt.tri_mask(s)` keeps the masks of the last sides from one
call to the next, read-only (measured: 8-10% of syrk's and syr2k's gradients at n=60).

The mirror store of a symmetric matrix (`split_mirror`). In a nest `for i in range(N): ...
for j in <triangle of (i, j)>: B`, where `B` ends with `X[j, i] = X[i, j]` (forward) or holds
`t = X[j, i]; X[j, i] = 0.0; X[i, j] += t` before any other statement of `B` naming `X` or `t`
(its adjoint), every other access to `X` in the nest is `X[i, j]` inside that `j` loop (or,
for a strict triangle, a diagonal element `X[i, i]` or `X[j, j]` anywhere: no element of the
triangle or of its mirror), and `t` is named nowhere else, the store leaves the nest: the
forward one runs after it as `np.copyto(X[jbox, ibox].T, X[ibox, jbox], where=mask)`, the adjoint before it as
`w = X[jbox, ibox].T.copy(); np.copyto(X[jbox, ibox].T, 0.0, where=mask); np.add(X[ibox,
jbox], w, out=X[ibox, jbox], where=mask)`. Proof. Each (i, j) of the triangle is one
iteration of the loops, run once (where the guard holds: `Domain.requires`). A diagonal
element touched elsewhere is none of the elements below. The rest of the nest touches `X[i, j]` only in iteration
(i, j). Off the diagonal (i != j), `X[j, i]` is not in the triangle ((i, j) and (j, i) are on
opposite sides of the diagonal), so only the store of iteration (i, j) touches it; the
element sets {X[i, j], X[j, i]} of distinct iterations are disjoint. Forward: the store is
the last statement touching `X[i, j]`, so it copies the value `X[i, j]` has after the nest,
and nothing reads `X[j, i]`: copying after the nest gives every element the same value. On
the diagonal the store copies `X[i, i]` to itself: no change in either program. Adjoint: the
store is the first statement of the nest touching `X[i, j]` or `X[j, i]`, so it reads their
values before the nest; it leaves `X[j, i] = 0.0` (read by nothing after) and `X[i, j] =
X[i, j] + X[j, i]`, which the rest of iteration (i, j) reads: the same as running every
store before the nest. On the diagonal the loops compute `w = X[i, i]; X[i, i] = 0.0; X[i,
i] = 0.0 + w`, and so do the three statements (`w` is copied before the zeros are written):
the diagonal is counted once, and a -0.0 there becomes 0.0 in both. Elements off the
triangle and its mirror are not written. `np.copyto` of overlapping views copies its source
first (NumPy's array assignment), and the masked elements it reads and writes are disjoint
besides the diagonal's self-copies anyway.

`compiled_masks` writes the masked statements last, as calls of `_tri_ops`
(`codegen/numba/masked.py`): a compiled loop over the triangle where that gives the statement's
result to the bit, the statement itself elsewhere. A masked add of a symmetric product,
`alpha * (x @ x.T)` or `alpha * (x @ y.T) + alpha * (y @ x.T)` (syrk's, syr2k's, covariance's
`data.T @ data`), becomes `_rt.sym_add`: BLAS's `?syrk`/`?syr2k` on the triangle (the other
half neither read nor written; the same sum of products in BLAS's order), the statement where
BLAS cannot take it. Two such calls in a row on one target, mask and side that one call does in
one pass become that call (`_pairs`): a zero fill and an add (`_tri_ops.assign`, or
`_rt.sym_set`: BLAS's beta 0), a masked scale and a symmetric product (BLAS's beta), a division
and the mirror store (`_tri_ops.div_mirror`), the mirror's adjoint and a division
(`_tri_ops.move_div`). A masked operand read only as `W + W.T` (the adjoints of symmetric
products) is made as that sum in one pass (`_tri_ops.sym_where`, `_symmetrized`). Last,
`codegen/rank2k.py` (its own contract) finds two masked adds into one triangle, not
necessarily in a row, whose products together are one symmetric rank-2k update (symm's
adjoint: `(alpha * dC) @ B.T` through a buffer, `alpha * (B @ dC.T)`, dB's update between,
into a strict triangle) and writes them as one `_rt.sym2_add`: BLAS's `?syr2k` on the whole
square, a strict triangle's diagonal put back, the two adds where BLAS cannot take them.

`inline_bounds` prepares a nest for this: the generated code names a triangle's bound
(`t = i + 1; for j in range(t)`), and the temporary is replaced by its value where that is
exact (module function's docstring).
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .. import pyast
from .rank2k import rank2k_pairs


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
    strict: bool = False  # the diagonal out of the triangle
    requires: tuple[str, ...] = ()  # conditions the guard checks (an upper triangle's `M >= N`)

    def mask(self) -> str:
        """The triangle as a boolean array, axes `pair`."""
        tri = f"_rt.tri_mask({self.side})"
        return tri if self.lower else f"{tri}.T"


def domain(loops: list[Loop]) -> Domain | None:
    """The domain of the perfect nest `loops`, or None when a loop is of no kind the module
    contract lists."""
    names = [lp.var for lp in loops]
    ranges: dict[str, tuple[str | None, str]] = {}
    rect: dict[str, ast.expr] = {}
    pair = None
    side, lower, strict = "", True, False
    requires: tuple[str, ...] = ()
    for lp in loops:
        if lp.lo is None and _size(lp.bound, names):
            ranges[lp.var] = (None, ast.unparse(lp.bound))
            rect[lp.var] = lp.bound
            continue
        form = _form(lp, rect, names)
        if form is None or pair is not None:
            return None
        i, strict, lower = form
        n = ast.unparse(rect[i] if lower else lp.bound)
        less = f"{n} - 1"
        if not lower and ast.dump(rect[i]) != ast.dump(lp.bound):
            requires = (f"{ast.unparse(rect[i])} >= {less if strict else n}",)
        side = less if strict else n
        j = lp.var
        if not strict:
            ranges[i], ranges[j] = (None, n), (None, n)
        elif lower:
            ranges[i], ranges[j] = ("1", n), (None, less)
        else:
            ranges[i], ranges[j] = (None, less), ("1", n)
        pair = (i, j)
    return Domain(ranges, pair, side, lower, strict, requires)


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


def _form(lp: Loop, rect: dict[str, ast.expr], names: list[str]) -> tuple[str, bool, bool] | None:
    """The triangle the loop `lp` runs over with an enclosing loop over `range(N)` (`range(M)`
    for an upper one: module contract): (its index, strict, lower), or None."""
    if lp.lo is None:
        at = _offset(lp.bound)
        if at is None or at[0] not in rect:
            return None
        return at[0], at[1] == 0, True
    at = _offset(lp.lo)
    if at is None or at[0] not in rect or not _size(lp.bound, names):
        return None
    return at[0], at[1] == 1, False


def inline_bounds(nest: ast.For) -> ast.For:
    """A copy of `nest` without the temporaries that name loop bounds: each `t = i` or
    `t = i + c` (`c` an int) in a loop's body, `t` written nowhere else in the nest and read
    only by the statements after it in that body, which write neither `t` nor `i`, is dropped
    and its value written where `t` was read."""
    nest = pyast.clone(nest)
    stores: dict[str, int] = {}
    for n in pyast.walk(nest):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stores[n.id] = stores.get(n.id, 0) + 1
    loads = _count_loads(nest)
    for loop in [n for n in pyast.walk(nest) if isinstance(n, ast.For)]:
        k = 0
        while k < len(loop.body):
            s = loop.body[k]
            value = _bound_value(s)
            after = ast.Module(loop.body[k + 1:], [])
            if value is not None:
                t = s.targets[0].id  # type: ignore[attr-defined]
                idx = {n.id for n in pyast.walk(value) if isinstance(n, ast.Name)}
                written = {n.id for n in pyast.walk(after) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
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
    for n in pyast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out[n.id] = out.get(n.id, 0) + 1
    return out


class _Replace(ast.NodeTransformer):
    def __init__(self, name: str, value: ast.expr):
        self.name = name
        self.value = value

    def visit_Name(self, n: ast.Name) -> ast.expr:
        return pyast.clone(self.value) if n.id == self.name and isinstance(n.ctx, ast.Load) else n


def masked(kind: str, target: str, value: str, mask: str) -> str:
    """The update of kind "acc", "scale", "div" or "map" of `target` by `value` where `mask`
    holds."""
    if kind in ("scale", "div"):
        ufunc = "multiply" if kind == "scale" else "divide"
        return f"np.{ufunc}({target}, {value}, out={target}, where={mask})"
    if kind == "map":
        return f"np.copyto({target}, {value}, where={mask})"
    return f"np.add({target}, {value}, out={target}, where={mask})"


def share_masks(body: list[ast.stmt], fresh: Callable[[str], str]) -> list[ast.stmt]:
    """`body` (a nest's NumPy statements and the loops that stay) with each mask
    (`_rt.tri_mask(...)`) and each masked operand (`np.where(mask, F[box], 0.0)`) computed once: a
    temporary named by `fresh` assigned before the first statement that uses it. A masked
    operand is computed again after a statement that writes its array (a NumPy statement's
    target, `out=` or `np.copyto`'s first argument; any store of a loop that stays); a mask
    reads only the box's side, which the nest does not write. The branches of an `if` (a
    piece checked where it starts: its NumPy statements, else its loops) are bodies of their
    own: what is made before the `if` is used in them, what they make stays in them."""
    return _shared(body, {}, {}, fresh)


def _shared(body: list[ast.stmt], made: dict[str, str], reads: dict[str, str],
            fresh: Callable[[str], str]) -> list[ast.stmt]:
    """`share_masks` of `body`, given what is made before it (`made`: ast.dump of the expression
    -> its temporary; `reads`: ast.dump of a masked operand -> the array it reads), updated."""
    out: list[ast.stmt] = []
    for st in body:
        if isinstance(st, ast.If):
            defs: list[ast.stmt] = []
            st.test = _Share(made, reads, defs, fresh).visit(st.test)
            out += [ast.fix_missing_locations(ast.copy_location(d, st)) for d in defs]
            st.body = _shared(st.body, dict(made), dict(reads), fresh)
            st.orelse = _shared(st.orelse, dict(made), dict(reads), fresh)
        elif not isinstance(st, ast.For):
            defs = []
            st = _Share(made, reads, defs, fresh).visit(st)
            out += [ast.fix_missing_locations(ast.copy_location(d, st)) for d in defs]
        out.append(st)
        written = _written(st)
        for key in [k for k, a in reads.items() if a in written]:
            del made[key], reads[key]
    return out


class _Share(ast.NodeTransformer):
    def __init__(self, made: dict[str, str], reads: dict[str, str], defs: list[ast.stmt],
                 fresh: Callable[[str], str]):
        self.made, self.reads, self.defs, self.fresh = made, reads, defs, fresh

    def visit_Call(self, n: ast.Call) -> ast.expr:
        self.generic_visit(n)
        func = ast.unparse(n.func)
        where = (func == "np.where" and len(n.args) == 3 and not n.keywords
                 and isinstance(n.args[2], ast.Constant) and _base(n.args[1]) is not None)
        if func != "_rt.tri_mask" and not where:
            return n
        key = ast.dump(n)
        if key not in self.made:
            self.made[key] = self.fresh("_tri" if not where else "_masked")
            self.defs.append(ast.Assign(targets=[ast.Name(self.made[key], ast.Store())], value=n))
            if where:
                self.reads[key] = _base(n.args[1])  # type: ignore[assignment]
        return ast.Name(self.made[key], ast.Load())


def _base(e: ast.expr) -> str | None:
    """The array `X` of `X[...]`, `X[...].T`, or None."""
    while isinstance(e, (ast.Attribute, ast.Subscript)):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


def _written(st: ast.stmt) -> set[str]:
    """The arrays a statement of `share_masks`'s `body` may write."""
    out = {b for n in pyast.walk(st) if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)
           for b in [_base(n)] if b is not None}
    out |= {n.target.id for n in pyast.walk(st) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)}
    for n in pyast.walk(st):
        if isinstance(n, ast.Call):
            targets = [k.value for k in n.keywords if k.arg == "out"]
            targets += n.args[:1] if ast.unparse(n.func) == "np.copyto" else []
            out |= {b for t in targets for b in [_base(t)] if b is not None}
    return out


_COMPILED = {"np.add": "add", "np.multiply": "scale", "np.divide": "div"}


def compiled_masks(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` (a nest's statements after `share_masks`) with its masked statements as calls of
    `_tri_ops` (`codegen/numba/masked.py`: compiled loops over the triangle where they give the
    statement's result, the statement itself elsewhere): `np.add`, `np.multiply`, `np.divide`
    of `t` with `out=t, where=m`, `np.copyto(t, c, where=m)` (`c` a number: `fill`; an array:
    `mirror`, which the mirror store is), and each `np.where(m, f, 0.0)`, where `m` is a mask
    (`_rt.tri_mask(s)` or a temporary `share_masks` made of one) or its transpose; the adjoint
    mirror store's three statements as one `move`. The masks stay as they are: each call takes
    its statement's mask. Then `codegen/rank2k.rank2k_pairs`."""
    loads: dict[str, int] = {}
    for st in body:
        for n in pyast.walk(st):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                loads[n.id] = loads.get(n.id, 0) + 1
    return rank2k_pairs(_compiled(body, {}, loads))


def _compiled(body: list[ast.stmt], masks: dict[str, bool], loads: dict[str, int]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    body = _moves(body, masks, loads)
    for st in body:
        if _mask_made(st) is not None:
            masks[_mask_made(st)] = True  # type: ignore[index]
        if isinstance(st, ast.If):
            st.body = _compiled(st.body, dict(masks), loads) or [ast.Pass()]
            st.orelse = _compiled(st.orelse, dict(masks), loads)
        elif not isinstance(st, ast.For):
            st = _statement_call(st, masks) or _Where(masks).visit(st)
        out.append(ast.fix_missing_locations(st))
    return _symmetrized(_pairs(out), loads)


def _symmetrized(body: list[ast.stmt], loads: dict[str, int]) -> list[ast.stmt]:
    """`body` with each masked operand `W = _tri_ops.where(m, f, lower)` read only as `W + W.T`
    (or `W.T + W`: the same sum) made as that sum at once, `W = _tri_ops.sym_where(m, f, lower)`,
    and each of those sums read as `W`: one pass for the masked copy and the sum of it and its
    transpose (the adjoints of syrk's, syr2k's and covariance's symmetric products)."""
    for st in body:
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                and isinstance(st.value, ast.Call) and ast.unparse(st.value.func) == "_tri_ops.where"):
            continue
        w = st.targets[0].id
        sums = _SymSums(w)
        for other in body:
            if other is not st:
                sums.visit(pyast.clone(other))
        if not sums.found or 2 * sums.found != loads.get(w):
            continue
        st.value.func = ast.Attribute(ast.Name("_tri_ops", ast.Load()), "sym_where", ast.Load())
        for k, other in enumerate(body):
            if other is not st:
                body[k] = ast.fix_missing_locations(_SymSums(w).visit(other))
    return body


class _SymSums(ast.NodeTransformer):
    """Each `W + W.T` or `W.T + W` of the name `W` replaced by `W`, counted (`found`); the
    sums of the names it wrote itself are not (`W.T + (W + W.T)` is one sum of `W` and a read
    of `W.T`, not two sums)."""
    def __init__(self, w: str):
        self.w, self.found = w, 0
        # the names written for sums, by id; held, so that no node made later takes a freed one's id
        # (the sums of each copy `_symmetrized` visits are dropped with the copy)
        self.made: dict[int, ast.Name] = {}

    def visit_BinOp(self, n: ast.BinOp) -> ast.expr:
        self.generic_visit(n)
        if isinstance(n.op, ast.Add):
            a, b = (n.left, n.right) if isinstance(n.left, ast.Name) else (n.right, n.left)
            if (isinstance(a, ast.Name) and a.id == self.w and isinstance(b, ast.Attribute) and b.attr == "T"
                    and isinstance(b.value, ast.Name) and b.value.id == self.w
                    and id(a) not in self.made and id(b.value) not in self.made):
                self.found += 1
                name = ast.Name(self.w, ast.Load())
                self.made[id(name)] = name
                return name
        return n


def _pairs(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` with each two calls in a row that one call does in one pass, on the same target,
    mask and side (`_paired`)."""
    out: list[ast.stmt] = []
    for st in body:
        got = _paired(out[-1], st) if out else None
        if got is None:
            out.append(st)
        else:
            out[-1] = ast.fix_missing_locations(ast.copy_location(ast.Expr(got), out[-1]))
    return out


def _paired(a: ast.stmt, b: ast.stmt) -> ast.Call | None:
    """The one call for the masked updates `a` and then `b`, or None:

        _tri_ops.fill(T, 0.0, m, lo); _tri_ops.add(T, V, m, lo)  ->  _tri_ops.assign(T, V, m, lo)
        _tri_ops.fill(T, 0.0, m, lo); _rt.sym_add(T, m, lo, *p)   ->  _rt.sym_set(T, m, lo, *p)
        _tri_ops.scale(T, b, m, lo); _rt.sym_add(T, m, lo, *p)    ->  _rt.sym_add(T, m, lo, *p, beta=b)
        _tri_ops.div(V, c, m, lo); _tri_ops.mirror(T, V, m, lo)   ->  _tri_ops.div_mirror(T, V, c, m, lo)
        _tri_ops.move(T, V, m, lo); _tri_ops.div(T, c, m, lo)     ->  _tri_ops.move_div(T, V, c, m, lo)

    The operands of `b` are then computed before `a` runs: they must not read `T`'s array
    (`V` and `p` name no array `T` slices; `c` and `b` read no array). No other array can reach `T`'s
    memory: the nest's guard (`_rt.blas_ready`) proved every array it writes apart from the
    others, and the temporaries the branch makes are new memory."""
    calls = [x.value if isinstance(x, ast.Expr) and isinstance(x.value, ast.Call) else None for x in (a, b)]
    if calls[0] is None or calls[1] is None or calls[0].keywords or calls[1].keywords:
        return None
    ca, cb = calls
    fa, fb = ast.unparse(ca.func), ast.unparse(cb.func)
    same = lambda x, y: ast.dump(x) == ast.dump(y)  # noqa: E731
    if fa == "_tri_ops.fill" and len(ca.args) == 4 and _zero(ca.args[1]):
        t, _, m, lo = ca.args
        base = _base(t)
        if base is None:
            return None
        apart = lambda es: all(base not in _names(e) for e in es)  # noqa: E731
        if fb == "_tri_ops.add" and len(cb.args) == 4 and same(cb.args[0], t) and same(cb.args[2], m) \
                and same(cb.args[3], lo) and apart(cb.args[1:2]):
            return _ops("assign", [t, cb.args[1], m, lo])
        if fb == "_rt.sym_add" and len(cb.args) in (5, 6) and same(cb.args[0], t) and same(cb.args[1], m) \
                and same(cb.args[2], lo) and apart(cb.args[3:]):
            call = ast.parse("_rt.sym_set()", mode="eval").body
            call.args = cb.args  # type: ignore[attr-defined]
            return call  # type: ignore[return-value]
        return None
    if fa == "_tri_ops.scale" and fb == "_rt.sym_add" and len(ca.args) == 4 and len(cb.args) in (5, 6):
        t, b, m, lo = ca.args
        base = _base(t)
        if (base is not None and same(cb.args[0], t) and same(cb.args[1], m) and same(cb.args[2], lo)
                and all(base not in _names(e) for e in cb.args[3:]) and not _arrays_in(b)):
            call = pyast.clone(cb)
            call.keywords = [ast.keyword("beta", b)]
            return call
        return None
    if fa == "_tri_ops.div" and fb == "_tri_ops.mirror" and len(ca.args) == len(cb.args) == 4:
        v, c, m, lo = ca.args
        if same(cb.args[1], v) and same(cb.args[2], m) and same(cb.args[3], lo):
            return _ops("div_mirror", [cb.args[0], v, c, m, lo])
    if fa == "_tri_ops.move" and fb == "_tri_ops.div" and len(ca.args) == len(cb.args) == 4:
        t, v, m, lo = ca.args
        c = cb.args[1]
        if same(cb.args[0], t) and same(cb.args[2], m) and same(cb.args[3], lo) and not _arrays_in(c):
            return _ops("move_div", [t, v, c, m, lo])
    return None


def _zero(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and type(e.value) is float and e.value == 0.0 \
        and str(e.value) == "0.0"  # not -0.0


def _names(e: ast.expr) -> set[str]:
    return {n.id for n in pyast.walk(e) if isinstance(n, ast.Name)}


def _moves(body: list[ast.stmt], masks: dict[str, bool], loads: dict[str, int]) -> list[ast.stmt]:
    """`body` with each adjoint mirror store (`w = V.copy(); np.copyto(V, 0.0, where=m);
    np.add(T, w, out=T, where=m)`, `w` read nowhere else in the nest, masks made between the
    copy and the zero fill only, naming neither `w` nor a name the copy reads) as
    `_tri_ops.move(T, V, m, lower)`."""
    out: list[ast.stmt] = []
    k = 0
    while k < len(body):
        made = []  # masks made right after the copy
        while k + 1 + len(made) < len(body) and _mask_made(body[k + 1 + len(made)]) is not None:
            made.append(body[k + 1 + len(made)])
        j = k + 1 + len(made)
        got = _move(body[k], body[j:j + 2], made, dict(masks), loads) if j + 2 <= len(body) else None
        if got is None:
            out.append(body[k])
            k += 1
        else:
            out += made
            out.append(ast.copy_location(got, body[k]))
            k = j + 2
    return out


def _mask_made(st: ast.stmt) -> str | None:
    """The name `st` assigns a mask to (`name = _rt.tri_mask(...)`), or None."""
    if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
            and isinstance(st.value, ast.Call) and ast.unparse(st.value.func) == "_rt.tri_mask"):
        return st.targets[0].id
    return None


def _move(a: ast.stmt, two: list[ast.stmt], made: list[ast.stmt], masks: dict[str, bool],
          loads: dict[str, int]) -> ast.stmt | None:
    if not (isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)
            and isinstance(a.value, ast.Call) and isinstance(a.value.func, ast.Attribute)
            and a.value.func.attr == "copy" and not a.value.args and not a.value.keywords):
        return None
    w, v = a.targets[0].id, a.value.func.value
    names = {m for m in map(_mask_made, made) if m is not None}
    if loads.get(w) != 1 or names & ({w} | {n.id for n in pyast.walk(v) if isinstance(n, ast.Name)}):
        return None
    for m in names:
        masks[m] = True
    b, c = two
    calls = [x.value if isinstance(x, ast.Expr) and isinstance(x.value, ast.Call) else None for x in (b, c)]
    if calls[0] is None or calls[1] is None:
        return None
    fill, add = calls
    kf = {k.arg: k.value for k in fill.keywords}
    ka = {k.arg: k.value for k in add.keywords}
    if not (ast.unparse(fill.func) == "np.copyto" and len(fill.args) == 2 and set(kf) == {"where"}
            and ast.dump(fill.args[0]) == ast.dump(v) and isinstance(fill.args[1], ast.Constant)
            and type(fill.args[1].value) is float and fill.args[1].value == 0.0):
        return None
    if not (ast.unparse(add.func) == "np.add" and len(add.args) == 2 and set(ka) == {"out", "where"}
            and isinstance(add.args[1], ast.Name) and add.args[1].id == w
            and ast.dump(ka["out"]) == ast.dump(add.args[0]) and ast.dump(ka["where"]) == ast.dump(kf["where"])):
        return None
    lower = _lower(kf["where"], masks)
    if lower is None:
        return None
    return ast.Expr(_ops("move", [add.args[0], v, kf["where"], ast.Constant(lower)]))


def _lower(m: ast.expr, masks: dict[str, bool]) -> bool | None:
    """Whether the mask `m` is a lower triangle (True), an upper one (False), or no mask (None)."""
    flip = isinstance(m, ast.Attribute) and m.attr == "T"
    m = m.value if flip else m  # type: ignore[attr-defined]
    if isinstance(m, ast.Name) and m.id in masks:
        return masks[m.id] != flip
    if isinstance(m, ast.Call) and ast.unparse(m.func) == "_rt.tri_mask" and len(m.args) == 1 and not m.keywords:
        return not flip
    return None


def _ops(name: str, args: list[ast.expr]) -> ast.Call:
    return ast.Call(ast.Attribute(ast.Name("_tri_ops", ast.Load()), name, ast.Load()), args, [])


def _statement_call(st: ast.stmt, masks: dict[str, bool]) -> ast.stmt | None:
    """The masked update `st` as a `_tri_ops` call, or None."""
    if not isinstance(st, ast.Expr) or not isinstance(st.value, ast.Call):
        return None
    n = st.value
    func = ast.unparse(n.func)
    kw = {k.arg: k.value for k in n.keywords}
    if len(n.args) != 2 or "where" not in kw:
        return None
    lower = _lower(kw["where"], masks)
    if lower is None:
        return None
    t, v = n.args
    if func == "np.add" and set(kw) == {"out", "where"} and ast.dump(kw["out"]) == ast.dump(t):
        sym = _symmetric(v)
        if sym is not None:  # syrk's and syr2k's products: `_rt.sym_add` (BLAS's ?syrk, ?syr2k)
            call = ast.parse("_rt.sym_add()", mode="eval").body
            call.args = [t, kw["where"], ast.Constant(lower), *sym]  # type: ignore[attr-defined]
            return ast.copy_location(ast.Expr(call), st)
    if func in _COMPILED and set(kw) == {"out", "where"} and ast.dump(kw["out"]) == ast.dump(t):
        name = _COMPILED[func]
    elif func == "np.copyto" and set(kw) == {"where"}:
        number = isinstance(v, ast.Constant) or isinstance(v, ast.UnaryOp) and isinstance(v.operand, ast.Constant)
        name = "fill" if number else "mirror"
    else:
        return None
    return ast.copy_location(ast.Expr(_ops(name, [t, v, kw["where"], ast.Constant(lower)])), st)


def _symmetric(v: ast.expr) -> list[ast.expr] | None:
    """`[alpha, x]` where `v` is `alpha * (x @ x.T)` (or `x @ x.T`: alpha 1.0), `[alpha, x, y]`
    where it is `alpha * (x @ y.T) + alpha * (y @ x.T)` (`x.T` read as `w` where `x` is `w.T`);
    None for anything else."""
    def term(e: ast.expr) -> tuple[ast.expr | None, ast.expr, ast.expr] | None:
        coef = None
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) and isinstance(e.right, ast.BinOp) \
                and isinstance(e.right.op, ast.MatMult) and not _arrays_in(e.left):
            coef, e = e.left, e.right
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.MatMult):
            return coef, e.left, e.right
        return None

    def transposed(a: ast.expr, b: ast.expr) -> bool:  # `b` is `a.T`
        return (isinstance(b, ast.Attribute) and b.attr == "T" and ast.dump(b.value) == ast.dump(a)
                or isinstance(a, ast.Attribute) and a.attr == "T" and ast.dump(a.value) == ast.dump(b))

    one = term(v)
    if one is not None:
        coef, x, xt = one
        return [coef or ast.Constant(1.0), x] if transposed(x, xt) else None
    if not (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add)):
        return None
    a, b = term(v.left), term(v.right)
    if a is None or b is None or ast.dump(a[0] or ast.Constant(1.0)) != ast.dump(b[0] or ast.Constant(1.0)):
        return None
    (coef, x, yt), (_, y, xt) = a, b
    return [coef or ast.Constant(1.0), x, y] if transposed(x, xt) and transposed(y, yt) else None


def _arrays_in(e: ast.expr) -> bool:
    """Whether `e` may read an array (a subscript, an attribute, a call other than `_rt.fdiv`)."""
    return any(isinstance(n, (ast.Subscript, ast.Attribute)) or isinstance(n, ast.Call)
               and ast.unparse(n.func) != "_rt.fdiv" for n in pyast.walk(e))


class _Where(ast.NodeTransformer):
    """`np.where(m, f, 0.0)` of a mask `m` as `_tri_ops.where(m, f, lower)`."""
    def __init__(self, masks: dict[str, bool]):
        self.masks = masks

    def visit_Call(self, n: ast.Call) -> ast.expr:
        self.generic_visit(n)
        if (ast.unparse(n.func) != "np.where" or len(n.args) != 3 or n.keywords
                or not isinstance(n.args[2], ast.Constant) or type(n.args[2].value) is not float
                or n.args[2].value != 0.0):
            return n
        lower = _lower(n.args[0], self.masks)
        if lower is None:
            return n
        return _ops("where", [n.args[0], n.args[1], ast.Constant(lower)])


@dataclass(frozen=True)
class Mirror:
    """The mirror store of a triangle taken out of its nest (module contract): `X[j, i] =
    X[i, j]` run after the nest, or its adjoint `t = X[j, i]; X[j, i] = 0.0; X[i, j] += t`
    run before it, over the triangle of the loops `loops` (over `i`, then `j`)."""
    array: str
    loops: tuple[Loop, Loop]
    adjoint: bool


Head = Callable[[ast.stmt], "tuple[Loop, list[ast.stmt]] | None"]


def split_mirror(nest: ast.For, head: Head, ndims: dict[str, int]) -> tuple[ast.For, Mirror | None]:
    """`nest` without its triangle's mirror store (removed in place) and the store, or `nest`
    and None when it has none that the module contract lets move. `head` reads a loop: its
    `Loop` and the body its index is read in."""
    top = head(nest)
    for t in top[1] if top is not None else []:
        inner = head(t) if isinstance(t, ast.For) else None
        if top is None or inner is None:
            continue
        dom = domain([top[0], inner[0]])
        i, j = top[0].var, inner[0].var
        if dom is None or dom.pair != (i, j):
            continue
        found = _mirror_at(inner[1], i, j, ndims)
        if found is None:
            continue
        name, stmts = found
        temps = [s.targets[0].id for s in stmts[:1] if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)]
        refs = [n for n in pyast.walk(nest) if isinstance(n, ast.Name) and n.id in temps]
        inside = {id(n) for s in stmts for n in pyast.walk(s)}
        subs = [n for n in pyast.walk(nest) if isinstance(n, ast.Subscript) and id(n) not in inside
                and isinstance(n.value, ast.Name) and n.value.id == name]
        in_t = {id(n) for n in pyast.walk(t)}
        diagonal = [n for n in subs if dom.strict and (_at(n, name, i, i) or _at(n, name, j, j))]
        if len(refs) != 2 * len(temps) or any((id(n) not in in_t or not _at(n, name, i, j)) and n not in diagonal
                                              for n in subs):
            continue
        for s in stmts:
            t.body.remove(s)
        return nest, Mirror(name, (top[0], inner[0]), len(stmts) == 3)
    return nest, None


def _at(n: ast.expr, name: str, i: str, j: str) -> bool:
    """Whether `n` is `name[i, j]`."""
    return (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name
            and isinstance(n.slice, ast.Tuple) and len(n.slice.elts) == 2
            and all(isinstance(e, ast.Name) and e.id == v for e, v in zip(n.slice.elts, (i, j))))


def _mirror_at(body: list[ast.stmt], i: str, j: str, ndims: dict[str, int]) -> tuple[str, list[ast.stmt]] | None:
    """The array and the statements of the mirror store at the end of the triangle loop's
    `body`, or of its adjoint where the first statements of `body` naming the array begin."""
    last = body[-1] if body else None
    if (isinstance(last, ast.Assign) and len(last.targets) == 1 and isinstance(last.value, ast.Subscript)
            and isinstance(last.value.value, ast.Name) and ndims.get(last.value.value.id) == 2):
        name = last.value.value.id
        if _at(last.targets[0], name, j, i) and _at(last.value, name, i, j):
            return name, [last]
    for k, s in enumerate(body[:-2]):
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                and isinstance(s.value, ast.Subscript) and isinstance(s.value.value, ast.Name)):
            continue
        name, t = s.value.value.id, s.targets[0].id
        zero, add = body[k + 1], body[k + 2]
        if (ndims.get(name) == 2 and _at(s.value, name, j, i)
                and isinstance(zero, ast.Assign) and len(zero.targets) == 1 and _at(zero.targets[0], name, j, i)
                and isinstance(zero.value, ast.Constant) and zero.value.value == 0
                and type(zero.value.value) is float
                and isinstance(add, ast.AugAssign) and isinstance(add.op, ast.Add) and _at(add.target, name, i, j)
                and isinstance(add.value, ast.Name) and add.value.id == t
                and not any(isinstance(n, ast.Name) and n.id in (name, t) for b in body[:k] for n in pyast.walk(b))):
            return name, [s, zero, add]
    return None
