"""The disk memo of codegen steps (`codegen/memo.py`): a value computed once per inputs and
code stamp, read back by later calls; and the "kernels" backend skipping its outlining when
the memo holds it, with the gradient unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.codegen import memo as memo_mod
from zymo.codegen.memo import memo
from zymo.codegen.numba.rewrites import SourceFacts


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_computed_once_then_read(cache):
    value = {"src": "x = 1\n", "names": ["_kernel_0"], "n": 3}
    parts = ["def f(): pass", {"a": 2, "b": 1}, frozenset({"z", "y", "x"}), SourceFacts(ints=frozenset({"i"}))]
    assert memo("step", parts, lambda: value) == value
    again = memo("step", ["def f(): pass", {"b": 1, "a": 2}, {"x", "y", "z"}, SourceFacts(ints=frozenset({"i"}))],
                 lambda: pytest.fail("computed again"))
    assert again == {"src": "x = 1\n", "names": ["_kernel_0"], "n": 3}
    assert len(list((cache / "codegen").glob("*.json"))) == 1


def test_other_inputs_other_step_or_other_code_compute_again(cache, monkeypatch):
    memo("step", ["a"], lambda: 1)
    assert memo("step", ["b"], lambda: 2) == 2
    assert memo("other", ["a"], lambda: 3) == 3
    monkeypatch.setattr(memo_mod, "_STAMP", ["another version of zymo's code"])
    assert memo("step", ["a"], lambda: 4) == 4


def test_unreadable_or_unwritable_files_are_passed_over(cache, monkeypatch):
    memo("step", ["a"], lambda: 1)
    for f in (cache / "codegen").glob("*.json"):
        f.write_text("{not json")
    assert memo("step", ["a"], lambda: 5) == 5  # a damaged file: computed, and written again
    assert memo("step", ["a"], lambda: pytest.fail("computed again")) == 5
    blocker = cache / "file"
    blocker.write_text("")
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(blocker / "below a file"))
    assert memo("step", ["a"], lambda: 6) == 6


def test_parts_must_be_canonical(cache):
    with pytest.raises(TypeError, match="not a canonical part"):
        memo("step", [object()], lambda: 1)


def _nest(A, x, y):
    n, m = A.shape
    for i in range(n):
        s = 0.0
        for j in range(m):
            s = s + A[i, j] * x[j] * x[j]
        y[i] = s * s
    return np.sum(y)


def test_kernels_backend_reads_its_outlining_back(cache, monkeypatch):
    """A second build of the derivative (the in-memory caches emptied, as in a new process)
    takes the outlined program from the memo: the outliner is not run, the gradient is the
    same, and it agrees with the Python backend and central differences."""
    rng = np.random.default_rng(3)
    A, x = rng.random((4, 3)), rng.random(3)

    def grad(numba):
        dx = np.zeros(3)
        zymo.autodiff(Reverse, _nest, Active, A, Duplicated(x, dx), np.zeros(4), numba=numba)
        return dx

    first = grad("kernels")
    zymo.cache.cache_clear()
    import zymo.codegen.outline as outline_mod
    monkeypatch.setattr(outline_mod, "outline", lambda *a, **k: pytest.fail("outlined again"))
    assert np.array_equal(grad("kernels"), first)
    np.testing.assert_allclose(first, grad(False), rtol=1e-12)
    h = 1e-6
    central = [(_nest(A, x + h * e, np.zeros(4)) - _nest(A, x - h * e, np.zeros(4))) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(first, central, rtol=1e-6)
    assert np.all(np.abs(first) > 1e-3)  # not a vanishing gradient
