"""Settings, from environment variables and the `set_*` functions.

- `ZYMO_CHECK_IR=1`: run the IR verifier after lowering (on in the test suite).
- `ZYMO_SHOW_CODE=1`: print every generated derivative program when it is compiled.
- `ZYMO_NUMBA=auto|always|prefer|kernels|never`: when derivatives are compiled with Numba
  (`set_numba` overrides it in-process; see there).
- `ZYMO_CACHE_DIR`: where compiled derivatives are cached on disk (default ~/.cache/zymo).
- `ZYMO_STRONG_ZERO=1`: strong zeros (`set_strong_zero` overrides it in-process; see there).
- `ZYMO_REASSOCIATE=1`: compiled derivatives may reorder sums (`set_reassociate` overrides it
  in-process; see there).
- `ZYMO_KEEP_TAPES=<bytes>`: how much tape a reverse program keeps between calls (default
  64 MiB; `set_keep_tapes` overrides it in-process; see there).
- `ZYMO_THREADS=<n>`: threads for compiled derivative loops (`set_threads`; see there).

The settings that choose which program a call runs (`ZYMO_NUMBA`, `ZYMO_STRONG_ZERO`,
`ZYMO_REASSOCIATE`), and `ZYMO_KEEP_TAPES`, are read from the environment once, when zymo
first needs each (the first differentiation, the first reverse call that keeps a tape), and
kept: a call replayed from a recorded one (`cache.py`'s fast paths, which check no setting)
and a call that makes a new program then always agree, and no call pays for reading the
environment (1-2 us a variable, measured). Changing one of them in `os.environ` later changes
nothing until its `set_*` function is called: `set_x(value)` sets it for this process,
`set_x(None)` reads the environment again. A `set_*` call that changes which program a call
runs (`set_numba`, `set_strong_zero`, `set_reassociate`) calls the functions registered with
`on_change` (the caches register `forget_replays`), so this module imports nothing of zymo's
above it. The other variables are read at each use.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .errors import ZymoUsageError

_listeners: list[Callable[[], None]] = []
_ENV: dict[str, str] = {}  # the variables read once (module docstring): name -> value


def _env(name: str, default: str) -> str:
    """`os.environ`'s `name`, read at the first ask and kept until `_forget_env(name)`."""
    try:
        return _ENV[name]
    except KeyError:
        value = _ENV[name] = os.environ.get(name, default)
        return value


def _forget_env(name: str) -> None:
    """`name` is read from the environment again at the next ask (`set_x(None)`)."""
    _ENV.pop(name, None)


def on_change(fn: Callable[[], None]) -> None:
    """Call `fn()` whenever a setting changes which derivative program a call runs."""
    _listeners.append(fn)


def _changed() -> None:
    for fn in _listeners:
        fn()


_clearers: list[Callable[[], None]] = []


def on_programs_stale(fn: Callable[[], None]) -> None:
    """Call `fn()` whenever every derivative program made so far may be stale (`programs_stale`)."""
    _clearers.append(fn)


def programs_stale() -> None:
    """Every cached derivative program may be stale: a custom rule was given another shape
    (`reads=`, or `defreverse` in place of `defvjp`), which the programs that call it wrote
    in (which values they pass it, what they keep). The caches forget them all."""
    for fn in _clearers:
        fn()


def check_ir() -> bool:
    return os.environ.get("ZYMO_CHECK_IR", "0") not in ("", "0")


def show_code() -> bool:
    return os.environ.get("ZYMO_SHOW_CODE", "0") not in ("", "0")


_NUMBA_CHOICES = ("auto", "always", "prefer", "kernels", "never")
_numba_override: list[str] = []


