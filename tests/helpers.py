"""Shared test helpers: an elementwise finite-difference gradient, a reverse-mode driver
and an autograd oracle. The checker of derivatives is `zymo.testing.check_grad`.

Everything works on "trees": floats, ints, bools, None, NumPy arrays, and
tuples/lists of them. Functions under test may MUTATE their inputs, so every
evaluation runs on a fresh deep copy of the arguments.

The derivative these helpers compute is that of the map (as `check_grad`'s)

    F: initial values of the arguments -> (return value, final values of the arguments)

- `zymo_grad`: reverse mode, cotangents of the final arguments (the shadows passed in)
  and the seed of the return -> adjoints of the initial arguments (the shadows after
  the call, and the returned derivatives of Active floats);
- `fd_grad`: the central-difference gradient of `L = seed * ret + sum <cot_k, final_k>`,
  element by element, for tests that compare a whole gradient.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import zymo
from zymo import Active, Const, Duplicated, Reverse, ReverseWithPrimal

# -- trees -------------------------------------------------------------------------


def is_float(x: Any) -> bool:
    return isinstance(x, (float, np.floating)) and not isinstance(x, bool)


def is_float_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating)


def copy_tree(x: Any) -> Any:
    """A deep copy (arrays copied, structure rebuilt; aliasing inside lists is kept)."""
    return copy.deepcopy(x)


def map_tree(fn: Callable[[Any], Any], x: Any, *rest: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(map_tree(fn, *parts) for parts in zip(x, *rest))
    if isinstance(x, list):
        return [map_tree(fn, *parts) for parts in zip(x, *rest)]
    return fn(x, *rest)


def diff_leaves(x: Any) -> list:
    """The differentiable leaves (floats and float arrays), depth first."""
    out: list = []

    def go(o: Any) -> None:
        if isinstance(o, (tuple, list)):
            for p in o:
                go(p)
        elif is_float(o) or is_float_array(o):
            out.append(o)

    go(x)
    return out


def zeros_tree(x: Any) -> Any:
    """Zero tangents/cotangents: 0.0 for floats, zero arrays; None for what has none."""
    def z(o: Any) -> Any:
        if is_float(o):
            return type(o)(0.0)
        if is_float_array(o):
            return np.zeros_like(o)
        return None

    return map_tree(z, x)


def vdot_tree(a: Any, b: Any) -> float:
    """sum <a_k, b_k> over differentiable leaves (None counts as zero)."""
    total = 0.0
    la, lb = _pair_leaves(a, b)
    for p, q in zip(la, lb):
        if p is None or q is None:
            continue
        total += float(np.sum(np.asarray(p, dtype=np.float64) * np.asarray(q, dtype=np.float64)))
    return total


def _pair_leaves(a: Any, b: Any) -> tuple[list, list]:
    la: list = []
    lb: list = []

    def go(p: Any, q: Any) -> None:
        if isinstance(p, (tuple, list)):
            if not isinstance(q, (tuple, list)):
                q = [None] * len(p) if q is None else q
            for pp, qq in zip(p, q):
                go(pp, qq)
        else:
            la.append(p)
            lb.append(q)

    go(a, b)
    return la, lb


def assert_tree_close(actual: Any, expected: Any, rtol: float = 1e-6, atol: float = 1e-6, what: str = "") -> None:
    """Structure-aware allclose; None in `expected` matches None/0 in `actual`."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"{what}: expected a sequence, got {actual!r}"
        assert len(actual) == len(expected), f"{what}: length {len(actual)} != {len(expected)}"
        for k, (a, e) in enumerate(zip(actual, expected)):
            assert_tree_close(a, e, rtol, atol, f"{what}[{k}]")
        return
    if expected is None:
        assert actual is None or np.all(np.asarray(actual) == 0), f"{what}: expected no derivative, got {actual!r}"
        return
    assert actual is not None, f"{what}: expected {expected!r}, got None"
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=what)


# -- running the function on fresh copies ---------------------------------------


def run(f: Callable, args: Sequence, kwargs: dict | None = None) -> tuple[Any, list]:
    """(return value, final arguments) of f on fresh copies of args."""
    a = copy_tree(list(args))
    ret = f(*a, **(kwargs or {}))
    return ret, a


def _as64(x: Any) -> Any:
    """Upcast float32 data to float64 so finite differences are accurate."""
    def up(o: Any) -> Any:
        if is_float_array(o):
            return o.astype(np.float64)
        if isinstance(o, np.floating):
            return float(o)
        return o

    return map_tree(up, x)


def _leaf_paths(x: Any, prefix: tuple = ()) -> list[tuple[tuple, Any]]:
    """(path, leaf) of every differentiable leaf; a path is a tuple of container indices."""
    if isinstance(x, (tuple, list)):
        out = []
        for k, o in enumerate(x):
            out.extend(_leaf_paths(o, prefix + (k,)))
        return out
    if is_float(x) or is_float_array(x):
        return [(prefix, x)]
    return []


def _replace(x: Any, path: tuple, value: Any) -> Any:
    """A copy of tree x with the leaf at `path` replaced (containers rebuilt)."""
    if not path:
        return value
    k = path[0]
    parts = list(x)
    parts[k] = _replace(parts[k], path[1:], value)
    return tuple(parts) if isinstance(x, tuple) else parts


