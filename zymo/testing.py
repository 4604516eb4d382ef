"""Checkers for zymo's derivatives: finite differences, forward/reverse agreement, rules.

Contract:

- `check_grad(f, *args, modes=("forward", "reverse"), rtol=None, atol=None, ...)`
  differentiates `f` at `args` with zymo and checks it. Floats (Python or
  NumPy) and float arrays are differentiated (`wrt=` narrows that down); every
  other argument is passed as `Const`. For each differentiated argument `k` and
  random directions `u` (entries in [-1, 1]), `FD(J u)` is the central
  difference of `f` itself, evaluated in float64 at steps h, h/2 and h/4 and
  Richardson-extrapolated (h = eps * max(1, max |x_k|)); then
  * forward mode: zymo's tangent `J u` equals `FD(J u)` (argument by argument,
    then all arguments seeded together);
  * reverse mode: `<J^T v, u>` equals `<v, FD(J u)>`, with `v` a random weight
    of the result's shape (`1` for a float result; for an array result zymo
    differentiates `np.sum(f(*args) * v)`, a wrapper this module writes). The
    shadows of arrays `f` does not write to start non-zero, so the check also
    tests that adjoints are *added*; those it writes to start at zero (their
    initial shadow is the cotangent of their final value, not checked here);
  * with both modes, the dot-product test `<u, J^T v> == <J u, v>`, to rounding;
  * the primal values zymo returns equal `f(*args)`, and a forward tangent has
    the result's dtype.
  A mismatch raises `AssertionError` naming the function, the argument, the
  check, and zymo's and the reference value; `FiniteDifferenceError` (an
  AssertionError) when finite differences disagree with zymo but do not
  converge at that point themselves (no verdict). It returns a `GradCheck` with
  what it computed. The derivative checked is that of `f`'s result with respect
  to the arguments' initial values; `f` may mutate its arguments (every call
  gets copies). `f` must return a float or a float array and be a Python
  function whose source zymo can read (a `def` in a file, a closure, a lambda
  alone on its line).

- `check_rule(key, modes=..., dtypes=("float64", "float32"))` tests the
  registered rule `key`: `rule_cases(key)` builds small test functions (real
  `def`s in this module: closures that call the primitive object captured from
  their closure, which zymo resolves through the registry) and inputs, and each
  case runs `check_grad` in the given modes: scalars for `math.*`, operators and
  builtins (operators also on arrays); scalar, vector, matrix, 0-d and
  broadcasting shapes, mixed dtypes, an argument passed twice, a loop, `out=`
  and in-place forms for elementwise NumPy rules, in float64 and float32;
  several axes and keepdims for reductions; 1-d, 2-d, 0-d and batched shapes
  for products; derivatives through a view and through writes into it for view
  rules; fresh memory read and partly or wholly overwritten for `alloc` rules.
  A `nondiff` rule is checked twice: a function depending on the inputs only
  through the primitive must have a derivative of exactly zero in every mode,
  and one that uses the result as a constant factor must match finite
  differences. Every case also checks that the IR verifies and that the
  primitive appears in it (`RuleCase.keys`). `check_rule` raises one
  `AssertionError` listing every failing case and returns the cases it ran. A
  key it has no cases for raises `KeyError`: no rule is skipped silently.

- Inputs are drawn from `DOMAINS` (primitive name -> one `Domain` per
  argument): log and sqrt positive, arcsin in (-1, 1), division by values away
  from zero, floor and round away from their jumps, max/min of distinct
  elements, comparisons and min/max of separated pairs (`SEPARATED`), so finite
  differences are meaningful.

Tolerances (`TOLERANCES`, by the lowest precision among the differentiated
arguments): against finite differences float64 rtol=1e-6, atol=1e-9 and
float32 rtol=1e-3, atol=1e-5, relative to the largest magnitude compared;
forward against reverse 1e-10 (float64) and 1e-4 (float32), relative to the
size of the terms of the dot products; primal results 1e-10 and 1e-5.
"""
from __future__ import annotations

import ast
import atexit
import importlib.util
import inspect
import math
import os
import shutil
import sys
import tempfile
import textwrap
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "DOMAINS", "Domain", "FiniteDifferenceError", "GradCheck", "RuleCase", "SEPARATED", "TOLERANCES", "ZERO_D",
    "check_custom_rule", "check_grad", "check_rule", "expected_keys", "prim_keys", "rule_cases",
]

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
    if isinstance(a, np.ndarray):
        return a.copy(order="K")  # keeps a transposed (Fortran-ordered) layout
    if isinstance(a, list):
        return [_copy(x) for x in a]
    return a


