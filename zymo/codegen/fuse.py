"""Forward substitution of single-use temporaries in generated source ("fusion").

Contract: `fuse(src)` returns source that computes the same values as `src`, with
every temporary that is assigned once, read once, and read later in the same
statement list written into its reader: `t = a * b; y[...] = t + c` becomes
`y[...] = a * b + c`. NumPy evaluates both the same way, operation by operation;
Numba compiles one fused array expression (one loop, no intermediate arrays) where
it compiled one loop and one allocation per statement, which makes elementwise
adjoint chains faster to run and to compile.

A substitution moves the evaluation of an expression from its statement to a later
one, so it is made only where nothing between them can change what it reads:
- the moved expression is pure: names, constants, arithmetic, comparisons,
  subscripts, attributes, and calls of functions known to neither write their
  arguments nor keep them (`_PURE_NP`, `math`, the runtime helpers `runtime.registry` says are movable);
- every statement in between assigns pure expressions to plain names, none of
  which the moved expression reads (no store into an array, no `+=`, no loop or
  branch, no other call; `_rt.tape_keep`, which only stores names for the next call, may be
  in between);
- in the reading statement, nothing that could write runs before the read (its
  only impure call, if any, is the statement's own outermost call, whose arguments
  are evaluated first);
- the read is not inside a loop or branch the definition is outside of;
- the reading statement stays small (`_MAX_NODES`): a long chain of single-use
  temporaries (unrolled code) is cut into statements rather than nested without bound.
A copy `a = b` is substituted under a weaker condition: `b` is not rebound in between
(`a` and `b` are one object, so writes into it are seen through either name).

Accumulations (reverse mode, `fuse(src, facts)`, `facts` a `ShadowFacts`). `facts.roots`
maps every name the generated code gives a shadow or an adjoint to the memory roots it may
point into (None:
unknown; an empty set: a float adjoint, no memory); a name not in it never refers to shadow
memory (the adjoint sweep writes only shadows and its own locals, and shadows are separate
from primal memory, overlapping where their primals do). In the top-level statement list of
each function (straight-line code, where names hold the same memory throughout):
- `d += e1; ...; d += e2`, `d` an array shadow, becomes `...; d += e1 + e2`: one pass over
  `d` instead of two (Numba: one fused loop). `e1` is evaluated later, so every statement in
  between must pass it (below); the accumulation itself moves later too, so none of them may
  read memory `d` may overlap, or write it other than by another `+=` (in-place additions
  commute, up to rounding). Neither term may read memory `d` overlaps. Product adjoints
  (`_rt.dot_vjp_a`, ...) are never merged: the Numba backend turns `d += _rt.dot_vjp_a(...)`
  into one BLAS call that adds in place (`rewrites.accumulating_products`).
- a statement passes a moved expression (a merged term, or a temporary being substituted)
  when it is a pure assignment to a name the expression does not read, or an accumulation
  `d2 += f` / a store `d2[...] = v` into a shadow `d2` that no name the expression reads
  may overlap.
- `facts.zero` names shadows that are zeros when the function starts (the internal shadows
  of `Const` memory that receives active data: zymo allocates them, zeroes them for every
  call, and nobody sees them afterwards). When the first statement that mentions such a `d`
  (or anything that may overlap it) is `d += e`, `e` the name of a shadow that holds an array
  of `d`'s shape (`facts.same_shape(d, e)`: not one number, nothing `+=` would broadcast),
  and a later `d[...] = 0.0`
  consumes it, with nothing in between writing `d`, `e` or what they overlap, or reading
  through another name what `d` overlaps, then the reads of `d` in between read `e`, and
  the accumulation and the zeroing go: `d` holds zeros before and after in both programs
  (gm3: the product adjoints read `dt` instead of a buffer's shadow filled with `dt`).
- then, in any statement list, a store's adjoint `g = np.copy(E); E = 0.0` whose copy only
  the next statement reads, `t = <arithmetic>` or `d += <pure>` with `d` unable to overlap
  `E`: that statement reads `E` before the zeroing instead (`_read_before_zeroing`).
- and a copy `g = np.copy(E)` whose every read (as an operand of arithmetic or of a reduction)
  comes, in the same statement list, before any statement writes memory `E` may overlap or
  rebinds a name `E` reads, is read as `E` itself (`_needless_copies`).
"""
from __future__ import annotations

import ast

from .. import pyast
from ..runtime import registry
from ..transform.reverse.facts import ShadowFacts, never_same

