"""The public API: `autodiff`, `gradient`, and access to generated code and IR.

Contract: `autodiff(mode, f, ret_activity, *args)` differentiates `f` at the
annotated arguments:
- `Reverse` returns `(derivs,)`, one entry per argument: the derivative of an
  `Active` argument (same structure), `None` otherwise; adjoints of
  `Duplicated` arguments are added into their shadows. `ReverseWithPrimal`
  returns `(derivs, primal)`.
- `Forward` returns `(tangent,)` for a `Duplicated` return (`()` for `Const`),
  `ForwardWithPrimal` `(tangent, primal)`.
Misuse (an `Active` array, `Active` in forward mode, a shadow of another shape
or dtype) raises `ZymoUsageError` before any work. Compiled derivatives are
cached per function, mode, activities, argument types, the alias pattern of
the arguments, and the identity of the globals/closure data the function reads.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from . import config, data
from .analysis.activity import Activity, analyze
from .analysis.extents import guards_hold
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
from .codegen.numba.backend import tape_in as numba_tape_in
from .codegen.python import compile_source, paused_collector
from .errors import ZymoUsageError, ZymoWarning
from .frontend.bindings import S, rebuild
from .frontend.lower import lower
from .frontend.source import unwrap
from .ir.core import Function, Value
from .ir.specialize import specialize
from .ir.verify import verify
from .shadows import check_shadow, make_zero, make_zero_
from .transform.simplify import cse_loads, cse_numbers, dce, hoist_sizes

# -- argument flattening ---------------------------------------------------------


@dataclass
class Leaf:
    value: Any
    shadow: Any  # None unless Duplicated; in batch mode a tuple with one shadow per lane
    kind: str  # "const" | "active" | "dup"
    slot: Any = None  # a boxed float: where it is written back (data.BoxRef)


def _flatten(obj: Any, shadow: Any, kind: str, where: str, out: list[Leaf]) -> None:
    if data.flatten_record(obj, shadow, kind, where, out, _flatten, Leaf):
        return
    if isinstance(obj, tuple):
        for k, o in enumerate(obj):
            _flatten(o, shadow[k] if shadow is not None else None, kind, f"{where}[{k}]", out)
        return
    if obj is None or isinstance(obj, str) or callable(obj):
        return  # static: not a parameter of the IR
    for arr, what in ((obj, where), (shadow, f"the shadow of {where}")):
        items = arr if isinstance(arr, list) else [arr]  # a list of arrays: each element
        if any(isinstance(a, np.ndarray) and _self_overlapping(a) for a in items):
            raise ZymoUsageError(
                f"{what}: a writable array whose elements overlap in memory (an as_strided view?); zymo, "
                "like NumPy's own writes, takes different indices to name different elements. Pass a copy "
                "(np.array(x)), or a read-only view (as_strided(..., writeable=False)) if nothing writes it")
    out.append(Leaf(obj, shadow, kind))


def _self_overlapping(a: np.ndarray) -> bool:
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


def _normalize(mode: Mode, args: tuple) -> list[tuple[Any, Any, str]]:
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
            if not mode.forward and _has_float_leaf(a.val):
                raise ZymoUsageError(
                    f"{where}: in reverse mode a float cannot be BatchDuplicated (its shadows are "
                    "immutable); use Active(x), whose derivative comes back once per lane"
                )
            norm.append((data.as_rows(a.val), tuple(data.as_rows(d) for d in a.dvals), "batch"))
        elif isinstance(a, Duplicated):
            check_shadow(a.val, a.dval, where)
            if not mode.forward and _has_float_leaf(a.val):
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
            if _has_memory_leaf(a.val):
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


_has_float_leaf = data.has_unboxed_float  # a float outside memory (a tuple's, a frozen record's)
_has_memory_leaf = data.has_memory  # arrays, lists, boxed floats of mutable records


def _type_key(obj: Any) -> Any:
    if data.is_record(obj):
        return data.type_key(obj, _type_key)
    if isinstance(obj, tuple):
        return ("tuple",) + tuple(_type_key(o) for o in obj)
    if obj is None or isinstance(obj, str) or callable(obj):
        return ("static", id(obj) if callable(obj) else obj)
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


# -- the compile cache -------------------------------------------------------------


@dataclass
class Lowered:
    ir: Function
    captured: list  # (param value, object, [(resolver, name)])

    def still_valid(self) -> bool:
        for resolver, obj in self.ir.attrs.get("frozen", ()):
            try:
                now = resolver()
            except Exception:
                return False
            if type(now) is not type(obj) or now != obj:
                return False
        for _, obj, where in self.captured:
            for resolver, _name in where:
                try:
                    if resolver() is not obj:
                        return False
                except Exception:
                    return False
        return True


@dataclass
class Compiled:
    fn: Callable
    source: str
    ir: Function
    activity: Activity
    active_params: list[int]
    captured_objs: list[Any]
    generator: Any = None  # reverse mode: the `Reverse` that wrote it (for the cache report)
    backend: str = "python"  # "python", or the Numba policy it was compiled under ("always"/"prefer")
    checked: bool = True  # False until a Numba program has compiled at its first call
    name: Any = None  # the generated function's name (a list of two in split mode)
    width: int = 1  # batch width
    unchecked: set = field(default_factory=set)  # split mode: the halves not yet compiled
    guards: list = field(default_factory=list)  # equal parameter extents the program assumes


_LOWERED: dict[Any, Lowered] = {}
_COMPILED: dict[Any, list[Compiled]] = {}  # key -> programs, each for calls its guards admit


def cache_clear() -> None:
    _LOWERED.clear()
    _COMPILED.clear()
    forget_replays()
    _TYPED.clear()


def _lowered(f: Any, values: tuple) -> tuple[Lowered, Any]:
    key = (unwrap(f), tuple(_type_key(v) for v in values))
    lw = _LOWERED.get(key)
    if lw is None or not lw.still_valid():
        ir = dce(hoist_sizes(cse_numbers(cse_loads(specialize(lower(f, values))))))
        if config.check_ir():
            verify(ir)
        lw = _LOWERED[key] = Lowered(ir, ir.attrs["captured"])
    return lw, key


def _backend(numba: Any, f: Any) -> str:
    """"python", "always" or "prefer" for this call (see `config.set_numba`)."""
    if numba is None:
        policy = config.numba_policy()
        if policy == "auto":
            return "prefer" if unwrap(f) is not f else "python"
        return {"never": "python"}.get(policy, policy)
    if numba is True:
        return "always"
    if numba is False:
        return "python"
    if numba in ("prefer", "kernels"):
        return numba
    raise ZymoUsageError(f"numba= takes True, False, 'prefer', 'kernels' or None, not {numba!r}")


def _prepare(mode: Mode, f: Any, ret_activity: Any, args: tuple, numba: Any = None, memory_limit: int | None = None):
    f, fshadow, fconst = data.function_annotation(f)
    if ret_activity not in (Active, Const, Duplicated, DuplicatedNoNeed, BatchDuplicated, BatchDuplicatedNoNeed):
        raise ZymoUsageError(f"the return activity must be Active, Const, Duplicated or BatchDuplicated, "
                             f"not {ret_activity!r}")
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
    norm = _normalize(mode, args)
    values = tuple(v for v, _, _ in norm)
    lw, lkey = _lowered(f, values)
    leaves: list[Leaf] = []
    no_need: set[int] = set()  # leaves of arrays passed as (Batch)DuplicatedNoNeed (reverse mode)
    for k, (v, s, kind) in enumerate(norm):
        if (type(args[k]) in (DuplicatedNoNeed, BatchDuplicatedNoNeed) and not mode.forward and not mode.split
                and isinstance(v, np.ndarray)):
            no_need.add(len(leaves))
        if kind == "batch":  # one leaf per value, holding its shadow in every lane
            per_lane = []
            for d in s:
                per_lane.append([])
                _flatten(v, d, "dup", f"argument {k}", per_lane[-1])
            if any(lf.slot is not None for lf in per_lane[0]):
                raise ZymoUsageError(f"argument {k}: BatchDuplicated of objects with float attributes is not "
                                     "supported yet; batch the arrays, or call once per shadow")
            if width == 1:  # one lane: the program takes the shadow itself, as for Duplicated
                leaves.extend(per_lane[0])
                continue
            for j, lf in enumerate(per_lane[0]):
                leaves.append(Leaf(lf.value, tuple(lane[j].shadow for lane in per_lane), "dup"))
        else:
            _flatten(v, s, kind, f"argument {k}", leaves)
    captured_objs = [obj for _, obj, _ in lw.captured]
    n_args = len(leaves)
    leaves += data.captured_leaves(lw.captured, data.shadow_map(f, fshadow) if fshadow is not None else None, Leaf)
    data.share_boxes(leaves)
    all_values = [lf.value for lf in leaves]
    active = [lf.kind != "const" for lf in leaves]
    classes = alias_classes(all_values)
    backend = _backend(numba, f)
    ckey = (lkey, mode.forward, mode.split, ret_activity is Active, ret_activity is Const,
            tuple(active), tuple(classes), backend, width,
            frozenset(no_need), mode.with_primal and not (mode.forward or mode.split),  # Reverse: `_dead_primal_ops`
            config.strong_zero(), None if mode.forward else memory_limit)
    dims = [v.shape if isinstance(v, np.ndarray) else None for v in all_values]
    entries = _COMPILED.get(ckey)
    if not entries or entries[0].ir is not lw.ir:
        entries = _COMPILED[ckey] = []
    # programs that assumed equal sizes (`analysis/extents.py`) serve only calls that have them
    comp = next((c for c in entries if guards_hold(c.guards, dims)), None)
    if comp is None:
        comp = _compile(mode, lw.ir, active, classes, ret_activity, captured_objs, backend, width, dims,
                        frozenset(no_need), None if mode.forward else memory_limit)
        entries.append(comp)
    if fconst:
        data.check_const_function(comp, lw.captured, n_args)
    return comp, norm, leaves, all_values


@paused_collector()  # the transform allocates a great deal (`codegen.python.paused_collector`)
def _compile(mode: Mode, ir: Function, active: list[bool], classes: list[int], ret_activity: Any,
             captured_objs: list, backend: str = "python", width: int = 1, dims: list | None = None,
             no_need: frozenset = frozenset(), memory_limit: int | None = None) -> Compiled:
    from .codegen.fuse import fuse
    from .transform.forward import forward
    from .transform.reverse import reverse

    if backend not in ("python", "kernels") and ir.attrs.get("python_only"):
        backend = _python_only(ir, backend)
    seeded = ret_activity is not Const  # Active (reverse) or Duplicated (forward) return
    act = analyze(ir, active, classes, seed_return=seeded)
    generator, guards = None, []
    if mode.forward:
        src, name, active_params, namer = forward(ir, act, width)
        numbers = namer.numbers() | namer.scalar_derivatives  # tangents of scalars are numbers
    else:
        _check_reverse_return(ir, ret_activity)
        # Const memory that receives active data: its shadow is zymo's, zeros at every call
        internal = frozenset(k for k, p in enumerate(ir.params) if not active[k] and act.is_active(p))
        src, names, active_params, rev = reverse(ir, act, seed_return=ret_activity is Active,
                                                 split=mode.split, width=width, dims=dims, internal=internal,
                                                 no_need=no_need, need_return=mode.with_primal,
                                                 numba=backend not in ("python", "kernels"))
        if memory_limit is not None or any("checkpoint" in op.attrs for op in ir.body.ops):
            # checkpoint the loops whose tape may not fit, and those marked (`transform/checkpoint.py`)
            from .transform.checkpoint import checkpointed

            got = checkpointed(ir, rev, memory_limit, lambda: analyze(ir, active, classes, seed_return=seeded),
                               dict(seed_return=ret_activity is Active, width=width, dims=dims, internal=internal,
                                    no_need=no_need, need_return=mode.with_primal, numba=False),
                               split=mode.split, backend=backend)
            if got is not None:
                src, names, active_params, rev, act = got
                backend = "python" if backend == "prefer" else backend
        name = names if mode.split else names[0]
        generator, namer = rev, rev.namer
        numbers = namer.numbers()
    src = fuse(src, generator.fuse_facts() if generator is not None else None)
    if generator is not None:
        guards = sorted(generator.extents.guards)  # after fuse, which may rely on more
    if config.show_code():
        print(src)
    if backend == "python":
        fn = _errstate_guard(compile_source(src, name), ir)
    elif backend == "kernels":
        fn, src = _with_kernels(src, name, ir, mode, generator, namer, numbers)
        fn = _errstate_guard(fn, ir)
    else:
        from .codegen.numba.backend import compile_numba

        what = f"{'forward' if mode.forward else 'reverse'} derivative of {ir.name}"
        facts = _source_facts(generator, namer, numbers, ir)
        fns = compile_numba(src, names if not mode.forward else [name], what, facts)
        fn = fns if mode.split else fns[0]
    comp = Compiled(fn, src, ir, act, active_params, captured_objs, generator, backend,
                    backend in ("python", "kernels"), name, width, guards=guards)
    if mode.split and backend not in ("python", "kernels"):
        comp.unchecked = {0, 1}
    return comp


def _source_facts(generator: Any, namer: Any, numbers: frozenset, ir: Function) -> Any:
    """What the transform knows about the generated program's names (`numba_.SourceFacts`)."""
    from .analysis.bounds import index_names
    from .codegen.numba.rewrites import SourceFacts

    buffers, counters = generator.nonneg_facts() if generator is not None else (frozenset(), frozenset())
    return SourceFacts(floats=generator.float_adjoints() if generator is not None else frozenset(),
                       ints=generator.int_names() if generator is not None else frozenset(),
                       numbers=numbers, arrays=frozenset(namer.arrays) | buffers,
                       nonneg=index_names(ir, namer.values) | counters)


