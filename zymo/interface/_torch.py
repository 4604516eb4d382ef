"""The PyTorch engine (`AutoTorch`): functions written with torch operations.

Contract: everything runs on torch.autograd (reverse mode): pullback by
`torch.autograd.grad`, pushforward by the double-backward trick (the pullback of
the pullback, as `torch.autograd.functional.jvp` does), Hessian-vector products
reverse over reverse, second derivatives by nested `torch.autograd.functional.jacobian`.
x is converted to a float64 (or float32) leaf and `f` gets a clone of it, so `f`
may write into its input; in-place `f(y, x)` writes into a torch tensor that is
copied into the caller's y; `Cache` contexts become fresh torch tensors; Constant
arrays are shared with torch (`torch.as_tensor`). What would cut torch's graph
silently is refused with `BackendLimitation`: `f` returning something other than a
tensor, converting a tracked tensor to a Python number (torch's warning is turned
into an error), or writing one into NumPy memory.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any

import numpy as np

from ._engine import Engine, like
from .backends import require
from .contexts import Cache
from .errors import BackendLimitation

_ADVICE = ("torch differentiates only through torch operations: write f with torch (AutoTorch().numpy is a "
           "NumPy-like namespace over torch), do not call NumPy, float() or .item() on tracked tensors or write "
           "them into NumPy arrays, and do not overwrite values torch saved for the backward pass; use AutoZymo() "
           "for NumPy code and for code that overwrites its data")


class _TorchNumpy:
    """A small NumPy-like namespace over torch (float64 by default) for functions written once."""

    def __init__(self, torch: Any):
        self._torch = torch
        for name in ("sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "abs", "square", "sum", "mean", "dot",
                     "matmul", "zeros_like", "ones_like", "empty_like", "stack", "where", "maximum", "minimum"):
            setattr(self, name, getattr(torch, name))
        self.float64 = torch.float64
        self.pi = float(np.pi)

    def zeros(self, shape: Any, dtype: Any = None) -> Any:
        return self._torch.zeros(shape, dtype=dtype or self._torch.float64)

    def ones(self, shape: Any, dtype: Any = None) -> Any:
        return self._torch.ones(shape, dtype=dtype or self._torch.float64)

    def empty(self, shape: Any, dtype: Any = None) -> Any:
        return self._torch.empty(shape, dtype=dtype or self._torch.float64)

    def asarray(self, v: Any, dtype: Any = None) -> Any:
        return self._torch.as_tensor(v, dtype=dtype or self._torch.float64)

    def __repr__(self) -> str:
        return "<NumPy-like namespace over torch>"


_NS: list = []


def torch_numpy() -> _TorchNumpy:
    if not _NS:
        _NS.append(_TorchNumpy(require("torch", "AutoTorch")))
    return _NS[0]


class TorchEngine(Engine):
    def setup(self, x: Any, contexts: tuple, y: Any) -> None:
        self.torch = require("torch", "AutoTorch")
        self.name = getattr(self.f, "__qualname__", repr(self.f))
        self.cache_idx = [k for k, c in enumerate(contexts) if isinstance(c, Cache)]

    # -- conversions ----------------------------------------------------------------------------
    def _t(self, v: Any, dtype: Any = None) -> Any:
        torch = self.torch
        if isinstance(v, np.ndarray):
            return torch.tensor(np.array(v, copy=True))
        return torch.tensor(float(v), dtype=torch.float64)

    def _ctx(self, contexts: tuple) -> list:
        torch = self.torch
        out = []
        for c in contexts:
            v = c.value
            if isinstance(c, Cache):
                v = ([torch.zeros(o.shape, dtype=self._dtype(o.dtype)) for o in v] if isinstance(v, list)
                     else torch.zeros(v.shape, dtype=self._dtype(v.dtype)))
            elif isinstance(v, np.ndarray):
                v = torch.as_tensor(v)
            elif isinstance(v, list) and all(isinstance(o, np.ndarray) for o in v):
                v = [torch.as_tensor(o) for o in v]
            out.append(v)
        return out

    def _dtype(self, dtype: Any) -> Any:
        return self.torch.from_numpy(np.zeros(0, dtype)).dtype

    @contextmanager
    def _run(self):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*requires_grad=True to a scalar.*")
            warnings.filterwarnings("ignore", message=".*__array_wrap__.*", category=DeprecationWarning)
            try:
                yield
            except (RuntimeError, TypeError, ValueError, UserWarning) as exc:
                msg = str(exc)
                if any(s in msg for s in ("numpy()", "requires_grad=True to a scalar", "must be Tensor",
                                          "setting an array element", "modified by an inplace operation",
                                          "step must be greater than zero")):  # `x[::-1]`: torch has no negative steps
                    raise BackendLimitation(f"AutoTorch cannot differentiate {self.name}: {_ADVICE}. "
                                            f"(torch said: {msg.splitlines()[0]})") from None
                raise

    def _apply(self, xt: Any, contexts: tuple) -> Any:
        """f at the tensor xt (a clone of it, so f may write into its input); the output tensor."""
        ctx = self._ctx(contexts)
        if self.inplace:
            yt = self.torch.zeros(self.y_shape, dtype=self._dtype(self.y_dtype))
            self.f(yt, xt.clone(), *ctx)
            return yt
        out = self.f(xt.clone(), *ctx)
        if not isinstance(out, self.torch.Tensor):
            raise BackendLimitation(f"AutoTorch cannot differentiate {self.name}: it returned a "
                                    f"{type(out).__name__}, not a torch tensor, so its result left torch's graph. "
                                    f"{_ADVICE}")
        return out

    def _np(self, t: Any, scalar: bool, shape: tuple, dtype: Any) -> Any:
        return like(t.detach().numpy() if isinstance(t, self.torch.Tensor) else t, scalar, shape, dtype)

    def _value(self, out: Any, y: Any) -> Any:
        if y is not None:
            np.copyto(y, out.detach().numpy())
            return y
        return self._np(out, self.y_scalar, self.y_shape, self.y_dtype)

    def _leaf(self, x: Any) -> Any:
        return self._t(x).requires_grad_(True)

    def _grad(self, out: Any, wrt: Any, seed: Any, create_graph: bool = False) -> Any:
        if not out.requires_grad:
            return self.torch.zeros_like(wrt)
        (g,) = self.torch.autograd.grad(out, wrt, grad_outputs=seed, allow_unused=True, create_graph=create_graph)
        return self.torch.zeros_like(wrt) if g is None else g

    # -- primitives -----------------------------------------------------------------------------
    def primal(self, x: Any, contexts: tuple, y: Any = None) -> Any:
        with self._run(), self.torch.no_grad():
            out = self._apply(self._t(x), contexts)
        if y is not None:
            np.copyto(y, out.numpy())
            return y
        return float(out) if out.ndim == 0 else out.numpy().copy()

    def value_and_pullback(self, x: Any, ty: Any, contexts: tuple, y: Any = None) -> tuple:
        with self._run():
            leaf = self._leaf(x)
            out = self._apply(leaf, contexts)
            seed = self._t(ty).to(out.dtype).reshape(out.shape)
            g = self._grad(out, leaf, seed)
        return self._value(out, y), self._np(g, self.x_scalar, self.x_shape, self.x_dtype)

    def value_and_pushforward(self, x: Any, tx: Any, contexts: tuple, y: Any = None) -> tuple:
        torch = self.torch
        with self._run():
            leaf = self._leaf(x)
            out = self._apply(leaf, contexts)
            if out.requires_grad:
                u = torch.zeros_like(out, requires_grad=True)
                g = self._grad(out, leaf, u, create_graph=True)
                ty = self._grad(g, u, self._t(tx).to(leaf.dtype).reshape(leaf.shape))
            else:
                ty = torch.zeros_like(out)
        return self._value(out, y), self._np(ty, self.y_scalar, self.y_shape, self.y_dtype)

    def gradient_and_hvp(self, x: Any, v: Any, contexts: tuple) -> tuple:
        with self._run():
            leaf = self._leaf(x)
            out = self._apply(leaf, contexts)
            g = self._grad(out, leaf, None, create_graph=True)
            hv = self._grad(g, leaf, self._t(v).to(leaf.dtype).reshape(leaf.shape))
        xl = (self.x_scalar, self.x_shape, self.x_dtype)
        return self._np(g, *xl), self._np(hv, *xl)

    def value_derivative_and_second_derivative(self, x: Any, contexts: tuple) -> tuple:
        jac = self.torch.autograd.functional.jacobian

        def F(z):
            return self._apply(z, contexts)

        def d1(z):
            return jac(F, z, create_graph=True)

        with self._run():
            leaf = self._leaf(x)
            val = F(leaf)
            d = d1(leaf)
            d2 = jac(d1, leaf)
        yl = (self.y_scalar, self.y_shape, self.y_dtype)
        return self._np(val, *yl), self._np(d, *yl), self._np(d2, *yl)
