"""Rule cases: the test functions and inputs that check every registered rule.

Contract: `rule_cases(key)` is a generic loop over the rule's declared `cases` (expression
entries, each also with its arguments passed by keyword, then `Form`s: `rules/registry.py`)
followed by the automatic cases its flags call for (elementwise rules, ufuncs and `math`
functions of one or two arguments, nondiff ufuncs), unless the rule declares a `Form` or
`auto_cases=False`. A key with no case raises `KeyError`: no rule is skipped silently.
`RuleCase.run` checks a case with `check_grad`, that the IR verifies and calls the rule, and
for kind "zero" that every derivative is exactly zero; `check_rule` runs every case of a key
and raises one `AssertionError` listing the failures.
"""
from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .domains import SEPARATED, ZERO_D, _shape_id, _spec_id, _special_arg, draw_inputs
from .forms import _EXPR_ARGS, FIXES, FORMS, expr_factory, keyword_form
from .grad import GradCheck, check_grad
from .support import _fmt


@dataclass
class RuleCase:
    """One function exercising rule `key` at given inputs; `kind` "grad" (check
    against finite differences) or "zero" (derivative exactly zero as well)."""

    key: str
    name: str
    fn: Callable
    args: tuple
    kind: str = "grad"
    rtol: float | None = None
    atol: float | None = None
    expect: tuple = ()  # the keys the IR must call (default: key; a rule with parts: its parts)

    def __repr__(self) -> str:
        return f"RuleCase({self.name})"

    def keys(self) -> set[str]:
        """The rule keys in the IR of this case (the IR is verified first)."""
        import zymo
        from zymo.ir.verify import verify

        ir = zymo.ir(self.fn, *self.args)
        verify(ir)
        return prim_keys(ir)

    def run(self, modes: Any = ("forward", "reverse"), seed: int = 0) -> GradCheck:
        keys = self.keys()
        expect = self.expect or (self.key,)
        if not any(k in keys for k in expect):
            raise AssertionError(f"{self.name}: the IR does not call {' or '.join(expect)} (it calls {sorted(keys)})")
        res = check_grad(self.fn, *self.args, modes=modes, rtol=self.rtol, atol=self.atol, seed=seed,
                         name=self.name)
        if self.kind == "zero":  # the derivatives of f's result (not of the arguments' final values)
            forward = [(label, d[:res.result_size]) for label, d in res.forward.items()]
            reverse = [(i, g if c is None else np.asarray(g) - np.asarray(c))
                       for i, (g, c) in enumerate(zip(res.reverse, res.cotangents)) if g is not None]
            for label, d in forward + reverse:
                if np.any(np.asarray(d) != 0):
                    raise AssertionError(f"{self.name}: {self.key} is nondiff, but the derivative "
                                         f"({'forward' if isinstance(label, tuple) else 'reverse'}, "
                                         f"{label}) is {_fmt(d)}, not exactly zero")
        return res


def expected_keys(rule: Any) -> tuple:
    """The keys a case of `rule` must find in the IR: its parts, the rules the frontend lowers
    it to (`via`), or its own key."""
    return tuple(rule.parts) or tuple(getattr(rule, "via", ())) or (rule.key,)


def prim_keys(ir: Any) -> set[str]:
    """The rule keys of every `prim` op in an IR function (nested regions included)."""
    from ..ir.core import walk

    return {op.attrs["key"] for op in walk(ir.body) if op.kind == "prim"}






def _weights(shape: tuple) -> Callable:
    """Random weights of `shape` in the case's dtype (an extra argument of a `Form`)."""
    return lambda dt, rng: rng.uniform(-1, 1, size=shape).astype(dt)


