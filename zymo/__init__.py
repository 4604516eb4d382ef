"""zymo: Enzyme-style automatic differentiation of imperative Python and NumPy.

    import zymo
    from zymo import Reverse, Forward, Active, Const, Duplicated

    zymo.autodiff(Reverse, f, Active, Active(3.0))          # ((df/dx,),)
    zymo.autodiff(Reverse, g, Active, Duplicated(x, dx))    # dx += dg/dx
    zymo.autodiff(Forward, g, Duplicated, Duplicated(x, tx))
    zymo.gradient(Reverse, g, x, y)
"""
from . import config, rules  # noqa: F401  (rules: registers the derivative rules)
from .annotations import (
    Active,
    BatchDuplicated,
    BatchDuplicatedNoNeed,
    Const,
    Duplicated,
    DuplicatedNoNeed,
    Forward,
    ForwardWithPrimal,
    Reverse,
    ReverseSplitNoPrimal,
    ReverseSplitWithPrimal,
    ReverseWithPrimal,
)
from .api import Tape, autodiff, autodiff_thunk, cache_clear, cache_report, generated_code, gradient, ir
from .derivatives import gradient_forward, hessian, hvp, hvp_and_gradient, jacobian
from .errors import (
    UnsupportedCall,
    UnsupportedSyntax,
    ZymoError,
    ZymoSourceError,
    ZymoTypeError,
    ZymoUsageError,
    ZymoWarning,
)
from .rules.checkpoint_call import CheckpointedCall, checkpoint
from .rules.custom import CustomRule, custom_rule, inactive
from .runtime.checkpoint import checkpointed
from .shadows import make_zero, make_zero_

__all__ = [
    "gradient_forward", "hessian", "hvp", "hvp_and_gradient", "jacobian",
    "Active", "BatchDuplicated", "BatchDuplicatedNoNeed", "Const", "Duplicated", "DuplicatedNoNeed", "Forward",
    "ForwardWithPrimal", "Reverse", "ReverseSplitNoPrimal", "ReverseSplitWithPrimal", "ReverseWithPrimal", "Tape",
    "autodiff", "autodiff_thunk", "cache_clear", "cache_report", "generated_code", "gradient", "ir", "make_zero",
    "make_zero_", "UnsupportedCall", "UnsupportedSyntax", "ZymoError", "ZymoSourceError", "ZymoTypeError",
    "ZymoUsageError", "ZymoWarning", "config", "CustomRule", "custom_rule", "inactive", "checkpointed",
    "checkpoint", "CheckpointedCall",
]
__version__ = "0.1.0"
