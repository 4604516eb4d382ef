"""Python data at the API boundary: records, boxes, closures and their shadows.

Contract (used by `boundary.py` and `cache.py`; the frontend's side is `frontend/objects.py`):
- `flatten_record` turns a record argument (object, dataclass, namedtuple, dict)
  into leaves in the frontend's order; a boxed float becomes a one-element array
  (its shadow a box of the shadow object's field) that `write_back` copies back to
  the object and the shadow object after the call. Boxes of the same field reached
  twice are one box (`share_boxes`), so aliasing is preserved.
- `type_key` keys the compile cache on a record's class, field names, leaf types
  and static (int, string) values; other static values (functions) by `Identity`.
- `captured_leaves` gives the leaves of what the function captured: a `Slot` (a
  float in a mutable object or a closure cell) is boxed per call; with
  `Duplicated(f, df)`, captured data reached from `f`'s closure cells and defaults
  takes its shadow from the same place in `df` (`shadow_map`); everything else is
  Const (and gets an internal shadow if active data flows into it).
- `check_const_function`: with `Const(f)`, active data written into captured
  memory raises `ZymoUsageError` naming the variable and the line of the write.
- `replayable`: whether a call may be replayed by `cache.Repeat` (not when a record,
  a slot or `Rows` is involved: their fields and rows are read afresh on every call).
"""
from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import ZymoUsageError
from .frontend.objects import Slot, box_of, get_field, record, role, set_field, unbox
from .ir.core import walk


class BoxRef:
    """Where a box comes from and goes back to."""

    __slots__ = ("owner", "key", "like", "shadow_owner")

    def __init__(self, owner: Any, key: str, like: Any, shadow_owner: Any):
        self.owner, self.key, self.like, self.shadow_owner = owner, key, like, shadow_owner


def is_record(obj: Any) -> bool:
    return record(obj) is not None


def flatten_record(obj: Any, shadow: Any, kind: str, where: str, out: list, flatten: Callable,
                   leaf: Callable) -> bool:
    """Append the leaves of a record argument to `out`; False if `obj` is not a record."""
    rec = record(obj)
    if rec is None:
        return False
    rkind, fields = rec
    for key, v in fields:
        r = role(rkind, v)
        s = get_field(shadow, key) if shadow is not None else None
        if r == "box":
            ref = BoxRef(obj, key, v, shadow)
            out.append(leaf(box_of(v), box_of(s) if shadow is not None else None, kind, ref))
        elif r == "value":
            flatten(v, s, kind, f"{where}.{key}", out)
    return True


def share_boxes(leaves: list) -> None:
    """One box per (object, field): the same field reached twice shares its box and shadow box."""
    seen: dict = {}
    for lf in leaves:
        ref = lf.slot
        if ref is None:
            continue
        k = (id(ref.owner), ref.key)
        if k in seen:
            lf.value, lf.shadow = seen[k]
        else:
            seen[k] = (lf.value, lf.shadow)


class Identity:
    """A part of a cache key that stands for an object by its identity (a callable argument, a
    record's static field): it holds the object, so that no other object can be given its
    address while the key lives (a closure made anew for each call would otherwise find the
    freed one's entry, and its captured values), hashes as `id` and equals only a key of the
    same object."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return type(other) is Identity and other.obj is self.obj

    def __repr__(self) -> str:
        return f"Identity({self.obj!r})"


class Rows(list):
    """A list of tuples of floats (`[(2.0, 3.0)]`, seed 000) passed to the derivative as a list
    of lists. Tuples are immutable, so the derivative cannot write a shadow tuple in place:
    after the call `write_back` replaces each tuple of the caller's shadow list (`origin`) with
    the rows' new values, as Enzyme does."""

    origin: list


