"""User-defined rules and inactive functions: `zymo.custom_rule`, `zymo.inactive`.

Contract:

- `inactive(fn, result=...)` (also a decorator) registers `fn` as a non-differentiable
  primitive: a call runs `fn` in the primal (logging, printing, timing, random numbers)
  and contributes no derivative. Its result, if any, must be fresh (a new array or a
  number), and `fn` must not write to arrays that carry derivatives. zymo finds the
  result's type by calling `fn` once on small example values, unless `result=` gives an
  example of what it returns (`result=None`: it returns nothing; nothing is called).
- `custom_rule(fn)` (also a decorator) returns a `CustomRule`: calling it calls `fn`,
  and zymo differentiates calls to it with the user's rules instead of reading `fn`:
  * the simple form, for functions of arrays and floats returning a value:
    `.defjvp(jvp)` with `jvp(ans, *args, *tangents) -> tangent of ans` (a tangent is None
    for an argument that is not active) and `.defvjp(vjp, reads=None)` with
    `vjp(g, ans, *args) -> tuple of cotangents, one per argument` (None where there is
    none). `reads` names the primal values the vjp uses ("ans" and parameter names);
    the caching analysis records only those and passes None for the others.
  * the Enzyme form: `.defforward(fwd)` (the same signature as jvp), and
    `.defreverse(augmented_primal, reverse, reads=None)`: `augmented_primal(*args) ->
    (ans, tape)`, `reverse(tape, g, *args) -> cotangents`. zymo does not store rule tapes
    yet: the adjoint sweep calls `augmented_primal` again on the (cached) arguments to
    rebuild the tape, so `reads` should name the arguments it needs.
  Parameters must be positional (no *args/**kwargs); arguments not differentiated may be
  anything zymo passes through (ints, constant arrays). A rule without both directions is
  refused at the caller's line. `zymo.testing.check_custom_rule(f, *args)` checks a rule
  against finite differences and forward against reverse, as built-in rules are checked.
- Generated code calls user functions through `_rt.USER[i]`, so derivatives using them run
  in the Python backend (Numba cannot compile arbitrary Python objects: with the default
  policy the Numba backend falls back with a warning).
"""
from __future__ import annotations

import inspect
import itertools
import linecache
from collections.abc import Callable
from typing import Any

from .. import config
from .. import runtime as _rt
from ..analysis import types as TI
from ..errors import ZymoUsageError
from .registry import REGISTRY, Rule

_INFER = object()
_counter = itertools.count()


def _register_slot(obj: Any) -> int:
    _rt.USER.append(obj)
    return len(_rt.USER) - 1


def _key(prefix: str, fn: Callable) -> str:
    base = f"{prefix}.{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    key, k = base, 1
    while key in REGISTRY:
        k += 1
        key = f"{base}#{k}"
    return key


def _params(fn: Callable) -> list[str]:
    sig = inspect.signature(fn)
    out = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise ZymoUsageError(f"custom rule for {fn.__qualname__}: parameter {p.name!r} must be positional "
                                 "(no *args, **kwargs or keyword-only parameters)")
        out.append(p.name)
    return out


def _result_type(example: Any):
    if example is None:
        return lambda pos, kw: TI.T.NONE
    t = TI.type_of_result(example) if not isinstance(example, tuple) else tuple(TI.type_of_result(e) for e in example)
    return lambda pos, kw: t


def inactive(fn: Callable | None = None, *, result: Any = _INFER) -> Any:
    """Mark `fn` as not differentiated: it runs in the primal only (see the module docstring)."""
    if fn is None:
        return lambda f: inactive(f, result=result)
    slot = _register_slot(fn)
    key = _key("inactive", fn)
    type(f"inactive_{slot}", (Rule,), {"__module__": __name__, "user": True}, key=key, fn=fn,
         call=f"_rt.USER[{slot}]", nondiff=True, alloc=True)
    if result is not _INFER:
        TI.RESULT_TYPES[key] = _result_type(result)
    return fn


