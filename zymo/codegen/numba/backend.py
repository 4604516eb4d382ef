"""The Numba backend: generated derivative source compiled with `numba.njit`, cached on disk.

Contract: `compile_numba(src, names, what, facts)` returns a list whose entries
(one per name) are Numba dispatchers of the functions `src` defines, with `np` bound to
`numba_np` and `_rt` to `numba_rt` (after two rewrites that write loops in place, `numba_source`),
and the names the transform says hold only ints declared `intp`, compiled by the pipeline of
`numba_pipeline` (Numba's own, without SSA reconstruction where that types the program the same).
The source is written once to a module file named by a hash of the source, of zymo's runtime and
shim sources and of the Python, NumPy and Numba versions, under `cache_dir()` (`ZYMO_CACHE_DIR`,
else `~/.cache/zymo`); the dispatchers use Numba's `cache=True`, so a second process that generates the same source
loads the machine code from disk instead of compiling. A changed user function generates
different source, hence a different file: a stale entry can never be reused. When the
directory cannot be written the program is compiled in memory only.
Numba's cache index is not safe for concurrent writers: two processes that compile one
module for two signatures at once may both store their code under the same data file, and
a later load takes whichever was written last, for either signature (wrong machine code,
wrong numbers). Every compile of a dispatcher (its `_compile_for_args`: cache load,
compile, cache save) therefore holds an exclusive lock on `<module>.lock` (`fcntl.flock`;
where that is missing, as on Windows, nothing is locked).
Numba also names the machine code of each compiled function (an array expression's kernel
included) by its qualified name, which for array expressions holds an object address, and a
per-process counter. Two processes compiling two different modules can produce the same
name, and a process that then loads both from the cache links the second module's calls to
the first one's kernel (wrong numbers). Before each compile the counter is moved forward by a
random amount (`_fresh_numba_ids`), so names from different processes do not meet.

`explain(exc, primal, args)` turns a Numba compile failure into a `ZymoNumbaError`:
when Numba cannot compile the primal itself the error names the user's file, line and
construct (from Numba's own diagnosis of the primal); otherwise it names the line of
generated code Numba refused.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import Loc, ZymoSourceError
from ..transform.emit import IEEEDivisions, zero_divisor
from ..transform.emit import rt_call as _rt_call
from .python import paused_collector

_HEADER = '''"""zymo: {what}. Generated code; the file name is the hash of its contents."""
import math

import numba

from zymo.codegen import numba_np as np
from zymo.codegen import numba_rt as _rt
from zymo.codegen import numba_indexing as _numba_indexing  # noqa: F401  (registers overloads)
from zymo.codegen.numba_pipeline import Compiler

'''


@contextlib.contextmanager
def quick_compile():
    """Compile generated code with Numba's short slice-assignment error message.

    Numba lowers every array-to-slice assignment (`out[:n] = buf`, a stacked cache's
    `_cache[k] = row`) with a shape-mismatch error whose CPU message formats both shapes
    as strings; compiling that formatter costs about 1.8 s per pair of ranks, the largest
    single item of a derivative's first compile. While this context is active the
    generic-target message ("cannot assign slice from input of different size") is used
    instead: the error is still raised on a mismatch, only its text is shorter. Numba's
    messages are also built without colours meanwhile (`_plain_messages`). The swaps are
    scoped to zymo's own first calls, so the user's `njit` code keeps Numba's messages.
    Python's cyclic garbage collector is paused meanwhile (`python.paused_collector`).
    """
    from numba.core import errors
    from numba.np import arrayobj

    from .numba_rt import raise_shape_mismatch

    with _QUICK_LOCK:  # nested or concurrent uses: the first one in swaps, the last one out restores
        if not _QUICK:
            _QUICK.append((arrayobj.raise_with_shape_context, errors._termcolor_inst))
            arrayobj.raise_with_shape_context = raise_shape_mismatch
            errors._termcolor_inst = _plain_messages()
        _QUICK.append(None)
    try:
        with paused_collector():
            yield
    finally:
        with _QUICK_LOCK:
            _QUICK.pop()
            if len(_QUICK) == 1:
                arrayobj.raise_with_shape_context, errors._termcolor_inst = _QUICK.pop()


def _plain_messages():
    """Numba's error-message markup without colours. Numba's typing builds a message for each
    overload it tries and rejects (thousands per derivative); with colorama installed, each
    is marked up through colorama's `init`/`deinit` of the terminal, about 0.1 s of a
    `lorenz_rk4` first compile. zymo reports its own errors, so its compiles skip that."""
    from numba.core import errors

    class Plain(errors._DummyColorScheme):
        def _same(self, msg):
            return msg

        code = errmsg = filename = indicate = highlight = reset = _same
    return Plain()


_QUICK: list = []  # [Numba's own (function, colour scheme), then one entry per active quick_compile]
_QUICK_LOCK = threading.Lock()


class ZymoNumbaError(ZymoSourceError):
    """Numba cannot compile a derivative (or the primal it comes from)."""


def cache_dir() -> Path:
    return Path(os.environ.get("ZYMO_CACHE_DIR") or Path.home() / ".cache" / "zymo")


def _stamp() -> str:
    """What else the generated module's behaviour depends on: zymo's runtime and versions."""
    import numba
    import numpy

    h = hashlib.sha256()
    # every Numba shim, intrinsic and pass (codegen/numba*.py) and every runtime module generated
    # code calls (zymo/runtime/*.py), found by name so that a new one is not missed
    here = Path(__file__).resolve().parent
    runtime = here.parent.parent / "runtime"
    for path in sorted(here.glob("numba*.py")) + sorted(runtime.glob("*.py")):
        h.update(path.read_bytes())
    h.update(Path(__file__).read_bytes())  # how modules are written, locked and named
    h.update(f"{sys.version}|{numpy.__version__}|{numba.__version__}".encode())
    return h.hexdigest()


_STAMP: list[str] = []


_PRODUCT_VJPS = {"dot_vjp_a", "dot_vjp_b", "matmul_vjp_a", "matmul_vjp_b"}


def _alone(node: ast.stmt, lines: list[str]) -> bool:
    """Whether statement `node` is the only one on its line (a comment may follow)."""
    if node.lineno != node.end_lineno:
        return False
    line = lines[node.lineno - 1]
    rest = _after(line, node.end_col_offset).strip()
    return not _before(line, node.col_offset).strip() and (not rest or rest.startswith("#"))


def accumulating_products(src: str) -> str:
    """`d += _rt.dot_vjp_a(g, a, b)` (and `dot_vjp_b`, `matmul_vjp_*`) with a plain name `d`
    becomes `d = _rt.acc_dot_vjp_a(d, g, a, b)`, which adds the product into `d` in place (one
    BLAS call with beta = 1, or a loop) instead of allocating it first; for a float `d` it
    returns the sum, as `+=` rebinds. One of the two rewrites (`numba_source`) by which the
    source Numba compiles differs from the one the Python backend runs."""
    lines = src.split("\n")
    for node in ast.walk(ast.parse(src)):
        if not (isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add)
                and isinstance(node.target, ast.Name) and isinstance(node.value, ast.Call)):
            continue
        f = node.value.func
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
                and f.attr in _PRODUCT_VJPS and len(node.value.args) == 3 and not node.value.keywords
                and _alone(node, lines)):
            d = node.target.id
            args = ", ".join(ast.unparse(a) for a in node.value.args)
            line = lines[node.lineno - 1]
            lines[node.lineno - 1] = _splice(line, node.col_offset, node.end_col_offset,
                                             f"{d} = _rt.acc_{f.attr}({d}, {args})")
    return "\n".join(lines)


_EW_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)
# NumPy's ufuncs of one operand that Numba lowers for one number (its own ufunc loops' code)
_EW_FUNCS = ("exp", "log", "tanh", "sin", "cos", "sqrt", "exp2", "expm1", "log2", "log10", "log1p", "tan", "sinh",
             "cosh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "cbrt", "sign", "absolute", "abs",
             "fabs", "floor", "ceil", "trunc", "rint", "square", "reciprocal", "deg2rad", "rad2deg", "degrees",
             "radians", "negative", "positive")
# the same, giving a bool (`numba_elementwise._MASKS`, which cannot import this module)
_EW_MASKS = ("logical_not", "isnan", "isinf", "isfinite", "signbit")
_EW_BINARY = ("maximum", "minimum", "fmax", "fmin", "arctan2", "hypot", "logaddexp", "logaddexp2", "copysign",
              "power", "float_power", "fmod", "remainder", "mod", "nextafter")  # and of two operands
_EW_COMPARE = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
_EW_LOGIC = (ast.BitOr, ast.BitAnd)
# ufuncs called with `out=` as statements: the elementwise expression each computes
_EW_UFUNCS = {"add": ast.Add, "subtract": ast.Sub, "multiply": ast.Mult, "divide": ast.Div, "true_divide": ast.Div}


def _np_call(e: ast.expr, names) -> bool:
    f = e.func if isinstance(e, ast.Call) else None
    return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "np"
            and f.attr in names)


def _plain_index(e: ast.expr) -> bool:
    """An index of names, numbers and slices of them (nothing to call or compute twice)."""
    if isinstance(e, ast.Tuple):
        return all(_plain_index(x) for x in e.elts)
    if isinstance(e, ast.Slice):
        return all(x is None or _plain_index(x) for x in (e.lower, e.upper, e.step))
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return isinstance(e.operand, ast.Constant)
    return isinstance(e, ast.Name) or isinstance(e, ast.Constant) and type(e.value) is int


def _operand(e: ast.expr) -> bool:
    """A name, or a name indexed by a plain index (`x[i]`, `r[:, :, 0]`): one operand."""
    return isinstance(e, ast.Name) or (isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name)
                                       and _plain_index(e.slice))


# zymo's helpers that return a new value and write nothing: one operand of an elementwise
# expression each (computed before the loops, as NumPy computes it before the expression)
_PURE_RT = frozenset({"unbroadcast", "expand_reduced", "clip_inside", "matmul_vjp_a", "matmul_vjp_b", "norm_grad",
                      "norm_grad_dx", "cholesky_jvp", "cholesky_vjp", "cholesky_vjp_dl"})


def _opaque(e: ast.expr) -> bool:
    """A product `a @ b`, `np.zeros_like(x)` or a call of a pure helper (`_PURE_RT`), its
    arguments plain or elementwise: an operand the intrinsics read, not write into their loops."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.MatMult):
        return _elementwise(e.left) and _elementwise(e.right)
    if _np_call(e, ("zeros_like",)) and len(e.args) == 1 and not e.keywords:
        return _operand(e.args[0])
    f = e.func if isinstance(e, ast.Call) else None
    return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
            and f.attr in _PURE_RT and not e.keywords and all(
                _elementwise(a) or isinstance(a, ast.Constant) for a in e.args))


