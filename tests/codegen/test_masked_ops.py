"""`codegen/numba/masked.py`: each triangle-masked update gives its NumPy statement's result to
the bit, through the compiled loop where the module contract allows it (checked by counting
the loop's calls) and through NumPy elsewhere; the untouched half keeps its NaNs and -0.0s."""
from __future__ import annotations

import ast

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
    """The compiled loop's runs, by operation."""
    seen: dict[str, int] = {}
    names = {masked.ADD: "add", masked.SCALE: "scale", masked.DIV: "div", masked.FILL: "fill", masked.COPY: "copy",
             masked.MOVE: "move", masked.SET: "assign", masked.DIVCOPY: "div_mirror", masked.MOVEDIV: "move_div",
             masked.SYM: "sym_where"}
    loop = masked._loop

    def spy(t, v, x, m, c, op, lower):
        ran = loop(t, v, x, m, c, op, lower)
        if ran:
            seen[names[op]] = seen.get(names[op], 0) + 1
        return ran
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
    assert calls == ({"add": 1, "fill": 1} if dtype == np.float64 else {})  # float32: NumPy's
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
    assert calls == {"copy": 2}  # not float32 (module contract)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shift", [0, 1])
def test_mirror_of_a_matrix_matches_numpy(lower, shift, calls):
    """A symmetric matrix's mirror store as `codegen/triangles.py` writes it: `X[jbox, ibox].T`
    from `X[ibox, jbox]`, the boxes of a triangle with or without its diagonal."""
    rng = np.random.default_rng(4)
    n = N + 1
    X = _matrix(rng, n=n)
    src, dst = _mirror_pair(X, shift, lower)
    want = X.copy()
    wsrc, wdst = _mirror_pair(want, shift, lower)
    np.copyto(wdst, wsrc, where=_mask(lower))
    masked.mirror(dst, src, _mask(lower), lower)
    _same(X, want)
    assert calls == {"copy": 1}


def _mirror_pair(X, shift, lower):
    """(the triangle's view, its mirror's view) of `X`, the boxes of a triangle with (shift 0) or
    without its diagonal (`codegen/triangles.py`)."""
    if shift == 0:
        return X[:N, :N], X[:N, :N].T
    if not lower:  # j > i: i in [0, n - 1), j in [1, n)
        return X[:N, 1:], X[1:, :N].T
    return X[1:, :N], X[:N, 1:].T  # j < i: i in [1, n), j in [0, n - 1)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shift", [0, 1])
def test_adjoint_mirror_matches_its_three_statements(lower, shift, calls):
    rng = np.random.default_rng(6)
    X = _matrix(rng, n=N + 1)
    want = X.copy()
    own, other = _mirror_pair(want, shift, lower)
    w = other.copy()
    np.copyto(other, 0.0, where=_mask(lower))
    np.add(own, w, out=own, where=_mask(lower))
    own, other = _mirror_pair(X, shift, lower)
    masked.move(own, other, _mask(lower), lower)
    _same(X, want)
    assert not np.array_equal(X, _matrix(np.random.default_rng(6), n=N + 1), equal_nan=True)
    # arrays of their own
    t, v = _matrix(rng), _matrix(rng)
    wt, wv = t.copy(), v.copy()
    w = wv.copy()
    np.copyto(wv, 0.0, where=_mask(lower))
    np.add(wt, w, out=wt, where=_mask(lower))
    masked.move(t, v, _mask(lower), lower)
    _same(t, wt)
    _same(v, wv)
    assert calls == {"move": 2}


