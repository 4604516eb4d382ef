"""Runs of elementwise statements fused into one loop nest, for the Numba backend: the
recognizer (source to source; the intrinsic that runs a run is `ew_fused.ew_run`).

Contract: `fuse_runs(src, arrays, ints)` takes the source `ew_rewrite.elementwise_statements` wrote
and replaces each run (below) of two or more consecutive statements of one block, each one of

    t = _rt.ew_new('e', (...))         a new array `e` (a temporary of the run)
    _rt.ew_set(v, 'e', (...))          `v[...] = e`
    d = _rt.acc_ew(d, 'e', (...))      `d += e`, `d` a name of `arrays` (an array: no rebinding)

with one statement `_rt.ew_run('<spec>', (x0, x1, ...))` on the run's first line (the
others are left blank: line numbers stay those of `src`), `(t, ...) = _rt.ew_run(...)` when
temporaries are read outside the run. The spec lists the statements over the run's operands
`x<i>` (each distinct operand text once) and temporaries `t<k>`, separated by `; `:
`t0 = 0.2 * x0`, `x0[...] = 0.0`, `x1 += t0`; then `-> t0, ...`, the temporaries returned
(read after the run, or before it in a loop).

A statement joins a run when every operand and target is a name or a view (a subscript of a
name with a slice: an array, never an element read early), none mentions a name the run binds
(but a whole temporary), its target is not a temporary, it binds no name twice, and it is
the first in-place statement or follows the run's in-place statements without a temporary in
between (one primal statement's adjoint: a temporary, then the statements that use it; runs
of another shape would fail `ew_run`'s run-time check every time), unless that temporary
reads an array a statement of the run writes in place (it has that statement's shape).
Names bound in a block to the same view (`_SameViews`: arrays `b = a[i]` after `c = a[i]`, both
bound once in the function, the index basic, its names in `ints`, nothing storing to `a` or `i`
in between) are read as the first one: reverse mode names each use of `a[i]` apart, and
softmax's row adjoint (`dout[i]` divided, a number added, read, zeroed) is one loop instead of
three. It also ends the run
before a statement whose accesses conflict with the run's on one root array (`_roots`: views
bound as `v = a[...]` in the function): a different view of a root the run writes (or that
writes what the run reads), unless both only accumulate (`+=`). That split is a heuristic
for speed only: what `ew_run` computes is NumPy's whatever the source's names hold (it
checks shapes and overlap at run time and runs the statements one by one otherwise).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ... import pyast
from .lines import alone


@dataclass
class _Stmt:
    """One candidate statement: `kind` "new" (`t = e`), "set" (`v[...] = e`) or "acc"
    (`d += e`); `target` the bound name or the target's text; `expr` over `x<i>`; `operands`
    the operands' texts, in `x<i>` order; `node` the statement."""
    kind: str
    target: str
    expr: ast.expr
    operands: list[str]
    node: ast.stmt


def _rt_call(e: ast.expr | None, name: str, nargs: int) -> ast.Call | None:
    ok = (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name)
          and e.func.value.id == "_rt" and e.func.attr == name and len(e.args) == nargs and not e.keywords)
    return e if ok else None  # type: ignore[return-value]


def _access(e: ast.expr) -> bool:
    """A name, or a view: a subscript of a name whose index has a slice (of names and numbers)."""
    if isinstance(e, ast.Name):
        return True
    if not (isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name)):
        return False
    parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
    simple = (ast.Name, ast.Constant, ast.UnaryOp, ast.Slice)
    return any(isinstance(p, ast.Slice) for p in parts) and all(
        isinstance(n, simple + (ast.Load, ast.USub)) for p in parts for n in pyast.walk(p))


