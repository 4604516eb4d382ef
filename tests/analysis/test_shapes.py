"""analysis.shapes on its own: which arrays keep one shape every time their definition runs
(`FixedShapes.fixed`), the fact reverse mode uses to stack a loop's arrays in one buffer.

Each function is lowered with `zymo.ir`; arrays are found by their op. A case fails when a
shape that can change is called fixed (a stacked cache that does not fit) or when a fixed one
is not (a list where a buffer would do).
"""
import numpy as np

import zymo
from zymo.analysis.shapes import FixedShapes
from zymo.ir.core import walk


def shapes(f, *args):
    fn = zymo.ir(f, *args)
    return fn, FixedShapes(fn)


def results(fn, kind, key=None):
    return [op.results[0] for op in walk(fn.body) if op.kind == kind and (key is None or op.attrs.get("key") == key)]


def carried(fn):
    """The arrays a loop carries, as its body sees them (block arguments; the loop's results
    are defined once, after it), by the name of their initial value."""
    (loop,) = [op for op in walk(fn.body) if op.kind == "for"]
    return {init.hint: a for init, a in zip(loop.args[3:], loop.regions[0].args[1:])}


def outside(x, n):
    return np.sum(np.sin(x[:n]))


def test_arrays_defined_outside_every_loop_are_fixed():
    fn, fs = shapes(outside, np.ones(4), 2)
    assert all(fs.fixed(v) for v in results(fn, "getitem") + results(fn, "prim", "numpy.sin"))
    assert all(fs.fixed(p) for p in fn.params if p.hint == "x")


def slices(x, n, m):
    s = 0.0
    for i in range(n):
        a = x[1:m]           # bounds defined outside the loop
        b = x[: m - 1]       # integer arithmetic on them
        c = x[:i]            # a bound that changes every iteration
        d = x[i + 1:]
        s += np.sum(a) + np.sum(b) + np.sum(c) + np.sum(d)
    return s


def test_a_slice_is_fixed_when_its_bounds_are_loop_invariant():
    fn, fs = shapes(slices, np.ones(6), 3, 4)
    a, b, c, d = results(fn, "getitem")
    assert fs.fixed(a) and fs.fixed(b)
    assert not fs.fixed(c) and not fs.fixed(d)


def rows(A, n):
    s = 0.0
    for i in range(n):
        r = A[i]             # an integer index picks a row, whatever its value
        s += np.sum(np.exp(r) * 2.0)
    return s


def test_a_row_picked_by_the_loop_variable_and_elementwise_ops_on_it_are_fixed():
    fn, fs = shapes(rows, np.ones((3, 4)), 3)
    (r,) = results(fn, "getitem")
    assert fs.fixed(r)
    assert fs.fixed(results(fn, "prim", "numpy.exp")[0])
    assert fs.fixed(results(fn, "prim", "mul")[0])


def gathers(x, idx, n):
    s = 0.0
    for _ in range(n):
        s += np.sum(x[idx])
    return s


def test_an_index_by_an_array_is_never_fixed():
    fn, fs = shapes(gathers, np.ones(4), np.array([0, 2]), 2)
    (g,) = results(fn, "getitem")
    assert not fs.fixed(g)


def repeats(x, counts, n):
    s = 0.0
    for _ in range(n):
        s += np.sum(np.repeat(x, counts)) + np.sum(np.outer(x, x))
    return s


def test_a_data_shaped_rule_is_not_fixed():
    """`np.repeat(x, counts)`: the size is the sum of `counts`; `np.outer(x, x)` only `x`'s size."""
    fn, fs = shapes(repeats, np.ones(3), np.array([1, 2, 0]), 2)
    assert not fs.fixed(results(fn, "prim", "numpy.repeat")[0])
    assert fs.fixed(results(fn, "prim", "numpy.outer")[0])


def elementwise_cycle(h0, n):
    h = h0
    for _ in range(n):
        h = np.tanh(h) * 0.5
    return np.sum(h)


def test_an_elementwise_update_of_a_carried_array_is_fixed():
    fn, fs = shapes(elementwise_cycle, np.ones(3), 2)
    h = carried(fn)["h0"]
    assert fs.fixed(h)
    assert fs.fixed(results(fn, "prim", "numpy.tanh")[0])


def shrinking(h0, n):
    h = h0
    for _ in range(n):
        h = np.sin(h[1:] * h[:-1])
    return np.sum(h)


def test_a_carried_array_that_shrinks_is_not_fixed():
    fn, fs = shapes(shrinking, np.ones(8), 2)
    assert not fs.fixed(carried(fn)["h0"])
    assert not any(fs.fixed(v) for v in results(fn, "getitem"))
    assert not fs.fixed(results(fn, "prim", "numpy.sin")[0])


def growing(x, y, n):
    h = x
    for _ in range(n):
        h = np.concatenate((h, y))
    return np.sum(h)


def test_a_carried_array_that_grows_is_not_fixed():
    fn, fs = shapes(growing, np.ones(2), np.ones(1), 3)
    assert not fs.fixed(carried(fn)["x"])
    assert not fs.fixed(results(fn, "prim")[0])             # the concatenation (`zymo.concat2`)


def product_cycle(W, h0, n):
    h = h0
    for _ in range(n):
        h = np.tanh(W @ h)
    return np.sum(h)


def test_a_matrix_product_around_a_loop_keeps_its_shape():
    """`W @ h` fed back into `h`: a product that changed the shape would fail at the next
    iteration, so it is fixed on the cycle."""
    fn, fs = shapes(product_cycle, np.ones((3, 3)), np.ones(3), 2)
    assert fs.fixed(carried(fn)["h0"])
    assert fs.fixed(results(fn, "prim", "matmul")[0])


def outer_cycle(h0, n):
    h = h0
    for _ in range(n):
        h = np.outer(h, h)[0]
    return np.sum(h)


def test_other_rules_on_a_loop_cycle_are_not_fixed():
    fn, fs = shapes(outer_cycle, np.ones(3), 2)
    assert not fs.fixed(results(fn, "prim", "numpy.outer")[0])


def reads_cycle(h0, n):
    h = h0
    s = 0.0
    for _ in range(n):
        t = h[1:]            # reads the carried array, never fed back
        s += np.sum(t)
        h = np.sin(h)
    return s + np.sum(h)


def test_a_value_that_only_reads_a_loop_cycle_follows_the_ordinary_rules():
    fn, fs = shapes(reads_cycle, np.ones(4), 2)
    (t,) = results(fn, "getitem")
    assert fs.fixed(t)
    assert fs.fixed(carried(fn)["h0"])


def branch(x, n, flag):
    s = 0.0
    for i in range(n):
        if flag:
            y = np.sin(x)
        else:
            y = x[:i]
        s += np.sum(y)
    return s


def branch_same(x, n, flag):
    s = 0.0
    for _ in range(n):
        if flag:
            y = np.sin(x)
        else:
            y = np.cos(x)
        s += np.sum(y)
    return s


def test_an_if_result_is_fixed_when_every_branch_is():
    fn, fs = shapes(branch_same, np.ones(3), 2, True)
    (r,) = [op.results[0] for op in walk(fn.body) if op.kind == "if"]
    assert fs.fixed(r)
    fn, fs = shapes(branch, np.ones(3), 2, True)
    (r,) = [op.results[0] for op in walk(fn.body) if op.kind == "if"]
    assert not fs.fixed(r)