@pytest.mark.parametrize("lower", [True, False])
def test_column_major_targets_match_numpy(lower, calls):
    """A transposed target runs as its transpose's other triangle (the loop walks memory in order)."""
    rng = np.random.default_rng(7)
    m = _mask(lower)
    t, v = _matrix(rng).T, _matrix(rng)
    want = t.copy()
    np.add(want, v, out=want, where=m)
    masked.add(t, v, m, lower)
    _same(t, want)
    np.copyto(want, 1.25, where=m)
    masked.fill(t, 1.25, m, lower)
    _same(t, want)
    assert calls == {"add": 1, "fill": 1}


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
    ro = _matrix(rng)
    ro.setflags(write=False)
    cases.append(("move", _matrix(rng), ro, m))  # a read-only source: NumPy's error
    for name, a, b, mask in cases:
        want = a.copy()
        with np.errstate(all="ignore"):
            if name == "add":
                np.add(want, b, out=want, where=mask)
            elif name == "scale":
                np.multiply(want, b, out=want, where=mask)
            elif name == "div":
                np.divide(want, b, out=want, where=mask)
            elif name == "move":
                if not b.flags.writeable:
                    with pytest.raises(ValueError, match="read-only"):
                        masked.move(a, b, mask, lower)
                    continue
                w = b.copy()
                np.copyto(b.copy(), 0.0, where=mask)
                np.add(want, w, out=want, where=mask)
            else:  # fill, mirror
                np.copyto(want, b, where=mask)
            getattr(masked, name)(a, b, mask, lower)
        _same(a, want)
    # overlapping operands of `move`, not a mirror: the three statements
    t = _matrix(rng)
    want = t.copy()
    w = want[::-1].copy()
    np.copyto(want[::-1], 0.0, where=m)
    np.add(want, w, out=want, where=m)
    masked.move(t, t[::-1], m, lower)
    _same(t, want)
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


@pytest.mark.parametrize("lower", [True, False])
def test_review_cases_run_as_numpy(lower, calls):
    """Read-only operands, a mirror of views whose boxes are no triangle's, a view of the mask
    that is not its transpose: NumPy's statement (its result, its errors)."""
    rng = np.random.default_rng(8)
    m = _mask(lower)
    f = _matrix(rng)
    f.setflags(write=False)
    _same(masked.where(m, f, lower), np.where(m, f, 0.0))  # copied, then the loop
    t = _matrix(rng)
    want = t.copy()
    np.add(want, f, out=want, where=m)
    masked.add(t, f, m, lower)
    _same(t, want)
    with pytest.raises(ValueError, match="read-only"):
        masked.fill(f, 0.0, m, lower)
    X = _matrix(rng, n=N + 2)
    want = X.copy()
    np.copyto(want[2:, :N].T, want[:N, 2:], where=m)  # j's box two past i's: no triangle's
    masked.mirror(X[2:, :N].T, X[:N, 2:], m, lower)
    _same(X, want)
    if not lower:
        t = _matrix(rng)
        want = t.copy()
        view = _rt.tri_mask(N)[:, :]  # the lower mask, passed as the upper one
        np.add(want, want[::-1].copy(), out=want, where=view)
        masked.add(t, t[::-1].copy(), view, lower)
        _same(t, want)
    as_bytes = m.view(np.int8)  # a view of the cached mask, not a boolean one
    g = _matrix(rng)
    _same(masked.where(as_bytes, g, lower), np.where(as_bytes, g, 0.0))
    assert calls == {"copy": 1}


@pytest.mark.parametrize("lower", [True, False])
def test_masked_operand_laid_out_as_numpys(lower):
    """`where`'s result has NumPy's layout, so a product of it sums in the same order."""
    rng = np.random.default_rng(9)
    m = _mask(lower)
    for f in (_matrix(rng), _matrix(rng).T, _matrix(rng, n=N + 1)[:N, 1:].T):
        got, want = masked.where(m, f, lower), np.where(m, f, 0.0)
        assert got.flags.c_contiguous == want.flags.c_contiguous and got.flags.f_contiguous == want.flags.f_contiguous
        _same(got, want)


def test_second_review_cases_run_as_numpy(calls):
    """Views of one buffer whose squares wrap across its rows, and targets whose elements share
    memory: NumPy's statements (which copy an overlapping `out=` first)."""
    from numpy.lib.stride_tricks import as_strided
    for name, s, lower, views in (
            ("move", 3, True, lambda b: (b[2:11].reshape(3, 3), b[0:9].reshape(3, 3).T)),
            ("mirror", 2, False, lambda b: (b[1:5].reshape(2, 2).T, b[0:4].reshape(2, 2)))):
        got, want = np.arange(1.0, 12.0), np.arange(1.0, 12.0)
        m = _mask(lower, s)
        t, v = views(want)
        if name == "move":
            w = v.copy()
            np.copyto(v, 0.0, where=m)
            np.add(t, w, out=t, where=m)
        else:
            np.copyto(t, v, where=m)
        getattr(masked, name)(*views(got), m, lower)
        _same(got, want)
    for strides in ((8, 8), (0, 8)):
        base, ref = np.arange(8.0), np.arange(8.0)
        t, tw = as_strided(base, (4, 4), strides), as_strided(ref, (4, 4), strides)
        np.multiply(tw, 2.0, out=tw, where=_mask(True, 4))
        masked.scale(t, 2.0, _mask(True, 4), True)
        _same(base, ref)
        np.add(tw, np.ones((4, 4)), out=tw, where=_mask(False, 4))
        masked.add(t, np.ones((4, 4)), _mask(False, 4), False)
        _same(base, ref)
    assert calls == {}


