"""Fusion of generated code (`codegen/fuse.py`) and deferred sums over broadcast dimensions
(`Reverse._defers_unbroadcast`).

- `fuse` substitutes single-use temporaries into their readers only where nothing between
  can change what they read; each case is run before and after on the same arrays;
- an elementwise temporary's adjoint keeps the shape of its use's result, and is summed
  over the broadcast dimensions once, where the chain reaches an operand. Derivatives
  through broadcasting chains are checked in both modes against central differences and
  the other mode, and under Numba against Python;
- in reverse mode, successive accumulations into one shadow become one where nothing
  between can see the difference (alias facts from the transform); each case that blocks
  a merge is run before and after, and a gm3-like adjoint is checked end to end.
"""
import textwrap

import numpy as np
import pytest
from helpers import zymo_grad

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.codegen.fuse import ShadowFacts, fuse
from zymo.testing import check_grad


def _run(src, **arrays):
    ns = {"np": np}
    exec(src, ns)
    arrays = {k: np.array(v, dtype=float) for k, v in arrays.items()}
    out = ns["f"](**arrays)
    return out, arrays


def _same(src, **arrays):
    """`fuse(src)` returns what `src` returns and leaves the arrays as `src` does."""
    src = textwrap.dedent(src)
    new = fuse(src)
    a, arrs_a = _run(src, **arrays)
    b, arrs_b = _run(new, **arrays)
    np.testing.assert_array_equal(a, b)
    for k in arrs_a:
        np.testing.assert_array_equal(arrs_a[k], arrs_b[k])
    return new


def test_chain_becomes_one_expression():
    new = _same("""
        def f(a, b, c, y):
            t = a * b
            u = t + c
            y[...] = u
            return y.sum()
        """, a=[1.0, 2.0], b=[3.0, 4.0], c=[0.5, 0.25], y=[0.0, 0.0])
    assert "y[...] = a * b + c" in new and "t =" not in new and "u =" not in new


def test_a_name_read_for_its_shape_stays_a_name():
    """`_rt.as_shape(e, t)` reads `t` for its shape and dtype; the Numba rewrite casts `e` to it
    in its loop, which needs a name: `t = W * out` stays, where a value read is substituted."""
    src = textwrap.dedent("""
        def f(W, out, g, d):
            t = W * out
            s = W * g
            d += W * _rt.as_shape(g * out, t) + s
            return d
        """)
    new = fuse(src)
    assert "t = W * out" in new and "_rt.as_shape(g * out, t) + W * g" in new
    ns = {"np": np, "_rt": zymo.runtime}
    exec(new, ns)
    W, out, g = np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array([0.5, 2.0])
    np.testing.assert_array_equal(ns["f"](W, out, g, np.zeros(2)), W * g * out + W * g)


def test_store_in_between_blocks_the_move():
    new = _same("""
        def f(a, b):
            t = a * b
            a[0] = 10.0
            return t
        """, a=[1.0, 2.0], b=[3.0, 4.0])
    assert "t = a * b" in new


@pytest.mark.parametrize("between", ["a += b", "a = b"])
def test_writing_or_rebinding_a_read_name_blocks_the_move(between):
    new = _same(f"""
        def f(a, b):
            t = a * 2.0
            {between}
            return t + a
        """, a=[1.0, 2.0], b=[3.0, 4.0])
    assert "t = a * 2.0" in new


def test_never_moved_into_a_loop_or_read_twice():
    new = _same("""
        def f(a, b):
            t = a * 2.0
            u = a + 1.0
            s = 0.0
            for i in range(3):
                s = s + t
            return s + u * u
        """, a=[1.0, 2.0], b=[3.0, 4.0])
    assert "t = a * 2.0" in new and "u = a + 1.0" in new


def test_reader_with_a_writing_call_before_the_read_is_left():
    src = """
        def f(a, b):
            t = a * 2.0
            y = np.copyto(a, b) or t
            return y
        """
    new = _same(src, a=[1.0, 2.0], b=[3.0, 4.0])
    assert "t = a * 2.0" in new


