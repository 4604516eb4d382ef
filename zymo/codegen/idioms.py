"""Loop nests that compute matrix products, run as NumPy (BLAS) calls: the "kernels" backend.

Contract: `blas_nests(src, ndims, numbers)` returns the generated program `src` in which each
`for` loop nest at the top level of a function (or of an `if` there) that sums products is
replaced by

    if _rt.blas_ready(written, read, bounds):
        <the nest as NumPy statements (and the loops of it that stay loops)>
    else:
        <the nest as it was>

(`ndims`: the names that hold arrays, with their dimensions; `numbers`: the names that hold
only numbers). A nest is rewritten when all of this holds, else it is left as it is:
- its loops run over `range(N)` or `range(0, N)`, `N` an int or a name the nest does not
  write, forward or reversed (`for _r in range(N): i = N - 1 - _r`, `_r` read nowhere else),
  or, at most one per perfect nest, over a triangle with an enclosing loop's index (`range(i
  + 1)`, `range(i)`, `range(i, N)`, `range(i + 1, N)`, reversed `range(_rt.span(i, N))`,
  bounds named by a temporary `t = i + 1` inlined first): `codegen/triangles.py`, whose
  contract says how such a piece becomes masked updates and products over masked operands;
- its statements are assignments and augmented assignments of numbers and array elements
  (no calls but `_rt.fdiv(a, b)`, no other statements), every array used through full
  subscripts of it;
- a triangle's mirror store (`X[j, i] = X[i, j]`) or its adjoint, where `codegen/triangles.py`
  proves it may, leaves the nest first: masked NumPy statements after (before) the rest;
- it splits into perfect nests (loop distribution): at each loop whose body holds several
  statement runs and inner loops, every array that two of the resulting pieces touch, one of
  them writing it, is subscripted by that loop's index at one position in all their accesses
  (two iterations touch different elements), or each such pair of accesses is kept apart by a
  triangle on that loop's index in the order distribution runs them (`_ordered`: trmm's
  `B[i, j] += A[k, i] * B[k, j]` over `k > i`, then `B[i, j] *= alpha`), and no piece reads or
  writes a scalar another writes;
- at least one piece is an idiom: after forward substitution of its scalar temporaries its
  statements are accumulations `X[o] += <sum of products>` (also `X[o] = X[o] + ...`,
  `-=`), scalings `X[o] *= s`, divisions `X[o] /= s` (also `X[o] = X[o] / s`,
  `X[o] = _rt.fdiv(X[o], s)`: IEEE division, as `np.divide`'s), maps `X[o] = <sum of products>` (writing each element
  once), or reverse mode's round trips `t = X[o]; X[o] = 0.0; X[o] += e` (read as
  `X[o] = e`, dropped when `e` is `t`); an array it writes is read in it only by its own
  accumulations, or at rows that a triangle on the outermost loop's index reads in earlier
  iterations than the one writing them (`_read_first`; its statements then run those reading
  an array before those writing it); each product's factors are numbers of `numbers` and array elements
  subscripted by distinct loop indices, with an index summed over exactly two factors of at
  most two dimensions (`@`, BLAS), over one factor (`.sum`), or none (broadcasting);
- or, where that distribution is not proved (a scalar passed between pieces, a piece that
  must run before one written above it), `codegen/schedule.py` cuts the nest into one piece
  per array update, scalars passed between its runs held in new float64 arrays (allocated in
  the rewritten branch; the guard then requires every array the nest touches to be float64),
  and orders the pieces by their dependences: a gemm written with a scalar accumulator
  (`acc = 0.0; for k: acc += A[i, k] * B[k, j]; C[i, j] = beta * C[i, j] + alpha * acc`),
  symm;
- a map may read the element it writes where each iteration of its piece reaches its own
  element (`C[i, j] = beta * C[i, j] + ...`), and no other statement of the piece writes the
  array; an element may be a diagonal one, `A[i, i]` (a factor: the box's `.diagonal()`; a
  target: `_rt.diagonal_view`); a product none of `@`, `.sum` or broadcasting writes
  (`B[i, j] * C[i, j]` summed over `j`) is one `np.einsum`;
- no name the nest writes (temporaries, loop indices) is read after it;
- some piece holds a matrix-matrix product (O(n^3) work on O(n^2) data): matrix-vector
  products and rank-1 updates alone stay loops, which the kernels run faster than the NumPy
  statements and their run-time check (measured on PolyBench's mvt, gemver, bicg at n=120);
  inside a nest with a matrix product they are NumPy statements too.
Two accumulations of products into one target that share a factor become one (`X += A @ B;
X += A @ C` -> `X += A @ (B + C)`: a symmetric matrix's adjoint), also under one number
coefficient, which the guard then checks finite and nonzero, and past statements they commute
with (`_merge_products`); a product
whose result is read transposed is written as the transposed product (`g.T @ f.T`, not `(f @
g).T`); a product of a masked operand that nothing but such products reads as BLAS's
triangular product (`_rt.tri_dot`, `_triangular_products`); two masked adds into one triangle
that are one symmetric rank-2k update as one `?syr2k` (`codegen/rank2k.py`). The pieces that
are not idioms stay loops, in order, inside the `if` (the outliner makes them kernels).
`_rt.blas_ready` checks at run time what the source cannot prove: every array the nest
touches is a float32/float64 `ndarray`, no array it writes shares memory with another it
touches, every loop bound is an int from 0 to the length of each axis it runs
over (a triangle's box: its start and stop within the axis); the guard also requires the
operands that meet a triangle's masked zeros to be finite (those of an array the nest writes
where the piece starts: `if np.isfinite(...).all(): <its statements> else: <its loops>`), and an upper triangle under a
shorter loop to be whole (`Domain.requires`). Else the loops run as before. The
NumPy statements compute the same sums in another order: results differ by rounding only (a
-0.0 of a dropped round trip stays -0.0; elements outside a triangle are not written), and,
as any reordered sum, where a partial sum passes the largest float: one order may overflow
where the other does not.
Distribution stays legal with triangles: its proof is per iteration of the split loop, whose
inner bounds depend only on indices the nest does not write.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .. import pyast
from .outline import _exposed, _loads, _stores
from .schedule import scheduled
from .triangles import Mirror, compiled_masks, domain, inline_bounds, masked, share_masks, split_mirror

# the nodes a statement of a rewritten nest may hold (besides operators and contexts)
_ALLOWED = (ast.Assign, ast.AugAssign, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Subscript, ast.Tuple,
            ast.operator, ast.unaryop, ast.expr_context)


def blas_nests(src: str, ndims: dict[str, int], numbers: frozenset[str]) -> str:
    """`src` with its matrix-product loop nests as NumPy calls (module contract)."""
    tree = ast.parse(src)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n" if blas_tree(tree, ndims, numbers) else src


def blas_tree(tree: ast.Module, ndims: dict[str, int], numbers: frozenset[str]) -> bool:
    """`blas_nests` on the program's tree (`codegen/tree.py`), in place; whether it changed."""
    changed = False
    taken = {n.id for n in pyast.walk(tree) if isinstance(n, ast.Name)} | {a.arg for a in pyast.walk(tree)
                                                                         if isinstance(a, ast.arg)}
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            changed |= _Rewriter(ndims, numbers, taken).block(fn.body, [])
    return changed


@dataclass(frozen=True)
class _Loop:
    var: str  # the index the body reads
    bound: ast.expr  # N of range(N) or range(lo, N)
    counter: str | None = None  # `_r` of a reversed loop
    lo: ast.expr | None = None  # lo of range(lo, N): None for 0


@dataclass
class _Piece:
    """A perfect nest: `loops` (outermost first) around the simple statements `body`."""
    loops: list[_Loop]
    body: list[ast.stmt]


@dataclass
class _Term:
    """One product of a sum: sign, number factors (with `*` or `/`) and array elements."""
    neg: bool = False
    coef: list[tuple[str, ast.expr]] = field(default_factory=list)
    factors: list[ast.Subscript] = field(default_factory=list)


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _is_int(e: ast.expr, value: int | None = None) -> bool:
    return (isinstance(e, ast.Constant) and type(e.value) is int
            and (value is None or e.value == value))