def _leaf(e: ast.expr) -> bool:
    return _operand(e) or _opaque(e)


def _elementwise(e: ast.expr) -> bool:
    """Whether `e` is built of operands (`_leaf`: `_operand`, `_opaque`) and numbers by
    `+ - * /`, powers (`** 2` a square, any other Numba's power of numbers), unary `-` (`+`),
    NumPy's functions of one operand (`_EW_FUNCS`: `exp`, `sign`, `arctan`, ...) and of two
    (`_EW_BINARY`: `maximum`, ...),
    `_rt.as_shape`/`as_tangent` (`_rt_as_shape`) and masks: one comparison (`a > b`), `|` and
    `&`, `_EW_MASKS` (`np.logical_not`, `np.isnan`, ...) and `np.where(c, a, b)` (the
    intrinsics check the types: a bool takes part in arithmetic with a float only)."""
    if _leaf(e):
        return True
    if isinstance(e, ast.Constant):
        return type(e.value) in (int, float)
    if isinstance(e, ast.BinOp):
        return isinstance(e.op, _EW_OPS + _EW_LOGIC + (ast.Pow,)) and _elementwise(e.left) and _elementwise(e.right)
    if isinstance(e, ast.UnaryOp):
        return isinstance(e.op, (ast.USub, ast.UAdd)) and _elementwise(e.operand)
    if isinstance(e, ast.Compare):
        return (len(e.ops) == 1 and isinstance(e.ops[0], _EW_COMPARE) and _elementwise(e.left)
                and _elementwise(e.comparators[0]))
    if isinstance(e, ast.Call):
        if _rt_as_shape(e):
            return _elementwise(e.args[0])
        if _np_call(e, ("where",)):
            return len(e.args) == 3 and not e.keywords and all(_elementwise(a) for a in e.args)
        if _np_call(e, _EW_BINARY):
            return len(e.args) == 2 and not e.keywords and all(_elementwise(a) for a in e.args)
        return (_np_call(e, _EW_FUNCS + _EW_MASKS) and len(e.args) == 1 and not e.keywords
                and _elementwise(e.args[0]))
    return False