def as_rows(obj: Any) -> Any:
    """`obj` as `Rows` if it is a non-empty list of tuples of floats, else `obj` itself."""
    if not (isinstance(obj, list) and obj and all(
            isinstance(t, tuple) and record(t) is None and t and
            all(isinstance(x, (float, np.floating)) and not isinstance(x, bool) for x in t) for t in obj)):
        return obj
    rows = Rows(list(t) for t in obj)
    rows.origin = obj
    return rows


def write_back(leaves: list) -> None:
    for lf in leaves:
        for sh in (lf.shadow if isinstance(lf.shadow, tuple) else (lf.shadow,)):
            if isinstance(sh, Rows):
                sh.origin[:] = [tuple(type(o)(x) for o, x in zip(old, r)) for old, r in zip(sh.origin, sh)]
        ref = lf.slot
        if ref is None:
            continue
        set_field(ref.owner, ref.key, unbox(lf.value, ref.like))
        if ref.shadow_owner is not None and lf.shadow is not None:
            set_field(ref.shadow_owner, ref.key, unbox(lf.shadow, get_field(ref.shadow_owner, ref.key)))


def type_key(obj: Any, key_of: Callable) -> Any:
    rec = record(obj)
    if rec is None:
        return None
    rkind, fields = rec
    parts = []
    for k, v in fields:
        r = role(rkind, v)
        if r == "box":
            parts.append((k, "box", isinstance(v, np.float32)))
        elif r == "static":
            parts.append((k, "static", v if isinstance(v, (int, str, bool, np.integer)) or v is None else Identity(v)))
        else:
            parts.append((k, key_of(v)))
    return ("record", type(obj), rkind, tuple(parts))


def has_memory(obj: Any) -> bool:
    """Whether a record holds memory (arrays, lists, or boxed floats)."""
    rec = record(obj)
    if rec is None:
        return isinstance(obj, (np.ndarray, list)) or (isinstance(obj, tuple) and any(map(has_memory, obj)))
    return any(role(rec[0], v) == "box" or has_memory(v) for _, v in rec[1])


def has_unboxed_float(obj: Any) -> bool:
    """Whether a value holds an immutable float (a tuple's or a frozen record's)."""
    rec = record(obj)
    if rec is None:
        if isinstance(obj, tuple):
            return any(map(has_unboxed_float, obj))
        return isinstance(obj, (float, complex, np.floating, np.complexfloating))
    return any(role(rec[0], v) == "value" and has_unboxed_float(v) for _, v in rec[1])


def restructure(obj: Any, go: Callable) -> Any:
    """A frozen record shaped like `obj` with `go` applied to its fields (Active derivatives)."""
    rec = record(obj)
    vals = [go(v) if role(rec[0], v) == "value" else None for _, v in rec[1]]
    if isinstance(obj, tuple):
        return type(obj)(*vals)
    out = object.__new__(type(obj))
    for (k, _), v in zip(rec[1], vals):
        object.__setattr__(out, k, v)
    return out


def replayable(norm: list, leaves: list) -> bool:
    """Whether a call may be replayed by identity of its arguments: no boxed float, no
    record at any depth of a tuple (a record's fields may be rebound between calls), and no
    `Rows` (the program runs on the copy `as_rows` made, which a replay would reuse: a new row
    stored into the caller's list would not be seen, and no shadow written back)."""
    return (not any(lf.slot is not None for lf in leaves)
            and not any(_holds_record(v) or _has_rows(v, s) for v, s, _ in norm))


def _has_rows(v: Any, s: Any) -> bool:
    return any(isinstance(x, Rows) for x in (v, *(s if isinstance(s, tuple) else (s,))))


def _holds_record(v: Any) -> bool:
    if is_record(v):
        return True
    return isinstance(v, (tuple, list)) and any(_holds_record(x) for x in v)


# -- functions and what they captured --------------------------------------------------


