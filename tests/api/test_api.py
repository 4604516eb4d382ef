"""The public API: caching of compiled derivatives, aliasing, captured data, shadows."""
import numpy as np
import pytest
from helpers import numpy_allocations

import zymo
from zymo import Active, Const, Duplicated, DuplicatedNoNeed, Forward, Reverse, ReverseWithPrimal, cache


def fd_scalar(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


def square_sum(x):
    for i in range(len(x)):
        x[i] = x[i] * x[i]
    return np.sum(x)


def test_compile_cache_reused_per_types_and_activity():
    cache.cache_clear()
    x = np.arange(3.0)
    zymo.gradient(Reverse, square_sum, x.copy())
    n = len(cache.COMPILED)
    for _ in range(3):
        (g,) = zymo.gradient(Reverse, square_sum, x.copy())
        np.testing.assert_allclose(g, 2 * x)
    assert len(cache.COMPILED) == n
    zymo.gradient(Reverse, square_sum, x.astype(np.float32))  # new types: a new derivative
    assert len(cache.COMPILED) == n + 1
    zymo.autodiff(Forward, square_sum, Duplicated, Duplicated(x.copy(), np.ones(3)))  # new mode
    assert len(cache.COMPILED) == n + 2


def two_arrays(a, b):
    for i in range(len(a)):
        a[i] = a[i] * b[i]
    return np.sum(a * b)


def test_aliased_arguments_are_correct():
    """f(x, x): both arguments are the same memory; the alias class changes the derivative."""
    x = np.array([0.5, 1.5, -2.0])

    def primal(v):
        y = v.copy()
        return two_arrays(y, y)

    dx = np.zeros(3)
    y = x.copy()
    zymo.autodiff(Reverse, two_arrays, Active, Duplicated(y, dx), Duplicated(y, dx))
    for i in range(3):
        e = np.zeros(3)
        e[i] = 1e-6
        assert dx[i] == pytest.approx((primal(x + e) - primal(x - e)) / 2e-6, rel=1e-6)
    # disjoint but overlapping views of one buffer
    buf = np.array([0.3, 0.7, 1.1, 1.3])
    dbuf = np.zeros(4)
    zymo.autodiff(Reverse, two_arrays, Active, Duplicated(buf[0:3], dbuf[0:3]), Duplicated(buf[1:4], dbuf[1:4]))

    def primal2(v):
        w = v.copy()
        return two_arrays(w[0:3], w[1:4])

    b0 = np.array([0.3, 0.7, 1.1, 1.3])
    for i in range(4):
        e = np.zeros(4)
        e[i] = 1e-6
        assert dbuf[i] == pytest.approx((primal2(b0 + e) - primal2(b0 - e)) / 2e-6, rel=1e-6)


scale = 2.0
work = np.zeros(3)


def uses_globals(x):
    work[:] = x * scale
    return np.sum(work * work)


def test_rebinding_a_global_invalidates_the_derivative():
    global scale
    x = np.array([1.0, 2.0, 3.0])
    (g,) = zymo.gradient(Reverse, uses_globals, x)
    np.testing.assert_allclose(g, 2 * scale**2 * x)
    old = scale
    try:
        scale = 3.0
        (g,) = zymo.gradient(Reverse, uses_globals, x)
        np.testing.assert_allclose(g, 2 * 9.0 * x)
    finally:
        scale = old


def test_reverse_with_primal_and_no_need():
    x = np.array([1.0, 2.0])
    dx = np.zeros(2)
    derivs, value = zymo.autodiff(ReverseWithPrimal, square_sum, Active, DuplicatedNoNeed(x, dx))
    assert value == pytest.approx(5.0)
    assert derivs == (None,)
    np.testing.assert_allclose(dx, [2.0, 4.0])


def poly(t, c):
    a, b = t
    return a * a * b + c * b


def test_active_tuple_returns_tuple_derivative():
    ((dt, dc),) = zymo.autodiff(Reverse, poly, Active, Active((2.0, 3.0)), Active(0.5))
    assert dt == pytest.approx((12.0, 4.5))
    assert dc == pytest.approx(3.0)
    (tan,) = zymo.autodiff(Forward, poly, Duplicated, Duplicated((2.0, 3.0), (1.0, 0.0)), Const(0.5))
    assert tan == pytest.approx(12.0)


def test_make_zero_preserves_structure_and_aliasing():
    a = np.ones((2, 2))
    obj = (a, [a, 3.0], 4, "s")
    z = zymo.make_zero(obj)
    assert z[0] is z[1][0] and z[0].shape == (2, 2) and not z[0].any()
    assert z[1][1] == 0.0 and z[2] == 4 and z[3] == "s"
    z[0][0, 0] = 5.0
    z[1][1] = 7.0
    zymo.make_zero_(z)
    assert not z[0].any() and z[1][1] == 0.0


def test_generated_code_is_readable_python():
    x = np.ones(3)
    src = zymo.generated_code(Reverse, square_sum, Active, Duplicated(x, np.zeros(3)))
    assert src.startswith("def square_sum_rev(x, dx")
    assert "# adjoint sweep" in src and "dx[i] = 0.0" in src
    compile(src, "<check>", "exec")


def looped(x):
    s = 0.0
    for i in range(len(x)):
        t = np.sin(x[i])
        s = s + t * t
    return s


def test_loop_cache_holds_one_entry_per_iteration():
    x = np.linspace(0.1, 1.0, 7)
    src = zymo.generated_code(Reverse, looped, Active, Duplicated(x, np.zeros(7)))
    # one push per iteration in the forward sweep, one pop per reversed iteration
    assert src.count("+= 1") == src.count("-= 1") >= 1
    (g,) = zymo.gradient(Reverse, looped, x)
    np.testing.assert_allclose(g, 2 * np.sin(x) * np.cos(x), rtol=1e-12)


def test_float_argument_derivative_matches_fd():
    def f(a):
        return np.exp(a) * np.sin(a) + a**3

    ((d,),) = zymo.autodiff(Reverse, f, Active, Active(0.7))
    assert d == pytest.approx(fd_scalar(f, 0.7), rel=1e-7)
    (t,) = zymo.autodiff(Forward, f, Duplicated, Duplicated(0.7, 1.0))
    assert t == pytest.approx(d, rel=1e-12)


def writes_and_returns(out, x):
    out[0] = np.sin(x[0])
    return x[1] * x[1]


def test_return_activity_is_part_of_the_compile_key():
    """Const and Duplicated returns compile differently (the backward activity half)."""
    x = np.array([0.3, 2.0])
    out, dout = np.zeros(1), np.zeros(1)
    assert zymo.autodiff(Forward, writes_and_returns, Const, Duplicated(out, dout),
                         Duplicated(x, np.array([1.0, 1.0]))) == ()
    assert dout[0] == pytest.approx(np.cos(0.3))
    (t,) = zymo.autodiff(Forward, writes_and_returns, Duplicated, Duplicated(out, dout),
                         Duplicated(x, np.array([1.0, 1.0])))
    assert t == pytest.approx(4.0)


def weights_times_scalar(W, x):
    s = 0.0
    for i in range(W.shape[0]):
        s += W[i, 0] * x + np.sum(W[i]) * 0.0
    return s


W_GLOBAL = np.linspace(0.0, 1.0, 4000).reshape(1000, 4)


def closure_weights(x):
    s = 0.0
    for i in range(W_GLOBAL.shape[0]):
        s += W_GLOBAL[i, 0] * x
    return s


def test_constant_weights_cost_nothing_in_reverse():
    """Seed 003: data that is only read (a network's weights) is not differentiated or cached,
    whether it is passed as Const or captured by the function."""
    W = W_GLOBAL.copy()
    ((_, dx),) = zymo.autodiff(Reverse, weights_times_scalar, Active, Const(W), Active(0.5))
    assert dx == pytest.approx(W[:, 0].sum())
    ((dx2,),) = zymo.autodiff(Reverse, closure_weights, Active, Active(0.5))
    assert dx2 == pytest.approx(W[:, 0].sum())
    for f, args in ((weights_times_scalar, (Const(W), Active(0.5))), (closure_weights, (Active(0.5),))):
        assert "nothing is cached" in zymo.cache_report(Reverse, f, Active, *args)
        # no shadow of W, no copy: far less than W's 32 kB is allocated by a reverse call
        assert numpy_allocations(lambda f=f, args=args: zymo.autodiff(Reverse, f, Active, *args))[1] < 1000


def test_two_lambdas_on_one_line():
    run = lambda: zymo.gradient(Reverse, lambda y: y * y * y, 2.0)  # noqa: E731
    assert run() == (pytest.approx(12.0),)
    pair = (lambda a: a + 1.0, lambda b: b * b * 5.0)
    assert zymo.gradient(Reverse, pair[1], 3.0) == (pytest.approx(30.0),)
    assert zymo.gradient(Reverse, pair[0], 3.0) == (pytest.approx(1.0),)


def _weighted(x, w, s):
    return s * np.sum(np.sin(x) * w)


def test_gradient_with_primal_returns_the_value_too():
    """`zymo.gradient(ReverseWithPrimal, ...)` returns `(gradient, value)` (as Enzyme's); the
    gradient equals `Reverse`'s and central differences'; `ForwardWithPrimal` is refused."""
    from helpers import fd_grad

    x, w = np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.5, -2.0])
    (gx, gw, gs), value = zymo.gradient(zymo.ReverseWithPrimal, _weighted, x, w, 0.7)
    assert value == pytest.approx(_weighted(x, w, 0.7), rel=1e-15)
    plain = zymo.gradient(zymo.Reverse, _weighted, x, w, 0.7)
    np.testing.assert_allclose(gx, plain[0], rtol=1e-15)
    np.testing.assert_allclose(gw, plain[1], rtol=1e-15)
    assert gs == pytest.approx(plain[2], rel=1e-15)
    fx, fw, fs = fd_grad(_weighted, [x, w, 0.7])
    np.testing.assert_allclose(gx, fx, rtol=1e-6)
    np.testing.assert_allclose(gw, fw, rtol=1e-6)
    assert gs == pytest.approx(fs, rel=1e-6)
    assert abs(gs) > 0.1
    with pytest.raises(zymo.ZymoUsageError, match="ReverseWithPrimal"):
        zymo.gradient(zymo.ForwardWithPrimal, _weighted, x, w, 0.7)