def _with_kernels(src: str, name: Any, ir: Function, mode: Mode, generator: Any, namer: Any,
                  numbers: frozenset) -> tuple[Any, str]:
    """The "kernels" backend: `src` as Python, its scalar loops as Numba kernels
    (`codegen/outline.py`). Returns the function(s) and their source: the kernels' Python
    definitions, then the program that calls them (run as it is, it computes the same)."""
    from .codegen.outline import Kernel, outline

    facts = _source_facts(generator, namer, numbers, ir)
    caches = generator.nonneg_facts()[0] if generator is not None else frozenset()
    out = outline(src, namer.ndims, facts.numbers | facts.ints | facts.floats | facts.nonneg, caches)
    if not out.names:
        return compile_source(src, name), src
    from .codegen.numba.backend import compile_numba

    what = f"loops of the {'forward' if mode.forward else 'reverse'} derivative of {ir.name}"
    twins = [t for t, _ in out.parallel.values()]
    compiled = compile_numba(out.kernels, out.names + twins, what, facts, parallel=frozenset(twins))
    python = compile_source(out.kernels, out.names)
    by_name = dict(zip(out.names + twins, compiled))
    kernels = {n: Kernel(n, by_name[n], p, *((by_name[out.parallel[n][0]], out.parallel[n][1])
                                              if n in out.parallel else ()))
               for n, p in zip(out.names, python)}
    shown = f"# loops compiled with Numba at their first call\n{out.kernels}\n\n# the program (Python)\n{out.src}"
    return compile_source(out.src, name, kernels), shown


