"""Sparsity detection: an abstract interpreter over zymo's IR.

Contract: `jacobian_pattern(f, x, *consts, mode)` returns the boolean CSR pattern (shape
`(y.size, x.size)`, C order) of `d f(x, *consts) / d x`; `hessian_pattern(f, x, *consts,
mode)` the symmetric pattern `(x.size, x.size)` of the Hessian of scalar `f`.

The interpreter runs the lowered `Function` (`zymo.ir(f, x, *consts)`) op by op on copies
of the concrete arguments, and next to every value carries the inputs (elements of `x`) it
depends on: a frozenset for numbers, and for arrays one row per memory element in a
`memory.Buffer` (views share their owner's rows; `setitem` and `out=` write rows, so
in-place writes are followed exactly). Patterns of primitives are in `patterns.py`.

- `mode="local"`: control flow is the one taken at this `x` (loops run their real trip
  counts, `if` its taken branch). The pattern is exact for that control flow, and valid
  only for inputs that take the same branches.
- Taint is tracked in both modes: an operand whose values do not depend on `x` (a
  constant, a captured array) is *fixed*, and patterns may read its zeros (a product with
  a fixed sparse matrix has that matrix's structure).
- `mode="global"`: valid at every `x` of this shape (with these constants). Values that
  depend on `x` at all are *tainted*; an `if` on a tainted condition runs both branches and
  joins them (union); a `while` whose condition is tainted iterates its body to a fixed
  point (every trip count); an element read or written at a tainted index depends on (or
  may write) every element. What it cannot bound (an `x`-dependent shape, slice or `for`
  range, an `if` choosing between different arrays) raises `DetectionFailed`.
- Hessian patterns: for every nonlinear op (`patterns.is_linear`), every pair of inputs
  some element of its result depends on (the second-order chain rule: the Hessian is a
  sum over ops of J_in^T (local Hessian) J_in), so the pattern is valid, not minimal.
"""
from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import runtime as _rt
from ..errors import ZymoUsageError
from ..ir.core import Block, Function, Op, Value, tree_map
from ..rules.registry import lookup
from . import memory as M
from .memory import Buffer, DetectionFailed
from .patterns import Call, is_linear, prim_rows

_GLOBALS = {"np": np, "math": math, "_rt": _rt, "__builtins__": builtins}
MODES = ("local", "global")
# results that depend on their operands' shapes, never on their values
SHAPE_ONLY = frozenset({"builtins.len", "zymo.dim", "numpy.shape", "numpy.ndim", "numpy.size"})