def test_an_outermost_writing_call_reads_its_arguments_first():
    new = _same("""
        def f(a, b, out):
            t = a * 2.0
            np.multiply(t, b, out=out)
            return out
        """, a=[1.0, 2.0], b=[3.0, 4.0], out=[0.0, 0.0])
    assert "np.multiply(a * 2.0, b, out=out)" in new


def test_copies_are_propagated_while_the_source_is_not_rebound():
    new = _same("""
        def f(a, b):
            g = a * b
            d = g
            a[0] = 5.0
            e = d * 3.0 + d
            return e
        """, a=[1.0, 2.0], b=[3.0, 4.0])
    assert "d = g" not in new and "return g * 3.0 + g" in new
    new = _same("""
        def f(a, b):
            g = a * 1.0
            d = g
            g = b * 1.0
            return d + g
        """, a=[1.0, 2.0], b=[3.0, 4.0])
    assert "d = g" in new  # g is stored twice


def test_comments_and_untouched_lines_stay():
    src = "def f(a):\n    t = a * 2.0\n    # adjoint sweep\n    return t + 1.0\n"
    assert fuse(src) == "def f(a):\n    # adjoint sweep\n    return a * 2.0 + 1.0\n"


# -- deferred sums over broadcast dimensions -------------------------------------------


def outer_chain(a, b, c):
    t = a * 2.0           # (3, 1), read once, by an elementwise op with a bigger result
    u = t + b             # (3, 4)
    return np.sum(np.sin(u) * c)


def small_exp(a, B):
    t = np.exp(a)         # (1,)
    u = t * B             # (5,)
    v = u - a             # (5,)
    return np.sum(v * v)


def stored(a, b, out):
    out[...] = a * b      # (3, 1) * (4,) stored into (3, 4)
    out[1:] = np.cos(b)   # (4,) broadcast into two rows
    return np.sum(out * out)


def dropped_dims(a, c, out):
    out[0] = a                      # (1, 3) stored into a (3,) row: the leading 1 is dropped
    out[1] = np.exp(a + c)          # and through an elementwise chain
    return np.sum(out * out * np.arange(1.0, 7.0).reshape(2, 3))


def reused(a, b):
    t = a * 3.0           # read twice: its adjoint is summed where it is made
    return np.sum(np.tanh(t + b) * t)


CASES = [
    (outer_chain, lambda r: (r.random((3, 1)), r.random((1, 4)), r.random(4))),
    (small_exp, lambda r: (r.random(1), r.random(5))),
    (stored, lambda r: (r.random((3, 1)), r.random(4), np.zeros((3, 4)))),
    (reused, lambda r: (r.random((3, 1)), r.random(4))),
    (dropped_dims, lambda r: (r.random((1, 3)), r.random((1, 3)), np.zeros((2, 3)))),
]


