"""The finite-difference engine (`AutoFiniteDiff`): central differences, any f.

Contract: every derivative from function values only, so anything `f` does
(mutation, in-place f(y, x), Cache, NumPy or not) is fine. First derivatives along
a direction t use the fourth-order central stencil
(-f(x+2ht) + 8f(x+ht) - 8f(x-ht) + f(x-2ht)) / 12h with h = rel_step * max(1, |x|∞) / |t|∞,
rel_step = eps**(1/5) by default; Jacobians and gradients take one direction per
input, pullbacks contract the Jacobian. Second derivatives: the fourth-order
five-point stencil (step eps**(1/6)); Hessian-vector products: differences of
finite-difference gradients along v. Every evaluation gets a fresh copy of x (the
caller's x is never mutated). Approximate by nature: use it as a reference, not
for exactness.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ._engine import Engine, basis, like

_EPS = np.finfo(np.float64).eps


class FiniteDiffEngine(Engine):
    def setup(self, x: Any, contexts: tuple, y: Any) -> None:
        self.rel1 = self.backend.rel_step or _EPS ** (1 / 5)
        self.rel2 = self.backend.rel_step or _EPS ** (1 / 6)
        self.y_template = None if y is None else np.zeros_like(y)

    def _eval(self, x: Any, contexts: tuple) -> Any:
        xv = float(x) if self.x_scalar else np.array(x, copy=True)
        vals = [c.value for c in contexts]
        if self.y_template is not None:
            out = np.zeros_like(self.y_template)
            self.f(out, xv, *vals)
            return out
        out = self.f(xv, *vals)
        return float(out) if np.ndim(out) == 0 else np.array(out, dtype=np.float64, copy=True)

    def primal(self, x: Any, contexts: tuple, y: Any = None) -> Any:
        out = self._eval(x, contexts)
        if y is not None:
            np.copyto(y, out)
            return y
        return out

    def _step(self, x: Any, t: Any, rel: float) -> float:
        tn = float(np.max(np.abs(t))) if np.size(t) else 0.0
        return rel * max(1.0, float(np.max(np.abs(x))) if np.size(x) else 1.0) / tn if tn else 0.0

    def _directional(self, F: Any, x: Any, t: Any) -> Any:
        h = self._step(x, t, self.rel1)
        if h == 0.0:
            return None
        t = float(t) if self.x_scalar else np.asarray(t, dtype=np.float64)
        f2, f1, m1, m2 = (F(x + k * h * t) for k in (2, 1, -1, -2))
        return (-np.asarray(f2) + 8 * np.asarray(f1) - 8 * np.asarray(m1) + np.asarray(m2)) / (12 * h)

    def value_and_pushforward(self, x: Any, tx: Any, contexts: tuple, y: Any = None) -> tuple:
        val = self.primal(x, contexts, y)
        d = self._directional(lambda z: self._eval(z, contexts), x, tx)
        ty = np.zeros(self.y_shape) if d is None else d
        return val, like(ty, self.y_scalar, self.y_shape, self.y_dtype)

    def jacobian_by_pushforward(self) -> bool:
        return True

    def value_and_pullback(self, x: Any, ty: Any, contexts: tuple, y: Any = None) -> tuple:
        val, J = self.value_and_jacobian(x, contexts, y)
        nx = len(self.x_shape)
        tx = np.tensordot(np.asarray(ty, dtype=np.float64), np.asarray(J), axes=np.ndim(J) - nx)
        return val, like(tx, self.x_scalar, self.x_shape, self.x_dtype)

    def _grad(self, x: Any, contexts: tuple) -> Any:
        n = self.size(self.x_shape)
        g = np.zeros(self.x_shape)
        F = lambda z: self._eval(z, contexts)  # noqa: E731
        for j in range(n):
            d = self._directional(F, x, basis(self.x_shape, np.float64, j))
            g.flat[j] = 0.0 if d is None else float(d)
        return float(g) if self.x_scalar else g

    def gradient_and_hvp(self, x: Any, v: Any, contexts: tuple) -> tuple:
        g = self._grad(x, contexts)
        h = self._step(x, v, self.rel1)
        if h == 0.0:
            return g, like(0.0, self.x_scalar, self.x_shape, self.x_dtype)
        v = float(v) if self.x_scalar else np.asarray(v, dtype=np.float64)
        g2, g1, m1, m2 = (np.asarray(self._grad(x + k * h * v, contexts)) for k in (2, 1, -1, -2))
        hv = (-g2 + 8 * g1 - 8 * m1 + m2) / (12 * h)
        return g, like(hv, self.x_scalar, self.x_shape, self.x_dtype)

    def value_derivative_and_second_derivative(self, x: Any, contexts: tuple) -> tuple:
        val, d = self.value_and_derivative(x, contexts)
        h = self.rel2 * max(1.0, abs(float(x)))
        F = lambda z: np.asarray(self._eval(z, contexts))  # noqa: E731
        d2 = (-F(x + 2 * h) + 16 * F(x + h) - 30 * F(x) + 16 * F(x - h) - F(x - 2 * h)) / (12 * h * h)
        return val, d, like(d2, self.y_scalar, self.y_shape, self.y_dtype)
