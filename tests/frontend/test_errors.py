"""Errors: unsupported code names the user's file, line and a hint; API misuse is
refused before any work is done.

The line each error must point at is marked in the source with a `# <-` comment,
so the expected line number is computed, never hard-coded.
"""
from __future__ import annotations

import inspect
import math
import os

import numpy as np
import pytest

import zymo
from zymo import Active, Const, Duplicated, DuplicatedNoNeed, Forward, ForwardWithPrimal, Reverse, ReverseWithPrimal

THIS_FILE = os.path.basename(__file__)


def marked_line(fn, marker: str = "# <-") -> int:
    """The line number, in this file, of the line of `fn` that carries `marker`."""
    lines, first = inspect.getsourcelines(fn)
    hits = [first + k for k, text in enumerate(lines) if marker in text]
    assert len(hits) == 1, f"{fn.__name__}: expected one line marked {marker!r}, found {hits}"
    return hits[0]


def assert_points_at(err: Exception, fn, marker: str = "# <-", hint: bool = True) -> None:
    msg = str(err)
    line = marked_line(fn, marker)
    assert isinstance(err, zymo.ZymoSourceError)
    assert THIS_FILE in msg, f"the message does not name {THIS_FILE}:\n{msg}"
    assert f"line {line}" in msg, f"the message does not name line {line}:\n{msg}"
    assert err.loc.line == line and os.path.basename(err.loc.file) == THIS_FILE
    if hint:
        assert "Hint:" in msg and err.hint, f"the message has no hint:\n{msg}"


def call_reverse(f, *args):
    return zymo.autodiff(Reverse, f, Active, *args)


def call_forward(f, *args):
    fwd = [Duplicated(a.val, 1.0) if isinstance(a, Active) else a for a in args]
    return zymo.autodiff(Forward, f, Duplicated, *fwd)


MODES = [pytest.param(call_reverse, id="reverse"), pytest.param(call_forward, id="forward")]


# ============================================================================
# unsupported constructs
# ============================================================================

def uses_try(x):
    y = x * 2.0
    try:
        y = y / x
    except ZeroDivisionError as err:  # <-  (a handler that reads the exception)
        y = err
    return y


def uses_yield(x):
    y = x * 2.0
    yield y  # <-


def uses_yield_in_loop(x):
    for i in range(3):
        if i > 1:
            yield x * i  # <-


TOTAL = 0.0


def writes_global(x):
    global TOTAL  # <-
    TOTAL = x * 2.0
    return TOTAL


def recursive(x, n):
    if n <= 0:
        return x
    return recursive(x * x, n - 1) + x  # <-


def ping(x, n):
    if n <= 0:
        return x
    return pong(x, n - 1) * 2.0


def pong(x, n):
    return ping(x * x, n)  # <-


def uses_with(x):
    y = x
    with open_manager(x):  # <-  (a manager zymo does not know)
        y = np.sqrt(x)
    return y


def open_manager(x):
    return open(os.devnull)


def calls_unsupported_numpy(A):
    B = np.linalg.pinv(A)  # <-
    return np.sum(B)


def calls_unsupported_math(x):
    return math.gamma(x) + x  # <-


def calls_unsupported_builtin(x):
    y = sorted(x)  # <-
    return y[0]


def uses_list_comprehension(x):
    ys = [v * w for v in x for w in x]  # <-  (nested loops of run-time length: the length is unknown)
    return ys[0]


def uses_complex_maximum(x):
    z = x * 2.0
    w = np.maximum(z + 1j, 2.0)  # <-  (a comparison of complex numbers: refused, rules/complex.py)
    return w


def caller_of_bad_callee(x):
    return x + uses_try(x)


def nested_unsupported_call(x):
    def inner(v):
        return math.gamma(v)  # <-
    return inner(x) * 2.0


def lambda_with_comprehension(x):
    g = lambda v: len({v for _ in range(2)}) * v  # <-  # noqa: E731  (a set comprehension)
    return g(x)


def nested_try(x):
    def inner(v):
        try:
            return math.sqrt(v)
        except ValueError as e:  # <-
            return e
    return inner(x)


