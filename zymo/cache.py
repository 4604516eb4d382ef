"""The caches: compiled derivatives keyed by types and flags, and the replays of calls.

Contract: `lowered(f, values)` is the IR of `f` for values of these types
(`boundary.type_key`), lowered once and reused while `f` has the same code and the globals
and closure data it read are still the same objects (`pipeline.Lowered.still_valid`). `prepare(mode, f,
ret_activity, args, ...)` checks and flattens a call (`boundary.py`) and returns the
`Compiled` program for it with the call's leaves and values; programs are cached per
function, mode, activities, argument types, the alias pattern of the arguments, backend,
batch width, strong zeros and memory limit, and, among those, per the equal sizes a
program assumes (`analysis/extents.py`). `call(...)` is `autodiff`: it replays a recent
call of a function whose annotations hold the very same objects (`Repeat`, up to `REPLAYS`
per function and mode) or, for new objects of the recorded types, the program of a recent call
(`TypedCall`), and records calls; `held_call(...)` hands the entry of a call to a caller that
holds it (a prepared `zymo.interface` operator: `Repeat.replay` makes
the same checks, the recording's setting generation and the memory limit included);
`thunks(...)` are `autodiff_thunk`'s two halves, replaying the same way
(`Match`); `TypedGradient` is `gradient`'s everyday call (new arrays of the recorded
types). Every recorded call re-checks `f.__code__` (`_code_of`). Each cache keyed by function
holds at most `CACHED` of them (`LOWERED` the most recently used, with their programs; the
recorded calls the last recorded), so fresh closures are not kept alive for good.
`cache_clear` empties every cache; `forget_replays` drops the replays (a changed setting
calls it through `config.on_change`).
"""
from __future__ import annotations

import types
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from . import config, data
from .analysis.extents import guards_hold
from .annotations import Active, Annotation, Const, Duplicated, Mode
from .boundary import (
    Finish,
    Leaf,
    alias_classes,
    batch_width,
    call_shadows,
    check_call,
    check_shared_shadows,
    derivs,
    flatten_arguments,
    internal_shadows,
    normalize,
    result_of,
    self_overlapping,
    type_key,
    written_classes,
)
from .codegen.numba.backend import tape_in as numba_tape_in
from .errors import ZymoUsageError
from .frontend.source import unwrap
from .pipeline import Compiled, Lowered, choose_backend, compile_program, lower_ir, run_program
from .shadows import make_zero_

# -- the compile cache -------------------------------------------------------------------

CACHED = 1024  # the most entries each per-function cache keeps (`LOWERED`, and the recorded calls: `FAST`,
# `LAST`, `TYPED`, `TYPED_CALLS`): the least recently lowered (first recorded) go first, so a loop that
# differentiates a new closure each time (`jacobian(make(c), x)`) holds at most this many of them
LOWERED: dict[Any, Lowered] = {}  # (function, argument types) -> its IR, the least recently used first
COMPILED: dict[Any, list[Compiled]] = {}  # key -> programs, each for calls its guards admit
_PROGRAMS: dict[Any, list] = {}  # a LOWERED key -> the COMPILED keys of its programs (dropped with it)


def cache_clear() -> None:
    """Forget every lowered function, compiled derivative and recorded call."""
    LOWERED.clear()
    COMPILED.clear()
    _PROGRAMS.clear()
    forget_replays()


def lowered(f: Any, values: tuple) -> tuple[Lowered, Any]:
    """The lowered IR of `f` for `values` (cached while still valid: the same code, and the
    captures `Lowered.still_valid` checks), and its cache key."""
    fn = unwrap(f)
    key = (fn, tuple(type_key(v) for v in values))
    lw = LOWERED.pop(key, None)  # put back last: the most recently used
    if lw is None or lw.code is not getattr(fn, "__code__", None) or not lw.still_valid():
        if lw is not None:
            _drop_programs(key)
        lw = lower_ir(f, values)
    LOWERED[key] = lw
    while len(LOWERED) > CACHED:
        old = next(iter(LOWERED))
        del LOWERED[old]
        _drop_programs(old)
    return lw, key


def _drop_programs(key: Any) -> None:
    for ckey in _PROGRAMS.pop(key, ()):
        COMPILED.pop(ckey, None)


