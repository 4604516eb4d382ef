"""The autograd engine (`AutoAutograd`): HIPS autograd, functions written with autograd.numpy.

Contract: pushforward by `make_jvp`, pullback by `make_vjp`, Hessian-vector products
forward over reverse, second derivatives forward over forward. autograd boxes are
immutable: in-place f(y, x) and Cache contexts are refused up front, and a write of
a boxed value into an array while tracing (`x[i] = ...`, writing into a NumPy buffer)
is turned into `BackendLimitation`.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import numpy as np

from ._engine import Engine, like
from .backends import require
from .contexts import Cache
from .errors import BackendLimitation

_ADVICE = ("autograd traces f with immutable boxes: f must use autograd.numpy and must not write into arrays "
           "(x[i] = ..., out=, NumPy buffers); use AutoZymo() for imperative NumPy code")


@contextmanager
def _translated(name: str):
    try:
        yield
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        if "ArrayBox" in msg or "item assignment" in msg or "setting an array element" in msg or "Box" in msg:
            raise BackendLimitation(f"AutoAutograd cannot differentiate {name}: {_ADVICE}. "
                                    f"(autograd said: {msg.splitlines()[0]})") from exc
        raise


class AutogradEngine(Engine):
    def setup(self, x: Any, contexts: tuple, y: Any) -> None:
        self.ag = require("autograd", "AutoAutograd")
        if y is not None:
            raise BackendLimitation("AutoAutograd cannot differentiate an in-place function f(y, x): autograd "
                                    "arrays are immutable; use AutoZymo() or AutoTorch(), or return y from f(x)")
        if any(isinstance(c, Cache) for c in contexts):
            raise BackendLimitation("AutoAutograd does not support Cache contexts: f cannot write into memory "
                                    "under autograd; use AutoZymo() or AutoTorch()")
        self.name = getattr(self.f, "__qualname__", repr(self.f))

    def _F(self, contexts: tuple) -> Any:
        vals = [c.value for c in contexts]
        return lambda x: self.f(x, *vals)

    def _x(self, x: Any) -> Any:
        return float(x) if self.x_scalar else np.array(x, dtype=np.float64, copy=True)

    def primal(self, x: Any, contexts: tuple, y: Any = None) -> Any:
        with _translated(self.name):
            out = self._F(contexts)(self._x(x))
        return float(out) if np.ndim(out) == 0 else np.array(out, copy=True)

    def value_and_pushforward(self, x: Any, tx: Any, contexts: tuple, y: Any = None) -> tuple:
        t = float(tx) if self.x_scalar else np.asarray(tx, dtype=np.float64)
        with _translated(self.name):
            val, ty = self.ag.make_jvp(self._F(contexts))(self._x(x))(t)
        return self._y(val), self._y(ty)

    def _y(self, v: Any) -> Any:
        return like(v, self.y_scalar, self.y_shape, self.y_dtype)

    def value_and_pullback(self, x: Any, ty: Any, contexts: tuple, y: Any = None) -> tuple:
        with _translated(self.name):
            vjp, val = self.ag.make_vjp(self._F(contexts))(self._x(x))
            tx = vjp(float(ty) if self.y_scalar else np.asarray(ty, dtype=np.float64))
        return self._y(val), like(tx, self.x_scalar, self.x_shape, self.x_dtype)

    def gradient_and_hvp(self, x: Any, v: Any, contexts: tuple) -> tuple:
        vv = float(v) if self.x_scalar else np.asarray(v, dtype=np.float64)
        with _translated(self.name):
            g, hv = self.ag.make_jvp(self.ag.grad(self._F(contexts)))(self._x(x))(vv)
        return (like(g, self.x_scalar, self.x_shape, self.x_dtype), like(hv, self.x_scalar, self.x_shape, self.x_dtype))

    def value_derivative_and_second_derivative(self, x: Any, contexts: tuple) -> tuple:
        F = self._F(contexts)
        jvp = self.ag.make_jvp

        def d1(z):
            return jvp(F)(z)(1.0)[1]

        with _translated(self.name):
            val, d = jvp(F)(float(x))(1.0)
            _, d2 = jvp(d1)(float(x))(1.0)
        return self._y(val), self._y(d), self._y(d2)
