"""The facts rules declare (`rules/registry.py`: pure, may_raise, numbers_safe, ...), which
the analyses and transforms read instead of tables of names: each fact's set of rules is
stated here, so a rule that gains or loses one is a visible change."""
from __future__ import annotations

from zymo.rules.registry import REGISTRY, load_all, rules_with


def _all() -> None:
    load_all()


def test_cheap_rules_are_the_ring_and_division_operators():
    _all()  # reverse mode recomputes these rather than caching them (`transform/reverse/plan.py`)
    assert rules_with("cheap") == {"add", "sub", "mul", "truediv", "floordiv", "mod", "neg"}


def test_the_impure_rules_are_output_and_random_numbers():
    _all()  # never left out of a forward sweep (`transform/reverse/dead.py`)
    random = frozenset(k for k in REGISTRY if k.startswith("numpy.random."))
    # NumPy's error state read (`_rt.fp_raises`): a call may answer differently from the one before
    assert random and rules_with("pure") == frozenset(REGISTRY) - {"builtins.print", "zymo.rt.fp_raises"} - random


def test_rules_safe_on_numbers():
    _all()  # never raise on numbers; float() does (an int beyond 1.8e308: OverflowError)
    assert rules_with("numbers_safe") == {"add", "sub", "mul", "neg", "pos", "lt", "le", "gt", "ge", "eq", "ne", "not",
                                          "builtins.abs", "builtins.min", "builtins.max", "builtins.bool"}


def test_numba_safe_math():
    _all()  # Numba gives nan or inf where Python's math raises
    assert rules_with("numba_safe") == {f"math.{f}" for f in (
        "exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh", "atan", "asin", "acos",
        "atan2", "hypot", "fabs", "pow", "log10", "log2")}


def test_never_raising_reductions():
    _all()  # an empty float array gives 0, 1 or nan: not max/min
    assert rules_with("array_safe") == {"numpy.sum", "numpy.mean", "numpy.prod"}


def test_value_numbered_and_size_arithmetic():
    _all()
    ops = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "lt", "le", "gt", "ge", "eq", "ne"}
    maths = {k for k in REGISTRY if k.startswith("math.")}
    assert rules_with("value_numbered") == frozenset(ops | maths | {"zymo.dim"})
    assert rules_with("size_arith") == rules_with("overflows") == {"add", "sub", "mul"}


def test_never_raising_rules():
    _all()
    assert rules_with("may_raise") == frozenset(REGISTRY) - {
        "zymo.dim", "zymo.or", "zymo.and", "zymo.trip", "zymo.span", "numpy.shape", "builtins.len", "builtins.print",
        "zymo.rt.fp_raises"}


def test_int_arithmetic_sizes_and_shapes():
    _all()  # read by analysis/bounds.py and analysis/shapes.py
    assert rules_with("int_arith") == {"add", "sub", "mul", "floordiv", "mod", "neg", "pos"}
    assert rules_with("size") == {"zymo.dim", "builtins.len", "numpy.size", "zymo.trip", "zymo.span"}
    assert rules_with("keeps_shape") == {"matmul", "numpy.matmul", "numpy.dot", "numpy.copy", "numpy.zeros_like",
                                         "numpy.ones_like", "numpy.empty_like"}
    assert rules_with("data_shaped") == {"numpy.repeat", "numpy.arange", "numpy.linspace", "numpy.histogram"}
    assert rules_with("matrix_product") == {"matmul", "numpy.matmul", "numpy.dot"}
