"""The boundary between the user's values and the generated program.

Contract: on the way in, `check_call` refuses misused return activities and
`normalize` misused annotations (an `Active` array, `Active` in forward mode, a shadow
of another shape or dtype: `ZymoUsageError` before any work); `flatten_arguments`
flattens the annotated arguments into `Leaf`s (one per array, float or list; records,
tuples and boxed floats through `data.py`), refusing writable self-overlapping arrays
(`self_overlapping`); `type_key` is the part of a value's type the compile cache keys on
and `alias_classes` numbers the parameters that may share memory; `check_shared_shadows`
refuses arguments that share memory the program writes into whose shadows do not share it
the same way. On the way out,
`call_shadows` gives the generated program its shadow arguments (allocating internal
shadows of Const memory that receives active data), and `Finish` turns the program's
flat results into what `autodiff` returns (`derivs`: one entry per argument, rebuilt
with its structure; `rebuild_result`: the function's result as the user's code returned
it; `result_of`: that, a compiled program's numbers of the Python backend's types,
`numpy_results`). Shadow checks and zeros themselves are in `shadows.py`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import data
from .analysis.types import type_of_value
from .annotations import (
    Active,
    Annotation,
    BatchDuplicated,
    BatchDuplicatedNoNeed,
    Const,
    Duplicated,
    DuplicatedNoNeed,
    Mode,
)
from .errors import ZymoUsageError
from .frontend.bindings import S, rebuild
from .ir.core import Block, Function, Value
from .ir.types import Array, Scalar
from .pipeline import Compiled
from .shadows import check_shadow, make_zero

# -- on the way in: argument flattening ----------------------------------------------------

@dataclass
class Leaf:
    """One array, float or list of a call's flattened arguments, with its shadow."""

    value: Any
    shadow: Any  # None unless Duplicated; in batch mode a tuple with one shadow per lane
    kind: str  # "const" | "active" | "dup"
    slot: Any = None  # a boxed float: where it is written back (data.BoxRef)


def flatten(obj: Any, shadow: Any, kind: str, where: str, out: list[Leaf]) -> None:
    """Append the leaves of `obj` (with its `shadow`) to `out`; static values (None, strings,
    callables) are not parameters of the IR and give none."""
    if data.flatten_record(obj, shadow, kind, where, out, flatten, Leaf):
        return
    if isinstance(obj, tuple):
        for k, o in enumerate(obj):
            flatten(o, shadow[k] if shadow is not None else None, kind, f"{where}[{k}]", out)
        return
    if obj is None or isinstance(obj, str) or callable(obj):
        return  # static: not a parameter of the IR
    for arr, what in ((obj, where), (shadow, f"the shadow of {where}")):
        items = arr if isinstance(arr, list) else [arr]  # a list of arrays: each element
        if any(isinstance(a, np.ndarray) and self_overlapping(a) for a in items):
            raise ZymoUsageError(
                f"{what}: a writable array whose elements overlap in memory (an as_strided view?); zymo, "
                "like NumPy's own writes, takes different indices to name different elements. Pass a copy "
                "(np.array(x)), or a read-only view (as_strided(..., writeable=False)) if nothing writes it")
    out.append(Leaf(obj, shadow, kind))


def self_overlapping(a: np.ndarray) -> bool:
    """Whether writable array `a` may have two indices that name one element: not contiguous,
    and its strides, sorted, do not nest (each one at least the bytes spanned by the
    dimensions of smaller stride). Nesting strides never overlap; a layout that interleaves
    without overlapping is refused too (none of NumPy's own views makes one)."""
    flags = a.flags
    if not flags.writeable or flags.c_contiguous or flags.f_contiguous or a.size <= 1:
        return False
    dims = sorted((abs(st), n) for st, n in zip(a.strides, a.shape) if n > 1)
    span = a.itemsize
    for st, n in dims:
        if st < span:
            return True
        span += st * (n - 1)
    return False


