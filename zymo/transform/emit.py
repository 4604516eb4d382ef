"""Writing IR ops as Python: primal statements and inlined rule expressions.

Contract: `Emitter` turns argument trees into expressions, writes the primal
statement of each non-region op exactly as the user's code computes it, and
inlines a rule's jvp/vjp body with the op's arguments substituted
(`rule_expr`; in a rule of numbers, a division by what may be zero is `_rt.fdiv` and a
power whose exponent may be negative `_rt.fpow`: IEEE arithmetic). Both transforms (forward,
reverse) write through it, so the primal part of every derivative program is the same code.
"""
from __future__ import annotations

import ast
import builtins as _builtins
import re
from collections.abc import Callable
from typing import Any, TypeGuard

from .. import config, pyast
from ..ir import types as T
from ..ir.core import Op, Value
from ..rules.registry import Rule, inline_rule, lookup
from .naming import Namer, complex_text, literal
from .writer import Writer

# names a rule body may use: they exist in every generated module
_GEN_GLOBALS = {"np", "math", "_rt"} | set(dir(_builtins))


class Emitter:
    def __init__(self, namer: Namer, w: Writer):
        self.n = namer
        self.w = w

    # -- expressions ----------------------------------------------------------
    def tree(self, tree: Any, op: Op, name: Callable[[Value], str] | None = None) -> str:
        name = name or self.n
        tag = tree[0]
        if tag == "v":
            return name(op.args[tree[1]])
        if tag == "c":
            return _const(tree[1])
        if tag == "t":
            parts = [self.tree(t, op, name) for t in tree[1]]
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        if tag == "s":
            lo, hi, st = (self.tree(t, op, name) if t != ("c", None) else "" for t in tree[1:])
            return f"{lo}:{hi}" + (f":{st}" if st else "")
        raise AssertionError(tree)

    def index(self, op: Op, name=None) -> str:
        tree = op.attrs["index"]
        if tree[0] == "t":
            parts = [self.tree(t, op, name) for t in tree[1]]
            return ", ".join(parts) if len(parts) != 1 else parts[0]
        return self.tree(tree, op, name)

    def call(self, op: Op, with_out: bool = True, name=None) -> str:
        """The primal call expression of a `prim` op."""
        rule = lookup(op.attrs["key"])
        pos = [self.tree(t, op, name) for t in op.attrs["pos"]]
        if op.attrs["key"] == "pow" and len(pos) == 2 and all(_is_int(a) for a in op.args):
            return _int_power(op, [f"({p})" if _needs_parens(p) else p for p in pos])
        if rule.template:
            return rule.template.format(*[f"({p})" if _needs_parens(p) else p for p in pos])
        kw = [f"{k}={self.tree(t, op, name)}" for k, t in op.attrs["kw"]]
        if with_out and "out" in op.attrs:
            kw.append(f"out={(name or self.n)(op.args[op.attrs['out']])}")
        return f"{rule.callee()}({', '.join(pos + kw)})"

    # -- primal statements ----------------------------------------------------
    def primal(self, op: Op) -> None:
        n = self.n
        k = op.kind
        if k == "const":
            if literal(op.result) is None:  # numbers are written where they are used
                self.w(f"{n(op.result)} = {_const(op.attrs['value'])}")
        elif k == "prim":
            expr = self.call(op)
            if op.results:
                lhs = ", ".join(n(r) for r in op.results)
                if len(op.results) == 1 and op.attrs["key"] == "numpy.shape":
                    lhs += ","  # the shape of a 1-d array is a 1-tuple: unpack it

                self.w(f"{lhs} = {expr}")
            else:
                self.w(expr)
        elif k == "getitem":
            self.w(f"{n(op.result)} = {n(op.args[0])}[{self.index(op)}]")
        elif k == "setitem":
            self.w(f"{n(op.args[0])}[{self.index(op)}] = {n(op.args[1])}")
        else:
            raise AssertionError(k)

    # -- rules ----------------------------------------------------------------
    def rule_expr(self, rule: type[Rule], which: str, param: str, seed: str, ans: str | None,
                  op: Op, name=None) -> str:
        """The inlined body of `rule`'s `which`_`param` with the op's arguments."""
        fn = (rule.jvps() if which == "jvp" else rule.vjps())[param]
        ir = inline_rule(fn)
        subst = self.bind(rule, op, name)
        subst[ir.params[0]] = seed
        subst[ir.params[1]] = ans if ans is not None else "None"
        for p in ir.params[2:]:
            if p not in subst:
                subst[p] = _const(ir.defaults[p]) if p in ir.defaults else "None"
        for g in ir.names - set(ir.params):
            if g not in _GEN_GLOBALS:
                raise AssertionError(f"rule {rule.key} uses {g}; rules may only use np, math, _rt and builtins")
        # a rule of numbers divides (and raises to a power) as IEEE arithmetic: the derivative
        # of `math.sqrt` or `t ** 0.5` at 0 is inf (times the adjoint) as NumPy, JAX and the
        # Numba backend give it, where Python floats would raise in the derivative the primal
        # never computes; arrays compute so already
        numbers = not any(T.is_memory(v.type) for v in (*op.args, *op.results))
        expr = _substitute(ir.expr, subst, ieee=numbers)
        if config.strong_zero() and (numbers or rule.elementwise) and seed != "0.0" and ir.used_params - {ir.params[0]}:
            # Enzyme's strong zero: a zero seed gives a zero term, whatever the partial (inf, nan)
            s = f"({seed})" if _needs_parens(seed) else seed
            return f"(0.0 if {s} == 0 else {expr})" if numbers else f"np.where({s} == 0, 0.0, {expr})"
        return expr

    def bind(self, rule: type[Rule], op: Op, name=None) -> dict[str, str]:
        """Rule parameter name -> argument expression, for the op's call."""
        return {p: self.tree(t, op, name) for p, t in _bound(rule, op)}

    def arg_values(self, rule: type[Rule], op: Op) -> dict[str, Value]:
        """Rule parameter name -> the IR value passed for it (plain value args only)."""
        return {p: op.args[t[1]] for p, t in _bound(rule, op) if t[0] == "v"}


