"""The source rewrites by which the program Numba compiles differs from the one Python runs.

Contract: `numba_source(src, facts)` is `src` after `drop_errstate`, `plain_divisions`,
`whole_views`, `fresh_lists`, `accumulating_products`, `elementwise_runs` (`ew_rewrite.py`,
`ew_groups.py`), `full_masks`, `ieee_divisions` and `nonneg_indices`, each a function of source text to
source text that edits only the statements it rewrites, in place on their lines (line numbers
stay those of `src`), and that keeps NumPy's semantics under Numba. `SourceFacts` is what the
transform knows of the program's names. The Python backend, and second order, run `src` as it is.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from zymo.runtime import registry
from zymo.transform.emit import IEEEDivisions, zero_divisor
from zymo.transform.emit import rt_call as _rt_call

from ... import pyast
from .ew_rewrite import elementwise_runs
from .lines import after, alone, before, splice


def accumulating_products(src: str) -> str:
    """`d += _rt.dot_vjp_a(g, a, b)` (and `dot_vjp_b`, `matmul_vjp_*`) with a plain name `d`
    becomes `d = _rt.acc_dot_vjp_a(d, g, a, b)`, which adds the product into `d` in place (one
    BLAS call with beta = 1, or a loop) instead of allocating it first; for a float `d` it
    returns the sum, as `+=` rebinds. One of the two rewrites (`numba_source`) by which the
    source Numba compiles differs from the one the Python backend runs."""
    lines = src.split("\n")
    for node in pyast.walk(ast.parse(src)):
        if not (isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add)
                and isinstance(node.target, ast.Name) and isinstance(node.value, ast.Call)):
            continue
        f = node.value.func
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_rt"
                and registry.is_product_vjp(f.attr) and len(node.value.args) == 3 and not node.value.keywords
                and alone(node, lines)):
            d = node.target.id
            args = ", ".join(ast.unparse(a) for a in node.value.args)
            line = lines[node.lineno - 1]
            lines[node.lineno - 1] = splice(line, node.col_offset, node.end_col_offset,
                                             f"{d} = _rt.acc_{f.attr}({d}, {args})")
    return "\n".join(lines)


def whole_views(src: str) -> str:
    """Every read of `x[...]` (`x` a name) becomes `x`: the same elements, and for NumPy the
    same memory. Numba types `x[...]` of a 0-d array as a number, which it then cannot lower
    (a `NotImplementedError`, not a typing error); of any other array it is a view of all of
    `x`, which `x` is already. Writes (`x[...] = e`, `x[...] += e`) stay."""
    if "[...]" not in src:
        return src
    lines = src.split("\n")
    found = [n for n in pyast.walk(ast.parse(src)) if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load)
             and isinstance(n.value, ast.Name) and isinstance(n.slice, ast.Constant) and n.slice.value is Ellipsis
             and n.lineno == n.end_lineno]
    for n in sorted(found, key=lambda n: (n.lineno, -n.col_offset)):
        line = lines[n.lineno - 1]
        lines[n.lineno - 1] = splice(line, n.col_offset, n.end_col_offset, n.value.id)
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
        text = ast.unparse(_PlainDivisions().visit(pyast.clone(node)))
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
        lines[line - 1] = splice(lines[line - 1], col, end, text)
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
                   for n in pyast.walk(e))

    class Outermost(ast.NodeVisitor):
        def visit_BinOp(self, node: ast.BinOp) -> None:
            if node.lineno == node.end_lineno and divides(node):
                text = ast.unparse(IEEEDivisions().visit(pyast.clone(node)))
                edits.append((node.lineno, node.col_offset, node.end_col_offset, text))
            else:
                self.generic_visit(node)

        def visit_AugAssign(self, node: ast.AugAssign) -> None:
            if (isinstance(node.op, ast.Div) and isinstance(node.target, ast.Name) and node.target.id in floats
                    and zero_divisor(node.value) and node.lineno == node.end_lineno):
                name = node.target.id
                value = IEEEDivisions().visit(pyast.clone(node.value))
                text = f"{name} = {ast.unparse(_rt_call('fdiv', ast.Name(name, ast.Load()), value))}"
                edits.append((node.lineno, node.col_offset, node.end_col_offset, text))
            else:
                self.generic_visit(node)

    Outermost().visit(ast.parse(src))
    for line, col, end, text in sorted(edits, reverse=True):  # right to left within a line
        lines[line - 1] = splice(lines[line - 1], col, end, text)
    return "\n".join(lines)


@dataclass(frozen=True)
class SourceFacts:
    """What the transform knows about the names of a generated program (`api._compile`):
    `floats`: only float adjoints; `numbers`: only numbers (`Namer.numbers`); `ints`: only
    ints (`Reverse.int_names`), declared `intp`; `arrays`: only arrays (`Namer.arrays`);
    `nonneg`: ints never negative when used as indices (`analysis.bounds.index_names`);
    `ndims`: `(name, rank)` of arrays whose rank is known (`Namer.ndims`: `a[i]` of a matrix
    is then a row, a view the elementwise statements may write)."""
    floats: frozenset[str] = frozenset()
    numbers: frozenset[str] = frozenset()
    ints: frozenset[str] = frozenset()
    arrays: frozenset[str] = frozenset()
    nonneg: frozenset[str] = frozenset()
    ndims: tuple[tuple[str, int], ...] = ()


def numba_source(src: str, facts: SourceFacts = SourceFacts()) -> str:
    """The source Numba compiles: `src` after `plain_divisions`, `whole_views`, `fresh_lists`,
    `accumulating_products`, `elementwise_runs` (`elementwise_statements` and its runs fused:
    loops in place of temporaries and array expressions), `full_masks`, `ieee_divisions` and
    `nonneg_indices` (the Python backend, and second order, run `src` as it is). Statements of
    names that hold only floats or only numbers (`facts`) are left as they are (nothing to
    gain; an intrinsic costs compile time)."""
    src = drop_errstate(src)
    rewritten = elementwise_runs(accumulating_products(fresh_lists(whole_views(plain_divisions(src)))),
                                 facts.floats | facts.numbers, facts.arrays, dict(facts.ndims), facts.nonneg)
    rewritten = full_masks(rewritten, facts.arrays, dict(facts.ndims))
    return nonneg_indices(ieee_divisions(rewritten, facts.floats), facts.nonneg, facts.arrays)


def full_masks(src: str, arrays: frozenset[str], ndims: dict[str, int]) -> str:
    """`x[m]` -> `_rt.get_item(x, m)`, `x[m] = v` -> `_rt.set_item(x, m, v)` and `x[m] op= v`
    -> `_rt.set_item(x, m, _rt.get_item(x, m) op v)` where `x` is an array of rank 2 or more
    and `m` an array of the same rank, or of a rank not known (`ndims`), or `x` an expression
    (`np.transpose(A)`, `A[1:, :]`) and `m` an array of rank 2 or more: a boolean mask of
    `x`'s shape, which Numba does not take (an `AssertionError` while typing); the twins run it
    as loops in C order, and any other index as Numba's own `x[m]`
    (`twins/indexing.py`). Every store through one array index (`x[m] = v`, any rank) is
    written `_rt.set_item` too: a mask's twin refuses a value that shares memory with `x`
    (NumPy stores it in place, element by element; Numba would copy it first). Only simple
    statements are rewritten, each printed again on its lines; the rest of `src` stays as it is.
    After `elementwise_runs`, which reads the stores as they are."""
    if not arrays:
        return src

    def masked(node: ast.AST) -> bool:
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and node.slice.id in arrays):
            return False
        if not isinstance(node.value, ast.Name):  # `np.transpose(A)[m]`, `A[1:, :][m]`: by the mask's rank
            return ndims.get(node.slice.id, 0) >= 2
        rank = ndims.get(node.value.id)
        return rank is not None and rank >= 2 and ndims.get(node.slice.id, rank) == rank

    class _Rewrite(ast.NodeTransformer):
        def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
            self.generic_visit(node)
            if masked(node) and isinstance(node.ctx, ast.Load):
                return _rt_get(node)
            return node

    def _rt_get(node: ast.Subscript) -> ast.expr:
        return ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), "get_item", ast.Load()),
                        [pyast.clone(node.value), node.slice], [])

    def _rt_set(target: ast.Subscript, value: ast.expr) -> ast.stmt:
        base = pyast.clone(target.value)
        for n in pyast.walk(base):
            if hasattr(n, "ctx"):
                n.ctx = ast.Load()  # `A[1:, :][m] = v`: the view, read
        call = ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), "set_item", ast.Load()),
                        [base, target.slice, value], [])
        return ast.Expr(call)

    def stored(node: ast.AST) -> bool:  # any store through one array index: masks are checked for overlap
        return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and node.slice.id in arrays

    simple = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)
    lines = src.split("\n")
    edits: list[tuple[int, int, str]] = []
    for st in pyast.walk(ast.parse(src)):
        targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AugAssign) else []
        if not isinstance(st, simple) or not (any(masked(n) for n in pyast.walk(st)) or any(map(stored, targets))):
            continue
        new = _Rewrite().visit(pyast.clone(st))
        if isinstance(new, ast.Assign) and len(new.targets) == 1 and stored(new.targets[0]):
            new = _rt_set(new.targets[0], new.value)  # type: ignore[arg-type]
        elif isinstance(new, ast.AugAssign) and stored(new.target):
            target = new.target
            new = _rt_set(target, ast.BinOp(_rt_get(target), new.op, new.value))  # type: ignore[arg-type]
        if any(masked(n) for n in pyast.walk(new)):
            continue  # a store it cannot spell (`a[m], b = ...`): Numba's error as before
        indent = lines[st.lineno - 1][:st.col_offset]
        edits.append((st.lineno, st.end_lineno or st.lineno, indent + ast.unparse(new)))
    for first, last, text in sorted(edits, reverse=True):
        lines[first - 1:last] = [text] + [""] * (last - first)  # the lines after keep their numbers
    return "\n".join(lines)


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
    for node in pyast.walk(ast.parse(src)):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in arrays:
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            edits += [(k.lineno, k.col_offset, k.end_col_offset) for k in parts
                      if isinstance(k, ast.Name) and k.id in nonneg]
    for line, col, end in sorted(edits, reverse=True):  # right to left within a line
        text = lines[line - 1]
        lines[line - 1] = splice(text, col, end, f"_rt.nonneg({after(before(text, end), col)})")
    return "\n".join(lines)
