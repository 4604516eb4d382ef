"""Derived operators on top of `autodiff`: Jacobians, forward gradients, second order.

Contract:
- `jacobian(mode, f, x, *consts, chunk=None)`: the Jacobian of `y = f(x, *consts)`
  (a float or an array) with respect to the float array (or float) `x`, shaped
  `y.shape + x.shape`. `Forward` pushes `chunk` basis tangents per call through
  batch mode (default: min(x.size, 8)); `Reverse` pulls `chunk` basis cotangents
  of `y` per call. The extra arguments are constants. `f` may mutate its
  arguments: every call runs on fresh copies, and `x` is left as it was.
- `gradient_forward(f, x, *consts, chunk=None)`: the gradient of scalar `f` in
  forward mode (batched), the same as `jacobian(Forward, ...)`.
- `hvp(f, x, v, *consts)`: the Hessian of scalar `f` at `x` times `v`, by forward
  mode over zymo's own generated reverse-mode program (forward over reverse);
  `hvp_and_gradient` returns `(hvp, gradient)` from the same call;
  `hessian(f, x)` runs batched hvps over basis vectors, `chunk` at a time.
- `sparse=True` (jacobian, hessian): a `scipy.sparse.csr_matrix` from detected pattern,
  coloring and compressed passes (`zymo/sparse/`); the dense path is unchanged.

The reverse program differentiated here is the Python source `autodiff(Reverse, ...)`
runs (`generated_code` shows it), caches, counters and shadow zeroing included. Every
runtime helper it calls must be a rule (`rules/runtime_rules.py`); a helper without one
(the adjoints of eigh, qr, svd, ...) makes `hvp`/`hessian` raise `UnsupportedCall` naming
the user's line, instead of inlining the helper's body. Reshape shadows
(`_rt.maybe_view_shadow(u, x, du, dx, True)`) are read as `_rt.reshape_shadow(du, u, x,
dx)`, a rule whose result may view its first argument, as the analyses expect.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import linecache
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from . import config, pyast
from .annotations import Active, BatchDuplicated, Const, Duplicated, Forward, ForwardWithPrimal, Mode, Reverse
from .boundary import call_shadows
from .cache import call, prepare
from .draws import in_one_call, next_pass
from .errors import UnsupportedCall, UnsupportedSyntax, ZymoSourceError, ZymoTypeError, ZymoUsageError
from .shadows import make_zero

DEFAULT_CHUNK = 8


def _check_x(x: Any, what: str) -> np.ndarray | float:
    if isinstance(x, np.ndarray):
        if not np.issubdtype(x.dtype, np.floating):
            raise ZymoUsageError(f"{what}: x must be a float array (or a float), not an array of {x.dtype}")
        return x
    if isinstance(x, (float, np.floating)) and not isinstance(x, bool):
        return float(x)
    raise ZymoUsageError(f"{what}: x must be a float array or a float, not {type(x).__name__}")


def _constants(consts: tuple) -> tuple:
    """The values of the constant arguments: `Const(c)` is `c` (a constant either way); another
    annotation is refused (these functions make the shadows themselves)."""
    from .annotations import Annotation

    for k, c in enumerate(consts):
        if isinstance(c, Annotation) and not isinstance(c, Const):
            raise ZymoUsageError(f"constant argument {k + 1}: the arguments after x are constants; pass the value "
                                 f"as it is or as Const(c), not {type(c).__name__}(...)")
    return tuple(c.val if isinstance(c, Const) else c for c in consts)


def _copies(consts: Sequence[Any]) -> list:
    return [np.copy(c) if isinstance(c, np.ndarray) else c for c in consts]


def _chunk(chunk: Any, n: int) -> int:
    if chunk is None:
        return max(1, min(n, DEFAULT_CHUNK))
    if not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ZymoUsageError(f"chunk must be a positive int, not {chunk!r}")
    return int(min(chunk, n))


def _basis(x: np.ndarray, start: int, width: int) -> tuple:
    """Basis vectors e_start ... e_{start+width-1} shaped like `x` (zeros past the end), C-ordered
    whatever `x`'s layout, so that element `j` is `j` of `x.reshape(-1)` (C order) and the write
    below goes through a view."""
    out = []
    for j in range(start, start + width):
        e = np.zeros(x.shape, dtype=x.dtype)
        if j < x.size:
            e.reshape(-1)[j] = 1.0
        out.append(e)
    return tuple(out)


def _as_output(y: Any, what: str) -> Any:
    if isinstance(y, np.ndarray) and np.issubdtype(y.dtype, np.floating):
        return y
    if isinstance(y, (float, np.floating)) and not isinstance(y, bool):
        return float(y)
    raise ZymoUsageError(f"{what}: f must return a float or a float array, not {type(y).__name__}")


# -- Jacobians ----------------------------------------------------------------------


@in_one_call(lambda mode=None, f=None, x=None, *consts, **kw: (f, (x, *consts)))
def jacobian(mode: Mode, f: Callable, x: Any, *consts: Any, chunk: int | None = None,
             numba: Any = None, sparse: bool = False, detect: str = "auto", memory_limit: int | None = None) -> Any:
    """The Jacobian of `f(x, *consts)` with respect to `x`, shaped `y.shape + x.shape`.

    `sparse=True` returns a `scipy.sparse.csr_matrix` of shape `(y.size, x.size)` (C order):
    the pattern is detected from zymo's IR, colored, and one batched forward lane per column
    color (or reverse lane per row color, when fewer; `mode` breaks ties) computes it.
    `detect="global"`: a pattern valid at every x; `"local"`: exact for the branches taken at
    this x, valid only for inputs taking the same branches; `"auto"` (default): global, else
    local with a warning. See `zymo/sparse/`. `memory_limit` (bytes) bounds what each
    reverse-mode pass stores, as for `autodiff` (loops checkpointed); forward mode stores nothing."""
    consts = _constants(consts)
    if not isinstance(mode, Mode) or mode.split:
        raise ZymoUsageError("jacobian takes Forward or Reverse")
    if memory_limit is not None and not mode.forward:
        if sparse:
            raise ZymoUsageError("jacobian(Reverse, ..., sparse=True) takes no memory_limit yet; use the dense "
                                 "jacobian or Forward mode")
    if sparse:
        from .sparse.drivers import sparse_jacobian

        return sparse_jacobian(mode, f, x, consts, detect, chunk, numba)
    x = _check_x(x, "jacobian")
    if isinstance(x, float):
        return _jacobian_scalar(mode, f, x, consts, numba, memory_limit)
    if mode.forward:
        return _jacobian_forward(f, x, consts, chunk, numba)
    return _jacobian_reverse(f, x, consts, chunk, numba, memory_limit)


def forward_columns(f: Callable, args: list, k: int, chunk: Any, numba: Any) -> tuple:
    """(J, y): the derivative of `f(*args)` with respect to the float array `args[k]`, one
    column per element of it (shape `y.shape + (args[k].size,)`), by batched forward mode,
    `chunk` basis tangents per call; the other arguments are constants. The primal `y`
    comes from the first call. Every call runs on copies of the arguments."""
    x = args[k]
    width = _chunk(chunk, x.size)
    J = y = None
    for start in range(0, x.size, width):
        ts = _basis(x, start, width)
        copies = _copies(tuple(args))
        if width == 1:
            ann: list[Any] = [Const(c) if j != k else Duplicated(c, ts[0]) for j, c in enumerate(copies)]
            tan, prim = _autodiff(ForwardWithPrimal, f, Duplicated, *ann, numba=numba)
            tans = (tan,)
        else:
            ann = [Const(c) if j != k else BatchDuplicated(c, ts) for j, c in enumerate(copies)]
            tans, prim = _autodiff(ForwardWithPrimal, f, BatchDuplicated, *ann, numba=numba)
        if J is None:
            y = _as_output(prim, "jacobian")
            # reverse mode's dtypes: x's for a float result (its shadow), else of x and y together
            dtype = x.dtype if isinstance(y, float) else np.result_type(x.dtype, y.dtype)
            J = np.zeros(np.shape(y) + (x.size,), dtype=dtype)
        for lane, t in enumerate(tans):
            if start + lane < x.size:
                J[..., start + lane] = t
    return J, y


def _jacobian_forward(f: Callable, x: np.ndarray, consts: tuple, chunk: Any, numba: Any) -> Any:
    J, y = forward_columns(f, [x, *consts], 0, chunk, numba)
    return J.reshape(np.shape(y) + x.shape)


# y[...] = f(x, *consts), written out per number of constants (zymo reads their source)
def _pull0(y, f, x):
    y[...] = f(x)


def _pull1(y, f, x, c1):
    y[...] = f(x, c1)


def _pull2(y, f, x, c1, c2):
    y[...] = f(x, c1, c2)


def _pull3(y, f, x, c1, c2, c3):
    y[...] = f(x, c1, c2, c3)


def _pull4(y, f, x, c1, c2, c3, c4):
    y[...] = f(x, c1, c2, c3, c4)


_PULL = [_pull0, _pull1, _pull2, _pull3, _pull4]


def _jacobian_reverse(f: Callable, x: np.ndarray, consts: tuple, chunk: Any, numba: Any,
                      memory_limit: int | None = None) -> Any:
    next_pass()
    y = _as_output(f(np.copy(x), *_copies(consts)), "jacobian")
    if isinstance(y, float):  # one row: the gradient
        dx = np.zeros_like(x)
        _autodiff(Reverse, f, Active, Duplicated(np.copy(x), dx), *map(Const, _copies(consts)), numba=numba,
                  memory_limit=memory_limit)
        return dx
    if len(consts) >= len(_PULL):
        raise ZymoUsageError(f"jacobian(Reverse, ...) takes at most {len(_PULL) - 1} constant arguments; "
                             "pack them in a tuple")
    pull = _PULL[len(consts)]
    width = _chunk(chunk, y.size)
    J = np.zeros((y.size,) + x.shape, dtype=np.result_type(x.dtype, y.dtype))
    for start in range(0, y.size, width):
        seeds = _basis(np.zeros_like(y), start, width)
        dxs = tuple(np.zeros_like(x) for _ in range(width))
        args = [Const(c) for c in _copies(consts)]
        ybuf = np.zeros_like(y)
        if width == 1:
            _autodiff(Reverse, pull, Const, Duplicated(ybuf, seeds[0]), f,
                      Duplicated(np.copy(x), dxs[0]), *args, numba=numba, memory_limit=memory_limit)
        else:
            _autodiff(Reverse, pull, Const, BatchDuplicated(ybuf, seeds), f,
                      BatchDuplicated(np.copy(x), dxs), *args, numba=numba, memory_limit=memory_limit)
        for lane, d in enumerate(dxs):
            if start + lane < y.size:
                J[start + lane] = d
    return J.reshape(y.shape + x.shape)


def _jacobian_scalar(mode: Mode, f: Callable, x: float, consts: tuple, numba: Any,
                     memory_limit: int | None = None) -> Any:
    """d f / d x for a float x: the tangent (forward) or, for a float result, the adjoint."""
    next_pass()
    y = _as_output(f(x, *_copies(consts)), "jacobian")
    args = [Const(c) for c in _copies(consts)]
    if mode.forward or not isinstance(y, float):
        (t,) = _autodiff(Forward, f, Duplicated, Duplicated(x, 1.0), *args, numba=numba)
        return float(t) if isinstance(y, float) else t  # a float, as reverse mode's
    (d,) = _autodiff(Reverse, f, Active, Active(x), *args, numba=numba, memory_limit=memory_limit)
    return d[0]


@in_one_call(lambda f=None, x=None, *consts, **kw: (f, (x, *consts)))
def gradient_forward(f: Callable, x: Any, *consts: Any, chunk: int | None = None, numba: Any = None) -> Any:
    """The gradient of scalar `f(x, *consts)` by batched forward mode."""
    g = jacobian(Forward, f, x, *consts, chunk=chunk, numba=numba)
    if np.ndim(g) != np.ndim(x):
        raise ZymoUsageError("gradient needs f to return a float; use jacobian for array results")
    return g


# -- second order: forward over reverse ---------------------------------------------------


def _reverse_program(f: Callable, x: np.ndarray, consts: Sequence[Any]) -> tuple:
    """The generated reverse-mode program of f at (x, *consts), as a plain Python function,
    with the values it takes after x and the internal shadows it takes after dx (of
    constant or captured memory that receives active data: constants of the outer call)."""
    dx = np.zeros_like(x)
    comp, norm, leaves, all_values = prepare(Reverse, f, Active, (Duplicated(x, dx), *map(Const, consts)),
                                             numba=False)
    shadows = call_shadows(comp, leaves, all_values)
    if not shadows or shadows[0] is not dx:  # f does not depend on x
        return None, all_values[1:], []
    return _second_order(comp), all_values[1:], shadows[1:]


def _second_order(comp: Any) -> _SecondOrder:
    """The reverse program `comp` as second order reads it, one per compiled program (its
    compile cache holds)."""
    second = comp.second_order
    if second is None:
        second = comp.second_order = _SecondOrder(comp)
    return second


# helpers the reverse program may call that the frontend inlines as plain Python: trip
# counts, roll's shift, SciPy's modules, users' custom rules (their functions are user code)
_INLINED_HELPERS = frozenset({"trip", "check_bound", "negate", "sp_special", "sp_linalg", "USER"})


class _SecondOrder:
    """The reverse program as second order reads it: `fn` is `comp.fn`, or a copy whose
    reshape shadows call `_rt.reshape_shadow` and whose kept tapes are left out (`_FreshTapes`);
    helpers without a rule are refused. `ir` is the user's function's (`_user_terms`)."""

    def __init__(self, comp: Any) -> None:
        _refuse_exception_flow(comp)
        _refuse_checkpoints(comp)
        self.fn, self.ir = comp.fn, comp.ir
        tree = ast.parse(comp.source)
        if "_rt.maybe_view_shadow(" in comp.source or _rewritten_for_second_order(comp.source):
            from .codegen.python import compile_source

            tree = ast.fix_missing_locations(_FreshTapes().visit(_ReshapeShadow().visit(tree)))
            self.fn = compile_source(ast.unparse(tree) + "\n", comp.name)
        _refuse_unruled(comp, tree)


def _rewritten_for_second_order(src: str) -> bool:
    """Whether `_FreshTapes` changes the reverse program `src`."""
    return "_rt.tape_take(" in src or "_rt.fp_raises()" in src


class _FreshTapes(ast.NodeTransformer):
    """The caches a call kept for the next (`_rt.tape_take`, `_rt.tape_keep`) left out: each
    `c = _rt.reuse_tape(c, size, dtype)` reads `c = np.empty(size, dtype)` again, a buffer
    second order differentiates as any other, and nothing is taken or kept. Also left out: the
    primal values nobody reads that the program computes only where NumPy's error state may
    raise (`if _rt.fp_raises(): ...`, `transform/reverse/dead.py`); a chain of them is several
    such blocks, whose names the frontend would find possibly undefined."""

    def visit_If(self, node: ast.If) -> ast.AST | None:
        if _rt_call(node.test, "fp_raises") and not node.orelse:
            return None
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST | None:
        return None if _rt_call(node.value, "tape_take") else self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        return None if _rt_call(node.value, "tape_keep") else node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if _rt_call(node, "reuse_tape") and len(node.args) == 3:
            return ast.Call(ast.Attribute(ast.Name("np", ast.Load()), "empty", ast.Load()), node.args[1:], [])
        return self.generic_visit(node)


def _rt_call(node: ast.AST, attr: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attr
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "_rt")


def _refuse_exception_flow(comp: Any) -> None:
    """A reverse program with a try's probes or `np.errstate` blocks (`frontend/checks.py`) is
    not differentiated again: the probes are Python calls with no tangent rule, and the error
    state is set around statements second order would have to lower too."""
    from .ir.core import walk

    for op in walk(comp.ir.body):
        key = op.attrs.get("key", "") if op.kind == "prim" else ""
        if key.startswith(("zymo.try.", "zymo.errstate.")):
            what = "try/except" if key.startswith("zymo.try.") else "with np.errstate(...)"
            raise UnsupportedSyntax(
                f"second derivatives (zymo.hvp, zymo.hessian) through {what} are not supported yet", op.loc,
                why="zymo differentiates its own reverse program, which finds the path a try takes, or sets "
                    "NumPy's error state, with calls that have no tangent rule",
                hint="move the try/with out of the function you take second derivatives of, or use "
                     "finite differences of zymo.gradient meanwhile")


def _refuse_checkpoints(comp: Any) -> None:
    """A reverse program whose loops are checkpointed (`zymo.checkpointed`, `memory_limit=`) is a
    driver of `runtime/checkpoint.py`'s schedules, which second order cannot differentiate: said
    at the loop, where it was an `import` refused in zymo's own generated code (helper 79)."""
    from .ir.core import walk

    if "from zymo.runtime import checkpoint" not in comp.source:
        return
    marked = [op for op in walk(comp.ir.body) if "checkpoint" in op.attrs]
    raise UnsupportedSyntax(
        "second derivatives (zymo.hvp, zymo.hessian) through a checkpointed loop are not supported yet",
        marked[0].loc if marked else None,
        why="zymo differentiates its own reverse program, and a checkpointed loop's is a driver of "
            "zymo's checkpoint schedules (recomputing the loop from snapshots), not code it can differentiate",
        hint="pass memory_limit= to zymo.hvp or zymo.hessian (reverse over forward mode, which checkpoints the "
             "loop), or take second derivatives of the function without zymo.checkpointed")


