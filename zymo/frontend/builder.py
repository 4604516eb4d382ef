"""Building IR ops with their types, one block at a time.

Contract: `Builder` appends ops to the current block and gives every result a
type at once (through `analysis.types`). Arguments given as bindings (values,
tuples, slices, constants) are encoded as argument trees. Nothing here knows
Python syntax: that is `lower.py`'s job.
"""
from __future__ import annotations

from typing import Any, cast

from ..analysis import types as TI
from ..errors import Loc, ZymoTypeError
from ..ir import types as T
from ..ir.core import Block, Op, Value
from ..rules.registry import lookup
from .bindings import S


class Builder:
    def __init__(self) -> None:
        self.blocks: list[Block] = []
        # ids of arrays that are `np.imag(z)` (a view in NumPy, a copy in zymo) or views of one:
        # writing into them is refused
        self.imag_copies: set[int] = set()

    @property
    def block(self) -> Block:
        return self.blocks[-1]

    def push(self, block: Block) -> Block:
        self.blocks.append(block)
        return block

    def pop(self) -> Block:
        return self.blocks.pop()

    def emit(self, op: Op) -> Op:
        self.block.ops.append(op)
        return op

    # -- leaf ops ------------------------------------------------------------
    def const(self, value: Any, loc: Loc, hint: str = "c") -> Value:
        if isinstance(value, bool):
            t = T.BOOL
        elif isinstance(value, int):
            t = T.INT
        elif isinstance(value, float):
            t = T.F64
        elif isinstance(value, complex):
            t = T.C128
        else:
            raise ZymoTypeError(f"constant {value!r} is not supported here", loc)
        v = Value(t, hint, const=value)
        self.emit(Op("const", [], [v], loc, {"value": value}))
        return v

    def encode(self, b: Any, args: list[Value]) -> tuple:
        """Argument tree of binding `b`, appending its values to `args`."""
        if isinstance(b, Value):
            args.append(b)
            return ("v", len(args) - 1)
        if isinstance(b, tuple):
            return ("t", tuple(self.encode(x, args) for x in b))
        if isinstance(b, slice):
            return ("s", self.encode(b.start, args), self.encode(b.stop, args), self.encode(b.step, args))
        if isinstance(b, S):
            return ("c", b.obj)
        if b is None or b is Ellipsis or isinstance(b, (int, float, str)):
            return ("c", b)
        raise AssertionError(b)

    def prim(self, key: str, pos: list, kw: dict, loc: Loc, hint: str = "t",
             out: Value | None = None) -> Any:
        """Emit a call of rule `key`; returns the result binding (value, tuple or None)."""
        rule = lookup(key)
        if "out" in kw:
            raise ZymoTypeError(f"{key} with out= is not supported here", loc,
                                hint="assign the result instead: r[...] = ...")
        if not rule.nondiff and any(_nested_numbers(b) for b in (*pos, *kw.values())):
            # an argument tree's nested values reach no derivative formula (rules differentiate
            # plain value arguments only): refused, never a silently zero derivative
            raise ZymoTypeError(f"cannot differentiate {key} with a tuple of numbers or arrays as an argument", loc,
                                why="zymo differentiates a rule's array and number arguments, not the "
                                    "elements of a tuple passed to it",
                                hint="pass an array: np.array([a, b]) for numbers, np.stack((a, b)) for arrays")
        args: list[Value] = []
        pos_t = tuple(self.encode(p, args) for p in pos)
        kw_t = tuple((k, self.encode(v, args)) for k, v in kw.items())
        attrs: dict[str, Any] = {"key": key, "pos": pos_t, "kw": kw_t}
        if out is not None:
            args.append(out)
            attrs["out"] = len(args) - 1
        rtype = TI.infer_prim(key, rule.fn, [_plain(p) for p in pos], {k: _plain(v) for k, v in kw.items()}, loc)
        if any(T.is_complex(a.type) for a in args) or _complex_result(rtype) or key in ("numpy.real", "numpy.imag"):
            key = self._complex_key(key, args, rtype, loc)
            attrs["key"] = key
        if out is not None and _complex_result(rtype) and not T.is_complex(out.type):
            raise ZymoTypeError(f"{key}: a complex result written into a real array (out=, or +=)", loc,
                                why="NumPy refuses the cast (it would discard the imaginary part)",
                                hint="make the array complex (np.zeros(n, dtype=complex)), or write np.real(...)")
        if out is not None and out.id in self.imag_copies:
            raise ZymoTypeError("writing into np.imag(z) (or z.imag) is not supported", loc,
                                hint="build the complex array from its parts: re + 1j * im")
        if out is not None:
            if rtype != out.type and not (isinstance(rtype, T.Array) and rtype.ndim <= cast(T.Array, out.type).ndim):
                raise ZymoTypeError(f"{key}: out= has type {out.type}, the result has type {rtype}", loc)
            self.emit(Op("prim", args, [], loc, attrs))
            return out
        if isinstance(rtype, tuple):
            results = [Value(t, hint) for t in rtype]
            self.emit(Op("prim", args, results, loc, attrs))
            return tuple(results)
        if rtype == T.NONE:
            self.emit(Op("prim", args, [], loc, attrs))
            return S(None)
        v = Value(rtype, hint)
        self.emit(Op("prim", args, [v], loc, attrs))
        if isinstance(rtype, T.Array) and (key == "numpy.imag" or (
                (rule.view or rule.maybe_view) and args and args[0].id in self.imag_copies)):
            self.imag_copies.add(v.id)
        return v

    def _complex_key(self, key: str, args: list[Value], rtype: Any, loc: Loc) -> str:
        """The rule that differentiates a call with complex operands or result (`rules/complex.py`),
        or a refusal at the user's line."""
        from ..rules.complex import complex_key

        new, why = complex_key(key, [a.type for a in args], rtype)
        if why:
            raise ZymoTypeError(f"cannot differentiate {key} of complex numbers", loc, why=why,
                                hint="compute it from the real and imaginary parts (np.real, np.imag), "
                                     "or see the README's section on complex numbers")
        return new

    def getitem(self, obj: Value, index: tuple, loc: Loc, hint: str) -> Value:
        t = TI.infer_getitem(obj.type, index, loc)
        args = [obj]
        tree = self.encode(index, args)
        v = Value(t, hint)
        self.emit(Op("getitem", args, [v], loc, {"index": tree}))
        if obj.id in self.imag_copies and isinstance(t, T.Array):
            self.imag_copies.add(v.id)
        return v

    def setitem(self, obj: Value, index: tuple, val: Value, loc: Loc) -> None:
        TI.infer_getitem(obj.type, index, loc)
        if T.is_complex(val.type) and not T.is_complex(obj.type) and isinstance(obj.type, T.Array):
            raise ZymoTypeError(f"storing a complex value into a real array ({obj.type})", loc,
                                why="NumPy would discard the imaginary part (ComplexWarning) or raise",
                                hint="make the array complex (np.zeros(n, dtype=complex)), or store np.real(v)")
        if obj.id in self.imag_copies:
            raise ZymoTypeError("writing into np.imag(z) (or z.imag) is not supported", loc,
                                hint="build the complex array from its parts: re + 1j * im")
        args = [obj, val]
        tree = self.encode(index, args)
        self.emit(Op("setitem", args, [], loc, {"index": tree}))


def _complex_result(t: Any) -> bool:
    return any(T.is_complex(x) for x in t) if isinstance(t, tuple) else T.is_complex(t)


def _nested_numbers(b: Any) -> bool:
    """Whether binding `b` is a tuple (or slice) holding a non-constant float or complex value."""
    if not isinstance(b, (tuple, slice)):
        return False
    parts = b if isinstance(b, tuple) else (b.start, b.stop, b.step)
    return any(_nested_numbers(x) or (isinstance(x, Value) and not x.is_const and x.type.differentiable
                                      and isinstance(x.type, (T.Scalar, T.Array))) for x in parts)


def _plain(b: Any) -> Any:
    """A binding as `analysis.types` wants it: values stay, statics become objects."""
    if isinstance(b, S):
        return b.obj
    if isinstance(b, tuple):
        return tuple(_plain(x) for x in b)
    if isinstance(b, slice):
        return slice(_plain(b.start), _plain(b.stop), _plain(b.step))
    return b