def batch_width(args: tuple) -> int:
    """The batch width W of a call: that of its BatchDuplicated arguments, else 1."""
    widths = {a.width for a in args if isinstance(a, BatchDuplicated)}
    if not widths:
        return 1
    if len(widths) > 1:
        raise ZymoUsageError(f"BatchDuplicated arguments must have the same number of shadows, not {sorted(widths)}")
    dup = [k for k, a in enumerate(args) if isinstance(a, Duplicated)]
    if dup:
        raise ZymoUsageError(f"argument {dup[0]}: Duplicated cannot be mixed with BatchDuplicated; "
                             "pass BatchDuplicated(x, (dx,) * W) to share one shadow across the lanes")
    return widths.pop()


def normalize(mode: Mode, args: tuple) -> list[tuple[Any, Any, str]]:
    """(value, shadow, kind) per annotated argument, kind "const", "active", "dup" or "batch";
    refuses the annotations `mode` does not take."""
    norm: list[tuple[Any, Any, str]] = []
    for k, a in enumerate(args):
        where = f"argument {k}"
        if isinstance(a, type) and issubclass(a, Annotation):
            raise ZymoUsageError(f"{where}: annotate a value, e.g. {a.__name__}(x), not the class {a.__name__}")
        if isinstance(a, Annotation) and isinstance(getattr(a, "val", None), Annotation):
            raise ZymoUsageError(f"{where}: {type(a).__name__}({type(a.val).__name__}(...)): an annotation of an "
                                 "annotation; annotate the value once")
        if isinstance(a, BatchDuplicated):
            for lane, d in enumerate(a.dvals):
                check_shadow(a.val, d, f"{where} (shadow {lane + 1})")
            if not mode.forward and has_float_leaf(a.val):
                raise ZymoUsageError(
                    f"{where}: in reverse mode a float cannot be BatchDuplicated (its shadows are "
                    "immutable); use Active(x), whose derivative comes back once per lane"
                )
            norm.append((data.as_rows(a.val), tuple(data.as_rows(d) for d in a.dvals), "batch"))
        elif isinstance(a, Duplicated):
            check_shadow(a.val, a.dval, where)
            if not mode.forward and has_float_leaf(a.val):
                raise ZymoUsageError(
                    f"{where}: in reverse mode a float cannot be Duplicated (its shadow is immutable); "
                    "use Active(x) (for a tuple, namedtuple or frozen dataclass holding floats and arrays, "
                    "pass the floats separately or use a mutable class)"
                )
            norm.append((data.as_rows(a.val), data.as_rows(a.dval), "dup"))
        elif isinstance(a, Active):
            if mode.forward:
                raise ZymoUsageError(
                    f"{where}: Active is a reverse-mode annotation; in forward mode pass "
                    "Duplicated(x, dx) with the tangent dx"
                )
            if has_memory_leaf(a.val):
                raise ZymoUsageError(
                    f"{where}: Active only applies to immutable floats; an array is mutable memory, "
                    "so pass Duplicated(x, dx) and read its derivative from dx"
                )
            norm.append((a.val, None, "active"))
        elif isinstance(a, Const):
            norm.append((data.as_rows(a.val), None, "const"))
        elif isinstance(a, Annotation):
            raise ZymoUsageError(f"{where}: {type(a).__name__} is not supported yet")
        else:
            norm.append((data.as_rows(a), None, "const"))
    return norm


has_float_leaf = data.has_unboxed_float  # a float outside memory (a tuple's, a frozen record's)
has_memory_leaf = data.has_memory  # arrays, lists, boxed floats of mutable records


def type_key(obj: Any) -> Any:
    """What the compile cache keys a value on: its IR type (lists with their length), the
    structure of tuples and records, and static values themselves."""
    if data.is_record(obj):
        return data.type_key(obj, type_key)
    if isinstance(obj, tuple):
        return ("tuple",) + tuple(type_key(o) for o in obj)
    if obj is None or isinstance(obj, str) or callable(obj):
        return ("static", data.Identity(obj) if callable(obj) else obj)
    t = type_of_value(obj)
    if isinstance(obj, list):
        return (t, len(obj))
    return t