# NumPy functions that return new values and write nothing, with the most positional
# arguments that keeps them so (a ufunc's next positional argument is its `out`)
_PURE_NP = {
    **dict.fromkeys([
        "abs", "absolute", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "cbrt", "conj",
        "conjugate", "cos", "cosh", "deg2rad", "degrees", "exp", "exp2", "expm1", "fabs", "float64", "imag",
        "log", "log10", "log1p", "log2", "negative", "rad2deg", "radians", "real", "reciprocal", "sign",
        "sin", "sinh", "sqrt", "square", "tan", "tanh"], 1),
    **dict.fromkeys([
        "add", "arctan2", "divide", "hypot", "logaddexp", "maximum", "minimum", "multiply", "power",
        "subtract", "true_divide", "fmax", "fmin", "dot", "matmul", "outer", "copy", "transpose"], 2),
    **dict.fromkeys(["where", "clip", "sum", "prod", "mean"], 3),
    **dict.fromkeys(["zeros_like", "empty_like", "ones_like", "full_like"], 1),
}


def fuse(src: str, facts: ShadowFacts | None = None) -> str:
    """`src` with single-use temporaries substituted into their readers, and with `facts`
    (reverse mode) accumulations merged and zero shadows read through (module contract).

    Only the statements that change are rewritten (one statement per line, as zymo writes
    them), so comments and the layout of the rest stay as they were.

    The result depends only on `src` and `facts`; without zero shadows, whose pass asks
    `facts.same_shape` (which may record the guards it relies on), it is remembered by
    `src` and what `facts.roots` says (`_MEMO`, `_overlaps`): the same program text comes
    back for other argument dtypes, and its float32 and float64 derivatives are fused once."""
    if facts is not None and facts.zero:
        return _fuse(src, facts)
    key = (src, None if facts is None else _overlaps(facts.roots))
    got = _MEMO.get(key)
    if got is None:
        got = _MEMO[key] = _fuse(src, facts)
        if len(_MEMO) > _MEMO_SIZE:
            del _MEMO[next(iter(_MEMO))]  # the oldest entry
    return got


_MEMO: dict[tuple, str] = {}  # (src, _overlaps(facts.roots) or None) -> fused source
_MEMO_SIZE = 256


def _overlaps(roots: dict) -> frozenset:
    """`roots` up to a renaming of the roots, which is all fuse reads of it (which names
    are listed, with None, no roots, or roots that meet): each root stands for the set of
    names whose roots hold it, so two names' roots meet exactly where their sets do."""
    holders: dict = {}
    for name, r in roots.items():
        for root in r or ():
            holders.setdefault(root, set()).add(name)
    return frozenset((name, None if r is None else frozenset(frozenset(holders[root]) for root in r))
                     for name, r in roots.items())


def _fuse(src: str, facts: ShadowFacts | None) -> str:
    """`fuse`, computed."""
    tree = ast.parse(src)
    lines: list[str | None] = src.split("\n")
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            _Function(node, lines, facts).run()
    src = "\n".join(line for line in lines if line is not None)
    if facts is None:
        return src
    return _needless_copies(_read_before_zeroing(_restored_zeroing(src, facts), facts), facts)


def _needless_copies(src: str, facts: ShadowFacts) -> str:
    """`g = np.copy(E)` (`E` a shadow or a view of one) whose every read comes, in the same
    statement list, before anything writes memory `E` may overlap: the reads read `E` itself and
    the copy goes (conv2d's `dt = np.copy(dout[f])`, the adjoint of `out[f] += ...`, read by
    `w * dt` and a sum of products each iteration). Made when `g` is stored once and read only
    as an operand of arithmetic or of a reduction (`_COPY_READERS`), never bound to another
    name or passed where it may be kept or written; every statement from the copy to the last
    read is an assignment to a plain name or an accumulation into a name whose memory cannot
    overlap `E`'s (`facts.roots`), and none rebinds a name `E` reads. The reads then see the
    elements the copy would have held."""
    tree = ast.parse(src)
    lines: list[str | None] = src.split("\n")
    changed = False
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        loads: dict[str, int] = {}
        stores: dict[str, int] = {}
        for n in pyast.walk(fn):
            if isinstance(n, ast.Name):
                table = loads if isinstance(n.ctx, ast.Load) else stores
                table[n.id] = table.get(n.id, 0) + 1
        for body in [b for st in pyast.walk(fn) for f in ("body", "orelse")
                     if isinstance(b := getattr(st, f, None), list) and b and isinstance(b[0], ast.stmt)]:
            for i, st in enumerate(body):
                readers = _copy_readers(body, i, loads, stores, facts)
                if readers is None:
                    continue
                put = _PutSource(st.targets[0].id, st.value.args[0])  # type: ignore[attr-defined]
                for r in readers:
                    if r.lineno != r.end_lineno:
                        raise AssertionError("zymo writes one statement per line")
                    old = lines[r.lineno - 1]
                    assert old is not None
                    lines[r.lineno - 1] = old[:len(old) - len(old.lstrip())] + ast.unparse(put.visit(r))
                lines[st.lineno - 1] = None
                changed = True
    return "\n".join(line for line in lines if line is not None) if changed else src


