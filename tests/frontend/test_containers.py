"""Lists, comprehensions, generators and dicts built inside the differentiated function
(`zymo/frontend/containers.py`): each construct in forward and reverse mode against central
differences and against the other mode (`check_grad`), a few under Numba, a few against autograd,
the refusals (file and line in the message), and a small property test over generated
programs."""
import functools
import importlib.util
import math
import sys

import numpy as np
import pytest
from helpers import autograd_grad, zymo_grad

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.testing import check_grad

X = np.array([0.3, 1.2, -0.7, 2.0, 0.9])


# -- 1. lists of static length (scalar-replaced) -----------------------------------------

def list_methods(x):
    a = [x[0], x[1] * x[2]]
    a.append(np.sin(x[0]))
    a += [x[2]]
    b = a.pop()
    a.insert(0, b * 2.0)
    a.extend((x[3], -x[4]))
    c = a.copy()
    c.reverse()
    return sum(a) + len(a) * max(a) + a[-1] * min(c) + c[0]


def list_items_in_runtime_loop(x):
    acc = [0.0, 1.0]  # constant length, contents carried through a loop of run-time length
    for i in range(x.shape[0]):
        acc[0] += x[i]
        acc[1] = acc[1] * (1.0 + 0.1 * x[i])
    return acc[0] * acc[1]


def _push(lst, v):
    lst.append(v * 2.0)


def list_through_helpers(x):
    out = [x[0]]
    _push(out, x[1])  # an inlined helper appends to the caller's list
    alias = out
    alias.append(x[2] ** 2)  # an alias sees the same list

    def add_square(v):
        out.append(v * v)

    add_square(x[3])
    return out[0] * out[1] + out[2] - out[3] + len(alias)


def list_in_branches(x):
    a = [x[0], x[1]]
    if x[2] > 0.0:
        a[0] = a[0] * 3.0
    else:
        a[0] = -a[0]
    a.append(x[3] if x[4] > 0.0 else x[2])
    return a[0] * a[1] + a[2]


def unrolled_appends(x):
    out = []
    for i in range(3):  # constant length: unrolled
        out.append(x[i] * x[i + 1])
    total = 0.0
    for v in out:  # iterating a static list: unrolled
        total = total + v * v
    for k, v in enumerate(out):
        total = total + k * v
    return total + np.sum(np.array(out) ** 3)


def list_per_branch(x):
    if x[0] > 0.0:  # <-
        a = [x[1], x[2]]
    else:
        a = [x[2], x[1]]
    return a[0] * 2.0


def arrays_in_lists(x):
    rows = []
    for k in range(3):
        rows.append(np.sin(x * (k + 1)))
    s = np.stack(rows)
    c = np.concatenate(rows)
    a = np.array(rows)
    return np.sum(s * a) + np.sum(c[::2]) + np.sum(rows[1] * rows[2])


def constant_index_lists(x):
    idx = [0, 2]
    y = x[np.array([0, 2, 4])]
    z = x[idx]
    m = np.zeros([2, x.shape[0]])
    m[0] = x
    m[1] = x * x
    r = x[:4].reshape([2, -1])
    return np.sum(y * y) + np.sum(z) * 2.0 + np.sum(m[1] * m[0]) + np.sum(r[1] * r[0])


def numpy_of_lists(x):
    a = np.array([[x[0], 1.0], [x[1], x[2]]])
    b = np.asarray([x[3], x[4], 2.0])
    return np.sum(a @ a) + np.sum([x[0], x[1]]) * np.mean(b) + np.dot([x[0], x[2], x[4]], b)


@pytest.mark.parametrize("f", [list_methods, list_items_in_runtime_loop, list_through_helpers, list_in_branches,
                               unrolled_appends, arrays_in_lists, constant_index_lists, numpy_of_lists])
def test_static_lists(f):
    check_grad(f, X.copy())


def test_static_list_signs():
    """Exact gradients: a zero or a wrong sign would fail."""
    def f(x):
        a = [x[0], -x[1]]
        a.append(3.0 * x[2])
        return sum(a) - a.pop(0) * 0.0

    (g,) = zymo.gradient(Reverse, f, X.copy())
    np.testing.assert_allclose(g, [1.0, -1.0, 3.0, 0.0, 0.0])


def test_returned_list_is_a_tuple():
    def f(x):
        return [x[0] * 2.0, x[1]]

    res = zymo.autodiff(zymo.ForwardWithPrimal, f, Duplicated, Duplicated(X.copy(), np.ones(5)))
    assert res[0] == (2.0, 1.0)
    assert res[1] == (2.0 * X[0], X[1])


# -- 2. lists appended in loops of run-time length ----------------------------------------