class CustomRule:
    """A function with user-written derivative rules (see `custom_rule`)."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.params = _params(fn)
        self.jvp: Callable | None = None
        self.vjp: Callable | None = None
        self.augmented: Callable | None = None
        self.reverse: Callable | None = None
        self.reads: tuple[str, ...] | None = None
        self.slot = _register_slot(self)
        self.key = _key("custom", fn)
        self.rule: type[Rule] | None = None
        self._shape: tuple = ()
        self.__name__ = getattr(fn, "__name__", "custom_rule")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = fn.__doc__
        self._build()

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def __repr__(self) -> str:
        return f"<zymo.custom_rule {self.__qualname__}>"

    # -- defining the rules ----------------------------------------------------------
    def defjvp(self, jvp: Callable) -> Callable:
        self.jvp = jvp
        return jvp

    defforward = defjvp

    def defvjp(self, vjp: Callable | None = None, *, reads: Any = None) -> Any:
        if vjp is None:
            return lambda f: self.defvjp(f, reads=reads)
        self.vjp, self.augmented, self.reverse = vjp, None, None
        self._set_reads(reads)
        return vjp

    def defreverse(self, augmented_primal: Callable, reverse: Callable, *, reads: Any = None) -> None:
        self.augmented, self.reverse, self.vjp = augmented_primal, reverse, None
        self._set_reads(reads)

    def _set_reads(self, reads: Any) -> None:
        if reads is not None:
            reads = (reads,) if isinstance(reads, str) else tuple(reads)
            unknown = set(reads) - set(self.params) - {"ans"}
            if unknown:
                raise ZymoUsageError(f"custom rule for {self.__qualname__}: reads= names {sorted(unknown)}, "
                                     f"which are neither 'ans' nor parameters {self.params}")
        self.reads = reads
        self._build()

    # -- what generated code calls -------------------------------------------------------
    def jvp_term(self, k: int, t: Any, ans: Any, *args: Any) -> Any:
        tangents = [None] * len(args)
        tangents[k] = t
        assert self.jvp is not None  # generated code calls jvp_term only for a rule with a jvp
        return self.jvp(ans, *args, *tangents)

    def vjp_term(self, k: int, g: Any, ans: Any, *args: Any) -> Any:
        if self.vjp is not None:
            out = self.vjp(g, ans, *args)
        else:
            assert self.augmented is not None and self.reverse is not None  # (defreverse set both)
            _, tape = self.augmented(*args)
            out = self.reverse(tape, g, *args)
        if not isinstance(out, tuple) or len(out) != len(args):
            raise ZymoUsageError(f"the reverse rule of {self.__qualname__} must return a tuple of {len(args)} "
                                 f"cotangents (one per argument), not {out!r}")
        if out[k] is None:
            raise ZymoUsageError(f"the reverse rule of {self.__qualname__} returned None for argument "
                                 f"{self.params[k]!r}, which is active")
        return out[k]

    def _build(self) -> None:
        """(Re)register the rule class whose jvp/vjp bodies call this object."""
        n, ps = self.slot, self.params
        read = set(ps) | {"ans"} if self.reads is None else set(self.reads)
        if self.augmented is not None and self.reads is None:
            read = set(ps)  # the tape is rebuilt from the arguments
        shape = (frozenset(read), self.augmented is not None)
        if self.rule is not None and shape != self._shape:
            config.programs_stale()  # programs written for the old shape pass it other values (helper 83)
        self._shape = shape
        lines = []
        for k, p in enumerate(ps):
            args = ", ".join(ps)
            vargs = ", ".join(q if q in read else "None" for q in ps)
            vans = "ans" if "ans" in read else "None"
            lines.append(f"    def jvp_{p}(t, ans, {args}): return _rt.USER[{n}].jvp_term({k}, t, ans, {args})")
            lines.append(f"    def vjp_{p}(g, ans, {args}): return _rt.USER[{n}].vjp_term({k}, g, {vans}, {vargs})")
        src = "class _R(Rule):\n" + "\n".join(lines) + "\n"
        filename = f"<zymo custom rule {self.key} #{next(_counter)}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        ns = {"Rule": Rule, "_rt": _rt}
        exec(compile(src, filename, "exec"), ns)
        body = {k: v for k, v in vars(ns["_R"]).items() if k.startswith(("jvp_", "vjp_"))}
        body.update(__module__=__name__, user=True, custom=self)
        REGISTRY.pop(self.key, None)
        self.rule = type(f"custom_{n}", (_CustomBase,), body, key=self.key, fn=self, call=f"_rt.USER[{n}]")


class _CustomBase(Rule):
    @classmethod
    def check(cls, pos, kw):
        c = cls.custom
        if kw:
            return f"pass the arguments of {c.__qualname__} positionally (it has a custom rule)"
        if c.jvp is None or (c.vjp is None and c.reverse is None):
            missing = [name for name, f in (("defjvp", c.jvp), ("defvjp or defreverse", c.vjp or c.reverse))
                       if f is None]
            return f"the custom rule of {c.__qualname__} is incomplete: call {' and '.join(missing)} first"
        return None


def custom_rule(fn: Callable) -> CustomRule:
    """Give `fn` user-written derivative rules (see the module docstring)."""
    return CustomRule(fn)
