"""Property-based tests: zymo on generated programs.

Hypothesis draws small programs from a grammar over floats and 1-d arrays:
`+ - *`, division by values bounded away from zero, sin, cos, tanh, exp of
bounded values (math.* and np.*), array expressions, element loads at constant
and computed indices; statements assign new scalars and arrays, store into
arrays (fresh ones and the input `x`, directly and through slices), branch with if/else on a comparison, and
(in loop programs) run `for i in range(n)` loops with accumulators, in-place
stores `z[i] = ...`, `z[i] += ...`, branches, break and continue inside the
body, and nested loops; any program may also return early from inside an if.
Every variable assigned is squashed (sin, tanh, ...) or a sum of two values, so
magnitudes stay moderate and finite differences meaningful.

Each program is written as source text into a temporary .py file and imported
(zymo reads source with `inspect`). Then, at inputs hypothesis draws:
(a) forward and reverse derivatives match central finite differences,
(b) forward and reverse agree with each other (dot-product test) — both via
    `zymo.testing.check_grad`;
(c) the IR verifier passes on the lowered program.
A twin of each program, `margin`, returns the smallest |lhs - rhs| over the
comparisons it executes; inputs within 1e-2 of a branch switch are rejected, as
finite differences there would step across the jump, and so are inputs where
finite differences do not converge (loops can amplify curvature enormously).
"""
from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import zymo
from zymo.ir.verify import verify
from zymo.testing import FiniteDifferenceError, check_grad

_ids = itertools.count()

# Loops reuse the names i and j, as people write them (a loop variable is live after
# its loop: a second loop in one branch of an if merges it; see
# test_loop_variable_reused_in_one_branch). False gives each loop a fresh name.
REUSE_LOOP_VARIABLES = True

SQUASH = ["{m}.sin({e})", "{m}.cos({e})", "{m}.tanh({e})", "{m}.exp({m}.sin({e}))", "(({e}) / (1.5 + ({e}) * ({e})))"]
CONSTS = ["0.5", "1.5", "2.0", "-0.75", "0.25", "3.0"]


