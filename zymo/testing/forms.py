"""The test functions rule cases differentiate: named forms, and functions written from source.

Contract: `FORMS` maps a form's name (what `rules.registry.Form` names, and the test
function's `__name__`) to its factory: given the primitive object `fn`, it returns a plain
`def` that calls `fn` (captured in a closure, which zymo resolves through the rule registry)
in one way: once, in a loop, with `out=`, in place, through a view and writes into it, as a
constant factor or the only dependence (nondiff rules), with literal axes (reductions), into
fresh memory (allocations). A parametrized form's factory takes its parameters first.
`FIXES` adjusts drawn inputs by name (`Form.fix`). `expr_factory(src, nargs, label)` is a
factory of the same kind for a case written as source text (`Rule.cases`' expression
entries), and `keyword_form` rewrites such a text to pass arguments by keyword.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import pyast
from .support import _module_from_source

# -- forms: the functions check_rule differentiates ---------------------------------------
# Each factory captures the primitive object `fn` in a closure; zymo resolves the
# call through the rule registry. One def per line shape keeps them readable.


def _t_call1(fn):
    def call1(x):
        return fn(x)
    return call1


def _t_call2(fn):
    def call2(x, y):
        return fn(x, y)
    return call2


def _t_call3(fn):
    def call3(x, y, z):
        return fn(fn(x, y), z)
    return call3


def _t_out1(fn):
    def out1(x):
        o = np.zeros_like(x)
        fn(x, out=o)
        return o
    return out1


def _t_out2(fn):
    def out2(x, y):
        o = np.zeros_like(x)
        fn(x, y, out=o)
        return o
    return out2


def _t_inplace1(fn):
    def inplace1(x):
        y = np.copy(x)
        fn(y, out=y)
        return y * x
    return inplace1


def _t_inplace2(fn):
    def inplace2(x, y):
        z = np.copy(x)
        fn(z, y, out=z)
        return z * x
    return inplace2


def _t_inplace2_rhs(fn):
    def inplace2_rhs(x, y):
        z = np.copy(y)
        fn(x, z, out=z)
        return z * y
    return inplace2_rhs


def _t_loop1(fn):
    def loop1(x):
        acc = x * 0.0
        for i in range(3):
            z = x * (1.0 - 0.05 * i)
            acc = acc + fn(z) * z
        return acc
    return loop1


def _t_loop2(fn):
    def loop2(x, y):
        acc = x * 0.0
        for i in range(3):
            acc = acc + fn(x * (1.0 - 0.05 * i), y) * (i + 1.0)
        return acc
    return loop2


def _t_self2(fn):
    def self2(x):
        return fn(x, x)
    return self2


def _t_pow_int(fn):
    def pow_int(x):
        return fn(x, 3) + fn(x, 2)
    return pow_int


def _t_outmat(fn):
    def outmat(x, y):
        o = np.empty_like(fn(x, y))
        fn(x, y, out=o)
        return o
    return outmat


# nondiff: the result as the only dependence (derivative exactly zero) or as a constant
def _t_zero1(fn):
    def zero1(x):
        return 2.0 * fn(x)
    return zero1


def _t_zero2(fn):
    def zero2(x, y):
        return 2.0 * fn(x, y)
    return zero2


def _t_const1(fn):
    def const1(x):
        return x * (1.0 + fn(x))
    return const1


def _t_const2(fn):
    def const2(x, y):
        return x * y * (1.0 + fn(x, y))
    return const2


def _t_branch2(fn):
    def branch2(x, y):
        if fn(x, y):
            return x * y
        return x - y
    return branch2


def _t_not_zero(fn):
    def not_zero(x, y):
        return 2.0 * fn(x < y)
    return not_zero


def _t_not_const(fn):
    def not_const(x, y):
        return x * y * (1.0 + fn(x < y))
    return not_const


def _t_not_syntax(fn):
    def not_syntax(x, y):
        if not x < y:
            return x * y
        return x - y
    return not_syntax


def _t_bool_zero(fn):
    def bool_zero(x, y):
        return 2.0 * fn(x < y, y > 0.0)
    return bool_zero


def _t_bool_const(fn):
    def bool_const(x, y):
        if fn(x < y, y > 0.0):
            return x * y
        return x - y
    return bool_const


def _t_chain_cmp(fn):
    def chain_cmp(x, y):
        if -3.0 < x < y:
            return x * y
        return x - y
    return chain_cmp


def _t_break_continue(fn):
    def break_continue(x, t):
        acc = 0.0
        for i in range(x.shape[0]):
            if x[i] > t:
                break
            if x[i] < -t:
                continue
            acc = acc + x[i] * x[i]
        return acc * t
    return break_continue


def _t_dim(fn):
    def dim(x):
        return x * fn(x, 0) + x * fn(x, 1)
    return dim


def _t_dim_syntax(fn):
    def dim_syntax(x):
        return x * x.shape[0] * len(x)
    return dim_syntax


def _t_printed(fn):
    def printed(x):
        fn(x)
        return x * x
    return printed


def _t_len_list(fn):
    def len_list(x, lst):
        return x * fn(lst)
    return len_list


def _t_shape_const(fn):
    def shape_const(x):
        return x * fn(x)[0] + x * fn(x)[1]
    return shape_const


def _t_shape_zero(fn):
    def shape_zero(x):
        return 2.0 * fn(x)[0]
    return shape_zero


def _t_pick(fn):
    def pick(x):
        return x[fn(x)] * 3.0
    return pick


def _t_to_float(fn):
    def to_float(x):
        return fn(x) * fn(x)
    return to_float


# reductions, with literal axes (closure ints would be runtime values)
def _t_red_all(fn):
    def red_all(x):
        return fn(x)
    return red_all


def _t_red_axis0(fn):
    def red_axis0(x):
        return fn(x, axis=0)
    return red_axis0


def _t_red_axis1(fn):
    def red_axis1(x):
        return fn(x, axis=1)
    return red_axis1


def _t_red_last_keep(fn):
    def red_last_keep(x):
        return fn(x, axis=-1, keepdims=True)
    return red_last_keep


def _t_red_all_keep(fn):
    def red_all_keep(x):
        return fn(x, keepdims=True)
    return red_all_keep


def _t_red_axes02(fn):
    def red_axes02(x):
        return fn(x, axis=(0, 2))
    return red_axes02


def _t_red_chain(fn):
    def red_chain(x):
        return fn(fn(x * x, axis=0))
    return red_chain


def _t_sum_method(fn):
    def sum_method(x):
        return x.sum(axis=1) * x.sum()
    return sum_method


def _t_mean_method(fn):
    def mean_method(x):
        return x.mean(axis=0) * x.mean()
    return mean_method


def _t_sum_builtin(fn):
    def sum_builtin(x):
        return sum(x)
    return sum_builtin


def _t_max_method(fn):
    def max_method(x):
        return x.max(axis=0) * x.max()
    return max_method


def _t_min_method(fn):
    def min_method(x):
        return x.min(axis=1) * x.min()
    return min_method


def _t_after_loop(fn):
    def after_loop(x):
        acc = 0.0
        for i in range(x.shape[0]):
            acc = acc + x[i] * x[i]
        return acc * x[i]  # the loop variable after the loop: defined only if the loop ran
    return after_loop


def _t_trip(fn):
    def trip(x):
        return x * fn(0, x.shape[0], 2) + x * fn(x.shape[0], 0, -1)
    return trip


def _t_span(fn):
    def span(x):
        return x * fn(2, x.shape[0]) + x * fn(x.shape[0], 1)
    return span


# views
def _t_view(fn):
    def view(x, w):
        return np.sum(fn(x) * w)
    return view


def _t_view_write(fn):
    def view_write(x, w):
        y = np.copy(x)
        v = fn(y)
        v[0, 1] = v[0, 1] * v[1, 0]
        return np.sum(y * w)
    return view_write


def _t_transpose_axes(fn):
    def transpose_axes(x, w):
        return np.sum(fn(x, (1, 0, 2)) * w)
    return transpose_axes


def _t_transpose_attr(fn):
    def transpose_attr(x, w):
        return np.sum(x.T * w) + np.sum(x.transpose() * w)
    return transpose_attr


def _t_reshape_flat(fn):
    def reshape_flat(x, w):
        return np.sum(fn(x, (12,)) * w)
    return reshape_flat


def _t_reshape_infer(fn):
    def reshape_infer(x, w):
        return np.sum(fn(x, (2, -1)) * w)
    return reshape_infer


def _t_reshape_method(fn):
    def reshape_method(x, w):
        return np.sum(x.reshape(4, 3) * w)
    return reshape_method


def _t_reshape_write(fn):
    def reshape_write(x, w):
        y = np.copy(x)
        v = fn(y, (12,))
        v[5] = v[5] * v[6]
        return np.sum(y * w)
    return reshape_write


def _t_copy_write(fn):
    def copy_write(x):
        y = fn(x)
        y[0] = y[0] * y[1]
        return y * x
    return copy_write


# allocation
def _t_new_n(fn):
    def new_n(x):
        n = x.shape[0]
        a = fn(n)
        for i in range(n):
            a[i] = x[i] * x[i]
        return np.sum(a * x)
    return new_n


def _t_new_n_partial(fn):
    def new_n_partial(x):
        a = fn(x.shape[0])
        a[1] = x[0] * x[2]
        return a * x
    return new_n_partial


def _t_new_2d(fn):
    def new_2d(x):
        a = fn((2, x.shape[0]))
        a[0] = x * x
        a[1] = x
        a[1, 1] = x[0] * x[1]
        return np.sum(a * x)
    return new_2d


def _t_new_dtype(fn):
    def new_dtype(x):
        a = fn(x.shape[0], dtype=x.dtype)
        a[0] = x[1] * x[2]
        return a * x
    return new_dtype


def _t_full(fn):
    def full(x):
        a = fn(x.shape[0], 0.5)
        a[1] = x[0] * x[2]
        return a * x
    return full


def _t_like(fn):
    def like(x):
        a = fn(x)
        for i in range(x.shape[0]):
            a[i] = x[i] * x[i]
        return np.sum(a * x)
    return like


def _t_like_partial(fn):
    def like_partial(x):
        a = fn(x)
        a[1] = x[0] * x[2]
        return a * x
    return like_partial


def _t_arange(fn):
    def arange(x):
        return fn(x.shape[0]) * x + fn(0.5, 2.0, 0.5) * x
    return arange


# functions written from a rule's `cases` (an expression, or a body with `return`)
_EXPR_ARGS = ("x", "y", "z", "w")


def expr_factory(src: str, nargs: int, label: str) -> Callable:
    """A factory like the `_t_*` ones, for a case written as source text: the function takes
    arguments x, y, z, w (as many as the case has) and calls the primitive as `fn`."""
    body = src if "\n" in src or src.lstrip().startswith(("return", "o =", "y =", "z =")) else f"return {src}"
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    params = ", ".join(_EXPR_ARGS[:nargs])
    code = (f"import math\nimport numpy as np\n\n\ndef make(fn):\n    def {label}({params}):\n{body}\n"
            f"    return {label}\n")
    mod = _module_from_source(code, f"_zymo_case_{zlib.crc32(code.encode()):08x}")
    return mod.make


def keyword_form(src: str, fn: Any) -> str | None:
    """`src` with every call `fn(a, b, c)` written `fn(a, name_b=b, name_c=c)`: the arguments
    after the first passed by the primal's own parameter names (None when no call changes).
    Rules bind arguments by the primal's signature; these cases check that they do."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    tree = ast.parse(textwrap.dedent(src))
    changed = False
    for node in pyast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "fn"):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or len(node.args) < 2:
            continue
        keep = 1
        while keep < len(node.args) and (keep >= len(params) or
                                         params[keep].kind != inspect.Parameter.POSITIONAL_OR_KEYWORD):
            keep += 1
        if keep >= len(node.args) or any(p.kind != inspect.Parameter.POSITIONAL_OR_KEYWORD
                                         for p in params[keep:len(node.args)]):
            continue
        node.keywords = [ast.keyword(params[i].name, a) for i, a in enumerate(node.args) if i >= keep] + node.keywords
        node.args = node.args[:keep]
        changed = True
    return ast.unparse(tree) if changed else None