def function_annotation(f: Any) -> tuple[Any, Any, bool]:
    """(function, its shadow or None, whether it is Const) of `autodiff`'s function argument."""
    from .annotations import Annotation, Const, Duplicated

    if isinstance(f, Const):
        return f.val, None, True
    if isinstance(f, Duplicated):
        from .shadows import check_shadow

        check_shadow(f.val, f.dval, "the function's shadow")
        return f.val, f.dval, False
    if isinstance(f, Annotation):
        raise ZymoUsageError(f"annotate the function with Const(f) or Duplicated(f, zymo.make_zero(f)), "
                             f"not {type(f).__name__}")
    return f, None, False


def shadow_map(f: Any, df: Any) -> dict[int, Any]:
    """id(primal object) -> its shadow, pairing `f`'s closure and defaults with `df`'s."""
    out: dict[int, Any] = {}

    def pair(p: Any, s: Any) -> None:
        if id(p) in out or s is None:
            return
        if isinstance(p, types.FunctionType):
            out[id(p)] = s
            for c, dc in zip(p.__closure__ or (), getattr(s, "__closure__", None) or ()):
                out[id(c)] = dc
                try:
                    pair(c.cell_contents, dc.cell_contents)
                except ValueError:
                    pass
            for d, dd in zip(p.__defaults__ or (), getattr(s, "__defaults__", None) or ()):
                pair(d, dd)
        elif isinstance(p, (np.ndarray, list)):
            out[id(p)] = s
            if isinstance(p, list):
                for a, b in zip(p, s):
                    pair(a, b)
        elif isinstance(p, tuple) and not is_record(p):
            for a, b in zip(p, s):
                pair(a, b)
        elif is_record(p):
            out[id(p)] = s
            for k, v in record(p)[1]:
                pair(v, get_field(s, k))

    pair(f, df)
    return out


def captured_leaves(captured: list, smap: dict | None, leaf: Callable) -> list:
    """Leaves of the captured parameters (`lower`'s `captured` list), in order."""
    out = []
    for _param, obj, _where in captured:
        if isinstance(obj, Slot):
            v = get_field(obj.owner, obj.key)
            sowner = smap.get(id(obj.owner)) if smap else None
            ref = BoxRef(obj.owner, obj.key, v, sowner)
            out.append(leaf(box_of(v), box_of(get_field(sowner, obj.key)) if sowner is not None else None,
                            "dup" if sowner is not None else "const", ref))
            continue
        s = smap.get(id(obj)) if smap else None
        if s is not None and isinstance(obj, (np.ndarray, list)):
            out.append(leaf(obj, s, "dup"))
        else:
            out.append(leaf(obj, None, "const"))
    return out


def check_const_function(comp: Any, captured: list, n_args: int) -> None:
    """With `Const(f)`, refuse active data flowing into captured memory (see the contract)."""
    ir, act = comp.ir, comp.activity
    for k in comp.active_params:
        if k < n_args:
            continue
        param, obj, where = captured[k - n_args]
        names = sorted({n for _, n in where}) or [getattr(obj, "name", "?")]
        roots = act.roots.get(param.id, frozenset())
        line = ""
        for op in walk(ir.body):
            target = None
            if op.kind == "setitem" and act.is_active(op.args[1]):
                target = op.args[0]
            elif op.kind == "prim" and "out" in op.attrs:
                target = op.args[op.attrs["out"]]
                if not any(act.is_active(v) for v in op.args if v is not target and v.type.differentiable):
                    target = None
            if target is not None and act.roots.get(target.id, frozenset()) & roots:
                line = f" at {op.loc}\n{op.loc.format()}\n"
                break
        raise ZymoUsageError(
            f"Const({ir.name}) declares what {ir.name} captured constant, but active data is written "
            f"into the captured variable {', '.join(map(repr, names))}{line or ' '}"
            f"- a derivative through it would be silently wrong. Pass {ir.name} unannotated (zymo then "
            f"gives that memory a shadow for the call), or Duplicated({ir.name}, zymo.make_zero({ir.name})) "
            "to own the shadow of what it captured.")