def lowered_of(comp: Compiled) -> list[Lowered]:
    """The lowered function of `comp`'s IR, if a reuse of `comp` must re-check it (it reads
    globals or closure data): the very `Lowered` it was compiled from, evicted or not."""
    lw = comp.lowered
    return [lw] if lw is not None and lw.ir is comp.ir and (lw.captured or lw.ir.attrs.get("frozen")) else []


class _NoCode:
    """Stands for a callable without code of its own to re-check (a NumPy function, a partial)."""

    __slots__ = ()
    __code__ = None


_NO_CODE = _NoCode()


def _code_of(f: Any) -> tuple[Any, Any]:
    """The function a recorded call re-checks the code of, and that code: `f.__code__ =
    g.__code__` in place makes a new program (`lowered`), which a replay must not miss (one
    attribute read per call)."""
    fn = unwrap(f.val if isinstance(f, Annotation) else f)
    code = getattr(fn, "__code__", None)
    return (fn, code) if isinstance(code, types.CodeType) else (_NO_CODE, None)


def prepare(mode: Mode, f: Any, ret_activity: Any, args: tuple, numba: Any = None,
            memory_limit: int | None = None) -> tuple[Compiled, list, list[Leaf], list]:
    """The program for this call, the normalized arguments, their leaves and the values the
    program takes (module contract)."""
    f, fshadow, fconst = data.function_annotation(f)
    width = check_call(mode, ret_activity, args, fshadow)
    norm = normalize(mode, args)
    lw, lkey = lowered(f, tuple(v for v, _, _ in norm))
    leaves, no_need = flatten_arguments(mode, args, norm, width)
    captured_objs = [obj for _, obj, _ in lw.captured]
    n_args = len(leaves)
    leaves += data.captured_leaves(lw.captured, data.shadow_map(f, fshadow) if fshadow is not None else None, Leaf)
    data.share_boxes(leaves)
    all_values = [lf.value for lf in leaves]
    active = [lf.kind != "const" for lf in leaves]
    classes = alias_classes(all_values)
    backend = choose_backend(numba, f)
    ckey = (lkey, mode.forward, mode.split, ret_activity is Active, ret_activity is Const,
            tuple(active), tuple(classes), backend, width,
            frozenset(no_need), mode.with_primal and not (mode.forward or mode.split),  # Reverse: `_dead_primal_ops`
            config.strong_zero(), None if mode.forward else memory_limit,
            backend != "python" and config.reassociate())
    dims = [v.shape if isinstance(v, np.ndarray) else None for v in all_values]
    entries = COMPILED.get(ckey)
    if entries is None:
        entries = COMPILED[ckey] = []
        _PROGRAMS.setdefault(lkey, []).append(ckey)
    elif entries and entries[0].ir is not lw.ir:
        entries = COMPILED[ckey] = []
    # programs that assumed equal sizes (`analysis/extents.py`) serve only calls that have them
    comp = next((c for c in entries if guards_hold(c.guards, dims)), None)
    if comp is None:
        comp = compile_program(mode, lw.ir, active, classes, ret_activity, captured_objs, backend, width, dims,
                               frozenset(no_need), None if mode.forward else memory_limit)
        comp.lowered = lw
        entries.append(comp)
    if fconst:
        data.check_const_function(comp, lw.captured, n_args)
    if len(set(classes)) < len(classes):  # arrays that share memory: their shadows must too, where written
        check_shared_shadows(comp, leaves, classes)
    return comp, norm, leaves, all_values


# -- autodiff: the full path and the replays -----------------------------------------------