def _bound(rule: type[Rule], op: Op) -> list[tuple[str, Any]]:
    """(rule parameter, argument tree) of the op's call, bound by the primal's signature
    (`np.clip(x, a_min=lo)` gives `lo` to the rule's `lo`); arguments the rule has no
    parameter for (the frontend refused those that matter) are left out."""
    b = rule.binding()
    pairs = [(b.param(i), t) for i, t in enumerate(op.attrs["pos"])]
    pairs += [(b.keyword(k), t) for k, t in op.attrs["kw"]]
    return [(p, t) for p, t in pairs if p is not None]


def zero(v: Value, name: str) -> str:
    """The expression of a zero tangent/adjoint of `v`."""
    if isinstance(v.type, T.Array):
        return f"np.zeros_like({name})"
    if isinstance(v.type, T.List):
        return f"_rt.zeros_list({name})"
    return "0.0"


def assign_all(w: Writer, pairs: list[tuple[str, str]]) -> None:
    """Write the assignments `dst = src` of `pairs` as if all at once (carries entering a
    loop, a loop's yield): one by one when no source reads another pair's destination, else
    as one tuple assignment (`x, y = y, x`: a swap through a temporary in the user's loop
    gives carries that read each other)."""
    names = [set(_NAME.findall(e)) if d != e else set() for d, e in pairs]  # `x = x` reads nothing new
    if any(d in names[k] for j, (d, _) in enumerate(pairs) for k in range(len(pairs)) if k != j):
        w(f"{', '.join(d for d, _ in pairs)} = {', '.join(e for _, e in pairs)}")
        return
    for d, e in pairs:
        w(f"{d} = {e}")


_NAME = re.compile(r"[A-Za-z_]\w*")
_NEG = re.compile(r"\(-\d+\)")


def span(lo: str, hi: str) -> str:
    """The argument of `range` for `hi - lo` iterations, none where `hi <= lo` (`lo`, `hi`
    names or integer literals): `hi` when `lo` is 0, else `_rt.span(lo, hi)`, which compares
    before it subtracts (unsigned bounds would wrap round to a huge count)."""
    a, b = (x[1:-1] if _NEG.fullmatch(x) else x for x in (lo, hi))  # `(-1)`
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        return str(max(0, int(b) - int(a)))
    return hi if lo == "0" else f"_rt.span({lo}, {hi})"


