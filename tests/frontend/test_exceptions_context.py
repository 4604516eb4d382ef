"""raise/assert as input checks, try/except/else/finally, with statements, for/else and
while/else, and the refusals around them (async functions, generators, exec).

Every construct is checked in forward and reverse mode against central differences and
against the other mode (`zymo.testing.check_grad`), under the Python backend and, where the construct
compiles, under Numba (`set_numba("always")`); the primal's exceptions come through zymo
with the same type and message; refusals name this file and the marked line (`# <-`).
"""
from __future__ import annotations

import contextlib
import inspect
import math
import os
import warnings

import numpy as np
import pytest

import zymo
from zymo import Active, Const, Duplicated, Forward, Reverse, ReverseWithPrimal
from zymo.config import set_numba
from zymo.testing import check_grad

THIS_FILE = os.path.basename(__file__)


@pytest.fixture(scope="module", autouse=True)
def private_cache_dir(tmp_path_factory):
    """Numba programs compiled afresh (not read from an earlier run's disk cache)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZYMO_CACHE_DIR", str(tmp_path_factory.mktemp("zymo_cache")))
        yield


@pytest.fixture(autouse=True)
def default_policy(monkeypatch):
    monkeypatch.delenv("ZYMO_NUMBA", raising=False)
    set_numba(None)
    yield
    set_numba(None)


def marked_line(fn, marker: str = "# <-") -> int:
    lines, first = inspect.getsourcelines(fn)
    hits = [first + k for k, text in enumerate(lines) if marker in text]
    assert len(hits) == 1, hits
    return hits[0]


def assert_points_at(err: Exception, fn, marker: str = "# <-") -> None:
    msg = str(err)
    line = marked_line(fn, marker)
    assert isinstance(err, zymo.ZymoSourceError), type(err)
    assert THIS_FILE in msg and f"line {line}" in msg, msg
    assert err.loc.line == line and os.path.basename(err.loc.file) == THIS_FILE
    assert "Hint:" in msg and err.hint, msg


BACKENDS = [pytest.param("never", id="python"), pytest.param("always", id="numba")]


def numba_or_skip(policy: str) -> None:
    if policy == "always":
        pytest.importorskip("numba")
    set_numba(policy)


def grad(f, *args, **kw):
    return zymo.gradient(Reverse, f, *args, **kw)


# ============================================================================
# 1. async functions and generators are refused
# ============================================================================

async def coroutine(x):  # <-
    return x * x


async def async_generator(x):  # <-
    yield x * x


def generator(x):
    y = x * 2.0
    yield y  # <-


@pytest.mark.parametrize("fn", [coroutine, async_generator, generator])
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_async_functions_and_generators_are_refused(fn, mode):
    with pytest.raises(zymo.UnsupportedSyntax) as info:
        if mode == "reverse":
            zymo.autodiff(Reverse, fn, Active, Active(3.0))
        else:
            zymo.autodiff(Forward, fn, Duplicated, Duplicated(3.0, 1.0))
    assert_points_at(info.value, fn)
    kind = {coroutine: "async function", async_generator: "async generator", generator: "generator"}[fn]
    assert kind in str(info.value)


def test_a_function_made_by_exec_is_refused_saying_so():
    ns: dict = {}
    src = "def made(x):\n    for i in range(2):\n        x = x * 2.0\n    else:\n        x = x + 1.0\n    return x\n"
    exec(src, ns)
    with pytest.raises(zymo.ZymoSourceError) as info:
        zymo.autodiff(Reverse, ns["made"], Active, Active(3.0))
    msg = str(info.value)
    assert "<string>" in msg and "exec" in msg and "Hint:" in msg


def test_a_function_compiled_under_another_files_name_is_refused_saying_so():
    ns: dict = {}
    exec(compile("def made(x):\n    return x * x\n", __file__, "exec"), ns)  # not this file's text
    with pytest.raises(zymo.ZymoSourceError) as info:
        zymo.autodiff(Reverse, ns["made"], Active, Active(3.0))
    assert THIS_FILE in str(info.value) and "exec" in str(info.value)


# ============================================================================
# 2. raise and assert: input checks that run in the primal
# ============================================================================

def cubes(x, n):
    if n <= 0:
        raise ValueError("n must be positive")
    assert x.ndim == 1, "x must be 1-d"
    s = 0.0
    for i in range(n):
        if x[i] < -100.0:
            raise ValueError("an element is below -100")
        s = s + x[i] * x[i] * x[i]
    return s


def checked_scale(x, a):
    assert a > 0.0, "a must be positive"
    return a * np.sum(x * x)


def checks_a_result(x):
    s = np.sum(x)
    if s > 10.0:
        raise OverflowError("the sum is above 10")
    return s * s


@pytest.mark.slow
@pytest.mark.parametrize("policy", BACKENDS)
def test_raise_and_assert_have_no_derivative(policy):
    numba_or_skip(policy)
    x = np.array([1.0, -2.0, 0.5])
    check_grad(cubes, x, 3, const=(1,))
    check_grad(checked_scale, x, 1.5)
    check_grad(checks_a_result, x)
    np.testing.assert_allclose(grad(cubes, x, Const(3))[0], 3.0 * x * x)  # not zero, not negated
    np.testing.assert_allclose(grad(checked_scale, x, 1.5)[1], np.sum(x * x))


@pytest.mark.parametrize("policy", BACKENDS)
def test_the_primal_raises_the_same_error_through_zymo(policy):
    numba_or_skip(policy)
    x = np.array([1.0, -2.0, 0.5])
    cases = [((x, Const(0)), ValueError, "n must be positive"),
             ((np.ones((2, 2)), Const(1)), AssertionError, "x must be 1-d"),
             ((np.array([1.0, -200.0]), Const(2)), ValueError, "an element is below -100")]
    for args, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            cubes(*[a.val if isinstance(a, Const) else a for a in args])
        with pytest.raises(exc, match=msg):
            grad(cubes, *args)
        with pytest.raises(exc, match=msg):
            zymo.autodiff(Forward, cubes, Duplicated, Duplicated(args[0], np.ones_like(args[0])), args[1])
    with pytest.raises(AssertionError, match="a must be positive"):
        zymo.autodiff(Reverse, checked_scale, Active, Duplicated(x, np.zeros(3)), Active(-1.0))


@pytest.mark.parametrize("policy", BACKENDS)
def test_a_check_runs_in_reverse_mode_without_the_primal(policy):
    """`Reverse` leaves out what only the return value needs; the check stays."""
    numba_or_skip(policy)
    big = np.full(3, 5.0)
    for mode in (Reverse, ReverseWithPrimal):
        with pytest.raises(OverflowError, match="the sum is above 10"):
            zymo.autodiff(mode, checks_a_result, Active, Duplicated(big, np.zeros(3)))
    dx = np.zeros(3)
    zymo.autodiff(Reverse, checks_a_result, Active, Duplicated(np.ones(3), dx))
    np.testing.assert_allclose(dx, 6.0)


def test_raise_and_assert_compile_under_numba():
    pytest.importorskip("numba")
    set_numba("always")
    grad(cubes, np.ones(3), Const(2))
    entries = [c for key, cs in zymo.cache.COMPILED.items() for c in cs
               if key[0][0] is cubes and c.backend != "python"]
    assert entries and all(c.backend == "always" for c in entries) and any(c.checked for c in entries)
    assert all("raise ValueError('n must be positive')" in c.source for c in entries)


def fail(what):
    raise ValueError("bad input")


def checks_through_a_callee(x):
    if x[0] > 0.0:
        fail(1)
    return np.sum(x * x * x)


@pytest.mark.slow
@pytest.mark.parametrize("policy", BACKENDS)
def test_a_callee_that_always_raises(policy):
    numba_or_skip(policy)
    x = np.array([-1.0, 2.0])
    check_grad(checks_through_a_callee, x)
    np.testing.assert_allclose(grad(checks_through_a_callee, x)[0], 3.0 * x * x)
    with pytest.raises(ValueError, match="bad input"):
        grad(checks_through_a_callee, -x)


@pytest.mark.slow
def test_asserts_are_not_evaluated_under_python_O(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "optimized.py"
    script.write_text("import numpy as np\nimport zymo\n\n\n"
                      "def f(x):\n    assert x.ndim == 2, 'never checked'\n    return np.sum(x * x)\n\n\n"
                      "print(zymo.gradient(zymo.Reverse, f, np.ones(2))[0].tolist())\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(zymo.__file__)))
    env = dict(os.environ, PYTHONPATH=root, ZYMO_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-O", str(script)], capture_output=True, text=True, env=env, check=False,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.0, 2.0]"


def raises_a_numpy_class(x):
    if x[0] < 0.0:
        raise np.linalg.LinAlgError("negative pivot")
    return np.sum(x * x)


@pytest.mark.parametrize("policy", BACKENDS)
def test_a_numpy_exception_class(policy):
    numba_or_skip(policy)
    np.testing.assert_allclose(grad(raises_a_numpy_class, np.array([1.0, 2.0]))[0], [2.0, 4.0])
    with pytest.raises(np.linalg.LinAlgError, match="negative pivot"):
        grad(raises_a_numpy_class, np.array([-1.0, 2.0]))


def try_catching_its_own_raise(x):
    try:
        if x[0] < 0.0:
            raise ValueError("negative")
        y = x * 2.0
    except ValueError:
        y = -x
    return np.sum(y * x)


@pytest.mark.slow
@pytest.mark.parametrize("policy", BACKENDS)
def test_a_try_that_catches_only_its_own_raise_compiles(policy):
    numba_or_skip(policy)
    for x, expect in ((np.array([1.0, 2.0]), [4.0, 8.0]), (np.array([-1.0, 2.0]), [2.0, -4.0])):
        check_grad(try_catching_its_own_raise, x)
        np.testing.assert_allclose(grad(try_catching_its_own_raise, x)[0], expect)


class InputError(Exception):
    pass


def raises_a_class_of_its_own(x):
    if x < 0.0:
        raise InputError("negative")
    return x * x


def test_a_user_exception_class_is_raised_and_keeps_python():
    assert grad(raises_a_class_of_its_own, 3.0) == (6.0,)
    with pytest.raises(InputError, match="negative"):
        grad(raises_a_class_of_its_own, -3.0)
    set_numba("prefer")
    with pytest.warns(zymo.ZymoWarning, match="InputError"):
        assert grad(raises_a_class_of_its_own, 2.0) == (4.0,)


def bare_raise(x):
    try:
        y = math.sqrt(x)
    except ValueError:
        raise  # <-
    return y


def raise_with_a_computed_message(x):
    if x < 0.0:
        raise ValueError(x)  # <-
    return x


def raise_an_instance(x):
    if x < 0.0:
        raise ERR  # <-
    return x


ERR = ValueError("negative")


@pytest.mark.parametrize("fn", [bare_raise, raise_with_a_computed_message, raise_an_instance])
def test_raises_zymo_cannot_write_are_refused(fn):
    with pytest.raises(zymo.UnsupportedSyntax) as info:
        grad(fn, -1.0)
    assert_points_at(info.value, fn)


# ============================================================================
# 3. try / except / else / finally
# ============================================================================

def solve_or_fallback(A, b):
    try:
        y = np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        y = 2.0 * b
    return np.sum(y * y)


def ratio(x, d):
    try:
        r = x / d
    except (ValueError, ZeroDivisionError):
        r = -x * x
    return r * x


def with_else_and_finally(A, b, out):
    try:
        y = np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        y = -b
    else:
        y = y * 3.0
    finally:
        out[0] = out[0] * b[0]
    return np.sum(y * b)


def returns_inside(x, d):
    try:
        return x / d
    except ZeroDivisionError:
        return -x * x


def several_handlers(x, d):
    try:
        if x > 10.0:
            raise ValueError("too large")
        r = math.log(x) / d
    except ZeroDivisionError:
        r = 3.0 * x
    except ValueError:
        r = -x
    return r * x


@pytest.mark.parametrize("singular", [False, True])
def test_try_except_records_the_path_taken(singular):
    A = np.zeros((2, 2)) if singular else np.array([[2.0, 0.5], [0.3, 1.5]])
    b = np.array([1.0, -2.0])
    check_grad(solve_or_fallback, A, b, const=(0,) if singular else ())
    y = 2.0 * b if singular else np.linalg.solve(A, b)
    db = 8.0 * b if singular else 2.0 * np.linalg.solve(A.T, y)
    np.testing.assert_allclose(grad(solve_or_fallback, Const(A), b)[1], db)


def test_try_except_with_a_tuple_of_handlers():
    out = check_grad(ratio, 1.5, 2.0)
    np.testing.assert_allclose(out.reverse, [2.0 * 1.5 / 2.0, -1.5 ** 2 / 2.0 ** 2])
    out = check_grad(ratio, 1.5, 0.0, const=(1,))
    np.testing.assert_allclose(out.reverse[0], -3.0 * 1.5 ** 2)  # the handler's path: -x**3


@pytest.mark.parametrize("singular", [False, True])
def test_try_with_else_and_finally(singular):
    A = np.zeros((2, 2)) if singular else np.array([[2.0, 0.5], [0.3, 1.5]])
    check_grad(with_else_and_finally, A, np.array([1.0, -2.0]), np.array([0.7, 0.2]),
          const=(0,) if singular else ())


def test_return_inside_try_and_several_handlers():
    np.testing.assert_allclose(check_grad(returns_inside, 1.5, 2.0).reverse, [0.5, -1.5 / 4.0])
    np.testing.assert_allclose(check_grad(returns_inside, 1.5, 0.0, const=(1,)).reverse[0], -3.0)
    np.testing.assert_allclose(check_grad(several_handlers, 2.0, 0.5).reverse[0], (math.log(2.0) + 1.0) / 0.5)
    np.testing.assert_allclose(check_grad(several_handlers, 2.0, 0.0, const=(1,)).reverse[0], 12.0)
    np.testing.assert_allclose(check_grad(several_handlers, 12.0, 1.0, const=(1,)).reverse[0], -24.0)
    np.testing.assert_allclose(check_grad(several_handlers, -2.0, 1.0, const=(1,)).reverse[0], 4.0)  # log: ValueError


def test_try_under_numba_falls_back_to_python_with_a_reason():
    pytest.importorskip("numba")
    set_numba("prefer")
    with pytest.warns(zymo.ZymoWarning, match="try/except"):
        (g,) = grad(ratio, 1.5, 0.0)[:1]
    assert g == -3.0 * 1.5 ** 2
    set_numba("always")
    with pytest.raises(zymo.ZymoSourceError, match="try/except") as info:
        grad(returns_inside, 1.5, 2.0)
    assert info.value.loc.line == inspect.getsourcelines(returns_inside)[1] + 2


def primal_error_not_caught(x, d):
    try:
        r = math.sqrt(x) / d
    except ZeroDivisionError:
        r = x
    return r


def test_an_exception_no_handler_catches_comes_through():
    with pytest.raises(ValueError, match="math domain error"):
        grad(primal_error_not_caught, -1.0, 2.0)
    assert grad(primal_error_not_caught, 4.0, 0.0) == (1.0, 0.0)


def try_in_a_loop(x, d):
    s = 0.0
    for i in range(x.shape[0]):
        try:
            s = s + float(x[i]) / float(d[i])  # Python floats: ZeroDivisionError, as the user's code
        except ZeroDivisionError:
            s = s - x[i] * x[i]
    return s


def test_a_try_in_a_loop_replays_each_iterations_path():
    x, d = np.array([1.0, 2.0, 3.0]), np.array([2.0, 0.0, 4.0])
    check_grad(try_in_a_loop, x, d, const=(1,))
    np.testing.assert_allclose(grad(try_in_a_loop, x, Const(d))[0], [0.5, -4.0, 0.25])
    d = np.array([0.0, 1.0, 0.0])
    np.testing.assert_allclose(grad(try_in_a_loop, x, Const(d))[0], [-2.0, 1.0, -6.0])


def random_in_try(x):
    try:
        y = x * np.random.standard_normal()  # <-
    except ValueError:
        y = x
    return y


def in_place_in_try(x, y):
    try:
        x += y  # <-
    except ValueError:
        x[0] = 0.0
    return np.sum(x)


def handler_reads_the_exception(x):
    try:
        y = math.sqrt(x)
    except ValueError as err:  # <-
        y = len(str(err)) * x
    return y


def caught_slice(x, k):
    try:
        y = np.sum(x[k:])  # <-
    except IndexError:
        y = 0.0
    return y


def caught_indexing(x, k):
    try:
        y = x[k]
    except IndexError:
        y = -x[0]
    return y * x[1]


def skips_bad_elements(x):
    s = 0.0
    for i in range(x.shape[0]):
        try:
            v = math.log(x[i])
        except ValueError:
            if i == 0:
                continue
            break
        s = s + v * x[i]
    else:
        s = s * 2.0
    return s


def test_a_caught_index_error_and_handlers_that_continue_or_break():
    x = np.array([1.5, 2.0, 3.0])
    check_grad(caught_indexing, x, 2, const=(1,))
    np.testing.assert_allclose(grad(caught_indexing, x, Const(2))[0], [0.0, 3.0, 2.0])
    check_grad(caught_indexing, x, 7, const=(1,))
    np.testing.assert_allclose(grad(caught_indexing, x, Const(7))[0], [-2.0, -1.5, 0.0])
    for x, expect in ((np.array([1.5, 2.0, 3.0]), 2.0 * (np.log([1.5, 2.0, 3.0]) + 1.0)),
                      (np.array([-1.0, 2.0, -3.0, 4.0]), [0.0, np.log(2.0) + 1.0, 0.0, 0.0]),
                      (np.array([1.5, -2.0, 3.0]), [np.log(1.5) + 1.0, 0.0, 0.0])):
        check_grad(skips_bad_elements, x)
        np.testing.assert_allclose(grad(skips_bad_elements, x)[0], expect)


def caught_in_a_loop(x):
    s = 0.0
    try:
        for i in range(3):
            s = s + math.log(x[i])  # <-
    except ValueError:
        s = -1.0
    return s


def return_in_finally(x):
    try:
        y = x * 2.0
    finally:
        return y  # <-  # noqa: B012


@pytest.mark.parametrize("fn,args", [(handler_reads_the_exception, (1.0,)), (caught_slice, (np.ones(2), 5)),
                                     (caught_in_a_loop, (np.ones(3),)), (return_in_finally, (1.0,)),
                                     (random_in_try, (1.0,)), (in_place_in_try, (np.ones(2), np.ones(2)))])
def test_try_forms_zymo_cannot_follow_are_refused(fn, args):
    with pytest.raises(zymo.UnsupportedSyntax) as info:
        grad(fn, *args)
    assert_points_at(info.value, fn)


# ============================================================================
# 4. with statements
# ============================================================================

def logs_quietly(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(x)
    with warnings.catch_warnings():
        z = np.sum(y[1:] * x[1:])
    return z


def suppressed(x, d):
    r = 2.0 * x
    with contextlib.suppress(ZeroDivisionError):
        r = x / d
    return r * x


def raises_in_errstate(x):
    with np.errstate(all="raise"):
        y = np.log(x)
    return np.sum(y)


@pytest.mark.slow
@pytest.mark.parametrize("policy", BACKENDS)
def test_errstate_and_catch_warnings(policy):
    numba_or_skip(policy)
    x = np.array([0.5, 2.0, 3.0])
    check_grad(logs_quietly, x)
    np.testing.assert_allclose(grad(logs_quietly, x)[0], np.r_[0.0, np.log(x[1:]) + 1.0])


def test_errstate_covers_the_derivatives_own_warnings_and_is_restored():
    x = np.array([0.0, 2.0, 3.0])
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning of the derivative would fail here
        (g,) = grad(logs_quietly, x)
        dx = np.ones(3)
        zymo.autodiff(Forward, logs_quietly, Duplicated, Duplicated(x, dx))
    np.testing.assert_allclose(g[1:], np.log(x[1:]) + 1.0)
    assert np.geterr() == before
    with pytest.raises(FloatingPointError):
        raises_in_errstate(x)
    with pytest.raises(FloatingPointError):
        grad(raises_in_errstate, x)
    assert np.geterr() == before  # an exception out of the block leaves the state as it was
    np.testing.assert_allclose(grad(raises_in_errstate, x + 1.0)[0], 1.0 / (x + 1.0))


def test_errstate_in_a_njit_function_compiles_without_it():
    pytest.importorskip("numba")
    set_numba("always")
    x = np.array([0.5, 2.0, 3.0])
    (g,) = grad(logs_quietly, x)
    np.testing.assert_allclose(g[1:], np.log(x[1:]) + 1.0)
    entries = [c for key, cs in zymo.cache.COMPILED.items() for c in cs if key[0][0] is logs_quietly]
    assert any(c.backend == "always" for c in entries)


def test_errstate_raise_keeps_python_under_numba():
    pytest.importorskip("numba")
    set_numba("prefer")
    x = np.array([1.0, 2.0])
    with pytest.warns(zymo.ZymoWarning, match="FloatingPointError"):
        np.testing.assert_allclose(grad(raises_in_errstate, x)[0], 1.0 / x)
    with pytest.raises(FloatingPointError):
        grad(raises_in_errstate, np.array([0.0, 1.0]))


def nothing_managed(x):
    with contextlib.nullcontext():
        y = x * x
    return y


def test_nullcontext():
    check_grad(nothing_managed, 1.5)
    assert grad(nothing_managed, 1.5) == (3.0,)


def test_contextlib_suppress_is_a_try():
    out = check_grad(suppressed, 1.5, 2.0)
    np.testing.assert_allclose(out.reverse, [1.5, -1.5 ** 2 / 4.0])
    np.testing.assert_allclose(check_grad(suppressed, 1.5, 0.0, const=(1,)).reverse[0], 6.0)


LOCK = __import__("threading").Lock()


def unknown_manager(x):
    with LOCK:  # <-
        y = x * 2.0
    return y


def manager_with_a_target(x):
    with np.errstate(all="ignore") as state:  # <-  # noqa: F841
        y = x * 2.0
    return y


def array_as_manager(x):
    with x:  # <-
        y = x * 2.0
    return np.sum(y)


def catch_warnings_recording(x):
    with warnings.catch_warnings(record=True):  # <-
        y = x * 2.0
    return y


@pytest.mark.parametrize("fn,arg", [(unknown_manager, 1.0), (manager_with_a_target, 1.0),
                                    (array_as_manager, np.ones(2)), (catch_warnings_recording, 1.0)])
def test_with_statements_zymo_cannot_follow_are_refused(fn, arg):
    with pytest.raises(zymo.UnsupportedSyntax) as info:
        grad(fn, arg)
    assert_points_at(info.value, fn)


# ============================================================================
# 5. for/else and while/else
# ============================================================================

def first_large(x, limit):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * x[i]
        if x[i] > limit:
            s = s * x[i]
            break
    else:
        s = -s * x[0]
    k = 0
    while k < 2:
        s = s + x[k]
        k += 1
        if s > 1e6:
            break
    else:
        s = 2.0 * s
    return s


def else_after_return(x):
    for v in x:
        if v > 5.0:
            return v * v
    else:  # the else clause is what is tested
        return -x[0]


@pytest.mark.slow
@pytest.mark.parametrize("policy", BACKENDS)
@pytest.mark.parametrize("limit", [1.5, 100.0])
def test_loop_else_runs_when_no_break(policy, limit):
    numba_or_skip(policy)
    x = np.array([1.0, 2.0, 0.5])
    check_grad(first_large, x, limit, const=(1,))
    if limit > 10.0:  # no break: s = -(sum x^2) * x0, then (s + x0 + x1) * 2
        expect = 2.0 * np.array([-(np.sum(x * x)) - 2.0 * x[0] * x[0] + 1.0, -2.0 * x[1] * x[0] + 1.0,
                                 -2.0 * x[2] * x[0]])
    else:  # break at x[1] = 2: s = (x0^2 + x1^2) * x1, then (s + x0 + x1) * 2
        expect = 2.0 * np.array([2.0 * x[0] * x[1] + 1.0, x[0] ** 2 + 3.0 * x[1] ** 2 + 1.0, 0.0])
    np.testing.assert_allclose(grad(first_large, x, Const(limit))[0], expect)


def test_loop_else_after_a_return():
    for x, expect in ((np.array([1.0, 6.0]), [0.0, 12.0]), (np.array([1.0, 2.0]), [-1.0, 0.0])):
        check_grad(else_after_return, x)
        np.testing.assert_allclose(grad(else_after_return, x)[0], expect)


def comprehension_in_loop_else(x):
    for _ in range(2):
        x = x * 2.0
    else:
        y = [v for v in x]  # <-  (x is a number: not iterable)
    return y[0]


def test_an_error_in_a_loop_else_names_its_line():
    with pytest.raises(zymo.UnsupportedSyntax) as info:
        grad(comprehension_in_loop_else, 1.0)
    assert_points_at(info.value, comprehension_in_loop_else)


def branches_in_try(A, b, flag):
    try:
        if np.linalg.det(A) > 0.5:
            y = np.linalg.solve(A, b)
        else:
            y = 3.0 * b
        assert abs(np.linalg.det(A)) > 1e-12, "singular"
    except np.linalg.LinAlgError:
        y = -b
    except AssertionError:
        y = b * b
    if flag:
        y = y * 2.0
    return np.sum(y * b)


def test_branches_and_asserts_in_a_try_body():
    A = np.array([[2.0, 0.5], [0.3, 1.5]])
    b = np.array([1.0, -2.0])
    check_grad(branches_in_try, A, b, True, const=(2,))
    np.testing.assert_allclose(grad(branches_in_try, Const(A), b, Const(False))[1],
                               np.linalg.solve(A, b) + np.linalg.solve(A.T, b))
    small = np.array([[0.5, 0.0], [0.0, 0.5]])  # det 0.25: the else branch
    np.testing.assert_allclose(grad(branches_in_try, Const(small), b, Const(False))[1], 6.0 * b)
    singular = np.array([[1.0, 1.0], [1.0, 1.0]])  # det 0: the else branch, then the assert fails, caught
    np.testing.assert_allclose(grad(branches_in_try, Const(singular), b, Const(False))[1], 3.0 * b * b)


# ============================================================================
# second order
# ============================================================================

def solve_scaled(b):
    return solve_or_fallback(np.eye(2) * 2.0, b)


def test_second_order_through_checks_and_refused_through_try_and_errstate():
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(zymo.hessian(checks_through_a_callee, -x), np.diag(-6.0 * x))
    with pytest.raises(ValueError, match="bad input"):
        zymo.hessian(checks_through_a_callee, x)
    for fn, what in ((solve_scaled, "try/except"), (logs_quietly, r"np\.errstate")):
        with pytest.raises(zymo.UnsupportedSyntax, match=what) as info:
            zymo.hessian(fn, x)
        assert info.value.loc.line > 0 and "Hint:" in str(info.value)


def overflow_guarded(x, big):
    with np.errstate(over="raise"):
        try:
            y = x * big
        except FloatingPointError:
            y = -x
    return y * x


def test_a_floating_point_error_from_numbers_is_caught():
    big = np.float64(1e308)
    assert overflow_guarded(np.float64(3.0), big) == -9.0
    (g,) = grad(overflow_guarded, np.float64(3.0), Const(big))[:1]
    assert g == -6.0
    np.testing.assert_allclose(grad(overflow_guarded, np.float64(3.0), Const(np.float64(2.0)))[0], 12.0)


def uses_a_value_bound_before_a_break(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0.0:
            v = x[i] * 2.0
        else:
            break
        s = s + v * x[i]
    return s


def test_a_name_bound_in_the_branch_that_does_not_exit():
    x = np.array([1.0, 2.0, -1.0, 3.0])
    check_grad(uses_a_value_bound_before_a_break, x)
    np.testing.assert_allclose(grad(uses_a_value_bound_before_a_break, x)[0], [4.0, 8.0, 0.0, 0.0])
