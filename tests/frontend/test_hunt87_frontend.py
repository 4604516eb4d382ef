"""Frontend cases once silently wrong (hunt 87): tuples passed where NumPy reads an array,
`out` passed by position or to array methods, list indices in `np.add.at` and subscripts, and
builtin `sum` with `start`. Each gradient is checked in Reverse and in Forward mode against
central differences (and so against each other), at inputs where it is clearly nonzero;
what zymo does not support is refused at the user's line."""
import functools

import numpy as np
import pytest

import zymo
from zymo import Forward, Reverse
from zymo.errors import ZymoError


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _fd(f, args, eps=1e-6):
    """Central differences of scalar `f` with respect to every float argument (arrays or floats)."""
    grads = []
    for k, a in enumerate(args):
        if isinstance(a, np.ndarray):
            g = np.zeros_like(a)
            for idx in np.ndindex(a.shape):
                hi, lo = _copies(args), _copies(args)
                hi[k][idx] += eps
                lo[k][idx] -= eps
                g[idx] = (f(*hi) - f(*lo)) / (2 * eps)
            grads.append(g)
        else:
            hi, lo = _copies(args), _copies(args)
            hi[k] += eps
            lo[k] -= eps
            grads.append((f(*hi) - f(*lo)) / (2 * eps))
    return grads