def _boolean(e: ast.expr) -> bool:
    """A mask at the top of `e` (a comparison, `|`, `&`, one of `_EW_MASKS`): a bool array,
    which the intrinsics do not make (Numba's array expression does)."""
    return (isinstance(e, ast.Compare) or isinstance(e, ast.BinOp) and isinstance(e.op, _EW_LOGIC)
            or _np_call(e, _EW_MASKS))


def _rt_as_shape(e: ast.expr) -> bool:
    """`_rt.as_shape(e, y)` (or `as_tangent`), `y` a name: a tangent `e` with `y`'s shape and
    dtype. Under Numba the two are one (a new array); inside an elementwise expression, `e`
    cast to `y`'s dtype, with `y`'s shape taking part in the broadcast. Forward mode writes it
    around each tangent of an array, and forward over reverse nests it: an array expression
    each, which Numba compiled as a kernel of its own (16 s for the Hessian of a three-line
    program, 5 s now)."""
    f = e.func if isinstance(e, ast.Call) else None
    return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
            and f.attr in ("as_shape", "as_tangent") and len(e.args) == 2 and not e.keywords
            and isinstance(e.args[1], ast.Name))


def _ufunc_out(node: ast.stmt) -> tuple[ast.expr, str, ast.Call] | None:
    """For a statement `np.<ufunc>(a, b, out=d)` (`_EW_UFUNCS`, `negative`, `_EW_FUNCS` or
    `_EW_BINARY`, the operands elementwise, `d` a name): `(e, d, call)`, `e` the expression it
    computes."""
    call = node.value if isinstance(node, ast.Expr) else None
    if not (isinstance(call, ast.Call) and len(call.keywords) == 1 and call.keywords[0].arg == "out"
            and isinstance(call.keywords[0].value, ast.Name) and all(_elementwise(a) for a in call.args)):
        return None
    d = call.keywords[0].value.id
    if _np_call(call, _EW_UFUNCS) and len(call.args) == 2:
        return ast.BinOp(call.args[0], _EW_UFUNCS[call.func.attr](), call.args[1]), d, call
    if _np_call(call, ("negative",)) and len(call.args) == 1:
        return ast.UnaryOp(ast.USub(), call.args[0]), d, call
    if _np_call(call, _EW_FUNCS) and len(call.args) == 1 or _np_call(call, _EW_BINARY) and len(call.args) == 2:
        return ast.Call(call.func, list(call.args), []), d, call
    return None


def _compound(e: ast.expr) -> bool:
    return _elementwise(e) and not isinstance(e, ast.Constant) and not _leaf(e) and not _boolean(e)


def _inner(e: ast.expr) -> ast.expr:
    """An argument of an opaque operand, its own elementwise expression an intrinsic too:
    `_rt.as_shape(e, y)` -> `_rt.ew_like(y, ...)`, a compound `e` -> `_rt.ew_new(...)`."""
    if _rt_as_shape(e) and (_compound(e.args[0]) or _leaf(e.args[0])):
        text, xs = _ew_args(e.args[0])
        return _rt_call("ew_like", e.args[1], ast.Constant(text), xs)
    if _compound(e):
        text, xs = _ew_args(e)
        if xs.elts:
            return _rt_call("ew_new", ast.Constant(text), xs)
    return e