def _python_only(ir: Function, backend: str) -> str:
    """A program with constructs that need Python's exception handling (`frontend/checks.py`:
    a try/except's probes, a raise of a user-defined exception class) runs as Python: with a
    warning under "prefer", an error under "always"."""
    from .codegen.numba.backend import ZymoNumbaError

    why, loc = ir.attrs["python_only"][0]
    if backend == "always":
        raise ZymoNumbaError(f"zymo's Numba backend cannot compile the derivative of {ir.name}: {why}", loc,
                             hint="use numba=False or 'prefer' (the derivative then runs as Python)")
    import warnings

    warnings.warn(f"the derivative of {ir.name} runs as Python, not Numba: {why} (line {loc.line} of {loc.file})",
                  ZymoWarning, stacklevel=4)
    return "python"


def _errstate_guard(fn: Any, ir: Function) -> Any:
    """`fn` run under `np.errstate()` when the function has `with np.errstate(...)` blocks: the
    generated program sets and restores the error state around each block with `np.seterr`,
    and an exception raised inside a block must not leave the caller's state changed."""
    if not ir.attrs.get("errstate"):
        return fn
    if isinstance(fn, list):
        return [_errstate_guard(f, ir) for f in fn]

    def guarded(*args: Any) -> Any:
        with np.errstate():
            return fn(*args)
    guarded.__zymo_source__ = getattr(fn, "__zymo_source__", None)
    guarded.__wrapped__ = fn
    return guarded


def _call(comp: Compiled, which: int | None, args: list, f: Any, norm: list) -> Any:
    """Run the generated program (`which` picks a split-mode half).

    A Numba program compiles at its first call; if Numba refuses, raise why (policy
    "always") or warn and switch this entry to Python for good (policy "prefer")."""
    fn = comp.fn if which is None else comp.fn[which]
    if comp.checked:
        return fn(*args)
    from numba.core.errors import NumbaError

    from .codegen.numba.backend import quick_compile

    try:
        with quick_compile():
            out = fn(*args)
    except NumbaError as exc:
        from .codegen.numba.backend import explain

        err = explain(exc, unwrap(f), tuple(v for v, _, _ in norm))
        if comp.backend == "always":
            raise err from None
        import warnings

        warnings.warn(f"{err}\n  zymo runs this derivative as Python instead.", ZymoWarning, stacklevel=3)
        comp.fn = _errstate_guard(compile_source(comp.source, comp.name), comp.ir)
        comp.backend, comp.checked = "python", True
        return _call(comp, which, args, f, norm)
    if which is None:
        comp.checked = True
    else:  # split mode: each half compiles at its own first call
        comp.unchecked.discard(which)
        comp.checked = not comp.unchecked
    return out