class _PutSource(ast.NodeTransformer):
    """Reads of the copy `g` read its source expression `e` instead."""

    def __init__(self, g: str, e: ast.expr):
        self.g, self.e = g, e

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return pyast.clone(self.e) if node.id == self.g else node


# calls whose result never holds (or is) an operand's memory: a read of a copy there may read its source
_COPY_READERS = frozenset({"_rt.sum_product", "np.sum", "np.dot", "np.vdot", "np.max", "np.min"})


def _copy_readers(body: list[ast.stmt], i: int, loads: dict, stores: dict,
                  facts: ShadowFacts) -> list[ast.stmt] | None:
    """The statements of `body` after `body[i]` that read the copy `body[i]` makes, when
    `_needless_copies` may drop it, else None."""
    st = body[i]
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
            and isinstance(st.value, ast.Call) and ast.unparse(st.value.func) == "np.copy"
            and len(st.value.args) == 1 and not st.value.keywords):
        return None
    g, e = st.targets[0].id, st.value.args[0]
    base = e.value if isinstance(e, ast.Subscript) else e
    if not (isinstance(base, ast.Name) and _pure(e) and stores.get(g) == 1 and loads.get(g)):
        return None
    roots = facts.roots.get(base.id, ())
    if roots is None or roots == () or roots == frozenset():
        return None  # unknown memory, or not array shadow memory: left as it is
    left = loads[g]
    readers: list[ast.stmt] = []
    names = _reads(e)
    for r in body[i + 1:]:
        if left == 0:
            break
        if not isinstance(r, (ast.Assign, ast.AugAssign)) or not _pure(r.value):
            return None
        targets = r.targets if isinstance(r, ast.Assign) else [r.target]
        for t in targets:
            if isinstance(t, ast.Name):
                if t.id in names or t.id == g:
                    return None  # rebinds a name the copied expression reads
                if isinstance(r, ast.AugAssign) and _may_overlap(t.id, roots, facts):
                    return None
            elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and _pure(t):
                if _may_overlap(t.value.id, roots, facts):
                    return None
            else:
                return None
        seen = _copy_reads(r.value, g)
        if seen is None:
            return None
        if seen:
            readers.append(r)
            left -= seen
    return readers if left == 0 and readers else None


def _may_overlap(name: str, roots: frozenset, facts: ShadowFacts) -> bool:
    other = facts.roots.get(name, ())
    return other is None or bool(other and other & roots)


def _copy_reads(e: ast.expr, g: str) -> int | None:
    """How often `e` reads `g`, each read an operand of arithmetic or an argument of a
    `_COPY_READERS` call; None when some read is anything else."""
    ok: set[int] = set()
    for n in pyast.walk(e):
        if isinstance(n, ast.BinOp):
            ok |= {id(n.left), id(n.right)}
        elif isinstance(n, ast.UnaryOp):
            ok.add(id(n.operand))
        elif isinstance(n, ast.Call) and ast.unparse(n.func) in _COPY_READERS and not n.keywords:
            ok |= {id(a) for a in n.args}
    count = 0
    for n in pyast.walk(e):
        if isinstance(n, ast.Name) and n.id == g:
            if id(n) not in ok:
                return None
            count += 1
    return count


def _restored_zeroing(src: str, facts: ShadowFacts) -> str:
    """`g = E; E = 0.0; E += g` (the adjoint of `x[i] = x[i] + ...`: the store takes the
    shadow and zeroes it, the read gives it back), `g` a float adjoint (a number, not a view)
    or `g = np.copy(E)`: the zeroing and the accumulation go, `E` keeps what it held."""
    tree = ast.parse(src)
    lines = src.split("\n")
    changed = False
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for body in [b for st in pyast.walk(fn) for f in ("body", "orelse")
                     if isinstance(b := getattr(st, f, None), list) and b and isinstance(b[0], ast.stmt)]:
            for i in range(len(body) - 2):
                if _restores(body[i], body[i + 1], body[i + 2], facts):
                    for k in (i + 1, i + 2):
                        if body[k].lineno != body[k].end_lineno:
                            raise AssertionError("zymo writes one statement per line")
                        lines[body[k].lineno - 1] = None  # type: ignore[call-overload]
                    changed = True
    return "\n".join(line for line in lines if line is not None) if changed else src