def _ew_args(e: ast.expr, call: ast.Call | None = None) -> tuple[str, ast.Tuple] | tuple[str, ast.Tuple, str]:
    """`e` over the names `x<i>` of its operands (`_leaf`, numbered by first appearance;
    `np` of a call is not one) and the tuple of the operands (an opaque one with its own
    elementwise arguments rewritten, `_inner`); with `call` (`_ufunc_out`), also `call` over
    them."""
    e = ast.parse(ast.unparse(e), mode="eval")
    inside = {id(m) for n in ast.walk(e) if isinstance(n, ast.Subscript) or _opaque(n)
              for m in ast.walk(n) if m is not n}
    functions = {id(n.func.value) for n in ast.walk(e) if isinstance(n, ast.Call)}
    operands = [n for n in ast.walk(e) if (_operand(n) or _opaque(n)) and id(n) not in inside
                and id(n) not in functions]
    names: list[str] = []
    for n in sorted(operands, key=lambda n: (n.lineno, n.col_offset)):
        if ast.unparse(n) not in names:
            names.append(ast.unparse(n))

    class _Rename(ast.NodeTransformer):
        def visit_Call(self, n: ast.Call) -> ast.Call:
            n.args = [self.visit(a) for a in n.args]
            for k in n.keywords:
                k.value = ast.Name("d", ast.Load()) if k.arg == "out" else self.visit(k.value)
            return n

        def visit_Name(self, n: ast.Name) -> ast.Name:
            return ast.Name(f"x{names.index(n.id)}", ast.Load())

        def visit_Subscript(self, n: ast.Subscript) -> ast.Name:
            return ast.Name(f"x{names.index(ast.unparse(n))}", ast.Load())

        def visit(self, n: ast.AST) -> ast.AST:
            if isinstance(n, ast.expr) and _opaque(n):
                return ast.Name(f"x{names.index(ast.unparse(n))}", ast.Load())
            return super().visit(n)

    text = ast.unparse(_Rename().visit(e))

    def operand(text: str) -> ast.expr:
        n = ast.parse(text, mode="eval").body
        if isinstance(n, ast.Call):
            n.args = [_inner(a) for a in n.args]
        elif isinstance(n, ast.BinOp):
            n.left, n.right = _inner(n.left), _inner(n.right)
        return n
    xs = ast.Tuple([operand(n) for n in names], ast.Load())
    if call is None:
        return text, xs
    return text, xs, ast.unparse(_Rename().visit(ast.parse(ast.unparse(call), mode="eval")))


_EXTREMES = {"max": "ew_max", "amax": "ew_max", "min": "ew_min", "amin": "ew_min"}


class _Calls(ast.NodeTransformer):
    """Calls in any statement that become intrinsics (Numba's own functions cost 0.1-0.5 s of
    compile per signature each):
    - `np.sum(e)` (or `np.sum(e, axis=None, keepdims=False)`), `e` a compound elementwise
      expression or an operand, -> `_rt.ew_sum("...", (...))` (Numba's `np.sum` also adds in C
      order);
    - `np.max(x)` (`amax`, `min`, `amin`) of an operand -> `_rt.ew_max(x)` (`numba_inline`);
    - `np.zeros(shape[, dtype])`, `np.empty(...)`, positional -> `_rt.zeros(shape, dtype)`."""

    changed = False

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if _np_call(node, ("sum",)) and [(k.arg, ast.unparse(k.value)) for k in node.keywords] == [
                ("axis", "None"), ("keepdims", "False")]:  # a reduction's rule writes them out
            node = ast.Call(node.func, node.args, [])
        if node.keywords:
            return node
        if _np_call(node, ("sum",)) and len(node.args) == 1 and (
                _compound(node.args[0]) or _operand(node.args[0])):
            text, xs = _ew_args(node.args[0])
            self.changed = True
            return _rt_call("ew_sum", ast.Constant(text), xs)
        if _np_call(node, _EXTREMES) and len(node.args) == 1 and _operand(node.args[0]):
            self.changed = True
            return _rt_call(_EXTREMES[node.func.attr], node.args[0])
        if _np_call(node, ("zeros", "empty")) and len(node.args) in (1, 2):
            dtype = node.args[1] if len(node.args) == 2 else ast.Attribute(ast.Name("np", ast.Load()), "float64",
                                                                           ast.Load())
            self.changed = True
            return _rt_call(node.func.attr, node.args[0], dtype)
        return node


def _max_adjoint(node: ast.stmt) -> ast.stmt | None:
    """`d += _rt.expand_reduced(g, x, None, False) * _rt.extreme_mask(x, ans, None, False)`
    (`np.max`'s adjoint; names, `g` also a number) -> `d = _rt.acc_extreme(d, g, x, ans)`."""
    e = node.value if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) else None
    if not (isinstance(node.target, ast.Name) and isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult)):
        return None

    def rt_args(call, fn):
        f = call.func if isinstance(call, ast.Call) else None
        ok = (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt" and f.attr == fn
              and not call.keywords and len(call.args) == 4 and ast.unparse(call.args[2]) == "None"
              and ast.unparse(call.args[3]) == "False")
        return call.args[:2] if ok else None
    expand, mask = rt_args(e.left, "expand_reduced"), rt_args(e.right, "extreme_mask")
    if expand is None or mask is None:
        return None
    (g, x), (x2, ans) = expand, mask
    if not (isinstance(g, (ast.Name, ast.Constant)) and isinstance(x, ast.Name) and isinstance(ans, ast.Name)
            and ast.unparse(x) == ast.unparse(x2)):
        return None
    d = node.target.id
    return ast.Assign([ast.Name(d, ast.Store())], _rt_call("acc_extreme", ast.Name(d, ast.Load()), g, x, ans))


def _unbroadcast(node: ast.stmt) -> ast.stmt | None:
    """`d += _rt.unbroadcast(e, x)` (`d`, `x` names, `e` elementwise) ->
    `d = _rt.acc_unbroadcast(d, x, "...", (...))`, or None."""
    call = node.value if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) else None
    f = call.func if isinstance(call, ast.Call) else None
    if not (isinstance(node.target, ast.Name) and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "_rt" and f.attr == "unbroadcast" and len(call.args) == 2 and not call.keywords
            and _elementwise(call.args[0]) and isinstance(call.args[1], ast.Name)):
        return None
    text, xs = _ew_args(call.args[0])
    if not xs.elts:
        return None
    d = node.target.id
    return ast.Assign([ast.Name(d, ast.Store())],
                      _rt_call("acc_unbroadcast", ast.Name(d, ast.Load()), call.args[1], ast.Constant(text), xs))


