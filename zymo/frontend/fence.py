"""The subset of Python that zymo accepts, checked before lowering.

Contract: `check(node, file, func)` walks a function's AST and raises
`UnsupportedSyntax` at the first construct zymo does not differentiate (yet),
naming the construct, the user's line, why, and what to do instead. Lowering
may then assume only accepted node kinds appear.
"""
from __future__ import annotations

import ast

from ..errors import Loc, UnsupportedSyntax

# node type -> (what it is, why, hint)
_REFUSED: dict[type, tuple[str, str, str]] = {
    ast.Try: ("try/except", "exceptions change control flow in ways the reverse sweep cannot replay",
              "move the try/except out of the differentiated function"),
    ast.Raise: ("raise", "a raised exception ends the primal where no derivative is defined",
                "check inputs before calling zymo, or use zymo.inactive for validation code"),
    ast.Yield: ("yield (a generator)", "the reverse sweep cannot replay a suspended generator",
                "materialise the values in a list or array first"),
    ast.YieldFrom: ("yield from (a generator)", "the reverse sweep cannot replay a suspended generator",
                    "materialise the values in a list or array first"),
    ast.Await: ("await", "coroutines cannot be differentiated", "differentiate the synchronous part"),
    ast.AsyncFunctionDef: ("async def", "coroutines cannot be differentiated", "use a plain def"),
    ast.Global: ("global", "writes to module globals escape the function",
                 "pass the value as an argument and return the new value"),
    ast.With: ("with", "context managers are not supported", "move the with block out of the function"),
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
    ast.Starred: ("*args unpacking", "star unpacking is not supported yet", "pass arguments explicitly"),
    ast.Match: ("match", "match statements are not supported yet", "use if/elif"),
    ast.NamedExpr: ("walrus operator (:=)", "assignment expressions are not supported",
                    "assign in a separate statement"),
    ast.AsyncFor: ("async for", "coroutines cannot be differentiated", "use a plain for"),
}


def check(node: ast.AST, file: str, func: str) -> None:
    args = node.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise UnsupportedSyntax(
            f"{func}: *args, **kwargs and keyword-only parameters are not supported yet",
            Loc(file, node.lineno, node.col_offset, func),
            hint="use ordinary positional parameters (defaults are fine)",
        )
    body = node.body if isinstance(node.body, list) else [node.body]
    for stmt in body:
        for sub in ast.walk(stmt):
            # nested defs are checked when they are called
            if isinstance(sub, (ast.FunctionDef, ast.Lambda)):
                continue
            entry = _REFUSED.get(type(sub))
            if entry is not None:
                what, why, hint = entry
                raise UnsupportedSyntax(
                    f"{what} is not supported by zymo", _loc(sub, file, func), why, hint
                )
            if isinstance(sub, (ast.For, ast.While)) and sub.orelse:
                raise UnsupportedSyntax(
                    f"else clause on a {'for' if isinstance(sub, ast.For) else 'while'} loop "
                    "is not supported", _loc(sub, file, func), "",
                    "set a flag before break and test it after the loop",
                )


def _loc(node: ast.AST, file: str, func: str) -> Loc:
    return Loc(file, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), func)
