"""The scenario suite: every operator, on every backend, over a set of functions.

Contract: a `Scenario` is a test function written once against a NumPy-like
namespace (`make(xp) -> f`; each backend gives its own, `backend.numpy`), a point
x, contexts, optionally the shape of `y` for an in-place `f(y, x)`, and *analytic*
references (the Jacobian, and the Hessian or second derivative) that do not come
from any AD system. `run(backend, scenarios)` runs, for each scenario and each
operator that applies to it, the `value_and_*` form unprepared, the plain form
with a preparation (twice, the second time into `out=`), and checks: the values
and derivatives against the references (tolerances by backend: tight for AD,
loose for finite differences), that the returned array is `out`, that x, the
operand and the Constant contexts were not mutated. Each check gives a `Result`
with a status:

- "ok"; "limitation": the backend raised `BackendLimitation` (a clear refusal);
- "mismatch" (a wrong number), "mutated" (an input changed), "error" (anything
  else raised): failures.

`expected(backend, scenario)` says whether the backend should support a scenario
(mutation needs `supports_mutation`; scenarios written for NumPy only need a
backend whose namespace is NumPy); `check(backend, ...)` raises `AssertionError`
listing the failures and the unexpected limitations — use it to test your own
backend. `benchmark(...)` times prepared calls and measures their allocations with
tracemalloc (Python and NumPy memory; JAX and torch buffers are invisible to it),
and `table(...)` formats results or timings as Markdown.
"""
from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from . import operators as ops
from . import prepare as prep_mod
from .backends import Backend
from .contexts import Cache, Constant
from .errors import BackendLimitation


@dataclass
class Scenario:
    name: str
    make: Callable[[Any], Callable]   # namespace -> f
    x: Any
    jac: Callable                      # (x, *context values) -> dy/dx, shape y.shape + x.shape
    second: Callable | None = None     # (x, *values) -> Hessian (scalar y) or d²y/dx² (scalar x)
    contexts: tuple = ()
    y_shape: tuple | None = None      # in-place f(y, x): the shape of y
    mutates: bool = False              # f writes into memory (needs backend.supports_mutation)
    numpy_only: bool = False           # f is written with NumPy itself, whatever the namespace
    overwrites: bool = False           # f overwrites values its derivative needs (needs supports_overwrite)
    tags: tuple = field(default_factory=tuple)

    @property
    def inplace(self) -> bool:
        return self.y_shape is not None

    def reference_f(self) -> Callable:
        return self.make(np)

    def value(self) -> Any:
        f = self.reference_f()
        vals = [c.value.copy() if isinstance(c.value, np.ndarray) else c.value for c in self.contexts]
        x = self.x if np.ndim(self.x) == 0 else self.x.copy()
        if self.inplace:
            y = np.zeros(cast(tuple, self.y_shape))
            f(y, x, *vals)
            return y
        return f(x, *vals)

    def operators(self) -> list[str]:
        xs, y = np.ndim(self.x) == 0, self.value()
        ys = np.ndim(y) == 0
        out = ["pushforward", "pullback", "jacobian"]
        if xs:
            out.append("derivative")
            if not self.inplace and self.second is not None:
                out.append("second_derivative")
        elif ys:
            out.append("gradient")
            if self.second is not None:
                out += ["hvp", "hessian"]
        return out


# -- the default scenarios -------------------------------------------------------------------------

_X = np.array([0.7, -1.1, 1.9, 0.4])
_C = np.array([1.5, -0.5, 2.0, 0.8])
_W = np.array([1.0, -2.0, 0.5])


def _s2s(xp):
    def f(t):
        return xp.sin(t) * t + xp.exp(0.5 * t)
    return f


def _s2a(xp):
    w = xp.asarray(_W)

    def f(t):
        return xp.sin(w * t) + t * t
    return f


def _a2s(xp):
    def f(x):
        return xp.sum(xp.sin(x) * x) + xp.dot(x, x) ** 2 / 10
    return f


def _a2s_hess(x):
    return np.diag(-np.sin(x) * x + 2 * np.cos(x)) + 0.4 * np.dot(x, x) * np.eye(len(x)) + 0.8 * np.outer(x, x)


def _rosen(xp):
    def f(x):
        s = 0.0
        for i in range(len(x) - 1):
            s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
        return s
    return f


def _mat(xp):
    def f(x):
        return xp.sum(xp.tanh(x) ** 2)
    return f