def _restores(take: ast.stmt, zeroing: ast.stmt, give: ast.stmt, facts: ShadowFacts) -> bool:
    """Whether `take; zeroing; give` is `_restored_zeroing`'s pattern."""
    if not (isinstance(take, ast.Assign) and len(take.targets) == 1 and isinstance(take.targets[0], ast.Name)
            and isinstance(zeroing, ast.Assign) and len(zeroing.targets) == 1
            and isinstance(zeroing.value, ast.Constant) and zeroing.value.value == 0
            and not isinstance(zeroing.value.value, bool)
            and isinstance(give, ast.AugAssign) and isinstance(give.op, ast.Add)
            and isinstance(give.value, ast.Name) and give.value.id == take.targets[0].id):
        return False
    g, e = take.targets[0].id, take.value
    if (isinstance(e, ast.Call) and ast.unparse(e.func) == "np.copy" and len(e.args) == 1 and not e.keywords):
        e = e.args[0]  # a copy: not a view of what the zeroing writes
    elif facts.roots.get(g, ()) != frozenset():
        return False  # not known to be a number
    base = e.value if isinstance(e, ast.Subscript) else e
    if not (isinstance(base, ast.Name) and _pure(e) and g not in _reads(e)):
        return False
    text = f"{base.id}[...]" if e is base else ast.unparse(e)
    return ast.unparse(zeroing.targets[0]) == text and ast.unparse(give.target) in (text, ast.unparse(e))


def _read_before_zeroing(src: str, facts: ShadowFacts) -> str:
    """`g = np.copy(E); E = 0.0; r` (a store's adjoint, `E` a shadow or a view of one) where
    `r` is the only statement that reads `g`: `r` reading `E` itself, then `E = 0.0`. Made
    when `r` is `t = <arithmetic>` (a fresh array; `t` not read by `E` or the zeroing) or an
    accumulation `d += <pure>` into a name `d` that cannot overlap `E`'s memory (`facts.roots`),
    and reads nothing else that may overlap it: `r` reads the contents `g` would have held,
    and the zeroing then writes no memory `r` reads or its result holds. One copy less per store."""
    tree = ast.parse(src)
    lines = src.split("\n")
    changed = False
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        loads: dict[str, int] = {}
        stores: dict[str, int] = {}
        for n in pyast.walk(fn):
            if isinstance(n, ast.Name):
                table = loads if isinstance(n.ctx, ast.Load) else stores
                table[n.id] = table.get(n.id, 0) + 1
        for body in [b for st in pyast.walk(fn) for f in ("body", "orelse")
                     if isinstance(b := getattr(st, f, None), list) and b and isinstance(b[0], ast.stmt)]:
            for i in range(len(body) - 2):
                new = _consumed_copy(body[i], body[i + 1], body[i + 2], loads, stores, facts)
                if new is not None:
                    for k in (i, i + 2):
                        if body[k].lineno != body[k].end_lineno:
                            raise AssertionError("zymo writes one statement per line")
                    old = lines[body[i].lineno - 1]
                    lines[body[i].lineno - 1] = old[:len(old) - len(old.lstrip())] + new
                    lines[body[i + 2].lineno - 1] = None  # type: ignore[call-overload]
                    changed = True
    return "\n".join(line for line in lines if line is not None) if changed else src