def _as64(a: Any) -> Any:
    """`a` with float32 data widened to float64 (finite differences run in float64)."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return a.astype(np.float64)
    if _is_float_scalar(a):
        return float(a)
    if isinstance(a, list):
        return [_as64(x) for x in a]
    return _copy(a)


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
        from .frontend.source import unwrap

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


# -- check_grad --------------------------------------------------------------------


@dataclass
class GradCheck:
    """What `check_grad` computed (all in float64 except `forward` and `reverse`).

    `directions[(k, j)]` is direction `j` of argument `k`; `fd[(k, j)]` the finite
    difference of `f` along it; `forward[(k, j)]` zymo's tangent (`k` is None for
    all arguments seeded together with their direction 0); `reverse[k]` zymo's
    `J^T v` for argument `k` (None for arguments not differentiated); `weight` is v;
    `fd_error[(k, j)]` bounds the error of `fd[(k, j)]` (elementwise).
    """

    primal: Any
    weight: Any
    directions: dict = field(default_factory=dict)
    fd: dict = field(default_factory=dict)
    fd_error: dict = field(default_factory=dict)
    forward: dict = field(default_factory=dict)
    reverse: list = field(default_factory=list)


class FiniteDifferenceError(AssertionError):
    """zymo and finite differences disagree, but finite differences do not converge at this
    point (a jump or a kink within the step, or curvature too strong for it): no verdict."""


def _fd(f: Callable, args64: list, k: int, u: Any, h: float, mutated: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """Central differences of f along `u` in argument k at steps h, h/2, h/4, Richardson-extrapolated
    twice: (the finer estimate, a bound on its error: |coarse - fine|, or inf where the differences
    do not converge like h^2, i.e. a jump or kink within the step). Adds to `mutated` the arrays f
    writes to (a write that happens to store the old value is caught at another point)."""
    ys = []

    def at(t: float) -> np.ndarray:
        a = [_copy(x) for x in args64]
        a[k] = args64[k] + t * u
        if isinstance(args64[k], float):
            a[k] = float(a[k])
        before = [_copy(x) for x in a]
        y = np.asarray(f(*a), dtype=np.float64)
        mutated.update(i for i, x in enumerate(before) if isinstance(x, np.ndarray)
                       and not np.array_equal(x, a[i], equal_nan=True))
        ys.append(_maxabs(y))
        return y

    d = [(at(h / m) - at(-h / m)) / (2 * h / m) for m in (1, 2, 4)]
    coarse = (4.0 * d[1] - d[0]) / 3.0
    fine = (4.0 * d[2] - d[1]) / 3.0
    noise = 32 * np.finfo(np.float64).eps * max(ys) / h  # rounding in the differences at h/4
    converging = _maxabs(d[1] - d[2]) <= 0.5 * _maxabs(d[0] - d[1]) + noise
    err = np.abs(coarse - fine) if converging else np.full(np.shape(fine), np.inf)
    return fine, err


def _weighted(v: Any, err: Any) -> float:
    """sum |v| * err, with inf wherever err is inf (0 * inf is not nan here)."""
    err = np.asarray(err, dtype=np.float64)
    if np.any(np.isinf(err)):
        return math.inf
    return float(np.sum(np.abs(np.asarray(v, dtype=np.float64)) * err))


def check_grad(f: Callable, *args: Any, modes: Any = ("forward", "reverse"), rtol: float | None = None,
               atol: float | None = None, eps: float = 1e-3, seed: int = 0, directions: int = 2,
               wrt: Iterable[int] | None = None, name: str | None = None) -> GradCheck:
    """Check zymo's derivatives of `f` at `args` (see the module docstring).

    `eps` is the finite-difference step relative to max(1, max |x|); `wrt` the
    indices of the arguments to differentiate (default: every float and float
    array); `directions` the number of random directions per argument; `name`
    what messages call `f`.
    """
    import zymo
    from zymo import Active, Const, Duplicated, ForwardWithPrimal, ReverseWithPrimal

    modes = _mode_names(modes)
    fname = name or _fname(f)
    rng = np.random.default_rng(seed)
    n = len(args)
    names = _arg_names(f, n)
    diff = [k for k in range(n) if _is_diff(args[k])]
    if wrt is not None:
        wrt = list(wrt)
        for k in wrt:
            if not 0 <= k < n or not _is_diff(args[k]):
                raise ValueError(f"check_grad: argument {k} is not a float or a float array")
        diff = [k for k in diff if k in wrt]
    if not diff:
        raise ValueError(f"check_grad({fname}): no float or float-array argument to differentiate")
    dtype = "float32" if any(_dtype_of(args[k]) == "float32" for k in diff) else "float64"
    d_rtol, d_atol, ad_rtol, p_rtol = TOLERANCES[dtype]
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol

    def fail(what: str, k: int | None, mine: Any, ref: Any, err: float, tol: float, ref_name: str,
             fd_bound: float = 0.0) -> None:
        who = "all arguments together" if k is None else f"argument {k} ({names[k]}, {_describe_arg(args[k])})"
        msg = (f"check_grad({fname}): {what} with respect to {who}:\n"
               f"  zymo:              {_fmt(mine)}\n"
               f"  {ref_name + ':':<18} {_fmt(ref)}\n"
               f"  max abs error {err:.3g} > tolerance {tol:.3g} (rtol={rtol:g}, atol={atol:g}, dtype {dtype})")
        if err <= fd_bound:
            why = ("they do not shrink like h^2 as the step h shrinks" if math.isinf(fd_bound) else
                   f"their estimates at steps h and h/2 differ by {fd_bound:.3g}")
            raise FiniteDifferenceError(
                msg + f"\n  but finite differences do not converge here ({why}; h = {eps:g} * max(1, |x|)): "
                "a jump or kink within the step, strong curvature or rounding; try another eps or point")
        raise AssertionError(msg)

    # the primal, natively and in float64; which arrays f writes to
    after = [_copy(a) for a in args]
    y0 = f(*after)
    mutated = {k for k in range(n) if isinstance(args[k], np.ndarray)
               and not np.array_equal(args[k], after[k], equal_nan=True)}
    if isinstance(y0, np.ndarray):
        if y0.dtype.kind != "f":
            raise TypeError(f"check_grad({fname}): f returns an array of dtype {y0.dtype}, not floats")
        scalar_out = False
    elif _is_float_scalar(y0):
        scalar_out = True
    else:
        raise TypeError(f"check_grad({fname}): f must return a float or a float array, not {type(y0).__name__}")
    args64 = [_as64(a) for a in args]
    out_dtype = y0.dtype if isinstance(y0, (np.ndarray, np.floating)) else np.dtype(np.float64)
    if scalar_out:
        v = np.float64(1.0)
    else:
        v = rng.uniform(-1.0, 1.0, size=y0.shape)
    res = GradCheck(primal=y0, weight=v, reverse=[None] * n)

    def direction(a: Any) -> Any:
        if isinstance(a, np.ndarray):
            return rng.uniform(-1.0, 1.0, size=a.shape)
        return float(rng.uniform(-1.0, 1.0))

    def native(a: Any, u: Any) -> Any:
        """Direction `u` (float64) as a shadow of `a`'s type."""
        if isinstance(a, np.ndarray):
            s = np.empty_like(a)  # the primal's layout
            s[...] = u
            return s
        return type(a)(u)

    for k in diff:
        h = eps * max(1.0, _maxabs(args64[k]))
        for j in range(directions):
            u = direction(args[k])
            u = _as64(native(args[k], u))  # representable in the argument's dtype
            res.directions[(k, j)] = u
            res.fd[(k, j)], res.fd_error[(k, j)] = _fd(f, args64, k, u, h, mutated)

    def check_primal(p: Any, ref: Any, what: str) -> None:
        ok, err, tol = _close(p, ref, p_rtol, p_rtol * 1e-3)
        if not ok:
            raise AssertionError(
                f"check_grad({fname}): the primal result zymo returns ({what}) differs from f(*args):\n"
                f"  zymo:   {_fmt(p)}\n  f:      {_fmt(ref)}\n  max abs error {err:.3g} > tolerance {tol:.3g}")

    # -- forward mode --------------------------------------------------------------
    if "forward" in modes:
        plans: list[tuple[int | None, dict[int, Any]]] = []
        for k in diff:
            for j in range(directions):
                plans.append((k, {k: res.directions[(k, j)]}))
        if len(diff) > 1:
            plans.append((None, {k: res.directions[(k, 0)] for k in diff}))
        for k, seeds in plans:
            ann = [Duplicated(_copy(a), native(a, seeds[i])) if i in seeds else Const(_copy(a))
                   for i, a in enumerate(args)]
            tangent, primal = zymo.autodiff(ForwardWithPrimal, f, Duplicated, *ann)
            check_primal(primal, y0, "forward mode")
            if isinstance(tangent, (np.ndarray, np.floating)) and np.asarray(tangent).dtype != out_dtype:
                raise AssertionError(
                    f"check_grad({fname}): forward-mode tangent has dtype {np.asarray(tangent).dtype}, "
                    f"the result has dtype {out_dtype}")
            if k is None:
                ref = sum(res.fd[(i, 0)] for i in diff)
                res.forward[(None, 0)] = tangent
                ok, err, tol = _close(tangent, ref, rtol, atol)
                if not ok:
                    fail("forward-mode tangent J u does not match finite differences", None, tangent, ref, err,
                         tol, "finite differences", _maxabs(sum(res.fd_error[(i, 0)] for i in diff)))
                continue
            j = sum(1 for key in res.forward if key[0] == k)
            res.forward[(k, j)] = tangent
            ref = res.fd[(k, j)]
            if np.shape(tangent) != np.shape(ref) and not (np.ndim(tangent) == 0 and np.ndim(ref) == 0):
                if not (np.ndim(tangent) == 0 and float(tangent) == 0.0):  # a constant result: tangent 0.0
                    raise AssertionError(
                        f"check_grad({fname}): forward-mode tangent has shape {np.shape(tangent)}, "
                        f"the result has shape {np.shape(ref)} (argument {k}, {names[k]})")
            ok, err, tol = _close(tangent, ref, rtol, atol)
            if not ok:
                fail(f"forward-mode tangent J u (direction {j}) does not match finite differences", k, tangent,
                     ref, err, tol, "finite differences", _maxabs(res.fd_error[(k, j)]))

    # -- reverse mode --------------------------------------------------------------
    if "reverse" in modes:
        ann = []
        starts: dict[int, np.ndarray] = {}
        shadows: dict[int, np.ndarray] = {}
        for i, a in enumerate(args):
            if i not in diff:
                ann.append(Const(_copy(a)))
            elif isinstance(a, np.ndarray):
                # the shadow passed in is the cotangent of the argument's final value: start an
                # array f does not write to at random (so adjoints must be *added*), one it
                # writes to at zero (its final value is not part of the result checked here)
                s0 = np.empty_like(a)  # the primal's layout
                s0[...] = 0.0 if i in mutated else rng.uniform(-1.0, 1.0, size=a.shape)
                starts[i], shadows[i] = s0, s0.copy(order="K")
                ann.append(Duplicated(_copy(a), shadows[i]))
            else:
                ann.append(Active(a))
        if scalar_out:
            target, extra = f, ()
        else:
            w = np.asarray(v, dtype=out_dtype)
            if w.ndim == 0:
                w = w.reshape(())
            target, extra = _weighted_sum(f, n), (Const(w),)
        derivs, primal = zymo.autodiff(ReverseWithPrimal, target, Active, *ann, *extra)
        if scalar_out:
            check_primal(primal, y0, "reverse mode")
        else:
            ref_p = float(np.sum(np.asarray(y0, np.float64) * np.asarray(extra[0].val, np.float64)))
            ok, err, tol = _close(primal, ref_p, p_rtol, p_rtol * 1e-3,
                                  scale=float(np.sum(np.abs(np.asarray(y0, np.float64)))))
            if not ok:
                check_primal(primal, ref_p, "reverse mode, np.sum(f(*args) * v)")
        for i in diff:
            if i in shadows:
                g = shadows[i].astype(np.float64) - starts[i].astype(np.float64)
                grad = shadows[i] - starts[i]
            else:
                grad = derivs[i]
                if grad is None:
                    raise AssertionError(f"check_grad({fname}): reverse mode returned no derivative for argument "
                                         f"{i} ({names[i]})")
                g = float(grad)
            res.reverse[i] = grad
            for j in range(directions):
                u = res.directions[(i, j)]
                mine = float(np.sum(g * u))
                fdv = res.fd[(i, j)]
                ref = float(np.sum(np.asarray(v) * fdv))
                scale = max(float(np.sum(np.abs(g * u))), float(np.sum(np.abs(np.asarray(v) * fdv))))
                ok, err, tol = _close(mine, ref, rtol, atol, scale=scale)
                if not ok:
                    fail(f"reverse-mode <J^T v, u> (direction {j}; J^T v = {_fmt(grad)})"
                         " does not match finite differences <v, J u>", i, mine, ref, err, tol,
                         "finite differences", _weighted(v, res.fd_error[(i, j)]))

    # -- forward against reverse (the dot-product test) --------------------------------
    if "forward" in modes and "reverse" in modes:
        # rounding in either sweep is relative to the size of the derivative's terms, which
        # may cancel (x / x): measure it against the largest directional derivative of any
        # argument, and against |v| |u| (Jacobian entries of order one)
        vabs = np.abs(np.asarray(v, dtype=np.float64))
        overall = max(float(np.sum(vabs * np.abs(fdv))) for fdv in res.fd.values())
        overall = max([overall] + [float(np.sum(vabs)) * _maxabs(u) for u in res.directions.values()])
        for (k, j), tangent in res.forward.items():
            if k is None:
                continue
            g = np.asarray(res.reverse[k], dtype=np.float64)
            u = res.directions[(k, j)]
            lhs = float(np.sum(g * u))
            t = np.asarray(tangent, dtype=np.float64)
            rhs = float(np.sum(np.asarray(v) * t))
            scale = max(float(np.sum(np.abs(g * u))), float(np.sum(vabs * np.abs(t))), overall)
            ok, err, tol = _close(lhs, rhs, ad_rtol, 0.0, scale=scale)
            if not ok:
                raise AssertionError(
                    f"check_grad({fname}): forward and reverse mode disagree for argument {k} ({names[k]}), "
                    f"direction {j}:\n"
                    f"  reverse <J^T v, u>: {lhs!r}\n  forward <v, J u>:   {rhs!r}\n"
                    f"  error {err:.3g} > tolerance {tol:.3g}")
    return res