def _rt_calls(tree: ast.AST) -> set[str]:
    return {n.attr for n in pyast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "_rt"}


def _refuse_unruled(comp: Any, tree: ast.AST) -> None:
    from . import runtime as _rt
    from .ir.core import walk
    from .rules import REGISTRY, rule_for_callable

    missing = sorted(h for h in _rt_calls(tree) - _INLINED_HELPERS
                     if rule_for_callable(getattr(_rt, h, None)) is None)
    if not missing:
        return
    users = [op for op in walk(comp.ir.body) if op.kind == "prim" and _uses_helper(REGISTRY[op.attrs["key"]], missing)]
    key = users[0].attrs["key"] if users else "a function"
    raise UnsupportedCall(
        f"second derivatives (zymo.hvp, zymo.hessian) through {key} are not supported yet",
        users[0].loc if users else None,
        why=f"zymo differentiates its own reverse program, whose adjoint of {key} calls "
            f"{', '.join('_rt.' + h for h in missing)}: "
            f"{'helpers' if len(missing) > 1 else 'a helper'} without a tangent rule",
        hint="see docs/rules.md ('Second order') for the functions that support it; use "
             "finite differences of zymo.gradient meanwhile")


def _uses_helper(rule: Any, helpers: list[str]) -> bool:
    if rule.call and rule.call.startswith("_rt.") and rule.call[4:] in helpers:
        return True
    if rule.template and any(f"_rt.{h}(" in rule.template for h in helpers):
        return True  # the primal itself calls it (`numpy.imag`: `_rt.imag_copy({0})`)
    try:
        bodies = [inspect.getsource(f) for f in rule.vjps().values()]
    except (OSError, TypeError):
        return False
    return any(f"_rt.{h}(" in b for b in bodies for h in helpers)


