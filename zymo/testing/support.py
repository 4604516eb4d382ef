"""What the checkers share: tolerances, float values and their copies, message formatting,
test functions written to a file of their own (zymo reads source), and the comparison.

Contract: `TOLERANCES[dtype]` is (rtol against finite differences, atol against finite
differences, rtol forward against reverse, rtol of the primal). `_close(a, b, rtol, atol,
scale)` passes when max |a - b| <= atol + rtol * scale (default scale: the largest magnitude
compared; two non-finite values pass only when equal). `_module_from_source` imports source
text from a file of its own, once per text, so that `inspect` (and zymo) can read it.
"""
from __future__ import annotations

import atexit
import copy
import importlib.util
import inspect
import math
import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np

# -- tolerances -------------------------------------------------------------------

TOLERANCES = {
    # dtype: (rtol vs finite differences, atol vs finite differences, rtol forward vs reverse, rtol primal)
    "float64": (1e-6, 1e-9, 1e-10, 1e-10),
    "float32": (1e-3, 1e-5, 1e-4, 1e-5),
}


def _mode_names(modes: Any) -> tuple[str, ...]:
    if isinstance(modes, str):
        modes = (modes,)
    out = []
    for m in modes:
        name = getattr(m, "name", m)
        name = str(name).lower()
        if name.startswith("forward"):
            out.append("forward")
        elif name.startswith("reverse"):
            out.append("reverse")
        else:
            raise ValueError(f"unknown mode {m!r}: use 'forward' and/or 'reverse'")
    if not out:
        raise ValueError("modes is empty")
    return tuple(dict.fromkeys(out))


# -- values ------------------------------------------------------------------------


def _is_float_scalar(a: Any) -> bool:
    return isinstance(a, (float, np.floating)) and not isinstance(a, bool)


def _is_float_array(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _is_diff(a: Any) -> bool:
    return _is_float_scalar(a) or _is_float_array(a)


def _copy(a: Any) -> Any:
    """A deep copy: arrays keep their layout (a transposed array stays Fortran-ordered) and
    an array held twice in a list or tuple is copied once (aliasing is kept)."""
    return copy.deepcopy(a)


def _as64(a: Any) -> Any:
    """A copy of `a` with float32 data widened to float64 (finite differences run in float64)."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return a.astype(np.float64)
    if _is_float_scalar(a):
        return float(a)
    if isinstance(a, (tuple, list)):
        return type(a)(_as64(x) for x in a)
    return _copy(a)


# -- trees: floats, arrays, other values, and tuples and lists of them ------------------


def _leaves(x: Any) -> list[tuple[tuple, Any]]:
    """(path, leaf) of every float and float array in `x`, depth first; a path is the
    tuple of container indices that leads to the leaf."""
    if isinstance(x, (tuple, list)):
        return [(((k,) + p), leaf) for k, o in enumerate(x) for p, leaf in _leaves(o)]
    return [((), x)] if _is_diff(x) else []


def _replace(x: Any, path: tuple, value: Any) -> Any:
    """`x` with the leaf at `path` replaced (containers on the path rebuilt)."""
    if not path:
        return value
    parts = list(x)
    parts[path[0]] = _replace(parts[path[0]], path[1:], value)
    return tuple(parts) if isinstance(x, tuple) else parts


def _is_memory(x: Any) -> bool:
    """An argument zymo passes by reference (its shadow is updated in place): an array, a
    list, or a tuple holding an array."""
    return isinstance(x, (np.ndarray, list)) or (
        isinstance(x, tuple) and any(isinstance(leaf, np.ndarray) for _, leaf in _leaves(x)))


def _dtype_of(a: Any) -> str:
    if isinstance(a, (np.ndarray, np.floating)):
        return "float32" if a.dtype == np.float32 else "float64"
    return "float64"


def _fmt(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return np.array2string(x, precision=10, threshold=24, max_line_width=100)
    if isinstance(x, (float, np.floating)):
        return repr(float(x))
    return repr(x)


def _describe_arg(a: Any) -> str:
    if isinstance(a, np.ndarray):
        return f"{a.dtype} array of shape {a.shape}"
    return type(a).__name__


def _fname(f: Any) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


def _arg_names(f: Any, n: int) -> list[str]:
    try:
        from ..frontend.source import unwrap

        params = list(inspect.signature(unwrap(f)).parameters)
    except (TypeError, ValueError):
        params = []
    return [repr(params[k]) if k < len(params) else f"#{k}" for k in range(n)]


# -- functions written to a real file (zymo reads source) --------------------------

_TMPDIR: list[str] = []
_MODULES: dict[str, Any] = {}


def _module_from_source(src: str, name: str) -> Any:
    """Import `src` as a module from a file of its own (so `inspect` can read it)."""
    mod = _MODULES.get(src)
    if mod is not None:
        return mod
    if not _TMPDIR:
        d = tempfile.mkdtemp(prefix="zymo_testing_")
        _TMPDIR.append(d)
        atexit.register(shutil.rmtree, d, True)
    path = os.path.join(_TMPDIR[0], f"{name}.py")
    with open(path, "w") as fh:
        fh.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    _MODULES[src] = mod
    return mod


def _weighted_sum(f: Callable, nargs: int) -> Callable:
    """`lambda *a, w: np.sum(f(*a) * w)` as a `def` zymo can read (f is inlined)."""
    params = ", ".join(f"a{k}" for k in range(nargs))
    src = textwrap.dedent(f"""\
        import numpy as np


        def make(f):
            def weighted_sum({params}{', ' if params else ''}w):
                return np.sum(f({params}) * w)
            return weighted_sum
        """)
    return _module_from_source(src, f"_zymo_testing_wsum{nargs}").make(f)


# -- comparison ----------------------------------------------------------------------


def _maxabs(x: Any) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float(np.max(np.abs(x))) if x.size else 0.0


def _close(a: Any, b: Any, rtol: float, atol: float, scale: float | None = None) -> tuple[bool, float, float]:
    """(ok, error, tolerance): max |a - b| <= atol + rtol * scale (default: largest magnitude)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        try:
            a, b = np.broadcast_arrays(a, b)
        except ValueError:
            return False, math.inf, 0.0
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        same = bool(np.array_equal(a, b, equal_nan=True))
        return same, 0.0 if same else math.inf, 0.0
    err = _maxabs(a - b)
    if scale is None:
        scale = max(_maxabs(a), _maxabs(b))
    tol = atol + rtol * scale
    return err <= tol, err, tol