def call(mode: Mode, f: Any, ret_activity: Any, args: tuple, numba: Any = None,
         memory_limit: int | None = None) -> tuple:
    """`autodiff(mode, f, ret_activity, *args, numba=numba, memory_limit=memory_limit)`."""
    limit = config.call_memory_limit(memory_limit)
    if limit is not None and not mode.forward:
        return _call_limited(mode, f, ret_activity, args, numba, limit)
    # the lookups in try blocks, not the programs: a TypeError the program raises is the user's
    try:
        fast = LAST.get(f)  # the entry this function used last: one lookup, no key tuple
    except TypeError:  # an unhashable callable: nothing is recorded
        return _call_full(mode, f, ret_activity, args, numba, None)[0]
    if (fast is not None and fast.key[1] is mode and fast.key[2] is ret_activity and fast.key[3] is numba
            and fast.matches(args)):
        return fast.run()
    key = (f, mode, ret_activity, numba)
    try:
        entries, typed = FAST.get(key, ()), TYPED_CALLS.get(key)
    except TypeError:  # an unhashable numba= (the full path refuses it)
        return _call_full(mode, f, ret_activity, args, numba, None)[0]
    for fast in entries:
        if fast.matches(args):
            LAST[f] = fast
            if len(LAST) > CACHED:
                _trim(LAST)
            return fast.run()
    if typed is not None:  # new objects of the recorded types
        got = typed.run(args)
        if got is not None:
            if typed.again is not None:  # the same objects twice: replay them from now on
                LAST[f] = rep = Repeat(key, args, typed.comp, typed.again, typed.finish, f, typed.norm, [])
                FAST[key] = [rep, *entries[:REPLAYS - 1]]
                _trim(LAST)
                _trim(FAST)
                typed.again = None
            return got
    return _call_full(mode, f, ret_activity, args, numba, key)[0]


def held_call(mode: Mode, f: Any, ret_activity: Any, args: tuple, numba: Any = None) -> tuple[tuple, Repeat | None]:
    """`call` for a caller that will repeat it with the very same objects and hold the entry
    (a prepared `zymo.interface` operator; `Repeat.replay`, which no other call of `f` can
    evict): the result, and the recorded entry (None where the call is not replayable).
    Never served by `TypedCall`, which records nothing."""
    if config.memory_limit() is not None and not mode.forward:
        return call(mode, f, ret_activity, args, numba), None
    key = (f, mode, ret_activity, numba)
    try:
        entries = FAST.get(key, ())
    except TypeError:  # an unhashable callable
        return call(mode, f, ret_activity, args, numba), None
    for rep in entries:
        if rep.matches(args):
            return rep.run(), rep
    return _call_full(mode, f, ret_activity, args, numba, key)


def _call_full(mode: Mode, f: Any, ret_activity: Any, args: tuple, numba: Any,
               key: tuple | None) -> tuple[tuple, Repeat | None]:
    """The full path of `call`: checks, flattening, the program (compiled if new); records the
    call under `key` (a `TypedCall`, and a `Repeat` if it is replayable) unless key is None."""
    _check_mode(mode)
    comp, norm, leaves, all_values = prepare(mode, f, ret_activity, args, numba)
    shadows = call_shadows(comp, leaves, all_values)
    flat = [*all_values, *shadows] + ([] if mode.forward or ret_activity is not Active else [1.0] * comp.width)
    finish = Finish(mode, ret_activity, comp, norm, leaves)
    results = run_program(comp, None, flat, f, norm)
    data.write_back(leaves)
    out = finish(results)
    if key is None:  # an unhashable callable: nothing is recorded
        return out, None
    TypedCall.record(key, args, comp, all_values, finish, norm, leaves, flat[len(all_values) + len(shadows):])
    if not (comp.width == 1 and not any(k == "active" for _, _, k in norm) and data.replayable(norm, leaves)):
        return out, None
    mine = {id(s) for s in internal_shadows(comp, leaves, shadows)}
    internal = [len(all_values) + j for j, s in enumerate(shadows) if id(s) in mine]
    LAST[f] = rep = Repeat(key, args, comp, flat, finish, f, norm, internal)
    FAST[key] = [rep, *FAST.get(key, ())[:REPLAYS - 1]]
    _trim(LAST)
    _trim(FAST)
    return out, rep


def _check_mode(mode: Any) -> None:
    if not isinstance(mode, Mode):
        raise ZymoUsageError(f"the first argument must be a mode (Forward, Reverse, ...), not {mode!r}")
    if mode.split:
        raise ZymoUsageError(f"{mode} is for zymo.autodiff_thunk, not autodiff")


def _call_limited(mode: Mode, f: Any, ret_activity: Any, args: tuple, numba: Any, limit: int) -> tuple:
    """`autodiff` under a memory limit: the full path, never the replay caches."""
    _check_mode(mode)
    comp, norm, leaves, all_values = prepare(mode, f, ret_activity, args, numba, limit)
    shadows = call_shadows(comp, leaves, all_values)
    flat = [*all_values, *shadows] + ([] if ret_activity is not Active else [1.0] * comp.width)
    finish = Finish(mode, ret_activity, comp, norm, leaves)
    results = run_program(comp, None, flat, f, norm)
    data.write_back(leaves)
    return finish(results)


