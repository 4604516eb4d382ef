"""The elementwise rewrite: statements of elementwise array arithmetic become calls of the
intrinsics that write their loops in place (`elementwise.py`, `inline.py`).

Contract: `elementwise_statements(src, floats, arrays)` rewrites, statement by statement, what the
intrinsics compute exactly as NumPy does (the cases are listed on the function), and leaves
every other statement as it is; the operands the intrinsics read are names, plain subscripts,
numbers and the calls `_opaque` accepts (products, `np.zeros_like`, and pure runtime helpers:
`zymo.runtime.registry`). `_EW_FUNCS`, `_EW_BINARY` and `_EW_MASKS` are the NumPy functions the
intrinsics compute elementwise. `elementwise_runs` is the Numba backend's rewrite: that, with
more names known as arrays (`made_arrays`), then its runs fused (`ew_groups.fuse_runs`).
"""
from __future__ import annotations

import ast
from collections.abc import Mapping

from zymo.runtime import registry
from zymo.transform.emit import rt_call as _rt_call

from ... import pyast
from .ew_groups import fuse_runs
from .lines import alone, splice

_EW_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)
# NumPy's ufuncs of one operand that Numba lowers for one number (its own ufunc loops' code)
_EW_FUNCS = ("exp", "log", "tanh", "sin", "cos", "sqrt", "exp2", "expm1", "log2", "log10", "log1p", "tan", "sinh",
             "cosh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "cbrt", "sign", "absolute", "abs",
             "fabs", "floor", "ceil", "trunc", "rint", "square", "reciprocal", "deg2rad", "rad2deg", "degrees",
             "radians", "negative", "positive")
# the same, giving a bool (`elementwise._MASKS`, which cannot import this module)
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
def _opaque(e: ast.expr) -> bool:
    """A product `a @ b`, `np.zeros_like(x)` or a call of a helper that is a loop operand
    (`runtime.registry`), its arguments plain or elementwise: an operand the intrinsics read,
    not write into their loops."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.MatMult):
        return _elementwise(e.left) and _elementwise(e.right)
    if _np_call(e, ("zeros_like",)) and len(e.args) == 1 and not e.keywords:
        return _operand(e.args[0])
    f = e.func if isinstance(e, ast.Call) else None
    return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
            and registry.is_loop_operand(f.attr) and not e.keywords and all(
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
    each, which Numba compiled as a kernel of its own (`docs/decisions/0001`)."""
    f = e.func if isinstance(e, ast.Call) else None
    return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
            and f.attr in ("as_shape", "as_tangent") and len(e.args) == 2 and not e.keywords
            and isinstance(e.args[1], ast.Name))


