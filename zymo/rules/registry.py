"""Derivative rules as data: one registry entry per primitive.

Contract: a rule is a class deriving from `Rule`, declared with class keywords:

    class sin(Rule, key="numpy.sin", fn=np.sin, elementwise=True, out=True):
        def jvp_x(t, ans, x): return t * np.cos(x)
        def vjp_x(g, ans, x): return g * np.cos(x)

- `key` is the stable name used in the IR, the printer and errors; `fn` is the
  primal callable; `call` is how generated code names it (default: derived from
  `fn`, e.g. `np.sin`), or `template` an operator form such as "{0} + {1}".
- `jvp_<p>(t, ans, *params)` returns the tangent contribution of parameter `p`
  given its tangent `t`; `vjp_<p>(g, ans, *params)` returns the adjoint
  contribution to `p` given the result's adjoint `g`. Their parameters after
  `(t|g, ans)` are the primal's signature, defaults included. Each body is a
  single `return <expression>`: codegen inlines it into the derivative program,
  and tests call it directly. A parameter is read by the rule only if its name
  appears in the body; the caching analysis uses this (`Rule.uses`).
- `elementwise` rules broadcast: codegen sums adjoints back to each operand's
  shape. `view` rules return a view of their first argument (the shadow is the
  same view of its shadow); `maybe_view` rules return a view or a copy, decided
  at run time (`reshape`): generated code checks which. `alloc` rules return fresh memory that no input
  flows into. `nondiff` rules have zero derivative by rule (comparisons, floor).
  `out` rules accept `out=` (a full overwrite of that memory).
- Types come from evaluating `fn` on small example values (see
  `analysis/types.py`), or from `result_type` when a rule defines it.
- `parts` (a tuple of keys) marks a function returning a tuple (`eigh`, `qr`,
  `svd`, `slogdet`): the frontend lowers a call into one op per part, each a
  rule of its own computing one element of the tuple with the same arguments
  (and naming the function in `part_of`).
- `cases` lists the rule's test cases for `zymo.testing.rule_cases`: tuples
  `(expression, argument specs[, options])`, the expression calling the
  primitive as `fn` with arguments named x, y, z, w, and `Form`s, a named test
  function of `zymo.testing.forms` at given shapes (see `zymo.testing`). A rule
  declaring a `Form` gets no automatic cases; otherwise elementwise rules, ufuncs
  and `math` functions get the automatic ones (shapes, dtypes, `out=`, loops)
  unless `auto_cases` is False. `domains` (one `(lo, hi[, signed])` per
  argument) says where the cases draw each argument.
- Facts for the analyses and rewrites, each a class keyword with a default:
  `pure` (False: the call has an effect of its own, output or random state, and is never
  left out), `may_raise` (False: never raises, whatever its operands), `numbers_safe`
  (never raises on numbers: Python's ints, IEEE floats), `overflows` (on NumPy numbers it
  raises only under `np.errstate(over="raise")`: `+ - *`), `array_safe` (never raises on a
  float array, an empty one included), `numba_safe` (Numba computes it without raising:
  nan or inf where Python raises), `cheap` (recomputed rather than cached),
  `value_numbered` (a function of its number operands only: equal calls are merged),
  `size_arith` (`+ - *`: of ints computed from sizes, an int computed from sizes),
  `int_arith` (of ints, an int: `+ - * // %`, unary `-`/`+`), `size` (returns a size or a
  trip count: an int never negative), `keeps_shape` (its result keeps the shape of the
  operand it is computed from, or the primal fails: in a loop, `W @ h` with `W` not square
  fails at the next iteration), `data_shaped` (its result's shape depends on the operands'
  values or on number arguments: `np.repeat`, `np.arange`), `matrix_product` (`@`, `np.dot`).
- `check(pos, kw)` (a classmethod) may refuse a call at lowering time with a
  message (an argument combination the rule does not differentiate, such as
  `np.linalg.norm(x, ord=3)`); the frontend raises it at the user's line.
- Arguments are bound by the primal's own signature (`Rule.binding`): a call's
  positional and keyword arguments name the primal's parameters (`np.clip(x,
  a_min=0.1)`), which map to the rule's parameters by name, else by position
  (`a_min` is `clip`'s second parameter, the rule's `lo`), else through
  `aliases` (a dict, primal keyword -> rule parameter: NumPy 2's `min=`/`max=`).
  A differentiable rule refuses an argument it has no parameter for unless it is
  in `INERT` (it does not change the derivative) or equals the primal's default.
"""
from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
from collections.abc import Callable
from functools import cached_property
from typing import Any, ClassVar, NamedTuple