@pytest.mark.parametrize("f,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_broadcasting_chains(f, make):
    check_grad(f, *make(np.random.default_rng(1)))


@pytest.mark.slow
@pytest.mark.parametrize("f,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_broadcasting_chains_under_numba(f, make):
    args = make(np.random.default_rng(2))
    grads = [zymo_grad(f, args, numba=numba) for numba in (False, True)]
    for g_py, g_nb in zip(*grads):
        np.testing.assert_allclose(g_nb, g_py, rtol=1e-12, atol=1e-14)
    assert all(np.abs(g).max() > 0 for g in grads[0][:2])  # the last argument may be overwritten


def test_chain_adjoint_is_summed_once_at_the_operand():
    r = np.random.default_rng(3)
    args = [Duplicated(x, np.zeros_like(x)) for x in (r.random((3, 1)), r.random((1, 4)), r.random(4))]
    src = zymo.generated_code(Reverse, outer_chain, Active, *args)
    adjoint = src.split("# adjoint sweep")[1]
    # a's adjoint is the only sum over the broadcast dimension; t's adjoint is not reduced
    assert adjoint.count("_rt.unbroadcast(") == 3  # into da, db, dc
    assert "da += _rt.unbroadcast(du * 2.0, da)" in adjoint
    # the forward sweep is one expression per statement of the user's
    assert "t + b" not in src.split("# adjoint sweep")[0] or "u =" not in src


def test_a_read_in_a_store_target_waits_for_a_pure_value():
    src = """
        def f(a, b, y):
            k = 1
            t = a * 2.0
            y[k] = np.copyto(a, b) or 0.0
            return t
        """
    new = _same(src, a=[1.0, 2.0], b=[3.0, 4.0], y=[0.0, 0.0])
    assert "t = a * 2.0" in new
    new = _same("""
        def f(a, y):
            k = 1
            y[k] = a[0] * 2.0
            return y
        """, a=[1.0, 2.0], y=[0.0, 0.0])
    assert "y[1] = a[0] * 2.0" in new


def test_long_programs_fuse_in_linear_time():
    """Thousands of copies and temporaries: the tables make each rewrite local."""
    import time

    lines = ["def f(x, y):", "    b = x * 2.0"] + [f"    a{i} = b" for i in range(3000)]
    lines += [f"    y[0] += a{i}" for i in range(3000)] + ["    return y"]
    t0 = time.process_time()
    new = fuse("\n".join(lines) + "\n")
    assert time.process_time() - t0 < 10.0
    assert "a5 = b" not in new and "y[0] += b" in new


@pytest.mark.slow
def test_a_long_chain_is_cut_into_statements():
    lines = ["def f(x):", "    t0 = x * 1.0"] + [f"    t{i} = t{i - 1} + x * {i}.0" for i in range(1, 2000)]
    lines += ["    return t1999"]
    src = "\n".join(lines) + "\n"
    new = fuse(src)
    ns_a, ns_b = {}, {}
    exec(src, ns_a)
    exec(new, ns_b)
    assert ns_a["f"](0.5) == ns_b["f"](0.5)
    assert 10 < len(new.splitlines()) < 1000


def test_reads_in_chained_or_tuple_targets_stay():
    """`a = b = v` and `a, b = v` store left to right: a read in the second target would run
    after the first store."""
    for body in ("    x[0], x[k] = 1, 2\n", "    x[0] = x[k] = 2\n"):
        src = "def f(x):\n    k = x[0]\n" + body + "    return x\n"
        new = fuse(src)
        assert "k = x[0]" in new
        outs = []
        for code in (src, new):
            ns = {}
            exec(code, ns)
            outs.append(ns["f"](np.array([0, 0, 0])))
        np.testing.assert_array_equal(outs[0], outs[1])


def test_positional_out_and_star_arguments_are_writes():
    src = """
        def f(a, b, c):
            t = np.add(a, b, c)
            u = c * 2.0
            return u + t + u
        """
    new = _same(src, a=[1.0, 1.0], b=[1.0, 1.0], c=[0.0, 0.0])
    assert "t = np.add(a, b, c)" in new


# -- merged accumulations (reverse mode: `fuse(src, ShadowFacts(roots))`) --------------------

A, B = frozenset({("param", 0)}), frozenset({("param", 1)})


def _same_acc(src, shadows, **arrays):
    """`fuse` with these roots returns and writes what `src` does (the values are small integers
    and halves, so a changed order of additions cannot round differently)."""
    src = textwrap.dedent(src)
    new = fuse(src, ShadowFacts(shadows))
    a, arrs_a = _run(src, **arrays)
    b, arrs_b = _run(new, **arrays)
    np.testing.assert_array_equal(a, b)
    for k in arrs_a:
        np.testing.assert_array_equal(arrs_a[k], arrs_b[k], err_msg=f"{k}\n{new}")
    return new


def test_accumulations_merge_past_other_shadows_and_temporaries():
    new = _same_acc("""
        def f(g, x, da, db):
            da += g * x
            t = g * 2.0
            db += t
            db[0] = 0.0
            da += t * x
            return 0.0
        """, {"da": A, "db": B}, g=[1.0, 2.0], x=[3.0, 4.0], da=[1.0, 1.0], db=[5.0, 5.0])
    assert new.count("da +=") == 1 and "da += g * x + t * x" in new


def test_additions_into_overlapping_shadows_commute():
    new = _same_acc("""
        def f(g, x, base):
            d = base[0:2]
            e = base[1:3]
            d += g * x
            e += g
            d += x
            return 0.0
        """, {"base": A, "d": A, "e": A}, g=[1.0, 2.0], x=[3.0, 4.0], base=[0.5, 1.0, 2.0])
    assert new.count("d +=") == 1


@pytest.mark.parametrize("between", [
    "e[...] = 0.0",          # zeroes memory the first term was added into
    "s = e * 2.0",           # reads memory the first term was added into
    "e *= 2.0",              # writes it other than by an addition
    "x[0] = 7.0",            # writes what the first term reads (primal memory)
    "x += 1.0",              # the same, in place
    "q = np.copyto(x, g)",   # a call that may write
    "d = base[0:2] * 1.0",   # rebinds d
])
def test_what_blocks_a_merge(between):
    new = _same_acc(f"""
        def f(g, x, base):
            d = base[0:2]
            e = base[1:3]
            d += g * x
            {between}
            d += x
            return e.sum() * 0.0 + (s if "s" in dir() else 0.0) * 0.0
        """, {"base": A, "d": A, "e": A}, g=[1.0, 2.0], x=[3.0, 4.0], base=[0.5, 1.0, 2.0])
    assert new.count("d +=") == 2, new


def test_terms_reading_their_target_products_and_floats_stay_apart():
    src = """
        def f(g, x, w, base, s):
            d = base[0:2]
            e = base[1:3]
            d += g * e
            d += x
            d += _rt.dot_vjp_a(g, w, x)
            d += x
            s += g[0]
            s += x[0]
            return s
        """
    new = fuse(textwrap.dedent(src), ShadowFacts({"base": A, "d": A, "e": A, "s": frozenset()}))
    assert "d += g * base[1:3]\n" in new   # reads memory d overlaps: not moved
    # the product adjoint stays its own accumulation; additions move past it
    assert "d += _rt.dot_vjp_a(g, w, x)\n    d += x + x\n" in new and new.count("d +=") == 3
    assert new.count("s +=") == 2          # a float adjoint: nothing to gain


def test_unknown_roots_overlap_every_shadow():
    new = _same_acc("""
        def f(g, x, da, db):
            da += g * x
            db[...] = 0.0
            da += x
            return 0.0
        """, {"da": None, "db": B}, g=[1.0, 2.0], x=[3.0, 4.0], da=[1.0, 1.0], db=[5.0, 5.0])
    assert new.count("da +=") == 2


def test_the_memo_reads_only_which_roots_meet():
    """`fuse` remembers its result by the text and by which names' roots meet (`_MEMO`):
    renamed roots (another IR's ops) find it, other overlaps or other listed names do not."""
    from zymo.codegen import fuse as fuse_module

    src = textwrap.dedent("""
        def f(g, x, da, db):
            da += g * x
            db[...] = 0.0
            da += x
            return 0.0
        """)
    apart = fuse(src, ShadowFacts({"da": A, "db": B}))
    assert apart.count("da +=") == 1
    renamed = {"da": frozenset({("op", 1)}), "db": frozenset({("op", 2)})}
    assert fuse(src, ShadowFacts(renamed)) == apart
    assert fuse_module._overlaps(renamed) == fuse_module._overlaps({"da": A, "db": B})
    for roots in ({"da": A, "db": A}, {"da": None, "db": B}, {"da": A}, {"da": A, "db": B, "g": frozenset()}):
        assert fuse(src, ShadowFacts(roots)) == fuse_module._fuse(src, ShadowFacts(roots))
        assert fuse_module._overlaps(roots) != fuse_module._overlaps({"da": A, "db": B})
    assert fuse(src, ShadowFacts({"da": A, "db": A})).count("da +=") == 2  # db's zeroing may clear da
    assert fuse(src) == fuse_module._fuse(src, None) and fuse(src, ShadowFacts({})) == src
    assert (src, None) in fuse_module._MEMO and (src, frozenset()) in fuse_module._MEMO  # apart


def test_merging_only_at_the_top_level():
    new = _same_acc("""
        def f(g, x, da, db):
            for i in range(2):
                da += g * x
                db += g
                da += x
            return 0.0
        """, {"da": A, "db": B}, g=[1.0, 2.0], x=[3.0, 4.0], da=[1.0, 1.0], db=[5.0, 5.0])
    assert new.count("da +=") == 2


def gm3_like(r, dr, A):
    """Two interleaved fields, their products with a matrix written into buffers, and
    elementwise right-hand sides written into views of the output (seed 003's shape)."""
    u = r[:, :, 0]
    v = r[:, :, 1]
    du = dr[:, :, 0]
    dv = dr[:, :, 1]
    Au = np.dot(A, u)
    uA = np.dot(u, A)
    du[...] = 0.3 * (Au + uA) + 1.5 * u * u / v + 0.2 - 0.7 * u
    dv[...] = 2.0 * np.dot(A, v) + 1.5 * u * u - 0.4 * v
    return np.sum(dr * dr)


@pytest.mark.slow
def test_gm3_like_adjoint_accumulates_each_view_once():
    r = np.random.default_rng(4)
    make = lambda: [r.random((5, 5, 2)) + 0.5, np.zeros((5, 5, 2)), r.random((5, 5))]  # noqa: E731
    check_grad(gm3_like, *make(), const=(2,))
    args = make()
    ann = [Duplicated(args[0], np.zeros_like(args[0])), Duplicated(args[1], np.zeros_like(args[1])),
           zymo.Const(args[2])]
    adjoint = zymo.generated_code(Reverse, gm3_like, Active, *ann).split("# adjoint sweep")[1]
    elementwise = [ln for ln in adjoint.splitlines() if "+=" in ln and "_rt.dot_vjp" not in ln]
    targets = [ln.split("+=")[0].strip() for ln in elementwise]
    assert len(targets) == len(set(targets)), adjoint  # one accumulation per shadow
    args = make()
    g_py, g_nb = (zymo_grad(gm3_like, [a.copy() for a in args], const=(2,), numba=nb) for nb in (False, True))
    np.testing.assert_allclose(g_nb[0], g_py[0], rtol=1e-12, atol=1e-14)
    assert np.abs(g_py[0]).max() > 0


# -- shadows that are zeros at entry (`ShadowFacts.zero`) ------------------------------------

C, T_ = frozenset({("param", 2)}), frozenset({("op", 1)})
ZERO_FACTS = {"dbuf": C, "dt": T_, "dx": A, "dview": C}


def _same_zero(src, **arrays):
    """`fuse` with `dbuf` zero at entry agrees with `src` when `dbuf` starts as zeros."""
    src = textwrap.dedent(src)
    new = fuse(src, ShadowFacts(ZERO_FACTS, frozenset({"dbuf"}), lambda a, b: {a, b} == {"dbuf", "dt"}))
    a, arrs_a = _run(src, **arrays)
    b, arrs_b = _run(new, **arrays)
    np.testing.assert_array_equal(a, b)
    for k in arrs_a:
        np.testing.assert_array_equal(arrs_a[k], arrs_b[k], err_msg=f"{k}\n{new}")
    return new


ZERO_ARRAYS = dict(g=[1.0, 2.0], x=[3.0, 4.0], dbuf=[0.0, 0.0], dx=[0.5, 0.5])


def test_the_pass_through_is_exercised_by_the_cases_below():
    new = _same_zero("""
        def f(g, x, dbuf, dx, dview):
            dt = g * 2.0
            dbuf += dt
            dx += dbuf * x
            dbuf[...] = 0.0
            return 0.0
        """, **ZERO_ARRAYS, dview=[0.0, 0.0])
    assert "dbuf" not in new.split(":", 1)[1]


def test_a_zero_shadow_filled_once_is_read_through_its_term():
    new = _same_zero("""
        def f(g, x, dbuf, dx):
            dt = g * 2.0
            dbuf += dt
            dx += dbuf * x
            dbuf[...] = 0.0
            dx += x
            return 0.0
        """, **ZERO_ARRAYS)
    assert "dbuf" not in new.split("def f")[1].split(":", 1)[1] and "dt * x" in new


@pytest.mark.parametrize("between", [
    "dbuf += x",               # a second term
    "dt[...] = 1.0",           # the term changes
    "dt += x",
    "dt = x * 1.0",            # the term's name is rebound
    "dx += dview * 0.5",       # the shadow read through another name
    "q = np.copyto(dt, x)",    # a call that may write
])
def test_what_keeps_a_zero_shadow(between):
    new = _same_zero(f"""
        def f(g, x, dbuf, dx, dview):
            dt = g * 2.0
            dbuf += dt
            {between}
            dx += dbuf * x
            dbuf[...] = 0.0
            return 0.0
        """, **ZERO_ARRAYS, dview=[0.0, 0.0])  # `dview` may overlap `dbuf` (ZERO_FACTS)
    assert "dbuf +=" in new and "dbuf[...] = 0.0" in new


@pytest.mark.parametrize("src", [
    """
    def f(g, x, dbuf, dx, dview):
        dbuf += g * 2.0
        dx += dbuf * x
        dbuf[...] = 0.0
        return 0.0
    """,                               # the term is not a shadow's name
    """
    def f(g, x, dbuf, dx, dview):
        dt = g * 2.0
        dx += dbuf
        dbuf += dt
        dx += dbuf * x
        dbuf[...] = 0.0
        return 0.0
    """,                               # read before the accumulation
    """
    def f(g, x, dbuf, dx, dview):
        dt = g * 2.0
        dbuf += dt
        dx += dbuf * x
        return 0.0
    """,                               # never consumed
    """
    def f(g, x, dbuf, dx, dview):
        dbuf += dview
        dx += dbuf * x
        dbuf[...] = 0.0
        return 0.0
    """,                               # the term may have another shape (`same_shape`)
])
def test_a_zero_shadow_needs_one_fill_then_a_zeroing(src):
    new = _same_zero(src, **ZERO_ARRAYS, dview=[1.0, 1.0])
    assert "dbuf +=" in new


def buffer_products(x, A, buf1, buf2):
    """seed 003's `np.dot(..., out=buf)` into `Const` buffers, each read once."""
    np.dot(A, x, out=buf1)
    np.dot(x, A, out=buf2)
    return np.sum(np.sin(buf1 + buf2) * x)


def buffer_reused(x, A, buf):
    """One `Const` buffer written twice: only its last fill may pass through."""
    np.dot(A, x, out=buf)
    s = np.sum(np.sin(buf))
    np.dot(x, A, out=buf)
    return s + np.sum(buf * buf * x)


_A3 = np.random.default_rng(8).random((3, 3))
_BUF = np.zeros(3)


def captured_buffer(x):
    """A buffer and a matrix captured from the module: internal shadows of captured memory."""
    np.dot(_A3, x, out=_BUF)
    return np.sin(_BUF) * 2.0


@pytest.mark.slow
@pytest.mark.parametrize("f,n_bufs", [(buffer_products, 2), (buffer_reused, 1)])
def test_const_buffers_filled_by_products(f, n_bufs):
    r = np.random.default_rng(6)
    x, A = r.random(4), r.random((4, 4))
    bufs = [np.zeros(4) for _ in range(n_bufs)]
    check_grad(f, x, A, *bufs, const=tuple(range(1, 2 + n_bufs)))
    got = [zymo_grad(f, [x, A, *bufs], const=tuple(range(1, 2 + n_bufs)), numba=nb)[0] for nb in (False, True)]
    np.testing.assert_allclose(got[1], got[0], rtol=1e-12, atol=1e-14)
    assert np.abs(got[0]).max() > 0.1
    src = zymo.generated_code(Reverse, f, Active, Duplicated(x, np.zeros(4)), zymo.Const(A),
                              *map(zymo.Const, bufs))
    adjoint = src.split("# adjoint sweep")[1]
    if f is buffer_products:
        assert "dbuf1" not in adjoint and "dbuf2" not in adjoint  # the products read the terms
    # replayed calls (the internal shadows zeroed again) give the same numbers
    again = zymo_grad(f, [x, A, *bufs], const=tuple(range(1, 2 + n_bufs)))[0]
    np.testing.assert_array_equal(again, got[0])


def test_captured_buffer_in_batch_and_single_lanes():
    x = np.array([0.3, -0.2, 0.5])
    expect = np.diag(2.0 * np.cos(_A3 @ x)) @ _A3
    for mode in (zymo.Reverse, zymo.Forward):
        np.testing.assert_allclose(zymo.jacobian(mode, captured_buffer, x), expect, rtol=1e-12, atol=1e-14)


def sum_of_a_buffer(x, s, buf):
    """Found in review: `buf + x`, read only by `np.sum`, has a one-number adjoint (`dsum`), and
    `dbuf += dsum` broadcasts it; reading `dsum` for `dbuf` would give `s` one element's
    adjoint instead of the sum over four."""
    np.add(x, s, out=buf)
    return 2.0 * np.sum(buf + x)


def product_of_a_buffer(x, A, buf):
    """The same one-number adjoint, consumed by a product adjoint (a float would not multiply)."""
    np.dot(A, x, out=buf)
    return 2.0 * np.sum(buf + x)


def test_a_one_number_adjoint_never_stands_for_a_zero_shadow():
    x = np.random.default_rng(12).standard_normal(4)
    g = zymo_grad(sum_of_a_buffer, [x, 0.5, np.zeros(4)], const=(2,))
    assert g[1] == pytest.approx(8.0)
    check_grad(sum_of_a_buffer, x, 0.5, np.zeros(4), const=(2,))
    r = np.random.default_rng(13)
    check_grad(product_of_a_buffer, r.standard_normal(4), r.standard_normal((4, 4)), np.zeros(4), const=(1, 2))


# -- copies read before anything writes their source (`_needless_copies`) --------------------

def conv_rows(x, w, out):
    """conv2d's accumulation: its adjoint copies `dout[f]` (`np.copy`) for the two reads of each
    iteration, which nothing in between writes: they read `dout[f]` itself."""
    for f in range(w.shape[0]):
        out[f] = 0.0
        for c in range(x.shape[0]):
            for di in range(2):
                out[f] += w[f, c, di] * x[c, di:di + 3]
    return np.sum(out * out)


def test_a_copy_read_before_its_source_is_written_is_read_in_place():
    r = np.random.default_rng(21)
    x, w = r.standard_normal((2, 4)), r.standard_normal((3, 2, 2))
    args = [Duplicated(x, np.zeros_like(x)), Duplicated(w, np.zeros_like(w)),
            Duplicated(np.zeros((3, 3)), np.zeros((3, 3)))]
    src = zymo.generated_code(Reverse, conv_rows, Active, *args)
    adjoint = src.split("# adjoint sweep")[1]
    assert "np.copy(dout[" not in adjoint and "_rt.sum_product(dout[" in adjoint
    check_grad(conv_rows, x, w, np.zeros((3, 3)), const=(2,))
    for numba in (False, True):
        got = zymo_grad(conv_rows, [x, w, np.zeros((3, 3))], const=(2,), numba=numba)
        assert np.abs(got[0]).min() > 0.0 and np.abs(got[1]).min() > 0.0


@pytest.mark.parametrize("between, kept", [
    ("e = g * 2.0", False),  # arithmetic on the copy: read in place
    ("d[0] += 1.0", True),  # a write into memory `g`'s source may share
    ("dd += 1.0", True),
    ("u = g", True),  # `u` would be the source itself
    ("v = np.add(g, 1.0)", True),  # not a call that only reads (may be `out=`'s kind)
    ("k = 1", True),  # rebinds the index the copied expression reads
    ("e2 = np.sum(g) + np.copy(g)[0]", True),  # `np.copy(g)` is not a reading call listed
])
def test_what_keeps_a_copy(between, kept):
    src = textwrap.dedent(f"""
        def f(d, dd, db, k):
            g = np.copy(d[k])
            {between}
            db += g * 3.0
            d[k] = 0.0
    """)
    D = frozenset({("param", 0)})
    new = fuse(src, ShadowFacts({"d": D, "dd": D, "db": frozenset({("param", 2)}), "g": D, "u": D, "v": None}))
    assert ("np.copy(d[k])" in new) == kept, new
    if not kept:
        assert "db += d[k] * 3.0" in new
