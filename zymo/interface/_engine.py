"""The engine contract: what every backend implements, and the generic algorithms over it.

Contract: an `Engine` is made by a backend for one function and one signature of
(x, contexts[, y]) — by a preparation, once. It works on NumPy values only
(floats and float arrays; backends convert to and from their own types) and
returns fresh objects the caller may keep (never a buffer of the engine, except
an in-place function's `y`, which is the caller's own array, written in place).
A backend must implement `primal`, `value_and_pushforward` and
`value_and_pullback`; everything else has a generic implementation here
(Jacobian by pushforwards over the basis of x or pullbacks over the basis of y,
Hessian by Hessian-vector products over the basis of x) that a backend overrides
with something better when it has it. Second-order operators raise
`BackendLimitation` unless the backend provides `gradient_and_hvp` /
`value_derivative_and_second_derivative`.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .contexts import is_scalar
from .errors import BackendLimitation, ZymoUsageError


class Engine:
    _by_push: bool | None = None  # `jacobian_by_pushforward`, once known

    def __init__(self, backend: Any, f: Any, x: Any, contexts: tuple, y: Any = None):
        self.backend, self.f = backend, f
        self.inplace = y is not None
        self.x_scalar = is_scalar(x)
        self.x_shape = () if self.x_scalar else x.shape
        self.x_dtype = np.dtype(np.float64) if self.x_scalar else x.dtype
        self.setup(x, contexts, y)
        if self.inplace:
            y0 = y
        else:
            y0 = self.primal(x, contexts)
            if not (is_scalar(y0) or (isinstance(y0, np.ndarray) and y0.ndim > 0)):
                raise ZymoUsageError(f"{_name(f)} returned {type(y0).__name__}; the operators differentiate "
                                     "functions that return a float or a float array (for an array, write an "
                                     "in-place f(y, x) or return the array)")
        self.y_scalar = is_scalar(y0)
        self.y_shape = () if self.y_scalar else y0.shape
        self.y_dtype = np.dtype(np.float64) if self.y_scalar else y0.dtype

    # -- what a backend implements -----------------------------------------------------------
    def check_op(self, op: str) -> None:
        """Raise BackendLimitation at preparation if operator family `op` cannot run here."""

    def setup(self, x: Any, contexts: tuple, y: Any) -> None:
        """Allocate what repeated calls reuse; refuse (BackendLimitation) what the backend cannot do."""

    def primal(self, x: Any, contexts: tuple, y: Any = None) -> Any:
        raise NotImplementedError

    def value_and_pushforward(self, x: Any, tx: Any, contexts: tuple, y: Any = None) -> tuple:
        raise NotImplementedError

    def value_and_pullback(self, x: Any, ty: Any, contexts: tuple, y: Any = None) -> tuple:
        raise NotImplementedError

    # -- generic algorithms ----------------------------------------------------------------------
    def value_and_derivative(self, x: Any, contexts: tuple, y: Any = None) -> tuple:
        return self.value_and_pushforward(x, 1.0, contexts, y)

    def value_and_gradient(self, x: Any, contexts: tuple) -> tuple:
        if self.jacobian_by_pushforward():
            return self.value_and_jacobian(x, contexts)
        return self.value_and_pullback(x, 1.0, contexts)

    def gradient(self, x: Any, contexts: tuple, fresh: bool = True) -> Any:
        """The gradient alone (no value). `fresh=False`: the result may be the engine's own
        buffer, which the caller copies before the next call."""
        return self.value_and_gradient(x, contexts)[1]

    def jacobian_by_pushforward(self) -> bool:
        """Whether Jacobians (and gradients, where a backend's mode asks for it) are built from
        pushforwards; fixed for an engine, decided at its first use."""
        if self._by_push is None:
            mode = getattr(self.backend, "mode", None)
            by_size = self.size(self.x_shape) <= self.size(self.y_shape)
            self._by_push = bool(mode.forward) if mode is not None else by_size
        return self._by_push

    @staticmethod
    def size(shape: tuple) -> int:
        return math.prod(int(n) for n in shape)  # Python ints: np.prod costs microseconds per call

    def value_and_jacobian(self, x: Any, contexts: tuple, y: Any = None) -> tuple:
        n, m = self.size(self.x_shape), self.size(self.y_shape)
        jac = np.zeros(self.y_shape + self.x_shape, dtype=np.result_type(self.x_dtype, self.y_dtype))
        flat = jac.reshape(m, n)
        value = None
        if self.jacobian_by_pushforward():
            for j in range(n):
                value, ty = self.value_and_pushforward(x, basis(self.x_shape, self.x_dtype, j), contexts, y)
                flat[:, j] = np.ravel(ty)
        else:
            for i in range(m):
                value, tx = self.value_and_pullback(x, basis(self.y_shape, self.y_dtype, i), contexts, y)
                flat[i, :] = np.ravel(tx)
        if value is None:  # an empty x or y: no sweep ran
            value = self.primal(x, contexts, y)
        return value, (float(jac) if jac.ndim == 0 else jac)

    def gradient_and_hvp(self, x: Any, v: Any, contexts: tuple) -> tuple:
        raise BackendLimitation(f"{self.backend!r} has no Hessian-vector product")

    def value_gradient_and_hessian(self, x: Any, contexts: tuple) -> tuple:
        value, grad = self.value_and_gradient(x, contexts)
        n = self.size(self.x_shape)
        hess = np.zeros(self.x_shape + self.x_shape, dtype=self.x_dtype)
        flat = hess.reshape(n, n)
        for j in range(n):
            _, hv = self.gradient_and_hvp(x, basis(self.x_shape, self.x_dtype, j), contexts)
            flat[:, j] = np.ravel(hv)
        return value, grad, (float(hess) if hess.ndim == 0 else hess)

    def value_derivative_and_second_derivative(self, x: Any, contexts: tuple) -> tuple:
        raise BackendLimitation(f"{self.backend!r} has no second derivative")


def basis(shape: tuple, dtype: Any, k: int) -> Any:
    """The k-th unit vector of a space of arrays of `shape` (a float for shape ())."""
    if shape == ():
        return 1.0
    e = np.zeros(shape, dtype=dtype)
    e.flat[k] = 1.0
    return e


def like(v: Any, scalar: bool, shape: tuple, dtype: Any) -> Any:
    """`v` (a backend's result) as a fresh float or array of the expected shape."""
    if scalar:
        return float(np.asarray(v).reshape(()))
    a = np.array(v, dtype=dtype, copy=True)
    if a.shape != shape:
        if a.ndim == 0:  # a constant result: zymo and JAX give a scalar zero
            return np.full(shape, a, dtype=dtype)
        raise ZymoUsageError(f"a derivative of shape {a.shape} where {shape} was expected")
    return a


def _name(f: Any) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)
