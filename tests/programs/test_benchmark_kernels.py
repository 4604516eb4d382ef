"""The 29 benchmark kernels (`benchmarks/kernels.py`: PolyBench-style linear algebra,
stencils, data mining, ML, physics, weather), as users write them, at their small sizes:
zymo's reverse-mode gradient (Python backend) against central differences along random
directions, and against forward mode by the dot-product identity. A kernel zymo refuses, or a
derivative that disagrees, fails here before any benchmark is run."""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from kernels import KERNELS


def _directions(args, wrt, rng):
    return {i: rng.standard_normal(np.shape(args[i])) if isinstance(args[i], np.ndarray)
            else float(rng.standard_normal()) for i in wrt}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_gradient(name):
    k = KERNELS[name]
    args = k.make(k.small)
    ann = [Duplicated(copy.deepcopy(a), np.zeros_like(a)) if i in k.wrt and isinstance(a, np.ndarray)
           else Active(a) if i in k.wrt else Const(copy.deepcopy(a)) for i, a in enumerate(args)]
    res = zymo.autodiff(Reverse, k.primal, Active, *ann)
    grad = {i: ann[i].dval if isinstance(ann[i], Duplicated) else res[0][i] for i in k.wrt}
    rng = np.random.default_rng(0)

    def along(t, d):
        a2 = copy.deepcopy(args)
        for i, di in d.items():
            a2[i] = a2[i] + t * di
        return k.primal(*a2)

    for _ in range(2):
        d = _directions(args, k.wrt, rng)
        h = 1e-6
        fd = (along(h, d) - along(-h, d)) / (2 * h)
        mine = sum(float(np.sum(grad[i] * d[i])) for i in k.wrt)
        assert abs(mine - fd) <= 1e-6 * max(1.0, abs(fd)), (name, mine, fd)
    # forward mode along the last direction: the same directional derivative
    fwd = [Duplicated(copy.deepcopy(a), np.asarray(d[i], dtype=float).copy() if isinstance(a, np.ndarray) else d[i])
           if i in k.wrt else Const(copy.deepcopy(a)) for i, a in enumerate(args)]
    if all(isinstance(args[i], np.ndarray) for i in k.wrt):
        (tangent,) = zymo.autodiff(Forward, k.primal, Duplicated, *fwd)
        mine = sum(float(np.sum(grad[i] * d[i])) for i in k.wrt)
        assert abs(tangent - mine) <= 1e-9 * max(1.0, abs(mine)), (name, tangent, mine)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_gradient_kernels_backend(name):
    """`numba="kernels"` (loop nests compiled, the rest Python) gives the Python backend's
    gradient to round-off on every kernel, and compiles the loop nests it outlines."""
    from zymo.codegen.outline import Kernel

    k = KERNELS[name]
    args = k.make(k.small)

    def grads(numba):
        ann = [Duplicated(copy.deepcopy(a), np.zeros_like(a)) if i in k.wrt and isinstance(a, np.ndarray)
               else Active(a) if i in k.wrt else Const(copy.deepcopy(a)) for i, a in enumerate(args)]
        res = zymo.autodiff(Reverse, k.primal, Active, *ann, numba=numba)
        return [ann[i].dval if isinstance(ann[i], Duplicated) else res[0][i] for i in k.wrt]

    for got, ref in zip(grads("kernels"), grads(False)):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)
    comp = [c for entries in zymo.cache.COMPILED.values() for c in entries if c.backend == "kernels"][-1]
    kernels = [v for v in comp.fn.__globals__.values() if isinstance(v, Kernel)]
    assert all(v.fn is not v.python or "not a number" in v.why for v in kernels), [(v.name, v.why) for v in kernels]
