"""A readable, deterministic text form of the IR.

Contract: `print_function(fn)` depends only on the IR (values are numbered in
order of appearance, so the text is stable across runs and usable in golden
files). `annotate` maps a value to a short tag (activity, cache decision) that is
printed after the op, as Enzyme's analysis printers do.
"""
from __future__ import annotations

from collections.abc import Callable

from .core import Block, Function, Op, Value


class _Names:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.used: dict[str, int] = {}

    def __call__(self, v: Value) -> str:
        if v.id not in self.names:
            n = self.used.get(v.hint, 0)
            self.used[v.hint] = n + 1
            self.names[v.id] = f"%{v.hint}" if n == 0 else f"%{v.hint}.{n}"
        return self.names[v.id]


def _tree(tree, op: Op, name) -> str:
    tag = tree[0]
    if tag == "v":
        return name(op.args[tree[1]])
    if tag == "c":
        return repr(tree[1]) if not isinstance(tree[1], type(Ellipsis)) else "..."
    if tag == "t":
        inner = ", ".join(_tree(t, op, name) for t in tree[1])
        return f"({inner},)" if len(tree[1]) == 1 else f"({inner})"
    if tag == "s":
        parts = ["" if t == ("c", None) else _tree(t, op, name) for t in tree[1:]]
        return ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
    raise AssertionError(tree)


def _index(op: Op, name) -> str:
    tree = op.attrs["index"]
    if tree[0] == "t":
        return ", ".join(_tree(t, op, name) for t in tree[1])
    return _tree(tree, op, name)


def print_function(fn: Function, annotate: Callable[[Value], str] | None = None) -> str:
    name = _Names()
    params = ", ".join(f"{name(p)}: {p.type}" for p in fn.params)
    lines = [f"func {fn.name}({params})"]
    _block(fn.body, 1, lines, name, annotate)
    return "\n".join(lines)


def _block(block: Block, depth: int, lines: list[str], name, annotate) -> None:
    for op in block.ops:
        _op(op, depth, lines, name, annotate)


def _op(op: Op, depth: int, lines, name, annotate) -> None:
    pad = "  " * depth
    res = ", ".join(f"{name(r)}: {r.type}" for r in op.results)
    lhs = f"{res} = " if res else ""
    a = [name(v) for v in op.args]
    k = op.kind
    if k == "const":
        body = f"const {op.attrs['value']!r}"
    elif k == "prim":
        parts = [_tree(t, op, name) for t in op.attrs["pos"]]
        parts += [f"{kw}={_tree(t, op, name)}" for kw, t in op.attrs["kw"]]
        body = f"{op.attrs['key']}({', '.join(parts)})"
    elif k == "getitem":
        body = f"getitem {a[0]}[{_index(op, name)}]"
    elif k == "setitem":
        body = f"setitem {a[0]}[{_index(op, name)}] <- {a[1]}"
    elif k in ("yield", "return", "condition"):
        body = f"{k} {', '.join(a)}".rstrip()
    elif k == "for":
        body_block = op.regions[0]
        iv = name(body_block.args[0])
        carries = ", ".join(
            f"{name(b)} = {x}" for b, x in zip(body_block.args[1:], a[3:], strict=True)
        )
        body = f"for {iv} in range({a[0]}, {a[1]}, {a[2]}) carry({carries}):"
    elif k == "while":
        carries = ", ".join(
            f"{name(b)} = {x}" for b, x in zip(op.regions[0].args, a, strict=True)
        )
        body = f"while carry({carries}):"
    elif k == "if":
        body = f"if {a[0]}:"
    else:
        body = f"{k} {', '.join(a)}"
    tag = ""
    if annotate is not None:
        tags = [annotate(r) for r in op.results]
        tags = [t for t in tags if t]
        if tags:
            tag = "   {" + "; ".join(tags) + "}"
    lines.append(f"{pad}{lhs}{body}{tag}")
    if k == "for":
        _block(op.regions[0], depth + 1, lines, name, annotate)
    elif k == "while":
        cargs = ", ".join(name(b) for b in op.regions[1].args)
        lines.append(f"{pad}  cond:")
        _block(op.regions[0], depth + 2, lines, name, annotate)
        lines.append(f"{pad}  do({cargs}):")
        _block(op.regions[1], depth + 2, lines, name, annotate)
    elif k == "if":
        _block(op.regions[0], depth + 1, lines, name, annotate)
        lines.append(f"{pad}else:")
        _block(op.regions[1], depth + 1, lines, name, annotate)
