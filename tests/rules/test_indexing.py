"""Advanced indexing (integer arrays, boolean masks) and np.add.at (`rules/indexing.py`).

Every case runs `zymo.testing.check_grad`: forward and reverse mode against central
differences, and the two modes against each other (dot-product test). Repeated indices
are in every write case: NumPy keeps the LAST value stored to an element and
`x[idx] += v` adds once per distinct index, and finite differences see exactly that.
JAX is a second oracle where its semantics are defined (reads, masks, `.at[].add`),
hand-computed values pin the repeated-write adjoints (not zero, right sign), and split,
batch and Numba runs are compared with the plain Python reverse mode.
"""
from __future__ import annotations

import numpy as np
import pytest

import zymo
import zymo.cache
from zymo import Active, BatchDuplicated, Const, Duplicated, Forward, Reverse, ReverseSplitWithPrimal
from zymo.errors import ZymoError
from zymo.frontend.source import unwrap
from zymo.testing import check_grad

IDX = np.array([0, 2, 2, 4])           # a repeated index
IDX2 = np.array([3, 1, 3, -1])          # repeated, and a negative one


def rng():
    return np.random.default_rng(7)


# -- the functions -----------------------------------------------------------------
def read1(x, idx):
    y = x[idx]
    return np.sum(y * y * np.arange(1.0, 5.0))


def read_rows(a, idx):
    return np.sin(a[idx]) * 2.0


def read_cols(a, idx):
    return np.sum(a[:, idx] ** 2, axis=0)


def read_pairs(a, i, j):
    return a[i, j] * np.arange(1.0, 4.0)


def read_list(x):
    return x[[0, 2, 2]] * x[1]


def read_is_copy(x, idx):
    y = x[idx]
    y[0] = 5.0          # writes the copy, not x
    x[idx] = 0.0        # overwrites x after the read: y keeps the old values
    return y * y + x[1]


def write_rep(x, v, idx):
    x = x * 1.0
    x[idx] = v
    return x * x


def write_scalar(x, s, idx):
    y = np.sin(x)
    y[idx] = s * s
    return y


def write_rows(a, v, idx):
    b = a * 1.0
    b[idx] = v          # v: one row, broadcast to every selected row
    return b * a


def write_cols(a, v, idx):
    b = a * 1.0
    b[:, idx] = v
    return b * b


def iadd_rep(x, v, idx):
    y = x * 2.0
    y[idx] += v * v
    return y


def imul_rep(x, v, idx):
    y = x * 1.0
    y[idx] *= v
    return y


def mask_read(x):
    return np.sum(x[x > 0.0] ** 2)


def mask_zero(x):
    y = np.sin(x)
    y[y > 0.0] = 0.0
    return y * x


def mask_write(x, v, m):
    y = x * 1.0
    y[m] = v
    return y * y


def mask_2d(a):
    b = a * 1.0
    b[a < 0.0] = 0.5 * a[a < 0.0]
    return b


def mask_iadd(x, s):
    y = x * 1.0
    y[x > 0.0] += s
    return y * y


def add_at(x, v, idx):
    a = x * 1.0
    np.add.at(a, idx, v * v)
    return a * x


def add_at_scalar(x, s, idx):
    a = np.cos(x)
    np.add.at(a, idx, s)
    return a * a


def add_at_rows(a, v, idx):
    b = a * 1.0
    np.add.at(b, idx, v)
    return b * b


def loop_gather(x, idx):
    s = 0.0
    for k in range(3):
        y = x[idx]
        s += np.sum(y * y) * (k + 1)
        x[idx] = y * 0.5
    return s


