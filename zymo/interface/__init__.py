"""zymo.interface: one vocabulary of derivative operators over several AD backends.

    from zymo.interface import AutoZymo, AutoJAX, gradient, prepare_gradient, Constant

    g = gradient(f, AutoZymo(), x, Constant(data))           # any backend, same call
    prep = prepare_gradient(f, AutoZymo(), x, Constant(data))
    gradient(f, AutoZymo(), x, Constant(data), prep=prep, out=g)   # fast repeated calls, into g

Modules: `backends` (backend types and limits), `operators` (the operators),
`prepare` (preparation objects and their reuse checks), `contexts` (Constant,
Cache), `scenarios` (the test and benchmark suite, usable for your own backend),
`errors`. See docs/interface.md.
"""
from .backends import AutoAutograd, AutoFiniteDiff, AutoJAX, AutoSparse, AutoTorch, AutoZymo, Backend, all_backends
from .contexts import Cache, Constant
from .errors import BackendLimitation, BackendUnavailable, PreparationMismatch
from .operators import (
    derivative,
    gradient,
    gradient_and_hvp,
    hessian,
    hvp,
    jacobian,
    pullback,
    pushforward,
    second_derivative,
    value_and_derivative,
    value_and_gradient,
    value_and_jacobian,
    value_and_pullback,
    value_and_pushforward,
    value_derivative_and_second_derivative,
    value_gradient_and_hessian,
)
from .prepare import (
    Preparation,
    prepare_derivative,
    prepare_gradient,
    prepare_hessian,
    prepare_hvp,
    prepare_jacobian,
    prepare_pullback,
    prepare_pushforward,
    prepare_second_derivative,
)

__all__ = [
    "AutoAutograd", "AutoFiniteDiff", "AutoJAX", "AutoSparse", "AutoTorch", "AutoZymo", "Backend", "all_backends",
    "Cache", "Constant", "BackendLimitation", "BackendUnavailable", "PreparationMismatch",
    "derivative", "gradient", "gradient_and_hvp", "hessian", "hvp", "jacobian", "pullback", "pushforward",
    "second_derivative", "value_and_derivative", "value_and_gradient", "value_and_jacobian", "value_and_pullback",
    "value_and_pushforward", "value_derivative_and_second_derivative", "value_gradient_and_hessian",
    "Preparation", "prepare_derivative", "prepare_gradient", "prepare_hessian", "prepare_hvp", "prepare_jacobian",
    "prepare_pullback", "prepare_pushforward", "prepare_second_derivative",
]
