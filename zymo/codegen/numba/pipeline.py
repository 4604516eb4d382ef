"""The Numba compiler pipeline of generated programs (`numba.njit(pipeline_class=Compiler)`).

Contract: a program compiled with `Compiler` is typed exactly as Numba's default pipeline
types it, and so computes the same; it compiles faster when that holds without SSA.

Numba's default nopython pipeline rebuilds SSA form (`ReconstructSSA`) before typing: every
name assigned in more than one block becomes one version per assignment, joined by phi
nodes. Generated derivatives reassign many names across blocks (loop-carried sums and
adjoints, cache counters, values recomputed in the adjoint sweep), and the pass, with the
phis it leaves to strip, is about a tenth of a loop-heavy derivative's first compile
(`gmm_objective`'s gradient: 0.1 s of 1.1 s).

`Compiler` first runs the default pipeline without that pass. Without SSA, type inference
gives a name one type for all its assignments, their unification: `k = 1` in one block and
`k = x[i]` in another make `k` a float64 everywhere, where SSA would keep the int; and the
unification flows backwards through copies, into names assigned once (`y = n + 0; k = y`
makes `y` a float too). So right after typing, `_SameTypes` checks that no assignment was
widened: every assignment, temporaries and single ones included, must produce exactly the
type its target has (a literal counts as its type: `k = 0` is an int64; an argument, the
type passed). When that holds, the SSA typing could not differ: every version would get the
type of its own assignment, which is the name's type, phis would join equal types, and
every use would see the type it sees now. (The literal's own type differs under SSA only
for the uses it reaches directly; an overload that prefers a literal computes the same with
the int.) When it does not hold, or typing fails (a name that holds an array in the forward
sweep and a float in the adjoint sweep), or any pass raises, the first pipeline stops with
a Numba error (`_FirstTry`), and Numba's `_compile_core` runs the second one: Numba's
default pipeline, from the bytecode again (its first pass translates it anew), with what the
first one left in the state forgotten (`_WithSSA`), exactly as `numba.njit` without
`Compiler`. A program that compiles in neither raises the default pipeline's error.

The first pipeline also leaves out work whose result it would not use, each pass keeping
Numba's behaviour where its shortcut does not hold:
- `InlineClosureLikes` is skipped where it would leave the IR as it is (`_nothing_to_inline`:
  no closure, list display, `reduce` or stencil, one scope), as in every generated program;
- type inference resolves each call once per function and argument types (`_MemoTyping`),
  where Numba resolves it at every call site and every round (the result is the same);
- a `PostProcessor` run (CFG canonicalization, variable lifetimes, `del` placement: 9-11 ms
  each on `gmm_objective`'s gradient, six per compile) is skipped where the IR it would
  process is the one the previous run processed: after the rewrites when none applied
  (`_GenericRewrites`, `_NopythonRewrites`), when stripping phis finds none (`_StripPhis`),
  and for legalization, whose `del`s are those `_NopythonRewrites` placed on the same IR
  (`_IRLegalization`). After rewrites before typing that keep every block's successors, the
  lifetimes are invalidated rather than recomputed (`_GenericRewrites`).
"""

from __future__ import annotations

from typing import Any

from numba.core import errors, ir, postproc, types
from numba.core import typed_passes as tp
from numba.core import untyped_passes as up
from numba.core.compiler import CompilerBase, DefaultPassBuilder, _EarlyPipelineCompletion
from numba.core.compiler_machinery import AnalysisPass, FunctionPass, PassManager, register_pass
from numba.core.ir_utils import build_definitions, enforce_no_dels, enforce_no_phis
from numba.core.rewrites import rewrite_registry

from zymo.codegen.numba import lowering as numba_lowering

FAST = "zymo_without_ssa"  # the first pipeline's name (in a compile result's "pipeline_times")
_DECLARED = "zymo_declared"  # (return type, code library) of the state before any pipeline ran
_DELS = "zymo_dels"  # {label: (block, body with its dels)} from `_NopythonRewrites`, or None


