"""Errors raised by zymo, and the source locations they point at.

Contract: every error that concerns the user's code carries a `Loc` (file, line,
column) and is formatted the same way: a one-line cause, the user's line with a
caret, why zymo refuses it, and what to do instead. Misuse of the API (wrong
annotations, mismatched shadows) raises `ZymoUsageError` before any work is done.
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A position in the user's source (1-based line, 0-based column)."""

    file: str
    line: int
    col: int = 0
    func: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def format(self) -> str:
        text = linecache.getline(self.file, self.line).rstrip("\n")
        where = f'  File "{self.file}", line {self.line}'
        if self.func:
            where += f", in {self.func}"
        if not text:
            return where
        stripped = text.lstrip()
        indent = len(text) - len(stripped)
        caret = " " * (4 + max(self.col - indent, 0)) + "^"
        return f"{where}\n    {stripped}\n{caret}"


UNKNOWN = Loc("<unknown>", 0)


class ZymoError(Exception):
    """Base class of every error zymo raises on purpose."""


class ZymoWarning(UserWarning):
    """zymo did something other than asked, safely (e.g. ran a derivative as Python, not Numba)."""


class ZymoUsageError(ZymoError, ValueError):
    """The API was called wrongly (bad annotation, mismatched shadow, bad mode)."""


class ZymoSourceError(ZymoError):
    """Something in the user's code cannot be differentiated (yet)."""

    kind = "unsupported"

    def __init__(self, message: str, loc: Loc | None = None, why: str = "", hint: str = ""):
        self.message = message
        self.loc = loc or UNKNOWN
        self.why = why
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message]
        if self.loc is not UNKNOWN:
            parts.append(self.loc.format())
        if self.why:
            parts.append(f"  Why: {self.why}")
        if self.hint:
            parts.append(f"  Hint: {self.hint}")
        return "\n".join(parts)


class UnsupportedSyntax(ZymoSourceError):
    """A Python construct zymo does not accept (try, yield, global writes, ...)."""


class UnsupportedCall(ZymoSourceError):
    """A call to a function zymo has no rule for and cannot read."""


class ZymoTypeError(ZymoSourceError):
    """A value whose type zymo cannot handle here (complex numbers, objects, ...)."""
