"""Two masked adds into one triangle that together are a symmetric rank-2k update: one BLAS `?syr2k` call.

Contract. `rank2k_pairs(body)` takes the statements of a nest's rewritten branch after
`codegen/triangles.compiled_masks` wrote its masked updates as `_tri_ops` calls (the branches
of its `if`s too, each a list of its own) and replaces two calls

    _tri_ops.add(T[r0, r1], c1 * (U1 @ V1.T), m, lower)          (a)
    ...                                                          (statements M)
    _tri_ops.add(T[r0, r1], c2 * (U2 @ V2.T), m, lower)          (b)

(a coefficient may be absent: 1; a product `L @ R` is read as `U @ V.T`, `U` = `L`, `V` =
`R.T`, each of `A[s0, s1]` or `A[s0, s1].T`) by

    if not _rt.sym2_add(T, N, lower, strict, alpha, X, Y):
        (a)
        (b)

at the place of (a), where `T` is a name, the box `T[r0, r1]` and the mask `m` are those of
one triangle of the square `T[:N, :N]` (`codegen/triangles.py`'s table, `m` the temporary of
`_rt.tri_mask(s)` or that call itself, or its transpose for an upper one):

    T[1:N, :N - 1]  s = N - 1, lower   the strict lower triangle (strict)
    T[:N - 1, 1:N]  s = N - 1, upper   the strict upper triangle (strict)
    T[:N, :N]       s = N              the lower or upper triangle, diagonal included

and the products, their operands' rows widened to `:N` (the row axis of `U` takes `r0`, that
of `V` takes `r1`), are `U1 -> X, V1 -> Y, U2 -> Y, V2 -> X` with `c1` and `c2` products
of the same factors (their `*` chains compared as multisets of expressions that read no array)
`alpha` multiplies, after substitution:

- an operand `B[...]` (`.T`) whose array `B` is named last before (a), in the same list, by
  a fill `B[f0, f1] = k * S[f0, f1]` (or `= S[f0, f1]`: k 1; `k` reads no array, `S` another
  name), the operand's slices the fill's or, on its row axis, a triangle's rows `1:N`, `:N - 1`
  where the fill's are `:N` or `:`, is read as `S[...]` with the factor `k` added to its
  product's; no statement between the fill and (a) may write `B`, `S`, or a name the fill
  reads (`_writes`), and `B` is bound (in the list or around it) to no value that reads `S`,
  however indirectly (it may be a view of it).

Further: `T` is named by no statement of `M` (so (b) is the first statement after (a) to name
it), no statement of `M` writes a name (b) reads, `M` holds only assignments, expression
statements, `if`s and `for` loops (what the lowering writes), and `X`, `Y` read neither `T`
nor a name bound in the list (or in one around it): the arrays the nest's guard covers.

Proof. The fallback is (a) and (b) themselves; (b) runs before `M`, which changes nothing:
`M` does not read or write `T` (it does not name it, and the guard, `_rt.blas_ready`, proved
every array the nest writes apart from every other array it touches; the arrays the branch
makes are new memory), and `M` writes nothing (b) reads (`_writes`: the arrays it stores into
and the names it binds, closed over the names bound to what may be views), so (b) computes
the same values before `M` as after it, and `M` the same without (b) before it. `_rt.sym2_add`
runs BLAS only where `N` is an int with `T[:N, :N]`, `X` and `Y` of `N` rows (so the rows of
every operand's slice lie in `[0, N)`: no slice wraps around), `X` and `Y` of one shape (so a
fill did not broadcast: `B[r, j] = k * S[r, j]` for each element an operand read, and the
original products' shapes are these; the fill wrote `B`, which shares no memory with `S`:
an array the guard covers, which the nest writes, or one the branch made, `np.empty`'s, not a
view of `S`, so `S` is as it was when the fill read it) and otherwise `sym_add`'s conditions (a float dtype
alike, `alpha` finite and nonzero, `T` contiguous). There the sum of (a) and (b) over the
triangle is `alpha * (X @ Y.T + Y @ X.T)` restricted to it, the same products (`c1 * (k * x)
* y` as `(c1 * k) * (x * y)`: rounding only, for finite nonzero `c1 * k`, whose factors are
then finite and nonzero), summed in BLAS's order: the kernels backend's contract (the sign
of a zero sum may differ, as any reordered sum's). BLAS writes `T[:N, :N]`'s triangle and
diagonal only; a strict triangle's diagonal is put back as it was, bit for bit. Elsewhere
`_rt.sym2_add` writes nothing and returns False: the two statements run.

Why: symm's adjoint adds `(alpha * dC) @ B.T` and `alpha * (B @ dC.T)` to `dA`'s strict lower
triangle, with dB's update between them: two full products of which the triangle keeps half,
where one `dsyr2k` does half the multiplications (n=60: 79 us for the two products, 27 us
for the call, measured before this was written; the two masked adds 96 us, `_rt.sym2_add` 45 us,
medians of an in-process alternation on a loaded machine).
"""
from __future__ import annotations