class Interpreter:
    def __init__(self, fn: Function, n: int, glob: bool, hessian: bool) -> None:
        self.fn, self.n, self.glob = fn, n, glob
        self.val: dict[int, Any] = {}
        self.dep: dict[int, frozenset] = {}
        self.tnt: dict[int, bool] = {}
        self.bufs: dict[int, Buffer] = {}
        self.lists: dict[int, list] = {}  # id(list) -> [list, summary set, taint]
        self.spec = 0  # > 0 inside a speculative region (a joined branch, a fixed point)
        self.code: dict[tuple[int, bool], tuple] = {}
        self.hess_sets: list[frozenset] = []
        self.hess_mat: sp.csr_matrix | None = M.empty(n, n) if hessian else None
        self.hessian = hessian
        self.journal = M.Journal()

    # -- values ----------------------------------------------------------------------
    def bind(self, v: Value, val: Any, dep: frozenset = frozenset(), taint: bool = False) -> None:
        self.val[v.id] = val
        if not isinstance(val, np.ndarray):
            self.dep[v.id] = dep
            self.tnt[v.id] = taint

    def triple(self, v: Value) -> tuple:
        return self.val[v.id], self.dep.get(v.id, frozenset()), self.tnt.get(v.id, False)

    def buffer(self, a: np.ndarray) -> tuple[Buffer, np.ndarray]:
        own = M.owner(a)
        buf = self.bufs.get(id(own))
        if buf is None:
            buf = self.bufs[id(own)] = Buffer(own, self.n, journal=self.journal)
        return buf, M.positions(a, own)

    def register(self, a: np.ndarray, rows: sp.csr_matrix, taint: bool) -> None:
        """Fresh memory `a` (not a view of known memory) with these rows."""
        own = M.owner(a)
        if own is a and a.flags.c_contiguous:
            self.bufs[id(own)] = Buffer(own, self.n, rows, taint, self.journal)
        else:
            buf = self.bufs[id(own)] = Buffer(own, self.n, taint=taint, journal=self.journal)
            buf.set_rows(M.positions(a, own), rows)

    def known(self, a: np.ndarray) -> bool:
        return id(M.owner(a)) in self.bufs

    def rows_of(self, a: Any, v: Value | None = None) -> sp.csr_matrix:
        if isinstance(a, np.ndarray):
            buf, pos = self.buffer(a)
            return buf.rows(pos)
        return M.from_sets([self.set_of(a, v)], self.n)

    def set_of(self, a: Any, v: Value | None = None) -> frozenset:
        """Every input the value (all its elements) depends on."""
        if isinstance(a, np.ndarray):
            if a.dtype.kind not in "fc":
                return frozenset()
            return M.union_all(self.rows_of(a))
        if isinstance(a, list):
            entry = self.lists.get(id(a))
            s = entry[1] if entry else frozenset()
            return M.sets_union([s, *(self.set_of(e) for e in a if isinstance(e, (np.ndarray, list)))])
        return self.dep.get(v.id, frozenset()) if v is not None else frozenset()

    def taint_of(self, a: Any, v: Value) -> bool:
        if isinstance(a, np.ndarray):
            buf = self.bufs.get(id(M.owner(a)))
            return bool(buf and buf.taint)
        if isinstance(a, list):
            entry = self.lists.get(id(a))
            return bool(entry and entry[2]) or any(self.taint_of(e, v) for e in a if isinstance(e, np.ndarray))
        return self.tnt.get(v.id, False)

    # -- running --------------------------------------------------------------------
    def run(self, args: list) -> Any:
        fn = self.fn
        for p, a in zip(fn.params, args, strict=True):
            self.bind(p, a)
        return self.block(fn.body)

    def block(self, block: Block) -> list[tuple]:
        for op in block.ops:
            if op.kind in ("yield", "return", "condition"):
                return [self.triple(v) for v in op.args]
            getattr(self, "op_" + op.kind)(op)
        return []

    def bind_all(self, vs: list[Value], triples: list[tuple]) -> None:
        for v, (a, d, t) in zip(vs, triples, strict=True):
            self.bind(v, a, d, t)

    def op_const(self, op: Op) -> None:
        self.bind(op.result, op.attrs["value"])

    def _eval(self, op: Op, vals: list, with_out: bool = True) -> Any:
        key = (id(op), with_out)
        entry = self.code.get(key)
        if entry is None:
            from ..transform.emit import Emitter

            names: dict[int, str] = {}
            for k, v in enumerate(op.args):
                names.setdefault(v.id, f"_a{k}")
            expr = Emitter(None, None).call(op, with_out=with_out, name=lambda v: names[v.id])  # type: ignore[arg-type]
            entry = self.code[key] = (op, compile(expr, f"<zymo sparsity {op.attrs['key']}>", "eval"))
        env = {f"_a{k}": a for k, a in enumerate(vals)}
        try:
            with np.errstate(all="ignore"):
                return eval(entry[1], _GLOBALS, env)
        except Exception as e:
            if self.spec:
                raise DetectionFailed(f"{op.attrs['key']} fails on the values of a branch not taken ({e})",
                                      op.loc) from None
            raise

    def op_prim(self, op: Op) -> None:
        rule = lookup(op.attrs["key"])
        vals = [self.val[v.id] for v in op.args]
        out_k = op.attrs.get("out")
        taint = not (rule.alloc or op.attrs["key"] in SHAPE_ONLY) \
            and any(self.taint_of(a, v) for a, v in zip(vals, op.args, strict=False))
        if out_k is None and not any(isinstance(a, (np.ndarray, list)) for a in vals):
            res = self._eval(op, vals)
            if op.results and not isinstance(res, (np.ndarray, list)):  # numbers: the union
                d = frozenset() if rule.nondiff else M.sets_union(self.dep.get(v.id, frozenset()) for v in op.args)
                if d and self.hessian and not _scalar_linear(op, rule, self):
                    self.hess_sets.append(d)
                self.bind(op.result, res, d, taint)
                return
            self._finish(op, rule, vals, res, taint)
            return
        if out_k is not None:
            out = vals[out_k]
            call = self._call(op, rule, vals, out)
            rows = prim_rows(call)
            self._hess(call, rows)
            self._eval(op, vals)
            buf, pos = self.buffer(out)
            buf.set_rows(pos, rows)
            buf.taint = buf.taint or taint or bool(self.spec)
            if op.results:
                self.bind(op.result, out)
            return
        res = self._eval(op, vals)
        self._finish(op, rule, vals, res, taint)

    def _call(self, op: Op, rule: Any, vals: list, res: Any) -> Call:
        def rows(k: int) -> sp.csr_matrix:
            return self.rows_of(vals[k], op.args[k])

        def dset(k: int) -> frozenset:
            return self.set_of(vals[k], op.args[k])

        def run_with(subst: dict) -> Any:
            return self._eval(op, [subst.get(k, a) for k, a in enumerate(vals)], with_out=False)

        def fixed(k: int) -> bool:
            return not self.taint_of(vals[k], op.args[k])

        return Call(op, rule, vals, res, self.n, rows, dset, run_with, fixed)

    def _hess(self, call: Call, rows: sp.csr_matrix) -> None:
        if self.hessian and rows.nnz and not is_linear(call):
            self.hess_mat = M.bool_(self.hess_mat + rows.T @ rows)

    def _finish(self, op: Op, rule: Any, vals: list, res: Any, taint: bool) -> None:
        if not op.results:  # a primitive that writes its operands (np.add.at, put_along_axis)
            u = M.sets_union(self.set_of(a, v) for a, v in zip(vals, op.args, strict=False))
            for a in vals:
                if isinstance(a, np.ndarray) and a.dtype.kind in "fc":
                    buf, pos = self.buffer(a)
                    buf.union_rows(pos, M.broadcast_set(u, a.size, self.n))
                    buf.taint = buf.taint or taint
            return
        r = op.result
        if isinstance(res, np.ndarray) and self.known(res):  # a view of known memory
            self.bind(r, res)
            return
        call = self._call(op, rule, vals, res)
        rows = prim_rows(call)
        self._hess(call, rows)
        if isinstance(res, np.ndarray):
            self.register(res, rows, taint)
            self.bind(r, res)
        elif isinstance(res, list):
            self.lists[id(res)] = [res, M.union_all(rows), taint]
            self.bind(r, res)
        else:
            self.bind(r, res, M.row_set(rows, 0) if rows.shape[0] else frozenset(), taint)

    # -- memory ops ----------------------------------------------------------------------
    def _index(self, op: Op, skip: int) -> tuple[Any, bool]:
        vals = [self.val[v.id] for v in op.args]
        idx = tree_map(op.attrs["index"], lambda k: vals[k], lambda c: c)
        taint = any(self.taint_of(vals[k], op.args[k]) for k in range(skip, len(vals)))
        if self.glob and taint and _has_slice(idx):
            raise DetectionFailed("a slice whose bounds depend on the input", op.loc)
        return idx, taint

    def op_getitem(self, op: Op) -> None:
        obj = self.val[op.args[0].id]
        idx, itaint = self._index(op, 1)
        try:
            res = obj[idx]
        except Exception as e:
            if self.spec:
                raise DetectionFailed(f"an index fails on the values of a branch not taken ({e})", op.loc) from None
            raise
        r = op.result
        if isinstance(obj, list):
            if isinstance(res, (np.ndarray, list)):
                self.bind(r, res)
            else:
                self.bind(r, res, self.set_of(obj), itaint or self.taint_of(obj, op.args[0]))
            return
        if not isinstance(obj, np.ndarray):
            t0 = itaint or self.tnt.get(op.args[0].id, False)
            self.bind(r, res, self.set_of(obj, op.args[0]), t0)
            return
        buf = self.bufs.get(id(M.owner(obj)))
        taint = itaint or bool(buf and buf.taint)
        itaint = itaint and self.glob  # locally, the index is the one taken at this x
        if isinstance(res, np.ndarray) and self.known(res) and not itaint:
            self.bind(r, res)
            return
        if itaint:  # any element: the union of all
            u = self.set_of(obj)
            if isinstance(res, np.ndarray):
                self.register(res, M.broadcast_set(u, res.size, self.n), True)
                self.bind(r, res)
            else:
                self.bind(r, res, u, True)
            return
        if not isinstance(res, np.ndarray):
            p = self._element(obj, idx)
            if p is not None:
                self.bind(r, res, p[0].row(p[1]) if obj.dtype.kind in "fc" else frozenset(), taint)
                return
        buf, pos = self.buffer(obj)
        sel = pos[idx]
        if isinstance(res, np.ndarray):
            self.register(res, buf.rows(sel), taint)
            self.bind(r, res)
        else:
            self.bind(r, res, buf.row(int(sel)), taint)

    def _element(self, a: np.ndarray, idx: Any) -> tuple[Buffer, int] | None:
        """(buffer, memory offset) of `a[idx]` when `idx` picks one element with integers."""
        t = idx if isinstance(idx, tuple) else (idx,)
        if len(t) != a.ndim or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in t):
            return None
        own = M.owner(a)
        buf = self.bufs.get(id(own))
        if buf is None:
            buf = self.bufs[id(own)] = Buffer(own, self.n, journal=self.journal)
        size = own.itemsize
        off = a.__array_interface__["data"][0] - own.__array_interface__["data"][0]
        for i, n, s in zip(t, a.shape, a.strides, strict=False):
            i = int(i)
            if not -n <= i < n:
                return None  # the store/load itself raises
            off += (i % n) * s
        if off % size or a.itemsize != size:
            raise DetectionFailed("a view that does not fall on its memory's elements")
        return buf, off // size

    def op_setitem(self, op: Op) -> None:
        obj, val = self.val[op.args[0].id], self.val[op.args[1].id]
        idx, itaint = self._index(op, 2)
        vtaint = self.taint_of(val, op.args[1])
        if isinstance(obj, list):
            entry = self.lists.setdefault(id(obj), [obj, frozenset(), False])
            entry[1] = entry[1] | self.set_of(val, op.args[1])
            entry[2] = entry[2] or vtaint or itaint or bool(self.spec)
        elif isinstance(obj, np.ndarray):
            buf = self._store(obj, idx, val, op.args[1], itaint) if obj.dtype.kind in "fc" else self.buffer(obj)[0]
            buf.taint = buf.taint or vtaint or itaint or bool(self.spec)
        try:
            obj[idx] = val
        except Exception as e:
            if self.spec:
                raise DetectionFailed(f"a store fails on the values of a branch not taken ({e})", op.loc) from None
            raise

    def _store(self, obj: np.ndarray, idx: Any, val: Any, v: Value, itaint: bool) -> Buffer:
        if not itaint and not isinstance(val, np.ndarray):
            e = self._element(obj, idx)
            if e is not None:
                e[0].set_row(e[1], self.set_of(val, v))
                return e[0]
        buf, pos = self.buffer(obj)
        if itaint:  # may write any element: weak update of all
            buf.union_rows(pos, M.broadcast_set(self.set_of(val, v), obj.size, self.n))
            return buf
        sel = np.asarray(pos[idx])
        if isinstance(val, np.ndarray):
            src = np.broadcast_to(np.arange(val.size).reshape(val.shape), sel.shape)
            rows = M.take_rows(self.rows_of(val), src) if val.dtype.kind in "fc" else M.empty(sel.size, self.n)
        else:
            rows = M.broadcast_set(self.set_of(val, v), sel.size, self.n)
        if len(np.unique(sel)) != sel.size:  # one element written twice: keep both (valid)
            buf.union_rows(sel, rows)
        else:
            buf.set_rows(sel, rows)
        return buf

    # -- control flow ----------------------------------------------------------------
    def op_for(self, op: Op) -> None:
        start, stop, step = (self.val[v.id] for v in op.args[:3])
        if self.glob and any(self.tnt.get(v.id, False) for v in op.args[:3]):
            raise DetectionFailed("a for loop whose range depends on the input", op.loc)
        body = op.regions[0]
        carries = [self.triple(v) for v in op.args[3:]]
        for i in range(start, stop, step):
            self.bind(body.args[0], i)
            self.bind_all(body.args[1:], carries)
            carries = self.block(body)
        self.bind_all(op.results, carries)

    def op_while(self, op: Op) -> None:
        cond, body = op.regions
        carries = [self.triple(v) for v in op.args]
        while True:
            self.bind_all(cond.args, carries)
            (c, _d, t), = self.block(cond)
            if self.glob and t:
                carries = self._fixed_point(op, carries)
                break
            if not c:
                break
            self.bind_all(body.args, carries)
            carries = self.block(body)
        self.bind_all(op.results, carries)

    def _fixed_point(self, op: Op, state: list[tuple]) -> list[tuple]:
        cond, body = op.regions
        self.spec += 1
        try:
            for _ in range(100_000):
                lists = self._lists()
                self.bind_all(body.args, state)
                self.journal.open()
                try:
                    new = self.block(body)
                finally:
                    log = self.journal.close()
                joined = _join(state, new, op)
                grew = M.join(log)  # memory before the body is in the log
                grew = self._join_lists(lists) or grew
                changed = grew or any(a[1] != b[1] or a[2] != b[2] for a, b in zip(state, joined, strict=True))
                state = joined
                self.bind_all(cond.args, state)
                self.block(cond)
                if not changed:
                    return [(a, d, True) for a, d, _t in state]
            raise DetectionFailed("a while loop's dependencies did not settle", op.loc)
        finally:
            self.spec -= 1

    def op_if(self, op: Op) -> None:
        c = self.val[op.args[0].id]
        then, orelse = op.regions
        if not (self.glob and self.tnt.get(op.args[0].id, False)):
            self.bind_all(op.results, self.block(then if c else orelse))
            return
        self.spec += 1
        try:
            lists = self._lists()
            self.journal.open()
            try:
                res_a = self.block(then)
            finally:
                log = self.journal.close()
            after_a, lists_a = M.current(log), self._lists()
            M.undo(log)
            self._restore_lists(lists)
            res_b = self.block(orelse)
            M.join(after_a)
            self._join_lists(lists_a)
            joined = _join(res_a, res_b, op)
        finally:
            self.spec -= 1
        self.bind_all(op.results, [(a, d, True) for a, d, _t in joined])

    def _lists(self) -> dict[int, tuple]:
        return {k: (e[1], e[2]) for k, e in self.lists.items()}

    def _restore_lists(self, snap: dict[int, tuple]) -> None:
        for k, (s1, t1) in snap.items():
            self.lists[k][1], self.lists[k][2] = s1, t1

    def _join_lists(self, snap: dict[int, tuple]) -> bool:
        grew = False
        for k, (s1, t1) in snap.items():
            e = self.lists[k]
            grew = grew or not (e[1] <= s1) or (e[2] and not t1)
            e[1], e[2] = e[1] | s1, e[2] or t1
        return grew

    def hessian_pattern(self) -> sp.csr_matrix:
        assert self.hess_mat is not None
        h = self.hess_mat
        if self.hess_sets:
            r = M.from_sets(self.hess_sets, self.n)
            h = M.bool_(h + r.T @ r)
        return h