def nested_recursion(x):
    def rec(v, n):
        if n == 0:
            return v
        return rec(v, n - 1) * v  # <-
    return rec(x, 2)


def nested_yield(x):
    def gen(v):
        yield v  # <-
    return gen(x)


UNSUPPORTED = [
    (uses_try, zymo.UnsupportedSyntax, (Active(1.5),)),
    (uses_yield, zymo.UnsupportedSyntax, (Active(1.5),)),
    (uses_yield_in_loop, zymo.UnsupportedSyntax, (Active(1.5),)),
    (writes_global, zymo.UnsupportedSyntax, (Active(1.5),)),
    (recursive, zymo.UnsupportedCall, (Active(1.5), 3)),
    (ping, zymo.UnsupportedCall, (Active(1.5), 3)),
    (uses_with, zymo.UnsupportedSyntax, (Active(1.5),)),
    (calls_unsupported_math, zymo.UnsupportedCall, (Active(1.5),)),
    (uses_complex_maximum, zymo.ZymoTypeError, (Active(1.5),)),
]


@pytest.mark.parametrize("call", MODES)
@pytest.mark.parametrize("fn,err,args", UNSUPPORTED, ids=[u[0].__name__ for u in UNSUPPORTED])
def test_unsupported_construct_on_scalars(call, fn, err, args):
    with pytest.raises(err) as info:
        call(fn, *args)
    where = pong if fn is ping else fn          # mutual recursion is caught where it closes
    assert_points_at(info.value, where)


def dup(x):
    return Duplicated(x, zymo.make_zero(x))


ARRAY_CASES = [
    (calls_unsupported_numpy, zymo.UnsupportedCall, lambda: np.eye(2) * 2.0),
    (calls_unsupported_builtin, zymo.UnsupportedCall, lambda: np.array([2.0, 1.0])),
    (uses_list_comprehension, zymo.UnsupportedSyntax, lambda: np.array([2.0, 1.0])),
]


@pytest.mark.parametrize("mode", [Reverse, Forward])
@pytest.mark.parametrize("fn,err,make", ARRAY_CASES, ids=[u[0].__name__ for u in ARRAY_CASES])
def test_unsupported_construct_on_arrays(mode, fn, err, make):
    x = make()
    with pytest.raises(err) as info:
        zymo.autodiff(mode, fn, Active if mode is Reverse else Duplicated, dup(x))
    assert_points_at(info.value, fn)


NESTED = [
    (nested_unsupported_call, zymo.UnsupportedCall),
    (lambda_with_comprehension, zymo.UnsupportedSyntax),
    (nested_try, zymo.UnsupportedSyntax),
    (nested_recursion, zymo.UnsupportedCall),
    (nested_yield, zymo.UnsupportedSyntax),
]


@pytest.mark.parametrize("call", MODES)
@pytest.mark.parametrize("fn,err", NESTED, ids=[n[0].__name__ for n in NESTED])
def test_errors_inside_nested_functions_and_lambdas(call, fn, err):
    with pytest.raises(err) as info:
        call(fn, Active(1.5))
    assert_points_at(info.value, fn)


def test_error_in_a_callee_points_into_the_callee():
    with pytest.raises(zymo.UnsupportedSyntax) as info:
        call_reverse(caller_of_bad_callee, Active(1.5))
    assert_points_at(info.value, uses_try)


def test_unsupported_call_names_the_function():
    with pytest.raises(zymo.UnsupportedCall) as info:
        zymo.autodiff(Reverse, calls_unsupported_numpy, Active, dup(np.eye(2)))
    assert "pinv" in str(info.value)
    with pytest.raises(zymo.UnsupportedCall) as info:
        call_reverse(calls_unsupported_math, Active(1.5))
    assert "gamma" in str(info.value)


def test_recursion_error_says_recursion():
    with pytest.raises(zymo.UnsupportedCall) as info:
        call_reverse(recursive, Active(1.5), 2)
    assert "recurs" in str(info.value).lower()


def test_errors_are_source_errors_and_refused_every_time():
    # the failure is not cached as a success: a second call raises the same error
    for _ in range(2):
        with pytest.raises(zymo.ZymoSourceError) as info:
            call_reverse(uses_try, Active(1.5))
        assert_points_at(info.value, uses_try)