def _candidate(node: ast.stmt, arrays: frozenset[str]) -> _Stmt | None:
    """The statement as a `_Stmt`, or None when it is not one of the module contract's."""
    value = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
    if isinstance(node, ast.Assign) and (len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name)):
        return None
    if isinstance(node, ast.Assign) and (call := _rt_call(value, "ew_new", 2)) is not None:
        kind, target, expr, xs = "new", node.targets[0].id, call.args[0], call.args[1]  # type: ignore[union-attr]
    elif isinstance(node, ast.Expr) and (call := _rt_call(value, "ew_set", 3)) is not None:
        kind, target, expr, xs = "set", call.args[0], call.args[1], call.args[2]
    elif isinstance(node, ast.Assign) and (call := _rt_call(value, "acc_ew", 3)) is not None:
        d = node.targets[0].id  # type: ignore[union-attr]
        if not (isinstance(call.args[0], ast.Name) and call.args[0].id == d and d in arrays):
            return None
        kind, target, expr, xs = "acc", d, call.args[1], call.args[2]
    else:
        return None
    if isinstance(target, ast.expr):
        if not _access(target):
            return None
        target = ast.unparse(target)
    if not (isinstance(expr, ast.Constant) and isinstance(expr.value, str) and isinstance(xs, ast.Tuple)
            and all(_access(x) for x in xs.elts)):
        return None
    return _Stmt(kind, target, ast.parse(expr.value, mode="eval").body, [ast.unparse(x) for x in xs.elts], node)


def _names(text: str) -> set[str]:
    return {n.id for n in pyast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}


def _roots(tree: ast.AST) -> dict[str, str]:
    """Each name bound once in the function, to a view `a[...]` of a name: the root name its
    memory belongs to (followed through views of views)."""
    stores: dict[str, int] = {}
    for n in pyast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stores[n.id] = stores.get(n.id, 0) + 1
    parent = {n.targets[0].id: n.value.value.id for n in pyast.walk(tree)  # type: ignore[attr-defined]
              if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
              and stores[n.targets[0].id] == 1 and isinstance(n.value, ast.Subscript)
              and isinstance(n.value.value, ast.Name) and _access(n.value)}
    out = {}
    for name in parent:
        root, seen = name, set()
        while root in parent and root not in seen:
            seen.add(root)
            root = parent[root]
        out[name] = root
    return out


@dataclass
class _Run:
    """A run being gathered: its statements, the names it binds, and its accesses per root
    array: `(text, kind)`, kind "read", "set" or "acc"."""
    stmts: list[_Stmt] = field(default_factory=list)
    bound: set[str] = field(default_factory=set)
    accesses: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def in_place(self) -> bool:
        return any(s.kind != "new" for s in self.stmts)


def _accesses(s: _Stmt, run: _Run, roots: dict[str, str]) -> list[tuple[str, str, str]]:
    """`(root, text, kind)` of each memory access of `s` (temporaries of the run are none)."""
    out = [(roots.get(_base(x), _base(x)), x, "read") for x in s.operands if x not in run.bound]
    if s.kind != "new":
        out.append((roots.get(_base(s.target), _base(s.target)), s.target, s.kind))
    return out


def _base(text: str) -> str:
    return text.split("[", 1)[0]


def _joins(s: _Stmt, run: _Run, roots: dict[str, str]) -> bool:
    """Whether `s` may join `run` (module contract)."""
    if s.kind == "new" and (s.target in run.bound or run.in_place() and not _reads_written(s, run)):
        return False
    if s.kind != "new" and _names(s.target) & run.bound:
        return False
    for x in s.operands:
        if x not in run.bound and _names(x) & run.bound:
            return False
    for root, text, kind in _accesses(s, run, roots):
        for other, other_kind in run.accesses.get(root, []):
            writes = kind != "read" or other_kind != "read"
            if writes and other != text and not (kind == "acc" and other_kind == "acc"):
                return False
    return True


def _reads_written(s: _Stmt, run: _Run) -> bool:
    """Whether the new temporary `s` reads an array the run writes in place (the same text):
    then it has that statement's shape, and joins after the in-place statements."""
    return bool(set(s.operands) & {t.target for t in run.stmts if t.kind != "new"})