def _check_reverse_return(ir: Function, ret_activity: Any) -> None:
    if ret_activity is not Active:
        return
    rets = ir.body.ops[-1].args
    tmpl = ir.attrs["result_template"]
    if not (isinstance(tmpl, Value) and len(rets) == 1 and rets[0].type.differentiable
            and not isinstance(rets[0].type, (type(None),)) and not hasattr(rets[0].type, "ndim")):
        raise ZymoUsageError(
            f"{ir.name} must return one float for an Active return (it returns "
            f"{_describe(tmpl)}); write the result into a Duplicated output array and use Const"
        )


def _describe(tmpl: Any) -> str:
    if isinstance(tmpl, Value):
        return f"a {tmpl.type}"
    if isinstance(tmpl, S):
        return repr(tmpl.obj)
    return "a tuple"


def _rebuild_result(ir: Function, flat: tuple) -> Any:
    """The function's result with the structure the user's code returned (tuples, None)."""

    def unstatic(b: Any) -> Any:
        if isinstance(b, tuple):
            return tuple(unstatic(x) for x in b)
        return b.obj if isinstance(b, S) else b

    return unstatic(rebuild(ir.attrs["result_template"], list(flat)))


# -- public entry points ---------------------------------------------------------------


def autodiff(mode: Mode, f: Callable, ret_activity: Any = Active, *args: Any, numba: Any = None,
             memory_limit: int | None = None) -> tuple:
    """Differentiate `f` at the annotated arguments (see the module docstring).

    `numba=True` compiles the derivative with Numba (raising if Numba cannot),
    `numba="prefer"` falls back to Python with a warning, `numba=False` runs Python;
    the default follows `zymo.config.set_numba` / `ZYMO_NUMBA` ("auto": Numba for
    `@njit` functions). `memory_limit` (bytes; default `zymo.config.set_memory_limit`) bounds
    what reverse mode stores: loops whose tape would exceed it are checkpointed
    (`transform/checkpoint.py`)."""
    limit = _memory_limit(memory_limit)
    if limit is not None and not mode.forward:
        return _autodiff_slow(mode, f, ret_activity, args, numba, limit)
    try:
        fast = _LAST.get(f)  # the entry this function used last: one lookup, no key tuple
        if fast is None or fast.key[1] is not mode or fast.key[2] is not ret_activity or fast.key[3] is not numba:
            fast = _FAST.get((f, mode, ret_activity, numba))
    except TypeError:  # an unhashable callable
        fast = None
    if fast is not None and fast.matches(args):
        _LAST[f] = fast
        return fast.run()
    if not isinstance(mode, Mode):
        raise ZymoUsageError(f"the first argument must be a mode (Forward, Reverse, ...), not {mode!r}")
    if mode.split:
        raise ZymoUsageError(f"{mode} is for zymo.autodiff_thunk, not autodiff")
    comp, norm, leaves, all_values = _prepare(mode, f, ret_activity, args, numba)
    shadows = _shadows(comp, leaves, all_values)
    flat = [*all_values, *shadows] + ([] if mode.forward or ret_activity is not Active else [1.0] * comp.width)
    finish = _Finish(mode, ret_activity, comp, norm, leaves)
    results = _call(comp, None, flat, f, norm)
    data.write_back(leaves)
    out = finish(results)
    if comp.width == 1 and not any(k == "active" for _, _, k in norm) and data.replayable(norm, leaves):
        mine = {id(s) for s in _internal(comp, leaves, shadows)}
        internal = [len(all_values) + j for j, s in enumerate(shadows) if id(s) in mine]
        try:
            key = (f, mode, ret_activity, numba)
            _FAST[key] = _LAST[f] = _Repeat(key, args, comp, flat, finish, f, norm, internal)
        except TypeError:
            pass
    return out


def _memory_limit(memory_limit: Any) -> int | None:
    """The call's memory limit in bytes: its `memory_limit=`, else `config.memory_limit()`."""
    limit = memory_limit if memory_limit is not None else config.memory_limit()
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        raise ZymoUsageError(f"memory_limit is a positive number of bytes (or None), not {limit!r}")
    return None if limit is None else int(limit)


def _autodiff_slow(mode: Mode, f: Callable, ret_activity: Any, args: tuple, numba: Any, limit: int) -> tuple:
    """`autodiff` under a memory limit: the full path, never the replay caches."""
    if not isinstance(mode, Mode):
        raise ZymoUsageError(f"the first argument must be a mode (Forward, Reverse, ...), not {mode!r}")
    if mode.split:
        raise ZymoUsageError(f"{mode} is for zymo.autodiff_thunk, not autodiff")
    comp, norm, leaves, all_values = _prepare(mode, f, ret_activity, args, numba, limit)
    shadows = _shadows(comp, leaves, all_values)
    flat = [*all_values, *shadows] + ([] if ret_activity is not Active else [1.0] * comp.width)
    finish = _Finish(mode, ret_activity, comp, norm, leaves)
    results = _call(comp, None, flat, f, norm)
    data.write_back(leaves)
    return finish(results)


class _Finish:
    """Turns the generated program's flat results into what `autodiff` returns."""

    __slots__ = ("mode", "ret", "comp", "norm", "leaves")

    def __init__(self, mode: Mode, ret: Any, comp: Compiled, norm: list, leaves: list):
        self.mode, self.ret, self.comp, self.norm, self.leaves = mode, ret, comp, norm, leaves

    def __call__(self, results: tuple) -> tuple:
        mode, comp = self.mode, self.comp
        if mode.forward:
            primal_flat, tangent_flat = results
            primal = _rebuild_result(comp.ir, primal_flat)
            if self.ret is Const:
                return (primal,) if mode.with_primal else ()
            if comp.width == 1:
                tangent = _rebuild_result(comp.ir, tuple(0.0 if t is None else t for t in tangent_flat))
                if self.ret in (BatchDuplicated, BatchDuplicatedNoNeed):  # a batch of one lane
                    tangent = (tangent,)
            else:  # one tangent per lane
                tangent = tuple(_rebuild_result(comp.ir, tuple(0.0 if t is None else t for t in lane))
                                for lane in tangent_flat)
            return (tangent, primal) if mode.with_primal else (tangent,)
        primal_flat, adj = results
        derivs = _derivs(self.norm, self.leaves, comp, adj)
        if mode.with_primal:
            return derivs, _rebuild_result(comp.ir, primal_flat)
        return (derivs,)