REPLAYS = 4  # recorded calls kept per (f, mode, return activity, numba): callers that alternate
# (a prepared `zymo.interface` operator and a direct `autodiff` of the same function) each keep theirs
FAST: dict[Any, list[Repeat]] = {}  # (f, mode, return activity, numba) -> its last replayable calls, newest first
LAST: dict[Any, Repeat] = {}  # function -> its last replayed entry (also in FAST)
_GENERATION = [0]  # split mode's thunks record their last calls under this number


def forget_replays() -> None:
    """Drop every recorded call (a changed backend policy must not be replayed past)."""
    FAST.clear()
    LAST.clear()
    TYPED.clear()
    TYPED_CALLS.clear()
    _GENERATION[0] += 1


def _trim(cache: dict) -> None:
    """Drop `cache`'s first recorded entries beyond `CACHED` (recorded calls: a hit does not
    reorder them, which would cost every call; a dropped one is recorded again by its next
    full call)."""
    while len(cache) > CACHED:
        del cache[next(iter(cache))]


config.on_change(forget_replays)
config.on_programs_stale(cache_clear)


class Match:
    """Whether a call has the very arguments of a recorded one (`_Repeat`'s check, which
    split mode's thunks use too): the same objects, types, list lengths and assumed sizes,
    and captured globals still valid, and `f` still has its code (`_code_of`). `flat` holds
    the program's argument values, which the sizes it assumes equal (`comp.guards`) index."""

    __slots__ = ("spec", "lists", "comp", "flat", "lowered", "func", "code", "matches")
    matches: Callable[[tuple], bool]

    def __init__(self, args: tuple, comp: Compiled, flat: list, f: Any):
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
        self.lowered = lowered_of(comp)
        self.func, self.code = _code_of(f)
        self.matches = self._first_match

    def _first_match(self, args: tuple) -> bool:
        """The replay check by a loop over `spec`; once it has matched, the entry is being
        replayed and `matches` becomes the written-out check (`_matcher`), whose compile a
        call with new objects every time should not pay (docs/decisions/0008)."""
        if len(args) != len(self.spec) or self.func.__code__ is not self.code:
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
        consts: dict[str, Any] = {"FN": self.func, "CODE": self.code}
        conds = ["FN.__code__ is CODE"]  # `f.__code__ = g.__code__`: a new program
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
        for k, lw in enumerate(self.lowered):  # the captured globals it read are still those objects
            consts[f"W{k}"] = lw.still_valid
            conds.append(f"W{k}()")
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


class Repeat(Match):
    """A recent call of `autodiff` for one (f, mode, return activity, numba), replayable.

    A call whose annotations hold the very same objects (arrays, shadows, constants) as
    the recorded one has the same types and aliasing, so it runs the recorded program on
    the recorded argument list without re-deriving anything (docs/decisions/0008; the
    generated program reads sizes afresh). Lists must keep their length. Internal shadows
    (of Const or captured memory that receives active data) are zeroed in place for each
    call. Calls with Active floats are never recorded; captured globals are re-checked when
    the function reads any. The sizes a program assumes equal (its guards,
    `analysis/extents.py`) are compared too. Not detected: giving one array of the call a new
    shape in place (`x.shape = ...`) while its shadow keeps the old one."""

    __slots__ = ("key", "finish", "f", "norm", "const_result", "zeroers", "generation")

    def __init__(self, key: tuple, args: tuple, comp: Compiled, flat: list, finish: Finish, f: Any,
                 norm: list, internal: list[int]):
        super().__init__(args, comp, flat, f)
        self.key = key
        # zeroing the internal shadows: an array in place, anything else by `make_zero_`
        self.zeroers = [partial(flat[i].fill, 0) if isinstance(flat[i], np.ndarray) else partial(make_zero_, flat[i])
                        for i in internal]
        self.finish, self.f, self.norm = finish, f, norm
        # plain Reverse: every derivative is in a shadow, the result is always the same
        mode = finish.mode
        self.const_result = ((None,) * len(norm),) if not (mode.forward or mode.with_primal) else None
        self.generation = _GENERATION[0]

    def run(self) -> tuple:
        for zero in self.zeroers:
            zero()
        comp = self.comp
        out = comp.fn(*self.flat) if comp.checked else run_program(comp, None, self.flat, self.f, self.norm)
        return self.const_result or self.finish(out)

    def replay(self, args: tuple) -> tuple | None:
        """For a caller that holds this entry (`held_call`): the call's result if `args` pass
        the replay check and no setting changed since it was recorded, else None."""
        if (self.generation != _GENERATION[0] or not self.matches(args)
                or (config.memory_limit() is not None and not self.key[1].forward)):  # `call`'s limited path
            return None
        return self.run()