CASES = {
    "read1": (read1, lambda r: (r.normal(size=5), IDX)),
    "read_negative": (read1, lambda r: (r.normal(size=5), IDX2)),
    "read_rows": (read_rows, lambda r: (r.normal(size=(4, 3)), np.array([1, 1, 3]))),
    "read_cols": (read_cols, lambda r: (r.normal(size=(4, 3)), np.array([2, 0, 2]))),
    "read_pairs": (read_pairs, lambda r: (r.normal(size=(4, 3)), np.array([1, 1, 3]), np.array([0, 0, 2]))),
    "read_list": (read_list, lambda r: (r.normal(size=5),)),
    "read_is_copy": (read_is_copy, lambda r: (r.normal(size=5), IDX)),
    "write_rep": (write_rep, lambda r: (r.normal(size=5), r.normal(size=4), IDX)),
    "write_negative": (write_rep, lambda r: (r.normal(size=5), r.normal(size=4), IDX2)),
    "write_scalar": (write_scalar, lambda r: (r.normal(size=5), 0.7, IDX)),
    "write_rows": (write_rows, lambda r: (r.normal(size=(4, 3)), r.normal(size=3), np.array([2, 0, 2]))),
    "write_cols": (write_cols, lambda r: (r.normal(size=(3, 4)), r.normal(size=(3, 3)), np.array([1, 3, 1]))),
    "iadd_rep": (iadd_rep, lambda r: (r.normal(size=5), r.normal(size=4), IDX)),
    "imul_rep": (imul_rep, lambda r: (r.normal(size=5), r.normal(size=4), IDX2)),
    "mask_read": (mask_read, lambda r: (r.normal(size=6),)),
    "mask_zero": (mask_zero, lambda r: (r.normal(size=6),)),
    "mask_write": (mask_write, lambda r: (r.normal(size=6), r.normal(size=3), np.array([1, 0, 1, 0, 1, 0], bool))),
    "mask_2d": (mask_2d, lambda r: (r.normal(size=(3, 4)),)),
    "mask_iadd": (mask_iadd, lambda r: (r.normal(size=6), 0.3)),
    "add_at": (add_at, lambda r: (r.normal(size=5), r.normal(size=4), IDX)),
    "add_at_scalar": (add_at_scalar, lambda r: (r.normal(size=5), 0.4, IDX2)),
    "add_at_rows": (add_at_rows, lambda r: (r.normal(size=(4, 2)), r.normal(size=(3, 2)), np.array([1, 1, 0]))),
    "loop_gather": (loop_gather, lambda r: (r.normal(size=5), IDX)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_finite_differences_and_other_mode(name):
    f, make = CASES[name]
    result = check_grad(f, *make(rng()))
    assert result is not None


# -- exact values: repeated indices ------------------------------------------------
def sum_write_rep(x, v, idx):
    y = x * 1.0
    y[idx] = v
    return np.sum(y * np.arange(1.0, 6.0))


def sum_iadd_rep(x, v, idx):
    y = x * 1.0
    y[idx] += v
    return np.sum(y * np.arange(1.0, 6.0))


def test_repeated_store_gives_the_last_occurrence_the_adjoint():
    x, v = np.ones(5), np.array([1.0, 2.0, 3.0, 4.0])
    dx, dv = np.zeros(5), np.zeros(4)
    zymo.autodiff(Reverse, sum_write_rep, Active, Duplicated(x, dx), Duplicated(v, dv), Const(IDX))
    np.testing.assert_array_equal(dv, [1.0, 0.0, 3.0, 5.0])   # v[1] is overwritten by v[2]
    np.testing.assert_array_equal(dx, [0.0, 2.0, 0.0, 4.0, 0.0])
    (t,) = zymo.autodiff(Forward, sum_write_rep, Duplicated, Duplicated(x, np.zeros(5)),
                         Duplicated(v, np.array([0.0, 1.0, 0.0, 0.0])), Const(IDX))
    assert t == 0.0  # the overwritten value has no effect
    (t,) = zymo.autodiff(Forward, sum_write_rep, Duplicated, Duplicated(x, np.zeros(5)),
                         Duplicated(v, np.array([0.0, 0.0, -1.0, 0.0])), Const(IDX))
    assert t == -3.0


def test_repeated_augmented_store_adds_once():
    x, v = np.ones(5), np.array([1.0, 2.0, 3.0, 4.0])
    dx, dv = np.zeros(5), np.zeros(4)
    zymo.autodiff(Reverse, sum_iadd_rep, Active, Duplicated(x, dx), Duplicated(v, dv), Const(IDX))
    np.testing.assert_array_equal(dv, [1.0, 0.0, 3.0, 5.0])
    np.testing.assert_array_equal(dx, [1.0, 2.0, 3.0, 4.0, 5.0])


def test_repeated_read_accumulates():
    x = np.arange(5.0)
    dx = np.zeros(5)
    zymo.autodiff(Reverse, read1, Active, Duplicated(x, dx), Const(IDX))
    # d/dx sum(w * x[idx]^2), w = 1..4: x[2] is read twice (weights 2 and 3)
    np.testing.assert_allclose(dx, [0.0, 0.0, 2 * 2.0 * (2 + 3), 0.0, 2 * 4.0 * 4])


# -- JAX as a second oracle ----------------------------------------------------------
jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

JAX = {
    "read1": lambda x, idx: jnp.sum(x[idx] ** 2 * jnp.arange(1.0, 5.0)),
    "read_cols": lambda a, idx: jnp.sum(jnp.sum(a[:, idx] ** 2, axis=0) * jnp.arange(1.0, 4.0)),
    "mask_zero": lambda x: jnp.sum(jnp.where(jnp.sin(x) > 0.0, 0.0, jnp.sin(x)) * x * jnp.arange(1.0, 7.0)),
    "add_at": lambda x, v, idx: jnp.sum(x.at[idx].add(v * v) * x * jnp.arange(1.0, 6.0)),
}


def read1_w(x, idx):
    return read1(x, idx)


def read_cols_w(a, idx):
    return np.sum(read_cols(a, idx) * np.arange(1.0, 4.0))


def mask_zero_w(x):
    return np.sum(mask_zero(x) * np.arange(1.0, 7.0))


def add_at_w(x, v, idx):
    return np.sum(add_at(x, v, idx) * np.arange(1.0, 6.0))


@pytest.mark.slow
@pytest.mark.parametrize("name, f, make", [
    ("read1", read1_w, lambda r: (r.normal(size=5), IDX)),
    ("read_cols", read_cols_w, lambda r: (r.normal(size=(4, 3)), np.array([2, 0, 2]))),
    ("mask_zero", mask_zero_w, lambda r: (r.normal(size=6),)),
    ("add_at", add_at_w, lambda r: (r.normal(size=5), r.normal(size=4), IDX)),
])
def test_against_jax(name, f, make):
    args = make(rng())
    floats = [k for k, a in enumerate(args) if a.dtype.kind == "f"]
    ours = zymo.gradient(Reverse, f, *args)
    ref = jax.jit(jax.grad(JAX[name], argnums=tuple(floats)))(*[jnp.asarray(a) for a in args])
    for k, r in zip(floats, ref):
        np.testing.assert_allclose(ours[k], np.asarray(r), rtol=1e-12, atol=1e-12)
        assert np.max(np.abs(ours[k])) > 0.1


# -- split, batch ------------------------------------------------------------------
def scatter_loss(x, v, idx):
    y = x * 1.0
    y[idx] += v * y[idx]
    z = y[idx]
    y[y > 0.0] = 0.0
    return np.sum(y * y) + np.sum(z)


def test_split_mode_matches_combined():
    r = rng()
    x, v = r.normal(size=5), r.normal(size=4)
    dx_ref, dv_ref = np.zeros(5), np.zeros(4)
    zymo.autodiff(Reverse, scatter_loss, Active, Duplicated(x.copy(), dx_ref), Duplicated(v, dv_ref), Const(IDX))
    dx, dv = np.zeros(5), np.zeros(4)
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, scatter_loss, Active, Duplicated(x.copy(), dx),
                                   Duplicated(v, dv), Const(IDX))
    tape, y = fwd(Duplicated(x.copy(), dx), Duplicated(v, dv), Const(IDX))
    rev(Duplicated(x.copy(), dx), Duplicated(v, dv), Const(IDX), 1.0, tape)
    np.testing.assert_allclose(dx, dx_ref)
    np.testing.assert_allclose(dv, dv_ref)
    assert np.max(np.abs(dv)) > 0.1
    check_grad(scatter_loss, x, v, IDX)


def test_batch_forward_matches_single_lanes():
    r = rng()
    x, v = r.normal(size=5), r.normal(size=4)
    tx = (r.normal(size=5), r.normal(size=5))
    tv = (r.normal(size=4), r.normal(size=4))
    (lanes,) = zymo.autodiff(Forward, scatter_loss, BatchDuplicated, BatchDuplicated(x.copy(), tx),
                             BatchDuplicated(v, tv), Const(IDX))
    for k in range(2):
        (ref,) = zymo.autodiff(Forward, scatter_loss, Duplicated, Duplicated(x.copy(), tx[k].copy()),
                               Duplicated(v, tv[k].copy()), Const(IDX))
        assert lanes[k] == pytest.approx(ref, rel=1e-12)


# -- Numba ---------------------------------------------------------------------------
def nb_gather_scatter(x, v, idx):
    y = x * 1.0
    g = y[idx]
    y[idx] = v * g
    y[idx] += v
    y[y > 1.0] = 1.0
    return np.sum(y * y) + np.sum(x[x < 0.0] * g[0])


def nb_add_at(x, v, idx):
    a = x * 1.0
    np.add.at(a, idx, v * v)
    return np.sum(a * a)


@pytest.mark.slow
@pytest.mark.parametrize("f", [nb_gather_scatter, nb_add_at])
def test_numba_matches_python(f, tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    r = rng()
    x, v = r.normal(size=6), r.normal(size=4)
    idx = np.array([0, 2, 2, 5])
    ref = zymo.gradient(Reverse, f, x, v, idx)
    got = zymo.gradient(Reverse, f, x, v, idx, numba=True)
    for a, b in zip(got[:2], ref[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
        assert np.max(np.abs(a)) > 0.1
    assert any(key[0][0] is unwrap(f) and c.backend != "python" for key, cs in zymo.cache.COMPILED.items() for c in cs)


# -- refusals ------------------------------------------------------------------------
def float_index(x, w):
    return np.sum(x[w])


def bool_scalar(x, b):
    return np.sum(x[b])


@pytest.mark.parametrize("f, args, what", [
    (float_index, (np.ones(3), np.zeros(2)), "indices must be integers"),
    (bool_scalar, (np.ones(3), True), "indices must be integers"),
])
def test_refused_with_the_line(f, args, what):
    with pytest.raises(ZymoError) as e:
        zymo.gradient(Reverse, f, *args)
    assert what in str(e.value)
    assert "test_indexing.py" in str(e.value)