def _buffers(obj: Any) -> list[np.ndarray]:
    if isinstance(obj, np.ndarray):
        return [obj]
    if isinstance(obj, list):
        return [o for o in obj if isinstance(o, np.ndarray)]
    return []


def alias_classes(values: list[Any]) -> list[int]:
    """Parameters that may share memory get the same class number."""
    n = len(values)
    cls = list(range(n))

    def find(i: int) -> int:
        while cls[i] != i:
            cls[i] = cls[cls[i]]
            i = cls[i]
        return i

    mem = [k for k, v in enumerate(values) if isinstance(v, (np.ndarray, list))]
    for a_i, i in enumerate(mem):
        for j in mem[a_i + 1:]:
            vi, vj = values[i], values[j]
            same = vi is vj or any(np.may_share_memory(p, q) for p in _buffers(vi) for q in _buffers(vj))
            if same:
                cls[find(j)] = find(i)
    return [find(i) for i in range(n)]


def check_shared_shadows(comp: Compiled, leaves: list[Leaf], classes: list[int]) -> None:
    """Refuse arrays that share memory (one alias class) that the program writes into, passed
    with shadows that do not share memory the same way, element for element (`zymo.gradient(
    Reverse, f, x, x)` makes one shadow per argument): a write through one name and a read
    through the other then meet in the primal but not in the shadows, and neither shadow holds
    a derivative. Enzyme requires the same of its shadows. Also refused: `Const` memory (a
    `Const` argument, a global) sharing such memory with a `Duplicated` array, whose internal
    shadow would be another. Arrays the program only reads may have separate shadows (each
    receives its own partial derivative). Lists of arrays are checked item by item, batches
    lane by lane."""
    written = None
    by_class: dict[int, list[int]] = {}
    for k, _lf in enumerate(leaves):
        by_class.setdefault(classes[k], []).append(k)
    for c, ks in by_class.items():
        if len(ks) < 2:
            continue
        if written is None:
            written = written_classes(comp)
        if c not in written:
            continue
        dup = [(k, p) for k in ks if leaves[k].kind == "dup" for p in _shadow_pairs(leaves[k])]
        const = [(k, a) for k in ks if leaves[k].kind == "const" for a in _arrays_of(leaves[k].value)]
        for k, a in const:
            for j, (x, _) in dup:
                if np.shares_memory(a, x):
                    raise ZymoUsageError(
                        f"a Const argument or a global (flattened leaf {k}) shares memory with a Duplicated "
                        f"argument (leaf {j}) that the function writes into: the derivative flows through that "
                        "memory, so it needs the Duplicated argument's shadow; pass the array once")
        for m, (k, first) in enumerate(dup):
            for j, other in dup[m + 1:]:
                if not _same_sharing(first, other):
                    raise ZymoUsageError(
                        f"arguments that share memory the function writes into (flattened leaves {k} and {j}) "
                        "have shadows that do not share memory the same way, element for element: the "
                        "derivative with respect to each is not defined. Pass the array once, or give both "
                        "one shadow (autodiff(..., Duplicated(x, dx), Duplicated(x, dx)))")


def _arrays_of(v: Any) -> list[np.ndarray]:
    if isinstance(v, np.ndarray):
        return [v]
    if isinstance(v, list):
        return [x for x in v if isinstance(x, np.ndarray)]
    return []


def _shadow_pairs(lf: Leaf) -> list[tuple[np.ndarray, Any]]:
    """(array, its shadow) of a Duplicated leaf: an array's, or each array item's of a list;
    the shadow a tuple of one per lane in batch mode."""
    v, s = lf.value, lf.shadow
    if isinstance(v, np.ndarray):
        return [(v, s)]
    if isinstance(v, list) and isinstance(s, list) and len(s) == len(v):
        return [(x, d) for x, d in zip(v, s) if isinstance(x, np.ndarray)]
    return []


