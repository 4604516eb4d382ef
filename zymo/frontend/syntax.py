"""What the lowering reads off the syntax tree alone, before any value is known.

Contract: pure functions of `ast` nodes (no lowering state): `BINOPS` maps an operator node
to its primitive's key; `contains` and `may_exit` say whether statements hold a
`break`/`continue`/`return` (and so need exit flags); `assigned_names` and `nonlocal_names`
list the names a body binds or declares `nonlocal` (what a loop carries, what goes to a
closure cell).
"""
from __future__ import annotations

import ast

from .. import pyast

BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul",
}


# the fields through which a node holds statements (an expression holds none, but a lambda's)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def contains(stmts: list[ast.stmt], kinds: tuple, loops: bool) -> bool:
    """Whether `stmts` contain a statement of `kinds` (looking into nested loops if `loops`;
    not into nested functions, nor into expressions, which hold no statements)."""
    stack: list[ast.AST] = list(stmts)
    while stack:
        n = stack.pop()
        if isinstance(n, kinds):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, (ast.For, ast.While)) and not loops:
            stack.extend(n.orelse)  # an else clause runs after the loop: its break is the outer loop's
            continue
        for field in _BODIES:
            stack.extend(getattr(n, field, None) or ())
    return False


def may_exit(s: ast.stmt) -> bool:
    if isinstance(s, (ast.Break, ast.Continue, ast.Return)):
        return True
    if isinstance(s, (ast.For, ast.While)):
        return contains(s.body + s.orelse, (ast.Return,), loops=True) or contains(
            s.orelse, (ast.Break, ast.Continue), loops=False)
    return contains([s], (ast.Return,), loops=True) or contains([s], (ast.Break, ast.Continue), loops=False)


def assigned_names(stmts: list[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        for n in pyast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                out.add(n.target.id)
            elif isinstance(n, ast.FunctionDef):
                out.add(n.name)
    return out


def nonlocal_names(node: ast.AST) -> set[str]:
    """Names a function body declares `nonlocal` (not looking into nested functions)."""
    out: set[str] = set()
    body = getattr(node, "body", None)
    stack = list(body) if isinstance(body, list) else []
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Nonlocal):
            out.update(n.names)
        elif not isinstance(n, (ast.FunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(n))
    return out