def append_idiom(x):
    out = []
    for i in range(x.shape[0]):
        out.append(x[i] ** 2)
    y = np.array(out)
    return np.sum(y * x) + out[1] + sum(out) + max(out) * len(out) + out[-1]


def append_time_steps(x):
    states = [x[0]]  # items before the loop, then one per step
    s = x[0]
    for t in range(x.shape[0] - 1):
        s = s + 0.1 * np.sin(s) * x[t + 1]
        states.append(s)
    traj = np.array(states)
    return np.sum(traj * traj) + states[2]


def append_over_rows(X, w):
    out = []
    for row in X:  # a loop over an array's rows
        out.append(np.dot(row, w))
    z = np.array(out)
    out[0] = out[0] * 2.0  # item assignment into the filled list
    return np.sum(np.tanh(z)) + out[0]


def append_strided_range(x):
    out = [1.0]
    for i in range(1, x.shape[0], 2):
        out.append(x[i] * x[i - 1])
    acc = 0.0
    for v in out:  # iterating a runtime list: a loop over its array
        acc = acc + v * v
    return acc + np.mean(out)


def conditional_append(x):
    out = []
    for i in range(x.shape[0]):
        if x[i] > 0.0:  # a run-time condition: stored at a carried count
            out.append(x[i] * x[i])
    return sum(out) + len(out) * out[-1]


def filtered_comprehension(x):
    ys = [v * 2.0 for v in x if v > 0.0]
    pairs = [x[i] * x[i - 1] for i in range(1, x.shape[0]) if x[i] < x[i - 1]]
    return np.sum(np.array(ys) ** 2) + ys[0] + sum(pairs) * 0.5


def recurrence(x):
    out = [1.0]
    for i in range(x.shape[0]):
        out.append(out[-1] * (1.0 + 0.1 * x[i]))  # reads the list it fills
    return np.sum(np.log(np.array(out)))


def two_lists_and_break(x):
    evens, odds = [], []
    for i in range(x.shape[0]):
        if i % 2 == 0:
            evens.append(x[i] ** 2)
        else:
            odds.append(np.sin(x[i]))
            odds.append(x[i] * 0.5)  # two appends in one iteration
        if x[i] > 1.9:
            break
    return sum(evens) * len(odds) + sum(odds)


def append_arrays(x, W):
    rows = []
    for i in range(x.shape[0]):
        rows.append(np.tanh(W * x[i]))
    s = np.stack(rows)
    return np.sum(s * s) + np.sum(rows[1] * rows[0]) + len(rows) + np.mean(rows) * 3.0


def append_states(X, w):
    """An RNN's states: a list of arrays, stacked, iterated and summed."""
    hs = [w * 1.0]
    h = w * 1.0
    for t in range(X.shape[0]):
        h = np.tanh(X[t] + h * 0.5)
        hs.append(h)
    H = np.array(hs)
    acc = 0.0
    for r in hs:
        acc = acc + np.sum(r * r)
    hs[0] = hs[0] * 2.0
    return np.sum(H[1:] * H[:-1]) + acc + np.sum(sum(hs))


def comprehension_of_rows(X, w):
    out = [np.sin(row) * w for row in X]
    return np.sum(np.stack(out) ** 2)


@pytest.mark.parametrize("f", [append_idiom, append_time_steps, append_strided_range, conditional_append,
                               filtered_comprehension, recurrence, two_lists_and_break])
def test_append_idiom(f):
    check_grad(f, X.copy())


@pytest.mark.parametrize("f", [append_arrays, append_states, comprehension_of_rows])
def test_append_arrays(f):
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(4), rng.standard_normal(3)] if f is append_arrays else \
        [rng.standard_normal((4, 3)), rng.standard_normal(3)]
    check_grad(f, *args)


def test_append_arrays_is_a_list_of_references():
    x, W = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0])
    src = zymo.generated_code(Reverse, append_arrays, Active, Duplicated(x, np.zeros(3)), Duplicated(W, np.zeros(2)))
    assert "rows = [like] * trips" in src and "drows[" in src
    rep = zymo.cache_report(Reverse, append_arrays, Active, Duplicated(x, np.zeros(3)), Duplicated(W, np.zeros(2)))
    assert "references to the appended arrays" in rep


@pytest.mark.slow
def test_append_arrays_numba(numba_always):
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(4), rng.standard_normal(3)]
    check_grad(append_arrays, *args)
    g_nb = zymo_grad(append_arrays, args, numba=True)
    g_py = zymo_grad(append_arrays, args, numba=False)
    for a, b in zip(g_nb, g_py):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_sum_of_array_generator():
    rng = np.random.default_rng(5)
    check_grad(sum_of_array_generator, rng.standard_normal((4, 3)), rng.standard_normal(2))