def check(f, *args, numba=False):
    """Reverse and Forward gradients of `f` equal central differences; the gradient is nonzero."""
    fd = _fd(f, args)
    assert any(np.any(np.abs(g) > 1e-3) for g in fd), "pick inputs with a nonzero gradient"
    for mode in (Reverse, Forward):
        got = zymo.gradient(mode, f, *_copies(args), numba=numba)
        assert len(got) == len(fd)
        for g, e in zip(got, fd):
            np.testing.assert_allclose(np.asarray(g, dtype=float), e, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{f.__name__} {mode}")


P = np.array([3.0, 4.0])
V = np.array([0.5, -1.2, 2.0])
A = np.array([0.5, -1.0, 2.0])
B = np.array([1.5, 0.25, -0.5])


# -- H1: a tuple of numbers or arrays where NumPy reads an array -----------------------------

def norm_tuple(p):
    return np.linalg.norm((p[0], p[1]))


def max_tuple(p):
    return np.max((p[0], 2.0 * p[1]))


def mean_tuple(p):
    return np.mean((p[0], p[1] ** 2))


def sin_tuple(p):
    return np.sum(np.sin((p[0], p[1]))) + np.prod((p[0], p[1], 2.0)) + np.var((p[0], p[1] ** 2))


def misc_tuple(p):
    t = (p[0], p[1] * 0.5)
    return (np.std(t) + np.sum(np.exp(t)) + np.sum(np.abs(t)) + np.min(t) + np.sum(np.clip(t, 0.0, 2.5))
            + np.sum(np.cumsum(t) ** 2) + np.sum(np.diff((p[0], p[1] ** 2, p[0] * p[1])) ** 2)
            + np.dot(t, (p[1], 1.0)) + np.sum(np.logaddexp(t, 1.0)) + np.sum(np.power(t, 2.0))
            + np.sum(np.copy(t) ** 3) + np.polyval((p[0], p[1], 1.0), 0.7)
            + np.interp(0.5, (0.0, 1.0), (p[0], p[1]))
            + np.sum(np.where((True, False), t, (p[1], p[0]))) + np.einsum("i,i", t, t))


def det_tuple_of_tuples(p):
    return np.linalg.det(((p[0], p[1]), (1.0, p[0] * p[1])))


def _pair(p):
    return p[0] * 2.0, p[1] - 1.0


def helper_tuple(p):
    return np.sum(np.square(_pair(p)))


def outer_tuple(p, v):
    return np.sum(np.outer((p[0], p[1]), v) ** 2)


def avg_arrays(a, b):
    return np.sum(np.mean((a, b), axis=0) ** 2)


def method_tuple(a, p):
    return a[:2].dot((p[0], p[1] ** 2))


@pytest.mark.parametrize("f", [norm_tuple, max_tuple, mean_tuple, sin_tuple, misc_tuple, det_tuple_of_tuples,
                               helper_tuple])
def test_tuple_of_numbers_into_numpy(f):
    check(f, P.copy())


def test_tuple_operands_of_arrays():
    check(outer_tuple, P.copy(), V.copy())
    check(avg_arrays, A.copy(), B.copy())
    check(method_tuple, A.copy(), P.copy())


def test_tuple_into_numpy_numba():
    def f(v):
        return np.mean((v[0], v[1] ** 2)) + np.sum((v[0], v[1] ** 2)) * np.max((v[0], v[1] ** 2))
    g, val = zymo.gradient(zymo.ReverseWithPrimal, f, V.copy(), numba=True)
    assert np.ndim(val) == 0 and np.isclose(val, f(V))
    np.testing.assert_allclose(g[0], _fd(f, [V.copy()])[0], rtol=1e-5, atol=1e-6)


def test_tuple_a_rule_cannot_read_is_refused():
    # a tuple of floats reaching a rule argument that is no array (a fill value here) is refused,
    # never a zero derivative
    def f(p):
        return np.sum(np.full((2, 2), (p[0], p[1])))
    try:
        g = zymo.gradient(Reverse, f, P.copy())[0]
    except ZymoError as e:
        assert "line" in str(e) or __file__ in str(e)
    else:
        np.testing.assert_allclose(g, _fd(f, [P.copy()])[0], rtol=1e-5, atol=1e-6)


def test_tuple_left_in_a_rule_argument_is_refused():
    # a keyword's tuple is not read as an array: refused at the user's line, never a zero derivative
    def f(p):
        return np.sum(np.clip(p, a_min=(p[0] * 0.5, p[1] * 0.5), a_max=5.0))
    with pytest.raises(ZymoError, match="tuple of numbers") as e:
        zymo.gradient(Reverse, f, P.copy())
    assert "test_hunt87_frontend.py" in str(e.value)


# -- H2/H3: `out` by position, and out= of array methods --------------------------------------

X = np.array([-1.0, 0.2, 0.9, 0.35])
U = np.array([0.3, -0.2])
M = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
BV = np.array([0.3, -0.2, 0.7])


def clip_pos_out(x):
    r = np.zeros(4)
    np.clip(x, -0.5, 0.5, r)
    return np.sum(r ** 2) + np.sum(x * r)


def clip_method_pos_out(x):
    x.clip(-0.5, 0.5, x)  # in place: the operand is read before it is overwritten
    return np.sum(x ** 3)


def clip_method_kw_out(x):
    x.clip(-0.5, 0.5, out=x)
    return np.sum(x ** 3)


def outer_pos_out(x, u):
    r = np.zeros((4, 2))
    np.outer(x, u, r)
    return np.sum(r ** 2)


def dot_method_out(a, b):
    r = np.zeros(2)
    a.dot(b, r)
    s = np.zeros(2)
    a.dot(b, out=s)
    return np.sum(r ** 2) + np.sum(s * r)


def sum_method_out(a):
    r = np.zeros(2)
    v = a.sum(axis=1, out=r)
    return np.sum(r ** 2) + np.sum(v)


def round_pos_out(x):
    y = x * 3.0
    np.round(x, 1, y)  # y is overwritten by a constant: its derivative is zero
    x.round(1, x)
    return np.sum(y ** 2) + np.sum(x ** 2) + y[0] * 0.0


def fft_pos_out(v):
    r = np.zeros(4, dtype=complex)
    np.fft.fft(v, None, -1, None, r)
    return np.sum(np.abs(r) ** 2)


@pytest.mark.parametrize("f,args", [(clip_pos_out, (X,)), (clip_method_pos_out, (X,)), (clip_method_kw_out, (X,)),
                                    (outer_pos_out, (X, U)), (dot_method_out, (M, BV)), (sum_method_out, (M,)),
                                    (fft_pos_out, (X,))])
def test_out_by_position_and_in_methods(f, args):
    check(f, *[np.array(a) for a in args])


def test_out_of_a_nondifferentiable_call():
    for mode in (Reverse, Forward):
        g = zymo.gradient(mode, round_pos_out, X.copy())[0]
        np.testing.assert_array_equal(g, np.zeros(4))


def test_out_by_position_numba():
    g = zymo.gradient(Reverse, clip_pos_out, X.copy(), numba=True)[0]
    np.testing.assert_allclose(g, _fd(clip_pos_out, [X.copy()])[0], rtol=1e-5, atol=1e-6)


def test_out_given_twice_or_before_other_positionals_is_refused():
    def f(x):
        r = np.zeros(4)
        np.clip(x, -0.5, 0.5, r, out=r)
        return np.sum(r)
    with pytest.raises(ZymoError, match="out"):
        zymo.gradient(Reverse, f, X.copy())


# -- H4: a list index is an index array, in np.add.at and in subscripts -------------------------

XM = np.arange(12.0).reshape(3, 4) / 10.0 - 0.3


def add_at_list(x, s):
    np.add.at(x, [0, 2, 2], s)  # rows 0 and 2 (twice), not the element x[0, 2]
    return np.sum(x ** 2)


def add_at_list_variable(x, s):
    rows = [2, 0]
    rows.append(2)
    np.add.at(x, rows, s * x[1])
    return np.sum(x ** 2)


def add_at_tuple(x, s):
    np.add.at(x, (0, 2), s)  # a tuple is one index per dimension: the element x[0, 2]
    return np.sum(x ** 2)


def list_subscripts(x, s):
    i, j = 0, 2
    y = x[[i, j]] * s  # rows 0 and 2
    x[[j, i]] = y[::-1] ** 2
    lst = [1, i]
    return np.sum(x ** 2) + np.sum(y) + np.sum(x[lst] * s)


@pytest.mark.parametrize("f", [add_at_list, add_at_list_variable, add_at_tuple, list_subscripts])
def test_list_index(f):
    check(f, XM.copy(), 0.5)


def test_add_at_list_numba():
    g = zymo.gradient(Reverse, add_at_list, XM.copy(), 0.5, numba=True)
    fd = _fd(add_at_list, [XM.copy(), 0.5])
    for a, e in zip(g, fd):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def test_add_at_list_of_floats_is_refused():
    def f(x, s):
        np.add.at(x, [0.0, 2.0], s)
        return np.sum(x)
    with pytest.raises(ZymoError, match="integers"):
        zymo.gradient(Reverse, f, XM.copy(), 0.5)


# -- H5: builtin sum with start --------------------------------------------------------------

def sum_start_kw(v, s):
    return sum(v, start=s) ** 2 + sum((v[0], s), start=v[1]) * s


def sum_start_pos(v, s):
    return sum(v, 2.0) ** 2 + sum([v[0] * s, v[2]], s) ** 2


def sum_start_runtime_list(v, s):
    sq = [x * x for x in v]  # a list filled in a loop of run-time length
    return sum(sq, s) * s + sum((x * s for x in v), start=s * s)


def sum_start_rows(m, s):
    return np.sum(sum(m, start=s * np.ones(4)) ** 2)


def sum_start_partial(v, s):
    total = functools.partial(sum, start=s)
    return total(v) ** 2


@pytest.mark.parametrize("f", [sum_start_kw, sum_start_pos, sum_start_runtime_list, sum_start_partial])
def test_builtin_sum_start(f):
    check(f, V.copy(), 3.0)


def test_builtin_sum_start_of_rows():
    check(sum_start_rows, XM.copy(), 0.7)


def test_builtin_sum_start_numba():
    g, val = zymo.gradient(zymo.ReverseWithPrimal, sum_start_kw, V.copy(), 3.0, numba=True)
    assert np.isclose(val, sum_start_kw(V, 3.0))
    for a, e in zip(g, _fd(sum_start_kw, [V.copy(), 3.0])):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def flatten_c(m):
    return np.sum(m.flatten("C") * np.arange(1.0, 13.0) ** 0.5) + np.sum(m.T.flatten(order="C") ** 3)


def test_flatten_with_order_c():
    check(flatten_c, XM.copy())


def flatten_f(m):
    return np.sum(m.flatten("F") * np.arange(1.0, 13.0))


def test_flatten_in_another_order_is_refused_at_the_users_line():
    with pytest.raises(ZymoError, match="C order only") as info:
        zymo.gradient(Reverse, flatten_f, XM.copy())
    assert "test_hunt87_frontend.py" in str(info.value)