from .. import pyast

BOTH = ("float64", "float32")  # the dtypes of most test cases
# the facts a rule declares for the analyses (`Rule`'s class keywords; see the contract)
FACTS = ("pure", "may_raise", "numbers_safe", "overflows", "array_safe", "numba_safe", "cheap", "value_numbered",
         "size_arith", "int_arith", "size", "keeps_shape", "data_shaped", "matrix_product")


def rules_with(fact: str) -> frozenset[str]:
    """The keys of the registered rules that declare `fact` (lazily registered ones included once loaded)."""
    return frozenset(k for k, r in REGISTRY.items() if getattr(r, fact))


class Form(NamedTuple):
    """A test case of a rule in one of `zymo.testing.forms`' named forms (test functions such
    as `red_axis0`, `return fn(x, axis=0)`), for `Rule.cases`: arguments drawn at `shapes`
    in each of `dtypes` ("mixed": float32 and float64 alternate); `kind` "grad" (against
    finite differences) or "zero" (the derivative exactly zero as well); `extra` arguments
    appended (a value, or `("w", shape)`: random weights); `fn` the callable the form calls
    (default: the rule's); `dom` the key whose domains draw the arguments; `fix` a named
    adjustment of them ("ascending", "descending", "positive", "negative"); `tag` a suffix
    of the case's name; `params` those of a parametrized form."""

    name: str
    shapes: tuple
    dtypes: tuple = ("float64",)
    kind: str = "grad"
    extra: tuple = ()
    fn: Any = None
    dom: str | None = None
    fix: str | None = None
    tag: str = ""
    params: tuple = ()


REGISTRY: dict[str, type[Rule]] = {}
# primal callable (by id) -> key, for resolving calls in user code
BY_CALLABLE: dict[int, str] = {}