@pytest.mark.parametrize("mode", [Reverse, Forward])
def test_gradient_takes_const_arguments(mode):
    """`zymo.gradient(mode, f, x, Const(w), Const(s))`: `w` and `s` are not differentiated and
    their entries are None (as in Enzyme's `gradient`); `x`'s gradient is the one with `w`
    and `s` plain, and central differences'. Other annotations are refused with a usage
    error, and so is an annotation of an annotation (both once failed deep in the frontend)."""
    from helpers import fd_grad

    x, w = np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.5, -2.0])
    gx, gw, gs = zymo.gradient(mode, _weighted, x, Const(w), Const(0.7))
    assert gw is None and gs is None
    np.testing.assert_allclose(gx, zymo.gradient(mode, _weighted, x, w, 0.7)[0], rtol=1e-13)
    np.testing.assert_allclose(gx, fd_grad(_weighted, [x, w, 0.7])[0], rtol=1e-6)
    assert np.abs(gx).max() > 0.1
    with pytest.raises(zymo.ZymoUsageError, match="gradient makes the shadows itself"):
        zymo.gradient(mode, _weighted, Duplicated(x, np.zeros(3)), w, 0.7)
    with pytest.raises(zymo.ZymoUsageError, match="an annotation of an annotation"):
        zymo.autodiff(Reverse, _weighted, Active, Duplicated(x, np.zeros(3)), Const(Const(w)), Active(0.7))
    with pytest.raises(zymo.ZymoUsageError, match="not the class Const"):
        zymo.gradient(mode, _weighted, x, Const, 0.7)