_FAST: dict[Any, _Repeat] = {}
_LAST: dict[Any, _Repeat] = {}  # function -> its last replayed entry (also in _FAST)


_GENERATION = [0]  # split mode's thunks record their last calls under this number


def forget_replays() -> None:
    """Drop every recorded call (a changed backend policy must not be replayed past)."""
    _FAST.clear()
    _LAST.clear()
    _TYPED.clear()
    _GENERATION[0] += 1


class _Match:
    """Whether a call has the very arguments of a recorded one (`_Repeat`'s check, which
    split mode's thunks use too): the same objects, types, list lengths and assumed sizes,
    and captured globals still valid. `flat` holds the program's argument values, which the
    sizes it assumes equal (`comp.guards`) index."""

    __slots__ = ("spec", "lists", "comp", "flat", "lowered", "matches")

    def __init__(self, args: tuple, comp: Compiled, flat: list):
        vals = tuple(a.val if isinstance(a, Annotation) else a for a in args)
        dvals = tuple(a.dval if isinstance(a, Duplicated) else None for a in args)
        # per argument: its type, and what must be the very same objects: the argument itself
        # (not an annotation, 0), a Const's value (1), a Duplicated's value and shadow (2);
        # any other annotation (batch shadows) never matches (3)
        self.spec = tuple((type(a), v, s, 2 if s is not None else 1 if type(a) is Const
                           else 3 if isinstance(a, Annotation) else 0)
                          for a, v, s in zip(args, vals, dvals))
        self.lists = [(x, len(x)) for x in (*vals, *dvals) if isinstance(x, list)]
        self.comp, self.flat = comp, flat
        self.lowered = [lw for lw in _LOWERED.values() if lw.ir is comp.ir and
                        (lw.captured or lw.ir.attrs.get("frozen"))]
        self.matches = self._first_match

    def _first_match(self, args: tuple) -> bool:
        """The replay check by a loop over `spec`; once it has matched, the entry is being
        replayed and `matches` becomes the written-out check (`_matcher`), whose ~0.1 ms of
        compiling a call with new objects every time should not pay."""
        if len(args) != len(self.spec):
            return False
        for a, (t, v, s, how) in zip(args, self.spec):
            if type(a) is not t or how == 3:
                return False
            if (a.val if how else a) is not v or (how == 2 and a.dval is not s):
                return False
        if any(len(x) != n for x, n in self.lists) or not self._lowered_valid():
            return False
        dims = [getattr(v, "shape", None) for v in self.flat]
        if self.comp.guards and not guards_hold(self.comp.guards, dims):
            return False  # an argument was given a new shape in place (`x.shape = ...`)
        self.matches = self._matcher()
        return True

    def _matcher(self) -> Callable[[tuple], bool]:
        """`matches`, written out for this call's arguments: identity tests on locals, about
        a third of the time of the loop in `_first_match`, which it must agree with."""
        if any(how == 3 for *_, how in self.spec):
            return lambda args: False
        n = len(self.spec)
        consts: dict[str, Any] = {}
        conds = []
        for i, (t, v, s, how) in enumerate(self.spec):
            consts[f"T{i}"], consts[f"V{i}"], consts[f"S{i}"] = t, v, s
            if how == 0:
                conds.append(f"a{i} is V{i}")
            else:
                conds.append(f"type(a{i}) is T{i} and a{i}.val is V{i}")
                if how == 2:
                    conds.append(f"a{i}.dval is S{i}")
        for j, (x, k) in enumerate(self.lists):
            consts[f"L{j}"], consts[f"N{j}"] = x, k
            conds.append(f"len(L{j}) == N{j}")
        if self.lowered:
            consts["_valid"] = self._lowered_valid
            conds.append("_valid()")
        for (i, a), (j, b) in self.comp.guards:  # the equal sizes the program assumes
            consts[f"F{i}"], consts[f"F{j}"] = self.flat[i], self.flat[j]
            conds.append(f"F{i}.shape[{a}] == F{j}.shape[{b}]")
        unpack = (", ".join(f"a{i}" for i in range(n)) + ("," if n == 1 else "") + " = args") if n else "pass"
        src = (f"def matches(args, {', '.join(f'{k}={k}' for k in consts)}):\n"
               f"    if len(args) != {n}:\n        return False\n"
               f"    {unpack}\n"
               f"    return {' and '.join(conds) or 'True'}\n")
        ns: dict[str, Any] = dict(consts)
        exec(compile(src, "<zymo replay check>", "exec"), ns)
        return ns["matches"]

    def _lowered_valid(self) -> bool:
        return all(lw.still_valid() for lw in self.lowered)


