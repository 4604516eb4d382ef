"""The public API: `autodiff`, `gradient`, `autodiff_thunk`, and access to generated code and IR.

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

These are thin functions: the caches and replays are in `cache.py`, the stages in
`pipeline.py`, argument checks and flattening in `boundary.py`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import config
from .annotations import Active, Annotation, Const, Duplicated, Mode
from .boundary import call_shadows, has_float_leaf, has_memory_leaf
from .cache import TYPED, Tape, TypedGradient, cache_clear, call, lowered, prepare, thunks
from .derivatives import forward_columns
from .draws import in_one_call, next_pass
from .errors import ZymoUsageError
from .ir.core import Function
from .shadows import make_zero

__all__ = ["Tape", "autodiff", "autodiff_thunk", "cache_clear", "cache_report", "generated_code", "gradient", "ir"]


def autodiff(mode: Mode, f: Callable, ret_activity: Any = Active, *args: Any, numba: Any = None,
             memory_limit: int | None = None) -> tuple:
    """Differentiate `f` at the annotated arguments (see the module docstring).

    `numba=True` compiles the derivative with Numba (raising if Numba cannot),
    `numba="prefer"` falls back to Python with a warning, `numba=False` runs Python;
    the default follows `zymo.config.set_numba` / `ZYMO_NUMBA` ("auto": Numba for
    `@njit` functions). `memory_limit` (bytes; default `zymo.config.set_memory_limit`) bounds
    what reverse mode stores: loops whose tape would exceed it are checkpointed
    (`transform/checkpoint.py`)."""
    return call(mode, f, ret_activity, args, numba, memory_limit)


def autodiff_thunk(mode: Mode, f: Callable, ret_activity: Any, *args: Any,
                   numba: Any = None, memory_limit: int | None = None) -> tuple[Callable, Callable]:
    """Split reverse mode: `(forward, reverse)` thunks for calls shaped like `args`.

        fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, f, Active, Duplicated(x, dx))
        tape, y = fwd(Duplicated(x, dx))               # the primal, recording a tape
        (derivs,) = rev(Duplicated(x, dx), 1.0, tape)  # seed of an Active return, then the tape
                                                       # (batch mode: one seed per lane)
        tape, y = fwd(Duplicated(x, dx), tape=tape)    # reuses the tape's buffers

    A tape serves one reverse call (a second one raises `ZymoUsageError`).
    `ReverseSplitNoPrimal` returns `(tape, None)` from the forward thunk. The thunks
    accept arguments with the same annotations and types as `args`.
    """
    if not (isinstance(mode, Mode) and mode.split):
        raise ZymoUsageError("autodiff_thunk takes ReverseSplitWithPrimal or ReverseSplitNoPrimal")
    limit = config.call_memory_limit(memory_limit)  # loops checkpointed: the tape holds the snapshots
    return thunks(mode, f, ret_activity, args, numba, limit)


def gradient(mode: Mode, f: Callable, *args: Any, numba: Any = None, memory_limit: int | None = None) -> tuple:
    """The gradient of scalar `f` with respect to every argument, shadows allocated for you.

    Floats give floats, arrays arrays, tuples tuples; an argument passed as `Const(x)` is not
    differentiated (its entry is None), as in Enzyme's `gradient`. `mode` is `Reverse` (one
    reverse sweep) or `Forward` (batched forward sweeps, 8 input elements per call);
    `ReverseWithPrimal` returns `(gradient, value)`, as Enzyme's `gradient` does.
    """
    try:  # the everyday call: only plain float arrays and floats pass its checks (`TypedGradient.run`)
        typed = TYPED.get((f, mode, numba)) if memory_limit is None and config.memory_limit() is None else None
    except TypeError:  # an unhashable callable
        typed = None
    if typed is not None:
        out = typed.run(args)
        if out is not None:
            return out
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
    limit = config.call_memory_limit(memory_limit)
    annotated: list[Any] = []
    shadows: list[Any] = []
    for a in args:
        if isinstance(a, Const):  # its entry of the gradient is None
            shadows.append(None)
            annotated.append(a)
        elif has_memory_leaf(a):
            s = make_zero(a)
            shadows.append(s)
            annotated.append(Duplicated(a, s))
        elif has_float_leaf(a):
            shadows.append(None)
            annotated.append(Active(a))
        else:
            shadows.append(None)
            annotated.append(Const(a))
    derivs, *value = autodiff(mode, f, Active, *annotated, numba=numba, memory_limit=limit)
    grads = tuple(d if s is None else s for d, s in zip(derivs, shadows))
    if limit is None:
        TypedGradient.record(f, mode, numba, args, annotated)
    return (grads, value[0]) if mode.with_primal else grads



def _not_scalar(f: Callable) -> ZymoUsageError:
    return ZymoUsageError(f"gradient: {getattr(f, '__name__', f)} must return one float; for an array result "
                          "use zymo.jacobian (or autodiff with a Duplicated output)")


@in_one_call(lambda f=None, args=(), *_, **__: (f, args))
def _gradient_forward(f: Callable, args: tuple, numba: Any) -> tuple:
    from .annotations import Forward

    out: list[Any] = []
    const = [isinstance(a, Const) for a in args]
    args = tuple(a.val if c else a for a, c in zip(args, const))
    for k, a in enumerate(args):
        if const[k]:
            out.append(None)
        elif isinstance(a, (complex, np.complexfloating)) or (isinstance(a, np.ndarray) and np.iscomplexobj(a)):
            out.append(_complex_gradient_forward(f, args, k, numba))
        elif isinstance(a, np.ndarray):
            g, _ = forward_columns(f, list(args), k, None, numba)  # batched, 8 tangents per call
            if np.size(g) != a.size:
                raise _not_scalar(f)
            g = g.reshape(a.shape)
            # the argument's own float dtype, as reverse mode's shadow has it (float32 stays float32)
            out.append(g.astype(a.dtype, copy=False) if a.dtype.kind == "f" else g)
        elif isinstance(a, (float, np.floating)):
            copies = [np.copy(x) if isinstance(x, np.ndarray) else x for x in args]
            annotated = [Const(c) if j != k else Duplicated(c, 1.0) for j, c in enumerate(copies)]
            next_pass()
            (d,) = autodiff(Forward, f, Duplicated, *annotated, numba=numba)
            if np.ndim(d) != 0:
                raise _not_scalar(f)
            # a NumPy float's own type, as reverse mode's derivative has it (`boundary._restructure`)
            out.append(type(a)(d) if isinstance(a, np.floating) else float(d))
        elif a is None or isinstance(a, (str, bool, int, np.integer)) or callable(a):
            out.append(None)  # no derivative: as `gradient(Reverse, ...)` gives
        else:  # a list, tuple, dict or record: was a silent None (helper 73)
            raise ZymoUsageError(
                f"zymo.gradient(Forward, ...) takes arrays and floats; argument {k} is a {type(a).__name__}: use "
                "zymo.gradient(Reverse, ...), which returns its gradient in its own structure, or "
                "zymo.autodiff(Forward, f, Duplicated, Duplicated(x, tangent), ...) for one direction, or mark it "
                "Const(...) if it needs none")
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
            next_pass()
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
    comp, *_ = prepare(mode, f, ret_activity, args, numba)
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
    from .rules import checkpoint_call
    from .transform.reverse import report

    if mode.forward:
        raise ZymoUsageError("forward mode caches nothing; ask for the report of a reverse mode")
    prepare(mode, f, ret_activity, args, False)  # the same checks as the call itself
    # measure: run the augmented forward sweep of the split program on copies of the arguments
    copies = copy.deepcopy(args)
    comp, norm, leaves, all_values = prepare(ReverseSplitWithPrimal, f, ret_activity, copies, False)
    shadows = call_shadows(comp, leaves, all_values)
    with checkpoint_call.recording() as calls:
        _, recorded = comp.fn[0](*all_values, *shadows, None)
    text = report(comp.generator, dict(zip(comp.generator.tape_names, recorded))) + checkpoint_call.report_lines(calls)
    limit = config.call_memory_limit(memory_limit)
    return text if limit is None else text + "\n" + _schedule_report(f, ret_activity, args, limit)


def _schedule_report(f: Callable, ret_activity: Any, args: tuple, limit: int) -> str:
    """The checkpoint schedules of one reverse-mode call under `limit` bytes (on copies of `args`)."""
    import copy

    from .annotations import Reverse as _Reverse
    from .runtime.checkpoint import Plan

    copies = copy.deepcopy(args)
    saved, Plan.log = Plan.log, []
    try:
        call(_Reverse, f, ret_activity, copies, False, limit)
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
    lw, _ = lowered(f, values)
    return lw.ir

