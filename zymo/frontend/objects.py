"""Python data as bindings: objects, dataclasses, namedtuples, dicts and closure cells.

Contract (scalar replacement; the frontend and the API share `record`/`role`, so
both see the same leaves in the same order):
- `record(obj)` says whether `obj` is structured data zymo flattens, and how:
  `("frozen", fields)` for namedtuples and frozen dataclasses (immutable values),
  `("mutable", fields)` for instances of ordinary classes and (non-frozen)
  dataclasses, `("dict", fields)` for dicts with string keys; None otherwise.
  `fields` lists (key, value) in declaration / insertion order.
- `role(kind, value)` of one field: "value" (an array, list, tuple, nested
  record, or a float of a frozen record: an IR parameter like any argument),
  "box" (a float held by a mutable record or dict: passed as a one-element array,
  so reads are loads and writes are stores, and the memory machinery (activity,
  shadows, caching, reverse zeroing) applies unchanged; the API writes the box back
  to the object, and its shadow box to the shadow object, after the call), or
  "static" (ints, bools, strings, None, callables, other objects: compile-time
  constants that are part of the compile-cache key).
- An argument record lowers to an `Obj` binding: `fields` maps keys to bindings
  (a `Box` for a boxed float). The binding itself never changes: mutation goes
  through memory, so objects need no SSA carrying through loops and branches.
  Attribute reads give the field's binding (a load for a box); class attributes
  give methods (`self` is an argument, inlined like any call), properties,
  static and class methods, and class constants, each re-checked at every call
  (`_guard_class_attr`: a class patched between calls makes another program).
- Attribute (and dict item) writes store into a float's box or into an array
  in place (`obj.x[...] = v`); rebinding an array attribute, writing an int
  attribute, adding an attribute, or writing to a frozen record raises an
  error naming the line, with a hint.
- Captured objects (globals, closure cells) stay lazy `S(obj)` bindings: arrays
  and frozen floats are captured as today; a float attribute of a captured
  mutable record, and a closure cell holding a float (`nonlocal`), become a
  `Slot` captured parameter, boxed by the API per call and written back.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import types
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ..errors import UnsupportedSyntax, ZymoSourceError, ZymoTypeError
from ..ir import types as T
from ..ir.core import Value
from .bindings import S

_NOT_RECORDS = ("numpy", "builtins", "numba", "scipy", "types", "functools", "collections.abc")


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def record(obj: Any) -> tuple[str, list[tuple[str, Any]]] | None:
    """("frozen" | "mutable" | "dict", [(key, value), ...]) of structured data, or None."""
    if _is_namedtuple(obj):
        return "frozen", list(zip(type(obj)._fields, obj))
    if type(obj) is dict:
        if not all(isinstance(k, str) for k in obj):
            return None
        return "dict", list(obj.items())
    if isinstance(obj, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                        types.MethodType, np.ndarray, np.generic, list, tuple, dict, str, bytes,
                        int, float, complex)) or obj is None:
        return None
    mod = type(obj).__module__ or ""
    if mod.split(".")[0] in _NOT_RECORDS or mod in _NOT_RECORDS:
        return None
    if dataclasses.is_dataclass(obj):
        frozen = cast(Any, type(obj)).__dataclass_params__.frozen
        if frozen:
            return "frozen", [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        return "mutable", list(d.items())
    slots = [s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())]
    if slots:
        return "mutable", [(s, getattr(obj, s)) for s in slots if hasattr(obj, s)]
    return None


def role(kind: str, v: Any) -> str:
    if record(v) is not None or isinstance(v, (np.ndarray, list, tuple)):
        return "value"
    if isinstance(v, (float, np.floating)):
        return "value" if kind == "frozen" else "box"
    if isinstance(v, (complex, np.complexfloating)):
        raise ZymoTypeError(f"a complex number held by a {kind} object is not supported yet",
                            hint="pass it as an argument, or keep it in a complex array attribute")
    return "static"


def get_field(obj: Any, key: str) -> Any:
    if type(obj) is dict:
        return obj[key]
    if isinstance(obj, types.CellType):
        return obj.cell_contents
    return getattr(obj, key)


def set_field(obj: Any, key: str, value: Any) -> None:
    if type(obj) is dict:
        obj[key] = value
    elif isinstance(obj, types.CellType):
        obj.cell_contents = value
    else:
        setattr(obj, key, value)


def box_of(v: Any) -> np.ndarray:
    return np.array([v], dtype=np.float32 if isinstance(v, np.float32) else np.float64)


def unbox(box: np.ndarray, like: Any) -> Any:
    return type(like)(box[0]) if isinstance(like, np.floating) else float(box[0])


@dataclass(eq=False)
class Box:
    """A boxed float field of a mutable record: a one-element array value."""
    value: Value


@dataclass(eq=False)
class Obj:
    """The binding of a record argument (see the module docstring)."""
    cls: type
    kind: str  # "frozen" | "mutable" | "dict"
    fields: dict[str, Any]
    name: str


@dataclass(eq=False)
class Bound:
    """A method looked up on a record's class, bound to the record's binding."""
    fn: Any
    self_: Any


@dataclass(eq=False)
class Slot:
    """A captured float held by a mutable object's attribute, a dict item or a closure cell."""
    owner: Any
    key: str
    name: str