def _as_tangent(node: ast.stmt) -> ast.stmt | None:
    """`t = _rt.as_tangent(e, x)` (or `as_shape`, the same under Numba; `e` elementwise, `x` a
    name) -> `t = _rt.ew_like(x, "...", (...))`."""
    call = node.value if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
    if not (call is not None and isinstance(node.targets[0], ast.Name) and _rt_as_shape(call)
            and _elementwise(call.args[0])):
        return None
    text, xs = _ew_args(call.args[0])
    return ast.Assign(node.targets, _rt_call("ew_like", call.args[1], ast.Constant(text), xs))


def _statement(node: ast.stmt, in_loop: bool, floats: frozenset[str]) -> ast.stmt | None:
    """The rewritten statement (`elementwise_statements`), or None to leave it."""
    if isinstance(node, ast.AugAssign) and ((new := _unbroadcast(node)) is not None
                                            or (new := _max_adjoint(node)) is not None):
        return new
    if isinstance(node, ast.Assign) and (new := _as_tangent(node)) is not None:
        return new
    if isinstance(node, ast.AugAssign):
        if (isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name) and node.target.id not in floats
                and (_compound(node.value) or (not in_loop and isinstance(node.value, ast.Name)))):
            d = node.target.id
            text, xs = _ew_args(node.value)
            if xs.elts:
                return ast.Assign([ast.Name(d, ast.Store())],
                                  _rt_call("acc_ew", ast.Name(d, ast.Load()), ast.Constant(text), xs))
    out = _ufunc_out(node)
    if out is not None:
        e, d, call = out
        text, xs, run = _ew_args(e, call)
        if xs.elts:
            return ast.Expr(_rt_call("ew_out", ast.Name(d, ast.Load()), ast.Constant(text), xs, ast.Constant(run)))
        return None
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and isinstance(target.slice, ast.Constant) and target.slice.value is Ellipsis
                and _elementwise(node.value) and not _boolean(node.value)):
            text, xs = _ew_args(node.value)
            return ast.Expr(_rt_call("ew_set", ast.Name(target.value.id, ast.Load()), ast.Constant(text), xs))
        if (isinstance(target, ast.Name) and target.id not in floats and _compound(node.value)
                and (not in_loop or any(_np_call(n, _EW_FUNCS) for n in ast.walk(node.value)))):
            text, xs = _ew_args(node.value)
            if xs.elts and any(not (isinstance(n, ast.Name) and n.id in floats) for n in xs.elts):
                return ast.Assign([target], _rt_call("ew_new", ast.Constant(text), xs))
    if (isinstance(node, (ast.Assign, ast.AugAssign, ast.Return, ast.Expr))
            and any(isinstance(n, ast.Call) for n in ast.walk(node))):
        sums = _Calls()
        new = sums.visit(ast.parse(ast.unparse(node)).body[0])
        if sums.changed:
            return new
    return None


def elementwise_statements(src: str, floats: frozenset[str] = frozenset()) -> str:
    """Elementwise statements become calls of the intrinsics of `numba_elementwise`, which
    write their loops in place (with NumPy's semantics) or run the statement itself; an
    elementwise expression is one `_elementwise` accepts:
    - `d += e` (`d` a plain name; `e` a single name only outside loops, where adjoints of
      numbers are added by the thousand) -> `d = _rt.acc_ew(d, "x0 * x1", (a, b))`;
    - `d[...] = e` (`e` also a single name or number) -> `_rt.ew_set(d, "...", (...))`;
    - `t = e` -> `t = _rt.ew_new("...", (...))`, in loops only when `e` calls a function (most
      statements in loops are of numbers, where an intrinsic costs compile time for nothing:
      7% more for `lorenz_rk4`; a function of an array is a compile of its own);
    - calls in any plain statement (`_Calls`): `np.sum(e)` (`e` also a single operand) ->
      `_rt.ew_sum("...", (...))`, `np.max(x)` -> `_rt.ew_max(x)`, `np.zeros(shape, dtype)` ->
      `_rt.zeros(shape, dtype)` (and `np.empty`);
    - the adjoint of `np.max`/`np.min` of a whole array (`_max_adjoint`) ->
      `d = _rt.acc_extreme(d, g, x, ans)`;
    - `t = _rt.as_tangent(e, x)` -> `t = _rt.ew_like(x, "...", (...))`;
    - `d += _rt.unbroadcast(e, x)` (`e` also a single name; anywhere, float adjoints too: the
      helper is a compile of its own) -> `d = _rt.acc_unbroadcast(d, x, "...", (...))`;
    - a statement `np.add(a, b, out=d)` (`_EW_UFUNCS`, `negative`, `_EW_FUNCS`) ->
      `_rt.ew_out(d, "x0 + x1", (a, b), "np.add(x0, x1, out=d)")`, the ufunc itself when the
      statement is not fast.
    Names in `floats` (the transform's float adjoints, and the names of numbers) are left to
    Numba: `d += e` into one, or `t = e` of them only. Only statements on one line are
    rewritten, on that line."""
    tree = ast.parse(src)
    lines = src.split("\n")

    def visit(node: ast.AST, in_loop: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) and _alone(child, lines):
                new = _statement(child, in_loop, floats)
                if new is not None:
                    line = lines[child.lineno - 1]
                    lines[child.lineno - 1] = _splice(line, child.col_offset, child.end_col_offset,
                                                      ast.unparse(ast.fix_missing_locations(new)))
                    continue
            visit(child, in_loop or isinstance(child, (ast.For, ast.While)))

    visit(tree, False)
    return "\n".join(lines)