def set_numba(choice: str | None) -> None:
    """Set the Numba policy for this process (None: back to `ZYMO_NUMBA`, read again, default
    "auto"; the variable is read once otherwise, see the module docstring).

    - "auto": compile derivatives of Numba dispatchers (`@njit` functions) with Numba;
      if that fails, warn and run the derivative as Python. Plain functions run as Python.
    - "always": compile every derivative with Numba; raise if Numba cannot.
    - "prefer": compile every derivative with Numba; warn and fall back to Python if it cannot.
    - "kernels": compile only what needs compiling: the derivative runs as Python, and each of
      its loops that does scalar work is a small Numba kernel (`codegen/outline.py`), compiled
      at its first call (or loaded from the disk cache); a loop Numba cannot compile runs as
      Python. Whole-array statements run as NumPy calls. First calls cost the loops' compiles only.
    - "never": always Python.
    The per-call option `numba=` (True = "always", False = "never", "prefer", "kernels") overrides this.
    """
    if choice is not None and choice not in _NUMBA_CHOICES:
        raise ValueError(f"the Numba policy is one of {_NUMBA_CHOICES}, not {choice!r}")
    _numba_override.clear()
    if choice is not None:
        _numba_override.append(choice)
    else:
        _forget_env("ZYMO_NUMBA")
    _changed()  # a replayed call must not keep the old backend


def numba_policy() -> str:
    if _numba_override:
        return _numba_override[0]
    choice = _env("ZYMO_NUMBA", "auto") or "auto"
    if choice not in _NUMBA_CHOICES:
        raise ValueError(f"ZYMO_NUMBA is one of {_NUMBA_CHOICES}, not {choice!r}")
    return choice


_strong_zero_override: list[bool] = []


def set_strong_zero(on: bool | None) -> None:
    """Strong zeros for this process (None: back to `ZYMO_STRONG_ZERO`, read again, default off).

    Off (the default, IEEE arithmetic as NumPy, JAX and PyTorch compute it): a zero adjoint or
    tangent times an infinite or NaN partial derivative is NaN, so the branch `np.where` does not
    take can still poison a gradient (`np.where(x > 0, np.sqrt(x), 0.0)` at `x = 0`, a division
    masked after the fact). On (Enzyme's `strong_zero`): in the derivative rules of elementwise
    functions and of numbers, a zero adjoint or tangent gives a zero term whatever the partial
    derivative is. Rules of other functions (matrix products, reductions, linear algebra)
    compute as before. Derivative programs are cached separately for each setting.

    This is the switch at run time: `ZYMO_STRONG_ZERO` is read once, at the first
    differentiation (module docstring), so setting it in `os.environ` later changes nothing
    until `set_strong_zero(None)` reads it again. Every call after a switch, replayed or new,
    runs a program of the new setting.
    """
    _strong_zero_override.clear()
    if on is not None:
        _strong_zero_override.append(bool(on))
    else:
        _forget_env("ZYMO_STRONG_ZERO")
    _changed()


def strong_zero() -> bool:
    if _strong_zero_override:
        return _strong_zero_override[0]
    return _env("ZYMO_STRONG_ZERO", "0") not in ("", "0")


_reassociate_override: list[bool] = []


def set_reassociate(on: bool | None) -> None:
    """Let compiled derivatives reorder sums, for this process (None: back to
    `ZYMO_REASSOCIATE`, read again, default off; the variable is read once otherwise, see the
    module docstring).

    Off (the default): a derivative compiled with Numba (`numba=True`, "prefer", "kernels")
    computes the Python backend's numbers to the bit, apart from the matrix products the
    "kernels" backend hands to BLAS (`codegen/idioms.py`). That keeps a sum in the order the
    program wrote it, which is a chain of dependent additions LLVM may not vectorize.
    On: the compiled loops may add the terms of a sum in another order, as JAX's XLA and BLAS
    do: Numba compiles them with LLVM's `reassoc` flag (only that one: NaNs and infinities
    still propagate, no operation is assumed finite), and a reverse-mode loop whose
    iterations differ only in the order they add into shared elements or locals runs forward
    (`codegen/loop_order.py`). Results then agree with the Python backend to rounding, not to
    the bit; a sum may overflow where the ordered one does not. The Python backend is
    unaffected. Derivative programs are cached separately for each setting.
    """
    _reassociate_override.clear()
    if on is not None:
        _reassociate_override.append(bool(on))
    else:
        _forget_env("ZYMO_REASSOCIATE")
    _changed()