# -- domains ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Domain:
    """Where an argument is drawn from: uniform in [lo, hi]; `signed`: |x| in [lo, hi]
    with a random sign; `offint`: away from integers and half-integers (floor, round);
    `distinct`: elements at least 0.2 apart (max/min: no ties, no switch under a small step)."""

    lo: float
    hi: float
    signed: bool = False
    offint: bool = False
    distinct: bool = False

    def sample(self, rng: np.random.Generator, shape: Any, dtype: str) -> Any:
        """Values of `shape` (`()`: a float or NumPy float scalar; `ZERO_D`: a 0-d array) and `dtype`."""
        size = () if shape == ZERO_D else shape
        x = rng.uniform(self.lo, self.hi, size=size)
        if self.signed:
            x = x * rng.choice([-1.0, 1.0], size=size)
        if self.offint:
            x = np.floor(x) + rng.choice([0.15, 0.3, 0.65, 0.8], size=size) + rng.uniform(-0.05, 0.05, size=size)
        if self.distinct and np.size(x) > 1:
            k = np.size(x)
            x = self.lo + (self.hi - self.lo) * (rng.permutation(k) + 0.5) / k
            x = (x + rng.uniform(-0.05, 0.05, size=k) * (self.hi - self.lo) / k).reshape(size)
        if shape == ():
            return np.float32(x) if dtype == "float32" else float(x)
        return np.asarray(x, dtype=dtype)


ZERO_D = "0d"  # the shape of a 0-d array in rule cases (() is a scalar)
ANY = Domain(-2.0, 2.0)
POS = Domain(0.2, 3.0)
NONZERO = Domain(0.3, 2.0, signed=True)
OFFINT = Domain(-2.5, 2.5, offint=True)

# primitive name (the key's last part, or the whole key) -> one domain per argument
DOMAINS: dict[str, tuple[Domain, ...]] = {
    "log": (POS,), "log2": (POS,), "log10": (POS,), "sqrt": (POS,), "log1p": (Domain(-0.5, 2.0),),
    "asin": (Domain(-0.9, 0.9),), "acos": (Domain(-0.9, 0.9),), "tan": (Domain(-1.2, 1.2),),
    "abs": (NONZERO,), "fabs": (NONZERO,), "absolute": (NONZERO,), "sign": (NONZERO,),
    "truediv": (ANY, NONZERO), "divide": (ANY, NONZERO), "fdiv": (ANY, NONZERO),
    "fpow": (Domain(0.3, 2.0), Domain(-1.5, 2.5)),
    "mod": (Domain(2.6, 3.9), Domain(2.0, 2.5)),  # x / y in (1.04, 1.95): x // y == 1, no jump
    "floordiv": (Domain(2.6, 3.9), Domain(2.0, 2.5)),
    "pow": (Domain(0.3, 2.0), Domain(-1.5, 2.5)), "power": (Domain(0.3, 2.0), Domain(-1.5, 2.5)),
    "atan2": (NONZERO, ANY),  # y away from 0: no branch cut
    "hypot": (NONZERO, NONZERO),
    "floor": (OFFINT,), "ceil": (OFFINT,), "trunc": (OFFINT,), "round": (OFFINT,), "int": (OFFINT,),
    "bool": (NONZERO,),
    "arcsin": (Domain(-0.9, 0.9),), "arccos": (Domain(-0.9, 0.9),), "arctanh": (Domain(-0.8, 0.8),),
    "arccosh": (Domain(1.2, 3.0),), "cbrt": (NONZERO,), "reciprocal": (NONZERO,),
    "fmod": (Domain(2.6, 3.9), Domain(2.0, 2.5)), "remainder": (Domain(2.6, 3.9), Domain(2.0, 2.5)),
    "float_power": (Domain(0.3, 2.0), Domain(-1.5, 2.5)), "arctan2": (NONZERO, ANY),
    "copysign": (NONZERO, NONZERO), "rint": (OFFINT,), "signbit": (NONZERO,), "around": (OFFINT,),
    "fix": (OFFINT,), "gammaln": (POS,), "digamma": (POS,), "logit": (Domain(0.05, 0.95),),
    "xlogy": (POS, POS), "tri": (Domain(0.3, 2.0, signed=True),),
    "clip": (Domain(-2.0, 2.0), Domain(-1.0, -0.3), Domain(0.3, 1.0)),
    "numpy.max": (Domain(-3.0, 3.0, distinct=True),), "numpy.min": (Domain(-3.0, 3.0, distinct=True),),
    "numpy.amax": (Domain(-3.0, 3.0, distinct=True),), "numpy.amin": (Domain(-3.0, 3.0, distinct=True),),
}
# primitives of two arguments with a jump where they are equal: the second is drawn
# at a distance in [0.3, 1.5] from the first
SEPARATED = {"min", "max", "lt", "le", "gt", "ge", "eq", "ne", "builtins.min", "builtins.max",
             "maximum", "minimum", "fmax", "fmin"}


def _domains(key: str, n: int) -> tuple[Domain, ...]:
    d = DOMAINS.get(key) or _declared_domains(key) or DOMAINS.get(key.split(".")[-1]) or ()
    return tuple(d[i] if i < len(d) else ANY for i in range(n))


def _declared_domains(key: str) -> tuple[Domain, ...]:
    """A rule's own `domains` (one `(lo, hi[, signed])` per argument: `rules/special.py`)."""
    from .rules.registry import REGISTRY

    return tuple(Domain(*d) for d in getattr(REGISTRY.get(key), "domains", ()))