def _consumed_copy(copy: ast.stmt, zeroing: ast.stmt, reader: ast.stmt, loads: dict, stores: dict,
                   facts: ShadowFacts) -> str | None:
    """The reader of `_read_before_zeroing`, reading the copied expression, or None."""
    if not (isinstance(copy, ast.Assign) and len(copy.targets) == 1 and isinstance(copy.targets[0], ast.Name)
            and isinstance(copy.value, ast.Call) and ast.unparse(copy.value.func) == "np.copy"
            and len(copy.value.args) == 1 and not copy.value.keywords):
        return None
    g, e = copy.targets[0].id, copy.value.args[0]
    base = e.value if isinstance(e, ast.Subscript) else e
    if not (isinstance(base, ast.Name) and _pure(e) and loads.get(g) == 1 and stores.get(g) == 1
            and isinstance(zeroing, ast.Assign) and len(zeroing.targets) == 1):
        return None
    target = zeroing.targets[0]
    if not (isinstance(zeroing.value, ast.Constant) and zeroing.value.value == 0
            and not isinstance(zeroing.value.value, bool)
            and ast.unparse(target) == (f"{base.id}[...]" if e is base else ast.unparse(e))):
        return None
    roots = facts.roots.get(base.id, ())
    if roots == () or roots == frozenset():
        return None  # not array shadow memory: left as it is
    reads = sum(1 for n in pyast.walk(reader) if isinstance(n, ast.Name) and n.id == g)
    if reads != 1 or not isinstance(reader, (ast.Assign, ast.AugAssign)) or not _pure(reader.value):
        return None
    if isinstance(reader, ast.Assign):
        if not (len(reader.targets) == 1 and isinstance(reader.targets[0], ast.Name)
                and isinstance(reader.value, (ast.BinOp, ast.UnaryOp))):
            return None
        written = reader.targets[0].id
    else:
        if not (isinstance(reader.target, ast.Name) and isinstance(reader.op, ast.Add)):
            return None
        written = reader.target.id
        d = facts.roots.get(written, ())
        if written == base.id or d is None or roots is None or (d and d & roots):
            return None  # the accumulation may write what the zeroing then clears
    if written in _reads(e) | _reads(zeroing) or written == g:
        return None
    for name in _reads(reader.value) - {g}:  # read before the zeroing now: memory it cannot change
        other = facts.roots.get(name, ())
        if other is None or roots is None or (other and other & roots):
            return None

    class _Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return e if node.id == g else node
    return ast.unparse(_Put().visit(reader))


def _pure_call(call: ast.Call, products: bool = False) -> bool:
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
        return False
    mod, name = f.value.id, f.attr
    if any(k.arg in ("out", None) for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return False  # `out=`, `**kwargs`, `*args`: it may write
    if mod == "np":
        return name in _PURE_NP and len(call.args) <= _PURE_NP[name]
    # zymo's runtime helpers that `runtime.registry` says fuse may move; the product adjoints
    # only where asked (pure in the Python source, kept as their own accumulations: contract)
    return mod == "math" or (mod == "_rt" and (registry.is_movable(name)
                                               or (products and registry.is_product_vjp(name))))


_PURE_NODES = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Subscript, ast.Attribute,
               ast.Slice, ast.Tuple, ast.keyword, ast.operator, ast.unaryop, ast.cmpop, ast.expr_context)


def _pure(e: ast.AST, products: bool = False) -> bool:
    for node in pyast.walk(e):
        if isinstance(node, ast.Call):
            if not _pure_call(node, products):
                return False
        elif not isinstance(node, _PURE_NODES):
            return False
    return True


def _stores(st: ast.AST) -> set[str]:
    return {n.id for n in pyast.walk(st) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}


def _header_nodes(st: ast.stmt):
    """The nodes of statement `st` itself, without the statements nested in its body."""
    stack = [c for f, c in ast.iter_fields(st) if f not in ("body", "orelse", "finalbody", "handlers")]
    while stack:
        c = stack.pop()
        if isinstance(c, list):
            stack.extend(c)
        elif isinstance(c, ast.AST):
            yield c
            stack.extend(v for _, v in ast.iter_fields(c))