def _ufunc_out(node: ast.stmt, arrays: frozenset[str] = frozenset(),
               ndims: Mapping[str, int] | None = None) -> tuple[ast.expr, ast.expr, ast.Call] | None:
    """For a statement `np.<ufunc>(a, b, out=d)` (`_EW_UFUNCS`, `negative`, `_EW_FUNCS` or
    `_EW_BINARY`, the operands elementwise, `d` a name or a view `_view` accepts): `(e, d, call)`,
    `e` the expression it computes."""
    call = node.value if isinstance(node, ast.Expr) else None
    if not (isinstance(call, ast.Call) and len(call.keywords) == 1 and call.keywords[0].arg == "out"
            and (isinstance(call.keywords[0].value, ast.Name) or _view(call.keywords[0].value, arrays, ndims or {}))
            and all(_elementwise(a) for a in call.args)):
        return None
    d = call.keywords[0].value
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
    inside = {id(m) for n in pyast.walk(e) if isinstance(n, ast.Subscript) or _opaque(n)
              for m in pyast.walk(n) if m is not n}
    functions = {id(n.func.value) for n in pyast.walk(e) if isinstance(n, ast.Call)}
    operands = [n for n in pyast.walk(e) if (_operand(n) or _opaque(n)) and id(n) not in inside
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
    """Calls in any statement that become intrinsics (each of Numba's own functions is a compile
    of its own per signature: `docs/decisions/0002`):
    - `np.sum(e)` (or `np.sum(e, axis=None, keepdims=False)`), `e` a compound elementwise
      expression or an operand, -> `_rt.ew_sum("...", (...))` (Numba's `np.sum` also adds in C
      order);
    - `np.max(x)` (`amax`, `min`, `amin`) of an operand -> `_rt.ew_max(x)` (`inline`);
    - `_rt.sum_product(a, b)` of two operands -> `_rt.ew_sum("x0 * x1", (a, b))`;
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
        f = node.func
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
                and f.attr == "sum_product" and len(node.args) == 2 and all(_leaf(a) for a in node.args)):
            self.changed = True  # `np.sum(a * b)` (`runtime.sum_product`, a Python-only helper)
            return _rt_call("ew_sum", ast.Constant("x0 * x1"), ast.Tuple(list(node.args), ast.Load()))
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


def _view(target: ast.expr, arrays: frozenset[str], ndims: Mapping[str, int]) -> bool:
    """`a[index]` of an array name `a` with a plain index that has a slice, or fewer indices
    than `a` has dimensions (`ndims`), and no index array or mask among them (a name of
    `arrays`): an array (a view), never one element (`a[...]` is the existing `ew_set(a, ...)`
    case) nor a copy (`a[idx] = e` writes through `a`'s own setitem)."""
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id in arrays
            and _plain_index(target.slice)):
        return False
    parts = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
    if any(isinstance(p, ast.Name) and (p.id in arrays or ndims.get(p.id, 0)) for p in parts):
        return False  # an index array or a mask (`a[idx]`): a copy, whose writes nobody would see
    return any(isinstance(p, ast.Slice) for p in parts) or len(parts) < ndims.get(target.value.id, 0)


def _into_view(node: ast.stmt, arrays: frozenset[str], ndims: Mapping[str, int]) -> ast.stmt | None:
    """`a[index] = e` and `a[index] op= e` (`op` of `_EW_OPS`), `a[index]` a view (`_view`),
    `e` elementwise -> `_rt.ew_set(a[index], "...", (...))`: the loops write the view in place
    (the view read as an operand too for `op=`, element for element: no copy)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    elif isinstance(node, ast.AugAssign) and isinstance(node.op, _EW_OPS):
        target = node.target
        value = ast.BinOp(ast.parse(ast.unparse(target), mode="eval").body, node.op, node.value)
    else:
        return None
    if not (_view(target, arrays, ndims) and _elementwise(value) and not _boolean(value)):
        return None
    text, xs = _ew_args(value)
    view = ast.parse(ast.unparse(target), mode="eval").body
    return ast.Expr(_rt_call("ew_set", view, ast.Constant(text), xs))


def _copy_or_sum(node: ast.stmt, floats: frozenset[str], arrays: frozenset[str]) -> ast.stmt | None:
    """`t = np.copy(a)` (`a` an operand; or `a.copy()`, `a` an array of `arrays` or a view of one)
    -> `t = _rt.ew_new("x0", (a,))`; `s = _rt.unbroadcast(e,
    n)` (`n` in `floats`: a number; `e` elementwise with an operand) -> `s = _rt.ew_sum("...",
    (...))`, the sum `unbroadcast` computes to a number's shape."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call) and not node.value.keywords):
        return None
    call = node.value
    assert isinstance(call, ast.Call)
    if _np_call(call, ("copy",)) and len(call.args) == 1 and _operand(call.args[0]):
        return ast.Assign(node.targets, _rt_call("ew_new", ast.Constant("x0"), ast.Tuple([call.args[0]], ast.Load())))
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "copy" and not call.args and _operand(f.value) \
            and ast.unparse(f.value).split("[")[0] in arrays:  # `a.copy()` of an array (not a list)
        return ast.Assign(node.targets, _rt_call("ew_new", ast.Constant("x0"), ast.Tuple([f.value], ast.Load())))
    f = call.func
    if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
            and f.attr == "unbroadcast" and len(call.args) == 2 and isinstance(call.args[1], ast.Name)
            and call.args[1].id in floats and (_compound(call.args[0]) or _operand(call.args[0]))):
        text, xs = _ew_args(call.args[0])
        if xs.elts:
            return ast.Assign(node.targets, _rt_call("ew_sum", ast.Constant(text), xs))
    return None