class Program:
    """Source lines of `prog` (and its `margin` twin) drawn from the grammar."""

    def __init__(self, draw, n: int, loops: bool, array_result: bool):
        self.draw = draw
        self.n = n
        self.loops = loops
        self.array_result = array_result
        self.scalars = ["a", "b"]
        self.arrays = ["x"]
        self.lines: list[tuple[int, str | None, str | None]] = []  # (indent, text in prog, text in margin)
        self.count = 0

    # -- drawing helpers ------------------------------------------------------------
    def pick(self, seq):
        return self.draw(st.sampled_from(list(seq)))

    def chance(self, p_num: int, p_den: int) -> bool:
        return self.draw(st.integers(0, p_den - 1)) < p_num

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def emit(self, indent: int, text: str, margin_only: bool = False, margin_text: str | None = None) -> None:
        self.lines.append((indent, None if margin_only else text, margin_text or text))

    # -- expressions ----------------------------------------------------------------
    def index(self, idx: tuple[str, ...]) -> str:
        n = self.n
        if idx and self.chance(2, 3):
            i = self.pick(idx)
            return self.pick([i, f"{n - 1} - {i}", f"({i} + 1) % {n}"])
        return str(self.draw(st.integers(0, n - 1)))

    def leaf(self, idx: tuple[str, ...], arrays: list[str]) -> str:
        kind = self.pick(["var", "var", "const", "elem", "elem"])
        if kind == "var":
            return self.pick(self.scalars)
        if kind == "const" or not arrays:
            return self.pick(CONSTS)
        return f"{self.pick(arrays)}[{self.index(idx)}]"

    def sexpr(self, depth: int, idx: tuple[str, ...] = (), arrays: list[str] | None = None) -> str:
        arrays = self.arrays if arrays is None else arrays
        if depth <= 0 or self.chance(1, 4):
            return self.leaf(idx, arrays)
        kind = self.draw(st.integers(0, 7))
        sub = lambda: self.sexpr(depth - 1, idx, arrays)  # noqa: E731
        if kind == 0:
            return f"({sub()} + {sub()})"
        if kind == 1:
            return f"({sub()} - {sub()})"
        if kind == 2:
            return f"({sub()} * {sub()})"
        if kind == 3:
            d = sub()
            return f"({sub()} / (1.5 + {d} * {d}))"
        if kind == 4:
            return f"({sub()} / {self.pick(['2.0', '-4.0', '0.5'])})"
        return self.squash(sub(), "math" if self.chance(1, 2) else "np")

    def squash(self, e: str, m: str = "np") -> str:
        return self.pick(SQUASH).format(m=m, e=e)

    def rhs(self, idx: tuple[str, ...] = (), arrays: list[str] | None = None) -> str:
        """A value to assign: bounded (squashed), or the sum/difference of two leaves."""
        arrays = self.arrays if arrays is None else arrays
        if self.chance(1, 5):
            op = self.pick(["+", "-"])
            return f"{self.leaf(idx, arrays)} {op} {self.leaf(idx, arrays)}"
        return self.squash(self.sexpr(2, idx, arrays), self.pick(["math", "np"]))

    def aexpr(self, depth: int) -> str:
        if depth <= 0 or self.chance(1, 4):
            return self.pick(self.arrays)
        sub = lambda: self.aexpr(depth - 1)  # noqa: E731
        kind = self.draw(st.integers(0, 6))
        if kind == 0:
            return f"({sub()} + {sub()})"
        if kind == 1:
            return f"({sub()} - {sub()})"
        if kind == 2:
            return f"({sub()} * {sub()})"
        if kind == 3:
            return f"({sub()} * {self.sexpr(1)})"
        if kind == 4:
            d = sub()
            return f"({sub()} / (1.5 + {d} * {d}))"
        return self.squash(sub())

    # -- statements -----------------------------------------------------------------
    def compare(self, indent: int, idx: tuple[str, ...] = ()) -> str:
        lhs, rhs = self.sexpr(1, idx), self.sexpr(1, idx)
        op = self.pick([">", "<", ">=", "<="])
        self.emit(indent, f"m = min(m, abs(({lhs}) - ({rhs})))", margin_only=True)
        return f"{lhs} {op} {rhs}"

    def stmt_scalar(self, indent: int = 1) -> None:
        v = self.fresh("s")
        self.emit(indent, f"{v} = {self.rhs()}")
        self.scalars.append(v)

    def stmt_array(self, indent: int = 1) -> None:
        v = self.fresh("y")
        e = self.aexpr(2)
        self.emit(indent, f"{v} = {self.squash(e) if self.chance(3, 4) else e + ' * 0.5'}")
        self.arrays.append(v)

    def stmt_store(self, indent: int = 1) -> None:
        arr = self.pick(self.arrays)
        k = self.draw(st.integers(0, self.n - 1))
        self.emit(indent, f"{arr}[{k}] = {self.rhs()}")

    def stmt_view(self, indent: int = 1) -> None:
        """A slice of an array (a view) written through, in place or by slice assignment."""
        n = self.n
        if n < 2:
            return self.stmt_store(indent)
        arr = self.pick(self.arrays)
        lo = self.draw(st.integers(0, n - 2))
        hi = self.draw(st.integers(lo + 1, n))
        other = self.pick(self.arrays)  # possibly arr itself: overlapping reads and writes
        lo2 = self.draw(st.integers(0, n - (hi - lo)))
        src = f"{other}[{lo2}:{lo2 + hi - lo}]"
        v = self.fresh("v")
        kind = self.pick(["store", "imul", "iadd", "assign"])
        if kind == "assign":
            self.emit(indent, f"{arr}[{lo}:{hi}] = {src} * {self.leaf((), self.arrays)}")
            return
        self.emit(indent, f"{v} = {arr}[{lo}:{hi}]")
        if kind == "store":
            self.emit(indent, f"{v}[{self.draw(st.integers(0, hi - lo - 1))}] = {self.rhs()}")
        elif kind == "imul":
            self.emit(indent, f"{v} *= {self.squash(self.sexpr(1))}")
        else:
            self.emit(indent, f"{v} += {src}")

    def stmt_if(self, indent: int = 1) -> None:
        new = self.chance(1, 2)
        v = self.fresh("s") if new else self.pick(self.scalars)
        cond = self.compare(indent)
        self.emit(indent, f"if {cond}:")
        self.emit(indent + 1, f"{v} = {self.rhs()}")
        if self.chance(1, 3):
            arr = self.pick(self.arrays)
            self.emit(indent + 1, f"{arr}[{self.draw(st.integers(0, self.n - 1))}] = {self.rhs()}")
        self.emit(indent, "else:")
        self.emit(indent + 1, f"{v} = {self.rhs()}")
        if new:
            self.scalars.append(v)

    def stmt_early_return(self, indent: int = 1) -> None:
        """`if cond: return value`: the rest of the function runs under a flag."""
        cond = self.compare(indent)
        self.emit(indent, f"if {cond}:")
        value = f"{self.pick(self.arrays)} * {self.leaf((), self.arrays)}" if self.array_result else self.rhs()
        self.emit(indent + 1, f"return {value}", margin_text="return m")

    def loop_header(self, indent: int, var: str) -> str:
        """Emit `for <var> in range(n)`; returns the loop variable's name."""
        if not REUSE_LOOP_VARIABLES:
            var = self.fresh(var)
        bound = self.pick([str(self.n), "len(x)", "x.shape[0]"])
        self.emit(indent, f"for {var} in range({bound}):")
        return var

    def stmt_acc_loop(self, indent: int = 1) -> None:
        acc = self.fresh("acc")
        self.emit(indent, f"{acc} = {self.pick(['0.0', '1.0'] + self.scalars)}")
        self.scalars.append(acc)
        nested = self.chance(1, 4)
        i = self.loop_header(indent, "i")
        body, idx = indent + 1, (i,)
        if nested:
            j = self.loop_header(body, "j")
            body, idx = body + 1, (i, j)
        for _ in range(self.draw(st.integers(1, 2))):
            kind = self.draw(st.integers(0, 3))
            if kind == 0:
                self.emit(body, f"{acc} = {acc} + {self.rhs(idx)}")
            elif kind == 1:
                factor = self.pick(["math.cos({e})", "math.tanh({e})", "(0.5 + 0.5 * math.sin({e}))"])
                self.emit(body, f"{acc} = {acc} * {factor.format(e=self.sexpr(1, idx))}")
            elif kind == 2:
                cond = self.compare(body, idx)
                self.emit(body, f"if {cond}:")
                self.emit(body + 1, f"{acc} = {acc} + {self.rhs(idx)}")
                self.emit(body, "else:")
                self.emit(body + 1, f"{acc} = {acc} - {self.rhs(idx)}")
            else:
                self.emit(body, f"{acc} += {self.rhs(idx)}")
        if self.chance(1, 5):
            cond = self.compare(body, idx)
            self.emit(body, f"if {cond}:")
            self.emit(body + 1, self.pick(["break", "continue"]))

    def stmt_store_loop(self, indent: int = 1) -> None:
        kind = self.pick(["zeros", "copy", "empty", "ones_like", "existing"])
        if kind == "existing":
            z = self.pick(self.arrays)  # possibly the input x: zymo must restore what it overwrites
        else:
            z = self.fresh("z")
            init = {"zeros": f"np.zeros({self.n})", "copy": f"np.copy({self.pick(self.arrays)})",
                    "empty": f"np.empty({self.n})", "ones_like": "np.ones_like(x)"}[kind]
            self.emit(indent, f"{z} = {init}")
        readable = [a for a in self.arrays if a != z] if kind == "empty" else self.arrays + (
            [z] if z not in self.arrays else [])
        i = self.loop_header(indent, "i")
        self.emit(indent + 1, f"{z}[{i}] = {self.rhs((i,), readable)}")  # every element written first
        if kind != "empty" and self.chance(1, 2):
            self.emit(indent + 1, f"{z}[{i}] += {self.rhs((i,), readable)}")
        if self.chance(1, 3):
            cond = self.compare(indent + 1, (i,))
            self.emit(indent + 1, f"if {cond}:")
            self.emit(indent + 2, f"{z}[{i}] = {z}[{i}] * {self.squash(self.sexpr(1, (i,)), 'math')}")
        if z not in self.arrays:
            self.arrays.append(z)

    def build(self, n_stmts: int) -> None:
        simple = [self.stmt_scalar, self.stmt_scalar, self.stmt_array, self.stmt_store, self.stmt_view, self.stmt_if]
        loops = [self.stmt_acc_loop, self.stmt_acc_loop, self.stmt_store_loop, self.stmt_store_loop]
        kinds = simple + (loops if self.loops else [])
        if self.chance(1, 4):
            kinds = kinds + [self.stmt_early_return]
        for _ in range(n_stmts):
            self.pick(kinds)()
        if self.loops and not any(t and t.startswith("for ") for _, t, _ in self.lines):
            self.pick(loops)()

    def source(self) -> str:
        terms = [s for s in self.scalars if s not in ("a", "b")] or ["a"]
        terms += [f"np.sum({a})" for a in self.arrays]
        if self.array_result:
            ret = f"{self.pick(self.arrays)} * {self.pick(self.scalars)} + {terms[0]}"
        else:
            ret = " + ".join(terms)
        out = ["import math", "", "import numpy as np", "", "", "def prog(x, a, b):"]
        out += ["    " * ind + text for ind, text, _ in self.lines if text is not None]
        out += [f"    return {ret}", "", "", "def margin(x, a, b):", "    m = 1e9"]
        out += ["    " * ind + text for ind, _, text in self.lines]
        out += ["    return m", ""]
        return "\n".join(out)


