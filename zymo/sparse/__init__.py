"""Sparse Jacobians and Hessians: sparsity detection from zymo's IR (`detect`), graph
coloring (`coloring`), and compressed forward/reverse/hvp passes (`drivers`).

`zymo.jacobian(..., sparse=True)`, `zymo.hessian(..., sparse=True)` and
`zymo.interface.AutoSparse` are built on these.
"""
from .coloring import column_coloring, row_coloring, star_coloring
from .detect import hessian_pattern, jacobian_pattern
from .drivers import HessianPlan, JacobianPlan, hessian_from_plan, jacobian_from_plan, plan_hessian, plan_jacobian
from .memory import DetectionFailed

__all__ = [
    "DetectionFailed", "HessianPlan", "JacobianPlan", "column_coloring", "hessian_from_plan", "hessian_pattern",
    "jacobian_from_plan", "jacobian_pattern", "plan_hessian", "plan_jacobian", "row_coloring", "star_coloring",
]
