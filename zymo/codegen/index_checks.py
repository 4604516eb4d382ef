"""Entry checks that every element index of a compiled function stays in its array's bounds.

Contract: `entry_checks(src, arrays, exempt)` returns `(checked, unproven, guarded)`: `checked` is `src`
(functions at the top level of a module) with one statement put first in each function,

    if not (<conditions>):
        raise _rt.IndicesUnproven()

`unproven` the names of the functions for which no such conditions could be written, and
`guarded` those given a check (a function that indexes no array needs none). Where
the conditions hold at entry, every element read or write `a[e0, e1, ...]` of an array the
function may index (a name of `arrays` that is not in `exempt`) lands inside `a`: each integer
index `e` (not a slice) satisfies `-n <= e < n`, `n` that axis's extent, as Python's own
indexing requires (a negative index counts from the end, in NumPy and in Numba alike). Where
they fail, the function raises `IndicesUnproven` before it does anything, and its caller runs
a version compiled with Numba's `boundscheck=True` instead (`codegen/numba/backend.py`), which
raises `IndexError` at the first index out of range, or, if there is none (the conditions are
sufficient, not necessary), computes the same as the fast version.

Why: a Numba-compiled loop reads and writes memory at whatever index it is given (the user's
own `@njit` code does so too); an argument of the wrong shape would make a derivative read
other memory and return numbers that mean nothing, or corrupt the heap, where the Python
program raises `IndexError`. A check per element costs a compare and a branch in every inner
loop; these conditions are a few compares per call.

The conditions are intervals. An integer expression's interval `[lo, hi]` is written over the
function's parameters, which do not change while the conditions are evaluated:
- a constant; a parameter never assigned in the body; `a.shape[d]` or `len(a)` of an array
  parameter never rebound (or of a view `v = a[i, ...]` of one, bound once with integer
  indices only: `v.shape[d]` is `a.shape[k + d]`);
- a name every assignment of which is `name = e` or `for name in range(...)` (the union of
  those intervals: every value the name holds comes from one of them), cycles refused;
  `a, b = x.shape` gives each name its extent;
- `range(lo, hi)`, `range(lo, hi, s)` with a constant step: the values from `lo` to `hi - 1`
  (`s < 0`: from `hi + 1` to `lo`), wide enough whether or not the loop runs;
- `+`, `-`, unary minus, a product with a constant, `//` and `%` by a positive constant,
  `min`, `max`, `_rt.span(a, b)` (`max(b - a, 0)`) and `_rt.nonneg(e)` (`e`).
An index with no interval (an index read from an array, a counter `k += 1`, a product of two
names, a call) makes the function unproven: its caller compiles it with `boundscheck=True`.
So does an element index into an array whose extents are not known at entry (a view with
slices, an array made inside the function), or into a name the facts do not call an array
(it may be a list, which checks its own indices, or an array they do not know). Reverse-mode
caches (`exempt`) are sized by the program itself before it writes them (`runtime.grow`) and
are left out.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable

from .. import pyast

Interval = tuple["Lin", "Lin"]


class IndicesUnproven(Exception):
    """Raised by a compiled function whose entry check failed, before it does anything
    (module contract): its caller runs the `boundscheck=True` version instead."""


def entry_checks(src: str, arrays: Iterable[str], exempt: Iterable[str] = ()
                 ) -> tuple[str, frozenset[str], frozenset[str]]:
    """`src` with an entry check in each top-level function, the unproven functions' names,
    and the names of those given a check (module contract; a function that indexes no
    array needs none). Each check is a line of its own, before the function's first
    statement."""
    tree = ast.parse(src)
    arrays, exempt = frozenset(arrays), frozenset(exempt)
    lines = src.split("\n")
    unproven: set[str] = set()
    guarded: set[str] = set()
    inserts: list[tuple[int, str]] = []
    edits: list[tuple[int, int, int, str]] = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not fn.body:
            continue
        ranges = _Ranges(fn, arrays, exempt)
        conditions = ranges.conditions()
        if conditions is not None:
            mine = [(index.lineno - 1, index.col_offset, index.end_col_offset,
                     f"_rt.in_range({_text(lines[index.lineno - 1], index.col_offset, index.end_col_offset)}, "
                     f"{array}.shape, {d})") for index, array, d in ranges.wraps]
            spans = sorted(mine)
            if any(a[0] == b[0] and b[1] < a[2] for a, b in zip(spans, spans[1:])):
                conditions = None  # one such index inside another: bounds checks for the whole function
            else:
                edits += mine
        if conditions is None:
            unproven.add(fn.name)
        elif conditions:
            guarded.add(fn.name)
            first = fn.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):  # a docstring
                first = fn.body[1] if len(fn.body) > 1 else first
            indent = " " * first.col_offset
            least = conditions[0] if len(conditions) == 1 else f"min({', '.join(conditions)})"
            inserts.append((first.lineno - 1, f"{indent}{_margin(least)}"))
    for row, col, end, text in sorted(edits, reverse=True):  # right to left within a line
        raw = lines[row].encode()  # the offsets count UTF-8 bytes
        lines[row] = (raw[:col] + text.encode() + raw[end:]).decode()
    for row, text in sorted(inserts, reverse=True):
        lines.insert(row, text)
    return "\n".join(lines), frozenset(unproven), frozenset(guarded)


def _text(line: str, col: int, end: int) -> str:
    """The text between two of `ast`'s column offsets (UTF-8 bytes) of `line`."""
    return line.encode()[col:end].decode()