class Rule:
    key: ClassVar[str]
    fn: ClassVar[Callable[..., Any] | None] = None
    call: ClassVar[str | None] = None
    template: ClassVar[str | None] = None
    elementwise: ClassVar[bool] = False
    view: ClassVar[bool] = False
    maybe_view: ClassVar[bool] = False
    alloc: ClassVar[bool] = False
    nondiff: ClassVar[bool] = False
    out: ClassVar[bool] = False
    sample: ClassVar[dict[str, Any]] = {}
    parts: ClassVar[tuple[str, ...]] = ()
    part_of: ClassVar[str | None] = None
    cases: ClassVar[tuple] = ()
    pure: ClassVar[bool] = True
    may_raise: ClassVar[bool] = True
    numbers_safe: ClassVar[bool] = False
    overflows: ClassVar[bool] = False
    array_safe: ClassVar[bool] = False
    numba_safe: ClassVar[bool] = False
    cheap: ClassVar[bool] = False
    value_numbered: ClassVar[bool] = False
    size_arith: ClassVar[bool] = False
    int_arith: ClassVar[bool] = False
    size: ClassVar[bool] = False
    keeps_shape: ClassVar[bool] = False
    data_shaped: ClassVar[bool] = False
    matrix_product: ClassVar[bool] = False
    auto_cases: ClassVar[bool] = True
    domains: ClassVar[tuple] = ()
    aliases: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, key: str = "", fn: Any = None, call: str | None = None,
                          template: str | None = None, register: bool = True, **flags: Any):
        super().__init_subclass__()
        if not key:
            return
        cls.key = key
        cls.fn = fn
        cls.call = call
        cls.template = template
        for name, value in flags.items():
            if name not in ("elementwise", "view", "maybe_view", "alloc", "nondiff", "out", "sample",
                            "parts", "cases", "part_of", "aliases", "auto_cases", "domains", *FACTS):
                raise TypeError(f"unknown rule flag {name}")
            setattr(cls, name, value)
        if register:
            if key in REGISTRY:
                raise ValueError(f"rule {key} registered twice")
            REGISTRY[key] = cls
            if fn is not None and id(fn) not in BY_CALLABLE:
                BY_CALLABLE[id(fn)] = key
                owner = getattr(fn, "__self__", None)
                if owner is not None and not isinstance(owner, type(inspect)):
                    BY_METHOD.setdefault((id(owner), getattr(fn, "__name__", "")), key)

    @classmethod
    def check(cls, pos: list, kw: dict) -> str | None:
        """Why this call cannot be differentiated (None: it can). `pos`/`kw` hold IR values
        and Python constants (axis, ord, ...), as the frontend has them."""
        return None

    # -- derived data -------------------------------------------------------
    # derived from the class's methods once (a rule class is not changed after its definition)
    @classmethod
    def jvps(cls) -> dict[str, Callable]:
        return _derived(cls, "jvps", lambda: {n[4:]: getattr(cls, n) for n in dir(cls) if n.startswith("jvp_")})

    @classmethod
    def vjps(cls) -> dict[str, Callable]:
        return _derived(cls, "vjps", lambda: {n[4:]: getattr(cls, n) for n in dir(cls) if n.startswith("vjp_")})

    @classmethod
    def signature(cls) -> inspect.Signature:
        """The primal's signature as the rule sees it (from any jvp/vjp)."""
        return _derived(cls, "signature", cls._signature)

    @classmethod
    def _signature(cls) -> inspect.Signature:
        fns = list(cls.jvps().values()) + list(cls.vjps().values())
        if not fns:
            raise TypeError(f"rule {cls.key} has no jvp/vjp")
        sig = inspect.signature(fns[0])
        return sig.replace(parameters=list(sig.parameters.values())[2:])

    @classmethod
    def binding(cls) -> Binding:
        """How a call's arguments, named as the primal names them, map to the rule's parameters."""
        return _derived(cls, "binding", lambda: Binding(cls))

    @classmethod
    def diff_params(cls) -> list[str]:
        return [p for p in cls.signature().parameters if p in cls.vjps() or p in cls.jvps()]

    @classmethod
    def callee(cls) -> str:
        if cls.call:
            return cls.call
        fn = cls.fn
        mod = getattr(fn, "__module__", None) or ""
        name = getattr(fn, "__name__", "")
        if mod.startswith("numpy") or isinstance(fn, type(__import__("numpy").sin)):
            sub = mod.split(".")[1] if mod.startswith("numpy.") and mod.split(".")[1] in ("linalg", "fft") else ""
            return f"np.{sub + '.' if sub else ''}{name}"
        if mod == "math":
            return f"math.{name}"
        if mod == "builtins":
            return name
        raise TypeError(f"rule {cls.key}: give call=")


# keyword arguments that never change a derivative: result dtype and casting (the rule
# computes in the result's dtype), subclass passing, einsum's contraction order
INERT = frozenset({"dtype", "casting", "subok", "optimize"})