def _quadratic(x, a, s):
    return s * np.sum(a * x * x * x)


def test_second_order_and_jacobians_take_const_constants():
    """The arguments after `x` of `hessian`, `hvp`, `jacobian` and `gradient_forward` are
    constants: `Const(c)` is `c` (it was refused as an annotation of an annotation); another
    annotation is refused with a usage error."""
    x, a = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    h = zymo.hessian(_quadratic, x, Const(a), Const(2.0))
    np.testing.assert_allclose(h, np.diag(2.0 * 6.0 * a * x), rtol=1e-13)
    np.testing.assert_allclose(h, zymo.hessian(_quadratic, x, a, 2.0), rtol=1e-15)
    v = np.array([1.0, 0.5, -1.0])
    np.testing.assert_allclose(zymo.hvp(_quadratic, x, v, Const(a), 2.0), h @ v, rtol=1e-13)
    g = zymo.gradient_forward(_quadratic, x, Const(a), 2.0)
    np.testing.assert_allclose(g, 2.0 * 3.0 * a * x * x, rtol=1e-13)
    np.testing.assert_allclose(zymo.jacobian(Reverse, lambda y, b: y * b, x, Const(a)), np.diag(a), rtol=1e-15)
    with pytest.raises(zymo.ZymoUsageError, match="constant argument 1"):
        zymo.hessian(_quadratic, x, Duplicated(a, np.zeros(3)), 2.0)


def test_forward_gradient_of_a_structured_argument_is_an_error_not_none():
    """`zymo.gradient(Forward, f, [a, b])` returned `(None,)`, a silently missing gradient
    (helper 73); it says what to use instead. Ints and Const arguments keep their None."""
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    with pytest.raises(zymo.ZymoUsageError, match="argument 0 is a list"):
        zymo.gradient(zymo.Forward, lambda ws: np.sum(ws[0] * ws[1]), [a, b])
    assert zymo.gradient(zymo.Reverse, lambda ws: np.sum(ws[0] * ws[1]), [a, b])[0][0].tolist() == [3.0, 4.0]
    g = zymo.gradient(zymo.Forward, lambda x, n: np.sum(x * x) * n, a, 3)
    assert g[1] is None and g[0].tolist() == [6.0, 12.0]


