"""The sparse engine (`AutoSparse(AutoZymo())`): Jacobians and Hessians as `scipy.sparse`.

Contract: every operator runs as with `AutoZymo` (this engine is a `ZymoEngine`), except
`jacobian`/`value_and_jacobian` and `hessian`/`value_gradient_and_hessian`, which return a
`scipy.sparse.csr_matrix` (shape `(y.size, x.size)`, resp. `(x.size, x.size)`, C order)
computed by `zymo.sparse`: sparsity detection, coloring, compressed passes. The pattern
and colors (a `JacobianPlan` / `HessianPlan`) are made once, when the engine is prepared
for that operator (`prepare_jacobian`, `prepare_hessian`, or the first call), from the x
and contexts given then, and reused by every call through the same preparation. With
`detect="local"` (or "auto" falling back to it) the plan holds only for inputs taking the
branches that x took. In-place `f(y, x)` is refused (`BackendLimitation`), and so is
`out=` for the sparse results (the operators check it).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ._zymo import ZymoEngine
from .errors import BackendLimitation


class SparseEngine(ZymoEngine):
    def setup(self, x: Any, contexts: tuple, y: Any) -> None:
        if y is not None:
            raise BackendLimitation("AutoSparse: in-place f(y, x) is not supported; return the array instead")
        if self.x_scalar:
            raise BackendLimitation("AutoSparse: x must be an array (a scalar x has a 1x1 derivative)")
        super().setup(x, contexts, y)
        self.x0 = np.array(x, copy=True)
        self.ctx0 = [c.value for c in contexts]
        self.jplan: Any = None
        self.hplan: Any = None

    def check_op(self, op: str) -> None:
        super().check_op(op)
        if op == "jacobian":
            self._jplan()
        elif op == "hessian":
            self._hplan()

    def _jplan(self) -> Any:
        from zymo.sparse import plan_jacobian

        if self.jplan is None:
            self.jplan = plan_jacobian(self.f, self.x0, *self.ctx0, detect=self.backend.detect,
                                       direction=self.backend.direction)
        return self.jplan

    def _hplan(self) -> Any:
        from zymo.sparse import plan_hessian

        if self.hplan is None:
            self.hplan = plan_hessian(self.f, self.x0, *self.ctx0, detect=self.backend.detect)
        return self.hplan

    def value_and_jacobian(self, x: Any, contexts: tuple, y: Any = None) -> tuple:
        from zymo.sparse import jacobian_from_plan

        b = self.backend.dense
        J = jacobian_from_plan(self._jplan(), self.f, np.array(x, copy=True), *[c.value for c in contexts],
                               chunk=b.chunk, numba=b.numba)
        return self.primal(x, contexts), J

    def value_gradient_and_hessian(self, x: Any, contexts: tuple) -> tuple:
        from zymo.sparse import hessian_from_plan

        val, grad = self.value_and_gradient(x, contexts)
        b = self.backend.dense
        H = hessian_from_plan(self._hplan(), self.f, np.array(x, copy=True), *[c.value for c in contexts],
                              chunk=b.chunk, numba=b.numba)
        return val, grad, H


__all__ = ["SparseEngine"]
