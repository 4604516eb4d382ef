"""The lowering of generated programs (`codegen/numba_lowering.py`): Numba's, with each loop of
the program marked so that LLVM does not unroll it by a count known only at run time."""
import re

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from helpers import fd_grad, zymo_grad
from numba_helpers import numba_entries, private_cache_dir  # noqa: F401  (fresh cache directory)

from zymo.codegen.numba.lowering import NO_RUNTIME_UNROLL
from zymo.codegen.numba.pipeline import Compiler


def triangle(x, n):
    """Two loops of the program, one nested, with trip counts known only at run time."""
    s = 0.0
    for i in range(n):
        for j in range(i):
            s = s + x[i] * x[j]
    return s


def until(x, limit):
    k = 0
    s = 0.0
    while k < x.shape[0] and s < limit:
        s = s + x[k]
        k += 1
    return s


def numpy_only(x):
    return np.sum(x * x)  # loops of Numba's implementations, none of the program


def llvm_of(dispatcher):
    (sig,) = dispatcher.signatures
    return dispatcher.inspect_llvm(sig)


def loop_ids(llvm: str) -> list[str]:
    """The loop IDs whose property is `NO_RUNTIME_UNROLL`."""
    prop = re.search(rf'^(!\d+) = !{{\s*!"{re.escape(NO_RUNTIME_UNROLL)}"\s*}}$', llvm, re.MULTILINE)
    if prop is None:
        return []
    return re.findall(rf"^(!\d+) = distinct !{{\s*\1,\s*{prop.group(1)}\s*}}$", llvm, re.MULTILINE)


@pytest.mark.parametrize("f, args, loops", [
    (triangle, (np.linspace(0.5, 2.0, 9), 9), 2),
    (until, (np.linspace(0.5, 2.0, 9), 5.0), 1),
])
def test_each_loop_of_the_program_is_marked_and_computes_the_same(f, args, loops, monkeypatch):
    # the loop IDs are read in LLVM's optimized IR, so at the level users compile at (at the
    # suite's NUMBA_OPT=1 only one of `triangle`'s two loops keeps its ID)
    monkeypatch.setattr(numba.core.config, "OPT", numba.core.config._OptLevel(3))
    marked = numba.njit(pipeline_class=Compiler)(f)
    plain = numba.njit(f)
    assert marked(*args) == plain(*args) == f(*args)
    llvm = llvm_of(marked)
    ids = loop_ids(llvm)
    assert len(ids) == loops
    used = set(re.findall(r"!llvm\.loop (!\d+)", llvm))
    assert set(ids) <= used  # on the loops' back edges, not only declared
    assert loop_ids(llvm_of(plain)) == []


def test_loops_of_numbas_implementations_are_not_marked():
    x = np.linspace(0.5, 2.0, 33)
    marked = numba.njit(pipeline_class=Compiler)(numpy_only)
    assert marked(x) == pytest.approx(numpy_only(x), rel=1e-14)
    assert loop_ids(llvm_of(marked)) == []


def gmm_like(x, mu, out):
    """Loops of a derivative's kind: a branch, a running sum, writes into a buffer."""
    total = 0.0
    for i in range(x.shape[0]):
        best = 0.0
        for k in range(mu.shape[0]):
            d = x[i] - mu[k]
            out[k] = d * d
            if out[k] > best:  # a branch in the loop, as a derivative has
                best = out[k]
        total = total + best
    return total


def test_a_gradient_with_marked_loops_is_right():
    rng = np.random.default_rng(4)
    x, mu = rng.standard_normal(6), rng.standard_normal(3)
    args = [x, mu, np.zeros(3)]
    g = zymo_grad(gmm_like, [a.copy() for a in args], numba=True)
    fd = fd_grad(gmm_like, [a.copy() for a in args])
    py = zymo_grad(gmm_like, [a.copy() for a in args], numba=False)
    for a, b, c in zip(g[:2], fd[:2], py[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-14)
        assert np.max(np.abs(a)) > 0.1
    (entry,) = numba_entries(gmm_like)
    assert len(loop_ids(llvm_of(entry.fn))) >= 2  # the forward sweep's loops and the adjoint's