def _ascending(x, y):
    return (x, y) if x < y else (y, x)


def _descending(x, y):
    return (x, y) if x > y else (y, x)


def _positive(x):
    return (abs(x),)


def _negative(x):
    return (-abs(x),)




# -- the runtime helpers' rules (forward over reverse differentiates generated code) -------


def _t_rt2(fn):
    def rt2(g, x):
        return fn(g, x) * 1.5
    return rt2


def _t_rt_matrix(fn):
    def rt_matrix(g, a, b):
        return fn(g, a, b)
    return rt_matrix


def _t_rt_expand(axis, keepdims):
    def factory(fn):
        def rt_expand(g, x):
            return fn(g, x, axis, keepdims) * x
        return rt_expand
    return factory


def _t_rt_grow(fn):
    def rt_grow(buf):
        big = fn(buf, 0)
        return big[:buf.shape[0]] * buf
    return rt_grow


def _t_rt_grow_stack(fn):
    def rt_grow_stack(buf):
        big = fn(buf, buf[0], 0)
        return big[:buf.shape[0]] * buf
    return rt_grow_stack


def _t_rt_count(fn):
    def rt_count(x):
        return fn(x, np.sum(x, axis=0)) * 1.0 + x[0]
    return rt_count


def _t_rt_mask(fn):
    def rt_mask(x):
        return fn(x, np.max(x), None, False)
    return rt_mask


def _t_rt_mask_const(fn):
    def rt_mask_const(x):
        return np.sum(fn(x, np.max(x), None, False) * x)
    return rt_mask_const


def _t_rt_int_pow(fn):
    def rt_int_pow(x):
        return x * fn(x.shape[0], 2) + x[0]
    return rt_int_pow


def _t_rt_negate(fn):
    def rt_negate(x):
        return np.roll(x, fn(1)) * x + np.roll(x, fn(-2), 0)
    return rt_negate


def _t_rt_view(fn):
    def rt_view(x):
        return float(fn(x, x[1:])) * 1.0 + x[0]
    return rt_view




FORMS: dict[str, Callable] = {name[3:]: factory for name, factory in list(globals().items())
                              if name.startswith("_t_")}
FIXES: dict[str, Callable] = {"ascending": _ascending, "descending": _descending, "positive": _positive,
                              "negative": _negative}