def test_forward_gradient_keeps_the_argument_dtype():
    """Forward mode's gradient of a float32 array is float32, as reverse mode's shadow is
    (helper 77: it was float64), with the same numbers."""
    x = np.array([0.5, 1.5, 2.0], dtype=np.float32)

    def f(x):
        return np.sum(x * x * x)
    gf = zymo.gradient(zymo.Forward, f, x.copy())[0]
    gr = zymo.gradient(zymo.Reverse, f, x.copy())[0]
    assert gf.dtype == gr.dtype == np.float32
    np.testing.assert_allclose(gf, 3.0 * x * x, rtol=1e-6)
    np.testing.assert_allclose(gf, gr, rtol=1e-6)


def _sin_cube(x, y):
    return np.sin(x) * x * x + x * y


@pytest.mark.parametrize("scalar", [np.float32, np.float64, float], ids=["float32", "float64", "float"])
def test_forward_gradient_of_a_numpy_scalar_keeps_its_type(scalar):
    """`zymo.gradient(Forward, f, np.float32(x))` gave a Python float where Reverse gives
    np.float32 (and np.float64 for np.float64): both modes give the argument's own type, with
    the same number, equal to the exact derivative and to central differences."""
    x, y = scalar(0.5), scalar(-1.25)
    gf = zymo.gradient(Forward, _sin_cube, x, y)
    gr = zymo.gradient(Reverse, _sin_cube, x, y)
    for a, b in zip(gf, gr):
        assert type(a) is type(b) is scalar
    exact = (np.cos(0.5) * 0.25 + 2 * 0.5 * np.sin(0.5) - 1.25, 0.5)
    fd = (fd_scalar(lambda t: _sin_cube(t, -1.25), 0.5), fd_scalar(lambda t: _sin_cube(0.5, t), -1.25))
    rtol = 1e-6 if scalar is np.float32 else 1e-13
    np.testing.assert_allclose(gf, exact, rtol=rtol)
    np.testing.assert_allclose(gf, gr, rtol=rtol)
    np.testing.assert_allclose(gf, fd, rtol=1e-6)
    # a constant beside it keeps None, an array beside it its own dtype
    a = np.array([1.0, 2.0], dtype=np.float32 if scalar is np.float32 else np.float64)
    g = zymo.gradient(Forward, lambda x, a, c: np.sum(a * x) * c, x, a, Const(scalar(3.0)))
    h = zymo.gradient(Reverse, lambda x, a, c: np.sum(a * x) * c, x, a, Const(scalar(3.0)))
    assert type(g[0]) is type(h[0]) is scalar and g[1].dtype == h[1].dtype == a.dtype and g[2] is h[2] is None
    assert g[0] == pytest.approx(9.0) and g[1].tolist() == pytest.approx([1.5, 1.5])


def test_jacobian_dtypes_agree_between_modes():
    """`jacobian(Forward, ...)` of a float result of a float32 array was float64 where Reverse
    gives float32 (x's shadow); of a float x, forward gave np.float64 where Reverse gives a float."""
    x = np.array([0.5, 1.5, -2.0], dtype=np.float32)

    def total(x):
        return np.sum(np.sin(x) * x)

    def each(x):
        return np.sin(x) * x
    for f, shape in ((total, (3,)), (each, (3, 3))):
        jf, jr = zymo.jacobian(Forward, f, x.copy()), zymo.jacobian(Reverse, f, x.copy())
        assert jf.dtype == jr.dtype == np.float32 and jf.shape == jr.shape == shape
        np.testing.assert_allclose(jf, jr, rtol=1e-6)
        d = np.sin(x.astype(np.float64)) + x * np.cos(x.astype(np.float64))
        np.testing.assert_allclose(jf, d if f is total else np.diag(d), rtol=1e-6, atol=1e-7)
    assert zymo.gradient_forward(total, x.copy()).dtype == np.float32
    for s in (np.float32(0.5), np.float64(0.5), 0.5):
        jf, jr = zymo.jacobian(Forward, each, s), zymo.jacobian(Reverse, each, s)
        assert type(jf) is type(jr) is float and jf == pytest.approx(jr, rel=1e-15)
        assert jf == pytest.approx(np.sin(0.5) + 0.5 * np.cos(0.5), rel=1e-7)
