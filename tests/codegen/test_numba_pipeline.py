"""zymo's Numba pipeline (`codegen/numba/pipeline.py`): typing without SSA only where it types
the program as Numba's default pipeline does; otherwise the default pipeline runs."""
import sys

import numpy as np
import pytest

numba = pytest.importorskip("numba")
literal_unroll = numba.literal_unroll  # a global of its own: Numba looks for it by value

from helpers import fd_grad, zymo_grad
from loop_programs import appended_each_time
from numba_helpers import numba_entries, private_cache_dir  # noqa: F401  (fresh cache directory)

import zymo
from zymo.codegen.numba.pipeline import FAST, Compiler, _MemoTyping, _nothing_to_inline
from zymo.testing import check_grad


def pipeline_of(dispatcher):
    """The name of the pipeline that produced the dispatcher's (single) compile result."""
    (res,) = dispatcher.overloads.values()
    (name,) = res.metadata["pipeline_times"]
    return name


def running_sum(x, n):
    s = 0.0  # float in both blocks: the same type with or without SSA
    k = 0
    for i in range(n):
        s = s + x[i] * x[i]
        k += 1
    return s, k


def int_then_float(x, n):
    a = 1  # an int here, a float in the loop: the assignment `a = 1` is widened
    b = 0
    for i in range(n):
        b = a * 2
        a = x[i]
    return a, b


def int_before_loop(x, n):
    a = 1
    r = a * 2  # an int under SSA (`a` holds the int here); a float if `a` were unified
    for i in range(n):
        a = x[i]
    return r, a


def array_then_float(x, n):
    d = np.zeros_like(x)  # an array in one block, a float in another: no unification at all
    t = d[0]
    for i in range(n):
        d = x[i] * 2.0
        t = t + d
    return t


def test_consistent_types_compile_without_ssa_and_compute_the_same():
    x = np.linspace(0.5, 2.0, 7)
    fast = numba.njit(pipeline_class=Compiler)(running_sum)
    assert fast(x, 7) == numba.njit(running_sum)(x, 7) == (float(np.sum(x * x)), 7)
    assert pipeline_of(fast) == FAST


def test_a_widened_assignment_falls_back_to_numbas_pipeline():
    x = np.array([1.5, 2.5, 3.5])
    fast = numba.njit(pipeline_class=Compiler)(int_then_float)
    got, want = fast(x, 3), numba.njit(int_then_float)(x, 3)
    assert got == want == (3.5, 5.0)
    assert type(got[1]) is type(want[1])
    assert pipeline_of(fast) == "nopython"


def test_the_fallback_forgets_the_first_pipelines_return_type():
    """Typing without SSA makes `r` a float, and the return type (float, float); the default
    pipeline must infer its own (int, float), not take the first pipeline's as declared."""
    x = np.array([1.5, 2.5, 3.5])
    fast = numba.njit(pipeline_class=Compiler)(int_before_loop)
    got, want = fast(x, 3), numba.njit(int_before_loop)(x, 3)
    assert got == want == (2, 3.5)
    assert type(got[0]) is type(want[0]) is int
    assert pipeline_of(fast) == "nopython"


def test_the_fallback_keeps_a_declared_signature():
    x = np.array([1.5, 2.5, 3.5])
    fast = numba.njit("Tuple((float64, float64))(float64[::1], int64)", pipeline_class=Compiler)(int_before_loop)
    got = fast(x, 3)
    assert got == (2.0, 3.5) and type(got[0]) is float
    assert pipeline_of(fast) == "nopython"


def test_a_name_that_cannot_be_unified_falls_back_too():
    x = np.array([1.0, 2.0, 4.0])
    fast = numba.njit(pipeline_class=Compiler)(array_then_float)
    assert fast(x, 3) == numba.njit(array_then_float)(x, 3) == 14.0
    assert pipeline_of(fast) == "nopython"


def test_a_program_numba_refuses_raises_the_default_pipelines_error():
    def bad(x):
        return x.no_such_attribute

    with pytest.raises(numba.core.errors.TypingError) as fast:
        numba.njit(pipeline_class=Compiler)(bad)(np.ones(2))
    with pytest.raises(numba.core.errors.TypingError) as default:
        numba.njit(bad)(np.ones(2))
    assert FAST not in str(fast.value)
    assert str(fast.value).splitlines()[0] == str(default.value).splitlines()[0]


def loop_sums(x, w):
    total = 0.0
    for i in range(x.shape[0]):
        acc = 0.0
        for j in range(w.shape[0]):
            acc = acc + np.sin(x[i] * w[j])
        total = total + acc * acc
    return total