def _statement(node: ast.stmt, in_loop: bool, floats: frozenset[str], arrays: frozenset[str] = frozenset(),
               ndims: Mapping[str, int] | None = None) -> ast.stmt | None:
    """The rewritten statement (`elementwise_statements`), or None to leave it."""
    if isinstance(node, ast.AugAssign) and ((new := _unbroadcast(node)) is not None
                                            or (new := _max_adjoint(node)) is not None):
        return new
    if isinstance(node, ast.Assign) and (new := _as_tangent(node)) is not None:
        return new
    ndims = ndims or {}
    if (new := _into_view(node, arrays, ndims)) is not None or (new := _copy_or_sum(node, floats, arrays)) is not None:
        return new
    if isinstance(node, ast.AugAssign):
        if (isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name) and node.target.id not in floats
                and (_compound(node.value) or isinstance(node.value, ast.Name)
                     and (not in_loop or node.value.id in arrays
                          or node.value.id in floats and node.target.id in arrays))):  # `d += s`, s a number
            d = node.target.id
            text, xs = _ew_args(node.value)
            if xs.elts:
                return ast.Assign([ast.Name(d, ast.Store())],
                                  _rt_call("acc_ew", ast.Name(d, ast.Load()), ast.Constant(text), xs))
    out = _ufunc_out(node, arrays, ndims)
    if out is not None:
        e, d, call = out
        text, xs, run = _ew_args(e, call)
        if xs.elts:
            d = ast.parse(ast.unparse(d), mode="eval").body  # a load of the name or view
            return ast.Expr(_rt_call("ew_out", d, ast.Constant(text), xs, ast.Constant(run)))
        return None
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and isinstance(target.slice, ast.Constant) and target.slice.value is Ellipsis
                and _elementwise(node.value) and not _boolean(node.value)):
            text, xs = _ew_args(node.value)
            return ast.Expr(_rt_call("ew_set", ast.Name(target.value.id, ast.Load()), ast.Constant(text), xs))
        if (isinstance(target, ast.Name) and target.id not in floats and _compound(node.value)
                and (not in_loop or any(_np_call(n, _EW_FUNCS) for n in pyast.walk(node.value))
                     or any(isinstance(n, ast.Name) and n.id in arrays for n in pyast.walk(node.value)))):
            text, xs = _ew_args(node.value)
            if xs.elts and any(not (isinstance(n, ast.Name) and n.id in floats) for n in xs.elts):
                return ast.Assign([target], _rt_call("ew_new", ast.Constant(text), xs))
    if (isinstance(node, (ast.Assign, ast.AugAssign, ast.Return, ast.Expr))
            and any(isinstance(n, ast.Call) for n in pyast.walk(node))):
        sums = _Calls()
        new = sums.visit(ast.parse(ast.unparse(node)).body[0])
        if sums.changed:
            return new
    return None


# the intrinsics `_statement` writes: their arguments are evaluated by the intrinsic's loops or
# once before them, never as Numba's own array expressions
_INTRINSICS = frozenset({"ew_set", "ew_out", "ew_new", "ew_like", "ew_sum", "ew_max", "ew_min", "acc_ew",
                         "acc_unbroadcast", "acc_extreme", "zeros", "empty"})


def in_place(node: ast.stmt, floats: frozenset[str], arrays: frozenset[str],
             ndims: Mapping[str, int] | None = None) -> bool:
    """Whether `elementwise_statements` rewrites the statement `node`, in a loop, into calls of
    the intrinsics that leave no whole-array work to Numba's own array expressions: every use
    of a name of `arrays` in the rewritten statement is inside an intrinsic's call (or is the
    name it binds). `codegen/outline.py` lets such statements into compiled kernels. `ndims`: the
    dimensions of names of `arrays` where known (`a[i]` of a matrix is then a row, a view)."""
    new = _statement(node, True, floats, arrays, ndims)
    if new is None:
        return False
    inside: set[int] = set()
    for n in pyast.walk(new):
        f = n.func if isinstance(n, ast.Call) else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt" \
                and f.attr in _INTRINSICS:
            inside |= {id(m) for m in pyast.walk(n)}
    return not any(isinstance(n, ast.Name) and n.id in arrays and isinstance(n.ctx, ast.Load) and id(n) not in inside
                   for n in pyast.walk(new))


