"""Walking and copying Python syntax trees (`ast`), as the frontend and the codegen passes do
hundreds of thousands of times per derivative.

Contract: `walk(node)` yields the nodes `ast.walk(node)` yields, in the same order (breadth
first: the node, then its children field by field, list items in order, each node once per
place it occupies), expression contexts (`ast.Load()`) included. `clone(node)` is a deep copy
of a tree, or of a list of trees, as `copy.deepcopy` makes it (anything else, `None` among them,
is returned as it is), except that expression contexts
(`ast.Load`, `ast.Store`, `ast.Del`: no fields, never changed in place) are shared and a node
that appears at two places of the tree is copied twice; every other attribute a node has (its
fields and positions) is carried over as it is.

Why: `ast.walk` goes through two generators per node (`iter_child_nodes`, `iter_fields`) and
`copy.deepcopy` through its memo and `__reduce_ex__`; on a kernel's program (about 200,000
nodes visited by the passes) these took about a sixth of zymo's pipeline before a first call.
Here a node's fields come from a table per node class and a copy is one dictionary per node.
"""
from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from typing import Any, TypeVar

_AST = ast.AST
_CONTEXT = ast.expr_context
_FIELDS: dict[type, tuple[str, ...]] = {}

T = TypeVar("T")


def _fields(cls: type) -> tuple[str, ...]:
    fs = _FIELDS.get(cls)
    if fs is None:
        fs = _FIELDS[cls] = tuple(getattr(cls, "_fields", ()))
    return fs


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of the tree `node`, as `ast.walk` yields them (module contract)."""
    todo = deque((node,))
    pop, push = todo.popleft, todo.append
    while todo:
        node = pop()
        for name in _FIELDS.get(node.__class__) or _fields(node.__class__):
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, _AST):
                        push(item)
            elif isinstance(value, _AST):
                push(value)
        yield node


def clone(tree: T) -> T:
    """A deep copy of `tree`: a node, or a list of nodes; `None` stays `None` (module contract)."""
    if tree.__class__ is list:
        return [_clone(x) if isinstance(x, _AST) else x for x in tree]  # type: ignore[return-value, attr-defined]
    return _clone(tree) if isinstance(tree, _AST) else tree


def _clone(node: Any) -> Any:
    if isinstance(node, _CONTEXT):
        return node
    cls = node.__class__
    new = cls.__new__(cls)
    d = new.__dict__
    for key, value in node.__dict__.items():
        if value.__class__ is list:
            d[key] = [_clone(x) if isinstance(x, _AST) else x for x in value]
        elif isinstance(value, _AST):
            d[key] = _clone(value)
        else:
            d[key] = value
    return new