# -- split mode -------------------------------------------------------------------------


class Tape:
    """What an augmented forward call recorded for its reverse call.

    Pass it to the reverse thunk, once: the reverse sweep consumes it (it pops its caches and
    adds into the internal shadows it carries; a second sweep read what the first left, a wrong
    gradient or a raw IndexError, helper 73). Pass it back to the forward thunk (`tape=`) to
    reuse its buffers, so repeated calls allocate no new caches."""

    __slots__ = ("inner", "internal", "owner", "used")

    def __init__(self, inner: tuple, internal: list, owner: Compiled):
        self.inner, self.internal, self.owner = inner, internal, owner
        self.used = False


def thunks(mode: Mode, f: Any, ret_activity: Any, args: tuple, numba: Any,
           limit: int | None) -> tuple[Callable, Callable]:
    """`autodiff_thunk`'s `(forward, reverse)` for calls shaped like `args`."""
    prepare(mode, f, ret_activity, args, numba, limit)  # compile now, check the annotations
    last: dict[int, tuple] = {}  # half -> (generation, Match, what prepare gave) of its last call

    def prepared(half: int, call_args: tuple) -> tuple:
        """`prepare`, or what it gave for the last call of this half if `call_args` hold the
        very same objects (`Match`; the conditions of `autodiff`'s replays)."""
        rec = last.get(half)
        if rec is not None and rec[0] == _GENERATION[0] and rec[1].matches(call_args):
            return rec[2]
        got = prepare(mode, f, ret_activity, call_args, numba, limit)
        comp, norm, leaves, all_values = got
        if comp.width == 1 and not any(k == "active" for _, _, k in norm) and data.replayable(norm, leaves):
            try:
                last[half] = (_GENERATION[0], Match(call_args, comp, all_values, f), got)
            except TypeError:
                pass
        return got

    def forward(*call_args: Any, tape: Tape | None = None) -> tuple:
        comp, norm, leaves, all_values = prepared(0, call_args)
        shadows = call_shadows(comp, leaves, all_values)
        inner = tape.inner if tape is not None and tape.owner is comp else None
        if inner is not None and comp.backend != "python":
            inner = numba_tape_in(inner)
        primal_flat, recorded = run_program(comp, 0, [*all_values, *shadows, inner], f, norm)
        data.write_back(leaves)
        new = Tape(recorded, internal_shadows(comp, leaves, shadows), comp)
        return new, (result_of(comp, primal_flat) if mode.with_primal else None)

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
        if tape.used:
            raise ZymoUsageError("this tape was already used by a reverse call: a tape serves one reverse "
                                 "call (run the forward thunk again, `tape=` reusing its buffers)")
        tape.used = True
        shadows = call_shadows(comp, leaves, all_values, tape.internal)
        adj = run_program(comp, 1, [*all_values, *shadows, *seed, *tape.inner], f, norm)
        data.write_back(leaves)
        return (derivs(norm, leaves, comp, adj),)

    return forward, reverse


# -- gradient's everyday call ------------------------------------------------------------

TYPED: dict[Any, TypedGradient] = {}