class Widened(errors.TypingError):
    """Typing without SSA widened an assignment (the default pipeline runs instead)."""


@register_pass(mutates_CFG=False, analysis_only=False)
class _NoSSA(FunctionPass):
    """In place of `ReconstructSSA`: tell the passes after it (literal propagation) that the
    IR is not in SSA form."""

    _name = "zymo_no_ssa"

    def __init__(self) -> None:
        FunctionPass.__init__(self)

    def run_pass(self, state: Any) -> bool:
        state.flags.enable_ssa = False
        return False


@register_pass(mutates_CFG=False, analysis_only=False)
class _WithSSA(FunctionPass):
    """Start of the default pipeline after the first one stopped: SSA on again, and what the
    first pipeline left in the shared state forgotten: its error (Numba's dispatcher raises a
    recorded one even after a later pipeline succeeded) and its typing, the return type
    above all (type inference takes a return type already in the state as declared: the
    first pipeline's, perhaps widened, would be forced on the program), and its code library
    (one it finalized cannot take the second pipeline's code; with None, lowering makes one)."""

    _name = "zymo_with_ssa"

    def __init__(self) -> None:
        FunctionPass.__init__(self)

    def run_pass(self, state: Any) -> bool:
        state.flags.enable_ssa = True
        state.status.fail_reason = None
        state.return_type, state.library = state[_DECLARED]
        state.typemap = state.calltypes = None
        return False


def _type_of(value: Any, state: Any) -> Any:
    """The type `value` (an assignment's right-hand side) produces, or None if unknown here."""
    typemap = state.typemap
    if isinstance(value, ir.Var):
        return typemap.get(value.name)
    if isinstance(value, ir.Const):
        return state.typingctx.resolve_value_type(value.value)
    if isinstance(value, ir.Arg):
        return state.args[value.index]
    if not isinstance(value, ir.Expr):
        return None
    sig = state.calltypes.get(value)
    if sig is not None:  # calls, operators, subscripts
        return sig.return_type
    if value.op == "build_tuple":
        items = [typemap.get(v.name) for v in value.items]
        return None if None in items else types.BaseTuple.from_types(items)
    base = typemap.get(value.value.name) if value.op in ("cast", "getattr", "static_getitem", "pair_first",
                                                         "pair_second", "exhaust_iter") else None
    if base is None:
        return None
    if value.op == "cast":
        return base
    if value.op == "exhaust_iter":  # as Numba's `ExhaustIterConstraint` types it
        if isinstance(base, types.BaseTuple):
            return base if len(base) == value.count else None
        if isinstance(base, types.IterableType):
            return types.UniTuple(base.iterator_type.yield_type, value.count)
        return None
    if value.op == "getattr":
        return state.typingctx.resolve_getattr(base, value.attr)
    if value.op == "pair_first":
        return base.first_type
    if value.op == "pair_second":
        return base.second_type
    if isinstance(base, types.BaseTuple) and isinstance(value.index, int):  # static_getitem
        return base.types[value.index]
    return None


