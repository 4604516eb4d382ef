"""Sparse Jacobians and Hessians: detection, coloring, compressed passes, recovery.

Contract:
- `plan_jacobian(f, x, *consts, detect=..., direction=None)` detects the pattern of
  `d f(x, *consts) / d x` (`detect.py`), colors its columns and its rows (`coloring.py`)
  and keeps the cheaper: forward mode with one tangent per column color, or reverse mode
  with one cotangent per row color (`direction` forces one; a tie keeps forward). The
  returned `JacobianPlan` holds pattern and colors and is reused for any `x` of the same
  shape that takes the same branches (all of them when `detect` was global).
- `jacobian_from_plan(plan, f, x, *consts)` runs the compressed passes (batched forward
  `BatchDuplicated` lanes, or batched reverse pulls, `chunk` lanes per call) and returns the
  Jacobian as a `scipy.sparse.csr_matrix` of shape `(y.size, x.size)` (C order of both).
- `plan_hessian` / `hessian_from_plan`: the same for the Hessian of a scalar `f`, with a
  star coloring of the symmetric pattern and hvps (forward over reverse, one lane per
  color) and symmetric recovery: a CSR of shape `(x.size, x.size)`.
- `detect`: "global" (valid at every x; raises `UnsupportedSyntax` at the user's line when
  the program cannot be bounded), "local" (exact for the branches taken at this x, valid
  only for inputs that take the same branches), or "auto" (global, else local with a
  `ZymoWarning` that says why).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..annotations import BatchDuplicated, Const, Duplicated, ForwardWithPrimal, Reverse
from ..draws import next_pass
from ..errors import UnsupportedSyntax, ZymoUsageError, ZymoWarning
from . import coloring as C
from .detect import hessian_pattern, jacobian_pattern
from .memory import DetectionFailed

DETECT = ("auto", "global", "local")


@dataclass
class JacobianPlan:
    pattern: sp.csr_matrix  # (y.size, x.size), boolean
    colors: np.ndarray  # column colors (forward) or row colors (reverse)
    direction: str  # "forward" or "reverse"
    detect: str  # the detection that made the pattern: "global" or "local"
    x_shape: tuple

    @property
    def n_colors(self) -> int:
        return int(self.colors.max(initial=-1)) + 1

    def __post_init__(self) -> None:
        rec = C.column_recovery if self.direction == "forward" else C.row_recovery
        self.recovery = rec(self.pattern, self.colors)
        self.lanes = _lanes(self.colors, self.x_shape if self.direction == "forward" else None)


@dataclass
class HessianPlan:
    pattern: sp.csr_matrix  # (x.size, x.size), boolean, symmetric
    colors: np.ndarray  # star coloring
    detect: str
    x_shape: tuple

    @property
    def n_colors(self) -> int:
        return int(self.colors.max(initial=-1)) + 1

    def __post_init__(self) -> None:
        self.recovery = C.symmetric_recovery(self.pattern, self.colors)
        self.lanes = _lanes(self.colors, self.x_shape)


def _lanes(colors: np.ndarray, shape: tuple | None) -> list[np.ndarray]:
    """One seed per color (0/1 on the elements of that color), shaped like x (or flat)."""
    out = []
    for c in range(int(colors.max(initial=-1)) + 1):
        s = (colors == c).astype(np.float64)
        out.append(s.reshape(shape) if shape is not None else s)
    return out


def _check(x: Any, what: str) -> np.ndarray:
    if not isinstance(x, np.ndarray) or x.dtype.kind != "f":
        raise ZymoUsageError(f"{what}(..., sparse=True): x must be a float array, not "
                             f"{type(x).__name__ if not isinstance(x, np.ndarray) else 'an array of ' + str(x.dtype)}")
    if x.size == 0:
        raise ZymoUsageError(f"{what}(..., sparse=True): x is empty")
    return x


def _detected(find: Callable, f: Callable, x: np.ndarray, consts: tuple, detect: str) -> tuple:
    if detect not in DETECT:
        raise ZymoUsageError(f"detect= takes 'auto', 'global' or 'local', not {detect!r}")
    if detect == "local":
        return find(f, x, *consts, mode="local"), "local"
    try:
        return find(f, x, *consts, mode="global"), "global"
    except DetectionFailed as e:
        if detect == "global":
            raise UnsupportedSyntax(f"global sparsity detection cannot bound this program: {e}", e.loc,
                                    why="the pattern must hold at every input, and this construct depends on it",
                                    hint="pass detect='local' for the pattern of the branches taken at this x "
                                         "(valid only for inputs that take the same branches)") from None
        where = f" ({e.loc})" if e.loc is not None else ""
        warnings.warn(f"sparse derivative: global sparsity detection failed{where}: {e}; the pattern is local, "
                      f"valid only for inputs that take the same branches as this x", ZymoWarning, stacklevel=4)
        return find(f, x, *consts, mode="local"), "local"


def plan_jacobian(f: Callable, x: Any, *consts: Any, detect: str = "auto", direction: str | None = None,
                  prefer: str = "forward") -> JacobianPlan:
    x = _check(x, "jacobian")
    pattern, how = _detected(jacobian_pattern, f, x, consts, detect)
    if direction not in (None, "forward", "reverse"):
        raise ZymoUsageError(f"direction= takes 'forward' or 'reverse', not {direction!r}")
    cols = C.column_coloring(pattern) if direction != "reverse" else None
    rows = C.row_coloring(pattern) if direction != "forward" else None
    if direction is None and cols is not None and rows is not None:
        nc, nr = int(cols.max(initial=-1)) + 1, int(rows.max(initial=-1)) + 1
        direction = "reverse" if nr < nc or (nr == nc and prefer == "reverse") else "forward"
    direction = direction or "forward"
    colors = cols if direction == "forward" else rows
    assert colors is not None
    return JacobianPlan(pattern, colors, direction, how, x.shape)


def plan_hessian(f: Callable, x: Any, *consts: Any, detect: str = "auto") -> HessianPlan:
    x = _check(x, "hessian")
    pattern, how = _detected(hessian_pattern, f, x, consts, detect)
    return HessianPlan(pattern, C.star_coloring(pattern), how, x.shape)


def _same_shape(plan: Any, x: np.ndarray) -> None:
    if x.shape != plan.x_shape:
        raise ZymoUsageError(f"the sparsity plan was made for x of shape {plan.x_shape}, not {x.shape}")


def jacobian_from_plan(plan: JacobianPlan, f: Callable, x: Any, *consts: Any, chunk: int | None = None,
                       numba: Any = None) -> sp.csr_matrix:
    from ..derivatives import _chunk, _constants

    consts = _constants(consts)
    x = _check(x, "jacobian")
    _same_shape(plan, x)
    k = plan.n_colors
    if k == 0:
        return sp.csr_matrix(plan.pattern.shape)
    width = _chunk(chunk if chunk is not None else k, k)
    if plan.direction == "forward":
        return plan.recovery(_forward_compressed(f, x, consts, plan.lanes, width, numba))
    return plan.recovery(_reverse_compressed(f, x, consts, plan.lanes, width, numba))


def _forward_compressed(f: Callable, x: np.ndarray, consts: tuple, seeds: list, width: int,
                        numba: Any) -> np.ndarray:
    """B = (J @ S).T, (n_colors, y.size): `width` seeds (lanes, shaped like x) per batched forward call."""
    from ..derivatives import _as_output, _autodiff, _copies

    k = len(seeds)
    b = None
    for start in range(0, k, width):
        lanes = tuple(np.copy(t) for t in seeds[start:start + width])  # f may write x: its tangent too
        copies = [np.copy(x), *_copies(consts)]
        rest = [Const(c) for c in copies[1:]]
        if len(lanes) == 1:
            tan, prim = _autodiff(ForwardWithPrimal, f, Duplicated, Duplicated(copies[0], lanes[0]), *rest,
                                  numba=numba)
            tans = (tan,)
        else:
            tans, prim = _autodiff(ForwardWithPrimal, f, BatchDuplicated, BatchDuplicated(copies[0], lanes), *rest,
                                   numba=numba)
        y = _as_output(prim, "jacobian")
        if b is None:
            b = np.empty((k, int(np.size(y))))
        for lane, t in enumerate(tans):
            b[start + lane] = np.reshape(t, -1)
    assert b is not None
    return b


def _reverse_compressed(f: Callable, x: np.ndarray, consts: tuple, seeds: list, width: int,
                        numba: Any) -> np.ndarray:
    """B = S.T @ J, (n_colors, x.size): `width` seeds (flat, over y) per batched reverse call
    (y[...] = f(x) pulled back)."""
    from ..derivatives import _PULL, _as_output, _autodiff, _copies

    next_pass()
    y = _as_output(f(np.copy(x), *_copies(consts)), "jacobian")
    k = len(seeds)
    b = np.zeros((k, x.size))
    if isinstance(y, float):
        dx = np.zeros_like(x)
        from ..annotations import Active

        _autodiff(Reverse, f, Active, Duplicated(np.copy(x), dx), *map(Const, _copies(consts)), numba=numba)
        b[0] = dx.reshape(-1)
        return b
    if len(consts) >= len(_PULL):
        raise ZymoUsageError(f"a sparse reverse-mode jacobian takes at most {len(_PULL) - 1} constant arguments")
    pull = _PULL[len(consts)]
    for start in range(0, k, width):
        cols = range(start, min(start + width, k))
        ys = tuple(np.array(seeds[c].reshape(y.shape)) for c in cols)  # the reverse pass zeroes them
        dxs = tuple(np.zeros_like(x) for _ in cols)
        args = [Const(c) for c in _copies(consts)]
        ybuf = np.zeros_like(y)
        if len(ys) == 1:
            _autodiff(Reverse, pull, Const, Duplicated(ybuf, ys[0]), f, Duplicated(np.copy(x), dxs[0]), *args,
                      numba=numba)
        else:
            _autodiff(Reverse, pull, Const, BatchDuplicated(ybuf, ys), f, BatchDuplicated(np.copy(x), dxs),
                      *args, numba=numba)
        for lane, d in zip(cols, dxs, strict=True):
            b[lane] = d.reshape(-1)
    return b


def hessian_from_plan(plan: HessianPlan, f: Callable, x: Any, *consts: Any, chunk: int | None = None,
                      numba: Any = None) -> sp.csr_matrix:
    from ..derivatives import _chunk, _constants, _copies, _over_reverse, _reverse_program

    consts = _constants(consts)
    x = _check(x, "hessian")
    _same_shape(plan, x)
    k = plan.n_colors
    n = x.size
    if k == 0:
        return sp.csr_matrix((n, n))
    comp, rest, internal = _reverse_program(f, np.copy(x), tuple(_copies(consts)))
    width = _chunk(chunk if chunk is not None else k, k)
    b = np.empty((k, n))
    for start in range(0, k, width):
        cols = range(start, min(start + width, k))
        ts = tuple(np.copy(plan.lanes[c]) for c in cols)
        hs = tuple(np.zeros_like(x) for _ in cols)
        _over_reverse(comp, x, rest, internal, ts, hs, numba)
        for c, h in zip(cols, hs, strict=True):
            b[c] = h.reshape(-1)
    return plan.recovery(b)


def sparse_jacobian(mode: Any, f: Callable, x: Any, consts: tuple, detect: str, chunk: int | None,
                    numba: Any) -> sp.csr_matrix:
    from ..derivatives import _constants

    consts = _constants(consts)
    prefer = "forward" if getattr(mode, "forward", True) else "reverse"
    next_pass()  # a local pattern runs f's ops (`detect.py`)
    plan = plan_jacobian(f, x, *consts, detect=detect, prefer=prefer)
    return jacobian_from_plan(plan, f, x, *consts, chunk=chunk, numba=numba)


def sparse_hessian(f: Callable, x: Any, consts: tuple, detect: str, chunk: int | None, numba: Any) -> sp.csr_matrix:
    from ..derivatives import _constants

    consts = _constants(consts)
    next_pass()  # a local pattern runs f's ops (`detect.py`)
    plan = plan_hessian(f, x, *consts, detect=detect)
    return hessian_from_plan(plan, f, x, *consts, chunk=chunk, numba=numba)
