"""Readable, unique Python names for generated code.

Contract: `Namer` gives each IR value one identifier derived from the user's
variable name (`x`, `x_1`, ...; a constant number is its literal), and derived names for its tangent or adjoint
(`dx`), its cache (`_cache_x`) and temporaries, never colliding with each other
or with the globals of the generated module.

Batch mode (width W > 1) gives every derivative name one variant per lane:
`lane` selects which one `d()` and `lane_role()` return (`dx_1`, `dx_2`, ...).
"""
from __future__ import annotations

import builtins
import cmath
import keyword
import math
import re

from ..ir.core import Value
from ..ir.types import Array, Scalar

RESERVED = {"np", "math", "_rt"} | set(dir(builtins))


class Namer:
    def __init__(self) -> None:
        self.used: set[str] = set(RESERVED)
        self.values: dict[tuple[int, str], str] = {}
        self.typed_zero: dict[str, str] = {}  # name -> a zero of its type (scalars, counters)
        self.scalar_derivatives: set[str] = set()  # derivative names (`d`, per lane) of scalars
        self.arrays: set[str] = set()  # names of arrays, and of their shadows or tangents
        self.ndims: dict[str, int] = {}  # the same names -> the arrays' dimensions
        self.width = 1  # batch width
        self.lane = 0   # the lane derivative names refer to

    def numbers(self) -> frozenset[str]:
        """The names given so far that only ever hold numbers (ints, bools, floats): values of
        a scalar type, and counters. Forward mode adds `scalar_derivatives`, the tangents of
        scalars; reverse mode has its own list of float adjoints (`Reverse.float_adjoints`)."""
        return frozenset(self.typed_zero)

    def fresh(self, base: str) -> str:
        base = re.sub(r"\W", "_", base).rstrip("_") or "v"
        if base[0].isdigit():
            base = "v" + base
        name = base
        k = 1
        while name in self.used or keyword.iskeyword(name):
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name

    def _get(self, v: Value, role: str, base: str) -> str:
        key = (v.id, role)
        n = self.values.get(key)
        if n is None:
            n = self.values[key] = self.fresh(base)
            kind = getattr(v.type, "kind", None) if role == "p" else ("int" if role == "k" else None)
            if kind is not None:
                self.typed_zero[n] = {"int": "0", "bool": "False"}.get(kind, "0.0")
            if isinstance(v.type, Scalar) and role.split("#")[0] == "d":
                self.scalar_derivatives.add(n)
            if isinstance(v.type, Array) and role.split("#")[0] in ("p", "d"):
                self.arrays.add(n)
                self.ndims[n] = v.type.ndim
        return n

    def __call__(self, v: Value) -> str:
        lit = literal(v)
        if lit is not None:
            return lit
        return self._get(v, "p", v.hint.lstrip("$") or "v")

    def d(self, v: Value) -> str:
        """The tangent (forward) or adjoint / shadow (reverse) of `v`, in the current lane."""
        return self.lane_role(v, "d", "d" + (v.hint.lstrip("$") or "v"))

    def lane_role(self, v: Value, role: str, base: str) -> str:
        """A derivative-side name of `v`: one per batch lane."""
        if self.width == 1:
            return self._get(v, role, base)
        return self._get(v, f"{role}#{self.lane}", f"{base}_{self.lane + 1}")

    def lanes(self):
        """Iterate the batch lanes, making each the current one (then lane 0 again)."""
        try:
            for k in range(self.width):
                self.lane = k
                yield k
        finally:
            self.lane = 0

    def cache(self, v: Value) -> str:
        return self._get(v, "cache", "_cache_" + (v.hint.lstrip("$") or "v"))

    def role(self, v: Value, role: str, base: str) -> str:
        return self._get(v, role, base)


def literal(v: Value) -> str | None:
    """The Python literal of a constant number or bool, written where it is used (so Numba
    sees `x ** 2`, not `x ** c`); None for anything else."""
    c = getattr(v, "const", None)
    if type(c) in (int, float, bool) and c == c and c not in (float("inf"), float("-inf")):
        text = repr(c)
        return f"({text})" if text.startswith("-") else text
    if type(c) is complex and cmath.isfinite(c):
        # a name for it, assigned in a loop's body, was read by the adjoint sweep after the loop,
        # which second order's frontend refused there as possibly undefined
        return complex_text(c)
    return None


def complex_text(c: complex) -> str:
    """Python source for the complex number `c`, the sign of each zero kept: `1j`, or
    `complex(re, im)` (`-1j` reads back as `(-0-1j)`, `-0j` as `(-0-0j)`)."""
    if c.real == 0 and math.copysign(1.0, c.real) > 0 and math.copysign(1.0, c.imag) > 0 and cmath.isfinite(c):
        return repr(c)

    def part(v: float) -> str:
        return repr(v) if math.isfinite(v) else f"float({str(v)!r})"
    return f"complex({part(c.real)}, {part(c.imag)})"