@contextlib.contextmanager
def _user_terms(ir: Any) -> Iterator[None]:
    """A refusal met while second order reads zymo's own code (the generated program it
    differentiates, or a runtime helper) said at the user's construct it comes from, not at a
    line of zymo's: the checks above refuse what is known beforehand, this what is not."""
    try:
        yield
    except ZymoSourceError as e:
        # Numba's and the checkpointer's errors say what they are about (and are not refusals of a construct)
        if type(e) not in (ZymoSourceError, UnsupportedSyntax, UnsupportedCall, ZymoTypeError) or \
                not _zymo_code(e.loc.file):
            raise
        op = _user_op(ir, e)
        what = op.attrs["key"] if op is not None and op.kind == "prim" else f"the function {ir.name}"
        text = linecache.getline(e.loc.file, e.loc.line).strip()
        raise type(e)(
            f"second derivatives (zymo.hvp, zymo.hessian) through {what} are not supported yet",
            op.loc if op is not None else ir.loc,
            why=f"zymo differentiates its own derivative program of {ir.name}; reading it, at `{text}`, it "
                f"refused: {e.message}" + (f" ({e.why})" if e.why else ""),
            hint="use finite differences of zymo.gradient meanwhile, or rewrite that construct; "
                 "see docs/rules.md ('Second order')") from e