def fd_grad(f: Callable, args: Sequence, cotangents: Sequence | None = None, seed: float = 1.0,
            eps: float = 1e-6, upcast: bool = True) -> list:
    """Central-difference gradient of L = seed*ret + sum <cot_k, final arg_k> w.r.t. every
    differentiable input element: one tree per argument shaped like it (None where
    nothing is differentiable)."""
    base = _as64(list(args)) if upcast else list(args)
    cots = _as64(list(cotangents)) if cotangents is not None else None

    def loss(a: list) -> float:
        ret, final = run(f, a)
        total = 0.0
        if seed and ret is not None and not isinstance(ret, (tuple, list)):
            total += seed * float(np.sum(ret))
        if cots is not None:
            total += vdot_tree(final, cots)
        return total

    grads: Any = zeros_tree(base)
    for path, leaf in _leaf_paths(base):
        if is_float(leaf):
            lp = loss(_replace(base, path, leaf + eps))
            lm = loss(_replace(base, path, leaf - eps))
            grads = _replace(grads, path, (lp - lm) / (2 * eps))
        else:
            g = np.zeros(leaf.shape)
            for idx in np.ndindex(leaf.shape):
                p = leaf.copy()
                p[idx] += eps
                lp = loss(_replace(base, path, p))
                p[idx] -= 2 * eps
                lm = loss(_replace(base, path, p))
                g[idx] = (lp - lm) / (2 * eps)
            grads = _replace(grads, path, g)
    return grads


# -- zymo drivers -------------------------------------------------------------------


def _reverse_annot(x: Any, cot: Any, const: bool) -> tuple[Any, Any]:
    """(annotation, shadow) of one argument for reverse mode."""
    if const or not diff_leaves(x):
        return Const(x), None
    if isinstance(x, (np.ndarray, list)) or (isinstance(x, tuple) and not is_float(diff_leaves(x)[0])):
        shadow = copy_tree(cot) if cot is not None else zymo.make_zero(x)
        shadow = _fill_none(shadow, x)
        return Duplicated(x, shadow), shadow
    return Active(x), None


def _fill_none(shadow: Any, like: Any) -> Any:
    if isinstance(like, tuple):
        return tuple(_fill_none(s, lk) for s, lk in zip(shadow, like))
    if isinstance(like, list):
        return [_fill_none(s, lk) for s, lk in zip(shadow, like)]
    if shadow is None:
        return zymo.make_zero(like)
    return shadow


def zymo_grad(f: Callable, args: Sequence, cotangents: Sequence | None = None, ret_active: bool = True,
              const: Sequence[int] = (), with_primal: bool = False, numba: Any = None):
    """Reverse mode on fresh copies: floats Active, memory Duplicated with shadow = cotangent.

    Returns one tree per argument: the returned derivative of an Active argument, or
    the shadow after the call for a Duplicated one (None for constants). With
    `with_primal`, returns (grads, primal, final args). `numba` is passed to `autodiff`."""
    a = copy_tree(list(args))
    cots = list(cotangents) if cotangents is not None else [None] * len(a)
    annots, shadows = [], []
    for k, (x, c) in enumerate(zip(a, cots)):
        ann, sh = _reverse_annot(x, c, k in const)
        annots.append(ann)
        shadows.append(sh)
    mode = ReverseWithPrimal if with_primal else Reverse
    res = zymo.autodiff(mode, f, Active if ret_active else Const, *annots, numba=numba)
    derivs = res[0]
    assert len(derivs) == len(a)
    out = [s if s is not None else d for d, s in zip(derivs, shadows)]
    if with_primal:
        return out, res[1], a
    return out


# -- autograd oracle -------------------------------------------------------------------


def autograd_grad(fun: Callable, *args: Any, argnum: int | Sequence[int] = 0) -> Any:
    """autograd's gradient of a functional (non-mutating) rewrite `fun` (written with
    `autograd.numpy`), at `args`. `argnum` may be an int or a sequence of ints."""
    import autograd

    if isinstance(argnum, int):
        return autograd.grad(fun, argnum)(*args)
    return tuple(autograd.grad(fun, k)(*args) for k in argnum)


def autograd_jvp(fun: Callable, args: Sequence, tangents: Sequence) -> Any:
    """Directional derivative of a functional rewrite via autograd (J t = sum_k dF/dx_k t_k)."""
    from autograd import make_jvp

    total = None
    for k, t in enumerate(tangents):
        if t is None:
            continue

        def part(xk, k=k):
            a = list(args)
            a[k] = xk
            return fun(*a)

        _, jt = make_jvp(part)(args[k])(t)
        total = jt if total is None else total + jt
    return total


def numpy_allocations(call: Callable[[], Any]) -> tuple[int, int]:
    """(number, bytes) of NumPy buffers that `call` allocates and keeps (tracemalloc's
    NumPy domain: NumPy reports its data buffers there)."""
    import tracemalloc

    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    call()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    flt = [tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)]
    diff = after.filter_traces(flt).compare_to(before.filter_traces(flt), "lineno")
    return (sum(s.count_diff for s in diff if s.count_diff > 0),
            sum(s.size_diff for s in diff if s.size_diff > 0))