def _reads(e: ast.AST) -> set[str]:
    return {n.id for n in pyast.walk(e) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class _Function:
    """One generated function: where every name is stored and read, then the two rewrites.

    Statements are never removed from the AST lists while the rewrites run (their positions
    index the tables); a rewritten-away statement is marked dead and its line dropped."""

    def __init__(self, fn: ast.FunctionDef, lines: list[str | None], facts: ShadowFacts | None = None):
        self.fn = fn
        self.shadows = facts.roots if facts is not None else None
        self.zero = facts.zero if facts is not None else frozenset()
        self.same_shape = facts.same_shape if facts is not None else never_same
        self.lines = lines
        self.dead: set[int] = set()
        self.params = {a.arg for a in fn.args.args}
        self.stores: dict[str, list[tuple]] = {}   # name -> [path of the storing statement]
        # name -> {id(Name node) or id(statement): (path, statement, Name node, in a header)}
        self.loads: dict[str, dict[int, tuple]] = {}
        self._index(fn.body, ())

    def _index(self, body: list[ast.stmt], path: tuple) -> None:
        for k, st in enumerate(body):
            here = path + ((id(body), k),)
            compound = any(isinstance(getattr(st, f, None), list) and getattr(st, f)
                           and isinstance(getattr(st, f)[0], ast.stmt) for f in ("body", "orelse"))
            for node in _header_nodes(st):
                if isinstance(node, ast.Name):
                    if isinstance(node.ctx, ast.Load):
                        self.loads.setdefault(node.id, {})[id(node)] = (here, st, node, compound)
                    else:
                        self.stores.setdefault(node.id, []).append(here)
                        if isinstance(st, ast.AugAssign) and node is st.target:
                            self.loads.setdefault(node.id, {})[id(st)] = (here, st, None, True)
            for f in ("body", "orelse"):
                inner = getattr(st, f, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    self._index(inner, here)

    def _stored_once(self, name: str) -> bool:
        return len(self.stores.get(name, ())) + (name in self.params) == 1

    def run(self) -> None:
        self._blocks(self.fn.body, self._propagate_copies)
        if self.shadows is not None:
            self._merge_accumulations(self.fn.body)
            for d in sorted(self.zero):
                self._pass_zero_shadow(self.fn.body, d)
        self._blocks(self.fn.body, self._substitute_all)

    def _blocks(self, body: list[ast.stmt], visit) -> None:
        for st in body:
            for f in ("body", "orelse"):
                inner = getattr(st, f, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    self._blocks(inner, visit)
        visit(body)

    def _rewrite(self, st: ast.stmt) -> None:
        if st.lineno != st.end_lineno:
            raise AssertionError("zymo writes one statement per line")
        old = self.lines[st.lineno - 1]
        self.lines[st.lineno - 1] = old[:len(old) - len(old.lstrip())] + ast.unparse(st)

    def _kill(self, st: ast.stmt) -> None:
        self.dead.add(id(st))
        self.lines[st.lineno - 1] = None

    # -- copies --------------------------------------------------------------------------
    def _propagate_copies(self, body: list[ast.stmt]) -> None:
        """`a = b`, each name stored once, `b` stored before (a parameter or an earlier
        statement of this list), every read of `a` later in this list and not in the header
        of a loop or branch: read `b` instead."""
        key = id(body)
        for i, st in enumerate(body):
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                    and isinstance(st.value, ast.Name)):
                continue
            a, b = st.targets[0].id, st.value.id
            if not (self._stored_once(a) and self._stored_once(b)):
                continue
            if b not in self.params and not any(k == key and j < i for k, j in self.stores[b][0]):
                continue
            reads = self.loads.get(a, {})
            if any(header or node is None or not any(k == key and j > i for k, j in path)
                   for path, _, node, header in reads.values()):
                continue
            for _, reader, node, _ in reads.values():
                node.id = b
                self._rewrite(reader)
            self.loads[b].update(reads)
            self.loads[a] = {}
            del self.loads[b][id(st.value)]
            self._kill(st)

    # -- single-use temporaries -------------------------------------------------------------
    def _substitute_all(self, body: list[ast.stmt]) -> None:
        for i, st in enumerate(body):
            if id(st) not in self.dead:
                self._substitute(body, i, st)

    def _substitute(self, body: list[ast.stmt], i: int, st: ast.stmt) -> None:
        """Substitute the temporary defined by `body[i]` into its reader, if it may move."""
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
            return
        name = st.targets[0].id
        reads = self.loads.get(name, {})
        if not self._stored_once(name) or len(reads) != 1 or not _pure(st.value):
            return
        (path, reader, node, header), = reads.values()
        if header or node is None or path[-1][0] != id(body) or path[-1][1] <= i:
            return  # read in a loop or branch header, inside a nested block, or before
        j = path[-1][1]
        moved = _reads(st.value)
        top = self.shadows is not None and body is self.fn.body
        for later in body[i + 1:j]:  # only pure assignments to names the expression does not read
            if id(later) in self.dead or _keeps_tapes(later) or (top and self._passes(later, moved, None)):
                continue
            if not (isinstance(later, ast.Assign) and _pure(later.value)
                    and all(isinstance(t, ast.Name) for t in later.targets)
                    and not moved & {t.id for t in later.targets}):
                return
        if not _safe_reader(reader, node):
            return
        if _size(reader) + _size(st.value) > _MAX_NODES:
            return  # a long chain stays a chain of statements (and within the parser's depth)
        parent, field, seq = _site(reader, node)
        if _shape_slot(parent, seq, field) and not isinstance(st.value, ast.Name):
            return  # a name whose shape `_rt.as_shape` reads (the Numba rewrite casts to it in its loop)
        if seq is None:
            setattr(parent, field, st.value)
        else:
            seq[field] = st.value
        self._rewrite(reader)
        # the reads of the moved expression now happen in the reader
        for n in pyast.walk(st.value):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self.loads[n.id][id(n)] = (path, reader, n, False)
        self.loads[name] = {}
        self._kill(st)

    # -- accumulations (reverse mode) --------------------------------------------------------
    def _overlap(self, a: str, b: str) -> bool:
        """Whether names `a` and `b` may refer to overlapping memory (module contract)."""
        if a == b:
            return True
        ra, rb = self.shadows.get(a, ()), self.shadows.get(b, ())
        if ra == () or rb == ():
            return False  # not a shadow: never shadow memory
        return ra is None or rb is None or bool(ra & rb)

    def _accumulation(self, st: ast.stmt) -> str | None:
        """The array shadow `d` of a mergeable `d += e` (pure, not a product adjoint, not
        reading what `d` overlaps), else None."""
        if not (isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) and isinstance(st.target, ast.Name)
                and st.lineno == st.end_lineno):
            return None
        d = st.target.id
        roots = self.shadows.get(d, ())
        if roots == () or roots == frozenset() or not _pure(st.value):
            return None  # not a shadow, or a float adjoint: one number, nothing to gain
        v = st.value
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and registry.is_product_vjp(v.func.attr):
            return None
        if any(self._overlap(n, d) for n in _reads(v)):
            return None
        return d

    def _passes(self, st: ast.stmt, moved: set[str], d: str | None) -> bool:
        """Whether a pure expression reading `moved` (and, given `d`, the accumulation
        `d += ...` holding it) may be evaluated after `st` instead of before (module contract)."""
        if st.lineno != st.end_lineno or not isinstance(st, (ast.Assign, ast.AugAssign)):
            return False
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        if len(targets) != 1 or not _pure(st.value, products=True):
            return False
        t, reads = targets[0], _reads(st.value)
        if isinstance(t, ast.Name):
            if t.id in moved or (d is not None and t.id == d and not isinstance(st, ast.AugAssign)):
                return False
            if isinstance(st, ast.AugAssign):
                roots = self.shadows.get(t.id, ())
                if roots == ():
                    return False  # may be primal memory, written in place
                if any(self._overlap(n, t.id) for n in moved):
                    return False
                if d is not None and self._overlap(t.id, d) and not isinstance(st.op, ast.Add):
                    return False
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and _pure(t.slice):
            base = t.value.id
            if self.shadows.get(base, ()) == () or any(self._overlap(n, base) for n in moved):
                return False
            if d is not None and self._overlap(base, d):
                return False
            reads |= _reads(t.slice)
        else:
            return False
        return d is None or not any(self._overlap(n, d) for n in reads)

    def _merge_accumulations(self, body: list[ast.stmt]) -> None:
        """`d += e1; ...; d += e2` into `d += e1 + e2` (module contract)."""
        for i, st in enumerate(body):
            if id(st) in self.dead:
                continue
            d = self._accumulation(st)
            if d is None:
                continue
            moved = _reads(st.value)
            for j in range(i + 1, len(body)):
                later = body[j]
                if id(later) in self.dead:
                    continue
                if self._accumulation(later) == d:
                    if _size(later.value) + _size(st.value) <= _MAX_NODES:
                        self._merge(st, later, ((id(body), i),), ((id(body), j),))
                    break
                if not self._passes(later, moved, d):
                    break

    def _merge(self, first: ast.AugAssign, second: ast.AugAssign, path1: tuple, path: tuple) -> None:
        """`second` becomes `d += <first's term> + <second's term>`; `first` goes."""
        d = first.target.id
        second.value = ast.BinOp(first.value, ast.Add(), second.value)
        self._rewrite(second)
        for n in pyast.walk(first.value):  # those reads now happen in `second`
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self.loads[n.id][id(n)] = (path, second, n, False)
        self.loads[d].pop(id(first), None)
        self.stores[d] = [p for p in self.stores[d] if p != path1]
        self._kill(first)

    def _pass_zero_shadow(self, body: list[ast.stmt], d: str) -> None:
        """Read `e` for a zero-at-entry shadow `d` filled by one `d += e` (module contract)."""
        if d not in self.shadows:
            return
        live = [(k, st) for k, st in enumerate(body) if id(st) not in self.dead]
        first = next((n for n, (_, st) in enumerate(live) if self._mentions(st, d)), None)
        if first is None:
            return
        acc = live[first][1]
        if not (isinstance(acc, ast.AugAssign) and isinstance(acc.op, ast.Add) and isinstance(acc.target, ast.Name)
                and acc.target.id == d and isinstance(acc.value, ast.Name) and acc.lineno == acc.end_lineno):
            return
        e = acc.value.id
        if e not in self.shadows or self._overlap(e, d) or not self.same_shape(d, e):
            return
        reads: list[tuple[ast.stmt, ast.Name, int]] = []
        for k, st in live[first + 1:]:
            if st.lineno != st.end_lineno or not isinstance(st, (ast.Assign, ast.AugAssign, ast.Expr)):
                return
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and _is_zeroing(st.targets[0], st.value, d):
                for reader, node, j in reads:
                    node.id = e
                    self._rewrite(reader)
                    self.loads[d].pop(id(node), None)
                    self.loads.setdefault(e, {})[id(node)] = (((id(body), j),), reader, node, False)
                self._kill(acc)
                self._kill(st)
                return
            if not _pure(st.value, products=True):
                return  # a call that may write `d` or `e`
            targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AugAssign) else []
            for t in targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                if not isinstance(base, ast.Name) or self._overlap(base.id, d) or self._overlap(base.id, e):
                    return  # writes (or rebinds) `d`, `e` or memory they may overlap
                if isinstance(t, ast.Subscript) and not _pure(t.slice):
                    return
            for node in pyast.walk(st):
                if isinstance(node, ast.Name) and node.id != d and self._overlap(node.id, d):
                    return  # what `d` overlaps, through another name
                if isinstance(node, ast.Name) and node.id == d:
                    reads.append((st, node, k))

    def _mentions(self, st: ast.stmt, d: str) -> bool:
        """Whether `st` (with what it nests) names `d` or anything that may overlap it."""
        return any(isinstance(n, ast.Name) and self._overlap(n.id, d) for n in pyast.walk(st))


