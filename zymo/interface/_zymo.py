"""The zymo engine (`AutoZymo`): the operators on `zymo.autodiff`.

Contract: exact derivatives of imperative NumPy code, mutation included. The engine
copies `x` into a buffer it owns before every call (the caller's `x` is never
mutated, even by an `f` that overwrites its input) and keeps its shadows, so a
prepared call passes the very same objects to `zymo.autodiff` every time and hits
zymo's replay path; the engine holds the replay entry of each (mode, return activity)
it uses (`zymo.cache.held_call`), which other calls of `f` cannot evict. Results are
fresh arrays (the shadow's copy), or the caller's `out=`. `Constant(c)` is passed as
`Const(c)`; `Cache(buf)` as `Const(buf)` too: zymo's activity analysis gives it an
internal shadow exactly when active data flows through it. Closures need nothing: zymo
shadows captured memory that active data flows into. Array-valued out-of-place
functions are pulled back through a wrapper `y[...] = f(x, ...)` (reverse mode needs a
float return or an output array). Jacobians, Hessians and Hessian-vector products use `zymo.jacobian`,
`zymo.hessian`, `zymo.hvp` / `zymo.hvp_and_gradient` when zymo has them (contexts
then bound in a closure); without `zymo.hvp`, second-order operators raise
`BackendLimitation`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import zymo
from zymo import Active, Const, Duplicated, Forward, ForwardWithPrimal, Reverse, ReverseWithPrimal
from zymo.cache import held_call
from zymo.shadows import make_zero_

from ._engine import Engine, like
from .errors import BackendLimitation

_NEEDS_HVP = ("{op} with AutoZymo needs zymo.hvp (forward over reverse), which this version of zymo does not "
              "have; use AutoJAX(), AutoTorch(), AutoAutograd() or AutoFiniteDiff() for second order")


class ZymoEngine(Engine):
    def setup(self, x: Any, contexts: tuple, y: Any) -> None:
        b = self.backend
        self.fa: Any = Const(self.f) if b.function_annotation is Const else self.f  # f, or Const(f)
        self.kw = {} if b.numba is None else {"numba": b.numba}
        if not self.x_scalar:
            self.xc = np.array(x, copy=True)
            self.dx = np.zeros_like(self.xc)
            self.xa = Duplicated(self.xc, self.dx)  # the same objects every call: zymo replays
        self.held: dict[tuple, Any] = {}  # (mode, return activity) -> the replay entry this engine holds
        if self.inplace:
            self.dy = np.zeros_like(y)
        self._into: tuple | None = None
        self._bound: tuple | None = None

    def check_op(self, op: str) -> None:
        if op in ("hvp", "hessian", "second_derivative"):
            if op == "second_derivative" and not self.y_scalar:
                raise BackendLimitation("AutoZymo: the second derivative of an array-valued function is not "
                                        "supported yet; differentiate each output, or use another backend")
            if getattr(zymo, "hvp", None) is None and getattr(zymo, "hvp_and_gradient", None) is None:
                what = {"hvp": "a Hessian-vector product", "hessian": "a Hessian"}.get(op, "a second derivative")
                raise BackendLimitation(_NEEDS_HVP.format(op=what))

    def _cs(self, contexts: tuple) -> list:
        return [Const(c.value) for c in contexts]

    def _x(self, x: Any, tx: Any) -> Any:
        """The annotated x: a Duplicated copy (tangent `tx`, or a zero shadow when tx is None)."""
        if self.x_scalar:
            return Active(float(x)) if tx is None else Duplicated(float(x), float(tx))
        self.xc[...] = x  # of the prepared shape and dtype (checked); 1 us faster than np.copyto
        if tx is None:
            if type(self.dx) is np.ndarray:
                self.dx.fill(0)
            else:
                make_zero_(self.dx)
        else:
            np.copyto(self.dx, tx)
        return self.xa

    def _autodiff(self, mode: Any, ret: Any, *args: Any) -> tuple:
        """`zymo.autodiff(mode, f, ret, *args)`, replaying the entry this engine holds for (mode,
        ret) (`zymo.cache.Repeat.replay`: the same checks as autodiff's own replay, without the
        lookup, and no other caller of f can evict it)."""
        rep = self.held.get((mode, ret))
        if rep is not None:
            out = rep.replay(args)
            if out is not None:
                return out
        out, self.held[(mode, ret)] = held_call(mode, self.fa, ret, args, self.backend.numba)
        return out

    def _tx(self, d: Any) -> Any:
        return float(d) if self.x_scalar else self.dx.copy()

    # -- primitives -----------------------------------------------------------------------------
    def primal(self, x: Any, contexts: tuple, y: Any = None) -> Any:
        xv = float(x) if self.x_scalar else np.array(x, copy=True)
        vals = [c.value for c in contexts]
        if y is not None:
            self.f(y, xv, *vals)
            return y
        out = self.f(xv, *vals)
        if isinstance(out, np.ndarray) and (out is xv or np.may_share_memory(out, xv)):
            out = out.copy()
        return out

    def value_and_pushforward(self, x: Any, tx: Any, contexts: tuple, y: Any = None) -> tuple:
        xa = self._x(x, tx)
        if self.inplace:
            make_zero_(self.dy)
            self._autodiff(Forward, Const, Duplicated(y, self.dy), xa, *self._cs(contexts))
            return y, self.dy.copy()
        ty, val = self._autodiff(ForwardWithPrimal, Duplicated, xa, *self._cs(contexts))
        return self._y(val), like(ty, self.y_scalar, self.y_shape, self.y_dtype)

    def value_and_pullback(self, x: Any, ty: Any, contexts: tuple, y: Any = None) -> tuple:
        xa = self._x(x, None)
        cs = self._cs(contexts)
        if self.inplace:
            np.copyto(self.dy, ty)
            (derivs,) = self._autodiff(Reverse, Const, Duplicated(y, self.dy), xa, *cs)
            return y, self._tx(derivs[1])
        if self.y_scalar:
            derivs, val = self._autodiff(ReverseWithPrimal, Active, xa, *cs)
            tx = self._tx(derivs[0])
            return float(val), tx * float(ty) if float(ty) != 1.0 else tx
        into, ybuf = self._into_fn(len(contexts))
        np.copyto(self.dy, ty)
        (derivs,) = zymo.autodiff(Reverse, into, Const, Duplicated(ybuf, self.dy), xa, *cs, **self.kw)
        return ybuf.copy(), self._tx(derivs[1])

    def _y(self, val: Any) -> Any:
        return like(val, self.y_scalar, self.y_shape, self.y_dtype)

    def _into_fn(self, n: int) -> tuple:
        """`y[...] = f(x, *contexts)`: an output array for reverse mode (one wrapper per preparation)."""
        if self._into is None:
            self._into = (_into(self.f, n), np.zeros(self.y_shape, dtype=self.y_dtype))
            self.dy = np.zeros(self.y_shape, dtype=self.y_dtype)
        return self._into

    # -- better than the generic algorithms -------------------------------------------------------
    def value_and_gradient(self, x: Any, contexts: tuple) -> tuple:
        if self.jacobian_by_pushforward():
            return self.value_and_jacobian(x, contexts)
        derivs, val = self._autodiff(ReverseWithPrimal, Active, self._x(x, None), *self._cs(contexts))
        return float(val), self._tx(derivs[0])

    def gradient(self, x: Any, contexts: tuple, fresh: bool = True) -> Any:
        """`Reverse` mode (the value is not computed; what only it needs is left out), the
        gradient in the engine's shadow."""
        if self.jacobian_by_pushforward() or self.x_scalar:
            return super().gradient(x, contexts, fresh)
        if contexts:
            self._autodiff(Reverse, Active, self._x(x, None), *self._cs(contexts))
        else:
            self._autodiff(Reverse, Active, self._x(x, None))
        return self.dx.copy() if fresh else self.dx

    def value_and_jacobian(self, x: Any, contexts: tuple, y: Any = None) -> tuple:
        jac = getattr(zymo, "jacobian", None)
        if jac is None or self.inplace or self.x_scalar or contexts:
            return super().value_and_jacobian(x, contexts, y)
        mode = Forward if self.jacobian_by_pushforward() else Reverse
        kw = {} if self.backend.chunk is None else {"chunk": self.backend.chunk}
        np.copyto(self.xc, x)
        J = jac(mode, self.f, self.xc, **kw)
        return self.primal(x, contexts), like(J, self.y_scalar and not self.x_shape, self.y_shape + self.x_shape,
                                              np.result_type(self.x_dtype, self.y_dtype))

    def _fx(self, contexts: tuple) -> Any:
        """f as a function of an array x alone (contexts bound in a closure, a scalar x as a 1-array)."""
        key = (tuple(id(c.value) for c in contexts), self.x_scalar)
        if self._bound is None or self._bound[0] != key:
            self._bound = (key, _bind(self.f, [c.value for c in contexts], self.x_scalar))
        return self._bound[1]

    def gradient_and_hvp(self, x: Any, v: Any, contexts: tuple) -> tuple:
        hvp_and_grad = getattr(zymo, "hvp_and_gradient", None)
        hvp: Any = getattr(zymo, "hvp", None)
        if hvp is None and hvp_and_grad is None:
            raise BackendLimitation(_NEEDS_HVP.format(op="a Hessian-vector product"))
        g = self._fx(contexts)
        xa = np.array([float(x)]) if self.x_scalar else np.array(x, copy=True)
        va = np.array([float(v)]) if self.x_scalar else np.asarray(v, dtype=xa.dtype)
        if hvp_and_grad is not None:
            hv, grad = hvp_and_grad(g, xa, va)
        else:
            hv = hvp(g, xa, va)
            _, grad = self.value_and_gradient(x, contexts)
        if self.x_scalar:
            return float(np.ravel(grad)[0]), float(np.ravel(hv)[0])
        return np.array(grad, copy=True), np.array(hv, copy=True)

    def value_gradient_and_hessian(self, x: Any, contexts: tuple) -> tuple:
        hess = getattr(zymo, "hessian", None)
        if hess is None or self.x_scalar:
            if getattr(zymo, "hvp", None) is None and getattr(zymo, "hvp_and_gradient", None) is None:
                raise BackendLimitation(_NEEDS_HVP.format(op="a Hessian"))
            return super().value_gradient_and_hessian(x, contexts)
        val, grad = self.value_and_gradient(x, contexts)
        H = hess(self._fx(contexts), np.array(x, copy=True))
        return val, grad, like(H, False, self.x_shape + self.x_shape, self.x_dtype)

    def value_derivative_and_second_derivative(self, x: Any, contexts: tuple) -> tuple:
        if not self.y_scalar:
            raise BackendLimitation("AutoZymo: the second derivative of an array-valued function is not "
                                    "supported yet; differentiate each output, or use another backend")
        if getattr(zymo, "hvp", None) is None and getattr(zymo, "hvp_and_gradient", None) is None:
            raise BackendLimitation(_NEEDS_HVP.format(op="a second derivative"))
        val, d = self.value_and_derivative(x, contexts)
        _, hv = self.gradient_and_hvp(x, 1.0, contexts)
        return val, d, hv