@st.composite
def programs(draw, loops: bool):
    n = draw(st.integers(1, 5))
    p = Program(draw, n, loops, array_result=draw(st.integers(0, 4)) == 0)
    p.build(draw(st.integers(1, 5)))
    src = p.source()
    x = draw(st.lists(st.floats(-1.5, 1.5, allow_nan=False, width=64), min_size=n, max_size=n))
    a = draw(st.floats(-1.5, 1.5, allow_nan=False))
    b = draw(st.floats(-1.5, 1.5, allow_nan=False))
    return src, (np.array(x, dtype=np.float64), float(a), float(b))


@pytest.fixture(scope="module")
def progdir(tmp_path_factory):
    return tmp_path_factory.mktemp("programs")


def load(src: str, directory):
    name = f"zymo_generated_{next(_ids)}"
    path = directory / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_program(src: str, args: tuple, directory) -> None:
    note(src)
    note(f"args = {args!r}")
    mod = load(src, directory)
    with np.errstate(over="raise", divide="raise", invalid="raise", under="ignore"):
        m = mod.margin(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    assume(m > 1e-2)
    # (c) the IR verifies
    verify(zymo.ir(mod.prog, *args))
    # (a) forward and reverse against finite differences, (b) forward against reverse
    try:
        check_grad(mod.prog, *args, eps=1e-4, rtol=1e-6, atol=1e-8, name=f"prog in {mod.__file__}")
    except FiniteDifferenceError:
        assume(False)  # zymo and finite differences disagree where finite differences do not converge


_SETTINGS = dict(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.filter_too_much])