def range_args(start: str, stop: str, step: str) -> str:
    """The arguments of `range(start, stop, step)` as written: without a step of 1, and
    without a start of 0 then (fewer statements for Numba to type and lower)."""
    if step != "1":
        return f"{start}, {stop}, {step}"
    return stop if start == "0" else f"{start}, {stop}"


def trip_count(start: str, stop: str, step: str) -> str:
    """The number of iterations of `range(start, stop, step)`, as an expression.

    With a constant step and operands that are names or integers it is written out
    (`_rt.span(i, n_1)`): a call of `_rt.trip` costs Numba a compile of its own in
    every new process, and a typing of each call. Otherwise, `_rt.trip(...)`."""
    def simple(x: str) -> bool:
        return x.isidentifier() or x.lstrip("-").isdigit()

    start, stop, step = (x[1:-1] if _NEG.fullmatch(x) else x for x in (start, stop, step))  # `(-1)`

    if not (step.lstrip("-").isdigit() and int(step) != 0 and simple(start) and simple(stop)):
        return f"_rt.trip({start}, {stop}, {step})"
    k = int(step)
    lo, hi = (start, stop) if k > 0 else (stop, start)
    if lo.lstrip("-").isdigit() and hi.lstrip("-").isdigit():
        return str(max(0, (int(hi) - int(lo) + abs(k) - 1) // abs(k)))
    # `_rt.span`, not `max`: Numba compiles `max` of two ints as a function of its own, where
    # `span` is one select (`numba_inline`); nor a conditional expression (three blocks;
    # docs/decisions/0004). Reversed loops of step 1 need no count at all.
    count = f"_rt.span({lo}, {hi})"
    return count if abs(k) == 1 else f"({count} + {abs(k) - 1}) // {abs(k)}"


def _const(c: Any) -> str:
    if c is Ellipsis:
        return "..."
    if isinstance(c, float):
        if c != c or c in (float("inf"), float("-inf")):
            return f"float({str(c)!r})"
    if isinstance(c, str) or c is None or isinstance(c, (bool, int, float, tuple)):
        return repr(c)
    if isinstance(c, complex):
        return complex_text(c)
    import numpy as np

    if isinstance(c, np.dtype):
        return f"np.{c.name}"
    if isinstance(c, type) and c.__module__ == "numpy":
        return f"np.{c.__name__}"
    if c in (float, int, bool):
        return c.__name__
    if c is complex:  # `dtype=complex`: NumPy's complex128, which Numba also reads
        return "np.complex128"
    raise TypeError(f"cannot write constant {c!r} into generated code")


def _needs_parens(s: str) -> bool:
    try:
        node = ast.parse(s, mode="eval").body
    except SyntaxError:
        return True
    return not isinstance(node, (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Call))


class _Sub(ast.NodeTransformer):
    def __init__(self, subst: dict[str, ast.expr]):
        self.subst = subst

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.subst:
            return self.subst[node.id]
        return node


class _Fold(ast.NodeTransformer):
    """Constant arithmetic a rule's body gets from literal arguments (`x ** (2 - 1)` for
    `x ** 2`): `int op int` is computed, and `e ** 1` inside a larger expression is `e`
    (never at the top, where it would alias `e` instead of being a fresh array)."""

    _OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b}

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        for side in ("left", "right"):
            child = getattr(node, side)
            if (isinstance(child, ast.BinOp) and isinstance(child.op, ast.Pow)
                    and isinstance(child.right, ast.Constant) and type(child.right.value) is int
                    and child.right.value == 1):
                setattr(node, side, child.left)
        a, b = node.left, node.right
        if type(node.op) in self._OPS and _number(a) and _number(b):
            return ast.copy_location(ast.Constant(self._OPS[type(node.op)](a.value, b.value)), node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        """`2 == 0` -> `False` (the zero-exponent guard `y - 1 + (y == 0)` of a literal power)."""
        self.generic_visit(node)
        if (len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)) and _number(node.left)
                and _number(node.comparators[0])):
            same = node.left.value == node.comparators[0].value
            return ast.copy_location(ast.Constant(same == isinstance(node.ops[0], ast.Eq)), node)
        return node