def whole_views(src: str) -> str:
    """Every read of `x[...]` (`x` a name) becomes `x`: the same elements, and for NumPy the
    same memory. Numba types `x[...]` of a 0-d array as a number, which it then cannot lower
    (a `NotImplementedError`, not a typing error); of any other array it is a view of all of
    `x`, which `x` is already. Writes (`x[...] = e`, `x[...] += e`) stay."""
    if "[...]" not in src:
        return src
    lines = src.split("\n")
    found = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load)
             and isinstance(n.value, ast.Name) and isinstance(n.slice, ast.Constant) and n.slice.value is Ellipsis
             and n.lineno == n.end_lineno]
    for n in sorted(found, key=lambda n: (n.lineno, -n.col_offset)):
        line = lines[n.lineno - 1]
        lines[n.lineno - 1] = _splice(line, n.col_offset, n.end_col_offset, n.value.id)
    return "\n".join(lines)


_REUSE_LIST = re.compile(r"^(\s*\w+ = )_rt\.reuse_list\(\w+, \d+\)$", re.M)


def fresh_lists(src: str) -> str:
    """Split mode's list caches are Numba typed lists, new on each forward call:
    `c = _rt.reuse_list(tape, k)` becomes `c = _rt.List()`. Numba infers the element type
    from the appends that follow in the same function (unifying the layouts of the arrays
    appended), and the tape carries the lists to the reverse function as they are. A
    reflected list (what `[]` is) would be unboxed element by element there, and refused if
    its arrays differ in layout (a view, then a new array)."""
    return _REUSE_LIST.sub(r"\1_rt.List()", src) if "_rt.reuse_list(" in src else src


class _PlainDivisions(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        f = node.func
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
                and f.attr in _PLAIN and len(node.args) == 2 and not node.keywords):
            return ast.copy_location(ast.BinOp(node.args[0], _PLAIN[f.attr](), node.args[1]), node)
        return node


_PLAIN = {"fdiv": ast.Div, "fpow": ast.Pow}  # the IEEE arithmetic of rules of numbers, as operators


def plain_divisions(src: str) -> str:
    """`_rt.fdiv(a, b)` and `_rt.fpow(a, b)` (the IEEE arithmetic of derivative rules of
    numbers) -> `a / b` and `a ** b`, for the rewrites that follow, which read `/` as the
    elementwise division their intrinsics compute as IEEE division (`dt += _rt.fdiv(g, s) * e`,
    `e` an array, is one loop), and `ieee_divisions`, which writes `_rt.fdiv` back wherever the
    rest of the statement is left to Numba (whose `**` of numbers gives inf at a zero base
    already). Outermost calls, rewritten in place on their lines."""
    if "_rt.fdiv(" not in src and "_rt.fpow(" not in src:
        return src
    lines = src.split("\n")
    edits: list[tuple[int, int, int, str]] = []

    def edit(node: ast.expr, parens: bool) -> bool:
        text = ast.unparse(node)
        if node.lineno != node.end_lineno or ("_rt.fdiv(" not in text and "_rt.fpow(" not in text):
            return False
        text = ast.unparse(_PlainDivisions().visit(copy.deepcopy(node)))
        edits.append((node.lineno, node.col_offset, node.end_col_offset, f"({text})" if parens else text))
        return True

    class Outermost(ast.NodeVisitor):
        def generic_visit(self, node: ast.AST) -> None:
            # a statement's whole value needs no parentheses; a call elsewhere may
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.Return, ast.Expr)) and node.value is not None:
                for target in getattr(node, "targets", [getattr(node, "target", None)]):
                    if target is not None:
                        self.visit(target)
                if not edit(node.value, parens=False):
                    self.visit(node.value)
                return
            super().generic_visit(node)

        def visit_Call(self, node: ast.Call) -> None:
            if not edit(node, parens=True):
                super().generic_visit(node)

    Outermost().visit(ast.parse(src))
    for line, col, end, text in sorted(edits, reverse=True):  # right to left within a line
        lines[line - 1] = _splice(lines[line - 1], col, end, text)
    return "\n".join(lines)


def ieee_divisions(src: str, floats: frozenset[str] = frozenset()) -> str:
    """Every `a / b` whose divisor may be zero becomes `_rt.fdiv(a, b)`: real numbers divide as
    IEEE division (NumPy's, a zero divisor gives inf or nan), where Numba divides numbers as
    Python does and raises `ZeroDivisionError`. A Python primal divides NumPy numbers (an
    array's elements) so, and the Python backend gives inf where the rules divide by zero
    (the derivative of `sqrt` at 0, of `x / y` at `y = 0`). Integer `//` and `%` still raise.
    The outermost expression holding a division is rewritten in place, on its line (line
    numbers stay those of `src`); `x /= y` of a name in `floats` becomes `x = _rt.fdiv(x, y)`
    (of an array it stays in place: NumPy's division already)."""
    if "/" not in src:
        return src
    lines = src.split("\n")
    edits: list[tuple[int, int, int, str]] = []

    def divides(e: ast.AST) -> bool:
        return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and zero_divisor(n.right)
                   for n in ast.walk(e))

    class Outermost(ast.NodeVisitor):
        def visit_BinOp(self, node: ast.BinOp) -> None:
            if node.lineno == node.end_lineno and divides(node):
                text = ast.unparse(IEEEDivisions().visit(copy.deepcopy(node)))
                edits.append((node.lineno, node.col_offset, node.end_col_offset, text))
            else:
                self.generic_visit(node)

        def visit_AugAssign(self, node: ast.AugAssign) -> None:
            if (isinstance(node.op, ast.Div) and isinstance(node.target, ast.Name) and node.target.id in floats
                    and zero_divisor(node.value) and node.lineno == node.end_lineno):
                name = node.target.id
                value = IEEEDivisions().visit(copy.deepcopy(node.value))
                text = f"{name} = {ast.unparse(_rt_call('fdiv', ast.Name(name, ast.Load()), value))}"
                edits.append((node.lineno, node.col_offset, node.end_col_offset, text))
            else:
                self.generic_visit(node)

    Outermost().visit(ast.parse(src))
    for line, col, end, text in sorted(edits, reverse=True):  # right to left within a line
        lines[line - 1] = _splice(lines[line - 1], col, end, text)
    return "\n".join(lines)


