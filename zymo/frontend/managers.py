"""Lowering `with` statements whose managers do not touch the data zymo differentiates.

Contract (a mixin of `Lowerer`, with `flow.FlowLowering`):
- `with np.errstate(...)` (keyword settings, constant strings) lowers to `np.seterr(...)`
  before its body and `np.seterr(**previous)` after it (`checks.errstate_enter_key`,
  `checks.ERRSTATE_EXIT`; also before a `raise` inside it, `FlowLowering.raise_`), and marks
  the function (`uses_errstate`: the API restores the caller's state if an exception leaves
  a block; reverse mode runs the body's adjoint under the same settings). Settings with
  'raise' keep the derivative on Python (compiled code never raises FloatingPointError).
- `warnings.catch_warnings()` and `contextlib.nullcontext()` (no arguments) lower their body
  as if there were no `with`: zymo lowers no call that changes warning filters, so the
  manager changes nothing the derivative computes.
- `contextlib.suppress(E, ...)` is `try: body except (E, ...): pass` (`lower_try`).
- Refused, with the line and a hint: `as` targets, any other manager (unknown objects,
  values the function computes), `np.errstate` with positional or `call=` settings,
  `catch_warnings` with arguments. Several items nest left to right.
"""
from __future__ import annotations

import ast
import contextlib
import warnings
from typing import Any

import numpy as np

from ..errors import UnsupportedSyntax
from ..ir.core import Value
from . import checks
from .bindings import S
from .flow import RAISED, TryCtx
from .host import LoweringHost


class WithLowering(LoweringHost):
    """`with` statements (see the module docstring)."""

    def stmt_With(self, s: ast.With) -> None:
        self.lower_with(s, list(s.items))

    def lower_with(self, s: ast.With, items: list[ast.withitem]) -> None:
        if not items:
            self.stmts(s.body)
            return
        item, rest = items[0], items[1:]
        if item.optional_vars is not None:
            raise self.error(UnsupportedSyntax, "with ... as <name> is not supported", item.context_expr,
                             "zymo lowers the body without the manager's object", "drop the `as` target")
        kind, arg = self.manager(item.context_expr)
        loc = self.loc(item.context_expr)
        if kind == "plain":
            self.lower_with(s, rest)
        elif kind == "suppress":
            self.lower_try(TryCtx(s, [(arg, [])]), [ast.With(items=rest, body=s.body, lineno=s.lineno,
                                                             col_offset=s.col_offset)] if rest else s.body, [], s)
        else:  # errstate
            key = checks.errstate_enter_key(arg)
            why = checks.python_only(key)
            if why:
                self.python_only.append((why, loc))
            enter = self.b.prim(key, [], {}, loc, "errstate")
            self.errstates.append((enter, key))
            try:
                self.lower_with(s, rest)
            finally:
                self.errstates.pop()
            if self.frame.env.get(RAISED) is not True:
                self.b.prim(checks.ERRSTATE_EXIT, [enter, S(key)], {}, loc)
            self.uses_errstate = True

    def manager(self, node: ast.expr) -> tuple[str, Any]:
        """("errstate", settings), ("plain", None) or ("suppress", classes) for a with item."""
        call = node if isinstance(node, ast.Call) else None
        target = self.expr(call.func if call is not None else node)
        obj = target.obj if isinstance(target, S) else None
        if obj is np.errstate and call is not None:
            if call.args:
                raise self.error(UnsupportedSyntax, "np.errstate takes keyword arguments here", node,
                                 hint="np.errstate(divide='ignore', invalid='ignore')")
            settings = []
            for kw in call.keywords:
                value = self.constant(kw.value, "np.errstate's settings")
                if kw.arg not in checks.ERRSTATE_KINDS or value not in ("ignore", "warn", "raise", "print"):
                    raise self.error(UnsupportedSyntax, f"np.errstate({kw.arg}={value!r}) is not supported", node,
                                     hint="use all/divide/over/under/invalid with 'ignore', 'warn', 'raise' or "
                                          "'print'")
                settings.append((kw.arg, value))
            return "errstate", tuple(settings)
        if obj is warnings.catch_warnings and call is not None:
            if call.args or call.keywords:
                raise self.error(UnsupportedSyntax, "warnings.catch_warnings with arguments is not supported", node,
                                 "it would change the warning filters, which the derivative program does not "
                                 "run under", "use warnings.catch_warnings() without arguments, or np.errstate")
            return "plain", None
        if obj is contextlib.nullcontext and call is not None and not call.args and not call.keywords:
            return "plain", None
        if obj is contextlib.suppress and call is not None:
            classes = []
            for a in call.args:
                b = self.expr(a)
                if not (isinstance(b, S) and isinstance(b.obj, type) and issubclass(b.obj, BaseException)):
                    raise self.error(UnsupportedSyntax, "contextlib.suppress needs exception classes", node,
                                     hint="name the classes: contextlib.suppress(ZeroDivisionError)")
                classes.append(b.obj)
            return "suppress", tuple(classes)
        what = "a value the function computes" if isinstance(target, Value) or obj is None else repr(obj)
        raise self.error(UnsupportedSyntax, f"with {ast.unparse(node)} is not supported ({what})", node,
                         "zymo lowers a with statement only for managers that do not touch the data it "
                         "differentiates: np.errstate, warnings.catch_warnings(), contextlib.suppress",
                         "move the with statement out of the differentiated function")