# Wrappers are written out (zymo reads their source): one per number of contexts.
def _into(f: Any, n: int) -> Any:
    into: Callable[..., None]
    if n == 0:
        def into(y, x):
            y[...] = f(x)
    elif n == 1:
        def into(y, x, c0):
            y[...] = f(x, c0)
    elif n == 2:
        def into(y, x, c0, c1):
            y[...] = f(x, c0, c1)
    elif n == 3:
        def into(y, x, c0, c1, c2):
            y[...] = f(x, c0, c1, c2)
    elif n == 4:
        def into(y, x, c0, c1, c2, c3):
            y[...] = f(x, c0, c1, c2, c3)
    else:
        raise BackendLimitation("AutoZymo: the pullback of an array-valued f(x, *contexts) takes at most 4 "
                                "contexts; write an in-place f(y, x, ...) instead")
    return into


def _bind(f: Any, vals: list, scalar: bool) -> Any:
    n = len(vals)
    if n > 3:
        raise BackendLimitation("AutoZymo: second-order operators take at most 3 contexts")
    c0, c1, c2 = list(vals) + [None] * (3 - n)
    if scalar:
        if n == 0:
            def g(x):
                return f(x[0])
        elif n == 1:
            def g(x):
                return f(x[0], c0)
        elif n == 2:
            def g(x):
                return f(x[0], c0, c1)
        else:
            def g(x):
                return f(x[0], c0, c1, c2)
    elif n == 0:
        def g(x):
            return f(x)
    elif n == 1:
        def g(x):
            return f(x, c0)
    elif n == 2:
        def g(x):
            return f(x, c0, c1)
    else:
        def g(x):
            return f(x, c0, c1, c2)
    return g


__all__ = ["ZymoEngine"]
