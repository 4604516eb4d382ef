"""Memory layouts of the snapshots a "kernels" program makes, chosen for the products that read them.

Contract: `product_layouts(tree)` changes, in place, each statement `S = Y.copy()` at the top
level of a function of `tree` (a snapshot the reverse transform makes of an array the primal
overwrites) to `S = _rt.product_copy(Y)` (a column-major copy where `Y` is small, a row-major
one otherwise) where every read of `S` in that function is one of

- the left operand of a matrix product, `S[...] @ Z` (`S` sliced or whole);
- the transposed right operand of one, `Z @ S[...].T`;
- an element read `S[i, j]` inside a loop, a number (the loops a guard falls back to, and the
  scalar loop nests compiled as kernels: Numba compiles them for the layout they get);
- an operand of the guard `_rt.blas_ready` (in its tuples) or of `np.isfinite` without `out=`
  (what they compute does not depend on a layout);

and `S` is assigned nowhere else. Returns whether it changed anything. The values are the
same in either layout: a copy holds the same elements, an element read reads the same
number, and a matrix product is BLAS's sum of the same products in its order (the contract
of every product the "kernels" backend writes).

`nt_products(tree)` writes every other product `X @ Z.T` of two plain operands (names or
sliced names; `X` not such a snapshot) outside loops as `_rt.dot_nt(X, Z)`: the product itself, `Z.T` copied row-major
first where both are small row-major float matrices (the same products, in BLAS's order).

Why: for C-ordered operands NumPy hands OpenBLAS `X @ Z.T` as a product whose both operands
are traversed along their rows, which OpenBLAS runs a third slower on small matrices (trmm's
adjoint at n = 60: 12.8 us, against 8.8 us with `X` column-major; the copy in that order costs
0.3 us more). From about n = 120 on the products run alike and the column-major copy costs
more (twice the row-major one at n = 250): `_rt.product_copy` copies column-major only up to
8192 elements. For operands zymo does not make, a row-major copy of `Z.T` costs 1-2 us and
saves 1.5-2.2 us at n = 60 (gemm's, symm's and correlation's adjoints), 8 us at 100 x 80.
"""
from __future__ import annotations

import ast

from .. import pyast


def product_layouts(tree: ast.Module) -> bool:
    """Snapshots read only by products that run faster column-major, made so (module contract)."""
    changed = False
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for st in fn.body:
            name = _snapshot(st)
            if name is not None and _only_products(fn, name, st):
                st.value = ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), "product_copy", ast.Load()),  # type: ignore[attr-defined]
                                    [st.value.func.value], [])  # type: ignore[attr-defined]
                changed = True
    return changed


def nt_products(tree: ast.Module) -> bool:
    """Each product `X @ Z.T` of two plain operands (names, or names sliced) outside loops, in
    the functions of `tree`, as `_rt.dot_nt(X, Z)`, in place (module contract); whether it
    changed anything."""
    changed = False
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            rw = _NT({st.targets[0].id for st in fn.body if isinstance(st, ast.Assign)  # type: ignore[attr-defined]
                      and isinstance(st.value, ast.Call) and ast.unparse(st.value.func) == "_rt.product_copy"})
            fn.body = [rw.visit(st) for st in fn.body]
            changed |= rw.changed
    return changed


class _NT(ast.NodeTransformer):
    def __init__(self, column_major: set[str]) -> None:
        self.changed = False
        self.column_major = column_major  # `product_layouts`' snapshots: their products stay
    def visit_For(self, n: ast.For) -> ast.AST:
        return n  # the loops: compiled as kernels, where `_rt.dot_nt` is not

    def visit_While(self, n: ast.While) -> ast.AST:
        return n

    def visit_BinOp(self, n: ast.BinOp) -> ast.AST:
        self.generic_visit(n)
        left = _named(n.left)
        if (isinstance(n.op, ast.MatMult) and left is not None and left.id not in self.column_major
                and _transposed(n.right) and _named(n.right.value) is not None):  # type: ignore[attr-defined]
            self.changed = True
            return ast.Call(ast.Attribute(ast.Name("_rt", ast.Load()), "dot_nt", ast.Load()),
                            [n.left, n.right.value], [])  # type: ignore[attr-defined]
        return n


def _snapshot(st: ast.stmt) -> str | None:
    """`S` where `st` is `S = Y.copy()` (`Y` a name), else None."""
    if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
            and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Attribute)
            and st.value.func.attr == "copy" and isinstance(st.value.func.value, ast.Name)
            and not st.value.args and not st.value.keywords):
        return st.targets[0].id
    return None


def _only_products(fn: ast.FunctionDef, name: str, made: ast.stmt) -> bool:
    """Whether every read of `name` in `fn` is one the module contract lists, at least one of
    them a product, and `made` its only assignment."""
    allowed: set[int] = set()  # ids of the Name nodes read in a listed way
    products = 0
    parents = {id(c): p for p in pyast.walk(fn) for c in ast.iter_child_nodes(p)}
    for n in pyast.walk(fn):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            left, right = _named(n.left), _named(n.right.value) if _transposed(n.right) else None
            for got in (left, right):
                if got is not None and got.id == name:
                    allowed.add(id(got))
                    products += 1
        if isinstance(n, ast.Call) and ast.unparse(n.func) in _LAYOUT_FREE and not n.keywords:
            for a in n.args:  # the operands themselves, or inside the tuples of `blas_ready`'s
                allowed |= {id(m) for m in _plain(a) if m.id == name}
        if isinstance(n, (ast.For, ast.While)):
            for m in pyast.walk(n):  # `S[i, j]`: indices, no slice, read as a number
                if (isinstance(m, ast.Subscript) and isinstance(m.ctx, ast.Load) and isinstance(m.value, ast.Name)
                        and m.value.id == name and not any(isinstance(k, ast.Slice) for k in pyast.walk(m.slice))
                        and not isinstance(parents.get(id(m)), (ast.Attribute, ast.Subscript, ast.Call))):
                    allowed.add(id(m.value))
    for n in pyast.walk(fn):
        if isinstance(n, ast.Name) and n.id == name:
            if isinstance(n.ctx, ast.Store):
                if not (isinstance(made, ast.Assign) and n is made.targets[0]):
                    return False
            elif id(n) not in allowed:
                return False
    return products > 0


_LAYOUT_FREE = {"_rt.blas_ready", "np.isfinite"}  # calls whose results do not depend on a layout


def _plain(e: ast.expr) -> list[ast.Name]:
    """The names `e` holds as itself, sliced (`S[...]`) or in tuples of them (not in a call,
    an attribute or an arithmetic expression)."""
    if isinstance(e, ast.Tuple):
        return [m for x in e.elts for m in _plain(x)]
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name):
        return [e.value]
    return [e] if isinstance(e, ast.Name) else []


def _named(e: ast.expr) -> ast.Name | None:
    """The name `S` of the operand `S` or `S[...]`, else None."""
    if isinstance(e, ast.Subscript):
        e = e.value
    return e if isinstance(e, ast.Name) else None


def _transposed(e: ast.expr) -> bool:
    return isinstance(e, ast.Attribute) and e.attr == "T"