def add_complex(x, z):
    return x * z


def test_complex_argument():
    """Complex arguments are differentiated now (tests/rules/test_complex.py); a real input's adjoint
    from a complex result is the real part (JAX's convention)."""
    ((g, _),) = zymo.autodiff(Reverse, add_complex, Active, Active(1.5), Const(1.0 + 2.0j))
    assert g == 1.0
    with pytest.raises(zymo.ZymoTypeError) as info:
        zymo.autodiff(Reverse, lambda x, z: x * np.sign(z), Active, Active(1.5), Const(1.0 + 2.0j))
    msg = str(info.value)
    assert "complex" in msg and "Hint:" in msg


CAPTURED_Z = 2.0 + 1.0j


def reads_complex_global(x):
    return x * CAPTURED_Z  # <-


def test_complex_captured_global():
    ((g,),) = zymo.autodiff(Reverse, reads_complex_global, Active, Active(1.5))
    assert g == 2.0  # Re(CAPTURED_Z): the adjoint of a real input of a complex product


# ============================================================================
# functions without readable source
# ============================================================================

def _make_exec_function():
    ns: dict = {}
    exec("def made_by_exec(x):\n    return x * x\n", ns)
    return ns["made_by_exec"]


@pytest.mark.parametrize("mode", [Reverse, Forward])
def test_function_without_source(mode):
    f = _make_exec_function()
    assert f(3.0) == 9.0
    arg = Active(1.5) if mode is Reverse else Duplicated(1.5, 1.0)
    with pytest.raises(zymo.ZymoSourceError) as info:
        zymo.autodiff(mode, f, Active if mode is Reverse else Duplicated, arg)
    msg = str(info.value)
    assert "made_by_exec" in msg and "source" in msg
    assert "Hint:" in msg and "exec" in msg


def test_not_a_python_function():
    """A callable with neither source nor a rule is refused (one with a rule, np.sin, is
    differentiated through it: tests/api/test_signatures.py)."""
    with pytest.raises(zymo.ZymoSourceError) as info:
        zymo.autodiff(Reverse, np.frompyfunc(math.sin, 1, 1), Active, Active(1.5))
    assert "Hint:" in str(info.value)


# ============================================================================
# API misuse: ZymoUsageError before the function runs
# ============================================================================

COUNTER = np.zeros(1)


def counted(x):
    COUNTER[0] += 1.0
    return np.sum(x * x)


def counted_scalar(x):
    COUNTER[0] += 1.0
    return x * x


def counted_array_ret(x):
    COUNTER[0] += 1.0
    return x * 2.0


def counted_two(x, y):
    COUNTER[0] += 1.0
    return np.sum(x * y)


def _count():
    return int(COUNTER[0])


def test_counter_counts_valid_calls():
    before = _count()
    x = np.ones(3)
    zymo.autodiff(Reverse, counted, Active, Duplicated(x, np.zeros(3)))
    zymo.autodiff(Forward, counted, Duplicated, Duplicated(x, np.ones(3)))
    assert _count() == before + 2