@pytest.mark.slow
@settings(**_SETTINGS)
@given(programs(loops=False))
def test_straight_line_programs(progdir, prog):
    src, args = prog
    check_program(src, args, progdir)


@pytest.mark.slow
@settings(**_SETTINGS)
@given(programs(loops=True))
def test_loop_programs(progdir, prog):
    src, args = prog
    check_program(src, args, progdir)


@pytest.mark.slow
def test_generator_covers_the_grammar():
    """The grammar's constructs all show up in a handful of drawn programs."""
    seen = set()

    @settings(max_examples=80, database=None, **_SETTINGS)
    @given(programs(loops=True))
    def collect(prog):
        src, _ = prog
        for token in ["for i", "for j", "if ", "else:", "] = ", "] += ", "np.zeros", "np.empty",
                      "np.copy", "math.sin", "np.exp", "tanh", " / (1.5 + ", "x[", "acc"]:
            if token in src.split("def margin")[0]:
                seen.add(token)

    collect()
    assert len(seen) >= 13, seen


def _reuse_after_return(x, a):
    for i in range(3):
        a = a * x[i]
    if a > 0.0:
        return a
    for i in range(3):
        a = a + x[i]
    return a


def _reuse_in_branch(x, a):
    for i in range(3):
        a = a * x[i]
    if a > 0.0:
        a = a * 2.0
    else:
        for i in range(3):
            a = a + x[i]
    return a


@pytest.mark.parametrize("f", [_reuse_after_return, _reuse_in_branch])
def test_loop_variable_reused_in_one_branch(f):
    """Regression: was ZymoTypeError 'i has a different structure in each branch' (fixed in 46dbc6a)."""
    x = np.array([0.5, -1.0, 2.0])
    for a in (1.0, -1.0):
        check_grad(f, x, a)