def _head(s: ast.stmt) -> tuple[_Loop, list[ast.stmt]] | None:
    """The loop `s` (a `for` over a range by 1, forward or reversed) and its body."""
    if not isinstance(s, ast.For) or s.orelse or not isinstance(s.target, ast.Name) or not s.body:
        return None
    it = s.iter
    if not (_call(it, "range") and not it.keywords):  # type: ignore[attr-defined]
        return None
    args = it.args[1:] if len(it.args) == 2 and _is_int(it.args[0], 0) else it.args  # type: ignore[attr-defined]
    if len(args) not in (1, 2):
        return None
    span = len(args) == 1 and _call(args[0], "_rt.span") and len(args[0].args) == 2  # type: ignore[attr-defined]
    lo, bound = args[0].args if span else (None, *args) if len(args) == 1 else args  # type: ignore[attr-defined]
    if any(isinstance(n, ast.Call) for e in (lo, bound) if e is not None for n in pyast.walk(e)):
        return None
    t, body = s.target.id, s.body
    first = body[0]
    rev = ast.BinOp(ast.BinOp(bound, ast.Sub(), ast.Constant(1)), ast.Sub(), ast.Name(t, ast.Load()))
    if (isinstance(first, ast.Assign) and len(first.targets) == 1 and isinstance(first.targets[0], ast.Name)
            and _same(first.value, rev)):
        return _Loop(first.targets[0].id, bound, t, lo), body[1:]
    return None if span else (_Loop(t, bound, None, lo), body)


def _call(e: ast.expr, name: str) -> bool:
    return isinstance(e, ast.Call) and ast.unparse(e.func) == name


def _simple(s: ast.stmt) -> bool:
    """An assignment of the contract's kind; its only calls `_rt.fdiv(a, b)`."""
    if isinstance(s, ast.Assign):
        if len(s.targets) != 1:
            return False
        target = s.targets[0]
    elif isinstance(s, ast.AugAssign):
        target = s.target
    else:
        return False
    calls = [n for n in pyast.walk(s) if isinstance(n, ast.Call)]
    if not all(_call(c, "_rt.fdiv") and len(c.args) == 2 and not c.keywords for c in calls):
        return False
    funcs = {id(c.func) for c in calls}
    return isinstance(target, (ast.Name, ast.Subscript)) and all(
        isinstance(n, (*_ALLOWED, ast.Call)) or id(n) in funcs for n in pyast.walk(s))


def _pieces(s: ast.stmt, outer: list[_Loop]) -> list[_Piece] | None:
    """The perfect nests the loop `s` (inside the loops `outer`) distributes into, in order, or
    None when the loops are not of the contract's kind or distribution is not proved."""
    head = _head(s)
    if head is None or not head[1]:
        return None
    loop, body = head
    loops = [*outer, loop]
    out: list[_Piece] = []
    run: list[ast.stmt] = []
    for t in body:
        if isinstance(t, ast.For):
            inner = _pieces(t, loops)
            if inner is None:
                return None
            out += [_Piece(loops, run)] if run else []
            out += inner
            run = []
        elif _simple(t):
            run.append(t)
        else:
            return None
    out += [_Piece(loops, run)] if run else []
    return out if len(out) == 1 or _distributable(loop.var, out) else None


def _arrays(stmts: list[ast.stmt]) -> tuple[list[ast.Subscript], set[str]]:
    """The subscripts of the statements and the names of the arrays they write."""
    subs = [n for s in stmts for n in pyast.walk(s) if isinstance(n, ast.Subscript)]
    written = {n.value.id for n in subs if isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name)}
    return subs, written


def _distributable(var: str, pieces: list[_Piece]) -> bool:
    """Whether running each piece's iterations of the loop over `var` in turn keeps the order
    of every read and write of each element and scalar (module contract)."""
    stores = [_stores(ast.Module(p.body, [])) for p in pieces]
    uses = [_loads(ast.Module(p.body, [])) | st for p, st in zip(pieces, stores)]
    for a, st in enumerate(stores):
        if any(st & uses[b] for b in range(len(pieces)) if b != a):
            return False
    touched: dict[str, list[int]] = {}
    written: set[str] = set()
    for k, p in enumerate(pieces):
        subs, w = _arrays(p.body)
        written |= w
        for n in subs:
            if not isinstance(n.value, ast.Name):
                return False  # `X[i][j]`: not of the contract's form
            touched.setdefault(n.value.id, []).append(k)
    for name, ks in touched.items():
        if name not in written or len(set(ks)) < 2:
            continue
        positions: set[int] | None = None
        for p in pieces:
            for n in _arrays(p.body)[0]:
                if n.value.id == name:  # type: ignore[attr-defined]
                    parts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
                    at = {d for d, e in enumerate(parts) if isinstance(e, ast.Name) and e.id == var}
                    positions = at if positions is None else positions & at
        if not positions and not _ordered(var, name, pieces):
            return False
    return True


# The rows an access reaches in an iteration `v` of a loop, as the loop runs (`_kind`): `v`
# itself, or those of a triangle's index run before it ("lt", "le": diagonal included) or after
# it ("gt", "ge").
_EARLY = ("eq", "lt", "le")  # an access of a later piece in an earlier iteration reaches no ...
_LATE = ("eq", "gt", "ge")  # ... row an access of an earlier piece reaches in a later one
# (write, read) kinds whose every read of a row runs in an earlier iteration than every write of it
_READ_FIRST = {("eq", "gt"), ("lt", "eq"), ("lt", "gt"), ("lt", "ge"), ("le", "gt")}


def _kind(index: ast.expr, var: str, loops: list[_Loop]) -> str | None:
    """How the index `index` of an access inside the perfect nest `loops` relates to the index
    `var` of one of them: "eq" (it is `var`), or, where it is the index `j` of a triangle on
    (`var`, `j`) (`codegen/triangles.py`), whether `j`'s values are those of iterations of the
    loop over `var` run before ("lt", "le") or after ("gt", "ge") the current one (a reversed
    loop runs the larger values first); None otherwise."""
    if not isinstance(index, ast.Name):
        return None
    if index.id == var:
        return "eq"
    dom = domain(loops)  # type: ignore[arg-type]
    if dom is None or dom.pair != (var, index.id):
        return None
    below = dom.lower
    if next(lp for lp in loops if lp.var == var).counter is not None:
        below = not below
    return ("lt" if dom.strict else "le") if below else ("gt" if dom.strict else "ge")


def _parts(n: ast.Subscript) -> list[ast.expr]:
    return n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]


def _ordered(var: str, name: str, pieces: list[_Piece]) -> bool:
    """Whether distributing the loop over `var` keeps the order of every two accesses to the
    array `name`, one of them a write, of two pieces: those of a later piece in an iteration
    `v1` of the loop and of an earlier piece in a later iteration `v2` (the pairs distribution
    reorders) reach different rows at some position, the later piece's in rows `v1` or before
    it, the earlier piece's in rows `v2` or after it (`_EARLY`, `_LATE`): trmm's `B[i, j] +=
    A[k, i] * B[k, j]` over `k > i`, then `B[i, j] *= alpha`."""
    acc = [(k, n) for k, p in enumerate(pieces) for n in _arrays(p.body)[0]
           if n.value.id == name]  # type: ignore[attr-defined]
    for a, xa in acc:
        for b, xb in acc:
            if a >= b or not (isinstance(xa.ctx, ast.Store) or isinstance(xb.ctx, ast.Store)):
                continue
            if not any(_kind(ea, var, pieces[a].loops) in _LATE and _kind(eb, var, pieces[b].loops) in _EARLY
                       for ea, eb in zip(_parts(xa), _parts(xb))):
                return False
    return True