def _unindexed(node: ast.Subscript) -> bool:
    """Whether `node` reads no element by a variable of an array the analysis cannot name:
    slices only, `x.shape[d]`, or constant indices into a call's or attribute's result (a
    tuple: Numba checks constant indices into tuples when it types them)."""
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if all(isinstance(p, ast.Slice) for p in parts):
        return True
    if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return True
    return isinstance(node.value, (ast.Call, ast.Attribute)) and all(
        isinstance(p, ast.Constant) and type(p.value) is int for p in parts)


def _rt_call(node: ast.AST, name: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "_rt" and len(node.args) == 1)


def _margin(expr: str) -> str:
    """The call of `numba.margins.index_check` raising `IndicesUnproven` where `expr` (over
    parameters and their extents `a.shape[d]`) is negative: its extents and ints renamed
    `a<k>_<d>` and `i<k>`."""
    arrays: list[str] = []
    ints: list[str] = []

    class Rename(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            v = node.value
            if isinstance(v, ast.Attribute) and v.attr == "shape" and isinstance(v.value, ast.Name) \
                    and isinstance(node.slice, ast.Constant):
                if v.value.id not in arrays:
                    arrays.append(v.value.id)
                return ast.Name(f"a{arrays.index(v.value.id)}_{node.slice.value}", ast.Load())
            return self.generic_visit(node)

        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in ("max", "min"):
                return node
            if node.id not in ints:
                ints.append(node.id)
            return ast.Name(f"i{ints.index(node.id)}", ast.Load())
    spec = ast.unparse(Rename().visit(ast.parse(expr, mode="eval")))

    def tup(names: list[str]) -> str:
        return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"
    return f"_rt.index_check({spec!r}, {tup(arrays)}, {tup(ints)})"


class Lin:
    """An integer expression as `sum(coef * atom) + const` (the conditions' algebra): an atom
    is a parameter, an extent (`a.shape[0]`) or an expression kept whole (`max(...)`, a
    product of two names); `nonneg` holds the atoms known never negative (extents, and
    whatever `max` has a never-negative argument). Sums, differences and products with
    constants are exact, so `(n - 1 - _r)` over `_r <= n - 2` is `1`, not a wider interval,
    and `max`/`min` of forms that differ in their constant only keep one."""

    __slots__ = ("terms", "const", "nonneg", "loose")

    def __init__(self, terms: dict[str, int] | None = None, const: int = 0, nonneg: frozenset[str] = frozenset(),
                 loose: bool = False):
        self.terms = {a: c for a, c in (terms or {}).items() if c}
        self.const = const
        self.nonneg = nonneg & frozenset(self.terms)
        self.loose = loose  # a bound through a product or quotient of two names: sound, often far off

    @staticmethod
    def atom(text: str, nonneg: bool = False, loose: bool = False) -> Lin:
        return Lin({text: 1}, 0, frozenset({text}) if nonneg else frozenset(), loose)

    def __add__(self, other: Lin) -> Lin:
        terms = dict(self.terms)
        for a, c in other.terms.items():
            terms[a] = terms.get(a, 0) + c
        return Lin(terms, self.const + other.const, self.nonneg | other.nonneg, self.loose or other.loose)

    def __neg__(self) -> Lin:
        return self.scaled(-1)

    def __sub__(self, other: Lin) -> Lin:
        return self + (-other)

    def scaled(self, k: int) -> Lin:
        return Lin({a: k * c for a, c in self.terms.items()}, k * self.const, self.nonneg, self.loose)

    def never_negative(self) -> bool:
        return self.const >= 0 and all(c > 0 and a in self.nonneg for a, c in self.terms.items())

    def linear(self) -> tuple:
        return tuple(sorted(self.terms.items()))

    def __str__(self) -> str:
        text = ""
        for a, c in sorted(self.terms.items()):
            term = a if abs(c) == 1 else f"{abs(c)} * {a}"
            text = (f"-{term}" if c < 0 else term) if not text else f"{text} {'-' if c < 0 else '+'} {term}"
        if not text:
            return repr(self.const)
        return text if not self.const else f"{text} {'-' if self.const < 0 else '+'} {abs(self.const)}"


def _extreme(name: str, forms: list[Lin]) -> Lin:
    """`max(forms)` (`name` "max") or `min(forms)`: one form where the rest differ from it in
    the constant only, else an atom."""
    best: dict[tuple, Lin] = {}
    for f in forms:
        key = f.linear()
        kept = best.get(key)
        if kept is None or (f.const > kept.const if name == "max" else f.const < kept.const):
            best[key] = f
    if len(best) == 1:
        return next(iter(best.values()))
    args = sorted(best.values(), key=str)
    nonneg = any(f.never_negative() for f in args) if name == "max" else all(f.never_negative() for f in args)
    return Lin.atom(f"{name}({', '.join(str(f) for f in args)})", nonneg, any(f.loose for f in args))


def _times(a: Lin, b: Lin) -> Lin:
    """`a * b`: exact where one is a constant, else an atom."""
    if not a.terms:
        return b.scaled(a.const)
    if not b.terms:
        return a.scaled(b.const)
    return _opaque(f"({a}) * ({b})", loose=True)


def _opaque(text: str, nonneg: bool = False, loose: bool = False) -> Lin:
    return Lin.atom(f"({text})", nonneg, loose)


class _Unknown(Exception):
    """An interval or an extent that cannot be written."""


class _Ranges:
    """The intervals of one function's integer expressions (module contract)."""

    def __init__(self, fn: ast.FunctionDef, arrays: frozenset[str], exempt: frozenset[str]):
        self.fn = fn
        self.arrays = arrays
        self.exempt = exempt
        self.params = {a.arg for a in fn.args.args}
        self.defs: dict[str, list[ast.AST]] = {}
        self.opaque = False  # a subscript or scope the analysis cannot read: the function is unproven
        self.parent: dict[int, ast.AST] = {}
        self.subscripts: list[ast.Subscript] = []
        stack: list[ast.AST] = [fn]
        while stack:  # one walk: parents, definitions, subscripts
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
                stack.append(child)
            if isinstance(node, ast.Subscript):
                if isinstance(node.value, ast.Name):
                    self.subscripts.append(node)
                elif not _unindexed(node):
                    self.opaque = True  # `a[i][j]`, `a.T[i]`, `f(x)[i]`: bounds checks instead
            elif isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not fn:
                self.opaque = True  # names of another scope
            elif isinstance(node, ast.For):
                self._bind(node.target, node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind(target, node)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                self._bind(node.target, node)
            elif isinstance(node, (ast.With, ast.comprehension, ast.NamedExpr)):
                for sub in pyast.walk(node):
                    if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                        self._bind(sub, node)
        # the names a `range` reads (ints, whatever else is known of them)
        self.counts = {n.id for loop in pyast.walk(fn) if isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                       and _callee(loop.iter.func) in ("range", "prange")
                       for a in loop.iter.args for n in pyast.walk(a) if isinstance(n, ast.Name)}
        self.here: ast.AST = fn  # where the expression being bounded is evaluated
        self.lineages: dict[int, set[int]] = {}
        self.reversed: dict[int, str | None] = {}  # loop id -> its reversed index name, if any
        self.memo: dict[tuple[str, int], Interval] = {}
        self.busy: set[tuple[str, int]] = set()
        self.side: dict[str, None] = {}  # what the intervals assume (a divisor at least 1)
        # indices with no interval, of arrays whose extents generated code can read: (index, array, axis)
        self.wraps: list[tuple[ast.expr, str, int]] = []

    def _at(self, node: ast.AST, compute):  # type: ignore[no-untyped-def]
        """`compute()` with names read as they are at `node`."""
        before, self.here = self.here, node
        try:
            return compute()
        finally:
            self.here = before

    def _bind(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.defs.setdefault(target.id, []).append(node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for k, elt in enumerate(target.elts):
                if isinstance(elt, ast.Name):
                    self.defs.setdefault(elt.id, []).append(_Unpacked(node, k))
                else:
                    self._bind(elt, node)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, node)

    # -- the conditions ------------------------------------------------------------------------

    def conditions(self) -> list[str] | None:
        """The conditions, in order and without repeats, those that always hold left out;
        None where some index has no interval."""
        strongest: dict[tuple, Lin] = {}  # `L + c >= 0` for several c: the least c implies the rest
        if self.opaque or self.fn.body[0].lineno == self.fn.lineno:  # (or a one-line function)
            return None
        try:
            for node in sorted(self.subscripts, key=lambda n: (n.lineno, n.col_offset)):
                for form in self._subscript(node):  # each `form >= 0`
                    kept = strongest.get(form.linear())
                    if not form.never_negative() and (kept is None or form.const < kept.const):
                        strongest[form.linear()] = form
        except _Unknown:
            return None
        return list(self.side) + [str(form) for form in strongest.values()]

    def _subscript(self, node: ast.Subscript) -> list[Lin]:
        name = node.value.id  # type: ignore[attr-defined]
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if all(isinstance(p, ast.Slice) for p in parts):
            return []
        if name in self.exempt:
            return []
        if any(isinstance(p, ast.Constant) and (p.value is None or p.value is Ellipsis) for p in parts):
            raise _Unknown(name)  # a new axis or an ellipsis moves the axes: bounds checks instead
        if name not in self.arrays and not self._made(name):
            if all(isinstance(p, ast.Constant) for p in parts):
                return []  # a tuple's item: Numba checks constant indices when it types them
            raise _Unknown(name)
        out = []
        for d, part in enumerate(parts):
            if isinstance(part, ast.Slice):
                continue
            side = dict(self.side)
            try:
                lo, hi = self._at(node, lambda part=part: self.interval(part))
                n = self.extent(name, d)
                if lo.loose or hi.loose:  # an entry check far from the truth would fail where nothing does
                    raise _Unknown(ast.unparse(part))
            except _Unknown:
                self.side = side  # what this index's intervals assumed is not needed
                inner = part.args[0] if _rt_call(part, "nonneg") else part  # type: ignore[attr-defined]
                if inner.lineno != inner.end_lineno:
                    raise
                self.wraps.append((inner, name, d))  # checked where it is read: `_rt.in_range`
                continue
            out.append(lo + n)  # lo >= -n
            out.append(n - hi - Lin(const=1))  # hi < n
        return out

    # -- extents -------------------------------------------------------------------------------

    def _made(self, name: str) -> bool:
        """Whether `name` is bound once, in the function, to a new array or to a view of an
        array with integer indices (its extents are then known: `extent`)."""
        defs = [n for n in self.defs.get(name, []) if not _same_array(name, n)]
        if name in self.params or len(defs) != 1 or not isinstance(defs[0], ast.Assign):
            return False
        value = defs[0].value
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            return value.value.id in self.arrays or self._made(value.value.id)
        return _allocated_shape(value) is not None

    def _integer(self, part: ast.expr, at: ast.AST) -> bool:
        """Whether the index `part` (read at `at`) is one integer (an interval, no array in it),
        not a slice, an index array or a mask."""
        if isinstance(part, (ast.Slice, ast.Starred)) or any(
                isinstance(n, ast.Name) and (n.id in self.arrays or self._made(n.id)) for n in pyast.walk(part)):
            return False
        side = dict(self.side)
        try:
            self._at(at, lambda: self.interval(part))
            return True
        except _Unknown:
            return False
        finally:
            self.side = side

    def extent(self, name: str, d: int) -> Lin:
        """`name.shape[d]` written over the parameters (module contract)."""
        defs = [n for n in self.defs.get(name, []) if not _same_array(name, n)]
        if not defs and name in self.params and name in self.arrays:
            return Lin.atom(f"{name}.shape[{d}]", nonneg=True)
        if len(defs) == 1 and name not in self.params and isinstance(defs[0], ast.Assign) \
                and len(defs[0].targets) == 1:
            value = defs[0].value
            if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
                parts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
                if all(self._integer(p, defs[0]) for p in parts):  # a view: the axes after those indexed
                    return self.extent(value.value.id, len(parts) + d)
            shape = _allocated_shape(value)
            if isinstance(shape, str):  # `np.empty_like(x)`, `x.copy()`: x's
                return self.extent(shape, d)
            if shape is not None and d < len(shape):
                if isinstance(shape[d], ast.Name) and shape[d].id in self.params and shape[d].id not in self.counts:
                    raise _Unknown(name)  # a parameter may be a tuple (a whole shape), unless a loop counts to it
                return self._at(defs[0], lambda: self.interval(shape[d]))[0]  # its least extent
        raise _Unknown(name)

    # -- intervals -----------------------------------------------------------------------------

    def interval(self, node: ast.AST) -> Interval:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return Lin(const=node.value), Lin(const=node.value)
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            lo, hi = self.interval(node.operand)
            return -hi, -lo
        if isinstance(node, ast.BinOp):
            return self._binop(node)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "shape" and isinstance(node.value.value, ast.Name) \
                and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int:
            n = self.extent(node.value.value.id, node.slice.value)
            return n, n
        if isinstance(node, ast.Call):
            return self._call(node)
        raise _Unknown(ast.dump(node))

    def _binop(self, node: ast.BinOp) -> Interval:
        op = node.op
        if isinstance(op, (ast.Add, ast.Sub)):
            (alo, ahi), (blo, bhi) = self.interval(node.left), self.interval(node.right)
            if isinstance(op, ast.Add):
                return alo + blo, ahi + bhi
            return alo - bhi, ahi - blo
        if isinstance(op, ast.Mult):
            for const, other in ((node.left, node.right), (node.right, node.left)):
                c = _int_constant(const)
                if c is not None:
                    lo, hi = self.interval(other)
                    return (lo.scaled(c), hi.scaled(c)) if c >= 0 else (hi.scaled(c), lo.scaled(c))
            (alo, ahi), (blo, bhi) = self.interval(node.left), self.interval(node.right)
            corners = [_times(a, b) for a in (alo, ahi) for b in (blo, bhi)]
            return _extreme("min", corners), _extreme("max", corners)
        if isinstance(op, ast.FloorDiv) and _int_constant(node.right) is None:
            # by a divisor of at least 1 (checked): monotone in each operand, extremes at corners
            (alo, ahi), (klo, khi) = self.interval(node.left), self.interval(node.right)
            if not (klo - Lin(const=1)).never_negative():
                self.side[str(klo - Lin(const=1))] = None
            return (_extreme("min", [_opaque(f"({alo}) // ({k})", loose=True) for k in (klo, khi)]),
                    _extreme("max", [_opaque(f"({ahi}) // ({k})", loose=True) for k in (klo, khi)]))
        c = _int_constant(node.right)
        if c is not None and c > 0:
            if isinstance(op, ast.FloorDiv):  # monotone
                lo, hi = self.interval(node.left)
                return tuple(Lin(const=f.const // c) if not f.terms
                             else _opaque(f"({f}) // {c}", f.never_negative(), f.loose)
                             for f in (lo, hi))  # type: ignore[return-value]
            if isinstance(op, ast.Mod):  # Python's: in [0, c) whatever the sign
                self.interval(node.left)  # an int: the left operand has an interval
                return Lin(const=0), Lin(const=c - 1)
        raise _Unknown(ast.dump(node))

    def _call(self, node: ast.Call) -> Interval:
        f, args = node.func, node.args
        if node.keywords or any(isinstance(a, ast.Starred) for a in args):
            raise _Unknown(ast.dump(node))
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt":
            if f.attr == "nonneg" and len(args) == 1:
                return self.interval(args[0])
            if f.attr == "span" and len(args) == 2:  # max(b - a, 0)
                (alo, ahi), (blo, bhi) = self.interval(args[0]), self.interval(args[1])
                return _extreme("max", [blo - ahi, Lin()]), _extreme("max", [bhi - alo, Lin()])
        if isinstance(f, ast.Name) and f.id in ("min", "max") and len(args) >= 2:
            bounds = [self.interval(a) for a in args]
            return _extreme(f.id, [lo for lo, _ in bounds]), _extreme(f.id, [hi for _, hi in bounds])
        if isinstance(f, ast.Name) and f.id == "len" and len(args) == 1 and isinstance(args[0], ast.Name):
            n = self.extent(args[0].id, 0)
            return n, n
        raise _Unknown(ast.dump(node))

    def _name(self, name: str) -> Interval:
        defs = self.defs.get(name, [])
        if name in self.params and not defs:
            if name in self.arrays:
                raise _Unknown(name)
            return Lin.atom(name), Lin.atom(name)
        if not defs or name in self.params:
            raise _Unknown(name)  # a global, or a parameter also assigned (its entry value unknown here)
        loop = self._loop_of(name, defs)
        if loop is None:
            loop = self._reaching(name, defs)
        key = (name, id(loop))
        if key in self.memo:
            return self.memo[key]
        if key in self.busy:
            raise _Unknown(name)  # defined through itself
        self.busy.add(key)
        try:
            if loop is not None:  # the loop over `name` around here, or the assignment that reaches here
                got = self._definition(name, loop)
            else:  # every value it holds comes from one of its assignments
                bounds = [self._definition(name, d) for d in defs]
                got = _extreme("min", [lo for lo, _ in bounds]), _extreme("max", [hi for _, hi in bounds])
        finally:
            self.busy.discard(key)
        self.memo[key] = got
        return got

    def _block(self, args: list[ast.expr]) -> Interval | None:
        """The values of a block's loop `range(at + b * n // k, at + (b + 1) * n // k)`, `b` the
        variable of a loop over `range(k)` (`codegen/blocks.py`): over all blocks, `at` to
        `at + n - 1`; None for any other range."""
        (at, start), (at2, stop) = _split_start(args[0]), _split_start(args[1])
        same = lambda a, b: ast.dump(a) == ast.dump(b) if a is not None and b is not None else a is b  # noqa: E731
        if not (same(at, at2) and isinstance(start, ast.BinOp) and isinstance(start.op, ast.FloorDiv)
                and isinstance(stop, ast.BinOp) and isinstance(stop.op, ast.FloorDiv)
                and same(start.right, stop.right)):
            return None
        first, last = start.left, stop.left
        if not (isinstance(first, ast.BinOp) and isinstance(first.op, ast.Mult) and isinstance(first.left, ast.Name)
                and isinstance(last, ast.BinOp) and isinstance(last.op, ast.Mult) and same(first.right, last.right)
                and ast.dump(last.left) == ast.dump(ast.BinOp(first.left, ast.Add(), ast.Constant(1)))):
            return None
        b, n, k = first.left.id, first.right, start.right
        loops = self.defs.get(b, [])
        if not (len(loops) == 1 and isinstance(loops[0], ast.For) and isinstance(loops[0].iter, ast.Call)
                and _callee(loops[0].iter.func) in ("range", "prange") and len(loops[0].iter.args) == 1
                and same(loops[0].iter.args[0], k)):
            return None
        lo, hi = self.interval(at) if at is not None else (Lin(), Lin())
        return lo, hi + self.interval(n)[1] - Lin(const=1)

    def _reversed_var(self, loop: ast.For) -> str | None:
        if id(loop) not in self.reversed:
            self.reversed[id(loop)] = _reversed_var(loop)
        return self.reversed[id(loop)]

    def _lineage(self, d: ast.AST) -> set[int]:
        """The ids of the definition `d`'s statement and of every node around it."""
        node = d.stmt if isinstance(d, _Unpacked) else d
        got = self.lineages.get(id(node))
        if got is None:
            got = self.lineages[id(node)] = {id(node)}
            while id(node) in self.parent:
                node = self.parent[id(node)]
                got.add(id(node))
        return got

    def _reaching(self, name: str, defs: list[ast.AST]) -> ast.AST | None:
        """The assignment `name = e` that alone reaches `self.here`: an earlier statement of a
        statement list around it, with no other assignment of `name` in the statements from it
        to the one holding `self.here` (a loop among them that assigns `name` may reach
        `self.here` again on its next iteration: then None)."""
        stmts_of = {id(d) for d in defs if isinstance(d, ast.Assign) and len(d.targets) == 1}
        node = self.here
        while id(node) in self.parent:
            parent = self.parent[id(node)]
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(parent, field, None)
                if not isinstance(stmts, list):
                    continue
                at = next((k for k, st in enumerate(stmts) if st is node), None)
                if at is None:
                    continue
                for j in range(at - 1, -1, -1):
                    if id(stmts[j]) in stmts_of:
                        between = {id(st) for st in stmts[j + 1:at + 1]}
                        others = [d for d in defs if d is not stmts[j] and self._lineage(d) & between]
                        return None if others else stmts[j]
                    if any(id(stmts[j]) in self._lineage(d) for d in defs):
                        return None
            node = parent
        return None

    def _loop_of(self, name: str, defs: list[ast.AST]) -> ast.AST | None:
        """The definition of `name` at `self.here` where a loop gives it: the innermost
        `for name in ...` around it (not counting a loop's own header), or the head
        `name = N - 1 - _r` of a reversed loop around it (`loop_forms.reversed_head`), where
        nothing else inside that loop assigns `name`."""
        node = self.here
        while id(node) in self.parent:
            node = self.parent[id(node)]
            if not isinstance(node, ast.For) or not isinstance(node.target, ast.Name):
                continue
            own: ast.AST | None = None
            if node.target.id == name:
                own = node
            elif node.body and isinstance(node.body[0], ast.Assign) and any(d is node.body[0] for d in defs) \
                    and self._reversed_var(node) == name:
                own = node.body[0]
            if own is not None:
                if all(d is own or id(node) not in self._lineage(d) for d in defs):
                    return own
                return None
        return None

    def _definition(self, name: str, node: ast.AST) -> Interval:
        if isinstance(node, _Unpacked):
            stmt = node.stmt
            value = stmt.value if isinstance(stmt, ast.Assign) else None
            if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name):
                n = self.extent(value.value.id, node.position)
                return n, n
            raise _Unknown(name)
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            loop = self.parent.get(id(node))
            if isinstance(loop, ast.For) and loop.body and loop.body[0] is node and self._reversed_var(loop) == name:
                from .loop_forms import reversed_head  # (outline, which loop_forms imports, imports this module)

                head = reversed_head(loop)  # `name = N - 1 - _r` over range(N) or range(span(lo, N))
                assert head is not None
                _, lo, stop = head
                return self._at(loop, lambda: (self.interval(lo)[0] if lo is not None else Lin(),
                                               self.interval(stop)[1] - Lin(const=1)))
            value = node.value
            return self._at(node, lambda: self.interval(value))
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and not node.orelse:
            return self._at(node, lambda: self._range(node.iter))
        raise _Unknown(name)

    def _range(self, it: ast.AST) -> Interval:
        if not (isinstance(it, ast.Call) and not it.keywords and 1 <= len(it.args) <= 3
                and _callee(it.func) in ("range", "prange")):
            raise _Unknown(ast.dump(it))
        args = it.args
        if len(args) == 1:
            _, hi = self.interval(args[0])
            return Lin(), hi - Lin(const=1)
        block = self._block(args) if len(args) == 2 else None
        if block is not None:
            return block
        step = _int_constant(args[2]) if len(args) == 3 else 1
        if step is None or step == 0:
            raise _Unknown(ast.dump(it))
        (alo, ahi), (blo, bhi) = self.interval(args[0]), self.interval(args[1])
        if step > 0:
            return alo, bhi - Lin(const=1)
        return blo + Lin(const=1), ahi


_ALLOCATIONS = frozenset({"empty", "zeros", "ones", "full"})
_LIKE = frozenset({"empty_like", "zeros_like", "ones_like", "full_like", "copy"})
# calls `d = _rt.f(d, ...)` that return their first argument when it is an array (accumulations)
_SAME = frozenset({"acc_ew", "acc_extreme", "acc_unbroadcast"})


def allocated(src: str) -> frozenset[str]:
    """The names `src` binds only to new arrays (`np.empty(...)`, `np.zeros_like(x)`, ...):
    arrays, whatever else is known of them (a program passes such buffers to its kernels)."""
    binds: dict[str, list[bool]] = {}
    for node in pyast.walk(ast.parse(src)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            binds.setdefault(node.targets[0].id, []).append(_allocated_shape(node.value) is not None)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            binds.setdefault(node.id, [])
        elif isinstance(node, ast.arg):
            binds.setdefault(node.arg, []).append(False)
    return frozenset(name for name, made in binds.items() if made and all(made))


def _allocated_shape(value: ast.AST) -> list[ast.expr] | str | None:
    """The shape a new array `value` gets (`np.empty(shape, ...)`, `_rt.zeros(shape, ...)`:
    its expressions), or the name of the array whose shape it copies (`np.zeros_like(x)`,
    `np.copy(x)`, `x.copy()`); None for anything else."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return None
    f, args = value.func, value.args
    if isinstance(f.value, ast.Name) and f.value.id in ("np", "_rt") and args:
        if f.attr in _ALLOCATIONS:
            shape = args[0]
            return list(shape.elts) if isinstance(shape, ast.Tuple) else [shape]
        if f.attr in _LIKE and isinstance(args[0], ast.Name):
            return args[0].id
    if f.attr == "copy" and not args and isinstance(f.value, ast.Name):
        return f.value.id
    if isinstance(f.value, ast.Name) and f.value.id == "_rt":  # the Numba backend's elementwise arrays
        if f.attr == "ew_like" and args and isinstance(args[0], ast.Name):
            return args[0].id  # a new array of x's shape
        if f.attr == "ew_new" and len(args) == 2 and isinstance(args[1], ast.Tuple) and len(args[1].elts) == 1 \
                and isinstance(args[1].elts[0], ast.Name):
            return args[1].elts[0].id  # of one operand: its shape
    return None


def _same_array(name: str, node: ast.AST) -> bool:
    """Whether `node` (an assignment of `name`) leaves `name` the same array: `name += e`,
    `name = _rt.acc_ew(name, ...)` and the other accumulations of `_SAME`."""
    if isinstance(node, ast.AugAssign):
        return True
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args:
        f, first = node.value.func, node.value.args[0]
        return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
                and f.attr in _SAME and isinstance(first, ast.Name) and first.id == name)
    return False


def _reversed_var(loop: ast.For) -> str | None:
    """The index name of a reversed loop (`loop_forms.reversed_head`), else None."""
    from .loop_forms import reversed_head

    if not (isinstance(loop.iter, ast.Call) and isinstance(loop.target, ast.Name)):
        return None
    head = reversed_head(loop)
    return None if head is None else head[0]


def _split_start(e: ast.expr) -> tuple[ast.expr | None, ast.expr]:
    """`(at, rest)` of `at + rest` where `rest` is a quotient, else `(None, e)`."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and isinstance(e.right, ast.BinOp) \
            and isinstance(e.right.op, ast.FloorDiv):
        return e.left, e.right
    return None, e


class _Unpacked:
    """The `position`-th name of a tuple target of `stmt`."""

    def __init__(self, stmt: ast.AST, position: int):
        self.stmt, self.position = stmt, position


def _callee(f: ast.AST) -> str:
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def _int_constant(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_constant(node.operand)
        return None if inner is None else -inner
    return None
