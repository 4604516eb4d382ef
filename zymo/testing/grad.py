"""`check_grad`: zymo's derivatives of one function against finite differences.

Contract: see `zymo.testing` (the package's docstring states what is checked, with which
directions, weights and tolerances). `check_grad` returns a `GradCheck` with what it
computed, raises `AssertionError` naming the function, the argument, the check and both
values on a mismatch, and `FiniteDifferenceError` (an AssertionError) where finite
differences disagree with zymo but do not converge at that point themselves (no verdict).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .support import (
    TOLERANCES,
    _arg_names,
    _as64,
    _close,
    _copy,
    _describe_arg,
    _dtype_of,
    _fmt,
    _fname,
    _is_diff,
    _is_float_scalar,
    _maxabs,
    _mode_names,
    _weighted_sum,
)


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
    """Check zymo's derivatives of `f` at `args` (see `zymo.testing`).

    `eps` is the finite-difference step relative to max(1, max |x|); `wrt` the
    indices of the arguments to differentiate (default: every float and float
    array); `directions` the number of random directions per argument; `name`
    what messages call `f`.
    """
    check = _GradChecker(f, args, modes, rtol, atol, eps, seed, directions, wrt, name)
    check.finite_differences()
    if "forward" in check.modes:
        check.forward()
    if "reverse" in check.modes:
        check.reverse()
    if "forward" in check.modes and "reverse" in check.modes:
        check.dot_products()
    return check.res


class _GradChecker:
    """One `check_grad` call: its arguments, tolerances, random draws and results so far."""

    def __init__(self, f: Callable, args: tuple, modes: Any, rtol: float | None, atol: float | None,
                 eps: float, seed: int, directions: int, wrt: Iterable[int] | None, name: str | None):
        self.modes = _mode_names(modes)
        self.f, self.args, self.eps, self.ndir = f, args, eps, directions
        self.fname = name or _fname(f)
        self.rng = np.random.default_rng(seed)
        n = self.n = len(args)
        self.names = _arg_names(f, n)
        diff = [k for k in range(n) if _is_diff(args[k])]
        if wrt is not None:
            wrt = list(wrt)
            for k in wrt:
                if not 0 <= k < n or not _is_diff(args[k]):
                    raise ValueError(f"check_grad: argument {k} is not a float or a float array")
            diff = [k for k in diff if k in wrt]
        if not diff:
            raise ValueError(f"check_grad({self.fname}): no float or float-array argument to differentiate")
        self.diff = diff
        self.dtype = "float32" if any(_dtype_of(args[k]) == "float32" for k in diff) else "float64"
        d_rtol, d_atol, self.ad_rtol, self.p_rtol = TOLERANCES[self.dtype]
        self.rtol = d_rtol if rtol is None else rtol
        self.atol = d_atol if atol is None else atol
        self.primal()

    def primal(self) -> None:
        """f's result natively and which arrays f writes to; the weight v of the result."""
        args = self.args
        after = [_copy(a) for a in args]
        y0 = self.f(*after)
        self.mutated = {k for k in range(self.n) if isinstance(args[k], np.ndarray)
                        and not np.array_equal(args[k], after[k], equal_nan=True)}
        if isinstance(y0, np.ndarray):
            if y0.dtype.kind != "f":
                raise TypeError(f"check_grad({self.fname}): f returns an array of dtype {y0.dtype}, not floats")
            self.scalar_out = False
        elif _is_float_scalar(y0):
            self.scalar_out = True
        else:
            raise TypeError(f"check_grad({self.fname}): f must return a float or a float array, "
                            f"not {type(y0).__name__}")
        self.y0 = y0
        self.args64 = [_as64(a) for a in args]
        self.out_dtype = y0.dtype if isinstance(y0, (np.ndarray, np.floating)) else np.dtype(np.float64)
        v = np.float64(1.0) if self.scalar_out else self.rng.uniform(-1.0, 1.0, size=y0.shape)
        self.res = GradCheck(primal=y0, weight=v, reverse=[None] * self.n)

    def native(self, a: Any, u: Any) -> Any:
        """Direction `u` (float64) as a shadow of `a`'s type."""
        if isinstance(a, np.ndarray):
            s = np.empty_like(a)  # the primal's layout
            s[...] = u
            return s
        return type(a)(u)

    def finite_differences(self) -> None:
        res, rng = self.res, self.rng
        for k in self.diff:
            h = self.eps * max(1.0, _maxabs(self.args64[k]))
            for j in range(self.ndir):
                a = self.args[k]
                u = rng.uniform(-1.0, 1.0, size=a.shape) if isinstance(a, np.ndarray) else float(rng.uniform(-1, 1))
                u = _as64(self.native(a, u))  # representable in the argument's dtype
                res.directions[(k, j)] = u
                res.fd[(k, j)], res.fd_error[(k, j)] = _fd(self.f, self.args64, k, u, h, self.mutated)

    def fail(self, what: str, k: int | None, mine: Any, ref: Any, err: float, tol: float,
             fd_bound: float = 0.0) -> None:
        who = "all arguments together" if k is None else \
            f"argument {k} ({self.names[k]}, {_describe_arg(self.args[k])})"
        msg = (f"check_grad({self.fname}): {what} with respect to {who}:\n"
               f"  zymo:              {_fmt(mine)}\n"
               f"  {'finite differences:':<18} {_fmt(ref)}\n"
               f"  max abs error {err:.3g} > tolerance {tol:.3g} (rtol={self.rtol:g}, atol={self.atol:g}, "
               f"dtype {self.dtype})")
        if err <= fd_bound:
            why = ("they do not shrink like h^2 as the step h shrinks" if math.isinf(fd_bound) else
                   f"their estimates at steps h and h/2 differ by {fd_bound:.3g}")
            raise FiniteDifferenceError(
                msg + f"\n  but finite differences do not converge here ({why}; h = {self.eps:g} * max(1, |x|)): "
                "a jump or kink within the step, strong curvature or rounding; try another eps or point")
        raise AssertionError(msg)

    def check_primal(self, p: Any, ref: Any, what: str) -> None:
        ok, err, tol = _close(p, ref, self.p_rtol, self.p_rtol * 1e-3)
        if not ok:
            raise AssertionError(
                f"check_grad({self.fname}): the primal result zymo returns ({what}) differs from f(*args):\n"
                f"  zymo:   {_fmt(p)}\n  f:      {_fmt(ref)}\n  max abs error {err:.3g} > tolerance {tol:.3g}")

    def forward(self) -> None:
        """Each argument along each direction, then all together along their direction 0."""
        import zymo
        from zymo import Const, Duplicated, ForwardWithPrimal

        res, diff = self.res, self.diff
        plans: list[tuple[int | None, dict[int, Any]]] = [
            (k, {k: res.directions[(k, j)]}) for k in diff for j in range(self.ndir)]
        if len(diff) > 1:
            plans.append((None, {k: res.directions[(k, 0)] for k in diff}))
        for k, seeds in plans:
            ann = [Duplicated(_copy(a), self.native(a, seeds[i])) if i in seeds else Const(_copy(a))
                   for i, a in enumerate(self.args)]
            tangent, primal = zymo.autodiff(ForwardWithPrimal, self.f, Duplicated, *ann)
            self.check_primal(primal, self.y0, "forward mode")
            if isinstance(tangent, (np.ndarray, np.floating)) and np.asarray(tangent).dtype != self.out_dtype:
                raise AssertionError(
                    f"check_grad({self.fname}): forward-mode tangent has dtype {np.asarray(tangent).dtype}, "
                    f"the result has dtype {self.out_dtype}")
            if k is None:
                ref = sum(res.fd[(i, 0)] for i in diff)
                res.forward[(None, 0)] = tangent
                ok, err, tol = _close(tangent, ref, self.rtol, self.atol)
                if not ok:
                    self.fail("forward-mode tangent J u does not match finite differences", None, tangent, ref, err,
                              tol, _maxabs(sum(res.fd_error[(i, 0)] for i in diff)))
                continue
            j = sum(1 for key in res.forward if key[0] == k)
            res.forward[(k, j)] = tangent
            ref = res.fd[(k, j)]
            if np.shape(tangent) != np.shape(ref) and not (np.ndim(tangent) == 0 and np.ndim(ref) == 0):
                if not (np.ndim(tangent) == 0 and float(tangent) == 0.0):  # a constant result: tangent 0.0
                    raise AssertionError(
                        f"check_grad({self.fname}): forward-mode tangent has shape {np.shape(tangent)}, "
                        f"the result has shape {np.shape(ref)} (argument {k}, {self.names[k]})")
            ok, err, tol = _close(tangent, ref, self.rtol, self.atol)
            if not ok:
                self.fail(f"forward-mode tangent J u (direction {j}) does not match finite differences", k,
                          tangent, ref, err, tol, _maxabs(res.fd_error[(k, j)]))

    def reverse(self) -> None:
        """All arguments at once; an array result through `np.sum(f(*args) * v)`."""
        import zymo
        from zymo import Active, Const, Duplicated, ReverseWithPrimal

        res, v = self.res, self.res.weight
        ann = []
        starts: dict[int, np.ndarray] = {}
        shadows: dict[int, np.ndarray] = {}
        for i, a in enumerate(self.args):
            if i not in self.diff:
                ann.append(Const(_copy(a)))
            elif isinstance(a, np.ndarray):
                # the shadow passed in is the cotangent of the argument's final value: start an
                # array f does not write to at random (so adjoints must be *added*), one it
                # writes to at zero (its final value is not part of the result checked here)
                s0 = np.empty_like(a)  # the primal's layout
                s0[...] = 0.0 if i in self.mutated else self.rng.uniform(-1.0, 1.0, size=a.shape)
                starts[i], shadows[i] = s0, s0.copy(order="K")
                ann.append(Duplicated(_copy(a), shadows[i]))
            else:
                ann.append(Active(a))
        if self.scalar_out:
            target, extra = self.f, ()
        else:
            w = np.asarray(v, dtype=self.out_dtype)
            if w.ndim == 0:
                w = w.reshape(())
            target, extra = _weighted_sum(self.f, self.n), (Const(w),)
        derivs, primal = zymo.autodiff(ReverseWithPrimal, target, Active, *ann, *extra)
        if self.scalar_out:
            self.check_primal(primal, self.y0, "reverse mode")
        else:
            y64 = np.asarray(self.y0, np.float64)
            ref_p = float(np.sum(y64 * np.asarray(extra[0].val, np.float64)))
            ok, _, _ = _close(primal, ref_p, self.p_rtol, self.p_rtol * 1e-3, scale=float(np.sum(np.abs(y64))))
            if not ok:
                self.check_primal(primal, ref_p, "reverse mode, np.sum(f(*args) * v)")
        for i in self.diff:
            if i in shadows:
                g = shadows[i].astype(np.float64) - starts[i].astype(np.float64)
                grad = shadows[i] - starts[i]
            else:
                grad = derivs[i]
                if grad is None:
                    raise AssertionError(f"check_grad({self.fname}): reverse mode returned no derivative for "
                                         f"argument {i} ({self.names[i]})")
                g = float(grad)
            res.reverse[i] = grad
            self.check_adjoint(i, g, grad)

    def check_adjoint(self, i: int, g: Any, grad: Any) -> None:
        """<J^T v, u> against <v, FD(J u)> for each direction u of argument i."""
        res, v = self.res, self.res.weight
        for j in range(self.ndir):
            u = res.directions[(i, j)]
            mine = float(np.sum(g * u))
            fdv = res.fd[(i, j)]
            ref = float(np.sum(np.asarray(v) * fdv))
            scale = max(float(np.sum(np.abs(g * u))), float(np.sum(np.abs(np.asarray(v) * fdv))))
            ok, err, tol = _close(mine, ref, self.rtol, self.atol, scale=scale)
            if not ok:
                self.fail(f"reverse-mode <J^T v, u> (direction {j}; J^T v = {_fmt(grad)})"
                          " does not match finite differences <v, J u>", i, mine, ref, err, tol,
                          _weighted(v, res.fd_error[(i, j)]))

    def dot_products(self) -> None:
        """Forward against reverse: <u, J^T v> == <J u, v> to rounding."""
        res = self.res
        # rounding in either sweep is relative to the size of the derivative's terms, which
        # may cancel (x / x): measure it against the largest directional derivative of any
        # argument, and against |v| |u| (Jacobian entries of order one)
        vabs = np.abs(np.asarray(res.weight, dtype=np.float64))
        overall = max(float(np.sum(vabs * np.abs(fdv))) for fdv in res.fd.values())
        overall = max([overall] + [float(np.sum(vabs)) * _maxabs(u) for u in res.directions.values()])
        for (k, j), tangent in res.forward.items():
            if k is None:
                continue
            g = np.asarray(res.reverse[k], dtype=np.float64)
            u = res.directions[(k, j)]
            lhs = float(np.sum(g * u))
            t = np.asarray(tangent, dtype=np.float64)
            rhs = float(np.sum(np.asarray(res.weight) * t))
            scale = max(float(np.sum(np.abs(g * u))), float(np.sum(vabs * np.abs(t))), overall)
            ok, err, tol = _close(lhs, rhs, self.ad_rtol, 0.0, scale=scale)
            if not ok:
                raise AssertionError(
                    f"check_grad({self.fname}): forward and reverse mode disagree for argument {k} "
                    f"({self.names[k]}), direction {j}:\n"
                    f"  reverse <J^T v, u>: {lhs!r}\n  forward <v, J u>:   {rhs!r}\n"
                    f"  error {err:.3g} > tolerance {tol:.3g}")