X = np.ones(3)
MISUSE = {
    "active_array": lambda: zymo.autodiff(Reverse, counted, Active, Active(X.copy())),
    "active_list": lambda: zymo.autodiff(Reverse, counted, Active, Active([X.copy()])),
    "active_tuple_with_array": lambda: zymo.autodiff(Reverse, counted, Active, Active((X.copy(), 1.0))),
    "active_in_forward": lambda: zymo.autodiff(Forward, counted_scalar, Duplicated, Active(1.5)),
    "active_array_in_forward": lambda: zymo.autodiff(Forward, counted, Duplicated, Active(X.copy())),
    "shadow_shape": lambda: zymo.autodiff(Reverse, counted, Active, Duplicated(X.copy(), np.zeros(4))),
    "shadow_ndim": lambda: zymo.autodiff(Reverse, counted, Active, Duplicated(X.copy(), np.zeros((3, 1)))),
    "shadow_dtype": lambda: zymo.autodiff(Reverse, counted, Active,
                                          Duplicated(X.copy(), np.zeros(3, dtype=np.float32))),
    "shadow_dtype_forward": lambda: zymo.autodiff(Forward, counted, Duplicated,
                                                  Duplicated(X.copy(), np.zeros(3, dtype=np.float32))),
    "shadow_not_array": lambda: zymo.autodiff(Reverse, counted, Active, Duplicated(X.copy(), 0.0)),
    "shadow_is_primal": lambda: (lambda x: zymo.autodiff(Reverse, counted, Active, Duplicated(x, x)))(X.copy()),
    "shadow_list_length": lambda: zymo.autodiff(Reverse, counted, Active,
                                                Duplicated([X.copy(), X.copy()], [np.zeros(3)])),
    "shadow_second_arg": lambda: zymo.autodiff(Reverse, counted_two, Active, Duplicated(X.copy(), np.zeros(3)),
                                               Duplicated(X.copy(), np.zeros(2))),
    "duplicated_float_in_reverse": lambda: zymo.autodiff(Reverse, counted_scalar, Active, Duplicated(1.5, 0.0)),
    "annotation_class": lambda: zymo.autodiff(Reverse, counted_scalar, Active, Active),
    "return_duplicated_in_reverse": lambda: zymo.autodiff(Reverse, counted_scalar, Duplicated, Active(1.5)),
    "return_active_in_forward": lambda: zymo.autodiff(Forward, counted_scalar, Active, Duplicated(1.5, 1.0)),
    "bad_return_activity": lambda: zymo.autodiff(Reverse, counted_scalar, float, Active(1.5)),
    "bad_mode": lambda: zymo.autodiff("Reverse", counted_scalar, Active, Active(1.5)),
    "active_return_of_array": lambda: zymo.autodiff(Reverse, counted_array_ret, Active,
                                                    Duplicated(X.copy(), np.zeros(3))),
    "with_primal_active_array": lambda: zymo.autodiff(ReverseWithPrimal, counted, Active, Active(X.copy())),
    "forward_with_primal_active": lambda: zymo.autodiff(ForwardWithPrimal, counted_scalar, Duplicated,
                                                        Active(1.5)),
    "tuple_shadow_length": lambda: zymo.autodiff(Reverse, counted_two, Const,
                                                 Duplicated((X.copy(), X.copy()), (np.zeros(3),)), 1.0),
    "tuple_shadow_shape": lambda: zymo.autodiff(Reverse, counted_two, Const,
                                                Duplicated((X.copy(), X.copy()), (np.zeros(3), np.zeros(2))), 1.0),
    "list_shadow_element_shape": lambda: zymo.autodiff(Reverse, counted, Active,
                                                       Duplicated([X.copy(), X.copy()], [np.zeros(3), np.zeros(4)])),
    "list_shadow_is_tuple": lambda: zymo.autodiff(Reverse, counted, Active,
                                                  Duplicated([X.copy()], (np.zeros(3),))),
    "noneed_shadow_shape": lambda: zymo.autodiff(Forward, counted, Duplicated,
                                                 DuplicatedNoNeed(X.copy(), np.zeros(2))),
}


@pytest.mark.parametrize("case", sorted(MISUSE))
def test_api_misuse_raises_usage_error_before_running(case):
    before = _count()
    with pytest.raises(zymo.ZymoUsageError) as info:
        MISUSE[case]()
    assert _count() == before, "the function body ran before the misuse was reported"
    assert str(info.value)                       # a message, not an empty error
    assert isinstance(info.value, zymo.ZymoError)


def test_usage_error_messages_are_helpful():
    with pytest.raises(zymo.ZymoUsageError, match="Duplicated"):
        zymo.autodiff(Reverse, counted, Active, Active(np.ones(3)))
    with pytest.raises(zymo.ZymoUsageError, match="shape|dtype"):
        zymo.autodiff(Reverse, counted, Active, Duplicated(np.ones(3), np.zeros(4)))
    with pytest.raises(zymo.ZymoUsageError, match="argument 1"):
        zymo.autodiff(Reverse, counted_two, Active, Duplicated(np.ones(3), np.zeros(3)),
                      Duplicated(np.ones(3), np.zeros(2)))
    with pytest.raises(zymo.ZymoUsageError, match="forward"):
        zymo.autodiff(Forward, counted_scalar, Duplicated, Active(1.5))