def _mat_hess(x):
    t = np.tanh(x)
    s2 = 1 - t ** 2
    return np.diag((2 * s2 ** 2 - 4 * t ** 2 * s2).ravel()).reshape(x.shape + x.shape)


def _a2a(xp):
    def f(x):
        return xp.sin(x) * x[0] + x * x
    return f


def _a2a_jac(x):
    J = np.diag(np.cos(x) * x[0] + 2 * x)
    J[:, 0] += np.sin(x)
    return J


def _a2s_const(xp):
    def f(x, c):
        return xp.sum(xp.sin(x) * c) + xp.dot(x, x) ** 2 / 10
    return f


def _a2s_const_hess(x, c):
    return np.diag(-np.sin(x) * c) + 0.4 * np.dot(x, x) * np.eye(len(x)) + 0.8 * np.outer(x, x)


def _a2a_const(xp):
    def f(x, c):
        return xp.sin(x) * c + x[0] * x
    return f


def _a2a_const_jac(x, c):
    J = np.diag(np.cos(x) * c + x[0])
    J[:, 0] += x
    return J


def _a2s_cache(xp):
    def f(x, buf):
        buf[:] = xp.sin(x) * x
        return xp.sum(buf * buf)
    return f


def _cache_parts(x):
    s, ds, dds = np.sin(x) * x, np.cos(x) * x + np.sin(x), -np.sin(x) * x + 2 * np.cos(x)
    return s, ds, dds


def _inplace(xp):
    def f(y, x):
        y[:] = xp.sin(x) * x[0]
        y[1:] = y[1:] + x[:-1] ** 2
    return f


def _inplace_jac(x):
    n = len(x)
    J = np.diag(np.cos(x) * x[0])
    J[:, 0] += np.sin(x)
    for i in range(1, n):
        J[i, i - 1] += 2 * x[i - 1]
    return J


def _inplace_scalar(xp):
    w = xp.asarray(_W)

    def f(y, t):
        y[:] = xp.sin(w * t)
    return f


def _overwrites_input(xp):
    def f(x):
        for i in range(len(x)):
            x[i] = x[i] * x[i]
        return xp.sum(x * x)
    return f


def _numpy_buffers(xp):
    def f(x):  # written for NumPy: a work buffer, out=, a loop
        buf = np.empty_like(x)
        np.multiply(x, x, out=buf)
        s = 0.0
        for i in range(len(x)):
            s += buf[i] * np.sin(x[i])
        return s
    return f


def _numpy_buffers_jac(x):
    return 2 * x * np.sin(x) + x * x * np.cos(x)


def _numpy_buffers_hess(x):
    return np.diag(2 * np.sin(x) + 4 * x * np.cos(x) - x * x * np.sin(x))


def _captured_cache(xp):
    a = xp.zeros(1)

    def f(t):  # seed 003: a closure that writes active data into a captured buffer
        a[0] = 1.0
        a[0] = a[0] + t
        return a[0] * a[0]
    return f


def closure(s: Scenario) -> Scenario:
    """The same function as a closure: its contexts captured instead of passed (at most one)."""
    if len(s.contexts) > 1:
        raise ValueError("closure() binds at most one context")
    make = s.make
    if s.contexts:
        (ctx,) = s.contexts
        v0 = ctx.value

        def make_closure(xp: Any) -> Callable[..., Any]:
            f0 = make(xp)
            c0 = xp.zeros(v0.shape) if isinstance(ctx, Cache) else xp.asarray(v0)
            g: Callable[..., Any]
            if s.inplace:
                def g(y, x):
                    f0(y, x, c0)
            else:
                def g(x):
                    return f0(x, c0)
            return g
        mutates = s.mutates or isinstance(ctx, Cache)
    else:
        def make_closure(xp: Any) -> Callable[..., Any]:
            f0 = make(xp)
            g: Callable[..., Any]
            if s.inplace:
                def g(y, x):
                    f0(y, x)
            else:
                def g(x):
                    return f0(x)
            return g
        mutates = s.mutates
    vals = [c.value for c in s.contexts]
    jac, second = s.jac, s.second
    return Scenario(s.name + "_closure", make_closure, s.x, lambda x: jac(x, *vals),
                    None if second is None else (lambda x: second(x, *vals)), (), s.y_shape, mutates,
                    s.numpy_only, s.overwrites, s.tags + ("closure",))