def _same_sharing(p: tuple, q: tuple) -> bool:
    """Whether the shadows of arrays `p[0]` and `q[0]` share memory as the arrays do: the same
    pairs of elements are one memory (in every lane of a batch)."""
    a, da = p
    b, db = q
    if isinstance(da, tuple) or isinstance(db, tuple):
        return (isinstance(da, tuple) and isinstance(db, tuple) and len(da) == len(db)
                and all(_same_sharing((a, x), (b, y)) for x, y in zip(da, db)))
    if not (isinstance(da, np.ndarray) and isinstance(db, np.ndarray)):
        return True  # not arrays: the shadow checks refuse them elsewhere
    if a is b and da is db:
        return True
    if (a.shape == da.shape and b.shape == db.shape and a.strides == da.strides and b.strides == db.strides
            and _start(b) - _start(a) == _start(db) - _start(da)):
        return True  # the same layout, byte for byte: the same elements meet
    primal, shadow = np.shares_memory(a, b), np.shares_memory(da, db)
    if not primal or not shadow:
        return primal == shadow
    if a.itemsize != b.itemsize or (_start(b) - _start(a)) % a.itemsize or da.itemsize != db.itemsize:
        return False  # elements that overlap in part (`c.imag` of a complex `c`): no element pairs say how
    pa, pb = _meeting(a, b)
    sa, sb = _meeting(da, db)
    return np.array_equal(pa, sa) and np.array_equal(pb, sb)


