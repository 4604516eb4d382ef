"""Which integers are never negative: index arithmetic that needs no wraparound.

Contract: `NonNegative(fn)(v)` is True only when the int value `v` of `fn` is >= 0 whenever
it is computed (Python's ints, which do not overflow). Numba indexes an array with a signed
integer by first adding the extent to a negative one; an index known to be >= 0 may skip that
(`codegen/numba_.nonneg_indices`): in gmm's gradient the wraparound of
`icf[k, d + c * (2 * d - c - 1) // 2 + (r - c - 1)]` cost a fifth of the run time.

An int is a linear form over *atoms* (values that are not `+`, `-`, negation or a product
by a constant) plus a constant. The form is >= 0 when its constant is and every atom has a
positive coefficient and is >= 0 itself; an atom with a negative coefficient is replaced by
its upper bound first. Atoms and their bounds:
- the variable of `for i in range(start, stop, step)` with a constant `step > 0`: `start`
  and up to `stop - 1` (it is only defined inside the loop);
- an array's dimension and `len` are >= 0; a constant is its value;
- `a * b`, and `a // c` with a constant `c > 0`, are >= 0 when `a` and `b` are; `a % c`
  with a constant `c > 0` is.
Anything else (a `while` loop's counter, a value from memory, a parameter) is unknown, and
the answer is False. Substitutions are bounded, so the analysis always ends.
Definitions and loop variables come from the shared `index.Index` (pass one in to share it).

`NeverUnsigned(fn)(v)` is True only when the int `v` is never an unsigned NumPy int (whose
arithmetic wraps round below zero where Python's `range` gives the primal ints): a literal, a
size (a dimension, `len`, `np.size`, a trip count), the variable of a loop over such bounds,
and `+ - * // %` and negation of these. A parameter or a value from memory may be unsigned.
"""
from __future__ import annotations

from ..ir.core import Function, Value, walk
from ..ir.types import INT, Array
from ..rules.registry import lookup
from .index import Index

_STEPS = 8  # upper bounds substituted, at most, per question




class NeverUnsigned:
    def __init__(self, fn: Function, index: Index | None = None):
        index = index or Index(fn)
        self.def_op, self.loop = index.producer, index.loop_var  # the latter: induction variable id -> its `for`
        self.memo: dict[int, bool] = {}

    def __call__(self, v: Value) -> bool:
        if v.id not in self.memo:
            self.memo[v.id] = False  # a cycle through a loop's own bounds proves nothing
            self.memo[v.id] = self._uncached(v)
        return self.memo[v.id]

    def _uncached(self, v: Value) -> bool:
        if v.is_const:
            return isinstance(v.const, (int, bool))
        loop = self.loop.get(v.id)
        if loop is not None:
            return all(self(a) for a in loop.args[:3])
        op = self.def_op.get(v.id)
        if op is None or op.kind != "prim" or op.results != [v]:
            return False  # a parameter, a loop's carry, a branch's result
        key = op.attrs["key"]
        rule = lookup(key)
        return rule.size or (rule.int_arith and all(self(a) for a in op.args))


class NonNegative:
    def __init__(self, fn: Function, index: Index | None = None):
        index = index or Index(fn)
        self.def_op, self.loop = index.producer, index.loop_var  # the latter: induction variable id -> its `for` op
        self.values: dict[int, Value] = {}
        self.memo: dict[int, bool] = {}

    def __call__(self, v: Value) -> bool:
        if v.id not in self.memo:
            self.memo[v.id] = False  # a cycle through the value's own bounds proves nothing
            self.memo[v.id] = v.type == INT and self._form_nonneg(*self._linear(v))
        return self.memo[v.id]

    def nonlinear(self, v: Value) -> bool:
        """Whether `v`'s linear form has an atom made by `*`, `//` or `%` (of no constant
        factor): LLVM bounds sums of loop variables and sizes itself, not those."""
        form, _ = self._linear(v)
        return any(self.def_op.get(a) is not None and self.def_op[a].kind == "prim"
                   and self.def_op[a].attrs["key"] in ("mul", "floordiv", "mod") for a in form)

    def _linear(self, v: Value) -> tuple[dict[int, int], int]:
        """`v` as ({atom id: coefficient}, constant)."""
        c = _int_const(v)
        if c is not None:
            return {}, c
        op = self.def_op.get(v.id)
        key = op.attrs.get("key") if op is not None and op.kind == "prim" and "out" not in op.attrs else None
        args = op.args if op is not None else []
        if key in ("add", "sub") and len(args) == 2:
            (fa, ca), (fb, cb) = self._linear(args[0]), self._linear(args[1])
            sign = 1 if key == "add" else -1
            return _combine(fa, fb, sign), ca + sign * cb
        if key == "neg" and len(args) == 1:
            f, c0 = self._linear(args[0])
            return {a: -k for a, k in f.items()}, -c0
        if key == "mul" and len(args) == 2:
            for x, y in (args, args[::-1]):
                k = _int_const(x)
                if k is not None:
                    f, c0 = self._linear(y)
                    return {a: k * m for a, m in f.items() if k * m}, k * c0
        self.values[v.id] = v
        return {v.id: 1}, 0

    def _form_nonneg(self, form: dict[int, int], const: int) -> bool:
        form = dict(form)
        for _ in range(_STEPS):
            negative = [a for a, k in form.items() if k < 0]
            if not negative:  # each atom at least its loop's constant start (else 0)
                low = sum(k * self._lower(self.values[a]) for a, k in form.items())
                return const + low >= 0 and all(self._atom_nonneg(self.values[a]) for a in form)
            a = negative[0]
            bound = self._upper(self.values[a])
            if bound is None:
                return False
            k = form.pop(a)
            form = _combine(form, bound[0], k)
            const += k * bound[1]
        return False

    def _upper(self, v: Value) -> tuple[dict[int, int], int] | None:
        """An upper bound of atom `v`, as a linear form."""
        loop = self.loop.get(v.id)
        if loop is None or not _positive_const(loop.args[2]):
            return None
        f, c = self._linear(loop.args[1])
        return f, c - 1

    def _lower(self, v: Value) -> int:
        """A lower bound of atom `v` when it is never negative: the constant start of its
        loop (of positive step), else 0."""
        loop = self.loop.get(v.id)
        start = _int_const(loop.args[0]) if loop is not None and _positive_const(loop.args[2]) else None
        return max(start, 0) if start is not None else 0

    def _atom_nonneg(self, v: Value) -> bool:
        loop = self.loop.get(v.id)
        if loop is not None:
            return _positive_const(loop.args[2]) and self(loop.args[0])
        op = self.def_op.get(v.id)
        if op is None or op.kind != "prim" or "out" in op.attrs:
            return False
        key = op.attrs["key"]
        if key in ("zymo.dim", "builtins.len"):
            return True
        if key == "mul" and len(op.args) == 2:
            return all(self(a) for a in op.args)
        if key == "floordiv" and len(op.args) == 2:
            return _positive_const(op.args[1]) and self(op.args[0])
        if key == "mod" and len(op.args) == 2:
            return _positive_const(op.args[1])
        return False