def _sample(key: str, shapes: tuple, dtype: str, rng: np.random.Generator) -> tuple:
    """Inputs of `shapes` from the domains of `key`; dtype "mixed" alternates float32 and float64."""
    doms = _domains(key, len(shapes))
    dts = [("float32", "float64")[i % 2] if dtype == "mixed" else dtype for i in range(len(shapes))]
    out = [d.sample(rng, s, dt) for d, s, dt in zip(doms, shapes, dts)]
    if (key in SEPARATED or key.split(".")[-1] in SEPARATED) and len(out) == 2 and (
            shapes[0] != shapes[1] or shapes[0] == ZERO_D):
        # broadcasting operands: redraw the second until every broadcast pair is 0.3 apart
        for _ in range(1000):
            gap = np.abs(np.asarray(out[0], np.float64) - np.asarray(out[1], np.float64))
            if np.all(gap >= 0.3):
                return tuple(out)
            out[1] = doms[1].sample(rng, shapes[1], dts[1])
        raise ValueError(f"{key}: cannot draw separated operands of shapes {shapes}")
    if (key in SEPARATED or key.split(".")[-1] in SEPARATED) and len(out) == 2:
        if shapes[0] != shapes[1] or shapes[0] == ZERO_D:
            raise ValueError(f"{key}: separated pairs need arguments of one shape, not {shapes}")
        x = np.asarray(out[0], dtype=np.float64)
        y = x + rng.uniform(0.3, 1.5, size=shapes[0]) * rng.choice([-1.0, 1.0], size=shapes[0])
        out[1] = (np.float32(y) if dts[1] == "float32" else float(y)) if shapes[1] == () else y.astype(dts[1])
    return tuple(out)


# -- templates: the functions check_rule differentiates ------------------------------
# Each factory captures the primitive object `fn` in a closure; zymo resolves the
# call through the rule registry. One def per line shape keeps them readable.


def _t_call1(fn):
    def call1(x):
        return fn(x)
    return call1


def _t_call2(fn):
    def call2(x, y):
        return fn(x, y)
    return call2


def _t_call3(fn):
    def call3(x, y, z):
        return fn(fn(x, y), z)
    return call3


def _t_out1(fn):
    def out1(x):
        o = np.zeros_like(x)
        fn(x, out=o)
        return o
    return out1


def _t_out2(fn):
    def out2(x, y):
        o = np.zeros_like(x)
        fn(x, y, out=o)
        return o
    return out2


def _t_inplace1(fn):
    def inplace1(x):
        y = np.copy(x)
        fn(y, out=y)
        return y * x
    return inplace1


def _t_inplace2(fn):
    def inplace2(x, y):
        z = np.copy(x)
        fn(z, y, out=z)
        return z * x
    return inplace2


def _t_inplace2_rhs(fn):
    def inplace2_rhs(x, y):
        z = np.copy(y)
        fn(x, z, out=z)
        return z * y
    return inplace2_rhs


def _t_loop1(fn):
    def loop1(x):
        acc = x * 0.0
        for i in range(3):
            z = x * (1.0 - 0.05 * i)
            acc = acc + fn(z) * z
        return acc
    return loop1


def _t_loop2(fn):
    def loop2(x, y):
        acc = x * 0.0
        for i in range(3):
            acc = acc + fn(x * (1.0 - 0.05 * i), y) * (i + 1.0)
        return acc
    return loop2


def _t_self2(fn):
    def self2(x):
        return fn(x, x)
    return self2


def _t_pow_int(fn):
    def pow_int(x):
        return fn(x, 3) + fn(x, 2)
    return pow_int


def _t_outmat(fn):
    def outmat(x, y):
        o = np.empty_like(fn(x, y))
        fn(x, y, out=o)
        return o
    return outmat


# nondiff: the result as the only dependence (derivative exactly zero) or as a constant
def _t_zero1(fn):
    def zero1(x):
        return 2.0 * fn(x)
    return zero1


def _t_zero2(fn):
    def zero2(x, y):
        return 2.0 * fn(x, y)
    return zero2


def _t_const1(fn):
    def const1(x):
        return x * (1.0 + fn(x))
    return const1


def _t_const2(fn):
    def const2(x, y):
        return x * y * (1.0 + fn(x, y))
    return const2


def _t_branch2(fn):
    def branch2(x, y):
        if fn(x, y):
            return x * y
        return x - y
    return branch2


def _t_not_zero(fn):
    def not_zero(x, y):
        return 2.0 * fn(x < y)
    return not_zero


def _t_not_const(fn):
    def not_const(x, y):
        return x * y * (1.0 + fn(x < y))
    return not_const


def _t_not_syntax(fn):
    def not_syntax(x, y):
        if not x < y:
            return x * y
        return x - y
    return not_syntax


def _t_bool_zero(fn):
    def bool_zero(x, y):
        return 2.0 * fn(x < y, y > 0.0)
    return bool_zero


def _t_bool_const(fn):
    def bool_const(x, y):
        if fn(x < y, y > 0.0):
            return x * y
        return x - y
    return bool_const


def _t_chain_cmp(fn):
    def chain_cmp(x, y):
        if -3.0 < x < y:
            return x * y
        return x - y
    return chain_cmp


def _t_break_continue(fn):
    def break_continue(x, t):
        acc = 0.0
        for i in range(x.shape[0]):
            if x[i] > t:
                break
            if x[i] < -t:
                continue
            acc = acc + x[i] * x[i]
        return acc * t
    return break_continue


def _t_dim(fn):
    def dim(x):
        return x * fn(x, 0) + x * fn(x, 1)
    return dim


def _t_dim_syntax(fn):
    def dim_syntax(x):
        return x * x.shape[0] * len(x)
    return dim_syntax


def _t_printed(fn):
    def printed(x):
        fn(x)
        return x * x
    return printed


def _t_len_list(fn):
    def len_list(x, lst):
        return x * fn(lst)
    return len_list


def _t_shape_const(fn):
    def shape_const(x):
        return x * fn(x)[0] + x * fn(x)[1]
    return shape_const


def _t_shape_zero(fn):
    def shape_zero(x):
        return 2.0 * fn(x)[0]
    return shape_zero


def _t_pick(fn):
    def pick(x):
        return x[fn(x)] * 3.0
    return pick


def _t_float32(fn):
    def to_float(x):
        return fn(x) * fn(x)
    return to_float


# reductions, with literal axes (closure ints would be runtime values)
def _t_red_all(fn):
    def red_all(x):
        return fn(x)
    return red_all


def _t_red_axis0(fn):
    def red_axis0(x):
        return fn(x, axis=0)
    return red_axis0


def _t_red_axis1(fn):
    def red_axis1(x):
        return fn(x, axis=1)
    return red_axis1


def _t_red_last_keep(fn):
    def red_last_keep(x):
        return fn(x, axis=-1, keepdims=True)
    return red_last_keep


def _t_red_all_keep(fn):
    def red_all_keep(x):
        return fn(x, keepdims=True)
    return red_all_keep


def _t_red_axes02(fn):
    def red_axes02(x):
        return fn(x, axis=(0, 2))
    return red_axes02


def _t_red_chain(fn):
    def red_chain(x):
        return fn(fn(x * x, axis=0))
    return red_chain


def _t_sum_method(fn):
    def sum_method(x):
        return x.sum(axis=1) * x.sum()
    return sum_method


def _t_mean_method(fn):
    def mean_method(x):
        return x.mean(axis=0) * x.mean()
    return mean_method


def _t_sum_builtin(fn):
    def sum_builtin(x):
        return sum(x)
    return sum_builtin


def _t_max_method(fn):
    def max_method(x):
        return x.max(axis=0) * x.max()
    return max_method


def _t_min_method(fn):
    def min_method(x):
        return x.min(axis=1) * x.min()
    return min_method


def _t_after_loop(fn):
    def after_loop(x):
        acc = 0.0
        for i in range(x.shape[0]):
            acc = acc + x[i] * x[i]
        return acc * x[i]  # the loop variable after the loop: defined only if the loop ran
    return after_loop


def _t_trip(fn):
    def trip(x):
        return x * fn(0, x.shape[0], 2) + x * fn(x.shape[0], 0, -1)
    return trip