class _MemoTyping:
    """A typing context that resolves each call's type once per set of argument types: the
    typing context it stands for (`ctx`) in everything else. Numba resolves a call anew at
    every call site and every round of propagation, trying templates in order (each failure
    recorded), though the result depends only on the function and the argument types, literal
    values included; it remembers only failures (`lookup_resolve_cache`). `gmm_objective`'s
    gradient resolves 621 calls of 39 kinds: 0.035 s of its 0.065 s of typing. Only successes
    are remembered, and not calls of a Numba dispatcher (typing one compiles it, and a
    recursive one is typed differently while it is on the call stack)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._memo: dict = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def resolve_function_type(self, func: Any, args: Any, kws: Any) -> Any:
        if isinstance(func, types.Dispatcher):
            return self._ctx.resolve_function_type(func, args, kws)
        try:
            key = (func, tuple(args), tuple(sorted(kws.items())) if kws else ())
            sig = self._memo.get(key)
        except TypeError:  # an unhashable type
            return self._ctx.resolve_function_type(func, args, kws)
        if sig is None:
            sig = self._ctx.resolve_function_type(func, args, kws)
            if sig is not None:
                self._memo[key] = sig
        return sig


@register_pass(mutates_CFG=True, analysis_only=False)
class _TypeInference(tp.NopythonTypeInference):
    """Numba's `NopythonTypeInference` with the typing context of the state seen through
    `_MemoTyping` while it runs."""

    _name = "zymo_type_inference"

    def run_pass(self, state: Any) -> bool:
        ctx = state.typingctx
        state.typingctx = _MemoTyping(ctx)
        try:
            return super().run_pass(state)
        finally:
            state.typingctx = ctx


@register_pass(mutates_CFG=False, analysis_only=True)
class _SameTypes(AnalysisPass):
    """Raise `Widened` if typing without SSA widened an assignment (module contract): every
    assignment, temporaries and single ones included, since unification also flows backwards
    through copies (`y = n + 0; a = y`, `a` later a float: `y` becomes a float too, and
    `a = y` then produces exactly `a`'s type); an argument's type is the one passed (a name
    that also holds a strided view would make a C-contiguous argument's layout 'A'). An
    assignment whose type is not known here counts as widened, except a container display
    (`[]`, `{}`), which typing refines by its uses in either pipeline alike."""

    _name = "zymo_same_types"

    def __init__(self) -> None:
        AnalysisPass.__init__(self)

    def run_pass(self, state: Any) -> bool:
        for block in state.func_ir.blocks.values():
            for stmt in block.body:
                if not isinstance(stmt, ir.Assign) or isinstance(stmt.value, (ir.Global, ir.FreeVar)):
                    continue
                value = stmt.value
                if isinstance(value, ir.Expr) and value.op in ("build_list", "build_map", "build_set"):
                    continue
                want = types.unliteral(state.typemap[stmt.target.name])
                got = _type_of(value, state)
                if got is None or types.unliteral(got) != want:
                    raise Widened(f"without SSA, {stmt.target.name!r} would be {want} where it is assigned {got}")
        return False


def _nothing_to_inline(func_ir: Any) -> bool:
    """Whether Numba's `InlineClosureLikes` would leave `func_ir` as it is: no closure
    (`make_function`), no list display (what array-comprehension inlining starts from), no
    `reduce` or stencil, and one scope for all blocks (which the pass would otherwise unify).
    Generated programs have none of these."""
    scopes = set()
    for block in func_ir.blocks.values():
        scopes.add(id(block.scope))
        for stmt in block.body:
            if not isinstance(stmt, ir.Assign):
                continue
            value = stmt.value
            if isinstance(value, ir.Expr) and value.op in ("make_function", "build_list"):
                return False
            if isinstance(value, (ir.Global, ir.FreeVar)) and (
                    value.name == "reduce" or getattr(value.value, "__name__", None) == "reduce"
                    or type(value.value).__name__ == "StencilFunc"):
                return False
    return len(scopes) <= 1


@register_pass(mutates_CFG=True, analysis_only=False)
class _InlineClosureLikes(up.InlineClosureLikes):
    """Numba's `InlineClosureLikes`, skipped where it has nothing to inline (`_nothing_to_inline`):
    a pass over the whole IR that also recomputes its variables' lifetimes twice (0.03 s of
    `gmm_objective`'s gradient, a tenth of the primal's whole Numba pipeline)."""

    _name = "zymo_inline_closure_likes"

    def run_pass(self, state: Any) -> bool:
        if _nothing_to_inline(state.func_ir):
            return False
        return super().run_pass(state)


def _apply_rewrites(kind: str, state: Any) -> list[tuple[Any, Any]]:
    """Numba's `rewrite_registry.apply(kind, state)` without its closing `PostProcessor` run:
    each rewrite, applied to each block until it no longer matches (the registry's loop as
    Numba writes it), and the replaced blocks verified. Return the (old, new) pairs of the
    blocks replaced; the caller decides what metadata to refresh."""
    blocks = state.func_ir.blocks
    old = blocks.copy()
    for rewrite_cls in rewrite_registry.rewrites[kind]:
        rewrite = rewrite_cls(state)
        work = list(blocks.items())
        while work:
            label, block = work.pop()
            if rewrite.match(state.func_ir, block, state.typemap, state.calltypes):
                blocks[label] = rewrite.apply()
                work.append((label, blocks[label]))
    changed = [(old.get(label), block) for label, block in blocks.items() if block is not old.get(label)]
    for _, block in changed:
        block.verify()
    return changed


def _same_edges(old: Any, new: Any) -> bool:
    """Whether block `new` (a rewrite of `old`) leaves the CFG as it was: same successors."""
    return old is not None and old.terminator.get_targets() == new.terminator.get_targets()


@register_pass(mutates_CFG=True, analysis_only=False)
class _GenericRewrites(up.GenericRewrites):
    """Numba's `GenericRewrites` (the rewrites before typing: constant subscripts, raises,
    `print`), through `_apply_rewrites`. Numba closes the pass with a `PostProcessor` run that
    canonicalizes the CFG and computes variable lifetimes again (9 ms of `gmm_objective`'s
    gradient). Where every replaced block keeps its successors, the CFG stays canonical, and
    the lifetimes are only invalidated instead: the passes up to typing that change the IR
    compute them anew themselves, and the one that reads them without (`literal_unroll`'s,
    which generated programs never call) would stop the first pipeline, not misread them."""

    _name = "zymo_generic_rewrites"

    def run_pass(self, state: Any) -> bool:
        changed = _apply_rewrites("before-inference", state)
        if not all(_same_edges(old, new) for old, new in changed):
            postproc.PostProcessor(state.func_ir).run()
        elif changed:
            state.func_ir.variable_lifetime = None
            state.func_ir.block_entry_vars = {}
        return True


@register_pass(mutates_CFG=True, analysis_only=False)
class _NopythonRewrites(tp.NopythonRewrites):
    """Numba's `NopythonRewrites` (the rewrites after typing, with the `del`s they rely on
    put in and taken out again), through `_apply_rewrites`: in a generated program none
    usually applies, and where none does, the IR and its metadata are those the `del`s'
    `PostProcessor` run made, which Numba's registry would compute again. The blocks with
    their `del`s are then kept in the state (`_DELS`) for `_IRLegalization`."""

    _name = "zymo_nopython_rewrites"

    def run_pass(self, state: Any) -> bool:
        pp = postproc.PostProcessor(state.func_ir)
        pp.run(True)
        state[_DELS] = None
        if _apply_rewrites("after-inference", state):  # as Numba's registry does
            postproc.PostProcessor(state.func_ir).run()
        else:
            state[_DELS] = {label: (block, block.body) for label, block in state.func_ir.blocks.items()}
        pp.remove_dels()  # new body lists: the kept ones still hold the `del`s
        return True


def _without_dels(body: list, now: list) -> bool:
    """Whether statement list `now` is `body` without its `del`s, statement for statement."""
    rest = [stmt for stmt in body if not isinstance(stmt, ir.Del)]
    return len(rest) == len(now) and all(a is b for a, b in zip(rest, now))


@register_pass(mutates_CFG=True, analysis_only=False)
class _IRLegalization(tp.IRLegalization):
    """Numba's `IRLegalization` (no phis, no `del`s, then a `PostProcessor` run that puts the
    `del`s in for lowering), where the IR is exactly the one `_NopythonRewrites` took its
    `del`s out of (the same blocks holding the same statements), the `del`s put back: the
    run would place them exactly so (the same IR, the same lifetimes, `extend_lifetimes` off
    in both), 10 ms of `gmm_objective`'s gradient."""

    _name = "zymo_ir_legalization"

    def run_pass(self, state: Any) -> bool:
        kept, state[_DELS] = state.get(_DELS), None
        blocks = state.func_ir.blocks
        if not kept or state.flags.dbg_extend_lifetimes or kept.keys() != blocks.keys() or not all(
                blocks[label] is block and _without_dels(body, block.body) for label, (block, body) in kept.items()):
            return super().run_pass(state)
        enforce_no_phis(state.func_ir)
        enforce_no_dels(state.func_ir)
        for block, body in kept.values():
            block.body = body
        return True