def default_scenarios(closures: bool = True) -> list[Scenario]:
    """Scalar→scalar, scalar→array, array→scalar (vector, matrix, loop), array→array, Constant and
    Cache contexts, in-place f(y, x), functions that overwrite memory; and their closures."""
    t0 = 0.7
    base = [
        Scenario("scalar_to_scalar", _s2s, t0,
                 lambda t: np.cos(t) * t + np.sin(t) + 0.5 * np.exp(0.5 * t),
                 lambda t: -np.sin(t) * t + 2 * np.cos(t) + 0.25 * np.exp(0.5 * t)),
        Scenario("scalar_to_array", _s2a, t0, lambda t: _W * np.cos(_W * t) + 2 * t,
                 lambda t: -_W ** 2 * np.sin(_W * t) + 2),
        Scenario("array_to_scalar", _a2s, _X.copy(),
                 lambda x: np.cos(x) * x + np.sin(x) + 0.4 * np.dot(x, x) * x, _a2s_hess),
        Scenario("rosenbrock_loop", _rosen, np.array([-1.2, 1.0, 0.8, 1.3]),
                 lambda x: _rosen_der(x), lambda x: _rosen_hess(x)),
        Scenario("matrix_to_scalar", _mat, np.array([[0.3, -0.8, 1.1], [0.5, 0.2, -1.4]]),
                 lambda x: 2 * np.tanh(x) * (1 - np.tanh(x) ** 2), _mat_hess),
        Scenario("array_to_array", _a2a, _X.copy(), _a2a_jac),
        Scenario("array_to_scalar_constant", _a2s_const, _X.copy(),
                 lambda x, c: np.cos(x) * c + 0.4 * np.dot(x, x) * x, _a2s_const_hess, (Constant(_C.copy()),)),
        Scenario("array_to_array_constant", _a2a_const, _X.copy(), _a2a_const_jac, None, (Constant(_C.copy()),)),
        Scenario("array_to_scalar_cache", _a2s_cache, _X.copy(),
                 lambda x, b: 2 * _cache_parts(x)[0] * _cache_parts(x)[1],
                 lambda x, b: np.diag(2 * (_cache_parts(x)[1] ** 2 + _cache_parts(x)[0] * _cache_parts(x)[2])),
                 (Cache(np.zeros(4)),), mutates=True),
        Scenario("inplace_array", _inplace, _X.copy(), _inplace_jac, None, (), (4,), mutates=True),
        Scenario("inplace_scalar", _inplace_scalar, t0, lambda t: _W * np.cos(_W * t), None, (), (3,),
                 mutates=True),
        Scenario("overwrites_input", _overwrites_input, _X.copy(), lambda x: 4 * x ** 3,
                 lambda x: np.diag(12 * x ** 2), mutates=True, overwrites=True),
        Scenario("numpy_buffers_loop", _numpy_buffers, _X.copy(), _numpy_buffers_jac, _numpy_buffers_hess,
                 mutates=True, numpy_only=True, overwrites=True),
        Scenario("captured_cache", _captured_cache, t0, lambda t: 2 * (1 + t), lambda t: 2.0, mutates=True),
    ]
    if not closures:
        return base
    return base + [closure(s) for s in base if len(s.contexts) <= 1 and s.name in _CLOSED]


_CLOSED = {"array_to_scalar", "array_to_array", "array_to_scalar_constant", "array_to_array_constant",
           "array_to_scalar_cache", "inplace_array", "scalar_to_array"}


def _rosen_der(x):
    from scipy.optimize import rosen_der

    return rosen_der(x)


def _rosen_hess(x):
    from scipy.optimize import rosen_hess

    return rosen_hess(x)


# -- running ---------------------------------------------------------------------------------------

@dataclass
class Result:
    scenario: str
    backend: str
    op: str
    status: str   # ok | limitation | mismatch | mutated | error
    message: str = ""
    expected: bool = True  # whether the backend is expected to support the scenario

    @property
    def failed(self) -> bool:
        return self.status in ("mismatch", "mutated", "error") or (self.status == "limitation" and self.expected)


def expected(backend: Backend, scenario: Scenario) -> bool:
    """Whether `backend` should differentiate `scenario` (rather than refuse it)."""
    if scenario.mutates and not backend.supports_mutation:
        return False
    if scenario.overwrites and not backend.supports_overwrite:
        return False
    if scenario.numpy_only and backend.numpy is not np:
        return False
    return True


