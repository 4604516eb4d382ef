"""The IR: lowering output (golden text), the printer, and the verifier."""
import math

import numpy as np
import pytest

import zymo
from zymo.errors import Loc
from zymo.ir import types as T
from zymo.ir.core import Block, Function, Op, Value
from zymo.ir.verify import IRVerifyError, verify


def sumsq(x):
    s = 0.0
    for i in range(len(x)):
        x[i] = x[i] ** 2
        s += x[i]
    return s


SUMSQ_IR = """\
func sumsq(%x: f64[:])
  %s: f64 = const 0.0
  %n: int = zymo.dim(%x, 0)
  %start: int = const 0
  %step: int = const 1
  %s.1: f64 = for %i in range(%start, %n, %step) carry(%s.2 = %s):
    %x.1: f64 = getitem %x[%i]
    %c: int = const 2
    %t: f64 = pow(%x.1, %c)
    setitem %x[%i] <- %t
    %x.2: f64 = getitem %x[%i]
    %t.1: f64 = add(%s.2, %x.2)
    yield %t.1
  return %s.1"""


def test_lowering_golden():
    assert str(zymo.ir(sumsq, np.ones(3))) == SUMSQ_IR


def reused_loop_variable(x, y):
    """`k` of the first inner loop is carried into the second and through the outer loop (Python
    keeps a loop variable after its loop), but nothing reads it."""
    s = 0.0
    for k in range(x.shape[1]):
        y[k] = 1.0
    for i in range(x.shape[0]):
        for k in range(x.shape[1]):
            y[k] = y[k] * x[i, k]
        for k in range(x.shape[1]):
            s += y[k] * x[i, k]
    return s


def test_loop_variables_carried_only_into_each_other_are_dropped():
    from zymo.testing import check_grad

    f = zymo.ir(reused_loop_variable, np.ones((3, 4)), np.zeros(4))
    verify(f)
    text = str(f)
    assert "undef" not in text and text.count("carry()") == 2  # the loops that only write y
    assert "for %i.1 in range(%start.1, %n, %step.1) carry(%s.2 = %s):" in text  # the outer one: s
    rng = np.random.default_rng(2)
    check_grad(reused_loop_variable, rng.standard_normal((3, 4)), np.zeros(4))


def window_sums(A, m):
    """Sizes read inside loops: hoisted (`hoist_sizes`) unless they read what the loop makes."""
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1] - m):
            s += A[i, j] * A[i, j + m]
        row = A[i] * 2.0
        for k in range(row.shape[0] // 2):
            s += row[k] * A[i, k]
    return s


def test_sizes_are_read_before_the_loops_that_do_not_change_them():
    from zymo.testing import check_grad

    f = zymo.ir(window_sums, np.ones((3, 5)), 2)
    verify(f)
    top = [str(op) for op in f.body.ops]
    outer = next(op for op in f.body.ops if op.kind == "for")
    hoisted = f.body.ops[:f.body.ops.index(outer)]
    assert [op.attrs["key"] for op in hoisted if op.kind == "prim"] == ["zymo.dim", "zymo.dim", "sub"], top
    body = str(f).split("carry(%s.2 = %s):")[1]
    # `row` is made in the loop: its size, and the floor division (which may raise), stay there
    assert "zymo.dim(%row, 0)" in body and "floordiv(" in body
    rng = np.random.default_rng(3)
    check_grad(window_sums, rng.standard_normal((3, 5)), 2, const=(1,))


def repeated_numbers(x, dt, flag):
    """`0.5 * dt` three times (one value); a branch's computation is not reused after it;
    arrays computed twice stay two memories."""
    a = x * 2.0
    b = x * 2.0
    a[0] = 5.0
    s = 0.0
    for i in range(x.shape[0]):
        k1 = x[i] + 0.5 * dt * x[i]
        k2 = k1 + 0.5 * dt * k1
        s += k2 + 0.5 * dt
    if flag > 0:
        u = math.sin(dt) * 3.0
    else:
        u = 1.0
    v = math.sin(dt) * 3.0
    return s + u * v + b[0] + a[0] * x[1]


def test_numbers_computed_twice_are_computed_once():
    from zymo.testing import check_grad

    f = zymo.ir(repeated_numbers, np.ones(3), 0.1, 1)
    verify(f)
    text = str(f)
    assert text.count("= mul(%c.4, %dt)") == 1 and "f64[:] = mul(%x, %c.1)" in text  # arrays: two
    assert text.count("math.sin(") == 2  # the branch's sine is not the one after it
    rng = np.random.default_rng(4)
    for flag in (1, -1):
        got = check_grad(repeated_numbers, rng.standard_normal(4), 0.3, flag, const=(2,))
        assert np.abs(got.reverse[0]).max() > 0.1
        assert np.abs(got.reverse[1]) > 0.1


def early(x, n):
    i = 0
    while i < n:
        if x > 3.0:
            break
        x = x * 2.0
        i += 1
    return x


def test_break_lowers_to_flag_and_verifies():
    f = zymo.ir(early, 1.0, 5)
    verify(f)
    text = str(f)
    assert "while carry(" in text and "condition" in text and "not(" in text


def test_types_follow_arguments():
    f32 = zymo.ir(sumsq, np.ones(3, np.float32))
    assert "f32[:]" in str(f32)
    f2 = zymo.ir(lambda a: a.sum(), np.ones((2, 2)))
    assert f2.params[0].type == T.Array("float64", 2)


def test_int_accumulator_becomes_float_in_loop():
    def acc(x):
        s = 0
        for _i in range(3):
            s = s + x
        return s

    f = zymo.ir(acc, 1.5)
    verify(f)
    assert f.body.ops[-1].args[0].type == T.F64


LOC = Loc("t.py", 1)


def test_verifier_rejects_use_before_definition():
    x = Value(T.F64, "x")
    ghost = Value(T.F64, "ghost")
    r = Value(T.F64, "r")
    body = Block([], [Op("prim", [x, ghost], [r], LOC, {"key": "add", "pos": (("v", 0), ("v", 1)), "kw": ()}),
                      Op("return", [r], [], LOC)])
    with pytest.raises(IRVerifyError, match="before it is defined"):
        verify(Function("f", [x], body, LOC))


def test_verifier_rejects_missing_terminator_and_bad_yield():
    x = Value(T.F64, "x")
    with pytest.raises(IRVerifyError, match="must end with return"):
        verify(Function("f", [x], Block([], []), LOC))
    c = Value(T.BOOL, "c", const=True)
    r = Value(T.F64, "r")
    then = Block([], [Op("yield", [x], [], LOC)])
    orelse = Block([], [Op("yield", [], [], LOC)])
    body = Block([], [Op("const", [], [c], LOC, {"value": True}),
                      Op("if", [c], [r], LOC, regions=[then, orelse]), Op("return", [r], [], LOC)])
    with pytest.raises(IRVerifyError, match="yields 0 values"):
        verify(Function("f", [x], body, LOC))


def test_verifier_rejects_unknown_rule():
    x = Value(T.F64, "x")
    r = Value(T.F64, "r")
    body = Block([], [Op("prim", [x], [r], LOC, {"key": "numpy.nonexistent", "pos": (("v", 0),), "kw": ()}),
                      Op("return", [r], [], LOC)])
    with pytest.raises(KeyError, match="no derivative rule"):
        verify(Function("f", [x], body, LOC))