def test_append_over_rows():
    rng = np.random.default_rng(1)
    check_grad(append_over_rows, rng.standard_normal((4, 3)), rng.standard_normal(3))


def test_append_idiom_preallocates():
    """The list is one array allocated before the loop (no list, no growth), named after it."""
    src = zymo.generated_code(Reverse, append_idiom, Active, Duplicated(X.copy(), np.zeros(5)))
    assert "out = np.empty(" in src and ".append(" not in src
    rep = zymo.cache_report(Reverse, append_idiom, Active, Duplicated(X.copy(), np.zeros(5)))
    assert "appended to by the loop at line" in rep and "8 bytes per item" in rep


def test_append_idiom_against_autograd():
    import autograd.numpy as anp

    def ref(x):
        out = []
        for i in range(x.shape[0]):
            out.append(x[i] ** 2)
        y = anp.array(out)
        return anp.sum(y * x) + out[1] + sum(out) + max(out) * len(out) + out[-1]

    (g,) = zymo.gradient(Reverse, append_idiom, X.copy())
    np.testing.assert_allclose(g, autograd_grad(ref, X.copy()), rtol=1e-12)


# -- 3. comprehensions and generators ---------------------------------------------------

def comprehensions(x):
    pairs = [x[i] * x[j] for i in range(3) for j in range(i)]  # nested
    evens = [x[i] for i in range(5) if i % 2 == 0]  # a static condition
    zipped = [a * b for a, b in zip((x[0], x[1]), (x[2], x[3]))]
    en = [k * v for k, v in enumerate(evens)]
    nested = [[x[i] + j for j in range(2)] for i in range(2)]
    return sum(pairs) + sum(evens) ** 2 + zipped[1] - en[2] + nested[1][0] * nested[0][1]


def runtime_comprehension(x):
    s = [np.sin(v) * v for v in x]  # over an array: the append idiom
    t = [x[i] * x[i - 1] for i in range(1, x.shape[0])]
    return np.sum(np.array(s) * np.array(s)) + sum(t)


def generators(x):
    n = x.shape[0]
    s = sum(x[i] * x[i] for i in range(3))
    m = max(x[i] for i in range(n)) + min(v for v in (x[0], x[1], x[2]))
    t = tuple(np.exp(v) for v in (x[0], x[1]))
    a = np.array([v * 2.0 for v in (x[2], x[3])])
    r = functools.reduce(lambda p, q: p * q, (v + 1.0 for v in (x[0], x[1], x[3])))
    r0 = functools.reduce(lambda p, q: p - q, [x[4], x[0]], 1.0)
    flag = any(v > 0.0 for v in (x[0], x[1])) and all(i < 5 for i in range(3))
    return s + m + t[0] * t[1] + np.sum(a) + r + r0 + (1.0 if flag else -1.0) * x[2]


def generator_loops(x):
    """sum/any/all of generators over run-time iterables: accumulating loops, conditions allowed."""
    n = x.shape[0]
    pos = sum(v * v for v in x if v > 0.0)
    tri = sum(x[i] * x[j] for i in range(n) for j in range(i) if x[i] > x[j])
    big = any(v > 1.5 for v in x)
    small = all(abs(v) < 5.0 for v in x)
    return pos + tri * (2.0 if big else 1.0) + (x[0] if small else -x[0])


def sum_of_array_generator(X, w):
    """sum() of arrays over a run-time range: the sum of the list the generator makes."""
    s = sum(np.outer(r, w) * r[0] for r in X)
    t = sum(w * k for k in range(3))  # a constant range: unrolled, 0 + w + 2w
    return np.sum(s * s) + np.sum(t * w)


def sums_with_start(x):
    return sum([x[0], x[1]], x[2]) + sum((v for v in (x[3], x[4])), 0.5)


@pytest.mark.parametrize("f", [comprehensions, runtime_comprehension, generators, generator_loops, sums_with_start])
def test_comprehensions(f):
    check_grad(f, X.copy())


def test_comprehension_against_autograd():
    import autograd.numpy as anp

    def ref(x):
        pairs = [x[i] * x[j] for i in range(3) for j in range(i)]
        evens = [x[i] for i in range(5) if i % 2 == 0]
        zipped = [a * b for a, b in zip((x[0], x[1]), (x[2], x[3]))]
        en = [k * v for k, v in enumerate(evens)]
        nested = [[x[i] + j for j in range(2)] for i in range(2)]
        return sum(pairs) + sum(evens) ** 2 + zipped[1] - en[2] + nested[1][0] * nested[0][1]

    (g,) = zymo.gradient(Reverse, comprehensions, X.copy())
    np.testing.assert_allclose(g, autograd_grad(ref, X.copy()), rtol=1e-12)
    assert anp is not None


