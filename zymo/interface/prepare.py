"""Preparation: the work done once for repeated calls of an operator, and its reuse checks.

Contract: `prepare_<op>(...)` takes exactly the positional arguments of `<op>(...)`
(`f`, then `y` for an in-place `f(y, x)`, the backend, `x`, the tangent, cotangent
or direction if the operator takes one, the contexts) and returns a `Preparation`:
the backend's engine for that function and that signature of inputs (zymo: owned
copies of x and shadows, compiled derivative, replay; JAX: jitted derivatives;
torch: converted constants), made by evaluating `f` once. Pass it as `prep=` to
`<op>` or any of its `value_and_*` forms. On every use it checks, cheaply, that the
function, backend, operator family, in-place-ness and the type, shape and dtype of
x, y, the operand and each context are those it was made for, and raises
`PreparationMismatch` naming the first difference otherwise. It never changes the
caller's arrays. A preparation is not thread-safe (it owns buffers).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .backends import Backend
from .contexts import Context, check_contexts, context_signature, describe, is_scalar, signature
from .errors import PreparationMismatch, ZymoUsageError

# operator family: (operands after x, in-place f(y, x) allowed, x must be scalar, y must be scalar)
OPERATORS = {
    "derivative": (0, True, True, False),
    "second_derivative": (0, False, True, False),
    "gradient": (0, False, False, True),
    "jacobian": (0, True, False, False),
    "hessian": (0, False, False, True),
    "hvp": (1, False, False, True),
    "pushforward": (1, True, False, False),
    "pullback": (1, True, False, False),
}
_OPERAND = {"hvp": "direction v", "pushforward": "tangent tx", "pullback": "cotangent ty"}


class Preparation:
    """What `prepare_<op>` made; pass it back as `prep=`."""

    __slots__ = ("op", "f", "backend", "inplace", "x_sig", "y_sig", "ctx_sig", "engine", "x_like", "bare")

    def __init__(self, op: str, f: Any, backend: Backend, x: Any, y: Any, contexts: tuple):
        self.op, self.f, self.backend, self.inplace = op, f, backend, y is not None
        self.x_sig, self.ctx_sig = signature(x), context_signature(contexts)
        self.x_like = (x.shape, x.dtype) if type(x) is np.ndarray else None  # for `quick`
        # `f(x)` and an operator of x alone (gradient, jacobian...): `quick` checks two arguments
        self.bare = not self.inplace and not contexts and OPERATORS[op][0] == 0
        self.engine = backend.engine(f, x, contexts, y)
        e = self.engine
        e.check_op(op)
        self.y_sig: tuple = signature(y) if y is not None else (
            ("scalar",) if e.y_scalar else ("array", e.y_shape, e.y_dtype.str))
        _, _, _, y_scalar = OPERATORS[op]
        if y_scalar and not e.y_scalar:
            raise ZymoUsageError(f"{op} needs f to return a scalar; {_name(f)} returns {describe(self.y_sig)} "
                                 "(use jacobian, or pullback with a cotangent)")

    def __repr__(self) -> str:
        return (f"<Preparation of {self.op} for {_name(self.f)} on {self.backend!r}: x {describe(self.x_sig)}, "
                f"y {describe(self.y_sig)}{', in place' if self.inplace else ''}>")

    def check(self, op: str, f: Any, backend: Backend, x: Any, y: Any, contexts: tuple) -> None:
        if op != self.op:
            raise PreparationMismatch(f"this preparation is for {self.op}, not {op}; call prepare_{op}")
        if f is not self.f:
            raise PreparationMismatch(f"this preparation of {op} was made for {_name(self.f)}, not {_name(f)}; "
                                      f"prepare again for the new function")
        if backend != self.backend:
            raise PreparationMismatch(f"this preparation of {op} was made for {self.backend!r}, not {backend!r}")
        if (y is not None) != self.inplace:
            raise PreparationMismatch(f"this preparation of {op} was made for "
                                      f"{'an in-place f(y, x)' if self.inplace else 'an out-of-place f(x)'}")
        sx = signature(x)
        if sx != self.x_sig:
            raise PreparationMismatch(f"this preparation of {op} was made for x {describe(self.x_sig)}; "
                                      f"got {describe(sx)}: call prepare_{op} again for the new input")
        if y is not None and signature(y) != self.y_sig:
            raise PreparationMismatch(f"this preparation of {op} was made for y {describe(self.y_sig)}; "
                                      f"got {describe(signature(y))}")
        if len(contexts) != len(self.ctx_sig) or context_signature(contexts) != self.ctx_sig:
            got = context_signature(contexts)
            for k, (a, b) in enumerate(zip(self.ctx_sig, got)):
                if a != b:
                    raise PreparationMismatch(f"this preparation of {op} was made for context {k} "
                                              f"{a[0]}({describe(a[1])}); got {b[0]}({describe(b[1])})")
            raise PreparationMismatch(f"this preparation of {op} was made for {len(self.ctx_sig)} contexts; "
                                      f"got {len(got)}")

    def quick(self, op: str, f: Any, args: tuple) -> tuple | None:
        """`resolve`'s result for a call that is the prepared one by identity (function, backend)
        and cheap checks (x a plain array of the prepared shape and dtype, y and contexts of
        their signatures), in O(number of arguments); None sends the call through `parse` and
        `check`, which explain any difference."""
        if op != self.op or f is not self.f or self.x_like is None:
            return None
        if self.bare and len(args) == 2:  # (backend, x): the common case, in fewer steps
            x = args[1]
            if (args[0] is not self.backend or type(x) is not np.ndarray or x.shape != self.x_like[0]
                    or x.dtype != self.x_like[1]):
                return None
            return self, None, x, (), ()
        k = 1 if self.inplace else 0
        n_operands = OPERATORS[op][0]
        if len(args) < 2 + k + n_operands or args[k] is not self.backend:
            return None
        x = args[k + 1]
        if type(x) is not np.ndarray or x.shape != self.x_like[0] or x.dtype != self.x_like[1]:
            return None
        y = args[0] if k else None
        if y is not None and (type(y) is not np.ndarray or signature(y) != self.y_sig):
            return None
        contexts = args[k + 2 + n_operands:]
        if len(contexts) != len(self.ctx_sig) or (contexts and not (
                all(isinstance(c, Context) for c in contexts) and context_signature(contexts) == self.ctx_sig)):
            return None
        operands = args[k + 2:k + 2 + n_operands]
        check_operands(self, operands)
        return self, y, x, operands, contexts


def _name(f: Any) -> str:
    return getattr(f, "__qualname__", None) or repr(f)


def parse(op: str, f: Any, args: tuple) -> tuple:
    """(y, backend, x, operands, contexts) from an operator's positional arguments, checked."""
    n_operands, inplace_ok, x_scalar, _ = OPERATORS[op]
    if not callable(f):
        raise ZymoUsageError(f"{op}: the first argument must be the function, not {type(f).__name__}")
    y = None
    if args and not isinstance(args[0], Backend):
        if len(args) > 1 and isinstance(args[1], Backend):
            if not inplace_ok:
                raise ZymoUsageError(f"{op} takes an out-of-place f(x); in-place f(y, x) is for derivative, "
                                     "jacobian, pushforward and pullback")
            y = args[0]
            if not (isinstance(y, np.ndarray) and np.issubdtype(y.dtype, np.floating)):
                raise ZymoUsageError(f"{op}: y of an in-place f(y, x) must be a float array, not "
                                     f"{type(y).__name__}")
            args = args[1:]
        else:
            raise ZymoUsageError(f"{op}(f, backend, x, ...): the backend comes after f (or after y for an "
                                 f"in-place f(y, x)); got {type(args[0]).__name__}")
    if len(args) < 2 + n_operands:
        need = "backend, x" + (f", {_OPERAND[op]}" if n_operands else "")
        raise ZymoUsageError(f"{op} takes f, {'y, ' if y is not None else ''}{need} and contexts")
    backend, x = args[0], args[1]
    operands, contexts = args[2:2 + n_operands], check_contexts(args[2 + n_operands:], op)
    if type(x) is np.ndarray and x.dtype.kind == "f":  # the everyday case, cheaply
        pass
    elif is_scalar(x):
        x = float(x)
    elif not (isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating)):
        raise ZymoUsageError(f"{op}: x must be a float or a float array, not "
                             f"{type(x).__name__}{'' if not isinstance(x, np.ndarray) else ' of ' + str(x.dtype)}")
    if x_scalar and not is_scalar(x):
        raise ZymoUsageError(f"{op} needs a scalar x; for an array x use "
                             f"{'jacobian or pushforward' if op == 'derivative' else 'hessian or hvp'}")
    return y, backend, x, operands, contexts


