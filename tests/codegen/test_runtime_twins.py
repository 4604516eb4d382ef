"""The runtime library and its compiled twins: `zymo.runtime` exports every helper of its family
modules, every helper has a Numba twin (`zymo/codegen/numba/twins/<family>.py`) or is declared
Python-only in `zymo.runtime.registry` (never both), the registry names only real helpers, and
for a sample of helpers of each family with twins the compiled twin computes what the Python
helper does on small inputs.
"""
import ast
import importlib
import inspect

import numpy as np
import pytest

import zymo.runtime as rt
from zymo.runtime import registry

FAMILIES = ("core", "arrays", "indexing", "linalg", "fft", "sorting", "statistics", "special", "second")


def _module(family):
    return importlib.import_module(f"zymo.runtime.{family}")


def helpers():
    return [n for n in rt.__all__ if callable(getattr(rt, n))]


def test_the_package_exports_each_family_exactly():
    """`zymo.runtime.__all__` is the union of the families' `__all__`, and each family's
    `__all__` lists every public function it defines (a new helper is not forgotten)."""
    exported = []
    for family in FAMILIES:
        mod = _module(family)
        tree = ast.parse(inspect.getsource(mod))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
        assert defined <= set(mod.__all__), (family, sorted(defined - set(mod.__all__)))
        exported += mod.__all__
    assert sorted(exported) == sorted(rt.__all__)
    assert len(set(exported)) == len(exported)
    for name in rt.__all__:
        assert getattr(rt, name) is getattr(_module(next(f for f in FAMILIES if name in _module(f).__all__)), name)


def test_the_registry_names_only_helpers():
    assert set(registry.HELPERS) <= set(rt.__all__), sorted(set(registry.HELPERS) - set(rt.__all__))
    for name, facts in registry.HELPERS.items():
        assert not facts.product_vjp or facts.pure, name
        assert not facts.loop_operand or facts.pure, name
        assert not facts.movable or facts.pure, name
        if facts.shape_arg is not None:
            assert facts.shape_arg < len(inspect.signature(getattr(rt, name)).parameters), name


def _twinned() -> set[int]:
    """The ids of the functions Numba has an implementation of (`overload`, `register_jitable`)."""
    pytest.importorskip("numba")
    from numba.core.typing.templates import builtin_registry

    import zymo.codegen.numba.twins  # noqa: F401  (registers the twins)

    return {id(fn) for fn, _ in builtin_registry.globals}


def test_every_helper_has_a_twin_or_is_declared_python_only():
    twinned = _twinned()
    missing = [n for n in helpers() if id(getattr(rt, n)) not in twinned and not registry.facts(n).python_only]
    assert not missing, f"helpers with no Numba twin, not declared python_only in runtime/registry.py: {missing}"
    stale = [n for n in helpers() if id(getattr(rt, n)) in twinned and registry.facts(n).python_only]
    assert not stale, f"helpers declared python_only that have a Numba twin: {stale}"


def test_the_twins_namespace_reaches_every_helper():
    """Generated code compiled by Numba reaches each helper as `_rt.<name>` through the twins
    package: its own intrinsics where it defines them, else the Python helper itself."""
    pytest.importorskip("numba")
    from zymo.codegen.numba import twins

    own = set(twins.__all__)
    for name in helpers():
        if name not in own:
            assert getattr(twins, name) is getattr(rt, name), name


# -- each family's twins against the Python helpers ---------------------------------------------


def _rng():
    return np.random.default_rng(7)


def _spd(n):
    a = _rng().standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def _samples():
    rng = _rng()
    x, v, m = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 4))
    low = np.linalg.cholesky(_spd(4))
    idx = np.array([0, 2, 2, 1])
    return {
        "core": [
            ("unbroadcast", lambda f: f(x, v), lambda: (lambda g, x: rt.unbroadcast(g, x))),
            ("expand_reduced", lambda f: f(v[:3], x), lambda: (lambda g, x: rt.expand_reduced(g, x, 1, False))),
            ("matmul_vjp_a", lambda f: f(x, m[:3], m), lambda: (lambda g, a, b: rt.matmul_vjp_a(g, a, b))),
            ("clip_inside", lambda f: f(x), lambda: (lambda x: rt.clip_inside(x, -0.5, 0.5))),
            ("cumsum_vjp", lambda f: f(v, v), lambda: (lambda g, x: rt.cumsum_vjp(g, x, None))),
        ],
        "arrays": [
            ("concat2", lambda f: f(v, v[:2]), lambda: (lambda a, b: rt.concat2(a, b, 0))),
            ("split_first", lambda f: f(v, v[:3]), lambda: (lambda g, a: rt.split_first(g, a, 0))),
            ("diag_vjp", lambda f: f(m, v), lambda: (lambda g, x: rt.diag_vjp(g, x, 0))),
            ("diff_vjp", lambda f: f(v[:3], v), lambda: (lambda g, a: rt.diff_vjp(g, a, 1, -1))),
        ],
        "indexing": [
            ("index_array", lambda f: f(), lambda: (lambda: rt.index_array([2, 0, 1]))),
            ("store_adjoint", lambda f: f(v.copy(), (idx,)),
             lambda: (lambda dx, i: (rt.store_adjoint(dx, i), dx))),
            ("add_at", lambda f: f(v, idx, v), lambda: (lambda a, i, w: rt.add_at(a, i, w))),
        ],
        "linalg": [
            ("solve_vjp_b", lambda f: f(v, _spd(4)), lambda: (lambda g, a: rt.solve_vjp_b(g, a))),
            ("cholesky_vjp", lambda f: f(m, low), lambda: (lambda g, low: rt.cholesky_vjp(g, low))),
            ("eigh_w", lambda f: f(_spd(3)), lambda: (lambda a: rt.eigh_w(a))),
        ],
        "second": [
            ("cholesky_vjp_dl", lambda f: f(np.tril(m), m, low),
             lambda: (lambda t, g, low: rt.cholesky_vjp_dl(t, g, low))),
            ("norm_grad_dx", lambda f: f(v, v, 2.0), lambda: (
                lambda t, x, nrm: rt.norm_grad_dx(t, None, x, nrm, None, None, False))),
        ],
        "sorting": [
            ("sort_perm", lambda f: f(v), lambda: (lambda a: rt.sort_perm(a, -1))),
            ("interp_dx", lambda f: f(v, np.sort(v), v), lambda: (lambda x, xp, fp: rt.interp_dx(x, xp, fp))),
        ],
        "statistics": [
            ("nan_count", lambda f: f(np.array([1.0, np.nan, 2.0])), lambda: (lambda a: rt.nan_count(a))),
            ("nan_centered", lambda f: f(np.array([1.0, np.nan, 2.0])), lambda: (lambda a: rt.nan_centered(a))),
        ],
    }


_CASES = [(family, name, run, make) for family, cases in _samples().items() for name, run, make in cases]


@pytest.mark.parametrize("family,name,run,make", _CASES, ids=[f"{c[0]}-{c[1]}" for c in _CASES])
def test_a_twin_computes_what_its_helper_does(family, name, run, make):
    numba = pytest.importorskip("numba")
    import zymo.codegen.numba.twins  # noqa: F401  (registers the twins)

    assert name in _module(family).__all__
    want, got = run(make()), run(numba.njit(make()))
    for w, g in zip(*((want, got) if isinstance(want, tuple) else ((want,), (got,)))):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12)