@register_pass(mutates_CFG=True, analysis_only=False)
class _StripPhis(tp.PreLowerStripPhis):
    """Numba's `PreLowerStripPhis`, where the IR has a phi node (never, without SSA), is a
    generator's (or is compiled `parallel=True`, which `Compiler` leaves to Numba's pipeline);
    otherwise only its refresh of the definitions. Its `PostProcessor` run would
    canonicalize an unchanged CFG and compute variable lifetimes that no pass reads before
    `_NopythonRewrites` computes them anew (nopython lowering reads the `del`s that
    `IRLegalization` puts in, not the lifetimes)."""

    _name = "zymo_strip_phis"

    def run_pass(self, state: Any) -> bool:
        func_ir = state.func_ir
        if func_ir.generator_info is not None or state.flags.auto_parallel.enabled or any(
                isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Expr) and stmt.value.op == "phi"
                for block in func_ir.blocks.values() for stmt in block.body):
            return super().run_pass(state)
        func_ir._definitions = build_definitions(func_ir.blocks)
        return True


class _FirstTry(PassManager):
    """The first pipeline: any exception it raises becomes a Numba error, so that Numba's
    `_compile_core` runs the default pipeline next instead of giving up (an internal error of
    a pass on IR not in SSA form must not fail a compile the default pipeline can do)."""

    def run(self, state: Any) -> None:
        try:
            super().run(state)
        except (errors.NumbaError, _EarlyPipelineCompletion):  # the latter: Numba's own control flow
            raise
        except Exception as exc:  # not BaseException: an interrupt still stops the compile
            raise errors.CompilerError(f"zymo's pipeline without SSA failed: {type(exc).__name__}: {exc}") from exc


