"""The pipeline: the one place where the stages meet.

Contract: `lower_ir(f, values)` runs the front of the pipeline on a function and the
values of a call: frontend lowering (`frontend/lower.py`), specialisation
(`ir/specialize.py`), the IR simplifications (`transform/simplify.py`) and, under
`ZYMO_CHECK_IR`, the verifier; it returns a `Lowered` (the IR and the globals and closure
data it read, which `Lowered.still_valid` re-checks). `compile_program(mode, ir, ...)`
runs the rest: activity analysis, the forward or reverse transform (with checkpointing
where a memory limit or a marked loop asks for it), fusion, and the Python, Numba or
"kernels" backend, and returns a `Compiled` program. `run_program(comp, ...)` calls it,
compiling a Numba program at its first call and falling back to Python as the backend
policy says (`choose_backend`, `config.set_numba`). Nothing here caches: `cache.py` does.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import config
from .analysis.activity import Activity, analyze
from .annotations import Active, Const, Mode
from .codegen.python import compile_source, paused_collector
from .errors import ZymoUsageError, ZymoWarning
from .frontend.bindings import S
from .frontend.lower import lower
from .frontend.source import unwrap
from .ir.core import Function, Value
from .ir.specialize import specialize
from .ir.verify import verify
from .transform.simplify import cse_loads, cse_numbers, dce, hoist_sizes

# -- what the stages produce -------------------------------------------------------------

@dataclass
class Lowered:
    ir: Function
    captured: list  # (param value, object, [(resolver, name)])
    draws: bool | None = None  # whether it calls np.random (`draws.draws`), once asked
    code: Any = None  # the function's code when lowered (`f.__code__ = g.__code__` in place: lowered again)

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
    fn: Any  # the program; in split mode a list of its two halves
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
    second_order: Any = None  # reverse mode: `derivatives._SecondOrder`, made at its first use
    fresh_tapes: Any = None  # reverse mode: the program without its kept tapes (`derivatives._without_kept_tapes`)
    lowered: Any = None  # the `Lowered` it was compiled from (set by `cache.prepare`; `cache.lowered_of`)
    numpy_results: Any = None  # (primal, tangents): NumPy scalar types of the results (`boundary.python_scalars`)


def lower_ir(f: Any, values: tuple) -> Lowered:
    """The IR of `f` for a call with `values`: lowered, specialised, simplified (and verified
    under `ZYMO_CHECK_IR`)."""
    ir = dce(hoist_sizes(cse_numbers(cse_loads(specialize(lower(f, values))))))
    if config.check_ir():
        verify(ir)
    return Lowered(ir, ir.attrs["captured"], code=getattr(unwrap(f), "__code__", None))


def choose_backend(numba: Any, f: Any) -> str:
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



# -- analysis, transform, codegen --------------------------------------------------------


@paused_collector()  # the transform allocates a great deal (`codegen.python.paused_collector`)
def compile_program(mode: Mode, ir: Function, active: list[bool], classes: list[int], ret_activity: Any,
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
    name: Any  # the generated function's name (a list of two in split mode)
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
                # the driver is Python: "prefer" runs Python, Numba ("always") runs as "kernels"
                backend = {"prefer": "python", "always": "kernels"}.get(backend, backend)
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
        memory = _memory(generator, namer, act, ir) if _has_loops(src) else None
        fn, src = _with_kernels(src, name, ir, mode, generator, namer, numbers, memory)
        fn = _errstate_guard(fn, ir)
    else:
        from .codegen.numba.backend import compile_numba

        what = f"{'forward' if mode.forward else 'reverse'} derivative of {ir.name}"
        facts = _source_facts(generator, namer, numbers, ir)
        if _has_loops(src):
            from .codegen.loop_forms import nonneg_names
            from .codegen.loop_order import lean_loops

            copies: dict[str, str] = {}
            with nonneg_names(_proven(ir, namer, facts)):  # indices that never wrap round
                src = lean_loops(src, _memory(generator, namer, act, ir), copies, reorder=config.reassociate(),
                                 whole=True)
            facts = _with_copies(facts, copies)
        caches = generator.nonneg_facts()[0] if generator is not None else frozenset()
        fns = compile_numba(src, names if not mode.forward else [name], what, facts,
                            reassociate=config.reassociate(), exempt=caches, fallback=True)
        fn = fns if mode.split else fns[0]
    comp = Compiled(fn, src, ir, act, active_params, captured_objs, generator, backend,
                    backend in ("python", "kernels"), name, width, guards=guards)
    if mode.split and backend not in ("python", "kernels"):
        comp.unchecked = {0, 1}
    return comp


def _has_loops(src: str) -> bool:
    """Whether the program may hold a `for` loop (the loop rewrites' facts are made only then)."""
    return "for " in src


def _memory(generator: Any, namer: Any, act: Any, ir: Function) -> Any:
    """What the program's array names point into (`transform/memory.py`), for the loop
    rewrites of the compiled backends (`codegen/loop_order.py`)."""
    if generator is not None:
        return generator.memory_facts()
    from .analysis.index import Index
    from .transform.memory import memory_facts

    return memory_facts(namer, act, Index(ir).values)


def _source_facts(generator: Any, namer: Any, numbers: frozenset, ir: Function) -> Any:
    """What the transform knows about the generated program's names (`numba_.SourceFacts`)."""
    from .analysis.bounds import index_names
    from .codegen.numba.rewrites import SourceFacts

    buffers, counters = generator.nonneg_facts() if generator is not None else (frozenset(), frozenset())
    return SourceFacts(floats=generator.float_adjoints() if generator is not None else frozenset(),
                       ints=generator.int_names() if generator is not None else frozenset(),
                       numbers=numbers, arrays=frozenset(namer.arrays) | buffers,
                       nonneg=index_names(ir, namer.values, reversed_loops=generator is not None) | counters,
                       ndims=tuple(sorted(namer.ndims.items())))


def _proven(ir: Function, namer: Any, facts: Any) -> frozenset[str]:
    """The index names the loop rewrites may take as never negative: every loop variable and
    sum the IR's analysis proves so (`index_names(..., reversed_loops=True)`, whatever the
    mode: the Numba facts leave out, in forward mode, those LLVM bounds itself), and the Numba
    facts' names."""
    from .analysis.bounds import index_names

    return index_names(ir, namer.values, reversed_loops=True) | facts.nonneg


def _with_kernels(src: str, name: Any, ir: Function, mode: Mode, generator: Any, namer: Any,
                  numbers: frozenset, memory: Any) -> tuple[Any, str]:
    """The "kernels" backend: `src` as Python, its scalar loops as Numba kernels
    (`codegen/outline.py`). Returns the function(s) and their source: the kernels' Python
    definitions, then the program that calls them (run as it is, it computes the same)."""
    import ast

    from .codegen.idioms import blas_tree
    from .codegen.layouts import nt_products, product_layouts
    from .codegen.loop_forms import nonneg_names
    from .codegen.loop_order import lean_tree
    from .codegen.memo import memo
    from .codegen.numba.ew_rewrite import in_place, made_arrays
    from .codegen.outline import Kernel, Outlined, outline_tree
    from .codegen.tree import parse, source

    facts = _source_facts(generator, namer, numbers, ir)
    caches = generator.nonneg_facts()[0] if generator is not None else frozenset()
    proven = _proven(ir, namer, facts)
    reorder = config.reassociate()  # sums in any order (`config.set_reassociate`)

    def outlined() -> dict:
        with nonneg_names(proven):  # indices that never wrap round (`loop_forms.never_negative`)
            return _outlined()

    def _outlined() -> dict:
        tree = parse(src)  # one tree through the passes, printed once (`codegen/tree.py`)
        changed = blas_tree(tree, namer.ndims, facts.numbers | facts.ints | facts.floats | facts.nonneg)
        changed |= product_layouts(tree)  # after the idioms: the products they wrote
        changed |= nt_products(tree)
        copies: dict[str, str] = {}
        if memory is not None:  # after the idioms, which read the loops as the transforms wrote them
            changed |= lean_tree(ast.fix_missing_locations(tree), memory, copies, reorder=reorder)
        known = _with_copies(facts, copies)
        ndims = _copied_ndims(namer.ndims, copies)
        floats = known.floats | known.numbers
        arrays = made_arrays(ast.fix_missing_locations(tree), known.arrays)

        def fast(s: Any) -> bool:
            return in_place(s, floats, arrays, ndims)
        got = outline_tree(tree, ndims, known.numbers | known.ints | known.floats | known.nonneg, caches,
                           in_place=fast)
        if got is None:  # no kernel: the program as the passes left it, else as it came
            got = Outlined(source(tree) if changed else src, "")
        return {"src": got.src, "kernels": got.kernels, "names": got.names, "parallel": got.parallel,
                "copies": copies, "arrays": sorted(arrays)}
    # a pure function of its inputs: a new process finding the kernels in the disk cache skips it too
    got = memo("outline", [src, namer.ndims, facts, caches, memory, sorted(proven), reorder], outlined)
    facts = _with_copies(facts, got["copies"])
    out = Outlined(got["src"], got["kernels"], got["names"],
                   {k: (t, list(w), list(f)) for k, (t, w, f) in got["parallel"].items()})
    src = out.src
    ops = _tri_ops(src)
    if not out.names:
        return compile_source(src, name, ops), src
    from .codegen.numba.backend import compile_numba

    what = f"loops of the {'forward' if mode.forward else 'reverse'} derivative of {ir.name}"
    twins = [t for t, _, _ in out.parallel.values()]
    # the arrays the kernels index: the facts', and those the outliner proved arrays
    from .codegen.index_checks import allocated

    facts = dataclasses.replace(facts, arrays=facts.arrays | frozenset(got.get("arrays", ())) | allocated(src))
    compiled = compile_numba(out.kernels, out.names + twins, what, facts, parallel=frozenset(twins),
                             reassociate=reorder, exempt=caches)
    python = compile_source(out.kernels, out.names)
    by_name = dict(zip(out.names + twins, compiled))
    from .codegen.numba.backend import _once

    bounded = _once(lambda: compile_numba(out.kernels, out.names, what, facts, reassociate=reorder, bounded=True))
    def kernel(k: int, n: str, p: Any) -> Kernel:
        twin, written, floats = out.parallel[n] if n in out.parallel else (None, None, None)
        return Kernel(n, by_name[n], p, parallel=by_name[twin] if twin is not None else None, written=written,
                      floats=floats, bounded=lambda: bounded()[k])
    kernels = {n: kernel(k, n, p) for k, (n, p) in enumerate(zip(out.names, python))}
    shown = f"# loops compiled with Numba at their first call\n{out.kernels}\n\n# the program (Python)\n{out.src}"
    return compile_source(out.src, name, {**kernels, **ops}), shown


def _tri_ops(src: str) -> dict[str, Any]:
    """The globals a "kernels" program's masked triangle updates call (`codegen/numba/masked.py`,
    written by `codegen/idioms.py`), where it makes any."""
    if "_tri_ops." not in src:
        return {}
    from .codegen.numba import masked

    return {"_tri_ops": masked}


def _with_copies(facts: Any, copies: dict[str, str]) -> Any:
    """`facts` (`numba_.SourceFacts`) with each name a jammed loop's copy introduced
    (`codegen/jam.py`) holding the facts of the name it copies."""
    if not copies:
        return facts
    import dataclasses

    roots = _copy_roots(copies)

    def grown(names: frozenset[str]) -> frozenset[str]:
        return names | {new for new, old in roots.items() if old in names}
    return dataclasses.replace(facts, floats=grown(facts.floats), numbers=grown(facts.numbers),
                               ints=grown(facts.ints), arrays=grown(facts.arrays), nonneg=grown(facts.nonneg),
                               ndims=tuple(sorted(_copied_ndims(dict(facts.ndims), copies).items())))


def _copied_ndims(ndims: dict[str, int], copies: dict[str, str]) -> dict[str, int]:
    """`ndims` with the jammed copies of its names (`_with_copies`)."""
    return {**ndims, **{new: ndims[old] for new, old in _copy_roots(copies).items() if old in ndims}}


def _copy_roots(copies: dict[str, str]) -> dict[str, str]:
    """Each copy's original name: a copy of a copy (a jammed loop inside a jammed loop,
    `s_j1_j1` of `s_j1` of `s`) holds what the first name holds."""
    roots = {}
    for new, old in copies.items():
        while old in copies:
            old = copies[old]
        roots[new] = old
    return roots


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
    out: Any = guarded
    out.__zymo_source__ = getattr(fn, "__zymo_source__", None)
    out.__wrapped__ = fn
    return out


def run_program(comp: Compiled, which: int | None, args: list, f: Any, norm: list) -> Any:
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
        return run_program(comp, which, args, f, norm)
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

