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
  arguments nor keep them (`_PURE_NP`, `math`, `_RT_PURE`);
- every statement in between assigns pure expressions to plain names, none of
  which the moved expression reads (no store into an array, no `+=`, no loop or
  branch, no other call);
- in the reading statement, nothing that could write runs before the read (its
  only impure call, if any, is the statement's own outermost call, whose arguments
  are evaluated first);
- the read is not inside a loop or branch the definition is outside of.
A copy `a = b` is substituted under a weaker condition: `b` is not rebound in between
(`a` and `b` are one object, so writes into it are seen through either name).
"""
from __future__ import annotations

import ast

# NumPy functions that return new values and write nothing (without `out=`)
_PURE_NP = {
    "abs", "absolute", "add", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh",
    "cbrt", "conj", "conjugate", "copy", "cos", "cosh", "deg2rad", "degrees", "divide", "exp", "exp2",
    "expm1", "fabs", "float64", "hypot", "imag", "log", "log10", "log1p", "log2", "logaddexp",
    "maximum", "minimum", "multiply", "negative", "power", "rad2deg", "radians", "real", "reciprocal",
    "sign", "sin", "sinh", "sqrt", "square", "subtract", "tan", "tanh", "true_divide", "where",
    "zeros_like", "empty_like", "ones_like", "full_like", "sum", "prod", "mean", "dot", "matmul",
    "outer", "transpose", "clip", "fmax", "fmin",
}
# zymo runtime helpers that return new values (or an argument unchanged) and write nothing
_RT_PURE = {"unbroadcast", "expand_reduced", "as_tangent", "as_shape", "trip", "negate"}


def fuse(src: str) -> str:
    """`src` with single-use temporaries substituted into their readers (module contract).

    Only the statements that change are rewritten (one statement per line, as zymo writes
    them), so comments and the layout of the rest stay as they were."""
    tree = ast.parse(src)
    lines: list[str | None] = src.split("\n")
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            _Function(node, lines).run()
    return "\n".join(line for line in lines if line is not None)


def _pure_call(call: ast.Call) -> bool:
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
        return False
    mod, name = f.value.id, f.attr
    if any(k.arg == "out" for k in call.keywords):
        return False
    return (mod == "np" and name in _PURE_NP) or mod == "math" or (mod == "_rt" and name in _RT_PURE)


_PURE_NODES = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Subscript, ast.Attribute,
               ast.Slice, ast.Tuple, ast.keyword, ast.operator, ast.unaryop, ast.cmpop, ast.expr_context)


def _pure(e: ast.AST) -> bool:
    for node in ast.walk(e):
        if isinstance(node, ast.Call):
            if not _pure_call(node):
                return False
        elif not isinstance(node, _PURE_NODES):
            return False
    return True


def _stores(st: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(st) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}


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
    return {n.id for n in ast.walk(e) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


class _Function:
    def __init__(self, fn: ast.FunctionDef, lines: list[str | None]):
        self.fn = fn
        self.lines = lines
        self._aug = None
        self.stores: dict[str, int] = {}
        self.loads: dict[str, int] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name):
                table = self.loads if isinstance(node.ctx, ast.Load) else self.stores
                table[node.id] = table.get(node.id, 0) + 1
                if isinstance(node.ctx, ast.Store) and self._aug_target(node):
                    self.loads[node.id] = self.loads.get(node.id, 0) + 1
            elif isinstance(node, ast.arg):
                self.stores[node.arg] = self.stores.get(node.arg, 0) + 1

    def _aug_target(self, node: ast.Name) -> bool:
        if self._aug is None:
            self._aug = {id(n.target) for n in ast.walk(self.fn) if isinstance(n, ast.AugAssign)}
        return id(node) in self._aug

    def run(self) -> bool:
        copies = self._propagate_copies(self.fn.body)
        return self._block(self.fn.body) or copies

    def _propagate_copies(self, body: list[ast.stmt]) -> bool:
        """`a = b`, each name stored once, `b` stored before (a parameter or an earlier
        statement of this list), every read of `a` later in this list: read `b` instead.
        Reads in the header of a loop or branch are left alone (and keep the copy)."""
        changed = False
        for st in body:
            for field in ("body", "orelse"):
                inner = getattr(st, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    changed |= self._propagate_copies(inner)
        params = {a.arg for a in self.fn.args.args}
        i = 0
        while i < len(body):
            st = body[i]
            if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                    and isinstance(st.value, ast.Name)):
                a, b = st.targets[0].id, st.value.id
                before = b in params or any(b in _stores(earlier) for earlier in body[:i])
                if (self.stores.get(a) == 1 and self.stores.get(b) == 1 and before
                        and self._rename_later(body[i + 1:], a, b)):
                    self.lines[st.lineno - 1] = None
                    del body[i]
                    changed = True
                    continue
            i += 1
        return changed

    def _rename_later(self, later: list[ast.stmt], a: str, b: str) -> bool:
        """Rename every read of `a` to `b` in `later` (all of them must be there), rewriting
        the simple statements that change; False (nothing renamed) when some read of `a`
        is elsewhere or in the header of a compound statement."""
        found, sites = 0, []
        for st in later:
            for node in ast.walk(st):
                if isinstance(node, ast.stmt) and any(
                        isinstance(n, ast.Name) and n.id == a and isinstance(n.ctx, ast.Load)
                        for n in _header_nodes(node)):
                    sites.append(node)
        for st in sites:
            if isinstance(st, (ast.For, ast.While, ast.If, ast.With)):
                return False
        for st in sites:
            for n in ast.walk(st):
                if isinstance(n, ast.Name) and n.id == a and isinstance(n.ctx, ast.Load):
                    found += 1
        if found != self.loads.get(a):
            return False
        for st in sites:
            if st.lineno != st.end_lineno:
                raise AssertionError("zymo writes one statement per line")
            for n in ast.walk(st):
                if isinstance(n, ast.Name) and n.id == a and isinstance(n.ctx, ast.Load):
                    n.id = b
            old = self.lines[st.lineno - 1]
            self.lines[st.lineno - 1] = old[:len(old) - len(old.lstrip())] + ast.unparse(st)
        self.loads[b] = self.loads.get(b, 0) + found
        self.loads[a] = 0
        return True

    def _block(self, body: list[ast.stmt]) -> bool:
        changed = False
        for st in body:
            for field in ("body", "orelse"):
                inner = getattr(st, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    changed |= self._block(inner)
        i = 0
        while i < len(body):
            if self._substitute(body, i):
                changed = True
            else:
                i += 1
        return changed

    def _substitute(self, body: list[ast.stmt], i: int) -> bool:
        """Substitute the temporary defined by `body[i]` into its reader; True if done."""
        st = body[i]
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
            return False
        name = st.targets[0].id
        if self.stores.get(name) != 1 or self.loads.get(name) != 1 or not _pure(st.value):
            return False
        reads = _reads(st.value)
        copy = isinstance(st.value, ast.Name)  # `a = b`: `a` is `b` until `b` is rebound
        for j in range(i + 1, len(body)):
            later = body[j]
            site = self._site(later, name)
            if site is not None:
                if not self._safe_reader(later, site):
                    return False
                parent, field, seq = site
                if seq is None:
                    setattr(parent, field, st.value)
                else:
                    seq[field] = st.value
                if st.lineno != st.end_lineno or later.lineno != later.end_lineno:
                    raise AssertionError("zymo writes one statement per line")
                old = self.lines[later.lineno - 1]
                indent = old[:len(old) - len(old.lstrip())]
                self.lines[later.lineno - 1] = indent + ast.unparse(later)
                self.lines[st.lineno - 1] = None
                del body[i]
                return True
            if copy:
                if st.value.id in _stores(later):
                    return False
                continue
            # an intervening statement: a pure assignment to names the expression does not read
            if not (isinstance(later, ast.Assign) and _pure(later.value)
                    and all(isinstance(t, ast.Name) for t in later.targets)
                    and not reads & {t.id for t in later.targets}):
                return False
        return False

    @staticmethod
    def _site(st: ast.stmt, name: str):
        """(parent, field, list or None) of the load of `name` in simple statement `st`;
        None when `st` does not read it; a failing marker when `st` is compound."""
        for parent in ast.walk(st):
            for field, value in ast.iter_fields(parent):
                if isinstance(value, ast.Name) and value.id == name and isinstance(value.ctx, ast.Load):
                    return parent, field, None
                if isinstance(value, list):
                    for k, item in enumerate(value):
                        if isinstance(item, ast.Name) and item.id == name and isinstance(item.ctx, ast.Load):
                            return parent, k, value
        return None

    @staticmethod
    def _safe_reader(st: ast.stmt, site) -> bool:
        """`st` evaluates the read before anything in it can write, and is not compound."""
        if isinstance(st, (ast.Assign, ast.AugAssign, ast.Return)):
            value = st.value
        elif isinstance(st, ast.Expr):
            value = st.value
        else:
            return False
        if value is None:
            return False
        targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AugAssign) else []
        for t in targets:  # subscript targets are evaluated after the value; they must be pure
            if not _pure(t):
                return False
        if isinstance(value, ast.Call) and not _pure_call(value):
            return all(_pure(a) for a in value.args) and all(_pure(k.value) for k in value.keywords) \
                and _pure(value.func)
        return _pure(value)
