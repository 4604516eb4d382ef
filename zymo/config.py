"""Settings, read from environment variables at call time.

- `ZYMO_CHECK_IR=1`: run the IR verifier after lowering (on in the test suite).
- `ZYMO_SHOW_CODE=1`: print every generated derivative program when it is compiled.
- `ZYMO_NUMBA=auto|always|prefer|never`: when derivatives are compiled with Numba
  (`set_numba` overrides it in-process; see there).
- `ZYMO_CACHE_DIR`: where compiled derivatives are cached on disk (default ~/.cache/zymo).
"""
from __future__ import annotations

import os


def check_ir() -> bool:
    return os.environ.get("ZYMO_CHECK_IR", "0") not in ("", "0")


def show_code() -> bool:
    return os.environ.get("ZYMO_SHOW_CODE", "0") not in ("", "0")


_NUMBA_CHOICES = ("auto", "always", "prefer", "never")
_numba_override: list[str] = []


def set_numba(choice: str | None) -> None:
    """Set the Numba policy for this process (None: back to `ZYMO_NUMBA`, default "auto").

    - "auto": compile derivatives of Numba dispatchers (`@njit` functions) with Numba;
      if that fails, warn and run the derivative as Python. Plain functions run as Python.
    - "always": compile every derivative with Numba; raise if Numba cannot.
    - "prefer": compile every derivative with Numba; warn and fall back to Python if it cannot.
    - "never": always Python.
    The per-call option `numba=` (True = "always", False = "never", "prefer") overrides this.
    """
    if choice is not None and choice not in _NUMBA_CHOICES:
        raise ValueError(f"the Numba policy is one of {_NUMBA_CHOICES}, not {choice!r}")
    _numba_override.clear()
    if choice is not None:
        _numba_override.append(choice)
    from . import api

    api.forget_replays()  # a replayed call must not keep the old backend


def numba_policy() -> str:
    if _numba_override:
        return _numba_override[0]
    choice = os.environ.get("ZYMO_NUMBA", "auto") or "auto"
    if choice not in _NUMBA_CHOICES:
        raise ValueError(f"ZYMO_NUMBA is one of {_NUMBA_CHOICES}, not {choice!r}")
    return choice
