"""Lowering assignments (a mixin of `Lowerer`).

Contract: `assign(target, value)` binds a name (renaming a value with a generic hint after
it), unpacks tuples (and records that are tuples), stores into arrays (`store`: a `setitem`
op), into lists and dicts built in the function (containers.py), into records and their
fields (objects.py), and writes names declared `nonlocal` into their closure cells.
`aug_assign` lowers `x op= y`: on an array (a name, an attribute, a basic-index view) it
writes the array's memory in place (`inplace`: `numpy.add(x, y, out=x)`, ...); an advanced
index is NumPy's read, op, write; numbers are rebound; `+=` on a list is refused (zymo's
lists do not grow in place).
"""
from __future__ import annotations

import ast
from typing import Any

from ..errors import UnsupportedSyntax, ZymoSourceError, ZymoTypeError
from ..ir import types as T
from ..ir.core import Value
from ..rules import indexing
from . import objects
from .bindings import S
from .containers import Ref
from .expr import load_hint
from .host import LoweringHost
from .syntax import BINOPS

INPLACE = {"add": "numpy.add", "sub": "numpy.subtract", "mul": "numpy.multiply",
           "truediv": "numpy.divide", "pow": "numpy.power", "matmul": "numpy.matmul"}


class AssignLowering(LoweringHost):
    def assign(self, target: ast.expr, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if target.id in self.frame.nonlocals:
                self.assign_nonlocal(target.id, value, node)
                return
            if isinstance(value, Value) and value.hint in ("t", "c", "v"):
                value.hint = target.id
            self.frame.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, objects.Obj) and objects.as_tuple(value) is not None:
                value = objects.as_tuple(value)
            if not isinstance(value, tuple):
                raise self.error(UnsupportedSyntax, "only tuples can be unpacked here", node,
                                 hint="index the array explicitly: a, b = x[0], x[1]")
            if len(value) != len(target.elts):
                raise self.error(ZymoSourceError, f"cannot unpack {len(value)} values into {len(target.elts)}", node)
            for t, v in zip(target.elts, value):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            obj = self.expr(target.value)
            if isinstance(obj, Ref):
                self.container_setitem(obj, target, value, node)
                return
            if self.is_record(obj):
                objects.set_field_binding(self, obj, self._dict_key(target.slice), value, node, "item")
                return
            index = self.index(target.slice)
            self.store(obj, index, value, target)
        elif isinstance(target, ast.Attribute):
            objects.set_field_binding(self, self.expr(target.value), target.attr, value, node)
        else:
            raise self.error(UnsupportedSyntax, f"cannot assign to {type(target).__name__}", node)

    def store(self, obj: Any, index: tuple, value: Any, node: ast.AST) -> None:
        if not isinstance(obj, Value) or not T.is_memory(obj.type):
            raise self.error(UnsupportedSyntax, "item assignment needs an array or a list", node,
                             "tuples and scalars are immutable")
        value = self.as_value(value, node)
        if isinstance(obj.type, T.Array) and isinstance(value.type, T.Array):
            pass
        elif isinstance(obj.type, T.Array) and not isinstance(value.type, T.Scalar):
            raise self.error(ZymoTypeError, f"cannot store a {value.type} into an array", node)
        self.b.setitem(obj, index, value, self.loc(node))

    def aug_assign(self, s: ast.AugAssign) -> None:
        if self.container_aug(s):  # lists and dicts built in the function (containers.py)
            return
        key = BINOPS.get(type(s.op))
        if key is None:
            raise self.error(UnsupportedSyntax, f"operator {type(s.op).__name__} is not supported", s)
        rhs = self.expr(s.value)
        t = s.target
        if isinstance(t, ast.Name):
            cur = self.lookup(t.id, t)
            self._no_list_iadd(cur, s)
            if isinstance(cur, Value) and isinstance(cur.type, T.Array):
                self.inplace(cur, key, rhs, s)  # x += y on an array writes x's memory
            elif t.id in self.frame.nonlocals:
                self.assign_nonlocal(t.id, self.binop(key, cur, rhs, s), s)
            else:
                self.frame.env[t.id] = self.binop(key, cur, rhs, s)
        elif isinstance(t, ast.Attribute) or (isinstance(t, ast.Subscript) and self.is_record(self.expr(t.value))):
            cur = self.expr(t)  # obj.x += y: an array updates in place, a float is stored back
            self._no_list_iadd(cur, s)
            if isinstance(cur, Value) and isinstance(cur.type, T.Array):
                self.inplace(cur, key, rhs, s)
            else:
                self.assign(t, self.binop(key, cur, rhs, s), s)
        elif isinstance(t, ast.Subscript):
            obj = self.expr(t.value)
            index = self.index(t.slice)
            if not isinstance(obj, Value):
                raise self.error(UnsupportedSyntax, "augmented item assignment needs an array or list", s)
            cur = self.b.getitem(obj, index, self.loc(s),
                                 load_hint(t.value, obj) if isinstance(obj.type, T.Array) else "ld")
            if any(indexing.is_index_array(ix) for ix in index):
                # x[idx] += v with an advanced index is NumPy's read (a copy), add, write:
                # a repeated index adds once (the last write wins)
                self.store(obj, index, self.binop(key, cur, rhs, s), s)
            elif isinstance(cur.type, T.Array):
                self.inplace(cur, key, rhs, s)  # a view: writes through to obj
            else:
                self.store(obj, index, self.binop(key, cur, rhs, s), s)
        else:
            raise self.error(UnsupportedSyntax, "augmented assignment to this target is not supported", s)

    def _no_list_iadd(self, cur: Any, s: ast.AugAssign) -> None:
        """`a += b` on a list extends it in place (every alias sees it); zymo's lists do not
        grow, and a rebinding `a = a + b` would leave the aliases behind: refused."""
        if (isinstance(cur, Value) and isinstance(cur.type, T.List)) or (isinstance(cur, S) and type(cur.obj) is list):
            raise self.error(UnsupportedSyntax, "augmented assignment to a list (in-place list.extend) is not "
                             "supported", s, hint="build a new list instead: a = a + b, or write into an array")

    def assign_nonlocal(self, name: str, value: Any, node: ast.AST) -> None:
        f = self.frame
        cell = f.src.cell(name) if f.src is not None else None
        if cell is None:
            raise self.error(UnsupportedSyntax, f"nonlocal {name!r} in a function defined inside the "
                             "differentiated function is not supported", node,
                             hint="return the new value from the inner function instead")
        objects.cell_write(self, cell, name, value, node)

    @staticmethod
    def is_record(b: Any) -> bool:
        """A dict or record binding (an argument record, or a captured dict)."""
        return isinstance(b, objects.Obj) or (isinstance(b, S) and type(b.obj) is dict)

    def _dict_key(self, node: ast.expr) -> str:
        b = self.expr(node)
        if isinstance(b, S) and isinstance(b.obj, str):
            return b.obj
        raise self.error(UnsupportedSyntax, "dicts can only be indexed by constant strings here", node,
                         hint="write the key out: d['name']")

    def inplace(self, arr: Value, key: str, rhs: Any, node: ast.AST) -> None:
        np_key = INPLACE.get(key)
        if np_key is None:
            raise self.error(UnsupportedSyntax, f"in-place {key} on arrays is not supported", node)
        self.b.prim(np_key, [arr, rhs], {}, self.loc(node), out=arr)