class _Repeat(_Match):
    """The last call of `autodiff` for one (f, mode, return activity, numba), replayable.

    A call whose annotations hold the very same objects (arrays, shadows, constants) as
    the recorded one has the same types and aliasing, so it runs the recorded program on
    the recorded argument list without re-deriving anything (about 2 µs in all; the
    generated program reads sizes afresh). Lists must keep their length. Internal shadows
    (of Const or captured memory that receives active data) are zeroed in place for each
    call. Calls with Active floats are never recorded; captured globals are re-checked when
    the function reads any. The sizes a program assumes equal (its guards,
    `analysis/extents.py`) are compared too. Not detected: giving one array of the call a new
    shape in place (`x.shape = ...`) while its shadow keeps the old one."""

    __slots__ = ("key", "finish", "f", "norm", "const_result", "zeroers")

    def __init__(self, key: tuple, args: tuple, comp: Compiled, flat: list, finish: _Finish, f: Any,
                 norm: list, internal: list[int]):
        super().__init__(args, comp, flat)
        self.key = key
        # zeroing the internal shadows: an array in place, anything else by `make_zero_`
        self.zeroers = [partial(flat[i].fill, 0) if isinstance(flat[i], np.ndarray) else partial(make_zero_, flat[i])
                        for i in internal]
        self.finish, self.f, self.norm = finish, f, norm
        # plain Reverse: every derivative is in a shadow, the result is always the same
        mode = finish.mode
        self.const_result = ((None,) * len(norm),) if not (mode.forward or mode.with_primal) else None

    def run(self) -> tuple:
        for zero in self.zeroers:
            zero()
        comp = self.comp
        out = comp.fn(*self.flat) if comp.checked else _call(comp, None, self.flat, self.f, self.norm)
        return self.const_result or self.finish(out)


def _shadows(comp: Compiled, leaves: list[Leaf], all_values: list, internal: list | None = None) -> list:
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


def _internal(comp: Compiled, leaves: list[Leaf], shadows: list) -> list:
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


def _derivs(norm, leaves: list[Leaf], comp: Compiled, adj: tuple) -> tuple:
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
    _flatten(obj, None, "const", "", out)
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


class Tape:
    """What an augmented forward call recorded for its reverse call.

    Pass it to the reverse thunk; pass it back to the forward thunk (`tape=`) to
    reuse its buffers, so repeated calls allocate no new caches."""

    __slots__ = ("inner", "internal", "owner")

    def __init__(self, inner: tuple, internal: list, owner: Compiled):
        self.inner, self.internal, self.owner = inner, internal, owner


def autodiff_thunk(mode: Mode, f: Callable, ret_activity: Any, *args: Any,
                   numba: Any = None, memory_limit: int | None = None) -> tuple[Callable, Callable]:
    """Split reverse mode: `(forward, reverse)` thunks for calls shaped like `args`.

        fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, f, Active, Duplicated(x, dx))
        tape, y = fwd(Duplicated(x, dx))               # the primal, recording a tape
        (derivs,) = rev(Duplicated(x, dx), 1.0, tape)  # seed of an Active return, then the tape
                                                       # (batch mode: one seed per lane)
        tape, y = fwd(Duplicated(x, dx), tape=tape)    # reuses the tape's buffers

    `ReverseSplitNoPrimal` returns `(tape, None)` from the forward thunk. The thunks
    accept arguments with the same annotations and types as `args`.
    """
    if not (isinstance(mode, Mode) and mode.split):
        raise ZymoUsageError("autodiff_thunk takes ReverseSplitWithPrimal or ReverseSplitNoPrimal")
    limit = _memory_limit(memory_limit)  # loops checkpointed: the tape holds the snapshots
    _prepare(mode, f, ret_activity, args, numba, limit)  # compile now, check the annotations
    last: dict[int, tuple] = {}  # half -> (generation, _Match, what _prepare gave) of its last call

    def prepared(half: int, call_args: tuple) -> tuple:
        """`_prepare`, or what it gave for the last call of this half if `call_args` hold the
        very same objects (`_Match`; the conditions of `autodiff`'s replays)."""
        rec = last.get(half)
        if rec is not None and rec[0] == _GENERATION[0] and rec[1].matches(call_args):
            return rec[2]
        got = _prepare(mode, f, ret_activity, call_args, numba, limit)
        comp, norm, leaves, all_values = got
        if comp.width == 1 and not any(k == "active" for _, _, k in norm) and data.replayable(norm, leaves):
            try:
                last[half] = (_GENERATION[0], _Match(call_args, comp, all_values), got)
            except TypeError:
                pass
        return got

    def forward(*call_args: Any, tape: Tape | None = None) -> tuple:
        comp, norm, leaves, all_values = prepared(0, call_args)
        shadows = _shadows(comp, leaves, all_values)
        inner = tape.inner if tape is not None and tape.owner is comp else None
        if inner is not None and comp.backend != "python":
            inner = numba_tape_in(inner)
        primal_flat, recorded = _call(comp, 0, [*all_values, *shadows, inner], f, norm)
        data.write_back(leaves)
        new = Tape(recorded, _internal(comp, leaves, shadows), comp)
        return new, (_rebuild_result(comp.ir, primal_flat) if mode.with_primal else None)

    def reverse(*call_args: Any) -> tuple:
        if not call_args or not isinstance(call_args[-1], Tape):
            raise ZymoUsageError("the reverse thunk takes the arguments, the return seed (for an Active "
                                 "return), then the tape of the forward thunk")
        tape = call_args[-1]
        seed: tuple = ()
        rest = call_args[:-1]
        if ret_activity is Active:
            nseed = batch_width(rest)  # one seed per batch lane
            if len(rest) < nseed:
                raise ZymoUsageError("the reverse thunk of an Active return needs the seed before the tape")
            seed, rest = tuple(rest[-nseed:]), rest[:-nseed]
        comp, norm, leaves, all_values = prepared(1, rest)
        if tape.owner is not comp:
            raise ZymoUsageError("this tape was recorded for other argument types or activities")
        shadows = _shadows(comp, leaves, all_values, tape.internal)
        adj = _call(comp, 1, [*all_values, *shadows, *seed, *tape.inner], f, norm)
        data.write_back(leaves)
        return (_derivs(norm, leaves, comp, adj),)

    return forward, reverse


