"""The sorting, lookup and statistics rules compiled with Numba (`codegen/numba_sorting.py`):
each family is differentiated with `numba=True` in forward and reverse mode and checked
against the Python backend and central differences. Functions whose primal Numba cannot
compile (`put_along_axis`, `histogram` with weights, `polyval`, SciPy's `logsumexp`) must
raise `ZymoNumbaError` under `numba=True` and fall back to Python with a warning under
`numba="prefer"`, never crash or give a wrong number.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from test_numba_rules import compiled_with_numba, fd_gradient

import zymo
from zymo import Forward, Reverse
from zymo.codegen.numba.backend import ZymoNumbaError

X = np.array([0.3, -0.45, 0.7, 0.1, -1.2])
XP = np.array([-1.0, 0.0, 0.5, 2.0])
FP = np.array([1.0, -1.0, 2.0, 0.0])
IDX = np.array([2, 0, 1, 1, 4])
IDX_ROWS = np.array([[1, 0, 0, 3, 4], [2, 2, 1, 0, 4], [0, 3, 3, 3, 1]])
IDX_COLS = np.array([[0, 2, 1, 1, 0]])


@pytest.fixture(scope="module", autouse=True)
def private_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZYMO_CACHE_DIR", str(tmp_path_factory.mktemp("zymo_cache")))
        yield


def sorting(x):
    out = np.sum(np.sort(x * x) * np.arange(1.0, 6.0)) + np.sum(np.sort(np.outer(x, x + 1.0)) ** 2)
    out += np.sum(np.take_along_axis(x, np.argsort(x), 0) * x) + np.sum(np.take_along_axis(x, IDX, 0) ** 2)
    out += np.partition(x * x, 1)[1] * 3.0 + np.sum(x[np.searchsorted(XP, x)] * x)
    m = np.outer(x[:3], x + 1.0)
    out += np.sum(np.take_along_axis(m, IDX_ROWS, 1) ** 2) + np.sum(np.take_along_axis(m, IDX_COLS, 0) * x)
    return out + np.sum(np.interp(x, XP, FP) * x) + np.interp(x[0] * 2.0, XP, x[1:] * 2.0)


def statistics(x):
    a = np.where(x > 0.5, np.nan, x)
    out = np.nansum(a * 2.0) ** 2 + np.nanmean(a) * x[0] + np.nanmax(a) + np.nanmin(a) * 2.0 + np.nanprod(a + 2.0)
    out += np.nanvar(a) + np.nanstd(a) * 3.0 + np.sum(np.nancumsum(a) ** 2)
    m = np.outer(x, x + 1.0)[:3]
    return out + np.sum(np.cov(m) ** 2) + np.cov(x) + np.sum(np.corrcoef(m) * m[:, :3]) + np.sum(np.cov(x, x * x))


def check_family(f, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to Python would warn
        if numba.config.OPT == 0:  # the suite's level: Numba's merge sort keeps dead dynamic globals (conftest)
            warnings.filterwarnings("ignore", "Cannot cache compiled function", numba.core.errors.NumbaWarning)
        got = zymo.gradient(mode, f, X, numba=True)[0]
    assert compiled_with_numba(f)
    ref = zymo.gradient(mode, f, X, numba=False)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    fd = fd_gradient(f, X)
    assert np.max(np.abs(fd)) > 0.1, "vacuous: the gradient is (nearly) zero"
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [Reverse, Forward], ids=["reverse", "forward"])
def test_sorting_compiles_and_agrees(mode):
    check_family(sorting, mode)


@pytest.mark.slow  # cov/corrcoef: about a minute of Numba compiles per mode on two shared cores
@pytest.mark.parametrize("mode", [Reverse, Forward], ids=["reverse", "forward"])
def test_statistics_compiles_and_agrees(mode):
    check_family(statistics, mode)


def put(x):
    o = x * 1.0
    np.put_along_axis(o, IDX, x * x, 0)
    return np.sum(o * x)


def poly(x):
    return np.sum(np.polyval(x, x))


def hist(x):
    return np.sum(np.histogram(x, bins=3, range=(-2.0, 2.0), weights=x * x)[0] * np.arange(1.0, 4.0))


@pytest.mark.parametrize("f", [put, poly, hist], ids=lambda f: f.__name__)
def test_python_only_rules_are_refused_then_fall_back(f):
    with pytest.raises(ZymoNumbaError) as info:
        zymo.gradient(Reverse, f, X, numba=True)
    assert "test_numba_sorting_stats.py" in str(info.value)  # the user's line: Numba cannot compile the primal
    with pytest.warns(Warning):
        got = zymo.gradient(Reverse, f, X, numba="prefer")[0]
    np.testing.assert_allclose(got, zymo.gradient(Reverse, f, X, numba=False)[0], rtol=1e-12)
    np.testing.assert_allclose(got, fd_gradient(f, X), rtol=1e-6, atol=1e-6)