# -- lowering ---------------------------------------------------------------------


def bind_argument(lw: Any, obj: Any, name: str) -> tuple[Any, Any] | None:
    """Binding and flattening tree of a record argument (None if `obj` is not a record)."""
    rec = record(obj)
    if rec is None:
        return None
    kind, fields = rec
    out: dict[str, Any] = {}
    tree: list[int | None] = []
    for key, v in fields:
        r = role(kind, v)
        sub = f"{name}_{key}"
        if r == "box":
            p = Value(T.Array("float32" if isinstance(v, np.float32) else "float64", 1), sub)
            lw.params.append(p)
            out[key] = Box(p)
            tree.append(len(lw.params) - 1)
        elif r == "static":
            out[key] = _static(lw, v, sub)
            tree.append(None)
        else:
            b, t = lw._param_binding(v, sub)
            out[key] = b
            tree.append(t)
    return Obj(type(obj), kind, out, name), tuple(tree)


def _static(lw: Any, v: Any, name: str) -> Any:
    if isinstance(v, (bool, np.bool_, int, np.integer)) and not isinstance(v, type):
        return lw.b.const(bool(v) if isinstance(v, (bool, np.bool_)) else int(v), lw.loc(ast.Pass()), name)
    return S(v)


def _zero(lw: Any, node: ast.AST) -> Value:
    return lw.b.const(0, lw.loc(node), "k0")


def get_attr(lw: Any, obj: Obj, attr: str, node: ast.AST) -> Any:
    """`obj.attr` for a record binding."""
    if attr in obj.fields and obj.kind != "dict":
        return _read(lw, obj.fields[attr], attr, node)
    if obj.kind == "dict":
        raise lw.error(UnsupportedSyntax, f"dict method or attribute {attr!r} is not supported", node,
                       hint="read items with d['key']")
    cls = obj.cls
    cls_attr = inspect.getattr_static(cls, attr, _MISSING)
    if cls_attr is _MISSING:
        raise lw.error(ZymoSourceError, f"{cls.__name__} object {obj.name!r} has no attribute {attr!r}",
                       node)
    if isinstance(cls_attr, (staticmethod, classmethod, property, types.FunctionType)):
        _guard_class_attr(lw, cls, attr, cls_attr)
    if isinstance(cls_attr, staticmethod):
        return S(cls_attr.__func__)
    if isinstance(cls_attr, classmethod):
        return Bound(cls_attr.__func__, S(cls))
    if isinstance(cls_attr, property):
        return lw.inline(cls_attr.fget, [obj], {}, node)
    if isinstance(cls_attr, types.FunctionType):
        return Bound(cls_attr, obj)
    return lw.capture(getattr(cls, attr), lambda: getattr(cls, attr), attr, node, ("cls", cls, attr))


