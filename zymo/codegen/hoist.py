"""Trip counts computed once at a kernel's entry.

Contract: `hoist_spans(fn)` changes the kernel `fn` (a function of `codegen/outline.py`, or its
parallel twin) in place: every call `_rt.span(a, b)` outside the heads of `for` loops whose
operands are int constants, names `fn` never assigns (its parameters and globals), or such calls
in turn, is computed once, in order of nesting, by a statement `_span_k = _rt.span(a, b)` at the
top of the body, and each occurrence reads `_span_k`. The names `_span_k` are new to `fn`. The
heads of loops keep their text (`range(_rt.span(lo, N))`), which later passes read
(`loop_forms.reversed_head`, `index_checks`). Nothing else changes; returns whether anything did.

Why it is the same program: `rt.span` is pure and never raises on the ints and bools trip
counts are made of (`hi - lo`, or 0), and its operands hold the same values everywhere in `fn`,
so its value is the same whether it is computed at the entry or where it was, and computing it
where a loop does not run changes nothing.

Why: the kernels' tape positions repeat the trip counts of the loops around them (adi's adjoint
kernel calls `_rt.span(1, t_3)` two dozen times). LLVM hoists the calls anyway; but Numba types
and lowers each call site on its own, a visible part of a kernel's first compile.
"""
from __future__ import annotations

import ast

from .. import pyast

_STEM = "_span_"


def _is_span(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "span"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "_rt"
            and len(node.args) == 2 and not node.keywords)


def hoist_spans(fn: ast.FunctionDef) -> bool:
    """Trip counts of `fn` computed once, at its top (module contract)."""
    assigned = {n.id for n in pyast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    assigned |= {n.arg for n in pyast.walk(fn) if isinstance(n, ast.arg)} - {a.arg for a in fn.args.args}
    taken = {n.id for n in pyast.walk(fn) if isinstance(n, ast.Name)} | {a.arg for a in fn.args.args}
    found: dict[str, str] = {}  # the call's text -> its name
    head: list[ast.stmt] = []

    class _Hoist(ast.NodeTransformer):
        def visit_For(self, node: ast.For) -> ast.AST:
            node.body = [self.visit(s) for s in node.body]  # the loop's `range` kept as it is
            node.orelse = [self.visit(s) for s in node.orelse]
            return node

        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)  # inner calls first: `_rt.span(0, _rt.span(0, t))`
            if not (_is_span(node) and all(_invariant(a) for a in node.args)):
                return node
            text = ast.unparse(node)
            name = found.get(text)
            if name is None:
                k = len(found)
                while f"{_STEM}{k}" in taken:
                    k += 1
                name = found[text] = f"{_STEM}{k}"
                taken.add(name)
                head.append(ast.Assign(targets=[ast.Name(name, ast.Store())], value=node))
            return ast.Name(name, ast.Load())

    def _invariant(e: ast.expr) -> bool:
        if isinstance(e, ast.Constant):
            return isinstance(e.value, (bool, int))
        if isinstance(e, ast.Name):
            return e.id not in assigned
        return False

    body = [_Hoist().visit(s) for s in fn.body]
    if not head:
        return False
    fn.body = [*head, *body]
    ast.fix_missing_locations(fn)
    return True