import ast
from collections import Counter

from .. import pyast

_READS = {"np.isfinite", "np.where", "np.einsum", "_tri_ops.where", "_tri_ops.sym_where", "_rt.tri_dot",
          "_rt.tri_mask", "_rt.span", "_rt.fdiv", "_rt.dot_nt", "range"}  # calls that write nothing
_WRITE_FIRST = {"np.copyto", "_rt.sym_add", "_rt.sym_set", "_rt.sym2_add", "_rt.tri_dot_add",
                "_rt.diagonal_view"}  # and `_tri_ops.*`
_WRITE_TWO = {"_tri_ops.move", "_tri_ops.move_div", "_tri_ops.div_mirror"}
_UFUNCS = {"np.add", "np.subtract", "np.multiply", "np.divide"}
_KINDS = (ast.Assign, ast.AugAssign, ast.Expr, ast.If, ast.For, ast.Pass)


def rank2k_pairs(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` with each two masked adds that are one symmetric rank-2k update as one
    `_rt.sym2_add` call (module contract)."""
    return _pairs(body, {}, set())


def _pairs(body: list[ast.stmt], views: dict[str, set[str]], bound: set[str]) -> list[ast.stmt]:
    """`rank2k_pairs` of one list, given the bindings of the lists around it (`views`: each
    name bound -> the names its values read; `bound`: the names bound)."""
    views = _views(body, views)
    bound = bound | set(views)
    for st in body:
        if isinstance(st, ast.If):
            st.body = _pairs(st.body, views, bound)
            st.orelse = _pairs(st.orelse, views, bound)
    k = 0
    while k < len(body):
        got = _pair_at(body, k, views, bound)
        if got is not None:
            j, new = got
            new = ast.fix_missing_locations(ast.copy_location(new, body[k]))
            body = body[:k] + [new] + body[k + 1:j] + body[j + 1:]
        k += 1
    return body


def _views(body: list[ast.stmt], views: dict[str, set[str]]) -> dict[str, set[str]]:
    """`views` and the bindings of `body` (any depth): name -> every name its values read."""
    out = {k: set(v) for k, v in views.items()}
    for st in body:
        for n in pyast.walk(st):
            if isinstance(n, ast.Assign):
                pairs = [(t, n.value) for t in n.targets]
            elif isinstance(n, ast.For):
                pairs = [(n.target, n.iter)]
            else:
                continue
            for t, v in pairs:
                for name in _bound_by(t):
                    out.setdefault(name, set()).update(_names(v))
    return out


def _names(e: ast.AST) -> set[str]:
    return {n.id for n in pyast.walk(e) if isinstance(n, ast.Name)}


def _add(st: ast.stmt) -> tuple[ast.Subscript, ast.expr, ast.expr, bool] | None:
    """(target, value, mask, lower) of `_tri_ops.add(T[r0, r1], v, m, lower)`, `T` a name."""
    if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and not st.value.keywords
            and ast.unparse(st.value.func) == "_tri_ops.add" and len(st.value.args) == 4):
        return None
    t, v, m, lo = st.value.args
    if not (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and _slices(t) is not None
            and isinstance(lo, ast.Constant) and type(lo.value) is bool):
        return None
    return t, v, m, lo.value


def _slices(e: ast.Subscript) -> list[ast.Slice] | None:
    """The two plain slices (no step) of `A[s0, s1]`, or None."""
    s = e.slice
    if isinstance(s, ast.Tuple) and len(s.elts) == 2 and all(isinstance(x, ast.Slice) and x.step is None
                                                               for x in s.elts):
        return list(s.elts)  # type: ignore[arg-type]
    return None


def _pair_at(body: list[ast.stmt], a: int, views: dict[str, set[str]],
             bound: set[str]) -> tuple[int, ast.stmt] | None:
    """(the index of (b), the `if` replacing (a)) for (a) at `body[a]`, or None."""
    first = _add(body[a])
    if first is None:
        return None
    target, v1, m, lower = first
    t = target.value.id  # type: ignore[attr-defined]
    b = next((j for j in range(a + 1, len(body)) if t in _names(body[j])), None)
    second = _add(body[b]) if b is not None else None
    if t in bound or second is None or ast.dump(second[0]) != ast.dump(target) or ast.dump(second[2]) != ast.dump(m) \
            or second[3] != lower:
        return None
    assert b is not None
    written = _writes(body[a + 1:b], views)
    if written is None or written & _names(body[b]):
        return None
    form = _form(target, m, lower, body[:a])
    if form is None:
        return None
    n, strict = form
    r0, r1 = _slices(target)  # type: ignore[misc]
    for subst in (False, True):
        terms = [_term(v, r0, r1, n, body[:a] if subst else None, views) for v in (v1, second[1])]
        if terms[0] is None or terms[1] is None:
            continue
        (c1, x, y), (c2, y2, x2) = terms[0], terms[1]
        if (Counter(map(ast.dump, c1)) != Counter(map(ast.dump, c2)) or ast.dump(x) != ast.dump(x2)
                or ast.dump(y) != ast.dump(y2)):
            continue
        if {_root(x), _root(y)} & (bound | {t}):
            continue
        alpha = ast.Constant(1.0) if not c1 else c1[0]
        for c in c1[1:]:
            alpha = ast.BinOp(alpha, ast.Mult(), c)
        args = [ast.Name(t, ast.Load()), n, ast.Constant(lower), ast.Constant(strict), alpha, x, y]
        call = ast.Call(ast.parse("_rt.sym2_add", mode="eval").body, [pyast.clone(e) for e in args], [])
        test = ast.UnaryOp(ast.Not(), call)
        return b, ast.If(test=test, body=[body[a], body[b]], orelse=[])
    return None


def _root(e: ast.expr) -> str | None:
    while isinstance(e, (ast.Attribute, ast.Subscript)):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


def _form(target: ast.Subscript, m: ast.expr, lower: bool, before: list[ast.stmt]) -> tuple[ast.expr, bool] | None:
    """(N, strict) where the box `target` and the mask `m` are a triangle of `T[:N, :N]` (module
    contract's table), or None."""
    flip = isinstance(m, ast.Attribute) and m.attr == "T"
    base = m.value if flip else m  # type: ignore[attr-defined]
    if flip == lower:
        return None
    if isinstance(base, ast.Name):
        at = next((st for st in reversed(before) if base.id in _bound_by(st)), None)
        base = at.value if isinstance(at, ast.Assign) and len(at.targets) == 1 else None  # type: ignore[assignment]
    if not (isinstance(base, ast.Call) and ast.unparse(base.func) == "_rt.tri_mask" and len(base.args) == 1
            and not base.keywords):
        return None
    side = base.args[0]
    r0, r1 = _slices(target)  # type: ignore[misc]
    for s in (r0, r1):
        if s.upper is None:
            return None
    if r0.lower is None and r1.lower is None and ast.dump(r0.upper) == ast.dump(r1.upper) == ast.dump(side):
        return r0.upper, False  # type: ignore[return-value]
    rows, cols = (r0, r1) if lower else (r1, r0)  # `1:N`, `:N - 1`
    n = rows.upper
    less = ast.dump(ast.BinOp(n, ast.Sub(), ast.Constant(1)))  # type: ignore[arg-type]
    if (isinstance(rows.lower, ast.Constant) and type(rows.lower.value) is int and rows.lower.value == 1
            and cols.lower is None and ast.dump(cols.upper) == less and ast.dump(side) == less):  # type: ignore
        return n, True  # type: ignore[return-value]
    return None


def _bound_by(st: ast.AST) -> set[str]:
    return {n.id for n in pyast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _term(v: ast.expr, r0: ast.Slice, r1: ast.Slice, n: ast.expr, before: list[ast.stmt] | None,
          views: dict[str, set[str]]) -> tuple[list[ast.expr], ast.expr, ast.expr] | None:
    """(the coefficient's factors, `U`, `V`) of `c * (U @ V.T)`, the operands' rows `r0` and
    `r1` widened to `:n`, buffers substituted where `before` is given (the statements before
    (a)); None where `v` is no such product."""
    coef: list[ast.expr] = []
    if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Mult) and not _reads_array(v.left):
        coef, v = _factors(v.left), v.right
    if not (isinstance(v, ast.BinOp) and isinstance(v.op, ast.MatMult)):
        return None
    out = []
    for e, rows, right in ((v.left, r0, False), (v.right, r1, True)):
        op = _operand(e, right)
        if op is None:
            return None
        name, sl, trans = op
        if ast.dump(sl[trans]) != ast.dump(rows):
            return None
        if before is not None:
            got = _substituted(name, sl, trans, before, n, views)
            if got is not None:
                name, k = got
                coef += k
        sl = [pyast.clone(s) for s in sl]
        sl[trans] = ast.Slice(None, pyast.clone(n), None)
        ref: ast.expr = ast.Subscript(ast.Name(name, ast.Load()), ast.Tuple(sl, ast.Load()), ast.Load())
        out.append(ast.Attribute(ref, "T", ast.Load()) if trans else ref)
    return coef, out[0], out[1]


def _operand(e: ast.expr, right: bool) -> tuple[str, list[ast.Slice], int] | None:
    """(array, slices, its row axis) of a product's operand `A[s0, s1]` or `A[s0, s1].T`, read
    as `U` (the left one) or `V` of `U @ V.T` (the right one, `right`)."""
    trans = isinstance(e, ast.Attribute) and e.attr == "T"
    e = e.value if trans else e  # type: ignore[attr-defined]
    if not (isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name)):
        return None
    sl = _slices(e)
    return None if sl is None else (e.value.id, sl, int(trans != right))


def _substituted(name: str, sl: list[ast.Slice], axis: int, before: list[ast.stmt], n: ast.expr,
                 views: dict[str, set[str]]) -> tuple[str, list[ast.expr]] | None:
    """(S, [k] or []) where the operand `name[sl]` (rows on `axis`) reads a buffer filled as
    `name[f] = k * S[f]` over what it reads (module contract), or None."""
    f = next((j for j in range(len(before) - 1, -1, -1) if name in _names(before[j])), None)
    if f is None:
        return None
    fill = before[f]
    if not (isinstance(fill, ast.Assign) and len(fill.targets) == 1 and isinstance(fill.targets[0], ast.Subscript)
            and isinstance(fill.targets[0].value, ast.Name) and fill.targets[0].value.id == name):
        return None
    fs = _slices(fill.targets[0])
    k, src = (fill.value.left, fill.value.right) if (isinstance(fill.value, ast.BinOp)
                                                   and isinstance(fill.value.op, ast.Mult)) else (None, fill.value)
    if (fs is None or k is not None and _reads_array(k) or not isinstance(src, ast.Subscript)
            or not isinstance(src.value, ast.Name) or src.value.id == name
            or ast.dump(src.slice) != ast.dump(fill.targets[0].slice)):
        return None
    for d in (0, 1):
        if ast.dump(sl[d]) == ast.dump(fs[d]):
            continue
        whole = fs[d].lower is None and (fs[d].upper is None or ast.dump(fs[d].upper) == ast.dump(n))
        if d != axis or not whole:
            return None
    written = _writes(before[f + 1:], views)
    if written is None or written & ({name, src.value.id} | _names(fill.value) | _names(fill.targets[0])):
        return None
    seen, todo = {name}, [name]  # `B` bound to a value reading `S` may be a view of it
    while todo:
        for x in views.get(todo.pop(), ()):
            if x not in seen:
                seen.add(x)
                todo.append(x)
    if src.value.id in seen:
        return None
    return src.value.id, ([] if k is None else _factors(k))


def _factors(e: ast.expr) -> list[ast.expr]:
    """The factors of a product `a * b * ...` (`e` itself where it is none)."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
        return _factors(e.left) + _factors(e.right)
    return [e]


def _reads_array(e: ast.expr) -> bool:
    """Whether `e` may read an array (a subscript, an attribute, a call other than `_rt.fdiv`)."""
    return any(isinstance(x, (ast.Subscript, ast.Attribute)) or isinstance(x, ast.Call)
               and ast.unparse(x.func) != "_rt.fdiv" for x in pyast.walk(e))


def _writes(stmts: list[ast.stmt], views: dict[str, set[str]]) -> set[str] | None:
    """The names `stmts` may write: the names they bind, and the arrays they write through:
    those they store into (by the name the store's target is rooted at, or every name of a
    target rooted elsewhere), the operands the lowering's calls write (`out=`, `np.copyto`'s
    and `_tri_ops`' first, ...), every name under any other call, and then, again and again,
    every name read by a value such a name was bound to (`views`: it may be a view of them).
    None where a statement is of a kind the lowering does not write (`_KINDS`)."""
    bound: set[str] = set()
    out: set[str] = set()  # written through (stores, calls)
    for st in stmts:
        for n in pyast.walk(st):
            if isinstance(n, ast.stmt) and not isinstance(n, _KINDS):
                return None
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                bound.add(n.id)
            elif isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, ast.Store):
                out |= _rooted(n)
            elif isinstance(n, ast.Call):
                out |= _call_writes(n)
    todo = list(out)
    while todo:
        for name in views.get(todo.pop(), ()):
            if name not in out:
                out.add(name)
                todo.append(name)
    return out | bound


def _rooted(e: ast.expr) -> set[str]:
    """The name `A` of `A[...]`, `A[...].T`, `A`; every name of `e` where it is rooted elsewhere."""
    x = e
    while isinstance(x, (ast.Attribute, ast.Subscript)):
        x = x.value
    return {x.id} if isinstance(x, ast.Name) else _names(e)


def _call_writes(n: ast.Call) -> set[str]:
    func = ast.unparse(n.func)
    kws = {k.arg for k in n.keywords}
    if func in _READS and not kws:
        return set()
    if (isinstance(n.func, ast.Attribute) and n.func.attr == "all" and not n.args and not kws
            and isinstance(n.func.value, ast.Call) and ast.unparse(n.func.value.func) == "np.isfinite"):
        return set()  # `np.isfinite(X).all()` of the lowering's checks
    if func in _UFUNCS and len(n.args) == 2 and "out" in kws and kws <= {"out", "where"}:
        return {x for k in n.keywords if k.arg == "out" for x in _rooted(k.value)}
    if (func in _WRITE_FIRST or func.startswith("_tri_ops.")) and n.args and not kws:
        return {x for a in n.args[:2 if func in _WRITE_TWO else 1] for x in _rooted(a)}
    if func == "np.copyto" and n.args and kws <= {"where"}:
        return _rooted(n.args[0])
    return _names(n)
