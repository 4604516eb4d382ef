"""Reading a Python function: its source, its closure cells and its globals.

Contract: `FunctionSource.of(fn)` returns the parsed `ast.FunctionDef` (or
`Lambda`) of a plain Python function or a Numba dispatcher (read through
`py_func`), with line numbers that match the user's file, and a `resolve(name)`
that finds a free name in the closure, the globals, then the builtins. A
function whose source cannot be read raises `ZymoSourceError` with a hint.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import keyword
import linecache
import textwrap
import types
from dataclasses import dataclass
from typing import Any

from .. import pyast
from ..errors import Loc, ZymoSourceError

_MISSING = object()
_CACHE: dict[Any, FunctionSource] = {}


_WRAPPERS: dict[int, tuple[Any, types.FunctionType]] = {}


def rule_wrapper(fn: Any) -> types.FunctionType | None:
    """A Python function that calls `fn`, a callable zymo has a rule for but no source of
    (`np.sin`, `np.linalg.det`, `math.exp`, `operator.mul`): `def sin(*args, **kwargs):
    return fn(*args, **kwargs)`, its text registered with `linecache` so that it reads like
    any function (`zymo.gradient(Reverse, np.sin, x)`, as JAX and autograd allow)."""
    from ..rules.registry import rule_for_callable

    hit = _WRAPPERS.get(id(fn))
    if hit is not None and hit[0] is fn:
        return hit[1]
    if rule_for_callable(fn) is None:
        return None
    name = getattr(fn, "__name__", "") or "fn"
    name = name if name.isidentifier() and not keyword.iskeyword(name) else "fn_"
    file = f"<zymo: {getattr(fn, '__module__', None) or 'builtins'}.{name}>"
    text = f"def {name}(*args, **kwargs):\n    return fn(*args, **kwargs)\n"
    linecache.cache[file] = (len(text), None, text.splitlines(True), file)
    scope: dict[str, Any] = {"fn": fn}
    exec(compile(text, file, "exec"), scope)  # our own two lines
    wrapper = scope[name]
    _WRAPPERS[id(fn)] = (fn, wrapper)
    return wrapper


def unwrap(fn: Any) -> Any:
    """The Python function behind a Numba dispatcher (or `fn` itself)."""
    py = getattr(fn, "py_func", None)
    if py is not None and isinstance(py, types.FunctionType):
        return py
    return fn


@dataclass
class FunctionSource:
    fn: types.FunctionType
    node: ast.FunctionDef | ast.Lambda
    file: str

    @staticmethod
    def of(fn: Any) -> FunctionSource:
        fn = unwrap(fn)
        if not isinstance(fn, types.FunctionType):
            fn = rule_wrapper(fn) or fn
        if not isinstance(fn, types.FunctionType):
            raise ZymoSourceError(
                f"zymo can only differentiate Python functions, not {type(fn).__name__}",
                hint="wrap the call in a Python function (def f(x): return obj(x))",
            )
        key = (fn.__code__, )
        cached = _CACHE.get(key)
        if cached is not None:
            # the closures one `def` makes share its code, hence its source: a new one reads the
            # same (never mutated) node and resolves its names through its own cells
            return cached if cached.fn is fn else FunctionSource(fn, cached.node, cached.file)
        file = fn.__code__.co_filename
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            made = (f": it was defined by exec/eval or at a prompt (its file is {file!r})"
                    if file.startswith("<") else "")
            raise ZymoSourceError(
                f"cannot read the source of {fn.__qualname__}{made}",
                Loc(file, fn.__code__.co_firstlineno, 0, fn.__name__),
                why="zymo reads a function's source to differentiate it; functions typed "
                    "at an interactive prompt or built with exec/eval have none",
                hint="define the function in a file (or a notebook cell) and call zymo again",
            ) from None
        src = textwrap.dedent("".join(lines))
        try:
            mod = ast.parse(src)
        except SyntaxError:
            # a lambda in the middle of an expression: find it by its line
            try:
                mod = ast.parse(_lambda_line(src))
            except SyntaxError:
                raise ZymoSourceError(
                    f"the source zymo found for {fn.__qualname__} does not parse",
                    Loc(file, fn.__code__.co_firstlineno, 0, fn.__name__),
                    why=_STALE_WHY, hint=_STALE_HINT,
                ) from None
        ast.increment_lineno(mod, first - 1)
        indent = len(lines[0]) - len(lines[0].lstrip())
        node = _find_def(mod, fn, indent)
        code = fn.__code__
        if [a.arg for a in node.args.posonlyargs + node.args.args] != list(code.co_varnames[:code.co_argcount]):
            raise ZymoSourceError(f"the source zymo found for {fn.__qualname__} is not its definition",
                                  Loc(file, code.co_firstlineno, 0, fn.__name__), _STALE_WHY, _STALE_HINT)
        out = FunctionSource(fn, node, file)
        _CACHE[key] = out
        return out

    def resolve(self, name: str) -> Any:
        """The object a free name refers to (closure cell, global, builtin) or _MISSING."""
        code = self.fn.__code__
        if name in code.co_freevars and self.fn.__closure__:
            cell = self.fn.__closure__[code.co_freevars.index(name)]
            try:
                return cell.cell_contents
            except ValueError:
                return _MISSING
        g = self.fn.__globals__
        if name in g:
            return g[name]
        return getattr(builtins, name, _MISSING)

    def resolver(self, name: str) -> Any:
        """A function of no arguments that reads `name` afresh as `resolve` does (the guards of the
        captures re-run it at every call, so it reads the cell or the globals dict directly: a
        function's `__closure__` and `__globals__` cannot be rebound; an emptied cell raises)."""
        cell = self.cell(name)
        if cell is not None:
            return lambda cell=cell: cell.cell_contents
        g = self.fn.__globals__
        return lambda g=g, name=name: g[name] if name in g else getattr(builtins, name, _MISSING)

    def cell(self, name: str) -> Any:
        """The closure cell of a free variable, or None for globals and builtins."""
        code = self.fn.__code__
        if name in code.co_freevars and self.fn.__closure__:
            return self.fn.__closure__[code.co_freevars.index(name)]
        return None

    def is_closure_var(self, name: str) -> bool:
        return name in self.fn.__code__.co_freevars


def _lambda_line(src: str) -> str:
    """`_ = <the lambda>` cut out of the middle of an expression: the longest prefix of the
    text from `lambda` on that parses (what follows the lambda, `, ())]`, is dropped)."""
    start = src.find("lambda")
    if start < 0:
        return src
    text = src[start:].rstrip()
    for end in range(len(text), 0, -1):
        candidate = "_ = " + text[:end]
        try:
            ast.parse(candidate)
        except SyntaxError:
            continue
        return candidate
    return src


def _find_def(mod: ast.Module, fn: types.FunctionType, indent: int = 0) -> ast.FunctionDef | ast.Lambda:
    want_line = fn.__code__.co_firstlineno
    name = fn.__code__.co_name  # (the name its source gives it: `__name__` may be rebound, `__code__` replaced)
    if name == "<lambda>":
        lams = [n for n in pyast.walk(mod) if isinstance(n, ast.Lambda) and n.lineno == want_line]
        if len(lams) > 1:
            # several lambdas on one line: the one whose body holds the code's first position
            pos = [(ln, col) for ln, _, col, _ in fn.__code__.co_positions()
                   if ln is not None and col is not None and (ln, col) != (want_line, 0)]
            if pos:
                line, col = pos[0]
                col -= indent
                for n in lams:
                    b = n.body
                    if (b.lineno, b.col_offset) <= (line, col) <= (b.end_lineno, b.end_col_offset):
                        inner = [m for m in lams if m is not n and _within(m, n)]
                        if not any((m.body.lineno, m.body.col_offset) <= (line, col)
                                   <= (m.body.end_lineno, m.body.end_col_offset) for m in inner):
                            return n
    best = None
    for node in pyast.walk(mod):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if first == want_line or node.lineno == want_line:
                return node  # type: ignore[return-value]  # an async def: `fence.check` refuses it
            best = best or node
        if isinstance(node, ast.Lambda) and name == "<lambda>" and node.lineno == want_line:
            return node
    if best is not None:
        return best  # type: ignore[return-value]  # (as above)
    for node in pyast.walk(mod):
        if isinstance(node, ast.Lambda):
            return node
    raise ZymoSourceError(f"cannot find the definition of {fn.__qualname__} in its source",
                          Loc(fn.__code__.co_filename, want_line, 0, fn.__name__), _STALE_WHY, _STALE_HINT)


_STALE_WHY = ("zymo reads a function's source from its file; this function was built with exec or compile "
              "under that file's name, or the file changed after it was imported")
_STALE_HINT = "define the function in a file and import it (reload the module after editing it)"


def _within(inner: ast.AST, outer: ast.AST) -> bool:
    return any(n is inner for n in pyast.walk(outer))


MISSING = _MISSING