_FAST_PASSES = {up.ReconstructSSA: _NoSSA, up.InlineClosureLikes: _InlineClosureLikes,
                up.GenericRewrites: _GenericRewrites, tp.NopythonTypeInference: _TypeInference,
                tp.PreLowerStripPhis: _StripPhis, tp.NopythonRewrites: _NopythonRewrites,
                tp.IRLegalization: _IRLegalization}


class Compiler(CompilerBase):
    """Numba's nopython pipeline without `ReconstructSSA`, checked by `_SameTypes`; then, if
    that stops, Numba's default nopython pipeline (module contract)."""

    def define_pipelines(self) -> list[PassManager]:
        self.state[_DECLARED] = (self.state.return_type, self.state.library)  # None, None unless given
        default = DefaultPassBuilder.define_nopython_pipeline(self.state)
        if not any(pass_ is up.FixupArgs for pass_, _ in default.passes) or not any(
                pass_ is up.ReconstructSSA for pass_, _ in default.passes) or self.state.flags.auto_parallel.enabled:
            # compiling given IR (nothing to translate anew), without SSA anyway, or
            # `parallel=True`, whose passes rely on SSA (an array expression assigned to the
            # name it reads in a loop computed the first iteration only; zymo never asks for it)
            return [default]
        fast = _FirstTry(FAST)
        again = PassManager(default.pipeline_name)
        for pass_, what in default.passes:
            # SSA is turned off where it would be built, so that the passes before (and
            # a `with` block's lifting, which compiles the function again) see Numba's flags
            lowering = numba_lowering.NativeLowering if pass_ is tp.NativeLowering else pass_
            fast.add_pass(_FAST_PASSES.get(pass_, lowering), what)
            again.add_pass(lowering, what)
            if pass_ is up.FixupArgs:  # right after the bytecode is translated
                again.add_pass(_WithSSA, "typing with SSA")
            elif pass_ is tp.NopythonTypeInference:
                fast.add_pass(_SameTypes, "no assignment widened")
        fast.finalize()
        again.finalize()
        return [fast, again]