class TypedGradient:
    """`gradient`'s everyday call: the same function on new arrays of the same types.

    For calls whose arguments are all float arrays and floats, recorded after a full call: the
    program is reused when every argument has the recorded type, dtype and ndim, no two arrays
    share memory (nor did they when recorded), no writable array overlaps itself, none overlaps
    captured memory where the program writes parameter memory (`_watched`), the sizes the
    program assumes equal still are, and the captured globals are still those it read. That is
    O(number of arguments) checks (pairwise overlap tests for several arrays), where the full
    path flattens, types, keys and classifies every argument again. Shadows are fresh zeros
    per call, as `gradient` promises."""

    __slots__ = ("spec", "comp", "captured", "finish", "f", "norm", "dup", "lowered", "seed", "floats", "boxes",
                 "watch", "func", "code")
    spec: tuple
    comp: Compiled
    captured: list
    finish: Finish
    f: Any
    norm: list
    dup: list[int]
    lowered: list
    seed: list
    floats: bool
    boxes: list  # (position, data.BoxRef) of the captured floats boxed afresh at each call (`_boxes`)
    watch: list  # the captured values an argument must not overlap (`_watched`)
    func: Any  # the function whose code must still be `code` (`_code_of`)
    code: Any

    @staticmethod
    def record(f: Any, mode: Mode, numba: Any, args: tuple, annotated: list) -> None:
        if not all(_plain_array(a) or _plain_float(a) for a in args):
            return
        try:
            key = (f, mode, numba)
            hash(key)
        except TypeError:
            return
        comp, norm, leaves, all_values = prepare(mode, f, Active, tuple(annotated), numba)  # cached: cheap
        n = len(args)
        if comp.width != 1 or any(k >= n for k in comp.active_params):
            return  # internal shadows of captured memory: the full path allocates them
        boxes = _boxes(leaves)
        if boxes is None:
            return
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        if any(np.may_share_memory(p, q) for i, p in enumerate(arrays) for q in arrays[i + 1:]):
            return
        t = TypedGradient()
        t.spec = tuple((type(a), a.dtype, a.ndim) if isinstance(a, np.ndarray) else (type(a), None, None)
                       for a in args)
        t.comp, t.captured, t.f, t.norm = comp, list(all_values[n:]), f, norm
        t.finish = Finish(mode, Active, comp, norm, leaves)
        t.dup = [k for k in comp.active_params if leaves[k].kind == "dup"]
        t.lowered = lowered_of(comp)
        t.seed = [] if mode.forward else [1.0]
        t.floats = any(not isinstance(a, np.ndarray) for a in args)
        t.boxes = boxes
        t.watch = _watched(comp, t.captured)
        t.func, t.code = _code_of(f)
        TYPED[key] = t
        _trim(TYPED)

    def run(self, args: tuple) -> Any:
        """The gradient, or None where the call does not match (the full path then runs)."""
        spec = self.spec
        if len(args) != len(spec) or self.func.__code__ is not self.code:
            return None
        arrays = []
        shadows: list[Any] = []
        for a, (t, dtype, ndim) in zip(args, spec):
            if type(a) is not t:
                return None
            if dtype is None:
                shadows.append(None)
                continue
            if (a.dtype is not dtype and a.dtype != dtype) or a.ndim != ndim:
                return None
            flags = a.flags
            if flags.c_contiguous:  # the shadow: np.zeros is about 1 us faster than zeros_like
                shadows.append(np.zeros(a.shape, dtype))
            elif flags.f_contiguous or not self_overlapping(a):
                shadows.append(np.zeros_like(a))
            else:
                return None
            arrays.append(a)
        if len(arrays) > 1 and any(np.may_share_memory(p, q) for i, p in enumerate(arrays) for q in arrays[i + 1:]):
            return None
        for lw in self.lowered:
            if not lw.still_valid():
                return None
        if self.watch and _touches_captured(arrays, self.watch):
            return None
        values = [*args, *self.captured]
        if self.boxes and not _fresh_boxes(values, self.boxes):
            return None
        comp = self.comp
        if comp.guards and not guards_hold(comp.guards, [getattr(v, "shape", None) for v in values]):
            return None
        flat = [*values, *(shadows[k] for k in self.dup), *self.seed]
        results = comp.fn(*flat) if comp.checked else run_program(comp, None, flat, self.f, self.norm)
        if self.boxes:
            _write_boxes(values, self.boxes)
        if self.floats:
            out = self.finish(results)
            grads = tuple(d if s is None else s for d, s in zip(out[0], shadows))
            return (grads, out[1]) if len(out) > 1 else grads
        grads = tuple(shadows)  # arrays only: every derivative is in a shadow
        return (grads, result_of(comp, results[0])) if self.finish.mode.with_primal else grads