def _is_zeroing(target: ast.expr, value: ast.expr, d: str) -> bool:
    """`d[...] = 0.0`: every element of `d` set to zero."""
    return (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == d
            and isinstance(target.slice, ast.Constant) and target.slice.value is Ellipsis
            and isinstance(value, ast.Constant) and value.value == 0 and not isinstance(value.value, bool))


_MAX_NODES = 200


def _keeps_tapes(st: ast.stmt) -> bool:
    """`_rt.tape_keep(fn, (c1, ...))`: it stores a tuple of names on the function object, where
    only the next call's `_rt.tape_take` reads it, so any expression may move past it."""
    return (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Attribute)
            and st.value.func.attr == "tape_keep" and isinstance(st.value.func.value, ast.Name)
            and st.value.func.value.id == "_rt")


def _size(node: ast.AST) -> int:
    return sum(1 for _ in pyast.walk(node))


def _site(st: ast.stmt, target: ast.Name):
    """(parent, field, list or None) holding the Name node `target` inside `st`."""
    for parent in pyast.walk(st):
        for field, value in ast.iter_fields(parent):
            if value is target:
                return parent, field, None
            if isinstance(value, list):
                for k, item in enumerate(value):
                    if item is target:
                        return parent, k, value
    raise AssertionError("the read is not in its statement")