def prepare(op: str, f: Any, *args: Any) -> Preparation:
    y, backend, x, operands, contexts = parse(op, f, args)
    prep = Preparation(op, f, backend, x, y, contexts)
    check_operands(prep, operands)
    return prep


def resolve(op: str, f: Any, args: tuple, prep: Preparation | None) -> tuple:
    """(preparation, y, x, operands, contexts) for one operator call."""
    if type(prep) is Preparation:
        got = prep.quick(op, f, args)
        if got is not None:
            return got
    y, backend, x, operands, contexts = parse(op, f, args)
    if prep is None:
        prep = Preparation(op, f, backend, x, y, contexts)
    elif not isinstance(prep, Preparation):
        raise ZymoUsageError(f"prep= takes what prepare_{op} returned, not {type(prep).__name__}")
    else:
        prep.check(op, f, backend, x, y, contexts)
    check_operands(prep, operands)
    return prep, y, x, operands, contexts


def check_operands(prep: Preparation, operands: tuple) -> None:
    if not operands:
        return
    (v,) = operands
    target = prep.y_sig if prep.op == "pullback" else prep.x_sig
    space = "y" if prep.op == "pullback" else "x"
    s = signature(v)
    ok = (s == ("scalar",) and target == ("scalar",)) or (
        s[0] == "array" and target[0] == "array" and s[1] == target[1])
    if not ok:
        raise ZymoUsageError(f"{prep.op}: the {_OPERAND[prep.op]} must be like {space}, "
                             f"{describe(target)}; got {describe(s)}")


def _make(op: str):
    def prep_fn(f: Any, *args: Any) -> Preparation:
        return prepare(op, f, *args)

    prep_fn.__name__ = prep_fn.__qualname__ = f"prepare_{op}"
    prep_fn.__doc__ = f"Prepare repeated calls of `{op}`: takes the same positional arguments as `{op}`."
    return prep_fn


prepare_derivative = _make("derivative")
prepare_second_derivative = _make("second_derivative")
prepare_gradient = _make("gradient")
prepare_jacobian = _make("jacobian")
prepare_hessian = _make("hessian")
prepare_hvp = _make("hvp")
prepare_pushforward = _make("pushforward")
prepare_pullback = _make("pullback")