def test_gradient_misuse_does_not_run():
    before = _count()
    with pytest.raises(zymo.ZymoUsageError):
        zymo.gradient(Reverse, counted_array_ret, np.ones(3))   # no float to differentiate
    assert _count() == before


def _total(a):
    return np.sum(a)


def _square_rows(a):
    for i in range(a.shape[0]):
        a[i, 0] = a[i, 0] * a[i, 0]
    return np.sum(a)


def test_a_writable_self_overlapping_array_is_refused():
    """Element-precise reasoning takes different indices to name different elements: an
    `as_strided` view whose elements overlap would get a silently wrong gradient, so it is
    refused with a hint, for the argument and for its shadow; a read-only one is accepted."""
    from numpy.lib.stride_tricks import as_strided

    base = np.linspace(0.5, 1.5, 8)
    overlapping = as_strided(base, (3, 4), (8, 8))
    with pytest.raises(zymo.ZymoUsageError, match="overlap in memory.*np.array"):
        zymo.autodiff(Reverse, _square_rows, Active, Duplicated(overlapping, np.zeros((3, 4))))
    a = np.linspace(0.5, 1.5, 12).reshape(3, 4)
    with pytest.raises(zymo.ZymoUsageError, match="the shadow of argument 0"):
        zymo.autodiff(Reverse, _square_rows, Active, Duplicated(a, as_strided(np.zeros(8), (3, 4), (8, 8))))
    read_only = as_strided(base, (3, 4), (8, 8), writeable=False)
    (y,) = zymo.autodiff(ReverseWithPrimal, _total, Active, Const(read_only))[1:]
    assert y == pytest.approx(np.sum(read_only))
    # views NumPy makes (strided, reversed, transposed) are accepted
    view = np.linspace(0.5, 1.5, 24).reshape(4, 6)[::2, ::-2]
    dv, expected = np.zeros_like(view), 2 * view[0, 0]
    zymo.autodiff(Reverse, _square_rows, Active, Duplicated(view, dv))
    assert dv[0, 0] == pytest.approx(expected) and dv[0, 1] == 1.0


def _scale_and_sum(x, y):
    s = 0.0
    for i in range(x.shape[0]):
        x[i] = x[i] * y[i]
        s = s + x[i]
    return s


def test_a_stride_zero_buffer_is_refused_not_differentiated_wrongly():
    """Before the refusal, a stride-0 writable `x` gave dy = [1.5, 3, 9] (the true gradient,
    every write landing on one element, is [24, 15, 9])."""
    from numpy.lib.stride_tricks import as_strided

    x = as_strided(np.array([1.5, 7.0]), (3,), (0,))
    with pytest.raises(zymo.ZymoUsageError, match="overlap in memory"):
        zymo.autodiff(Reverse, _scale_and_sum, Active, Const(x), Duplicated(np.array([2.0, 3.0, 4.0]), np.zeros(3)))


def extends_a_list_argument(x, a, b):
    c = a
    a += b  # <- list.extend in place: `c` sees it
    return x[0] * len(c)


def test_augmented_assignment_to_a_list_is_refused_not_dropped():
    # it was lowered as `a = a + b`, leaving the alias `c` behind: a gradient of 1 where
    # Python's is 3
    x = np.array([1.0, 2.0])
    assert extends_a_list_argument(x, [1.0], [2.0, 3.0]) == 3.0
    with pytest.raises(zymo.UnsupportedSyntax, match="list") as info:
        zymo.autodiff(Reverse, extends_a_list_argument, Active, dup(x), Const([1.0]), Const([2.0, 3.0]))
    assert_points_at(info.value, extends_a_list_argument)
    assert "a = a + b" in str(info.value)


def test_a_read_only_shadow_is_refused_naming_the_argument():
    x = np.ones(3)
    dx = np.broadcast_to(np.zeros(1), (3,))
    with pytest.raises(zymo.ZymoUsageError, match="argument 0: the shadow is a read-only array"):
        zymo.autodiff(Reverse, np.sum, Active, Duplicated(x, dx))