def gradient(mode: Mode, f: Callable, *args: Any, numba: Any = None, memory_limit: int | None = None) -> tuple:
    """The gradient of scalar `f` with respect to every argument, shadows allocated for you.

    Floats give floats, arrays arrays, tuples tuples; an argument passed as `Const(x)` is not
    differentiated (its entry is None), as in Enzyme's `gradient`. `mode` is `Reverse` (one
    reverse sweep) or `Forward` (batched forward sweeps, 8 input elements per call);
    `ReverseWithPrimal` returns `(gradient, value)`, as Enzyme's `gradient` does.
    """
    if mode.forward and mode.with_primal:
        raise ZymoUsageError("gradient takes Forward, Reverse or ReverseWithPrimal (which also returns the value), "
                             f"not {mode}")
    for k, a in enumerate(args):
        if isinstance(a, type) and issubclass(a, Annotation):
            raise ZymoUsageError(f"argument {k}: annotate a value, e.g. Const(x), not the class {a.__name__}")
        if isinstance(a, Annotation) and not isinstance(a, Const):
            raise ZymoUsageError(f"argument {k}: gradient makes the shadows itself: pass the value as it is, or "
                                 f"Const(x) for an argument it does not differentiate, not {type(a).__name__}(...) "
                                 "(zymo.autodiff takes annotated arguments)")
    if mode.forward:
        return _gradient_forward(f, args, numba)
    limit = _memory_limit(memory_limit)
    try:
        typed = _TYPED.get((f, mode, numba)) if limit is None else None
    except TypeError:  # an unhashable callable
        typed = None
    if typed is not None:
        out = typed.run(args)
        if out is not None:
            return out
    annotated = []
    shadows = []
    for a in args:
        if isinstance(a, Const):  # its entry of the gradient is None
            shadows.append(None)
            annotated.append(a)
        elif _has_memory_leaf(a):
            s = make_zero(a)
            shadows.append(s)
            annotated.append(Duplicated(a, s))
        elif _has_float_leaf(a):
            shadows.append(None)
            annotated.append(Active(a))
        else:
            shadows.append(None)
            annotated.append(Const(a))
    derivs, *value = autodiff(mode, f, Active, *annotated, numba=numba, memory_limit=limit)
    grads = tuple(d if s is None else s for d, s in zip(derivs, shadows))
    if limit is None:
        _TypedGradient.record(f, mode, numba, args, annotated)
    return (grads, value[0]) if mode.with_primal else grads


_TYPED: dict[Any, _TypedGradient] = {}


class _TypedGradient:
    """`gradient`'s everyday call: the same function on new arrays of the same types.

    For calls whose arguments are all float arrays and floats, recorded after a full call: the
    program is reused when every argument has the recorded type, dtype and ndim, no two arrays
    share memory (nor did they when recorded), no writable array overlaps itself, the sizes the
    program assumes equal still are, and the captured globals are still those it read. That is
    O(number of arguments) checks (pairwise overlap tests for several arrays), where the full
    path flattens, types, keys and classifies every argument again. Shadows are fresh zeros
    per call, as `gradient` promises."""

    __slots__ = ("spec", "comp", "captured", "finish", "f", "norm", "dup", "lowered", "seed", "floats")
    spec: tuple
    comp: Compiled
    captured: list
    finish: _Finish
    f: Any
    norm: list
    dup: list[int]
    lowered: list
    seed: list
    floats: bool

    @staticmethod
    def record(f: Any, mode: Mode, numba: Any, args: tuple, annotated: list) -> None:
        if not all(_plain_array(a) or _plain_float(a) for a in args):
            return
        try:
            key = (f, mode, numba)
            hash(key)
        except TypeError:
            return
        comp, norm, leaves, all_values = _prepare(mode, f, Active, tuple(annotated), numba)  # cached: cheap
        n = len(args)
        if comp.width != 1 or any(k >= n for k in comp.active_params):
            return  # internal shadows of captured memory: the full path allocates them
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        if any(np.may_share_memory(p, q) for i, p in enumerate(arrays) for q in arrays[i + 1:]):
            return
        t = _TypedGradient()
        t.spec = tuple((type(a), a.dtype, a.ndim) if isinstance(a, np.ndarray) else (type(a), None, None)
                       for a in args)
        t.comp, t.captured, t.f, t.norm = comp, list(all_values[n:]), f, norm
        t.finish = _Finish(mode, Active, comp, norm, leaves)
        t.dup = [k for k in comp.active_params if leaves[k].kind == "dup"]
        t.lowered = [lw for lw in _LOWERED.values() if lw.ir is comp.ir and (lw.captured or lw.ir.attrs.get("frozen"))]
        t.seed = [] if mode.forward else [1.0]
        t.floats = any(not isinstance(a, np.ndarray) for a in args)
        _TYPED[key] = t

    def run(self, args: tuple) -> Any:
        """The gradient, or None where the call does not match (the full path then runs)."""
        spec = self.spec
        if len(args) != len(spec):
            return None
        arrays = []
        for a, (t, dtype, ndim) in zip(args, spec):
            if type(a) is not t:
                return None
            if dtype is not None:
                if a.dtype != dtype or a.ndim != ndim or (not (a.flags.c_contiguous or a.flags.f_contiguous)
                                                          and _self_overlapping(a)):
                    return None
                arrays.append(a)
        if len(arrays) > 1 and any(np.may_share_memory(p, q) for i, p in enumerate(arrays) for q in arrays[i + 1:]):
            return None
        if self.lowered and not all(lw.still_valid() for lw in self.lowered):
            return None
        values = [*args, *self.captured]
        comp = self.comp
        if comp.guards and not guards_hold(comp.guards, [getattr(v, "shape", None) for v in values]):
            return None
        shadows = [np.zeros_like(a) if isinstance(a, np.ndarray) else None for a in args]
        flat = [*values, *(shadows[k] for k in self.dup), *self.seed]
        results = comp.fn(*flat) if comp.checked else _call(comp, None, flat, self.f, self.norm)
        if self.floats:
            out = self.finish(results)
            grads = tuple(d if s is None else s for d, s in zip(out[0], shadows))
            return (grads, out[1]) if len(out) > 1 else grads
        grads = tuple(shadows)  # arrays only: every derivative is in a shadow
        return (grads, _rebuild_result(comp.ir, results[0])) if self.finish.mode.with_primal else grads


def _plain_array(a: Any) -> bool:
    return type(a) is np.ndarray and a.dtype.kind == "f"


def _plain_float(a: Any) -> bool:
    return type(a) is float or type(a) is np.float64


