"""`check_grad`: zymo's derivatives of one function against finite differences.

Contract: see `zymo.testing` (the package's docstring states what is checked, with which
directions, weights and tolerances). The derivative checked is that of the map
F: initial values of the differentiated arguments -> (f's result, final values of the
differentiated arguments zymo passes by reference). `check_grad` returns a `GradCheck` with
what it computed, raises `AssertionError` naming the function, the argument, the check and
both values on a mismatch, and `FiniteDifferenceError` (an AssertionError) where finite
differences disagree with zymo but do not converge at that point themselves (no verdict).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
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
    _is_float_scalar,
    _is_memory,
    _leaves,
    _maxabs,
    _mode_names,
    _replace,
    _weighted_sum,
)


@dataclass
class GradCheck:
    """What `check_grad` computed.

    Vectors are float64 and flat: an argument's floats and float arrays in depth-first
    order, and F's values (f's result, then the final values of the arguments passed by
    reference, in argument order) likewise. `directions[(k, j)]` is direction `j` of
    argument `k`; `fd[(k, j)]` the finite difference of F along it and `fd_error[(k, j)]`
    a bound on its error (elementwise); `forward[(k, j)]` zymo's tangent of F (`k` is None
    for all arguments seeded together with their direction 0); `weight` the cotangent w of
    F; `result_size` the number of F's values that are f's result (they come first);
    `weight_of_result` the weight's part on f's result (`1` for a float result);
    `cotangents[k]` the shadow argument `k` was passed in reverse mode (None for one
    passed Active or Const); `reverse[k]` zymo's `J^T w` for argument `k` as zymo
    returns it (the shadow after the call, or the derivative of an Active argument; None
    for arguments not differentiated).
    """

    primal: Any
    weight: Any
    result_size: int
    weight_of_result: Any
    directions: dict = field(default_factory=dict)
    fd: dict = field(default_factory=dict)
    fd_error: dict = field(default_factory=dict)
    forward: dict = field(default_factory=dict)
    cotangents: list = field(default_factory=list)
    reverse: list = field(default_factory=list)


class FiniteDifferenceError(AssertionError):
    """zymo and finite differences disagree, but finite differences do not converge at this
    point (a jump or a kink within the step, or curvature too strong for it): no verdict."""


class _Flat:
    """The floats and float arrays of one tree as one float64 vector: `vector(tree)` reads a
    tree of that structure, `tree(vec, base, native)` writes a vector into `base`."""

    def __init__(self, like: Any):
        self.paths = _leaves(like)
        self.sizes = [int(np.size(leaf)) for _, leaf in self.paths]
        self.size = sum(self.sizes)

    def vector(self, tree: Any, what: str) -> np.ndarray:
        parts = []
        for (path, leaf), n in zip(self.paths, self.sizes):
            v = tree
            for i in path:
                v = None if v is None else v[i]
            if v is None:
                parts.append(np.zeros(n))
                continue
            v = np.asarray(v, dtype=np.float64)
            if v.shape != np.shape(leaf):
                if not (v.ndim == 0 and float(v) == 0.0):  # a constant result: tangent 0.0
                    raise AssertionError(f"{what} has shape {v.shape}, the value has shape {np.shape(leaf)}")
                v = np.broadcast_to(v, np.shape(leaf))
            parts.append(v.ravel())
        return np.concatenate(parts) if parts else np.zeros(0)

    def tree(self, vec: np.ndarray, base: Any, native: bool) -> Any:
        """`base` with its leaves replaced by `vec`: in the leaves' own types and layouts
        (`native`), else as Python floats and float64 arrays."""
        out, at = base, 0
        for (path, leaf), n in zip(self.paths, self.sizes):
            part = vec[at:at + n]
            at += n
            if isinstance(leaf, np.ndarray):
                value = np.empty_like(leaf, dtype=leaf.dtype if native else np.float64)  # the primal's layout
                value[...] = part.reshape(leaf.shape)
            else:
                value = type(leaf)(part[0]) if native else float(part[0])
            out = _replace(out, path, value)
        return out


def _fd(evaluate: Callable[[float], np.ndarray], h: float) -> tuple[np.ndarray, np.ndarray]:
    """Central differences of `evaluate(t)` (F at x + t u) at steps h, h/2, h/4, Richardson-
    extrapolated twice: (the finer estimate, a bound on its error: |coarse - fine|, or inf
    where the differences do not converge like h^2, i.e. a jump or kink within the step)."""
    ys = []

    def at(t: float) -> np.ndarray:
        y = evaluate(t)
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
               wrt: Iterable[int] | None = None, const: Iterable[int] = (),
               cotangents: Sequence | None = None, name: str | None = None) -> GradCheck:
    """Check zymo's derivatives of `f` at `args` (see `zymo.testing`).

    `eps` is the finite-difference step relative to max(1, max |x|); `wrt` the
    indices of the arguments to differentiate (default: every argument holding
    floats: a float, a float array, or a tuple or list of them); `const` indices of
    arguments not to differentiate (passed `Const`); `directions` the number of random
    directions per argument; `cotangents[k]` the cotangent of the final value of
    argument `k` passed by reference (the shadow reverse mode starts from; None or
    absent: random); `seed` seeds the random draws; `name` what messages call `f`.
    """
    check = _GradChecker(f, args, modes, rtol, atol, eps, seed, directions, wrt, const, name)
    check.finite_differences()
    check.draw_weights(cotangents)
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
                 eps: float, seed: int, directions: int, wrt: Iterable[int] | None, const: Iterable[int],
                 name: str | None):
        self.modes = _mode_names(modes)
        self.f, self.args, self.eps, self.ndir = f, args, eps, directions
        self.fname = name or _fname(f)
        self.rng = np.random.default_rng(seed)
        n = self.n = len(args)
        self.names = _arg_names(f, n)
        const = set(const)
        diff = [k for k in range(n) if _leaves(args[k]) and k not in const]
        if wrt is not None:
            wrt = list(wrt)
            for k in wrt:
                if not 0 <= k < n or not _leaves(args[k]):
                    raise ValueError(f"check_grad: argument {k} holds no float or float array")
            diff = [k for k in diff if k in wrt]
        if not diff:
            raise ValueError(f"check_grad({self.fname}): no float or float-array argument to differentiate")
        self.diff = diff
        self.memory = [k for k in diff if _is_memory(args[k])]  # their final values are part of F
        self.flats = {k: _Flat(args[k]) for k in diff}
        self.dtype = "float32" if any(_dtype_of(leaf) == "float32" for k in diff
                                      for _, leaf in _leaves(args[k])) else "float64"
        d_rtol, d_atol, self.ad_rtol, self.p_rtol = TOLERANCES[self.dtype]
        self.rtol = d_rtol if rtol is None else rtol
        self.atol = d_atol if atol is None else atol
        self.primal()

    def primal(self) -> None:
        """f's result natively, and the shape of F."""
        after = [_copy(a) for a in self.args]
        y0 = self.f(*after)
        self.with_result = bool(_leaves(y0))
        if not (self.with_result or self.memory):
            raise TypeError(f"check_grad({self.fname}): f must return a float or a float array (or a tuple of "
                            f"them), or take an array it may write to, not return {type(y0).__name__}")
        self.y0 = y0
        self.result = _Flat(y0 if self.with_result else None)
        self.out = _Flat(self.outputs(y0, after))
        self.args64 = [_as64(a) for a in self.args]
        self.out_dtype = y0.dtype if isinstance(y0, (np.ndarray, np.floating)) else np.dtype(np.float64)
        # the weight of f's result: 1 for a float, random for an array, none for a tuple
        # (whose reverse mode is not checked)
        if _is_float_scalar(y0):
            v: Any = np.float64(1.0)
        elif isinstance(y0, np.ndarray):
            v = self.rng.uniform(-1.0, 1.0, size=y0.shape)
        else:
            v = None
        self.reverse_result = v is not None
        self.res = GradCheck(primal=y0, weight=None, result_size=self.result.size, weight_of_result=v,
                             cotangents=[None] * self.n, reverse=[None] * self.n)

    def outputs(self, result: Any, final: Sequence) -> tuple:
        """F's value as a tree: (f's result, the final values of the arguments passed by reference)."""
        return (result if self.with_result else None, tuple(final[k] for k in self.memory))

    def draw_weights(self, cotangents: Sequence | None) -> None:
        """The cotangent w of F: its part on f's result (drawn with the primal) and on the
        final values (random unless given; drawn after the directions)."""
        res, cots = self.res, list(cotangents) if cotangents is not None else []
        parts = [self.result.vector(res.weight_of_result, "the weight") if self.with_result else np.zeros(0)]
        for k in self.memory:
            c = cots[k] if k < len(cots) else None
            parts.append(self.flats[k].vector(c, f"cotangent {k}") if c is not None
                         else self.rng.uniform(-1.0, 1.0, size=self.flats[k].size))
        res.weight = np.concatenate(parts)

    def native(self, k: int, u: np.ndarray, base: Any = None) -> Any:
        """Vector `u` as a shadow of argument `k` (its types and layouts; other values zero)."""
        import zymo

        return self.flats[k].tree(u, zymo.make_zero(_copy(self.args[k])) if base is None else base, True)

    def finite_differences(self) -> None:
        res, rng = self.res, self.rng
        for k in self.diff:
            flat = self.flats[k]
            x = flat.vector(self.args64[k], "argument")
            h = self.eps * max(1.0, _maxabs(x))
            for j in range(self.ndir):
                u = rng.uniform(-1.0, 1.0, size=flat.size)
                u = flat.vector(self.native(k, u), "direction")  # representable in the argument's dtypes
                res.directions[(k, j)] = u

                def evaluate(t: float, k: int = k, u: np.ndarray = u, x: np.ndarray = x) -> np.ndarray:
                    a = [_copy(b) for b in self.args64]
                    a[k] = self.flats[k].tree(x + t * u, a[k], False)
                    return self.out.vector(self.outputs(self.f(*a), a), "f's result")

                res.fd[(k, j)], res.fd_error[(k, j)] = _fd(evaluate, h)

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
        """Each argument along each direction, then all together along their direction 0;
        arguments passed by reference and not seeded get a zero tangent (their final
        values are part of F), others are passed `Const`."""
        import zymo
        from zymo import Const, Duplicated, ForwardWithPrimal

        res, diff = self.res, self.diff
        plans: list[tuple[int | None, dict[int, Any]]] = [
            (k, {k: res.directions[(k, j)]}) for k in diff for j in range(self.ndir)]
        if len(diff) > 1:
            plans.append((None, {k: res.directions[(k, 0)] for k in diff}))
        for k, seeds in plans:
            ann, shadows = [], {}
            for i, a in enumerate(self.args):
                if i in seeds or i in self.memory:
                    shadows[i] = self.native(i, seeds[i] if i in seeds else np.zeros(self.flats[i].size))
                    ann.append(Duplicated(_copy(a), shadows[i]))
                else:
                    ann.append(Const(_copy(a)))
            got = zymo.autodiff(ForwardWithPrimal, self.f, Duplicated if self.with_result else Const, *ann)
            tangent = got[0] if self.with_result else None
            if self.with_result:
                self.check_primal(self.result.vector(got[1], "the primal"), self.result.vector(self.y0, "f's result"),
                                  "forward mode")
            if isinstance(tangent, (np.ndarray, np.floating)) and np.asarray(tangent).dtype != self.out_dtype:
                raise AssertionError(
                    f"check_grad({self.fname}): forward-mode tangent has dtype {np.asarray(tangent).dtype}, "
                    f"the result has dtype {self.out_dtype}")
            where = "all arguments" if k is None else f"argument {k}, {self.names[k]}"
            t = self.out.vector(self.outputs(tangent, shadows),
                                f"check_grad({self.fname}): forward-mode tangent ({where})")
            if k is None:
                ref = sum(res.fd[(i, 0)] for i in diff)
                res.forward[(None, 0)] = t
                ok, err, tol = _close(t, ref, self.rtol, self.atol)
                if not ok:
                    self.fail("forward-mode tangent J u does not match finite differences", None, t, ref, err,
                              tol, _maxabs(sum(res.fd_error[(i, 0)] for i in diff)))
                continue
            j = sum(1 for key in res.forward if key[0] == k)
            res.forward[(k, j)] = t
            ref = res.fd[(k, j)]
            ok, err, tol = _close(t, ref, self.rtol, self.atol)
            if not ok:
                self.fail(f"forward-mode tangent J u (direction {j}) does not match finite differences", k,
                          t, ref, err, tol, _maxabs(res.fd_error[(k, j)]))

    def reverse(self) -> None:
        """All arguments at once: floats `Active`, arguments passed by reference with their
        final values' cotangents as shadows (so adjoints must be *added* to them); an array
        result through `np.sum(f(*args) * v)`."""
        import zymo
        from zymo import Active, Const, Duplicated, ReverseWithPrimal

        res, v = self.res, self.res.weight_of_result
        ann = []
        shadows: dict[int, Any] = {}
        at = self.result.size if self.with_result else 0
        for i, a in enumerate(self.args):
            if i not in self.diff:
                ann.append(Const(_copy(a)))
            elif i in self.memory:
                size = self.flats[i].size
                shadows[i] = self.native(i, res.weight[at:at + size])
                at += size
                res.cotangents[i] = _copy(shadows[i])
                ann.append(Duplicated(_copy(a), shadows[i]))
            else:
                ann.append(Active(_copy(a)))
        extra: tuple = ()
        if not self.reverse_result:
            target, ret = self.f, Const
        elif _is_float_scalar(self.y0):
            target, ret = self.f, Active
        else:
            w = np.asarray(v, dtype=self.out_dtype)
            target, ret, extra = _weighted_sum(self.f, self.n), Active, (Const(w),)
        derivs, primal = zymo.autodiff(ReverseWithPrimal, target, ret, *ann, *extra)
        if not self.reverse_result:
            pass
        elif not extra:
            self.check_primal(primal, self.y0, "reverse mode")
        else:
            y64 = np.asarray(self.y0, np.float64)
            ref_p = float(np.sum(y64 * np.asarray(extra[0].val, np.float64)))
            ok, _, _ = _close(primal, ref_p, self.p_rtol, self.p_rtol * 1e-3, scale=float(np.sum(np.abs(y64))))
            if not ok:
                self.check_primal(primal, ref_p, "reverse mode, np.sum(f(*args) * v)")
        for i in self.diff:
            grad = shadows[i] if i in shadows else derivs[i]
            if grad is None:
                raise AssertionError(f"check_grad({self.fname}): reverse mode returned no derivative for "
                                     f"argument {i} ({self.names[i]})")
            res.reverse[i] = grad
            self.check_adjoint(i, self.flats[i].vector(grad, f"check_grad({self.fname}): the derivative of "
                                                             f"argument {i}"), grad)

    def check_adjoint(self, i: int, g: np.ndarray, grad: Any) -> None:
        """<J^T w, u> against <w, FD(J u)> for each direction u of argument i."""
        res, w = self.res, self.res.weight
        for j in range(self.ndir):
            u = res.directions[(i, j)]
            mine = float(np.sum(g * u))
            fdv = res.fd[(i, j)]
            ref = float(np.sum(w * fdv))
            scale = max(float(np.sum(np.abs(g * u))), float(np.sum(np.abs(w * fdv))))
            ok, err, tol = _close(mine, ref, self.rtol, self.atol, scale=scale)
            if not ok:
                self.fail(f"reverse-mode <J^T w, u> (direction {j}; J^T w = {_fmt(grad)})"
                          " does not match finite differences <w, J u>", i, mine, ref, err, tol,
                          _weighted(w, res.fd_error[(i, j)]))

    def dot_products(self) -> None:
        """Forward against reverse: <u, J^T w> == <J u, w> to rounding."""
        res = self.res
        # rounding in either sweep is relative to the size of the derivative's terms, which
        # may cancel (x / x): measure it against the largest directional derivative of any
        # argument, and against |w| |u| (Jacobian entries of order one)
        wabs = np.abs(res.weight)
        overall = max(float(np.sum(wabs * np.abs(fdv))) for fdv in res.fd.values())
        overall = max([overall] + [float(np.sum(wabs)) * _maxabs(u) for u in res.directions.values()])
        for (k, j), t in res.forward.items():
            if k is None:
                continue
            g = self.flats[k].vector(res.reverse[k], "the derivative")
            u = res.directions[(k, j)]
            lhs = float(np.sum(g * u))
            rhs = float(np.sum(res.weight * t))
            scale = max(float(np.sum(np.abs(g * u))), float(np.sum(wabs * np.abs(t))), overall)
            ok, err, tol = _close(lhs, rhs, self.ad_rtol, 0.0, scale=scale)
            if not ok:
                raise AssertionError(
                    f"check_grad({self.fname}): forward and reverse mode disagree for argument {k} "
                    f"({self.names[k]}), direction {j}:\n"
                    f"  reverse <J^T w, u>: {lhs!r}\n  forward <w, J u>:   {rhs!r}\n"
                    f"  error {err:.3g} > tolerance {tol:.3g}")
