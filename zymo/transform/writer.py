"""An indentation-aware writer of Python source lines."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    @contextmanager
    def indent(self, header: str) -> Iterator[None]:
        self(header)
        self.depth += 1
        start = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == start:
                self("pass")
            self.depth -= 1

    def source(self) -> str:
        return "\n".join(self.lines) + "\n"


def splice(w: Writer, child: Writer) -> None:
    """Append `child`'s lines to `w` at `w`'s current indentation."""
    for line in child.lines:
        w(line)
