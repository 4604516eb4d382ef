"""Lists appended to in a loop of run-time length: preallocated and filled (a mixin of `Lowerer`).

Contract: `fill_loop` lowers a `for` loop (over `range` bounds or sequences known only at run
time) that appends to static lists built before it (`fill_candidates`): each such list
becomes an array allocated before the loop with room for every append (the trip count times
the append calls written in the body, plus the items it had), and each `append` in the body
(`fill_append`) stores the item
- at the iteration's index, when the list is appended to once per iteration, unconditionally,
  at the body's top level, and named nowhere else in the body; or
- at a carried count (the list is `buf[:count]`, which the body may read) otherwise.
Arrays appended once per iteration (of one dtype and ndim) make a list of references
(`zymo.list_of`) instead. The allocation op carries `attrs["fills_list"]` for
`zymo.cache_report`. Items of mixed or unsupported types, arrays appended conditionally, and
appends through another name or in a nested loop are refused with the line and a hint.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, cast

from .. import pyast
from ..errors import UnsupportedCall, UnsupportedSyntax, ZymoTypeError
from ..ir import types as T
from ..ir.core import Block, Value
from .bindings import S
from .containers import COUNT, Ref, is_counted
from .frame import Frame
from .host import LoweringHost
from .syntax import assigned_names, contains


@dataclass(eq=False)
class Fill:
    """A runtime list being filled by one loop (`fill_loop`)."""
    ref: Ref
    buf: Value
    depth: int  # builder depth of the loop's body block
    start: Value
    step: Value
    k: int  # items before the loop
    line: int
    counted: bool = False  # stored at a carried count (else at the iteration's index)
    sites: list = field(default_factory=list)  # ids of the append calls written in the body
    keep: list = field(default_factory=list)  # those calls (kept alive: ids are reused)
    types: list = field(default_factory=list)  # of the items before the loop
    site_types: dict = field(default_factory=dict)  # append call id -> type of its item
    seen: list = field(default_factory=list)  # body blocks that appended (kept alive: ids are reused)


class FillLowering(LoweringHost):
    def fill_candidates(self, s: ast.For) -> list[tuple[Ref, str, bool, list]]:
        """The static lists a for loop appends to, outside loops nested in its body: (ref, name,
        counted, append calls). Not `counted`: one append per iteration, unconditionally, at
        the body's top level (no break/continue/return, the list named nowhere else in the
        body): stored at the iteration's index. `counted`: any other number of such appends
        (conditional ones included), reads of the list in the body allowed: stored at a
        carried count, the list being `buf[:count]`."""
        exits = contains(s.body, (ast.Break, ast.Continue), loops=False) or \
            contains(s.body, (ast.Return,), loops=True)
        sites: dict[str, list] = {}
        nested: set[str] = set()
        stack: list[tuple[ast.AST, bool]] = [(n, False) for n in s.body]
        while stack:
            n, inner = stack.pop()
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append" \
                    and isinstance(n.func.value, ast.Name):
                (nested.add(n.func.value.id) if inner else sites.setdefault(n.func.value.id, []).append(n))
            deeper = inner or isinstance(n, (ast.For, ast.While, ast.FunctionDef, ast.Lambda, ast.ListComp,
                                             ast.GeneratorExp, ast.DictComp, ast.SetComp))
            stack.extend((c, deeper) for c in ast.iter_child_nodes(n))
        out = []
        assigned = assigned_names(s.body)
        for name, calls in sites.items():
            b = self.peek(name)
            if not isinstance(b, Ref) or b.kind != "list" or b.key in self.fills or name in nested \
                    or name in assigned:
                continue
            c = self.frame.env.get(b.key)
            if not isinstance(c, tuple) or is_counted(c):
                continue
            uses = sum(1 for n in pyast.walk(ast.Module(body=s.body, type_ignores=[]))
                       if isinstance(n, ast.Name) and n.id == name)
            top = not exits and len(calls) == 1 and uses == 1 and any(
                isinstance(st, ast.Expr) and st.value is calls[0] for st in s.body) and \
                len(calls[0].args) == 1 and not calls[0].keywords
            out.append((b, name, not top, calls))
        return out

    def fill_loop(self, s: ast.For, bounds: list[Value] | None, desc: tuple | None) -> bool:
        """Lists appended to in a loop of run-time length (`fill_candidates`): each becomes an array
        allocated before the loop with room for every append (the trip count times the append
        calls, plus the items it had), the appended value stored at the iteration's index or at a
        carried count. Arrays appended once per iteration (of one dtype and ndim) make a list
        (`zymo.list_of`) of references instead, as a list argument is."""
        if desc is not None and not all(isinstance(q, Value) for q in self._seqs(desc)):
            return False
        found = self.fill_candidates(s)
        if not found:
            return False
        loc = self.loc(s)
        parent = self.b.block
        at = len(parent.ops)
        fills = []
        for ref, name, counted, calls in found:
            pre = self.frame.env[ref.key]
            buf = Value(T.Array("float64", 1), name if not name.startswith("$") else "lst")
            if bounds is None:
                start, step = self.b.const(0, loc, "start"), self.b.const(1, loc, "step")
            else:
                start, step = bounds[0], bounds[2]
            fill = Fill(ref, buf, len(self.b.blocks) + 1, start, step, len(pre), s.lineno, counted=counted,
                         sites=[id(c) for c in calls], keep=calls)
            for x in pre:
                fill.types.append(self._fill_type(x, s))
            self.fills[ref.key] = fill
            if counted:
                start = self.b.const(len(pre), loc, "count")
                self.set_contents(ref, (S(COUNT), start))  # the buffer itself is never rebound
            else:
                self.set_contents(ref, buf)
            fills.append((fill, pre, calls))
        try:
            if bounds is not None:
                self.lower_range_loop(s, bounds, lambda i: self.assign(s.target, i, s))
            else:
                self.lower_sequence_loop(s, cast(tuple, desc))  # no bounds: a sequence
        finally:
            for fill, _, _ in fills:
                self.fills.pop(fill.ref.key, None)
        blk = self.b.push(Block())
        try:
            if bounds is not None:
                trips = self.b.prim("zymo.trip", list(bounds), {}, loc, "trips")
            else:
                lens = []
                for q in self._seqs(cast(tuple, desc)):
                    lens.append(self.b.prim("zymo.dim", [q, 0], {}, loc, "n") if isinstance(q.type, T.Array)
                                else self.b.prim("builtins.len", [q], {}, loc, "n"))
                trips = lens[0]
                for m in lens[1:]:
                    trips = self.b.prim("builtins.min", [trips, m], {}, loc, "n")
            for fill, pre, calls in fills:
                self._allocate(fill, pre, calls, trips, s)
        finally:
            self.b.pop()
        parent.ops[at:at] = blk.ops
        for fill, _, _ in fills:
            if fill.counted:  # the list is the part of the buffer filled
                c = self.frame.env[fill.ref.key]
                self.set_contents(fill.ref, self.b.getitem(fill.buf, (slice(None, c[1], None),), loc,
                                                           fill.buf.hint))
        return True

    def _allocate(self, fill: Fill, pre: tuple, calls: list, trips: Value, s: ast.For) -> None:
        """The allocation of one filled list, written before its loop."""
        loc = self.loc(s)
        ref = fill.ref
        types = fill.types[:len(pre)] + [fill.site_types[k] for k in fill.sites if k in fill.site_types]
        arrays = [t for t in types if isinstance(t, T.Array)]
        if arrays and (len(arrays) != len(types) or len(set(arrays)) != 1):
            raise self.error(ZymoTypeError, f"{ref.what()} would hold "
                             + ("numbers and arrays" if len(arrays) != len(types) else
                                " and ".join(sorted({str(t) for t in arrays}))), s,
                             "zymo preallocates a list appended to in a loop of run-time length; its items must "
                             "have one type", "append arrays of one dtype and number of dimensions")
        if arrays and fill.counted:
            raise self.error(UnsupportedSyntax, f"{ref.what()} holds arrays appended conditionally, more than "
                             f"once per iteration, or read in the loop at line {s.lineno}", s,
                             "zymo preallocates a list of arrays appended to in a loop of run-time length "
                             "only when one array is appended per iteration, unconditionally, at the loop "
                             "body's top level",
                             "append exactly once per iteration (out.append(v if cond else w)), or "
                             "preallocate an array out = np.empty((n, m)) and keep a count")
        kinds = {t.kind for t in types if isinstance(t, T.Scalar)}
        dt = "float64" if "f64" in kinds or not kinds or kinds == {"f32", "int"} or kinds == {"f32", "bool"} \
            else "float32" if "f32" in kinds else "int64" if "int" in kinds else "bool"
        n = trips
        if len(calls) > 1:
            n = self.b.prim("mul", [n, self.b.const(len(calls), loc, "k")], {}, loc, "n")
        if pre:
            n = self.b.prim("add", [n, self.b.const(len(pre), loc, "k")], {}, loc, "n")
        if arrays:
            like = self.b.prim("numpy.empty", [tuple(self.b.const(0, loc, "n") for _ in range(arrays[0].ndim))],
                               {"dtype": S(arrays[0].dtype)}, loc, "like")
            alloc = self.b.prim("zymo.list_of", [n, like], {}, loc, "lst")
        else:
            alloc = self.b.prim("numpy.empty", [n], {"dtype": S(dt)}, loc, "lst")
        op = alloc.owner
        op.attrs["fills_list"] = (ref.line, s.lineno, len(calls), len(pre))  # for zymo.cache_report
        op.results[0] = fill.buf
        fill.buf.owner = op
        fill.buf.type = alloc.type
        for j, x in enumerate(pre):
            self.b.setitem(fill.buf, (self.b.const(j, loc, "k"),), self.as_value(x, s), loc)

    def _fill_type(self, x: Any, node: ast.AST) -> T.Type:
        if isinstance(x, Value) and isinstance(x.type, (T.Scalar, T.Array)):
            return x.type
        if isinstance(x, S) and isinstance(x.obj, (int, float, bool)):
            return T.BOOL if isinstance(x.obj, bool) else T.INT if isinstance(x.obj, int) else T.F64
        raise self.error(UnsupportedSyntax, "a list appended to in a loop of run-time length must hold numbers "
                         "or arrays", node, "zymo preallocates such a list with the loop's trip count",
                         "append numbers or arrays (keep tuples and other lists in lists of constant length)")

    def fill_append(self, fill: Fill, pos: list, kw: dict, node: ast.Call) -> Any:
        blk = self.b.block
        if len(pos) != 1 or kw:
            raise self.error(UnsupportedCall, "list.append takes one argument", node)
        loc = self.loc(node)
        if id(node) not in fill.sites:
            raise self.error(UnsupportedSyntax, f"{fill.ref.what()} is appended to here, inside the loop at line "
                             f"{fill.line} that fills it, through another name or a nested loop or call", node,
                             "zymo preallocates a list appended to in a loop of run-time length, with room "
                             "for the appends written in the loop's body",
                             "append with the list's own name, in the loop's body (not in a nested loop)")
        v = pos[0]
        fill.site_types[id(node)] = self._fill_type(v, node)  # the body's last lowering is the one kept
        if fill.counted:
            f = self.frame
            while fill.ref.key not in f.env:
                f = cast(Frame, f.parent)  # the frame that made the list encloses this one
            _, count = f.env[fill.ref.key]
            self.b.setitem(fill.buf, (count,), self.as_value(v, node), loc)
            self.set_contents(fill.ref, (S(COUNT), self.b.prim("add", [count, self.b.const(1, loc, "k")], {}, loc,
                                                                "count")))
            return S(None)
        if len(self.b.blocks) != fill.depth or any(b is blk for b in fill.seen) or not blk.args \
                or blk.args[0].type != T.INT:
            raise self.error(UnsupportedSyntax, f"{fill.ref.what()} is appended to more than once, or "
                             f"conditionally, in the loop at line {fill.line}", node,
                             "zymo preallocates a list appended to in a loop of run-time length, one item "
                             "per iteration",
                             "append exactly once per iteration, at the top level of the loop's body")
        fill.seen.append(blk)
        i = blk.args[0]
        if not (fill.start.is_const and fill.start.const == 0 and fill.step.is_const and fill.step.const == 1):
            i = self.b.prim("floordiv", [self.b.prim("sub", [i, fill.start], {}, loc, "k"), fill.step], {}, loc, "k")
        if fill.k:
            i = self.b.prim("add", [i, self.b.const(fill.k, loc, "k")], {}, loc, "k")
        self.b.setitem(fill.buf, (i,), self.as_value(v, node), loc)
        return S(None)