class Binding:
    """A rule's parameters for the arguments of a call written against the primal.

    `param(i)` is the rule parameter that the call's i-th positional argument binds,
    `keyword(k)` the one keyword `k` binds; None where the rule has no such parameter
    (`out=`, `where=`, `initial=` of `np.sum`, whose rule is `sum(x, axis, keepdims)`)."""

    def __init__(self, rule: type[Rule]):
        params = list(rule.signature().parameters)
        self.params = params
        try:
            sig = inspect.signature(rule.fn) if rule.fn is not None else None
        except (TypeError, ValueError):
            sig = None
        if sig is None:  # builtins without a signature: the rule's own names and order
            self.positional: list[str] = list(params)
            self.by_keyword = [False] * len(params)
            self.varpos = False
            self.defaults: dict[str, Any] = {}
            self.by_name = {p: p for p in params}
        else:
            ps = sig.parameters.values()
            kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            self.positional = [p.name for p in ps if p.kind in kinds]
            self.by_keyword = [p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD for p in ps if p.kind in kinds]
            self.varpos = any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in ps)
            self.defaults = {p.name: p.default for p in ps if p.default is not inspect.Parameter.empty}
            names = [p.name for p in ps]
            by_name: dict[str, str] = {p: p for p in params if p in names}
            taken = set(by_name)
            for i, p in enumerate(params):  # the rest by position: clip's (a, a_min, a_max) is (x, lo, hi)
                if p not in taken and i < len(self.positional) and self.positional[i] not in taken:
                    by_name[self.positional[i]] = p
            if any(p.kind == inspect.Parameter.VAR_KEYWORD for p in ps):  # np.pad(..., **kwargs)
                for p in params:
                    if p not in by_name.values():
                        by_name.setdefault(p, p)
            self.by_name = by_name
        self.aliases = dict(rule.aliases)
        for k, p in rule.aliases.items():
            if p not in params:
                raise TypeError(f"rule {rule.key}: alias {k} -> {p}, which is not a parameter")
            self.by_name[k] = p

    def param(self, i: int) -> str | None:
        if i < len(self.positional):
            return self.by_name.get(self.positional[i])
        if self.varpos and i < len(self.params):  # np.einsum(subscripts, *operands)
            return self.params[i]
        return None

    def keyword(self, k: str) -> str | None:
        return self.by_name.get(k)

    def canonical(self, pos: list, kw: dict) -> tuple[list, dict]:
        """The call with keywords that name the next positional parameters moved into place
        (`solve_triangular(a, b=y, lower=True)` -> `(a, y, lower=True)`), as NumPy binds them:
        rules' `check` and the printed call see one form."""
        back = {self.renamed({k: None}).popitem()[0]: k for k in kw if k in self.aliases}
        pos, kw = list(pos), self.renamed(kw)
        while len(pos) < len(self.positional) and self.by_keyword[len(pos)] and \
                self.positional[len(pos)] in kw and self.positional[len(pos)] != "out":
            pos.append(kw.pop(self.positional[len(pos)]))
        # an alias that could not move into place keeps the name it was given (`np.clip(x,
        # max=hi)`: NumPy takes `max=` alone, not `a_max=` without `a_min`)
        return pos, {back.get(k, k): v for k, v in kw.items()}

    def unbound(self, pos: list, kw: dict) -> list[str]:
        """The primal's names of the arguments given (`pos`, `kw`: Python constants or
        NOT_CONST) that no rule parameter takes, other than `out` and those in `INERT` or
        at the primal's default value."""
        given = [(self.positional[i] if i < len(self.positional) else f"argument {i + 1}", v, self.param(i))
                 for i, v in enumerate(pos)]
        given += [(k, v, self.keyword(k)) for k, v in kw.items()]
        out = []
        for name, v, param in given:
            if param is not None or name == "out" or name in INERT:
                continue
            if name in self.defaults and v is not NOT_CONST and _same(v, self.defaults[name]):
                continue
            if name == "where" and v is True:  # a ufunc's or reduction's where=True selects everything
                continue
            out.append(name)
        return out

    def renamed(self, kw: dict) -> dict:
        """`kw` with aliases written as the primal's positional name of the same parameter
        (`np.clip(x, min=lo)` -> `a_min=lo`), so that `canonical` can pass them by position."""
        back = {p: n for n, p in self.by_name.items() if n in self.positional}
        return {back.get(self.by_name[k], k) if k in self.aliases else k: v for k, v in kw.items()}


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # an array default compares elementwise
        return False


class InlineRule:
    """A jvp/vjp function parsed for inlining: parameter names and body expression."""

    def __init__(self, fn: Callable):
        src = textwrap.dedent(inspect.getsource(fn))
        node = ast.parse(src).body[0]
        assert isinstance(node, ast.FunctionDef), fn
        body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
            raise TypeError(f"rule function {fn.__qualname__} must be a single `return <expr>`")
        self.fn = fn
        self.expr = body[0].value
        self.params = [a.arg for a in node.args.args]
        sig = inspect.signature(fn)
        self.defaults = {k: p.default for k, p in sig.parameters.items()
                         if p.default is not inspect.Parameter.empty}
        self.names = {n.id for n in pyast.walk(self.expr) if isinstance(n, ast.Name)}
        self.globals = fn.__globals__

    @cached_property
    def used_params(self) -> frozenset[str]:
        return frozenset(p for p in self.params if p in self.names)