def test_loop_derivatives_compile_without_ssa_in_both_modes():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(5), rng.standard_normal(4)
    check_grad(loop_sums, x, w)  # Python backend: both modes against central differences
    g = zymo_grad(loop_sums, [x.copy(), w.copy()], numba=True)
    fd = fd_grad(loop_sums, [x, w])
    for a, b in zip(g, fd):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
    assert np.max(np.abs(g[0])) > 0.1
    dx = np.zeros(5)
    dx[2] = 1.0
    tangent, _ = zymo.autodiff(zymo.ForwardWithPrimal, loop_sums, zymo.Duplicated,
                               zymo.Duplicated(x.copy(), dx), zymo.Const(w), numba=True)
    np.testing.assert_allclose(tangent, g[0][2], rtol=1e-10)
    entries = numba_entries(loop_sums)
    assert len(entries) == 2  # reverse and forward
    assert all(pipeline_of(e.fn) == FAST for e in entries)


def grown_each_time(x):
    """`loop_programs.appended_each_time`, under a function of its own: compiled here
    (in this module's fresh cache directory), not loaded from another test's entry."""
    return appended_each_time(x)


@pytest.mark.slow
def test_a_derivative_that_falls_back_is_right(monkeypatch, tmp_path):
    """A derivative the first pipeline refuses compiles with Numba's default pipeline and
    computes the same. The refusal is forced (`_SameTypes` widening every assignment): zymo's
    programs now type the same without SSA (the last that did not, the shadow of `np.sin(h)`
    here, an array in the forward sweep and a number in the adjoint sweep, is no longer
    allocated in the forward sweep: `Reverse._made_by_adjoint`)."""
    from zymo.codegen.numba import pipeline as numba_pipeline

    x = np.random.default_rng(3).random(4)
    fast = zymo_grad(grown_each_time, [x.copy()], numba=True)
    (entry,) = numba_entries(grown_each_time)
    assert pipeline_of(entry.fn) == FAST

    def widened(self, state):
        raise numba_pipeline.Widened("forced by the test")

    monkeypatch.setattr(numba_pipeline._SameTypes, "run_pass", widened)
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))  # compiled anew: not from disk,
    for name in [m for m in sys.modules if m.startswith("zymo_generated_")]:  # nor from memory
        monkeypatch.delitem(sys.modules, name)
    zymo.cache.cache_clear()
    g = zymo_grad(grown_each_time, [x.copy()], numba=True)
    entries = [e for e in numba_entries(grown_each_time) if pipeline_of(e.fn) == "nopython"]
    assert entries, "the default pipeline compiled it"
    np.testing.assert_allclose(g[0], fast[0], rtol=1e-15)
    np.testing.assert_allclose(g[0], fd_grad(grown_each_time, [x])[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g[0], zymo_grad(grown_each_time, [x.copy()], numba=False)[0], rtol=1e-12)
    assert np.max(np.abs(g[0])) > 0.1


def test_an_internal_error_of_the_first_pipeline_falls_back(monkeypatch):
    """A pass that fails on IR not in SSA form (simulated) must not fail the compile."""
    from zymo.codegen.numba import pipeline as numba_pipeline

    def broken(self, state):
        raise AssertionError("simulated")
    monkeypatch.setattr(numba_pipeline._SameTypes, "run_pass", broken)
    x = np.linspace(0.5, 2.0, 7)
    fast = numba.njit(pipeline_class=Compiler)(running_sum)
    assert fast(x, 7) == (float(np.sum(x * x)), 7)
    assert pipeline_of(fast) == "nopython"


def copied_before_loop(x, n):
    y = n + 0  # assigned once, an int; unification would flow back into it through `a = y`
    a = y
    for i in range(n):
        a = x[i]
    return y // 2, a


def view_or_whole(x, n):
    a = x  # `a` also holds a strided view: unified, the argument `x` would have layout 'A'
    if n > 0:
        a = x[::2]
    r = x.ravel()  # a view of a C-contiguous array, a copy of an 'A' one
    r[0] = 100.0
    return x[0], a[0]


def lifted_with_block(x, n):
    k = 1
    r = int((k + 9007199254740992) - 9007199254740992)
    for i in range(n):
        k = x[i]
    with numba.objmode():
        pass
    return r


@pytest.mark.slow
@pytest.mark.parametrize("f, want", [
    (copied_before_loop, (1, 2.5)),
    (view_or_whole, (100.0, 100.0)),
    (lifted_with_block, 1),
])
def test_widening_through_copies_arguments_and_lifting_falls_back(f, want):
    """Review findings: widening that reaches a name assigned once, an argument's layout, and
    a function a `with` block's lifting compiles again, were typed without SSA; each must
    compute, and type its result, as Numba's default pipeline does."""
    x = np.array([1.5, 2.5, 3.5])
    fast = numba.njit(pipeline_class=Compiler)(f)
    got, ref = fast(x.copy(), 2), numba.njit(f)(x.copy(), 2)
    assert got == ref == want
    assert repr(got) == repr(ref)  # ints stay ints


def test_a_failure_after_the_first_pipeline_finalized_its_code_falls_back(monkeypatch):
    from numba.core import base

    real, calls = base.BaseContext.insert_user_function, []

    def fail_once(self, *a, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise numba.core.errors.LoweringError("simulated, after the library was finalized")
        return real(self, *a, **kw)
    monkeypatch.setattr(base.BaseContext, "insert_user_function", fail_once)
    x = np.linspace(0.5, 2.0, 7)
    fast = numba.njit(pipeline_class=Compiler)(running_sum)
    assert fast(x, 7) == (float(np.sum(x * x)), 7)
    assert pipeline_of(fast) == "nopython"


def with_a_closure(x, n):
    scale = 2.0

    def f(v):
        return v * scale

    s = 0.0
    for i in range(n):
        s = s + f(x[i])
    return s


def with_a_comprehension(x, n):
    squares = np.array([x[i] * x[i] for i in range(n)])
    return squares.sum()


def untyped_ir(f):
    from numba.core import compiler

    return compiler.run_frontend(f)


@pytest.mark.slow
@pytest.mark.parametrize("f, nothing", [(running_sum, True), (loop_sums, True), (with_a_closure, False),
                                        (with_a_comprehension, False)])
def test_closures_and_comprehensions_are_still_inlined(f, nothing):
    """`InlineClosureLikes` is skipped only where it has nothing to do; a closure and an array
    comprehension still compile (Numba cannot type a closure it has not inlined)."""
    assert _nothing_to_inline(untyped_ir(f)) is nothing
    x = np.linspace(0.5, 2.0, 7)
    args = (x, x) if f is loop_sums else (x, 7)
    fast = numba.njit(pipeline_class=Compiler)(f)
    assert fast(*args) == pytest.approx(numba.njit(f)(*args), rel=1e-15)
    assert fast(*args) == pytest.approx(f(*args), rel=1e-12)


def repeated_products(x, n):
    s = 0.0
    for i in range(n):
        s = s + x[i] * x[i] + x[i] * 2.0 - x[i] * x[i] * 0.5
    return s


def test_each_call_is_typed_once_per_argument_types(monkeypatch):
    """Typing resolves `x[i]` and `float * float` once each (`_MemoTyping`), where Numba's
    default pipeline resolves them at every call site; the result is typed and computes as
    `njit`'s."""
    from numba.core.typing.context import BaseContext

    real = BaseContext.resolve_function_type
    resolved = {}

    def counting(self, func, args, kws):
        sig = real(self, func, args, kws)
        if sig is not None:
            key = (func, tuple(args), tuple(sorted(kws.items())))
            resolved[key] = resolved.get(key, 0) + 1
        return sig

    monkeypatch.setattr(BaseContext, "resolve_function_type", counting)
    x = np.linspace(0.5, 2.0, 7)
    fast = numba.njit(pipeline_class=Compiler)(repeated_products)
    got = fast(x, 7)
    assert pipeline_of(fast) == FAST
    assert resolved and max(resolved.values()) == 1, resolved
    resolved.clear()
    assert got == numba.njit(repeated_products)(x, 7) == pytest.approx(repeated_products(x, 7), rel=1e-15)
    assert max(resolved.values()) > 1  # the default pipeline: once per call site and round


class _Counting:
    """A typing context that counts resolutions; `None` for the function "unknown"."""

    target = "cpu"

    def __init__(self):
        self.calls = []

    def resolve_function_type(self, func, args, kws):
        self.calls.append(func)
        return None if func == "unknown" else (func, tuple(args), dict(kws))


def test_memo_typing_remembers_successes_only():
    ctx = _Counting()
    memo = _MemoTyping(ctx)
    f64 = numba.types.float64
    first = memo.resolve_function_type("mul", (f64, f64), {})
    assert memo.resolve_function_type("mul", [f64, f64], {}) is first  # a list of args: the same key
    assert memo.resolve_function_type("mul", (f64, numba.types.int64), {}) != first
    assert memo.resolve_function_type("mul", (f64, f64), {"out": f64}) != first
    assert ctx.calls == ["mul", "mul", "mul"]
    assert memo.resolve_function_type("unknown", (f64,), {}) is None
    assert memo.resolve_function_type("unknown", (f64,), {}) is None
    assert ctx.calls.count("unknown") == 2  # a failure is resolved again (Numba replays its own)
    assert memo.target == "cpu"  # everything else is the context's


def test_memo_typing_resolves_dispatcher_calls_every_time():
    ctx = _Counting()
    memo = _MemoTyping(ctx)
    disp = numba.types.Dispatcher(numba.njit(lambda v: v))
    for _ in range(2):
        memo.resolve_function_type(disp, (numba.types.float64,), {})
    assert ctx.calls == [disp, disp]


def unrolled(x, t):
    s = 0.0
    for v in literal_unroll(t):  # an array of floats, one of ints, a tuple
        s += v[0] + v[-1]
    return s + x[0]


def array_expression(a, b, c):
    return np.sum(a * b + c) + a[1]


@pytest.mark.slow
@pytest.mark.parametrize("f", [unrolled, array_expression])
def test_programs_the_rewrites_change_compute_as_njit(f):
    """Where a rewrite applies before typing (`x[0]` to a static subscript, with `literal_unroll`,
    which reads the variable lifetimes `_GenericRewrites` leaves invalid) or after it (an array
    expression, `_NopythonRewrites`), the program computes as under `njit`."""
    x = np.linspace(0.5, 2.0, 5)
    args = (x, (x * 2, np.arange(3), (4.5, 0.25))) if f is unrolled else (x, x + 1, x * 3)
    fast = numba.njit(pipeline_class=Compiler)(f)
    assert fast(*args) == numba.njit(f)(*args) == pytest.approx(f(*args), rel=1e-14)


def nested_sums(x, w):
    """`loop_sums` under a function of its own (compiled here, not found in zymo's caches)."""
    total = 0.0
    for i in range(x.shape[0]):
        acc = 0.0
        for j in range(w.shape[0]):
            if x[i] > w[j]:
                acc = acc + np.sin(x[i] * w[j])
        total = total + acc * acc
    return total


def test_legalization_puts_back_the_dels_numba_would_place(monkeypatch):
    """Where no rewrite after typing applied, `_IRLegalization` puts back the `del`s
    `_NopythonRewrites` placed; Numba's own legalization of the same IR places the same."""
    from numba.core import ir, ir_utils

    from zymo.codegen.numba import pipeline as npl

    def layout(func_ir):
        return {label: [("del", s.value) if isinstance(s, ir.Del) else id(s) for s in block.body]
                for label, block in func_ir.blocks.items()}

    seen = []
    real = npl._IRLegalization.run_pass

    def checking(self, state):
        reused = state.get(npl._DELS) is not None
        out = real(self, state)
        ours = layout(state.func_ir)
        ir_utils.remove_dels(state.func_ir.blocks)
        ir_utils.check_and_legalize_ir(state.func_ir, flags=state.flags)
        seen.append((reused, ours == layout(state.func_ir), sum(k[0] == "del" for b in ours.values() for k in b
                                                                if isinstance(k, tuple))))
        return out

    monkeypatch.setattr(npl._IRLegalization, "run_pass", checking)
    x, w = np.linspace(-1.0, 1.0, 6), np.linspace(-0.5, 0.7, 4)
    g = zymo_grad(nested_sums, [x.copy(), w.copy()], numba=True)
    np.testing.assert_allclose(g[0], fd_grad(nested_sums, [x, w])[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g[1], zymo_grad(nested_sums, [x.copy(), w.copy()], numba=False)[1], rtol=1e-12)
    assert seen and all(reused and same and dels > 20 for reused, same, dels in seen), seen


def doubled_in_a_loop(x, n):
    y = x.copy()
    for _i in range(n):
        y = y * 2 + 1
    return y


def test_parallel_compiles_with_numbas_pipeline():
    """`parallel=True` takes Numba's default pipeline: its passes rely on SSA (without it,
    `y = y * 2 + 1` in a loop computed the first iteration only)."""
    x = np.linspace(0.1, 2.0, 6)
    fast = numba.njit(parallel=True, pipeline_class=Compiler)(doubled_in_a_loop)
    np.testing.assert_array_equal(fast(x, 3), doubled_in_a_loop(x, 3))
    assert pipeline_of(fast) != FAST