# op -> (value-and form, plain form, what the value-and form returns)
_FORMS = {
    "derivative": (ops.value_and_derivative, ops.derivative, ("value", "d1")),
    "second_derivative": (ops.value_derivative_and_second_derivative, ops.second_derivative, ("value", "d1", "d2")),
    "gradient": (ops.value_and_gradient, ops.gradient, ("value", "d1")),
    "jacobian": (ops.value_and_jacobian, ops.jacobian, ("value", "d1")),
    "hessian": (ops.value_gradient_and_hessian, ops.hessian, ("value", "d1", "d2")),
    "hvp": (ops.gradient_and_hvp, ops.hvp, ("d1", "d2")),
    "pushforward": (ops.value_and_pushforward, ops.pushforward, ("value", "d1")),
    "pullback": (ops.value_and_pullback, ops.pullback, ("value", "d1")),
}


def _operand(s: Scenario, op: str, yv: Any) -> tuple:
    rng = np.random.default_rng(len(s.name) * 7 + len(op))
    if op in ("pushforward", "hvp"):
        return (float(rng.uniform(0.5, 1.5)) if np.ndim(s.x) == 0 else rng.uniform(-1, 1, np.shape(s.x)),)
    if op == "pullback":
        return (float(rng.uniform(0.5, 1.5)) if np.ndim(yv) == 0 else rng.uniform(-1, 1, np.shape(yv)),)
    return ()


def _references(s: Scenario, op: str, operand: tuple, yv: Any) -> dict:
    vals = [c.value for c in s.contexts]
    J = np.asarray(s.jac(s.x, *vals), dtype=np.float64)
    nx, ny = np.ndim(s.x), np.ndim(yv)
    ref: dict = {"value": yv}
    second = cast(Callable, s.second)  # given for the scenarios of the second-order operators
    if op in ("derivative", "gradient", "jacobian"):
        ref["d1"] = J
    elif op == "pushforward":
        ref["d1"] = np.tensordot(J, np.asarray(operand[0]), axes=nx) if nx else J * operand[0]
    elif op == "pullback":
        ref["d1"] = np.tensordot(np.asarray(operand[0]), J, axes=ny) if ny else operand[0] * J
    elif op == "second_derivative":
        ref["d1"], ref["d2"] = J, np.asarray(second(s.x, *vals))
    elif op == "hessian":
        ref["d1"], ref["d2"] = J, np.asarray(second(s.x, *vals))
    elif op == "hvp":
        H = np.asarray(second(s.x, *vals))
        ref["d1"], ref["d2"] = J, np.tensordot(H, operand[0], axes=nx)
    return ref


def tolerance(backend: Backend, order: int) -> tuple[float, float]:
    """(rtol, atol) for comparing a backend's derivatives of this order with analytic ones."""
    from .backends import AutoFiniteDiff

    if isinstance(backend, AutoFiniteDiff):
        return (1e-6, 1e-6) if order == 1 else (1e-4, 1e-4)
    return 1e-9, 1e-11


def _close(got: Any, want: Any, rtol: float, atol: float) -> str:
    want = np.asarray(want, dtype=np.float64)
    if np.ndim(got) != want.ndim or np.shape(got) != want.shape:
        return f"shape {np.shape(got)}, expected {want.shape}"
    if isinstance(got, np.ndarray) != (want.ndim > 0):
        return f"a {type(got).__name__}, expected {'an array' if want.ndim else 'a float'}"
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        err = np.max(np.abs(np.asarray(got) - want))
        return f"max error {err:.3g} (rtol {rtol:g}): got {np.asarray(got).ravel()[:4]}, want {want.ravel()[:4]}"
    return ""


def _args(s: Scenario, backend: Backend, operand: tuple, x: Any) -> tuple:
    y = (np.zeros(cast(tuple, s.y_shape)),) if s.inplace else ()
    return (*y, backend, x, *operand, *s.contexts)