def _shape_slot(parent: ast.AST, seq: list | None, field: object) -> bool:
    """Whether the site (`_site`) is the argument `_rt.as_shape(e, y)` or `as_tangent` reads only
    for its shape and dtype (`y`)."""
    return (isinstance(parent, ast.Call) and seq is parent.args and field == 1
            and isinstance(parent.func, ast.Attribute) and parent.func.attr in ("as_shape", "as_tangent")
            and isinstance(parent.func.value, ast.Name) and parent.func.value.id == "_rt")


def _safe_reader(st: ast.stmt, read: ast.Name) -> bool:
    """`st` is a simple statement that evaluates `read` before anything in it can write."""
    if not isinstance(st, (ast.Assign, ast.AugAssign, ast.Return, ast.Expr)) or st.value is None:
        return False
    value = st.value
    if not any(n is read for n in pyast.walk(value)):  # read in a target: after the whole value
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        if len(targets) != 1 or isinstance(targets[0], (ast.Tuple, ast.List)):
            return False  # `a = b = v`, `a, b = v` store left to right: the read may come after one
        return _pure(value) and _pure(targets[0])
    targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AugAssign) else []
    for t in targets:  # subscript targets are evaluated after the value; they must be pure
        if not _pure(t):
            return False
    if isinstance(value, ast.Call) and not _pure_call(value):
        return (all(_pure(a) for a in value.args) and all(_pure(k.value) for k in value.keywords)
                and _pure(value.func))
    return _pure(value)
