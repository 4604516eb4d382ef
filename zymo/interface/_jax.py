"""The JAX engine (`AutoJAX`): functions written with jax.numpy.

Contract: pushforward by `jax.jvp`, pullback by `jax.vjp`, gradient by
`jax.value_and_grad`, Jacobian by `jax.jacfwd`/`jax.jacrev` (the cheaper side, or
the backend's choice), Hessian-vector products forward over reverse, Hessian by
`jax.hessian`, second derivatives by nested `jvp`. Each derivative is built (and
jitted when `jit=True`) once per engine, and runs inside `jax.enable_x64(x64)`.
Contexts are passed as traced arguments when they are arrays or numbers (so a
changed Constant is seen); other Constant values are closed over. JAX arrays are
immutable: in-place f(y, x) and Cache contexts are refused up front, and whatever
JAX raises when f converts a tracer to NumPy (a NumPy call on x, a write into a
NumPy buffer, `float(x)`) or writes into a JAX array becomes `BackendLimitation`.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import numpy as np

from ._engine import Engine, like
from .backends import require
from .contexts import Cache, is_scalar
from .errors import BackendLimitation

_ADVICE = ("JAX traces f with immutable arrays: f must use jax.numpy (not NumPy) and must not write into arrays "
           "(x[i] = ..., out=, NumPy buffers) or convert x to Python numbers; use AutoZymo() for imperative "
           "NumPy code")


class _JaxNumpy:
    """jax.numpy with every callable run inside `jax.enable_x64(x64)`."""

    def __init__(self, x64: bool):
        self._jax, self._jnp, self._x64 = require("jax", "AutoJAX"), require("jax.numpy", "AutoJAX"), x64

    def __getattr__(self, name: str) -> Any:
        v = getattr(self._jnp, name)
        if not callable(v) or isinstance(v, type):
            return v
        jax, x64 = self._jax, self._x64

        def run(*args: Any, **kwargs: Any) -> Any:
            with jax.enable_x64(x64):
                return v(*args, **kwargs)

        run.__name__ = name
        self.__dict__[name] = run
        return run

    def __repr__(self) -> str:
        return f"<jax.numpy in enable_x64({self._x64})>"


_NS: dict = {}


def jax_numpy(x64: bool) -> _JaxNumpy:
    if x64 not in _NS:
        _NS[x64] = _JaxNumpy(x64)
    return _NS[x64]


class JaxEngine(Engine):
    def setup(self, x: Any, contexts: tuple, y: Any) -> None:
        if y is not None:
            raise BackendLimitation("AutoJAX cannot differentiate an in-place function f(y, x): JAX arrays are "
                                    "immutable; use AutoZymo() or AutoTorch(), or return y from f(x)")
        if any(isinstance(c, Cache) for c in contexts):
            raise BackendLimitation("AutoJAX does not support Cache contexts: JAX arrays cannot be written in "
                                    "place; use AutoZymo() or AutoTorch()")
        self.jax = require("jax", "AutoJAX")
        self.jnp = require("jax.numpy", "AutoJAX")
        errs = self.jax.errors
        self.errors = tuple(getattr(errs, n) for n in (
            "TracerArrayConversionError", "ConcretizationTypeError", "TracerIntegerConversionError",
            "TracerBoolConversionError", "UnexpectedTracerError", "NonConcreteBooleanIndexError")
            if hasattr(errs, n))
        self.traced = [isinstance(c.value, np.ndarray) or is_scalar(c.value) for c in contexts]
        self.fns: dict[str, Any] = {}
        self.name = getattr(self.f, "__qualname__", repr(self.f))

    @contextmanager
    def _run(self):
        with self.jax.enable_x64(self.backend.x64):
            try:
                yield
            except self.errors as exc:
                raise BackendLimitation(f"AutoJAX cannot differentiate {self.name}: {_ADVICE}. "
                                        f"(JAX said: {type(exc).__name__}: {str(exc).splitlines()[0]})") from None
            except (TypeError, ValueError) as exc:
                msg = str(exc)
                if "immutable" in msg or "setting an array element" in msg or "Tracer" in msg:
                    raise BackendLimitation(f"AutoJAX cannot differentiate {self.name}: {_ADVICE}. "
                                            f"(JAX said: {msg.splitlines()[0]})") from None
                raise

    def _fn(self, key: str, contexts: tuple, build: Any) -> tuple:
        """The derivative `key` as a function of (x, *operands, *traced contexts), built once."""
        fixed = [c.value for c, t in zip(contexts, self.traced) if not t]
        args = [c.value for c, t in zip(contexts, self.traced) if t]
        fn = self.fns.get(key)
        if fn is None:
            f, traced = self.f, self.traced

            def F(x, cs):
                it, ft = iter(cs), iter(fixed)
                return f(x, *[next(it) if t else next(ft) for t in traced])

            fn = build(F)
            if self.backend.jit:
                fn = self.jax.jit(fn)
            self.fns[key] = fn
        return fn, tuple(args)

    def _x(self, x: Any) -> Any:
        return float(x) if self.x_scalar else np.asarray(x)

    @staticmethod
    def _op(t: Any, scalar: bool) -> Any:
        return float(t) if scalar else np.asarray(t)

    def _call(self, key: str, contexts: tuple, build: Any, *operands: Any) -> Any:
        with self._run():
            fn, cs = self._fn(key, contexts, build)
            return self.jax.device_get(fn(*[self.jnp.asarray(o) for o in operands], cs))

    def primal(self, x: Any, contexts: tuple, y: Any = None) -> Any:
        out = self._call("primal", contexts, lambda F: F, self._x(x))
        return float(out) if np.ndim(out) == 0 else np.array(out, copy=True)

    def _y(self, v: Any) -> Any:
        return like(v, self.y_scalar, self.y_shape, self.y_dtype)

    def _xl(self, v: Any) -> Any:
        return like(v, self.x_scalar, self.x_shape, self.x_dtype)

    def value_and_pushforward(self, x: Any, tx: Any, contexts: tuple, y: Any = None) -> tuple:
        jax = self.jax

        def build(F):
            return lambda x, t, cs: jax.jvp(lambda z: F(z, cs), (x,), (t.astype(x.dtype),))

        val, ty = self._call("pushforward", contexts, build, self._x(x), self._op(tx, self.x_scalar))
        return self._y(val), self._y(ty)

    def value_and_pullback(self, x: Any, ty: Any, contexts: tuple, y: Any = None) -> tuple:
        jax = self.jax

        def build(F):
            def pb(x, t, cs):
                val, vjp = jax.vjp(lambda z: F(z, cs), x)
                return val, vjp(t.astype(val.dtype))[0]
            return pb

        val, tx = self._call("pullback", contexts, build, self._x(x), self._op(ty, self.y_scalar))
        return self._y(val), self._xl(tx)

    def value_and_gradient(self, x: Any, contexts: tuple) -> tuple:
        jax = self.jax
        val, g = self._call("gradient", contexts, lambda F: jax.value_and_grad(F), self._x(x))
        return float(val), self._xl(g)

    def value_and_jacobian(self, x: Any, contexts: tuple, y: Any = None) -> tuple:
        jax = self.jax
        fwd = self.jacobian_by_pushforward()

        def build(F):
            jac = (jax.jacfwd if fwd else jax.jacrev)(F)
            return lambda x, cs: (F(x, cs), jac(x, cs))

        val, J = self._call("jacobian-" + ("fwd" if fwd else "rev"), contexts, build, self._x(x))
        return self._y(val), like(J, self.x_scalar and self.y_scalar, self.y_shape + self.x_shape,
                                  np.result_type(self.x_dtype, self.y_dtype))

    def gradient_and_hvp(self, x: Any, v: Any, contexts: tuple) -> tuple:
        jax = self.jax

        def build(F):
            return lambda x, v, cs: jax.jvp(lambda z: jax.grad(F)(z, cs), (x,), (v.astype(x.dtype),))

        g, hv = self._call("hvp", contexts, build, self._x(x), self._op(v, self.x_scalar))
        return self._xl(g), self._xl(hv)

    def value_gradient_and_hessian(self, x: Any, contexts: tuple) -> tuple:
        jax = self.jax

        def build(F):
            vg, h = jax.value_and_grad(F), jax.hessian(F)
            return lambda x, cs: (*vg(x, cs), h(x, cs))

        val, g, H = self._call("hessian", contexts, build, self._x(x))
        return float(val), self._xl(g), like(H, self.x_scalar, self.x_shape + self.x_shape, self.x_dtype)

    def value_derivative_and_second_derivative(self, x: Any, contexts: tuple) -> tuple:
        jax = self.jax

        def build(F):
            def d1(z, cs):
                return jax.jvp(lambda w: F(w, cs), (z,), (jax.numpy.ones_like(z),))[1]

            def both(x, cs):
                val, d = jax.jvp(lambda w: F(w, cs), (x,), (jax.numpy.ones_like(x),))
                return val, d, jax.jvp(lambda w: d1(w, cs), (x,), (jax.numpy.ones_like(x),))[1]
            return both

        val, d, d2 = self._call("second_derivative", contexts, build, self._x(x))
        return self._y(val), self._y(d), self._y(d2)