def _not_scalar(f: Callable) -> ZymoUsageError:
    return ZymoUsageError(f"gradient: {getattr(f, '__name__', f)} must return one float; for an array result "
                          "use zymo.jacobian (or autodiff with a Duplicated output)")


def _gradient_forward(f: Callable, args: tuple, numba: Any) -> tuple:
    from .annotations import Forward

    out = []
    const = [isinstance(a, Const) for a in args]
    args = tuple(a.val if c else a for a, c in zip(args, const))
    for k, a in enumerate(args):
        if const[k]:
            out.append(None)
        elif isinstance(a, (complex, np.complexfloating)) or (isinstance(a, np.ndarray) and np.iscomplexobj(a)):
            out.append(_complex_gradient_forward(f, args, k, numba))
        elif isinstance(a, np.ndarray):
            from .derivatives import forward_columns

            g, _ = forward_columns(f, list(args), k, None, numba)  # batched, 8 tangents per call
            if np.size(g) != a.size:
                raise _not_scalar(f)
            out.append(g.reshape(a.shape))
        elif isinstance(a, (float, np.floating)):
            copies = [np.copy(x) if isinstance(x, np.ndarray) else x for x in args]
            annotated = [Const(c) if j != k else Duplicated(c, 1.0) for j, c in enumerate(copies)]
            (d,) = autodiff(Forward, f, Duplicated, *annotated, numba=numba)
            if np.ndim(d) != 0:
                raise _not_scalar(f)
            out.append(float(d))
        else:
            out.append(None)
    return tuple(out)


def _complex_gradient_forward(f: Callable, args: tuple, k: int, numba: Any) -> Any:
    """Forward-mode gradient of real `f` with respect to complex argument `k`: two tangents per
    element (1 and 1j), one call each, giving JAX's `df/dx - i df/dy` (rules/complex_.py)."""
    from .annotations import Forward

    a = args[k]
    grad = np.zeros(np.shape(a), dtype=np.result_type(a))
    for j in np.ndindex(np.shape(a)):
        for unit in (1.0, 1j):
            copies = [np.copy(x) if isinstance(x, np.ndarray) else x for x in args]
            t: Any = unit
            if isinstance(a, np.ndarray):
                t = np.zeros_like(a)
                t[j] = unit
            annotated = [Const(c) if i != k else Duplicated(c, t) for i, c in enumerate(copies)]
            (d,) = autodiff(Forward, f, Duplicated, *annotated, numba=numba)
            if np.ndim(d) != 0 or np.iscomplexobj(d):
                raise _not_scalar(f)
            grad[j] += d if unit == 1.0 else -1j * d
    return grad if isinstance(a, np.ndarray) else complex(grad[()])


def generated_code(mode: Mode, f: Callable, ret_activity: Any, *args: Any, numba: Any = False) -> str:
    """The Python source of the derivative program `autodiff(..., numba=numba)` would run for
    these arguments (by default, the Python backend's).

    The Numba backend compiles the source it is given, with accumulations of product adjoints
    (`d += _rt.dot_vjp_a(...)`) and elementwise statements (`d += s * a`, `d[...] = e`,
    `np.sum(e)`, ufuncs with `out=`) written as calls of intrinsics that loop in place
    (`numba_.numba_source`). Its source may leave out more of what only `Reverse`'s unused
    return value needs: under Numba an array read and a `math` function never raise."""
    comp, *_ = _prepare(mode, f, ret_activity, args, numba)
    return comp.source


def cache_report(mode: Mode, f: Callable, ret_activity: Any, *args: Any, memory_limit: int | None = None) -> str:
    """What the reverse-mode derivative of this call caches, where, why, and how big.

    Like Enzyme's printperf: each cached value with its source line, the reason
    (defined inside a loop, or a later store that may overwrite it) and its
    size; "nothing is cached" when the adjoint sweep reads everything in place.
    Under a memory limit (`memory_limit=`, or `config.set_memory_limit`) it also runs the
    derivative on copies of the arguments and adds the checkpoint schedule of each loop
    (`runtime.checkpoint.Plan.describe`): snapshots, their bytes, the iterations recomputed, and why.
    """
    import copy

    from .annotations import ReverseSplitWithPrimal
    from .transform.reverse import report

    if mode.forward:
        raise ZymoUsageError("forward mode caches nothing; ask for the report of a reverse mode")
    _prepare(mode, f, ret_activity, args, False)  # the same checks as the call itself
    # measure: run the augmented forward sweep of the split program on copies of the arguments
    copies = copy.deepcopy(args)
    comp, norm, leaves, all_values = _prepare(ReverseSplitWithPrimal, f, ret_activity, copies, False)
    shadows = _shadows(comp, leaves, all_values)
    _, recorded = comp.fn[0](*all_values, *shadows, None)
    text = report(comp.generator, dict(zip(comp.generator.tape_names, recorded)))
    limit = _memory_limit(memory_limit)
    return text if limit is None else text + "\n" + _schedule_report(f, ret_activity, args, limit)


def _schedule_report(f: Callable, ret_activity: Any, args: tuple, limit: int) -> str:
    """The checkpoint schedules of one reverse-mode call under `limit` bytes (on copies of `args`)."""
    import copy

    from .annotations import Reverse as _Reverse
    from .runtime.checkpoint import Plan

    copies = copy.deepcopy(args)
    saved, Plan.log = Plan.log, []
    try:
        _autodiff_slow(_Reverse, f, ret_activity, copies, False, limit)
        plans = Plan.log
    finally:
        Plan.log = saved
    lines = [f"checkpoint schedule under memory_limit={limit} bytes (the entries above are what the call "
             "stores without a limit)"]
    if not plans:
        lines.append("  no loop records a tape: nothing is checkpointed")
    lines += [f"  {p.describe()}" for p in plans]
    return "\n".join(lines)


def ir(f: Callable, *args: Any) -> Function:
    """The IR of `f` specialised on the types of `args` (`print()` it to read it)."""
    values = tuple(a.val if isinstance(a, Annotation) else a for a in args)
    lw, _ = _lowered(f, values)
    return lw.ir