def test_comprehension_scope():
    def f(x):
        i = 2
        ys = [x[i] for i in range(2)]
        return ys[0] + ys[1] * x[i]  # the comprehension's i does not leak

    (g,) = zymo.gradient(Reverse, f, X.copy())
    np.testing.assert_allclose(g, [1.0, X[2], X[1], 0.0, 0.0])


# -- 4. dicts built inside ---------------------------------------------------------------

def dicts(x):
    d = {"a": x[0], "b": x[1]}
    d["c"] = d["a"] * d.get("b")
    d["a"] += x[2]
    e = d.get("missing", 2.0)
    d.setdefault("z", x[3])
    d.setdefault("a", 100.0)  # present: unchanged
    s = 0.0
    for k in d:  # iterating a dict's keys is the construct under test
        s = s + d[k]
    for k, v in d.items():
        if k != "b":
            s = s + v * v
    keys = len(d.keys()) + ("c" in d) - ("q" in d)
    popped = d.pop("z")
    return s + sum(d.values()) + e * x[4] + keys * popped


def _scale(cfg, v):
    cfg["w"] = cfg["w"] * v


def dict_comprehensions(x):
    names = ("p", "q", "r")
    d = {n: x[k] ** 2 for k, n in enumerate(names)}
    inv = {k: 1.0 / (v + 1.0) for k, v in d.items() if k != "q"}
    cfg = dict(w=x[3], b=1.0)  # the dict() call is under test
    cfg.update(inv)
    _scale(cfg, x[4])
    by_int = {i: x[i] * i for i in range(3)}
    return d["p"] * d["q"] + inv["r"] + cfg["w"] * cfg["p"] + by_int[2] - by_int[1]


@pytest.mark.parametrize("f", [dicts, dict_comprehensions])
def test_dicts(f):
    check_grad(f, X.copy())


def test_dict_against_autograd():
    def ref(x):
        d = {"a": x[0], "b": x[1]}
        d["c"] = d["a"] * d.get("b")
        return d["c"] * 3.0 - d["a"]

    def f(x):
        d = {"a": x[0], "b": x[1]}
        d["c"] = d["a"] * d.get("b")
        return d["c"] * 3.0 - d["a"]

    (g,) = zymo.gradient(Reverse, f, X.copy())
    np.testing.assert_allclose(g, autograd_grad(ref, X.copy()), rtol=1e-12)
    np.testing.assert_allclose(g, [3.0 * X[1] - 1.0, 3.0 * X[0], 0.0, 0.0, 0.0])


# -- adversarial: aliases, closures, loops carrying lists and dicts ---------------------------
def a1(x):
    acc = [0.0]
    def add(v):
        acc[0] = acc[0] + v * v
    for i in range(x.shape[0]):
        add(x[i])
    return acc[0]

def a2(x):
    d = {'s': 0.0, 'p': 1.0}
    for i in range(x.shape[0]):
        d['s'] += x[i] ** 2
        d['p'] = d['p'] * (1.0 + 0.1 * x[i])
    return d['s'] * d['p']

def a3(x):
    rows = [x.copy(), x * 2.0]
    rows[0] += x
    rows[0][1] = 5.0
    return np.sum(rows[0] * rows[1])

def a4(x):
    m = [[0.0] * 3 for _ in range(2)]
    m[1][2] = x[0]
    m[0][0] = x[1] * m[1][2]
    return sum(m[1]) + m[0][0] * 2.0

def a5(x):
    s = 0.0
    for i in range(x.shape[0]):
        t = [x[i], x[i] ** 2]
        s = s + t[0] * t[1]
    return s

def a6(x):
    s = 0.0
    for j in range(2):
        out = []
        for i in range(x.shape[0]):
            out.append(x[i] * (j + 1))
        s = s + sum(out) * out[0]
    return s

def a7(x):
    a = [x[0]]
    b = [a, a]
    b[0].append(x[1])
    return len(b[1]) * b[1][1] + b[0][0]

def a8(x, y):  # an array stored in a list is the same memory
    lst = [x]
    lst[0][0] = y[0] * 2.0
    return np.sum(x * y)

def a9(x):
    out = []
    for i in range(x.shape[0]):
        out.append(x[i] * x[i])
    s = 0.0
    for k in range(3):
        s = s + out[k] * k
    return s

def a10(x):
    n = x.shape[0]
    out = []
    for i in range(n):
        out.append(i * 2)
    arr = np.array(out)
    return np.sum(x * arr)