class _Rewriter:
    """Rewrites the nests of one generated function (module contract)."""

    def __init__(self, ndims: dict[str, int], numbers: frozenset[str], taken: set[str]):
        self.ndims = ndims
        self.numbers = numbers
        self.taken = taken  # the names of the program and the temporaries made so far

    def fresh(self, base: str) -> str:
        """A name no other in the program has."""
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def block(self, stmts: list[ast.stmt], after: list[list[ast.stmt]]) -> bool:
        changed = False
        for k, s in enumerate(stmts):
            rest = [stmts[k + 1:], *after]
            if isinstance(s, ast.If):
                changed |= self.block(s.body, rest)
                changed |= self.block(s.orelse, rest)
            elif isinstance(s, ast.For):
                new = self._nest(s, rest)
                if new is not None:
                    stmts[k] = new
                    changed = True
        return changed

    def _nest(self, s: ast.For, rest: list[list[ast.stmt]]) -> ast.stmt | None:
        """The `if` replacing the nest `s`, or None when it stays as it is."""
        nest, mirror = split_mirror(inline_bounds(s), _head, self.ndims)  # type: ignore[arg-type]
        pieces = _pieces(nest, [])
        made: dict[str, tuple[str, ...]] = {}  # arrays of expanded scalars (`codegen/schedule.py`)
        if pieces is None or not self._checked(s, pieces, rest):
            plan = scheduled(nest, self.fresh)
            if plan is None or not self._checked(s, plan.pieces, rest, plan.arrays):
                return None
            pieces, made = plan.pieces, plan.arrays
        stored = _stores(s)
        subs, written = _arrays([s])
        ndims = {**self.ndims, **{a: len(b) for a, b in made.items()}}
        bounds: dict[str, tuple[str, ...]] = {}
        before, after = self._mirror(mirror, bounds) if mirror is not None else ([], [])
        finite: list[str] = []  # operands whose elements meet a triangle's zeros
        requires = list(domain(list(mirror.loops)).requires) if mirror is not None else []  # type: ignore
        body: list[ast.stmt] = ast.parse("\n".join(before)).body
        products = 0  # matrix-matrix products lowered: a nest without one stays loops (module contract)
        for p in pieces:
            low = _Lowering(p, ndims, self.numbers, stored, written | set(made))
            lines = low.run(bounds)
            if lines is None:
                body.append(_build(p))
                continue
            if low.finite_here:  # the values the piece reads, where it reads them; else its loops
                test = " and ".join(f"np.isfinite({f}).all()" for f in _covering(list(dict.fromkeys(low.finite_here))))
                body.append(ast.If(test=ast.parse(test, mode="eval").body, body=ast.parse("\n".join(lines)).body,
                                   orelse=[_build(p)]))
            else:
                body += ast.parse("\n".join(lines)).body
            products += low.products
            finite += low.finite
            requires += [f"np.isfinite({c})" for c in low.coefs]
            requires += low.dom.requires
        if not products:
            return None
        scales: list[str] = []  # the coefficients products merged under: checked finite and nonzero
        read_only = {n.value.id for n in subs} - written  # type: ignore[attr-defined]
        body = _merge_products(share_masks(body + ast.parse("\n".join(after)).body, self.fresh), self.numbers,
                               scales, read_only, finite)
        body = compiled_masks(_in_place_products(_triangular_products(body)))
        requires += [f"np.isfinite({c}) and {c} != 0" for c in scales]
        touched = list(dict.fromkeys(n.value.id for n in subs))  # type: ignore[attr-defined]
        read = [n for n in touched if n not in written]
        wr = [n for n in touched if n in written]
        if made:  # scalars held as float64 elements: where the arrays are float64, so are they
            requires += [f"{a}.dtype == np.float64" for a in touched]
            body = [ast.parse(f"{a} = np.empty(({''.join(f'_rt.span(0, {n}), ' for n in b)}), np.float64)").body[0]
                    for a, b in made.items()] + body
        guard = (f"_rt.blas_ready({_tuple(wr)}, {_tuple(read)}, "
                 f"{_tuple(['(' + ', '.join(b) + ')' for b in bounds.values() if b[0] not in made])})"
                 + "".join(f" and {c}" for c in dict.fromkeys(requires))
                 + "".join(f" and np.isfinite({f}).all()" for f in _covering(list(dict.fromkeys(finite)))))
        return ast.If(test=ast.parse(guard, mode="eval").body, body=body, orelse=[s])

    def _mirror(self, m: Mirror, bounds: dict[str, tuple[str, ...]]) -> tuple[list[str], list[str]]:
        """The mirror store as NumPy statements: those before the nest and those after it
        (`codegen/triangles.py`)."""
        low = _Lowering(_Piece(list(m.loops), []), self.ndims, self.numbers, set(), set())  # type: ignore[arg-type]
        i, j = (lp.var for lp in m.loops)
        own = low._slice(ast.parse(f"{m.array}[{i}, {j}]", mode="eval").body, bounds)  # type: ignore[arg-type]
        other = low._slice(ast.parse(f"{m.array}[{j}, {i}]", mode="eval").body, bounds) + ".T"  # type: ignore
        mask = low.dom.mask()
        if not m.adjoint:
            return [], [masked("map", other, own, mask)]
        w = self.fresh("_mirror")
        return [f"{w} = {other}.copy()", masked("map", other, "0.0", mask), masked("acc", own, w, mask)], []

    def _checked(self, s: ast.For, pieces: list[_Piece], rest: list[list[ast.stmt]],
                 made: dict[str, tuple[str, ...]] | None = None) -> bool:
        """The contract's conditions on the whole nest: arrays used only through full
        subscripts, loop bounds and counters untouched, no name it writes read after it
        (`made`: arrays of expanded scalars the pieces use besides)."""
        through = set()
        for n in pyast.walk(s):
            if isinstance(n, ast.Subscript):
                if not isinstance(n.value, ast.Name) or n.value.id not in self.ndims:
                    return False
                parts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
                if len(parts) != self.ndims[n.value.id] or any(isinstance(e, ast.Slice) for e in parts):
                    return False
                through.add(id(n.value))
        if any(isinstance(n, ast.Name) and n.id in self.ndims and id(n) not in through for n in pyast.walk(s)):
            return False
        body_stores = set().union(*(_stores(ast.Module(p.body, [])) for p in pieces))
        body_loads = set().union(*(_loads(ast.Module(p.body, [])) for p in pieces)) - set(made or ())
        loops = {lp for p in pieces for lp in p.loops}
        for lp in loops:
            if lp.var in body_stores or lp.counter in body_stores | body_loads:
                return False
            if (_loads(lp.bound) | (_loads(lp.lo) if lp.lo is not None else set())) & body_stores:
                return False
        if any(domain(p.loops) is None for p in pieces):  # type: ignore[arg-type]
            return False
        later: set[str] = set()
        seen: set[str] = set()
        for stmts in rest:
            e, seen = _exposed(stmts, seen)
            later |= e
        return not (_stores(s) & later)