def _guard_class_attr(lw: Any, cls: type, attr: str, cls_attr: Any) -> None:
    """Re-check at every call that the method, property, static or class method `attr` an argument
    record's class gave is still the class's (a class patched between calls, `Model.act = other`, makes
    another program; the call's cache key is the class, not its attributes). `getattr(cls, attr)`
    (about 0.1 us) is the object a lookup gives (a function, a static method's function, a property, a
    new bound method of the class method's function); the class that defines it must still hold the
    very descriptor (a function rewrapped as a static method there), and the function its code."""
    owner = next((c for c in cls.__mro__ if attr in c.__dict__), type(cls))  # (else the metaclass's)
    want = cls_attr.__func__ if isinstance(cls_attr, (staticmethod, classmethod)) else cls_attr
    fn = cls_attr.fget if isinstance(cls_attr, property) else want
    code = getattr(fn, "__code__", None)  # (a function's code replaced in place)
    if isinstance(cls_attr, classmethod):
        def same() -> bool:
            now = getattr(cls, attr)
            return type(now) is types.MethodType and now.__func__ is want and now.__self__ is cls \
                and owner.__dict__.get(attr) is cls_attr and getattr(fn, "__code__", None) is code
    else:
        def same() -> bool:
            return getattr(cls, attr) is want and owner.__dict__.get(attr) is cls_attr \
                and getattr(fn, "__code__", None) is code
    lw.guard(("cls", cls, attr), same)


def get_item(lw: Any, obj: Obj, key: Any, node: ast.AST) -> Any:
    """`obj[key]` for a dict (constant string key) or a namedtuple (constant int)."""
    if obj.kind == "dict":
        if not (isinstance(key, S) and isinstance(key.obj, str)):
            raise lw.error(UnsupportedSyntax, "dicts can only be indexed by constant strings here", node,
                           hint="write the key out: d['name']")
        if key.obj not in obj.fields:
            raise lw.error(ZymoSourceError, f"dict {obj.name!r} has no key {key.obj!r}", node)
        return _read(lw, obj.fields[key.obj], key.obj, node)
    if issubclass(obj.cls, tuple) and isinstance(key, Value) and key.is_const and isinstance(key.const, int):
        return _read(lw, list(obj.fields.values())[key.const], str(key.const), node)
    raise lw.error(UnsupportedSyntax, f"cannot index a {obj.cls.__name__} object", node)


def as_tuple(obj: Obj) -> tuple | None:
    """The fields of a namedtuple binding as a tuple (for unpacking and iteration)."""
    if issubclass(obj.cls, tuple):
        return tuple(obj.fields.values())
    return None


def _read(lw: Any, b: Any, key: str, node: ast.AST) -> Any:
    if isinstance(b, Box):
        return lw.b.getitem(b.value, (_zero(lw, node),), lw.loc(node), key)
    return b


def set_field_binding(lw: Any, obj: Any, key: str, value: Any, node: ast.AST, what: str = "attribute") -> None:
    """`obj.key = value` (or `obj[key] = value` for a dict) where `obj` is a binding."""
    if isinstance(obj, S):
        _set_captured(lw, obj.obj, key, value, node, what)
        return
    if not isinstance(obj, Obj):
        raise lw.error(UnsupportedSyntax, f"cannot assign to an {what} of this value", node)
    if obj.kind == "frozen":
        raise lw.error(ZymoTypeError, f"{obj.cls.__name__} {obj.name!r} is immutable (a frozen dataclass or "
                       "namedtuple)", node, hint="build a new one with dataclasses.replace / _replace "
                       "outside the function, or use a mutable class")
    if key not in obj.fields:
        raise lw.error(UnsupportedSyntax, f"adding the new {what} {key!r} to {obj.name!r} is not supported",
                       node, hint=f"give {obj.name} a {key} before calling zymo")
    _store(lw, obj.fields[key], value, f"{obj.name}.{key}", node)


def _store(lw: Any, field: Any, value: Any, label: str, node: ast.AST) -> None:
    if isinstance(field, Box):
        v = lw.as_value(value, node)
        if not isinstance(v.type, T.Scalar):
            raise lw.error(ZymoTypeError, f"{label} holds a float; cannot store a {v.type} in it", node)
        lw.b.setitem(field.value, (_zero(lw, node),), v, lw.loc(node))
        return
    if isinstance(field, Value) and isinstance(field.type, T.Array) and value is field:
        return  # `self.x = self.x` after an in-place update
    raise lw.error(UnsupportedSyntax, f"rebinding {label} is not supported", node,
                   "zymo passes arrays by reference and ints as compile-time constants; "
                   "only float fields can be assigned",
                   f"write into the array instead ({label}[...] = value), or keep the int outside")