def _scalar_linear(op: Op, rule: Any, it: Interpreter) -> bool:
    from .patterns import BILINEAR, DIVISIONS, LINEAR

    key = op.attrs["key"]
    if rule.nondiff or key in LINEAR or key in ("pos", "neg"):
        return True
    with_deps = [k for k, v in enumerate(op.args) if it.dep.get(v.id)]
    if key in BILINEAR:
        return len(with_deps) <= 1
    if key in DIVISIONS:
        return 1 not in with_deps
    return False


def _join(a: list[tuple], b: list[tuple], op: Op) -> list[tuple]:
    out = []
    for (va, da, ta), (vb, db, tb) in zip(a, b, strict=True):
        if isinstance(va, (np.ndarray, list)) or isinstance(vb, (np.ndarray, list)):
            if va is not vb:
                raise DetectionFailed("an input-dependent branch or loop chooses between different arrays", op.loc)
            out.append((va, da, ta))
            continue
        same = _same(va, vb)
        out.append((vb, da | db, ta or tb or not same))
    return out


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return False


def _has_slice(idx: Any) -> bool:
    if isinstance(idx, slice):
        return True
    return isinstance(idx, tuple) and any(isinstance(i, slice) for i in idx)


# -- entry points ---------------------------------------------------------------------


def _setup(f: Callable, x: np.ndarray, consts: tuple, mode: str, hessian: bool) -> tuple[Interpreter, list]:
    from ..cache import lowered

    if mode not in MODES:
        raise ZymoUsageError(f"sparsity detection mode must be 'local' or 'global', not {mode!r}")
    fn = lowered(f, (x, *consts))[0].ir
    x = np.array(x, dtype=x.dtype, order="C", copy=True)
    args = [x, *(np.array(c, copy=True) if isinstance(c, np.ndarray) else c for c in consts)]
    captured = fn.attrs.get("captured", [])
    for entry in captured:
        val = entry[1]
        args.append(np.array(val, copy=True) if isinstance(val, np.ndarray) else val)
    if len(args) != len(fn.params):
        raise ZymoUsageError(f"sparsity detection: {fn.name} takes {len(fn.params)} values, got {len(args)}")
    it = Interpreter(fn, x.size, mode == "global", hessian)
    own = M.owner(x)
    it.bufs[id(own)] = Buffer(own, x.size, sp.identity(x.size, dtype=bool, format="csr"), True, it.journal)
    return it, args