class _SameViews:
    """Names bound in one block to the same view: `b = a[k]` after `c = a[k]`, `b` and `c` each
    bound once in the function and known arrays (`arrays`), the index basic (every part a
    slice, an int constant or a name of `ints`, ints never negative, or arithmetic of those:
    never an array, so `a[k]` is a view, not a copy), nothing storing to `a` or to a name of the
    index in between: `b` and `c` hold the same memory (a view copies nothing; writes through
    either, or through `a`, reach both) wherever the block reads them after both. Reverse mode
    writes such a name for each use of `a[i]` (`dout_1`, `dout_2`, ...); read as the first one,
    statements on them fuse, element for element (`ew_run` sees one operand, not two that
    overlap)."""

    def __init__(self, once: frozenset[str], arrays: frozenset[str], ints: frozenset[str]):
        self.once, self.arrays, self.ints = once, arrays, ints
        self.first: dict[str, tuple[str, set[str]]] = {}  # view text -> (first name, names it reads)
        self.alias: dict[str, str] = {}  # name -> the first name bound to its view

    def see(self, node: ast.stmt) -> None:
        stored = {n.id for n in pyast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        self.first = {t: v for t, v in self.first.items() if not (v[1] & stored)}
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in self.once and node.targets[0].id in self.arrays
                and isinstance(node.value, ast.Subscript) and isinstance(node.value.value, ast.Name)
                and _basic(node.value.slice, self.ints)):
            return
        name, text = node.targets[0].id, ast.unparse(node.value)
        if text in self.first:
            self.alias[name] = self.first[text][0]
        else:
            self.first[text] = (name, {n.id for n in pyast.walk(node.value) if isinstance(n, ast.Name)})

    def rename(self, s: _Stmt) -> None:
        if not self.alias:
            return

        def canon(text: str) -> str:
            tree = ast.parse(text, mode="eval")
            base = tree.body.value if isinstance(tree.body, ast.Subscript) else tree.body
            if isinstance(base, ast.Name) and base.id in self.alias:
                base.id = self.alias[base.id]
                return ast.unparse(tree)
            return text
        s.operands = [canon(x) for x in s.operands]
        if s.kind != "new":
            s.target = canon(s.target)


def _basic(index: ast.expr, ints: frozenset[str]) -> bool:
    """Whether every part of the subscript `index` is a slice or an int (a constant, a name of
    `ints`, `_rt.nonneg` of one, or `+ - *` of those): basic indexing, a view."""
    def is_int(e: ast.expr) -> bool:
        if isinstance(e, ast.Constant):
            return type(e.value) is int
        if isinstance(e, ast.Name):
            return e.id in ints
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            return is_int(e.operand)
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
            return is_int(e.left) and is_int(e.right)
        f = e.func if isinstance(e, ast.Call) else None
        return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
                and f.attr == "nonneg" and len(e.args) == 1 and not e.keywords and is_int(e.args[0]))  # type: ignore[union-attr]
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(isinstance(p, ast.Slice) or is_int(p) for p in parts)


def _self_acc(tree: ast.AST) -> set[int]:
    """The targets (ids of their `Name` nodes) of `d = _rt.acc_ew(d, ...)` in `tree`."""
    return {id(n.targets[0]) for n in pyast.walk(tree)
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
            and (call := _rt_call(n.value, "acc_ew", 3)) is not None and isinstance(call.args[0], ast.Name)
            and call.args[0].id == n.targets[0].id}


def _add(s: _Stmt, run: _Run, roots: dict[str, str]) -> None:
    for root, text, kind in _accesses(s, run, roots):
        run.accesses.setdefault(root, []).append((text, kind))
    run.stmts.append(s)
    if s.kind == "new":
        run.bound.add(s.target)