# -- autodiff's everyday call on new objects ---------------------------------------------

TYPED_CALLS: dict[Any, TypedCall] = {}  # (f, mode, return activity, numba) -> its last typed call
_ANNOTATED = (Active, Const, Duplicated)


class TypedCall:
    """`autodiff`'s everyday call on new objects: the same function, annotations and types.

    Recorded after a full call whose arguments are float arrays and floats, each passed as it
    is, as `Const`, as `Active` (a float) or as `Duplicated` (an array and its shadow), with no
    internal shadows (of Const or captured memory that receives active data), batch width 1
    and an unannotated function. A later call with other
    objects runs the recorded program when every argument has the recorded annotation, type,
    dtype and ndim, each shadow is a writable array of its value's shape and dtype, no two of
    the arrays (shadows included) share memory, none overlaps itself or (where the program
    writes parameter memory) captured memory, the sizes the program
    assumes equal still are and the captured globals are still those it read: checks linear in
    the number of arguments (pairwise overlap tests for several arrays), where the full path
    normalizes, flattens, types, keys and classifies every argument again."""

    __slots__ = ("spec", "comp", "captured", "finish", "f", "norm", "dup", "lowered", "seed", "last", "again",
                 "boxes", "watch", "func", "code")

    def __init__(self, spec: tuple, comp: Compiled, all_values: list, finish: Finish, f: Any, norm: list,
                 dup: list[int], seed: list):
        self.spec, self.comp, self.finish, self.f, self.norm, self.dup, self.seed = \
            spec, comp, finish, f, norm, dup, seed
        self.captured = list(all_values[len(spec):])
        self.watch = _watched(comp, self.captured)
        self.lowered = lowered_of(comp)
        self.func, self.code = _code_of(f)
        # the last call's argument list; `again`: the same, when a call had the very same objects
        # as the one before (`call` then records it as a `Repeat`; not with Active floats)
        self.last: list = []
        self.again: list | None = None
        self.boxes: list = []

    @staticmethod
    def record(key: tuple, args: tuple, comp: Compiled, all_values: list, finish: Finish, norm: list,
               leaves: list[Leaf], seed: list) -> None:
        """Keep `key`'s call for later calls of the same types, if its arguments admit it."""
        spec = []
        arrays: list[np.ndarray] = []
        for a in args:
            at = type(a)
            v = a.val if at in _ANNOTATED else a
            if not (_plain_array(v) or _plain_float(v)) or (at is Active and isinstance(v, np.ndarray)):
                return
            if at is Duplicated and not (isinstance(v, np.ndarray) and type(a.dval) is np.ndarray):
                return
            arrays += [v, a.dval] if at is Duplicated else [v] if isinstance(v, np.ndarray) else []
            spec.append((at, type(v), v.dtype, v.ndim) if isinstance(v, np.ndarray) else (at, type(v), None, None))
        n = len(args)
        if (comp.width != 1 or isinstance(key[0], Annotation) or len(leaves) < n
                or any(k >= n or leaves[k].kind == "const" for k in comp.active_params)):
            return  # internal shadows (of Const or captured memory): the full path allocates them
        boxes = _boxes(leaves)
        if boxes is None:
            return
        if any(np.may_share_memory(p, q) for i, p in enumerate(arrays) for q in arrays[i + 1:]):
            return
        dup = [k for k in comp.active_params if leaves[k].kind == "dup"]
        TYPED_CALLS[key] = typed = TypedCall(tuple(spec), comp, all_values, finish, key[0], norm, dup, seed)
        typed.boxes = boxes
        _trim(TYPED_CALLS)

    def run(self, args: tuple) -> tuple | None:
        """The call's result, or None where it does not match (the full path then runs)."""
        spec = self.spec
        if len(args) != len(spec) or self.func.__code__ is not self.code:
            return None
        values: list[Any] = []
        arrays: list[np.ndarray] = []
        shadow_of: dict[int, np.ndarray] = {}
        for k, (a, (at, vt, dtype, ndim)) in enumerate(zip(args, spec)):
            if type(a) is not at:
                return None
            v = a if at is vt else a.val
            if type(v) is not vt:
                return None
            values.append(v)
            if dtype is None:
                continue
            if not _passable(v, dtype, ndim):
                return None
            arrays.append(v)
            if at is Duplicated:
                d = a.dval
                if type(d) is not np.ndarray or d.shape != v.shape or not _passable(d, dtype, ndim) \
                        or not d.flags.writeable:
                    return None
                arrays.append(d)
                shadow_of[k] = d
        if len(arrays) > 1 and any(np.may_share_memory(p, q) for i, p in enumerate(arrays) for q in arrays[i + 1:]):
            return None
        for lw in self.lowered:
            if not lw.still_valid():
                return None
        if self.watch and _touches_captured(arrays, self.watch):
            return None
        values += self.captured
        if self.boxes and not _fresh_boxes(values, self.boxes):
            return None
        comp = self.comp
        if comp.guards and not guards_hold(comp.guards, [getattr(v, "shape", None) for v in values]):
            return None
        flat = [*values, *(shadow_of[k] for k in self.dup), *self.seed]
        results = comp.fn(*flat) if comp.checked else run_program(comp, None, flat, self.f, self.norm)
        if self.boxes:
            _write_boxes(values, self.boxes)
        last = self.last
        if (len(last) == len(flat) and all(a is b for a, b in zip(flat, last))
                and not any(at is Active for at, *_ in spec)):
            self.again = flat
        self.last = flat
        return self.finish(results)