def _t_span(fn):
    def span(x):
        return x * fn(2, x.shape[0]) + x * fn(x.shape[0], 1)
    return span


# views
def _t_view(fn):
    def view(x, w):
        return np.sum(fn(x) * w)
    return view


def _t_view_write(fn):
    def view_write(x, w):
        y = np.copy(x)
        v = fn(y)
        v[0, 1] = v[0, 1] * v[1, 0]
        return np.sum(y * w)
    return view_write


def _t_transpose_axes(fn):
    def transpose_axes(x, w):
        return np.sum(fn(x, (1, 0, 2)) * w)
    return transpose_axes


def _t_transpose_attr(fn):
    def transpose_attr(x, w):
        return np.sum(x.T * w) + np.sum(x.transpose() * w)
    return transpose_attr


def _t_reshape_flat(fn):
    def reshape_flat(x, w):
        return np.sum(fn(x, (12,)) * w)
    return reshape_flat


def _t_reshape_infer(fn):
    def reshape_infer(x, w):
        return np.sum(fn(x, (2, -1)) * w)
    return reshape_infer


def _t_reshape_method(fn):
    def reshape_method(x, w):
        return np.sum(x.reshape(4, 3) * w)
    return reshape_method


def _t_reshape_write(fn):
    def reshape_write(x, w):
        y = np.copy(x)
        v = fn(y, (12,))
        v[5] = v[5] * v[6]
        return np.sum(y * w)
    return reshape_write


def _t_copy_write(fn):
    def copy_write(x):
        y = fn(x)
        y[0] = y[0] * y[1]
        return y * x
    return copy_write


# allocation
def _t_new_n(fn):
    def new_n(x):
        n = x.shape[0]
        a = fn(n)
        for i in range(n):
            a[i] = x[i] * x[i]
        return np.sum(a * x)
    return new_n


def _t_new_n_partial(fn):
    def new_n_partial(x):
        a = fn(x.shape[0])
        a[1] = x[0] * x[2]
        return a * x
    return new_n_partial


def _t_new_2d(fn):
    def new_2d(x):
        a = fn((2, x.shape[0]))
        a[0] = x * x
        a[1] = x
        a[1, 1] = x[0] * x[1]
        return np.sum(a * x)
    return new_2d


def _t_new_dtype(fn):
    def new_dtype(x):
        a = fn(x.shape[0], dtype=x.dtype)
        a[0] = x[1] * x[2]
        return a * x
    return new_dtype


def _t_full(fn):
    def full(x):
        a = fn(x.shape[0], 0.5)
        a[1] = x[0] * x[2]
        return a * x
    return full


def _t_like(fn):
    def like(x):
        a = fn(x)
        for i in range(x.shape[0]):
            a[i] = x[i] * x[i]
        return np.sum(a * x)
    return like


def _t_like_partial(fn):
    def like_partial(x):
        a = fn(x)
        a[1] = x[0] * x[2]
        return a * x
    return like_partial


def _t_arange(fn):
    def arange(x):
        return fn(x.shape[0]) * x + fn(0.5, 2.0, 0.5) * x
    return arange


# functions written from a rule's `cases` (an expression, or a body with `return`)
_EXPR_ARGS = ("x", "y", "z", "w")


def _t_expr(src: str, nargs: int, label: str) -> Callable:
    """A factory like the `_t_*` ones, for a case written as source text: the function takes
    arguments x, y, z, w (as many as the case has) and calls the primitive as `fn`."""
    body = src if "\n" in src or src.lstrip().startswith(("return", "o =", "y =", "z =")) else f"return {src}"
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    params = ", ".join(_EXPR_ARGS[:nargs])
    code = (f"import math\nimport numpy as np\n\n\ndef make(fn):\n    def {label}({params}):\n{body}\n"
            f"    return {label}\n")
    mod = _module_from_source(code, f"_zymo_case_{zlib.crc32(code.encode()):08x}")
    return mod.make


