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
- `cases` lists extra test cases for `zymo.testing.rule_cases`: tuples
  `(expression, argument specs[, options])`, the expression calling the
  primitive as `fn` with arguments named x, y, z, w (see `zymo.testing`).
- `check(pos, kw)` (a classmethod) may refuse a call at lowering time with a
  message (an argument combination the rule does not differentiate, such as
  `np.linalg.norm(x, ord=3)`); the frontend raises it at the user's line.
"""
from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
from functools import cached_property
from typing import Any, Callable, ClassVar

REGISTRY: dict[str, type["Rule"]] = {}
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
                            "parts", "cases", "part_of"):
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
            sub = mod.split(".")[1] if mod.startswith("numpy.") and mod.split(".")[1] in ("linalg",) else ""
            return f"np.{sub + '.' if sub else ''}{name}"
        if mod == "math":
            return f"math.{name}"
        if mod == "builtins":
            return name
        raise TypeError(f"rule {cls.key}: give call=")


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
        self.names = {n.id for n in ast.walk(self.expr) if isinstance(n, ast.Name)}
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
    return key


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