_INLINE: dict[Callable, InlineRule] = {}
_DERIVED: dict[tuple[type, str], Any] = {}


def _derived(cls: type, what: str, make: Callable[[], Any]) -> Any:
    """`make()`, computed once per rule class and `what`."""
    key = (cls, what)
    out = _DERIVED.get(key)
    if out is None:
        out = _DERIVED[key] = make()
    return out


def inline_rule(fn: Callable) -> InlineRule:
    ir = _INLINE.get(fn)
    if ir is None:
        ir = _INLINE[fn] = InlineRule(fn)
    return ir


def uses(rule: type[Rule], which: str, param: str) -> frozenset[str]:
    """The primal parameters (and 'ans') read by the `which` ('jvp'|'vjp') rule of `param`."""
    fn = (rule.jvps() if which == "jvp" else rule.vjps())[param]
    return inline_rule(fn).used_params - {inline_rule(fn).params[0]}


def lookup(key: str) -> type[Rule]:
    try:
        return REGISTRY[key]
    except KeyError:
        near = difflib.get_close_matches(key, REGISTRY, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise KeyError(f"no derivative rule for {key}{hint}") from None


def rule_for_callable(fn: Any) -> str | None:
    key = BY_CALLABLE.get(id(fn))
    if key is None and getattr(fn, "__self__", None) is not None and not isinstance(fn.__self__, type(inspect)):
        # a bound method (np.random.rand is RandomState().rand): a new object on every access
        key = BY_METHOD.get((id(fn.__self__), getattr(fn, "__name__", "")))
    if key is None and (LAZY or LAZY_IDS) and _load_lazy(fn):
        return rule_for_callable(fn)
    return key


# Rules registered lazily, by the import of their module, because the packages they need are
# slow to import (SciPy's: docs/decisions/0007). A package of callables -> the modules of their rules;
# a callable (NumPy's own, whose rule needs SciPy) -> the module of its rule.
LAZY: dict[str, tuple[str, ...]] = {}
LAZY_IDS: dict[int, str] = {}


def _load_lazy(fn: Any) -> bool:
    """Import the lazily registered rules `fn` may need: those of the package that defines it,
    those of packages already imported (SciPy's ufuncs name no module), its own. True if any
    module was imported."""
    import importlib
    import sys

    module = getattr(fn, "__module__", None) or ""
    wanted = [mods for package, mods in LAZY.items()
              if module == package or module.startswith(package + ".") or package in sys.modules]
    own = LAZY_IDS.get(id(fn))
    if own is not None:
        wanted.append((own,))
    if not wanted:
        return False
    for package in [p for p, mods in LAZY.items() if mods in wanted]:
        del LAZY[package]
    for name in {m for mods in wanted for m in mods}:
        importlib.import_module(name)
    for i in [i for i, m in LAZY_IDS.items() if m in sys.modules]:
        del LAZY_IDS[i]
    return True


def load_all() -> None:
    """Register every rule, the lazy ones too (for code that lists the registry)."""
    import importlib

    names = {m for mods in LAZY.values() for m in mods} | set(LAZY_IDS.values())
    LAZY.clear()
    LAZY_IDS.clear()
    for name in sorted(names):
        importlib.import_module(name)


BY_METHOD: dict[tuple[int, str], str] = {}


class _NoConst:
    pass


NOT_CONST = _NoConst()


def const_value(b: Any) -> Any:
    """The compile-time value of an argument as `Rule.check` sees it (an IR constant, a Python
    object, a tuple of those), or NOT_CONST when it is known only at run time."""
    if b is None or isinstance(b, (int, float, str, bool)):
        return b
    if isinstance(b, tuple):
        parts = tuple(const_value(x) for x in b)
        return NOT_CONST if any(p is NOT_CONST for p in parts) else parts
    if getattr(b, "is_const", False):
        return b.const
    if hasattr(b, "obj"):
        return b.obj
    return NOT_CONST