def _set_captured(lw: Any, owner: Any, key: str, value: Any, node: ast.AST, what: str) -> None:
    rec = record(owner)
    if rec is None or rec[0] == "frozen":
        raise lw.error(UnsupportedSyntax, f"cannot assign to an {what} of this captured object", node,
                       hint="use a mutable object, or pass it as an argument")
    cur = get_field(owner, key) if _has(owner, key) else _MISSING
    if cur is _MISSING:
        raise lw.error(UnsupportedSyntax, f"adding the new {what} {key!r} is not supported", node)
    if role(rec[0], cur) != "box":
        _store(lw, lw.capture(cur, lambda: get_field(owner, key), key, node), value, key, node)
        return
    _store(lw, Box(capture_slot(lw, owner, key, key)), value, key, node)


def _has(owner: Any, key: str) -> bool:
    return key in owner if type(owner) is dict else hasattr(owner, key)


def captured_attr(lw: Any, owner: Any, key: str, node: ast.AST, item: bool = False) -> Any:
    """`owner.key` (or `owner[key]`) of a captured object: a boxed float of a mutable record is a
    load from its slot; anything else is captured as before."""
    rec = record(owner)
    if item and type(owner) is dict and key not in owner:
        raise lw.error(ZymoSourceError, f"the captured dict has no key {key!r}", node)
    v = owner[key] if item else getattr(owner, key)
    if rec is not None and (rec[0] == "dict") == item and rec[0] != "frozen" and role(rec[0], v) == "box" \
            and (item or _instance_field(owner, key)):
        return _read(lw, Box(capture_slot(lw, owner, key, key)), key, node)
    return lw.capture(v, lambda: get_field(owner, key), key, node, ("item" if item else "attr", id(owner), key))


def _instance_field(owner: Any, key: str) -> bool:
    """Whether `owner.key` is held by the object itself (its `__dict__` or a `__slots__` field),
    which a slot may box and write back after the call; not a class attribute or a property
    read through it (written back, it became an instance attribute shadowing the class's: the
    object changed, and a later `Cls.key = ...` unseen; a property or a read-only class attribute
    of a `__slots__` class raised a raw AttributeError, helper 85)."""
    d = getattr(owner, "__dict__", None)
    if isinstance(d, dict) and key in d:
        return True
    return isinstance(inspect.getattr_static(type(owner), key, None), types.MemberDescriptorType)


def cell_read(lw: Any, cell: Any, name: str, node: ast.AST) -> Value:
    """A float in a closure cell: a load from the cell's slot (so `nonlocal` writes are stores)."""
    return _read(lw, Box(capture_slot(lw, cell, "cell_contents", name)), name, node)


def cell_write(lw: Any, cell: Any, name: str, value: Any, node: ast.AST) -> None:
    """`name = value` for a `nonlocal` name held in a closure cell."""
    cur = cell.cell_contents
    if not isinstance(cur, (float, np.floating)):
        raise lw.error(UnsupportedSyntax, f"assigning the nonlocal {name!r} (a {type(cur).__name__}) is not "
                       "supported", node, "only float closure variables can be assigned",
                       f"keep {name} in an array and write into it ({name}[...] = value)")
    _store(lw, Box(capture_slot(lw, cell, "cell_contents", name)), value, name, node)


def capture_slot(lw: Any, owner: Any, key: str, name: str) -> Value:
    """The captured parameter (a box) of a float held by `owner` (an object, dict or cell)."""
    k = ("slot", id(owner), key)
    if k not in lw.captured:
        v = get_field(owner, key)
        slot = Slot(owner, key, name)
        p = Value(T.Array("float32" if isinstance(v, np.float32) else "float64", 1), name)
        lw.captured[k] = (p, slot, [(lambda slot=slot: slot, name)])
        # the slot is read afresh at each call, but as a float of this type: another value (an
        # int, an array) makes another program (it was boxed as a float: a raw TypeError, or an
        # int written back as a float; helper 83)
        kind = type(v)
        lw.frozen.append((lambda owner=owner, key=key, kind=kind: type(get_field(owner, key)) is kind, True))
    return lw.captured[k][0]


def pin(lw: Any, resolver: Any, obj: Any) -> None:
    """Re-check on every call that a captured object is still the same object: by identity, the
    object held (an id alone could be a new object's once the old one is freed: a rebound global
    record reused a program compiled for the old one's static fields, a wrong gradient, helper 71)."""
    lw.frozen.append((lambda obj=obj: resolver() is obj, True))


_MISSING = object()