def _compiled_src(src: str) -> str:
    import ast

    from zymo.codegen.triangles import compiled_masks
    return ast.unparse(ast.Module(compiled_masks(ast.parse(src).body), []))


def test_only_the_adjoint_mirror_store_becomes_a_move():
    ok = ("w = X[:3, :3].T.copy()\n_tri = _rt.tri_mask(3)\nnp.copyto(X[:3, :3].T, 0.0, where=_tri)\n"
          "np.add(X[:3, :3], w, out=X[:3, :3], where=_tri)\n")
    assert "_tri_ops.move(X[:3, :3], X[:3, :3].T, _tri, True)" in _compiled_src(ok)
    inside = "if c:\n" + "".join("    " + line + "\n" for line in ok.splitlines()) + "y = w\n"
    assert "move" not in _compiled_src(inside)  # `w` read after the branch
    rebound = ("_tri = _rt.tri_mask(3)\nw = X[:3, :3].T.copy()\nnp.copyto(X[:3, :3].T, 0.0, where=_tri)\n"
               "_tri = _rt.tri_mask(1)\nnp.add(X[:3, :3], w, out=X[:3, :3], where=_tri)\n")
    assert "move" not in _compiled_src(rebound)  # the mask rebound between the fill and the add
    renamed = ("w = X[:3, :3].T.copy()\nw = _rt.tri_mask(3)\nnp.copyto(X[:3, :3].T, 0.0, where=w)\n"
               "np.add(X[:3, :3], w, out=X[:3, :3], where=w)\n")
    assert "move" not in _compiled_src(renamed)  # the copy's name rebound to a mask


# the pairs `codegen/triangles._pairs` writes as one call: each against its two statements


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("order", ["C", "F"])
def test_assign_is_a_zero_fill_then_an_add(lower, order, calls):
    rng = np.random.default_rng(11)
    m = _mask(lower)
    t, v = np.asarray(_matrix(rng), order=order), _matrix(rng)
    want = t.copy(order="K")
    np.copyto(want, 0.0, where=m)
    np.add(want, v, out=want, where=m)
    masked.assign(t, v, m, lower)
    _same(t, want)
    assert np.signbit(want[m]).sum() < np.signbit(v[m]).sum()  # -0.0 in v: 0.0 + -0.0 is 0.0
    assert calls == {"assign": 1}
    # outside the contract (float32, an overlapping operand): the two statements
    t32, v32 = _matrix(rng, np.float32), _matrix(rng, np.float32)
    w32 = t32.copy()
    np.copyto(w32, 0.0, where=m)
    np.add(w32, v32, out=w32, where=m)
    masked.assign(t32, v32, m, lower)
    _same(t32, w32)
    X = _matrix(rng, n=N + 1)
    want = X.copy()
    np.copyto(want[:N, :N], 0.0, where=m)
    np.add(want[:N, :N], want[1:, 1:], out=want[:N, :N], where=m)
    masked.assign(X[:N, :N], X[1:, 1:], m, lower)
    _same(X, want)
    assert calls == {"assign": 1}


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shift", [0, 1])
@pytest.mark.parametrize("c", [3.0, -0.5, 7, np.float64(1e-310)])
def test_div_mirror_is_a_division_then_the_mirror(lower, shift, c, calls):
    rng = np.random.default_rng(12)
    X = _matrix(rng, n=N + 1)
    want = X.copy()
    src, dst = _mirror_pair(want, shift, lower)
    with np.errstate(all="ignore"):
        np.divide(src, c, out=src, where=_mask(lower))
    np.copyto(dst, src, where=_mask(lower))
    src, dst = _mirror_pair(X, shift, lower)
    masked.div_mirror(dst, src, c, _mask(lower), lower)
    _same(X, want)
    assert calls == {"div_mirror": 1}


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shift", [0, 1])
def test_move_div_is_the_adjoint_mirror_then_a_division(lower, shift, calls):
    rng = np.random.default_rng(13)
    X = _matrix(rng, n=N + 1)
    want = X.copy()
    own, other = _mirror_pair(want, shift, lower)
    w = other.copy()
    np.copyto(other, 0.0, where=_mask(lower))
    np.add(own, w, out=own, where=_mask(lower))
    with np.errstate(all="ignore"):
        np.divide(own, 59.0, out=own, where=_mask(lower))
    own, other = _mirror_pair(X, shift, lower)
    masked.move_div(own, other, 59.0, _mask(lower), lower)
    _same(X, want)
    # arrays of their own, and a divisor outside the contract (a complex number: NumPy's statements)
    t, v = _matrix(rng), _matrix(rng)
    wt, wv = t.copy(), v.copy()
    w = wv.copy()
    np.copyto(wv, 0.0, where=_mask(lower))
    np.add(wt, w, out=wt, where=_mask(lower))
    with np.errstate(all="ignore"):
        np.divide(wt, 3.0, out=wt, where=_mask(lower))
    masked.move_div(t, v, 3.0, _mask(lower), lower)
    _same(t, wt)
    _same(v, wv)
    assert calls == {"move_div": 2}
    with pytest.raises(TypeError):  # NumPy's own error: a complex quotient into a float array
        masked.move_div(t, v, 1j, _mask(lower), lower)


