"""Backend types: which AD system computes the derivatives, with its options and limits.

Contract: a backend is a small immutable value (a dataclass: equal options, equal
backends) that names an AD system. It imports its library only when an engine is
made (`BackendUnavailable`, saying what to install, if it is missing) and says what
it can do:
- `supports_mutation`: `f` may write into memory (in-place `f(y, x)`, `Cache`
  contexts, captured buffers, its own input). Backends without it refuse in-place
  functions and `Cache` up front and translate a write detected while tracing into
  `BackendLimitation` — never a silently wrong number.
- `supports_overwrite`: `f` may overwrite values its derivative needs (its own input,
  in place); torch refuses that with its own error, which becomes `BackendLimitation`.
- `numpy`: the NumPy-like namespace functions must be written with for this backend
  (NumPy itself for zymo and finite differences, `jax.numpy`, `autograd.numpy`, and
  a small torch namespace for PyTorch). The scenario suite builds its test functions
  from it.

| backend | mutation | second order | notes |
| --- | --- | --- | --- |
| `AutoZymo(mode, function_annotation, numba)` | yes | with `zymo.hvp` | captured active memory is shadowed |
| `AutoSparse(AutoZymo(), detect)` | yes | with `zymo.hvp` | jacobian/hessian: `scipy.sparse` CSR, plan prepared once |
| `AutoJAX(jit=True, x64=True)` | no | yes | `jit` bakes captured arrays in: pass changing data as `Constant` |
| `AutoTorch()` | torch tensors, not over values torch saved | yes | f must use torch operations (`AutoTorch().numpy`) |
| `AutoAutograd()` | no | yes | f must use `autograd.numpy` |
| `AutoFiniteDiff(rel_step=None)` | yes | yes (nested differences) | approximate: ~1e-9 relative, ~1e-6 second order |
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

from .errors import BackendLimitation, BackendUnavailable

_INSTALL = {
    "jax": 'pip install "jax[cpu]"',
    "torch": "pip install torch==2.13.0",
    "autograd": "pip install autograd",
}


def require(module: str, backend: str) -> Any:
    """Import `module` for `backend`, or raise `BackendUnavailable` saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        how = _INSTALL.get(top, "pip install " + top)
        raise BackendUnavailable(f"{backend} needs {top}, which is not installed: {how}") from exc


class Backend:
    """Base class of the backend types."""

    supports_mutation = False
    supports_overwrite = False  # f may overwrite values its derivative needs (its own input, in place)
    library: str | None = None

    def available(self) -> bool:
        """Whether the backend's library can be imported."""
        return self.library is None or importlib.util.find_spec(self.library) is not None

    @property
    def numpy(self) -> Any:
        """The NumPy-like namespace that functions for this backend are written with."""
        import numpy

        return numpy

    def engine(self, f: Any, x: Any, contexts: tuple, y: Any = None) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class AutoZymo(Backend):
    """zymo: imperative NumPy code (loops, in-place writes, `out=`, views, buffers, closures).

    `mode`: None picks per operator (pushforward forward, pullback and gradient reverse,
    Jacobian by the cheaper side); `zymo.Forward` or `zymo.Reverse` forces gradients and
    Jacobians to that mode. `function_annotation`: None (default) or `zymo.Const`: zymo's
    activity analysis shadows exactly the captured memory that active data flows through, so a
    closure writing into a captured buffer is differentiated correctly and read-only captured data
    costs nothing (DI's `Duplicated(f)` correctness without its cost); `Const` passes `Const(f)`,
    which zymo handles the same way. `numba` is passed to `zymo.autodiff` (True, False, "prefer",
    None). `chunk` is passed to `zymo.jacobian` where it exists."""

    mode: Any = None
    function_annotation: Any = None
    numba: Any = None
    chunk: int | None = None
    supports_mutation = True
    supports_overwrite = True

    def __post_init__(self) -> None:
        import zymo

        if self.mode not in (None, zymo.Forward, zymo.Reverse):
            raise BackendLimitation(f"AutoZymo(mode=...) takes None, zymo.Forward or zymo.Reverse, not {self.mode!r}")
        if self.function_annotation not in (None, zymo.Const):
            raise BackendLimitation(
                f"AutoZymo(function_annotation={self.function_annotation!r}) is not supported: zymo does not take "
                "Duplicated(f) yet; the default (None) already differentiates through captured buffers "
                "that active data flows into, and treats read-only captured data as constant")

    def engine(self, f: Any, x: Any, contexts: tuple, y: Any = None) -> Any:
        from ._zymo import ZymoEngine

        return ZymoEngine(self, f, x, contexts, y)

    def __repr__(self) -> str:
        opts = [f"{k}={v!r}" for k, v in (("mode", self.mode), ("function_annotation", self.function_annotation),
                                          ("numba", self.numba), ("chunk", self.chunk)) if v is not None]
        return f"AutoZymo({', '.join(opts)})"