def made_arrays(tree: ast.AST, arrays: frozenset[str]) -> frozenset[str]:
    """`arrays` and the names the program binds only to arrays it makes of them: copies
    (`np.copy(a)`, `a.copy()`) and views with a slice (`a[1:n]`) of arrays, elementwise
    expressions with an array operand (`0.2 * g`): a name bound any other way anywhere is not one."""
    binds: dict[str, list[ast.expr | None]] = {}
    simple = {id(n.targets[0]) for n in pyast.walk(tree)
              if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
    for n in pyast.walk(tree):
        if isinstance(n, ast.Assign) and id(n.targets[0]) in simple:
            binds.setdefault(n.targets[0].id, []).append(n.value)  # type: ignore[attr-defined]
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in simple:
            binds.setdefault(n.id, []).append(None)
        elif isinstance(n, ast.arg):
            binds.setdefault(n.arg, []).append(None)
    known = set(arrays)

    def array(v: ast.expr | None) -> bool:
        if v is None:
            return False
        if isinstance(v, ast.Call) and not v.keywords:
            f = v.func
            if _np_call(v, ("copy",)) and len(v.args) == 1:
                v = v.args[0]
            elif isinstance(f, ast.Attribute) and f.attr == "copy" and not v.args:
                v = f.value
        if isinstance(v, ast.Subscript):
            return _view(v, frozenset(known), {})
        return _compound(v) and any(isinstance(m, ast.Name) and m.id in known for m in pyast.walk(v))
    while True:
        new = {name for name, values in binds.items() if name not in known and all(array(v) for v in values)}
        if not new:
            return frozenset(known)
        known |= new


def elementwise_statements(src: str, floats: frozenset[str] = frozenset(),
                           arrays: frozenset[str] = frozenset(), ndims: Mapping[str, int] | None = None) -> str:
    """Elementwise statements become calls of the intrinsics of `elementwise`, which
    write their loops in place (with NumPy's semantics) or run the statement itself; an
    elementwise expression is one `_elementwise` accepts:
    - `d += e` (`d` a plain name; `e` a single name only outside loops, where adjoints of
      numbers are added by the thousand, or where `e` is an array, or a number added into the
      array `d`, which then fuses with its neighbours: `ew_groups`) -> `d = _rt.acc_ew(d, "x0 *
      x1", (a, b))`;
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
    - `a[index] = e` and `a[index] op= e`, `a` in `arrays` and the index plain with a slice (a
      view) -> `_rt.ew_set(a[index], "...", (...))`;
    - `t = np.copy(a)` -> `t = _rt.ew_new("x0", (a,))`, and `s = _rt.unbroadcast(e, n)` of a
      number `n` (a sum) -> `s = _rt.ew_sum("...", (...))` (`_copy_or_sum`).
    Names in `arrays` (the names known to hold arrays) also make `d += a` and `t = e` of one
    of them intrinsics in loops; `ndims` (their ranks, where known) makes `a[i]` of a matrix a
    view that a ufunc's `out=` or an assignment may write. Names in `floats` (the transform's float adjoints, and the
    names of numbers) are left to Numba: `d += e` into one, or `t = e` of them only. Only
    statements on one line are rewritten, on that line."""
    tree = ast.parse(src)
    lines = src.split("\n")

    def visit(node: ast.AST, in_loop: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) and alone(child, lines):
                new = _statement(child, in_loop, floats, arrays, ndims)
                if new is not None:
                    line = lines[child.lineno - 1]
                    lines[child.lineno - 1] = splice(line, child.col_offset, child.end_col_offset,
                                                      ast.unparse(ast.fix_missing_locations(new)))
                    continue
            visit(child, in_loop or isinstance(child, (ast.For, ast.While)))

    visit(tree, False)
    return "\n".join(lines)


def elementwise_runs(src: str, floats: frozenset[str] = frozenset(), arrays: frozenset[str] = frozenset(),
                     ndims: Mapping[str, int] | None = None, ints: frozenset[str] = frozenset()) -> str:
    """`elementwise_statements`, then its runs of statements fused into one loop nest each
    (`ew_groups.fuse_runs`), both with `arrays` and the names `made_arrays` proves arrays;
    `ndims`: the ranks of arrays where known; `ints`: names that hold ints never negative."""
    arrays = made_arrays(ast.parse(src), arrays)
    return fuse_runs(elementwise_statements(src, floats, arrays, ndims), arrays, ints)