def _spec(run: _Run, tree: ast.AST) -> tuple[str, list[str], list[str]]:
    """The run's spec (module contract), its operands' texts and the temporaries it returns."""
    operands: list[str] = []
    temps: list[str] = []

    def ref(text: str) -> str:
        if text in temps:
            return f"t{temps.index(text)}"
        if text not in operands:
            operands.append(text)
        return f"x{operands.index(text)}"

    parts = []
    for s in run.stmts:
        names = {f"x{i}": ref(x) for i, x in enumerate(s.operands)}
        expr = ast.unparse(_Rename(names).visit(ast.parse(ast.unparse(s.expr), mode="eval")).body)
        if s.kind == "new":
            temps.append(s.target)
            parts.append(f"t{len(temps) - 1} = {expr}")
        else:
            parts.append(f"{ref(s.target)}[...] = {expr}" if s.kind == "set" else f"{ref(s.target)} += {expr}")
    kept = [t for t in temps if _read_outside(t, run, tree)]
    spec = "; ".join(parts) + " -> " + ", ".join(f"t{temps.index(t)}" for t in kept)
    return spec, operands, kept


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, n: ast.Name) -> ast.Name:
        return ast.Name(self.names.get(n.id, n.id), ast.Load())


def _read_outside(t: str, run: _Run, tree: ast.AST) -> bool:
    """Whether the name `t` is read anywhere but by the run's statements after it binds `t`."""
    after = False
    inside: set[int] = set()
    for s in run.stmts:
        if after:
            inside |= {id(n) for n in pyast.walk(s.node)}
        after = after or (s.kind == "new" and s.target == t)
    return any(isinstance(n, ast.Name) and n.id == t and isinstance(n.ctx, ast.Load) and id(n) not in inside
               for n in pyast.walk(tree))


def _runs(body: list[ast.stmt], lines: list[str], arrays: frozenset[str], roots: dict[str, str],
          once: frozenset[str] = frozenset(), ints: frozenset[str] = frozenset()) -> list[_Run]:
    """The maximal runs (module contract) of the statements `body` of one block (`once`: the
    names bound once in the function; `ints`: names that hold ints never negative)."""
    runs, run = [], _Run()
    same = _SameViews(once, arrays, ints)
    for node in body:
        s = _candidate(node, arrays) if alone(node, lines) else None
        if s is not None:
            same.rename(s)
        same.see(node)
        if s is not None and not _joins(s, run, roots):
            runs.append(run)
            run = _Run()
        if s is None:
            runs.append(run)
            run = _Run()
            continue
        _add(s, run, roots)
    runs.append(run)
    return [r for r in runs if len(r.stmts) >= 2 and r.in_place()]


def fuse_runs(src: str, arrays: frozenset[str] = frozenset(), ints: frozenset[str] = frozenset()) -> str:
    """`src` with its runs of elementwise statements fused (module contract)."""
    if "_rt.ew_" not in src and "_rt.acc_ew" not in src:
        return src
    tree = ast.parse(src)
    lines = src.split("\n")
    roots = _roots(tree)
    stores: dict[str, int] = {}
    adds = _self_acc(tree)
    for n in pyast.walk(tree):  # `d = _rt.acc_ew(d, ...)` adds into `d`: not a binding
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and id(n) not in adds:
            stores[n.id] = stores.get(n.id, 0) + 1
    once = frozenset(k for k, c in stores.items() if c == 1)
    drop: set[int] = set()
    for block in pyast.walk(tree):
        for attr in ("body", "orelse", "finalbody"):
            body = getattr(block, attr, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            for run in _runs(body, lines, arrays, roots, once, ints):
                spec, operands, kept = _spec(run, tree)
                call = f"_rt.ew_run({spec!r}, ({', '.join(operands)}{',' if len(operands) == 1 else ''}))"
                first = run.stmts[0].node
                head = lines[first.lineno - 1][:len(lines[first.lineno - 1]) - len(lines[first.lineno - 1].lstrip())]
                lines[first.lineno - 1] = head + (f"({', '.join(kept)},) = {call}" if kept else call)
                drop |= {s.node.lineno - 1 for s in run.stmts[1:]}
    return "\n".join("" if i in drop else line for i, line in enumerate(lines))
