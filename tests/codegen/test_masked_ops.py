"""`codegen/numba/masked.py`: each triangle-masked update gives its NumPy statement's result to
the bit, through the compiled loop where the module contract allows it (checked by counting
the loop's calls) and through NumPy elsewhere; the untouched half keeps its NaNs and -0.0s."""
from __future__ import annotations

import numpy as np
import pytest

from zymo import runtime as _rt
from zymo.codegen.numba import masked

N = 7


def _mask(lower: bool, n: int = N):
    m = _rt.tri_mask(n)
    return m if lower else m.T


def _matrix(rng, dtype=np.float64, n: int = N):
    """Random numbers, with NaN, -0.0 and inf here and there (kept bit for bit where unmasked)."""
    a = (rng.standard_normal((n, n)) * 3.0).astype(dtype)
    a[rng.random((n, n)) < 0.1] = np.nan
    a[rng.random((n, n)) < 0.1] = -0.0
    a[rng.random((n, n)) < 0.05] = np.inf
    return a


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)), (a, b)


@pytest.fixture
def calls(monkeypatch):
    """The compiled loop's calls, by operation."""
    seen: dict[str, int] = {}
    names = {masked.ADD: "add", masked.SCALE: "scale", masked.DIV: "div", masked.FILL: "fill", masked.COPY: "copy"}
    loop = masked._loop

    def spy(t, v, c, op, lower):
        seen[names[op]] = seen.get(names[op], 0) + 1
        return loop(t, v, c, op, lower)
    monkeypatch.setattr(masked, "_loop", spy)
    return seen


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_add_and_fill_match_numpy(lower, dtype, calls):
    rng = np.random.default_rng(1)
    m = _mask(lower)
    t, v = _matrix(rng, dtype), _matrix(rng, dtype)
    want = t.copy()
    np.add(want, v, out=want, where=m)
    masked.add(t, v, m, lower)
    _same(t, want)
    np.copyto(want, -2.5, where=m)
    masked.fill(t, -2.5, m, lower)
    _same(t, want)
    assert calls == {"add": 1, "fill": 1}
    assert not np.all(t == 0.0)  # a fill that wrote nothing would fail above


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("c", [0.7, -3, np.float64(1.5e-300), 0.0, 2**53])
def test_scale_and_divide_match_numpy(lower, c, calls):
    rng = np.random.default_rng(2)
    m = _mask(lower)
    for op, ufunc in ((masked.scale, np.multiply), (masked.div, np.divide)):
        t = _matrix(rng)
        want = t.copy()
        with np.errstate(all="ignore"):
            ufunc(want, c, out=want, where=m)
            op(t, c, m, lower)
        _same(t, want)
    assert calls == {"scale": 1, "div": 1}


@pytest.mark.parametrize("lower", [True, False])
def test_where_matches_numpy(lower, calls):
    rng = np.random.default_rng(3)
    m = _mask(lower)
    for f in (_matrix(rng), _matrix(rng, np.float32), _matrix(rng).T):
        got = masked.where(m, f, lower)
        _same(got, np.where(m, f, 0.0))
    assert calls == {"copy": 3}


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shift", [0, 1])
def test_mirror_of_a_matrix_matches_numpy(lower, shift, calls):
    """A symmetric matrix's mirror store as `codegen/triangles.py` writes it: `X[jbox, ibox].T`
    from `X[ibox, jbox]`, the boxes of a triangle with or without its diagonal."""
    rng = np.random.default_rng(4)
    n = N + 1
    X = _matrix(rng, n=n)
    if shift == 0:
        src, dst = X[:N, :N], X[:N, :N].T
    elif not lower:  # j > i: i in [0, n - 1), j in [1, n)
        src, dst = X[:N, 1:], X[1:, :N].T
    else:  # j < i: i in [1, n), j in [0, n - 1)
        src, dst = X[1:, :N], X[:N, 1:].T
    want = X.copy()
    wsrc, wdst = (want[:N, :N], want[:N, :N].T) if shift == 0 else (
        (want[:N, 1:], want[1:, :N].T) if not lower else (want[1:, :N], want[:N, 1:].T))
    np.copyto(wdst, wsrc, where=_mask(lower))
    masked.mirror(dst, src, _mask(lower), lower)
    _same(X, want)
    assert calls == {"copy": 1}


@pytest.mark.parametrize("lower", [True, False])
def test_statements_outside_the_contract_run_as_numpy(lower, calls):
    rng = np.random.default_rng(5)
    m = _mask(lower)
    cases = []
    t = _matrix(rng)
    cases.append(("add", t, t[::-1], m))  # overlapping operands
    cases.append(("add", _matrix(rng, np.float32), _matrix(rng), m))  # mixed dtypes
    cases.append(("add", _matrix(rng), _matrix(rng)[0], m))  # a row, broadcast
    cases.append(("add", _matrix(rng), _matrix(rng), m.copy() if lower else m.T.copy()))  # not the cached mask
    cases.append(("add", _matrix(rng), _matrix(rng), _mask(not lower)))  # the other triangle
    cases.append(("scale", _matrix(rng, np.float32), 0.3, m))  # float32 scaled by a Python float
    cases.append(("scale", _matrix(rng), 2**60 + 1, m))  # an int beyond 2**53
    cases.append(("div", _matrix(rng), np.float32(0.3), m))  # a float32 number
    cases.append(("fill", np.zeros((N, N), np.int64), 3, m))  # integers
    cases.append(("mirror", t, t[::-1], m))  # overlapping, not a mirror
    for name, a, b, mask in cases:
        want = a.copy()
        with np.errstate(all="ignore"):
            if name == "add":
                np.add(want, b, out=want, where=mask)
            elif name == "scale":
                np.multiply(want, b, out=want, where=mask)
            elif name == "div":
                np.divide(want, b, out=want, where=mask)
            else:  # fill, mirror
                np.copyto(want, b, where=mask)
            getattr(masked, name)(a, b, mask, lower)
        _same(a, want)
    assert calls == {}
    ints = np.arange(N * N).reshape(N, N)
    _same(masked.where(m, ints, lower), np.where(m, ints, 0.0))
    assert calls == {}


def test_shape_errors_are_numpys():
    m = _rt.tri_mask(N)
    with pytest.raises(ValueError, match="broadcast"):
        masked.add(np.zeros((N, N)), np.zeros((N + 1, N)), m, True)
    with pytest.raises(ValueError):
        masked.fill(np.zeros((N, N + 1)), 0.0, m, True)
