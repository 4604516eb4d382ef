"""Edits of generated source in place, on its lines (the Numba rewrites: `rewrites.py`,
`ew_rewrite.py`).

Contract: AST columns count UTF-8 bytes, not characters (a name may be `σ`): `before` and
`after` cut a line at such a column, `splice` replaces a span of one, and `alone` says whether
a statement is the only one on its line (a comment may follow).
"""
from __future__ import annotations

import ast


def alone(node: ast.stmt, lines: list[str]) -> bool:
    """Whether statement `node` is the only one on its line (a comment may follow)."""
    if node.lineno != node.end_lineno:
        return False
    line = lines[node.lineno - 1]
    rest = after(line, node.end_col_offset).strip()
    return not before(line, node.col_offset).strip() and (not rest or rest.startswith("#"))


def before(line: str, col: int) -> str:
    """`line` up to `col`, an AST column: a count of UTF-8 bytes, not of characters."""
    return line.encode()[:col].decode()


def after(line: str, col: int) -> str:
    """`line` from AST column `col` (UTF-8 bytes) on."""
    return line.encode()[col:].decode()


def splice(line: str, col: int, end: int, text: str) -> str:
    """`line` with AST columns `col` to `end` (UTF-8 bytes: a name may be `σ`) replaced by `text`."""
    return before(line, col) + text + after(line, end)