def a11(x):
    d = {}
    for i, v in enumerate((x[0], x[1], x[2])):
        d[i] = v * v
    keys = sorted(d.keys())
    return sum(d[k] for k in keys) + d.get(2) - d.pop(0)

def a12(x):
    out = []
    for i in range(x.shape[0]):
        out.append(x[i])
    out[1] = out[0] * 3.0
    t = out[1:3]
    t[0] = 0.0
    return np.sum(np.array(out)) + np.sum(np.array(t))

def a13(x):
    lst = [x[0], x[1], x[2]]
    i = 0
    s = 0.0
    while i < 2:
        s = s + lst[0] * x[i]
        i += 1
    return s + max(lst)


def a14(x):
    acc = [0.0, 1.0]  # carried by a while loop
    d = {"n": 0.0}
    i = 0
    while i < x.shape[0] and acc[1] < 100.0:
        acc[0] = acc[0] + x[i] * acc[1]
        acc[1] = acc[1] * 1.5
        d["n"] += x[i] ** 2
        i += 1
    return acc[0] + d["n"]


def a15(x):
    out = []

    def fill(n):  # a nested function fills the enclosing function's list
        for i in range(n):
            out.append(x[i] * 2.0)

    fill(3)  # a constant loop: unrolled, three static items
    fill(x.shape[0] - 3)  # a run-time trip count: preallocated after the three items it has
    return sum(out[:3]) * out[1] + out[-1]


ADVERSARIAL = [a1, a2, a3, a4, a5, a6, a7, a9, a10, a11, a12, a13, a14, a15]


@pytest.mark.parametrize("f", ADVERSARIAL, ids=[f.__name__ for f in ADVERSARIAL])
def test_adversarial(f):
    check_grad(f, X.copy())


def test_list_item_is_the_array():
    check_grad(a8, X.copy(), X[::-1].copy())


# -- Numba ------------------------------------------------------------------------------

