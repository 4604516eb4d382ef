"""Errors of the uniform front end (`zymo.interface`).

Contract: every refusal of the front end is a `ZymoError`, raised before any
wrong number can come back:
- `BackendLimitation` (also a `NotImplementedError`): the backend cannot do what
  was asked — mutation of NumPy memory under JAX, an in-place `f(y, x)` under a
  functional backend, a second-order operator that needs a zymo feature that is
  missing. The message names the backend, the limit and what to use instead.
- `PreparationMismatch` (also a `ZymoUsageError`): a preparation object reused for
  another function, backend, operator, or inputs of other types or shapes.
- Other misuse (bad arguments, `out=` of the wrong shape) is `ZymoUsageError`.
"""
from __future__ import annotations

from ..errors import ZymoError, ZymoUsageError


class BackendLimitation(ZymoError, NotImplementedError):
    """The chosen backend cannot compute this derivative correctly."""


class PreparationMismatch(ZymoUsageError):
    """A preparation was reused with a function or inputs it was not made for."""


__all__ = ["BackendLimitation", "PreparationMismatch", "ZymoUsageError"]


class BackendUnavailable(ZymoError, ImportError):
    """The backend's library is not installed; the message says how to install it."""


__all__.append("BackendUnavailable")