def run_one(backend: Backend, s: Scenario, op: str) -> Result:
    exp = expected(backend, s)
    res = Result(s.name, repr(backend), op, "ok", expected=exp)
    yv = s.value()
    operand = _operand(s, op, yv)
    ref = _references(s, op, operand, yv)
    vf, pf, parts = _FORMS[op]
    f = s.make(backend.numpy)
    x = s.x if np.ndim(s.x) == 0 else s.x.copy()
    keep = [np.copy(x)] + [np.copy(o) for o in operand] + [
        np.copy(c.value) for c in s.contexts if isinstance(c, Constant)]
    try:
        got = vf(f, *_args(s, backend, operand, x))
        bad = []
        for name, g in zip(parts, got):
            order = 2 if name == "d2" else 1
            err = _close(g, ref[name], *tolerance(backend, order if name != "value" else 1))
            if err:
                bad.append(f"{name}: {err}")
        prep = getattr(prep_mod, f"prepare_{op}")(f, *_args(s, backend, operand, x))
        main = ref[parts[-1]]
        order = 2 if parts[-1] == "d2" else 1
        for attempt in range(2):
            out = np.zeros(np.shape(main)) if (attempt == 1 and np.ndim(main) > 0) else None
            g = pf(f, *_args(s, backend, operand, x), prep=prep, out=out)
            if out is not None and g is not out:
                bad.append("out= was not returned")
            err = _close(g, main, *tolerance(backend, order))
            if err:
                bad.append(f"prepared call {attempt + 1}: {err}")
    except BackendLimitation as exc:
        res.status, res.message = "limitation", str(exc).splitlines()[0]
        return res
    except Exception as exc:  # reported, not hidden
        res.status, res.message = "error", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return res
    now = [np.copy(x)] + [np.copy(o) for o in operand] + [
        np.copy(c.value) for c in s.contexts if isinstance(c, Constant)]
    if any(not np.array_equal(a, b) for a, b in zip(keep, now)):
        res.status, res.message = "mutated", "an input (x, the operand or a Constant) was changed"
    elif bad:
        res.status, res.message = "mismatch", "; ".join(bad)
    return res


def run(backend: Backend, scenarios: list[Scenario] | None = None, operators: list[str] | None = None) -> list[Result]:
    """Every applicable operator of every scenario on one backend."""
    out = []
    for s in scenarios if scenarios is not None else default_scenarios():
        for op in s.operators():
            if operators is None or op in operators:
                out.append(run_one(backend, s, op))
    return out


def check(backend: Backend, scenarios: list[Scenario] | None = None, operators: list[str] | None = None,
          allow: Callable[[Result], bool] | None = None) -> list[Result]:
    """`run`, then raise AssertionError listing the failures (`allow(result)` may excuse some)."""
    results = run(backend, scenarios, operators)
    bad = [r for r in results if r.failed and not (allow and allow(r))]
    if bad:
        raise AssertionError(f"{len(bad)} of {len(results)} checks failed on {backend!r}:\n" + table(bad))
    return results


def benchmark(backends: list[Backend], scenarios: list[Scenario] | None = None,
              operators: list[str] | None = None, repeat: int = 20) -> list[dict]:
    """Per (scenario, operator, backend): seconds per prepared call (best of `repeat`), and the
    Python/NumPy memory one prepared call allocates (tracemalloc peak, bytes and blocks kept)."""
    rows = []
    for s in scenarios if scenarios is not None else default_scenarios():
        for op in s.operators():
            if operators is not None and op not in operators:
                continue
            for b in backends:
                if not b.available() or not expected(b, s):
                    continue
                yv = s.value()
                operand = _operand(s, op, yv)
                f = s.make(b.numpy)
                x = s.x if np.ndim(s.x) == 0 else s.x.copy()
                args = _args(s, b, operand, x)
                _, pf, _ = _FORMS[op]
                try:
                    t0 = time.perf_counter()
                    prep = getattr(prep_mod, f"prepare_{op}")(f, *args)
                    t_prep = time.perf_counter() - t0
                    pf(f, *args, prep=prep)
                except BackendLimitation:
                    continue
                times = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    pf(f, *args, prep=prep)
                    times.append(time.perf_counter() - t0)
                tracemalloc.start()
                tracemalloc.reset_peak()
                pf(f, *args, prep=prep)
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                rows.append({"scenario": s.name, "operator": op, "backend": repr(b), "prepare_s": t_prep,
                             "call_s": min(times), "peak_bytes": peak})
    return rows


def table(rows: list) -> str:
    """Markdown table of `Result`s or of `benchmark` rows."""
    if not rows:
        return "(nothing)"
    if isinstance(rows[0], Result):
        lines = ["| scenario | backend | operator | status | message |", "|---|---|---|---|---|"]
        lines += [f"| {r.scenario} | {r.backend} | {r.op} | {r.status} | {r.message[:160]} |" for r in rows]
        return "\n".join(lines)
    lines = ["| scenario | operator | backend | prepare | call | peak alloc |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['scenario']} | {r['operator']} | {r['backend']} | {_t(r['prepare_s'])} | "
                     f"{_t(r['call_s'])} | {r['peak_bytes'] / 1024:.1f} KiB |")
    return "\n".join(lines)


def _t(s: float) -> str:
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"