def _tuple(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _build(p: _Piece) -> ast.stmt:
    """The piece as a loop nest again."""
    body: list[ast.stmt] = pyast.clone(p.body)
    for lp in reversed(p.loops):
        target = lp.var
        stop = ast.unparse(lp.bound)
        span = stop if lp.lo is None else f"{ast.unparse(lp.lo)}, {stop}"
        if lp.counter is not None:
            rev = ast.parse(f"{lp.var} = {stop} - 1 - {lp.counter}").body[0]
            body = [rev, *body]
            target = lp.counter
            span = stop if lp.lo is None else f"_rt.span({span})"
        body = [ast.For(target=ast.Name(target, ast.Store()), iter=ast.parse(f"range({span})", mode="eval").body,
                        body=body, orelse=[], type_comment=None)]
    return body[0]


class _Lowering:
    """One piece as NumPy statements, if it is an idiom (module contract)."""

    def __init__(self, p: _Piece, ndims: dict[str, int], numbers: frozenset[str], stored: set[str],
                 written: set[str]):
        self.p = p
        self.ndims = ndims
        self.numbers = numbers
        self.stored = stored  # names the whole nest writes
        self.written = written  # arrays the whole nest writes
        self.vars = [lp.var for lp in p.loops]
        dom = domain(p.loops)  # type: ignore[arg-type]
        assert dom is not None  # checked for the nest (`_Rewriter._checked`)
        self.dom = dom
        self.products = 0  # the matrix-matrix products lowered
        self.coefs: list[str] = []  # coefficients taken out of sums: the guard checks them finite
        self.finite: list[str] = []  # operands the guard must find finite (`codegen/triangles.py`)
        self.finite_here: list[str] = []  # the same, of arrays the nest writes: checked at the piece

    def run(self, bounds: dict[str, tuple[str, ...]]) -> list[str] | None:
        """The statements (recording the slices they take in `bounds`), or None."""
        effects = self._effects()
        if effects is None:
            return None
        written = {t.value.id for _, t, _ in effects}  # type: ignore[attr-defined]
        kinds: dict[str, set[str]] = {}
        for kind, t, e in effects:
            name = t.value.id  # type: ignore[attr-defined]
            kinds.setdefault(name, set()).add(kind)
            for n in pyast.walk(e):
                if isinstance(n, ast.Subscript) and n.value.id in written and not all(  # type: ignore[attr-defined]
                        self._read_first(n, w) for _, w, _ in effects if w.value.id == n.value.id) \
                        and not self._own(n, t, effects):  # type: ignore
                    return None  # reads an element of an array the piece writes, not before every write of it
        if any(k != {"acc"} and sum(name == t.value.id for _, t, _ in effects) > 1  # type: ignore[attr-defined]
               for name, k in kinds.items()):
            return None
        effects = _reads_first(effects)
        if effects is None:
            return None
        lines: list[str] = []
        mine: dict[str, tuple[str, ...]] = {}
        for kind, t, e in effects:
            line = self._statement(kind, t, e, mine)
            if line is None:
                return None
            lines.append(line)
        bounds.update(mine)
        return lines

    def _read_first(self, read: ast.Subscript, write: ast.Subscript) -> bool:
        """Whether every element `read` reaches is read in an earlier iteration of the nest's
        outermost loop than any that `write` writes it: at some position, the triangle on that
        loop's index orders them (`_READ_FIRST`: trmm's `B[i, j] += A[k, i] * B[k, j]` reads
        row `k > i` before the iteration `i = k` writes it). The piece's NumPy statements then
        read the values the loops read: a statement computes its value before it writes, and
        the statements reading an array run before those writing it (`_reads_first`)."""
        loops, var = self.p.loops, self.vars[0]
        return any((_kind(w, var, loops), _kind(r, var, loops)) in _READ_FIRST
                   for w, r in zip(_parts(write), _parts(read)))

    def _own(self, read: ast.Subscript, t: ast.Subscript, effects: list[tuple[str, ast.Subscript, ast.expr]]) -> bool:
        """Whether `read` is the element its effect writes, `t`, which each iteration of the
        piece reaches once (its indices are all the piece's), and no other effect writes the
        array: the NumPy statement computes its value from the elements before it writes
        them, as each iteration does (`C[i, j] = beta * C[i, j] + ...`)."""
        return (_same(read.value, t.value) and _same(read.slice, t.slice)
                and sorted(self._labels(t)) == sorted(self.vars) and len(self._labels(t)) == len(_parts(t))
                and sum(_same(w.value, t.value) for _, w, _ in effects) == 1)

    def _effects(self) -> list[tuple[str, ast.Subscript, ast.expr]] | None:
        """The piece's writes after forward substitution: (kind, element, value), kinds
        "acc" (`+=` value), "scale" (`*=` value) and "map" (`=` value), an assignment read as
        an accumulation or a scaling of the element where it is one, and dropped where it
        assigns the element its own value."""
        env: dict[str, ast.expr] = {}
        out: list[tuple[str, ast.Subscript, ast.expr]] = []
        trips = _round_trips(self.p.body)
        for k, s in enumerate(self.p.body):
            if k in trips:
                continue
            target = s.targets[0] if isinstance(s, ast.Assign) else s.target  # type: ignore[attr-defined]
            value = _subst(s.value, env)  # type: ignore[attr-defined]
            if isinstance(target, ast.Name):
                if isinstance(s, ast.AugAssign):
                    return None
                env[target.id] = value
            elif not isinstance(target, ast.Subscript) or not self._element(target):
                return None
            elif k in trips.values():  # `X[o] = 0.0; ...; X[o] += value`
                out.append(("set", target, value))
            elif isinstance(s, ast.AugAssign):
                kinds = {ast.Add: "acc", ast.Sub: "acc", ast.Mult: "scale", ast.Div: "div"}
                if type(s.op) not in kinds:
                    return None
                out.append((kinds[type(s.op)], target,
                            ast.UnaryOp(ast.USub(), value) if isinstance(s.op, ast.Sub) else value))
            else:
                out.append(("set", target, value))
        return [e for e in (self._normal(*x) for x in out) if e[0] != "none"]

    def _normal(self, kind: str, t: ast.Subscript, e: ast.expr) -> tuple[str, ast.Subscript, ast.expr]:
        """A "set" as an accumulation, a scaling, a division (`X[o] / s`, `_rt.fdiv(X[o], s)`:
        IEEE division both, as NumPy's), a map or nothing ("none": `X[o] = X[o]`)."""
        if kind != "set":
            return kind, t, e
        if _same(e, _load(t)):
            return "none", t, e
        quotient = ([e.left, e.right] if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div)
                    else e.args if _call(e, "_rt.fdiv") else [])  # type: ignore[attr-defined]
        if quotient and _same(quotient[0], _load(t)):
            return "div", t, quotient[1]
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
            for mine, other in ((e.left, e.right), (e.right, e.left)):
                if _same(mine, _load(t)):
                    return "scale", t, other
        parts = _summands(e, False)
        at = [k for k, (neg, x) in enumerate(parts) if _same(x, _load(t))]
        if len(at) == 1 and not parts[at[0]][0]:
            rest = [x if not neg else ast.UnaryOp(ast.USub(), x) for k, (neg, x) in enumerate(parts) if k != at[0]]
            total = rest[0]
            for x in rest[1:]:
                total = ast.BinOp(total, ast.Add(), x)
            return "acc", t, total
        return "map", t, e

    def _element(self, n: ast.expr, written: bool = False) -> bool:
        """An element of an array subscripted by distinct loop indices (one the piece does not
        write, unless `written`)."""
        if not (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in self.ndims):
            return False
        parts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
        names = [e.id for e in parts if isinstance(e, ast.Name) and e.id in self.vars]
        if len(names) == len(parts) == 2 == self.ndims[n.value.id] and names[0] == names[1]:
            return True  # a diagonal element `X[i, i]`
        return len(names) == len(parts) == len(set(names)) == self.ndims[n.value.id]

    def _labels(self, n: ast.Subscript) -> list[str]:
        """The indices of an element, each once (a diagonal element's one index)."""
        parts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
        return list(dict.fromkeys(e.id for e in parts))  # type: ignore[attr-defined]

    def _number(self, e: ast.expr) -> bool:
        """A number the nest does not change: constants and names of `numbers`."""
        for n in pyast.walk(e):
            if isinstance(n, ast.Name):
                if n.id not in self.numbers or n.id in self.stored or n.id in self.vars:
                    return False
            elif isinstance(n, ast.Constant):
                if type(n.value) not in (int, float):
                    return False
            elif not isinstance(n, (ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.expr_context)):
                return False
        return True

    def _terms(self, e: ast.expr) -> list[_Term] | None:
        """`e` as a sum of products (module contract), or None."""
        if self._number(e):
            return [_Term(coef=[("*", e)])]
        if isinstance(e, ast.Subscript):
            return [_Term(factors=[e])] if self._element(e) else None
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            inner = self._terms(e.operand)
            neg = isinstance(e.op, ast.USub)
            return None if inner is None else [_Term(t.neg != neg, t.coef, t.factors) for t in inner]
        if not isinstance(e, ast.BinOp):
            return None
        left = self._terms(e.left)
        if left is None:
            return None
        if isinstance(e.op, ast.Div):
            if len(left) != 1 or not self._number(e.right):
                return None
            return [_Term(left[0].neg, [*left[0].coef, ("/", e.right)], left[0].factors)]
        right = self._terms(e.right)
        if right is None:
            return None
        if isinstance(e.op, ast.Add):
            return left + right
        if isinstance(e.op, ast.Sub):
            return left + [_Term(not t.neg, t.coef, t.factors) for t in right]
        if isinstance(e.op, ast.Mult) and len(left) == len(right) == 1:
            a, b = left[0], right[0]
            return [_Term(a.neg != b.neg, a.coef + b.coef, a.factors + b.factors)]
        return None

    def _statement(self, kind: str, t: ast.Subscript, e: ast.expr, bounds: dict[str, tuple[str, ...]]) -> str | None:
        """One effect as a NumPy statement, or None."""
        out = self._labels(t)
        target = self._slice(t, bounds, target=True)
        pair = self.dom.pair
        mask = _arrange(self.dom.mask(), list(pair), out) if pair and set(pair) <= set(out) else None
        if kind in ("scale", "div"):
            if set(out) != set(self.vars) or not self._number(e):
                return None
            if mask:
                return masked(kind, target, ast.unparse(e), mask)
            return f"{target} {'*=' if kind == 'scale' else '/='} {ast.unparse(e)}"
        terms = self._terms(e)
        if terms is None or kind == "map" and set(out) != set(self.vars):
            return None
        parts = []
        for term in terms:
            src = self._product(term, out, bounds)
            if src is None:
                return None
            parts.append(("- " if term.neg else "+ ") + src)
        total = " ".join(parts)
        total = total[2:] if total.startswith("+ ") else total
        if mask:
            return masked(kind, target, total, mask)
        return f"{target} {'=' if kind == 'map' else '+='} {total}"

    def _slice(self, n: ast.Subscript, bounds: dict[str, tuple[str, ...]], target: bool = False) -> str:
        """The box's slice of the array `n` subscripts, recorded for the run-time check of
        bounds: a stop `n_d`, or `(start, stop)` where the box starts past 0. A diagonal
        element's is the box's diagonal (`target`: a writable view of it, subscripted whole)."""
        name = n.value.id  # type: ignore[attr-defined]
        ranges = [self.dom.ranges[e.id] for e in _parts(n)]  # type: ignore[attr-defined]
        bounds[f"{name}:{ranges}"] = (name, *(b if a is None else f"({a}, {b})" for a, b in ranges))
        box = f"{name}[{', '.join((a or '') + ':' + b for a, b in ranges)}]"
        if len(self._labels(n)) == len(ranges):
            return box
        return f"_rt.diagonal_view({box})[...]" if target else f"{box}.diagonal()"

    def _mask_operand(self, term: _Term, labels: list[list[str]], srcs: list[str], out: list[str]) -> bool:
        """Take the one factor subscripted by both indices of a triangle summed over through its
        mask, recording the others for the guard's check of finiteness (module contract of
        `codegen/triangles.py`); False when no single factor carries the triangle."""
        pair = self.dom.pair
        if not pair or set(pair) <= set(out) or not set(pair) <= {v for lab in labels for v in lab} | set(out):
            return True
        holders = [k for k, lab in enumerate(labels) if set(pair) <= set(lab)]
        if len(holders) != 1:
            return False
        h = holders[0]
        others = [k for k in range(len(srcs)) if k != h]
        srcs[h] = f"np.where({_arrange(self.dom.mask(), list(pair), labels[h])}, {srcs[h]}, 0.0)"
        for k in others:  # an array the nest writes: checked where the piece starts, not in the guard
            changed = term.factors[k].value.id in self.written  # type: ignore[attr-defined]
            (self.finite_here if changed else self.finite).append(srcs[k])
        return True

    def _product(self, term: _Term, out: list[str], bounds: dict[str, tuple[str, ...]]) -> str | None:
        """One product, its axes in the order `out`: broadcasting, a sum over one factor or
        `@` over one index of two."""
        labels = [self._labels(f) for f in term.factors]
        summed = [v for v in self.vars if v not in out]
        if any(not any(v in lab for lab in labels) for v in summed):
            return None  # an index no factor reads: the loops would add the product N times
        srcs = [self._slice(f, bounds) for f in term.factors]
        if not self._mask_operand(term, labels, srcs, out):
            return None
        if not summed:
            prod = " * ".join(_arrange(s, lab, out) for s, lab in zip(srcs, labels)) or None
        elif len(srcs) == 1:
            axes = tuple(labels[0].index(v) for v in summed)
            rest = [v for v in labels[0] if v not in summed]
            prod = _arrange(f"{srcs[0]}.sum(axis={axes})", rest, out)
        elif len(srcs) == 2 and len(summed) == 1 and _blas(labels[0], labels[1], summed[0]):
            (f, g), (lf, lg), k = srcs, labels, summed[0]
            if lf[0] == k and len(lf) == 2:
                f = f"{f}.T"
            if lg[-1] == k and len(lg) == 2:
                g = f"{g}.T"
            rows, cols = [v for v in lf if v != k], [v for v in lg if v != k]
            if len(rows) == len(cols) == 1 and out == [cols[0], rows[0]]:
                # the product's transpose, (f @ g).T, is g.T @ f.T: BLAS writes it in place
                prod = f"({_transposed(g)} @ {_transposed(f)})"
            else:
                prod = _arrange(f"({f} @ {g})", rows + cols, out)
            self.products += len(lf) == len(lg) == 2
        else:  # products summed otherwise (`B[i, j] * C[i, j]` over `j`): one einsum
            if any(v not in lab for lab in labels for v in summed):
                return None  # einsum would take such a factor out of the sum: not the loops' sum of products
            letters = {v: chr(ord("a") + k) for k, v in enumerate(self.vars)}
            present = [v for v in out if any(v in lab for lab in labels)]
            spec = ",".join("".join(letters[v] for v in lab) for lab in labels)
            spec += "->" + "".join(letters[v] for v in present)
            prod = _arrange(f"np.einsum('{spec}', {', '.join(srcs)})", present, out)
        coef = _coef(term)
        if prod is None:
            return coef or "1"
        if coef and summed:  # `c * (sum)` for the loops' sum of `c * term`: the same where `c` is finite
            self.coefs.append(coef)  # (an infinite `c` times terms of both signs is nan, times their sum not)
        return f"{coef} * {prod}" if coef else prod