_ARRAY_SHAPES = [(5,), (3, 4)]
_UNARY_SHAPES = [(), (5,), (3, 4), ZERO_D]
_BINARY_SHAPES = [((), ()), ((5,), (5,)), ((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (5,)),
                  ((5,), ()), ((2, 3, 4), (3, 1)), (ZERO_D, (5,)), (ZERO_D, ZERO_D)]
_SCALAR = [()]
BOTH = ("float64", "float32")


class _Builder:
    def __init__(self, key: str, dtypes: tuple[str, ...], seed: int):
        from ..rules.registry import lookup

        self.key = key
        self.rule = lookup(key)
        self.fn = self.rule.fn
        self.dtypes = dtypes
        self.rng = np.random.default_rng(zlib.crc32(key.encode()) + seed)
        self.cases: list[RuleCase] = []

    def add(self, tmpl: Callable, shapes: tuple, dtypes: Iterable[str] = ("float64",), kind: str = "grad",
            extra: tuple = (), fn: Any = None, dom_key: str | None = None, fix: Callable | None = None,
            tag: str = "") -> None:
        """Cases of template `tmpl` (given the primitive, or `fn`) at inputs of `shapes`, one per dtype;
        `extra` arguments follow (callables are called with (dtype, rng)); `fix` adjusts the inputs."""
        f = tmpl(self.fn if fn is None else fn)
        for dt in dtypes:
            if dt not in self.dtypes and not (dt == "mixed" and "float32" in self.dtypes):
                continue
            args = draw_inputs(dom_key or self.key, shapes, dt, self.rng)
            if fix is not None:
                args = tuple(fix(*args))
            args += tuple(e(dt, self.rng) if callable(e) else e for e in extra)
            name = f"{self.key}[{f.__name__}{tag},{_shape_id(shapes)},{dt}]"
            n = sum(1 for c in self.cases if c.name.startswith(name[:-1]))
            if n:
                name = f"{name[:-1]}#{n + 1}]"
            self.cases.append(RuleCase(self.key, name, f, args, kind))

    def add_form(self, form: Any) -> None:
        """The cases of a rule's declared `Form`."""
        factory = FORMS[form.name]
        if form.params:
            factory = factory(*form.params)
        extra = tuple(_weights(e[1]) if isinstance(e, tuple) and e[:1] == ("w",) else e for e in form.extra)
        self.add(factory, form.shapes, form.dtypes, form.kind, extra, form.fn, form.dom,
                 FIXES[form.fix] if form.fix else None, form.tag)

    def add_expr(self, src: str, specs: tuple, opts: dict | None = None) -> None:
        """Cases of a rule's declared `cases` entry: `src` calls the primitive as `fn` with
        arguments x, y, z, w drawn from `specs` (shapes, or kinds: see `_special_arg`)."""
        opts = dict(opts or {})
        dtypes = opts.pop("dtypes", ("float64", "float32"))
        label = opts.pop("name", "expr")
        make = expr_factory(src, len(specs), label)
        f = make(opts.pop("fn", self.fn))
        dom_key = opts.pop("dom", None) or self.key
        kind = opts.pop("kind", "grad")
        rtol, atol = opts.pop("rtol", None), opts.pop("atol", None)
        if opts:
            raise TypeError(f"{self.key}: unknown case options {sorted(opts)}")
        for dt in dtypes:
            if dt not in self.dtypes:
                continue
            shapes = [sp for sp in specs if not (isinstance(sp, tuple) and sp and isinstance(sp[0], str))]
            drawn = iter(draw_inputs(dom_key, tuple(shapes), dt, self.rng))
            args = tuple(_special_arg(sp, dt, self.rng) if isinstance(sp, tuple) and sp and isinstance(sp[0], str)
                         else next(drawn) for sp in specs)
            short = " ".join(src.split())[:60].replace("[", "(").replace("]", ")").replace(",", ";")
            name = f"{self.key}[{label}:{short},{','.join(_spec_id(sp) for sp in specs)},{dt}]"
            n = sum(1 for c in self.cases if c.name.startswith(name[:-1]))
            if n:
                name = f"{name[:-1]}#{n + 1}]"
            self.cases.append(RuleCase(self.key, name, f, args, kind, rtol, atol, expected_keys(self.rule)))




def rule_cases(key: str, dtypes: Iterable[str] = BOTH, seed: int = 0) -> list[RuleCase]:
    """The test functions and inputs `check_rule` runs for rule `key`."""
    from ..rules.registry import Form

    b = _Builder(key, tuple(dtypes), seed)
    rule = b.rule
    if rule.part_of:
        # one element of a function returning a tuple: the cases of that function that use it
        cases = [c for c in rule_cases(rule.part_of, dtypes, seed) if key in c.keys()]
        if not cases:
            raise KeyError(f"check_rule: no case of {rule.part_of} uses {key}")
        return cases
    exprs = [entry for entry in rule.cases if not isinstance(entry, Form)]
    forms = [entry for entry in rule.cases if isinstance(entry, Form)]
    for entry in exprs:
        b.add_expr(entry[0], entry[1], entry[2] if len(entry) > 2 else None)
    special = getattr(rule, "unpack_first", None) or getattr(rule, "inplace_arg", None) is not None
    for entry in exprs:  # the same calls with their arguments passed by keyword (float64)
        src = None if special else keyword_form(entry[0], b.fn)
        if src is not None:
            opts = dict(entry[2]) if len(entry) > 2 and entry[2] else {}
            opts.update(dtypes=("float64",), name="kw")
            b.add_expr(src, entry[1], opts)
    for form in forms:
        b.add_form(form)
    if not forms:
        _automatic_cases(b, declared=len(b.cases))
    if not b.cases:
        raise KeyError(f"check_rule: no test cases for {key} with dtypes {tuple(dtypes)}")
    return b.cases


def _automatic_cases(b: _Builder, declared: int) -> None:
    """The cases a rule's flags call for, where its declared cases do not say everything."""
    rule, fn, key = b.rule, b.fn, b.key
    mod = key.split(".")[0] if "." in key else ""
    is_ufunc = isinstance(fn, np.ufunc)
    if declared and (rule.nondiff or not rule.auto_cases or not (rule.elementwise or is_ufunc or mod == "math")):
        return  # the rule's own cases say everything
    if rule.nondiff and is_ufunc and fn.nin == 2:
        for p in [((), ()), ((5,), (5,))]:
            b.add(FORMS["zero2"], p, BOTH, kind="zero", dom_key="lt")
            b.add(FORMS["const2"], p, BOTH, dom_key="lt")
    elif rule.nondiff and not declared:
        # floor, ceil, trunc, sign, isfinite, isnan and the like: one argument
        shapes = _SCALAR if (mod == "math" or not is_ufunc) else _UNARY_SHAPES
        for s in shapes:
            dts = ("float64",) if mod == "math" else BOTH
            b.add(FORMS["zero1"], (s,), dts, kind="zero")
            b.add(FORMS["const1"], (s,), dts)
    elif rule.elementwise or is_ufunc or mod == "math":
        nparams = len(rule.signature().parameters)
        if nparams == 1:
            _unary_cases(b, scalar_only=mod in ("math", "builtins"), dts=("float64",) if mod == "math" else BOTH)
        elif nparams == 2:
            _binary_cases(b, scalar_only=mod in ("math", "builtins"), dts=("float64",) if mod == "math" else BOTH)
        elif not declared:
            raise KeyError(f"check_rule: no test cases for {key} ({nparams} parameters); declare them on the rule")
    elif not declared:
        raise KeyError(f"check_rule: no test cases for {key}; declare them on the rule (`cases=`)")


def _unary_cases(b: _Builder, scalar_only: bool, dts: tuple) -> None:
    for s in (_SCALAR if scalar_only else _UNARY_SHAPES):
        b.add(FORMS["call1"], (s,), dts)
    for s in (_SCALAR if scalar_only else [(), (5,)]):
        b.add(FORMS["loop1"], (s,), dts)
    if b.rule.out:
        for s in _ARRAY_SHAPES:
            b.add(FORMS["out1"], (s,), BOTH)
            b.add(FORMS["inplace1"], (s,), BOTH)


def _binary_cases(b: _Builder, scalar_only: bool, dts: tuple) -> None:
    short = b.key.split(".")[-1]
    for p in ([((), ())] if scalar_only else _BINARY_SHAPES):
        b.add(FORMS["call2"], p, dts)
    for p in ([((), ())] if scalar_only else [((), ()), ((5,), (5,))]):
        b.add(FORMS["loop2"], p, dts)
    if not scalar_only:
        for p in [((5,), (5,)), ((3, 4), (4,)), ((), (5,))]:
            b.add(FORMS["call2"], p, ("mixed",))
    if b.key not in SEPARATED and short not in SEPARATED:
        for s in (_SCALAR if scalar_only else [(), (5,)]):
            # x / x: its terms grow like 1 / x and cancel, so keep x away from zero
            b.add(FORMS["self2"], (s,), dts, dom_key="abs" if short in ("truediv", "divide") else None)
    if short in ("pow", "power"):
        for s in (_SCALAR if scalar_only else [(), (5,)]):
            b.add(FORMS["pow_int"], (s,), dts, dom_key="sin")
    if b.rule.out:
        for p in [((5,), (5,)), ((3, 4), (4,)), ((3, 4), ())]:
            b.add(FORMS["out2"], p, BOTH)
            b.add(FORMS["inplace2"], p, BOTH)
        b.add(FORMS["inplace2_rhs"], ((5,), (5,)), BOTH)


def check_custom_rule(f: Any, *args: Any, modes: Any = ("forward", "reverse"), **kw: Any) -> GradCheck:
    """Check a `zymo.custom_rule` (or any function zymo has a rule for) at `args` as built-in rules are
    checked: `check_grad` of a function that calls it (forward and reverse against finite differences,
    forward against reverse, the primal). Call it at several shapes and dtypes; `kw` goes to check_grad."""
    from ..rules.registry import rule_for_callable

    if rule_for_callable(f) is None:
        raise KeyError(f"check_custom_rule: zymo has no rule for {f!r}")
    label = "call_" + "".join(ch if ch.isalnum() else "_" for ch in getattr(f, "__name__", "f"))
    src = "fn(" + ", ".join(_EXPR_ARGS[k] if k < len(_EXPR_ARGS) else f"a{k}" for k in range(len(args))) + ")"
    if len(args) > len(_EXPR_ARGS):
        raise ValueError("check_custom_rule: at most four arguments")
    g = expr_factory(src, len(args), label)(f)
    return check_grad(g, *args, modes=modes, name=kw.pop("name", getattr(f, "__qualname__", label)), **kw)


def check_rule(key: str, modes: Any = ("forward", "reverse"), dtypes: Iterable[str] = BOTH,
               seed: int = 0) -> list[RuleCase]:
    """Run every case of `rule_cases(key)` in `modes`; raise one AssertionError listing the failures."""
    cases = rule_cases(key, dtypes, seed)
    failures = []
    for case in cases:
        try:
            case.run(modes, seed)
        except AssertionError as e:
            failures.append(f"- {case.name}: {e}")
        except Exception as e:  # a crash in zymo is a failure of the rule's check too
            failures.append(f"- {case.name}: {type(e).__name__}: {e}")
    if failures:
        raise AssertionError(f"check_rule({key!r}): {len(failures)} of {len(cases)} cases failed\n"
                             + "\n".join(failures))
    return cases