@pytest.mark.parametrize("src, want", [
    ("_tri_ops.fill(C[:3, :3], 0.0, _tri, True)\n_tri_ops.add(C[:3, :3], A @ B, _tri, True)",
     ["_tri_ops.assign(C[:3, :3], A @ B, _tri, True)"]),
    ("_tri_ops.fill(C[:3, :3], 0.0, _tri, True)\n_rt.sym_add(C[:3, :3], _tri, True, 1.0, A.T)",
     ["_rt.sym_set(C[:3, :3], _tri, True, 1.0, A.T)"]),
    ("_tri_ops.scale(C[:3, :3], beta, _tri, True)\n_rt.sym_add(C[:3, :3], _tri, True, alpha, A, B)",
     ["_rt.sym_add(C[:3, :3], _tri, True, alpha, A, B, beta=beta)"]),
    ("_tri_ops.div(C[:3, :3], n - 1.0, _tri.T, False)\n_tri_ops.mirror(C[:3, :3].T, C[:3, :3], _tri.T, False)",
     ["_tri_ops.div_mirror(C[:3, :3].T, C[:3, :3], n - 1.0, _tri.T, False)"]),
    ("_tri_ops.move(D[:3, :3], D[:3, :3].T, _tri, True)\n_tri_ops.div(D[:3, :3], c, _tri, True)",
     ["_tri_ops.move_div(D[:3, :3], D[:3, :3].T, c, _tri, True)"]),
    # not paired: the second call's operands read the target's array, or the masks, targets or
    # sides differ, or the fill is not of 0.0, or a divisor reads an array
    ("_tri_ops.fill(C[:3, :3], 0.0, _tri, True)\n_tri_ops.add(C[:3, :3], C[1:, 1:] @ B, _tri, True)", None),
    ("_tri_ops.fill(C[:3, :3], 0.0, _tri, True)\n_rt.sym_add(C[:3, :3], _tri, True, 1.0, C[:3, 3:])", None),
    ("_tri_ops.scale(C[:3, :3], beta, _tri, True)\n_rt.sym_add(C[:3, :3], _tri, True, C[0, 0], A)", None),
    ("_tri_ops.scale(C[:3, :3], b[0], _tri, True)\n_rt.sym_add(C[:3, :3], _tri, True, 1.0, A)", None),
    ("_tri_ops.fill(C[:3, :3], 0.0, _tri, True)\n_tri_ops.add(C[:3, :3], A @ B, _tri.T, False)", None),
    ("_tri_ops.fill(C[:3, :3], 0.0, _tri, True)\n_tri_ops.add(C[1:4, :3], A @ B, _tri, True)", None),
    ("_tri_ops.fill(C[:3, :3], 1.0, _tri, True)\n_tri_ops.add(C[:3, :3], A @ B, _tri, True)", None),
    ("_tri_ops.fill(C[:3, :3], -0.0, _tri, True)\n_tri_ops.add(C[:3, :3], A @ B, _tri, True)", None),
    ("_tri_ops.move(D[:3, :3], D[:3, :3].T, _tri, True)\n_tri_ops.div(D[:3, :3], D[0, 0], _tri, True)", None),
    ("_tri_ops.div(C[:3, :3], c, _tri, True)\n_tri_ops.mirror(C[:3, :3].T, C[1:4, :3], _tri, True)", None),
])
def test_pairs_written_as_one_call(src, want):
    from zymo.codegen.triangles import _pairs
    body = ast.parse(src).body
    got = [ast.unparse(s) for s in _pairs(body)]
    assert got == (want or [ast.unparse(s) for s in ast.parse(src).body])


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("layout", ["C", "F", "view", "readonly"])
def test_sym_where_is_the_masked_operand_plus_its_transpose(lower, layout, calls):
    rng = np.random.default_rng(14)
    m = _mask(lower)
    big = _matrix(rng, n=2 * N)
    f = {"C": big[:N, :N].copy(), "F": np.asfortranarray(big[:N, :N]), "view": big[1::2, ::2],
         "readonly": big[:N, :N].copy()}[layout]
    if layout == "readonly":
        f.flags.writeable = False
    w = np.where(m, f, 0.0)
    want = w + w.T
    got = masked.sym_where(m, f, lower)
    _same(got, want)
    assert got.flags.c_contiguous and np.signbit(want).sum() < np.signbit(f).sum()  # -0.0 + 0.0 is 0.0
    assert calls == {"sym_where": 1}
    f32 = f.astype(np.float32)  # outside the contract: NumPy's
    w32 = np.where(m, f32, 0.0)
    _same(masked.sym_where(m, f32, lower), w32 + w32.T)
    assert calls == {"sym_where": 1}