@pytest.fixture
def numba_always(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    from zymo.config import set_numba

    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    set_numba("always")
    yield
    set_numba(None)


@pytest.mark.slow
@pytest.mark.parametrize("f", [list_methods, append_idiom, comprehensions, generator_loops, dicts, numpy_of_lists,
                               conditional_append, recurrence])
def test_numba(f, numba_always):
    check_grad(f, X.copy())
    g_nb = zymo_grad(f, [X.copy()], numba=True)
    g_py = zymo_grad(f, [X.copy()], numba=False)
    np.testing.assert_allclose(g_nb[0], g_py[0], rtol=1e-12)


# -- refusals ---------------------------------------------------------------------------

def runtime_index(x, n):
    a = [x[0], x[1]]
    return a[n]  # <-


def dynamic_key(x, n):
    d = {}
    d[n] = x[0]  # <-
    return d[0]


def append_after_fill(x):
    out = []
    for i in range(x.shape[0]):
        out.append(x[i])
    out.append(1.0)  # <-
    return sum(out)


def read_while_filling(x):
    out = [x[0]]
    b = out
    for i in range(x.shape[0]):
        out.append(b[-1] * x[i])  # <-
    return sum(out)


def while_growth(x):
    out = []
    i = 0
    while i < x.shape[0]:  # <-
        out.append(x[i])
        i += 1
    return sum(out)


def branch_lengths(x):
    a = [x[0]]
    if x[1] > 0.0:  # <-
        a.append(x[1])
    return sum(a)


def mixed_items_at_runtime(x):
    rows = [x[0]]
    for i in range(x.shape[0]):  # <-
        rows.append(x * x[i])
    return np.sum(np.stack(rows))


def append_in_nested_loop(x):
    out = []
    for i in range(x.shape[0]):  # <-
        for j in range(i):
            out.append(x[i] * x[j])
    return sum(out)


def conditional_array_append(x):
    rows = []
    for i in range(x.shape[0]):  # <-
        if x[i] > 0.0:
            rows.append(x * x[i])
    return np.sum(np.stack(rows))


def returns_dict(x):
    return {"a": x[0]}  # <-


def set_comprehension(x):
    return len({v for v in (x[0], x[1])}) * x[0]  # <-


REFUSED = [runtime_index, dynamic_key, append_after_fill,
           read_while_filling, while_growth, branch_lengths, list_per_branch, mixed_items_at_runtime,
           append_in_nested_loop,
           conditional_array_append, returns_dict,
           set_comprehension]


def _marked_line(f):
    import inspect

    lines, start = inspect.getsourcelines(f)
    return start + next(k for k, t in enumerate(lines) if "# <-" in t)


@pytest.mark.parametrize("f", REFUSED, ids=[f.__name__ for f in REFUSED])
def test_refusals(f):
    args = (Duplicated(X.copy(), np.zeros(5)),)
    if f in (runtime_index, dynamic_key):
        args += (zymo.Const(1),)
    with pytest.raises(zymo.ZymoSourceError) as info:
        zymo.autodiff(Reverse, f, Active, *args)
    msg = str(info.value)
    assert __file__.rstrip("c") in msg or "test_containers.py" in msg
    assert f"line {_marked_line(f)}" in msg, msg
    assert "Hint" in msg or "hint" in msg or f in (returns_dict, set_comprehension)


# -- property test ------------------------------------------------------------------------

def _program_source(ops: list) -> str:
    body = ["def prog(x):", "    lst = [x[0], x[1] * x[2]]", "    d = {'u': x[3]}"]
    for _k, (kind, a, b) in enumerate(ops):
        ea, eb = f"x[{a}]", f"x[{b}]"
        body += {
            "append": [f"    lst.append(np.sin({ea}) * {eb})"],
            "insert": [f"    lst.insert({a % 2}, {ea} - {eb})"],
            "pop": ["    if len(lst) > 1:", f"        lst.pop({-1 if a % 2 else 0})"],
            "iadd": [f"    lst += [{ea} * {ea}, {eb}]"],
            "setitem": [f"    lst[{-(a % 2)}] = lst[{-(a % 2)}] * {eb}"],
            "comp": [f"    lst = [v * {ea} for v in lst if {b % 3} >= 0]"],
            "gen": ["    lst.append(sum(v * v for v in lst) * 0.1)"],
            "dict": [f"    d['k{a}'] = d.get('k{a}', 1.0) * {eb}"],
            "dictcomp": [f"    d = {{k: v * {ea} for k, v in d.items()}}"],
            "loop": ["    acc = []", "    for i in range(x.shape[0]):", f"        acc.append(x[i] * {ea})",
                     "    lst.append(np.sum(np.array(acc)))"],
            "minmax": [f"    lst.append(max(lst) - min(v * {ea} for v in lst))"],
            "filter": [f"    lst.append(sum(v for v in x if v > {ea}))"],
            "rows": ["    m = [x * v for v in lst[:2]]", f"    lst[0] = lst[0] + np.sum(np.stack(m) * {eb})"],
            "condloop": ["    acc = [x[0]]", "    for i in range(x.shape[0]):", f"        if x[i] < {ea}:",
                         "            acc.append(x[i] * acc[-1])", "    lst.append(sum(acc) + len(acc))"],
            "filtercomp": [f"    lst.append(np.sum(np.array([v * {eb} for v in x if v > {ea}] + [1.0])))"],
        }[kind]
    body.append("    return sum(lst) + sum(d.values()) + np.sum(np.array(lst) ** 2) * 0.01")
    return "import numpy as np\n\n" + "\n".join(body) + "\n"


@pytest.mark.slow
def test_generated_programs(tmp_path):
    hyp = pytest.importorskip("hypothesis")
    st = hyp.strategies
    kinds = ["append", "insert", "pop", "iadd", "setitem", "comp", "gen", "dict", "dictcomp", "loop", "minmax",
             "filter", "rows", "condloop", "filtercomp"]
    counter = iter(range(10 ** 6))

    @hyp.settings(max_examples=25, deadline=None, derandomize=True)
    @hyp.given(st.lists(st.tuples(st.sampled_from(kinds), st.integers(0, 4), st.integers(0, 4)),
                        min_size=1, max_size=5))
    def run(ops):
        src = _program_source(ops)
        path = tmp_path / f"prog_{next(counter)}.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = mod
        spec.loader.exec_module(mod)
        try:
            check_grad(mod.prog, X.copy(), rtol=1e-4, atol=1e-6)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{src}") from None

    run()
    assert math.isfinite(1.0)


# -- split mode and second order ----------------------------------------------------------

@pytest.mark.parametrize("f", [append_arrays, append_idiom, dicts])
def test_split_mode(f):
    from zymo import ReverseSplitWithPrimal

    rng = np.random.default_rng(3)
    args = [rng.standard_normal(4), rng.standard_normal(3)] if f is append_arrays else [X.copy()]
    fwd, rev = zymo.autodiff_thunk(ReverseSplitWithPrimal, f, Active, *[Duplicated(a, np.zeros_like(a)) for a in args])
    shadows = [np.zeros_like(a) for a in args]
    ann = [Duplicated(a.copy(), s) for a, s in zip(args, shadows)]
    tape, primal = fwd(*ann)
    assert primal == pytest.approx(f(*[a.copy() for a in args]))
    rev(*ann, 1.0, tape)
    for s, g in zip(shadows, zymo.gradient(Reverse, f, *[a.copy() for a in args])):
        np.testing.assert_allclose(s, g, rtol=1e-12)


def test_hessian_of_lists_and_generators():
    def f(x):
        ys = [x[i] * x[i + 1] for i in range(3)]
        ys.append(sum(v * v for v in x))
        return np.sum(np.array(ys) ** 2)

    H = zymo.hessian(f, X.copy())
    eps = 1e-6
    cols = []
    for k in range(5):
        e = np.zeros(5)
        e[k] = eps
        (gp,) = zymo.gradient(Reverse, f, X + e)
        (gm,) = zymo.gradient(Reverse, f, X - e)
        cols.append((gp - gm) / (2 * eps))
    np.testing.assert_allclose(H, np.array(cols).T, rtol=1e-5, atol=1e-6)


def stored_generator(x):
    g = (x[i] for i in range(3))  # <-
    x[0] = 5.0  # Python reads x[0] when g is consumed, after this store
    return sum(g)


def pop_in_while_condition(x):
    lst = [x[0], x[1]]
    s = 0.0
    while lst.pop() > 0.0:  # <-
        s = s + 1.0
    return s


@pytest.mark.parametrize("f", [stored_generator, pop_in_while_condition])
def test_more_refusals(f):
    with pytest.raises(zymo.ZymoSourceError) as info:
        zymo.autodiff(Reverse, f, Active, Duplicated(X.copy(), np.zeros(5)))
    assert f"line {_marked_line(f)}" in str(info.value)


def list_changed_while_iterated(x):
    lst = [x[0], x[1], x[2]]
    s = 0.0
    for k, v in enumerate(lst):  # <-
        s = s + v
        if k == 0:
            lst[1] = 100.0  # Python's next iteration reads 100.0
    return s


def dict_values_updated_while_iterated(x):
    d = {"a": x[0], "b": x[1]}
    for k in d:  # changing values, not keys, while iterating a dict is fine
        d[k] = d[k] * x[2]
    return d["a"] + d["b"] * 2.0


def test_iterated_list_changes_are_refused():
    with pytest.raises(zymo.ZymoSourceError) as info:
        zymo.autodiff(Reverse, list_changed_while_iterated, Active, Duplicated(X.copy(), np.zeros(5)))
    assert f"line {_marked_line(list_changed_while_iterated)}" in str(info.value)
    check_grad(dict_values_updated_while_iterated, X.copy())


def test_batch_forward():
    from zymo import BatchDuplicated, Const, Forward

    rng = np.random.default_rng(0)
    x, W = rng.standard_normal(4), rng.standard_normal(3)
    t1, t2 = rng.standard_normal(4), rng.standard_normal(4)
    (both,) = zymo.autodiff(Forward, append_arrays, BatchDuplicated, BatchDuplicated(x.copy(), (t1, t2)), Const(W))
    for t, b in zip((t1, t2), both):
        (one,) = zymo.autodiff(Forward, append_arrays, Duplicated, Duplicated(x.copy(), t), Const(W))
        assert b == pytest.approx(one, rel=1e-12)


# -- joins of numbers -------------------------------------------------------------------
# NumPy reads a number given to np.stack/np.hstack/np.vstack as a 0-d array: np.stack of numbers
# is a 1-d array (was refused: "joins arrays of at least one dimension"). Each function is checked
# in both modes against central differences (check_grad), against JAX, and exactly where the
# gradient is known (a zero or a wrong sign fails).

def stack_numbers(x):
    a = x[0] * 2.0
    b = np.sin(x[1])
    return np.sum(np.stack([a, b]) ** 2)


def stack_numbers_axes(x):
    a = x[0] * 2.0
    b = np.sin(x[1])
    u = np.stack((a, b), axis=0)
    w = np.stack((b, a * x[2], 1.5), axis=-1)  # a constant among them
    return np.sum(u * np.array([1.0, -3.0])) + np.sum(w ** 3) + u[0] * w[1] - w[2] * x[3]


def hstack_vstack_numbers(x):
    h = np.hstack((x[2] * x[0], 2.0, np.cos(x[3])))
    v = np.vstack([x[4], x[0] * x[1]])  # a column: shape (2, 1)
    m = np.hstack((x[:2], x[3] ** 2))  # numbers and a 1-d array
    return np.sum(h ** 3) + np.sum(v * v.T) + np.sum(m * np.array([1.0, -2.0, 0.5])) + v[1, 0] * h[2]


def stack_numbers_in_loop(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        p = np.stack((x[i] * x[i + 1], -x[i]))
        s = s + np.sum(p * p) + p[1] * 0.5
    return s


_NUMBER_JOINS = [stack_numbers, stack_numbers_axes, hstack_vstack_numbers, stack_numbers_in_loop]


@pytest.mark.parametrize("f", _NUMBER_JOINS, ids=lambda f: f.__name__)
def test_joins_of_numbers(f):
    check_grad(f, X.copy())


@pytest.mark.parametrize("f", _NUMBER_JOINS, ids=lambda f: f.__name__)
def test_joins_of_numbers_against_jax(f):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import types

    import jax.numpy as jnp

    jf = types.FunctionType(f.__code__, {**f.__globals__, "np": jnp}, f.__name__)
    expected = np.asarray(jax.grad(jf)(X.copy()))
    for mode in (zymo.Reverse, zymo.Forward):
        np.testing.assert_allclose(zymo.gradient(mode, f, X.copy())[0], expected, rtol=1e-12, atol=1e-14)
    H = np.asarray(jax.hessian(jf)(X.copy()))  # second order: forward over the reverse program
    assert np.max(np.abs(H)) > 0.1
    np.testing.assert_allclose(zymo.hessian(f, X.copy()), H, rtol=1e-12, atol=1e-13)


def test_stack_of_numbers_exact_and_value():
    x = np.array([0.3, 0.7])
    expected = np.array([8.0 * x[0], 2.0 * np.sin(x[1]) * np.cos(x[1])])
    for mode in (zymo.Reverse, zymo.Forward):
        np.testing.assert_allclose(zymo.gradient(mode, stack_numbers, x.copy())[0], expected, rtol=1e-14)
    (g,), y = zymo.gradient(zymo.ReverseWithPrimal, stack_numbers, x.copy())
    assert y == pytest.approx(stack_numbers(x), rel=1e-15)


def test_stack_of_float32_numbers_keeps_float32():
    def f(x):
        s = np.stack((x[0] * x[1], x[1]))
        return np.sum(s * s)
    x = np.array([0.5, -1.5], dtype=np.float32)
    assert np.stack((x[0] * x[1], x[1])).dtype == np.float32
    (gr,), y = zymo.gradient(zymo.ReverseWithPrimal, f, x.copy())
    (gf,) = zymo.gradient(zymo.Forward, f, x.copy())
    assert gr.dtype == gf.dtype == np.float32 and np.asarray(y).dtype == np.float32
    np.testing.assert_allclose(gr, [2 * x[0] * x[1] ** 2, 2 * x[0] ** 2 * x[1] + 2 * x[1]], rtol=1e-6)
    np.testing.assert_allclose(gf, gr, rtol=1e-6)


def stack_numbers_axis_one(x):
    a = x[0] * 2.0
    return np.sum(np.stack((a, x[1]), axis=1))  # <-


def concatenate_numbers(x):
    return np.sum(np.concatenate((x[0], x[1])))  # <-


def stack_number_and_array(x):
    return np.sum(np.stack((x[0], x[1:3])))  # <-


def vstack_number_and_array(x):
    return np.sum(np.vstack((x[0], x[1:2])))  # <-


@pytest.mark.parametrize("f", [stack_numbers_axis_one, concatenate_numbers, stack_number_and_array,
                               vstack_number_and_array], ids=lambda f: f.__name__)
def test_joins_of_numbers_numpy_refuses(f):
    """What NumPy itself refuses (or zymo does not join) is refused at the user's line, with a hint."""
    if f is not vstack_number_and_array:
        with pytest.raises((ValueError, IndexError)):
            f(X.copy())  # NumPy raises too
    for mode in (zymo.Reverse, zymo.Forward):
        with pytest.raises(zymo.ZymoSourceError) as info:
            zymo.gradient(mode, f, X.copy())
        msg = str(info.value)
        assert "test_containers.py" in msg and f"line {_marked_line(f)}" in msg and "Hint" in msg, msg


@pytest.mark.parametrize("backend", [True, "kernels"], ids=["numba", "kernels"])
def test_joins_of_numbers_compiled(backend, tmp_path, monkeypatch):
    """numba=True and "kernels": the same gradients as the Python backend, in both modes."""
    pytest.importorskip("numba")
    import warnings

    monkeypatch.setenv("ZYMO_CACHE_DIR", str(tmp_path))
    for f in (stack_numbers_axes, stack_numbers_in_loop):
        for mode in (zymo.Reverse, zymo.Forward):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # compiled, not run as Python with a warning
                got = zymo.gradient(mode, f, X.copy(), numba=backend)[0]
            np.testing.assert_allclose(got, zymo.gradient(mode, f, X.copy(), numba=False)[0], rtol=1e-12)
