"""Types of IR values, taken from the concrete arguments of a call.

Contract: a type says what kind of runtime object a value holds, never its
numbers. Floats (`F64`, `F32`), complex numbers (`C128`, `C64`) and arrays/lists
of them can carry derivatives; ints and bools never do. A complex value's
derivative is complex, with JAX's convention (see docs/complex.md, "Complex
numbers"). Tuples are not runtime values in the IR: the frontend
keeps them as Python tuples of values, so they have no type here. `Static` is a
compile-time Python object (a module, a function, a string, a dtype) that the
generated code refers to by name and that never carries a derivative.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


class Type:
    """Base of all IR types."""

    @property
    def differentiable(self) -> bool:
        return False


@dataclass(frozen=True)
class Scalar(Type):
    kind: str  # "f64" | "f32" | "c128" | "c64" | "int" | "bool"

    @property
    def differentiable(self) -> bool:
        return self.kind in ("f64", "f32", "c128", "c64")

    def __str__(self) -> str:
        return self.kind


@dataclass(frozen=True)
class Array(Type):
    dtype: str  # a NumPy dtype name: "float64", "float32", "complex128", "complex64", "int64", "bool"
    ndim: int

    @property
    def differentiable(self) -> bool:
        return self.dtype in ("float64", "float32", "complex128", "complex64")

    def __str__(self) -> str:
        short = {"float64": "f64", "float32": "f32", "complex128": "c128", "complex64": "c64", "int64": "i64",
                 "bool": "bool"}
        return f"{short.get(self.dtype, self.dtype)}[{','.join(':' * self.ndim) or ''}]".replace(
            "[]", "[()]"
        )


@dataclass(frozen=True)
class List(Type):
    """A homogeneous Python list: mutable memory, like a 1-d array of `elt`."""

    elt: Type

    @property
    def differentiable(self) -> bool:
        return self.elt.differentiable

    def __str__(self) -> str:
        return f"list[{self.elt}]"


@dataclass(frozen=True)
class NoneT(Type):
    def __str__(self) -> str:
        return "none"


@dataclass(frozen=True, eq=False)
class Static(Type):
    """A compile-time object; equality is identity of the object."""

    obj: Any

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Static) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __str__(self) -> str:
        name = getattr(self.obj, "__name__", None)
        return f"static<{name or type(self.obj).__name__}>"


F64 = Scalar("f64")
F32 = Scalar("f32")
C128 = Scalar("c128")
C64 = Scalar("c64")
INT = Scalar("int")
BOOL = Scalar("bool")
NONE = NoneT()

_FLOAT_DTYPES = {"float64": F64, "float32": F32, "complex128": C128, "complex64": C64}


def scalar_of_dtype(dtype: Any) -> Scalar:
    """The scalar type of one element of an array of `dtype`."""
    name = np.dtype(dtype).name
    if name in _FLOAT_DTYPES:
        return _FLOAT_DTYPES[name]
    if name == "bool":
        return BOOL
    if np.issubdtype(np.dtype(dtype), np.integer):
        return INT
    raise TypeError(name)


def dtype_of_scalar(t: Scalar) -> str:
    return {"f64": "float64", "f32": "float32", "c128": "complex128", "c64": "complex64", "int": "int64",
            "bool": "bool"}[t.kind]


def is_complex(t: Type) -> bool:
    """A complex number, or an array or list of them."""
    if isinstance(t, Scalar):
        return t.kind in ("c128", "c64")
    if isinstance(t, Array):
        return t.dtype in ("complex128", "complex64")
    if isinstance(t, List):
        return is_complex(t.elt)
    return False


def is_float(t: Type) -> bool:
    return isinstance(t, Scalar) and t.differentiable


def is_array(t: Type) -> bool:
    return isinstance(t, Array)


def is_memory(t: Type) -> bool:
    """Arrays and lists: values whose contents can change after they are made."""
    return isinstance(t, (Array, List))


def join(a: Type, b: Type) -> Type | None:
    """The type that can hold both `a` and `b` (Python's numeric promotion), or None."""
    if a == b:
        return a
    if isinstance(a, Scalar) and isinstance(b, Scalar):
        if is_complex(a) or is_complex(b):
            return scalar_of_dtype(np.result_type(dtype_of_scalar(a), dtype_of_scalar(b)))
        order = ["bool", "int", "f32", "f64"]
        return a if order.index(a.kind) >= order.index(b.kind) else b
    if isinstance(a, Array) and isinstance(b, Array) and a.ndim == b.ndim:
        return Array(np.result_type(a.dtype, b.dtype).name, a.ndim)
    return None