def _number(e: ast.expr) -> TypeGuard[ast.Constant]:
    """A literal int, bool or float: arithmetic on two of them is folded as Python computes it."""
    return isinstance(e, ast.Constant) and type(e.value) in (int, bool, float)


def _substitute(expr: ast.expr, subst: dict[str, str], ieee: bool = False) -> str:
    """`expr` (a rule body, left as it is) with its names replaced by the expressions of
    `subst`, constants folded and, with `ieee`, IEEE divisions and powers; remembered by the
    body, `subst` and `ieee` (`_SUBSTITUTED`: the same derivative written again for other
    dtypes or calls writes the same text)."""
    key = (expr, frozenset(subst.items()), ieee)
    got = _SUBSTITUTED.get(key)
    if got is None:
        got = _SUBSTITUTED[key] = _substituted(expr, subst, ieee)
        if len(_SUBSTITUTED) > _SUBSTITUTED_SIZE:
            del _SUBSTITUTED[next(iter(_SUBSTITUTED))]  # the oldest entry
    return got


# (rule body, its substitution, ieee) -> text; the bodies are `inline_rule`'s, kept for good
_SUBSTITUTED: dict[tuple, str] = {}
_SUBSTITUTED_SIZE = 4096


def _substituted(expr: ast.expr, subst: dict[str, str], ieee: bool) -> str:
    parsed = {k: ast.parse(v, mode="eval").body for k, v in subst.items()}
    new = _Fold().visit(_Sub(parsed).visit(pyast.clone(expr)))
    if ieee:
        new = IEEEDivisions(powers=True).visit(new)
    return ast.unparse(new)


def zero_divisor(e: ast.expr) -> bool:
    """Whether expression `e` may be zero: anything but a nonzero number written out."""
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        e = e.operand
    return not (isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and e.value != 0)


def negative_power(e: ast.expr) -> bool:
    """Whether exponent `e` may be negative: anything but a number >= 0 written out."""
    return not (isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and e.value >= 0)


class IEEEDivisions(ast.NodeTransformer):
    """`a / b` -> `_rt.fdiv(a, b)` wherever `b` may be zero (`zero_divisor`): IEEE division,
    NumPy's, where Python (and Numba) divide numbers raising `ZeroDivisionError`. With
    `powers`, also `a ** b` -> `_rt.fpow(a, b)` wherever `b` may be negative: Python raises
    `ZeroDivisionError` for `0.0 ** -0.5`, NumPy (and Numba) give inf."""

    def __init__(self, powers: bool = False) -> None:
        self.powers = powers

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.op, ast.Div) and zero_divisor(node.right):
            return ast.copy_location(rt_call("fdiv", node.left, node.right), node)
        if self.powers and isinstance(node.op, ast.Pow) and negative_power(node.right):
            return ast.copy_location(rt_call("fpow", node.left, node.right), node)
        return node


def rt_call(fn: str, *args: ast.expr) -> ast.Call:
    """The call `_rt.<fn>(*args)` as an AST node."""
    return ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), fn, ast.Load()), list(args), [])


def _is_int(v: Value) -> bool:
    return isinstance(v.type, T.Scalar) and v.type.kind == "int"


def _int_power(op: Op, pos: list[str]) -> str:
    """`a ** b` of two ints as Python computes it, in both backends. A negative constant `b`
    gives a float, which Python computes as `float(a) ** float(b)` (to the bit; Numba's int power
    would truncate it to an int: `2 ** -2` is 0 there). An exponent that is not a constant is
    `_rt.int_pow`: Python's power, and an error where it is negative (the program typed the
    power as an int)."""
    a, b = pos
    y = op.args[1]
    if y.is_const and isinstance(y.const, int) and y.const >= 0:
        return f"{a} ** {b}"
    if y.is_const and isinstance(y.const, int):
        return f"float({a}) ** float({b})"
    return f"_rt.int_pow({a}, {b})"