def _result_rows(it: Interpreter, res: list[tuple], what: str) -> sp.csr_matrix:
    if len(res) != 1:
        raise ZymoUsageError(f"{what}: f must return one float or float array, not {len(res)} values")
    val, dep, _t = res[0]
    if isinstance(val, np.ndarray):
        if val.dtype.kind != "f":
            raise ZymoUsageError(f"{what}: f must return a float or a float array, not an array of {val.dtype}")
        return it.rows_of(val)
    if isinstance(val, (float, np.floating)) and not isinstance(val, bool):
        return M.from_sets([dep], it.n)
    raise ZymoUsageError(f"{what}: f must return a float or a float array, not {type(val).__name__}")


def jacobian_pattern(f: Callable, x: np.ndarray, *consts: Any, mode: str = "global") -> sp.csr_matrix:
    """The pattern of d f(x, *consts) / d x: boolean CSR, (y.size, x.size)."""
    it, args = _setup(f, x, consts, mode, hessian=False)
    return _result_rows(it, it.run(args), "sparse jacobian")


def hessian_pattern(f: Callable, x: np.ndarray, *consts: Any, mode: str = "global") -> sp.csr_matrix:
    """A valid symmetric pattern of the Hessian of scalar f at x: boolean CSR (x.size, x.size)."""
    it, args = _setup(f, x, consts, mode, hessian=True)
    rows = _result_rows(it, it.run(args), "sparse hessian")
    if rows.shape[0] != 1:
        raise ZymoUsageError("sparse hessian: f must return a float")
    h = it.hessian_pattern()
    return M.bool_(h + h.T)
