"""The operators: one vocabulary over every backend.

Contract (x a float or a float array; y = f(x, *contexts), a float or an array):

| operator | returns | `value_and_*` form |
| --- | --- | --- |
| `derivative(f, b, x)` (x scalar) | dy/dx, like y | `value_and_derivative` → (y, dy/dx) |
| `second_derivative(f, b, x)` (x scalar) | d²y/dx², like y | `value_derivative_and_second_derivative` → (y, d, d²) |
| `gradient(f, b, x)` (y scalar) | like x | `value_and_gradient` → (y, g) |
| `jacobian(f, b, x)` | shape y.shape + x.shape | `value_and_jacobian` → (y, J) |
| `hessian(f, b, x)` (y scalar) | shape x.shape + x.shape | `value_gradient_and_hessian` → (y, g, H) |
| `hvp(f, b, x, v)` (y scalar) | H @ v, like x | `gradient_and_hvp` → (g, Hv) |
| `pushforward(f, b, x, tx)` | J @ tx, like y | `value_and_pushforward` → (y, ty) |
| `pullback(f, b, x, ty)` | ty @ J, like x | `value_and_pullback` → (y, tx) |

- Extra positional arguments after x (and after the operand) are contexts, each
  `Constant(c)` or `Cache(buf)`; `f` is called `f(x, *values)`.
- In-place functions `f(y, x, *contexts)` (derivative, jacobian, pushforward,
  pullback): pass `y` before the backend, `pushforward(f, y, backend, x, tx)`; `y`
  is overwritten with the value, and is the value returned by `value_and_*`.
- `out=`: an array the derivative is written into (and returned); for the forms
  returning two derivatives, a pair (either may be None). A float result cannot go
  into `out=` (ZymoUsageError).
- `prep=`: what `prepare_<op>` returned (see `prepare.py`); without it each call
  prepares anew (correct, slower).
- Inputs (x, the operand, Constant contexts, y of an out-of-place f) are never
  mutated; results are fresh arrays (or `out`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ZymoUsageError
from .prepare import Preparation, resolve


def _store(result: Any, out: Any, what: str) -> Any:
    if out is None:
        return result
    if hasattr(result, "tocsr"):  # scipy.sparse (AutoSparse)
        raise ZymoUsageError(f"the {what} is a scipy.sparse matrix; out= takes dense results only (leave out= off)")
    if not isinstance(out, np.ndarray):
        raise ZymoUsageError(f"out= takes an array for the {what}, not {type(out).__name__}")
    if not isinstance(result, np.ndarray):
        raise ZymoUsageError(f"the {what} is a float; out= needs an array result (leave out= off)")
    if out.shape != result.shape:
        raise ZymoUsageError(f"out= has shape {out.shape}; the {what} has shape {result.shape}")
    if not out.flags.writeable:
        raise ZymoUsageError("out= is read-only")
    np.copyto(out, result, casting="same_kind")
    return out


def _pair(out: Any) -> tuple:
    if out is None:
        return None, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise ZymoUsageError("out= of an operator returning two derivatives takes a pair (a, b); either may be None")
    return out


def value_and_derivative(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> tuple:
    p, y, x, _, ctx = resolve("derivative", f, args, prep)
    val, d = p.engine.value_and_derivative(x, ctx, y)
    return val, _store(d, out, "derivative")


def derivative(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> Any:
    return value_and_derivative(f, *args, prep=prep, out=out)[1]


def value_derivative_and_second_derivative(f: Any, *args: Any, prep: Preparation | None = None,
                                           out: Any = None) -> tuple:
    o1, o2 = _pair(out)
    p, y, x, _, ctx = resolve("second_derivative", f, args, prep)
    val, d, d2 = p.engine.value_derivative_and_second_derivative(x, ctx)
    return val, _store(d, o1, "derivative"), _store(d2, o2, "second derivative")


def second_derivative(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> Any:
    return value_derivative_and_second_derivative(f, *args, prep=prep, out=(None, out))[2]


def value_and_gradient(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> tuple:
    p, _, x, _, ctx = resolve("gradient", f, args, prep)
    val, g = p.engine.value_and_gradient(x, ctx)
    return val, _store(g, out, "gradient")


def gradient(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> Any:
    p, _, x, _, ctx = resolve("gradient", f, args, prep)
    return _store(p.engine.gradient(x, ctx, fresh=out is None), out, "gradient")


def value_and_jacobian(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> tuple:
    p, y, x, _, ctx = resolve("jacobian", f, args, prep)
    val, J = p.engine.value_and_jacobian(x, ctx, y)
    return val, _store(J, out, "Jacobian")


def jacobian(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> Any:
    return value_and_jacobian(f, *args, prep=prep, out=out)[1]


def value_gradient_and_hessian(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> tuple:
    o1, o2 = _pair(out)
    p, _, x, _, ctx = resolve("hessian", f, args, prep)
    val, g, H = p.engine.value_gradient_and_hessian(x, ctx)
    return val, _store(g, o1, "gradient"), _store(H, o2, "Hessian")


def hessian(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> Any:
    return value_gradient_and_hessian(f, *args, prep=prep, out=(None, out))[2]


def gradient_and_hvp(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> tuple:
    o1, o2 = _pair(out)
    p, _, x, (v,), ctx = resolve("hvp", f, args, prep)
    g, hv = p.engine.gradient_and_hvp(x, v, ctx)
    return _store(g, o1, "gradient"), _store(hv, o2, "Hessian-vector product")


def hvp(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> Any:
    return gradient_and_hvp(f, *args, prep=prep, out=(None, out))[1]


def value_and_pushforward(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> tuple:
    p, y, x, (tx,), ctx = resolve("pushforward", f, args, prep)
    val, ty = p.engine.value_and_pushforward(x, tx, ctx, y)
    return val, _store(ty, out, "pushforward")


def pushforward(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> Any:
    return value_and_pushforward(f, *args, prep=prep, out=out)[1]


def value_and_pullback(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> tuple:
    p, y, x, (ty,), ctx = resolve("pullback", f, args, prep)
    val, tx = p.engine.value_and_pullback(x, ty, ctx, y)
    return val, _store(tx, out, "pullback")


def pullback(f: Any, *args: Any, prep: Preparation | None = None, out: Any = None) -> Any:
    return value_and_pullback(f, *args, prep=prep, out=out)[1]
