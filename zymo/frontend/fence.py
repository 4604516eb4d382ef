"""The subset of Python that zymo accepts, checked before lowering.

Contract: `check(node, file, func)` walks a function's AST and raises
`UnsupportedSyntax` at the first construct zymo does not differentiate (yet),
naming the construct, the user's line, why, and what to do instead: async functions
and generators (their call returns a coroutine or generator, not the body's value)
are refused as a whole. `raise`, `assert`, `try` and `with` pass here and are checked
in detail where they are lowered (`flow.py`). Lowering
may then assume only accepted node kinds appear.
"""
from __future__ import annotations

import ast

from .. import pyast
from ..errors import Loc, UnsupportedSyntax

# node type -> (what it is, why, hint)
_REFUSED: dict[type, tuple[str, str, str]] = {
    ast.TryStar: ("try/except*", "exception groups are not supported",
                  "use try/except, or move the try out of the differentiated function"),
    ast.Yield: ("yield (a generator)", "the reverse sweep cannot replay a suspended generator",
                "materialise the values in a list or array first"),
    ast.YieldFrom: ("yield from (a generator)", "the reverse sweep cannot replay a suspended generator",
                    "materialise the values in a list or array first"),
    ast.Await: ("await", "coroutines cannot be differentiated", "differentiate the synchronous part"),
    ast.AsyncFunctionDef: ("async def", "coroutines cannot be differentiated", "use a plain def"),
    ast.Global: ("global", "writes to module globals escape the function",
                 "pass the value as an argument and return the new value"),
    ast.AsyncWith: ("async with", "coroutines cannot be differentiated", "use a plain with"),
    ast.ClassDef: ("class definition", "classes cannot be defined inside a differentiated function",
                   "define the class at module level"),
    ast.Delete: ("del", "deleting names or items is not supported", "remove the del statement"),
    ast.Import: ("import", "imports inside a differentiated function are not supported",
                 "import at module level"),
    ast.ImportFrom: ("import", "imports inside a differentiated function are not supported",
                     "import at module level"),
    ast.SetComp: ("set comprehension", "sets cannot be differentiated", "write a for loop"),
    ast.Set: ("set", "sets cannot be differentiated", "use a tuple"),
    ast.JoinedStr: ("f-string", "strings are not supported in differentiated code",
                    "move formatting out of the function"),
    ast.Starred: ("starred assignment", "star unpacking outside a call's arguments is not supported yet",
                  "index the tuple instead (first, rest = t[0], t[1:])"),
    ast.Match: ("match", "match statements are not supported yet", "use if/elif"),
    ast.NamedExpr: ("walrus operator (:=)", "assignment expressions are not supported",
                    "assign in a separate statement"),
    ast.AsyncFor: ("async for", "coroutines cannot be differentiated", "use a plain for"),
}


def check(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, file: str, func: str) -> None:
    if node in _ACCEPTED:  # a node that passed passes again (nodes are never changed)
        return
    _check(node, file, func)
    _ACCEPTED.add(node)


_ACCEPTED: set[ast.AST] = set()  # the function nodes `check` accepted (held: ids are not reused)


def _check(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, file: str, func: str) -> None:
    if isinstance(node, ast.AsyncFunctionDef):
        gen = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _own_nodes(node))
        raise UnsupportedSyntax(
            f"{func} is an async {'generator' if gen else 'function'} (async def), which zymo does not differentiate",
            _loc(node, file, func), "calling it returns a coroutine, not the value its body computes; zymo would "
            "differentiate the body as if it were a plain function", "differentiate a plain def that does the "
            "computation, and await around it outside zymo")
    for n in _own_nodes(node):
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            raise UnsupportedSyntax(
                f"{func} is a generator function (it contains yield), which zymo does not differentiate",
                _loc(n, file, func), "calling it returns a generator, not the value its body computes",
                "collect the values in a list or an array and return that")
    body = node.body if isinstance(node.body, list) else [node.body]
    for stmt in body:
        # `f(*t)` is a call's argument expansion; any other `*x` (`a, *b = t`) is refused
        spread = {id(a) for sub in pyast.walk(stmt) if isinstance(sub, ast.Call) for a in sub.args}
        for sub in pyast.walk(stmt):
            # nested defs are checked when they are called
            if isinstance(sub, (ast.FunctionDef, ast.Lambda)):
                continue
            if isinstance(sub, ast.Starred) and id(sub) in spread:
                continue
            entry = _REFUSED.get(type(sub))
            if entry is not None:
                what, why, hint = entry
                raise UnsupportedSyntax(
                    f"{what} is not supported by zymo", _loc(sub, file, func), why, hint
                )


def _own_nodes(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
    """The nodes of a function's body, not looking into nested functions, lambdas or classes."""
    body = node.body if isinstance(node.body, list) else [node.body]
    stack = list(body)
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(n))


def _loc(node: ast.AST, file: str, func: str) -> Loc:
    return Loc(file, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), func)