@pytest.mark.parametrize("src, sym", [
    ("_masked = _tri_ops.where(_tri, D[:3, :3], True)\nX += A @ (_masked + _masked.T)", True),
    ("_masked = _tri_ops.where(_tri, D[:3, :3], True)\nX += (_masked.T + _masked) @ A\nY += _masked.T @ B", False),
    ("_masked = _tri_ops.where(_tri, D[:3, :3], True)\nX += (_masked.T + _masked) @ A\n"
     "Y += alpha * ((_masked + _masked.T) @ B)", True),
    ("_masked = _tri_ops.where(_tri, D[:3, :3], True)\nX += (_masked + _masked.T) @ A\nY = _masked", False),
    ("_masked = _tri_ops.where(_tri, D[:3, :3], True)\nX += (_masked + _masked) @ A", False),
    # a sum of the sum the rewrite wrote and `W.T` is no second sum (helper 62): `W` also read alone
    ("_masked = _tri_ops.where(_tri, D[:3, :3], True)\na = x @ (_masked.T + (_masked + _masked.T))\nb = g(_masked)",
     False),
    ("_masked = _tri_ops.where(_tri, D[:3, :3], True)\na = x @ (_masked + _masked.T + _masked.T)\nb = g(_masked)",
     False),
])
def test_masked_operands_read_only_as_symmetric_sums(src, sym):
    from zymo.codegen.triangles import _symmetrized
    body = ast.parse(src).body
    loads = {"_masked": sum(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id == "_masked"
                            for n in ast.walk(ast.parse(src)))}
    got = "\n".join(ast.unparse(s) for s in _symmetrized(body, loads))
    if sym:
        assert "sym_where" in got and "_masked.T" not in got
    else:
        assert got == "\n".join(ast.unparse(s) for s in ast.parse(src).body)  # unchanged


def test_symmetric_sums_found_whatever_ids_python_reuses():
    """`_SymSums` tells the names it wrote from the user's by `id`; the copies `_symmetrized`
    visits were freed, and a later node could take a freed name's id, so a sum went uncounted
    (about one call in ten once copies came from `pyast.clone`). The names are held now."""
    from zymo.codegen.triangles import _symmetrized
    src = ("_masked = _tri_ops.where(_tri, D[:3, :3], True)\nX += (_masked.T + _masked) @ A\n"
           "Y += alpha * ((_masked + _masked.T) @ B)")
    junk: list = []
    for k in range(600):
        got = "\n".join(ast.unparse(s) for s in _symmetrized(ast.parse(src).body, {"_masked": 4}))
        assert "sym_where" in got and "_masked.T" not in got, k
        junk.append([ast.Name("x") for _ in range(k % 7)])  # allocations between calls, as a pipeline makes
        if len(junk) > 50:
            junk.clear()