def _zymo_code(file: str) -> bool:
    """Whether `file` is zymo's: a generated program (`codegen.python.compile_source`) or a module."""
    import os

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    return file.startswith("<zymo ") or os.path.abspath(file).startswith(package)


def _user_op(ir: Any, e: ZymoSourceError) -> Any:
    """The op of the user's function that zymo's code refused at `e.loc` most likely comes from:
    the first whose rule's code calls the refused call's function, among the ops with complex
    values where the refusal is about complex numbers; else the first op with complex values
    there; else None."""
    from .ir import types as T
    from .ir.core import walk
    from .rules import REGISTRY

    line = linecache.getline(e.loc.file, e.loc.line)
    indent = len(line) - len(line.lstrip())
    calls = []  # `_rt.fdiv(`, `np.real(`: the call at the refusal's column first
    try:
        for n in pyast.walk(ast.parse(line.strip())):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name):
                calls.append((n.col_offset != e.loc.col - indent, f"{n.func.value.id}.{n.func.attr}("))
    except SyntaxError:
        pass
    called = min(calls)[1] if calls else ""
    ops = [op for op in walk(ir.body) if op.kind == "prim" and op.attrs.get("key") in REGISTRY]
    if "complex" in e.message:
        ops = [op for op in ops if any(T.is_complex(v.type) for v in (*op.args, *op.results))]
    for op in ops:
        rule = REGISTRY[op.attrs["key"]]
        try:
            bodies = [inspect.getsource(f) for f in (*rule.vjps().values(), *rule.jvps().values())]
        except (OSError, TypeError):
            bodies = []
        # a division or power in a rule of numbers is written `_rt.fdiv`/`_rt.fpow` (`emit.IEEEDivisions`)
        needles = [called, *{"_rt.fdiv(": [" / "], "_rt.fpow(": [" ** "]}.get(called, [])]
        if called and any(n in t for t in (rule.call and rule.call + "(", rule.template, *bodies) if t
                          for n in needles):
            return op
    return ops[0] if ops and "complex" in e.message else None