def reassociate() -> bool:
    if _reassociate_override:
        return _reassociate_override[0]
    return _env("ZYMO_REASSOCIATE", "0") not in ("", "0")


_memory_limit: list[int] = []


def set_memory_limit(nbytes: int | None) -> None:
    """A default `memory_limit` (bytes) for reverse mode in this process (None: no limit).

    Under the limit reverse mode stores what its adjoint sweep needs as without one; a top-level
    `for` loop whose tape would exceed it is checkpointed (`transform/checkpoint.py`). A call's own
    `memory_limit=` takes precedence.
    """
    if nbytes is not None and (isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)) or nbytes <= 0):
        raise ValueError(f"set_memory_limit takes a positive number of bytes or None, not {nbytes!r}")
    _memory_limit.clear()
    if nbytes is not None:
        _memory_limit.append(int(nbytes))


def memory_limit() -> int | None:
    return _memory_limit[0] if _memory_limit else None


def call_memory_limit(memory_limit: Any) -> int | None:
    """A call's memory limit in bytes: its `memory_limit=`, else `memory_limit()`."""
    limit = memory_limit if memory_limit is not None else _memory_limit[0] if _memory_limit else None
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
        raise ZymoUsageError(f"memory_limit is a positive number of bytes (or None), not {limit!r}")
    return None if limit is None else int(limit)


_keep_tapes_override: list[int] = []
_KEEP_TAPES_DEFAULT = 64 << 20


def set_keep_tapes(nbytes: int | None) -> None:
    """How many bytes of tape one reverse program keeps between calls (None: back to
    `ZYMO_KEEP_TAPES`, default 64 MiB; 0: none).

    A reverse program that runs as Python (`numba=False` or "kernels") and records values in
    array caches keeps those buffers when a call finishes, if they hold at most this many bytes,
    and the next call writes its tape into them instead of allocating (and faulting in) new
    ones. Their memory stays held until the next call takes them or the program is dropped.
    Split mode's tapes are the caller's (`tape=`), and whole-program Numba allocates its own.
    """
    if nbytes is not None and (isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0):
        raise ValueError(f"set_keep_tapes takes a number of bytes (an int, 0 or more) or None, not {nbytes!r}")
    _keep_tapes_override.clear()
    if nbytes is not None:
        _keep_tapes_override.append(nbytes)
    else:
        keep_tapes()  # read ZYMO_KEEP_TAPES again


def keep_tapes() -> int:
    """The bytes of tape a program keeps (`set_keep_tapes`); `ZYMO_KEEP_TAPES` is read once, at
    the first call that asks (every reverse call with array caches asks: it must cost nothing)."""
    if not _keep_tapes_override:
        env = os.environ.get("ZYMO_KEEP_TAPES")
        try:
            nbytes = _KEEP_TAPES_DEFAULT if env is None else int(env)
        except ValueError:
            nbytes = -1
        if nbytes < 0:
            raise ZymoUsageError(f"ZYMO_KEEP_TAPES is a number of bytes (an int, 0 or more), not {env!r}")
        _keep_tapes_override.append(nbytes)
    return _keep_tapes_override[0]


_threads_override: list[int] = []


def set_threads(n: int | None) -> None:
    """The number of threads compiled derivative loops may use (None: back to `ZYMO_THREADS`,
    default 1). Only loops proven to write disjoint memory in every iteration run in parallel
    (`codegen/parallel.py`, the "kernels" backend), with results equal to the serial ones.
    At most Numba's `NUMBA_NUM_THREADS`. BLAS threads are NumPy's own setting."""
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ValueError(f"the number of threads is a positive int, not {n!r}")
    _threads_override.clear()
    if n is not None:
        _threads_override.append(n)


def threads() -> int:
    if _threads_override:
        return _threads_override[0]
    raw = os.environ.get("ZYMO_THREADS", "1") or "1"
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"ZYMO_THREADS is a positive int, not {raw!r}") from None
    if n < 1:
        raise ValueError(f"ZYMO_THREADS is a positive int, not {raw!r}")
    return n
