"""The facts rules declare (`rules/registry.py`: pure, may_raise, numbers_safe, ...) against
the name tables of the consumers that have not switched to them yet: each table must be the
set of rules that declare its fact, so the consumer can ask the rule instead."""
from __future__ import annotations

from zymo.rules.registry import REGISTRY, load_all, rules_with


def _all() -> None:
    load_all()


def test_cheap_is_reverse_cheap():
    from zymo.transform.reverse.tables import _CHEAP

    _all()
    assert rules_with("cheap") == frozenset(_CHEAP)


def test_effects_are_the_impure_rules():
    from zymo.transform.reverse.tables import _EFFECTS

    _all()
    random = frozenset(k for k in REGISTRY if k.startswith("numpy.random."))  # reverse.py tests the prefix
    assert rules_with("pure") == frozenset(REGISTRY) - _EFFECTS - random


def test_safe_ops_are_the_rules_safe_on_numbers():
    from zymo.transform.reverse.tables import _SAFE_OPS

    _all()
    # float() and bool() of a number never raise either; reverse.py does not list them
    assert rules_with("numbers_safe") - {"builtins.float", "builtins.bool"} == frozenset(_SAFE_OPS)


def test_numba_safe_math():
    from zymo.transform.reverse.tables import _NUMBA_SAFE_MATH

    _all()
    assert rules_with("numba_safe") == frozenset(_NUMBA_SAFE_MATH)


def test_never_raising_reductions():
    from zymo.transform.reverse.tables import _NEVER_RAISING_REDUCTIONS

    _all()
    assert rules_with("array_safe") == frozenset(_NEVER_RAISING_REDUCTIONS)


def test_value_numbered_and_size_arithmetic():
    _all()
    ops = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "lt", "le", "gt", "ge", "eq", "ne"}
    maths = {k for k in REGISTRY if k.startswith("math.")}
    assert rules_with("value_numbered") == frozenset(ops | maths | {"zymo.dim"})
    assert rules_with("size_arith") == rules_with("overflows") == {"add", "sub", "mul"}


def test_never_raising_rules():
    _all()
    assert rules_with("may_raise") == frozenset(REGISTRY) - {
        "zymo.dim", "zymo.or", "zymo.and", "zymo.trip", "zymo.span", "numpy.shape", "builtins.len", "builtins.print"}