def keyword_form(src: str, fn: Any) -> str | None:
    """`src` with every call `fn(a, b, c)` written `fn(a, name_b=b, name_c=c)`: the arguments
    after the first passed by the primal's own parameter names (None when no call changes).
    Rules bind arguments by the primal's signature; these cases check that they do."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    tree = ast.parse(textwrap.dedent(src))
    changed = False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "fn"):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or len(node.args) < 2:
            continue
        keep = 1
        while keep < len(node.args) and (keep >= len(params) or
                                         params[keep].kind != inspect.Parameter.POSITIONAL_OR_KEYWORD):
            keep += 1
        if keep >= len(node.args) or any(p.kind != inspect.Parameter.POSITIONAL_OR_KEYWORD
                                         for p in params[keep:len(node.args)]):
            continue
        node.keywords = [ast.keyword(params[i].name, a) for i, a in enumerate(node.args) if i >= keep] + node.keywords
        node.args = node.args[:keep]
        changed = True
    return ast.unparse(tree) if changed else None


def _special_arg(spec: tuple, dtype: str, rng: np.random.Generator) -> Any:
    """Arguments rule cases describe by kind rather than shape:
    ("spd", n) symmetric positive definite; ("sym", n) symmetric with eigenvalues at least
    0.5 apart; ("wc", *shape) matrices (or stacks) with singular values in [1, 2], distinct;
    ("tril", n)/("triu", n) well-conditioned triangular; ("int", shape, lo, hi) and
    ("bool", shape) non-differentiable arrays; ("const", value) the value itself."""
    kind = spec[0]

    def ortho(n):
        q, r = np.linalg.qr(rng.normal(size=(n, n)))
        return q * np.sign(np.diag(r))

    if kind == "const":
        return spec[1]
    if kind == "withzero":
        a = rng.uniform(-2.0, 2.0, size=spec[1])
        a.flat[1] = 0.0
        return a.astype(dtype)
    if kind == "int":
        return rng.integers(spec[2], spec[3], size=spec[1])
    if kind == "bool":
        return rng.uniform(size=spec[1]) < 0.5
    if kind == "spd":
        n = spec[1]
        q = ortho(n)
        a = (q * rng.uniform(1.0, 3.0, size=n)) @ q.T
    elif kind == "sym":
        n = spec[1]
        q = ortho(n)
        ev = np.linspace(-1.5, 1.5, n) + rng.uniform(-0.1, 0.1, size=n)
        a = (q * ev) @ q.T
    elif kind == "wc":
        *batch, m, n = spec[1:]
        mats = []
        for _ in range(int(np.prod(batch)) if batch else 1):
            k = min(m, n)
            s = np.linspace(2.0, 1.0, k) + rng.uniform(-0.05, 0.05, size=k)
            u, v = ortho(m)[:, :k], ortho(n)[:, :k]
            mats.append((u * s) @ v.T)
        a = np.array(mats).reshape(*batch, m, n)
    elif kind in ("tril", "triu"):
        n = spec[1]
        a = rng.uniform(-0.5, 0.5, size=(n, n)) + np.diag(rng.uniform(1.0, 2.0, size=n) * rng.choice([-1, 1], n))
        a = np.tril(a) if kind == "tril" else np.triu(a)
    else:
        raise ValueError(f"unknown argument spec {spec!r}")
    return a.astype(dtype)


def _spec_id(spec: Any) -> str:
    if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
        if spec[0] == "const":
            return repr(spec[1]).replace(" ", "")
        rest = [x for x in spec[1:] if not isinstance(x, tuple)] + [y for x in spec[1:] if isinstance(x, tuple)
                                                                     for y in x]
        return spec[0] + "x".join(map(str, rest))
    return _shape_id((spec,))


# -- cases -------------------------------------------------------------------------------


@dataclass
class RuleCase:
    """One function exercising rule `key` at given inputs; `kind` "grad" (check
    against finite differences) or "zero" (derivative exactly zero as well)."""

    key: str
    name: str
    fn: Callable
    args: tuple
    kind: str = "grad"
    rtol: float | None = None
    atol: float | None = None
    expect: tuple = ()  # the keys the IR must call (default: key; a rule with parts: its parts)

    def __repr__(self) -> str:
        return f"RuleCase({self.name})"

    def keys(self) -> set[str]:
        """The rule keys in the IR of this case (the IR is verified first)."""
        import zymo
        from zymo.ir.verify import verify

        ir = zymo.ir(self.fn, *self.args)
        verify(ir)
        return prim_keys(ir)

    def run(self, modes: Any = ("forward", "reverse"), seed: int = 0) -> GradCheck:
        keys = self.keys()
        expect = self.expect or (self.key,)
        if not any(k in keys for k in expect):
            raise AssertionError(f"{self.name}: the IR does not call {' or '.join(expect)} (it calls {sorted(keys)})")
        res = check_grad(self.fn, *self.args, modes=modes, rtol=self.rtol, atol=self.atol, seed=seed,
                         name=self.name)
        if self.kind == "zero":
            for label, d in list(res.forward.items()) + [(i, g) for i, g in enumerate(res.reverse)]:
                if d is not None and np.any(np.asarray(d) != 0):
                    raise AssertionError(f"{self.name}: {self.key} is nondiff, but the derivative "
                                         f"({'forward' if isinstance(label, tuple) else 'reverse'}, "
                                         f"{label}) is {_fmt(d)}, not exactly zero")
        return res


def expected_keys(rule: Any) -> tuple:
    """The keys a case of `rule` must find in the IR: its parts, the rules the frontend lowers
    it to (`via`), or its own key."""
    return tuple(rule.parts) or tuple(getattr(rule, "via", ())) or (rule.key,)


def prim_keys(ir: Any) -> set[str]:
    """The rule keys of every `prim` op in an IR function (nested regions included)."""
    from .ir.core import walk

    return {op.attrs["key"] for op in walk(ir.body) if op.kind == "prim"}


def _ascending(x, y):
    return (x, y) if x < y else (y, x)


def _descending(x, y):
    return (x, y) if x > y else (y, x)


def _positive(x):
    return (abs(x),)


def _negative(x):
    return (-abs(x),)


_ARRAY_SHAPES = [(5,), (3, 4)]
_UNARY_SHAPES = [(), (5,), (3, 4), ZERO_D]
_BINARY_SHAPES = [((), ()), ((5,), (5,)), ((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (5,)),
                  ((5,), ()), ((2, 3, 4), (3, 1)), (ZERO_D, (5,)), (ZERO_D, ZERO_D)]
_SCALAR = [()]


def _shape_id(shapes: tuple) -> str:
    return ",".join(s if s == ZERO_D else ("x".join(map(str, s)) or "s") for s in shapes)


class _Builder:
    def __init__(self, key: str, dtypes: tuple[str, ...], seed: int):
        from .rules.registry import lookup

        self.key = key
        self.rule = lookup(key)
        self.fn = self.rule.fn
        self.dtypes = dtypes
        self.rng = np.random.default_rng(zlib.crc32(key.encode()) + seed)
        self.cases: list[RuleCase] = []

    def add(self, tmpl: Callable, shapes: tuple, dtypes: Iterable[str] = ("float64",), kind: str = "grad",
            extra: tuple = (), fn: Any = None, dom_key: str | None = None, fix: Callable | None = None,
            tag: str = "") -> None:
        """Cases of template `tmpl` (given the primitive, or `fn`) at inputs of `shapes`, one per dtype;
        `extra` arguments follow (callables are called with (dtype, rng)); `fix` adjusts the inputs."""
        f = tmpl(self.fn if fn is None else fn)
        for dt in dtypes:
            if dt not in self.dtypes and not (dt == "mixed" and "float32" in self.dtypes):
                continue
            args = _sample(dom_key or self.key, shapes, dt, self.rng)
            if fix is not None:
                args = tuple(fix(*args))
            args += tuple(e(dt, self.rng) if callable(e) else e for e in extra)
            name = f"{self.key}[{f.__name__}{tag},{_shape_id(shapes)},{dt}]"
            n = sum(1 for c in self.cases if c.name.startswith(name[:-1]))
            if n:
                name = f"{name[:-1]}#{n + 1}]"
            self.cases.append(RuleCase(self.key, name, f, args, kind))

    def weights(self, shape: tuple) -> Callable:
        return lambda dt, rng: rng.uniform(-1, 1, size=shape).astype(dt)

    def add_expr(self, src: str, specs: tuple, opts: dict | None = None) -> None:
        """Cases of a rule's declared `cases` entry: `src` calls the primitive as `fn` with
        arguments x, y, z, w drawn from `specs` (shapes, or kinds: see `_special_arg`)."""
        opts = dict(opts or {})
        dtypes = opts.pop("dtypes", ("float64", "float32"))
        label = opts.pop("name", "expr")
        make = _t_expr(src, len(specs), label)
        f = make(opts.pop("fn", self.fn))
        dom_key = opts.pop("dom", None) or self.key
        kind = opts.pop("kind", "grad")
        rtol, atol = opts.pop("rtol", None), opts.pop("atol", None)
        if opts:
            raise TypeError(f"{self.key}: unknown case options {sorted(opts)}")
        for dt in dtypes:
            if dt not in self.dtypes:
                continue
            shapes = [sp for sp in specs if not (isinstance(sp, tuple) and sp and isinstance(sp[0], str))]
            drawn = iter(_sample(dom_key, tuple(shapes), dt, self.rng))
            args = tuple(_special_arg(sp, dt, self.rng) if isinstance(sp, tuple) and sp and isinstance(sp[0], str)
                         else next(drawn) for sp in specs)
            short = " ".join(src.split())[:60].replace("[", "(").replace("]", ")").replace(",", ";")
            name = f"{self.key}[{label}:{short},{','.join(_spec_id(sp) for sp in specs)},{dt}]"
            n = sum(1 for c in self.cases if c.name.startswith(name[:-1]))
            if n:
                name = f"{name[:-1]}#{n + 1}]"
            self.cases.append(RuleCase(self.key, name, f, args, kind, rtol, atol, expected_keys(self.rule)))


def rule_cases(key: str, dtypes: Iterable[str] = ("float64", "float32"), seed: int = 0) -> list[RuleCase]:
    """The test functions and inputs `check_rule` runs for rule `key`."""
    from . import runtime as _rt
    from .rules.internal import _and, _dim, _or

    b = _Builder(key, tuple(dtypes), seed)
    rule, fn, short = b.rule, b.fn, key.split(".")[-1]
    part_of = getattr(rule, "part_of", None)
    if part_of:
        # one element of a function returning a tuple: the cases of that function that use it
        cases = [c for c in rule_cases(part_of, dtypes, seed) if key in c.keys()]
        if not cases:
            raise KeyError(f"check_rule: no case of {part_of} uses {key}")
        return cases
    for entry in rule.cases:
        b.add_expr(entry[0], entry[1], entry[2] if len(entry) > 2 else None)
    for entry in rule.cases:  # the same calls with their arguments passed by keyword (float64)
        special = getattr(rule, "unpack_first", None) or getattr(rule, "inplace_arg", None) is not None
        src = None if special else keyword_form(entry[0], fn)
        if src is not None:
            opts = dict(entry[2]) if len(entry) > 2 and entry[2] else {}
            opts.update(dtypes=("float64",), name="kw")
            b.add_expr(src, entry[1], opts)
    declared = len(b.cases)
    mod = key.split(".")[0] if "." in key else ""
    ALL = ("float64", "float32")
    is_ufunc = isinstance(fn, np.ufunc)

    if key.startswith("zymo.rt."):
        _runtime_cases(b, key.split(".")[-1])
    elif key == "zymo.dim":
        b.add(_t_dim, ((3, 4),), ALL, fn=_dim)
        b.add(_t_dim_syntax, ((5,),), ALL)
    elif key in ("zymo.or", "zymo.and"):
        b.add(_t_bool_zero, _SCALAR * 2, kind="zero", fn=_or if key == "zymo.or" else _and)
        b.add(_t_bool_const, _SCALAR * 2, fn=_or if key == "zymo.or" else _and)
        if key == "zymo.and":
            b.add(_t_chain_cmp, _SCALAR * 2)
        b.add(_t_break_continue, ((6,),), extra=(0.9,))
    elif key in ("is", "is_not"):
        b.add(_t_zero2, _SCALAR * 2, kind="zero")
        b.add(_t_const2, _SCALAR * 2)
    elif key == "not":
        b.add(_t_not_zero, _SCALAR * 2, kind="zero", dom_key="lt")
        b.add(_t_not_const, _SCALAR * 2, dom_key="lt")
        b.add(_t_not_syntax, _SCALAR * 2, dom_key="lt")
    elif key in ("lt", "le", "gt", "ge", "eq", "ne"):
        b.add(_t_zero2, _SCALAR * 2, kind="zero")
        b.add(_t_const2, _SCALAR * 2)
        b.add(_t_branch2, _SCALAR * 2)
        b.add(_t_zero2, ((5,), (5,)), ALL, kind="zero")
        b.add(_t_const2, ((5,), (5,)), ALL)
        b.add(_t_const2, ((3, 4), (3, 4)), ALL)
    elif key == "floordiv":
        b.add(_t_zero2, _SCALAR * 2, kind="zero")
        b.add(_t_const2, _SCALAR * 2)
        b.add(_t_const2, ((5,), (5,)), ALL)
    elif key == "builtins.print":
        b.add(_t_printed, _SCALAR, ALL)
        b.add(_t_printed, ((3,),), ALL)
    elif key == "builtins.len":
        b.add(_t_len_list, _SCALAR, extra=([1.0, 2.0, 3.0],))
    elif key == "builtins.float":
        b.add(_t_float32, _SCALAR, ("float32",))
    elif key in ("builtins.int", "builtins.bool", "builtins.round"):
        b.add(_t_zero1, _SCALAR, kind="zero")
        b.add(_t_const1, _SCALAR)
    elif key in ("builtins.min", "builtins.max"):
        b.add(_t_call2, _SCALAR * 2, ALL, fix=_ascending, tag=",x<y")
        b.add(_t_call2, _SCALAR * 2, ALL, fix=_descending, tag=",x>y")
        b.add(_t_loop2, _SCALAR * 2)
    elif key == "builtins.abs":
        b.add(_t_call1, _SCALAR, ALL, fix=_positive, tag=",x>0")
        b.add(_t_call1, _SCALAR, ALL, fix=_negative, tag=",x<0")
    elif key in ("numpy.shape",):
        b.add(_t_shape_const, ((3, 4),), ALL)
        b.add(_t_shape_zero, ((3, 4),), kind="zero")
    elif key in ("numpy.ndim", "numpy.size"):
        b.add(_t_const1, ((3, 4),), ALL)
        b.add(_t_zero1, ((3, 4),), kind="zero")
    elif key in ("numpy.argmax", "numpy.argmin"):
        b.add(_t_pick, ((6,),), ALL)
        b.add(_t_zero1, ((6,),), kind="zero")
    elif key in ("numpy.sum", "numpy.mean"):
        for s in _ARRAY_SHAPES + [(2, 3, 4)]:
            b.add(_t_red_all, (s,), ALL)
            b.add(_t_red_axis0, (s,), ALL)
            b.add(_t_red_last_keep, (s,), ALL)
            b.add(_t_red_all_keep, (s,), ALL)
        for s in [(3, 4), (2, 3, 4)]:
            b.add(_t_red_axis1, (s,), ALL)
            b.add(_t_red_chain, (s,), ALL)
        b.add(_t_red_axes02, ((2, 3, 4),), ALL)
        b.add(_t_sum_method if key == "numpy.sum" else _t_mean_method, ((3, 4),), ALL)
        if key == "numpy.sum":
            b.add(_t_sum_builtin, ((3, 4),), ALL)
    elif key in ("numpy.max", "numpy.min", "numpy.amax", "numpy.amin"):
        for s in _ARRAY_SHAPES + [(2, 3, 4)]:
            b.add(_t_red_all, (s,), ALL)
            b.add(_t_red_axis0, (s,), ALL)
            b.add(_t_red_last_keep, (s,), ALL)
            b.add(_t_red_all_keep, (s,), ALL)
        b.add(_t_red_axis1, ((3, 4),), ALL)
        b.add(_t_red_axes02, ((2, 3, 4),), ALL)
        if short in ("max", "min"):
            b.add(_t_max_method if short == "max" else _t_min_method, ((3, 4),), ALL)
            b.add(_t_call1, ((5,),), ALL, fn=max if short == "max" else min, tag=",builtin")
    elif key == "zymo.trip":
        b.add(_t_trip, ((5,),), ALL, fn=_rt.trip)
        b.add(_t_after_loop, ((5,),), ALL)
    elif key in ("zymo.fdiv", "zymo.fpow"):
        fn = _rt.fdiv if key == "zymo.fdiv" else _rt.fpow
        for p in [((), ()), ((5,), (5,)), ((3, 4), (4,))]:
            b.add(_t_call2, p, ALL, fn=fn)
        b.add(_t_loop2, ((), ()), ALL, fn=fn)
    elif key == "zymo.span":
        b.add(_t_span, ((5,),), ALL, fn=_rt.span)
    elif key == "zymo.check_bound":
        b.add(_t_after_loop, ((5,),), ALL)
    elif key in ("numpy.matmul", "matmul", "numpy.dot"):
        pairs = [((3, 4), (4, 2)), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 3))]
        if key != "numpy.dot":
            pairs += [((2, 3, 4), (4, 2)), ((2, 3, 4), (2, 4, 5)), ((3, 4), (2, 4, 5))]
        else:
            pairs += [((), (4,)), ((3, 4), ())]
        for p in pairs:
            b.add(_t_call2, p, ALL)
        b.add(_t_call2, ((3, 4), (4,)), ("mixed",))
        b.add(_t_self2, ((3, 3),), ALL)
        b.add(_t_self2, ((4,),), ALL)
        if rule.out:
            b.add(_t_outmat, ((3, 4), (4, 2)), ALL)
    elif key == "numpy.copy":
        for s in _ARRAY_SHAPES:
            b.add(_t_call1, (s,), ALL)
        b.add(_t_copy_write, ((5,),), ALL)
    elif key == "numpy.transpose":
        b.add(_t_view, ((3, 4),), ALL, extra=(b.weights((4, 3)),))
        b.add(_t_view_write, ((3, 4),), ALL, extra=(b.weights((3, 4)),))
        b.add(_t_transpose_axes, ((2, 3, 4),), ALL, extra=(b.weights((3, 2, 4)),))
        b.add(_t_transpose_attr, ((3, 4),), ALL, extra=(b.weights((4, 3)),))
    elif key == "numpy.reshape":
        b.add(_t_reshape_flat, ((3, 4),), ALL, extra=(b.weights((12,)),))
        b.add(_t_reshape_infer, ((3, 4),), ALL, extra=(b.weights((2, 6)),))
        b.add(_t_reshape_method, ((3, 4),), ALL, extra=(b.weights((4, 3)),))
        b.add(_t_reshape_write, ((3, 4),), ALL, extra=(b.weights((3, 4)),))
    elif key in ("numpy.zeros", "numpy.ones", "numpy.empty"):
        b.add(_t_new_n, ((5,),), ALL)
        b.add(_t_new_2d, ((4,),), ALL)
        if key != "numpy.empty":
            b.add(_t_new_n_partial, ((5,),), ALL)
            b.add(_t_new_dtype, ((5,),), ALL)
    elif key == "numpy.full":
        b.add(_t_full, ((5,),), ALL)
    elif key in ("numpy.zeros_like", "numpy.ones_like", "numpy.empty_like"):
        b.add(_t_like, ((5,),), ALL)
        if key != "numpy.empty_like":
            b.add(_t_like_partial, ((5,),), ALL)
    elif key == "numpy.arange":
        b.add(_t_arange, ((3,),), ALL)
    elif declared and (rule.nondiff or not getattr(rule, "auto_cases", True)
                       or not (rule.elementwise or is_ufunc or mod == "math")):
        pass  # the rule's own cases say everything
    elif rule.nondiff and is_ufunc and fn.nin == 2:
        for p in [((), ()), ((5,), (5,))]:
            b.add(_t_zero2, p, ALL, kind="zero", dom_key="lt")
            b.add(_t_const2, p, ALL, dom_key="lt")
    elif rule.nondiff and not declared:
        # floor, ceil, trunc, sign, isfinite, isnan and the like: one argument
        shapes = _SCALAR if (mod == "math" or not is_ufunc) else _UNARY_SHAPES
        for s in shapes:
            dts = ("float64",) if mod == "math" else ALL
            b.add(_t_zero1, (s,), dts, kind="zero")
            b.add(_t_const1, (s,), dts)
    elif rule.elementwise or is_ufunc or mod == "math":
        nparams = len(rule.signature().parameters)
        scalar_only = mod in ("math", "builtins")
        dts = ("float64",) if mod == "math" else ALL
        if nparams == 1:
            for s in (_SCALAR if scalar_only else _UNARY_SHAPES):
                b.add(_t_call1, (s,), dts)
            for s in (_SCALAR if scalar_only else [(), (5,)]):
                b.add(_t_loop1, (s,), dts)
            if rule.out:
                for s in _ARRAY_SHAPES:
                    b.add(_t_out1, (s,), ALL)
                    b.add(_t_inplace1, (s,), ALL)
        elif nparams == 2:
            for p in ([((), ())] if scalar_only else _BINARY_SHAPES):
                b.add(_t_call2, p, dts)
            for p in ([((), ())] if scalar_only else [((), ()), ((5,), (5,))]):
                b.add(_t_loop2, p, dts)
            if not scalar_only:
                for p in [((5,), (5,)), ((3, 4), (4,)), ((), (5,))]:
                    b.add(_t_call2, p, ("mixed",))
            if key not in SEPARATED and short not in SEPARATED:
                for s in (_SCALAR if scalar_only else [(), (5,)]):
                    # x / x: its terms grow like 1 / x and cancel, so keep x away from zero
                    b.add(_t_self2, (s,), dts, dom_key="abs" if short in ("truediv", "divide") else None)
            if short in ("pow", "power"):
                for s in (_SCALAR if scalar_only else [(), (5,)]):
                    b.add(_t_pow_int, (s,), dts, dom_key="sin")
            if rule.out:
                for p in [((5,), (5,)), ((3, 4), (4,)), ((3, 4), ())]:
                    b.add(_t_out2, p, ALL)
                    b.add(_t_inplace2, p, ALL)
                b.add(_t_inplace2_rhs, ((5,), (5,)), ALL)
        elif not declared:
            raise KeyError(f"check_rule: no test cases for {key} ({nparams} parameters); add them to zymo.testing")
    elif not declared:
        raise KeyError(f"check_rule: no test cases for {key}; add them to zymo.testing.rule_cases")
    if not b.cases:
        raise KeyError(f"check_rule: no test cases for {key} with dtypes {tuple(dtypes)}")
    return b.cases


def check_custom_rule(f: Any, *args: Any, modes: Any = ("forward", "reverse"), **kw: Any) -> GradCheck:
    """Check a `zymo.custom_rule` (or any function zymo has a rule for) at `args` as built-in rules are
    checked: `check_grad` of a function that calls it (forward and reverse against finite differences,
    forward against reverse, the primal). Call it at several shapes and dtypes; `kw` goes to check_grad."""
    from .rules.registry import rule_for_callable

    if rule_for_callable(f) is None:
        raise KeyError(f"check_custom_rule: zymo has no rule for {f!r}")
    label = "call_" + "".join(ch if ch.isalnum() else "_" for ch in getattr(f, "__name__", "f"))
    src = "fn(" + ", ".join(_EXPR_ARGS[k] if k < len(_EXPR_ARGS) else f"a{k}" for k in range(len(args))) + ")"
    if len(args) > len(_EXPR_ARGS):
        raise ValueError("check_custom_rule: at most four arguments")
    g = _t_expr(src, len(args), label)(f)
    return check_grad(g, *args, modes=modes, name=kw.pop("name", getattr(f, "__qualname__", label)), **kw)


def check_rule(key: str, modes: Any = ("forward", "reverse"), dtypes: Iterable[str] = ("float64", "float32"),
               seed: int = 0) -> list[RuleCase]:
    """Run every case of `rule_cases(key)` in `modes`; raise one AssertionError listing the failures."""
    cases = rule_cases(key, dtypes, seed)
    failures = []
    for case in cases:
        try:
            case.run(modes, seed)
        except AssertionError as e:
            failures.append(f"- {case.name}: {e}")
        except Exception as e:  # a crash in zymo is a failure of the rule's check too
            failures.append(f"- {case.name}: {type(e).__name__}: {e}")
    if failures:
        raise AssertionError(f"check_rule({key!r}): {len(failures)} of {len(cases)} cases failed\n"
                             + "\n".join(failures))
    return cases



# -- the runtime helpers' rules (forward over reverse differentiates generated code) -------


def _t_rt2(fn):
    def rt2(g, x):
        return fn(g, x) * 1.5
    return rt2


def _t_rt_matrix(fn):
    def rt_matrix(g, a, b):
        return fn(g, a, b)
    return rt_matrix


def _t_rt_expand(axis, keepdims):
    def factory(fn):
        def rt_expand(g, x):
            return fn(g, x, axis, keepdims) * x
        return rt_expand
    return factory


def _t_rt_grow(fn):
    def rt_grow(buf):
        big = fn(buf, 0)
        return big[:buf.shape[0]] * buf
    return rt_grow


def _t_rt_grow_stack(fn):
    def rt_grow_stack(buf):
        big = fn(buf, buf[0], 0)
        return big[:buf.shape[0]] * buf
    return rt_grow_stack


def _t_rt_count(fn):
    def rt_count(x):
        return fn(x, np.sum(x, axis=0)) * 1.0 + x[0]
    return rt_count


def _t_rt_mask(fn):
    def rt_mask(x):
        return fn(x, np.max(x), None, False)
    return rt_mask


def _t_rt_mask_const(fn):
    def rt_mask_const(x):
        return np.sum(fn(x, np.max(x), None, False) * x)
    return rt_mask_const


def _t_rt_view(fn):
    def rt_view(x):
        return float(fn(x, x[1:])) * 1.0 + x[0]
    return rt_view


def _runtime_cases(b: _Builder, short: str) -> None:
    ALL = ("float64", "float32")
    if short == "unbroadcast":
        for shapes in (((3, 4), (4,)), ((3, 4), (3, 1)), ((3, 4), (3, 4)), ((5,), ()), ((), ())):
            b.add(_t_rt2, shapes, ALL, dom_key="numpy.add")
    elif short in ("as_shape", "as_tangent"):
        for shapes in (((4,), (3, 4)), ((3, 4), (3, 4)), ((), (5,))):
            b.add(_t_rt2, shapes, ALL, dom_key="numpy.add")
    elif short == "expand_reduced":
        b.add(_t_rt_expand(1, False), ((3,), (3, 4)), ALL, dom_key="numpy.add", tag=",axis1")
        b.add(_t_rt_expand(1, True), ((3, 1), (3, 4)), ALL, dom_key="numpy.add", tag=",keepdims")
        b.add(_t_rt_expand(None, False), ((), (3, 4)), ALL, dom_key="numpy.add", tag=",all")
    elif short in ("matmul_vjp_a", "matmul_vjp_b", "dot_vjp_a", "dot_vjp_b"):
        for shapes in (((3, 2), (3, 4), (4, 2)), ((3,), (3, 4), (4,)), ((2,), (4,), (4, 2)), ((), (4,), (4,))):
            b.add(_t_rt_matrix, shapes, ALL, dom_key="numpy.add")
    elif short == "grow":
        b.add(_t_rt_grow, ((5,),), ALL, dom_key="numpy.add")
    elif short == "grow_stack":
        b.add(_t_rt_grow_stack, ((2, 3),), ALL, dom_key="numpy.add")
    elif short == "reduced_count":
        b.add(_t_rt_count, ((3, 4),), ALL, dom_key="numpy.add")
    elif short == "extreme_mask":
        b.add(_t_rt_mask, ((5,),), ALL, kind="zero", dom_key="numpy.add")
        b.add(_t_rt_mask_const, ((5,),), ALL, dom_key="numpy.add")
    elif short == "is_view":
        b.add(_t_rt_view, ((5,),), ALL, dom_key="numpy.add")
    elif not b.cases:  # the helpers of issue 7's rules declare their cases on the rule
        raise KeyError(f"no test cases for runtime rule {short}")