class _ReshapeShadow(ast.NodeTransformer):
    """`_rt.maybe_view_shadow(u, x, du, dx, True)` -> `_rt.reshape_shadow(du, u, x, dx)`."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "maybe_view_shadow" and len(node.args) == 5 \
                and isinstance(f.value, ast.Name) and f.value.id == "_rt":
            u, x, du, dx, _zero = node.args
            return ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), "reshape_shadow", ast.Load()),
                            [du, u, x, dx], [])
        return node


def _over_reverse(comp, x, rest, internal, xs, gs, numba, grad=None) -> None:
    """Forward mode over the reverse program: `xs`/`gs` hold x's tangents and receive the
    tangents of x's adjoint (one of each, or one per batch lane); `grad`, when given,
    receives the gradient itself (the program's primal result)."""
    if comp is None:
        return
    consts = [*map(Const, _copies(rest))]
    inner = [Const(make_zero(s)) for s in internal]
    g = np.zeros_like(x) if grad is None else grad
    with _user_terms(comp.ir):
        if len(xs) == 1:
            _autodiff(Forward, comp.fn, Const, Duplicated(np.copy(x), xs[0]), *consts,
                      Duplicated(g, gs[0]), *inner, Const(1.0), numba=numba)
        else:
            _autodiff(Forward, comp.fn, Const, BatchDuplicated(np.copy(x), xs), *consts,
                      BatchDuplicated(g, gs), *inner, Const(1.0), numba=numba)


@in_one_call(lambda f=None, x=None, v=None, *consts, **kw: (f, (x, *consts)))
def hvp_and_gradient(f: Callable, x: Any, v: Any, *consts: Any, numba: Any = None,
                     memory_limit: int | None = None) -> tuple:
    """(H(x) v, grad f(x)) for scalar `f`: one forward-mode call over the reverse program.

    Under a memory limit (`memory_limit=`, or `config.set_memory_limit`) it is reverse mode over
    zymo's forward-mode program instead (`_hvp_limited`): that reverse pass checkpoints its loops."""
    consts = _constants(consts)
    x = _check_x(x, "hvp")
    limit = config.call_memory_limit(memory_limit)
    if isinstance(x, float):
        if limit is not None:
            raise ZymoUsageError("hvp with memory_limit takes an array x; a float x stores one number per loop "
                                 "iteration at most")
        return _scalar_second(f, x, consts, numba, float(v))
    v = np.array(v, dtype=x.dtype)  # a copy: the program writes tangents of what f overwrites
    if v.shape != x.shape:
        raise ZymoUsageError(f"hvp: v has shape {v.shape}, x has shape {x.shape}")
    if limit is not None:
        return _hvp_limited(f, x, v, consts, numba, limit)
    comp, rest, internal = _reverse_program(f, np.copy(x), _copies(consts))
    hv, g = np.zeros_like(x), np.zeros_like(x)
    _over_reverse(comp, x, rest, internal, (v,), (hv,), numba, g)
    return hv, g


def hvp(f: Callable, x: Any, v: Any, *consts: Any, numba: Any = None, memory_limit: int | None = None) -> Any:
    """The Hessian of scalar `f` at `x` times `v` (forward over reverse; under a memory limit,
    reverse over forward)."""
    return hvp_and_gradient(f, x, v, *consts, numba=numba, memory_limit=memory_limit)[0]


def _dir1(fn, x, a1):
    return fn(x, a1)[1][0]


def _dir2(fn, x, a1, a2):
    return fn(x, a1, a2)[1][0]


def _dir3(fn, x, a1, a2, a3):
    return fn(x, a1, a2, a3)[1][0]


def _dir4(fn, x, a1, a2, a3, a4):
    return fn(x, a1, a2, a3, a4)[1][0]


def _dir5(fn, x, a1, a2, a3, a4, a5):
    return fn(x, a1, a2, a3, a4, a5)[1][0]


def _dir6(fn, x, a1, a2, a3, a4, a5, a6):
    return fn(x, a1, a2, a3, a4, a5, a6)[1][0]


_DIR = [None, _dir1, _dir2, _dir3, _dir4, _dir5, _dir6]


def _hvp_limited(f: Callable, x: np.ndarray, v: np.ndarray, consts: tuple, numba: Any, limit: int) -> tuple:
    """(H(x) v, grad f(x)) under `limit` bytes: the gradient of the directional derivative
    `f'(x) v`, by reverse mode (with `memory_limit`) over zymo's forward-mode program of `f`,
    and the gradient by a reverse pass of its own under the same limit."""
    g = np.zeros_like(x)
    _autodiff(Reverse, f, Active, Duplicated(np.copy(x), g), *map(Const, _copies(consts)), numba=numba,
              memory_limit=limit)
    comp, _, leaves, values = prepare(Forward, f, Duplicated, (Duplicated(np.copy(x), np.copy(v)),
                                                                *map(Const, _copies(consts))), numba=False)
    shadows = call_shadows(comp, leaves, values)
    hv = np.zeros_like(x)
    if not shadows:  # f does not depend on x
        return hv, g
    rest = [*values[1:], v, *(make_zero(s) for s in shadows[1:])]
    if len(rest) >= len(_DIR):
        raise ZymoUsageError(f"hvp with memory_limit takes at most {len(_DIR) - 2} constant arguments; "
                             "pack them in a tuple")
    with _user_terms(comp.ir):
        _autodiff(Reverse, _DIR[len(rest)], Active, comp.fn, Duplicated(np.copy(x), hv), *map(Const, _copies(rest)),
                  numba=numba, memory_limit=limit)
    return hv, g


@in_one_call(lambda f=None, x=None, *consts, **kw: (f, (x, *consts)))
def hessian(f: Callable, x: Any, *consts: Any, chunk: int | None = None, numba: Any = None,
            sparse: bool = False, detect: str = "auto", memory_limit: int | None = None) -> Any:
    """The Hessian of scalar `f` at `x`, shaped `x.shape + x.shape`: batched hvps with basis
    vectors, `chunk` lanes per call.

    Under a memory limit (`memory_limit=`, or `config.set_memory_limit`) each column is an hvp
    under that limit (`_hvp_limited`: reverse mode, checkpointed, over the forward-mode program),
    one basis vector at a time (`chunk` is ignored).

    `sparse=True` returns a `scipy.sparse.csr_matrix` of shape `(x.size, x.size)`: the pattern
    is detected from zymo's IR, star-colored, and one hvp lane per color computes it;
    `detect` as for `jacobian` (a local pattern is valid only for inputs taking the same
    branches). See `zymo/sparse/`."""
    consts = _constants(consts)
    if sparse:
        if memory_limit is not None:
            raise ZymoUsageError("hessian(..., sparse=True) takes no memory_limit yet; use the dense hessian")
        from .sparse.drivers import sparse_hessian

        return sparse_hessian(f, x, consts, detect, chunk, numba)
    x = _check_x(x, "hessian")
    limit = config.call_memory_limit(memory_limit)
    if isinstance(x, float):
        if limit is not None:
            raise ZymoUsageError("hessian with memory_limit takes an array x; a float x stores one number per "
                                 "loop iteration at most")
        return _scalar_second(f, x, consts, numba, 1.0)[0]
    if limit is not None:
        H = np.stack([_hvp_limited(f, x, e, consts, numba, limit)[0] for e in _basis(x, 0, x.size)])
        return np.moveaxis(H.reshape(x.shape + x.shape), tuple(range(x.ndim)), tuple(range(x.ndim, 2 * x.ndim)))
    comp, rest, internal = _reverse_program(f, np.copy(x), _copies(consts))
    width = _chunk(chunk, x.size)
    H = np.zeros((x.size,) + x.shape, dtype=x.dtype)
    for start in range(0, x.size, width):
        ts = _basis(x, start, width)
        hs = tuple(np.zeros_like(x) for _ in range(width))
        _over_reverse(comp, x, rest, internal, ts, hs, numba)
        for lane, h in enumerate(hs):
            if start + lane < x.size:
                H[start + lane] = h
    # row j holds H e_j = the j-th column; H is symmetric, return it as [i, j] = d2f/dxi dxj
    return np.moveaxis(H.reshape(x.shape + x.shape), tuple(range(x.ndim)), tuple(range(x.ndim, 2 * x.ndim)))


def _scalar_second(f: Callable, x: float, consts: tuple, numba: Any, v: float) -> tuple:
    """(f''(x) v, f'(x)) for a float x: forward mode over the reverse program's Active adjoint."""
    comp, norm, leaves, values = prepare(Reverse, f, Active, (Active(x), *map(Const, _copies(consts))),
                                         numba=False)
    if comp.active_params != [0]:
        if not comp.active_params:  # f does not depend on x
            return 0.0, 0.0
        raise ZymoUsageError("second derivative: f writes active data into memory it does not own")
    second = _second_order(comp)  # refusals at the user's line, as for an array x (`_SecondOrder`)
    with _user_terms(second.ir):
        tan, prim = _autodiff(ForwardWithPrimal, second.fn, Duplicated, Duplicated(x, v),
                              *map(Const, _copies(values[1:])), Const(1.0), numba=numba)
    # the program returns ((results,), (dx,))
    return float(tan[1][0]), float(prim[1][0])


def _autodiff(mode: Mode, f: Any, ret_activity: Any, *args: Any, numba: Any = None,
              memory_limit: int | None = None) -> Any:
    """`zymo.autodiff` (`cache.call`: this module sits below the public API), one pass of an
    operator (`draws.next_pass`: a zymo call a custom rule makes inside it is not one)."""
    next_pass()
    return call(mode, f, ret_activity, args, numba, memory_limit)
