"""The generated program as one tree through the codegen passes of the "kernels" backend.

Contract: `parse(src)` is the module of `src`, each comment of a function's top level
(`    # adjoint sweep`: a comment token alone on its line, at column 4, outside brackets, so
never a line of a string or of a bracketed expression) held in place as the statement
`_zymo_comment_('adjoint sweep')`, so that passes which move and replace statements keep it
where it was. `source(tree)` prints the module once, those statements as comments again:
`source(parse(src))` is `src` as `ast.unparse` writes it, comments included.
`take_comments(tree)` removes those statements, wherever they are, and returns what
`put_comments` needs to put them back where they were, in bodies no pass changed since.

The passes of the "kernels" backend (`idioms.blas_tree`, `loop_order.lean_tree`,
`outline.outline_tree`) each take the tree and change it in place; `pipeline._with_kernels`
parses the transform's program once and prints it once. Each pass also keeps a function of
text to text (`blas_nests`, `lean_loops`, `outline`), which parses and prints around it.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize

from .. import pyast

NOTE = "_zymo_comment_"  # a comment of a function's top level, as a statement while the program changes
_COMMENT = re.compile(r"^( {4})# ?(.*)$", re.M)
_NOTED = re.compile(rf"^(\s*){NOTE}\((.*)\)$", re.M)


def parse(src: str) -> ast.Module:
    """The module of `src`, its functions' top-level comments held as statements: a comment
    token alone on its line, at column 4, outside brackets (never a line of a string or of a
    bracketed expression)."""
    lines = src.split("\n")
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
            elif tok.type == tokenize.COMMENT and depth == 0 and tok.start[1] == 4:
                row = tok.start[0] - 1
                if not lines[row][:4].strip():
                    lines[row] = _COMMENT.sub(lambda m: f"{m.group(1)}{NOTE}({m.group(2)!r})", lines[row])
        return ast.parse("\n".join(lines))
    except (tokenize.TokenError, SyntaxError):  # (a comment at column 4 inside a deeper block)
        return ast.parse(src)  # the comments dropped; `ast.parse` says what is wrong, if anything


def source(tree: ast.Module) -> str:
    """`tree` printed, the comments `parse` held as statements written as comments again."""
    out = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    return _NOTED.sub(lambda m: f"{m.group(1)}# {ast.literal_eval(m.group(2))}", out)


def is_comment(s: ast.stmt) -> bool:
    """Whether `s` is a comment `parse` holds as a statement."""
    return (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name)
            and s.value.func.id == NOTE)


def take_comments(tree: ast.Module) -> list[tuple[list[ast.stmt], int, ast.stmt]]:
    """The comment statements removed from `tree`, wherever they are: (body, index, statement)
    each, for `put_comments`. A body left empty gets `pass`."""
    taken = []
    for node in list(pyast.walk(tree)):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and any(isinstance(s, ast.stmt) and is_comment(s) for s in body):
                taken += [(body, k, s) for k, s in enumerate(body) if is_comment(s)]
                body[:] = [s for s in body if not is_comment(s)]
                if not body:  # a body of comments alone: `pass` holds its place (index -1: taken out again)
                    body.append(ast.Pass())
                    taken.append((body, -1, body[0]))
    return taken


def put_comments(taken: list[tuple[list[ast.stmt], int, ast.stmt]]) -> None:
    """Put back what `take_comments` removed, in bodies unchanged since."""
    for body, k, s in taken:
        if k < 0:
            body[:] = [t for t in body if t is not s]  # the `pass` that held a place
    for body, k, s in taken:  # in increasing index order per body: each lands where it was
        if k >= 0:
            body.insert(k, s)
