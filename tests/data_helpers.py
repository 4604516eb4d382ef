"""Checking derivatives of functions of Python data (objects, dicts, lists, closures).

`check_data(f, make_args)` differentiates `f(*make_args())` where each argument is a
float (Active in reverse mode, Duplicated(x, t) in forward mode) or a mutable
structure (Duplicated with a shadow from `zymo.make_zero`). The map checked is
initial leaves -> (return value, final leaves), where leaves are the float arrays
and floats reachable through mutable records, dicts and lists, as in helpers.py:
- reverse mode against central differences of L = ret + sum <cot, final leaf>,
  on repeated calls that reuse the shadows (re-zeroed with `zymo.make_zero_`);
- forward mode against central differences along random tangents;
- the two modes against each other (dot-product identity).
Random cotangents and tangents make a result of zeros, or of the wrong sign, fail.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

import zymo
from zymo import Active, Duplicated, Forward, Reverse
from zymo.frontend.objects import get_field, record, set_field


def leaves(x: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    rec = record(x)
    if rec is not None:
        out = []
        for k, v in rec[1]:
            if isinstance(v, float) and rec[0] == "frozen":
                continue  # immutable: not a state leaf
            out += leaves(v, path + (k,))
        return out
    if isinstance(x, (list, tuple)):
        return [p for k, v in enumerate(x) for p in leaves(v, path + (k,))]
    if isinstance(x, float) or (isinstance(x, np.ndarray) and x.dtype.kind == "f"):
        return [(path, x)]
    return []


def get(x: Any, path: tuple) -> Any:
    for k in path:
        x = x[k] if isinstance(k, int) else get_field(x, k)
    return x


def put(x: Any, path: tuple, v: Any) -> None:
    parent = get(x, path[:-1])
    if isinstance(v, np.ndarray):
        get(x, path)[...] = v
    elif isinstance(parent, list) or isinstance(path[-1], int):
        parent[path[-1]] = v
    else:
        set_field(parent, path[-1], v)


def _loss(f, args, cot, seed):
    ret = f(*args)
    total = seed * float(ret)
    for p, c in cot.items():
        total += float(np.sum(np.asarray(get(args, p)) * c))
    return total


def check_data(f: Callable, make_args: Callable[[], list], seed: float = 1.0, reps: int = 2,
               rtol: float = 1e-6, atol: float = 1e-7, eps: float = 1e-6, rng_seed: int = 0) -> dict:
    rng = np.random.default_rng(rng_seed)
    base = make_args()
    paths = [p for p, _ in leaves(base)]
    rand = {p: (rng.standard_normal(np.shape(v)) if isinstance(v, np.ndarray) else float(rng.standard_normal()))
            for p, v in leaves(base)}
    top = [p for p in paths if len(p) == 1 and isinstance(base[p[0]], float)]  # Active floats
    state = [p for p in paths if p not in top]  # memory leaves: they have cotangents
    cot = {p: (rng.standard_normal(np.shape(get(base, p))) if isinstance(get(base, p), np.ndarray)
               else float(rng.standard_normal())) for p in state}

    # central differences of the loss, leaf by leaf
    g_fd = {}
    for p in paths:
        v = get(base, p)
        if isinstance(v, np.ndarray):
            g = np.zeros(v.shape)
            for idx in np.ndindex(v.shape):
                vals = []
                for h in (eps, -eps):
                    a = make_args()
                    get(a, p)[idx] += h
                    vals.append(_loss(f, a, cot, seed))
                g[idx] = (vals[0] - vals[1]) / (2 * eps)
        else:
            vals = []
            for h in (eps, -eps):
                a = make_args()
                put(a, p, get(a, p) + h)
                vals.append(_loss(f, a, cot, seed))
            g = (vals[0] - vals[1]) / (2 * eps)
        g_fd[p] = g

    # reverse mode, repeated with reused shadows
    shadows = [None if isinstance(a, float) else zymo.make_zero(a) for a in base]
    grads = None
    for _ in range(reps):
        args = make_args()
        for s in shadows:
            if s is not None:
                zymo.make_zero_(s)
        for p in state:
            put(shadows, p, copy.deepcopy(cot[p]))
        annots = [Active(a) if s is None else Duplicated(a, s) for a, s in zip(args, shadows)]
        (derivs,) = zymo.autodiff(Reverse, f, Active if seed else zymo.Const, *annots)
        grads = {p: (derivs[p[0]] if p in top else copy.deepcopy(get(shadows, p))) for p in paths}
        for p in paths:
            np.testing.assert_allclose(np.asarray(grads[p], float), g_fd[p], rtol=rtol, atol=atol,
                                       err_msg=f"reverse: leaf {p}")

    # forward mode against central differences along `rand`
    args = make_args()
    tshadows = [None if isinstance(a, float) else zymo.make_zero(a) for a in args]
    for p in state:
        put(tshadows, p, copy.deepcopy(rand[p]))
    annots = [Duplicated(a, rand[(k,)]) if s is None else Duplicated(a, s)
              for k, (a, s) in enumerate(zip(args, tshadows))]
    (rt,) = zymo.autodiff(Forward, f, zymo.Duplicated, *annots)

    def shifted(h):
        a = make_args()
        for p in paths:
            v = get(a, p)
            if isinstance(v, np.ndarray):
                v += h * rand[p]
            else:
                put(a, p, v + h * rand[p])
        r = f(*a)
        return r, a

    (rp, ap), (rm, am) = shifted(eps), shifted(-eps)
    np.testing.assert_allclose(rt, (rp - rm) / (2 * eps), rtol=rtol, atol=atol, err_msg="forward: return")
    for p in state:
        np.testing.assert_allclose(np.asarray(get(tshadows, p), float),
                                   (np.asarray(get(ap, p)) - np.asarray(get(am, p))) / (2 * eps),
                                   rtol=rtol, atol=atol, err_msg=f"forward: final leaf {p}")
    # dot-product identity: <J t, (seed, cot)> == <t, J^T (seed, cot)>
    lhs = seed * float(rt) + sum(float(np.sum(np.asarray(get(tshadows, p)) * cot[p])) for p in state)
    rhs = sum(float(np.sum(np.asarray(grads[p]) * rand[p])) for p in paths)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-9, atol=1e-9, err_msg="forward and reverse disagree")
    assert any(np.any(np.asarray(g) != 0) for g in grads.values()), "all derivatives are zero"
    return {"grads": grads, "tangent": rt}