def tape_in(inner: tuple) -> tuple:
    """The tape a compiled forward half takes back (`tape=`): its lists replaced by None.
    `fresh_lists` makes new ones, so only the buffers are read; and Numba's dispatcher types a
    tuple that holds typed lists in Python (80 us a call, against under 1 for buffers)."""
    from numba.typed import List

    return tuple(None if isinstance(item, List) else item for item in inner)


@dataclass(frozen=True)
class SourceFacts:
    """What the transform knows about the names of a generated program (`api._compile`):
    `floats`: only float adjoints; `numbers`: only numbers (`Namer.numbers`); `ints`: only
    ints (`Reverse.int_names`), declared `intp`; `arrays`: only arrays (`Namer.arrays`);
    `nonneg`: ints never negative when used as indices (`analysis.bounds.index_names`)."""
    floats: frozenset[str] = frozenset()
    numbers: frozenset[str] = frozenset()
    ints: frozenset[str] = frozenset()
    arrays: frozenset[str] = frozenset()
    nonneg: frozenset[str] = frozenset()


def _before(line: str, col: int) -> str:
    """`line` up to `col`, an AST column: a count of UTF-8 bytes, not of characters."""
    return line.encode()[:col].decode()


def _after(line: str, col: int) -> str:
    """`line` from AST column `col` (UTF-8 bytes) on."""
    return line.encode()[col:].decode()


def _splice(line: str, col: int, end: int, text: str) -> str:
    """`line` with AST columns `col` to `end` (UTF-8 bytes: a name may be `σ`) replaced by `text`."""
    return _before(line, col) + text + _after(line, end)


def numba_source(src: str, facts: SourceFacts = SourceFacts()) -> str:
    """The source Numba compiles: `src` after `plain_divisions`, `whole_views`, `fresh_lists`,
    `accumulating_products`, `elementwise_statements` (loops in place of temporaries and
    array expressions), `ieee_divisions` and `nonneg_indices` (the Python backend, and second
    order, run `src` as it is). Statements of names that hold only floats or only numbers
    (`facts`) are left as they are (nothing to gain; an intrinsic costs compile time)."""
    src = drop_errstate(src)
    rewritten = elementwise_statements(accumulating_products(fresh_lists(whole_views(plain_divisions(src)))),
                                       facts.floats | facts.numbers)
    return nonneg_indices(ieee_divisions(rewritten, facts.floats), facts.nonneg, facts.arrays)


_SETERR = re.compile(r"^(\s*)(\w+) = np\.seterr\(.*\)\s*$")
_SETERR_BACK = re.compile(r"^(\s*)np\.seterr\(\*\*\w+\)\s*$")


def drop_errstate(src: str) -> str:
    """`with np.errstate(...)` blocks (`frontend/checks.py`) dropped: `e = np.seterr(...)` ->
    `e = 0`, `np.seterr(**e)` -> `pass`. Numba's compiled arithmetic never warns nor raises
    FloatingPointError, whatever NumPy's error state (as the user's own `@njit` code)."""
    if "np.seterr(" not in src:
        return src
    lines = [_SETERR_BACK.sub(r"\1pass", _SETERR.sub(r"\1\2 = 0", line)) for line in src.split("\n")]
    return "\n".join(lines)


def nonneg_indices(src: str, nonneg: frozenset[str], arrays: frozenset[str]) -> str:
    """`a[i, k]` -> `a[i, _rt.nonneg(k)]` where `a` is an array and `k` an int never negative
    there (`analysis.bounds`): Numba indexes with an unsigned int as is, where it first adds
    the extent to a negative signed one. Only names, at the top of a subscript (not in
    slices); edits in place, on their lines."""
    if not nonneg:
        return src
    lines = src.split("\n")
    edits: list[tuple[int, int, int]] = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in arrays:
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            edits += [(k.lineno, k.col_offset, k.end_col_offset) for k in parts
                      if isinstance(k, ast.Name) and k.id in nonneg]
    for line, col, end in sorted(edits, reverse=True):  # right to left within a line
        text = lines[line - 1]
        lines[line - 1] = _splice(text, col, end, f"_rt.nonneg({_after(_before(text, end), col)})")
    return "\n".join(lines)


def compile_numba(src: str, names: list[str], what: str, facts: SourceFacts = SourceFacts(),
                  parallel: frozenset[str] = frozenset()) -> list[Callable]:
    """Numba dispatchers of the functions `names` defined by `src` (see the module contract);
    `facts`: what the transform knows about names (`SourceFacts`; `numba_source`), its `ints`
    declared `intp`. Numba types `k = 0` as the literal 0 and widens it to int64 only when it
    meets `k += 1` through a loop; every such widening costs its type inference one more pass
    over the whole function (gmm_objective's gradient: four more, 0.2 s)."""
    src = numba_source(src, facts)
    ints = facts.ints
    if not _STAMP:
        _STAMP.append(_stamp())
    typed = "_INTS = {" + ", ".join(f"{k!r}: numba.intp" for k in sorted(ints)) + "}\n"
    digest = hashlib.sha256((_STAMP[0] + src + typed).encode()).hexdigest()[:24]
    body = _HEADER.format(what=what) + src + "\n" + typed + "".join(
        f"{n} = numba.njit(cache=True, locals=_INTS, pipeline_class=Compiler, no_cfunc_wrapper=True)({n})\n"
        if n not in parallel else f"{n} = numba.njit(cache=True, locals=_INTS, parallel=True)({n})\n" for n in names)
    path = _write(digest, names[0], body)
    if path is None:
        return _in_memory(body, names)
    modname = f"zymo_generated_{digest}"
    mod = sys.modules.get(modname)
    if mod is None:
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for n in names:
            _guard_compiles(getattr(mod, n), path.with_name(path.name + ".lock"))
        sys.modules[modname] = mod
    return [getattr(mod, n) for n in names]