def _int_const(v: Value) -> int | None:
    c = v.const if v.is_const else None
    return c if isinstance(c, int) and not isinstance(c, bool) else None


def _positive_const(v: Value) -> bool:
    c = _int_const(v)
    return c is not None and c > 0


def _combine(a: dict[int, int], b: dict[int, int], scale: int) -> dict[int, int]:
    out = dict(a)
    for atom, k in b.items():
        out[atom] = out.get(atom, 0) + scale * k
        if out[atom] == 0:
            del out[atom]
    return out


def index_names(fn: Function, names: dict[tuple[int, str], str], reversed_loops: bool = False) -> frozenset[str]:
    """The names (`names`: a `Namer`'s values) of ints computed by arithmetic with a product,
    floor division or remainder (`NonNegative.nonlinear`), or loop variables over a range whose
    start is not a constant (`range(i + 1, n)`), that index an array somewhere in `fn` and are
    never negative; a name that also holds another value counts only when that one is never
    negative too. Other loop variables, and sums of them and sizes (`i + 1`), are left out:
    LLVM knows the range of a loop from a constant, and each index of another type costs Numba
    a typing (docs/decisions/0009). From a computed start it does not: a triangular update
    `A[i, j] += s * x[j]` over `j in range(i + 1, n)` took 1.75 ms at n=1500 with signed
    indices and 0.54 ms with unsigned ones (Numba 0.68).

    `reversed_loops` (a program with an adjoint sweep): also loop variables and sums of them
    (`i - 1`), never negative, whatever their loop's start. The adjoint sweep runs a loop
    backwards as `for _r in range(span(lo, hi)): i = hi - 1 - _r`, where LLVM does not bound
    `i`: jacobi_1d's adjoint kernel took 142 us with signed indices and 83 us unsigned."""
    proven = NonNegative(fn)
    holders: dict[str, list[int]] = {}
    for (vid, role), name in names.items():
        if role == "p":
            holders.setdefault(name, []).append(vid)
    values: dict[int, Value] = {}
    for op in walk(fn.body):
        for v in op.results:
            values[v.id] = v
        if op.kind == "for":  # its induction variable
            index = op.regions[0].args[0]
            values[index.id] = index
    def computed_start(v: Value) -> bool:  # a loop variable whose range starts at a computed int
        loop = proven.loop.get(v.id)
        return loop is not None and not loop.args[0].is_const

    def loop_sum(v: Value) -> bool:  # a loop variable, or a sum with one
        return reversed_loops and any(a in proven.loop for a in proven._linear(v)[0])

    indices = {v.id for op in walk(fn.body) if op.kind in ("getitem", "setitem") and isinstance(op.args[0].type, Array)
               for v in op.args[2 if op.kind == "setitem" else 1:]  # a setitem's second argument is the value
               if v.type == INT and (proven.nonlinear(v) or computed_start(v) or loop_sum(v))}
    out = set()
    for name, vids in holders.items():
        if any(vid in indices for vid in vids) and all(vid in values and proven(values[vid]) for vid in vids):
            out.add(name)
    return frozenset(out)