def _watched(comp: Compiled, captured: list) -> list:
    """The captured values (arrays, lists) a recorded fast path checks the arguments against
    (`_touches_captured`): none where the program writes no parameter's memory (the full path
    then takes such an overlap as it is: each array read as itself)."""
    if not any(type(c) is np.ndarray or isinstance(c, list) for c in captured):
        return []
    return [c for c in captured if type(c) is np.ndarray or isinstance(c, list)] if written_classes(comp) else []


def _touches_captured(arrays: list[np.ndarray], captured: list) -> bool:
    """Whether an argument's array may share memory with an array the function captured (a
    global, a closure's, a list item of those): the full path refuses a global that shares
    memory with a Duplicated argument, or keys the call's aliasing apart, so a recorded fast
    path must leave such a call to it (helper 83: `gradient(f, G)` of a function reading the
    global `G` ran the program recorded for another array)."""
    for c in captured:
        for b in (c,) if type(c) is np.ndarray else c if isinstance(c, list) else ():
            if isinstance(b, np.ndarray) and any(np.may_share_memory(a, b) for a in arrays):
                return True
    return False


def _boxes(leaves: list[Leaf]) -> list[tuple[int, Any]] | None:
    """The (position, `data.BoxRef`) of each captured float held by an object, a dict item or a
    cell, which a recorded fast path boxes afresh at each call and writes back after it (a box
    kept from the first call gave that call's value for good, helper 74); None where the fast
    path cannot: a float with a shadow, or two leaves of one slot (`data.share_boxes`)."""
    out = [(i, lf.slot) for i, lf in enumerate(leaves) if lf.slot is not None]
    if any(lf.kind != "const" for lf in leaves if lf.slot is not None):
        return None
    if len({(id(ref.owner), ref.key) for _, ref in out}) != len(out):
        return None
    return out


def _fresh_boxes(values: list, boxes: list) -> bool:
    """Each slot's current float, boxed into `values`; False where its type changed."""
    for i, ref in boxes:
        v = data.get_field(ref.owner, ref.key)
        if type(v) is not type(ref.like):
            return False
        values[i] = data.box_of(v)
    return True


def _write_boxes(values: list, boxes: list) -> None:
    for i, ref in boxes:
        data.set_field(ref.owner, ref.key, data.unbox(values[i], ref.like))


def _passable(a: np.ndarray, dtype: Any, ndim: int) -> bool:
    """Whether array `a` has the recorded dtype and ndim and is not a writable array whose
    elements overlap (`boundary.self_overlapping`, which the full path refuses)."""
    if (a.dtype is not dtype and a.dtype != dtype) or a.ndim != ndim:
        return False
    flags = a.flags
    return flags.c_contiguous or flags.f_contiguous or not self_overlapping(a)


def _plain_array(a: Any) -> bool:
    return type(a) is np.ndarray and a.dtype.kind == "f"


def _plain_float(a: Any) -> bool:
    return type(a) is float or type(a) is np.float64
