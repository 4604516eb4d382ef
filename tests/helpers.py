"""Shared test helpers: finite differences, zymo drivers and an autograd oracle.

Everything works on "trees": floats, ints, bools, None, NumPy arrays, and
tuples/lists of them. Functions under test may MUTATE their inputs, so every
evaluation runs on a fresh deep copy of the arguments.

The derivative checked everywhere is that of the map

    F: initial values of the arguments -> (return value, final values of the arguments)

- forward mode:  tangents in  -> (tangent of the return, tangents of the final arguments),
  which is what zymo writes into the shadows (memory only read keeps its tangent);
- reverse mode:  cotangents of the final arguments (the shadows passed in) and the
  seed of the return  -> adjoints of the initial arguments (the shadows after the
  call, and the returned derivatives of Active floats).

So reverse mode is checked against the central-difference gradient of
`L = seed * ret + sum <cot_k, final_k>`, forward mode against the central
difference of F along the tangent, and the two modes against each other by the
dot-product identity <J t, c> == <t, J^T c>.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import zymo
from zymo import Active, Const, Duplicated, Forward, ForwardWithPrimal, Reverse, ReverseWithPrimal

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


def rand_tree(x: Any, rng: np.random.Generator, scale: float = 1.0) -> Any:
    """Random tangents/cotangents of the same structure, shapes and dtypes."""
    def r(o: Any) -> Any:
        if is_float(o):
            return type(o)(scale * rng.standard_normal())
        if is_float_array(o):
            return (scale * rng.standard_normal(o.shape)).astype(o.dtype)
        return None

    return map_tree(r, x)


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


def fd_jvp(f: Callable, args: Sequence, tangents: Sequence, eps: float = 1e-6, upcast: bool = True
           ) -> tuple[Any, list]:
    """Central difference of F along `tangents`: (tangent of the return, tangents of the final args)."""
    base = _as64(list(args)) if upcast else list(args)
    tans = [zeros_tree(a) if t is None else t for a, t in zip(base, tangents)]
    tans = _as64(tans) if upcast else tans

    def shifted(h: float) -> list:
        def sh(x: Any, t: Any) -> Any:
            if t is None or not (is_float(x) or is_float_array(x)):
                return copy.deepcopy(x)
            return x + h * t
        return map_tree(sh, base, tans)

    rp, ap = run(f, shifted(eps))
    rm, am = run(f, shifted(-eps))

    def diff(p: Any, m: Any) -> Any:
        if is_float(p) or is_float_array(p):
            return (np.asarray(p, dtype=np.float64) - np.asarray(m, dtype=np.float64)) / (2 * eps)
        return None

    return map_tree(diff, rp, rm), map_tree(diff, ap, am)


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


def _get(x: Any, path: tuple) -> Any:
    for k in path:
        x = x[k]
    return x


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


def zymo_jvp(f: Callable, args: Sequence, tangents: Sequence, ret_dup: bool = True, const: Sequence[int] = (),
             with_primal: bool = False):
    """Forward mode on fresh copies: every differentiable argument Duplicated with its tangent.

    Returns (tangent of the return, tangents of the final args) [+ (primal, final args)]."""
    a = copy_tree(list(args))
    tans = [copy_tree(t) for t in tangents]
    annots = []
    for k, (x, t) in enumerate(zip(a, tans)):
        if k in const or not diff_leaves(x):
            annots.append(Const(x))
            tans[k] = None
        else:
            tans[k] = _fill_none(t, x)
            annots.append(Duplicated(x, tans[k]))
    mode = ForwardWithPrimal if with_primal else Forward
    res = zymo.autodiff(mode, f, Duplicated if ret_dup else zymo.Const, *annots)
    if ret_dup:
        ret_t = res[0]
    else:
        ret_t = None
    if with_primal:
        return ret_t, tans, res[-1], a
    return ret_t, tans


def check(f: Callable, args: Sequence, *, seed: float | None = 1.0, const: Sequence[int] = (),
          rtol: float = 1e-5, atol: float = 1e-6, eps: float = 1e-6, rng_seed: int = 0,
          forward: bool = True, reverse: bool = True, cotangents: Sequence | None = None,
          tangents: Sequence | None = None) -> dict:
    """Check f in both modes against central differences and against each other.

    `seed=None` means f returns no float (Const return in reverse mode, and in
    forward mode the return tangent is not requested). Arguments listed in `const`
    are passed as Const. Cotangents of the final arguments (the shadows given to
    reverse mode) and the forward tangents are random unless given.
    Returns a dict with what was computed, for extra assertions.
    """
    rng = np.random.default_rng(rng_seed)
    args = list(args)
    if cotangents is None:
        cotangents = [None if k in const else rand_tree(x, rng) for k, x in enumerate(args)]
    if tangents is None:
        tangents = [None if k in const else rand_tree(x, rng) for k, x in enumerate(args)]
    # constants: no cotangent/tangent
    cotangents = [None if k in const else c for k, c in enumerate(cotangents)]
    tangents = [None if k in const else t for k, t in enumerate(tangents)]
    out: dict = {}
    ret_active = seed is not None
    if reverse:
        # an Active float has no cotangent of its "final value": only memory has one
        mem_cots = [c if _is_memory(x) else None for x, c in zip(args, cotangents)]
        g = zymo_grad(f, args, mem_cots, ret_active=ret_active, const=const)
        fd_cots = [copy_tree(c) if c is not None else None for c in mem_cots]
        g_fd = fd_grad(f, args, fd_cots, seed=seed or 0.0, eps=eps)
        for k in range(len(args)):
            if k in const:
                continue
            assert_tree_close(g[k], g_fd[k], rtol, atol, f"reverse: argument {k}")
        out.reverse = g
    if forward:
        rt, ft = zymo_jvp(f, args, tangents, ret_dup=ret_active, const=const)
        rt_fd, ft_fd = fd_jvp(f, args, [t if t is not None else None for t in tangents], eps=eps)
        if ret_active:
            assert_tree_close(rt, rt_fd, rtol, atol, "forward: tangent of the return")
        for k in range(len(args)):
            if k in const or not diff_leaves(args[k]):
                continue
            if _is_memory(args[k]):
                assert_tree_close(ft[k], ft_fd[k], rtol, atol, f"forward: tangent of final argument {k}")
        out["tangent"] = rt
        out["final_tangents"] = ft
    if forward and reverse:
        # <J t, c> == <t, J^T c>, J: initial args -> (ret, final memory args)
        lhs = (seed or 0.0) * (float(np.sum(rt)) if ret_active and rt is not None else 0.0)
        lhs += sum(vdot_tree(ft[k], mem_cots[k]) for k in range(len(args))
                   if k not in const and mem_cots[k] is not None)
        rhs = sum(vdot_tree(tangents[k], g[k]) for k in range(len(args)) if k not in const)
        np.testing.assert_allclose(lhs, rhs, rtol=max(rtol, 1e-9), atol=atol * 10,
                                   err_msg="forward and reverse mode disagree (dot-product test)")
    return out


def _is_memory(x: Any) -> bool:
    return isinstance(x, (np.ndarray, list)) or (isinstance(x, tuple) and any(
        isinstance(leaf, np.ndarray) for leaf in diff_leaves(x)))


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