@dataclass(frozen=True)
class AutoSparse(Backend):
    """Sparse Jacobians and Hessians over a dense backend, as DifferentiationInterface.jl's
    `AutoSparse`: `jacobian` and `hessian` return `scipy.sparse.csr_matrix` (shapes `(y.size,
    x.size)` and `(x.size, x.size)`) from detected sparsity, coloring and compressed passes
    (`zymo.sparse`); the other operators are the dense backend's. Only `AutoZymo` can be
    wrapped (detection reads zymo's IR). `detect`: "auto" (global, else local with a warning),
    "global" (valid at every x) or "local" (valid for inputs taking the branches x took);
    `direction`: None (fewer colors), "forward" or "reverse" for Jacobians. The pattern and
    colors are computed once per preparation (`prepare_jacobian`, `prepare_hessian`)."""

    dense: Any = None
    detect: str = "auto"
    direction: str | None = None
    supports_mutation = True
    supports_overwrite = True

    def __post_init__(self) -> None:
        if not isinstance(self.dense, AutoZymo):
            raise BackendLimitation(f"AutoSparse wraps AutoZymo() (sparsity is detected from zymo's IR), not "
                                    f"{self.dense!r}")
        if self.detect not in ("auto", "global", "local"):
            raise BackendLimitation(f"AutoSparse(detect=...) takes 'auto', 'global' or 'local', not {self.detect!r}")
        if self.direction not in (None, "forward", "reverse"):
            raise BackendLimitation(f"AutoSparse(direction=...) takes None, 'forward' or 'reverse', not "
                                    f"{self.direction!r}")

    @property
    def mode(self) -> Any:
        return self.dense.mode

    @property
    def function_annotation(self) -> Any:
        return self.dense.function_annotation

    @property
    def numba(self) -> Any:
        return self.dense.numba

    @property
    def chunk(self) -> Any:
        return self.dense.chunk

    def engine(self, f: Any, x: Any, contexts: tuple, y: Any = None) -> Any:
        from ._sparse import SparseEngine

        return SparseEngine(self, f, x, contexts, y)


@dataclass(frozen=True)
class AutoJAX(Backend):
    """JAX: f written with `jax.numpy`, no mutation. `x64=True` computes in double precision
    (inside `jax.enable_x64`, without changing the global setting); `jit=True` compiles each
    derivative once per preparation (captured arrays are baked in: pass data that changes as
    `Constant`)."""

    jit: bool = True
    x64: bool = True
    library = "jax"

    @property
    def numpy(self) -> Any:
        """jax.numpy, each function run inside `jax.enable_x64(x64)` (arrays made with it outside a
        derivative are double precision, as the derivatives are)."""
        from ._jax import jax_numpy

        return jax_numpy(self.x64)

    def engine(self, f: Any, x: Any, contexts: tuple, y: Any = None) -> Any:
        from ._jax import JaxEngine

        return JaxEngine(self, f, x, contexts, y)


@dataclass(frozen=True)
class AutoTorch(Backend):
    """PyTorch (torch.autograd): f written with torch operations (`AutoTorch().numpy` is a small
    NumPy-like namespace over torch); writes into torch tensors (in-place `f(y, x)`, `Cache`) are
    supported; writes of tracked values into NumPy memory are refused."""

    library = "torch"
    supports_mutation = True

    @property
    def numpy(self) -> Any:
        from ._torch import torch_numpy

        return torch_numpy()

    def engine(self, f: Any, x: Any, contexts: tuple, y: Any = None) -> Any:
        from ._torch import TorchEngine

        return TorchEngine(self, f, x, contexts, y)


@dataclass(frozen=True)
class AutoAutograd(Backend):
    """HIPS autograd: f written with `autograd.numpy`, no mutation."""

    library = "autograd"

    @property
    def numpy(self) -> Any:
        return require("autograd.numpy", "AutoAutograd")

    def engine(self, f: Any, x: Any, contexts: tuple, y: Any = None) -> Any:
        from ._autograd import AutogradEngine

        return AutogradEngine(self, f, x, contexts, y)


@dataclass(frozen=True)
class AutoFiniteDiff(Backend):
    """Central finite differences (fourth order), for any f, mutation included. Approximate:
    `rel_step` (default: eps**(1/5) first order, eps**(1/6) for second differences) is scaled by
    max(1, |x|). Expect about 1e-9 relative error first order and 1e-6 second order on smooth,
    well-scaled functions."""

    rel_step: float | None = None
    supports_mutation = True
    supports_overwrite = True

    def engine(self, f: Any, x: Any, contexts: tuple, y: Any = None) -> Any:
        from ._finitediff import FiniteDiffEngine

        return FiniteDiffEngine(self, f, x, contexts, y)


def all_backends() -> list:
    """One backend of each kind, default options (installed or not)."""
    return [AutoZymo(), AutoJAX(), AutoTorch(), AutoAutograd(), AutoFiniteDiff()]