def _meeting(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (i, j) of flat (C order) indices where element i of `a` starts where element
    j of `b` does, as two arrays ordered by i."""
    ia, ib = np.intersect1d(_addresses(a), _addresses(b), assume_unique=True, return_indices=True)[1:]
    order = np.argsort(ia, kind="stable")
    return ia[order], ib[order]


def _start(x: np.ndarray) -> int:
    return x.__array_interface__["data"][0]


def _addresses(x: np.ndarray) -> np.ndarray:
    """The address of each element of `x`, in C order (one int per element, no more)."""
    out = np.full(x.shape, _start(x), dtype=np.int64)
    for axis, (n, stride) in enumerate(zip(x.shape, x.strides)):
        out += (np.arange(n, dtype=np.int64) * stride).reshape((n,) + (1,) * (x.ndim - axis - 1))
    return out.ravel()


def written_classes(comp: Compiled) -> set[int]:
    """The alias classes of parameters the program's primal writes into (a store, `out=`)."""
    from .ir.core import walk

    roots: set = set()
    for op in walk(comp.ir.body):
        target = op.args[0] if op.kind == "setitem" else (
            op.args[op.attrs["out"]] if op.kind == "prim" and "out" in op.attrs else None)
        if target is not None:
            roots |= comp.activity.roots.get(target.id, frozenset())
    return {c for kind, c in roots if kind == "param"}


def check_call(mode: Mode, ret_activity: Any, args: tuple, fshadow: Any) -> int:
    """Refuse a return activity that does not fit `mode` and the arguments; the batch width."""
    # by identity: an array passed where the activity belongs (`autodiff(Reverse, f, x)`) must not be compared
    if not any(ret_activity is a for a in (Active, Const, Duplicated, DuplicatedNoNeed, BatchDuplicated,
                                           BatchDuplicatedNoNeed)):
        shown = (f"an array of shape {ret_activity.shape}" if isinstance(ret_activity, np.ndarray)
                 else repr(ret_activity))
        raise ZymoUsageError(f"the return activity (the argument after the function) must be Active, Const, "
                             f"Duplicated or BatchDuplicated, not {shown}")
    if mode.forward and ret_activity is Active:
        raise ZymoUsageError("in forward mode the return activity is Duplicated (or Const), not Active")
    if not mode.forward and ret_activity not in (Active, Const):
        raise ZymoUsageError("in reverse mode the return activity is Active (a float) or Const")
    width = batch_width(args)
    batched = any(isinstance(a, BatchDuplicated) for a in args)  # even with one lane
    if mode.forward and batched and ret_activity in (Duplicated, DuplicatedNoNeed):
        raise ZymoUsageError("with BatchDuplicated arguments the return activity is BatchDuplicated (one "
                             "tangent per lane) or Const, not Duplicated")
    if mode.forward and not batched and ret_activity in (BatchDuplicated, BatchDuplicatedNoNeed):
        raise ZymoUsageError("a BatchDuplicated return needs BatchDuplicated arguments (their shadows are the lanes)")
    if width > 1 and fshadow is not None:
        raise ZymoUsageError("Duplicated(f, df) cannot be combined with BatchDuplicated arguments yet; pass f "
                             "unannotated (captured memory that receives active data gets internal shadows)")
    return width


def flatten_arguments(mode: Mode, args: tuple, norm: list, width: int) -> tuple[list[Leaf], set[int]]:
    """The leaves of the normalized arguments `norm`, and those of arrays passed as
    (Batch)DuplicatedNoNeed (reverse mode): their values need not survive the call."""
    leaves: list[Leaf] = []
    no_need: set[int] = set()
    for k, (v, s, kind) in enumerate(norm):
        if (type(args[k]) in (DuplicatedNoNeed, BatchDuplicatedNoNeed) and not mode.forward and not mode.split
                and isinstance(v, np.ndarray)):
            no_need.add(len(leaves))
        if kind == "batch":  # one leaf per value, holding its shadow in every lane
            per_lane: list[list[Leaf]] = []
            for d in s:
                per_lane.append([])
                flatten(v, d, "dup", f"argument {k}", per_lane[-1])
            if any(lf.slot is not None for lf in per_lane[0]):
                raise ZymoUsageError(f"argument {k}: BatchDuplicated of objects with float attributes is not "
                                     "supported yet; batch the arrays, or call once per shadow")
            if width == 1:  # one lane: the program takes the shadow itself, as for Duplicated
                leaves.extend(per_lane[0])
                continue
            for j, lf in enumerate(per_lane[0]):
                leaves.append(Leaf(lf.value, tuple(lane[j].shadow for lane in per_lane), "dup"))
        else:
            flatten(v, s, kind, f"argument {k}", leaves)
    return leaves, no_need


# -- on the way out: shadows, derivatives, results -------------------------------------------


def call_shadows(comp: Compiled, leaves: list[Leaf], all_values: list, internal: list | None = None) -> list:
    """Shadow (or tangent) arguments of the generated function, in its order.

    `internal`, when given, holds the internal shadows of an earlier call (split mode:
    the augmented forward and the reverse must see the same ones)."""
    out = []
    it = iter(internal) if internal is not None else None
    for lane in range(comp.width):  # lane by lane, as the generated function takes them
        for k in comp.active_params:
            if k < len(leaves) and leaves[k].kind == "dup":
                out.append(leaves[k].shadow if comp.width == 1 else leaves[k].shadow[lane])
            elif k < len(leaves) and leaves[k].kind == "active":
                continue  # reverse mode returns these
            elif it is not None:
                out.append(next(it))
            else:
                # Const memory that receives active data: an internal shadow for this call
                out.append(make_zero(all_values[k]))
    return out


def internal_shadows(comp: Compiled, leaves: list[Leaf], shadows: list) -> list:
    """The internal shadows among `shadows` (those zymo allocated, not the caller)."""
    out = []
    it = iter(shadows)
    for _lane in range(comp.width):
        for k in comp.active_params:
            if k < len(leaves) and leaves[k].kind == "active":
                continue
            s = next(it)
            if not (k < len(leaves) and leaves[k].kind == "dup"):
                out.append(s)
    return out


def derivs(norm, leaves: list[Leaf], comp: Compiled, adj: tuple) -> tuple:
    """One entry per user argument: the derivative of Active ones, None otherwise.

    The generated function returns the adjoints of the active float leaves in
    parameter order; a float leaf the activity analysis found inactive has
    derivative 0. In batch mode (one tuple of adjoints per lane) the derivative
    of an Active argument is a tuple with one derivative per lane."""
    if comp.width > 1:
        lanes = [_derivs1(norm, leaves, comp, a) for a in adj]
        return tuple(None if d is None else tuple(lane[i] for lane in lanes)
                     for i, d in enumerate(lanes[0]))
    return _derivs1(norm, leaves, comp, adj)


def _derivs1(norm, leaves: list[Leaf], comp: Compiled, adj: tuple) -> tuple:
    if not any(kind == "active" for _, _, kind in norm):  # every derivative is in a shadow
        return (None,) * len(norm)
    it_adj = iter(adj)
    adj_of_leaf = {}
    for k, leaf in enumerate(leaves):
        if leaf.kind == "active":
            adj_of_leaf[k] = next(it_adj) if k in comp.active_params else 0.0
    out = []
    pos = 0
    for v, _s, kind in norm:
        n = len(_leaf_list(v))
        if kind == "active":
            out.append(_restructure(v, [adj_of_leaf.get(pos + i, 0.0) for i in range(n)]))
        else:
            out.append(None)
        pos += n
    return tuple(out)


def _leaf_list(obj: Any) -> list:
    out: list[Leaf] = []
    flatten(obj, None, "const", "", out)
    return out


def _restructure(obj: Any, vals: list) -> Any:
    it = iter(vals)

    def go(o: Any) -> Any:
        if data.is_record(o):
            return data.restructure(o, go)
        if isinstance(o, tuple):
            return tuple(go(x) for x in o)
        if o is None or isinstance(o, str) or callable(o):
            return None
        d = next(it)
        return type(o)(d) if isinstance(o, (float, np.floating)) else d

    return go(obj)


def rebuild_result(ir: Function, flat: tuple) -> Any:
    """The function's result with the structure the user's code returned (tuples, None)."""

    def unstatic(b: Any) -> Any:
        if isinstance(b, tuple):
            return tuple(unstatic(x) for x in b)
        return b.obj if isinstance(b, S) else b

    return unstatic(rebuild(ir.attrs["result_template"], list(flat)))


def result_of(comp: Compiled, flat: tuple) -> Any:
    """`rebuild_result` of a program's flat results (its primal, or a tangent of it), each
    number of the type the Python backend gives it (`python_scalars`)."""
    if comp.backend != "python":
        flat = python_scalars(comp, flat)
    return rebuild_result(comp.ir, flat)


_NUMPY_SCALARS = {"f64": np.float64, "f32": np.float32, "c128": np.complex128, "c64": np.complex64}


def python_scalars(comp: Compiled, flat: tuple, tangents: bool = False) -> tuple:
    """A compiled program's flat results (`tangents`: their tangents) with each float or
    complex number that the Python backend computes as a NumPy scalar (`numpy_results`) made
    one: Numba returns a float64, a float32 or a complex number as a Python float or complex (a
    float32 widened), where the Python backend gives `np.sum`'s `np.float64` or `np.float32`.
    The tangent of an inactive result stays a float (the Python backend's 0.0)."""
    got = comp.numpy_results
    if got is None:
        primal = numpy_results(comp.ir)
        rets = comp.ir.body.ops[-1].args if comp.ir.body.ops else []
        active = [comp.activity.is_active(r) for r in rets] if len(rets) == len(primal) else [False] * len(primal)
        got = comp.numpy_results = (primal, [k if on else None for k, on in zip(primal, active)])
    kinds = got[1] if tangents else got[0]
    if not any(kinds) or len(kinds) != len(flat):
        return flat
    return tuple(x if k is None or type(x) not in (float, complex) else k(x) for x, k in zip(flat, kinds))


def numpy_results(ir: Function) -> list:
    """Per value `ir` returns: the NumPy scalar type the Python backend computes it as, or None
    (a Python number, an array, an int). A number is a NumPy scalar where NumPy made it: an
    element of an array, a NumPy function's result, an operator or builtin with an array or
    such a number among its operands (`x @ x`, `2.0 * x[0]`); not a constant, a `math`
    function's result, a list item or a parameter (a Python float passed in). A value carried
    by a loop is one where its first value or its update is; an `if`'s where either branch's
    is (the Python backend's type then depends on the branch taken: the NumPy one is kept)."""
    made: dict[int, bool] = {}
    changed = [True]

    def mark(v: Value, flag: bool) -> None:
        if flag and not made.get(v.id, False):
            made[v.id] = True
            changed[0] = True

    def numpy(v: Value) -> bool:
        return made.get(v.id, False)

    def yields(block: Block) -> list[Value]:
        term = block.terminator
        return list(term.args) if term is not None and term.kind == "yield" else []

    def block(b: Block) -> None:
        for op in b.ops:
            kind = op.kind
            if kind in ("for", "while"):
                inits = op.args[3:] if kind == "for" else op.args
                body = op.regions[-1]
                ups = yields(body)
                carried = [numpy(a) or (k < len(ups) and numpy(ups[k])) for k, a in enumerate(inits)]
                for region in op.regions:
                    for a, flag in zip(region.args[1:] if kind == "for" else region.args, carried):
                        mark(a, flag)
                    block(region)
                ups = yields(body)
                for k, r in enumerate(op.results):
                    mark(r, k < len(inits) and (numpy(inits[k]) or (k < len(ups) and numpy(ups[k]))))
            elif kind == "if":
                for region in op.regions:
                    block(region)
                branches = [yields(region) for region in op.regions]
                for k, r in enumerate(op.results):
                    mark(r, any(k < len(ys) and numpy(ys[k]) for ys in branches))
            elif kind == "getitem":
                mark(op.results[0], isinstance(op.args[0].type, Array))
            elif kind == "prim" and op.results:
                key = op.attrs.get("key", "")
                flag = not key.startswith("math.") and (
                    key.startswith("numpy.") or any(isinstance(a.type, Array) or numpy(a) for a in op.args))
                for r in op.results:
                    mark(r, flag)

    while changed[0]:  # flags only turn on: a few passes
        changed[0] = False
        block(ir.body)
    rets = ir.body.ops[-1].args if ir.body.ops and ir.body.ops[-1].kind == "return" else []
    return [_NUMPY_SCALARS.get(r.type.kind) if isinstance(r.type, Scalar) and numpy(r) else None for r in rets]



class Finish:
    """Turns the generated program's flat results into what `autodiff` returns."""

    __slots__ = ("mode", "ret", "comp", "norm", "leaves")

    def __init__(self, mode: Mode, ret: Any, comp: Compiled, norm: list, leaves: list):
        self.mode, self.ret, self.comp, self.norm, self.leaves = mode, ret, comp, norm, leaves

    def __call__(self, results: tuple) -> tuple:
        mode, comp = self.mode, self.comp
        if mode.forward:
            primal_flat, tangent_flat = results
            primal = result_of(comp, primal_flat)
            if self.ret is Const:
                return (primal,) if mode.with_primal else ()
            if comp.width == 1:
                tangent = rebuild_result(comp.ir, tuple(0.0 if t is None else t for t in self.scalars(tangent_flat)))
                if self.ret in (BatchDuplicated, BatchDuplicatedNoNeed):  # a batch of one lane
                    tangent = (tangent,)
            else:  # one tangent per lane
                tangent = tuple(rebuild_result(comp.ir, tuple(0.0 if t is None else t for t in self.scalars(lane)))
                                for lane in tangent_flat)
            return (tangent, primal) if mode.with_primal else (tangent,)
        primal_flat, adj = results
        got = derivs(self.norm, self.leaves, comp, adj)
        if mode.with_primal:
            return got, result_of(comp, primal_flat)
        return (got,)

    def scalars(self, flat: tuple) -> tuple:
        comp = self.comp
        return flat if comp.backend == "python" else python_scalars(comp, flat, tangents=True)