def _fresh_numba_ids() -> None:
    """Move Numba's per-process function counter forward by a random amount (module
    contract): names stay unique within the process (the counter only grows) and differ from
    those another process gives (2**40 possible jumps)."""
    import itertools
    import secrets

    from numba.core.bytecode import FunctionIdentity

    start = next(FunctionIdentity._unique_ids) + 1 + secrets.randbelow(2 ** 40)
    FunctionIdentity._unique_ids = itertools.count(start)


def _guard_compiles(dispatcher: Any, lock_path: Path | None) -> None:
    """Make every compile of `dispatcher` (Numba calls `_compile_for_args` only for a new
    signature) hold an exclusive lock on `lock_path` across processes (module contract; None:
    an in-memory module, no lock), and report every failure of the compile as a Numba error.
    `_compile_for_args` only compiles, so whatever it raises is a compile failure; Numba raises
    a bare `NotImplementedError` for some constructs it types but cannot lower (a ufunc's
    `out=` keyword, `x[...]` of a 0-d array), and a bug in a shim's typing would raise its own
    exception: either would otherwise escape as if the program had raised it.
    Numba's pending-deprecation warning for a reflected list is silenced meanwhile: a Python
    list the user passes (or a list cache) reaches the generated program as one by zymo's
    choice, and the warning would point at a generated file the user never wrote."""
    compile_for_args = dispatcher._compile_for_args

    def compile_reporting(*args: Any, **kws: Any) -> Any:
        import warnings

        from numba.core.errors import NumbaError, NumbaPendingDeprecationWarning, UnsupportedError

        _fresh_numba_ids()
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", r"(?s).*type 'reflected list'", NumbaPendingDeprecationWarning)
                return compile_for_args(*args, **kws)
        except NumbaError:
            raise
        except NotImplementedError as exc:
            raise UnsupportedError(f"Numba cannot lower this construct: {exc}") from exc
        except Exception as exc:
            raise UnsupportedError(f"Numba failed to compile this program: {type(exc).__name__}: "
                                   f"{exc or 'no message (a Numba bug or limit)'}") from exc

    try:
        import fcntl
    except ImportError:  # no flock (Windows): Numba's cache is used unlocked
        lock_path = None
    if lock_path is None:
        dispatcher._compile_for_args = compile_reporting
        return

    def locked(*args: Any, **kws: Any) -> Any:
        try:
            fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError:
            return compile_reporting(*args, **kws)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return compile_reporting(*args, **kws)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    dispatcher._compile_for_args = locked


def _write(digest: str, name: str, body: str) -> Path | None:
    d = cache_dir()
    path = d / f"{name}_{digest}.py"
    try:
        if path.exists() and path.read_text() == body:
            return path
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{path.name}.{os.getpid()}.tmp"
        tmp.write_text(body)
        os.replace(tmp, path)  # atomic: a concurrent process sees the whole file or none
        return path
    except OSError:
        return None


def _in_memory(body: str, names: list[str]) -> list[Callable]:
    body = body.replace("numba.njit(cache=True, ", "numba.njit(")
    ns: dict[str, Any] = {"__name__": "zymo_generated"}
    exec(compile(body, "<zymo numba>", "exec"), ns)
    for n in names:
        _guard_compiles(ns[n], None)
    return [ns[n] for n in names]


# -- diagnosis ---------------------------------------------------------------------------

_LOC = re.compile(r'File "([^"]+)", line (\d+)')


def explain(exc: Exception, primal: Callable, args: tuple) -> ZymoNumbaError:
    """A `ZymoNumbaError` saying why Numba refused, pointing at the user's line if it can."""
    import numba

    first = _first_line(exc)
    name = getattr(primal, "__qualname__", repr(primal))
    try:
        sig = tuple(numba.typeof(a) for a in args)
        numba.njit(primal).compile(sig)
    except Exception as primal_exc:  # Numba cannot compile the user's own code
        loc = _user_loc(primal_exc, primal)
        return ZymoNumbaError(
            f"Numba cannot compile {name}: {_first_line(primal_exc)}", loc,
            why="zymo compiles a derivative with Numba only when Numba can compile the code it comes from",
            hint="rewrite that construct in Numba's subset, or pass numba=False (or numba='prefer' "
                 "to fall back to Python with a warning)")
    gen = _LOC.findall(str(exc))
    where = f" (generated code line {gen[-1][1]})" if gen else ""
    reason = _ZYMO_REASON.search(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)))
    if reason:  # a shim's own refusal, deep in Numba's message: it says what is missing
        first = f"{reason.group(0).rstrip('.')} ({first})"
    return ZymoNumbaError(
        f"Numba cannot compile zymo's derivative of {name}{where}: {first}",
        why="the primal compiles with Numba but a derivative helper does not: a gap in zymo's Numba backend",
        hint="pass numba=False (or numba='prefer') to run the derivative as Python, and please report it")


_ZYMO_REASON = re.compile(r"zymo's Numba backend [^\n]*")


def _first_line(exc: Exception) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if not ln.startswith(("Failed in", "During:", "File ")):
            return ln
    if lines:
        return lines[0]
    return f"Numba raised {type(exc).__name__} with no message (a Numba bug or limit)"


def _user_loc(exc: Exception, primal: Callable) -> Loc | None:
    file = os.path.abspath(primal.__code__.co_filename)
    for f, line in _LOC.findall(re.sub(r"\x1b\[[0-9;]*m", "", str(exc))):
        if os.path.abspath(f) == file:  # Numba prints paths relative to the working directory
            return Loc(file, int(line), 0, primal.__name__)
    return None