def _blas(lf: list[str], lg: list[str], k: str) -> bool:
    """Whether a product of two factors with axes `lf` and `lg` summed over `k` is a `@`: both
    of at most two axes, sharing `k` only."""
    return k in lf and k in lg and len(lf) <= 2 and len(lg) <= 2 and set(lf) & set(lg) == {k}


def _reads_first(effects: list[tuple[str, ast.Subscript, ast.expr]]
                 ) -> list[tuple[str, ast.Subscript, ast.expr]] | None:
    """The effects in an order where each one that reads an array another writes comes before
    it (otherwise as they were), or None when no such order exists."""
    def reads(e: ast.expr) -> set[str]:
        return {n.value.id for n in pyast.walk(e) if isinstance(n, ast.Subscript)}  # type: ignore[attr-defined]
    todo, out = list(range(len(effects))), []
    while todo:
        # the first effect whose array no other effect left reads
        free = [k for k in todo if not any(j != k and effects[k][1].value.id in reads(effects[j][2])  # type: ignore
                                           for j in todo)]
        if not free:
            return None
        out.append(effects[free[0]])
        todo.remove(free[0])
    return out


def _triangular_products(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` with each product of a masked operand that nothing but such products reads, `M @
    X` or `X @ M` (`M` the temporary `w = np.where(mask, F, 0.0)` of `share_masks`, or `w.T`;
    `X` no such temporary), as BLAS's triangular product `_rt.tri_dot(F, lower, transposed, X,
    left)`: the same sum of products, without making `w`, half the multiplications, the other
    half of `F` not read. `F` is read where the product is instead of where `w` was made:
    `share_masks` makes `w` in the same statement list, after the last statement before its use
    that writes `F`'s array, and makes it again after any statement that writes it (a branch of
    an `if` is a list of its own; a `w` made outside an `if` and read in it stays), so every
    product reading `w` reads `F` as it was when `w` was made. A masked operand read twice that
    way (symm's forward, correlation's adjoint: `w @ B` and `w.T @ B'`) takes two triangular
    products: at n=60 they ran in 63 us where the masked copy and two general products took 78
    (symm's; correlation's, `B @ w`, 52 and 63: medians of in-process alternations on a loaded
    machine). Products merged over it (syrk's `(w.T + w) @ A`) keep `w`. Mask temporaries
    nothing reads any more are dropped."""
    reads = [n.id for st in body for n in pyast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    temps = {a.targets[0].id for st in body for a in pyast.walk(st) if isinstance(a, ast.Assign)
             and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name) and _call(a.value, "np.where")}
    as_operand: list[str] = []  # each read of a temporary as a product's operand, the other no temporary
    for st in body:
        for n in pyast.walk(st):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                for side, other in ((n.left, n.right), (n.right, n.left)):
                    side = side.value if isinstance(side, ast.Attribute) and side.attr == "T" else side
                    if (isinstance(side, ast.Name) and side.id in temps
                            and not any(isinstance(x, ast.Name) and x.id in temps for x in pyast.walk(other))):
                        as_operand.append(side.id)
    only = {w for w in temps if reads.count(w) == as_operand.count(w)}
    for n in (x for st in body for x in pyast.walk(st) if isinstance(x, ast.If)):  # made outside it, read in it: kept
        only -= {x.id for x in pyast.walk(n) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load)} - {
            a.id for x in pyast.walk(n) if isinstance(x, ast.Assign) for a in x.targets if isinstance(a, ast.Name)}
    masks: dict[str, bool] = {}  # a mask's temporary -> lower
    out = _tri_products(body, masks, only)
    left = {n.id for st in out for n in pyast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    made = {a.targets[0].id for st in out for a in pyast.walk(st) if isinstance(a, ast.Assign)
            and isinstance(a.targets[0], ast.Name) and _call(a.value, "_rt.tri_mask")}
    return _without(out, made - left)


def _tri_products(body: list[ast.stmt], masks: dict[str, bool], only: set[str]) -> list[ast.stmt]:
    """`_triangular_products` of one statement list (`masks`: the mask temporaries made so
    far, updated; `only`: the temporaries the nest reads only as products' operands)."""
    masked: dict[str, tuple[ast.expr, bool]] = {}  # a masked operand's temporary -> (F, lower)
    done: set[str] = set()

    def operand(e: ast.expr) -> tuple[str, bool] | None:
        flip = isinstance(e, ast.Attribute) and e.attr == "T"
        e = e.value if flip else e  # type: ignore[attr-defined]
        return (e.id, flip) if isinstance(e, ast.Name) and e.id in masked and e.id in only else None

    class _Tri(ast.NodeTransformer):
        def visit_BinOp(self, n: ast.BinOp) -> ast.expr:
            self.generic_visit(n)
            if not isinstance(n.op, ast.MatMult):
                return n
            for side, other, left in ((n.left, n.right, True), (n.right, n.left, False)):
                got = operand(side)
                if got is not None:
                    w, trans = got
                    f, lower = masked[w]
                    done.add(w)
                    call = f"_rt.tri_dot({ast.unparse(f)}, {lower}, {trans}, {ast.unparse(other)}, {left})"
                    return ast.parse(call, mode="eval").body
            return n

    out: list[ast.stmt] = []
    for st in body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            name, v = st.targets[0].id, st.value
            if _call(v, "_rt.tri_mask"):
                masks[name] = True
            elif (_call(v, "np.where") and len(v.args) == 3 and not v.keywords  # type: ignore[attr-defined]
                  and isinstance(v.args[2], ast.Constant) and v.args[2].value == 0.0):  # type: ignore[attr-defined]
                m = v.args[0]  # type: ignore[attr-defined]
                flip = isinstance(m, ast.Attribute) and m.attr == "T"
                m = m.value if flip else m  # type: ignore[attr-defined]
                if isinstance(m, ast.Name) and m.id in masks:
                    masked[name] = (v.args[1], masks[m.id] != flip)  # type: ignore[attr-defined]
        if isinstance(st, ast.If):
            st.body = _tri_products(st.body, dict(masks), only)
            st.orelse = _tri_products(st.orelse, dict(masks), only)
            out.append(st)
        else:
            out.append(_Tri().visit(st))
    return _without(out, done)


def _in_place_products(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` (and its branches) with each update of a matrix's rows by a triangular product of
    its other rows, trmm's `X[:n - 1, c] += _rt.tri_dot(A[1:n, :n - 1], True, True, X[1:n, c],
    True)` and its three kin (the strict lower or upper triangle of `A[:n, :n]`, transposed or
    not, the rows shifted by one the way its side and transposition give: `_rt.tri_dot_add`'s
    table), as `_rt.tri_dot_add(X[:n, c], A, n, lower, trans)`: `X[:n] = (I + op(strict
    triangle)) @ X[:n]` in place, one BLAS call. The product reads the old rows in both (the
    statement makes it whole before adding). BLAS multiplies the triangle's zeros, so the rows
    of `X` the product did not read must be finite too: the statement is rewritten only as the
    body of the piece's `if np.isfinite(X[o]).all() and ...:` (`_Lowering.finite_here`), whose
    check of `X[o]` becomes one of `X[:n, c]`."""
    out: list[ast.stmt] = []
    for st in body:
        if isinstance(st, ast.If):
            checks = _finite_checks(st.test)
            if checks is not None:
                st.body = [_in_place(s, checks, st.body[:k]) or s for k, s in enumerate(st.body)]
            st.body = _in_place_products(st.body)
            st.orelse = _in_place_products(st.orelse)
        out.append(st)
    return out


def _finite_checks(test: ast.expr) -> list[ast.Call] | None:
    """The `np.isfinite(E).all()` calls a test is the conjunction of, or None."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    calls = []
    for p in parts:
        if not (isinstance(p, ast.Call) and not p.args and not p.keywords and isinstance(p.func, ast.Attribute)
                and p.func.attr == "all" and _call(p.func.value, "np.isfinite") and len(p.func.value.args) == 1):
            return None
        calls.append(p.func.value)
    return calls  # type: ignore[return-value]


def _in_place(st: ast.stmt, checks: list[ast.Call], before: list[ast.stmt]) -> ast.stmt | None:
    """`_in_place_products` of one statement of a branch whose test is `checks`, after the
    statements `before` of it, or None; the check of the product's rows widened to the
    matrix's `n` rows where it is rewritten (none of `before` may write the matrix: the check
    then holds where the statement runs)."""
    if not (isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) and isinstance(st.target, ast.Subscript)
            and _call(st.value, "_rt.tri_dot") and len(st.value.args) == 5 and not st.value.keywords):  # type: ignore[attr-defined]
        return None
    f, lower, trans, xo, left = st.value.args  # type: ignore[attr-defined]
    flags = [e.value if isinstance(e, ast.Constant) and type(e.value) is bool else None for e in (lower, trans, left)]
    if None in flags or not flags[2]:
        return None
    lo, tr = flags[0], flags[1]

    def parts(e: ast.expr) -> tuple[str, list[ast.Slice]] | None:  # `X[s0, s1]`: ("X", [s0, s1]), plain slices
        if not (isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name) and isinstance(e.slice, ast.Tuple)
                and len(e.slice.elts) == 2 and all(isinstance(k, ast.Slice) and k.step is None for k in e.slice.elts)):
            return None
        return e.value.id, e.slice.elts  # type: ignore[return-value]

    pf, pt, po = parts(f), parts(st.target), parts(xo)
    if pf is None or pt is None or po is None or pt[0] != po[0] or pt[0] == pf[0]:
        return None
    (a, fs), (x, ts), (_, os_) = pf, pt, po
    d = ast.dump
    if d(ts[1]) != d(os_[1]):  # the same columns
        return None
    low, high = (fs[0], fs[1]) if lo else (fs[1], fs[0])  # the box's `1:n` axis and its `:n - 1` one
    if not (isinstance(low.lower, ast.Constant) and type(low.lower.value) is int and low.lower.value == 1
            and low.upper is not None and high.lower is None and high.upper is not None):
        return None
    n = low.upper
    less = ast.BinOp(pyast.clone(n), ast.Sub(), ast.Constant(1))  # `n - 1`
    if d(high.upper) != d(less):
        return None
    head, tail = ast.Slice(None, less, None), ast.Slice(ast.Constant(1), pyast.clone(n), None)
    want_t, want_o = (head, tail) if lo == tr else (tail, head)
    if d(ts[0]) != d(want_t) or d(os_[0]) != d(want_o):
        return None
    check = next((c for c in checks if d(c.args[0]) == d(xo)), None)
    if check is None or any(x in _may_write(b) for b in before):
        return None
    frame = ast.parse(f"{x}[:{ast.unparse(n)}, {ast.unparse(ts[1])}]", mode="eval").body
    check.args[0] = pyast.clone(frame)
    call = f"_rt.tri_dot_add({ast.unparse(frame)}, {a}, {ast.unparse(n)}, {lo}, {tr})"
    return ast.copy_location(ast.Expr(ast.parse(call, mode="eval").body), st)


_READS_ONLY = {"np.isfinite", "np.where", "np.einsum", "_tri_ops.where", "_tri_ops.sym_where", "_rt.tri_dot",
               "_rt.tri_mask", "_rt.span"}  # calls that write no operand (without `out=`)
_WRITE_FIRST = {"np.copyto", "_rt.sym_add", "_rt.sym_set", "_rt.sym2_add", "_rt.tri_dot_add",
                "_rt.diagonal_view"}  # and `_tri_ops.*`
_WRITE_TWO = {"_tri_ops.move", "_tri_ops.move_div", "_tri_ops.div_mirror"}  # write their first two operands
_UFUNCS = {"np.add", "np.subtract", "np.multiply", "np.divide"}  # two operands, `out=`: write `out` alone


def _may_write(st: ast.stmt) -> set[str]:
    """The arrays a statement of the lowering may write, by name: stores, augmented
    assignments, a name bound (it may be a view: every name its value reads), `out=`, the
    operands the in-place calls write; every name under a call of any other kind, and every
    name of a statement other than an assignment or a call (helper 63: `np.fill_diagonal`,
    positional outs, `np.add.at`, views by other names)."""
    every = {n.id for n in pyast.walk(st) if isinstance(n, ast.Name)}
    if not isinstance(st, (ast.Assign, ast.AugAssign, ast.Expr)):
        return every
    out = {b for n in pyast.walk(st) if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)
           for b in [_root(n)] if b is not None}
    if isinstance(st, ast.AugAssign):
        out |= {_root(st.target)} - {None}  # type: ignore[arg-type]
    if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) for t in st.targets):
        out |= every  # a name bound to a view of what it reads
    for n in pyast.walk(st):
        if not isinstance(n, ast.Call):
            continue
        func = ast.unparse(n.func)
        written = {b for k in n.keywords if k.arg == "out" for b in [_root(k.value)] if b is not None}
        kws = {k.arg for k in n.keywords}
        if func in _READS_ONLY and not kws:
            continue
        if func in _UFUNCS and len(n.args) == 2 and "out" in kws and kws <= {"out", "where"}:
            pass  # the masked updates before `compiled_masks`: `out=` only
        elif func == "np.copyto" and len(n.args) == 2 and kws <= {"where"}:
            written |= {_root(n.args[0])} - {None}  # type: ignore[arg-type]
        elif (func in _WRITE_FIRST or func.startswith("_tri_ops.")) and n.args and not kws:
            written |= {_root(a) for a in n.args[:2 if func in _WRITE_TWO else 1]} - {None}  # type: ignore[misc]
        else:
            written |= {a.id for a in pyast.walk(n) if isinstance(a, ast.Name)}
        out |= written
    return out


def _root(e: ast.expr) -> str | None:
    """The array `X` of `X[...]`, `X[...].T`, `X`, or None."""
    while isinstance(e, (ast.Attribute, ast.Subscript)):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


def _without(body: list[ast.stmt], names: set[str]) -> list[ast.stmt]:
    """`body` (and the branches of its `if`s) without the assignments to `names`."""
    out = []
    for st in body:
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and st.targets[0].id in names:
            continue
        if isinstance(st, ast.If):
            st.body = _without(st.body, names) or [ast.Pass()]
            st.orelse = _without(st.orelse, names)
        out.append(st)
    return out


def _transposed(src: str) -> str:
    """The transpose of the matrix `src` (its `.T` dropped, or one added)."""
    return src[:-2] if src.endswith(".T") else f"{src}.T"


def _merge_products(body: list[ast.stmt], numbers: frozenset[str] = frozenset(),
                    scales: list[str] | None = None, read_only: set[str] | None = None,
                    finite: list[str] | None = None) -> list[ast.stmt]:
    """Accumulations of products into one target that share a factor, `X += A @ B; X += A @ C`
    (or `A @ B` and `C @ B`), as one: `X += A @ (B + C)`: the same sum of products in another
    order (module contract). With one number coefficient on both (`X += c * (A @ B); X += c *
    (C @ B)`, syrk's adjoint), `X += c * ((A + C) @ B)`, and `c` (its source) added to `scales`:
    scaling the sum instead of each product is exact only where `c` is finite and nonzero
    (an infinite `c` turns `inf - inf`, nan, into `c * (P + Q)`, an infinity), which the nest's
    guard then checks. A coefficient is of `numbers`, constants, products and `_rt.fdiv` of them
    (`_coef`'s forms), evaluated the same before the nest as at either statement: it names no
    array, and the nest writes no number it reads. Neither statement reads an array it writes
    (module contract), so the second's operands read the same elements before and after the
    first; see `_merged` for the statements that may stand between them. The merged statement
    computes the loops' sum only where the shared factor is finite: with `A` finite, the two
    sums hold the same infinities (one sign: that infinity; both: nan), where `inf * 1.0 + inf *
    -2.0` is nan and `inf * (1.0 - 2.0)` not. A factor that is a slice of an array of
    `read_only` (the nest does not write it) is added to `finite`, which the nest's guard checks;
    any other merge runs as `if np.isfinite(A).all(): X += A @ (B + C) else: X += A @ B; X += A @
    C`."""
    out: list[ast.stmt] = []
    for st in body:
        if _merged(st, out, numbers, scales if scales is not None else [], read_only or set(),
                   finite if finite is not None else []):
            continue
        out.append(st)
    return out


def _merged(st: ast.stmt, out: list[ast.stmt], numbers: frozenset[str], scales: list[str], read_only: set[str],
            finite: list[str]) -> bool:
    """Whether `st` was merged into an earlier statement of `out`: the last one, or one that
    only assignments follow that write nothing `st` names and name nothing `st` writes (syr2k's
    `dA += ...; dB += ...; dA += ...`): `st` then commutes with them. The arrays of a nest
    overlap nowhere where one of them is written (`_rt.blas_ready`), so names tell them apart."""
    if not (isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add)):
        return False
    names = _loads(st) | _stores(st)
    for prev in reversed(out):
        if (isinstance(prev, ast.AugAssign) and isinstance(prev.op, ast.Add)
                and ast.dump(st.target) == ast.dump(prev.target)):
            (ca, a), (cb, b) = _scaled_product(prev.value, numbers), _scaled_product(st.value, numbers)
            if a is None or b is None or ast.dump(ca) != ast.dump(cb):
                return False
            apart = [pyast.clone(prev), pyast.clone(st)]
            if ast.dump(a.left) == ast.dump(b.left):
                shared = a.left
                a.right = ast.BinOp(a.right, ast.Add(), b.right)
            elif ast.dump(a.right) == ast.dump(b.right):
                shared = a.right
                a.left = ast.BinOp(a.left, ast.Add(), b.left)
            else:
                return False
            if not (isinstance(ca, ast.Constant) and ca.value is None):
                scales.append(ast.unparse(ca))
            # an infinity in the shared factor: inf * b + inf * d (b > 0 > d) is nan, inf * (b + d) not
            factor = _operand_of(shared)
            array = factor.value if isinstance(factor, ast.Subscript) else factor
            if isinstance(array, ast.Name) and array.id in read_only:
                finite.append(ast.unparse(factor))
            else:
                test = ast.parse(f"np.isfinite({ast.unparse(factor)}).all()", mode="eval").body
                out[out.index(prev)] = ast.If(test=test, body=[prev], orelse=apart)
            return True
        if not isinstance(prev, (ast.AugAssign, ast.Assign)) or _written(prev) & names \
                or _written(st) & (_loads(prev) | _stores(prev)):
            return False
    return False


def _operand_of(e: ast.expr) -> ast.expr:
    """The array a product's factor reads (`w.T`'s `w`)."""
    return e.value if isinstance(e, ast.Attribute) and e.attr == "T" else e


def _written(st: ast.AugAssign | ast.Assign) -> set[str]:
    """The names an assignment binds and the arrays it stores into (`X[...] = `, `X[...] +=`)."""
    targets = [st.target] if isinstance(st, ast.AugAssign) else st.targets
    out = set(_stores(st))
    for t in targets:
        while isinstance(t, (ast.Subscript, ast.Attribute)):
            t = t.value
        if isinstance(t, ast.Name):
            out.add(t.id)
    return out


def _scaled_product(e: ast.expr, numbers: frozenset[str]) -> tuple[ast.AST, ast.BinOp | None]:
    """(coefficient, product) of `A @ B` (coefficient `Constant(None)`) or `c * (A @ B)`, `c`
    of `numbers` and constants as `_coef` writes them; (None, None) for anything else."""
    if _is_matmul(e):
        return ast.Constant(None), e  # type: ignore[return-value]
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) and _is_matmul(e.right) \
            and _number_expr(e.left, numbers):
        return e.left, e.right  # type: ignore[return-value]
    return ast.Constant(None), None


def _number_expr(e: ast.expr, numbers: frozenset[str]) -> bool:
    if isinstance(e, ast.Name):
        return e.id in numbers
    if isinstance(e, ast.Constant):
        return type(e.value) in (int, float)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
        return _number_expr(e.left, numbers) and _number_expr(e.right, numbers)
    return (isinstance(e, ast.Call) and ast.unparse(e.func) == "_rt.fdiv" and not e.keywords and len(e.args) == 2
            and all(_number_expr(x, numbers) for x in e.args))


def _is_matmul(e: ast.expr) -> bool:
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.MatMult)


def _coef(term: _Term) -> str:
    """The number factors of a product as one expression ("" when there are none). A division
    is `_rt.fdiv` (IEEE: a zero divisor gives inf or nan), as the loops divide: their factors
    meet array elements, NumPy numbers, where Python's `/` of two floats would raise."""
    out = ""
    for op, c in term.coef:
        src = ast.unparse(c) if isinstance(c, (ast.Name, ast.Constant)) else f"({ast.unparse(c)})"
        out = f"_rt.fdiv({out or '1.0'}, {src})" if op == "/" else src if not out else f"{out} * {src}"
    return out

def _arrange(src: str, labels: list[str], out: list[str]) -> str:
    """The array `src` whose axes are `labels`, with its axes in the order of `out` (new axes
    where it has none)."""
    order = sorted(labels, key=out.index)
    if order != labels:
        src = _transposed(src) if len(labels) == 2 else f"np.transpose({src}, {tuple(labels.index(v) for v in order)})"
    if labels and len(labels) < len(out):
        src = f"{src}[{', '.join(':' if v in labels else 'None' for v in out)}]"
    return src


def _summands(e: ast.expr, neg: bool) -> list[tuple[bool, ast.expr]]:
    """`e` as a sum: (negated, summand) pairs."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        return _summands(e.left, neg) + _summands(e.right, neg != isinstance(e.op, ast.Sub))
    return [(neg, e)]


def _round_trips(stmts: list[ast.stmt]) -> dict[int, int]:
    """Reverse mode's round trips: `k -> j` for each `X[o] = 0.0` at `k` followed by
    `X[o] += e` at `j`, `e` and every statement between them naming no `X`."""
    out: dict[int, int] = {}
    for k, s in enumerate(stmts):
        if not (isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Subscript)
                and isinstance(s.value, ast.Constant) and s.value.value == 0):
            continue
        target = s.targets[0]
        name = target.value.id  # type: ignore[attr-defined]
        for j in range(k + 1, len(stmts)):
            t = stmts[j]
            if isinstance(t, ast.AugAssign) and isinstance(t.op, ast.Add) and _same(t.target, target):
                if not any(isinstance(n, ast.Name) and n.id == name for n in pyast.walk(t.value)):
                    out[k] = j  # (`X[o] += 2.0 * X[o]` reads the zero: no round trip)
                break
            if any(isinstance(n, ast.Name) and n.id == name for n in pyast.walk(t)):
                break
    return out


def _load(t: ast.Subscript) -> ast.Subscript:
    out = pyast.clone(t)
    out.ctx = ast.Load()
    return out


def _subst(e: ast.expr, env: dict[str, ast.expr]) -> ast.expr:
    """`e` with the temporaries of `env` replaced by their values."""
    class _Sub(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.expr:
            return pyast.clone(env[n.id]) if n.id in env and isinstance(n.ctx, ast.Load) else n
    return _Sub().visit(pyast.clone(e))


def _covering(boxes: list[str]) -> list[str]:
    """`boxes` (operands `X[lo:hi, ...]` the guard checks finite), two boxes of one array that
    differ along one axis only, by ranges of one bound apart by constants (`X[:, :n - 1]`,
    `X[:, 1:n]`), checked as the box holding both (`X[:, :n]`): one pass over the array instead
    of two. A larger box is a stronger test: where it fails the loops run, which is never wrong.
    Its bounds are bounds of the two boxes (the guard's `blas_ready` checked them first)."""
    out = list(boxes)
    merged = True
    while merged:
        merged = False
        for a in range(len(out)):
            for b in range(a + 1, len(out)):
                both = _union(out[a], out[b])
                if both is not None:
                    out[a] = both
                    del out[b]
                    merged = True
                    break
            if merged:
                break
    return out


def _union(a: str, b: str) -> str | None:
    """The box holding the boxes `a` and `b` (`_covering`), or None. The boxes are the
    lowering's (`_Lowering._slice`), whose bounds the guard checks (`0 <= start <= stop <=
    length`): the box taking the smaller start and the larger stop of two such boxes is then
    one too, and holds both (of boxes whose bounds may wrap round, `X[n - 2:n]` at n = 1, it
    would not be)."""
    ea, eb = ast.parse(a, mode="eval").body, ast.parse(b, mode="eval").body
    if not (isinstance(ea, ast.Subscript) and isinstance(eb, ast.Subscript)
            and ast.dump(ea.value) == ast.dump(eb.value)):
        return None
    ia = ea.slice.elts if isinstance(ea.slice, ast.Tuple) else [ea.slice]
    ib = eb.slice.elts if isinstance(eb.slice, ast.Tuple) else [eb.slice]
    if len(ia) != len(ib) or not all(isinstance(x, ast.Slice) and x.step is None for x in ia + ib):
        return None
    differ = [k for k, (x, y) in enumerate(zip(ia, ib)) if ast.dump(x) != ast.dump(y)]
    if len(differ) != 1:
        return None
    x, y = ia[differ[0]], ib[differ[0]]
    lo, hi = _extreme(x.lower, y.lower, min), _extreme(x.upper, y.upper, max)  # type: ignore[attr-defined]
    if lo is None or hi is None:
        return None
    box = pyast.clone(ea)
    elts = box.slice.elts if isinstance(box.slice, ast.Tuple) else None
    new = ast.Slice(lower=None if lo == "0" else ast.parse(lo, mode="eval").body,
                    upper=None if hi == "" else ast.parse(hi, mode="eval").body)
    if elts is None:
        box.slice = new
    else:
        elts[differ[0]] = new
    return ast.unparse(box)


def _extreme(x: ast.expr | None, y: ast.expr | None, pick) -> str | None:
    """The smaller (`pick` min, of lower bounds) or larger (max, of upper bounds) of two slice
    bounds, as text ("0" for an omitted lower bound, "" for an omitted upper one), where they
    are comparable: `E + c` and `E + d` of one `E`, or ints; an omitted lower bound (0) against
    an int, an omitted upper bound (the length) against anything. None elsewhere."""
    if pick is max and (x is None or y is None):
        return ""
    ox = ("", 0) if x is None else _offset(x)
    oy = ("", 0) if y is None else _offset(y)
    if ox is None or oy is None or ox[0] != oy[0] or ox[0] == "" and min(ox[1], oy[1]) < 0:
        return None
    k = pick(ox[1], oy[1])
    if ox[0] == "" and k == 0 and pick is min:
        return "0"
    return ast.unparse(x if k == ox[1] else y)  # type: ignore[arg-type]


def _offset(e: ast.expr) -> tuple[str, int] | None:
    """(`E` as text, c) for a bound `E + c`, `E - c`, `E` or the int `c` (`E` "" then)."""
    if isinstance(e, ast.Constant) and type(e.value) is int:
        return "", e.value
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)) and isinstance(e.right, ast.Constant) \
            and type(e.right.value) is int:
        return ast.unparse(e.left), e.right.value if isinstance(e.op, ast.Add) else -e.right.value
    if isinstance(e, (ast.Name, ast.Attribute, ast.BinOp)):
        return ast.unparse(e), 0
    return None
